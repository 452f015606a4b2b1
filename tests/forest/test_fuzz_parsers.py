"""Bad input (quality.md): the tree, consumer and node-spec parsers raise only QuotaError, change nothing."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane.forest import ConsumerInfo, QuotaError, QuotaManager

WORDS = ["", "nil", "true", "yes", "10", "-3", "x", "QuotaTree", "Consumer", "A"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**70), st.floats(allow_nan=False),
                    st.sampled_from(WORDS))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["kind", "metadata", "spec", "name", "nodes", "resourceNames", "parent",
                                     "hard", "quota", "cpu", "id", "trees", "treeName", "groupID", "request",
                                     "priority", "type", "unPreemptable", "A", "B"]), inner, max_size=5)),
    max_leaves=25)


def shaped(value: Any, kind: str) -> Any:
    """Mostly well-formed documents with random parts, so parsing gets deep."""
    return {"kind": kind, "metadata": {"name": "T"}, "spec": value}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values, st.booleans())
def test_tree_parser_raises_only_quota_error(value: Any, wrap: bool) -> None:
    qm = QuotaManager()
    doc = shaped(value, "QuotaTree") if wrap else value
    before = qm.dump_state()
    try:
        qm.add_tree_from_string(json.dumps(doc))
    except QuotaError:
        assert qm.dump_state() == before
    with contextlib.suppress(QuotaError):
        qm.add_tree_from_string(json.dumps(doc)[:-1] + ",}")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values, st.booleans())
def test_consumer_parser_raises_only_quota_error(value: Any, wrap: bool) -> None:
    doc = shaped(value, "Consumer") if wrap else value
    try:
        info = ConsumerInfo.from_string(json.dumps(doc))
    except QuotaError:
        return
    assert info.id


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=8), json_values)
def test_node_spec_raises_only_quota_error(name: str, spec: Any) -> None:
    qm = QuotaManager()
    qm.add_tree_by_name("T")
    cache = qm.get_tree_cache("T")
    before = cache.to_dict()
    try:
        cache.add_node_spec(name, spec)
    except QuotaError:
        assert cache.to_dict() == before
        return
    qm.update_tree("T")
