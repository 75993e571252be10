"""Pod groups, their translation into a Slurm job, and the placement / workload rules."""

from __future__ import annotations

import pytest

from reconcilers import _pods, placement, workload
from reconcilers._pods import Group, TranslationError, translate
from schemas import wellknown
from schemas.actions import (
    BindPod,
    CancelSlurmJob,
    DeletePod,
    RecordEvent,
    RemovePodFinalizer,
    SetPodCondition,
    SubmitSlurmJob,
)
from schemas.events import KubePod, OwnerRef, SlurmJob

P = wellknown.ANNOTATION_SLURMJOB_PREFIX
MIB = 1024 * 1024
BARE = Group(namespace="ns", kind="Pod", name="a")


def pod(name: str = "a", **kw: object) -> KubePod:
    base: dict[str, object] = {
        "source": "k8s",
        "key": f"ns/{name}",
        "namespace": "ns",
        "name": name,
        "uid": f"u-{name}",
        "scheduler_name": wellknown.DEFAULT_SCHEDULER_NAME,
        "cpu_millis": 1500,
        "memory_bytes": 100 * MIB + 1,
    }
    base.update(kw)
    return KubePod(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("labels", "owner", "expected"),
    [
        ({}, None, "ns/Pod:a"),
        ({}, OwnerRef(api_version="batch/v1", kind="Job", name="j"), "ns/Job:j"),
        ({}, OwnerRef(api_version="apps/v1", kind="ReplicaSet", name="r"), "ns/Pod:a"),
        ({"jobset.sigs.k8s.io/jobset-name": "js"}, None, "ns/JobSet:js"),
        (
            {
                "leaderworkerset.sigs.k8s.io/name": "l",
                "leaderworkerset.sigs.k8s.io/group-index": "2",
            },
            None,
            "ns/LeaderWorkerSet:l/2",
        ),
        ({"scheduling.x-k8s.io/pod-group": "pg"}, None, "ns/PodGroup:pg"),
    ],
)
def test_group_of(labels: dict[str, str], owner: OwnerRef | None, expected: str) -> None:
    g = _pods.group_of(pod(labels=labels, owner=owner))
    assert g.key == expected
    assert _pods.parse_group_key(g.key) == g


def test_defaults_one_node_per_pod_with_the_largest_request() -> None:
    spec = translate(
        Group(namespace="ns", kind="Job", name="j"),
        [pod("a"), pod("b", cpu_millis=2100, memory_bytes=10 * MIB, gpus=1)],
        {},
    )
    assert (spec.tasks, spec.min_nodes, spec.max_nodes) == (2, 2, 2)
    assert spec.cpus_per_task == 3  # 2.1 CPUs rounded up
    assert spec.memory_per_node_mib == 101  # 100 MiB + 1 byte rounded up
    assert spec.tres_per_node == "gres/gpu=1"
    assert spec.name == "j"  # the group's name (Slinky 1.3)


def test_every_annotation_is_translated() -> None:
    ann = {
        P + "account": "acct",
        P + "constraints": "fast",
        P + "cpu-per-task": "4",
        P + "exclusive": "true",
        P + "gres": "gpu:a100:2",
        P + "group-id": "100",
        P + "job-name": "train",
        P + "licenses": "matlab:1",
        P + "max-nodes": "3",
        P + "mem-per-node": "2Gi",
        P + "min-nodes": "1",
        P + "partition": "gpu",
        P + "priority": "10",
        P + "qos": "high",
        P + "reservation": "r1",
        P + "timelimit": "1-00:30",
        P + "user-id": "1000",
        P + "wckey": "w",
    }
    s = translate(BARE, [pod()], ann)
    assert (s.account, s.constraints, s.cpus_per_task, s.exclusive) == (
        "acct",
        "slurm_bridge_gres_compatible&fast",
        4,
        True,
    )
    assert (s.tres_per_node, s.group_id, s.name, s.licenses) == (
        "gres/gpu:a100:2",
        100,
        "train",
        "matlab:1",
    )
    assert (s.max_nodes, s.memory_per_node_mib, s.min_nodes, s.partition) == (3, 2048, 1, "gpu")
    assert (s.priority, s.qos, s.reservation, s.time_limit_minutes) == (10, "high", "r1", 1470)
    assert (s.user_id, s.wckey) == (1000, "w")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("cpu-per-task", "zero"),
        ("cpu-per-task", "0"),
        ("min-nodes", "-1"),
        ("mem-per-node", "lots"),
        ("exclusive", "yes"),
        ("timelimit", "soon"),
        ("timelimit", "1:75"),
        ("priority", "high"),
        ("user-id", "root"),
        ("partition", "a,b"),
        ("job-name", "  "),
    ],
)
def test_bad_annotations_name_the_field(name: str, value: str) -> None:
    with pytest.raises(TranslationError) as err:
        translate(BARE, [pod()], {P + name: value})
    assert err.value.field == f"metadata.annotations[{P}{name}]"


def test_max_below_min_nodes_is_an_error() -> None:
    with pytest.raises(TranslationError, match="max-nodes"):
        translate(BARE, [pod()], {P + "min-nodes": "3", P + "max-nodes": "2"})


def _pview(pods: tuple[KubePod, ...], job: SlurmJob | None = None, **kw: object) -> placement.View:
    base: dict[str, object] = {
        "group": BARE,
        "pods": pods,
        "workload": None,
        "job": job,
        "job_id": job.job_id if job else None,
        "partitions": frozenset({"batch"}),
        "node_map": {"s1": "k1"},
        "excluded": ("s9",),
        "scheduler_name": wellknown.DEFAULT_SCHEDULER_NAME,
        "cluster": "c",
    }
    base.update(kw)
    return placement.View(**base)  # type: ignore[arg-type]


def test_placement_submits_then_binds_when_running() -> None:
    d = placement.decide(_pview((pod(),)))
    submit = d.actions[0]
    assert isinstance(submit, SubmitSlurmJob)
    assert submit.spec.excluded_nodes == ("s9",)
    assert submit.marker == "slurmbridge:ns/Pod:a:u-a"
    labelled = pod(
        labels={wellknown.LABEL_SLURM_JOBID: "5"},
        finalizers=(wellknown.FINALIZER_SCHEDULER,),
        tolerations=(wellknown.TAINT_MANAGED_NODE,),
    )
    running = SlurmJob(source="slurm:c", key="5", job_id=5, state=("RUNNING",), nodes=("s1",))
    d = placement.decide(_pview((labelled,), running))
    binds = [a for a in d.actions if isinstance(a, BindPod)]
    assert [(b.node, b.slurm_node, b.job_id) for b in binds] == [("k1", "s1", 5)]
    pending = SlurmJob(source="slurm:c", key="5", job_id=5, state=("PENDING",))
    assert placement.decide(_pview((labelled,), pending)).actions == ()


def test_placement_rejects_an_unknown_partition_once() -> None:
    bad = pod(annotations={P + "partition": "nope"})
    d = placement.decide(_pview((bad,)))
    assert [type(a) for a in d.actions] == [SetPodCondition, RecordEvent]
    cond = d.actions[0]
    assert isinstance(cond, SetPodCondition)
    from schemas.events import PodCondition

    already = pod(
        annotations={P + "partition": "nope"},
        conditions=(
            PodCondition(
                type="PodScheduled", status="False", reason=cond.reason, message=cond.message
            ),
        ),
    )
    assert placement.decide(_pview((already,))).actions == ()


def _wview(pods: tuple[KubePod, ...], job: SlurmJob | None, **kw: object) -> workload.View:
    base: dict[str, object] = {
        "group": BARE,
        "pods": pods,
        "job": job,
        "job_id": 5,
        "node_ready": {},
        "cluster": "c",
        "now": 1000.0,
        "grace_s": 300.0,
        "slurm_listed": True,
    }
    base.update(kw)
    return workload.View(**base)  # type: ignore[arg-type]


MARK = "slurmbridge:ns/Pod:a:u-a"
BOUND = pod(
    node_name="k1",
    phase="Running",
    labels={wellknown.LABEL_SLURM_JOBID: "5"},
    annotations={wellknown.ANNOTATION_SLURM_NODE: "s1"},
    finalizers=(wellknown.FINALIZER_SCHEDULER,),
)


@pytest.mark.parametrize("state", ["COMPLETED", "CANCELLED", "PREEMPTED", "TIMEOUT", "PENDING"])
def test_a_bound_pod_whose_job_stopped_is_deleted(state: str) -> None:
    job = SlurmJob(source="slurm:c", key="5", job_id=5, state=(state,), comment=MARK)
    d = workload.decide(_wview((BOUND,), job))
    assert any(isinstance(a, DeletePod) for a in d.actions)


def test_a_job_never_seen_or_vanished_deletes_nothing() -> None:
    unbound = pod(labels={wellknown.LABEL_SLURM_JOBID: "5"})
    assert workload.decide(_wview((unbound,), None)).actions == ()
    # Vanished after the bind (slurmctld lost it): placement re-backs the pod.
    assert workload.decide(_wview((BOUND,), None)).actions == ()
    # Missing proves nothing before the log holds a current listing of the cluster.
    held = workload.decide(_wview((BOUND,), None, slurm_listed=False))
    assert held.actions == () and held.requeue_after == workload.LISTING_RECHECK_S


def test_running_job_keeps_a_running_pod_and_a_terminating_one() -> None:
    job = SlurmJob(source="slurm:c", key="5", job_id=5, state=("RUNNING",), comment=MARK)
    assert workload.decide(_wview((BOUND,), job)).actions == ()
    terminating = pod(
        node_name="k1", phase="Running", deletion_timestamp=990, finalizers=BOUND.finalizers
    )
    done = pod("b", phase="Succeeded", finalizers=BOUND.finalizers)
    d = workload.decide(_wview((terminating, done), job, node_ready={"k1": True}))
    assert not any(isinstance(a, CancelSlurmJob) for a in d.actions)  # slurm-bridge #16


def test_finished_group_cancels_the_job_then_releases_finalizers() -> None:
    job = SlurmJob(source="slurm:c", key="5", job_id=5, state=("RUNNING",), comment=MARK)
    done = pod(phase="Succeeded", finalizers=(wellknown.FINALIZER_SCHEDULER,))
    d = workload.decide(_wview((done,), job))
    assert [type(a) for a in d.actions] == [CancelSlurmJob, RemovePodFinalizer]
    cancel = d.actions[0]
    assert isinstance(cancel, CancelSlurmJob) and cancel.marker == MARK
    # After the effects: the job is CANCELLED, the finalizer gone ⇒ nothing more.
    after = SlurmJob(source="slurm:c", key="5", job_id=5, state=("CANCELLED",), comment=MARK)
    assert workload.decide(_wview((pod(phase="Succeeded"),), after)).actions == ()


def test_stuck_terminating_pod_is_released_after_the_grace() -> None:
    job = SlurmJob(source="slurm:c", key="5", job_id=5, state=("RUNNING",), comment=MARK)
    # Deleted at 600 with a 30 s grace: the API server stamps deletionTimestamp 630, the end
    # of the grace period, so the 300 s stuck grace runs out at 930 (not 960).
    stuck = pod(
        node_name="k1",
        phase="Running",
        deletion_timestamp=630,
        deletion_grace_s=30,
        finalizers=(wellknown.FINALIZER_SCHEDULER,),
    )
    early = workload.decide(_wview((stuck,), job, node_ready={"k1": False}, now=800.0))
    assert early.actions == () and early.requeue_after == pytest.approx(130.0)
    late = workload.decide(_wview((stuck,), job, node_ready={"k1": False}, now=931.0))
    assert [type(a) for a in late.actions] == [RemovePodFinalizer, RecordEvent]
    ready = workload.decide(_wview((stuck,), job, node_ready={"k1": True}, now=931.0))
    assert ready.actions == ()


def test_a_job_of_ours_without_pods_is_cancelled() -> None:
    job = SlurmJob(source="slurm:c", key="5", job_id=5, state=("PENDING",), comment=MARK)
    d = workload.decide(_wview((), job))
    assert [type(a) for a in d.actions] == [CancelSlurmJob]
