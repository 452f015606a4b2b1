"""YAML features through the loader: anchors, merge keys, duplicate keys, tags, cycles, the C parser."""

from __future__ import annotations

import pytest

from quotaplane.config import ConfigError, load_config
from quotaplane.config.yaml_tree import parse_yaml
from tests.config.helpers import load, problems, queues, reasons

ANCHORS = """\
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: a
            resources:
              max: &std {vcore: 8, memory: 32Gi}
          - name: b
            resources:
              max: *std
          - name: c
            resources:
              max:
                <<: *std
                vcore: 4
"""


def test_anchors_aliases_and_merge_keys_with_explicit_keys_winning() -> None:
    p = load_config(ANCHORS).partition("default")
    assert p.queue("root.a").max == p.queue("root.b").max == {"vcore": 8000, "memory": 32 * 2**30}  # type: ignore[union-attr]
    assert p.queue("root.c").max == {"vcore": 4000, "memory": 32 * 2**30}  # type: ignore[union-attr]


def test_merge_key_before_and_after_explicit_keys() -> None:
    tree = parse_yaml("base: &b {x: 1, y: 2}\nm1: {x: 9, <<: *b}\nm2: {<<: [*b, {z: 3}], y: 7}\n")
    assert tree == {"base": {"x": 1, "y": 2}, "m1": {"x": 9, "y": 2}, "m2": {"x": 1, "y": 7, "z": 3}}


def test_merge_key_of_a_scalar_is_an_error() -> None:
    with pytest.raises(ConfigError, match="merge key"):
        parse_yaml("m: {<<: 5}\n")


def test_duplicate_keys_name_both_lines() -> None:
    found = problems(queues("- name: root\n  submitacl: a\n  submitacl: b\n"))
    assert found == [(6, "invalid YAML: duplicate key 'submitacl' (first at line 5)")]


@pytest.mark.parametrize(("value", "fragment"), [
    ("!foo bar", "!foo"), ("!!binary aGVsbG8=", "bytes"), ("!!set {a, b}", "set"), ("!custom [1]", "!custom"),
])
def test_unsupported_tags_are_config_errors(value: str, fragment: str) -> None:
    found = reasons(queues(f"- name: root\n  properties:\n    p: {value}\n"))
    assert found and fragment in found[0] and found[0].startswith("invalid YAML")


def test_explicit_str_tag_makes_a_string() -> None:
    cfg = load(queues("- name: root\n  queues:\n    - name: !!str 2024\n"))
    assert cfg.partition("default").queue("root.2024") is not None


def test_yaml_1_2_booleans_and_nulls() -> None:
    tree = parse_yaml("a: yes\nb: on\nc: True\nd: ~\ne: null\nf: 0o17\ng: 1_000\n")
    assert tree == {"a": "yes", "b": "on", "c": True, "d": None, "e": None, "f": 15, "g": 1000}


def test_cyclic_alias_in_extension_data_is_an_error_not_a_hang() -> None:
    text = "partitions:\n  - name: default\n    queues: [{name: root}]\n    quotatrees: &t [1, *t]\n"
    assert problems(text) == [(4, "'quotatrees' contains a cycle (an alias inside its own anchor)")]


def test_multiple_documents_are_an_error() -> None:
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config("partitions: []\n---\npartitions: []\n")


def test_the_c_parser_is_used() -> None:
    # ruamel.yaml.clib is a dependency on CPython (pyproject.toml): loading composes with its C parser.
    from _ruamel_yaml import CParser  # type: ignore[import-not-found]
    from ruamel.yaml import YAML

    assert YAML(typ="safe").Parser is CParser
