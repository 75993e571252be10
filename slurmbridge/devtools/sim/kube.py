"""A Kubernetes API server simulator (aiohttp), faithful to the parts slurmbridge uses.

No kube-apiserver can run on the project's machines, so tests, ``slurmbridge demo`` and users
(``slurmbridge sim kube --port P``) talk to this one instead. kubernetes_asyncio connects to it
through the kubeconfig :meth:`KubeSim.write_kubeconfig` writes. The in-process helpers of
:class:`KubeSim` (``create``, ``patch_merge``, ``cordon`` …) go through the very same store code as
HTTP requests, so they bump the resourceVersion and reach open watches.

What it models, and where it follows the real server (checked against the Kubernetes sources):

* **One global resourceVersion** (like etcd's revision), bumped on every write; a write that
  changes nothing is a no-op (no new resourceVersion, no watch event), as in the real server.
* **Watch history** is one bounded window over all kinds (``history_size`` changes). A watch
  from a resourceVersion older than the window, or older than the last :meth:`KubeSim.compact`,
  gets HTTP 200 and a single in-stream ``ERROR`` event carrying a ``Status`` (410, ``Expired``,
  ``too old resource version: R (F)``), exactly as the watch cache answers. A resourceVersion
  newer than the current one gets an in-stream 504 ``Timeout`` (``Too large resource version``).
  ``resourceVersion`` ``""``/``"0"`` starts with synthetic ``ADDED`` events. Selectors apply to
  watch events the way the cacher applies them: an object that stops matching is sent as
  ``DELETED``, one that starts matching as ``ADDED``. Bookmarks carry only the resourceVersion
  and follow the watch cache's rule (``staging/src/k8s.io/apiserver/pkg/storage/cacher``): each
  watch is offered one every ``bookmark_interval`` seconds (``defaultBookmarkFrequency``, a
  minute on a real server; 1 s by default here) and once more 2 s before its
  ``timeoutSeconds`` end (cache_watcher.go ``nextBookmarkTime``), carrying the kind's last
  resourceVersion (cacher.go ``dispatchEvents``: ``lastProcessedResourceVersion``), and it is
  sent only when that is newer than the resourceVersion the watch started from
  (cache_watcher.go ``process``: ``event.ResourceVersion > resourceVersion``). So a watch of an
  idle kind gets no bookmark at all (a real 1.32 server sent none in 125 s on idle Nodes), and
  writes to other kinds do not produce one. A bookmark waits for the watcher's queue to be
  empty, so it never overtakes an event. Not modelled: etcd's progress notifications, which
  can move an idle kind's resourceVersion about every ten minutes.
* **Restart window** (:meth:`KubeSim.restart_window`): after a real API server (re)starts,
  requests to paths not installed yet — custom resources until the CRD handlers are up, and
  unknown paths — answer 503 ``ServiceUnavailable`` "the request has been made before all known
  HTTP paths have been installed, please try again" with ``Retry-After: 5``
  (``pkg/util/notfoundhandler``); then, while watch caches initialize, watches and lists the
  cache must serve answer 429 ``TooManyRequests`` "storage is (re)initializing" with
  ``Retry-After`` growing with the downtime (cacher ``calculateRetryAfterForUnreadyCache``),
  while a paged list without selectors is delegated to etcd and succeeds
  (``shouldDelegateListOnNotReadyCache``; ResilientWatchCacheInitialization, on since 1.31).
* **Lists** are served from the current state. ``limit``/``continue`` use the real token shape
  (base64 JSON ``{"v","rv","start"}``) but later pages read the *current* state, not a snapshot
  at the token's resourceVersion; a token older than the history window answers 410 with a fresh
  ``rv=-1`` token in ``metadata.continue``, like the etcd store after a compaction.
* **Patches**: merge (RFC 7386), JSON (RFC 6902; a failed op, ``test`` included, is
  ``422 Invalid`` "the server rejected our request due to an error in our request" — the real
  ``NewGenericServerResponse(422, …)``), strategic merge with the real patch strategies of the
  fields we use (``+listType=atomic`` lists such as ``NodeSpec.taints`` and
  ``PodSpec.tolerations`` are *replaced*; ``conditions`` merge by ``type``, ``containers`` by
  ``name``, ``ownerReferences`` by ``uid``, ``finalizers`` as a set; ``$patch``,
  ``$deleteFromPrimitiveList`` and ``$setElementOrder`` directives). Custom resources reject
  strategic merge with 415, as CRD-served resources do. A ``metadata.resourceVersion`` inside any
  patch is a precondition (409 when stale), because the patched object is then updated with it.
* **Custom resources' schemas**: NodeSets and Clusters are served with the project's CRDs
  (``sim/crds``, copies of ``deploy/crds``); every create, update and patch, ``/status`` and
  ``/scale`` included, is pruned, defaulted and validated against the schema of the version
  it is written at, CEL rules included, with update ratcheting — 422 ``Invalid`` with a cause
  per field, as apiextensions-apiserver answers (:mod:`slurmbridge.devtools.sim.crdschema`).
* **Subresources**: ``/status`` writes only status and the main resource ignores status for kinds
  that have one; ``/scale`` (autoscaling/v1) for NodeSets; ``pods/binding`` (409 once bound) and
  ``pods/eviction`` (policy/v1).
* **Deletion**: finalizers keep an object with ``deletionTimestamp`` until an update empties them;
  DeleteOptions preconditions give 409. Pods are deleted at once when they have no finalizers
  (there is no kubelet to confirm a graceful termination). Deleting a namespace deletes what is in
  it. ``propagationPolicy`` is ignored (there is no garbage collector), so no ``foregroundDeletion``
  / ``orphan`` finalizers appear; only the Job controller deletes a deleted Job's pods.
* **Eviction**: the simulator is its own disruption controller: at eviction time it counts the
  PDB's pods (expected = matching pods, healthy = Ready and not being deleted) and answers 429
  ``TooManyRequests`` with a ``DisruptionBudget`` cause when no disruption is allowed; pending,
  terminal or deleting pods bypass PDBs; more than one PDB is a 500, as in ``eviction.go``.
* **Pods**: create resets ``status`` to ``{"phase": "Pending", "qosClass": …}`` (the QoS class
  computed as ``ComputePodQOS`` does), applies the defaults we rely on (``schedulerName:
  default-scheduler`` …, requests defaulted from limits, the DefaultTolerationSeconds
  tolerations) and updates may not change ``spec`` beyond the fields the real validation allows
  (images, tolerations additions, activeDeadlineSeconds, terminationGracePeriodSeconds,
  scheduling gates).
* **uid**: ``metadata.uid`` in a PUT body is a precondition (409); in a patch it is not — 422
  ``field is immutable`` on main resources and built-in ``/status``, ignored on a custom
  resource's ``/status`` and on ``/scale`` (see ``_Store._replace``). Real uid preconditions:
  DeleteOptions ``preconditions.uid``, a Binding's ``metadata.uid``, a JSON-patch ``test``.
* **Scale**: ``spec`` is ``{}`` at zero replicas (``ScaleSpec.replicas`` is omitempty).
* **ControllerRevisions** (apps/v1): served like any namespaced built-in; create answers 422
  without ``data`` or with a negative ``revision``, an update or patch that changes ``data``
  answers 422 ``field is immutable`` (pkg/apis/apps/validation
  ``ValidateControllerRevision``/``ValidateControllerRevisionUpdate``); no garbage collector
  removes them with their owner.
* **Events** (core/v1): an Event whose namespace does not agree with its ``involvedObject``'s
  answers 422 ``involvedObject.namespace … does not match event.namespace``; an Event about a
  cluster-scoped object (a Node) belongs in ``default`` (``_validate_event``; kubernetes
  pkg/apis/core/validation/events.go ``legacyValidateEvent``).
* **Nodes**: TaintNodesByCondition admission puts ``node.kubernetes.io/not-ready:NoSchedule``
  on a new Node that is not Ready; the node lifecycle controller's part that removes it once
  Ready is True runs here too (a Node created Ready is created without it: see
  ``_Store._prepare_create``).
* Requests are counted by verb and resource (:attr:`KubeSim.requests`) and by ``User-Agent``
  (:attr:`KubeSim.user_agents`).
* **Workload API** (``KubeSim(workload_api=…)``): ``scheduling.k8s.io`` PodGroup and
  Workload at v1alpha2 (1.36) or v1beta1 (1.37), one version per server (conversion between
  them is not modelled), with the validation of the fields slurmbridge uses
  (:func:`validate_workload_api`) and pods' ``spec.schedulingGroup``.
* **kubectl** (1.37, tests/e2e/test_kubectl.py): request bodies are read by their
  ``Content-Type`` as the apiserver negotiates it — JSON (also when none is given), YAML, and
  for built-in kinds the protobuf kubectl's typed clients send (``create namespace|job|
  deployment|configmap``; :mod:`slurmbridge.devtools.sim.kubeproto`); anything else is 415
  ``UnsupportedMediaType`` naming the accepted types (custom resources: JSON and YAML).
  ``/openapi/v3`` and ``/openapi/v2`` (:mod:`slurmbridge.devtools.sim.kubeopenapi`) let
  kubectl validate on the server: ``fieldValidation=Strict`` refuses a custom resource's
  unknown fields with 400 (``strict decoding error: unknown field "spec.x"``). ``GET``
  with ``Accept: application/json;as=Table;…`` answers a ``Table`` with the real printers'
  columns (:mod:`slurmbridge.devtools.sim.kubetable`). CustomResourceDefinitions are stored
  (the kinds served stay the ``ResourceSpec`` ones); discovery lists short names,
  categories and every version a group serves.
* **Controllers**: the simulated kubelets (``kubelet=True``), the resourceclaim controller
  and the Job controller (``job_controller=True``: :mod:`slurmbridge.devtools.sim.jobcontroller`).
* Not modelled: server-side apply, dryRun, managedFields, protobuf answers (requests only),
  ``fieldValidation`` of built-in kinds and ``Warn`` warnings, admission webhooks, RBAC (an
  optional fixed bearer token is all the authentication), per-kind watch caches.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import bisect
import builtins
import contextlib
import logging
import math
import random
import re
import secrets
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import jsonpatch
import jsonpointer
import orjson
import yaml
from aiohttp import web

from slurmbridge.devtools.sim import crdschema, kubeopenapi, kubeproto, kubetable

if TYPE_CHECKING:
    from slurmbridge.devtools.sim.jobcontroller import JobController
    from slurmbridge.devtools.sim.kubelet import Kubelet
    from slurmbridge.devtools.sim.resourceclaim import ResourceClaimController

log = logging.getLogger(__name__)

Obj: TypeAlias = dict[str, Any]
"""A Kubernetes object as decoded JSON (the simulator stores objects exactly like that)."""
ObjList: TypeAlias = list[Obj]

#: Strategic merge: a list of primitives merged as a set (``metadata.finalizers``).
MERGE_SET: Final = "$set"
#: Strategic merge: a map replaced rather than merged (``PodDisruptionBudgetSpec.selector``).
REPLACE: Final = "$replace"

DEFAULT_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")
DEFAULT_SCHEDULER: Final = "default-scheduler"

_MERGE_PATCH: Final = "application/merge-patch+json"
_JSON_PATCH: Final = "application/json-patch+json"
_STRATEGIC_PATCH: Final = "application/strategic-merge-patch+json"
_APPLY_PATCH: Final = "application/apply-patch+yaml"
_PATCH_TYPES: Final = {"merge": _MERGE_PATCH, "json": _JSON_PATCH, "strategic": _STRATEGIC_PATCH}

_REASONS: Final = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


# --- errors ----------------------------------------------------------------------------------


class ApiError(Exception):
    """A Kubernetes API error; :meth:`status` is the ``Status`` object the server answers with.

    Raised by the in-process helpers of :class:`KubeSim` exactly where an HTTP client would get
    the same status code, so tests can assert on ``code`` and ``reason``.
    """

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Obj | None = None,
        *,
        list_meta: Obj | None = None,
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.list_meta = list_meta

    def status(self) -> Obj:
        """The ``v1.Status`` object (``status: Failure``) for this error."""
        out: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta or {}),
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            out["reason"] = self.reason
        if self.details is not None:
            out["details"] = self.details
        out["code"] = self.code
        return out


def _details(spec: ResourceSpec, name: str, **extra: Any) -> Obj:
    out: Obj = {"name": name}
    if spec.group:
        out["group"] = spec.group
    out["kind"] = spec.plural
    out.update(extra)
    return out


def _not_found(spec: ResourceSpec, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{spec.name} "{name}" not found', _details(spec, name))


def _already_exists(spec: ResourceSpec, name: str) -> ApiError:
    msg = f'{spec.name} "{name}" already exists'
    return ApiError(409, "AlreadyExists", msg, _details(spec, name))


def _conflict(qualified: str, name: str, why: str, details: Obj | None = None) -> ApiError:
    msg = f'Operation cannot be fulfilled on {qualified} "{name}": {why}'
    return ApiError(409, "Conflict", msg, details if details is not None else {"name": name})


def _uid_precondition_failed(spec: ResourceSpec, name: str, want: str, have: Any) -> ApiError:
    """409 of a failed uid precondition (storage ``Preconditions.Check``, as a Conflict)."""
    return _conflict(
        spec.name,
        name,
        f"Precondition failed: UID in precondition: {want}, UID in object meta: {have}",
        _details(spec, name),
    )


_MODIFIED: Final = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def _validate_claim(obj: Obj, name: str) -> None:
    """A PersistentVolumeClaim create: ``spec.accessModes`` and
    ``spec.resources.requests[storage]`` are required (pkg/apis/core/validation
    ``ValidatePersistentVolumeClaimSpec``: "at least 1 access mode is required", "Required
    value"); the status starts empty (strategy.go ``PrepareForCreate``)."""
    spec = obj.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    causes: list[tuple[str, str, str]] = []
    if not spec.get("accessModes"):
        causes.append(
            (
                "spec.accessModes",
                "FieldValueRequired",
                "Required value: at least 1 access mode is required",
            )
        )
    requests = (spec.get("resources") or {}).get("requests") or {}
    if not isinstance(requests, dict) or "storage" not in requests:
        causes.append(("spec.resources[storage]", "FieldValueRequired", "Required value"))
    if causes:
        raise _invalid("PersistentVolumeClaim", name, "", causes)
    obj["status"] = {}


def _validate_event(obj: Obj, name: str) -> None:
    """A core/v1 Event's namespace must agree with its ``involvedObject``'s, on create and
    update (kubernetes ``pkg/apis/core/validation/events.go``: ``ValidateEventCreate`` and
    ``ValidateEventUpdate`` both run ``legacyValidateEvent``, which a core/v1 request gets
    alone):

    * without ``eventTime`` (the legacy form client-go's ``tools/record`` writes): an object
      with a namespace ⇒ the Event must be in that namespace; an object without one (a Node)
      ⇒ the Event must be in ``""`` or ``default`` (client-go's ``makeEvent`` puts such Events
      in ``metav1.NamespaceDefault``);
    * with ``eventTime``: an object without a namespace ⇒ ``default`` or ``kube-system``.

    Anything else answers 422 ``involvedObject.namespace: Invalid value: "<its namespace>":
    does not match event.namespace``. The other rules of the ``eventTime`` form
    (``reportingController``, ``action`` … required) are not modelled.
    """
    involved = obj.get("involvedObject")
    involved_ns = involved.get("namespace") if isinstance(involved, dict) else None
    involved_ns = involved_ns if isinstance(involved_ns, str) else ""
    event_ns = str(_meta(obj).get("namespace") or "")
    if obj.get("eventTime"):
        ok = bool(involved_ns) or event_ns in ("default", "kube-system")
    elif involved_ns:
        ok = event_ns == involved_ns
    else:
        ok = event_ns in ("", "default")
    if not ok:
        detail = (
            f"Invalid value: {orjson.dumps(involved_ns).decode()}: does not match event.namespace"
        )
        raise _invalid(
            "Event", name, "", [("involvedObject.namespace", "FieldValueInvalid", detail)]
        )


def _invalid(kind: str, name: str, group: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid; ``causes`` are ``(field, cause type, detail)``. The message names the
    qualified kind as apimachinery's ``errors.NewInvalid`` does (``GroupKind.String()``:
    ``Pod``, ``NodeSet.slinky.slurm.net``)."""
    # field.ErrorList.ToAggregate drops repeated messages; the causes keep every error.
    parts = list(dict.fromkeys(f"{fld}: {detail}" for fld, _, detail in causes))
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details: Obj = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [{"reason": t, "message": d, "field": f} for f, t, d in causes]
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {joined}', details)


def _bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def _path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def _unsupported_media_type(accepted: Iterable[str]) -> ApiError:
    """apiserver pkg/endpoints/handlers/negotiation/errors.go ``errUnsupportedMediaType``."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def _method_not_allowed() -> ApiError:
    msg = "the server does not allow this method on the requested resource"
    return ApiError(405, "MethodNotAllowed", msg, {})


def _patch_failed() -> ApiError:
    # apiserver patch.go: errors.NewGenericServerResponse(http.StatusUnprocessableEntity, ...)
    msg = "the server rejected our request due to an error in our request"
    return ApiError(422, "Invalid", msg, {})


def _expired(message: str, *, continue_token: str | None = None) -> ApiError:
    meta = {"continue": continue_token} if continue_token else None
    return ApiError(410, "Expired", message, list_meta=meta)


# --- resource registry -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleSpec:
    """Where a kind keeps the values of its ``/scale`` subresource (CRD ``scale`` paths)."""

    spec_replicas: tuple[str, ...] = ("spec", "replicas")
    status_replicas: tuple[str, ...] = ("status", "replicas")
    label_selector: tuple[str, ...] | None = ("status", "selector")


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceSpec:
    """One served resource. Register more with :meth:`KubeSim.register`.

    ``merge_keys`` maps a field path (list indices left out, e.g. ``("spec", "containers",
    "env")``) to its strategic-merge key, :data:`MERGE_SET` or :data:`REPLACE`; lists not listed
    are atomic. ``field_labels`` maps extra fieldSelector labels to ``(path, value when absent)``;
    ``metadata.name`` and ``metadata.namespace`` are always supported. ``custom`` marks a
    CRD-served kind (no strategic merge, items keep ``kind`` in lists). ``generation`` bumps
    ``metadata.generation`` when anything but metadata (and status, with a status subresource)
    changes. ``served_versions``: further versions served from the same storage, as a CRD
    with ``conversion: strategy: None`` serves them — only ``apiVersion`` differs between the
    versions' answers (apiextensions-apiserver pkg/apiserver/conversion/nop_converter.go).
    ``schemas``: a CRD-served kind's ``openAPIV3Schema`` by version; writes at a version with
    a schema are pruned, defaulted and validated as apiextensions-apiserver does
    (:mod:`slurmbridge.devtools.sim.crdschema`: 422 with a cause per field), and an object
    read at another served version is pruned and defaulted to that version's schema.
    ``printer_columns``: a CRD's ``additionalPrinterColumns`` by version (the Table columns
    ``kubectl get`` shows, :mod:`slurmbridge.devtools.sim.kubetable`); ``categories``: listed
    in discovery — a CRD's (``kubectl get slurm``), ``all`` for the built-in kinds the real
    server puts in it (pods, services, deployments, replicasets, jobs, HPAs: ``kubectl get
    all``).
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    status: bool = False
    scale: ScaleSpec | None = None
    generation: bool = False
    custom: bool = False
    return_deleted: bool = False
    merge_keys: Mapping[tuple[str, ...], str] = field(default_factory=dict)
    field_labels: Mapping[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    served_versions: tuple[str, ...] = ()
    schemas: Mapping[str, Obj] = field(default_factory=dict)
    printer_columns: Mapping[str, tuple[Obj, ...]] = field(default_factory=dict)
    categories: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        """``v1`` or ``group/version``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def name(self) -> str:
        """Qualified resource name as error messages spell it: ``pods``, ``nodesets.slinky…``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        """Kind of the list object (``NodeList``)."""
        return f"{self.kind}List"


def _pod_spec_keys(prefix: tuple[str, ...]) -> dict[tuple[str, ...], str]:
    """Strategic-merge keys of a PodSpec at ``prefix`` (k8s.io/api core/v1 struct tags)."""
    keys: dict[tuple[str, ...], str] = {
        (*prefix, "volumes"): "name",
        (*prefix, "imagePullSecrets"): "name",
        (*prefix, "hostAliases"): "ip",
        (*prefix, "topologySpreadConstraints"): "topologyKey",
        (*prefix, "schedulingGates"): "name",
        (*prefix, "resourceClaims"): "name",
    }
    for containers in ("containers", "initContainers", "ephemeralContainers"):
        base = (*prefix, containers)
        keys[base] = "name"
        keys[(*base, "env")] = "name"
        keys[(*base, "ports")] = "containerPort"
        keys[(*base, "volumeMounts")] = "mountPath"
        keys[(*base, "volumeDevices")] = "devicePath"
    return keys


#: ObjectMeta's strategies, shared by every built-in kind.
_META_KEYS: Final[Mapping[tuple[str, ...], str]] = {
    ("metadata", "finalizers"): MERGE_SET,
    ("metadata", "ownerReferences"): "uid",
}

_POD_FIELDS: Final = {
    "spec.nodeName": (("spec", "nodeName"), ""),
    "spec.schedulerName": (("spec", "schedulerName"), ""),
    "spec.restartPolicy": (("spec", "restartPolicy"), ""),
    "spec.serviceAccountName": (("spec", "serviceAccountName"), ""),
    "spec.hostNetwork": (("spec", "hostNetwork"), "false"),
    "status.phase": (("status", "phase"), ""),
    "status.podIP": (("status", "podIP"), ""),
    "status.nominatedNodeName": (("status", "nominatedNodeName"), ""),
}
_EVENT_FIELDS: Final = {
    f"involvedObject.{f}": (("involvedObject", f), "")
    for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
} | {
    "reason": (("reason",), ""),
    "reportingComponent": (("reportingComponent",), ""),
    "source": (("source", "component"), ""),
    "type": (("type",), ""),
}

SLINKY_GROUP: Final = "slinky.slurm.net"
DRA_GROUP: Final = "resource.k8s.io"

DEFAULT_RESOURCES: Final[tuple[ResourceSpec, ...]] = (
    ResourceSpec(
        group="",
        version="v1",
        plural="namespaces",
        kind="Namespace",
        namespaced=False,
        short_names=("ns",),
        status=True,
        merge_keys={("status", "conditions"): "type"},
        field_labels={"status.phase": (("status", "phase"), "")},
    ),
    ResourceSpec(
        group="",
        version="v1",
        plural="nodes",
        kind="Node",
        namespaced=False,
        short_names=("no",),
        status=True,
        merge_keys={
            ("spec", "podCIDRs"): MERGE_SET,
            ("status", "conditions"): "type",
            ("status", "addresses"): "type",
        },
        field_labels={"spec.unschedulable": (("spec", "unschedulable"), "false")},
    ),
    ResourceSpec(
        group="",
        version="v1",
        plural="pods",
        categories=("all",),
        kind="Pod",
        short_names=("po",),
        status=True,
        return_deleted=True,
        merge_keys={
            **_pod_spec_keys(("spec",)),
            ("status", "conditions"): "type",
            ("status", "podIPs"): "ip",
            ("status", "hostIPs"): "ip",
            # PodStatus.ResourceClaimStatuses: patchMergeKey=name (core/v1 types.go).
            ("status", "resourceClaimStatuses"): "name",
        },
        field_labels=_POD_FIELDS,
    ),
    ResourceSpec(
        group="",
        version="v1",
        plural="events",
        kind="Event",
        short_names=("ev",),
        field_labels=_EVENT_FIELDS,
    ),
    ResourceSpec(
        group="",
        version="v1",
        plural="secrets",
        kind="Secret",
        field_labels={"type": (("type",), "")},
    ),
    ResourceSpec(
        group="",
        version="v1",
        plural="services",
        categories=("all",),
        kind="Service",
        short_names=("svc",),
        status=True,
        merge_keys={("spec", "ports"): "port", ("status", "conditions"): "type"},
    ),
    # core/v1 PersistentVolumeClaim (k8s.io/api/core/v1/types.go): status subresource; created
    # with an empty status (pkg/registry/core/persistentvolumeclaim/strategy.go
    # PrepareForCreate; the phase is the PV controller's to set) and validated as
    # pkg/apis/core/validation ValidatePersistentVolumeClaimSpec requires (_prepare_create).
    ResourceSpec(
        group="",
        version="v1",
        plural="persistentvolumeclaims",
        kind="PersistentVolumeClaim",
        short_names=("pvc",),
        status=True,
        merge_keys={("status", "conditions"): "type"},
    ),
    ResourceSpec(group="coordination.k8s.io", version="v1", plural="leases", kind="Lease"),
    # CRDs are stored (kubectl apply -f deploy/crds); the kinds they name that the simulator
    # serves are the ResourceSpecs below, whatever the stored CRD says.
    ResourceSpec(
        group="apiextensions.k8s.io",
        version="v1",
        plural="customresourcedefinitions",
        kind="CustomResourceDefinition",
        namespaced=False,
        short_names=("crd", "crds"),
        status=True,
        generation=True,
    ),
    ResourceSpec(
        group="policy",
        version="v1",
        plural="poddisruptionbudgets",
        kind="PodDisruptionBudget",
        short_names=("pdb",),
        status=True,
        generation=True,
        merge_keys={("spec", "selector"): REPLACE, ("status", "conditions"): "type"},
    ),
    # apps/v1 ControllerRevision (k8s.io/api/apps/v1/types.go): no status, no spec, so no
    # generation; ``data`` (a RawExtension) and ``revision`` at the top level. Validation as
    # pkg/apis/apps/validation ``ValidateControllerRevision(Update)`` (_prepare_create,
    # _validate_update).
    ResourceSpec(
        group="apps", version="v1", plural="controllerrevisions", kind="ControllerRevision"
    ),
    # apps/v1 ReplicaSet and Deployment: served for a pod's owner chain (their annotations);
    # no controller runs behind them.
    ResourceSpec(
        group="apps",
        version="v1",
        plural="replicasets",
        categories=("all",),
        kind="ReplicaSet",
        short_names=("rs",),
        status=True,
        generation=True,
    ),
    ResourceSpec(
        group="apps",
        version="v1",
        plural="deployments",
        categories=("all",),
        kind="Deployment",
        short_names=("deploy",),
        status=True,
        generation=True,
    ),
    ResourceSpec(
        group="batch",
        version="v1",
        plural="jobs",
        categories=("all",),
        kind="Job",
        status=True,
        generation=True,
        merge_keys={
            **_pod_spec_keys(("spec", "template", "spec")),
            ("status", "conditions"): "type",
        },
    ),
    # Owners of pod groups (CRDs in a real cluster): enough to group pods and to carry the
    # slurmjob.slinky.slurm.net/* annotations; no controller runs behind them.
    ResourceSpec(
        group="jobset.x-k8s.io",
        version="v1alpha2",
        plural="jobsets",
        kind="JobSet",
        status=True,
        generation=True,
        custom=True,
    ),
    ResourceSpec(
        group="leaderworkerset.x-k8s.io",
        version="v1",
        plural="leaderworkersets",
        kind="LeaderWorkerSet",
        short_names=("lws",),
        status=True,
        generation=True,
        custom=True,
    ),
    ResourceSpec(
        group="scheduling.x-k8s.io",
        version="v1alpha1",
        plural="podgroups",
        kind="PodGroup",
        short_names=("pg", "pgs"),
        status=True,
        generation=True,
        custom=True,
    ),
    # deploy/crds/nodesets.slinky.slurm.net.yaml: v1beta1 stored, v1alpha1 served beside it,
    # each version's schema enforced (crdschema; the CRD packaged in sim/crds).
    ResourceSpec(
        group=SLINKY_GROUP,
        version="v1beta1",
        served_versions=("v1alpha1",),
        plural="nodesets",
        kind="NodeSet",
        status=True,
        scale=ScaleSpec(),
        generation=True,
        custom=True,
        return_deleted=True,
        schemas=crdschema.crd_schemas("nodesets.slinky.slurm.net"),
        printer_columns=crdschema.crd_printer_columns("nodesets.slinky.slurm.net"),
        short_names=crdschema.crd_names("nodesets.slinky.slurm.net")[0],
        categories=crdschema.crd_names("nodesets.slinky.slurm.net")[1],
    ),
    ResourceSpec(
        group="autoscaling",
        version="v2",
        plural="horizontalpodautoscalers",
        categories=("all",),
        kind="HorizontalPodAutoscaler",
        short_names=("hpa",),
        status=True,
        generation=True,
    ),
    ResourceSpec(
        group="keda.sh",
        version="v1alpha1",
        plural="scaledobjects",
        kind="ScaledObject",
        short_names=("so",),
        status=True,
        generation=True,
        custom=True,
    ),
    ResourceSpec(
        group=SLINKY_GROUP,
        version="v1alpha1",
        plural="clusters",
        kind="Cluster",
        status=True,
        generation=True,
        custom=True,
        return_deleted=True,
        schemas=crdschema.crd_schemas("clusters.slinky.slurm.net"),
        printer_columns=crdschema.crd_printer_columns("clusters.slinky.slurm.net"),
        short_names=crdschema.crd_names("clusters.slinky.slurm.net")[0],
        categories=crdschema.crd_names("clusters.slinky.slurm.net")[1],
    ),
    # Dynamic Resource Allocation, resource.k8s.io/v1 (GA in Kubernetes 1.34; API reference
    # "Workload Resources": DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice).
    # Validation as pkg/apis/resource/validation/validation.go: see _validate_dra.
    ResourceSpec(
        group=DRA_GROUP,
        version="v1",
        plural="deviceclasses",
        kind="DeviceClass",
        namespaced=False,
        generation=True,
    ),
    ResourceSpec(
        group=DRA_GROUP,
        version="v1",
        plural="resourceclaims",
        kind="ResourceClaim",
        status=True,
        # ResourceClaimStatus: reservedFor is +listType=map +listMapKey=uid, devices by
        # (driver, device, pool); allocation is atomic.
        merge_keys={("status", "reservedFor"): "uid"},
        field_labels={},
    ),
    ResourceSpec(
        group=DRA_GROUP,
        version="v1",
        plural="resourceclaimtemplates",
        kind="ResourceClaimTemplate",
    ),
    ResourceSpec(
        group=DRA_GROUP,
        version="v1",
        plural="resourceslices",
        kind="ResourceSlice",
        namespaced=False,
        generation=True,
        # ResourceSlice field selectors (resource.k8s.io/v1 ResourceSliceSelectorNodeName,
        # ResourceSliceSelectorDriver).
        field_labels={
            "spec.nodeName": (("spec", "nodeName"), ""),
            "spec.driver": (("spec", "driver"), ""),
        },
    ),
)


#: The Kubernetes Workload API group (GenericWorkload feature gate).
SCHEDULING_GROUP: Final = "scheduling.k8s.io"
#: Versions of it a real server serves, by release: v1alpha2 in 1.36 (k8s-openapi 0.28
#: ``v1_36/api/scheduling``), v1beta1 in 1.37 (k8s-openapi 0.29 ``v1_37/api/scheduling``, beside
#: v1alpha3, not modelled). 1.35 and older serve neither (404, ``KubeSim(workload_api=None)``).
WORKLOAD_API_VERSIONS: Final = ("v1alpha2", "v1beta1")


def workload_api_resources(version: str) -> tuple[ResourceSpec, ...]:
    """The Workload API kinds at ``version``: PodGroup (namespaced, status subresource, the
    ``status.conditions`` merged by ``type``) and Workload (namespaced, no status: the
    k8s-openapi ``Workload`` has only metadata and spec). Built-in kinds, not CRDs: strategic
    merge is accepted.

    Raises:
        ValueError: not one of :data:`WORKLOAD_API_VERSIONS`.
    """
    if version not in WORKLOAD_API_VERSIONS:
        raise ValueError(f"Workload API version {version!r}: one of {WORKLOAD_API_VERSIONS}")
    return (
        ResourceSpec(
            group=SCHEDULING_GROUP,
            version=version,
            plural="podgroups",
            kind="PodGroup",
            status=True,
            generation=True,
            merge_keys={("status", "conditions"): "type"},
        ),
        ResourceSpec(
            group=SCHEDULING_GROUP,
            version=version,
            plural="workloads",
            kind="Workload",
            generation=True,
        ),
    )


#: Kubernetes 1.37's CompositePodGroup: alpha, served only at v1alpha3 and only with the
#: CompositePodGroup feature gate (kubernetes staging/src/k8s.io/api/scheduling/v1alpha3/
#: types.go); ``KubeSim(workload_api="v1beta1", composite_pod_groups=True)``.
COMPOSITE_VERSION: Final = "v1alpha3"


def composite_pod_group_resource() -> ResourceSpec:
    """CompositePodGroup (namespaced, status subresource with ``conditions`` merged by
    ``type``, as PodGroup)."""
    return ResourceSpec(
        group=SCHEDULING_GROUP,
        version=COMPOSITE_VERSION,
        plural="compositepodgroups",
        kind="CompositePodGroup",
        status=True,
        generation=True,
        merge_keys={("status", "conditions"): "type"},
    )


_DNS_LABEL_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_LABEL_RULE: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character"
)
_IMMUTABLE: Final = "field is immutable"


def _scheduling_policy_errors(
    policy: Any, path: str, count: str = "minCount"
) -> list[tuple[str, str, str]]:
    """A PodGroupSchedulingPolicy: required, exactly one of ``basic`` / ``gang``, and a gang's
    ``minCount`` a positive integer (k8s-openapi ``PodGroupSchedulingPolicy``: "Exactly one
    policy must be set"; ``GangSchedulingPolicy.minCount``: required, "It must be a positive
    integer"). Field paths as the API reference names them; the messages paraphrase
    apimachinery's (``Required value``, ``Invalid value``)."""
    if not isinstance(policy, dict):
        return [(path, "FieldValueRequired", "Required value")]
    chosen = [k for k in ("basic", "gang") if policy.get(k) is not None]
    if len(chosen) != 1:
        return [
            (
                path,
                "FieldValueInvalid" if chosen else "FieldValueRequired",
                "Invalid value: exactly one of `basic`, `gang` must be set"
                if chosen
                else "Required value: exactly one of `basic`, `gang` must be set",
            )
        ]
    if chosen == ["gang"]:
        gang = policy["gang"]
        value = gang.get(count) if isinstance(gang, dict) else None
        if value is None:
            return [(f"{path}.gang.{count}", "FieldValueRequired", "Required value")]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return [
                (
                    f"{path}.gang.{count}",
                    "FieldValueInvalid",
                    f"Invalid value: {orjson.dumps(value).decode()}: must be greater than or "
                    "equal to 1",
                )
            ]
    return []


def _name_errors(value: Any, path: str, *, label: bool) -> list[tuple[str, str, str]]:
    """A required DNS label (``label``) or subdomain at ``path``."""
    if not isinstance(value, str) or not value:
        return [(path, "FieldValueRequired", "Required value")]
    if label and (len(value) > 63 or not _DNS_LABEL_RE.match(value)):
        return [(path, "FieldValueInvalid", f'Invalid value: "{value}": {_DNS_LABEL_RULE}')]
    if not label and (len(value) > 253 or not _NAME_RE.match(value)):
        return [(path, "FieldValueInvalid", f'Invalid value: "{value}": {_NAME_RULE}')]
    return []


def _workload_ref(spec: ResourceSpec, obj: Obj) -> tuple[str, Any]:
    """The PodGroup's reference to its Workload template at ``spec.version``: v1alpha2
    ``spec.podGroupTemplateRef`` (``workload.{workloadName,podGroupTemplateName}``), v1beta1
    ``spec.workloadRef`` (``{workloadName,templateName}``) — k8s-openapi
    ``PodGroupTemplateReference`` / ``WorkloadReference``."""
    found = obj.get("spec")
    body: Obj = found if isinstance(found, dict) else {}
    if spec.version == "v1alpha2":
        return "spec.podGroupTemplateRef", body.get("podGroupTemplateRef")
    return "spec.workloadRef", body.get("workloadRef")


def _parent_errors(
    body: Obj, old_body: Obj | None, *, composite: bool, kind: str
) -> list[tuple[str, str, str]]:
    """``spec.parentCompositePodGroupName`` of a PodGroup or CompositePodGroup (v1alpha3
    types.go): a DNS subdomain, immutable; on a PodGroup forbidden while the
    CompositePodGroup gate is off (``+k8s:ifDisabled(CompositePodGroup)=+k8s:forbidden``) and
    requiring ``workloadRef`` (``+k8s:dependentRequired("workloadRef")``)."""
    causes: list[tuple[str, str, str]] = []
    path = "spec.parentCompositePodGroupName"
    parent = body.get("parentCompositePodGroupName")
    if parent is not None:
        if kind == "PodGroup" and not composite:
            causes.append((path, "FieldValueForbidden", "Forbidden: may not be specified"))
        else:
            causes += _name_errors(parent, path, label=False)
            if kind == "PodGroup" and body.get("workloadRef") is None:
                causes.append(("spec.workloadRef", "FieldValueRequired", "Required value"))
    if old_body is not None and parent != old_body.get("parentCompositePodGroupName"):
        causes.append((path, "FieldValueInvalid", _IMMUTABLE))
    return causes


def _composite_errors(body: Obj, old_body: Obj | None) -> list[tuple[str, str, str]]:
    """A CompositePodGroup's spec (v1alpha3 types.go CompositePodGroupSpec): ``workloadRef``
    required (``workloadName`` a DNS subdomain, ``templateName`` a DNS label), exactly one
    policy with a gang's ``minGroupCount`` ≥ 1; ``workloadRef`` and ``schedulingPolicy``
    immutable."""
    causes = _scheduling_policy_errors(
        body.get("schedulingPolicy"), "spec.schedulingPolicy", "minGroupCount"
    )
    ref = body.get("workloadRef")
    if not isinstance(ref, dict):
        causes.append(("spec.workloadRef", "FieldValueRequired", "Required value"))
    else:
        causes += _name_errors(
            ref.get("workloadName"), "spec.workloadRef.workloadName", label=False
        )
        causes += _name_errors(ref.get("templateName"), "spec.workloadRef.templateName", label=True)
    if old_body is not None:
        for field in ("workloadRef", "schedulingPolicy"):
            if _canon(body.get(field)) != _canon(old_body.get(field)):
                causes.append((f"spec.{field}", "FieldValueInvalid", _IMMUTABLE))
    return causes


def validate_workload_api(
    spec: ResourceSpec, obj: Obj, old: Obj | None, *, composite: bool = False
) -> None:
    """The validation a real server does on the Workload API fields slurmbridge uses, on
    create (``old`` None) and update of the main resource (k8s-openapi field docs):

    * PodGroup: ``spec.schedulingPolicy`` required, exactly one policy, gang ``minCount`` ≥ 1;
      the template reference's names required (v1alpha2: "Exactly one reference must be set",
      ``workload`` with ``workloadName`` and ``podGroupTemplateName``; v1beta1 ``workloadRef``
      with ``workloadName`` (a DNS subdomain) and ``templateName`` (a DNS label)). Immutable:
      v1alpha2 the policy and the reference ("This field is immutable"); v1beta1 the
      reference and the policy *kind* — ``minCount`` may change ("mutable to support workload
      scaling").
    * Workload: v1alpha2 ``spec.podGroupTemplates`` required; v1beta1 exactly one of
      ``podGroupTemplates`` / ``compositePodGroupTemplates``; at most 8 templates, each with a
      unique DNS-label ``name`` and a valid ``schedulingPolicy``. Immutable: v1alpha2 the
      whole spec; v1beta1 the set of template names ("Templates cannot be added or removed").
    * CompositePodGroup (``composite``: served, the gate on) and a PodGroup's
      ``parentCompositePodGroupName``: :func:`_composite_errors`, :func:`_parent_errors`.

    Raises:
        ApiError: 422 Invalid with every cause found.
    """
    name = str(_meta(obj).get("name", ""))
    body = obj.get("spec")
    causes: list[tuple[str, str, str]] = []
    if not isinstance(body, dict):
        raise _invalid(
            spec.kind, name, spec.group, [("spec", "FieldValueRequired", "Required value")]
        )
    old_found = (old or {}).get("spec")
    old_body: Obj | None = old_found if isinstance(old_found, dict) else None
    if spec.kind in ("PodGroup", "CompositePodGroup"):
        causes += _parent_errors(body, old_body, composite=composite, kind=spec.kind)
    if spec.kind == "CompositePodGroup":
        causes += _composite_errors(body, old_body)
    elif spec.kind == "PodGroup":
        causes += _scheduling_policy_errors(body.get("schedulingPolicy"), "spec.schedulingPolicy")
        path, ref = _workload_ref(spec, obj)
        if ref is not None:
            if spec.version == "v1alpha2":
                inner = ref.get("workload") if isinstance(ref, dict) else None
                if not isinstance(inner, dict):
                    causes.append((f"{path}.workload", "FieldValueRequired", "Required value"))
                else:
                    causes += _name_errors(
                        inner.get("workloadName"), f"{path}.workload.workloadName", label=False
                    )
                    causes += _name_errors(
                        inner.get("podGroupTemplateName"),
                        f"{path}.workload.podGroupTemplateName",
                        label=True,
                    )
            elif not isinstance(ref, dict):
                causes.append((path, "FieldValueInvalid", "Invalid value: must be an object"))
            else:
                causes += _name_errors(ref.get("workloadName"), f"{path}.workloadName", label=False)
                causes += _name_errors(ref.get("templateName"), f"{path}.templateName", label=True)
        if old_body is not None:
            old_ref = _workload_ref(spec, old or {})[1]
            if _canon(ref) != _canon(old_ref):
                causes.append((path, "FieldValueInvalid", _IMMUTABLE))
            policy, old_policy = body.get("schedulingPolicy"), old_body.get("schedulingPolicy")
            if spec.version == "v1alpha2":
                changed = _canon(policy) != _canon(old_policy)
            else:
                kinds = [
                    sorted(
                        k for k in ("basic", "gang") if isinstance(p, dict) and p.get(k) is not None
                    )
                    for p in (policy, old_policy)
                ]
                changed = kinds[0] != kinds[1]
            if changed:
                causes.append(("spec.schedulingPolicy", "FieldValueInvalid", _IMMUTABLE))
    else:
        templates = body.get("podGroupTemplates")
        composite_templates = body.get("compositePodGroupTemplates")
        if spec.version == "v1alpha2" or composite_templates is None:
            if not isinstance(templates, list) or (spec.version != "v1alpha2" and not templates):
                causes.append(("spec.podGroupTemplates", "FieldValueRequired", "Required value"))
                templates = []
        elif templates is not None:
            causes.append(
                (
                    "spec",
                    "FieldValueInvalid",
                    "Invalid value: exactly one of `podGroupTemplates`, "
                    "`compositePodGroupTemplates` must be set",
                )
            )
        templates = templates if isinstance(templates, list) else []
        if len(templates) > 8:
            causes.append(
                (
                    "spec.podGroupTemplates",
                    "FieldValueTooMany",
                    f"Too many: {len(templates)}: must have at most 8 items",
                )
            )
        seen: set[str] = set()
        for i, item in enumerate(templates):
            at = f"spec.podGroupTemplates[{i}]"
            t = item if isinstance(item, dict) else {}
            causes += _name_errors(t.get("name"), f"{at}.name", label=True)
            if t.get("name") in seen:
                causes.append(
                    (f"{at}.name", "FieldValueDuplicate", f'Duplicate value: "{t.get("name")}"')
                )
            seen.add(str(t.get("name")))
            causes += _scheduling_policy_errors(t.get("schedulingPolicy"), f"{at}.schedulingPolicy")
        if old_body is not None:
            if spec.version == "v1alpha2":
                if _canon(body) != _canon(old_body):
                    causes.append(("spec", "FieldValueInvalid", _IMMUTABLE))
            else:
                names = [str(t.get("name")) for t in templates if isinstance(t, dict)]
                old_names = [
                    str(t.get("name"))
                    for t in old_body.get("podGroupTemplates") or []
                    if isinstance(t, dict)
                ]
                if sorted(names) != sorted(old_names):
                    causes.append(
                        (
                            "spec.podGroupTemplates",
                            "FieldValueForbidden",
                            "Forbidden: templates cannot be added or removed",
                        )
                    )
    if causes:
        raise _invalid(spec.kind, name, spec.group, causes)


# --- small helpers ---------------------------------------------------------------------------


def _now(plus_s: float = 0.0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=plus_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _clone(value: Any) -> Any:
    """Deep copy of decoded JSON (orjson round trip: exact and much faster than deepcopy)."""
    return orjson.loads(orjson.dumps(value))


def _clone_obj(obj: Obj) -> Obj:
    out: Obj = _clone(obj)
    return out


def _canon(value: Any) -> bytes:
    """Canonical bytes for equality that tells ``true`` from ``1`` (Python's ``==`` does not)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def _dig(obj: Any, path: Iterable[str]) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _put_path(obj: Obj, path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        nxt = obj.get(key)
        if not isinstance(nxt, dict):
            nxt = {}
            obj[key] = nxt
        obj = nxt
    obj[path[-1]] = value


def _parse_bool(value: str | None) -> bool:
    """Go's strconv.ParseBool truthy spellings (``watch=true|True|1`` …)."""
    return value in ("1", "t", "T", "true", "True", "TRUE")


def _labels(obj: Obj) -> Mapping[str, str]:
    labels = _meta(obj).get("labels")
    return labels if isinstance(labels, dict) else {}


def _finalizers(obj: Obj) -> list[Any]:
    fins = _meta(obj).get("finalizers")
    return fins if isinstance(fins, list) else []


def _line(event_type: str, obj: Obj) -> bytes:
    return orjson.dumps({"type": event_type, "object": obj}) + b"\n"


# --- selectors -------------------------------------------------------------------------------

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_RE_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*$")
_RE_EQ = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*({_VALUE})\s*$")
_RE_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")
_RE_FIELD = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$")


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    op: str  # exists | !exists | = | != | in | notin
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # != and notin


LabelSelector: TypeAlias = tuple[_Requirement, ...]
FieldSelector: TypeAlias = tuple[tuple[str, bool, str], ...]


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def parse_label_selector(text: str) -> LabelSelector:
    """Parse a labelSelector string (``=``, ``==``, ``!=``, ``in``, ``notin``, ``k``, ``!k``).

    Raises :class:`ApiError` 400 on a malformed selector, as the API server does.
    """
    if not text.strip():
        return ()
    reqs: list[_Requirement] = []
    for part in _split_top_level(text):
        if m := _RE_SET.match(part):
            values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
            reqs.append(_Requirement(m.group(1), m.group(2), values))
        elif m := _RE_EQ.match(part):
            op = "!=" if m.group(2) == "!=" else "="
            reqs.append(_Requirement(m.group(1), op, frozenset((m.group(3),))))
        elif m := _RE_EXISTS.match(part):
            reqs.append(_Requirement(m.group(2), "!exists" if m.group(1) else "exists"))
        else:
            raise _bad_request(f"unable to parse requirement: {part.strip()!r}")
    return tuple(reqs)


def selector_from_object(selector: Any) -> LabelSelector | None:
    """A ``metav1.LabelSelector`` object as requirements; None for a nil or empty selector.

    (PDBs: "a PDB with a nil or empty selector … should match nothing, not everything".)
    """
    if not isinstance(selector, dict):
        return None
    reqs = [
        _Requirement(str(k), "=", frozenset((str(v),)))
        for k, v in (selector.get("matchLabels") or {}).items()
    ]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expr in selector.get("matchExpressions") or ():
        op = ops.get(expr.get("operator", ""))
        if op is None:
            return None
        reqs.append(_Requirement(expr.get("key", ""), op, frozenset(expr.get("values") or ())))
    return tuple(reqs) or None


def _labels_match(selector: LabelSelector, obj: Obj) -> bool:
    if not selector:
        return True
    labels = _labels(obj)
    return all(r.matches(labels) for r in selector)


def parse_field_selector(spec: ResourceSpec, text: str) -> FieldSelector:
    """Parse a fieldSelector (``=``, ``==``, ``!=``) against the fields ``spec`` supports.

    Raises :class:`ApiError` 400 ``field label not supported`` for other fields.
    """
    if not text.strip():
        return ()
    out: list[tuple[str, bool, str]] = []
    for part in text.split(","):
        m = _RE_FIELD.match(part)
        if m is None:
            raise _bad_request(f"invalid selector: {text!r}")
        label = m.group(1)
        if label not in ("metadata.name", "metadata.namespace") and label not in spec.field_labels:
            raise _bad_request(f"field label not supported: {label}")
        out.append((label, m.group(2) != "!=", m.group(3)))
    return tuple(out)


def _field_value(spec: ResourceSpec, obj: Obj, label: str) -> str:
    if label == "metadata.name":
        return str(_meta(obj).get("name", ""))
    if label == "metadata.namespace":
        return str(_meta(obj).get("namespace", ""))
    path, default = spec.field_labels[label]
    value = _dig(obj, path)
    if value is None:
        return default
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _node_name(pod: Obj | None) -> str | None:
    """A pod's ``spec.nodeName`` (``""``: unbound; None: no pod)."""
    return None if pod is None else str((pod.get("spec") or {}).get("nodeName") or "")


def _fields_match(spec: ResourceSpec, selector: FieldSelector, obj: Obj) -> bool:
    return all(
        (_field_value(spec, obj, label) == value) == equal for label, equal, value in selector
    )


# --- patches ---------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new value and never mutates ``target``."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch on a copy of ``doc`` (the ``jsonpatch`` library).

    A body that is not a list of objects is 400 (the server fails to decode it); an operation
    that does not apply — a failed ``test`` included — is 422, like the API server.
    """
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise _bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    try:
        return jsonpatch.JsonPatch(ops).apply(_clone(doc))
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        log.debug("json patch does not apply: %s", exc)
        raise _patch_failed() from exc


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [
            _strip_directives(v)
            for v in value
            if not (isinstance(v, dict) and v.get("$patch") in ("delete", "replace"))
        ]
    return value


def _smp_map(
    orig: Any, patch: Obj, path: tuple[str, ...], schema: Mapping[tuple[str, ...], str]
) -> Obj | None:
    """Strategic merge of a map; None means "delete this map" (``$patch: delete``)."""
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return dict(_strip_directives(patch))
    result: Obj = dict(orig) if isinstance(orig, dict) else {}
    prefix = "$deleteFromPrimitiveList/"
    for key, value in patch.items():
        if key.startswith(prefix) and isinstance(value, list):
            current = result.get(key[len(prefix) :])
            if isinstance(current, list):
                result[key[len(prefix) :]] = [x for x in current if x not in value]
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        sub = (*path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _smp_list(result.get(key), value, sub, schema)
        elif isinstance(value, dict):
            if schema.get(sub) == REPLACE:
                result[key] = _strip_directives(value)
                continue
            merged = _smp_map(result.get(key), value, sub, schema)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    return result


def _smp_list(
    orig: Any, patch: list[Any], path: tuple[str, ...], schema: Mapping[tuple[str, ...], str]
) -> list[Any]:
    strategy = schema.get(path)
    if strategy is None or strategy == REPLACE:
        return [_strip_directives(v) for v in patch]  # atomic list: replaced
    current = list(orig) if isinstance(orig, list) else []
    if strategy == MERGE_SET:
        for item in patch:
            if item not in current:
                current.append(item)
        return current
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [_strip_directives(v) for v in patch if not (isinstance(v, dict) and "$patch" in v)]
    for item in patch:
        if not isinstance(item, dict) or strategy not in item:
            where = ".".join(path)
            raise _bad_request(f"{where}: does not contain declared merge key: {strategy}")
        key_value = item[strategy]
        at = next(
            (
                i
                for i, o in enumerate(current)
                if isinstance(o, dict) and o.get(strategy) == key_value
            ),
            None,
        )
        if item.get("$patch") == "delete":
            current = [
                o for o in current if not (isinstance(o, dict) and o.get(strategy) == key_value)
            ]
        elif at is None:
            current.append(_strip_directives(item))
        else:
            merged = _smp_map(current[at], item, path, schema)
            if merged is None:
                del current[at]
            else:
                current[at] = merged
    return current


def strategic_merge_patch(doc: Obj, patch: Any, schema: Mapping[tuple[str, ...], str]) -> Obj:
    """Strategic merge patch of ``doc`` with the given patch strategies (see ResourceSpec)."""
    if not isinstance(patch, dict):
        raise _bad_request("strategic merge patch: the patch is not a JSON object")
    return _smp_map(doc, patch, (), schema) or {}


# --- store -----------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class Change:
    """One committed write, as watches and ``on_write`` callbacks see it.

    ``type`` is ADDED | MODIFIED | DELETED; ``object`` the stored state after the write (for
    DELETED the last state, stamped with the deletion's resourceVersion), ``old`` the state
    before; ``verb`` the API verb that caused it (``create``, ``patch``, ``update``, ``delete``
    …). Callbacks must not mutate the objects.
    """

    type: str
    resource: ResourceSpec
    object: Obj
    old: Obj | None
    resource_version: int
    verb: str
    _lines: dict[str, bytes] = field(default_factory=dict, repr=False)

    def line(self, event_type: str) -> bytes:
        """The watch line for this change as ``event_type`` (encoded once, then cached)."""
        out = self._lines.get(event_type)
        if out is None:
            out = self._lines[event_type] = _line(event_type, self.object)
        return out


class _Watcher:
    __slots__ = ("abort", "fields", "labels", "namespace", "queue", "spec", "start_rv")

    def __init__(
        self,
        spec: ResourceSpec,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> None:
        self.spec = spec
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.abort = False
        #: The resourceVersion the watch started from, after its initial events: a bookmark
        #: is sent only with a newer one (cache_watcher.go ``process``).
        self.start_rv = 0

    def matches(self, obj: Obj) -> bool:
        if self.namespace is not None and _meta(obj).get("namespace") != self.namespace:
            return False
        return _labels_match(self.labels, obj) and _fields_match(self.spec, self.fields, obj)

    def translate(self, change: Change) -> bytes | None:
        """The line this watcher sees for ``change`` (selector transitions), or None."""
        if not self.labels and not self.fields:
            if self.namespace is None or _meta(change.object).get("namespace") == self.namespace:
                return change.line(change.type)
            return None
        now = self.matches(change.object)
        if change.type == "ADDED":
            return change.line("ADDED") if now else None
        if change.type == "DELETED":
            return change.line("DELETED") if now else None
        before = change.old is not None and self.matches(change.old)
        if before and now:
            return change.line("MODIFIED")
        if now:
            return change.line("ADDED")
        if before:
            return change.line("DELETED")
        return None

    def close(self, *, abort: bool = False) -> None:
        self.abort = abort
        self.queue.put_nowait(None)


@dataclass(slots=True)
class _Delay:
    remaining: int
    seconds: float
    verb: str | None
    resource: str | None


@dataclass(slots=True)
class _Fault:
    remaining: int
    status: int
    verb: str | None
    resource: str | None
    message: str


_GENERATE_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
_NAME_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_NAME_RULE: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character"
)

_POD_MUTABLE_SPEC: Final = frozenset(
    {"activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates"}
)
_POD_FORBIDDEN: Final = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
    "to 1 if it was previously negative)"
)
_DEFAULT_TOLERATIONS: Final = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


#: What TaintNodesByCondition admission adds to every new Node (``v1.TaintNodeNotReady``).
NOT_READY_TAINT: Final = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def _is_not_ready_taint(taint: Any) -> bool:
    """``Taint.MatchTaint`` against :data:`NOT_READY_TAINT`: same key and effect."""
    return (
        isinstance(taint, dict)
        and taint.get("key") == NOT_READY_TAINT["key"]
        and taint.get("effect") == NOT_READY_TAINT["effect"]
    )


def _node_ready(node: Obj) -> bool:
    """Whether the Node's ``Ready`` condition is ``True``."""
    return any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in _dig(node, ("status", "conditions")) or ()
    )


def _pod_spec_view(spec: Any) -> Any:
    if not isinstance(spec, dict):
        return spec
    view = {k: v for k, v in spec.items() if k not in _POD_MUTABLE_SPEC}
    for name in ("containers", "initContainers"):
        items = view.get(name)
        if isinstance(items, list):
            view[name] = [
                {k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c
                for c in items
            ]
    return view


_QUANTITY: Final = re.compile(
    r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$"
)
_SUFFIXES: Final = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    **{f"{p}i": Fraction(1024 ** (i + 1)) for i, p in enumerate("KMGTPE")},
}


def ready_condition(
    now: str,
    status: str = "True",
    reason: str = "KubeletReady",
    message: str = "kubelet is posting ready status",
) -> Obj:
    """A node's ``Ready`` condition as of ``now`` (RFC 3339), heartbeat and transition both;
    the defaults are a kubelet posting ready status (pkg/kubelet/nodestatus/setters.go
    ``ReadyCondition``)."""
    return {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def quantity(value: Any) -> Fraction | None:
    """A ``resource.Quantity`` (``"500m"``, ``"1Gi"``, ``"1e3"``, ``2``) as an exact number;
    None when it does not parse (the simulator does not validate quantities)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Fraction(value)
    if not isinstance(value, str):
        return None
    m = _QUANTITY.match(value.strip())
    if m is None:
        return None
    number, suffix = m.group(1), m.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return Fraction(number) * Fraction(10) ** int(suffix[1:])
    return Fraction(number) * _SUFFIXES[suffix]


def _quantity_string(value: Any) -> Any:
    """A JSON number given as a ``resource.Quantity`` as the API server stores it: a string
    (apimachinery pkg/api/resource quantity.go: ``UnmarshalJSON`` parses a bare number,
    ``MarshalJSON`` always writes a string) — ``1`` → ``"1"``, ``0.5`` → ``"500m"``. Anything
    else is returned as it is (the simulator does not canonicalise strings)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    exact = Fraction(value)
    if exact.denominator == 1:
        return str(exact.numerator)
    millis = exact * 1000
    return f"{millis.numerator}m" if millis.denominator == 1 else str(value)


def _quantities_as_strings(pod_spec: Obj) -> None:
    """The resource quantities of a new pod (containers' and init containers' requests and
    limits, pod-level ``resources``, ``overhead``) written as JSON numbers become the strings
    a real API server stores (:func:`_quantity_string`): a client reading the pod back never
    sees a number there."""
    lists: list[Any] = []
    for name in ("containers", "initContainers"):
        for container in pod_spec.get(name) or ():
            resources = container.get("resources") if isinstance(container, dict) else None
            if isinstance(resources, dict):
                lists += [resources.get("requests"), resources.get("limits")]
    pod_resources = pod_spec.get("resources")
    if isinstance(pod_resources, dict):
        lists += [pod_resources.get("requests"), pod_resources.get("limits")]
    lists.append(pod_spec.get("overhead"))
    for quantities in lists:
        if isinstance(quantities, dict):
            for key, value in quantities.items():
                quantities[key] = _quantity_string(value)


def _default_requests(pod_spec: Obj) -> None:
    """core/v1 ``SetDefaults_Pod``: a container (or init container) with limits but no request
    for a resource gets the limit as its request — stored in the pod, as on a real server."""
    for name in ("containers", "initContainers"):
        for container in pod_spec.get(name) or ():
            resources = container.get("resources") if isinstance(container, dict) else None
            limits = resources.get("limits") if isinstance(resources, dict) else None
            if not isinstance(limits, dict) or not isinstance(resources, dict):
                continue
            requests = resources.get("requests")
            if not isinstance(requests, dict):
                requests = resources["requests"] = {}
            for key, value in limits.items():
                requests.setdefault(key, value)


def pod_qos_class(pod_spec: Obj) -> str:
    """``status.qosClass`` as ``ComputePodQOS`` (pkg/apis/core/helper/qos, 1.32) computes it
    for a defaulted pod spec: only cpu and memory count, and only quantities above zero;
    requests and limits are summed over containers and init containers. BestEffort when
    there are none; Guaranteed when every container has cpu and memory limits and the summed
    requests equal the summed limits, resource by resource; Burstable otherwise. (Pod-level
    ``spec.resources`` is behind the PodLevelResources gate, off in 1.32: not modelled.)"""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for name in ("containers", "initContainers"):
        for container in pod_spec.get(name) or ():
            resources = (container.get("resources") if isinstance(container, dict) else None) or {}
            limited: set[str] = set()
            for kind, into in (("requests", requests), ("limits", limits)):
                listed = resources.get(kind) if isinstance(resources, dict) else None
                for resource, raw in (listed or {}).items():
                    amount = quantity(raw)
                    if resource not in ("cpu", "memory") or amount is None or amount <= 0:
                        continue
                    into[resource] = into.get(resource, Fraction(0)) + amount
                    if kind == "limits":
                        limited.add(resource)
            if limited != {"cpu", "memory"}:
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


def _pod_ready(pod: Obj) -> bool:
    for cond in _dig(pod, ("status", "conditions")) or ():
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _scaled(value: Any, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


_RESOURCE_CLAIMS: Final = f"resourceclaims.{DRA_GROUP}"
_CLAIM_TEMPLATES: Final = f"resourceclaimtemplates.{DRA_GROUP}"
_RESOURCE_SLICES: Final = f"resourceslices.{DRA_GROUP}"
_DEVICE_CLASSES: Final = f"deviceclasses.{DRA_GROUP}"

Cause = tuple[str, str, str]


def _required(path: str, detail: str = "") -> Cause:
    return (path, "FieldValueRequired", f"Required value{': ' + detail if detail else ''}")


def _invalid_value(path: str, value: Any, detail: str) -> Cause:
    return (path, "FieldValueInvalid", f"Invalid value: {orjson.dumps(value).decode()}: {detail}")


def _dns_label(path: str, value: Any) -> list[Cause]:
    if not value:
        return [_required(path)]
    if not isinstance(value, str) or len(value) > 63 or not _DNS_LABEL_RE.match(value):
        return [
            _invalid_value(
                path,
                value,
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                "or '-', and must start and end with an alphanumeric character",
            )
        ]
    return []


def _dns_subdomain(path: str, value: Any) -> list[Cause]:
    if not value:
        return [_required(path)]
    if not isinstance(value, str) or len(value) > 253 or not _NAME_RE.match(value):
        return [_invalid_value(path, value, _NAME_RULE)]
    return []


def _device_claim_causes(claim: Any, path: str) -> list[Cause]:
    """``validateDeviceClaim`` for the parts a claim from slurmbridge or a test uses: request
    names (unique DNS labels), exactly one of ``exactly`` / ``firstAvailable``,
    ``exactly.deviceClassName`` (a DNS subdomain), ``allocationMode`` ExactCount (``count``
    > 0) or All (no count)."""
    causes: list[Cause] = []
    requests = (claim or {}).get("requests") if isinstance(claim, dict) else None
    seen: set[str] = set()
    for i, r in enumerate(requests or []):
        rp = f"{path}.requests[{i}]"
        if not isinstance(r, dict):
            causes.append(_invalid_value(rp, r, "must be an object"))
            continue
        name = r.get("name")
        causes += _dns_label(f"{rp}.name", name)
        if isinstance(name, str) and name in seen:
            causes.append((f"{rp}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        seen.add(str(name))
        exactly, first = r.get("exactly"), r.get("firstAvailable")
        if bool(exactly) == bool(first):
            causes.append(
                _required(rp, "exactly one of `exactly` or `firstAvailable` is required")
                if not exactly
                else _invalid_value(
                    rp,
                    None,
                    "exactly one of `exactly` or `firstAvailable` is required, but multiple "
                    "fields are set",
                )
            )
            continue
        if not exactly:
            continue
        ep = f"{rp}.exactly"
        causes += _dns_subdomain(f"{ep}.deviceClassName", exactly.get("deviceClassName"))
        mode = exactly.get("allocationMode")
        count = exactly.get("count", 0)
        if mode == "ExactCount" and (not isinstance(count, int) or count <= 0):
            causes.append(_invalid_value(f"{ep}.count", count, "must be greater than zero"))
        elif mode == "All" and count:
            causes.append(
                _invalid_value(
                    f"{ep}.count", count, "must not be specified when allocationMode is 'All'"
                )
            )
        elif mode not in ("ExactCount", "All"):
            causes.append(
                (
                    f"{ep}.allocationMode",
                    "FieldValueNotSupported",
                    f'Unsupported value: "{mode}": supported values: "All", "ExactCount"',
                )
            )
    return causes


def _default_device_claim(claim: Any) -> None:
    """resource.k8s.io/v1 defaulting (``SetDefaults_ExactDeviceRequest``): ``allocationMode``
    ExactCount, and ``count`` 1 with it."""
    for r in (claim or {}).get("requests") or [] if isinstance(claim, dict) else []:
        exactly = r.get("exactly") if isinstance(r, dict) else None
        if isinstance(exactly, dict):
            exactly.setdefault("allocationMode", "ExactCount")
            if exactly["allocationMode"] == "ExactCount":
                exactly.setdefault("count", 1)


def _device_class_causes(spec: Any) -> list[Cause]:
    """``validateDeviceClassSpec`` (pkg/apis/resource/validation/validation.go): at most 32
    selectors (``DeviceSelectorsMaxSize``), each with ``cel`` (``validateSelector``), whose
    ``expression`` is at most 10 KiB (``CELSelectorExpressionMaxLength``) and compiles — an
    empty one does not; CEL compilation itself is not modelled — and at most 32 ``config``
    entries (``DeviceConfigMaxSize``)."""
    spec = spec if isinstance(spec, dict) else {}
    causes: list[Cause] = []
    selectors = spec.get("selectors") or []
    if len(selectors) > 32:
        causes.append(
            (
                "spec.selectors",
                "FieldValueTooMany",
                f"Too many: {len(selectors)}: must have at most 32 items",
            )
        )
    for i, sel in enumerate(selectors[:32]):
        cel = sel.get("cel") if isinstance(sel, dict) else None
        if not isinstance(cel, dict):
            causes.append(_required(f"spec.selectors[{i}].cel"))
            continue
        expr = cel.get("expression")
        path = f"spec.selectors[{i}].cel.expression"
        if not isinstance(expr, str) or not expr.strip():
            causes.append(_invalid_value(path, expr or "", "compilation failed: empty expression"))
        elif len(expr) > 10 * 1024:
            causes.append(
                (path, "FieldValueTooLong", f"Too long: may not be more than {10 * 1024} bytes")
            )
    config = spec.get("config") or []
    if len(config) > 32:
        causes.append(
            (
                "spec.config",
                "FieldValueTooMany",
                f"Too many: {len(config)}: must have at most 32 items",
            )
        )
    return causes


def _slice_causes(spec: Any) -> list[Cause]:
    """``validateResourceSliceSpec``: a driver (DNS subdomain), a pool with a name and a
    ``resourceSliceCount`` > 0 and ``generation`` ≥ 0, exactly one of ``nodeName`` /
    ``nodeSelector`` / ``allNodes`` / ``perDeviceNodeSelection``, devices with unique DNS
    label names, each attribute exactly one of ``int`` / ``bool`` / ``string`` / ``version``."""
    spec = spec if isinstance(spec, dict) else {}
    causes = _dns_subdomain("spec.driver", spec.get("driver"))
    pool = spec.get("pool") if isinstance(spec.get("pool"), dict) else {}
    if not pool.get("name"):
        causes.append(_required("spec.pool.name"))
    count = pool.get("resourceSliceCount", 0)
    if not isinstance(count, int) or count <= 0:
        causes.append(
            _invalid_value("spec.pool.resourceSliceCount", count, "must be greater than zero")
        )
    generation = pool.get("generation", 0)
    if not isinstance(generation, int) or generation < 0:
        causes.append(
            _invalid_value("spec.pool.generation", generation, "must be greater than or equal to 0")
        )
    chosen = [
        f"`{k}`"
        for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
        if spec.get(k) not in (None, "", False)
    ]
    if not chosen:
        causes.append(
            _required(
                "spec",
                "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` "
                "is required",
            )
        )
    elif len(chosen) > 1:
        causes.append(
            _invalid_value(
                "spec",
                "{" + ", ".join(chosen) + "}",
                "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                "`perDeviceNodeSelection` is required, but multiple fields are set",
            )
        )
    seen: set[str] = set()
    for i, d in enumerate(spec.get("devices") or []):
        dp = f"spec.devices[{i}]"
        name = d.get("name") if isinstance(d, dict) else None
        causes += _dns_label(f"{dp}.name", name)
        if isinstance(name, str) and name in seen:
            causes.append((f"{dp}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        seen.add(str(name))
        for key, attr in ((d or {}).get("attributes") or {}).items():
            set_ = [
                k for k in ("int", "bool", "string", "version") if (attr or {}).get(k) is not None
            ]
            if len(set_) != 1:
                causes.append(
                    _invalid_value(
                        f"{dp}.attributes[{key}]", attr, "exactly one value must be specified"
                    )
                )
    return causes


def _claim_status_causes(claim: Obj, old: Obj) -> list[Cause]:
    """``validateResourceClaimStatusUpdate``: ``reservedFor`` needs an allocation, its
    entries a ``resource``, ``name`` and ``uid``, no new entries while the claim is being
    deleted; a set ``allocation`` cannot change (it may be removed); a new allocation's
    results name requests of the claim and give ``driver``, ``pool`` and ``device``."""
    raw, old_raw = claim.get("status"), old.get("status")
    status: Obj = raw if isinstance(raw, dict) else {}
    old_status: Obj = old_raw if isinstance(old_raw, dict) else {}
    causes: list[Cause] = []
    reserved = status.get("reservedFor") or []
    causes.extend(
        _required(f"status.reservedFor[{i}].{key}")
        for i, ref in enumerate(reserved)
        for key in ("resource", "name", "uid")
        if not (ref or {}).get(key)
    )
    allocation = status.get("allocation")
    if reserved and allocation is None:
        causes.append(
            (
                "status.reservedFor",
                "FieldValueForbidden",
                "Forbidden: may not be specified when `allocated` is not set",
            )
        )
    if _meta(claim).get("deletionTimestamp"):
        before = {_canon(r) for r in old_status.get("reservedFor") or []}
        if any(_canon(r) not in before for r in reserved):
            causes.append(
                (
                    "status.reservedFor",
                    "FieldValueForbidden",
                    "Forbidden: new entries may not be added while `deallocationRequested` or "
                    "`deletionTimestamp` are set",
                )
            )
    old_allocation = old_status.get("allocation")
    if old_allocation is not None and allocation is not None:
        if _canon(old_allocation) != _canon(allocation):
            causes.append(_invalid_value("status.allocation", allocation, _IMMUTABLE))
    elif allocation is not None:
        names = {
            r.get("name")
            for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        }
        results = ((allocation.get("devices") or {}).get("results")) or []
        for i, r in enumerate(results):
            rp = f"status.allocation.devices.results[{i}]"
            if r.get("request") not in names:
                causes.append(
                    _invalid_value(
                        f"{rp}.request",
                        r.get("request"),
                        "must be the name of a request in the claim",
                    )
                )
            causes += _dns_subdomain(f"{rp}.driver", r.get("driver"))
            if not r.get("pool"):
                causes.append(_required(f"{rp}.pool"))
            causes += _dns_label(f"{rp}.device", r.get("device"))
    return causes


class _Store:
    """Objects, the resourceVersion counter, history and watchers; all API semantics live here."""

    def __init__(self, *, history_size: int, initial_rv: int) -> None:
        self.specs: dict[str, ResourceSpec] = {}
        self.by_gvr: dict[tuple[str, str, str], ResourceSpec] = {}
        self.by_gvk: dict[tuple[str, str], ResourceSpec] = {}
        self.objects: dict[str, dict[tuple[str, str], Obj]] = {}
        #: Per resource, its storage keys sorted (``namespace/name``) beside the object keys,
        #: built at the first list and then kept by one insertion or removal per create or
        #: delete: a paged list of N objects costs a bisection per page rather than a sort of
        #: all N per page (O(N²) over a whole list), and a create no sort of every key.
        self._index: dict[str, tuple[builtins.list[str], builtins.list[tuple[str, str]]]] = {}
        #: Pods by ``spec.nodeName`` (``""``: unbound), as kube-apiserver's watch cache
        #: indexes them (pkg/registry/core/pod/strategy.go ``NodeNameIndexFunc``, registered
        #: by the pod storage's ``Indexers``): a kubelet's list of its node's pods reads
        #: those, not every pod of the cluster.
        self._pods_by_node: dict[str, set[tuple[str, str]]] = {}
        self.rv = initial_rv
        self.floor = initial_rv
        self.history: deque[Change] = deque()
        self.history_size = history_size
        self.watchers: dict[str, set[_Watcher]] = {}
        #: Per resource, the resourceVersion of its last change (what a real watch cache's
        #: bookmarks carry: cacher.go ``lastProcessedResourceVersion``).
        self.resource_rv: dict[str, int] = {}
        self.on_write: list[Callable[[Change], None]] = []
        self.node_lifecycle = False
        #: Bound pods stay Terminating until their kubelet deletes them (see sim.kubelet).
        self.graceful_pods = False
        #: The write being served's ``fieldValidation`` query parameter (``Strict`` refuses a
        #: custom resource's unknown fields; set per request by the HTTP handler).
        self.field_validation = ""

    # registry ---------------------------------------------------------------------------------
    def register(self, spec: ResourceSpec) -> None:
        self.specs[spec.name] = spec
        for version in spec.served_versions:
            self.by_gvr[(spec.group, version, spec.plural)] = spec
            self.by_gvk[(f"{spec.group}/{version}", spec.kind)] = spec
        self.by_gvr[(spec.group, spec.version, spec.plural)] = spec
        self.by_gvk[(spec.api_version, spec.kind)] = spec
        self.objects.setdefault(spec.name, {})

    def lookup(self, resource: str) -> ResourceSpec:
        spec = self.specs.get(resource)
        if spec is not None:
            return spec
        found = [s for s in self.specs.values() if resource in (s.plural, s.kind, *s.short_names)]
        if len(found) != 1:
            raise _path_not_found()
        return found[0]

    def spec_for(self, obj: Obj) -> ResourceSpec:
        spec = self.by_gvk.get((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))
        if spec is None:
            raise _bad_request(f"no resource for {obj.get('apiVersion')}/{obj.get('kind')}")
        return spec

    # reads ------------------------------------------------------------------------------------
    def get(self, spec: ResourceSpec, namespace: str | None, name: str) -> Obj:
        obj = self.objects[spec.name].get((namespace or "", name))
        if obj is None:
            raise _not_found(spec, name)
        return obj

    def key_index(
        self, spec: ResourceSpec
    ) -> tuple[builtins.list[str], builtins.list[tuple[str, str]]]:
        """The storage keys of ``spec``'s objects in the order etcd ranges over them — by the
        key string (``namespace/name``, or ``name`` for cluster-scoped kinds), which continue
        tokens compare against — and, at the same positions, the ``(namespace, name)`` keys of
        :attr:`objects`. (Ordered by ``(namespace, name)`` instead, namespace ``a-b`` would
        come after ``a`` although ``"a-b/…" < "a/…"``, and a token at ``a/…`` would skip it.)"""
        index = self._index.get(spec.name)
        if index is None:
            pairs = sorted((self._storage_key(spec, ref), ref) for ref in self.objects[spec.name])
            index = ([key for key, _ in pairs], [ref for _, ref in pairs])
            self._index[spec.name] = index
        return index

    def _node_index(
        self, spec: ResourceSpec, fields: FieldSelector
    ) -> tuple[builtins.list[str], builtins.list[tuple[str, str]]] | None:
        """The storage keys and object keys of the pods a ``spec.nodeName=X`` selector can
        match, sorted as :meth:`key_index` (None: the selector has no such term)."""
        if spec.name != "pods":
            return None
        for label, equal, value in fields:
            if label == "spec.nodeName" and equal:
                pairs = sorted(
                    (self._storage_key(spec, ref), ref) for ref in self._pods_by_node.get(value, ())
                )
                return [key for key, _ in pairs], [ref for _, ref in pairs]
        return None

    def _index_pod(self, new: Obj | None, old: Obj | None, key: tuple[str, str]) -> None:
        """Move pod ``key`` from ``old``'s node to ``new``'s (None: absent) in the index."""
        was, now = _node_name(old), _node_name(new)
        if was == now:
            return
        if was is not None:
            bucket = self._pods_by_node.get(was)
            if bucket is not None:
                bucket.discard(key)
                if not bucket:
                    del self._pods_by_node[was]
        if now is not None:
            self._pods_by_node.setdefault(now, set()).add(key)

    def _key_range(
        self,
        spec: ResourceSpec,
        namespace: str | None,
        start: str,
        keys: builtins.list[str] | None = None,
    ) -> tuple[int, int]:
        """Positions ``[lo, hi)`` in ``keys`` (:meth:`key_index`'s by default) of the keys at
        or after ``start`` that lie in ``namespace`` (every key when it is ``None`` or the kind
        is cluster-scoped): one namespace's keys are contiguous, between ``ns + "/"`` and
        ``ns + "0"``."""
        if keys is None:
            keys = self.key_index(spec)[0]
        if namespace is None or not spec.namespaced:
            return bisect.bisect_left(keys, start), len(keys)
        lo = bisect.bisect_left(keys, max(start, namespace + "/"))
        return lo, bisect.bisect_left(keys, namespace + "0", lo)

    def keyed(self, spec: ResourceSpec, namespace: str | None) -> builtins.list[tuple[str, Obj]]:
        """``(storage key, object)`` for ``spec`` in ``namespace`` (all when ``None``), in
        storage key order (see :meth:`key_index`)."""
        keys, refs = self.key_index(spec)
        lo, hi = self._key_range(spec, namespace, "")
        objects = self.objects[spec.name]
        return [(keys[i], objects[refs[i]]) for i in range(lo, hi)]

    def iter_objects(self, spec: ResourceSpec, namespace: str | None) -> Iterator[Obj]:
        for _, obj in self.keyed(spec, namespace):
            yield obj

    def list(
        self,
        spec: ResourceSpec,
        namespace: str | None,
        *,
        labels: LabelSelector = (),
        fields: FieldSelector = (),
        limit: int = 0,
        continue_token: str = "",
    ) -> Obj:
        list_rv = self.rv
        start = ""
        if continue_token:
            token_rv, start = _decode_continue(continue_token)
            if token_rv != -1 and token_rv < self.floor:
                raise _expired(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter, or use the "
                    "continue token in this response to retrieve the remainder of the results. "
                    "Continuing with the provided token results in an inconsistent list - objects "
                    "that were created, modified, or deleted between the time the first chunk was "
                    "returned and now may show up in the list.",
                    continue_token=_encode_continue(-1, start),
                )
            if token_rv != -1:
                list_rv = token_rv
        keys, refs = self._node_index(spec, fields) or self.key_index(spec)
        lo, hi = self._key_range(spec, namespace, start, keys)
        objects = self.objects[spec.name]
        selective = bool(labels or fields)
        want = limit + 1 if limit > 0 else hi - lo
        page: builtins.list[tuple[str, Obj]] = []
        position = lo
        # Only as far as one item past the page: whether there is a next page is all the
        # rest decides (remainingItemCount is only given without selectors, from positions).
        while position < hi and len(page) < want:
            obj = objects[refs[position]]
            if not selective or (_labels_match(labels, obj) and _fields_match(spec, fields, obj)):
                page.append((keys[position], obj))
            position += 1
        meta: Obj = {"resourceVersion": str(list_rv)}
        if limit > 0 and len(page) > limit:
            page = page[:limit]
            meta["continue"] = _encode_continue(list_rv, page[-1][0] + "\x00")
            if not selective:
                meta["remainingItemCount"] = hi - lo - limit
        items = [obj for _, obj in page] if spec.custom else [_without_type(obj) for _, obj in page]
        return {
            "kind": spec.list_kind,
            "apiVersion": spec.api_version,
            "metadata": meta,
            "items": items,
        }

    # writes -----------------------------------------------------------------------------------
    def _commit(
        self, spec: ResourceSpec, new: Obj, old: Obj | None, event_type: str, verb: str
    ) -> Obj:
        self.rv += 1
        meta = _meta(new)
        meta["resourceVersion"] = str(self.rv)
        key = (str(meta.get("namespace", "")), str(meta["name"]))
        bucket = self.objects[spec.name]
        if event_type == "DELETED":
            stored = bucket.pop(key, None)
            if stored is not None:
                self._place_key(spec, key, present=False)
                if spec.name == "pods":
                    self._index_pod(None, stored, key)
        else:
            stored = bucket.get(key)
            if stored is None:
                self._place_key(spec, key, present=True)
            bucket[key] = new
            if spec.name == "pods":
                self._index_pod(new, stored, key)
        self._record(Change(event_type, spec, new, old, self.rv, verb))
        if spec.name == "nodes" and event_type != "DELETED":
            self._node_ready_taint(spec, key)
            if self.node_lifecycle:
                stored = bucket.get(key)
                if stored is not None:
                    self._node_lifecycle(spec, stored)
        return new

    def _storage_key(self, spec: ResourceSpec, key: tuple[str, str]) -> str:
        return f"{key[0]}/{key[1]}" if spec.namespaced else key[1]

    def _place_key(self, spec: ResourceSpec, key: tuple[str, str], *, present: bool) -> None:
        """Insert (``present``) or remove object ``key`` in :meth:`key_index`, if built."""
        index = self._index.get(spec.name)
        if index is None:
            return
        keys, refs = index
        skey = self._storage_key(spec, key)
        at = bisect.bisect_left(keys, skey)
        if present:
            keys.insert(at, skey)
            refs.insert(at, key)
        elif at < len(keys) and keys[at] == skey:
            del keys[at]
            del refs[at]
        else:  # not where it should be: build it anew at the next read
            self._index.pop(spec.name, None)

    def _record(self, change: Change) -> None:
        self.resource_rv[change.resource.name] = change.resource_version
        self.history.append(change)
        while len(self.history) > self.history_size:
            self.floor = self.history.popleft().resource_version
        for watcher in tuple(self.watchers.get(change.resource.name, ())):
            line = watcher.translate(change)
            if line is not None:
                watcher.queue.put_nowait(line)
        for callback in tuple(self.on_write):
            try:
                callback(change)
            except Exception:
                log.exception("on_write callback %r failed", callback)

    def _remove(self, spec: ResourceSpec, old: Obj, verb: str) -> Obj:
        final = {**old, "metadata": dict(_meta(old))}
        return self._commit(spec, final, old, "DELETED", verb)

    def _node_ready_taint(self, spec: ResourceSpec, key: tuple[str, str]) -> None:
        """The node lifecycle controller's ``doNoScheduleTaintingPass`` for Ready: once the
        Ready condition is True it removes ``node.kubernetes.io/not-ready:NoSchedule`` (the
        taint TaintNodesByCondition admission puts on every new Node, see _prepare_create).
        It writes only that taint, with the node's resourceVersion, so taints of others stay.
        (Not modelled: re-adding it, or ``unreachable``, when a node stops being Ready.)"""
        node = self.objects[spec.name].get(key)
        if node is None:
            return
        taints = _dig(node, ("spec", "taints")) or []
        if not _node_ready(node) or not any(_is_not_ready_taint(t) for t in taints):
            return
        new = _clone(node)
        kept = [t for t in taints if not _is_not_ready_taint(t)]
        if kept:
            new["spec"]["taints"] = kept
        else:
            new["spec"].pop("taints", None)
        self._commit(spec, new, node, "MODIFIED", "patch")

    def _node_lifecycle(self, spec: ResourceSpec, node: Obj) -> None:
        """Emulate the node lifecycle controller's ``node.kubernetes.io/unschedulable`` taint."""
        key = "node.kubernetes.io/unschedulable"
        taints = _dig(node, ("spec", "taints")) or []
        has = any(isinstance(t, dict) and t.get("key") == key for t in taints)
        cordoned = bool(_dig(node, ("spec", "unschedulable")))
        if cordoned == has:
            return
        new = _clone(node)
        if cordoned:
            taint = {"key": key, "effect": "NoSchedule", "timeAdded": _now()}
            _put_path(new, ("spec", "taints"), [*taints, taint])
        else:
            kept = [t for t in taints if not (isinstance(t, dict) and t.get("key") == key)]
            if kept:
                new["spec"]["taints"] = kept
            else:
                new["spec"].pop("taints", None)
        self._commit(spec, new, node, "MODIFIED", "patch")

    def create(
        self, spec: ResourceSpec, namespace: str | None, body: Any, *, version: str = ""
    ) -> Obj:
        if not isinstance(body, dict):
            raise _bad_request("the body of the request is not a JSON object")
        obj: Obj = _clone(body)
        self._check_type(spec, obj)
        meta = _meta(obj)
        if spec.namespaced:
            body_ns = meta.get("namespace")
            ns = namespace or body_ns or "default"
            if body_ns and body_ns != ns:
                raise _bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            meta["namespace"] = ns
            ns_spec = self.specs.get("namespaces")
            if ns_spec is not None and ("", ns) not in self.objects[ns_spec.name]:
                raise _not_found(ns_spec, ns)
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
            meta["name"] = f"{meta['generateName']}{suffix}"
        name = str(meta.get("name") or "")
        if not name:
            raise _invalid(
                spec.kind,
                "",
                spec.group,
                [
                    (
                        "metadata.name",
                        "FieldValueRequired",
                        "Required value: name or generateName is required",
                    )
                ],
            )
        if not _NAME_RE.match(name) or len(name) > 253:
            raise _invalid(
                spec.kind,
                name,
                spec.group,
                [
                    (
                        "metadata.name",
                        "FieldValueInvalid",
                        f'Invalid value: "{name}": {_NAME_RULE}',
                    )
                ],
            )
        if (str(meta.get("namespace", "")), name) in self.objects[spec.name]:
            raise _already_exists(spec, name)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
            meta.pop(key, None)
        if spec.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        self._prepare_create(spec, obj)
        self._admit(spec, version, obj, None)
        return self._commit(spec, obj, None, "ADDED", "create")

    def _as_read(self, spec: ResourceSpec, version: str, obj: Obj) -> Obj:
        """``obj`` as a request at ``version`` sees it: pruned and defaulted to that version's
        schema (conversion None reads the stored object at the request's version), so a
        write at v1alpha1 that drops v1beta1-only fields is not a spec change to it."""
        schema = spec.schemas.get(version or spec.version)
        if not schema or not version or version == spec.version:
            return obj
        seen: Obj = _clone(obj)
        crdschema.prune(seen, schema, root=True)
        crdschema.default(seen, schema)
        return seen

    def _admit(self, spec: ResourceSpec, version: str, obj: Obj, old: Obj | None) -> None:
        """A custom resource's schema at the request's ``version`` (default: the storage
        one): prune, default and validate ``obj`` in place; 422 with every cause
        (:func:`crdschema.admit`; apiextensions-apiserver's customResourceStrategy)."""
        schema = spec.schemas.get(version or spec.version)
        if not schema:
            return
        if self.field_validation == "Strict":
            unknown = crdschema.unknown_fields(obj, schema, root=True)
            if unknown:
                # apiserver handlers (create.go/update.go/patch.go) wrap the decoder's
                # strict error: "<Kind> in version <v> cannot be handled as a <Kind>: …".
                raise _bad_request(
                    f'{spec.kind} in version "{version or spec.version}" cannot be handled as '
                    f"a {spec.kind}: strict decoding error: "
                    + ", ".join(f'unknown field "{u}"' for u in unknown)
                )
        causes = crdschema.admit(obj, schema, old)
        if causes:
            raise _invalid(spec.kind, str(_meta(obj).get("name", "")), spec.group, causes)

    def _check_type(self, spec: ResourceSpec, obj: Obj) -> None:
        if obj.get("apiVersion") not in (None, spec.api_version):
            raise _bad_request(
                f"the API version in the data ({obj.get('apiVersion')}) does not match the "
                f"expected API version ({spec.api_version})"
            )
        if obj.get("kind") not in (None, spec.kind):
            raise _bad_request(
                f"the kind in the data ({obj.get('kind')}) does not match the expected kind "
                f"({spec.kind})"
            )
        obj["apiVersion"] = spec.api_version
        obj["kind"] = spec.kind

    def _prepare_create(self, spec: ResourceSpec, obj: Obj) -> None:
        name = str(obj["metadata"]["name"])
        if spec.custom and spec.status:
            obj.pop("status", None)
        if spec.name == "jobs.batch":
            _prepare_job(obj)
        if spec.name == "nodes" and not _node_ready(obj):
            # TaintNodesByCondition admission (plugin/pkg/admission/nodetaint, on by default):
            # a Node created gets node.kubernetes.io/not-ready:NoSchedule unless a taint of
            # that key and effect is there already; the node lifecycle controller removes it
            # once the node is Ready (_node_ready_taint). The real plugin taints *every* new
            # Node and the controller untaints a Ready one at its next pass; here a Node
            # created already Ready is created in that end state, without the transient write
            # (the real_kube tier checks the real server's create answer).
            node_spec = obj.get("spec")
            if not isinstance(node_spec, dict):
                node_spec = obj["spec"] = {}
            taints = node_spec.get("taints")
            taints = list(taints) if isinstance(taints, list) else []
            if not any(_is_not_ready_taint(t) for t in taints):
                node_spec["taints"] = [*taints, dict(NOT_READY_TAINT)]
        elif spec.name in (_RESOURCE_CLAIMS, _CLAIM_TEMPLATES, _RESOURCE_SLICES, _DEVICE_CLASSES):
            self._prepare_dra(spec, obj, name)
        elif spec.name == "namespaces":
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
            _meta(obj).setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        elif spec.group == SCHEDULING_GROUP:
            validate_workload_api(spec, obj, None, composite=self._composite_served())
        elif spec.name == "controllerrevisions.apps":
            _validate_controller_revision(obj, name)
        elif spec.name == "persistentvolumeclaims":
            _validate_claim(obj, name)
        elif spec.name == "events":
            _validate_event(obj, name)
        elif spec.name == "pods":
            pod_spec = obj.get("spec")
            containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
            if not isinstance(pod_spec, dict) or not containers or not isinstance(containers, list):
                raise _invalid(
                    "Pod", name, "", [("spec.containers", "FieldValueRequired", "Required value")]
                )
            self._scheduling_group(name, pod_spec)
            pod_spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
            pod_spec.setdefault("restartPolicy", "Always")
            pod_spec.setdefault("terminationGracePeriodSeconds", 30)
            pod_spec.setdefault("dnsPolicy", "ClusterFirst")
            tolerations = pod_spec.setdefault("tolerations", [])
            for default in _DEFAULT_TOLERATIONS:
                if not any(
                    isinstance(t, dict)
                    and t.get("key") == default["key"]
                    and t.get("effect") in (None, "", "NoExecute")
                    for t in tolerations
                ):
                    tolerations.append(dict(default))
            _quantities_as_strings(pod_spec)
            _default_requests(pod_spec)
            # podStrategy.PrepareForCreate: status = {Phase: Pending, QOSClass: ComputePodQOS}.
            obj["status"] = {"phase": "Pending", "qosClass": pod_qos_class(pod_spec)}

    def _composite_served(self) -> bool:
        return any(
            s.group == SCHEDULING_GROUP and s.kind == "CompositePodGroup"
            for s in self.specs.values()
        )

    def _scheduling_group(self, name: str, pod_spec: Obj) -> None:
        """``spec.schedulingGroup`` of a new pod. Served Workload API (GenericWorkload on):
        ``podGroupName`` is required and a DNS subdomain (core/v1 PodSchedulingGroup: "Exactly
        one field must be specified", "Must be a DNS subdomain"); it may name a PodGroup that
        does not exist yet, and is immutable (the pod spec's update rule covers it). Not
        served (a 1.35 server, the gate off): the field is dropped, as the API server drops
        the fields of disabled features (``dropDisabledPodFields``)."""
        group = pod_spec.get("schedulingGroup")
        if group is None:
            return
        if not any(s.group == SCHEDULING_GROUP for s in self.specs.values()):
            del pod_spec["schedulingGroup"]
            return
        pg = group.get("podGroupName") if isinstance(group, dict) else None
        causes = _name_errors(pg, "spec.schedulingGroup.podGroupName", label=False)
        if causes:
            raise _invalid("Pod", name, "", causes)

    def _prepare_dra(self, spec: ResourceSpec, obj: Obj, name: str) -> None:
        """resource.k8s.io/v1 create: defaults, then validation (422 with every cause);
        a claim's ``status`` is dropped (``resourceclaimStrategy.PrepareForCreate``)."""
        body = obj.get("spec")
        if spec.name == _RESOURCE_CLAIMS:
            obj.pop("status", None)
            devices = (body or {}).get("devices") if isinstance(body, dict) else None
            _default_device_claim(devices)
            causes = _device_claim_causes(devices, "spec.devices")
        elif spec.name == _CLAIM_TEMPLATES:
            inner = (body or {}).get("spec") if isinstance(body, dict) else None
            devices = (inner or {}).get("devices") if isinstance(inner, dict) else None
            _default_device_claim(devices)
            causes = _device_claim_causes(devices, "spec.spec.devices")
        elif spec.name == _DEVICE_CLASSES:
            causes = _device_class_causes(body)
        else:
            causes = _slice_causes(body)
        if causes:
            raise _invalid(spec.kind, name, spec.group, causes)

    def update(
        self,
        spec: ResourceSpec,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        verb: str = "update",
        version: str = "",
    ) -> Obj:
        current = self.get(spec, namespace, name)
        if not isinstance(body, dict):
            raise _bad_request("the body of the request is not a JSON object")
        candidate: Obj = _clone(body)
        self._check_type(spec, candidate)
        meta = _meta(candidate)
        if meta.get("name") not in (None, name):
            raise _bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL "
                f"({name})"
            )
        if spec.namespaced and meta.get("namespace") not in (None, "", namespace):
            raise _bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        return self._replace(
            spec, current, candidate, verb=verb, subresource=subresource, version=version
        )

    def patch(
        self,
        spec: ResourceSpec,
        namespace: str | None,
        name: str,
        content_type: str,
        body: Any,
        *,
        subresource: str | None = None,
        version: str = "",
    ) -> Obj:
        current = self.get(spec, namespace, name)
        patched = self._apply_patch(spec, current, content_type, body)
        if not isinstance(patched, dict):
            raise _patch_failed()
        candidate: Obj = _clone(patched)
        candidate["apiVersion"], candidate["kind"] = spec.api_version, spec.kind
        return self._replace(
            spec, current, candidate, verb="patch", subresource=subresource, version=version
        )

    def _apply_patch(self, spec: ResourceSpec, doc: Obj, content_type: str, body: Any) -> Any:
        if content_type == _MERGE_PATCH:
            if not isinstance(body, dict):
                raise _bad_request("merge patch: the patch is not a JSON object")
            return merge_patch(doc, body)
        if content_type == _JSON_PATCH:
            return json_patch(doc, body)
        if content_type == _STRATEGIC_PATCH and not spec.custom:
            return strategic_merge_patch(doc, body, {**_META_KEYS, **spec.merge_keys})
        accepted = [_JSON_PATCH, _MERGE_PATCH, "application/apply-patch+yaml"]
        if not spec.custom:
            accepted.insert(2, _STRATEGIC_PATCH)
        raise ApiError(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(accepted),
        )

    def _replace(
        self,
        spec: ResourceSpec,
        current: Obj,
        candidate: Obj,
        *,
        verb: str,
        subresource: str | None,
        version: str = "",
    ) -> Obj:
        """Common tail of update and patch: preconditions, subresource rules, no-op, commit.

        What a ``metadata.uid`` in the body does depends on the verb, as on kube-apiserver
        1.32 (apiserver ``handlers/update.go`` / ``patch.go``, ``registry/rest/update.go``):

        * PUT: ``rest.DefaultUpdatedObjectInfo(body).Preconditions()`` turns the body's uid
          into a storage precondition, checked first: 409 ``Precondition failed``.
        * PATCH: the patcher builds ``DefaultUpdatedObjectInfo(nil, …)``, which has no
          preconditions, so the uid is just a field. On a main resource, and on built-in
          ``/status`` subresources (``pods/status``: the status strategy keeps the new
          metadata), ``BeforeUpdate`` → ``ValidateObjectMetaUpdate`` answers 422
          ``metadata.uid: Invalid value: "…": field is immutable``. A custom resource's
          ``/status`` copies the old object and takes only ``status``
          (apiextensions ``statusStrategy.PrepareForUpdate``), and ``/scale`` takes only the
          replicas and the resourceVersion: there the uid is silently ignored (200, applied).

        The resourceVersion, by contrast, is a precondition for every verb and subresource
        (``genericregistry.Store.Update``: 409 when it is not the stored one).
        """
        cur_meta = _meta(current)
        name = str(cur_meta["name"])
        meta = _meta(candidate)
        want_uid = meta.get("uid")
        other_uid = bool(want_uid) and want_uid != cur_meta.get("uid")
        if other_uid and verb != "patch":
            raise _uid_precondition_failed(spec, name, str(want_uid), cur_meta.get("uid"))
        want_rv = meta.get("resourceVersion")
        if want_rv and want_rv != cur_meta["resourceVersion"]:
            raise _conflict(spec.name, name, _MODIFIED, _details(spec, name))
        if other_uid and (subresource is None or (subresource == "status" and not spec.custom)):
            # Reported twice among the causes (once in the message): rest.BeforeUpdate runs
            # validateCommonFields and then the strategy's ValidateUpdate, and both validate
            # the object meta update (ValidatePodUpdate, ValidatePodStatusUpdate,
            # ValidateNodeUpdate, the custom resource validator …).
            cause = (
                "metadata.uid",
                "FieldValueInvalid",
                f'Invalid value: "{want_uid}": field is immutable',
            )
            raise _invalid(spec.kind, name, spec.group, [cause, cause])
        if subresource == "status":
            new: Obj = _clone(current)
            if "status" in candidate:
                new["status"] = candidate["status"]
            else:
                new.pop("status", None)
            if spec.name == _RESOURCE_CLAIMS:
                causes = _claim_status_causes(new, current)
                if causes:
                    raise _invalid(spec.kind, name, spec.group, causes)
        else:
            new = candidate
            if spec.status or subresource == "scale":
                if "status" in current:
                    new["status"] = _clone(current["status"])
                else:
                    new.pop("status", None)
            for key in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "name",
                "namespace",
            ):
                if key in cur_meta:
                    meta[key] = cur_meta[key]
                else:
                    meta.pop(key, None)
            self._validate_update(spec, current, new)
        # The whole new object meets the schema, whatever the subresource (a /scale write
        # past ``maximum`` is refused by the custom resource's validation too).
        self._admit(spec, version, new, current)
        new_meta = _meta(new)
        if spec.generation and _canon(_generation_view(spec, new)) != _canon(
            _generation_view(spec, self._as_read(spec, version, current))
        ):
            new_meta["generation"] = int(cur_meta.get("generation", 0)) + 1
        new_meta["resourceVersion"] = cur_meta["resourceVersion"]
        if _canon(new) == _canon(current):
            return current
        if (
            new_meta.get("deletionTimestamp")
            and not _finalizers(new)
            and not (self.graceful_pods and cur_meta.get("deletionGracePeriodSeconds"))
        ):
            # genericregistry (shouldDeleteDuringUpdate): an update that empties the finalizers
            # of a deleting object whose grace period is over (0) deletes it; watchers see
            # DELETED with the stored state. With simulated kubelets, a pod still in its grace
            # period waits for the kubelet's final delete.
            return self._remove(spec, current, verb)
        return self._commit(spec, new, current, "MODIFIED", verb)

    def _validate_update(self, spec: ResourceSpec, current: Obj, new: Obj) -> None:
        name = str(_meta(current)["name"])
        if _meta(current).get("deletionTimestamp"):
            added = [f for f in _finalizers(new) if f not in _finalizers(current)]
            if added:
                raise _invalid(
                    spec.kind,
                    name,
                    spec.group,
                    [
                        (
                            "metadata.finalizers",
                            "FieldValueForbidden",
                            (
                                "Forbidden: no new finalizers can be added if the object is being "
                                f"deleted, found new finalizers {orjson.dumps(added).decode()}"
                            ),
                        )
                    ],
                )
        if spec.group == SCHEDULING_GROUP:
            validate_workload_api(spec, new, current, composite=self._composite_served())
        if spec.name == "events":
            _validate_event(new, name)
        # ValidateResourceClaimUpdate / ValidateResourceClaimTemplateUpdate: the spec is
        # immutable.
        if spec.name in (_RESOURCE_CLAIMS, _CLAIM_TEMPLATES) and _canon(
            current.get("spec")
        ) != _canon(new.get("spec")):
            raise _invalid(
                spec.kind, name, spec.group, [_invalid_value("spec", new.get("spec"), _IMMUTABLE)]
            )
        if spec.name == _RESOURCE_SLICES:
            # ValidateResourceSliceUpdate: driver, pool name and nodeName are immutable.
            old_s, new_s = current.get("spec") or {}, new.get("spec") or {}
            causes = _slice_causes(new_s)
            for path, old_v, new_v in (
                ("spec.driver", old_s.get("driver"), new_s.get("driver")),
                (
                    "spec.pool.name",
                    (old_s.get("pool") or {}).get("name"),
                    (new_s.get("pool") or {}).get("name"),
                ),
                ("spec.nodeName", old_s.get("nodeName"), new_s.get("nodeName")),
            ):
                if old_v != new_v:
                    causes.append(_invalid_value(path, new_v, _IMMUTABLE))
            if causes:
                raise _invalid(spec.kind, name, spec.group, causes)
        if spec.name == "controllerrevisions.apps":
            _validate_controller_revision(new, name)
            if _canon(new.get("data")) != _canon(current.get("data")):
                # ValidateImmutableField; the real message prints the new value with Go's %#v.
                raise _invalid(
                    spec.kind,
                    name,
                    spec.group,
                    [("data", "FieldValueInvalid", 'Invalid value: "object": field is immutable')],
                )
        if spec.name == "pods":
            old_spec, new_spec = current.get("spec"), new.get("spec")
            if _canon(_pod_spec_view(old_spec)) != _canon(_pod_spec_view(new_spec)):
                raise _invalid("Pod", name, "", [("spec", "FieldValueForbidden", _POD_FORBIDDEN)])
            old_tol = (old_spec or {}).get("tolerations") or []
            new_tol = (new_spec or {}).get("tolerations") or []
            new_canon = {_canon(t) for t in new_tol}
            if any(_canon(t) not in new_canon for t in old_tol):
                raise _invalid("Pod", name, "", [("spec", "FieldValueForbidden", _POD_FORBIDDEN)])

    def delete(
        self,
        spec: ResourceSpec,
        namespace: str | None,
        name: str,
        options: Obj | None = None,
        *,
        verb: str = "delete",
    ) -> tuple[Obj, bool]:
        """Delete (or start deleting) an object; returns ``(object, removed_now)``."""
        current = self.get(spec, namespace, name)
        options = options or {}
        pre = options.get("preconditions") or {}
        meta = _meta(current)
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise _uid_precondition_failed(spec, name, str(pre["uid"]), meta.get("uid"))
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise _conflict(
                spec.name,
                name,
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
                _details(spec, name),
            )
        if spec.name == "namespaces":
            for other in self.specs.values():
                if other.namespaced:
                    for obj in list(self.iter_objects(other, name)):
                        with contextlib.suppress(ApiError):
                            self.delete(other, name, str(_meta(obj)["name"]), verb=verb)
        grace = self._grace(spec, current, options)
        graceful = spec.name == "pods" and self.graceful_pods and grace > 0
        if _finalizers(current) or graceful:
            if meta.get("deletionTimestamp"):
                if grace >= int(meta.get("deletionGracePeriodSeconds") or 0):
                    return current, False
                if not _finalizers(current) and grace == 0:
                    # The kubelet's final grace-0 delete once the containers stopped.
                    return self._remove(spec, current, verb), True
                # A shorter grace period shortens a deletion already under way.
            new: Obj = _clone(current)
            new_meta = _meta(new)
            # registry/rest.BeforeDelete: the deletionTimestamp is the *end* of the grace period.
            new_meta["deletionTimestamp"] = _now(grace)
            new_meta["deletionGracePeriodSeconds"] = grace
            return self._commit(spec, new, current, "MODIFIED", verb), False
        return self._remove(spec, current, verb), True

    def _grace(self, spec: ResourceSpec, pod: Obj, options: Obj) -> int:
        """Grace period (seconds) of a deletion, as the pod strategy's CheckGracefulDelete
        decides it: the request's, else the pod's ``terminationGracePeriodSeconds`` (default
        30); 0 for objects that are not pods, unscheduled pods and terminal pods."""
        if spec.name != "pods":
            return int(options.get("gracePeriodSeconds") or 0)
        requested = options.get("gracePeriodSeconds")
        if requested is None:
            requested = _dig(pod, ("spec", "terminationGracePeriodSeconds"))
        if requested is None:
            requested = 30 if self.graceful_pods else 0
        if not _dig(pod, ("spec", "nodeName")):
            return 0
        if _dig(pod, ("status", "phase")) in ("Succeeded", "Failed"):
            return 0
        return max(0, int(requested))

    # subresources -----------------------------------------------------------------------------
    def get_scale(self, spec: ResourceSpec, namespace: str | None, name: str) -> Obj:
        return _scale_of(spec, self.get(spec, namespace, name))

    def update_scale(
        self, spec: ResourceSpec, namespace: str | None, name: str, scale: Any, verb: str
    ) -> Obj:
        assert spec.scale is not None
        current = self.get(spec, namespace, name)
        if not isinstance(scale, dict):
            raise _bad_request("the body of the request is not a JSON object")
        replicas = _dig(scale, ("spec", "replicas"))
        if replicas is None:
            replicas = 0
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            shown = orjson.dumps(replicas).decode()
            raise _invalid(
                "Scale",
                name,
                "autoscaling",
                [
                    (
                        "spec.replicas",
                        "FieldValueInvalid",
                        f"Invalid value: {shown}: must be greater than or equal to 0",
                    )
                ],
            )
        want_uid = _dig(scale, ("metadata", "uid"))
        if verb == "update" and want_uid and want_uid != _meta(current).get("uid"):
            # PUT …/scale: the Scale's uid is a precondition on the object (apiextensions
            # scaleUpdatedObjectInfo.Preconditions() passes the request's on); a PATCH has
            # none, and the Scale's uid never reaches the object (see _replace).
            raise _uid_precondition_failed(spec, name, str(want_uid), _meta(current).get("uid"))
        new: Obj = _clone(current)
        _put_path(new, spec.scale.spec_replicas, replicas)
        want_rv = _dig(scale, ("metadata", "resourceVersion"))
        _meta(new)["resourceVersion"] = want_rv or _meta(current)["resourceVersion"]
        updated = self._replace(spec, current, new, verb=verb, subresource="scale")
        return _scale_of(spec, updated)

    def patch_scale(
        self, spec: ResourceSpec, namespace: str | None, name: str, content_type: str, body: Any
    ) -> Obj:
        scale = self.get_scale(spec, namespace, name)
        if content_type == _MERGE_PATCH and isinstance(body, dict):
            patched = merge_patch(scale, body)
        elif content_type == _JSON_PATCH:
            patched = json_patch(scale, body)
        elif content_type == _STRATEGIC_PATCH and isinstance(body, dict):
            patched = strategic_merge_patch(scale, body, {})  # Scale has no lists
        else:
            raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {content_type}")
        return self.update_scale(spec, namespace, name, patched, "patch")

    def bind(self, namespace: str, name: str | None, binding: Any) -> Obj:
        pods = self.specs["pods"]
        if not isinstance(binding, dict):
            raise _bad_request("the body of the request is not a JSON object")
        bmeta = binding.get("metadata") or {}
        pod_name = name or str(bmeta.get("name") or "")
        if name is not None and bmeta.get("name") not in (None, name):
            raise _bad_request(
                f"the name of the object ({bmeta.get('name')}) does not match the name on the URL "
                f"({name})"
            )
        target = str(_dig(binding, ("target", "name")) or "")
        if not target:
            raise _invalid(
                "Binding", pod_name, "", [("target.name", "FieldValueRequired", "Required value")]
            )
        pod = self.get(pods, namespace, pod_name)
        meta = _meta(pod)
        qualified = "pods/binding"
        if bmeta.get("uid") and bmeta["uid"] != meta.get("uid"):
            raise _conflict(
                qualified,
                pod_name,
                f"Precondition failed: UID in precondition: {bmeta['uid']}, UID in object meta: "
                f"{meta.get('uid')}",
            )
        if meta.get("deletionTimestamp"):
            raise _conflict(
                qualified,
                pod_name,
                f"pod {pod_name} is being deleted, cannot be assigned to a host",
            )
        bound = _dig(pod, ("spec", "nodeName"))
        if bound:
            raise _conflict(
                qualified, pod_name, f'pod {pod_name} is already assigned to node "{bound}"'
            )
        new: Obj = _clone(pod)
        new["spec"]["nodeName"] = target
        if bmeta.get("annotations"):
            _meta(new).setdefault("annotations", {}).update(bmeta["annotations"])
        status = new.setdefault("status", {})
        conditions = [
            c
            for c in status.get("conditions") or []
            if not (isinstance(c, dict) and c.get("type") == "PodScheduled")
        ]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": _now(),
            }
        )
        status["conditions"] = conditions
        self._commit(pods, new, pod, "MODIFIED", "create")
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    def evict(self, namespace: str, name: str, eviction: Any) -> Obj:
        pods = self.specs["pods"]
        if not isinstance(eviction, dict):
            raise _bad_request("the body of the request is not a JSON object")
        if _dig(eviction, ("metadata", "name")) not in (None, name):
            raise _bad_request("name in URL does not match name in Eviction object")
        options = eviction.get("deleteOptions") or {}
        pod = self.get(pods, namespace, name)
        phase = _dig(pod, ("status", "phase"))
        if phase in ("Pending", "Succeeded", "Failed") or _meta(pod).get("deletionTimestamp"):
            self.delete(pods, namespace, name, options, verb="create")
            return _success()
        pdbs = self._pdbs_for(pod)
        if len(pdbs) > 1:
            raise ApiError(
                500,
                "",
                "This pod has more than one PodDisruptionBudget, which the eviction "
                "subresource does not support.",
            )
        if pdbs:
            pdb = pdbs[0]
            healthy, desired = self._pdb_health(pdb, namespace)
            unready_ok = not _pod_ready(pod) and healthy >= desired and desired > 0
            if not unready_ok and healthy - desired <= 0:
                cause = (
                    f"The disruption budget {_meta(pdb)['name']} needs {desired} healthy pods "
                    f"and has {healthy} currently"
                )
                raise ApiError(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    {"causes": [{"reason": "DisruptionBudget", "message": cause}]},
                )
        self.delete(pods, namespace, name, options, verb="create")
        return _success()

    def _pdbs_for(self, pod: Obj) -> ObjList:
        spec = self.specs.get("poddisruptionbudgets.policy")
        if spec is None:
            return []
        namespace = _meta(pod).get("namespace")
        out: ObjList = []
        for pdb in self.iter_objects(spec, namespace):
            selector = selector_from_object(_dig(pdb, ("spec", "selector")))
            if selector is not None and _labels_match(selector, pod):
                out.append(pdb)
        return out

    def _pdb_health(self, pdb: Obj, namespace: str) -> tuple[int, int]:
        """``(currentHealthy, desiredHealthy)``, computed the way the disruption controller does
        for pods without a scalable controller: expected = the PDB's matching pods."""
        selector = selector_from_object(_dig(pdb, ("spec", "selector"))) or ()
        pods = [
            p
            for p in self.iter_objects(self.specs["pods"], namespace)
            if _labels_match(selector, p)
        ]
        expected = len(pods)
        healthy = sum(1 for p in pods if _pod_ready(p) and not _meta(p).get("deletionTimestamp"))
        spec = pdb.get("spec") or {}
        if spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], expected)
        elif spec.get("maxUnavailable") is not None:
            desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
        else:
            desired = expected
        return healthy, desired

    # watch support ----------------------------------------------------------------------------
    def add_watcher(self, watcher: _Watcher) -> None:
        self.watchers.setdefault(watcher.spec.name, set()).add(watcher)

    def remove_watcher(self, watcher: _Watcher) -> None:
        self.watchers.get(watcher.spec.name, set()).discard(watcher)

    def compact(self) -> None:
        self.history.clear()
        self.floor = self.rv


#: The labels the API server puts on a Job's pod template and selector
#: (pkg/apis/batch/types.go: ``batch.kubernetes.io/controller-uid``,
#: ``batch.kubernetes.io/job-name`` and their legacy unprefixed forms).
JOB_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"


def _prepare_job(job: Obj) -> None:
    """A new batch/v1 Job as the API server stores it: defaults (pkg/apis/batch/v1/
    defaults.go: ``completions`` and ``parallelism`` 1 when both are unset, ``parallelism``
    1, ``backoffLimit`` 6, ``completionMode`` NonIndexed, ``suspend`` false,
    ``podReplacementPolicy`` TerminatingOrFailed, ``manualSelector`` unset) and, unless
    ``manualSelector``, the generated selector ``batch.kubernetes.io/controller-uid=<uid>``
    with the template labelled ``controller-uid``, ``job-name`` and their
    ``batch.kubernetes.io/`` forms (pkg/registry/batch/job/strategy.go ``generateSelector``).
    """
    meta = job["metadata"]
    spec = job.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    if spec.get("manualSelector"):
        return
    uid, name = str(meta["uid"]), str(meta["name"])
    spec["selector"] = {"matchLabels": {JOB_UID_LABEL: uid}}
    template = spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {
        **(tmeta.get("labels") or {}),
        "controller-uid": uid,
        JOB_UID_LABEL: uid,
        "job-name": name,
        JOB_NAME_LABEL: name,
    }


def _validate_controller_revision(obj: Obj, name: str) -> None:
    """pkg/apis/apps/validation ``ValidateControllerRevision``: ``data`` is mandatory and
    ``revision`` is not negative (422 otherwise)."""
    causes = []
    if obj.get("data") is None:
        causes.append(("data", "FieldValueRequired", "Required value: data is mandatory"))
    revision = obj.get("revision", 0)
    if not isinstance(revision, int) or revision < 0:
        causes.append(
            (
                "revision",
                "FieldValueInvalid",
                f"Invalid value: {revision}: must be greater than or equal to 0",
            )
        )
    if causes:
        raise _invalid("ControllerRevision", name, "apps", causes)


def _success() -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _generation_view(spec: ResourceSpec, obj: Obj) -> Obj:
    skip = {"metadata", "kind", "apiVersion"} | ({"status"} if spec.status else set())
    return {k: v for k, v in obj.items() if k not in skip}


def _scale_of(spec: ResourceSpec, obj: Obj) -> Obj:
    assert spec.scale is not None
    meta = _meta(obj)
    status: Obj = {"replicas": int(_dig(obj, spec.scale.status_replicas) or 0)}
    if spec.scale.label_selector is not None:
        selector = _dig(obj, spec.scale.label_selector)
        if selector:
            status["selector"] = selector
    scale_meta = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if k in meta
    }
    # autoscaling/v1 ScaleSpec is `Replicas int32 json:"replicas,omitempty"`: a real server
    # answers `"spec": {}` at zero replicas (observed on kube-apiserver 1.32, issue 17), while
    # ScaleStatus.replicas has no omitempty and is always there.
    replicas = int(_dig(obj, spec.scale.spec_replicas) or 0)
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": replicas} if replicas else {},
        "status": status,
    }


def _without_type(obj: Obj) -> Obj:
    """A list item of a built-in kind: the object without ``kind`` and ``apiVersion`` (a
    shallow copy; the list's own kind says them)."""
    item = obj.copy()
    item.pop("kind", None)
    item.pop("apiVersion", None)
    return item


def _encode_continue(rv: int, start: str) -> str:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        version, rv, start = data.get("v"), int(data["rv"]), str(data["start"])
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _bad_request(f"continue key is not valid: {exc}") from exc
    if version != "meta.k8s.io/v1":
        raise _bad_request(f"continue key is not valid: unknown version {version!r}")
    return rv, start


# --- HTTP ------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Route:
    spec: ResourceSpec
    namespace: str | None
    name: str | None
    subresource: str | None
    watch_path: bool
    #: The version in the path: another of ``spec.served_versions`` than the storage one
    #: gets its answers' ``apiVersion`` rewritten (conversion None).
    version: str = ""

    @property
    def api_version(self) -> str | None:
        """The ``apiVersion`` the answer must carry when it is not the storage version's."""
        if not self.version or self.version == self.spec.version:
            return None
        return f"{self.spec.group}/{self.version}"


_MAIN_VERBS: Final = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
]
_SUB_VERBS: Final = ["get", "patch", "update"]
_PUBLIC_PATHS: Final = frozenset({"/healthz", "/livez", "/readyz", "/version"})


def _int_query(value: str | None, name: str) -> int:
    if not value:
        return 0
    try:
        return int(value)
    except ValueError as exc:
        raise _bad_request(f"invalid {name}: {value!r}") from exc


def _to_version(payload: Any, stored: str, target: str, schema: Obj | None = None) -> None:
    """Rewrite ``apiVersion`` ``stored`` → ``target`` in an object or a list and its items,
    in place (a CRD's ``conversion: None``; Status and Scale answers keep theirs). With the
    target version's ``schema``, each object is also pruned and defaulted to it, as the
    API server's converting codec does on read (apiextensions-apiserver crdConversionRESTOptions
    / schemaCoercingConverter): a v1alpha1 read does not show v1beta1-only fields."""
    if not isinstance(payload, dict):
        return
    objects = [payload, *(i for i in payload.get("items") or () if isinstance(i, dict))]
    for obj in objects:
        if obj.get("apiVersion") != stored:
            continue
        obj["apiVersion"] = target
        if schema and not str(obj.get("kind", "")).endswith("List"):
            crdschema.prune(obj, schema, root=True)
            crdschema.default(obj, schema)


def _line_to_version(line: bytes, stored: str, target: str, schema: Obj | None = None) -> bytes:
    """A watch line's object at ``target`` (see :func:`_to_version`)."""
    event = orjson.loads(line)
    _to_version(event.get("object"), stored, target, schema)
    return orjson.dumps(event) + b"\n"


def _version_priority(version: str) -> tuple[int, int, int]:
    """Sort key of a Kubernetes API version, highest priority first (apimachinery
    pkg/version ``CompareKubeAwareVersionStrings``: ``v2`` > ``v1`` > ``v1beta2`` >
    ``v1beta1`` > ``v1alpha1``)."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if match is None:
        return (3, 0, 0)
    major, level, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[level]
    return (rank, -int(major), -int(minor or 0))


def _accepts_json(accept: str) -> bool:
    """Whether an ``Accept`` header admits ``application/json`` (empty means ``*/*``, as
    kube-openapi's handlers read it; a ``q=0`` clause refuses)."""
    if not accept.strip():
        return True
    for clause in accept.split(","):
        media, *params = (p.strip() for p in clause.split(";"))
        if any(p.replace(" ", "") in ("q=0", "q=0.0") for p in params):
            continue
        if media in ("*/*", "application/*", "application/json"):
            return True
    return False


def _json_response(
    obj: Obj, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(obj), status=status, content_type="application/json", headers=headers
    )


def _error_response(err: ApiError) -> web.Response:
    # responsewriters.ErrorNegotiated: Retry-After is details.retryAfterSeconds when set.
    headers = None
    if err.code in (429, 503):
        seconds = (err.details or {}).get("retryAfterSeconds") or 1
        headers = {"Retry-After": str(seconds)}
    return _json_response(err.status(), err.code, headers)


def _paths_not_installed() -> ApiError:
    # k8s.io/apiserver/pkg/util/notfoundhandler: any path not (yet) found while the mux and
    # discovery are incomplete.
    return ApiError(
        503,
        "ServiceUnavailable",
        "the request has been made before all known HTTP paths have been installed, please try "
        "again",
        {"retryAfterSeconds": 5},
    )


def _storage_initializing(downtime: float) -> ApiError:
    # cacher: errors.NewTooManyRequests(err.Error(), calculateRetryAfterForUnreadyCache(d)),
    # where the wait is exp(0.06 · downtime s) clamped to 1..30 s.
    wait = int(min(30.0, max(1.0, math.exp(0.06 * downtime))))
    return ApiError(
        429, "TooManyRequests", "storage is (re)initializing", {"retryAfterSeconds": wait}
    )


class KubeSim:
    """An in-process Kubernetes API server for tests, the demo and ``slurmbridge sim kube``.

    Use it as ``async with KubeSim() as sim:`` or with :meth:`start` / :meth:`stop`. All the
    helpers are synchronous and run on the event loop, so a helper's write is visible to the
    next HTTP request and already queued on every matching watch when the helper returns.

    ``history_size`` bounds the watch history (older resourceVersions get 410);
    ``bookmark_interval`` is how often (seconds) each watch is offered a BOOKMARK — sent only
    when its kind's resourceVersion moved past the watch's start, as a real server does (a
    minute there); ``token`` makes the server require
    ``Authorization: Bearer <token>``; ``namespaces`` exist from the start;
    ``initial_resource_version`` lets a restarted simulator continue a counter (chaos tests);
    ``node_lifecycle`` emulates the node lifecycle controller's
    ``node.kubernetes.io/unschedulable:NoSchedule`` taint on cordoned nodes.
    ``workload_api`` serves the Kubernetes Workload API (``scheduling.k8s.io`` PodGroup and
    Workload, :func:`workload_api_resources`) at that version — ``"v1alpha2"`` as a 1.36
    server, ``"v1beta1"`` as 1.37 — and validates pods' ``spec.schedulingGroup``; ``None``
    (the default) is a 1.35 server: those paths answer 404 and the field is dropped. With it
    on, ``podgroups`` alone is ambiguous (the coscheduling CRD shares the plural): name
    ``podgroups.scheduling.k8s.io`` in the helpers. ``composite_pod_groups`` (with
    ``workload_api="v1beta1"``) also serves 1.37's alpha CompositePodGroup at v1alpha3
    (:func:`composite_pod_group_resource`). ``job_controller`` runs the Job
    controller (:mod:`slurmbridge.devtools.sim.jobcontroller`): batch/v1 Jobs get their pods.
    """

    def __init__(
        self,
        *,
        history_size: int = 1000,
        bookmark_interval: float = 1.0,
        token: str | None = None,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        resources: Iterable[ResourceSpec] = DEFAULT_RESOURCES,
        initial_resource_version: int = 0,
        node_lifecycle: bool = False,
        kubelet: bool = False,
        workload_api: str | None = None,
        composite_pod_groups: bool = False,
        claim_controller: bool = True,
        job_controller: bool = False,
    ) -> None:
        self._store = _Store(history_size=history_size, initial_rv=initial_resource_version)
        self._store.node_lifecycle = node_lifecycle
        self._store.graceful_pods = kubelet
        #: The simulated kubelets (``kubelet=True``); see :mod:`slurmbridge.devtools.sim.kubelet`.
        self.kubelet: Kubelet | None = None
        if kubelet:
            from slurmbridge.devtools.sim.kubelet import (
                Kubelet,  # here: kubelet imports this module
            )

            self.kubelet = Kubelet(self)
        #: The kube-controller-manager's resourceclaim controller (claims from templates);
        #: see :mod:`slurmbridge.devtools.sim.resourceclaim`. Runs while the server listens.
        self.claim_controller: ResourceClaimController | None = None
        if claim_controller:
            from slurmbridge.devtools.sim.resourceclaim import ResourceClaimController

            self.claim_controller = ResourceClaimController(self)
        #: The kube-controller-manager's Job controller (pods for batch/v1 Jobs); see
        #: :mod:`slurmbridge.devtools.sim.jobcontroller`. Off by default: tests and the demo
        #: make a Job's pods themselves (:mod:`slurmbridge.devtools.sim.workloads`).
        self.job_controller: JobController | None = None
        if job_controller:
            from slurmbridge.devtools.sim.jobcontroller import JobController

            self.job_controller = JobController(self)
        for spec in resources:
            self._store.register(spec)
        for spec in workload_api_resources(workload_api) if workload_api else ():
            self._store.register(spec)
        if composite_pod_groups:
            if workload_api != "v1beta1":
                raise ValueError("composite_pod_groups: a 1.37 server (workload_api='v1beta1')")
            self._store.register(composite_pod_group_resource())
        self.bookmark_interval = bookmark_interval
        self.token = token
        #: Requests served, by ``(verb, resource)``, e.g. ``("patch", "nodes")``,
        #: ``("create", "pods/eviction")``, ``("watch", "nodes")``.
        self.requests: Counter[tuple[str, str]] = Counter()
        #: Requests received, by their ``User-Agent`` header (``""`` when there is none): the
        #: name a real server's audit log and API Priority and Fairness rules see.
        self.user_agents: Counter[str] = Counter()
        self._faults: list[_Fault] = []
        self._delays: list[_Delay] = []
        #: Chaos (tests/chaos): the share of requests answered with a fault — 409 Conflict
        #: for patch/update, 429 for evictions, 503 for the rest (watches excepted: drop
        #: them with drop_watches, expire them with compact). ``chaos_injected`` counts them.
        self.chaos_rate = 0.0
        self.chaos_rng = random.Random(0)
        self.chaos_injected: Counter[str] = Counter()
        #: BOOKMARK events sent to watches, by resource (``nodes``, ``nodesets.slinky…``).
        self.bookmarks: Counter[str] = Counter()
        #: restart_window: (restarted at, paths installed at, storage ready at), monotonic.
        self._restart: tuple[float, float, float] | None = None
        self._runner: web.AppRunner | None = None
        self._url = ""
        for ns in namespaces if "namespaces" in self._store.specs else ():
            self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    # lifecycle --------------------------------------------------------------------------------
    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on ``host:port`` (0 = a free port) and return :attr:`url`."""
        if self._runner is not None:
            raise RuntimeError("KubeSim already started")
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self._runner = runner
        if self.kubelet is not None:
            self.kubelet.attach()
        if self.claim_controller is not None:
            self.claim_controller.attach()
        if self.job_controller is not None:
            self.job_controller.attach()
        address = runner.addresses[0]
        bound_host, bound_port = address[0], address[1]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self._url = f"http://{shown}:{bound_port}"
        log.info("kube simulator listening on %s", self._url)
        return self._url

    async def stop(self) -> None:
        """Close every watch and stop listening."""
        if self.kubelet is not None:
            self.kubelet.detach()
        if self.claim_controller is not None:
            self.claim_controller.detach()
        if self.job_controller is not None:
            self.job_controller.detach()
        self.drop_watches()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> KubeSim:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        """``http://host:port`` once started."""
        if not self._url:
            raise RuntimeError("KubeSim not started")
        return self._url

    def write_kubeconfig(self, path: str | Path, *, namespace: str = "default") -> Path:
        """Write a kubeconfig pointing at this simulator (JSON, which is valid YAML)."""
        user: Obj = {"token": self.token} if self.token else {}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "slurmbridge-sim", "cluster": {"server": self.url}}],
            "users": [{"name": "slurmbridge-sim", "user": user}],
            "contexts": [
                {
                    "name": "slurmbridge-sim",
                    "context": {
                        "cluster": "slurmbridge-sim",
                        "user": "slurmbridge-sim",
                        "namespace": namespace,
                    },
                }
            ],
            "current-context": "slurmbridge-sim",
        }
        out = Path(path)
        out.write_bytes(orjson.dumps(config, option=orjson.OPT_INDENT_2))
        return out

    # registry ---------------------------------------------------------------------------------
    def register(self, spec: ResourceSpec) -> None:
        """Serve one more resource (a new kind is a :class:`ResourceSpec` away)."""
        self._store.register(spec)

    def resource(self, name: str) -> ResourceSpec:
        """Look a resource up by qualified name, plural, kind or short name."""
        return self._store.lookup(name)

    # in-process API ---------------------------------------------------------------------------
    @property
    def resource_version(self) -> str:
        """The current global resourceVersion."""
        return str(self._store.rv)

    @property
    def on_write(self) -> list[Callable[[Change], None]]:
        """Callbacks run synchronously after every committed write (keep them cheap)."""
        return self._store.on_write

    @property
    def watch_count(self) -> int:
        """Open watch streams (lets tests wait until a client is watching)."""
        return sum(len(ws) for ws in self._store.watchers.values())

    def create(self, obj: Obj, *, namespace: str | None = None) -> Obj:
        """Create ``obj`` (kind looked up from apiVersion/kind; one of a kind's
        ``served_versions`` is stored at its storage version, conversion None); raises
        :class:`ApiError`."""
        spec = self._store.spec_for(obj)
        version = str(obj.get("apiVersion", "")).rpartition("/")[2]
        if obj.get("apiVersion") != spec.api_version:
            obj = {**obj, "apiVersion": spec.api_version}
        ns = None
        if spec.namespaced:
            body_meta = obj.get("metadata")
            body_ns = body_meta.get("namespace") if isinstance(body_meta, dict) else None
            ns = namespace or body_ns or "default"
        return _clone_obj(self._store.create(spec, ns, obj, version=version))

    def get(self, resource: str, name: str, namespace: str | None = None) -> Obj:
        """One object (a copy); raises :class:`ApiError` 404."""
        spec = self._store.lookup(resource)
        return _clone_obj(self._store.get(spec, self._ns(spec, namespace), name))

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
    ) -> ObjList:
        """Objects of ``resource`` (all namespaces when ``namespace`` is None), sorted by key."""
        spec = self._store.lookup(resource)
        result = self._store.list(
            spec,
            namespace,
            labels=parse_label_selector(label_selector),
            fields=parse_field_selector(spec, field_selector),
        )
        items: ObjList = _clone(result["items"])
        for item in items:
            item.setdefault("apiVersion", spec.api_version)
            item.setdefault("kind", spec.kind)
        return items

    def update(self, obj: Obj, *, subresource: str | None = None) -> Obj:
        """PUT semantics: 409 when ``metadata.resourceVersion`` is set and stale."""
        spec = self._store.spec_for(obj)
        meta = _meta(_clone(obj))
        return _clone_obj(
            self._store.update(
                spec,
                self._ns(spec, meta.get("namespace")),
                str(meta.get("name", "")),
                obj,
                subresource=subresource,
            )
        )

    def patch(
        self,
        resource: str,
        name: str,
        body: Any,
        namespace: str | None = None,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> Obj:
        """Patch with ``patch_type`` ``merge`` | ``json`` | ``strategic`` (or a content type)."""
        spec = self._store.lookup(resource)
        content_type = _PATCH_TYPES.get(patch_type, patch_type)
        ns = self._ns(spec, namespace)
        if subresource == "scale":
            if spec.scale is None:
                raise _path_not_found()
            return self._store.patch_scale(spec, ns, name, content_type, _clone(body))
        return _clone_obj(
            self._store.patch(spec, ns, name, content_type, _clone(body), subresource=subresource)
        )

    def patch_merge(
        self,
        resource: str,
        name: str,
        patch: Obj,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        """JSON merge patch (RFC 7386) of one object or its ``status`` / ``scale``."""
        return self.patch(resource, name, patch, namespace, subresource=subresource)

    def delete(
        self,
        resource: str,
        name: str,
        namespace: str | None = None,
        *,
        preconditions: Obj | None = None,
    ) -> Obj:
        """Delete (objects with finalizers only get a ``deletionTimestamp``); returns the object."""
        spec = self._store.lookup(resource)
        options = {"preconditions": preconditions} if preconditions else None
        obj, _ = self._store.delete(spec, self._ns(spec, namespace), name, options)
        return _clone_obj(obj)

    def delete_pod(
        self,
        name: str,
        namespace: str = "default",
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
    ) -> Obj:
        """Delete a pod with DeleteOptions ``gracePeriodSeconds`` and a uid precondition."""
        spec = self._store.lookup("pods")
        options: Obj = {}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if uid:
            options["preconditions"] = {"uid": uid}
        obj, _ = self._store.delete(spec, namespace, name, options)
        return _clone_obj(obj)

    def bind(self, name: str, node: str, namespace: str = "default") -> None:
        """``POST pods/<name>/binding`` to ``node``, as a scheduler binds; raises ApiError."""
        self._store.bind(namespace, name, {"metadata": {"name": name}, "target": {"name": node}})

    def stop_kubelet(self, node: str) -> None:
        """Stop ``node``'s simulated kubelet (its pods freeze; the Node turns NotReady)."""
        if self.kubelet is None:
            raise RuntimeError("KubeSim(kubelet=True) is needed to stop a kubelet")
        self.kubelet.stop(node)

    def start_kubelet(self, node: str) -> None:
        """Start ``node``'s simulated kubelet again."""
        if self.kubelet is None:
            raise RuntimeError("KubeSim(kubelet=True) is needed to start a kubelet")
        self.kubelet.start(node)

    def add_node(
        self,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        cpu: str | int = "4",
        memory: str = "8Gi",
        gpus: int = 0,
        unschedulable: bool = False,
        ready: bool = True,
        taints: Iterable[Obj] = (),
    ) -> Obj:
        """Register a Node the way a kubelet does (status included: nodes keep it on create)."""
        now = _now()
        capacity = {"cpu": str(cpu), "memory": memory, "pods": "110"}
        if gpus:
            capacity["nvidia.com/gpu"] = str(gpus)
        spec: Obj = {}
        if unschedulable:
            spec["unschedulable"] = True
        if taints:
            spec["taints"] = [dict(t) for t in taints]
        node: Obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    **(labels or {}),
                },
                "annotations": dict(annotations or {}),
            },
            "spec": spec,
            "status": {
                "capacity": capacity,
                "allocatable": dict(capacity),
                "conditions": [
                    ready_condition(now)
                    if ready
                    else ready_condition(now, "False", "KubeletNotReady", "kubelet stopped")
                ],
                "addresses": [{"type": "Hostname", "address": name}],
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"boot.{name}")),
                    "containerRuntimeVersion": "containerd://2.0.0",
                    "kernelVersion": "6.1.0-sim",
                    "kubeProxyVersion": "v1.33.0-sim",
                    "kubeletVersion": "v1.33.0-sim",
                    "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, f"machine.{name}").hex,
                    "operatingSystem": "linux",
                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"system.{name}")),
                },
            },
        }
        return self.create(node)

    def add_pod(
        self,
        name: str,
        namespace: str = "default",
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        node_name: str | None = None,
        scheduler_name: str | None = None,
        phase: str = "Pending",
        ready: bool = False,
        finalizers: Iterable[str] = (),
        requests: Mapping[str, str] | None = None,
    ) -> Obj:
        """Create a one-container Pod, then set its status (create always resets it)."""
        container: Obj = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
        if requests:
            container["resources"] = {"requests": dict(requests), "limits": dict(requests)}
        spec: Obj = {"containers": [container]}
        if node_name:
            spec["nodeName"] = node_name
        if scheduler_name:
            spec["schedulerName"] = scheduler_name
        pod: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": dict(labels or {}),
                "annotations": dict(annotations or {}),
                "finalizers": list(finalizers),
            },
            "spec": spec,
        }
        created = self.create(pod)
        if phase == "Pending" and not ready:
            return created
        now = _now()
        status = {
            "phase": phase,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": now,
                }
            ],
        }
        return self.patch_merge("pods", name, {"status": status}, namespace, subresource="status")

    def cordon(self, name: str) -> Obj:
        """``kubectl cordon``: strategic-merge ``spec.unschedulable: true``."""
        return self.patch("nodes", name, {"spec": {"unschedulable": True}}, patch_type="strategic")

    def uncordon(self, name: str) -> Obj:
        """``kubectl uncordon``: strategic-merge ``spec.unschedulable: null``."""
        return self.patch("nodes", name, {"spec": {"unschedulable": None}}, patch_type="strategic")

    # watch control and faults -----------------------------------------------------------------
    def compact(self) -> None:
        """Drop the whole watch history: resuming from any older resourceVersion is a 410."""
        self._store.compact()

    def drop_watches(self, *, abort: bool = False) -> int:
        """End every open watch stream (``abort``: cut the connection instead); returns how many."""
        count = 0
        for watchers in self._store.watchers.values():
            for watcher in tuple(watchers):
                watcher.close(abort=abort)
                count += 1
            watchers.clear()
        return count

    def fail_next(
        self,
        n: int = 1,
        status: int = 500,
        *,
        verb: str | None = None,
        resource: str | None = None,
        message: str = "injected failure (KubeSim.fail_next)",
    ) -> None:
        """Answer the next ``n`` matching HTTP requests with a ``Status`` of code ``status``.

        ``verb`` (``get``, ``list``, ``watch``, ``patch`` …) and ``resource`` (``nodes``,
        ``pods/eviction`` …) narrow which requests fail; None matches any.
        """
        self._faults.append(_Fault(n, status, verb, resource, message))

    def clear_faults(self) -> None:
        """Forget the failures :meth:`fail_next` queued that have not happened yet."""
        self._faults.clear()

    def restart_window(
        self, seconds_503: float, seconds_429: float, *, restart: bool = True
    ) -> None:
        """Answer, from now on, as a kube-apiserver does in the seconds after it (re)started.

        For ``seconds_503``: every request to a custom resource, or to a path that would be a
        404, answers 503 "the request has been made before all known HTTP paths have been
        installed" (``Retry-After: 5``); built-in resources are served. Then for
        ``seconds_429``: every watch, and every list the watch cache must serve (one with a
        label or field selector, or without ``limit``), of any resource answers 429 "storage is
        (re)initializing" (``Retry-After`` from the downtime); gets, writes and paged lists
        without selectors (delegated to etcd) are served. See the module docstring for the
        sources. The real window lasted 5–10 s in all (Kubernetes 1.32, issue 17).

        ``restart`` also does what the restart itself does to clients: every open watch is
        cut, and the new watch cache has no history, so resuming from an older
        resourceVersion is 410 Expired (:meth:`compact`).
        """
        now = time.monotonic()
        self._restart = (now, now + seconds_503, now + seconds_503 + seconds_429)
        if restart:
            self.drop_watches(abort=True)
            self.compact()

    @property
    def starting(self) -> bool:
        """True while a :meth:`restart_window` lasts."""
        return self._restart is not None and time.monotonic() < self._restart[2]

    def _starting_fault(
        self, spec: ResourceSpec | None, verb: str, query: Mapping[str, str]
    ) -> ApiError | None:
        """The answer of a (re)starting API server to this request, or None (restart_window);
        ``spec`` None is a path that does not exist."""
        if self._restart is None:
            return None
        restarted, installed, ready = self._restart
        now = time.monotonic()
        if now >= ready:
            self._restart = None
            return None
        if now < installed:
            return _paths_not_installed() if spec is None or spec.custom else None
        if spec is None:
            return None
        delegated = (
            verb == "list"
            and _int_query(query.get("limit"), "limit") > 0
            and not query.get("labelSelector")
            and not query.get("fieldSelector")
        )
        if verb == "watch" or (verb == "list" and not delegated):
            return _storage_initializing(now - restarted)
        return None

    def _ns(self, spec: ResourceSpec, namespace: str | None) -> str | None:
        if not spec.namespaced:
            return None
        return namespace or "default"

    # HTTP ---------------------------------------------------------------------------------------
    def _chaos_fault(self, verb: str, resource: str) -> ApiError | None:
        if not self.chaos_rate or verb == "watch" or self.chaos_rng.random() >= self.chaos_rate:
            return None
        if resource == "pods/eviction":
            status, why = 429, "Cannot evict pod as it would violate the pod's disruption budget."
        elif verb in ("patch", "update"):
            status, why = 409, "the object has been modified; please apply your changes"
        else:
            status, why = 503, "injected by KubeSim.chaos_rate"
        self.chaos_injected[f"{status} {verb} {resource}"] += 1
        return ApiError(status, _REASONS.get(status, ""), why, {})

    def delay_next(
        self, n: int, seconds: float, *, verb: str | None = None, resource: str | None = None
    ) -> None:
        """Answer the next ``n`` matching requests ``seconds`` late (a slow API server or a
        slow, paged list); ``verb`` and ``resource`` narrow them as in :meth:`fail_next`."""
        self._delays.append(_Delay(n, seconds, verb, resource))

    def _take_delay(self, verb: str, resource: str) -> float:
        for delay in self._delays:
            if (delay.verb in (None, verb)) and (delay.resource in (None, resource)):
                delay.remaining -= 1
                if delay.remaining <= 0:
                    self._delays.remove(delay)
                return delay.seconds
        return 0.0

    def _take_fault(self, verb: str, resource: str) -> ApiError | None:
        for fault in self._faults:
            if (fault.verb in (None, verb)) and (fault.resource in (None, resource)):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                return ApiError(fault.status, _REASONS.get(fault.status, ""), fault.message, {})
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.user_agents[request.headers.get("User-Agent", "")] += 1
        try:
            self._authenticate(request)
            parts = [p for p in request.path.split("/") if p]
            if parts[:1] == ["openapi"]:
                return self._openapi(request, parts)
            discovery = self._discovery(request.method, parts)
            if discovery is not None:
                return discovery
            try:
                route = self._route(parts)
            except ApiError as err:
                if err.code == 404 and (fault := self._starting_fault(None, "", {})):
                    raise fault from err
                raise
            return await self._dispatch(request, route)
        except ApiError as err:
            return _error_response(err)
        except Exception as exc:
            log.exception("kube simulator: %s %s failed", request.method, request.path)
            return _error_response(
                ApiError(500, "InternalError", f"Internal error occurred: {exc}", {})
            )

    def _authenticate(self, request: web.Request) -> None:
        if not self.token or request.path in _PUBLIC_PATHS:
            return
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            raise ApiError(401, "Unauthorized", "Unauthorized")

    def _discovery(self, method: str, parts: builtins.list[str]) -> web.StreamResponse | None:
        if parts[:1] in (["api"], ["apis"]) and len(parts) <= 3 and parts[:2] != ["api", "v1"]:
            if method != "GET":
                raise _method_not_allowed()
        elif parts == ["api", "v1"] and method != "GET":
            raise _method_not_allowed()
        if not parts:
            return _json_response({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/version"]})
        if len(parts) == 1 and parts[0] in ("healthz", "livez", "readyz"):
            return web.Response(text="ok")
        if parts == ["version"]:
            return _json_response(
                {
                    "major": "1",
                    "minor": "33",
                    "gitVersion": "v1.33.0-slurmbridge-sim",
                    "platform": "linux/amd64",
                }
            )
        if parts == ["api"]:
            return _json_response(
                {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
            )
        if parts == ["apis"]:
            return _json_response(
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [self._group(g) for g in self._groups()],
                }
            )
        if len(parts) == 2 and parts[0] == "apis":
            if parts[1] not in self._groups():
                raise _path_not_found()
            return _json_response(self._group(parts[1]))
        if parts == ["api", "v1"]:
            return _json_response(self._resource_list("", "v1"))
        if len(parts) == 3 and parts[0] == "apis":
            if not any(self._served(s, parts[1], parts[2]) for s in self._store.specs.values()):
                raise _path_not_found()
            return _json_response(self._resource_list(parts[1], parts[2]))
        return None

    def _openapi_documents(self) -> dict[str, Obj]:
        """The v3 document of every served group version, keyed ``api/v1`` /
        ``apis/<group>/<version>`` as kube-openapi's handler3 keys them."""
        by_gv: dict[tuple[str, str], list[ResourceSpec]] = {}
        for spec in self._store.specs.values():
            for version in (spec.version, *spec.served_versions):
                by_gv.setdefault((spec.group, version), []).append(spec)
        return {
            (f"apis/{group}/{version}" if group else f"api/{version}"): (
                kubeopenapi.group_version_document(specs, group, version)
            )
            for (group, version), specs in by_gv.items()
        }

    def _openapi(self, request: web.Request, parts: builtins.list[str]) -> web.StreamResponse:
        """``/openapi/v2``, ``/openapi/v3`` and ``/openapi/v3/<gv>`` (kube-openapi pkg/handler
        and pkg/handler3): JSON only; an ``Accept`` that allows no JSON is 406, as there for
        a type it does not serve (the simulator has no protobuf encoding of the documents)."""
        if request.method != "GET":
            raise _method_not_allowed()
        documents = self._openapi_documents()
        if parts == ["openapi", "v3"]:
            return _json_response(kubeopenapi.v3_discovery(documents))
        if parts == ["openapi", "v2"]:
            doc = kubeopenapi.v2_document(documents)
        elif parts[:2] == ["openapi", "v3"] and "/".join(parts[2:]) in documents:
            doc = documents["/".join(parts[2:])]
            want = kubeopenapi.etag(doc)
            given = request.query.get("hash", "")
            if given and given != want:
                # handler3: a stale hash is redirected to the current document's URL.
                location = f"/openapi/v3/{'/'.join(parts[2:])}?hash={want}"
                return web.Response(status=301, headers={"Location": location})
        else:
            raise _path_not_found()
        if not _accepts_json(request.headers.get("Accept", "")):
            return web.Response(status=406)
        response = _json_response(doc)
        response.headers["Vary"] = "Accept"
        response.headers["Etag"] = f'"{kubeopenapi.etag(doc)}"'
        return response

    def _groups(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for spec in self._store.specs.values():
            if spec.group:
                out.setdefault(spec.group, spec.version)
        return out

    def _served(self, spec: ResourceSpec, group: str, version: str) -> bool:
        return spec.group == group and version in (spec.version, *spec.served_versions)

    def _group(self, group: str) -> Obj:
        """An APIGroup with every version some resource of the group is served at (two CRDs
        of one group may serve different versions: slinky.slurm.net's NodeSet v1beta1 and
        v1alpha1, Cluster v1alpha1), highest priority first (apimachinery
        ``version.CompareKubeAwareVersionStrings``: GA > beta > alpha, then the numbers), the
        first being the preferred one, as the aggregator orders them."""
        versions = {
            v
            for spec in self._store.specs.values()
            if spec.group == group
            for v in (spec.version, *spec.served_versions)
        }
        ordered = sorted(versions, key=_version_priority)
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in ordered]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": gvs,
            "preferredVersion": gvs[0],
        }

    def _resource_list(self, group: str, version: str) -> Obj:
        resources: ObjList = []
        for spec in self._store.specs.values():
            if not self._served(spec, group, version):
                continue
            base = {
                "singularName": spec.kind.lower(),
                "namespaced": spec.namespaced,
                "kind": spec.kind,
            }
            resources.append(
                {
                    "name": spec.plural,
                    **base,
                    "verbs": _MAIN_VERBS,
                    "shortNames": list(spec.short_names),
                    **({"categories": list(spec.categories)} if spec.categories else {}),
                }
            )
            if spec.status:
                resources.append({"name": f"{spec.plural}/status", **base, "verbs": _SUB_VERBS})
            if spec.scale is not None:
                resources.append(
                    {
                        "name": f"{spec.plural}/scale",
                        **base,
                        "kind": "Scale",
                        "group": "autoscaling",
                        "version": "v1",
                        "verbs": _SUB_VERBS,
                    }
                )
            if spec.name == "pods":
                resources.append(
                    {"name": "pods/binding", **base, "kind": "Binding", "verbs": ["create"]}
                )
                resources.append(
                    {
                        "name": "pods/eviction",
                        **base,
                        "kind": "Eviction",
                        "group": "policy",
                        "version": "v1",
                        "verbs": ["create"],
                    }
                )
        gv = f"{group}/{version}" if group else version
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": gv,
            "resources": resources,
        }

    def _route(self, parts: builtins.list[str]) -> _Route:
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 4 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _path_not_found()
        watch_path = bool(rest) and rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = self._store.by_gvr.get((group, version, rest[2]))
            if (candidate is not None and candidate.namespaced) or (
                group == "" and rest[2] == "bindings"
            ):
                namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _path_not_found()
        if namespace is not None and group == "" and rest[0] == "bindings":
            if len(rest) != 1:
                raise _path_not_found()
            return _Route(self._store.specs["pods"], namespace, None, "bindings", watch_path)
        spec = self._store.by_gvr.get((group, version, rest[0]))
        if spec is None:
            raise _path_not_found()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if spec.namespaced and namespace is None and name is not None:
            raise _path_not_found()
        allowed: set[str | None] = {None}
        if spec.status:
            allowed.add("status")
        if spec.scale is not None:
            allowed.add("scale")
        if spec.name == "pods":
            allowed |= {"binding", "eviction"}
        if sub not in allowed:
            raise _path_not_found()
        return _Route(spec, namespace, name, sub, watch_path, version)

    async def _dispatch(self, request: web.Request, route: _Route) -> web.StreamResponse:
        response = await self._dispatch_stored(request, route)
        target = route.api_version
        table = (
            kubetable.wants_table(request.headers.get("Accept", ""))
            if request.method == "GET" and route.subresource is None
            else None
        )
        if (target is None and table is None) or not isinstance(response, web.Response):
            return response
        if (
            response.body is None
            or response.status != 200
            or response.content_type != ("application/json")
        ):
            return response
        # conversion None: the object is the stored one with only apiVersion changed.
        payload = orjson.loads(bytes(response.body))  # type: ignore[arg-type]
        if target is not None:
            _to_version(
                payload, route.spec.api_version, target, route.spec.schemas.get(route.version)
            )
        if table is not None and payload.get("kind") not in ("Status", None):
            payload = self._table(route, payload, table, request.query.get("includeObject", ""))
        response.body = orjson.dumps(payload)
        return response

    def _table(self, route: _Route, payload: Obj, version: str, include_object: str) -> Obj:
        """``payload`` (a list or an object) as the Table the real server prints
        (:mod:`slurmbridge.devtools.sim.kubetable`)."""
        spec = route.spec
        columns: builtins.list[Obj]
        row: Callable[[Obj, datetime], builtins.list[Any]]
        if spec.name in kubetable.BUILTIN:
            columns, row = kubetable.BUILTIN[spec.name]
        elif spec.custom:
            printer = spec.printer_columns.get(route.version or spec.version, ())
            columns, row = kubetable.crd_columns(printer), kubetable.crd_row(printer)
        else:
            columns, row = kubetable.DEFAULT_COLUMNS, kubetable.default_row
        return kubetable.to_table(
            payload,
            columns=columns,
            row=row,
            version=version,
            include_object=include_object or "PartialObjectMetadata",
        )

    async def _dispatch_stored(self, request: web.Request, route: _Route) -> web.StreamResponse:
        method = request.method
        query = request.query
        spec, ns, name, sub = route.spec, route.namespace, route.name, route.subresource
        watch = route.watch_path or _parse_bool(query.get("watch"))
        if method == "GET":
            if name is None or (sub is None and watch):
                verb = "watch" if watch else "list"
            else:
                verb = "get"
        else:
            verb = {
                "POST": "create",
                "PUT": "update",
                "PATCH": "patch",
                "DELETE": "delete" if name else "deletecollection",
            }.get(method, "")
        if not verb or (route.watch_path and verb != "watch"):
            raise _method_not_allowed()
        label = (
            "pods/binding"
            if sub == "bindings"
            else (f"{spec.plural}/{sub}" if sub else spec.plural)
        )
        self.requests[(verb, label)] += 1
        delay = self._take_delay(verb, label)
        if delay:
            await asyncio.sleep(delay)
        fault = (
            self._starting_fault(spec, verb, query)
            or self._take_fault(verb, label)
            or self._chaos_fault(verb, label)
        )
        if fault is not None:
            raise fault
        store = self._store

        if verb == "watch":
            return await self._watch(request, route)
        if verb == "list":
            limit = _int_query(query.get("limit"), "limit")
            return _json_response(
                store.list(
                    spec,
                    ns,
                    labels=parse_label_selector(query.get("labelSelector", "")),
                    fields=parse_field_selector(spec, query.get("fieldSelector", "")),
                    limit=limit,
                    continue_token=query.get("continue", ""),
                )
            )
        if verb == "get":
            assert name is not None
            if sub == "scale":
                return _json_response(store.get_scale(spec, ns, name))
            return _json_response(store.get(spec, ns, name))

        body = await self._body(request, spec, verb)
        # Strict is enforced for custom resources (their schemas are known); Warn (the
        # default) sends no Warning headers here, and built-in kinds are not checked.
        store.field_validation = query.get("fieldValidation", "")
        try:
            return self._write(request, route, verb, body)
        finally:
            store.field_validation = ""

    def _write(
        self, request: web.Request, route: _Route, verb: str, body: Any
    ) -> web.StreamResponse:
        """The writes of :meth:`_dispatch_stored` (create, update, patch, delete)."""
        query = request.query
        spec, ns, name, sub = route.spec, route.namespace, route.name, route.subresource
        store = self._store
        if route.api_version is not None and isinstance(body, dict):
            # Written at a served version: stored at the storage version (conversion None).
            _to_version(body, route.api_version, spec.api_version)
        if verb == "create":
            if sub == "bindings":
                assert ns is not None
                return _json_response(store.bind(ns, None, body), 201)
            if name is None:
                if spec.namespaced and ns is None:
                    raise _method_not_allowed()
                return _json_response(store.create(spec, ns, body, version=route.version), 201)
            assert ns is not None
            if sub == "binding":
                return _json_response(store.bind(ns, name, body), 201)
            if sub == "eviction":
                return _json_response(store.evict(ns, name, body), 201)
            raise _method_not_allowed()
        if verb == "deletecollection":
            return self._delete_collection(route, body)
        assert name is not None
        if verb == "update":
            if sub == "scale":
                return _json_response(store.update_scale(spec, ns, name, body, "update"))
            return _json_response(
                store.update(spec, ns, name, body, subresource=sub, version=route.version)
            )
        if verb == "patch":
            content_type = request.content_type
            if sub == "scale":
                return _json_response(store.patch_scale(spec, ns, name, content_type, body))
            return _json_response(
                store.patch(
                    spec, ns, name, content_type, body, subresource=sub, version=route.version
                )
            )
        if sub is not None:
            raise _method_not_allowed()
        options = body if isinstance(body, dict) else {}
        if "gracePeriodSeconds" in query:
            grace = _int_query(query["gracePeriodSeconds"], "gracePeriodSeconds")
            options = {**options, "gracePeriodSeconds": grace}
        obj, removed = store.delete(spec, ns, name, options)
        if removed and not spec.return_deleted:
            meta = _meta(obj)
            return _json_response(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": _details(spec, name, uid=meta.get("uid")),
                }
            )
        return _json_response(obj)

    def _delete_collection(self, route: _Route, body: Any) -> web.StreamResponse:
        if route.subresource is not None:
            raise _method_not_allowed()
        spec, ns = route.spec, route.namespace
        listing = self._store.list(spec, ns)
        options = body if isinstance(body, dict) else {}
        deleted: ObjList = []
        for item in listing["items"]:
            meta = _meta(item)
            obj, _ = self._store.delete(
                spec, meta.get("namespace"), str(meta["name"]), options, verb="deletecollection"
            )
            deleted.append(obj)
        listing["items"] = deleted
        return _json_response(listing)

    async def _body(self, request: web.Request, spec: ResourceSpec, verb: str) -> Any:
        """The request's object, decoded by its ``Content-Type`` as the apiserver negotiates
        it (apiserver pkg/endpoints/handlers/negotiation ``NegotiateInputSerializer``: no
        type is the first supported one, JSON; an unsupported one is 415
        ``UnsupportedMediaType`` naming the accepted types). Built-in kinds take JSON, YAML
        and protobuf (:mod:`~slurmbridge.devtools.sim.kubeproto`: what kubectl's typed clients
        send); custom resources JSON and YAML (apiextensions-apiserver serves no protobuf).
        A patch's body is JSON whatever its patch type (the patch type is checked later)."""
        raw = await request.read()
        media = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if verb == "patch":
            media = _APPLY_PATCH if media == _APPLY_PATCH else "application/json"
        elif not media:
            media = "application/json"
        else:
            accepted = ["application/json", "application/yaml"]
            if not spec.custom:
                accepted.append(kubeproto.MEDIA_TYPE)
            if media not in accepted:
                raise _unsupported_media_type(accepted)
        if not raw.strip():
            return {}
        if media == kubeproto.MEDIA_TYPE:
            try:
                return kubeproto.decode(raw)
            except kubeproto.ProtobufError as exc:
                # A kind or field the simulator's table lacks: the real server would decode
                # it; say so rather than guess.
                log.warning("kube simulator: protobuf body not decoded: %s", exc)
                raise _unsupported_media_type(["application/json", "application/yaml"]) from exc
        if media in ("application/yaml", _APPLY_PATCH):
            try:
                return yaml.safe_load(raw)
            except yaml.YAMLError as exc:
                raise _bad_request(f"the body of the request is not valid YAML: {exc}") from exc
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise _bad_request(f"the body of the request is not valid JSON: {exc}") from exc

    async def _watch(self, request: web.Request, route: _Route) -> web.StreamResponse:
        store = self._store
        spec = route.spec
        query = request.query
        fields = parse_field_selector(spec, query.get("fieldSelector", ""))
        if route.name is not None:
            fields = (*fields, ("metadata.name", True, route.name))
        watcher: _Watcher | None = _Watcher(
            spec, route.namespace, parse_label_selector(query.get("labelSelector", "")), fields
        )
        assert watcher is not None
        timeout = _int_query(query.get("timeoutSeconds"), "timeoutSeconds") or None
        bookmarks = _parse_bool(query.get("allowWatchBookmarks"))
        send_initial = _parse_bool(query.get("sendInitialEvents"))
        rv_text = query.get("resourceVersion", "")
        initial: list[bytes] = []
        # Everything up to add_watcher runs without awaiting: snapshot and registration are atomic.
        if rv_text in ("", "0") or send_initial:
            initial = [
                _line("ADDED", o)
                for o in store.iter_objects(spec, route.namespace)
                if watcher.matches(o)
            ]
            if send_initial and bookmarks:
                initial.append(self._bookmark(spec, initial_end=True))
            watcher.start_rv = store.rv
            store.add_watcher(watcher)
        else:
            try:
                since = int(rv_text)
            except ValueError as exc:
                raise _bad_request(f"invalid resource version: {rv_text!r}") from exc
            if since < store.floor:
                err = _expired(f"too old resource version: {since} ({store.floor})")
                initial = [_line("ERROR", err.status())]
                watcher = None
            elif since > store.rv:
                err = ApiError(
                    504,
                    "Timeout",
                    f"Too large resource version: {since}, current: {store.rv}",
                    {
                        "causes": [
                            {
                                "reason": "ResourceVersionTooLarge",
                                "message": "Too large resource version",
                            }
                        ],
                        "retryAfterSeconds": 1,
                    },
                )
                initial = [_line("ERROR", err.status())]
                watcher = None
            else:
                watcher.start_rv = since
                for change in store.history:
                    if change.resource_version > since and change.resource is spec:
                        line = watcher.translate(change)
                        if line is not None:
                            initial.append(line)
                            watcher.start_rv = change.resource_version
                store.add_watcher(watcher)
        target = route.api_version
        table = kubetable.wants_table(request.headers.get("Accept", ""))
        convert: Callable[[bytes], bytes] | None = None
        if target is not None or table is not None:
            stored = spec.api_version
            headers = [True]

            def convert(line: bytes) -> bytes:
                if target is not None:
                    line = _line_to_version(line, stored, target, spec.schemas.get(route.version))
                if table is None:
                    return line
                # apiserver handlers/watch.go: with as=Table each event's object is a Table
                # of its one row; only the first event carries the column definitions.
                event = orjson.loads(line)
                obj = event.get("object") or {}
                if event.get("type") in ("ERROR", "BOOKMARK") or obj.get("kind") == "Status":
                    return line
                event["object"] = self._table(route, obj, table, query.get("includeObject", ""))
                if not headers[0]:
                    event["object"]["columnDefinitions"] = []
                headers[0] = False
                return orjson.dumps(event) + b"\n"

            initial = [convert(line) for line in initial]
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            await response.prepare(request)
            if initial:
                await response.write(b"".join(initial))
            if watcher is not None:
                aborted = await self._pump(request, response, watcher, timeout, bookmarks, convert)
                if aborted:
                    return response
            await response.write_eof()
        except ConnectionError:
            log.debug("watch client went away")
        finally:
            if watcher is not None:
                store.remove_watcher(watcher)
        return response

    def _bookmark(
        self, spec: ResourceSpec, *, initial_end: bool = False, rv: int | None = None
    ) -> bytes:
        version = self._store.rv if rv is None else rv
        meta: Obj = {"resourceVersion": str(version), "creationTimestamp": None}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return _line(
            "BOOKMARK", {"kind": spec.kind, "apiVersion": spec.api_version, "metadata": meta}
        )

    def _next_bookmark(self, now: float, deadline: float | None) -> float | None:
        """When the watch is next offered a bookmark: ``bookmark_interval`` from now, or 2 s
        before its deadline if sooner; None once that has passed (cache_watcher.go
        ``nextBookmarkTime``)."""
        at = now + self.bookmark_interval
        if deadline is not None:
            at = min(at, deadline - 2.0)
        return at if at > now else None

    def _due_bookmark(self, watcher: _Watcher) -> bytes | None:
        """The bookmark the watch cache would send this watch now: the kind's last
        resourceVersion, only when newer than the one the watch started from."""
        rv = self._store.resource_rv.get(watcher.spec.name, 0)
        if rv <= watcher.start_rv:
            return None
        self.bookmarks[watcher.spec.name] += 1
        return self._bookmark(watcher.spec, rv=rv)

    async def _pump(
        self,
        request: web.Request,
        response: web.StreamResponse,
        watcher: _Watcher,
        lifetime: float | None,
        bookmarks: bool,
        convert: Callable[[bytes], bytes] | None = None,
    ) -> bool:
        """Stream queued lines until ``lifetime`` ends or the watch is closed (each through
        ``convert`` when given: a watch at a non-storage version).

        Returns True when the connection was cut (client gone or ``drop_watches(abort=True)``).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + lifetime if lifetime else None
        next_bookmark = self._next_bookmark(loop.time(), deadline) if bookmarks else None
        while True:
            now = loop.time()
            if deadline is not None and now >= deadline:
                return False
            if next_bookmark is not None and now >= next_bookmark:
                if watcher.queue.empty():
                    line = self._due_bookmark(watcher)
                    if line is not None:
                        await response.write(convert(line) if convert else line)
                next_bookmark = self._next_bookmark(now, deadline)
            wait = 1.0  # wake up now and then to notice a client that went away
            if deadline is not None:
                wait = min(wait, deadline - now)
            if next_bookmark is not None:
                wait = min(wait, next_bookmark - now)
            try:
                item = await asyncio.wait_for(watcher.queue.get(), max(wait, 0.0))
            except TimeoutError:
                transport = request.transport
                if transport is None or transport.is_closing():
                    return True
                continue
            closed = item is None
            chunks = [] if item is None else [item]
            while not closed and not watcher.queue.empty():
                more = watcher.queue.get_nowait()
                if more is None:
                    closed = True
                else:
                    chunks.append(more)
            if chunks:
                if convert is not None:
                    chunks = [convert(c) for c in chunks]
                await response.write(b"".join(chunks))
            if closed:
                if watcher.abort and request.transport is not None:
                    request.transport.close()
                    return True
                return False


async def serve(
    host: str, port: int, *, nodes: int = 0, kubeconfig: str | Path | None = None
) -> None:
    """Run a simulator on ``host:port`` until cancelled (``slurmbridge sim kube``).

    ``nodes`` pre-registers Ready nodes ``n1`` … ``nN`` with 2 CPUs and 1000 MiB — the nodes
    ``slurmbridge sim slurmrestd --nodes N`` seeds, so the two standalone simulators pair
    as :class:`slurmbridge.devtools.testing.Simulators` pairs them; ``kubeconfig`` is written once
    the server listens. Simulated kubelets, the Job controller and the default scheduler
    run, so kubectl sees a cluster. Output goes through logging only.
    """
    from slurmbridge.devtools.sim.slurmd import DefaultScheduler  # imports this module

    # A cluster for kubectl: kubelets run bound pods, the Job controller makes Jobs' pods,
    # and default-scheduler pods are bound (slurmbridge binds its own schedulerName's).
    sim = KubeSim(kubelet=True, job_controller=True)
    for i in range(1, nodes + 1):
        sim.add_node(f"n{i}", cpu="2", memory="1000Mi")
    await sim.start(host, port)
    scheduler = DefaultScheduler(sim)
    scheduler.attach()
    try:
        if kubeconfig is not None:
            sim.write_kubeconfig(kubeconfig)
        log.info("kube simulator serving %s with %d nodes", sim.url, nodes)
        await asyncio.Event().wait()
    finally:
        scheduler.detach()
        await sim.stop()
