"""Names and small rules every part of ``placement`` shares: the condition reasons and
re-check intervals (re-exported by :mod:`reconcilers.placement`), which pods are live, the
group's job id from its pods' label, and the ``PodScheduled=False`` write each refusal and
wait makes once."""

from __future__ import annotations

from collections.abc import Iterable

from reconcilers import _pods
from reconcilers._steps import STOP, Plan, Stop
from reconcilers.base import Decision
from schemas import wellknown
from schemas.actions import AnyAction, PodRef, SetPodCondition
from schemas.events import KubePod, SlurmJob

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
#: PodScheduled reason when the devices Slurm gave a pod's job cannot become its claims.
DEVICES_FAILED = "DeviceAllocationFailed"
#: Warning Event reason on the pods of a group whose job Slurm lost.
LOST = "SlurmJobLost"


def live(p: KubePod) -> bool:
    """A pod that neither finished nor is being deleted: only these are placed."""
    return not p.terminal and not p.deleting


def ended(job: SlurmJob | None) -> bool:
    """``job`` is seen and in a final state (``wellknown.JOB_ENDED_STATES``)."""
    return job is not None and job.base_state in ENDED


def label_job_id(pods: Iterable[KubePod]) -> int | None:
    """The job id on the pods' ``slurm-jobid`` label (``wellknown.slurm_job_id``; the
    highest when they disagree), None when no pod names one."""
    ids = [i for p in pods if (i := wellknown.slurm_job_id(p.labels)) is not None]
    return max(ids) if ids else None


def say(p: KubePod, reason: str, message: str) -> SetPodCondition | None:
    """``PodScheduled=False`` with ``reason`` and ``message`` on ``p``, or None when its
    condition already says exactly that (a re-decide writes nothing: issue 30, item 3)."""
    cur = p.condition(CONDITION)
    if cur is not None and (cur.status, cur.reason, cur.message) == ("False", reason, message):
        return None
    return SetPodCondition(
        pod=PodRef.of(p), type=CONDITION, status="False", reason=reason, message=message
    )


def refusals(pods: Iterable[KubePod], reason: str, message: str) -> list[AnyAction]:
    """:func:`say` and a Warning Event ``reason`` on each pod whose condition changes."""
    actions: list[AnyAction] = []
    for p in pods:
        if (write := say(p, reason, message)) is not None:
            actions += [write, _pods.pod_event(p, reason, message, warning=True)]
    return actions


def reject(pods: list[KubePod], message: str, reason: str = INVALID) -> Decision:
    """The group is not placed, and each pod says why (:func:`refusals`)."""
    return Decision(actions=tuple(refusals(pods, reason, message)), reason=message)


def adopt(plan: Plan, decision: Decision) -> Stop:
    """End ``plan`` with what a rule written as one :class:`reconcilers.base.Decision`
    decided: its actions after the plan's, its re-check, its reason."""
    plan.extend(decision.actions)
    plan.requeue(decision.requeue_after)
    plan.reason = decision.reason
    return STOP
