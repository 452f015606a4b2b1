"""The partition-config keys that switch quota policies on, and the plug-ins that declare them.

A partition always runs the queue policy and the user/group policy (decision Q2). Other policies are
switched on per partition by a key of its configuration: ``elasticquotas`` and ``quotatrees`` ship with
quotaplane; a plug-in declares its own with a :class:`PolicyPlugin` — its key, its place in the
admission path, the violation codes its policy gives, the check of the key's value (its schema) and
the builder of its policy. The configuration loader accepts exactly the declared keys and runs their
checks (every problem with its line); :mod:`quotaplane.policies.registry` builds the policies; the
service shows each policy's view and metrics (:class:`~quotaplane.policies.QuotaPolicy`).

Plug-ins register themselves when imported (:func:`quotaplane.policies.registry.register_plugin`); a
service loads the modules named by ``QUOTAPLANE_PLUGINS`` (comma-separated module names or ``.py``
paths) before it reads a configuration. The two built-in keys are resolved by module name only when
used, so this module imports no engine.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from quotaplane.errors import InputError

__all__ = ["ENV", "PolicyPlugin", "check", "declare", "declared", "forget", "load_plugins", "plugin"]

#: the environment variable naming the plug-in modules a service loads
ENV = "QUOTAPLANE_PLUGINS"


@runtime_checkable
class PolicyPlugin(Protocol):
    """A quota policy switched on by a partition-config key (see the module docstring).

    ``key``: the partition-config key; ``order``: its place in the admission path (queue 10,
    user/group 20, elastic 30, forest 40); ``codes``: the violation codes its policy gives (stable
    tokens ``<name>.<what>``; its events). ``check(value)``: the problems of the key's value as plain
    data (``[]``: valid), each a sentence naming what is wrong. ``build(partition_config, context)``:
    the :class:`~quotaplane.policies.QuotaPolicy` for a partition (``context``: a
    :class:`~quotaplane.policies.registry.PolicyContext`).
    """

    @property
    def key(self) -> str:
        """The partition-config key."""
        ...

    @property
    def order(self) -> int:
        """The policy's place in the admission path."""
        ...

    @property
    def codes(self) -> tuple[str, ...]:
        """The violation codes its policy gives."""
        ...

    def check(self, value: Any) -> list[str]:
        """The problems of the key's value (``[]``: valid)."""
        ...

    def build(self, partition_config: Any, context: Any) -> Any:
        """The policy for one partition."""
        ...


#: the keys that ship with quotaplane, with their order. Their plug-ins live in the policies layer,
#: above this one: the package that assembles quotaplane gives each key the function that loads its
#: plug-in (:func:`provide`, called by ``quotaplane/__init__.py``, which every import of a quotaplane
#: module runs first), so that a key's module is imported only when the key is used and this module
#: names no module above it (tests/test_architecture.py)
_BUILTIN: dict[str, int] = {"elasticquotas": 30, "quotatrees": 40, "budgets": 50}

_lock = threading.RLock()
_plugins: dict[str, PolicyPlugin] = {}
_providers: dict[str, Callable[[], PolicyPlugin]] = {}
_loaded_env: str | None = None


def provide(key: str, load: Callable[[], PolicyPlugin]) -> None:
    """Give the function that loads the plug-in of the built-in ``key`` (called on first use)."""
    if key not in _BUILTIN:
        raise InputError(f"{key!r} is not a built-in policy key ({', '.join(sorted(_BUILTIN))})")
    with _lock:
        _providers[key] = load


def declare(plugin: PolicyPlugin) -> None:
    """Declare (or replace) the plug-in of ``plugin.key``."""
    key = plugin.key
    if not isinstance(key, str) or not key or not key.isidentifier() or key != key.lower():
        raise InputError(f"a policy plug-in key must be a lower-case identifier, got {key!r}")
    with _lock:
        _plugins[key] = plugin


def forget(key: str) -> None:
    """Forget a declared plug-in (a built-in key stays known)."""
    with _lock:
        _plugins.pop(key, None)


def declared() -> dict[str, int]:
    """Every key a partition configuration may hold to switch a policy on, with its order (a built-in
    key's module is not imported)."""
    load_plugins()
    with _lock:
        out = dict(_BUILTIN)
        out.update((key, p.order) for key, p in _plugins.items())
        return out


def plugin(key: str) -> PolicyPlugin | None:
    """The plug-in of ``key`` (a built-in one is imported now), or None."""
    load_plugins()
    with _lock:
        found = _plugins.get(key)
    if found is not None:
        return found
    with _lock:
        load = _providers.get(key)
    if load is None:
        return None
    found = load()
    assert isinstance(found, PolicyPlugin)
    return found


def check(key: str, value: Any) -> list[str]:
    """The problems of ``value`` under ``key`` by its plug-in's check (``[]``: valid or unknown key)."""
    found = plugin(key)
    if found is None:
        return []
    try:
        return list(found.check(value))
    except Exception as exc:     # a plug-in's check must not break the loader: its failure is a problem
        return [f"the check of {key!r} failed: {exc}"]


def load_plugins(names: str | None = None) -> None:
    """Import the plug-in modules named by ``names`` (default: the ``QUOTAPLANE_PLUGINS`` variable),
    once per distinct value: module names, or paths of ``.py`` files. A module that cannot be loaded is
    an :class:`InputError` naming it."""
    global _loaded_env
    text = os.environ.get(ENV, "") if names is None else names
    if names is None and text == _loaded_env:
        return
    with _lock:
        for name in (n.strip() for n in text.split(",")):
            if name:
                _import(name)
        if names is None:
            _loaded_env = text


def _import(name: str) -> None:
    try:
        if name.endswith(".py"):
            path = Path(name)
            module_name = f"quotaplane_plugin_{path.stem}"
            if module_name in sys.modules:
                return
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"no module at {name}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(module_name, None)
                raise
        else:
            importlib.import_module(name)
    except Exception as exc:
        raise InputError(f"{ENV}: cannot load the policy plug-in {name!r}: {exc}") from exc

