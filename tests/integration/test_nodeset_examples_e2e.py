"""The NodeSet examples of ``deploy/examples/`` run as written in the simulators (issue 29
item 2): each file is applied unchanged, its slurmd pods reach Running on the nodes it asks
for, their Slurm nodes register, what else the example asks for is there, and no Warning
Event lands on the NodeSet.

The Kubernetes nodes get what each example selects on (labels, GPUs) as a site's nodes would
have them; nodes n1..n4 are Slurm nodes too, so slurmbridge taints them
``slinky.slurm.net/managed-node:NoExecute`` before the NodeSet is applied — the slurmd pods
must tolerate the bridge's own taint without the example saying so. ``controllerRef: slurm``
is the static cluster here, as with the chart's default ``config.slurm.cluster: slurm``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from schemas import wellknown
from schemas.actions import BindPod, MarkPods, SubmitSlurmJob
from slurmbridge import webhook
from slurmbridge.devtools.testing import Stack
from tests._helpers import pod_review

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"
NS = "slurm"
MANAGED = ("n1", "n2", "n3", "n4")


def example(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return obj


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    # v0.0.45: a NodeSet's spec.partition is made over REST from Slurm 26.05 on.
    settings = {"slurm": {"cluster": "slurm"}}
    async with Stack(nodes=4, poll_interval=0.2, api_version="v0.0.45", settings=settings) as s:
        s.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        await s.wait_for(
            lambda: all(
                any(key == wellknown.TAINT_MANAGED_NODE for key, _, _ in s.taints(n))
                for n in MANAGED
            ),
            timeout=20,
            what="n1..n4 tainted as managed by slurmbridge",
        )
        yield s


def pods(stack: Stack, nodeset: str) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["name"]: p
        for p in stack.kube.list("pods", NS)
        if p["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == nodeset
        and not p["metadata"].get("deletionTimestamp")
    }


def running(stack: Stack, nodeset: str) -> dict[str, dict[str, Any]]:
    return {
        n: p
        for n, p in pods(stack, nodeset).items()
        if (p.get("status") or {}).get("phase") == "Running"
    }


def warnings(stack: Stack, nodeset: str) -> list[str]:
    return [
        f"{e.get('reason')}: {e.get('message')}"
        for e in stack.kube.list("events", NS)
        if e.get("type") == "Warning"
        and (e.get("involvedObject") or {}).get("kind") == "NodeSet"
        and (e.get("involvedObject") or {}).get("name") == nodeset
    ]


async def wait_running(
    stack: Stack, nodeset: str, want: set[str], *, by_node: bool = False
) -> None:
    """Wait until exactly ``want`` (pod names, or with ``by_node`` their nodes) run; on time-out
    say what the NodeSet's Warning Events and the pods' statuses showed."""

    def now() -> set[str]:
        if by_node:
            return {p["spec"]["nodeName"] for p in running(stack, nodeset).values()}
        return set(running(stack, nodeset))

    try:
        await stack.wait_for(lambda: now() == want, timeout=30, what=f"{sorted(want)} Running")
    except TimeoutError as exc:
        seen = {
            n: {k: (p.get("status") or {}).get(k) for k in ("phase", "reason", "message")}
            for n, p in pods(stack, nodeset).items()
        }
        raise AssertionError(f"{exc}; pods: {seen}; warnings: {warnings(stack, nodeset)}") from exc


def status(stack: Stack, nodeset: str) -> dict[str, Any]:
    return dict(stack.kube.get("nodesets", nodeset, NS).get("status") or {})


def label(stack: Stack, node: str, labels: dict[str, str]) -> None:
    """``kubectl label node``."""
    stack.kube.patch("nodes", node, {"metadata": {"labels": labels}})


async def test_the_statefulset_example_runs_one_gpu_worker_per_gpu_node(stack: Stack) -> None:
    """nodeset-statefulset.yaml: four pinned slurmd pods on the nodes labelled as GPU nodes
    (NVIDIA GPU feature discovery's label; the device plugin's ``nvidia.com/gpu``), each a
    registered Slurm node, the template's labels on the pods, the pins in the status."""
    for node in MANAGED:
        label(stack, node, {"nvidia.com/gpu.present": "true"})
        stack.kube.patch(
            "nodes",
            node,
            {
                "status": {
                    "capacity": {"nvidia.com/gpu": "1"},
                    "allocatable": {"nvidia.com/gpu": "1"},
                }
            },
            subresource="status",
        )
    stack.kube.create(example("nodeset-statefulset.yaml"))
    want = {f"gpu-workers-{i}" for i in range(4)}
    await wait_running(stack, "gpu-workers", want)
    await stack.wait_for(lambda: want <= set(stack.slurm.nodes), what="Slurm nodes registered")
    await stack.wait_for(
        lambda: (
            status(stack, "gpu-workers").get("slurmIdle") == 4
            and len(status(stack, "gpu-workers").get("ordinalToNode") or {}) == 4
        ),
        timeout=20,
        what="status: 4 idle Slurm nodes, 4 pins",
    )
    for p in pods(stack, "gpu-workers").values():
        assert p["metadata"]["labels"]["team"] == "vision"
        assert p["spec"]["nodeName"] in MANAGED
    assert warnings(stack, "gpu-workers") == []


async def test_the_partition_example_makes_its_partition_and_claims(stack: Stack) -> None:
    """nodeset-partition.yaml: radar-000 and radar-001 run with their scratch claims, register
    with feature radar, and partition radar holds them (made over REST: no slurm.conf
    partition per NodeSet here). The simulator binds no volumes: the claims' provisioning is
    the site's StorageClass's business (said in the example)."""
    stack.sims.slurmd.nodeset_partitions = False
    stack.kube.create(example("nodeset-partition.yaml"))
    want = {"radar-000", "radar-001"}
    await wait_running(stack, "radar", want)
    await stack.wait_for(lambda: want <= set(stack.slurm.nodes), what="Slurm nodes registered")
    await stack.wait_for(
        lambda: (
            "radar" in stack.slurm.partitions and set(stack.slurm.partitions["radar"].nodes) == want
        ),
        timeout=20,
        what="partition radar on both slurmd nodes",
    )
    assert all("radar" in stack.slurm.node(n).features for n in want)
    claims = {c["metadata"]["name"] for c in stack.kube.list("persistentvolumeclaims", NS)}
    assert {"scratch-radar-000", "scratch-radar-001"} <= claims
    for p in pods(stack, "radar").values():
        volumes = {v["name"]: v for v in p["spec"]["volumes"]}
        claim = volumes["scratch"]["persistentVolumeClaim"]["claimName"]
        assert claim == f"scratch-{p['metadata']['name']}"
    await stack.settled()
    assert warnings(stack, "radar") == []


async def test_the_daemonset_example_runs_on_labelled_nodes_and_stays(stack: Stack) -> None:
    """nodeset-daemonset.yaml: a slurmd pod on each labelled node, named after it; its
    registration makes the node a Slurm node, which slurmbridge then taints as managed —
    and the pod stays (tolerated: no drain, no delete, no new pod)."""
    for node in ("w1", "w2"):
        stack.kube.add_node(
            node, cpu="2", memory="1000Mi", labels={"slurm.example.org/worker": "true"}
        )
    stack.kube.add_node("w3", cpu="2", memory="1000Mi")  # not labelled: no pod
    stack.kube.create(example("nodeset-daemonset.yaml"))

    def by_node() -> dict[str, str]:
        return {
            p["spec"]["nodeName"]: p["metadata"]["uid"]
            for p in running(stack, "cpu-daemon").values()
        }

    await wait_running(stack, "cpu-daemon", {"w1", "w2"}, by_node=True)
    await stack.wait_for(lambda: {"w1", "w2"} <= set(stack.slurm.nodes), what="w1, w2 in Slurm")
    await stack.wait_for(
        lambda: all(
            any(key == wellknown.TAINT_MANAGED_NODE for key, _, _ in stack.taints(n))
            for n in ("w1", "w2")
        ),
        timeout=20,
        what="w1, w2 tainted as managed",
    )
    first = by_node()
    await stack.wait_for(
        lambda: status(stack, "cpu-daemon").get("slurmIdle") == 2, what="status: 2 idle"
    )
    await stack.settled()
    assert by_node() == first, "a slurmd pod was replaced after its node was tainted"
    assert not any(stack.slurm_node(n).has("DRAIN") for n in ("w1", "w2"))
    assert "w3" not in stack.slurm.nodes
    assert warnings(stack, "cpu-daemon") == []


def test_every_example_is_covered() -> None:
    """A new example gets a test here."""
    assert {p.name for p in EXAMPLES.glob("*.yaml")} == {
        "nodeset-statefulset.yaml",
        "nodeset-partition.yaml",
        "nodeset-daemonset.yaml",
    }


async def test_slurmd_pods_in_a_managed_namespace_are_never_rewritten_nor_placed() -> None:
    """A NodeSet in a namespace slurmbridge serves (``managedNamespaces``: its pods would be
    given our scheduler): the slurmd pods the NodeSet effector creates are left unchanged by
    the admission webhook's mutation (webhook.py ``slurmd_pod``), keep Kubernetes' default
    scheduler, run and register — and no Slurm job is ever submitted, marked or bound for
    them (reconcilers/placement/ leaves slurmd pods alone)."""
    settings = {"slurm": {"cluster": "slurm"}, "managedNamespaces": [NS]}
    async with Stack(nodes=4, poll_interval=0.2, api_version="v0.0.45", settings=settings) as s:
        s.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        s.sims.slurmd.nodeset_partitions = False
        s.kube.create(example("nodeset-partition.yaml"))
        want = {"radar-000", "radar-001"}
        await wait_running(s, "radar", want)
        await s.wait_for(lambda: want <= set(s.slurm.nodes), what="Slurm nodes registered")
        await s.settled()
        policy = webhook.Policy(managed_namespaces=frozenset({NS}))
        for p in pods(s, "radar").values():
            assert p["spec"]["schedulerName"] == "default-scheduler"
            assert wellknown.LABEL_SLURM_JOBID not in p["metadata"]["labels"]
            assert wellknown.FINALIZER_SCHEDULER not in (p["metadata"].get("finalizers") or [])
            assert webhook.mutate(_create(p), policy, {}) == []
            assert webhook.validate(_create(p), policy) is None
            # Not vacuous: the same pod, were it not a NodeSet's, would get our scheduler.
            plain = copy.deepcopy(p)
            plain["metadata"].pop("ownerReferences")
            plain["metadata"]["labels"].pop("app.kubernetes.io/name")
            assert webhook.mutate(_create(plain), policy, {}) != []
        placed = [
            r
            for r in await s.action_records(intents=True)
            if isinstance(r.action, SubmitSlurmJob | MarkPods | BindPod)
        ]
        assert placed == []
        assert not s.slurm.jobs


def _create(pod: dict[str, Any]) -> webhook.Request:
    """The AdmissionReview a pod's CREATE sends to the webhook."""
    body = pod_review("1", "CREATE", pod["metadata"]["namespace"], pod)
    return webhook.decode_review(json.dumps(body).encode())
