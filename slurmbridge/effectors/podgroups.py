"""The Kubernetes Workload API PodGroup's scheduled condition (``scheduling.k8s.io``): read
for the uid and the current conditions, then a merge patch of ``/status`` with the read's
resourceVersion (Slinky slurm-bridge podgroup_status.go ``markPodGroupScheduled``)."""

from __future__ import annotations

from typing import Any

from schemas import wellknown
from schemas.actions import SetPodGroupScheduled
from slurmbridge.effectors.common import MERGE, now_rfc3339, ok_unless_gone, read_unless_gone
from slurmbridge.kube import apis
from slurmbridge.kube.api import read_raw
from slurmbridge.runtime.outcomes import EffectResult, Permanent

PLURAL = "podgroups"


async def set_pod_group_scheduled(
    custom: apis.CustomObjectsApi, action: SetPodGroupScheduled
) -> EffectResult:
    """Read the PodGroup (gone or re-created ⇒ noop; the condition already True ⇒ noop), then
    merge-patch ``status.conditions`` (the others kept) with a resourceVersion precondition.
    ``lastTransitionTime`` is now (the status flips to True); ``observedGeneration`` the
    generation read (metav1.Condition).

    Raises:
        Permanent: ``api_version`` is not a scheduling.k8s.io version slurmbridge knows.
        ApiException: any other non-2xx answer (mapped by the effector's error map).
    """
    group, _, version = action.api_version.partition("/")
    cond_type = wellknown.CONDITION_POD_GROUP_SCHEDULED.get(version)
    if group != wellknown.SCHEDULING_GROUP or cond_type is None:
        raise Permanent(f"not a Workload API PodGroup version: {action.api_version!r}")
    obj: dict[str, Any] | None = await read_unless_gone(
        custom.get_namespaced_custom_object(group, version, action.namespace, PLURAL, action.name)
    )
    if obj is None:
        return EffectResult("noop", "PodGroup is gone")
    meta = obj.get("metadata") or {}
    if action.uid and meta.get("uid") != action.uid:
        return EffectResult("noop", "PodGroup was re-created")
    conditions = list((obj.get("status") or {}).get("conditions") or [])
    if any(c.get("type") == cond_type and c.get("status") == "True" for c in conditions):
        return EffectResult("noop", f"{cond_type} is True already")
    condition = {
        "type": cond_type,
        "status": "True",
        "observedGeneration": int(meta.get("generation") or 0),
        "lastTransitionTime": now_rfc3339(),
        "reason": wellknown.REASON_POD_GROUP_SCHEDULED,
        "message": action.message[:32768],
    }
    body = {
        "metadata": {"resourceVersion": meta.get("resourceVersion", "")},
        "status": {
            "conditions": [c for c in conditions if c.get("type") != cond_type] + [condition]
        },
    }
    patch: Any = custom.patch_namespaced_custom_object_status
    return await ok_unless_gone(
        read_raw(
            patch(
                group,
                version,
                action.namespace,
                PLURAL,
                action.name,
                body,
                _content_type=MERGE,
                _preload_content=False,
            )
        ),
        "PodGroup",
        f"{cond_type}=True",
    )
