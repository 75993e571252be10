"""What re-decides a pod group in ``placement`` (``ReconcilerSpec.keys``) and what it reads
of a trigger (``ReconcilerSpec.reads``): a change re-decides only the groups it can move
(issue 30: a pending queue of 10,000 jobs costs nothing while nothing changes)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reconcilers import _dra, _feasible, _nodes, _pods
from reconcilers.base import ChangedKeysOf, Context, Index, KeysOf, Store
from reconcilers.placement._common import live
from reconcilers.placement._view import PENDING_QUEUE
from schemas import events, wellknown
from schemas.subjects import slurm_source


def group_of_pod(event: events.KubePod, store: Store, ctx: Context) -> Iterable[str]:
    """The pod's group — unless the pod ended or is going (Succeeded, Failed, being deleted,
    a tombstone) and no pod of ours in its group is live any more: placement has nothing
    to place there (``nothing_live``), and ``workload`` cleans up after the group. A group
    with another live pod is decided again (a Job's retry needs a new job, not the ended
    pod's). Tombstones keep labels, owner and schedulerName, so they still name their
    group."""
    if event.scheduler_name != ctx.scheduler_name:
        return []
    group = _pods.resolve_group(event, store, ctx.cluster)
    if (event.deleted or not live(event)) and not any(
        live(p) and p.scheduler_name == ctx.scheduler_name
        for p in _pods.pods_of(group, store, ctx.cluster)
    ):
        return []
    return [group.key]


def groups_under(event: events.KubeWorkload, store: Store, ctx: Context) -> Iterable[str]:
    return _pods.groups_under(event, store, ctx.cluster)


def after_job(event: events.SlurmJob, store: Store, ctx: Context) -> Iterable[str]:
    """The job's own group, and — when the job is not (or no longer) pending — the groups
    whose jobs wait in its partition among the first ``wellknown.QUEUE_POSITION_CAP``: one
    left the queue ahead of them, so their place moved. Only the first of that partition's
    pending jobs are read (:data:`reconcilers.placement._view.PENDING_QUEUE`)."""
    keys = _pods.group_of_job(event, store, ctx)
    if event.base_state == "PENDING" or not event.partition:
        return keys
    if event.cluster and event.cluster != ctx.cluster:
        return keys
    found = set(keys)
    # Only the places told exactly can move (wellknown.QUEUE_POSITION_CAP): with 10,000 jobs
    # queued, a job starting looks at 100 groups, not 10,000 — read in queue order from the
    # store's index (not a pass over the partition) — and re-decides only those whose pods'
    # message is due for a rewrite (wellknown.pending_rewrite_due).
    ranked = store.by_index(
        PENDING_QUEUE, (event.source, event.partition), limit=wellknown.QUEUE_POSITION_CAP
    )
    for place, j in enumerate(ranked, 1):
        key = _pods.group_key_of_marker(j.comment)
        if key and key not in found and _place_due(key, j, place, store, ctx):
            found.add(key)
    return sorted(found)


def _place_due(key: str, job: events.SlurmJob, place: int, store: Store, ctx: Context) -> bool:
    """Whether a waiting pod of the group would be told a new queue place: its
    ``PodScheduled=False`` message (``SlurmJobPending``) is due for a rewrite to ``place``
    (:func:`reconcilers.placement.bind.not_running` writes it), or it has none yet. A
    heterogeneous job, whose pods carry its leader's place, is always re-decided, and so is
    a group none of whose waiting pods is labelled with the job yet (it is being marked).

    The pods are read by their job-id label (one index lookup), not by resolving the
    group's members: this runs for up to ``wellknown.QUEUE_POSITION_CAP`` groups on every
    job leaving a queue, and resolving them was 8 % of the bridge's CPU at 200 pods/s
    (issue 30). A pod of another cluster carrying the same job id can only add a decide."""
    if _pods.parse_group_key(key) is None or job.het_job_ids:
        return True
    wanted = wellknown.pending_message(job.state_reason, place, job.partition)
    waiting = False
    for p in store.by_label(events.KubePod, wellknown.LABEL_SLURM_JOBID, job.key):
        if p.scheduler_name != ctx.scheduler_name or not live(p) or p.node_name:
            continue
        waiting = True
        said = p.condition(wellknown.CONDITION_POD_SCHEDULED)
        if said is None or said.reason != wellknown.REASON_SLURM_JOB_PENDING:
            return True
        if wellknown.pending_rewrite_due(said.message, wanted):
            return True
    return not waiting


def after_partition(_event: events.SlurmPartition, store: Store, ctx: Context) -> Iterable[str]:
    # A partition appearing may unblock a group still without a job.
    return waiting_groups(store, ctx)


def after_listing(event: events.KubeListed, store: Store, ctx: Context) -> Iterable[str]:
    # A complete PodGroup list tells which pods name a PodGroup that does not exist.
    return waiting_groups(store, ctx) if event.resource == _pods.PODGROUPS else []


def after_node(event: events.KubeNode, store: Store, ctx: Context) -> Iterable[str]:
    # A node cordoned, uncordoned, Ready or not: the exclusions of pending jobs follow.
    return pending_groups(store, ctx, near=event.key)


def after_claim(event: events.KubeResourceClaim, store: Store, ctx: Context) -> Iterable[str]:
    # A claim made from a template, or allocated by us: its pod's group binds on.
    keys = set()
    if event.owner is not None and event.owner.kind == "Pod":
        pod = store.get(events.KubePod, f"{event.namespace}/{event.owner.name}")
        if pod is not None and pod.scheduler_name == ctx.scheduler_name:
            keys.add(_pods.resolve_group(pod, store, ctx.cluster).key)
    for c in event.reserved_for:
        pod = store.get(events.KubePod, f"{event.namespace}/{c.name}")
        if pod is not None and pod.scheduler_name == ctx.scheduler_name:
            keys.add(_pods.resolve_group(pod, store, ctx.cluster).key)
    return sorted(keys)


def after_slice(
    _event: events.KubeResourceSlice | events.KubeDeviceClass, store: Store, ctx: Context
) -> Iterable[str]:
    # A node's devices appearing may let pods waiting for DRA devices bind.
    keys = {
        _pods.resolve_group(p, store, ctx.cluster).key
        for p in store.values(events.KubePod)
        if p.scheduler_name == ctx.scheduler_name
        and live(p)
        and not p.node_name
        and _dra.needs_dra(p)
    }
    return sorted(keys)


def after_usage(event: events.KubeNodeUsage, store: Store, ctx: Context) -> Iterable[str]:
    # A node filling up or freeing: the exclusions of pending jobs follow.
    return pending_groups(store, ctx, near=event.key)


def usage_changed(
    before: object, after: object, event: events.KubeNodeUsage, store: Store, ctx: Context
) -> Iterable[str]:
    """:func:`after_usage` when the parts read before and now (:func:`usage_read`) are
    known (``ReconcilerSpec.changed``): a change of the node's peers alone — a pod binding
    there or leaving, the usual change — moves only the pending groups InterPodAffinity reads
    peers for, those with a live unbound pod asking for pod (anti-)affinity. Any other
    change (resources not held by our allocations, host ports, a peer's required
    anti-affinity, which every pod must respect) moves every pending group near the node
    (kube-scheduler's InterPodAffinity plugin, ``pkg/scheduler/framework/plugins/
    interpodaffinity/filtering.go``: a pod without affinity terms is checked only against
    existing pods' anti-affinity)."""
    assert isinstance(before, tuple) and isinstance(after, tuple)
    if before[:-1] != after[:-1] or _anti(before[-1]) != _anti(after[-1]):
        return pending_groups(store, ctx, near=event.key)
    # A peer change moves only the groups reading peers: found from the few pods with pod
    # (anti-)affinity terms (PEER_READERS) before the pending jobs are read at all — with
    # every placed pod a usage change, reading the queue per change made its cost grow with
    # the queue's length (issue 30: 8 % of the CPU at 200 pods/s).
    readers = _peer_reading_groups(store, ctx)
    if not readers:
        return []
    return [key for key in pending_groups(store, ctx, near=event.key) if key in readers]


def _anti(peers: tuple[events.PeerPod, ...]) -> tuple[events.PeerPod, ...]:
    return tuple(p for p in peers if p.anti_affinity)


def _reads_peers(p: events.KubePod) -> bool | None:
    return True if (p.pod_affinity or p.pod_anti_affinity) and not p.node_name else None


#: The unbound pods with pod affinity or anti-affinity terms: the only pods whose
#: eligibility reads a node's peers (kube-scheduler's InterPodAffinity).
PEER_READERS = Index("unbound pods with pod (anti-)affinity terms", events.KubePod, _reads_peers)


def _peer_reading_groups(store: Store, ctx: Context) -> set[str]:
    """The groups with a live unbound pod of ours with pod affinity or anti-affinity terms."""
    return {
        _pods.resolve_group(p, store, ctx.cluster).key
        for p in store.by_index(PEER_READERS, True)
        if live(p) and p.scheduler_name == ctx.scheduler_name
    }


def usage_read(event: events.KubeNodeUsage) -> object:
    """What placement reads of a node's usage when it triggers (``ReconcilerSpec.reads``):
    the part requested by pods *not* of our Slurm allocations, the host ports and the peers.
    A usage trigger only re-decides pending groups, whose eligibility ignores our own
    allocations' pods (:func:`reconcilers._feasible.without_bridge`, Slinky slurm-bridge 1.3
    eligibility.go): so a pod of ours binding or ending re-decides no pending group at all —
    with 10,000 jobs queued, that was 10,000 decides per bind (issue 30, item 4)."""
    own = _feasible.without_bridge(event)
    assert own is not None
    return (
        own.cpu_millis,
        own.memory_bytes,
        own.pods,
        sorted(own.extended.items()),
        own.host_ports,
        event.peers,
    )


def pending_groups(store: Store, ctx: Context, near: str = "") -> list[str]:
    """The groups whose jobs of ours are pending — with ``near`` (a Kubernetes node name),
    only those in a partition holding that node's Slurm node: a job's exclusions name only
    nodes of its partitions, so nothing else on that node can move them (no partition
    observed yet: every pending job). A node in no partition concerns no pending job (with
    10,000 jobs queued, every pod binding re-decided all of them: issue 30, item 4)."""
    source = slurm_source(ctx.cluster)
    parts: set[str] | None = None
    known = list(store.values(events.SlurmPartition, source)) if near else []
    if known:
        node = store.get(events.KubeNode, near)
        slurm = _nodes.slurm_name_of(node) if node is not None else near
        parts = {p.key for p in known if slurm in p.nodes}
        if not parts:
            return []
    keys = set()
    # The pending jobs are read a partition at a time (PENDING_BY_PARTITION): a node outside
    # the queue's partition (a pod of ours binding in a free partition) reads none of the
    # queue's jobs — a pass over them cost 4 ms per usage change behind 10,000 jobs.
    for value in store.index_values(PENDING_BY_PARTITION):
        assert isinstance(value, tuple)
        src: str = value[0]
        partition: str = value[1]
        if src != source:
            continue
        if parts is not None and partition and parts.isdisjoint(partition.split(",")):
            continue
        for j in store.by_index(PENDING_BY_PARTITION, value):
            if key := _pods.group_key_of_marker(j.comment):
                keys.add(key)
    return sorted(keys)


def _pending_by_partition(j: events.SlurmJob) -> tuple[str, str] | None:
    return (j.source, j.partition) if j.base_state == "PENDING" else None


#: The PENDING jobs by cluster source and partition as Slurm lists it (``""`` and
#: ``"a,b"`` included, unlike :data:`PENDING_QUEUE`): :func:`pending_groups` reads only the
#: partitions a node is in.
PENDING_BY_PARTITION = Index(
    "pending jobs by partition list", events.SlurmJob, _pending_by_partition
)


def waiting_groups(store: Store, ctx: Context) -> list[str]:
    keys = {
        _pods.resolve_group(p, store, ctx.cluster).key
        for p in store.values(events.KubePod)
        if p.scheduler_name == ctx.scheduler_name
        and live(p)
        and wellknown.LABEL_SLURM_JOBID not in p.labels
    }
    return sorted(keys)


def all_keys(store: Store, ctx: Context) -> Iterable[str]:
    """Every group with a live pod of ours."""
    return sorted(
        {
            _pods.resolve_group(p, store, ctx.cluster).key
            for p in store.values(events.KubePod)
            if p.scheduler_name == ctx.scheduler_name and live(p)
        }
    )


#: What re-decides a group (``ReconcilerSpec.keys``): each trigger kind → its groups.
KEYS: Mapping[type[events.Event], KeysOf] = {
    events.KubePod: group_of_pod,
    events.KubeWorkload: groups_under,
    events.SlurmJob: after_job,
    events.SlurmPartition: after_partition,
    events.KubeNode: after_node,
    events.KubeNodeUsage: after_usage,
    events.KubeListed: after_listing,
    events.KubeResourceClaim: after_claim,
    events.KubeResourceSlice: after_slice,
    # A DeviceClass's selector decides what its devices are: pods waiting may now fit.
    events.KubeDeviceClass: after_slice,
}

#: What placement reads of a trigger (``ReconcilerSpec.reads``): a pod starting (Pending →
#: Running, Ready) changes nothing here, nor a pod of ours on a node's usage.
#: Where placement knows what changed (``ReconcilerSpec.changed``).
CHANGED: Mapping[type[events.Event], ChangedKeysOf] = {events.KubeNodeUsage: usage_changed}

READS: Mapping[type[events.Event], Callable[[Any], object]] = {
    events.KubePod: _pods.group_read,
    events.KubeNodeUsage: usage_read,
}
