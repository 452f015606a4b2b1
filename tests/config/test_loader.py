"""The loader: strict YAML structure, types, line numbers, partitions, extensions, robustness."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import quotaplane as qp
from quotaplane.config import ConfigError, PartitionConfig, SchedulerConfig, load_config
from quotaplane.config import loader as loader_module
from quotaplane.config.loader import DEFAULT_CONFIG_YAML, default_config, parse_config
from quotaplane.errors import NotFoundError
from tests.config.helpers import load, problems, queues, reasons, root_with

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# -- entry points -----------------------------------------------------------------------------------
def test_qp_load_config_is_the_loader() -> None:
    cfg = qp.load_config(root_with("submitacl: '*'\n"))
    assert isinstance(cfg, SchedulerConfig)
    assert isinstance(cfg.partition("default"), PartitionConfig)


@pytest.mark.parametrize("text", ["", "   \n", "# only a comment\n", "~\n"])
def test_empty_text_is_an_error(text: str) -> None:
    with pytest.raises(ConfigError, match="configuration is empty"):
        load_config(text)


@pytest.mark.parametrize("text", ["partitions: []\n", "partitions:\n", "checksum: abc\n"])
def test_no_partitions_is_an_error(text: str) -> None:
    with pytest.raises(ConfigError, match="no partitions defined"):
        load_config(text)


@pytest.mark.parametrize("text", ["just a string", "- a\n- b\n", "42"])
def test_top_level_must_be_a_mapping(text: str) -> None:
    assert reasons(text)[0].startswith("the configuration must be a mapping")


def test_checksum_key_is_accepted_and_replaced_by_the_text_hash() -> None:
    text = "checksum: whatever\n" + root_with("submitacl: '*'\n")
    cfg = load_config(text)
    assert cfg.checksum == hashlib.sha256(text.encode()).hexdigest().upper()
    assert cfg.source == text


def test_bytes_are_accepted_and_bad_utf8_is_a_config_error() -> None:
    text = root_with("submitacl: '*'\n")
    assert load_config(text.encode()).partition("default").root.submit_acl == "*"
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(b"\xff\xfe partitions")


# -- strictness -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "key", "line"), [
    ("partition: []\n", "partition", 1),
    ("partitions:\n  - name: default\n    queue: []\n    queues: [{name: root}]\n", "queue", 3),
    (root_with("maxApplications: 3\n"), "maxApplications", 5),
    (root_with("resources:\n  maximum: {vcore: 1}\n"), "maximum", 6),
    (root_with("childtemplate:\n  resources: {max: {}}\n  maxapps: 1\n"), "maxapps", 7),
    (root_with("limits:\n  - limit: x\n    users: [a]\n    maxapplications: 1\n    maxresource: {}\n"),
     "maxresource", 9),
    ("partitions:\n  - name: default\n    placementrules:\n      - name: user\n        created: true\n"
     "    queues: [{name: root}]\n", "created", 5),
    ("partitions:\n  - name: default\n    placementrules:\n      - name: user\n"
     "        filter: {kind: allow}\n    queues: [{name: root}]\n", "kind", 5),
    ("partitions:\n  - name: default\n    preemption: {enable: true}\n    queues: [{name: root}]\n",
     "enable", 3),
    ("partitions:\n  - name: default\n    nodesortpolicy: {typ: fair}\n    queues: [{name: root}]\n",
     "typ", 3),
    ("partitions:\n  - name: default\n    statedumpfilepath: /tmp/x\n    queues: [{name: root}]\n",
     "statedumpfilepath", 3),
])
def test_unknown_keys_are_errors_naming_key_and_line(text: str, key: str, line: int) -> None:
    found = problems(text)
    assert found[0][0] == line
    assert f"unknown key '{key}'" in found[0][1]


def test_unknown_key_hint_for_wrong_case() -> None:
    assert "did you mean 'maxapplications'?" in reasons(root_with("maxApplications: 3\n"))[0]


def test_non_string_keys_are_errors() -> None:
    assert "keys must be strings" in reasons(root_with("1: x\n"))[0]


@pytest.mark.parametrize("value", ["'true'", "yes", "1", "on", "[true]"])
def test_booleans_must_really_be_booleans(value: str) -> None:
    found = reasons(queues(f"- name: root\n  queues:\n    - name: a\n      parent: {value}\n"))
    assert len(found) == 1 and "'parent' of queue 'root.a' must be a boolean" in found[0]


@pytest.mark.parametrize("value", ["true", "True", "TRUE", "false"])
def test_yaml_boolean_spellings(value: str) -> None:
    cfg = load(queues(f"- name: root\n  queues:\n    - name: a\n      parent: {value}\n"))
    assert cfg.partition("default").root.queues[0].parent is (value.lower() == "true")


@pytest.mark.parametrize("value", ["'10'", "-1", "1.5", "true", "9223372036854775808", "[1]"])
def test_maxapplications_must_be_a_non_negative_integer(value: str) -> None:
    found = reasons(root_with(f"maxapplications: {value}\n"))
    assert found == [f"'maxapplications' of queue 'root' must be a non-negative integer, got "
                     f"{found[0].split('got ', 1)[1]}"]


def test_maxapplications_integer_forms() -> None:
    assert load(root_with("maxapplications: 0x10\n")).partition("default").root.max_applications == 16
    assert load(root_with("maxapplications: 1_000\n")).partition("default").root.max_applications == 1000


@pytest.mark.parametrize(("snippet", "fragment"), [
    ("queues: {name: a}\n", "'queues' of queue 'root' must be a list"),
    ("limits: {limit: x}\n", "'limits' of queue 'root' must be a list"),
    ("limits:\n  - {limit: x, users: bob, maxapplications: 1}\n",
     "'users' of limit 1 of queue 'root' must be a list"),
    ("limits:\n  - {limit: x, users: [1], maxapplications: 1}\n", "entry 1 of 'users'"),
    ("resources: [1]\n", "resources of queue 'root' must be a mapping"),
    ("properties: [a]\n", "'properties' of queue 'root' must be a mapping"),
    ("submitacl: 5\n", "'submitacl' of queue 'root' must be a string"),
    ("queues:\n  - name: 12\n", "'name' of a queue under 'root' must be a string"),
    ("queues:\n  - just-a-string\n", "a queue under 'root' must be a mapping"),
])
def test_wrong_types_are_reported(snippet: str, fragment: str) -> None:
    found = reasons(root_with(snippet))
    assert any(fragment in r for r in found), found


def test_a_wrongly_typed_users_list_does_not_also_report_v1() -> None:
    found = reasons(root_with("limits:\n  - {limit: x, users: bob, maxapplications: 1}\n"))
    assert len(found) == 1


def test_invalid_yaml_reports_the_line() -> None:
    err_text = "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: [oops\n"
    with pytest.raises(ConfigError) as info:
        load_config(err_text)
    assert "invalid YAML" in str(info.value)
    assert info.value.line is not None and info.value.line >= 5


def test_duplicate_yaml_keys_are_errors_with_line() -> None:
    found = problems(root_with("submitacl: a\nsubmitacl: b\n"))
    assert found[0][0] == 6 and "duplicate key" in found[0][1]


# -- error reporting ---------------------------------------------------------------------------------
def test_error_str_line_and_problems_in_line_order() -> None:
    text = queues("- name: root\n  queues:\n    - name: 'a.b'\n    - name: c\n"
                  "      submitacl: 'x y z'\n      maxapplications: -3\n")
    with pytest.raises(ConfigError) as info:
        load_config(text)
    err = info.value
    lines = [line for line, _ in err.problems]
    assert lines == sorted(lines) and len(err.problems) == 3
    assert err.line == 6
    assert str(err) == f"line 6: {err.problems[0][1]}"
    assert "invalid queue name" in str(err)


def test_u13_failing_config_returns_nothing_and_later_loads_are_unaffected() -> None:
    good = root_with("submitacl: '*'\nqueues:\n  - name: a\n")
    first = load_config(good)
    with pytest.raises(ConfigError):
        load_config(good.replace("name: a", "name: 'a b'"))
    second = load_config(good)
    assert first == second and first is not second
    assert first.partition("default").queue("root.a") is not None


def test_parse_config_returns_every_problem_without_raising() -> None:
    cfg, found = parse_config(root_with("submitacl: 'a b c'\n"))
    assert [r for _, r in found] == ["multiple spaces found in ACL: 'a b c'"]
    assert cfg.partition("default").root.submit_acl == "a b c"


# -- partitions -------------------------------------------------------------------------------------
def test_unnamed_partition_is_default_and_names_are_lower_case() -> None:
    cfg = load_config("partitions:\n  - queues: [{name: root}]\n  - name: GPU\n    queues: [{name: root}]\n")
    assert cfg.partition_names() == ["default", "gpu"]
    assert cfg.partition("Gpu").name == "gpu"
    with pytest.raises(NotFoundError):
        cfg.partition("other")


def test_duplicate_partitions_are_rejected() -> None:
    text = "partitions:\n  - name: a\n    queues: [{name: root}]\n  - name: A\n    queues: [{name: root}]\n"
    assert reasons(text) == ["duplicate partition name found with name a"]
    text2 = "partitions:\n  - queues: [{name: root}]\n  - name: default\n    queues: [{name: root}]\n"
    assert reasons(text2) == ["multiple default partitions defined"]


@pytest.fixture
def plain_plugins() -> Iterator[None]:
    """Two plug-in keys that declare no check (their values pass through as plain data)."""
    from quotaplane.policies import registry

    for key in ("plainone", "plaintwo"):
        registry.register(key, lambda pc, ctx: None, order=90)  # type: ignore[arg-type, return-value]
    yield
    for key in ("plainone", "plaintwo"):
        registry.unregister(key)


def test_extensions_are_passed_through_as_plain_data(plain_plugins: None) -> None:
    text = """\
partitions:
  - name: default
    queues: [{name: root}]
    plainone:
      - name: team-a
        min: {cpu: 4, memory: 8Gi}
        max: &m {cpu: 8}
        other: *m
    plaintwo: {tree: {hard: "true", n: 1.5, when: 2024-01-02}}
"""
    ext = load_config(text).partition("default").extensions
    assert ext["plainone"] == [{"name": "team-a", "min": {"cpu": 4, "memory": "8Gi"}, "max": {"cpu": 8},
                                "other": {"cpu": 8}}]
    assert type(ext["plainone"]) is list and type(ext["plainone"][0]) is dict
    assert ext["plaintwo"] == {"tree": {"hard": "true", "n": 1.5, "when": "2024-01-02"}}
    assert type(ext["plaintwo"]["tree"]["n"]) is float
    assert set(ext) == {"plainone", "plaintwo"}


def test_an_extension_value_is_checked_by_its_plugin_with_its_line() -> None:
    """The loader runs the declared check of each plug-in key (issue 29 item 5): a bad ElasticQuota is
    a ConfigError at its key's line, as any other problem."""
    text = """\
partitions:
  - name: default
    queues: [{name: root}]
    elasticquotas:
      - name: team-a
"""
    with pytest.raises(ConfigError) as err:
        load_config(text)
    assert err.value.line == 4 and "elasticquotas of partition 'default'" in str(err.value)


def test_an_undeclared_partition_key_is_refused() -> None:
    with pytest.raises(ConfigError, match="podcaps"):
        load_config("partitions:\n  - name: default\n    queues: [{name: root}]\n    podcaps: {}\n")


def test_no_extensions_means_an_empty_mapping() -> None:
    assert dict(load(root_with("submitacl: '*'\n")).partition("default").extensions) == {}


# -- the model is frozen ----------------------------------------------------------------------------
def test_model_objects_are_immutable() -> None:
    cfg = load(root_with("properties: {a: b}\nqueues:\n  - name: x\n"))
    root = cfg.partition("default").root
    with pytest.raises(AttributeError):
        root.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        root.properties["a"] = "c"  # type: ignore[index]
    assert isinstance(root.queues, tuple)


def test_lines_of_model_objects() -> None:
    text = queues("- name: root\n  queues:\n    - name: a\n      limits:\n        - limit: l\n"
                  "          users: [u]\n          maxapplications: 1\n", "placementrules:\n  - name: user\n")
    p = load_config(text).partition("default")
    assert p.line == 2
    assert p.placement_rules[0].line == 4
    a = p.queue("root.a")
    assert a is not None and a.line == 8 and a.limits[0].line == 10


# -- default config (P-8) ---------------------------------------------------------------------------
def test_p8_default_config() -> None:
    cfg = default_config()
    p = cfg.partition("default")
    assert p.root.submit_acl == "*" and p.root.queues == ()
    (rule,) = p.placement_rules
    assert (rule.name, rule.value, rule.create) == ("tag", "namespace", True)
    assert load_config(DEFAULT_CONFIG_YAML) == cfg


# -- examples ---------------------------------------------------------------------------------------
def test_examples_queues_yaml_is_valid_and_has_what_make_run_needs() -> None:
    cfg = load_config((EXAMPLES / "queues.yaml").read_text())
    p = cfg.partition("default")
    default = p.queue("root.default")
    assert default is not None and default.submit_acl == "*" and default.is_leaf
    assert any(r.name == "tag" and r.create for r in p.placement_rules)
    sandbox = p.queue("root.engineering.sandbox")
    assert sandbox is not None
    assert [lim.limit for lim in sandbox.limits] == ["specific user", "specific groups", "user catch all",
                                                     "group catch all"]


def test_examples_invalid_limits_yaml_reports_several_problems() -> None:
    with pytest.raises(ConfigError) as info:
        load_config((EXAMPLES / "invalid-limits.yaml").read_text())
    found = " | ".join(r for _, r in info.value.problems)
    for fragment in ["only one group limit that is using the wildcard", "duplicated user name 'erin'",
                     "should not set no wildcard user dave", "all resource limits are null",
                     "exceed current the queue MaxApplications", "exeecd current the queue MaxResources",
                     "greater than wildcard maximum resource", "invalid quantity '12 GB'",
                     "unknown key 'user'"]:
        assert fragment in found
    assert len(info.value.problems) >= 9


# -- robustness -------------------------------------------------------------------------------------
def _bomb(levels: int) -> str:
    lines = ["partitions:", "  - name: default", "    queues:", "      - name: root", "        queues:",
             "          - name: c0", "            queues: &L0 [{name: a}, {name: b}]"]
    for k in range(1, levels):
        lines.append(f"          - name: c{k}")
        prev = f"*L{k - 1}"
        lines.append(f"            queues: &L{k} [{{name: a, queues: {prev}}}, {{name: b, queues: {prev}}}]")
    return "\n".join(lines) + "\n"


def test_alias_expansion_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader_module, "_MAX_QUEUES", 500)
    with pytest.raises(ConfigError, match="too many queues"):
        load_config(_bomb(30))
    # Aliases themselves are fine while the tree stays small.
    assert load_config(_bomb(3)).partition("default").queue("root.c2.a.b.a") is not None


def test_queue_depth_is_bounded() -> None:
    tree = "{name: leaf}"
    for i in range(70):
        tree = f"{{name: q{i}, queues: [{tree}]}}"
    found = reasons(queues(f"- name: root\n  queues: [{tree}]\n"))
    assert any("queue hierarchy too deep" in r for r in found)


def test_nesting_guard_rejects_pathological_indentation_quickly() -> None:
    text = "partitions:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 400))
    found = problems(text)
    assert "nested too deeply" in found[0][1]


def test_deeply_nested_yaml_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        load_config("partitions: " + "[" * 5000 + "]" * 5000)


FUZZ_ALPHABET = st.sampled_from([*"abcdefgmMGiK0123456789 :-_.*&!|>'\"[]{},#\n\t%@`?~=<\\",
    "partitions:", "\n  - name: default\n", "    queues:\n", "      - name: root\n", "limits:", "users:",
    "groups:", "maxresources:", "maxapplications:", "resources:", "max:", "guaranteed:", "vcore:",
    "memory:", "placementrules:", "parent:", "true", "null", "&a", "*a", "<<:", "!!binary", "!!set",
    "!!omap", "!!float", "!!timestamp", "\x00", "\ufeff", "\u2028", "1e999", "0o17", "-1", "2001-02-30",
])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(FUZZ_ALPHABET, max_size=60).map("".join))
def test_fuzz_arbitrary_text_raises_only_config_error(text: str) -> None:
    try:
        cfg = load_config(text)
    except ConfigError as err:
        assert str(err)
        assert err.problems and all(isinstance(r, str) and r for _, r in err.problems)
        assert err.line is None or err.line >= 1
    else:
        assert cfg.partitions


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_unicode_text_raises_only_config_error(text: str) -> None:
    with contextlib.suppress(ConfigError):
        load_config(text)


@settings(max_examples=100, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
                    | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.sampled_from(["name", "queues", "limits", "users", "groups",
                                                       "maxresources", "maxapplications", "resources",
                                                       "max", "guaranteed", "parent", "submitacl",
                                                       "placementrules", "filter", "value", "create",
                                                       "childtemplate", "properties", "vcore", "x"]),
                                      inner, max_size=5), max_leaves=30))
def test_fuzz_structured_documents_raise_only_config_error(doc: object) -> None:
    import json

    text = json.dumps({"partitions": [{"name": "default", "queues": [doc]}]})  # JSON is YAML
    try:
        load_config(text)
    except ConfigError as err:
        assert err.problems


def test_problems_in_several_partitions_keep_their_own_lines() -> None:
    text = """\
partitions:
  - name: a
    limits:
      - {limit: p, users: [bob], maxapplications: 2}
    queues:
      - name: root
        maxapplications: -1
        queues:
          - {name: x, maxapplications: 3}
  - name: b
    queues:
      - name: root
        queues:
          - {name: 'y z'}
          - name: w
            limits:
              - {limit: q, users: ['*', bob], maxapplications: 1}
"""
    found = problems(text)
    assert [line for line, _ in found] == [7, 14, 17]
    assert "'maxapplications' of queue 'root' must be a non-negative integer" in found[0][1]
    assert "invalid queue name" in found[1][1]
    assert "should not set no wildcard user bob" in found[2][1]


def test_the_partition_user_group_resolver_key_is_accepted() -> None:
    """YuniKorn's partition ``usergroupresolver: {type: …}`` (documented since 2025) loads; its shape is
    checked like every other key (issue 14 #10: it was refused as unknown)."""
    import quotaplane as qp

    text = ("partitions:\n  - name: default\n    usergroupresolver:\n      type: {t}\n"
            "    queues:\n      - name: root\n        submitacl: '*'\n")
    assert qp.load_config(text.format(t="LDAP")).partition("default").user_group_resolver == "ldap"
    assert qp.load_config(text.format(t="os")).partition("default").user_group_resolver == "os"
    assert qp.load_config(text.replace("    usergroupresolver:\n      type: {t}\n", "")
                          ).partition("default").user_group_resolver == ""
    with pytest.raises(qp.ConfigError, match="line 4: unknown key 'kind' in usergroupresolver"):
        qp.load_config(text.replace("type: {t}", "kind: os"))
    with pytest.raises(qp.ConfigError, match="'type' of usergroupresolver of partition 'default' must be"):
        qp.load_config(text.format(t="[1]"))
