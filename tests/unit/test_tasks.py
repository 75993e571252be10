"""Waiting on many awaitables leaves nothing unretrieved (issue 29 item 4: no
"_GatheringFuture exception was never retrieved" on any error path, e.g. a Ctrl-C while the
components start)."""

from __future__ import annotations

import asyncio
import gc
import re
from pathlib import Path
from typing import Any

import pytest

from slurmbridge.runtime.tasks import wait_all

ROOT = Path(__file__).parents[2]


def unretrieved(run: Any) -> list[str]:
    """What asyncio reported at garbage collection while ``run()`` ran in a fresh loop."""
    reports: list[str] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda _loop, ctx: reports.append(ctx["message"])
        )
        await run()
        gc.collect()
        await asyncio.sleep(0)

    asyncio.run(main())
    return reports


def test_a_cancelled_wait_leaves_nothing_unretrieved() -> None:
    async def run() -> None:
        events = [asyncio.Event() for _ in range(3)]
        waiting = asyncio.ensure_future(wait_all([e.wait() for e in events], timeout=60))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    assert unretrieved(run) == []


def test_a_timeout_is_a_timeout_error_and_leaves_nothing_unretrieved() -> None:
    async def run() -> None:
        never = asyncio.Event()
        with pytest.raises(TimeoutError, match="1 of 2 not done"):
            await wait_all([never.wait(), asyncio.sleep(0)], timeout=0.05)

    assert unretrieved(run) == []


def test_the_first_failure_is_raised_and_the_others_retrieved() -> None:
    async def fail(after: float, text: str) -> None:
        await asyncio.sleep(after)
        raise RuntimeError(text)

    async def run() -> None:
        with pytest.raises(RuntimeError, match="first"):
            await wait_all([fail(0, "first"), fail(0, "second"), asyncio.sleep(10)])

    assert unretrieved(run) == []


def test_the_old_pattern_is_what_reports_it() -> None:
    """The failure mode itself (so the tests above are not vacuous)."""

    async def run() -> None:
        events = [asyncio.Event() for _ in range(3)]
        waiting = asyncio.ensure_future(
            asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), timeout=60)
        )
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    assert any("_GatheringFuture exception was never retrieved" in r for r in unretrieved(run))


def test_no_code_waits_on_a_gather_with_a_timeout() -> None:
    """``wait_for(gather(...))`` is the pattern that reports it (the start-up's wait for the
    components' leases was one): the code uses :func:`wait_all` instead."""
    pattern = re.compile(r"wait_for\(\s*asyncio\.gather\(")
    found = [
        str(path.relative_to(ROOT))
        for folder in ("slurmbridge", "producers")
        for path in (ROOT / folder).rglob("*.py")
        if pattern.search(path.read_text())
    ]
    assert found == []
