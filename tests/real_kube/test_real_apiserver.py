"""Issue 17's findings 1, 2 and 4 against a real kube-apiserver (see conftest.py).

The same facts the simulator's tests check (tests/integration/test_kube_scale.py,
test_kube_preconditions.py, test_kube_admission.py), asked of the real server, with the
effectors that depend on them: a Scale at zero replicas answers ``spec: {}`` and a step up from
there is recorded as "up"; ``metadata.uid`` in a merge patch is an immutable field (422) on a
main resource and ``pods/status`` and is ignored on a custom resource's ``/status`` and
``/scale``, while resourceVersion, a JSON-patch test, DeleteOptions and Binding uids are real
preconditions; a new Node carries the not-ready taint from admission, and our taint writes keep
it and every foreign taint. (No controller manager runs here, so that taint stays.) An Event
about a Node outside ``default`` is refused (422), and the effector puts it in ``default``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas import wellknown
from schemas.actions import (
    NodeSetRef,
    PodRef,
    RecordEvent,
    ScaleNodeSet,
    SetNodeSetStatus,
    SetPodLabel,
    TaintNode,
    UntaintNode,
)
from schemas.events import NodeSetStatus
from slurmbridge.config import KubeSettings
from slurmbridge.effectors.nodes import KubeEffector
from slurmbridge.effectors.nodesets import NodeSetEffector
from slurmbridge.kube import client as kube
from tests.integration.test_kube_preconditions import OTHER_UID, immutable_uid
from tests.real_kube.conftest import ControlPlane

pytestmark = pytest.mark.real_kube

GROUP, VERSION = "slinky.slurm.net", "v1alpha1"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
NOT_READY = ("node.kubernetes.io/not-ready", "", "NoSchedule")
OTHER = ("example.com/dedicated", "gpu", "NoSchedule")
OURS = (wellknown.TAINT_MANAGED_NODE, "slurm-bridge-scheduler", wellknown.TAINT_MANAGED_NODE_EFFECT)


@pytest.fixture
async def api(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    settings = KubeSettings(kubeconfig=str(control_plane.kubeconfig))
    async with await kube.api_client(settings) as api_client:
        yield api_client


@pytest.fixture
async def namespace(api: client.ApiClient) -> str:
    """A namespace of this test's own (no namespace controller runs to finalize deleting it,
    so it is left behind with the session's server)."""
    name = f"t-{secrets.token_hex(4)}"
    await client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    return name


def nodeset(namespace: str, name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeSet",
        "metadata": {"name": name, "namespace": namespace, "annotations": {"a": "1"}},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "slurmd", "image": "s"}]}},
        },
    }


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }


async def refused(call: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as exc:
        await call
    return exc.value.status, json.loads(exc.value.body)


async def test_finding_1_scale_from_zero(api: client.ApiClient, namespace: str) -> None:
    custom = client.CustomObjectsApi(api)
    created = await custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "nodesets", nodeset(namespace, "burst", 0)
    )
    scale = await custom.get_namespaced_custom_object_scale(
        GROUP, VERSION, namespace, "nodesets", "burst"
    )
    assert scale["spec"] == {}
    assert scale["status"]["replicas"] == 0

    ref = NodeSetRef(namespace=namespace, name="burst", uid=created["metadata"]["uid"])
    effector = NodeSetEffector(api, {})
    result = await effector.apply(ScaleNodeSet(nodeset=ref, replicas=2, at=1000, why="0 → 2"))
    assert result.outcome == "ok"
    obj = await custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "nodesets", "burst")
    assert obj["spec"]["replicas"] == 2
    assert obj["metadata"]["annotations"][wellknown.ANNOTATION_AUTOSCALE_LAST_DIRECTION] == "up"


async def test_finding_2_what_is_a_precondition(api: client.ApiClient, namespace: str) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    p = await core.create_namespaced_pod(namespace, pod("p"))
    ns1 = await custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "nodesets", nodeset(namespace, "ns1", 1)
    )
    body = {"metadata": {"uid": OTHER_UID, "labels": {"x": "y"}}}
    # Not a precondition: an immutable field on a main resource and on pods/status…
    for kind, name, call in (
        ("Pod", "p", core.patch_namespaced_pod("p", namespace, body, _content_type=MERGE)),
        (
            f"NodeSet.{GROUP}",
            "ns1",
            custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, "nodesets", "ns1", body, _content_type=MERGE
            ),
        ),
        (
            "Pod",
            "p",
            core.patch_namespaced_pod_status(
                "p",
                namespace,
                {"metadata": {"uid": OTHER_UID}, "status": {"message": "m"}},
                _content_type=MERGE,
            ),
        ),
    ):
        assert await refused(call) == (422, immutable_uid(kind, name))
    # … and ignored on a custom resource's /status and /scale.
    got = await custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        "nodesets",
        "ns1",
        {"metadata": {"uid": OTHER_UID}, "status": {"replicas": 3}},
        _content_type=MERGE,
    )
    assert (got["metadata"]["uid"], got["status"]["replicas"]) == (ns1["metadata"]["uid"], 3)
    scale = await custom.patch_namespaced_custom_object_scale(
        GROUP,
        VERSION,
        namespace,
        "nodesets",
        "ns1",
        {"metadata": {"uid": OTHER_UID}, "spec": {"replicas": 4}},
        _content_type=MERGE,
    )
    assert scale["spec"] == {"replicas": 4}

    # Real preconditions.
    stale = ns1["metadata"]["resourceVersion"]
    code, status = await refused(
        custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            "nodesets",
            "ns1",
            {"metadata": {"resourceVersion": stale}, "status": {"replicas": 1}},
            _content_type=MERGE,
        )
    )
    assert (code, status["reason"]) == (409, "Conflict")
    test_uid = {"op": "test", "path": "/metadata/uid", "value": OTHER_UID}
    label = {"op": "add", "path": "/metadata/labels/x", "value": "y"}
    code, status = await refused(
        core.patch_namespaced_pod("p", namespace, [test_uid, label], _content_type=JSON_PATCH)
    )
    assert (code, status["reason"]) == (422, "Invalid")
    code, _ = await refused(
        core.delete_namespaced_pod(
            "p", namespace, body=client.V1DeleteOptions(preconditions={"uid": OTHER_UID})
        )
    )
    assert code == 409
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "uid": OTHER_UID},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "nowhere"},
    }
    resp = await core.create_namespaced_pod_binding("p", namespace, binding, _preload_content=False)
    assert resp.status == 409
    resp.release()

    # The effectors leave re-created objects alone.
    effector = NodeSetEffector(api, {})
    old_pod = PodRef(namespace=namespace, name="p", uid=p.metadata.uid)
    await core.delete_namespaced_pod("p", namespace, grace_period_seconds=0)
    await core.create_namespaced_pod(namespace, pod("p"))
    result = await effector.apply(SetPodLabel(pod=old_pod, label="x", value="y"))
    assert (result.outcome, result.detail) == ("noop", "pod is gone")
    assert (await core.read_namespaced_pod("p", namespace)).metadata.labels == {"app": "p"}

    old_set = NodeSetRef(namespace=namespace, name="ns1", uid=ns1["metadata"]["uid"])
    await custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "nodesets", "ns1")
    await custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "nodesets", nodeset(namespace, "ns1", 1)
    )
    status_action = SetNodeSetStatus(nodeset=old_set, status=NodeSetStatus(replicas=7))
    result = await effector.apply(status_action)
    assert (result.outcome, result.detail) == ("noop", "NodeSet was re-created")
    scale_action = ScaleNodeSet(nodeset=old_set, replicas=5, at=1000, why="1 → 5")
    result = await effector.apply(scale_action)
    assert (result.outcome, result.detail) == ("noop", "NodeSet was re-created")
    now = await custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "nodesets", "ns1")
    assert now["spec"]["replicas"] == 1
    assert "status" not in now or now["status"].get("replicas") != 7
    assert now["metadata"]["annotations"] == {"a": "1"}


async def test_finding_4_the_admission_taint_and_our_taint_writes(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    name = f"n-{secrets.token_hex(4)}"
    created = await core.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name},
            "spec": {"taints": [{"key": OTHER[0], "value": OTHER[1], "effect": OTHER[2]}]},
        }
    )

    async def taints() -> list[tuple[str, str, str]]:
        node = await core.read_node(name)
        return [(t.key, t.value or "", t.effect) for t in node.spec.taints or []]

    assert [(t.key, t.value or "", t.effect) for t in created.spec.taints] == [OTHER, NOT_READY]
    effector = KubeEffector(api)
    key, value, effect = OURS
    result = await effector.apply(TaintNode(node=name, key=key, value=value, effect=effect))
    assert result.outcome == "ok"
    assert await taints() == [OTHER, NOT_READY, OURS]
    result = await effector.apply(UntaintNode(node=name, key=key, effect=effect))
    assert result.outcome == "ok"
    assert await taints() == [OTHER, NOT_READY]
    await core.delete_node(name)


async def test_an_event_about_a_node_belongs_in_default(
    api: client.ApiClient, namespace: str
) -> None:
    """Issue "Fail closed at every edge" (9): the simulator's 422 (test_sim_kube.py), asked of
    the real server, and the effector's Node Event landing where the server takes it."""
    core = client.CoreV1Api(api)
    create: Any = core.create_namespaced_event
    body = {
        "metadata": {"name": "rk-node.1", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": "rk-node"},
        "reason": "Tested",
        "message": "m",
        "type": "Normal",
    }
    with pytest.raises(ApiException) as exc:
        await create(namespace, body)
    assert exc.value.status == 422
    answer = json.loads(exc.value.body)
    assert answer["reason"] == "Invalid"
    assert answer["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "": does not match event.namespace',
            "field": "involvedObject.namespace",
        }
    ]
    result = await KubeEffector(api).apply(
        RecordEvent(
            api_version="v1", object_kind="Node", name="rk-node", reason="Tested", message="m"
        )
    )
    assert result.outcome == "ok"
    events = (await core.list_namespaced_event("default")).items
    assert [e.involved_object.name for e in events if e.reason == "Tested"] == ["rk-node"]
