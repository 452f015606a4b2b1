"""``quotaplane simulate --from-store`` and ``--vary`` end to end: a history recorded by the library on a
store, replayed under the configuration in force and under a proposed one, compared in one table,
with the report, JSON and CSV; compaction; windows; bad input."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import quotaplane as qp
from quotaplane.cli import app
from quotaplane.sim.compare import replay, reproduction
from quotaplane.sim.recorded import RecordedError, load_recorded, parse_when
from tests.sim.test_sweep import CONFIG, G

T0 = 1_790_000_000.0          # the recorded clock: seconds since the epoch, as the service writes them


def record(store: str, *, snapshot_at_10: bool = False) -> None:
    """The workload of tests/sim/test_sweep.py, run by the library on ``store`` (team-a's guaranteed
    1): b2 gets the 2 GPUs a1 frees at 10, a2 waits for b2's end at 20."""
    now = [T0]
    s = qp.Scheduler.from_yaml(CONFIG, store=store, clock=lambda: now[0])
    p = s.partition("default")

    def at(t: float) -> None:
        now[0] = T0 + t

    p.add_node("n1", {G: 6})
    p.add_application("A", qp.UserGroup("alice", []), queue="root.team-a")
    p.add_application("B", qp.UserGroup("bob", []), queue="root.team-b")
    for app_id, key in (("A", "a0"), ("A", "a1"), ("B", "b1")):
        assert p.allocate(app_id, key, {G: 2}).allocated
    at(1)
    p.add_ask("A", "a2", {G: 2})
    at(2)
    p.add_ask("B", "b2", {G: 2})
    at(10)
    p.release("a1")
    assert p.allocation("b2") is not None and p.allocation("a2") is None
    if snapshot_at_10:
        p.take_snapshot()
    at(20)
    p.release("b2")
    assert p.allocation("a2") is not None
    at(30)
    for key in ("a0", "b1", "a2"):
        p.release(key)
    s.close(snapshot=not snapshot_at_10)


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'history.db'}"
    record(url)
    return url


def _proposed(tmp_path: Path) -> Path:
    path = tmp_path / "proposed.yaml"
    path.write_text(CONFIG.replace(f"guaranteed: {{{G}: 1}}", f"guaranteed: {{{G}: 4}}"))
    assert path.read_text() != CONFIG
    return path


def test_replay_under_the_configuration_in_force_reproduces_the_history(store: str, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["simulate", "--from-store", store, "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "reproduced exactly: all 14 recorded decisions" in res.stdout
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    assert doc["reproduction"]["exact"] and doc["base_configuration"] == "in force"
    rows = {r["variant"]: r for r in doc["table"]["rows"]}
    assert set(rows) == {"recorded", "in force"}
    for metric in ("wait.p90", "queue[root.team-a].wait.p90", "utilisation.nvidia.com/gpu",
                   "queue[root.team-b].borrowed.nvidia.com/gpu", "queue[root.team-a].lent.nvidia.com/gpu"):
        assert rows["recorded"][metric] == rows["in force"][metric], metric
    assert rows["recorded"]["refused"] is None            # refusals are not journalled: unknown
    assert rows["in force"]["refused"] == 0


def test_a_proposed_larger_guaranteed_gives_the_hand_checked_shorter_waits(store: str,
                                                                           tmp_path: Path) -> None:
    out = tmp_path / "o"
    res = CliRunner().invoke(app, ["simulate", "--from-store", store, "--config", str(_proposed(tmp_path)),
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "reproduced" not in res.stdout             # not the configuration in force: nothing to reproduce
    rows = {r["variant"]: r for r in csv.DictReader(io.StringIO((out / "results.csv").read_text()))}
    assert set(rows) == {"recorded", "proposed"}
    # recorded: a2 waited 1 -> 20, b2 2 -> 10; proposed (team-a guaranteed 4): a2 1 -> 10, b2 2 -> 20
    a, b = "queue[root.team-a].wait.p90", "queue[root.team-b].wait.p90"
    assert (rows["recorded"][a], rows["proposed"][a]) == ("19.0", "9.0")
    assert (rows["recorded"][b], rows["proposed"][b]) == ("8.0", "18.0")
    assert rows["recorded"]["refused"] == "" and rows["proposed"]["refused"] == "0"
    report = (out / "report.html").read_text()
    assert report.count("<img ") == 4 and "recorded" in report
    for name in ("usage", "waiting", "waits", "refusals"):
        assert (out / "plots" / f"{name}.png").read_bytes().startswith(b"\x89PNG")


def test_a_sweep_over_the_history_gives_one_row_per_variant(store: str, tmp_path: Path) -> None:
    out = tmp_path / "o"
    res = CliRunner().invoke(app, ["simulate", "--from-store", store, "--vary",
                                   f"root.team-a.resources.guaranteed.{G}=1,4", "--vary",
                                   f"root.team-b.resources.max.{G}=4,6", "--workers", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "variants: 4/4 done" in res.stderr
    doc = json.loads((out / "results.json").read_text())
    names = [r["variant"] for r in doc["table"]["rows"]]
    assert names == ["recorded", f"team-a.guaranteed.{G}=1, team-b.max.{G}=4",
                     f"team-a.guaranteed.{G}=1, team-b.max.{G}=6",
                     f"team-a.guaranteed.{G}=4, team-b.max.{G}=4",
                     f"team-a.guaranteed.{G}=4, team-b.max.{G}=6"]
    assert doc["variants"][2]["settings"] == {f"root.team-a.resources.guaranteed.{G}": "4",
                                              f"root.team-b.resources.max.{G}": "4"}
    rows = doc["table"]["rows"]
    assert rows[2]["queue[root.team-a].wait.p90"] == 19.0 and rows[3]["queue[root.team-a].wait.p90"] == 9.0


def test_a_window_starts_from_the_recorded_state(store: str) -> None:
    # from t=5: a0, a1, b1 run (started before), a2 and b2 wait (asked before): waits still count from
    # when they were asked
    rec = load_recorded(store, since=T0 + 5, until=T0 + 25)
    assert rec.window() == (T0 + 5, T0 + 25)
    first = [(e.op, e.key or e.app or e.node) for e in rec.events if e.t == T0 + 5]
    assert first == [("node", "n1"), ("submit", "A"), ("submit", "B"), ("allocate", "a0"), ("allocate", "a1"),
                     ("allocate", "b1"), ("ask", "a2"), ("ask", "b2")]
    result = replay(rec)
    assert reproduction(rec, result).exact
    m = result.summary["metrics"]
    assert m["queues"]["root.team-b"]["wait"]["max"] == 8.0
    assert m["queues"]["root.team-a"]["wait"]["max"] == 19.0
    assert rec.counts["unknown_duration"] == 3           # a0, b1 and a2 still run at 25


def test_compacted_history_starts_at_its_snapshot(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}?compact=true"
    # a snapshot at t=10, just after a1's release, compacts what it covers; the state at the snapshot:
    # a0, b1 and b2 run, a2 waits
    record(url, snapshot_at_10=True)
    from quotaplane.journal import open_journal

    j = open_journal(url)
    with pytest.raises(Exception, match="compacted"):
        list(j.read("default"))
    j.close()
    rec = load_recorded(url, since=T0)
    assert any("were compacted into a snapshot" in c for c in rec.caveats)
    assert rec.since == T0 + 10
    first = [(e.op, e.key or e.app or e.node) for e in rec.events if e.t == T0 + 10]
    assert first[:6] == [("node", "n1"), ("submit", "A"), ("submit", "B"), ("allocate", "a0"),
                         ("allocate", "b1"), ("allocate", "b2")]
    assert ("ask", "a2") in first
    result = replay(rec)
    rep = reproduction(rec, result)
    assert rep.exact, rep.differences
    assert rep.matched == len(rec.decisions) > 5


def test_bad_inputs_are_one_clear_line(tmp_path: Path, store: str) -> None:
    def run(*args: str) -> Any:
        return CliRunner().invoke(app, ["simulate", *args])

    res = run("--from-store", f"sqlite:///{tmp_path / 'none.db'}")
    assert res.exit_code == 1
    assert res.stderr.strip().endswith(f"no such SQLite store ({tmp_path / 'none.db'})")
    assert not (tmp_path / "none.db").exists()
    res = run("--from-store", store, "--since", "yesterday")
    assert res.exit_code == 1 and "--since: 'yesterday' is neither seconds since the epoch nor" in res.stderr
    res = run("--from-store", store, "--partition", "gpu")
    assert res.exit_code == 1 and "no history of partition 'gpu' (partitions: 'default')" in res.stderr
    res = run("--from-store", "memory://")
    assert res.exit_code == 1 and "a memory store keeps no history" in res.stderr
    res = run("--trace", "t.jsonl", "--from-store", store)
    assert res.exit_code == 1 and "give either --trace FILE or --from-store URL" in res.stderr
    res = run("--from-store", store, "--vary", "root.nope.resources.max.gpu=1")
    assert res.exit_code == 1 and "no queue 'root.nope'" in res.stderr
    res = run("--from-store", store, "--since", str(T0 + 40), "--until", str(T0 + 30))
    assert res.exit_code == 1 and "the window is empty" in res.stderr


def test_parse_when_reads_epoch_seconds_and_iso_times() -> None:
    assert parse_when("1790000000", "--since") == T0
    assert parse_when("2026-09-21T14:13:20Z", "--since") == T0
    assert parse_when("2026-09-21T14:13:20", "--since") == T0          # no zone: UTC
    with pytest.raises(RecordedError, match="--until"):
        parse_when("nan", "--until")


def test_a_damaged_journal_event_is_named(tmp_path: Path) -> None:
    from quotaplane.journal import open_journal

    url = f"sqlite:///{tmp_path / 'bad.db'}"
    record(url)
    j = open_journal(url)
    seq = j.append("default", [{"type": "allocated", "t": T0 + 40}])        # no key, app, resource
    j.close()
    with pytest.raises(RecordedError, match=rf"partition 'default', event #{seq}: cannot read it \(KeyError"):
        load_recorded(url)
