"""No destructive decision on half a world (runtime.gate), on the simulators.

A first start over nodes that Slinky's slurm-bridge (or an earlier slurmbridge with a lost
log) left tainted: the Kubernetes listing reaches the log before any Slurm listing, and with a
token slurmrestd rejects no Slurm listing ever does. ``node_taint`` then sees Kubernetes nodes
without Slurm nodes and wants every managed-node taint removed; the runtime's gate must hold
that until both sides are listed, and let it go once they are.
"""

from __future__ import annotations

from schemas import wellknown
from schemas.actions import UntaintNode
from schemas.events import KubeListed, SlurmPing
from slurmbridge.devtools.testing import Stack

OURS = {
    "key": wellknown.TAINT_MANAGED_NODE,
    "value": wellknown.DEFAULT_SCHEDULER_NAME,
    "effect": wellknown.TAINT_MANAGED_NODE_EFFECT,
}


def _pretaint(stack: Stack) -> None:
    """The world before the first start: every node tainted, one of them with no Slurm node
    (its taint is really stale), and a token slurmrestd rejects."""
    stack.kube.add_node("k8s-only", cpu="2", memory="1000Mi")
    for name in ("n1", "n2", "n3", "k8s-only"):
        stack.kube.patch_merge("nodes", name, {"spec": {"taints": [OURS]}})
    stack.sims.token_file.write_text("not-a-token\n")


async def test_a_rejected_token_leaves_every_taint_in_place_until_slurm_is_listed() -> None:
    async with Stack(nodes=3, poll_interval=0.1, setup=_pretaint) as stack:
        assert stack.app is not None
        proj = stack.app.projection
        await stack.wait_for(
            lambda: (
                proj.get(KubeListed, "nodes", "k8s") is not None
                and (ping := proj.get(SlurmPing, "default", "slurm:default")) is not None
                and bool(ping.error)
            ),
            what="the nodes listed and a failed Slurm poll in the log",
        )
        await stack.settled()
        records = await stack.action_records(intents=True)
        assert not [r for r in records if isinstance(r.action, UntaintNode)]
        for name in ("n1", "n2", "n3", "k8s-only"):
            assert (OURS["key"], OURS["value"], OURS["effect"]) in stack.taints(name), name
        worker = stack.app.workers["node_taint"]
        assert set(worker._parked) == {"n1", "n2", "n3", "k8s-only"}

        # The token is fixed: the first good poll opens the gate, and the one stale taint
        # goes (the held decision is taken again, on the whole world).
        stack.slurm.write_token(stack.sims.token_file)
        await stack.wait_for(
            lambda: (OURS["key"], OURS["value"], OURS["effect"]) not in stack.taints("k8s-only"),
            timeout=20,
            what="the stale taint removed once Slurm is listed",
        )
        await stack.settled()
        for name in ("n1", "n2", "n3"):
            assert (OURS["key"], OURS["value"], OURS["effect"]) in stack.taints(name), name
        untaints = [
            r.action.node
            for r in await stack.action_records()
            if isinstance(r.action, UntaintNode) and r.outcome == "ok"
        ]
        assert untaints == ["k8s-only"]
        assert not worker._parked
