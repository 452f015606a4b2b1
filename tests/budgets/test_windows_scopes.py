"""Windows on elastic quotas (``min``/``max``) and on user and group limits (``maxresources``,
``maxapplications``) — issue 34 item 4: opened and closed as journalled configuration changes, checked
by validation (the quota or the limit must exist; overlaps on one setting of one scope are refused
naming both), and a lowered elastic max enforced by the elastic quota's own revocation (E5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from quotaplane.config.identity import UserGroup
from quotaplane.config.loader import load_config
from quotaplane.config.windows import WindowSpecError, parse_windows
from quotaplane.errors import ConfigError
from quotaplane.scheduler import Scheduler
from quotaplane.windows import edges, tick
from tests.budgets.test_windows import FRI, H
from tests.partition.helpers import Clock
from tests.preemption.helpers import elastic_quota

ELASTIC = f"""
partitions:
- name: default
  elasticquotas:
    revokeDelay: 30
    quotas: |
{elastic_quota("team-a", 2, 2)}{elastic_quota("team-b", 2, 8)}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: q
  windows:
  - name: burst
    elasticquota: team-a
    from: "2026-11-27T09:00"
    to: "2026-11-27T12:00"
    max: {{cpu: 6}}
    min: {{cpu: 4}}
"""

LIMITS = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      limits:
      - limit: alice
        users: [alice]
        maxresources: {vcore: 2}
        maxapplications: 1
      - limit: dev
        groups: [dev]
        maxresources: {vcore: 4}
  windows:
  - name: alice-night
    queue: root.a
    user: alice
    cron: "0 20 * * *"
    duration: 10h
    maxresources: {vcore: 8}
    maxapplications: 3
"""


def test_an_elastic_window_opens_and_closes_in_the_quota_objects() -> None:
    assert edges(ELASTIC, FRI + 8 * H) is None
    opened, what = edges(ELASTIC, FRI + 9 * H) or ("", [])
    assert what == ["window burst opened on elastic quota team-a (partition default)"]
    quotas = load_config(opened).partitions[0].extensions["elasticquotas"]["quotas"]
    [a] = [q for q in quotas if q["metadata"]["name"] == "team-a"]
    assert a["spec"] == {"min": {"cpu": 4}, "max": {"cpu": 6}}
    w = load_config(opened).partitions[0].extensions["windows"][0]
    assert w["active"] is True and w["saved"] == {"max": {"cpu": 2}, "min": {"cpu": 2}}
    closed, what = edges(opened, FRI + 12 * H) or ("", [])
    assert what == ["window burst closed on elastic quota team-a (partition default)"]
    quotas = load_config(closed).partitions[0].extensions["elasticquotas"]["quotas"]
    [a] = [q for q in quotas if q["metadata"]["name"] == "team-a"]
    assert a["spec"] == {"min": {"cpu": 2}, "max": {"cpu": 2}}
    assert "active" not in load_config(closed).partitions[0].extensions["windows"][0]


def test_an_elastic_window_raises_then_lowers_a_max_and_the_revocation_enforces_it(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/q.db"
    clock = Clock(FRI + 8 * H)
    s = Scheduler.from_yaml(ELASTIC, store=store, clock=clock)
    p = s.partition("default")
    p.add_node("n", {"vcore": 16000})
    p.add_application("x", UserGroup("u", ()), queue="root.q", tags={"namespace": "team-a"})
    assert p.allocate("x", "k0", {"vcore": 2000}, priority=10).allocated
    assert not p.allocate("x", "k1", {"vcore": 2000}).allocated                    # max 2
    clock.now = FRI + 9 * H
    assert tick(s.config_text, s.update_config, clock()) == \
        ["window burst opened on elastic quota team-a (partition default)"]
    assert p.allocate("x", "k1", {"vcore": 2000}, priority=1).allocated             # max 6 now
    assert p.allocate("x", "k2", {"vcore": 2000}, priority=2).allocated
    clock.now = FRI + 12 * H
    assert tick(s.config_text, s.update_config, clock()) == \
        ["window burst closed on elastic quota team-a (partition default)"]
    p.check_timeouts()                              # over its runtime: revoked after revokeDelay (E5)
    clock.advance(31)
    out = p.check_timeouts()
    assert len(out) == 2 and all("revoked by elastic" in line for line in out)
    assert p.allocation("k0") is not None
    live = p.dump_state()
    s.close(snapshot=False)
    again = Scheduler.from_yaml(ELASTIC, store=store, clock=clock)
    assert again.partition("default").dump_state() == live and again.config_text == s.config_text
    again.close(snapshot=False)


def test_a_limit_window_raises_a_users_limit_for_the_night() -> None:
    clock = Clock(FRI + 19 * H)
    s = Scheduler.from_yaml(LIMITS, clock=clock)
    p = s.partition("default")
    p.add_node("n", {"vcore": 64000})
    p.add_application("a1", UserGroup("alice", ()), queue="root.a")
    assert p.allocate("a1", "k1", {"vcore": 2000}).allocated
    refused = p.allocate("a1", "k2", {"vcore": 2000})
    assert [v.code for v in refused.reasons] == ["user.maxresources"]
    clock.now = FRI + 20 * H
    assert tick(s.config_text, s.update_config, clock()) == \
        ["window alice-night opened on user alice in root.a (partition default)"]
    assert p.allocate("a1", "k2", {"vcore": 6000}).allocated                        # 8 now
    [limit] = [lim for lim in load_config(s.config_text).partitions[0].root.queues[0].limits
               if lim.users == ("alice",)]
    assert limit.max_applications == 3
    clock.now = FRI + 30 * H
    assert tick(s.config_text, s.update_config, clock()) == \
        ["window alice-night closed on user alice in root.a (partition default)"]
    [limit] = [lim for lim in load_config(s.config_text).partitions[0].root.queues[0].limits
               if lim.users == ("alice",)]
    assert (dict(limit.max_resources or {}), limit.max_applications) == ({"vcore": 2000}, 1)
    assert not p.allocate("a1", "k4", {"vcore": 1000}).allocated                    # over 2 again


@pytest.mark.parametrize(("raw", "message"), [
    ([{"name": "a", "elasticquota": "t", "queue": "root.a", "from": "2026-01-01", "to": "2026-01-02",
       "max": {"cpu": 1}}], "windows[0] (a): a window is on a queue, an elastic quota or a limit"),
    ([{"name": "a", "elasticquota": "t", "from": "2026-01-01", "to": "2026-01-02", "guaranteed": {"cpu": 1}}],
     "windows[0] (a).guaranteed: a window on an elastic quota overrides min, max or resourcehours"),
    ([{"name": "a", "queue": "root.a", "from": "2026-01-01", "to": "2026-01-02", "min": {"cpu": 1}}],
     "windows[0] (a).min: a window on a queue overrides max, guaranteed or resourcehours"),
    ([{"name": "a", "queue": "root.a", "user": "u", "from": "2026-01-01", "to": "2026-01-02",
       "max": {"cpu": 1}}],
     "windows[0] (a).max: a window on a limit overrides maxresources or maxapplications"),
    ([{"name": "a", "queue": "root.a", "group": "g", "from": "2026-01-01", "to": "2026-01-02",
       "maxapplications": -1}], "windows[0] (a).maxapplications: expected a count"),
    ([{"name": "a", "elasticquota": "t", "cron": "0 9 * * *", "duration": "3h", "max": {"cpu": 1}},
      {"name": "b", "elasticquota": "t", "cron": "0 11 * * *", "duration": "3h", "max": {"cpu": 2}}],
     "windows[0] (a): overlaps windows[1] (b) on max of elastic quota t"),
    ([{"name": "a", "queue": "root.a", "user": "u", "cron": "0 9 * * *", "duration": "3h",
       "maxapplications": 1},
      {"name": "b", "queue": "root.a", "user": "u", "cron": "0 11 * * *", "duration": "3h",
       "maxapplications": 2}],
     "windows[0] (a): overlaps windows[1] (b) on maxapplications of user u in root.a"),
])
def test_a_wrong_scope_window_is_one_sentence_naming_it(raw: object, message: str) -> None:
    with pytest.raises(WindowSpecError) as err:
        parse_windows(raw)
    assert message in str(err.value)


def test_the_same_setting_on_different_scopes_may_overlap() -> None:
    assert len(parse_windows([
        {"name": "a", "elasticquota": "t", "cron": "0 9 * * *", "duration": "3h", "max": {"cpu": 1}},
        {"name": "b", "queue": "root.t", "cron": "0 9 * * *", "duration": "3h", "max": {"cpu": 1}},
        {"name": "c", "queue": "root.t", "user": "u", "cron": "0 9 * * *", "duration": "3h",
         "maxresources": {"vcore": 1}},
        {"name": "d", "queue": "root.t", "group": "u", "cron": "0 9 * * *", "duration": "3h",
         "maxresources": {"vcore": 1}}])) == 4


def test_validate_names_a_missing_elastic_quota_or_limit() -> None:
    with pytest.raises(ConfigError, match=r"windows\[0\] \(burst\)\.elasticquota: no elastic quota team-z"):
        load_config(ELASTIC.replace("elasticquota: team-a", "elasticquota: team-z"))
    with pytest.raises(ConfigError, match=r"windows\[0\] \(alice-night\)\.user: queue root.a has no limit "
                                          r"listing user bob"):
        load_config(LIMITS.replace("user: alice", "user: bob"))
