"""One active controller: leader election through a ``coordination.k8s.io/v1`` Lease.

client-go's algorithm (reference ``kubernetes-front.md`` §6.4), with one change of means:

* the Lease is **free** when it is absent, has no holder, or its record has not changed for
  ``leaseDurationSeconds`` as observed **locally** (the holder's clock is never trusted: expiry is
  measured from when this process last saw the record change);
* taking and renewing it is a compare-and-swap. client-go sends an update carrying the
  ``resourceVersion`` it read; here the write is a JSON patch whose ``test`` operation requires the
  whole spec just read. The apiserver applies a JSON patch atomically, so a concurrent
  writer makes the ``test`` fail (422) exactly where an update would get a 409 — and the same request
  works on servers and emulators that do not implement ``resourceVersion`` preconditions;
* the leader renews every ``retry_period``; when it has not renewed for ``renew_deadline`` it stops
  leading (the caller stops acting) before anyone else can take the Lease;
* on a clean stop it releases the Lease (empty holder, duration 1 s) so a successor does not wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from quotaplane.errors import InputError
from quotaplane.kube.api import KubeApi, status_code
from quotaplane.kube.objects import mapping

__all__ = ["LeaseElector", "micro_time"]

log = logging.getLogger("quotaplane.kube.lease")


def micro_time(at: float | None = None) -> str:
    """A Kubernetes MicroTime (RFC 3339, microseconds, UTC)."""
    stamp = dt.datetime.fromtimestamp(time.time() if at is None else at, tz=dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    """Campaigns for the Lease ``namespace/name`` as ``identity``; :attr:`leading` says the outcome.

    Kueue's defaults: a 15 s lease, a 10 s renew deadline, a 2 s retry period.
    """

    def __init__(self, api: KubeApi, *, name: str, namespace: str, identity: str,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise InputError("need lease_duration > renew_deadline > retry_period > 0")
        self.api = api
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        #: the spec last read and when (local clock) it was first seen in that state
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._renewed_at = 0.0
        #: the holder last read from the Lease ("" when free or not read yet)
        self.holder = ""
        #: set once a first round has read the Lease (or failed to): ``holder`` is then known
        self.observed = asyncio.Event()
        #: set while this process holds the Lease
        self.leading = asyncio.Event()
        #: set when leadership was held and then lost (the caller must stop acting)
        self.lost = asyncio.Event()

    def _object(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": dict(spec)}

    def _record(self, now_wall: str, transitions: int, acquire: str | None) -> dict[str, Any]:
        return {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": acquire or now_wall, "renewTime": now_wall, "leaseTransitions": transitions}

    async def try_acquire_or_renew(self) -> bool:
        """One round: True when this process holds the Lease afterwards."""
        now = self._clock()
        stamp = micro_time()
        try:
            lease = await self.api.get("leases", self.name, self.namespace)
        except Exception as exc:
            if status_code(exc) != 404:
                raise
            try:
                await self.api.create("leases", self._object(self._record(stamp, 0, None)))
            except Exception as create_exc:     # someone else created it first (409)
                log.info("lease %s/%s: create lost: %s", self.namespace, self.name, create_exc)
                return False
            self._observe(self._record(stamp, 0, None), now)
            self.holder = self.identity
            return True
        spec = dict(mapping(lease.get("spec")))
        self.holder = str(spec.get("holderIdentity") or "")
        if spec != self._observed:
            self._observe(spec, now)
        holder = spec.get("holderIdentity") or ""
        mine = holder == self.identity
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if not mine and holder and now < self._observed_at + duration:
            return False        # held by another and not expired (as seen from here)
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        new = self._record(stamp, transitions, spec.get("acquireTime") if mine else None)
        # the compare of the compare-and-swap: the record is still the one just read
        patch: list[dict[str, Any]] = [{"op": "test", "path": "/spec", "value": spec},
                                       {"op": "replace", "path": "/spec", "value": new}] \
            if "spec" in lease else [{"op": "add", "path": "/spec", "value": new}]
        try:
            await self.api.patch_json("leases", lease, patch)
        except Exception as exc:       # the test failed (someone else wrote) or the server did not answer
            log.info("lease %s/%s: update lost: %s", self.namespace, self.name, exc)
            return False
        self._observe(new, now)
        self.holder = self.identity
        return True

    def _observe(self, spec: Mapping[str, Any], now: float) -> None:
        self._observed = dict(spec)
        self._observed_at = now

    async def run(self) -> None:
        """Campaign until leading, then renew; on losing the Lease set :attr:`lost` and return."""
        while True:
            ok = await self._round()
            if ok:
                self._renewed_at = self._clock()
                if not self.leading.is_set():
                    log.warning("lease %s/%s: %s is the leader", self.namespace, self.name, self.identity)
                    self.leading.set()
            elif self.leading.is_set() and self._clock() - self._renewed_at >= self.renew_deadline:
                log.warning("lease %s/%s: not renewed for %.1fs; stopping", self.namespace, self.name,
                            self.renew_deadline)
                self.leading.clear()
                self.lost.set()
                return
            await asyncio.sleep(self.retry_period)

    async def _round(self) -> bool:
        try:
            return await asyncio.wait_for(self.try_acquire_or_renew(), timeout=self.renew_deadline)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        finally:
            self.observed.set()

    async def known_holder(self, wait: float) -> str:
        """The Lease's holder, waiting up to ``wait`` seconds for the first round to read it (so a
        follower asked right after it started names the leader instead of nobody)."""
        if not self.observed.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.observed.wait(), wait)
        return self.holder

    async def release(self) -> None:
        """Give the Lease up (if held): empty holder, 1 s duration, so a successor need not wait."""
        if not self.leading.is_set() or self._observed is None:
            return
        self.leading.clear()
        lease = self._object(self._observed)
        patch: list[dict[str, Any]] = [{"op": "test", "path": "/spec/holderIdentity", "value": self.identity},
                 {"op": "replace", "path": "/spec/holderIdentity", "value": ""},
                 {"op": "replace", "path": "/spec/leaseDurationSeconds", "value": 1}]
        try:
            # bounded: a stopping process must not wait out the API's whole retry policy (the Lease
            # expires by itself; releasing only spares the successor the wait)
            await asyncio.wait_for(self.api.patch_json("leases", lease, patch), self.renew_deadline)
        except Exception as exc:
            log.info("lease %s/%s: release failed: %s", self.namespace, self.name, exc)
