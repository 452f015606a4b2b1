"""Application lifecycle and running-application counting (seed 001 "Application tracking").

Gang cases of the seed: no gang; gang with all or some placeholders replaced; soft style with all
placeholders timing out; hard style with all placeholders timing out. The clock is injected.
"""

from __future__ import annotations

import pytest

from quotaplane import ConflictError, NotFoundError, Resource
from quotaplane.config.identity import UserGroup
from quotaplane.partition import Partition
from tests.partition.helpers import Clock, scheduler

BOB = UserGroup("bob", ["ops"])
V1 = Resource({"vcore": 1000})


def _part(clock: Clock | None = None) -> tuple[Partition, Clock]:
    clock = clock or Clock()
    p = scheduler(clock=clock).partition("default")
    p.add_node("n1", Resource({"vcore": 50000, "memory": 1000}))
    return p, clock


def _running(p: Partition, path: str = "root.a") -> list[str]:
    return sorted(p.queues.queue(path).running_apps)


def test_no_gang_new_starting_running_completing_completed_expired() -> None:
    p, clock = _part()
    p.add_application("app1", BOB, queue="root.a")
    app = p.application("app1")
    assert app.state == "New" and _running(p) == []
    p.allocate("app1", "k1", V1)
    assert app.state == "Starting" and _running(p) == ["app1"]       # running state entry
    p.allocate("app1", "k2", V1)
    assert app.state == "Running"
    p.release("k1")
    assert app.state == "Running" and _running(p) == ["app1"]
    p.release("k2")
    assert app.state == "Completing" and _running(p) == []           # running state exit
    assert p.check_timeouts(clock.now + 29) == []
    assert p.check_timeouts(clock.now + 30) == ["app1: Completed"]
    assert app.state == "Completed"
    with pytest.raises(ConflictError):
        p.allocate("app1", "k3", V1)
    p.check_timeouts(clock.now + 30 + 3 * 86400)
    assert p.application("app1") is None                              # Expired and removed


def test_starting_times_out_into_running() -> None:
    p, clock = _part()
    p.add_application("app1", BOB, queue="root.a")
    p.allocate("app1", "k1", V1)
    assert p.check_timeouts(clock.now + 300) == ["app1: Running"]
    assert p.application("app1").state == "Running"


def test_completing_back_to_running_is_counted_again() -> None:
    """Seed 001: Completing → Running (pod restart) must be handled: the app counts again."""
    p, _ = _part()
    p.add_application("app1", BOB, queue="root.a")
    p.allocate("app1", "k1", V1)
    p.release("k1")
    assert p.application("app1").state == "Completing" and _running(p) == []
    p.allocate("app1", "k2", V1)
    assert p.application("app1").state == "Running" and _running(p) == ["app1"]


def test_gang_placeholders_count_and_replacement_adjusts_by_delta() -> None:
    """YUNIKORN-982: a real allocation smaller than its placeholder lowers usage by the delta."""
    p, _ = _part()
    p.add_application("app1", BOB, queue="root.a")
    assert p.allocate("app1", "ph1", Resource({"vcore": 2000}), placeholder=True, task_group="tg")
    assert p.allocate("app1", "ph2", Resource({"vcore": 2000}), placeholder=True, task_group="tg")
    assert _running(p) == ["app1"]                                    # placeholders count
    assert p.queues.queue("root.a").allocated == Resource({"vcore": 4000})
    d = p.replace_placeholder("ph1", "real1", Resource({"vcore": 1500, "memory": 0}))
    assert d.allocated
    assert p.queues.queue("root.a").allocated == Resource({"vcore": 3500})
    assert p.ugm.get_user_resources(BOB) == Resource({"vcore": 3500})
    real = p.allocation("real1")
    assert real is not None and not real.placeholder and real.task_group == "tg"
    assert p.allocation("ph1") is None
    assert list(p.application("app1").allocations) == ["real1", "ph2"]
    assert p.application("app1").state == "Running"


def test_replacement_larger_than_placeholder_is_checked_for_the_increase() -> None:
    p, _ = _part()
    p.add_application("app1", BOB, queue="root.a")
    p.allocate("app1", "ph1", Resource({"vcore": 2000}), placeholder=True, task_group="tg")
    p.allocate("app1", "other", Resource({"vcore": 7000}))
    before = p.dump_state()
    d = p.replace_placeholder("ph1", "real1", Resource({"vcore": 4000}))    # 7+4 > max 10
    assert not d.allocated and [(v.code, v.resource) for v in d.reasons] == [
        ("queue.max", Resource({"vcore": 1000}))]
    assert p.dump_state() == before
    d = p.replace_placeholder("ph1", "real1", Resource({"vcore": 3000, "memory": 10}))
    assert d.allocated
    assert p.queues.queue("root.a").allocated == Resource({"vcore": 10000, "memory": 10})


def test_replace_errors() -> None:
    p, _ = _part()
    p.add_application("app1", BOB, queue="root.a")
    p.allocate("app1", "ph1", V1, placeholder=True, task_group="tg")
    p.allocate("app1", "k1", V1)
    with pytest.raises(NotFoundError):
        p.replace_placeholder("nope", "r", V1)
    with pytest.raises(ConflictError):
        p.replace_placeholder("k1", "r", V1)                      # not a placeholder
    with pytest.raises(ConflictError):
        p.replace_placeholder("ph1", "k1", V1)                    # key exists
    with pytest.raises(ValueError):
        p.allocate("app1", "ph2", V1, placeholder=True)           # no task group


def test_gang_soft_all_placeholders_time_out_app_resumes_and_keeps_counting() -> None:
    """Seed 001 gang "soft", all placeholders time out: released; the app continues (Resuming) and
    keeps its running slot (reference A-3: not removed while resuming)."""
    p, clock = _part()
    p.add_application("app1", BOB, queue="root.a", gang_style="soft", placeholder_timeout=60)
    p.allocate("app1", "ph1", V1, placeholder=True, task_group="tg")
    p.allocate("app1", "ph2", V1, placeholder=True, task_group="tg")
    assert p.check_timeouts(clock.now + 59) == []
    out = p.check_timeouts(clock.now + 60)
    assert out == ["app1: 2 placeholder(s) timed out", "app1: Resuming (gang style soft)"]
    app = p.application("app1")
    assert app.state == "Resuming" and not app.allocations
    assert p.queues.queue("root.a").allocated == Resource()
    assert _running(p) == ["app1"]
    assert p.allocate("app1", "k1", V1)
    assert app.state == "Running"


def test_gang_hard_all_placeholders_time_out_app_fails_and_leaves_count() -> None:
    p, clock = _part()
    p.add_application("app1", BOB, queue="root.a", gang_style="hard", placeholder_timeout=60)
    p.allocate("app1", "ph1", V1, placeholder=True, task_group="tg")
    clock.advance(10)
    p.allocate("app1", "ph2", V1, placeholder=True, task_group="tg")
    out = p.check_timeouts(clock.now + 50)                      # timer runs from the first placeholder
    assert out == ["app1: 2 placeholder(s) timed out", "app1: Failed (gang style hard)"]
    app = p.application("app1")
    assert app.state == "Failed" and _running(p) == []
    assert p.queues.queue("root.a").allocated == Resource()
    assert p.ugm.get_user_resources(BOB) is None
    with pytest.raises(ConflictError):
        p.allocate("app1", "k1", V1)


def test_gang_some_placeholders_replaced_then_timeout_releases_the_rest() -> None:
    """Seed 001 gang, some placeholders replaced: the rest time out; the app keeps running."""
    p, clock = _part()
    p.add_application("app1", BOB, queue="root.a", gang_style="hard", placeholder_timeout=60)
    p.allocate("app1", "ph1", V1, placeholder=True, task_group="tg")
    p.allocate("app1", "ph2", V1, placeholder=True, task_group="tg")
    p.replace_placeholder("ph1", "real1", V1)
    p.check_timeouts(clock.now + 60)
    app = p.application("app1")
    assert list(app.allocations) == ["real1"] and app.state == "Running"
    assert _running(p) == ["app1"]
    assert p.queues.queue("root.a").allocated == V1


def test_gang_all_placeholders_replaced_stops_the_timer() -> None:
    p, clock = _part()
    p.add_application("app1", BOB, queue="root.a", gang_style="hard", placeholder_timeout=60)
    p.allocate("app1", "ph1", V1, placeholder=True, task_group="tg")
    p.replace_placeholder("ph1", "real1", V1)
    assert p.application("app1").placeholder_since is None
    p.check_timeouts(clock.now + 1000)
    assert p.application("app1").state == "Running"


def test_release_of_last_placeholder_completes_like_any_allocation() -> None:
    p, _ = _part()
    p.add_application("app1", BOB, queue="root.a")
    p.allocate("app1", "ph1", V1, placeholder=True, task_group="tg")
    p.release("ph1")
    assert p.application("app1").state == "Completing" and _running(p) == []


def test_timeouts_are_journalled_and_use_the_default_clock() -> None:
    p, clock = _part()
    p.add_application("app1", BOB, queue="root.a", placeholder_timeout=5)
    p.allocate("app1", "ph1", V1, placeholder=True, task_group="tg")
    n = p.journal.last_seq(p.stream)
    clock.advance(5)
    assert p.check_timeouts() != []
    written = [ev for _, ev in p.journal.read(p.stream, after=n)]
    # the timeouts event, then what it did told to subscribers (noted: the placeholder released,
    # the application's new state)
    assert [ev["type"] for ev in written] == ["timeouts", "noted", "noted"]
    assert [ev["notice"]["type"] for ev in written[1:]] == ["released", "application"]
    m = p.journal.last_seq(p.stream)
    assert p.check_timeouts() == []                                # nothing due: no event
    assert p.journal.last_seq(p.stream) == m
