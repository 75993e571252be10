"""``placement``'s view: what :func:`reconcilers.placement.decide` reads of one pod group,
read by :func:`view` as a few named lookups — the group's pods, its Slurm job
(:func:`_find_job`), the job's nodes (:func:`_job_nodes`), what a submit needs of the cluster
(:func:`_eligibility`) and the pieces for DRA, handoffs and annotations."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import msgspec

from reconcilers import _devprofile, _dra, _feasible, _handoff, _hetjob, _nodes, _pods, _tenancy
from reconcilers.base import Context, Index, Store, slurm_listed
from reconcilers.placement._common import ENDED, ended, label_job_id, live
from schemas import wellknown
from schemas.events import (
    KubeDeviceClass,
    KubeNode,
    KubeNodeUsage,
    KubePod,
    KubeResourceClaim,
    KubeResourceSlice,
    KubeWorkload,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
)
from schemas.subjects import slurm_source
from schemas.tenancy import Tenancy

_T = TypeVar("_T")


class View(msgspec.Struct, frozen=True, kw_only=True):
    """One pod group: its pods (ours only), the root object, its Slurm job, and the cluster."""

    group: _pods.Group
    pods: tuple[KubePod, ...]
    workload: KubeWorkload | None
    job: SlurmJob | None
    #: The job named by the live pods' ``slurm-jobid`` label (None: the group has no job yet).
    job_id: int | None
    partitions: frozenset[str]
    #: Slurm node name → Kubernetes node name, for the job's nodes.
    node_map: dict[str, str]
    #: Slurm nodes (of ``cluster``) whose Kubernetes node is cordoned, not Ready, or
    #: infeasible for a live unbound pod, and unmapped nodes sharing a partition with mapped
    #: ones (only computed before submit and while our job is pending).
    excluded: tuple[str, ...]
    scheduler_name: str
    cluster: str
    default_partition: str = ""
    mcs_label: str = ""
    #: The reconcile's wall clock (epoch seconds), for the back-off after a refused submit.
    now: float = 0.0
    #: The log holds a complete, current listing of the cluster (base.slurm_listed).
    listed: bool = True
    #: A Workload API PodGroup's other annotation sources: its pods' controlling Job and
    #: the Workload it was made from (None: not that kind of group, or not observed).
    controller: KubeWorkload | None = None
    template_owner: KubeWorkload | None = None
    #: A ``basic`` Workload API PodGroup the pods name (its annotations configure the job).
    pod_group: KubeWorkload | None = None
    #: The components of the group's job when it is a heterogeneous job (None: not seen).
    het_jobs: tuple[SlurmJob | None, ...] = ()
    #: The job's 1-based place among the pending jobs of its partition (0: not pending, not
    #: ours, or no partition): :func:`queue_position`.
    queue_position: int = 0
    #: DRA: the ResourceClaims the group's pods name (``namespace/name`` → claim), and every
    #: allocated claim on the job's Kubernetes nodes (whose devices are taken).
    claims: dict[str, KubeResourceClaim] = {}
    #: DRA: Kubernetes node → its ResourceSlices, for the job's nodes (pods asking for DRA).
    slices: dict[str, tuple[KubeResourceSlice, ...]] = {}
    #: DRA: the DeviceClasses the group's pods ask for (name → class), matched to device
    #: profiles by selector (:mod:`reconcilers._devprofile`).
    device_classes: dict[str, KubeDeviceClass] = {}
    #: DRA: Slurm node → its applied device inventory (its ``Extra``, when slurmbridge wrote
    #: one), for the job's nodes: Slurm's GRES indices of a device profile map back to the
    #: devices through it (:func:`reconcilers._dra.devices_for`).
    applied: dict[str, str] = {}
    #: Nodes to exclude while the log holds no Slurm node of the cluster at all (before its
    #: first listing): a submit waits for the listing instead of dropping every exclusion.
    unverified: tuple[str, ...] = ()
    #: Kubernetes node name → its observation, for the nodes of :attr:`node_map`.
    kube_nodes: dict[str, KubeNode] = {}
    #: Kubernetes node name → what its pods request, for the nodes of :attr:`node_map`.
    usage: dict[str, KubeNodeUsage] = {}
    #: The largest node of each partition (:func:`reconcilers._pods.partition_node_sizes`),
    #: read before a submit from a complete listing: bounds ``cpu-per-task``/``mem-per-node``.
    node_sizes: _pods.NodeSizes = {}
    #: A CompositePodGroup gang's minimum pods (:func:`reconcilers._pods.composite_size`).
    composite_size: int = 0
    #: Slurm lost the job of the group's running pods and no job of ours backs them: the
    #: Slurm nodes they run on, which a new job must ask for exactly (``()``: not so).
    reback: tuple[str, ...] = ()
    #: Seconds running pods whose job Slurm lost may stay after Slurm refused their re-back
    #: job (Context.lost_job_grace_s).
    lost_job_grace_s: float = 60.0
    #: Tenancy (reconcilers._tenancy): the policy, whether the group's namespace is served,
    #: and the NodeSet slurmd pods with our schedulerName (never placed; left out of ``pods``).
    tenancy: Tenancy = Tenancy()
    served: bool = True
    slurmd: tuple[KubePod, ...] = ()
    #: Our pods bound to the job's Kubernetes nodes (node → pods), and their Slurm jobs by
    #: id: what a pod that does not fit may wait for (:mod:`reconcilers._handoff`).
    occupants: dict[str, tuple[KubePod, ...]] = {}
    occupant_jobs: dict[int, SlurmJob] = {}
    #: A bare pod's owner chain root (ReplicaSet → Deployment) and, when a link is not
    #: observed, why (:func:`reconcilers._pods.owner_root`).
    owner_root: KubeWorkload | None = None
    owner_missing: str = ""
    #: Partition → how many of its Slurm nodes are eligible (not excluded, and carrying the
    #: ``slurm_bridge_gres_compatible`` feature every job requires), ``""`` the default
    #: partition's; None when not counted (a job exists, or no complete listing).
    eligible: dict[str, int] | None = None
    #: Jobs require ``slurm_bridge_gres_compatible``
    #: (:func:`reconcilers._nodes.gres_feature_required`).
    gres_required: bool = True
    #: The same count with the nodes whose feature is on its way (:func:`_lacking_feature`);
    #: None when no node lacks it.
    eligible_soon: dict[str, int] | None = None
    #: Slurm nodes otherwise eligible that lack the feature for good (their Kubernetes node's
    #: ``SlinkySlurmGRESCompatible`` is False or Unknown, or they have no Kubernetes node).
    held_back: tuple[str, ...] = ()
    #: Partition → its nodes carrying the feature, whatever their state (``""``: the default
    #: partition's, or every partition's when none is flagged default): Slurm refuses a job
    #: none of them can satisfy (2029 / 2014); and the same with the feature on its way.
    #: None when no node lacks it.
    featured: dict[str, int] | None = None
    featured_soon: dict[str, int] | None = None


def _het_jobs(job: SlurmJob | None, store: Store, source: str) -> tuple[SlurmJob | None, ...]:
    """The components of a heterogeneous job, in offset order (``()`` for a plain job)."""
    if job is None or len(job.het_job_ids) < 2:
        return ()
    return tuple(store.get(SlurmJob, str(i), source) for i in job.het_job_ids)


def _het_component(store: Store, marker: str, source: str, leader: int) -> SlurmJob | None:
    """A live component of our heterogeneous job ``leader`` (``het_job_id``), found by the
    group's marker (an index lookup), or None."""
    for j in store.by_field(SlurmJob, "comment", marker):
        if (
            j.source == source
            and not j.deleted
            and j.het_job_id == leader
            and j.job_id != leader
            and j.base_state not in ENDED
        ):
            return j
    return None


def _slurm_nodes_of(pods: Iterable[KubePod], store: Store) -> tuple[str, ...]:
    """The Slurm nodes bound ``pods`` run on, sorted: the ``slinky.slurm.net/slurm-node``
    annotation written at bind time, else the Slurm name of the pod's Kubernetes node."""
    names = set()
    for p in pods:
        name = p.annotations.get(wellknown.ANNOTATION_SLURM_NODE, "")
        if not name:
            node = store.get(KubeNode, p.node_name)
            name = _nodes.slurm_name_of(node) if node is not None else p.node_name
        names.add(name)
    return tuple(sorted(names))


def _backs(job: SlurmJob, nodes: tuple[str, ...]) -> bool:
    """``job`` holds (RUNNING) or asks for every one of (PENDING, ``required_nodes``) the
    Slurm nodes ``nodes``: it backs pods running there."""
    want = set(nodes)
    if job.base_state == "RUNNING":
        return want <= set(job.nodes)
    return job.base_state == "PENDING" and want <= set(job.required_nodes)


def _backing_job(store: Store, marker: str, source: str, nodes: tuple[str, ...]) -> SlurmJob | None:
    """The newest live job of ours (``comment`` = ``marker``) that backs ``nodes``
    (:func:`_backs`): a re-back job submitted before the pods' label names it."""
    jobs = [
        j
        for j in store.by_field(SlurmJob, "comment", marker)
        if j.source == source and not j.deleted and _backs(j, nodes)
    ]
    return max(jobs, key=lambda j: j.job_id) if jobs else None


def _job_of_marker(store: Store, marker: str, source: str) -> SlurmJob | None:
    """The newest live job of ours whose ``comment`` is ``marker`` (the job's word): an index
    lookup, not a scan of every job, as this runs for every group without a job label."""
    jobs = [
        j
        for j in store.by_field(SlurmJob, "comment", marker)
        if j.source == source and not j.deleted and j.base_state not in ENDED
    ]
    # A heterogeneous job is its leader (the id its pods carry): a plain job or a leader
    # first, a component only while its leader is not seen yet.
    whole = [j for j in jobs if j.het_job_id in (0, j.job_id)]
    return max(whole or jobs, key=lambda j: j.job_id) if jobs else None


def queue_key(j: SlurmJob) -> tuple[int, int, int]:
    # slurmctld's job queue order (sort_job_queue2 in src/slurmctld/job_scheduler.c):
    # priority descending, then submit time, then job id. Unknown priority sorts last.
    return (-(j.priority or 0), j.submit_time, j.job_id)


def _pending_in(j: SlurmJob) -> tuple[str, str] | None:
    """A PENDING job's cluster source and partition (its group in :data:`PENDING_QUEUE`)."""
    return (j.source, j.partition) if j.base_state == "PENDING" and j.partition else None


#: The PENDING jobs of each partition of each cluster (``(source, partition)``), in
#: slurmctld's queue order (:func:`queue_key`): :func:`queue_position` is a bisection.
PENDING_QUEUE = Index("pending jobs by partition, in queue order", SlurmJob, _pending_in, queue_key)


def queue_position(store: Store, job: SlurmJob) -> int:
    """The 1-based place of PENDING ``job`` among the PENDING jobs of its partition (of its
    cluster), in the order slurmctld's scheduler tries them (``sort_job_queue2`` in
    ``src/slurmctld/job_scheduler.c``: priority descending, then submit time, then job id);
    0 when the job is not pending or names no partition. A place from
    ``wellknown.QUEUE_POSITION_CAP`` on is that cap ("100th or later").

    The jobs ahead are counted by the store's :data:`PENDING_QUEUE` index (O(log n)), not by
    reading the partition's jobs: with 10,000 jobs queued, each decide read all of them, and
    filling a queue of n cost O(n²) (issue 30, item 4). A job's key is its id, so no other
    job shares its :func:`queue_key`.
    """
    if job.base_state != "PENDING" or not job.partition:
        return 0
    ahead = store.rank(PENDING_QUEUE, (job.source, job.partition), queue_key(job))
    return min(ahead + 1, wellknown.QUEUE_POSITION_CAP)


class _Job(msgspec.Struct, frozen=True):
    """The group's job as :func:`_find_job` resolves it (View fields of the same names)."""

    job_id: int | None
    job: SlurmJob | None
    reback: tuple[str, ...] = ()


def _labelled_job(
    store: Store, group: _pods.Group, live_pods: list[KubePod], root: str, source: str
) -> _Job:
    """The job the live pods' ``slurm-jobid`` label names, when it is the group's.

    Only live pods name the group's job: a finished pod's label names a job that ended with
    it, and a pod created after it (a Job's retry) needs a new job, not that one."""
    marker = _pods.marker(group, root)
    job_id = label_job_id(live_pods)
    job = store.get(SlurmJob, str(job_id), source) if job_id is not None else None
    if job is None and job_id is not None:
        # A heterogeneous job lives on in its components once its leader (whose id the pods
        # carry) has ended and left the listing: not a lost job to re-back.
        job = _het_component(store, marker, source, job_id)
    if job is not None and not _pods.is_groups_job(job.comment, group, root):
        # The id names someone else's job (a user's, or another group's after slurmctld
        # restarted from older state and handed the id out again): "no job" for the group,
        # never adopted.
        job = None
    return _Job(job_id, job)


def _find_job(
    store: Store,
    group: _pods.Group,
    live_pods: list[KubePod],
    workload: KubeWorkload | None,
    source: str,
    listed: bool,
) -> _Job:
    """The group's job: the one its pods' label names (:func:`_labelled_job`); for running
    pods whose job Slurm lost, a job of ours backing their nodes or the nodes a new one must
    ask for (``reback``); for unbound pods whose job ended or is gone, none — then the live
    job of ours whose marker names the group, if any."""
    root = _pods.root_uid(group, live_pods, workload)
    marker = _pods.marker(group, root)
    found = _labelled_job(store, group, live_pods, root, source)
    job_id, job = found.job_id, found.job
    het_jobs = _het_jobs(job, store, source)
    bound = [p for p in live_pods if p.node_name]
    if job_id is not None and job is None and listed and bound:
        # Slurm lost the job of running pods (a complete listing lacks it, or the id is
        # another's): a job of ours that already backs their nodes, else a new one asking
        # for exactly those nodes (:func:`reconcilers.placement.submit.reback`).
        nodes = _slurm_nodes_of(bound, store)
        job = _backing_job(store, marker, source, nodes)
        if job is None:
            return _Job(None, None, nodes)
        return _Job(job.job_id, job)
    if (
        job_id is not None
        and not bound
        and ((job is None and listed) or ended(job))
        # A heterogeneous job whose leader ended lives on while a component does.
        and not (het_jobs and _hetjob.live(het_jobs))
    ):
        # Slinky treats a label naming a job that ended or that Slurm no longer has as no
        # job (an administrator scancel-ed the pending placeholder, slurmctld lost it): take
        # the live job of ours whose marker names the group, if any, else submit again at
        # once. A job merely too new to be listed yet is found again by the submit, which
        # looks in Slurm for the marker first.
        job_id, job = None, None
    if job_id is None and listed and live_pods:
        job = _job_of_marker(store, marker, source)
        # A heterogeneous job's pods carry its leader's id, whichever component is seen.
        job_id = (job.het_job_id or job.job_id) if job is not None else None
    return _Job(job_id, job)


def _job_nodes(
    store: Store, job: SlurmJob | None, het_jobs: tuple[SlurmJob | None, ...]
) -> tuple[dict[str, str], dict[str, KubeNode], dict[str, KubeNodeUsage]]:
    """The job's Slurm nodes (every component's) mapped to Kubernetes nodes, and those
    nodes' observations and usage (View ``node_map``, ``kube_nodes``, ``usage``)."""
    node_map: dict[str, str] = {}
    kube_nodes: dict[str, KubeNode] = {}
    usage: dict[str, KubeNodeUsage] = {}
    if job is None:
        return node_map, kube_nodes, usage
    for slurm_name in [n for j in het_jobs or (job,) if j is not None for n in j.nodes]:
        keys = _nodes.kube_keys_for_slurm(slurm_name, store)
        if keys:
            node_map[slurm_name] = min(keys)
    for name in node_map.values():
        if (node := store.get(KubeNode, name)) is not None:
            kube_nodes[name] = node
        if (used := store.get(KubeNodeUsage, name)) is not None:
            usage[name] = used
    return node_map, kube_nodes, usage


class _Eligibility(msgspec.Struct, frozen=True, kw_only=True):
    """What a submit, or a pending job's exclusions, needs of the cluster (the View fields
    of the same names); empty when neither is to be decided."""

    partitions: frozenset[str] = frozenset()
    excluded: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()
    node_sizes: _pods.NodeSizes = {}
    eligible: dict[str, int] | None = None
    eligible_soon: dict[str, int] | None = None
    held_back: tuple[str, ...] = ()
    featured: dict[str, int] | None = None
    featured_soon: dict[str, int] | None = None


def _unusable(store: Store, source: str, live_pods: list[KubePod]) -> set[str]:
    """The Slurm names of the Kubernetes nodes cordoned, not Ready, or infeasible for a live
    unbound pod, and of the Slurm nodes with no Kubernetes node in a partition they share
    with Kubernetes nodes.

    Every submit decide asks this of every node; the answers are kept with the store
    (:meth:`Store.cache`) while what they were read from stands: a node's feasibility per pod
    shape until its ``KubeNode`` or ``KubeNodeUsage`` observation is replaced, the Slurm nodes
    without a Kubernetes node until a ``SlurmPartition`` or ``KubeNode`` observation arrives
    (py-spy at 200 pods/s on 200 nodes: ``_unusable`` was 5 % of the bridge's samples)."""
    world = _world(store, live_pods)
    shapes = _distinct_shapes(live_pods, world)
    if world is None:
        unusable = set(_unusable_nodes(store, shapes).values())
    else:
        # Pod (anti-)affinity reads every node and its peers: nothing to key an answer by.
        unusable = set()
        for n in store.values(KubeNode):
            usage = store.get(KubeNodeUsage, n.key)
            if _node_unusable(n, usage, shapes, None, world):
                unusable.add(_nodes.slurm_name_of(n))
    unusable.update(_unmapped(store, source))
    return unusable


def _node_unusable(
    n: KubeNode,
    usage: KubeNodeUsage | None,
    shapes: list[tuple[_Shape, KubePod]],
    memo: list[_NodeAnswers] | None,
    world: _feasible.World | None,
) -> bool:
    """Cordoned, not Ready, or infeasible for one of ``shapes``."""
    if n.unschedulable or not n.ready:
        return True
    if not shapes:
        return False
    if memo is None:
        return any(_feasible.eligible(p, n, usage, world) is not None for _, p in shapes)
    return _memo_infeasible(memo, n, usage, shapes)


class _Unusable(msgspec.Struct):
    """The unusable nodes for one set of pod shapes, and the store's counts they are
    current at (``Store.changes`` of ``KubeNode`` and of ``KubeNodeUsage``)."""

    stamp: tuple[int, int]
    nodes: dict[str, str]  # node key → its Slurm name


def _unusable_nodes(store: Store, shapes: list[tuple[_Shape, KubePod]]) -> dict[str, str]:
    """The Kubernetes nodes (key → Slurm name) cordoned, not Ready or infeasible for one of
    ``shapes`` (no pod affinity to check), kept per shape set (store cache
    ``placement.unusable``) and brought up to date from the nodes and usages that changed
    since (``Store.changed_since``): every bind changes a node's usage, and reading all nodes
    at each submit decide was 3.5 % of the bridge's samples at 200 pods/s on 200 nodes."""
    kept = store.cache("placement.unusable")
    if len(kept) > UNUSABLE_SETS_MAX:
        kept.clear()
    key = tuple(shape for shape, _ in shapes)
    stamp = (store.changes(KubeNode), store.changes(KubeNodeUsage))
    state: _Unusable | None = kept.get(key)
    if state is not None and state.stamp == stamp:
        return state.nodes
    memo = _infeasible_memo(store, shapes)
    if state is not None:
        nodes = store.changed_since(KubeNode, state.stamp[0])
        usages = store.changed_since(KubeNodeUsage, state.stamp[1])
        if nodes is None or usages is None:
            state = None
        else:
            for name in {*nodes, *usages}:
                n = store.get(KubeNode, name)
                state.nodes.pop(name, None)
                if n is not None and _node_unusable(
                    n, store.get(KubeNodeUsage, name), shapes, memo, None
                ):
                    state.nodes[name] = _nodes.slurm_name_of(n)
            state.stamp = stamp
    if state is None:
        # Asked first, so the store keeps the keys that change from now on.
        store.changed_since(KubeNode, stamp[0])
        store.changed_since(KubeNodeUsage, stamp[1])
        state = kept[key] = _Unusable(stamp=stamp, nodes={})
        for n in store.values(KubeNode):
            if _node_unusable(n, store.get(KubeNodeUsage, n.key), shapes, memo, None):
                state.nodes[n.key] = _nodes.slurm_name_of(n)
    return state.nodes


#: Shape sets whose unusable nodes are kept (``_unusable_nodes``): past this many, all are
#: dropped (the sets of groups long gone would otherwise stay).
UNUSABLE_SETS_MAX = 1_000


#: Kept node answers per pod shape (``_infeasible_memo``): past this many, all are dropped
#: (shapes of groups long gone would otherwise stay).
INFEASIBLE_MEMO_MAX = 50_000

_Shape = tuple[object, ...]
#: Node name → (the KubeNode and KubeNodeUsage observations read, whether infeasible).
_NodeAnswers = dict[str, tuple[KubeNode, KubeNodeUsage | None, bool]]


def _infeasible_memo(store: Store, shapes: list[tuple[_Shape, KubePod]]) -> list[_NodeAnswers]:
    """Per shape of ``shapes``, its kept node answers (store cache ``placement.infeasible``)."""
    memo = store.cache("placement.infeasible")
    if sum(len(v) for v in memo.values()) > INFEASIBLE_MEMO_MAX:
        memo.clear()
    return [memo.setdefault(shape, {}) for shape, _ in shapes]


def _memo_infeasible(
    memo: list[_NodeAnswers],
    node: KubeNode,
    usage: KubeNodeUsage | None,
    shapes: list[tuple[_Shape, KubePod]],
) -> bool:
    """Whether ``node`` is infeasible for some shape, from the kept answers where ``node``
    and ``usage`` are the very observations they were read from (identity: an observation
    is never changed in place, a change replaces it)."""
    for answers, (_, pod) in zip(memo, shapes, strict=True):
        kept = answers.get(node.key)
        if kept is not None and kept[0] is node and kept[1] is usage:
            bad = kept[2]
        else:
            bad = _feasible.eligible(pod, node, usage, None) is not None
            answers[node.key] = (node, usage, bad)
        if bad:
            return True
    return False


def _unmapped(store: Store, source: str) -> frozenset[str]:
    """The Slurm nodes of ``source`` with no Kubernetes node, in the partitions they share
    with Kubernetes nodes: a NodeSet's slurmd nodes and plain HPC nodes could be allocated
    there, and a pod can never be bound on them. Kept until a ``SlurmPartition`` or
    ``KubeNode`` observation arrives (store cache ``placement.unmapped``)."""
    stamp = (store.changes(SlurmPartition), store.changes(KubeNode))

    def derive() -> frozenset[str]:
        mapped: dict[str, bool] = {}
        for part in store.values(SlurmPartition, source):
            for name in part.nodes:
                if name not in mapped:
                    mapped[name] = bool(_nodes.kube_keys_for_slurm(name, store))
        found: set[str] = set()
        for part in store.values(SlurmPartition, source):
            if any(mapped[n] for n in part.nodes):
                found.update(n for n in part.nodes if not mapped[n])
        return frozenset(found)

    return _kept(store, "placement.unmapped", source, stamp, derive)


def _kept(
    store: Store, name: str, source: str, stamp: tuple[int, ...], derive: Callable[[], _T]
) -> _T:
    """``derive()`` for ``source``, kept in store cache ``name`` while ``stamp`` (the
    :meth:`Store.changes` counts of the kinds it is read from) stays the same."""
    memo = store.cache(name)
    kept = memo.get(source)
    if kept is not None and kept[0] == stamp:
        return kept[1]  # type: ignore[no-any-return]
    value = derive()
    memo[source] = (stamp, value)
    return value


def _node_sizes(store: Store, source: str) -> _pods.NodeSizes:
    """:func:`reconcilers._pods.partition_node_sizes`, kept until a ``SlurmPartition`` or
    ``SlurmNode`` observation arrives (store cache ``placement.node_sizes``). Why: it reads
    every node of every partition, and a pending group's decide asked for it each time —
    2 % of the bridge's CPU at 200 pods/s (py-spy, bench/workload.py). The dict kept is
    shared by the views it is given to; nothing writes to it."""
    stamp = (store.changes(SlurmPartition), store.changes(SlurmNode))
    return _kept(
        store,
        "placement.node_sizes",
        source,
        stamp,
        lambda: _pods.partition_node_sizes(store, source),
    )


def _counted(
    base: _Eligibility, store: Store, source: str, unusable: set[str], gres_required: bool
) -> _Eligibility:
    """``base`` with the eligible-node counts a submit checks (:func:`_eligible_counts`):
    without the unusable nodes and those lacking ``slurm_bridge_gres_compatible`` (when jobs
    require it), and — when some lack it — the same counts once the feature on its way has
    arrived, the nodes held back for good, and the nodes carrying it."""
    lacking, coming = _lacking_feature(store, source) if gres_required else (set(), set())
    eligible = _eligible_counts(store, source, unusable | lacking)
    if not lacking:
        return msgspec.structs.replace(base, eligible=eligible)
    return msgspec.structs.replace(
        base,
        eligible=eligible,
        eligible_soon=_eligible_counts(store, source, unusable | (lacking - coming)),
        held_back=tuple(sorted(lacking - coming - unusable)),
        featured=_eligible_counts(store, source, lacking, any_default=True),
        featured_soon=_eligible_counts(store, source, lacking - coming, any_default=True),
    )


def _eligibility(
    store: Store,
    source: str,
    live_pods: list[KubePod],
    found: _Job,
    pending_ours: bool,
    listed: bool,
    gres_required: bool,
) -> _Eligibility:
    """What a submit needs (no job yet), or a pending job of ours (its exclusions), or a
    re-back job (the partitions); nothing otherwise."""
    if not (found.reback or ((found.job_id is None or pending_ours) and live_pods)):
        return _Eligibility()
    partitions = frozenset(p.key for p in store.values(SlurmPartition, source))
    if found.reback:
        return _Eligibility(partitions=partitions)
    fresh = found.job_id is None and listed
    # Only names Slurm knows: slurmctld rejects a job whose excluded list names an unknown
    # node (ESLURM_INVALID_NODE_NAME), and Kubernetes nodes outside Slurm are never
    # allocated anyway.
    unusable = _unusable(store, source, live_pods)
    excluded = tuple(
        sorted(name for name in unusable if store.get(SlurmNode, name, source) is not None)
    )
    unverified: tuple[str, ...] = ()
    if unusable and not excluded and not listed and not any(store.values(SlurmNode, source)):
        # No Slurm node seen yet (the first listing is on its way): the names cannot be
        # checked, and dropping them all would submit with no exclusion at all. Wait.
        unverified = tuple(sorted(unusable))
    base = _Eligibility(
        partitions=partitions,
        excluded=excluded,
        unverified=unverified,
        node_sizes=_node_sizes(store, source) if fresh else {},
    )
    return _counted(base, store, source, unusable, gres_required) if fresh else base


def _applied(store: Store, source: str, node_map: dict[str, str], slices: object) -> dict[str, str]:
    """Slurm node → the device inventory slurmbridge applied to it (its ``Extra``), for the
    job's nodes when DRA slices are read."""
    return {
        n: sn.extra
        for n in (node_map if slices else ())
        if (sn := store.get(SlurmNode, n, source)) is not None
        and sn.extra.startswith(_devprofile.APPLIED_PREFIX)
    }


def _composite_size(group: _pods.Group, workload: KubeWorkload | None, store: Store) -> int:
    if workload is None or group.kind != _pods.KIND_COMPOSITE:
        return 0
    return _pods.composite_size(workload, store)


def _owner(
    store: Store, group: _pods.Group, found: _Job, live_pods: list[KubePod]
) -> tuple[KubeWorkload | None, str]:
    """A bare pod's owner chain root and why a link is missing, read before its submit."""
    if group.kind == "Pod" and found.job_id is None and live_pods:
        return _pods.owner_root(live_pods[0], store)
    return None, ""


def view(store: Store, key: str, ctx: Context) -> View | None:
    """Read the group's pods, root object, Slurm job and (when needed) the node map, the
    cluster's eligible nodes and the DRA objects: the lookups above in turn."""
    group = _pods.parse_group_key(key)
    if group is None:
        return None
    source = slurm_source(ctx.cluster)
    ours = [
        p
        for p in _pods.pods_of(group, store, ctx.cluster)
        if p.scheduler_name == ctx.scheduler_name
    ]
    pods = tuple(p for p in ours if not _tenancy.slurmd_pod(p))
    workload = store.get(KubeWorkload, group.root_key) if group.root_key else None
    live_pods = [p for p in pods if live(p)]
    listed = slurm_listed(store, ctx.cluster)
    found = _find_job(store, group, live_pods, workload, source, listed)
    job = found.job
    het_jobs = _het_jobs(job, store, source)
    node_map, kube_nodes, usage = _job_nodes(store, job, het_jobs)
    occupants, occupant_jobs = _occupants(store, ctx, job, node_map, source)
    owner_root, owner_missing = _owner(store, group, found, live_pods)
    claims, slices = _dra_view(store, pods, node_map, job)
    configuring = _pods.configuring_pod_group(group, pods, workload, store)
    pending_ours = (
        job is not None
        and job.base_state == "PENDING"
        and _pods.group_key_of_marker(job.comment) == group.key
    )
    gres_required = _nodes.gres_feature_required(store, ctx.cluster)
    cluster = _eligibility(store, source, live_pods, found, pending_ours, listed, gres_required)
    return View(
        group=group,
        pods=pods,
        workload=workload,
        job=job,
        job_id=found.job_id,
        partitions=cluster.partitions,
        node_map=node_map,
        excluded=cluster.excluded,
        scheduler_name=ctx.scheduler_name,
        cluster=ctx.cluster,
        default_partition=ctx.default_partition,
        mcs_label=ctx.mcs_label,
        now=ctx.now,
        listed=listed,
        controller=_pods.controller_of(group, list(pods), store),
        template_owner=configuring[1],
        pod_group=configuring[0],
        het_jobs=het_jobs,
        queue_position=queue_position(store, job) if job is not None and pending_ours else 0,
        claims=claims,
        slices=slices,
        device_classes=_device_classes(store, pods, claims),
        applied=_applied(store, source, node_map, slices),
        kube_nodes=kube_nodes,
        usage=usage,
        unverified=cluster.unverified,
        node_sizes=cluster.node_sizes,
        composite_size=_composite_size(group, workload, store),
        reback=found.reback,
        lost_job_grace_s=ctx.lost_job_grace_s,
        tenancy=ctx.tenancy,
        served=_tenancy.served(
            group.namespace, ctx.tenancy, ctx.managed_namespaces, selector=ctx.namespace_selector
        ),
        slurmd=tuple(p for p in ours if _tenancy.slurmd_pod(p)),
        eligible=cluster.eligible,
        gres_required=gres_required,
        eligible_soon=cluster.eligible_soon,
        held_back=cluster.held_back,
        featured=cluster.featured,
        featured_soon=cluster.featured_soon,
        owner_root=owner_root,
        owner_missing=owner_missing,
        occupants=occupants,
        occupant_jobs=occupant_jobs,
    )


def _occupants(
    store: Store, ctx: Context, job: SlurmJob | None, node_map: dict[str, str], source: str
) -> tuple[dict[str, tuple[KubePod, ...]], dict[int, SlurmJob]]:
    """Our pods bound to the RUNNING job's Kubernetes nodes under another Slurm job, and
    those jobs (:mod:`reconcilers._handoff`); empty otherwise."""
    if job is None or job.base_state != "RUNNING":
        return {}, {}
    occupants: dict[str, tuple[KubePod, ...]] = {}
    jobs: dict[int, SlurmJob] = {}
    for name in sorted(set(node_map.values())):
        found = tuple(
            sorted(
                (
                    p
                    for p in store.by_field(KubePod, "node_name", name)
                    if p.scheduler_name == ctx.scheduler_name
                    and _handoff.allocation_id(p) not in (0, job.job_id)
                ),
                key=lambda p: p.key,
            )
        )
        if found:
            occupants[name] = found
        for p in found:
            other = store.get(SlurmJob, str(_handoff.allocation_id(p)), source)
            if other is not None:
                jobs[other.job_id] = other
    return occupants, jobs


def _dra_view(
    store: Store, pods: tuple[KubePod, ...], node_map: dict[str, str], job: SlurmJob | None
) -> tuple[dict[str, KubeResourceClaim], dict[str, tuple[KubeResourceSlice, ...]]]:
    """The claims and slices :func:`reconcilers.placement.decide` needs for pods asking for
    DRA devices: the claims the unbound pods name (their GPUs size the job); once the job
    runs, also the claims holding devices on its nodes and those nodes' slices."""
    waiting = [p for p in pods if live(p) and not p.node_name and _dra.needs_dra(p)]
    claims: dict[str, KubeResourceClaim] = {}
    for p in waiting:
        names = [c.claim for c in p.claims if c.claim]
        if p.extended_claim:
            names.append(p.extended_claim)
        for name in names:
            claim = store.get(KubeResourceClaim, f"{p.namespace}/{name}")
            if claim is not None and not claim.deleted:
                claims[claim.key] = claim
    if not waiting or job is None or job.base_state != "RUNNING":
        return claims, {}
    nodes = set(node_map.values())
    uids = {p.uid for p in waiting}
    for claim in store.values(KubeResourceClaim):
        if claim.deleted:
            continue
        # Claims on the job's nodes hold devices; a pod's own extended-resource claim may
        # exist before the pod's status names it (the status write failed after the create).
        ours = claim.extended and claim.owner is not None and claim.owner.uid in uids
        if ours or (claim.allocated and claim.node in nodes):
            claims[claim.key] = claim
    slices = {
        n: tuple(
            sorted(
                (s for s in store.by_field(KubeResourceSlice, "node", n) if not s.deleted),
                key=lambda s: s.key,
            )
        )
        for n in sorted(nodes)
    }
    return claims, slices


def _device_classes(
    store: Store, pods: tuple[KubePod, ...], claims: dict[str, KubeResourceClaim]
) -> dict[str, KubeDeviceClass]:
    """The DeviceClasses the pods' extended resources and named claims ask for."""
    names = {r.device_class for p in pods for r in p.dra_requests}
    names.update(r.device_class for c in claims.values() for r in c.requests if r.device_class)
    found = {n: store.get(KubeDeviceClass, n) for n in sorted(names)}
    return {n: dc for n, dc in found.items() if dc is not None and not dc.deleted}


def _world(store: Store, live: list[KubePod]) -> _feasible.World | None:
    """Every Kubernetes node with its usage, when InterPodAffinity has something to check:
    an unbound pod of the group with pod (anti-)affinity, or a bound pod anywhere with
    anti-affinity (None otherwise: nothing to read)."""
    usages = {u.key: u for u in store.values(KubeNodeUsage)}
    asks = any(p.pod_affinity or p.pod_anti_affinity for p in live if not p.node_name)
    if not asks and not any(peer.anti_affinity for u in usages.values() for peer in u.peers):
        return None
    return [(n, usages.get(n.key)) for n in sorted(store.values(KubeNode), key=lambda n: n.key)]


def _distinct_shapes(
    live: list[KubePod], world: _feasible.World | None
) -> list[tuple[_Shape, KubePod]]:
    """One live unbound pod of the group per shape, with the shape: the fields Kubernetes'
    filters read (:func:`reconcilers._feasible.eligible`), and who the pod is and whom it
    wants near it when InterPodAffinity has something to check (``world``). Computed once
    per view, not once per node: the shapes are the same for every node."""
    seen: set[_Shape] = set()
    shapes: list[tuple[_Shape, KubePod]] = []
    for p in live:
        if p.node_name:
            continue
        shape = (
            tuple(sorted(p.node_selector.items())),
            p.node_affinity,
            p.toleration_specs,
            p.cpu_millis,
            p.memory_bytes,
            tuple(sorted(p.extended.items())),
            p.host_ports,
            (
                p.namespace,
                tuple(sorted(p.labels.items())),
                msgspec.json.encode((p.pod_affinity, p.pod_anti_affinity)),
            )
            if world is not None
            else None,
        )
        if shape not in seen:
            seen.add(shape)
            shapes.append((shape, p))
    return shapes


def _lacking_feature(store: Store, source: str) -> tuple[set[str], set[str]]:
    """The Slurm nodes of ``source`` whose active features lack ``slurm_bridge_gres_compatible``
    (which every job requires: Slurm never places it there), and of those the ones whose
    feature is on its way: their Kubernetes node's ``SlinkySlurmGRESCompatible`` is not False
    or Unknown, so ``node_register`` is putting it on (it does so for every compatible node)."""
    feature = wellknown.FEATURE_GRES_COMPATIBLE
    lacking: set[str] = set()
    coming: set[str] = set()
    for sn in store.values(SlurmNode, source):
        if sn.deleted:
            continue
        active = sn.active_features if sn.active_features is not None else sn.features
        if feature in active:
            continue
        lacking.add(sn.key)
        keys = _nodes.kube_keys_for_slurm(sn.key, store)
        kube = store.get(KubeNode, min(keys)) if keys else None
        if kube is None:
            continue
        cond = kube.condition(wellknown.CONDITION_SLURM_GRES_COMPATIBLE)
        if cond is None or cond.status == "True":
            coming.add(sn.key)
    return lacking, coming


def _eligible_counts(
    store: Store, source: str, unusable: set[str], *, any_default: bool = False
) -> dict[str, int]:
    """Partition → its Slurm nodes not in ``unusable`` (``""``: the default partition's;
    ``any_default``: every partition's when none is flagged default, as :func:`reconcilers.
    _pods.partition_node_sizes` reads a job that names none)."""
    counts: dict[str, int] = {}
    every: set[str] = set()
    for part in store.values(SlurmPartition, source):
        if part.deleted:
            continue
        usable = {name for name in part.nodes if name not in unusable}
        counts[part.key] = len(usable)
        every |= usable
        if part.is_default:
            counts[""] = len(usable)
    if any_default and counts and "" not in counts:
        counts[""] = len(every)
    return counts
