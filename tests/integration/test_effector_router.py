"""Router through ``apply``: every action type reaches the effector that performs it, a side
that is not configured is Permanent, and an action type no effector knows is Permanent.

The routing tables below are written out by hand on purpose (not read from the effectors'
own tuples), and must name every type of :data:`schemas.actions.ACTIONS`: a new action type
fails here until someone decides where it goes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes_asyncio import client

from schemas import wellknown
from schemas.actions import (
    ACTIONS,
    Action,
    AllocateResourceClaim,
    AnyAction,
    BindPod,
    CancelSlurmJob,
    ClaimRef,
    ClusterRef,
    CreateExtendedResourceClaim,
    CreateNodeSetPod,
    CreateSlurmNode,
    DeleteFailedNodeSetPod,
    DeleteNodeSetPod,
    DeletePod,
    DeleteSlurmNode,
    DeleteSlurmPartition,
    DeleteSlurmReservation,
    DrainSlurmNode,
    EnsureNodeSetPDB,
    EnsureNodeSetRevision,
    EnsureSlurmPartition,
    EnsureSlurmReservation,
    KeepNodeSetPodClaims,
    MarkPods,
    NodeSetRef,
    PodRef,
    PruneSlurmNodeRecord,
    RecordEvent,
    ReleaseNodeSetFinalizer,
    ReleaseResourceClaim,
    RemovePodFinalizer,
    ScaleNodeSet,
    SetClusterStatus,
    SetJobExcludedNodes,
    SetNodeCondition,
    SetNodeSetStatus,
    SetPodAnnotation,
    SetPodCondition,
    SetPodGroupScheduled,
    SetPodLabel,
    SetSlurmNodeConditions,
    SetSlurmNodeExtra,
    SetSlurmNodeFeature,
    SetSlurmNodeOwnedFeatures,
    SetSlurmNodePodInfo,
    SlurmJobSpec,
    SubmitSlurmJob,
    TaintNode,
    UndrainSlurmNode,
    UntaintNode,
    UpdateSlurmNodeFeatures,
    UpdateSlurmNodeTopology,
    action_name,
)
from schemas.events import AllocatedDevice, ClaimRequest, NodeSetStatus
from schemas.podinfo import PodInfo
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.devtools.sim.slurmrestd import SlurmSim
from slurmbridge.effectors.nodes import KubeEffector
from slurmbridge.effectors.nodesets import NodeSetEffector
from slurmbridge.effectors.pods import PodEffector
from slurmbridge.effectors.router import Router
from slurmbridge.effectors.slurm_nodes import SlurmEffector
from slurmbridge.runtime.outcomes import Permanent
from slurmbridge.slurm.client import SlurmClient

pytestmark = pytest.mark.integration

NS = "default"
CLUSTER = "sim"
SCHED = wellknown.DEFAULT_SCHEDULER_NAME
GONE_POD = PodRef(namespace=NS, name="rt-gone", uid="0")
GONE_SET = NodeSetRef(namespace=NS, name="rt-gone", uid="0")
GONE_CLAIM = ClaimRef(namespace=NS, name="rt-gone", uid="0")
OURS = wellknown.OUR_REASON_PREFIXES

#: One action of every type, each aimed at something that does not exist (or, for the
#: actions that create something, at something new), and the outcome it has when the Router
#: has every effector: none is "cannot perform".
SAMPLES: dict[str, tuple[AnyAction, str]] = {
    "TaintNode": (TaintNode(node="rt-gone", key="k", value="v", effect="NoSchedule"), "noop"),
    "UntaintNode": (UntaintNode(node="rt-gone", key="k", effect="NoSchedule"), "noop"),
    "SetNodeCondition": (
        SetNodeCondition(node="rt-gone", type="X", status="True", reason="R", message="m"),
        "noop",
    ),
    "RecordEvent": (
        RecordEvent(api_version="v1", object_kind="Node", name="rt-n", reason="R", message="m"),
        "ok",
    ),
    "SetClusterStatus": (
        SetClusterStatus(
            cluster=ClusterRef(namespace=NS, name="rt-gone"), is_ready=True, reason="", message=""
        ),
        "noop",
    ),
    "SetPodGroupScheduled": (
        SetPodGroupScheduled(
            namespace=NS,
            name="rt-gone",
            uid="0",
            api_version="scheduling.k8s.io/v1beta1",
            message="m",
        ),
        "noop",
    ),
    "DrainSlurmNode": (DrainSlurmNode(cluster=CLUSTER, node="rt-gone", reason="r"), "noop"),
    "UndrainSlurmNode": (
        UndrainSlurmNode(cluster=CLUSTER, node="rt-gone", owned_prefixes=OURS),
        "noop",
    ),
    "CreateSlurmNode": (
        CreateSlurmNode(
            cluster=CLUSTER, node="rt-new", node_conf="NodeName=rt-new CPUs=1 State=External"
        ),
        "ok",
    ),
    "DeleteSlurmNode": (
        DeleteSlurmNode(cluster=CLUSTER, node="rt-gone", owned_prefixes=OURS),
        "noop",
    ),
    "UpdateSlurmNodeFeatures": (
        UpdateSlurmNodeFeatures(cluster=CLUSTER, node="rt-gone", features=("x",)),
        "noop",
    ),
    "UpdateSlurmNodeTopology": (
        UpdateSlurmNodeTopology(cluster=CLUSTER, node="rt-gone", topology="tree:s1"),
        "noop",
    ),
    "SetSlurmNodeExtra": (
        SetSlurmNodeExtra(cluster=CLUSTER, node="rt-gone", extra="x", owned_prefix="x"),
        "noop",
    ),
    "SetSlurmNodeFeature": (
        SetSlurmNodeFeature(cluster=CLUSTER, node="rt-gone", feature="x", present=True),
        "noop",
    ),
    "SetSlurmNodePodInfo": (
        SetSlurmNodePodInfo(cluster=CLUSTER, node="rt-gone", info=PodInfo(pod_name="p")),
        "noop",
    ),
    "SetSlurmNodeOwnedFeatures": (
        SetSlurmNodeOwnedFeatures(cluster=CLUSTER, node="rt-gone", prefix="k8s/", features=()),
        "noop",
    ),
    "EnsureSlurmReservation": (
        EnsureSlurmReservation(
            nodeset=GONE_SET,
            cluster=CLUSTER,
            name="SlurmOperatorMaint-rt-gone",
            nodes=("rt-gone",),
            start_time=2_000_000_000,
            duration_minutes=30,
            flags=("MAINT", "IGNORE_JOBS"),
            stamp="rt",
        ),
        "noop",
    ),
    "DeleteSlurmReservation": (
        DeleteSlurmReservation(nodeset=GONE_SET, cluster=CLUSTER, name="rt-gone"),
        "noop",
    ),
    "EnsureSlurmPartition": (
        EnsureSlurmPartition(
            nodeset=GONE_SET, cluster=CLUSTER, name="rt-gone", nodes=("rt-gone",), stamp="rt"
        ),
        "noop",
    ),
    "DeleteSlurmPartition": (
        DeleteSlurmPartition(nodeset=GONE_SET, cluster=CLUSTER, name="rt-gone"),
        "noop",
    ),
    "ReleaseNodeSetFinalizer": (ReleaseNodeSetFinalizer(nodeset=GONE_SET), "noop"),
    "PruneSlurmNodeRecord": (
        PruneSlurmNodeRecord(
            cluster=CLUSTER, node="rt-gone", nodeset=NodeSetRef(namespace="ns", name="n"), pod="p"
        ),
        "noop",
    ),
    "SubmitSlurmJob": (
        SubmitSlurmJob(
            cluster=CLUSTER,
            group="default/rt",
            marker="slurmbridge:rt",
            pods=(GONE_POD,),
            spec=SlurmJobSpec(name="rt"),
            scheduler_name=SCHED,
        ),
        "ok",
    ),
    "MarkPods": (MarkPods(job_id=1, pods=(GONE_POD,), scheduler_name=SCHED), "noop"),
    "BindPod": (BindPod(pod=GONE_POD, node="kn", slurm_node="n1", job_id=1), "noop"),
    "CancelSlurmJob": (CancelSlurmJob(cluster=CLUSTER, job_id=999_999, marker="m"), "noop"),
    "SetJobExcludedNodes": (
        SetJobExcludedNodes(cluster=CLUSTER, job_id=999_999, marker="m", excluded_nodes=("n1",)),
        "noop",
    ),
    "DeletePod": (DeletePod(pod=GONE_POD, cluster=CLUSTER, job_id=0, why="w"), "noop"),
    "RemovePodFinalizer": (RemovePodFinalizer(pod=GONE_POD, finalizer="f"), "noop"),
    "SetPodCondition": (
        SetPodCondition(pod=GONE_POD, type="X", status="True", reason="R", message="m"),
        "noop",
    ),
    "AllocateResourceClaim": (
        AllocateResourceClaim(
            claim=GONE_CLAIM,
            pod=GONE_POD,
            node="kn",
            devices=(AllocatedDevice(request="r", driver="gpu.nvidia.com", pool="p", device="d"),),
        ),
        "noop",
    ),
    "CreateExtendedResourceClaim": (
        CreateExtendedResourceClaim(
            pod=GONE_POD,
            node="kn",
            requests=(ClaimRequest(name="gpu", device_class="gpu.nvidia.com", count=1),),
            devices=(
                AllocatedDevice(request="gpu", driver="gpu.nvidia.com", pool="p", device="d"),
            ),
            mappings=(),
        ),
        "noop",
    ),
    "ReleaseResourceClaim": (ReleaseResourceClaim(claim=GONE_CLAIM, pod=GONE_POD), "noop"),
    "CreateNodeSetPod": (CreateNodeSetPod(nodeset=GONE_SET, pod_name="rt-0", ordinal=0), "noop"),
    "DeleteNodeSetPod": (
        DeleteNodeSetPod(pod=GONE_POD, cluster=CLUSTER, slurm_node="rt-gone"),
        "noop",
    ),
    "DeleteFailedNodeSetPod": (
        DeleteFailedNodeSetPod(nodeset=GONE_SET, pod=GONE_POD, failures=1, at=1),
        "noop",
    ),
    "EnsureNodeSetPDB": (EnsureNodeSetPDB(nodeset=GONE_SET, selector={"a": "b"}), "ok"),
    "SetNodeSetStatus": (SetNodeSetStatus(nodeset=GONE_SET, status=NodeSetStatus()), "noop"),
    "ScaleNodeSet": (ScaleNodeSet(nodeset=GONE_SET, replicas=1, at=1, why=""), "noop"),
    "SetPodLabel": (SetPodLabel(pod=GONE_POD, label="l", value="v"), "noop"),
    "SetSlurmNodeConditions": (SetSlurmNodeConditions(pod=GONE_POD), "noop"),
    "EnsureNodeSetRevision": (
        EnsureNodeSetRevision(nodeset=GONE_SET, revision_hash="5d4c6b7f9"),
        "noop",
    ),
    "SetPodAnnotation": (SetPodAnnotation(pod=GONE_POD, annotation="a", value="v"), "noop"),
    "KeepNodeSetPodClaims": (
        KeepNodeSetPodClaims(nodeset=GONE_SET, pod=GONE_POD, slurm_node="rt-gone"),
        "noop",
    ),
}

#: The side each action type needs: what the Router says when that side is missing.
NEEDS: dict[str, str] = {
    **dict.fromkeys(
        [
            "TaintNode",
            "UntaintNode",
            "SetNodeCondition",
            "RecordEvent",
            "SetClusterStatus",
            "SetPodGroupScheduled",
        ],
        "no Kubernetes API configured",
    ),
    **dict.fromkeys(
        [
            "DrainSlurmNode",
            "UndrainSlurmNode",
            "CreateSlurmNode",
            "DeleteSlurmNode",
            "UpdateSlurmNodeFeatures",
            "UpdateSlurmNodeTopology",
            "SetSlurmNodeExtra",
            "SetSlurmNodeFeature",
            "SetSlurmNodePodInfo",
            "SetSlurmNodeOwnedFeatures",
            "PruneSlurmNodeRecord",
        ],
        "no Slurm cluster configured",
    ),
    **dict.fromkeys(
        [
            "SubmitSlurmJob",
            "MarkPods",
            "BindPod",
            "CancelSlurmJob",
            "SetJobExcludedNodes",
            "DeletePod",
            "RemovePodFinalizer",
            "SetPodCondition",
            "AllocateResourceClaim",
            "CreateExtendedResourceClaim",
            "ReleaseResourceClaim",
        ],
        "pod actions need both a Kubernetes API and a Slurm cluster",
    ),
    **dict.fromkeys(
        [
            "CreateNodeSetPod",
            "DeleteNodeSetPod",
            "DeleteFailedNodeSetPod",
            "EnsureNodeSetPDB",
            "SetNodeSetStatus",
            "ScaleNodeSet",
            "SetPodLabel",
            "SetSlurmNodeConditions",
            "EnsureNodeSetRevision",
            "SetPodAnnotation",
            "KeepNodeSetPodClaims",
            "EnsureSlurmReservation",
            "DeleteSlurmReservation",
            "EnsureSlurmPartition",
            "DeleteSlurmPartition",
            "ReleaseNodeSetFinalizer",
        ],
        "NodeSet actions need both a Kubernetes API and a Slurm cluster",
    ),
}


class NoEffectorKnowsMe(Action, frozen=True, kw_only=True, tag="NoEffectorKnowsMe"):
    """An action type added to the schema but to no effector."""

    what: str = ""


def test_the_tables_name_every_action_type() -> None:
    assert set(SAMPLES) == set(ACTIONS)
    assert set(NEEDS) == set(ACTIONS)
    assert all(action_name(action) == tag for tag, (action, _) in SAMPLES.items())


@pytest.fixture
async def slurm(tmp_path: Path) -> AsyncIterator[tuple[SlurmSim, SlurmClient]]:
    sim = SlurmSim(cluster=CLUSTER)
    sim.seed_default(2)
    await sim.start()
    c = SlurmClient(sim.url, sim.write_token(tmp_path / "slurm-token"), "slurmrest")
    try:
        yield sim, c
    finally:
        await c.aclose()
        await sim.stop()


@pytest.fixture
def router(api: client.ApiClient, slurm: tuple[SlurmSim, SlurmClient]) -> Router:
    clients = {CLUSTER: slurm[1]}
    return Router(
        KubeEffector(api),
        SlurmEffector(clients),
        PodEffector(api, clients),
        NodeSetEffector(api, clients),
    )


@pytest.mark.parametrize("tag", sorted(SAMPLES))
async def test_every_action_reaches_an_effector_that_performs_it(router: Router, tag: str) -> None:
    action, outcome = SAMPLES[tag]
    assert (await router.apply(action)).outcome == outcome


async def test_each_kind_of_action_changes_its_own_side(
    router: Router, sim: KubeSim, slurm: tuple[SlurmSim, SlurmClient]
) -> None:
    slurm_sim = slurm[0]
    sim.add_node("rt-kn")
    taint = TaintNode(node="rt-kn", key="k", value="v", effect="NoSchedule")
    assert (await router.apply(taint)).outcome == "ok"
    assert sim.get("nodes", "rt-kn")["spec"]["taints"] == [
        {"key": "k", "value": "v", "effect": "NoSchedule"}
    ]

    drain = DrainSlurmNode(cluster=CLUSTER, node="n1", reason="slurm-bridge: test")
    assert (await router.apply(drain)).outcome == "ok"
    assert "DRAIN" in slurm_sim.node("n1").state

    pod = sim.add_pod("rt-pod")["metadata"]
    ref = PodRef(namespace=NS, name="rt-pod", uid=pod["uid"])
    assert (
        await router.apply(MarkPods(job_id=3, pods=(ref,), scheduler_name=SCHED))
    ).outcome == "ok"
    assert sim.get("pods", "rt-pod", NS)["metadata"]["labels"][wellknown.LABEL_SLURM_JOBID] == "3"

    label = SetPodLabel(pod=ref, label="rt", value="yes")
    assert (await router.apply(label)).outcome == "ok"
    assert sim.get("pods", "rt-pod", NS)["metadata"]["labels"]["rt"] == "yes"


@pytest.mark.parametrize("tag", sorted(SAMPLES))
async def test_an_action_whose_side_is_not_configured_is_permanent(tag: str) -> None:
    action, _ = SAMPLES[tag]
    with pytest.raises(Permanent) as exc:
        await Router(None, None, None, None).apply(action)
    assert str(exc.value) == NEEDS[tag]


async def test_kubernetes_and_slurm_alone_do_not_perform_pod_or_nodeset_actions(
    api: client.ApiClient, slurm: tuple[SlurmSim, SlurmClient], sim: KubeSim
) -> None:
    clients = {CLUSTER: slurm[1]}
    router = Router(KubeEffector(api), SlurmEffector(clients))
    pod = sim.add_pod("rt-alone")["metadata"]
    ref = PodRef(namespace=NS, name="rt-alone", uid=pod["uid"])
    with pytest.raises(Permanent, match="pod actions need"):
        await router.apply(MarkPods(job_id=3, pods=(ref,), scheduler_name=SCHED))
    with pytest.raises(Permanent, match="NodeSet actions need"):
        await router.apply(SetPodLabel(pod=ref, label="rt", value="yes"))
    assert sim.get("pods", "rt-alone", NS)["metadata"]["labels"] == {}


async def test_an_action_type_no_effector_knows_is_permanent(router: Router) -> None:
    unknown = cast(Any, NoEffectorKnowsMe(what="x"))
    with pytest.raises(Permanent, match="no effector performs NoEffectorKnowsMe"):
        await router.apply(unknown)
    with pytest.raises(Permanent, match="no effector performs NoEffectorKnowsMe"):
        await Router(None, None, None, None).apply(unknown)
