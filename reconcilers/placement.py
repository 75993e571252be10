"""``placement``: schedule pods through Slurm placeholder jobs (Slinky slurm-bridge scheduler
plugin).

A pod whose ``schedulerName`` is ours is never bound by Kubernetes' scheduler; instead its
group (see :mod:`reconcilers._pods`) becomes one Slurm job and Slurm decides where it runs:

* no job yet and every expected pod of the group exists ⇒ translate the group and submit a
  placeholder job (``EXTERNAL_JOB`` with ``admin_comment={"pods":[…]}`` on Slurm REST
  v0.0.43+, a sleeping batch job before), with the Slurm nodes (of this cluster) whose
  Kubernetes node is cordoned or not Ready as ``excluded_nodes`` (never ``required_nodes``:
  slurm-bridge #43), the Slurm nodes with no Kubernetes node that share a partition with
  Kubernetes nodes (a pod could never be bound there), and the Slurm nodes whose Kubernetes
  node is not eligible for ANY live unbound pod of the group by Kubernetes' own filters
  (:func:`reconcilers._feasible.eligible`: taints, node selector and required node affinity,
  host ports, required pod affinity and anti-affinity, every requested resource against
  allocatable less what the node's pods request — ``KubeNodeUsage`` — except what pods of
  our Slurm allocations hold: Slurm accounts for those, so a busy node stays eligible and a
  gang larger than the free nodes queues behind our running jobs; Slinky slurm-bridge 1.3
  eligibility.go). Fail closed:
  the pods are spread over the job's nodes by name, so each pod must fit every node it could
  get. (Slinky gets this from kube-scheduler, whose filters run before its plugin; we bind
  directly, so we apply them ourselves.) Each pod is checked alone; pods sharing a node are
  added up at bind time;
  the same action labels the pods ``scheduler.slinky.slurm.net/slurm-jobid``, adds the
  finalizer ``scheduler.slinky.slurm.net/finalizer`` and the managed-node toleration;
* fewer Slurm nodes of the job's partition remain eligible than the job needs
  (``min_nodes``), counted from a complete listing ⇒ nothing is submitted; each pod gets
  ``PodScheduled=False`` (reason :data:`INELIGIBLE`) and a Warning Event saying so (Slinky
  slurm-bridge 1.3 slurmbridge.go ``populateComponentWithFeasibleNodes``);
* nodes would be excluded but the log holds no Slurm node of the cluster yet (its first
  listing is on its way) ⇒ no submit yet: every exclusion would be dropped as unknown;
* the group cannot be translated, names a partition Slurm does not have, or asks (through
  ``cpu-per-task`` or ``mem-per-node``) more CPUs or memory than the largest node of its
  partition has — checked only once the log holds a complete Slurm listing, the submit
  waits for it — ⇒ no job; each pod gets ``PodScheduled=False`` (reason
  ``SlurmJobInvalid``) and a Warning Event naming the annotation and the reason — fixing the
  annotation re-triggers the group;
* tenancy (:mod:`reconcilers._tenancy`, settings ``$.tenancy``): the group's annotations
  name a Slurm user, group, account, QOS, partition or reservation its namespace's policy
  does not allow (or ``user-id``/``group-id`` without a policy) ⇒ no job; each pod gets
  ``PodScheduled=False``, reason ``SlurmPolicyDenied``, and a Warning Event naming the
  annotation and the policy. Otherwise a tenant's job carries its ``user_id``/``group_id``
  and its default account and partition. A pod of a namespace the bridge does not serve
  (``managedNamespaces``), and a NodeSet's slurmd pod, are left alone with one Warning
  Event (``SlurmBridgeNotServed``);
* Slurm refused the submit for good (the effector wrote ``PodScheduled=False``, reason
  ``SlurmJobRejected``, with Slurm's error and a Warning Event) ⇒ no new submit until
  :data:`RESUBMIT_AFTER_S` after that condition's ``lastTransitionTime``;
* a pod names a coscheduling PodGroup that a complete Kubernetes list lacks ⇒ after
  :data:`PODGROUP_GRACE_S` from the pod's creation, it is placed from its owner (its Job, or
  alone) with a Warning Event (Slinky slurm-bridge ``slurmjobir.TranslateToSlurmJobIR``); a
  PodGroup that is Running, Finished, Failed or Unknown ⇒ its pods are not placed again
  (Slinky ``PreFilterPodGroupCoscheduling``);
* the job is RUNNING with nodes ⇒ each unbound pod is annotated ``slinky.slurm.net/slurm-node``
  and bound (Binding subresource) to the Kubernetes node mapped from its Slurm node; pods are
  spread over the job's nodes in name order;
* ... unless, re-checked just before binding (and before any DRA claim) with
  :func:`reconcilers._feasible.fits` (the pods bound earlier in the same pass counted into
  the node's usage), a pod no longer fits
  its node (a taint added, a label removed, the node filled up since the submit): then no
  pod of the group is bound, the job is cancelled (``CancelSlurmJob``, only while its
  ``comment`` is the group's marker) and each such pod gets a Warning Event
  (:data:`INFEASIBLE`) naming the node and the reason; the cancelled job makes the pods'
  label stale, so the group is submitted again with the node excluded. The job is
  cancelled even when pods of the group are already bound: two shared gangs each holding
  what the other needs would otherwise never run (Slinky slurm-bridge 1.3 eligibility.go
  ``allocatedNodeWaitingForBridge``). The one wait is a *handoff*
  (:mod:`reconcilers._handoff`): the pod's only misfit is resources held by our pods of an
  ended Slurm job naming them, or of pods terminating, Succeeded or Failed — then the pod
  waits (looked at again every :data:`HANDOFF_RECHECK_S`) and the others are bound;
* a pod asking for DRA devices (``spec.resourceClaims``, or extended resources
  ``deviceclass.resource.kubernetes.io/<class>``) first gets its claims allocated to the
  devices of the GPUs and cores Slurm gave its job on that node (:mod:`reconcilers._dra`;
  Slinky slurm-bridge ``PreBind``): ``AllocateResourceClaim`` per claim, or
  ``CreateExtendedResourceClaim`` for the extended resources, before ``BindPod``; a claim
  still to be made from its template waits; devices Slurm's allocation cannot provide ⇒
  ``PodScheduled=False`` (reason ``DeviceAllocationFailed``) and a Warning Event, no bind;
* pods that joined after the job was submitted ⇒ labelled and finalized like the others;
* a Workload API PodGroup (``scheduling.k8s.io``) whose every live pod is bound under the
  group's RUNNING job, and whose ``PodGroupScheduled`` (v1alpha2) /
  ``PodGroupInitiallyScheduled`` (v1beta1) condition is not True yet ⇒ that condition is set
  True, reason ``Scheduled``, message ``Pod group admitted by <scheduler>`` (Slinky
  slurm-bridge podgroup_status.go ``markPodGroupScheduled``: kube-scheduler writes it when it
  admits a gang, so slurm-bridge must);
* the job is still PENDING and the nodes to exclude changed (a node cordoned or uncordoned
  since the submit) ⇒ the job's ``excluded_nodes`` are replaced (``POST job/{id}``);
* the job (ours) is PENDING ⇒ each live unbound pod says why: ``PodScheduled=False``, reason
  ``SlurmJobPending``, message Slurm's reason and the job's place in its partition's queue
  (``"Priority, 12th in partition gpu"``: :func:`queue_position`), written only when it
  differs from the pod's condition; a pod that had no ``SlurmJobPending`` condition before
  also gets a Normal Event ``SlurmJobPending`` (its first wait). Slinky's scheduler plugin
  leaves such pods with no word of why they wait (slurm-bridge #45: its PostFilter returns
  Success for a pending external job, internal/scheduler/plugins/slurmbridge/slurmbridge.go).
  When the job starts, the bind's Normal Event ``Scheduled`` says the job started, where,
  and after how long in the queue.

* the pods' label names a job a complete listing lacks, or one whose ``comment`` is not the
  group's marker (:func:`reconcilers._pods.is_groups_job`: a user's job, or another group's
  after slurmctld restarted from older state and handed the id out again) ⇒ no job: unbound
  pods are submitted again at once (the submit replaces the label; the other job is never
  adopted nor cancelled); pods already **running** are re-backed — a new placeholder job
  asking for exactly the Slurm nodes they run on (``required_nodes``, min = max nodes, no
  exclusions, the only ``required_nodes`` ever sent), with a Warning Event
  :data:`LOST` — unless a job of ours already holds or asks for those nodes, which the pods
  are relabelled to. ``workload`` deletes them only if that job has not started
  ``kube.lostJobGrace`` after its submit (docs/slurm.md, "When Slurm loses state").

The group's job is the one named by its *live* pods' ``slurm-jobid`` label: when every pod
that named a job has finished (a Job's failed pod) and a new pod appears (its retry), the new
pod gets a new job instead of joining the ended one.

Key: the group key (``namespace/Kind:name``). Triggers: KubePod, KubeWorkload (a Workload
API Workload or a Job also reaches the PodGroups whose annotations they carry), SlurmJob,
SlurmPartition (a partition appearing may unblock a group), KubeNode (the exclusions of pending
jobs), KubeNodeUsage (the exclusions of pending jobs: a node filling up or freeing),
KubeListed ``podgroups`` (pods naming a PodGroup that does not exist are placed alone),
KubeResourceClaim (its pod's group), KubeResourceSlice and KubeDeviceClass (groups with pods
waiting for devices);
a job of a partition leaving the queue (started or ended) also re-triggers the groups whose
jobs wait in that partition, so their queue place stays current.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

import msgspec

from reconcilers import _devprofile, _dra, _feasible, _handoff, _hetjob, _nodes, _pods, _tenancy
from reconcilers.base import NOTHING, Context, Decision, ReconcilerSpec, Store, slurm_listed
from schemas import wellknown
from schemas.actions import (
    AllocateResourceClaim,
    AnyAction,
    BindPod,
    CancelSlurmJob,
    ClaimRef,
    CreateExtendedResourceClaim,
    DeletePod,
    HetComponent,
    MarkPods,
    PodRef,
    SetJobExcludedNodes,
    SetPodCondition,
    SetPodGroupScheduled,
    SlurmJobSpec,
    SubmitSlurmJob,
)
from schemas.events import (
    KubeDeviceClass,
    KubeListed,
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

NAME = "placement"
ENDED = wellknown.JOB_ENDED_STATES
CONDITION: str = wellknown.CONDITION_POD_SCHEDULED
INVALID = wellknown.REASON_SLURM_JOB_INVALID
#: Condition (and first-wait Event) reason while the group's job waits in Slurm's queue.
PENDING = wellknown.REASON_SLURM_JOB_PENDING
#: Condition reason the Slurm effector writes when slurmrestd refuses a submit for good
#: (the token's user lacks a role, a job larger than its partition, an unknown account …).
REJECTED = wellknown.REASON_SLURM_JOB_REJECTED
#: Seconds before a refused group is submitted again: the refusal usually needs a person
#: (a role granted, an annotation fixed — which re-triggers at once through the pod), and a
#: permanent refusal must never become a submit loop.
RESUBMIT_AFTER_S = 300.0
#: PodGroup phases whose pods are not placed again, and the condition reason saying so.
PODGROUP_DONE = frozenset({"Running", "Finished", "Failed", "Unknown"})
PODGROUP_NOT_PENDING = "PodGroupNotSchedulable"
#: A CompositePodGroup tree kube-scheduler would refuse (a cycle, or deeper than
#: ``wellknown.COMPOSITE_MAX_DEPTH``): v1alpha3 ``CompositePodGroupReasonInvalid``.
COMPOSITE_INVALID = "CompositePodGroupInvalid"
#: Event reason on a pod placed alone because the PodGroup its label names does not exist.
PODGROUP_MISSING = "PodGroupNotFound"
#: Seconds a pod naming a missing PodGroup waits (from its creation) before it is placed
#: without it: ``kubectl apply`` of a PodGroup and its pods reaches the log through two
#: watches, and the pods may come first.
PODGROUP_GRACE_S = 15.0
#: Seconds between looks at orphan pods while the log holds no complete Slurm listing.
ORPHAN_RECHECK_S = 10.0
#: Seconds between looks while a submit waits for a complete Slurm listing.
LISTING_RECHECK_S = 1.0
#: Seconds between looks while a pod waits for its node's previous job's pods to leave.
HANDOFF_RECHECK_S = 2.0
#: Condition (and Warning Event) reason while too few nodes are eligible for the group.
INELIGIBLE = "SlurmNodesIneligible"
#: Condition (and Warning Event) reason on a pod whose shape no component of the group's
#: heterogeneous job has (it joined after the submit).
NEW_SHAPE = "PodShapeNotInHetJob"
#: Seconds between looks while a submit waits for compatible nodes to get the feature.
FEATURE_RECHECK_S = 1.0
#: Event reason on a pod whose job's node no longer fits it when it is to be bound.
INFEASIBLE = "SlurmAllocationInfeasible"


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


def ref(pod: KubePod) -> PodRef:
    """The PodRef of a pod observation."""
    return PodRef(namespace=pod.namespace, name=pod.name, uid=pod.uid)


def job_id_of(pods: Iterable[KubePod]) -> int | None:
    """The job id on the pods' ``slurm-jobid`` label (the highest when they disagree)."""
    ids = []
    for p in pods:
        raw = p.labels.get(wellknown.LABEL_SLURM_JOBID, "")
        if raw.isdigit():
            ids.append(int(raw))
    return max(ids) if ids else None


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


def _live(p: KubePod) -> bool:
    return not p.terminal and not p.deleting


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


def _queue_key(j: SlurmJob) -> tuple[int, int, int]:
    # slurmctld's job queue order (sort_job_queue2 in src/slurmctld/job_scheduler.c):
    # priority descending, then submit time, then job id. Unknown priority sorts last.
    return (-(j.priority or 0), j.submit_time, j.job_id)


def queue_position(store: Store, job: SlurmJob) -> int:
    """The 1-based place of PENDING ``job`` among the PENDING jobs of its partition (of its
    cluster), in the order slurmctld's scheduler tries them (``sort_job_queue2`` in
    ``src/slurmctld/job_scheduler.c``: priority descending, then submit time, then job id);
    0 when the job is not pending or names no partition.

    Reads only the jobs of that partition (the projection's ``partition`` index) and counts
    those ahead, without sorting, up to ``wellknown.QUEUE_POSITION_CAP`` (a place from there
    on is that cap: "100th or later").
    """
    if job.base_state != "PENDING" or not job.partition:
        return 0
    mine = _queue_key(job)
    ahead = 0
    for j in store.by_field(SlurmJob, "partition", job.partition):
        if (
            j.base_state == "PENDING"
            and j.job_id != job.job_id
            and j.source == job.source
            and _queue_key(j) < mine
        ):
            ahead += 1
            if ahead + 1 >= wellknown.QUEUE_POSITION_CAP:
                break
    return ahead + 1


def view(store: Store, key: str, ctx: Context) -> View | None:
    """Read the group's pods, root object, Slurm job and (when needed) the node map."""
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
    slurmd = tuple(p for p in ours if _tenancy.slurmd_pod(p))
    workload = store.get(KubeWorkload, group.root_key) if group.root_key else None
    # Only live pods name the group's job: a finished pod's label names a job that ended with
    # it, and a pod created after it (a Job's retry) needs a new job, not that one.
    live = [p for p in pods if _live(p)]
    job_id = job_id_of(live)
    job = store.get(SlurmJob, str(job_id), source) if job_id is not None else None
    listed = slurm_listed(store, ctx.cluster)
    marker = _pods.marker(group, _pods.root_uid(group, live, workload))
    if job is None and job_id is not None:
        # A heterogeneous job lives on in its components once its leader (whose id the pods
        # carry) has ended and left the listing: not a lost job to re-back.
        job = _het_component(store, marker, source, job_id)
    if job is not None and not _pods.is_groups_job(
        job.comment, group, _pods.root_uid(group, live, workload)
    ):
        # The id names someone else's job (a user's, or another group's after slurmctld
        # restarted from older state and handed the id out again): "no job" for the group,
        # never adopted.
        job = None
    het_jobs = _het_jobs(job, store, source)
    bound = [p for p in live if p.node_name]
    reback: tuple[str, ...] = ()
    if job_id is not None and job is None and listed and bound:
        # Slurm lost the job of running pods (a complete listing lacks it, or the id is
        # another's): a job of ours that already backs their nodes, else a new one asking
        # for exactly those nodes (decide: _reback).
        reback = _slurm_nodes_of(bound, store)
        job = _backing_job(store, marker, source, reback)
        job_id = job.job_id if job is not None else None
        if job is not None:
            reback = ()
    elif (
        job_id is not None
        and not bound
        and ((job is None and listed) or _ended(job))
        # A heterogeneous job whose leader ended lives on while a component does.
        and not (het_jobs and _hetjob.live(het_jobs))
    ):
        # Slinky treats a label naming a job that ended or that Slurm no longer has as no
        # job (an administrator scancel-ed the pending placeholder, slurmctld lost it): take
        # the live job of ours whose marker names the group, if any, else submit again at
        # once. A job merely too new to be listed yet is found again by the submit, which
        # looks in Slurm for the marker first.
        job_id, job = None, None
    if job_id is None and listed and live and not reback:
        job = _job_of_marker(store, marker, source)
        # A heterogeneous job's pods carry its leader's id, whichever component is seen.
        job_id = (job.het_job_id or job.job_id) if job is not None else None
    het_jobs = _het_jobs(job, store, source)
    node_map: dict[str, str] = {}
    kube_nodes: dict[str, KubeNode] = {}
    usage: dict[str, KubeNodeUsage] = {}
    if job is not None:
        for slurm_name in [n for j in het_jobs or (job,) if j is not None for n in j.nodes]:
            keys = _nodes.kube_keys_for_slurm(slurm_name, store)
            if keys:
                node_map[slurm_name] = min(keys)
        for name in node_map.values():
            if (node := store.get(KubeNode, name)) is not None:
                kube_nodes[name] = node
            if (used := store.get(KubeNodeUsage, name)) is not None:
                usage[name] = used
    occupants, occupant_jobs = _occupants(store, ctx, job, node_map, source)
    owner_root: KubeWorkload | None = None
    owner_missing = ""
    if group.kind == "Pod" and job_id is None and live:
        owner_root, owner_missing = _pods.owner_root(live[0], store)
    claims, slices = _dra_view(store, pods, node_map, job)
    configuring = _pods.configuring_pod_group(group, pods, workload, store)
    excluded: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()
    partitions: frozenset[str] = frozenset()
    pending_ours = (
        job is not None
        and job.base_state == "PENDING"
        and _pods.group_key_of_marker(job.comment) == group.key
    )
    node_sizes: _pods.NodeSizes = {}
    gres_required = _nodes.gres_feature_required(store, ctx.cluster)
    eligible: dict[str, int] | None = None
    eligible_soon: dict[str, int] | None = None
    held_back: tuple[str, ...] = ()
    featured: dict[str, int] | None = None
    featured_soon: dict[str, int] | None = None
    if reback:
        partitions = frozenset(p.key for p in store.values(SlurmPartition, source))
    elif (job_id is None or pending_ours) and any(_live(p) for p in pods):
        partitions = frozenset(p.key for p in store.values(SlurmPartition, source))
        if job_id is None and listed:
            node_sizes = _pods.partition_node_sizes(store, source)
        # Only names Slurm knows: slurmctld rejects a job whose excluded list names an
        # unknown node (ESLURM_INVALID_NODE_NAME), and Kubernetes nodes outside Slurm are
        # never allocated anyway.
        world = _world(store, live)
        unusable = {
            _nodes.slurm_name_of(n)
            for n in store.values(KubeNode)
            if n.unschedulable or not n.ready or _infeasible(n, live, store, world)
        }
        # Slurm nodes with no Kubernetes node (a NodeSet's slurmd nodes, plain HPC nodes)
        # could be allocated in a partition they share with Kubernetes nodes, and a pod can
        # never be bound there: exclude them too, in those partitions only.
        mapped: dict[str, bool] = {}
        for part in store.values(SlurmPartition, source):
            for name in part.nodes:
                if name not in mapped:
                    mapped[name] = bool(_nodes.kube_keys_for_slurm(name, store))
        for part in store.values(SlurmPartition, source):
            if any(mapped[n] for n in part.nodes):
                unusable.update(n for n in part.nodes if not mapped[n])
        excluded = tuple(
            sorted(name for name in unusable if store.get(SlurmNode, name, source) is not None)
        )
        if job_id is None and listed:
            lacking, coming = _lacking_feature(store, source) if gres_required else (set(), set())
            eligible = _eligible_counts(store, source, unusable | lacking)
            if lacking:
                eligible_soon = _eligible_counts(store, source, unusable | (lacking - coming))
                held_back = tuple(sorted(lacking - coming - unusable))
                featured = _eligible_counts(store, source, lacking, any_default=True)
                featured_soon = _eligible_counts(store, source, lacking - coming, any_default=True)
        if unusable and not excluded and not listed and not any(store.values(SlurmNode, source)):
            # No Slurm node seen yet (the first listing is on its way): the names cannot be
            # checked, and dropping them all would submit with no exclusion at all. Wait.
            unverified = tuple(sorted(unusable))
    return View(
        group=group,
        pods=pods,
        workload=workload,
        job=job,
        job_id=job_id,
        partitions=partitions,
        node_map=node_map,
        excluded=excluded,
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
        applied={
            n: sn.extra
            for n in (node_map if slices else ())
            if (sn := store.get(SlurmNode, n, source)) is not None
            and sn.extra.startswith(_devprofile.APPLIED_PREFIX)
        },
        kube_nodes=kube_nodes,
        usage=usage,
        unverified=unverified,
        node_sizes=node_sizes,
        composite_size=(
            _pods.composite_size(workload, store)
            if workload is not None and group.kind == _pods.KIND_COMPOSITE
            else 0
        ),
        reback=reback,
        lost_job_grace_s=ctx.lost_job_grace_s,
        tenancy=ctx.tenancy,
        served=_tenancy.served(
            group.namespace,
            ctx.tenancy,
            ctx.managed_namespaces,
            selector=ctx.namespace_selector,
        ),
        slurmd=slurmd,
        eligible=eligible,
        gres_required=gres_required,
        eligible_soon=eligible_soon,
        held_back=held_back,
        featured=featured,
        featured_soon=featured_soon,
        owner_root=owner_root,
        owner_missing=owner_missing,
        occupants=occupants,
        occupant_jobs=occupant_jobs,
    )


def _ended(job: SlurmJob | None) -> bool:
    return job is not None and job.base_state in ENDED


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
    """The claims and slices :func:`decide` needs for pods asking for DRA devices: the
    claims the unbound pods name (their GPUs size the job); once the job runs, also the
    claims holding devices on its nodes and those nodes' slices."""
    waiting = [p for p in pods if _live(p) and not p.node_name and _dra.needs_dra(p)]
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


def _infeasible(
    node: KubeNode, live: list[KubePod], store: Store, world: _feasible.World | None = None
) -> bool:
    """True when ``node`` is not eligible for some live unbound pod of the group by
    Kubernetes' filters, resources held by our Slurm allocations aside
    (:func:`reconcilers._feasible.eligible`). Pods alike in what the filters read are
    checked once."""
    usage = store.get(KubeNodeUsage, node.key)
    seen: set[tuple[object, ...]] = set()
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
            # InterPodAffinity reads who the pod is, and whom it wants (or not) near it.
            (
                p.namespace,
                tuple(sorted(p.labels.items())),
                msgspec.json.encode((p.pod_affinity, p.pod_anti_affinity)),
            )
            if world is not None
            else None,
        )
        if shape in seen:
            continue
        seen.add(shape)
        if _feasible.eligible(p, node, usage, world) is not None:
            return True
    return False


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


def _reject(pods: list[KubePod], message: str, reason: str = INVALID) -> Decision:
    actions: list[AnyAction] = []
    for p in pods:
        cur = p.condition(CONDITION)
        if cur is not None and (cur.status, cur.reason, cur.message) == ("False", reason, message):
            continue
        actions.append(
            SetPodCondition(
                pod=ref(p), type=CONDITION, status="False", reason=reason, message=message
            )
        )
        actions.append(_pods.pod_event(p, reason, message, warning=True))
    return Decision(actions=tuple(actions), reason=message)


def _marked(p: KubePod, job_id: int) -> bool:
    return (
        p.labels.get(wellknown.LABEL_SLURM_JOBID) == str(job_id)
        and wellknown.FINALIZER_SCHEDULER in p.finalizers
        and (wellknown.TAINT_MANAGED_NODE in p.tolerations or "" in p.tolerations)
    )


def _warn_once(p: KubePod, message: str, occasion: str) -> AnyAction:
    event = _pods.pod_event(p, wellknown.REASON_NOT_SERVED, message, warning=True)
    return msgspec.structs.replace(event, once=occasion)


def _left_alone(v: View, live: list[KubePod]) -> Decision | None:
    """Pods placement never touches (reconcilers._tenancy): NodeSet slurmd pods with our
    schedulerName, and every pod of a namespace the bridge does not serve. Each gets one
    Warning Event (``once``), nothing else — not even on a namespace dropped from the
    settings after its pods got a job (never undo what was done)."""
    slurmd = (
        "a NodeSet slurmd pod (a Slurm node itself) is never placed through a Slurm job: "
        "the pod is left alone"
    )
    warned = [_warn_once(p, slurmd, "slurmd") for p in v.slurmd if _live(p)]
    if not v.served and live:
        message = _tenancy.not_served_message(v.group.namespace)
        warned.extend(_warn_once(p, message, "not-served") for p in live)
        return Decision(actions=tuple(warned), reason=message)
    if warned and not live:
        return Decision(actions=tuple(warned), reason="NodeSet slurmd pods are left alone")
    return None


def decide(v: View | None) -> Decision:
    """Submit, label, or bind (module docstring)."""
    if v is None:
        return Decision(reason="not a pod group key")
    live = [p for p in v.pods if _live(p)]
    left_alone = _left_alone(v, live)
    if left_alone is not None:
        return left_alone
    if not live:
        return NOTHING
    if v.job_id is None:
        bound = [p for p in live if p.node_name]
        if bound and v.reback:
            return _reback(v, live, bound)
        if bound:
            return _orphans(v, bound)
        return _submit(v, live)
    actions: list[AnyAction] = []
    unmarked = [ref(p) for p in live if not _marked(p, v.job_id)]
    if unmarked:
        actions.append(
            MarkPods(job_id=v.job_id, pods=tuple(unmarked), scheduler_name=v.scheduler_name)
        )
    job = v.job
    # A heterogeneous job's pods of a shape none of its components has: said so on them,
    # left out of the components' binding (and of the pending message).
    strays: list[KubePod] = []
    if v.het_jobs:
        named = [_handoff.job_pods(j) if j is not None else frozenset() for j in v.het_jobs]
        strays = [p for p in _hetjob.strays(live, named) if not p.node_name]
        actions.extend(_new_shape(strays, v.job_id))
    fitting = [p for p in live if p not in strays]
    if (
        job is not None
        and job.base_state == "PENDING"
        and _pods.group_key_of_marker(job.comment) == v.group.key
        and not job.required_nodes
        and sorted(job.excluded_nodes) != list(v.excluded)
    ):
        # Nodes cordoned or uncordoned since the submit: a pending job keeps the exclusions
        # it was submitted with, so without this it could wait forever for nodes that are
        # fine again (or be started on a node cordoned meanwhile).
        actions.append(
            SetJobExcludedNodes(
                cluster=v.cluster,
                job_id=job.job_id,
                marker=job.comment,
                excluded_nodes=v.excluded,
            )
        )
    if job is None or job.base_state != "RUNNING" or not job.nodes:
        state = job.base_state if job is not None else "not yet seen"
        reason = f"job {v.job_id} is {state}"
        if (
            job is not None
            and job.base_state == "PENDING"
            and _pods.group_key_of_marker(job.comment) == v.group.key
        ):
            message = wellknown.pending_message(job.state_reason, v.queue_position, job.partition)
            actions.extend(_pending(fitting, job.job_id, message))
            reason += f": {message}"
        return Decision(actions=tuple(actions), reason=reason)
    unbound = [p for p in live if not p.node_name]
    nodes = job.nodes
    targets: dict[str, tuple[int, str]] = {}
    if v.het_jobs:
        if not _hetjob.running(v.het_jobs):
            return Decision(actions=tuple(actions), reason=f"job {v.job_id}: components start")
        comps = _hetjob.components(v.group, fitting, {}) or [fitting]
        targets = _hetjob.bind_targets(comps, v.het_jobs)
        by_id = {j.job_id: j for j in v.het_jobs if j is not None}
    held: dict[str, set[_dra.DeviceId]] = {}
    waits: list[str] = []
    binds: list[AnyAction] = []
    unfit: list[tuple[KubePod, str, str]] = []
    handoff: list[str] = []
    usage = dict(v.usage)
    for i, p in enumerate(live):
        if p.node_name:
            continue
        slurm_node = nodes[i % len(nodes)]
        placed = job
        if v.het_jobs:
            # A heterogeneous job: the pod goes to a node of its own component's job.
            if p.key not in targets:
                waits.append(f"{p.name}: in no component of job {v.job_id}")
                continue
            component_id, slurm_node = targets[p.key]
            placed = by_id[component_id]
        kube_node = v.node_map.get(slurm_node)
        if kube_node is None:
            msg = f"Slurm node {slurm_node} of job {v.job_id} has no Kubernetes node"
            binds.append(_pods.pod_event(p, "SlurmNodeUnknown", msg, warning=True))
            continue
        node = v.kube_nodes.get(kube_node)
        if node is not None:
            # Re-checked now: the node may have changed since the submit. The pods bound
            # before this one in this pass count into the node's usage.
            why = _feasible.fits(p, node, usage.get(kube_node))
            if why is not None and _handoff.waits_for_handoff(
                p, node, usage.get(kube_node), v.occupants.get(kube_node, ()), v.occupant_jobs
            ):
                handoff.append(f"{p.name}: {kube_node} is being released by an ended job")
                continue
            if why is not None:
                unfit.append((p, kube_node, why))
                continue
        if _dra.needs_dra(p):
            taken = held.setdefault(kube_node, set(_dra.taken_on(kube_node, v.claims.values())))
            try:
                claim_actions, wait = _claim_actions(v, placed, p, slurm_node, kube_node, taken)
            except _dra.DraError as exc:
                actions.extend(_device_problem(p, f"cannot allocate DRA devices: {exc}"))
                continue
            if wait:
                waits.append(f"{p.name}: {wait}")
                continue
            binds.extend(claim_actions)
        if node is not None:
            usage[kube_node] = _feasible.plus(usage.get(kube_node), p, kube_node)
        binds.append(BindPod(pod=ref(p), node=kube_node, slurm_node=slurm_node, job_id=v.job_id))
        binds.append(_pods.pod_event(p, "Scheduled", _started(placed, slurm_node, kube_node)))
    if unfit:
        return _infeasible_allocation(v, job, live, actions, binds, unfit)
    actions.extend(binds)
    if not unbound and (admitted := _pod_group_admitted(v, live, v.job_id)) is not None:
        actions.append(admitted)
    # Nothing announces an occupant leaving another group's node: look again soon.
    again = HANDOFF_RECHECK_S if handoff else None
    waits.extend(handoff)
    if not actions:
        if waits:
            return Decision(
                requeue_after=again,
                reason=f"job {v.job_id} RUNNING; waiting: {'; '.join(waits)}",
            )
        return NOTHING
    return Decision(
        actions=tuple(actions),
        requeue_after=again,
        reason=f"job {v.job_id} RUNNING; {len(unbound)} to bind",
    )


def _pod_group_admitted(v: View, live: list[KubePod], job_id: int) -> SetPodGroupScheduled | None:
    """The Workload API PodGroup's scheduled condition, once every live pod is bound under
    the job (Slinky ``podsHaveSlurmNodeAssignments``) and while the condition is not True."""
    wl = v.workload
    if v.group.kind != _pods.KIND_NATIVE or wl is None or wl.scheduled:
        return None
    if not live or any(
        not p.node_name or p.labels.get(wellknown.LABEL_SLURM_JOBID) != str(job_id) for p in live
    ):
        return None
    return SetPodGroupScheduled(
        namespace=wl.namespace,
        name=wl.name,
        uid=wl.uid,
        api_version=wl.api_version,
        message=f"Pod group admitted by {v.scheduler_name}",
    )


def _new_shape(strays: list[KubePod], job_id: int) -> list[AnyAction]:
    """``PodScheduled=False`` (reason :data:`NEW_SHAPE`) and a Warning Event, once per pod
    (when its condition changes), on each unbound pod whose shape is that of no component of
    the group's heterogeneous job (:func:`reconcilers._hetjob.strays`)."""
    actions: list[AnyAction] = []
    for p in strays:
        cpu, memory, gpus = _hetjob.shape(p)
        message = (
            f"pod {p.name} ({cpu}m CPU, {memory // (1024 * 1024)} MiB, {gpus} GPU) joined "
            f"after heterogeneous Slurm job {job_id} was submitted and has the shape of none "
            "of its components: Slurm gave it no node, so it is not bound while that job runs"
        )
        cur = p.condition(CONDITION)
        if cur is not None and (cur.status, cur.reason, cur.message) == (
            "False",
            NEW_SHAPE,
            message,
        ):
            continue
        actions.append(
            SetPodCondition(
                pod=ref(p), type=CONDITION, status="False", reason=NEW_SHAPE, message=message
            )
        )
        actions.append(_pods.pod_event(p, NEW_SHAPE, message, warning=True))
    return actions


def _pending(live: list[KubePod], job_id: int, message: str) -> list[AnyAction]:
    """``PodScheduled=False`` (reason :data:`PENDING`, ``message``) on each live unbound pod
    whose condition differs, as :func:`_reject` does; a pod that was not waiting on Slurm
    before also gets a Normal Event (after the write: only when it changed something).

    The write keeps status False, so the condition's ``lastTransitionTime`` stays (the
    effector moves it only when the status flips), and it never carries reason
    :data:`REJECTED`: the refused-submit back-off (:func:`_refused_until`) is not touched.
    """
    actions: list[AnyAction] = []
    for p in live:
        if p.node_name:
            continue
        cur = p.condition(CONDITION)
        if cur is not None and (cur.status, cur.reason, cur.message) == ("False", PENDING, message):
            continue
        actions.append(
            SetPodCondition(
                pod=ref(p), type=CONDITION, status="False", reason=PENDING, message=message
            )
        )
        if cur is None or cur.reason != PENDING:
            actions.append(
                _pods.pod_event(p, PENDING, f"Slurm job {job_id} waits in the queue: {message}")
            )
    return actions


def _started(job: SlurmJob, slurm_node: str, kube_node: str) -> str:
    """The bind's Event: the job started, where, and after how long in Slurm's queue."""
    waited = ""
    if job.submit_time and job.start_time >= job.submit_time:
        waited = f" after {job.start_time - job.submit_time} s in the queue"
    where = f" of partition {job.partition}" if job.partition else ""
    return (
        f"Slurm job {job.job_id} started{waited} on node {slurm_node}{where}: bound to {kube_node}"
    )


#: PodScheduled reason when the devices Slurm gave a pod's job cannot become its claims.
DEVICES_FAILED = "DeviceAllocationFailed"


def _device_problem(p: KubePod, message: str) -> list[AnyAction]:
    """PodScheduled=False (reason :data:`DEVICES_FAILED`) and a Warning Event, once."""
    cur = p.condition(CONDITION)
    if cur is not None and (cur.status, cur.reason, cur.message) == (
        "False",
        DEVICES_FAILED,
        message,
    ):
        return []
    return [
        SetPodCondition(
            pod=ref(p), type=CONDITION, status="False", reason=DEVICES_FAILED, message=message
        ),
        _pods.pod_event(p, DEVICES_FAILED, message, warning=True),
    ]


def _claim_actions(
    v: View,
    job: SlurmJob,
    p: KubePod,
    slurm_node: str,
    kube_node: str,
    taken: set[_dra.DeviceId],
) -> tuple[list[AnyAction], str]:
    """The claim actions to perform before binding ``p`` to ``kube_node`` (Slinky
    slurm-bridge ``PreBind`` → ``manageResourceClaim``), or what it waits for.

    * each ``spec.resourceClaims`` claim not yet allocated ⇒ :class:`AllocateResourceClaim`
      with the devices :func:`reconcilers._dra.devices_for` names from the job's allocation on
      ``slurm_node``; a claim allocated on this node but not reserved for the pod (a shared
      claim) ⇒ the same action with its devices, to reserve it;
    * DRA extended resources without their claim ⇒ :class:`CreateExtendedResourceClaim`.

    Devices given out here are added to ``taken`` (the node's devices held by claims).

    Raises:
        _dra.DraError: a claim allocated on another node, an unsupported request, or devices
            Slurm's allocation cannot provide.
    """
    alloc = job.allocation_on(slurm_node)
    slices = v.slices.get(kube_node, ())
    out: list[AnyAction] = []
    for i, pc in enumerate(p.claims):
        field = f"spec.resourceClaims[{i}]"
        if not pc.claim:
            return [], f"{field} ({pc.name}): waiting for the claim made from its template"
        claim = v.claims.get(f"{p.namespace}/{pc.claim}")
        if claim is None:
            return [], f"{field}: waiting for ResourceClaim {pc.claim}"
        if claim.allocated:
            if claim.node and claim.node != kube_node:
                raise _dra.DraError(
                    field,
                    f"ResourceClaim {pc.claim} is allocated on node {claim.node}, but Slurm "
                    f"runs the pod's job on {kube_node}",
                )
            if claim.reserved_for_pod(p.uid):
                continue
            devices = claim.results
        else:
            devices = _dra.devices_for(
                claim.requests,
                alloc,
                slices,
                taken=frozenset(taken),
                field=f"ResourceClaim {pc.claim}: spec.devices.requests",
                classes=v.device_classes,
                applied=v.applied.get(slurm_node, ""),
            )
            taken.update((d.driver, d.pool, d.device) for d in devices)
        out.append(
            AllocateResourceClaim(
                claim=ClaimRef(namespace=claim.namespace, name=claim.name, uid=claim.uid),
                pod=ref(p),
                node=kube_node,
                devices=devices,
            )
        )
    counts = _dra.extended_counts(p)
    if counts:
        _dra.check_extended(p, v.device_classes)
        existing = v.claims.get(f"{p.namespace}/{p.extended_claim}") if p.extended_claim else None
        if existing is None:
            existing = next(
                (
                    c
                    for c in v.claims.values()
                    if c.extended and c.owner is not None and c.owner.uid == p.uid
                ),
                None,
            )
        if p.extended_claim and existing is None:
            return [], f"waiting for ResourceClaim {p.extended_claim}"
        if existing is None or not existing.reserved_for_pod(p.uid):
            requests, mappings = _dra.extended_claim(p, v.device_classes)
            if existing is not None and existing.allocated:
                devices = existing.results
            else:
                devices = _dra.devices_for(
                    requests,
                    alloc,
                    slices,
                    taken=frozenset(taken),
                    field="extended resources",
                    classes=v.device_classes,
                    applied=v.applied.get(slurm_node, ""),
                )
                taken.update((d.driver, d.pool, d.device) for d in devices)
            out.append(
                CreateExtendedResourceClaim(
                    pod=ref(p),
                    node=kube_node,
                    requests=requests,
                    devices=devices,
                    mappings=mappings,
                )
            )
    return out, ""


def _infeasible_allocation(
    v: View,
    job: SlurmJob,
    live: list[KubePod],
    actions: list[AnyAction],
    binds: list[AnyAction],
    unfit: list[tuple[KubePod, str, str]],
) -> Decision:
    """Some pods do not fit the nodes Slurm gave their job and may not wait for a handoff
    (module docstring, :mod:`reconcilers._handoff`): never bind them; cancel the job (ours
    only), even when pods of the group already run on it — waiting could last for ever
    (Slinky slurm-bridge 1.3 eligibility.go ``allocatedNodeWaitingForBridge``)."""
    warnings = [
        _pods.pod_event(
            p,
            INFEASIBLE,
            f"Slurm job {v.job_id} was allocated node {node}, which no longer fits the pod: {why}",
            warning=True,
        )
        for p, node, why in unfit
    ]
    first = f"{unfit[0][0].name} on {unfit[0][1]}: {unfit[0][2]}"
    ours = _pods.group_key_of_marker(job.comment) == v.group.key
    if not ours:
        # A job that is not ours is never cancelled: bind what fits, leave the rest Pending
        # with the Event.
        return Decision(
            actions=(*actions, *binds, *warnings),
            reason=f"job {v.job_id} RUNNING; {len(unfit)} pod(s) do not fit ({first}); "
            "not cancelled: the job is not ours",
        )
    cancel = CancelSlurmJob(
        cluster=v.cluster,
        job_id=job.job_id,
        marker=job.comment,
        why=f"its allocation no longer fits the pods ({first}): submitting again",
    )
    # The Events follow the cancel, so they are recorded once, when it is carried out.
    return Decision(
        actions=(*actions, cancel, *warnings),
        reason=f"job {v.job_id} RUNNING but {len(unfit)} pod(s) do not fit ({first}): cancelled",
    )


def _too_few_eligible(v: View, partition: str, needed: int, *, soon: bool = False) -> str:
    """Why nothing is submitted: fewer eligible Slurm nodes in the job's partition than it
    needs (``""``: enough, or not counted). Slinky slurm-bridge 1.3
    ``populateComponentWithFeasibleNodes`` (slurmbridge.go): a gang still needs enough
    eligible nodes, but they need not be free now. A node lacking the
    ``slurm_bridge_gres_compatible`` feature every job requires is not eligible (Slurm would
    never give it to the job); ``soon``: count those whose feature is on its way."""
    counts = v.eligible_soon if soon and v.eligible_soon is not None else v.eligible
    if counts is None or partition not in counts:
        return ""
    have = counts[partition]
    if have >= needed:
        return ""
    where = f"partition {partition}" if partition else "the default partition"
    lacking = ""
    if v.held_back:
        lacking = (
            f"; {', '.join(v.held_back)} lack the Slurm feature "
            f"{wellknown.FEATURE_GRES_COMPATIBLE} every job requires (see the node condition "
            f"{wellknown.CONDITION_SLURM_GRES_COMPATIBLE})"
        )
    return (
        f"{have} Slurm node(s) of {where} fit the pods, the job needs {needed}: not submitted "
        "until more nodes fit (taints, affinity, host ports or resources not held by Slurm "
        f"jobs){lacking}"
    )


def _refused_until(v: View, live: list[KubePod]) -> float:
    """When the group may be submitted again after Slurm refused its job (0: now). The
    refusal is on the pods (condition ``PodScheduled=False``, reason :data:`REJECTED`, written
    by the effector), so any worker, after any restart, sees it."""
    times = [
        c.last_transition
        for p in live
        if (c := p.condition(CONDITION)) is not None
        and c.status == "False"
        and c.reason == REJECTED
    ]
    return max(times) + RESUBMIT_AFTER_S if times else 0.0


def _orphans(v: View, bound: list[KubePod]) -> Decision:
    """Pods of ours already on a node with no job of ours (bound by hand, or their label
    removed): a placeholder job would make Slurm reserve other nodes while these run unseen,
    so none is submitted. With no job whose marker names the group in a complete listing,
    they are deleted, as Slinky's workload controller deletes orphans; without a complete
    listing, nothing happens yet."""
    if not v.listed:
        return Decision(
            requeue_after=ORPHAN_RECHECK_S,
            reason="bound pods without a job: waiting for a complete Slurm listing",
        )
    actions: list[AnyAction] = []
    for p in bound:
        why = f"bound to {p.node_name} without a Slurm job of ours: an orphan"
        actions.append(DeletePod(pod=ref(p), cluster=v.cluster, job_id=0, why=why))
        actions.append(_pods.pod_event(p, "SlurmJobMissing", f"Deleting pod: {why}", warning=True))
    return Decision(actions=tuple(actions), reason=f"{len(bound)} orphan pod(s) deleted")


#: Warning Event reason on the pods of a group whose job Slurm lost.
LOST = "SlurmJobLost"


def _reback(v: View, live: list[KubePod], bound: list[KubePod]) -> Decision:
    """Slurm lost the job of pods already running (slurmctld restarted from older state): a
    new placeholder job asking for exactly the Slurm nodes they run on
    (``required_nodes``, min = max = their number, no exclusions), so Slurm gives those
    nodes to no one else; the submit relabels the pods. ``workload`` deletes them only if
    that job has not started ``kube.lostJobGrace`` after its submit. Nothing else about the
    pods changes; the job is sized as the group's job would be (its annotations), or by
    the pods alone when the annotations no longer translate.

    Slurm refused the re-back job for good (the effector wrote ``PodScheduled=False``, reason
    :data:`REJECTED`, on the pods — after their bind, which set it True): it can never start,
    so no new submit; ``lost_job_grace_s`` after the refusal the pods are deleted (job id 0:
    no job of theirs to re-read), as when the job did not start in time."""
    nodes = v.reback
    refused = _refused_until(v, bound) - RESUBMIT_AFTER_S
    if refused > 0:
        due = refused + v.lost_job_grace_s
        if v.now < due:
            return Decision(
                requeue_after=due - v.now,
                reason=f"Slurm refused the job re-backing pods on {','.join(nodes)}; "
                f"deleting them in {due - v.now:.0f} s",
            )
        why = (
            f"Slurm lost job {_old_id(bound)} and refused the job that was to re-back the "
            f"pod on its node"
        )
        deletes: list[AnyAction] = []
        for p in bound:
            deletes.append(DeletePod(pod=ref(p), cluster=v.cluster, job_id=0, why=why))
            deletes.append(_pods.pod_event(p, LOST, f"Deleting pod: {why}", warning=True))
        return Decision(actions=tuple(deletes), reason=why)
    try:
        spec = _pods.translate(
            v.group,
            live,
            _pods.annotations_of(
                v.group,
                live,
                v.workload,
                controller=v.controller,
                template_owner=v.template_owner,
            ),
            workload=v.workload,
            # The pods run there already: the job only keeps their nodes, and a node that
            # lost the feature since must not leave them without one.
            gres_compatible=False,
        )
    except _pods.TranslationError:
        # The pods run already: a job that holds their nodes matters more than its details.
        spec = SlurmJobSpec(name=_pods.default_job_name(v.group), tasks=len(live), exclusive=True)
    if not spec.partition and v.default_partition:
        spec = msgspec.structs.replace(spec, partition=v.default_partition)
    if spec.partition and spec.partition not in v.partitions:
        spec = msgspec.structs.replace(spec, partition="")
    spec = msgspec.structs.replace(
        spec,
        min_nodes=len(nodes),
        max_nodes=len(nodes),
        tasks=max(spec.tasks, len(nodes)),
        required_nodes=nodes,
        excluded_nodes=(),
        mcs_label=v.mcs_label or spec.mcs_label,
    )
    marker = _pods.marker(v.group, _pods.root_uid(v.group, live, v.workload))
    why = (
        f"Slurm no longer has job {_old_id(bound)} of pods running on {','.join(nodes)}: "
        f"a new placeholder job asks for exactly those nodes"
    )
    return Decision(
        actions=(
            SubmitSlurmJob(
                cluster=v.cluster,
                group=v.group.key,
                marker=marker,
                pods=tuple(ref(p) for p in live),
                spec=spec,
                scheduler_name=v.scheduler_name,
            ),
            _pods.pod_event(bound[0], LOST, why, warning=True),
        ),
        reason=why,
    )


def _old_id(pods: list[KubePod]) -> str:
    return str(job_id_of(pods) or "?")


def _submit(v: View, live: list[KubePod]) -> Decision:
    retry_at = _refused_until(v, live)
    if retry_at > v.now:
        return Decision(
            requeue_after=retry_at - v.now,
            reason=f"Slurm refused the group's job; submitting again in {retry_at - v.now:.0f} s",
        )
    wl = v.workload
    if wl is not None and wl.workload_kind == "PodGroup" and wl.phase in PODGROUP_DONE:
        # Slinky slurm-bridge (PreFilterPodGroupCoscheduling): a PodGroup that is Running,
        # Finished, Failed or Unknown is not placed again.
        return _reject(
            live,
            f"PodGroup {wl.name} is {wl.phase}: its pods are not placed again",
            reason=PODGROUP_NOT_PENDING,
        )
    alone = [
        p
        for p in live
        if _pods.LABEL_POD_GROUP in p.labels and v.group.kind not in ("PodGroup", _pods.KIND_NATIVE)
    ]
    if alone:
        # The PodGroup the pods name does not exist (a complete list lacks it): Slinky
        # translates such a pod from its owner. Not at once: the PodGroup may be on its way.
        ready_at = max(p.created_at for p in alone) + PODGROUP_GRACE_S
        if ready_at > v.now:
            return Decision(
                requeue_after=ready_at - v.now,
                reason="PodGroup not found: placing the pods without it in "
                f"{ready_at - v.now:.0f} s unless it appears",
            )
    if v.unverified:
        return Decision(
            requeue_after=LISTING_RECHECK_S,
            reason=f"waiting for a complete Slurm listing to exclude {', '.join(v.unverified)}",
        )
    # A Workload API PodGroup with a gang policy waits for minCount pods, then the job is
    # sized by the pods present (Slinky fromPodGroup, PreFilterPodGroup).
    expected = _pods.expected_size(v.group, v.workload, v.template_owner)
    if v.group.root_key is not None and v.workload is None:
        return Decision(reason=f"waiting for {v.group.root_key} to be observed")
    if v.group.kind == _pods.KIND_COMPOSITE:
        if v.workload is not None and v.workload.parent:
            return _reject(
                live,
                f"CompositePodGroup {v.group.name} names parent {v.workload.parent}: the group "
                f"tree has a cycle or is deeper than {wellknown.COMPOSITE_MAX_DEPTH} levels",
                reason=COMPOSITE_INVALID,
            )
        expected = v.composite_size
    if expected and len(live) < expected:
        return Decision(reason=f"waiting for the group's pods: {len(live)} of {expected}")
    dra_gpus: dict[str, int] = {}
    for p in live:
        named = []
        for pc in p.claims:
            claim = v.claims.get(f"{p.namespace}/{pc.claim}") if pc.claim else None
            if claim is None:
                # Its GPUs size the job: the resourceclaim controller makes a template's
                # claim when the pod is created, so this is a short wait.
                return Decision(
                    reason=f"waiting for ResourceClaim {pc.claim or pc.name} of pod {p.name}"
                )
            named.append(claim)
        if p.claims or p.dra_requests:
            dra_gpus[p.key] = _dra.gpus_asked(p, named, v.device_classes)
    if v.owner_missing:
        return _reject(live, f"not placed: {v.owner_missing}", reason=_pods.OWNER_MISSING)
    annotations = _pods.annotations_of(
        v.group,
        live,
        v.workload,
        controller=v.controller,
        template_owner=v.template_owner,
        pod_group=v.pod_group,
    )
    if v.owner_root is not None:
        # The owner chain's root configures the job (Slinky slurmjobir owner.go).
        annotations = v.owner_root.annotations
    denial = _tenancy.check(v.tenancy, v.group.namespace, annotations)
    if denial is not None:
        # Defense in depth: the webhook denies such pods, but a pod admitted before the
        # policy changed (or past the webhook) must never get a job.
        return _reject(live, denial.message, reason=_tenancy.DENIED)
    try:
        spec = _pods.translate(
            v.group,
            live,
            annotations,
            excluded_nodes=v.excluded,
            workload=v.workload,
            dra_gpus=dra_gpus,
            device_classes=v.device_classes,
            gres_compatible=v.gres_required,
        )
    except _pods.TranslationError as exc:
        return _reject(live, f"cannot become a Slurm job: {exc}")
    spec = _tenancy.apply(v.tenancy, v.group.namespace, spec)
    if not spec.partition and v.default_partition:
        spec = msgspec.structs.replace(spec, partition=v.default_partition)
    if v.mcs_label:
        spec = msgspec.structs.replace(spec, mcs_label=v.mcs_label)
    if spec.partition and spec.partition not in v.partitions:
        return _reject(
            live,
            f"cannot become a Slurm job: metadata.annotations["
            f"{_pods.PREFIX}partition]: Slurm has no partition {spec.partition!r}",
        )
    if _pods.sized_by_annotation(annotations):
        # Refuse a task larger than any node, but only from a complete listing: before it,
        # a partition's largest node may simply not be seen yet.
        if not v.listed:
            return Decision(
                requeue_after=LISTING_RECHECK_S,
                reason="waiting for a complete Slurm listing to check the job's size",
            )
        try:
            _pods.check_node_sizes(spec, annotations, v.node_sizes)
        except _pods.TranslationError as exc:
            return _reject(live, f"cannot become a Slurm job: {exc}")
    try:
        het = _het_components(v, live, annotations, spec)
    except _pods.TranslationError as exc:
        return _reject(live, f"cannot become a Slurm job: {exc}")
    if not v.listed:
        # Every job requires slurm_bridge_gres_compatible, and Slurm refuses a job whose
        # feature no node of its partition has (2029 "Invalid feature specification", 2014:
        # recorded from 26.05.5): submit only once a complete listing shows nodes carry it.
        return Decision(
            requeue_after=LISTING_RECHECK_S,
            reason="waiting for a complete Slurm listing to count the nodes carrying "
            f"{wellknown.FEATURE_GRES_COMPATIBLE}",
        )
    short = _too_few_eligible(v, spec.partition, spec.min_nodes)
    if short and not _too_few_eligible(v, spec.partition, spec.min_nodes, soon=True):
        # Enough nodes once node_register has put the feature on compatible nodes (a
        # start-up, a node just joined): wait for it rather than refuse.
        return Decision(
            requeue_after=FEATURE_RECHECK_S,
            reason=f"waiting for {wellknown.FEATURE_GRES_COMPATIBLE} on compatible nodes: {short}",
        )
    if short:
        return _reject(live, short, reason=INELIGIBLE)
    if v.featured is not None and v.featured.get(spec.partition, 1) == 0:
        # No node the job may get carries the feature: Slurm would refuse the job (2029 /
        # 2014), so wait for it, or say why.
        feature = wellknown.FEATURE_GRES_COMPATIBLE
        if (v.featured_soon or {}).get(spec.partition, 0):
            return Decision(
                requeue_after=FEATURE_RECHECK_S,
                reason=f"waiting for {feature} on compatible nodes",
            )
        where = f"partition {spec.partition}" if spec.partition else "the default partition"
        return _reject(
            live,
            f"no Slurm node of {where} carries the feature {feature} every job requires "
            f"(see the node condition {wellknown.CONDITION_SLURM_GRES_COMPATIBLE})",
            reason=INELIGIBLE,
        )
    marker = _pods.marker(v.group, _pods.root_uid(v.group, live, v.workload))
    first = live[0]
    missing = tuple(
        _pods.pod_event(
            p,
            PODGROUP_MISSING,
            f"PodGroup {p.labels[_pods.LABEL_POD_GROUP]} does not exist: placed as {v.group.key}",
            warning=True,
        )
        for p in alone
    )
    return Decision(
        actions=(
            *missing,
            SubmitSlurmJob(
                cluster=v.cluster,
                group=v.group.key,
                marker=marker,
                pods=tuple(ref(p) for p in live),
                spec=het[0].spec if het else spec,
                scheduler_name=v.scheduler_name,
                components=het,
                tenant=tenant.name if (tenant := v.tenancy.tenant_of(v.group.namespace)) else "",
            ),
            _pods.pod_event(
                first,
                "SlurmJobSubmitted",
                f"Placeholder job for {v.group.key} ({len(live)} pods) submitted to Slurm",
            ),
        ),
        reason=f"submit placeholder job for {len(live)} pods",
    )


def _het_components(
    v: View, live: list[KubePod], annotations: Mapping[str, str], whole: SlurmJobSpec
) -> tuple[HetComponent, ...]:
    """The components of a heterogeneous job for a group whose pods have different shapes
    (:mod:`reconcilers._hetjob`), ``()`` for a plain job. Each is translated from its own
    pods under the group's annotations, with the whole job's partition, MCS label and
    exclusions.

    Raises:
        _pods.TranslationError: too many shapes, or a component cannot be translated.
    """
    comps = _hetjob.components(v.group, live, annotations)
    if comps is None:
        return ()
    out = []
    for comp in comps:
        spec = _pods.translate(
            v.group,
            comp,
            annotations,
            excluded_nodes=v.excluded,
            workload=v.workload,
            gres_compatible=v.gres_required,
        )
        spec = msgspec.structs.replace(
            spec, partition=whole.partition, mcs_label=whole.mcs_label, name=whole.name
        )
        out.append(HetComponent(spec=spec, pods=tuple(ref(p) for p in comp)))
    return tuple(out)


def _group_of_pod(event: KubePod, store: Store, ctx: Context) -> Iterable[str]:
    # Tombstones keep labels, owner and schedulerName, so they still name their group.
    if event.scheduler_name != ctx.scheduler_name:
        return []
    return [_pods.resolve_group(event, store, ctx.cluster).key]


def _groups_under(event: KubeWorkload, store: Store, ctx: Context) -> Iterable[str]:
    return _pods.groups_under(event, store, ctx.cluster)


def _after_job(event: SlurmJob, store: Store, ctx: Context) -> Iterable[str]:
    """The job's own group, and — when the job is not (or no longer) pending — the groups
    whose jobs wait in its partition among the first ``wellknown.QUEUE_POSITION_CAP``: one
    left the queue ahead of them, so their place moved. Only that partition's jobs are read
    (the ``partition`` index)."""
    keys = _pods.group_of_job(event, store, ctx)
    if event.base_state == "PENDING" or not event.partition:
        return keys
    if event.cluster and event.cluster != ctx.cluster:
        return keys
    found = set(keys)
    pending = [
        j
        for j in store.by_field(SlurmJob, "partition", event.partition)
        if j.source == event.source and j.base_state == "PENDING"
    ]
    # Only the places told exactly can move (wellknown.QUEUE_POSITION_CAP): with 10,000 jobs
    # queued, a job starting re-decides 100 groups, not 10,000.
    for j in heapq.nsmallest(wellknown.QUEUE_POSITION_CAP, pending, key=_queue_key):
        if key := _pods.group_key_of_marker(j.comment):
            found.add(key)
    return sorted(found)


def _after_partition(_event: SlurmPartition, store: Store, ctx: Context) -> Iterable[str]:
    # A partition appearing may unblock a group still without a job.
    return _waiting_groups(store, ctx)


def _after_listing(event: KubeListed, store: Store, ctx: Context) -> Iterable[str]:
    # A complete PodGroup list tells which pods name a PodGroup that does not exist.
    return _waiting_groups(store, ctx) if event.resource == _pods.PODGROUPS else []


def _after_node(event: KubeNode, store: Store, ctx: Context) -> Iterable[str]:
    # A node cordoned, uncordoned, Ready or not: the exclusions of pending jobs follow.
    return _pending_groups(store, ctx, near=event.key)


def _after_claim(event: KubeResourceClaim, store: Store, ctx: Context) -> Iterable[str]:
    # A claim made from a template, or allocated by us: its pod's group binds on.
    keys = set()
    if event.owner is not None and event.owner.kind == "Pod":
        pod = store.get(KubePod, f"{event.namespace}/{event.owner.name}")
        if pod is not None and pod.scheduler_name == ctx.scheduler_name:
            keys.add(_pods.resolve_group(pod, store, ctx.cluster).key)
    for c in event.reserved_for:
        pod = store.get(KubePod, f"{event.namespace}/{c.name}")
        if pod is not None and pod.scheduler_name == ctx.scheduler_name:
            keys.add(_pods.resolve_group(pod, store, ctx.cluster).key)
    return sorted(keys)


def _after_slice(
    _event: KubeResourceSlice | KubeDeviceClass, store: Store, ctx: Context
) -> Iterable[str]:
    # A node's devices appearing may let pods waiting for DRA devices bind.
    keys = {
        _pods.resolve_group(p, store, ctx.cluster).key
        for p in store.values(KubePod)
        if p.scheduler_name == ctx.scheduler_name
        and _live(p)
        and not p.node_name
        and _dra.needs_dra(p)
    }
    return sorted(keys)


def _after_usage(event: KubeNodeUsage, store: Store, ctx: Context) -> Iterable[str]:
    # A node filling up or freeing: the exclusions of pending jobs follow.
    return _pending_groups(store, ctx, near=event.key)


def usage_read(event: KubeNodeUsage) -> object:
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


def _pending_groups(store: Store, ctx: Context, near: str = "") -> list[str]:
    """The groups whose jobs of ours are pending — with ``near`` (a Kubernetes node name),
    only those in a partition holding that node's Slurm node: a job's exclusions name only
    nodes of its partitions, so nothing else on that node can move them (no partition
    observed yet: every pending job). A node in no partition concerns no pending job (with
    10,000 jobs queued, every pod binding re-decided all of them: issue 30, item 4)."""
    source = slurm_source(ctx.cluster)
    parts: set[str] | None = None
    known = list(store.values(SlurmPartition, source)) if near else []
    if known:
        node = store.get(KubeNode, near)
        slurm = _nodes.slurm_name_of(node) if node is not None else near
        parts = {p.key for p in known if slurm in p.nodes}
        if not parts:
            return []
    keys = set()
    for j in store.values(SlurmJob, source):
        if j.base_state != "PENDING" or not (key := _pods.group_key_of_marker(j.comment)):
            continue
        if parts is not None and j.partition and not parts.intersection(j.partition.split(",")):
            continue
        keys.add(key)
    return sorted(keys)


def _waiting_groups(store: Store, ctx: Context) -> list[str]:
    keys = {
        _pods.resolve_group(p, store, ctx.cluster).key
        for p in store.values(KubePod)
        if p.scheduler_name == ctx.scheduler_name
        and _live(p)
        and wellknown.LABEL_SLURM_JOBID not in p.labels
    }
    return sorted(keys)


def all_keys(store: Store, ctx: Context) -> Iterable[str]:
    """Every group with a live pod of ours."""
    return sorted(
        {
            _pods.resolve_group(p, store, ctx.cluster).key
            for p in store.values(KubePod)
            if p.scheduler_name == ctx.scheduler_name and _live(p)
        }
    )


SPEC = ReconcilerSpec(
    name=NAME,
    keys={
        KubePod: _group_of_pod,
        KubeWorkload: _groups_under,
        SlurmJob: _after_job,
        SlurmPartition: _after_partition,
        KubeNode: _after_node,
        KubeNodeUsage: _after_usage,
        KubeListed: _after_listing,
        KubeResourceClaim: _after_claim,
        KubeResourceSlice: _after_slice,
        # A DeviceClass's selector decides what its devices are: pods waiting may now fit.
        KubeDeviceClass: _after_slice,
    },
    # A pod starting (Pending → Running, Ready) changes nothing here.
    reads={KubePod: _pods.group_read, KubeNodeUsage: usage_read},
    key_kind="PodGroup",
    all_keys=all_keys,
    view=view,
    decide=decide,
    description="schedule pods through Slurm placeholder jobs and bind them",
)
