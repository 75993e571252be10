"""Pods through Slurm, end to end in the simulators: placement, binding, cleanup.

The slurmrestd simulator schedules the placeholder jobs; the test plays the kubelet (it moves
pods to Succeeded through the status subresource).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas import wellknown
from schemas.actions import SubmitSlurmJob
from slurmbridge.devtools.testing import Stack
from tests._helpers import our_jobs, pod

SCHED = wellknown.DEFAULT_SCHEDULER_NAME
JOB = wellknown.LABEL_SLURM_JOBID
FIN = wellknown.FINALIZER_SCHEDULER


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=4, poll_interval=0.2) as s:
        yield s


def finish(stack: Stack, name: str) -> None:
    stack.kube.patch_merge(
        "pods", name, {"status": {"phase": "Succeeded"}}, "default", subresource="status"
    )


async def test_a_bare_pod_is_placed_bound_and_its_job_cancelled_when_it_ends(
    stack: Stack,
) -> None:
    stack.kube.add_pod("solo", scheduler_name=SCHED, requests={"cpu": "1", "memory": "100Mi"})
    await stack.wait_for(lambda: len(our_jobs(stack)) == 1, what="a placeholder job")
    job = our_jobs(stack)[0]
    assert "EXTERNAL_JOB" in job.flags
    assert job.admin_comment == '{"pods":["default/solo"]}'
    await stack.wait_for(
        lambda: bool((pod(stack, "solo") or {}).get("spec", {}).get("nodeName")),
        what="pod bound",
    )
    p = pod(stack, "solo")
    assert p is not None
    meta = p["metadata"]
    assert meta["labels"][JOB] == str(job.job_id)
    assert FIN in meta["finalizers"]
    assert meta["annotations"][wellknown.ANNOTATION_SLURM_NODE] == p["spec"]["nodeName"]
    assert stack.slurm.job(job.job_id).nodes == (p["spec"]["nodeName"],)
    finish(stack, "solo")
    await stack.wait_for(
        lambda: stack.slurm.job(job.job_id).state == ("CANCELLED",), what="job cancelled"
    )
    await stack.wait_for(
        lambda: FIN not in ((pod(stack, "solo") or {}).get("metadata", {}).get("finalizers") or []),
        what="finalizer removed",
    )
    await stack.settled()
    recs = await stack.action_records()
    assert sum(isinstance(r.action, SubmitSlurmJob) and r.outcome == "ok" for r in recs) == 1


async def test_a_job_group_becomes_one_slurm_job_and_scancel_deletes_its_pods(
    stack: Stack,
) -> None:
    owner = stack.kube.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "train",
                "namespace": "default",
                "annotations": {wellknown.ANNOTATION_SLURMJOB_PREFIX + "partition": "batch"},
            },
            "spec": {
                "parallelism": 3,
                "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
            },
        }
    )
    ref = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "train",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    for i in range(3):
        stack.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"train-{i}",
                    "namespace": "default",
                    "labels": {"batch.kubernetes.io/job-name": "train"},
                    "ownerReferences": [ref],
                },
                "spec": {
                    "schedulerName": SCHED,
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                    ],
                },
            }
        )
    await stack.wait_for(
        lambda: all(
            (pod(stack, f"train-{i}") or {}).get("spec", {}).get("nodeName") for i in range(3)
        ),
        what="3 pods bound",
    )
    jobs = our_jobs(stack)
    assert len(jobs) == 1
    job = jobs[0]
    assert job.partition == "batch"
    assert len(set(job.nodes)) == 3  # one node per pod by default
    # An administrator cancels the job in Slurm: the bound pods are deleted.
    stack.slurm.cancel_job(job.job_id)
    await stack.wait_for(
        lambda: all(pod(stack, f"train-{i}") is None for i in range(3)),
        timeout=15,
        what="pods deleted and finalized",
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("timelimit", "soon"),
        # Bounds (issue "Fail closed at every edge", 10): 10^12 minutes became UNLIMITED, a
        # priority past 32 bits priority 1, and the simulated nodes have 2 CPUs and 1000 MiB.
        ("timelimit", "1000000000000"),
        ("priority", "4294967296"),
        ("cpu-per-task", "3"),
        ("mem-per-node", "1001"),
    ],
)
async def test_an_untranslatable_pod_stays_pending_with_a_condition_and_an_event(
    stack: Stack, name: str, value: str
) -> None:
    annotation = wellknown.ANNOTATION_SLURMJOB_PREFIX + name
    stack.kube.add_pod("bad", scheduler_name=SCHED, annotations={annotation: value})

    def condition() -> dict[str, Any] | None:
        p = pod(stack, "bad") or {}
        conds = p.get("status", {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "PodScheduled"), None)

    await stack.wait_for(lambda: condition() is not None, what="PodScheduled condition")
    cond = condition()
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "SlurmJobInvalid")
    assert f"metadata.annotations[{annotation}]" in cond["message"]

    def warned() -> bool:
        return any(
            e["involvedObject"]["name"] == "bad"
            and e["type"] == "Warning"
            and e["reason"] == "SlurmJobInvalid"
            for e in stack.kube.list("events", "default")
        )

    await stack.wait_for(warned, what="Warning event")
    await stack.settled()
    assert our_jobs(stack) == []


async def test_a_pending_job_uses_nodes_uncordoned_after_its_submit(stack: Stack) -> None:
    """Submitted while n1-n3 were cordoned (excluded), a 2-node group waits; once n1 is
    uncordoned the pending job's exclusions follow, Slurm starts it, and the pods are bound
    — one on n1, one on n4."""
    from slurmbridge.devtools.sim.workloads import create_group

    for n in ("n1", "n2", "n3"):
        stack.cordon(n)
    await stack.wait_for(
        lambda: all(stack.slurm_node(n).has("DRAIN") for n in ("n1", "n2", "n3")),
        what="n1-n3 drained",
    )
    await stack.settled()
    create_group(stack.kube, "Job", "pair", 2, requests={"cpu": "1", "memory": "100Mi"})
    await stack.wait_for(lambda: len(our_jobs(stack)) == 1, what="placeholder submitted")
    job = our_jobs(stack)[0]
    assert set(job.excluded_nodes) == {"n1", "n2", "n3"}
    await stack.settled()
    assert stack.slurm.job(job.job_id).state == ("PENDING",)  # one node is not enough
    stack.uncordon("n1")
    await stack.wait_for(
        lambda: stack.slurm.job(job.job_id).state == ("RUNNING",), what="job started"
    )
    assert set(stack.slurm.job(job.job_id).excluded_nodes) == {"n2", "n3"}
    await stack.wait_for(
        lambda: (
            {(pod(stack, f"pair-{i}") or {}).get("spec", {}).get("nodeName") for i in (0, 1)}
            == {"n1", "n4"}
        ),
        what="pods bound to n1 and n4",
    )
