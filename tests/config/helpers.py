"""Small helpers shared by the config tests."""

from __future__ import annotations

import textwrap

import pytest

from quotaplane.config import SchedulerConfig, load_config
from quotaplane.errors import ConfigError


def load(text: str) -> SchedulerConfig:
    """Load dedented YAML."""
    return load_config(textwrap.dedent(text))


def problems(text: str) -> list[tuple[int | None, str]]:
    """Every (line, reason) of dedented YAML that must be invalid."""
    with pytest.raises(ConfigError) as info:
        load_config(textwrap.dedent(text))
    return info.value.problems


def reasons(text: str) -> list[str]:
    """Only the reasons of :func:`problems`."""
    return [r for _, r in problems(text)]


def queues(body: str, partition_extra: str = "") -> str:
    """A one-partition config whose ``queues:`` list is ``body`` (YAML written at column 0)."""
    extra = textwrap.indent(textwrap.dedent(partition_extra), "    ") if partition_extra else ""
    return ("partitions:\n  - name: default\n" + extra + "    queues:\n"
            + textwrap.indent(textwrap.dedent(body), "      "))


def root_with(body: str, partition_extra: str = "") -> str:
    """A config whose root queue has the YAML ``body`` (keys of root at column 0)."""
    return queues("- name: root\n" + textwrap.indent(textwrap.dedent(body), "  "), partition_extra)
