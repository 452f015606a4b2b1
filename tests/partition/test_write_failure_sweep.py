"""Every step of every write, failed one by one (issue 29): for each kind of write the partition takes
and each place a failure can come from — each state-changing method the write calls (the k-th call
raising before or after its real work), a ``before_commit`` hook, the journal append — the failure is
injected, seen to fire, and the partition is left exactly as it was: its state, its journal, and the
state its journal rebuilds. The random sequences of test_write_failures.py test failures in between
other writes; this sweep makes sure no step is missed (each target method is reached by some write)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.partition import Partition
from quotaplane.state import handlers
from tests.partition.helpers import Clock
from tests.partition.test_write_failures import CONFIG, TARGETS, USERS, FlakyJournal, Injected, _journal


class Sweep:
    """Counts each target's calls; when armed, the ``k``-th call of one target raises."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.target: str | None = None
        self.k = 0
        self.after = False
        self.fired = False

    def arm(self, target: str, k: int, after: bool) -> None:
        self.target, self.k, self.after, self.fired = target, k, after, False
        self.calls.clear()

    def wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if name != self.target or self.calls[name] != self.k + 1:
                return real(*args, **kwargs)
            self.fired = True
            self.target = None
            if self.after:
                real(*args, **kwargs)
            raise Injected(f"{name} failed half way")
        return call


@contextmanager
def _swept(sweep: Sweep) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        for cls, name in TARGETS:
            real = getattr(cls, name)
            wrapped = sweep.wrap(f"{cls.__name__}.{name}", real)
            mp.setattr(cls, name, wrapped)
            # the state's event dispatch holds its handlers themselves: wrapped there too
            for event, handler in list(handlers._HANDLERS.items()):
                if handler is real:
                    mp.setitem(handlers._HANDLERS, event, wrapped)
        yield


def _world() -> tuple[Partition, FlakyJournal, Clock, list[bool]]:
    """A partition with a node, two applications, an allocation on the node and one without, a
    waiting ask too large to fit and one that fits (cycles are run by hand: ``schedule`` has work)."""
    journal, clock = FlakyJournal(), Clock()
    p = Scheduler.from_yaml(CONFIG, store=journal, clock=clock).partition("default")
    hook = [False]

    def refuse(tx: Any, events: Sequence[Any]) -> None:
        if hook[0]:
            hook[0] = False
            raise Injected("a hook refused the commit")

    p.hooks.before_commit(refuse)
    p.add_node("n0", Resource({"vcore": 6000, "cpu": 4000}))
    p.add_application("seed-a", USERS[0], queue="root.a", tags={"namespace": "team-a"})
    p.add_application("seed-b", USERS[1], queue="root.b")
    p.allocate("seed-a", "s1", Resource({"vcore": 1000, "cpu": 1000}), node="n0")
    p.allocate("seed-b", "s2", Resource({"vcore": 2000}))
    p.auto_schedule = False
    p.add_ask("seed-a", "w1", Resource({"vcore": 9000}))
    p.add_ask("seed-b", "w2", Resource({"vcore": 1000}))
    clock.advance(7)
    return p, journal, clock, hook


#: every kind of write, on the world above
WRITES: dict[str, Callable[[Partition], Any]] = {
    "add_application": lambda p: p.add_application("new", USERS[0], queue="root.a"),
    "add_node": lambda p: p.add_node("n1", Resource({"vcore": 4000, "cpu": 4000})),
    "update_node": lambda p: p.update_node("n0", capacity=Resource({"vcore": 5000, "cpu": 4000})),
    "remove_node": lambda p: p.remove_node("n0"),
    "allocate": lambda p: p.allocate("seed-b", "k1", Resource({"vcore": 1000})),
    "allocate_batch": lambda p: p.allocate_batch([{"applicationID": "seed-b", "allocationKey": f"b{i}",
                                                   "resource": {"vcore": 500}} for i in range(2)]),
    "add_ask": lambda p: p.add_ask("seed-a", "q1", Resource({"vcore": 2000})),
    "remove_ask": lambda p: p.remove_ask("w1"),
    "schedule": lambda p: p.schedule(),
    "bind": lambda p: p.bind("s2", "n0"),
    "release": lambda p: p.release("s1"),
    "release_batch": lambda p: p.release_batch(["s1", "s2"]),
    "remove_application": lambda p: p.remove_application("seed-b"),
}


def _probe(write: str) -> tuple[Counter[str], bool]:
    """What ``write`` calls on the world (each target's calls) and whether it commits."""
    p, journal, _, _ = _world()
    sweep = Sweep()
    before = len(_journal(journal))
    with _swept(sweep):
        WRITES[write](p)
    return Counter(sweep.calls), len(_journal(journal)) > before


def _cases() -> list[tuple[str, str, int, bool]]:
    out: list[tuple[str, str, int, bool]] = []
    for write in WRITES:
        calls, commits = _probe(write)
        for target, n in sorted(calls.items()):
            for k in sorted({0, n - 1}):                 # the first and the last call of each
                out.extend((write, target, k, after) for after in (False, True))
        if commits:
            out.extend([(write, "hook", 0, False), (write, "append", 0, False)])
    return out


CASES = _cases()


def test_every_state_changing_method_is_reached_by_some_write() -> None:
    reached = {target for _, target, _, _ in CASES}
    assert {f"{cls.__name__}.{name}" for cls, name in TARGETS} <= reached
    assert {write for write, target, _, _ in CASES if target == "append"} == set(WRITES)


@pytest.mark.parametrize(("write", "target", "k", "after"), CASES,
                         ids=[f"{w}-{t}-{k}-{'after' if a else 'before'}" for w, t, k, a in CASES])
def test_a_write_failed_at_this_step_leaves_everything_as_before(write: str, target: str, k: int,
                                                                  after: bool) -> None:
    p, journal, clock, hook = _world()
    sweep = Sweep()
    before, logged = p.dump_state(), _journal(journal)
    with _swept(sweep):
        if target == "hook":
            hook[0] = True
        elif target == "append":
            journal.fail_next = True
        else:
            sweep.arm(target, k, after)
        with pytest.raises(Injected):
            WRITES[write](p)
    fired = not hook[0] if target == "hook" else not journal.fail_next if target == "append" else sweep.fired
    assert fired, "the failure was never reached"
    assert p.dump_state() == before
    assert _journal(journal) == logged
    # the partition goes on: memory is what its journal rebuilds, and the write succeeds when retried
    assert p.healthy or p.recover()
    clock.advance(1)
    restored = Scheduler.from_yaml(CONFIG, store=journal, clock=clock).partition("default")
    assert restored.dump_state() == p.dump_state()
    WRITES[write](p)
