"""Scale benchmark (issues 38 and 39): ten times the largest published figures, in-process, one partition.

Two shapes are generated:

**The wide tree** (``--scale 1``): depth 5 — ``root.d<i>.p<j>.t<k>.l<m>`` — with 10 divisions, 100
departments, 1,000 teams (1,110 inner queues) and 10,000 leaf queues. ``guaranteed`` is set on the divisions
and the departments (preemption is on by default, P1, so a waiting ask is a preemption candidate of the
department above it), ``max`` on the leaves (a team's limits cap each user). 100,000 users in 1,000 groups,
ten users per leaf with one application each, under wildcard limits at three levels (``*`` user limits on
divisions, teams and leaves, a named and a ``*`` group limit on divisions). Every leaf is full (ten running
allocations of one core against a leaf max of ten cores) and the waiting asks (one core each) are spread
over the leaves. Sizes scale linearly with ``--scale``.

**Kueue's benchmark shape** (``test/performance/scheduler/configs/{baseline,large-scale}`` in
kubernetes-sigs/kueue): cohorts x ClusterQueues x workload classes (small, medium, large) with creation
intervals and runtimes. A cohort is a parent queue, a ClusterQueue a leaf with ``guaranteed`` = its nominal
quota and ``max`` = nominal + borrowing limit, a workload an ask of its request in cores, released after its
runtime. The generated submissions are driven through the engine on a virtual clock (a heap of due
releases and creations), so the figure is what the engine itself admits per second of CPU.

Figures (each against its target, and against a same-run baseline where a ratio means something):

- ``waiting`` (issue 39): with the pending asks grown in steps (``--pending`` list) in ONE partition, at
  each step: a release that frees room for exactly one waiting ask (p50/p99), ``check_timeouts`` with
  nothing due, ``add_node``, ``standing`` of a leaf queue with asks, of a user with no asks, and the
  standing of an ask's owner (which carries the ask's position). The baseline is the first step: the
  same operations with asks waiting only in the touched leaves.
- ``decisions`` (issue 38): sustained mixed allocate/release with asks arriving, on a set of touched
  leaves, in partitions whose untouched population (queues, users, applications, waiting asks) is 1x, 10x
  and 100x; decisions/s and p99, and the growth of the cost per decision from 1x to 100x. The three
  partitions are built first and then take turns, a chunk of operations each (the same sequence in
  each), so that the load of a shared machine falls on all three alike; each one's cost is the median of
  its chunks.
- ``gc`` (issue 39): the pause of a full (generation 2) garbage collection with the wide tree and 100,000
  pending asks (``--pending-gc``) in memory, before and after the serving process settles its state
  (``quotaplane.partition.gcfreeze``: collect once, freeze the survivors — what ``quotaplane serve`` does
  after a recovery, a rebuild, a takeover and a configuration applied), and then after 10 % more asks
  arrived (what a later full collection walks).
- ``memory``: bytes per pending ask, counted by the heap's live bytes while the shared state's asks are
  added (from none), and of those the in-memory journal's event texts (which a SQLite or PostgreSQL store
  keeps on disk) and the state's own; the first asks also traced (``tracemalloc``) for the largest
  allocation sites (:class:`Memory`).
- ``restart``: the shared state (or, alone, the wide tree with its asks), snapshotted, then more events,
  written to SQLite (in large transactions); the time to open it again (snapshot + journal tail), and
  the CPU of the section's other parts.
- ``kueue``: admissions per CPU second for the two published shapes, against Kueue's ~43/s and ~42/s.
- ``kube``: the same two shapes as gated pods through the Kubernetes front against the API server
  emulator (``benchmarks/kube_shapes.py``): admitted pods/s and the mean time to admission (wall), the
  front's CPU per pod and the rate it alone could sustain, against Kueue's published rates.

- ``service`` (issue 39): the same tree served by a real uvicorn (its timeouts loop running); over HTTP, a
  release that frees one ask and the standing of a leaf and of an idle user, at each step of waiting asks.

**One shared state.** The full state (the wide tree with its users, applications and running
allocations, then its waiting asks) is built once: ``waiting`` grows its asks in steps (counted for
``memory``; without ``waiting``, ``memory`` adds the asks itself), ``decisions`` takes that state
as its 100x partition (no section puts waiting asks in the 100 leaves it works on) and ``restart``
stores and reopens it. ``gc``, ``service``, ``kueue`` and ``kube`` build their own. ``section_cost`` in
the results gives the CPU and wall seconds of each part and the load average around it (on a shared
machine the wall time is the CPU time stretched by the load; the summary printed at the end puts the
two side by side).

Run: ``.venv/bin/python benchmarks/scale.py`` (full size: ``--scale 1``; the default ``--scale 0.1``
takes a few minutes). ``--only waiting,decisions`` runs a subset. Results go to
``benchmarks/results/scale.json``. The test suite runs it at a tiny size as a smoke test.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import heapq
import os
import random
import re
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import write_results
from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.journal import open_journal
from quotaplane.scheduler import Scheduler

#: CPU seconds of this process (single-threaded, memory journal): far less disturbed by other processes
#: on a shared 2-core machine than the wall clock.
_cpu = time.process_time
CORE = Resource({"vcore": 1000})

#: the targets of issues 38 and 39 (milliseconds unless named otherwise)
TARGETS = {
    "release_p99_ms": 10.0, "check_timeouts_p99_ms": 10.0, "add_node_p99_ms": 10.0,
    "ratio_vs_baseline": 1.5, "standing_p99_ms": 100.0, "position_p99_ms": 100.0,
    "decisions_per_s": 5000.0, "decision_p99_ms": 10.0, "growth_1x_to_100x": 1.3,
    "bytes_per_pending_ask": 1024.0, "restart_s": 30.0,
}


class FakeClock:
    """A clock the benchmark moves by hand: no timeout or preemption delay falls due by accident."""

    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@dataclass(frozen=True)
class Shape:
    """The wide tree's sizes; ``of(scale)`` scales the full-size figures of issue 38."""

    divisions: int = 10
    departments: int = 10      # per division
    teams: int = 10            # per department
    leaves: int = 10           # per team
    users_per_leaf: int = 10   # one application each
    groups: int = 1000
    running_per_leaf: int = 10  # one core each; the leaf max is this many cores: every leaf is full

    @classmethod
    def of(cls, scale: float) -> Shape:
        """Fewer departments, then fewer teams, as ``scale`` drops below 1 (depth stays 5)."""
        if scale >= 1:
            return cls()
        total = max(1, round(1000 * scale))       # teams
        divisions = max(1, min(10, round(total ** (1 / 3))))
        departments = max(1, min(10, round((total / divisions) ** 0.5)))
        teams = max(1, round(total / (divisions * departments)))
        return cls(divisions=divisions, departments=departments, teams=teams,
                   groups=max(1, round(1000 * scale)))

    def leaf_paths(self) -> Iterator[str]:
        """Every leaf queue path, in config order."""
        for d in range(self.divisions):
            for p in range(self.departments):
                for t in range(self.teams):
                    for m in range(self.leaves):
                        yield f"root.d{d}.p{p}.t{t}.l{m}"

    @property
    def leaf_count(self) -> int:
        """How many leaf queues."""
        return self.divisions * self.departments * self.teams * self.leaves

    def config(self) -> str:
        """The queue YAML of this shape."""
        run = self.running_per_leaf
        team_max = run * self.leaves
        dept_g = team_max * self.teams // 2
        lines = ["partitions:", "- name: default", "  queues:", "  - name: root", "    submitacl: '*'",
                 "    queues:"]
        for d in range(self.divisions):
            lines += [f"    - name: d{d}",
                      f"      resources: {{guaranteed: {{vcore: {dept_g * self.departments}}}}}",
                      "      limits:",
                      "      - {limit: u, users: ['*'], maxresources: {vcore: 100000000}}",
                      "      - {limit: g0, groups: [g0], maxresources: {vcore: 100000000}}",
                      "      - {limit: gx, groups: ['*'], maxresources: {vcore: 100000000}}",
                      "      queues:"]
            for p in range(self.departments):
                lines += [f"      - name: p{p}", f"        resources: {{guaranteed: {{vcore: {dept_g}}}}}",
                          "        queues:"]
                for t in range(self.teams):
                    limit = f"{{limit: u, users: ['*'], maxresources: {{vcore: {team_max}}}}}"
                    lines += [f"        - name: t{t}", f"          limits: [{limit}]",
                              "          queues:"]
                    for m in range(self.leaves):
                        lines.append(f"          - {{name: l{m}, resources: {{max: {{vcore: {run}}}}}, "
                                     "limits: [{limit: u, users: ['*'], maxapplications: 1000}]}")
        return "\n".join(lines) + "\n"


class WideTree:
    """A partition of the wide tree, full, with its applications; asks are added by :meth:`grow`."""

    def __init__(self, shape: Shape, *, store: str | None = None) -> None:
        self.shape = shape
        self.clock = FakeClock()
        self.scheduler = Scheduler.from_yaml(shape.config(), store=store, clock=self.clock,
                                             snapshot_every=0)
        p = self.p = self.scheduler.partition("default")
        p.auto_schedule = False
        p.add_node("n0", Resource({"vcore": 10 ** 13, "memory": 10 ** 18}))
        self.leaves = list(shape.leaf_paths())
        #: applications per leaf, in order; the owner of each application
        self.apps: dict[str, list[str]] = {}
        self.owner: dict[str, str] = {}
        #: running allocation keys per leaf (oldest first) and waiting ask keys per leaf
        self.running: dict[str, list[str]] = {}
        self.waiting: dict[str, list[str]] = {leaf: [] for leaf in self.leaves}
        self._n = 0
        u = 0
        for leaf in self.leaves:
            names = []
            for _ in range(shape.users_per_leaf):
                user = UserGroup(f"u{u}", [f"g{u % shape.groups}"])
                app = f"a{u}"
                p.add_application(app, user, queue=leaf)
                names.append(app)
                self.owner[app] = user.user
                u += 1
            self.apps[leaf] = names
            keys = []
            for i in range(shape.running_per_leaf):
                key = self._key("r")
                assert p.allocate(names[i % len(names)], key, CORE).allocated, leaf
                keys.append(key)
            self.running[leaf] = keys
        # users with an application and nothing waiting (a standing of someone idle)
        self.idle_users = []
        for i in range(10):
            user = UserGroup(f"idle{i}", ["g0"])
            p.add_application(f"idle-{i}", user, queue=self.leaves[i * 7919 % len(self.leaves)])
            self.idle_users.append(user.user)
        p.auto_schedule = True

    def _key(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    @property
    def pending(self) -> int:
        """How many asks wait."""
        return sum(len(w) for w in self.waiting.values())

    def add_asks(self, leaves: list[str], count: int) -> None:
        """``count`` one-core asks spread round robin over ``leaves`` (each waits: the leaves are full)."""
        p = self.p
        p.auto_schedule = False         # they cannot fit: no cycle needed while adding them in bulk
        for i in range(count):
            leaf = leaves[i % len(leaves)]
            apps = self.apps[leaf]
            key = self._key("w")
            # a fresh request each, as the REST service or the Kubernetes front gives it
            p.add_ask(apps[len(self.waiting[leaf]) % len(apps)], key, {"vcore": 1000})
            self.waiting[leaf].append(key)
        p.auto_schedule = True
        # the cycle that tries the new asks once (as it would have run had they come one by one):
        # the measured operations then see the steady state, not this one-time catch-up
        assert not p.schedule()

    def free_one(self, leaf: str) -> float:
        """Release the oldest running allocation of ``leaf`` (one waiting ask of the leaf takes the room);
        return the CPU time of the release alone. The leaf then gets a new ask, so every step measures
        the same state."""
        key = self.running[leaf].pop(0)
        start = _cpu()
        self.p.release(key)
        took = _cpu() - start
        got = [k for k in self.waiting[leaf] if self.p.allocation(k) is not None]
        assert len(got) == 1, f"{len(got)} asks were allocated after the release in {leaf}"
        self.waiting[leaf].remove(got[0])
        self.running[leaf].append(got[0])
        apps = self.apps[leaf]
        key = self._key("w")
        self.p.add_ask(apps[len(self.waiting[leaf]) % len(apps)], key, CORE)
        assert self.p.allocation(key) is None
        self.waiting[leaf].append(key)
        return took


def _timed(fn: Callable[[], Any]) -> float:
    start = _cpu()
    fn()
    return _cpu() - start


def _quantiles(samples: list[float]) -> dict[str, float]:
    xs = sorted(samples)
    pick = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]  # noqa: E731
    return {"p50_ms": round(pick(0.5) * 1e3, 3), "p99_ms": round(pick(0.99) * 1e3, 3),
            "max_ms": round(xs[-1] * 1e3, 3), "n": len(xs)}


def _journal_bytes(w: WideTree) -> int:
    """What the in-memory journal's event texts and their lists take (0 with another store)."""
    text_bytes = getattr(w.scheduler.journal, "text_bytes", None)
    return int(text_bytes()) if text_bytes is not None else 0


def _own_lists_bytes(w: WideTree) -> int:
    """What the benchmark's own lists of waiting keys per leaf take (not the engine's memory)."""
    return sum(sys.getsizeof(keys) for keys in w.waiting.values())


def decision_leaves(leaves: list[str]) -> list[str]:
    """The 100 leaves the ``decisions`` section works on (every how-manieth leaf): the other sections
    put no waiting asks there, so that its 100x partition can be the state they share."""
    return leaves[:: max(1, len(leaves) // 100)][:100]


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (``mallinfo2(3)``)."""

    _fields_ = [(name, ctypes.c_size_t)
                for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                             "uordblks", "fordblks", "keepcost")]


def _heap_bytes() -> int | None:
    """Bytes in live blocks of the process's heap: CPython's small-object allocator's allocated blocks
    (``sys._debugmallocstats``, which writes to the C ``stderr``) plus what glibc's ``malloc`` has handed
    out (``mallinfo2``: in its arenas and in mmapped chunks). What ``tracemalloc`` counts (blocks still
    allocated) with the allocators' rounding, at no cost to the allocations in between — tracing slows
    each threefold. ``None`` where either is unavailable (not glibc, another Python)."""
    stats = getattr(sys, "_debugmallocstats", None)
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    if stats is None:
        return None
    mallinfo2.restype = _MallInfo2
    with tempfile.TemporaryFile() as f:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            stats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        found = re.search(rb"# bytes in allocated blocks\s*=\s*([\d,]+)", f.read())
    if found is None:
        return None
    info = mallinfo2()
    return int(found.group(1).replace(b",", b"")) + int(info.uordblks) + int(info.hblkhd)


class Memory:
    """The ``memory`` section: bytes per pending ask while asks are added to the shared state — whatever
    the engine keeps per ask (the ask, its key, indexes, the usage history's charge, timers, wake and
    reservation entries) and, apart, the in-memory journal's event texts (which a SQLite or PostgreSQL
    store keeps on disk). The benchmark's own lists of keys are left out.

    Every ask is counted by the heap's live bytes before and after each step (:func:`_heap_bytes`);
    the first ``trace_asks`` are also traced (``tracemalloc``) for where the bytes go (``by_site``).
    Tracing slows every allocation about threefold: tracing all 500,000 asks of the full size took
    124 s of CPU, two thirds of it the tracing. Traced only while asks are added, so the measured
    operations of the other sections run untraced; in the traced figure an object allocated before a
    step and freed during it (a table of a dict that grew) is not subtracted, which overstates it a
    little (the heap's figure subtracts it)."""

    def __init__(self, trace_asks: int = 10_000) -> None:
        self.trace_asks = trace_asks
        self.asks = 0
        self.heap: int | None = 0
        self.journal = 0
        self.own = 0
        self.traced_asks = 0
        self.traced = 0
        self.traced_journal = 0
        self.traced_own = 0
        self.cpu_s = 0.0
        self.traced_cpu_s = 0.0
        self.sites: dict[str, int] = {}

    def grow(self, w: WideTree, leaves: list[str], count: int) -> None:
        """``w.add_asks(leaves, count)`` and the settling that follows a bulk build (the usage
        history's deferred accounting of the asks), counted (and traced while fewer than
        ``trace_asks`` were)."""
        gc.collect()
        before, journal, own, cpu = w.pending, _journal_bytes(w), _own_lists_bytes(w), _cpu()
        heap = _heap_bytes()
        trace = self.traced_asks < self.trace_asks
        if trace:
            tracemalloc.start()
        try:
            w.add_asks(leaves, count)
            w.scheduler.settle()
            gc.collect()
            if trace:
                traced = tracemalloc.get_traced_memory()[0]
                stats = tracemalloc.take_snapshot().statistics("lineno")
        finally:
            if trace:
                tracemalloc.stop()
        added, journal, own = w.pending - before, _journal_bytes(w) - journal, _own_lists_bytes(w) - own
        if trace:
            self.traced_asks += added
            self.traced += traced
            self.traced_journal += journal
            self.traced_own += own
            self.traced_cpu_s += _cpu() - cpu
            for st in stats[:40]:
                frame = st.traceback[0]
                name = frame.filename
                name = name.rsplit("/src/", 1)[-1] if "/src/" in name else "/".join(name.split("/")[-2:])
                site = f"{name}:{frame.lineno}"
                self.sites[site] = self.sites.get(site, 0) + st.size
            del stats
        after = _heap_bytes()
        self.heap = None if heap is None or after is None or self.heap is None else self.heap + after - heap
        self.cpu_s += _cpu() - cpu
        self.asks += added
        self.journal += journal
        self.own += own

    def result(self) -> dict[str, Any]:
        """Bytes per pending ask: in all (the engine with its in-memory journal), the journal's part,
        the state's own — of every ask by the heap's live bytes (by tracing where that is not
        available), and of the traced ones by tracing, with the largest allocation sites."""
        n = max(1, self.asks)
        traced_n = max(1, self.traced_asks)
        traced = self.traced - self.traced_own
        engine = (self.heap - self.own) / n if self.heap is not None else traced / traced_n
        journal = self.journal / n if self.heap is not None else self.traced_journal / traced_n
        sites = sorted(self.sites.items(), key=lambda kv: -kv[1])[:20]
        return {"pending_asks": self.asks, "measured_by": "heap" if self.heap is not None else "tracemalloc",
                "bytes_per_pending_ask": round(engine),
                "journal_bytes_per_pending_ask": round(journal),
                "state_bytes_per_pending_ask": round(engine - journal),
                "cpu_s": round(self.cpu_s, 1),
                "pending_asks_traced": self.traced_asks,
                "traced_bytes_per_pending_ask": round(traced / traced_n),
                "traced_state_bytes_per_pending_ask": round((traced - self.traced_journal) / traced_n),
                "traced_cpu_s": round(self.traced_cpu_s, 1),
                "by_site": {k: round(v / traced_n, 1) for k, v in sites}}


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def waiting(w: WideTree, steps: list[int], samples: int, memory: Memory | None = None) -> dict[str, Any]:
    """Issue 39's table: the operations that must not grow with the asks waiting elsewhere. ``w`` is
    the shared state, with no asks yet; it is left with the last step's asks (none in the leaves of
    :func:`decision_leaves`) and its one node. ``memory``: the asks added are traced for it.

    Measured as a serving process holds the state (``gcfreeze.enable``, what ``quotaplane serve``
    does): after the build and after each step's asks were added in bulk, the state is settled by the
    call that ends a restore (``Scheduler.settle``), so no measured operation pays for the build."""
    from quotaplane.partition import gcfreeze

    gcfreeze.enable()
    try:
        return _waiting(w, steps, samples, memory)
    finally:
        gcfreeze.enable(False)
        gc.unfreeze()


def _waiting(w: WideTree, steps: list[int], samples: int, memory: Memory | None) -> dict[str, Any]:
    shape = w.shape
    rng = random.Random(39)
    free = [leaf for leaf in w.leaves if leaf not in set(decision_leaves(w.leaves))] or w.leaves
    touched = rng.sample(free, min(len(free), max(10, samples // 4)))

    def grow(leaves: list[str], count: int) -> None:
        if memory is not None:
            memory.grow(w, leaves, count)     # settles too
        else:
            w.add_asks(leaves, count)
            w.scheduler.settle()

    rss_before, asks_before, journal_before = _rss(), w.pending, _journal_bytes(w)
    # the baseline: asks waiting only in the touched leaves (enough for every sample)
    grow(touched, len(touched) * 8)
    out: dict[str, Any] = {"leaf_queues": shape.leaf_count, "users": len(w.owner)}
    rows = []
    others = [leaf for leaf in free if leaf not in set(touched)] or free
    bytes_per_ask: float | None = None
    journal_per_ask: float | None = None
    for target in [0, *steps]:
        add = target - (w.pending - len(touched) * 8) if target else 0
        if add > 0:
            gc.collect()
            grow(others, add)
            gc.collect()
            if w.pending > asks_before and memory is None:     # tracing inflates the RSS
                bytes_per_ask = (_rss() - rss_before) / (w.pending - asks_before)
                journal_per_ask = (_journal_bytes(w) - journal_before) / (w.pending - asks_before)
        row = _measure_waiting(w, touched, samples, rng)
        row["pending"] = w.pending
        rows.append(row)
        print(f"  waiting: {w.pending} pending: " + ", ".join(
            f"{k} {v['p50_ms']}/{v['p99_ms']}" for k, v in row.items() if isinstance(v, dict)), flush=True)
    base = rows[0]
    for row in rows[1:]:
        row["ratios_p50"] = {k: round(v["p50_ms"] / max(base[k]["p50_ms"], 1e-3), 2)
                             for k, v in row.items() if isinstance(v, dict) and "p50_ms" in v}
    out["steps"] = rows
    # RSS growth per ask (None when the memory section traced the growth: see ``memory``)
    out["bytes_per_pending_ask"] = round(bytes_per_ask) if bytes_per_ask is not None else None
    # of which the in-memory journal's text of each ask_added event (a SQLite or PostgreSQL store keeps
    # it on disk, not in the process): the state itself is the difference
    out["journal_bytes_per_pending_ask"] = round(journal_per_ask) if journal_per_ask is not None else None
    if bytes_per_ask is not None and journal_per_ask is not None:
        out["state_bytes_per_pending_ask"] = round(bytes_per_ask - journal_per_ask)
    return out


def _measure_waiting(w: WideTree, touched: list[str], samples: int, rng: random.Random) -> dict[str, Any]:
    p = w.p
    release = [w.free_one(touched[i % len(touched)]) for i in range(samples)]
    timeouts = [_timed(lambda: p.check_timeouts()) for _ in range(max(5, samples // 10))]
    nodes = []
    for _ in range(max(5, samples // 10)):
        node = w._key("n")
        nodes.append(_timed(lambda node=node: p.add_node(node, Resource({"vcore": 1000}))))
        # nothing can take it (every leaf is at its max): removed again, so the state the other
        # sections share keeps its one node (the decisions' 1x and 10x partitions have one)
        assert not p.node_allocations(node), node
        p.remove_node(node)
    leaf_standing = [_timed(lambda leaf=rng.choice(touched): p.standing("queue", leaf))
                     for _ in range(max(5, samples // 10))]
    idle_standing = [_timed(lambda u=rng.choice(w.idle_users): p.standing("user", u))
                     for _ in range(max(5, samples // 10))]

    def position() -> None:
        leaf = rng.choice(touched)
        key = w.waiting[leaf][len(w.waiting[leaf]) // 2]
        ask = p.get_ask(key)
        assert ask is not None
        st = p.standing("user", w.owner[ask.application_id])
        assert any(x["allocationKey"] == key and x["position"] for x in st["waiting"]), key

    positions = [_timed(position) for _ in range(max(5, samples // 10))]
    return {"release_frees_one": _quantiles(release), "check_timeouts_nothing_due": _quantiles(timeouts),
            "add_node": _quantiles(nodes), "standing_leaf": _quantiles(leaf_standing),
            "standing_idle_user": _quantiles(idle_standing), "position_of_ask": _quantiles(positions)}


def gc_pauses(scale: float, pending: int) -> dict[str, Any]:
    """Issue 39: a full collection's pause with ``pending`` asks waiting, before and after settling."""
    from quotaplane.partition import gcfreeze

    w = WideTree(Shape.of(scale))
    w.add_asks(w.leaves, pending)

    def full() -> dict[str, float]:
        xs = []
        for _ in range(5):
            t0 = _cpu()
            gc.collect()
            xs.append(_cpu() - t0)
        xs.sort()
        return {"p50_ms": round(xs[2] * 1e3, 3), "max_ms": round(xs[-1] * 1e3, 3)}

    gc.unfreeze()
    before = full()
    objects = len(gc.get_objects())
    gcfreeze.enable()
    try:
        gcfreeze.settle()
        after = full()
        w.add_asks(w.leaves, pending // 10)
        grown = full()
    finally:
        gcfreeze.enable(False)
        gc.unfreeze()
    out = {"pending": w.pending, "tracked_objects": objects, "full_collection_before": before,
           "full_collection_after_settle": after, "after_10pct_more_asks": grown}
    print(f"  gc: {out}", flush=True)
    return out


def service(scale: float, steps: list[int], samples: int) -> dict[str, Any]:
    """Issue 39 through the REST service: the wide tree served by a real uvicorn (its timeouts loop
    running, holding the partition's lock at every tick), and over HTTP at each step of waiting asks:
    a release that frees room for one waiting ask (``DELETE …/allocation/{key}``), the standing of a
    leaf queue and of an idle user (``GET …/standing``). Wall-clock milliseconds per request; the
    baseline is the first step (asks waiting only in the touched leaves)."""
    import http.client
    import threading

    import uvicorn

    from quotaplane.server.app import create_app

    w = WideTree(Shape.of(scale))
    rng = random.Random(39)
    touched = rng.sample(w.leaves, min(len(w.leaves), max(10, samples // 4)))
    w.add_asks(touched, len(touched) * 8)
    others = [leaf for leaf in w.leaves if leaf not in set(touched)] or w.leaves
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(create_app(w.scheduler), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on",
                                           # the steps between measurements take longer than uvicorn's
                                           # 5 s keep-alive on a loaded machine: keep the one connection
                                           timeout_keep_alive=3600))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def get(path: str) -> float:
        start = time.perf_counter()
        conn.request("GET", path)
        r = conn.getresponse()
        r.read()
        assert r.status == 200, (path, r.status)
        return time.perf_counter() - start

    def release(leaf: str) -> float:
        key = w.running[leaf].pop(0)
        start = time.perf_counter()
        conn.request("DELETE", f"/ws/v1/partition/default/allocation/{key}")
        r = conn.getresponse()
        r.read()
        took = time.perf_counter() - start
        assert r.status == 200, r.status
        with w.p.lock:
            got = [k for k in w.waiting[leaf] if w.p.allocation(k) is not None]
            assert len(got) == 1, got
            w.waiting[leaf].remove(got[0])
            w.running[leaf].append(got[0])
            apps = w.apps[leaf]
            new = w._key("w")
            w.p.add_ask(apps[len(w.waiting[leaf]) % len(apps)], new, CORE)
            w.waiting[leaf].append(new)
        return took

    rows = []
    try:
        for target in [0, *steps]:
            add = target - (w.pending - len(touched) * 8) if target else 0
            if add > 0:
                with w.p.lock:
                    w.add_asks(others, add)
            # the full collection the growth made due runs now, not inside the first measured requests:
            # a pause of the whole heap (0.6 s at --scale 0.1), paid once per 25 % of growth whatever waits
            gc.collect()
            row: dict[str, Any] = {
                "release_frees_one": _quantiles([release(touched[i % len(touched)]) for i in range(samples)]),
                "standing_leaf": _quantiles([get("/ws/v1/partition/default/standing?kind=queue&name="
                                                 + rng.choice(touched))
                                             for _ in range(max(5, samples // 4))]),
                "standing_idle_user": _quantiles([get(f"/ws/v1/partition/default/standing?kind=user&name="
                                                      f"{rng.choice(w.idle_users)}")
                                                  for _ in range(max(5, samples // 4))]),
                "pending": w.pending}
            rows.append(row)
            print(f"  service: {w.pending} pending: " + ", ".join(
                f"{k} {v['p50_ms']}/{v['p99_ms']}" for k, v in row.items() if isinstance(v, dict)),
                flush=True)
    finally:
        conn.close()
        server.should_exit = True
        thread.join(10)
    base = rows[0]
    for row in rows[1:]:
        row["ratios_p50"] = {k: round(v["p50_ms"] / max(base[k]["p50_ms"], 1e-3), 2)
                             for k, v in row.items() if isinstance(v, dict) and "p50_ms" in v}
    return {"steps": rows}


class DecisionRun:
    """One partition of the ``decisions`` section: the wide tree at ``factor`` of the 1x size, its
    untouched leaves with 50 waiting asks each, and the mixed operations on ``touched`` leaves — as
    many in every partition (every leaf of the 1x one), so that the three do the same work and differ
    only by what is untouched: with 80 touched leaves at 1x and 100 at 10x and 100x, the same sequence
    of operations did not do the same work (twice the reservation checks at 100x)."""

    def __init__(self, scale: float, factor: int, shared: WideTree | None = None,
                 touched: int = 100) -> None:
        self.factor = factor
        self.shape = Shape.of(scale * factor / 100)
        # the 100x partition is the state the sections share (its asks added by the waiting section's
        # steps, or here), the others are built for the section
        self.w = w = shared if shared is not None else WideTree(self.shape)
        assert w.shape == self.shape
        self.touched = decision_leaves(w.leaves)[:touched]
        others = [leaf for leaf in w.leaves if leaf not in set(self.touched)]
        assert not any(w.waiting[leaf] for leaf in self.touched)
        missing = 50 * len(others) - sum(len(w.waiting[leaf]) for leaf in others)
        if others and missing > 0:
            w.add_asks(others, missing)
        # the same sequence of operations in every partition: the same work, whatever waits elsewhere
        self.rng = random.Random(38)
        self.i = 0
        self.lat: list[float] = []
        self.chunks: list[float] = []

    def chunk(self, ops: int) -> None:
        """``ops`` more operations; their CPU time is one sample of :attr:`chunks`."""
        start = _cpu()
        for _ in range(ops):
            self._one()
        self.chunks.append((_cpu() - start) / ops)

    def _one(self) -> None:
        w, p, rng = self.w, self.w.p, self.rng
        i = self.i = self.i + 1
        leaf = self.touched[rng.randrange(len(self.touched))]
        apps = w.apps[leaf]
        r = rng.random()
        if r < 0.45 and w.running[leaf]:           # a release (the first waiting ask may take it)
            key = w.running[leaf].pop(rng.randrange(len(w.running[leaf])))
            t = _cpu()
            p.release(key)
            self.lat.append(_cpu() - t)
            if w.waiting[leaf]:
                got = w.waiting[leaf][0]
                if p.allocation(got) is not None:
                    w.waiting[leaf].pop(0)
                    w.running[leaf].append(got)
        elif r < 0.8:                              # a direct allocation (refused when the leaf is full)
            key = w._key("d")
            t = _cpu()
            d = p.allocate(apps[i % len(apps)], key, CORE)
            self.lat.append(_cpu() - t)
            if d.allocated:
                w.running[leaf].append(key)
        else:                                      # an ask arrives
            key = w._key("w")
            t = _cpu()
            p.add_ask(apps[i % len(apps)], key, CORE)
            self.lat.append(_cpu() - t)
            if p.allocation(key) is not None:
                w.running[leaf].append(key)
            else:
                w.waiting[leaf].append(key)


def decisions(scale: float, ops: int, shared: WideTree | None = None) -> dict[str, Any]:
    """Mixed allocate/release with asks arriving on the same touched leaves, at 1x, 10x, 100x untouched.

    The three partitions live side by side and take turns, a chunk of operations each, so that a
    load that comes and goes on the machine falls on all three alike; the cost per decision of each
    is the median of its chunks (CPU seconds), and the growth compares those medians.
    """
    if shared is not None and any(shared.waiting[leaf] for leaf in decision_leaves(shared.leaves)):
        shared = None       # a tree too small to keep the sections' leaves apart: a partition of its own
    touched = min(100, Shape.of(scale / 100).leaf_count)
    runs = [DecisionRun(scale, 1, touched=touched), DecisionRun(scale, 10, touched=touched),
            DecisionRun(scale, 100, shared, touched=touched)]
    gc.collect()
    gc.freeze()                  # what a serving process does once its state is built (gcfreeze)
    chunk = max(50, ops // 40)
    for _ in range(max(1, ops // chunk)):
        for run in runs:
            run.chunk(chunk)
    out: dict[str, Any] = {}
    per_op: dict[str, float] = {}
    for run in runs:
        xs = sorted(run.chunks)
        per_op[f"{run.factor}x"] = med = xs[len(xs) // 2]
        out[f"{run.factor}x"] = {"leaf_queues": run.shape.leaf_count, "users": len(run.w.owner),
                                 "pending": run.w.pending, "decisions_per_s": round(1 / med),
                                 "chunks": len(xs), **_quantiles(run.lat)}
        print(f"  decisions at {run.factor}x: {out[f'{run.factor}x']}", flush=True)
    gc.unfreeze()
    del runs
    gc.collect()
    out["100x_is_shared_state"] = shared is not None
    out["growth_1x_to_100x"] = round(per_op["100x"] / per_op["1x"], 2)
    out["growth_1x_to_10x"] = round(per_op["10x"] / per_op["1x"], 2)
    return out


def _copy_store(source: Any, url: str, batch: int = 20_000) -> None:
    """Write every stream and snapshot of the journal ``source`` into the store at ``url``, ``batch``
    events per transaction (the same events and seqs: a store a restart cannot tell from one that
    journalled them one by one)."""
    target = open_journal(url)
    try:
        for stream in source.streams():
            events = [ev for _seq, ev in source.read(stream)]
            for i in range(0, len(events), batch):
                target.append(stream, events[i:i + batch])
            snap = source.load_snapshot(stream)
            if snap is not None:
                target.save_snapshot(stream, *snap)
    finally:
        target.close()


def restart(scale: float, pending: int, shared: list[WideTree] | None = None) -> dict[str, Any]:
    """The wide tree with ``pending`` asks: snapshot, more events, then open it again from SQLite.

    The state is built with its journal in memory and written to SQLite afterwards in large
    transactions (``store_s``): the same events and snapshot as journalling each change in its own
    transaction, which at 500,000 asks took minutes of the run and measures nothing of the restart.
    ``shared``: a one-element list holding the state the other sections share (taken out of it, so
    that the state is freed before the reopen): its journal is what is stored, and ``pending`` is
    what waits in it — building a second one measured nothing more (the same tree, users,
    allocations and asks, journalled by the same write path)."""
    parts: dict[str, float] = {}

    @contextmanager
    def part(name: str) -> Iterator[None]:
        cpu = _cpu()
        try:
            yield
        finally:
            parts[name] = round(parts.get(name, 0.0) + _cpu() - cpu, 2)

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/scale.db"
        t = time.perf_counter()
        if shared:
            w = shared.pop()
            shape = w.shape
        else:
            shape = Shape.of(scale)
            with part("build"):
                w = WideTree(shape)
                w.add_asks(w.leaves, pending)
        pending = w.pending
        built = time.perf_counter() - t
        gc.collect()
        gc.freeze()     # what a serving process does once its state is built (gcfreeze.settle)
        t = time.perf_counter()
        with part("snapshot"):
            seq = w.p.take_snapshot()
        snap = time.perf_counter() - t
        # the tail: 1,000 releases, each freeing room that one waiting ask takes (3 events each), in
        # leaves no other section works on
        spare = set(decision_leaves(w.leaves))
        ready = [leaf for leaf in w.leaves if w.waiting[leaf] and w.running[leaf]]
        tail_leaves = ([leaf for leaf in ready if leaf not in spare] or ready)[:1000]
        with part("tail"):
            for leaf in tail_leaves:
                w.free_one(leaf)
        tail = w.scheduler.journal.last_seq(w.p.stream) - seq
        with part("dump"):
            state = w.p.dump_state()
        t = time.perf_counter()
        with part("store"):
            _copy_store(w.scheduler.journal, url)
        stored = time.perf_counter() - t
        w.scheduler.close(snapshot=False)
        del w
        gc.unfreeze()
        with part("free"):
            gc.collect()
        t, cpu = time.perf_counter(), _cpu()
        s = Scheduler.from_yaml(shape.config(), store=url, clock=FakeClock(), snapshot_every=0)
        took, took_cpu = time.perf_counter() - t, _cpu() - cpu
        assert s.restored_from == {"default": "snapshot"}, s.restored_from
        with part("check"):
            same = s.partition("default").dump_state() == state
        assert same, "restart did not restore the same state"
        s.close(snapshot=False)
        size = os.path.getsize(f"{tmp}/scale.db")
        return {"pending": pending, "shared_state": bool(shared is not None), "build_s": round(built, 1),
                "snapshot_s": round(snap, 2), "store_s": round(stored, 1), "snapshot_seq": seq,
                "tail_events": tail, "restart_s": round(took, 2),
                # CPU: what a loaded machine disturbs little (the wall time is what it gave)
                "restart_cpu_s": round(took_cpu, 2),
                # the CPU seconds of the section's other parts: what the reopen is not
                "parts_cpu_s": parts,
                "store_mb": round(size / 2 ** 20, 1)}


@dataclass(frozen=True)
class KueueShape:
    """One of Kueue's published generator configs (cohorts x queues x workload classes)."""

    name: str
    cohorts: int
    queues: int                 # per cohort
    nominal: int                # cores
    borrowing_limit: int
    #: (count per queue, creation interval ms, runtime ms, priority, request cores)
    classes: tuple[tuple[int, int, int, int, int], ...]
    published_per_s: float

    def config(self) -> str:
        """The queue YAML: a cohort is a parent, a ClusterQueue a leaf (guaranteed nominal, max
        nominal + borrowing limit)."""
        lines = ["partitions:", "- name: default", "  queues:", "  - name: root", "    submitacl: '*'",
                 "    queues:"]
        for c in range(self.cohorts):
            lines += [f"    - name: cohort{c}", "      queues:"]
            for q in range(self.queues):
                lines.append(f"      - {{name: cq{q}, resources: {{guaranteed: {{vcore: {self.nominal}}}, "
                             f"max: {{vcore: {self.nominal + self.borrowing_limit}}}}}}}")
        return "\n".join(lines) + "\n"


KUEUE_BASELINE = KueueShape("baseline", 5, 6, 20, 100,
                            ((350, 100, 200, 50, 1), (100, 500, 500, 100, 5), (50, 1200, 1000, 200, 20)),
                            43.0)
KUEUE_LARGE = KueueShape("large-scale", 20, 100, 20, 100,
                         ((20, 20, 50, 50, 1), (7, 50, 100, 100, 5), (3, 200, 200, 200, 20)), 42.0)


def kueue(shape: KueueShape, fraction: float) -> dict[str, Any]:
    """Drive the shape's workloads through the engine on a virtual clock; admissions per CPU second."""
    clock = FakeClock(0.0)
    s = Scheduler.from_yaml(shape.config(), clock=clock, snapshot_every=0)
    p = s.partition("default")
    cohort_quota = shape.nominal * shape.queues
    p.add_node("n0", Resource({"vcore": cohort_quota * shape.cohorts * 1000}))
    events: list[tuple[float, int, str, str, int, int]] = []   # (due, tie, kind, key, cores, priority)
    n = 0
    for c in range(shape.cohorts):
        for q in range(shape.queues):
            app = f"c{c}q{q}"
            p.add_application(app, UserGroup(f"user-{app}"), queue=f"root.cohort{c}.cq{q}")
            for ci, (count, every, _runtime, prio, cores) in enumerate(shape.classes):
                for i in range(max(1, round(count * fraction))):
                    n += 1
                    heapq.heappush(events, (i * every / 1000, n, "create", f"{app}-{ci}-{i}", cores, prio))
    runtime = {f"{ci}": cl[2] / 1000 for ci, cl in enumerate(shape.classes)}
    submitted = n
    admitted = 0
    waits: list[float] = []
    created: dict[str, float] = {}

    def on_allocated(key: str) -> None:
        nonlocal n, admitted
        admitted += 1
        waits.append(clock.t - created[key])
        n += 1
        heapq.heappush(events, (clock.t + runtime[key.split("-")[1]], n, "finish", key, 0, 0))

    fresh: list[str] = []
    p.subscribe(lambda n: fresh.append(n["allocationKey"]) if n["type"] == "allocated" else None)
    start = _cpu()
    while events:
        due, _, kind, key, cores, prio = heapq.heappop(events)
        clock.t = max(clock.t, due)
        if kind == "create":
            created[key] = clock.t
            p.add_ask(key.split("-")[0], key, Resource({"vcore": cores * 1000}), priority=prio)
        else:
            p.release(key)
        for k in fresh:
            on_allocated(k)
        fresh.clear()
    took = _cpu() - start
    assert admitted == submitted, (admitted, submitted)
    virtual = clock.t
    ws = sorted(waits)
    return {"workloads": submitted, "queues": shape.cohorts * shape.queues, "cpu_s": round(took, 2),
            "admissions_per_cpu_s": round(admitted / took), "virtual_s": round(virtual, 1),
            "mean_wait_virtual_s": round(sum(ws) / len(ws), 3),
            "published_kueue_per_s": shape.published_per_s,
            "ratio_vs_kueue": round(admitted / took / shape.published_per_s, 1)}


def kube_front(fraction: float) -> dict[str, Any]:
    """Kueue's two shapes as gated pods through the Kubernetes front (``kube_shapes.run``): below the
    full size, ``fraction`` of each queue's workloads and (as in ``kueue``) of the cohorts."""
    import kube_shapes

    out: dict[str, Any] = {}
    for shape in (kube_shapes.BASELINE, kube_shapes.LARGE):
        scaled = kube_shapes._scaled(shape, fraction)
        if fraction < 1:
            scaled = replace(scaled, cohorts=max(1, round(shape.cohorts * fraction)))
        out[shape.name] = kube_shapes.run(scaled)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the chosen sections; write ``benchmarks/results/scale.json``.

    The full state (the wide tree, its users, applications and running allocations, then its waiting
    asks) is built once and shared, in this order: ``waiting`` grows its asks in steps (traced for
    ``memory``), ``decisions`` takes it as its 100x partition. The other sections build their own."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=0.1, help="1 = the full size of issue 38")
    ap.add_argument("--only", default="waiting,memory,decisions,restart,kueue,kube")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--out", default="scale")
    ap.add_argument("--pending", default="",
                    help="waiting asks of the waiting/service steps, comma-separated (default: 10,000, "
                         "100,000 and 500,000 times --scale)")
    ap.add_argument("--pending-gc", type=int, default=100_000, help="waiting asks of the gc section")
    ap.add_argument("--kueue-fraction", type=float, default=None,
                    help="the share of Kueue's published shapes the kueue section drives (default: "
                         "--scale times 10, at most 1: their full size from --scale 0.1 on)")
    ap.add_argument("--kube-fraction", type=float, default=None,
                    help="the share of Kueue's shapes the kube section sends through the Kubernetes "
                         "front (default: --scale times 10, at most 1)")
    args = ap.parse_args(argv)
    scale = args.scale
    sections = set(args.only.split(","))
    unknown = sections - {"waiting", "memory", "gc", "service", "decisions", "restart", "kueue", "kube"}
    if unknown:
        ap.error(f"--only: unknown section(s) {', '.join(sorted(unknown))}")
    full_pending = 500_000
    steps = sorted({max(1, round(x * scale)) for x in (10_000, 100_000, full_pending)})
    if args.pending:
        steps = sorted({int(x) for x in args.pending.split(",")})
    results: dict[str, Any] = {"scale": scale, "targets": TARGETS}
    cost: dict[str, dict[str, float]] = {}
    results["section_cost"] = cost

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        load = os.getloadavg()[0]
        wall, cpu = time.perf_counter(), _cpu()
        try:
            return fn()
        finally:
            cost[name] = {"cpu_s": round(_cpu() - cpu, 1), "wall_s": round(time.perf_counter() - wall, 1),
                          # the 1-minute load average before and after: what stretched wall over CPU
                          "load": [round(load, 1), round(os.getloadavg()[0], 1)]}
            print(f"  {name}: {cost[name]}", flush=True)

    shared: WideTree | None = None
    memory = Memory() if "memory" in sections else None
    if sections & {"waiting", "memory", "decisions"}:
        shared = timed("build", lambda: WideTree(Shape.of(scale)))
        results["shared"] = {"leaf_queues": shared.shape.leaf_count, "users": len(shared.owner),
                             "build_cpu_s": cost["build"]["cpu_s"]}
    if "waiting" in sections:
        assert shared is not None
        results["waiting"] = timed("waiting", lambda: waiting(shared, steps, args.samples, memory))
    if memory is not None:
        assert shared is not None
        if not memory.asks:     # no waiting section: the decisions' 100x asks, traced
            others = [leaf for leaf in shared.leaves
                      if leaf not in set(decision_leaves(shared.leaves))] or shared.leaves
            timed("memory", lambda: memory.grow(shared, others, 50 * len(others)))
        results["memory"] = memory.result()
        print(f"  memory: {results['memory']}", flush=True)
    if "decisions" in sections:
        results["decisions"] = timed("decisions", lambda: decisions(
            scale, max(2000, round(20_000 * min(1.0, scale * 10))), shared))
    if shared is not None:
        results["shared"]["pending"] = shared.pending
    if "restart" in sections and shared is not None:
        # the restart stores the shared state's journal and reopens it: handed over (and freed there)
        handed = [shared]
        shared = None
        results["restart"] = timed("restart", lambda: restart(scale, 0, handed))
        print(f"  restart: {results['restart']}", flush=True)
    shared = None
    gc.collect()
    if "gc" in sections:
        results["gc"] = timed("gc", lambda: gc_pauses(scale, args.pending_gc))
    if "service" in sections:
        results["service"] = timed("service", lambda: service(scale, steps, args.samples))
    if "restart" in sections and "restart" not in results:
        results["restart"] = timed("restart", lambda: restart(scale, round(full_pending * scale)))
        print(f"  restart: {results['restart']}", flush=True)
    if "kueue" in sections:
        # below --scale 0.1, fewer cohorts and fewer workloads each
        frac = min(1.0, scale * 10) if args.kueue_fraction is None else args.kueue_fraction
        results["kueue_fraction"] = frac
        results["kueue"] = timed("kueue", lambda: {
            k.name: kueue(replace(k, cohorts=max(1, round(k.cohorts * frac))), frac)
            for k in (KUEUE_BASELINE, KUEUE_LARGE)})
        print(f"  kueue: {results['kueue']}", flush=True)
    if "kube" in sections:
        frac = min(1.0, scale * 10) if args.kube_fraction is None else args.kube_fraction
        results["kube_fraction"] = frac
        results["kube"] = timed("kube", lambda: kube_front(frac))
        print(f"  kube: {results['kube']}", flush=True)
    cost["total"] = {"cpu_s": round(sum(c["cpu_s"] for c in cost.values()), 1),
                     "wall_s": round(sum(c["wall_s"] for c in cost.values()), 1)}
    write_results(args.out, results)
    print("section        CPU s   wall s  wall/CPU  load before-after")
    for name, c in cost.items():
        ratio = f"{c['wall_s'] / c['cpu_s']:.2f}" if c["cpu_s"] else "-"
        load = "-".join(str(x) for x in c.get("load", []))
        print(f"{name:<12} {c['cpu_s']:>7} {c['wall_s']:>8} {ratio:>9}  {load}")
    return results


if __name__ == "__main__":
    main()
