"""The Python client's history calls (``Client.history`` / ``history_cost`` and the same on
``AsyncClient``) against a real service: the month of :mod:`tests.history.test_rest` — GPU-hours per
team last month, the borrowed part, the bill, CSV, and a bad parameter raised as the client's error."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from quotaplane.client import AsyncClient, BadRequestError, Client
from tests.client.test_client import _Server
from tests.history.test_rest import november

GPU = "nvidia.com/gpu"
GPU_HOUR = 3_600_000          # a GPU-hour in resource-milliseconds


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    s, _ = november(monkeypatch)
    srv = _Server(s)
    yield srv.url
    srv.stop()
    s.close()


def _totals(data: Any) -> dict[str, tuple[int, int]]:
    return {s["name"]: (s["points"][0]["used"][GPU], s["points"][0]["borrowed"].get(GPU, 0))
            for s in data["series"]}


def test_the_client_asks_for_usage_the_bill_and_csv(url: str) -> None:
    with Client(url) as c:
        usage = c.history(step="total", period="last-month", resource=GPU)
        assert _totals(usage)["root.teams.speech"] == (2880 * GPU_HOUR, 960 * GPU_HOUR)
        assert _totals(usage)["root.teams.vision"] == (2880 * GPU_HOUR, 0)
        weekly = c.history(group_by="user", step="week", period="last-month", names=["sam"])
        assert [s["name"] for s in weekly["series"]] == ["sam"]
        # ISO weeks: the first starts on the Monday before November 1, the last ends with the month
        weeks = weekly["series"][0]["points"]
        assert (len(weeks), weeks[0]["start"], weeks[-1]["end"]) == (
            6, "2026-10-26T00:00:00+01:00", "2026-12-01T00:00:00+01:00")
        bill = c.history_cost(period="last-month", names=["root.teams.speech", "root.teams.vision"])
        assert bill["total"] == "15840.00"
        text = c.history_cost(period="last-month", csv=True)
        assert isinstance(text, str) and text.splitlines()[0].startswith("queue,resource,hours")
        with pytest.raises(BadRequestError, match="period"):
            c.history(period="last-year")


def test_the_async_client_gives_the_same_answers(url: str) -> None:
    async def main() -> tuple[Any, Any]:
        async with AsyncClient(url) as c:
            usage = await c.history(step="total", period="last-month", resource=GPU)
            bill = await c.history_cost(period="last-month", names=["root.teams.speech"])
            with pytest.raises(BadRequestError, match="groupBy"):
                await c.history(group_by="planet", period="last-month")
            return usage, bill

    usage, bill = asyncio.run(main())
    with Client(url) as c:
        assert usage == c.history(step="total", period="last-month", resource=GPU)
    assert _totals(usage)["root.teams.speech"] == (2880 * GPU_HOUR, 960 * GPU_HOUR)
    assert bill["total"] == "8640.00"
