"""The real Slurm poller and the node reconcilers against Slurm 22.05 (REST API v0.0.38).

Kubernetes is the simulator (no kube-apiserver here); Slurm is real. The cluster is shared
by the session, so every test restores the nodes it touched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from schemas import wellknown
from schemas.actions import DrainSlurmNode, UndrainSlurmNode
from schemas.events import SlurmNode, SlurmPartition, SlurmPing
from slurmbridge.devtools.realslurm import RealSlurm
from slurmbridge.devtools.testing import Stack

MANAGED = (wellknown.TAINT_MANAGED_NODE, wellknown.DEFAULT_SCHEDULER_NAME, "NoExecute")


@pytest.fixture
async def stack(real_slurm: RealSlurm) -> AsyncIterator[Stack]:
    async with Stack(nodes=4, real_slurm=real_slurm, poll_interval=0.2) as s:
        yield s


def _node(stack: Stack, name: str) -> SlurmNode | None:
    assert stack.app is not None
    return stack.app.projection.get(SlurmNode, name)


async def test_nodes_partitions_and_ping_are_observed(stack: Stack) -> None:
    assert stack.app is not None
    assert stack.app.slurm_client is not None
    assert stack.app.slurm_client.api_version == "v0.0.38"
    proj = stack.app.projection
    await stack.wait_for(lambda: len(list(proj.values(SlurmNode))) == 4, what="4 Slurm nodes")
    for name in ("n1", "n2", "n3", "n4"):
        n = _node(stack, name)
        assert n is not None
        assert n.base_state == "IDLE", n.state
        assert (n.cpus, n.real_memory) == (2, 1000)
        assert "batch" in n.partitions
    parts = {p.key: p for p in proj.values(SlurmPartition)}
    assert parts["batch"].nodes == ("n1", "n2", "n3", "n4")
    assert parts["gpu"].nodes == ("n1", "n2")
    assert parts["batch"].is_default
    # A poll publishes its listings before its ping: the nodes can be in before it.
    await stack.wait_for(
        lambda: proj.get(SlurmPing, "default") is not None, what="the ping of cluster default"
    )
    ping = proj.get(SlurmPing, "default")
    assert ping is not None
    assert ping.responding
    # Every Kubernetes node has a real Slurm node: all are tainted.
    for name in ("n1", "n2", "n3", "n4"):
        await stack.wait_for(lambda n=name: MANAGED in stack.taints(n), what=f"{name} tainted")


async def test_admin_drain_is_observed_and_never_undone(
    stack: Stack, real_slurm: RealSlurm
) -> None:
    real_slurm.admin_drain("n3", "admin: replace fan")
    try:
        await stack.wait_for(
            lambda: (n := _node(stack, "n3")) is not None and n.has("DRAIN"),
            what="n3 DRAIN observed",
        )
        n3 = _node(stack, "n3")
        assert n3 is not None
        assert n3.reason == "admin: replace fan"
        assert n3.reason_set_by_user == "root"
        stack.cordon("n3")
        await stack.settled()
        stack.uncordon("n3")
        await stack.settled()
        assert stack.app is not None
        poller = stack.app.poller
        assert poller is not None
        polls = poller.polls
        await stack.wait_for(lambda: poller.polls >= polls + 3, what="three more polls")
        await stack.settled()
        assert "n3" in real_slurm.node_states() and "drain" in real_slurm.node_states()["n3"]
        recs = [r for r in await stack.action_records() if r.key == "n3"]
        assert not any(isinstance(r.action, UndrainSlurmNode) for r in recs)
    finally:
        real_slurm.undrain("n3")
        # Resumed nodes show NOT_RESPONDING for up to a second; leave n3 idle for the next test.
        await stack.wait_for(lambda: real_slurm.node_states()["n3"] == "idle", what="n3 idle")


async def test_v0038_drain_is_unsupported_recorded_once(
    stack: Stack, real_slurm: RealSlurm
) -> None:
    stack.cordon("n4")
    try:
        await stack.settled()
        for i in range(4):
            stack.kube.patch_merge("nodes", "n4", {"metadata": {"labels": {"try": str(i)}}})
            await stack.settled()
        drains = [r for r in await stack.action_records() if isinstance(r.action, DrainSlurmNode)]
        assert [(r.key, r.outcome) for r in drains] == [("n4", "unsupported")]
        assert "v0.0.38" in drains[0].error
        assert "drain" not in real_slurm.node_states()["n4"]
        assert await stack.dead_letters() == []
    finally:
        stack.uncordon("n4")
        await stack.wait_for(lambda: real_slurm.node_states()["n4"] == "idle", what="n4 idle")
