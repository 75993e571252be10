"""Heterogeneous jobs (issue 28, item 5): a group whose pods have different shapes is one
Slurm heterogeneous job with a component per shape — Slinky slurm-bridge 1.3
``internal/utils/slurmjobir/slurmjobir.go`` (``SlurmJobIR.Components``, at most 128) and
``internal/scheduler/plugins/slurmbridge/slurmcontrol/slurmcontrol.go`` (``submitJob``:
``jobs`` for more than one component, the ids from ``het_job_id_set``). The Slurm facts (the
leader's id names the het job, cancelling the leader ends every component) are recorded from
real Slurm 26.05 in tests/real_slurm/test_modern_hetjob.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import pytest

from reconcilers import _hetjob, _pods, placement, workload
from reconcilers.base import Context
from schemas import wellknown
from schemas.actions import (
    BindPod,
    CancelSlurmJob,
    DeletePod,
    MarkPods,
    RecordEvent,
    SetPodCondition,
    SubmitSlurmJob,
)
from schemas.events import (
    KubeListed,
    KubeNode,
    KubePod,
    PodCondition,
    SlurmJob,
    SlurmPartition,
    SlurmPing,
)
from tests.unit._decisions import store
from tests.unit._pods import kube_workload, ns_pod

SCHED = wellknown.DEFAULT_SCHEDULER_NAME
CTX = Context(scheduler_name=SCHED, cluster="c1", now=1000.0)
JOBID = wellknown.LABEL_SLURM_JOBID
MIB = 1024 * 1024
KEY = "ns/LeaderWorkerSet:lws/0"
MARKER = f"slurmbridge:{KEY}:uid-lws"
BATCH = SlurmPartition(source="slurm:c1", key="batch", cluster="c1", nodes=("n1", "n2", "n3", "n4"))
PING = SlurmPing(source="slurm:c1", key="c1", cluster="c1", responding=True)
LWS = kube_workload("ns", "LeaderWorkerSet", "lws", size=3)
NODES = tuple(KubeNode(source="k8s", key=f"n{i}", ready=True) for i in range(1, 5))


def pod(
    name: str, cpu: int, *, job: int | None = None, node: str = "", phase: str = "Pending"
) -> KubePod:
    labels = {_pods.LABEL_LWS_NAME: "lws", _pods.LABEL_LWS_GROUP_INDEX: "0"}
    extra: dict[str, Any] = {}
    if job is not None:
        labels[JOBID] = str(job)
        extra = {"finalizers": (wellknown.FINALIZER_SCHEDULER,)}
    if node:
        extra["annotations"] = {wellknown.ANNOTATION_SLURM_NODE: node}
    return ns_pod(
        name,
        scheduler_name=SCHED,
        labels=labels,
        node_name=node,
        phase=phase,
        cpu_millis=cpu * 1000,
        memory_bytes=256 * MIB,
        **extra,
    )


LEADER = pod("lws-0", 2)
WORKERS = (pod("lws-0-1", 1), pod("lws-0-2", 1))


def sjob(job_id: int, state: str, nodes: tuple[str, ...], offset: int) -> SlurmJob:
    return SlurmJob(
        source="slurm:c1",
        key=str(job_id),
        cluster="c1",
        job_id=job_id,
        state=(state,),
        nodes=nodes,
        partition="batch",
        comment=MARKER,
        het_job_id=7,
        het_job_offset=offset,
        het_job_ids=(7, 8),
    )


def of(d: Any, kind: type[Any]) -> list[Any]:
    return [a for a in d.actions if isinstance(a, kind)]


@dataclass(frozen=True)
class SplitCase:
    name: str
    group: str
    pods: tuple[KubePod, ...]
    annotations: dict[str, str]
    want: list[list[str]] | None


SPLITS = [
    SplitCase(
        "a LeaderWorkerSet's leader and workers: two components, the leader first",
        KEY,
        (WORKERS[1], LEADER, WORKERS[0]),
        {},
        [["lws-0"], ["lws-0-1", "lws-0-2"]],
    ),
    SplitCase("one shape: a plain job", KEY, WORKERS, {}, None),
    SplitCase("a Job is never split", "ns/Job:j", (LEADER, *WORKERS), {}, None),
    SplitCase(
        "min-nodes sizes the whole job: plain",
        KEY,
        (LEADER, *WORKERS),
        {_pods.PREFIX + "min-nodes": "2"},
        None,
    ),
]


@pytest.mark.parametrize("case", SPLITS, ids=lambda c: c.name)
def test_pods_of_different_shapes_are_components(case: SplitCase) -> None:
    group = _pods.parse_group_key(case.group)
    assert group is not None
    comps = _hetjob.components(group, case.pods, case.annotations)
    got = None if comps is None else [[p.name for p in c] for c in comps]
    assert got == case.want


def test_more_than_128_shapes_is_refused() -> None:
    """Slinky slurmjobir.go ``errorTooManyComponents``: Slurm's hard limit."""
    group = _pods.parse_group_key(KEY)
    assert group is not None
    many = [pod(f"p{i:03}", i + 1) for i in range(129)]
    with pytest.raises(_pods.TranslationError, match="128"):
        _hetjob.components(group, many, {})


def test_a_group_of_two_shapes_is_submitted_as_one_het_job() -> None:
    s = store(LWS, LEADER, *WORKERS, BATCH, PING)
    d = placement.decide(placement.view(s, KEY, CTX))
    (submit,) = of(d, SubmitSlurmJob)
    assert [len(c.pods) for c in submit.components] == [1, 2]
    leader, workers = (c.spec for c in submit.components)
    assert (leader.tasks, leader.min_nodes, leader.cpus_per_task) == (1, 1, 2)
    assert (workers.tasks, workers.min_nodes, workers.cpus_per_task) == (2, 2, 1)
    assert leader.name == workers.name == "lws-0"
    assert [p.name for p in submit.pods] == ["lws-0", "lws-0-1", "lws-0-2"]
    assert submit.spec == leader
    # Slinky buildJobDesc: every component requires the feature.
    assert {c.spec.constraints for c in submit.components} == {"slurm_bridge_gres_compatible"}


def test_each_pod_is_bound_to_a_node_of_its_own_component() -> None:
    pods = (pod("lws-0", 2, job=7), pod("lws-0-1", 1, job=7), pod("lws-0-2", 1, job=7))
    jobs = (sjob(7, "RUNNING", ("n1",), 0), sjob(8, "RUNNING", ("n2", "n3"), 1))
    s = store(LWS, *pods, *jobs, *NODES, BATCH, PING)
    d = placement.decide(placement.view(s, KEY, CTX))
    binds = {b.pod.name: (b.node, b.job_id) for b in of(d, BindPod)}
    assert binds == {"lws-0": ("n1", 7), "lws-0-1": ("n2", 7), "lws-0-2": ("n3", 7)}


def test_nothing_is_bound_until_every_component_runs() -> None:
    pods = (pod("lws-0", 2, job=7), pod("lws-0-1", 1, job=7), pod("lws-0-2", 1, job=7))
    jobs = (sjob(7, "RUNNING", ("n1",), 0), sjob(8, "PENDING", (), 1))
    s = store(LWS, *pods, *jobs, *NODES, BATCH, PING)
    assert of(placement.decide(placement.view(s, KEY, CTX)), BindPod) == []


BOUND = (
    pod("lws-0", 2, job=7, node="n1", phase="Succeeded"),
    pod("lws-0-1", 1, job=7, node="n2", phase="Running"),
    pod("lws-0-2", 1, job=7, node="n3", phase="Running"),
)
PODS_LISTED = KubeListed(source="k8s", key="pods", resource="pods")


def test_a_finished_leader_never_releases_a_live_component() -> None:
    """The leader's pod Succeeded and its component ended; the workers' component runs: no
    worker pod is deleted, and the workers' job is no duplicate to cancel."""
    jobs = (sjob(7, "COMPLETED", ("n1",), 0), sjob(8, "RUNNING", ("n2", "n3"), 1))
    s = store(LWS, *BOUND, *jobs, PING, PODS_LISTED)
    d = workload.decide(workload.view(s, KEY, CTX))
    assert of(d, DeletePod) == []
    assert of(d, CancelSlurmJob) == []


def test_the_workers_go_when_every_component_has_ended() -> None:
    jobs = (sjob(7, "COMPLETED", ("n1",), 0), sjob(8, "CANCELLED", ("n2", "n3"), 1))
    s = store(LWS, *BOUND, *jobs, PING, PODS_LISTED)
    d = workload.decide(workload.view(s, KEY, CTX))
    assert sorted(a.pod.name for a in of(d, DeletePod)) == ["lws-0-1", "lws-0-2"]


def test_a_finished_group_cancels_the_components_its_ended_leader_cannot_reach() -> None:
    done = tuple(msgspec.structs.replace(p, phase="Succeeded") for p in BOUND)
    jobs = (sjob(7, "COMPLETED", ("n1",), 0), sjob(8, "RUNNING", ("n2", "n3"), 1))
    s = store(LWS, *done, *jobs, PING, PODS_LISTED)
    d = workload.decide(workload.view(s, KEY, CTX))
    assert [c.job_id for c in of(d, CancelSlurmJob)] == [8]
    running = (sjob(7, "RUNNING", ("n1",), 0), sjob(8, "RUNNING", ("n2", "n3"), 1))
    d = workload.decide(workload.view(store(LWS, *done, *running, PING, PODS_LISTED), KEY, CTX))
    assert [c.job_id for c in of(d, CancelSlurmJob)] == [7], "the leader takes every component"


def test_a_leader_gone_from_the_listing_is_no_lost_job_while_a_component_runs() -> None:
    """The leader's component ended and left Slurm's listing (its pods carry its id, 7); the
    workers' component (8) runs. The het job lives on: placement neither re-backs the pods on
    their nodes (a "lost job", docs/slurm.md) nor relabels them to the component — found in
    the simulator e2e, where a worker pod was relabelled to 8 at random."""
    leader_done = msgspec.structs.replace(BOUND[0], phase="Succeeded")
    s = store(LWS, leader_done, *BOUND[1:], sjob(8, "RUNNING", ("n2", "n3"), 1), PING, BATCH,
              *NODES)  # fmt: skip
    v = placement.view(s, KEY, CTX)
    assert v is not None and v.job_id == 7 and v.reback == ()
    d = placement.decide(v)
    assert of(d, SubmitSlurmJob) == [], d.reason
    assert {m.job_id for m in of(d, MarkPods)} <= {7}, "the pods keep the het job's id"


# --- a pod of a new shape joining after the submit -------------------------------------------


def _named(job: SlurmJob, *names: str) -> SlurmJob:
    pods = ",".join(f'"ns/{n}"' for n in names)
    return msgspec.structs.replace(job, admin_comment=f'{{"pods":[{pods}]}}')


@pytest.mark.parametrize("state", ["RUNNING", "PENDING"])
def test_a_pod_of_a_new_shape_gets_a_reason_and_the_others_keep_their_components(
    state: str,
) -> None:
    """The het job was submitted for the leader (2 CPUs) and two workers (1 CPU); a third
    pod of 4 CPUs (lws-0-0, sorting between them) joined since: no component has its shape,
    so it is not bound and says why (condition + one Warning Event); the leader and workers
    still go to their own components' nodes — the new shape does not shift them."""
    newcomer = pod("lws-0-0", 4, job=7)
    pods = (pod("lws-0", 2, job=7), newcomer, pod("lws-0-1", 1, job=7), pod("lws-0-2", 1, job=7))
    nodes = ("n1",) if state == "RUNNING" else ()
    jobs = (
        _named(sjob(7, state, nodes, 0), "lws-0"),
        _named(sjob(8, state, ("n2", "n3") if nodes else (), 1), "lws-0-1", "lws-0-2"),
    )
    lws = msgspec.structs.replace(LWS, size=4)
    d = placement.decide(placement.view(store(lws, *pods, *jobs, *NODES, BATCH, PING), KEY, CTX))
    conds = {c.pod.name: c for c in of(d, SetPodCondition)}
    assert conds["lws-0-0"].reason == placement.NEW_SHAPE
    assert "4000m CPU" in conds["lws-0-0"].message and "job 7" in conds["lws-0-0"].message
    warnings = [e for e in of(d, RecordEvent) if e.reason == placement.NEW_SHAPE]
    assert [e.name for e in warnings] == ["lws-0-0"] and warnings[0].type == "Warning"
    binds = {b.pod.name: (b.node, b.job_id) for b in of(d, BindPod)}
    if state == "RUNNING":
        assert binds == {"lws-0": ("n1", 7), "lws-0-1": ("n2", 7), "lws-0-2": ("n3", 7)}
    else:
        assert binds == {}
        # The others wait with Slurm's reason; the newcomer keeps its own.
        assert {n for n, c in conds.items() if c.reason == placement.PENDING} == {
            "lws-0",
            "lws-0-1",
            "lws-0-2",
        }
    # Said once: with the condition in place, nothing more for it.
    said = msgspec.structs.replace(
        newcomer,
        conditions=(
            PodCondition(
                type="PodScheduled",
                status="False",
                reason=placement.NEW_SHAPE,
                message=conds["lws-0-0"].message,
            ),
        ),
    )
    pods2 = (pods[0], said, *pods[2:])
    d2 = placement.decide(placement.view(store(lws, *pods2, *jobs, *NODES, BATCH, PING), KEY, CTX))
    assert not [a for a in d2.actions if getattr(a, "reason", "") == placement.NEW_SHAPE]
