"""NodeSet effects (Slinky slurm-operator NodeSet controller semantics)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

from schemas import wellknown
from schemas.actions import (
    Action,
    CreateNodeSetPod,
    DeleteFailedNodeSetPod,
    DeleteNodeSetPod,
    DeleteSlurmPartition,
    DeleteSlurmReservation,
    EnsureNodeSetPDB,
    EnsureNodeSetRevision,
    EnsureSlurmPartition,
    EnsureSlurmReservation,
    KeepNodeSetPodClaims,
    NodeSetRef,
    ReleaseNodeSetFinalizer,
    ScaleNodeSet,
    SetNodeSetStatus,
    SetPodAnnotation,
    SetPodLabel,
    SetSlurmNodeConditions,
)
from schemas.events import NodeSetStatus
from slurmbridge.effectors.common import (
    JSON_PATCH,
    Effector,
    create_unless_exists,
    read_slinky,
    read_unless_gone,
)
from slurmbridge.effectors.nodeset_pods import NodeSetPodHandlers
from slurmbridge.effectors.revisions import RevisionHandlers
from slurmbridge.effectors.slurm_objects import SlurmObjectHandlers
from slurmbridge.kube.api import NODESET_API, read_raw
from slurmbridge.kube.apis import ApiException
from slurmbridge.kube.errors import Invalid, NotFound, typed
from slurmbridge.runtime.outcomes import EffectResult


class NodeSetEffector(NodeSetPodHandlers, RevisionHandlers, SlurmObjectHandlers, Effector):
    """NodeSet actions (Slinky slurm-operator NodeSet controller semantics).

    * create pod: read the NodeSet (its uid must be the action's: a re-created NodeSet gets
      its own decision), build the pod from ``spec.template`` — name and hostname the pod
      name, ``subdomain`` the ``serviceName``, labels ``app.kubernetes.io/name=slurmd`` and
      ``app.kubernetes.io/instance=<nodeset>``, ``controller.kubernetes.io/hash=<revision>``
      (the hash of the NodeSet just read: :mod:`slurmbridge.kube.revisions`), the NodeSet as
      controller owner — and create it; it exists already ⇒ noop;
    * revision: see :meth:`_revision`; pod annotation: as the pod label;
    * delete pod: ask Slurm for the pod's node first. Unknown to Slurm ⇒ delete; DRAIN and
      not ALLOCATED / MIXED / COMPLETING ⇒ delete (uid precondition); otherwise skipped; the
      lookup failing ⇒ Transient (*not* drained: slurm-operator PR #79). A scale-in delete
      (``scaled_from``) first sets the pod's claims' owners per the retention policy
      (:meth:`_settle_claims`: ``whenScaled: Delete`` ⇒ the pod owns them);
    * keep claims (a reversed scale-in): :meth:`_settle_claims` for a kept pod;
    * status: read the NodeSet (uid check), merge patch of the status subresource with the
      read's resourceVersion; pod label: read the pod (uid check), JSON patch testing
      ``/metadata/uid``; scale: see :meth:`_scale`. (A ``metadata.uid`` in a merge patch is
      no precondition on a real API server: 422 on a main resource, ignored on a custom
      resource's ``/status`` and ``/scale``.)
    * Slurm state conditions: see :meth:`_slurm_conditions`.

    Raises Transient / Permanent as the other effectors do.
    """

    TABLE: ClassVar[Mapping[type[Action], str]] = {
        CreateNodeSetPod: "_create",
        DeleteNodeSetPod: "_delete",
        SetNodeSetStatus: "_status",
        SetPodLabel: "_label",
        ScaleNodeSet: "_scale",
        DeleteFailedNodeSetPod: "_delete_failed",
        EnsureNodeSetPDB: "_pdb",
        SetSlurmNodeConditions: "_slurm_conditions",
        EnsureNodeSetRevision: "_revision",
        SetPodAnnotation: "_annotation",
        EnsureSlurmReservation: "_reservation",
        DeleteSlurmReservation: "_unreserve",
        EnsureSlurmPartition: "_partition",
        DeleteSlurmPartition: "_unpartition",
        KeepNodeSetPodClaims: "_keep_claims",
        ReleaseNodeSetFinalizer: "_release",
    }

    async def _release(self, action: ReleaseNodeSetFinalizer) -> EffectResult:
        """Remove our finalizer from a NodeSet with no stamp left (rule 20)."""
        ann = wellknown.ANNOTATION_NODESET_PARTITION
        if await self._stamp(action.nodeset, ann, None):
            return EffectResult("noop", "NodeSet is gone")
        return EffectResult("ok", f"finalizer {wellknown.FINALIZER_NODESET_SLURM} released")

    async def _pdb(self, action: EnsureNodeSetPDB) -> EffectResult:
        """Create PodDisruptionBudget ``<nodeset>`` unless one of that name exists (ours or
        someone else's: an existing PDB is never changed)."""
        ref = action.nodeset
        body = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "name": ref.name,
                "namespace": ref.namespace,
                "labels": {"app.kubernetes.io/managed-by": "slurmbridge"},
                "ownerReferences": [
                    {
                        "apiVersion": "/".join(NODESET_API),
                        "kind": "NodeSet",
                        "name": ref.name,
                        "uid": ref.uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ]
                if ref.uid
                else [],
            },
            "spec": {
                "maxUnavailable": 0,
                "selector": {"matchLabels": dict(action.selector)},
            },
        }
        create: Any = self.policy.create_namespaced_pod_disruption_budget
        return await create_unless_exists(
            create(ref.namespace, body, _preload_content=False), f"PodDisruptionBudget {ref.name}"
        )

    async def _status(self, action: SetNodeSetStatus) -> EffectResult:
        """Read the NodeSet (a re-created one is not ours to write), then merge-patch its
        status with the read's resourceVersion: the real precondition (409 if it changed
        meanwhile). A uid in the patch would be none — a custom resource's ``/status``
        ignores it and writes onto whatever NodeSet has that name now."""
        ref, st = action.nodeset, action.status
        obj = await read_slinky(
            self.custom, "nodesets", "NodeSet", ref.namespace, ref.name, ref.uid
        )
        if isinstance(obj, EffectResult):
            return obj
        meta = obj.get("metadata") or {}
        body = {
            "metadata": {"resourceVersion": meta.get("resourceVersion", "")},
            "status": {
                "replicas": st.replicas,
                "readyReplicas": st.ready_replicas,
                "availableReplicas": st.available_replicas,
                "slurmIdle": st.slurm_idle,
                "slurmAllocated": st.slurm_allocated,
                "slurmDown": st.slurm_down,
                "slurmDrain": st.slurm_drain,
                "observedGeneration": st.observed_generation,
                "selector": st.selector,
                "updatedReplicas": st.updated_replicas,
                "unavailableReplicas": st.unavailable_replicas,
                "desired": st.desired,
                "nodeSetHash": st.node_set_hash,
                # A merge patch merges maps: pins no longer wanted are removed by null.
                "ordinalToNode": {
                    **dict.fromkeys((obj.get("status") or {}).get("ordinalToNode") or {}),
                    **st.ordinal_to_node,
                }
                or None,
            },
        }
        conditions = _conditions(obj, st)
        if conditions is not None:
            body["status"]["conditions"] = conditions
        if not await self._merge(self.custom.patch_namespaced_custom_object_status, ref, body):
            return EffectResult("noop", "NodeSet is gone")
        return EffectResult("ok")

    async def _scale(self, action: ScaleNodeSet) -> EffectResult:
        """Read the Scale, stamp the cool-down annotations, then scale — each write guarded by
        a precondition the API server enforces (a uid in a merge patch is none: ``/scale``
        ignores it, the main resource answers 422):

        * the stamp is a merge patch carrying the Scale's resourceVersion (the NodeSet's own),
          so it fails (409, retried) if the NodeSet changed — or was re-created — since;
        * the scale is a JSON patch whose first op tests ``/metadata/uid`` (422 for another
          NodeSet of that name), so status writes in between do not make it fail.

        Stamp first: a retry after a failed scale writes the same stamp again, while a lost
        stamp after a done scale would never be written (the retry sees the replicas done).
        """
        ref = action.nodeset
        current = await self._read_scale(ref)
        if current is None:
            return EffectResult("noop", "NodeSet is gone")
        meta = current.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if ref.uid and uid != ref.uid:
            return EffectResult("noop", "NodeSet was re-created")
        # autoscaling/v1 ScaleSpec.replicas is omitempty: a NodeSet at zero answers "spec": {}.
        before = int((current.get("spec") or {}).get("replicas") or 0)
        if before == action.replicas:
            # Decided again before the change reached the log: done already, and the
            # cool-down clock keeps the first change's time.
            return EffectResult("noop", f"already {action.replicas} replica(s)")
        # The autoscaler's cool-down clock lives on the object it scales.
        stamp = {
            "metadata": {
                "resourceVersion": str(meta.get("resourceVersion") or ""),
                "annotations": {
                    wellknown.ANNOTATION_AUTOSCALE_LAST_SCALE: str(action.at),
                    wellknown.ANNOTATION_AUTOSCALE_LAST_DIRECTION: "up"
                    if action.replicas > before
                    else "down",
                },
            }
        }
        if not await self._merge(self.custom.patch_namespaced_custom_object, ref, stamp):
            return EffectResult("noop", "NodeSet is gone")
        ops = [
            {"op": "test", "path": "/metadata/uid", "value": uid},
            {"op": "add", "path": "/spec/replicas", "value": action.replicas},
        ]
        patch_scale: Any = self.custom.patch_namespaced_custom_object_scale
        try:
            await read_raw(
                patch_scale(
                    *NODESET_API,
                    ref.namespace,
                    "nodesets",
                    ref.name,
                    ops,
                    _content_type=JSON_PATCH,
                    _preload_content=False,
                )
            )
        except ApiException as exc:
            if isinstance(typed(exc), NotFound):
                return EffectResult("noop", "NodeSet is gone")
            if isinstance(typed(exc), Invalid):
                now = await self._read_scale(ref)
                if now is None or (now.get("metadata") or {}).get("uid") != uid:
                    return EffectResult("noop", "NodeSet was re-created")
            raise
        return EffectResult("ok", action.why)

    async def _read_scale(self, ref: NodeSetRef) -> dict[str, Any] | None:
        """NodeSet ``ref``'s Scale, or None when the NodeSet is gone."""
        return await read_unless_gone(
            self.custom.get_namespaced_custom_object_scale(
                *NODESET_API, ref.namespace, "nodesets", ref.name
            )
        )


def _conditions(obj: dict[str, Any], st: NodeSetStatus) -> list[dict[str, Any]] | None:
    """``status.conditions`` to write: the NodeSet's as read, with the types slurmbridge owns
    (:data:`schemas.wellknown.NODESET_CONDITIONS`) replaced by the action's — others'
    conditions stay as they are (a merge patch replaces a list whole; the read's
    resourceVersion guards the write). None: nothing to change."""
    read = (obj.get("status") or {}).get("conditions") or []
    kept = [
        c for c in read if isinstance(c, dict) and c.get("type") not in wellknown.NODESET_CONDITIONS
    ]
    ours = [
        {
            "type": c.type,
            "status": c.status,
            "reason": c.reason,
            "message": c.message,
            "lastTransitionTime": datetime.fromtimestamp(c.last_transition, UTC).strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            ),
        }
        for c in st.conditions
    ]
    if not ours and len(kept) == len(read):
        return None
    return kept + ours
