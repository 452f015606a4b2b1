"""Conformance review: placement edge cases not covered elsewhere (reference §1.14 P-3, P-4)."""

from __future__ import annotations

from quotaplane.config.identity import UserGroup
from quotaplane.config.model import PlacementRuleConfig
from quotaplane.placement import PlacementManager
from quotaplane.queues import QueueTree
from tests.queues.helpers import partition


def _tree() -> QueueTree:
    return QueueTree(partition({"submitacl": "*", "queues": [{"name": "default"}]}))


def test_p3_p4_tag_value_root_is_a_queue_name_not_the_root() -> None:
    """P-3: only a value starting with ``root.`` is fully qualified; P-4: anything else is a child
    name under the parent (``root``), so a namespace called ``root`` places into ``root.root``."""
    rules = [PlacementRuleConfig(name="tag", value="namespace", create=True)]
    pm = PlacementManager(rules)
    user = UserGroup("alice")
    assert pm.place("app", user, {"namespace": "root"}, _tree()) == "root.root"
    assert pm.place("app", user, {"namespace": "Root"}, _tree()) == "root.root"


def test_p4_user_rule_for_a_user_called_root_places_under_root() -> None:
    """P-4 (user rule, same construction): the user's name is a child name, never a full path."""
    pm = PlacementManager([PlacementRuleConfig(name="user", create=True)])
    assert pm.place("app", UserGroup("root"), {}, _tree()) == "root.root"
