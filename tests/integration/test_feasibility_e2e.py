"""Kubernetes' own filters before submit and before bind, end to end in the simulators (with
their kubelets, which refuse what the real kubelet refuses): a node selector, an untolerated
taint and a node too full by its allocatable each keep a pod off a node Slurm would
otherwise be free to pick (issue 20, item 1)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas import wellknown
from schemas.actions import BindPod, SubmitSlurmJob
from schemas.events import KubeNode, KubeNodeUsage
from slurmbridge.devtools.testing import Stack
from tests import _helpers
from tests._helpers import phase

SCHED = wellknown.DEFAULT_SCHEDULER_NAME


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=4, poll_interval=0.2) as s:
        yield s


def create_pod(
    stack: Stack,
    name: str,
    *,
    cpu: str = "1",
    scheduler: str | None = SCHED,
    node: str | None = None,
    **spec: Any,
) -> None:
    """A one-container pod requesting ``cpu`` (placed by us unless ``node`` binds it)."""
    body: dict[str, Any] = {
        "containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
        **spec,
    }
    if scheduler:
        body["schedulerName"] = scheduler
    if node:
        body["nodeName"] = node
    stack.kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": body,
        }
    )


def observed(stack: Stack, node: str) -> KubeNode | None:
    """The node as the log holds it."""
    assert stack.app is not None
    return stack.app.projection.get(KubeNode, node, "k8s")


def pod(stack: Stack, name: str) -> dict[str, Any]:
    """Pod ``default/<name>``, ``{}`` once gone."""
    return _helpers.pod(stack, name) or {}


def node_of(stack: Stack, name: str) -> str:
    return str((pod(stack, name).get("spec") or {}).get("nodeName") or "")


async def submitted_exclusions(stack: Stack) -> list[tuple[str, ...]]:
    return [
        r.action.spec.excluded_nodes
        for r in await stack.action_records()
        if isinstance(r.action, SubmitSlurmJob) and r.outcome == "ok"
    ]


async def test_a_node_selector_matching_only_n3_runs_the_pod_on_n3(stack: Stack) -> None:
    stack.kube.patch("nodes", "n3", {"metadata": {"labels": {"disk": "ssd"}}})
    await stack.wait_for(
        lambda: (n := observed(stack, "n3")) is not None and n.labels.get("disk") == "ssd",
        what="n3's label observed",
    )
    create_pod(stack, "ssd", nodeSelector={"disk": "ssd"})
    await stack.wait_for(lambda: phase(stack, "ssd") == "Running", timeout=20, what="Running")
    assert node_of(stack, "ssd") == "n3"
    assert await submitted_exclusions(stack) == [("n1", "n2", "n4")]
    assert stack.kube.kubelet is not None and stack.kube.kubelet.rejected == []


async def test_a_pod_tolerating_nothing_is_never_bound_to_a_tainted_node(stack: Stack) -> None:
    taint = {"key": "dedicated", "value": "other", "effect": "NoSchedule"}
    for n in ("n1", "n2", "n3"):
        node = stack.kube.get("nodes", n)
        taints = [*(node["spec"].get("taints") or []), taint]
        stack.kube.patch("nodes", n, {"spec": {"taints": taints}})
    await stack.wait_for(
        lambda: all(("dedicated", "other", "NoSchedule") in stack.taints(n) for n in ("n1", "n2")),
        what="the taints set",
    )
    await stack.wait_for(
        lambda: all(
            any(
                t.key == "dedicated"
                for t in (observed(stack, n) or KubeNode(source="", key="")).taints
            )
            for n in ("n1", "n2", "n3")
        ),
        what="the taints observed",
    )
    create_pod(stack, "plain")
    await stack.wait_for(lambda: phase(stack, "plain") == "Running", timeout=20, what="Running")
    assert node_of(stack, "plain") == "n4"
    assert await submitted_exclusions(stack) == [("n1", "n2", "n3")]
    binds = [
        r.action.node
        for r in await stack.action_records()
        if isinstance(r.action, BindPod) and r.outcome == "ok"
    ]
    assert binds == ["n4"]


async def test_a_pod_too_big_for_a_nodes_free_allocatable_is_not_bound_there(
    stack: Stack,
) -> None:
    # Someone else's pods (bound directly, as a DaemonSet's are) use 1.5 of the 2 CPUs of
    # n1..n3; Slurm does not know them, so only the bridge can keep our pod off those nodes.
    everything = [{"operator": "Exists"}]
    for n in ("n1", "n2", "n3"):
        create_pod(
            stack, f"filler-{n}", cpu="1500m", scheduler=None, node=n, tolerations=everything
        )
    await stack.wait_for(
        lambda: all(phase(stack, f"filler-{n}") == "Running" for n in ("n1", "n2", "n3")),
        what="the fillers Running",
    )

    def used(node: str) -> int:
        assert stack.app is not None
        usage = stack.app.projection.get(KubeNodeUsage, node, "k8s")
        return usage.cpu_millis if usage is not None else 0

    await stack.wait_for(
        lambda: all(used(n) == 1500 for n in ("n1", "n2", "n3")), what="usage observed"
    )
    create_pod(stack, "big", cpu="1")
    await stack.wait_for(lambda: phase(stack, "big") == "Running", timeout=20, what="Running")
    assert node_of(stack, "big") == "n4"
    assert await submitted_exclusions(stack) == [("n1", "n2", "n3")]
    await stack.wait_for(lambda: used("n4") == 1000, what="n4's usage counts the big pod")
    # The fillers leave: the usage of their nodes goes back to nothing (a tombstone).
    for n in ("n1", "n2", "n3"):
        stack.kube.delete("pods", f"filler-{n}", "default")
    await stack.wait_for(
        lambda: all(used(n) == 0 for n in ("n1", "n2", "n3")), what="usage released"
    )
