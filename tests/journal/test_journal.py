"""Behaviour shared by every journal backend (memory, SQLite, PostgreSQL when reachable).

Decision S1: an append is one transaction, durable on return, seqs 1, 2, 3 … per stream without gaps;
snapshots keep the latest state per stream; compaction is optional and reads after the snapshot keep
working.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from quotaplane.errors import NotLeaderError
from quotaplane.journal import Journal, JournalCompactedError, JournalError

from .conftest import Store


def events(start: int, n: int) -> list[dict[str, Any]]:
    return [{"type": "t", "i": i} for i in range(start, start + n)]


def test_round_trip_preserves_events(store: Store) -> None:
    """Events come back equal to what was appended (nested values, unicode, ints, floats, null)."""
    j = store.open()
    evs = [{"type": "a", "nested": {"b": [1, 2.5, None, True]}, "name": "zoë ✓"}, {"type": "b"}]
    assert j.append("p", evs) == 2
    assert list(j.read("p")) == [(1, evs[0]), (2, evs[1])]


def test_seqs_are_contiguous_per_stream_and_independent(store: Store) -> None:
    """Each stream has its own 1, 2, 3 … sequence; append returns the seq of the last event."""
    j = store.open()
    assert j.append("a", events(0, 3)) == 3
    assert j.append("b", events(0, 1)) == 1
    assert j.append("a", events(3, 2)) == 5
    assert [s for s, _ in j.read("a")] == [1, 2, 3, 4, 5]
    assert [e["i"] for _, e in j.read("a")] == [0, 1, 2, 3, 4]
    assert [s for s, _ in j.read("b")] == [1]
    assert j.last_seq("a") == 5 and j.last_seq("b") == 1 and j.last_seq("none") == 0
    assert j.streams() == ["a", "b"]


def test_read_after_returns_the_tail_in_order(store: Store) -> None:
    j = store.open()
    j.append("p", events(1, 10))
    assert [s for s, _ in j.read("p", 7)] == [8, 9, 10]
    assert list(j.read("p", 10)) == []
    assert list(j.read("p", 99)) == []
    assert list(j.read("unknown")) == []


def test_read_pages_through_many_events(store: Store) -> None:
    """More events than one read page (5,000): all come back, in order, nothing twice."""
    j = store.open()
    j.append("p", events(1, 12_345))
    seqs = [s for s, e in j.read("p", 3) if e["i"] == s]
    assert seqs == list(range(4, 12_346))


def test_empty_append_writes_nothing(store: Store) -> None:
    j = store.open()
    assert j.append("p", []) == 0
    assert j.streams() == []
    j.append("p", events(0, 2))
    assert j.append("p", []) == 2
    assert j.last_seq("p") == 2


def test_events_are_copies(store: Store) -> None:
    """Mutating an appended or read event never changes the journal."""
    j = store.open()
    ev = {"type": "x", "list": [1]}
    j.append("p", [ev])
    ev["list"].append(2)
    got = next(iter(j.read("p")))[1]
    assert got == {"type": "x", "list": [1]}
    got["list"].append(3)
    assert next(iter(j.read("p")))[1] == {"type": "x", "list": [1]}


@pytest.mark.parametrize("bad", [
    [{"type": "x", "v": {1, 2}}],          # a set is not JSON
    [{"type": "x", "v": float("nan")}],    # NaN is not JSON
    [["not", "a", "dict"]],
    {"type": "a dict instead of a list"},
    "a string",
])
def test_bad_events_raise_value_error_and_write_nothing(store: Store, bad: Any) -> None:
    j = store.open()
    j.append("p", events(0, 1))
    with pytest.raises(ValueError):
        j.append("p", [*events(1, 1), *bad] if isinstance(bad, list) else bad)
    assert j.last_seq("p") == 1
    assert [s for s, _ in j.read("p")] == [1]


@pytest.mark.parametrize("stream", ["", None, 3])
def test_bad_stream_names_raise_value_error(store: Store, stream: Any) -> None:
    j = store.open()
    with pytest.raises(ValueError, match="stream"):
        j.append(stream, events(0, 1))
    with pytest.raises(ValueError, match="stream"):
        j.last_seq(stream)


def test_bad_after_raises_value_error(store: Store) -> None:
    j = store.open()
    with pytest.raises(ValueError, match="after"):
        j.read("p", -1)


def test_snapshot_plus_tail_recovers_everything(store: Store) -> None:
    """Recovery = snapshot state + the events after its seq (issue 4 item 7)."""
    j = store.open()
    j.append("p", events(1, 100))
    j.save_snapshot("p", 90, {"count": 90, "names": ["a", "b"]})
    j.append("p", events(101, 5))
    j = store.reopen()
    snap = j.load_snapshot("p")
    assert snap == (90, {"count": 90, "names": ["a", "b"]})
    tail = list(j.read("p", snap[0]))
    assert [s for s, _ in tail] == list(range(91, 106))
    assert [e["i"] for _, e in tail] == list(range(91, 106))


def test_snapshot_keeps_only_the_latest(store: Store) -> None:
    j = store.open()
    j.append("p", events(0, 10))
    assert j.load_snapshot("p") is None
    j.save_snapshot("p", 3, {"v": 3})
    j.save_snapshot("p", 7, {"v": 7})
    assert j.load_snapshot("p") == (7, {"v": 7})
    j.save_snapshot("p", 7, {"v": "again"})  # same seq: replaced
    assert j.load_snapshot("p") == (7, {"v": "again"})


def test_snapshot_seq_must_be_known_and_not_older(store: Store) -> None:
    j = store.open()
    j.append("p", events(0, 5))
    with pytest.raises(ValueError, match="beyond"):
        j.save_snapshot("p", 6, {})
    j.save_snapshot("p", 4, {"v": 4})
    with pytest.raises(ValueError, match="older"):
        j.save_snapshot("p", 3, {})
    with pytest.raises(ValueError):
        j.save_snapshot("p", 5, {"bad": object()})
    with pytest.raises(ValueError):
        j.save_snapshot("p", 5, [1, 2])  # type: ignore[arg-type]
    assert j.load_snapshot("p") == (4, {"v": 4})


def test_snapshot_of_an_empty_stream(store: Store) -> None:
    """A snapshot at seq 0 (state before any event) is allowed and lists the stream."""
    j = store.open()
    j.save_snapshot("s", 0, {"empty": True})
    assert j.load_snapshot("s") == (0, {"empty": True})
    assert j.streams() == ["s"]
    assert j.append("s", events(0, 1)) == 1


def test_compaction_removes_covered_events_and_keeps_the_tail(store: Store) -> None:
    j = store.open()
    j.append("p", events(1, 20))
    assert j.compact("p") == 0  # no snapshot: nothing to compact
    j.save_snapshot("p", 15, {"v": 15})
    assert j.compact("p") == 15
    assert j.compact("p") == 0  # idempotent
    j = store.reopen()
    assert j.last_seq("p") == 20  # the counter survives compaction
    assert [s for s, _ in j.read("p", 15)] == [16, 17, 18, 19, 20]
    assert [s for s, _ in j.read("p", 18)] == [19, 20]
    with pytest.raises(JournalCompactedError) as err:
        j.read("p", 14)
    assert err.value.compacted_seq == 15
    assert j.append("p", events(21, 1)) == 21  # no seq is ever reused


def test_compaction_of_everything_keeps_last_seq(store: Store) -> None:
    j = store.open()
    j.append("p", events(1, 3))
    j.save_snapshot("p", 3, {"v": 3})
    assert j.compact("p") == 3
    assert list(j.read("p", 3)) == []
    assert j.last_seq("p") == 3
    j = store.reopen()  # the counter survives a restart with no event left
    assert j.last_seq("p") == 3
    assert j.streams() == ["p"]
    assert j.append("p", events(4, 2)) == 5
    j = store.reopen()
    assert j.last_seq("p") == 5
    assert [s for s, _ in j.read("p", 3)] == [4, 5]


def test_compact_on_snapshot_option(store: Store) -> None:
    j = store.open(compact_on_snapshot=True)
    j.append("p", events(1, 10))
    j.save_snapshot("p", 6, {"v": 6})
    with pytest.raises(JournalCompactedError):
        j.read("p", 0)
    assert [s for s, _ in j.read("p", 6)] == [7, 8, 9, 10]


def test_concurrent_appends_from_8_threads_are_unique_and_contiguous(store: Store) -> None:
    """8 threads append single events and batches at once: every seq exactly once, 1..N, batches
    contiguous, and each event stored at the seq its append returned."""
    j = store.open()
    per_thread = 40 if store.kind == "postgres" else 150
    results: list[list[tuple[int, int, int]]] = [[] for _ in range(8)]  # (last seq, batch size, tid)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(tid: int) -> None:
        try:
            barrier.wait()
            for k in range(per_thread):
                n = 1 + (k % 3)
                last = j.append("p", [{"t": tid, "k": k, "n": m} for m in range(n)])
                results[tid].append((last, n, k))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stored = list(j.read("p"))
    total = sum(n for r in results for _, n, _ in r)
    assert [s for s, _ in stored] == list(range(1, total + 1))
    by_seq = dict(stored)
    for tid, r in enumerate(results):
        lasts = [last for last, _, _ in r]
        assert lasts == sorted(lasts)  # one thread's appends are ordered
        for last, n, k in r:
            for m in range(n):  # the batch occupies last-n+1 .. last, in order
                assert by_seq[last - n + 1 + m] == {"t": tid, "k": k, "n": m}


def test_local_or_db_lease_basics(store: Store) -> None:
    """acquire: True when free or held by the holder (renew), False when another holds it."""
    j = store.open()
    assert j.lease_holder("p") is None
    assert j.acquire_lease("p", "a", 30) is True
    assert j.acquire_lease("p", "a", 30) is True  # renew
    assert j.acquire_lease("p", "b", 30) is False
    assert j.lease_holder("p") == "a"
    j.release_lease("p", "b")  # not the holder: no effect
    assert j.lease_holder("p") == "a"
    j.release_lease("p", "a")
    assert j.lease_holder("p") is None
    assert j.acquire_lease("p", "b", 30) is True
    assert j.lease_holder("p") == "b"
    assert j.lease_holder("other") is None


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan"), "5", True])
def test_lease_ttl_must_be_positive(store: Store, ttl: Any) -> None:
    j = store.open()
    with pytest.raises(ValueError, match="ttl"):
        j.acquire_lease("p", "a", ttl)


def test_fencing_append_with_holder(store: Store) -> None:
    """append(holder=) succeeds for the live holder and raises NotLeaderError (writing nothing) otherwise."""
    j = store.open()
    with pytest.raises(NotLeaderError) as err:
        j.append("p", events(0, 1), holder="a")
    assert err.value.leader is None
    assert j.acquire_lease("p", "a", 30)
    assert j.append("p", events(0, 2), holder="a") == 2
    with pytest.raises(NotLeaderError) as err:
        j.append("p", events(2, 1), holder="b")
    assert err.value.leader == "a"
    j.release_lease("p", "a")
    with pytest.raises(NotLeaderError):
        j.append("p", events(2, 1), holder="a")
    assert j.last_seq("p") == 2
    assert j.append("p", events(2, 1)) == 3  # without holder: no fencing


def test_closed_journal_refuses_calls(store: Store) -> None:
    j = store.open()
    j.append("p", events(0, 1))
    j.close()
    j.close()  # idempotent
    with pytest.raises(JournalError, match="closed"):
        j.append("p", events(0, 1))
    with pytest.raises(JournalError, match="closed"):
        j.last_seq("p")


def test_implements_the_protocol(store: Store) -> None:
    j = store.open()
    assert isinstance(j, Journal)
    assert isinstance(j.url, str) and j.url


def test_mappings_such_as_resources_are_stored_as_objects(store: Store) -> None:
    """A Resource (an immutable Mapping, not a dict) inside or as an event is encoded as a JSON object."""
    from types import MappingProxyType

    from quotaplane.resources import Resource

    j = store.open()
    r = Resource({"vcore": 100, "memory": 2048})
    j.append("p", [{"type": "alloc", "resource": r}, MappingProxyType({"type": "proxy"})])
    assert [e for _, e in j.read("p")] == [
        {"type": "alloc", "resource": {"memory": 2048, "vcore": 100}}, {"type": "proxy"}]


def test_canonical_json_is_stable() -> None:
    from quotaplane.journal import canonical_json

    assert canonical_json({"b": [1, {"d": 1, "c": 2}], "a": "é"}) == '{"a":"é","b":[1,{"c":2,"d":1}]}'
    with pytest.raises(ValueError, match="not JSON-able"):
        canonical_json({"x": object()})
    loop: dict[str, object] = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="not JSON-able"):
        canonical_json(loop)
