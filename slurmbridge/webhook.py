"""Admission webhook for pods (Slinky slurm-bridge's admission webhook), AdmissionReview v1.

``slurmbridge run --only webhook`` serves, over TLS only:

* ``POST /mutate`` — on pod CREATE in a managed namespace (``managedNamespaces``, or a
  Namespace matching ``managedNamespaceSelector``), a pod that asks for the default scheduler
  (``spec.schedulerName`` empty or ``default-scheduler``) gets ours; a pod that ends up with
  our scheduler loses ``spec.nodeName`` (it would bypass Slurm). The answer is a JSONPatch.
* ``POST /validate`` — for pods with our scheduler: on CREATE, deny a user-set
  ``scheduler.slinky.slurm.net/slurm-jobid`` label or ``slinky.slurm.net/slurm-node``
  annotation (slurmbridge sets them), ``spec.resourceClaims`` and
  ``spec.topologySpreadConstraints`` (Slurm places the pods; Kubernetes could not honour
  either); on UPDATE, deny a change of that label or annotation once the pod is bound or
  Running, unless slurmbridge's own service account makes it; deny ``pods/resize`` (Slurm
  allocated the resources). Each denial is 403 with a message naming the field.
* ``GET /healthz``.

The rules (:func:`mutate`, :func:`validate`) are pure functions of the decoded request; the
server only decodes, looks the Namespace's labels up (cached) and encodes the answer. A body
that is not an AdmissionReview is answered 400 with the reason.
"""

from __future__ import annotations

import base64
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import msgspec
import orjson
from aiohttp import web

from schemas import wellknown

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER: Final = "default-scheduler"
ADMISSION_API: Final = "admission.k8s.io/v1"

#: Labels of a Namespace by name (``{}`` for a namespace without labels or not found).
NamespaceLabels = Callable[[str], Awaitable[Mapping[str, str]]]


class WebhookError(ValueError):
    """An AdmissionReview that cannot be handled; the message names the field."""


# --- the request, decoded once ----------------------------------------------------------------


class _Meta(msgspec.Struct, frozen=True):
    name: str = ""
    generateName: str = ""  # noqa: N815 - Kubernetes field name
    namespace: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class _Spec(msgspec.Struct, frozen=True):
    schedulerName: str = ""  # noqa: N815
    nodeName: str = ""  # noqa: N815
    resourceClaims: list[msgspec.Raw] | None = None  # noqa: N815
    topologySpreadConstraints: list[msgspec.Raw] | None = None  # noqa: N815


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


class _UserInfo(msgspec.Struct, frozen=True):
    username: str = ""


class Request(msgspec.Struct, frozen=True):
    """``AdmissionReview.request``: ``operation`` CREATE | UPDATE | DELETE | CONNECT."""

    uid: str
    operation: str
    resource: _Resource = _Resource()
    subResource: str = ""  # noqa: N815
    namespace: str = ""
    name: str = ""
    userInfo: _UserInfo = _UserInfo()  # noqa: N815
    object: Pod | None = None
    oldObject: Pod | None = None  # noqa: N815


class _Review(msgspec.Struct, frozen=True):
    apiVersion: str = ""  # noqa: N815
    kind: str = ""
    request: Request | None = None


_REVIEW = msgspec.json.Decoder(_Review)


def decode_review(body: bytes) -> Request:
    """Decode an AdmissionReview v1 body into its request.

    Raises:
        WebhookError: not JSON, not an ``admission.k8s.io/v1`` AdmissionReview, or no
            ``request`` — the message names the field.
    """
    try:
        review = _REVIEW.decode(body)
    except msgspec.ValidationError as exc:
        raise WebhookError(f"AdmissionReview: {exc}") from None
    except msgspec.DecodeError as exc:
        raise WebhookError(f"AdmissionReview: not JSON: {exc}") from None
    if review.apiVersion != ADMISSION_API or review.kind != "AdmissionReview":
        raise WebhookError(
            f"apiVersion/kind: expected {ADMISSION_API} AdmissionReview, "
            f"got {review.apiVersion or '-'} {review.kind or '-'}"
        )
    if review.request is None:
        raise WebhookError("request: missing")
    return review.request


# --- rules (pure) --------------------------------------------------------------------------


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """What the rules need from the settings.

    ``managed_namespaces``: names; ``managed_namespace_selector``: a Kubernetes
    LabelSelector (``matchLabels`` / ``matchExpressions``) over Namespace labels;
    ``service_account``: the username slurmbridge's own requests carry.
    """

    scheduler_name: str = wellknown.DEFAULT_SCHEDULER_NAME
    managed_namespaces: frozenset[str] = frozenset()
    managed_namespace_selector: dict[str, Any] | None = None
    service_account: str = ""


_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")


def check_selector(selector: Mapping[str, Any], path: str) -> None:
    """Raise ValueError naming ``path`` when ``selector`` is not a valid LabelSelector."""
    unknown = set(selector) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise ValueError(f"{path}.{min(unknown)}: unknown key")
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        raise ValueError(f"{path}.matchLabels: must map label keys to strings")
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        where = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
            raise ValueError(f"{where}.key: required")  # noqa: TRY004 - a config value error
        op = expr.get("operator")
        if op not in _OPERATORS:
            raise ValueError(f"{where}.operator: must be one of {', '.join(_OPERATORS)}")
        values = expr.get("values") or []
        if op in ("In", "NotIn") and not values:
            raise ValueError(f"{where}.values: {op} needs at least one value")
        if op in ("Exists", "DoesNotExist") and values:
            raise ValueError(f"{where}.values: must be empty for {op}")


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Kubernetes LabelSelector semantics (an empty selector matches everything)."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def managed(policy: Policy, namespace: str, ns_labels: Mapping[str, str]) -> bool:
    """Is ``namespace`` managed: listed, or its labels match the selector."""
    if namespace in policy.managed_namespaces:
        return True
    selector = policy.managed_namespace_selector
    return selector is not None and selector_matches(selector, ns_labels)


def mutate(req: Request, policy: Policy, ns_labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The JSONPatch for a pod CREATE (``[]``: nothing to change)."""
    pod = req.object
    if req.operation != "CREATE" or pod is None or req.subResource:
        return []
    namespace = req.namespace or pod.metadata.namespace
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


def validate(req: Request, policy: Policy) -> str | None:
    """The denial message for a pod request, or None to allow it."""
    if req.subResource == "resize":
        if _ours(req.oldObject, policy) or _ours(req.object, policy):
            return (
                "pods/resize: the resources of a pod scheduled by Slurm are its Slurm job's "
                "allocation and cannot change in place"
            )
        return None
    if req.subResource:
        return None
    pod = req.object
    if not _ours(pod, policy):
        return None
    assert pod is not None
    labels = pod.metadata.labels or {}
    annotations = pod.metadata.annotations or {}
    if req.operation == "CREATE":
        if wellknown.LABEL_SLURM_JOBID in labels:
            return f"{_LABEL_FIELD}: set by slurm-bridge; must not be set by users"
        if wellknown.ANNOTATION_SLURM_NODE in annotations:
            return f"{_ANNOTATION_FIELD}: set by slurm-bridge; must not be set by users"
        if pod.spec.resourceClaims:
            return "spec.resourceClaims: not supported for pods scheduled by Slurm"
        if pod.spec.topologySpreadConstraints:
            return (
                "spec.topologySpreadConstraints: not supported for pods scheduled by Slurm "
                "(Slurm chooses the nodes)"
            )
        return None
    old = req.oldObject
    if req.operation != "UPDATE" or old is None:
        return None
    if policy.service_account and req.userInfo.username == policy.service_account:
        return None
    if not (old.spec.nodeName or old.status.phase == "Running"):
        return None
    old_labels = old.metadata.labels or {}
    old_annotations = old.metadata.annotations or {}
    key = wellknown.LABEL_SLURM_JOBID
    if labels.get(key) != old_labels.get(key):
        return f"{_LABEL_FIELD}: cannot change on a pod that is bound or running"
    key = wellknown.ANNOTATION_SLURM_NODE
    if annotations.get(key) != old_annotations.get(key):
        return f"{_ANNOTATION_FIELD}: cannot change on a pod that is bound or running"
    return None


def response(uid: str, *, denied: str | None = None, patch: Sequence[Any] = ()) -> bytes:
    """An AdmissionReview v1 answer (allowed, with an optional JSONPatch, or 403 denied)."""
    resp: dict[str, Any] = {"uid": uid, "allowed": denied is None}
    if denied is not None:
        resp["status"] = {"code": 403, "reason": "Forbidden", "message": denied}
    elif patch:
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(orjson.dumps(list(patch))).decode()
    return orjson.dumps({"apiVersion": ADMISSION_API, "kind": "AdmissionReview", "response": resp})


# --- the server ------------------------------------------------------------------------------


class CachedNamespaceLabels:
    """Namespace labels through ``read`` (e.g. ``CoreV1Api.read_namespace``), cached for
    ``ttl`` seconds: admission requests come in bursts for one namespace. A failed read
    counts as no labels (the pod is then not mutated: fail open for mutation, as
    ``failurePolicy: Ignore`` would)."""

    def __init__(self, read: NamespaceLabels, *, ttl: float = 30.0) -> None:
        self.read = read
        self.ttl = ttl
        self._cache: dict[str, tuple[float, Mapping[str, str]]] = {}

    async def __call__(self, name: str) -> Mapping[str, str]:
        now = time.monotonic()
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


class WebhookServer:
    """Serves ``/mutate``, ``/validate`` and ``/healthz`` over TLS on ``bind:port``.

    ``cert_file`` / ``key_file``: PEM server certificate (with its chain) and key; they are
    loaded at start. ``namespace_labels``: how to learn a Namespace's labels (needed only
    with a ``managed_namespace_selector``). :attr:`port` is the bound port (``port`` 0 picks
    a free one).

    Raises (from :meth:`start`):
        ValueError: no certificate or key (the webhook is TLS only).
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
    ) -> None:
        self.policy = policy
        self.bind = bind
        self.port = port
        self.cert_file = cert_file
        self.key_file = key_file
        self.namespace_labels = namespace_labels or _no_labels
        self._runner: web.AppRunner | None = None

    def ssl_context(self) -> ssl.SSLContext:
        """A server TLS context (TLS ≥ 1.2) from the certificate and key files."""
        if not self.cert_file or not self.key_file:
            raise ValueError(
                "$.webhook.certFile / $.webhook.keyFile: the admission webhook serves TLS only; "
                "set both (the API server calls webhooks over HTTPS)"
            )
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    async def start(self) -> None:
        """Listen (see the class docstring for errors)."""
        ctx = self.ssl_context()
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
        site = web.TCPSite(runner, self.bind, self.port, ssl_context=ctx)
        await site.start()
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
        if self.policy.managed_namespace_selector is not None and ns:
            labels = await self.namespace_labels(ns)
        patch = mutate(req, self.policy, labels)
        return web.Response(body=response(req.uid, patch=patch), content_type="application/json")

    async def _validate(self, request: web.Request) -> web.Response:
        req = await self._decode(request)
        if isinstance(req, web.Response):
            return req
        denied = validate(req, self.policy)
        if denied is not None:
            log.info("webhook: denied %s %s/%s: %s", req.operation, req.namespace, req.name, denied)
        return web.Response(body=response(req.uid, denied=denied), content_type="application/json")

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")
