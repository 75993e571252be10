"""A NodeSet's Slurm reservation and partition (slurm-operator ``syncSlurmReservation``),
held by a stamp annotation on the NodeSet while being made."""

from __future__ import annotations

import time
from typing import Final

from schemas import wellknown
from schemas.actions import (
    DeleteSlurmPartition,
    DeleteSlurmReservation,
    EnsureSlurmPartition,
    EnsureSlurmReservation,
    NodeSetRef,
)
from slurmbridge.effectors.nodeset_base import NodeSetClients
from slurmbridge.runtime.outcomes import EffectResult
from slurmbridge.slurm.models import PartitionDesc, ReservationDesc

#: A stamp's value while its Slurm object is being made (:meth:`SlurmObjectHandlers._hold`).
PENDING: Final = "pending"


class SlurmObjectHandlers(NodeSetClients):
    """The Slurm reservation and partition effects of a NodeSet, for
    :class:`~slurmbridge.effectors.nodesets.NodeSetEffector`, whose clients it uses."""

    async def _reservation(self, action: EnsureSlurmReservation) -> EffectResult:
        """Create or update the ScheduledUpdate reservation (slurm-operator slurmcontrol.go
        ``SyncReservationForNodeSet``), then record ``stamp`` on the NodeSet. Slurm refuses
        every change to a started reservation that names a start time (2104 "Reservation
        already started", 26.05.5), so an active one only gets its node list."""
        c = self._client(action.cluster)
        ann = wellknown.ANNOTATION_NODESET_RESERVATION
        held = await self._hold(action.nodeset, ann)
        if held:
            return EffectResult("noop", f"reservation {action.name} not made: {held}")
        current = await c.get_reservation(action.name)
        users = ("root",)  # 1.x reserves for its SlurmUser (common.SlurmUser)
        whole = ReservationDesc(
            name=action.name,
            nodes=action.nodes,
            start_time=action.start_time,
            duration_minutes=action.duration_minutes,
            flags=action.flags,
            users=users,
        )
        if current is None:
            await c.put_reservation(whole)
            did = "created"
        elif current.active(time.time()):
            if set(current.nodes) == set(action.nodes):
                did = "active, unchanged"
            else:
                await c.put_reservation(
                    ReservationDesc(name=action.name, nodes=action.nodes, users=users)
                )
                did = "active: node list updated"
        else:
            await c.put_reservation(whole)
            did = "updated"
        if await self._stamp(action.nodeset, ann, action.stamp):
            return EffectResult("noop", f"reservation {action.name} {did}; NodeSet is gone")
        return EffectResult("ok", f"reservation {action.name} {did}")

    async def _unreserve(self, action: DeleteSlurmReservation) -> EffectResult:
        """Delete the ScheduledUpdate reservation (slurmcontrol.go
        ``DeleteReservationForNodeSet``), then forget the stamp."""
        c = self._client(action.cluster)
        existed = await c.delete_reservation(action.name)
        await self._stamp(action.nodeset, wellknown.ANNOTATION_NODESET_RESERVATION, None)
        return EffectResult("ok" if existed else "noop", f"reservation {action.name} deleted")

    async def _partition(self, action: EnsureSlurmPartition) -> EffectResult:
        """Create or update the NodeSet's partition (``POST partitions/``; 1.x writes it into
        slurm.conf: controller_config.go ``buildNodeSetConf``), then record ``stamp`` on the
        NodeSet, which marks the partition as slurmbridge's."""
        c = self._client(action.cluster)
        ann = wellknown.ANNOTATION_NODESET_PARTITION
        held = await self._hold(action.nodeset, ann)
        if held:
            return EffectResult("noop", f"partition {action.name} not made: {held}")
        await c.put_partition(
            PartitionDesc(name=action.name, nodes=action.nodes, settings=action.settings)
        )
        if await self._stamp(action.nodeset, ann, action.stamp):
            return EffectResult("noop", f"partition {action.name} ensured; NodeSet is gone")
        return EffectResult("ok", f"partition {action.name} ensured on {len(action.nodes)} node(s)")

    async def _unpartition(self, action: DeleteSlurmPartition) -> EffectResult:
        """Delete the NodeSet's partition (``DELETE partition/{name}``), then forget the
        stamp (the NodeSet may be gone: nothing to forget then)."""
        c = self._client(action.cluster)
        existed = await c.delete_partition(action.name)
        await self._stamp(action.nodeset, wellknown.ANNOTATION_NODESET_PARTITION, None)
        return EffectResult("ok" if existed else "noop", f"partition {action.name} deleted")

    async def _hold(self, ref: NodeSetRef, ann: str) -> str:
        """Before a Slurm partition or reservation is made for NodeSet ``ref``: mark stamp
        ``ann`` ``pending`` (unless stamped already) and add our finalizer, so that the object
        is deleted with the NodeSet even if this process stops before the final stamp.
        Returns why nothing may be made (the NodeSet is gone, or being deleted: no finalizer
        can be added then), or ``""``. The write carries the resourceVersion read (409 ⇒
        retried)."""
        meta = await self._read_nodeset(ref)
        if meta is None:
            return "NodeSet is gone"
        annotations = meta.get("annotations") or {}
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            return "NodeSet is being deleted"
        if ann in annotations and wellknown.FINALIZER_NODESET_SLURM in finalizers:
            return ""
        body = {
            "metadata": {
                "resourceVersion": meta.get("resourceVersion", ""),
                "annotations": {ann: annotations.get(ann, PENDING)},
                "finalizers": [*finalizers, wellknown.FINALIZER_NODESET_SLURM]
                if wellknown.FINALIZER_NODESET_SLURM not in finalizers
                else finalizers,
            }
        }
        if not await self._merge(self.custom.patch_namespaced_custom_object, ref, body):
            return "NodeSet is gone"
        return ""

    async def _stamp(self, ref: NodeSetRef, ann: str, value: str | None) -> bool:
        """Write (``None``: remove) stamp ``ann`` on NodeSet ``ref``, and keep our finalizer
        exactly while a stamp (:data:`wellknown.NODESET_SLURM_STAMPS`) is left. True when
        the NodeSet is gone. The write carries the resourceVersion read (409 ⇒ retried)."""
        meta = await self._read_nodeset(ref)
        if meta is None:
            return True
        annotations = dict(meta.get("annotations") or {})
        finalizers = list(meta.get("finalizers") or [])
        if value is None:
            annotations.pop(ann, None)
        else:
            annotations[ann] = value
        ours = any(a in annotations for a in wellknown.NODESET_SLURM_STAMPS)
        fin = wellknown.FINALIZER_NODESET_SLURM
        if not ours and fin in finalizers:
            finalizers.remove(fin)
        elif ours and fin not in finalizers and not meta.get("deletionTimestamp"):
            finalizers.append(fin)
        body = {
            "metadata": {
                "resourceVersion": meta.get("resourceVersion", ""),
                "annotations": {ann: value},
                "finalizers": finalizers,
            }
        }
        return not await self._merge(self.custom.patch_namespaced_custom_object, ref, body)
