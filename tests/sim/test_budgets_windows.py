"""The simulator honours time windows and budgets (issue 34): a window opens and closes at its own
time during the replay (not at the next trace event), and an ask a budget holds is admitted at the
reset itself."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from quotaplane.sim import simulate

T0 = datetime(2026, 11, 27, 8, tzinfo=UTC).timestamp()
H = 3600.0

WINDOW = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              max: {vcore: 2}
    windows:
      - name: morning
        queue: root.a
        from: "2026-11-27T09:00"
        to: "2026-11-27T12:00"
        max: {vcore: 4}
"""

BUDGET = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
    budgets:
      - queue: root.a
        resourcehours: {vcore: 2}
        period: day
"""


def _events(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"t": T0, "op": "node", "node": "n1", "capacity": {"vcore": 8}},
            {"t": T0, "op": "submit", "app": "x", "user": "u", "queue": "root.a"}, *extra]


def test_a_window_opens_and_closes_at_its_time_in_the_replay() -> None:
    res = simulate(WINDOW, _events(
        {"t": T0 + 1, "op": "ask", "app": "x", "key": "k1", "resource": {"vcore": 2}, "duration": 10 * H},
        {"t": T0 + 2, "op": "ask", "app": "x", "key": "k2", "resource": {"vcore": 2}, "duration": 10 * H}))
    asks = res.summary["asks"]
    # k2 waits for the window at 09:00, not for the end of k1 at 18:00
    assert asks["allocated"] == 2 and asks["wait_seconds"]["max"] == H - 2
    assert res.summary["windows"] == [
        {"t": T0 + H, "change": "window morning opened on root.a (partition default)"},
        {"t": T0 + 4 * H, "change": "window morning closed on root.a (partition default)"}]


def test_an_ask_held_by_a_budget_is_admitted_at_the_reset() -> None:
    res = simulate(BUDGET, _events(
        {"t": T0 + 1, "op": "ask", "app": "x", "key": "k1", "resource": {"vcore": 1}, "duration": 2 * H},
        {"t": T0 + 2 * H + 10, "op": "ask", "app": "x", "key": "k2", "resource": {"vcore": 1},
         "duration": H}))
    asks = res.summary["asks"]
    midnight = datetime(2026, 11, 28, tzinfo=UTC).timestamp()
    assert asks["allocated"] == 2 and asks["pending_at_end"] == 0
    assert asks["wait_seconds"]["max"] == midnight - (T0 + 2 * H + 10)


def test_a_config_without_windows_or_budgets_replays_as_before() -> None:
    res = simulate(WINDOW.replace("    windows:", "    unused:").split("    unused:")[0], _events(
        {"t": T0 + 1, "op": "ask", "app": "x", "key": "k1", "resource": {"vcore": 2}, "duration": 10 * H},
        {"t": T0 + 2, "op": "ask", "app": "x", "key": "k2", "resource": {"vcore": 2}, "duration": 10 * H}))
    assert res.summary["asks"]["wait_seconds"]["max"] == 10 * H - 1
    assert "windows" not in res.summary
