"""Leader election through a Lease (reference kubernetes-front.md §6.4), against the emulator."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from quotaplane.kube.api import KubeApi, client_config
from quotaplane.kube.lease import LeaseElector
from tests.kube.emulator import Emulator

NS = "quotaplane-system"


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    e = Emulator().start()
    yield e
    e.stop()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _elector(api: KubeApi, who: str, clock: Clock, name: str) -> LeaseElector:
    return LeaseElector(api, name=name, namespace=NS, identity=who, lease_duration=15, renew_deadline=10,
                        retry_period=0.01, clock=clock)


async def _lease(api: KubeApi, name: str) -> dict[str, Any]:
    return (await api.get("leases", name, NS))["spec"]


def test_first_takes_the_lease_second_waits_until_it_expires(emulator: Emulator) -> None:
    async def main() -> None:
        api = KubeApi(client_config(server=emulator.url))
        ca, cb = Clock(), Clock()
        a, b = _elector(api, "a", ca, "l1"), _elector(api, "b", cb, "l1")
        assert await a.try_acquire_or_renew()
        spec = await _lease(api, "l1")
        assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 0
        assert spec["leaseDurationSeconds"] == 15 and spec["renewTime"].endswith("Z")
        assert not await b.try_acquire_or_renew()        # held, fresh as seen from b
        cb.now += 14
        assert not await b.try_acquire_or_renew()        # not yet 15 s since b saw it change
        ca.now += 14
        assert await a.try_acquire_or_renew()            # a renews: the record changes
        cb.now += 2                                      # 16 s since b first saw the old record …
        assert not await b.try_acquire_or_renew()        # … but it changed: expiry counts from now
        cb.now += 15.5                                   # a stopped renewing
        assert await b.try_acquire_or_renew()
        spec = await _lease(api, "l1")
        assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
        assert not await a.try_acquire_or_renew()        # a sees b's fresh record
        await api.close()
    asyncio.run(main())


def test_the_write_is_a_compare_and_swap(emulator: Emulator) -> None:
    """b decides from a stale read that the Lease is free; a renewed meanwhile: b's write fails."""
    async def main() -> None:
        api = KubeApi(client_config(server=emulator.url))
        ca, cb = Clock(), Clock()
        a = _elector(api, "a", ca, "l2")
        assert await a.try_acquire_or_renew()
        stale = await api.get("leases", "l2", NS)

        class StaleApi(KubeApi):
            async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
                return stale

        b_api = StaleApi(client_config(server=emulator.url))
        b = _elector(b_api, "b", cb, "l2")
        assert not await b.try_acquire_or_renew()
        cb.now += 16
        ca.now += 1
        assert await a.try_acquire_or_renew()            # renewed after b's read
        assert not await b.try_acquire_or_renew()        # b's test of the spec fails
        assert (await _lease(api, "l2"))["holderIdentity"] == "a"
        await b_api.close()
        await api.close()
    asyncio.run(main())


def test_release_lets_a_successor_in_at_once(emulator: Emulator) -> None:
    async def main() -> None:
        api = KubeApi(client_config(server=emulator.url))
        ca, cb = Clock(), Clock()
        a, b = _elector(api, "a", ca, "l3"), _elector(api, "b", cb, "l3")
        task = asyncio.create_task(a.run())
        await asyncio.wait_for(a.leading.wait(), 5)
        task.cancel()
        await a.release()
        spec = await _lease(api, "l3")
        assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
        assert await b.try_acquire_or_renew()
        assert (await _lease(api, "l3"))["leaseTransitions"] == 1
        await api.close()
    asyncio.run(main())


def test_a_leader_that_cannot_renew_stops_within_the_deadline(emulator: Emulator) -> None:
    async def main() -> None:
        api = KubeApi(client_config(server=emulator.url))
        clock = Clock()
        a = _elector(api, "a", clock, "l4")
        task = asyncio.create_task(a.run())
        await asyncio.wait_for(a.leading.wait(), 5)
        broken = {"on": True}

        async def failing(*_: Any, **__: Any) -> bool:
            if broken["on"]:
                raise ConnectionError("apiserver unreachable")
            return True
        a.try_acquire_or_renew = failing  # type: ignore[method-assign]
        await asyncio.sleep(0.05)
        assert a.leading.is_set() and not a.lost.is_set()   # within the deadline: still leading
        clock.now += 10.5
        await asyncio.wait_for(a.lost.wait(), 5)
        assert not a.leading.is_set()
        await asyncio.wait_for(task, 5)                     # run() returns: the caller stops acting
        await api.close()
    asyncio.run(main())


def test_bad_timings_are_refused() -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline"):
        LeaseElector(None, name="x", namespace=NS, identity="a",  # type: ignore[arg-type]
                     lease_duration=5, renew_deadline=10, retry_period=2)
