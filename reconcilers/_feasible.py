"""Kubernetes' own node filters for one pod on one node (pure): what kube-scheduler would check
before binding, which slurmbridge must check itself because it binds directly.

Slinky's scheduler plugin runs inside kube-scheduler, whose filters run before it: its profile
(slurm-bridge ``helm/slurm-bridge/templates/scheduler/configmap.yaml``) enables
``TaintToleration`` and ``NodeResourcesFit``, and ``PostFilter`` offers Slurm only the nodes no
other filter rejected (``internal/scheduler/plugins/slurmbridge/slurmbridge.go``). slurmbridge
binds through the Binding subresource, so :func:`fits` applies those filters — plus
``NodeAffinity``, which the kubelet enforces at admission anyway
(``pkg/kubelet/lifecycle/predicate.go``: a pod bound against its node selector would only fail).

Rules, in kube-scheduler's default filter order (``NodeName``, ``TaintToleration``,
``NodeAffinity``, ``NodePorts``, ``NodeResourcesFit``); the first that fails gives the
reason, in kube-scheduler's words:

* **NodeName** — a pod already bound elsewhere fits no other node
  (``pkg/scheduler/framework/plugins/nodename``): "node(s) didn't match the requested node name".
* **TaintToleration** — every taint with effect ``NoSchedule`` or ``NoExecute`` must be
  tolerated; ``PreferNoSchedule`` is only a preference
  (``pkg/scheduler/framework/plugins/tainttoleration``, ``DoNotScheduleTaintsFilterFunc``):
  "node(s) had untolerated taint {key: value}". A toleration tolerates a taint when its effect
  is empty or equal, its key is empty or equal, and its operator is ``Exists`` or ``Equal``
  (empty = Equal) with an equal value (k8s.io/api ``core/v1/toleration.go``
  ``ToleratesTaint``; ``Lt``/``Gt`` belong to the alpha gate TaintTolerationComparisonOperators,
  off by default, and tolerate nothing here). Two taints never count: the managed-node taint
  :data:`~schemas.wellknown.TAINT_MANAGED_NODE` (``MarkPods`` adds its toleration to our
  pods, at submit) and ``node.kubernetes.io/unschedulable`` (a cordon: ``placement`` already
  excludes cordoned nodes, and keeps binding to them as before).
* **NodeAffinity** — ``spec.nodeSelector``: every pair must equal a node label; and the
  required node affinity, when present: its terms are ORed, a term's ``matchExpressions``
  and ``matchFields`` ANDed; a term with neither matches nothing, so a required affinity
  without terms matches no node; an expression or field that does not parse (an unknown
  operator, ``In`` without values, ``Gt`` with two) fails its term
  (k8s.io/component-helpers ``scheduling/corev1/nodeaffinity/nodeaffinity.go``,
  ``GetRequiredNodeAffinity``, ``NewLazyErrorNodeSelector``). Operators, as
  k8s.io/apimachinery ``labels.Requirement.Matches``: ``In`` (label present, value listed),
  ``NotIn`` (label absent, or value not listed), ``Exists``, ``DoesNotExist``, ``Gt``/``Lt``
  (label present and both it and the one value base-10 int64 integers, compared as integers;
  otherwise no match). ``matchFields`` knows only ``metadata.name`` with ``In``/``NotIn`` and
  exactly one value. Well-known labels (``kubernetes.io/hostname`` …) are plain labels.
  "node(s) didn't match Pod's node affinity/selector".
* **NodePorts** — each host port of the pod must be free on the node: a port asked on every
  address (``0.0.0.0``) conflicts with the same protocol and port on any address, a port on
  one address with the same one on that address or on every address
  (``pkg/scheduler/framework/plugins/nodeports/node_ports.go``, ``HostPortInfo.CheckConflict``
  in ``framework/types.go``): "node(s) didn't have free ports for the requested pod ports".
* **NodeResourcesFit** — ``pods`` on the node + 1 ≤ allocatable pods ("Too many pods"); then,
  only if the pod requests anything, each requested resource (> 0) ≤ allocatable − what the
  node's pods already request: cpu, memory, then every other resource (extended resources
  such as ``nvidia.com/gpu``, hugepages, ``ephemeral-storage``) in name order
  ("Insufficient cpu", "Insufficient nvidia.com/gpu" …)
  (``pkg/scheduler/framework/plugins/noderesources/fit.go`` ``fitsRequest``). An allocatable
  cpu, memory or pods of 0 is unknown (an observation from before the field, or not
  reported) and is not checked; any other resource the node does not list it has none of.
  A pod already bound to the node is in the node's usage already and is not added again.

* **InterPodAffinity** (when the caller gives the cluster's nodes and their pods, as a submit
  does) — required terms only (``pkg/scheduler/framework/plugins/interpodaffinity/
  filtering.go``): no existing pod's anti-affinity term may select the pod on a node of the
  same topology value ("node(s) didn't satisfy existing pods anti-affinity rules"); no pod
  the pod's anti-affinity selects may run on a node of the node's topology value ("node(s)
  didn't match pod anti-affinity rules"); for each affinity term the node must carry the
  topology key and a selected pod run on a node of that value — unless no pod anywhere
  matches any term and the pod matches all its own (the first pod of a series) ("node(s)
  didn't match pod affinity rules"). A term selects pods in its namespaces (none listed: the
  term's pod's own; a ``namespaceSelector``: every namespace) by its label selector (none:
  no pod). Checked after the other constraints here, so a reason may name it where
  kube-scheduler would name resources first.

**Eligible for Slurm** (:func:`eligible`; Slinky slurm-bridge 1.3
``internal/scheduler/plugins/slurmbridge/eligibility.go`` ``nodeEligibleForSlurm``): what
a submit offers Slurm. A node whose only misfit is resources requested by pods of our Slurm
allocations (``KubeNodeUsage.bridge_*``) stays eligible — Slurm accounts for them, queues the
job behind them and plans backfill; usage by every other pod still counts, and the other
filters are checked on the node as it is (with the allocations' pods and their ports), so a
resource failure never hides a taint, an affinity or a port.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from schemas import wellknown
from schemas.events import (
    HostPort,
    KubeNode,
    KubeNodeUsage,
    KubePod,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PeerPod,
    PodAffinityTerm,
    Taint,
    Toleration,
)

#: kube-scheduler's reasons (the plugins' ``ErrReason`` texts).
NODE_NAME: Final = "node(s) didn't match the requested node name"
NODE_AFFINITY: Final = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS: Final = "Too many pods"
INSUFFICIENT_CPU: Final = "Insufficient cpu"
INSUFFICIENT_MEMORY: Final = "Insufficient memory"
NODE_PORTS: Final = "node(s) didn't have free ports for the requested pod ports"
POD_AFFINITY: Final = "node(s) didn't match pod affinity rules"
POD_ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"
#: The cluster as InterPodAffinity reads it: every node with what its pods are.
World = Sequence[tuple[KubeNode, KubeNodeUsage | None]]
#: The cordon taint (the node lifecycle controller's ``TaintNodeUnschedulable``).
TAINT_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"
#: Effects a pod must tolerate to be scheduled (``DoNotScheduleTaintsFilterFunc``).
DO_NOT_SCHEDULE: Final = frozenset({"NoSchedule", "NoExecute"})
#: Taints that never make a node infeasible here (module docstring).
IGNORED_TAINTS: Final = frozenset({wellknown.TAINT_MANAGED_NODE, TAINT_UNSCHEDULABLE})
_INT64: Final = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def untolerated_reason(taint: Taint) -> str:
    """kube-scheduler's TaintToleration reason for ``taint``."""
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """k8s.io/api core/v1 ``Toleration.ToleratesTaint`` (module docstring)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def untolerated(pod: KubePod, taints: Iterable[Taint], effects: frozenset[str]) -> Taint | None:
    """The first of ``taints`` with an effect in ``effects`` that no toleration of ``pod``
    tolerates (``FindMatchingUntoleratedTaint``), ignoring :data:`IGNORED_TAINTS`."""
    for taint in taints:
        if taint.effect not in effects or taint.key in IGNORED_TAINTS:
            continue
        if not any(tolerates(t, taint) for t in pod.toleration_specs):
            return taint
    return None


def _int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: None when it fails."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _expression(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool | None:
    """One ``matchExpressions`` entry against node labels; None when it does not parse
    (``labels.NewRequirement`` refuses it: the term then matches nothing)."""
    op, values = req.operator, req.values
    has = req.key in labels
    if op in ("In", "NotIn"):
        if not values:
            return None
        if op == "In":
            return has and labels[req.key] in values
        return not has or labels[req.key] not in values
    if op in ("Exists", "DoesNotExist"):
        if values:
            return None
        return has if op == "Exists" else not has
    if op in ("Gt", "Lt"):
        bound = _int64(values[0]) if len(values) == 1 else None
        if bound is None:
            return None
        value = _int64(labels[req.key]) if has else None
        if value is None:
            return False
        return value > bound if op == "Gt" else value < bound
    return None


def _field(req: NodeSelectorRequirement, node_name: str) -> bool | None:
    """One ``matchFields`` entry: only ``metadata.name``, ``In``/``NotIn``, one value
    (``nodeSelectorRequirementsAsFieldSelector``); None when it does not parse. Any other
    key reads as ``""`` (``fields.Set.Get`` of a field the node does not have)."""
    if req.operator not in ("In", "NotIn") or len(req.values) != 1:
        return None
    value = node_name if req.key == "metadata.name" else ""
    same = value == req.values[0]
    return same if req.operator == "In" else not same


def term_matches(term: NodeSelectorTerm, node: KubeNode) -> bool:
    """One node selector term: every expression and every field (an empty term: none)."""
    if not term.match_expressions and not term.match_fields:
        return False
    for req in term.match_expressions:
        if not _expression(req, node.labels):
            return False
    return all(_field(req, node.key) for req in term.match_fields)


def matches_affinity(pod: KubePod, node: KubeNode) -> bool:
    """``GetRequiredNodeAffinity(pod).Match(node)``: the node selector, then the terms."""
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            return False
    if pod.node_affinity is None:
        return True
    return any(term_matches(t, node) for t in pod.node_affinity)


def _port_conflict(want: HostPort, used: Iterable[HostPort]) -> bool:
    """``HostPortInfo.CheckConflict``: ``""`` (and ``0.0.0.0``) is every address."""
    anywhere = want.host_ip in ("", "0.0.0.0")
    for u in used:
        if u.port != want.port or u.protocol != want.protocol:
            continue
        if anywhere or u.host_ip in ("", "0.0.0.0") or u.host_ip == want.host_ip:
            return True
    return False


def ports_free(pod: KubePod, node: KubeNode, usage: KubeNodeUsage | None) -> bool:
    """NodePorts (module docstring); a pod bound to the node holds its own ports already."""
    if not pod.host_ports or pod.node_name == node.key or usage is None:
        return True
    return not any(_port_conflict(p, usage.host_ports) for p in pod.host_ports)


def _selects(
    term: PodAffinityTerm, owner_ns: str, namespace: str, labels: Mapping[str, str]
) -> bool:
    """``term`` (of a pod in ``owner_ns``) selects a pod in ``namespace`` with ``labels``."""
    if not term.has_selector:
        return False
    if not term.all_namespaces and namespace not in (term.namespaces or (owner_ns,)):
        return False
    if any(labels.get(k) != v for k, v in term.match_labels.items()):
        return False
    return all(_expression(req, labels) for req in term.match_expressions)


def _peers(usage: KubeNodeUsage | None) -> tuple[PeerPod, ...]:
    return usage.peers if usage is not None else ()


def pod_affinity_fits(pod: KubePod, node: KubeNode, world: World) -> str | None:
    """InterPodAffinity's required rules (module docstring); None when they pass."""
    for other, used in world:
        for peer in _peers(used):
            for t in peer.anti_affinity:
                value = node.labels.get(t.topology_key)
                if (
                    value is not None
                    and other.labels.get(t.topology_key) == value
                    and _selects(t, peer.namespace, pod.namespace, pod.labels)
                ):
                    return EXISTING_ANTI_AFFINITY
    for t in pod.pod_anti_affinity:
        value = node.labels.get(t.topology_key)
        if value is None:
            continue
        for other, used in world:
            if other.labels.get(t.topology_key) == value and any(
                _selects(t, pod.namespace, p.namespace, p.labels) for p in _peers(used)
            ):
                return POD_ANTI_AFFINITY
    if not pod.pod_affinity:
        return None
    exist = True
    for t in pod.pod_affinity:
        value = node.labels.get(t.topology_key)
        if value is None:
            return POD_AFFINITY  # every topology key must be on the node
        if not any(
            other.labels.get(t.topology_key) == value
            and any(_selects(t, pod.namespace, p.namespace, p.labels) for p in _peers(used))
            for other, used in world
        ):
            exist = False
    if exist:
        return None
    anywhere = any(
        _selects(t, pod.namespace, p.namespace, p.labels)
        for t in pod.pod_affinity
        for _other, used in world
        for p in _peers(used)
    )
    first = all(_selects(t, pod.namespace, pod.namespace, pod.labels) for t in pod.pod_affinity)
    return None if not anywhere and first else POD_AFFINITY


def constraints(
    pod: KubePod, node: KubeNode, usage: KubeNodeUsage | None, world: World | None = None
) -> str | None:
    """Every filter but NodeResourcesFit, on the node as it is (InterPodAffinity only when
    ``world`` is given); None when they pass."""
    if pod.node_name and pod.node_name != node.key:
        return NODE_NAME
    taint = untolerated(pod, node.taints, DO_NOT_SCHEDULE)
    if taint is not None:
        return untolerated_reason(taint)
    if not matches_affinity(pod, node):
        return NODE_AFFINITY
    if not ports_free(pod, node, usage):
        return NODE_PORTS
    if world is not None:
        return pod_affinity_fits(pod, node, world)
    return None


def fits(pod: KubePod, node: KubeNode, usage: KubeNodeUsage | None) -> str | None:
    """Whether kube-scheduler's filters would let ``pod`` onto ``node`` (module docstring).

    ``usage``: what the pods bound to the node request (None: nothing known, read as zero).
    Returns None when the pod fits, else the reason in kube-scheduler's words.
    """
    return constraints(pod, node, usage) or resources_fit(pod, node, usage)


def without_bridge(usage: KubeNodeUsage | None) -> KubeNodeUsage | None:
    """``usage`` less what the pods of our Slurm allocations request (``bridge_*``)."""
    if usage is None:
        return None
    extended = {
        k: v - usage.bridge_extended.get(k, 0)
        for k, v in usage.extended.items()
        if v - usage.bridge_extended.get(k, 0) > 0
    }
    return KubeNodeUsage(
        source=usage.source,
        key=usage.key,
        cpu_millis=usage.cpu_millis - usage.bridge_cpu_millis,
        memory_bytes=usage.memory_bytes - usage.bridge_memory_bytes,
        pods=usage.pods - usage.bridge_pods,
        extended=extended,
        host_ports=usage.host_ports,
    )


def eligible(
    pod: KubePod, node: KubeNode, usage: KubeNodeUsage | None, world: World | None = None
) -> str | None:
    """Whether a submit may offer ``node`` to Slurm for ``pod`` (module docstring, "Eligible
    for Slurm"): None when it may, else the reason (kube-scheduler's words). ``world``: the
    cluster's nodes and their usage, for InterPodAffinity (None: not checked)."""
    return constraints(pod, node, usage, world) or resources_fit(pod, node, without_bridge(usage))


def resources_fit(pod: KubePod, node: KubeNode, usage: KubeNodeUsage | None) -> str | None:
    """NodeResourcesFit (module docstring); None when it fits."""
    counted = pod.node_name == node.key  # already in the node's usage
    pods = usage.pods if usage is not None else 0
    if node.alloc_pods and pods + (0 if counted else 1) > node.alloc_pods:
        return TOO_MANY_PODS
    if counted:
        return None
    cpu = usage.cpu_millis if usage is not None else 0
    memory = usage.memory_bytes if usage is not None else 0
    if (
        node.alloc_cpu_millis
        and pod.cpu_millis > 0
        and pod.cpu_millis > node.alloc_cpu_millis - cpu
    ):
        return INSUFFICIENT_CPU
    if (
        node.alloc_memory_bytes
        and pod.memory_bytes > 0
        and pod.memory_bytes > node.alloc_memory_bytes - memory
    ):
        return INSUFFICIENT_MEMORY
    used = usage.extended if usage is not None else {}
    for name in sorted(pod.extended):
        want = pod.extended[name]
        if want > 0 and want > node.alloc_extended.get(name, 0) - used.get(name, 0):
            return f"Insufficient {name}"
    return None


def plus(usage: KubeNodeUsage | None, pod: KubePod, node: str) -> KubeNodeUsage:
    """``usage`` of ``node`` with ``pod``'s request added (a pod about to be bound there)."""
    base = usage or KubeNodeUsage(source="k8s", key=node)
    extended = dict(base.extended)
    for name, amount in pod.extended.items():
        extended[name] = extended.get(name, 0) + amount
    return KubeNodeUsage(
        source=base.source,
        key=base.key,
        cpu_millis=base.cpu_millis + pod.cpu_millis,
        memory_bytes=base.memory_bytes + pod.memory_bytes,
        pods=base.pods + 1,
        extended=extended,
        host_ports=(*base.host_ports, *pod.host_ports),
        bridge_cpu_millis=base.bridge_cpu_millis,
        bridge_memory_bytes=base.bridge_memory_bytes,
        bridge_pods=base.bridge_pods,
        bridge_extended=base.bridge_extended,
    )
