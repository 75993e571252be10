"""Stopping asyncio tasks reliably.

Some client libraries turn a cancellation inside a request into their own timeout error, which
a handler may then log and survive; a single ``task.cancel()`` is then lost and ``await task``
waits forever. :func:`cancel_and_wait` cancels again until every task has finished.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

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
