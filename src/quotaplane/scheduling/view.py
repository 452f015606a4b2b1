"""What the schedulers see of a partition: a read-only view of its state, and the transaction they
apply their decisions through.

The waiting-ask scheduler (:mod:`quotaplane.scheduling.runner`), its cycles and the preemptors
(:mod:`quotaplane.scheduling.preemption`) plan on a :class:`StateView` — they read it and never change
it — and apply what they decide through a :class:`Transaction`: an allocation admitted, a placeholder
replaced, allocations preempted, a commit point. Both are protocols declared here, where they are used,
so that nothing in this package imports the state or the partition that implement them
(:class:`~quotaplane.state.handlers.PartitionState`, :class:`~quotaplane.partition.txn.Txn`): the
state and the partition sit above the schedulers, as Kueue's cache and scheduler sit above its
preemptor, which plans on a snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.admission import AllocationSpec, PolicySet
    from quotaplane.application import Allocation, Application
    from quotaplane.config.model import PartitionConfig
    from quotaplane.events import Event
    from quotaplane.flavors.catalog import Catalog
    from quotaplane.policies.protocol import AdmissionRequest, Decision
    from quotaplane.queues import QueueTree
    from quotaplane.resources import Resource
    from quotaplane.scheduling.asks import Ask
    from quotaplane.scheduling.order import Rank
    from quotaplane.scheduling.reservations import Reservations
    from quotaplane.scheduling.waiting import Waiting
    from quotaplane.ugm import Manager

__all__ = ["Ranking", "StateView", "Transaction"]


class Ranking(Protocol):
    """The usage history's part in the order (fair share with memory, docs/history.md)."""

    def rank(self) -> Rank | None:
        """The first key of this cycle's order, None when fair share with memory is off."""
        ...


class StateView(Protocol):
    """A partition's state as the schedulers read it. They never change it, but for the notes of its
    waiting work (:class:`~quotaplane.scheduling.waiting.Waiting`), which they consume; the questions
    they ask of it are :mod:`quotaplane.scheduling.questions`."""

    @property
    def config(self) -> PartitionConfig: ...

    @property
    def history(self) -> Ranking: ...

    @property
    def queues(self) -> QueueTree: ...

    @property
    def policies(self) -> PolicySet: ...

    @property
    def ugm(self) -> Manager: ...

    @property
    def reservations(self) -> Reservations: ...

    @property
    def flavors(self) -> Catalog | None:
        """The partition's resource flavors (None: none declared)."""
        ...

    @property
    def apps(self) -> Mapping[str, Application]: ...

    @property
    def allocs(self) -> Mapping[str, Allocation]: ...

    @property
    def waiting(self) -> Waiting: ...

    @property
    def hold_preempted(self) -> bool:
        """Preempted allocations stay charged until released (issue 31 #3)."""
        ...

    @property
    def preempting(self) -> Mapping[str, Mapping[str, object]]:
        """The allocations preempted and held, by key."""
        ...

    @property
    def spared(self) -> AbstractSet[str]:
        """The allocations whose held preemption was given up: never chosen as victims again."""
        ...

    def request(self, app: Application, key: str, resource: Resource, priority: int = 0,
                preemptible: bool = True, first: bool = False, t: float = 0.0) -> AdmissionRequest:
        """The admission request of an allocation of ``app``."""
        ...

    def clock(self) -> float:
        """The partition's clock now."""
        ...


class Transaction(Protocol):
    """One write of a partition, as the schedulers use it (``with partition.write() as tx``)."""

    @property
    def state(self) -> StateView: ...

    @property
    def head(self) -> int:
        """The journal position of the last change recorded (a version stamp of memory)."""
        ...

    @property
    def uncommitted(self) -> int:
        """How many events were applied since the last commit point."""
        ...

    def clock(self) -> float:
        """The partition's clock now."""
        ...

    def admit(self, spec: AllocationSpec, ask: Ask | None = None) -> Decision:
        """Admit ``spec`` through every policy and apply it (journalled at the next commit point), or
        refuse it changing nothing (``ask``: the waiting ask it is)."""
        ...

    def replace(self, placeholder_key: str, allocation_key: str, resource: Resource) -> Decision:
        """Replace a gang placeholder by the real allocation (committed at once)."""
        ...

    def hold(self, keys: Sequence[str], reason: dict[str, str], preemptor: str | None) -> list[str]:
        """Mark ``keys`` preempted without releasing them (held preemption, issue 31 #3); the keys marked."""
        ...

    def apply(self, event: Event) -> None:
        """Apply ``event`` through its state handler (journalled at the next commit point)."""
        ...

    def commit(self) -> None:
        """A commit point: journal what was applied so far; it is not undone by a later failure."""
        ...

    def rollback(self) -> None:
        """Undo what was applied since the last commit point (exactly, or by rebuilding the partition
        from its journal when it cannot be undone step by step); :attr:`state` is then the state in
        force."""
        ...
