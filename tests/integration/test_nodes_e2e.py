"""Node reconcilers end to end: real nats-server, both simulators over HTTP, the whole app."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator

import pytest

from schemas import wellknown
from schemas.actions import DrainSlurmNode, TaintNode, UndrainSlurmNode, UntaintNode
from slurmbridge.devtools.testing import Stack

MANAGED = (wellknown.TAINT_MANAGED_NODE, wellknown.DEFAULT_SCHEDULER_NAME, "NoExecute")


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=4, poll_interval=0.1) as s:
        yield s


async def test_managed_nodes_are_tainted(stack: Stack) -> None:
    # App.start pauses the garbage collector for the projection's rebuild only.
    assert gc.isenabled()
    for n in ("n1", "n2", "n3", "n4"):
        await stack.wait_for(lambda n=n: MANAGED in stack.taints(n), what=f"{n} tainted")
    # A Kubernetes node with no Slurm node is left untainted.
    stack.kube.add_node("k8s-only", cpu="2", memory="1000Mi")
    await stack.settled()
    assert stack.taints("k8s-only") == []


async def test_node_events_land_in_default_whatever_namespace_slurmbridge_runs_in() -> None:
    # A Helm release runs in its own namespace (kube.namespace); an Event about a Node there
    # is refused by the API server (422, kubernetes pkg/apis/core/validation/events.go), so
    # it goes to "default", where client-go's recorder puts it.
    def release_namespace(s: Stack) -> None:
        s.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "slurm"}})

    def managed_events(namespace: str) -> list[str]:
        return [
            e["involvedObject"]["name"]
            for e in stack.kube.list("events", namespace)
            if e["reason"] == "ManagedBySlurm"
        ]

    async with Stack(
        nodes=2,
        poll_interval=0.1,
        components=["kube-watcher", "slurm-poller", "node_taint"],
        settings={"kube": {"namespace": "slurm"}},
        setup=release_namespace,
    ) as stack:
        await stack.wait_for(
            lambda: sorted(managed_events("default")) == ["n1", "n2"],
            what="a ManagedBySlurm Event on n1 and n2 in default",
        )
        await stack.settled()
        assert managed_events("slurm") == []


async def test_start_freezes_what_outlives_it() -> None:
    # App.start moves the rebuilt projection and the imports out of the collector's scans.
    gc.unfreeze()
    async with Stack(nodes=2, poll_interval=0.1):
        assert gc.get_freeze_count() > 1000


async def test_cordon_drains_and_uncordon_undrains(stack: Stack) -> None:
    stack.cordon("n1")
    await stack.wait_for(lambda: stack.slurm_node("n1").has("DRAIN"), what="n1 DRAIN")
    node = stack.slurm_node("n1")
    assert node.reason == "slurm-bridge: Corresponding Kubernetes node (n1) is unschedulable"
    stack.uncordon("n1")
    await stack.wait_for(lambda: not stack.slurm_node("n1").has("DRAIN"), what="n1 undrained")
    await stack.settled()
    recs = await stack.action_records()
    kinds = [
        (type(r.action).__name__, r.key, r.outcome) for r in recs if r.reconciler == "slurm_drain"
    ]
    assert ("DrainSlurmNode", "n1", "ok") in kinds
    assert ("UndrainSlurmNode", "n1", "ok") in kinds
    assert sum(1 for k in kinds if k[0] == "DrainSlurmNode" and k[2] == "ok") == 1


async def test_administrators_drain_is_never_undone(stack: Stack) -> None:
    stack.admin_drain("n2", "bad DIMM, ticket 4711")
    stack.cordon("n2")
    await stack.settled()
    stack.uncordon("n2")
    await stack.settled()
    await stack.wait_for(
        lambda: (
            stack.app is not None and stack.app.poller is not None and stack.app.poller.polls > 3
        ),
        what="a few polls",
    )
    await stack.settled()
    node = stack.slurm_node("n2")
    assert node.has("DRAIN")
    assert node.reason == "bad DIMM, ticket 4711"
    recs = [r for r in await stack.action_records() if r.key == "n2"]
    assert not any(isinstance(r.action, UndrainSlurmNode) and r.outcome == "ok" for r in recs)
    assert not any(isinstance(r.action, DrainSlurmNode) and r.outcome == "ok" for r in recs)


async def test_node_leaving_slurm_is_untainted(stack: Stack) -> None:
    await stack.wait_for(lambda: MANAGED in stack.taints("n4"), what="n4 tainted")
    stack.slurm.remove_node("n4")
    await stack.wait_for(lambda: MANAGED not in stack.taints("n4"), what="n4 untainted")
    await stack.settled()  # the record is published right after the effect
    recs = await stack.action_records()
    assert any(
        isinstance(r.action, UntaintNode) and r.key == "n4" and r.outcome == "ok" for r in recs
    )


async def test_worker_restart_resumes_and_converges(stack: Stack) -> None:
    await stack.settled()
    await stack.stop_app()
    # While slurmbridge is down: a cordon and a node joining both sides.
    stack.cordon("n3")
    stack.slurm.add_node("n5", cpus=2, real_memory=1000, partitions=("batch",))
    stack.kube.add_node("n5", cpu="2", memory="1000Mi")
    await stack.start_app()
    await stack.wait_for(
        lambda: stack.slurm_node("n3").has("DRAIN"), what="n3 drained after restart"
    )
    await stack.wait_for(lambda: MANAGED in stack.taints("n5"), what="n5 tainted after restart")
    await stack.settled()
    recs = await stack.action_records()
    taints = [r for r in recs if isinstance(r.action, TaintNode) and r.outcome == "ok"]
    # One taint per node over the whole run: the restart repeated nothing.
    assert sorted(r.key for r in taints) == ["n1", "n2", "n3", "n4", "n5"]


async def test_v0038_drain_is_unsupported_and_recorded_once() -> None:
    async with Stack(nodes=2, api_version="v0.0.38", poll_interval=0.1) as stack:
        stack.cordon("n1")
        await stack.settled()
        # More triggers for the same node: labels change, the rule still wants a drain.
        for i in range(5):
            stack.kube.patch_merge("nodes", "n1", {"metadata": {"labels": {"try": str(i)}}})
            await stack.settled()
        recs = [r for r in await stack.action_records() if isinstance(r.action, DrainSlurmNode)]
        assert [r.outcome for r in recs] == ["unsupported"]
        assert "v0.0.38" in recs[0].error
        assert not stack.slurm_node("n1").has("DRAIN")
        assert await stack.dead_letters() == []
