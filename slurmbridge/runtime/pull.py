"""Continuous pull from a durable JetStream consumer (what nats.go calls ``Consume``).

nats-py's ``fetch(n)`` sends a ``no_wait`` request and returns what is there: a consumer that
keeps up therefore pays one request round trip per message or two. This keeps a window of
``batch`` messages requested at all times instead: one long-lived inbox subscription, pull
requests with ``expires`` and ``idle_heartbeat``, and a refill whenever fewer than half the
window is outstanding. Messages arrive as fast as the server delivers them and are handed to
the caller in batches.

Protocol (JetStream pull API): a request ``{"batch", "expires", "idle_heartbeat"}`` goes to
``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`` with our inbox as reply. Status messages:
``100`` idle heartbeat, ``404``/``408`` request done or expired (``Nats-Pending-Messages``
says how many of its messages will not come), ``409`` request rejected (limits, leadership
change, consumer deleted). Missing two heartbeats, or a reconnect, resets the window.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from typing import Any, NamedTuple

import orjson
from nats.aio.client import Client as NATS

log = logging.getLogger(__name__)

_STATUS = "Status"
_PENDING_MSGS = "Nats-Pending-Messages"
#: The ``Description`` of the 409 a stopping server answers every pending pull request with
#: (nats-server ``consumer.go``, lower-cased here).
SERVER_SHUTDOWN = "server shutdown"


class AckMeta(NamedTuple):
    """What the ack subject says about a delivery."""

    stream_seq: int
    num_delivered: int
    num_pending: int


def ack_meta(reply: str) -> AckMeta:
    """Parse ``$JS.ACK.…`` (both the 9-token and the domain/hash 11+-token forms).

    Raises:
        ValueError: not a JetStream ack subject.
    """
    t = reply.split(".")
    if len(t) == 9 and t[0] == "$JS" and t[1] == "ACK":
        return AckMeta(int(t[5]), int(t[4]), int(t[8]))
    if len(t) >= 11 and t[0] == "$JS" and t[1] == "ACK":
        return AckMeta(int(t[7]), int(t[6]), int(t[10]))
    raise ValueError(f"not a JetStream ack subject: {reply!r}")


class PullConsumer:
    """Keeps ``batch`` messages requested from one durable pull consumer.

    ``await next_batch()`` returns the messages that arrived (at least one; waits up to
    ``timeout`` seconds and returns ``[]`` when none came).
    """

    def __init__(
        self,
        nc: NATS,
        stream: str,
        consumer: str,
        *,
        batch: int = 256,
        expires: float = 10.0,
        heartbeat: float = 1.0,
        api_prefix: str = "$JS.API",
    ) -> None:
        self.nc = nc
        self.subject = f"{api_prefix}.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self.batch = batch
        self.expires = expires
        self.heartbeat = heartbeat
        self._pending = 0
        self._inbox = ""
        self._sub: Any = None
        self._buf: collections.deque[Any] = collections.deque()
        self._ready = asyncio.Event()
        self._last_seen = time.monotonic()
        self._watchdog: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> None:
        """Subscribe to the inbox and send the first request."""
        self._inbox = self.nc.new_inbox()
        self._sub = await self.nc.subscribe(
            self._inbox, cb=self._on_msg, pending_msgs_limit=-1, pending_bytes_limit=-1
        )
        await self._request()
        self._watchdog = asyncio.create_task(self._watch(), name=f"pull-watchdog {self.subject}")

    async def stop(self) -> None:
        """Stop requesting and unsubscribe the inbox. Messages already delivered and not yet
        settled are redelivered after the consumer's ``ack_wait``, unless the caller hands
        them back with a nak (:meth:`take` holds those not yet returned by
        :meth:`next_batch`)."""
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
        self._ready.set()

    async def _request(self) -> None:
        want = self.batch - self._pending
        if want <= 0 or self._closed or not self.nc.is_connected:
            return
        body = orjson.dumps(
            {
                "batch": want,
                "expires": int(self.expires * 1e9),
                "idle_heartbeat": int(self.heartbeat * 1e9),
            }
        )
        self._pending += want
        await self.nc.publish(self.subject, body, reply=self._inbox)

    async def _on_msg(self, msg: Any) -> None:
        self._last_seen = time.monotonic()
        headers = msg.headers
        status = headers.get(_STATUS) if headers else None
        if status is None:
            self._pending -= 1
            self._buf.append(msg)
            self._ready.set()
        elif status == "100":
            if msg.reply:  # a flow-control request wants an answer
                await self.nc.publish(msg.reply, b"")
        else:
            # 404 / 408 / 409: that request is over; what it still owed will not come.
            try:
                owed = int(headers.get(_PENDING_MSGS, "0"))
            except ValueError:
                owed = 0
            if owed:
                self._pending = max(0, self._pending - owed)
            elif status == "409":
                self._pending = 0
            if status == "409":
                description = headers.get("Description", "")
                if description.lower() == SERVER_SHUTDOWN:
                    # The server is stopping (a restart, a rolling update, the pod's own
                    # SIGTERM): not a fault. Asking it again would only be refused again;
                    # the watchdog asks once a server answers.
                    log.debug("pull %s: %s %s", self.subject, status, description)
                    return
                log.warning("pull %s: %s %s", self.subject, status, description)
        if self._pending <= self.batch // 2:
            await self._request()

    async def _watch(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.heartbeat)
            silent = time.monotonic() - self._last_seen
            if silent > 2 * self.heartbeat or (self._pending <= 0 and self.nc.is_connected):
                # Lost heartbeats (server restart, reconnect): forget what was requested.
                self._pending = 0
                self._last_seen = time.monotonic()
                with contextlib.suppress(Exception):
                    await self._request()

    def take(self) -> list[Any]:
        """The messages received and not yet returned by :meth:`next_batch` (emptied)."""
        out = list(self._buf)
        self._buf.clear()
        return out

    async def next_batch(self, timeout: float = 1.0) -> list[Any]:
        """The messages received since the last call (waits up to ``timeout`` seconds)."""
        if not self._buf:
            self._ready.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), timeout)
        out = list(self._buf)
        self._buf.clear()
        return out
