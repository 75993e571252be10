"""Why is my pod pending (issue 20, items 4 and 5), and the preemption grace (item 6), in the
simulators with their simulated kubelets and a real nats-server.

A pod whose job cannot start (the partition is full) says so on its ``PodScheduled``
condition with Slurm's reason and its place in the partition's queue, is counted by
``slurmbridge_pending_pods``, and runs once the nodes are free; ``explain pod/NS/NAME`` tells
its steps in order. A pod whose job Slurm preempts gets ``DisruptionTarget`` and the
configured grace before it is killed.
"""

from __future__ import annotations

import io
import time
from typing import Any

from prometheus_client import REGISTRY

from schemas import wellknown
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Stack
from slurmbridge.logview import explain
from tests._helpers import pod

JOBID = wellknown.LABEL_SLURM_JOBID
SCHEDULED = wellknown.CONDITION_POD_SCHEDULED


def condition(stack: Stack, name: str, kind: str) -> dict[str, Any] | None:
    p = pod(stack, name)
    found = [
        c for c in ((p or {}).get("status") or {}).get("conditions") or [] if c["type"] == kind
    ]
    return found[0] if found else None


def says(stack: Stack, name: str, reason: str, message: str) -> bool:
    c = condition(stack, name, SCHEDULED)
    return c is not None and (c["status"], c["reason"], c["message"]) == ("False", reason, message)


def phase(stack: Stack, name: str) -> str:
    p = pod(stack, name)
    return "" if p is None else str((p.get("status") or {}).get("phase") or "Pending")


def events(stack: Stack, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in stack.kube.list("events", "default")
        if e["involvedObject"]["name"] == name and e["reason"] == reason
    ]


def pending_pods(reason: str) -> float:
    return REGISTRY.get_sample_value("slurmbridge_pending_pods", {"reason": reason}) or 0.0


async def test_a_pod_waiting_for_a_full_partition_says_why_then_runs() -> None:
    async with Stack(nodes=2, poll_interval=0.2) as stack:
        # Two whole-node pods fill partition batch (n1, n2).
        hog = create_group(stack.kube, "Job", "hog", 2, requests={"cpu": "1"})
        await stack.wait_for(
            lambda: all(phase(stack, n) == "Running" for n in hog), timeout=30, what="hog Running"
        )
        (waiter,) = create_group(stack.kube, "Pod", "waiter", 1, requests={"cpu": "1"})
        await stack.wait_for(
            lambda: says(stack, waiter, "SlurmJobPending", "Resources, 1st in partition batch"),
            timeout=30,
            what="waiter: PodScheduled=False SlurmJobPending 'Resources, 1st in partition batch'",
        )
        (second,) = create_group(stack.kube, "Pod", "second", 1, requests={"cpu": "1"})
        await stack.wait_for(
            lambda: says(stack, second, "SlurmJobPending", "Priority, 2nd in partition batch"),
            timeout=30,
            what="second: PodScheduled=False SlurmJobPending 'Priority, 2nd in partition batch'",
        )
        # The first wait is an Event too (once), Normal.
        await stack.wait_for(
            lambda: bool(events(stack, waiter, "SlurmJobPending")), what="a SlurmJobPending Event"
        )
        (first_wait,) = events(stack, waiter, "SlurmJobPending")
        assert first_wait["type"] == "Normal"
        assert "Resources, 1st in partition batch" in first_wait["message"]
        # The gauge counts them by Slurm's reason.
        await stack.wait_for(
            lambda: (
                pending_pods("SlurmJobPending:Resources") == 1
                and pending_pods("SlurmJobPending:Priority") == 1
            ),
            what="slurmbridge_pending_pods by Slurm's reason",
        )

        # The nodes come free: the hog's job is cancelled, its pods deleted.
        hog_job = int((pod(stack, hog[0]) or {})["metadata"]["labels"][JOBID])
        stack.slurm.cancel_job(hog_job)
        await stack.wait_for(
            lambda: phase(stack, waiter) == "Running" and phase(stack, second) == "Running",
            timeout=30,
            what="both waiting pods Running",
        )
        scheduled = condition(stack, waiter, SCHEDULED)
        assert scheduled is not None and scheduled["status"] == "True"
        await stack.wait_for(
            lambda: bool(events(stack, waiter, "Scheduled")), what="the Scheduled Event"
        )
        (started,) = events(stack, waiter, "Scheduled")
        job_id = int((pod(stack, waiter) or {})["metadata"]["labels"][JOBID])
        assert started["type"] == "Normal"
        assert f"Slurm job {job_id} started" in started["message"]
        assert "partition batch" in started["message"]
        await stack.wait_for(
            lambda: (
                pending_pods("SlurmJobPending:Resources") == 0
                and pending_pods("SlurmJobPending:Priority") == 0
            ),
            what="no pod pending any more",
        )
        await stack.settled(timeout=30)

        # explain pod/default/waiter: the steps in order, timed from the pod's creation.
        assert stack.app is not None and stack.app.bus is not None
        kind, key = explain.parse_ref(f"pod/default/{waiter}")
        assert (kind, key) == ("KubePod", f"default/{waiter}")
        story = await explain.pod_steps(stack.app.bus, key)
        assert story.created > 0
        heads = [
            "group complete",
            "placeholder job submitted",
            f"job {job_id} pending: Resources",
            f"job {job_id} RUNNING",
            "bound to",
            "Running (pod phase)",
        ]
        texts = [s.what for s in story.steps]
        at = [next(i for i, t in enumerate(texts) if t.startswith(h)) for h in heads]
        assert at == sorted(at), texts
        assert all(s.at >= story.created for s in story.steps)
        out = io.StringIO()
        explain.print_steps(story, out)
        printed = out.getvalue()
        assert printed.startswith(f"pod default/{waiter}: created ")
        assert "+" in printed and "job " + str(job_id) + " pending: Resources" in printed


async def test_a_preempted_pod_gets_disruption_target_and_the_grace() -> None:
    async with Stack(
        nodes=2, poll_interval=0.2, settings={"kube": {"preemptionGrace": 3}}
    ) as stack:
        (victim,) = create_group(stack.kube, "Pod", "victim", 1, requests={"cpu": "1"})
        await stack.wait_for(lambda: phase(stack, victim) == "Running", timeout=30, what="Running")
        job_id = int((pod(stack, victim) or {})["metadata"]["labels"][JOBID])
        # The container takes longer than the grace to stop on SIGTERM: the kubelet kills it
        # when the grace runs out.
        assert stack.kube.kubelet is not None
        stack.kube.kubelet.stop_seconds = 30.0
        stack.slurm.preempt_job(job_id)

        def terminating() -> bool:
            p = pod(stack, victim)
            return p is not None and bool(p["metadata"].get("deletionTimestamp"))

        await stack.wait_for(terminating, timeout=20, what="the pod being deleted")
        seen = time.monotonic()
        meta = (pod(stack, victim) or {})["metadata"]
        assert meta["deletionGracePeriodSeconds"] == 3
        target = condition(stack, victim, "DisruptionTarget")
        assert target is not None
        assert (target["status"], target["reason"]) == ("True", "PreemptionByScheduler")
        assert str(job_id) in target["message"]
        await stack.wait_for(
            lambda: bool(events(stack, victim, "Preempted")), what="a Preempted Event"
        )
        (event,) = events(stack, victim, "Preempted")
        assert event["type"] == "Warning" and "3 s" in event["message"]
        await stack.wait_for(lambda: pod(stack, victim) is None, timeout=20, what="pod gone")
        # Killed when the 3 s ran out, not at once (and not after the 30 s it wanted).
        assert 2.0 <= time.monotonic() - seen < 20
