"""The front lists in pages (``limit``/``continue``, as client-go's pager does), so that no single answer
carries every pod of a large cluster (issue 38: at Kueue's 50,000 workloads one unpaged list did not
come back); an expired continue token starts the list over. Against the emulator."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from quotaplane.kube.api import PAGE_SIZE, KubeApi, client_config
from tests.kube.emulator import Emulator
from tests.kube.harness import pod


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    e = Emulator().start()
    with httpx.Client(base_url=e.url, timeout=10) as c:
        for i in range(7):
            ns = "team-a" if i % 2 else "team-b"
            c.post(f"/api/v1/namespaces/{ns}/pods", json=pod(f"p{i}", namespace=ns))
    yield e
    e.stop()


def _list(e: Emulator, page_size: int) -> tuple[list[dict[str, Any]], str | None, KubeApi]:
    async def main() -> tuple[list[dict[str, Any]], str | None, KubeApi]:
        api = KubeApi(client_config(server=e.url))
        api.page_size = page_size
        try:
            items, version = await api.list_versioned("pods")
        finally:
            await api.close()
        return items, version, api
    return asyncio.run(main())


def _names(items: list[dict[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in items)


def test_the_front_lists_in_pages_of_its_page_size(emulator: Emulator) -> None:
    assert PAGE_SIZE == 500                             # client-go's default page
    whole, version, _ = _list(emulator, 0)
    paged, paged_version, _ = _list(emulator, 3)
    assert _names(paged) == _names(whole) == [f"p{i}" for i in range(7)]
    assert paged_version == version
    lists = [q for call, plural, _, q in emulator.call(lambda: list(emulator.state.log))
             if call == "list" and plural == "pods"]
    assert [q.get("limit") for q in lists[-3:]] == ["3", "3", "3"]
    assert "continue" not in lists[-3] and all("continue" in q for q in lists[-2:])


def test_a_continue_token_expired_between_pages_starts_the_list_over(emulator: Emulator) -> None:
    state = emulator.state
    plain = state.listing
    compacted: list[bool] = []

    def compacting(*args: Any, **kwargs: Any) -> dict[str, Any]:
        out = plain(*args, **kwargs)
        if not compacted and out["metadata"].get("continue"):     # between the first two pages
            compacted.append(True)
            state.put("pods", pod("late", namespace="team-a"))
            state.compact()
        return out

    emulator.call(lambda: setattr(state, "listing", compacting))
    items, version, api = _list(emulator, 3)
    assert _names(items) == sorted([f"p{i}" for i in range(7)] + ["late"])
    assert api.stats.relists["pods"] == 1
    assert version == emulator.call(lambda: str(state.rv))
