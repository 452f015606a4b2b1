"""The hot path's metrics are tallied and folded in at scrape time (issue 38, the service path): the
exposition is exactly what observing each value directly gives, nothing is lost or counted twice
when threads observe while others scrape, and a tally folds by itself before it grows large."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from quotaplane.server import metrics as M
from quotaplane.server.metrics import Metrics

_BOUNDS = M._ADMISSION_BUCKETS


def _without_created(text: bytes) -> list[str]:
    # ``_created`` is the moment each metric was made: different objects, different moments
    return [line for line in text.decode().splitlines() if "_created" not in line]


def _direct(values: list[float], increments: list[int]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    h = Histogram("h_seconds", "h", buckets=_BOUNDS, registry=registry)
    c = Counter("c", "c", ["kind"], registry=registry)
    c.labels("x")                   # the tallied one exists from the start too
    for v in values:
        h.observe(v)
    for n in increments:
        c.labels("x").inc(n)
    return generate_latest(registry)


def _tallied(values: list[float], increments: list[int], scrape_every: int) -> bytes:
    registry = M._Registry()
    h = Histogram("h_seconds", "h", buckets=_BOUNDS, registry=registry)
    c = Counter("c", "c", ["kind"], registry=registry)
    th, tc = registry.tally(h, True), registry.tally(c.labels("x"), False)
    for i, v in enumerate(values):
        th.observe(v)
        if scrape_every and i % scrape_every == 0:
            generate_latest(registry)          # folds in the middle
    for n in increments:
        tc.inc(n)
    return generate_latest(registry)


# values on the bounds themselves, between them and past the last (the +Inf bucket)
_VALUES = st.lists(st.one_of(st.sampled_from([*_BOUNDS, 0.0, 1.0, 0.3]),
                             st.floats(min_value=0, max_value=2, allow_nan=False)), max_size=60)


@settings(max_examples=60, deadline=None)
@given(values=_VALUES, increments=st.lists(st.integers(0, 5), max_size=10),
       scrape_every=st.integers(0, 7))
def test_a_tally_exposes_what_observing_directly_exposes(values: list[float], increments: list[int],
                                                          scrape_every: int) -> None:
    direct = _without_created(_direct(values, increments))
    tallied = _without_created(_tallied(values, increments, scrape_every))
    # every bucket and count line byte for byte; the sum equal up to float rounding (another order)
    assert [x for x in direct if "_sum" not in x] == [x for x in tallied if "_sum" not in x]
    sums = [(float(a.rsplit(" ", 1)[1]), float(b.rsplit(" ", 1)[1]))
            for a, b in zip(direct, tallied, strict=True) if "_sum" in a]
    assert all(abs(a - b) <= 1e-9 * max(1.0, abs(a)) for a, b in sums)


def test_nothing_is_lost_when_threads_observe_while_others_scrape() -> None:
    m = Metrics()
    per_thread, threads = 3000, 4
    stop = threading.Event()

    def observe() -> None:
        for _ in range(per_thread):
            m.admission.observe(0.00003)
            m.observe_request("POST", "/x", 201, 0.001)

    def scrape() -> None:
        while not stop.is_set():
            generate_latest(m.registry)

    scrapers = [threading.Thread(target=scrape) for _ in range(2)]
    workers = [threading.Thread(target=observe) for _ in range(threads)]
    for t in scrapers + workers:
        t.start()
    for t in workers:
        t.join()
    stop.set()
    for t in scrapers:
        t.join()
    total = per_thread * threads
    r = m.registry
    assert r.get_sample_value("quotaplane_admission_duration_seconds_count") == total
    assert r.get_sample_value("yunikorn_scheduler_scheduling_latency_milliseconds_count") == total
    assert r.get_sample_value("quotaplane_admission_duration_seconds_bucket", {"le": "5e-05"}) == total
    assert r.get_sample_value("quotaplane_admission_duration_seconds_bucket", {"le": "2e-05"}) == 0
    assert r.get_sample_value("quotaplane_http_requests_total",
                              {"method": "POST", "route": "/x", "status": "201"}) == total
    assert r.get_sample_value("quotaplane_http_request_duration_seconds_count",
                              {"method": "POST", "route": "/x"}) == total


def test_a_tally_folds_by_itself_before_it_grows_large() -> None:
    m = Metrics()
    for _ in range(M._FOLD_EVERY):
        m.admission.observe(0.001)
    # read the metric itself, without a collection (which would fold)
    assert abs(m.admission_seconds._sum.get() - M._FOLD_EVERY * 0.001) < 1e-9
    assert not any(t._queue for t in m.registry.tallies)
