"""``placement`` for a group whose job exists: label the pods, keep a pending job's
exclusions and the pods' word on why they wait, and — once the job runs — bind each pod to
the Kubernetes node of the Slurm node it was given, its DRA claims first (Slinky
slurm-bridge scheduler plugin ``PreBind``/``Bind``; module docstring of
:mod:`reconcilers.placement`). Each rule is a step over one :class:`GroupPlan`
(:mod:`reconcilers._steps`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconcilers import _dra, _feasible, _handoff, _hetjob, _pods
from reconcilers._steps import Plan, Stop
from reconcilers.placement._common import (
    CONDITION,
    DEVICES_FAILED,
    HANDOFF_RECHECK_S,
    INFEASIBLE,
    NEW_SHAPE,
    PENDING,
    refusals,
    say,
)
from reconcilers.placement._view import View
from schemas import wellknown
from schemas.actions import (
    AllocateResourceClaim,
    AnyAction,
    BindPod,
    CancelSlurmJob,
    ClaimRef,
    CreateExtendedResourceClaim,
    MarkPods,
    PodRef,
    SetJobExcludedNodes,
    SetPodGroupScheduled,
)
from schemas.events import KubeNodeUsage, KubePod, SlurmJob


@dataclass(slots=True)
class GroupPlan(Plan):
    """The placement plan of one group: its live pods (set before the first step), those a
    heterogeneous job's components can take (``fitting``), and what the bind pass found —
    the binds (with their claim actions and Events), what waits and why, the pods that no
    longer fit their node (pod, node, why) and the handoffs waited for."""

    live: list[KubePod] = field(default_factory=list)
    fitting: list[KubePod] = field(default_factory=list)
    binds: list[AnyAction] = field(default_factory=list)
    waits: list[str] = field(default_factory=list)
    unfit: list[tuple[KubePod, str, str]] = field(default_factory=list)
    handoff: list[str] = field(default_factory=list)


def _marked(p: KubePod, job_id: int) -> bool:
    return (
        p.labels.get(wellknown.LABEL_SLURM_JOBID) == str(job_id)
        and wellknown.FINALIZER_SCHEDULER in p.finalizers
        and (wellknown.TAINT_MANAGED_NODE in p.tolerations or "" in p.tolerations)
    )


def _ours_pending(v: View, job: SlurmJob | None) -> bool:
    return (
        job is not None
        and job.base_state == "PENDING"
        and _pods.group_key_of_marker(job.comment) == v.group.key
    )


def mark(plan: GroupPlan, v: View) -> None:
    """Label the pods with the job id, add the scheduler finalizer and the managed-node
    toleration (pods that joined after the submit too), in one patch per pod.
    Slinky slurmbridge.go ``labelPodsWithJobId`` and ``PreEnqueue``."""
    assert v.job_id is not None
    unmarked = [PodRef.of(p) for p in plan.live if not _marked(p, v.job_id)]
    if unmarked:
        plan.add(MarkPods(job_id=v.job_id, pods=tuple(unmarked), scheduler_name=v.scheduler_name))


def strays(plan: GroupPlan, v: View) -> None:
    """A heterogeneous job's pods of a shape none of its components has: said so on them,
    left out of the components' binding (and of the pending message).
    Slinky slurmcontrol.go ``buildJobDesc`` fixes the components at the submit."""
    stray: list[KubePod] = []
    if v.het_jobs:
        assert v.job_id is not None
        named = [_handoff.job_pods(j) if j is not None else frozenset() for j in v.het_jobs]
        stray = [p for p in _hetjob.strays(plan.live, named) if not p.node_name]
        plan.extend(_new_shape(stray, v.job_id))
    plan.fitting = [p for p in plan.live if p not in stray]


def exclusions(plan: GroupPlan, v: View) -> None:
    """Nodes cordoned or uncordoned since the submit: a pending job keeps the exclusions it
    was submitted with, so without this it could wait forever for nodes that are fine again
    (or be started on a node cordoned meanwhile). Never for a re-back job's
    ``required_nodes``.
    Slinky slurmbridge.go ``PostFilter``: ``UpdateJob`` while no node is allocated."""
    job = v.job
    if (
        job is not None
        and _ours_pending(v, job)
        and not job.required_nodes
        and sorted(job.excluded_nodes) != list(v.excluded)
    ):
        plan.add(
            SetJobExcludedNodes(
                cluster=v.cluster, job_id=job.job_id, marker=job.comment, excluded_nodes=v.excluded
            )
        )


def not_running(plan: GroupPlan, v: View) -> Stop | None:
    """A job not RUNNING on nodes yet: nothing to bind; a pending job of ours says why on
    each waiting pod (Slurm's reason and the queue place, :func:`_pending`).
    Slinky slurmbridge.go ``PreFilter``: ``ErrorNoNodesAssigned``, pending."""
    job = v.job
    if job is not None and job.base_state == "RUNNING" and job.nodes:
        return None
    state = job.base_state if job is not None else "not yet seen"
    reason = f"job {v.job_id} is {state}"
    if job is not None and _ours_pending(v, job):
        message = wellknown.pending_message(job.state_reason, v.queue_position, job.partition)
        plan.extend(_pending(plan.fitting, job.job_id, message))
        reason += f": {message}"
    return plan.stop(reason)


def components_start(plan: GroupPlan, v: View) -> Stop | None:
    """A heterogeneous job binds once every component runs.
    Slinky slurmbridge.go ``PreFilter``: no node of the job yet."""
    if v.het_jobs and not _hetjob.running(v.het_jobs):
        return plan.stop(f"job {v.job_id}: components start")
    return None


def bind_each(plan: GroupPlan, v: View) -> None:
    """Each unbound pod to the node Slurm gave it (spread over the job's nodes by name; a
    heterogeneous job's pod over its own component's), re-checked against the node now
    (:func:`reconcilers._feasible.fits`, the pods bound earlier in this pass counted in),
    its DRA claims allocated first.
    Slinky slurmbridge.go ``annotatePodsWithNodes``, ``PreBind``, dra.go."""
    job = v.job
    assert job is not None
    targets: dict[str, tuple[int, str]] = {}
    by_id: dict[int, SlurmJob] = {}
    if v.het_jobs:
        comps = _hetjob.components(v.group, plan.fitting, {}) or [plan.fitting]
        targets = _hetjob.bind_targets(comps, v.het_jobs)
        by_id = {j.job_id: j for j in v.het_jobs if j is not None}
    held: dict[str, set[_dra.DeviceId]] = {}
    usage = dict(v.usage)
    for i, p in enumerate(plan.live):
        if p.node_name:
            continue
        slurm_node, placed = job.nodes[i % len(job.nodes)], job
        if v.het_jobs:
            # A heterogeneous job: the pod goes to a node of its own component's job.
            if p.key not in targets:
                plan.waits.append(f"{p.name}: in no component of job {v.job_id}")
                continue
            component_id, slurm_node = targets[p.key]
            placed = by_id[component_id]
        _bind_one(plan, v, p, placed, slurm_node, usage, held)


def _bind_one(
    plan: GroupPlan,
    v: View,
    p: KubePod,
    placed: SlurmJob,
    slurm_node: str,
    usage: dict[str, KubeNodeUsage],
    held: dict[str, set[_dra.DeviceId]],
) -> None:
    """Bind ``p`` to the Kubernetes node of ``slurm_node``, or say why not: no such node, a
    handoff to wait for, a misfit (``plan.unfit``), DRA devices not there yet or not
    possible. ``usage`` and ``held`` gain what the bind takes."""
    assert v.job_id is not None
    kube_node = v.node_map.get(slurm_node)
    if kube_node is None:
        msg = f"Slurm node {slurm_node} of job {v.job_id} has no Kubernetes node"
        plan.binds.append(_pods.pod_event(p, "SlurmNodeUnknown", msg, warning=True))
        return
    node = v.kube_nodes.get(kube_node)
    if node is not None:
        # Re-checked now: the node may have changed since the submit. The pods bound before
        # this one in this pass count into the node's usage.
        why = _feasible.fits(p, node, usage.get(kube_node))
        if why is not None and _handoff.waits_for_handoff(
            p, node, usage.get(kube_node), v.occupants.get(kube_node, ()), v.occupant_jobs
        ):
            plan.handoff.append(f"{p.name}: {kube_node} is being released by an ended job")
            return
        if why is not None:
            plan.unfit.append((p, kube_node, why))
            return
    if _dra.needs_dra(p):
        taken = held.setdefault(kube_node, set(_dra.taken_on(kube_node, v.claims.values())))
        try:
            claim_actions, wait = _claim_actions(v, placed, p, slurm_node, kube_node, taken)
        except _dra.DraError as exc:
            plan.extend(refusals([p], DEVICES_FAILED, f"cannot allocate DRA devices: {exc}"))
            return
        if wait:
            plan.waits.append(f"{p.name}: {wait}")
            return
        plan.binds.extend(claim_actions)
    if node is not None:
        usage[kube_node] = _feasible.plus(usage.get(kube_node), p, kube_node)
    plan.binds.append(
        BindPod(pod=PodRef.of(p), node=kube_node, slurm_node=slurm_node, job_id=v.job_id)
    )
    plan.binds.append(_pods.pod_event(p, "Scheduled", _started(placed, slurm_node, kube_node)))


def misfits(plan: GroupPlan, v: View) -> Stop | None:
    """Some pods do not fit the nodes Slurm gave their job and may not wait for a handoff
    (module docstring, :mod:`reconcilers._handoff`): never bind them; cancel the job (ours
    only), even when pods of the group already run on it — waiting could last for ever
    (Slinky slurm-bridge 1.3 eligibility.go ``allocatedNodeWaitingForBridge``)."""
    if not plan.unfit:
        return None
    job = v.job
    assert job is not None
    warnings = [
        _pods.pod_event(
            p,
            INFEASIBLE,
            f"Slurm job {v.job_id} was allocated node {node}, which no longer fits the pod: {why}",
            warning=True,
        )
        for p, node, why in plan.unfit
    ]
    pod, node, why = plan.unfit[0]
    first = f"{pod.name} on {node}: {why}"
    if _pods.group_key_of_marker(job.comment) != v.group.key:
        # A job that is not ours is never cancelled: bind what fits, leave the rest Pending
        # with the Event.
        plan.extend([*plan.binds, *warnings])
        return plan.stop(
            f"job {v.job_id} RUNNING; {len(plan.unfit)} pod(s) do not fit ({first}); "
            "not cancelled: the job is not ours"
        )
    cancel = CancelSlurmJob(
        cluster=v.cluster,
        job_id=job.job_id,
        marker=job.comment,
        why=f"its allocation no longer fits the pods ({first}): submitting again",
    )
    # The Events follow the cancel, so they are recorded once, when it is carried out.
    plan.extend([cancel, *warnings])
    return plan.stop(
        f"job {v.job_id} RUNNING but {len(plan.unfit)} pod(s) do not fit ({first}): cancelled"
    )


def bound(plan: GroupPlan, v: View) -> Stop:
    """The binds, the Workload API PodGroup's scheduled condition once every pod is bound,
    and a re-check while a handoff is waited for (nothing announces an occupant leaving
    another group's node).
    Slinky podgroup_status.go ``markPodGroupScheduled``."""
    assert v.job_id is not None
    unbound = [p for p in plan.live if not p.node_name]
    plan.extend(plan.binds)
    if not unbound and (admitted := _pod_group_admitted(v, plan.live, v.job_id)) is not None:
        plan.add(admitted)
    plan.requeue(HANDOFF_RECHECK_S if plan.handoff else None)
    waits = [*plan.waits, *plan.handoff]
    if plan.actions:
        return plan.stop(f"job {v.job_id} RUNNING; {len(unbound)} to bind")
    if waits:
        return plan.stop(f"job {v.job_id} RUNNING; waiting: {'; '.join(waits)}")
    return plan.stop()


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


def _new_shape(stray: list[KubePod], job_id: int) -> list[AnyAction]:
    """``PodScheduled=False`` (reason :data:`NEW_SHAPE`) and a Warning Event, once per pod
    (when its condition changes), on each unbound pod whose shape is that of no component of
    the group's heterogeneous job (:func:`reconcilers._hetjob.strays`)."""
    actions: list[AnyAction] = []
    for p in stray:
        cpu, memory, gpus = _hetjob.shape(p)
        message = (
            f"pod {p.name} ({cpu}m CPU, {memory // (1024 * 1024)} MiB, {gpus} GPU) joined "
            f"after heterogeneous Slurm job {job_id} was submitted and has the shape of none "
            "of its components: Slurm gave it no node, so it is not bound while that job runs"
        )
        actions.extend(refusals([p], NEW_SHAPE, message))
    return actions


def _pending(live_pods: list[KubePod], job_id: int, message: str) -> list[AnyAction]:
    """``PodScheduled=False`` (reason :data:`PENDING`, ``message``) on each live unbound pod
    whose condition differs (:func:`reconcilers.placement._common.say`); a pod that was
    not waiting on Slurm before also gets a Normal Event (after the write: only when it
    changed something).

    A pod already told it waits is told again only when ``wellknown.pending_rewrite_due``:
    Slurm's reason changed, or its place is among the first ten or has halved or doubled.

    The write keeps status False, so the condition's ``lastTransitionTime`` stays (the
    effector moves it only when the status flips), and it never carries reason
    ``SlurmJobRejected``: the refused-submit back-off is not touched.
    """
    actions: list[AnyAction] = []
    for p in live_pods:
        if p.node_name or (write := say(p, PENDING, message)) is None:
            continue
        cur = p.condition(CONDITION)
        waiting = cur is not None and cur.status == "False" and cur.reason == PENDING
        if waiting and cur is not None and not wellknown.pending_rewrite_due(cur.message, message):
            continue  # the place moved a little: told when it has halved (or doubled)
        actions.append(write)
        if not waiting:
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
                pod=PodRef.of(p),
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
                    pod=PodRef.of(p),
                    node=kube_node,
                    requests=requests,
                    devices=devices,
                    mappings=mappings,
                )
            )
    return out, ""
