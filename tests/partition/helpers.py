"""Shared helpers for the partition and scheduler tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quotaplane.cluster import Scheduler

CONFIG = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: default
    - name: a
      maxapplications: 2
      resources:
        max: {vcore: 10, memory: 100}
      limits:
      - limit: alice
        users: [alice]
        maxresources: {vcore: 4}
        maxapplications: 2
      - limit: dev
        groups: [dev]
        maxresources: {vcore: 6}
    - name: b
      submitacl: bob
      resources:
        max: {vcore: 20}
    - name: p
      parent: true
      childtemplate:
        resources:
          max: {vcore: 3}
"""


class Clock:
    """An injectable clock (seconds) that tests move by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def scheduler(text: str = CONFIG, *, clock: Callable[[], float] | None = None, store: Any = None,
              **kw: Any) -> Scheduler:
    return Scheduler.from_yaml(text, store=store, clock=clock or Clock(), **kw)
