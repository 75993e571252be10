"""DRA by device profile, not class name (issue 28, item 6): table cases in our own words from
Slinky slurm-bridge 1.3's tests, each citing the Go test it follows.

* ``internal/dra/registry_test.go`` / ``registry.go`` ``MatchDeviceClass``: a DeviceClass is
  matched by its one CEL selector, byte for byte, to a built-in profile;
* ``internal/dra/inventory_test.go`` ``TestBuildNodeInventory``: the node inventory;
* ``internal/dra/gres_test.go``: ``Gres``/``GresConf`` and the applied inventory in ``extra``;
* ``internal/scheduler/plugins/slurmbridge/deviceprofile_test.go``: Slurm's GRES indices of a
  profile type back to devices, any class name;
* ``internal/utils/slurmconstraint/slurmconstraint_test.go`` ``TestCompose``;
* ``internal/controller/node/slurmcontrol/slurmcontrol.go`` ``validateHybridNodeGRES`` and
  ``node_condition.go``: the ``SlinkySlurmGRESCompatible`` condition.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import msgspec
import pytest

from reconcilers import _constraint, _devprofile, _dra, node_register
from reconcilers._devprofile import ProfileError
from schemas import wellknown
from schemas.actions import RecordEvent, SetNodeCondition, SetSlurmNodeExtra, SetSlurmNodeFeature
from schemas.events import (
    ClaimRequest,
    DraRequest,
    GresAlloc,
    KubeDeviceClass,
    KubeNode,
    KubePod,
    KubeResourceSlice,
    NodeAlloc,
    NodeCondition,
    SliceDevice,
    SlurmNode,
)
from tests.unit._pods import kube_pod

NVIDIA_SEL = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)
EXAMPLE_SEL = "device.driver == 'gpu.example.com'"
CPU_SEL = 'device.driver == "dra.cpu"'
RDMA_SEL = (
    "device.driver == 'dra.net' && has(device.attributes['dra.net'].pciAddress) && "
    "has(device.attributes['dra.net'].rdma) && device.attributes['dra.net'].rdma == true"
)


def dclass(
    name: str, *selectors: str | None, config: bool = False, deleted: bool = False
) -> KubeDeviceClass:
    return KubeDeviceClass(
        source="k8s",
        key=name,
        selectors=selectors,
        has_config=config,
        op="deleted" if deleted else "upsert",
    )


def rslice(
    node: str,
    driver: str,
    pool: str,
    *devices: str | SliceDevice,
    gen: int = 1,
    count: int = 1,
    key: str = "",
) -> KubeResourceSlice:
    devs = tuple(d if isinstance(d, SliceDevice) else SliceDevice(name=d) for d in devices)
    return KubeResourceSlice(
        source="k8s",
        key=key or f"{node}-{driver}-{pool}-{gen}-{len(devs)}-{devs[0].name if devs else ''}",
        node=node,
        driver=driver,
        pool=pool,
        pool_generation=gen,
        slice_count=count,
        devices=devs,
    )


def nv(name: str, kind: str = "gpu") -> SliceDevice:
    return SliceDevice(name=name, attributes={"type": kind})


# --- registry.go MatchDeviceClass (registry_test.go) ------------------------------------------


@dataclass(frozen=True)
class ClassCase:
    name: str
    dc: KubeDeviceClass
    profile: str = ""
    error: str = ""


CLASS_CASES = [
    # Any name: the selector decides (deviceprofile_test.go
    # TestAllocateCoreBitmapProfileUsesDeviceClassAlias: "my-cpus" is the cpu profile).
    ClassCase("alias of the cpu profile", dclass("my-cpus", CPU_SEL), profile="cpu"),
    ClassCase("alias of the NVIDIA profile", dclass("accel", NVIDIA_SEL), profile="gpu-nvidia"),
    ClassCase("the example driver", dclass("gpu.example.com", EXAMPLE_SEL), "gpu-example"),
    ClassCase("DRANET RDMA NICs", dclass("rdma", RDMA_SEL), profile="dranet-rdma"),
    # registry.go LookupBySelector: byte for byte, so a differently quoted selector is not it.
    ClassCase(
        "same meaning, other quotes",
        dclass("cpus", "device.driver == 'dra.cpu'"),
        error="matches no supported device profile",
    ),
    # The NVIDIA class without the type test would take MIG slices too: not the profile.
    ClassCase(
        "NVIDIA driver only",
        dclass("gpu.nvidia.com", "device.driver == 'gpu.nvidia.com'"),
        error="matches no supported device profile",
    ),
    ClassCase("config", dclass("c", CPU_SEL, config=True), error="spec.config is not supported"),
    ClassCase("two selectors", dclass("c", CPU_SEL, EXAMPLE_SEL), error="exactly one selector"),
    ClassCase("no selector", dclass("c"), error="exactly one selector"),
    ClassCase("not CEL", dclass("c", None), error="must be a CEL selector"),
]


@pytest.mark.parametrize("case", CLASS_CASES, ids=[c.name for c in CLASS_CASES])
def test_match_device_class(case: ClassCase) -> None:
    if case.error:
        with pytest.raises(ProfileError, match=case.error):
            _devprofile.match_device_class(case.dc)
    else:
        assert _devprofile.match_device_class(case.dc).name == case.profile


def test_class_kind_by_selector_then_by_name() -> None:
    """Slinky deviceprofile.go ``deviceProfileRequests``: a DeviceClass outside the registry
    keeps the driver-specific path of its name; a class name with neither is refused."""
    classes = {c.key: c for c in (dclass("accel", NVIDIA_SEL), dclass("my-cpus", CPU_SEL))}
    assert _dra.class_kind("accel", classes).profile == _devprofile.GPU_NVIDIA
    assert _dra.class_kind("my-cpus", classes).kind == "cpu"
    legacy = _dra.class_kind("gpu.nvidia.com", classes)
    assert (legacy.kind, legacy.driver, legacy.profile) == ("gpu", "gpu.nvidia.com", None)
    with pytest.raises(_dra.DraError, match="no DeviceClass 'fast'"):
        _dra.class_kind("fast", classes)
    odd = {"fast": dclass("fast", "device.driver == 'gpu.nvidia.com'")}
    with pytest.raises(_dra.DraError, match="matches no supported device profile"):
        _dra.class_kind("fast", odd)
    deleted = {"accel": dclass("accel", NVIDIA_SEL, deleted=True)}
    with pytest.raises(_dra.DraError, match="no DeviceClass 'accel'"):
        _dra.class_kind("accel", deleted)


def pod_asking(cls: str, n: int) -> KubePod:
    res = f"deviceclass.resource.kubernetes.io/{cls}"
    return kube_pod(
        "ns",
        "p",
        dra_requests=(DraRequest(container="c", resource=res, device_class=cls, count=n),),
    )


def test_any_class_name_sizes_the_job() -> None:
    """A pod asking 2 of class "accel" (the NVIDIA profile) and 3 of "my-cpus" (the cpu
    profile) is a job of 2 GPUs and 3 CPUs per task; today both names are refused."""
    classes = {c.key: c for c in (dclass("accel", NVIDIA_SEL), dclass("my-cpus", CPU_SEL))}
    p = pod_asking("accel", 2)
    p2 = kube_pod("ns", "p", dra_requests=(*p.dra_requests, *pod_asking("my-cpus", 3).dra_requests))
    _dra.check_extended(p2, classes)
    assert _dra.gpus_asked(p2, classes=classes) == 2
    assert _dra.cpus_asked(p2, classes) == 3
    requests, _ = _dra.extended_claim(p2, classes)
    assert [(r.name, r.device_class, r.count) for r in requests] == [
        ("gpu", "accel", 2),
        ("cpu", "my-cpus", 3),
    ]
    with pytest.raises(_dra.DraError, match="'accel' is not supported"):
        _dra.check_extended(p2)


def test_nic_profile_is_not_asked_of_slurm_yet() -> None:
    classes = {"rdma": dclass("rdma", RDMA_SEL)}
    with pytest.raises(_dra.DraError, match="selects nic devices"):
        _dra.check_extended(pod_asking("rdma", 1), classes)


# --- inventory.go BuildNodeInventory (inventory_test.go TestBuildNodeInventory) ---------------


@dataclass(frozen=True)
class InvCase:
    name: str
    slices: tuple[KubeResourceSlice, ...]
    want: dict[str, tuple[tuple[str, str, str], ...]] = field(default_factory=dict)
    error: str = ""


def _cnt(s: KubeResourceSlice, count: int, gen: int = 1, key: str = "") -> KubeResourceSlice:
    return rslice(s.node, s.driver, s.pool, *s.devices, gen=gen, count=count, key=key or s.key)


INV_CASES = [
    # "builds deterministic indices across slices": pools and names sorted; other nodes'
    # and unsupported drivers' devices left out.
    InvCase(
        "deterministic order across slices",
        (
            rslice("node-a", "gpu.example.com", "pool-b", "gpu-2", "gpu-0"),
            rslice("node-a", "gpu.example.com", "pool-a", "gpu-3", "gpu-0"),
            rslice("node-b", "gpu.example.com", "pool-other-node", "other-node-device"),
            rslice("node-a", "unsupported.example.com", "pool-a", "unsupported-device"),
        ),
        {
            "gpu-example": (
                ("gpu.example.com", "pool-a", "gpu-0"),
                ("gpu.example.com", "pool-a", "gpu-3"),
                ("gpu.example.com", "pool-b", "gpu-0"),
                ("gpu.example.com", "pool-b", "gpu-2"),
            )
        },
    ),
    # "classifies NVIDIA full GPUs": a MIG slice is not a GPU of the profile.
    InvCase(
        "NVIDIA whole GPUs only",
        (
            rslice(
                "node-a",
                "gpu.nvidia.com",
                "node-a",
                nv("gpu-1"),
                nv("gpu-0-mig", "mig"),
                nv("gpu-0"),
            ),
        ),
        {
            "gpu-nvidia": (
                ("gpu.nvidia.com", "node-a", "gpu-0"),
                ("gpu.nvidia.com", "node-a", "gpu-1"),
            )
        },
    ),
    # The qualified attribute name is the same attribute.
    InvCase(
        "NVIDIA qualified type attribute",
        (
            rslice(
                "node-a",
                "gpu.nvidia.com",
                "node-a",
                SliceDevice(name="gpu-0", attributes={"gpu.nvidia.com/type": "gpu"}),
            ),
        ),
        {"gpu-nvidia": (("gpu.nvidia.com", "node-a", "gpu-0"),)},
    ),
    # "classifies CPU devices across multiple slices".
    InvCase(
        "CPU devices over two slices",
        (
            rslice("node-a", "dra.cpu", "node-a", "cpudev001", count=2, key="c1"),
            rslice("node-a", "dra.cpu", "node-a", "cpudev000", count=2, key="c0"),
        ),
        {"cpu": (("dra.cpu", "node-a", "cpudev000"), ("dra.cpu", "node-a", "cpudev001"))},
    ),
    # "classifies the default DRANET RDMA profile": pciAddress and rdma=true both needed.
    InvCase(
        "DRANET RDMA",
        (
            rslice(
                "node-a",
                "dra.net",
                "node-a",
                SliceDevice(
                    name="rdma-ethernet",
                    attributes={"dra.net/pciAddress": "0000:01:00.0", "dra.net/rdma": True},
                ),
                SliceDevice(
                    name="plain",
                    attributes={"dra.net/pciAddress": "0000:02:00.0", "dra.net/rdma": False},
                ),
                SliceDevice(name="dummy", attributes={"dra.net/rdma": True}),
            ),
        ),
        {"dranet-rdma": (("dra.net", "node-a", "rdma-ethernet"),)},
    ),
    InvCase(
        "no matching device",
        (rslice("node-b", "gpu.example.com", "pool-a", "gpu-0"),),
    ),
    InvCase(
        "duplicate identity",
        (rslice("node-a", "gpu.example.com", "pool-a", "gpu-0", "gpu-0"),),
        error="duplicate DRA device identity gpu.example.com/pool-a/gpu-0",
    ),
    # "uses a complete highest pool generation".
    InvCase(
        "highest complete generation",
        (
            rslice("node-a", "gpu.example.com", "pool-a", "gpu-1", gen=2, count=2, key="a"),
            rslice("node-a", "gpu.example.com", "pool-a", "gpu-old", key="old"),
            rslice("node-a", "gpu.example.com", "pool-a", "gpu-0", gen=2, count=2, key="b"),
        ),
        {
            "gpu-example": (
                ("gpu.example.com", "pool-a", "gpu-0"),
                ("gpu.example.com", "pool-a", "gpu-1"),
            )
        },
    ),
    # "rejects an incomplete highest pool generation" (also with no devices yet).
    InvCase(
        "incomplete highest generation",
        (
            rslice("node-a", "gpu.example.com", "pool-a", "gpu-old", key="old"),
            rslice("node-a", "gpu.example.com", "pool-a", "gpu-current", gen=2, count=2, key="c"),
        ),
        error="generation 2 is incomplete: found 1 of 2 ResourceSlices",
    ),
    InvCase(
        "incomplete highest generation without devices",
        (
            rslice("node-a", "gpu.example.com", "pool-a", "gpu-old", key="old"),
            rslice("node-a", "gpu.example.com", "pool-a", gen=2, count=2, key="c"),
        ),
        error="generation 2 is incomplete: found 1 of 2 ResourceSlices",
    ),
    # "ignores an incomplete pool that belongs to another node".
    InvCase(
        "incomplete pool of another node",
        (
            rslice("node-a", "gpu.example.com", "pool-a", "gpu-local", key="l"),
            rslice("node-b", "gpu.example.com", "pool-b", "gpu-remote", count=2, key="r"),
        ),
        {"gpu-example": (("gpu.example.com", "pool-a", "gpu-local"),)},
    ),
    # "rejects conflicting nodes in a pool generation".
    InvCase(
        "one pool generation on two nodes",
        (
            rslice("node-a", "gpu.example.com", "shared", "gpu-local", count=2, key="l"),
            rslice("node-b", "gpu.example.com", "shared", "gpu-remote", count=2, key="r"),
        ),
        error="gpu.example.com/shared generation 1 has inconsistent nodeName",
    ),
    # "rejects inconsistent slice counts in the latest generation".
    InvCase(
        "inconsistent slice counts",
        (
            rslice("node-a", "gpu.example.com", "pool-a", "gpu-0", key="0"),
            rslice("node-a", "gpu.example.com", "pool-a", "gpu-1", count=2, key="1"),
        ),
        error="inconsistent resourceSliceCount",
    ),
    # "ignores obsolete invalid generations regardless of input order".
    InvCase(
        "obsolete invalid generation",
        (
            rslice("node-b", "gpu.example.com", "pool-a", "gpu-old-b", count=2, key="ob"),
            rslice("node-a", "gpu.example.com", "pool-a", "gpu-current", gen=2, key="c"),
            rslice("node-a", "gpu.example.com", "pool-a", "gpu-old-a", key="oa"),
        ),
        {"gpu-example": (("gpu.example.com", "pool-a", "gpu-current"),)},
    ),
]


@pytest.mark.parametrize("case", INV_CASES, ids=[c.name for c in INV_CASES])
def test_node_inventory(case: InvCase) -> None:
    for order in (case.slices, tuple(reversed(case.slices))):
        if case.error:
            with pytest.raises(ProfileError, match=case.error):
                _devprofile.node_inventory("node-a", order)
        else:
            assert _devprofile.node_inventory("node-a", order).profiles == case.want


# --- gres.go SlurmConfig / EncodeAppliedInventory (gres_test.go) ------------------------------


def test_gres_config_and_applied_inventory() -> None:
    """Profiles in name order; one GresConf record per device joined by ``+``; the applied
    inventory numbers each GRES *name* across its types (``firstIndex``); the CPU profile
    is no GRES."""
    inv = _devprofile.Inventory(
        node="n",
        profiles={
            "cpu": (("dra.cpu", "n", "cpu0"),),
            "gpu-example": (("gpu.example.com", "n", "g0"),),
            "gpu-nvidia": (("gpu.nvidia.com", "n", "gpu-0"), ("gpu.nvidia.com", "n", "gpu-1")),
        },
    )
    cfg = _devprofile.gres_config(inv)
    assert cfg.gres == "gpu:gpu-example:1,gpu:gpu-nvidia:2"
    assert cfg.gres_conf == (
        "count=1,name=gpu,type=gpu-example,file=/dra/gpu.example.com/n/g0"
        "+count=1,name=gpu,type=gpu-nvidia,file=/dra/gpu.nvidia.com/n/gpu-0"
        "+count=1,name=gpu,type=gpu-nvidia,file=/dra/gpu.nvidia.com/n/gpu-1"
    )
    assert cfg.conf_lines == (
        "Name=gpu Type=gpu-example Count=1",
        "Name=gpu Type=gpu-nvidia Count=2",
    )
    assert cfg.extra.startswith("slurm-bridge.dra-gres-map=")
    wire = json.loads(cfg.extra.removeprefix("slurm-bridge.dra-gres-map="))
    assert wire == {
        "v": 2,
        "profiles": {
            "gpu-example": {"firstIndex": 0, "devices": ["/dra/gpu.example.com/n/g0"]},
            "gpu-nvidia": {
                "firstIndex": 1,
                "devices": ["/dra/gpu.nvidia.com/n/gpu-0", "/dra/gpu.nvidia.com/n/gpu-1"],
            },
        },
    }
    applied = _devprofile.decode_applied(cfg.extra)
    assert applied.devices("gpu-nvidia", [2, 1]) == (
        ("gpu.nvidia.com", "n", "gpu-1"),
        ("gpu.nvidia.com", "n", "gpu-0"),
    )
    with pytest.raises(
        ProfileError, match="outside device profile 'gpu-nvidia' inventory range 1-2"
    ):
        applied.devices("gpu-nvidia", [0])
    with pytest.raises(ProfileError, match="repeated"):
        applied.devices("gpu-nvidia", [1, 1])
    with pytest.raises(ProfileError, match="does not contain device profile 'dranet-rdma'"):
        applied.devices("dranet-rdma", [0])
    assert _devprofile.gres_config(_devprofile.Inventory(node="n")) == _devprofile.GresConfig()


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        # gres_test.go TestDecodeAppliedInventoryRejectsInvalidExtra.
        ("{}", "does not contain a DRA GRES map"),
        ("slurm-bridge.dra-gres-map={", "decode applied inventory"),
        (
            'slurm-bridge.dra-gres-map={"v":3,"profiles":{}}',
            "unsupported applied inventory version 3",
        ),
        ('slurm-bridge.dra-gres-map={"v":2}', "has no profiles map"),
        ('slurm-bridge.dra-gres-map={"v":1,"profiles":{"":[]}}', "empty device profile name"),
        (
            'slurm-bridge.dra-gres-map={"v":2,"profiles":{"p":{"firstIndex":-1,"devices":[]}}}',
            "negative first Slurm GRES index",
        ),
        ('slurm-bridge.dra-gres-map={"v":1,"profiles":{"p":["/x/a/b"]}}', "must start with"),
        (
            'slurm-bridge.dra-gres-map={"v":1,"profiles":{"p":["/dra/a/b"]}}',
            "driver, pool, and device",
        ),
    ],
)
def test_decode_applied_refuses(extra: str, error: str) -> None:
    with pytest.raises(ProfileError, match=error):
        _devprofile.decode_applied(extra)


def test_decode_applied_version_1_and_pool_with_slash() -> None:
    applied = _devprofile.decode_applied(
        'slurm-bridge.dra-gres-map={"v":1,"profiles":{"gpu-example":["/dra/d/pool/x/dev"]}}'
    )
    assert applied.devices("gpu-example", [0]) == (("d", "pool/x", "dev"),)


# --- deviceprofile.go: Slurm's indices back to devices (deviceprofile_test.go) ----------------


def test_profile_typed_gres_binds_exact_devices() -> None:
    """TestAllocateIndexedGRESProfilesUsesNVIDIAProfile: Slurm's ``gpu:gpu-nvidia``
    indices, in Slurm's order, are the devices of the node's applied inventory — whatever
    the class is called; a MIG slice never counts."""
    classes = {"accel": dclass("accel", NVIDIA_SEL)}
    slices = (
        rslice(
            "k1",
            "gpu.nvidia.com",
            "k1",
            nv("gpu-0"),
            nv("gpu-0-mig", "mig"),
            nv("gpu-1"),
            nv("gpu-2"),
            nv("gpu-3"),
        ),
    )
    alloc = NodeAlloc(
        node="k1", gres=(GresAlloc(name="gpu", type="gpu-nvidia", count=2, indices=(3, 1)),)
    )
    got = _dra.devices_for(
        (ClaimRequest(name="gpu", device_class="accel", count=2),), alloc, slices, classes=classes
    )
    assert [d.device for d in got] == ["gpu-3", "gpu-1"]
    # TestSplitGRESResourcesRejectsWrongProfileGRESName: the profile owns its type.
    wrong = NodeAlloc(
        node="k1", gres=(GresAlloc(name="accelerator", type="gpu-nvidia", count=1, indices=(0,)),)
    )
    with pytest.raises(_dra.DraError, match="uses name 'accelerator', expected 'gpu'"):
        _dra.devices_for(
            (ClaimRequest(name="gpu", device_class="accel"),), wrong, slices, classes=classes
        )


def test_rig_typed_gres_keeps_the_index_rule_for_any_class_name() -> None:
    """A node whose gres.conf names its own type (``gpu:nvidia``, not a profile's) keeps the
    driver's index rule (TestSplitGRESResourcesUsesAllocatedRepresentation: only profile
    types take the profile path) — reached through a class of any name."""
    classes = {"accel": dclass("accel", NVIDIA_SEL)}
    slices = (rslice("k1", "gpu.nvidia.com", "k1", *(nv(f"gpu-{i}") for i in range(4))),)
    alloc = NodeAlloc(
        node="k1", gres=(GresAlloc(name="gpu", type="nvidia", count=2, indices=(1, 2)),)
    )
    got = _dra.devices_for(
        (ClaimRequest(name="gpu", device_class="accel", count=2),), alloc, slices, classes=classes
    )
    assert [(d.driver, d.device) for d in got] == [
        ("gpu.nvidia.com", "gpu-1"),
        ("gpu.nvidia.com", "gpu-2"),
    ]


def test_cpu_profile_under_another_name() -> None:
    classes = {"my-cpus": dclass("my-cpus", CPU_SEL)}
    slices = (
        rslice(
            "k1",
            "dra.cpu",
            "k1",
            *(
                SliceDevice(
                    name=f"cpu{i}",
                    attributes={
                        "dra.cpu/cpuID": i,
                        "dra.cpu/coreID": i // 2,
                        "dra.cpu/socketID": 0,
                    },
                )
                for i in range(4)
            ),
        ),
    )
    alloc = NodeAlloc(node="k1", cores=(1,))
    got = _dra.devices_for(
        (ClaimRequest(name="cpu", device_class="my-cpus", count=2),), alloc, slices, classes=classes
    )
    assert [d.device for d in got] == ["cpu2", "cpu3"]


# --- slurmconstraint.go Compose (slurmconstraint_test.go TestCompose) -------------------------

F = "slurm_bridge_gres_compatible"


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        ("", F),
        ("  ", F),
        (F, F),
        ("gpu", f"{F}&gpu"),
        ("intel&gpu", f"{F}&intel&gpu"),
        ("rack1|rack2", f"{F}&(rack1|rack2)"),
        ("a|b|c", f"{F}&(a|b|c)"),
        ("a&b|c", f"{F}&(a&b|c)"),
        ("gpu&(rack-a|rack-b)", f"{F}&gpu&(rack-a|rack-b)"),
        ("(rack-a|rack-b)&gpu", f"{F}&(rack-a|rack-b)&gpu"),
        ("[rack1|rack2]", f"{F}&[rack1|rack2]"),
        ("[rack1*2&rack2*4]", f"{F}&[rack1*2&rack2*4]"),
        ("[(knl&snc4&flat)*4&haswell*1]", f"{F}&[(knl&snc4&flat)*4&haswell*1]"),
        ("[rack1|rack2]&gpu", f"{F}&[rack1|rack2]&gpu"),
    ],
)
def test_compose(expr: str, want: str) -> None:
    assert _constraint.compose(F, expr) == want


@pytest.mark.parametrize(
    ("expr", "error"),
    [
        # Not composable under Slurm's grammar.
        ("graphics*4", "count outside square brackets"),
        ("(a&b)|(c&d)", "OR outside parentheses"),
        ("(a|b)|c", "OR outside parentheses"),
        ("c|[a|b]", "OR outside parentheses"),
        # Already invalid.
        ("a&(b&(c|d))", "nested parentheses"),
        ("(a|[b|c])", "brackets inside parentheses"),
        ("[a|b]&[c|d]", "only one set of brackets"),
        ("a|b)", "unbalanced parentheses"),
        ("(a|b", "unbalanced parentheses"),
        ("[a|b", "unbalanced brackets"),
    ],
)
def test_compose_refuses(expr: str, error: str) -> None:
    with pytest.raises(_constraint.ConstraintError, match=error):
        _constraint.compose(F, expr)


# --- node registration: Gres from profiles, CPU topology, the GRES condition ------------------

MIB = 1024 * 1024


def knode(*, external: bool = True, conditions: tuple[NodeCondition, ...] = ()) -> KubeNode:
    return KubeNode(
        source="k8s",
        key="k1",
        labels={wellknown.LABEL_EXTERNAL_NODE: "true"} if external else {},
        ready=True,
        cpu_millis=8000,
        memory_bytes=4096 * MIB,
        conditions=conditions,
    )


def test_external_node_conf_from_profiles_and_cpu_devices() -> None:
    """slurmcontrol.go ``AddNode``/``desiredNodeCPUConfig``: the GRES feature, the CPU
    topology of ``dra.cpu`` devices (2 cores × 2 threads; an efficiency core left out as
    Slurm does), ``Gres``/``GresConf`` of the profiles."""
    cpus = rslice(
        "k1",
        "dra.cpu",
        "k1",
        *(
            SliceDevice(
                name=f"cpudev{i:03}",
                attributes={"dra.cpu/cpuID": i, "dra.cpu/coreID": i // 2, "dra.cpu/socketID": 0},
            )
            for i in range(4)
        ),
        SliceDevice(
            name="cpudev004",
            attributes={"dra.cpu/cpuID": 4, "dra.cpu/coreID": 9, "dra.cpu/coreType": 3},
        ),
        key="cpus",
    )
    gpus = rslice(
        "k1", "gpu.nvidia.com", "k1", nv("gpu-1"), nv("gpu-0"), nv("mig-x", "mig"), key="g"
    )
    d = node_register.desired(knode(), (cpus, gpus))
    assert node_register.node_conf(d) == (
        "NodeName=k1 CPUs=4 Sockets=1 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=4096 "
        "State=External Feature=slurm_bridge_gres_compatible Gres=gpu:gpu-nvidia:2 "
        "GresConf=count=1,name=gpu,type=gpu-nvidia,file=/dra/gpu.nvidia.com/k1/gpu-0"
        "+count=1,name=gpu,type=gpu-nvidia,file=/dra/gpu.nvidia.com/k1/gpu-1"
    )


def _conds(actions: tuple[object, ...]) -> list[tuple[str, str]]:
    return [
        (a.status, a.reason)
        for a in actions
        if isinstance(a, SetNodeCondition) and a.type == "SlinkySlurmGRESCompatible"
    ]


def _warnings(actions: tuple[object, ...]) -> list[str]:
    return [a.reason for a in actions if isinstance(a, RecordEvent) and a.type == "Warning"]


def slurm_node(gres: str, *, external: bool = False) -> SlurmNode:
    return SlurmNode(
        source="slurm:c1",
        key="k1",
        cluster="c1",
        state=("IDLE", "EXTERNAL") if external else ("IDLE",),
        cpus=8,
        real_memory=4096,
        gres=gres,
        features=("slurm_bridge_gres_compatible",) if external else (),
    )


GPUS4 = (rslice("k1", "gpu.nvidia.com", "k1", *(nv(f"gpu-{i}") for i in range(4)), key="g"),)


@pytest.mark.parametrize(
    ("gres", "conditions", "want", "warn"),
    [
        # validateHybridNodeGRES: the profile entry must be there exactly.
        ("gpu:nvidia:4(S:0)", (), [("False", "IncompatibleSlurmGRES")], ["IncompatibleSlurmGRES"]),
        ("gpu:gpu-nvidia:2", (), [("False", "IncompatibleSlurmGRES")], ["IncompatibleSlurmGRES"]),
        # Other entries are the administrator's.
        ("license:matlab:1,gpu:gpu-nvidia:4(S:0-1)", (), [("True", "SlurmGRESCompatible")], []),
        # node_condition.go: the Warning Event on the transition only.
        (
            "gpu:nvidia:4",
            (
                NodeCondition(
                    type="SlinkySlurmGRESCompatible",
                    status="False",
                    reason="IncompatibleSlurmGRES",
                    message="older text",
                ),
            ),
            [("False", "IncompatibleSlurmGRES")],
            [],
        ),
    ],
)
def test_hybrid_node_gres_condition(
    gres: str,
    conditions: tuple[NodeCondition, ...],
    want: list[tuple[str, str]],
    warn: list[str],
) -> None:
    v = node_register.View(
        node=knode(external=False, conditions=conditions),
        slurm=slurm_node(gres),
        partitions=frozenset(),
        cluster="c1",
        slices=GPUS4,
    )
    d = node_register.decide(v)
    assert _conds(d.actions) == want
    assert _warnings(d.actions) == warn
    if want[0][0] == "False":
        msg = next(a for a in d.actions if isinstance(a, SetNodeCondition)).message
        assert "NodeName=k1 Name=gpu Type=gpu-nvidia Count=4" in msg


def test_inventory_error_registers_nothing() -> None:
    """inventory_test.go "rejects an incomplete highest pool generation" through node
    registration: nothing sent to Slurm, the condition Unknown."""
    bad = (rslice("k1", "gpu.nvidia.com", "k1", nv("gpu-0"), gen=2, count=2, key="g"),)
    v = node_register.View(
        node=knode(), slurm=None, partitions=frozenset(), cluster="c1", slices=bad
    )
    d = node_register.decide(v)
    assert _conds(d.actions) == [("Unknown", "SlurmGRESVerificationError")]
    assert not [a for a in d.actions if type(a).__name__ == "CreateSlurmNode"]


def test_registered_external_node_is_gres_compatible() -> None:
    v = node_register.View(
        node=knode(),
        slurm=slurm_node("gpu:gpu-nvidia:4", external=True),
        partitions=frozenset(),
        cluster="c1",
        slices=GPUS4,
    )
    d = node_register.decide(v)
    assert _conds(d.actions) == [("True", "SlurmGRESCompatible")]
    assert not [a for a in d.actions if type(a).__name__ in ("DrainSlurmNode", "CreateSlurmNode")]


def _extras(actions: tuple[object, ...]) -> list[str]:
    return [a.extra for a in actions if isinstance(a, SetSlurmNodeExtra)]


@pytest.mark.parametrize(
    ("external", "have", "want_extra", "cond"),
    [
        # slurmcontrol.go AddNode / reconcileHybridNode: the applied inventory goes to Extra.
        (True, "", True, ("True", "SlurmGRESCompatible")),
        (False, "", True, ("True", "SlurmGRESCompatible")),
        # Already there: nothing written.
        (True, "same", False, ("True", "SlurmGRESCompatible")),
        # An older inventory of ours is replaced.
        (False, "slurm-bridge.dra-gres-map={}", True, ("True", "SlurmGRESCompatible")),
        # updateNodeExtra: someone else's Extra is never overwritten.
        (False, "rack=7", False, ("Unknown", "SlurmGRESVerificationError")),
        (True, "rack=7", False, ("Unknown", "SlurmGRESVerificationError")),
    ],
    ids=["external", "hybrid", "in step", "ours replaced", "admin's hybrid", "admin's external"],
)
def test_applied_inventory_written_to_extra(
    external: bool, have: str, want_extra: bool, cond: tuple[str, str]
) -> None:
    want = _devprofile.gres_config(_devprofile.node_inventory("k1", GPUS4)).extra
    sn = slurm_node("gpu:gpu-nvidia:4", external=external)
    sn = SlurmNode(**{**msgspec.structs.asdict(sn), "extra": want if have == "same" else have})
    v = node_register.View(
        node=knode(external=external),
        slurm=sn,
        partitions=frozenset(),
        cluster="c1",
        slices=GPUS4,
    )
    d = node_register.decide(v)
    assert _extras(d.actions) == ([want] if want_extra else [])
    assert _conds(d.actions) == [cond]
    if cond[0] == "Unknown":
        msg = next(
            a.message
            for a in d.actions
            if isinstance(a, SetNodeCondition) and a.type == "SlinkySlurmGRESCompatible"
        )
        assert "Extra field is already in use" in msg


def test_our_extra_is_cleared_when_no_indexed_gres_is_left() -> None:
    sn = SlurmNode(
        **{
            **msgspec.structs.asdict(slurm_node("gpu:nvidia:4")),
            "extra": "slurm-bridge.dra-gres-map={}",
        }
    )
    v = node_register.View(
        node=knode(external=False),
        slurm=sn,
        partitions=frozenset(),
        cluster="c1",
        slices=(rslice("k1", "dra.cpu", "k1", "cpu0", key="c"),),
    )
    assert _extras(node_register.decide(v).actions) == [""]
    admin = SlurmNode(**{**msgspec.structs.asdict(sn), "extra": "rack=7"})
    v2 = node_register.View(
        node=knode(external=False), slurm=admin, partitions=frozenset(), cluster="c1", slices=()
    )
    assert _extras(node_register.decide(v2).actions) == []


def test_bind_reads_the_applied_inventory_in_extra() -> None:
    """deviceprofile.go ``indexedGRESAllocationResults``: the indices map back through the
    inventory applied to Slurm (the node's Extra), not through today's slices — here the
    Extra recorded gpu-3 as index 0 and gpu-2 as index 1."""
    classes = {"accel": dclass("accel", NVIDIA_SEL)}
    extra = (
        'slurm-bridge.dra-gres-map={"v":2,"profiles":{"gpu-nvidia":{"firstIndex":0,'
        '"devices":["/dra/gpu.nvidia.com/k1/gpu-3","/dra/gpu.nvidia.com/k1/gpu-2"]}}}'
    )
    alloc = NodeAlloc(
        node="k1", gres=(GresAlloc(name="gpu", type="gpu-nvidia", count=1, indices=(0,)),)
    )
    req = (ClaimRequest(name="gpu", device_class="accel"),)
    got = _dra.devices_for(req, alloc, GPUS4, classes=classes, applied=extra)
    assert [d.device for d in got] == ["gpu-3"]
    assert [d.device for d in _dra.devices_for(req, alloc, GPUS4, classes=classes)] == ["gpu-0"]
    with pytest.raises(_dra.DraError, match="unsupported applied inventory version 9"):
        _dra.devices_for(
            req, alloc, GPUS4, classes=classes, applied='slurm-bridge.dra-gres-map={"v":9}'
        )


def test_nothing_judged_before_the_slices_are_listed() -> None:
    """Rule of trust 1: before a complete ResourceSlice listing, a slurmd node's GRES are not
    judged and no Extra of ours is cleared; a node with no slice seen gets only the feature
    (it has nothing to verify), one with slices nothing."""
    for slices, want in (
        (GPUS4, ()),
        ((), (SetSlurmNodeFeature(cluster="c1", node="k1", feature=F, present=True),)),
    ):
        sn = SlurmNode(
            **{
                **msgspec.structs.asdict(slurm_node("gpu:nvidia:4")),
                "extra": "slurm-bridge.dra-gres-map={}",
            }
        )
        v = node_register.View(
            node=knode(external=False),
            slurm=sn,
            partitions=frozenset(),
            cluster="c1",
            slices=slices,
            slices_listed=False,
        )
        assert node_register.decide(v).actions == want


# --- the slurm_bridge_gres_compatible feature (slurmcontrol.go updateGRESCompatibilityFeature,
# --- reconcileHybridNode, DisableNodeGRESCompatibility; node_sync.go syncNodeRegistration) ---


def _features(actions: tuple[object, ...]) -> list[bool]:
    return [a.present for a in actions if isinstance(a, SetSlurmNodeFeature) and a.feature == F]


INCOMPLETE = (rslice("k1", "gpu.nvidia.com", "k1", nv("gpu-0"), gen=2, count=2, key="g"),)


@pytest.mark.parametrize(
    ("gres", "extra", "slices", "have", "want"),
    [
        # slurmcontrol_test.go: a compatible hybrid node gets the feature.
        ("gpu:gpu-nvidia:4", "", GPUS4, False, [True]),
        ("gpu:gpu-nvidia:4", "", GPUS4, True, []),
        # No DRA device: nothing to verify, compatible (validateHybridNodeGRES of "").
        ("gpu:nvidia:4", "", (), False, [True]),
        # Incompatible GRES: the feature comes off, every other feature kept.
        ("gpu:nvidia:4", "", GPUS4, True, [False]),
        ("gpu:nvidia:4", "", GPUS4, False, []),
        # node_sync_test.go: an unreadable inventory disables compatibility.
        ("gpu:gpu-nvidia:4", "", INCOMPLETE, True, [False]),
        # reconcileHybridNode: an Extra that is not ours cannot be written ⇒ disabled.
        ("gpu:gpu-nvidia:4", "rack=7", GPUS4, True, [False]),
    ],
    ids=[
        "compatible",
        "compatible, already on",
        "no DRA device",
        "incompatible",
        "incompatible, already off",
        "inventory unreadable",
        "admin's Extra",
    ],
)
def test_hybrid_node_feature_follows_compatibility(
    gres: str,
    extra: str,
    slices: tuple[KubeResourceSlice, ...],
    have: bool,
    want: list[bool],
) -> None:
    sn = SlurmNode(
        **{
            **msgspec.structs.asdict(slurm_node(gres)),
            "extra": extra,
            "features": ("admin", F) if have else ("admin",),
            "active_features": ("admin", F) if have else ("admin",),
        }
    )
    v = node_register.View(
        node=knode(external=False),
        slurm=sn,
        partitions=frozenset(),
        cluster="c1",
        slices=slices,
    )
    assert _features(node_register.decide(v).actions) == want


def test_the_feature_follows_the_active_set_too() -> None:
    """The feature in the available set but not in the active one (a NodeFeatures plugin's
    node) is still put on: jobs match active features."""
    sn = SlurmNode(
        **{
            **msgspec.structs.asdict(slurm_node("")),
            "features": ("mig=off", F),
            "active_features": ("mig=on",),
        }
    )
    v = node_register.View(
        node=knode(external=False), slurm=sn, partitions=frozenset(), cluster="c1", slices=()
    )
    assert _features(node_register.decide(v).actions) == [True]


def test_an_external_node_whose_inventory_cannot_be_read_loses_the_feature() -> None:
    """node_sync.go syncNodeRegistration: ``DisableNodeGRESCompatibility`` on an inventory
    error — only from a complete ResourceSlice listing."""
    sn = slurm_node("gpu:gpu-nvidia:1", external=True)
    for listed, want in ((True, [False]), (False, [])):
        v = node_register.View(
            node=knode(),
            slurm=sn,
            partitions=frozenset(),
            cluster="c1",
            slices=INCOMPLETE,
            slices_listed=listed,
        )
        assert _features(node_register.decide(v).actions) == want


def test_no_feature_is_sent_where_the_rest_api_cannot_update_nodes() -> None:
    v = node_register.View(
        node=knode(external=False),
        slurm=slurm_node(""),
        partitions=frozenset(),
        cluster="c1",
        slices=(),
        feature=False,
    )
    assert _features(node_register.decide(v).actions) == []
