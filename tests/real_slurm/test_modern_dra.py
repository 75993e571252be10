"""DRA GPU claims from real Slurm's GPU allocation (issue 20, item 3) on 24.11 and 26.05.

Slurm is real (:class:`~slurmbridge.devtools.realslurm_modern.ModernSlurm` with ``gpus=4``:
every node ``Gres=gpu:nvidia:4``, ``gres.conf`` with ``File=`` dummy devices, so slurmctld
gives jobs GPU indices); Kubernetes is the simulator, with a DeviceClass ``gpu.nvidia.com``
and the NVIDIA driver's ResourceSlice for node n1 (devices ``gpu-0`` … ``gpu-3``). A foreign
job holds one GPU of n1 first, so "the first two GPUs" would be wrong. A pod asking for two
GPUs — through the DRA extended resource, or through a ResourceClaim made from a template —
runs on n1, and its claim's allocation names exactly the indices real Slurm reports for the
pod's job (``scontrol -d show job``: ``GRES=gpu:nvidia:2(IDX:x-y)``). When the pod ends, its
claim is released (the claim slurmbridge made is deleted) — at once, even while another pod
of its Job still runs under the same Slurm job.

Met on the real daemons (24.11.5, 26.05.5): ``gres_detail`` is one string per node of the
job in node order, ``gpu:nvidia:2(IDX:1-2)`` — typed with the node's GRES type even though
slurmbridge asks for untyped ``gres/gpu=2`` (``tres_per_node`` is echoed as sent) — the same
in v0.0.42 and v0.0.45; 26.05's ``EXTERNAL_JOB`` placeholder gets GPU indices like a batch
job. No codec change was needed; the slurmrestd simulator, which named the type the job
asked for (none), now names the node's type as the real servers do.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from schemas import wellknown
from schemas.actions import (
    AllocateResourceClaim,
    BindPod,
    CreateExtendedResourceClaim,
    ReleaseResourceClaim,
)
from slurmbridge.devtools.realslurm_modern import ModernSlurm
from slurmbridge.devtools.sim.kube import ApiError
from slurmbridge.devtools.sim.kubelet import ANNOTATION_RUN_SECONDS
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Stack
from slurmbridge.slurm import hostlist
from slurmbridge.slurm.codecs._common import parse_index_list
from tests._helpers import claim_template, device_class, pod_with_claim_template, resource_slice
from tests.real_slurm.conftest import modern_cluster

NS = "default"
GPU_CLASS = "gpu.nvidia.com"
GPU_RES = f"deviceclass.resource.kubernetes.io/{GPU_CLASS}"
PREFIX = wellknown.ANNOTATION_SLURMJOB_PREFIX
ANNOTATIONS = {PREFIX + "partition": "gpu", PREFIX + "exclusive": "false"}
#: ``scontrol -d show job``'s per-node line: ``Nodes=n1 CPU_IDs=1 Mem=0 GRES=gpu:nvidia:2(IDX:1-2)``
_GRES_LINE = re.compile(r"Nodes=(?P<node>\S+) .*GRES=gpu:nvidia:(?P<n>\d+)\(IDX:(?P<idx>[\d,-]+)\)")


@pytest.fixture(scope="module", params=["24.11", "26.05"], ids=["slurm24.11", "slurm26.05"])
def slurm_gpus(request: pytest.FixtureRequest, real_slurm_available: None) -> Iterator[ModernSlurm]:
    """A 4-node cluster of each release whose nodes have 4 NVIDIA GPUs each."""
    yield from modern_cluster(request.param, gpus=4)


def seed(stack: Stack) -> None:
    """The DeviceClass and the NVIDIA driver's ResourceSlices of n1 and n2 (devices gpu-0 …
    gpu-3, pool = the node), as k8s-dra-driver-gpu publishes them."""
    stack.kube.create(
        device_class(GPU_CLASS, f"device.driver == '{GPU_CLASS}'", extendedResourceName=GPU_RES)
    )
    for node in ("n1", "n2"):
        stack.kube.create(
            resource_slice(
                node,
                GPU_CLASS,
                [
                    {
                        "name": f"gpu-{i}",
                        "attributes": {"index": {"int": i}, "uuid": {"string": f"GPU-{node}-{i}"}},
                    }
                    for i in range(4)
                ],
            )
        )


@pytest.fixture
async def stack(slurm_gpus: ModernSlurm) -> AsyncIterator[Stack]:
    """The stack on the GPU cluster, with a foreign batch job holding one GPU of n1."""
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


def _gres_by_node(slurm: ModernSlurm, job_id: int) -> dict[str, tuple[int, ...]] | None:
    """Node → GPU indices of a running job, from ``scontrol -d show job`` (one line per
    group of nodes with the same allocation: ``Nodes=n[1,3] … GRES=gpu:nvidia:1(IDX:2)``)."""
    out = slurm.run("scontrol", "-d", "show", "job", str(job_id), check=False).stdout
    if "JobState=RUNNING" not in out:
        return None
    found: dict[str, tuple[int, ...]] = {}
    for m in filter(None, map(_GRES_LINE.search, out.splitlines())):
        indices = parse_index_list(m["idx"])
        assert len(indices) == int(m["n"])
        found.update(dict.fromkeys(hostlist.expand(m["node"]), indices))
    return found


def _gres(slurm: ModernSlurm, job_id: int) -> tuple[str, tuple[int, ...]] | None:
    """(node, GPU indices) of a running job on its one node, from ``scontrol -d show job``."""
    found = _gres_by_node(slurm, job_id)
    if found is None:
        return None
    ((node, indices),) = found.items()
    return node, indices


def _get(stack: Stack, resource: str, name: str) -> dict[str, Any] | None:
    try:
        return stack.kube.get(resource, name, NS)
    except ApiError:
        return None


def _phase(p: dict[str, Any] | None) -> str:
    return "" if p is None else str((p.get("status") or {}).get("phase") or "Pending")


def _allocated(claim: dict[str, Any]) -> list[str]:
    results = claim["status"]["allocation"]["devices"]["results"]
    assert {(r["driver"], r["pool"]) for r in results} == {(GPU_CLASS, "n1")}
    return sorted(r["device"] for r in results)


async def _running_on_n1(stack: Stack, slurm: ModernSlurm, name: str) -> tuple[int, ...]:
    """Wait for pod ``name`` to run; return the GPU indices real Slurm gave its job on n1
    (none of which is the foreign job's)."""
    await stack.wait_for(
        lambda: _phase(_get(stack, "pods", name)) == "Running", timeout=60, what=f"{name} running"
    )
    pod = _get(stack, "pods", name)
    assert pod is not None and pod["spec"]["nodeName"] == "n1"
    job_id = int(pod["metadata"]["labels"][wellknown.LABEL_SLURM_JOBID])
    gres = _gres(slurm, job_id)
    assert gres is not None and gres[0] == "n1", f"job {job_id}: {gres}"
    foreign = slurm.run("squeue", "-h", "-n", "someone-else", "-o", "%i").stdout.split()
    (held,) = [_gres(slurm, int(j)) for j in foreign]
    assert held is not None and not set(held[1]) & set(gres[1])
    return gres[1]


async def test_extended_resource_claim_names_the_gpus_real_slurm_gave(
    stack: Stack, slurm_gpus: ModernSlurm
) -> None:
    stack.kube.add_pod(
        "trainer",
        NS,
        scheduler_name=wellknown.DEFAULT_SCHEDULER_NAME,
        annotations={**ANNOTATIONS, ANNOTATION_RUN_SECONDS: "3"},
        requests={"cpu": "1", "memory": "100Mi", GPU_RES: "2"},
    )
    indices = await _running_on_n1(stack, slurm_gpus, "trainer")
    assert len(indices) == 2
    pod = _get(stack, "pods", "trainer")
    assert pod is not None
    name = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    claim = _get(stack, "resourceclaims", name)
    assert claim is not None
    assert _allocated(claim) == [f"gpu-{i}" for i in indices]
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]

    # The pod ends: the claim slurmbridge made for it is deleted.
    await stack.wait_for(
        lambda: _phase(_get(stack, "pods", "trainer")) == "Succeeded", timeout=30, what="ended"
    )
    await stack.wait_for(
        lambda: _get(stack, "resourceclaims", name) is None, timeout=30, what="claim deleted"
    )
    records = await stack.action_records()
    kinds = [type(r.action) for r in records if r.outcome == "ok"]
    assert kinds.index(CreateExtendedResourceClaim) < kinds.index(BindPod), "claim before bind"
    assert not [r for r in records if r.outcome == "failed"]
    assert await stack.dead_letters() == []


async def test_template_claim_names_the_gpus_real_slurm_gave(
    stack: Stack, slurm_gpus: ModernSlurm
) -> None:
    stack.kube.create(claim_template("two-gpus", NS, GPU_CLASS, 2))
    annotations = {**ANNOTATIONS, ANNOTATION_RUN_SECONDS: "3"}
    stack.kube.create(pod_with_claim_template("solver", NS, annotations, "two-gpus"))
    indices = await _running_on_n1(stack, slurm_gpus, "solver")
    assert len(indices) == 2
    pod = _get(stack, "pods", "solver")
    assert pod is not None
    (made,) = pod["status"]["resourceClaimStatuses"]
    claim = _get(stack, "resourceclaims", made["resourceClaimName"])
    assert claim is not None
    assert _allocated(claim) == [f"gpu-{i}" for i in indices]
    assert {r["request"] for r in claim["status"]["allocation"]["devices"]["results"]} == {"gpus"}

    # The pod ends: its claim (from the template) is released, not deleted.
    await stack.wait_for(
        lambda: _phase(_get(stack, "pods", "solver")) == "Succeeded", timeout=30, what="ended"
    )

    def released() -> bool:
        c = _get(stack, "resourceclaims", made["resourceClaimName"])
        return c is not None and not (c.get("status") or {}).get("allocation")

    await stack.wait_for(released, timeout=30, what="claim released")
    records = await stack.action_records()
    kinds = [type(r.action) for r in records if r.outcome == "ok"]
    assert kinds.index(AllocateResourceClaim) < kinds.index(BindPod), "claim before bind"
    assert not [r for r in records if r.outcome == "failed"]
    assert await stack.dead_letters() == []


async def test_a_pod_of_a_job_that_ends_gives_back_its_gpu_while_the_other_runs(
    stack: Stack, slurm_gpus: ModernSlurm
) -> None:
    """A 2-pod Job of one GPU per pod in partition gpu (n1, n2): one real Slurm job on both
    nodes; each pod's claim names the GPU Slurm gave the job on the pod's node. The first pod
    ends: its claim is deleted while the second pod runs and the job keeps running."""
    first, second = create_group(
        stack.kube,
        "Job",
        "train",
        2,
        annotations=ANNOTATIONS,
        requests={"cpu": "1", "memory": "100Mi", GPU_RES: "1"},
    )
    await stack.wait_for(
        lambda: all(_phase(_get(stack, "pods", n)) == "Running" for n in (first, second)),
        timeout=60,
        what="both pods running",
    )
    pods = [_get(stack, "pods", n) or {} for n in (first, second)]
    (job_id,) = {int(p["metadata"]["labels"][wellknown.LABEL_SLURM_JOBID]) for p in pods}
    by_node = _gres_by_node(slurm_gpus, job_id)
    assert by_node is not None and set(by_node) == {"n1", "n2"}, by_node
    claims = [p["status"]["extendedResourceClaimStatus"]["resourceClaimName"] for p in pods]
    for p, name in zip(pods, claims, strict=True):
        node = p["spec"]["nodeName"]
        claim = _get(stack, "resourceclaims", name)
        assert claim is not None
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [(r["pool"], r["device"]) for r in results] == [
            (node, f"gpu-{i}") for i in by_node[node]
        ]

    stack.kube.patch_merge(
        "pods", first, {"metadata": {"annotations": {ANNOTATION_RUN_SECONDS: "0"}}}, NS
    )
    await stack.wait_for(
        lambda: _get(stack, "resourceclaims", claims[0]) is None,
        timeout=30,
        what="the ended pod's claim deleted",
    )
    assert _phase(_get(stack, "pods", second)) == "Running"
    assert _gres_by_node(slurm_gpus, job_id) == by_node, "the job runs on, holding its GPUs"
    kept = _get(stack, "resourceclaims", claims[1])
    assert kept is not None and [r["name"] for r in kept["status"]["reservedFor"]] == [second]
    await stack.settled()  # the claim is gone before the release's record is written
    records = await stack.action_records()
    released = [
        (r.action.claim.name, r.action.delete)
        for r in records
        if isinstance(r.action, ReleaseResourceClaim) and r.outcome == "ok"
    ]
    assert released == [(claims[0], True)]
    assert not [r for r in records if r.outcome == "failed"]
    assert await stack.dead_letters() == []
