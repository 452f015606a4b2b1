"""The fault suite's checker finds every violation of the model it judges by (docs/operations.md,
"What is promised"): a checker that never fires would let the suite pass whatever happened, so each
kind of case is fed to it here, made by hand, next to the clean history it must accept."""

from __future__ import annotations

from typing import Any

from tests.faults.checker import check, live_allocations, state_disagreements
from tests.faults.run import percentile
from tests.faults.workload import Record

LIMIT = 12


def rec(op: str, key: str, outcome: str, sent: float, received: float | None = None, *, status: int = 200,
        instance: str = "i0", amount: int = 1) -> Record:
    return Record(op, "p0", key, amount, instance, sent, sent + 0.01 if received is None else received,
                  status, outcome)


def alloc(key: str, slots: int = 1) -> dict[str, Any]:
    return {"type": "allocated", "key": key, "resource": {"slots": slots}}


def release(key: str) -> dict[str, Any]:
    return {"type": "released", "key": key}


def judge(records: list[Record], events: list[dict[str, Any]],
          leadership: dict[str, list[tuple[str, float, float]]] | None = None) -> Any:
    return check(records, {"p0": list(enumerate(events, 1))}, limit=LIMIT,
                 leadership=leadership or {"p0": [("i0", 0.0, 100.0)]}, margin=0.5, window=(0.0, 100.0))


def test_a_clean_history_is_accepted_with_unknown_outcomes_either_way() -> None:
    records = [rec("allocate", "a", "ok", 1), rec("read", "a", "exists", 2),
               rec("allocate", "b", "unknown", 3, status=502), rec("allocate", "b", "exists", 4, status=409),
               rec("allocate", "c", "unknown", 5, status=0), rec("release", "a", "ok", 6),
               rec("read", "a", "absent", 7, status=404), rec("allocate", "d", "unavailable", 8, status=503)]
    v = judge(records, [alloc("a"), alloc("b"), release("a")])
    assert v.ok, v.summary()
    assert (v.acknowledged, v.unknown, v.unavailable, v.reads) == (2, 2, 1, 2)


def test_an_acknowledged_allocation_or_release_the_journal_lacks_is_lost() -> None:
    v = judge([rec("allocate", "a", "ok", 1), rec("allocate", "b", "ok", 2), rec("release", "b", "ok", 3)],
              [alloc("a")])
    assert len(v.lost) == 2 and not v.ok


def test_a_503_that_changed_is_unknown_as_unchanged_and_a_refusal_that_changed_is_phantom() -> None:
    v = judge([rec("allocate", "a", "unavailable", 1, status=503),
               rec("allocate", "b", "refused", 2, status=409)], [alloc("a"), alloc("b")])
    assert len(v.unknown_as_unchanged) == 1 and len(v.phantom) == 1 and not v.ok


def test_a_change_applied_twice_is_double() -> None:
    v = judge([rec("allocate", "a", "ok", 1), rec("release", "a", "ok", 2)],
              [alloc("a"), alloc("a"), release("a"), release("a")])
    assert len(v.double) == 2 and not v.ok


def test_two_admissions_over_the_limit_are_found_at_the_step_they_happen() -> None:
    v = judge([rec("allocate", "a", "ok", 1), rec("allocate", "b", "ok", 2)], [alloc("a", 8), alloc("b", 8)])
    assert len(v.over_limit) == 1 and not v.ok


def test_two_instances_serving_one_partition_at_once_is_split_brain() -> None:
    v = judge([], [], leadership={"p0": [("i0", 0.0, 10.0), ("i1", 9.0, 20.0), ("i0", 20.0, 30.0)]})
    assert len(v.split_brain) == 1 and not v.ok


def test_a_read_that_missed_an_acknowledged_change_is_stale_and_past_the_margin_counted_apart() -> None:
    records = [rec("allocate", "a", "ok", 1.0, 1.1), rec("read", "a", "absent", 1.3, status=404),
               rec("read", "a", "absent", 2.0, status=404), rec("release", "a", "ok", 3.0, 3.1),
               rec("read", "a", "exists", 5.0)]
    v = judge(records, [alloc("a"), release("a")])
    assert len(v.stale_reads) == 3 and len(v.stale_past_margin) == 2 and not v.ok


def test_an_answer_outside_the_model_is_a_server_error() -> None:
    v = judge([rec("allocate", "a", "error", 1, status=500)], [])
    assert len(v.server_errors) == 1 and not v.ok


def test_the_state_an_instance_serves_is_compared_with_the_journal_key_by_key() -> None:
    history = [alloc("a", 2), alloc("b", 1), release("b"), alloc("c", 3)]
    journalled = live_allocations(list(enumerate(history)))
    assert journalled == {"a": 2, "c": 3}
    assert state_disagreements("i0/p0", {"a": 2, "c": 3}, journalled) == []
    found = state_disagreements("i0/p0", {"a": 1, "b": 1}, journalled)
    assert found == ["i0/p0: serves b, the journal does not hold it",
                     "i0/p0: the journal holds c, it does not serve it",
                     "i0/p0: a is 1 slots, 2 in the journal"]
    v = judge([], [])
    v.state_vs_journal = found
    assert not v.ok and v.summary()["state vs journal"] == 3


def test_time_to_recover_percentiles_are_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.99), percentile([3.0], 0.99)) == (50.0, 99.0, 3.0)


def test_a_queue_usage_that_drifted_from_its_allocations_is_a_disagreement() -> None:
    assert state_disagreements("i0/p0", {"a": 2, "": 2}, {"a": 2, "": 2}) == []
    assert state_disagreements("i0/p0", {"a": 2, "": 5}, {"a": 2, "": 2}) == [
        "i0/p0: the queue holds 5 slots, the journal 2"]


def test_an_exists_or_not_there_answer_the_journal_contradicts_is_lost() -> None:
    v = judge([rec("allocate", "a", "unknown", 1, status=502), rec("allocate", "a", "exists", 2, status=409),
               rec("allocate", "b", "ok", 3), rec("release", "b", "absent", 4, status=404)], [alloc("b")])
    assert len(v.lost) == 2 and not v.ok


def test_the_promise_leaves_stale_reads_within_the_margin_open_but_not_past_it() -> None:
    within = [rec("allocate", "a", "ok", 1.0, 1.1), rec("read", "a", "absent", 1.3, status=404)]
    v = judge(within, [alloc("a")])
    assert len(v.stale_reads) == 1 and not v.stale_past_margin
    assert v.holds_the_promise and not v.ok
    past = [rec("allocate", "a", "ok", 1.0, 1.1), rec("read", "a", "absent", 2.0, status=404)]
    w = judge(past, [alloc("a")])
    assert w.stale_past_margin and not w.holds_the_promise
