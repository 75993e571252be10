"""DRA by device profile, not class name (issue 28, item 6), end to end in the simulators.

Node n1 has four NVIDIA GPUs (Slurm: ``Gres=gpu:nvidia:4``; the NVIDIA driver: whole GPUs
``gpu-0`` … ``gpu-3`` with ``type: gpu`` and one MIG slice). The DeviceClass is called
``accel`` — no name slurmbridge knows — and its one CEL selector is exactly the ``gpu-nvidia``
profile's (Slinky slurm-bridge 1.3 ``internal/dra/registry.go``). A pod asking for two
``accel`` devices runs on n1 and its claim names exactly the GPUs of the indices Slurm gave
its job; a foreign job holds GPU 0 first, so "the first two" would be wrong. n1 is a node
Slurm knows from its own configuration, so its GRES are checked against its DRA inventory:
``gpu:nvidia:4`` is not ``gpu:gpu-nvidia:4``, so the Node condition
``SlinkySlurmGRESCompatible`` is False (``IncompatibleSlurmGRES``) with a Warning Event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas import wellknown
from slurmbridge.devtools.sim.kube import ApiError
from slurmbridge.devtools.sim.kubelet import ANNOTATION_RUN_SECONDS
from slurmbridge.devtools.testing import Stack

NS = "default"
CLASS = "accel"
RES = f"deviceclass.resource.kubernetes.io/{CLASS}"
PREFIX = wellknown.ANNOTATION_SLURMJOB_PREFIX
NVIDIA_PROFILE = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)


def seed(stack: Stack) -> None:
    stack.slurm.nodes["n1"].gres = "gpu:nvidia:4"
    stack.kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": NVIDIA_PROFILE}}]},
        }
    )
    devices = [
        {"name": f"gpu-{i}", "attributes": {"index": {"int": i}, "type": {"string": "gpu"}}}
        for i in range(4)
    ]
    devices.append({"name": "gpu-0-mig-1g-10gb-0", "attributes": {"type": {"string": "mig"}}})
    stack.kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "n1-gpu.nvidia.com"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
    )
    foreign = stack.slurm.submit(
        {"name": "someone-else", "partition": "gpu", "tres_per_node": "gres/gpu=1"},
        external=True,
    )
    assert stack.slurm.job(foreign).nodes == ("n1",)


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=2, poll_interval=0.2, setup=seed) as s:
        yield s


def get(stack: Stack, resource: str, name: str, ns: str | None = NS) -> dict[str, Any] | None:
    try:
        return stack.kube.get(resource, name, ns)
    except ApiError:
        return None


def phase(p: dict[str, Any] | None) -> str:
    return "" if p is None else str((p.get("status") or {}).get("phase") or "Pending")


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
        lambda: phase(get(stack, "pods", "trainer")) == "Running",
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


async def test_hybrid_node_gres_incompatible_with_its_inventory(stack: Stack) -> None:
    def condition() -> dict[str, Any] | None:
        node = get(stack, "nodes", "n1", None)
        conds = ((node or {}).get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "SlinkySlurmGRESCompatible"), None)

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
