"""The projection: the latest observation of every object, rebuilt from the log.

One ordered push consumer over ``BRIDGE_OBS`` with ``deliver_policy=last_per_subject``: at
start-up it receives the last message of every subject (the current state of the world, no
matter how long the log is) and then every new observation in stream order. Each process keeps
one projection that all its reconcilers and producers read (:class:`reconcilers.base.Store`).

``applied_seq`` is the stream sequence of the last message applied; the worker waits on
:meth:`Projection.wait_applied` before deciding on a trigger ("read your trigger"), so a
decision never runs on a view older than the event that caused it. Malformed messages are
counted and skipped here (the reconcilers' consumers dead-letter them with the reason).

Memory (issue 7): :meth:`Projection.feed` passes each decoded event through a bounded
:class:`slurmbridge.runtime.intern.Canonicalizer`, so values that many objects repeat (label keys
and
values, finalizers, owner references, states …) are stored once. The ``by_label`` /
``by_field`` indexes hold one ``(source, key)`` tuple per object, shared by every index of its
kind (:attr:`Entry.ref`), and a value with a single object maps to that tuple directly instead
of a one-element set (most ``by_field`` values, e.g. pod names, are unique).

Order (issue 21, found by the chaos test): the log's order is not the objects' order when two
producers publish the same Kubernetes object (a standby taking over the watchers, a process
restarted while its last publishes are still in flight): a late publish of an older state can
land after a newer one, whose own later copy is then dropped as a duplicate. A Kubernetes
observation (source ``k8s``) whose ``resourceVersion`` is lower than the one held for its key
(live or tombstone) is therefore not applied: kube-apiserver's resourceVersions are its etcd
store's revisions, decimal integers that only grow across all objects (apiserver
``storage/etcd3``; Kubernetes 1.35 documents comparing them, KEP-5504). Versions that are not
decimal are never compared.

Declared indexes (issue 30, item 4): :meth:`Projection.by_index` and :meth:`Projection.rank`
answer for a :class:`reconcilers.base.Index` — a value derived from an object (the group a
job's marker names) and an order within each value (a pending job's place in its partition's
queue, slurmctld's order) — from one sorted list per value, kept sorted as objects join, leave
and change (``bisect``: O(log n) comparisons and one memmove per change), so a view asking
"how many jobs are ahead of this one" costs O(log n), not a pass over the partition.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import heapq
import logging
import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
from nats.js import api

from reconcilers.base import Index
from schemas import events, streams, subjects
from schemas.events import Event
from slurmbridge.observability import metrics
from slurmbridge.runtime.bus import Bus
from slurmbridge.runtime.intern import Canonicalizer
from slurmbridge.runtime.pull import ack_meta

log = logging.getLogger(__name__)

E = TypeVar("E", bound=Event)

Ref = tuple[str, str]
"""An indexed object: (source, key)."""

Members = Ref | set[Ref]
"""The objects an index holds for one value: one ref, or a set of two or more."""

Ranked = list[tuple[Any, str, str]]
"""A declared index's members for one value: ``(order, source, key)``, sorted."""


@dataclass(slots=True)
class Entry:
    """One object's latest observation and the stream sequence that carried it.

    ``ref`` is the object's ``(source, key)`` as the indexes hold it, made on first indexing
    and carried over to the object's next entries, so all indexes share one tuple.
    """

    event: Event
    seq: int
    ref: Ref | None = None


class Projection:
    """Latest observation per (kind, source, key); implements :class:`reconcilers.base.Store`."""

    def __init__(self) -> None:
        self._objs: dict[str, dict[str, dict[str, Entry]]] = {}
        self._tomb_seq: dict[tuple[str, str, str], int] = {}
        #: The highest resourceVersion applied per Kubernetes object, tombstones included.
        self._kube_rv: dict[tuple[str, str, str], int] = {}
        #: Kubernetes observations not applied for being older than the one held.
        self.stale = 0
        self._label_index: dict[tuple[str, str], dict[str, Members]] = {}
        #: (kind, label, value) → its members in order, until one joins or leaves: a lookup
        #: into a big, unchanging set (10,000 jobs queued in one partition) sorts it once.
        self._sorted: dict[tuple[str, str, str], list[Ref]] = {}
        #: Declared indexes (reconcilers.base.Index) in use, by kind tag: value → members.
        self._declared: dict[str, dict[Index[Any], dict[Hashable, Ranked]]] = {}
        self._canon = Canonicalizer()
        self.applied_seq = 0
        self.malformed = 0
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._waiter_id = 0
        self._caught_up = asyncio.Event()
        self._target_seq = 0
        self._listeners: list[Callable[[Event, int], None]] = []
        self._sub: Any = None
        #: Observations taken in per kind tag (Store.changes).
        self._changes: dict[str, int] = {}
        #: Values derived from the store, per name (Store.cache).
        self._caches: dict[str, dict[Hashable, Any]] = {}
        #: Per kind tag asked for by Store.changed_since: (count, key) of its last
        #: observations, at most JOURNAL_MAX.
        self._journals: dict[str, collections.deque[tuple[int, str]]] = {}

    # --- Store protocol ------------------------------------------------------------------
    def get(self, kind: type[E], key: str, source: str | None = None) -> E | None:
        """The live object, or None (tombstoned or never seen)."""
        by_source = self._objs.get(_tag(kind))
        if not by_source:
            return None
        if source is not None:
            entry = by_source.get(source, {}).get(key)
            return entry.event if entry is not None else None  # type: ignore[return-value]
        for objs in by_source.values():
            entry = objs.get(key)
            if entry is not None:
                return entry.event  # type: ignore[return-value]
        return None

    def values(self, kind: type[E], source: str | None = None) -> Iterator[E]:
        """Every live object of ``kind`` (of ``source`` when given)."""
        by_source = self._objs.get(_tag(kind), {})
        for src, objs in by_source.items():
            if source is None or src == source:
                for entry in objs.values():
                    yield entry.event  # type: ignore[misc]

    def by_label(self, kind: type[E], label: str, value: str) -> Iterable[E]:
        """Live objects of ``kind`` with ``labels[label] == value`` (index built on first use)."""
        return self._indexed(kind, label, value)

    def by_field(self, kind: type[E], field: str, value: str) -> Iterable[E]:
        """Live objects of ``kind`` whose string field ``field`` equals ``value`` (e.g. jobs
        by ``partition``, pods by ``name``; index built on first use, kept up to date)."""
        return self._indexed(kind, "." + field, value)

    def _indexed(self, kind: type[E], label: str, value: str) -> list[E]:
        tag = _tag(kind)
        index = self._label_index.get((tag, label))
        if index is None:
            index = {}
            for src, objs in self._objs.get(tag, {}).items():
                for key, entry in objs.items():
                    v = _index_value(entry.event, label)
                    if v is not None:
                        _index_add(index, v, _ref(entry, src, key))
            self._label_index[(tag, label)] = index
        members = index.get(value)
        if members is None:
            return []
        if isinstance(members, tuple):
            refs: list[Ref] = [members]
        else:
            cached = self._sorted.get((tag, label, value))
            if cached is None:
                cached = self._sorted[(tag, label, value)] = sorted(members)
            refs = cached
        out: list[E] = []
        for src, key in refs:
            found = self._objs.get(tag, {}).get(src, {}).get(key)
            if found is not None:
                out.append(found.event)  # type: ignore[arg-type]
        return out

    def by_index(self, index: Index[E], value: Hashable, limit: int | None = None) -> list[E]:
        """Live objects in ``index`` under ``value``, in the index's order (built on first
        use, kept up to date); with ``limit``, the first ``limit`` only."""
        objs = self._objs.get(_tag(index.kind), {})
        members = self._ranked(index).get(value, [])
        out: list[E] = []
        for _, src, key in members if limit is None else members[:limit]:
            out.append(objs[src][key].event)  # type: ignore[arg-type]
        return out

    def index_values(self, index: Index[E]) -> list[Hashable]:
        """The values of ``index`` with at least one live member (a value whose last member
        left is dropped)."""
        return list(self._ranked(index))

    def rank(self, index: Index[E], value: Hashable, order: Any) -> int:
        """How many live objects in ``index`` under ``value`` order strictly before
        ``order``: a bisection, O(log n)."""
        members = self._ranked(index).get(value)
        # (order,) sorts before every (order, source, key): the members strictly before it.
        return bisect.bisect_left(members, (order,)) if members else 0

    def _ranked(self, index: Index[Any]) -> dict[Hashable, Ranked]:
        tag = _tag(index.kind)
        declared = self._declared.setdefault(tag, {})
        ranked = declared.get(index)
        if ranked is None:
            ranked = {}
            for src, objs in self._objs.get(tag, {}).items():
                for key, entry in objs.items():
                    value = index.value(entry.event)
                    if value is not None:
                        ranked.setdefault(value, []).append((index.order(entry.event), src, key))
            for members in ranked.values():
                members.sort()
            declared[index] = ranked
        return ranked

    def _rerank(self, tag: str, src: str, key: str, old: Entry | None, new: Entry | None) -> None:
        """Move the object within every declared index of its kind (None: absent)."""
        for index, ranked in self._declared.get(tag, {}).items():
            before = after = None
            if old is not None and (value := index.value(old.event)) is not None:
                before = (value, (index.order(old.event), src, key))
            if new is not None and (value := index.value(new.event)) is not None:
                after = (value, (index.order(new.event), src, key))
            if before == after:
                continue
            if before is not None:
                members = ranked.get(before[0])
                if members:
                    at = bisect.bisect_left(members, before[1])
                    if at < len(members) and members[at] == before[1]:
                        del members[at]
                    if not members:
                        del ranked[before[0]]
            if after is not None:
                bisect.insort(ranked.setdefault(after[0], []), after[1])

    def changes(self, kind: type[Event]) -> int:
        """Observations of ``kind`` applied so far, tombstones included (a stale one, not
        applied, does not count)."""
        return self._changes.get(_tag(kind), 0)

    #: Keys kept per journalled kind (Store.changed_since): a reader more than this many
    #: observations behind is answered None and reads every object again.
    JOURNAL_MAX = 4096

    def changed_since(self, kind: type[Event], since: int) -> list[str] | None:
        """The keys of the observations of ``kind`` taken in after ``changes(kind)`` was
        ``since``, oldest first; None until this kind is journalled (from the first call on)
        or when more than :attr:`JOURNAL_MAX` came since."""
        tag = _tag(kind)
        journal = self._journals.get(tag)
        if journal is None:
            self._journals[tag] = collections.deque(maxlen=self.JOURNAL_MAX)
            return None
        now = self._changes.get(tag, 0)
        if since == now:
            return []
        if since > now or not journal or journal[0][0] > since + 1:
            return None
        keys: list[str] = []
        for count, key in reversed(journal):
            if count <= since:
                break
            keys.append(key)
        keys.reverse()
        return keys

    def cache(self, name: str) -> dict[Hashable, Any]:
        """The dict kept under ``name`` (created empty on first use; never emptied here)."""
        found = self._caches.get(name)
        if found is None:
            found = self._caches[name] = {}
        return found

    # --- runtime API ---------------------------------------------------------------------
    def entry(self, kind: str, source: str, key: str) -> Entry | None:
        """The live entry (with its sequence) of one object."""
        return self._objs.get(kind, {}).get(source, {}).get(key)

    def last_seq(self, kind: str, source: str, key: str) -> int:
        """Stream sequence of the last observation of an object, tombstones included (0 = none)."""
        entry = self.entry(kind, source, key)
        if entry is not None:
            return entry.seq
        return self._tomb_seq.get((kind, source, key), 0)

    def keys(self, kind: str, source: str) -> set[str]:
        """Keys of the live objects of one kind and source."""
        return set(self._objs.get(kind, {}).get(source, {}))

    def count(self, kind: str) -> int:
        """Number of live objects of ``kind``."""
        return sum(len(o) for o in self._objs.get(kind, {}).values())

    def add_listener(self, fn: Callable[[Event, int], None]) -> None:
        """Call ``fn(event, seq)`` after each applied observation (cheap, synchronous)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[Event, int], None]) -> None:
        """Stop calling ``fn`` (absent: nothing to do)."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(fn)

    def apply(self, event: Event, seq: int) -> None:
        """Apply one observation carried at stream sequence ``seq``."""
        tag = events.kind_of(event)
        if event.source == subjects.KUBE_SOURCE and event.version.isdecimal():
            ident = (tag, event.source, event.key)
            rv = int(event.version)
            if rv < self._kube_rv.get(ident, 0):
                self.stale += 1
                metrics.PROJECTION_STALE.labels(tag).inc()
                self._advance(seq)
                return
            self._kube_rv[ident] = rv
        count = self._changes[tag] = self._changes.get(tag, 0) + 1
        journal = self._journals.get(tag)
        if journal is not None:
            journal.append((count, event.key))
        objs = self._objs.setdefault(tag, {}).setdefault(event.source, {})
        old = objs.get(event.key)
        if event.op == "deleted":
            if old is not None:
                del objs[event.key]
            self._tomb_seq[(tag, event.source, event.key)] = seq
        else:
            objs[event.key] = Entry(event, seq, old.ref if old is not None else None)
            if old is None:
                self._tomb_seq.pop((tag, event.source, event.key), None)
        if self._label_index:
            self._reindex(tag, event.source, event.key, old, objs.get(event.key))
        if tag in self._declared:
            self._rerank(tag, event.source, event.key, old, objs.get(event.key))
        for fn in self._listeners:
            fn(event, seq)
        self._advance(seq)

    def _reindex(self, tag: str, src: str, key: str, old: Entry | None, new: Entry | None) -> None:
        """Move the object from ``old``'s values to ``new``'s (None: absent) in every index."""
        for (itag, label), index in self._label_index.items():
            if itag != tag:
                continue
            before = _index_value(old.event, label) if old is not None else None
            after = _index_value(new.event, label) if new is not None else None
            if before == after:
                continue
            self._sorted.pop((tag, label, before or ""), None)
            self._sorted.pop((tag, label, after or ""), None)
            if before is not None:
                _index_remove(index, before, (src, key))
            if after is not None:
                assert new is not None
                _index_add(index, after, _ref(new, src, key))

    def _advance(self, seq: int) -> None:
        self.applied_seq = max(self.applied_seq, seq)
        while self._waiters and self._waiters[0][0] <= self.applied_seq:
            _, _, fut = heapq.heappop(self._waiters)
            if not fut.done():
                fut.set_result(None)
        if not self._caught_up.is_set() and self.applied_seq >= self._target_seq:
            self._caught_up.set()

    async def wait_applied(self, seq: int, timeout: float) -> bool:
        """Wait until the observation at ``seq`` (or a later one) is applied.

        Returns False after ``timeout`` seconds.
        """
        if self.applied_seq >= seq:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiter_id += 1
        heapq.heappush(self._waiters, (seq, self._waiter_id, fut))
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            return False
        return True

    @property
    def caught_up(self) -> bool:
        """True once the start-up rebuild reached the stream's end as of start-up."""
        return self._caught_up.is_set()

    async def wait_caught_up(self, timeout: float | None = None) -> None:
        """Wait for the start-up rebuild. Raises TimeoutError after ``timeout`` seconds."""
        await asyncio.wait_for(self._caught_up.wait(), timeout)

    # --- feeding from JetStream ----------------------------------------------------------
    async def start(self, bus: Bus, *, every_message: bool = False) -> None:
        """Subscribe to BRIDGE_OBS (last message per subject, then live) and start applying.

        ``every_message`` applies the whole retained history in order instead of only the last
        message per subject (replays and benchmarks; the end state is the same).
        """
        info = await bus.js.stream_info(streams.OBS_STREAM)
        self._target_seq = info.state.last_seq if info.state.messages else 0
        if self.applied_seq >= self._target_seq:
            self._caught_up.set()
        started = time.monotonic()

        async def on_msg(msg: Any) -> None:
            meta = ack_meta(msg.reply)
            self.feed(msg.subject, msg.data, meta.stream_seq)
            if not self._caught_up.is_set() and meta.num_pending == 0:
                self._caught_up.set()
                metrics.PROJECTION_REBUILD_SECONDS.set(time.monotonic() - started)

        self._sub = await bus.js.subscribe(
            f"{subjects.PREFIX}.{subjects.OBS}.>",
            stream=streams.OBS_STREAM,
            ordered_consumer=True,
            deliver_policy=(
                api.DeliverPolicy.ALL if every_message else api.DeliverPolicy.LAST_PER_SUBJECT
            ),
            cb=on_msg,
            pending_msgs_limit=1_000_000,
            pending_bytes_limit=512 * 1024 * 1024,
        )

    def feed(self, subject: str, data: bytes, seq: int) -> None:
        """Decode and apply one raw observation; malformed ones are counted and skipped."""
        try:
            kind = subject.split(".", 4)[3]
            event = self._canon.event(events.decode_event(kind, data))
        except (KeyError, IndexError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.malformed += 1
            metrics.PROJECTION_MALFORMED.inc()
            log.debug("projection: skipping malformed message seq=%d on %s: %s", seq, subject, exc)
            self._advance(seq)
            return
        self.apply(event, seq)

    async def stop(self) -> None:
        """Stop applying (idempotent)."""
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except Exception as exc:  # noqa: BLE001 - closing a dead connection is fine
                log.debug("projection unsubscribe: %s", exc)


def _tag(kind: type[Event]) -> str:
    return kind.__struct_config__.tag  # type: ignore[return-value]


def _ref(entry: Entry, src: str, key: str) -> Ref:
    """The entry's shared ``(source, key)``, made on first use."""
    ref = entry.ref
    if ref is None:
        ref = entry.ref = (src, key)
    return ref


def _index_add(index: dict[str, Members], value: str, ref: Ref) -> None:
    """Add ``ref`` under ``value``: a lone ref is stored as is, a second one makes a set."""
    members = index.get(value)
    if members is None:
        index[value] = ref
    elif type(members) is tuple:
        if members != ref:
            index[value] = {members, ref}
    else:
        members.add(ref)  # type: ignore[union-attr]


def _index_remove(index: dict[str, Members], value: str, ref: Ref) -> None:
    """Remove ``ref`` from ``value``; a set left with one ref becomes that ref, none: no entry."""
    members = index.get(value)
    if members is None:
        return
    if type(members) is tuple:
        if members == ref:
            del index[value]
        return
    members.discard(ref)  # type: ignore[union-attr]
    if len(members) == 1:
        index[value] = next(iter(members))
    elif not members:
        del index[value]


def _index_value(event: Event, label: str) -> str | None:
    """The indexed value: field ``label[1:]`` for ``.field``, else the label's value."""
    if label.startswith("."):
        value = getattr(event, label[1:], None)
        return value if isinstance(value, str) else None
    return _labels(event).get(label)


def _labels(event: Event) -> dict[str, str]:
    labels = getattr(event, "labels", None)
    return labels if isinstance(labels, dict) else {}
