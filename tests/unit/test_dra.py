"""The DRA mapping (reconcilers._dra): Slurm's allocation on a node ⇒ the devices of a claim.

Table tests, one per rule of the module docstring (Slinky slurm-bridge internal/nodeinfo and
dra.go), then the pod-level rules (extended resources, claim requests, mappings).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from reconcilers import _dra
from schemas.actions import ExtendedResourceMapping
from schemas.events import (
    AllocatedDevice,
    ClaimRequest,
    DraRequest,
    GresAlloc,
    KubePod,
    KubeResourceClaim,
    KubeResourceSlice,
    NodeAlloc,
    PodClaim,
    SliceDevice,
)
from tests.unit._pods import kube_pod

NV = "gpu.nvidia.com"
EX = "gpu.example.com"
CPU = "dra.cpu"


def nvidia_slice(node: str = "k1", n: int = 4, pool: str = "k1") -> KubeResourceSlice:
    return KubeResourceSlice(
        source="k8s",
        key=f"{node}-nvidia",
        node=node,
        driver=NV,
        pool=pool,
        devices=tuple(SliceDevice(name=f"gpu-{i}", attributes={"index": i}) for i in range(n)),
    )


def example_slice(indices: tuple[int, ...] = (0, 1, 2, 3)) -> KubeResourceSlice:
    # The example driver names its devices freely; the index attribute counts.
    return KubeResourceSlice(
        source="k8s",
        key="k1-example",
        node="k1",
        driver=EX,
        pool="k1",
        devices=tuple(SliceDevice(name=f"dev{9 - i}", attributes={"index": i}) for i in indices),
    )


def cpu_slice(
    sockets: int = 2, cores: int = 2, threads: int = 2, ecores: int = 0
) -> KubeResourceSlice:
    """CPU ids numbered like Linux: first thread of every core, then the siblings."""
    devices = []
    per_thread = sockets * cores + ecores
    for t in range(threads):
        for s in range(sockets):
            for c in range(cores):
                cpu = t * per_thread + s * cores + c
                devices.append(
                    SliceDevice(
                        name=f"cpudev{cpu:03d}",
                        attributes={
                            "dra.cpu/cpuID": cpu,
                            "dra.cpu/coreID": c,
                            "dra.cpu/socketID": s,
                            "dra.cpu/coreType": 2,
                        },
                    )
                )
    for e in range(ecores):
        cpu = sockets * cores + e
        devices.append(
            SliceDevice(
                name=f"cpudev{cpu:03d}",
                attributes={
                    "dra.cpu/cpuID": cpu,
                    "dra.cpu/coreID": 100 + e,
                    "dra.cpu/socketID": 0,
                    "dra.cpu/coreType": 3,
                },
            )
        )
    return KubeResourceSlice(
        source="k8s", key="k1-cpu", node="k1", driver=CPU, pool="k1", devices=tuple(devices)
    )


def gpus(*indices: int, gtype: str = "") -> NodeAlloc:
    return NodeAlloc(
        node="s1", gres=(GresAlloc(name="gpu", type=gtype, count=len(indices), indices=indices),)
    )


def req(cls: str, count: int = 1, name: str = "r", mode: str = "ExactCount") -> ClaimRequest:
    return ClaimRequest(name=name, device_class=cls, count=count, mode=mode)


def names(devices: tuple[AllocatedDevice, ...]) -> list[str]:
    return [d.device for d in devices]


@dataclass(frozen=True)
class MapCase:
    name: str
    requests: tuple[ClaimRequest, ...]
    alloc: NodeAlloc | None
    slices: tuple[KubeResourceSlice, ...]
    want: list[str] | None = None
    error: str | None = None
    taken: frozenset[tuple[str, str, str]] = frozenset()


MAPPING = [
    MapCase(
        "nvidia: Slurm indices name gpu-<index>",
        (req(NV, 2),),
        gpus(1, 3),
        (nvidia_slice(),),
        want=["gpu-1", "gpu-3"],
    ),
    MapCase(
        "nvidia: the index is the name's number, not an attribute",
        (req(NV, 1),),
        gpus(2),
        (
            KubeResourceSlice(
                source="k8s",
                key="s",
                node="k1",
                driver=NV,
                pool="p",
                devices=(
                    SliceDevice(name="gpu-2", attributes={"index": 7}),
                    SliceDevice(name="gpu-x", attributes={"index": 2}),
                ),
            ),
        ),
        want=["gpu-2"],
    ),
    MapCase(
        "example driver: the index attribute, whatever the name",
        (req(EX, 2),),
        gpus(0, 2),
        (example_slice(),),
        want=["dev9", "dev7"],
    ),
    MapCase(
        "a request takes the first count indices",
        (req(NV, 1),),
        gpus(0, 1, 2),
        (nvidia_slice(),),
        want=["gpu-0"],
    ),
    MapCase(
        "indices held by another claim are skipped",
        (req(NV, 2),),
        gpus(0, 1, 2, 3),
        (nvidia_slice(),),
        want=["gpu-2", "gpu-3"],
        taken=frozenset({(NV, "k1", "gpu-0"), (NV, "k1", "gpu-1")}),
    ),
    MapCase(
        "typed entries of the class name win (Slinky's GRES type)",
        (req(NV, 1),),
        NodeAlloc(
            node="s1",
            gres=(
                GresAlloc(name="gpu", type="other", count=1, indices=(0,)),
                GresAlloc(name="gpu", type=NV, count=1, indices=(3,)),
            ),
        ),
        (nvidia_slice(),),
        want=["gpu-3"],
    ),
    MapCase(
        "an admin's type (gpu:nvidia) counts when no entry has the class name",
        (req(NV, 2),),
        gpus(0, 1, gtype="nvidia"),
        (nvidia_slice(),),
        want=["gpu-0", "gpu-1"],
    ),
    MapCase(
        "other GRES names are not GPUs",
        (req(NV, 1),),
        NodeAlloc(node="s1", gres=(GresAlloc(name="nic", count=1, indices=(0,)),)),
        (nvidia_slice(),),
        error="spec.devices.requests[0].exactly.count: 1 GPUs of class gpu.nvidia.com asked "
        "for, but the Slurm job holds 0 on node s1, 0 of them free",
    ),
    MapCase(
        "a slice of another driver does not count",
        (req(NV, 1),),
        gpus(0),
        (example_slice(),),
        error="GPU index 0 of the Slurm allocation on node s1 has no device of driver "
        "gpu.nvidia.com",
    ),
    MapCase(
        "a Slurm index the slice lacks",
        (req(NV, 1),),
        gpus(5),
        (nvidia_slice(),),
        error="spec.devices.requests[0]: GPU index 5 of the Slurm allocation",
    ),
    MapCase(
        "more asked than Slurm gave",
        (req(NV, 3),),
        gpus(0, 1),
        (nvidia_slice(),),
        error="3 GPUs of class gpu.nvidia.com asked for, but the Slurm job holds 2",
    ),
    MapCase(
        "two requests of one claim never share a device",
        (req(NV, 1, "a"), req(NV, 1, "b")),
        gpus(0, 1),
        (nvidia_slice(),),
        want=["gpu-0", "gpu-1"],
    ),
    MapCase(
        "an unsupported class",
        (req("fpga.example.com"),),
        gpus(0),
        (nvidia_slice(),),
        error="spec.devices.requests[0].exactly.deviceClassName: 'fpga.example.com' is not "
        "supported",
    ),
    MapCase(
        "a request without exactly",
        (ClaimRequest(name="r", device_class="", mode="", count=0),),
        gpus(0),
        (nvidia_slice(),),
        error="'no device class' is not supported",
    ),
    MapCase(
        "allocation mode All",
        (req(NV, 0, mode="All"),),
        gpus(0),
        (nvidia_slice(),),
        error="exactly.allocationMode: 'All': only ExactCount",
    ),
    MapCase(
        "no allocation reported for the node",
        (req(NV, 1),),
        None,
        (nvidia_slice(),),
        error="spec.devices.requests[0]: Slurm reported no allocation",
    ),
    # CPUs: 2 sockets × 2 cores × 2 threads; abstract core k = socket*2 + core; core (s, c)
    # has CPUs s*2+c and 4+s*2+c.
    MapCase(
        "dra.cpu: abstract cores give their hyperthreads, by CPU id",
        (req(CPU, 4),),
        NodeAlloc(node="s1", cores=(0, 3)),
        (cpu_slice(),),
        want=["cpudev000", "cpudev003", "cpudev004", "cpudev007"],
    ),
    MapCase(
        "dra.cpu: the first count CPUs of the job's cores",
        (req(CPU, 2),),
        NodeAlloc(node="s1", cores=(1, 2)),
        (cpu_slice(),),
        want=["cpudev001", "cpudev002"],
    ),
    MapCase(
        "dra.cpu: CPUs held by another claim are skipped",
        (req(CPU, 2),),
        NodeAlloc(node="s1", cores=(1, 2)),
        (cpu_slice(),),
        want=["cpudev005", "cpudev006"],
        taken=frozenset({(CPU, "k1", "cpudev001"), (CPU, "k1", "cpudev002")}),
    ),
    MapCase(
        "dra.cpu: efficiency cores are not Slurm cores",
        (req(CPU, 1),),
        NodeAlloc(node="s1", cores=(4,)),
        (cpu_slice(sockets=1, cores=4, threads=1, ecores=2),),
        error="core 4 of the Slurm allocation on node s1 has no CPU of driver dra.cpu in the "
        "node's ResourceSlices (4 cores)",
    ),
    MapCase(
        "dra.cpu: more CPUs asked than the cores hold",
        (req(CPU, 5),),
        NodeAlloc(node="s1", cores=(0, 1)),
        (cpu_slice(),),
        error="5 CPUs of class dra.cpu asked for, but the Slurm job holds 4",
    ),
    MapCase(
        "GPUs and CPUs in one claim",
        (req(NV, 1, "g"), req(CPU, 2, "c")),
        NodeAlloc(
            node="s1",
            gres=(GresAlloc(name="gpu", count=1, indices=(2,)),),
            cores=(0,),
        ),
        (nvidia_slice(), cpu_slice()),
        want=["gpu-2", "cpudev000", "cpudev004"],
    ),
]


@pytest.mark.parametrize("case", MAPPING, ids=lambda c: c.name)
def test_devices_for(case: MapCase) -> None:
    if case.error is not None:
        with pytest.raises(_dra.DraError) as info:
            _dra.devices_for(case.requests, case.alloc, case.slices, taken=case.taken)
        assert case.error in str(info.value), str(info.value)
        assert str(info.value).startswith(info.value.field)
        return
    got = _dra.devices_for(case.requests, case.alloc, case.slices, taken=case.taken)
    assert names(got) == case.want
    per_device = [r for r in case.requests for _ in range(r.count)]
    for d, want in zip(got, per_device, strict=True):
        assert d.request == want.name
        assert d.driver == want.device_class
        assert d.pool in ("k1", "p")


def test_devices_carry_the_slice_pool() -> None:
    got = _dra.devices_for((req(NV, 1),), gpus(0), (nvidia_slice(pool="k1-gpus"),))
    assert got == (AllocatedDevice(request="r", driver=NV, pool="k1-gpus", device="gpu-0"),)


def test_taken_on_counts_allocated_claims_on_the_node_only() -> None:
    def claim(key: str, node: str, allocated: bool = True) -> KubeResourceClaim:
        return KubeResourceClaim(
            source="k8s",
            key=key,
            allocated=allocated,
            node=node,
            results=(AllocatedDevice(request="r", driver=NV, pool="k1", device=key[-5:]),),
        )

    claims = [
        claim("ns/a-gpu-0", "k1"),
        claim("ns/b-gpu-1", "k2"),
        claim("ns/c-gpu-2", "k1", False),
    ]
    assert _dra.taken_on("k1", claims) == {(NV, "k1", "gpu-0")}
    assert _dra.taken_on("k1", claims, but="ns/a-gpu-0") == frozenset()


# --- pods ------------------------------------------------------------------------------------

GPU_RES = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"
CPU_RES = "deviceclass.resource.kubernetes.io/dra.cpu"


def pod(*requests: DraRequest, claims: tuple[PodClaim, ...] = ()) -> KubePod:
    return kube_pod("ns", "p", uid="u1", dra_requests=requests, claims=claims)


def dreq(container: str, resource: str, count: int) -> DraRequest:
    return DraRequest(
        container=container,
        resource=resource,
        device_class=resource.removeprefix("deviceclass.resource.kubernetes.io/"),
        count=count,
    )


@dataclass(frozen=True)
class PodCase:
    name: str
    pod: KubePod
    error: str | None = None


POD_RULES = [
    PodCase("one GPU class", pod(dreq("c", GPU_RES, 2))),
    PodCase("GPUs and CPUs", pod(dreq("c", GPU_RES, 1), dreq("c", CPU_RES, 2))),
    PodCase(
        "an unsupported class",
        pod(dreq("c", "deviceclass.resource.kubernetes.io/fpga", 1)),
        "spec.containers[c].resources[deviceclass.resource.kubernetes.io/fpga]: device class "
        "'fpga' is not supported",
    ),
    PodCase(
        "a GPU class in two containers",
        pod(dreq("a", GPU_RES, 1), dreq("b", GPU_RES, 1)),
        "requested by containers 'a' and 'b'",
    ),
    PodCase(
        "dra.cpu in two containers (Slinky allows it)",
        pod(dreq("a", CPU_RES, 1), dreq("b", CPU_RES, 1)),
    ),
    PodCase(
        "two GPU classes",
        pod(
            dreq("a", GPU_RES, 1),
            dreq("a", "deviceclass.resource.kubernetes.io/gpu.example.com", 1),
        ),
        "GPUs of several device classes (gpu.example.com, gpu.nvidia.com): one GPU class per pod",
    ),
]


@pytest.mark.parametrize("case", POD_RULES, ids=lambda c: c.name)
def test_check_extended(case: PodCase) -> None:
    if case.error is None:
        _dra.check_extended(case.pod)
        return
    with pytest.raises(_dra.DraError) as info:
        _dra.check_extended(case.pod)
    assert case.error in str(info.value)


def test_extended_claim_requests_and_mappings_follow_slinky() -> None:
    p = pod(dreq("init", CPU_RES, 1), dreq("main", CPU_RES, 2), dreq("main", GPU_RES, 2))
    requests, mappings = _dra.extended_claim(p)
    # One ExactCount request per class: "cpu" for dra.cpu, the GRES name "gpu" for GPUs.
    assert requests == (
        ClaimRequest(name="cpu", device_class="dra.cpu", count=3),
        ClaimRequest(name="gpu", device_class="gpu.nvidia.com", count=2),
    )
    assert mappings == (
        ExtendedResourceMapping(container="init", request="cpu", resource=CPU_RES),
        ExtendedResourceMapping(container="main", request="cpu", resource=CPU_RES),
        ExtendedResourceMapping(container="main", request="gpu", resource=GPU_RES),
    )


def test_zero_counts_ask_for_nothing() -> None:
    p = pod(dreq("c", GPU_RES, 0))
    assert not _dra.needs_dra(p)
    assert _dra.extended_claim(p) == ((), ())


def test_gpus_and_cpus_asked() -> None:
    claim = KubeResourceClaim(source="k8s", key="ns/c", requests=(req(NV, 2), req(CPU, 4, "cpu")))
    p = pod(dreq("c", GPU_RES, 1), dreq("c", CPU_RES, 3), claims=(PodClaim(name="x"),))
    assert _dra.needs_dra(p)
    assert _dra.gpus_asked(p) == 1
    assert _dra.gpus_asked(p, [claim]) == 3
    assert _dra.cpus_asked(p) == 3
    assert _dra.needs_dra(pod(claims=(PodClaim(name="x", template_name="t"),)))
