"""DRA from Slurm's allocation, end to end in the simulators (issue 20, item 3).

Node n1 has four NVIDIA GPUs: Slurm knows them as ``Gres=gpu:nvidia:4`` and the DRA driver
publishes them as devices ``gpu-0`` … ``gpu-3`` of a ResourceSlice. A pod asking for two GPUs
of class ``gpu.nvidia.com`` — through the DRA extended resource, or through a ResourceClaim
made from a template — runs, and its claim's allocation names exactly the GPU indices Slurm
gave its job (``gres_detail``). A foreign Slurm job holds GPU 0 first, so "the first two"
would be wrong. When the pod ends, its claim is released — at once, even while other pods
of its job still run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas import wellknown
from schemas.actions import (
    AllocateResourceClaim,
    BindPod,
    CreateExtendedResourceClaim,
    ReleaseResourceClaim,
)
from slurmbridge.devtools.sim.kube import ApiError
from slurmbridge.devtools.sim.kubelet import ANNOTATION_RUN_SECONDS
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Stack
from tests._helpers import (
    claim_template,
    device_class,
    phase_of,
    pod_with_claim_template,
    resource_slice,
)

NS = "default"
GPU_CLASS = "gpu.nvidia.com"
GPU_RES = f"deviceclass.resource.kubernetes.io/{GPU_CLASS}"
PREFIX = wellknown.ANNOTATION_SLURMJOB_PREFIX


def seed(stack: Stack) -> None:
    """n1: Slurm GRES gpu:nvidia:4, a DeviceClass and the NVIDIA driver's ResourceSlice; a
    foreign Slurm job holding GPU 0 of n1."""
    stack.slurm.nodes["n1"].gres = "gpu:nvidia:4"
    stack.kube.create(
        device_class(GPU_CLASS, f"device.driver == '{GPU_CLASS}'", extendedResourceName=GPU_RES)
    )
    stack.kube.create(
        resource_slice(
            "n1",
            GPU_CLASS,
            [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"index": {"int": i}, "uuid": {"string": f"GPU-0000{i}"}},
                }
                for i in range(4)
            ],
        )
    )
    foreign = stack.slurm.submit(
        {"name": "someone-else", "partition": "gpu", "tres_per_node": "gres/gpu=1"},
        external=True,
    )
    job = stack.slurm.job(foreign)
    assert job.state == ("RUNNING",) and job.nodes == ("n1",)


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=2, poll_interval=0.2, setup=seed) as s:
        yield s


def get(stack: Stack, resource: str, name: str) -> dict[str, Any] | None:
    try:
        return stack.kube.get(resource, name, NS)
    except ApiError:
        return None


def slurm_gpus(stack: Stack, pod: dict[str, Any]) -> tuple[int, ...]:
    """The GPU indices Slurm gave the pod's job on its node (``gres_detail``)."""
    job = stack.slurm.job(int(pod["metadata"]["labels"][wellknown.LABEL_SLURM_JOBID]))
    (alloc,) = [a for a in job.allocation if a.node == "n1"]
    return tuple(i for g in alloc.gres if g.name == "gpu" for i in g.indices)


def allocated(claim: dict[str, Any]) -> list[str]:
    results = claim["status"]["allocation"]["devices"]["results"]
    assert {(r["driver"], r["pool"]) for r in results} == {(GPU_CLASS, "n1")}
    return sorted(r["device"] for r in results)


ANNOTATIONS = {PREFIX + "partition": "gpu", PREFIX + "exclusive": "false"}


async def test_extended_resource_pod_gets_the_gpus_slurm_gave_its_job(stack: Stack) -> None:
    stack.kube.add_pod(
        "trainer",
        NS,
        scheduler_name=wellknown.DEFAULT_SCHEDULER_NAME,
        annotations={**ANNOTATIONS, ANNOTATION_RUN_SECONDS: "1.5"},
        requests={"cpu": "1", "memory": "100Mi", GPU_RES: "2"},
    )
    await stack.wait_for(
        lambda: phase_of(get(stack, "pods", "trainer")) == "Running",
        timeout=30,
        what="the GPU pod running",
    )
    pod = get(stack, "pods", "trainer")
    assert pod is not None and pod["spec"]["nodeName"] == "n1"
    # Slurm was asked for untyped GPUs, kept GPU 0 for the foreign job, and names the node's
    # GRES type (as real 24.11/26.05 do: tests/real_slurm/test_modern_dra.py).
    job = stack.slurm.job(int(pod["metadata"]["labels"][wellknown.LABEL_SLURM_JOBID]))
    assert stack.slurm._render_job_full("v0.0.44", stack.slurm.jobs_by_id[job.job_id])[
        "gres_detail"
    ] == ["gpu:nvidia:2(IDX:1-2)"]
    indices = slurm_gpus(stack, pod)
    assert indices == (1, 2)

    status = pod["status"]["extendedResourceClaimStatus"]
    claim = get(stack, "resourceclaims", status["resourceClaimName"])
    assert claim is not None
    assert allocated(claim) == [f"gpu-{i}" for i in indices]
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "trainer", "uid": pod["metadata"]["uid"]}
    ]
    node_selector = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert node_selector == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    ]
    assert claim["metadata"]["annotations"] == {
        "resource.kubernetes.io/extended-resource-claim": "true"
    }
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "Pod",
        "trainer",
        pod["metadata"]["uid"],
    )
    requests = claim["spec"]["devices"]["requests"]
    assert [
        (r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in requests
    ] == [("gpu", GPU_CLASS, 2)]
    assert status["requestMappings"] == [
        {"containerName": "main", "requestName": "gpu", "resourceName": GPU_RES}
    ]

    # The pod ends: the claim slurmbridge made for it is deleted.
    name = status["resourceClaimName"]
    await stack.wait_for(
        lambda: phase_of(get(stack, "pods", "trainer")) == "Succeeded", timeout=30, what="Succeeded"
    )
    await stack.wait_for(
        lambda: get(stack, "resourceclaims", name) is None, timeout=30, what="claim deleted"
    )
    records = await stack.action_records()
    kinds = [type(r.action) for r in records if r.outcome == "ok"]
    assert kinds.index(CreateExtendedResourceClaim) < kinds.index(BindPod), "claim before bind"
    assert not [r for r in records if r.outcome == "failed"]
    assert not await stack.dead_letters()


async def test_claim_from_a_template_is_allocated_from_slurm(stack: Stack) -> None:
    stack.kube.create(claim_template("two-gpus", NS, GPU_CLASS, 2))
    annotations = {**ANNOTATIONS, ANNOTATION_RUN_SECONDS: "1.5"}
    stack.kube.create(pod_with_claim_template("solver", NS, annotations, "two-gpus"))
    await stack.wait_for(
        lambda: phase_of(get(stack, "pods", "solver")) == "Running", timeout=30, what="pod running"
    )
    pod = get(stack, "pods", "solver")
    assert pod is not None and pod["spec"]["nodeName"] == "n1"
    (made,) = pod["status"]["resourceClaimStatuses"]
    claim = get(stack, "resourceclaims", made["resourceClaimName"])
    assert claim is not None
    indices = slurm_gpus(stack, pod)
    assert indices == (1, 2)
    assert allocated(claim) == [f"gpu-{i}" for i in indices]
    assert {r["request"] for r in claim["status"]["allocation"]["devices"]["results"]} == {"gpus"}
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]

    # The pod ends: the claim (the pod's, from its template) is released, not deleted.
    await stack.wait_for(
        lambda: phase_of(get(stack, "pods", "solver")) == "Succeeded", timeout=30, what="Succeeded"
    )

    def released() -> bool:
        c = get(stack, "resourceclaims", made["resourceClaimName"])
        return c is not None and not (c.get("status") or {}).get("allocation")

    await stack.wait_for(released, timeout=30, what="claim released")
    records = await stack.action_records()
    kinds = [type(r.action) for r in records if r.outcome == "ok"]
    assert kinds.index(AllocateResourceClaim) < kinds.index(BindPod), "claim before bind"
    assert not [r for r in records if r.outcome == "failed"]
    assert not await stack.dead_letters()


async def test_devices_slurm_cannot_provide_are_reported_and_the_pod_is_not_bound(
    stack: Stack,
) -> None:
    # Slurm gives GPUs of n1, but the slice publishes only gpu-0 and gpu-1 for another
    # driver's class: the pod asks for gpu.example.com, which n1 has no device of.
    stack.kube.add_pod(
        "wrong-driver",
        NS,
        scheduler_name=wellknown.DEFAULT_SCHEDULER_NAME,
        annotations=ANNOTATIONS,
        requests={
            "cpu": "1",
            "memory": "100Mi",
            "deviceclass.resource.kubernetes.io/gpu.example.com": "1",
        },
    )

    def reported() -> bool:
        pod = get(stack, "pods", "wrong-driver")
        conds = ((pod or {}).get("status") or {}).get("conditions") or []
        return any(c.get("reason") == "DeviceAllocationFailed" for c in conds)

    await stack.wait_for(reported, timeout=30, what="PodScheduled=False DeviceAllocationFailed")
    pod = get(stack, "pods", "wrong-driver")
    assert pod is not None and not pod["spec"].get("nodeName")
    (cond,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert "has no device of driver gpu.example.com" in cond["message"]


def n2_gpus(stack: Stack) -> None:
    """n2 gets four GPUs too (Slurm GRES and the driver's ResourceSlice)."""
    stack.slurm.nodes["n2"].gres = "gpu:nvidia:4"
    stack.kube.create(
        resource_slice(
            "n2",
            GPU_CLASS,
            [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(4)],
        )
    )


def devices_of(claim: dict[str, Any]) -> list[tuple[str, str]]:
    """(pool, device) of a claim's allocation."""
    results = claim["status"]["allocation"]["devices"]["results"]
    return sorted((r["pool"], r["device"]) for r in results)


async def test_a_pod_that_ends_gives_back_its_gpus_while_its_job_runs(stack: Stack) -> None:
    """A 2-pod Job of one GPU per pod (one pod per node: n1 and n2): when one pod ends, the
    claim made for it is deleted at once, while the other pod runs on under the same Slurm
    job with its claim kept."""
    n2_gpus(stack)
    first, second = create_group(
        stack.kube,
        "Job",
        "train",
        2,
        annotations=ANNOTATIONS,
        requests={"cpu": "1", "memory": "100Mi", GPU_RES: "1"},
    )

    def claim_of(name: str) -> str:
        pod = get(stack, "pods", name) or {}
        status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
        return str(status.get("resourceClaimName") or "")

    await stack.wait_for(
        lambda: all(phase_of(get(stack, "pods", n)) == "Running" for n in (first, second)),
        timeout=30,
        what="both pods running",
    )
    pods = [get(stack, "pods", n) or {} for n in (first, second)]
    (job_id,) = {p["metadata"]["labels"][wellknown.LABEL_SLURM_JOBID] for p in pods}
    claims = [claim_of(n) for n in (first, second)]
    held = [get(stack, "resourceclaims", c) or {} for c in claims]
    devices = [devices_of(c) for c in held]
    # Each pod has the GPU Slurm gave the job on its node (on n1 the foreign job has gpu-0).
    expected = {"n1": [("n1", "gpu-1")], "n2": [("n2", "gpu-0")]}
    assert devices == [expected[p["spec"]["nodeName"]] for p in pods]

    # The first pod's container exits (the simulated kubelet reads the annotation at once).
    stack.kube.patch_merge(
        "pods", first, {"metadata": {"annotations": {ANNOTATION_RUN_SECONDS: "0"}}}, NS
    )
    await stack.wait_for(
        lambda: get(stack, "resourceclaims", claims[0]) is None,
        timeout=30,
        what="the ended pod's claim deleted",
    )
    assert phase_of(get(stack, "pods", first)) == "Succeeded"
    # The other pod runs on, under the same Slurm job, and keeps its GPU.
    assert phase_of(get(stack, "pods", second)) == "Running"
    assert stack.slurm.job(int(job_id)).state == ("RUNNING",)
    kept = get(stack, "resourceclaims", claims[1])
    assert kept is not None and devices_of(kept) == devices[1]
    assert [r["name"] for r in kept["status"]["reservedFor"]] == [second]
    pod = get(stack, "pods", first)
    assert pod is not None and wellknown.FINALIZER_SCHEDULER in pod["metadata"]["finalizers"]
    await stack.settled()  # the claim is gone before the release's record is written
    records = await stack.action_records()
    released = [
        r.action
        for r in records
        if isinstance(r.action, ReleaseResourceClaim) and r.outcome == "ok"
    ]
    assert [(a.claim.name, a.delete, a.pod.name) for a in released] == [(claims[0], True, first)]
    assert not [r for r in records if r.outcome == "failed"]
    assert not await stack.dead_letters()
