"""A NodeSet's slurmd pods and their Slurm nodes end to end in the simulators: each node's
comment names its pod (slurm-operator's PodInfo), the Kubernetes node's
``features.slinky.slurm.net/spec`` and ``topology.slinky.slurm.net/spec`` annotations reach
the Slurm node as ``k8s/`` features and its topology, a pod whose Slurm node disappears is
re-created, and a DaemonSet NodeSet's defunct Slurm node record is pruned
(reconcilers.nodeset._ident)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas import wellknown
from schemas.actions import PruneSlurmNodeRecord
from schemas.podinfo import PodInfo
from slurmbridge.devtools.testing import Stack
from tests._helpers import create_slurmd_nodeset, nodeset, slurmd_template

NS = "slurm"
FEATURES = wellknown.ANNOTATION_NODE_FEATURES_SPEC
TOPOLOGY = wellknown.ANNOTATION_TOPOLOGY_SPEC


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=4, poll_interval=0.2) as s:
        create_slurmd_nodeset(s, NS, replicas=0, template=slurmd_template("slurmd:25.05"))
        yield s


def pods(stack: Stack) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["name"]: p
        for p in stack.kube.list("pods", NS)
        if not p["metadata"].get("deletionTimestamp")
    }


def annotate(stack: Stack, node: str, **annotations: str | None) -> None:
    """``kubectl annotate node`` (``None`` removes)."""
    stack.kube.patch("nodes", node, {"metadata": {"annotations": annotations}})


def comment_of(stack: Stack, node: str) -> dict[str, Any] | None:
    if node not in stack.slurm.nodes:
        return None
    text = stack.slurm.nodes[node].comment
    return dict(json.loads(text)) if text else None


def event_reasons(stack: Stack) -> list[str]:
    return [e["reason"] for e in stack.kube.list("events", NS)]


async def test_slurm_nodes_carry_their_pod_info_k8s_features_and_topology(stack: Stack) -> None:
    stack.slurm.topologies = {"topo-switch": {"s1", "s2"}}
    for n in ("n1", "n2", "n3", "n4"):
        annotate(stack, n, **{FEATURES: "nvme, a100", TOPOLOGY: "topo-switch:s1"})
    stack.kube.patch("nodesets", "gpu", {"spec": {"replicas": 2}}, NS, subresource="scale")
    await stack.wait_for(
        lambda: {"gpu-0", "gpu-1"} <= set(stack.slurm.nodes), timeout=20, what="2 Slurm nodes"
    )
    uid = stack.kube.get("nodesets", "gpu", NS)["metadata"]["uid"]

    def expected(name: str) -> dict[str, str]:
        p = pods(stack)[name]
        return {
            "namespace": NS,
            "podName": name,
            "node": p["spec"]["nodeName"],
            "nodeSetName": "gpu",
            "nodeSetUID": uid,
        }

    await stack.wait_for(
        lambda: all(comment_of(stack, n) == expected(n) for n in ("gpu-0", "gpu-1")),
        what="each Slurm node's comment names its pod (PodInfo)",
    )
    # The exact bytes slurm-operator writes (podinfo.go), so either can read the other's.
    info = PodInfo(
        namespace=NS,
        pod_name="gpu-0",
        node=pods(stack)["gpu-0"]["spec"]["nodeName"],
        nodeset_name="gpu",
        nodeset_uid=uid,
    )
    assert stack.slurm.nodes["gpu-0"].comment == info.to_comment()

    # The NodeSet's own feature ("gpu", from slurmd's registration) stays beside k8s/ ones.
    want = ["gpu", "k8s/a100", "k8s/nvme"]
    await stack.wait_for(
        lambda: all(sorted(stack.slurm.nodes[n].features) == want for n in ("gpu-0", "gpu-1")),
        what="k8s/ features from the node annotation",
    )
    assert sorted(stack.slurm.nodes["gpu-0"].active_features) == want
    await stack.wait_for(
        lambda: all(stack.slurm.nodes[n].topology == "topo-switch:s1" for n in ("gpu-0", "gpu-1")),
        what="the Slurm nodes' topology from the node annotation",
    )
    await stack.wait_for(
        lambda: pods(stack)["gpu-0"]["metadata"]["annotations"].get(TOPOLOGY) == "topo-switch:s1",
        what="the topology annotation copied onto the pod",
    )

    # The annotation changes on gpu-0's node: only the k8s/ features follow.
    node0 = pods(stack)["gpu-0"]["spec"]["nodeName"]
    annotate(stack, node0, **{FEATURES: "a100", TOPOLOGY: "topo-switch:s2"})
    await stack.wait_for(
        lambda: sorted(stack.slurm.nodes["gpu-0"].features) == ["gpu", "k8s/a100"],
        what="k8s/nvme removed, the rest kept",
    )
    await stack.wait_for(
        lambda: stack.slurm.nodes["gpu-0"].topology == "topo-switch:s2", what="topology moved"
    )
    annotate(stack, node0, **{FEATURES: None})
    await stack.wait_for(
        lambda: sorted(stack.slurm.nodes["gpu-0"].features) == ["gpu"],
        what="no annotation: no k8s/ features",
    )


async def test_a_pod_whose_slurm_node_disappears_is_recreated(stack: Stack) -> None:
    stack.kube.patch("nodesets", "gpu", {"spec": {"replicas": 2}}, NS, subresource="scale")
    await stack.wait_for(
        lambda: {"gpu-0", "gpu-1"} <= set(stack.slurm.nodes), timeout=20, what="2 Slurm nodes"
    )
    old_uid = pods(stack)["gpu-1"]["metadata"]["uid"]
    # Slurm loses gpu-1's record while its pod stays Running and Ready (scontrol delete).
    stack.slurm.remove_node("gpu-1")
    # A write to the pod does not bring the record back: slurmd registers at start-up only
    # (the simulator re-registered at any write, and raced this test in CI).
    stack.kube.patch("pods", "gpu-1", {"metadata": {"annotations": {"touched": "yes"}}}, NS)
    await asyncio.sleep(0)  # the simulators act on the next loop turn
    assert "gpu-1" not in stack.slurm.nodes
    await stack.wait_for(
        lambda: (
            "gpu-1" in pods(stack)
            and pods(stack)["gpu-1"]["metadata"]["uid"] != old_uid
            and "gpu-1" in stack.slurm.nodes
        ),
        timeout=40,
        what="gpu-1 deleted, re-created and registered again",
    )
    assert "SlurmNodeNotRegistered" in event_reasons(stack)
    assert pods(stack)["gpu-0"]["metadata"]["uid"]  # the registered one stays
    assert stack.sims.slurmd.removed_busy == []


async def test_a_daemonset_nodesets_defunct_record_is_pruned(stack: Stack) -> None:
    stack.kube.create(
        nodeset(
            "edge",
            NS,
            version="v1beta1",
            scalingMode="DaemonSet",
            pruneSlurmNodeRecords="NodeNotFound",
            template={"spec": {"containers": [{"name": "slurmd", "image": "slurmd:25.05"}]}},
        )
    )
    uid = stack.kube.get("nodesets", "edge", NS)["metadata"]["uid"]

    def record(name: str, kube_node: str, nodeset_uid: str) -> None:
        """A dynamic slurmd node whose slurmd stopped: DOWN + NOT_RESPONDING."""
        stack.slurm.create_node(f"NodeName={name} CPUs=2 State=EXTERNAL")
        stack.slurm.nodes[name].comment = PodInfo(
            namespace=NS,
            pod_name=f"edge-{name}",
            node=kube_node,
            nodeset_name="edge",
            nodeset_uid=nodeset_uid,
        ).to_comment()
        stack.slurm.set_state(name, "DOWN", ["NOT_RESPONDING", "DYNAMIC_NORM"])

    record("gone", "kn-gone", uid)  # its pod and Kubernetes node are gone: pruned
    record("other", "kn-other", "uid-of-an-older-nodeset")  # not this NodeSet's: kept
    await stack.wait_for(
        lambda: "gone" not in stack.slurm.nodes, timeout=15, what="the defunct record pruned"
    )
    await stack.settled()
    assert "other" in stack.slurm.nodes
    assert "DefunctSlurmNodePruned" in event_reasons(stack)
    pruned = [
        r.action.node
        for r in await stack.action_records()
        if isinstance(r.action, PruneSlurmNodeRecord) and r.outcome == "ok"
    ]
    assert pruned == ["gone"]
