"""Time windows: quota overrides on a schedule, applied and reverted at each edge as a journalled
configuration change (issue 34; docs/windows.md).

:func:`edges` is pure: from the configuration text and an instant it returns the text with every
window that should open or close at that instant opened or closed (``active`` and ``saved`` written
into the window, its overrides into the queue and its budget), or None when nothing changes.
:func:`tick` applies it to a scheduler through ``update_config`` — validated, all-or-nothing and
journalled like any configuration change, so a replay holds exactly the same configuration at every
point without ever reading a clock.
"""

from quotaplane.windows.driver import (
    add_window,
    check_opened,
    edges,
    opened_problems,
    remove_window,
    tick,
    window_states,
)

__all__ = ["add_window", "check_opened", "edges", "opened_problems", "remove_window", "tick", "window_states"]
