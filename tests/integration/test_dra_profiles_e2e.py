"""DRA by device profile, not class name (issue 28, item 6), end to end in the simulators.

Node n1 has four NVIDIA GPUs (Slurm: ``Gres=gpu:nvidia:4``; the NVIDIA driver: whole GPUs
``gpu-0`` … ``gpu-3`` with ``type: gpu`` and one MIG slice). The DeviceClass is called
``accel`` — no name slurmbridge knows — and its one CEL selector is exactly the ``gpu-nvidia``
profile's (Slinky slurm-bridge 1.3 ``internal/dra/registry.go``). A pod asking for two
``accel`` devices runs on n1 and its claim names exactly the GPUs of the indices Slurm gave
its job; a foreign job holds GPU 0 first, so "the first two" would be wrong. n1 is a node
Slurm knows from its own configuration, so its GRES are checked against its DRA inventory.
Configured ``gpu:gpu-nvidia:4`` (the profile's entry) it is compatible: condition True, the
applied inventory in its ``Extra``, and the feature ``slurm_bridge_gres_compatible`` every
job requires. Configured ``gpu:nvidia:4`` (an administrator's type) it is not: condition
False (``IncompatibleSlurmGRES``) with a Warning Event, no feature — so the pod asking for
GPUs is never placed there (Slinky slurm-bridge 1.3: an incompatible node stays available to
native Slurm jobs, bridge jobs cannot be allocated to it); a native job still runs there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas import wellknown
from slurmbridge.devtools.sim.kube import ApiError
from slurmbridge.devtools.sim.kubelet import ANNOTATION_RUN_SECONDS
from slurmbridge.devtools.testing import Stack
from tests._helpers import device_class, phase_of, resource_slice

NS = "default"
CLASS = "accel"
RES = f"deviceclass.resource.kubernetes.io/{CLASS}"
PREFIX = wellknown.ANNOTATION_SLURMJOB_PREFIX
NVIDIA_PROFILE = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)


def seed(stack: Stack, gres: str = "gpu:gpu-nvidia:4") -> None:
    stack.slurm.nodes["n1"].gres = gres
    stack.kube.create(device_class(CLASS, NVIDIA_PROFILE))
    devices = [
        {"name": f"gpu-{i}", "attributes": {"index": {"int": i}, "type": {"string": "gpu"}}}
        for i in range(4)
    ]
    devices.append({"name": "gpu-0-mig-1g-10gb-0", "attributes": {"type": {"string": "mig"}}})
    stack.kube.create(resource_slice("n1", "gpu.nvidia.com", devices))
    foreign = stack.slurm.submit(
        {"name": "someone-else", "partition": "gpu", "tres_per_node": "gres/gpu=1"},
        external=True,
    )
    assert stack.slurm.job(foreign).nodes == ("n1",)


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    """n1 configured with the profile's GRES: compatible."""
    async with Stack(nodes=2, poll_interval=0.2, setup=seed) as s:
        yield s


def seed_admin_features(stack: Stack) -> None:
    """:func:`seed`, and n1 carrying an administrator's feature before the bridge starts.

    Before anything runs: set later, by plain assignment, the node listing's ``last_update``
    does not move, so a conditional listing (304) never shows it once the bridge has put its
    own feature on — the test raced the bridge's first feature write (seen failing in CI)."""
    seed(stack)
    stack.slurm.nodes["n1"].features = ["admin"]
    stack.slurm.nodes["n1"].active_features = ["admin"]


@pytest.fixture
async def admin_featured() -> AsyncIterator[Stack]:
    """n1 compatible, with an administrator's feature of its own."""
    async with Stack(nodes=2, poll_interval=0.2, setup=seed_admin_features) as s:
        yield s


@pytest.fixture
async def incompatible() -> AsyncIterator[Stack]:
    """n1 configured with an administrator's GRES type: incompatible."""
    async with Stack(nodes=2, poll_interval=0.2, setup=lambda s: seed(s, "gpu:nvidia:4")) as s:
        yield s


def get(stack: Stack, resource: str, name: str, ns: str | None = NS) -> dict[str, Any] | None:
    try:
        return stack.kube.get(resource, name, ns)
    except ApiError:
        return None


async def test_a_class_of_any_name_gets_the_gpus_slurm_gave(stack: Stack) -> None:
    stack.kube.add_pod(
        "trainer",
        NS,
        scheduler_name=wellknown.DEFAULT_SCHEDULER_NAME,
        annotations={
            PREFIX + "partition": "gpu",
            PREFIX + "exclusive": "false",
            ANNOTATION_RUN_SECONDS: "30",
        },
        requests={"cpu": "1", "memory": "100Mi", RES: "2"},
    )
    await stack.wait_for(
        lambda: phase_of(get(stack, "pods", "trainer")) == "Running",
        timeout=30,
        what="the pod asking for accel devices running",
    )
    pod = get(stack, "pods", "trainer")
    assert pod is not None and pod["spec"]["nodeName"] == "n1"
    job = stack.slurm.job(int(pod["metadata"]["labels"][wellknown.LABEL_SLURM_JOBID]))
    (alloc,) = [a for a in job.allocation if a.node == "n1"]
    indices = tuple(i for g in alloc.gres if g.name == "gpu" for i in g.indices)
    assert indices == (1, 2)
    claim = get(
        stack, "resourceclaims", pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    )
    assert claim is not None
    results = claim["status"]["allocation"]["devices"]["results"]
    assert sorted((r["driver"], r["pool"], r["device"]) for r in results) == [
        ("gpu.nvidia.com", "n1", "gpu-1"),
        ("gpu.nvidia.com", "n1", "gpu-2"),
    ]
    assert [
        (r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"])
        for r in claim["spec"]["devices"]["requests"]
    ] == [("gpu", CLASS, 2)]
    assert not await stack.dead_letters()


def features(stack: Stack, node: str) -> tuple[list[str], list[str]]:
    n = stack.slurm.nodes[node]
    return list(n.features), list(n.active_features)


def gres_condition(stack: Stack, node: str) -> dict[str, Any] | None:
    obj = get(stack, "nodes", node, None)
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "SlinkySlurmGRESCompatible"), None)


async def test_a_compatible_node_carries_the_feature_every_job_requires(
    admin_featured: Stack,
) -> None:
    """Slinky slurm-bridge 1.3 reconcileHybridNode: verified GRES ⇒ the feature, beside the
    administrator's features (kept), in the available and the active set."""
    stack = admin_featured
    f = wellknown.FEATURE_GRES_COMPATIBLE
    await stack.wait_for(
        lambda: features(stack, "n1") == (["admin", f], ["admin", f]),
        timeout=30,
        what="the feature on n1",
    )
    cond = gres_condition(stack, "n1")
    assert cond is not None and cond["status"] == "True", cond
    # n2 has no DRA device: nothing to verify, compatible too.
    assert f in features(stack, "n2")[1]


async def test_hybrid_node_gres_incompatible_with_its_inventory(incompatible: Stack) -> None:
    stack = incompatible

    def condition() -> dict[str, Any] | None:
        return gres_condition(stack, "n1")

    await stack.wait_for(lambda: condition() is not None, timeout=30, what="GRES condition")
    cond = condition()
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "IncompatibleSlurmGRES")
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

    # No feature on n1: a bridge job asking for its GPUs is never given it, whereas n2 (no
    # DRA device, compatible) carries it; a native Slurm job still runs on n1.
    f = wellknown.FEATURE_GRES_COMPATIBLE
    await stack.wait_for(
        lambda: f in features(stack, "n2")[1], timeout=30, what="the feature on n2"
    )
    assert f not in features(stack, "n1")[0] + features(stack, "n1")[1]
    stack.kube.add_pod(
        "trainer",
        NS,
        scheduler_name=wellknown.DEFAULT_SCHEDULER_NAME,
        annotations={PREFIX + "partition": "gpu", PREFIX + "exclusive": "false"},
        requests={"cpu": "1", "memory": "100Mi", RES: "2"},
    )

    def job_of_pod() -> Any:
        pod = get(stack, "pods", "trainer") or {}
        label = ((pod.get("metadata") or {}).get("labels") or {}).get(wellknown.LABEL_SLURM_JOBID)
        return stack.slurm.job(int(label)) if label else None

    await stack.wait_for(lambda: job_of_pod() is not None, timeout=30, what="the pod's job")
    job = job_of_pod()
    assert stack.slurm.jobs_by_id[job.job_id].constraints == f
    await stack.settled()
    job = job_of_pod()
    assert job.state[0] == "PENDING" and not job.nodes, job
    assert phase_of(get(stack, "pods", "trainer")) == "Pending"
    assert (get(stack, "pods", "trainer") or {})["spec"].get("nodeName") is None
    native = stack.slurm.submit(
        {"name": "native", "partition": "gpu", "tres_per_node": "gres/gpu=1"}, external=True
    )
    assert stack.slurm.job(native).nodes == ("n1",)
