"""What a job holds per node: Slurm's ``gres_detail`` and ``job_resources`` decoded
(codecs), translated (producers), and reported by the slurmrestd simulator as Slurm does;
and the DRA objects translated from Kubernetes (producers/kube/translate.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from producers.kube.translate import (
    pod_to_event,
    resource_claim_to_event,
    resource_slice_to_event,
    selected_node,
)
from producers.slurm.translate import job_to_event
from schemas.events import (
    AllocatedDevice,
    ClaimConsumer,
    ClaimRequest,
    DraRequest,
    GresAlloc,
    NodeAlloc,
    OwnerRef,
    PodClaim,
    SliceDevice,
)
from slurmbridge.devtools.sim.slurmjobs import bit_fmt, gres_indices, parse_tres_gres
from slurmbridge.devtools.sim.slurmrestd import SlurmSim
from slurmbridge.kube.wire import (
    DECODE_POD,
    DECODE_RESOURCE_CLAIM,
    DECODE_RESOURCE_SLICE,
    RawNodeSelector,
    RawNodeSelectorRequirement,
    RawNodeSelectorTerm,
)
from slurmbridge.slurm.codecs import _dataparser
from slurmbridge.slurm.codecs._common import parse_gres_detail, parse_index_list
from slurmbridge.slurm.errors import BadResponse
from slurmbridge.slurm.models import JobGres, JobNodeResources

# --- gres_detail (gres_stepmgr_job_build_details, src/stepmgr/gres_stepmgr.c) -----------------


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("gpu:nvidia:2(IDX:0-1)", [JobGres(name="gpu", type="nvidia", count=2, indices=(0, 1))]),
        ("gpu:2(IDX:0,2)", [JobGres(name="gpu", count=2, indices=(0, 2))]),
        ("gpu:3(IDX:0,2-3)", [JobGres(name="gpu", count=3, indices=(0, 2, 3))]),
        (
            "gpu:a100:1(IDX:3),nic:1(IDX:0)",
            [
                JobGres(name="gpu", type="a100", count=1, indices=(3,)),
                JobGres(name="nic", count=1, indices=(0,)),
            ],
        ),
        ("gpu(CNT:2)", [JobGres(name="gpu", count=2)]),
        ("gpu:0(IDX:N/A)", [JobGres(name="gpu")]),
        ("shard:2(2/4,0/4)", [JobGres(name="shard", count=2)]),
        ("", []),
    ],
)
def test_gres_detail(text: str, want: list[JobGres]) -> None:
    assert list(parse_gres_detail(text)) == want


@pytest.mark.parametrize("text", ["gpu:2", "gpu:2(IDX:0-1)x", "gpu:2(IDX:a)", "gpu:2(IDX:3-1)"])
def test_bad_gres_detail_is_a_bad_response(text: str) -> None:
    with pytest.raises(BadResponse):
        parse_gres_detail(text)


def test_index_lists_are_bit_fmt() -> None:
    assert parse_index_list("0-2,5,7-8") == (0, 1, 2, 5, 7, 8)
    assert bit_fmt([8, 0, 1, 2, 5, 7]) == "0-2,5,7-8"


# --- job_resources (data_parser _dump_node_res, parsers.c) ---------------------------------------


def core(i: int, allocated: bool) -> dict[str, Any]:
    return {"index": i, "status": ["ALLOCATED", "IN_USE"] if allocated else ["UNALLOCATED"]}


def job_body(**extra: Any) -> bytes:
    job = {
        "job_id": 5,
        "job_state": ["RUNNING"],
        "nodes": "n[1-2]",
        **extra,
    }
    return json.dumps({"jobs": [job]}).encode()


def test_job_resources_and_gres_detail_per_node() -> None:
    res = {
        "nodes": {
            "count": 2,
            "list": "n[1-2]",
            "allocation": [
                {
                    "index": 0,
                    "name": "n1",
                    "sockets": [
                        {"index": 0, "cores": [core(0, False), core(1, True)]},
                        {"index": 1, "cores": [core(0, True), core(1, False)]},
                    ],
                },
                {"index": 1, "name": "n2", "sockets": [{"index": 0, "cores": [core(0, True)]}]},
            ],
        }
    }
    body = job_body(gres_detail=["gpu:2(IDX:1-2)", "gpu:2(IDX:0-1)"], job_resources=res)
    listing = _dataparser.decode_job_list(body)
    assert listing is not None
    (job,) = listing.jobs
    # n1: socket 1 core 0 is abstract core 2 (2 cores per socket).
    assert job.allocation == (
        JobNodeResources(
            node="n1", gres=(JobGres(name="gpu", count=2, indices=(1, 2)),), cores=(1, 2)
        ),
        JobNodeResources(
            node="n2", gres=(JobGres(name="gpu", count=2, indices=(0, 1)),), cores=(0,)
        ),
    )
    ev = job_to_event(job, cluster="c1")
    assert ev.allocation_on("n1") == NodeAlloc(
        node="n1", gres=(GresAlloc(name="gpu", count=2, indices=(1, 2)),), cores=(1, 2)
    )
    assert ev.allocation_on("n3") is None


def test_pending_jobs_and_v0038_shapes_have_no_allocation() -> None:
    listing = _dataparser.decode_job_list(job_body(gres_detail=[]))
    assert listing is not None and listing.jobs[0].allocation == ()
    # v0.0.38: job_resources.nodes is a hostlist string, no cores reported.
    body = job_body(gres_detail=["gpu:1(IDX:0)"], job_resources={"nodes": "n[1-2]"})
    listing = _dataparser.decode_job_list(body)
    assert listing is not None
    assert listing.jobs[0].allocation[0] == JobNodeResources(
        node="n1", gres=(JobGres(name="gpu", count=1, indices=(0,)),)
    )


def test_a_bad_gres_detail_names_the_job_and_node() -> None:
    with pytest.raises(BadResponse, match=r"job 5: gres_detail\[0\]"):
        _dataparser.decode_job_list(job_body(gres_detail=["gpu:1(IDX:x)"]))


# --- the simulator reports them as Slurm does ------------------------------------------------


def test_tres_per_node_gres() -> None:
    assert parse_tres_gres("cpu=2,gres/gpu=2") == ("gpu", "", 2)
    assert parse_tres_gres("gres/gpu:nvidia=1") == ("gpu", "nvidia", 1)
    assert parse_tres_gres("") is None


def test_node_gres_indices_run_over_its_entries() -> None:
    assert gres_indices("gpu:a100:2,gpu:v100:2", "gpu", "v100") == [2, 3]
    assert gres_indices("gpu:a100:2,gpu:v100:2", "gpu", "") == [0, 1, 2, 3]
    assert gres_indices("gpu:2(S:0-1)", "gpu", "") == [0, 1]


def test_the_simulator_allocates_free_gpus_and_cores() -> None:
    sim = SlurmSim()
    sim.add_node("g1", cpus=4, gres="gpu:nvidia:4")
    sim.add_node("c1", cpus=4)
    first = sim.submit(
        {"name": "a", "tres_per_node": "gres/gpu=1", "cpus_per_task": 2}, external=True
    )
    second = sim.submit(
        {"name": "b", "tres_per_node": "gres/gpu:nvidia=2", "cpus_per_task": 1}, external=True
    )
    # More GPUs than are free: waits.
    third = sim.submit({"name": "c", "tres_per_node": "gres/gpu=2"}, external=True)
    a, b, c = sim.job(first), sim.job(second), sim.job(third)
    assert (a.nodes, b.nodes, c.state) == (("g1",), ("g1",), ("PENDING",))
    # Untyped request, typed node: Slurm names the node's type (recorded from 24.11.5 and
    # 26.05.5, tests/real_slurm/test_modern_dra.py).
    assert a.allocation[0].gres == (JobGres(name="gpu", type="nvidia", count=1, indices=(0,)),)
    assert sim._render_job_full("v0.0.44", sim.jobs_by_id[first])["gres_detail"] == [
        "gpu:nvidia:1(IDX:0)"
    ]
    assert a.allocation[0].cores == (0, 1)
    assert b.allocation[0].gres == (JobGres(name="gpu", type="nvidia", count=2, indices=(1, 2)),)
    assert b.allocation[0].cores == (2,)
    rendered = sim._render_job_full("v0.0.44", sim.jobs_by_id[second])
    assert rendered["gres_detail"] == ["gpu:nvidia:2(IDX:1-2)"]
    assert rendered["tres_per_node"] == "gres/gpu:nvidia=2"
    sockets = rendered["job_resources"]["nodes"]["allocation"][0]["sockets"]
    assert [c["status"] for s in sockets for c in s["cores"]] == [
        ["UNALLOCATED"],
        ["UNALLOCATED"],
        ["ALLOCATED"],
        ["UNALLOCATED"],
    ]
    # Ending a job frees its GPUs: the waiting one starts on the free ones (0 and 3, the
    # second job still holds 1 and 2).
    sim.cancel_job(first)
    c = sim.job(third)
    assert c.state == ("RUNNING",)
    assert c.allocation[0].gres[0].indices == (0, 3)
    assert sim._render_job_full("v0.0.38", sim.jobs_by_id[third]).get("job_resources") is None


# --- Kubernetes objects ------------------------------------------------------------------------


def test_pod_dra_fields() -> None:
    raw = DECODE_POD.decode(
        json.dumps(
            {
                "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
                "spec": {
                    "initContainers": [
                        {
                            "name": "i",
                            "resources": {
                                "limits": {"deviceclass.resource.kubernetes.io/dra.cpu": "1"}
                            },
                        }
                    ],
                    "containers": [
                        {
                            "name": "main",
                            "resources": {
                                "requests": {
                                    "cpu": "1",
                                    "deviceclass.resource.kubernetes.io/gpu.nvidia.com": "2",
                                }
                            },
                        }
                    ],
                    "resourceClaims": [
                        {"name": "a", "resourceClaimTemplateName": "t"},
                        {"name": "b", "resourceClaimName": "shared"},
                        {"name": "c", "resourceClaimTemplateName": "t"},
                    ],
                },
                "status": {
                    "resourceClaimStatuses": [{"name": "a", "resourceClaimName": "p-a-x1"}],
                    "extendedResourceClaimStatus": {
                        "resourceClaimName": "p-extended-resources-y",
                        "requestMappings": [],
                    },
                },
            }
        ).encode()
    )
    ev = pod_to_event(raw, producer="t", observed_at=0)
    assert ev.dra_requests == (
        DraRequest(
            container="i",
            resource="deviceclass.resource.kubernetes.io/dra.cpu",
            device_class="dra.cpu",
            count=1,
        ),
        DraRequest(
            container="main",
            resource="deviceclass.resource.kubernetes.io/gpu.nvidia.com",
            device_class="gpu.nvidia.com",
            count=2,
        ),
    )
    assert ev.claims == (
        PodClaim(name="a", template_name="t", generated="p-a-x1"),
        PodClaim(name="b", resource_claim_name="shared"),
        PodClaim(name="c", template_name="t"),
    )
    assert [c.claim for c in ev.claims] == ["p-a-x1", "shared", ""]
    assert ev.extended_claim == "p-extended-resources-y"


def test_resource_slice() -> None:
    raw = DECODE_RESOURCE_SLICE.decode(
        json.dumps(
            {
                "metadata": {"name": "k1-gpu", "uid": "s1", "resourceVersion": "9"},
                "spec": {
                    "driver": "gpu.nvidia.com",
                    "nodeName": "k1",
                    "pool": {"name": "k1", "generation": 3, "resourceSliceCount": 1},
                    "devices": [
                        {
                            "name": "gpu-0",
                            "attributes": {
                                "index": {"int": 0},
                                "uuid": {"string": "GPU-1"},
                                "mig": {"bool": False},
                                "driverVersion": {"version": "550.0.0"},
                            },
                        }
                    ],
                },
            }
        ).encode()
    )
    ev = resource_slice_to_event(raw, producer="t", observed_at=0)
    assert (ev.key, ev.node, ev.driver, ev.pool, ev.pool_generation, ev.slice_count) == (
        "k1-gpu",
        "k1",
        "gpu.nvidia.com",
        "k1",
        3,
        1,
    )
    assert ev.devices == (
        SliceDevice(
            name="gpu-0",
            attributes={"index": 0, "uuid": "GPU-1", "mig": False, "driverVersion": "550.0.0"},
        ),
    )


def test_resource_claim() -> None:
    raw = DECODE_RESOURCE_CLAIM.decode(
        json.dumps(
            {
                "metadata": {
                    "name": "p-gpu-x",
                    "namespace": "ns",
                    "uid": "c1",
                    "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": "p",
                            "uid": "u",
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
                            {
                                "name": "any",
                                "firstAvailable": [{"name": "x", "deviceClassName": "y"}],
                            },
                        ]
                    }
                },
                "status": {
                    "allocation": {
                        "devices": {
                            "results": [
                                {
                                    "request": "gpus",
                                    "driver": "gpu.nvidia.com",
                                    "pool": "k1",
                                    "device": "gpu-3",
                                }
                            ]
                        },
                        "nodeSelector": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {"key": "metadata.name", "operator": "In", "values": ["k1"]}
                                    ]
                                }
                            ]
                        },
                    },
                    "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}],
                },
            }
        ).encode()
    )
    ev = resource_claim_to_event(raw, producer="t", observed_at=0)
    assert ev.key == "ns/p-gpu-x"
    assert ev.owner == OwnerRef(api_version="v1", kind="Pod", name="p", uid="u")
    assert (ev.pod_claim_name, ev.extended, ev.allocated, ev.node) == ("gpu", False, True, "k1")
    # ExactCount with count 1 by default (the API server's defaults); firstAvailable kept
    # without a class (not supported: placement says so).
    assert ev.requests == (
        ClaimRequest(name="gpus", device_class="gpu.nvidia.com", mode="ExactCount", count=1),
        ClaimRequest(name="any", device_class="", mode="", count=0),
    )
    assert ev.results == (
        AllocatedDevice(request="gpus", driver="gpu.nvidia.com", pool="k1", device="gpu-3"),
    )
    assert ev.reserved_for == (ClaimConsumer(resource="pods", name="p", uid="u"),)
    assert ev.reserved_for_pod("u") and not ev.reserved_for_pod("v")


@pytest.mark.parametrize(
    ("terms", "node"),
    [
        (
            [
                RawNodeSelectorTerm(
                    matchFields=[
                        RawNodeSelectorRequirement(
                            key="metadata.name", operator="In", values=["k1"]
                        )
                    ]
                )
            ],
            "k1",
        ),
        (
            [
                RawNodeSelectorTerm(
                    matchExpressions=[
                        RawNodeSelectorRequirement(
                            key="kubernetes.io/hostname", operator="In", values=["k2"]
                        )
                    ]
                )
            ],
            "k2",
        ),
        (
            [
                RawNodeSelectorTerm(
                    matchFields=[
                        RawNodeSelectorRequirement(
                            key="metadata.name", operator="In", values=["a", "b"]
                        )
                    ]
                )
            ],
            "",
        ),
        (
            [
                RawNodeSelectorTerm(
                    matchExpressions=[
                        RawNodeSelectorRequirement(key="zone", operator="In", values=["z"])
                    ]
                )
            ],
            "",
        ),
    ],
    ids=["metadata.name", "hostname", "two nodes", "a zone"],
)
def test_selected_node(terms: list[RawNodeSelectorTerm], node: str) -> None:
    assert selected_node(RawNodeSelector(nodeSelectorTerms=terms)) == node
    assert selected_node(None) == ""
