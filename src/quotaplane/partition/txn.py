"""The one write path of a partition: ``with partition.write() as tx:`` (issue 29).

Every change of a partition — an allocation, a release, an ask, a node, an application, a
configuration, a timeout, a preemption, a cycle of the waiting-ask scheduler — is one :class:`Txn`:

1. **begin**: take the partition's lock; when a store failure left memory ahead of the journal, rebuild
   the partition from its journal first (or refuse: the store cannot be read yet);
2. **apply**: each change is a typed event (:mod:`quotaplane.events`) applied through its state handler
   (:meth:`Txn.apply`; an allocation through the admission of every policy, :meth:`Txn.admit`). The
   transaction keeps, for each, the step that takes it back (:func:`~quotaplane.state.undo.undo_of`);
3. **commit**: the hooks registered with :meth:`WriteHooks.before_commit` see the events and may refuse
   them (a budget charge); the events, followed by the notes of what they changed
   (:meth:`~quotaplane.state.handlers.PartitionState.take_notes`), are journalled in one transaction
   (rule S1). Only then does the call answer. A long write commits at several points
   (:meth:`Txn.commit`; a cycle every thousand allocations);
4. **on failure** — of a handler, a hook or the journal — what was applied since the last commit point
   is taken back exactly, newest first; a change that cannot be taken back step by step (a release, a
   removal, a preemption) is taken back by rebuilding the partition from its journal (issue 14 #2).
   Either way nothing refused is visible;
5. **after commit**: the follow-up scheduling the write asked for (:meth:`Txn.after`) runs, in the same
   transaction, with its own commit points; its failure never makes the write look failed. The
   observers registered with :meth:`WriteHooks.after_commit` hear of the events once they are durable
   (with group commit, after the group's commit), in commit order, each event with the time it happened.

A step that must join every write — charging a budget, choosing a flavor, keeping usage history — is
added here, once: a hook before the commit, an observer after it.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import quotaplane.events as E
from quotaplane.admission import AllocationSpec, admit
from quotaplane.errors import ConflictError, NotFoundError
from quotaplane.partition import gcfreeze
from quotaplane.policies.protocol import AdmissionRequest, Decision
from quotaplane.resources import Resource
from quotaplane.scheduling import flavoring
from quotaplane.state.marks import AllocationUndo, AppMark
from quotaplane.state.undo import Undo, undo_of

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Application
    from quotaplane.flavors.assign import Attempt
    from quotaplane.journal.group_commit import GroupCommit
    from quotaplane.journal.log import PartitionLog
    from quotaplane.notices import Notifier
    from quotaplane.scheduling.asks import Ask
    from quotaplane.scheduling.runner import PendingAsks
    from quotaplane.state.handlers import PartitionState

__all__ = ["AfterCommit", "BeforeCommit", "Core", "Txn", "WriteHooks"]

#: ``hook(tx, events)``: the events about to be committed; raise to refuse them (the write is undone)
BeforeCommit = Callable[["Txn", Sequence[E.Event]], None]
#: ``observer(events, seq)``: the events of one commit once durable; ``seq`` is the last one's number
AfterCommit = Callable[[Sequence[E.Event], int], None]
#: a follow-up that runs after the commit, in the same transaction (the scheduler's cycles)
FollowUp = Callable[["Txn"], None]


class WriteHooks:
    """What plugs into every write of one partition: hooks before the commit, observers after it
    (``observers``: the list the partition's notifier tells once a commit is durable)."""

    __slots__ = ("_after", "_before")

    def __init__(self, observers: list[AfterCommit]) -> None:
        self._before: list[BeforeCommit] = []
        self._after = observers

    def before_commit(self, hook: BeforeCommit) -> Callable[[], None]:
        """Call ``hook(tx, events)`` before each commit of a write, under the partition lock; an
        exception refuses the events (the write is undone and the caller gets the exception). Returns
        a function that removes the hook."""
        self._before.append(hook)
        return functools.partial(_remove, self._before, hook)

    def after_commit(self, observer: AfterCommit) -> Callable[[], None]:
        """Call ``observer(events, seq)`` with the events of every commit once they are durable, in
        commit order, under the partition lock (it must be quick; one that raises is removed).
        Returns a function that removes the observer."""
        self._after.append(observer)
        return functools.partial(_remove, self._after, observer)

    def check(self, tx: Txn, events: Sequence[E.Event]) -> None:
        """Run the hooks before a commit (an exception refuses the events)."""
        for hook in tuple(self._before):
            hook(tx, events)


def _remove(hooks: list[BeforeCommit] | list[AfterCommit], hook: object) -> None:
    if hook in hooks:
        hooks.remove(hook)         # type: ignore[arg-type]


class Core:
    """The parts of one partition that its writes share: the lock, the state in force, the journal
    stream, the clock, the hooks, the subscribers and the waiting-ask scheduler.

    ``rebuild`` makes a new core from the journal alone (set by the partition from its scheduler's
    restorer; None: this partition cannot be rebuilt)."""

    __slots__ = ("clock", "group", "hooks", "lock", "log", "name", "notifier", "rebuild", "scheduler",
                 "state")

    def __init__(self, name: str, state: PartitionState, log: PartitionLog, clock: Callable[[], float],
                 scheduler: PendingAsks, notifier: Notifier) -> None:
        self.name = name
        self.lock = threading.RLock()
        self.state = state
        self.log = log
        self.clock = clock
        self.scheduler = scheduler
        self.notifier = notifier
        self.hooks = WriteHooks(notifier.observers)
        #: the group committer (issue 18; the log's), or None: each write is journalled before it returns
        self.group: GroupCommit | None = None
        self.rebuild: Callable[[], Core | None] | None = None
        log.on_recorded = notifier.recorded

    def usable(self) -> None:
        """Rebuild from the journal when a failure left memory ahead of it; refuse while it cannot be."""
        if self.log.poisoned is not None and not self.recover():
            self.log.usable(self.name)

    def recover(self) -> bool:
        """Rebuild the state from the journal after a failure left memory ahead of it (issue 14 #2);
        True when the state is consistent with the journal (also when nothing was to be done).

        The rebuilt state replaces the old one in place: subscribers, observers, the journal and the
        scheduler's switches stay. When the store cannot be read yet nothing changes and False is
        returned; the next write (or :meth:`recover`) tries again."""
        with self.lock:
            log = self.log
            if log.poisoned is None:
                return True
            if self.rebuild is None:
                return False
            try:
                fresh = self.rebuild()
            except Exception:       # the store cannot be read yet: stay stopped, try again later
                return False
            if fresh is None:
                return False
            hold, held, spared = self.state.hold_preempted, self.state.preempting, self.state.spared
            self.state = fresh.state
            self.state.hold_preempted = hold            # the front's setting, not the journal's
            # held preemptions are memory too: the front is removing those victims (issue 31)
            self.state.preempting.update((k, v) for k, v in held.items() if k in self.state.allocs)
            self.state.spared.update(k for k in spared if k in self.state.allocs)
            self.state.waiting.asks.dirty = True        # the timer's next cycle looks at every ask
            log.last_seq = fresh.log.last_seq
            log.snapshot_seq = fresh.log.snapshot_seq
            log.poisoned = None
            log.wrote = False
            if log.group is not None:
                log.group.resume()
            gcfreeze.settle_later(replaced=True)   # a serving process: the old state goes, the new stays
            return True


#: the key of a (policy, key) pair that a preemption names
_second = operator.itemgetter(1)


def _check_new(state: PartitionState, spec: AllocationSpec) -> None:
    """An allocation key that exists: ConflictError (nothing counted twice); a node not registered:
    NotFoundError — before any policy is asked."""
    if spec.allocation_key in state.allocs:
        raise ConflictError(f"allocation {spec.allocation_key!r} already exists in partition {state.name!r}")
    if spec.node is not None and spec.node not in state.nodes:
        raise NotFoundError(f"node {spec.node!r} not found in partition {state.name!r}")


def _flavored(state: PartitionState, app: Application, spec: AllocationSpec, ask: Ask | None, t: float
              ) -> Decision | tuple[Resource, dict[str, str] | None, tuple[Attempt, ...]]:
    """With resource flavors, the request's flavors (docs/flavors.md): the resource and flavors it is
    charged under and the attempts made, or the refusal when no flavor fits."""
    choice = flavoring.choose_for(state, app, spec, ask, t)
    if choice is None:
        return spec.resource, spec.flavors, ()
    if choice.mode != flavoring.FIT:
        return flavoring.refusal(choice, app, spec.allocation_key)
    return choice.resource, choice.flavors, choice.attempts


class Txn:
    """One write of a partition (see the module docstring): a context manager from
    ``partition.write()``; the partition's operations take it (:mod:`quotaplane.partition`).

    ``state`` is the state in force (after a rebuild, the rebuilt one); ``clock()`` the partition's
    clock. ``check_store=False``: do not rebuild or refuse at the start (the configuration path, which
    applies a configuration to a partition whatever its store's health)."""

    __slots__ = ("_applied", "_broken", "_configured", "_follow", "_held", "_irreversible", "_then",
                 "_undos", "check_store", "clock", "core", "state")

    def __init__(self, core: Core, *, check_store: bool = True) -> None:
        self.core = core
        self.state = core.state
        self.clock = core.clock
        self.check_store = check_store
        self._applied: list[E.Event] = []
        self._undos: list[Undo] = []
        #: an event applied since the last commit point cannot be taken back step by step
        self._irreversible = False
        #: a handler failed half way: only a rebuild from the journal restores the state
        self._broken = False
        #: the first follow-up asked for (:meth:`after`) and the others, in order (a list made only
        #: for a second one): a release asks for one, which then costs no list (issue 29)
        self._follow: FollowUp | None = None
        self._then: list[FollowUp] | None = None
        #: allocations held since the last commit point (a rebuild forgets them: never heard of)
        self._held: list[str] = []
        #: a configuration marker is to be journalled (:meth:`record`): it may switch the history on
        self._configured = False

    # -- begin and end ------------------------------------------------------------------------------
    def __enter__(self) -> Txn:
        core = self.core
        core.lock.acquire()
        if self.check_store and core.log.poisoned is not None:
            try:
                core.usable()
            except BaseException:
                core.lock.release()
                raise
        self.state = core.state
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        try:
            if exc is not None:
                self.rollback()
                return
            if self._applied:
                self.commit()
            follow = self._follow
            if follow is not None:
                try:
                    follow(self)
                    then = self._then
                    if then is not None:
                        # a list iterator sees what is appended while it runs: a follow-up asking
                        # for another (Txn.after) gets it run in turn
                        for follow_up in then:
                            follow_up(self)
                    if self._applied or self.state.notes:      # what the follow-ups changed
                        self.commit()
                except BaseException:
                    self.rollback()
                    raise
        finally:
            self.core.lock.release()

    # -- what the schedulers read --------------------------------------------------------------------
    @property
    def head(self) -> int:
        """The journal position of the last change recorded (queued for a group commit included)."""
        return self.core.log.head

    @property
    def uncommitted(self) -> int:
        """How many events were applied since the last commit point."""
        return len(self._applied)

    @property
    def events(self) -> list[E.Event]:
        """The events applied since the last commit point, in order (a copy)."""
        return list(self._applied)

    # -- applying -------------------------------------------------------------------------------------
    def apply(self, event: E.Event) -> None:
        """Apply ``event`` through its state handler; it is journalled at the next commit point and
        taken back if the write fails before."""
        state = self.state
        undo = undo_of(state, event)
        try:
            state.apply(event)
        except BaseException:
            self._broken = True
            raise
        self._applied.append(event)
        if undo is None:
            self._irreversible = True
        else:
            self._undos.append(undo)

    def admit(self, spec: AllocationSpec, ask: Ask | None = None) -> Decision:
        """Admit ``spec`` through every policy (Q2) and apply it as an ``allocated`` event, or refuse
        it changing nothing. Unknown or inactive application, unknown node: NotFoundError or
        ConflictError; an allocation key that exists: ConflictError (nothing counted twice).

        With resource flavors the request's flavors are chosen first (docs/flavors.md; ``ask``: the
        waiting ask it is, whose preemption the search may plan), and it is charged under them."""
        state = self.state
        app = state.active_app(spec.application_id)
        key = spec.allocation_key
        _check_new(state, spec)
        t = self.clock()
        resource, flavors = spec.resource, spec.flavors
        attempts: tuple[Attempt, ...] = ()
        if state.flavors is not None and flavors is None:
            chosen = _flavored(state, app, spec, ask, t)
            if isinstance(chosen, Decision):
                return chosen
            resource, flavors, attempts = chosen
        req = AdmissionRequest(spec.application_id, key, app.queue_path, app.user, resource, spec.priority,
                               spec.preemptible, not app.counted, app.tags, t, spec.max_runtime)
        try:
            refused, preempted = admit(state.policies, req)
            if refused:
                return Decision(False, refused, queue=app.queue_path, allocation_key=key,
                                flavor_attempts=attempts)
            # the policies counted it; the application's lifecycle moves below
            before = AppMark(app.state, app.state_since, app.counted, app.anchor_seq, app.placeholder_since,
                             app.log_mark(), app.max_used)
            taken = tuple(map(_second, preempted))      # the keys, with no call when none
            ev = E.Allocated(app=spec.application_id, key=key, resource=resource, priority=spec.priority,
                             preemptible=spec.preemptible, placeholder=spec.placeholder,
                             task_group=spec.task_group, t=t,
                             preempted=taken, node=spec.node,
                             tags=spec.tags, flavors=flavors or None, max_runtime=spec.max_runtime)
            undo = AllocationUndo(req, before, state.waiting.asks.get(key))
            state.after_allocated(app, ev, preempted)
        except BaseException:
            self._broken = True
            raise
        self._applied.append(ev)
        self._undos.append(functools.partial(state.undo_allocated, ev, undo))
        if ev.preempted:            # a policy released others for it: only a rebuild gives them back
            self._irreversible = True
        return Decision(True, [], list(taken), queue=app.queue_path, allocation_key=key,
                        flavors=flavors or {}, flavor_attempts=attempts)

    def replace(self, placeholder_key: str, allocation_key: str, resource: Resource) -> Decision:
        """Replace gang placeholder ``placeholder_key`` by the real allocation (seed 001,
        YUNIKORN-982), committed at once; a refusal changes nothing (:mod:`quotaplane.state.gang`)."""
        state = self.state
        ph = state.allocs.get(placeholder_key)
        if ph is None:
            raise NotFoundError(f"allocation {placeholder_key!r} not found in partition {state.name!r}")
        if not ph.placeholder:
            raise ConflictError(f"allocation {placeholder_key!r} is not a placeholder")
        if allocation_key in state.allocs:
            raise ConflictError(f"allocation {allocation_key!r} already exists in partition {state.name!r}")
        app = state.active_app(ph.application_id)
        if ph.flavors and state.flavors is not None:
            # the real allocation takes the flavors its placeholder held (docs/flavors.md)
            resource = flavoring.pinned(state.flavors, AllocationSpec("", "", resource), ph.flavors).resource
        ev = E.Replaced(placeholder=placeholder_key, key=allocation_key, resource=resource, t=self.clock())
        try:
            replacement = state.replacement(ev)
            refused = replacement.check()
            if refused:
                return Decision(False, refused, queue=app.queue_path, allocation_key=allocation_key)
            preempted = state.apply_replacement(ev, replacement)
        except BaseException:
            self._broken = True
            raise
        self._applied.append(ev)
        self._irreversible = True
        self.commit()
        return Decision(True, [], preempted, queue=app.queue_path, allocation_key=allocation_key)

    def record(self, event: E.Event, *, keep: bool = False) -> None:
        """Journal ``event`` at the next commit point: it tells of a change already made in memory (a
        configuration the scheduler applied, :meth:`~quotaplane.state.handlers.PartitionState.apply_config`),
        which cannot be taken back step by step — unless ``keep``: then a failed commit leaves the change
        in memory (a follower keeps a configuration whose marker its leader writes)."""
        self._applied.append(event)
        if type(event) is E.ConfigApplied:
            self._configured = True
        if not keep:
            self._irreversible = True

    def hold(self, keys: Sequence[str], reason: dict[str, str], preemptor: str | None,
             t: float | None = None) -> list[str]:
        """Held preemption (issue 31 #3): mark ``keys`` preempted without releasing them (they stay
        charged until released); the decision is journalled as a note at the next commit point. A
        failed commit rebuilds the partition (the marks live in memory only). The keys marked."""
        held = self.state.hold(keys, reason, preemptor, self.clock() if t is None else t)
        if held:
            self._irreversible = True
            self._held.extend(held)
        return held

    def after(self, follow_up: FollowUp) -> None:
        """Run ``follow_up(tx)`` after the write commits (the scheduling a change calls for). The
        follow-ups run in the order they were asked for; one asked for by a running follow-up runs
        after those already asked for."""
        if self._follow is None:
            self._follow = follow_up
        elif self._then is None:
            self._then = [follow_up]
        else:
            self._then.append(follow_up)

    # -- commit points ------------------------------------------------------------------------------
    def commit(self) -> None:
        """Journal what was applied since the last commit point, in one transaction, followed by the
        notes of what it changed; on a failure take it back (see the module docstring) and raise."""
        events = self._applied
        if not events and not self.state.notes:
            return
        if self.core.hooks._before:
            self._check_hooks(events)
        state = self.state
        notes = state.take_notes(self.clock()) if state.moved or state.notes else None
        self._journal([*events, *notes] if notes else events)
        if notes:
            state.notes_recorded(notes)

    def _journal(self, batch: list[E.Event]) -> None:
        """Write ``batch`` in one transaction and start the next commit point (on a failure take the
        write back and raise)."""
        # the usage accounting (issue 33) sees the batch; switched off, it is told only of a
        # configuration, which may switch it on (no call at every commit: benchmarks/calls.py)
        history = self.state.history
        told = history.engine is not None or self._configured
        reversible = not (self._irreversible or self._broken)
        if told:
            history.journalling(batch)
        try:
            self.core.log.record(batch, recoverable=reversible)
        except BaseException as exc:
            self._not_recorded(exc, batch, told, reversible)
            raise
        if told:
            history.journalled(batch, written=True, configured=self._configured)
        self._applied = []
        self._undos = []
        self._irreversible = False
        self._configured = False

    def _check_hooks(self, events: list[E.Event]) -> None:
        """The hooks that see a batch before it is journalled (a refusal takes the write back)."""
        try:
            self.core.hooks.check(self, events)
        except BaseException as exc:
            self._take_back(exc)
            raise

    def _not_recorded(self, exc: BaseException, batch: list[E.Event], told: bool, reversible: bool) -> None:
        """The journal did not take ``batch``: the history forgets it and memory goes back to the
        journal (step by step when it can, else by a rebuild)."""
        if told:
            self.state.history.journalled(batch, written=False)
        if reversible:
            self._undo()
            # a failed group commit poisoned the partition: its own change is undone exactly, the
            # others of the group are rebuilt from the journal on the next use
            log = self.core.log
            if log.poisoned is not None and log.group is None:
                self._rebuild(exc)
        else:
            self._rebuild(exc)
        self._clear()

    def rollback(self) -> None:
        """Take back what was applied since the last commit point (exactly, or by rebuilding the
        partition from its journal); :attr:`state` is then the state in force."""
        if self._applied or self._broken:
            self._take_back(None)

    def _take_back(self, cause: BaseException | None) -> None:
        if self._irreversible or self._broken:
            self._rebuild(cause)
        else:
            self._undo()
        self._clear()

    def _undo(self) -> None:
        for undo in reversed(self._undos):
            undo()
        self.state.take_notes()      # the notes told of the undone changes

    def _rebuild(self, cause: BaseException | None) -> None:
        """Memory is ahead of the journal and cannot be put back step by step: rebuild it from the
        journal now (or on the next write, when the store cannot be read yet)."""
        core = self.core
        log = core.log
        if core.rebuild is None and log.journal is None:
            return          # nothing to rebuild from (a partition in memory alone): it stays as it is
        for key in self._held:          # decided by this write, never journalled nor heard of
            self.state.preempting.pop(key, None)
        if log.poisoned is None:
            # a handler or a hook failed: what others queued for a group commit is decided and goes
            # first, so the journal holds everything before this write
            if log.group is not None:
                with contextlib.suppress(Exception):    # a failed group poisons the partition itself
                    log.group.wait()
            log.poisoned = cause if cause is not None else RuntimeError("a write failed half way")
        core.recover()
        self.state = core.state

    def _clear(self) -> None:
        self._applied = []
        self._undos = []
        self._held = []
        self._irreversible = False
        self._broken = False
        self._configured = False
