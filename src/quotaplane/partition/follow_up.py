"""The follow-up scheduling a write asks for when it gave quota back. Its own module, below the write
modules (allocations, asks, nodes, applications, config) that all ask for it, so that none of them
imports another for it (no import circle, issue 29)."""

from __future__ import annotations

from quotaplane.partition.txn import Txn

__all__ = ["freed", "freed_all"]


def freed(tx: Txn) -> None:
    """The follow-up of a change that gave quota back: the waiting asks it may unblock get a cycle."""
    tx.core.scheduler.freed(tx)


def freed_all(tx: Txn) -> None:
    """The follow-up of a change no wake key tells (a node, a config): every waiting ask is retried."""
    tx.core.scheduler.freed(tx, full=True)
