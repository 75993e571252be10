"""DRA in the reconcilers: placement allocates claims before binding, the job asks Slurm for
the GPUs, workload releases the claims of finished pods, node_register reads GPUs from
ResourceSlices. Table cases in the style of test_placement.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest

from reconcilers import _pods, node_register, placement, workload
from reconcilers.base import Context, Decision
from schemas import wellknown
from schemas.actions import (
    AllocateResourceClaim,
    BindPod,
    CreateExtendedResourceClaim,
    ExtendedResourceMapping,
    ReleaseResourceClaim,
    RemovePodFinalizer,
    SetPodCondition,
    SubmitSlurmJob,
)
from schemas.events import (
    AllocatedDevice,
    ClaimConsumer,
    ClaimRequest,
    DraRequest,
    Event,
    GresAlloc,
    KubeNode,
    KubePod,
    KubeResourceClaim,
    KubeResourceSlice,
    NodeAlloc,
    OwnerRef,
    PodClaim,
    PodCondition,
    SliceDevice,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
)
from slurmbridge.runtime.projection import Projection
from tests.unit._decisions import of
from tests.unit._listing import listed
from tests.unit._pods import kube_workload, ns_pod

SCHED = "slurm-bridge-scheduler"
CTX = Context(scheduler_name=SCHED, cluster="c1", now=1000.0)
NV = "gpu.nvidia.com"
GPU_RES = f"deviceclass.resource.kubernetes.io/{NV}"
CPU_RES = "deviceclass.resource.kubernetes.io/dra.cpu"
JOBID = wellknown.LABEL_SLURM_JOBID
FIN = wellknown.FINALIZER_SCHEDULER
TOL = wellknown.TAINT_MANAGED_NODE
MIB = 1024 * 1024


def pod(
    name: str = "a",
    *,
    gpus: int = 0,
    cpus: int = 0,
    claims: tuple[PodClaim, ...] = (),
    extended_claim: str = "",
    job: int | None = 7,
    node: str = "",
    phase: str = "Pending",
    annotations: dict[str, str] | None = None,
) -> KubePod:
    requests = []
    if gpus:
        requests.append(DraRequest(container="main", resource=GPU_RES, device_class=NV, count=gpus))
    if cpus:
        requests.append(
            DraRequest(container="main", resource=CPU_RES, device_class="dra.cpu", count=cpus)
        )
    labels = {JOBID: str(job)} if job is not None else {}
    return ns_pod(
        name,
        scheduler_name=SCHED,
        labels=labels,
        annotations=annotations or {},
        finalizers=(FIN,) if job is not None else (),
        tolerations=(TOL,) if job is not None else (),
        phase=phase,
        node_name=node,
        cpu_millis=1000,
        memory_bytes=256 * MIB,
        dra_requests=tuple(requests),
        claims=claims,
        extended_claim=extended_claim,
    )


def gpu_slice(node: str = "k1", n: int = 4, **attributes: str) -> KubeResourceSlice:
    """The NVIDIA driver's slice of ``node``: GPUs ``gpu-0`` … with attribute ``index`` (and
    ``attributes``)."""
    return KubeResourceSlice(
        source="k8s",
        key=f"{node}-gpus",
        node=node,
        driver=NV,
        pool=node,
        devices=tuple(
            SliceDevice(name=f"gpu-{i}", attributes={"index": i, **attributes}) for i in range(n)
        ),
    )


def running_job(*indices: int, nodes: tuple[str, ...] = ("k1",), job_id: int = 7) -> SlurmJob:
    return SlurmJob(
        source="slurm:c1",
        key=str(job_id),
        cluster="c1",
        job_id=job_id,
        state=("RUNNING",),
        nodes=nodes,
        allocation=tuple(
            NodeAlloc(
                node=n,
                gres=(GresAlloc(name="gpu", count=len(indices), indices=indices),),
                cores=(0,),
            )
            for n in nodes
        ),
    )


def claim(
    name: str = "a-gpu-x1",
    *,
    owner: str = "a",
    count: int = 2,
    allocated: tuple[str, ...] = (),
    node: str = "k1",
    reserved: tuple[str, ...] = (),
    extended: bool = False,
) -> KubeResourceClaim:
    return KubeResourceClaim(
        source="k8s",
        key=f"ns/{name}",
        namespace="ns",
        name=name,
        uid=f"cu-{name}",
        owner=OwnerRef(api_version="v1", kind="Pod", name=owner, uid=f"u-{owner}"),
        extended=extended,
        requests=(ClaimRequest(name="gpu" if extended else "gpus", device_class=NV, count=count),),
        allocated=bool(allocated),
        results=tuple(
            AllocatedDevice(request="gpu" if extended else "gpus", driver=NV, pool="k1", device=d)
            for d in allocated
        ),
        node=node if allocated else "",
        reserved_for=tuple(ClaimConsumer(resource="pods", name=p, uid=f"u-{p}") for p in reserved),
    )


def store(*objs: Event) -> Projection:
    """``objs`` in a complete Slurm listing (tests.unit._listing)."""
    p = Projection()
    for i, o in enumerate(listed(objs), 1):
        p.apply(o, i)
    return p


BASE: tuple[Event, ...] = (
    KubeNode(source="k8s", key="k1", ready=True),
    KubeNode(source="k8s", key="k2", ready=True),
    SlurmNode(source="slurm:c1", key="k1", cluster="c1", state=("MIXED",)),
    SlurmNode(source="slurm:c1", key="k2", cluster="c1", state=("MIXED",)),
    SlurmPartition(source="slurm:c1", key="batch", cluster="c1", nodes=("k1", "k2")),
    gpu_slice("k1"),
    gpu_slice("k2"),
)


def place(key: str, *objs: Event) -> Decision:
    # The running job is the decided group's (its marker): a job is a group's only then.
    group = _pods.parse_group_key(key)
    assert group is not None
    mark = _pods.marker(group, "u-a" if group.kind == "Pod" else f"uid-{group.name}")
    objs = tuple(
        msgspec.structs.replace(o, comment=mark) if isinstance(o, SlurmJob) and not o.comment else o
        for o in objs
    )
    return placement.decide(placement.view(store(*BASE, *objs), key, CTX))


def kinds(d: Decision) -> list[str]:
    return [type(a).__name__ for a in d.actions if type(a).__name__ != "RecordEvent"]


def devices(*names: str, request: str = "gpus") -> tuple[AllocatedDevice, ...]:
    return tuple(AllocatedDevice(request=request, driver=NV, pool="k1", device=n) for n in names)


TEMPLATE_CLAIM = (PodClaim(name="gpu", template_name="two", generated="a-gpu-x1"),)


@dataclass(frozen=True)
class BindCase:
    name: str
    objs: tuple[Event, ...]
    kinds: list[str]
    check: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


BIND = [
    BindCase(
        "extended resources: the claim is made from Slurm's GPUs, then the pod is bound",
        (pod(gpus=2), running_job(1, 2)),
        ["CreateExtendedResourceClaim", "BindPod"],
        {"extended": devices("gpu-1", "gpu-2", request="gpu")},
    ),
    BindCase(
        "a template's claim not made yet: no bind",
        (pod(claims=(PodClaim(name="gpu", template_name="two"),)), running_job(0, 1)),
        [],
        reason="waiting for the claim made from its template",
    ),
    BindCase(
        "a claim not observed yet: no bind",
        (pod(claims=TEMPLATE_CLAIM), running_job(0, 1)),
        [],
        reason="waiting for ResourceClaim a-gpu-x1",
    ),
    BindCase(
        "an unallocated claim is allocated to Slurm's GPUs before the bind",
        (pod(claims=TEMPLATE_CLAIM), claim(), running_job(2, 3)),
        ["AllocateResourceClaim", "BindPod"],
        {"allocate": devices("gpu-2", "gpu-3")},
    ),
    BindCase(
        "an allocated and reserved claim: only the bind",
        (
            pod(claims=TEMPLATE_CLAIM),
            claim(allocated=("gpu-2", "gpu-3"), reserved=("a",)),
            running_job(2, 3),
        ),
        ["BindPod"],
    ),
    BindCase(
        "a shared claim allocated on the node: reserved for the pod with its devices",
        (
            pod(claims=(PodClaim(name="gpu", resource_claim_name="shared"),)),
            claim("shared", owner="x", allocated=("gpu-0",), reserved=("x",)),
            running_job(0, 1),
        ),
        ["AllocateResourceClaim", "BindPod"],
        {"allocate": devices("gpu-0")},
    ),
    BindCase(
        "a claim allocated on another node: reported, no bind",
        (
            pod(claims=TEMPLATE_CLAIM),
            claim(allocated=("gpu-0",), node="k2"),
            running_job(0, 1),
        ),
        ["SetPodCondition"],
        {
            "message": "ResourceClaim a-gpu-x1 is allocated on node k2, but Slurm runs the pod's "
            "job on k1"
        },
    ),
    BindCase(
        "GPUs held by another pod's claim on the node are not given again",
        (
            pod(claims=TEMPLATE_CLAIM),
            claim(),
            claim("other", owner="z", allocated=("gpu-0",), reserved=("z",)),
            running_job(0, 1, 2),
        ),
        ["AllocateResourceClaim", "BindPod"],
        {"allocate": devices("gpu-1", "gpu-2")},
    ),
    BindCase(
        "Slurm's GPUs without devices on the node: reported, no bind",
        (pod(gpus=1), running_job(7)),
        ["SetPodCondition"],
        {
            "message": "cannot allocate DRA devices: extended resources[0]: GPU index 7 of the "
            "Slurm allocation on node k1 has no device of driver gpu.nvidia.com"
        },
    ),
    BindCase(
        "a pod without DRA is bound as before",
        (pod(), running_job(0)),
        ["BindPod"],
    ),
]


@pytest.mark.parametrize("case", BIND, ids=lambda c: c.name)
def test_bind_with_claims(case: BindCase) -> None:
    d = place("ns/Pod:a", *case.objs)
    assert kinds(d) == case.kinds, d
    if "extended" in case.check:
        (act,) = of(d, CreateExtendedResourceClaim)
        assert act.devices == case.check["extended"]
        assert act.node == "k1"
        assert act.requests == (ClaimRequest(name="gpu", device_class=NV, count=2),)
        assert act.mappings == (
            ExtendedResourceMapping(container="main", request="gpu", resource=GPU_RES),
        )
    if "allocate" in case.check:
        (act,) = of(d, AllocateResourceClaim)
        assert act.devices == case.check["allocate"]
        assert (act.node, act.pod.uid) == ("k1", "u-a")
    if "message" in case.check:
        (cond,) = of(d, SetPodCondition)
        assert (cond.status, cond.reason) == ("False", placement.DEVICES_FAILED)
        assert cond.message.endswith(case.check["message"]) or case.check["message"] in cond.message
        assert not of(d, BindPod)
    if case.reason:
        assert case.reason in d.reason


def test_a_reported_problem_is_not_reported_again() -> None:
    first = place("ns/Pod:a", pod(gpus=1), running_job(7))
    (cond,) = of(first, SetPodCondition)
    again = pod(gpus=1)
    again = msgspec.structs.replace(
        again,
        conditions=(
            PodCondition(
                type="PodScheduled", status="False", reason=cond.reason, message=cond.message
            ),
        ),
    )
    assert place("ns/Pod:a", again, running_job(7)).actions == ()


def test_two_pods_of_a_job_on_one_node_split_its_gpus() -> None:
    owner = OwnerRef(api_version="batch/v1", kind="Job", name="train", uid="uid-train")
    labels = {_pods.LABEL_JOB_NAME: "train", JOBID: "7"}
    pods = [
        msgspec.structs.replace(pod(n, gpus=2), owner=owner, labels=labels) for n in ("p0", "p1")
    ]
    wl = kube_workload("ns", "Job", "train", size=2)
    d = place("ns/Job:train", *pods, wl, running_job(0, 1, 2, 3))
    assert kinds(d) == [
        "CreateExtendedResourceClaim",
        "BindPod",
        "CreateExtendedResourceClaim",
        "BindPod",
    ]
    made = of(d, CreateExtendedResourceClaim)
    assert [a.devices for a in made] == [
        devices("gpu-0", "gpu-1", request="gpu"),
        devices("gpu-2", "gpu-3", request="gpu"),
    ]


# --- the job asks Slurm for the GPUs ---------------------------------------------------------


def submitted(*objs: Event) -> SubmitSlurmJob | Decision:
    d = place("ns/Pod:a", *objs)
    subs = of(d, SubmitSlurmJob)
    return subs[0] if subs else d


def test_the_job_asks_for_the_dra_gpus_untyped() -> None:
    sub = submitted(pod(gpus=2, job=None))
    assert isinstance(sub, SubmitSlurmJob)
    assert sub.spec.tres_per_node == "gres/gpu=2"


def test_the_job_asks_for_the_gpus_of_the_pods_claims() -> None:
    sub = submitted(pod(claims=TEMPLATE_CLAIM, job=None), claim(count=3))
    assert isinstance(sub, SubmitSlurmJob)
    assert sub.spec.tres_per_node == "gres/gpu=3"


def test_the_job_waits_for_the_claims_that_size_it() -> None:
    d = submitted(pod(claims=(PodClaim(name="gpu", template_name="two"),), job=None))
    assert isinstance(d, Decision) and "waiting for ResourceClaim gpu of pod a" in d.reason


def test_dra_cpu_is_the_cpu_count() -> None:
    sub = submitted(pod(cpus=6, job=None))
    assert isinstance(sub, SubmitSlurmJob)
    assert sub.spec.cpus_per_task == 6


@pytest.mark.parametrize(
    ("annotations", "dra", "field_", "reason"),
    [
        ({_pods.PREFIX + "gres": "gpu:1"}, {"gpus": 1}, "gres", "conflicts with the pods' DRA GPU"),
        (
            {_pods.PREFIX + "cpu-per-task": "2"},
            {"cpus": 2},
            "cpu-per-task",
            "conflicts with the pods' deviceclass.resource.kubernetes.io/dra.cpu",
        ),
    ],
)
def test_annotations_that_contradict_dra_requests_are_refused(
    annotations: dict[str, str], dra: dict[str, int], field_: str, reason: str
) -> None:
    d = place("ns/Pod:a", pod(job=None, annotations=annotations, **dra))
    (cond,) = of(d, SetPodCondition)
    assert cond.reason == placement.INVALID
    assert f"metadata.annotations[{_pods.PREFIX}{field_}]: {reason}" in cond.message


def test_two_gpu_classes_in_a_pod_are_refused() -> None:
    p = pod(job=None)
    p = msgspec.structs.replace(
        p,
        dra_requests=(
            DraRequest(container="c", resource=GPU_RES, device_class=NV, count=1),
            DraRequest(
                container="c",
                resource="deviceclass.resource.kubernetes.io/gpu.example.com",
                device_class="gpu.example.com",
                count=1,
            ),
        ),
    )
    (cond,) = of(place("ns/Pod:a", p), SetPodCondition)
    assert "pod a: spec.containers[*].resources: GPUs of several device classes" in cond.message


# --- workload: claims of finished pods are released -------------------------------------------


def test_a_finished_groups_claims_are_released_before_its_finalizers() -> None:
    done = pod(claims=TEMPLATE_CLAIM, extended_claim="a-ext", phase="Succeeded", node="k1")
    objs = (
        done,
        claim(allocated=("gpu-0",), reserved=("a",)),
        claim("a-ext", extended=True, allocated=("gpu-1",), reserved=("a",)),
        running_job(0, 1),
    )
    d = workload.decide(workload.view(store(*BASE, *objs), "ns/Pod:a", CTX))
    names = [type(a).__name__ for a in d.actions]
    releases = of(d, ReleaseResourceClaim)
    assert sorted((r.claim.name, r.delete) for r in releases) == [
        ("a-ext", True),
        ("a-gpu-x1", False),
    ]
    assert all(r.pod.uid == "u-a" for r in releases)
    assert names.index("ReleaseResourceClaim") < names.index("RemovePodFinalizer")
    assert of(d, RemovePodFinalizer)


def test_a_claim_not_reserved_for_the_pod_is_left_alone() -> None:
    done = pod(claims=(PodClaim(name="g", resource_claim_name="shared"),), phase="Failed")
    objs = (done, claim("shared", owner="x", allocated=("gpu-0",), reserved=("x",)))
    d = workload.decide(workload.view(store(*BASE, *objs), "ns/Pod:a", CTX))
    assert not of(d, ReleaseResourceClaim)


def test_a_running_pods_claims_stay() -> None:
    running = pod(claims=TEMPLATE_CLAIM, phase="Running", node="k1")
    objs = (running, claim(allocated=("gpu-0",), reserved=("a",)), running_job(0))
    d = workload.decide(workload.view(store(*BASE, *objs), "ns/Pod:a", CTX))
    assert not of(d, ReleaseResourceClaim)


# --- workload: a pod that ends gives its claims back while its group runs (rule 8) ----------

TRAIN = OwnerRef(api_version="batch/v1", kind="Job", name="train", uid="uid-train")
TRAIN_WL = kube_workload("ns", "Job", "train", size=2)


def train_pod(name: str, phase: str = "Running", **kw: Any) -> KubePod:
    """A pod of Job ``train`` (job 7), bound to k1."""
    p = pod(name, phase=phase, node="k1", **kw)
    labels = {**p.labels, _pods.LABEL_JOB_NAME: "train"}
    return msgspec.structs.replace(p, owner=TRAIN, labels=labels)


def deleting(p: KubePod, *, node: str | None = None) -> KubePod:
    return msgspec.structs.replace(
        p, deletion_timestamp=990, node_name=p.node_name if node is None else node
    )


def ext_claim(owner: str, *devs: str, deleting_: bool = False) -> KubeResourceClaim:
    c = claim(f"{owner}-ext", owner=owner, extended=True, allocated=devs, reserved=(owner,))
    return msgspec.structs.replace(c, deleting=deleting_)


def p_claim(name: str) -> tuple[PodClaim, ...]:
    return (PodClaim(name="gpu", template_name="two", generated=name),)


SHARED = (PodClaim(name="g", resource_claim_name="shared"),)


@dataclass(frozen=True)
class ReleaseCase:
    name: str
    objs: tuple[Event, ...]
    #: (claim name, delete, pod name) of each ReleaseResourceClaim, sorted.
    releases: list[tuple[str, bool, str]]
    #: The group finished: finalizers go too.
    finished: bool = False


RELEASE_CASES = [
    ReleaseCase(
        "a Succeeded pod's template claim is released while the other pod runs",
        (
            train_pod("p0", "Succeeded", claims=p_claim("p0-gpu")),
            train_pod("p1", claims=p_claim("p1-gpu")),
            claim("p0-gpu", owner="p0", allocated=("gpu-0",), reserved=("p0",)),
            claim("p1-gpu", owner="p1", allocated=("gpu-1",), reserved=("p1",)),
        ),
        [("p0-gpu", False, "p0")],
    ),
    ReleaseCase(
        "a Failed pod's extended-resource claim (ours) is deleted; the running pod's stays",
        (
            train_pod("p0", "Failed", extended_claim="p0-ext"),
            train_pod("p1", extended_claim="p1-ext"),
            ext_claim("p0", "gpu-0"),
            ext_claim("p1", "gpu-1"),
        ),
        [("p0-ext", True, "p0")],
    ),
    ReleaseCase(
        "a claim shared with a running pod: only the ended pod's reservation goes",
        (
            train_pod("p0", "Succeeded", claims=SHARED),
            train_pod("p1", claims=SHARED),
            claim("shared", owner="x", allocated=("gpu-0",), reserved=("p0", "p1")),
        ),
        [("shared", False, "p0")],
    ),
    ReleaseCase(
        "a pod deleted before it was ever bound gives back the claim allocated for it",
        (
            deleting(train_pod("p0", "Pending", claims=p_claim("p0-gpu")), node=""),
            train_pod("p1", claims=p_claim("p1-gpu")),
            claim("p0-gpu", owner="p0", allocated=("gpu-0",), reserved=("p0",)),
            claim("p1-gpu", owner="p1", allocated=("gpu-1",), reserved=("p1",)),
        ),
        [("p0-gpu", False, "p0")],
    ),
    ReleaseCase(
        "a bound pod being deleted but still stopping on its node keeps its claim",
        (
            deleting(train_pod("p0", claims=p_claim("p0-gpu"))),
            train_pod("p1", claims=p_claim("p1-gpu")),
            claim("p0-gpu", owner="p0", allocated=("gpu-0",), reserved=("p0",)),
        ),
        [],
    ),
    ReleaseCase(
        "already released: nothing more",
        (
            train_pod("p0", "Succeeded", claims=p_claim("p0-gpu")),
            train_pod("p1"),
            claim("p0-gpu", owner="p0"),
        ),
        [],
    ),
    ReleaseCase(
        "our claim already being deleted: not deleted again",
        (
            train_pod("p0", "Succeeded", extended_claim="p0-ext"),
            train_pod("p1"),
            ext_claim("p0", "gpu-0", deleting_=True),
        ),
        [],
    ),
    ReleaseCase(
        "both pods ended: both claims go, and the finalizers after them",
        (
            train_pod("p0", "Succeeded", claims=p_claim("p0-gpu")),
            train_pod("p1", "Succeeded", extended_claim="p1-ext"),
            claim("p0-gpu", owner="p0", allocated=("gpu-0",), reserved=("p0",)),
            ext_claim("p1", "gpu-1"),
        ),
        [("p0-gpu", False, "p0"), ("p1-ext", True, "p1")],
        finished=True,
    ),
]


@pytest.mark.parametrize("case", RELEASE_CASES, ids=[c.name for c in RELEASE_CASES])
def test_a_pod_that_ends_releases_its_claims(case: ReleaseCase) -> None:
    objs = (*BASE, TRAIN_WL, running_job(0, 1), *case.objs)
    d = workload.decide(workload.view(store(*objs), "ns/Job:train", CTX))
    got = sorted((a.claim.name, a.delete, a.pod.name) for a in of(d, ReleaseResourceClaim))
    assert got == case.releases, d.reason
    for a in of(d, ReleaseResourceClaim):
        assert a.claim.uid == f"cu-{a.claim.name}" and a.pod.uid == f"u-{a.pod.name}"
    names = [type(a).__name__ for a in d.actions]
    if case.finished:
        assert names.index("ReleaseResourceClaim") < names.index("RemovePodFinalizer")
    else:
        # The group runs on: its job stays and no finalizer goes.
        assert not of(d, RemovePodFinalizer)
        assert "CancelSlurmJob" not in names and "DeletePod" not in names
    if case.releases and not case.finished:
        assert "releasing the ResourceClaims of 1 ended pod(s)" in d.reason


# --- node_register: GPUs from ResourceSlices -------------------------------------------------


def ext_node(gpus: int = 0) -> KubeNode:
    return KubeNode(
        source="k8s",
        key="k1",
        labels={wellknown.LABEL_EXTERNAL_NODE: "true"},
        ready=True,
        cpu_millis=8000,
        memory_bytes=4096 * MIB,
        gpus=gpus,
    )


def typed_gpu_slice(node: str = "k1", n: int = 4) -> KubeResourceSlice:
    """The NVIDIA driver's slice as it publishes it: each whole GPU with ``type: gpu``."""
    return gpu_slice(node, n, type="gpu")


def _files(driver: str, pool: str, typ: str, *names: str) -> str:
    return "+".join(f"count=1,name=gpu,type={typ},file=/dra/{driver}/{pool}/{n}" for n in names)


@pytest.mark.parametrize(
    ("slices", "capacity", "gres", "conf"),
    [
        ((), 0, "", ""),
        ((), 2, "gpu:2", ""),
        # Device profiles (Slinky 1.3 internal/dra): the GRES type is the profile's name and
        # GresConf one record per device, joined by "+".
        (
            (typed_gpu_slice("k1", 4),),
            0,
            "gpu:gpu-nvidia:4",
            _files(NV, "k1", "gpu-nvidia", "gpu-0", "gpu-1", "gpu-2", "gpu-3"),
        ),
        # The slices win over the device plugin's capacity (Slinky reads only the slices).
        (
            (typed_gpu_slice("k1", 2),),
            8,
            "gpu:gpu-nvidia:2",
            _files(NV, "k1", "gpu-nvidia", "gpu-0"),
        ),
        # NVIDIA devices that are not whole GPUs (no type "gpu") are not the profile's.
        ((gpu_slice("k1", 2),), 3, "gpu:3", ""),
        (
            (
                KubeResourceSlice(
                    source="k8s",
                    key="k1-example",
                    node="k1",
                    driver="gpu.example.com",
                    pool="k1",
                    devices=(
                        SliceDevice(name="b", attributes={"index": 1}),
                        SliceDevice(name="a", attributes={"index": 0}),
                    ),
                ),
            ),
            0,
            "gpu:gpu-example:2",
            _files("gpu.example.com", "k1", "gpu-example", "a", "b"),
        ),
        (
            (
                KubeResourceSlice(
                    source="k8s",
                    key="k1-cpu",
                    node="k1",
                    driver="dra.cpu",
                    pool="k1",
                    devices=(SliceDevice(name="cpu0", attributes={"dra.cpu/cpuID": 0}),),
                ),
            ),
            0,
            "",
            "",
        ),
    ],
    ids=[
        "none",
        "capacity",
        "nvidia slice",
        "slice over capacity",
        "untyped nvidia devices",
        "example name order",
        "cpu only",
    ],
)
def test_external_node_gres_from_slices(
    slices: tuple[KubeResourceSlice, ...], capacity: int, gres: str, conf: str
) -> None:
    d = node_register.desired(ext_node(capacity), slices)
    assert d.gres == gres
    assert d.gres_conf.startswith(conf) if conf else d.gres_conf == ""
    line = node_register.node_conf(d)
    assert (f"Gres={gres}" in line) == bool(gres)
    assert ("GresConf=" in line) == bool(conf)


def test_node_register_reads_the_nodes_slices() -> None:
    objs = (
        ext_node(),
        gpu_slice("k1", 2),
        gpu_slice("k2", 4),
        SlurmPartition(source="slurm:c1", key="batch", cluster="c1"),
    )
    v = node_register.view(store(*objs), "k1", CTX)
    assert [s.key for s in v.slices] == ["k1-gpus"]
