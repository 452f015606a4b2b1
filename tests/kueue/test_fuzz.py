"""Kueue's objects fuzzed (quality.md "Bad input"): whatever a file of Kueue-looking objects holds —
wrong types, missing or extra fields, strange quantities — reading it either gives a configuration or a
ConfigError naming what is wrong; nothing else escapes (a REST validate-conf never answers 500)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane.config import load_config
from quotaplane.errors import ConfigError

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**20), st.floats(allow_nan=True),
                    st.sampled_from(["", "1", "9", "500m", "36Gi", "-1", "1e400", "x", "cpu", "default",
                                     "team", "TryNextFlavor", "Never", "Any", "a.b", "Hold"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(
        ["name", "nominalQuota", "borrowingLimit", "lendingLimit", "flavors", "resources", "coveredResources",
         "weight", "policy", "cohortName", "parentName", "clusterQueue", "x"]), inner, max_size=4)),
    max_leaves=12)

resource = st.fixed_dictionaries({"name": st.sampled_from(["cpu", "memory", "nvidia.com/gpu", 3]),
                                  "nominalQuota": values}, optional={"borrowingLimit": values,
                                                                     "lendingLimit": values})
flavor_quotas = st.fixed_dictionaries({"name": st.sampled_from(["f", "g", 1]),
                                       "resources": st.one_of(st.lists(resource, max_size=3), values)})
group = st.fixed_dictionaries({"coveredResources": st.one_of(
    st.lists(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), max_size=3), values),
    "flavors": st.one_of(st.lists(flavor_quotas, max_size=2), values)})
spec = st.fixed_dictionaries({}, optional={
    "resourceGroups": st.one_of(st.lists(group, max_size=2), values),
    "cohortName": st.one_of(st.sampled_from(["c", "d"]), values),
    "parentName": st.sampled_from(["c", "d", ""]),
    "clusterQueue": st.sampled_from(["q", "r"]), "flavorFungibility": values, "preemption": values,
    "fairSharing": values, "nodeLabels": values, "nodeTaints": values, "tolerations": values,
    "queueingStrategy": values, "namespaceSelector": values, "stopPolicy": values})
obj = st.fixed_dictionaries({
    "apiVersion": st.sampled_from(["kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v9",
                                   "config.kueue.x-k8s.io/v1beta1", "v1"]),
    "kind": st.sampled_from(["ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "Configuration",
                             "Workload", "List"]),
    "metadata": st.one_of(st.fixed_dictionaries({"name": st.sampled_from(["q", "r", "c", "f", "g", "a.b"])},
                                                optional={"namespace": st.sampled_from(["ns", 4])}), values),
}, optional={"spec": st.one_of(spec, values), "items": values, "fairSharing": values})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(obj, min_size=1, max_size=5))
def test_kueue_objects_give_a_configuration_or_a_config_error(objects: list[dict[str, Any]]) -> None:
    objects[0]["apiVersion"] = "kueue.x-k8s.io/v1beta2"        # recognised as Kueue's
    text = "\n---\n".join(json.dumps(o, allow_nan=True) for o in objects)
    try:
        load_config(text)
    except ConfigError as err:
        assert err.problems and all(isinstance(reason, str) and reason for _, reason in err.problems)
