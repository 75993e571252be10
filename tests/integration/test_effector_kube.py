"""KubeEffector through ``apply``, against the Kubernetes simulator over HTTP.

TaintNode / UntaintNode, SetNodeCondition, SetClusterStatus and RecordEvent: the outcome each
reports and what the API server holds afterwards, the preconditions (gone, re-created,
changed meanwhile) and how API errors map onto Transient / Permanent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from kubernetes_asyncio import client

from schemas import wellknown
from schemas.actions import (
    ClusterRef,
    DrainSlurmNode,
    RecordEvent,
    SetClusterStatus,
    SetNodeCondition,
    TaintNode,
    UntaintNode,
)
from slurmbridge.devtools.sim.kube import ApiError, KubeSim
from slurmbridge.effectors.nodes import KubeEffector
from slurmbridge.runtime.outcomes import Permanent, Transient

pytestmark = pytest.mark.integration

NS = "default"
KEY = wellknown.TAINT_MANAGED_NODE
EFFECT = wellknown.TAINT_MANAGED_NODE_EFFECT
SCHED = wellknown.DEFAULT_SCHEDULER_NAME
FOREIGN = {"key": "example.com/foreign", "value": "x", "effect": "NoSchedule"}
OLD_TIME = "2020-01-01T00:00:00Z"


async def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Return once ``condition()`` holds; fail after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)


def taints(sim: KubeSim, node: str) -> list[dict[str, Any]]:
    return list(sim.get("nodes", node).get("spec", {}).get("taints") or [])


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj.get("status", {}).get("conditions") or []}


def cluster(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "slinky.slurm.net/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": NS},
        # The CRD requires the token's Secret (the simulator enforces the schema).
        "spec": {"server": "http://slurmrestd:6820", "token": {"secretRef": {"name": "t"}}},
    }


# --- taints ----------------------------------------------------------------------------------


async def test_taint_adds_ours_beside_foreign_taints_then_is_a_noop(
    sim: KubeSim, api: client.ApiClient
) -> None:
    sim.add_node("kt-1", taints=[FOREIGN])
    effector = KubeEffector(api)
    action = TaintNode(node="kt-1", key=KEY, value=SCHED, effect=EFFECT)

    result = await effector.apply(action)
    assert result.outcome == "ok"
    got = taints(sim, "kt-1")
    assert FOREIGN in got
    assert {"key": KEY, "value": SCHED, "effect": EFFECT} in got
    assert len(got) == 2

    patches = sim.requests[("patch", "nodes")]
    result = await effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", "taint already present")
    assert sim.requests[("patch", "nodes")] == patches  # nothing written
    assert len(taints(sim, "kt-1")) == 2


async def test_taint_with_another_value_replaces_ours(sim: KubeSim, api: client.ApiClient) -> None:
    sim.add_node("kt-2", taints=[{"key": KEY, "value": "old", "effect": EFFECT}, FOREIGN])
    result = await KubeEffector(api).apply(
        TaintNode(node="kt-2", key=KEY, value="new", effect=EFFECT)
    )
    assert result.outcome == "ok"
    ours = [t for t in taints(sim, "kt-2") if t["key"] == KEY]
    assert ours == [{"key": KEY, "value": "new", "effect": EFFECT}]
    assert FOREIGN in taints(sim, "kt-2")


async def test_untaint_removes_only_our_key_and_effect(sim: KubeSim, api: client.ApiClient) -> None:
    same_key_other_effect = {"key": KEY, "value": SCHED, "effect": "NoSchedule"}
    sim.add_node(
        "kt-3",
        taints=[{"key": KEY, "value": SCHED, "effect": EFFECT}, same_key_other_effect, FOREIGN],
    )
    effector = KubeEffector(api)
    action = UntaintNode(node="kt-3", key=KEY, effect=EFFECT)

    result = await effector.apply(action)
    assert result.outcome == "ok"
    got = taints(sim, "kt-3")
    assert same_key_other_effect in got
    assert FOREIGN in got
    assert not [t for t in got if t["key"] == KEY and t["effect"] == EFFECT]

    result = await effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", "taint already absent")


@pytest.mark.parametrize(
    "action",
    [
        TaintNode(node="kt-nowhere", key=KEY, value=SCHED, effect=EFFECT),
        UntaintNode(node="kt-nowhere", key=KEY, effect=EFFECT),
    ],
    ids=["taint", "untaint"],
)
async def test_taint_changes_on_a_gone_node_are_noops(
    sim: KubeSim, api: client.ApiClient, action: TaintNode | UntaintNode
) -> None:
    result = await KubeEffector(api).apply(action)
    assert (result.outcome, result.detail) == ("noop", "node is gone")
    assert sim.requests[("patch", "nodes")] == 0


async def test_a_taint_write_that_lost_a_race_is_retried_soon_then_converges(
    sim: KubeSim, api: client.ApiClient
) -> None:
    """The patch carries the read's resourceVersion: a 409 is Transient with a short delay,
    and the retry (a fresh read) succeeds."""
    sim.add_node("kt-4", taints=[FOREIGN])
    effector = KubeEffector(api)
    action = TaintNode(node="kt-4", key=KEY, value=SCHED, effect=EFFECT)
    sim.fail_next(1, 409, verb="patch", resource="nodes")
    with pytest.raises(Transient) as exc:
        await effector.apply(action)
    assert exc.value.delay == 0.1
    assert taints(sim, "kt-4") == [FOREIGN]

    assert (await effector.apply(action)).outcome == "ok"
    assert len(taints(sim, "kt-4")) == 2


async def test_a_node_changed_between_read_and_patch_is_never_overwritten(
    sim: KubeSim, api: client.ApiClient
) -> None:
    """A taint added by someone else after the effector read the node survives: the stale
    resourceVersion makes the API server refuse the write (409 → Transient)."""
    sim.add_node("kt-5")
    late = {"key": "example.com/late", "effect": "NoSchedule"}
    sim.delay_next(1, 0.3, verb="patch", resource="nodes")
    task = asyncio.create_task(
        KubeEffector(api).apply(TaintNode(node="kt-5", key=KEY, value=SCHED, effect=EFFECT))
    )
    await wait_until(lambda: sim.requests[("patch", "nodes")] == 1)
    sim.patch("nodes", "kt-5", {"spec": {"taints": [late]}}, patch_type="strategic")
    with pytest.raises(Transient):
        await task
    assert taints(sim, "kt-5") == [late]


async def test_a_node_deleted_between_read_and_patch_is_gone_not_a_dead_letter(
    sim: KubeSim, api: client.ApiClient
) -> None:
    sim.add_node("kt-6")
    sim.delay_next(1, 0.3, verb="patch", resource="nodes")
    task = asyncio.create_task(
        KubeEffector(api).apply(TaintNode(node="kt-6", key=KEY, value=SCHED, effect=EFFECT))
    )
    await wait_until(lambda: sim.requests[("patch", "nodes")] == 1)
    sim.delete("nodes", "kt-6")
    result = await task
    assert (result.outcome, result.detail) == ("noop", "node is gone")


# --- error mapping ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [(500, Transient), (503, Transient), (429, Transient), (403, Permanent), (422, Permanent)],
)
async def test_api_errors_map_to_transient_or_permanent(
    sim: KubeSim, api: client.ApiClient, status: int, expected: type[Exception]
) -> None:
    sim.add_node("kt-err")
    sim.fail_next(1, status)
    with pytest.raises(expected, match=f"HTTP {status}"):
        await KubeEffector(api).apply(TaintNode(node="kt-err", key=KEY, value="v", effect=EFFECT))
    assert taints(sim, "kt-err") == []


async def test_an_unreachable_api_server_is_transient(sim: KubeSim, api: client.ApiClient) -> None:
    await sim.stop()
    with pytest.raises(Transient, match="unreachable"):
        await KubeEffector(api).apply(UntaintNode(node="any", key=KEY, effect=EFFECT))


async def test_an_action_it_does_not_handle_is_permanent(api: client.ApiClient) -> None:
    with pytest.raises(Permanent, match="cannot perform DrainSlurmNode"):
        await KubeEffector(api).apply(DrainSlurmNode(cluster="c", node="n1", reason="r"))


# --- node conditions -------------------------------------------------------------------------


async def test_set_node_condition_merges_by_type_and_keeps_the_kubelets(
    sim: KubeSim, api: client.ApiClient
) -> None:
    sim.add_node("kc-1")
    ready_before = conditions(sim.get("nodes", "kc-1"))["Ready"]
    effector = KubeEffector(api)
    kind = wellknown.CONDITION_SLURM_REGISTERED

    action = SetNodeCondition(
        node="kc-1", type=kind, status="True", reason="Registered", message="as kc-1"
    )
    assert (await effector.apply(action)).outcome == "ok"
    got = conditions(sim.get("nodes", "kc-1"))
    assert got["Ready"] == ready_before
    assert (got[kind]["status"], got[kind]["reason"], got[kind]["message"]) == (
        "True",
        "Registered",
        "as kc-1",
    )
    assert got[kind]["lastTransitionTime"]

    flipped = SetNodeCondition(
        node="kc-1", type=kind, status="False", reason="Leaving", message="label removed"
    )
    assert (await effector.apply(flipped)).outcome == "ok"
    listed = sim.get("nodes", "kc-1")["status"]["conditions"]
    assert [c["type"] for c in listed].count(kind) == 1
    assert conditions(sim.get("nodes", "kc-1"))[kind]["status"] == "False"
    assert conditions(sim.get("nodes", "kc-1"))["Ready"] == ready_before


async def test_a_node_condition_already_as_wanted_is_not_written_again(
    sim: KubeSim, api: client.ApiClient
) -> None:
    """A replica that took over decides before the echo of its predecessor's write: the
    second write of the same condition is a noop, and its lastTransitionTime stays."""
    sim.add_node("kc-3")
    effector = KubeEffector(api)
    action = SetNodeCondition(node="kc-3", type="X", status="True", reason="R", message="m")
    assert (await effector.apply(action)).outcome == "ok"
    first = conditions(sim.get("nodes", "kc-3"))["X"]
    writes = sum(n for (verb, _), n in sim.requests.items() if verb == "patch")
    result = await effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", "condition already set")
    assert sum(n for (verb, _), n in sim.requests.items() if verb == "patch") == writes
    assert conditions(sim.get("nodes", "kc-3"))["X"] == first
    other = SetNodeCondition(node="kc-3", type="X", status="True", reason="R", message="m2")
    assert (await effector.apply(other)).outcome == "ok"


async def test_set_node_condition_on_a_gone_node_is_a_noop(
    sim: KubeSim, api: client.ApiClient
) -> None:
    result = await KubeEffector(api).apply(
        SetNodeCondition(node="kc-gone", type="X", status="True", reason="R", message="m")
    )
    assert (result.outcome, result.detail) == ("noop", "node is gone")
    with pytest.raises(ApiError, match="not found"):
        sim.get("nodes", "kc-gone")


async def test_set_node_condition_error_is_transient(sim: KubeSim, api: client.ApiClient) -> None:
    sim.add_node("kc-2")
    sim.fail_next(1, 503, verb="patch", resource="nodes/status")
    with pytest.raises(Transient):
        await KubeEffector(api).apply(
            SetNodeCondition(node="kc-2", type="X", status="True", reason="R", message="m")
        )
    assert "X" not in conditions(sim.get("nodes", "kc-2"))


# --- Cluster status --------------------------------------------------------------------------


async def test_set_cluster_status_writes_is_ready_and_the_ready_condition(
    sim: KubeSim, api: client.ApiClient
) -> None:
    uid = sim.create(cluster("cs-1"))["metadata"]["uid"]
    other = {"type": "Other", "status": "True", "reason": "Theirs", "lastTransitionTime": OLD_TIME}
    sim.patch_merge(
        "clusters", "cs-1", {"status": {"conditions": [other]}}, NS, subresource="status"
    )
    ref = ClusterRef(namespace=NS, name="cs-1", uid=uid)
    effector = KubeEffector(api)

    result = await effector.apply(
        SetClusterStatus(cluster=ref, is_ready=True, reason="Ping", message="up", generation=3)
    )
    assert result.outcome == "ok"
    status = sim.get("clusters", "cs-1", NS)["status"]
    assert status["isReady"] is True
    got = conditions({"status": status})
    assert got["Other"] == other
    ready = got["Ready"]
    assert (ready["status"], ready["reason"], ready["message"], ready["observedGeneration"]) == (
        "True",
        "Ping",
        "up",
        3,
    )


async def test_set_cluster_status_moves_the_transition_time_only_on_a_flip(
    sim: KubeSim, api: client.ApiClient
) -> None:
    uid = sim.create(cluster("cs-2"))["metadata"]["uid"]
    ready = {"type": "Ready", "status": "True", "reason": "Ping", "lastTransitionTime": OLD_TIME}
    sim.patch_merge(
        "clusters", "cs-2", {"status": {"conditions": [ready]}}, NS, subresource="status"
    )
    ref = ClusterRef(namespace=NS, name="cs-2", uid=uid)
    effector = KubeEffector(api)

    same = SetClusterStatus(cluster=ref, is_ready=True, reason="Ping", message="still up")
    assert (await effector.apply(same)).outcome == "ok"
    got = conditions(sim.get("clusters", "cs-2", NS))["Ready"]
    assert (got["lastTransitionTime"], got["message"]) == (OLD_TIME, "still up")

    down = SetClusterStatus(cluster=ref, is_ready=False, reason="NoPing", message="down")
    assert (await effector.apply(down)).outcome == "ok"
    status = sim.get("clusters", "cs-2", NS)["status"]
    assert status["isReady"] is False
    got = conditions({"status": status})["Ready"]
    assert got["status"] == "False"
    assert got["lastTransitionTime"] > OLD_TIME


async def test_set_cluster_status_truncates_a_long_message(
    sim: KubeSim, api: client.ApiClient
) -> None:
    uid = sim.create(cluster("cs-3"))["metadata"]["uid"]
    ref = ClusterRef(namespace=NS, name="cs-3", uid=uid)
    await KubeEffector(api).apply(
        SetClusterStatus(cluster=ref, is_ready=False, reason="R", message="x" * 40000)
    )
    message = conditions(sim.get("clusters", "cs-3", NS))["Ready"]["message"]
    assert message == "x" * 32768


async def test_set_cluster_status_leaves_a_gone_or_recreated_cluster_alone(
    sim: KubeSim, api: client.ApiClient
) -> None:
    effector = KubeEffector(api)
    gone = ClusterRef(namespace=NS, name="cs-gone", uid="0000")
    result = await effector.apply(
        SetClusterStatus(cluster=gone, is_ready=True, reason="", message="")
    )
    assert (result.outcome, result.detail) == ("noop", "Cluster is gone")

    old_uid = sim.create(cluster("cs-4"))["metadata"]["uid"]
    sim.delete("clusters", "cs-4", NS)
    sim.create(cluster("cs-4"))
    old = ClusterRef(namespace=NS, name="cs-4", uid=old_uid)
    result = await effector.apply(
        SetClusterStatus(cluster=old, is_ready=True, reason="", message="")
    )
    assert (result.outcome, result.detail) == ("noop", "Cluster was re-created")
    assert "status" not in sim.get("clusters", "cs-4", NS)


async def test_set_cluster_status_conflict_is_transient(
    sim: KubeSim, api: client.ApiClient
) -> None:
    uid = sim.create(cluster("cs-5"))["metadata"]["uid"]
    ref = ClusterRef(namespace=NS, name="cs-5", uid=uid)
    sim.fail_next(1, 409, verb="patch")
    with pytest.raises(Transient):
        await KubeEffector(api).apply(
            SetClusterStatus(cluster=ref, is_ready=True, reason="R", message="m")
        )
    assert "status" not in sim.get("clusters", "cs-5", NS)


# --- events ----------------------------------------------------------------------------------


def events_about(sim: KubeSim, namespace: str, name: str) -> list[dict[str, Any]]:
    return [e for e in sim.list("events", namespace) if e["involvedObject"]["name"] == name]


async def test_record_event_on_a_pod_goes_to_its_namespace(
    sim: KubeSim, api: client.ApiClient
) -> None:
    pod = sim.add_pod("ev-pod", "kube-public")
    uid = pod["metadata"]["uid"]
    effector = KubeEffector(api, component="test-bridge")
    action = RecordEvent(
        api_version="v1",
        object_kind="Pod",
        name="ev-pod",
        namespace="kube-public",
        uid=uid,
        type="Warning",
        reason="SomethingHappened",
        message="details",
    )
    assert (await effector.apply(action)).outcome == "ok"
    [event] = events_about(sim, "kube-public", "ev-pod")
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "ev-pod",
        "namespace": "kube-public",
        "uid": uid,
    }
    assert (event["type"], event["reason"], event["message"], event["count"]) == (
        "Warning",
        "SomethingHappened",
        "details",
        1,
    )
    assert event["source"] == {"component": "test-bridge"}
    assert event["reportingComponent"] == "test-bridge"
    assert events_about(sim, "kube-system", "ev-pod") == []

    # Each apply is one more Event (the worker's `on` gate prevents repeats, not this).
    assert (await effector.apply(action)).outcome == "ok"
    assert len(events_about(sim, "kube-public", "ev-pod")) == 2


async def test_record_event_on_a_cluster_scoped_object_goes_to_default(
    sim: KubeSim, api: client.ApiClient
) -> None:
    # client-go's recorder puts a Node's Events in "default"; the API server refuses them in
    # any other namespace (the simulator's 422, test_sim_kube.py).
    sim.add_node("ev-node")
    effector = KubeEffector(api)
    action = RecordEvent(
        api_version="v1", object_kind="Node", name="ev-node", reason="Drained", message="m"
    )
    assert (await effector.apply(action)).outcome == "ok"
    [event] = events_about(sim, "default", "ev-node")
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "ev-node"}
    assert event["type"] == "Normal"


async def test_record_event_error_is_transient(sim: KubeSim, api: client.ApiClient) -> None:
    sim.fail_next(1, 500, verb="create", resource="events")
    with pytest.raises(Transient):
        await KubeEffector(api).apply(
            RecordEvent(api_version="v1", object_kind="Node", name="ev-x", reason="R", message="m")
        )
    assert events_about(sim, NS, "ev-x") == []


async def test_a_once_event_is_created_once(sim: KubeSim, api: client.ApiClient) -> None:
    sim.add_node("ev-once")
    effector = KubeEffector(api)
    action = RecordEvent(
        api_version="v1",
        object_kind="Node",
        name="ev-once",
        reason="Conflict",
        message="m",
        once="conflict.g2",
    )
    assert (await effector.apply(action)).outcome == "ok"
    # The API server answers the second create 409 AlreadyExists: one Event, and a noop.
    again = await effector.apply(action)
    assert (again.outcome, again.detail) == ("noop", "Event Conflict recorded before (conflict.g2)")
    [event] = events_about(sim, "default", "ev-once")
    assert event["metadata"]["name"] == "ev-once.conflict.g2"
    other = msgspec.structs.replace(action, once="conflict.g3")
    assert (await effector.apply(other)).outcome == "ok"
    assert len(events_about(sim, "default", "ev-once")) == 2
