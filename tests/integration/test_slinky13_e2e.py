"""Slinky 1.3's eligibility and handoff rules end to end in the simulators (issue 28): a gang
bigger than the free nodes queues behind our own running jobs and starts when they end; two
shared gangs that each hold what the other needs both finish; a pod asking a host port in
use is never bound there. Sources: Slinky slurm-bridge 1.3
``internal/scheduler/plugins/slurmbridge/eligibility.go`` and its tests."""

from __future__ import annotations

from typing import Any

from schemas import wellknown
from schemas.actions import CancelSlurmJob, SubmitSlurmJob
from schemas.events import KubeNodeUsage
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Stack
from tests import _helpers
from tests._helpers import phase

JOBID = wellknown.LABEL_SLURM_JOBID
SCHED = wellknown.DEFAULT_SCHEDULER_NAME


def pod(stack: Stack, name: str) -> dict[str, Any]:
    """Pod ``default/<name>``, ``{}`` once gone."""
    return _helpers.pod(stack, name) or {}


def usage(stack: Stack, node: str) -> KubeNodeUsage | None:
    assert stack.app is not None
    return stack.app.projection.get(KubeNodeUsage, node, "k8s")


async def run_ours_beside_holders(
    stack: Stack, holder: dict[str, Any], ours: dict[str, Any], *, what: str
) -> None:
    """Pods that are not ours, ``<holder name>-n1`` … ``-n3``, bound to n1..n3 (tolerating
    everything) with the container ``holder``, observed (``what``); then our pod ``ours``
    with the container ``ours``, until it is Running."""
    for n in ("n1", "n2", "n3"):
        stack.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{holder['name']}-{n}", "namespace": "default"},
                "spec": {
                    "nodeName": n,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [holder],
                },
            }
        )
    await stack.wait_for(
        lambda: all((u := usage(stack, n)) is not None and u.pods for n in ("n1", "n2", "n3")),
        what=what,
    )
    stack.kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "ours", "namespace": "default"},
            "spec": {"schedulerName": SCHED, "containers": [ours]},
        }
    )
    await stack.wait_for(lambda: phase(stack, "ours") == "Running", timeout=30, what="Running")


async def excluded_nodes_submitted(stack: Stack) -> list[tuple[str, ...]]:
    """The ``excluded_nodes`` of each Slurm job submitted (outcome ``ok``), in order."""
    return [
        r.action.spec.excluded_nodes
        for r in await stack.action_records()
        if isinstance(r.action, SubmitSlurmJob) and r.outcome == "ok"
    ]


async def test_a_gang_bigger_than_the_free_nodes_queues_behind_our_jobs() -> None:
    """4 nodes, 2 of them whole-node busy with our running job: a gang of 4 whole-node pods
    is submitted with no node excluded (Slurm queues it behind ours), and runs on all 4 once
    our job ends."""
    async with Stack(nodes=4, poll_interval=0.2) as stack:
        hog = create_group(stack.kube, "Job", "hog", 2, requests={"cpu": "2"})
        await stack.wait_for(
            lambda: all(phase(stack, n) == "Running" for n in hog), timeout=30, what="hog Running"
        )
        busy = [str(pod(stack, n)["spec"]["nodeName"]) for n in hog]
        await stack.wait_for(
            lambda: all((u := usage(stack, n)) is not None and u.pods == 1 for n in busy),
            what="the hog's usage observed",
        )
        gang = create_group(stack.kube, "Job", "gang", 4, requests={"cpu": "2"})

        await stack.wait_for(
            lambda: all(JOBID in (pod(stack, n)["metadata"].get("labels") or {}) for n in gang),
            timeout=30,
            what="the gang submitted",
        )
        await stack.settled()
        submits = [
            r.action
            for r in await stack.action_records()
            if isinstance(r.action, SubmitSlurmJob)
            and r.outcome == "ok"
            and r.action.group == "default/Job:gang"
        ]
        (submit,) = submits
        assert submit.spec.excluded_nodes == ()
        assert all(phase(stack, n) == "Pending" for n in gang)
        hog_job = int(pod(stack, hog[0])["metadata"]["labels"][JOBID])
        stack.slurm.cancel_job(hog_job)
        await stack.wait_for(
            lambda: all(phase(stack, n) == "Running" for n in gang),
            timeout=30,
            what="the gang Running once our job ended",
        )
        assert sorted(str(pod(stack, n)["spec"]["nodeName"]) for n in gang) == [
            "n1",
            "n2",
            "n3",
            "n4",
        ]
        assert stack.kube.kubelet is not None and stack.kube.kubelet.rejected == []


async def test_two_shared_gangs_on_the_same_nodes_both_finish() -> None:
    """2 nodes of 2 Slurm CPUs but 1.5 allocatable CPUs: Slurm runs a second shared gang of
    two 1-CPU pods beside the first, while Kubernetes fits one pod per node. Its members never
    wait for the live first gang: its job is cancelled and submitted again until the first
    gang ends, then it runs — both finish (eligibility.go ``allocatedNodeWaitingForBridge``).
    The second gang is created once the first runs: binds of two groups at the same instant
    can race the usage watch (the kubelet would refuse the second). Issue 28's "both finish":
    the first does, and the second is never left waiting for it."""
    async with Stack(nodes=2, poll_interval=0.2) as stack:
        for n in ("n1", "n2"):
            stack.kube.patch_merge(
                "nodes", n, {"status": {"allocatable": {"cpu": "1500m"}}}, subresource="status"
            )
        shared = {"slurmjob.slinky.slurm.net/exclusive": "false"}
        a = create_group(
            stack.kube, "Job", "a", 2, requests={"cpu": "1"}, annotations=shared, run_seconds=3
        )
        await stack.wait_for(
            lambda: all(phase(stack, n) == "Running" for n in a), timeout=30, what="a Running"
        )
        await stack.wait_for(
            lambda: all((u := usage(stack, n)) is not None and u.pods for n in ("n1", "n2")),
            what="a's usage observed",
        )
        b = create_group(
            stack.kube, "Job", "b", 2, requests={"cpu": "1"}, annotations=shared, run_seconds=1
        )
        # b either finishes, or — when a pass binds it in the instant its cancelled job is
        # not yet seen ended — its pods go with that job (a Job controller would re-create
        # them; the simulator has none). Either way nothing waits for ever.
        await stack.wait_for(
            lambda: (
                all(phase(stack, n) == "Succeeded" for n in a)
                and all(phase(stack, n) in ("Succeeded", "") for n in b)
            ),
            timeout=60,
            what="both gangs done",
        )
        cancelled = [
            r.action.marker
            for r in await stack.action_records()
            if isinstance(r.action, CancelSlurmJob) and r.outcome == "ok"
        ]
        assert any("default/Job:b" in m for m in cancelled), "b never waited for the live a"
        assert stack.kube.kubelet is not None and stack.kube.kubelet.rejected == []


async def test_a_pod_asking_a_host_port_in_use_is_never_bound_there() -> None:
    """Pods that are not ours hold host port 8080 on n1..n3: our pod asking 8080 goes to n4,
    the others excluded (node_ports.go)."""
    async with Stack(nodes=4, poll_interval=0.2) as stack:
        port = [{"containerPort": 80, "hostPort": 8080}]
        await run_ours_beside_holders(
            stack,
            {"name": "web", "image": "nginx", "ports": port},
            {"name": "main", "image": "pause", "ports": port},
            what="the web pods observed",
        )
        assert pod(stack, "ours")["spec"]["nodeName"] == "n4"
        assert await excluded_nodes_submitted(stack) == [("n1", "n2", "n3")]
        assert not [r for r in await stack.action_records() if isinstance(r.action, CancelSlurmJob)]


async def test_a_gpu_a_pod_not_ours_holds_keeps_our_pod_off_the_node() -> None:
    """Every node has one GPU (Kubernetes allocatable and Slurm GRES); pods that are not ours
    hold it on n1..n3: our pod asking one GPU goes to n4, the others excluded (fit.go)."""
    async with Stack(nodes=4, poll_interval=0.2) as stack:
        for n in ("n1", "n2", "n3", "n4"):
            stack.slurm.nodes[n].gres = "gpu:1"
            stack.kube.patch_merge(
                "nodes",
                n,
                {
                    "status": {
                        "capacity": {"nvidia.com/gpu": "1"},
                        "allocatable": {"nvidia.com/gpu": "1"},
                    }
                },
                subresource="status",
            )
        gpu = {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
        await run_ours_beside_holders(
            stack,
            {"name": "cuda", "image": "cuda", "resources": gpu},
            {"name": "main", "image": "pause", "resources": gpu},
            what="the GPU pods observed",
        )
        assert pod(stack, "ours")["spec"]["nodeName"] == "n4"
        assert await excluded_nodes_submitted(stack) == [("n1", "n2", "n3")]


async def test_a_deployments_pod_takes_the_deployments_annotations() -> None:
    """Issue 28 item 9 (Slinky slurmjobir owner.go): a pod of a ReplicaSet of a Deployment is
    placed with the Deployment's slurmjob annotations; a pod whose ReplicaSet does not exist
    stays pending with a Warning Event."""
    async with Stack(nodes=4, poll_interval=0.2) as stack:
        deploy = stack.kube.create(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {
                    "name": "web",
                    "namespace": "default",
                    "annotations": {"slurmjob.slinky.slurm.net/partition": "gpu"},
                },
                "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {}},
            }
        )
        rs = stack.kube.create(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": "web-5d8f",
                    "namespace": "default",
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": "web",
                            "uid": deploy["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {}},
            }
        )

        def owned_pod(name: str, rs_name: str, uid: str) -> None:
            stack.kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": "default",
                        "ownerReferences": [
                            {
                                "apiVersion": "apps/v1",
                                "kind": "ReplicaSet",
                                "name": rs_name,
                                "uid": uid,
                                "controller": True,
                            }
                        ],
                    },
                    "spec": {
                        "schedulerName": SCHED,
                        "containers": [{"name": "main", "image": "pause"}],
                    },
                }
            )

        owned_pod("web-5d8f-a", "web-5d8f", rs["metadata"]["uid"])
        owned_pod("lost-1", "lost", "uid-lost")
        await stack.wait_for(
            lambda: phase(stack, "web-5d8f-a") == "Running", timeout=30, what="Running"
        )
        assert pod(stack, "web-5d8f-a")["spec"]["nodeName"] in ("n1", "n2")  # partition gpu
        submits = [
            r.action.spec.partition
            for r in await stack.action_records()
            if isinstance(r.action, SubmitSlurmJob) and r.outcome == "ok"
        ]
        assert submits == ["gpu"]

        def owner_missing() -> bool:
            conds = (pod(stack, "lost-1").get("status") or {}).get("conditions") or []
            return any(c.get("reason") == "SlurmJobOwnerMissing" for c in conds)

        await stack.wait_for(owner_missing, timeout=30, what="the lost pod says why it waits")
        assert phase(stack, "lost-1") == "Pending"
