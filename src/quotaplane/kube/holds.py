"""Held preemptions rebuilt from the pods after a restart of the front (issue 31).

A preemption the front carries out is held by the partition (its victims stay charged until their
pods are gone), but held marks are memory, not journalled state. They are rebuilt deterministically from
what the cluster shows, not journalled, because the cluster is where the decision became irreversible:
the front writes the victim's ``QuotaAdmitted=False`` condition with reason ``Preempted`` (and the
engine's reason in its message) *before* it asks the Eviction API, so every victim whose eviction may
have started says so on the pod, with the time it was decided (``lastTransitionTime``). A decision the
front had not yet written anywhere touched nothing and may be taken again. A preemption given up says
so too: ``QuotaAdmitted=True`` with reason ``PreemptionAbandoned`` — that victim is never chosen again.
Journalling the marks instead would add state to the journal and the snapshots, and could still
disagree with the cluster (a mark decided but never written, or a pod changed while the front was away).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from quotaplane.kube.objects import mapping

__all__ = ["ABANDONED", "CONDITION_ADMITTED", "PREEMPTED", "Rebuilt", "preemption_message", "rebuild"]

#: the pod condition quotaplane writes
CONDITION_ADMITTED = "QuotaAdmitted"

#: the ``QuotaAdmitted=False`` reason of a victim being evicted
PREEMPTED = "Preempted"
#: the ``QuotaAdmitted=True`` reason of a pod whose preemption was given up
ABANDONED = "PreemptionAbandoned"

_MESSAGE = re.compile(r"preempted by quotaplane: (?P<code>\S*) at (?P<path>\S*): (?P<message>.*)", re.S)


def preemption_message(reason: Mapping[str, Any]) -> str:
    """The victim's condition message for the engine's ``reason`` (read back by :func:`rebuild`)."""
    return (f"preempted by quotaplane: {reason.get('code', '')} at {reason.get('path', '')}: "
            f"{reason.get('message', '')}").strip()


def _reason(message: str) -> dict[str, str]:
    """The engine's reason from a condition message (:func:`preemption_message`)."""
    m = _MESSAGE.fullmatch(message)
    if m is None:
        return {"policy": "", "code": "", "path": "", "message": message}
    code = m["code"]
    return {"policy": code.split(".", 1)[0], "code": code, "path": m["path"], "message": m["message"]}


def _since(stamp: str, now: float, monotonic: float) -> float:
    """The monotonic time of an RFC 3339 ``stamp`` (now when unreadable or in the future)."""
    try:
        at = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return monotonic
    return monotonic - max(0.0, now - at)


class Rebuilt:
    """What the pods say of preemptions: held victims (key → engine reason, monotonic time decided)
    and victims whose preemption was given up."""

    __slots__ = ("held", "spared")

    def __init__(self) -> None:
        self.held: dict[str, tuple[dict[str, str], float]] = {}
        self.spared: list[str] = []


def rebuild(pods: Iterable[tuple[str, Mapping[str, Any]]]) -> Rebuilt:
    """Read the preemptions from ``(allocation key, pod)`` pairs by their ``QuotaAdmitted`` condition."""
    out = Rebuilt()
    now, monotonic = time.time(), time.monotonic()
    for key, pod in pods:
        for c in mapping(pod.get("status")).get("conditions") or []:
            c = mapping(c)
            if c.get("type") != CONDITION_ADMITTED:
                continue
            status, reason = c.get("status"), c.get("reason")
            if (status, reason) == ("False", PREEMPTED):
                out.held[key] = (_reason(str(c.get("message") or "")),
                                 _since(str(c.get("lastTransitionTime") or ""), now, monotonic))
            elif (status, reason) == ("True", ABANDONED):
                out.spared.append(key)
    return out
