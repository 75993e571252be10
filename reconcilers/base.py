"""The shape every reconciler module fills in, and the read-only store it reads.

A reconciler is level-based (controller-runtime's ``Reconciler``): a trigger is reduced to the
*keys* it concerns (:attr:`ReconcilerSpec.keys_of`), and for each key the reconciler reads the
whole current state (:attr:`ReconcilerSpec.view`) and returns a :class:`Decision`. Redelivered,
duplicated or reordered triggers therefore converge on the same result.

Implementers must keep ``keys_of``, ``view`` and ``decide`` pure: no ``await``, no clients, no
clock (time arrives in the view when a rule needs it), no randomness.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from schemas.actions import AnyAction
from schemas.events import Event, KubeListed, SlurmPing
from schemas.subjects import KUBE_SOURCE, slurm_source
from schemas.tenancy import Tenancy

E = TypeVar("E", bound=Event)


def _unordered(_obj: Event) -> tuple[()]:
    return ()


@dataclass(frozen=True, eq=False, slots=True)
class Index(Generic[E]):
    """A declared index of the store: the live objects of ``kind`` grouped by
    ``value(obj)`` (None: the object is in no group), each group kept in ``order(obj)``
    order, then by ``(source, key)``. Built on first use and kept up to date as objects join,
    leave and change (:meth:`Store.by_index`, :meth:`Store.rank`).

    Declare each index once, as a module constant: the store knows an index by identity.
    ``value`` and ``order`` must be pure functions of the observation (no store reads), and
    ``order``'s results comparable with ``<`` with each other. For a lookup
    ``by_label``/``by_field`` cannot express: a value derived from a field (the group a job's
    marker names), or a place in an order (a pending job's place in its partition's queue),
    so a reconciler's view reads a handful of objects instead of scanning every one.
    """

    name: str
    kind: type[E]
    value: Callable[[E], Hashable | None]
    order: Callable[[E], Any] = _unordered


class Store(Protocol):
    """Read-only view of the projection (latest observation per object, tombstones dropped)."""

    def get(self, kind: type[E], key: str, source: str | None = None) -> E | None:
        """The live object of ``kind`` with ``key`` (from ``source`` when given), else None."""
        ...

    def values(self, kind: type[E], source: str | None = None) -> Iterable[E]:
        """Every live object of ``kind`` (from ``source`` when given)."""
        ...

    def by_label(self, kind: type[E], label: str, value: str) -> Iterable[E]:
        """Live objects of ``kind`` whose label ``label`` equals ``value`` (indexed)."""
        ...

    def by_field(self, kind: type[E], field: str, value: str) -> Iterable[E]:
        """Live objects of ``kind`` whose string field ``field`` equals ``value`` (indexed)."""
        ...

    def by_index(self, index: Index[E], value: Hashable, limit: int | None = None) -> Sequence[E]:
        """Live objects of ``index.kind`` whose ``index.value`` is ``value``, in the index's
        order (:class:`Index`); with ``limit``, only the first ``limit`` of them (the others
        are not read)."""
        ...

    def index_values(self, index: Index[E]) -> Iterable[Hashable]:
        """The values of ``index`` that at least one live object has (each once)."""
        ...

    def rank(self, index: Index[E], value: Hashable, order: Any) -> int:
        """How many live objects of ``by_index(index, value)`` order strictly before
        ``order`` (an ``index.order`` result): O(log n), the objects are not read."""
        ...

    def changes(self, kind: type[Event]) -> int:
        """How many observations of ``kind`` the store has taken in (tombstones included):
        a number that moves whenever an object of ``kind`` may have changed, so a value
        derived from those objects can be kept until it moves."""
        ...

    def changed_since(self, kind: type[Event], since: int) -> Sequence[str] | None:
        """The keys of the observations of ``kind`` taken in after :meth:`changes` read
        ``since`` (a key once per observation, oldest first; a tombstone's too), or None
        when the store cannot tell: it keeps the last keys of a kind only once asked for
        that kind, and only so many of them. A value derived from every object of ``kind``
        can then be brought up to date by reading those objects again instead of all."""
        ...

    def cache(self, name: str) -> dict[Hashable, Any]:
        """A dict kept with the store under ``name`` for values derived from it, created
        empty on first use. The store never reads or empties it: whoever keeps a value there
        checks it is still valid (by :meth:`changes`, or by the identity of the observations
        it was derived from) and bounds its size."""
        ...


class Context(msgspec.Struct, frozen=True, kw_only=True):
    """Settings a reconciler's rules depend on, built by the runtime from the config.

    ``scheduler_name`` is the value of the managed-node taint and the pods' schedulerName;
    ``cluster`` the Slurm cluster whose nodes mirror the Kubernetes nodes (its observations
    come from source ``slurm:<cluster>``). ``now`` is the wall clock (epoch seconds) the
    runtime stamps on each reconcile, so rules that wait for a time stay pure (``replay``
    stamps the recorded time). ``stuck_pod_grace_s``: seconds a pod may stay Terminating on a
    node whose kubelet does not answer before our finalizer is removed (slurm-bridge #49).
    ``default_partition``: the partition of placeholder jobs whose pods name none (Slinky's
    ``partition`` setting; ``""`` = Slurm's default partition). ``mcs_label``: the MCS label
    placeholder jobs carry (Slinky's ``mcsLabel`` setting; ``""`` = none).
    ``propagated_node_conditions``: node condition types whose True conditions make a
    cordoned node's slurmd drain reason (slurm-operator ``propagatedNodeConditions``).
    ``preemption_grace_s``: whole seconds a pod whose Slurm job was preempted gets between
    SIGTERM and SIGKILL (its deletion's ``gracePeriodSeconds``).
    ``lost_job_grace_s``: seconds after its submit a job re-backing running pods whose job
    Slurm lost may stay pending before those pods are deleted (``kube.lostJobGrace``).
    ``tenancy``: the Slurm identity and allowed names of each tenant's namespaces
    (reconcilers._tenancy). ``managed_namespaces`` / ``namespace_selector``: the namespaces
    the bridge serves (Slinky's ``managedNamespaces``; whether a ``managedNamespaceSelector``
    is set, which only the webhook can evaluate).
    """

    scheduler_name: str
    cluster: str
    now: float = 0.0
    stuck_pod_grace_s: float = 300.0
    default_partition: str = ""
    mcs_label: str = ""
    propagated_node_conditions: tuple[str, ...] = ()
    preemption_grace_s: int = 30
    lost_job_grace_s: float = 60.0
    tenancy: Tenancy = Tenancy()
    managed_namespaces: tuple[str, ...] = ()
    namespace_selector: bool = False


def kube_listed(store: Store, *listings: str) -> bool:
    """True when the log holds a complete Kubernetes list of each of ``listings`` (a
    watcher's listing name: ``pods``, ``nodes`` …): its ``KubeListed`` marker, published
    after the list's objects (schemas.events.KubeListed).

    Rules that act on a Kubernetes object's *absence* wait for this: before the first
    complete list (a slow or paged list, an API server answering 503 while it starts), a
    missing pod proves nothing, and those actions cancel jobs and delete pods.
    """
    return all(store.get(KubeListed, name, KUBE_SOURCE) is not None for name in listings)


def slurm_listed(store: Store, cluster: str) -> bool:
    """True when the log holds a complete listing of Slurm ``cluster`` and its latest poll
    succeeded: the cluster's ``SlurmPing`` (published last in each poll's batch, after the
    listings, by producers.slurm.poller) carries no error.

    Rules that act on an object's *absence* from Slurm (a job gone after we bound its pod, a
    node unknown to Slurm) wait for this: before the first listing, or while slurmrestd fails,
    absence proves nothing, and those actions delete pods.
    """
    ping = store.get(SlurmPing, cluster, slurm_source(cluster))
    return ping is not None and not ping.error


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """What one reconcile wants: actions in order, an optional re-check, and why.

    ``requeue_after`` (seconds) asks for another reconcile of the key even without a new
    trigger (e.g. waiting for a drain to complete); ``reason`` is a short human sentence kept
    in logs and action records.
    """

    actions: tuple[AnyAction, ...] = ()
    requeue_after: float | None = None
    reason: str = ""


NOTHING = Decision(reason="in sync")


#: The keys one trigger concerns: a pure function of the event, the store and the context.
KeysOf = Callable[[Any, Store, Context], Iterable[str]]
#: The keys one trigger concerns given what changed: the parts read (``ReconcilerSpec.reads``)
#: of the object's observation before and of this one, then as :data:`KeysOf`.
ChangedKeysOf = Callable[[Any, Any, Any, Store, Context], Iterable[str]]


@dataclass(frozen=True, slots=True)
class ReconcilerSpec:
    """A reconciler as data.

    ``keys``: for each observation kind whose changes may change a decision (a *trigger*),
    the keys an event of that kind concerns (may be empty) — one table, so a kind is never
    declared in one place and handled in another.
    ``key_kind``: the kind a key names (used in action subjects, e.g. ``KubeNode``).
    ``all_keys(store, ctx)``: every key worth reconciling at start-up (initial resync).
    ``view(store, key, ctx)``: pure read of the state ``decide`` needs.
    ``decide(view)``: pure rules → :class:`Decision`.
    ``reads``: for a trigger kind, the part of an observation that this reconciler's
    ``keys`` and ``view`` read (a pure function of the event; the result compared with
    ``==``). An observation whose part equals that of the observation of the same object
    before it cannot change a decision, so the runtime decides nothing for it. A kind not
    listed is read whole.
    ``changed``: for a kind of ``reads``, the keys when the runtime knows the part read of
    the object's previous observation — ``changed[kind](before, after, event, store, ctx)``
    with the two parts — so a reconciler re-decides only the keys that what changed can
    move (placement: a node's peers changing concerns only the pending groups InterPodAffinity
    reads). It must return every key ``keys`` would for a change it cannot rule out; the
    runtime calls ``keys`` instead whenever the part before is unknown (a worker's start, a
    redelivery).
    """

    name: str
    keys: Mapping[type[Event], KeysOf]
    key_kind: str
    all_keys: Callable[[Store, Context], Iterable[str]]
    view: Callable[[Store, str, Context], Any]
    decide: Callable[[Any], Decision]
    description: str = ""
    reads: Mapping[type[Event], Callable[[Any], object]] = field(default_factory=dict)
    changed: Mapping[type[Event], ChangedKeysOf] = field(default_factory=dict)

    @property
    def triggers(self) -> tuple[type[Event], ...]:
        """The observation kinds this reconciler consumes (the keys of :attr:`keys`)."""
        return tuple(self.keys)

    def keys_of(
        self,
        event: Event,
        store: Store,
        ctx: Context,
        *,
        parts: tuple[object, object] | None = None,
    ) -> Iterable[str]:
        """The keys ``event`` concerns (none for a kind that is not a trigger); with
        ``parts``, the parts read (:attr:`reads`) of the object's previous observation and of
        this one, only those :attr:`changed` says the change can move."""
        changed = self.changed.get(type(event)) if parts is not None else None
        if changed is not None and parts is not None:
            return changed(parts[0], parts[1], event, store, ctx)
        keys_of = self.keys.get(type(event))
        return keys_of(event, store, ctx) if keys_of is not None else ()
