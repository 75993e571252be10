"""Rule 20 (the package docstring): a NodeSet being deleted."""

from __future__ import annotations

from reconcilers.base import Decision
from reconcilers.nodeset._common import (
    View,
)
from reconcilers.nodeset.reservation import (
    reservation_name,
)
from schemas import wellknown
from schemas.actions import (
    AnyAction,
    DeleteSlurmPartition,
    DeleteSlurmReservation,
    NodeSetRef,
    ReleaseNodeSetFinalizer,
)
from schemas.events import (
    KubeNodeSet,
)


def finalize(v: View, gone: KubeNodeSet) -> Decision:
    """Rule 20: a NodeSet being deleted (it has finalizers: ours while a stamp is present)
    first loses the Slurm partition and reservation slurmbridge made for it (their stamps),
    each effect removing its stamp and, with the last one, the finalizer; a finalizer of
    ours without a stamp (a crash between two writes) is released."""
    ref = NodeSetRef(namespace=gone.namespace, name=gone.name, uid=gone.uid)
    actions: list[AnyAction] = []
    names: list[str] = []
    if wellknown.ANNOTATION_NODESET_PARTITION in gone.annotations:
        actions.append(DeleteSlurmPartition(nodeset=ref, cluster=v.cluster, name=gone.name))
        names.append(f"partition {gone.name}")
    if wellknown.ANNOTATION_NODESET_RESERVATION in gone.annotations:
        name = reservation_name(gone)
        actions.append(DeleteSlurmReservation(nodeset=ref, cluster=v.cluster, name=name))
        names.append(f"reservation {name}")
    if actions:
        return Decision(
            actions=tuple(actions),
            reason=f"NodeSet is being deleted: deleting {' and '.join(names)}",
        )
    if wellknown.FINALIZER_NODESET_SLURM in gone.finalizers:
        return Decision(
            actions=(ReleaseNodeSetFinalizer(nodeset=ref),),
            reason="NodeSet is being deleted: nothing of ours left in Slurm; finalizer released",
        )
    return Decision(reason="NodeSet is being deleted (its pods go with it: owner references)")
