"""Keep CPython's full garbage collections short in a serving process (issue 39).

A full (generation 2) collection walks every live container object, and a partition holding 100,000
waiting asks holds millions of them: each full collection stalls the whole process (every request,
the timeouts loop) for longer and longer as waiting work grows, although none of it is garbage. After
a recovery or a rebuild the state is long-lived by construction, so :func:`settle` collects once and
then moves every survivor to the interpreter's permanent generation (:func:`gc.freeze`): later
collections skip it. Objects frozen are still freed by reference counting when they die; only a
reference cycle among frozen objects would outlive them — a rebuild, which drops a whole state,
therefore unfreezes and collects first (``replaced=True``). While the rebuild runs, the old state is
still referenced (by the failed write, its exception, a takeover's caller): freezing then would keep
it for ever. So a rebuild only asks for it (:func:`settle_later`), and the partition's next timer tick
does it (:func:`settle_pending`, from ``check_timeouts``), once the failed write is gone.

A library must not change the collection of the process that embeds it: nothing happens until the
process says it serves (:func:`enable`, called by ``quotaplane serve``). The one exception is
:func:`paused`, which only defers collections while a restore builds a state and then leaves the
collector as it found it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["enable", "enabled", "paused", "settle", "settle_later", "settle_pending"]

_state = {"enabled": False, "pending": False, "replaced": False}


def enable(on: bool = True) -> None:
    """This process serves a partition: :func:`settle` freezes what survives (off again with False)."""
    _state["enabled"] = on
    _state["pending"] = _state["replaced"] = False


def enabled() -> bool:
    """True when :func:`enable` was called (the process serves)."""
    return _state["enabled"]


def settle(*, replaced: bool = False) -> None:
    """The live objects now are long-lived (after a recovery, a rebuild or a configuration applied):
    collect once and freeze the survivors, so that no later full collection walks them again.

    ``replaced``: a state was replaced (a rebuild) — what was frozen of the old one is collected
    first. No-op unless :func:`enable` was called."""
    if not _state["enabled"]:
        return
    if replaced:
        gc.unfreeze()
    gc.collect()
    gc.freeze()


def settle_later(*, replaced: bool = False) -> None:
    """Ask for :func:`settle` at the next :func:`settle_pending` (a state is being replaced and the old
    one is still referenced now). No-op unless :func:`enable` was called."""
    if not _state["enabled"]:
        return
    _state["pending"] = True
    _state["replaced"] = _state["replaced"] or replaced


def settle_pending() -> bool:
    """Run the :func:`settle` asked for by :func:`settle_later`, if any; True when it ran."""
    if not _state["pending"]:
        return False
    replaced = _state["replaced"]
    _state["pending"] = _state["replaced"] = False
    settle(replaced=replaced)
    return True


@contextmanager
def paused(*, long_lived: bool = False) -> Iterator[None]:
    """No automatic collection inside (the collector is left as it was found afterwards).

    A restore creates millions of container objects that all survive: every collection it triggers
    walks the ones made so far and frees nothing, and at 25,000 waiting asks those collections were
    half of a snapshot restore's CPU (issue 38). What a restore drops dies by reference counting; a
    cycle among it waits for the next collection after.

    ``long_lived``: what exists when it ends is long-lived (a restore's state), so it is counted
    among the oldest generation at once (:func:`gc.freeze` then :func:`gc.unfreeze`: a move of the
    lists, no walk) instead of being walked by the youngest generation's collection at the first
    allocation after, then by the middle one's and then by a full one — at 500,000 waiting asks the
    first of those walks alone was ~2.5 s of the restart's CPU. Nothing is frozen afterwards: the
    next full collection walks it, and collects any cycle among it, as before. Skipped when the
    process froze objects itself (unfreezing would thaw them)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if long_lived and gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if was:
            gc.enable()
