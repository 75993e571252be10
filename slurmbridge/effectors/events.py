"""Kubernetes Events (core/v1) on the objects slurmbridge acts on."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Final

from schemas.actions import (
    RecordEvent,
)
from slurmbridge.kube import apis, writes
from slurmbridge.kube.apis import ApiException
from slurmbridge.kube.errors import Conflict, typed
from slurmbridge.runtime.outcomes import EffectResult

#: Where an Event about a cluster-scoped object (a Node) goes: client-go's recorder puts it
#: in ``metav1.NamespaceDefault`` (tools/record/event.go ``makeEvent``), and the API server
#: refuses it anywhere else but ``""`` (pkg/apis/core/validation/events.go
#: ``legacyValidateEvent``: 422 ``involvedObject.namespace … does not match
#: event.namespace``), whatever namespace slurmbridge itself runs in.
CLUSTER_SCOPED_EVENTS_NAMESPACE: Final = "default"


async def record_event(
    core: apis.CoreV1Api, action: RecordEvent, *, component: str
) -> EffectResult:
    """Create a core/v1 Event on the action's object, in the object's namespace (``default``
    for an object without one, such as a Node: :data:`CLUSTER_SCOPED_EVENTS_NAMESPACE`),
    reported by ``component``; an Event with ``action.once`` that exists already is a
    ``noop`` (409 AlreadyExists).

    Raises:
        ApiException: any other refusal (the caller's error map classifies it).
    """
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    namespace = action.namespace or CLUSTER_SCOPED_EVENTS_NAMESPACE
    involved: dict[str, str] = {
        "apiVersion": action.api_version,
        "kind": action.object_kind,
        "name": action.name,
    }
    if action.namespace:
        involved["namespace"] = action.namespace
    if action.uid:
        involved["uid"] = action.uid
    # A plain JSON body: the generated models' recursive serialisation costs more than
    # the request itself when a thousand nodes register at once.
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{action.name}.{action.once or uuid.uuid4().hex[:16]}",
            "namespace": namespace,
        },
        "involvedObject": involved,
        "reason": action.reason,
        "message": action.message,
        "type": action.type,
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": component,
    }
    try:
        await writes.create_namespaced_event(core, namespace, body)
    except ApiException as exc:
        if isinstance(typed(exc), Conflict) and action.once:
            return EffectResult("noop", f"Event {action.reason} recorded before ({action.once})")
        raise
    return EffectResult("ok")
