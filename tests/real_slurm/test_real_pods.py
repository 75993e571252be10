"""Pods through a real Slurm 22.05 (REST API v0.0.38): placeholder batch jobs.

v0.0.38 has no ``EXTERNAL_JOB``, so each pod group becomes a batch job running the documented
placeholder script (``sleep``) on the allocated nodes. Kubernetes is the simulator with its
simulated kubelets; Slurm is real. Each test leaves no job behind.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from schemas import wellknown
from slurmbridge.devtools.realslurm import RealSlurm
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Stack
from tests._helpers import bound_pod, pod

JOBID = wellknown.LABEL_SLURM_JOBID


@pytest.fixture
async def stack(real_slurm: RealSlurm) -> AsyncIterator[Stack]:
    async with Stack(nodes=4, real_slurm=real_slurm, poll_interval=0.5) as s:
        yield s
    real_slurm.run("scancel", "--user", "root", check=False)


def job_state(real_slurm: RealSlurm, job_id: int) -> str:
    """The job's state as ``scontrol`` tells it (``""`` once Slurm forgot it)."""
    out = real_slurm.run("scontrol", "-o", "show", "job", str(job_id), check=False).stdout
    for field in out.split():
        if field.startswith("JobState="):
            return field.split("=", 1)[1]
    return ""


async def test_a_placeholder_job_runs_binds_the_pod_and_is_cancelled_when_it_ends(
    stack: Stack, real_slurm: RealSlurm
) -> None:
    (name,) = create_group(stack.kube, "Pod", "real-ok", 1, requests={"cpu": "1"}, run_seconds=2)
    p, job_id = await bound_pod(stack, name)
    node = p["spec"]["nodeName"]
    assert p["metadata"]["annotations"][wellknown.ANNOTATION_SLURM_NODE] == node
    assert job_state(real_slurm, job_id) == "RUNNING"
    shown = real_slurm.run("scontrol", "-o", "show", "job", str(job_id)).stdout
    assert f"NodeList={node}" in shown, "the pod runs where Slurm allocated its job"
    assert "Comment=slurmbridge:" in shown
    assert "BatchFlag=1" in shown, "v0.0.38: a placeholder batch job, not an external one"
    assert stack.app is not None and stack.app.slurm_client is not None
    assert stack.app.slurm_client.api_version == "v0.0.38"
    # The pod completes (the simulated kubelet ends it): slurmbridge cancels the job.
    await stack.wait_for(
        lambda: job_state(real_slurm, job_id) in ("CANCELLED", ""),
        timeout=60,
        what="job cancelled in real Slurm",
    )
    await stack.wait_for(
        lambda: (
            wellknown.FINALIZER_SCHEDULER
            not in ((pod(stack, name) or {}).get("metadata", {}).get("finalizers") or [])
        ),
        timeout=30,
        what="finalizer removed",
    )


async def test_scancel_in_real_slurm_deletes_the_pod(stack: Stack, real_slurm: RealSlurm) -> None:
    (name,) = create_group(stack.kube, "Pod", "real-scancel", 1, requests={"cpu": "1"})
    _, job_id = await bound_pod(stack, name)
    real_slurm.scancel(str(job_id))
    await stack.wait_for(lambda: pod(stack, name) is None, timeout=60, what="pod deleted")
    assert job_state(real_slurm, job_id) in ("CANCELLED", "")
