"""When a gang member that does not fit the node Slurm gave its job may wait (pure; used by
:mod:`reconcilers.placement` just before binding).

Source: Slinky slurm-bridge 1.3 ``internal/scheduler/plugins/slurmbridge/eligibility.go``
(``allocatedNodeWaitingForBridge``, ``nodeEligibleForSlurm``, ``podAllocationID``) and its
tables in ``eligibility_test.go`` (``TestPostFilterAllocatedGangHandoff``,
``TestPostFilterSharedGangsDoNotWaitForEachOther``).

Slurm may start a job on a node before Kubernetes sees the pods of the job that ran there
before leave it. Waiting for that *handoff* is the only wait: the pod waits (its job is kept,
so are the members already bound) only when

* its only misfit on the node is NodeResourcesFit — every other filter passes on the node as
  it is (:func:`reconcilers._feasible.constraints`: a taint, an affinity or a host port never
  waits);
* and it fits once the *releasing* occupants are taken off the node: pods of ours bound there
  under another Slurm allocation (a positive ``slurm-jobid`` label other than the pod's own)
  that are terminating, Succeeded or Failed, or whose job has ended *and* names exactly that
  pod, namespace included, in its ``admin_comment`` (a job that is missing, pending, running
  or in an unknown state, or that names another pod, proves nothing).

In every other case — a live allocation holding the resources, usage by pods that are not
ours, the pod's own allocation — waiting could last for ever (two shared gangs each holding
what the other needs never finish), so the job is cancelled and the group submitted again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from reconcilers import _feasible
from schemas import wellknown
from schemas.events import KubeNode, KubeNodeUsage, KubePod, SlurmJob


class _JobPods(msgspec.Struct, frozen=True):
    pods: list[str] = []


_DECODE_JOB_PODS = msgspec.json.Decoder(_JobPods)


def allocation_id(pod: KubePod) -> int:
    """The Slurm allocation a pod belongs to: its ``slurm-jobid`` label when a positive
    integer, else 0 (``podAllocationID``)."""
    return wellknown.slurm_job_id(pod.labels) or 0


def job_pods(job: SlurmJob) -> frozenset[str]:
    """The ``namespace/name`` of each pod the placeholder job's ``admin_comment`` names
    (``{"pods": [...]}``); empty when it names none or is not that JSON."""
    try:
        return frozenset(_DECODE_JOB_PODS.decode(job.admin_comment).pods)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return frozenset()


def releasing(occupant: KubePod, jobs: Mapping[int, SlurmJob]) -> bool:
    """The occupant is giving its node back: terminating, Succeeded or Failed, or its job
    (``jobs`` by id) ended and names exactly it (module docstring)."""
    if occupant.deleting or occupant.terminal:
        return True
    job = jobs.get(allocation_id(occupant))
    return (
        job is not None
        and job.base_state in wellknown.JOB_ENDED_STATES
        and occupant.key in job_pods(job)
    )


def _less(usage: KubeNodeUsage | None, pods: Iterable[KubePod]) -> KubeNodeUsage | None:
    """``usage`` without the requests of ``pods`` (pods the usage counts: not terminal)."""
    if usage is None:
        return None
    cpu, memory, count = usage.cpu_millis, usage.memory_bytes, usage.pods
    extended = dict(usage.extended)
    for p in pods:
        if p.terminal:
            continue  # already out of the node's usage
        cpu, memory, count = cpu - p.cpu_millis, memory - p.memory_bytes, count - 1
        for name, amount in p.extended.items():
            extended[name] = extended.get(name, 0) - amount
    return msgspec.structs.replace(
        usage, cpu_millis=cpu, memory_bytes=memory, pods=count, extended=extended
    )


def waits_for_handoff(
    pod: KubePod,
    node: KubeNode,
    usage: KubeNodeUsage | None,
    occupants: Iterable[KubePod],
    jobs: Mapping[int, SlurmJob],
) -> bool:
    """True when ``pod``, which does not fit ``node`` (``usage``: what the node's pods
    request now), may wait for the node's releasing occupants instead of having its job
    cancelled (module docstring). ``occupants``: our pods bound to the node; ``jobs``: their
    Slurm jobs by id."""
    if _feasible.constraints(pod, node, usage) is not None:
        return False
    if _feasible.resources_fit(pod, node, usage) is None:
        return False  # it fits: nothing to wait for (the caller binds)
    own = allocation_id(pod)
    leaving = [
        o
        for o in occupants
        if o.node_name == node.key
        and (alloc := allocation_id(o)) > 0
        and alloc != own
        and releasing(o, jobs)
    ]
    if not leaving:
        return False
    return _feasible.resources_fit(pod, node, _less(usage, leaving)) is None
