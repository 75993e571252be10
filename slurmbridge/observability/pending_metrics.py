"""Why pods wait: ``slurmbridge_pending_pods{reason}``, kept from the projection's events.

The gauge counts the pods slurmbridge places (``schedulerName`` ours) that are not bound, not
finished and not being deleted, by the reason their ``PodScheduled`` condition gives — the
question users ask most ("why is my pod pending", Slinky slurm-bridge #45):

* ``SlurmJobPending:<Slurm's reason>`` — the group's job waits in Slurm's queue
  (``SlurmJobPending:Priority``, ``SlurmJobPending:Resources`` …: squeue's JOB REASON CODES,
  read from the head of the condition's message, see
  :func:`schemas.wellknown.pending_message`);
* ``SlurmJobInvalid``, ``SlurmJobRejected``, ``PodGroupNotSchedulable`` … — any other
  ``PodScheduled=False`` reason placement or the effector wrote;
* ``submitted`` — the pod names its job but no reason was written yet (the job is not yet
  seen in Slurm's listing);
* ``waiting-for-group`` — no job yet and no reason: the group is still incomplete (its
  other pods, its root object, a PodGroup's grace) or not yet decided.

Label values are bounded: reasons are enumerations (Kubernetes condition reasons, Slurm's
reason codes), never object names. Each KubePod event moves one pod between two values
(O(1)). The gauge is process-wide: one instance per process (the app's projection) feeds it.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from prometheus_client import Gauge

from schemas import wellknown
from schemas.events import Event, KubePod

PENDING_PODS: Final = Gauge(
    "slurmbridge_pending_pods",
    "Unbound pods of ours by why they wait (their PodScheduled reason)",
    ["reason"],
)
#: Reasons of pods without a ``PodScheduled=False`` condition (module docstring).
SUBMITTED: Final = "submitted"
WAITING_FOR_GROUP: Final = "waiting-for-group"


def pending_reason(pod: KubePod, scheduler_name: str) -> str | None:
    """The ``reason`` label of ``pod`` (module docstring), or None when it does not wait:
    not ours, bound, finished, being deleted, or a tombstone."""
    if pod.deleted or pod.scheduler_name != scheduler_name:
        return None
    if pod.node_name or pod.terminal or pod.deleting:
        return None
    cond = pod.condition(wellknown.CONDITION_POD_SCHEDULED)
    if cond is not None and cond.status == "False" and cond.reason:
        if cond.reason == wellknown.REASON_SLURM_JOB_PENDING:
            return f"{cond.reason}:{wellknown.pending_reason_of(cond.message)}"
        return cond.reason
    if wellknown.LABEL_SLURM_JOBID in pod.labels:
        return SUBMITTED
    return WAITING_FOR_GROUP


class PendingPodMetrics:
    """A projection listener that keeps :data:`PENDING_PODS` (see the module docstring)."""

    def __init__(self, scheduler_name: str) -> None:
        self.scheduler_name = scheduler_name
        self._reason: dict[str, str] = {}  # pod key → its reason now
        self._count: Counter[str] = Counter()

    def observe(self, event: Event, seq: int) -> None:
        """Projection listener: apply one observation (other kinds are ignored)."""
        del seq
        if not isinstance(event, KubePod):
            return
        old = self._reason.pop(event.key, None)
        new = pending_reason(event, self.scheduler_name)
        if old == new:
            if new is not None:
                self._reason[event.key] = new
            return
        if old is not None:
            self._count[old] -= 1
            PENDING_PODS.labels(old).set(self._count[old])
        if new is not None:
            self._reason[event.key] = new
            self._count[new] += 1
            PENDING_PODS.labels(new).set(self._count[new])
