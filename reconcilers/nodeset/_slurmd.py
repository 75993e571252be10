"""Pure rules for one slurmd pod of a NodeSet: cordon sync and its Slurm state as pod
conditions (used by :mod:`reconcilers.nodeset`; no I/O).

**Cordon sync** (slurm-operator internal/controller/nodeset/nodeset_sync.go ``syncCordon``
and ``syncPodUncordon``; the Kubernetes-node trigger as eventhandler/eventhandler_node.go):

1. The Slurm node's reason is not ours (non-empty and not ``slurm-operator: ``), or the node
   is unresponsive (DOWN with ``NOT_RESPONDING`` or Slurm's ``Not responding`` reason:
   slurmcontrol.go ``IsNodeDownForUnresponsive``) ⇒ nothing, ever: an administrator's drain
   and Slurm's own DOWN are never overwritten nor undone.
2. The pod's Kubernetes node is cordoned (``spec.unschedulable``) ⇒ DRAIN with the node's
   ``nodeset.slinky.slurm.net/node-cordon-reason`` annotation when it has one (sanitised:
   :func:`sanitize_reason`; empty ⇒ ``unknown`` as ``makePodCordonAndDrain``), else the True
   conditions of the configured types as ``(<reason>: <message>)`` joined by ``; ``, else
   ``Node (<node>) was cordoned, Pod (<ns>/<pod>) must be cordoned``; always prefixed
   ``slurm-operator: ``.
3. Else the pod carries ``nodeset.slinky.slurm.net/pod-cordon: "true"`` ⇒ DRAIN with
   ``Pod (<ns>/<pod>) was cordoned``.
4. Else ⇒ UNDRAIN when the node is DRAIN (not already UNDRAIN) — its reason is ours or
   empty by rule 1.

A drain keeps an existing reason of ours (slurmcontrol.go ``MakeNodeDrain`` without
override) and is not re-sent while the node is DRAIN with a reason. A pod bound to a
Kubernetes node the log does not hold is left alone until the log holds a complete node
listing (then the node is gone, so not cordoned: the operator's ``isNodeCordoned`` is false
for a node it cannot get).

**The cordon annotation both ways** (slurm-operator ``makePodCordon`` /
``makePodUncordon``, issue 28 item 8), so tools built on it see what they see from the
operator: a pod on a cordoned node gets ``pod-cordon: "true"`` written with the drain; a
pod carrying it whose node is no longer cordoned, while its Slurm node is drained with one
of our reasons other than rule 3's (the mark was the node's cordon, not someone's pod
cordon) has it removed and its node undrained (our reason only). A pod condemned by a
scale-in is marked too (:mod:`reconcilers.nodeset`).

**Slurm state on the pod** (slurm-operator slurmcontrol.go ``CalculateNodeStatus`` /
``nodeState``, nodeset_sync_status.go ``applySlurmPodConditions``, pkg/conditions): one
condition ``SlurmNodeState<Base>`` for the first base state present in the order Allocated,
Down, Error, Future, Idle, Mixed, Unknown, one ``SlurmNodeState<Flag>`` per flag among
Completing, Drain, Fail, Invalid, InvalidReg, Maintenance, NotResponding, Undrain; each
``status: "True"`` with Slurm's reason as message; any other ``SlurmNodeState*`` condition
is removed. Written only when the set differs from the pod's.
"""

from __future__ import annotations

import unicodedata
from typing import Final

from schemas import wellknown
from schemas.actions import (
    AnyAction,
    DrainSlurmNode,
    PodRef,
    SetPodAnnotation,
    SetSlurmNodeConditions,
    SlurmStateCondition,
    UndrainSlurmNode,
)
from schemas.events import KubeNode, KubePod, SlurmNode

#: Slurm base states, in the order the operator tests them, and their condition suffix.
BASE_STATES: Final = (
    ("ALLOCATED", "Allocated"),
    ("DOWN", "Down"),
    ("ERROR", "Error"),
    ("FUTURE", "Future"),
    ("IDLE", "Idle"),
    ("MIXED", "Mixed"),
    ("UNKNOWN", "Unknown"),
)
#: Slurm state flags mirrored as conditions (Slurm's REST names → condition suffix).
FLAG_STATES: Final = (
    ("COMPLETING", "Completing"),
    ("DRAIN", "Drain"),
    ("FAIL", "Fail"),
    ("INVALID", "Invalid"),
    ("INVALID_REG", "InvalidReg"),
    ("MAINTENANCE", "Maintenance"),
    ("NOT_RESPONDING", "NotResponding"),
    ("UNDRAIN", "Undrain"),
)
#: Longest reason taken from a node annotation, in characters (nodeset_sync.go
#: ``maxSlurmReasonLength``).
MAX_REASON: Final = 256
OURS: Final = wellknown.OPERATOR_REASON_PREFIX


def sanitize_reason(text: str) -> str:
    """An untrusted reason made safe for Slurm: tab, CR and LF become spaces, other control
    characters go, surrounding blanks are trimmed, and at most :data:`MAX_REASON` characters
    are kept (trimmed again). Source: nodeset_sync.go ``sanitizeSlurmReason``."""
    out = "".join(
        " " if ch in "\t\n\r" else ch for ch in text if ch in "\t\n\r" or not _control(ch)
    ).strip()
    return out[:MAX_REASON].strip()


def _control(ch: str) -> bool:
    # Go's unicode.IsControl: the C0 and C1 control characters (category Cc).
    return unicodedata.category(ch) == "Cc"


def cordon_reason(node: KubeNode, pod: KubePod, propagated: tuple[str, ...]) -> str:
    """The drain reason for ``pod`` on cordoned ``node`` (module rule 2), prefixed."""
    if wellknown.ANNOTATION_NODE_CORDON_REASON in node.annotations:
        text = sanitize_reason(node.annotations[wellknown.ANNOTATION_NODE_CORDON_REASON])
        return OURS + (text or "unknown")
    parts = [
        f"({c.reason}: {c.message})"
        for kind in propagated
        for c in node.true_conditions
        if c.type == kind and c.status == "True"
    ]
    if parts:
        return OURS + "; ".join(parts)
    return wellknown.node_cordon_drain_reason(node.key, pod.namespace, pod.name)


def is_unresponsive(node: SlurmNode) -> bool:
    """DOWN because slurmctld lost it: Slurm sets ``State=DOWN`` with ``Not responding`` in
    the reason (slurm ping_nodes.c; slurmcontrol.go ``IsNodeDownForUnresponsive``), and the
    ``NOT_RESPONDING`` flag while it is so."""
    return node.has("DOWN") and (node.has("NOT_RESPONDING") or "Not responding" in node.reason)


def reason_is_ours(reason: str) -> bool:
    """Empty or ``slurm-operator: …`` (slurmcontrol.go ``IsNodeReasonOurs``)."""
    return reason == "" or reason.startswith(OURS)


def cordon_mark(pod: KubePod, cordoned: bool) -> SetPodAnnotation:
    """Write (``True``) or remove the pod's ``nodeset.slinky.slurm.net/pod-cordon=true``
    (slurm-operator nodeset_sync.go ``makePodCordon`` / ``makePodUncordon``)."""
    return SetPodAnnotation(
        pod=PodRef.of(pod),
        annotation=wellknown.ANNOTATION_POD_CORDON,
        value="true" if cordoned else None,
    )


def cordon_actions(
    pod: KubePod,
    kube_node: KubeNode | None,
    slurm: SlurmNode,
    cluster: str,
    propagated: tuple[str, ...] = (),
    *,
    nodes_listed: bool = True,
) -> tuple[list[AnyAction], str]:
    """Drain or undrain ``pod``'s Slurm node for cordons (module rules 1–4): the actions and
    a short why (``""`` when nothing is to be done). ``nodes_listed``: the log holds a
    complete list of the Kubernetes nodes (a missing node is then gone)."""
    if not reason_is_ours(slurm.reason):
        return [], f"{slurm.key}: drain reason {slurm.reason!r} is not ours; left alone"
    if is_unresponsive(slurm):
        return [], f"{slurm.key}: not responding; left alone"
    if pod.node_name and kube_node is None and not nodes_listed:
        return [], ""
    annotated = pod.annotations.get(wellknown.ANNOTATION_POD_CORDON) == "true"
    marks: list[AnyAction] = []
    wanted = ""
    if kube_node is not None and kube_node.unschedulable:
        wanted = cordon_reason(kube_node, pod, propagated)
        if not annotated:
            # slurm-operator makePodCordon: the pod says it is cordoned, for tools that read it.
            marks.append(cordon_mark(pod, True))
    elif annotated:
        pod_reason = wellknown.pod_cordon_drain_reason(pod.namespace, pod.name)
        if kube_node is not None and slurm.has("DRAIN") and slurm.reason not in ("", pod_reason):
            # The mark was the node's cordon, now lifted: the pod is uncordoned and its
            # node undrained (makePodUncordonAndUndrain; our reason only, checked above).
            undrain = UndrainSlurmNode(cluster=cluster, node=slurm.key, owned_prefixes=(OURS,))
            return [cordon_mark(pod, False), undrain], f"{slurm.key}: uncordoned"
        wanted = pod_reason
    if wanted:
        if slurm.has("DRAIN") and slurm.reason:
            return marks, ""
        reason = slurm.reason or wanted
        return [*marks, DrainSlurmNode(cluster=cluster, node=slurm.key, reason=reason)], (
            f"{slurm.key}: cordoned ({reason})"
        )
    if slurm.has("DRAIN") and not slurm.has("UNDRAIN"):
        undrain = UndrainSlurmNode(cluster=cluster, node=slurm.key, owned_prefixes=(OURS,))
        return [undrain], f"{slurm.key}: uncordoned"
    return [], ""


def state_conditions(node: SlurmNode) -> tuple[SlurmStateCondition, ...]:
    """The ``SlurmNodeState*`` conditions ``node``'s state makes (module docstring)."""
    prefix = wellknown.SLURM_NODE_STATE_PREFIX
    out = [
        SlurmStateCondition(type=prefix + name, message=node.reason)
        for state, name in BASE_STATES
        if node.has(state)
    ][:1]
    out += [
        SlurmStateCondition(type=prefix + name, message=node.reason)
        for state, name in FLAG_STATES
        if node.has(state)
    ]
    return tuple(out)


def _current(pod: KubePod) -> set[tuple[str, str, str]]:
    prefix = wellknown.SLURM_NODE_STATE_PREFIX
    return {(c.type, c.status, c.message) for c in pod.conditions if c.type.startswith(prefix)}


def condition_actions(
    pod: KubePod, node: SlurmNode | None, *, slurm_listed: bool
) -> list[AnyAction]:
    """A :class:`SetSlurmNodeConditions` when ``pod``'s ``SlurmNodeState*`` conditions differ
    from what ``node`` makes; a pod whose node Slurm does not list (in a complete, current
    listing only: ``slurm_listed``) has none."""
    if node is None and not slurm_listed:
        return []
    wanted = state_conditions(node) if node is not None else ()
    if {(c.type, "True", c.message) for c in wanted} == _current(pod):
        return []
    ref = PodRef.of(pod)
    return [SetSlurmNodeConditions(pod=ref, conditions=wanted)]
