"""Pod names, ordinals, job deadlines and the scale-in order (rules 1, 2 and 9 of
:mod:`reconcilers.nodeset`).

The order follows slurm-operator ``internal/controller/nodeset/utils/sort.go``
(``ActivePods.Less``) and Kubernetes' ``ActivePods`` (pkg/controller/controller_utils.go);
deadlines follow ``internal/controller/nodeset/slurmcontrol/slurmcontrol.go``
``GetNodeDeadlines``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from reconcilers.nodeset._common import (
    _PHASE_RANK,
    _TRUE,
    INFINITE_S,
)
from schemas import wellknown
from schemas.events import (
    KubePod,
    SlurmJob,
    SlurmNode,
)


def pod_name(nodeset: str, ordinal: int, padding: int) -> str:
    """``<nodeset>-<ordinal>``, the ordinal zero-padded to ``padding`` digits."""
    return f"{nodeset}-{ordinal:0{padding}d}" if padding else f"{nodeset}-{ordinal}"


def ordinal_of(nodeset: str, pod: str) -> int | None:
    """The ordinal in pod name ``<nodeset>-<ordinal>`` (None: not one of its names)."""
    prefix = nodeset + "-"
    tail = pod[len(prefix) :] if pod.startswith(prefix) else ""
    # ASCII only: "²".isdigit() is true, but int("²") raises (names in the failures
    # annotation are whatever someone wrote there).
    return int(tail) if tail.isascii() and tail.isdigit() else None


def lowest_free(count: int, taken: set[int] | frozenset[int]) -> list[int]:
    """The ``count`` lowest ordinals not in ``taken``: O(count + len(taken)), never more."""
    free: list[int] = []
    ordinal = 0
    while len(free) < count:
        if ordinal not in taken:
            free.append(ordinal)
        ordinal += 1
    return free


def _deletion_cost(p: KubePod) -> int:
    raw = p.annotations.get(wellknown.ANNOTATION_POD_DELETION_COST, "0").strip()
    try:
        return int(raw)
    except ValueError:
        return 0  # as Kubernetes' ReplicaSet controller: an invalid cost counts as 0


def parse_deadline(text: str | None) -> int:
    """An RFC 3339 ``pod-deadline`` as epoch seconds; absent or unreadable ⇒ 0 (Go's zero
    time, before every deadline: structutils.GetTimeFromAnnotations)."""
    if not text:
        return 0
    try:
        return int(datetime.fromisoformat(text).timestamp())
    except ValueError:
        return 0


def format_deadline(epoch_s: int) -> str:
    """Epoch seconds as RFC 3339 in UTC (Go's ``time.RFC3339`` layout), e.g.
    ``2026-01-02T03:04:05Z``."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_deadlines(jobs: Iterable[SlurmJob], nodes: set[str]) -> dict[str, int]:
    """For each of ``nodes`` running a job: the latest end of its RUNNING jobs, epoch
    seconds — ``start_time`` + the time limit, or + :data:`INFINITE_S` without one
    (slurm-operator slurmcontrol.go ``GetNodeDeadlines``, a TimeStore keeping the greater)."""
    out: dict[str, int] = {}
    for job in jobs:
        if job.base_state != "RUNNING":
            continue
        limit = job.time_limit_minutes
        end = job.start_time + (INFINITE_S if limit is None else limit * 60)
        for name in job.nodes:
            if name in nodes and end > out.get(name, 0):
                out[name] = end
    return out


def _deadline(p: KubePod, deadlines: dict[str, int] | None) -> int:
    if deadlines is not None:
        return deadlines.get(p.name, 0)
    return parse_deadline(p.annotations.get(wellknown.ANNOTATION_POD_DEADLINE))


def _cordoned(p: KubePod) -> bool:
    return p.annotations.get(wellknown.ANNOTATION_POD_CORDON, "") in _TRUE


def active_pods_key(
    p: KubePod,
    nodeset: str,
    slurm: dict[str, SlurmNode],
    deadlines: dict[str, int] | None = None,
) -> tuple[object, ...]:
    """Sort key: pods that sort first are condemned first (module docstring, rule 2).

    ``deadlines``: the Slurm nodes' job deadlines (:func:`node_deadlines`) when the log holds
    a complete Slurm listing; else each pod's ``pod-deadline`` annotation is read."""
    node = slurm.get(p.name)
    drained = node is not None and node.has("DRAIN") and not node.has("UNDRAIN")
    return (
        bool(p.node_name),
        _PHASE_RANK.get(p.phase, 1),
        p.ready,
        _deletion_cost(p),
        # slurm-operator utils/sort.go: the earliest pod-deadline first (none = Go's zero
        # time, first of all), then cordoned (pod-cordon) before not cordoned.
        _deadline(p, deadlines),
        not _cordoned(p),
        not drained,
        # Kubernetes' ActivePods order (pkg/controller/controller_utils.go): the pod that
        # became ready most recently first, then the newest; an unset time first.
        (p.ready_since != 0, -p.ready_since),
        (p.created_at != 0, -p.created_at),
        -(ordinal_of(nodeset, p.name) or 0),
    )


def scale_in_order(
    pods: Iterable[KubePod],
    nodeset: str,
    slurm: dict[str, SlurmNode],
    deadlines: dict[str, int] | None = None,
) -> list[KubePod]:
    """Pods sorted so that the first ones are condemned first (:func:`active_pods_key`)."""
    return sorted(pods, key=lambda p: active_pods_key(p, nodeset, slurm, deadlines))
