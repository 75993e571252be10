"""A NodeSet's pods: create (with claims), delete (asking Slurm first), keep or settle
claims, delete failed, label / annotate, Slurm state conditions (slurm-operator PodControl)."""

from __future__ import annotations

from typing import Any

import msgspec

from schemas import wellknown
from schemas.actions import (
    CreateNodeSetPod,
    DeleteFailedNodeSetPod,
    DeleteNodeSetPod,
    KeepNodeSetPodClaims,
    NodeSetRef,
    PodRef,
    SetPodAnnotation,
    SetPodLabel,
    SetSlurmNodeConditions,
)
from slurmbridge.effectors.common import (
    JSON_PATCH,
    MERGE,
    create_unless_exists,
    json_pointer,
    list_items,
    now_rfc3339,
    patch_pod,
    pod_json,
    read_pod,
    read_slinky,
    read_unless_gone,
)
from slurmbridge.effectors.nodeset_base import NodeSetClients
from slurmbridge.kube import writes
from slurmbridge.kube.api import NODESET_API, read_raw
from slurmbridge.kube.apis import ApiException
from slurmbridge.kube.errors import Conflict, Invalid, NotFound, typed
from slurmbridge.kube.nodeset_pod import claim_owners, claims_for, nodeset_pod
from slurmbridge.kube.wire import DECODE_POD
from slurmbridge.runtime.outcomes import EffectResult, Transient
from slurmbridge.slurm import errors as slurm_errors
from slurmbridge.slurm.client import SlurmClient


class NodeSetPodHandlers(NodeSetClients):
    """The NodeSet pod effects (create, delete, conditions, claims, labels and annotations)
    of :class:`~slurmbridge.effectors.nodesets.NodeSetEffector`, whose clients it uses."""

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
                if not isinstance(typed(exc), Conflict):
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
        items: list[dict[str, Any]] = await list_items(listing, ref.namespace, selector)
        return any(not (i.get("metadata") or {}).get("deletionTimestamp") for i in items)

    async def _slurm_conditions(self, action: SetSlurmNodeConditions) -> EffectResult:
        """Read the pod as JSON (gone, or another uid ⇒ noop), make its ``SlurmNodeState*``
        conditions exactly the action's (each ``True``; ``lastTransitionTime`` kept for one
        already True, else now; the other conditions untouched, unknown fields included),
        and merge-patch ``pods/status`` with the whole list and the resourceVersion read as
        precondition (409 ⇒ retried: a kubelet update came in between). Nothing is written
        when the conditions already match (slurm-operator nodeset_sync_status.go
        ``applySlurmPodConditions``)."""
        pod = action.pod
        answer = await read_unless_gone(pod_json(self.core, pod))
        if answer is None:
            return EffectResult("noop", "pod is gone")
        raw: dict[str, Any] = msgspec.json.decode(answer)
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
        try:
            await writes.patch_namespaced_pod_status(
                self.core, pod.name, pod.namespace, body, MERGE
            )
        except ApiException as exc:
            if isinstance(typed(exc), NotFound):
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
        c = self._client(action.cluster)
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
            if isinstance(
                typed(exc), (NotFound, Conflict)
            ):  # gone, or another pod of that name now
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
                if isinstance(typed(exc), NotFound):
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
                if isinstance(typed(exc), NotFound):
                    continue
                raise
            updated.append(cname)
        parts = [f"claims updated: {', '.join(updated)}"] if updated else []
        parts += [f"claims as wanted: {', '.join(kept)}"] if kept else []
        return "; ".join(parts)

    async def _delete_failed(self, action: DeleteFailedNodeSetPod) -> EffectResult:
        """Record the failure on the NodeSet first (so the back-off holds whatever happens
        next), then delete the pod — only that uid, only while it is terminal."""
        ref, pod = action.nodeset, action.pod
        answer = await read_unless_gone(pod_json(self.core, pod))
        if answer is None:
            return EffectResult("noop", "pod is gone")
        current = DECODE_POD.decode(answer)
        if current.metadata.uid != pod.uid:
            return EffectResult("noop", "another pod of that name now")
        if current.status.phase not in ("Failed", "Succeeded"):
            return EffectResult("skipped", f"pod is {current.status.phase}, not terminal")
        try:
            obj: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                *NODESET_API, ref.namespace, "nodesets", ref.name
            )
        except ApiException as exc:
            if not isinstance(typed(exc), NotFound):
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
            if isinstance(typed(exc), (NotFound, Conflict)):
                return EffectResult("noop", "pod is gone")
            raise
        return EffectResult("ok", f"failure {action.failures} of {pod.name} recorded")

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
            if isinstance(typed(exc), NotFound):
                return EffectResult("noop", "pod is gone")
            if not isinstance(typed(exc), Invalid):
                raise
            now = await read_pod(self.core, pod)
            if now is None or now.metadata.uid != raw.metadata.uid:
                return EffectResult("noop", "pod is gone")
            if now.metadata.resourceVersion != raw.metadata.resourceVersion:
                raise Transient(f"pod {pod.key} changed meanwhile ({field})", 0.1) from exc
            raise
        return EffectResult("ok")
