"""What is, and what is not, a precondition on a real API server (issue 17, finding 2).

Observed on kube-apiserver 1.32: ``metadata.uid`` in a merge patch is *not* a precondition.
On a main resource and on ``pods/status`` it answers 422 ``metadata.uid: Invalid value: "…":
field is immutable``; on a custom resource's ``/status`` and ``/scale`` it answers 200 and the
patch is applied to whatever object has that name now. The real preconditions are a patch's
``metadata.resourceVersion`` (409, subresources included), a JSON-patch ``test`` of
``/metadata/uid`` (422), DeleteOptions ``preconditions.uid`` and a Binding's ``metadata.uid``
(409), and a PUT body's ``metadata.uid`` (409).

The first half checks the simulator answers exactly that; the second that the effectors that
relied on a uid in a merge patch (SetPodLabel, SetNodeSetStatus, ScaleNodeSet) never write to
a re-created object — also when it is re-created between their read and their write — and
report a gone or replaced pod as ``noop``, not as a dead letter.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas.actions import NodeSetRef, PodRef, ScaleNodeSet, SetNodeSetStatus, SetPodLabel
from schemas.events import NodeSetStatus
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.effectors.nodesets import NodeSetEffector
from slurmbridge.runtime.outcomes import Transient

pytestmark = pytest.mark.integration

NS = "default"
GROUP, VERSION = "slinky.slurm.net", "v1alpha1"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
OTHER_UID = "00000000-0000-0000-0000-000000000000"
PROTECT = "slinky.slurm.net/pod-protect"


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def nodeset(name: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeSet",
        "metadata": {"name": name, "namespace": NS, "annotations": {"a": "1"}},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "slurmd", "image": "s"}]}},
        },
    }


async def refused(call: Any) -> tuple[int, dict[str, Any]]:
    """The status code and Status body of a call the server must refuse."""
    with pytest.raises(ApiException) as exc:
        await call
    return exc.value.status, json.loads(exc.value.body)


def immutable_uid(kind: str, name: str) -> dict[str, Any]:
    """The 422 Status of ValidateObjectMetaUpdate for a changed uid: once in the message
    (ErrorList.ToAggregate drops repeats), twice among the causes (rest.BeforeUpdate's common
    checks and the strategy's ValidateUpdate both find it)."""
    detail = f'Invalid value: "{OTHER_UID}": field is immutable'
    cause = {"reason": "FieldValueInvalid", "message": detail, "field": "metadata.uid"}
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{kind} "{name}" is invalid: metadata.uid: {detail}',
        "reason": "Invalid",
        "details": {
            "name": name,
            **({"group": GROUP} if kind.endswith(GROUP) else {}),
            "kind": kind.split(".")[0],
            "causes": [cause, cause],
        },
        "code": 422,
    }


def after(target: Any, method: str, then: Callable[[], None]) -> None:
    """Make ``target.method`` run ``then`` once, right after its first answer is in: a write
    by someone else landing between an effector's read and its own write."""
    original = getattr(target, method)
    fired = False

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        nonlocal fired
        result = await original(*args, **kwargs)
        if not fired:
            fired = True
            then()
        return result

    setattr(target, method, wrapped)


# --- the simulator answers as kube-apiserver 1.32 -------------------------------------------


async def test_a_uid_in_a_merge_patch_is_an_immutable_field_not_a_precondition(
    sim: KubeSim, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    sim.add_node("n1")
    sim.add_pod("p")
    sim.create(nodeset("ns1"))
    before = sim.resource_version
    body = {"metadata": {"uid": OTHER_UID, "labels": {"x": "y"}}}
    for kind, name, call in (
        ("Node", "n1", core.patch_node("n1", body, _content_type=MERGE)),
        ("Pod", "p", core.patch_namespaced_pod("p", NS, body, _content_type=MERGE)),
        (
            f"NodeSet.{GROUP}",
            "ns1",
            custom.patch_namespaced_custom_object(
                GROUP, VERSION, NS, "nodesets", "ns1", body, _content_type=MERGE
            ),
        ),
        (
            "Pod",
            "p",
            core.patch_namespaced_pod_status(
                "p",
                NS,
                {"metadata": {"uid": OTHER_UID}, "status": {"message": "m"}},
                _content_type=MERGE,
            ),
        ),
    ):
        assert await refused(call) == (422, immutable_uid(kind, name))
    assert sim.resource_version == before  # nothing was written


async def test_a_custom_resources_status_and_scale_ignore_a_uid_in_a_patch(
    sim: KubeSim, custom: client.CustomObjectsApi
) -> None:
    uid = sim.create(nodeset("ns1"))["metadata"]["uid"]
    got = await custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        NS,
        "nodesets",
        "ns1",
        {"metadata": {"uid": OTHER_UID}, "status": {"replicas": 3}},
        _content_type=MERGE,
    )
    assert got["metadata"]["uid"] == uid
    assert got["status"] == {"replicas": 3}  # applied
    scale = await custom.patch_namespaced_custom_object_scale(
        GROUP,
        VERSION,
        NS,
        "nodesets",
        "ns1",
        {"metadata": {"uid": OTHER_UID}, "spec": {"replicas": 4}},
        _content_type=MERGE,
    )
    assert scale["spec"] == {"replicas": 4}
    obj = sim.get("nodesets", "ns1", NS)
    assert (obj["metadata"]["uid"], obj["spec"]["replicas"]) == (uid, 4)


async def test_the_real_preconditions(
    sim: KubeSim, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    sim.add_node("n1")
    pod = sim.add_pod("p")
    stale = sim.create(nodeset("ns1"))["metadata"]["resourceVersion"]
    sim.patch_merge("nodesets", "ns1", {"metadata": {"labels": {"moved": "on"}}}, NS)

    # A stale resourceVersion in a patch: 409, on subresources too.
    for call in (
        custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            NS,
            "nodesets",
            "ns1",
            {"metadata": {"resourceVersion": stale}, "status": {"replicas": 1}},
            _content_type=MERGE,
        ),
        custom.patch_namespaced_custom_object_scale(
            GROUP,
            VERSION,
            NS,
            "nodesets",
            "ns1",
            {"metadata": {"resourceVersion": stale}, "spec": {"replicas": 5}},
            _content_type=MERGE,
        ),
    ):
        code, status = await refused(call)
        assert (code, status["reason"]) == (409, "Conflict")
    assert "status" not in sim.get("nodesets", "ns1", NS)

    # A JSON patch testing /metadata/uid: 422 for another uid, applied for the right one.
    test_uid = {"op": "test", "path": "/metadata/uid", "value": OTHER_UID}
    label = {"op": "add", "path": "/metadata/labels/x", "value": "y"}
    code, status = await refused(
        core.patch_namespaced_pod("p", NS, [test_uid, label], _content_type=JSON_PATCH)
    )
    assert (code, status["reason"]) == (422, "Invalid")
    right = {**test_uid, "value": pod["metadata"]["uid"]}
    await core.patch_namespaced_pod("p", NS, [right, label], _content_type=JSON_PATCH)
    assert sim.get("pods", "p", NS)["metadata"]["labels"] == {"x": "y"}

    # A PUT body's uid, DeleteOptions preconditions.uid, a Binding's uid: 409.
    current = await core.read_namespaced_pod("p", NS)
    current.metadata.uid = OTHER_UID
    code, status = await refused(core.replace_namespaced_pod("p", NS, current))
    assert code == 409
    assert status["message"] == (
        f'Operation cannot be fulfilled on pods "p": Precondition failed: UID in precondition: '
        f"{OTHER_UID}, UID in object meta: {pod['metadata']['uid']}"
    )
    code, _ = await refused(
        core.delete_namespaced_pod(
            "p", NS, body=client.V1DeleteOptions(preconditions={"uid": OTHER_UID})
        )
    )
    assert code == 409
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "uid": OTHER_UID},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    resp = await core.create_namespaced_pod_binding("p", NS, binding, _preload_content=False)
    assert resp.status == 409
    resp.release()
    assert not sim.get("pods", "p", NS)["spec"].get("nodeName")


# --- the effectors guard their writes with real preconditions --------------------------------


def replace_pod(sim: KubeSim, name: str = "p") -> str:
    """Delete pod ``name`` and create another of that name; the new uid."""
    sim.delete_pod(name, NS)
    return str(sim.add_pod(name, labels={"app": "new"})["metadata"]["uid"])


def replace_nodeset(sim: KubeSim, name: str = "ns1") -> str:
    """Delete NodeSet ``name`` and create another of that name (one replica); the new uid."""
    sim.delete("nodesets", name, NS)
    return str(sim.create(nodeset(name))["metadata"]["uid"])


async def test_set_pod_label_sets_and_removes_a_label(sim: KubeSim, api: client.ApiClient) -> None:
    effector = NodeSetEffector(api, {})
    for labels in ({"app": "a"}, {}):  # to a labels map, and where there is none yet
        uid = sim.add_pod(f"p{len(labels)}", labels=labels)["metadata"]["uid"]
        ref = PodRef(namespace=NS, name=f"p{len(labels)}", uid=uid)
        result = await effector.apply(SetPodLabel(pod=ref, label=PROTECT, value="true"))
        assert result.outcome == "ok"
        assert sim.get("pods", ref.name, NS)["metadata"]["labels"] == {**labels, PROTECT: "true"}
        result = await effector.apply(SetPodLabel(pod=ref, label=PROTECT, value="true"))
        assert result.outcome == "noop"
        result = await effector.apply(SetPodLabel(pod=ref, label=PROTECT, value=None))
        assert result.outcome == "ok"
        assert sim.get("pods", ref.name, NS)["metadata"]["labels"] == labels


async def test_set_pod_label_never_labels_a_replaced_pod(
    sim: KubeSim, api: client.ApiClient
) -> None:
    effector = NodeSetEffector(api, {})
    old = PodRef(namespace=NS, name="p", uid=sim.add_pod("p")["metadata"]["uid"])
    replace_pod(sim)
    result = await effector.apply(SetPodLabel(pod=old, label=PROTECT, value="true"))
    assert (result.outcome, result.detail) == ("noop", "pod is gone")
    assert sim.get("pods", "p", NS)["metadata"]["labels"] == {"app": "new"}
    assert sim.requests[("patch", "pods")] == 0  # not even tried

    # Replaced between the effector's read and its patch: the patch's uid test fails (422).
    sim.add_pod("q", labels={"app": "old"})
    old = PodRef(namespace=NS, name="q", uid=sim.get("pods", "q", NS)["metadata"]["uid"])
    after(effector.core, "read_namespaced_pod", lambda: replace_pod(sim, "q"))
    result = await effector.apply(SetPodLabel(pod=old, label=PROTECT, value="true"))
    assert (result.outcome, result.detail) == ("noop", "pod is gone")
    assert sim.get("pods", "q", NS)["metadata"]["labels"] == {"app": "new"}
    assert sim.requests[("patch", "pods")] == 1

    # And gone altogether.
    sim.delete_pod("q", NS)
    result = await effector.apply(SetPodLabel(pod=old, label=PROTECT, value="true"))
    assert (result.outcome, result.detail) == ("noop", "pod is gone")


async def test_set_nodeset_status_never_writes_to_a_recreated_nodeset(
    sim: KubeSim, api: client.ApiClient
) -> None:
    effector = NodeSetEffector(api, {})
    ref = NodeSetRef(namespace=NS, name="ns1", uid=sim.create(nodeset("ns1"))["metadata"]["uid"])
    action = SetNodeSetStatus(nodeset=ref, status=NodeSetStatus(replicas=1, slurm_idle=1))
    assert (await effector.apply(action)).outcome == "ok"
    assert sim.get("nodesets", "ns1", NS)["status"]["slurmIdle"] == 1

    replace_nodeset(sim)
    result = await effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", "NodeSet was re-created")
    assert "status" not in sim.get("nodesets", "ns1", NS)

    # Re-created between the read and the patch: the resourceVersion no longer matches (409).
    ref = NodeSetRef(
        namespace=NS, name="ns1", uid=sim.get("nodesets", "ns1", NS)["metadata"]["uid"]
    )
    action = SetNodeSetStatus(nodeset=ref, status=NodeSetStatus(replicas=1, slurm_idle=1))
    after(effector.custom, "get_namespaced_custom_object", lambda: replace_nodeset(sim))
    with pytest.raises(Transient):
        await effector.apply(action)
    assert "status" not in sim.get("nodesets", "ns1", NS)
    result = await effector.apply(action)  # the retry
    assert (result.outcome, result.detail) == ("noop", "NodeSet was re-created")


@pytest.mark.parametrize("when", ["before", "after the read", "after the stamp"])
async def test_scale_nodeset_never_scales_a_recreated_nodeset(
    sim: KubeSim, api: client.ApiClient, when: str
) -> None:
    effector = NodeSetEffector(api, {})
    ref = NodeSetRef(namespace=NS, name="ns1", uid=sim.create(nodeset("ns1"))["metadata"]["uid"])
    action = ScaleNodeSet(nodeset=ref, replicas=3, at=1000, why="1 → 3")
    if when == "before":
        replace_nodeset(sim)
        result = await effector.apply(action)
    elif when == "after the read":
        after(effector.custom, "get_namespaced_custom_object_scale", lambda: replace_nodeset(sim))
        with pytest.raises(Transient):  # the stamp's resourceVersion is stale: 409
            await effector.apply(action)
        result = await effector.apply(action)  # the retry
    else:
        after(effector.custom, "patch_namespaced_custom_object", lambda: replace_nodeset(sim))
        result = await effector.apply(action)  # the scale's uid test fails: 422
    assert (result.outcome, result.detail) == ("noop", "NodeSet was re-created")
    obj = sim.get("nodesets", "ns1", NS)
    assert obj["metadata"]["uid"] != ref.uid
    assert obj["spec"]["replicas"] == 1
    assert obj["metadata"]["annotations"] == {"a": "1"}
