"""Pod groups of every kind through Slurm, in the simulators with their simulated kubelets.

Acceptance of the pods issue: 200 pods in 20 groups of mixed kinds are placed, run and cleaned
up with no leaked job, pod or finalizer; scancel, preemption and the time limit each delete
the bound pods of their job.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas import wellknown
from schemas.actions import BindPod, CancelSlurmJob, DeletePod, SubmitSlurmJob
from slurmbridge.devtools.sim.slurmjobs import ENDED
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Stack
from tests._helpers import our_jobs, phase_of, pod

FIN = wellknown.FINALIZER_SCHEDULER
JOBID = wellknown.LABEL_SLURM_JOBID
PREFIX = wellknown.ANNOTATION_SLURMJOB_PREFIX
KINDS = ("Pod", "Job", "JobSet", "LeaderWorkerSet", "PodGroup")


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=32, poll_interval=0.2) as s:
        yield s


def groups_plan() -> list[tuple[str, str, int]]:
    """20 groups, four of each kind, 200 pods: bare pods are 1, the others 12 or 13."""
    big = iter([13, 13, 13, 13] + [12] * 12)
    plan = [
        (kind, f"{kind.lower()}-{i}", 1 if kind == "Pod" else next(big))
        for i in range(4)
        for kind in KINDS
    ]
    assert len(plan) == 20 and sum(size for *_, size in plan) == 200
    return plan


async def test_200_pods_in_20_mixed_groups_run_and_leave_nothing_behind(stack: Stack) -> None:
    names: dict[str, list[str]] = {}
    for kind, name, size in groups_plan():
        names[name] = create_group(
            stack.kube,
            kind,
            name,
            size,
            annotations={PREFIX + "partition": "batch"},
            requests={"cpu": "1", "memory": "100Mi"},
            run_seconds=0.3,
        )
    every = [n for group in names.values() for n in group]
    assert len(every) == 200

    def finished() -> int:
        return sum(phase_of(pod(stack, n)) == "Succeeded" for n in every)

    await stack.wait_for(lambda: finished() == 200, timeout=120, what="200 pods Succeeded")
    await stack.wait_for(
        lambda: (
            not any(FIN in (pod(stack, n) or {})["metadata"].get("finalizers", []) for n in every)
        ),
        timeout=30,
        what="every finalizer of ours removed",
    )
    await stack.wait_for(
        lambda: all(j.state[0] in ENDED for j in our_jobs(stack)),
        timeout=30,
        what="every job ended",
    )
    await stack.settled(timeout=30)

    jobs = our_jobs(stack)
    assert len(jobs) == 20, "one Slurm job per group, none twice"
    by_id = {j.job_id: j for j in jobs}
    for group, pods in names.items():
        ids = {(pod(stack, n) or {})["metadata"]["labels"][JOBID] for n in pods}
        assert len(ids) == 1, f"{group}: its pods name one job"
        job = by_id[int(ids.pop())]
        assert job.state == ("CANCELLED",), f"{group}: the placeholder is released when done"
        bound = {(pod(stack, n) or {})["spec"]["nodeName"] for n in pods}
        assert bound == set(job.nodes), f"{group}: pods run on the job's nodes"
    # No node still carries an allocation of ours.
    assert all(stack.slurm_node(f"n{i}").alloc_cpus == 0 for i in range(1, 33))

    records = await stack.action_records()
    ok = [r for r in records if r.outcome == "ok"]
    assert sum(isinstance(r.action, SubmitSlurmJob) for r in ok) == 20
    assert sum(isinstance(r.action, BindPod) for r in ok) == 200
    assert not [r for r in ok if isinstance(r.action, DeletePod)], "no pod had to be deleted"
    assert sum(isinstance(r.action, CancelSlurmJob) for r in ok) == 20

    # The pods are Kubernetes' to keep (Succeeded pods stay until their owner goes); deleting
    # them now completes at once: nothing of ours holds them.
    for n in every:
        stack.kube.delete("pods", n, "default")
    assert all(pod(stack, n) is None for n in every)
    await stack.settled(timeout=30)
    assert len(our_jobs(stack)) == 20, "no job submitted after the pods went"


async def test_scancel_preemption_and_time_limit_each_delete_the_bound_pods(
    stack: Stack,
) -> None:
    stack.slurm.minute_s = 3.0  # a 1-minute time limit runs out 3 s after the job starts
    groups = {
        "cancelled": create_group(stack.kube, "Job", "cancelled", 2, requests={"cpu": "1"}),
        "preempted": create_group(stack.kube, "JobSet", "preempted", 2, requests={"cpu": "1"}),
        "timed-out": create_group(
            stack.kube,
            "PodGroup",
            "timed-out",
            2,
            annotations={PREFIX + "timelimit": "1"},
            requests={"cpu": "1"},
        ),
    }

    def running(group: str) -> bool:
        return all(phase_of(pod(stack, n)) == "Running" for n in groups[group])

    await stack.wait_for(lambda: all(running(g) for g in groups), timeout=20, what="all Running")
    job_of = {
        g: int((pod(stack, names[0]) or {})["metadata"]["labels"][JOBID])
        for g, names in groups.items()
    }
    stack.slurm.cancel_job(job_of["cancelled"])
    stack.slurm.preempt_job(job_of["preempted"])
    for group, state in (
        ("cancelled", "CANCELLED"),
        ("preempted", "PREEMPTED"),
        ("timed-out", "TIMEOUT"),
    ):
        await stack.wait_for(
            lambda g=group: all(pod(stack, n) is None for n in groups[g]),
            timeout=20,
            what=f"{group}: bound pods deleted",
        )
        assert stack.slurm.job(job_of[group]).state == (state,)
    await stack.settled(timeout=30)
    records = await stack.action_records()
    deleted = {
        r.action.pod.name for r in records if isinstance(r.action, DeletePod) and r.outcome == "ok"
    }
    assert deleted == {n for names in groups.values() for n in names}
    # Slurm ended these jobs itself: none of them was cancelled by slurmbridge.
    cancelled = [r for r in records if isinstance(r.action, CancelSlurmJob) and r.outcome == "ok"]
    assert cancelled == []


async def test_a_pod_stuck_terminating_on_a_silent_node_is_released_after_the_grace() -> None:
    """slurm-bridge #49: the kubelet is gone, so our finalizer is removed after the grace."""
    async with Stack(nodes=2, poll_interval=0.2, settings={"kube": {"stuckPodGrace": 1}}) as s:
        (name,) = create_group(s.kube, "Pod", "stuck", 1, requests={"cpu": "1"})

        def current() -> dict[str, Any]:
            return s.kube.get("pods", name, "default")

        await s.wait_for(lambda: phase_of(current()) == "Running", what="Running")
        node = current()["spec"]["nodeName"]
        job_id = int(current()["metadata"]["labels"][JOBID])
        s.kube.stop_kubelet(node)
        s.kube.delete_pod(name, grace_period_seconds=1)
        await s.wait_for(
            lambda: FIN not in (current()["metadata"].get("finalizers") or []),
            timeout=15,
            what="finalizer removed after deletionTimestamp + stuckPodGrace",
        )

        def events() -> list[dict[str, Any]]:
            return [
                e
                for e in s.kube.list("events", "default")
                if e["involvedObject"]["name"] == name and e["reason"] == "KubeletUnresponsive"
            ]

        await s.wait_for(lambda: bool(events()), what="a KubeletUnresponsive Event")
        assert [e["type"] for e in events()] == ["Warning"]
        assert node in events()[0]["message"]
        # The pod is still on its node as far as anyone knows: its job stays (slurm-bridge #16).
        assert s.slurm.job(job_id).state == ("RUNNING",)
        s.kube.start_kubelet(node)
        await s.wait_for(lambda: pod(s, name) is None, what="pod removed by its kubelet")
        await s.wait_for(lambda: s.slurm.job(job_id).state == ("CANCELLED",), what="job released")


async def test_a_pod_naming_a_podgroup_that_does_not_exist_runs_alone(stack: Stack) -> None:
    """Issue 18 (8), Slinky slurmjobir.TranslateToSlurmJobIR: once the PodGroup list is
    complete and lacks the named PodGroup, the pod is placed from its owner (here alone),
    after the grace that lets a PodGroup created with it arrive, with a Warning Event."""
    stack.kube.add_pod(
        "lonely",
        labels={"scheduling.x-k8s.io/pod-group": "absent"},
        scheduler_name=wellknown.DEFAULT_SCHEDULER_NAME,
        requests={"cpu": "1"},
    )
    await stack.wait_for(
        lambda: phase_of(pod(stack, "lonely")) == "Running",
        timeout=60,
        what="the pod placed alone and Running",
    )
    (job,) = our_jobs(stack)
    assert job.comment.startswith("slurmbridge:default/Pod:lonely:")
    events = [
        e["reason"]
        for e in stack.kube.list("events", "default")
        if e["involvedObject"]["name"] == "lonely"
    ]
    assert "PodGroupNotFound" in events
