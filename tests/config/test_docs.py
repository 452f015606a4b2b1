"""docs/config.md stays true: its YAML examples load and its CLI output is what the CLI prints."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from quotaplane.config import load_config
from quotaplane.config.files import validate_files
from tests.config.helpers import queues

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "config.md").read_text()
# a fragment's first line names the file it is part of (tests/test_docs_yaml.py): the rest is the YAML
YAML_BLOCKS = [re.sub(r"\A# fragment of .*\n", "", b)
               for b in re.findall(r"```yaml\n(.*?)```", DOC, flags=re.S)]


def test_the_doc_has_yaml_examples() -> None:
    assert len(YAML_BLOCKS) >= 5


@pytest.mark.parametrize("block", [b for b in YAML_BLOCKS if b.startswith("limits:")])
def test_limit_examples_load_on_a_queue(block: str) -> None:
    body = "- name: root\n  queues:\n    - name: q\n" + textwrap.indent(block, "      ")
    cfg = load_config(queues(body))
    assert cfg.partition("default").queue("root.q").limits  # type: ignore[union-attr]


@pytest.mark.parametrize("block", [b for b in YAML_BLOCKS if b.startswith("partitions:")
                                   and "elasticquotas: ..." not in b])
def test_full_examples_load(block: str) -> None:
    assert load_config(block).partitions


def test_queue_example_loads_under_root() -> None:
    block = next(b for b in YAML_BLOCKS if b.startswith("- name: engineering"))
    block = block.replace("[...]", "[]")  # the doc elides lists
    flavors = "resourceflavors: [{name: a100, resources: [nvidia.com/gpu]}, {name: h100, resources: " \
        "[nvidia.com/gpu]}]\n"                 # the example's queue lists them
    cfg = load_config(queues("- name: root\n  queues:\n" + textwrap.indent(block, "    "), flavors))
    q = cfg.partition("default").queue("root.engineering")
    assert q is not None and q.max_applications == 200 and q.submit_acl == " engineering"
    assert q.flavors == ("a100", "h100") and q.lending_limit == {"nvidia.com/gpu": 2}


def test_cli_output_block_matches_the_cli() -> None:
    block = re.search(r"For `examples/invalid-limits.yaml`:\n\n```text\n(.*?)```", DOC, flags=re.S)
    assert block is not None
    ok, lines = validate_files([Path("examples/invalid-limits.yaml")])
    assert not ok
    documented = [line.rstrip() for line in block.group(1).splitlines()]
    assert documented == [line.rstrip() for line in lines]
