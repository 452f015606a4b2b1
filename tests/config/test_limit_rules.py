"""The limit rules V-1 … V-13 of the reference (§1.10), one by one, each valid and invalid.

Decisions: U11 (maxapplications 0 with maxresources is allowed), U12 (duplicates are errors).
"""

from __future__ import annotations

import pytest

from quotaplane.config import load_config
from quotaplane.resources import Resource
from tests.config.helpers import load, problems, queues, reasons, root_with


def leaf_limits(limits: str, queue_extra: str = "") -> str:
    """root -> leaf 'a' whose limits list is ``limits``."""
    body = "- name: root\n  queues:\n    - name: a\n"
    if queue_extra:
        body += "".join(f"      {ln}\n" for ln in queue_extra.strip("\n").splitlines())
    body += "      limits:\n" + "".join(f"        {ln}\n" for ln in limits.strip("\n").splitlines())
    return queues(body)


# -- V-1 --------------------------------------------------------------------------------------------
def test_v1_limit_without_users_and_groups_is_rejected() -> None:
    text = leaf_limits("- limit: nobody\n  maxapplications: 1\n")
    assert reasons(text) == ["empty user and group lists defined in limit 'nobody'"]


def test_v1_limit_with_users_only_or_groups_only_is_accepted() -> None:
    cfg = load_config(leaf_limits("- limit: u\n  users: [bob]\n  maxapplications: 1\n"
                                  "- limit: g\n  groups: [dev]\n  maxapplications: 1\n"))
    limits = cfg.partition("default").queue("root.a").limits  # type: ignore[union-attr]
    assert [(lim.users, lim.groups) for lim in limits] == [(("bob",), ()), ((), ("dev",))]


# -- V-2 --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("user", ["user.lastname", "user@domain", "system:serviceaccounts:ns:sa", "_svc$",
                                  "a/b#c-d", "*"])
def test_v2_valid_user_names(user: str) -> None:
    load_config(leaf_limits(f"- limit: x\n  users: ['{user}']\n  maxapplications: 1\n"))


@pytest.mark.parametrize("user", ["user space", "1InvalidUser", "", "bad!", "a$b"])
def test_v2_invalid_user_names(user: str) -> None:
    text = leaf_limits(f"- limit: x\n  users: ['{user}']\n  maxapplications: 1\n")
    assert f"invalid limit user name '{user}' in limit definition" in reasons(text)


@pytest.mark.parametrize("group", ["dev", "dev-team_1.x:y", "_g"])
def test_v2_valid_group_names(group: str) -> None:
    load_config(leaf_limits(f"- limit: x\n  groups: ['{group}']\n  maxapplications: 1\n"))


@pytest.mark.parametrize("group", ["group@domain", "9lives", "a/b", ""])
def test_v2_invalid_group_names(group: str) -> None:
    text = leaf_limits(f"- limit: x\n  groups: ['{group}']\n  maxapplications: 1\n")
    assert f"invalid limit group name '{group}' in limit definition" in reasons(text)


# -- V-3 (U12) ----------------------------------------------------------------------------------------
def test_v3_duplicate_user_across_entries_is_rejected() -> None:
    text = leaf_limits("- limit: one\n  users: [bob]\n  maxapplications: 1\n"
                       "- limit: two\n  users: [bob]\n  maxapplications: 2\n")
    assert reasons(text) == ["duplicated user name 'bob', already exists"]


def test_v3_duplicate_user_within_one_entry_and_second_wildcard_are_rejected() -> None:
    assert "duplicated user name 'bob', already exists" in reasons(
        leaf_limits("- limit: one\n  users: [bob, bob]\n  maxapplications: 1\n"))
    assert "duplicated user name '*', already exists" in reasons(
        leaf_limits("- limit: one\n  users: ['*']\n  maxapplications: 1\n"
                    "- limit: two\n  users: ['*']\n  maxapplications: 1\n"))


def test_v3_duplicate_group_is_rejected() -> None:
    text = leaf_limits("- limit: one\n  groups: [dev]\n  maxapplications: 1\n"
                       "- limit: two\n  groups: [dev]\n  maxapplications: 1\n")
    assert reasons(text) == ["duplicated group name 'dev', already exists"]


def test_v3_same_name_in_different_queues_or_as_user_and_group_is_fine() -> None:
    body = """\
    - name: root
      limits:
        - {limit: r, users: [bob], groups: [bob], maxapplications: 4}
      queues:
        - name: a
          limits:
            - {limit: a, users: [bob], maxapplications: 2}
    """
    load(queues(body))


# -- V-4 --------------------------------------------------------------------------------------------
def test_v4_named_user_after_wildcard_user_is_rejected_in_same_and_later_entry() -> None:
    same = leaf_limits("- limit: one\n  users: ['*', bob]\n  maxapplications: 1\n")
    assert reasons(same) == ["should not set no wildcard user bob after wildcard user limit"]
    later = leaf_limits("- limit: one\n  users: ['*']\n  maxapplications: 1\n"
                        "- limit: two\n  users: [bob]\n  maxapplications: 1\n")
    assert reasons(later) == ["should not set no wildcard user bob after wildcard user limit"]


def test_v4_named_group_after_wildcard_group_is_rejected() -> None:
    text = leaf_limits("- limit: one\n  groups: [dev, '*', test]\n  maxapplications: 1\n")
    assert reasons(text) == ["should not set no wildcard group test after wildcard group limit"]


def test_v4_wildcard_last_is_accepted() -> None:
    load_config(leaf_limits("- limit: one\n  users: [bob, '*']\n  groups: [dev, '*']\n"
                            "  maxapplications: 1\n"))


# -- V-5 --------------------------------------------------------------------------------------------
V5 = ("should not specify only one group limit that is using the wildcard. "
      "There must be at least one limit with a group name defined ")


def test_v5_wildcard_group_alone_is_rejected_with_trailing_space_message() -> None:
    text = leaf_limits("- limit: all\n  groups: ['*']\n  maxapplications: 1\n")
    assert reasons(text) == [V5]


def test_v5_wildcard_group_before_named_group_is_rejected() -> None:
    text = leaf_limits("- limit: all\n  groups: ['*']\n  maxapplications: 1\n"
                       "- limit: dev\n  groups: [dev]\n  maxapplications: 1\n")
    assert V5 in reasons(text)


@pytest.mark.parametrize("limits", [
    "- limit: both\n  groups: [g1, '*']\n  maxapplications: 1\n",
    "- limit: g1\n  groups: [g1]\n  maxapplications: 1\n"
    "- limit: rest\n  groups: ['*']\n  maxapplications: 1\n",
    "- limit: users\n  users: ['*']\n  maxapplications: 1\n",  # a wildcard *user* alone is fine
])
def test_v5_accepted_forms(limits: str) -> None:
    load_config(leaf_limits(limits))


# -- V-6 --------------------------------------------------------------------------------------------
def test_v6_limit_quantities_are_parsed_with_config_rules() -> None:
    cfg = load_config(leaf_limits("- limit: q\n  users: [bob]\n"
                                  "  maxresources: {vcore: 500m, memory: 2Gi, nvidia.com/gpu: 2,"
                                  " pods: 1k}\n"))
    lim = cfg.partition("default").queue("root.a").limits[0]  # type: ignore[union-attr]
    assert lim.max_resources == Resource({"vcore": 500, "memory": 2 * 2**30, "nvidia.com/gpu": 2,
                                          "pods": 1000})


@pytest.mark.parametrize("value", ["1.5", "-1", "10X", "5m", "12 GB", "1e3"])
def test_v6_limit_quantity_errors_name_the_resource_and_line(value: str) -> None:
    text = leaf_limits(f"- limit: q\n  users: [bob]\n  maxresources:\n    memory: '{value}'\n")
    found = problems(text)
    assert len(found) == 1
    line, reason = found[0]
    assert "memory" in reason and value in reason and "invalid" in reason
    assert line == text.splitlines().index(f"                  memory: '{value}'") + 1


# -- V-7 --------------------------------------------------------------------------------------------
def test_v7_all_zero_maxresources_is_rejected() -> None:
    text = leaf_limits("- limit: zero\n  users: [bob]\n  maxresources: {memory: 0, vcore: 0}\n"
                       "  maxapplications: 1\n")
    assert reasons(text) == ["MaxResources should be greater than zero in 'zero' limit"]


def test_v7_some_zero_amounts_are_accepted() -> None:
    load_config(leaf_limits("- limit: ok\n  users: [bob]\n"
                            "  maxresources: {memory: 100, cpu: 0, nvidia.com/gpu: 0}\n"))


# -- V-8 (U11) --------------------------------------------------------------------------------------
def test_v8_no_resources_and_no_applications_is_rejected() -> None:
    text = leaf_limits("- limit: empty\n  users: [bob]\n")
    assert reasons(text) == ["invalid resource combination for limit empty all resource limits are null"]
    text0 = leaf_limits("- limit: empty\n  users: [bob]\n  maxapplications: 0\n  maxresources: {}\n")
    assert reasons(text0) == ["invalid resource combination for limit empty all resource limits are null"]


def test_v8_u11_maxapplications_zero_with_maxresources_is_allowed() -> None:
    cfg = load_config(leaf_limits("- limit: r\n  users: [bob]\n  maxapplications: 0\n"
                                  "  maxresources: {vcore: 1}\n"))
    lim = cfg.partition("default").queue("root.a").limits[0]  # type: ignore[union-attr]
    assert lim.max_applications == 0 and lim.max_resources == {"vcore": 1000}


def test_v8_maxapplications_alone_is_allowed() -> None:
    cfg = load_config(leaf_limits("- limit: r\n  users: [bob]\n  maxapplications: 3\n"))
    lim = cfg.partition("default").queue("root.a").limits[0]  # type: ignore[union-attr]
    assert lim.max_applications == 3 and lim.max_resources is None


# -- V-9 --------------------------------------------------------------------------------------------
def test_v9_limit_maxapplications_above_queue_is_rejected() -> None:
    text = leaf_limits("- limit: many\n  users: [bob]\n  maxapplications: 6\n", "maxapplications: 5")
    assert reasons(text) == ["invalid MaxApplications settings for limit many exceed current the queue "
                             "MaxApplications"]


@pytest.mark.parametrize("queue_apps", ["maxapplications: 6", ""])
def test_v9_equal_or_unset_queue_maxapplications_is_accepted(queue_apps: str) -> None:
    load_config(leaf_limits("- limit: many\n  users: [bob]\n  maxapplications: 6\n", queue_apps))


# -- V-10 -------------------------------------------------------------------------------------------
def test_v10_limit_above_queue_max_is_rejected_with_yunikorn_typo() -> None:
    text = leaf_limits("- limit: big\n  users: [bob]\n  maxresources: {vcore: 3}\n",
                       "resources:\n  max: {vcore: 2}")
    assert reasons(text) == ["invalid MaxResources settings for limit big exeecd current the queue "
                             "MaxResources"]


def test_v10_types_absent_from_queue_max_are_unconstrained() -> None:
    load_config(leaf_limits("- limit: mem\n  users: [bob]\n  maxresources: {memory: 100G, vcore: 2}\n",
                            "resources:\n  max: {vcore: 2}"))


def test_v10_only_the_own_queue_max_is_compared_not_the_ancestors() -> None:
    body = """\
    - name: root
      queues:
        - name: p
          resources: {max: {vcore: 2}}
          queues:
            - name: c
              limits:
                - {limit: big, users: [bob], maxresources: {vcore: 50}}
    """
    load(queues(body))


def test_v10_root_is_exempt() -> None:
    load(root_with("limits:\n  - {limit: big, users: [bob], maxresources: {vcore: 5000}}\n"))


# -- V-11 -------------------------------------------------------------------------------------------
PART_LIMITS = """\
limits:
  - limit: partition wide
    users: ['*']
    maxapplications: 10
"""


def test_v11_partition_limits_are_copied_onto_root() -> None:
    cfg = load(queues("- name: root\n  queues:\n    - name: a\n", PART_LIMITS))
    p = cfg.partition("default")
    assert [lim.limit for lim in p.root.limits] == ["partition wide"]
    assert p.limits == p.root.limits


def test_v11_equal_partition_and_root_limits_are_accepted() -> None:
    cfg = load(root_with("limits:\n  - limit: partition wide\n    users: ['*']\n    maxapplications: 10\n",
                         PART_LIMITS))
    assert cfg.partition("default").root.limits[0].max_applications == 10


def test_v11_different_partition_and_root_limits_are_rejected() -> None:
    text = root_with("limits:\n  - limit: root only\n    users: ['*']\n    maxapplications: 3\n", PART_LIMITS)
    found = problems(text)
    assert [r for _, r in found] == ["partition limits and root queue limits are not equivalent"]
    assert found[0][0] == 3  # the partition's `limits:` key


def test_v11_root_limits_alone_become_the_partition_limits() -> None:
    cfg = load(root_with("limits:\n  - {limit: r, users: [bob], maxapplications: 3}\n"))
    assert cfg.partition("default").limits == cfg.partition("default").root.limits


# -- V-12 -------------------------------------------------------------------------------------------
def chain(root_limits: str, mid_limits: str = "", leaf_limits_: str = "") -> str:
    def block(limits: str, pad: str) -> str:
        if not limits:
            return ""
        return f"{pad}limits:\n" + "".join(f"{pad}  - {ln}\n" for ln in limits.strip().splitlines())
    return queues("- name: root\n" + block(root_limits, "  ") + "  queues:\n    - name: mid\n"
                  + block(mid_limits, "      ") + "      queues:\n        - name: leaf\n"
                  + block(leaf_limits_, "          "))


def test_v12_child_user_limit_above_ancestor_is_rejected() -> None:
    text = chain("{limit: r, users: [bob], maxresources: {vcore: 10}}", "",
                 "{limit: l, users: [bob], maxresources: {vcore: 20}}")
    assert reasons(text) == ["user bob max resource map[vcore:20000] of queue root.mid.leaf is greater than "
                             "immediate or ancestor parent maximum resource map[vcore:10000]"]


def test_v12_child_user_limit_within_ancestor_is_accepted() -> None:
    load(chain("{limit: r, users: [bob], maxresources: {vcore: 10}}", "",
               "{limit: l, users: [bob], maxresources: {vcore: 10, memory: 1G}}"))


def test_v12_named_user_above_ancestor_wildcard_is_rejected() -> None:
    text = chain("{limit: r, users: ['*'], maxresources: {vcore: 10}}",
                 "{limit: m, users: [bob], maxresources: {vcore: 11}}")
    assert reasons(text) == ["user bob max resource map[vcore:11000] of queue root.mid is greater than "
                             "wildcard maximum resource map[vcore:10000] of immediate or ancestor parent "
                             "queue"]


def test_v12_wildcard_below_wildcard_is_checked_as_the_same_name() -> None:
    text = chain("{limit: r, users: ['*'], maxresources: {vcore: 10}}",
                 "{limit: m, users: ['*'], maxresources: {vcore: 11}}")
    assert reasons(text) == ["user * max resource map[vcore:11000] of queue root.mid is greater than "
                             "immediate or ancestor parent maximum resource map[vcore:10000]"]


def test_v12_carried_limit_is_the_component_wise_min_of_the_path() -> None:
    # root caps vcore, mid caps memory: leaf is checked against both (R-5 union of names).
    text = chain("{limit: r, users: [bob], maxresources: {vcore: 10}}",
                 "{limit: m, users: [bob], maxresources: {memory: 1G}}",
                 "{limit: l, users: [bob], maxresources: {vcore: 11}}")
    assert reasons(text) == ["user bob max resource map[vcore:11000] of queue root.mid.leaf is greater than "
                             "immediate or ancestor parent maximum resource "
                             "map[memory:1000000000 vcore:10000]"]


def test_v12_group_variant_uses_the_word_group() -> None:
    text = chain("{limit: r, groups: [dev], maxresources: {vcore: 10}}", "",
                 "{limit: l, groups: [dev], maxresources: {vcore: 20}}")
    assert reasons(text)[0].startswith("group dev max resource map[vcore:20000] of queue root.mid.leaf")


def test_v12_siblings_are_never_compared() -> None:
    body = """\
    - name: root
      queues:
        - name: a
          limits: [{limit: a, users: [bob], maxresources: {vcore: 1}}]
        - name: b
          limits: [{limit: b, users: [bob], maxresources: {vcore: 100}}]
    """
    load(queues(body))


# -- V-13 -------------------------------------------------------------------------------------------
def test_v13_child_maxapplications_above_ancestor_is_rejected() -> None:
    text = chain("{limit: r, users: [bob], maxapplications: 5}", "",
                 "{limit: l, users: [bob], maxapplications: 6}")
    assert reasons(text) == ["user bob max applications 6 of queue root.mid.leaf is greater than immediate "
                             "or ancestor parent max applications 5"]


def test_v13_child_without_maxapplications_under_ancestor_count_is_rejected() -> None:
    text = chain("{limit: r, groups: [dev], maxapplications: 5}",
                 "{limit: m, groups: [dev], maxresources: {vcore: 1}}")
    assert reasons(text) == ["group dev max applications 0 of queue root.mid is greater than immediate or "
                             "ancestor parent max applications 5"]


def test_v13_named_user_against_ancestor_wildcard() -> None:
    text = chain("{limit: r, users: ['*'], maxapplications: 2}",
                 "{limit: m, users: [bob], maxapplications: 3}")
    assert reasons(text) == ["user bob max applications 3 of queue root.mid is greater than wildcard max "
                             "applications 2 of immediate or ancestor parent queue"]


def test_v13_equal_or_lower_is_accepted_and_own_value_is_carried() -> None:
    load(chain("{limit: r, users: [bob], maxapplications: 5}",
               "{limit: m, users: [bob], maxapplications: 5}",
               "{limit: l, users: [bob], maxapplications: 1}"))
    # mid lowers bob to 2; the leaf's 3 is compared with 2 (the carried value), not root's 5.
    text = chain("{limit: r, users: [bob], maxapplications: 5}",
                 "{limit: m, users: [bob], maxapplications: 2}",
                 "{limit: l, users: [bob], maxapplications: 3}")
    assert "max applications 3 of queue root.mid.leaf" in reasons(text)[0]
    assert reasons(text)[0].endswith("parent max applications 2")


def test_v13_ancestor_without_count_constrains_nothing() -> None:
    load(chain("{limit: r, users: [bob], maxresources: {vcore: 10}}", "",
               "{limit: l, users: [bob], maxapplications: 100, maxresources: {vcore: 1}}"))


# -- the seed 000 example ---------------------------------------------------------------------------
SEED_000_LIMITS = """\
- name: root
  queues:
    - name: sandbox
      limits:
      - limit: "specific user"
        users:
        - "sue"
        maxresources: {memory: 25G, vcore: 5}
      - limit: "specific groups"
        groups:
        - "development"
        - "test"
        maxresources: {memory: 100G, vcore: 10}
      - limit: "user catch all"
        users:
        - "*"
        maxresources: {memory: 10G, vcore: 1}
      - limit: "group catch all"
        groups:
        - "*"
        maxresources: {memory: 50G, vcore: 10}
"""


def test_seed_000_example_limits_load_as_written() -> None:
    cfg = load(queues(SEED_000_LIMITS))
    limits = cfg.partition("default").queue("root.sandbox").limits  # type: ignore[union-attr]
    assert [lim.limit for lim in limits] == ["specific user", "specific groups", "user catch all",
                                             "group catch all"]
    assert limits[0].users == ("sue",)
    assert limits[0].max_resources == {"memory": 25 * 10**9, "vcore": 5000}
    assert limits[1].groups == ("development", "test")
    assert limits[3].groups == ("*",)
    assert all(lim.max_applications == 0 for lim in limits)


def test_seed_000_first_example_entry_as_printed_is_rejected() -> None:
    # The seed's first snippet lost its indentation: cpu and memory sit next to maxresources.
    text = leaf_limits('- limit: "example entry"\n  maxapplications: 2\n  maxresources:\n  cpu: 10\n'
                       "  memory: 250G\n  users:\n    - sue\n    - bob\n")
    found = reasons(text)
    assert any("unknown key 'cpu'" in r for r in found)
    assert any("unknown key 'memory'" in r for r in found)
