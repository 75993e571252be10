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

The package: :mod:`~reconcilers.placement._view` reads a group (:func:`view`),
:mod:`~reconcilers.placement.submit` holds the rules of a group without a job,
:mod:`~reconcilers.placement.bind` those of a group with one, and
:mod:`~reconcilers.placement.triggers` what re-decides a group. :func:`decide` runs
:data:`STEPS`, each a named rule over one plan (:mod:`reconcilers._steps`).
"""

from __future__ import annotations

import msgspec

from reconcilers import _pods, _tenancy
from reconcilers._steps import Step, Stop, run
from reconcilers.base import Decision, ReconcilerSpec
from reconcilers.placement import bind, submit, triggers
from reconcilers.placement._common import (
    COMPOSITE_INVALID,
    CONDITION,
    DEVICES_FAILED,
    ENDED,
    FEATURE_RECHECK_S,
    HANDOFF_RECHECK_S,
    INELIGIBLE,
    INFEASIBLE,
    INVALID,
    LISTING_RECHECK_S,
    LOST,
    NAME,
    NEW_SHAPE,
    ORPHAN_RECHECK_S,
    PENDING,
    PODGROUP_DONE,
    PODGROUP_GRACE_S,
    PODGROUP_MISSING,
    PODGROUP_NOT_PENDING,
    REJECTED,
    RESUBMIT_AFTER_S,
    adopt,
    live,
)
from reconcilers.placement._view import View, queue_position, view
from reconcilers.placement.bind import GroupPlan
from reconcilers.placement.triggers import all_keys, usage_read
from schemas import wellknown
from schemas.actions import AnyAction
from schemas.events import KubePod

__all__ = [
    "COMPOSITE_INVALID",
    "CONDITION",
    "DEVICES_FAILED",
    "ENDED",
    "FEATURE_RECHECK_S",
    "HANDOFF_RECHECK_S",
    "INELIGIBLE",
    "INFEASIBLE",
    "INVALID",
    "LISTING_RECHECK_S",
    "LOST",
    "NAME",
    "NEW_SHAPE",
    "ORPHAN_RECHECK_S",
    "PENDING",
    "PODGROUP_DONE",
    "PODGROUP_GRACE_S",
    "PODGROUP_MISSING",
    "PODGROUP_NOT_PENDING",
    "REJECTED",
    "RESUBMIT_AFTER_S",
    "SPEC",
    "STEPS",
    "View",
    "all_keys",
    "decide",
    "queue_position",
    "usage_read",
    "view",
]


def _warn_once(p: KubePod, message: str, occasion: str) -> AnyAction:
    event = _pods.pod_event(p, wellknown.REASON_NOT_SERVED, message, warning=True)
    return msgspec.structs.replace(event, once=occasion)


def left_alone(plan: GroupPlan, v: View) -> Stop | None:
    """Pods placement never touches (reconcilers._tenancy): NodeSet slurmd pods with our
    schedulerName, and every pod of a namespace the bridge does not serve. Each gets one
    Warning Event (``once``), nothing else — not even on a namespace dropped from the
    settings after its pods got a job (never undo what was done).
    Slinky has no such rule: its plugin places every pod with its schedulerName."""
    slurmd = (
        "a NodeSet slurmd pod (a Slurm node itself) is never placed through a Slurm job: "
        "the pod is left alone"
    )
    warned = [_warn_once(p, slurmd, "slurmd") for p in v.slurmd if live(p)]
    if not v.served and plan.live:
        message = _tenancy.not_served_message(v.group.namespace)
        plan.extend([*warned, *(_warn_once(p, message, "not-served") for p in plan.live)])
        return plan.stop(message)
    if warned and not plan.live:
        plan.extend(warned)
        return plan.stop("NodeSet slurmd pods are left alone")
    return None


def nothing_live(plan: GroupPlan, _v: View) -> Stop | None:
    """A group with no live pod: nothing to place (``workload`` cleans up after it).
    Slinky: kube-scheduler's ``SchedulingQueue`` holds live pods only."""
    return plan.stop() if not plan.live else None


def without_job(plan: GroupPlan, v: View) -> Stop | None:
    """No job of the group's: submit one (:func:`reconcilers.placement.submit.submit`) —
    unless pods already run, whose lost job is re-backed
    (:func:`reconcilers.placement.submit.reback`) or which are orphans
    (:func:`reconcilers.placement.submit.orphans`).
    Slinky slurmbridge.go ``PostFilter``: ``GetJob`` finds none, ``SubmitJob``."""
    if v.job_id is not None:
        return None
    bound = [p for p in plan.live if p.node_name]
    if bound and v.reback:
        return adopt(plan, submit.reback(v, plan.live, bound))
    if bound:
        return adopt(plan, submit.orphans(v, bound))
    return adopt(plan, submit.submit(v, plan.live))


#: The rules in the order they decide (module docstring; the action order is theirs).
STEPS: tuple[Step[GroupPlan, View], ...] = (
    left_alone,
    nothing_live,
    without_job,
    bind.mark,
    bind.strays,
    bind.exclusions,
    bind.not_running,
    bind.components_start,
    bind.bind_each,
    bind.misfits,
    bind.bound,
)


def decide(v: View | None) -> Decision:
    """Submit, label, or bind: :data:`STEPS` over the group's view (module docstring)."""
    if v is None:
        return Decision(reason="not a pod group key")
    return run(STEPS, GroupPlan(live=[p for p in v.pods if live(p)]), v)


SPEC = ReconcilerSpec(
    name=NAME,
    keys=triggers.KEYS,
    reads=triggers.READS,
    changed=triggers.CHANGED,
    key_kind="PodGroup",
    all_keys=all_keys,
    view=view,
    decide=decide,
    description="schedule pods through Slurm placeholder jobs and bind them",
)
