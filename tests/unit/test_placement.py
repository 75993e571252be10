"""Table-driven tests of the ``placement`` reconciler: view → decide over a projection."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest

from reconcilers import _pods, placement
from reconcilers.base import NOTHING, Context, Decision
from schemas import events, wellknown
from schemas.actions import (
    BindPod,
    CancelSlurmJob,
    DeletePod,
    MarkPods,
    RecordEvent,
    SetJobExcludedNodes,
    SetPodCondition,
    SubmitSlurmJob,
)
from schemas.events import (
    Event,
    KubeDeviceClass,
    KubeListed,
    KubeNode,
    KubeNodeUsage,
    KubePod,
    KubeResourceClaim,
    KubeResourceSlice,
    KubeWorkload,
    NodeCondition,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    PodCondition,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmPing,
    Taint,
    Toleration,
    tombstone,
)
from tests.unit._decisions import kinds, of, ref, store
from tests.unit._listing import listed
from tests.unit._pods import kube_workload, ns_pod

SCHED = "slurm-bridge-scheduler"
CTX = Context(scheduler_name=SCHED, cluster="c1")
SRC = "slurm:c1"
P = _pods.PREFIX
MIB = 1024 * 1024
JOBID = wellknown.LABEL_SLURM_JOBID
FIN = wellknown.FINALIZER_SCHEDULER
TOL = wellknown.TAINT_MANAGED_NODE


def pod(
    name: str = "a",
    *,
    labels: dict[str, str] | None = None,
    owner: OwnerRef | None = None,
    annotations: dict[str, str] | None = None,
    scheduler: str = SCHED,
    phase: str = "Pending",
    node: str = "",
    deleting: bool = False,
    conditions: tuple[PodCondition, ...] = (),
    job: int | None = None,
    marked: bool = True,
) -> KubePod:
    """A pod; ``job`` labels it with a job id (``marked``: with finalizer and toleration)."""
    labels = dict(labels or {})
    finalizers: tuple[str, ...] = ()
    tolerations: tuple[str, ...] = ()
    if job is not None:
        labels[JOBID] = str(job)
        if marked:
            finalizers, tolerations = (FIN,), (TOL,)
    return ns_pod(
        name,
        scheduler_name=scheduler,
        labels=labels,
        owner=owner,
        annotations=annotations or {},
        phase=phase,
        node_name=node,
        deletion_timestamp=1000 if deleting else 0,
        conditions=conditions,
        finalizers=finalizers,
        tolerations=tolerations,
        cpu_millis=1000,
        memory_bytes=256 * MIB,
    )


def job_pod(name: str, job_name: str = "train", **kw: Any) -> KubePod:
    owner = OwnerRef(api_version="batch/v1", kind="Job", name=job_name, uid=f"uid-{job_name}")
    labels = {_pods.LABEL_JOB_NAME: job_name, _pods.LABEL_JOB_NAME_LEGACY: job_name}
    return pod(name, labels=labels, owner=owner, **kw)


def workload(
    kind: str, name: str, size: int, annotations: dict[str, str] | None = None
) -> KubeWorkload:
    return kube_workload("ns", kind, name, size=size, annotations=annotations or {})


def kn(
    name: str,
    *,
    ready: bool = True,
    unschedulable: bool = False,
    slurm_name: str | None = None,
) -> KubeNode:
    labels = {wellknown.LABEL_SLURM_NODENAME: slurm_name} if slurm_name else {}
    return KubeNode(source="k8s", key=name, ready=ready, unschedulable=unschedulable, labels=labels)


def sn(name: str, cluster: str = "c1") -> SlurmNode:
    """A Slurm node carrying the feature every job requires (node_register puts it on)."""
    return SlurmNode(
        source=f"slurm:{cluster}",
        key=name,
        cluster=cluster,
        state=("IDLE",),
        features=(wellknown.FEATURE_GRES_COMPATIBLE,),
    )


def part(name: str, cluster: str = "c1") -> SlurmPartition:
    return SlurmPartition(source=f"slurm:{cluster}", key=name, cluster=cluster)


#: sjob's default comment: the marker of the group :func:`decide` is asked about (a job is
#: a group's only when its marker says so: _pods.is_groups_job).
OURS = "<the decided group's marker>"


def _ours(key: str) -> str:
    group = _pods.parse_group_key(key)
    assert group is not None
    uid = f"u-{group.name}" if group.kind == "Pod" else f"uid-{group.name.split('/')[0]}"
    return _pods.marker(group, uid)


def sjob(
    job_id: int,
    state: str,
    nodes: tuple[str, ...] = (),
    comment: str = OURS,
    cluster: str = "c1",
) -> SlurmJob:
    return SlurmJob(
        source=f"slurm:{cluster}",
        key=str(job_id),
        cluster=cluster,
        job_id=job_id,
        state=(state,),
        nodes=nodes,
        comment=comment,
    )


def _listed_world(objs: tuple[Event, ...]) -> tuple[Event, ...]:
    """``objs`` in a complete Slurm listing, as a submit needs (tests.unit._listing)."""
    return listed(objs)


def decide(key: str, *objs: Event, ctx: Context = CTX, listed: bool = True) -> Decision:
    """``key``'s decision over ``objs``; ``listed``: in a complete Slurm listing
    (:func:`_listed_world`), else exactly ``objs``."""
    if listed:
        objs = _listed_world(objs)
    mine = _ours(key)
    objs = tuple(
        msgspec.structs.replace(o, comment=mine)
        if isinstance(o, SlurmJob) and o.comment == OURS
        else o
        for o in objs
    )
    return placement.decide(placement.view(store(*objs), key, ctx))


BATCH = part("batch")


# --- submit ----------------------------------------------------------------------------------


def test_a_bare_pod_is_submitted() -> None:
    d = decide("ns/Pod:a", pod("a"), BATCH)
    assert kinds(d) == ["SubmitSlurmJob", "RecordEvent"]
    submit = d.actions[0]
    assert isinstance(submit, SubmitSlurmJob)
    assert (submit.cluster, submit.group, submit.scheduler_name) == ("c1", "ns/Pod:a", SCHED)
    assert submit.marker == "slurmbridge:ns/Pod:a:u-a"
    assert _pods.group_key_of_marker(submit.marker) == "ns/Pod:a"
    assert submit.pods == (ref("a"),)
    # Slinky 1.3: the group's name, not its kind-qualified key.
    assert (submit.spec.name, submit.spec.tasks, submit.spec.memory_per_node_mib) == (
        "a",
        1,
        256,
    )
    event = d.actions[1]
    assert isinstance(event, RecordEvent)
    assert (event.object_kind, event.name, event.type, event.reason) == (
        "Pod",
        "a",
        "Normal",
        "SlurmJobSubmitted",
    )


@dataclass(frozen=True)
class GroupCase:
    name: str
    key: str
    root: KubeWorkload
    pods: tuple[KubePod, ...]


def _lws(name: str, idx: str) -> KubePod:
    labels = {_pods.LABEL_LWS_NAME: "lws", _pods.LABEL_LWS_GROUP_INDEX: idx}
    return pod(name, labels=labels)


CHILD_JOB = OwnerRef(api_version="batch/v1", kind="Job", name="js-w")
GROUPS = [
    GroupCase(
        "batch Job", "ns/Job:train", workload("Job", "train", 2), (job_pod("t-0"), job_pod("t-1"))
    ),
    GroupCase(
        "JobSet",
        "ns/JobSet:js",
        workload("JobSet", "js", 2),
        tuple(
            pod(n, labels={_pods.LABEL_JOBSET: "js"}, owner=CHILD_JOB) for n in ("js-w-0", "js-w-1")
        ),
    ),
    GroupCase(
        "LeaderWorkerSet replica",
        "ns/LeaderWorkerSet:lws/1",
        workload("LeaderWorkerSet", "lws", 2),
        (_lws("lws-1", "1"), _lws("lws-1-1", "1")),
    ),
    GroupCase(
        "PodGroup",
        "ns/PodGroup:pg",
        workload("PodGroup", "pg", 2),
        (
            pod("pg-0", labels={_pods.LABEL_POD_GROUP: "pg"}),
            pod("pg-1", labels={_pods.LABEL_POD_GROUP: "pg"}),
        ),
    ),
]


@pytest.mark.parametrize("case", GROUPS, ids=lambda c: c.name)
def test_a_group_is_submitted_once_all_expected_pods_exist(case: GroupCase) -> None:
    first, second = case.pods
    waiting = decide(case.key, case.root, first, BATCH)
    assert waiting.actions == ()
    assert "1 of 2" in waiting.reason
    d = decide(case.key, case.root, first, second, BATCH)
    assert kinds(d) == ["SubmitSlurmJob", "RecordEvent"]
    submit = of(d, SubmitSlurmJob)[0]
    assert submit.group == case.key
    assert submit.marker == f"slurmbridge:{case.key}:uid-{case.root.name}"
    assert submit.pods == tuple(ref(p.name) for p in sorted(case.pods, key=lambda p: p.name))
    assert (submit.spec.tasks, submit.spec.min_nodes) == (2, 2)


def test_an_unobserved_root_workload_is_waited_for() -> None:
    d = decide("ns/Job:train", job_pod("t-0"), BATCH)
    assert d.actions == ()
    assert "ns/Job:train" in d.reason


def test_a_root_of_unknown_size_submits_the_pods_it_has() -> None:
    d = decide(
        "ns/PodGroup:pg",
        workload("PodGroup", "pg", 0),
        pod("x", labels={_pods.LABEL_POD_GROUP: "pg"}),
        BATCH,
    )
    assert of(d, SubmitSlurmJob)[0].spec.tasks == 1


def test_settings_come_from_the_root_workload() -> None:
    root = workload("Job", "train", 1, {P + "partition": "gpu", P + "job-name": "llm"})
    member = job_pod("t-0", annotations={P + "partition": "batch"})
    spec = of(decide("ns/Job:train", root, member, BATCH, part("gpu")), SubmitSlurmJob)[0].spec
    assert (spec.partition, spec.name) == ("gpu", "llm")


def test_finished_and_deleting_pods_do_not_count_as_present() -> None:
    root = workload("Job", "train", 2)
    done = job_pod("t-0", phase="Failed")
    going = job_pod("t-1", deleting=True)
    assert decide("ns/Job:train", root, done, going, BATCH) == NOTHING
    d = decide("ns/Job:train", root, done, going, job_pod("t-2"), BATCH)
    assert d.actions == () and "1 of 2" in d.reason


# --- translation errors and unknown partitions -----------------------------------------------


def sized(name: str, cpus: int, mib: int) -> SlurmNode:
    return msgspec.structs.replace(sn(name), cpus=cpus, real_memory=mib)


#: Partition batch of a 16-CPU/64 GiB and a 32-CPU/32 GiB node, gpu of one 8-CPU/512 GiB node
#: (flagged Slurm's default), in a complete listing.
SIZED = (
    SlurmPartition(source=SRC, key="batch", cluster="c1", nodes=("s1", "s2")),
    SlurmPartition(source=SRC, key="gpu", cluster="c1", nodes=("g1",), is_default=True),
    sized("s1", 16, 65536),
    sized("s2", 32, 32768),
    sized("g1", 8, 524288),
    SlurmPing(source=SRC, key="c1", cluster="c1", responding=True),
)
REJECTS = [
    ("bad annotation", {P + "cpu-per-task": "zero"}, (), f"{P}cpu-per-task"),
    ("unknown partition", {P + "partition": "gpu"}, (), f"{P}partition"),
    ("partition of another cluster", {P + "partition": "gpu"}, (part("gpu", "c2"),), "'gpu'"),
    # Issue "Fail closed at every edge" (10): bounds. 10^12 minutes became UNLIMITED.
    ("time limit past Slurm's", {P + "timelimit": "1000000000000"}, (), f"{P}timelimit"),
    ("time limit NO_VAL", {P + "timelimit": "4294967294"}, (), "above Slurm's largest"),
    ("priority past 2^32-1", {P + "priority": "4294967296"}, (), f"{P}priority"),
    ("priority INFINITE", {P + "priority": "4294967295"}, (), "above the maximum 4294967293"),
    ("priority NO_VAL", {P + "priority": "4294967294"}, (), f"{P}priority"),
    (
        "more CPUs than any node of the partition",
        {P + "partition": "batch", P + "cpu-per-task": "33"},
        SIZED,
        f"{P}cpu-per-task]: 33 CPUs per task: the largest node of partition 'batch' has 32",
    ),
    (
        "more memory than any node of the partition",
        {P + "partition": "batch", P + "mem-per-node": "65537"},
        SIZED,
        f"{P}mem-per-node]: 65537 MiB per node: the largest node of partition 'batch' has "
        "65536 MiB",
    ),
    (
        "more CPUs than any node of Slurm's default partition",
        {P + "cpu-per-task": "9"},
        SIZED,
        "the largest node of Slurm's default partition has 8",
    ),
]


@pytest.mark.parametrize(
    ("name", "ann", "extra", "names"), REJECTS, ids=lambda x: x if isinstance(x, str) else "_"
)
def test_an_untranslatable_group_is_rejected_once(
    name: str, ann: dict[str, str], extra: tuple[Event, ...], names: str
) -> None:
    del name
    root = workload("Job", "train", 2, ann)
    pods = (job_pod("t-0"), job_pod("t-1"))
    d = decide("ns/Job:train", root, *pods, BATCH, *extra)
    assert kinds(d) == ["SetPodCondition", "RecordEvent"] * 2
    assert not of(d, SubmitSlurmJob)
    conds = of(d, SetPodCondition)
    assert [c.pod for c in conds] == [ref("t-0"), ref("t-1")]
    for c in conds:
        assert (c.type, c.status, c.reason) == ("PodScheduled", "False", "SlurmJobInvalid")
        assert names in c.message
    for e in of(d, RecordEvent):
        assert (e.type, e.reason, e.object_kind) == ("Warning", "SlurmJobInvalid", "Pod")
        assert e.message == conds[0].message
    # The condition is on the pods now: nothing is repeated.
    cond = PodCondition(
        type="PodScheduled", status="False", reason="SlurmJobInvalid", message=conds[0].message
    )
    marked = tuple(job_pod(p.name, conditions=(cond,)) for p in pods)
    again = decide("ns/Job:train", root, *marked, BATCH, *extra)
    assert again.actions == ()
    # One pod still without it gets it (only that one).
    partly = decide("ns/Job:train", root, marked[0], pods[1], BATCH, *extra)
    assert [c.pod for c in of(partly, SetPodCondition)] == [ref("t-1")]


# (case, annotations, extra objects, submitted?) — the node bound holds only from a complete
# listing.
NODE_BOUNDS = [
    ("the largest node's CPUs", {P + "partition": "batch", P + "cpu-per-task": "32"}, SIZED, True),
    ("its memory", {P + "partition": "batch", P + "mem-per-node": "64Gi"}, SIZED, True),
    ("another partition", {P + "partition": "gpu", P + "mem-per-node": "512Gi"}, SIZED, True),
    ("Slurm's default partition", {P + "cpu-per-task": "8"}, SIZED, True),
    (
        "no listing: too many CPUs wait",
        {P + "partition": "batch", P + "cpu-per-task": "33"},
        SIZED[:-1],
        False,
    ),
    (
        "no listing: too much memory waits",
        {P + "partition": "batch", P + "mem-per-node": "1Ti"},
        SIZED[:-1],
        False,
    ),
    (
        "no listing: a fitting task waits",
        {P + "partition": "batch", P + "cpu-per-task": "2"},
        SIZED[:-1],
        False,
    ),
    # Nodes that report no size bound nothing; without the annotations nothing waits.
    ("sizes unknown", {P + "partition": "batch", P + "cpu-per-task": "99"}, SIZED[::5], True),
    # Without a complete listing nothing is submitted: the nodes carrying the feature every
    # job requires are counted first.
    ("no size annotation", {P + "partition": "batch"}, SIZED[:-1], False),
]


@pytest.mark.parametrize(
    ("name", "ann", "extra", "submitted"),
    NODE_BOUNDS,
    ids=lambda x: x if isinstance(x, str) else "_",
)
def test_a_task_size_is_checked_against_the_largest_node_of_a_complete_listing(
    name: str, ann: dict[str, str], extra: tuple[Event, ...], submitted: bool
) -> None:
    del name
    root = workload("Job", "train", 1, ann)
    d = decide("ns/Job:train", root, job_pod("t-0"), *extra, listed=False)
    assert not of(d, SetPodCondition)
    if submitted:
        assert kinds(d) == ["SubmitSlurmJob", "RecordEvent"]
    else:
        assert d.actions == ()
        assert d.requeue_after == placement.LISTING_RECHECK_S
        assert "complete Slurm listing" in d.reason


def test_partition_node_sizes_take_each_partitions_largest_node() -> None:
    sizes = _pods.partition_node_sizes(store(*SIZED), SRC)
    assert sizes == {"batch": (32, 65536), "gpu": (8, 524288), "": (8, 524288)}
    # With no partition flagged default, a job naming none may run in any of them.
    plain = (msgspec.structs.replace(SIZED[1], is_default=False), *SIZED[2:])
    assert _pods.partition_node_sizes(store(SIZED[0], *plain), SRC)[""] == (32, 524288)


def test_node_sizes_are_read_again_once_a_slurm_node_or_partition_changes() -> None:
    """Placement keeps the partitions' largest nodes between decides (store cache
    ``placement.node_sizes``), and reads them again after any ``SlurmNode`` or
    ``SlurmPartition`` observation: a task too large for every node is refused until a node
    large enough joins the partition, then submitted."""
    too_big = {P + "partition": "batch", P + "cpu-per-task": "48"}
    s = store(*_listed_world((*SIZED,)))
    s.apply(pod("a", annotations=too_big), 1000)

    def decided() -> Decision:
        return placement.decide(placement.view(s, "ns/Pod:a", CTX))

    assert (
        "the largest node of partition 'batch' has 32" in of(decided(), SetPodCondition)[0].message
    )
    assert of(decided(), SetPodCondition), "kept sizes: still refused"
    s.apply(sized("s2", 64, 32768), 1001)
    assert kinds(decided()) == ["SubmitSlurmJob", "RecordEvent"]
    s.apply(msgspec.structs.replace(SIZED[0], nodes=("s1",)), 1002)
    assert (
        "the largest node of partition 'batch' has 16" in of(decided(), SetPodCondition)[0].message
    )


def test_a_stale_condition_message_is_replaced() -> None:
    old = PodCondition(type="PodScheduled", status="False", reason="SlurmJobInvalid", message="x")
    bad = pod("a", annotations={P + "priority": "-1"}, conditions=(old,))
    d = decide("ns/Pod:a", bad, BATCH)
    assert kinds(d) == ["SetPodCondition", "RecordEvent"]
    assert f"{P}priority" in of(d, SetPodCondition)[0].message


def test_fixing_the_annotation_submits() -> None:
    stale = PodCondition(
        type="PodScheduled", status="False", reason="SlurmJobInvalid", message="old"
    )
    fixed = pod("a", annotations={P + "partition": "batch"}, conditions=(stale,))
    assert kinds(decide("ns/Pod:a", fixed, BATCH)) == ["SubmitSlurmJob", "RecordEvent"]


@pytest.mark.parametrize(
    ("default", "ann", "parts", "want"),
    [
        ("", {}, ("batch",), ""),
        ("batch", {}, ("batch",), "batch"),
        ("batch", {P + "partition": "gpu"}, ("batch", "gpu"), "gpu"),
        ("missing", {}, ("batch",), None),
        ("", {P + "partition": "gpu"}, ("batch",), None),
    ],
)
def test_default_partition(
    default: str, ann: dict[str, str], parts: tuple[str, ...], want: str | None
) -> None:
    ctx = Context(scheduler_name=SCHED, cluster="c1", default_partition=default)
    d = decide("ns/Pod:a", pod("a", annotations=ann), *(part(p) for p in parts), ctx=ctx)
    if want is None:
        assert kinds(d) == ["SetPodCondition", "RecordEvent"]
        assert "partition" in of(d, SetPodCondition)[0].message
    else:
        assert of(d, SubmitSlurmJob)[0].spec.partition == want


@pytest.mark.parametrize("label", ["", "sales"])
def test_the_mcs_label_setting_is_sent(label: str) -> None:
    """Issue 18 (6): ``mcsLabel`` was accepted from Slinky's config and never sent."""
    ctx = Context(scheduler_name=SCHED, cluster="c1", mcs_label=label)
    d = decide("ns/Pod:a", pod("a"), part("batch"), ctx=ctx)
    assert of(d, SubmitSlurmJob)[0].spec.mcs_label == label


# --- excluded nodes --------------------------------------------------------------------------


def test_cordoned_and_not_ready_nodes_are_excluded() -> None:
    objs = (
        kn("k1"),
        kn("k2", unschedulable=True),
        kn("k3", ready=False),
        kn("k4", ready=False, slurm_name="s4"),
        kn("k5", ready=False),  # not in Slurm: naming it would make Slurm reject the job
        kn("k6", ready=False),  # only a node of another cluster has its name
        sn("k1"),
        sn("k2"),
        sn("k3"),
        sn("s4"),
        sn("k6", cluster="c2"),
        pod("a"),
        BATCH,
    )
    view = placement.view(store(*_listed_world(objs)), "ns/Pod:a", CTX)
    assert view is not None
    assert view.excluded == ("k2", "k3", "s4")
    assert of(placement.decide(view), SubmitSlurmJob)[0].spec.excluded_nodes == ("k2", "k3", "s4")


def test_slurm_nodes_without_a_kubernetes_node_are_excluded_where_they_share_a_partition() -> None:
    """A NodeSet's slurmd nodes (cs-0) in the bridge's partition must not receive a
    placeholder job: no pod could be bound there. A partition of Slurm-only nodes is left
    alone (a job there is someone else's choice)."""
    mixed = SlurmPartition(
        source="slurm:c1", key="batch", cluster="c1", nodes=("k1", "cs-0", "cs-1")
    )
    hpc = SlurmPartition(source="slurm:c1", key="hpc", cluster="c1", nodes=("h1", "h2"))
    objs = (kn("k1"), sn("k1"), sn("cs-0"), sn("cs-1"), sn("h1"), sn("h2"), mixed, hpc, pod("a"))
    view = placement.view(store(*objs), "ns/Pod:a", CTX)
    assert view is not None
    assert view.excluded == ("cs-0", "cs-1")


def test_node_answers_are_kept_until_the_node_its_usage_or_a_partition_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 30: every submit decide asks which nodes are unusable. A node's feasibility is
    read again only once its KubeNode or KubeNodeUsage observation is replaced, the Slurm
    nodes without a Kubernetes node once a SlurmPartition or KubeNode one arrives; each
    answer stays what a fresh read would give."""
    from reconcilers import _feasible

    calls: list[str] = []
    real = _feasible.eligible

    def counted(p: KubePod, node: KubeNode, *rest: Any) -> str | None:
        calls.append(node.key)
        return real(p, node, *rest)

    monkeypatch.setattr(_feasible, "eligible", counted)

    def big(name: str, **kw: Any) -> KubeNode:
        return msgspec.structs.replace(kn(name, **kw), alloc_cpu_millis=2000)

    mixed = SlurmPartition(source=SRC, key="batch", cluster="c1", nodes=("k1", "k2", "cs-0"))
    s = store(*_listed_world((big("k1"), big("k2"), sn("k1"), sn("k2"), sn("cs-0"), mixed)))
    s.apply(pod("a"), 1000)

    def excluded() -> tuple[str, ...]:
        view = placement.view(s, "ns/Pod:a", CTX)
        assert view is not None
        return view.excluded

    assert excluded() == ("cs-0",)
    assert sorted(calls) == ["k1", "k2"]
    calls.clear()
    assert excluded() == ("cs-0",)
    assert calls == [], "nothing changed: no node read again"
    s.apply(KubeNodeUsage(source="k8s", key="k2", cpu_millis=1500, pods=1), 1001)
    assert excluded() == ("cs-0", "k2"), "k2 has 500m left for a 1000m pod"
    assert calls == ["k2"]
    calls.clear()
    s.apply(big("k1", unschedulable=True), 1002)
    assert excluded() == ("cs-0", "k1", "k2")
    assert calls == [], "a cordoned node needs no feasibility"
    s.apply(big("k1"), 1003)
    s.apply(big("cs-0"), 1004)  # cs-0 now has a Kubernetes node
    assert excluded() == ("k2",)
    assert sorted(calls) == ["cs-0", "k1"]


@pytest.mark.parametrize("journal", [4096, 3])
def test_excluded_nodes_kept_between_decides_are_those_a_fresh_read_gives(
    monkeypatch: pytest.MonkeyPatch, journal: int
) -> None:
    """The unusable nodes are kept per pod shapes and brought up to date from the nodes and
    usages that changed since (``Store.changed_since``); after any sequence of cordons,
    readiness flips, usage changes, deletions and returns they are what reading every node
    again gives — also when more changed than the store's journal keeps (3: it says it
    cannot tell, and every node is read again)."""
    from slurmbridge.runtime.projection import Projection

    monkeypatch.setattr(Projection, "JOURNAL_MAX", journal)
    rng = random.Random(30)
    names = [f"k{i}" for i in range(8)]

    def big(name: str, **kw: Any) -> KubeNode:
        return msgspec.structs.replace(kn(name, **kw), alloc_cpu_millis=2000)

    part = SlurmPartition(source=SRC, key="batch", cluster="c1", nodes=tuple(names))
    s = store(*_listed_world((*(big(n) for n in names), *(sn(n) for n in names), part)))
    s.apply(pod("a"), 1000)

    def excluded() -> tuple[str, ...]:
        view = placement.view(s, "ns/Pod:a", CTX)
        assert view is not None
        return view.excluded

    seq = 1001
    for _ in range(60):
        name = rng.choice(names)
        change = rng.choice(["cordon", "ready", "usage", "delete", "back"])
        if change == "cordon":
            s.apply(big(name, unschedulable=rng.random() < 0.5), seq)
        elif change == "ready":
            s.apply(big(name, ready=rng.random() < 0.5), seq)
        elif change == "usage":
            cpu = rng.choice([0, 500, 1500])
            s.apply(KubeNodeUsage(source="k8s", key=name, cpu_millis=cpu, pods=1), seq)
        elif change == "delete":
            s.apply(events.tombstone(big(name), version="", producer="t", observed_at=0), seq)
        else:
            s.apply(big(name), seq)
        seq += 1
        if rng.random() < (0.3 if journal > 100 else 0.85):
            continue  # several changes between two decides (many, past a short journal)
        kept = excluded()
        s.cache("placement.unusable").clear()
        s.cache("placement.infeasible").clear()
        assert kept == excluded(), f"after {change} of {name}"


def test_excluded_nodes_are_only_computed_before_submit() -> None:
    objs = (kn("k2", unschedulable=True), sn("k2"), pod("a", job=5), sjob(5, "PENDING"))
    view = placement.view(store(*objs), "ns/Pod:a", CTX)
    assert view is not None
    assert (view.excluded, view.partitions) == ((), frozenset())


# --- bind ------------------------------------------------------------------------------------

NODES = (kn("k1", slurm_name="s1"), kn("s2"), sn("s1"), sn("s2"))


def test_a_running_job_binds_each_pod_to_its_mapped_node() -> None:
    root = workload("Job", "train", 2)
    pods = (job_pod("t-0", job=5), job_pod("t-1", job=5))
    d = decide("ns/Job:train", root, *pods, *NODES, sjob(5, "RUNNING", ("s1", "s2")))
    binds = of(d, BindPod)
    assert binds == [
        BindPod(pod=ref("t-0"), node="k1", slurm_node="s1", job_id=5),
        BindPod(pod=ref("t-1"), node="s2", slurm_node="s2", job_id=5),
    ]
    assert kinds(d) == ["BindPod", "RecordEvent", "BindPod", "RecordEvent"]
    events = of(d, RecordEvent)
    assert [(e.name, e.reason, e.type) for e in events] == [
        ("t-0", "Scheduled", "Normal"),
        ("t-1", "Scheduled", "Normal"),
    ]


def test_pods_share_the_job_nodes_in_name_order() -> None:
    pods = tuple(job_pod(f"t-{i}", job=5) for i in range(3))
    d = decide(
        "ns/Job:train", workload("Job", "train", 3), *pods, *NODES, sjob(5, "RUNNING", ("s1", "s2"))
    )
    assert [(b.pod.name, b.node) for b in of(d, BindPod)] == [
        ("t-0", "k1"),
        ("t-1", "s2"),
        ("t-2", "k1"),
    ]


def test_a_bound_pod_is_not_bound_again() -> None:
    pods = (job_pod("t-0", job=5, node="k1"), job_pod("t-1", job=5))
    d = decide(
        "ns/Job:train", workload("Job", "train", 2), *pods, *NODES, sjob(5, "RUNNING", ("s1", "s2"))
    )
    assert [(b.pod.name, b.node) for b in of(d, BindPod)] == [("t-1", "s2")]
    everything = (job_pod("t-0", job=5, node="k1"), job_pod("t-1", job=5, node="s2"))
    again = decide(
        "ns/Job:train",
        workload("Job", "train", 2),
        *everything,
        *NODES,
        sjob(5, "RUNNING", ("s1", "s2")),
    )
    assert again == NOTHING


@pytest.mark.parametrize("state", ["PENDING", "CONFIGURING", "SUSPENDED"])
def test_a_job_that_is_not_running_binds_nothing(state: str) -> None:
    d = decide("ns/Pod:a", pod("a", job=5), *NODES, sjob(5, state, ("s1",)))
    assert not of(d, BindPod)
    assert state in d.reason


def test_a_job_not_yet_seen_binds_nothing() -> None:
    d = decide("ns/Pod:a", pod("a", job=5), *NODES, listed=False)
    assert d.actions == ()
    assert "not yet seen" in d.reason


def test_a_running_job_without_nodes_binds_nothing() -> None:
    assert decide("ns/Pod:a", pod("a", job=5), *NODES, sjob(5, "RUNNING")).actions == ()


def test_a_slurm_node_without_kubernetes_node_is_reported() -> None:
    d = decide("ns/Pod:a", pod("a", job=5), *NODES, sjob(5, "RUNNING", ("s9",)))
    assert kinds(d) == ["RecordEvent"]
    event = of(d, RecordEvent)[0]
    assert (event.type, event.reason) == ("Warning", "SlurmNodeUnknown")
    assert "s9" in event.message


def test_the_label_mapping_wins_over_the_same_name() -> None:
    # Kubernetes node "s1" points at Slurm node "other": it is not s1's node; k1 is.
    objs = (kn("s1", slurm_name="other"), kn("k1", slurm_name="s1"), sn("s1"))
    d = decide("ns/Pod:a", pod("a", job=5), *objs, sjob(5, "RUNNING", ("s1",)))
    assert [b.node for b in of(d, BindPod)] == ["k1"]


def test_a_job_of_another_cluster_is_not_ours() -> None:
    d = decide(
        "ns/Pod:a",
        pod("a", job=5),
        *NODES,
        sjob(5, "RUNNING", ("s1",), cluster="c2"),
        listed=False,
    )
    assert d.actions == ()


# --- pods joining and marking ----------------------------------------------------------------


def test_a_pod_joining_after_submit_is_marked_then_bound() -> None:
    root = workload("Job", "train", 2)
    pods = (job_pod("t-0", job=5, node="k1"), job_pod("t-1"))
    d = decide("ns/Job:train", root, *pods, *NODES, sjob(5, "RUNNING", ("s1", "s2")))
    assert kinds(d)[0] == "MarkPods"
    assert of(d, MarkPods) == [MarkPods(job_id=5, pods=(ref("t-1"),), scheduler_name=SCHED)]
    assert [(b.pod.name, b.node) for b in of(d, BindPod)] == [("t-1", "s2")]
    pending = decide("ns/Job:train", root, *pods, *NODES, sjob(5, "PENDING"))
    assert kinds(pending)[0] == "MarkPods" and not of(pending, BindPod)


@pytest.mark.parametrize(
    ("finalizers", "tolerations", "marked"),
    [
        ((FIN,), (TOL,), True),
        ((FIN,), ("",), True),  # tolerates every taint
        ((), (TOL,), False),
        ((FIN,), (), False),
        ((FIN,), ("other",), False),
    ],
)
def test_a_pod_is_marked_until_it_has_label_finalizer_and_toleration(
    finalizers: tuple[str, ...], tolerations: tuple[str, ...], marked: bool
) -> None:
    labelled = pod("a", job=5, marked=False)
    p = msgspec.structs.replace(labelled, finalizers=finalizers, tolerations=tolerations)
    d = decide("ns/Pod:a", p, sjob(5, "PENDING"))
    if marked:
        assert of(d, MarkPods) == []
    else:
        assert of(d, MarkPods) == [MarkPods(job_id=5, pods=(ref("a"),), scheduler_name=SCHED)]


def test_the_highest_job_id_names_the_group_job() -> None:
    pods = (job_pod("t-0", job=5), job_pod("t-1", job=7))
    view = placement.view(
        store(workload("Job", "train", 2), *pods, sjob(7, "PENDING")), "ns/Job:train", CTX
    )
    assert view is not None and view.job_id == 7
    d = placement.decide(view)
    assert of(d, MarkPods) == [MarkPods(job_id=7, pods=(ref("t-0"),), scheduler_name=SCHED)]


def test_a_retry_pod_gets_a_new_job_instead_of_the_ended_one() -> None:
    # The Job's first pod failed (its job was cancelled); the Job controller made a new pod.
    root = workload("Job", "train", 1)
    failed = job_pod("t-0", job=5, phase="Failed", node="k1")
    retry = job_pod("t-1")
    d = decide("ns/Job:train", root, failed, retry, BATCH, sjob(5, "CANCELLED", ("s1",)))
    assert kinds(d) == ["SubmitSlurmJob", "RecordEvent"]
    assert of(d, SubmitSlurmJob)[0].pods == (ref("t-1"),)


# --- whose pods ------------------------------------------------------------------------------


def test_pods_of_another_scheduler_are_ignored() -> None:
    assert decide("ns/Pod:a", pod("a", scheduler="default-scheduler"), BATCH) == NOTHING
    root = workload("Job", "train", 1)
    mixed = (job_pod("t-0", scheduler="default-scheduler"), job_pod("t-1"))
    d = decide("ns/Job:train", root, *mixed, BATCH)
    assert of(d, SubmitSlurmJob)[0].pods == (ref("t-1"),)


def test_not_a_group_key() -> None:
    s = store(pod("a"))
    assert placement.view(s, "no-group", CTX) is None
    d = placement.decide(None)
    assert d.actions == () and d.reason == "not a pod group key"


def test_no_live_pod_means_nothing() -> None:
    assert decide("ns/Pod:a", pod("a", phase="Succeeded"), BATCH) == NOTHING
    assert decide("ns/Pod:b", pod("a"), BATCH) == NOTHING


# --- keys ------------------------------------------------------------------------------------

LWS_PODS = (_lws("lws-0", "0"), _lws("lws-1", "1"), _lws("lws-1-1", "1"))
MARK = _pods.marker(_pods.Group(namespace="ns", kind="Job", name="train"), "uid-train")


@dataclass(frozen=True)
class KeyCase:
    name: str
    event: Event
    want: list[str]
    objs: tuple[Event, ...] = ()


KEY_CASES = [
    KeyCase("bare pod", pod("a"), ["ns/Pod:a"]),
    KeyCase("Job pod", job_pod("t-0"), ["ns/Job:train"]),
    KeyCase(
        "pod tombstone keeps its group while a pod of it lives",
        tombstone(job_pod("t-0"), version="9", producer="p", observed_at=1),
        ["ns/Job:train"],
        (job_pod("t-1"),),
    ),
    # Issue 30: a group with no live pod of ours left has nothing to place (workload
    # cleans up after it), so a pod leaving it re-decides nothing here.
    KeyCase(
        "pod tombstone of a group with no live pod",
        tombstone(job_pod("t-0"), version="9", producer="p", observed_at=1),
        [],
        (job_pod("t-1", phase="Succeeded"),),
    ),
    KeyCase(
        "bare pod tombstone",
        tombstone(pod("a"), version="9", producer="p", observed_at=1),
        [],
    ),
    KeyCase("bare pod ended", pod("a", phase="Failed"), [], (pod("a", phase="Failed"),)),
    KeyCase("bare pod being deleted", pod("a", deleting=True), [], (pod("a", deleting=True),)),
    KeyCase(
        "Job pod ended beside a live one",
        job_pod("t-0", phase="Succeeded"),
        ["ns/Job:train"],
        (job_pod("t-0", phase="Succeeded"), job_pod("t-1")),
    ),
    KeyCase("pod of another scheduler", pod("a", scheduler="default-scheduler"), []),
    KeyCase("job with our marker", sjob(5, "RUNNING", comment=MARK), ["ns/Job:train"]),
    KeyCase("job with someone's comment", sjob(5, "RUNNING", comment="analysis run"), []),
    KeyCase("job of another cluster", sjob(5, "RUNNING", comment=MARK, cluster="c2"), []),
    KeyCase("Job workload", workload("Job", "train", 2), ["ns/Job:train"]),
    KeyCase(
        "LeaderWorkerSet ⇒ each replica",
        workload("LeaderWorkerSet", "lws", 2),
        ["ns/LeaderWorkerSet:lws/0", "ns/LeaderWorkerSet:lws/1"],
        LWS_PODS,
    ),
    KeyCase(
        "workload tombstone",
        KubeWorkload(
            source="k8s",
            key="ns/JobSet:js",
            op="deleted",
            namespace="ns",
            name="js",
            workload_kind="JobSet",
        ),
        ["ns/JobSet:js"],
    ),
    KeyCase(
        "partition ⇒ groups still without a job",
        part("gpu"),
        ["ns/Job:train", "ns/Pod:a"],
        (
            pod("a"),
            pod("b", job=5),
            pod("c", phase="Failed"),
            pod("d", deleting=True),
            pod("e", scheduler="default-scheduler"),
            job_pod("t-0"),
            job_pod("t-1"),
        ),
    ),
    KeyCase("node", kn("k1"), []),
]


@pytest.mark.parametrize("case", KEY_CASES, ids=lambda c: c.name)
def test_keys_of(case: KeyCase) -> None:
    assert list(placement.SPEC.keys_of(case.event, store(*case.objs), CTX)) == case.want


def test_all_keys_are_groups_with_a_live_pod_of_ours() -> None:
    s = store(
        pod("a"),
        pod("b", job=5, node="k1", phase="Running"),
        pod("c", phase="Succeeded"),
        pod("d", deleting=True),
        pod("e", scheduler="default-scheduler"),
        job_pod("t-0"),
        job_pod("t-1"),
        *LWS_PODS,
    )
    assert list(placement.all_keys(s, CTX)) == [
        "ns/Job:train",
        "ns/LeaderWorkerSet:lws/0",
        "ns/LeaderWorkerSet:lws/1",
        "ns/Pod:a",
        "ns/Pod:b",
    ]


def test_spec_lists_the_triggers() -> None:
    assert set(placement.SPEC.triggers) == {
        KubePod,
        KubeWorkload,
        SlurmJob,
        SlurmPartition,
        KubeNode,
        KubeNodeUsage,
        KubeListed,
        KubeResourceClaim,
        KubeResourceSlice,
        KubeDeviceClass,
    }
    assert placement.SPEC.key_kind == "PodGroup"


def test_a_pending_job_follows_cordons_and_uncordons() -> None:
    """The job was submitted while k2 was cordoned (excluded); k2 is back and k3 cordoned
    now: the pending job's exclusions are replaced. A job of another group, a running job and
    an unchanged list are left alone."""
    mark = _pods.marker(_pods.Group(namespace="ns", kind="Pod", name="a"), "u-a")
    pending = SlurmJob(
        source="slurm:c1",
        key="5",
        cluster="c1",
        job_id=5,
        state=("PENDING",),
        comment=mark,
        excluded_nodes=("k2",),
    )
    objs = (kn("k1"), kn("k2"), kn("k3", unschedulable=True), sn("k1"), sn("k2"), sn("k3"))
    d = decide("ns/Pod:a", pod("a", job=5), pending, *objs)
    (update,) = of(d, SetJobExcludedNodes)
    assert (update.job_id, update.marker, update.excluded_nodes) == (5, mark, ("k3",))
    same = msgspec.structs.replace(pending, excluded_nodes=("k3",))
    assert not of(decide("ns/Pod:a", pod("a", job=5), same, *objs), SetJobExcludedNodes)
    running = msgspec.structs.replace(pending, state=("RUNNING",), nodes=("k1",))
    assert not of(decide("ns/Pod:a", pod("a", job=5), running, *objs), SetJobExcludedNodes)
    foreign = msgspec.structs.replace(pending, comment="someone else")
    assert not of(decide("ns/Pod:a", pod("a", job=5), foreign, *objs), SetJobExcludedNodes)
    # A cordon reaches the pending groups.
    s = store(pending, pod("a", job=5), *objs)
    assert list(placement.SPEC.keys_of(kn("k2", unschedulable=True), s, CTX)) == ["ns/Pod:a"]


# --- stale job labels, the job's word, orphans (issue 18, 3 and 7) -------------------------

LISTED = SlurmPing(source=SRC, key="c1", cluster="c1", responding=True)
MARK_A = _pods.marker(_pods.Group(namespace="ns", kind="Pod", name="a"), "u-a")


@pytest.mark.parametrize("state", ["CANCELLED", "COMPLETED", "FAILED"])
def test_a_label_naming_an_ended_job_is_no_job(state: str) -> None:
    """An administrator scancel-ed the pending placeholder: the pod stayed Pending for ever.
    Slinky treats the label as no job and submits again (the label is replaced)."""
    d = decide("ns/Pod:a", pod("a", job=5), part("batch"), sjob(5, state), LISTED)
    assert kinds(d)[0] == "SubmitSlurmJob"


def test_a_label_naming_a_job_slurm_no_longer_has_is_no_job() -> None:
    """Gone from a complete listing that holds a newer job (Slurm's ids grow)."""
    other = sjob(7, "RUNNING", comment="someone else's")
    d = decide("ns/Pod:a", pod("a", job=5), part("batch"), other, LISTED)
    assert kinds(d)[0] == "SubmitSlurmJob"


def test_a_label_naming_a_job_a_complete_listing_lacks_is_no_job_at_once() -> None:
    """Issue "Fail closed at every edge" (3): slurmctld restarted from state saved before
    the submit, so no newer job is listed either, and the pod waited for good. A complete
    listing without the job means no job: submitted again at once (a job merely too new
    to be listed is found by the submit, which looks in Slurm for the marker first)."""
    older = sjob(3, "RUNNING", comment="someone else's")
    d = decide("ns/Pod:a", pod("a", job=5), part("batch"), older, LISTED)
    assert kinds(d)[0] == "SubmitSlurmJob"
    # Without a complete listing, absence proves nothing: the pod waits.
    assert decide("ns/Pod:a", pod("a", job=5), part("batch"), older, listed=False).actions == ()


def test_the_jobs_word_wins_over_a_stale_label() -> None:
    """A live job whose marker names the group, while the pods' label names an ended job:
    the pods are relabelled to it, nothing is submitted."""
    d = decide(
        "ns/Pod:a",
        pod("a", job=5),
        part("batch"),
        sjob(5, "CANCELLED"),
        sjob(9, "PENDING", comment=MARK_A),
        LISTED,
    )
    assert kinds(d) == ["MarkPods", "SetPodCondition", "RecordEvent"]
    assert of(d, MarkPods)[0].job_id == 9


def test_a_bound_pod_without_a_job_is_never_given_one() -> None:
    """Issue 18 (7): Slurm would reserve another node while the pod runs unseen. With no
    job of ours naming it in a complete listing it is deleted (Slinky's orphan rule)."""
    bound = pod("a", node="k1", phase="Running")
    d = decide("ns/Pod:a", bound, part("batch"), LISTED)
    assert kinds(d) == ["DeletePod", "RecordEvent"]
    assert not of(d, SubmitSlurmJob)
    waiting = decide("ns/Pod:a", bound, part("batch"), listed=False)
    assert waiting.actions == () and waiting.requeue_after == placement.ORPHAN_RECHECK_S


def test_a_bound_pod_adopts_the_job_whose_marker_names_it() -> None:
    bound = pod("a", node="k1", phase="Running")
    d = decide("ns/Pod:a", bound, part("batch"), sjob(9, "RUNNING", ("s1",), MARK_A), LISTED)
    assert "DeletePod" not in kinds(d)
    assert of(d, MarkPods)[0].job_id == 9


@pytest.mark.parametrize("phase", ["Running", "Finished", "Failed", "Unknown"])
def test_a_podgroup_past_scheduling_is_not_placed_again(phase: str) -> None:
    """Issue 18 (8), Slinky PreFilterPodGroupCoscheduling: its pods get no job; the
    condition and a Warning Event say why (once)."""
    group = msgspec.structs.replace(workload("PodGroup", "g", 1), phase=phase)
    member = pod("m", labels={_pods.LABEL_POD_GROUP: "g"})
    d = decide("ns/PodGroup:g", group, member, part("batch"))
    assert kinds(d) == ["SetPodCondition", "RecordEvent"]
    assert of(d, SetPodCondition)[0].reason == placement.PODGROUP_NOT_PENDING
    assert phase in of(d, SetPodCondition)[0].message


@pytest.mark.parametrize("phase", ["", "Pending", "Scheduling", "PreScheduling"])
def test_a_podgroup_still_to_schedule_is_placed(phase: str) -> None:
    group = msgspec.structs.replace(workload("PodGroup", "g", 1), phase=phase)
    member = pod("m", labels={_pods.LABEL_POD_GROUP: "g"})
    assert "SubmitSlurmJob" in kinds(decide("ns/PodGroup:g", group, member, part("batch")))


# --- a pod naming a PodGroup that does not exist (issue 18, 8) ----------------------------------

PODGROUPS_LISTED = KubeListed(source="k8s", key="podgroups", resource="podgroups")
NOW = 10_000.0


def _pg_pod(name: str, *, created: int = 0, **kw: Any) -> KubePod:
    p = pod(name, labels={_pods.LABEL_POD_GROUP: "g"}, **kw)
    return msgspec.structs.replace(p, created_at=created)


def test_a_pod_naming_a_missing_podgroup_is_placed_alone_after_the_grace() -> None:
    """Slinky slurmjobir.TranslateToSlurmJobIR: a PodGroup that cannot be found is not the
    pod's root; the pod is translated from its owner (here: alone), with a Warning Event."""
    ctx = msgspec.structs.replace(CTX, now=NOW)
    member = _pg_pod("m", created=int(NOW - placement.PODGROUP_GRACE_S - 1))
    s = store(*_listed_world((member, BATCH, PODGROUPS_LISTED)))
    assert _pods.resolve_group(member, s, "c1").key == "ns/Pod:m"
    assert list(placement.SPEC.keys_of(member, s, ctx)) == ["ns/Pod:m"]
    d = placement.decide(placement.view(s, "ns/Pod:m", ctx))
    assert kinds(d) == ["RecordEvent", "SubmitSlurmJob", "RecordEvent"]
    assert of(d, RecordEvent)[0].reason == placement.PODGROUP_MISSING
    assert of(d, SubmitSlurmJob)[0].group == "ns/Pod:m"
    # The PodGroup's own key no longer holds the pod, so nothing is submitted twice.
    assert placement.decide(placement.view(s, "ns/PodGroup:g", ctx)) == NOTHING


def test_a_pod_naming_a_missing_podgroup_waits_for_the_grace() -> None:
    ctx = msgspec.structs.replace(CTX, now=NOW)
    member = _pg_pod("m", created=int(NOW - 5))
    d = placement.decide(placement.view(store(member, BATCH, PODGROUPS_LISTED), "ns/Pod:m", ctx))
    assert d.actions == ()
    assert d.requeue_after == pytest.approx(placement.PODGROUP_GRACE_S - 5)


def test_without_a_complete_podgroup_list_the_pod_waits_for_its_podgroup() -> None:
    member = _pg_pod("m")
    s = store(member, BATCH)
    assert _pods.resolve_group(member, s, "c1").key == "ns/PodGroup:g"
    d = placement.decide(placement.view(s, "ns/PodGroup:g", CTX))
    assert d.actions == ()
    assert "waiting for ns/PodGroup:g" in d.reason


def test_a_job_pod_naming_a_missing_podgroup_is_placed_with_its_job() -> None:
    owner = OwnerRef(api_version="batch/v1", kind="Job", name="train", uid="uid-train")
    member = _pg_pod("t-0", owner=owner)
    s = store(member, BATCH, PODGROUPS_LISTED, workload("Job", "train", 1))
    assert _pods.resolve_group(member, s, "c1").key == "ns/Job:train"


def test_a_placed_pod_keeps_its_jobs_group_when_the_podgroup_appears_or_goes() -> None:
    """The job's word: a PodGroup created after the pod was placed alone (or deleted after
    its gang was placed) never moves the pod, so its job never looks orphaned."""
    alone = _pods.marker(_pods.Group(namespace="ns", kind="Pod", name="m"), "u-m")
    member = _pg_pod("m", job=7)
    s = store(member, sjob(7, "RUNNING", ("s1",), alone), workload("PodGroup", "g", 1))
    assert _pods.resolve_group(member, s, "c1").key == "ns/Pod:m"
    gang = _pods.marker(_pods.Group(namespace="ns", kind="PodGroup", name="g"), "uid-g")
    s = store(member, sjob(7, "RUNNING", ("s1",), gang), PODGROUPS_LISTED)
    assert _pods.resolve_group(member, s, "c1").key == "ns/PodGroup:g"


def test_a_complete_podgroup_list_triggers_the_waiting_pods() -> None:
    member = _pg_pod("m")
    s = store(member, BATCH, PODGROUPS_LISTED)
    assert list(placement.SPEC.keys_of(PODGROUPS_LISTED, s, CTX)) == ["ns/Pod:m"]
    pods_listed = KubeListed(source="k8s", key="pods", resource="pods")
    assert list(placement.SPEC.keys_of(pods_listed, s, CTX)) == []


# --- why a pod is pending (issue 20, 4) ------------------------------------------------------

MARK_T = _pods.marker(_pods.Group(namespace="ns", kind="Job", name="train"), "uid-train")
PENDING = wellknown.REASON_SLURM_JOB_PENDING


def qjob(
    job_id: int,
    *,
    priority: int | None = 100,
    partition: str = "gpu",
    state: str = "PENDING",
    reason: str = "Priority",
    submit: int = 0,
    comment: str = "",
    cluster: str = "c1",
) -> SlurmJob:
    """A job in a partition's queue."""
    return SlurmJob(
        source=f"slurm:{cluster}",
        key=str(job_id),
        cluster=cluster,
        job_id=job_id,
        state=(state,),
        state_reason=reason,
        partition=partition,
        priority=priority,
        submit_time=submit,
        comment=comment,
    )


def pending_cond(message: str, reason: str = PENDING) -> PodCondition:
    return PodCondition(type="PodScheduled", status="False", reason=reason, message=message)


@pytest.mark.parametrize(
    ("n", "text"),
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (13, "13th"),
     (21, "21st"), (22, "22nd"), (23, "23rd"), (101, "101st"), (111, "111th"), (112, "112th")],
)  # fmt: skip
def test_ordinals(n: int, text: str) -> None:
    assert wellknown.ordinal(n) == text


@dataclass(frozen=True)
class QueueCase:
    name: str
    others: tuple[SlurmJob, ...]
    want: int
    mine: SlurmJob | None = None  # None: qjob(50)


QUEUE_CASES = [
    QueueCase("alone", (), 1),
    QueueCase("higher priority first", (qjob(60, priority=200), qjob(70, priority=300)), 3),
    QueueCase("lower priority after", (qjob(10, priority=50), qjob(20, priority=1)), 1),
    QueueCase("same priority: earlier submit first", (qjob(60, submit=-5),), 2),
    QueueCase("same priority and submit: lower job id first", (qjob(40), qjob(60)), 2),
    QueueCase("unknown priority sorts last", (qjob(10, priority=None),), 1),
    QueueCase(
        "only PENDING jobs count",
        (qjob(10, priority=900, state="RUNNING"), qjob(11, priority=900, state="COMPLETED")),
        1,
    ),
    QueueCase("other partitions do not count", (qjob(10, priority=900, partition="cpu"),), 1),
    QueueCase("other clusters do not count", (qjob(10, priority=900, cluster="c2"),), 1),
    QueueCase("a running job has no place", (), 0, qjob(50, state="RUNNING")),
    QueueCase("a job without a partition has no place", (), 0, qjob(50, partition="")),
]


@pytest.mark.parametrize("case", QUEUE_CASES, ids=lambda c: c.name)
def test_queue_position(case: QueueCase) -> None:
    """slurmctld's order (sort_job_queue2): priority descending, submit time, job id."""
    mine = case.mine or qjob(50)
    assert placement.queue_position(store(mine, *case.others), mine) == case.want


def _waiting(*extra: Event, pods: tuple[KubePod, ...] | None = None, **job: Any) -> Decision:
    root = workload("Job", "train", 2)
    members = pods or (job_pod("t-0", job=50), job_pod("t-1", job=50))
    mine = qjob(50, comment=MARK_T, **job)
    return decide("ns/Job:train", root, *members, mine, *extra)


def test_a_pending_job_says_why_on_each_pod_with_its_place_in_the_queue() -> None:
    ahead = tuple(qjob(i, priority=500) for i in range(1, 12))  # 11 jobs ahead
    d = _waiting(*ahead, part("gpu"))
    assert kinds(d) == ["SetPodCondition", "RecordEvent"] * 2
    conds = of(d, SetPodCondition)
    assert [c.pod for c in conds] == [ref("t-0"), ref("t-1")]
    for c in conds:
        assert (c.type, c.status, c.reason) == ("PodScheduled", "False", "SlurmJobPending")
        assert c.message == "Priority, 12th in partition gpu"
    events = of(d, RecordEvent)
    assert [(e.name, e.type, e.reason) for e in events] == [
        ("t-0", "Normal", "SlurmJobPending"),
        ("t-1", "Normal", "SlurmJobPending"),
    ]
    assert all("job 50" in e.message and "12th in partition gpu" in e.message for e in events)
    assert "Priority, 12th in partition gpu" in d.reason


def test_the_pending_condition_is_written_only_when_it_changes() -> None:
    said = pending_cond("Resources, 1st in partition gpu")
    pods = (job_pod("t-0", job=50, conditions=(said,)), job_pod("t-1", job=50, conditions=(said,)))
    assert _waiting(pods=pods, reason="Resources").actions == ()
    # Slurm's reason changed: the condition follows, without a second first-wait Event.
    d = _waiting(pods=pods, reason="Priority")
    assert kinds(d) == ["SetPodCondition", "SetPodCondition"]
    assert {c.message for c in of(d, SetPodCondition)} == {"Priority, 1st in partition gpu"}
    # The place changed: likewise.
    moved = _waiting(qjob(7, priority=900), pods=pods, reason="Resources")
    assert {c.message for c in of(moved, SetPodCondition)} == {"Resources, 2nd in partition gpu"}
    assert not of(moved, RecordEvent)


def test_a_place_far_back_is_rewritten_only_when_it_has_halved_or_doubled() -> None:
    """Issue 30: every job start ahead moves each waiting pod's place; a pod beyond the first
    ten is told again only when its place has halved (or doubled), so a queue of n costs
    each pod O(log n) writes, not O(n) (wellknown.pending_rewrite_due)."""

    def moved(written: str, ahead: int) -> set[str]:
        said = pending_cond(written)
        pods = (job_pod("t-0", job=50, conditions=(said,)),)
        others = tuple(qjob(i, priority=900) for i in range(1, ahead + 1))
        return {c.message for c in of(_waiting(*others, pods=pods), SetPodCondition)}

    assert moved("Priority, 40th in partition gpu", 29) == set(), "30th: not yet halved"
    assert moved("Priority, 40th in partition gpu", 19) == {"Priority, 20th in partition gpu"}
    assert moved("Priority, 12th in partition gpu", 9) == {"Priority, 10th in partition gpu"}
    assert moved("Priority, 20th in partition gpu", 39) == {"Priority, 40th in partition gpu"}
    assert moved("Priority, 100th or later in partition gpu", 98) == set()
    assert moved("Resources, 40th in partition gpu", 29) == {"Priority, 30th in partition gpu"}
    assert not wellknown.pending_rewrite_due(
        "Priority, 3rd in partition gpu", "Priority, 3rd in partition gpu"
    )
    assert wellknown.pending_rewrite_due("Priority", "Priority, 30th in partition gpu")


def test_the_first_wait_event_goes_to_a_pod_that_did_not_wait_before() -> None:
    """Only a pod without a SlurmJobPending condition (none, or another reason) gets it."""
    said = pending_cond("Priority, 1st in partition gpu")
    invalid = pending_cond("cannot become a Slurm job: …", reason="SlurmJobInvalid")
    pods = (
        job_pod("t-0", job=50, conditions=(said,)),
        job_pod("t-1", job=50, conditions=(invalid,)),
    )
    d = _waiting(pods=pods)
    assert kinds(d) == ["SetPodCondition", "RecordEvent"]
    assert [c.pod for c in of(d, SetPodCondition)] == [ref("t-1")]
    assert [e.name for e in of(d, RecordEvent)] == ["t-1"]


def test_slurms_reason_none_and_a_missing_partition() -> None:
    d = _waiting(reason="", partition="")
    assert {c.message for c in of(d, SetPodCondition)} == {"None"}


def test_bound_pods_and_jobs_not_ours_get_no_pending_condition() -> None:
    pods = (job_pod("t-0", job=50, node="k1"), job_pod("t-1", job=50))
    d = _waiting(pods=pods)
    assert [c.pod for c in of(d, SetPodCondition)] == [ref("t-1")]
    foreign = decide(
        "ns/Job:train",
        workload("Job", "train", 1),
        job_pod("t-0", job=50),
        qjob(50, comment="someone else's"),
    )
    assert not of(foreign, SetPodCondition)


def test_a_pending_condition_leaves_the_refused_submit_back_off_alone() -> None:
    """The back-off reads only a REJECTED condition; a pending one never carries that reason,
    so a group refused at t=NOW-10 still waits, and a group whose pods only waited in the
    queue (its job then cancelled) is submitted at once."""
    now = 1_000_000.0
    ctx = msgspec.structs.replace(CTX, now=now)
    refused = pending_cond("Slurm refused", reason=wellknown.REASON_SLURM_JOB_REJECTED)
    refused = msgspec.structs.replace(refused, last_transition=int(now) - 10)
    d = decide("ns/Pod:a", pod("a", conditions=(refused,)), BATCH, ctx=ctx)
    assert d.actions == () and d.requeue_after is not None
    waited = msgspec.structs.replace(pending_cond("Priority, 3rd in partition batch"))
    d = decide("ns/Pod:a", pod("a", conditions=(waited,)), BATCH, ctx=ctx)
    assert kinds(d) == ["SubmitSlurmJob", "RecordEvent"]


def test_the_start_event_says_the_job_started_where_and_after_how_long() -> None:
    running = SlurmJob(
        source=SRC,
        key="5",
        cluster="c1",
        job_id=5,
        state=("RUNNING",),
        nodes=("s1",),
        partition="gpu",
        submit_time=1000,
        start_time=1042,
        comment=OURS,
    )
    d = decide("ns/Pod:a", pod("a", job=5), *NODES, running)
    (event,) = of(d, RecordEvent)
    assert (event.type, event.reason) == ("Normal", "Scheduled")
    assert event.message == (
        "Slurm job 5 started after 42 s in the queue on node s1 of partition gpu: bound to k1"
    )


def test_a_job_leaving_the_queue_re_triggers_the_groups_waiting_in_its_partition() -> None:
    mark_a = _pods.marker(_pods.Group(namespace="ns", kind="Pod", name="a"), "u-a")
    waiting = (
        qjob(50, comment=MARK_T),
        qjob(51, comment=mark_a),
        qjob(52, comment="someone else's"),
        qjob(53, comment=_pods.marker(_pods.Group(namespace="ns", kind="Pod", name="z"), "u"),
             partition="cpu"),
        qjob(54, comment=_pods.marker(_pods.Group(namespace="ns", kind="Pod", name="y"), "u"),
             cluster="c2"),
    )  # fmt: skip
    # Their pods wait, told nothing yet (issue 30: a group whose pods need no new word on
    # their place is not re-decided, see test_a_place_not_due_for_a_rewrite_re_decides_nothing).
    s = store(*waiting, job_pod("t-0", job=50), pod("a", job=51))
    started = qjob(10, state="RUNNING", comment="someone else's")
    assert list(placement.SPEC.keys_of(started, s, CTX)) == ["ns/Job:train", "ns/Pod:a"]
    ended_ours = qjob(11, state="COMPLETED", comment=_pods.marker(
        _pods.Group(namespace="ns", kind="Pod", name="x"), "u"))  # fmt: skip
    assert list(placement.SPEC.keys_of(ended_ours, s, CTX)) == [
        "ns/Job:train",
        "ns/Pod:a",
        "ns/Pod:x",
    ]
    # A job joining the queue, or leaving another cluster's queue, triggers only its own group.
    assert list(placement.SPEC.keys_of(qjob(12, comment="x"), s, CTX)) == []
    other = qjob(13, state="RUNNING", comment="x", cluster="c2")
    assert list(placement.SPEC.keys_of(other, s, CTX)) == []


# --- Kubernetes feasibility before submit and before bind (issue 20, item 1) -----------------

GI = 1024 * MIB
FEAS_NODES = (
    KubeNode(
        source="k8s",
        key="k1",
        ready=True,
        labels={"zone": "a"},
        alloc_cpu_millis=4000,
        alloc_memory_bytes=8 * GI,
        alloc_pods=110,
    ),
    KubeNode(
        source="k8s",
        key="k2",
        ready=True,
        labels={"zone": "b"},
        taints=(Taint(key="dedicated", value="gpu", effect="NoSchedule"),),
        alloc_cpu_millis=4000,
        alloc_memory_bytes=8 * GI,
        alloc_pods=110,
    ),
    KubeNode(
        source="k8s",
        key="k3",
        ready=True,
        labels={"zone": "a"},
        alloc_cpu_millis=4000,
        alloc_memory_bytes=8 * GI,
        alloc_pods=110,
    ),
    sn("k1"),
    sn("k2"),
    sn("k3"),
)
#: Someone else's pods use 3.5 of k3's 4 CPUs.
K3_BUSY = KubeNodeUsage(source="k8s", key="k3", cpu_millis=3500, memory_bytes=GI, pods=3)


def feas_pod(name: str = "a", **kw: Any) -> KubePod:
    base = pod(name, **{k: v for k, v in kw.items() if k in ("job", "node", "marked")})
    extra = {k: v for k, v in kw.items() if k not in ("job", "node", "marked")}
    return msgspec.structs.replace(base, **extra)


@dataclass(frozen=True)
class ExclusionCase:
    name: str
    pods: tuple[KubePod, ...]
    excluded: tuple[str, ...]


EXCLUSIONS = [
    # k2's taint excludes it for pods tolerating nothing; k3 is too full for 1 CPU.
    ExclusionCase("a plain pod", (feas_pod(),), ("k2", "k3")),
    ExclusionCase(
        "a pod tolerating the taint",
        (feas_pod(toleration_specs=(Toleration(key="dedicated", operator="Exists"),)),),
        ("k3",),
    ),
    ExclusionCase("a small pod fits k3", (feas_pod(cpu_millis=500),), ("k2",)),
    ExclusionCase(
        "a node selector",
        (feas_pod(cpu_millis=100, node_selector={"zone": "b"}),),
        ("k1", "k2", "k3"),
    ),
    ExclusionCase(
        "a required affinity",
        (
            feas_pod(
                cpu_millis=100,
                node_affinity=(
                    NodeSelectorTerm(
                        match_fields=(
                            NodeSelectorRequirement(
                                key="metadata.name", operator="NotIn", values=("k1",)
                            ),
                        )
                    ),
                ),
            ),
        ),
        ("k1", "k2"),
    ),
]


@pytest.mark.parametrize("case", EXCLUSIONS, ids=lambda c: c.name)
def test_nodes_infeasible_for_a_pod_are_excluded_at_submit(case: ExclusionCase) -> None:
    d = decide("ns/Pod:a", *case.pods, *FEAS_NODES, K3_BUSY, BATCH)
    (submit,) = of(d, SubmitSlurmJob)
    assert submit.spec.excluded_nodes == case.excluded


def test_a_node_infeasible_for_any_pod_of_the_group_is_excluded() -> None:
    """Fail closed: pods are spread over the job's nodes by name, so every pod must fit every
    node it could get — the small pod alone would fit k3, the big one does not."""
    root = workload("Job", "train", 2)
    small = msgspec.structs.replace(job_pod("t-0"), cpu_millis=100)
    big = msgspec.structs.replace(job_pod("t-1"), cpu_millis=1000)
    d = decide("ns/Job:train", root, small, big, *FEAS_NODES, K3_BUSY, BATCH)
    assert of(d, SubmitSlurmJob)[0].spec.excluded_nodes == ("k2", "k3")
    both_small = msgspec.structs.replace(big, cpu_millis=100)
    d = decide("ns/Job:train", root, small, both_small, *FEAS_NODES, K3_BUSY, BATCH)
    assert of(d, SubmitSlurmJob)[0].spec.excluded_nodes == ("k2",)


def test_a_pending_job_follows_a_node_filling_up() -> None:
    pending = SlurmJob(
        source=SRC,
        key="5",
        cluster="c1",
        job_id=5,
        state=("PENDING",),
        comment=MARK_FEAS,
        excluded_nodes=("k2",),
    )
    d = decide("ns/Pod:a", feas_pod(job=5), pending, *FEAS_NODES, K3_BUSY)
    (update,) = of(d, SetJobExcludedNodes)
    assert update.excluded_nodes == ("k2", "k3")
    # A node's usage reaches the pending groups.
    s = store(pending, feas_pod(job=5), *FEAS_NODES)
    assert list(placement.SPEC.keys_of(K3_BUSY, s, CTX)) == ["ns/Pod:a"]


def test_before_the_first_slurm_listing_a_submit_waits_rather_than_drop_exclusions() -> None:
    kube_only = tuple(n for n in FEAS_NODES if isinstance(n, KubeNode))
    d = decide("ns/Pod:a", feas_pod(), *kube_only, BATCH, listed=False)
    assert d.actions == () and d.requeue_after == placement.LISTING_RECHECK_S
    assert "k2" in d.reason
    # Nothing to exclude: nothing to wait for.
    fine = decide(
        "ns/Pod:a",
        feas_pod(cpu_millis=100, toleration_specs=(Toleration(operator="Exists"),)),
        *kube_only,
        BATCH,
    )
    assert kinds(fine)[0] == "SubmitSlurmJob"


MARK_FEAS = _pods.marker(_pods.Group(namespace="ns", kind="Pod", name="a"), "u-a")
MARK_TRAIN = _pods.marker(_pods.Group(namespace="ns", kind="Job", name="train"), "uid-train")


def test_an_allocation_that_no_longer_fits_is_cancelled_not_bound() -> None:
    """Slurm gave k2 (tainted since the submit): nothing is bound, our job is cancelled and
    the pod gets a Warning Event naming the node and the reason."""
    job = sjob(5, "RUNNING", ("k2",), comment=MARK_FEAS)
    d = decide("ns/Pod:a", feas_pod(job=5), job, *FEAS_NODES)
    assert not of(d, BindPod)
    assert kinds(d) == ["CancelSlurmJob", "RecordEvent"]
    cancel = d.actions[0]
    assert isinstance(cancel, CancelSlurmJob)
    assert (cancel.cluster, cancel.job_id, cancel.marker) == ("c1", 5, MARK_FEAS)
    (event,) = of(d, RecordEvent)
    assert (event.name, event.type, event.reason) == ("a", "Warning", placement.INFEASIBLE)
    assert "k2" in event.message and "untolerated taint {dedicated: gpu}" in event.message


def test_a_node_filled_up_since_the_submit_cancels_the_job() -> None:
    job = sjob(5, "RUNNING", ("k3",), comment=MARK_FEAS)
    d = decide("ns/Pod:a", feas_pod(job=5), job, *FEAS_NODES, K3_BUSY)
    assert kinds(d) == ["CancelSlurmJob", "RecordEvent"]
    assert "Insufficient cpu" in of(d, RecordEvent)[0].message


def test_pods_sharing_a_node_are_added_up_before_binding() -> None:
    """Two 3-CPU pods on one 4-CPU node: the second no longer fits once the first is bound."""
    root = workload("Job", "train", 2)
    pods = tuple(
        msgspec.structs.replace(job_pod(f"t-{i}", job=5), cpu_millis=3000) for i in range(2)
    )
    d = decide(
        "ns/Job:train", root, *pods, *FEAS_NODES, sjob(5, "RUNNING", ("k1",), comment=MARK_TRAIN)
    )
    assert kinds(d) == ["CancelSlurmJob", "RecordEvent"]
    assert of(d, RecordEvent)[0].name == "t-1"
    roomy = sjob(5, "RUNNING", ("k1", "k3"), comment=MARK_TRAIN)
    d = decide("ns/Job:train", root, *pods, *FEAS_NODES, roomy)
    assert [(b.pod.name, b.node) for b in of(d, BindPod)] == [("t-0", "k1"), ("t-1", "k3")]


def test_a_fitting_allocation_is_bound_as_before() -> None:
    job = sjob(5, "RUNNING", ("k1",), comment=MARK_FEAS)
    d = decide("ns/Pod:a", feas_pod(job=5), job, *FEAS_NODES, K3_BUSY)
    assert of(d, BindPod) == [BindPod(pod=ref("a"), node="k1", slurm_node="k1", job_id=5)]
    assert not of(d, CancelSlurmJob)


def test_with_pods_already_bound_an_unfit_allocation_is_still_cancelled() -> None:
    """Slinky slurm-bridge 1.3 eligibility_test.go ("live allocation is still a rejection",
    with 18 of 48 members bound): a gang member that cannot be bound never waits for ever;
    the job is cancelled, no pod is deleted here, and nothing is bound."""
    root = workload("Job", "train", 3)
    pods = (
        job_pod("t-0", job=5, node="k1"),
        job_pod("t-1", job=5),
        job_pod("t-2", job=5),
    )
    job = sjob(5, "RUNNING", ("k1", "k2", "k3"), comment=MARK_TRAIN)
    d = decide("ns/Job:train", root, *pods, *FEAS_NODES, job)
    assert [c.job_id for c in of(d, CancelSlurmJob)] == [5]
    assert not of(d, DeletePod) and not of(d, BindPod)
    warned = [e for e in of(d, RecordEvent) if e.reason == placement.INFEASIBLE]
    assert [e.name for e in warned] == ["t-1"]


def test_a_job_that_is_not_ours_is_never_cancelled() -> None:
    job = sjob(5, "RUNNING", ("k2",), comment="someone else's")
    d = decide("ns/Pod:a", feas_pod(job=5), job, *FEAS_NODES)
    # Not the group's job: never cancelled, and never adopted (nothing bound to it).
    assert not of(d, CancelSlurmJob) and not of(d, BindPod)


def test_after_the_cancel_the_stale_label_resubmits_without_the_node() -> None:
    """The cancelled job is seen CANCELLED: the pod's label is stale, so the group is
    submitted again — with the infeasible node excluded this time."""
    cancelled = sjob(5, "CANCELLED", ("k2",), comment=MARK_FEAS)
    d = decide("ns/Pod:a", feas_pod(job=5), cancelled, *FEAS_NODES, BATCH, LISTED)
    (submit,) = of(d, SubmitSlurmJob)
    assert submit.spec.excluded_nodes == ("k2",)


# --- jobs Slurm lost (issue "Fail closed at every edge", 3) ----------------------------------

SLURM_NODE = wellknown.ANNOTATION_SLURM_NODE
TRAIN_GROUP = _pods.Group(namespace="ns", kind="Job", name="train")
#: Two pods of Job train running on k1 (Slurm node s1) and s2, bound under job 5.
RUNNING_TRAIN = (
    job_pod("t-0", job=5, node="k1", phase="Running", annotations={SLURM_NODE: "s1"}),
    job_pod("t-1", job=5, node="s2", phase="Running", annotations={SLURM_NODE: "s2"}),
)
TRAIN = workload("Job", "train", 2, {f"{P}partition": "batch"})
FOREIGN = _pods.marker(_pods.Group(namespace="ns", kind="Job", name="other"), "uid-other")


@dataclass(frozen=True)
class LostCase:
    name: str
    objs: tuple[Event, ...]


LOST_CASES = [
    LostCase("the job vanished (slurmctld restarted from older state)", ()),
    LostCase(
        "the id names another group's RUNNING job",
        (sjob(5, "RUNNING", ("s3",), comment=FOREIGN),),
    ),
    LostCase("the id names a user's PENDING job", (sjob(5, "PENDING", comment="my analysis"),)),
    LostCase(
        "the id names a job of an earlier Job train (same name, another uid)",
        (sjob(5, "RUNNING", ("s1", "s2"), comment=_pods.marker(TRAIN_GROUP, "uid-old")),),
    ),
]


@pytest.mark.parametrize("case", LOST_CASES, ids=lambda c: c.name)
def test_running_pods_whose_job_slurm_lost_are_re_backed_on_their_nodes(case: LostCase) -> None:
    """A new placeholder job asks for exactly the nodes the pods run on (so Slurm hands them
    to no one else), sized as the group's job, with no exclusions; the submit relabels the
    pods. Nothing is deleted, nothing bound, no foreign job touched."""
    d = decide("ns/Job:train", TRAIN, *RUNNING_TRAIN, *NODES, BATCH, *case.objs, LISTED)
    assert kinds(d) == ["SubmitSlurmJob", "RecordEvent"]
    (submit,) = of(d, SubmitSlurmJob)
    assert submit.marker == MARK_TRAIN
    assert submit.pods == (ref("t-0"), ref("t-1"))
    spec = submit.spec
    assert spec.required_nodes == ("s1", "s2")
    assert (spec.min_nodes, spec.max_nodes, spec.excluded_nodes) == (2, 2, ())
    assert spec.partition == "batch"
    (event,) = of(d, RecordEvent)
    assert (event.type, event.reason) == ("Warning", placement.LOST)
    assert "job 5" in event.message and "s1,s2" in event.message
    # The pods run there already: the job only keeps their nodes, whatever their feature.
    assert spec.constraints == ""


def test_running_pods_whose_job_is_missing_wait_for_a_complete_listing() -> None:
    d = decide("ns/Job:train", TRAIN, *RUNNING_TRAIN, *NODES, BATCH, listed=False)
    assert not of(d, SubmitSlurmJob) and not of(d, DeletePod)


@pytest.mark.parametrize(
    "backing",
    [
        sjob(9, "RUNNING", ("s1", "s2"), comment=MARK_TRAIN),
        msgspec.structs.replace(
            sjob(9, "PENDING", comment=MARK_TRAIN), required_nodes=("s1", "s2")
        ),
    ],
    ids=["running there", "pending for those nodes"],
)
def test_a_re_back_job_already_in_slurm_is_adopted(backing: SlurmJob) -> None:
    d = decide("ns/Job:train", TRAIN, *RUNNING_TRAIN, *NODES, BATCH, backing, LISTED)
    assert not of(d, SubmitSlurmJob) and not of(d, BindPod)
    assert of(d, MarkPods) == [
        MarkPods(job_id=9, pods=(ref("t-0"), ref("t-1")), scheduler_name=SCHED)
    ]
    assert not of(d, SetJobExcludedNodes)


def test_a_job_of_ours_elsewhere_does_not_back_running_pods() -> None:
    """An older job of the group slurmctld restored (pending, for any nodes) would leave the
    pods' nodes free for anyone: a re-back job is submitted (the effector matches only a job
    holding or requiring those nodes; workload cancels the other as a duplicate)."""
    older = sjob(3, "PENDING", comment=MARK_TRAIN)
    d = decide("ns/Job:train", TRAIN, *RUNNING_TRAIN, *NODES, BATCH, older, LISTED)
    (submit,) = of(d, SubmitSlurmJob)
    assert submit.spec.required_nodes == ("s1", "s2")


def test_a_re_back_job_keeps_no_exclusions() -> None:
    """A cordoned node of the pods is required, not excluded: Slurm refuses a job that
    does both."""
    pending = msgspec.structs.replace(
        sjob(9, "PENDING", comment=MARK_TRAIN), required_nodes=("s1", "s2")
    )
    relabelled = tuple(
        msgspec.structs.replace(p, labels={**p.labels, JOBID: "9"}) for p in RUNNING_TRAIN
    )
    cordoned = (kn("k1", slurm_name="s1", unschedulable=True), kn("s2"), sn("s1"), sn("s2"))
    d = decide("ns/Job:train", TRAIN, *relabelled, *cordoned, BATCH, pending, LISTED)
    assert not of(d, SetJobExcludedNodes) and not of(d, SubmitSlurmJob)


def test_a_re_back_is_submitted_even_when_the_annotations_no_longer_translate() -> None:
    bad = workload("Job", "train", 2, {f"{P}min-nodes": "zero"})
    d = decide("ns/Job:train", bad, *RUNNING_TRAIN, *NODES, BATCH, LISTED)
    (submit,) = of(d, SubmitSlurmJob)
    assert submit.spec.required_nodes == ("s1", "s2")
    assert (submit.spec.min_nodes, submit.spec.tasks) == (2, 2)


@pytest.mark.parametrize(
    "reused",
    [sjob(5, "RUNNING", ("s1",), comment=FOREIGN), sjob(5, "PENDING", comment="my analysis")],
    ids=["another group's running job", "a user's pending job"],
)
def test_a_pending_pod_whose_id_was_reused_gets_a_new_job_at_once(reused: SlurmJob) -> None:
    """The restarted slurmctld handed the id out again: the pod is never bound to that job
    nor told it waits in its queue; it gets a new job of its own (the label is replaced)."""
    d = decide("ns/Pod:a", pod("a", job=5), *NODES, BATCH, reused, LISTED)
    assert kinds(d)[0] == "SubmitSlurmJob"
    assert not of(d, BindPod) and not of(d, CancelSlurmJob) and not of(d, SetPodCondition)
    assert of(d, SubmitSlurmJob)[0].marker == MARK_A


def test_the_job_trigger_reaches_the_group_whose_label_names_a_lost_job() -> None:
    """A tombstone keeps no marker, and a reused id carries another's: the pods' label is
    the only way back to the group."""
    gone = tombstone(
        sjob(5, "RUNNING", comment=MARK_TRAIN), version="1", producer="p", observed_at=0
    )
    s = store(TRAIN, *RUNNING_TRAIN)
    assert list(placement.SPEC.keys_of(gone, s, CTX)) == ["ns/Job:train"]
    reused = sjob(5, "PENDING", comment=FOREIGN)
    assert list(placement.SPEC.keys_of(reused, s, CTX)) == ["ns/Job:other", "ns/Job:train"]


def test_running_pods_whose_re_back_slurm_refused_are_deleted_after_the_grace() -> None:
    """Slurm refused the re-back job for good (the effector's SlurmJobRejected condition,
    written after the bind set PodScheduled True): no new submit; the pods wait
    ``lost_job_grace_s`` from the refusal, then are deleted as when the job did not start."""
    refused = pending_cond("boom")
    refused = msgspec.structs.replace(
        refused, reason=placement.REJECTED, last_transition=int(NOW_REFUSED)
    )
    pods = tuple(msgspec.structs.replace(p, conditions=(refused,)) for p in RUNNING_TRAIN)
    objs = (TRAIN, *pods, *NODES, BATCH, LISTED)
    ctx = msgspec.structs.replace(CTX, now=NOW_REFUSED + 30, lost_job_grace_s=60.0)
    early = decide("ns/Job:train", *objs, ctx=ctx)
    assert early.actions == () and early.requeue_after == pytest.approx(30.0)
    late = decide("ns/Job:train", *objs, ctx=msgspec.structs.replace(ctx, now=NOW_REFUSED + 61))
    assert kinds(late) == ["DeletePod", "RecordEvent", "DeletePod", "RecordEvent"]
    assert {(d.pod.name, d.job_id) for d in of(late, DeletePod)} == {("t-0", 0), ("t-1", 0)}


NOW_REFUSED = 50_000.0


# --- the slurm_bridge_gres_compatible feature every job requires (Slinky slurm-bridge 1.3
# --- slurmcontrol.go gresCompatibilityConstraint, slurmcontrol_test.go
# --- Test_gresCompatibilityConstraint; slurmconstraint_test.go TestCompose) -------------------

GRES_F = wellknown.FEATURE_GRES_COMPATIBLE


def _gres_cond(status: str) -> NodeCondition:
    return NodeCondition(
        type=wellknown.CONDITION_SLURM_GRES_COMPATIBLE, status=status, reason="r", message="m"
    )


def feature_world(
    *, k2: tuple[str, ...], k2_cond: str | None = None, listed: bool = True
) -> tuple[Event, ...]:
    """Two Kubernetes nodes k1 (carrying the feature) and k2 (features ``k2``, its
    GRES condition ``k2_cond``), both in partition batch."""
    k2_node = kn("k2")
    if k2_cond is not None:
        k2_node = msgspec.structs.replace(k2_node, conditions=(_gres_cond(k2_cond),))
    objs: tuple[Event, ...] = (
        kn("k1"),
        k2_node,
        sn("k1"),
        msgspec.structs.replace(sn("k2"), features=k2, active_features=k2),
        SlurmPartition(source=SRC, key="batch", cluster="c1", nodes=("k1", "k2")),
    )
    return (*objs, LISTED) if listed else objs


def gang(n: int, **ann: str) -> tuple[Event, ...]:
    annotations = {P + "partition": "batch", **{P + k: v for k, v in ann.items()}}
    return (
        workload("Job", "train", n, annotations),
        *(job_pod(f"t-{i}") for i in range(n)),
    )


@pytest.mark.parametrize(
    ("constraints", "want"),
    [
        (None, GRES_F),
        ("gpu&(rack-a|rack-b)", GRES_F + "&gpu&(rack-a|rack-b)"),
        ("rack-a|rack-b", GRES_F + "&(rack-a|rack-b)"),
        ("[rack-a|rack-b]", GRES_F + "&[rack-a|rack-b]"),
        (GRES_F, GRES_F),
    ],
)
def test_every_job_requires_the_gres_feature(constraints: str | None, want: str) -> None:
    ann = {} if constraints is None else {"constraints": constraints}
    d = decide("ns/Job:train", *gang(1, **ann), *feature_world(k2=(GRES_F,)))
    (submit,) = of(d, SubmitSlurmJob)
    assert submit.spec.constraints == want


@pytest.mark.parametrize("constraints", ["rack1*2", "(a&b)|(c&d)", "a&(b|(c))"])
def test_a_constraint_slurm_cannot_combine_is_refused_on_the_pods(constraints: str) -> None:
    """Slinky refuses it at admission and at submit; here on the pods, as every other
    annotation that cannot become a job: PodScheduled=False and a Warning Event naming it."""
    d = decide("ns/Job:train", *gang(1, constraints=constraints), *feature_world(k2=(GRES_F,)))
    assert not of(d, SubmitSlurmJob)
    (cond,) = of(d, SetPodCondition)
    assert (cond.status, cond.reason) == ("False", wellknown.REASON_SLURM_JOB_INVALID)
    assert f"metadata.annotations[{P}constraints]" in cond.message
    assert repr(constraints) in cond.message
    (event,) = of(d, RecordEvent)
    assert event.type == "Warning"


def test_a_node_incompatible_for_good_does_not_count_for_the_gang() -> None:
    """k2's GRES do not match its DRA inventory (condition False): node_register took the
    feature off, Slurm will never give k2 to the job, so a gang of two has one node."""
    d = decide("ns/Job:train", *gang(2), *feature_world(k2=("admin",), k2_cond="False"))
    assert not of(d, SubmitSlurmJob)
    (cond, _) = of(d, SetPodCondition)
    assert cond.reason == placement.INELIGIBLE
    assert "k2 lack the Slurm feature slurm_bridge_gres_compatible" in cond.message
    assert wellknown.CONDITION_SLURM_GRES_COMPATIBLE in cond.message
    assert [e.type for e in of(d, RecordEvent)] == ["Warning", "Warning"]


@pytest.mark.parametrize("k2_cond", [None, "True"])
def test_a_submit_waits_while_the_feature_is_on_its_way(k2_cond: str | None) -> None:
    """k2 is compatible (or not judged yet) but does not carry the feature yet (start-up, a
    node just joined): node_register is putting it on, so the gang waits, silently, instead
    of being refused — and Slurm is never asked for a job it would refuse (2029)."""
    d = decide("ns/Job:train", *gang(2), *feature_world(k2=("admin",), k2_cond=k2_cond))
    assert d.actions == ()
    assert d.requeue_after == placement.FEATURE_RECHECK_S
    assert "waiting for slurm_bridge_gres_compatible" in d.reason
    # One node is enough for one pod: submitted, Slurm places it on k1.
    assert of(decide("ns/Job:train", *gang(1), *feature_world(k2=())), SubmitSlurmJob)


def test_a_submit_waits_for_a_complete_listing() -> None:
    """Slurm refuses a job whose feature no node has (2029 "Invalid feature specification",
    recorded from 26.05.5): nothing is submitted before the nodes can be counted."""
    d = decide("ns/Job:train", *gang(1), *feature_world(k2=(GRES_F,), listed=False), listed=False)
    assert d.actions == ()
    assert d.requeue_after == placement.LISTING_RECHECK_S
    assert "complete Slurm listing" in d.reason


def test_only_the_active_set_counts() -> None:
    """A NodeFeatures plugin's node with the feature available but not active: Slurm matches
    a job's constraints against active features."""
    world = feature_world(k2=(GRES_F,), k2_cond="False")
    world = tuple(
        msgspec.structs.replace(o, active_features=("admin",))
        if isinstance(o, SlurmNode) and o.key == "k2"
        else o
        for o in world
    )
    d = decide("ns/Job:train", *gang(2), *world)
    assert not of(d, SubmitSlurmJob)
    assert of(d, SetPodCondition)[0].reason == placement.INELIGIBLE


def test_a_job_naming_no_partition_counts_every_partition_when_none_is_default() -> None:
    """The simulator e2e found it: a pod naming no partition, no partition flagged default
    (Slurm then takes any), no node carrying the feature yet — submitted, Slurm answered
    2029. Every partition's nodes count for such a job."""
    world = feature_world(k2=())
    world = tuple(
        msgspec.structs.replace(o, features=(), active_features=())
        if isinstance(o, SlurmNode)
        else o
        for o in world
    )
    d = decide("ns/Pod:a", pod("a"), *world)
    assert d.actions == () and d.requeue_after == placement.FEATURE_RECHECK_S


def test_a_rest_api_that_cannot_update_nodes_requires_no_feature() -> None:
    """Slurm 22.05 (REST v0.0.38) cannot update nodes: node_register can give no node the
    feature, so no job requires it (it would never run)."""
    old = msgspec.structs.replace(LISTED, api_version="v0.0.38")
    world = tuple(
        msgspec.structs.replace(o, features=(), active_features=())
        if isinstance(o, SlurmNode)
        else o
        for o in feature_world(k2=(), listed=False)
    )
    d = decide("ns/Job:train", *gang(2), *world, old)
    (submit,) = of(d, SubmitSlurmJob)
    assert submit.spec.constraints == ""
    new = msgspec.structs.replace(LISTED, api_version="v0.0.42")
    assert not of(decide("ns/Job:train", *gang(2), *world, new), SubmitSlurmJob)


def _started(p: KubePod) -> KubePod:
    """``p`` as the kubelet reports it running and Ready."""
    return msgspec.structs.replace(p, phase="Running", ready=True, ready_since=1_700_000_000)


@pytest.mark.parametrize(
    "pods",
    [
        (job_pod("t-0", job=5, node="k1"), job_pod("t-1", job=5)),
        (job_pod("t-0", job=5, node="k1"), job_pod("t-1", job=5, node="s2")),
        (job_pod("t-0", job=5, node="k1", deleting=True), job_pod("t-1", job=5, node="s2")),
    ],
    ids=["half-bound", "bound", "one-deleting"],
)
@pytest.mark.parametrize("state", ["RUNNING", "COMPLETED"])
def test_a_pod_starting_on_its_node_triggers_neither_placement_nor_workload(
    pods: tuple[KubePod, ...], state: str
) -> None:
    """``SPEC.reads``: a bound pod turning Running and Ready has the same read part, and
    placement and workload decide the same on either (so skipping its observation is a
    no-op); a pod ending does not (its part differs)."""
    from reconcilers import workload as wl_rec

    key = "ns/Job:train"
    root = workload("Job", "train", 2)
    job = msgspec.structs.replace(sjob(5, state, ("s1", "s2")), comment=_ours(key))
    before = store(root, *pods, *NODES, job)
    started = store(root, _started(pods[0]), pods[1], *NODES, job)
    for spec in (placement.SPEC, wl_rec.SPEC):
        read = spec.reads[KubePod]
        assert read(_started(pods[0])) == read(pods[0])
        assert read(msgspec.structs.replace(pods[0], phase="Succeeded")) != read(pods[0])
        want = spec.decide(spec.view(before, key, CTX))
        assert spec.decide(spec.view(started, key, CTX)) == want, spec.name


def test_a_place_far_back_in_a_deep_queue_is_told_as_100th_or_later() -> None:
    """Issue 30, item 4: a job leaving the head of a 10,000-deep queue must not rewrite
    10,000 pods' conditions; places from wellknown.QUEUE_POSITION_CAP on read the same."""
    cap = wellknown.QUEUE_POSITION_CAP
    ahead = tuple(qjob(1000 + i, priority=500) for i in range(cap + 20))
    mine = qjob(50)
    assert placement.queue_position(store(mine, *ahead), mine) == cap
    assert wellknown.pending_message("Priority", cap, "gpu") == (
        "Priority, 100th or later in partition gpu"
    )
    assert (
        wellknown.pending_message("Priority", cap - 1, "gpu") == "Priority, 99th in partition gpu"
    )


def test_a_job_leaving_a_deep_queue_re_decides_only_the_places_told_exactly() -> None:
    cap = wellknown.QUEUE_POSITION_CAP
    waiting = [
        qjob(
            100 + i,
            priority=1000 - i,
            comment=_pods.marker(_pods.Group(namespace="ns", kind="Pod", name=f"q{i}"), f"u{i}"),
        )
        for i in range(cap + 50)
    ]
    started = qjob(99, state="RUNNING")
    pods = [pod(f"q{i}", job=100 + i) for i in range(cap + 50)]
    s = store(*waiting, *pods, started)
    keys = list(placement.SPEC.keys_of(started, s, CTX))
    assert len(keys) == cap
    assert "ns/Pod:q0" in keys and f"ns/Pod:q{cap}" not in keys


def test_a_place_not_due_for_a_rewrite_re_decides_nothing() -> None:
    """Issue 30: a job leaving the queue re-decides a waiting group only when one of its
    pods would be told a new place (wellknown.pending_rewrite_due): 40th → 30th is not due,
    40th → 20th is, and a pod told nothing yet always is."""

    def keys_after(told: str, ahead: int, labelled: int | None = 500) -> list[str]:
        mark_a = _pods.marker(_pods.Group(namespace="ns", kind="Pod", name="a"), "u-a")
        others = tuple(qjob(i, priority=900) for i in range(1, ahead + 1))
        mine = qjob(500, comment=mark_a)
        waiting = pod("a", job=labelled, conditions=(pending_cond(told),) if told else ())
        started = qjob(9999, state="RUNNING", comment="someone else's")
        return list(placement.SPEC.keys_of(started, store(*others, mine, waiting), CTX))

    assert keys_after("Priority, 40th in partition gpu", 29) == []
    assert keys_after("Priority, 40th in partition gpu", 19) == ["ns/Pod:a"]
    assert keys_after("Priority, 5th in partition gpu", 3) == ["ns/Pod:a"]
    assert keys_after("", 29) == ["ns/Pod:a"]
    # The pods are found by their job-id label: a group whose pods are not (or not yet)
    # labelled with this job is decided again, whatever they were told.
    assert keys_after("Priority, 40th in partition gpu", 29, labelled=None) == ["ns/Pod:a"]
    assert keys_after("Priority, 40th in partition gpu", 29, labelled=499) == ["ns/Pod:a"]
