"""The journal format does not drift: a journal written by the code of November 2026 replays into the
same state with today's code, its snapshot rebuilds the same state, and today's producers write the
same events for the same history (``journal_scenario.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import quotaplane as qp
from quotaplane.journal import canonical_json
from quotaplane.journal.memory import MemoryJournal
from tests.journal.journal_scenario import RELOADED, events_of, run
from tests.scenarios.world import config

FIXTURE = Path(__file__).parent / "fixtures" / "journal_v1.json"


def _fixture() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def _journal_from(events: dict[str, list[list[Any]]]) -> MemoryJournal:
    j = MemoryJournal()
    for stream in ("scheduler", *sorted(s for s in events if s != "scheduler")):
        for _seq, ev in events[stream]:
            j.append(stream, [ev])
    return j


def test_the_fixture_history_covers_every_event_type() -> None:
    fx = _fixture()
    types = {ev["type"] for pairs in fx["events"].values() for _, ev in pairs}
    types |= {ev["type"] for ev in fx["snapshot"][1]["rebuild"]}
    assert types == {"config", "node_added", "node_removed", "app_added", "app_removed", "allocated",
                     "released", "replaced", "timeouts", "ask_added", "ask_removed", "count_in",
                     "app_restore"}


def _todays_state() -> str:
    """The state today's code reaches through the fixture's history (the fixture's recorded ``state``
    predates allocation start times and waiting asks as elastic demand: since then an old journal must
    mean what the same history means today)."""
    s = run(None)
    try:
        return json.dumps(s.dump_state(), sort_keys=True)
    finally:
        s.close(snapshot=False)


def test_an_old_journal_replays_into_the_recorded_state() -> None:
    fx = _fixture()
    s = qp.Scheduler.from_yaml(config(revoke_delay=5), store=_journal_from(fx["events"]))
    try:
        assert s.restored_from == {"default": "replay"}
        assert json.dumps(s.dump_state(), sort_keys=True) == _todays_state()
    finally:
        s.close(snapshot=False)


def test_an_old_snapshot_rebuilds_the_recorded_state() -> None:
    fx = _fixture()
    j = _journal_from(fx["events"])
    seq, snap = fx["snapshot"]
    j.save_snapshot("default", seq, snap)
    s = qp.Scheduler.from_yaml(config(revoke_delay=5), store=j)
    try:
        # that snapshot lacks the elastic over-use monitor (added to rebuilds later): its rebuild does
        # not match its dump, so the restore falls back to the full replay — same state either way
        assert s.restored_from == {"default": "replay"}
        assert json.dumps(s.dump_state(), sort_keys=True) == _todays_state()
    finally:
        s.close(snapshot=False)


def _as_of_v1(events: list[list[Any]]) -> list[str]:
    """Today's events as the November 2026 code wrote them: since then a ``released`` event names its
    application, ``noted`` events follow the changes (the event stream) and a configuration given at
    a start carries the digest of its text (``start``, issue 14 #5), and every event carries the time
    it happened (issue 29: node and bind events, and a config marker or a node removal that released
    nothing, had no ``t``; this history has neither kind that did); nothing else differs."""
    out: list[str] = []
    for _seq, ev in events:
        if ev["type"] == "noted":
            continue
        if ev["type"] in ("node_added", "node_updated", "node_removed", "bound") or \
                (ev["type"] == "config" and "seq" in ev):
            ev = {k: v for k, v in ev.items() if k != "t"}
        if ev["type"] == "released":
            ev = {k: v for k, v in ev.items() if k != "app"}
        if ev["type"] == "config" and "text" in ev:
            ev = {k: v for k, v in ev.items() if k != "start"}
        out.append(canonical_json(ev))
    return out


def test_todays_code_writes_the_same_events_and_snapshot() -> None:
    fx = _fixture()
    s = run(None)
    try:
        got = events_of(s)
        assert {k: _as_of_v1(v) for k, v in got.items()} == \
            {k: [canonical_json(e) for _q, e in v] for k, v in fx["events"].items()}
        s.partition("default").take_snapshot()
        seq, snap = s.journal.load_snapshot("default")
        seq = len(_as_of_v1([[q, e] for q, e in got["default"] if q <= seq]))
        snap = json.loads(canonical_json(snap))
        # since then a rebuild also carries the elastic monitor's clock (policy_memo), nothing else
        memos = [ev for ev in snap["rebuild"] if ev["type"] == "policy_memo"]
        assert [m["policy"] for m in memos] == ["elasticquotas"]
        snap["rebuild"] = [ev for ev in snap["rebuild"] if ev["type"] != "policy_memo"]
        # since issue 13 a rebuild's ask_added also carries the ask's reservation state (the places
        # that held it back, how often it was overtaken); a live ask_added never does
        asks = [ev for ev in snap["rebuild"] if ev["type"] == "ask_added"]
        assert asks and all("places" in ev for ev in asks)
        assert all("places" not in ev and "overtaken" not in ev
                   for pairs in got.values() for _q, ev in pairs if ev["type"] == "ask_added")
        for ev in asks:
            ev.pop("places")
            ev.pop("overtaken", None)
        # since issue 15 a rebuild's app_restore also carries the application's state log
        restores = [ev for ev in snap["rebuild"] if ev["type"] == "app_restore"]
        assert restores and all("state_log" in ev for ev in restores)
        for ev in restores:
            ev.pop("state_log")
            ev.pop("started", None)
        # since issue 30 it also carries the most the application ever held (maxUsedResource)
        assert all("max_used" in ev for ev in restores)
        for ev in restores:
            ev.pop("max_used")
        # the dump is compared by the replay tests (it shows today's state); the rebuild is the format
        old_seq, old = fx["snapshot"]
        assert [seq, snap["config_seq"], snap["rebuild"]] == [old_seq, old["config_seq"], old["rebuild"]]
    finally:
        s.close(snapshot=False)
    assert config() != RELOADED


def test_a_snapshot_written_today_restores_without_replaying_the_stream() -> None:
    s = run(None)
    j = s.journal
    s.partition("default").take_snapshot()
    want = json.dumps(s.dump_state(), sort_keys=True)
    r = qp.Scheduler.from_yaml(config(revoke_delay=5), store=j)
    assert r.restored_from == {"default": "snapshot"}
    assert json.dumps(r.dump_state(), sort_keys=True) == want
