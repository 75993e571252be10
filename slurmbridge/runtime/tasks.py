"""Stopping asyncio tasks reliably.

Some client libraries turn a cancellation inside a request into their own timeout error, which
a handler may then log and survive; a single ``task.cancel()`` is then lost and ``await task``
waits forever. :func:`cancel_and_wait` cancels again until every task has finished.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable

log = logging.getLogger(__name__)


async def cancel_and_wait(tasks: Iterable[asyncio.Task[object]], *, rounds: int = 20) -> None:
    """Cancel ``tasks`` and wait until all are done, re-cancelling survivors every 0.25 s."""
    pending = {t for t in tasks if not t.done()}
    for _ in range(rounds):
        if not pending:
            return
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.25)
    for t in pending:
        log.warning("task %s did not stop after %d cancellations", t.get_name(), rounds)


async def wait_all(aws: Iterable[Awaitable[object]], *, timeout: float | None = None) -> None:
    """Wait until every awaitable of ``aws`` is done, raising the first exception among them.

    Instead of ``asyncio.wait_for`` of an ``asyncio.gather``: when that is cancelled (a
    Ctrl-C during start-up) or times out, the gather is cancelled and keeps a CancelledError
    nobody retrieves, which asyncio reports as "_GatheringFuture exception was never
    retrieved". Here the awaitables run as tasks that are cancelled and awaited, and every
    exception is retrieved.

    Raises:
        TimeoutError: not all done within ``timeout`` seconds (the rest are cancelled).
        Exception: the first exception one of them raised (the rest are cancelled).
    """
    tasks: list[asyncio.Task[object]] = [asyncio.ensure_future(a) for a in aws]
    if not tasks:
        return
    try:
        done, pending = await asyncio.wait(
            tasks, timeout=timeout, return_when=asyncio.FIRST_EXCEPTION
        )
        # In the order given (``done`` is a set): of two that failed at once, the first.
        errors = [t.exception() for t in tasks if t in done and not t.cancelled()]
        for exc in errors:
            if exc is not None:
                raise exc
        if pending:
            raise TimeoutError(f"{len(pending)} of {len(tasks)} not done within {timeout} s")
    finally:
        await cancel_and_wait(tasks)
        for t in tasks:
            if t.done() and not t.cancelled():
                t.exception()  # retrieved: nothing is reported at garbage collection
