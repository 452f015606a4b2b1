"""The follow-up scheduling a write asks for when it gave quota back. Its own module, below the write
modules (allocations, config) that ask for it, so that neither imports the other for it (no import
circle, issue 29).

A change whose freed quota the wake keys tell hands the scheduler's own ``freed`` to
:meth:`~quotaplane.partition.txn.Txn.after` (``tx.after(tx.core.scheduler.freed)``): no function of
this module between the two, one call less on every release with asks waiting (issue 29)."""

from __future__ import annotations

from quotaplane.partition.txn import Txn

__all__ = ["freed_all"]


def freed_all(tx: Txn) -> None:
    """The follow-up of a change no wake key tells (a node, a config): every waiting ask is retried."""
    tx.core.scheduler.freed(tx, full=True)
