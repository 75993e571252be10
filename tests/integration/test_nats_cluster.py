"""The three-server NATS cluster helper (slurmbridge.runtime.natsserver.NatsCluster): replicated
streams keep taking writes when their leader is killed, and the restarted server catches up.
And slurmbridge on it: streams and the lease bucket replicated three times, the BRIDGE_OBS
leader killed mid-run, the work goes on, nothing lost or done twice."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator

import nats
import pytest
from nats.js.api import StreamConfig

from schemas import streams
from schemas.actions import DrainSlurmNode, UndrainSlurmNode
from schemas.events import KubeNode, SlurmNode
from slurmbridge.devtools.testing import Stack
from slurmbridge.runtime.leases import BUCKET
from slurmbridge.runtime.natsserver import NatsCluster


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


async def test_killing_the_stream_leader_loses_nothing(cluster: NatsCluster) -> None:
    settings = {"nats": {"replicas": 3}, "leases": {"ttl": 3.0}}
    async with Stack(nodes=4, poll_interval=0.5, nats_url=cluster.url, settings=settings) as s:
        app = s.app
        assert app is not None and app.bus is not None
        js = app.bus.js
        for name in (streams.OBS_STREAM, streams.ACT_STREAM, streams.DLQ_STREAM):
            info = await js.stream_info(name)
            assert info.config.num_replicas == 3, name
        kv = await js.stream_info(f"KV_{BUCKET}")
        assert kv.config.num_replicas == 3

        s.cordon("n1")
        await s.wait_for(lambda: s.slurm_node("n1").has("DRAIN"), timeout=15, what="n1 DRAIN")

        leader = (await js.stream_info(streams.OBS_STREAM)).cluster
        assert leader is not None and leader.leader is not None
        victim = cluster.server(leader.leader)
        await victim.kill()

        # Work goes on with two of three servers.
        s.cordon("n2")
        s.uncordon("n1")
        await s.wait_for(lambda: s.slurm_node("n2").has("DRAIN"), timeout=60, what="n2 DRAIN")
        await s.wait_for(
            lambda: not s.slurm_node("n1").has("DRAIN"), timeout=30, what="n1 undrained"
        )

        await victim.start()
        s.uncordon("n2")
        await s.wait_for(
            lambda: not s.slurm_node("n2").has("DRAIN"), timeout=30, what="n2 undrained"
        )

        # An ack sent while a consumer's leader moved can be lost (JetStream acks are not
        # confirmed): that trigger is delivered again after ack_wait (30 s) and settles then.
        # The leader moves twice (the kill, the restart), and each move can lose acks. On a
        # loaded 2-core machine the leases lapse meanwhile and every worker restarts: a
        # worker that stops hands its triggers back at once (Worker._hand_back), and one
        # whose start fails half-way stops the pullers it had started — one left behind
        # held triggers past 120 s (3 runs of 25 beside two busy processes, each after
        # "active part failed: TimeoutError()" of the reconciler holding them).
        await s.settled(timeout=2 * 30 + 60)

        # The restarted server caught up: every replica of every stream is current.
        async def caught_up() -> bool:
            for name in (streams.OBS_STREAM, streams.ACT_STREAM, f"KV_{BUCKET}"):
                try:
                    ci = (await js.stream_info(name)).cluster
                except (nats.errors.TimeoutError, nats.js.errors.APIError):
                    return False  # electing a leader
                peers = (ci.replicas or []) if ci is not None else []
                if len(peers) != 2 or not all(p.current and not p.offline for p in peers):
                    return False
            return True

        deadline = time.monotonic() + 30
        while not await caught_up():
            assert time.monotonic() < deadline, "the restarted server did not catch up"
            await asyncio.sleep(0.2)

        # Nothing lost: the log's last word on every node matches Slurm and Kubernetes. The
        # poller's observation of the last undrain may still be on its way: a poll whose
        # publish met a leader move waits up to its 30 s ack timeout, and the next poll then
        # stores it (a fresh-clone CI run read the log before it had).
        def undrained_in_log() -> bool:
            return all(
                (sn := app.projection.get(SlurmNode, n, "slurm:default")) is not None
                and not sn.has("DRAIN")
                for n in ("n1", "n2", "n3", "n4")
            )

        await s.wait_for(undrained_in_log, timeout=2 * 30 + 10, what="undrains in the log")
        for n in ("n1", "n2", "n3", "n4"):
            kn = app.projection.get(KubeNode, n)
            sn = app.projection.get(SlurmNode, n, "slurm:default")
            assert kn is not None and not kn.unschedulable, n
            assert sn is not None and not sn.has("DRAIN"), n
        # … and nothing done twice.
        ok = collections.Counter(
            (type(r.action).__name__, r.key)
            for r in await s.action_records()
            if r.outcome == "ok" and type(r.action).__name__ != "RecordEvent"
        )
        assert ok[(DrainSlurmNode.__name__, "n1")] == 1
        assert ok[(DrainSlurmNode.__name__, "n2")] == 1
        assert ok[(UndrainSlurmNode.__name__, "n1")] == 1
        assert ok[(UndrainSlurmNode.__name__, "n2")] == 1
        twice = {k: n for k, n in ok.items() if n > 1}
        assert not twice, twice
