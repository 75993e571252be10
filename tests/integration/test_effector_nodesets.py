"""NodeSetEffector through ``apply``: the Kubernetes simulator (and, for scale-in, the
slurmrestd simulator), both over HTTP.

CreateNodeSetPod, DeleteNodeSetPod, DeleteFailedNodeSetPod, EnsureNodeSetPDB,
SetNodeSetStatus, ScaleNodeSet and SetPodLabel: the outcome each reports, the objects
afterwards, the preconditions (a re-created NodeSet or pod is another object; a pod whose
Slurm node may still run something is never deleted) and how failures map onto Transient /
Permanent. tests/integration/test_kube_preconditions.py covers the races of SetPodLabel,
SetNodeSetStatus and ScaleNodeSet with a re-creation between read and write.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from schemas import wellknown
from schemas.actions import (
    CreateNodeSetPod,
    DeleteFailedNodeSetPod,
    DeleteNodeSetPod,
    EnsureNodeSetPDB,
    EnsureNodeSetRevision,
    KeepNodeSetPodClaims,
    MarkPods,
    NodeSetRef,
    PodRef,
    ScaleNodeSet,
    SetNodeSetStatus,
    SetPodAnnotation,
    SetPodLabel,
)
from schemas.events import NodeSetCondition, NodeSetStatus
from slurmbridge.devtools.sim.kube import ApiError, KubeSim
from slurmbridge.devtools.sim.slurmrestd import SlurmSim
from slurmbridge.effectors.nodesets import NodeSetEffector
from slurmbridge.kube import revisions
from slurmbridge.runtime.outcomes import Permanent, Transient
from slurmbridge.slurm.client import SlurmClient

pytestmark = pytest.mark.integration

NS = "default"
CLUSTER = "sim"
FAILURES = wellknown.ANNOTATION_NODESET_POD_FAILURES
LAST = wellknown.ANNOTATION_AUTOSCALE_LAST_SCALE
DIRECTION = wellknown.ANNOTATION_AUTOSCALE_LAST_DIRECTION
PROTECT = wellknown.LABEL_POD_PROTECT
SCALE_IN = wellknown.scale_in_drain_reason(NS, "x")


def nodeset(name: str, replicas: int = 1, **spec: Any) -> dict[str, Any]:
    # v1beta1: the 1.x fields (scalingMode, volumeClaimTemplates …) are pruned at v1alpha1,
    # as the API server prunes to the schema of the version written at.
    return {
        "apiVersion": "slinky.slurm.net/v1beta1",
        "kind": "NodeSet",
        "metadata": {"name": name, "namespace": NS, "annotations": {"keep": "me"}},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"tier": "slurmd"}, "annotations": {"note": "from-tpl"}},
                "spec": {"containers": [{"name": "slurmd", "image": "slurmd:26.05"}]},
            },
            **spec,
        },
    }


def add_nodeset(sim: KubeSim, name: str, replicas: int = 1, **spec: Any) -> NodeSetRef:
    uid = sim.create(nodeset(name, replicas, **spec))["metadata"]["uid"]
    return NodeSetRef(namespace=NS, name=name, uid=uid)


def recreate_nodeset(sim: KubeSim, name: str) -> None:
    sim.delete("nodesets", name, NS)
    sim.create(nodeset(name))


def ref(pod: dict[str, Any]) -> PodRef:
    meta = pod["metadata"]
    return PodRef(namespace=meta["namespace"], name=meta["name"], uid=meta["uid"])


def replace_pod(sim: KubeSim, name: str) -> None:
    sim.delete_pod(name, NS, grace_period_seconds=0)
    sim.add_pod(name, labels={"app": "new"})


def pod_or_none(sim: KubeSim, name: str) -> dict[str, Any] | None:
    try:
        return sim.get("pods", name, NS)
    except ApiError:
        return None


@pytest.fixture
def effector(api: client.ApiClient) -> NodeSetEffector:
    return NodeSetEffector(api, {})


# --- CreateNodeSetPod ------------------------------------------------------------------------


async def test_create_daemonset_pod_generates_its_name_pins_it_and_is_not_repeated(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    """DaemonSet mode (slurm-operator utils.go NewNodeSetDaemonSetPod): generateName
    ``<nodeset>-``, hostname and pod-hostname label the node's hostname, node affinity
    ``metadata.name In [node]``; extraConf as ``--conf``. A second create for that hostname
    is a noop (generateName would make a second pod)."""
    ns = add_nodeset(sim, "cr-d", extraConf="weight=3", scalingMode="DaemonSet")
    action = CreateNodeSetPod(nodeset=ns, pod_name="", ordinal=-1, node="n1.lab", hostname="n1")
    assert (await effector.apply(action)).outcome == "ok"
    (pod,) = [p for p in sim.list("pods", NS) if p["metadata"]["name"].startswith("cr-d-")]
    assert pod["metadata"]["generateName"] == "cr-d-"
    assert pod["spec"]["hostname"] == "n1"
    assert pod["metadata"]["labels"][wellknown.LABEL_POD_HOSTNAME] == "n1"
    assert pod["metadata"]["labels"][wellknown.LABEL_SCALING_MODE] == "DaemonSet"
    assert pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1.lab"]}]}
        ]
    }
    assert pod["spec"]["containers"][0]["args"] == ["--conf", "Features=cr-d Weight=3"]
    again = await effector.apply(action)
    assert again.outcome == "noop"
    assert len([p for p in sim.list("pods", NS) if p["metadata"]["name"].startswith("cr-d-")]) == 1


CLAIM_TEMPLATE = {
    "metadata": {"name": "scratch", "labels": {"disk": "fast"}},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
}


@pytest.mark.parametrize(
    ("policy", "owned"), [({}, False), ({"whenDeleted": "Delete", "whenScaled": "Retain"}, True)]
)
async def test_create_pod_makes_its_claims_and_mounts_them(
    sim: KubeSim, effector: NodeSetEffector, policy: dict[str, str], owned: bool
) -> None:
    """volumeClaimTemplates (slurm-operator utils.go GetPersistentVolumeClaims /
    UpdateStorage): claim ``<template>-<pod>`` created before the pod, the pod's volume of
    that name points at it; whenDeleted Delete makes the NodeSet its controller owner. A
    claim that exists is reused."""
    ns = add_nodeset(
        sim,
        "cr-v",
        volumeClaimTemplates=[CLAIM_TEMPLATE],
        persistentVolumeClaimRetentionPolicy=policy,
    )
    assert (
        await effector.apply(CreateNodeSetPod(nodeset=ns, pod_name="cr-v-0", ordinal=0))
    ).outcome == "ok"
    claim = sim.get("persistentvolumeclaims", "scratch-cr-v-0", NS)
    assert claim["metadata"]["labels"] == {
        "disk": "fast",
        "app.kubernetes.io/name": "slurmd",
        "app.kubernetes.io/instance": "cr-v",
    }
    assert claim["spec"]["resources"] == {"requests": {"storage": "1Gi"}}
    owners = claim["metadata"].get("ownerReferences") or []
    assert [(o["kind"], o["uid"], o["controller"]) for o in owners] == (
        [("NodeSet", ns.uid, True)] if owned else []
    )
    pod = sim.get("pods", "cr-v-0", NS)
    assert pod["spec"]["volumes"] == [
        {"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch-cr-v-0"}}
    ]
    # The pod is re-created: the claim is kept and mounted again.
    sim.delete_pod("cr-v-0", NS, grace_period_seconds=0)
    assert (
        await effector.apply(CreateNodeSetPod(nodeset=ns, pod_name="cr-v-0", ordinal=0))
    ).outcome == "ok"
    again = sim.get("persistentvolumeclaims", "scratch-cr-v-0", NS)
    assert again["metadata"]["uid"] == claim["metadata"]["uid"]


async def test_daemonset_claims_are_named_after_the_hostname(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    ns = add_nodeset(sim, "cr-w", scalingMode="DaemonSet", volumeClaimTemplates=[CLAIM_TEMPLATE])
    action = CreateNodeSetPod(nodeset=ns, pod_name="", ordinal=-1, node="n1.lab", hostname="n1")
    assert (await effector.apply(action)).outcome == "ok"
    assert sim.get("persistentvolumeclaims", "scratch-cr-w-n1", NS)["metadata"]["name"]


def test_sim_validates_claims_as_the_api_server() -> None:
    """ValidatePersistentVolumeClaimSpec: access modes and a storage request are required."""
    sim = KubeSim()
    with pytest.raises(ApiError) as err:
        sim.create(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "bad", "namespace": NS},
                "spec": {},
            }
        )
    assert err.value.code == 422
    assert "spec.accessModes" in str(err.value) and "spec.resources[storage]" in str(err.value)
    made = sim.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "ok", "namespace": NS},
            "spec": CLAIM_TEMPLATE["spec"],
            "status": {"phase": "Bound"},
        }
    )
    assert made["status"] == {}


async def test_create_pinned_pod_gets_the_node_affinity(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    """pinToNode (utils.go pinPodToNode): the ordinal's node as required node affinity."""
    ns = add_nodeset(sim, "cr-p", pinToNode=True)
    await effector.apply(CreateNodeSetPod(nodeset=ns, pod_name="cr-p-0", ordinal=0, node="n2"))
    pod = sim.get("pods", "cr-p-0", NS)
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n2"]
    assert pod["spec"]["hostname"] == "cr-p-0"
    assert "args" not in pod["spec"]["containers"][0]  # no extraConf, no --conf


async def test_create_pod_builds_it_from_the_template_then_is_a_noop(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    ns = add_nodeset(sim, "cr-a", serviceName="cr-a-svc")
    action = CreateNodeSetPod(nodeset=ns, pod_name="cr-a-0", ordinal=0)

    result = await effector.apply(action)
    assert (result.outcome, result.detail) == ("ok", "pod cr-a-0 created")
    pod = sim.get("pods", "cr-a-0", NS)
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["labels"] == {
        "tier": "slurmd",
        "app.kubernetes.io/name": "slurmd",
        "app.kubernetes.io/instance": "cr-a",
        # The revision of the template just read (slurm-operator historycontrol.SetRevision).
        wellknown.LABEL_REVISION_HASH: revisions.spec_revision_hash(
            sim.get("nodesets", "cr-a", NS)["spec"]
        ),
        # slurm-operator utils.go initIdentity.
        wellknown.LABEL_POD_HOSTNAME: "cr-a-0",
        wellknown.LABEL_SCALING_MODE: "StatefulSet",
    }
    assert meta["annotations"] == {"note": "from-tpl"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "slinky.slurm.net/v1beta1",  # the storage version we write at
            "kind": "NodeSet",
            "name": "cr-a",
            "uid": ns.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert (spec["hostname"], spec["subdomain"]) == ("cr-a-0", "cr-a-svc")
    assert [c["image"] for c in spec["containers"]] == ["slurmd:26.05"]

    result = await effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", "pod cr-a-0 exists")


async def test_create_pod_without_a_service_name_has_no_subdomain(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    uid = add_nodeset(sim, "cr-b").uid
    # Without a uid in the action, the owner reference takes the NodeSet's.
    unpinned = NodeSetRef(namespace=NS, name="cr-b")
    assert (
        await effector.apply(CreateNodeSetPod(nodeset=unpinned, pod_name="cr-b-1", ordinal=1))
    ).outcome == "ok"
    pod = sim.get("pods", "cr-b-1", NS)
    assert "subdomain" not in pod["spec"]
    assert pod["metadata"]["ownerReferences"][0]["uid"] == uid


async def test_create_pod_for_a_gone_or_recreated_nodeset_is_a_noop(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    gone = NodeSetRef(namespace=NS, name="cr-gone", uid="0")
    result = await effector.apply(CreateNodeSetPod(nodeset=gone, pod_name="cr-gone-0", ordinal=0))
    assert (result.outcome, result.detail) == ("noop", "NodeSet is gone")

    old = add_nodeset(sim, "cr-c")
    recreate_nodeset(sim, "cr-c")
    result = await effector.apply(CreateNodeSetPod(nodeset=old, pod_name="cr-c-0", ordinal=0))
    assert (result.outcome, result.detail) == ("noop", "NodeSet was re-created")
    assert pod_or_none(sim, "cr-c-0") is None
    assert pod_or_none(sim, "cr-gone-0") is None


@pytest.mark.parametrize(("status", "expected"), [(503, Transient), (403, Permanent)])
async def test_create_pod_errors_map_to_transient_or_permanent(
    sim: KubeSim, effector: NodeSetEffector, status: int, expected: type[Exception]
) -> None:
    ns = add_nodeset(sim, "cr-d")
    sim.fail_next(1, status, verb="create", resource="pods")
    with pytest.raises(expected, match="CreateNodeSetPod"):
        await effector.apply(CreateNodeSetPod(nodeset=ns, pod_name="cr-d-0", ordinal=0))
    assert pod_or_none(sim, "cr-d-0") is None


# --- DeleteNodeSetPod ------------------------------------------------------------------------


@dataclass
class Scaled:
    kube: KubeSim
    slurm: SlurmSim
    effector: NodeSetEffector


@pytest.fixture
async def scaled(sim: KubeSim, api: client.ApiClient, tmp_path: Path) -> AsyncIterator[Scaled]:
    slurm = SlurmSim(cluster=CLUSTER)
    slurm.seed_default(4)
    await slurm.start()
    c = SlurmClient(slurm.url, slurm.write_token(tmp_path / "slurm-token"), "slurmrest")
    try:
        await c.negotiate()
        yield Scaled(sim, slurm, NodeSetEffector(api, {CLUSTER: c}))
    finally:
        await c.aclose()
        await slurm.stop()


def scale_in(pod: PodRef, slurm_node: str) -> DeleteNodeSetPod:
    return DeleteNodeSetPod(pod=pod, cluster=CLUSTER, slurm_node=slurm_node)


async def test_delete_pod_of_a_drained_idle_node(scaled: Scaled) -> None:
    scaled.slurm.admin_drain("n1", SCALE_IN)
    pod = scaled.kube.add_pod("dl-a")
    result = await scaled.effector.apply(scale_in(ref(pod), "n1"))
    assert (result.outcome, result.detail) == ("ok", "drained and idle")
    assert pod_or_none(scaled.kube, "dl-a") is None

    result = await scaled.effector.apply(scale_in(ref(pod), "n1"))
    assert (result.outcome, result.detail) == ("noop", "pod is gone")


async def test_delete_pod_whose_node_slurm_does_not_know(scaled: Scaled) -> None:
    pod = scaled.kube.add_pod("dl-b")
    result = await scaled.effector.apply(scale_in(ref(pod), "never-registered"))
    assert (result.outcome, result.detail) == ("ok", "not in Slurm")
    assert pod_or_none(scaled.kube, "dl-b") is None


@pytest.mark.parametrize("state", ["idle", "draining"])
async def test_delete_pod_skips_a_node_that_is_not_drained_and_idle(
    scaled: Scaled, state: str
) -> None:
    if state == "draining":
        scaled.slurm.allocate("n2", 1)
        scaled.slurm.admin_drain("n2", SCALE_IN)
    pod = scaled.kube.add_pod("dl-c")
    result = await scaled.effector.apply(scale_in(ref(pod), "n2"))
    assert result.outcome == "skipped"
    assert pod_or_none(scaled.kube, "dl-c") is not None


async def test_delete_pod_fails_closed_when_slurm_cannot_be_asked(scaled: Scaled) -> None:
    """slurm-operator PR #79: a failed lookup is not "drained"."""
    scaled.slurm.admin_drain("n3", SCALE_IN)
    pod = scaled.kube.add_pod("dl-d")
    scaled.slurm.fail_next(1, 503)
    with pytest.raises(Transient, match="cannot tell whether n3 is drained"):
        await scaled.effector.apply(scale_in(ref(pod), "n3"))
    assert pod_or_none(scaled.kube, "dl-d") is not None


async def test_delete_pod_of_a_replaced_pod_is_a_noop(scaled: Scaled) -> None:
    scaled.slurm.admin_drain("n4", SCALE_IN)
    old = scaled.kube.add_pod("dl-e")
    replace_pod(scaled.kube, "dl-e")
    result = await scaled.effector.apply(scale_in(ref(old), "n4"))
    assert (result.outcome, result.detail) == ("noop", "pod is gone")
    new = pod_or_none(scaled.kube, "dl-e")
    assert new is not None
    assert new["metadata"]["labels"] == {"app": "new"}


def claim_owners_of(sim: KubeSim, name: str) -> list[tuple[str, str, bool]]:
    """The claim's ownerReferences as (kind, uid, controller). The simulator has no garbage
    collector: what the collector would do follows from these."""
    meta = sim.get("persistentvolumeclaims", name, NS)["metadata"]
    return [
        (o["kind"], o["uid"], bool(o.get("controller"))) for o in meta.get("ownerReferences") or []
    ]


async def claimed_pods(
    scaled: Scaled, name: str, policy: dict[str, str], n: int = 2, **spec: Any
) -> tuple[NodeSetRef, list[dict[str, Any]]]:
    ns = add_nodeset(
        scaled.kube,
        name,
        n,
        volumeClaimTemplates=[CLAIM_TEMPLATE],
        persistentVolumeClaimRetentionPolicy=policy,
        **spec,
    )
    pods = []
    for o in range(n):
        action = CreateNodeSetPod(nodeset=ns, pod_name=f"{name}-{o}", ordinal=o)
        assert (await scaled.effector.apply(action)).outcome == "ok"
        pods.append(scaled.kube.get("pods", f"{name}-{o}", NS))
    return ns, pods


async def test_scale_in_with_when_scaled_delete_hands_the_claims_to_the_pod(
    scaled: Scaled,
) -> None:
    """whenScaled: Delete (Kubernetes stateful_pod_control.go
    UpdatePodClaimForRetentionPolicy; 1.x podcontrol.go updateClaimOwnerRefForSetAndPod):
    just before a scale-in delete, the condemned pod becomes its claims' controller owner in
    place of the NodeSet, so the garbage collector deletes them with it; the kept pod's claim
    stays the NodeSet's."""
    ns, pods = await claimed_pods(scaled, "sc-a", {"whenDeleted": "Delete", "whenScaled": "Delete"})
    assert claim_owners_of(scaled.kube, "scratch-sc-a-1") == [("NodeSet", ns.uid, True)]
    scaled.slurm.admin_drain("n1", SCALE_IN)
    action = DeleteNodeSetPod(pod=ref(pods[1]), cluster=CLUSTER, slurm_node="n1", scaled_from=ns)
    result = await scaled.effector.apply(action)
    assert (result.outcome, result.detail) == (
        "ok",
        "drained and idle; claims updated: scratch-sc-a-1",
    )
    assert pod_or_none(scaled.kube, "sc-a-1") is None
    owner = claim_owners_of(scaled.kube, "scratch-sc-a-1")
    assert owner == [("Pod", pods[1]["metadata"]["uid"], True)]
    assert claim_owners_of(scaled.kube, "scratch-sc-a-0") == [("NodeSet", ns.uid, True)]


@pytest.mark.parametrize(
    ("policy", "scale_in_delete"),
    [
        ({"whenDeleted": "Delete"}, True),  # whenScaled Retain (the default)
        ({"whenDeleted": "Delete", "whenScaled": "Delete"}, False),  # an update's delete
    ],
)
async def test_claims_stay_the_nodesets_unless_scaled_in_with_when_scaled_delete(
    scaled: Scaled, policy: dict[str, str], scale_in_delete: bool
) -> None:
    ns, pods = await claimed_pods(scaled, "sc-b", policy)
    scaled.slurm.admin_drain("n2", SCALE_IN)
    action = DeleteNodeSetPod(
        pod=ref(pods[1]),
        cluster=CLUSTER,
        slurm_node="n2",
        scaled_from=ns if scale_in_delete else None,
    )
    result = await scaled.effector.apply(action)
    assert result.outcome == "ok"
    assert pod_or_none(scaled.kube, "sc-b-1") is None
    assert claim_owners_of(scaled.kube, "scratch-sc-b-1") == [("NodeSet", ns.uid, True)]


async def test_a_skipped_delete_leaves_the_claims_and_a_failed_write_keeps_the_pod(
    scaled: Scaled,
) -> None:
    """The claims are handed over only once the node is drained and idle, and before the
    delete: a claim write that fails (409: changed meanwhile) keeps the pod, to retry."""
    ns, pods = await claimed_pods(scaled, "sc-c", {"whenScaled": "Delete"})
    scaled.slurm.allocate("n3", 1)
    scaled.slurm.admin_drain("n3", SCALE_IN)
    action = DeleteNodeSetPod(pod=ref(pods[1]), cluster=CLUSTER, slurm_node="n3", scaled_from=ns)
    assert (await scaled.effector.apply(action)).outcome == "skipped"
    assert claim_owners_of(scaled.kube, "scratch-sc-c-1") == []
    action = DeleteNodeSetPod(pod=ref(pods[0]), cluster=CLUSTER, slurm_node="n4", scaled_from=ns)
    scaled.slurm.admin_drain("n4", SCALE_IN)
    scaled.kube.fail_next(1, 409, verb="patch", resource="persistentvolumeclaims")
    with pytest.raises(Transient):
        await scaled.effector.apply(action)
    assert pod_or_none(scaled.kube, "sc-c-0") is not None
    assert claim_owners_of(scaled.kube, "scratch-sc-c-0") == []
    assert (await scaled.effector.apply(action)).outcome == "ok"
    assert claim_owners_of(scaled.kube, "scratch-sc-c-0") == [
        ("Pod", pods[0]["metadata"]["uid"], True)
    ]


@pytest.mark.parametrize(
    ("policy", "owners"),
    [
        ({"whenScaled": "Delete"}, []),
        ({"whenScaled": "Delete", "whenDeleted": "Delete"}, ["NodeSet"]),
    ],
)
async def test_keep_claims_takes_a_reversed_pods_ownership_back(
    scaled: Scaled, policy: dict[str, str], owners: list[str]
) -> None:
    """A reversed scale-in (the pod is kept): its claims never name the pod as owner
    (updateClaimOwnerRefForSetAndPod with the pod not condemned); a second pass writes
    nothing."""
    ns, pods = await claimed_pods(scaled, "sc-d", policy, n=1)
    pod = pods[0]
    meta = pod["metadata"]
    by_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    # As an interrupted scale-in left it.
    scaled.kube.patch_merge(
        "persistentvolumeclaims", "scratch-sc-d-0", {"metadata": {"ownerReferences": [by_pod]}}, NS
    )
    action = KeepNodeSetPodClaims(nodeset=ns, pod=ref(pod), slurm_node="sc-d-0")
    result = await scaled.effector.apply(action)
    assert (result.outcome, result.detail) == ("ok", "claims updated: scratch-sc-d-0")
    assert [kind for kind, _, _ in claim_owners_of(scaled.kube, "scratch-sc-d-0")] == owners
    again = await scaled.effector.apply(action)
    assert (again.outcome, again.detail) == ("noop", "claims as wanted: scratch-sc-d-0")
    # A gone NodeSet: nothing to settle.
    scaled.kube.delete("nodesets", "sc-d", NS)
    assert (await scaled.effector.apply(action)).outcome == "noop"


async def test_daemonset_scale_in_names_the_claims_after_the_hostname(scaled: Scaled) -> None:
    ns = add_nodeset(
        scaled.kube,
        "sc-e",
        scalingMode="DaemonSet",
        volumeClaimTemplates=[CLAIM_TEMPLATE],
        persistentVolumeClaimRetentionPolicy={"whenScaled": "Delete"},
    )
    create = CreateNodeSetPod(nodeset=ns, pod_name="", ordinal=-1, node="n1.lab", hostname="n1")
    assert (await scaled.effector.apply(create)).outcome == "ok"
    (pod,) = [p for p in scaled.kube.list("pods", NS) if p["metadata"]["name"].startswith("sc-e-")]
    scaled.slurm.admin_drain("n1", SCALE_IN)
    action = DeleteNodeSetPod(pod=ref(pod), cluster=CLUSTER, slurm_node="n1", scaled_from=ns)
    assert (await scaled.effector.apply(action)).outcome == "ok"
    assert claim_owners_of(scaled.kube, "scratch-sc-e-n1") == [
        ("Pod", pod["metadata"]["uid"], True)
    ]


async def test_delete_pod_for_a_cluster_without_a_client_is_retried(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    pod = sim.add_pod("dl-f")
    with pytest.raises(Transient, match="no Slurm client") as exc:
        await effector.apply(scale_in(ref(pod), "n1"))
    assert exc.value.delay == 5.0
    assert pod_or_none(sim, "dl-f") is not None


# --- DeleteFailedNodeSetPod ------------------------------------------------------------------


def failures(sim: KubeSim, name: str) -> dict[str, Any]:
    annotations = sim.get("nodesets", name, NS)["metadata"].get("annotations") or {}
    return dict(json.loads(annotations[FAILURES])) if FAILURES in annotations else {}


def failed(
    ns: NodeSetRef, pod: dict[str, Any], count: int = 1, at: int = 10_000
) -> DeleteFailedNodeSetPod:
    return DeleteFailedNodeSetPod(nodeset=ns, pod=ref(pod), failures=count, at=at)


@pytest.mark.parametrize("phase", ["Failed", "Succeeded"])
async def test_delete_failed_pod_records_the_failure_then_deletes_it(
    sim: KubeSim, effector: NodeSetEffector, phase: str
) -> None:
    ns = add_nodeset(sim, "df-a")
    pod = sim.add_pod("df-a-0", phase=phase, node_name="kn-1")
    result = await effector.apply(failed(ns, pod, count=2))
    assert (result.outcome, result.detail) == ("ok", "failure 2 of df-a-0 recorded")
    assert failures(sim, "df-a") == {"df-a-0": [2, 10_000, pod["metadata"]["uid"]]}
    assert sim.get("nodesets", "df-a", NS)["metadata"]["annotations"]["keep"] == "me"
    assert pod_or_none(sim, "df-a-0") is None

    result = await effector.apply(failed(ns, pod, count=2))
    assert (result.outcome, result.detail) == ("noop", "pod is gone")


async def test_delete_failed_daemon_pod_records_the_failure_under_its_node(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    """DaemonSet mode counts a failure under ``node/<node>`` (the action's ``key``)."""
    ns = add_nodeset(sim, "df-k")
    pod = sim.add_pod("df-k-x7q2p", phase="Failed", node_name="kn-1")
    action = DeleteFailedNodeSetPod(
        nodeset=ns, pod=ref(pod), failures=1, at=10_000, key="node/kn-1"
    )
    assert (await effector.apply(action)).outcome == "ok"
    assert failures(sim, "df-k") == {"node/kn-1": [1, 10_000, pod["metadata"]["uid"]]}
    assert pod_or_none(sim, "df-k-x7q2p") is None


async def test_delete_failed_pod_forgets_old_failures_and_keeps_recent_ones(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    ns = add_nodeset(sim, "df-b")
    earlier = {
        "df-b-1": [3, 9_900, "u1"],  # within ten minutes of 10 000: kept
        "df-b-2": [1, 9_000, "u2"],  # older: forgotten
        "df-b-3": "garbage",  # not [failures, at, uid]: dropped
    }
    sim.patch_merge(
        "nodesets", "df-b", {"metadata": {"annotations": {FAILURES: json.dumps(earlier)}}}, NS
    )
    pod = sim.add_pod("df-b-0", phase="Failed")
    assert (await effector.apply(failed(ns, pod))).outcome == "ok"
    assert failures(sim, "df-b") == {
        "df-b-1": [3, 9_900, "u1"],
        "df-b-0": [1, 10_000, pod["metadata"]["uid"]],
    }


@pytest.mark.parametrize("garbage", ["5", "[]", "not json"])
async def test_delete_failed_pod_starts_afresh_over_a_malformed_annotation(
    sim: KubeSim, effector: NodeSetEffector, garbage: str
) -> None:
    ns = add_nodeset(sim, "df-c")
    sim.patch_merge("nodesets", "df-c", {"metadata": {"annotations": {FAILURES: garbage}}}, NS)
    pod = sim.add_pod("df-c-0", phase="Failed")
    assert (await effector.apply(failed(ns, pod))).outcome == "ok"
    assert failures(sim, "df-c") == {"df-c-0": [1, 10_000, pod["metadata"]["uid"]]}


async def test_delete_failed_pod_skips_a_pod_that_is_not_terminal(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    ns = add_nodeset(sim, "df-d")
    pod = sim.add_pod("df-d-0", phase="Running", node_name="kn-1")
    result = await effector.apply(failed(ns, pod))
    assert (result.outcome, result.detail) == ("skipped", "pod is Running, not terminal")
    assert pod_or_none(sim, "df-d-0") is not None
    assert failures(sim, "df-d") == {}


async def test_delete_failed_pod_leaves_a_replaced_pod_alone(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    ns = add_nodeset(sim, "df-e")
    old = sim.add_pod("df-e-0", phase="Failed")
    replace_pod(sim, "df-e-0")
    result = await effector.apply(failed(ns, old))
    assert (result.outcome, result.detail) == ("noop", "another pod of that name now")
    assert pod_or_none(sim, "df-e-0") is not None
    assert failures(sim, "df-e") == {}


async def test_delete_failed_pod_of_a_gone_or_recreated_nodeset_still_deletes(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    gone = NodeSetRef(namespace=NS, name="df-gone", uid="0")
    pod = sim.add_pod("df-gone-0", phase="Failed")
    assert (await effector.apply(failed(gone, pod))).outcome == "ok"
    assert pod_or_none(sim, "df-gone-0") is None

    old = add_nodeset(sim, "df-f")
    recreate_nodeset(sim, "df-f")
    pod = sim.add_pod("df-f-0", phase="Failed")
    assert (await effector.apply(failed(old, pod))).outcome == "ok"
    assert pod_or_none(sim, "df-f-0") is None
    assert failures(sim, "df-f") == {}  # the new NodeSet does not inherit the old one's count


async def test_delete_failed_pod_keeps_the_pod_when_the_record_fails(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    """Record first: a failed record (409) leaves the pod for the retry, never the reverse."""
    ns = add_nodeset(sim, "df-g")
    pod = sim.add_pod("df-g-0", phase="Failed")
    sim.fail_next(1, 409, verb="patch")
    with pytest.raises(Transient):
        await effector.apply(failed(ns, pod))
    assert pod_or_none(sim, "df-g-0") is not None
    assert (await effector.apply(failed(ns, pod))).outcome == "ok"
    assert pod_or_none(sim, "df-g-0") is None
    assert "df-g-0" in failures(sim, "df-g")


# --- EnsureNodeSetPDB ------------------------------------------------------------------------


async def test_ensure_pdb_creates_it_once(sim: KubeSim, effector: NodeSetEffector) -> None:
    ns = add_nodeset(sim, "pdb-a")
    selector = {"app.kubernetes.io/instance": "pdb-a", PROTECT: "true"}
    action = EnsureNodeSetPDB(nodeset=ns, selector=selector)
    result = await effector.apply(action)
    assert (result.outcome, result.detail) == ("ok", "PodDisruptionBudget pdb-a created")
    pdb = sim.get("poddisruptionbudgets", "pdb-a", NS)
    assert pdb["spec"]["maxUnavailable"] == 0
    assert pdb["spec"]["selector"] == {"matchLabels": selector}
    assert pdb["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "slurmbridge"}
    [owner] = pdb["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "NodeSet",
        "pdb-a",
        ns.uid,
        True,
    )

    result = await effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", "PodDisruptionBudget pdb-a exists")


async def test_ensure_pdb_never_changes_someone_elses(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    theirs = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "pdb-b", "namespace": NS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"x": "y"}}},
    }
    sim.create(theirs)
    ns = add_nodeset(sim, "pdb-b")
    result = await effector.apply(EnsureNodeSetPDB(nodeset=ns, selector={PROTECT: "true"}))
    assert result.outcome == "noop"
    spec = sim.get("poddisruptionbudgets", "pdb-b", NS)["spec"]
    assert spec == {"minAvailable": 1, "selector": {"matchLabels": {"x": "y"}}}


async def test_ensure_pdb_without_a_uid_has_no_owner(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    action = EnsureNodeSetPDB(nodeset=NodeSetRef(namespace=NS, name="pdb-c"), selector={"a": "b"})
    assert (await effector.apply(action)).outcome == "ok"
    meta = sim.get("poddisruptionbudgets", "pdb-c", NS)["metadata"]
    assert not meta.get("ownerReferences")


# --- SetNodeSetStatus ------------------------------------------------------------------------


async def test_set_status_writes_every_field(sim: KubeSim, effector: NodeSetEffector) -> None:
    ns = add_nodeset(sim, "st-a", replicas=3)
    status = NodeSetStatus(
        replicas=3,
        ready_replicas=2,
        available_replicas=1,
        slurm_idle=1,
        slurm_allocated=1,
        slurm_down=0,
        slurm_drain=1,
        observed_generation=4,
        selector="app.kubernetes.io/instance=st-a",
    )
    assert (await effector.apply(SetNodeSetStatus(nodeset=ns, status=status))).outcome == "ok"
    obj = sim.get("nodesets", "st-a", NS)
    assert obj["status"] == {
        "replicas": 3,
        "readyReplicas": 2,
        "availableReplicas": 1,
        "slurmIdle": 1,
        "slurmAllocated": 1,
        "slurmDown": 0,
        "slurmDrain": 1,
        "observedGeneration": 4,
        "selector": "app.kubernetes.io/instance=st-a",
        "updatedReplicas": 0,
        "unavailableReplicas": 0,
        "desired": 0,
        "nodeSetHash": "",
    }
    assert obj["spec"]["replicas"] == 3  # the status subresource only


async def test_set_status_writes_our_condition_and_keeps_others(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    """The ReplicaFailure condition (nodeset rule 21) is written beside the conditions
    others wrote, which stay; a status without it removes only ours."""
    ns = add_nodeset(sim, "st-c")
    theirs = {
        "type": "Available",
        "status": "True",
        "reason": "Theirs",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    sim.patch_merge(
        "nodesets", "st-c", {"status": {"conditions": [theirs]}}, NS, subresource="status"
    )
    ours = NodeSetCondition(
        type="ReplicaFailure",
        status="True",
        reason="ReplicasAboveMaximum",
        message="spec.replicas: too many",
        last_transition=1_767_225_600,
    )
    status = NodeSetStatus(replicas=1, conditions=(ours,))
    assert (await effector.apply(SetNodeSetStatus(nodeset=ns, status=status))).outcome == "ok"
    conditions = sim.get("nodesets", "st-c", NS)["status"]["conditions"]
    assert conditions == [
        theirs,
        {
            "type": "ReplicaFailure",
            "status": "True",
            "reason": "ReplicasAboveMaximum",
            "message": "spec.replicas: too many",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        },
    ]
    cleared = NodeSetStatus(replicas=1)
    assert (await effector.apply(SetNodeSetStatus(nodeset=ns, status=cleared))).outcome == "ok"
    assert sim.get("nodesets", "st-c", NS)["status"]["conditions"] == [theirs]


async def test_set_status_of_a_gone_nodeset_is_a_noop(effector: NodeSetEffector) -> None:
    gone = NodeSetRef(namespace=NS, name="st-gone", uid="0")
    result = await effector.apply(SetNodeSetStatus(nodeset=gone, status=NodeSetStatus()))
    assert (result.outcome, result.detail) == ("noop", "NodeSet is gone")


async def test_set_status_conflict_is_transient(sim: KubeSim, effector: NodeSetEffector) -> None:
    ns = add_nodeset(sim, "st-b")
    sim.fail_next(1, 409, verb="patch", resource="nodesets/status")
    with pytest.raises(Transient):
        await effector.apply(SetNodeSetStatus(nodeset=ns, status=NodeSetStatus(replicas=1)))
    assert "status" not in sim.get("nodesets", "st-b", NS)


# --- ScaleNodeSet ----------------------------------------------------------------------------


async def test_scale_sets_replicas_and_stamps_the_cool_down_clock(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    ns = add_nodeset(sim, "sc-a", replicas=2)
    result = await effector.apply(ScaleNodeSet(nodeset=ns, replicas=5, at=1000, why="2 → 5"))
    assert (result.outcome, result.detail) == ("ok", "2 → 5")
    obj = sim.get("nodesets", "sc-a", NS)
    assert obj["spec"]["replicas"] == 5
    assert obj["metadata"]["annotations"] == {"keep": "me", LAST: "1000", DIRECTION: "up"}

    result = await effector.apply(ScaleNodeSet(nodeset=ns, replicas=1, at=2000, why="5 → 1"))
    assert result.outcome == "ok"
    obj = sim.get("nodesets", "sc-a", NS)
    assert obj["spec"]["replicas"] == 1
    assert obj["metadata"]["annotations"][DIRECTION] == "down"

    result = await effector.apply(ScaleNodeSet(nodeset=ns, replicas=1, at=3000, why="again"))
    assert (result.outcome, result.detail) == ("noop", "already 1 replica(s)")
    assert sim.get("nodesets", "sc-a", NS)["metadata"]["annotations"][LAST] == "2000"


async def test_scale_of_a_gone_nodeset_is_a_noop(effector: NodeSetEffector) -> None:
    gone = NodeSetRef(namespace=NS, name="sc-gone", uid="0")
    result = await effector.apply(ScaleNodeSet(nodeset=gone, replicas=2, at=1, why=""))
    assert (result.outcome, result.detail) == ("noop", "NodeSet is gone")


async def test_scale_keeps_the_replicas_when_the_stamp_fails(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    ns = add_nodeset(sim, "sc-b", replicas=1)
    sim.fail_next(1, 500, verb="patch", resource="nodesets")
    with pytest.raises(Transient):
        await effector.apply(ScaleNodeSet(nodeset=ns, replicas=4, at=1000, why="1 → 4"))
    obj = sim.get("nodesets", "sc-b", NS)
    assert obj["spec"]["replicas"] == 1
    assert LAST not in obj["metadata"]["annotations"]


# --- SetPodLabel -----------------------------------------------------------------------------


async def test_set_pod_label_sets_replaces_and_removes(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    pod = sim.add_pod("lb-a", labels={"app": "a"})
    for value in ("true", "false"):
        result = await effector.apply(SetPodLabel(pod=ref(pod), label=PROTECT, value=value))
        assert result.outcome == "ok"
        assert sim.get("pods", "lb-a", NS)["metadata"]["labels"] == {"app": "a", PROTECT: value}
    assert (
        await effector.apply(SetPodLabel(pod=ref(pod), label=PROTECT, value=None))
    ).outcome == "ok"
    assert sim.get("pods", "lb-a", NS)["metadata"]["labels"] == {"app": "a"}

    result = await effector.apply(SetPodLabel(pod=ref(pod), label=PROTECT, value=None))
    assert (result.outcome, result.detail) == ("noop", "label already as wanted")


async def test_set_pod_label_never_overwrites_labels_added_meanwhile(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    """A pod without labels: the patch adds the whole map, so it tests the resourceVersion
    read; labels someone added in between survive and the effect is retried soon."""
    pod = sim.add_pod("lb-b")
    sim.delay_next(1, 0.3, verb="patch", resource="pods")
    task = asyncio.create_task(
        effector.apply(SetPodLabel(pod=ref(pod), label=PROTECT, value="true"))
    )
    async with asyncio.timeout(5):
        while sim.requests[("patch", "pods")] == 0:
            await asyncio.sleep(0.005)
    sim.patch_merge("pods", "lb-b", {"metadata": {"labels": {"late": "yes"}}}, NS)
    with pytest.raises(Transient, match="changed meanwhile") as exc:
        await task
    assert exc.value.delay == 0.1
    assert sim.get("pods", "lb-b", NS)["metadata"]["labels"] == {"late": "yes"}

    assert (
        await effector.apply(SetPodLabel(pod=ref(pod), label=PROTECT, value="true"))
    ).outcome == "ok"
    assert sim.get("pods", "lb-b", NS)["metadata"]["labels"] == {"late": "yes", PROTECT: "true"}


async def test_set_pod_label_of_a_gone_pod_is_a_noop(effector: NodeSetEffector) -> None:
    gone = PodRef(namespace=NS, name="lb-gone", uid="0")
    result = await effector.apply(SetPodLabel(pod=gone, label=PROTECT, value="true"))
    assert (result.outcome, result.detail) == ("noop", "pod is gone")


async def test_set_pod_label_error_is_transient(sim: KubeSim, effector: NodeSetEffector) -> None:
    pod = sim.add_pod("lb-c")
    sim.fail_next(1, 503, verb="get", resource="pods")
    with pytest.raises(Transient, match="SetPodLabel"):
        await effector.apply(SetPodLabel(pod=ref(pod), label=PROTECT, value="true"))
    assert sim.get("pods", "lb-c", NS)["metadata"].get("labels", {}) == {}


# --- other actions, unreachable API ----------------------------------------------------------


async def test_an_action_it_does_not_handle_is_permanent(effector: NodeSetEffector) -> None:
    with pytest.raises(Permanent, match="cannot perform MarkPods"):
        await effector.apply(MarkPods(job_id=1, pods=(), scheduler_name="s"))


async def test_an_unreachable_api_server_is_transient(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    ns = add_nodeset(sim, "un-a")
    await sim.stop()
    with pytest.raises(Transient, match="unreachable"):
        await effector.apply(ScaleNodeSet(nodeset=ns, replicas=3, at=1, why=""))


# --- EnsureNodeSetRevision, SetPodAnnotation, the simulator's ControllerRevisions ----------


def controller_revisions(sim: KubeSim, nodeset: str) -> dict[str, int]:
    return {
        r["metadata"]["name"]: r["revision"]
        for r in sim.list("controllerrevisions", NS)
        if r["metadata"]["labels"].get("app.kubernetes.io/instance") == nodeset
    }


def set_image(sim: KubeSim, name: str, image: str) -> str:
    tpl = {"spec": {"containers": [{"name": "slurmd", "image": image}]}}
    sim.patch_merge("nodesets", name, {"spec": {"template": tpl}}, NS)
    return revisions.spec_revision_hash(sim.get("nodesets", name, NS)["spec"])


async def test_revision_created_once_rolled_back_and_pruned(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    ns = add_nodeset(sim, "rv-a")
    first = revisions.spec_revision_hash(sim.get("nodesets", "rv-a", NS)["spec"])
    ensure = EnsureNodeSetRevision(nodeset=ns, revision_hash=first)
    result = await effector.apply(ensure)
    assert (result.outcome, result.detail) == ("ok", f"rv-a-{first} created as revision 1")
    rev = sim.get("controllerrevisions", f"rv-a-{first}", NS)
    assert rev["metadata"]["labels"][wellknown.LABEL_REVISION_HASH] == first
    assert rev["metadata"]["labels"]["tier"] == "slurmd"  # the template's labels
    assert rev["metadata"]["ownerReferences"][0]["uid"] == ns.uid
    assert rev["data"]["spec"]["template"]["$patch"] == "replace"
    assert (await effector.apply(ensure)).detail == "revision 1 is current"

    # A new template, while a pod still runs the first: both stay (the first is live).
    second = set_image(sim, "rv-a", "slurmd:next")
    live = EnsureNodeSetRevision(nodeset=ns, revision_hash=second, live=(first,))
    assert (await effector.apply(live)).outcome == "ok"
    assert controller_revisions(sim, "rv-a") == {f"rv-a-{first}": 1, f"rv-a-{second}": 2}
    # Back to the first template: a rollback renumbers the first revision.
    assert set_image(sim, "rv-a", "slurmd:26.05") == first
    back = await effector.apply(EnsureNodeSetRevision(nodeset=ns, revision_hash=first))
    assert back.detail.startswith(f"rolled back to rv-a-{first} as revision 3")
    # revisionHistoryLimit 0 and no pod at the second: it is pruned.
    assert f"pruned rv-a-{second}" in back.detail
    assert controller_revisions(sim, "rv-a") == {f"rv-a-{first}": 3}


async def test_revision_of_a_gone_nodeset_is_a_noop(effector: NodeSetEffector) -> None:
    gone = NodeSetRef(namespace=NS, name="rv-gone", uid="0")
    result = await effector.apply(EnsureNodeSetRevision(nodeset=gone, revision_hash="x"))
    assert (result.outcome, result.detail) == ("noop", "NodeSet is gone")


async def test_revision_name_taken_by_other_data_raises_the_collision_count(
    sim: KubeSim, effector: NodeSetEffector
) -> None:
    ns = add_nodeset(sim, "rv-c")
    hash_ = revisions.spec_revision_hash(sim.get("nodesets", "rv-c", NS)["spec"])
    sim.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ControllerRevision",
            "metadata": {"name": f"rv-c-{hash_}", "namespace": NS},
            "data": {"other": True},
            "revision": 1,
        }
    )
    with pytest.raises(Transient):
        await effector.apply(EnsureNodeSetRevision(nodeset=ns, revision_hash=hash_))
    assert sim.get("nodesets", "rv-c", NS)["status"]["collisionCount"] == 1
    again = revisions.spec_revision_hash(sim.get("nodesets", "rv-c", NS)["spec"], 1)
    result = await effector.apply(EnsureNodeSetRevision(nodeset=ns, revision_hash=again))
    assert result.detail.startswith(f"rv-c-{again} created")


def test_simulated_controller_revisions_validate_as_the_api_server(sim: KubeSim) -> None:
    """pkg/apis/apps/validation: data is mandatory, revision not negative, data immutable."""
    base = {"apiVersion": "apps/v1", "kind": "ControllerRevision"}
    with pytest.raises(ApiError) as no_data:
        sim.create({**base, "metadata": {"name": "cv-a", "namespace": NS}, "revision": 1})
    assert no_data.value.code == 422
    assert "data: Required value: data is mandatory" in str(no_data.value)
    with pytest.raises(ApiError) as negative:
        sim.create(
            {**base, "metadata": {"name": "cv-b", "namespace": NS}, "data": {}, "revision": -1}
        )
    assert negative.value.code == 422
    sim.create(
        {**base, "metadata": {"name": "cv-c", "namespace": NS}, "data": {"a": 1}, "revision": 1}
    )
    sim.patch_merge("controllerrevisions", "cv-c", {"revision": 2}, NS)
    assert sim.get("controllerrevisions", "cv-c", NS)["revision"] == 2
    with pytest.raises(ApiError) as immutable:
        sim.patch_merge("controllerrevisions", "cv-c", {"data": {"a": 2}}, NS)
    assert immutable.value.code == 422 and "field is immutable" in str(immutable.value)


async def test_set_pod_annotation_sets_and_removes(sim: KubeSim, effector: NodeSetEffector) -> None:
    pod = ref(sim.add_pod("an-a"))
    key = wellknown.ANNOTATION_POD_DEADLINE
    set_ = SetPodAnnotation(pod=pod, annotation=key, value="2030-01-01T00:00:00Z")
    assert (await effector.apply(set_)).outcome == "ok"
    assert sim.get("pods", "an-a", NS)["metadata"]["annotations"][key] == "2030-01-01T00:00:00Z"
    assert (await effector.apply(set_)).outcome == "noop"
    gone = SetPodAnnotation(pod=pod, annotation=key, value=None)
    assert (await effector.apply(gone)).outcome == "ok"
    assert key not in (sim.get("pods", "an-a", NS)["metadata"].get("annotations") or {})
