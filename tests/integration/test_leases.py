"""Leases against a real nats-server: one holder at a time, renewal, fencing tokens, release
hands over at once, a dead holder is replaced within the TTL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client

from slurmbridge.runtime.leases import Lease, open_bucket, partition_of, reconciler_lease
from slurmbridge.runtime.natsserver import NatsServer

TTL = 3.0


@pytest.fixture
async def nc(nats_server: NatsServer) -> AsyncIterator[Client]:
    conn = await nats.connect(nats_server.url)
    yield conn
    await conn.close()


async def lease(nc: Client, holder: str, name: str = "reconciler.x") -> Lease:
    js = nc.jetstream()
    return Lease(js, await open_bucket(js), name, holder, ttl=TTL)


async def test_one_holder_renewal_and_fencing(nc: Client) -> None:
    a, b = await lease(nc, "a"), await lease(nc, "b")
    assert await a.try_acquire()
    assert not await b.try_acquire()
    first = a.token()
    assert first is not None and b.token() is None
    assert await a.renew()
    second = a.token()
    assert second is not None and second > first  # the fencing token moves with each write
    assert not await b.try_acquire()
    entry = await a.kv.get("reconciler.x")
    assert entry.value == b"a"
    # Released: the other takes it at once, and the old holder's renewal now fails.
    stale = a.revision
    await a.release()
    assert a.token() is None
    assert await b.try_acquire()
    a.revision = stale
    assert not await a.renew()
    assert a.token() is None


async def test_dead_holder_is_replaced_within_the_ttl(nc: Client) -> None:
    a, b = await lease(nc, "a"), await lease(nc, "b")
    assert await a.try_acquire()
    died = time.monotonic()  # a stops renewing: as good as killed
    took: list[float] = []

    async def active() -> None:
        took.append(time.monotonic())
        await asyncio.Event().wait()

    holder = asyncio.create_task(b.hold(active))
    try:
        async with asyncio.timeout(TTL + 2):
            while not took:
                await asyncio.sleep(0.05)
        assert took[0] - died <= TTL, f"handover took {took[0] - died:.2f} s"
        # The dead holder's token lapsed before the new holder's began.
        assert a.token() is None
        assert b.token() is not None
    finally:
        holder.cancel()
        with pytest.raises(asyncio.CancelledError):
            await holder
    assert b.token() is None  # released on cancellation


async def test_hold_gives_up_when_taken_over_and_competes_again(nc: Client) -> None:
    a, b = await lease(nc, "a"), await lease(nc, "b")
    runs: list[str] = []
    stopped = asyncio.Event()

    async def active() -> None:
        runs.append("start")
        try:
            await asyncio.Event().wait()
        finally:
            runs.append("stop")
            stopped.set()

    holder = asyncio.create_task(a.hold(active))
    try:
        async with asyncio.timeout(5):
            while runs != ["start"]:
                await asyncio.sleep(0.02)
        # Someone else overwrites the key (an operator, or a split brain): a notices at its
        # next renewal and stops acting.
        await b.kv.put("reconciler.x", b"b")
        async with asyncio.timeout(5):
            await stopped.wait()
        assert runs == ["start", "stop"]
    finally:
        holder.cancel()
        with pytest.raises(asyncio.CancelledError):
            await holder


def test_partitions_are_stable_and_spread() -> None:
    keys = [f"ns/pod-{i}" for i in range(1000)]
    parts = [partition_of(k, 4) for k in keys]
    assert parts == [partition_of(k, 4) for k in keys]
    counts = [parts.count(i) for i in range(4)]
    assert min(counts) > 200, counts
    assert partition_of("anything", 1) == 0
    assert partition_of("node-a", 3) == 2  # CRC-32: the same in every process and version
    assert reconciler_lease("placement", 0, 1) == "reconciler.placement"
    assert reconciler_lease("placement", 2, 3) == "reconciler.placement.2-of-3"


async def test_a_renewal_after_the_ttl_ran_out_says_the_lease_expired(nc: Client) -> None:
    """Issue 30, item 4: a holder whose event loop was blocked past its write's TTL finds the
    key gone at its next renewal — expired, not taken over by anyone (the log said "taken
    over" for every lease at once, and sent the reader looking for another replica)."""
    a, b = await lease(nc, "a"), await lease(nc, "b")
    assert await a.try_acquire()
    assert await a.renew()
    # a renews no more (as if its loop were blocked) until the server has dropped the key.
    async with asyncio.timeout(5 * TTL):
        while True:
            try:
                await a.kv.get("reconciler.x")
            except nats.js.errors.KeyNotFoundError:
                break
            await asyncio.sleep(0.1)
    assert not await a.renew()
    assert a.lost_reason == "expired" and a.token() is None
    # Someone else's write in between is a take-over.
    assert await a.try_acquire()
    await b.kv.put("reconciler.x", b"b")
    assert not await a.renew()
    assert a.lost_reason == "taken over"
