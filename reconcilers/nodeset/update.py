"""Template updates (rule 11 of :mod:`reconcilers.nodeset`), after slurm-operator
``internal/controller/nodeset/nodeset_sync.go`` ``syncUpdate``, ``syncRollingUpdate``,
``splitUpdatePods`` and ``syncScheduledUpdate``.
"""

from __future__ import annotations

import math

from reconcilers._steps import Stop
from reconcilers.nodeset._common import (
    DEFAULT_MAX_UNAVAILABLE,
    DRAIN_RECHECK_S,
    NodeSetPlan,
    View,
    _event,
)
from reconcilers.nodeset.order import (
    active_pods_key,
)
from reconcilers.nodeset.reservation import (
    _under_reservation,
    reservation_name,
)
from reconcilers.nodeset.scale import (
    _condemn,
)
from reconcilers.nodeset.status import (
    is_available,
    revision_of,
)
from schemas import wellknown
from schemas.actions import (
    CreateNodeSetPod,
)
from schemas.events import (
    KubePod,
    SlurmNode,
)


def max_unavailable(value: str, total: int) -> int:
    """``maxUnavailable`` (an integer, or a percentage of ``total`` rounded up) as a count;
    ``""`` is 1.x's default ``25%``; an unreadable value counts as 1
    (internal/utils/mathutils ``GetScaledValueFromIntOrPercent`` over apimachinery intstr)."""
    text = value or DEFAULT_MAX_UNAVAILABLE
    try:
        if text.endswith("%"):
            return math.ceil(int(text[:-1]) * total / 100)
        return int(text)
    except ValueError:
        return 1


def _healthy(p: KubePod) -> bool:
    # podutils.IsHealthy: Running, Ready and not terminating.
    return p.phase == "Running" and p.ready and not p.deleting


def _draining_for_us(p: KubePod, slurm: dict[str, SlurmNode]) -> bool:
    """The pod's Slurm node carries our pending-termination drain: it was condemned."""
    node = slurm.get(p.name)
    return (
        node is not None
        and node.has("DRAIN")
        and node.reason == wellknown.scale_in_drain_reason(p.namespace, p.name)
    )


def update_pods(
    v: View, live: list[KubePod], deadlines: dict[str, int] | None, want: int | None = None
) -> tuple[list[KubePod], str, float | None]:
    """The old-revision pods to replace now (rule 11): ``(pods, note, recheck in s)``.

    RollingUpdate, as slurm-operator nodeset_sync.go ``syncRollingUpdate`` and
    ``splitUpdatePods``: every unhealthy old pod (not Running and Ready), then healthy old
    pods within the budget ``maxUnavailable − unavailable``, where unavailable counts the
    replica slots with no live pod and the new pods not yet available (Ready for
    ``minReadySeconds``). Healthy old pods are taken in the scale-in order
    (:func:`active_pods_key`), except that those whose Slurm node already carries our
    pending-termination drain come first: slurmbridge marks a condemned pod by that drain
    (slurm-operator by ``pod-cordon``, also first in its order), so a pod whose jobs are
    draining stays the one being replaced and its budget is not spent twice.
    OnDelete: nothing (a deleted pod is re-created at the new revision by rule 1).
    ScheduledUpdate: every unhealthy old pod and the old pods whose Slurm node is
    MAINTENANCE in reservation ``SlurmOperatorMaint-<nodeset>`` (rule 17), no budget.
    """
    ns = v.nodeset
    assert ns is not None
    if not ns.revision_hash:
        return [], "", None
    if ns.update_strategy == "OnDelete":
        return [], "", None
    if ns.update_strategy == "ScheduledUpdate":
        old = [p for p in live if revision_of(p) != ns.revision_hash]
        name = reservation_name(ns)
        chosen = [p for p in old if not _healthy(p) or _under_reservation(p, v.slurm, name)]
        note = (
            f"scheduled update: {len(old)} old pod(s), {len(chosen)} unhealthy or under "
            f"reservation {name}"
            if old
            else ""
        )
        return chosen, note, None
    new = [p for p in live if revision_of(p) == ns.revision_hash]
    old = [p for p in live if revision_of(p) != ns.revision_hash]
    if not old:
        return [], "", None
    unhealthy = [p for p in old if not _healthy(p)]
    healthy = [p for p in old if _healthy(p)]
    total = max(0, ns.replicas) if want is None else want
    missing = min(total, max(0, total - len(new) - len(old)))
    not_available = [p for p in new if not is_available(p, ns.min_ready_seconds, v.now)]
    budget_max = max_unavailable(ns.max_unavailable, total)
    budget = max(0, min(budget_max - missing - len(not_available), budget_max))
    ordered = sorted(
        healthy,
        key=lambda p: (
            not _draining_for_us(p, v.slurm),
            active_pods_key(p, ns.name, v.slurm, deadlines),
        ),
    )
    chosen = unhealthy + ordered[:budget]
    note = (
        f"rolling update: {len(new)} pod(s) at {ns.revision_hash}, {len(old)} old, "
        f"maxUnavailable {budget_max}, {missing + len(not_available)} unavailable"
    )
    wait_s = None
    if not_available and ns.min_ready_seconds > 0:
        wait_s = max(0.1, min(p.ready_since + ns.min_ready_seconds - v.now for p in not_available))
    return chosen, note, wait_s


def sync_update(plan: NodeSetPlan, v: View) -> Stop | None:
    """Rule 11, only when this decision neither creates nor condemns pods: condemn the
    old-revision pods :func:`update_pods` picks, drain before delete, one ``RollingUpdate``
    Event (slurm-operator nodeset_sync.go ``syncUpdate``, ``syncRollingUpdate``,
    ``syncScheduledUpdate``)."""
    if plan.condemned or any(isinstance(a, CreateNodeSetPod) for a in plan.actions):
        return None
    ns = plan.ns
    updating, note, wait_s = update_pods(v, plan.live, plan.deadlines, plan.want)
    plan.note(note)
    if updating:
        waiting = _condemn(plan, v, updating)
        plan.add(
            _event(
                ns,
                "RollingUpdate",
                f"Rolling update to revision {ns.revision_hash}: replacing "
                f"{', '.join(p.name for p in updating)}"
                + (f" (waiting for {', '.join(waiting)} to drain)" if waiting else ""),
            )
        )
        if waiting:
            plan.requeue(DRAIN_RECHECK_S)
    plan.requeue(wait_s)
    plan.condemned = updating
    return None
