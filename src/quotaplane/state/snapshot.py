"""A partition's snapshot state, taken at one instant and written later (issue 18: snapshots stay off
the event loop), and the check a restore makes against it.

A snapshot holds the partition's state at one sequence number: ``rebuild``, the events that rebuild
it (:mod:`quotaplane.state.rebuild`), ``dump_json``, the full state a restore checks the rebuilt
partition against, and ``config_seq``. With 50,000 live allocations, building those as plain data took a
fifth of a second, all on the caller's thread — under group commit, the service's event loop, which
decided nothing meanwhile.

:class:`SnapshotState` is taken in a few milliseconds: the small parts as plain data now, the live
allocations as references with their node (the one field that changes after admission). The
allocation listing and events — the bulk — are made when the state is read (encoded by the journal),
which a service does on a worker thread. Reading it later gives exactly what reading it at once
would have given: nothing it holds changes afterwards.

The dump is stored once and apart from what the rebuild holds (issue 38: a restart of 500,000
waiting asks). ``dump_json`` is the dump without its waiting asks as canonical JSON text — a restore
reads it as one string, not as millions of objects, and compares the rebuilt partition's text with
it — and the dump's asks are the rebuild's ``ask_added`` events (they are the same JSON, in the same
order). Snapshots written before hold the whole dump as data under ``dump``; they are still read
(:mod:`quotaplane.state.restore_check`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from quotaplane.journal.base import canonical_json_pieces
from quotaplane.state.rebuild import AllocationAt, RebuildCapture

__all__ = ["SnapshotState"]


class SnapshotState(Mapping[str, Any]):
    """The snapshot state ``{"config_seq", "dump_json", "rebuild"}`` of a partition at one instant,
    made into plain data on first read (see the module docstring); with ``"history"``, the usage
    accounting's state (:mod:`quotaplane.history`, plain data already), when it has one."""

    __slots__ = ("_allocations", "_config_seq", "_dump", "_history", "_plain", "_rebuild")

    def __init__(self, config_seq: int, dump: Mapping[str, Any], allocations: Sequence[AllocationAt],
                 rebuild: RebuildCapture, history: Mapping[str, Any] | None = None) -> None:
        self._config_seq = config_seq
        self._dump = dump          # everything but the allocations and the asks, plain data already
        self._allocations = allocations
        self._rebuild = rebuild
        self._history = history
        self._plain: dict[str, Any] | None = None

    def _data(self) -> dict[str, Any]:
        if self._plain is None:
            listing = {a.allocation_key: a.plain(node) for a, node in self._allocations}
            # piece by piece: this runs on a snapshot's worker thread, and one call of the encoder
            # would hold the interpreter lock for its whole length (issue 18)
            text = canonical_json_pieces({**self._dump, "allocations": listing})
            self._plain = {"config_seq": self._config_seq, "dump_json": text,
                           "rebuild": [ev.to_json() for ev in self._rebuild.events()]}
            if self._history is not None:
                self._plain["history"] = self._history
        return self._plain

    def __getitem__(self, key: str) -> Any:
        return self._data()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data())

    def __len__(self) -> int:
        return 3 if self._history is None else 4
