"""The fault suite's verdict: every answer the workload got, judged against the journal (the store
the instances wrote) and the instances' leadership log. What it accepts is the model written in
docs/operations.md ("What is promised: reads, writes, unknown outcomes"):

* **lost** — an allocation or a release answered done (2xx) that the journal does not hold — or
  answered as done by a retry's "already there" (409 exists) / "already gone" (404 to a release of
  an allocation the journal holds);
* **phantom** — a change the journal holds although every attempt of it was refused with a decision
  (409 does not fit, 4xx): only a done or an unknown answer may stand behind a journalled change;
* **unknown as unchanged** — a change the journal holds although every attempt was answered 503
  ("nothing was changed");
* **double** — an allocation key allocated or released twice in the journal (a retry that applied a
  change again);
* **over limit** — at some point of a partition's journal its queue held more than its maximum (two
  admissions that together exceed the limit);
* **split brain** — two instances serving one partition at once, by their leadership log (each
  serves from the round that took the partition until it stopped, or its lease's trusted end);
* **stale reads** — a read sent after an allocation was answered done and before its release was
  sent that says "not there", or sent after its release was answered done that says "there";
  ``stale past margin`` counts those sent more than the lease margin after the answer they missed;
* **server errors** — answers outside the model (500 and the like);
* **state vs journal** — after every fault, once the writers are held and every partition is led
  again, what each instance serves of a partition (the application's allocations, key and amount)
  differs from what replaying the partition's journal gives (:func:`state_disagreements`).

An unknown outcome (502, no answer) is allowed either way; the journal decides it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.faults.workload import Record

__all__ = ["Verdict", "check", "journal_events", "leadership_intervals", "live_allocations",
           "state_disagreements"]

_DONE = {"ok"}
_MAY = {"ok", "unknown", "exists"}       # answers that may stand behind an applied change


@dataclass
class Verdict:
    """What the checker found (every list names the cases)."""

    requests: int = 0
    acknowledged: int = 0
    unknown: int = 0
    unavailable: int = 0
    refused: int = 0
    lost: list[str] = field(default_factory=list)
    phantom: list[str] = field(default_factory=list)
    unknown_as_unchanged: list[str] = field(default_factory=list)
    double: list[str] = field(default_factory=list)
    over_limit: list[str] = field(default_factory=list)
    split_brain: list[str] = field(default_factory=list)
    stale_reads: list[str] = field(default_factory=list)
    stale_past_margin: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)
    state_vs_journal: list[str] = field(default_factory=list)
    state_checks: int = 0
    reads: int = 0
    leaderless: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when nothing the model forbids happened."""
        return not (self.lost or self.phantom or self.unknown_as_unchanged or self.double or self.over_limit
                    or self.split_brain or self.stale_past_margin or self.stale_reads or self.server_errors
                    or self.state_vs_journal)

    @property
    def holds_the_promise(self) -> bool:
        """True when nothing docs/operations.md promises was broken: :attr:`ok` but for stale reads
        within the lease margin, which the promise (and issue 32's bar) leaves open — a read sent
        milliseconds after a hand-back may still miss the change (docs/operations.md, "Open")."""
        return not (self.lost or self.phantom or self.unknown_as_unchanged or self.double or self.over_limit
                    or self.split_brain or self.stale_past_margin or self.server_errors
                    or self.state_vs_journal)

    def summary(self) -> dict[str, Any]:
        """The figures (counts) and the first cases of each kind."""
        out: dict[str, Any] = {
            "requests": self.requests, "acknowledged": self.acknowledged, "unknown": self.unknown,
            "unavailable (503)": self.unavailable, "refused (does not fit)": self.refused,
            "reads": self.reads,
            "lost": len(self.lost), "phantom": len(self.phantom),
            "unknown as unchanged": len(self.unknown_as_unchanged), "double": len(self.double),
            "over limit": len(self.over_limit), "split brain": len(self.split_brain),
            "stale reads": len(self.stale_reads), "stale reads past the margin": len(self.stale_past_margin),
            "server errors": len(self.server_errors),
            "state compared with the journal (after each fault)": self.state_checks,
            "state vs journal": len(self.state_vs_journal),
            "longest without a leader (s)": {p: round(v, 2) for p, v in sorted(self.leaderless.items())},
        }
        cases = {k: v[:5] for k, v in (("lost", self.lost), ("phantom", self.phantom),
                                       ("unknown as unchanged", self.unknown_as_unchanged),
                                       ("double", self.double), ("over limit", self.over_limit),
                                       ("split brain", self.split_brain), ("stale reads", self.stale_reads),
                                       ("server errors", self.server_errors),
                                       ("state vs journal", self.state_vs_journal)) if v}
        if cases:
            out["cases"] = cases
        return out


def journal_events(store_url: str, partitions: list[str]) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """Every event of every partition's stream, in order (read straight from the store)."""
    from quotaplane.journal import open_journal

    journal = open_journal(store_url)
    try:
        return {p: list(journal.read(p)) for p in partitions}
    finally:
        journal.close()


def leadership_intervals(path: Path) -> dict[str, list[tuple[str, float, float]]]:
    """Per partition, the ``(instance, from, to)`` spans an instance served it: from the line that
    started it to the line that stopped it, cut at the lease's last trusted end before that."""
    open_spans: dict[tuple[str, str], list[float]] = {}
    spans: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    if not path.exists():
        return {}
    for line in path.read_text().splitlines():
        try:
            note = json.loads(line)
        except ValueError:
            continue                         # a line cut by kill -9
        key = (note["instance"], note["partition"])
        if "serve" in note:
            open_spans[key] = [note["serve"], note.get("until", note["serve"])]
        elif "until" in note and key in open_spans:
            open_spans[key][1] = max(open_spans[key][1], note["until"])
        elif "stop" in note and key in open_spans:
            start, until = open_spans.pop(key)
            spans[key[1]].append((key[0], start, min(note["stop"], until)))
    for (instance, partition), (start, until) in open_spans.items():   # killed, or still serving
        spans[partition].append((instance, start, until))
    return spans


def check(records: list[Record], events: dict[str, list[tuple[int, dict[str, Any]]]], *, limit: int,
          leadership: dict[str, list[tuple[str, float, float]]], margin: float,
          window: tuple[float, float] | None = None) -> Verdict:
    """Judge ``records`` against the journal ``events`` and the leadership spans (see the module
    docstring). ``window``: the span of the run, for the longest time without a leader."""
    v = Verdict(requests=len(records))
    by_key: dict[tuple[str, str], dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        by_key[(r.partition, r.key)][r.op].append(r)
        if r.op == "read":
            v.reads += 1
        elif r.outcome == "ok":
            v.acknowledged += 1
        elif r.outcome == "unknown":
            v.unknown += 1
        elif r.outcome == "unavailable":
            v.unavailable += 1
        elif r.outcome == "refused":
            v.refused += 1
        if r.outcome == "error":
            v.server_errors.append(f"{r.op} {r.partition}/{r.key} at {r.instance}: {r.status}")

    # the journal: what happened to each key, and the limit at every step
    allocated: dict[tuple[str, str], int] = {}
    released: set[tuple[str, str]] = set()
    for partition, evs in events.items():
        used = 0
        live: dict[str, int] = {}
        for seq, ev in evs:
            kind = ev.get("type")
            if kind == "allocated":
                key = (partition, str(ev["key"]))
                if key in allocated:
                    v.double.append(f"{partition}/{ev['key']} journalled twice (seq {seq})")
                allocated[key] = seq
                amount = int(dict(ev.get("resource") or {}).get("slots", 0))
                live[str(ev["key"])] = amount
                used += amount
                if used > limit:
                    v.over_limit.append(f"{partition}: {used} slots held after seq {seq} (limit {limit})")
            elif kind == "released":
                key = (partition, str(ev["key"]))
                if key in released:
                    v.double.append(f"{partition}/{ev['key']} released twice (seq {seq})")
                released.add(key)
                used -= live.pop(str(ev["key"]), 0)

    for key, ops in by_key.items():
        name = f"{key[0]}/{key[1]}"
        allocs, rels = ops.get("allocate", []), ops.get("release", [])
        # the same key is the same request: a 409 "exists" to an allocation, a 404 to the release
        # of an allocation the journal holds, say it is done as surely as a 2xx does
        if any(r.outcome in _DONE or r.outcome == "exists" for r in allocs) and key not in allocated:
            v.lost.append(f"allocation {name} answered done or 'exists', not in the journal")
        said_gone = key in allocated and any(r.outcome == "absent" for r in rels)
        if (said_gone or any(r.outcome in _DONE for r in rels)) and key not in released:
            v.lost.append(f"release of {name} answered done or 'not there', not in the journal")
        for applied, attempts, what in ((key in allocated, allocs, "allocation"),
                                        (key in released, rels, "release")):
            if not applied or not attempts or any(r.outcome in _MAY for r in attempts):
                continue
            said = "; ".join(f"{r.outcome} {r.status} at {r.instance} {r.sent:.3f}-{r.received:.3f}"
                             + (f" ({r.detail})" if r.detail else "") for r in attempts)
            if all(r.outcome == "unavailable" for r in attempts):
                v.unknown_as_unchanged.append(f"{what} of {name} answered 503 'nothing was changed', "
                                              f"applied: {said}")
            elif what == "release" and all(r.outcome in ("unavailable", "absent") for r in attempts):
                # a 404 after a 503 says the first one had released it: that 503 changed something
                v.unknown_as_unchanged.append(f"{what} of {name} answered 503 'nothing was changed' and then "
                                              f"404, applied: {said}")
            else:
                v.phantom.append(f"{what} of {name} journalled, answered: {said}")
        _stale(v, key, allocs, rels, ops.get("read", []), margin)

    _split_brain(v, leadership)
    if window is not None:
        _leaderless(v, leadership, list(events), window)
    return v


def live_allocations(events: list[tuple[int, dict[str, Any]]]) -> dict[str, int]:
    """What replaying one partition's journal holds: allocation key → slots."""
    live: dict[str, int] = {}
    for _seq, ev in events:
        if ev.get("type") == "allocated":
            live[str(ev["key"])] = int(dict(ev.get("resource") or {}).get("slots", 0))
        elif ev.get("type") == "released":
            live.pop(str(ev["key"]), None)
    return live


def state_disagreements(where: str, served: dict[str, int], journalled: dict[str, int]) -> list[str]:
    """How the allocations an instance serves (``served``, key → slots) differ from the journal's
    (``journalled``); empty when they agree. ``where`` names the instance and partition. The key
    ``""`` stands for the queue's usage (what it says it holds, against the journal's total)."""
    out = []
    served, journalled = dict(served), dict(journalled)
    if "" in served or "" in journalled:
        held, total = served.pop("", 0), journalled.pop("", 0)
        if held != total:
            out.append(f"{where}: the queue holds {held} slots, the journal {total}")
    for key in sorted(served.keys() - journalled.keys()):
        out.append(f"{where}: serves {key}, the journal does not hold it")
    for key in sorted(journalled.keys() - served.keys()):
        out.append(f"{where}: the journal holds {key}, it does not serve it")
    for key in sorted(served.keys() & journalled.keys()):
        if served[key] != journalled[key]:
            out.append(f"{where}: {key} is {served[key]} slots, {journalled[key]} in the journal")
    return out


def _stale(v: Verdict, key: tuple[str, str], allocs: list[Record], rels: list[Record], reads: list[Record],
           margin: float) -> None:
    done_alloc = min((r.received for r in allocs if r.outcome in ("ok", "exists")), default=None)
    first_release_sent = min((r.sent for r in rels), default=None)
    done_release = min((r.received for r in rels if r.outcome in ("ok", "absent")), default=None)
    for r in reads:
        if r.outcome not in ("exists", "absent"):
            continue                              # refused (503) or unanswered: nothing claimed
        name = f"{key[0]}/{key[1]} read at {r.instance} {r.sent:.3f}-{r.received:.3f}"
        history = "; ".join(f"{a.op} {a.outcome} {a.status} at {a.instance} {a.sent:.3f}-{a.received:.3f}"
                            for a in sorted(allocs + rels, key=lambda a: a.sent))
        if (r.outcome == "absent" and done_alloc is not None and r.sent > done_alloc
                and (first_release_sent is None or r.received < first_release_sent)):
            v.stale_reads.append(f"{name}: not there {r.sent - done_alloc:.3f} s after its allocation "
                                 f"({history})")
            if r.sent - done_alloc > margin:
                v.stale_past_margin.append(name)
        if r.outcome == "exists" and done_release is not None and r.sent > done_release:
            v.stale_reads.append(f"{name}: still there {r.sent - done_release:.3f} s after its release "
                                 f"({history})")
            if r.sent - done_release > margin:
                v.stale_past_margin.append(name)


def _split_brain(v: Verdict, leadership: dict[str, list[tuple[str, float, float]]]) -> None:
    for partition, spans in leadership.items():
        ordered = sorted(spans, key=lambda s: s[1])
        for i, (inst_a, start_a, end_a) in enumerate(ordered):
            for inst_b, start_b, end_b in ordered[i + 1:]:
                if start_b >= end_a:
                    break
                if inst_b != inst_a and start_b < end_a and start_a < end_b:
                    v.split_brain.append(f"{partition}: {inst_a} and {inst_b} served it together for "
                                         f"{min(end_a, end_b) - start_b:.3f} s")


def _leaderless(v: Verdict, leadership: dict[str, list[tuple[str, float, float]]], partitions: list[str],
                window: tuple[float, float]) -> None:
    start, end = window
    for partition in partitions:
        spans = sorted((s, e) for _, s, e in leadership.get(partition, []) if e > start and s < end)
        longest, at = 0.0, start
        for s, e in spans:
            if s > at:
                longest = max(longest, s - at)
            at = max(at, e)
        longest = max(longest, end - at)
        v.leaderless[partition] = longest
