"""The NodeSet reconciler's view (what :func:`reconcilers.nodeset.decide` reads) and the
keys each event triggers.
"""

from __future__ import annotations

from collections.abc import Iterable

from reconcilers import cluster as cluster_rules
from reconcilers.base import Context, Store, kube_listed, slurm_listed
from reconcilers.nodeset import _daemon, _ident
from reconcilers.nodeset._common import (
    LABEL_INSTANCE,
    LABEL_NAME,
    NODES_LISTING,
    PODS_LISTING,
    SLURMD,
    View,
)
from reconcilers.nodeset.order import (
    node_deadlines,
)
from schemas import podinfo, wellknown
from schemas.events import (
    KubeNode,
    KubeNodeSet,
    KubePod,
    SlurmCluster,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
)
from schemas.subjects import KUBE_SOURCE, slurm_source


def _kube_nodes(
    store: Store, ns: KubeNodeSet | None, pods: tuple[KubePod, ...]
) -> dict[str, KubeNode]:
    """The Kubernetes nodes the decision reads: every node for DaemonSet mode and pins
    (rules 12 and 14), else the pods' nodes."""
    if ns is not None and (ns.scaling_mode == _daemon.DAEMONSET or ns.pin_to_node):
        return {k.key: k for k in store.values(KubeNode, KUBE_SOURCE)}
    return {
        p.node_name: k
        for p in pods
        if p.node_name and (k := store.get(KubeNode, p.node_name, KUBE_SOURCE)) is not None
    }


def _deadlines(store: Store, pods: tuple[KubePod, ...], source: str) -> dict[str, int]:
    """Rule 9's deadlines by pod name. Only RUNNING jobs end a deadline: read them through
    the projection's index on ``base_state`` (bounded by the nodes), not every job of the
    cluster — pending jobs can be 100,000 (bench/scale.py) and this runs on every NodeSet
    reconcile."""
    if not pods:
        return {}
    names = {_daemon.slurm_name(p): p.name for p in pods}
    running = (j for j in store.by_field(SlurmJob, "base_state", "RUNNING") if j.source == source)
    return {names[n]: end for n, end in node_deadlines(running, set(names)).items()}


def _records(
    store: Store, ns: KubeNodeSet | None, source: str, kube_nodes: dict[str, KubeNode]
) -> tuple[tuple[SlurmNode, ...], frozenset[str]]:
    """Rule 16's inputs: this NodeSet's Slurm node records and the keys of the pods they
    name that exist; the Kubernetes nodes they name are added to ``kube_nodes``. Read only
    for a DaemonSet-mode NodeSet that prunes ``NodeNotFound``."""
    if not (
        ns is not None
        and ns.scaling_mode == "DaemonSet"
        and ns.prune_slurm_node_records == _ident.PRUNE_NODE_NOT_FOUND
        and ns.uid
    ):
        return (), frozenset()
    # O(nodes of the cluster), only for NodeSets that prune: no index maps a comment
    # to its nodes. The uid test first keeps the JSON parsing to this NodeSet's records.
    records = tuple(
        sorted(
            (
                n
                for n in store.values(SlurmNode, source)
                if ns.uid in n.comment and _ident.is_record_of(n, ns) is not None
            ),
            key=lambda n: n.key,
        )
    )
    record_pods: set[str] = set()
    for n in records:
        info = _ident.is_record_of(n, ns)
        assert info is not None
        pod_key = f"{info.namespace}/{info.pod_name}"
        if store.get(KubePod, pod_key, KUBE_SOURCE) is not None:
            record_pods.add(pod_key)
        if info.node and (k := store.get(KubeNode, info.node, KUBE_SOURCE)) is not None:
            kube_nodes[info.node] = k
    return records, frozenset(record_pods)


def view(store: Store, key: str, ctx: Context) -> View | None:
    """The NodeSet, its pods (by the instance label, in its namespace) and their nodes."""
    ns = store.get(KubeNodeSet, key, KUBE_SOURCE)
    namespace, _, name = key.partition("/")
    pods = tuple(
        sorted(
            (
                p
                for p in store.by_label(KubePod, LABEL_INSTANCE, name)
                if p.namespace == namespace and p.labels.get(LABEL_NAME) == SLURMD
            ),
            key=lambda p: p.name,
        )
    )
    cluster = (ns.cluster_name if ns is not None else "") or ctx.cluster
    source = slurm_source(cluster)
    # Keyed by pod name: a DaemonSet pod's Slurm node has its hostname (_daemon.slurm_name).
    slurm = {
        p.name: n
        for p in pods
        if (n := store.get(SlurmNode, _daemon.slurm_name(p), source)) is not None
    }
    kube_nodes = _kube_nodes(store, ns, pods)
    deadlines = _deadlines(store, pods, source)
    records, record_pods = _records(store, ns, source, kube_nodes)
    return View(
        nodeset=ns,
        pods=pods,
        slurm=slurm,
        cluster=cluster,
        served=is_served(store, cluster, ctx),
        now=ctx.now,
        slurm_listed=slurm_listed(store, cluster),
        kube_nodes=kube_nodes,
        propagated_node_conditions=ctx.propagated_node_conditions,
        nodes_listed=kube_listed(store, NODES_LISTING),
        deadlines=deadlines,
        records=records,
        record_pods=record_pods,
        pods_listed=kube_listed(store, PODS_LISTING),
        partition=store.get(SlurmPartition, ns.name, source) if ns is not None else None,
    )


def is_served(store: Store, cluster: str, ctx: Context) -> bool:
    """The static cluster, or one a served Cluster object names."""
    return cluster == ctx.cluster or cluster in cluster_rules.served(store, ctx)


def _itself(event: KubeNodeSet, _store: Store, _ctx: Context) -> Iterable[str]:
    return [event.key]


def _served_by(event: SlurmCluster, store: Store, ctx: Context) -> Iterable[str]:
    """The NodeSets of the Cluster's name (serving it may have started or stopped)."""
    return sorted(
        n.key
        for n in store.values(KubeNodeSet, KUBE_SOURCE)
        if n.cluster_name == event.name and n.cluster_name != ctx.cluster
    )


def _of_slurmd_pod(event: KubePod, _store: Store, _ctx: Context) -> Iterable[str]:
    """A slurmd pod's NodeSet."""
    instance = event.labels.get(LABEL_INSTANCE)
    if event.labels.get(LABEL_NAME) == SLURMD and instance:
        return [f"{event.namespace}/{instance}"]
    return []


def _of_slurm_node(event: SlurmNode, store: Store, ctx: Context) -> Iterable[str]:
    """The NodeSet of the slurmd pod with the node's name, and the NodeSet its comment's
    PodInfo names (its pod may be gone: rule 13)."""
    keys = _of_slurm_node_name(event.key, event.source, store, ctx)
    info = podinfo.parse(event.comment)
    if info is not None and info.namespace and info.nodeset_name:
        key = f"{info.namespace}/{info.nodeset_name}"
        ns = store.get(KubeNodeSet, key, KUBE_SOURCE)
        if ns is not None and event.source == slurm_source(ns.cluster_name or ctx.cluster):
            keys.add(key)
    return sorted(keys)


def _of_slurm_node_name(name: str, source: str, store: Store, ctx: Context) -> set[str]:
    keys = set()
    named = [*store.by_field(KubePod, "name", name)]
    named += store.by_label(KubePod, wellknown.LABEL_POD_HOSTNAME, name)
    for p in named:
        if p.labels.get(LABEL_NAME) != SLURMD or LABEL_INSTANCE not in p.labels:
            continue
        if _daemon.slurm_name(p) != name:
            continue
        key = f"{p.namespace}/{p.labels[LABEL_INSTANCE]}"
        ns = store.get(KubeNodeSet, key, KUBE_SOURCE)
        if ns is None or source == slurm_source(ns.cluster_name or ctx.cluster):
            keys.add(key)
    return keys


def _of_job_nodes(event: SlurmJob, store: Store, ctx: Context) -> Iterable[str]:
    """The NodeSets of the slurmd pods a job runs (or ran) on: its deadline is theirs
    (rule 9)."""
    keys: set[str] = set()
    for name in event.nodes:
        keys.update(_of_slurm_node_name(name, event.source, store, ctx))
    return sorted(keys)


def _of_partition(event: SlurmPartition, store: Store, ctx: Context) -> Iterable[str]:
    """The NodeSets of the partition's name with ``spec.partition`` enabled (rule 19)."""
    return sorted(
        n.key
        for n in store.by_field(KubeNodeSet, "name", event.key)
        if n.partition_enabled and event.source == slurm_source(n.cluster_name or ctx.cluster)
    )


def _on_kube_node(event: KubeNode, store: Store, _ctx: Context) -> Iterable[str]:
    """The NodeSets with a slurmd pod on the node (its cordon, annotations or conditions
    may have changed: slurm-operator eventhandler/eventhandler_node.go), and every
    DaemonSet-mode or pinToNode NodeSet (the node may have become eligible or not: rules 12
    and 14)."""
    keys = {
        n.key
        for n in store.values(KubeNodeSet, KUBE_SOURCE)
        if n.scaling_mode == _daemon.DAEMONSET or n.pin_to_node
    }
    for p in store.by_field(KubePod, "node_name", event.key):
        instance = p.labels.get(LABEL_INSTANCE)
        if p.labels.get(LABEL_NAME) == SLURMD and instance:
            keys.add(f"{p.namespace}/{instance}")
    return sorted(keys)


def all_keys(store: Store, ctx: Context) -> Iterable[str]:
    """Every NodeSet."""
    del ctx
    return [n.key for n in store.values(KubeNodeSet, KUBE_SOURCE)]
