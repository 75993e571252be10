"""Closing the bus while NATS is down (slurmbridge.runtime.bus ``Bus.close``): the connection
ends there, so nothing it buffered is delivered later, after a successor's publishes (the
chaos test's stale Slurm tombstone). Real nats-server from its wheel."""

from __future__ import annotations

import asyncio

import pytest

from slurmbridge.config import NatsSettings
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.natsserver import NatsServer

pytestmark = pytest.mark.integration


async def _until(cond: object, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():  # type: ignore[operator]
            await asyncio.sleep(0.02)


async def test_a_bus_closed_during_an_outage_never_delivers_what_it_buffered(
    nats_server: NatsServer,
) -> None:
    old = await busmod.connect(NatsSettings(), nats_server.url, name="old")
    await old.js.add_stream(name="CLOSE_T", subjects=["close.t.>"])
    await nats_server.kill()
    await _until(lambda: old.nc.is_reconnecting or not old.nc.is_connected)
    await old.nc.publish("close.t.x", b"old observation")  # buffered by the client

    await old.close()  # a drain cannot run now; before the fix this raised and left it open
    assert old.nc.is_closed

    await nats_server.start()
    new = await busmod.connect(NatsSettings(), nats_server.url, name="new")
    try:
        await new.js.publish("close.t.x", b"new observation")
        info = await new.js.stream_info("CLOSE_T")
        assert info.state.messages == 1
        msg = await new.js.get_last_msg("CLOSE_T", "close.t.x")
        assert msg.data == b"new observation"
        assert old.nc.is_closed  # it never came back
    finally:
        await new.close()
