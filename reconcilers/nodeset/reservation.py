"""ScheduledUpdate's Slurm reservation (rule 17 of :mod:`reconcilers.nodeset`), after
slurm-operator ``internal/controller/nodeset/nodeset_sync.go`` ``syncSlurmReservation`` and
``slurmcontrol/slurmcontrol.go`` ``SyncReservationForNodeSet``,
``formatReservationForSchedule``, ``GetPodsUnderReservation``.
"""

from __future__ import annotations

from reconcilers._steps import Stop
from reconcilers.nodeset._common import (
    RESERVATION_FLAGS,
    RESERVATION_PREFIX,
    NodeSetPlan,
    View,
)
from schemas import wellknown
from schemas.actions import (
    AnyAction,
    DeleteSlurmReservation,
    EnsureSlurmReservation,
    NodeSetRef,
)
from schemas.events import (
    KubeNodeSet,
    KubePod,
    NodeSetStatus,
    SlurmNode,
)


def reservation_name(ns: KubeNodeSet) -> str:
    """``SlurmOperatorMaint-<nodeset>`` (slurmcontrol.go)."""
    return RESERVATION_PREFIX + ns.name


def _under_reservation(p: KubePod, slurm: dict[str, SlurmNode], name: str) -> bool:
    # slurmcontrol.go GetPodsUnderReservation: MAINTENANCE and in *our* reservation (another
    # MAINT reservation, an administrator's, replaces nothing).
    node = slurm.get(p.name)
    return node is not None and node.has("MAINTENANCE") and node.reservation == name


def reservation_flags(ns: KubeNodeSet) -> tuple[str, ...]:
    """``IGNORE_JOBS``, ``MAINT`` and the spec's flags, upper case, sorted, once each
    (slurmcontrol.go ``parseReservationFlags``)."""
    return tuple(sorted(set(RESERVATION_FLAGS) | {f.upper() for f in ns.scheduled_flags}))


def reservation_actions(
    v: View, ref: NodeSetRef, live: list[KubePod], status: NodeSetStatus
) -> tuple[list[AnyAction], str]:
    """Rule 17: the reservation to ensure or delete, and a note (``""`` none)."""
    ns = v.nodeset
    assert ns is not None
    name = reservation_name(ns)
    stamped = ns.annotations.get(wellknown.ANNOTATION_NODESET_RESERVATION, "")
    scheduled = ns.update_strategy == "ScheduledUpdate"
    if not scheduled or ns.replicas <= 0:
        if stamped:
            return [DeleteSlurmReservation(nodeset=ref, cluster=v.cluster, name=name)], (
                f"deleting reservation {name}"
            )
        return [], ""
    if status.slurm_idle + status.slurm_allocated <= 0:
        return [], f"reservation {name} waits for an idle or allocated Slurm node"
    if ns.scheduled_start <= 0:
        return [], "scheduledUpdate.startTime is unset or unreadable: no reservation"
    minutes = max(0, ns.scheduled_duration_s) // 60
    flags = reservation_flags(ns)
    nodes = tuple(sorted(p.name for p in live if p.name in v.slurm))
    stamp = f"{ns.scheduled_start} {minutes} {','.join(flags)} {','.join(nodes)}"
    if stamp == stamped:
        return [], ""
    if v.now >= ns.scheduled_start + minutes * 60:
        return [], f"the scheduledUpdate window of {name} has ended"
    if not stamped and v.now >= ns.scheduled_start and "FORCE_START" not in flags:
        return [], f"scheduledUpdate.startTime passed before {name} was created (no FORCE_START)"
    ensure = EnsureSlurmReservation(
        nodeset=ref,
        cluster=v.cluster,
        name=name,
        nodes=nodes,
        start_time=ns.scheduled_start,
        duration_minutes=minutes,
        flags=flags,
        stamp=stamp,
    )
    return [ensure], f"ensuring reservation {name} on {len(nodes)} node(s)"


def sync_reservation(plan: NodeSetPlan, v: View) -> Stop | None:
    """Rule 17: ensure or delete the ScheduledUpdate reservation (slurm-operator
    nodeset_sync.go ``syncSlurmReservation``)."""
    assert plan.status is not None  # calculate_status ran
    actions, note = reservation_actions(v, plan.ref, plan.live, plan.status)
    plan.extend(actions)
    plan.note(note)
    return None
