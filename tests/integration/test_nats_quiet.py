"""The log of NATS trouble is short (issue 29 item 4): a server that stops draws no
``409 Server Shutdown`` warning from the pull consumers (every pending pull request is answered
so when a server stops: a restart, a rolling update, the SIGTERM Kubernetes sends the whole
release), and an outage is one warning and one recovery line, not one line per reconnect
attempt (4 a second)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from schemas import streams
from slurmbridge.config import NatsSettings
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.natsserver import NatsServer
from slurmbridge.runtime.pull import PullConsumer


async def until(condition: object, timeout: float = 30.0) -> None:
    async def wait() -> None:
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.02)

    await asyncio.wait_for(wait(), timeout)


async def test_a_stopping_server_draws_no_warning_from_pull_consumers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = NatsServer(store_dir=tmp_path / "nats")
    await server.start()
    bus = await busmod.connect(NatsSettings(), server.url)
    pullers: list[PullConsumer] = []
    try:
        await bus.ensure_streams(streams.stream_specs())
        for name in ("a", "b", "c"):
            spec = streams.consumer_spec(name, ("bridge.obs.>",))
            await bus.ensure_consumer(spec)
            puller = PullConsumer(bus.nc, spec.stream, spec.durable, heartbeat=0.2)
            await puller.start()
            pullers.append(puller)
        # Each consumer holds a pull request: a message published now is delivered.
        await bus.js.publish("bridge.obs.t.SlurmNode.n1", b"{}")
        for puller in pullers:
            assert len(await puller.next_batch(timeout=10)) == 1
        caplog.set_level(logging.DEBUG, logger="slurmbridge.runtime.pull")
        await server.stop()
        await until(lambda: not bus.nc.is_connected)
        await until(lambda: any("409" in r.getMessage() for r in caplog.records))
    finally:
        for puller in pullers:
            await puller.stop()
        await bus.nc.close()
        await server.stop()
    said = [r for r in caplog.records if "409" in r.getMessage()]
    assert {r.getMessage().split(": ", 1)[1] for r in said} == {"409 Server Shutdown"}
    assert all(r.levelno < logging.WARNING for r in said), [r.getMessage() for r in said]


async def test_an_outage_is_one_warning_and_one_recovery_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="slurmbridge.runtime.bus")
    server = NatsServer(store_dir=tmp_path / "nats")
    await server.start()
    bus = await busmod.connect(NatsSettings(), server.url)
    try:
        await server.stop()

        def attempts() -> int:
            return sum(r.getMessage().startswith("nats: ") for r in caplog.records)

        # Enough failed reconnect attempts to have been 4 warning lines a second.
        await until(lambda: attempts() >= 6)
        again = NatsServer(store_dir=tmp_path / "nats", port=server.port)
        await again.start()
        try:
            await until(lambda: any("reconnected" in r.getMessage() for r in caplog.records))
        finally:
            await bus.nc.close()
            await again.stop()
    finally:
        await server.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "one line when it is back" in warnings[0]
    (back,) = [r for r in caplog.records if "reconnected" in r.getMessage()]
    assert back.levelno == logging.INFO
    assert "error(s) while away" in back.getMessage()
