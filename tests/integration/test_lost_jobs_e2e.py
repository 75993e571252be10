"""Slurm forgets jobs, end to end in the simulators (issue "Fail closed at every edge", 3).

slurmctld is killed seconds after some submits and restarts from the state it saved before
them (the slurmrestd simulator's ``save_state`` / ``restore_state``): those jobs are gone
without a trace and their ids are handed out again. Then every pending pod gets a new job of
its own, every running pod a RUNNING job of its own group on the node it runs on (none
deleted), and a job that took a lost job's id is neither adopted nor cancelled. When the job
that re-backs running pods cannot start (another job holds their node), the pods are deleted
after ``kube.lostJobGrace``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from reconcilers import _pods
from schemas import wellknown
from schemas.actions import CancelSlurmJob, DeletePod
from slurmbridge.devtools.sim.slurmjobs import SavedJobs
from slurmbridge.devtools.testing import Stack
from slurmbridge.slurm.models import Job
from tests._helpers import pod

SCHED = wellknown.DEFAULT_SCHEDULER_NAME
JOBID = wellknown.LABEL_SLURM_JOBID
#: A user's job (not slurmbridge's): held, so it keeps the id it took and never runs.
USER_JOB = {"name": "analysis", "comment": "my analysis", "hold": True}


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=3, poll_interval=0.2) as s:
        yield s


def marker_of(stack: Stack, name: str) -> str:
    p = pod(stack, name)
    assert p is not None
    group = _pods.Group(namespace="default", kind="Pod", name=name)
    return _pods.marker(group, p["metadata"]["uid"])


def job_of(stack: Stack, name: str) -> Job | None:
    """The live job the pod's label names, if Slurm has it."""
    p = pod(stack, name)
    raw = ((p or {}).get("metadata", {}).get("labels") or {}).get(JOBID, "")
    if not raw.isdigit():
        return None
    return next((j for j in stack.slurm.jobs if j.job_id == int(raw)), None)


def node_of(stack: Stack, name: str) -> str:
    return str(((pod(stack, name) or {}).get("spec") or {}).get("nodeName") or "")


def add_runner(stack: Stack) -> None:
    """``runner``: placed, bound, and Running (the simulated kubelet)."""
    stack.kube.add_pod("runner", scheduler_name=SCHED, requests={"cpu": "1"})


def add_waiter(stack: Stack) -> None:
    """``waiter``: its node selector matches no node, so its job is submitted with every
    node excluded and stays PENDING."""
    stack.kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "waiter", "namespace": "default"},
            "spec": {
                "schedulerName": SCHED,
                "nodeSelector": {"example.com/nowhere": "true"},
                "containers": [{"name": "c", "image": "busybox"}],
            },
        }
    )


def restart_from(stack: Stack, saved: SavedJobs) -> None:
    """slurmctld killed and restarted from ``saved``: slurmrestd answers 503 while it is
    down (the poller's next poll fails), then Slurm has only the saved jobs."""
    stack.slurm.fail_next(2, 503)
    stack.slurm.restore_state(saved)


async def place_then_lose(stack: Stack) -> tuple[int, int, str]:
    """Save Slurm's state, submit (runner bound and Running, waiter PENDING), then restart
    slurmctld from the saved state. Returns the lost job ids and runner's node."""
    saved = stack.slurm.save_state()
    add_runner(stack)
    add_waiter(stack)
    await stack.wait_for(lambda: bool(node_of(stack, "runner")), what="runner bound")
    await stack.wait_for(
        lambda: (job := job_of(stack, "waiter")) is not None and job.base_state == "PENDING",
        what="waiter's job pending",
    )
    runner_job, waiter_job = job_of(stack, "runner"), job_of(stack, "waiter")
    assert runner_job is not None and waiter_job is not None
    node = node_of(stack, "runner")
    restart_from(stack, saved)
    assert not stack.slurm.jobs
    return runner_job.job_id, waiter_job.job_id, node


async def test_pods_whose_jobs_slurm_lost_get_jobs_again_and_a_reused_id_is_not_adopted(
    stack: Stack,
) -> None:
    lost_runner, lost_waiter, node = await place_then_lose(stack)
    # The restarted slurmctld hands the lost ids out again: a user's job takes the first.
    user = stack.slurm.submit(USER_JOB, external=True)
    assert user == min(lost_runner, lost_waiter)

    def settled() -> bool:
        running, waiting = job_of(stack, "runner"), job_of(stack, "waiter")
        return (
            running is not None
            and running.comment == marker_of(stack, "runner")
            and running.base_state == "RUNNING"
            and running.nodes == (node,)
            and waiting is not None
            and waiting.comment == marker_of(stack, "waiter")
            and waiting.base_state == "PENDING"
        )

    await stack.wait_for(settled, what="runner re-backed on its node, waiter resubmitted")
    running = job_of(stack, "runner")
    assert running is not None and running.required_nodes == (node,)
    assert node_of(stack, "runner") == node  # never deleted, never moved
    # The user's job under a lost id: untouched.
    mine = stack.slurm.job(user)
    assert (mine.base_state, mine.comment) == ("PENDING", "my analysis")
    await stack.settled()
    recs = await stack.action_records()
    assert not [r for r in recs if isinstance(r.action, DeletePod)]
    assert not [r for r in recs if isinstance(r.action, CancelSlurmJob) and r.action.job_id == user]
    assert stack.slurm.job(user).base_state == "PENDING"


async def test_a_re_back_job_that_cannot_start_deletes_its_pods_after_the_grace() -> None:
    async with Stack(nodes=3, poll_interval=0.2, settings={"kube": {"lostJobGrace": 1}}) as stack:
        saved = stack.slurm.save_state()
        add_runner(stack)
        await stack.wait_for(lambda: bool(node_of(stack, "runner")), what="runner bound")
        node = node_of(stack, "runner")
        restart_from(stack, saved)
        # Slurm calls the node IDLE now: someone else's job gets it before the re-back.
        other = stack.slurm.submit(
            {"name": "other", "comment": "someone", "required_nodes": [node], "exclusive": True},
            external=True,
        )
        assert stack.slurm.job(other).nodes == (node,)
        await stack.wait_for(
            lambda: (
                (p := pod(stack, "runner")) is None or bool(p["metadata"].get("deletionTimestamp"))
            ),
            what="runner deleted after the grace",
        )

        # The re-back job did not start: it is cancelled; the other job runs on.
        def cancelled() -> bool:
            rebacks = [j for j in stack.slurm.jobs if j.comment.startswith("slurmbridge:")]
            return bool(rebacks) and all(
                j.required_nodes == (node,) and j.base_state == "CANCELLED" for j in rebacks
            )

        await stack.wait_for(cancelled, what="the re-back job cancelled")
        assert stack.slurm.job(other).base_state == "RUNNING"
