"""A partition's configuration: refuse one its policies' live state cannot take, apply one in one step,
and journal the marker that says from which point it is in force (the scheduler journals the
configuration itself first: :meth:`~quotaplane.cluster.Scheduler.update_config`)."""

from __future__ import annotations

import quotaplane.events as E
from quotaplane.config.model import PartitionConfig
from quotaplane.errors import NotLeaderError
from quotaplane.partition.follow_up import freed_all
from quotaplane.partition.txn import Txn
from quotaplane.state.handlers import PartitionState

__all__ = ["apply_config", "record_config", "validate_update"]


def validate_update(state: PartitionState, config: PartitionConfig) -> None:
    """Refuse (``ValueError``), before it is journalled, a config a policy's live state cannot take."""
    for policy in state.policies.all:
        policy.validate_update(config)


def apply_config(tx: Txn, config: PartitionConfig, seq: int, t: float | None) -> None:
    """Adopt config ``seq`` in memory (its marker is journalled by :func:`record_config`); what a policy
    let go because of it is released at ``t`` (default: now)."""
    tx.state.apply_config(config, seq, t=t)


def record_config(tx: Txn, seq: int, follower_ok: bool) -> None:
    """Journal that config ``seq`` is in force now; then every waiting ask is retried. ``follower_ok``:
    an instance that does not hold the lease keeps the config in memory without the marker."""
    state = tx.state
    # t: when its releases happened (now when it released nothing)
    marker = E.ConfigApplied(seq=seq, t=state.config_t if state.config_t is not None else tx.clock())
    state.config_t = None
    tx.record(marker, keep=follower_ok)
    try:
        tx.commit()
    except NotLeaderError:
        if not follower_ok:
            raise
        return                      # a follower schedules nothing
    tx.after(freed_all)             # any limit, order or placement may have changed
