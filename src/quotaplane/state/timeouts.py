"""Timeouts of a partition's applications, and the elastic reclaim tick (seed 001, seed 002).

- placeholders unreplaced for their ``placeholder_timeout``: released; with real allocations the
  application continues; without, gang style ``soft`` → Resuming (still counted), style ``hard`` →
  Failing → Failed (its running count ends);
- Completing for ``completing_timeout`` → Completed; Starting for ``starting_timeout`` → Running;
- Completed / Failed for ``terminated_timeout`` → Expired and removed;
- reclaim (decision E5): every over-use monitor ticks (:func:`reclaim_tick`); what it names is
  released by the partition as a ``preempted`` event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from quotaplane.application import (
    COMPLETED,
    COMPLETING,
    COMPLETING_TIMEOUT,
    FAILED,
    FAILED_OUT,
    GANG_HARD,
    GANG_HARD_TIMEOUT,
    GANG_SOFT_TIMEOUT,
    STARTING,
    STARTING_TIMEOUT,
    TERMINATED_TIMEOUT,
    Application,
)
from quotaplane.policy import Eviction, QuotaPolicy

__all__ = ["PartitionOptions", "TimeoutActions", "apply_timeouts", "reclaim_tick", "timeouts_due"]


@dataclass(frozen=True, slots=True)
class PartitionOptions:
    """Timeouts (seconds) and the snapshot interval of a partition (YuniKorn's defaults)."""

    #: unreplaced gang placeholders time out (YuniKorn ``placeholderTimeoutInSeconds``)
    placeholder_timeout: float = 900.0
    #: Completing → Completed (YuniKorn ``completingTimeout``)
    completing_timeout: float = 30.0
    #: Starting without a second allocation → Running
    starting_timeout: float = 300.0
    #: Completed / Failed applications are kept this long before they expire (YuniKorn: 3 days)
    terminated_timeout: float = 3 * 86400.0
    #: take a snapshot of the partition after this many events (bounded restart time); 0: never
    snapshot_every: int = 50_000


@dataclass(frozen=True, slots=True)
class TimeoutActions:
    """What the timeouts may do to the partition."""

    release: Callable[..., None]            # release(key, t, *, terminal, keep_counted)
    leave: Callable[[Application], None]    # the application leaves the running count
    drop: Callable[[Application], None]     # the application is removed
    allocated: Callable[[str], bool]        # the allocation still exists


def _placeholders_due(app: Application, t: float) -> bool:
    return app.placeholder_since is not None and t - app.placeholder_since >= app.placeholder_timeout


def _state_due(app: Application, t: float, options: PartitionOptions) -> str | None:
    """The lifecycle timeout trigger due for ``app`` at ``t``, or None."""
    age = t - app.state_since
    if app.state == COMPLETING and age >= options.completing_timeout:
        return COMPLETING_TIMEOUT
    if app.state == STARTING and age >= options.starting_timeout:
        return STARTING_TIMEOUT
    if app.state in (COMPLETED, FAILED) and age >= options.terminated_timeout:
        return TERMINATED_TIMEOUT
    return None


def timeouts_due(apps: Iterable[Application], t: float, options: PartitionOptions) -> bool:
    """True when some application has a timeout due at ``t``."""
    return any(_placeholders_due(app, t) or _state_due(app, t, options) is not None for app in apps)


def _gang_timeout(app: Application, t: float, act: TimeoutActions) -> list[str]:
    aid = app.application_id
    phs = [k for k, a in app.allocations.items() if a.placeholder]
    real = app.has_real_allocations()
    hard = not real and app.gang_style == GANG_HARD
    if hard:
        app.move(GANG_HARD_TIMEOUT, t)
    for k in phs:
        act.release(k, t, terminal=True, keep_counted=not hard)
    out = [f"{aid}: {len(phs)} placeholder(s) timed out"]
    if hard:
        if app.counted:
            act.leave(app)
        app.move(FAILED_OUT, t)
        out.append(f"{aid}: Failed (gang style hard)")
    elif not real:
        app.move(GANG_SOFT_TIMEOUT, t)
        out.append(f"{aid}: Resuming (gang style soft)")
    return out


def apply_timeouts(apps: Iterable[Application], t: float, options: PartitionOptions, act: TimeoutActions
                   ) -> list[str]:
    """Apply every timeout due at ``t``; return what happened, in order."""
    out: list[str] = []
    expired: list[Application] = []
    for app in list(apps):
        if _placeholders_due(app, t):
            out.extend(_gang_timeout(app, t, act))
            continue
        trigger = _state_due(app, t, options)
        if trigger == TERMINATED_TIMEOUT:
            expired.append(app)
        elif trigger is not None:
            app.move(trigger, t)
            out.append(f"{app.application_id}: {app.state}")
    for app in expired:
        app.move(TERMINATED_TIMEOUT, t)
        act.drop(app)
        out.append(f"{app.application_id}: Expired")
    return out


def reclaim_tick(reclaiming: Iterable[QuotaPolicy], t: float) -> list[Eviction]:
    """One tick of every over-use monitor (E5) at ``t``: what each takes back now. The over-use clock
    lives in the policy, so every tick is part of the journalled ``timeouts`` event; the releases are
    journalled as ``preempted`` events of their own (decided once, PR-S3)."""
    return [found for policy in reclaiming for found in policy.revoke(t)]
