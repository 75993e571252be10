"""Publishing observations: encode, subject, ``Nats-Msg-Id``, bounded async window, metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from schemas import events, subjects
from schemas.events import Event
from slurmbridge.observability import metrics
from slurmbridge.runtime.bus import MSG_ID, Bus, Published


class PublishError(RuntimeError):
    """Some observations were not stored (the producer retries its cycle)."""


class AckTimeoutError(TimeoutError):
    """No acknowledgement arrived in time: the observation may not be in the log."""


class ObservationPublisher:
    """Publishes batches of ``(event, msg_id)`` and raises unless every one was stored.

    ``ack_timeout``: seconds :meth:`send`'s future waits for the stream's acknowledgement
    (``nats.ackTimeout``).
    """

    def __init__(self, bus: Bus, ack_timeout: float = 5.0) -> None:
        self.bus = bus
        self.ack_timeout = ack_timeout

    async def send(self, event: Event, msg_id: str) -> asyncio.Future[Any]:
        """Publish one observation without waiting for the stream's acknowledgement.

        The returned future resolves to the PubAck, or to the error — :class:`AckTimeoutError`
        when no acknowledgement came within ``ack_timeout`` seconds. Messages are sent in
        call order on one connection, so the stream stores them in that order.
        """
        subject, data = _frame(event)
        fut = await self.bus.acked.publish(subject, data, {MSG_ID: msg_id})
        # These futures have no deadline of their own, and a publish the server never read (it
        # died with the message in its socket) is never answered: the future would stay
        # pending for good, and the producer would never learn that the log lacks it (the
        # chaos test's pods whose binding never reached the log). A timer, not a task per
        # message: a watch publishes thousands.
        asyncio.get_running_loop().call_later(self.ack_timeout, _expire, fut, self.ack_timeout)
        return fut

    async def __call__(self, batch: Sequence[tuple[Event, str]]) -> list[Published]:
        """Publish and wait for every acknowledgement; results in order.

        Raises:
            PublishError: at least one publish failed (names the first subject and error).
        """
        pub = self.bus.batch()
        for event, msg_id in batch:
            await pub.publish(*_frame(event), msg_id)
        results = await pub.flush()
        failed = [r for r in results if r.error is not None]
        if failed:
            raise PublishError(
                f"{len(failed)} of {len(results)} observations not stored; first: "
                f"{failed[0].subject}: {failed[0].error!r}"
            )
        return results


def _expire(fut: asyncio.Future[Any], timeout: float) -> None:
    """Fail ``fut`` with :class:`AckTimeoutError` unless it is done (its slot in the publish
    window is then released, and a late answer ignored: :class:`~.bus.AckedPublisher`)."""
    if not fut.done():
        fut.set_exception(AckTimeoutError(f"no acknowledgement within {timeout:g} s"))


#: (source, kind) → its ``slurmbridge_events_published_total`` child. Why: ``labels()`` takes
#: a lock and builds its key on every call, 0.8 % of the bridge's CPU at 200 pods/s (py-spy,
#: bench/workload.py); a child lives as long as its metric. Bounded by the configured
#: clusters times the event kinds.
_PUBLISHED: dict[tuple[str, str], Any] = {}


def _frame(event: Event) -> tuple[str, bytes]:
    """Subject and payload of one observation (counted as published)."""
    kind = events.kind_of(event)
    child = _PUBLISHED.get((event.source, kind))
    if child is None:
        child = _PUBLISHED[event.source, kind] = metrics.EVENTS_PUBLISHED.labels(event.source, kind)
    child.inc()
    return subjects.obs_subject(event.source, kind, event.key), events.encode_event(event)
