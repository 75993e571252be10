"""The NodeSet's status (rules 6, 10 and 21 of :mod:`reconcilers.nodeset`), after slurm-operator
``internal/controller/nodeset/nodeset_sync_status.go`` (``syncStatus``,
``calculateReplicaStatus``, ``updateNodeSetStatus``) and ``nodeset_history.go``
(``truncateHistory``).
"""

from __future__ import annotations

import msgspec

from reconcilers._steps import Stop
from reconcilers.nodeset._common import (
    CONDITION_REPLICA_FAILURE,
    MAX_REPLICAS,
    REASON_REPLICAS_TOO_MANY,
    NodeSetPlan,
    View,
    _event,
    _selector,
)
from schemas import wellknown
from schemas.actions import (
    EnsureNodeSetRevision,
    SetNodeSetStatus,
)
from schemas.events import (
    KubeNodeSet,
    KubePod,
    NodeSetCondition,
    NodeSetStatus,
    SlurmNode,
)


def replicas_message(replicas: int) -> str:
    """Rule 21's condition message, in the API server's words for a field over its
    ``maximum`` (apiextensions-apiserver, kube-openapi ``ExceedsMaximum``)."""
    return (
        f"spec.replicas: Invalid value: {replicas}: spec.replicas in body should be less than "
        f"or equal to {MAX_REPLICAS}; the NodeSet is held at its current pods until it is"
        " fixed"
    )


def replica_conditions(
    ns: KubeNodeSet, bad: bool, now: float
) -> tuple[tuple[NodeSetCondition, ...], bool]:
    """Rule 21: the NodeSet's ``ReplicaFailure`` condition (none when ``bad`` is False), and
    whether it is new or changed (then a Warning Event goes with it). An unchanged
    condition keeps its ``lastTransitionTime``."""
    if not bad:
        return (), False
    message = replicas_message(ns.replicas)
    old = next((c for c in ns.status.conditions if c.type == CONDITION_REPLICA_FAILURE), None)
    if (
        old is not None
        and old.status == "True"
        and old.reason == REASON_REPLICAS_TOO_MANY
        and old.message == message
    ):
        return (old,), False
    cond = NodeSetCondition(
        type=CONDITION_REPLICA_FAILURE,
        status="True",
        reason=REASON_REPLICAS_TOO_MANY,
        message=message,
        last_transition=int(now),
    )
    return (cond,), True


def is_available(p: KubePod, min_ready_s: int, now: float) -> bool:
    """Ready for at least ``min_ready_s`` seconds (Kubernetes podutil ``IsPodAvailable``)."""
    return p.ready and (min_ready_s <= 0 or p.ready_since + min_ready_s <= now)


def revision_of(p: KubePod) -> str:
    """The pod's revision hash (label ``controller.kubernetes.io/hash``; ``""`` none)."""
    return p.labels.get(wellknown.LABEL_REVISION_HASH, "")


def _status(
    ns: KubeNodeSet,
    live: list[KubePod],
    slurm: dict[str, SlurmNode],
    now: float = 0.0,
    *,
    desired: int | None = None,
    pins: dict[str, str] | None = None,
) -> NodeSetStatus:
    nodes = [slurm[p.name] for p in live if p.name in slurm]
    ready = sum(1 for p in live if p.ready)
    available = sum(1 for p in live if is_available(p, ns.min_ready_seconds, now))
    return NodeSetStatus(
        replicas=len(live),
        ready_replicas=ready,
        available_replicas=available,
        slurm_idle=sum(1 for n in nodes if n.base_state == "IDLE" and not n.has("DRAIN")),
        slurm_allocated=sum(1 for n in nodes if n.base_state in ("ALLOCATED", "MIXED")),
        slurm_down=sum(1 for n in nodes if n.base_state == "DOWN"),
        slurm_drain=sum(1 for n in nodes if n.has("DRAIN")),
        observed_generation=ns.generation,
        selector=",".join(f"{k}={v}" for k, v in sorted(_selector(ns).items())),
        # nodeset_sync_status.go calculateReplicaStatus (StatefulSet mode).
        updated_replicas=(
            sum(1 for p in live if revision_of(p) == ns.revision_hash) if ns.revision_hash else 0
        ),
        unavailable_replicas=max(0, len(live) - available),
        desired=max(0, ns.replicas) if desired is None else desired,
        node_set_hash=ns.revision_hash,
        ordinal_to_node=ns.status.ordinal_to_node if pins is None else pins,
    )


def calculate_status(plan: NodeSetPlan, v: View) -> Stop | None:
    """Rules 6, 10 and 21: the status this decision reports, with the ``ReplicaFailure``
    condition (and its Warning Event when new), into ``plan.status`` (slurm-operator
    nodeset_sync_status.go ``calculateReplicaStatus``; the condition is Kubernetes'
    ReplicaSet ``ReplicaFailure``, pkg/controller/replicaset/replica_set_utils.go)."""
    ns = plan.ns
    status = _status(ns, plan.live, v.slurm, v.now, desired=plan.want, pins=plan.pins)
    conditions, changed = replica_conditions(ns, plan.bad_replicas, v.now)
    plan.status = msgspec.structs.replace(status, conditions=conditions)
    if changed:
        plan.add(_event(ns, REASON_REPLICAS_TOO_MANY, replicas_message(ns.replicas), warning=True))
    return None


def _revision_due(ns: KubeNodeSet, status: NodeSetStatus) -> bool:
    """The revision is recorded before the status names it, and the history is pruned when
    the pods' revisions may have changed (rule 10)."""
    old = ns.status
    return bool(ns.revision_hash) and (
        status.node_set_hash != old.node_set_hash
        or status.updated_replicas != old.updated_replicas
        or status.replicas != old.replicas
    )


def _available_due(
    ns: KubeNodeSet, status: NodeSetStatus, live: list[KubePod], now: float
) -> float | None:
    """Seconds until the next ready pod becomes available (None: none waits), at least
    0.1 (nodeset_sync_status.go resyncs after ``minReadySeconds`` for the same reason)."""
    if not (
        ns.min_ready_seconds > 0
        and status.ready_replicas != status.available_replicas
        and status.ready_replicas
    ):
        return None
    due = min(
        p.ready_since + ns.min_ready_seconds - now
        for p in live
        if p.ready and not is_available(p, ns.min_ready_seconds, now)
    )
    return max(0.1, due)


def sync_status(plan: NodeSetPlan, v: View) -> Stop | None:
    """Rules 6 and 10: the ControllerRevision (when due) and the status write, only when the
    status changed; a re-check when a ready pod becomes available; the decision's headline
    (slurm-operator nodeset_sync_status.go ``syncStatus`` / ``updateNodeSetStatus``,
    nodeset_history.go ``truncateHistory``). Last of the steps: the per-pod notes close the
    reason."""
    ns = plan.ns
    status = plan.status
    assert status is not None  # calculate_status ran
    if status != ns.status:
        if _revision_due(ns, status):
            live_revisions = tuple(sorted({r for p in v.pods if (r := revision_of(p))}))
            plan.add(
                EnsureNodeSetRevision(
                    nodeset=plan.ref, revision_hash=ns.revision_hash, live=live_revisions
                )
            )
        plan.add(SetNodeSetStatus(nodeset=plan.ref, status=status))
    plan.requeue(_available_due(ns, status, plan.live, v.now))
    plan.reason = f"{len(plan.live)} live pod(s), {plan.want} wanted"
    for why in plan.pod_notes:
        plan.note(why)
    return None
