"""Mapping between Kubernetes node names and Slurm node names (Slinky slurm-bridge).

A Kubernetes node corresponds to the Slurm node named by its label
``slinky.slurm.net/slurm-nodename`` when present, else to the Slurm node of the same name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from reconcilers.base import Context, Decision, KeysOf, ReconcilerSpec, Store
from schemas import wellknown
from schemas.actions import AnyAction, RecordEvent
from schemas.events import Event, KubeNode, SlurmNode, SlurmPing
from schemas.subjects import slurm_source


def slurm_name_of(node: KubeNode) -> str:
    """The Slurm node name a Kubernetes node maps to."""
    return node.labels.get(wellknown.LABEL_SLURM_NODENAME) or node.key


def kube_keys_for_slurm(slurm_name: str, store: Store) -> list[str]:
    """Kubernetes node names that map to Slurm node ``slurm_name``.

    The node of the same name counts only when it does not point elsewhere by label.
    """
    keys = [n.key for n in store.by_label(KubeNode, wellknown.LABEL_SLURM_NODENAME, slurm_name)]
    same = store.get(KubeNode, slurm_name)
    if same is not None and slurm_name_of(same) == slurm_name and same.key not in keys:
        keys.append(same.key)
    return keys


def _node_itself(event: KubeNode, _store: Store, _ctx: Context) -> list[str]:
    return [event.key]


def _nodes_of_slurm_node(event: SlurmNode, store: Store, ctx: Context) -> list[str]:
    if event.cluster and event.cluster != ctx.cluster:
        return []
    # A tombstone no longer names labels, so the index (already updated) and the same-name
    # rule are all we have; both still reach the Kubernetes node.
    return kube_keys_for_slurm(event.key, store)


#: Keys (Kubernetes node names) concerned by a KubeNode or SlurmNode observation: the
#: triggers of the node reconcilers (``ReconcilerSpec.keys``).
NODE_KEYS: Final[dict[type[Event], KeysOf]] = {
    KubeNode: _node_itself,
    SlurmNode: _nodes_of_slurm_node,
}


#: Base states between which a Slurm node changes as jobs come and go.
_RUNNING_STATES = frozenset({"IDLE", "ALLOCATED", "MIXED", "COMPLETING"})


def slurm_node_exists(event: SlurmNode) -> object:
    """What a reconciler that only asks whether a Slurm node exists reads of one
    (``ReconcilerSpec.reads``): its cluster, and whether it is a tombstone."""
    return (event.op, event.cluster)


def slurm_node_drain(event: SlurmNode) -> object:
    """What ``slurm_drain`` reads of a Slurm node: existence, the DRAIN flag, the reason."""
    return (event.op, event.cluster, event.has("DRAIN"), event.reason)


def slurm_node_config(event: SlurmNode) -> object:
    """A Slurm node without what changes as jobs start and end on it — ``alloc_cpus`` and
    the running base state (IDLE/ALLOCATED/MIXED/COMPLETING), except through
    :attr:`~schemas.events.SlurmNode.drained` — and without the envelope's bookkeeping."""
    base = event.state[:1]
    if base and base[0] in _RUNNING_STATES:
        base = ("",)
    return msgspec.structs.replace(
        event,
        state=(*base, *event.state[1:], *(("drained",) if event.drained else ())),
        alloc_cpus=0,
        observed_at=0,
        version="",
        producer="",
    )


def all_kube_nodes(store: Store, ctx: Context) -> list[str]:
    """Every live Kubernetes node name (the start-up resync of node reconcilers)."""
    del ctx
    return [n.key for n in store.values(KubeNode)]


def slurm_node_for(node: KubeNode, store: Store, ctx: Context) -> SlurmNode | None:
    """The live Slurm node of ``ctx.cluster`` that ``node`` maps to, if any."""
    return store.get(SlurmNode, slurm_name_of(node), slurm_source(ctx.cluster))


#: The first Slurm REST version that updates nodes (``update_node``): before it (Slurm 22.05,
#: v0.0.38) no node can be given ``slurm_bridge_gres_compatible``.
FEATURE_MIN_API: Final = (0, 0, 42)


def gres_feature_required(store: Store, cluster: str) -> bool:
    """Whether ``cluster``'s nodes get, and its jobs require, ``slurm_bridge_gres_compatible``
    (Slinky slurm-bridge 1.3, which speaks REST v0.0.44 only): unless the latest ping's
    ``api_version`` is older than :data:`FEATURE_MIN_API`, where no node can be given it (an
    unknown version: required)."""
    ping = store.get(SlurmPing, cluster, slurm_source(cluster))
    raw = ping.api_version.lstrip("v") if ping is not None else ""
    try:
        version = tuple(int(x) for x in raw.split("."))
    except ValueError:
        return True
    return len(version) != 3 or version >= FEATURE_MIN_API


def node_event(
    node: KubeNode,
    reason: str,
    message: str,
    *,
    warning: bool = False,
    on: tuple[str, ...] = ("ok",),
) -> RecordEvent:
    """A Kubernetes Event on ``node`` (type Normal, or Warning), recorded once the actions
    before it end with an outcome in ``on``."""
    return RecordEvent(
        api_version="v1",
        object_kind="Node",
        name=node.key,
        uid=node.uid,
        type="Warning" if warning else "Normal",
        reason=reason,
        message=message,
        on=on,
    )


def node_decision(
    node: KubeNode, action: AnyAction, event: str, message: str, why: str
) -> Decision:
    """``action``, announced by a Normal Event ``event`` (``message``) on ``node``."""
    return Decision(actions=(action, node_event(node, event, message)), reason=why)


def node_spec(
    name: str,
    *,
    reads: Callable[[SlurmNode], object],
    view: Callable[[Store, str, Context], Any],
    decide: Callable[[Any], Decision],
    description: str,
) -> ReconcilerSpec:
    """A reconciler keyed by Kubernetes node name whose triggers are :data:`NODE_KEYS`,
    resynced over every Kubernetes node, that reads of a Slurm node only what ``reads``
    returns (its jobs starting and ending change nothing)."""
    return ReconcilerSpec(
        name=name,
        keys=NODE_KEYS,
        reads={SlurmNode: reads},
        key_kind="KubeNode",
        all_keys=all_kube_nodes,
        view=view,
        decide=decide,
        description=description,
    )
