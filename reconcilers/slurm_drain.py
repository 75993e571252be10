"""``slurm_drain``: a cordoned Kubernetes node drains its Slurm node; uncordon undrains it.

Rules (Slinky slurm-bridge node controller):

* ``spec.unschedulable`` ⇒ the Slurm node is DRAIN with reason
  ``slurm-bridge: Corresponding Kubernetes node (<name>) is unschedulable``. A node already
  DRAIN for any other reason is left as it is (the existing drain already keeps jobs off it,
  and its reason belongs to whoever set it).
* schedulable ⇒ UNDRAIN, but **only** when the current reason is empty or is this cordon
  reason. An administrator's drain, or another of our reconcilers' drains (scale-in,
  external-node removal), is never undone here.
* nothing is sent when the state is already right.

Triggers: KubeNode, SlurmNode. Key: the Kubernetes node name.
"""

from __future__ import annotations

import msgspec

from reconcilers import _nodes
from reconcilers.base import NOTHING, Context, Decision, Store
from schemas import wellknown
from schemas.actions import DrainSlurmNode, UndrainSlurmNode
from schemas.events import KubeNode, SlurmNode

NAME = "slurm_drain"

#: Prefix of the reasons this reconciler writes (and therefore may clear).
CORDON_REASON_PREFIX = wellknown.BRIDGE_REASON_PREFIX + "Corresponding Kubernetes node ("


class View(msgspec.Struct, frozen=True, kw_only=True):
    """The Kubernetes node and its Slurm node (either None when missing)."""

    node: KubeNode | None
    slurm: SlurmNode | None
    cluster: str


def view(store: Store, key: str, ctx: Context) -> View:
    """Read the Kubernetes node and the Slurm node it maps to."""
    node = store.get(KubeNode, key)
    slurm = _nodes.slurm_node_for(node, store, ctx) if node is not None else None
    return View(node=node, slurm=slurm, cluster=ctx.cluster)


def owns_reason(reason: str) -> bool:
    """True when this reconciler may clear a drain with ``reason`` (empty or its own)."""
    return reason == "" or reason.startswith(CORDON_REASON_PREFIX)


def decide(v: View) -> Decision:
    """Drain on cordon, undrain on uncordon (own drains only), nothing when in sync."""
    node, slurm = v.node, v.slurm
    if node is None or slurm is None:
        return Decision(reason="no Kubernetes/Slurm node pair")
    drained = slurm.has("DRAIN")
    if node.unschedulable:
        if drained:
            return NOTHING
        reason = wellknown.cordon_drain_reason(node.key)
        return _nodes.node_decision(
            node,
            DrainSlurmNode(cluster=v.cluster, node=slurm.key, reason=reason),
            "SlurmNodeDrain",
            f"Draining Slurm node {slurm.key}: {reason}",
            "Kubernetes node is unschedulable",
        )
    if not drained:
        return NOTHING
    if not owns_reason(slurm.reason):
        return Decision(reason=f"drain is not ours (reason {slurm.reason!r}); left alone")
    return _nodes.node_decision(
        node,
        UndrainSlurmNode(cluster=v.cluster, node=slurm.key, owned_prefixes=(CORDON_REASON_PREFIX,)),
        "SlurmNodeUndrain",
        f"Undraining Slurm node {slurm.key}: Kubernetes node is schedulable again",
        "Kubernetes node is schedulable again",
    )


SPEC = _nodes.node_spec(
    NAME,
    reads=_nodes.slurm_node_drain,
    view=view,
    decide=decide,
    description="Kubernetes cordon ⇄ Slurm DRAIN with Slinky's reason text",
)
