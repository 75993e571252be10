"""Pure rules for a slurmd pod's Slurm node identity and records (used by
:mod:`reconcilers.nodeset`; no I/O). Sources are slurm-operator 1.x files under
internal/controller/nodeset/ unless named otherwise.

1. **PodInfo.** A healthy pod (Running, Ready, not terminating: podutils ``IsHealthy``)
   whose Slurm node exists gets the node's ``comment`` set to its PodInfo
   (:mod:`schemas.podinfo`: namespace, pod, Kubernetes node, NodeSet name and uid), only
   when the comment's PodInfo differs (nodeset_sync_status.go ``syncSlurmStatus``,
   slurmcontrol.go ``UpdateNodeWithPodInfo``). When the old comment named another
   Kubernetes node the effector then sets the node IDLE (see
   :class:`schemas.actions.SetSlurmNodePodInfo`).
2. **Features.** A live pod bound to a Kubernetes node the log holds, with a Slurm node:
   the Kubernetes node's ``features.slinky.slurm.net/spec`` annotation (comma-separated;
   each value trimmed, empties dropped, sorted and de-duplicated: structutils
   ``SortedDedup``) becomes the node's ``k8s/<value>`` features; features without the
   ``k8s/`` prefix are kept; no annotation clears the ``k8s/`` ones. The ``k8s/`` members
   are replaced in the available and, separately, in the active set, each keeping its other
   members: a NodeFeatures plugin's ``mig=on`` active / ``mig=off`` available stays so (the
   available set is never written as the active one). Sent only when either set changes
   (nodeset_sync.go ``syncSlurmFeatures``, slurmcontrol.go ``UpdateNodeFeatures`` and
   slurmcontrol_test.go ``Test_realSlurmControl_UpdateNodeFeatures``, api/v1beta1/well_known.go
   ``AnnotationNodeFeaturesSpec`` / ``NodeFeaturePrefix``).
3. **Topology.** The same pods: the Kubernetes node's ``topology.slinky.slurm.net/spec``
   annotation (``""`` when absent) is copied onto the pod under the same key and becomes the
   Slurm node's topology (``topology_str``) when it differs (nodeset_sync.go
   ``syncSlurmTopology``, slurmcontrol.go ``UpdateNodeTopology``).
   A cluster whose REST API does not report topology (before v0.0.43) gets no topology
   update (Slurm would ignore it). Unlike 1.x, which patches the annotation even to ``""``,
   an absent annotation counts as ``""``: none is written onto pods of nodes without one.
4. **Never registered.** A healthy pod Ready for ``minReadySeconds`` (podutils
   ``IsRunningAndAvailable``) whose Slurm node a complete listing does not hold is deleted,
   with a Warning ``SlurmNodeNotRegistered``; scale-out re-creates it (nodeset_sync.go
   ``syncSlurmNodes``). 1.x's slurmd pods are Ready only once slurmd answers ``/readyz``
   (workerbuilder/worker_app.go) and it re-lists Slurm first; slurmbridge reads a poll of
   Slurm and its pods may be Ready earlier, so it also waits :data:`REGISTER_GRACE_S` after
   the pod became available. The effector deletes only while Slurm still does not know the
   node (or it is drained and idle).
5. **Pruning records** (``pruneSlurmNodeRecords: NodeNotFound``, ``scalingMode: DaemonSet``
   only; ``Never``, the default, prunes nothing: api/v1beta1/nodeset_types.go,
   nodeset_sync.go ``syncSlurmNodeRecords``). A Slurm node DOWN and NOT_RESPONDING whose
   comment's PodInfo names this NodeSet (namespace, name and a non-empty uid equal to its
   own) and a pod (slurmcontrol.go ``GetDefunctNodesForNodeSet``), when that pod is gone,
   the PodInfo names a Kubernetes node, and that node is gone or no longer maps to this
   Slurm node name (its ``nodeset.slinky.slurm.net/hostname-override`` annotation, else its
   name up to the first dot: utils.go ``GetDaemonSetPodHostname``) ⇒ delete the record, with
   a Normal ``DefunctSlurmNodePruned`` Event (``syncSlurmNodeRecordsNodeNotFound``).
   Fail closed beyond 1.x: only dynamic nodes (``DYNAMIC_NORM``: Slurm deletes no other),
   never a busy one, and only with complete listings of pods, nodes and Slurm (a missing
   object then is gone).
"""

from __future__ import annotations

from typing import Final

from schemas import podinfo, wellknown
from schemas.actions import (
    AnyAction,
    DeleteNodeSetPod,
    NodeSetRef,
    PodRef,
    PruneSlurmNodeRecord,
    SetPodAnnotation,
    SetSlurmNodeOwnedFeatures,
    SetSlurmNodePodInfo,
    UpdateSlurmNodeTopology,
)
from schemas.events import KubeNode, KubeNodeSet, KubePod, SlurmNode
from schemas.podinfo import PodInfo

#: Seconds a pod must have been available before a missing Slurm node counts as never
#: registered (rule 4): registration and the next Slurm poll must have had time.
REGISTER_GRACE_S: Final = 10.0
#: ``pruneSlurmNodeRecords`` values (api/v1beta1/nodeset_types.go).
PRUNE_NEVER: Final = "Never"
PRUNE_NODE_NOT_FOUND: Final = "NodeNotFound"


def healthy(p: KubePod) -> bool:
    """Running, Ready and not terminating (slurm-operator podutils ``IsHealthy``)."""
    return p.phase == "Running" and p.ready and not p.deleting


def pod_info(ns: KubeNodeSet, p: KubePod) -> PodInfo:
    """The PodInfo 1.x writes for pod ``p`` of NodeSet ``ns``."""
    return PodInfo(
        namespace=p.namespace,
        pod_name=p.name,
        node=p.node_name,
        nodeset_name=ns.name,
        nodeset_uid=ns.uid,
    )


def pod_info_actions(
    ns: KubeNodeSet, p: KubePod, node: SlurmNode | None, cluster: str
) -> list[AnyAction]:
    """Rule 1: a :class:`SetSlurmNodePodInfo` when healthy ``p``'s node comment differs."""
    if node is None or not healthy(p):
        return []
    want = pod_info(ns, p)
    if (podinfo.parse(node.comment) or PodInfo()) == want:
        return []
    return [SetSlurmNodePodInfo(cluster=cluster, node=node.key, info=want)]


def wanted_features(kube_node: KubeNode) -> tuple[str, ...]:
    """The ``k8s/`` features ``kube_node``'s annotation asks for (rule 2), sorted."""
    raw = kube_node.annotations.get(wellknown.ANNOTATION_NODE_FEATURES_SPEC, "")
    values = sorted({v.strip() for v in raw.split(",") if v.strip()})
    return tuple(wellknown.NODE_FEATURE_PREFIX + v for v in values)


def replace_owned(current: tuple[str, ...], prefix: str, wanted: tuple[str, ...]) -> list[str]:
    """``current`` with its ``prefix`` features replaced by ``wanted``, sorted and
    de-duplicated (slurmcontrol.go ``replaceFeatureNamespace``)."""
    kept = [f for f in current if not f.startswith(prefix)]
    return sorted({*kept, *wanted})


def feature_actions(
    kube_node: KubeNode | None, node: SlurmNode | None, cluster: str
) -> list[AnyAction]:
    """Rule 2: a :class:`SetSlurmNodeOwnedFeatures` when the ``k8s/`` features change."""
    if kube_node is None or node is None:
        return []
    prefix = wellknown.NODE_FEATURE_PREFIX
    wanted = wanted_features(kube_node)
    same = set(replace_owned(node.features, prefix, wanted)) == set(node.features)
    active = node.active_features
    if active is not None:
        same = same and set(replace_owned(active, prefix, wanted)) == set(active)
    if same:
        return []
    return [
        SetSlurmNodeOwnedFeatures(cluster=cluster, node=node.key, prefix=prefix, features=wanted)
    ]


def topology_actions(
    p: KubePod, kube_node: KubeNode | None, node: SlurmNode | None, cluster: str
) -> tuple[list[AnyAction], str]:
    """Rule 3: the pod annotation and Slurm topology updates, and a note when Slurm cannot
    take the topology (``""`` otherwise)."""
    if kube_node is None:
        return [], ""
    spec = kube_node.annotations.get(wellknown.ANNOTATION_TOPOLOGY_SPEC, "")
    out: list[AnyAction] = []
    current = p.annotations.get(wellknown.ANNOTATION_TOPOLOGY_SPEC)
    # Absent reads as empty (the downward API gives "" for a missing annotation): no empty
    # annotation is written onto every pod of a cluster without topology.
    if current != spec and not (current is None and spec == ""):
        ref = PodRef.of(p)
        out.append(
            SetPodAnnotation(pod=ref, annotation=wellknown.ANNOTATION_TOPOLOGY_SPEC, value=spec)
        )
    if node is None or (node.topology or "") == spec:
        return out, ""
    if node.topology is None:
        return out, f"{node.key}: Slurm's REST API here does not take a topology"
    out.append(UpdateSlurmNodeTopology(cluster=cluster, node=node.key, topology=spec))
    return out, ""


def unregistered(
    p: KubePod, node: SlurmNode | None, min_ready_s: int, now: float, *, slurm_listed: bool
) -> float | None:
    """Rule 4: ``0.0`` when ``p`` is to be deleted as never registered, the seconds left
    before it may be when it is waiting for the grace, ``None`` when the rule does not
    apply (its node is known, the pod is not healthy, or no complete listing)."""
    if node is not None or not slurm_listed or not healthy(p) or p.ready_since <= 0:
        return None
    left = p.ready_since + max(0, min_ready_s) + REGISTER_GRACE_S - now
    return max(0.0, left)


def unregistered_delete(p: KubePod, cluster: str) -> DeleteNodeSetPod:
    """The deletion of rule 4 (the effector re-reads the Slurm node first)."""
    return DeleteNodeSetPod(
        pod=PodRef.of(p),
        cluster=cluster,
        slurm_node=p.name,
    )


def is_record_of(node: SlurmNode, ns: KubeNodeSet) -> PodInfo | None:
    """The PodInfo of ``node`` when it names NodeSet ``ns`` and a pod (rule 5's
    ownership; 1.x ``GetDefunctNodesForNodeSet``), else ``None``."""
    info = podinfo.parse(node.comment)
    if (
        info is None
        or info.namespace != ns.namespace
        or not info.pod_name
        or info.nodeset_name != ns.name
        or not info.nodeset_uid
        or info.nodeset_uid != ns.uid
    ):
        return None
    return info


def daemonset_hostname(kube_node: KubeNode) -> str:
    """The hostname a DaemonSet-mode slurmd pod takes on ``kube_node`` (utils.go
    ``GetDaemonSetPodHostname``)."""
    override = kube_node.annotations.get(wellknown.ANNOTATION_NODE_HOSTNAME_OVERRIDE, "")
    return override or kube_node.key.partition(".")[0]


def prune_actions(
    ns: KubeNodeSet,
    records: tuple[SlurmNode, ...],
    live_pods: frozenset[str],
    kube_nodes: dict[str, KubeNode],
    cluster: str,
    *,
    listed: bool,
) -> tuple[list[tuple[PruneSlurmNodeRecord, str]], list[str]]:
    """Rule 5: the prunes, each with its Event's message, and a note per record kept.

    ``records``: Slurm nodes whose comment may name ``ns``; ``live_pods``: the pod keys
    (``namespace/name``) of those records that exist; ``kube_nodes``: the Kubernetes nodes
    the records name that exist; ``listed``: complete listings of pods, nodes and Slurm."""
    if ns.prune_slurm_node_records != PRUNE_NODE_NOT_FOUND or ns.scaling_mode != "DaemonSet":
        return [], []
    if not listed:
        return [], ["no complete listing of pods, nodes and Slurm: no record pruned"]
    ref = NodeSetRef(namespace=ns.namespace, name=ns.name, uid=ns.uid)
    out: list[tuple[PruneSlurmNodeRecord, str]] = []
    notes: list[str] = []
    for node in records:
        info = is_record_of(node, ns)
        if info is None or not (node.has("DOWN") and node.has("NOT_RESPONDING")):
            continue
        if f"{info.namespace}/{info.pod_name}" in live_pods:
            continue
        if not info.node:
            notes.append(f"{node.key}: its PodInfo names no Kubernetes node; kept")
            continue
        kube = kube_nodes.get(info.node)
        if kube is not None and daemonset_hostname(kube) == node.key:
            notes.append(f"{node.key}: Kubernetes node {info.node} still maps to it; kept")
            continue
        if "DYNAMIC_NORM" not in node.state or node.busy:
            notes.append(f"{node.key}: not a dynamic idle node; kept")
            continue
        prune = PruneSlurmNodeRecord(cluster=cluster, node=node.key, nodeset=ref, pod=info.pod_name)
        out.append(
            (
                prune,
                f"Deleted defunct Slurm node {node.key}: backing Pod "
                f"{info.namespace}/{info.pod_name} is gone and Kubernetes node {info.node} "
                "no longer maps to its Slurm node",
            )
        )
    return out, notes
