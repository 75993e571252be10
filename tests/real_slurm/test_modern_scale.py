"""200 pods in 20 groups through real Slurm 26.05 (issue 16's acceptance).

Its own 26.05 cluster (20 nodes: a group's job asks one node per pod, so two 10-pod groups
run at a time). Each group is a batch/v1 Job of 10 pods of 1 CPU that run 2 s: one
EXTERNAL_JOB each, bound when RUNNING, cancelled when the pods complete. At the end: no job
of ours left in Slurm, every pod completed without our finalizer, nothing dead-lettered, and
no job tombstoned while it ran.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from schemas import wellknown
from schemas.events import SlurmJob
from slurmbridge.devtools.realslurm_modern import ModernSlurm
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Stack

GROUPS, SIZE = 20, 10
#: A placeholder job asks one node per pod (Slinky's default), so 20 nodes run two groups
#: at a time.
NODES = 20


@pytest.fixture(scope="module")
def big_2605(real_slurm_available: None) -> Iterator[ModernSlurm]:
    cluster = ModernSlurm("26.05", nodes=NODES)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
        assert cluster.cluster_processes() == []


async def test_200_pods_in_20_groups_are_placed_run_and_cleaned_up(big_2605: ModernSlurm) -> None:
    async with Stack(nodes=NODES, real_slurm=big_2605, poll_interval=0.5) as stack:
        names = [
            n
            for g in range(GROUPS)
            for n in create_group(
                stack.kube, "Job", f"wave-{g:02d}", SIZE, requests={"cpu": "1"}, run_seconds=2
            )
        ]
        assert len(names) == GROUPS * SIZE

        def pods() -> list[dict[str, Any]]:
            return [p for p in stack.kube.list("pods", "default") if p["metadata"]["name"] in names]

        def finished(p: dict[str, Any]) -> bool:
            return (p.get("status") or {}).get("phase") == "Succeeded" and (
                wellknown.FINALIZER_SCHEDULER not in (p["metadata"].get("finalizers") or [])
            )

        try:
            await stack.wait_for(
                lambda: all(finished(p) for p in pods()), timeout=240, what="every pod Succeeded"
            )
        except TimeoutError:
            phases = collections.Counter(
                ((p.get("status") or {}).get("phase"), bool(p["spec"].get("nodeName")))
                for p in pods()
            )
            queue = big_2605.squeue("-o", "%i %j %T %r %N")
            pytest.fail(f"pods (phase, bound): {dict(phases)}; Slurm queue:\n{queue}")
        job_ids = {int(p["metadata"]["labels"][wellknown.LABEL_SLURM_JOBID]) for p in pods()}
        assert len(job_ids) == GROUPS, "one placeholder job per group"

        def live_jobs() -> list[str]:
            out = big_2605.squeue("-h", "-t", "PD,R,CG", "-o", "%i %j %T")
            return [line for line in out.splitlines() if line.strip()]

        await stack.wait_for(lambda: live_jobs() == [], timeout=60, what="no job left")
        await stack.settled()
        assert await stack.dead_letters() == []
        # No job was tombstoned while it could still run: every tombstone follows an ended
        # state (none is expected before MinJobAge purges them).
        last: dict[str, SlurmJob] = {}
        for raw in await stack.observations("bridge.obs.*.SlurmJob.>"):
            job = msgspec.json.decode(raw, type=SlurmJob)
            if job.op == "deleted":
                before = last.get(job.key)
                assert before is None or before.base_state not in ("PENDING", "RUNNING"), (
                    f"job {job.key} tombstoned while {before.base_state if before else '?'}"
                )
            else:
                last[job.key] = job
        ours = {k for k, j in last.items() if j.comment.startswith("slurmbridge:")}
        assert ours >= {str(i) for i in job_ids}
