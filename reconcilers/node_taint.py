"""``node_taint``: taint Kubernetes nodes that Slurm manages, untaint the others.

Rule (Slinky slurm-bridge node controller): a Kubernetes node is *managed* when a Slurm node of
the bridge's cluster has the name in its label ``slinky.slurm.net/slurm-nodename``, or else its
own name. A managed node carries ``slinky.slurm.net/managed-node=<schedulerName>:NoExecute`` so
that only pods tolerating it (the bridge's own) run there; an unmanaged node carries no such
taint. Nothing is written when the taint is already as wanted.

Triggers: KubeNode, SlurmNode. Key: the Kubernetes node name.
"""

from __future__ import annotations

import msgspec

from reconcilers import _nodes
from reconcilers.base import NOTHING, Context, Decision, Store
from schemas import wellknown
from schemas.actions import TaintNode, UntaintNode
from schemas.events import KubeNode, Taint

NAME = "node_taint"


class View(msgspec.Struct, frozen=True, kw_only=True):
    """The Kubernetes node (None when gone), whether Slurm manages it, and the taint value."""

    node: KubeNode | None
    managed: bool
    scheduler_name: str


def view(store: Store, key: str, ctx: Context) -> View:
    """Read the node and whether its Slurm counterpart exists."""
    node = store.get(KubeNode, key)
    managed = node is not None and _nodes.slurm_node_for(node, store, ctx) is not None
    return View(node=node, managed=managed, scheduler_name=ctx.scheduler_name)


def _ours(t: Taint) -> bool:
    return t.key == wellknown.TAINT_MANAGED_NODE and t.effect == wellknown.TAINT_MANAGED_NODE_EFFECT


def decide(v: View) -> Decision:
    """Taint a managed node, untaint an unmanaged one, do nothing when already right."""
    node = v.node
    if node is None:
        return Decision(reason="Kubernetes node is gone")
    current = [t for t in node.taints if _ours(t)]
    if v.managed:
        if len(current) == 1 and current[0].value == v.scheduler_name:
            return NOTHING
        return _nodes.node_decision(
            node,
            TaintNode(
                node=node.key,
                key=wellknown.TAINT_MANAGED_NODE,
                value=v.scheduler_name,
                effect=wellknown.TAINT_MANAGED_NODE_EFFECT,
            ),
            "ManagedBySlurm",
            f"Tainted {wellknown.TAINT_MANAGED_NODE}={v.scheduler_name}:"
            f"{wellknown.TAINT_MANAGED_NODE_EFFECT}: a Slurm node "
            f"({_nodes.slurm_name_of(node)}) corresponds to this node",
            "Slurm manages this node",
        )
    if not current:
        return NOTHING
    return _nodes.node_decision(
        node,
        UntaintNode(
            node=node.key,
            key=wellknown.TAINT_MANAGED_NODE,
            effect=wellknown.TAINT_MANAGED_NODE_EFFECT,
        ),
        "NotManagedBySlurm",
        f"Removed taint {wellknown.TAINT_MANAGED_NODE}: no Slurm node "
        f"({_nodes.slurm_name_of(node)}) corresponds to this node",
        "Slurm does not manage this node",
    )


SPEC = _nodes.node_spec(
    NAME,
    reads=_nodes.slurm_node_exists,
    view=view,
    decide=decide,
    description="managed-node taint on Kubernetes nodes that have a Slurm node",
)
