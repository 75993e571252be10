"""NodeSet effects (Slinky slurm-operator NodeSet controller semantics)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, Final

import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from reconcilers.nodeset import _daemon
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
    PodRef,
    ReleaseNodeSetFinalizer,
    ScaleNodeSet,
    SetNodeSetStatus,
    SetPodAnnotation,
    SetPodLabel,
    SetSlurmNodeConditions,
)
from schemas.events import NodeSetStatus, Toleration
from slurmbridge.effectors.common import (
    JSON_PATCH,
    MERGE,
    NODESET_API,
    Effector,
    create_unless_exists,
    json_pointer,
    merge_custom,
    no_client,
    now_rfc3339,
    patch_pod,
    read_pod,
    read_slinky,
    read_unless_gone,
)
from slurmbridge.kube import revisions
from slurmbridge.kube.api import read_raw
from slurmbridge.kube.wire import DECODE_POD
from slurmbridge.runtime.outcomes import EffectResult, Transient
from slurmbridge.slurm import errors as slurm_errors
from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.models import PartitionDesc, ReservationDesc

#: A stamp's value while its Slurm object is being made (:meth:`NodeSetEffector._hold`).
PENDING: Final = "pending"


class NodeSetEffector(Effector):
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

    def __init__(self, api: client.ApiClient, slurm: dict[str, SlurmClient]) -> None:
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.policy = client.PolicyV1Api(api)
        self.slurm = slurm

    async def _create(self, action: CreateNodeSetPod) -> EffectResult:
        ref = action.nodeset
        obj = await read_slinky(
            self.custom, "nodesets", "NodeSet", ref.namespace, ref.name, ref.uid
        )
        if isinstance(obj, EffectResult):
            return obj
        daemon = bool(action.hostname)
        hostname = action.hostname or action.pod_name
        if daemon and await self._daemon_pod_exists(ref, hostname):
            return EffectResult("noop", f"a pod for {action.node} exists")
        pod, claims = nodeset_pod(obj, action)
        if claims:
            # podcontrol.go creates the claims before the pod.
            await self._create_claims(ref.namespace, claims)
        create: Any = self.core.create_namespaced_pod
        return await create_unless_exists(
            create(ref.namespace, pod, _preload_content=False),
            f"pod {action.pod_name or hostname}",
        )

    async def _create_claims(self, namespace: str, claims: list[dict[str, Any]]) -> None:
        """Create each claim; one that exists already is kept as it is (podcontrol.go
        ``createPersistentVolumeClaims``: an existing claim is reused, so a re-created pod
        gets its predecessor's volume)."""
        create: Any = self.core.create_namespaced_persistent_volume_claim
        for claim in claims:
            try:
                await read_raw(create(namespace, claim, _preload_content=False))
            except ApiException as exc:
                if exc.status != 409:
                    raise

    async def _daemon_pod_exists(self, ref: NodeSetRef, hostname: str) -> bool:
        """A live (not deleting) DaemonSet pod of the NodeSet with that hostname exists: a
        generateName create is not idempotent, so a redelivered action must not make a
        second pod for the node (1.x guards the same with expectations)."""
        listing: Any = self.core.list_namespaced_pod
        selector = {
            "app.kubernetes.io/name": "slurmd",
            "app.kubernetes.io/instance": ref.name,
            wellknown.LABEL_POD_HOSTNAME: hostname,
        }
        raw = await read_raw(
            listing(
                ref.namespace,
                label_selector=",".join(f"{k}={v}" for k, v in sorted(selector.items())),
                _preload_content=False,
            )
        )
        items: list[dict[str, Any]] = msgspec.json.decode(raw).get("items") or []
        return any(not (i.get("metadata") or {}).get("deletionTimestamp") for i in items)

    async def _revision(self, action: EnsureNodeSetRevision) -> EffectResult:
        """Record the NodeSet's template as a ControllerRevision and prune the history
        (slurm-operator nodeset_history.go ``getNodeSetRevisions``, ``truncateHistory``;
        Kubernetes pkg/controller/history for names and hashes).

        Reads the NodeSet (gone or re-created ⇒ noop) and computes the revision from what it
        read. Lists the revisions labelled with the NodeSet's pod selector that it controls
        (or that nobody controls). An equal revision (same data) that is the latest ⇒ kept;
        an equal older one ⇒ its ``revision`` becomes the next number (a rollback: a merge
        patch with the resourceVersion read as precondition); none ⇒ create
        ``<nodeset>-<hash>`` (labels: the template's, the selector, the hash; the NodeSet as
        controller owner). A name taken by other data (a hash collision) ⇒ the NodeSet's
        ``status.collisionCount`` is raised and the action retried (the next observation
        carries the new hash). Then revisions whose hash is neither the update revision's,
        ``status.nodeSetHash`` nor one of the action's ``live`` hashes are deleted, lowest
        ``revision`` first, until ``spec.revisionHistoryLimit`` (default 0) remain. Unlike
        1.x, liveness is decided by hash (1.x compares pod hashes with revision names).

        Raises Transient on 409 (the NodeSet or a revision changed meanwhile), as the other
        writes.
        """
        ref = action.nodeset
        obj = await read_slinky(
            self.custom, "nodesets", "NodeSet", ref.namespace, ref.name, ref.uid
        )
        if isinstance(obj, EffectResult):
            return obj
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        collisions = int(status.get("collisionCount") or 0)
        data = revisions.revision_data(spec)
        hash_ = revisions.revision_hash(data, collisions)
        selector = {"app.kubernetes.io/name": "slurmd", "app.kubernetes.io/instance": ref.name}
        owned = await self._revisions(ref, str(meta.get("uid") or ""), selector)
        owned.sort(key=lambda r: int(r.get("revision") or 0))
        latest = int(owned[-1].get("revision") or 0) if owned else 0
        wanted = msgspec.json.decode(data)
        equal = [r for r in owned if r.get("data") == wanted]
        done: str
        if equal and equal[-1] is owned[-1]:
            done = f"revision {latest} is current"
        elif equal:
            rev = equal[-1]
            rmeta = rev.get("metadata") or {}
            body = {
                "metadata": {"resourceVersion": rmeta.get("resourceVersion", "")},
                "revision": latest + 1,
            }
            patch: Any = self.apps.patch_namespaced_controller_revision
            await read_raw(
                patch(
                    rmeta.get("name"),
                    ref.namespace,
                    body,
                    _content_type=MERGE,
                    _preload_content=False,
                )
            )
            done = f"rolled back to {rmeta.get('name')} as revision {latest + 1}"
        else:
            name = revisions.revision_name(ref.name, hash_)
            tmeta = (spec.get("template") or {}).get("metadata") or {}
            body = {
                "apiVersion": "apps/v1",
                "kind": "ControllerRevision",
                "metadata": {
                    "name": name,
                    "namespace": ref.namespace,
                    "labels": {
                        **(tmeta.get("labels") or {}),
                        **selector,
                        wellknown.LABEL_REVISION_HASH: hash_,
                    },
                    "ownerReferences": [
                        _owner_ref(
                            "/".join(NODESET_API), "NodeSet", ref.name, meta.get("uid", ref.uid)
                        )
                    ],
                },
                "data": wanted,
                "revision": latest + 1,
            }
            create: Any = self.apps.create_namespaced_controller_revision
            try:
                await read_raw(create(ref.namespace, body, _preload_content=False))
            except ApiException as exc:
                if exc.status != 409:
                    raise
                await self._collision(ref, name, wanted, meta, collisions)
            owned.append(body)
            done = f"{name} created as revision {latest + 1}"
        live = {hash_, str(status.get("nodeSetHash") or ""), *action.live}
        history = [
            r
            for r in owned
            if ((r.get("metadata") or {}).get("labels") or {}).get(wellknown.LABEL_REVISION_HASH)
            not in live
        ]
        limit = max(0, int(spec.get("revisionHistoryLimit") or 0))
        pruned = []
        delete: Any = self.apps.delete_namespaced_controller_revision
        for rev in history[: max(0, len(history) - limit)]:
            rname = (rev.get("metadata") or {}).get("name")
            try:
                await read_raw(delete(rname, ref.namespace, _preload_content=False))
            except ApiException as exc:
                if exc.status != 404:
                    raise
            pruned.append(str(rname))
        return EffectResult("ok", done + (f"; pruned {', '.join(pruned)}" if pruned else ""))

    async def _revisions(
        self, ref: NodeSetRef, uid: str, selector: dict[str, str]
    ) -> list[dict[str, Any]]:
        """The NodeSet's ControllerRevisions: those matching ``selector`` that it controls
        or that have no controller (historycontrol.go ``ListControllerRevisions``)."""
        listing: Any = self.apps.list_namespaced_controller_revision
        raw = await read_raw(
            listing(
                ref.namespace,
                label_selector=",".join(f"{k}={v}" for k, v in sorted(selector.items())),
                _preload_content=False,
            )
        )
        items: list[dict[str, Any]] = msgspec.json.decode(raw).get("items") or []
        out = []
        for item in items:
            owners = (item.get("metadata") or {}).get("ownerReferences") or []
            controller = next((o for o in owners if o.get("controller")), None)
            if controller is None or controller.get("uid") == uid:
                out.append(item)
        return out

    async def _collision(
        self,
        ref: NodeSetRef,
        name: str,
        wanted: Any,
        meta: dict[str, Any],
        collisions: int,
    ) -> None:
        """Revision ``name`` exists: ours (same data, an earlier attempt) ⇒ return; another
        one's ⇒ raise ``status.collisionCount`` and retry (historycontrol.go
        ``CreateControllerRevision``)."""
        read: Any = self.apps.read_namespaced_controller_revision
        existing = msgspec.json.decode(
            await read_raw(read(name, ref.namespace, _preload_content=False))
        )
        if existing.get("data") == wanted:
            return
        body = {
            "metadata": {"resourceVersion": meta.get("resourceVersion", "")},
            "status": {"collisionCount": collisions + 1},
        }
        await self._merge(self.custom.patch_namespaced_custom_object_status, ref, body)
        raise Transient(f"ControllerRevision {name} holds other data: collisionCount raised", 0.1)

    async def _slurm_conditions(self, action: SetSlurmNodeConditions) -> EffectResult:
        """Read the pod as JSON (gone, or another uid ⇒ noop), make its ``SlurmNodeState*``
        conditions exactly the action's (each ``True``; ``lastTransitionTime`` kept for one
        already True, else now; the other conditions untouched, unknown fields included),
        and merge-patch ``pods/status`` with the whole list and the resourceVersion read as
        precondition (409 ⇒ retried: a kubelet update came in between). Nothing is written
        when the conditions already match (slurm-operator nodeset_sync_status.go
        ``applySlurmPodConditions``)."""
        pod = action.pod
        try:
            raw: dict[str, Any] = msgspec.json.decode(
                await read_raw(
                    self.core.read_namespaced_pod(pod.name, pod.namespace, _preload_content=False)
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "pod is gone")
            raise
        meta = raw.get("metadata") or {}
        if pod.uid and meta.get("uid") != pod.uid:
            return EffectResult("noop", "another pod of that name now")
        current: list[dict[str, Any]] = list((raw.get("status") or {}).get("conditions") or [])
        prefix = wellknown.SLURM_NODE_STATE_PREFIX
        mine = {c.get("type"): c for c in current if str(c.get("type", "")).startswith(prefix)}
        wanted = []
        for c in action.conditions:
            old = mine.get(c.type) or {}
            since = old.get("lastTransitionTime") if old.get("status") == "True" else None
            entry = {"type": c.type, "status": "True", "lastTransitionTime": since or now_rfc3339()}
            if c.message:
                entry["message"] = c.message
            wanted.append(entry)
        if {(c["type"], c.get("message", "")) for c in wanted} == {
            (t, c.get("message", "")) for t, c in mine.items() if c.get("status") == "True"
        } and len(mine) == len(wanted):
            return EffectResult("noop", "conditions already set")
        others = [c for c in current if not str(c.get("type", "")).startswith(prefix)]
        body = {
            "metadata": {"resourceVersion": meta.get("resourceVersion", "")},
            "status": {"conditions": others + wanted},
        }
        patch_status: Any = self.core.patch_namespaced_pod_status
        try:
            await read_raw(
                patch_status(
                    pod.name, pod.namespace, body, _content_type=MERGE, _preload_content=False
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "pod is gone")
            raise
        return EffectResult("ok", ", ".join(c.type.removeprefix(prefix) for c in action.conditions))

    @staticmethod
    def _undrainable(
        c: SlurmClient, action: DeleteNodeSetPod, state: tuple[str, ...]
    ) -> EffectResult | None:
        """``unsupported`` when the pod waits for a drain this API version cannot make
        (v0.0.38, Slurm 22.05, has no node update): the delete would be ``skipped`` at every
        reconcile of the NodeSet, for ever, each time a record in a stream kept 30 days; the
        worker sends an ``unsupported`` action once (issue 29 item 8). None: it can drain."""
        try:
            c.require("update_node")
        except slurm_errors.Unsupported as exc:
            return EffectResult(
                "unsupported",
                f"Slurm node {action.slurm_node} is {'+'.join(state)}, not drained, and "
                f"{exc}: its pod is deleted only once the node is drained (scontrol, or a "
                "slurmrestd that can drain)",
            )
        return None

    async def _delete(self, action: DeleteNodeSetPod) -> EffectResult:
        c = self.slurm.get(action.cluster)
        if c is None:
            raise no_client(action.cluster)
        try:
            node = await c.get_node(action.slurm_node)
        except slurm_errors.NotFound:
            node = None
        except slurm_errors.SlurmError as exc:
            raise Transient(
                f"DeleteNodeSetPod: cannot tell whether {action.slurm_node} is drained: {exc}"
            ) from exc
        if node is not None and not node.drained:
            return self._undrainable(c, action, node.state) or EffectResult(
                "skipped", f"Slurm node {action.slurm_node} is {'+'.join(node.state)}"
            )
        settled = ""
        if action.scaled_from is not None and action.pod.uid:
            # Kubernetes' StatefulSet controller (stateful_set_control.go, processCondemned
            # after UpdatePodClaimForRetentionPolicy) and 1.x (nodeset_sync.go doPodScale's
            # fixPodPVCsFn before deletePodFn) hand the claims to the condemned pod first: the
            # garbage collector deletes them once the pod is gone.
            settled = await self._settle_claims(
                action.scaled_from, action.pod, action.slurm_node, scaled=True
            )
        delete: Any = self.core.delete_namespaced_pod
        body = {"preconditions": {"uid": action.pod.uid}} if action.pod.uid else None
        try:
            await read_raw(
                delete(action.pod.name, action.pod.namespace, body=body, _preload_content=False)
            )
        except ApiException as exc:
            if exc.status in (404, 409):  # gone, or another pod of that name now
                return EffectResult("noop", "pod is gone")
            raise
        done = "drained and idle" if node is not None else "not in Slurm"
        return EffectResult("ok", f"{done}; {settled}" if settled else done)

    async def _keep_claims(self, action: KeepNodeSetPodClaims) -> EffectResult:
        if not action.pod.uid:
            return EffectResult("noop", "no pod uid")
        settled = await self._settle_claims(
            action.nodeset, action.pod, action.slurm_node, scaled=False
        )
        return EffectResult("ok" if "updated" in settled else "noop", settled or "no claims")

    async def _settle_claims(
        self, ref: NodeSetRef, pod: PodRef, slurm_node: str, *, scaled: bool
    ) -> str:
        """Make the owners of pod ``pod``'s PersistentVolumeClaims what NodeSet ``ref``'s
        ``persistentVolumeClaimRetentionPolicy`` asks (:func:`claim_owners`; ``scaled``: the
        pod is condemned by a scale-in). The claims are named by :func:`claims_for` (suffix:
        the pod name, or in DaemonSet mode ``slurm_node``, the pod's hostname). Each claim is
        read; one whose owners differ is merge-patched with its resourceVersion as
        precondition (409 ⇒ raised, the action is retried). A missing claim is skipped, as
        podcontrol.go ``UpdatePodPVCsForRetentionPolicy`` does. Returns a note (``""``: the
        NodeSet is gone or has no claim templates).

        Raises:
            ApiException: a read or write failed other than 404.
        """
        obj = await read_slinky(
            self.custom, "nodesets", "NodeSet", ref.namespace, ref.name, ref.uid
        )
        if isinstance(obj, EffectResult):
            return ""
        spec = obj.get("spec") or {}
        daemon = spec.get("scalingMode") == "DaemonSet"
        meta = obj.get("metadata") or {}
        nodeset_uid = str(meta.get("uid") or ref.uid)
        policy = spec.get("persistentVolumeClaimRetentionPolicy") or {}
        read: Any = self.core.read_namespaced_persistent_volume_claim
        patch: Any = self.core.patch_namespaced_persistent_volume_claim
        updated, kept = [], []
        for _, wanted in claims_for(obj, daemon, slurm_node if daemon else pod.name):
            cname = wanted["metadata"]["name"]
            try:
                claim = msgspec.json.decode(
                    await read_raw(read(cname, ref.namespace, _preload_content=False))
                )
            except ApiException as exc:
                if exc.status == 404:
                    continue
                raise
            cmeta = claim.get("metadata") or {}
            refs = list(cmeta.get("ownerReferences") or [])
            owners = claim_owners(
                refs,
                when_deleted=str(policy.get("whenDeleted") or ""),
                when_scaled=str(policy.get("whenScaled") or ""),
                nodeset=(ref.name, nodeset_uid),
                pod=(pod.name, pod.uid),
                scaled=scaled,
            )
            if owners == refs:
                kept.append(cname)
                continue
            body = {
                "metadata": {
                    "resourceVersion": cmeta.get("resourceVersion", ""),
                    "ownerReferences": owners,
                }
            }
            try:
                await read_raw(
                    patch(cname, ref.namespace, body, _content_type=MERGE, _preload_content=False)
                )
            except ApiException as exc:
                if exc.status == 404:
                    continue
                raise
            updated.append(cname)
        parts = [f"claims updated: {', '.join(updated)}"] if updated else []
        parts += [f"claims as wanted: {', '.join(kept)}"] if kept else []
        return "; ".join(parts)

    async def _reservation(self, action: EnsureSlurmReservation) -> EffectResult:
        """Create or update the ScheduledUpdate reservation (slurm-operator slurmcontrol.go
        ``SyncReservationForNodeSet``), then record ``stamp`` on the NodeSet. Slurm refuses
        every change to a started reservation that names a start time (2104 "Reservation
        already started", 26.05.5), so an active one only gets its node list."""
        c = self.slurm.get(action.cluster)
        if c is None:
            raise no_client(action.cluster)
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
        c = self.slurm.get(action.cluster)
        if c is None:
            raise no_client(action.cluster)
        existed = await c.delete_reservation(action.name)
        await self._stamp(action.nodeset, wellknown.ANNOTATION_NODESET_RESERVATION, None)
        return EffectResult("ok" if existed else "noop", f"reservation {action.name} deleted")

    async def _partition(self, action: EnsureSlurmPartition) -> EffectResult:
        """Create or update the NodeSet's partition (``POST partitions/``; 1.x writes it into
        slurm.conf: controller_config.go ``buildNodeSetConf``), then record ``stamp`` on the
        NodeSet, which marks the partition as slurmbridge's."""
        c = self.slurm.get(action.cluster)
        if c is None:
            raise no_client(action.cluster)
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
        c = self.slurm.get(action.cluster)
        if c is None:
            raise no_client(action.cluster)
        existed = await c.delete_partition(action.name)
        await self._stamp(action.nodeset, wellknown.ANNOTATION_NODESET_PARTITION, None)
        return EffectResult("ok" if existed else "noop", f"partition {action.name} deleted")

    async def _release(self, action: ReleaseNodeSetFinalizer) -> EffectResult:
        """Remove our finalizer from a NodeSet with no stamp left (rule 20)."""
        ann = wellknown.ANNOTATION_NODESET_PARTITION
        if await self._stamp(action.nodeset, ann, None):
            return EffectResult("noop", "NodeSet is gone")
        return EffectResult("ok", f"finalizer {wellknown.FINALIZER_NODESET_SLURM} released")

    async def _read_nodeset(self, ref: NodeSetRef) -> dict[str, Any] | None:
        """NodeSet ``ref``'s metadata; None when it is gone or re-created (another uid)."""
        obj = await read_unless_gone(
            self.custom.get_namespaced_custom_object(
                *NODESET_API, ref.namespace, "nodesets", ref.name
            )
        )
        if obj is None:
            return None
        meta: dict[str, Any] = obj.get("metadata") or {}
        if ref.uid and meta.get("uid") != ref.uid:
            return None
        return meta

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

    async def _delete_failed(self, action: DeleteFailedNodeSetPod) -> EffectResult:
        """Record the failure on the NodeSet first (so the back-off holds whatever happens
        next), then delete the pod — only that uid, only while it is terminal."""
        ref, pod = action.nodeset, action.pod
        try:
            current = DECODE_POD.decode(
                await read_raw(
                    self.core.read_namespaced_pod(pod.name, pod.namespace, _preload_content=False)
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "pod is gone")
            raise
        if current.metadata.uid != pod.uid:
            return EffectResult("noop", "another pod of that name now")
        if current.status.phase not in ("Failed", "Succeeded"):
            return EffectResult("skipped", f"pod is {current.status.phase}, not terminal")
        try:
            obj: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                *NODESET_API, ref.namespace, "nodesets", ref.name
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            obj = {}
        meta = obj.get("metadata") or {}
        if meta and (not ref.uid or meta.get("uid") == ref.uid):
            ann = wellknown.ANNOTATION_NODESET_POD_FAILURES
            try:
                found = msgspec.json.decode((meta.get("annotations") or {}).get(ann, "{}"))
            except msgspec.DecodeError:
                found = {}
            # Whatever someone wrote there ("5", "[]"): start a fresh count, not a TypeError.
            failures = dict(found) if isinstance(found, dict) else {}
            horizon = action.at - 600
            failures = {
                k: v
                for k, v in failures.items()
                if isinstance(v, list) and len(v) == 3 and isinstance(v[1], int) and v[1] > horizon
            }
            failures[action.key or pod.name] = [action.failures, action.at, pod.uid]
            body = {
                "metadata": {
                    "resourceVersion": meta.get("resourceVersion", ""),
                    "annotations": {ann: msgspec.json.encode(failures).decode()},
                }
            }
            await self._merge(self.custom.patch_namespaced_custom_object, ref, body)
        delete: Any = self.core.delete_namespaced_pod
        try:
            await read_raw(
                delete(
                    pod.name,
                    pod.namespace,
                    body={"preconditions": {"uid": pod.uid}},
                    _preload_content=False,
                )
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                return EffectResult("noop", "pod is gone")
            raise
        return EffectResult("ok", f"failure {action.failures} of {pod.name} recorded")

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

    async def _merge(self, call: Any, ref: NodeSetRef, body: dict[str, Any]) -> bool:
        """Merge-patch NodeSet ``ref`` (or its subresource, by ``call``); False if gone."""
        return await merge_custom(call, "nodesets", ref.namespace, ref.name, body)

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
            if exc.status == 404:
                return EffectResult("noop", "NodeSet is gone")
            if exc.status == 422:
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

    async def _label(self, action: SetPodLabel) -> EffectResult:
        """Read the pod (gone, or another pod of that name now ⇒ noop), skip when the label is
        already as wanted, then one JSON patch whose first op tests ``/metadata/uid``: a merge
        patch carrying the uid would answer 422 ``field is immutable`` for a replaced pod, not
        a precondition failure. Without a labels map to add to, the patch also tests the
        resourceVersion read, so labels added meanwhile are never overwritten."""
        return await self._pod_meta(action.pod, "labels", action.label, action.value)

    async def _annotation(self, action: SetPodAnnotation) -> EffectResult:
        """As :meth:`_label`, for annotation ``action.annotation``."""
        return await self._pod_meta(action.pod, "annotations", action.annotation, action.value)

    async def _pod_meta(self, pod: PodRef, field: str, key: str, value: str | None) -> EffectResult:
        """Set or remove ``metadata.<field>[key]`` of ``pod`` (``field``: labels or
        annotations) — see :meth:`_label`."""
        raw = await read_pod(self.core, pod)
        if raw is None:
            return EffectResult("noop", "pod is gone")
        current = getattr(raw.metadata, field) or {}
        if current.get(key) == value:
            return EffectResult("noop", f"{field[:-1]} already as wanted")
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/uid", "value": raw.metadata.uid}
        ]
        path = f"/metadata/{field}/" + json_pointer(key)
        if value is None:
            ops.append({"op": "remove", "path": path})
        elif current:
            ops.append({"op": "add", "path": path, "value": value})
        else:
            ops += [
                {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": raw.metadata.resourceVersion,
                },
                {"op": "add", "path": f"/metadata/{field}", "value": {key: value}},
            ]
        try:
            await patch_pod(self.core, pod, ops, JSON_PATCH)
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "pod is gone")
            if exc.status != 422:
                raise
            now = await read_pod(self.core, pod)
            if now is None or now.metadata.uid != raw.metadata.uid:
                return EffectResult("noop", "pod is gone")
            if now.metadata.resourceVersion != raw.metadata.resourceVersion:
                raise Transient(f"pod {pod.key} changed meanwhile ({field})", 0.1) from exc
            raise
        return EffectResult("ok")


def nodeset_pod(
    nodeset: dict[str, Any], action: CreateNodeSetPod
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The slurmd pod ``action`` asks for, built from NodeSet ``nodeset`` as read (decoded
    JSON), and the PersistentVolumeClaims to create before it: ``(pod, claims)``.

    The pod is ``spec.template`` with, as slurm-operator 1.x builds it
    (``internal/controller/nodeset/utils.go`` ``newNodeSetPod``, ``initIdentity``,
    ``UpdateStorage``): name ``<nodeset>-<ordinal>`` (DaemonSet mode: ``generateName``
    ``<nodeset>-`` and the node's hostname), ``hostname``, the pin to ``action.node`` as
    required node affinity, the v1beta1 ``spec.slurmd`` container merged over the template's
    container of that name (or added first), ``extraConf`` as slurmd's ``--conf``,
    ``serviceName`` as ``subdomain``, the slurmd/instance/revision/hostname/scaling-mode
    labels, the NodeSet as controller owner, one volume per claim template, and a toleration
    of the bridge's own ``slinky.slurm.net/managed-node`` taint unless the template has one
    (:func:`reconcilers.nodeset._daemon.slurmd_tolerations`; 1.x's worker_app.go gives its own
    worker taint's toleration the same way). Pure: no I/O.
    """
    ref = action.nodeset
    meta = nodeset.get("metadata") or {}
    spec = nodeset.get("spec") or {}
    template = spec.get("template") or {}
    tmeta = template.get("metadata") or {}
    pod_spec = dict(template.get("spec") or {})
    daemon = bool(action.hostname)
    hostname = action.hostname or action.pod_name
    pod_spec["hostname"] = hostname
    if action.node:
        pod_spec["affinity"] = _pin_affinity(pod_spec.get("affinity"), action.node)
    slurmd = spec.get("slurmd") or {}
    if slurmd:
        # v1beta1 (slurm-operator 1.x) gives the slurmd container apart from the
        # template: it is merged over the template's container of that name, or added.
        cname = slurmd.get("name") or "slurmd"
        containers = list(pod_spec.get("containers") or [])
        at = next((i for i, c in enumerate(containers) if c.get("name") == cname), None)
        merged = {**(containers[at] if at is not None else {}), **slurmd, "name": cname}
        if at is None:
            containers.insert(0, merged)
        else:
            containers[at] = merged
        pod_spec["containers"] = containers
    if spec.get("extraConf"):
        pod_spec["containers"] = _with_conf(
            list(pod_spec.get("containers") or []),
            slurmd.get("name") or "slurmd",
            ref.name,
            str(spec["extraConf"]),
        )
    if spec.get("serviceName"):
        pod_spec["subdomain"] = spec["serviceName"]
    tolerations = list(pod_spec.get("tolerations") or [])
    if not _daemon.tolerates_managed_node(_toleration(t) for t in tolerations):
        # The bridge taints the nodes slurmd pods make Slurm nodes of: without this the
        # kubelet refuses (or evicts) the pod on exactly the nodes it is meant for.
        t = _daemon.MANAGED_NODE_TOLERATION
        pod_spec["tolerations"] = [
            *tolerations,
            {"key": t.key, "operator": t.operator, "effect": t.effect},
        ]
    claims = claims_for(nodeset, daemon, hostname if daemon else action.pod_name)
    if claims:
        # utils.go UpdateStorage: one volume per claim template, named after it, replacing
        # a template volume of that name.
        names = {tname for tname, _ in claims}
        pod_spec["volumes"] = [
            {"name": tname, "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
            for tname, claim in claims
        ] + [v for v in pod_spec.get("volumes") or [] if v.get("name") not in names]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **({"generateName": f"{ref.name}-"} if daemon else {"name": action.pod_name}),
            "namespace": ref.namespace,
            "labels": {
                **(tmeta.get("labels") or {}),
                "app.kubernetes.io/name": "slurmd",
                "app.kubernetes.io/instance": ref.name,
                wellknown.LABEL_REVISION_HASH: _revision_hash(nodeset),
                # utils.go initIdentity: the Slurm node name and the scaling mode.
                wellknown.LABEL_POD_HOSTNAME: hostname,
                wellknown.LABEL_SCALING_MODE: "DaemonSet" if daemon else "StatefulSet",
            },
            "annotations": dict(tmeta.get("annotations") or {}),
            "ownerReferences": [
                _owner_ref("/".join(NODESET_API), "NodeSet", ref.name, meta.get("uid", ref.uid))
            ],
        },
        "spec": pod_spec,
    }
    return pod, [claim for _, claim in claims]


def _toleration(raw: Any) -> Toleration:
    """A template's ``spec.tolerations`` entry (decoded JSON) as a :class:`Toleration`; an
    empty operator reads as Equal (core/v1 toleration.go)."""
    raw = raw if isinstance(raw, dict) else {}
    return Toleration(
        key=str(raw.get("key") or ""),
        operator=str(raw.get("operator") or "Equal"),
        value=str(raw.get("value") or ""),
        effect=str(raw.get("effect") or ""),
    )


def _revision_hash(nodeset: dict[str, Any]) -> str:
    """The revision hash of NodeSet ``nodeset`` as read (decoded JSON)."""
    status = nodeset.get("status") or {}
    return revisions.revision_hash(
        revisions.revision_data(nodeset.get("spec") or {}),
        int(status.get("collisionCount") or 0),
    )


def _pin_affinity(affinity: Any, node: str) -> dict[str, Any]:
    """``affinity`` with its required node affinity replaced by one term
    ``metadata.name In [node]`` (Kubernetes pkg/controller/daemon/util
    ``ReplaceDaemonSetPodNodeNameNodeAffinity``, used by slurm-operator utils.go for
    DaemonSet pods and ``pinPodToNode``): the pod can run on that node only."""
    out = dict(affinity or {})
    node_affinity = dict(out.get("nodeAffinity") or {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }
    out["nodeAffinity"] = node_affinity
    return out


def parse_extra_conf(extra_conf: str) -> dict[str, list[str]] | None:
    """``extraConf`` as ``Key=Value`` items separated by blanks, the key title-cased and the
    values split at commas, repeated keys collected (slurm-operator
    internal/builder/workerbuilder/worker_app.go ``ParseExtraConf``); None when an item is
    not ``Key=Value``."""
    out: dict[str, list[str]] = {}
    for item in extra_conf.split():
        key, eq, value = item.partition("=")
        if not eq:
            return None
        out.setdefault(key.title(), []).extend(value.split(","))
    return out


def conf_arg(nodeset: str, extra_conf: str) -> str:
    """The value slurmd's ``--conf`` gets (worker_app.go ``slurmdConfArgs``): ``Key=Value``
    items sorted and joined by a space — ``Features`` the NodeSet's name plus the
    ``Feature``/``Features`` of ``extraConf`` (sorted, de-duplicated: ``baselineFeatures``),
    the other keys of ``extraConf`` as given; an unreadable ``extraConf`` gives the
    baseline alone. 1.x's ``Topology`` item (a shell variable) and its single quotes (its
    args pass through a shell) are left out: the args here reach slurmd as they are."""
    conf = parse_extra_conf(extra_conf) or {}
    features = sorted({nodeset, *conf.get("Feature", []), *conf.get("Features", [])})
    items = {"Features": ",".join(f for f in features if f)}
    items.update({k: ",".join(v) for k, v in conf.items() if k not in ("Feature", "Features")})
    return " ".join(sorted(f"{k}={v}" for k, v in items.items()))


def _with_conf(
    containers: list[dict[str, Any]], name: str, nodeset: str, extra_conf: str
) -> list[dict[str, Any]]:
    """``containers`` with ``--conf <conf_arg>`` appended to container ``name``'s args."""
    conf = ["--conf", conf_arg(nodeset, extra_conf)]
    return [
        {**c, "args": [*(c.get("args") or []), *conf]} if c.get("name") == name else c
        for c in containers
    ]


def claims_for(
    nodeset: dict[str, Any], daemon: bool, suffix: str
) -> list[tuple[str, dict[str, Any]]]:
    """The PersistentVolumeClaims of one pod of ``nodeset`` (decoded JSON), as
    ``(template name, claim)``: named ``<template>-<nodeset>-<ordinal>`` (StatefulSet mode:
    ``suffix`` is the pod name ``<nodeset>-<ordinal>``) or ``<template>-<nodeset>-<hostname>``
    (DaemonSet mode: ``suffix`` is the hostname) — slurm-operator utils.go
    ``GetPersistentVolumeClaims``, ``GetPersistentVolumeClaimNameOrdinal`` /
    ``…NameNodeName``; labels the template's plus the NodeSet's pod selector. With
    ``persistentVolumeClaimRetentionPolicy.whenDeleted: Delete`` the NodeSet is the claim's
    controller owner, so Kubernetes' garbage collector deletes the claim with the NodeSet
    (podcontrol.go ``updateClaimOwnerRefForSetAndPod``, as a StatefulSet's claims).
    ``whenScaled: Delete`` is applied when a pod is condemned (:func:`claim_owners`)."""
    meta = nodeset.get("metadata") or {}
    spec = nodeset.get("spec") or {}
    name = str(meta.get("name") or "")
    policy = spec.get("persistentVolumeClaimRetentionPolicy") or {}
    owner = [
        {
            "apiVersion": "/".join(NODESET_API),
            "kind": "NodeSet",
            "name": name,
            "uid": meta.get("uid", ""),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    out = []
    for template in spec.get("volumeClaimTemplates") or []:
        tmeta = template.get("metadata") or {}
        tname = str(tmeta.get("name") or "")
        claim_name = f"{tname}-{name}-{suffix}" if daemon else f"{tname}-{suffix}"
        claim: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": claim_name,
                "namespace": meta.get("namespace"),
                "labels": {
                    **(tmeta.get("labels") or {}),
                    "app.kubernetes.io/name": "slurmd",
                    "app.kubernetes.io/instance": name,
                },
                **({"annotations": tmeta["annotations"]} if tmeta.get("annotations") else {}),
                **({"ownerReferences": owner} if policy.get("whenDeleted") == "Delete" else {}),
            },
            "spec": template.get("spec") or {},
        }
        out.append((tname, claim))
    return out


#: Retention policy value that deletes claims (apps/v1
#: ``DeletePersistentVolumeClaimRetentionPolicyType``); anything else keeps them ("Retain",
#: and an unknown value, which Kubernetes logs and treats as Retain).
RETENTION_DELETE: Final = "Delete"


def _owner_ref(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    # metav1.NewControllerRef, as Kubernetes' addControllerRef makes it.
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def claim_owners(
    refs: list[dict[str, Any]],
    *,
    when_deleted: str,
    when_scaled: str,
    nodeset: tuple[str, str],
    pod: tuple[str, str],
    scaled: bool,
) -> list[dict[str, Any]]:
    """The ``ownerReferences`` a NodeSet pod's PersistentVolumeClaim should have, given its
    current ``refs`` (decoded JSON), the NodeSet's ``persistentVolumeClaimRetentionPolicy``
    (``when_deleted`` / ``when_scaled``: ``"Delete"``, else Retain), the NodeSet and pod as
    ``(name, uid)``, and whether the pod is condemned by a scale-in (``scaled``). Returns
    ``refs`` itself when nothing needs to change (callers compare to skip the write).

    Rules of Kubernetes pkg/controller/statefulset/stateful_set_utils.go
    ``claimOwnerMatchesSetAndPod`` / ``updateClaimOwnerRefForSetAndPod`` (used by
    stateful_pod_control.go ``ClaimsMatchRetentionPolicy`` /
    ``UpdatePodClaimForRetentionPolicy``), as slurm-operator 1.x podcontrol.go
    ``isClaimOwnerUpToDate`` / ``updateClaimOwnerRefForSetAndPod`` copies them for NodeSets:

    * a reference naming the NodeSet or the pod with another uid (a stale one: an earlier
      object of that name) ⇒ the claim is left alone;
    * another object is the claim's controller (and the policy is not Retain/Retain) ⇒ the
      NodeSet's and pod's references are removed and none added;
    * else the NodeSet's and pod's references are replaced by controller references:
      ``whenScaled: Delete`` and condemned ⇒ the pod (the garbage collector deletes the
      claim with it); otherwise ``whenDeleted: Delete`` ⇒ the NodeSet; otherwise none.
      A kept pod therefore never owns its claims (a reversed scale-in takes it off).

    Unlike 1.x, which takes the ``pod-cordon`` annotation as "scaled down", ``scaled`` is
    the reconciler's scale-in condemnation, as Kubernetes' ``isCondemned``.
    """
    set_name, set_uid = nodeset
    pod_name, pod_uid = pod

    def is_set(r: dict[str, Any]) -> bool:
        return (
            r.get("kind") == "NodeSet"
            and str(r.get("apiVersion") or "").split("/")[0] == NODESET_API[0]
            and r.get("name") == set_name
        )

    def is_pod(r: dict[str, Any]) -> bool:
        return r.get("kind") == "Pod" and r.get("apiVersion") == "v1" and r.get("name") == pod_name

    if any(
        (is_set(r) and r.get("uid") != set_uid) or (is_pod(r) and r.get("uid") != pod_uid)
        for r in refs
    ):
        return refs
    others = [r for r in refs if not is_set(r) and not is_pod(r)]
    retain_all = RETENTION_DELETE not in (when_deleted, when_scaled)
    if not retain_all and any(r.get("controller") for r in others):
        return others if len(others) != len(refs) else refs
    ours: list[dict[str, Any]] = []
    if when_scaled == RETENTION_DELETE and scaled:
        ours.append(_owner_ref("v1", "Pod", pod_name, pod_uid))
    elif when_deleted == RETENTION_DELETE:
        ours.append(_owner_ref("/".join(NODESET_API), "NodeSet", set_name, set_uid))
    mine = [r for r in refs if is_set(r) or is_pod(r)]
    if [(r.get("uid"), bool(r.get("controller"))) for r in mine] == [
        (r["uid"], True) for r in ours
    ]:
        return refs
    return others + ours


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
