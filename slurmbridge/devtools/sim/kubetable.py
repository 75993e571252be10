"""Server-side printing for :class:`~slurmbridge.devtools.sim.kube.KubeSim`: the ``Table``
answers ``kubectl get`` asks for (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``).

As the apiserver builds them: the registry's TableConvertor always generates the wide columns
(``priority: 1`` ones too; kubectl hides them without ``-o wide``) from
pkg/printers/internalversion/printers.go (nodes, pods, namespaces, jobs), custom resources'
from their CRD's ``additionalPrinterColumns`` (apiextensions-apiserver
pkg/registry/customresource/tableconvertor: a ``date`` cell is the age, a missing value is
``null``), every other kind with the default ``Name`` / ``Created At`` columns
(apimachinery pkg/api/meta/table ``defaultTableConvertor``). Each row carries the object's
metadata as a ``PartialObjectMetadata`` (``includeObject`` defaults to that).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

Obj = dict[str, Any]

_NAME_DOC: Final = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_AGE_DOC: Final = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC."
)


def _col(name: str, typ: str = "string", *, priority: int = 0, fmt: str = "", doc: str = "") -> Obj:
    return {"name": name, "type": typ, "format": fmt, "description": doc, "priority": priority}


_NAME: Final = _col("Name", fmt="name", doc=_NAME_DOC)
_AGE: Final = _col("Age", doc=_AGE_DOC)


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (``2026-11-28T04:10:18Z``) or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """apimachinery pkg/util/duration ``HumanDuration``: ``42s``, ``3m5s``, ``2h10m``, ``5d``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _age(obj: Obj, now: datetime) -> str:
    """printers.go ``translateTimestampSince``: ``<unknown>`` without a creation time."""
    created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    if created is None:
        return "<unknown>"
    return human_duration((now - created).total_seconds())


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


# --- nodes ------------------------------------------------------------------------------------

NODE_COLUMNS: Final = [
    _NAME,
    _col("Status", doc="The status of the node"),
    _col("Roles", doc="The roles of the node"),
    _AGE,
    _col("Version", doc="Kubelet Version reported by the node."),
    _col("Internal-IP", priority=1, doc="List of addresses reachable to the node."),
    _col("External-IP", priority=1, doc="List of addresses reachable to the node."),
    _col("OS-Image", priority=1, doc="OS Image reported by the node from /etc/os-release."),
    _col("Kernel-Version", priority=1, doc="Kernel Version reported by the node."),
    _col("Container-Runtime", priority=1, doc="ContainerRuntime Version reported by the node."),
]


def _node_roles(labels: Mapping[str, str]) -> list[str]:
    """printers.go ``findNodeRoles``: ``node-role.kubernetes.io/<role>`` keys and the
    ``kubernetes.io/role`` value, sorted."""
    roles = set()
    for key, value in labels.items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key.removeprefix("node-role.kubernetes.io/")
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return sorted(roles)


def node_row(node: Obj, now: datetime) -> list[Any]:
    """printers.go ``printNode`` (wide)."""
    status_obj = node.get("status") or {}
    status: list[str] = []
    for cond in status_obj.get("conditions") or []:
        if cond.get("type") == "Ready":
            status = ["Ready" if cond.get("status") == "True" else "NotReady"]
    if not status:
        status = ["Unknown"]
    if (node.get("spec") or {}).get("unschedulable"):
        status.append("SchedulingDisabled")
    roles = ",".join(_node_roles((node.get("metadata") or {}).get("labels") or {})) or "<none>"
    info = status_obj.get("nodeInfo") or {}
    addresses = status_obj.get("addresses") or []

    def address(kind: str) -> str:
        return next((a["address"] for a in addresses if a.get("type") == kind), "<none>")

    return [
        _name(node),
        ",".join(status),
        roles,
        _age(node, now),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


# --- pods -------------------------------------------------------------------------------------

POD_COLUMNS: Final = [
    _NAME,
    _col("Ready", doc="The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", doc="The aggregate status of the containers in this pod."),
    _col(
        "Restarts",
        doc="The number of times the containers in this pod have been restarted and when the "
        "last container in this pod has restarted.",
    ),
    _AGE,
    _col("IP", priority=1, doc="podIP address allocated to the pod."),
    _col("Node", priority=1, doc="NodeName indicates in which node this pod is scheduled."),
    _col("Nominated Node", priority=1, doc="nominatedNodeName is set when this pod preempts."),
    _col("Readiness Gates", priority=1, doc="If specified, all readiness gates are evaluated."),
]


def pod_row(pod: Obj, now: datetime) -> list[Any]:
    """printers.go ``printPod`` (wide), without init containers' ``Init:`` states (the
    simulated kubelet runs none) and restart times (it never restarts a container)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    meta = pod.get("metadata") or {}
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    conditions = status.get("conditions") or []
    for cond in conditions:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    restarts = ready = 0
    has_running = False
    for cs in reversed(status.get("containerStatuses") or []):
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated is not None:
            signal = terminated.get("signal")
            reason = f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode', 0)}"
        elif cs.get("ready") and state.get("running") is not None:
            has_running = True
            ready += 1
    if reason == "Completed" and has_running:
        pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        reason = "Running" if pod_ready else "NotReady"
    if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    ips = status.get("podIPs") or []
    gates = spec.get("readinessGates") or []
    gates_cell = "<none>"
    if gates:
        true = sum(
            1
            for g in gates
            if any(
                c.get("type") == g.get("conditionType") and c.get("status") == "True"
                for c in conditions
            )
        )
        gates_cell = f"{true}/{len(gates)}"
    return [
        _name(pod),
        f"{ready}/{len(spec.get('containers') or [])}",
        reason,
        str(restarts),
        _age(pod, now),
        (ips[0].get("ip") if ips else "") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_cell,
    ]


# --- namespaces, jobs -------------------------------------------------------------------------

NAMESPACE_COLUMNS: Final = [
    _NAME,
    _col("Status", doc="The status of the namespace"),
    _AGE,
]


def namespace_row(ns: Obj, now: datetime) -> list[Any]:
    """printers.go ``printNamespace``."""
    return [_name(ns), (ns.get("status") or {}).get("phase", "Active"), _age(ns, now)]


JOB_COLUMNS: Final = [
    _NAME,
    _col("Status", doc="Status of the job."),
    _col("Completions", doc="The number of pods which reached phase Succeeded."),
    _col("Duration", doc="Time required to complete the job."),
    _AGE,
    _col("Containers", priority=1, doc="Names of each container in the template."),
    _col("Images", priority=1, doc="Images referenced by each container in the template."),
    _col("Selector", priority=1, doc="A label query over pods that should match the pod count."),
]


def _condition(obj: Obj, kind: str) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return bool(cond.get("status") == "True")
    return False


def format_selector(selector: Any) -> str:
    """apimachinery ``metav1.FormatLabelSelector``: ``a=b,c in (d,e)``; ``<none>`` when
    empty."""
    if not isinstance(selector, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op, key = expr.get("operator"), expr.get("key")
        values = ",".join(expr.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"


def job_row(job: Obj, now: datetime) -> list[Any]:
    """printers.go ``printJob`` (wide)."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    else:
        parallelism = int(spec.get("parallelism") or 0)
        completions = f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"
    start, end = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    duration = ""
    if start is not None:
        duration = human_duration(((end or now) - start).total_seconds())
    if _condition(job, "Complete"):
        state = "Complete"
    elif _condition(job, "Failed"):
        state = "Failed"
    elif (job.get("metadata") or {}).get("deletionTimestamp"):
        state = "Terminating"
    elif _condition(job, "Suspended"):
        state = "Suspended"
    elif _condition(job, "FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return [
        _name(job),
        state,
        completions,
        duration,
        _age(job, now),
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
        format_selector(spec.get("selector")),
    ]


# --- custom resources and the default ---------------------------------------------------------

DEFAULT_COLUMNS: Final = [
    _NAME,
    _col("Created At", "date", doc=_AGE_DOC),
]


def default_row(obj: Obj, now: datetime) -> list[Any]:
    """apimachinery ``defaultTableConvertor``: the name and the creation timestamp."""
    return [_name(obj), (obj.get("metadata") or {}).get("creationTimestamp")]


def _json_path(obj: Any, path: str) -> Any:
    """A CRD printer column's simple JSONPath (``.status.replicas``, ``.spec.x[0].y``)."""
    value = obj
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            index = int(part[1:-1])
            value = value[index] if isinstance(value, list) and index < len(value) else None
        else:
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            return None
    return value


def crd_columns(printer_columns: Sequence[Obj]) -> list[Obj]:
    """apiextensions tableconvertor ``New``: ``Name``, then the CRD's columns; without any,
    ``Age`` (``.metadata.creationTimestamp``, type date) — the CRD defaulting adds it."""
    columns = printer_columns or [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]
    return [_NAME] + [
        _col(
            str(c["name"]),
            str(c.get("type", "string")),
            priority=int(c.get("priority", 0)),
            fmt=str(c.get("format", "")),
            doc=str(c.get("description", "")),
        )
        for c in columns
    ]


def crd_row(printer_columns: Sequence[Obj]) -> Callable[[Obj, datetime], list[Any]]:
    """Cells of a custom resource: each column's JSONPath value; ``date`` → age,
    ``integer`` → int, ``number`` → float, ``boolean`` → bool; absent → null."""
    columns = printer_columns or [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]

    def row(obj: Obj, now: datetime) -> list[Any]:
        cells: list[Any] = [_name(obj)]
        for col in columns:
            value = _json_path(obj, str(col.get("jsonPath", "")))
            typ = col.get("type")
            if value is None:
                cells.append(None)
            elif typ == "date":
                when = parse_time(value)
                cells.append(human_duration((now - when).total_seconds()) if when else value)
            elif typ == "integer" and isinstance(value, int | float):
                cells.append(int(value))
            elif typ == "number" and isinstance(value, int | float):
                cells.append(float(value))
            elif (typ == "boolean" and isinstance(value, bool)) or isinstance(value, str):
                cells.append(value)
            else:
                cells.append(str(value))
        return cells

    return row


BUILTIN: Final[dict[str, tuple[list[Obj], Callable[[Obj, datetime], list[Any]]]]] = {
    "nodes": (NODE_COLUMNS, node_row),
    "pods": (POD_COLUMNS, pod_row),
    "namespaces": (NAMESPACE_COLUMNS, namespace_row),
    "jobs.batch": (JOB_COLUMNS, job_row),
}


def wants_table(accept: str) -> str | None:
    """The ``meta.k8s.io`` version of the Table an ``Accept`` header asks for first
    (``v1`` or ``v1beta1``), or None when JSON comes first (apiserver
    pkg/endpoints/handlers/response.go ``transformResponseObject`` / negotiation)."""
    for clause in accept.split(","):
        media, *raw = (p.strip() for p in clause.split(";"))
        params = dict(p.split("=", 1) for p in raw if "=" in p)
        if media not in ("application/json", "*/*", "application/*"):
            continue
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io":
            if params.get("v") in ("v1", "v1beta1"):
                return params["v"]
            continue
        if "as" not in params:
            return None
    return None


def to_table(
    payload: Obj,
    *,
    columns: list[Obj],
    row: Callable[[Obj, datetime], list[Any]],
    version: str,
    include_object: str,
    now: datetime | None = None,
) -> Obj:
    """A list or one object as a ``Table`` (``metadata`` keeps the list's resourceVersion and
    continue token); rows' ``object`` per ``includeObject``: ``PartialObjectMetadata``
    (default), ``Object`` or ``None``."""
    now = now or datetime.now(UTC)
    items = payload.get("items") if "items" in payload else [payload]
    rows = []
    for item in items or []:
        entry: Obj = {"cells": row(item, now)}
        if include_object == "Object":
            entry["object"] = item
        elif include_object != "None":
            entry["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": f"meta.k8s.io/{version}",
                "metadata": item.get("metadata") or {},
            }
        rows.append(entry)
    meta: Obj = {}
    list_meta = payload.get("metadata") or {} if "items" in payload else {}
    for key in ("resourceVersion", "continue", "remainingItemCount"):
        if key in list_meta:
            meta[key] = list_meta[key]
    if "items" not in payload:
        rv = (payload.get("metadata") or {}).get("resourceVersion")
        if rv:
            meta["resourceVersion"] = rv
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": meta,
        "columnDefinitions": columns,
        "rows": rows,
    }
