"""A window's edges edit the configuration text in place: opening, closing, adding and removing a
window change only the lines they must, in the file's own indentation, and open-then-close or
add-then-remove gives back the text byte for byte (docs/windows.md: comments and order survive) —
found by a new user's tryout, where one window made ``config diff`` 294 lines and re-indented the
whole file."""

from __future__ import annotations

import difflib
import io
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from quotaplane.windows.driver import add_window, edges, remove_window

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: Saturday 2026-12-05 21:00 UTC: both windows of budgets-and-windows.yaml are open
SAT = datetime(2026, 12, 5, 21, tzinfo=UTC).timestamp()
#: Monday 2026-12-07 12:00 UTC: both are closed again
MON = datetime(2026, 12, 7, 12, tzinfo=UTC).timestamp()
ONE_OFF = {"name": "audit", "queue": "", "from": "2026-12-01T00:00", "to": "2026-12-02T00:00",
           "max": {"vcore": 8}}
DURING = datetime(2026, 12, 1, 12, tzinfo=UTC).timestamp()    # noon: the examples' night window is shut
AFTER = datetime(2026, 12, 3, 12, tzinfo=UTC).timestamp()


def _diff(a: str, b: str) -> list[str]:
    """The changed lines (``+``/``-``, headers left out) of a unified diff from ``a`` to ``b``."""
    return [line for line in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


@pytest.mark.parametrize(("name", "queue"), [("queues.yaml", "root.research"),
                                             ("budgets-and-windows.yaml", "root.research"),
                                             ("config-reference.yaml", "root.engineering.team-a")])
def test_adding_opening_closing_and_removing_a_window_gives_back_the_text_byte_for_byte(
        name: str, queue: str) -> None:
    text = (EXAMPLES / name).read_text()
    added = add_window(text, "default", {**ONE_OFF, "queue": queue})
    added_lines = _diff(text, added)
    assert all(line.startswith("+") for line in added_lines), added_lines   # nothing else moves
    assert len(added_lines) <= 9, added_lines
    opened, _ = edges(added, DURING) or ("", [])
    opening = _diff(added, opened)
    # the window's active and saved, and its queue's max: a handful of lines, not the file
    assert 0 < len(opening) <= 12, opening
    closed, _ = edges(opened, AFTER) or ("", [])
    assert closed == added
    assert remove_window(added, "default", "audit") == text
    assert remove_window(opened, "default", "audit") == text                 # closed on the way out


def test_the_examples_cron_windows_open_and_close_in_place() -> None:
    text = (EXAMPLES / "budgets-and-windows.yaml").read_text()
    opened, what = edges(text, SAT) or ("", [])
    assert len(what) == 2, what
    changed = _diff(text, opened)
    # two windows: active + saved (with what they replace) each, and the values they override
    assert 0 < len(changed) <= 24, changed
    assert not any("name: default" in line or "kind: ElasticQuota" in line for line in changed), changed
    closed, what = edges(opened, MON) or ("", [])
    assert len(what) == 2 and closed == text


FOUR_SPACES = """
# written four spaces in, dashes at the key's column
partitions:
-   name: default
    queues:
    -   name: root
        submitacl: '*'
        queues:
        -   name: research       # no resources: the window's opening adds them
    windows:
    -   name: audit
        queue: root.research
        from: "2026-12-01T00:00"
        to: "2026-12-02T00:00"
        max:
            vcore: 8
            memory: 32Gi
"""


def test_a_file_in_another_indentation_keeps_it_and_a_queue_without_resources_gets_none_back() -> None:
    opened, _ = edges(FOUR_SPACES, DURING) or ("", [])
    assert "        -   name: research       # no resources: the window's opening adds them\n" \
           "            resources:\n                max:\n                    vcore: 8\n" in opened, opened
    assert len(_diff(FOUR_SPACES, opened)) <= 12
    closed, _ = edges(opened, AFTER) or ("", [])
    assert closed == FOUR_SPACES


@settings(max_examples=40, deadline=None)
@given(mapping=st.integers(2, 4), offset=st.integers(0, 4), flow=st.booleans(), had_max=st.booleans())
def test_any_indentation_survives_an_open_and_a_close(mapping: int, offset: int, flow: bool,
                                                        had_max: bool) -> None:
    """Property: whatever indentation a file is written in (keys 2–4 columns in, dashes 0–4), and
    whether its values are on one line or not, opening a window then closing it gives the text back,
    and opening changes no line but the window's and its queue's."""
    offset = min(offset, mapping)
    y = YAML(typ="rt")
    y.indent(mapping=mapping, sequence=offset + 2, offset=offset)
    y.default_flow_style = None if flow else False
    research: dict[str, object] = {"name": "research"}
    if had_max:
        research["resources"] = {"max": {"vcore": 10, "memory": "40Gi"}}
    data = {"partitions": [{"name": "default",
                            "queues": [{"name": "root", "submitacl": "*", "queues": [research]}],
                            "windows": [{**ONE_OFF, "queue": "root.research"}]}]}
    buf = io.StringIO()
    y.dump(data, buf)
    text = buf.getvalue()
    opened, _ = edges(text, DURING) or ("", [])
    assert 0 < len(_diff(text, opened)) <= 12, _diff(text, opened)
    closed, _ = edges(opened, AFTER) or ("", [])
    assert closed == text, (text, closed)
