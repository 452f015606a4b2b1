"""A quota policy plug-in: a cap on the number of pods (allocations) per queue, configured from YAML.

It shows the whole plug-in protocol of ``quotaplane.policies.registry`` on a policy small enough to
read at once. Loaded into a service with ``QUOTAPLANE_PLUGINS=examples/podcaps.py quotaplane serve
--config examples/podcaps.yaml`` (module names work too), it

- declares the partition-config key ``podcaps`` — ``{queue path: most pods}`` — and its check, which the
  configuration loader runs (``quotaplane validate`` and every reload name a bad value with its line);
- joins the admission path after the built-in policies (order 50): a request that would put a capped
  queue (the request's own or an ancestor) over its cap is refused with the violation ``podcap.max``,
  ``what_if`` and waiting asks explain it, and replay and snapshots rebuild its counts from the
  allocations;
- shows its state over REST (``GET /ws/v1/partition/{p}/policies``) and as metrics
  (``quotaplane_policy_podcap_pods`` and ``quotaplane_policy_podcap_max``).

::

    partitions:
      - name: default
        podcaps:
          root.batch: 2          # at most 2 pods in root.batch and below
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from quotaplane.config.model import PartitionConfig
from quotaplane.policies import AdmissionRequest, MetricSample, QuotaPolicy, Violation
from quotaplane.policies.registry import Plugin, PolicyContext, register_plugin

KEY = "podcaps"


def check(value: Any) -> list[str]:
    """The problems of a ``podcaps`` value: a mapping of full queue path to a non-negative integer."""
    if not isinstance(value, Mapping):
        return [f"must map queue paths to the most pods each may hold, got {value!r}"]
    problems: list[str] = []
    for path, cap in value.items():
        if not isinstance(path, str) or not (path.lower() == "root" or path.lower().startswith("root.")):
            problems.append(f"{path!r} is not a full queue path (root or root.…)")
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
            problems.append(f"the cap of {path!r} must be a non-negative integer, got {cap!r}")
    return problems


def _caps(config: PartitionConfig) -> dict[str, int]:
    return {str(path).lower(): int(cap) for path, cap in config.extensions.get(KEY, {}).items()}


class PodCapPolicy(QuotaPolicy):
    """At most ``caps[q]`` allocations in queue ``q`` and below."""

    __slots__ = ("caps", "pods")

    key: ClassVar[str] = KEY

    def __init__(self, caps: dict[str, int]) -> None:
        self.name = "podcap"
        self.caps = caps
        #: queue path -> allocations in it and below (every level of every chain: a cap added by a
        #: reload counts what runs already)
        self.pods: dict[str, int] = {}

    @staticmethod
    def _chain(queue_path: str) -> list[str]:
        parts = queue_path.split(".")
        return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]

    def check(self, request: AdmissionRequest) -> list[Violation]:
        """``podcap.max`` for each capped queue of the request's chain that is full."""
        out: list[Violation] = []
        for path in self._chain(request.queue_path):
            cap = self.caps.get(path)
            if cap is not None and self.pods.get(path, 0) + 1 > cap:
                out.append(Violation("podcap", "podcap.max", path,
                                     f"queue {path!r} holds {self.pods.get(path, 0)} pods, its cap is {cap}"))
        return out

    def _add(self, request: AdmissionRequest, n: int) -> None:
        for path in self._chain(request.queue_path):
            count = self.pods.get(path, 0) + n
            if count:
                self.pods[path] = count
            else:
                self.pods.pop(path, None)

    def apply(self, request: AdmissionRequest) -> list[Violation]:
        """Count the allocation (checked by :meth:`check` first, as every policy is: replay never refuses)."""
        self._add(request, 1)
        return []

    def undo(self, request: AdmissionRequest) -> None:
        """Take the count back."""
        self._add(request, -1)

    def release(self, request: AdmissionRequest, *, last_allocation: bool) -> None:
        """The allocation is gone."""
        self._add(request, -1)

    def update_config(self, partition_config: PartitionConfig) -> None:
        """A reload: the new caps (what runs stays counted)."""
        self.caps = _caps(partition_config)

    def dump_state(self) -> dict[str, Any]:
        """Caps and counts, sorted (replay reproduces them)."""
        return {"caps": dict(sorted(self.caps.items())), "pods": dict(sorted(self.pods.items()))}

    def view(self) -> dict[str, Any]:
        """Each capped queue: its cap and the pods in it."""
        return {path: {"max": cap, "pods": self.pods.get(path, 0)} for path, cap in sorted(self.caps.items())}

    def metrics(self) -> list[MetricSample]:
        """Pods and cap of each capped queue."""
        out: list[MetricSample] = []
        for path, cap in sorted(self.caps.items()):
            labels = (("queue", path),)
            out.append(MetricSample("podcap_pods", "pods in a capped queue and below", labels,
                                    self.pods.get(path, 0)))
            out.append(MetricSample("podcap_max", "the most pods a capped queue may hold", labels, cap))
        return out


def build(partition_config: PartitionConfig, context: PolicyContext) -> PodCapPolicy:
    """The policy of one partition."""
    return PodCapPolicy(_caps(partition_config))


PLUGIN = Plugin(KEY, 50, build, codes=("podcap.max",), checker=check)
register_plugin(PLUGIN)
