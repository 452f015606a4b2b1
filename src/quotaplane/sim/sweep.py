"""Sweeps: one workload replayed under many variants of a configuration, in parallel.

``--vary 'root.team-a.resources.guaranteed.nvidia.com/gpu=4,8,12'`` names a setting of one queue and
the values to try; several ``--vary`` make a grid (every combination). A setting is

- ``<queue path>.resources.guaranteed.<resource>`` or ``….resources.max.<resource>`` (amounts in the
  configuration's units: ``8``, ``16Gi``, ``500m``), or
- ``<queue path>.maxapplications``, or ``<queue path>.properties.<name>``.

Each variant is the base configuration with those settings, validated like any configuration (a
guaranteed above the max is refused, naming the ``--vary``). Variants run

- on local processes (:func:`run_local`, ``--workers N``; the workload is handed to each worker once,
  by ``fork`` where the platform has it), or
- on a Dask cluster (:func:`run_dask`, ``--dask ADDRESS``, the optional ``dask`` extra): the workload is
  scattered to every worker once and each variant is one task. Dask, not Ray: ``distributed`` is pure
  Python on a few small pure-Python dependencies and installs in seconds, a ``LocalCluster`` runs in
  a test, and a variant is a plain function of plain data — Ray's actors, object store and its large
  native wheel buy nothing here.

Every variant runs the same code as a single run (:func:`run_variant`), so a variant's results equal
those of ``quotaplane simulate`` with that configuration.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from quotaplane import errors
from quotaplane.sim.trace import TraceEvent

__all__ = ["Run", "Setting", "SweepError", "Variant", "apply_settings", "parse_vary", "run_dask",
           "run_local", "run_variant", "variants"]

_FIELDS = ("guaranteed", "max")


class SweepError(errors.InputError):
    """A ``--vary`` that cannot be applied; the message names it."""


@dataclass(frozen=True)
class Setting:
    """One setting a ``--vary`` changes: ``queue`` path, ``kind`` (``resources``, ``maxapplications``,
    ``properties``), ``field`` (``guaranteed``/``max``/the property), ``name`` (the resource)."""

    spec: str
    queue: str
    kind: str
    field: str = ""
    name: str = ""

    @property
    def label(self) -> str:
        """A short name: the queue without ``root.``, and the setting."""
        q = self.queue.removeprefix("root.") if self.queue != "root" else "root"
        if self.kind == "resources":
            return f"{q}.{self.field}.{self.name}"
        if self.kind == "properties":
            return f"{q}.{self.field}"
        return f"{q}.maxapplications"


@dataclass(frozen=True)
class Variant:
    """One combination of values: ``name`` (``label=value, …``) and the ``(setting, value)`` pairs."""

    name: str
    values: tuple[tuple[Setting, str], ...]

    def to_json(self) -> dict[str, str]:
        """The settings as ``{spec path: value}``."""
        return {s.spec: v for s, v in self.values}


def parse_vary(spec: str) -> tuple[Setting, list[str]]:
    """Parse one ``--vary PATH=V1,V2,…``; :class:`SweepError` naming it when malformed."""
    lhs, sep, rhs = spec.partition("=")
    lhs = lhs.strip()
    values = [v.strip() for v in rhs.split(",")]
    if not sep or not lhs or not rhs.strip() or any(not v for v in values):
        raise SweepError(f"--vary {spec!r}: expected PATH=VALUE[,VALUE…], e.g. "
                         "'root.team-a.resources.guaranteed.nvidia.com/gpu=4,8,12'")
    if len(set(values)) != len(values):
        raise SweepError(f"--vary {spec!r}: a value is given twice")
    return _setting(spec, lhs, values), values


def _setting(spec: str, lhs: str, values: list[str]) -> Setting:
    """The setting a ``--vary`` path names (its values checked where the kind needs it)."""
    head, mark, rest = lhs.partition(".resources.")
    if mark:
        field, _, name = rest.partition(".")
        if field not in _FIELDS or not name:
            raise SweepError(f"--vary {spec!r}: after '.resources.' expected guaranteed.<resource> or "
                             "max.<resource>")
        return Setting(lhs, head.lower(), "resources", field, name)
    head, mark, rest = lhs.partition(".properties.")
    if mark:
        if not rest:
            raise SweepError(f"--vary {spec!r}: after '.properties.' expected a property name")
        return Setting(lhs, head.lower(), "properties", rest)
    if lhs.endswith(".maxapplications"):
        for v in values:
            if not v.isdigit():
                raise SweepError(f"--vary {spec!r}: maxapplications must be whole numbers, got {v!r}")
        return Setting(lhs, lhs.removesuffix(".maxapplications").lower(), "maxapplications")
    raise SweepError(f"--vary {spec!r}: expected <queue>.resources.guaranteed|max.<resource>, "
                     "<queue>.maxapplications or <queue>.properties.<name>")


def variants(specs: Sequence[str]) -> list[Variant]:
    """Every combination of the ``--vary`` values, in the order given (the last varies fastest); none
    without a ``--vary``."""
    if not specs:
        return []
    parsed = [parse_vary(s) for s in specs]
    seen: set[tuple[str, str, str, str]] = set()
    for setting, _ in parsed:
        key = (setting.queue, setting.kind, setting.field, setting.name)
        if key in seen:
            raise SweepError(f"--vary {setting.spec!r}: the same setting is varied twice")
        seen.add(key)
    out = []
    for combo in itertools.product(*[[(s, v) for v in vals] for s, vals in parsed]):
        name = ", ".join(f"{s.label}={v}" for s, v in combo)
        out.append(Variant(name, tuple(combo)))
    return out


def _scalar(value: str) -> Any:
    """A --vary value as YAML would read it: a whole number as an int, else the text (``16Gi``)."""
    return int(value) if value.isdigit() else value


def apply_settings(config_text: str, partition: str, variant: Variant) -> str:
    """The configuration text with ``variant``'s settings; :class:`SweepError` naming the ``--vary``
    when a queue does not exist or the result is not a valid configuration."""
    import yaml

    from quotaplane.config import load_config
    from quotaplane.errors import ConfigError

    doc = yaml.safe_load(config_text)
    parts = [p for p in (doc or {}).get("partitions") or [] if str(p.get("name", "")).lower() == partition]
    if not parts:
        raise SweepError(f"partition {partition!r} is not in the configuration")
    for setting, value in variant.values:
        _set(_queue_node(parts[0], setting), setting, value)
    text = yaml.safe_dump(doc, sort_keys=False)
    try:
        load_config(text)
    except ConfigError as exc:
        raise SweepError(f"variant {variant.name}: {exc}") from None
    return text


def _set(node: dict[str, Any], setting: Setting, value: str) -> None:
    """Write one ``--vary`` value into its queue's YAML node."""
    if setting.kind == "resources":
        res = node.setdefault("resources", {}) or {}
        node["resources"] = res
        amounts = res.get(setting.field) or {}
        res[setting.field] = amounts
        amounts[setting.name] = _scalar(value)
    elif setting.kind == "properties":
        props = node.get("properties") or {}
        node["properties"] = props
        props[setting.field] = value
    else:
        node["maxapplications"] = int(value)


def _queue_node(partition: dict[str, Any], setting: Setting) -> dict[str, Any]:
    names = setting.queue.split(".")
    level: list[dict[str, Any]] = partition.get("queues") or []
    node: dict[str, Any] | None = None
    for depth, name in enumerate(names):
        node = next((q for q in level if str(q.get("name", "")).lower() == name), None)
        if node is None:
            known = ", ".join(".".join([*names[:depth], str(q.get("name"))]) for q in level) or "none"
            raise SweepError(f"--vary {setting.spec!r}: no queue {'.'.join(names[:depth + 1])!r} in the "
                             f"configuration (there: {known})")
        level = node.get("queues") or []
    assert node is not None
    return node


@dataclass
class Run:
    """What one variant produced: the summary (with its ``metrics``) and the timeline samples."""

    name: str
    summary: dict[str, Any]
    samples: list[dict[str, Any]]


@dataclass(frozen=True)
class Workload:
    """What every variant replays: the events and how (partition, window, timeline, cycles)."""

    events: list[TraceEvent]
    partition: str = "default"
    window: tuple[float, float] | None = None
    sample_interval: float | None = None
    cycle_interval: float = 0.0


def run_variant(workload: Workload, name: str, config_text: str) -> Run:
    """One run: the workload under ``config_text`` (exactly what a single ``simulate`` does)."""
    from quotaplane.sim.engine import Simulator

    sim = Simulator(config_text, partition=workload.partition, sample_interval=workload.sample_interval,
                    cycle_interval=workload.cycle_interval, window=workload.window)
    result = sim.run(workload.events)
    return Run(name, result.summary, result.samples)


_WORKLOAD: Workload | None = None


def _init(workload: Workload) -> None:
    global _WORKLOAD
    _WORKLOAD = workload


def _run_here(name: str, config_text: str) -> Run:
    assert _WORKLOAD is not None, "the worker was not given the workload"
    return run_variant(_WORKLOAD, name, config_text)


def run_local(workload: Workload, configs: Sequence[tuple[str, str]], *, workers: int | None = None,
              done: Callable[[int, int], None] | None = None) -> list[Run]:
    """Run ``(name, config text)`` variants on ``workers`` local processes (default: the CPUs, at most
    the variants); results in the order given. One worker runs them here, without processes.
    ``done(finished, total)`` is called as variants finish."""
    n = min(workers or os.cpu_count() or 1, len(configs))
    if n <= 1:
        out = []
        for i, (name, text) in enumerate(configs, start=1):
            out.append(run_variant(workload, name, text))
            if done is not None:
                done(i, len(configs))
        return out
    # fork: the workers inherit the workload instead of unpickling it (it can be 100,000s of events)
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_init,
                             initargs=(workload,)) as pool:
        futures = [pool.submit(_run_here, name, text) for name, text in configs]
        results: list[Run] = []
        for i, f in enumerate(futures, start=1):
            results.append(f.result())
            if done is not None:
                done(i, len(configs))
        return results


def _run_remote(workload: Workload, name: str, config_text: str) -> Run:
    return run_variant(workload, name, config_text)


def _gather(futures: list[Any], as_completed: Any, done: Callable[[int, int], None] | None) -> list[Run]:
    """The runs of ``futures`` in the order submitted, reporting each as it completes."""
    index = {f.key: i for i, f in enumerate(futures)}
    results: list[Run | None] = [None] * len(futures)
    for n, f in enumerate(as_completed(futures), start=1):
        results[index[f.key]] = f.result()
        if done is not None:
            done(n, len(futures))
    return [r for r in results if r is not None]


def run_dask(address: Any, workload: Workload, configs: Sequence[tuple[str, str]],
             done: Callable[[int, int], None] | None = None, *, connect_timeout: float = 10.0) -> list[Run]:
    """Run the variants on the Dask cluster at ``address`` (a scheduler address, or a
    ``distributed.Client``). The workers need quotaplane installed. Raises :class:`SweepError` when
    the ``dask`` extra is not installed or the scheduler does not answer in ``connect_timeout`` s."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise SweepError("--dask needs the 'dask' extra: pip install 'quotaplane[dask]'") from None
    own = not isinstance(address, Client)
    try:
        client = Client(address, timeout=f"{connect_timeout}s") if own else address  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as exc:
        raise SweepError(f"--dask {address!r}: cannot reach the Dask scheduler ({exc})") from None
    try:
        # the workload goes to every worker once; each variant is a small task naming it
        shared = client.scatter(workload, broadcast=True)
        futures = [client.submit(_run_remote, shared, name, text, key=f"quotaplane-variant-{i}-{os.getpid()}",
                                 pure=False)
                   for i, (name, text) in enumerate(configs)]
        return _gather(futures, as_completed, done)
    finally:
        if own:
            client.close()
