"""``placement`` for a group without a job: submit its placeholder job — after the rules
that refuse it or make it wait, each a step over one :class:`SubmitPlan`
(:mod:`reconcilers._steps`) in the order Slinky slurm-bridge's ``PreFilter`` checks them —
or, for pods already running without one, re-back them (:func:`reback`) or delete the
orphans (:func:`orphans`). Module docstring of :mod:`reconcilers.placement`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import msgspec

from reconcilers import _dra, _hetjob, _pods, _tenancy
from reconcilers._steps import Plan, Step, Stop, run
from reconcilers.base import Decision
from reconcilers.placement._common import (
    COMPOSITE_INVALID,
    CONDITION,
    FEATURE_RECHECK_S,
    INELIGIBLE,
    LISTING_RECHECK_S,
    LOST,
    ORPHAN_RECHECK_S,
    PODGROUP_DONE,
    PODGROUP_GRACE_S,
    PODGROUP_MISSING,
    PODGROUP_NOT_PENDING,
    REJECTED,
    RESUBMIT_AFTER_S,
    adopt,
    label_job_id,
    reject,
)
from reconcilers.placement._view import View
from schemas import wellknown
from schemas.actions import (
    AnyAction,
    DeletePod,
    HetComponent,
    PodRef,
    SlurmJobSpec,
    SubmitSlurmJob,
)
from schemas.events import KubePod


@dataclass(slots=True)
class SubmitPlan(Plan):
    """The submit's plan: the group's live pods (set before the first step), and what the
    steps read on the way — the pods naming a PodGroup that does not exist (``alone``), the
    GPUs each pod's DRA claims ask for (pod key → count), the annotations that configure
    the job, the job's spec and its heterogeneous components."""

    live: list[KubePod] = field(default_factory=list)
    alone: list[KubePod] = field(default_factory=list)
    dra_gpus: dict[str, int] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    spec: SlurmJobSpec = field(default_factory=lambda: SlurmJobSpec(name=""))
    het: tuple[HetComponent, ...] = ()


def _refuse(
    plan: SubmitPlan, message: str, reason: str = wellknown.REASON_SLURM_JOB_INVALID
) -> Stop:
    return adopt(plan, reject(plan.live, message, reason))


def _wait(plan: SubmitPlan, reason: str, after: float | None = None) -> Stop:
    plan.requeue(after)
    return plan.stop(reason)


def refused_backoff(plan: SubmitPlan, v: View) -> Stop | None:
    """Slurm refused the group's job for good: no new submit until :data:`RESUBMIT_AFTER_S`
    after the refusal (:func:`refused_until`).
    Slinky has no back-off: its ``PostFilter`` retries each scheduling cycle."""
    retry_at = refused_until(plan.live)
    if retry_at > v.now:
        return _wait(
            plan,
            f"Slurm refused the group's job; submitting again in {retry_at - v.now:.0f} s",
            retry_at - v.now,
        )
    return None


def podgroup_done(plan: SubmitPlan, v: View) -> Stop | None:
    """Slinky slurm-bridge ``PreFilterPodGroupCoscheduling``: a PodGroup that is Running,
    Finished, Failed or Unknown is not placed again."""
    wl = v.workload
    if wl is not None and wl.workload_kind == "PodGroup" and wl.phase in PODGROUP_DONE:
        return _refuse(
            plan,
            f"PodGroup {wl.name} is {wl.phase}: its pods are not placed again",
            PODGROUP_NOT_PENDING,
        )
    return None


def podgroup_missing(plan: SubmitPlan, v: View) -> Stop | None:
    """The PodGroup the pods name does not exist (a complete list lacks it): Slinky
    translates such a pod from its owner (``slurmjobir.TranslateToSlurmJobIR``). Not at
    once: the PodGroup may be on its way (:data:`PODGROUP_GRACE_S` from the pod's
    creation)."""
    plan.alone = [
        p
        for p in plan.live
        if _pods.LABEL_POD_GROUP in p.labels and v.group.kind not in ("PodGroup", _pods.KIND_NATIVE)
    ]
    if not plan.alone:
        return None
    ready_at = max(p.created_at for p in plan.alone) + PODGROUP_GRACE_S
    if ready_at > v.now:
        return _wait(
            plan,
            "PodGroup not found: placing the pods without it in "
            f"{ready_at - v.now:.0f} s unless it appears",
            ready_at - v.now,
        )
    return None


def exclusions_checkable(plan: SubmitPlan, v: View) -> Stop | None:
    """Nodes to exclude while no Slurm node of the cluster is seen yet: wait for the first
    listing rather than submit with every exclusion dropped.
    Slinky slurmbridge.go ``PostFilter``: ``IsSlurmNode`` per node."""
    if v.unverified:
        return _wait(
            plan,
            f"waiting for a complete Slurm listing to exclude {', '.join(v.unverified)}",
            LISTING_RECHECK_S,
        )
    return None


def members(plan: SubmitPlan, v: View) -> Stop | None:
    """Every pod the group expects: a Workload API PodGroup with a gang policy waits for
    minCount pods, then the job is sized by the pods present (Slinky ``fromPodGroup``,
    ``PreFilterPodGroup``); a CompositePodGroup for its whole tree, refused when the tree
    is invalid (v1alpha3 ``CompositePodGroupReasonInvalid``)."""
    expected = _pods.expected_size(v.group, v.workload, v.template_owner)
    if v.group.root_key is not None and v.workload is None:
        return plan.stop(f"waiting for {v.group.root_key} to be observed")
    if v.group.kind == _pods.KIND_COMPOSITE:
        if v.workload is not None and v.workload.parent:
            return _refuse(
                plan,
                f"CompositePodGroup {v.group.name} names parent {v.workload.parent}: the group "
                f"tree has a cycle or is deeper than {wellknown.COMPOSITE_MAX_DEPTH} levels",
                COMPOSITE_INVALID,
            )
        expected = v.composite_size
    if expected and len(plan.live) < expected:
        return plan.stop(f"waiting for the group's pods: {len(plan.live)} of {expected}")
    return None


def claims(plan: SubmitPlan, v: View) -> Stop | None:
    """The GPUs each pod's DRA claims ask for, which size the job: the resourceclaim
    controller makes a template's claim when the pod is created, so a missing claim is a
    short wait.
    Slinky dra.go: a claim's GPUs are part of the job's GRES."""
    for p in plan.live:
        named = []
        for pc in p.claims:
            claim = v.claims.get(f"{p.namespace}/{pc.claim}") if pc.claim else None
            if claim is None:
                return plan.stop(f"waiting for ResourceClaim {pc.claim or pc.name} of pod {p.name}")
            named.append(claim)
        if p.claims or p.dra_requests:
            plan.dra_gpus[p.key] = _dra.gpus_asked(p, named, v.device_classes)
    return None


def owner_chain(plan: SubmitPlan, v: View) -> Stop | None:
    """A bare pod whose owner chain has a link not observed is not placed (Slinky
    slurmjobir ``owner.go``); the chain's root configures the job."""
    if v.owner_missing:
        return _refuse(plan, f"not placed: {v.owner_missing}", _pods.OWNER_MISSING)
    return None


def policy(plan: SubmitPlan, v: View) -> Stop | None:
    """The annotations that configure the job (the owner chain's root's for a bare pod),
    checked against the namespace's tenancy policy: defense in depth — the webhook denies
    such pods, but a pod admitted before the policy changed (or past the webhook) must never
    get a job.
    Slinky has no tenancy: ours (:mod:`reconcilers._tenancy`)."""
    plan.annotations = _pods.annotations_of(
        v.group,
        plan.live,
        v.workload,
        controller=v.controller,
        template_owner=v.template_owner,
        pod_group=v.pod_group,
    )
    if v.owner_root is not None:
        plan.annotations = v.owner_root.annotations
    denial = _tenancy.check(v.tenancy, v.group.namespace, plan.annotations)
    if denial is not None:
        return _refuse(plan, denial.message, _tenancy.DENIED)
    return None


def translate(plan: SubmitPlan, v: View) -> Stop | None:
    """The group as a Slurm job spec (:func:`reconcilers._pods.translate`), with its
    tenant's identity and defaults, the default partition and the MCS label; refused when it
    cannot be translated or names a partition Slurm does not have.
    Slinky slurmjobir ``TranslateToSlurmJobIR``, slurmcontrol.go ``buildJobDesc``."""
    try:
        spec = _pods.translate(
            v.group,
            plan.live,
            plan.annotations,
            excluded_nodes=v.excluded,
            workload=v.workload,
            dra_gpus=plan.dra_gpus,
            device_classes=v.device_classes,
            gres_compatible=v.gres_required,
        )
    except _pods.TranslationError as exc:
        return _refuse(plan, f"cannot become a Slurm job: {exc}")
    spec = _tenancy.apply(v.tenancy, v.group.namespace, spec)
    if not spec.partition and v.default_partition:
        spec = msgspec.structs.replace(spec, partition=v.default_partition)
    if v.mcs_label:
        spec = msgspec.structs.replace(spec, mcs_label=v.mcs_label)
    if spec.partition and spec.partition not in v.partitions:
        return _refuse(
            plan,
            f"cannot become a Slurm job: metadata.annotations["
            f"{_pods.PREFIX}partition]: Slurm has no partition {spec.partition!r}",
        )
    plan.spec = spec
    return None


def node_sizes(plan: SubmitPlan, v: View) -> Stop | None:
    """A task larger than any node of its partition is refused, but only from a complete
    listing: before it, a partition's largest node may simply not be seen yet.
    Slinky slurmbridge.go ``PostFilter``: ``ErrorNodeConfigInvalid`` is final."""
    if not _pods.sized_by_annotation(plan.annotations):
        return None
    if not v.listed:
        return _wait(
            plan, "waiting for a complete Slurm listing to check the job's size", LISTING_RECHECK_S
        )
    try:
        _pods.check_node_sizes(plan.spec, plan.annotations, v.node_sizes)
    except _pods.TranslationError as exc:
        return _refuse(plan, f"cannot become a Slurm job: {exc}")
    return None


def components(plan: SubmitPlan, v: View) -> Stop | None:
    """Pods of different shapes become a heterogeneous job's components
    (:func:`_het_components`).
    Slinky slurmcontrol.go ``buildJobDesc``."""
    try:
        plan.het = _het_components(v, plan.live, plan.annotations, plan.spec)
    except _pods.TranslationError as exc:
        return _refuse(plan, f"cannot become a Slurm job: {exc}")
    return None


def feature_listing(plan: SubmitPlan, v: View) -> Stop | None:
    """Every job requires ``slurm_bridge_gres_compatible``, and Slurm refuses a job whose
    feature no node of its partition has (2029 "Invalid feature specification", 2014:
    recorded from 26.05.5): submit only once a complete listing shows nodes carry it.
    Slinky slurmcontrol.go ``gresCompatibilityConstraint``."""
    if v.listed:
        return None
    return _wait(
        plan,
        "waiting for a complete Slurm listing to count the nodes carrying "
        f"{wellknown.FEATURE_GRES_COMPATIBLE}",
        LISTING_RECHECK_S,
    )


def eligible_nodes(plan: SubmitPlan, v: View) -> Stop | None:
    """Fewer eligible nodes in the job's partition than it needs (:func:`too_few_eligible`,
    Slinky slurm-bridge 1.3 ``populateComponentWithFeasibleNodes``): refused — or, when
    enough will be once node_register has put the feature on compatible nodes (a start-up,
    a node just joined), a wait."""
    spec = plan.spec
    short = too_few_eligible(v, spec.partition, spec.min_nodes)
    if not short:
        return None
    if not too_few_eligible(v, spec.partition, spec.min_nodes, soon=True):
        return _wait(
            plan,
            f"waiting for {wellknown.FEATURE_GRES_COMPATIBLE} on compatible nodes: {short}",
            FEATURE_RECHECK_S,
        )
    return _refuse(plan, short, INELIGIBLE)


def featured(plan: SubmitPlan, v: View) -> Stop | None:
    """No node the job may get carries the feature: Slurm would refuse the job (2029 /
    2014), so wait for it, or say why.
    Slinky slurmcontrol.go ``gresCompatibilityConstraint``."""
    partition = plan.spec.partition
    if v.featured is None or v.featured.get(partition, 1) != 0:
        return None
    feature = wellknown.FEATURE_GRES_COMPATIBLE
    if (v.featured_soon or {}).get(partition, 0):
        return _wait(plan, f"waiting for {feature} on compatible nodes", FEATURE_RECHECK_S)
    where = f"partition {partition}" if partition else "the default partition"
    return _refuse(
        plan,
        f"no Slurm node of {where} carries the feature {feature} every job requires "
        f"(see the node condition {wellknown.CONDITION_SLURM_GRES_COMPATIBLE})",
        INELIGIBLE,
    )


def submit_job(plan: SubmitPlan, v: View) -> Stop:
    """The placeholder job (its pods, marker, spec and components; the tenant's name), a
    Warning Event on each pod placed without the PodGroup it names, and a Normal Event on
    the first pod.
    Slinky slurmbridge.go ``PostFilter``: ``SubmitJob``, ``labelPodsWithJobId``."""
    live = plan.live
    tenant = v.tenancy.tenant_of(v.group.namespace)
    plan.extend(
        _pods.pod_event(
            p,
            PODGROUP_MISSING,
            f"PodGroup {p.labels[_pods.LABEL_POD_GROUP]} does not exist: placed as {v.group.key}",
            warning=True,
        )
        for p in plan.alone
    )
    plan.add(
        SubmitSlurmJob(
            cluster=v.cluster,
            group=v.group.key,
            marker=_pods.marker(v.group, _pods.root_uid(v.group, live, v.workload)),
            pods=tuple(PodRef.of(p) for p in live),
            spec=plan.het[0].spec if plan.het else plan.spec,
            scheduler_name=v.scheduler_name,
            components=plan.het,
            tenant=tenant.name if tenant else "",
        ),
        _pods.pod_event(
            live[0],
            "SlurmJobSubmitted",
            f"Placeholder job for {v.group.key} ({len(live)} pods) submitted to Slurm",
        ),
    )
    return plan.stop(f"submit placeholder job for {len(live)} pods")


#: The submit's rules in the order they refuse, wait or submit (Slinky slurm-bridge's
#: ``PreFilter`` order: the PodGroup, its members, the translation, the nodes).
SUBMIT_STEPS: tuple[Step[SubmitPlan, View], ...] = (
    refused_backoff,
    podgroup_done,
    podgroup_missing,
    exclusions_checkable,
    members,
    claims,
    owner_chain,
    policy,
    translate,
    node_sizes,
    components,
    feature_listing,
    eligible_nodes,
    featured,
    submit_job,
)


def submit(v: View, live: list[KubePod]) -> Decision:
    """Submit the group's placeholder job, or say why not yet: :data:`SUBMIT_STEPS`."""
    return run(SUBMIT_STEPS, SubmitPlan(live=live), v)


def too_few_eligible(v: View, partition: str, needed: int, *, soon: bool = False) -> str:
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


def refused_until(live: list[KubePod]) -> float:
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


def orphans(v: View, bound: list[KubePod]) -> Decision:
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
        actions.append(DeletePod(pod=PodRef.of(p), cluster=v.cluster, job_id=0, why=why))
        actions.append(_pods.pod_event(p, "SlurmJobMissing", f"Deleting pod: {why}", warning=True))
    return Decision(actions=tuple(actions), reason=f"{len(bound)} orphan pod(s) deleted")


def reback(v: View, live: list[KubePod], bound: list[KubePod]) -> Decision:
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
    refused = refused_until(bound) - RESUBMIT_AFTER_S
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
            deletes.append(DeletePod(pod=PodRef.of(p), cluster=v.cluster, job_id=0, why=why))
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
                pods=tuple(PodRef.of(p) for p in live),
                spec=spec,
                scheduler_name=v.scheduler_name,
            ),
            _pods.pod_event(bound[0], LOST, why, warning=True),
        ),
        reason=why,
    )


def _old_id(pods: list[KubePod]) -> str:
    return str(label_job_id(pods) or "?")


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
        out.append(HetComponent(spec=spec, pods=tuple(PodRef.of(p) for p in comp)))
    return tuple(out)
