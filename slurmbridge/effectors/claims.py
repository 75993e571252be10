"""DRA ResourceClaim effects of placement and workload (Slinky slurm-bridge ``dra.go``:
``manageResourceClaim``, ``bindClaim``, ``patchPodExtendedResourceClaimStatus``).

Mixed into :class:`~slurmbridge.effectors.pods.PodEffector`, which performs them:

* allocate: read the claim (uid precondition; gone ⇒ Transient, so the bind after it
  waits, unless the pod is gone too ⇒ noop), then one merge patch of its ``/status`` with
  the resourceVersion read as precondition: ``allocation`` (``devices.results``, and a
  ``nodeSelector`` matching field ``metadata.name`` to the node, as the kube-scheduler and
  Slinky write it) and ``reservedFor`` with the pod added. Already allocated to the same
  devices ⇒ only the reservation is added (noop when present); allocated to other devices ⇒
  Transient (the next decision sees the claim as it is and says why);
* extended resources: find the pod's claim (owned by the pod, annotation
  ``resource.kubernetes.io/extended-resource-claim: "true"``) or create it, allocate it as
  above, then strategic-merge the pod's ``status.extendedResourceClaimStatus``;
* release: remove the pod from ``reservedFor`` and clear ``allocation`` when no consumer is
  left; or delete the claim (uid precondition) when slurmbridge made it.

Shapes: resource.k8s.io/v1 ResourceClaim (``status.allocation.devices.results[]``:
``request``, ``driver``, ``pool``, ``device``; ``status.reservedFor[]``: ``resource``,
``name``, ``uid``), core/v1 Pod ``status.extendedResourceClaimStatus`` (``requestMappings[]``:
``containerName``, ``requestName``, ``resourceName``; ``resourceClaimName``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from schemas.actions import (
    AllocateResourceClaim,
    ClaimRef,
    CreateExtendedResourceClaim,
    PodRef,
    ReleaseResourceClaim,
)
from schemas.events import AllocatedDevice
from slurmbridge.effectors.common import MERGE, SMP, read_pod, read_unless_gone
from slurmbridge.kube import apis, writes
from slurmbridge.kube.api import read_raw
from slurmbridge.kube.apis import ApiException
from slurmbridge.kube.errors import NotFound, typed
from slurmbridge.runtime.outcomes import EffectResult, Transient

#: The resource.k8s.io API version slurmbridge writes (GA in Kubernetes 1.34).
RESOURCE_API = ("resource.k8s.io", "v1")
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def _results(devices: tuple[AllocatedDevice, ...]) -> list[dict[str, str]]:
    return [
        {"request": d.request, "driver": d.driver, "pool": d.pool, "device": d.device}
        for d in devices
    ]


def _same_devices(obj: dict[str, Any], devices: tuple[AllocatedDevice, ...]) -> bool:
    have = ((obj.get("status") or {}).get("allocation") or {}).get("devices") or {}
    got = {
        (r.get("request"), r.get("driver"), r.get("pool"), r.get("device"))
        for r in have.get("results") or []
    }
    return got == {(d.request, d.driver, d.pool, d.device) for d in devices}


def _consumer(pod: PodRef) -> dict[str, str]:
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


def _node_selector(node: str) -> dict[str, Any]:
    # As the kube-scheduler's DRA plugin and Slinky's bindClaim write it.
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }


class ClaimEffects:
    """The claim effects (module docstring); needs ``core`` and ``custom`` API clients."""

    core: apis.CoreV1Api
    custom: apis.CustomObjectsApi

    async def _read_claim(self, ref: ClaimRef) -> dict[str, Any] | None:
        """The claim, or None when it is gone or re-created under its name."""
        obj: dict[str, Any] | None = await read_unless_gone(
            self.custom.get_namespaced_custom_object(
                *RESOURCE_API, ref.namespace, "resourceclaims", ref.name
            )
        )
        if obj is None:
            return None
        if ref.uid and (obj.get("metadata") or {}).get("uid") != ref.uid:
            return None
        return obj

    async def _patch_claim_status(self, ref: ClaimRef, body: dict[str, Any]) -> None:
        patch: Any = self.custom.patch_namespaced_custom_object_status
        await read_raw(
            patch(
                *RESOURCE_API,
                ref.namespace,
                "resourceclaims",
                ref.name,
                body,
                _content_type=MERGE,
                _preload_content=False,
            )
        )

    async def _reserve(
        self,
        ref: ClaimRef,
        obj: dict[str, Any],
        pod: PodRef,
        node: str,
        devices: tuple[AllocatedDevice, ...],
    ) -> EffectResult:
        """Allocate claim ``obj`` (read just before) to ``devices`` on ``node`` and reserve
        it for ``pod``."""
        status = obj.get("status") or {}
        reserved = list(status.get("reservedFor") or [])
        here = any(r.get("uid") == pod.uid and r.get("resource") == "pods" for r in reserved)
        allocated = status.get("allocation") is not None
        if allocated and not _same_devices(obj, devices):
            raise Transient(f"ResourceClaim {ref.key} is allocated to other devices", 1.0)
        if allocated and here:
            return EffectResult("noop", f"ResourceClaim {ref.key} already allocated and reserved")
        body: dict[str, Any] = {
            "metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")},
            "status": {"reservedFor": [*reserved, _consumer(pod)] if not here else reserved},
        }
        if not allocated:
            body["status"]["allocation"] = {
                "devices": {"results": _results(devices)},
                "nodeSelector": _node_selector(node),
                "allocationTimestamp": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        await self._patch_claim_status(ref, body)
        names = ", ".join(d.device for d in devices)
        return EffectResult("ok", f"ResourceClaim {ref.key} allocated on {node}: {names}")

    async def _allocate_claim(self, action: AllocateResourceClaim) -> EffectResult:
        obj = await self._read_claim(action.claim)
        if obj is None:
            if await read_pod(self.core, action.pod) is None:
                return EffectResult("noop", "pod is gone")
            # The bind that follows must not happen without the claim: retry, and let the
            # next decision see what became of it.
            raise Transient(f"ResourceClaim {action.claim.key} not found", 1.0)
        return await self._reserve(action.claim, obj, action.pod, action.node, action.devices)

    async def _find_extended(self, pod: PodRef) -> dict[str, Any] | None:
        """The claim slurmbridge made for the pod's extended resources, if any."""
        listing: dict[str, Any] = await self.custom.list_namespaced_custom_object(
            *RESOURCE_API, pod.namespace, "resourceclaims"
        )
        for obj in listing.get("items") or []:
            md = obj.get("metadata") or {}
            owned = any(
                o.get("uid") == pod.uid and o.get("controller")
                for o in md.get("ownerReferences") or []
            )
            if owned and (md.get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION) == "true":
                obj.setdefault("apiVersion", "resource.k8s.io/v1")
                return obj  # type: ignore[no-any-return]
        return None

    async def _extended_claim(self, action: CreateExtendedResourceClaim) -> EffectResult:
        pod = action.pod
        raw = await read_pod(self.core, pod)
        if raw is None:
            return EffectResult("noop", "pod is gone")
        if raw.spec.nodeName:
            return EffectResult("skipped", f"pod already bound to {raw.spec.nodeName}")
        obj = await self._find_extended(pod)
        if obj is None:
            body = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "generateName": f"{pod.name}-extended-resources-",
                    "namespace": pod.namespace,
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": pod.name,
                            "uid": pod.uid,
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                    "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
                },
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": r.name,
                                "exactly": {
                                    "deviceClassName": r.device_class,
                                    "allocationMode": "ExactCount",
                                    "count": r.count,
                                },
                            }
                            for r in action.requests
                        ]
                    }
                },
            }
            obj = await self.custom.create_namespaced_custom_object(
                *RESOURCE_API, pod.namespace, "resourceclaims", body
            )
        md = obj.get("metadata") or {}
        ref = ClaimRef(namespace=pod.namespace, name=md.get("name", ""), uid=md.get("uid", ""))
        result = await self._reserve(ref, obj, pod, action.node, action.devices)
        status = raw.status.extendedResourceClaimStatus
        if status is not None and status.resourceClaimName == ref.name:
            return result
        body = {
            "metadata": {"resourceVersion": raw.metadata.resourceVersion},
            "status": {
                "extendedResourceClaimStatus": {
                    "resourceClaimName": ref.name,
                    "requestMappings": [
                        {
                            "containerName": m.container,
                            "requestName": m.request,
                            "resourceName": m.resource,
                        }
                        for m in action.mappings
                    ],
                }
            },
        }
        await writes.patch_namespaced_pod_status(self.core, pod.name, pod.namespace, body, SMP)
        return EffectResult("ok", f"{result.detail}; pod status names it")

    async def _release_claim(self, action: ReleaseResourceClaim) -> EffectResult:
        ref = action.claim
        obj = await self._read_claim(ref)
        if obj is None:
            return EffectResult("noop", f"ResourceClaim {ref.key} is gone")
        if action.delete:
            delete: Any = self.custom.delete_namespaced_custom_object
            try:
                await read_raw(
                    delete(
                        *RESOURCE_API,
                        ref.namespace,
                        "resourceclaims",
                        ref.name,
                        body={"preconditions": {"uid": ref.uid}} if ref.uid else None,
                        _preload_content=False,
                    )
                )
            except ApiException as exc:
                if isinstance(typed(exc), NotFound):
                    return EffectResult("noop", f"ResourceClaim {ref.key} is gone")
                raise
            return EffectResult("ok", f"ResourceClaim {ref.key} deleted")
        status = obj.get("status") or {}
        reserved = list(status.get("reservedFor") or [])
        rest = [r for r in reserved if r.get("uid") != action.pod.uid]
        if len(rest) == len(reserved) and (rest or status.get("allocation") is None):
            return EffectResult("noop", f"ResourceClaim {ref.key} not held by the pod")
        body: dict[str, Any] = {
            "metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")},
            # A merge patch replaces the list; null removes the field.
            "status": {"reservedFor": rest or None},
        }
        if not rest:
            body["status"]["allocation"] = None
        await self._patch_claim_status(ref, body)
        return EffectResult(
            "ok", f"ResourceClaim {ref.key} released" + ("" if rest else " and deallocated")
        )
