"""``workload``: keep placeholder jobs and their pods in step (Slinky slurm-bridge workload
controller).

Rules, per pod group (key ``namespace/Kind:name``, see :mod:`reconcilers._pods`):

1. **Pods whose job stopped.** A pod bound to a node, not finished and not being deleted,
   whose job is not RUNNING — the job completed, was cancelled (``scancel``), preempted, timed
   out, failed or was requeued — is deleted (slurm-bridge #6, #36: bound-but-not-ready pods
   count). The effector re-reads the job from Slurm first and skips when it runs (and, with
   the action's marker, is ours) or Slurm cannot be asked (fail closed). A job that
   *vanished* from Slurm after we bound the pod (slurmctld restarted from older state), or
   whose id now names someone else's job, is **lost**, not stopped: ``placement`` re-backs
   the pods with a new job on their nodes, and rule 9 decides.
   A pod whose job was **preempted** is told so as kube-scheduler tells the pods it preempts
   (pkg/scheduler/framework/preemption, prepareCandidate): condition
   ``DisruptionTarget=True``, reason ``PreemptionByScheduler``, then the delete — here with
   ``gracePeriodSeconds`` = ``Context.preemption_grace_s`` (``kube.preemptionGrace``, 30 s as
   CoreWeave SUNK gives), so it can checkpoint — and a Warning Event ``Preempted``.
2. **Groups that finished.** When no pod of the group can still run — each is Succeeded or
   Failed, or is being deleted without ever having been bound — the job is cancelled if it
   still runs and our finalizer is removed from the pods. A pod still terminating on its
   node keeps the job (slurm-bridge #16).
3. **Pods deleted after their job ended** lose our finalizer, so the deletion completes.
4. **Pods stuck Terminating** on a node whose kubelet does not answer (node not Ready, or
   gone) for longer than ``stuck_pod_grace_s`` after their deletion grace period lose our
   finalizer, with a Warning Event saying why (slurm-bridge #49).
5. **Jobs whose pods are all gone** (a placeholder job of ours, still pending or running, and
   no pod of its group left) are cancelled — only once the log holds a complete list of the
   pods (a ``KubeListed`` marker, client-go's "has synced"): before it, absence proves
   nothing.
6. **Duplicate jobs.** Another live job with the same marker as the job the group's pods name,
   and named by none of them, is cancelled: a submit whose answer was lost (a time-out) that
   Slurm carried out after the retry had submitted again. Found by the chaos tier.
7. **Short gangs.** A LeaderWorkerSet replica or PodGroup (coscheduling, or a Workload API
   PodGroup with a gang policy: its ``minCount``) with fewer live pods than its size
   while its job is still pending: the job is cancelled and the job label removed from the
   pods, so they are placed again once whole (Slinky slurm-bridge PreFilter:
   ErrorExternalJobInvalid).
8. **Claims of pods that ended.** A pod that can never run again (as in rule 2), whether or
   not the rest of its group still runs, gives back its DRA ResourceClaims at once: a claim
   reserved for it is released (the pod removed from ``reservedFor``, the allocation cleared
   once no consumer is left), and the claim slurmbridge made for its extended resources is
   deleted. Its devices are then free for the next claim on the node while its group's
   other pods run (the kube-controller-manager's resourceclaim controller likewise drops a
   done pod from ``reservedFor``: pkg/controller/resourceclaim/controller.go, ``syncClaim``,
   ``isPodDone``. Slinky writes claims in its PreBind — slurmbridge.go, dra.go — and
   releases none). A pod still running, or being deleted but not yet stopped on its node,
   keeps them: its containers may still use the devices.

9. **Pods re-backed after Slurm lost their job.** While the group's job is a re-back job of
   ours (it has ``required_nodes``: ``placement`` asks for them only then) that is still
   PENDING, its pods stay until ``Context.lost_job_grace_s`` (``kube.lostJobGrace``, 60 s)
   after the job's submit; then they are deleted as in rule 1 and the job is cancelled if
   it is still pending (it held only their nodes). Rule 7 never cancels such a job.

A job is "lost" only when the pods say we bound them (``slinky.slurm.net/slurm-node``, so the
job was seen RUNNING) and Slurm no longer lists it; a job never seen is *not* gone.
A job is the group's only when its ``comment`` is the group's marker (with the root's uid,
when the root is observed: :func:`reconcilers._pods.is_groups_job`); any other job the pods'
label names is no job of theirs. Cancelling only touches jobs whose ``comment`` is our group
marker. Triggers: KubePod,
KubeNode (a node going NotReady), SlurmJob.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import msgspec

from reconcilers import _pods
from reconcilers._steps import Plan, Step, Stop, run
from reconcilers.base import (
    Context,
    Decision,
    Index,
    ReconcilerSpec,
    Store,
    kube_listed,
    slurm_listed,
)
from schemas import wellknown
from schemas.actions import (
    AnyAction,
    CancelSlurmJob,
    ClaimRef,
    DeletePod,
    PodRef,
    ReleaseResourceClaim,
    RemovePodFinalizer,
    SetPodCondition,
    SetPodLabel,
)
from schemas.events import KubeNode, KubePod, KubeResourceClaim, KubeWorkload, SlurmJob
from schemas.subjects import slurm_source

NAME = "workload"
#: Job states after which the job's pods can never run again.
ENDED = wellknown.JOB_ENDED_STATES
#: Seconds between looks at a bound pod whose job is missing while the log holds no current
#: listing of the cluster (nothing else re-triggers the group when the listing arrives).
LISTING_RECHECK_S = 10.0
FINALIZER = wellknown.FINALIZER_SCHEDULER
#: The listing of the pods our scheduler places (producers.kube.PodWatcher).
PODS_LISTING = "pods"
#: Groups that must start whole (Slinky cancels their pending job when they fall short):
#: LeaderWorkerSet replicas, coscheduling and Workload API PodGroups.
GANGS = _pods.GANGS


class View(msgspec.Struct, frozen=True, kw_only=True):
    """One pod group: our pods in it, its job (by the pods' label or by the job's marker),
    the Kubernetes nodes the pods are on, and the clock."""

    group: _pods.Group
    pods: tuple[KubePod, ...]
    job: SlurmJob | None
    job_id: int | None
    duplicates: tuple[SlurmJob, ...] = ()
    #: Kubernetes node name → Ready, for the nodes of the pods being deleted (absent = gone).
    node_ready: dict[str, bool]
    cluster: str
    now: float
    grace_s: float
    #: Whole seconds a pod of a preempted job gets to stop (Context.preemption_grace_s).
    preemption_grace_s: int = 30
    #: The log holds a complete, current listing of the cluster (base.slurm_listed): only
    #: then does a job missing from it mean the job is gone.
    slurm_listed: bool
    #: The log holds a complete list of our pods (base.kube_listed): only then does a pod
    #: missing from it mean the pod is gone.
    pods_listed: bool = True
    #: Pods a gang (LeaderWorkerSet replica, PodGroup) needs at least; 0 = not a gang or
    #: unknown.
    gang_size: int = 0
    #: The DRA ResourceClaims the group's finished pods name (``spec.resourceClaims``, the
    #: claim of their extended resources): rule 8.
    claims: tuple[KubeResourceClaim, ...] = ()
    #: Seconds a job re-backing running pods whose job Slurm lost may stay pending after
    #: its submit (Context.lost_job_grace_s): rule 9.
    lost_job_grace_s: float = 60.0
    #: The components of the group's job when it is a heterogeneous job, in offset order
    #: (None: not seen).
    het_jobs: tuple[SlurmJob | None, ...] = ()


def _ours(p: KubePod, ctx: Context) -> bool:
    return (
        p.scheduler_name == ctx.scheduler_name
        or FINALIZER in p.finalizers
        or wellknown.LABEL_SLURM_JOBID in p.labels
    )


def view(store: Store, key: str, ctx: Context) -> View | None:
    """Read the group's pods, its job and the Ready state of the nodes of deleting pods."""
    group = _pods.parse_group_key(key)
    if group is None:
        return None
    source = slurm_source(ctx.cluster)
    pods = tuple(p for p in _pods.pods_of(group, store, ctx.cluster) if _ours(p, ctx))
    ids = _named_job_ids(pods)
    job_id = max(ids) if ids else None
    job = _named_job(store, group, pods, job_id, source)
    if job is None and job_id is None:
        # No pod names the job: find a job of ours that names this group (rule 5).
        job = _marked_job(store, group, source)
        job_id = job.job_id if job is not None else None
    return View(
        group=group,
        pods=pods,
        job=job,
        job_id=job_id,
        duplicates=_duplicates_of(store, group, job, ids, source),
        node_ready=_node_ready(store, pods),
        cluster=ctx.cluster,
        now=ctx.now,
        grace_s=ctx.stuck_pod_grace_s,
        preemption_grace_s=ctx.preemption_grace_s,
        slurm_listed=slurm_listed(store, ctx.cluster),
        pods_listed=kube_listed(store, PODS_LISTING),
        gang_size=_gang_size(store, group),
        claims=_claims_of(store, pods),
        lost_job_grace_s=ctx.lost_job_grace_s,
        het_jobs=_het_components(store, job, source),
    )


def _named_job_ids(pods: tuple[KubePod, ...]) -> list[int]:
    """The job ids the pods' ``slurm-jobid`` labels name (numbers only), in pod order."""
    return [j for p in pods if (j := wellknown.slurm_job_id(p.labels)) is not None]


def _named_job(
    store: Store, group: _pods.Group, pods: tuple[KubePod, ...], job_id: int | None, source: str
) -> SlurmJob | None:
    """The job ``job_id`` names when it is the group's (:func:`reconcilers._pods.is_groups_job`),
    else None."""
    job = store.get(SlurmJob, str(job_id), source) if job_id is not None else None
    if job is None:
        return None
    root = store.get(KubeWorkload, group.root_key) if group.root_key else None
    if not _pods.is_groups_job(job.comment, group, _pods.root_uid(group, list(pods), root)):
        # Someone else's job under the id the pods name (a user's, or another group's after
        # slurmctld restarted from older state and handed the id out again): no job of the
        # group — never cancelled, never a reason to keep or delete the pods.
        return None
    return job


def _marked_group(j: SlurmJob) -> tuple[str, str] | None:
    """A job's cluster source and the group its marker names (its group in
    :data:`MARKED_JOBS`), None for anyone else's job."""
    key = _pods.group_key_of_marker(j.comment)
    return (j.source, key) if key is not None else None


#: Every job of ours by ``(source, group key)`` its marker names, whichever incarnation of the
#: group's root it marks: :func:`_marked_job` reads the group's few jobs, not every job.
MARKED_JOBS = Index("jobs by the group their marker names", SlurmJob, _marked_group)


def _marked_job(store: Store, group: _pods.Group, source: str) -> SlurmJob | None:
    """The first live job of ``source`` whose marker names ``group`` (in the store's order of
    ``values``), else None.

    Read from :data:`MARKED_JOBS`: this runs for every group no pod names a job for, and a
    pass over every job made filling a queue of n pods cost O(n²) (issue 30, item 4). Only
    when the group has two live jobs (a duplicate, rule 6) is "first" settled by that pass.
    """
    live = [
        j for j in store.by_index(MARKED_JOBS, (source, group.key)) if j.base_state not in ENDED
    ]
    if len(live) <= 1:
        return live[0] if live else None
    keys = {j.key for j in live}
    return next(j for j in store.values(SlurmJob, source) if j.key in keys)


def _duplicates_of(
    store: Store, group: _pods.Group, job: SlurmJob | None, ids: list[int], source: str
) -> tuple[SlurmJob, ...]:
    """Live jobs with the marker of the group's job that no pod names (rule 6)."""
    if job is None or not ids or _pods.group_key_of_marker(job.comment) != group.key:
        return ()
    named = set(ids)
    # The components of a heterogeneous job share its marker: the pods name the het job
    # (its leader), and a component is no duplicate.
    return tuple(
        j
        for j in store.by_field(SlurmJob, "comment", job.comment)
        if j.source == source
        and j.job_id not in named
        and j.het_job_id not in named
        and j.base_state not in ENDED
    )


def _het_components(store: Store, job: SlurmJob | None, source: str) -> tuple[SlurmJob | None, ...]:
    """The components of ``job`` when it is a heterogeneous job, in offset order."""
    if job is None or len(job.het_job_ids) <= 1:
        return ()
    return tuple(store.get(SlurmJob, str(i), source) for i in job.het_job_ids)


def _node_ready(store: Store, pods: tuple[KubePod, ...]) -> dict[str, bool]:
    """Kubernetes node name → Ready, for the observed nodes of the pods being deleted."""
    out: dict[str, bool] = {}
    for p in pods:
        if p.deleting and p.node_name and p.node_name not in out:
            n = store.get(KubeNode, p.node_name)
            if n is not None:
                out[p.node_name] = n.ready
    return out


def _claims_of(store: Store, pods: tuple[KubePod, ...]) -> tuple[KubeResourceClaim, ...]:
    found: dict[str, KubeResourceClaim] = {}
    for p in pods:
        if not _done(p):
            continue
        names = [c.claim for c in p.claims if c.claim]
        if p.extended_claim:
            names.append(p.extended_claim)
        for name in names:
            claim = store.get(KubeResourceClaim, f"{p.namespace}/{name}")
            if claim is not None and not claim.deleted:
                found[claim.key] = claim
    return tuple(found[k] for k in sorted(found))


def _releases(v: View) -> list[AnyAction]:
    """Release the claims of the pods that can never run again (rule 8); a pod that may
    still run keeps even a claim it shares with a finished pod."""
    out: list[AnyAction] = []
    for p in v.pods:
        if not _done(p):
            continue
        for c in v.claims:
            ref = ClaimRef(namespace=c.namespace, name=c.name, uid=c.uid)
            mine = c.extended and c.owner is not None and c.owner.uid == p.uid
            if mine and not c.deleting:
                out.append(ReleaseResourceClaim(claim=ref, pod=PodRef.of(p), delete=True))
            elif not mine and c.reserved_for_pod(p.uid):
                out.append(ReleaseResourceClaim(claim=ref, pod=PodRef.of(p)))
    return out


def _gang_size(store: Store, group: _pods.Group) -> int:
    if group.kind not in GANGS or group.root_key is None:
        return 0
    root = store.get(KubeWorkload, group.root_key)
    if group.kind == _pods.KIND_COMPOSITE:
        return _pods.composite_size(root, store) if root is not None else 0
    return _pods.expected_size(group, root, _pods.template_owner_of(root, store))


def _done(p: KubePod) -> bool:
    """The pod can never run (again): finished, or deleted before it was ever bound."""
    return p.terminal or (p.deleting and not p.node_name)


def job_status(v: View) -> str:
    """``running``, ``ended`` (finished), ``pending``, ``lost`` (missing from a complete
    listing after we bound a pod, or the id names someone else's job: ``placement``
    re-backs the pods), or ``unknown`` (never seen, or missing while the log holds no
    current listing: treated as possibly alive)."""
    job = v.job
    if job is not None and v.het_jobs:
        # A heterogeneous job lives while any component does: a leader that ended never
        # releases a component that still runs (reconcilers._hetjob).
        states = [j.base_state if j is not None else "" for j in v.het_jobs]
        if "RUNNING" in states:
            return "running"
        if all(s in ENDED for s in states):
            return "ended"
        return "pending"
    if job is not None:
        if job.base_state == "RUNNING":
            return "running"
        if job.base_state in ENDED:
            return "ended"
        return "pending"
    if v.slurm_listed and _bound(v):
        return "lost"
    return "unknown"


def _reback_left(v: View) -> float | None:
    """Rule 9: seconds the group's pending re-back job (ours, with ``required_nodes``: only
    ``placement``'s re-back asks for them) has left to start before its pods are deleted;
    ``None`` when the job is not one. An unknown submit time never runs out (fail closed)."""
    job = v.job
    if job is None or job.base_state != "PENDING" or not job.required_nodes:
        return None
    if not _cancellable(v):
        return None
    if not job.submit_time:
        return LISTING_RECHECK_S
    return job.submit_time + v.lost_job_grace_s - v.now


def _bound(v: View) -> bool:
    """A pod names the job and says we bound it to a Slurm node."""
    return v.job_id is not None and any(
        wellknown.ANNOTATION_SLURM_NODE in p.annotations for p in v.pods
    )


def _cancellable(v: View) -> bool:
    """The job is ours to cancel: its ``comment`` is this group's marker, and it may still run
    (a job merely named by a pod's label, e.g. someone else's, is never cancelled)."""
    return (
        v.job is not None
        and v.job_id is not None
        and _pods.group_key_of_marker(v.job.comment) == v.group.key
        and job_status(v) in ("running", "pending")
    )


def _cancels(v: View, why: str) -> tuple[CancelSlurmJob, ...]:
    """Cancel the group's job: its id (a het job's leader: Slurm then ends every component),
    or — when that leader has ended but components still run — each live component, which
    cancelling the ended leader would not reach."""
    assert v.job is not None and v.job_id is not None
    if v.het_jobs and v.job.base_state in ENDED:
        return tuple(
            CancelSlurmJob(cluster=v.cluster, job_id=j.job_id, marker=j.comment, why=why)
            for j in v.het_jobs
            if j is not None and j.base_state not in ENDED
        )
    return (CancelSlurmJob(cluster=v.cluster, job_id=v.job_id, marker=v.job.comment, why=why),)


@dataclass(slots=True)
class _Plan(Plan):
    """The workload plan: the job's status, which rule 9 and the listing wait refine and
    :func:`_report` states, and how many ended pods give back claims (rule 8)."""

    status: str = ""
    released: int = 0


def _job_label(v: View) -> str:
    return f"job {v.job_id}" if v.job_id is not None else "no job"


def _gone_pods(plan: _Plan, v: View) -> Stop | None:
    """Rule 5: a job of ours with no pod left is cancelled — once the log holds a complete
    list of the pods: on a first start the Slurm listing may arrive before the pods' (a slow
    or paged list, an API server answering 503), and a running job's pods would look gone.
    (Slinky slurm-bridge pod controller, pod_sync.go ``syncSlurm``: a job no pod needs.)"""
    if v.pods:
        return None
    if not (v.job is not None and v.job_id is not None and _cancellable(v)):
        return plan.stop()
    if not v.pods_listed:
        plan.requeue(LISTING_RECHECK_S)
        return plan.stop(f"{_job_label(v)}: no pod seen, but the pods are not listed yet")
    plan.extend(_cancels(v, f"every pod of {v.group.key} is gone"))
    return plan.stop(f"{_job_label(v)}: every pod of the group is gone")


def _short_gang(plan: _Plan, v: View) -> Stop | None:
    """Rule 7: a gang that fell below its size while its job still waits loses its job and
    its pods their job label, so they are placed again once whole (Slinky slurm-bridge
    slurmbridge.go ``PreFilter``: ErrorExternalJobInvalid)."""
    live = [p for p in v.pods if not _done(p)]
    if not (
        v.gang_size
        and len(live) < v.gang_size
        and plan.status == "pending"
        and v.job is not None
        and v.job_id is not None
        and not v.job.required_nodes
        and _cancellable(v)
    ):
        return None
    why = (
        f"{v.group.key} has {len(live)} of its {v.gang_size} pods while {_job_label(v)} is "
        "pending: a short gang never holds nodes"
    )
    plan.add(CancelSlurmJob(cluster=v.cluster, job_id=v.job_id, marker=v.job.comment, why=why))
    plan.extend(
        SetPodLabel(pod=PodRef.of(p), label=wellknown.LABEL_SLURM_JOBID, value=None)
        for p in live
        if wellknown.LABEL_SLURM_JOBID in p.labels
    )
    plan.extend(_pods.pod_event(p, "SlurmJobCancelled", why) for p in live[:1])
    plan.extend(_releases(v))
    return plan.stop(why)


def _duplicate_jobs(plan: _Plan, v: View) -> Stop | None:
    """Rule 6: other live jobs with the group's marker, named by none of its pods, are
    cancelled (a submit Slurm carried out after its retry had submitted again)."""
    plan.extend(
        CancelSlurmJob(
            cluster=v.cluster,
            job_id=d.job_id,
            marker=d.comment,
            why=f"duplicate placeholder of {v.group.key}: its pods run under {_job_label(v)}",
        )
        for d in v.duplicates
    )
    return None


def _stopped_job(plan: _Plan, v: View) -> Stop | None:
    """Rules 9 and 1: a re-back job within its grace keeps its pods; otherwise the bound
    pods of a job that is not running are deleted — a lost job's pods are left for
    ``placement`` to re-back (Slinky slurm-bridge pod controller, pod_sync.go
    ``syncKubernetes``: a running pod whose job does not run is deleted)."""
    left = _reback_left(v)
    if left is not None and left > 0:
        plan.requeue(left)
        plan.status = f"pending (re-backing pods whose job Slurm lost; {left:.0f} s left to start)"
        return None
    if v.job_id is None or plan.status not in ("ended", "pending"):
        return None
    deletes = _stopped_pod_deletes(v, v.job_id, reback=left is not None)
    plan.extend(deletes)
    if left is not None and v.job is not None and any(isinstance(a, DeletePod) for a in deletes):
        # The re-back job only held its pods' nodes: once they go it would start there
        # for nobody. Only while still pending — one that started meanwhile keeps them
        # (the deletes are skipped by the effector then, too).
        plan.add(
            CancelSlurmJob(
                cluster=v.cluster,
                job_id=v.job_id,
                marker=v.job.comment,
                why=f"re-back {_job_label(v)} did not start within {v.lost_job_grace_s:.0f} s",
                pending_only=True,
            )
        )
    return None


def _stopped_pod_deletes(v: View, job_id: int, *, reback: bool) -> list[AnyAction]:
    """Rule 1's actions: each bound, unfinished pod not yet being deleted is deleted with an
    Event (a preempted job's pods as kube-scheduler's preemption does: :func:`_preempted`);
    ``reback``: the job is a re-back job whose grace ran out."""
    state = v.job.base_state if v.job is not None else "gone from Slurm"
    marker = v.job.comment if v.job is not None else ""
    why_extra = ""
    if reback:
        why_extra = (
            f" {v.lost_job_grace_s:.0f} s after its submit: it re-backed pods whose job "
            "Slurm lost, and could not start on their nodes"
        )
    out: list[AnyAction] = []
    for p in v.pods:
        if not p.node_name or p.terminal or p.deleting:
            continue
        if state == "PREEMPTED":
            out.extend(_preempted(v, p, job_id))
            continue
        why = f"Slurm {_job_label(v)} is {state}{why_extra}"
        out.append(
            DeletePod(pod=PodRef.of(p), cluster=v.cluster, job_id=job_id, why=why, marker=marker)
        )
        out.append(_pods.pod_event(p, "SlurmJobStopped", f"Deleting pod: {why}"))
    return out


def _ended_claims(plan: _Plan, v: View) -> Stop | None:
    """Rule 8: the claims of pods that ended are released, before the group's finalizers go
    (rule 2) (Slinky slurm-bridge pod controller, pod_sync.go ``prepareTerminalPod``, deletes
    a terminal pod's extended-resource claim; kube-controller-manager's resourceclaim
    controller, ``syncClaim``, drops a done pod from ``reservedFor``)."""
    releases = _releases(v)
    plan.extend(releases)
    plan.released = _count(releases)
    return None


def _finished_group(plan: _Plan, v: View) -> Stop | None:
    """Rule 2: when no pod of the group can still run, its job is cancelled if it still runs
    and our finalizer leaves every pod (Slinky slurm-bridge pod controller, pod_sync.go
    ``syncSlurm`` and ``prepareTerminalPod``)."""
    if not all(_done(p) for p in v.pods):
        return None
    if v.job is not None and v.job_id is not None and _cancellable(v):
        plan.extend(_cancels(v, f"every pod of {v.group.key} has finished"))
    plan.extend(
        RemovePodFinalizer(pod=PodRef.of(p), finalizer=FINALIZER, why="group finished")
        for p in v.pods
        if FINALIZER in p.finalizers
    )
    return plan.stop(f"{_job_label(v)}: the group has finished")


def _deleting_pods(plan: _Plan, v: View) -> Stop | None:
    """Rules 3 and 4: a pod being deleted keeps our finalizer while its job may still run,
    loses it once the job ended (or Slurm lost it), and loses it with a Warning Event when
    its node's kubelet has not answered for ``grace_s`` after the deletion grace period
    (slurm-bridge #49); until then the key is looked at again when that time comes."""
    for p in v.pods:
        if FINALIZER not in p.finalizers or not p.deleting or _done(p):
            continue
        if plan.status in ("ended", "lost"):
            plan.add(RemovePodFinalizer(pod=PodRef.of(p), finalizer=FINALIZER, why="job ended"))
            continue
        if p.node_name and not v.node_ready.get(p.node_name, False):
            _stuck_terminating(plan, v, p)
    return None


def _stuck_terminating(plan: _Plan, v: View, p: KubePod) -> None:
    """Rule 4 for one pod on a node without a kubelet."""
    # The API server sets deletionTimestamp to the *end* of the grace period.
    due = p.deletion_timestamp + v.grace_s
    if v.now < due:
        plan.requeue(due - v.now)
        return
    why = (
        f"node {p.node_name} has not answered for {v.grace_s:.0f} s after the "
        "pod's deletion grace period: finalizer removed so the deletion completes"
    )
    plan.add(RemovePodFinalizer(pod=PodRef.of(p), finalizer=FINALIZER, why=why))
    plan.add(_pods.pod_event(p, "KubeletUnresponsive", why, warning=True))


def _report(plan: _Plan, v: View) -> Stop | None:
    """The reason: the job's status — looked at again soon while a bound pod's job is
    missing and the log holds no current listing (nothing else re-triggers the group when
    the listing arrives) — and the claims given back."""
    if plan.status == "unknown" and not v.slurm_listed and _bound(v):
        plan.requeue(LISTING_RECHECK_S)
        plan.status = "unknown (no current listing of the Slurm cluster)"
    plan.reason = f"{_job_label(v)} is {plan.status}"
    if plan.released:
        plan.note(f"releasing the ResourceClaims of {plan.released} ended pod(s)")
    return None


#: The rules in the order they decide (module docstring; the action order is theirs).
STEPS: tuple[Step[_Plan, View], ...] = (
    _gone_pods,
    _short_gang,
    _duplicate_jobs,
    _stopped_job,
    _ended_claims,
    _finished_group,
    _deleting_pods,
    _report,
)


def decide(v: View | None) -> Decision:
    """Delete pods of stopped jobs, cancel jobs of finished groups, release finalizers:
    :data:`STEPS` over the group's view (module docstring, rules 1–9)."""
    if v is None:
        return Decision(reason="not a pod group key")
    return run(STEPS, _Plan(status=job_status(v)), v)


def _count(releases: list[AnyAction]) -> int:
    return len({a.pod.uid for a in releases if isinstance(a, ReleaseResourceClaim)})


def _preempted(v: View, p: KubePod, job_id: int) -> list[AnyAction]:
    """Rule 1 for a preempted job: ``DisruptionTarget=True`` (reason
    ``PreemptionByScheduler``, as kube-scheduler's prepareCandidate writes it before its
    delete), the delete with the preemption grace, and a Warning Event ``Preempted`` (placed
    after the delete: it runs only when the delete happened)."""
    grace = v.preemption_grace_s
    why = f"Slurm job {job_id} was preempted: the pod gets {grace} s to stop"
    return [
        SetPodCondition(
            pod=PodRef.of(p),
            type=wellknown.CONDITION_DISRUPTION_TARGET,
            status="True",
            reason=wellknown.REASON_PREEMPTION_BY_SCHEDULER,
            message=f"Slurm preempted job {job_id} to accommodate a higher priority job",
        ),
        DeletePod(
            pod=PodRef.of(p), cluster=v.cluster, job_id=job_id, why=why, grace_period_s=grace
        ),
        _pods.pod_event(p, "Preempted", f"Deleting pod: {why}", warning=True),
    ]


def _group_of_pod(event: KubePod, store: Store, ctx: Context) -> Iterable[str]:
    return [_pods.resolve_group(event, store, ctx.cluster).key] if _ours(event, ctx) else []


def _deleting_on(event: KubeNode, store: Store, ctx: Context) -> Iterable[str]:
    """The groups with a pod being deleted on a node that is gone or not Ready."""
    if event.ready and not event.deleted:
        return []
    return sorted(
        {
            _pods.resolve_group(p, store, ctx.cluster).key
            for p in store.values(KubePod)
            if p.deleting and p.node_name == event.key and _ours(p, ctx)
        }
    )


def all_keys(store: Store, ctx: Context) -> Iterable[str]:
    """Every group with a pod of ours, and every group named by a live job of ours."""
    keys = {
        _pods.resolve_group(p, store, ctx.cluster).key
        for p in store.values(KubePod)
        if _ours(p, ctx)
    }
    for j in store.values(SlurmJob, slurm_source(ctx.cluster)):
        key = _pods.group_key_of_marker(j.comment)
        if key is not None and j.base_state not in ENDED:
            keys.add(key)
    return sorted(keys)


def pod_read(event: KubePod) -> object:
    """What this reconciler reads of a pod (``ReconcilerSpec.reads``): placement's part
    (:func:`reconcilers._pods.group_read`) without the conditions and tolerations, which no
    rule here looks at — so placement's ``PodScheduled`` writes (a pending job's reason and
    place in the queue, rewritten as the queue moves) trigger no decide here."""
    return msgspec.structs.replace(_pods.group_read(event), conditions=(), tolerations=())


SPEC = ReconcilerSpec(
    name=NAME,
    keys={KubePod: _group_of_pod, KubeNode: _deleting_on, SlurmJob: _pods.group_of_job},
    # A pod starting (Pending → Running, Ready) changes nothing here.
    reads={KubePod: pod_read},
    key_kind="PodGroup",
    all_keys=all_keys,
    view=view,
    decide=decide,
    description="cancel jobs of finished pods, delete pods of stopped jobs, release finalizers",
)
