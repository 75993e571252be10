"""Two replicas of every component against one NATS (docs/architecture.md "Running many
workers"): one holds every lease and acts, the other stands by; killing the holder hands
every lease over within the lease TTL, and no action is performed twice."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator

import msgspec
import pytest

from schemas import wellknown
from schemas.actions import BindPod, DrainSlurmNode, SubmitSlurmJob, UndrainSlurmNode
from slurmbridge.app import App
from slurmbridge.devtools.testing import Stack
from slurmbridge.runtime.leases import partition_of

TTL = 3.0
SCHED = wellknown.DEFAULT_SCHEDULER_NAME


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=4, poll_interval=0.2, settings={"leases": {"ttl": TTL}}) as s:
        yield s


async def test_killing_the_holder_hands_over_within_the_ttl_and_nothing_runs_twice(
    stack: Stack,
) -> None:
    a = stack.app
    assert a is not None and stack.settings is not None
    b = App(msgspec.structs.replace(stack.settings, instance_id="replica-b"), with_health=False)
    await b.start()
    try:
        # a started first: it holds every lease; b stands by with nothing running.
        assert a.leases and all(lease.held for lease in a.leases.values())
        assert set(b.leases) == set(a.leases)
        assert not any(lease.held for lease in b.leases.values())
        assert not b.workers and b.poller is None and b.watcher is None

        stack.cordon("n1")
        await stack.wait_for(lambda: stack.slurm_node("n1").has("DRAIN"), what="n1 drained")
        await stack.settled()

        await a.stop(crash=True)  # as kill -9: the leases are left to expire
        killed = time.monotonic()
        stack.app = b
        stack.cordon("n2")
        stack.uncordon("n1")
        stack.kube.add_pod("solo", scheduler_name=SCHED, requests={"cpu": "1", "memory": "100Mi"})

        await stack.wait_for(
            lambda: all(lease.held for lease in b.leases.values()),
            timeout=TTL + 2,
            what="b holds every lease",
        )
        late = {
            name: round(lease.acquired_at - killed, 2)
            for name, lease in b.leases.items()
            if lease.acquired_at - killed > TTL
        }
        assert not late, f"handed over later than the {TTL} s TTL: {late}"
        await stack.wait_for(lambda: stack.slurm_node("n2").has("DRAIN"), what="n2 drained by b")
        await stack.wait_for(
            lambda: not stack.slurm_node("n1").has("DRAIN"), what="n1 undrained by b"
        )
        await stack.wait_for(
            lambda: bool(stack.kube.get("pods", "solo")["spec"].get("nodeName")),
            timeout=10,
            what="pod placed by b",
        )
        await stack.settled()

        records = await stack.action_records()
        done = Counter(
            (type(r.action).__name__, r.key)
            for r in records
            if r.outcome == "ok" and type(r.action).__name__ != "RecordEvent"
        )
        twice = {k: n for k, n in done.items() if n > 1}
        assert not twice, f"performed more than once: {twice}"
        assert done[(DrainSlurmNode.__name__, "n1")] == 1
        assert done[(DrainSlurmNode.__name__, "n2")] == 1
        assert done[(UndrainSlurmNode.__name__, "n1")] == 1
        assert sum(n for (kind, _), n in done.items() if kind == SubmitSlurmJob.__name__) == 1
        assert sum(n for (kind, _), n in done.items() if kind == BindPod.__name__) == 1
        # Who did what: a before the kill, b after, each under its own fencing token.
        by = {
            (type(r.action).__name__, r.key): (r.worker, r.lease_revision)
            for r in records
            if r.outcome == "ok"
        }
        assert by[(DrainSlurmNode.__name__, "n1")][0] == "stack"
        assert by[(DrainSlurmNode.__name__, "n2")][0] == "replica-b"
        assert all(r.lease_revision > 0 for r in records if r.outcome == "ok")
        # Slurm saw exactly one job submission (the placeholder), not one per replica.
        assert len(stack.slurm.jobs) == 1
    finally:
        await b.stop()


async def test_partitions_split_one_reconciler_without_overlap(stack: Stack) -> None:
    """worker.partitions 2: replica a takes partition 0, replica b partition 1 of every
    reconciler; each key is handled by the replica of its partition only."""
    assert stack.settings is not None
    await stack.stop_app()
    base = msgspec.structs.replace(
        stack.settings,
        worker=msgspec.structs.replace(stack.settings.worker, partitions=2),
    )

    def replica(name: str, index: int) -> App:
        worker = msgspec.structs.replace(base.worker, partition_indices=[index])
        return App(
            msgspec.structs.replace(base, instance_id=name, worker=worker), with_health=False
        )

    a, b = replica("part-a", 0), replica("part-b", 1)
    await a.start()
    await b.start()
    stack.app = a
    try:
        assert "slurm_drain[0/2]" in a.workers and "slurm_drain[1/2]" not in a.workers
        assert "slurm_drain[1/2]" in b.workers and "slurm_drain[0/2]" not in b.workers
        nodes = ["n1", "n2", "n3", "n4"]
        for n in nodes:
            stack.cordon(n)
        for n in nodes:
            await stack.wait_for(lambda n=n: stack.slurm_node(n).has("DRAIN"), what=f"{n} DRAIN")
        await stack.settled()
        drains = [
            r
            for r in await stack.action_records()
            if isinstance(r.action, DrainSlurmNode) and r.outcome == "ok"
        ]
        assert sorted(r.key for r in drains) == nodes
        for r in drains:
            want = "part-a" if partition_of(r.key, 2) == 0 else "part-b"
            assert r.worker == want, (r.key, r.worker)
        assert {r.worker for r in drains} == {"part-a", "part-b"}, "one replica did all"
    finally:
        stack.app = None
        await b.stop()
        await a.stop()
