"""The Slinky Cluster object's status (``isReady`` and the ``Ready`` condition): read for the
uid and the current condition, then a merge patch of ``/status`` with the read's
resourceVersion."""

from __future__ import annotations

import datetime as dt

from schemas.actions import (
    SetClusterStatus,
)
from slurmbridge.effectors.common import (
    merge_custom,
    read_slinky,
)
from slurmbridge.kube import apis
from slurmbridge.runtime.outcomes import EffectResult


async def set_cluster_status(
    custom: apis.CustomObjectsApi, action: SetClusterStatus
) -> EffectResult:
    """Read the Cluster (uid check, current Ready condition), then merge-patch its status
    with a resourceVersion precondition; ``lastTransitionTime`` moves only when the
    condition's status flips (Kubernetes API conventions)."""
    ref = action.cluster
    obj = await read_slinky(custom, "clusters", "Cluster", ref.namespace, ref.name, ref.uid)
    if isinstance(obj, EffectResult):
        return obj
    meta = obj.get("metadata") or {}
    status = "True" if action.is_ready else "False"
    conditions = list((obj.get("status") or {}).get("conditions") or [])
    old = next((c for c in conditions if c.get("type") == "Ready"), None)
    since = (old or {}).get("lastTransitionTime") if (old or {}).get("status") == status else None
    ready = {
        "type": "Ready",
        "status": status,
        "reason": action.reason,
        "message": action.message[:32768],
        "lastTransitionTime": since or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "observedGeneration": action.generation,
    }
    body = {
        "metadata": {"resourceVersion": meta.get("resourceVersion", "")},
        "status": {
            "isReady": action.is_ready,
            "conditions": [c for c in conditions if c.get("type") != "Ready"] + [ready],
        },
    }
    call = custom.patch_namespaced_custom_object_status
    if not await merge_custom(call, "clusters", ref.namespace, ref.name, body):
        return EffectResult("noop", "Cluster is gone")
    return EffectResult("ok")
