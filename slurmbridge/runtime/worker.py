"""The reconciler runtime, the same for every reconciler (docs/architecture.md "The
reconciler runtime").

Per reconciler::

    durable pull consumer per trigger kind ─fetch─▶ decode (once) ─▶ keys_of ─▶ keyed queue
        ─▶ read-your-trigger (projection.applied_seq ≥ trigger seq) ─▶ view ─▶ decide
        ─▶ effectors ─▶ action record per effect ─▶ ack | nak(delay) | term + dead letter

* **Keyed queue** (client-go's workqueue): at most one reconcile in flight per key; triggers
  for a key that is queued or running coalesce into one later reconcile, and every message is
  acknowledged only after all keys it maps to have been reconciled.
* **Outcomes** are values (:mod:`slurmbridge.runtime.outcomes`): ``OK`` → ack, ``RetryLater`` → nak
  with delay, ``GiveUp`` or exhausted ``max_deliver`` → term + dead letter. No sleep loops.
* **Start-up resync**: once the projection has caught up, every key the reconciler knows is
  reconciled once (controller-runtime's initial list), so a requeue lost in a crash or an
  action that failed before the last restart is picked up again.
* **Fail closed**: actions marked destructive wait until the projection and this consumer have
  caught up with the log (docs/architecture.md "Running many workers") — until then the reconcile is
  retried later — and until the log holds a complete listing of both sides of their cluster
  (:class:`~slurmbridge.runtime.gate.ListingGate`): such a decision is *parked* (its trigger
  acknowledged) and decided again when a listing marker arrives.
* **The log before the effect**: before an effector runs, the worker stores an ``intended``
  action record and waits for the stream's acknowledgement; a refused or unanswered publish
  (a full store, no quorum) performs nothing — the key is parked and tried again with
  back-off, without spending the trigger's deliveries — and the outcome record follows the
  effect. The refusal is logged once per back-off step, naming the stream and the error.
* A ``RecordEvent`` that follows an action runs only when that action's outcome is in its
  ``on`` (default: it changed something), so redelivery does not repeat Kubernetes Events; an
  ``unsupported`` outcome is recorded, and announced, once per worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
import nats.errors

from reconcilers.base import Context, Decision, ReconcilerSpec
from schemas import actions as act
from schemas import events, streams, subjects
from schemas.actions import ActionRecord, AnyAction, DeadLetter, RecordEvent
from slurmbridge.config import WorkerSettings
from slurmbridge.observability import metrics
from slurmbridge.runtime.bus import MSG_ID, BatchPublisher, Bus
from slurmbridge.runtime.gate import ListingGate
from slurmbridge.runtime.leases import partition_of
from slurmbridge.runtime.outcomes import (
    OK,
    EffectResult,
    GiveUp,
    Ok,
    Permanent,
    Result,
    RetryLater,
    Transient,
    backoff,
)
from slurmbridge.runtime.projection import Projection
from slurmbridge.runtime.pull import AckMeta, PullConsumer, ack_meta
from slurmbridge.runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class Effector(Protocol):
    """Performs actions. Must be idempotent: re-check the world, skip what is already so.

    Returns an :class:`EffectResult`; raises :class:`Transient` or :class:`Permanent`.
    """

    async def apply(self, action: AnyAction) -> EffectResult:
        """Perform one action."""
        ...


#: No observation of this subject delivered yet (``None`` may be a part).
_UNSEEN = object()


class _LogRefused(Exception):  # noqa: N818 - a signal inside the worker, not an error type
    """The stream did not store an action's ``intended`` record: perform nothing."""


class NoopEffector:
    """Performs nothing and reports ``noop`` (benchmarks, dry runs)."""

    def __init__(self) -> None:
        self.calls = 0

    async def apply(self, action: AnyAction) -> EffectResult:
        """Count the call; change nothing."""
        del action
        self.calls += 1
        return EffectResult("noop", "dry run")


@dataclass(eq=False, slots=True)
class _Tracker:
    """One delivered message, acknowledged once every key it maps to is reconciled."""

    msg: Any
    seq: int
    num_delivered: int
    remaining: int
    retry: RetryLater | None = None
    give_up: GiveUp | None = None
    #: When JetStream last heard of it (monotonic seconds): its delivery or an in-progress.
    kept: float = field(default_factory=time.monotonic)


def _destroys(decision: Decision | GiveUp) -> bool:
    """Whether ``decision`` holds a destructive action (those are decided again on the
    latest view before they run: a change on its way to this worker's consumers may undo
    their reason — rules of trust 1 and 3)."""
    return isinstance(decision, Decision) and any(a.destructive for a in decision.actions)


@dataclass(slots=True)
class _KeyQueue:
    pending: dict[str, list[_Tracker]] = field(default_factory=dict)
    inflight: set[str] = field(default_factory=set)
    ready: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    #: Key → how often it was added since the reconcile loop last took it (a trigger, a
    #: timer, the gate opening): popped with :attr:`pending`.
    adds: dict[str, int] = field(default_factory=dict)

    def add(self, key: str, tracker: _Tracker | None) -> None:
        self.adds[key] = self.adds.get(key, 0) + 1
        waiting = self.pending.get(key)
        if waiting is None:
            self.pending[key] = [tracker] if tracker is not None else []
            if key not in self.inflight:
                self.ready.put_nowait(key)
        elif tracker is not None:
            waiting.append(tracker)


@dataclass(frozen=True, slots=True)
class _Seen:
    """What a decision saw: the projection's applied sequence and the clock (epoch s)."""

    view_seq: int
    at: float


class Worker:
    """Runs one reconciler against the log. Create, :meth:`start`, later :meth:`stop`."""

    #: Kubernetes Events being created at once (see :meth:`_emit_event`).
    MAX_EVENTS_IN_FLIGHT = 256
    #: Seconds an action just performed is not repeated for the same key (see _expected).
    EXPECT_S = 1.0
    #: Seconds an action record that the stream did not store is sent again (leader elections
    #: of a replicated stream take a few seconds); the trigger is kept in progress meanwhile.
    RECORD_RETRY_S = 30.0
    #: Seconds a worker decides without letting the event loop run: a decide that performs
    #: nothing never suspends, so a start-up resync of 10,000 queued groups ran as one
    #: synchronous block of seconds, and the leases (renewed on this loop) expired under it —
    #: every component restarted, resynced, and blocked again (issue 30, item 4).
    BREATHE_S = 0.02
    #: Seconds :meth:`stop` waits for the server to confirm the unsubscribes, and the naks
    #: of the triggers it hands back (whole seconds: nats-py's ``flush`` takes an int).
    HAND_BACK_S = 2

    def __init__(
        self,
        spec: ReconcilerSpec,
        *,
        bus: Bus,
        projection: Projection,
        effector: Effector,
        ctx: Context,
        settings: WorkerSettings,
        instance_id: str,
        may_destroy: Callable[[], bool] | None = None,
        partition: tuple[int, int] = (0, 1),
        fence: Callable[[], int | None] | None = None,
        gate: ListingGate | None = None,
        describe_store: Callable[[], str] | None = None,
    ) -> None:
        self.spec = spec
        self.bus = bus
        self.projection = projection
        self.effector = effector
        self.ctx = ctx
        self.settings = settings
        self.instance_id = instance_id
        # Ids of action records (``op_id``, ``Nats-Msg-Id``): a random prefix per worker and a
        # counter, unique like a uuid4 each and without its ``os.urandom`` read per record
        # (uuid4 was 1.6 % of the bridge's samples at 200 pods/s, bench/workload.py).
        self._id_prefix = uuid.uuid4().hex[:20]
        self._id_seq = itertools.count(1)
        self._may_destroy_extra = may_destroy
        self.partition, self.partitions = partition
        self.fence = fence
        self.gate = gate
        self._describe_store = describe_store
        #: Keys parked by the gate (key → why): decided again at the next listing marker.
        self._parked: dict[str, str] = {}
        #: Why the log refused this worker's last write-ahead record (None: it stores them),
        #: and the consecutive refusals (the back-off step).
        self.log_refusal: str | None = None
        self._refusals = 0
        self.trigger_kinds = frozenset(str(t.__struct_config__.tag) for t in spec.triggers)
        self._reads = {str(t.__struct_config__.tag): f for t, f in spec.reads.items()}
        #: Subject → the part (``ReconcilerSpec.reads``) of its last observation delivered.
        self._parts: dict[str, object] = {}
        # One durable consumer per trigger kind, each with one filter subject
        # (``bridge.obs.*.<Kind>.*``). One filter covering several kinds is not possible
        # (a subject's kind is its third token), several filter subjects on one consumer make
        # nats-server deliver far slower (bench/filters.py: ~4k msg/s for two kinds against
        # ~28k for one), and one consumer on ``bridge.obs.>`` delivered every observation to
        # every reconciler: node_taint read each pod's nine changes only to acknowledge them
        # (issue 30: ~90 deliveries and acks per placed pod, 40 of them to reconcilers that
        # read no pod). Each partition has its own consumers: every partition sees every
        # trigger and keeps only its keys (a trigger may concern keys of several partitions).
        base = (
            spec.name
            if self.partitions == 1
            else f"{spec.name}-p{self.partition}of{self.partitions}"
        )
        self.consumers = tuple(
            streams.consumer_spec(
                f"{base}-{kind}",
                (subjects.obs_filter("*", kind),),
                ack_wait_s=settings.ack_wait,
                max_deliver=settings.max_deliver,
                max_ack_pending=settings.max_ack_pending,
            )
            for kind in sorted(self.trigger_kinds)
        )
        self._queue = _KeyQueue()
        #: Decisions with effects made on the fast path, with what they saw and how often the
        #: key had been added to the queue then (:attr:`_KeyQueue.adds`): the reconcile task
        #: performs them unless something that can move the key came meanwhile (decide once).
        self._decided: dict[str, tuple[_Seen, Decision | GiveUp, int]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._events: set[asyncio.Task[None]] = set()
        self._recent: dict[str, dict[bytes, float]] = {}
        self._unsupported_seen: set[tuple[str, str]] = set()
        #: Encoded actions an effector answered ``unsupported``: never sent again.
        self._unsupported: set[bytes] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        #: Consecutive failed reconciles of a key that no message asked for (back-off step).
        self._unasked_failures: dict[str, int] = {}
        #: Consumers (durable names) not yet caught up with the log: see :attr:`caught_up`.
        self._behind = {c.durable for c in self.consumers}
        self._pending_of: dict[str, int] = {}
        self.reconciles = 0
        self.settled = 0  # messages acked, naked or termed (benchmarks and tests read it)
        self.unread = 0  # triggers whose part read (ReconcilerSpec.reads) had not changed
        self._stopping = False
        #: Messages delivered and not yet settled, queued or being reconciled: kept in
        #: progress past a third of ack_wait (:meth:`_keepalive_loop`).
        self._held: set[_Tracker] = set()
        self._pullers: list[PullConsumer] = []
        self._breathed = time.perf_counter()
        # Metric children looked up once: labels() costs more than the update itself.
        self._m_consumed: dict[str, Any] = {}
        self._m_ok = metrics.RECONCILE_SECONDS.labels(spec.name, "ok")
        self._m_decides = metrics.DECIDES.labels(spec.name)
        self._m_pending = metrics.CONSUMER_PENDING.labels(spec.name)

    # --- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """Create/update the durable consumers, start pulling and reconciling.

        Raises:
            nats.errors.Error / TimeoutError: a consumer could not be created or updated
                (e.g. its stream electing a leader); what was started is stopped first.
        """
        try:
            for consumer in self.consumers:
                await self.bus.ensure_consumer(consumer)
                puller = PullConsumer(
                    self.bus.nc, consumer.stream, consumer.durable, batch=self.settings.fetch_batch
                )
                await puller.start()
                self._pullers.append(puller)
        except BaseException:
            # The pullers started so far would go on asking for triggers that nobody reads
            # (each re-asks after a silence): whatever reached them was never acknowledged,
            # and each redelivery after ack_wait could go to them again. After a stream
            # leader was killed this held triggers for good (test_nats_cluster.py's leader
            # kill, "not settled after 120s", each time after "active part failed:
            # TimeoutError()" of the reconciler whose consumer held them).
            await self.stop()
            raise
        if self.gate is not None:
            self.projection.add_listener(self._on_applied)
        name = self.spec.name
        for consumer, puller in zip(self.consumers, self._pullers, strict=True):
            self._tasks.append(
                asyncio.create_task(
                    self._consume_loop(consumer.durable, puller),
                    name=f"{name}-consume-{consumer.durable}",
                )
            )
        for i in range(self.settings.concurrency):
            self._tasks.append(asyncio.create_task(self._reconcile_loop(), name=f"{name}-rc{i}"))
        self._tasks.append(asyncio.create_task(self._resync(), name=f"{name}-resync"))
        self._tasks.append(asyncio.create_task(self._keepalive_loop(), name=f"{name}-keepalive"))

    async def stop(self) -> None:
        """Stop pulling and reconciling, and hand every trigger still held back to JetStream
        (:meth:`_hand_back`), so whoever holds this partition next (another replica, or
        this process once it has the lease again) is delivered it at once, not after
        ``ack_wait``. Whoever that is reconciles every key at start-up anyway (the
        resync)."""
        self._stopping = True
        self.projection.remove_listener(self._on_applied)
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for puller in self._pullers:
            await puller.stop()
        unread = [m for puller in self._pullers for m in puller.take()]
        self._pullers.clear()
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        held = [t.msg for t in self._held]
        self._held.clear()
        await self._hand_back(held + unread)
        if self._events:  # let Events under way finish (they are quick), then give up
            await asyncio.wait(set(self._events), timeout=2.0)
            await cancel_and_wait(list(self._events))

    async def _hand_back(self, msgs: list[Any]) -> None:
        """Nak ``msgs`` (delivered, not settled) without delay, after the pullers' inboxes
        are unsubscribed: a nak before that is delivered again into this worker's own pull
        requests, which the server keeps until they expire, and the trigger then waits
        ``ack_wait`` (30 s) for nobody (measured against nats-server 2.15). Best effort: a
        trigger whose nak is lost is still delivered again after ``ack_wait``.

        A hand-back spends one of the trigger's ``max_deliver`` deliveries, as the
        redelivery after ``ack_wait`` it replaces did."""
        if not msgs:
            return
        unsent = (nats.errors.Error, TimeoutError, OSError)  # closed, reconnecting, settled
        try:
            # The unsubscribes reach the server before the naks.
            await self.bus.nc.flush(timeout=self.HAND_BACK_S)
        except unsent as exc:
            log.info("%s: %d triggers not handed back (%r)", self.spec.name, len(msgs), exc)
            return
        naked = 0
        for m in msgs:
            with contextlib.suppress(*unsent):  # one that fails does not keep the others
                await m.nak()
                naked += 1
        with contextlib.suppress(*unsent):
            await self.bus.nc.flush(timeout=self.HAND_BACK_S)
        log.debug("%s: handed %d of %d triggers back", self.spec.name, naked, len(msgs))

    @property
    def caught_up(self) -> bool:
        """True once every consumer of this worker has delivered all it held when it started
        (an empty fetch, or a delivery with nothing pending behind it); stays True."""
        return not self._behind

    def may_destroy(self) -> bool:
        """True once destructive actions are allowed (caught up with the log, lease held)."""
        if not (self.caught_up and self.projection.caught_up):
            return False
        return self._may_destroy_extra() if self._may_destroy_extra is not None else True

    def _on_applied(self, event: events.Event, seq: int) -> None:
        """Projection listener: a listing marker may open the gate for parked keys."""
        del seq
        if self._parked and not self._stopping and ListingGate.may_open(event):
            parked, self._parked = self._parked, {}
            for key in parked:
                self._queue.add(key, None)
            metrics.HELD_KEYS.labels(self.spec.name).set(0)

    def _park(self, key: str, why: str) -> None:
        if key not in self._parked:
            log.info("%s %s: destructive action held: %s", self.spec.name, key, why)
        self._parked[key] = why
        metrics.HELD_KEYS.labels(self.spec.name).set(len(self._parked))

    def _mine(self, key: str) -> bool:
        return self.partitions == 1 or partition_of(key, self.partitions) == self.partition

    async def _resync(self) -> None:
        await self.projection.wait_caught_up()
        for key in self.spec.all_keys(self.projection, self.ctx):
            if self._mine(key):
                self._queue.add(key, None)

    # --- consuming -----------------------------------------------------------------------
    async def _consume_loop(self, durable: str, puller: PullConsumer) -> None:
        while not self._stopping:
            msgs = await puller.next_batch(timeout=1.0)
            if not msgs:
                self._behind.discard(durable)
                continue
            metas = []
            for m in msgs:
                try:
                    metas.append(ack_meta(m.reply))
                except ValueError:
                    metas.append(AckMeta(0, 1, 0))
            top = max(md.stream_seq for md in metas)
            if not await self.projection.wait_applied(top, self.settings.trigger_wait):
                log.warning("%s: projection behind seq %d; retrying batch", self.spec.name, top)
                for m in msgs:
                    await m.nak(delay=1.0)
                continue
            # A burst is decided once per key: the projection already holds the whole batch,
            # so a second decide for the same key would see exactly what the first saw.
            burst: dict[str, list[_Tracker]] = {}
            for m, md in zip(msgs, metas, strict=True):
                await self._dispatch(m, md, burst)
            await self._decide_burst(burst)
            if metas[-1].num_pending == 0:
                self._behind.discard(durable)
            self._pending_of[durable] = metas[-1].num_pending
            self._m_pending.set(sum(self._pending_of.values()))

    async def _dispatch(self, msg: Any, md: AckMeta, burst: dict[str, list[_Tracker]]) -> None:
        """Settle ``msg`` at once when it concerns no key of ours; otherwise add its tracker
        to ``burst`` under each key it concerns (decided by :meth:`_decide_burst`)."""
        seq = md.stream_seq
        try:
            parsed = subjects.parse_subject(msg.subject)
            kind = parsed.kind
            if kind not in self.trigger_kinds:
                await msg.ack()
                self.settled += 1
                return
            entry = self.projection.entry(kind, parsed.middle, parsed.key)
            # The projection already decoded this very message: reuse it (decode once).
            if entry is not None and entry.seq == seq:
                event = entry.event
            else:
                event = events.decode_event(kind, msg.data)
        except (KeyError, ValueError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            reason = f"malformed observation: {_why(exc)}"
            await self._dead_letter(msg, seq, md.num_delivered, reason)
            await msg.term()
            self.settled += 1
            return
        reads = self._reads.get(kind)
        parts: tuple[object, object] | None = None
        if reads is not None:
            part = reads(event)
            before = self._parts.get(msg.subject, _UNSEEN)
            self._parts[msg.subject] = part
            # What this reconciler reads of the object did not change: no decision can.
            # A redelivery is decided again (its first decide asked to be retried).
            if before == part and md.num_delivered == 1:
                self.unread += 1
                await msg.ack()
                self.settled += 1
                return
            # The part before is known only for a first delivery after one this worker saw:
            # then only the keys what changed can move (ReconcilerSpec.changed).
            if before is not _UNSEEN and md.num_delivered == 1:
                parts = (before, part)
        counter = self._m_consumed.get(kind)
        if counter is None:
            counter = self._m_consumed[kind] = metrics.EVENTS_CONSUMED.labels(self.spec.name, kind)
        counter.inc()
        try:
            found = self.spec.keys_of(event, self.projection, self.ctx, parts=parts)
            keys = [k for k in found if self._mine(k)]
        except Exception as exc:
            log.exception("%s: keys_of failed on seq %d", self.spec.name, seq)
            await self._dead_letter(msg, seq, md.num_delivered, f"keys_of raised {exc!r}")
            await msg.term()
            self.settled += 1
            return
        tracker = _Tracker(msg, seq, md.num_delivered, len(keys))
        if not keys:
            await self._finish(tracker)
            return
        self._held.add(tracker)
        for key in keys:
            burst.setdefault(key, []).append(tracker)

    async def _decide_burst(self, burst: dict[str, list[_Tracker]]) -> None:
        """Decide each key of a fetched batch once, for all its triggers (controller-runtime's
        workqueue coalescing, here within a batch the projection has wholly applied)."""
        q = self._queue
        for key, trackers in burst.items():
            if key in q.pending or key in q.inflight:
                for t in trackers:
                    q.add(key, t)
                continue
            # Fast path: the key is idle, so deciding right here keeps "one reconcile per key";
            # only a decision with effects needs a reconcile task.
            seen = _Seen(self.projection.applied_seq, time.time())
            decision = self._decide(key, seen.at)
            if isinstance(decision, Decision) and not decision.actions:
                if decision.requeue_after is not None:
                    self._requeue(key, decision.requeue_after)
                for t in trackers:
                    await self._complete(t, OK)
            else:
                for t in trackers:
                    q.add(key, t)
                self._decided[key] = (seen, decision, q.adds.get(key, 0))
            await self._breathe()

    async def _breathe(self) -> None:
        """Let the event loop run (lease renewals, watch acknowledgements, other workers)
        once this worker has decided for :attr:`BREATHE_S` without a pause."""
        if time.perf_counter() - self._breathed >= self.BREATHE_S:
            await asyncio.sleep(0)
            self._breathed = time.perf_counter()

    def _decide(self, key: str, now: float | None = None) -> Decision | GiveUp:
        self.reconciles += 1
        self._m_decides.inc()
        started = time.perf_counter()
        try:
            ctx = msgspec.structs.replace(self.ctx, now=time.time() if now is None else now)
            decision: Decision = self.spec.decide(self.spec.view(self.projection, key, ctx))
        except Exception as exc:
            log.exception("%s: decide failed for %s", self.spec.name, key)
            return GiveUp(f"decide raised {exc!r}")
        if not decision.actions:
            self._m_ok.observe(time.perf_counter() - started)
        return decision

    # --- reconciling ---------------------------------------------------------------------
    async def _reconcile_loop(self) -> None:
        q = self._queue
        while True:
            key = await q.ready.get()
            trackers = q.pending.pop(key, [])
            adds = q.adds.pop(key, 0)
            q.inflight.add(key)
            try:
                cause = max((t.seq for t in trackers), default=0)
                result = await self._reconcile(key, cause, adds)
                for t in trackers:
                    await self._complete(t, result)
                self._retry_unasked(key, result, asked=bool(trackers))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: reconcile loop error on %s", self.spec.name, key)
                # No longer kept in progress: JetStream delivers them again after ack_wait.
                self._held.difference_update(trackers)
            finally:
                q.inflight.discard(key)
                if key in q.pending:
                    q.ready.put_nowait(key)
            await self._breathe()

    async def _keepalive_loop(self) -> None:
        """Tell JetStream that every trigger held past a third of ``ack_wait`` — queued
        behind a busy key or being reconciled — is in progress, so it does not deliver it
        again while it waits."""
        period = max(0.5, self.settings.ack_wait / 3)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for t in list(self._held):
                if now - t.kept >= period:
                    t.kept = now
                    with contextlib.suppress(Exception):
                        await t.msg.in_progress()

    async def _reconcile(self, key: str, cause: int, adds: int = -1) -> Result:
        """Reconcile ``key``: perform the decision the fast path made for it when no
        observation was applied since, or — unless it destroys something — when no trigger,
        timer or gate re-added the key since (``adds``, how often it was added to the queue:
        a change reaches every key it can move, docs/architecture.md "The reconciler
        runtime"); otherwise decide again on the current view."""
        started = time.perf_counter()
        # What replay needs to decide again exactly: the view's log position and the clock.
        early = self._decided.pop(key, None)
        if early is not None and (
            early[0].view_seq == self.projection.applied_seq
            or (early[2] == adds and not _destroys(early[1]))
        ):
            seen, decision = early[0], early[1]
        else:
            seen = _Seen(self.projection.applied_seq, time.time())
            decision = self._decide(key, seen.at)
        if isinstance(decision, GiveUp):
            return self._observe(started, decision)
        result: Result = OK
        decision, wait = self._expected(key, decision)
        if decision.actions:
            if any(a.destructive for a in decision.actions) and not self.may_destroy():
                return self._observe(
                    started,
                    RetryLater(1.0, "not caught up with the log yet; destructive action held"),
                )
            held = self.gate.holds(decision.actions) if self.gate is not None else None
            if held is not None:
                # Level-based: the key is decided again, on the then-current view, when a
                # listing marker arrives (a crash loses nothing: the start-up resync).
                self._park(key, held)
                return self._observe(started, OK)
            try:
                result = await self._perform(key, cause, decision, seen)
            except _LogRefused:
                self._requeue(key, backoff(self._refusals, base=0.5, cap=30.0))
                return self._observe(started, OK)
        requeue = decision.requeue_after
        if wait is not None:
            requeue = wait if requeue is None else min(requeue, wait)
        if requeue is not None and isinstance(result, Ok):
            self._requeue(key, requeue)
        return self._observe(started, result)

    def _expected(self, key: str, decision: Decision) -> tuple[Decision, float | None]:
        """Drop the actions this worker performed for ``key`` less than :attr:`EXPECT_S`
        ago whose effect the log does not show yet (controller-runtime's *expectations*).

        Why: a group's pods report one by one, and every report re-runs ``decide`` on a view
        that still lacks the effects of the last reconcile (a finalizer removed, a job
        cancelled), which would repeat those effects once per pod. Returns the decision
        without them and, when some were dropped, when to look again (level-based: if the
        effect really did not stick, the next reconcile performs it).
        """
        now = time.monotonic()
        recent = self._recent.get(key)
        if recent is None or not decision.actions:
            return decision, None
        kept: list[AnyAction] = []
        wait: float | None = None
        dropping = False
        for action in decision.actions:
            if isinstance(action, RecordEvent):
                if not dropping:
                    kept.append(action)
                continue
            at = recent.get(act.encode(action))
            dropping = at is not None and now - at < self.EXPECT_S
            if dropping:
                assert at is not None
                left = self.EXPECT_S - (now - at)
                wait = left if wait is None else min(wait, left)
            else:
                kept.append(action)
        if wait is None:
            return decision, None
        return msgspec.structs.replace(decision, actions=tuple(kept)), wait

    def _expect(self, key: str, action: AnyAction) -> None:
        now = time.monotonic()
        recent = self._recent.setdefault(key, {})
        recent[act.encode(action)] = now
        if len(self._recent) > 4 * self.settings.concurrency + 1024:
            stale = now - self.EXPECT_S
            for k in [k for k, acts in self._recent.items() if max(acts.values()) < stale]:
                del self._recent[k]

    def _observe(self, started: float, result: Result) -> Result:
        if isinstance(result, Ok):
            hist = self._m_ok
        else:
            outcome = "retry" if isinstance(result, RetryLater) else "failed"
            hist = metrics.RECONCILE_SECONDS.labels(self.spec.name, outcome)
        hist.observe(time.perf_counter() - started)
        return result

    async def _perform(self, key: str, cause: int, decision: Decision, seen: _Seen) -> Result:
        """Perform the decision's actions in order; stop at the first that must be retried or
        failed. A run of consecutive *independent* actions of one type (e.g. a group's
        binds) is performed concurrently, each unit with the RecordEvents that follow it."""
        # Action records are queued (publish_async) and flushed before the reconcile returns,
        # so the trigger is still acked only once they are stored, and an action does not
        # wait for the previous one's record.
        records = self.bus.batch()
        try:
            return await self._perform_units(key, cause, decision, records, seen)
        finally:
            try:
                # A replicated stream electing a new leader answers nothing for a few seconds;
                # the effect has happened, so its record is sent again rather than lost.
                published = await records.flush(retry_for=self.RECORD_RETRY_S)
            except TimeoutError:
                published = []
                log.warning("%s: action records for %s not confirmed in time", self.spec.name, key)
            for res in published:
                if res.error is not None:
                    log.warning(
                        "%s: could not publish action record for %s: %s",
                        self.spec.name,
                        key,
                        res.error,
                    )

    async def _perform_units(
        self, key: str, cause: int, decision: Decision, records: BatchPublisher, seen: _Seen
    ) -> Result:
        units: list[list[AnyAction]] = []
        for action in decision.actions:
            if isinstance(action, RecordEvent) and units:
                units[-1].append(action)
            else:
                units.append([action])
        i = 0
        while i < len(units):
            head = units[i][0]
            j = i + 1
            if head.independent:
                while j < len(units) and type(units[j][0]) is type(head):
                    j += 1
            if self.fence is not None and self.fence() is None:
                # The lease may already be someone else's: act no more (fencing,
                # docs/architecture.md "Running many workers").
                return RetryLater(1.0, "lease not held; not acting")
            ops = await self._intend(key, cause, decision, [u[0] for u in units[i:j]], seen)
            if j - i == 1:
                results = [
                    await self._perform_unit(key, cause, decision, units[i], ops[0], records, seen)
                ]
            else:
                # A TaskGroup, not gather: a cancelled gather leaves a future whose
                # CancelledError nobody retrieves ("_GatheringFuture exception was never
                # retrieved" at every lease loss under load).
                async with asyncio.TaskGroup() as tg:
                    tasks = [
                        tg.create_task(
                            self._perform_unit(key, cause, decision, u, op, records, seen)
                        )
                        for u, op in zip(units[i:j], ops, strict=True)
                    ]
                results = [t.result() for t in tasks]
            failed = [r for r in results if isinstance(r, GiveUp)]
            if failed:
                return failed[0]
            retries = [r for r in results if isinstance(r, RetryLater)]
            if retries:
                return max(retries, key=lambda r: r.delay)
            i = j
        return OK

    async def _intend(
        self, key: str, cause: int, decision: Decision, heads: list[AnyAction], seen: _Seen
    ) -> list[str]:
        """Store an ``intended`` record for each action of ``heads`` that will reach an
        effector, and wait until the stream has stored them all (write-ahead).

        Returns each action's ``op_id`` (``""``: nothing to intend — a Kubernetes Event, an
        operation known to be unsupported). Raises :class:`_LogRefused` when any record
        was refused or not acknowledged within ``worker.intentTimeout``.
        """
        ops: list[str] = []
        sends: list[asyncio.Future[Any]] = []
        subject = subjects.act_subject(self.spec.name, self.spec.key_kind, key)
        timeout = self.settings.intent_timeout
        error: str | None = None
        for action in heads:
            if isinstance(action, RecordEvent) or act.encode(action) in self._unsupported:
                ops.append("")
                continue
            op = self._next_id()
            ops.append(op)
            record = self._record_of(
                key, cause, action, "intended", decision.reason, "", 0.0, seen, op
            )
            # Every record is sent before any answer is awaited; a refusal resolves its
            # future with the stream's error (AckedPublisher), not only a timeout.
            try:
                data = act.encode(record)
                sends.append(await self.bus.acked.publish(subject, data, {MSG_ID: op}))
            except Exception as exc:  # noqa: BLE001 - not sent: the reconcile stops below
                error = error or _nats_error(exc)
        if not sends and error is None:
            return ops
        late: set[asyncio.Future[Any]] = set()
        if sends:
            _, late = await asyncio.wait(sends, timeout=timeout)
        for send in late:
            send.cancel()
        if late and error is None:
            error = (
                f"no acknowledgement within {timeout:g} s (a nats-server that cannot "
                "write its store, e.g. ENOSPC, stops answering publishes)"
            )
        for send in sends:
            refused = None if send.cancelled() else send.exception()
            if refused is not None and error is None:
                error = _nats_error(refused)
        if error is not None:
            self._refused(key, error)
            raise _LogRefused(error)
        if self.log_refusal is not None:
            log.warning(
                "%s: stream %s stores action records again; resuming",
                self.spec.name,
                streams.ACT_STREAM,
            )
            self.log_refusal = None
            self._refusals = 0
        return ops

    def _next_id(self) -> str:
        """A new action-record id: 32 hex digits, unique per record (``_id_prefix``)."""
        return f"{self._id_prefix}{next(self._id_seq):012x}"

    def _refused(self, key: str, error: str) -> None:
        """Note a refused write-ahead record; said once per back-off step (1st, 2nd, 4th …
        refusal in a row), so the warning lasts as long as the refusal does."""
        self._refusals += 1
        store = self._describe_store() if self._describe_store is not None else "the NATS server"
        self.log_refusal = f"stream {streams.ACT_STREAM} ({store}) refuses action records: {error}"
        metrics.LOG_REFUSALS.labels(self.spec.name).inc()
        if self._refusals & (self._refusals - 1) == 0:
            log.error(
                "%s %s: %s; nothing is performed until it stores them (refusal %d in a row)",
                self.spec.name,
                key,
                self.log_refusal,
                self._refusals,
            )

    async def _perform_unit(
        self,
        key: str,
        cause: int,
        decision: Decision,
        unit: list[AnyAction],
        op_id: str,
        records: BatchPublisher,
        seen: _Seen,
    ) -> Result:
        previous: str | None = None
        for action in unit:
            if isinstance(action, RecordEvent):
                # Each Event hangs on the outcome of the action it follows.
                if previous is None or previous in action.on or action.once:
                    await self._emit_event(key, cause, decision.reason, action)
                continue
            if not op_id:  # an operation this API version lacks: recorded once already
                previous = "unsupported-again"
                continue
            if self.fence is not None and self.fence() is None:
                return RetryLater(1.0, "lease not held; not acting")
            t0 = time.perf_counter()

            async def record(
                outcome: act.Outcome, error: str, a: AnyAction = action, t: float = t0
            ) -> None:
                await self._record(
                    records, key, cause, a, outcome, decision.reason, error, t, seen, op_id
                )

            try:
                res = await self.effector.apply(action)
            except Transient as exc:
                await record("retry", str(exc))
                return RetryLater(exc.delay if exc.delay is not None else -1.0, str(exc))
            except Permanent as exc:
                await record("failed", str(exc))
                return GiveUp(f"{act.action_name(action)}: {exc}")
            except Exception as exc:
                log.exception("%s: effector raised on %s", self.spec.name, key)
                await record("retry", repr(exc))
                return RetryLater(-1.0, f"effector raised {exc!r}")
            previous = res.outcome
            if res.outcome in ("ok", "noop"):
                self._expect(key, action)
            if res.outcome == "unsupported":
                # Level-based reconciles would ask again at every trigger: the API version
                # is fixed for the process, so the operation is not sent (nor intended) again.
                self._unsupported.add(act.encode(action))
                marker = (act.action_name(action), res.detail)
                if marker in self._unsupported_seen:
                    previous = "unsupported-again"  # announced (Event) once per worker
                self._unsupported_seen.add(marker)
            await record(res.outcome, res.detail)
        return OK

    async def _emit_event(self, key: str, cause: int, reason: str, action: RecordEvent) -> None:
        """Create a Kubernetes Event without holding the reconcile, as client-go's event
        recorder does: Events are best-effort, and a reconcile waiting for one would delay
        the key's next reconcile (a group's binds waited for its "submitted" Event). At most
        :attr:`MAX_EVENTS_IN_FLIGHT` run at once; beyond that this waits for a free slot."""
        while len(self._events) >= self.MAX_EVENTS_IN_FLIGHT:
            await asyncio.wait(set(self._events), return_when=asyncio.FIRST_COMPLETED)
        task = asyncio.create_task(self._event(key, cause, reason, action))
        self._events.add(task)
        task.add_done_callback(self._events.discard)

    async def _event(self, key: str, cause: int, reason: str, action: RecordEvent) -> None:
        t0 = time.perf_counter()
        records = self.bus.batch()
        outcome: act.Outcome
        try:
            res = await self.effector.apply(action)
            outcome, detail = res.outcome, res.detail
        except (Transient, Permanent) as exc:
            outcome, detail = "failed", str(exc)
        except Exception as exc:  # an Event is never worth a crash
            log.exception("%s: effector raised on an Event for %s", self.spec.name, key)
            outcome, detail = "failed", repr(exc)
        await self._record(records, key, cause, action, outcome, reason, detail, t0)
        with contextlib.suppress(Exception):
            await records.flush(retry_for=self.RECORD_RETRY_S)

    def _record_of(
        self,
        key: str,
        cause: int,
        action: AnyAction,
        outcome: act.Outcome,
        reason: str,
        error: str,
        duration_s: float,
        seen: _Seen | None,
        op_id: str = "",
    ) -> ActionRecord:
        return ActionRecord(
            reconciler=self.spec.name,
            key_kind=self.spec.key_kind,
            key=key,
            action=action,
            outcome=outcome,
            reason=reason,
            error=error,
            cause_seq=cause,
            duration_s=duration_s,
            at=time.time_ns(),
            worker=self.instance_id,
            lease_revision=(self.fence() or 0) if self.fence is not None else 0,
            view_seq=seen.view_seq if seen is not None else 0,
            decided_at=seen.at if seen is not None else 0.0,
            op_id=op_id,
        )

    async def _record(
        self,
        records: BatchPublisher,
        key: str,
        cause: int,
        action: AnyAction,
        outcome: act.Outcome,
        reason: str,
        error: str,
        t0: float,
        seen: _Seen | None = None,
        op_id: str = "",
    ) -> None:
        record = self._record_of(
            key, cause, action, outcome, reason, error, time.perf_counter() - t0, seen, op_id
        )
        metrics.ACTIONS.labels(self.spec.name, act.action_name(action), outcome).inc()
        log.info(
            "%s %s %s: %s",
            self.spec.name,
            key,
            act.action_name(action),
            outcome,
            extra={"trigger_seq": cause, "reconciler": self.spec.name, "key": key},
        )
        try:
            await records.publish(
                subjects.act_subject(self.spec.name, self.spec.key_kind, key),
                act.encode(record),
                # A unique id makes sending a record again (flush's retry) store it once.
                msg_id=self._next_id(),
            )
        except Exception as exc:  # noqa: BLE001 - the effect happened; losing its record is logged
            log.warning("%s: could not publish action record for %s: %s", self.spec.name, key, exc)

    def _retry_unasked(self, key: str, result: Result, *, asked: bool) -> None:
        """Retry a reconcile that no message asked for (the start-up resync, a requeue
        timer, a key the gate let go): there is nothing to nak, so a ``RetryLater`` becomes
        a timer of its own, with the project's back-off per consecutive failure of the key.

        Without it the retry was lost until the key's next observation, which for a finished
        group never comes (the chaos test: a job left RUNNING after its pods succeeded,
        because the cancel was tried from a timer while slurmrestd failed).
        """
        if not isinstance(result, RetryLater):
            self._unasked_failures.pop(key, None)
            return
        if asked:  # the message's nak (or its dead letter) settles it
            return
        n = self._unasked_failures.get(key, 0) + 1
        self._unasked_failures[key] = n
        self._requeue(key, max(result.delay, backoff(n)))

    def _requeue(self, key: str, delay: float) -> None:
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()

        def fire() -> None:
            self._timers.pop(key, None)
            self._queue.add(key, None)

        self._timers[key] = asyncio.get_running_loop().call_later(max(0.0, delay), fire)

    async def _complete(self, t: _Tracker, result: Result) -> None:
        if isinstance(result, GiveUp):
            t.give_up = result
        elif isinstance(result, RetryLater) and (t.retry is None or result.delay > t.retry.delay):
            t.retry = result
        t.remaining -= 1
        if t.remaining <= 0:
            await self._finish(t)

    async def _finish(self, t: _Tracker) -> None:
        """Settle a message whose keys are all reconciled: ack, nak(delay) or term."""
        self._held.discard(t)
        if t.give_up is not None:
            await self._dead_letter(t.msg, t.seq, t.num_delivered, t.give_up.reason)
            await t.msg.term()
        elif t.retry is not None:
            if t.num_delivered >= self.settings.max_deliver:
                await self._dead_letter(
                    t.msg,
                    t.seq,
                    t.num_delivered,
                    f"exhausted max_deliver ({self.settings.max_deliver}): {t.retry.reason}",
                )
                await t.msg.term()
            else:
                delay = t.retry.delay if t.retry.delay >= 0 else backoff(t.num_delivered)
                await t.msg.nak(delay=delay)
        else:
            await t.msg.ack()
        self.settled += 1

    async def _dead_letter(self, msg: Any, seq: int, delivered: int, reason: str) -> None:
        metrics.DEAD_LETTERS.labels(self.spec.name).inc()
        log.warning(
            "%s: dead letter seq=%d: %s",
            self.spec.name,
            seq,
            reason,
            extra={"trigger_seq": seq, "reconciler": self.spec.name},
        )
        record = DeadLetter(
            reconciler=self.spec.name,
            subject=msg.subject,
            stream_seq=seq,
            reason=reason,
            num_delivered=delivered,
            data=bytes(msg.data),
            at=time.time_ns(),
            worker=self.instance_id,
        )
        await self.bus.publish(subjects.dlq_subject(self.spec.name), act.encode(record))

    # --- introspection for tests and the harness ------------------------------------------
    @property
    def idle(self) -> bool:
        """True when no key is queued or being reconciled."""
        return not self._queue.pending and not self._queue.inflight and not self._events

    def waiting(self) -> dict[str, str]:
        """The keys decided again later, not by a message: key → why (held by the gate,
        or a re-check or retry on a timer)."""
        out = dict.fromkeys(self._timers, "timer")
        out.update({key: f"held: {why}" for key, why in self._parked.items()})
        return out


def _nats_error(exc: BaseException) -> str:
    """A NATS publish error in words: the server's code and description where it gave them
    (``503 insufficient resources`` …)."""
    code = getattr(exc, "code", None)
    description = getattr(exc, "description", None)
    err_code = getattr(exc, "err_code", None)
    if code or description:
        extra = f" (err_code {err_code})" if err_code else ""
        return f"{type(exc).__name__}: {code or ''} {description or ''}".rstrip() + extra
    return repr(exc)


def _why(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"unknown kind {exc.args[0]!r}"
    return str(exc)
