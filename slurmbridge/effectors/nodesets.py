"""NodeSet effects (Slinky slurm-operator NodeSet controller semantics)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas import wellknown
from schemas.actions import (
    Action,
    CreateNodeSetPod,
    DeleteFailedNodeSetPod,
    DeleteNodeSetPod,
    EnsureNodeSetPDB,
    NodeSetRef,
    ScaleNodeSet,
    SetNodeSetStatus,
    SetPodLabel,
    SetSlurmNodeConditions,
)
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
)
from slurmbridge.kube.api import read_raw
from slurmbridge.kube.wire import DECODE_POD
from slurmbridge.runtime.outcomes import EffectResult, Transient
from slurmbridge.slurm import errors as slurm_errors
from slurmbridge.slurm.client import SlurmClient


class NodeSetEffector(Effector):
    """NodeSet actions (Slinky slurm-operator NodeSet controller semantics).

    * create pod: read the NodeSet (its uid must be the action's: a re-created NodeSet gets
      its own decision), build the pod from ``spec.template`` — name and hostname the pod
      name, ``subdomain`` the ``serviceName``, labels ``app.kubernetes.io/name=slurmd`` and
      ``app.kubernetes.io/instance=<nodeset>``, the NodeSet as controller owner — and create
      it; it exists already ⇒ noop;
    * delete pod: ask Slurm for the pod's node first. Unknown to Slurm ⇒ delete; DRAIN and
      not ALLOCATED / MIXED / COMPLETING ⇒ delete (uid precondition); otherwise skipped; the
      lookup failing ⇒ Transient (*not* drained: slurm-operator PR #79);
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
    }

    def __init__(self, api: client.ApiClient, slurm: dict[str, SlurmClient]) -> None:
        self.core = client.CoreV1Api(api)
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
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        template = spec.get("template") or {}
        tmeta = template.get("metadata") or {}
        pod_spec = dict(template.get("spec") or {})
        pod_spec["hostname"] = action.pod_name
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
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": action.pod_name,
                "namespace": ref.namespace,
                "labels": {
                    **(tmeta.get("labels") or {}),
                    "app.kubernetes.io/name": "slurmd",
                    "app.kubernetes.io/instance": ref.name,
                },
                "annotations": dict(tmeta.get("annotations") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "/".join(NODESET_API),
                        "kind": "NodeSet",
                        "name": ref.name,
                        "uid": meta.get("uid", ref.uid),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": pod_spec,
        }
        create: Any = self.core.create_namespaced_pod
        return await create_unless_exists(
            create(ref.namespace, pod, _preload_content=False), f"pod {action.pod_name}"
        )

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
            return EffectResult(
                "skipped", f"Slurm node {action.slurm_node} is {'+'.join(node.state)}"
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
        return EffectResult("ok", "drained and idle" if node is not None else "not in Slurm")

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
            failures[pod.name] = [action.failures, action.at, pod.uid]
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
            },
        }
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
        try:
            scale: dict[str, Any] = await self.custom.get_namespaced_custom_object_scale(
                *NODESET_API, ref.namespace, "nodesets", ref.name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return scale

    async def _label(self, action: SetPodLabel) -> EffectResult:
        """Read the pod (gone, or another pod of that name now ⇒ noop), skip when the label is
        already as wanted, then one JSON patch whose first op tests ``/metadata/uid``: a merge
        patch carrying the uid would answer 422 ``field is immutable`` for a replaced pod, not
        a precondition failure. Without a labels map to add to, the patch also tests the
        resourceVersion read, so labels added meanwhile are never overwritten."""
        pod = action.pod
        raw = await read_pod(self.core, pod)
        if raw is None:
            return EffectResult("noop", "pod is gone")
        labels = raw.metadata.labels or {}
        if labels.get(action.label) == action.value:
            return EffectResult("noop", "label already as wanted")
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/uid", "value": raw.metadata.uid}
        ]
        path = "/metadata/labels/" + json_pointer(action.label)
        if action.value is None:
            ops.append({"op": "remove", "path": path})
        elif labels:
            ops.append({"op": "add", "path": path, "value": action.value})
        else:
            ops += [
                {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": raw.metadata.resourceVersion,
                },
                {"op": "add", "path": "/metadata/labels", "value": {action.label: action.value}},
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
                raise Transient(f"SetPodLabel: pod {pod.key} changed meanwhile", 0.1) from exc
            raise
        return EffectResult("ok")
