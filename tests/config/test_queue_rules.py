"""Queue and general rules V-14 … V-21 (reference §1.11), placement rules, node sort policy."""

from __future__ import annotations

import pytest

from quotaplane.config import load_config
from quotaplane.config.files import validate_conf
from quotaplane.resources import Resource
from tests.config.helpers import load, problems, queues, reasons, root_with


# -- V-14 -------------------------------------------------------------------------------------------
def test_v14_missing_or_null_queues_is_rejected() -> None:
    assert reasons("partitions:\n  - name: default\n") == ["queue config is not set"]
    assert reasons("partitions:\n  - name: default\n    queues:\n") == ["queue config is not set"]


def test_v14_several_top_queues_get_a_root_parent() -> None:
    cfg = load(queues("- name: a\n- name: b\n"))
    root = cfg.partition("default").root
    assert root.name == "root" and root.parent
    assert [q.path for q in root.queues] == ["root.a", "root.b"]


def test_v14_single_top_queue_not_named_root_gets_a_root_parent() -> None:
    cfg = load(queues("- name: team\n  queues:\n    - name: x\n"))
    assert [q.path for q in cfg.partition("default").root.walk()] == ["root", "root.team", "root.team.x"]


def test_v14_root_is_always_a_parent_and_case_insensitive() -> None:
    cfg = load(queues("- name: ROOT\n  parent: false\n"))
    root = cfg.partition("default").root
    assert root.name == "root" and root.parent and root.queues == ()


def test_v14_empty_queue_list_gives_an_empty_root() -> None:
    cfg = load("partitions:\n  - name: default\n    queues: []\n")
    assert cfg.partition("default").root.queues == ()


# -- V-15 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["max", "guaranteed"])
def test_v15_root_with_resources_is_rejected(kind: str) -> None:
    found = problems(root_with(f"resources:\n  {kind}: {{vcore: 1}}\n"))
    assert found == [(6, "root queue must not have resource limits set")]


def test_v15_root_with_empty_resource_maps_is_accepted() -> None:
    load(root_with("resources:\n  max: {}\n  guaranteed: {}\n"))


# -- V-16 -------------------------------------------------------------------------------------------
V16 = ("invalid queue name, max 64 characters consisting of alphanumeric characters and "
       "'-', '_', '#', '@', '/', ':' allowed")


@pytest.mark.parametrize("name", ["a.b", "x" * 65, "has space", "", "a!b"])
def test_v16_invalid_queue_names(name: str) -> None:
    found = reasons(queues(f"- name: root\n  queues:\n    - name: '{name}'\n"))
    assert found == [f"{V16}: '{name.lower()}'"]


@pytest.mark.parametrize("name", ["a-b_c:d#e/f@g", "x" * 64, "0", "Team-1"])
def test_v16_valid_queue_names(name: str) -> None:
    cfg = load(queues(f"- name: root\n  queues:\n    - name: '{name}'\n"))
    assert cfg.partition("default").root.queues[0].path == f"root.{name.lower()}"


def test_v16_duplicate_children_case_insensitive_with_level() -> None:
    assert reasons(queues("- name: root\n  queues:\n    - name: Team\n    - name: team\n")) == [
        "duplicate child name found with name 'team', level 1"]
    deep = "- name: root\n  queues:\n    - name: a\n      queues:\n        - name: x\n        - name: X\n"
    assert reasons(queues(deep)) == ["duplicate child name found with name 'x', level 2"]


def test_v16_same_name_under_different_parents_is_fine() -> None:
    load(queues("- name: root\n  queues:\n    - name: a\n      queues: [{name: x}]\n"
                "    - name: b\n      queues: [{name: x}]\n"))


def test_u10_queue_names_and_paths_are_lower_case() -> None:
    cfg = load(queues("- name: Root\n  queues:\n    - name: Eng\n      queues:\n        - name: ML\n"))
    p = cfg.partition("default")
    assert [q.path for q in p.root.walk()] == ["root", "root.eng", "root.eng.ml"]
    assert p.queue("ROOT.ENG.ml") is p.root.queues[0].queues[0]


# -- V-17 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("acl", ["*", "", " ", "alice", "alice,bob", "alice,bob dev,ops", " dev", "  *  "])
def test_v17_valid_acls(acl: str) -> None:
    cfg = load(root_with(f"submitacl: '{acl}'\nadminacl: '{acl}'\n"))
    assert cfg.partition("default").root.submit_acl == acl


@pytest.mark.parametrize("field", ["submitacl", "adminacl"])
def test_v17_three_fields_is_rejected(field: str) -> None:
    assert reasons(root_with(f"{field}: 'alice bob carol'\n")) == [
        "multiple spaces found in ACL: 'alice bob carol'"]


def test_v17_unset_acl_is_none() -> None:
    assert load(root_with("parent: true\n")).partition("default").root.submit_acl is None


# -- V-18 -------------------------------------------------------------------------------------------
def tree(parent: str, children: list[str]) -> str:
    body = "- name: root\n  queues:\n    - name: p\n"
    if parent:
        body += f"      resources: {parent}\n"
    body += "      queues:\n"
    for i, child in enumerate(children):
        body += f"        - name: c{i}\n"
        if child:
            body += f"          resources: {child}\n"
    return queues(body)


def test_v18_guaranteed_above_own_max_is_rejected() -> None:
    assert reasons(tree("{max: {vcore: 2}, guaranteed: {vcore: 3}}", [])) == [
        "guaranteed resource map[vcore:3000] is larger than maximum resource map[vcore:2000] for queue "
        "root.p"]


def test_v18_child_max_above_parent_max_is_rejected() -> None:
    assert reasons(tree("{max: {vcore: 2}}", ["{max: {vcore: 3}}"])) == [
        "max resource of parent map[vcore:2000] is smaller than maximum resource map[vcore:3000] for queue "
        "root.p.c0"]


def test_v18_grandparent_max_applies_through_a_level_without_max() -> None:
    body = """\
    - name: root
      queues:
        - name: g
          resources: {max: {memory: 10}}
          queues:
            - name: p
              queues:
                - name: c
                  resources: {max: {memory: 11}}
    """
    assert reasons(queues(body)) == [
        "max resource of parent map[memory:10] is smaller than maximum resource map[memory:11] for queue "
        "root.g.p.c"]


def test_v18_sum_of_children_max_may_exceed_parent_max() -> None:
    # seed 004: parent 900, children 750 and 750.
    load(tree("{max: {memory: 900}}", ["", "{max: {memory: 750}}", "{max: {memory: 750}}"]))


def test_v18_sum_of_children_guaranteed_above_parent_guaranteed_is_rejected() -> None:
    children = ["{guaranteed: {vcore: 2}}", "{guaranteed: {vcore: 2}}"]
    assert reasons(tree("{guaranteed: {vcore: 3}}", children)) == [
        "guaranteed resource of parent map[vcore:3000] is smaller than sum of guaranteed resources "
        "map[vcore:4000] of the children for queue root.p"]


def test_v18_sum_of_children_guaranteed_above_parent_max_is_rejected() -> None:
    assert reasons(tree("{max: {vcore: 3}}", ["{guaranteed: {vcore: 2}}", "{guaranteed: {vcore: 2}}"])) == [
        "max resource map[vcore:3000] is smaller than sum of guaranteed resources map[vcore:4000] of the "
        "children for queue root.p"]


def test_v18_types_not_in_parent_guaranteed_are_not_summed_against_it() -> None:
    load(tree("{guaranteed: {vcore: 4}}", ["{guaranteed: {vcore: 2, memory: 10}}",
                                          "{guaranteed: {vcore: 2, memory: 10}}"]))


def test_v18_a_child_without_guaranteed_contributes_its_childrens_sum() -> None:
    body = """\
    - name: root
      queues:
        - name: p
          resources: {guaranteed: {vcore: 3}}
          queues:
            - name: mid
              queues:
                - {name: x, resources: {guaranteed: {vcore: 2}}}
                - {name: y, resources: {guaranteed: {vcore: 2}}}
    """
    assert reasons(queues(body)) == [
        "guaranteed resource of parent map[vcore:3000] is smaller than sum of guaranteed resources "
        "map[vcore:4000] of the children for queue root.p"]


def test_v18_seed_004_static_queues_are_valid() -> None:
    body = """\
    - name: root
      submitacl: '*'
      queues:
        - name: advertisement
          resources:
            guaranteed: {memory: 500G, vcore: 50}
            max: {memory: 800G, vcore: 80}
        - name: search
          resources:
            guaranteed: {memory: 400G, vcore: 40}
            max: {memory: 600G, vcore: 60}
        - name: sandbox
          resources:
            guaranteed: {memory: 100G, vcore: 10}
            max: {memory: 100G, vcore: 10}
    """
    p = load(queues(body)).partition("default")
    assert p.queue("root.search").max == Resource({"memory": 600 * 10**9, "vcore": 60000})  # type: ignore[union-attr]
    assert p.queue("root.sandbox").guaranteed == {"memory": 100 * 10**9, "vcore": 10000}  # type: ignore[union-attr]


# -- V-19 -------------------------------------------------------------------------------------------
def apps(parent: int | None, child: int | None) -> str:
    body = "- name: root\n  queues:\n    - name: p\n"
    if parent is not None:
        body += f"      maxapplications: {parent}\n"
    body += "      queues:\n        - name: c\n"
    if child is not None:
        body += f"          maxapplications: {child}\n"
    return queues(body)


def test_v19_child_above_parent_is_rejected() -> None:
    assert reasons(apps(10, 11)) == ["parent maxApplications must be larger than child maxApplications"]


@pytest.mark.parametrize("child", [None, 0])
def test_v19_child_unset_under_parent_count_is_rejected(child: int | None) -> None:
    assert reasons(apps(10, child)) == [
        "maxApplications is either undefined or zero, which is not allowed when parent queue's "
        "maxApplications is defined"]


@pytest.mark.parametrize(("parent", "child"), [(10, 10), (10, 1), (None, 50), (0, 7), (None, None)])
def test_v19_accepted(parent: int | None, child: int | None) -> None:
    load_config(apps(parent, child))


# -- V-20 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["-1", "1.5", "10X", "100m", "1ki", "9223372036854775808", "1e3"])
def test_v20_bad_queue_quantities_are_rejected_with_the_line(value: str) -> None:
    text = queues(f"- name: root\n  queues:\n    - name: a\n      resources:\n        max:\n"
                  f"          memory: '{value}'\n")
    found = problems(text)
    assert len(found) == 1
    assert found[0][0] == 9  # the `memory:` line
    assert "memory" in found[0][1] and value in found[0][1]


def test_v20_negative_yaml_integer_is_rejected() -> None:
    assert "invalid quantity '-5'" in reasons(tree("{max: {memory: -5}}", []))[0]


@pytest.mark.parametrize(("value", "expected"), [
    ("1", 1000), ("500m", 500), ("2k", 2_000_000), ("2Ki", 2_048_000), ("' 25  k '", 25_000_000)])
def test_v20_vcore_forms_through_the_config(value: str, expected: int) -> None:
    p = load(tree(f"{{max: {{vcore: {value}}}}}", [])).partition("default")
    assert p.queue("root.p").max == {"vcore": expected}  # type: ignore[union-attr]


@pytest.mark.parametrize(("value", "expected"), [
    ("10", 10), ("10k", 10_000), ("3M", 3 * 10**6), ("2G", 2 * 10**9), ("1T", 10**12), ("1P", 10**15),
    ("1E", 10**18), ("1Ki", 1024), ("1Mi", 2**20), ("1Gi", 2**30), ("1Ti", 2**40), ("1Pi", 2**50),
    ("1Ei", 2**60), ("'7 Gi'", 7 * 2**30)])
def test_v20_quantity_suffixes_through_the_config(value: str, expected: int) -> None:
    p = load(tree(f"{{max: {{memory: {value}}}}}", [])).partition("default")
    assert p.queue("root.p").max == {"memory": expected}  # type: ignore[union-attr]


def test_v20_any_resource_name_is_accepted_q7() -> None:
    p = load(tree("{max: {nvidia.com/gpu: 4, cpu: 10, hugepages-1Gi: 2}}", [])).partition("default")
    assert p.queue("root.p").max == {"nvidia.com/gpu": 4, "cpu": 10, "hugepages-1Gi": 2}  # type: ignore[union-attr]


# -- V-21 -------------------------------------------------------------------------------------------
def test_v21_validate_conf_shape() -> None:
    assert validate_conf(root_with("submitacl: '*'\n")) == {"allowed": True}
    bad = validate_conf(root_with("submitacl: 'a b c'\n"))
    assert bad == {"allowed": False, "reason": "line 5: multiple spaces found in ACL: 'a b c'"}
    unparsable = validate_conf("partitions: [")
    assert unparsable["allowed"] is False and "invalid YAML" in str(unparsable["reason"])


# -- placement rules (Appendix B) -------------------------------------------------------------------
def rules(text: str) -> str:
    return queues("- name: root\n", "placementrules:\n" + text)


def test_placement_rules_are_loaded_with_parent_and_filter() -> None:
    cfg = load(rules("""\
      - name: Tag
        value: namespace
        create: true
        parent:
          name: tag
          value: namespace.parentqueue
        filter:
          type: Deny
          users: [bob, alice]
          groups: ['^sys.*$']
      - name: provided
    """))
    first, second = cfg.partition("default").placement_rules
    assert (first.name, first.value, first.create) == ("tag", "namespace", True)
    assert first.parent is not None and first.parent.value == "namespace.parentqueue"
    assert first.parent.create is False
    assert first.filter is not None
    assert (first.filter.type, first.filter.users, first.filter.groups) == ("deny", ("bob", "alice"),
                                                                            ("^sys.*$",))
    assert second.name == "provided" and second.filter is None


def test_filter_type_defaults_to_allow() -> None:
    cfg = load(rules("  - name: user\n    filter:\n      users: [bob]\n"))
    rule = cfg.partition("default").placement_rules[0]
    assert rule.filter is not None and rule.filter.type == "allow"


@pytest.mark.parametrize(("rule", "message"), [
    ("{name: '1bad'}", "invalid rule name 1bad, a name must be a valid identifier"),
    ("{name: ''}", "invalid rule name , a name must be a valid identifier"),
    ("{name: magic}", "unknown rule name specified magic, failing placement rule config"),
    ("{name: tag}", "a tag queue rule must have a tag name set"),
    ("{name: fixed}", "a fixed queue rule must have a queue name set"),
    ("{name: fixed, value: 'root.a b'}", "in fixed rule queue 'root.a b'"),
    ("{name: user, filter: {type: maybe}}",
     "invalid rule filter type maybe, filter type must be either 'allow' or 'deny'"),
    ("{name: user, filter: {users: ['bob smith']}}",
     "invalid rule filter user list is not a proper list or regexp: [bob smith]"),
    ("{name: user, filter: {users: ['(unclosed']}}",
     "invalid rule filter user list is not a proper list or regexp: [(unclosed]"),
    ("{name: user, filter: {users: ['(?=x)']}}",
     "invalid rule filter user list is not a proper list or regexp: [(?=x)]"),
    ("{name: user, filter: {users: [bob, 'a*']}}",
     "invalid rule filter user list, user name 'a*' is not valid"),
    ("{name: user, filter: {groups: ['g@x']}}",
     "invalid rule filter group list is not a proper list or regexp: [g@x]"),
    ("{name: user, parent: {name: tag}}", "a tag queue rule must have a tag name set"),
])
def test_invalid_placement_rules(rule: str, message: str) -> None:
    found = reasons(rules(f"  - {rule}\n"))
    assert len(found) == 1 and message in found[0], found


@pytest.mark.parametrize("rule", [
    "{name: provided, create: true}", "{name: user}", "{name: primarygroup}", "{name: secondarygroup}",
    "{name: fixed, value: root.a}", "{name: fixed, value: a}", "{name: user, filter: {users: ['^a.*']}}",
    "{name: user, filter: {users: [alice, bob], groups: [dev], type: allow}}",
])
def test_valid_placement_rules(rule: str) -> None:
    load(rules(f"  - {rule}\n"))


def test_placement_rule_parents_nested_too_deeply_are_an_error() -> None:
    rule = "{name: user}"
    for _ in range(20):
        rule = f"{{name: tag, value: ns, parent: {rule}}}"
    found = reasons(rules(f"  - {rule}\n"))
    assert any("placement rule parents nested too deeply" in r for r in found)


# -- node sort policy and preemption ----------------------------------------------------------------
@pytest.mark.parametrize("ptype", ["fair", "binpacking", "BinPacking", "''"])
def test_node_sort_policy_types(ptype: str) -> None:
    cfg = load(queues("- name: root\n", f"nodesortpolicy:\n  type: {ptype}\n  resourceweights:\n"
                                        "    vcore: 1.5\n    memory: 1\n"))
    policy = cfg.partition("default").node_sort_policy
    assert policy.type == ptype.strip("'").lower()
    assert dict(policy.resource_weights) == {"vcore": 1.5, "memory": 1.0}


def test_node_sort_policy_unknown_type_and_negative_weight() -> None:
    found = reasons(queues("- name: root\n", "nodesortpolicy:\n  type: random\n  resourceweights:\n"
                                             "    vcore: -1\n"))
    assert found == ["undefined policy: random", "negative resource weight for vcore is not allowed"]


def test_preemption_switches() -> None:
    cfg = load(queues("- name: root\n", "preemption:\n  enabled: true\n  quotapreemptionenabled: true\n"))
    pre = cfg.partition("default").preemption
    assert pre.enabled and pre.quota_preemption_enabled
    default = load(queues("- name: root\n")).partition("default").preemption
    assert default.enabled and not default.quota_preemption_enabled     # decision P1: as YuniKorn
    only_quota = load(queues("- name: root\n", "preemption:\n  quotapreemptionenabled: true\n"))
    assert only_quota.partition("default").preemption.enabled
    off = load(queues("- name: root\n", "preemption:\n  enabled: false\n"))
    assert not off.partition("default").preemption.enabled


# -- child templates and properties -----------------------------------------------------------------
def test_child_template_and_properties_are_parsed() -> None:
    cfg = load(root_with("""\
        properties:
          application.sort.policy: stateaware
          priority.offset: 10
          flag: true
        childtemplate:
          maxapplications: 4
          properties: {a: b}
          resources:
            max: {vcore: 8, memory: 16Gi}
            guaranteed: {vcore: 1}
        """))
    root = cfg.partition("default").root
    assert dict(root.properties) == {"application.sort.policy": "stateaware", "priority.offset": "10",
                                     "flag": "true"}
    t = root.child_template
    assert t is not None and t.max_applications == 4 and dict(t.properties) == {"a": "b"}
    assert t.max == {"vcore": 8000, "memory": 16 * 2**30} and t.guaranteed == {"vcore": 1000}


def test_child_template_guaranteed_above_max_is_rejected() -> None:
    found = reasons(root_with("childtemplate:\n  resources:\n    max: {vcore: 1}\n"
                              "    guaranteed: {vcore: 2}\n"))
    assert found == ["guaranteed resource map[vcore:2000] is larger than maximum resource map[vcore:1000] "
                     "for child template of queue root"]


@pytest.mark.parametrize("body", [
    '- name: root\n  queues:\n    - name: "team\\n"\n',
    '- name: root\n  limits:\n    - {limit: x, users: ["bob\\n"], maxapplications: 1}\n',
    '- name: root\n  limits:\n    - {limit: x, groups: ["dev\\n", "*"], maxapplications: 1}\n',
])
def test_names_with_a_trailing_newline_are_invalid_as_in_go(body: str) -> None:
    assert len(reasons(queues(body))) == 1


def test_rule_name_with_trailing_newline_is_invalid() -> None:
    assert "invalid rule name" in reasons(rules('  - {name: "user\\n"}\n'))[0]
