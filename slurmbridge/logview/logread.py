"""Reading the log back: every retained message of a stream, in sequence order.

Used by ``slurmbridge replay`` and ``slurmbridge explain``. An ordered push consumer (no
durable state on the server, flow-controlled, re-created by nats-py on a gap) delivers the
messages; iteration ends at the stream's last sequence as of the start.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import nats.errors
from nats.js import api

from slurmbridge.runtime.bus import Bus


@dataclass(frozen=True, slots=True)
class Raw:
    """One stored message: ``subject``, ``data`` and its stream sequence ``seq``."""

    subject: str
    data: bytes
    seq: int


async def last_seq(bus: Bus, stream: str) -> int:
    """The stream's last sequence (0 when it is empty)."""
    info = await bus.js.stream_info(stream)
    return info.state.last_seq if info.state.messages else 0


async def read(
    bus: Bus,
    stream: str,
    subject: str,
    *,
    start_seq: int = 1,
    end_seq: int | None = None,
    idle_timeout: float = 5.0,
) -> AsyncIterator[Raw]:
    """Yield the messages of ``stream`` matching ``subject`` from ``start_seq`` up to
    ``end_seq`` (default: the last sequence now), oldest first.

    Raises:
        TimeoutError: nothing arrived for ``idle_timeout`` seconds before the end.
    """
    end = await last_seq(bus, stream) if end_seq is None else end_seq
    if end < start_seq:
        return
    sub = await bus.js.subscribe(
        subject,
        stream=stream,
        ordered_consumer=True,
        config=api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=max(1, start_seq)
        ),
        pending_msgs_limit=1_000_000,
        pending_bytes_limit=512 * 1024 * 1024,
    )
    try:
        info = await sub.consumer_info()
        delivered = info.delivered.consumer_seq if info.delivered is not None else 0
        if not info.num_pending and not delivered:
            # Nothing matches (waiting would only time out). The push consumer may already
            # have delivered everything by now, hence the second condition.
            return
        while True:
            try:
                msg = await sub.next_msg(timeout=idle_timeout)
            except nats.errors.TimeoutError:
                # A filtered subject may simply have no message between here and the end.
                return
            seq = msg.metadata.sequence.stream
            if seq > end:
                return
            yield Raw(msg.subject, msg.data or b"", seq)
            if seq >= end or msg.metadata.num_pending == 0:
                return
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
