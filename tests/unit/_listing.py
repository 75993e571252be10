"""A test world in a complete Slurm listing, as a placement submit needs it.

Every job requires the node feature ``slurm_bridge_gres_compatible`` (Slinky slurm-bridge 1.3
slurmcontrol ``gresCompatibilityConstraint``), so ``placement`` submits only once a complete
listing shows nodes of the job's partition carrying it (Slurm refuses the job otherwise:
2029 / 2014, recorded from 26.05.5). :func:`listed` turns a test's objects into such a world.
"""

from __future__ import annotations

import msgspec

from schemas import wellknown
from schemas.events import Event, SlurmNode, SlurmPartition, SlurmPing

#: Slurm nodes given to a partition that has none (enough for the tests' gangs).
NODES = 8


def listed(objs: tuple[Event, ...]) -> tuple[Event, ...]:
    """``objs`` with each Slurm cluster's ping (a complete listing) unless a ping is given; a
    partition given with no node gets :data:`NODES` Slurm nodes (no Kubernetes node maps to
    them, so they are excluded nowhere) carrying the feature; the Slurm nodes given carry it
    too, unless a test gave them features of their own."""
    pinged = any(isinstance(o, SlurmPing) for o in objs)
    out: list[Event] = []
    for o in objs:
        if isinstance(o, SlurmPartition) and not o.nodes:
            hpc = tuple(f"hpc-{o.cluster}-{o.key}-{i}" for i in range(NODES))
            o = msgspec.structs.replace(o, nodes=hpc)
            out.extend(
                SlurmNode(
                    source=o.source,
                    key=name,
                    cluster=o.cluster,
                    state=("IDLE",),
                    features=(wellknown.FEATURE_GRES_COMPATIBLE,),
                )
                for name in hpc
            )
        elif isinstance(o, SlurmNode) and not o.features:
            o = msgspec.structs.replace(o, features=(wellknown.FEATURE_GRES_COMPATIBLE,))
        out.append(o)
    clusters = {o.source.removeprefix("slurm:") for o in out if o.source.startswith("slurm:")}
    if not pinged:
        out.extend(
            SlurmPing(source=f"slurm:{c}", key=c, cluster=c, responding=True)
            for c in sorted(clusters | {"c1"})
        )
    return tuple(out)
