"""Slinky slurm-bridge 1.3's node eligibility and gang handoff (issue 28 items 2, 3, 4), as
tables written in our own words from Slinky's Go tests
(``internal/scheduler/plugins/slurmbridge/eligibility_test.go``): placement's view → decide
over a projection, and the pure rules of ``reconcilers._feasible`` / ``reconcilers._handoff``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest

from producers.kube.watch import _bridge_pod
from reconcilers import _feasible, _handoff, _pods, placement
from reconcilers.base import Decision
from schemas import wellknown
from schemas.actions import BindPod, CancelSlurmJob, SetPodCondition, SubmitSlurmJob
from schemas.events import (
    Event,
    HostPort,
    KubeNode,
    KubeNodeUsage,
    KubePod,
    OwnerRef,
    PeerPod,
    PodAffinityTerm,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmPing,
    Taint,
)
from slurmbridge.kube.wire import RawObjMeta, RawPod, RawPodSpec
from slurmbridge.runtime.projection import Projection
from tests.unit._pods import kube_pod, kube_workload, ns_pod
from tests.unit.test_placement import CTX, SCHED

GI = 1024**3
GPU = "nvidia.com/gpu"
SRC = "slurm:c1"
#: The feature every job requires, as node_register puts it on every compatible node.
GRES_OK = (wellknown.FEATURE_GRES_COMPATIBLE,)
JOBID = wellknown.LABEL_SLURM_JOBID
LISTED = SlurmPing(source=SRC, key="c1", cluster="c1", responding=True)
TAINT = Taint(key="dedicated", value="", effect="NoSchedule")
PORT = HostPort(port=8080, protocol="TCP")


def HOSTNAME_TERM(labels: dict[str, str]) -> PodAffinityTerm:  # noqa: N802 - a constant's maker
    return PodAffinityTerm(match_labels=labels, topology_key="kubernetes.io/hostname")


def knode(name: str, *, pods: int = 110, taints: tuple[Taint, ...] = (), **labels: str) -> KubeNode:
    """Slinky's test node: 96 CPUs, 1024Gi, 8 GPUs, 110 pods, labels hostname and pool."""
    return KubeNode(
        source="k8s",
        key=name,
        ready=True,
        labels={"kubernetes.io/hostname": name, "pool": "batch", **labels},
        taints=taints,
        alloc_cpu_millis=96_000,
        alloc_memory_bytes=1024 * GI,
        alloc_pods=pods,
        alloc_extended={GPU: 8},
    )


def use(
    node: str,
    cpu: int = 1000,
    memory: int = GI,
    gpu: int = 8,
    *,
    bridge: bool = True,
    ports: tuple[HostPort, ...] = (),
    extra: tuple[int, int] = (0, 0),
    peers: tuple[PeerPod, ...] = (),
) -> KubeNodeUsage:
    """What one occupant requests on ``node`` (``bridge``: a pod of one of our Slurm
    allocations), plus ``extra`` (cpu, memory) requested by a pod that is not ours."""
    ext = {GPU: gpu} if gpu else {}
    b = 1 if bridge else 0
    return KubeNodeUsage(
        source="k8s",
        key=node,
        cpu_millis=cpu + extra[0],
        memory_bytes=memory + extra[1],
        pods=1 + (1 if extra != (0, 0) else 0),
        extended=ext,
        host_ports=ports,
        peers=peers,
        bridge_cpu_millis=cpu * b,
        bridge_memory_bytes=memory * b,
        bridge_pods=b,
        bridge_extended=ext if bridge else {},
    )


def member(i: int, cpu: int = 1000, memory: int = GI, gpu: int = 8, **kw: Any) -> KubePod:
    """Gang member ``g-<i>`` of Job ``gang``: Slinky's pending pod (1 CPU, 1Gi, 8 GPUs)."""
    owner = OwnerRef(api_version="batch/v1", kind="Job", name="gang", uid="uid-gang")
    return kube_pod(
        "ns",
        f"g-{i}",
        uid=f"u-g-{i}",
        scheduler_name=SCHED,
        labels={
            _pods.LABEL_JOB_NAME: "gang",
            _pods.LABEL_JOB_NAME_LEGACY: "gang",
            **kw.pop("labels", {}),
        },
        owner=owner,
        cpu_millis=cpu,
        memory_bytes=memory,
        extended={GPU: gpu} if gpu else {},
        **kw,
    )


def gang_root(size: int) -> Event:

    return kube_workload("ns", "Job", "gang", size=size)


def decide(*objs: Event, key: str = "ns/Job:gang") -> Decision:
    p = Projection()
    for i, o in enumerate(objs, 1):
        p.apply(o, i)
    return placement.decide(placement.view(p, key, CTX))


@dataclass
class Busy:
    """One row of Slinky's TestPostFilterQueuesBusyNodes, in our words."""

    name: str
    nodes: int = 2
    busy: int = 1
    gang: int = 2
    #: The occupant of each busy node (default: 1 CPU, 1Gi, 8 GPUs, one of our allocations).
    occupant: dict[str, Any] = field(default_factory=dict)
    #: The pending pods' requests and fields.
    pending: dict[str, Any] = field(default_factory=dict)
    #: node0 only: its KubeNode changes, and what a pod not ours requests there (cpu, memory).
    node0: dict[str, Any] = field(default_factory=dict)
    extra0: tuple[int, int] = (0, 0)
    submitted: bool = False
    #: Excluded besides "slurm-only" (a Slurm node with no Kubernetes node).
    excluded: tuple[str, ...] = ()


BUSY = [
    Busy("48-node gang with 16 free of 64 nodes: queued", 64, 48, 48, submitted=True),
    Busy("one pod, its only node busy with our job: queued", 1, 1, 1, submitted=True),
    Busy("GPUs held by our job", submitted=True),
    Busy("CPUs held by our job", occupant={"cpu": 96_000, "gpu": 0}, submitted=True),
    Busy("memory held by our job", occupant={"memory": 1024 * GI, "gpu": 0}, submitted=True),
    Busy("pod slots held by our job", node0={"pods": 1}, submitted=True),
    Busy("more GPUs than a node has", pending={"gpu": 9}),
    Busy("more CPUs than a node has", pending={"cpu": 97_000}),
    Busy("more memory than a node has", pending={"memory": 1025 * GI}),
    Busy("the occupant is not ours", occupant={"bridge": False}),
    Busy("a pod not ours still fills the node", extra0=(96_000, GI)),
    Busy("a pod not ours leaves room", extra0=(1000, GI), submitted=True),
    Busy(
        "queued on the other nodes, the one a pod not ours fills excluded",
        3,
        2,
        2,
        extra0=(96_000, GI),
        submitted=True,
        excluded=("node0",),
    ),
    Busy("a resource failure never hides a taint", node0={"taints": (TAINT,)}),
    Busy(
        "queued on the other nodes, the tainted one excluded",
        3,
        2,
        2,
        node0={"taints": (TAINT,)},
        submitted=True,
        excluded=("node0",),
    ),
    Busy(
        "queued on the other nodes, the one the selector refuses excluded",
        3,
        2,
        2,
        node0={"pool": "other"},
        pending={"node_selector": {"pool": "batch"}},
        submitted=True,
        excluded=("node0",),
    ),
    Busy(
        "a resource failure never hides pod anti-affinity",
        occupant={"peers": (PeerPod(namespace="ns", labels={JOBID: "1"}),)},
        pending={"pod_anti_affinity": (HOSTNAME_TERM({JOBID: "1"}),)},
    ),
    Busy(
        "affinity to a pod that is not ours is kept",
        1,
        1,
        1,
        occupant={"peers": (PeerPod(namespace="ns", labels={"app": "service"}),)},
        pending={"pod_affinity": (HOSTNAME_TERM({"app": "service"}),)},
        submitted=True,
    ),
    Busy(
        "a resource failure never hides a host port in use",
        occupant={"ports": (PORT,)},
        pending={"host_ports": (PORT,)},
    ),
]


@pytest.mark.parametrize("case", BUSY, ids=lambda c: c.name)
def test_busy_nodes_stay_eligible(case: Busy) -> None:
    """eligibility_test.go TestPostFilterQueuesBusyNodes: nodes whose only misfit is what our
    Slurm allocations hold stay eligible (a gang larger than the free nodes queues); fewer
    eligible nodes than the gang needs submits nothing and says why on the pods."""
    objs: list[Event] = [LISTED, gang_root(case.gang)]
    names = [f"node{i}" for i in range(case.nodes)]
    for i, name in enumerate(names):
        extra = dict(case.node0) if i == 0 else {}
        pods = extra.pop("pods", 110)
        taints = extra.pop("taints", ())
        objs.append(knode(name, pods=pods, taints=taints, **extra))
        objs.append(
            SlurmNode(source=SRC, key=name, cluster="c1", state=("IDLE",), features=GRES_OK)
        )
        if i < case.busy:
            objs.append(use(name, **case.occupant, extra=case.extra0 if i == 0 else (0, 0)))
    objs.extend(
        SlurmNode(source=SRC, key=extra, cluster="c1", state=("IDLE",), features=GRES_OK)
        for extra in ("slurm-only", "other-partition")
    )
    objs.append(
        SlurmPartition(
            source=SRC, key="batch", cluster="c1", nodes=(*names, "slurm-only"), is_default=True
        )
    )
    objs.append(SlurmPartition(source=SRC, key="other", cluster="c1", nodes=("other-partition",)))
    objs.extend(member(i, **case.pending) for i in range(case.gang))
    d = decide(*objs)
    submits = [a for a in d.actions if isinstance(a, SubmitSlurmJob)]
    if case.submitted:
        assert len(submits) == 1, d.reason
        assert submits[0].spec.excluded_nodes == tuple(sorted(("slurm-only", *case.excluded)))
        assert submits[0].spec.min_nodes == case.gang
        return
    assert submits == [], d.reason
    conds = [a for a in d.actions if isinstance(a, SetPodCondition)]
    assert len(conds) == case.gang
    assert {(c.status, c.reason) for c in conds} == {("False", placement.INELIGIBLE)}
    assert f"the job needs {case.gang}" in conds[0].message


def _raw(scheduler: str, labels: dict[str, str] | None) -> RawPod:
    return RawPod(
        metadata=RawObjMeta(name="p", namespace="ns", labels=labels),
        spec=RawPodSpec(nodeName="node0", schedulerName=scheduler),
    )


@pytest.mark.parametrize(
    ("scheduler", "labels", "bridge"),
    [
        pytest.param(SCHED, {JOBID: "1"}, True, id="ours, with a job"),
        pytest.param("default-scheduler", None, False, id="unmanaged occupant"),
        pytest.param("other-scheduler", {JOBID: "1"}, False, id="another scheduler, job label"),
        pytest.param(SCHED, None, False, id="ours without a job label"),
        pytest.param(SCHED, {JOBID: "invalid"}, False, id="an invalid job label"),
        pytest.param(SCHED, {JOBID: "0"}, False, id="job id zero"),
    ],
)
def test_which_occupants_are_our_allocations(
    scheduler: str, labels: dict[str, str] | None, bridge: bool
) -> None:
    """eligibility_test.go TestPostFilterQueuesBusyNodes, its occupant rows
    (``podAllocationID``): only our pods with a positive job id count as Slurm's."""
    assert _bridge_pod(_raw(scheduler, labels), SCHED) is bridge


# --- item 4: the whole resource fit and host ports -------------------------------------------


def test_every_requested_resource_is_fitted() -> None:
    """fit.go fitsRequest: an extended resource is checked like cpu; a node without it has
    none; a pod bound to the node is in its usage already."""
    node = knode("n")
    assert _feasible.fits(member(0), node, None) is None
    assert _feasible.fits(member(0), node, use("n", gpu=1, bridge=False)) == "Insufficient " + GPU
    plain = msgspec.structs.replace(node, alloc_extended={})
    assert _feasible.fits(member(0), plain, None) == "Insufficient " + GPU
    bound = member(0, node_name="n")
    assert _feasible.fits(bound, node, use("n", gpu=8, bridge=False)) is None


@pytest.mark.parametrize(
    ("want", "used", "conflict"),
    [
        (HostPort(port=80), HostPort(port=80), True),
        (HostPort(port=80), HostPort(port=80, protocol="UDP"), False),
        (HostPort(port=80), HostPort(port=81), False),
        (HostPort(port=80, host_ip="10.0.0.1"), HostPort(port=80, host_ip="10.0.0.2"), False),
        (HostPort(port=80, host_ip="10.0.0.1"), HostPort(port=80), True),
        (HostPort(port=80), HostPort(port=80, host_ip="10.0.0.2"), True),
        (HostPort(port=80, host_ip="0.0.0.0"), HostPort(port=80, host_ip="10.0.0.2"), True),
    ],
)
def test_host_ports(want: HostPort, used: HostPort, conflict: bool) -> None:
    """node_ports.go / HostPortInfo.CheckConflict: 0.0.0.0 (or none) is every address."""
    p = member(0, host_ports=(want,))
    usage = KubeNodeUsage(source="k8s", key="n", pods=1, host_ports=(used,))
    assert (_feasible.fits(p, knode("n"), usage) == _feasible.NODE_PORTS) is conflict


@pytest.mark.parametrize(
    ("pod_kw", "peers", "want"),
    [
        pytest.param({}, (), None, id="nothing asked"),
        pytest.param(
            {"pod_anti_affinity": (HOSTNAME_TERM({"app": "db"}),)},
            (PeerPod(namespace="ns", labels={"app": "db"}),),
            _feasible.POD_ANTI_AFFINITY,
            id="anti-affinity to a pod there",
        ),
        pytest.param(
            {"pod_anti_affinity": (HOSTNAME_TERM({"app": "db"}),)},
            (PeerPod(namespace="other", labels={"app": "db"}),),
            None,
            id="anti-affinity: another namespace",
        ),
        pytest.param(
            {"labels": {"app": "web"}},
            (PeerPod(namespace="ns", anti_affinity=(HOSTNAME_TERM({"app": "web"}),)),),
            _feasible.EXISTING_ANTI_AFFINITY,
            id="an existing pod's anti-affinity",
        ),
        pytest.param(
            {"pod_affinity": (HOSTNAME_TERM({"app": "db"}),)},
            (),
            _feasible.POD_AFFINITY,
            id="affinity: nothing to be near",
        ),
        pytest.param(
            {"labels": {"app": "db"}, "pod_affinity": (HOSTNAME_TERM({"app": "db"}),)},
            (),
            None,
            id="affinity: the first pod of a series",
        ),
        pytest.param(
            {"pod_affinity": (PodAffinityTerm(match_labels={"app": "db"}, topology_key="zone"),)},
            (PeerPod(namespace="ns", labels={"app": "db"}),),
            _feasible.POD_AFFINITY,
            id="affinity: the node lacks the topology key",
        ),
    ],
)
def test_inter_pod_affinity(
    pod_kw: dict[str, Any], peers: tuple[PeerPod, ...], want: str | None
) -> None:
    """kube-scheduler interpodaffinity/filtering.go, required terms (run by Slinky's
    scheduler profile; eligibility_test.go's anti-affinity and affinity rows)."""
    node = knode("n")
    usage = KubeNodeUsage(source="k8s", key="n", pods=len(peers), peers=peers)
    p = member(0, **pod_kw)
    assert _feasible.pod_affinity_fits(p, node, [(node, usage)]) == want


# --- item 2: gangs never deadlock --------------------------------------------------------------

RUNNING_GANG = SlurmJob(
    source=SRC,
    key="42",
    cluster="c1",
    job_id=42,
    state=("RUNNING",),
    nodes=("node18",),
    comment=_pods.marker(_pods.Group(namespace="ns", kind="Job", name="gang"), "uid-gang"),
)


def prior(
    job_id: int = 1, state: str = "COMPLETED", pods: tuple[str, ...] = ("ns/previous",)
) -> SlurmJob:
    comment = msgspec.json.encode({"pods": list(pods)}).decode() if pods else ""
    return SlurmJob(
        source=SRC,
        key=str(job_id),
        cluster="c1",
        job_id=job_id,
        state=(state,),
        admin_comment=comment,
    )


def occupant(name: str = "previous", job: str = "1", **kw: Any) -> KubePod:
    return ns_pod(
        name,
        scheduler_name=kw.pop("scheduler", SCHED),
        labels={JOBID: job},
        node_name="node18",
        phase=kw.pop("phase", "Running"),
        cpu_millis=kw.pop("cpu", 1000),
        **kw,
    )


@dataclass
class Handoff:
    """One row of Slinky's TestPostFilterAllocatedGangHandoff, in our words."""

    name: str
    jobs: tuple[SlurmJob, ...] = (prior(),)
    occupants: tuple[KubePod, ...] = (occupant(),)
    node: dict[str, Any] = field(default_factory=dict)
    pending: dict[str, Any] = field(default_factory=dict)
    #: The occupants the node's usage counts (None: all that are not terminal).
    counted: tuple[KubePod, ...] | None = None
    waits: bool = False


HANDOFF = [
    Handoff("the previous job completed: wait for its pod to leave", waits=True),
    Handoff(
        "ten completed jobs, one pod each",
        jobs=tuple(prior(i, pods=(f"ns/previous{i}",)) for i in range(1, 11)),
        occupants=tuple(occupant(f"previous{i}", str(i), cpu=100) for i in range(1, 11)),
        waits=True,
    ),
    Handoff("a live allocation is a misfit", jobs=(prior(state="RUNNING"),)),
    Handoff("a pending allocation is a misfit", jobs=(prior(state="PENDING"),)),
    Handoff("an unknown job state is a misfit", jobs=(prior(state="UNKNOWN"),)),
    Handoff("a missing job is a misfit", jobs=()),
    Handoff("a job naming no pod is a misfit", jobs=(prior(pods=()),)),
    Handoff(
        "the same pod name in another namespace is a misfit",
        jobs=(prior(pods=("other/previous",)),),
    ),
    Handoff(
        "an ended job that is not the occupant's is a misfit",
        occupants=(occupant(job="2"),),
    ),
    Handoff("a cancelled allocation is released", jobs=(prior(state="CANCELLED"),), waits=True),
    Handoff(
        "a terminating pod is released, even under a live job",
        jobs=(prior(state="RUNNING"),),
        occupants=(occupant(deletion_timestamp=1000),),
        waits=True,
    ),
    Handoff(
        "usage by a pod that is not ours is a misfit",
        occupants=(occupant(scheduler="default-scheduler"),),
    ),
    Handoff("the gang's own allocation is no handoff", occupants=(occupant(job="42"),)),
    Handoff("a resource failure never hides a taint", node={"taints": (TAINT,)}),
    Handoff(
        "a resource failure never hides a host port",
        occupants=(occupant(host_ports=(PORT,)),),
        pending={"host_ports": (PORT,)},
    ),
]


def _handoff_world(case: Handoff) -> list[Event]:
    node = KubeNode(
        source="k8s",
        key="node18",
        ready=True,
        alloc_cpu_millis=1000,
        alloc_pods=110,
        taints=case.node.get("taints", ()),
    )
    counted = case.counted if case.counted is not None else case.occupants
    counted = tuple(o for o in counted if not o.terminal)
    usage = KubeNodeUsage(
        source="k8s",
        key="node18",
        cpu_millis=sum(o.cpu_millis for o in counted),
        pods=len(counted),
        host_ports=tuple(h for o in counted for h in o.host_ports),
    )
    pending = member(18, gpu=0, memory=0, **case.pending)
    pending = msgspec.structs.replace(
        pending,
        labels={**pending.labels, JOBID: "42"},
        finalizers=(wellknown.FINALIZER_SCHEDULER,),
        tolerations=(wellknown.TAINT_MANAGED_NODE,),
    )
    return [
        LISTED,
        gang_root(1),
        node,
        usage,
        SlurmNode(source=SRC, key="node18", cluster="c1", state=("ALLOCATED",), features=GRES_OK),
        RUNNING_GANG,
        *case.jobs,
        *case.occupants,
        pending,
    ]


@pytest.mark.parametrize("case", HANDOFF, ids=lambda c: c.name)
def test_a_gang_member_waits_only_for_a_handoff(case: Handoff) -> None:
    """eligibility_test.go TestPostFilterAllocatedGangHandoff: the member Slurm placed on a
    node still held waits (job kept, nothing bound there) only while the holder is our pod of
    an ended job naming it, or is terminating; otherwise the job is cancelled."""
    d = decide(*_handoff_world(case))
    cancels = [a for a in d.actions if isinstance(a, CancelSlurmJob)]
    binds = [a for a in d.actions if isinstance(a, BindPod)]
    assert binds == []
    if case.waits:
        assert cancels == [], d.reason
        assert d.requeue_after == placement.HANDOFF_RECHECK_S
        assert "released" in d.reason
    else:
        assert [c.job_id for c in cancels] == [42], d.reason


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_occupant_no_longer_holds_the_node(phase: str) -> None:
    """eligibility_test.go "succeeded/failed pod can release resources even with a live
    job": the node's usage no longer counts it, so the member is bound, nothing cancelled."""
    case = Handoff("finished", jobs=(prior(state="RUNNING"),), occupants=(occupant(phase=phase),))
    d = decide(*_handoff_world(case))
    assert [a.node for a in d.actions if isinstance(a, BindPod)] == ["node18"]
    assert not [a for a in d.actions if isinstance(a, CancelSlurmJob)]


def test_releasing_reads_the_jobs_pod_list_exactly() -> None:
    assert _handoff.job_pods(prior(pods=("ns/a", "ns/b"))) == {"ns/a", "ns/b"}
    assert _handoff.job_pods(prior(pods=())) == frozenset()
    broken = msgspec.structs.replace(prior(), admin_comment="{not json")
    assert _handoff.job_pods(broken) == frozenset()


def test_two_shared_gangs_never_wait_for_each_other() -> None:
    """eligibility_test.go TestPostFilterSharedGangsDoNotWaitForEachOther: gangs A (job 42)
    and B (job 43) both RUNNING on node0 and node1 (1.5 CPUs each), A's first member bound
    on node0 and B's second on node1; each unbound member finds its node held by the other
    live gang: both jobs are cancelled, so both gangs are submitted again."""
    nodes = [
        KubeNode(source="k8s", key=n, ready=True, alloc_cpu_millis=1500, alloc_pods=110)
        for n in ("node0", "node1")
    ]
    snodes = [
        SlurmNode(source=SRC, key=n, cluster="c1", state=("MIXED",), features=GRES_OK)
        for n in ("node0", "node1")
    ]

    def gang(name: str, job_id: int, bound: str) -> tuple[list[Event], str]:
        owner = OwnerRef(api_version="batch/v1", kind="Job", name=name, uid=f"uid-{name}")
        job = SlurmJob(
            source=SRC,
            key=str(job_id),
            cluster="c1",
            job_id=job_id,
            state=("RUNNING",),
            nodes=("node0", "node1"),
            comment=_pods.marker(_pods.Group(namespace="ns", kind="Job", name=name), f"uid-{name}"),
        )
        pods: list[Event] = [
            kube_pod(
                "ns",
                f"{name}-{i}",
                uid=f"u-{name}-{i}",
                scheduler_name=SCHED,
                labels={
                    _pods.LABEL_JOB_NAME: name,
                    _pods.LABEL_JOB_NAME_LEGACY: name,
                    JOBID: str(job_id),
                },
                finalizers=(wellknown.FINALIZER_SCHEDULER,),
                tolerations=(wellknown.TAINT_MANAGED_NODE,),
                owner=owner,
                cpu_millis=1000,
                node_name=bound if f"node{i}" == bound else "",
                phase="Running" if f"node{i}" == bound else "Pending",
            )
            for i in range(2)
        ]
        root = msgspec.structs.replace(
            gang_root(2), key=f"ns/Job:{name}", name=name, uid=f"uid-{name}"
        )
        return [root, job, *pods], f"ns/Job:{name}"

    a, key_a = gang("a", 42, "node0")
    b, key_b = gang("b", 43, "node1")
    usage = [
        KubeNodeUsage(
            source="k8s", key=n, cpu_millis=1000, pods=1, bridge_cpu_millis=1000, bridge_pods=1
        )
        for n in ("node0", "node1")
    ]
    world = [LISTED, *nodes, *snodes, *usage, *a, *b]
    for key, job_id in ((key_a, 42), (key_b, 43)):
        d = decide(*world, key=key)
        assert [c.job_id for c in d.actions if isinstance(c, CancelSlurmJob)] == [job_id], d.reason
