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
  node is infeasible for ANY live unbound pod of the group by Kubernetes' own filters
  (:func:`reconcilers._feasible.fits`: taints, node selector and required node affinity,
  allocatable less what the node's pods already request — ``KubeNodeUsage``). Fail closed:
  the pods are spread over the job's nodes by name, so each pod must fit every node it could
  get. (Slinky gets this from kube-scheduler, whose filters run before its plugin; we bind
  directly, so we apply them ourselves.) Each pod is checked alone; pods sharing a node are
  added up at bind time;
  the same action labels the pods ``scheduler.slinky.slurm.net/slurm-jobid``, adds the
  finalizer ``scheduler.slinky.slurm.net/finalizer`` and the managed-node toleration;
* nodes would be excluded but the log holds no Slurm node of the cluster yet (its first
  listing is on its way) ⇒ no submit yet: every exclusion would be dropped as unknown;
* the group cannot be translated, or names a partition Slurm does not have ⇒ no job; each
  pod gets ``PodScheduled=False`` (reason ``SlurmJobInvalid``) and a Warning Event naming the
  annotation and the reason — fixing the annotation re-triggers the group;
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
* ... unless, re-checked just before binding with :func:`reconcilers._feasible.fits` (the
  pods bound earlier in the same pass counted into the node's usage), a pod no longer fits
  its node (a taint added, a label removed, the node filled up since the submit): then no
  pod of the group is bound, the job is cancelled (``CancelSlurmJob``, only while its
  ``comment`` is the group's marker) and each such pod gets a Warning Event
  (:data:`INFEASIBLE`) naming the node and the reason; the cancelled job makes the pods'
  label stale, so the group is submitted again with the node excluded. When pods of the
  group are already bound (never touched), the job is not cancelled — it would stop them —
  and only the unfit pods stay unbound, with the Warning Event;
* pods that joined after the job was submitted ⇒ labelled and finalized like the others;
* the job is still PENDING and the nodes to exclude changed (a node cordoned or uncordoned
  since the submit) ⇒ the job's ``excluded_nodes`` are replaced (``POST job/{id}``).

The group's job is the one named by its *live* pods' ``slurm-jobid`` label: when every pod
that named a job has finished (a Job's failed pod) and a new pod appears (its retry), the new
pod gets a new job instead of joining the ended one.

Key: the group key (``namespace/Kind:name``). Triggers: KubePod, KubeWorkload, SlurmJob,
SlurmPartition (a partition appearing may unblock a group), KubeNode (the exclusions of pending
jobs), KubeNodeUsage (the exclusions of pending jobs: a node filling up or freeing),
KubeListed ``podgroups`` (pods naming a PodGroup that does not exist are placed alone).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from reconcilers import _feasible, _nodes, _pods
from reconcilers.base import NOTHING, Context, Decision, ReconcilerSpec, Store, slurm_listed
from schemas import wellknown
from schemas.actions import (
    AnyAction,
    BindPod,
    CancelSlurmJob,
    DeletePod,
    MarkPods,
    PodRef,
    SetJobExcludedNodes,
    SetPodCondition,
    SubmitSlurmJob,
)
from schemas.events import (
    KubeListed,
    KubeNode,
    KubeNodeUsage,
    KubePod,
    KubeWorkload,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
)
from schemas.subjects import slurm_source

NAME = "placement"
ENDED = wellknown.JOB_ENDED_STATES
CONDITION: str = wellknown.CONDITION_POD_SCHEDULED
INVALID = "SlurmJobInvalid"
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
    #: Nodes to exclude while the log holds no Slurm node of the cluster at all (before its
    #: first listing): a submit waits for the listing instead of dropping every exclusion.
    unverified: tuple[str, ...] = ()
    #: Kubernetes node name → its observation, for the nodes of :attr:`node_map`.
    kube_nodes: dict[str, KubeNode] = {}
    #: Kubernetes node name → what its pods request, for the nodes of :attr:`node_map`.
    usage: dict[str, KubeNodeUsage] = {}


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


def _live(p: KubePod) -> bool:
    return not p.terminal and not p.deleting


def _stale(job: SlurmJob | None, job_id: int, store: Store, source: str, listed: bool) -> bool:
    """The pods' label names a job that can never place them: it ended, or a complete
    listing lacks it while it holds a newer job (Slurm's ids grow, so the named job is not
    merely too new to be listed yet)."""
    if job is not None:
        return job.base_state in ENDED
    if not listed:
        return False
    return any(j.job_id > job_id for j in store.values(SlurmJob, source) if not j.deleted)


def _job_of_marker(store: Store, marker: str, source: str) -> SlurmJob | None:
    """The newest live job of ours whose ``comment`` is ``marker`` (the job's word): an index
    lookup, not a scan of every job, as this runs for every group without a job label."""
    jobs = [
        j
        for j in store.by_field(SlurmJob, "comment", marker)
        if j.source == source and not j.deleted and j.base_state not in ENDED
    ]
    return max(jobs, key=lambda j: j.job_id) if jobs else None


def view(store: Store, key: str, ctx: Context) -> View | None:
    """Read the group's pods, root object, Slurm job and (when needed) the node map."""
    group = _pods.parse_group_key(key)
    if group is None:
        return None
    source = slurm_source(ctx.cluster)
    pods = tuple(
        p
        for p in _pods.pods_of(group, store, ctx.cluster)
        if p.scheduler_name == ctx.scheduler_name
    )
    workload = store.get(KubeWorkload, group.root_key) if group.root_key else None
    # Only live pods name the group's job: a finished pod's label names a job that ended with
    # it, and a pod created after it (a Job's retry) needs a new job, not that one.
    live = [p for p in pods if _live(p)]
    job_id = job_id_of(live)
    job = store.get(SlurmJob, str(job_id), source) if job_id is not None else None
    listed = slurm_listed(store, ctx.cluster)
    unbound = not any(p.node_name for p in live)
    if job_id is not None and unbound and _stale(job, job_id, store, source, listed):
        # Slinky treats a label naming a job that ended or that Slurm no longer has as no
        # job (an administrator scancel-ed the pending placeholder): take the live job of
        # ours whose marker names the group, if any, else submit again.
        job_id, job = None, None
    if job_id is None and listed and live:
        marker = _pods.marker(group, _pods.root_uid(group, live, workload))
        job = _job_of_marker(store, marker, source)
        job_id = job.job_id if job is not None else None
    node_map: dict[str, str] = {}
    kube_nodes: dict[str, KubeNode] = {}
    usage: dict[str, KubeNodeUsage] = {}
    if job is not None:
        for slurm_name in job.nodes:
            keys = _nodes.kube_keys_for_slurm(slurm_name, store)
            if keys:
                node_map[slurm_name] = min(keys)
        for name in node_map.values():
            if (node := store.get(KubeNode, name)) is not None:
                kube_nodes[name] = node
            if (used := store.get(KubeNodeUsage, name)) is not None:
                usage[name] = used
    excluded: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()
    partitions: frozenset[str] = frozenset()
    pending_ours = (
        job is not None
        and job.base_state == "PENDING"
        and _pods.group_key_of_marker(job.comment) == group.key
    )
    if (job_id is None or pending_ours) and any(_live(p) for p in pods):
        partitions = frozenset(p.key for p in store.values(SlurmPartition, source))
        # Only names Slurm knows: slurmctld rejects a job whose excluded list names an
        # unknown node (ESLURM_INVALID_NODE_NAME), and Kubernetes nodes outside Slurm are
        # never allocated anyway.
        unusable = {
            _nodes.slurm_name_of(n)
            for n in store.values(KubeNode)
            if n.unschedulable or not n.ready or _infeasible(n, live, store)
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
        kube_nodes=kube_nodes,
        usage=usage,
        unverified=unverified,
    )


def _infeasible(node: KubeNode, live: list[KubePod], store: Store) -> bool:
    """True when some live unbound pod of the group does not fit ``node`` by Kubernetes'
    filters (:func:`reconcilers._feasible.fits`). Pods alike in what the filters read are
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
        )
        if shape in seen:
            continue
        seen.add(shape)
        if _feasible.fits(p, node, usage) is not None:
            return True
    return False


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


def decide(v: View | None) -> Decision:
    """Submit, label, or bind (module docstring)."""
    if v is None:
        return Decision(reason="not a pod group key")
    live = [p for p in v.pods if _live(p)]
    if not live:
        return NOTHING
    if v.job_id is None:
        bound = [p for p in live if p.node_name]
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
    if (
        job is not None
        and job.base_state == "PENDING"
        and _pods.group_key_of_marker(job.comment) == v.group.key
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
        return Decision(actions=tuple(actions), reason=f"job {v.job_id} is {state}")
    unbound = [p for p in live if not p.node_name]
    nodes = job.nodes
    binds: list[AnyAction] = []
    unfit: list[tuple[KubePod, str, str]] = []
    usage = dict(v.usage)
    for i, p in enumerate(live):
        if p.node_name:
            continue
        slurm_node = nodes[i % len(nodes)]
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
            if why is not None:
                unfit.append((p, kube_node, why))
                continue
            usage[kube_node] = _feasible.plus(usage.get(kube_node), p, kube_node)
        binds.append(BindPod(pod=ref(p), node=kube_node, slurm_node=slurm_node, job_id=v.job_id))
        binds.append(
            _pods.pod_event(
                p, "Scheduled", f"Slurm job {v.job_id} runs on {slurm_node}: bound to {kube_node}"
            )
        )
    if unfit:
        return _infeasible_allocation(v, job, live, actions, binds, unfit)
    actions.extend(binds)
    if not actions:
        return NOTHING
    return Decision(
        actions=tuple(actions), reason=f"job {v.job_id} RUNNING; {len(unbound)} to bind"
    )


def _infeasible_allocation(
    v: View,
    job: SlurmJob,
    live: list[KubePod],
    actions: list[AnyAction],
    binds: list[AnyAction],
    unfit: list[tuple[KubePod, str, str]],
) -> Decision:
    """Some pods no longer fit the nodes Slurm gave their job (module docstring): never bind
    them; cancel the job (ours only) unless pods of the group already run on it."""
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
    running = any(p.node_name for p in live)
    ours = _pods.group_key_of_marker(job.comment) == v.group.key
    if running or not ours:
        # Bound pods are never touched, and a job that is not ours is never cancelled: bind
        # what fits, leave the rest Pending with the Event.
        why = "pods of the group already run on it" if running else "the job is not ours"
        return Decision(
            actions=(*actions, *binds, *warnings),
            reason=f"job {v.job_id} RUNNING; {len(unfit)} pod(s) do not fit ({first}); "
            f"not cancelled: {why}",
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
    alone = [p for p in live if _pods.LABEL_POD_GROUP in p.labels and v.group.kind != "PodGroup"]
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
    expected = v.workload.size if v.workload is not None else 0
    if v.group.root_key is not None and v.workload is None:
        return Decision(reason=f"waiting for {v.group.root_key} to be observed")
    if expected and len(live) < expected:
        return Decision(reason=f"waiting for the group's pods: {len(live)} of {expected}")
    try:
        spec = _pods.translate(
            v.group,
            live,
            _pods.annotations_of(v.group, live, v.workload),
            excluded_nodes=v.excluded,
            workload=v.workload,
        )
    except _pods.TranslationError as exc:
        return _reject(live, f"cannot become a Slurm job: {exc}")
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
                spec=spec,
                scheduler_name=v.scheduler_name,
            ),
            _pods.pod_event(
                first,
                "SlurmJobSubmitted",
                f"Placeholder job for {v.group.key} ({len(live)} pods) submitted to Slurm",
            ),
        ),
        reason=f"submit placeholder job for {len(live)} pods",
    )


def _group_of_pod(event: KubePod, store: Store, ctx: Context) -> Iterable[str]:
    # Tombstones keep labels, owner and schedulerName, so they still name their group.
    if event.scheduler_name != ctx.scheduler_name:
        return []
    return [_pods.resolve_group(event, store, ctx.cluster).key]


def _groups_under(event: KubeWorkload, store: Store, ctx: Context) -> Iterable[str]:
    return _pods.groups_under(event, store, ctx.cluster)


def _after_partition(_event: SlurmPartition, store: Store, ctx: Context) -> Iterable[str]:
    # A partition appearing may unblock a group still without a job.
    return _waiting_groups(store, ctx)


def _after_listing(event: KubeListed, store: Store, ctx: Context) -> Iterable[str]:
    # A complete PodGroup list tells which pods name a PodGroup that does not exist.
    return _waiting_groups(store, ctx) if event.resource == _pods.PODGROUPS else []


def _after_node(_event: KubeNode, store: Store, ctx: Context) -> Iterable[str]:
    # A node cordoned, uncordoned, Ready or not: the exclusions of pending jobs follow.
    return _pending_groups(store, ctx)


def _after_usage(_event: KubeNodeUsage, store: Store, ctx: Context) -> Iterable[str]:
    # A node filling up or freeing: the exclusions of pending jobs follow.
    return _pending_groups(store, ctx)


def _pending_groups(store: Store, ctx: Context) -> list[str]:
    keys = set()
    for j in store.values(SlurmJob, slurm_source(ctx.cluster)):
        if j.base_state == "PENDING" and (key := _pods.group_key_of_marker(j.comment)):
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
        SlurmJob: _pods.group_of_job,
        SlurmPartition: _after_partition,
        KubeNode: _after_node,
        KubeNodeUsage: _after_usage,
        KubeListed: _after_listing,
    },
    key_kind="PodGroup",
    all_keys=all_keys,
    view=view,
    decide=decide,
    description="schedule pods through Slurm placeholder jobs and bind them",
)
