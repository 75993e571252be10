"""Table-driven tests of the ``workload`` reconciler: every rule of its docstring, over a
projection, plus idempotence (applying the decided actions and deciding again)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import pytest

from reconcilers import _pods, workload
from reconcilers.base import NOTHING, Context, Decision
from schemas import wellknown
from schemas.actions import (
    AnyAction,
    CancelSlurmJob,
    DeletePod,
    RecordEvent,
    RemovePodFinalizer,
    SetPodCondition,
    SetPodLabel,
)
from schemas.events import (
    Event,
    KubeListed,
    KubeNode,
    KubePod,
    KubeWorkload,
    OwnerRef,
    SlurmJob,
    SlurmPing,
    tombstone,
)
from slurmbridge import config
from slurmbridge.cli.logs import context_of
from slurmbridge.runtime.projection import Projection
from tests.unit._decisions import kinds, of, ref
from tests.unit._pods import kube_pod, kube_workload, ns_pod

SCHED = "slurm-bridge-scheduler"
NOW = 10_000.0
CTX = Context(scheduler_name=SCHED, cluster="c1", now=NOW, stuck_pod_grace_s=300.0)
FIN = wellknown.FINALIZER_SCHEDULER
JOBID = wellknown.LABEL_SLURM_JOBID
SLURM_NODE = wellknown.ANNOTATION_SLURM_NODE
KEY = "ns/Job:train"
GROUP = _pods.Group(namespace="ns", kind="Job", name="train")
MARK = _pods.marker(GROUP, "uid-train")
OWNER = OwnerRef(api_version="batch/v1", kind="Job", name="train", uid="uid-train")


def pod(
    name: str = "t-0",
    *,
    job: int | None = 5,
    node: str = "",
    bound: bool | None = None,
    phase: str | None = None,
    deleted_at: float = 0,
    finalizer: bool = True,
    scheduler: str = SCHED,
    labels: dict[str, str] | None = None,
) -> KubePod:
    """A pod of Job ``train``. ``node`` binds it; ``bound`` (default: when it has a node and a
    job) adds the ``slurm-node`` annotation that placement writes when it binds."""
    labels = {_pods.LABEL_JOB_NAME: "train", **(labels or {})}
    if job is not None:
        labels[JOBID] = str(job)
    if bound is None:
        bound = bool(node) and job is not None
    return ns_pod(
        name,
        scheduler_name=scheduler,
        labels=labels,
        owner=OWNER,
        annotations={SLURM_NODE: "s-" + node} if bound else {},
        phase=phase or ("Running" if node else "Pending"),
        node_name=node,
        deletion_timestamp=int(deleted_at),
        finalizers=(FIN,) if finalizer else (),
    )


def sjob(
    state: str, job_id: int = 5, comment: str = MARK, cluster: str = "c1", nodes: str = "s-k1"
) -> SlurmJob:
    return SlurmJob(
        source=f"slurm:{cluster}",
        key=str(job_id),
        cluster=cluster,
        job_id=job_id,
        state=(state,),
        nodes=(nodes,),
        comment=comment,
    )


def kn(name: str, ready: bool) -> KubeNode:
    return KubeNode(source="k8s", key=name, ready=ready)


#: A good poll of c1 in the log: its listing is complete (reconcilers.base.slurm_listed).
LISTED = SlurmPing(source="slurm:c1", key="c1", cluster="c1", responding=True)


#: A complete list of our pods in the log (reconcilers.base.kube_listed).
PODS_LISTED = KubeListed(source="k8s", key="pods", resource="pods")


def store(*objs: Event, listed: bool = True, pods_listed: bool = True) -> Projection:
    p = Projection()
    first = ((LISTED,) if listed else ()) + ((PODS_LISTED,) if pods_listed else ())
    for i, o in enumerate((*first, *objs), 1):
        p.apply(o, i)
    return p


def decide(*objs: Event, key: str = KEY, ctx: Context = CTX) -> Decision:
    return workload.decide(workload.view(store(*objs), key, ctx))


# --- rule 1: pods whose job stopped ----------------------------------------------------------

#: Preempted jobs have their own rule (test_a_preempted_jobs_pods_get_the_grace_and_a_reason).
STOPPED = ["COMPLETED", "CANCELLED", "TIMEOUT", "FAILED", "NODE_FAIL", "PENDING"]


@pytest.mark.parametrize("state", STOPPED)
def test_a_bound_pod_whose_job_stopped_is_deleted(state: str) -> None:
    d = decide(pod("t-0", node="k1"), pod("t-1", node="k2"), sjob(state))
    assert kinds(d) == ["DeletePod", "RecordEvent", "DeletePod", "RecordEvent"]
    deletes = of(d, DeletePod)
    assert [x.pod for x in deletes] == [ref("t-0"), ref("t-1")]
    for x in deletes:
        assert (x.cluster, x.job_id) == ("c1", 5)
        assert state in x.why
        assert x.destructive
    events = of(d, RecordEvent)
    assert [(e.name, e.reason) for e in events] == [
        ("t-0", "SlurmJobStopped"),
        ("t-1", "SlurmJobStopped"),
    ]


@pytest.mark.parametrize("grace", [30, 0, 120])
def test_a_preempted_jobs_pods_get_the_grace_and_a_reason(grace: int) -> None:
    """Issue 20 (6): DisruptionTarget=True (PreemptionByScheduler, as kube-scheduler writes
    before its preemption delete), then the delete with gracePeriodSeconds = the setting,
    then a Warning Event Preempted; an unbound pod is left alone."""
    ctx = msgspec.structs.replace(CTX, preemption_grace_s=grace)
    d = decide(
        pod("t-0", node="k1"),
        pod("t-1", node="k2"),
        pod("t-2"),
        sjob("PREEMPTED"),
        ctx=ctx,
    )
    assert kinds(d) == ["SetPodCondition", "DeletePod", "RecordEvent"] * 2
    conds = of(d, SetPodCondition)
    assert [c.pod for c in conds] == [ref("t-0"), ref("t-1")]
    for c in conds:
        assert (c.type, c.status, c.reason) == (
            "DisruptionTarget",
            "True",
            "PreemptionByScheduler",
        )
        assert "job 5" in c.message
    deletes = of(d, DeletePod)
    assert [(x.pod, x.grace_period_s, x.job_id) for x in deletes] == [
        (ref("t-0"), grace, 5),
        (ref("t-1"), grace, 5),
    ]
    assert all("preempted" in x.why and f"{grace} s" in x.why for x in deletes)
    events = of(d, RecordEvent)
    assert [(e.name, e.type, e.reason) for e in events] == [
        ("t-0", "Warning", "Preempted"),
        ("t-1", "Warning", "Preempted"),
    ]
    # Other stops keep the pod's own grace period.
    assert [
        x.grace_period_s for x in of(decide(pod("t-0", node="k1"), sjob("CANCELLED")), DeletePod)
    ] == [None]


def test_the_preemption_grace_comes_from_the_settings() -> None:
    default = config.load(env={}, overrides={})
    assert default.kube.preemption_grace == 30
    assert context_of(default).preemption_grace_s == 30
    set_ = config.load(env={}, overrides={"kube": {"preemptionGrace": 5}})
    assert context_of(set_).preemption_grace_s == 5
    env = config.load(env={"SLURMBRIDGE_KUBE_PREEMPTION_GRACE": "7"}, overrides={})
    assert env.kube.preemption_grace == 7
    for bad in (-1, 2.5):
        with pytest.raises(config.ConfigError, match="preemptionGrace"):
            config.load(env={}, overrides={"kube": {"preemptionGrace": bad}})


def test_a_requeued_job_deletes_pods_bound_but_not_ready() -> None:
    # slurm-bridge #36: a bound pod counts even if its containers never became ready.
    p = msgspec.structs.replace(pod("t-0", node="k1"), phase="Pending", ready=False)
    assert [x.pod for x in of(decide(p, sjob("PENDING")), DeletePod)] == [ref("t-0")]


@dataclass(frozen=True)
class KeepCase:
    name: str
    objs: tuple[Event, ...]


KEEP = [
    KeepCase("job RUNNING", (pod("t-0", node="k1"), sjob("RUNNING"))),
    KeepCase("unbound pod of a PENDING job", (pod("t-0"), sjob("PENDING"))),
    KeepCase("job never seen, unbound pod", (pod("t-0"),)),
    KeepCase(
        "job never seen, pod on a node but never bound by us",
        (pod("t-0", node="k1", bound=False),),
    ),
    KeepCase(
        "finished pod of an ended job without finalizer",
        (pod("t-0", node="k1", phase="Succeeded", finalizer=False), sjob("COMPLETED")),
    ),
]


@pytest.mark.parametrize("case", KEEP, ids=lambda c: c.name)
def test_nothing_to_do(case: KeepCase) -> None:
    d = decide(*case.objs)
    assert d.actions == ()
    assert d.requeue_after is None


def test_a_job_that_vanished_after_bind_is_lost_and_the_pods_stay() -> None:
    """Issue "Fail closed at every edge" (3): slurmctld restarted from older state and lost
    the job under running pods. They are not deleted: placement re-backs them (rule 9)."""
    d = decide(pod("t-0", node="k1"), pod("t-1", node="k2"))
    assert d.actions == ()
    assert "lost" in d.reason


@pytest.mark.parametrize("state", ["RUNNING", "PENDING", "COMPLETED"])
def test_a_reused_job_id_with_another_marker_is_no_job(state: str) -> None:
    """The restarted slurmctld handed the lost job's id to another group's job (or a
    user's): never the group's job — its state neither deletes nor keeps the pods, and it is
    never cancelled, even when every pod of the group finished."""
    other = _pods.marker(_pods.Group(namespace="ns", kind="Job", name="other"), "uid-o")
    for comment in (other, "", _pods.marker(GROUP, "uid-an-earlier-train")):
        reused = sjob(state, comment=comment)
        d = decide(pod("t-0", node="k1"), reused, OWNER_JOB)
        assert not of(d, DeletePod) and not of(d, CancelSlurmJob), comment
        assert "lost" in d.reason
        finished = decide(pod("t-0", node="k1", phase="Succeeded"), reused, OWNER_JOB)
        assert not of(finished, CancelSlurmJob)
        assert kinds(finished) == ["RemovePodFinalizer"]


def test_a_missing_job_proves_nothing_without_a_current_listing() -> None:
    """Fail closed: before the first good poll is in the log, or while the last poll failed,
    a job missing from the projection may still run; the pod stays and the group is looked
    at again later (nothing else re-triggers it)."""
    bound = pod("t-0", node="k1")
    held = workload.decide(workload.view(store(bound, listed=False), KEY, CTX))
    assert held.actions == () and held.requeue_after == workload.LISTING_RECHECK_S
    failing = SlurmPing(source="slurm:c1", key="c1", cluster="c1", error="503", error_kind="X")
    held = decide(bound, failing)
    assert held.actions == () and "no current listing" in held.reason


#: The group's root, observed: its uid makes the marker exact (_pods.is_groups_job).
OWNER_JOB = kube_workload("ns", "Job", "train")


def reback(submitted_ago: float, nodes: tuple[str, ...] = ("s-k1", "s-k2")) -> SlurmJob:
    """Placement's re-back job for pods on k1 and k2: PENDING, asking for their nodes."""
    return msgspec.structs.replace(
        sjob("PENDING", job_id=5, nodes=""),
        nodes=(),
        required_nodes=nodes,
        submit_time=int(NOW - submitted_ago),
    )


@pytest.mark.parametrize("grace", [60.0, 5.0])
def test_a_re_back_job_keeps_its_pods_within_the_grace(grace: float) -> None:
    """Rule 9: the pods stay while Slurm may still start the job on their nodes, and the
    group is looked at again when the grace runs out."""
    ctx = msgspec.structs.replace(CTX, lost_job_grace_s=grace)
    bound = (pod("t-0", node="k1"), pod("t-1", node="k2"))
    d = decide(*bound, reback(submitted_ago=grace - 2), ctx=ctx)
    assert d.actions == ()
    assert d.requeue_after == pytest.approx(2.0)
    assert "re-backing" in d.reason


def test_a_re_back_job_that_did_not_start_in_time_loses_its_pods_and_is_cancelled() -> None:
    """Rule 9: past the grace the pods are deleted as Slinky would (the effector skips the
    delete if the job runs by then: the marker names it), and the pending job, which held
    only their nodes, is cancelled only while still pending."""
    bound = (pod("t-0", node="k1"), pod("t-1", node="k2"))
    d = decide(*bound, reback(submitted_ago=61))
    assert kinds(d) == ["DeletePod", "RecordEvent", "DeletePod", "RecordEvent", "CancelSlurmJob"]
    deletes = of(d, DeletePod)
    assert [x.pod for x in deletes] == [ref("t-0"), ref("t-1")]
    assert all(x.marker == MARK and "could not start" in x.why for x in deletes)
    (cancel,) = of(d, CancelSlurmJob)
    assert (cancel.job_id, cancel.marker, cancel.pending_only) == (5, MARK, True)


def test_a_re_back_job_without_a_submit_time_never_runs_out() -> None:
    d = decide(pod("t-0", node="k1"), msgspec.structs.replace(reback(0), submit_time=0))
    assert d.actions == () and d.requeue_after == workload.LISTING_RECHECK_S


def test_the_lost_job_grace_comes_from_the_settings() -> None:
    default = config.load(env={}, overrides={})
    assert default.kube.lost_job_grace == 60.0
    assert context_of(default).lost_job_grace_s == 60.0
    set_ = config.load(env={}, overrides={"kube": {"lostJobGrace": 5}})
    assert context_of(set_).lost_job_grace_s == 5
    env = config.load(env={"SLURMBRIDGE_KUBE_LOST_JOB_GRACE": "7.5"}, overrides={})
    assert env.kube.lost_job_grace == 7.5
    with pytest.raises(config.ConfigError, match="lostJobGrace"):
        config.load(env={}, overrides={"kube": {"lostJobGrace": -1}})


def test_a_job_never_seen_fails_closed_even_with_other_jobs_around() -> None:
    other = sjob("COMPLETED", job_id=9)
    assert decide(pod("t-0", node="k1", bound=False), other).actions == ()


def test_a_terminal_or_deleting_pod_is_not_deleted_again() -> None:
    objs = (
        pod("t-0", node="k1", phase="Failed", finalizer=False),
        pod("t-1", node="k1", deleted_at=NOW - 5, finalizer=False),
        pod("t-2", node="k1"),
        sjob("COMPLETED"),
    )
    assert [x.pod for x in of(decide(*objs), DeletePod)] == [ref("t-2")]


# --- rule 2: groups that finished ------------------------------------------------------------


@pytest.mark.parametrize("state", ["RUNNING", "PENDING"])
def test_a_finished_group_cancels_its_job_and_releases_finalizers(state: str) -> None:
    objs = (
        pod("t-0", node="k1", phase="Succeeded"),
        pod("t-1", node="k2", phase="Failed"),
        pod("t-2", deleted_at=NOW, finalizer=True),  # deleted before it was ever bound
        pod("t-3", phase="Succeeded", finalizer=False),
        sjob(state),
    )
    d = decide(*objs)
    assert kinds(d) == ["CancelSlurmJob"] + ["RemovePodFinalizer"] * 3
    cancel = d.actions[0]
    assert cancel == CancelSlurmJob(
        cluster="c1", job_id=5, marker=MARK, why="every pod of ns/Job:train has finished"
    )
    assert [r.pod for r in of(d, RemovePodFinalizer)] == [ref("t-0"), ref("t-1"), ref("t-2")]
    assert {r.finalizer for r in of(d, RemovePodFinalizer)} == {FIN}


@pytest.mark.parametrize("state", ["COMPLETED", "CANCELLED", "TIMEOUT"])
def test_a_finished_group_of_an_ended_job_only_releases_finalizers(state: str) -> None:
    d = decide(pod("t-0", node="k1", phase="Succeeded"), sjob(state))
    assert kinds(d) == ["RemovePodFinalizer"]


def test_a_finished_group_whose_job_vanished_only_releases_finalizers() -> None:
    d = decide(pod("t-0", node="k1", phase="Succeeded"))
    assert kinds(d) == ["RemovePodFinalizer"]


def test_a_pod_still_terminating_on_its_node_keeps_the_job() -> None:
    # slurm-bridge #16: the job stays until every pod has left its node.
    objs = (
        pod("t-0", node="k1", phase="Succeeded"),
        pod("t-1", node="k1", deleted_at=NOW - 10),
        kn("k1", ready=True),
        sjob("RUNNING"),
    )
    assert decide(*objs).actions == ()


def test_a_live_pod_keeps_the_job() -> None:
    objs = (pod("t-0", node="k1", phase="Succeeded"), pod("t-1", node="k2"), sjob("RUNNING"))
    assert decide(*objs).actions == ()


# --- rule 3: pods deleted after their job ended ----------------------------------------------


@pytest.mark.parametrize("job", [sjob("COMPLETED"), sjob("CANCELLED"), None], ids=str)
def test_a_pod_deleted_after_its_job_ended_loses_the_finalizer(job: SlurmJob | None) -> None:
    objs: tuple[Event, ...] = (
        pod("t-0", node="k1", deleted_at=NOW - 1),
        pod("t-1", node="k2"),  # still running: the group has not finished
        kn("k1", ready=True),
    )
    d = decide(*objs, *(() if job is None else (job,)))
    removes = of(d, RemovePodFinalizer)
    assert [(r.pod, r.why) for r in removes] == [(ref("t-0"), "job ended")]
    # A job Slurm lost (None) is re-backed by placement: its running pod stays.
    assert [x.pod for x in of(d, DeletePod)] == ([] if job is None else [ref("t-1")])


def test_a_deleted_pod_of_a_running_job_keeps_the_finalizer_on_a_ready_node() -> None:
    objs = (pod("t-0", node="k1", deleted_at=NOW - 1000), pod("t-1", node="k2"), kn("k1", True))
    d = decide(*objs, sjob("RUNNING"))
    assert d.actions == () and d.requeue_after is None


# --- rule 4: pods stuck Terminating ----------------------------------------------------------


@dataclass(frozen=True)
class StuckCase:
    name: str
    node: KubeNode | None
    deleted_ago: float
    released: bool
    requeue: float | None


STUCK = [
    StuckCase("NotReady past the grace", kn("k1", False), 301, True, None),
    StuckCase("NotReady exactly at the grace", kn("k1", False), 300, True, None),
    StuckCase("NotReady before the grace", kn("k1", False), 100, False, 200.0),
    StuckCase("node gone past the grace", None, 400, True, None),
    StuckCase("node gone before the grace", None, 10, False, 290.0),
    StuckCase("Ready node: kubelet will finish", kn("k1", True), 5000, False, None),
]


@pytest.mark.parametrize("case", STUCK, ids=lambda c: c.name)
def test_a_pod_stuck_terminating(case: StuckCase) -> None:
    stuck = pod("t-0", node="k1", deleted_at=NOW - case.deleted_ago)
    objs: list[Event] = [stuck, pod("t-1", node="k2"), sjob("RUNNING")]
    if case.node is not None:
        objs.append(case.node)
    d = decide(*objs)
    if case.released:
        assert kinds(d) == ["RemovePodFinalizer", "RecordEvent"]
        remove, event = d.actions
        assert isinstance(remove, RemovePodFinalizer) and isinstance(event, RecordEvent)
        assert (remove.pod, remove.finalizer) == (ref("t-0"), FIN)
        assert (event.type, event.reason, event.name) == ("Warning", "KubeletUnresponsive", "t-0")
        assert "k1" in event.message and event.message == remove.why
    else:
        assert d.actions == ()
    if case.requeue is None:
        assert d.requeue_after is None
    else:
        assert d.requeue_after == pytest.approx(case.requeue)


def test_the_earliest_stuck_pod_sets_the_requeue() -> None:
    objs = (
        pod("t-0", node="k1", deleted_at=NOW - 100),
        pod("t-1", node="k2", deleted_at=NOW - 250),
        pod("t-2", node="k3"),
        kn("k1", False),
        kn("k2", False),
        sjob("RUNNING"),
    )
    d = decide(*objs)
    assert d.actions == () and d.requeue_after == pytest.approx(50.0)


def test_the_grace_comes_from_the_context() -> None:
    objs = (pod("t-0", node="k1", deleted_at=NOW - 100), pod("t-1", node="k2"), kn("k1", False))
    short = Context(scheduler_name=SCHED, cluster="c1", now=NOW, stuck_pod_grace_s=60)
    assert kinds(decide(*objs, sjob("RUNNING"), ctx=short)) == ["RemovePodFinalizer", "RecordEvent"]
    later = Context(scheduler_name=SCHED, cluster="c1", now=NOW - 50, stuck_pod_grace_s=60)
    d = decide(*objs, sjob("RUNNING"), ctx=later)
    assert d.actions == () and d.requeue_after == pytest.approx(10.0)


# --- rule 5: jobs whose pods are all gone ----------------------------------------------------


@pytest.mark.parametrize("state", ["PENDING", "RUNNING"])
def test_a_job_of_ours_without_pods_is_cancelled(state: str) -> None:
    d = decide(sjob(state))
    assert d.actions == (
        CancelSlurmJob(
            cluster="c1", job_id=5, marker=MARK, why="every pod of ns/Job:train is gone"
        ),
    )


@pytest.mark.parametrize("state", ["PENDING", "RUNNING"])
def test_no_job_is_cancelled_before_the_pods_are_listed(state: str) -> None:
    """Issue 18 (1): on a first start the Slurm listing can reach the log before the pods'
    (a slow or paged list, an API server answering 503): a running job's pods then look
    gone. Absence counts only after the pods' KubeListed marker."""
    d = workload.decide(workload.view(store(sjob(state), pods_listed=False), KEY, CTX))
    assert d.actions == ()
    assert d.requeue_after == workload.LISTING_RECHECK_S
    assert "not listed yet" in d.reason


@pytest.mark.parametrize(
    "job",
    [
        sjob("COMPLETED"),
        sjob("CANCELLED"),
        sjob("RUNNING", comment="my own analysis"),
        sjob(
            "RUNNING", comment=_pods.marker(_pods.Group(namespace="ns", kind="Job", name="x"), "u")
        ),
        sjob("RUNNING", cluster="c2"),
    ],
    ids=["completed", "cancelled", "foreign comment", "another group", "another cluster"],
)
def test_a_job_without_pods_that_is_not_ours_to_cancel(job: SlurmJob) -> None:
    assert decide(job) == NOTHING


def test_pods_of_other_groups_do_not_keep_a_job() -> None:
    other = KubePod(
        source="k8s", key="ns/x", namespace="ns", name="x", scheduler_name=SCHED, labels={}
    )
    assert kinds(decide(other, sjob("RUNNING"))) == ["CancelSlurmJob"]


# --- foreign jobs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "comment",
    ["", "my own analysis", _pods.marker(_pods.Group(namespace="ns", kind="Job", name="x"), "u")],
    ids=["no comment", "foreign comment", "another group's marker"],
)
def test_a_foreign_job_named_by_a_pod_label_is_never_cancelled(comment: str) -> None:
    done = pod("t-0", node="k1", phase="Succeeded")
    d = decide(done, sjob("RUNNING", comment=comment))
    assert not of(d, CancelSlurmJob)
    # The pods are still released, so their deletion is never blocked.
    assert [r.pod for r in of(d, RemovePodFinalizer)] == [ref("t-0")]


def test_decide_never_cancels_a_foreign_job_even_without_pods() -> None:
    view = workload.View(
        group=GROUP,
        pods=(),
        job=sjob("RUNNING", comment="someone else"),
        job_id=5,
        node_ready={},
        cluster="c1",
        now=NOW,
        grace_s=300.0,
        slurm_listed=True,
    )
    assert workload.decide(view).actions == ()


# --- which pods are ours ---------------------------------------------------------------------


def test_pods_without_our_scheduler_finalizer_or_label_are_ignored() -> None:
    stranger = pod("t-9", job=None, finalizer=False, scheduler="default-scheduler", node="k1")
    assert decide(stranger, sjob("RUNNING")).actions == (
        CancelSlurmJob(
            cluster="c1", job_id=5, marker=MARK, why="every pod of ns/Job:train is gone"
        ),
    )


def test_a_pod_with_our_finalizer_is_ours_whatever_its_scheduler() -> None:
    p = pod("t-0", node="k1", scheduler="default-scheduler")
    assert kinds(decide(p, sjob("COMPLETED"))) == ["DeletePod", "RecordEvent"]


def test_the_highest_job_label_names_the_job() -> None:
    objs = (pod("t-0", node="k1", job=5), pod("t-1", node="k2", job=7), sjob("COMPLETED", job_id=7))
    view = workload.view(store(*objs), KEY, CTX)
    assert view is not None and view.job_id == 7
    assert {x.job_id for x in of(workload.decide(view), DeletePod)} == {7}


def test_the_job_is_found_by_marker_while_no_pod_names_it() -> None:
    # Submitted, but the pods are not labelled yet; the only pod was deleted unbound.
    p = pod("t-0", job=None, deleted_at=NOW)
    d = decide(p, sjob("PENDING"), sjob("COMPLETED", job_id=3))
    assert kinds(d) == ["CancelSlurmJob", "RemovePodFinalizer"]
    assert of(d, CancelSlurmJob)[0].job_id == 5


def test_not_a_group_key() -> None:
    assert workload.view(store(), "nope", CTX) is None
    d = workload.decide(None)
    assert d.actions == () and d.reason == "not a pod group key"


# --- idempotence: apply the decided actions, decide again ------------------------------------


def apply(s: Projection, actions: tuple[AnyAction, ...], seq: int) -> int:
    """What the effectors would do to the world, observed back into the projection."""
    for a in actions:
        seq += 1
        if isinstance(a, DeletePod):
            cur = s.get(KubePod, a.pod.key)
            assert cur is not None
            if cur.finalizers:
                s.apply(msgspec.structs.replace(cur, deletion_timestamp=int(NOW)), seq)
            else:
                s.apply(tombstone(cur, version="x", producer="t", observed_at=0), seq)
        elif isinstance(a, RemovePodFinalizer):
            cur = s.get(KubePod, a.pod.key)
            assert cur is not None
            rest = tuple(f for f in cur.finalizers if f != a.finalizer)
            if cur.deleting and not rest:
                s.apply(tombstone(cur, version="x", producer="t", observed_at=0), seq)
            else:
                s.apply(msgspec.structs.replace(cur, finalizers=rest), seq)
        elif isinstance(a, CancelSlurmJob):
            job = s.get(SlurmJob, str(a.job_id), "slurm:c1")
            assert job is not None and job.comment == a.marker
            s.apply(msgspec.structs.replace(job, state=("CANCELLED",)), seq)
    return seq


DESTRUCTIVE = (DeletePod, CancelSlurmJob)


@dataclass(frozen=True)
class Scenario:
    name: str
    objs: tuple[Event, ...]
    first: list[str]


SCENARIOS = [
    Scenario(
        "job completed under running pods",
        (pod("t-0", node="k1"), pod("t-1", node="k2"), sjob("COMPLETED")),
        ["DeletePod", "RecordEvent", "DeletePod", "RecordEvent"],
    ),
    Scenario(
        "re-back job not started within the grace",
        (pod("t-0", node="k1"), pod("t-1", node="k2"), reback(submitted_ago=120)),
        ["DeletePod", "RecordEvent", "DeletePod", "RecordEvent", "CancelSlurmJob"],
    ),
    Scenario(
        "group finished, job running",
        (
            pod("t-0", node="k1", phase="Succeeded"),
            pod("t-1", node="k2", phase="Failed"),
            sjob("RUNNING"),
        ),
        ["CancelSlurmJob", "RemovePodFinalizer", "RemovePodFinalizer"],
    ),
    Scenario("job of ours without pods", (sjob("PENDING"),), ["CancelSlurmJob"]),
    Scenario(
        "stuck pod on a NotReady node",
        (
            pod("t-0", node="k1", deleted_at=NOW - 400),
            pod("t-1", node="k2"),
            kn("k1", False),
            sjob("RUNNING"),
        ),
        ["RemovePodFinalizer", "RecordEvent"],
    ),
    Scenario(
        "pods deleted after the job ended",
        (
            pod("t-0", node="k1", deleted_at=NOW - 1),
            pod("t-1", node="k2", deleted_at=NOW - 1),
            sjob("TIMEOUT"),
        ),
        ["RemovePodFinalizer", "RemovePodFinalizer"],
    ),
]


@pytest.mark.parametrize("case", SCENARIOS, ids=lambda c: c.name)
def test_applying_the_actions_converges_without_repeating_destruction(case: Scenario) -> None:
    s = store(*case.objs)
    seq = len(case.objs)
    d = workload.decide(workload.view(s, KEY, CTX))
    assert kinds(d) == case.first
    done: set[tuple[str, str]] = set()
    for _ in range(5):
        for a in d.actions:
            if isinstance(a, DESTRUCTIVE):
                target = a.pod.key if isinstance(a, DeletePod) else str(a.job_id)
                assert (type(a).__name__, target) not in done, f"repeated {a!r}"
                done.add((type(a).__name__, target))
        if not d.actions:
            break
        seq = apply(s, d.actions, seq)
        d = workload.decide(workload.view(s, KEY, CTX))
    assert d.actions == ()
    # The same view decided twice gives the same answer (a pure function).
    view = workload.view(s, KEY, CTX)
    assert workload.decide(view) == workload.decide(view)


# --- keys ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyCase:
    name: str
    event: Event
    want: list[str]
    objs: tuple[Event, ...] = ()


DELETING = (
    pod("t-0", node="k1", deleted_at=NOW),
    pod("t-1", node="k2", deleted_at=NOW),
    kube_pod("ns", "b", scheduler_name=SCHED, node_name="k1", deletion_timestamp=int(NOW)),
    kube_pod(
        "ns", "c", scheduler_name="default-scheduler", node_name="k1", deletion_timestamp=int(NOW)
    ),
    KubePod(
        source="k8s", key="ns/d", namespace="ns", name="d", scheduler_name=SCHED, node_name="k1"
    ),
)

KEY_CASES = [
    KeyCase("our pod", pod("t-0"), [KEY]),
    KeyCase(
        "pod tombstone", tombstone(pod("t-0"), version="1", producer="p", observed_at=0), [KEY]
    ),
    KeyCase("pod with only our finalizer", pod("t-0", job=None, scheduler="x"), [KEY]),
    KeyCase("pod with only our label", pod("t-0", finalizer=False, scheduler="x"), [KEY]),
    KeyCase("someone else's pod", pod("t-0", job=None, finalizer=False, scheduler="x"), []),
    KeyCase("job with our marker", sjob("RUNNING"), [KEY]),
    KeyCase("job without marker", sjob("RUNNING", comment="hello"), []),
    KeyCase("job of another cluster", sjob("RUNNING", cluster="c2"), []),
    KeyCase(
        "tombstone of a job the pods' label names (Slurm lost it)",
        tombstone(sjob("RUNNING"), version="1", producer="p", observed_at=0),
        [KEY],
        (pod("t-0", node="k1"),),
    ),
    KeyCase(
        "a reused id: the marker's group and the group whose label names it",
        sjob(
            "PENDING", comment=_pods.marker(_pods.Group(namespace="ns", kind="Pod", name="z"), "u")
        ),
        [KEY, "ns/Pod:z"],
        (pod("t-0", node="k1"),),
    ),
    KeyCase("NotReady node ⇒ groups deleting on it", kn("k1", False), [KEY, "ns/Pod:b"], DELETING),
    KeyCase(
        "deleted node ⇒ groups deleting on it",
        KubeNode(source="k8s", key="k2", op="deleted"),
        [KEY],
        DELETING,
    ),
    KeyCase("Ready node", kn("k1", True), [], DELETING),
]


@pytest.mark.parametrize("case", KEY_CASES, ids=lambda c: c.name)
def test_keys_of(case: KeyCase) -> None:
    assert list(workload.SPEC.keys_of(case.event, store(*case.objs), CTX)) == case.want


def test_all_keys() -> None:
    other = _pods.Group(namespace="ns", kind="PodGroup", name="pg")
    s = store(
        pod("t-0"),
        KubePod(source="k8s", key="ns/b", namespace="ns", name="b", scheduler_name=SCHED),
        KubePod(source="k8s", key="ns/c", namespace="ns", name="c", scheduler_name="x"),
        sjob("RUNNING", job_id=8, comment=_pods.marker(other, "u")),
        sjob(
            "COMPLETED",
            job_id=9,
            comment=_pods.marker(_pods.Group(namespace="ns", kind="Pod", name="z"), "u"),
        ),
        sjob("RUNNING", job_id=10, comment="foreign"),
        sjob("RUNNING", job_id=11, comment=_pods.marker(other, "u"), cluster="c2"),
    )
    assert list(workload.all_keys(s, CTX)) == [KEY, "ns/Pod:b", "ns/PodGroup:pg"]


def test_spec_lists_the_triggers() -> None:
    assert set(workload.SPEC.triggers) == {KubePod, KubeNode, SlurmJob}
    assert workload.SPEC.key_kind == "PodGroup"


def test_a_duplicate_job_of_the_group_is_cancelled_and_only_that() -> None:
    """Rule 6: a submit timed out, the retry submitted job 6, then Slurm carried out the
    first one too (job 5 … here 7): the job no pod names is cancelled; the pods' job, a job
    of another group and an ended duplicate are left alone."""
    other = _pods.marker(_pods.Group(namespace="ns", kind="Job", name="other"), "uid-o")
    d = decide(
        pod("t-0", job=6, node="k1"),
        pod("t-1", job=6, node="k2"),
        sjob("RUNNING", job_id=6),
        sjob("RUNNING", job_id=7),  # the duplicate
        sjob("COMPLETED", job_id=8),  # ended: nothing to do
        sjob("RUNNING", job_id=9, comment=other),
    )
    cancels = of(d, CancelSlurmJob)
    assert [(c.job_id, c.marker) for c in cancels] == [(7, MARK)]
    assert "duplicate placeholder of ns/Job:train" in cancels[0].why
    assert not of(d, DeletePod)
    # No pod names a job yet (just submitted): nothing is a duplicate.
    assert not of(decide(pod("t-0", job=None), sjob("PENDING", job_id=7)), CancelSlurmJob)


# --- short gangs (issue 18, 9) ---------------------------------------------------------------

PG = _pods.Group(namespace="ns", kind="PodGroup", name="g")
PG_MARK = _pods.marker(PG, "uid-g")


def pg_pod(name: str, **kw: Any) -> KubePod:
    return pod(name, labels={_pods.LABEL_POD_GROUP: "g"}, **kw)


def pod_group(size: int) -> KubeWorkload:
    return kube_workload("ns", "PodGroup", "g", size=size)


def test_a_gang_short_of_its_size_while_its_job_waits_gives_the_job_up() -> None:
    """Slinky slurm-bridge (PreFilter, ErrorExternalJobInvalid): a short gang never holds
    nodes — its pending job is cancelled and the pods lose the job label, to be placed again
    once whole."""
    d = workload.decide(
        workload.view(
            store(pod_group(3), pg_pod("p0"), pg_pod("p1"), sjob("PENDING", comment=PG_MARK)),
            "ns/PodGroup:g",
            CTX,
        )
    )
    assert [type(a).__name__ for a in d.actions] == [
        "CancelSlurmJob",
        "SetPodLabel",
        "SetPodLabel",
        "RecordEvent",
    ]
    assert all(a.value is None for a in d.actions if isinstance(a, SetPodLabel))


def test_a_short_gang_keeps_the_job_that_re_backs_its_running_pods() -> None:
    """Rule 7 is for gangs still waiting to start: a re-back job holds the nodes of pods
    that run already, and losing it would orphan them."""
    job = msgspec.structs.replace(
        sjob("PENDING", comment=PG_MARK),
        required_nodes=("s-k1",),
        submit_time=int(NOW - 1),
    )
    d = workload.decide(
        workload.view(
            store(pod_group(3), pg_pod("p0", node="k1"), pg_pod("p1", node="k1"), job),
            "ns/PodGroup:g",
            CTX,
        )
    )
    assert not any(isinstance(a, CancelSlurmJob | SetPodLabel) for a in d.actions)


@pytest.mark.parametrize(
    ("size", "state"), [(2, "PENDING"), (3, "RUNNING")], ids=["whole", "already-running"]
)
def test_a_whole_gang_or_a_running_one_is_left_alone(size: int, state: str) -> None:
    d = workload.decide(
        workload.view(
            store(
                pod_group(size),
                pg_pod("p0", node="k1" if state == "RUNNING" else ""),
                pg_pod("p1", node="k1" if state == "RUNNING" else ""),
                sjob(state, comment=PG_MARK),
            ),
            "ns/PodGroup:g",
            CTX,
        )
    )
    assert not any(isinstance(a, CancelSlurmJob | SetPodLabel) for a in d.actions)
