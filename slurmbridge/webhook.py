"""Admission webhook for pods (Slinky slurm-bridge's admission webhook), AdmissionReview v1.

``slurmbridge run --only webhook`` serves, over TLS only:

* ``POST /mutate`` — on pod CREATE in a managed namespace (``managedNamespaces`` or a
  tenant's, or a Namespace matching ``managedNamespaceSelector``), a pod that asks for the
  default scheduler (``spec.schedulerName`` empty or ``default-scheduler``) gets ours; a pod
  that ends up with our scheduler loses ``spec.nodeName`` (it would bypass Slurm). The answer
  is a JSONPatch.
* ``POST /validate`` — for pods with our scheduler: on CREATE, deny a user-set
  ``scheduler.slinky.slurm.net/slurm-jobid`` label or ``slinky.slurm.net/slurm-node``
  annotation (slurmbridge sets them) and ``spec.topologySpreadConstraints`` (Slurm places
  the pods; Kubernetes could not honour them); on UPDATE, deny a change of that label or
  annotation once the pod is bound or Running, unless slurmbridge's own service account
  makes it; deny ``pods/resize`` (Slurm allocated the resources). On CREATE and UPDATE, the
  DRA rules (:func:`dra_denial`, Slinky slurm-bridge admission): DRA extended resources and
  ``spec.resourceClaims`` are allowed for the device classes slurmbridge allocates from
  Slurm (``schemas.dra.SUPPORTED``); another class, native ``cpu`` beside ``dra.cpu``, the
  ``gres`` annotation beside a GPU class, ``cpu-per-task`` beside ``dra.cpu``, and one GPU
  class asked for by two containers are denied; so is a ``constraints`` annotation Slurm
  cannot AND with the ``slurm_bridge_gres_compatible`` feature every job requires
  (:func:`constraints_denial`, Slinky ``validateConstraintsAnnotation``). Each denial is 403
  with a message naming the field. Tenancy (:func:`tenancy_denial`, rules in
  :mod:`reconcilers._tenancy`): on CREATE and UPDATE, an annotation naming a Slurm user,
  group, account, QOS, partition or reservation the namespace's policy does not allow is
  denied, naming the annotation and the
  policy (each denial counts in ``slurmbridge_tenancy_denials_total{where="admission"}``).
  On CREATE and UPDATE the answer also carries ``warnings`` (never a denial;
  :func:`warnings`): a pod of ours, or any pod in a managed namespace, whose
  ``scheduling.x-k8s.io/pod-group`` label names a coscheduling PodGroup is told that support
  is deprecated and to use a Kubernetes Workload API PodGroup
  (``spec.schedulingGroup.podGroupName``) — Slinky slurm-bridge 1.3 admission.go
  ``podGroupDeprecationWarnings``, admission/podgroup_test.go.
* ``GET /healthz``.

Requests for anything but ``pods`` (a webhook configuration that also matches other
resources) are allowed untouched. The rules (:func:`mutate`, :func:`validate`) are pure
functions of the decoded request; the server only decodes, looks the Namespace's labels up
(cached) and encodes the answer. A body that is not an AdmissionReview is answered 400 with
the JSON path of the bad field (``$.request.uid: required``). The certificate is re-read when
its files change (checked on each TLS handshake), so cert-manager rotation needs no restart.
"""

from __future__ import annotations

import base64
import logging
import os
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import msgspec
import orjson
from aiohttp import web

from reconcilers import _constraint, _devprofile, _tenancy
from schemas import dra, wellknown
from schemas.events import KubeDeviceClass
from schemas.tenancy import Tenancy
from slurmbridge.config import ConfigError
from slurmbridge.kube.labelselector import selector_matches
from slurmbridge.observability import metrics
from slurmbridge.paths import path_message

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER: Final = "default-scheduler"
ADMISSION_API: Final = "admission.k8s.io/v1"

#: Labels of a Namespace by name (``{}`` for a namespace without labels or not found).
NamespaceLabels = Callable[[str], Awaitable[Mapping[str, str]]]
#: The device classes of one ``spec.resourceClaims`` entry: (namespace, resourceClaimName,
#: resourceClaimTemplateName) → the ``deviceClassName`` of each request; None when the
#: object cannot be read.
ClaimLookup = Callable[[str, str, str], Awaitable[tuple[str, ...] | None]]
#: Reads one DeviceClass by name (None: there is none).
ClassLookup = Callable[[str], Awaitable[KubeDeviceClass | None]]
#: Device class name → what it selects (``cpu``, ``gpu``, ``nic``) by its DeviceClass's device
#: profile, or ``""`` when its DeviceClass matches no profile.
ClassKinds = Mapping[str, str]


class WebhookError(ValueError):
    """An AdmissionReview that cannot be handled; the message names the field."""


# --- the request, decoded once ----------------------------------------------------------------


class _Owner(msgspec.Struct, frozen=True):
    kind: str = ""
    controller: bool | None = None


class _Meta(msgspec.Struct, frozen=True):
    name: str = ""
    generateName: str = ""  # noqa: N815 - Kubernetes field name
    namespace: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[_Owner] | None = None  # noqa: N815


class _Resources(msgspec.Struct, frozen=True):
    requests: dict[str, str] | None = None
    limits: dict[str, str] | None = None


class _Container(msgspec.Struct, frozen=True):
    name: str = ""
    resources: _Resources = _Resources()


class _PodClaim(msgspec.Struct, frozen=True):
    name: str = ""
    resourceClaimName: str | None = None  # noqa: N815
    resourceClaimTemplateName: str | None = None  # noqa: N815


class _Spec(msgspec.Struct, frozen=True):
    schedulerName: str = ""  # noqa: N815
    nodeName: str = ""  # noqa: N815
    resourceClaims: list[_PodClaim] | None = None  # noqa: N815
    topologySpreadConstraints: list[msgspec.Raw] | None = None  # noqa: N815
    containers: list[_Container] | None = None
    initContainers: list[_Container] | None = None  # noqa: N815
    resources: _Resources | None = None


class _Status(msgspec.Struct, frozen=True):
    phase: str = ""


class Pod(msgspec.Struct, frozen=True):
    """The fields of a Pod the rules read."""

    metadata: _Meta = _Meta()
    spec: _Spec = _Spec()
    status: _Status = _Status()


class _Resource(msgspec.Struct, frozen=True):
    group: str = ""
    version: str = ""
    resource: str = ""


class _Kind(msgspec.Struct, frozen=True):
    group: str = ""
    version: str = ""
    kind: str = ""


class _UserInfo(msgspec.Struct, frozen=True):
    username: str = ""


class Request(msgspec.Struct, frozen=True):
    """``AdmissionReview.request``: ``operation`` CREATE | UPDATE | DELETE | CONNECT.

    ``object`` / ``oldObject`` are decoded as :class:`Pod` only when ``resource`` is core
    ``pods`` (:attr:`is_pod`); for any other resource they stay None.
    """

    uid: str
    operation: str
    kind: _Kind = _Kind()
    resource: _Resource = _Resource()
    subResource: str = ""  # noqa: N815
    namespace: str = ""
    name: str = ""
    userInfo: _UserInfo = _UserInfo()  # noqa: N815
    object: Pod | None = None
    oldObject: Pod | None = None  # noqa: N815

    @property
    def is_pod(self) -> bool:
        """The request is about a core/v1 Pod (or one of its subresources)."""
        return self.resource.group == "" and self.resource.resource == "pods"


class _WireRequest(msgspec.Struct, frozen=True):
    uid: str
    operation: str
    kind: _Kind = _Kind()
    resource: _Resource = _Resource()
    subResource: str = ""  # noqa: N815
    namespace: str = ""
    name: str = ""
    userInfo: _UserInfo = _UserInfo()  # noqa: N815
    object: msgspec.Raw = msgspec.Raw()
    oldObject: msgspec.Raw = msgspec.Raw()  # noqa: N815


class _Review(msgspec.Struct, frozen=True):
    apiVersion: str = ""  # noqa: N815
    kind: str = ""
    request: _WireRequest | None = None


_REVIEW = msgspec.json.Decoder(_Review)
_POD = msgspec.json.Decoder(Pod)


def _pod(raw: msgspec.Raw, path: str) -> Pod | None:
    if not raw or bytes(raw) == b"null":
        return None
    try:
        return _POD.decode(raw)
    except msgspec.ValidationError as exc:
        raise WebhookError(path_message(str(exc), path)) from None


def decode_review(body: bytes) -> Request:
    """Decode an AdmissionReview v1 body into its request.

    Raises:
        WebhookError: not JSON, not an ``admission.k8s.io/v1`` AdmissionReview, no
            ``request``, or a field of the wrong type — the message starts with the JSON
            path of the field (``$.request.object.spec.nodeName: Expected `str`, got `int```).
    """
    try:
        review = _REVIEW.decode(body)
    except msgspec.ValidationError as exc:
        raise WebhookError(path_message(str(exc), "$")) from None
    except msgspec.DecodeError as exc:
        raise WebhookError(f"$: not JSON: {exc}") from None
    if review.apiVersion != ADMISSION_API or review.kind != "AdmissionReview":
        raise WebhookError(
            f"$.apiVersion/kind: expected {ADMISSION_API} AdmissionReview, "
            f"got {review.apiVersion or '-'} {review.kind or '-'}"
        )
    w = review.request
    if w is None:
        raise WebhookError("$.request: required")
    req = Request(
        uid=w.uid,
        operation=w.operation,
        kind=w.kind,
        resource=w.resource,
        subResource=w.subResource,
        namespace=w.namespace,
        name=w.name,
        userInfo=w.userInfo,
    )
    if not req.is_pod:
        return req
    return msgspec.structs.replace(
        req,
        object=_pod(w.object, "$.request.object"),
        oldObject=_pod(w.oldObject, "$.request.oldObject"),
    )


# --- rules (pure) --------------------------------------------------------------------------


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """What the rules need from the settings.

    ``managed_namespaces``: names; ``managed_namespace_selector``: a Kubernetes
    LabelSelector (``matchLabels`` / ``matchExpressions``) over Namespace labels;
    ``service_account``: the username slurmbridge's own requests carry; ``tenancy``: the
    tenancy policy (a tenant's namespaces are managed too; :func:`tenancy_denial`).
    """

    scheduler_name: str = wellknown.DEFAULT_SCHEDULER_NAME
    managed_namespaces: frozenset[str] = frozenset()
    managed_namespace_selector: dict[str, Any] | None = None
    service_account: str = ""
    tenancy: Tenancy = Tenancy()


def managed(policy: Policy, namespace: str, ns_labels: Mapping[str, str]) -> bool:
    """Is ``namespace`` managed: listed (or a tenant's), or its labels match the selector."""
    if namespace in policy.managed_namespaces or namespace in policy.tenancy.namespaces:
        return True
    selector = policy.managed_namespace_selector
    return selector is not None and selector_matches(selector, ns_labels)


def slurmd_pod(pod: Pod) -> bool:
    """A NodeSet's slurmd pod (its controller is a ``NodeSet``, or it is labelled
    ``app.kubernetes.io/name: slurmd``), as :func:`reconcilers._tenancy.slurmd_pod`."""
    owners = pod.metadata.ownerReferences or []
    if any(o.kind == "NodeSet" and o.controller for o in owners):
        return True
    return (pod.metadata.labels or {}).get("app.kubernetes.io/name") == "slurmd"


def mutate(req: Request, policy: Policy, ns_labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The JSONPatch for a pod CREATE (``[]``: nothing to change)."""
    pod = req.object
    if not req.is_pod or req.operation != "CREATE" or pod is None or req.subResource:
        return []
    namespace = req.namespace or pod.metadata.namespace
    if slurmd_pod(pod):
        # A NodeSet's slurmd pod is a Slurm node: never placed through a Slurm job, so it
        # never gets our scheduler (it would stay Pending).
        return []
    ops: list[dict[str, Any]] = []
    scheduler = pod.spec.schedulerName
    if scheduler in ("", DEFAULT_SCHEDULER) and managed(policy, namespace, ns_labels):
        ops.append({"op": "add", "path": "/spec/schedulerName", "value": policy.scheduler_name})
        scheduler = policy.scheduler_name
    if scheduler == policy.scheduler_name and pod.spec.nodeName:
        ops.append({"op": "remove", "path": "/spec/nodeName"})
    return ops


def _ours(pod: Pod | None, policy: Policy) -> bool:
    return pod is not None and pod.spec.schedulerName == policy.scheduler_name


_LABEL_FIELD: Final = f"metadata.labels[{wellknown.LABEL_SLURM_JOBID}]"
_ANNOTATION_FIELD: Final = f"metadata.annotations[{wellknown.ANNOTATION_SLURM_NODE}]"


#: Device classes by ``spec.resourceClaims[].name``: what each claim (or template) asks for.
ClaimClasses = Mapping[str, tuple[str, ...]]


def _set(resources: _Resources, name: str) -> bool:
    return name in (resources.requests or {}) or name in (resources.limits or {})


def _positive(value: str) -> bool:
    text = value.strip()
    return bool(text) and text.lstrip("+0.") != "" and not text.startswith("-")


def class_kind(cls: str, class_kinds: ClassKinds | None) -> str | None:
    """What a device class selects: its DeviceClass's device profile (``class_kinds``, read
    by the server; any class name works, Slinky slurm-bridge 1.3 ``internal/dra``), else the
    class-name rule of ``schemas.dra.SUPPORTED``; None when neither says."""
    kind = (class_kinds or {}).get(cls)
    return kind or dra.SUPPORTED.get(cls)


def _unsupported(where: str, cls: str, class_kinds: ClassKinds | None) -> str:
    why = (
        "its DeviceClass's selector is not exactly one of the device profiles' "
        f"({', '.join(p.name for p in _devprofile.PROFILES)})"
        if (class_kinds or {}).get(cls) == ""
        else "no DeviceClass of that name selects a supported device profile"
    )
    return (
        f"{where}device class {cls!r} is not supported for pods scheduled by Slurm: {why} "
        f"(or a class named {', '.join(sorted(dra.SUPPORTED))})"
    )


class _DraUse(msgspec.Struct):
    """What a pod's DRA requests add up to, as :func:`dra_denial` scans them: a CPU class
    asked for, the GPU classes asked for, and which container first requested each GPU
    class (``requests`` above zero)."""

    cpu: bool = False
    gpu_classes: set[str] = msgspec.field(default_factory=set)
    requested_by: dict[str, str] = msgspec.field(default_factory=dict)


def _resource_denial(
    use: _DraUse,
    field: str,
    container: str,
    source: str,
    name: str,
    value: str,
    class_kinds: ClassKinds | None,
) -> str | None:
    """One ``resources.<source>[<name>]`` entry of one container (``field``: its path)."""
    cls = dra.device_class_of(name)
    if cls is None:
        return None
    what = class_kind(cls, class_kinds)
    if what not in ("cpu", "gpu"):
        return _unsupported(f"{field}: ", cls, class_kinds)
    if what == "cpu":
        use.cpu = True
        return None
    use.gpu_classes.add(cls)
    if source != "requests" or not _positive(value):
        return None
    other = use.requested_by.setdefault(cls, container)
    if other != container:
        return (
            f"{field}: device class {cls!r} is also requested by container "
            f"{other!r}; one container per device class is supported"
        )
    return None


def _container_denial(
    use: _DraUse, kind: str, c: _Container, class_kinds: ClassKinds | None
) -> str | None:
    """The extended resources of one container (``kind``: ``containers`` or
    ``initContainers``), requests before limits, each by name."""
    res = c.resources
    for source, values in (("requests", res.requests), ("limits", res.limits)):
        for name, value in sorted((values or {}).items()):
            field = f"spec.{kind}[{c.name}].resources.{source}[{name}]"
            denied = _resource_denial(use, field, c.name, source, name, value, class_kinds)
            if denied is not None:
                return denied
    return None


def _claims_denial(
    use: _DraUse, pod: Pod, claim_classes: ClaimClasses | None, class_kinds: ClassKinds | None
) -> str | None:
    """``spec.resourceClaims``: the classes the server read for each entry."""
    for i, pc in enumerate(pod.spec.resourceClaims or []):
        for cls in (claim_classes or {}).get(pc.name, ()):
            what = class_kind(cls, class_kinds)
            if what not in ("cpu", "gpu"):
                return _unsupported(f"spec.resourceClaims[{i}] ({pc.name}): ", cls, class_kinds)
            if what == "gpu":
                use.gpu_classes.add(cls)
            else:
                use.cpu = True
    return None


def _conflicts_denial(pod: Pod, use: _DraUse, native_cpu: bool) -> str | None:
    """Native ``cpu`` beside the CPU class; the ``gres`` annotation beside a GPU class;
    ``cpu-per-task`` beside the CPU class."""
    cpu_resource = dra.DEVICE_CLASS_PREFIX + dra.CPU_CLASS
    if native_cpu and use.cpu:
        return (
            f"resources[cpu]: cannot be set together with the CPU DRA resource {cpu_resource} "
            "(Slurm's CPUs become the DRA devices)"
        )
    annotations = pod.metadata.annotations or {}
    gres = wellknown.ANNOTATION_SLURMJOB_PREFIX + "gres"
    if gres in annotations and use.gpu_classes:
        return (
            f"metadata.annotations[{gres}]: conflicts with DRA device class "
            f"{min(use.gpu_classes)!r}: explicit DRA requests size the Slurm job"
        )
    per_task = wellknown.ANNOTATION_SLURMJOB_PREFIX + "cpu-per-task"
    if per_task in annotations and use.cpu:
        return (
            f"metadata.annotations[{per_task}]: conflicts with the CPU DRA resource "
            f"{cpu_resource}: explicit DRA requests size the Slurm job"
        )
    return None


def dra_denial(
    pod: Pod, claim_classes: ClaimClasses | None = None, class_kinds: ClassKinds | None = None
) -> str | None:
    """The DRA rules of a pod of ours (Slinky slurm-bridge ``internal/admission``:
    ``validateCPUResources``, ``validateDRADeviceClasses``, ``validateAnnotationConflicts``;
    ``dra.go`` ``validateDeviceClassRequests``), or None when they hold.

    ``claim_classes``: the device classes of the pod's ``spec.resourceClaims`` (by entry
    name) as the server read them from the claims and templates; a name it lacks (not
    readable) is not checked here — placement refuses an unsupported class again.
    ``class_kinds``: the kinds of the DeviceClasses the server could read
    (:func:`class_kind`). Slinky denies ``spec.resourceClaims`` outright; slurmbridge
    allocates them from Slurm.

    Order of the checks (the first denial wins): each container's extended resources
    (init containers first), then ``spec.resourceClaims``, then the conflicts.
    """
    containers = [
        *(("initContainers", c) for c in pod.spec.initContainers or []),
        *(("containers", c) for c in pod.spec.containers or []),
    ]
    native_cpu = pod.spec.resources is not None and _set(pod.spec.resources, "cpu")
    use = _DraUse()
    for kind, c in containers:
        native_cpu = native_cpu or _set(c.resources, "cpu")
        denied = _container_denial(use, kind, c, class_kinds)
        if denied is not None:
            return denied
    return _claims_denial(use, pod, claim_classes, class_kinds) or _conflicts_denial(
        pod, use, native_cpu
    )


def constraints_denial(pod: Pod) -> str | None:
    """The pod's ``slurmjob.slinky.slurm.net/constraints`` annotation when Slurm cannot AND it
    with ``slurm_bridge_gres_compatible``, which every job requires (Slinky slurm-bridge 1.3
    admission.go ``validateConstraintsAnnotation``; :func:`reconcilers._constraint.compose`),
    so the pod fails at creation rather than staying Pending. An annotation on a Job, JobSet
    or PodGroup is not seen here; placement refuses it there."""
    key = wellknown.ANNOTATION_SLURMJOB_PREFIX + "constraints"
    raw = (pod.metadata.annotations or {}).get(key)
    if raw is None:
        return None
    try:
        _constraint.compose(wellknown.FEATURE_GRES_COMPATIBLE, raw)
    except _constraint.ConstraintError as exc:
        return f"metadata.annotations[{key}]: {exc}"
    return None


def tenancy_denial(policy: Policy, namespace: str, pod: Pod) -> _tenancy.Denial | None:
    """The tenancy rules (:mod:`reconcilers._tenancy`) on a pod of ours' own
    ``slurmjob.slinky.slurm.net/*`` annotations: a user, group, account, QOS, partition or
    reservation its namespace may not use. (Annotations on a Job, JobSet or PodGroup are not
    seen here — the webhook is for pods — and placement checks them again before any job.)"""
    return _tenancy.check(policy.tenancy, namespace, pod.metadata.annotations or {})


class _Admission(msgspec.Struct, frozen=True):
    """One pod request of ours, as the per-field checks of :func:`validate` read it: ``pod``
    is ``req.object`` (set), ``old`` is ``req.oldObject`` (set on UPDATE)."""

    req: Request
    policy: Policy
    pod: Pod
    old: Pod | None
    claim_classes: ClaimClasses | None
    class_kinds: ClassKinds | None

    @property
    def bound(self) -> bool:
        """The old pod is bound to a node or Running: its Slurm identity is fixed."""
        return self.old is not None and bool(
            self.old.spec.nodeName or self.old.status.phase == "Running"
        )


#: One check of :func:`validate`: the denial message naming its field, or None.
_Check = Callable[[_Admission], str | None]


def _jobid_label_set(a: _Admission) -> str | None:
    """``metadata.labels[scheduler.slinky.slurm.net/slurm-jobid]`` on CREATE."""
    if wellknown.LABEL_SLURM_JOBID in (a.pod.metadata.labels or {}):
        return f"{_LABEL_FIELD}: set by slurm-bridge; must not be set by users"
    return None


def _node_annotation_set(a: _Admission) -> str | None:
    """``metadata.annotations[slinky.slurm.net/slurm-node]`` on CREATE."""
    if wellknown.ANNOTATION_SLURM_NODE in (a.pod.metadata.annotations or {}):
        return f"{_ANNOTATION_FIELD}: set by slurm-bridge; must not be set by users"
    return None


def _topology_spread(a: _Admission) -> str | None:
    """``spec.topologySpreadConstraints`` on CREATE (Slurm chooses the nodes)."""
    if a.pod.spec.topologySpreadConstraints:
        return (
            "spec.topologySpreadConstraints: not supported for pods scheduled by Slurm "
            "(Slurm chooses the nodes)"
        )
    return None


def _tenancy_annotations(a: _Admission) -> str | None:
    """``metadata.annotations[slurmjob.slinky.slurm.net/*]``: :func:`tenancy_denial`."""
    denial = tenancy_denial(a.policy, a.req.namespace or a.pod.metadata.namespace, a.pod)
    return None if denial is None else denial.message


def _constraints(a: _Admission) -> str | None:
    """``metadata.annotations[slurmjob.slinky.slurm.net/constraints]``:
    :func:`constraints_denial`."""
    return constraints_denial(a.pod)


def _dra(a: _Admission) -> str | None:
    """``spec.*containers[].resources``, ``spec.resourceClaims`` and the annotations that
    conflict with them: :func:`dra_denial`."""
    return dra_denial(a.pod, a.claim_classes, a.class_kinds)


def _jobid_label_changed(a: _Admission) -> str | None:
    """``metadata.labels[scheduler.slinky.slurm.net/slurm-jobid]`` changed on UPDATE of a
    bound or Running pod."""
    key = wellknown.LABEL_SLURM_JOBID
    old = (a.old.metadata.labels or {}) if a.old is not None else {}
    if a.bound and (a.pod.metadata.labels or {}).get(key) != old.get(key):
        return f"{_LABEL_FIELD}: cannot change on a pod that is bound or running"
    return None


def _node_annotation_changed(a: _Admission) -> str | None:
    """``metadata.annotations[slinky.slurm.net/slurm-node]`` changed on UPDATE of a bound or
    Running pod."""
    key = wellknown.ANNOTATION_SLURM_NODE
    old = (a.old.metadata.annotations or {}) if a.old is not None else {}
    if a.bound and (a.pod.metadata.annotations or {}).get(key) != old.get(key):
        return f"{_ANNOTATION_FIELD}: cannot change on a pod that is bound or running"
    return None


#: The checks of a pod CREATE, in the order their denials win.
_ON_CREATE: Final[tuple[_Check, ...]] = (
    _jobid_label_set,
    _node_annotation_set,
    _topology_spread,
    _tenancy_annotations,
    _constraints,
    _dra,
)
#: The checks of a pod UPDATE not made by slurmbridge itself, in the order their denials win.
_ON_UPDATE: Final[tuple[_Check, ...]] = (
    _tenancy_annotations,
    _constraints,
    _dra,
    _jobid_label_changed,
    _node_annotation_changed,
)


def _resize_denial(req: Request, policy: Policy) -> str | None:
    """``pods/resize`` of a pod of ours (before or after): Slurm allocated the resources."""
    if _ours(req.oldObject, policy) or _ours(req.object, policy):
        return (
            "pods/resize: the resources of a pod scheduled by Slurm are its Slurm job's "
            "allocation and cannot change in place"
        )
    return None


def _checks(req: Request, policy: Policy) -> tuple[_Check, ...]:
    """The checks for a pod request of ours: CREATE's; UPDATE's (with an old object) unless
    slurmbridge's own service account makes it; none for anything else."""
    if req.operation == "CREATE":
        return _ON_CREATE
    if req.operation != "UPDATE" or req.oldObject is None:
        return ()
    if policy.service_account and req.userInfo.username == policy.service_account:
        return ()
    return _ON_UPDATE


def validate(
    req: Request,
    policy: Policy,
    claim_classes: ClaimClasses | None = None,
    class_kinds: ClassKinds | None = None,
) -> str | None:
    """The denial message for a pod request, or None to allow it (also for non-pods);
    ``claim_classes``, ``class_kinds``: see :func:`dra_denial`.

    The rules are one list of named per-field checks per operation (``_ON_CREATE``,
    ``_ON_UPDATE``), run in order; the first denial is the answer."""
    if not req.is_pod:
        return None
    if req.subResource:
        return _resize_denial(req, policy) if req.subResource == "resize" else None
    pod = req.object
    if pod is None or not _ours(pod, policy):
        return None
    a = _Admission(req, policy, pod, req.oldObject, claim_classes, class_kinds)
    for check in _checks(req, policy):
        denied = check(a)
        if denied is not None:
            return denied
    return None


#: The coscheduling PodGroup label (scheduler-plugins ``scheduling.x-k8s.io/v1alpha1``).
LABEL_COSCHEDULING_POD_GROUP: Final = "scheduling.x-k8s.io/pod-group"
#: The warning for a pod naming a coscheduling PodGroup (our words; the facts of Slinky
#: slurm-bridge 1.3 admission.go: deprecated, to be removed, use the native PodGroup).
POD_GROUP_DEPRECATED: Final = (
    "scheduling.x-k8s.io/v1alpha1 PodGroups support is deprecated in slurm-bridge and will be "
    "removed in a future release: use Kubernetes native PodGroups (scheduling.k8s.io) with "
    "the pod's spec.schedulingGroup.podGroupName instead of the label "
    f"{LABEL_COSCHEDULING_POD_GROUP}"
)


def warns_about(pod: Pod | None) -> bool:
    """``pod`` names a coscheduling PodGroup (its label is set and not empty)."""
    return pod is not None and bool((pod.metadata.labels or {}).get(LABEL_COSCHEDULING_POD_GROUP))


def warnings(req: Request, policy: Policy, ns_labels: Mapping[str, str]) -> list[str]:
    """The admission warnings for a pod request (``[]`` for none; never a denial).

    Slinky slurm-bridge 1.3 (admission/podgroup_test.go
    ``TestPodAdmission_PodGroupDeprecation``): on CREATE and UPDATE of a pod that carries a
    non-empty ``scheduling.x-k8s.io/pod-group`` label — also when a Workload API scheduling
    group is set beside it — and is ours (its ``schedulerName``) or lives in a managed
    namespace (``ns_labels``: its Namespace's labels, for the selector), one deprecation
    warning. An UPDATE removing the label, a DELETE, a subresource and other pods: none.
    """
    pod = req.object
    if not req.is_pod or req.subResource or req.operation not in ("CREATE", "UPDATE"):
        return []
    if not warns_about(pod):
        return []
    assert pod is not None
    namespace = req.namespace or pod.metadata.namespace
    if not (_ours(pod, policy) or managed(policy, namespace, ns_labels)):
        return []
    return [POD_GROUP_DEPRECATED]


def response(
    uid: str,
    *,
    denied: str | None = None,
    patch: Sequence[Any] = (),
    warnings: Sequence[str] = (),
) -> bytes:
    """An AdmissionReview v1 answer (allowed, with an optional JSONPatch, or 403 denied),
    with ``response.warnings`` when there are any (the API server relays them to the client
    as ``Warning`` headers)."""
    resp: dict[str, Any] = {"uid": uid, "allowed": denied is None}
    if warnings:
        resp["warnings"] = list(warnings)
    if denied is not None:
        resp["status"] = {"code": 403, "reason": "Forbidden", "message": denied}
    elif patch:
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(orjson.dumps(list(patch))).decode()
    return orjson.dumps({"apiVersion": ADMISSION_API, "kind": "AdmissionReview", "response": resp})


# --- the server ------------------------------------------------------------------------------


class CachedNamespaceLabels:
    """Namespace labels through ``read`` (e.g. ``CoreV1Api.read_namespace``), cached for
    ``ttl`` seconds: admission requests come in bursts for one namespace (a Job's pods), and
    30 s is how long a relabelled namespace may keep its old answer. A failed read counts as
    no labels and is not cached (the pod is then not mutated: fail open for mutation, as
    ``failurePolicy: Ignore`` would). ``clock``: seconds, monotonic (tests pass their own)."""

    def __init__(
        self,
        read: NamespaceLabels,
        *,
        ttl: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.read = read
        self.ttl = ttl
        self.clock = clock
        self._cache: dict[str, tuple[float, Mapping[str, str]]] = {}

    async def __call__(self, name: str) -> Mapping[str, str]:
        now = self.clock()
        hit = self._cache.get(name)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        try:
            labels = await self.read(name)
        except Exception as exc:  # noqa: BLE001 - any API failure: treat as unlabelled
            log.warning("webhook: cannot read namespace %s: %s", name, exc)
            return {}
        self._cache[name] = (now, labels)
        return labels


async def _no_labels(_: str) -> Mapping[str, str]:
    return {}


class ReloadingTLS:
    """The server's TLS context, re-read when the certificate or key file changes.

    :attr:`context` is the listening context; its SNI callback (which OpenSSL runs on every
    handshake, with or without SNI) compares the files' stat stamps with the loaded ones and
    hands the handshake a freshly loaded context when they differ. A rotation caught half
    way (new certificate, old key) fails to load: the previous context stays in use and the
    next handshake tries again. Existing connections keep their context.

    Raises (from the constructor):
        ConfigError: ``cert_file`` or ``key_file`` not set (``$.webhook.certFile``).
        OSError / ssl.SSLError: unreadable files, or a key that does not match.
    """

    def __init__(self, cert_file: str | None, key_file: str | None) -> None:
        if not cert_file or not key_file:
            which = "certFile" if not cert_file else "keyFile"
            raise ConfigError(
                f"$.webhook.{which}: required — the admission webhook serves TLS only "
                "(set $.webhook.certFile and $.webhook.keyFile; the API server calls webhooks "
                "over HTTPS)"
            )
        self.cert_file = cert_file
        self.key_file = key_file
        self.reloads = 0
        self._stamp = self._stat()
        self.context = self._load()
        self.context.sni_callback = self._on_hello
        self._current = self.context

    def _stat(self) -> tuple[tuple[int, int, int], ...]:
        stats = (os.stat(self.cert_file), os.stat(self.key_file))
        return tuple((st.st_ino, st.st_size, st.st_mtime_ns) for st in stats)

    def _load(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def current(self) -> ssl.SSLContext:
        """The context for a new connection, re-loaded first if the files changed."""
        try:
            stamp = self._stat()
        except OSError as exc:
            log.warning("webhook: keeping the loaded certificate: %s", exc)
            return self._current
        if stamp != self._stamp:
            try:
                fresh = self._load()
            except (OSError, ssl.SSLError) as exc:
                log.warning("webhook: keeping the loaded certificate: %s", exc)
                return self._current
            self._stamp, self._current = stamp, fresh
            self.reloads += 1
            log.info("webhook: certificate %s re-loaded", self.cert_file)
        return self._current

    def _on_hello(self, conn: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
        del server_name
        try:
            ctx = self.current()
            if ctx is not self.context:
                conn.context = ctx
        except Exception:  # a failure here would abort the handshake; the old cert still works
            log.exception("webhook: certificate reload failed")


class WebhookServer:
    """Serves ``/mutate``, ``/validate`` and ``/healthz`` over TLS on ``bind:port``.

    ``cert_file`` / ``key_file``: PEM server certificate (with its chain) and key; loaded at
    start and re-loaded when they change (:class:`ReloadingTLS`). ``namespace_labels``: how
    to learn a Namespace's labels (asked only with a ``managed_namespace_selector``; default:
    no labels). ``claim_lookup``: how to read the device classes of a pod's ResourceClaims
    and ResourceClaimTemplates (default: not read; the DRA rules then check the pod's
    extended resources only). ``class_lookup``: how to read a DeviceClass (default: not
    read; a class is then known by its name only). :attr:`port` is the bound port (``port``
    0 picks a free one).

    Raises (from :meth:`start`):
        ConfigError: no certificate or no key (the webhook is TLS only); names
            ``$.webhook.certFile`` or ``$.webhook.keyFile``.
        OSError / ssl.SSLError: unreadable or invalid certificate, or the port is taken.
    """

    def __init__(
        self,
        policy: Policy,
        *,
        bind: str,
        port: int,
        cert_file: str | None,
        key_file: str | None,
        namespace_labels: NamespaceLabels | None = None,
        claim_lookup: ClaimLookup | None = None,
        class_lookup: ClassLookup | None = None,
    ) -> None:
        self.policy = policy
        self.claim_lookup = claim_lookup
        self.class_lookup = class_lookup
        self.bind = bind
        self.port = port
        self.cert_file = cert_file
        self.key_file = key_file
        self.namespace_labels = namespace_labels or _no_labels
        self.tls: ReloadingTLS | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Listen (see the class docstring for errors)."""
        self.tls = ReloadingTLS(self.cert_file, self.key_file)
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.add_routes(
            [
                web.post("/mutate", self._mutate),
                web.post("/validate", self._validate),
                web.get("/healthz", self._healthz),
            ]
        )
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.bind, self.port, ssl_context=self.tls.context)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        log.info("admission webhook listening on https://%s:%d", self.bind, self.port)

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def _decode(self, request: web.Request) -> Request | web.Response:
        try:
            return decode_review(await request.read())
        except WebhookError as exc:
            return web.Response(status=400, text=f"{exc}\n")

    async def _mutate(self, request: web.Request) -> web.Response:
        req = await self._decode(request)
        if isinstance(req, web.Response):
            return req
        ns = req.namespace or (req.object.metadata.namespace if req.object else "")
        labels: Mapping[str, str] = {}
        asks = req.is_pod and req.operation == "CREATE" and not req.subResource
        if asks and ns and self.policy.managed_namespace_selector is not None:
            labels = await self.namespace_labels(ns)
        patch = mutate(req, self.policy, labels)
        return web.Response(body=response(req.uid, patch=patch), content_type="application/json")

    async def _validate(self, request: web.Request) -> web.Response:
        req = await self._decode(request)
        if isinstance(req, web.Response):
            return req
        claim_classes = await self._claim_classes(req)
        denied = validate(
            req, self.policy, claim_classes, await self._class_kinds(req, claim_classes)
        )
        if denied is not None and (rule := _tenancy.rule_of(denied)) in _tenancy.RULES:
            metrics.TENANCY_DENIALS.labels("admission", rule).inc()
        if denied is not None:
            log.info("webhook: denied %s %s/%s: %s", req.operation, req.namespace, req.name, denied)
        labels: Mapping[str, str] = {}
        pod = req.object
        if (
            warns_about(pod)
            and not _ours(pod, self.policy)
            and self.policy.managed_namespace_selector is not None
        ):
            ns = req.namespace or (pod.metadata.namespace if pod is not None else "")
            labels = await self.namespace_labels(ns) if ns else {}
        said = warnings(req, self.policy, labels)
        body = response(req.uid, denied=denied, warnings=said)
        return web.Response(body=body, content_type="application/json")

    async def _claim_classes(self, req: Request) -> ClaimClasses | None:
        """The device classes of the pod's ``spec.resourceClaims`` (entries that cannot be
        read are left out; :func:`dra_denial` does not check them)."""
        pod = req.object
        if self.claim_lookup is None or pod is None or not pod.spec.resourceClaims:
            return None
        ns = req.namespace or pod.metadata.namespace
        out: dict[str, tuple[str, ...]] = {}
        for pc in pod.spec.resourceClaims:
            try:
                classes = await self.claim_lookup(
                    ns, pc.resourceClaimName or "", pc.resourceClaimTemplateName or ""
                )
            except Exception as exc:  # noqa: BLE001 - unreadable: placement checks it again
                log.warning("webhook: cannot read the claim of %s/%s: %s", ns, pc.name, exc)
                continue
            if classes is not None:
                out[pc.name] = classes
        return out

    async def _class_kinds(
        self, req: Request, claim_classes: ClaimClasses | None
    ) -> ClassKinds | None:
        """The kinds of the DeviceClasses the pod names (its extended resources and its
        claims' requests) that are not class names slurmbridge knows: each read and matched
        to a device profile (:func:`reconcilers._devprofile.match_device_class`); one that
        cannot be read is left out (placement checks it again)."""
        pod = req.object
        if self.class_lookup is None or pod is None:
            return None
        names: set[str] = set()
        for c in [*(pod.spec.initContainers or []), *(pod.spec.containers or [])]:
            for values in (c.resources.requests, c.resources.limits):
                names.update(
                    cls for n in values or {} if (cls := dra.device_class_of(n)) is not None
                )
        for classes in (claim_classes or {}).values():
            names.update(c for c in classes if c)
        out: dict[str, str] = {}
        for name in sorted(names):
            try:
                dc = await self.class_lookup(name)
            except Exception as exc:  # noqa: BLE001 - unreadable: placement checks it again
                log.warning("webhook: cannot read DeviceClass %s: %s", name, exc)
                continue
            if dc is None:
                continue
            try:
                out[name] = _devprofile.match_device_class(dc).kind
            except _devprofile.ProfileError:
                out[name] = ""
        return out

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")
