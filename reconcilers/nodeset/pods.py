"""What each live slurmd pod is kept in step with (rules 4, 5, 7, 8, 9, 15 and 18 of
:mod:`reconcilers.nodeset`): its Slurm node's state conditions, identity, cordon, protection
label and job deadline, and the Warning Events of a pod that does not come up.

Sources: slurm-operator ``internal/controller/nodeset/nodeset_sync.go`` (``syncCordon``,
``syncSlurmNodes``, ``syncSlurmTopology``, ``syncSlurmFeatures``, ``syncSlurmDeadline``,
``syncClusterWorkerPDB``) and ``nodeset_sync_status.go`` (``syncNodeSetPodStatus``,
``updateNodeSetPodPDBLabels``).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from reconcilers._steps import Stop
from reconcilers.nodeset import _daemon, _ident, _slurmd
from reconcilers.nodeset._common import (
    NOT_RUNNING_EVENTS,
    REASON_POD_NOT_RUNNING,
    NodeSetPlan,
    View,
    _event,
    _selector,
    _why,
    is_busy,
)
from reconcilers.nodeset.order import (
    format_deadline,
)
from schemas import wellknown
from schemas.actions import (
    AnyAction,
    EnsureNodeSetPDB,
    KeepNodeSetPodClaims,
    PodRef,
    SetPodAnnotation,
    SetPodLabel,
)
from schemas.events import (
    KubeNode,
    KubeNodeSet,
    KubePod,
    SlurmNode,
)


def not_running(p: KubePod) -> tuple[str, str] | None:
    """``(reason, message)`` of a live pod that does not come up (rule 5): the kubelet's
    (a container it cannot start), else, while unbound, the ``PodScheduled=False``
    condition's; None for a pod that is fine, starting, terminal or being deleted."""
    if p.terminal or p.deleting:
        return None
    if p.kubelet_reason:
        return p.kubelet_reason, p.kubelet_message
    scheduled = p.condition("PodScheduled")
    if not p.node_name and scheduled is not None and scheduled.status == "False":
        return scheduled.reason or "Unschedulable", scheduled.message
    return None


def _occasion(p: KubePod, reason: str) -> str:
    """``RecordEvent.once`` for rule 5's Warning on ``p``: the pod (its uid: a pod re-created
    under the name gets its own) and the reason, as DNS-label characters."""
    word = "".join(ch if ch.isalnum() else "-" for ch in reason.lower())[:40].strip("-")
    return f"pod-{p.uid or p.name}.{word or 'unknown'}"


def _not_running_events(ns: KubeNodeSet, pods: Iterable[KubePod]) -> list[AnyAction]:
    """One Warning per live pod and reason it does not come up for (rule 5), for the first
    :data:`NOT_RUNNING_EVENTS` such pods by name: a wrong image fails every pod the same
    way, and each decision re-sends its ``once`` Events (a 409 each once they exist), so a
    large NodeSet must not multiply them."""
    out: list[AnyAction] = []
    stuck = [(p, why) for p in pods if (why := not_running(p)) is not None]
    for p, why in sorted(stuck, key=lambda pw: pw[0].name)[:NOT_RUNNING_EVENTS]:
        event = _event(
            ns,
            REASON_POD_NOT_RUNNING,
            f"{p.name} is {p.phase}{_why(*why)}",
            warning=True,
        )
        out.append(msgspec.structs.replace(event, once=_occasion(p, why[0])))
    return out


def deadline_actions(live: list[KubePod], deadlines: dict[str, int]) -> list[AnyAction]:
    """Keep each live pod's ``pod-deadline`` annotation equal to its Slurm node's job
    deadline, removed when it runs nothing (rule 9)."""
    out: list[AnyAction] = []
    for p in live:
        end = deadlines.get(p.name)
        want = format_deadline(end) if end else None
        if p.annotations.get(wellknown.ANNOTATION_POD_DEADLINE) != want:
            out.append(
                SetPodAnnotation(
                    pod=PodRef.of(p), annotation=wellknown.ANNOTATION_POD_DEADLINE, value=want
                )
            )
    return out


def _identity(
    plan: NodeSetPlan, v: View, p: KubePod, node: SlurmNode | None, kube_node: KubeNode | None
) -> None:
    """Rules 8 and 15 for one live pod: its ``SlurmNodeState*`` conditions, its Slurm node's
    PodInfo comment, ``k8s/`` features and topology (slurm-operator nodeset_sync_status.go
    ``updateNodeSetPodConditions``; nodeset_sync.go ``syncSlurmNodes``,
    ``syncSlurmFeatures``, ``syncSlurmTopology``)."""
    plan.extend(_slurmd.condition_actions(p, node, slurm_listed=v.slurm_listed))
    plan.extend(_ident.pod_info_actions(plan.ns, p, node, v.cluster))
    plan.extend(_ident.feature_actions(kube_node, node, v.cluster))
    topology, note = _ident.topology_actions(p, kube_node, node, v.cluster)
    plan.extend(topology)
    if note:
        plan.pod_notes.append(note)


def _unregistered(plan: NodeSetPlan, v: View, p: KubePod, node: SlurmNode | None) -> None:
    """Rule 15: a healthy, available pod whose Slurm node never registered is deleted (and
    re-created by rule 1); until it is due, a re-check (slurm-operator nodeset_sync.go
    ``syncSlurmNodes``, "Slurm node is not registered")."""
    ns = plan.ns
    wait = _ident.unregistered(p, node, ns.min_ready_seconds, v.now, slurm_listed=v.slurm_listed)
    if wait != 0.0:
        plan.requeue(wait)
        return
    plan.add(
        _ident.unregistered_delete(p, v.cluster),
        _event(
            ns,
            "SlurmNodeNotRegistered",
            f"Deleting Pod {p.namespace}/{p.name}: Slurm node is not registered but pod is healthy",
            warning=True,
        ),
    )


def _protect(plan: NodeSetPlan, p: KubePod, node: SlurmNode, pdb_ensured: bool) -> bool:
    """Rule 4: label ``pod-protect`` follows the Slurm node's business; the first pod to get
    it ensures the PodDisruptionBudget (slurm-operator nodeset_sync_status.go
    ``updateNodeSetPodPDBLabels``, nodeset_sync.go ``syncClusterWorkerPDB``). Returns
    whether the budget is ensured in this decision."""
    protected = p.labels.get(wellknown.LABEL_POD_PROTECT) == "true"
    busy = is_busy(node)
    if busy and not protected:
        if not pdb_ensured:
            selector = {**_selector(plan.ns), wellknown.LABEL_POD_PROTECT: "true"}
            plan.add(EnsureNodeSetPDB(nodeset=plan.ref, selector=selector))
        plan.add(SetPodLabel(pod=PodRef.of(p), label=wellknown.LABEL_POD_PROTECT, value="true"))
        return True
    if not busy and protected:
        plan.add(SetPodLabel(pod=PodRef.of(p), label=wellknown.LABEL_POD_PROTECT, value=None))
    return pdb_ensured


def _kept(
    plan: NodeSetPlan, v: View, p: KubePod, node: SlurmNode, kube_node: KubeNode | None
) -> None:
    """Rules 18 and 7 for a kept pod with a Slurm node: a reversed scale-in takes its claims
    back; its drain follows its node's cordon and its own ``pod-cordon`` (slurm-operator
    nodeset_sync.go ``syncCordon``, ``syncPodUncordon``)."""
    if node.reason == wellknown.scale_in_drain_reason(p.namespace, p.name):
        # Rule 18: a reversed scale-in; the pod's claims may already name it as owner.
        plan.add(
            KeepNodeSetPodClaims(
                nodeset=plan.ref, pod=PodRef.of(p), slurm_node=_daemon.slurm_name(p)
            )
        )
    synced, why = _slurmd.cordon_actions(
        p,
        kube_node,
        node,
        v.cluster,
        v.propagated_node_conditions,
        nodes_listed=v.nodes_listed,
    )
    plan.extend(synced)
    if why:
        plan.pod_notes.append(why)


def sync_pods(plan: NodeSetPlan, v: View) -> Stop | None:
    """Rules 4, 7, 8, 15 and 18 over each live pod, in name order: identity and state
    conditions for all; for a pod not condemned in this decision the registration check,
    and with a Slurm node the claims of a reversed scale-in, the cordon sync and the
    protection label (slurm-operator nodeset_sync.go ``syncCordon``, ``syncSlurmNodes``;
    nodeset_sync_status.go ``syncNodeSetPodStatus``)."""
    doomed = {p.name for p in plan.condemned}
    pdb_ensured = False
    for p in plan.live:
        node = v.slurm.get(p.name)
        kube_node = v.kube_nodes.get(p.node_name) if p.node_name else None
        _identity(plan, v, p, node, kube_node)
        if p.name in doomed:
            continue
        _unregistered(plan, v, p, node)
        if node is None:
            continue
        _kept(plan, v, p, node, kube_node)
        pdb_ensured = _protect(plan, p, node, pdb_ensured)
    return None


def sync_deadlines(plan: NodeSetPlan, v: View) -> Stop | None:
    """Rule 9: each live pod's ``pod-deadline`` annotation, with a complete Slurm listing
    (slurm-operator nodeset_sync.go ``syncSlurmDeadline``)."""
    if plan.deadlines is not None:
        plan.extend(deadline_actions(plan.live, plan.deadlines))
    return None
