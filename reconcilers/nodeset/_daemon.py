"""Pure rules for NodeSet pods tied to Kubernetes nodes: ``scalingMode: DaemonSet`` and
``pinToNode`` (used by :mod:`reconcilers.nodeset`; no I/O).

**Eligibility** (slurm-operator internal/controller/nodeset/utils/utils.go
``PodShouldRunOnNode`` / ``predicates``, over a pod made from the template as
``NewNodeSetSimulatedPod`` makes it): the template's node selector and required node
affinity must match the node (:func:`reconcilers._feasible.matches_affinity`, the same
``GetRequiredNodeAffinity(pod).Match(node)`` rule), and every ``NoSchedule`` / ``NoExecute``
taint must be tolerated (:func:`reconcilers._feasible.tolerates` per taint). Unlike
placement's :func:`~reconcilers._feasible.untolerated`, no taint is ignored here: 1.x adds no
DaemonSet tolerations to the simulated pod, so a cordon's ``unschedulable`` taint counts.
A node failing only on taints keeps an existing pod unless a ``NoExecute`` taint is
untolerated (``shouldContinueRunning``).

**The bridge's own taint** (:func:`slurmd_tolerations`): every slurmd pod tolerates
``slinky.slurm.net/managed-node`` (``NoExecute``, any value: ``operator: Exists``), which
slurmbridge itself puts on each Kubernetes node that has a Slurm node of its name — the very
nodes a slurmd pod makes. slurm-operator 1.x does the same for its own worker taint: the base
pod spec of ``BuildWorkerPodTemplate`` (internal/builder/workerbuilder/worker_app.go) carries
``TolerationWorkerNode`` (pkg/taints/taints.go), merged with the template's tolerations. A
template that already tolerates that taint — any toleration of the key, or a key-less
``Exists``, for ``NoExecute`` or every effect — is left as written (a user's
``operator: Equal`` with one scheduler's name stays the only one). The simulated pod above
carries it too, as 1.x's is made from the built template.

**Names** (utils.go): a DaemonSet pod is created with ``generateName: <nodeset>-``; its
hostname, which is its Slurm node name (``GetSlurmNodeName``), is the node's
``nodeset.slinky.slurm.net/hostname-override`` annotation, else the node name up to its
first dot (``GetDaemonSetPodHostname``). A pod's node is ``spec.nodeName``, else the
``metadata.name In [<node>]`` field of its required node affinity (Kubernetes
pkg/controller/daemon/util ``GetTargetNodeName``).

**Pins** (nodeset_sync_status.go ``calculateOrdinalToNode``, StatefulSet mode with
``pinToNode``): a recorded pin stays while its node exists and the template may run there; a
Running pod bound to a node (that exists and is eligible) pins its ordinal to that node. The
replacement of a pinned ordinal gets that node as required node affinity
(utils.go ``pinPodToNode``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from reconcilers import _feasible
from schemas import wellknown
from schemas.events import KubeNode, KubeNodeSet, KubePod, Toleration

DAEMONSET: Final = "DaemonSet"
STATEFULSET: Final = "StatefulSet"
#: The field a DaemonSet pod's node affinity names its node by (metav1.ObjectNameField).
OBJECT_NAME_FIELD: Final = "metadata.name"
#: The toleration every slurmd pod gets for the bridge's own taint (module doc).
MANAGED_NODE_TOLERATION: Final = Toleration(
    key=wellknown.TAINT_MANAGED_NODE,
    operator="Exists",
    effect=wellknown.TAINT_MANAGED_NODE_EFFECT,
)


def tolerates_managed_node(tolerations: Iterable[Toleration]) -> bool:
    """Does one of ``tolerations`` already speak for the managed-node taint: its key (any
    operator and value) or a key-less ``Exists``, with effect ``NoExecute`` or none."""
    return any(
        (t.key == wellknown.TAINT_MANAGED_NODE or (not t.key and t.operator == "Exists"))
        and t.effect in ("", wellknown.TAINT_MANAGED_NODE_EFFECT)
        for t in tolerations
    )


def slurmd_tolerations(tolerations: tuple[Toleration, ...]) -> tuple[Toleration, ...]:
    """A slurmd pod's tolerations: the template's, plus :data:`MANAGED_NODE_TOLERATION`
    unless they already tolerate that taint (module doc, **The bridge's own taint**)."""
    if tolerates_managed_node(tolerations):
        return tolerations
    return (*tolerations, MANAGED_NODE_TOLERATION)


def template_pod(ns: KubeNodeSet) -> KubePod:
    """The template's node filters as a pod (``NewNodeSetSimulatedPod``), with the
    tolerations every slurmd pod gets (:func:`slurmd_tolerations`)."""
    return KubePod(
        key="",
        source="",
        observed_at=0,
        node_selector=ns.node_selector,
        node_affinity=ns.node_affinity,
        toleration_specs=slurmd_tolerations(ns.toleration_specs),
    )


def should_run(ns: KubeNodeSet, node: KubeNode) -> tuple[bool, bool]:
    """``(shouldRun, shouldContinueRunning)`` of ``ns``'s pods on ``node`` (module doc)."""
    pod = template_pod(ns)
    if not _feasible.matches_affinity(pod, node):
        return False, False
    untolerated = [
        t
        for t in node.taints
        if t.effect in _feasible.DO_NOT_SCHEDULE
        and not any(_feasible.tolerates(tol, t) for tol in pod.toleration_specs)
    ]
    if untolerated:
        return False, not any(t.effect == "NoExecute" for t in untolerated)
    return True, True


def hostname(node: KubeNode) -> str:
    """The hostname (Slurm node name) of a DaemonSet pod on ``node`` (module doc)."""
    override = node.annotations.get(wellknown.ANNOTATION_NODE_HOSTNAME_OVERRIDE, "")
    return override or node.key.split(".", 1)[0]


def mode_of(p: KubePod) -> str:
    """The scalingMode ``p`` was made for (its label; none: StatefulSet, as slurmbridge's
    pods from before the label were)."""
    return p.labels.get(wellknown.LABEL_SCALING_MODE) or STATEFULSET


def slurm_name(p: KubePod) -> str:
    """The Slurm node name of slurmd pod ``p``: a DaemonSet pod's hostname label, else the
    pod name (its hostname: utils.go ``GetSlurmNodeName``)."""
    if mode_of(p) == DAEMONSET:
        return p.labels.get(wellknown.LABEL_POD_HOSTNAME) or p.name
    return p.name


def target_node(p: KubePod) -> str:
    """The node ``p`` is bound or pinned to (``GetTargetNodeName``); ``""`` none."""
    if p.node_name:
        return p.node_name
    for term in p.node_affinity or ():
        for req in term.match_fields:
            if req.key == OBJECT_NAME_FIELD and req.operator == "In":
                return req.values[0] if len(req.values) == 1 else ""
    return ""


def by_node(pods: Iterable[KubePod]) -> dict[str, list[KubePod]]:
    """Pods grouped by :func:`target_node` (pods without one are left out)."""
    out: dict[str, list[KubePod]] = {}
    for p in pods:
        if node := target_node(p):
            out.setdefault(node, []).append(p)
    return out


def pins(
    ns: KubeNodeSet,
    pods: Iterable[KubePod],
    nodes: Mapping[str, KubeNode],
    ordinal_of: Mapping[str, int],
    *,
    nodes_listed: bool,
) -> dict[str, str]:
    """``status.ordinalToNode`` (module doc, **Pins**): empty unless ``pinToNode`` in
    StatefulSet mode. ``ordinal_of``: pod name → ordinal. Without a complete node listing
    (``nodes_listed`` false) a recorded pin whose node is unseen is kept."""
    if not ns.pin_to_node or ns.scaling_mode == DAEMONSET:
        return {}
    out: dict[str, str] = {}
    for ordinal, name in ns.status.ordinal_to_node.items():
        node = nodes.get(name)
        if node is None:
            if not nodes_listed:
                out[ordinal] = name
            continue
        if should_run(ns, node)[0]:
            out[ordinal] = name
    for p in pods:
        node = nodes.get(p.node_name) if p.node_name else None
        o = ordinal_of.get(p.name)
        if node is None or o is None or p.phase != "Running":
            continue
        if should_run(ns, node)[0]:
            out[str(o)] = p.node_name
    return out
