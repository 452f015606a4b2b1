"""Conformance review: queue-tree edge cases not covered elsewhere (reference §1.14 N-1)."""

from __future__ import annotations

import pytest

from quotaplane.queues import QueueTree
from tests.queues.helpers import partition


def _dynamic_leaf() -> QueueTree:
    tree = QueueTree(partition({"submitacl": "*", "queues": [
        {"name": "tenants", "parent": True, "childtemplate": {"maxapplications": 3}}]}))
    tree.ensure_dynamic_queue("root.tenants.ns")
    return tree


@pytest.mark.parametrize("text", [" 7", "7 ", "+7", "0x7", "7.0"])
def test_n1_max_apps_tag_that_is_not_an_unsigned_integer_counts_as_zero(text: str) -> None:
    """N-1: the maxApps tag is read with Go's ``strconv.ParseUint``: no sign, no spaces, decimal
    digits only; anything else is 0, so the template's maxapplications stays."""
    tree = _dynamic_leaf()
    tree.apply_namespace_tags("root.tenants.ns", {"namespace.resourcemaxapps": text})
    q = tree.queue("root.tenants.ns")
    assert q is not None and q.max_applications == 3


def test_n1_max_apps_tag_plain_digits_are_applied() -> None:
    """N-1/N-2: a valid unsigned integer sets the dynamic leaf's maxapplications."""
    tree = _dynamic_leaf()
    tree.apply_namespace_tags("root.tenants.ns", {"namespace.resourcemaxapps": "7"})
    q = tree.queue("root.tenants.ns")
    assert q is not None and q.max_applications == 7
