"""Opening and closing windows in the configuration text (see :mod:`quotaplane.windows`).

The text is edited round-trip (comments and order survive). Opening a window writes its overrides into
its queue (``resources.max``, ``resources.guaranteed``) and into the queue's own budget
(``resourcehours``), into an elastic quota's ``spec`` (``min``, ``max``), or into the limit of a queue
that lists its user or group (``maxresources``, ``maxapplications``), keeping the values they replace in
the window's ``saved``; closing it puts them back (a value that was not set is removed again).
Overlapping windows on one setting of one scope are refused by validation, so two windows never fight
over a value. Elastic quotas written as one text of YAML documents become a list of objects the first
time a window opens on one of them (the same quotas, which the text form cannot be edited in place as).
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Callable, Mapping
from itertools import pairwise
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from quotaplane.config.windows import WindowSpec, elastic_quota_objects, parse_windows
from quotaplane.errors import ConfigError, NotFoundError

__all__ = ["add_window", "check_opened", "edges", "opened_problems", "remove_window", "tick",
           "window_states"]


_KEY_OPEN = re.compile(r"^(?P<lead> *(?:- +)*)(?P<key>[^\s#-][^#]*?|-[^\s#][^#]*?):\s*(?:#.*)?$")


def _indents(text: str) -> tuple[int, int, int]:
    """The indentation ``text`` is written in, as ruamel's ``indent(mapping, sequence, offset)``: how
    far a nested mapping's keys sit right of their parent key, how far a sequence item's content and
    its dash do. The most common of each in the text (ruamel's defaults, 2 2 0, where there is none),
    so that a dump changes only the lines an edit changed, not every line of a file written with
    ``- name:`` two columns in (most hand-written configurations, and our examples)."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    mapping: Counter[int] = Counter()
    sequence: Counter[tuple[int, int]] = Counter()
    for line, nxt in pairwise(lines):
        m = _KEY_OPEN.match(line)
        if m is None:
            continue
        key_col = len(m.group("lead"))
        body = nxt.lstrip(" ")
        col = len(nxt) - len(body)
        if body.startswith("- ") or body == "-":
            if col >= key_col:
                content = len(body) - len(body[1:].lstrip(" ")) if body != "-" else 2
                sequence[(col - key_col + content, col - key_col)] += 1
        elif col > key_col:
            mapping[col - key_col] += 1
    seq, offset = sequence.most_common(1)[0][0] if sequence else (2, 0)
    return (mapping.most_common(1)[0][0] if mapping else 2), seq, offset


def _yaml(text: str = "") -> YAML:
    """A round-trip YAML that dumps in the indentation ``text`` is written in."""
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096
    mapping, sequence, offset = _indents(text)
    y.indent(mapping=mapping, sequence=sequence, offset=offset)
    return y


def _plain(value: Any) -> Any:
    """A round-trip YAML value as plain data (dicts, lists, scalars)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _queue(pm: Any, path: str) -> Any:
    """The queue mapping at ``path`` in a partition's ``queues`` (lower-case match), or None."""
    nodes = pm.get("queues") or []
    found = None
    for part in path.split("."):
        found = next((q for q in nodes if str(q.get("name", "")).lower() == part), None)
        if found is None:
            return None
        nodes = found.get("queues") or []
    return found


def _budget(pm: Any, w: WindowSpec) -> Any:
    """The budget entry of window ``w``'s queue (its own: no user, no group) or elastic quota, or None."""
    if w.kind == "elasticquota":
        return next((b for b in pm.get("budgets") or [] if b.get("elasticquota") == w.target), None)
    return next((b for b in pm.get("budgets") or [] if str(b.get("queue", "")) == w.queue
                 and "user" not in b and "group" not in b), None)


def _limit(pm: Any, w: WindowSpec) -> Any:
    """The limit entry of ``w``'s queue that lists its user (or group)."""
    queue = _queue(pm, w.queue)
    key = "users" if w.kind == "user" else "groups"
    for entry in (queue.get("limits") or []) if queue is not None else []:
        if w.target in [str(n) for n in entry.get(key) or []]:
            return entry
    raise ConfigError(f"window {w.name!r}: queue {w.queue} has no limit listing {w.kind} {w.target}")


def _quota_objects(pm: Any) -> list[Any]:
    """The partition's ElasticQuota objects as edited in place (a text of quotas is made a list)."""
    value = pm.get("elasticquotas")
    holder, key = pm, "elasticquotas"
    if hasattr(value, "get") and value.get("kind") is None:
        holder, key = value, "quotas"
        value = value.get("quotas")
    if isinstance(value, str):
        holder[key] = value = elastic_quota_objects(value)
    return [value] if hasattr(value, "get") else value if isinstance(value, list) else []


def _elastic(pm: Any, w: WindowSpec) -> Any:
    """The ``spec`` of ``w``'s elastic quota object."""
    for obj in _quota_objects(pm):
        meta: Any = obj.get("metadata") if hasattr(obj, "get") else None
        if hasattr(meta, "get") and meta.get("name") == w.target:
            if obj.get("spec") is None:
                obj["spec"] = {}
            return obj["spec"]
    raise ConfigError(f"window {w.name!r}: elastic quota {w.target} is not in the configuration")


def _slot(pm: Any, w: WindowSpec, field: str) -> tuple[Any, str]:
    """The mapping holding ``field`` of window ``w``'s target, and the key in it."""
    if field == "resourcehours":
        budget = _budget(pm, w)
        if budget is None:
            raise ConfigError(f"window {w.name!r} overrides the budget of {w.scope}, which has none")
        return budget, "resourcehours"
    if w.kind == "elasticquota":
        return _elastic(pm, w), field
    if w.kind in ("user", "group"):
        return _limit(pm, w), field
    queue = _queue(pm, w.queue)
    if queue is None:
        raise ConfigError(f"window {w.name!r}: queue {w.queue} is not in the configuration")
    if queue.get("resources") is None:
        queue["resources"] = {}
    return queue["resources"], field


def _flowable(item: tuple[Any, Any]) -> bool:
    """Whether a key and value are safe on one line (ruamel writes a plain ``09:00`` unquoted in a flow
    mapping, which does not read back)."""
    return all(isinstance(v, int | float) or (isinstance(v, str) and not set(v) & set(":,[]{}#'\"&*!|>%@`"))
               for v in item)


def _styled(value: Any, like: Any) -> Any:
    """``value`` (plain data) as a round-trip mapping written in ``like``'s style — ``{vcore: 8}``
    on one line when ``like`` is — so that a value put in place of another takes only its lines."""
    if not isinstance(value, Mapping):
        return value
    out = CommentedMap(value)
    if isinstance(like, CommentedMap) and like.fa.flow_style() and all(map(_flowable, value.items())):
        out.fa.set_flow_style()
    else:
        out.fa.set_block_style()
    return out


#: a mapping written on one line, as style for :func:`_styled`
_FLOW = CommentedMap()
_FLOW.fa.set_flow_style()


def _open(pm: Any, raw: Any, w: WindowSpec) -> None:
    saved = CommentedMap()
    for field, value in w.overrides.items():
        holder, key = _slot(pm, w, field)
        old = holder.get(key)
        saved[field] = _styled(_plain(old), old)
        # in the style of the value it replaces (or, where none was set, of the window's own line)
        holder[key] = _styled(value, old if old is not None else raw.get(field))
    raw["active"] = True
    raw["saved"] = saved


def _close(pm: Any, raw: Any, w: WindowSpec) -> None:
    written = raw.get("saved")
    for field in w.overrides:
        holder, key = _slot(pm, w, field)
        old = w.saved.get(field)
        if old is None:
            holder.pop(key, None)
        else:               # the style it was saved in, which is the style it had
            holder[key] = _styled(old, written.get(field) if hasattr(written, "get") else None)
        if not holder and w.kind == "queue" and field != "resourcehours":
            _queue(pm, w.queue).pop("resources", None)      # made by the opening: gone again
    raw.pop("active", None)
    raw.pop("saved", None)


def edges(text: str, now: float) -> tuple[str, list[str]] | None:
    """The configuration ``text`` with every window opened or closed as instant ``now`` (seconds) calls
    for, and what changed (``"window x opened on root.a"``); None when nothing changes."""
    if "windows" not in text:
        return None             # the common case, every round of the timer: no window, no parse
    y = _yaml(text)
    data = y.load(text)
    ms = round(now * 1000)
    changed: list[str] = []
    for pm in (data.get("partitions") or []) if hasattr(data, "get") else []:
        raws = pm.get("windows")
        if not raws:
            continue
        for w, raw in zip(parse_windows(_plain(raws)), raws, strict=True):
            want = w.active_at(ms)
            if want == w.active:
                continue
            (_open if want else _close)(pm, raw, w)
            changed.append(f"window {w.name} {'opened' if want else 'closed'} on {w.scope} "
                           f"(partition {pm.get('name')})")
    if not changed:
        return None
    return _dump(y, data, text), changed


def _partition(data: Any, partition: str) -> Any:
    for pm in (data.get("partitions") or []) if hasattr(data, "get") else []:
        if str(pm.get("name", "")).lower() == partition.lower():
            return pm
    raise NotFoundError("Partition not found")


def _dump(y: YAML, data: Any, text: str) -> str:
    """``data`` as text again, with the blank lines that opened ``text`` (ruamel drops them)."""
    buf = io.StringIO()
    y.dump(data, buf)
    return text[:len(text) - len(text.lstrip("\n"))] + buf.getvalue()


def add_window(text: str, partition: str, window: Mapping[str, Any]) -> str:
    """The configuration ``text`` with ``window`` (a one-off override, a plain mapping) added to the
    partition's windows; the caller validates and applies it (a name in use: ConfigError)."""
    y = _yaml(text)
    data = y.load(text)
    pm = _partition(data, partition)
    if "active" in window or "saved" in window:
        raise ConfigError("active and saved are set by quotaplane at the window's edges, not by a request")
    raws = pm.get("windows")
    if raws is None:
        pm["windows"] = raws = []
    if any(str(r.get("name")) == str(window.get("name")) for r in raws):
        raise ConfigError(f"a window named {window.get('name')!r} exists in partition {partition!r}")
    # its settings on one line each ({vcore: 8}), as the windows of our examples and docs are written
    raws.append({k: _styled(v, _FLOW) for k, v in window.items()})
    return _dump(y, data, text)


def check_opened(text: str, partition: str, name: str) -> None:
    """Raise :class:`ConfigError` naming window ``name`` of ``partition`` when the configuration
    ``text`` with that window opened (alone, as its edge writes it) is invalid — a guarantee above the
    queue's max, an elastic quota's keys unlike its parent's …: refused when the window is added, not
    at its edge, where the change would fail at every tick and the window never open."""
    from quotaplane.config import load_config

    load_config(text)           # closed first: what it names must exist (that error comes first)
    y = _yaml(text)
    data = y.load(text)
    pm = _partition(data, partition)
    raws = pm.get("windows") or []
    for w, raw in zip(parse_windows(_plain(raws)), raws, strict=True):
        if w.name != name or w.active:
            continue
        _open(pm, raw, w)
        try:
            load_config(_dump(y, data, text))
        except ConfigError as exc:
            reason = exc.problems[0][1] if exc.problems else str(exc)
            raise ConfigError(f"windows[{w.index}] ({w.name}): the configuration with it open is invalid: "
                              f"{reason}") from None
        return


def opened_problems(text: str) -> list[str]:
    """Every window of the (valid) configuration ``text`` that would open to an invalid configuration,
    one :func:`check_opened` sentence each; ``[]`` when none (or no window)."""
    if "windows" not in text:
        return []               # no window: no parse
    try:
        data = _yaml(text).load(text)
    except Exception:           # not one YAML document (Kueue's objects): no window of its own
        return []
    out: list[str] = []
    for pm in (data.get("partitions") or []) if hasattr(data, "get") else []:
        for w in parse_windows(_plain(pm.get("windows") or [])):
            try:
                check_opened(text, str(pm.get("name", "default")), w.name)
            except ConfigError as exc:
                out.append(str(exc))
    return out


def remove_window(text: str, partition: str, name: str) -> str:
    """The configuration ``text`` without window ``name`` (closed first when it is open: the values
    it replaced are put back). NotFoundError when there is no such window."""
    y = _yaml(text)
    data = y.load(text)
    pm = _partition(data, partition)
    raws = pm.get("windows") or []
    specs = parse_windows(_plain(raws))
    for w, raw in zip(specs, raws, strict=True):
        if w.name == name:
            if w.active:
                _close(pm, raw, w)
            raws.remove(raw)
            if not raws:
                pm.pop("windows", None)
            return _dump(y, data, text)
    raise NotFoundError(f"no window {name!r} in partition {partition!r}")


def tick(config_text: str, update: Callable[[str], None], now: float) -> list[str]:
    """Open and close the windows due at ``now``: ``update(new_text)`` applies the change (the
    scheduler's ``update_config``: validated, journalled, all-or-nothing). What changed."""
    found = edges(config_text, now)
    if found is None:
        return []
    text, changed = found
    update(text)
    return changed


def window_states(partition_raw: Any, now: float) -> list[dict[str, Any]]:
    """Every window of one partition's plain configuration with its state at ``now``: whether it is
    open, whether it should be, its schedule and overrides (REST, CLI)."""
    ms = round(now * 1000)
    out: list[dict[str, Any]] = []
    for w in parse_windows(partition_raw):
        out.append({"name": w.name, "scope": w.scope, "kind": w.kind, "queue": w.queue or None,
                    "target": w.target or None, "timezone": w.timezone,
                    "schedule": {"from": w.start_ms / 1000, "to": w.end_ms / 1000} if w.cron is None
                    else {"cron": w.cron_text, "duration": w.duration_ms / 1000},
                    "overrides": dict(w.overrides), "active": w.active, "due": w.active_at(ms),
                    "saved": dict(w.saved)})
    return out
