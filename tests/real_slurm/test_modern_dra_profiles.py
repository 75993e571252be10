"""DRA by device profile, not class name (issue 28, item 6), against real Slurm 26.05.

Slurm is real (:class:`~slurmbridge.devtools.realslurm_modern.ModernSlurm` with ``gpus=4``:
n1..n4 ``Gres=gpu:<type>:4`` from ``gres.conf`` with dummy ``File=`` devices, two clusters:
type ``nvidia``, an administrator's, and ``gpu-nvidia``, the profile's); Kubernetes is the
simulator. The NVIDIA driver publishes n1's four whole GPUs (``type: gpu``) and one MIG slice
(``type: mig``).

* A DeviceClass called ``accel`` — a name slurmbridge does not know — whose one CEL selector is
  exactly the ``gpu-nvidia`` profile's (Slinky slurm-bridge 1.3 ``internal/dra/registry.go``):
  on the ``gpu-nvidia`` cluster n1 is compatible and carries ``slurm_bridge_gres_compatible``,
  a pod asking for two ``accel`` devices runs on n1 under a job whose constraints require that
  feature, and its claim names the GPUs of exactly the indices real Slurm gave its job (a
  foreign job holds one GPU first).
* n1 is a slurmd node (gres.conf), so its GRES are checked against its DRA inventory (Slinky
  ``validateHybridNodeGRES``): on the ``nvidia`` cluster real Slurm reports ``gpu:nvidia:4``,
  which is not the profile's ``gpu:gpu-nvidia:4`` ⇒ ``SlinkySlurmGRESCompatible=False``
  (``IncompatibleSlurmGRES``) naming the gres.conf line it needs, with a Warning Event, and
  n1 does not carry the feature (Slinky ``reconcileHybridNode``) while n2..n4 (no DRA device,
  nothing to verify) do — real 26.05 shows it in ``AvailableFeatures`` and
  ``ActiveFeatures``, an administrator's feature of n1 kept.
* An external node with two whole GPUs is registered with the profile's GRES: real 26.05
  accepts ``Gres=gpu:gpu-nvidia:2`` and ``GresConf=`` one ``file=/dra/<driver>/<pool>/<device>``
  record per GPU joined by ``+`` (Slinky ``buildNodeGRESConfig``) and shows the node with
  ``Gres=gpu:gpu-nvidia:2`` and the ``slurm_bridge_gres_compatible`` feature; the applied
  inventory is written to the node's ``Extra`` over REST and read back as it was sent; its
  CPU topology is that of its ``dra.cpu`` devices (4 CPUs on 2 cores: ``ThreadsPerCore=2``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from schemas import wellknown
from slurmbridge.devtools.realslurm_modern import ModernSlurm
from slurmbridge.devtools.sim.kube import ApiError
from slurmbridge.devtools.sim.kubelet import ANNOTATION_RUN_SECONDS
from slurmbridge.devtools.testing import Stack
from slurmbridge.slurm import hostlist
from slurmbridge.slurm.codecs._common import parse_index_list
from tests._helpers import device_class, resource_slice
from tests.real_slurm.conftest import modern_cluster

NS = "default"
CLASS = "accel"
RES = f"deviceclass.resource.kubernetes.io/{CLASS}"
PREFIX = wellknown.ANNOTATION_SLURMJOB_PREFIX
NVIDIA_PROFILE = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)


#: One allocation line of ``scontrol -d show job``, GPUs of any type (``gpu:nvidia:1(IDX:2)``,
#: ``gpu:gpu-nvidia:2(IDX:1-2)``).
_GRES_LINE = re.compile(r"Nodes=(?P<node>\S+) .*GRES=gpu:[\w-]+:(?P<n>\d+)\(IDX:(?P<idx>[\d,-]+)\)")


def _gres(slurm: ModernSlurm, job_id: int) -> tuple[str, tuple[int, ...]] | None:
    """(node, GPU indices) of a running job on its one node, from ``scontrol -d show job``."""
    out = slurm.run("scontrol", "-d", "show", "job", str(job_id), check=False).stdout
    if "JobState=RUNNING" not in out:
        return None
    found: dict[str, tuple[int, ...]] = {}
    for m in filter(None, map(_GRES_LINE.search, out.splitlines())):
        indices = tuple(parse_index_list(m["idx"]))
        assert len(indices) == int(m["n"])
        found.update(dict.fromkeys(hostlist.expand(m["node"]), indices))
    ((node, indices),) = found.items()
    return node, indices


@pytest.fixture(scope="module")
def slurm_gpus(real_slurm_available: None) -> Iterator[ModernSlurm]:
    """A 4-node Slurm 26.05 cluster whose nodes have 4 NVIDIA GPUs each (``gpu:nvidia:4``)."""
    yield from modern_cluster("26.05", gpus=4)


@pytest.fixture(scope="module")
def slurm_profile_gpus(real_slurm_available: None) -> Iterator[ModernSlurm]:
    """The same, configured with the profile's type (``gpu:gpu-nvidia:4``)."""
    yield from modern_cluster("26.05", gpus=4, gpu_type="gpu-nvidia")


def _slice(node: str, gpus: int, *, mig: bool = False) -> dict[str, Any]:
    devices: list[dict[str, Any]] = [
        {"name": f"gpu-{i}", "attributes": {"index": {"int": i}, "type": {"string": "gpu"}}}
        for i in range(gpus)
    ]
    if mig:
        devices.append({"name": "gpu-0-mig-1g-10gb-0", "attributes": {"type": {"string": "mig"}}})
    return resource_slice(node, "gpu.nvidia.com", devices)


def seed(stack: Stack) -> None:
    stack.kube.create(device_class(CLASS, NVIDIA_PROFILE))
    stack.kube.create(_slice("n1", 4, mig=True))


@contextlib.asynccontextmanager
async def _stack(slurm_gpus: ModernSlurm) -> AsyncIterator[Stack]:
    out = slurm_gpus.run(
        "sbatch", "--parsable", "-p", "gpu", "-w", "n1", "--gres=gpu:1", "-o", "/dev/null",
        "-J", "someone-else", "--wrap", "sleep 600",
    ).stdout  # fmt: skip
    foreign = int(out.strip().split(";")[0])
    try:
        async with Stack(nodes=4, real_slurm=slurm_gpus, poll_interval=0.2, setup=seed) as s:
            await s.wait_for(
                lambda: _gres(slurm_gpus, foreign) is not None, timeout=30, what="foreign job"
            )
            yield s
    finally:
        slurm_gpus.run("scancel", "--user", "root", check=False)
        slurm_gpus.run("scontrol", "delete", "nodename=ext-gpu", check=False)


@pytest.fixture
async def stack(slurm_gpus: ModernSlurm) -> AsyncIterator[Stack]:
    async with _stack(slurm_gpus) as s:
        yield s


@pytest.fixture
async def profile_stack(slurm_profile_gpus: ModernSlurm) -> AsyncIterator[Stack]:
    async with _stack(slurm_profile_gpus) as s:
        yield s


def _features(slurm: ModernSlurm, node: str) -> tuple[str, str]:
    """``AvailableFeatures`` and ``ActiveFeatures`` as real Slurm shows them."""
    line = slurm.run("scontrol", "-o", "show", "node", node).stdout
    fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
    return fields["AvailableFeatures"], fields["ActiveFeatures"]


def _get(stack: Stack, resource: str, name: str, ns: str | None = NS) -> dict[str, Any] | None:
    try:
        return stack.kube.get(resource, name, ns)
    except ApiError:
        return None


def _phase(p: dict[str, Any] | None) -> str:
    return "" if p is None else str((p.get("status") or {}).get("phase") or "Pending")


def _gres_condition(stack: Stack, node: str) -> dict[str, Any] | None:
    obj = _get(stack, "nodes", node, None)
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "SlinkySlurmGRESCompatible"), None)


async def test_a_class_of_any_name_gets_the_gpus_real_slurm_gave(
    profile_stack: Stack, slurm_profile_gpus: ModernSlurm
) -> None:
    stack, slurm_gpus = profile_stack, slurm_profile_gpus
    f = wellknown.FEATURE_GRES_COMPATIBLE
    await stack.wait_for(
        lambda: _features(slurm_gpus, "n1") == (f, f), timeout=30, what="the feature on n1"
    )
    stack.kube.add_pod(
        "trainer",
        NS,
        scheduler_name=wellknown.DEFAULT_SCHEDULER_NAME,
        annotations={
            PREFIX + "partition": "gpu",
            PREFIX + "exclusive": "false",
            ANNOTATION_RUN_SECONDS: "60",
        },
        requests={"cpu": "1", "memory": "100Mi", RES: "2"},
    )
    await stack.wait_for(
        lambda: _phase(_get(stack, "pods", "trainer")) == "Running", timeout=60, what="running"
    )
    pod = _get(stack, "pods", "trainer")
    assert pod is not None and pod["spec"]["nodeName"] == "n1"
    gres = _gres(slurm_gpus, int(pod["metadata"]["labels"][wellknown.LABEL_SLURM_JOBID]))
    assert gres is not None and gres[0] == "n1" and len(gres[1]) == 2
    foreign = slurm_gpus.run("squeue", "-h", "-n", "someone-else", "-o", "%i").stdout.split()
    (held,) = [_gres(slurm_gpus, int(j)) for j in foreign]
    assert held is not None and not set(held[1]) & set(gres[1])
    claim = _get(
        stack, "resourceclaims", pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    )
    assert claim is not None
    results = claim["status"]["allocation"]["devices"]["results"]
    assert sorted((r["driver"], r["pool"], r["device"]) for r in results) == [
        ("gpu.nvidia.com", "n1", f"gpu-{i}") for i in sorted(gres[1])
    ]
    assert [r["exactly"]["deviceClassName"] for r in claim["spec"]["devices"]["requests"]] == [
        CLASS
    ]
    # The job required the feature (Slinky gresCompatibilityConstraint), as real Slurm
    # records it.
    job_id = pod["metadata"]["labels"][wellknown.LABEL_SLURM_JOBID]
    shown = slurm_gpus.run("scontrol", "-o", "show", "job", job_id).stdout
    assert f"Features={f} " in shown, shown
    assert not await stack.dead_letters()


async def test_a_slurmd_nodes_gres_checked_against_its_dra_inventory(
    stack: Stack, slurm_gpus: ModernSlurm
) -> None:
    await stack.wait_for(
        lambda: _gres_condition(stack, "n1") is not None, timeout=30, what="GRES condition"
    )
    cond = _gres_condition(stack, "n1")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "IncompatibleSlurmGRES"), cond
    # What real Slurm reports for the node; the MIG slice adds nothing to the inventory.
    assert "has GRES 'gpu:nvidia:4" in cond["message"], cond["message"]
    assert "required DRA GRES 'gpu:gpu-nvidia:4'" in cond["message"]
    assert "NodeName=n1 Name=gpu Type=gpu-nvidia Count=4" in cond["message"]
    await stack.wait_for(
        lambda: any(
            e.get("reason") == "IncompatibleSlurmGRES" and e.get("type") == "Warning"
            for e in stack.kube.list("events", NS)
        ),
        timeout=30,
        what="the Warning Event",
    )
    # The feature every bridge job requires: on n2..n4 (nothing to verify), never on n1.
    f = wellknown.FEATURE_GRES_COMPATIBLE
    await stack.wait_for(
        lambda: all(_features(slurm_gpus, n) == (f, f) for n in ("n2", "n3", "n4")),
        timeout=30,
        what="the feature on n2..n4",
    )
    assert f not in "".join(_features(slurm_gpus, "n1"))
    # An administrator's feature of n1 is kept when slurmbridge takes its own off: both put
    # on by hand, n1 is judged again (the Slurm poller sees it change) and only ours goes.
    slurm_gpus.run("scontrol", "update", "nodename=n1", f"features=admin,{f}")
    await stack.wait_for(
        lambda: _features(slurm_gpus, "n1") == ("admin", "admin"),
        timeout=30,
        what="only the feature taken off n1",
    )


async def test_an_external_node_registers_the_profiles_gres(
    stack: Stack, slurm_gpus: ModernSlurm
) -> None:
    stack.kube.create(_slice("ext-gpu", 2, mig=True))
    # dra-driver-cpu's devices: 4 CPUs on 2 cores (2 threads each) of socket 0.
    stack.kube.create(
        resource_slice(
            "ext-gpu",
            "dra.cpu",
            [
                {
                    "name": f"cpudev{i:03}",
                    "attributes": {
                        "dra.cpu/cpuID": {"int": i},
                        "dra.cpu/coreID": {"int": i // 2},
                        "dra.cpu/socketID": {"int": 0},
                    },
                }
                for i in range(4)
            ],
        )
    )
    stack.kube.add_node(
        "ext-gpu",
        cpu="2",
        memory="1000Mi",
        labels={wellknown.LABEL_EXTERNAL_NODE: "true"},
        annotations={wellknown.ANNOTATION_EXTERNAL_NODE_PARTITIONS: "gpu"},
    )

    def shown() -> str:
        return slurm_gpus.run("scontrol", "-o", "show", "node", "ext-gpu", check=False).stdout

    # The node and its ResourceSlices come by different watches: a node seen before its slices
    # is registered from its capacity, then re-registered when the inventory arrives
    # ("resources changed"). Wait for the registration from the inventory.
    await stack.wait_for(
        lambda: "Gres=gpu:gpu-nvidia:2" in shown(), timeout=60, what="registered with its GRES"
    )
    line = shown()
    # The CPU topology of its dra.cpu devices, not its capacity's 2 CPUs (Slinky
    # desiredNodeCPUConfig).
    for field in ("CPUTot=4 ", "CoresPerSocket=2 ", "ThreadsPerCore=2 ", "Sockets=1 "):
        assert field in line, (field, line)
    assert "AvailableFeatures=slurm_bridge_gres_compatible,gpu " in line, line
    await stack.wait_for(
        lambda: (_gres_condition(stack, "ext-gpu") or {}).get("status") == "True",
        timeout=30,
        what="compatible",
    )
    # The applied inventory, as Slinky writes it, in the node's Extra (update_node_msg.extra):
    # index 0 and 1 of gpu:gpu-nvidia are gpu-0 and gpu-1; the MIG slice is no GPU.
    await stack.wait_for(
        lambda: "Extra=slurm-bridge.dra-gres-map=" in shown(), timeout=30, what="Extra written"
    )
    extra = shown().split("Extra=", 1)[1].split(" ", 1)[0].strip()
    assert json.loads(extra.removeprefix("slurm-bridge.dra-gres-map=")) == {
        "v": 2,
        "profiles": {
            "gpu-nvidia": {
                "firstIndex": 0,
                "devices": [
                    "/dra/gpu.nvidia.com/ext-gpu/gpu-0",
                    "/dra/gpu.nvidia.com/ext-gpu/gpu-1",
                ],
            }
        },
    }

    async def observed() -> bool:
        for raw in await stack.observations():
            obs = json.loads(raw)
            if (obs.get("kind"), obs.get("key"), obs.get("extra")) == (
                "SlurmNode",
                "ext-gpu",
                extra,
            ):
                return True
        return False

    # The Slurm poller reads it back (REST node.extra) exactly as it was written.
    deadline = time.monotonic() + 30
    while not await observed():
        assert time.monotonic() < deadline, (
            f"no SlurmNode observation of ext-gpu with Extra {extra!r}"
        )
        await asyncio.sleep(0.2)
    # Registered once: real Slurm's Gres equals what was sent (no re-registration).
    await stack.settled()
    recs = [
        (type(r.action).__name__, r.outcome)
        for r in await stack.action_records()
        if r.key == "ext-gpu" and type(r.action).__name__ != "RecordEvent"
    ]
    assert recs.count(("CreateSlurmNode", "ok")) == 1, recs
    assert ("DrainSlurmNode", "ok") not in recs, recs
    assert await stack.dead_letters() == []
