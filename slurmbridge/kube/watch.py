"""The shared list + watch loop (:class:`Watcher`), its back-off (:class:`Backoff`) and outage
logging (:class:`Outage`).

Translation only — no decisions. :func:`producers.kube.translate.node_to_event`,
:func:`~producers.kube.translate.pod_to_event` and
:func:`~producers.kube.translate.workload_to_event` are the pure translations; the watchers
(:class:`producers.kube.watch.NodeWatcher`, :class:`~producers.kube.watch.PodWatcher` for pods
with our ``schedulerName``, :class:`~producers.kube.watch.WorkloadWatcher` for Jobs,
JobSets, LeaderWorkerSets and PodGroups) share :class:`Watcher`, which does the I/O:

1. **list** nodes (raw JSON, decoded straight into msgspec Structs: kubernetes_asyncio's
   generated models are slow to build for large lists and are not needed for a trimmed
   snapshot), publish what differs from what was last published, and a tombstone for every
   node that vanished since (so deletions missed while not watching are not lost);
2. **watch** from the list's resourceVersion with bookmarks; every event is translated and
   published (identical trimmed content — e.g. a kubelet heartbeat — is not re-published);
3. on ``410 Gone``, an in-stream ERROR, a broken stream or a timeout: re-watch from the last
   resourceVersion, or re-list when it expired. The task is supervised: any unexpected error
   is logged and the cycle restarts with back-off instead of ending the producer.

Failures back off quietly (:class:`Backoff`: exponential with jitter, capped, never sooner than
the server's ``Retry-After``): an API server that restarts answers 503 on custom resources
until their paths are installed, then 429 "storage is (re)initializing" for several seconds,
and eleven watchers retrying at once used to log a warning per attempt. :class:`Outage` logs
one warning when a watcher starts failing (repeated with back-off while the outage lasts:
:mod:`slurmbridge.observability.outage`) and one info line, with the outage's length, once
its watch stream delivers again.

Liveness is exported per watcher (``slurmbridge_watch_seconds_since_alive``,
``slurmbridge_watch_connected``): a real API server sends a bookmark only when the kind's
resourceVersion moved past the one the watch started from (none at all on an idle kind), so a
healthy quiet watch is alive because its stream is open and the server ends it cleanly every
``watch_timeout`` seconds, not because events arrive.

What was last published is seeded from the projection (the log), so a restarted producer
re-publishes nothing that did not change. ``Nats-Msg-Id`` is ``uid:resourceVersion`` (for a
tombstone ``uid:resourceVersion:deleted``), so two producers watching at once dedupe.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Generic, TypeVar

import aiohttp
import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas import subjects
from schemas.events import (
    Event,
    KubeListed,
)
from slurmbridge.kube import errors
from slurmbridge.kube.api import ApiStatusError, check_status, describe, read_raw, retry_after
from slurmbridge.kube.wire import DECODE_LIST_PAGE, DECODE_STATUS, DECODE_WATCH
from slurmbridge.observability import metrics
from slurmbridge.observability.outage import OutageLog
from slurmbridge.runtime.gcpause import collector_paused
from slurmbridge.runtime.outcomes import backoff

log = logging.getLogger(__name__)


E = TypeVar("E", bound=Event)
#: Publishes a batch of (observation, Nats-Msg-Id) and waits until the log holds it.
Publish = Callable[[list[tuple[Any, str]]], Awaitable[object]]
#: Sends one (observation, Nats-Msg-Id) and returns the future of its acknowledgement.
Send = Callable[[Any, str], Awaitable["asyncio.Future[Any]"]]


def same_content(a: Event, b: Event) -> bool:
    """True when two observations differ at most in envelope fields (version, time, producer)."""
    strip = {"observed_at": 0, "version": "", "producer": ""}
    same: bool = msgspec.structs.replace(a, **strip) == msgspec.structs.replace(b, **strip)
    return same


class Backoff:
    """Exponential back-off with jitter, capped, that honours the server's ``Retry-After``.

    The n-th failure in a row waits a random time between half and all of
    ``min(cap, base · 2ⁿ⁻¹)`` ("equal jitter": watchers that fail together do not come back
    together), and never less than the server asked (``Retry-After``, trusted up to
    ``max_retry_after``). ``base`` 0.2 s re-opens a broken stream at once; ``cap`` 10 s keeps
    the bridge's own recovery within seconds of the API server's (client-go's reflectors cap
    at 30 s, sized for thousands of kubelets; these are a dozen watches of one process).
    ``rng`` is injectable so tests see the exact delays.
    """

    def __init__(
        self,
        *,
        base: float = 0.2,
        cap: float = 10.0,
        max_retry_after: float = 60.0,
        rng: random.Random | None = None,
    ) -> None:
        self.base = base
        self.cap = cap
        self.max_retry_after = max_retry_after
        self.rng = rng or random.Random()
        self.failures = 0

    def next_delay(self, retry_after: float | None = None) -> float:
        """Count one more failure; the seconds to wait before the next attempt."""
        self.failures += 1
        step = backoff(self.failures, base=self.base, cap=self.cap)
        delay = step * (0.5 + 0.5 * self.rng.random())
        if retry_after is not None and retry_after > 0:
            delay = max(delay, min(retry_after, self.max_retry_after))
        return delay

    def reset(self) -> None:
        """The next failure starts again from ``base`` (after a proven recovery)."""
        self.failures = 0


class Outage:
    """The back-off (:class:`Backoff`) and the log lines (:class:`OutageLog`: a warning when
    it starts failing, repeated with back-off while it lasts, one info line with the outage's
    length and attempts when it works again) of one thing that retries (a watcher, a
    Secret's watch).

    ``what`` names it in every line (``"watch nodes"``); ``logger`` is the caller's module
    logger, ``clock`` a monotonic clock (injectable for tests).
    """

    def __init__(
        self,
        what: str,
        *,
        logger: logging.Logger | None = None,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = OutageLog(what, logger=logger or log, clock=clock)
        self.backoff = backoff or Backoff()

    @property
    def what(self) -> str:
        """What fails, as every line names it."""
        return self.log.what

    @what.setter
    def what(self, value: str) -> None:
        self.log.what = value

    @property
    def since(self) -> float | None:
        """When the current outage began (the clock's time), None while working."""
        return self.log.since

    @property
    def attempts(self) -> int:
        """Failed attempts in the current outage."""
        return self.log.attempts

    @property
    def failing(self) -> bool:
        """True from the first failure until :meth:`recovered`."""
        return self.log.failing

    def failed(self, exc: BaseException, *, crash: bool = False) -> float:
        """Record a failed attempt; returns the seconds to wait before the next one.

        The first failure of an outage is a warning (``crash``: an error with the traceback,
        as it is a bug rather than the server), repeated with back-off while it lasts; the
        others are debug lines."""
        delay = self.backoff.next_delay(retry_after(exc))
        if crash:
            self.log.failed(describe(exc), level=logging.ERROR, exc_info=exc, first="crashed")
        else:
            self.log.failed(describe(exc))
        return delay

    def recovered(self) -> None:
        """It works again: log the outage once (when there was one) and reset the back-off."""
        self.backoff.reset()
        self.log.recovered()


class Expired(Exception):  # noqa: N818 - mirrors the API server's reason
    """The watch's resourceVersion is too old (410 Gone): re-list."""


class PublishLost(Exception):  # noqa: N818
    """An observation may not have been stored: re-list and republish everything."""


#: Watch events published but not yet acknowledged, at most.
WINDOW = 1024


#: The watcher exporting each ``resource`` label (several may exist in one process, e.g. a
#: standby taking over): only it sets, and at its end removes, that label's series.
_EXPORTING: dict[str, Watcher[Any]] = {}


class Watcher(Generic[E]):
    """List + watch one Kubernetes resource, publishing trimmed observations of type ``E``.

    Subclasses say how to request (:meth:`_call`), decode (:meth:`_decode_list`,
    :meth:`_decode_item`) and translate (:meth:`_translate`, :meth:`_tombstone`).
    ``publish`` receives ``[(event, msg_id), …]`` and must persist them before returning.
    ``seed`` are the last published observations (from the projection).
    """

    resource = ""
    #: Objects per list request (``limit``); client-go's reflector pages by 500.
    list_page_size = 500
    #: Seconds a re-opened watch stream must stay open without an error (or deliver a line,
    #: or end cleanly) before an outage counts as over: a server that accepts the watch and
    #: then sends an in-stream error (410 after a restart) has not recovered yet.
    confirm_after = 1.0

    def __init__(
        self,
        api: client.ApiClient,
        publish: Publish,
        *,
        producer: str,
        seed: dict[str, E],
        label_selector: str = "",
        watch_timeout: int = 300,
        send: Send | None = None,
    ) -> None:
        self.api = api
        self.publish = publish
        self.send = send
        self._inflight: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._republish = False
        self.producer = producer
        self.last: dict[str, E] = dict(seed)
        #: Tombstones sent by the watch and not acknowledged yet, by key: a relist after a
        #: lost publish must still tombstone those objects (they left ``last`` when sent).
        self.unacked_tombstones: dict[str, E] = {}
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.resource_version = ""
        #: Monotonic time of the last watch line (event or bookmark); set per line.
        self.last_event_at = time.monotonic()
        #: Monotonic time the watch was otherwise last known alive: a list, a (re)connect,
        #: a clean end of the stream (see :meth:`age`).
        self.alive_at = self.last_event_at
        #: Failures, back-off and their log lines (named once ``resource`` is known).
        self.outage = Outage("watch", logger=log)
        self._confirm: asyncio.TimerHandle | None = None
        self.listed = asyncio.Event()
        self.relists = 0
        self.missing = False
        self.missing_retry = 60.0
        #: True while a watch stream is open (tests wait for it before breaking streams).
        self.watching = False
        self._watch_resp: Any = None
        self._store_failed = False

    def _selector(self) -> dict[str, Any]:
        return {"label_selector": self.label_selector} if self.label_selector else {}

    # --- what a subclass provides ----------------------------------------------------------

    async def _call(self, **kwargs: Any) -> Any:
        """The list (or, with ``watch=True``, watch) request, ``_preload_content=False``."""
        raise NotImplementedError

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        """The raw items of a list response and its resourceVersion."""
        raise NotImplementedError

    def _decode_item(self, data: bytes) -> Any:
        """One raw object of a watch event (with ``metadata.resourceVersion``)."""
        raise NotImplementedError

    def _translate(self, raw: Any, now: int) -> E:
        raise NotImplementedError

    def _observed(self, raw: Any, *, deleted: bool) -> None:
        """Called with each object a list or a watch event delivers (``deleted``: a DELETED
        event), before it is translated; nothing by default (the pod watcher keeps a copy
        for the pod writes, :mod:`slurmbridge.kube.cache`)."""

    def _tombstone(self, last: E, version: str, now: int) -> E:
        raise NotImplementedError

    def _msg_id(self, ev: E) -> str:
        return f"{getattr(ev, 'uid', '')}:{ev.version}" + (":deleted" if ev.deleted else "")

    def age(self) -> float:
        """Seconds since the watch was last known alive: its last event or bookmark, or the
        last successful list, watch (re)connect, or clean end of a stream (the server closes
        every watch after ``watch_timeout`` seconds).

        Not "since the last event": an API server sends a bookmark only when the kind's
        resourceVersion moved past the one the watch started from (the watch cache,
        cache_watcher.go ``process``), so on an idle kind none comes at all. A healthy watch
        therefore stays under ``watch_timeout`` (plus a reconnect); above it, the stream is
        stuck or the watcher keeps failing.
        """
        return time.monotonic() - max(self.last_event_at, self.alive_at)

    def problem(self, *, max_age: float) -> str | None:
        """Why this watcher keeps its process from being ready, or None (no I/O): its first
        list is not complete yet (the log lacks a complete listing of the resource), or it
        was last known alive more than ``max_age`` seconds ago (:meth:`age`). A resource
        the API server does not serve is fine: "none of them" is a complete answer."""
        if self.missing:
            return None
        if not self.listed.is_set():
            why = f"{self.resource}: not listed yet"
            if self.outage.failing:
                why += f" (failing for {self.outage.log.lasted():.1f} s: {self.outage.log.reason})"
            return why
        age = self.age()
        if age > max_age:
            return f"{self.resource}: no sign of life for {age:.0f} s"
        return None

    async def run(self) -> None:
        """Run forever: list, watch, re-watch or re-list as needed (supervised).

        Failures back off (:class:`Backoff`, honouring ``Retry-After``) and are logged once
        per outage (:class:`Outage`); the outage ends when a watch stream delivers again."""
        self.outage.what = f"watch {self.resource}"
        self._export()
        try:
            while True:
                try:
                    if not self.resource_version:
                        await self.relist()
                    await self.watch_once()
                except asyncio.CancelledError:
                    raise
                except Expired:
                    metrics.WATCH_RESTARTS.labels(self.resource, "expired").inc()
                    self.resource_version = ""
                except PublishLost as exc:
                    metrics.WATCH_RESTARTS.labels(self.resource, "publish").inc()
                    log.warning(
                        "watch %s: an observation may be lost (%s); re-listing", self.resource, exc
                    )
                    self.resource_version = ""
                    self._republish = True
                except ApiException as exc:
                    if not isinstance(errors.typed(exc), errors.NotFound):
                        metrics.WATCH_RESTARTS.labels(self.resource, "error").inc()
                        await asyncio.sleep(self.outage.failed(exc))
                        continue
                    # The resource is not served (a CRD that is not installed, an API a server
                    # of this release lacks): look again now and then, without filling the log.
                    # The server did answer: an outage before (a restart's 503s) is over.
                    self.outage.recovered()
                    if not self.missing:
                        log.info(
                            "%s are not served by this API server; checking every %.0f s",
                            self.resource,
                            self.missing_retry,
                        )
                        if not self.last:
                            # None can exist: a complete, empty list (a pod naming a
                            # PodGroup of an uninstalled CRD is placed from its owner).
                            # Objects seen before are kept, not tombstoned: an API server
                            # that is starting answers 404 for CRDs until it serves them.
                            await self._listed("", time.time_ns())
                    self.missing = True
                    await asyncio.sleep(self.missing_retry)
                except (aiohttp.ClientError, TimeoutError, ConnectionError) as exc:
                    metrics.WATCH_RESTARTS.labels(self.resource, "error").inc()
                    await asyncio.sleep(self.outage.failed(exc))
                except Exception as exc:  # noqa: BLE001 - supervised; Outage logs the traceback
                    metrics.WATCH_RESTARTS.labels(self.resource, "crash").inc()
                    self.resource_version = ""
                    await asyncio.sleep(self.outage.failed(exc, crash=True))
        finally:
            self._unexport()

    # --- liveness ----------------------------------------------------------------------------

    def _export(self) -> None:
        """Export this watcher's liveness: the age is computed when Prometheus scrapes."""
        _EXPORTING[self.resource] = self
        metrics.WATCH_ALIVE_AGE.labels(self.resource).set_function(self.age)
        metrics.WATCH_CONNECTED.labels(self.resource).set(1 if self.watching else 0)

    def _unexport(self) -> None:
        if _EXPORTING.get(self.resource) is not self:
            return
        del _EXPORTING[self.resource]
        for gauge in (metrics.WATCH_ALIVE_AGE, metrics.WATCH_CONNECTED):
            with contextlib.suppress(KeyError):
                gauge.remove(self.resource)

    def _connected(self, resp: Any) -> None:
        """A watch stream is open: alive now; the outage (if any) ends once it delivers."""
        self.watching = True
        self._watch_resp = resp
        self.alive_at = time.monotonic()
        if _EXPORTING.get(self.resource) is self:
            metrics.WATCH_CONNECTED.labels(self.resource).set(1)
        if self.outage.failing:
            self._confirm = asyncio.get_running_loop().call_later(
                self.confirm_after, self._recovered
            )

    def _recovered(self) -> None:
        if self._confirm is not None:
            self._confirm.cancel()
            self._confirm = None
        self.outage.recovered()

    def _disconnected(self) -> None:
        self.watching = False
        self._watch_resp = None
        if self._confirm is not None:
            self._confirm.cancel()
            self._confirm = None
        if _EXPORTING.get(self.resource) is self:
            metrics.WATCH_CONNECTED.labels(self.resource).set(0)

    async def relist(self) -> None:
        """List everything, publish changes and tombstones, remember the resourceVersion.

        The list is read in pages of :attr:`list_page_size` objects (``limit`` and
        ``continue``, as client-go's reflector does): one response for 150,000 pods is a
        203 MB body decoded and translated in one go, which held 1.3 GB and the event loop
        for 5.2 s; in pages, 535 MB and 69 ms (``bench/kube_scale.py``). Every page is
        served from the first page's snapshot (one resourceVersion); an expired continue
        token fails the relist, and the run loop lists again.
        """
        self.relists += 1
        now = time.time_ns()
        seen: set[str] = set()
        list_rv = ""
        async for items, rv in self._list_pages():
            list_rv = list_rv or rv
            batch: list[tuple[E, str]] = []
            with collector_paused():
                for raw in items:
                    self._observed(raw, deleted=False)
                    ev = self._translate(raw, now)
                    seen.add(ev.key)
                    prev = self.last.get(ev.key)
                    if self._republish or prev is None or not same_content(prev, ev):
                        # The list's resourceVersion in the id: a state stored before under
                        # its own id (uid:rv) may since have been overtaken in the log by an
                        # older one (another producer's late publish), and must be stored
                        # again now; two producers listing the same snapshot still dedupe.
                        batch.append((ev, f"{self._msg_id(ev)}@{list_rv}"))
                del items
            if batch:
                await self._publish(batch)
        # An object whose tombstone is unacknowledged may still be live in the log.
        known = {**self.unacked_tombstones, **self.last}
        gone = [self._tombstone(known[key], list_rv, now) for key in set(known) - seen]
        if gone:
            await self._publish([(tomb, self._msg_id(tomb)) for tomb in gone])
        self.unacked_tombstones.clear()
        await self._relisted(list_rv, now)

    async def _list_pages(self) -> AsyncIterator[tuple[list[Any], str]]:
        """Read the list in pages of :attr:`list_page_size` (``limit`` and ``continue``):
        each page's decoded items and the list's resourceVersion.

        Raises:
            ApiStatusError: the API server refused a page (an expired continue token: the run
                loop lists again).
        """
        token = ""
        while True:
            paging: dict[str, Any] = {"limit": self.list_page_size}
            if token:
                paging["_continue"] = token
            body = await read_raw(self._call(**self._selector(), **paging))
            # A page makes thousands of long-lived objects at once: collections during it
            # would only re-scan them (slurmbridge.runtime.gcpause; no await inside).
            with collector_paused():
                page = DECODE_LIST_PAGE.decode(body).metadata
                items, rv = self._decode_list(body)
                del body
            yield items, rv
            token = page.continue_ or ""
            if not token:
                return

    async def _relisted(self, list_rv: str, now: int) -> None:
        """Close a relist: last, after every object and tombstone of the list, the
        ``KubeListed`` marker (the log now holds a complete list of this resource:
        reconcilers.base.kube_listed); then remember the list's resourceVersion."""
        await self._listed(list_rv, now)
        self.missing = False
        self._republish = False
        self.resource_version = list_rv
        self.alive_at = time.monotonic()
        self.listed.set()

    async def _listed(self, version: str, now: int) -> None:
        """Publish the ``KubeListed`` marker of this resource at ``version`` (two producers
        listing the same resourceVersion dedupe on the message id)."""
        marker = KubeListed(
            source=subjects.KUBE_SOURCE,
            key=self.resource,
            observed_at=now,
            version=version,
            producer=self.producer,
            resource=self.resource,
        )
        await self.publish([(marker, f"listed:{self.resource}:{version}")])

    async def _publish(self, batch: list[tuple[E, str]]) -> None:
        await self._drain_inflight()
        try:
            await self.publish(batch)
        except BaseException:
            # It may be stored with its acknowledgement lost. The next list republishes
            # everything: diffing against what was acknowledged would miss an object that
            # has meanwhile reverted to that content, leaving the unacknowledged state in
            # the log (as the Slurm poller's uncertain objects).
            self._republish = True
            raise
        for ev, _ in batch:
            if ev.op == "deleted":
                self.last.pop(ev.key, None)
            else:
                self.last[ev.key] = ev

    async def watch_once(self) -> None:
        """One watch request from ``resource_version`` until it ends.

        Raises:
            Expired: the server answered 410 Gone (in-stream or as HTTP status).
        """
        try:
            resp: Any = await self._call(
                watch=True,
                resource_version=self.resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.watch_timeout,
                _request_timeout=self.watch_timeout + 30,
                **self._selector(),
            )
        except ApiException as exc:
            if isinstance(errors.typed(exc), errors.Gone):
                raise Expired(str(exc.reason)) from exc
            raise
        if resp.status >= 300:
            try:
                body = await resp.read()
            finally:
                resp.release()
            if resp.status == 410:
                raise Expired(DECODE_STATUS.decode(body).message if body else "410 Gone")
            check_status(resp, body)
        self._connected(resp)
        try:
            while True:
                try:
                    line = await resp.content.readline()
                except (aiohttp.ClientError, ConnectionError):
                    if not self._store_failed:
                        raise
                    line = b""
                if self._store_failed:
                    self._store_failed = False
                    self._inflight.clear()
                    raise PublishLost("an observation was not stored")
                if not line:
                    # The server closed the stream (timeoutSeconds): alive, re-watch.
                    self.alive_at = time.monotonic()
                    if self.outage.failing:
                        self._recovered()
                    return
                if line.strip():
                    await self._on_line(line)
                    if self._confirm is not None:
                        self._recovered()  # it delivers: the outage is over
        finally:
            self._disconnected()
            resp.release()

    async def _on_line(self, line: bytes) -> None:
        ev = DECODE_WATCH.decode(line)
        self.last_event_at = time.monotonic()
        if ev.type == "ERROR":
            status = DECODE_STATUS.decode(ev.object)
            if status.code == 410:
                raise Expired(status.message)
            wait = status.details.retryAfterSeconds if status.details is not None else 0
            raise ApiStatusError(status.code, status.message, float(wait) or None)
        raw = self._decode_item(ev.object)
        if raw.metadata.resourceVersion:
            self.resource_version = raw.metadata.resourceVersion
        if ev.type == "BOOKMARK":
            return
        self._observed(raw, deleted=ev.type == "DELETED")
        now = time.time_ns()
        if ev.type == "DELETED":
            current = self._translate(raw, now)
            base = self.last.get(current.key) or current
            tomb = self._tombstone(base, raw.metadata.resourceVersion, now)
            await self._send(tomb, self._msg_id(tomb))
            return
        obj = self._translate(raw, now)
        prev = self.last.get(obj.key)
        if prev is not None and same_content(prev, obj):
            return
        await self._send(obj, self._msg_id(obj))

    async def _send(self, ev: E, msg_id: str) -> None:
        """Publish one watch event without waiting for its acknowledgement (bounded window).

        A failed publish is found at the next event (or when the window is full) and raises
        :class:`PublishLost`: the run loop re-lists and republishes every node (deduplicated by
        ``Nats-Msg-Id`` where nothing was lost). On a quiet resource there may be no next
        event: the failure then closes the open watch (:meth:`_on_stored`), with the same
        result.
        """
        if self.send is None:
            await self._publish([(ev, msg_id)])
            return
        fut = await self.send(ev, msg_id)
        fut.add_done_callback(self._on_stored)
        self._inflight.append(fut)
        if ev.op == "deleted":
            self.last.pop(ev.key, None)
            self.unacked_tombstones[ev.key] = ev
            fut.add_done_callback(functools.partial(self._tombstone_stored, ev))
        else:
            self.unacked_tombstones.pop(ev.key, None)
            self.last[ev.key] = ev
        while self._inflight and (self._inflight[0].done() or len(self._inflight) > WINDOW):
            fut = self._inflight.popleft()
            try:
                await fut
            except Exception as exc:
                self._inflight.clear()
                raise PublishLost(str(exc)) from exc

    def _tombstone_stored(self, tomb: E, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            return
        if self.unacked_tombstones.get(tomb.key) is tomb:
            del self.unacked_tombstones[tomb.key]

    def _on_stored(self, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is None:
            return
        self._store_failed = True
        resp = self._watch_resp
        if resp is not None:
            resp.close()  # the reading loop wakes up and re-lists (see watch_once)

    async def _drain_inflight(self) -> None:
        pending, self._inflight = self._inflight, collections.deque()
        results = await asyncio.gather(*pending, return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise PublishLost(str(failed[0]))


def seed_from(values: Any) -> dict[str, Any]:
    """Index the projection's live observations by key (the producer's seed)."""
    return {n.key: n for n in values if isinstance(n, Event)}
