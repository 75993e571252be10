"""Slurm producer: poll slurmrestd, publish changed SlurmNode / SlurmPartition / SlurmJob /
SlurmPing.

Translation only. The pure functions of :mod:`producers.slurm.translate` map the client's
version-neutral models to events; :class:`SlurmPoller`
polls every ``poll_interval`` seconds on a fixed schedule (not "sleep after work", so the
period does not drift with the cost of a poll), using ``update_time`` conditional requests
where the API version offers them (``None`` = 304 Not Modified = nothing to diff).

Diffing is against what was last published, seeded from the projection (the log), so a
restarted poller re-publishes nothing. An object missing from a full listing gets a tombstone.
A failed poll publishes a ``SlurmPing`` with ``responding=False`` and the error, and never
tombstones anything (a Slurm outage must not look like every node vanished). A good poll's
``SlurmPing`` comes last in its batch, so a consumer that has applied it has applied the
listings of that poll too (the marker reconcilers check before acting on an absence).
What the polls said lately is kept in memory (:class:`PollHealth`: the last answered poll,
since when the token is rejected) for the process's readiness check, and a failure that lasts
is warned about again with back-off (:class:`~slurmbridge.observability.outage.OutageLog`).

``version`` is a content hash of the snapshot; ``Nats-Msg-Id`` is
``<kind>:<key>:<hash>:<seq of the previous observation of the key>``, so two pollers of one
cluster that publish the same transition dedupe, while a flip back to an earlier state still
gets a new id (its previous sequence differs). An object this poller knows nothing of (its
first sighting, or the first after the poller started from a log that holds only its
tombstone) has no previous sequence: its id names the poll's time instead
(``…:new<observed_at>``). A constant there would repeat the id of the object's earlier first
sighting, and inside the duplicate window the server would drop this one as its copy (found
by the chaos test: a node deleted, back within two minutes with the same content, after a
restart of the poller, never reached the log).

A publish that fails may still have been stored (the server kept it, its acknowledgement was
lost). Its objects are then *uncertain*: the next poll publishes each of them again whatever
the diff says, under an id that names the failure (``…:lost<n>``). Without this, an object
that reverted meanwhile to what was last acknowledged (a node deleted and registered again
between two polls) looked unchanged, and the log kept the unacknowledged state for good
(found by the chaos test: a Slurm node tombstoned in the log while Slurm listed it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from producers.slurm.translate import job_to_event, node_to_event, partition_to_event, ping_to_event
from schemas import events
from schemas.events import Event, SlurmJob
from slurmbridge.observability import metrics
from slurmbridge.observability.outage import OutageLog
from slurmbridge.runtime.bus import Published
from slurmbridge.runtime.gcpause import collector_paused
from slurmbridge.slurm import errors as slurm_errors
from slurmbridge.slurm.client import JobStateMemo, SlurmClient
from slurmbridge.slurm.models import Job

log = logging.getLogger(__name__)


M = TypeVar("M")


Publish = Callable[[Sequence[tuple[Event, str]]], Awaitable[list[Published]]]


@dataclass(slots=True)
class PollHealth:
    """What the polls of one cluster said lately, for readiness checks (read without I/O).

    Times are ``time.monotonic()`` seconds. A poll is *answered* when every request of it
    succeeded (so slurmrestd and slurmctld accepted the token); *rejected* when it failed
    with :class:`~slurmbridge.slurm.errors.Unauthorized` (a token refused by slurmrestd or
    slurmctld, or none to send: :class:`~slurmbridge.slurm.errors.MissingToken`).
    """

    #: The last answered poll (None: none yet).
    answered_at: float | None = None
    #: Since when the polls have had their token rejected (None: the last failure was not a
    #: rejection, or the last poll was answered). A failure that says nothing of the token
    #: (slurmrestd unreachable) leaves it as it was.
    rejected_since: float | None = None
    #: The rejection, e.g. ``token rejected (HTTP 401)`` or ``no token`` ("" when none),
    #: and the error that said so (as :attr:`error`).
    rejection: str = ""
    rejection_error: str = ""
    #: The last poll's error, at most :attr:`ERROR_CHARS` of it ("" when it was answered);
    #: never holds the token.
    error: str = ""

    ERROR_CHARS: ClassVar[int] = 160

    def answered(self, now: float) -> None:
        """A poll was answered at ``now``."""
        self.answered_at, self.rejected_since, self.error = now, None, ""
        self.rejection = self.rejection_error = ""

    def failed(self, exc: slurm_errors.SlurmError, now: float) -> None:
        """A poll failed at ``now`` with ``exc``."""
        error = " ".join(f"{type(exc).__name__}: {exc}".split())
        # slurmrestd's answer may be quoted whole in the message: a reason is one short line.
        self.error = error if len(error) <= self.ERROR_CHARS else error[: self.ERROR_CHARS] + "…"
        if isinstance(exc, slurm_errors.MissingToken):
            rejection = "no token"
        elif isinstance(exc, slurm_errors.Unauthorized):
            code = f"HTTP {exc.status}" if exc.status >= 300 else ""
            if exc.error_number:
                code += (", " if code else "") + f"Slurm error {exc.error_number}"
            rejection = f"token rejected ({code})" if code else "token rejected"
        elif isinstance(exc, slurm_errors.Unavailable):
            return
        else:
            self.rejected_since, self.rejection = None, ""
            return
        if self.rejected_since is None:
            self.rejected_since = now
        self.rejection, self.rejection_error = rejection, self.error

    def problem(self, *, now: float, grace: float) -> str | None:
        """Why this cluster makes the process not ready, or None: no poll answered yet, or
        the token rejected for more than ``grace`` seconds (at once when no poll was ever
        answered). Another failure after an answered poll (slurmctld down) is Slurm's outage,
        not this process's: the pings in the log and the Cluster's status carry it."""
        if self.rejected_since is not None and (
            self.answered_at is None or now - self.rejected_since > grace
        ):
            lasted = now - self.rejected_since
            return f"{self.rejection} for {lasted:.1f} s ({self.rejection_error})"
        if self.answered_at is None:
            return "no poll answered yet" + (f" (last: {self.error})" if self.error else "")
        return None


A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
D = TypeVar("D")


async def _together(
    a: Awaitable[A], b: Awaitable[B], c: Awaitable[C], d: Awaitable[D]
) -> tuple[A, B, C, D]:
    """Await the four at once; results in order.

    Raises:
        Exception: the first in argument order of those that raised: once one fails, the
            ones before it are awaited (so the error a sequential poll would have raised —
            the ping's, saying why a token is refused — is the one raised, whichever
            answered first), and those after it are cancelled and awaited, so none goes on
            changing the poller's state after the poll has failed.
    """
    ta, tb, tc, td = (
        asyncio.ensure_future(a),
        asyncio.ensure_future(b),
        asyncio.ensure_future(c),
        asyncio.ensure_future(d),
    )
    tasks: list[asyncio.Future[Any]] = [ta, tb, tc, td]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        failed = [i for i, t in enumerate(tasks) if t.done() and t.exception() is not None]
        if failed:
            await asyncio.wait(tasks[: failed[0] + 1])
            for t in tasks[: failed[0] + 1]:
                if (exc := t.exception()) is not None:
                    raise exc
        return ta.result(), tb.result(), tc.result(), td.result()
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class HotPace:
    """How long the hot loop waits before its next round: ``interval`` seconds while
    something changed in the last ``calm`` seconds, then doubled after each quiet round up
    to ``idle`` seconds.

    A quiet round named the same jobs as the one before and read none of them whole; a
    hint (the loop was woken), a job joining or leaving the hot set, or a job read whole
    brings the wait back to ``interval``. Why: a long queue that nobody leaves (no free
    node) would otherwise be asked every 20 ms for ever, 50 requests a second from an idle
    bridge — several % of a core (issue 30 item 4); a start after a quiet spell is then seen
    within ``idle`` seconds. Why ``calm``: slurmctld starts jobs in scheduling passes, a
    few at a time with quiet rounds between them; doubling from the first quiet round made
    the wait 160–320 ms by the next pass, and a start was logged 89 ms (p50) after it was
    visible through slurmrestd on real Slurm 26.05 at 50 pods/s (``bench/workload.py
    --slurm real``, issue 30 item 6). ``clock``: seconds, monotonic.
    """

    def __init__(
        self,
        interval: float,
        idle: float,
        calm: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.idle = max(interval, idle)
        self.calm = calm
        self._clock = clock
        self._quiet = 0
        self._busy_at = clock()
        self._last: Sequence[int] = ()

    @property
    def wait(self) -> float:
        """Seconds to wait before the next round."""
        return min(self.interval * float(2**self._quiet), self.idle)

    def after_round(self, *, woken: bool, ids: Sequence[int], reads: int) -> None:
        """A round named ``ids`` and read ``reads`` of them whole; ``woken``: it was started
        by a wake-up, not by its wait running out."""
        busy = woken or reads > 0 or list(ids) != list(self._last)
        now = self._clock()
        if busy:
            self._busy_at = now
            self._quiet = 0
        elif now - self._busy_at >= self.calm:
            # Capped: the wait stops growing at ``idle`` anyway, and 2**n must stay a float.
            self._quiet = min(self._quiet + 1, 30)
        self._last = ids

    def hint(self) -> None:
        """Something may change soon (a hinted job is still pending): the wait is back to
        ``interval`` for at least ``calm`` seconds."""
        self._busy_at = self._clock()
        self._quiet = 0


class SlurmPoller:
    """Polls one Slurm cluster and publishes what changed.

    ``seed``: last published observation and its stream sequence per (kind, key), from the
    projection. ``publish``: persists a batch and returns the stream sequences in order.
    """

    #: ``GET job/{id}`` requests in flight while a poll reads the jobs whose state changed.
    JOB_GETS_IN_FLIGHT = 4
    #: Seconds between hot rounds at most once they keep finding nothing to read (the wait
    #: doubles from ``hot_interval`` each quiet round).
    HOT_IDLE_INTERVAL = 0.32

    def __init__(
        self,
        client: SlurmClient,
        publish: Publish,
        *,
        cluster: str,
        producer: str,
        poll_interval: float,
        seed: dict[tuple[str, str], tuple[Event, int]],
        poll_jobs: bool = True,
        hot_jobs: Callable[[int], Iterable[int]] | None = None,
        hinted_jobs: Callable[[int], Iterable[int]] | None = None,
        hot_interval: float = 0.02,
        hot_limit: int = 128,
        job_relist_interval: float = 30.0,
        job_fetch_limit: int = 64,
    ) -> None:
        self.client = client
        self.publish = publish
        self.cluster = cluster
        self.producer = producer
        self.poll_interval = poll_interval
        self.last: dict[tuple[str, str], tuple[Event, int]] = dict(seed)
        #: kind → keys whose last published observation is not a tombstone: the candidates
        #: for a tombstone when a full listing lacks them (a set difference, not a scan).
        self._live: dict[str, set[str]] = {}
        #: Objects whose last publish failed, so may or may not be in the log (module doc).
        self._uncertain: set[tuple[str, str]] = set()
        #: Failed publishes so far (names the republish's message id).
        self._lost = 0
        for (kind, key), (ev, _) in self.last.items():
            if ev.op != "deleted":
                self._live.setdefault(kind, set()).add(key)
        self._node_update: int | None = None
        self._part_update: int | None = None
        self._job_update: int | None = None
        self.poll_jobs = poll_jobs
        self.hot_jobs = hot_jobs
        self.hinted_jobs = hinted_jobs
        self.hot_interval = hot_interval
        self.hot_limit = hot_limit
        self.job_relist_interval = job_relist_interval
        self.job_fetch_limit = job_fetch_limit
        #: monotonic time of the last complete job listing this poller published (None: none
        #: yet), and whether the server offers ``jobs/state`` (cleared on Unsupported).
        self._jobs_listed_at: float | None = None
        self._job_states_offered = True
        #: whether the hot loop may ask ``jobs/state`` by id (cleared on Unsupported).
        self._hot_states_offered = True
        #: jobs the last hot round read whole (``GET job/{id}``), and those of them whose
        #: state had moved (a start, an end: :meth:`_out_of_step`)
        self._hot_reads = 0
        self._hot_moved = 0
        #: the last hot round's failure (repr), said once at WARNING
        self._hot_error = ""
        #: job key → state of its last published live SlurmJob (what ``jobs/state`` is
        #: compared against; kept by _record so the comparison is one dict lookup per job).
        self._job_state: dict[str, tuple[str, ...]] = {}
        for (_kind, key), (ev, _) in self.last.items():
            if isinstance(ev, SlurmJob) and ev.op != "deleted":
                self._job_state[key] = ev.state
        # A state poll examines only the jobs that may be out of step (_job_state_delta):
        #: the previous state list, raw (what the next one is compared with);
        self._state_memo = JobStateMemo()
        #: jobs recorded since the last state poll (by a full listing or the hot loop);
        self._job_touched: set[str] = set()
        #: jobs a state poll could not bring in step (a GET that found nothing, a poll that
        #: failed): examined again by the next one;
        self._job_recheck: set[str] = set()
        #: this poll's examined jobs and state list, checked once its batch is published.
        self._job_check: tuple[set[str], dict[str, tuple[str, ...]]] | None = None
        self._lock = asyncio.Lock()
        self.polls = 0
        self.last_poll_at = 0.0
        self.polled = asyncio.Event()
        self._wake = asyncio.Event()
        self._poll_now = asyncio.Event()
        #: What the polls said lately (readiness reads it).
        self.health = PollHealth()
        # A failure that lasts is said again after 3 poll intervals (when readiness turns on
        # a rejected token), 6, 12 … (the pings in the log and the error counter carry the
        # rest).
        self.outage = OutageLog(
            f"poll of Slurm cluster {cluster}", logger=log, repeat=max(3 * poll_interval, 0.1)
        )
        # kind → key → (model, its event) of the last full listing (see _translate).
        self._models: dict[str, dict[str, tuple[object, Event]]] = {}
        self._pending_models: dict[str, dict[str, tuple[object, Event]]] = {}

    def poll_soon(self) -> None:
        """Start the next full poll now instead of at the next slot (e.g. a new token)."""
        self._poll_now.set()

    def wake(self) -> None:
        """Run the hot loop's next GET now instead of at the end of its interval."""
        self._wake.set()

    async def run(self) -> None:
        """Poll forever on a fixed schedule (and, with ``hot_jobs``, watch those jobs closely)."""
        if self.hot_jobs is not None and self.poll_jobs:
            hot = asyncio.create_task(self._hot_loop(), name="slurm-hot-jobs")
            try:
                await self._full_loop()
            finally:
                hot.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await hot
        else:
            await self._full_loop()

    async def _hot_loop(self) -> None:
        """Every ``hot_interval`` seconds (up to :attr:`HOT_IDLE_INTERVAL` while rounds find
        nothing: see the loop's end), read the jobs ``hot_jobs(hot_limit)`` names (at
        most ``hot_limit``: one ``jobs/state`` request naming them, :meth:`poll_jobs_once`)
        and publish those that changed.

        Why: a pod waits for its placeholder job to start, and a full listing every poll
        interval would add up to that interval to every start. The jobs to watch are chosen
        by the caller from the log (jobs named by unbound pods and not yet seen RUNNING,
        slurmbridge.app.HotJobs), so the producer still only translates what Slurm says.

        ``hot_limit`` (128): the jobs one round may name, so a queue of any length costs one
        request of at most that many ids (~1.6 KB of URL; real slurmrestd 26.05 answered
        4,096 ids in one request). 128 covers every job the 50 pods/s bench keeps waiting
        on 20 nodes (at most 63), and half of it (the head of the queue) more jobs than
        slurmctld starts on those nodes at once.
        """
        assert self.hot_jobs is not None
        pace = HotPace(self.hot_interval, self.HOT_IDLE_INTERVAL)
        next_at = time.monotonic()  # the next regular round
        while True:
            woken = False
            with contextlib.suppress(TimeoutError):
                woken = await asyncio.wait_for(
                    self._wake.wait(), max(0.0, next_at - time.monotonic())
                )
            self._wake.clear()
            if woken and self.hinted_jobs is not None and time.monotonic() < next_at:
                # A hint between regular rounds: a round of the hinted jobs alone (see
                # _hinted_round), the regular schedule kept.
                if await self._hinted_round(pace):
                    next_at = min(next_at, time.monotonic() + pace.wait)
                continue
            # The caller's order: the most urgent first (slurmbridge.app.HotJobs).
            ids = list(dict.fromkeys(self.hot_jobs(self.hot_limit)))[: self.hot_limit]
            if ids:
                await self._hot_round(ids)
            pace.after_round(
                woken=woken and self.hinted_jobs is None, ids=ids, reads=self._hot_reads
            )
            next_at = time.monotonic() + pace.wait

    async def _hinted_round(self, pace: HotPace) -> bool:
        """One round naming only the jobs ``hinted_jobs`` names (just submitted or cancelled by
        this process); True when it made the loop busy again.

        Why not a regular round at once: behind a long queue a regular round names
        ``hot_limit`` jobs, and a hint used to start one and keep the loop at its interval
        for ``calm`` seconds — 50 requests of 128 ids for each pod placed behind 10,000
        jobs nobody can start, in the bridge and in slurmrestd (bench/idle_queue.py, issue
        30 item 4). A hinted job whose new state was published by this round (it started,
        or ended, at once) asks nothing more of the loop; one still pending, or not yet in
        the answer, brings the loop back to its interval, as any hint did before: its start
        may come with slurmctld's next scheduling pass (item 6)."""
        assert self.hinted_jobs is not None
        ids = list(dict.fromkeys(self.hinted_jobs(self.hot_limit)))[: self.hot_limit]
        if not ids:
            return False
        await self._hot_round(ids)
        if self._hot_moved >= len(ids):
            return False
        pace.hint()
        return True

    async def _hot_round(self, ids: Sequence[int]) -> None:
        """:meth:`poll_jobs_once` for the hot loop: a failure is logged (once per distinct
        failure at WARNING, since the loop runs every 20 ms), never raised."""
        self._hot_reads = self._hot_moved = 0
        try:
            await self.poll_jobs_once(ids)
        except slurm_errors.SlurmError as exc:
            log.debug("hot job poll failed: %s", exc)
        except Exception as exc:  # noqa: BLE001 - e.g. the log unreachable: next round
            text = repr(exc)
            level = logging.DEBUG if text == self._hot_error else logging.WARNING
            log.log(level, "hot job poll of cluster %s not stored: %s", self.cluster, text)
            self._hot_error = text
        else:
            self._hot_error = ""

    async def poll_jobs_once(self, job_ids: Sequence[int]) -> int:
        """GET each job of ``job_ids`` that may have changed (:meth:`_out_of_step`) and publish
        the ones that did; returns how many. The jobs that moved (a start, an end) are read
        and published first, then the first :attr:`JOB_GETS_IN_FLIGHT` of those the log only
        lacks (just submitted, still pending).

        Why two batches: a round's GETs run a few at a time and its batch is published once
        all are read, so a start waited behind every new job of its round — up to 1 s at 50
        pods/s on a loaded machine (bench/workload.py --slurm real --trace-rest, issue 30
        item 6), while nobody waits for a pending job to reach the log (its pods wait for
        its start).

        A job Slurm no longer knows is *not* tombstoned here: only a full listing may say an
        object vanished.
        """
        now = time.time_ns()
        moved, lacking = await self._out_of_step(job_ids)
        self._hot_reads = len(moved) + len(lacking)
        self._hot_moved = len(moved)
        done = 0
        # At most one batch of GETs in flight for the jobs the log only lacks: the round that
        # read all of them (40 just submitted at 50 pods/s, on a loaded machine) held the
        # loop's next look at the starts for seconds; the rest are read by the next rounds
        # (each asks jobs/state for them again), or by the full poll, whichever comes first.
        for ids in (moved, lacking[: self.JOB_GETS_IN_FLIGHT]):
            if ids:
                done += await self._read_and_publish(ids, now)
        return done

    async def _read_and_publish(self, ids: Sequence[int], now: int) -> int:
        """GET each job of ``ids`` (a few at a time) and publish those that changed."""
        gate = asyncio.Semaphore(self.JOB_GETS_IN_FLIGHT)

        async def get(job_id: int) -> Job | None:
            async with gate:
                return await self.client.get_job(job_id)

        jobs = await asyncio.gather(*(get(j) for j in ids))
        found = [
            job_to_event(j, cluster=self.cluster, producer=self.producer, observed_at=now)
            for j in jobs
            if j is not None
        ]
        async with self._lock:
            changed = [ev for ev in found if self._changed(ev)]
            if changed:
                results = await self._publish(changed)
                for ev, res in zip(changed, results, strict=True):
                    self._record(ev, res.seq)
        return len(changed)

    async def _out_of_step(self, job_ids: Sequence[int]) -> tuple[list[int], list[int]]:
        """Of ``job_ids``, in the caller's order, from one ``GET jobs/state/`` naming them all:
        ``(moved, lacking)``. ``moved``: those whose state differs from their last published
        observation, and those the log lacks (never published, or their last publish may
        have failed) whose state is not PENDING (one that started at once). ``lacking``: the
        rest the log lacks, pending or not in the answer — read whole too, since their
        state alone could not show whether the log has them. Where the server has no
        ``jobs/state`` (v0.0.38), every one of ``job_ids`` is ``moved``: each is read whole,
        as before.

        Why: the hot loop runs every ``hot_interval`` (20 ms) while pods wait; one GET per
        waiting job each round was most of the bridge's Slurm requests at 50 pods/s
        (bench/workload.py), and each cost slurmrestd a job read. A waiting job whose state
        is unchanged is not read: a change that leaves the state alone (its reason, its
        place) waits for the next full poll, as in :meth:`_job_state_delta`.
        """
        if not self._job_states_offered or not self._hot_states_offered:
            return list(job_ids), []
        try:
            states = await self.client.job_states_of(job_ids)
        except slurm_errors.Unsupported:
            self._hot_states_offered = False
            return list(job_ids), []
        known, uncertain = self._job_state, self._uncertain
        moved: list[int] = []
        lacking: list[int] = []
        for j in job_ids:
            k = str(j)
            state = states.get(k)
            if k in known and ("SlurmJob", k) not in uncertain:
                if state is not None and state != known[k]:
                    moved.append(j)
            elif state is None or state[:1] == ("PENDING",):
                lacking.append(j)
            else:
                moved.append(j)
        return moved, lacking

    async def _full_loop(self) -> None:
        next_at = time.monotonic()
        while True:
            try:
                await self.poll_once()
            except Exception as exc:  # noqa: BLE001 - the log is unreachable: try next slot
                # Nothing was recorded as published (nor the watermarks advanced), and the
                # objects of a failed publish are uncertain: the next poll publishes them again
                # (module doc).
                log.warning("poll of Slurm cluster %s not stored: %r", self.cluster, exc)
            next_at += self.poll_interval
            now = time.monotonic()
            if next_at < now:  # a slow poll: skip missed slots instead of bursting
                next_at = now + self.poll_interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poll_now.wait(), next_at - now)
                next_at = time.monotonic()
            self._poll_now.clear()

    async def poll_once(self) -> int:
        """One poll cycle; returns the number of observations published."""
        started = time.perf_counter()
        now = time.time_ns()
        batch: list[Event] = []
        # The watermarks advance only once this poll's changes are published: a failure
        # half-way must not make the next conditional poll skip what this one saw.
        node_mark, part_mark = self._node_update, self._part_update
        job_mark = self._job_update
        try:
            # The four reads at once, not one after another: each await of a busy event
            # loop waits behind every other ready task (at 50 pods/s on a loaded machine,
            # 0.4–0.7 s per step although slurmrestd answered in 10–30 ms), and four
            # steps in a row made the poll 2–10 s late (bench/workload.py --slurm real
            # --trace-rest, issue 30 item 6).
            ping, nodes, parts, jobs_read = await _together(
                self.client.ping(),
                self.client.list_nodes(update_time=self._node_update),
                self.client.list_partitions(update_time=self._part_update),
                self._read_jobs(now),
            )
            # Nodes and partitions are stamped with the arrival of their answers: whatever a
            # listing shows happened before then, so an effect (a drain) sorts before the
            # observation that reports it (slurmbridge explain). Jobs keep the poll's start,
            # which the hot loop's newer copies are compared with (_stale).
            received = time.time_ns()
            ping_ev = ping_to_event(
                ping, cluster=self.cluster, producer=self.producer, observed_at=now
            )
            c, who = self.cluster, self.producer
            if nodes is not None:
                found, seen = self._translate(
                    "SlurmNode", nodes.nodes, node_to_event, lambda n: n.name, received
                )
                batch += self._diff("SlurmNode", found, seen, received)
                node_mark = nodes.last_update or None
            if parts is not None:
                found = [
                    partition_to_event(p, cluster=c, producer=who, observed_at=received)
                    for p in parts.partitions
                ]
                batch += self._diff("SlurmPartition", found, {ev.key for ev in found}, received)
                part_mark = parts.last_update or None
            job_events, job_mark, jobs_listed = jobs_read
            batch += job_events
            # Last: whoever sees a good ping in the log has seen the listings before it
            # (reconcilers.base.slurm_listed).
            batch.append(ping_ev)
        except slurm_errors.SlurmError as exc:
            node_mark, part_mark = self._node_update, self._part_update
            # The next good poll lists the jobs whole, unconditionally: the failure may be
            # slurmctld restarting from older state, which forgets the latest jobs and hands
            # their ids out again — a reused id in the state its lost job had looks unchanged
            # to ``jobs/state`` until the next relist (up to job_relist_interval).
            job_mark = None
            self._jobs_listed_at = None
            jobs_listed = False
            self._pending_models.clear()
            self._job_check = None  # what it examined stays to recheck
            metrics.POLL_ERRORS.labels(self.cluster).inc()
            self.health.failed(exc, time.monotonic())
            self.outage.failed(f"{type(exc).__name__}: {exc}")
            batch = [
                ping_to_event(
                    None,
                    cluster=self.cluster,
                    error=str(exc),
                    error_kind=type(exc).__name__,
                    producer=self.producer,
                    observed_at=now,
                )
            ]
        else:
            self.health.answered(time.monotonic())
            self.outage.recovered()
        async with self._lock:
            changed: list[Event] = []
            for ev in batch:
                if self._stale(ev):
                    # A job the hot loop saw after this poll began is newer than this copy.
                    continue
                if self._changed(ev):
                    changed.append(ev)
                elif (events.kind_of(ev), ev.key) in self.last:
                    # The same content under a new object (e.g. the first poll after a
                    # restart, against what was seeded from the log): remember this object,
                    # so the next listing recognises it by identity and skips it.
                    self.last[(events.kind_of(ev), ev.key)] = (ev, self.last_seq(ev))
            if changed:
                results = await self._publish(changed)
                for ev, res in zip(changed, results, strict=True):
                    self._record(ev, res.seq)
        self._models.update(self._pending_models)
        self._pending_models.clear()
        self._settle_job_states()
        self._node_update, self._part_update = node_mark, part_mark
        self._job_update = job_mark
        if jobs_listed:
            self._jobs_listed_at = time.monotonic()
        self.polls += 1
        self.last_poll_at = time.monotonic()
        self.polled.set()
        metrics.POLL_SECONDS.labels(self.cluster).observe(time.perf_counter() - started)
        return len(changed)

    async def _read_jobs(self, now: int) -> tuple[list[Event], int | None, bool]:
        """The job part of a poll: its observations, the job watermark to keep once they are
        published, and whether they are a complete listing (from ``GET jobs``, not the
        ``jobs/state`` delta). Nothing when the poller does not poll jobs."""
        if not self.poll_jobs:
            return [], self._job_update, False
        delta = await self._job_state_delta(now) if self._states_will_do() else None
        if delta is not None:
            return delta, self._job_update, False
        jobs = await self.client.list_jobs(update_time=self._job_update)
        if jobs is None:
            return [], self._job_update, True
        found, seen = self._translate(
            "SlurmJob", jobs.jobs, job_to_event, lambda j: str(j.job_id), now
        )
        return self._diff("SlurmJob", found, seen, now), jobs.last_update or None, True

    def _states_will_do(self) -> bool:
        """Whether this poll may learn the jobs from ``jobs/state`` instead of a full listing:
        the server offers it, a complete listing was published less than
        ``job_relist_interval`` seconds ago, and the interval is not 0 (full listings only)."""
        return (
            self._job_states_offered
            and self.job_relist_interval > 0
            and self._jobs_listed_at is not None
            and time.monotonic() - self._jobs_listed_at < self.job_relist_interval
        )

    async def _job_state_delta(self, now: int) -> list[Event] | None:
        """The job observations of this poll from ``GET jobs/state``, or None when a full
        listing must be read instead.

        A job whose state differs from its last published observation, or that is new, is
        read whole (``GET job/{id}``); a job the state list lacks is tombstoned, as a full
        listing lacking it would be. A change that leaves the state alone (a pending job's
        partition or name) waits for the next full listing, at most ``job_relist_interval``
        seconds — Slinky re-lists its jobs every 30 s; a job slurmbridge itself changed is
        watched by the hot loop meanwhile. More than ``job_fetch_limit`` changed jobs: None
        (one listing is cheaper than that many GETs).

        Only jobs that may be out of step are examined: those whose state-list entries
        changed since the previous state list (the client compares raw entries,
        :class:`JobStateMemo`), those recorded since (a full listing, the hot loop) and those
        an earlier state poll left out of step. The first state poll of a poller examines
        every job. After this poll is published, :meth:`_settle_job_states` keeps the
        examined jobs still out of step for the next one.

        Why: a busy cluster's full job listing is ~1 KB per job on every poll (about 100 MB
        for 100,000 jobs) and costs slurmctld a job-table dump; the state list is ~80 B per
        job, and comparing only its changed entries keeps the per-job work of a poll in C
        (bench/scale.py measures both).
        """
        try:
            listing = await self.client.list_job_states(self._state_memo)
        except slurm_errors.Unsupported as exc:
            log.info("cluster %s: %s; listing every job each poll", self.cluster, exc)
            self._job_states_offered = False
            self._job_touched.clear()
            self._job_recheck.clear()
            return None
        states = listing.states
        live = self._live.get("SlurmJob", set())
        examine = self._job_touched | self._job_recheck
        self._job_touched = set()
        if listing.changed is None:
            examine.update(states)
            examine.update(live)
        else:
            examine.update(listing.changed)
        # Until this poll is published and checked, every examined job stays to recheck.
        self._job_recheck = examine
        self._job_check = (examine, states)
        known = self._job_state
        dirty = [k for k in examine if k in states and known.get(k) != states[k]]
        if len(dirty) > self.job_fetch_limit:
            self._job_check = None
            return None
        found: list[Event] = []
        if dirty:
            # A few at a time: each concurrent GET opens a connection, and httpx's pool
            # bookkeeping grows with them (measured: ~150 ms per poll for 40 at once).
            gate = asyncio.Semaphore(self.JOB_GETS_IN_FLIGHT)

            async def get(key: str) -> Job | None:
                async with gate:
                    return await self.client.get_job(int(key))

            jobs = await asyncio.gather(*(get(k) for k in sorted(dirty, key=int)))
            found = [
                job_to_event(j, cluster=self.cluster, producer=self.producer, observed_at=now)
                for j in jobs
                if j is not None
            ]
        gone = [k for k in examine if k not in states and k in live]
        return found + [
            events.tombstone(
                self.last[("SlurmJob", key)][0],
                version="deleted",
                producer=self.producer,
                observed_at=now,
            )
            for key in sorted(gone, key=int)
        ]

    def _settle_job_states(self) -> None:
        """After a state poll's batch is published: of the jobs it examined, keep to recheck
        those still out of step with the state list (a GET that found nothing, a job that
        changed again between the list and its GET, an observation dropped as stale)."""
        if self._job_check is None:
            return
        examined, states = self._job_check
        self._job_check = None
        known, live = self._job_state, self._live.get("SlurmJob", set())
        self._job_recheck = {
            k for k in examined if (known.get(k) != states[k] if k in states else k in live)
        }

    def _translate(
        self,
        kind: str,
        models: Sequence[M],
        translate: Callable[..., Event],
        key: Callable[[M], str],
        now: int,
    ) -> tuple[list[Event], Collection[str]]:
        """Events for ``models`` that may have changed, and every key of the listing.

        A model object seen in the previous listing (the client hands back the same object for an
        unchanged item, :class:`slurmbridge.slurm.codecs._common.ItemMemo`) keeps its event; when
        that event is also the one last published, the object is unchanged and left out, so a large,
        mostly unchanged cluster costs no translation, hashing or comparison per object.
        """
        previous = self._models.get(kind, {})
        last = self.last
        current: dict[str, tuple[object, Event]] = {}
        out: list[Event] = []
        with collector_paused():  # a first listing translates 100,000 jobs at once
            for m in models:
                k = key(m)
                seen = previous.get(k)
                if seen is not None and seen[0] is m and (kind, k) not in self._uncertain:
                    published = last.get((kind, k))
                    if published is not None and published[0] is seen[1]:
                        current[k] = seen
                        continue
                # Translated afresh even for a known model: something else (the hot loop, a
                # jobs/state poll) published this object since, and an event of the earlier
                # listing would carry that listing's time and be taken for stale.
                ev = translate(m, cluster=self.cluster, producer=self.producer, observed_at=now)
                current[k] = (m, ev)
                out.append(ev)
        # Committed once this poll is published: an event that failed to publish must be
        # translated (and compared) again next time, not reused.
        self._pending_models[kind] = current
        return out, current.keys()

    def _diff(
        self, kind: str, current: list[Event], seen: Collection[str], now: int
    ) -> list[Event]:
        """``current`` plus a tombstone for each live object of ``kind`` the listing lacks."""
        gone = self._live.get(kind, set()).difference(seen)
        return current + [
            events.tombstone(
                self.last[(kind, key)][0],
                version="deleted",
                producer=self.producer,
                observed_at=now,
            )
            for key in sorted(gone)
        ]

    def last_seq(self, ev: Event) -> int:
        """The stream sequence of the last published observation of ``ev``'s object (0: none)."""
        prev = self.last.get((events.kind_of(ev), ev.key))
        return prev[1] if prev is not None else 0

    async def _publish(self, changed: Sequence[Event]) -> list[Published]:
        """Publish ``changed``; on failure its objects become uncertain (module doc)."""
        keyed = [(ev, self._msg_id(ev)) for ev in changed]
        try:
            return await self.publish(keyed)
        except BaseException:
            self._lost += 1
            self._uncertain.update((events.kind_of(ev), ev.key) for ev in changed)
            raise

    def _record(self, ev: Event, seq: int) -> None:
        kind = events.kind_of(ev)
        self._uncertain.discard((kind, ev.key))
        self.last[(kind, ev.key)] = (ev, seq)
        live = self._live.setdefault(kind, set())
        if kind == "SlurmJob" and self._job_states_offered and self.job_relist_interval > 0:
            self._job_touched.add(ev.key)
        if ev.op == "deleted":
            live.discard(ev.key)
            if kind == "SlurmJob":
                self._job_state.pop(ev.key, None)
        else:
            live.add(ev.key)
            if isinstance(ev, SlurmJob):
                self._job_state[ev.key] = ev.state

    def _stale(self, ev: Event) -> bool:
        prev = self.last.get((events.kind_of(ev), ev.key))
        return prev is not None and prev[0].observed_at > ev.observed_at

    def _changed(self, ev: Event) -> bool:
        if (events.kind_of(ev), ev.key) in self._uncertain:
            return True
        prev = self.last.get((events.kind_of(ev), ev.key))
        if prev is None:
            return ev.op != "deleted"
        return prev[0].version != ev.version or prev[0].op != ev.op

    def _msg_id(self, ev: Event) -> str:
        kind = events.kind_of(ev)
        if (kind, ev.key) in self._uncertain:
            return f"{kind}:{ev.key}:{ev.version}:lost{self._lost}"
        prev = self.last.get((kind, ev.key))
        if prev is None:
            return f"{kind}:{ev.key}:{ev.version}:new{ev.observed_at}"
        return f"{kind}:{ev.key}:{ev.version}:{prev[1]}"
