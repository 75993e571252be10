"""A LeaderWorkerSet whose leader is shaped apart from its workers, through the simulators: one
Slurm heterogeneous job with a component per shape, every pod labelled with the het job's id
and bound on a node of its own component; the leader finishing first releases nothing while
the workers run; when they finish every component is released (issue 28, item 5)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas import wellknown
from slurmbridge.devtools.sim.slurmjobs import ENDED
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Stack
from tests._helpers import phase_of, pod

FIN = wellknown.FINALIZER_SCHEDULER
JOBID = wellknown.LABEL_SLURM_JOBID
PREFIX = wellknown.ANNOTATION_SLURMJOB_PREFIX


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=6, poll_interval=0.2) as s:
        yield s


async def test_a_leader_and_its_workers_run_as_one_het_job(stack: Stack) -> None:
    names = create_group(
        stack.kube,
        "LeaderWorkerSet",
        "lws",
        3,
        annotations={PREFIX + "partition": "batch"},
        requests={"cpu": "1", "memory": "100Mi"},
        leader_requests={"cpu": "2", "memory": "200Mi"},
        run_seconds=3.0,
        leader_run_seconds=0.3,
    )
    leader, workers = names[0], names[1:]

    def ours() -> list[Any]:
        return [j for j in stack.slurm.jobs if j.comment.startswith("slurmbridge:")]

    await stack.wait_for(
        lambda: all((pod(stack, n) or {}).get("spec", {}).get("nodeName") for n in names),
        timeout=30,
        what="every pod bound",
    )
    jobs = ours()
    assert len(jobs) == 2, "one het job of two components"
    head = next(j for j in jobs if j.het_job_offset == 0)
    tail = next(j for j in jobs if j.het_job_offset == 1)
    assert head.het_job_ids == tail.het_job_ids == (head.job_id, tail.job_id)
    assert {(pod(stack, n) or {})["metadata"]["labels"][JOBID] for n in names} == {
        str(head.job_id)
    }, "every pod names the het job"
    assert (pod(stack, leader) or {})["spec"]["nodeName"] in head.nodes
    assert {(pod(stack, n) or {})["spec"]["nodeName"] for n in workers} == set(tail.nodes)
    assert len(tail.nodes) == 2 and not set(head.nodes) & set(tail.nodes)

    # The leader finishes first: the workers' component keeps running, no pod is deleted.
    await stack.wait_for(
        lambda: phase_of(pod(stack, leader)) == "Succeeded", timeout=30, what="the leader done"
    )
    await stack.settled(timeout=30)
    assert all(phase_of(pod(stack, n)) == "Running" for n in workers)
    assert stack.slurm.job(tail.job_id).state == ("RUNNING",)

    # The workers finish: every component is released, every finalizer removed.
    await stack.wait_for(
        lambda: all(phase_of(pod(stack, n)) == "Succeeded" for n in names),
        timeout=60,
        what="every pod Succeeded",
    )
    await stack.wait_for(
        lambda: all(j.state[0] in ENDED for j in ours()), timeout=30, what="every component ended"
    )
    await stack.wait_for(
        lambda: (
            not any(FIN in (pod(stack, n) or {})["metadata"].get("finalizers", []) for n in names)
        ),
        timeout=30,
        what="every finalizer of ours removed",
    )
    await stack.settled(timeout=30)
    assert len(ours()) == 2, "no job submitted again"
