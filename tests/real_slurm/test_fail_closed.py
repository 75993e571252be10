"""Fail closed at the edges, on real Slurm 26.05 (REST v0.0.45); Kubernetes is the simulator.

1. No decision on half a world: a fresh log over nodes that are already tainted (a first
   install, a migration from Slinky's slurm-bridge, a lost NATS store) never records an
   ``UntaintNode`` — not in the moment between the Kubernetes listing and the first Slurm
   poll, and not for as long as slurmrestd rejects the token. Once Slurm is listed, the one
   node Slurm really lacks loses its stale taint.
2. The log before the effect: a JetStream store on a small tmpfs that fills up mid-placement
   leaves no placeholder job in slurmctld without its ``intended`` SubmitSlurmJob record,
   and once space returns every lease is held again and every pod is bound.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nats.errors
import pytest

from schemas import wellknown
from schemas.actions import SubmitSlurmJob, UntaintNode
from schemas.events import KubeListed, SlurmPing
from slurmbridge.devtools.realslurm_modern import ModernSlurm
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Stack, tmpfs
from slurmbridge.runtime.natsserver import NatsServer

MANAGED = (wellknown.TAINT_MANAGED_NODE, wellknown.DEFAULT_SCHEDULER_NAME, "NoExecute")
TAINT = dict(zip(("key", "value", "effect"), MANAGED, strict=True))
NODES = ("n1", "n2", "n3", "n4")


def _pretaint(stack: Stack) -> None:
    stack.kube.add_node("k8s-only", cpu="2", memory="1000Mi")
    for name in (*NODES, "k8s-only"):
        stack.kube.patch_merge("nodes", name, {"spec": {"taints": [TAINT]}})


async def test_a_fresh_log_over_tainted_nodes_untaints_none_of_slurms(
    slurm_2605: ModernSlurm,
) -> None:
    async with Stack(nodes=4, real_slurm=slurm_2605, poll_interval=0.2, setup=_pretaint) as s:
        await s.wait_for(
            lambda: MANAGED not in s.taints("k8s-only"),
            timeout=30,
            what="the stale taint of the node Slurm lacks removed, once both sides are listed",
        )
        await s.settled()
        for name in NODES:
            assert MANAGED in s.taints(name), name
        untainted = [
            r.action.node
            for r in await s.action_records(intents=True)
            if isinstance(r.action, UntaintNode)
        ]
        assert set(untainted) == {"k8s-only"}, untainted


async def test_a_rejected_token_never_untaints(slurm_2605: ModernSlurm, tmp_path: Path) -> None:
    bad = tmp_path / "token"
    bad.write_text("eyJhbGciOiJIUzI1NiJ9.e30.not-a-signature\n")
    async with Stack(
        nodes=4,
        real_slurm=slurm_2605,
        poll_interval=0.2,
        setup=_pretaint,
        settings={"slurm": {"tokenFile": str(bad)}},
    ) as s:
        assert s.app is not None
        proj = s.app.projection
        await s.wait_for(
            lambda: (
                proj.get(KubeListed, "nodes", "k8s") is not None
                and (ping := proj.get(SlurmPing, "default", "slurm:default")) is not None
                and bool(ping.error)
            ),
            timeout=30,
            what="the nodes listed and a rejected poll in the log",
        )
        await s.settled()
        records = await s.action_records(intents=True)
        assert not [r for r in records if isinstance(r.action, UntaintNode)]
        for name in (*NODES, "k8s-only"):
            assert MANAGED in s.taints(name), name

        bad.write_text(slurm_2605.token_file.read_text())
        await s.wait_for(
            lambda: MANAGED not in s.taints("k8s-only"),
            timeout=30,
            what="the stale taint removed once the token is accepted",
        )
        for name in NODES:
            assert MANAGED in s.taints(name), name


def _our_jobs(slurm: ModernSlurm) -> dict[int, tuple[str, ...]]:
    """Placeholder jobs in slurmctld (any state it still shows): job id → the pods its
    admin_comment names."""
    out = slurm.run("scontrol", "-o", "show", "jobs", check=False).stdout
    jobs: dict[int, tuple[str, ...]] = {}
    for line in out.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if not fields.get("Comment", "").startswith("slurmbridge:"):
            continue
        admin = (
            line.split("AdminComment=", 1)[1].split(" ", 1)[0] if "AdminComment=" in line else ""
        )
        pods = json.loads(admin).get("pods", []) if admin.startswith("{") else []
        jobs[int(fields["JobId"])] = tuple(sorted(pods))
    return jobs


async def test_a_full_store_mid_placement_leaves_no_slurm_job_unrecorded(
    slurm_2605: ModernSlurm, tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "store", "24m") as store:
        server = NatsServer(store_dir=store)
        await server.start()
        try:
            async with Stack(
                nodes=4,
                real_slurm=slurm_2605,
                poll_interval=0.2,
                nats_url=server.url,
                settings={"leases": {"ttl": 3}},
            ) as s:
                assert s.app is not None and s.app.bus is not None
                js = s.app.bus.js
                await s.settled()
                # Placeholder jobs earlier tests of this session left in slurmctld are not
                # this test's to account for.
                earlier = set(_our_jobs(slurm_2605))
                await js.add_stream(name="FILLER", subjects=["filler.>"])
                names = create_group(s.kube, "Pod", "fc-a", 1, requests={"cpu": "1"})
                names += create_group(s.kube, "Pod", "fc-b", 1, requests={"cpu": "1"})
                blob = os.urandom(256 * 1024)
                for i in range(400):
                    try:
                        await js.publish(f"filler.{i}", blob, timeout=2)
                    except (nats.errors.Error, TimeoutError):
                        break
                else:
                    pytest.fail("the store never filled up")
                names += create_group(s.kube, "Pod", "fc-c", 1, requests={"cpu": "1"})
                names += create_group(s.kube, "Pod", "fc-d", 1, requests={"cpu": "1"})
                # Full for longer than a lease's life: leases are lost, and must come back.
                await s.wait_for(
                    lambda: any(not lease.held for lease in s.app.leases.values()),  # type: ignore[union-attr]
                    timeout=30,
                    what="a lease lost while the store is full",
                )
                assert await _every_job_intended(s, slurm_2605, earlier)

                await js.delete_stream("FILLER")
                await s.wait_for(
                    lambda: all(lease.held for lease in s.app.leases.values()),  # type: ignore[union-attr]
                    timeout=60,
                    what="every lease held again once space returned",
                )
                await s.wait_for(
                    lambda: all(
                        (s.kube.get("pods", n, "default").get("spec") or {}).get("nodeName")
                        for n in names
                    ),
                    timeout=90,
                    what="every pod bound once space returned",
                )
                await s.settled()
                assert await _every_job_intended(s, slurm_2605, earlier)
        finally:
            slurm_2605.run("scancel", "--user", "root", check=False)
            await server.stop()


async def _every_job_intended(s: Stack, slurm: ModernSlurm, earlier: set[int]) -> bool:
    intended = {
        tuple(sorted(p.key for p in r.action.pods))
        for r in await s.action_records(intents=True)
        if isinstance(r.action, SubmitSlurmJob) and r.outcome == "intended"
    }
    jobs = _our_jobs(slurm)
    missing = {
        job: pods for job, pods in jobs.items() if job not in earlier and pods not in intended
    }
    assert not missing, f"jobs in slurmctld without an intended record: {missing}"
    return True
