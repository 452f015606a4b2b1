"""The arithmetic of budgets (docs/budgets.md): exact integrals against brute force, calendar periods in
a time zone, decay against the closed form (TM-B11), commitments of declared runtimes (TM-B5, TM-B10),
and an exact undo."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaplane.budgets import Ledger, period_of
from quotaplane.config.budgets import BudgetSpecError, parse_budgets

H = 3_600_000
DAY = 24 * H


def _ms(*args: int, tz: object = UTC) -> int:
    return round(datetime(*args, tzinfo=tz).timestamp() * 1000)  # type: ignore[arg-type, misc]


def _ledger(**extra: object) -> Ledger:
    return Ledger(parse_budgets([{"queue": "root.a", "resourcehours": {"nvidia.com/gpu": 100}, **extra}]))


def test_a_month_resets_on_its_reset_day_at_midnight_in_its_zone() -> None:
    [spec] = parse_budgets([{"queue": "root.a", "resourcehours": {"gpu": 1}, "period": "month",
                             "timezone": "Europe/Zurich", "resetday": 15}])
    from zoneinfo import ZoneInfo
    zurich = ZoneInfo("Europe/Zurich")
    assert period_of(spec, _ms(2026, 11, 20, 12)) == \
        (_ms(2026, 11, 15, tz=zurich), _ms(2026, 12, 15, tz=zurich))
    assert period_of(spec, _ms(2026, 11, 3)) == (_ms(2026, 10, 15, tz=zurich), _ms(2026, 11, 15, tz=zurich))
    # across the end of the year
    assert period_of(spec, _ms(2027, 1, 2)) == (_ms(2026, 12, 15, tz=zurich), _ms(2027, 1, 15, tz=zurich))


def test_a_week_starts_on_its_reset_weekday_and_a_duration_from_its_start() -> None:
    [week] = parse_budgets([{"queue": "root.a", "resourcehours": {"gpu": 1}, "period": "week",
                             "resetday": "sunday"}])
    # 2026-11-25 is a Wednesday: its week started on Sunday the 22nd
    assert period_of(week, _ms(2026, 11, 25, 10)) == (_ms(2026, 11, 22), _ms(2026, 11, 29))
    [rolling] = parse_budgets([{"queue": "root.a", "resourcehours": {"gpu": 1}, "period": "30d",
                                "start": "2026-01-01"}])
    start, end = period_of(rolling, _ms(2026, 3, 5))
    assert (start, end) == (_ms(2026, 3, 2), _ms(2026, 4, 1)) and end - start == 30 * DAY


def test_consumption_is_the_integral_of_what_was_held_within_the_period() -> None:
    led = _ledger()
    t0 = _ms(2026, 11, 1)
    scopes = led.resolve("root.a.x", "alice", ())
    led.charge("k1", scopes, {"nvidia.com/gpu": 4}, t0 + 10 * H, None)
    led.release("k1", t0 + 20 * H)
    [scope] = scopes
    cell = scope.cells["nvidia.com/gpu"]
    assert scope.consumed(cell, t0 + 30 * H) == 40 * H              # 4 GPUs × 10 h
    # across the month's end, with nothing changed since: a read starts the new period, changes nothing
    led.charge("k2", scopes, {"nvidia.com/gpu": 2}, _ms(2026, 11, 30, 23), None)
    assert scope.consumed(cell, _ms(2026, 12, 1, 1)) == 2 * 1 * H   # only the hour in December
    before = cell.save()
    assert scope.consumed(cell, _ms(2026, 12, 1, 1)) == 2 * H and cell.save() == before
    led.release("k2", _ms(2026, 12, 1, 2))
    assert scope.consumed(cell, _ms(2026, 12, 1, 5)) == 2 * 2 * H


def test_an_allocation_without_a_declared_runtime_is_admitted_while_the_budget_is_not_reached() -> None:
    led = _ledger()
    t0 = _ms(2026, 11, 1)
    scopes = led.resolve("root.a", "alice", ())
    led.charge("k1", scopes, {"nvidia.com/gpu": 10}, t0, None)
    assert not led.shortfalls(scopes, {"nvidia.com/gpu": 1}, t0 + 9 * H, None)
    [s] = led.shortfalls(scopes, {"nvidia.com/gpu": 1}, t0 + 10 * H, None)
    assert (s.consumed, s.limit, s.resets_at) == (100 * H, 100 * H, _ms(2026, 12, 1))
    assert not led.shortfalls(scopes, {"vcore": 1000}, t0 + 10 * H, None)   # another resource


def test_declared_runtimes_commit_what_they_may_still_use_tm_b10() -> None:
    """TM-B10: A has 32 CPUs, a 240-min limit and 60 min elapsed (5760 CPU-min remain), B 16 CPUs and
    120 min just started (1920); 20 min later 32·160 + 16·100 = 6720 remain; A's end releases its rest."""
    m = 60_000
    led = Ledger(parse_budgets([{"queue": "root.q", "resourcehours": {"cpu": 20_000 / 60}}]))
    scopes = led.resolve("root.q", "u", ())
    led.charge("A", scopes, {"cpu": 32}, 0, 240 * m)
    led.charge("B", scopes, {"cpu": 16}, 60 * m, 120 * m)
    assert led.committed(scopes[0], "cpu", 60 * m) == (5760 + 1920) * m
    assert led.committed(scopes[0], "cpu", 80 * m) == 6720 * m
    # consumed 32·80 + 16·20 = 2880 by then: a 16 × 180 job (2880) fits in 20,000 − 2880 − 6720
    assert not led.shortfalls(scopes, {"cpu": 16}, 80 * m, 180 * m)
    # … but not in 12,400
    small = Ledger(parse_budgets([{"queue": "root.q", "resourcehours": {"cpu": 12_400 / 60}}]))
    s2 = small.resolve("root.q", "u", ())
    small.charge("A", s2, {"cpu": 32}, 0, 240 * m)
    small.charge("B", s2, {"cpu": 16}, 60 * m, 120 * m)
    assert small.shortfalls(s2, {"cpu": 16}, 80 * m, 180 * m)
    led.release("A", 80 * m)
    assert led.committed(scopes[0], "cpu", 80 * m) == 1600 * m


def test_undo_puts_back_exactly_the_state_before_the_charge() -> None:
    """Levels, moments, commitments and the newest time come back exactly; a period the undone charge
    started stays started, which no read can tell (where a period starts depends on the time alone)."""
    led, alone = _ledger(), _ledger()
    scopes, scopes_alone = led.resolve("root.a", "u", ()), alone.resolve("root.a", "u", ())
    cell = scopes[0].cells["nvidia.com/gpu"]
    for ledger, sc in ((led, scopes), (alone, scopes_alone)):
        ledger.charge("k1", sc, {"nvidia.com/gpu": 3}, _ms(2026, 11, 2), 60 * 24 * H)
    before, now = cell.save(), led.now
    led.charge("k2", scopes, {"nvidia.com/gpu": 2}, _ms(2026, 12, 2), 5 * H)   # starts December
    led.undo("k2")
    assert (cell.level, cell.moment, cell.c_level, cell.c_moment, led.now) == \
        (before[0], before[1], before[5], before[6], now) and "k2" not in led.entries
    other = scopes_alone[0].cells["nvidia.com/gpu"]
    for at in (_ms(2026, 12, 3), _ms(2027, 1, 5)):
        assert scopes[0].consumed(cell, at) == scopes_alone[0].consumed(other, at)
        gpu = "nvidia.com/gpu"
        assert led.committed(scopes[0], gpu, at) == alone.committed(scopes_alone[0], gpu, at)


def test_a_decayed_budget_refills_by_the_exact_half_life_tm_b11() -> None:
    """TM-B11: 6000 CPU-min reached at day 0, no further use: 3000 available at day 7, 4500 at day 14."""
    led = Ledger(parse_budgets([{"queue": "root.q", "resourcehours": {"cpu": 100}, "halflife": "7d"}]))
    scopes = led.resolve("root.q", "u", ())
    [scope] = scopes
    cell = scope.cells["cpu"]
    cell.decay, cell.decay_at = 6000 * 60_000.0, 0
    assert scope.consumed(cell, 7 * DAY) == pytest.approx(3000 * 60_000)
    assert scope.consumed(cell, 14 * DAY) == pytest.approx(1500 * 60_000)
    # constant use for one half-life from zero: L·T½/ln2·(1 − 1/2)
    led2 = Ledger(parse_budgets([{"queue": "root.q", "resourcehours": {"cpu": 100}, "halflife": "7d"}]))
    s2 = led2.resolve("root.q", "u", ())
    led2.charge("k", s2, {"cpu": 2}, 0, None)
    import math
    assert s2[0].consumed(s2[0].cells["cpu"], 7 * DAY) == pytest.approx(2 * 7 * DAY / math.log(2) / 2)


def test_users_and_groups_by_name_or_wildcard_and_every_ancestor() -> None:
    led = Ledger(parse_budgets([
        {"queue": "root", "resourcehours": {"gpu": 1000}},
        {"queue": "root.a", "resourcehours": {"gpu": 100}},
        {"queue": "root.a", "user": "alice", "resourcehours": {"gpu": 10}},
        {"queue": "root.a", "user": "*", "resourcehours": {"gpu": 5}},
        {"queue": "root.a", "group": "ml", "resourcehours": {"gpu": 50}},
        {"queue": "root.a", "group": "*", "resourcehours": {"gpu": 20}},
    ]))
    assert [s.label for s in led.resolve("root.a.x", "alice", ("dev", "ml"))] == \
        ["root", "root.a", "user alice in root.a", "group ml in root.a"]
    assert [s.label for s in led.resolve("root.a", "bob", ("dev",))] == \
        ["root", "root.a", "user bob in root.a", "group dev in root.a"]
    assert [s.label for s in led.resolve("root.b", "bob", ())] == ["root"]


@pytest.mark.parametrize(("raw", "message"), [
    ([{"resourcehours": {"gpu": 1}}], "budgets[0]: missing key 'queue'"),
    ([{"queue": "teams.a", "resourcehours": {"gpu": 1}}], "budgets[0].queue: expected a full queue path"),
    ([{"queue": "root.a"}], "budgets[0] (root.a): missing key 'resourcehours'"),
    ([{"queue": "root.a", "resourcehours": {"gpu": -1}}], "budgets[0] (root.a).resourcehours.gpu: expected"),
    ([{"queue": "root.a", "resourcehours": {"gpu": 1}, "period": "fortnight"}],
     "budgets[0] (root.a).period: expected day, week, month or a duration"),
    ([{"queue": "root.a", "resourcehours": {"gpu": 1}, "timezone": "Mars/Base"}],
     "unknown time zone 'Mars/Base'"),
    ([{"queue": "root.a", "resourcehours": {"gpu": 1}, "resetday": 31}], "day of the month 1..28"),
    ([{"queue": "root.a", "resourcehours": {"gpu": 1}, "period": "30d", "halflife": "7d"}],
     "period and halflife exclude each other"),
    ([{"queue": "root.a", "resourcehours": {"gpu": 1}, "exhausted": "kill"}], "exhausted: expected one of"),
    ([{"queue": "root.a", "resourcehours": {"gpu": 1}, "grace": "5m"}],
     "only a budget with exhausted: preempt"),
    ([{"queue": "root.a", "resourcehours": {"gpu": 1}, "color": "red"}], "unknown key 'color'"),
    ([{"queue": "root.a", "resourcehours": {"gpu": 1}}, {"queue": "root.a", "resourcehours": {"gpu": 2}}],
     "budgets[1] (root.a): the same scope as budgets[0]"),
    ({"queue": "root.a"}, "budgets: expected a list"),
])
def test_a_wrong_budget_is_one_sentence_naming_it(raw: object, message: str) -> None:
    with pytest.raises(BudgetSpecError, match=None) as err:
        parse_budgets(raw)
    assert message in str(err.value)


_OPS = st.lists(st.tuples(st.sampled_from(["alloc", "release", "undo"]), st.integers(0, 5),
                          st.integers(1, 8), st.integers(0, 40 * H)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(_OPS, st.sampled_from(["month", "week", "day", "7h"]))
def test_consumption_equals_brute_force_integration_within_the_period(
        ops: list[tuple[str, int, int, int]], period: str) -> None:
    """Every op at a later time; brute force integrates the held levels over the current period."""
    led = _ledger(period=period)
    scopes = led.resolve("root.a", "u", ())
    [scope] = scopes
    cell = scope.cells["nvidia.com/gpu"]
    t = _ms(2026, 11, 28, 20)
    held: dict[str, int] = {}
    steps: list[tuple[int, int]] = []           # (time, level from then on)
    last: str | None = None
    for op, key, amount, dt in ops:
        t += dt
        k = f"k{key}"
        if op == "alloc" and k not in held:
            led.charge(k, scopes, {"nvidia.com/gpu": amount}, t, None)
            held[k] = amount
            last = k
        elif op == "release" and k in held:
            led.release(k, t)
            del held[k]
            last = None
        elif op == "undo" and last is not None:
            t -= dt                               # the undo is of the write just made
            led.undo(last)
            del held[last]
            steps.pop()
            last = None
            continue
        else:
            continue
        steps.append((t, sum(held.values())))
    end = t + 5 * H
    start, _ = period_of(scope.spec, end)
    want = 0
    for i, (at, level) in enumerate(steps):
        nxt = steps[i + 1][0] if i + 1 < len(steps) else end
        lo, hi = max(at, start), min(nxt, end)
        if hi > lo:
            want += level * (hi - lo)
    assert scope.consumed(cell, end) == want


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 10 * H), st.integers(1, 20 * H)), max_size=20),
       st.integers(0, 400))
def test_no_admitted_allocation_pushes_consumed_plus_committed_over_the_budget(
        reqs: list[tuple[int, int, int]], budget: int) -> None:
    """The hold invariant: every allocation admitted by ``shortfalls`` leaves consumed + committed within
    the budget at its admission."""
    led = Ledger(parse_budgets([{"queue": "root.a", "resourcehours": {"gpu": budget}}]))
    scopes = led.resolve("root.a", "u", ())
    [scope] = scopes
    t = _ms(2026, 11, 2)
    for i, (amount, dt, runtime) in enumerate(reqs):
        t += dt
        if not led.shortfalls(scopes, {"gpu": amount}, t, runtime):
            led.charge(f"k{i}", scopes, {"gpu": amount}, t, runtime)
            used = scope.consumed(scope.cells["gpu"], t) + led.committed(scope, "gpu", t)
            assert used <= budget * H


def test_a_wrong_value_inside_the_configuration_names_the_line() -> None:
    from quotaplane.config.loader import load_config
    text = """
partitions:
  - name: default
    queues:
      - name: root
    budgets:
      - queue: root
        resourcehours: {nvidia.com/gpu: 10}
        period: fortnight
"""
    with pytest.raises(Exception) as err:
        load_config(text)
    assert "line 6" in str(err.value) and "period: expected day, week, month" in str(err.value)
