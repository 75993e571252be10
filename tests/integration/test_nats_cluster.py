"""The three-server NATS cluster helper (slurmbridge.natsserver.NatsCluster): replicated
streams keep taking writes when their leader is killed, and the restarted server catches up.
(The whole system on this cluster is not tested yet: see issue 6.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import nats
import pytest
from nats.js.api import StreamConfig

from slurmbridge.natsserver import NatsCluster


@pytest.fixture
async def cluster() -> AsyncIterator[NatsCluster]:
    c = NatsCluster()
    await c.start()
    yield c
    await c.stop()
    c.cleanup()


async def test_a_replicated_stream_survives_its_leader(cluster: NatsCluster) -> None:
    nc = await nats.connect(servers=cluster.url.split(","))
    try:
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="R3", subjects=["r3.>"], num_replicas=3))
        assert (await js.publish("r3.a", b"before")).seq == 1
        info = (await js.stream_info("R3")).cluster
        assert info is not None and info.leader is not None
        assert sorted(p.name for p in info.replicas or []) == sorted(
            s.name for s in cluster.servers if s.name != info.leader
        )
        victim = cluster.server(info.leader)
        await victim.kill()
        killed = time.monotonic()
        seq = 0
        while not seq:
            try:
                seq = (await js.publish("r3.a", b"during", timeout=1)).seq
            except (nats.errors.TimeoutError, nats.js.errors.NoStreamResponseError):
                assert time.monotonic() - killed < 30, "no new leader within 30 s"
                await asyncio.sleep(0.25)
        assert seq == 2  # nothing lost, nothing doubled
        new = (await js.stream_info("R3")).cluster
        assert new is not None and new.leader not in (None, info.leader)
        await victim.start()
        deadline = time.monotonic() + 30
        while True:
            peers = (await js.stream_info("R3")).cluster
            replicas = (peers.replicas or []) if peers is not None else []
            if len(replicas) == 2 and all(p.current and not p.offline for p in replicas):
                break
            assert time.monotonic() < deadline, "the restarted server did not catch up"
            await asyncio.sleep(0.25)
        assert (await js.stream_info("R3")).state.messages == 2
    finally:
        await nc.close()
