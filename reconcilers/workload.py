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

import msgspec

from reconcilers import _pods
from reconcilers.base import (
    NOTHING,
    Context,
    Decision,
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
    ids = [
        int(raw) for p in pods if (raw := p.labels.get(wellknown.LABEL_SLURM_JOBID, "")).isdigit()
    ]
    job_id = max(ids) if ids else None
    job = store.get(SlurmJob, str(job_id), source) if job_id is not None else None
    root = store.get(KubeWorkload, group.root_key) if group.root_key else None
    if job is not None and not _pods.is_groups_job(
        job.comment, group, _pods.root_uid(group, list(pods), root)
    ):
        # Someone else's job under the id the pods name (a user's, or another group's after
        # slurmctld restarted from older state and handed the id out again): no job of the
        # group — never cancelled, never a reason to keep or delete the pods.
        job = None
    if job is None and job_id is None:
        # No pod names the job: find a job of ours that names this group (rule 5).
        job = next(
            (
                j
                for j in store.values(SlurmJob, source)
                if _pods.group_key_of_marker(j.comment) == group.key and j.base_state not in ENDED
            ),
            None,
        )
        job_id = job.job_id if job is not None else None
    duplicates: tuple[SlurmJob, ...] = ()
    if job is not None and ids and _pods.group_key_of_marker(job.comment) == group.key:
        named = set(ids)
        # The components of a heterogeneous job share its marker: the pods name the het job
        # (its leader), and a component is no duplicate.
        duplicates = tuple(
            j
            for j in store.by_field(SlurmJob, "comment", job.comment)
            if j.source == source
            and j.job_id not in named
            and j.het_job_id not in named
            and j.base_state not in ENDED
        )
    het = (
        tuple(store.get(SlurmJob, str(i), source) for i in job.het_job_ids)
        if job is not None and len(job.het_job_ids) > 1
        else ()
    )
    node_ready: dict[str, bool] = {}
    for p in pods:
        if p.deleting and p.node_name and p.node_name not in node_ready:
            n = store.get(KubeNode, p.node_name)
            if n is not None:
                node_ready[p.node_name] = n.ready
    return View(
        group=group,
        pods=pods,
        job=job,
        job_id=job_id,
        duplicates=duplicates,
        node_ready=node_ready,
        cluster=ctx.cluster,
        now=ctx.now,
        grace_s=ctx.stuck_pod_grace_s,
        preemption_grace_s=ctx.preemption_grace_s,
        slurm_listed=slurm_listed(store, ctx.cluster),
        pods_listed=kube_listed(store, PODS_LISTING),
        gang_size=_gang_size(store, group),
        claims=_claims_of(store, pods),
        lost_job_grace_s=ctx.lost_job_grace_s,
        het_jobs=het,
    )


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
                out.append(ReleaseResourceClaim(claim=ref, pod=_ref(p), delete=True))
            elif not mine and c.reserved_for_pod(p.uid):
                out.append(ReleaseResourceClaim(claim=ref, pod=_ref(p)))
    return out


def _gang_size(store: Store, group: _pods.Group) -> int:
    if group.kind not in GANGS or group.root_key is None:
        return 0
    root = store.get(KubeWorkload, group.root_key)
    return _pods.expected_size(group, root, _pods.template_owner_of(root, store))


def _ref(p: KubePod) -> PodRef:
    return PodRef(namespace=p.namespace, name=p.name, uid=p.uid)


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


def decide(v: View | None) -> Decision:
    """Delete pods of stopped jobs, cancel jobs of finished groups, release finalizers."""
    if v is None:
        return Decision(reason="not a pod group key")
    status = job_status(v)
    job_label = f"job {v.job_id}" if v.job_id is not None else "no job"
    actions: list[AnyAction] = []
    requeue: float | None = None

    if not v.pods:
        # Rule 5: a job of ours with no pod left — once the log holds a complete list of the
        # pods: on a first start the Slurm listing may arrive before the pods' (a slow or
        # paged list, an API server answering 503), and a running job's pods would look gone.
        if v.job is not None and v.job_id is not None and _cancellable(v):
            if not v.pods_listed:
                return Decision(
                    requeue_after=LISTING_RECHECK_S,
                    reason=f"{job_label}: no pod seen, but the pods are not listed yet",
                )
            return Decision(
                actions=_cancels(v, f"every pod of {v.group.key} is gone"),
                reason=f"{job_label}: every pod of the group is gone",
            )
        return NOTHING

    # Rule 7: a gang that fell below its size while its job still waits.
    live = [p for p in v.pods if not _done(p)]
    if (
        v.gang_size
        and len(live) < v.gang_size
        and status == "pending"
        and v.job is not None
        and v.job_id is not None
        and not v.job.required_nodes
        and _cancellable(v)
    ):
        why = (
            f"{v.group.key} has {len(live)} of its {v.gang_size} pods while {job_label} is "
            "pending: a short gang never holds nodes"
        )
        return Decision(
            actions=(
                CancelSlurmJob(cluster=v.cluster, job_id=v.job_id, marker=v.job.comment, why=why),
                *(
                    SetPodLabel(pod=_ref(p), label=wellknown.LABEL_SLURM_JOBID, value=None)
                    for p in live
                    if wellknown.LABEL_SLURM_JOBID in p.labels
                ),
                *(_pods.pod_event(p, "SlurmJobCancelled", why) for p in live[:1]),
                *_releases(v),
            ),
            reason=why,
        )

    # Rule 6: duplicates of the group's job.
    actions.extend(
        CancelSlurmJob(
            cluster=v.cluster,
            job_id=d.job_id,
            marker=d.comment,
            why=f"duplicate placeholder of {v.group.key}: its pods run under {job_label}",
        )
        for d in v.duplicates
    )

    # Rule 9: a re-back job still within its grace keeps its pods.
    left = _reback_left(v)
    if left is not None and left > 0:
        requeue = left
        status = f"pending (re-backing pods whose job Slurm lost; {left:.0f} s left to start)"
    # Rule 1: pods whose job stopped (a lost job's pods are re-backed by placement).
    elif v.job_id is not None and status in ("ended", "pending"):
        state = v.job.base_state if v.job is not None else "gone from Slurm"
        marker = v.job.comment if v.job is not None else ""
        why_extra = ""
        if left is not None:
            why_extra = (
                f" {v.lost_job_grace_s:.0f} s after its submit: it re-backed pods whose job "
                "Slurm lost, and could not start on their nodes"
            )
        for p in v.pods:
            if p.node_name and not p.terminal and not p.deleting:
                if state == "PREEMPTED":
                    actions.extend(_preempted(v, p, v.job_id))
                    continue
                why = f"Slurm {job_label} is {state}{why_extra}"
                actions.append(
                    DeletePod(
                        pod=_ref(p), cluster=v.cluster, job_id=v.job_id, why=why, marker=marker
                    )
                )
                actions.append(_pods.pod_event(p, "SlurmJobStopped", f"Deleting pod: {why}"))
        if (
            left is not None
            and v.job is not None
            and any(isinstance(a, DeletePod) for a in actions)
        ):
            # The re-back job only held its pods' nodes: once they go it would start there
            # for nobody. Only while still pending — one that started meanwhile keeps them
            # (the deletes are skipped by the effector then, too).
            actions.append(
                CancelSlurmJob(
                    cluster=v.cluster,
                    job_id=v.job_id,
                    marker=v.job.comment,
                    why=f"re-back {job_label} did not start within {v.lost_job_grace_s:.0f} s",
                    pending_only=True,
                )
            )

    # Rule 8: the claims of pods that ended, before the group's finalizers go (rule 2).
    releases = _releases(v)
    actions.extend(releases)

    # Rule 2: the whole group finished.
    if all(_done(p) for p in v.pods):
        if v.job is not None and v.job_id is not None and _cancellable(v):
            actions.extend(_cancels(v, f"every pod of {v.group.key} has finished"))
        actions.extend(
            RemovePodFinalizer(pod=_ref(p), finalizer=FINALIZER, why="group finished")
            for p in v.pods
            if FINALIZER in p.finalizers
        )
        return Decision(actions=tuple(actions), reason=f"{job_label}: the group has finished")

    for p in v.pods:
        if FINALIZER not in p.finalizers or not p.deleting or _done(p):
            continue
        # Rule 3: deleted after the job ended (or Slurm lost it).
        if status in ("ended", "lost"):
            actions.append(RemovePodFinalizer(pod=_ref(p), finalizer=FINALIZER, why="job ended"))
            continue
        # Rule 4: stuck Terminating on a node without a kubelet.
        if p.node_name and not v.node_ready.get(p.node_name, False):
            # The API server sets deletionTimestamp to the *end* of the grace period.
            due = p.deletion_timestamp + v.grace_s
            if v.now >= due:
                why = (
                    f"node {p.node_name} has not answered for {v.grace_s:.0f} s after the "
                    "pod's deletion grace period: finalizer removed so the deletion completes"
                )
                actions.append(RemovePodFinalizer(pod=_ref(p), finalizer=FINALIZER, why=why))
                actions.append(_pods.pod_event(p, "KubeletUnresponsive", why, warning=True))
            else:
                wait = due - v.now
                requeue = wait if requeue is None else min(requeue, wait)
    if status == "unknown" and not v.slurm_listed and _bound(v):
        requeue = min(requeue or LISTING_RECHECK_S, LISTING_RECHECK_S)
        status = "unknown (no current listing of the Slurm cluster)"
    reason = f"{job_label} is {status}"
    if releases:
        reason += f"; releasing the ResourceClaims of {_count(releases)} ended pod(s)"
    if not actions:
        return Decision(requeue_after=requeue, reason=reason)
    return Decision(actions=tuple(actions), requeue_after=requeue, reason=reason)


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
            pod=_ref(p),
            type=wellknown.CONDITION_DISRUPTION_TARGET,
            status="True",
            reason=wellknown.REASON_PREEMPTION_BY_SCHEDULER,
            message=f"Slurm preempted job {job_id} to accommodate a higher priority job",
        ),
        DeletePod(pod=_ref(p), cluster=v.cluster, job_id=job_id, why=why, grace_period_s=grace),
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


SPEC = ReconcilerSpec(
    name=NAME,
    keys={KubePod: _group_of_pod, KubeNode: _deleting_on, SlurmJob: _pods.group_of_job},
    # A pod starting (Pending → Running, Ready) changes nothing here.
    reads={KubePod: _pods.group_read},
    key_kind="PodGroup",
    all_keys=all_keys,
    view=view,
    decide=decide,
    description="cancel jobs of finished pods, delete pods of stopped jobs, release finalizers",
)
