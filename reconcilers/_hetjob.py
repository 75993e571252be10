"""Heterogeneous jobs (pure): a pod group whose pods have different shapes becomes one Slurm
heterogeneous job with a component per shape (Slinky slurm-bridge 1.3 slurmjobir.go
``SlurmJobIR.Components``, slurmcontrol.go ``submitJob``: ``jobs`` instead of ``job``).

**Which groups.** A JobSet, a LeaderWorkerSet replica, a Workload API gang PodGroup
(``scheduling.k8s.io``) or a Kubernetes 1.37 CompositePodGroup gang (its PodGroups together,
:func:`reconcilers._pods.composite_group`) whose live pods do not all have the same
shape — a LeaderWorkerSet's leader and workers, a JobSet's driver and workers. A group with
one shape, any other group, and a group whose ``min-nodes`` or ``max-nodes`` annotation
sizes the job as a whole stay one plain job.

**Shape.** What the job is sized by: the CPUs a pod may use (max of request and limit, the
larger of native CPUs and ``dra.cpu`` devices), its memory likewise, its GPUs (device plugin
or DRA). Pods of one shape form one component; components are ordered by their first pod's
name, so a LeaderWorkerSet's leader (``<lws>-<index>``, which sorts before its workers
``<lws>-<index>-<n>``) is the het job's leader. More than :data:`MAX_COMPONENTS` shapes is
refused (Slinky: "Max is 128", a hard limit in Slurm).

**Placement.** Each component is translated on its own (:func:`reconcilers._pods.translate`:
the group's annotations, its own pods' sizes); Slurm starts the components together or not
at all. Every pod is labelled with the het job's id (the leader's); a pod is bound to a node
of its own component's job, pods spread over that job's nodes in name order
(:func:`bind_targets`).

**A pod of a new shape** joining after the submit (:func:`strays`) gets no component: it is
not bound while the het job runs, and each such pod gets ``PodScheduled=False`` (reason
``PodShapeNotInHetJob``) and a Warning Event saying so, once; the other pods keep the nodes
of their own components. A CompositePodGroup declares its members ahead: its job is not
submitted before every child group its ``minGroupCount`` asks for is there with its pods
(:func:`reconcilers._pods.composite_size`).

**Ending.** The het job holds the group while any component lives (:func:`live`): a leader
whose pod finished, or whose own component ended, never releases a component that still
runs — cancelling the leader in Slurm would end every component (recorded from Slurm
26.05.5, tests/real_slurm/test_modern_hetjob.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from reconcilers import _dra, _pods
from schemas.events import KubePod, SlurmJob

#: Slurm's limit on the components of a heterogeneous job (Slinky slurmjobir.go).
MAX_COMPONENTS: Final = 128
#: Group kinds whose pods may become a heterogeneous job.
KINDS: Final = ("JobSet", "LeaderWorkerSet", _pods.KIND_NATIVE, _pods.KIND_COMPOSITE)
ENDED: Final = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "PREEMPTED", "NODE_FAIL")

Shape = tuple[int, int, int]


def shape(pod: KubePod, dra_gpus: Mapping[str, int] | None = None) -> Shape:
    """(CPU millis, memory bytes, GPUs) a pod is sized by (module docstring)."""
    cpu = max(pod.cpu_millis_max, pod.cpu_millis, 1000 * _dra.cpus_asked(pod))
    memory = max(pod.memory_bytes_max, pod.memory_bytes)
    gpus = max(pod.gpus, (dra_gpus or {}).get(pod.key, _dra.gpus_asked(pod)))
    return (cpu, memory, gpus)


def components(
    group: _pods.Group,
    pods: Sequence[KubePod],
    annotations: Mapping[str, str],
    dra_gpus: Mapping[str, int] | None = None,
) -> list[list[KubePod]] | None:
    """The group's pods as het components (each sorted by name, ordered by their first pod's
    name), or None when the group stays one plain job (module docstring).

    Raises:
        _pods.TranslationError: more than :data:`MAX_COMPONENTS` shapes.
    """
    if group.kind not in KINDS:
        return None
    if _pods.PREFIX + "min-nodes" in annotations or _pods.PREFIX + "max-nodes" in annotations:
        return None
    by_shape: dict[Shape, list[KubePod]] = {}
    for p in sorted(pods, key=lambda p: p.name):
        by_shape.setdefault(shape(p, dra_gpus), []).append(p)
    if len(by_shape) < 2:
        return None
    if len(by_shape) > MAX_COMPONENTS:
        raise _pods.TranslationError(
            "pods",
            f"{len(by_shape)} pod shapes: a Slurm heterogeneous job has at most "
            f"{MAX_COMPONENTS} components",
        )
    return sorted(by_shape.values(), key=lambda c: c[0].name)


def bind_targets(
    comps: Sequence[Sequence[KubePod]], jobs: Sequence[SlurmJob | None]
) -> dict[str, tuple[int, str]]:
    """Pod key → (component job id, Slurm node) for each component whose job runs with
    nodes: the component's pods (all of them, bound or not, in name order) spread over its
    job's nodes round robin, as a plain job's pods are."""
    out: dict[str, tuple[int, str]] = {}
    for comp, job in zip(comps, jobs, strict=False):
        if job is None or job.base_state != "RUNNING" or not job.nodes:
            continue
        for i, p in enumerate(comp):
            out[p.key] = (job.job_id, job.nodes[i % len(job.nodes)])
    return out


def strays(
    pods: Sequence[KubePod],
    named: Sequence[frozenset[str]],
    dra_gpus: Mapping[str, int] | None = None,
) -> list[KubePod]:
    """The pods whose shape is that of no component of a submitted heterogeneous job: the
    shapes of the live pods each component's job names (its ``admin_comment``, ``named``:
    ``namespace/name`` per component). Empty when no component names a live pod (nothing
    to compare with). Such a pod joined after the submit with a shape the job was not sized
    for: Slurm gave it no component, so it is not bound (``placement`` says so on the pod),
    and it is left out of :func:`components` so the other pods keep their own component's
    nodes."""
    every = frozenset().union(*named) if named else frozenset()
    known = {shape(p, dra_gpus) for p in pods if p.key in every}
    if not known:
        return []
    return [p for p in pods if p.key not in every and shape(p, dra_gpus) not in known]


def live(jobs: Sequence[SlurmJob | None]) -> bool:
    """Some component of the het job has not ended (a job not seen counts as live)."""
    return any(j is None or j.base_state not in ENDED for j in jobs)


def running(jobs: Sequence[SlurmJob | None]) -> bool:
    """Every component runs with nodes (Slurm starts them together)."""
    return bool(jobs) and all(j is not None and j.base_state == "RUNNING" and j.nodes for j in jobs)
