"""Issue 14: journal replay fuzzed with corrupted events.

A history touching every kind of event (``tests/journal/journal_scenario.py``) is journalled, then one
to three of its events are damaged at random — a field removed, a value of the wrong type, a negative
or huge amount, a name that does not exist, an unknown type, the event dropped or duplicated. A
restore either rebuilds a state or refuses with :class:`JournalReplayError` (or :class:`JournalError`)
whose message names the stream and the event's number; it never fails with anything else (a bare
``KeyError``, ``TypeError``, ``AttributeError`` …) and never hangs.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import quotaplane as qp
from quotaplane.errors import JournalReplayError
from quotaplane.journal import JournalError, MemoryJournal
from tests.journal.journal_scenario import events_of, run
from tests.scenarios.world import config

_HISTORY: dict[str, list[list[Any]]] = {}


def _history() -> dict[str, list[list[Any]]]:
    if not _HISTORY:
        s = run(None)
        try:
            _HISTORY.update(events_of(s))
        finally:
            s.close(snapshot=False)
    return _HISTORY


_ODD_VALUES = st.sampled_from([None, -1, -(2**63), 2**64, 1.5, "x", "", [], {}, True, {"vcore": -5},
                               {"vcore": "lots"}, {"": 1}, "ghost", [["a"]]])


@st.composite
def _damage(draw: st.DrawFn, events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    out = copy.deepcopy(events)
    index = draw(st.integers(0, len(out) - 1))
    kind = draw(st.sampled_from(["drop_field", "set_field", "retype", "drop_event", "duplicate",
                                 "nested_amount"]))
    ev = out[index]
    fields = sorted(k for k in ev if k != "type")
    if kind == "drop_field" and fields:
        del ev[draw(st.sampled_from(fields))]
    elif kind == "set_field" and fields:
        ev[draw(st.sampled_from(fields))] = draw(_ODD_VALUES)
    elif kind == "retype":
        ev["type"] = draw(st.sampled_from(["allocated", "released", "nonsense", "app_removed", "ask_added",
                                           "replaced", "node_removed", "config"]))
    elif kind == "drop_event":
        del out[index]
    elif kind == "duplicate":
        out.insert(index, copy.deepcopy(ev))
    elif kind == "nested_amount":
        for key in ("resource", "capacity"):
            if isinstance(ev.get(key), dict) and ev[key]:
                name = sorted(ev[key])[0]
                ev[key][name] = draw(_ODD_VALUES)
    return out, index


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_damaged_journal_is_replayed_or_refused_by_name(data: st.DataObject) -> None:
    history = _history()
    default = [ev for _seq, ev in history["default"]]
    damaged = default
    for _ in range(data.draw(st.integers(1, 3))):
        if not damaged:
            break
        damaged, _where = data.draw(_damage(damaged))
    j = MemoryJournal()
    for _seq, ev in history["scheduler"]:
        j.append("scheduler", [ev])
    for ev in damaged:
        j.append("default", [ev])
    try:
        s = qp.Scheduler.from_yaml(config(revoke_delay=5), store=j)
    except JournalReplayError as exc:
        message = str(exc)
        assert "#" in message or "config" in message, message
        assert not message.startswith(("'", '"')), message     # not a bare KeyError's text
    except JournalError as exc:         # a refusal by the store itself: it names the stream
        assert "default" in str(exc) or "scheduler" in str(exc), str(exc)
    else:
        s.dump_state()          # whatever was rebuilt can be described
        s.close(snapshot=False)
