"""Property-based invariants of the user group manager (quality.md "Invariants, property-based").

A hypothesis state machine drives increases, decreases, application removals and config reloads
against an independent model, and checks after every step:

- usage at every node of every user and group tracker equals what was admitted minus what was
  released below it, running applications likewise, and trackers/nodes exist exactly when
  something is tracked there (U9);
- an admitted increase never leaves usage above a limit (U1);
- a refused increase changes nothing (``dump_state`` before and after) and ``explain_increase`` is
  non-empty exactly when the increase is refused;
- ``headroom`` equals the model's component-wise minimum (H-1, H-2) and changes nothing;
- replaying the same calls on a fresh manager gives byte-identical state.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from quotaplane.config.model import LimitConfig
from quotaplane.resources import Resource
from quotaplane.ugm import Manager, split_queue_path

from .helpers import lim, partition, ug

PATHS = ("root.a", "root.a.x", "root.b")
USERS: dict[str, tuple[str, ...]] = {
    "u0": ("dev",), "u1": ("dev", "qa"), "u2": ("qa",), "u3": (), "u4": ("sales",),
}
CONFIGS: list[dict[str, list[LimitConfig]]] = [
    {
        "root": [lim(users=["*"], res={"vcore": 10, "mem": 10}, apps=2),
                 lim(groups=["dev"], res={"vcore": 15}), lim(groups=["*"], res={"vcore": 12})],
        "root.a": [lim(users=["u1"], res={"vcore": 4}, apps=1), lim(users=["*"], res={"vcore": 6}),
                   lim(groups=["qa"], res={"vcore": 8}, apps=1)],
    },
    {
        "root": [lim(users=["*"], res={"vcore": 8, "mem": 20})],
        "root.a": [lim(groups=["dev"], res={"vcore": 5}), lim(groups=["*"], res={"mem": 5})],
    },
    {},
]


def model_limit(config: Mapping[str, Sequence[LimitConfig]], path: str, kind: str, name: str
                ) -> LimitConfig | None:
    """The limit entry for ``name`` at ``path``, read from the config lists (not via LimitTable)."""
    entries = config.get(path, ())
    for e in entries:
        names = e.users if kind == "user" else e.groups
        if name in names:
            return e
    if kind == "user":
        for e in entries:
            if "*" in e.users:
                return e
    return None


def model_group(config: Mapping[str, Sequence[LimitConfig]], path: str,
                groups: tuple[str, ...]) -> str | None:
    """G-3 written independently: leaf to root, named groups in config order, else the level's *."""
    if not groups:
        return None
    for level in reversed(split_queue_path(path)):
        named = [g for e in config.get(level, ()) for g in e.groups if g != "*"]
        for g in named:
            if g in groups:
                return g
        if any("*" in e.groups for e in config.get(level, ())):
            return "*"
    return None


class UgmMachine(RuleBasedStateMachine):
    """Random operations against a model (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.m = Manager()
        self.config_index = 0
        self.m.update_config(partition(CONFIGS[0], PATHS))
        # app id -> {"user", "path", "group", "usage"}
        self.apps: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[Any, ...]] = [("config", 0)]

    @property
    def config(self) -> dict[str, list[LimitConfig]]:
        return CONFIGS[self.config_index]

    # -- rules ------------------------------------------------------------------------------------
    @rule(app=st.integers(0, 7), user=st.sampled_from(sorted(USERS)), path=st.sampled_from(PATHS),
          vcore=st.integers(0, 7), mem=st.integers(0, 7))
    def increase(self, app: int, user: str, path: str, vcore: int, mem: int) -> None:
        app_id = f"app-{app}"
        known = self.apps.get(app_id)
        if known is not None:
            user, path = known["user"], known["path"]
        who = ug(user, *USERS[user])
        usage = Resource({k: v for k, v in (("vcore", vcore), ("mem", mem)) if v})
        before = self.m.dump_state()
        explained = self.m.explain_increase(path, app_id, usage, who)
        assert self.m.dump_state() == before
        ok = self.m.increase_tracked_resource(path, app_id, usage, who)
        self.calls.append(("inc", path, app_id, dict(usage), user))
        assert ok == (explained == [])
        if not ok:
            assert self.m.dump_state() == before
            return
        started = known is None
        if known is None:
            known = {"user": user, "path": path, "usage": {},
                     "group": model_group(self.config, path, USERS[user])}
            self.apps[app_id] = known
        for k, v in usage.items():
            known["usage"][k] = known["usage"].get(k, 0) + v
        self.check_within_limits(known, usage, started)

    @precondition(lambda self: bool(self.apps))
    @rule(data=st.data())
    def decrease(self, data: st.DataObject) -> None:
        app_id = data.draw(st.sampled_from(sorted(self.apps)))
        app = self.apps[app_id]
        part = {k: data.draw(st.integers(0, v)) for k, v in sorted(app["usage"].items())}
        part = {k: v for k, v in part.items() if v}
        self.m.decrease_tracked_resource(app["path"], app_id, Resource(part), False,
                                         ug(app["user"], *USERS[app["user"]]))
        self.calls.append(("dec", app["path"], app_id, part, app["user"], False))
        for k, v in part.items():
            app["usage"][k] -= v

    @precondition(lambda self: bool(self.apps))
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        app_id = data.draw(st.sampled_from(sorted(self.apps)))
        app = self.apps.pop(app_id)
        rest = {k: v for k, v in app["usage"].items() if v}
        self.m.decrease_tracked_resource(app["path"], app_id, Resource(rest), True,
                                         ug(app["user"], *USERS[app["user"]]))
        self.calls.append(("dec", app["path"], app_id, rest, app["user"], True))

    @rule(index=st.integers(0, len(CONFIGS) - 1))
    def reload(self, index: int) -> None:
        self.config_index = index
        self.m.update_config(partition(CONFIGS[index], PATHS))
        self.calls.append(("config", index))

    @rule(app=st.integers(0, 8), user=st.sampled_from(sorted(USERS)), path=st.sampled_from(PATHS))
    def headroom(self, app: int, user: str, path: str) -> None:
        app_id = f"app-{app}"
        known = self.apps.get(app_id)
        if known is not None:
            user, path = known["user"], known["path"]
            group = known["group"]
        else:
            group = model_group(self.config, path, USERS[user])
        before = self.m.dump_state()
        got = self.m.headroom(path, app_id, ug(user, *USERS[user]))
        assert self.m.dump_state() == before
        expected: dict[str, int] | None = None
        for kind, name in (("user", user), ("group", group)):
            if name is None:
                continue
            for level in split_queue_path(path):
                entry = self.limit_at(kind, name, level)
                if entry is None or entry.max_resources is None:
                    continue
                used = self.expected_usage(kind, name, level)
                for k, v in entry.max_resources.items():
                    h = v - used.get(k, 0)
                    expected = expected if expected is not None else {}
                    expected[k] = min(expected.get(k, h), h)
        assert (None if got is None else dict(got)) == expected

    @rule(app=st.integers(0, 8), user=st.sampled_from(sorted(USERS)), path=st.sampled_from(PATHS))
    def can_run_app(self, app: int, user: str, path: str) -> None:
        """H-3/H-4 against the model; changes nothing."""
        app_id = f"app-{app}"
        known = self.apps.get(app_id)
        if known is not None:
            user, path = known["user"], known["path"]
            group = known["group"]
        else:
            group = model_group(self.config, path, USERS[user])
        before = self.m.dump_state()
        got = self.m.can_run_app(path, app_id, ug(user, *USERS[user]))
        assert self.m.dump_state() == before
        expected = True
        for kind, name in (("user", user), ("group", group)):
            if name is None:
                continue
            for level in split_queue_path(path):
                entry = self.limit_at(kind, name, level)
                if entry is None or not entry.max_applications:
                    continue
                running = [a for a, x in self.members(kind, name) if level in split_queue_path(x["path"])]
                if app_id not in running and len(running) >= entry.max_applications:
                    expected = False
        assert got == expected

    # -- model helpers ----------------------------------------------------------------------------
    def limit_at(self, kind: str, name: str, level: str) -> LimitConfig | None:
        if kind == "group" and name == "*":
            for e in self.config.get(level, ()):
                if "*" in e.groups:
                    return e
            return None
        entry = model_limit(self.config, level, kind, name)
        if entry is not None and entry.max_resources is not None and not any(entry.max_resources.values()):
            return None
        return entry

    def members(self, kind: str, name: str) -> list[tuple[str, dict[str, Any]]]:
        key = "user" if kind == "user" else "group"
        return [(a, app) for a, app in sorted(self.apps.items()) if app[key] == name]

    def expected_usage(self, kind: str, name: str, level: str) -> dict[str, int]:
        total: dict[str, int] = {}
        for _, app in self.members(kind, name):
            if level in split_queue_path(app["path"]):
                for k, v in app["usage"].items():
                    total[k] = total.get(k, 0) + v
        return {k: v for k, v in sorted(total.items()) if v}

    def check_within_limits(self, app: dict[str, Any], usage: Resource, started: bool) -> None:
        """U1: after an admitted increase no limit on its path is exceeded for a requested type,
        and no count limit if the increase started the application (a running application is
        never refused for its count, even after a reload lowered the limit: H-3, U6)."""
        for kind, name in (("user", app["user"]), ("group", app["group"])):
            if name is None:
                continue
            for level in split_queue_path(app["path"]):
                entry = self.limit_at(kind, name, level)
                if entry is None:
                    continue
                used = self.expected_usage(kind, name, level)
                if entry.max_resources is not None:
                    for k, v in usage.items():
                        if v > 0 and k in entry.max_resources:
                            assert used.get(k, 0) <= entry.max_resources[k]
                if entry.max_applications and started:
                    running = [a for a, x in self.members(kind, name) if level in split_queue_path(x["path"])]
                    assert len(running) <= entry.max_applications

    def expected_trackers(self, kind: str) -> dict[str, dict[str, Any]]:
        key = "user" if kind == "user" else "group"
        out: dict[str, dict[str, Any]] = {}
        for app_id, app in sorted(self.apps.items()):
            name = app[key]
            if name is None:
                continue
            nodes = out.setdefault(name, {})
            for level in split_queue_path(app["path"]):
                n = nodes.setdefault(level, {"usage": {}, "running": []})
                n["running"].append(app_id)
                for k, v in app["usage"].items():
                    n["usage"][k] = n["usage"].get(k, 0) + v
        for nodes in out.values():
            for n in nodes.values():
                n["usage"] = {k: v for k, v in sorted(n["usage"].items()) if v}
                n["running"] = sorted(n["running"])
        return out

    # -- invariants -------------------------------------------------------------------------------
    @invariant()
    def usage_matches_admitted_minus_released(self) -> None:
        state = self.m.dump_state()
        for kind in ("user", "group"):
            got = {name: {path: {"usage": n["usage"], "running": n["running"]}
                          for path, n in t["queues"].items()}
                   for name, t in state[kind + "s"].items()}
            assert got == self.expected_trackers(kind)
        links = {app: t["groups"][app] for t in state["users"].values() for app in t["groups"]}
        assert links == {a: app["group"] for a, app in self.apps.items()}

    def teardown(self) -> None:
        """Replaying the same calls on a fresh manager gives byte-identical state."""
        replay = Manager()
        for call in self.calls:
            if call[0] == "config":
                replay.update_config(partition(CONFIGS[call[1]], PATHS))
            elif call[0] == "inc":
                _, path, app, usage, user = call
                replay.increase_tracked_resource(path, app, Resource(usage), ug(user, *USERS[user]))
            else:
                _, path, app, usage, user, remove_app = call
                replay.decrease_tracked_resource(path, app, Resource(usage), remove_app,
                                                 ug(user, *USERS[user]))
        assert json.dumps(replay.dump_state()) == json.dumps(self.m.dump_state())


UgmMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestUgmInvariants = UgmMachine.TestCase
