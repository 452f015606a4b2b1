"""Placement properties: for any rules, tags and user, ``place`` either returns a usable queue path
(P-6) or raises RejectedError — never anything else — and is deterministic."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from quotaplane.config.identity import UserGroup
from quotaplane.config.model import FilterConfig, PlacementRuleConfig
from quotaplane.errors import RejectedError
from quotaplane.placement import PlacementManager
from quotaplane.queues import QueueTree
from tests.queues.helpers import partition

TREE = QueueTree(partition({"queues": [
    {"name": "default", "submitacl": "*"},
    {"name": "prod", "parent": True, "submitacl": "alice devs"},
    {"name": "dev", "parent": True, "submitacl": "*"},
    {"name": "leafq", "submitacl": "bob"},
    {"name": "closed", "parent": True, "queues": [{"name": "inner"}]},
]}))

names = st.sampled_from(["prod", "dev", "leafq", "closed", "default", "x.y", "root.dev.a", "root.prod",
                         "Mixed.Case", "bad name", "", "root.closed.inner", "alice"])
filters = st.one_of(st.none(), st.builds(FilterConfig, type=st.sampled_from(["allow", "deny"]),
                                         users=st.sampled_from([(), ("alice",), ("^b.*",)]),
                                         groups=st.sampled_from([(), ("devs",)])))
leaf_rules = st.builds(
    PlacementRuleConfig,
    name=st.sampled_from(["provided", "tag", "user", "group", "fixed", "secondarygroup"]),
    value=st.sampled_from(["namespace", "parent", "dev", "root.dev.fixed"]),
    create=st.booleans(), filter=filters)
rules = st.builds(
    PlacementRuleConfig,
    name=st.sampled_from(["provided", "tag", "user", "group", "fixed"]),
    value=st.sampled_from(["namespace", "parent", "dev"]),
    create=st.booleans(), parent=st.one_of(st.none(), leaf_rules), filter=filters)
users = st.builds(UserGroup, st.sampled_from(["alice", "bob", "carol", "d.ot"]),
                  st.lists(st.sampled_from(["devs", "ops", "dev"]), max_size=2, unique=True))


@settings(max_examples=150, deadline=None)
@given(rule_list=st.lists(rules, max_size=3), user=users,
       tags=st.dictionaries(st.sampled_from(["namespace", "parent", "Namespace"]), names, max_size=2),
       requested=st.one_of(st.none(), names))
def test_place_returns_a_usable_queue_or_rejects(rule_list: list[PlacementRuleConfig], user: UserGroup,
                                                 tags: dict[str, str], requested: str | None) -> None:
    pm = PlacementManager(rule_list)
    try:
        path = pm.place("app", user, tags, TREE, requested)
    except RejectedError:
        return
    assert path == path.lower() and path.startswith("root.")
    assert pm.place("app", user, tags, TREE, requested) == path  # deterministic
    if TREE.exists(path):
        assert TREE.is_leaf(path) and not TREE.is_draining(path)
    assert TREE.check_submit_acl(path, user)
    q = TREE.queue(path)
    if q is None:
        # a new queue must be creatable
        fresh = QueueTree(partition({"queues": [
            {"name": "default", "submitacl": "*"},
            {"name": "prod", "parent": True, "submitacl": "alice devs"},
            {"name": "dev", "parent": True, "submitacl": "*"},
            {"name": "leafq", "submitacl": "bob"},
            {"name": "closed", "parent": True, "queues": [{"name": "inner"}]}]}))
        assert fresh.ensure_dynamic_queue(path).is_leaf
