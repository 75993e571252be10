"""The Kubernetes simulator's resource.k8s.io/v1 (DeviceClass, ResourceClaim with its status,
ResourceClaimTemplate, ResourceSlice): the validation slurmbridge relies on
(pkg/apis/resource/validation/validation.go), the resourceclaim controller's claims from
templates (pkg/controller/resourceclaim/controller.go), and the kubelet waiting for a pod's
claims to be reserved for it (pkg/kubelet/cm/dra/manager.go)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from slurmbridge.devtools.sim.kube import ApiError, KubeSim

NS = "default"


@pytest.fixture
async def sim() -> AsyncIterator[KubeSim]:
    s = KubeSim(kubelet=True)
    s.add_node("k1")
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


async def until(cond: Any, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "timed out"
        await asyncio.sleep(0.01)


def claim_body(name: str = "c1", **exactly: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", **exactly}}
                ]
            }
        },
    }


ALLOCATION = {
    "devices": {
        "results": [
            {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "k1", "device": "gpu-0"}
        ]
    },
    "nodeSelector": {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["k1"]}]}
        ]
    },
}


async def test_claims_are_defaulted_and_validated(sim: KubeSim) -> None:
    made = sim.create(claim_body())
    assert made["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "gpu.nvidia.com",
        "allocationMode": "ExactCount",
        "count": 1,
    }
    assert "status" not in made  # dropped on create
    with pytest.raises(ApiError) as bad:
        sim.create(claim_body("c2", count=0))
    assert bad.value.code == 422
    assert (
        "spec.devices.requests[0].exactly.count: Invalid value: 0: must be greater than zero"
        in (bad.value.message)
    )
    with pytest.raises(ApiError) as bad:
        sim.create(
            {
                **claim_body("c3"),
                "spec": {"devices": {"requests": [{"name": "Bad_Name", "exactly": {}}]}},
            }
        )
    assert "spec.devices.requests[0].name" in bad.value.message
    assert "spec.devices.requests[0].exactly.deviceClassName: Required value" in bad.value.message
    # The spec is immutable.
    with pytest.raises(ApiError) as bad:
        sim.patch_merge(
            "resourceclaims",
            "c1",
            {
                "spec": {
                    "devices": {"requests": [{"name": "x", "exactly": {"deviceClassName": "y"}}]}
                }
            },
            NS,
        )
    assert bad.value.code == 422 and "field is immutable" in bad.value.message


async def test_claim_status_rules(sim: KubeSim) -> None:
    sim.create(claim_body())
    consumer = {"resource": "pods", "name": "p", "uid": "u1"}
    with pytest.raises(ApiError) as bad:
        sim.patch_merge(
            "resourceclaims",
            "c1",
            {"status": {"reservedFor": [consumer]}},
            NS,
            subresource="status",
        )
    assert "status.reservedFor: Forbidden: may not be specified when `allocated` is not set" in (
        bad.value.message
    )
    wrong = {"devices": {"results": [{**ALLOCATION["devices"]["results"][0], "request": "nope"}]}}
    with pytest.raises(ApiError) as bad:
        sim.patch_merge(
            "resourceclaims", "c1", {"status": {"allocation": wrong}}, NS, subresource="status"
        )
    assert "must be the name of a request in the claim" in bad.value.message
    sim.patch_merge(
        "resourceclaims",
        "c1",
        {"status": {"allocation": ALLOCATION, "reservedFor": [consumer]}},
        NS,
        subresource="status",
    )
    other = {"devices": {"results": [{**ALLOCATION["devices"]["results"][0], "device": "gpu-1"}]}}
    with pytest.raises(ApiError) as bad:
        sim.patch_merge(
            "resourceclaims", "c1", {"status": {"allocation": other}}, NS, subresource="status"
        )
    assert "status.allocation" in bad.value.message and "field is immutable" in bad.value.message
    # Released: reservation and allocation removed (merge patch nulls).
    sim.patch_merge(
        "resourceclaims",
        "c1",
        {"status": {"reservedFor": None, "allocation": None}},
        NS,
        subresource="status",
    )
    assert sim.get("resourceclaims", "c1", NS).get("status") == {}


async def test_slices_are_validated(sim: KubeSim) -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s1"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "k1",
            "pool": {"name": "k1", "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"index": {"int": 0}}}],
        },
    }
    sim.create(body)
    with pytest.raises(ApiError) as bad:
        sim.create({**body, "metadata": {"name": "s2"}, "spec": {**body["spec"], "allNodes": True}})
    assert "exactly one of `nodeName`, `nodeSelector`, `allNodes`" in bad.value.message
    with pytest.raises(ApiError) as bad:
        sim.create(
            {
                **body,
                "metadata": {"name": "s3"},
                "spec": {
                    **body["spec"],
                    "pool": {"name": "p"},
                    "devices": [{"name": "d", "attributes": {"a": {}}}],
                },
            }
        )
    assert "spec.pool.resourceSliceCount" in bad.value.message
    assert "spec.devices[0].attributes[a]" in bad.value.message
    with pytest.raises(ApiError) as bad:
        sim.patch_merge("resourceslices", "s1", {"spec": {"nodeName": "k2"}})
    assert "spec.nodeName" in bad.value.message and "field is immutable" in bad.value.message
    # Field selectors of ResourceSlices.
    assert [
        s["metadata"]["name"] for s in sim.list("resourceslices", field_selector="spec.nodeName=k1")
    ] == ["s1"]


async def test_device_classes_are_validated(sim: KubeSim) -> None:
    """pkg/apis/resource/validation/validation.go ``validateDeviceClassSpec``: each selector
    needs ``cel`` with an expression that compiles (an empty one does not); at most 32
    selectors."""

    def dc(name: str, selectors: list[Any]) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": selectors},
        }

    sim.create(dc("accel", [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]))
    with pytest.raises(ApiError) as bad:
        sim.create(dc("no-cel", [{}]))
    assert bad.value.code == 422 and "spec.selectors[0].cel: Required value" in bad.value.message
    with pytest.raises(ApiError) as bad:
        sim.create(dc("empty", [{"cel": {"expression": ""}}]))
    assert "spec.selectors[0].cel.expression" in bad.value.message
    with pytest.raises(ApiError) as bad:
        sim.create(dc("many", [{"cel": {"expression": "true"}}] * 33))
    assert "spec.selectors: Too many: 33: must have at most 32 items" in bad.value.message


async def test_claims_from_templates_and_the_kubelet_waits_for_them(sim: KubeSim) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NS},
        "spec": {
            "containers": [{"name": "main", "image": "x"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
        },
    }
    uid = sim.create(pod)["metadata"]["uid"]
    await asyncio.sleep(0.05)
    assert sim.list("resourceclaims", NS) == [], "no template yet: no claim"
    sim.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t", "namespace": NS},
            "spec": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                        ]
                    }
                },
            },
        }
    )

    def made() -> list[dict[str, Any]]:
        p = sim.get("pods", "p", NS)
        return list((p.get("status") or {}).get("resourceClaimStatuses") or [])

    await until(lambda: bool(made()))
    (status,) = made()
    assert status["name"] == "gpu" and status["resourceClaimName"].startswith("p-gpu-")
    claim = sim.get("resourceclaims", status["resourceClaimName"], NS)
    assert claim["metadata"]["labels"] == {"team": "a"}
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
    (owner,) = claim["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1

    # Bound without a reserved claim: the kubelet does not start it.
    sim.bind("p", "k1", NS)
    await asyncio.sleep(0.1)
    assert sim.get("pods", "p", NS)["status"]["phase"] == "Pending"
    sim.patch_merge(
        "resourceclaims",
        status["resourceClaimName"],
        {
            "status": {
                "allocation": ALLOCATION,
                "reservedFor": [{"resource": "pods", "name": "p", "uid": uid}],
            }
        },
        NS,
        subresource="status",
    )
    await until(lambda: sim.get("pods", "p", NS)["status"]["phase"] == "Running")
    # Only one claim however often the pod changes.
    sim.patch_merge("pods", "p", {"metadata": {"labels": {"x": "y"}}}, NS)
    await asyncio.sleep(0.05)
    assert len(sim.list("resourceclaims", NS)) == 1


async def test_served_through_the_api(sim: KubeSim, tmp_path: Any) -> None:
    path = sim.write_kubeconfig(tmp_path / "kubeconfig")
    api = await config.new_client_from_config(config_file=str(path))
    try:
        custom = client.CustomObjectsApi(api)
        await custom.create_cluster_custom_object(
            "resource.k8s.io",
            "v1",
            "deviceclasses",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": "dra.cpu"},
            },
        )
        listing = await custom.list_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses")
        assert [d["metadata"]["name"] for d in listing["items"]] == ["dra.cpu"]
        await custom.create_namespaced_custom_object(
            "resource.k8s.io", "v1", NS, "resourceclaims", claim_body()
        )
        with pytest.raises(client.ApiException) as exc:
            await custom.patch_namespaced_custom_object_status(
                "resource.k8s.io",
                "v1",
                NS,
                "resourceclaims",
                "c1",
                {"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}},
                _content_type="application/merge-patch+json",
            )
        assert exc.value.status == 422
    finally:
        await api.close()
