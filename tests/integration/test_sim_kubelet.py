"""The simulated kubelet and the pod-group helper of the Kubernetes simulator."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from slurmbridge.devtools.sim.kube import ApiError, KubeSim
from slurmbridge.devtools.sim.kubelet import ANNOTATION_EXIT_CODE, ANNOTATION_RUN_SECONDS
from slurmbridge.devtools.sim.workloads import create_group

FIN = "example.com/keep"


@pytest.fixture
async def sim() -> AsyncIterator[KubeSim]:
    async with KubeSim(kubelet=True) as s:
        s.add_node("k1")
        yield s


async def until(cond: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def pod(sim: KubeSim, name: str) -> dict[str, Any] | None:
    try:
        return sim.get("pods", name, "default")
    except ApiError:
        return None


def phase(sim: KubeSim, name: str) -> str:
    p = pod(sim, name)
    return "" if p is None else str((p.get("status") or {}).get("phase", "Pending"))


def finalizers(sim: KubeSim, name: str) -> list[str]:
    p = pod(sim, name)
    return [] if p is None else list(p["metadata"].get("finalizers") or [])


async def test_a_bound_pod_runs_then_succeeds_after_its_run_seconds(sim: KubeSim) -> None:
    sim.add_pod("p", annotations={ANNOTATION_RUN_SECONDS: "0.2"})
    await asyncio.sleep(0)  # give the kubelet a turn: an unbound pod must stay Pending
    assert phase(sim, "p") == "Pending"
    sim.bind("p", "k1")
    await until(lambda: phase(sim, "p") == "Running", "Running")
    p = pod(sim, "p")
    assert p is not None
    status = p["status"]
    assert status["startTime"]
    ready = {c["type"]: c["status"] for c in status["conditions"]}
    assert ready["Ready"] == "True" and ready["PodScheduled"] == "True"
    assert "running" in status["containerStatuses"][0]["state"]
    await until(lambda: phase(sim, "p") == "Succeeded", "Succeeded")
    done = pod(sim, "p")
    assert done is not None
    term = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 0 and term["reason"] == "Completed"


async def test_a_nonzero_exit_code_fails_the_pod(sim: KubeSim) -> None:
    sim.add_pod(
        "p", node_name="k1", annotations={ANNOTATION_RUN_SECONDS: "0", ANNOTATION_EXIT_CODE: "3"}
    )
    await until(lambda: phase(sim, "p") == "Failed", "Failed")
    p = pod(sim, "p")
    assert p is not None
    assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


async def test_a_pod_without_run_seconds_keeps_running(sim: KubeSim) -> None:
    sim.add_pod("server", node_name="k1")
    await until(lambda: phase(sim, "server") == "Running", "Running")
    await asyncio.sleep(0.2)
    assert phase(sim, "server") == "Running"
    assert sim.kubelet is not None and sim.kubelet.transitions.get("Succeeded", 0) == 0


async def test_graceful_deletion_terminates_then_removes_the_pod(sim: KubeSim) -> None:
    sim.add_pod("p", node_name="k1")
    await until(lambda: phase(sim, "p") == "Running", "Running")
    sim.delete("pods", "p", "default")
    await until(lambda: pod(sim, "p") is None, "pod removed")


async def test_a_finalizer_holds_a_terminated_pod_until_removed(sim: KubeSim) -> None:
    sim.add_pod("p", node_name="k1", finalizers=[FIN])
    await until(lambda: phase(sim, "p") == "Running", "Running")
    deleting = sim.delete("pods", "p", "default")
    meta = deleting["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 30  # the default terminationGracePeriodSeconds
    await until(lambda: phase(sim, "p") == "Failed", "terminal phase before removal")
    p = pod(sim, "p")
    assert p is not None
    assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 143
    sim.patch(
        "pods",
        "p",
        [{"op": "remove", "path": "/metadata/finalizers"}],
        "default",
        patch_type="json",
    )
    await until(lambda: pod(sim, "p") is None, "pod removed once the finalizer is gone")


async def test_deletion_timestamp_is_the_end_of_the_grace_period(sim: KubeSim) -> None:
    sim.stop_kubelet("k1")  # keep the pod Terminating
    sim.add_pod("p", node_name="k1", finalizers=[FIN])
    before = time.time()
    meta = sim.delete_pod("p", grace_period_seconds=120)["metadata"]
    stamp = time.mktime(time.strptime(meta["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ"))
    stamp -= time.timezone if time.daylight == 0 else time.altzone
    assert before + 118 <= stamp <= before + 122


async def test_a_stopped_kubelet_freezes_its_pods_until_it_starts_again(sim: KubeSim) -> None:
    sim.add_pod("p", node_name="k1")
    await until(lambda: phase(sim, "p") == "Running", "Running")
    sim.stop_kubelet("k1")
    node = sim.get("nodes", "k1")
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
    sim.delete("pods", "p", "default")
    await asyncio.sleep(0.2)
    p = pod(sim, "p")
    assert p is not None and p["metadata"]["deletionTimestamp"]
    assert phase(sim, "p") == "Running"  # nobody stops the containers
    sim.start_kubelet("k1")
    await until(lambda: pod(sim, "p") is None, "pod removed after the kubelet returns")
    node = sim.get("nodes", "k1")
    assert next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"


async def test_unbound_and_terminal_pods_are_deleted_at_once(sim: KubeSim) -> None:
    sim.add_pod("pending")
    sim.delete("pods", "pending", "default")
    assert pod(sim, "pending") is None
    sim.add_pod("done", node_name="k1", phase="Succeeded")
    sim.delete("pods", "done", "default")
    assert pod(sim, "done") is None


@pytest.mark.parametrize(
    ("kind", "size", "label", "owner_kind"),
    [
        ("Pod", 1, None, None),
        ("Job", 3, "batch.kubernetes.io/job-name", "Job"),
        ("JobSet", 3, "jobset.sigs.k8s.io/jobset-name", "Job"),
        ("LeaderWorkerSet", 3, "leaderworkerset.sigs.k8s.io/name", "LeaderWorkerSet"),
        ("PodGroup", 3, "scheduling.x-k8s.io/pod-group", None),
    ],
)
async def test_create_group_shapes_pods_like_their_controllers(
    sim: KubeSim, kind: str, size: int, label: str | None, owner_kind: str | None
) -> None:
    names = create_group(
        sim, kind, "g", size, annotations={"slurmjob.slinky.slurm.net/partition": "batch"}
    )
    assert len(names) == size
    for name in names:
        p = pod(sim, name)
        assert p is not None
        meta = p["metadata"]
        if label is not None:
            assert meta["labels"][label].startswith("g")
        refs = meta.get("ownerReferences") or []
        assert [r["kind"] for r in refs] == ([owner_kind] if owner_kind else [])
    if kind == "Pod":
        p = pod(sim, "g")
        assert p is not None
        assert p["metadata"]["annotations"]["slurmjob.slinky.slurm.net/partition"] == "batch"
    else:
        plural = {
            "Job": "jobs",
            "JobSet": "jobsets",
            "LeaderWorkerSet": "leaderworkersets",
            "PodGroup": "podgroups",
        }[kind]
        root = sim.get(plural, "g", "default")
        assert root["metadata"]["annotations"]["slurmjob.slinky.slurm.net/partition"] == "batch"
    if kind == "LeaderWorkerSet":
        assert names == ["g-0", "g-0-1", "g-0-2"]


def test_create_group_rejects_bad_arguments() -> None:
    sim = KubeSim()
    with pytest.raises(ValueError, match="kind"):
        create_group(sim, "Deployment", "g", 1)
    with pytest.raises(ValueError, match="size"):
        create_group(sim, "Job", "g", 0)
    with pytest.raises(ValueError, match="size"):
        create_group(sim, "Pod", "g", 2)


# --- admission (pkg/kubelet/lifecycle/predicate.go) ------------------------------------------


def rejection(sim: KubeSim, name: str) -> tuple[str, str]:
    status = (pod(sim, name) or {}).get("status") or {}
    return str(status.get("reason", "")), str(status.get("message", ""))


async def test_admission_refuses_a_pod_beyond_the_nodes_allocatable_cpu(sim: KubeSim) -> None:
    sim.add_pod("first", node_name="k1", requests={"cpu": "3"})
    await until(lambda: phase(sim, "first") == "Running", "first Running")
    sim.add_pod("second", node_name="k1", requests={"cpu": "1500m"})
    await until(lambda: phase(sim, "second") == "Failed", "second refused")
    assert rejection(sim, "second") == (
        "OutOfcpu",
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 1500, "
        "used: 3000, capacity: 4000",
    )
    assert not (pod(sim, "second") or {})["status"].get("containerStatuses")
    events = [e for e in sim.list("events", namespace="default") if e["reason"] == "OutOfcpu"]
    assert events and events[0]["type"] == "Warning"
    assert events[0]["involvedObject"]["name"] == "second"
    # What fits next to it is admitted; a finished pod no longer counts.
    sim.add_pod("small", node_name="k1", requests={"cpu": "1"})
    await until(lambda: phase(sim, "small") == "Running", "small Running")


async def test_admission_refuses_a_node_selector_the_node_does_not_match(sim: KubeSim) -> None:
    sim.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "ssd", "namespace": "default"},
            "spec": {
                "nodeName": "k1",
                "nodeSelector": {"disk": "ssd"},
                "containers": [{"name": "main", "image": "pause"}],
            },
        }
    )
    await until(lambda: phase(sim, "ssd") == "Failed", "refused")
    assert rejection(sim, "ssd") == (
        "NodeAffinity",
        "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node "
        "affinity/selector",
    )


async def test_admission_refuses_untolerated_noexecute_taints_only(sim: KubeSim) -> None:
    sim.add_node("k2", taints=[{"key": "a", "value": "b", "effect": "NoSchedule"}])
    sim.add_node("k3", taints=[{"key": "a", "value": "b", "effect": "NoExecute"}])
    sim.add_pod("on-noschedule", node_name="k2")
    sim.add_pod("on-noexecute", node_name="k3")
    await until(lambda: phase(sim, "on-noschedule") == "Running", "NoSchedule ignored")
    await until(lambda: phase(sim, "on-noexecute") == "Failed", "NoExecute refused")
    assert rejection(sim, "on-noexecute")[0] == "TaintToleration"
    tolerating = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "tolerating", "namespace": "default"},
        "spec": {
            "nodeName": "k3",
            "tolerations": [{"key": "a", "operator": "Equal", "value": "b"}],
            "containers": [{"name": "main", "image": "pause"}],
        },
    }
    sim.create(tolerating)
    await until(lambda: phase(sim, "tolerating") == "Running", "a tolerating pod runs")
