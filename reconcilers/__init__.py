"""Reconcilers: one module per reconciler, each a spec plus a pure ``decide()``.

A reconciler never performs I/O and imports only :mod:`schemas` (checked by import-linter);
the runtime in :mod:`slurmbridge.runtime.worker` consumes its trigger subjects, keeps the
projection,
calls ``view`` then ``decide`` and hands the actions to effectors. :data:`ALL` lists every
reconciler this version ships, by name.
"""

from __future__ import annotations

from reconcilers import (
    autoscale,
    cluster,
    node_register,
    node_taint,
    nodeset,
    placement,
    slurm_drain,
    workload,
)
from reconcilers.base import ReconcilerSpec

ALL: dict[str, ReconcilerSpec] = {
    spec.name: spec
    for spec in (
        node_taint.SPEC,
        slurm_drain.SPEC,
        node_register.SPEC,
        placement.SPEC,
        workload.SPEC,
        nodeset.SPEC,
        autoscale.SPEC,
        cluster.SPEC,
    )
}
