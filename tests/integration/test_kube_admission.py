"""What a real API server adds to new objects (issue 17, findings 4 and 7).

* TaintNodesByCondition admission gives every new Node ``node.kubernetes.io/not-ready:
  NoSchedule``; the node lifecycle controller removes it once the node is Ready. Node taints
  are an atomic list, and our node_taint effector writes the whole list (with the node's
  resourceVersion): it must keep that taint, and every other taint not its own.
* ``podStrategy.PrepareForCreate`` sets ``status.qosClass`` (``ComputePodQOS``) on every new
  pod, after ``SetDefaults_Pod`` gave containers with limits but no requests their limits as
  requests.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from schemas import wellknown
from schemas.actions import TaintNode, UntaintNode
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.effectors.nodes import KubeEffector
from slurmbridge.runtime.outcomes import Transient

pytestmark = pytest.mark.integration

NOT_READY = ("node.kubernetes.io/not-ready", "", "NoSchedule")
OTHER = ("example.com/dedicated", "gpu", "NoSchedule")
OURS = (wellknown.TAINT_MANAGED_NODE, "slurm-bridge-scheduler", wellknown.TAINT_MANAGED_NODE_EFFECT)


def taints(sim: KubeSim, node: str) -> list[tuple[str, str, str]]:
    spec = sim.get("nodes", node).get("spec") or {}
    return [(t["key"], t.get("value", ""), t["effect"]) for t in spec.get("taints") or []]


def set_ready(sim: KubeSim, node: str, status: str = "True") -> None:
    """The kubelet reports the node's Ready condition."""
    sim.patch(
        "nodes",
        node,
        {"status": {"conditions": [{"type": "Ready", "status": status, "reason": "Kubelet"}]}},
        patch_type="strategic",
        subresource="status",
    )


def taint(key: str, value: str, effect: str, *, untaint: bool = False) -> TaintNode | UntaintNode:
    if untaint:
        return UntaintNode(node="n1", key=key, effect=effect)
    return TaintNode(node="n1", key=key, value=value, effect=effect)


async def test_a_new_node_is_tainted_not_ready_until_it_is_ready(
    sim: KubeSim, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    # As a kubelet registers: no Ready condition yet, its own taint from --register-with-taints.
    created = await core.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": OTHER[0], "value": OTHER[1], "effect": OTHER[2]}]},
        }
    )
    assert [(t.key, t.value or "", t.effect) for t in created.spec.taints] == [OTHER, NOT_READY]
    set_ready(sim, "n1", "False")
    assert taints(sim, "n1") == [OTHER, NOT_READY]
    set_ready(sim, "n1")  # the node lifecycle controller removes the taint, and only it
    assert taints(sim, "n1") == [OTHER]
    # A node registered not Ready by the in-process helper gets it too; one already holding
    # it (same key and effect) does not get a second.
    sim.add_node("n2", ready=False)
    assert taints(sim, "n2") == [NOT_READY]
    sim.add_node("n3", ready=False, taints=[{"key": NOT_READY[0], "effect": NOT_READY[2]}])
    assert taints(sim, "n3") == [NOT_READY]


async def test_our_taint_writes_keep_the_admission_taint_and_every_foreign_one(
    sim: KubeSim, api: client.ApiClient
) -> None:
    sim.add_node(
        "n1", ready=False, taints=[{"key": OTHER[0], "value": OTHER[1], "effect": OTHER[2]}]
    )
    effector = KubeEffector(api)
    assert (await effector.apply(taint(*OURS))).outcome == "ok"
    assert taints(sim, "n1") == [OTHER, NOT_READY, OURS]
    assert (await effector.apply(taint(*OURS, untaint=True))).outcome == "ok"
    assert taints(sim, "n1") == [OTHER, NOT_READY]
    assert (await effector.apply(taint(*OURS))).outcome == "ok"
    set_ready(sim, "n1")
    assert taints(sim, "n1") == [OTHER, OURS]
    assert (await effector.apply(taint(*OURS, untaint=True))).outcome == "ok"
    assert taints(sim, "n1") == [OTHER]


async def test_a_taint_write_racing_the_node_lifecycle_controller_is_retried(
    sim: KubeSim, api: client.ApiClient
) -> None:
    """The node turns Ready between our read and our write: the write carries the resource
    version read, so it is refused (409) instead of putting the removed taint back."""
    sim.add_node("n1", ready=False)
    effector = KubeEffector(api)
    read_node = effector.core.read_node

    async def read_then_ready(*args: Any, **kwargs: Any) -> Any:
        answer = await read_node(*args, **kwargs)
        set_ready(sim, "n1")
        return answer

    effector.core.read_node = read_then_ready
    with pytest.raises(Transient):
        await effector.apply(taint(*OURS))
    assert taints(sim, "n1") == []
    effector.core.read_node = read_node
    assert (await effector.apply(taint(*OURS))).outcome == "ok"  # the retry
    assert taints(sim, "n1") == [OURS]


def container(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> Any:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "image": "i", "resources": resources}


CPU_MEM = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("containers", "init", "qos"),
    [
        ([container()], [], "BestEffort"),
        ([container({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})], [], "BestEffort"),
        ([container({"cpu": "0"}, {"cpu": "0"})], [], "BestEffort"),  # zero does not count
        ([container(CPU_MEM, CPU_MEM)], [], "Guaranteed"),
        (
            [container({"cpu": "1000m", "memory": "1Gi"}, {"cpu": "1", "memory": "1024Mi"})],
            [],
            "Guaranteed",
        ),
        ([container(None, CPU_MEM)], [], "Guaranteed"),  # requests defaulted from limits
        ([container(CPU_MEM)], [], "Burstable"),  # no limits
        ([container(None, {"cpu": "1"})], [], "Burstable"),  # no memory limit
        ([container({"cpu": "500m", "memory": "1Gi"}, CPU_MEM)], [], "Burstable"),
        ([container(CPU_MEM, CPU_MEM), container()], [], "Burstable"),
        ([container(CPU_MEM, CPU_MEM)], [container()], "Burstable"),  # init containers count
        (
            [container(CPU_MEM, CPU_MEM)],
            [{**container(CPU_MEM, CPU_MEM), "name": "init"}],
            "Guaranteed",
        ),
    ],
)
async def test_new_pods_get_their_qos_class(
    api: client.ApiClient, containers: list[Any], init: list[Any], qos: str
) -> None:
    core = client.CoreV1Api(api)
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = init
    for i, c in enumerate(containers):
        c["name"] = f"c{i}"
    resp = await core.create_namespaced_pod(
        "default",
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec},
        _preload_content=False,
    )
    pod = await resp.json()
    assert resp.status == 201
    assert pod["status"] == {"phase": "Pending", "qosClass": qos}
    for sent, c in zip(containers, pod["spec"]["containers"], strict=True):
        # SetDefaults_Pod: a limit without a request is also the request.
        want = {**sent["resources"].get("limits", {}), **sent["resources"].get("requests", {})}
        assert (c["resources"].get("requests") or {}) == want
