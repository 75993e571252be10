"""The NodeSet's Slurm partition (rule 19 of :mod:`reconcilers.nodeset`). slurm-operator writes
it into slurm.conf (``internal/controller/controller/controller_config.go``
``buildNodeSetConf``); slurmbridge makes it through slurmrestd.
"""

from __future__ import annotations

import msgspec

from reconcilers._steps import Stop
from reconcilers.nodeset import _daemon
from reconcilers.nodeset._common import (
    NodeSetPlan,
    View,
    _event,
)
from schemas import partitionconf, wellknown
from schemas.actions import (
    AnyAction,
    DeleteSlurmPartition,
    EnsureSlurmPartition,
    NodeSetRef,
)
from schemas.events import (
    KubePod,
)


def partition_actions(v: View, ref: NodeSetRef, live: list[KubePod]) -> tuple[list[AnyAction], str]:
    """Rule 19: the NodeSet's partition to ensure or delete, and a note (``""`` none).

    Ensured (``enabled``, complete Slurm listing) as partition ``<nodeset>`` on the Slurm
    nodes (hostnames) of the live pods that Slurm lists, sorted, with the parsed ``config``
    (:func:`schemas.partitionconf.parse`), when that differs from the stamp, or Slurm lists
    the partition with other nodes or not at all; each ignored config word gets a Warning
    Event with the ensure. A partition of that name that Slurm lists while the NodeSet has no
    stamp is someone else's: left alone, with a Warning. Deleted when disabled and stamped.
    """
    ns = v.nodeset
    assert ns is not None
    stamped = ns.annotations.get(wellknown.ANNOTATION_NODESET_PARTITION)
    if not ns.partition_enabled:
        if stamped is not None:
            return [DeleteSlurmPartition(nodeset=ref, cluster=v.cluster, name=ns.name)], (
                f"deleting partition {ns.name}"
            )
        return [], ""
    if not v.slurm_listed:
        return [], f"partition {ns.name} waits for a complete Slurm listing"
    if stamped is None and v.partition is not None:
        why = (
            f"Slurm partition {ns.name} exists and was not made by slurmbridge (no "
            "nodeset.slurmbridge.dev/partition stamp); it is left alone"
        )
        # One Warning per generation of the spec, not one per reconcile of the NodeSet.
        warn = _event(ns, "PartitionNotOurs", f"spec.partition: {why}", warning=True)
        return [msgspec.structs.replace(warn, once=f"partition-not-ours.g{ns.generation}")], why
    settings, problems = partitionconf.parse(ns.partition_config)
    nodes = tuple(sorted(_daemon.slurm_name(p) for p in live if p.name in v.slurm))
    stamp = " ".join([",".join(nodes), *(f"{k}={val}" for k, val in settings)])
    in_slurm = v.partition is not None and set(v.partition.nodes) == set(nodes)
    if stamp == stamped and in_slurm:
        return [], ""
    out: list[AnyAction] = [
        EnsureSlurmPartition(
            nodeset=ref,
            cluster=v.cluster,
            name=ns.name,
            nodes=nodes,
            settings=settings,
            stamp=stamp,
        )
    ]
    out += [
        _event(
            ns,
            "PartitionConfigIgnored",
            f"spec.partition.config: {word} {why}; partition {ns.name} is made without it",
            warning=True,
        )
        for word, why in problems
    ]
    return out, f"ensuring partition {ns.name} on {len(nodes)} node(s)"


def sync_partition(plan: NodeSetPlan, v: View) -> Stop | None:
    """Rule 19: ensure or delete the NodeSet's partition (what slurm-operator's
    controller_config.go ``buildNodeSetConf`` writes into slurm.conf)."""
    actions, note = partition_actions(v, plan.ref, plan.live)
    plan.extend(actions)
    plan.note(note)
    return None
