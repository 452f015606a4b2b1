"""Concurrent writers and readers through every instance of the cluster, recording every request
and its answer (the checker judges them against the journal afterwards).

Each worker talks to one instance (so writes reach partitions led elsewhere through the relay) and,
in a loop: allocates a new key (1–3 slots) in a random partition, releases one of its allocations,
or reads one of its keys back. A reader per instance reads, through it, the keys any worker changed
last (a deposed leader that still answered reads from its memory would be caught there). An
allocation whose outcome is unknown is sent again with the same key (the same key is the same
request). Nothing is retried otherwise: every answer is recorded as it came.
Times are the machine's monotonic clock, as in the instances' leadership log.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

import httpx

__all__ = ["Record", "Workload"]


@dataclass(frozen=True)
class Record:
    """One request and its answer. ``outcome``: ``ok`` (done), ``refused`` (a decision: does not fit),
    ``exists`` / ``absent`` (the key is there / not there), ``unavailable`` (503: nothing changed),
    ``unknown`` (502 or no answer once sent), ``notsent`` (no connection), ``error`` (another
    status: a defect)."""

    op: str                 # allocate | release | read
    partition: str
    key: str
    amount: int
    instance: str
    sent: float
    received: float
    status: int             # 0: no answer
    outcome: str
    retry: bool = False
    detail: str = ""        # what a refusal or a 5xx said (its message), to tell the cases apart


def _outcome(op: str, status: int, body: object) -> str:
    if status == 0:
        return "unknown"
    if status == 503:
        return "unavailable"
    if status == 502:
        return "unknown"
    if op == "allocate":
        if status == 201:
            return "ok"
        if status == 409:
            return "refused" if isinstance(body, dict) and "allocated" in body else "exists"
    elif op == "release":
        if status == 200:
            return "ok"
        if status == 404:
            return "absent"
    elif op == "read":
        if status == 200:
            return "exists"
        if status == 404:
            return "absent"
    return "error"


class Workload:
    """``workers`` threads per instance URL (see the module docstring)."""

    def __init__(self, urls: dict[str, str], partitions: list[str], *, workers: int = 2, seed: int = 1,
                 timeout: float = 10.0, pause: float = 0.005) -> None:
        self.urls = urls
        self.partitions = partitions
        self.records: list[Record] = []
        self._stop = threading.Event()
        self._go = threading.Event()          # cleared by hold(): workers wait before their next request
        self._go.set()
        self._busy = 0                        # requests under way (hold() waits for them to end)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._timeout = timeout
        self._pause = pause
        #: the keys changed last (by any worker): what the readers read
        self._recent: list[tuple[str, str]] = []
        n = 0
        for name, url in urls.items():
            for _ in range(workers):
                t = threading.Thread(target=self._work, args=(f"w{n}", name, url, random.Random(seed + n)),
                                     name=f"fault-worker-{n}", daemon=True)
                self._threads.append(t)
                n += 1
            t = threading.Thread(target=self._read, args=(name, url, random.Random(seed + 1000 + n)),
                                 name=f"fault-reader-{name}", daemon=True)
            self._threads.append(t)

    def start(self) -> None:
        """Start every worker."""
        for t in self._threads:
            t.start()

    def hold(self, timeout: float | None = None) -> bool:
        """Let no worker send another request, and wait until every request under way is answered
        (or ``timeout``, by default the request timeout and 5 s, passes): the cluster is then quiet,
        and the state an instance serves can be compared with the journal. True when quiet."""
        self._go.clear()
        deadline = time.monotonic() + (self._timeout + 5 if timeout is None else timeout)
        while time.monotonic() < deadline:
            with self._lock:
                if self._busy == 0:
                    return True
            time.sleep(0.02)
        return False

    def resume(self) -> None:
        """Let the workers go on after :meth:`hold`."""
        self._go.set()

    def stop(self) -> None:
        """Stop every worker (each finishes its request under way) and wait for them."""
        self._stop.set()
        self._go.set()
        for t in self._threads:
            t.join(self._timeout + 30)

    def _call(self, http: httpx.Client, op: str, partition: str, key: str, amount: int, instance: str,
              url: str, retry: bool = False) -> Record:
        base = f"{url}/ws/v1/partition/{partition}"
        while True:                           # counted as under way only while not held (see hold())
            self._go.wait()
            with self._lock:
                if self._go.is_set():
                    self._busy += 1
                    break
        try:
            return self._send(http, op, base, partition, key, amount, instance, retry)
        finally:
            with self._lock:
                self._busy -= 1

    def _send(self, http: httpx.Client, op: str, base: str, partition: str, key: str, amount: int,
              instance: str, retry: bool) -> Record:
        sent = time.monotonic()
        body: object = None
        try:
            if op == "allocate":
                r = http.post(f"{base}/allocations", json={"applicationID": "app", "allocationKey": key,
                                                           "resource": {"slots": amount}})
            elif op == "release":
                r = http.delete(f"{base}/allocation/{key}")
            else:
                r = http.get(f"{base}/allocation/{key}")
            status = r.status_code
            try:
                body = r.json()
            except ValueError:
                body = None
        except (httpx.ConnectError, httpx.ConnectTimeout):
            rec = Record(op, partition, key, amount, instance, sent, time.monotonic(), 0, "notsent", retry)
            self.records.append(rec)
            return rec
        except httpx.HTTPError:
            status = 0
        detail = str(body.get("message", ""))[:300] if isinstance(body, dict) and status >= 500 else ""
        rec = Record(op, partition, key, amount, instance, sent, time.monotonic(), status,
                     _outcome(op, status, body), retry, detail)
        self.records.append(rec)
        return rec

    def _read(self, instance: str, url: str, rnd: random.Random) -> None:
        with httpx.Client(timeout=self._timeout) as http:
            while not self._stop.is_set():
                recent = self._recent[-50:]
                if recent:
                    partition, key = rnd.choice(recent)
                    self._call(http, "read", partition, key, 0, instance, url)
                time.sleep(self._pause * 2)

    def _note(self, partition: str, key: str) -> None:
        self._recent.append((partition, key))
        if len(self._recent) > 1000:
            del self._recent[:500]

    def _work(self, wid: str, instance: str, url: str, rnd: random.Random) -> None:
        live: list[tuple[str, str, int]] = []          # (partition, key, amount) acknowledged here
        seen: list[tuple[str, str]] = []
        n = 0
        with httpx.Client(timeout=self._timeout) as http:
            while not self._stop.is_set():
                roll = rnd.random()
                if roll < 0.5 or not live:
                    n += 1
                    partition, key, amount = rnd.choice(self.partitions), f"{wid}-{n}", rnd.randint(1, 3)
                    rec = self._call(http, "allocate", partition, key, amount, instance, url)
                    if rec.outcome == "unknown":          # the same key is the same request
                        rec = self._call(http, "allocate", partition, key, amount, instance, url, retry=True)
                    if rec.outcome in ("ok", "exists"):
                        live.append((partition, key, amount))
                        self._note(partition, key)
                    seen.append((partition, key))
                elif roll < 0.8:
                    partition, key, amount = live.pop(rnd.randrange(len(live)))
                    rec = self._call(http, "release", partition, key, amount, instance, url)
                    if rec.outcome not in ("ok", "absent"):
                        live.append((partition, key, amount))   # may still be there: released later
                    else:
                        self._note(partition, key)
                else:
                    partition, key = rnd.choice(seen)
                    self._call(http, "read", partition, key, 0, instance, url)
                if self._pause:
                    time.sleep(self._pause)
