"""NodeSets end to end in the simulators: slurmd pods become Slurm nodes, scale-out, a
scale-in that drains before deleting and never deletes a pod whose node runs a job, and a
rolling update of the template, one pod at a time."""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas import wellknown
from schemas.actions import CreateNodeSetPod, DeleteNodeSetPod, DrainSlurmNode, UndrainSlurmNode
from slurmbridge.devtools.sim.kube import ApiError
from slurmbridge.devtools.testing import MANAGED_NODE_TOLERATION, Stack
from tests._helpers import create_slurmd_nodeset, nodeset, slurmd_template

NS = "slurm"


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=4, poll_interval=0.2) as s:
        template = {"metadata": {"labels": {"team": "hpc"}}, **slurmd_template("slurmd:25.05")}
        create_slurmd_nodeset(s, NS, replicas=0, template=template)
        yield s


def scale(stack: Stack, replicas: int) -> None:
    """``kubectl scale nodeset/gpu --replicas=N`` (the scale subresource)."""
    stack.kube.patch("nodesets", "gpu", {"spec": {"replicas": replicas}}, NS, subresource="scale")


def pods(stack: Stack) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in stack.kube.list("pods", NS)}


def live(stack: Stack) -> set[str]:
    return {n for n, p in pods(stack).items() if not p["metadata"].get("deletionTimestamp")}


def running(stack: Stack) -> set[str]:
    return {
        n
        for n, p in pods(stack).items()
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    }


def status(stack: Stack) -> dict[str, Any]:
    return dict(stack.kube.get("nodesets", "gpu", NS).get("status") or {})


def run_job_on(stack: Stack, node: str, minutes: int | None = None) -> int:
    """An external job that fills ``node`` (2 CPUs) and runs until cancelled (or for
    ``minutes``: its time limit, the node's pod-deadline)."""
    others = [n for n in stack.slurm.nodes if n != node]
    desc: dict[str, Any] = {
        "partition": "batch",
        "tasks": 2,
        "min_nodes": 1,
        "excluded_nodes": others,
    }
    if minutes is not None:
        desc["time_limit"] = minutes
    return stack.slurm.submit(desc, external=True)


async def test_scale_out_then_in_drains_before_delete_and_spares_busy_nodes(
    stack: Stack,
) -> None:
    scale(stack, 8)
    want = {f"gpu-{i}" for i in range(8)}
    await stack.wait_for(lambda: running(stack) == want, timeout=20, what="8 slurmd pods Running")
    await stack.wait_for(
        lambda: want <= set(stack.slurm.nodes), what="8 Slurm nodes registered by slurmd"
    )
    await stack.wait_for(
        lambda: status(stack).get("replicas") == 8 and status(stack).get("slurmIdle") == 8,
        what="status counts",
    )
    pod0 = pods(stack)["gpu-0"]
    assert pod0["spec"]["hostname"] == "gpu-0"
    assert pod0["spec"]["subdomain"] == "slurmd"
    assert pod0["metadata"]["labels"]["team"] == "hpc"
    assert pod0["metadata"]["ownerReferences"][0]["kind"] == "NodeSet"

    # Jobs on the three highest ordinals; gpu-6's ends soonest.
    limits = {"gpu-5": 60, "gpu-6": 30, "gpu-7": 120}
    jobs = {node: run_job_on(stack, node, minutes) for node, minutes in limits.items()}
    for node, job in jobs.items():
        assert stack.slurm.job(job).nodes == (node,)
    await stack.wait_for(
        lambda: all(
            pods(stack)[n]["metadata"]["labels"].get(wellknown.LABEL_POD_PROTECT) == "true"
            and wellknown.ANNOTATION_POD_DEADLINE in pods(stack)[n]["metadata"]["annotations"]
            for n in jobs
        ),
        what="busy pods protected and carrying their pod-deadline",
    )
    assert wellknown.ANNOTATION_POD_DEADLINE not in (
        pods(stack)["gpu-0"]["metadata"].get("annotations") or {}
    )

    scale(stack, 2)
    # slurm-operator 1.x order: the pods running nothing go first (no deadline), then the
    # one whose jobs end soonest (gpu-6), which is drained and stays while its job runs.
    await stack.wait_for(
        lambda: live(stack) == {"gpu-5", "gpu-6", "gpu-7"},
        timeout=15,
        what="idle condemned pods deleted",
    )
    await stack.wait_for(
        lambda: stack.slurm_node("gpu-6").reason == wellknown.scale_in_drain_reason(NS, "gpu-6"),
        what="gpu-6 drained for scale-in",
    )
    assert stack.slurm_node("gpu-6").has("DRAIN")
    for node in ("gpu-5", "gpu-7"):
        assert not stack.slurm_node(node).has("DRAIN"), node
    await stack.settled()
    assert live(stack) >= set(jobs), "a pod whose node runs a job was deleted"

    # An administrator drains gpu-5; then the scale-in is reversed: our drain of gpu-6 is
    # undone, the administrator's stays.
    stack.admin_drain("gpu-5", "admin: replace fan")
    scale(stack, 3)
    await stack.wait_for(
        lambda: not stack.slurm_node("gpu-6").has("DRAIN"), what="our scale-in drain undone"
    )
    await stack.settled()
    assert stack.slurm_node("gpu-5").reason == "admin: replace fan", "an admin drain was undone"
    assert live(stack) == {"gpu-5", "gpu-6", "gpu-7"}

    # Down to 2 again, and gpu-6's job ends: drained and idle, its pod goes.
    scale(stack, 2)
    await stack.wait_for(lambda: stack.slurm_node("gpu-6").has("DRAIN"), what="gpu-6 drained")
    stack.slurm.cancel_job(jobs["gpu-6"])
    await stack.wait_for(
        lambda: "gpu-6" not in live(stack), timeout=5, what="gpu-6 deleted once idle"
    )
    await stack.settled()  # the delete's action record is stored
    assert stack.sims.slurmd.removed_busy == []

    records = await stack.action_records()
    deleted = sorted(
        r.action.pod.name
        for r in records
        if isinstance(r.action, DeleteNodeSetPod) and r.outcome == "ok"
    )
    assert deleted == ["gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-6"]
    # Drain before delete: each deleted pod's node was drained by an earlier action.
    for name in deleted:
        order = [
            type(r.action).__name__
            for r in records
            if r.outcome == "ok"
            and (
                (isinstance(r.action, DrainSlurmNode) and r.action.node == name)
                or (isinstance(r.action, DeleteNodeSetPod) and r.action.pod.name == name)
            )
        ]
        assert order[-2:] == ["DrainSlurmNode", "DeleteNodeSetPod"], (name, order)
    undrained = {
        r.action.node
        for r in records
        if isinstance(r.action, UndrainSlurmNode) and r.outcome == "ok"
    }
    assert undrained == {"gpu-6"}


async def test_deleting_the_nodeset_stops_reconciling_it(stack: Stack) -> None:
    scale(stack, 2)
    await stack.wait_for(lambda: len(running(stack)) == 2, timeout=20, what="2 pods Running")
    stack.kube.delete("nodesets", "gpu", NS)
    with pytest.raises(ApiError):
        stack.kube.get("nodesets", "gpu", NS)
    await stack.settled()
    # No garbage collector runs in the simulator: the pods stay, and nothing recreates or
    # deletes them on its own.
    assert len(live(stack)) == 2


async def test_busy_pods_are_guarded_by_a_pdb_against_eviction(stack: Stack) -> None:
    scale(stack, 2)
    await stack.wait_for(lambda: {"gpu-0", "gpu-1"} <= set(stack.slurm.nodes), timeout=20)
    run_job_on(stack, "gpu-1")
    await stack.wait_for(
        lambda: (
            pods(stack)["gpu-1"]["metadata"]["labels"].get(wellknown.LABEL_POD_PROTECT) == "true"
        ),
        what="gpu-1 protected",
    )
    await stack.wait_for(
        lambda: any(
            p["metadata"]["name"] == "gpu" for p in stack.kube.list("poddisruptionbudgets", NS)
        ),
        what="the NodeSet's PDB",
    )
    pdb = stack.kube.get("poddisruptionbudgets", "gpu", NS)
    assert pdb["spec"]["maxUnavailable"] == 0
    assert pdb["spec"]["selector"]["matchLabels"][wellknown.LABEL_POD_PROTECT] == "true"
    assert pdb["metadata"]["ownerReferences"][0]["kind"] == "NodeSet"

    assert stack.app is not None and stack.app.kube_api is not None
    core = client.CoreV1Api(stack.app.kube_api)

    def eviction(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": NS},
        }

    with pytest.raises(ApiException) as refused:
        await core.create_namespaced_pod_eviction("gpu-1", NS, eviction("gpu-1"))
    assert refused.value.status == 429  # kubectl drain waits: the busy slurmd stays
    await core.create_namespaced_pod_eviction("gpu-0", NS, eviction("gpu-0"))  # idle: allowed


async def test_failed_pod_is_recreated_under_its_name_after_the_backoff(stack: Stack) -> None:
    scale(stack, 2)
    await stack.wait_for(lambda: running(stack) == {"gpu-0", "gpu-1"}, timeout=20)
    old_uid = pods(stack)["gpu-1"]["metadata"]["uid"]
    # Someone's junk in our annotation: the count starts afresh instead of failing the delete.
    junk = {"metadata": {"annotations": {wellknown.ANNOTATION_NODESET_POD_FAILURES: "5"}}}
    stack.kube.patch("nodesets", "gpu", junk, NS)
    failed_at = time.time()
    stack.kube.patch("pods", "gpu-1", {"status": {"phase": "Failed"}}, NS, subresource="status")
    await stack.wait_for(lambda: "gpu-1" not in pods(stack), what="failed pod deleted")
    ann = stack.kube.get("nodesets", "gpu", NS)["metadata"]["annotations"]
    count, at, uid = json.loads(ann[wellknown.ANNOTATION_NODESET_POD_FAILURES])["gpu-1"]
    assert (count, uid) == (1, old_uid)
    assert abs(at - failed_at) < 5
    await stack.wait_for(
        lambda: "gpu-1" in running(stack), timeout=20, what="gpu-1 recreated and Running"
    )
    recreated = pods(stack)["gpu-1"]
    assert recreated["metadata"]["uid"] != old_uid
    assert time.time() - failed_at >= 10.0 - 1.0  # the first back-off (10 s, whole seconds)
    assert set(running(stack)) == {"gpu-0", "gpu-1"}, "another ordinal was used meanwhile"
    reasons = [e["reason"] for e in stack.kube.list("events", NS)]
    assert "PodFailed" in reasons


def condition(stack: Stack, pod: str, type_: str) -> dict[str, Any] | None:
    for c in (pods(stack)[pod].get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


async def test_a_cordoned_node_drains_its_slurmd_node_and_uncordon_undrains(
    stack: Stack,
) -> None:
    """slurm-operator 1.x cordon sync: cordoning the Kubernetes node of a slurmd pod drains
    its Slurm node with the node's cordon-reason annotation; the pod shows it as condition
    SlurmNodeStateDrain; uncordon undrains. The other pod's node is untouched; a v1beta1
    NodeSet (controllerRef) is read as the v1alpha1 one is."""
    stack.kube.create(
        nodeset(
            "cpu",
            NS,
            version="v1beta1",
            controllerRef={"name": ""},
            replicas=2,
            slurmd={"image": "slurmd:25.11"},
            # The nodes are Slurm's too (managed-node NoExecute taint): without the
            # toleration the kubelet refuses a pod bound after the taint lands.
            template={
                "metadata": {"labels": {"team": "cpu"}},
                "spec": {"tolerations": [MANAGED_NODE_TOLERATION]},
            },
        )
    )
    both = {"cpu-0", "cpu-1"}
    await stack.wait_for(lambda: both <= running(stack), timeout=20, what="2 slurmd pods Running")
    await stack.wait_for(lambda: both <= set(stack.slurm.nodes), what="Slurm nodes registered")
    await stack.wait_for(
        lambda: all(
            (condition(stack, p, "SlurmNodeStateIdle") or {}).get("status") == "True" for p in both
        ),
        what="SlurmNodeStateIdle on the pods",
    )
    assert pods(stack)["cpu-0"]["spec"]["containers"][0]["image"] == "slurmd:25.11"
    node = pods(stack)["cpu-0"]["spec"]["nodeName"]
    other = next(p for p in both if pods(stack)[p]["spec"]["nodeName"] != node)
    stack.kube.patch(
        "nodes",
        node,
        {"metadata": {"annotations": {wellknown.ANNOTATION_NODE_CORDON_REASON: "GPU ECC"}}},
    )
    stack.kube.cordon(node)
    reason = wellknown.OPERATOR_REASON_PREFIX + "GPU ECC"
    await stack.wait_for(
        lambda: (
            stack.slurm_node("cpu-0").has("DRAIN") and stack.slurm_node("cpu-0").reason == reason
        ),
        what="cpu-0 drained with the node's cordon reason",
    )
    await stack.wait_for(
        lambda: (condition(stack, "cpu-0", "SlurmNodeStateDrain") or {}).get("message") == reason,
        what="SlurmNodeStateDrain on cpu-0 with the reason",
    )
    assert not stack.slurm_node(other).has("DRAIN")

    stack.kube.uncordon(node)
    await stack.wait_for(lambda: not stack.slurm_node("cpu-0").has("DRAIN"), what="cpu-0 undrained")
    await stack.wait_for(
        lambda: condition(stack, "cpu-0", "SlurmNodeStateDrain") is None,
        what="SlurmNodeStateDrain gone from cpu-0",
    )

    # The pod-cordon annotation is the tools' API: set ⇒ drain, removed ⇒ undrain.
    cordon = wellknown.ANNOTATION_POD_CORDON
    stack.kube.patch("pods", other, {"metadata": {"annotations": {cordon: "true"}}}, NS)
    await stack.wait_for(
        lambda: stack.slurm_node(other).reason == wellknown.pod_cordon_drain_reason(NS, other),
        what="pod-cordon drains",
    )
    stack.kube.patch("pods", other, {"metadata": {"annotations": {cordon: None}}}, NS)
    await stack.wait_for(lambda: not stack.slurm_node(other).has("DRAIN"), what="undrained")

    # An administrator's drain is never undone.
    stack.slurm.admin_drain(other, "admin: bad fan")
    await stack.settled()
    assert stack.slurm_node(other).reason == "admin: bad fan"


def revision(stack: Stack, name: str) -> str:
    return str(pods(stack)[name]["metadata"]["labels"].get(wellknown.LABEL_REVISION_HASH, ""))


async def test_a_template_change_rolls_pods_one_at_a_time_sparing_busy_nodes(
    stack: Stack,
) -> None:
    """RollingUpdate with maxUnavailable 1 (slurm-operator 1.x nodeset_sync.go
    ``syncRollingUpdate``): after a template change the old pods are replaced one at a
    time — never fewer than 3 of 4 Ready — the idle ones first; a pod whose Slurm node runs
    a job is drained and waits until the job ends. The revision is a ControllerRevision."""
    stack.kube.patch(
        "nodesets",
        "gpu",
        {
            "spec": {
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
            }
        },
        NS,
    )
    scale(stack, 4)
    four = {f"gpu-{i}" for i in range(4)}
    await stack.wait_for(lambda: running(stack) == four, timeout=20, what="4 slurmd pods Running")
    await stack.wait_for(lambda: four <= set(stack.slurm.nodes), what="4 Slurm nodes")
    first = revision(stack, "gpu-0")
    assert first and {revision(stack, p) for p in four} == {first}
    await stack.wait_for(
        lambda: (
            status(stack).get("nodeSetHash") == first and status(stack).get("updatedReplicas") == 4
        ),
        what="status names the revision",
    )
    (rev,) = stack.kube.list("controllerrevisions", NS)
    assert rev["metadata"]["name"] == f"gpu-{first}" and rev["revision"] == 1
    assert rev["metadata"]["ownerReferences"][0]["kind"] == "NodeSet"
    assert rev["data"]["spec"]["template"]["spec"]["containers"][0]["image"] == "slurmd:25.05"

    job = run_job_on(stack, "gpu-1")
    await stack.wait_for(lambda: stack.slurm_node("gpu-1").has("ALLOCATED"), what="gpu-1 busy")
    uid1 = pods(stack)["gpu-1"]["metadata"]["uid"]

    ready_low = 4

    def ready_now() -> int:
        return sum(
            1
            for p in pods(stack).values()
            if not p["metadata"].get("deletionTimestamp")
            and any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        )

    def rolled_except_busy() -> bool:
        nonlocal ready_low
        ready_low = min(ready_low, ready_now())
        current = pods(stack)
        return (
            set(current) == four
            and all(revision(stack, p) not in ("", first) for p in four - {"gpu-1"})
            and all(
                (current[p].get("status") or {}).get("phase") == "Running" for p in four - {"gpu-1"}
            )
        )

    template = {
        "metadata": {"labels": {"team": "hpc"}},
        "spec": {"containers": [{"name": "slurmd", "image": "slurmd:25.11"}]},
    }
    stack.kube.patch("nodesets", "gpu", {"spec": {"template": template}}, NS)
    await stack.wait_for(rolled_except_busy, timeout=40, what="the idle pods rolled")
    second = revision(stack, "gpu-0")
    assert pods(stack)["gpu-0"]["spec"]["containers"][0]["image"] == "slurmd:25.11"
    # The busy pod is drained for the update and stays while its job runs.
    await stack.wait_for(
        lambda: stack.slurm_node("gpu-1").reason == wellknown.scale_in_drain_reason(NS, "gpu-1"),
        what="gpu-1 drained for the update",
    )
    await stack.settled()
    assert pods(stack)["gpu-1"]["metadata"]["uid"] == uid1, "a busy pod was deleted"
    assert revision(stack, "gpu-1") == first

    stack.slurm.cancel_job(job)

    def all_rolled() -> bool:
        nonlocal ready_low
        ready_low = min(ready_low, ready_now())
        return (
            set(pods(stack)) == four
            and {revision(stack, p) for p in four} == {second}
            and running(stack) == four
        )

    await stack.wait_for(all_rolled, timeout=30, what="gpu-1 replaced once idle")
    assert ready_low >= 3, f"{4 - ready_low} pods unavailable at once (maxUnavailable 1)"
    assert stack.sims.slurmd.removed_busy == []
    await stack.wait_for(
        lambda: (
            status(stack).get("nodeSetHash") == second and status(stack).get("updatedReplicas") == 4
        ),
        what="status at the new revision",
    )
    # revisionHistoryLimit 0: the old revision is pruned once no pod uses it.
    await stack.wait_for(
        lambda: (
            [r["metadata"]["name"] for r in stack.kube.list("controllerrevisions", NS)]
            == [f"gpu-{second}"]
        ),
        what="old revision pruned",
    )
    assert stack.kube.get("controllerrevisions", f"gpu-{second}", NS)["revision"] == 2

    await stack.settled()
    records = await stack.action_records()
    deletes = [
        r.action.pod.name
        for r in records
        if isinstance(r.action, DeleteNodeSetPod) and r.outcome == "ok"
    ]
    assert sorted(deletes) == sorted(four) and deletes[-1] == "gpu-1"
    # One at a time: each deletion is followed by its re-creation before the next one.
    steps = [
        type(r.action).__name__
        for r in records
        if isinstance(r.action, (DeleteNodeSetPod, CreateNodeSetPod)) and r.outcome == "ok"
    ]
    rolled = steps[steps.index("DeleteNodeSetPod") :]
    assert rolled == ["DeleteNodeSetPod", "CreateNodeSetPod"] * 4, steps


async def test_daemonset_mode_follows_node_labels(stack: Stack) -> None:
    """DaemonSet mode follows node labels (slurm-operator 1.x ``scalingMode: DaemonSet``):
    labelling a node adds a slurmd pod pinned to it, its hostname the node's (here its
    hostname-override annotation, as the Kubernetes nodes are Slurm nodes of the static
    cluster already) and extraConf on its ``--conf``; removing the label drains its Slurm
    node and deletes the pod only once no job runs there; a failed pod is replaced after its
    node's back-off; a changed hostname override re-creates the pod under the new name."""
    for i in (1, 2, 3):
        stack.kube.patch(
            "nodes",
            f"n{i}",
            {"metadata": {"annotations": {wellknown.ANNOTATION_NODE_HOSTNAME_OVERRIDE: f"sd{i}"}}},
        )
    stack.kube.create(
        nodeset(
            "ds",
            NS,
            version="v1beta1",
            controllerRef={"name": ""},
            scalingMode="DaemonSet",
            replicas=7,  # ignored in DaemonSet mode
            extraConf="Weight=5",
            template=slurmd_template("slurmd:25.11", nodeSelector={"slurmd": "yes"}),
        )
    )

    def ds_pods() -> dict[str, dict[str, Any]]:
        """Live pods of NodeSet ds by node."""
        return {
            p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
                "nodeSelectorTerms"
            ][0]["matchFields"][0]["values"][0]: p
            for p in stack.kube.list("pods", NS)
            if p["metadata"]["labels"].get("app.kubernetes.io/instance") == "ds"
            and not p["metadata"].get("deletionTimestamp")
        }

    def ds_status() -> dict[str, Any]:
        return dict(stack.kube.get("nodesets", "ds", NS).get("status") or {})

    await stack.wait_for(lambda: ds_status().get("desired") == 0, what="status: no node wanted")
    assert ds_pods() == {}

    for i in (1, 2):
        stack.kube.patch("nodes", f"n{i}", {"metadata": {"labels": {"slurmd": "yes"}}})
    await stack.wait_for(
        lambda: {"sd1", "sd2"} <= set(stack.slurm.nodes), timeout=20, what="sd1, sd2 registered"
    )
    by_node = ds_pods()
    assert set(by_node) == {"n1", "n2"}
    p1 = by_node["n1"]
    assert p1["metadata"]["name"].startswith("ds-") and p1["spec"]["nodeName"] == "n1"
    assert p1["spec"]["hostname"] == "sd1"
    assert p1["metadata"]["labels"][wellknown.LABEL_POD_HOSTNAME] == "sd1"
    assert p1["metadata"]["labels"][wellknown.LABEL_SCALING_MODE] == "DaemonSet"
    args = p1["spec"]["containers"][0]["args"]
    assert args[-2:] == ["--conf", "Features=ds Weight=5"]
    await stack.wait_for(
        lambda: ds_status().get("desired") == 2 and ds_status().get("replicas") == 2,
        what="status: 2 desired, 2 pods",
    )

    # A job on sd1; n1 loses its label: sd1 is drained, its pod stays while the job runs.
    job = run_job_on(stack, "sd1")
    assert stack.slurm.job(job).nodes == ("sd1",)
    stack.kube.patch("nodes", "n1", {"metadata": {"labels": {"slurmd": None}}})
    await stack.wait_for(
        lambda: stack.slurm_node("sd1").has("DRAIN"), what="sd1 drained (label removed)"
    )
    assert stack.slurm_node("sd1").reason == wellknown.scale_in_drain_reason(
        NS, p1["metadata"]["name"]
    )
    await stack.wait_for(lambda: ds_status().get("desired") == 1, what="status: 1 desired")
    assert "n1" in ds_pods(), "a pod whose Slurm node runs a job was deleted"
    assert not stack.slurm_node("sd2").has("DRAIN")

    stack.slurm.cancel_job(job)
    await stack.wait_for(lambda: set(ds_pods()) == {"n2"}, timeout=15, what="n1's pod deleted")
    await stack.wait_for(lambda: "sd1" not in stack.slurm.nodes, what="sd1 left Slurm")
    assert stack.sims.slurmd.removed_busy == []
    # n3 labelled: a pod for it.
    stack.kube.patch("nodes", "n3", {"metadata": {"labels": {"slurmd": "yes"}}})
    await stack.wait_for(lambda: set(ds_pods()) == {"n2", "n3"}, timeout=15, what="pod on n3")

    # n2's slurmd pod fails: it is deleted, the failure is n2's, and n2 gets its next pod
    # only after the back-off (10 s), never two at once.
    failed = ds_pods()["n2"]["metadata"]
    failed_at = time.time()
    stack.kube.patch(
        "pods", failed["name"], {"status": {"phase": "Failed"}}, NS, subresource="status"
    )
    await stack.wait_for(
        lambda: failed["name"] not in {p["metadata"]["name"] for p in stack.kube.list("pods", NS)},
        what="failed daemon pod deleted",
    )
    ann = stack.kube.get("nodesets", "ds", NS)["metadata"]["annotations"]
    count, _, uid = json.loads(ann[wellknown.ANNOTATION_NODESET_POD_FAILURES])["node/n2"]
    assert (count, uid) == (1, failed["uid"])
    await stack.wait_for(lambda: "n2" in ds_pods(), timeout=20, what="n2's pod re-created")
    assert time.time() - failed_at >= 10.0 - 1.0  # the first back-off, whole seconds
    assert ds_pods()["n2"]["metadata"]["uid"] != failed["uid"]

    # n3's hostname override changes: its pod (Slurm node sd3) is drained and replaced by
    # one named sd3b; sd3b registers, sd3 leaves.
    old3 = ds_pods()["n3"]["metadata"]["name"]
    await stack.wait_for(lambda: "sd3" in stack.slurm.nodes, timeout=15, what="sd3 registered")
    stack.kube.patch(
        "nodes",
        "n3",
        {"metadata": {"annotations": {wellknown.ANNOTATION_NODE_HOSTNAME_OVERRIDE: "sd3b"}}},
    )
    await stack.wait_for(
        lambda: "n3" in ds_pods() and ds_pods()["n3"]["spec"]["hostname"] == "sd3b",
        timeout=20,
        what="n3's pod re-created as sd3b",
    )
    assert old3 not in {p["metadata"]["name"] for p in stack.kube.list("pods", NS)}
    await stack.wait_for(lambda: "sd3b" in stack.slurm.nodes, timeout=15, what="sd3b registered")
    assert stack.sims.slurmd.removed_busy == []


def _older_crd(stack: Stack) -> None:
    """Serve NodeSets as an older CRD did, without ``replicas``' maximum (a cluster upgraded
    without its CRDs): only then can a NodeSet hold replicas: 1000000000."""
    spec = stack.kube.resource("nodesets.slinky.slurm.net")
    schemas = copy.deepcopy(dict(spec.schemas))
    for schema in schemas.values():
        schema["properties"]["spec"]["properties"]["replicas"].pop("maximum")
    stack.kube.register(dataclasses.replace(spec, schemas=schemas))


async def test_a_nodeset_with_absurd_replicas_stalls_no_other_key(stack: Stack) -> None:
    """Bad input is bounded: a NodeSet asking for 10^9 pods (stored under an older CRD) gets
    no pod, a ReplicaFailure condition and one Warning Event naming spec.replicas, while
    another NodeSet made after it scales out as usual — one bad key never stalls the
    others."""
    _older_crd(stack)
    stack.kube.create(
        nodeset(
            "huge", NS, version="v1beta1", replicas=10**9, template=slurmd_template("slurmd:25.05")
        )
    )

    def condition() -> dict[str, Any]:
        st = stack.kube.get("nodesets", "huge", NS).get("status") or {}
        return next((c for c in st.get("conditions") or [] if c["type"] == "ReplicaFailure"), {})

    await stack.wait_for(lambda: condition(), timeout=20, what="huge's ReplicaFailure condition")
    assert condition()["reason"] == "ReplicasAboveMaximum"
    assert "spec.replicas" in condition()["message"]
    scale(stack, 3)
    want = {f"gpu-{i}" for i in range(3)}
    await stack.wait_for(lambda: running(stack) == want, timeout=30, what="gpu's 3 pods Running")
    assert not [n for n in pods(stack) if n.startswith("huge-")]
    warnings = [
        e
        for e in stack.kube.list("events", NS)
        if e["reason"] == "ReplicasAboveMaximum" and e["involvedObject"]["name"] == "huge"
    ]
    assert warnings, "no ReplicasAboveMaximum Event on huge"
    assert warnings[0]["type"] == "Warning"
    assert "should be less than or equal to 10000" in warnings[0]["message"]


async def test_the_kubelets_reason_for_a_failed_slurmd_pod_is_on_the_nodeset(
    stack: Stack,
) -> None:
    """A slurmd pod the kubelet refuses (it asks for more CPU than any node has: OutOfcpu,
    kubelet.go ``rejectPod``) fails; the Warning Event on its NodeSet names the kubelet's
    reason and message, not just "Failed"."""
    stack.kube.create(
        nodeset(
            "big",
            NS,
            version="v1beta1",
            replicas=1,
            slurmd={"image": "slurmd:25.11", "resources": {"requests": {"cpu": "64"}}},
        )
    )

    def failed() -> list[str]:
        return [
            e["message"]
            for e in stack.kube.list("events", NS)
            if e["reason"] == "PodFailed"
            and e["type"] == "Warning"
            and e["involvedObject"]["name"] == "big"
        ]

    await stack.wait_for(lambda: bool(failed()), timeout=20, what="a PodFailed Event on big")
    assert failed()[0].startswith("big-0 is Failed (OutOfcpu: Pod was rejected: "), failed()
