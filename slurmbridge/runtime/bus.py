"""The NATS JetStream side of the runtime: connection, streams, consumers, publishing.

* :func:`connect` opens one connection (URL, user/password, token, creds file, nkey, TLS) that
  reconnects forever; a worker survives a nats-server restart without restarting itself.
* :meth:`Bus.ensure_streams` creates the missing streams of :mod:`schemas.streams` at start-up
  and never changes an existing one (it warns naming how it differs);
  :meth:`Bus.plan_streams` only reads them (``slurmbridge streams``) and
  :meth:`Bus.apply_streams` creates and updates them (``slurmbridge streams --apply``).
  :meth:`Bus.ensure_consumer` creates or updates a durable consumer idempotently
  (``add_consumer`` before binding, because nats-py ignores the config of an existing durable
  when subscribing).
* :class:`AckedPublisher` sends JetStream publishes and resolves a future per message with
  its acknowledgement or its refusal (nats-py's ``publish_async``, leaner, and with refusals
  resolved instead of lost). :class:`BatchPublisher` publishes through it in bounded windows
  and a deterministic ``Nats-Msg-Id`` per message, so retried publishes and duplicate
  producers are deduplicated by the server inside the stream's duplicate window. A fresh
  headers dict is built for every message (nats-py writes into the dict it is given).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import functools
import itertools
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import nats
import nats.errors
import nats.js.errors
import orjson
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext, api
from nats.js.errors import NotFoundError

from schemas.streams import ConsumerSpec, StreamSpec
from slurmbridge.config import NatsSettings, redact_url
from slurmbridge.runtime.outcomes import backoff

log = logging.getLogger(__name__)

MSG_ID = "Nats-Msg-Id"

T = TypeVar("T")


async def connect(
    settings: NatsSettings,
    url: str,
    *,
    name: str = "slurmbridge",
    on_state: Callable[[str], Awaitable[None]] | None = None,
) -> Bus:
    """Connect to ``url`` with the credentials in ``settings``.

    ``on_state`` is awaited with ``"disconnected"`` / ``"reconnected"`` / ``"closed"``.

    While no server answers, it keeps trying (a worker may start before NATS does).

    Raises:
        NatsRefusedError: a server refused the credentials or TLS failed (certificate not trusted,
            or none presented where one is required): permanent, so not retried.
    """
    tls: ssl.SSLContext | None = None
    if settings.tls_ca or settings.tls_cert or url.startswith("tls://"):
        tls = ssl.create_default_context(cafile=settings.tls_ca)
        if settings.tls_cert:
            tls.load_cert_chain(settings.tls_cert, settings.tls_key)

    refused: asyncio.Future[Exception] = asyncio.get_running_loop().create_future()
    outage = Outage()

    async def _err(exc: Exception) -> None:
        if not refused.done() and _is_refusal(exc):
            refused.set_result(exc)
        outage.error(exc)

    def _cb(state: str) -> Callable[[], Awaitable[None]]:
        async def cb() -> None:
            if state == "disconnected":
                outage.disconnected()
            elif state == "reconnected":
                outage.reconnected()
            else:
                log.info("nats %s", state)
            if on_state is not None:
                await on_state(state)

        return cb

    opts: dict[str, Any] = {
        "servers": [u.strip() for u in url.split(",")],
        "name": name,
        "connect_timeout": settings.connect_timeout,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": 0.25,
        "allow_reconnect": True,
        "error_cb": _err,
        "disconnected_cb": _cb("disconnected"),
        "reconnected_cb": _cb("reconnected"),
        "closed_cb": _cb("closed"),
        # Big enough for a relist burst; the server enforces its own limits anyway.
        "pending_size": 64 * 1024 * 1024,
    }
    if settings.user:
        opts["user"] = settings.user
        opts["password"] = settings.password or ""
    if settings.token:
        opts["token"] = settings.token
    if settings.creds_file:
        opts["user_credentials"] = settings.creds_file
    if settings.nkey_seed_file:
        opts["nkeys_seed"] = settings.nkey_seed_file
    if tls is not None:
        opts["tls"] = tls
    # nats-py retries a refused first connection forever, like an unreachable one.
    connecting = asyncio.ensure_future(nats.connect(**opts))
    waits: set[asyncio.Future[Any]] = {connecting, refused}
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    if connecting.done():
        return Bus(connecting.result())
    connecting.cancel()
    with contextlib.suppress(BaseException):
        await connecting
    exc = refused.result()
    raise NatsRefusedError(
        f"NATS at {redact_url(url)} refused the connection: {exc or type(exc).__name__} (check "
        "$.nats.user/password, token, credsFile, nkeySeedFile and the TLS settings tlsCa, "
        "tlsCert, tlsKey)"
    )


#: The errors of a connection that is down or cannot be made (what an outage repeats).
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncio.TimeoutError,
    nats.errors.TimeoutError,
    nats.errors.NoServersError,
    nats.errors.UnexpectedEOF,
    nats.errors.StaleConnectionError,
    nats.errors.ConnectionClosedError,
)


class Outage:
    """The log lines of NATS connection trouble: one warning when it starts (the first
    error, or the disconnection) and one line when the connection is back, with how long it
    lasted and how many errors it hid. nats-py calls ``error_cb`` at every failed reconnect
    attempt (``reconnect_time_wait`` 0.25 s: 4 a second), which would otherwise be 4 warning
    lines a second for as long as NATS is away; the repeats go to DEBUG.

    ``clock``: monotonic seconds (a parameter for tests).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._since: float | None = None
        self._errors = 0

    def error(self, exc: BaseException) -> None:
        """An error nats-py reports; those of the connection itself (:data:`CONNECTION_ERRORS`)
        are the outage's, any other (a slow consumer, a permission) is a warning each time."""
        text = str(exc).removeprefix("nats: ") or type(exc).__name__
        if not isinstance(exc, CONNECTION_ERRORS) or _is_refusal(exc):
            log.warning("nats: %s", text)
            return
        if self._since is None:
            self._since = self._clock()
            self._errors = 1
            log.warning("nats: %s (retrying; one line when it is back)", text)
            return
        self._errors += 1
        log.debug("nats: %s", text)

    def disconnected(self) -> None:
        """nats-py ``disconnected_cb``: also called by a deliberate ``close()``, so not a
        warning by itself (a lost connection reports its error first)."""
        log.log(logging.DEBUG if self._since is not None else logging.INFO, "nats disconnected")

    def reconnected(self) -> None:
        """The connection is back (nats-py ``reconnected_cb``)."""
        if self._since is None:
            log.info("nats reconnected")
            return
        lasted = self._clock() - self._since
        log.info("nats reconnected after %.1f s (%d error(s) while away)", lasted, self._errors)
        self._since = None
        self._errors = 0


class NatsRefusedError(RuntimeError):
    """A NATS server refused our credentials, or the TLS handshake failed."""


def _is_refusal(exc: BaseException) -> bool:
    text = str(exc).lower()
    return (
        isinstance(exc, nats.errors.AuthorizationError | ssl.SSLError)
        or "authorization violation" in text
        or "authentication" in text
        or "tls required" in text
    )


class AckedPublisher:
    """JetStream publishes on one connection, each answered through a future: the stream's
    ``PubAck``, or the refusal as the exception nats-py raises for it
    (``NoStreamResponseError`` when no stream took the subject or its leader is being
    elected, ``APIError`` and its subclasses for a stream's ``{"error": …}``).

    What nats-py's ``publish_async`` does, with two differences. Its refusals: nats-py hands a
    stream's error answer to the connection's error callback and never resolves the future
    (the publisher then learns of it only by a timeout). Its cost: a NUID plus
    ``secrets.token_hex`` per reply subject, a semaphore, ``json.loads`` and
    ``PubAck.from_response`` per acknowledgement: 63 µs of CPU per message against 38 µs
    here (medians of ``python bench/publish.py --json``, 400-byte messages).
    Reply subjects are one inbox of the connection (``_INBOX.<nuid>``, under a custom inbox
    prefix too) plus a counter. At most ``window`` publishes wait for their answer at once;
    one more waits for a slot. Nothing times out here: callers bound their waits (a server
    that died with a message unread never answers).
    """

    def __init__(self, nc: NATS, *, window: int = 4096) -> None:
        self._nc = nc
        self._window = window
        self._futures: dict[str, asyncio.Future[api.PubAck]] = {}
        self._prefix = ""
        self._prefix_len = 0
        self._tokens = itertools.count(1)
        self._room = asyncio.Event()
        self._room.set()
        self._subscribing: asyncio.Lock | None = None

    def pending(self) -> int:
        """Publishes sent and not answered yet."""
        return len(self._futures)

    async def _subscribe(self) -> None:
        if self._subscribing is None:
            self._subscribing = asyncio.Lock()
        async with self._subscribing:
            if self._prefix:
                return
            inbox = self._nc.new_inbox()
            await self._nc.subscribe(
                inbox + ".*", cb=self._on_answer, pending_msgs_limit=-1, pending_bytes_limit=-1
            )
            self._prefix = inbox + "."
            self._prefix_len = len(self._prefix)

    async def publish(
        self, subject: str, data: bytes, headers: dict[str, str] | None = None
    ) -> asyncio.Future[api.PubAck]:
        """Send one message to the stream that takes ``subject``; the future of its answer.

        Raises:
            nats.errors.Error: the connection refused the message (closed, draining, its
                buffer full), as ``Client.publish`` raises it; nothing was sent.
        """
        if not self._prefix:
            await self._subscribe()
        while len(self._futures) >= self._window:
            self._room.clear()
            await self._room.wait()
        token = format(next(self._tokens), "x")
        fut: asyncio.Future[api.PubAck] = asyncio.get_running_loop().create_future()
        self._futures[token] = fut
        fut.add_done_callback(functools.partial(self._settled, token))
        try:
            await self._nc.publish(subject, data, reply=self._prefix + token, headers=headers)
        except BaseException:
            fut.cancel()
            raise
        return fut

    def _settled(self, token: str, _fut: asyncio.Future[api.PubAck]) -> None:
        self._futures.pop(token, None)
        if len(self._futures) < self._window:
            self._room.set()

    async def _on_answer(self, msg: Any) -> None:
        fut = self._futures.get(msg.subject[self._prefix_len :])
        if fut is None or fut.done():
            return  # answered after its caller gave up (cancelled), or answered twice
        headers = msg.headers
        if headers and headers.get(api.Header.STATUS) == "503":
            fut.set_exception(nats.js.errors.NoStreamResponseError())
            return
        try:
            answer = orjson.loads(msg.data)
            if "error" in answer:
                nats.js.errors.APIError.from_error(answer["error"])  # raises the typed error
            ack = api.PubAck(
                stream=answer["stream"],
                seq=answer["seq"],
                domain=answer.get("domain"),
                duplicate=answer.get("duplicate"),
            )
        except Exception as exc:  # noqa: BLE001 - a refusal, or an answer nobody can read
            fut.set_exception(exc)
            return
        fut.set_result(ack)


class Bus:
    """A connected NATS client with its JetStream context, and :attr:`acked` for publishes
    whose answers are awaited as futures."""

    def __init__(self, nc: NATS, *, publish_window: int = 4096) -> None:
        self.nc = nc
        # Publishing goes through ``acked``; the context serves stream and consumer calls.
        self.js: JetStreamContext = nc.jetstream()
        self.acked = AckedPublisher(nc, window=publish_window)

    async def close(self) -> None:
        """Flush and close the connection (idempotent).

        A connection that cannot drain (NATS is down and the client is reconnecting:
        nats-py raises ``ConnectionReconnectingError``; or the drain times out) is closed
        anyway, dropping what it holds. Left open, it would reconnect later and deliver its
        buffered publishes after those of whoever took over — old observations stored after
        newer ones (found by the chaos test: a stopped process's Slurm tombstone landed after
        its successor had seen the node come back).
        """
        if self.nc.is_closed:
            return
        try:
            await self.nc.drain()
        except Exception as exc:  # noqa: BLE001 - any failure ends in the same close
            log.warning("NATS connection not drained (%s); closing it", exc or type(exc).__name__)
        finally:
            if not self.nc.is_closed:
                try:
                    await self.nc.close()
                except (TimeoutError, OSError) as exc:
                    # nats-py marks the client CLOSED (no more reconnecting) before it tries
                    # to write what it buffered to the dead socket, which then fails.
                    log.debug("NATS close after a lost connection: %s", exc)

    async def plan_streams(self, specs: tuple[StreamSpec, ...]) -> list[StreamPlan]:
        """How each stream differs from its spec, read with ``stream_info`` only (nothing is
        changed: ``slurmbridge streams`` without ``--apply``)."""
        plans = []
        for spec in specs:
            try:
                info = await self.js.stream_info(spec.name)
            except NotFoundError:
                plans.append(StreamPlan(spec, None, ()))
                continue
            plans.append(StreamPlan(spec, info, stream_changes(info.config, stream_config(spec))))
        return plans

    async def ensure_streams(self, specs: tuple[StreamSpec, ...]) -> list[StreamPlan]:
        """Start-up (``slurmbridge run``): create each missing stream; leave every existing
        one as it is, with one warning per stream naming how it differs from its spec.

        An existing stream's configuration is an administrator's (``slurmbridge streams
        --apply``, or their own tooling): a process started with other settings (the
        defaults: 1 replica, 7 days) must not lower its replicas or retention, nor undo a
        deliberate choice, so nothing of it is changed here — a component whose NATS user
        may only read stream info (docs/security.md) starts the same way.

        Returns:
            The plan of each stream as found (``created`` for those this call made).

        Raises:
            StreamAdminError: a create went unanswered (the usual sign of a NATS user without
                ``$JS.API.STREAM.CREATE`` permission).
        """
        plans = await self.plan_streams(specs)
        for plan in plans:
            if plan.info is None:
                await administer(
                    self.js.add_stream(stream_config(plan.spec)), f"create stream {plan.spec.name}"
                )
                log.info("created stream %s", plan.spec.name)
            elif plan.changes:
                log.warning(
                    "stream %s differs from this process's settings: %s; left as it is "
                    "(slurmbridge run never changes an existing stream; `slurmbridge streams "
                    "--apply` applies the settings)",
                    plan.spec.name,
                    "; ".join(c.found() for c in plan.changes),
                )
        return plans

    async def apply_streams(
        self,
        specs: tuple[StreamSpec, ...],
        applied: Callable[[StreamPlan], None] = lambda plan: None,
    ) -> list[StreamPlan]:
        """``slurmbridge streams --apply``: create each missing stream and update each one
        that differs from its spec, changing only the differing fields of its configuration
        (whatever else an administrator set stays). ``applied`` is called with each plan once
        it is carried out (the CLI prints it), so what was done before a refusal is known.

        Raises:
            StreamAdminError: a create or update went unanswered (this NATS user may not
                administer streams).
        """
        plans = await self.plan_streams(specs)
        for plan in plans:
            if plan.info is None:
                await administer(
                    self.js.add_stream(stream_config(plan.spec)), f"create stream {plan.spec.name}"
                )
            elif plan.changes:
                want = stream_config(plan.spec)
                cfg = dataclasses.replace(
                    plan.info.config, **{c.field: getattr(want, c.field) for c in plan.changes}
                )
                names = ", ".join(c.field for c in plan.changes)
                await administer(
                    self.js.update_stream(cfg), f"update stream {plan.spec.name} ({names})"
                )
            else:
                continue
            applied(plan)
        return plans

    async def ensure_consumer(self, spec: ConsumerSpec) -> api.ConsumerInfo:
        """Create or update a durable pull consumer from ``spec`` (idempotent)."""
        return await self.js.add_consumer(spec.stream, consumer_config(spec))

    async def publish(self, subject: str, data: bytes, msg_id: str | None = None) -> api.PubAck:
        """Publish one message and wait for the stream's acknowledgement."""
        headers = {MSG_ID: msg_id} if msg_id else None
        return await self.js.publish(subject, data, headers=headers)

    def batch(self) -> BatchPublisher:
        """A new publisher for a burst of messages (relists, polls)."""
        return BatchPublisher(self.acked)


class StreamAdminError(RuntimeError):
    """JetStream did not answer a stream (or bucket) create/update: this NATS user may not
    administer streams, and the streams are missing or not as specified."""


async def administer(call: Awaitable[T], what: str) -> T:
    """Await a stream or bucket create/update.

    Raises:
        StreamAdminError: no answer, or JetStream refused the change (e.g. 3 replicas on a
            server that is not clustered); ``what`` names the operation in the message.
    """
    try:
        return await call
    except nats.js.errors.APIError as exc:
        raise StreamAdminError(
            f"could not {what}: JetStream refused it: {exc.description or exc}"
        ) from None
    except TimeoutError:  # nats.errors.TimeoutError is one
        # A permissions violation is reported to the error callback only; the request
        # itself just goes unanswered.
        raise StreamAdminError(
            f"could not {what}: JetStream did not answer. If this NATS user has per-component "
            "permissions (docs/security.md), create the streams once with an account that may "
            "administer them: slurmbridge streams --apply --nats-url URL"
        ) from None


#: The StreamConfig fields a StreamSpec sets (the rest are the server's defaults).
_SPEC_FIELDS = (
    "description",
    "subjects",
    "retention",
    "storage",
    "max_msgs_per_subject",
    "max_age",
    "max_bytes",
    "duplicate_window",
    "allow_direct",
    "num_replicas",
    "discard",
)


def _unset(value: object) -> object:
    # The server reports an unset limit as 0 or -1 and an unset description as absent.
    return None if value in (None, "", 0, -1, False) else value


def stream_differences(have: api.StreamConfig, want: api.StreamConfig) -> list[str]:
    """Names of the fields of ``want`` (a :func:`stream_config`) that ``have`` (the server's
    configuration) does not match; empty when the stream is as specified."""
    return [c.field for c in stream_changes(have, want)]


#: Fields whose larger value keeps more (None: unlimited, the most): retention and replicas.
_MORE_IS_MORE = ("max_msgs_per_subject", "max_age", "max_bytes", "duplicate_window", "num_replicas")
#: Units of the fields shown with one (nats-py reads and writes these two in seconds).
_UNITS = {"max_age": " s", "duplicate_window": " s"}


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field of a stream's configuration that differs from its spec.

    ``have``/``want``: the server's value and the spec's, normalised (None: unset, i.e.
    unlimited for a limit). ``lowers``: the spec's value keeps less (retention: fewer
    messages, bytes or seconds; fewer replicas) — the direction that deletes messages or
    loses redundancy when applied.
    """

    field: str
    have: object
    want: object

    @property
    def lowers(self) -> bool:
        if self.field not in _MORE_IS_MORE:
            return False
        if self.want is None:  # unlimited
            return False
        if self.have is None:
            return True
        have, want = self.have, self.want
        return isinstance(have, int | float) and isinstance(want, int | float) and want < have

    def _shown(self, value: object) -> str:
        if value is None:
            return "unlimited" if self.field in _MORE_IS_MORE else "unset"
        if isinstance(value, enum.Enum):
            value = value.value
        if isinstance(value, list):
            return ",".join(map(str, value))
        if isinstance(value, float):
            return f"{value:g}{_UNITS.get(self.field, '')}"
        return f"{value}{_UNITS.get(self.field, '')}"

    def found(self) -> str:
        """``max_age 3600 s (settings: 604800 s)``: what the server has, then the spec."""
        return f"{self.field} {self._shown(self.have)} (settings: {self._shown(self.want)})"

    def change(self) -> str:
        """``max_age 3600 s → 604800 s``, with ``(lowers)`` when applying it keeps less."""
        arrow = f"{self.field} {self._shown(self.have)} → {self._shown(self.want)}"
        return arrow + (" (lowers)" if self.lowers else "")


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """A stream as found against its spec: ``info`` None when it does not exist; ``changes``
    the fields that differ (empty: as specified)."""

    spec: StreamSpec
    info: api.StreamInfo | None
    changes: tuple[FieldChange, ...]


def stream_changes(have: api.StreamConfig, want: api.StreamConfig) -> tuple[FieldChange, ...]:
    """The fields of ``want`` (a :func:`stream_config`) that ``have`` (the server's
    configuration) does not match, in :data:`_SPEC_FIELDS` order; empty when the stream is
    as specified."""
    out = []
    for name in _SPEC_FIELDS:
        a, b = _unset(getattr(have, name)), _unset(getattr(want, name))
        if isinstance(a, list) and isinstance(b, list):
            a, b = sorted(a), sorted(b)
        if a != b:
            out.append(FieldChange(name, a, b))
    return tuple(out)


def stream_config(spec: StreamSpec) -> api.StreamConfig:
    """nats-py config for a :class:`StreamSpec`."""
    return api.StreamConfig(
        name=spec.name,
        description=spec.description or None,
        subjects=list(spec.subjects),
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE if spec.storage == "file" else api.StorageType.MEMORY,
        max_msgs_per_subject=spec.max_msgs_per_subject,
        max_age=spec.max_age_s or None,
        max_bytes=spec.max_bytes,
        duplicate_window=spec.duplicate_window_s,
        allow_direct=spec.allow_direct,
        num_replicas=spec.replicas,
        discard=api.DiscardPolicy.OLD,
    )


def consumer_config(spec: ConsumerSpec) -> api.ConsumerConfig:
    """nats-py config for a :class:`ConsumerSpec` (explicit acks, deliver all)."""
    backoff = list(spec.backoff_s)[: max(0, spec.max_deliver - 1)] or None
    return api.ConsumerConfig(
        name=spec.durable,
        durable_name=spec.durable,
        description=spec.description or None,
        deliver_policy=api.DeliverPolicy.ALL,
        ack_policy=api.AckPolicy.EXPLICIT,
        ack_wait=spec.ack_wait_s,
        max_deliver=spec.max_deliver,
        backoff=backoff,
        filter_subjects=list(spec.filter_subjects),
        max_ack_pending=spec.max_ack_pending,
        replay_policy=api.ReplayPolicy.INSTANT,
    )


@dataclass(frozen=True, slots=True)
class Published:
    """Result of one batched publish: the stream sequence, or the error."""

    subject: str
    seq: int
    duplicate: bool
    error: BaseException | None = None


class BatchPublisher:
    """Publishes through an :class:`AckedPublisher`; :meth:`flush` waits and reports every
    result.

    Once the publisher's window is full, :meth:`publish` waits for acknowledgements instead
    of buffering without bound.
    """

    def __init__(self, acked: AckedPublisher) -> None:
        self._acked = acked
        self._pending: list[_Queued] = []

    async def publish(self, subject: str, data: bytes, msg_id: str | None = None) -> None:
        """Queue one message (a fresh headers dict each time).

        A publish refused before it reached the server (not connected) is queued as failed, so
        :meth:`flush` reports it and, with ``retry_for``, sends it again.
        """
        fut = await self._send(subject, data, msg_id)
        self._pending.append(_Queued(subject, data, msg_id, fut))

    async def _send(
        self, subject: str, data: bytes, msg_id: str | None
    ) -> asyncio.Future[api.PubAck]:
        headers = {MSG_ID: msg_id} if msg_id else None
        try:
            return await self._acked.publish(subject, data, headers)
        except Exception as exc:  # noqa: BLE001 - reported by flush like any failed publish
            fut: asyncio.Future[api.PubAck] = asyncio.get_running_loop().create_future()
            fut.set_exception(exc)
            return fut

    def __len__(self) -> int:
        return len(self._pending)

    async def flush(self, timeout: float = 30.0, *, retry_for: float = 0.0) -> list[Published]:
        """Wait for every queued publish; results in publish order (errors included).

        Args:
            timeout: seconds to wait for the acknowledgements of one round.
            retry_for: seconds during which failed publishes are sent again (0.5 s doubling to
                4 s between rounds), e.g. while a replicated stream elects a new leader
                (``NoStreamResponseError``, 503). Only messages with a ``Nats-Msg-Id`` are
                retried: without one a publish whose acknowledgement was lost could be stored
                twice.

        Raises:
            TimeoutError: a round's acknowledgements did not all arrive within ``timeout``.
        """
        pending, self._pending = self._pending, []
        if not pending:
            return []
        deadline = time.monotonic() + retry_for
        rounds = 1
        delay = backoff(rounds, base=0.5, cap=4.0)
        results: dict[int, Published] = {}
        todo = list(enumerate(pending))
        while True:
            # asyncio.wait, not wait_for(gather(...)): a gather cancelled at the timeout
            # keeps a CancelledError nobody retrieves ("_GatheringFuture exception was never
            # retrieved", once per flush while a server with a full store stays silent).
            _, late = await asyncio.wait([q.fut for _, q in todo], timeout=timeout)
            if late:
                for fut in late:
                    fut.cancel()
                raise TimeoutError(f"{len(late)} publish(es) not acknowledged in {timeout:g} s")
            retry: list[tuple[int, _Queued]] = []
            for i, q in todo:
                res = asyncio.CancelledError() if q.fut.cancelled() else q.fut.exception()
                if res is not None:
                    results[i] = Published(q.subject, 0, False, res)
                    if q.msg_id:
                        retry.append((i, q))
                else:
                    ack = q.fut.result()
                    results[i] = Published(q.subject, ack.seq, bool(ack.duplicate))
            if not retry or time.monotonic() + delay > deadline:
                break
            first = results[retry[0][0]].error
            log.info("%d publish(es) not stored (%s); retrying", len(retry), first)
            await asyncio.sleep(delay)
            rounds += 1
            delay = backoff(rounds, base=0.5, cap=4.0)
            for _, q in retry:
                q.fut = await self._send(q.subject, q.data, q.msg_id)
            todo = retry
        return [results[i] for i in range(len(pending))]


@dataclass(slots=True)
class _Queued:
    subject: str
    data: bytes
    msg_id: str | None
    fut: asyncio.Future[api.PubAck]
