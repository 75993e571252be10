"""What the effectors share: the Kubernetes request helpers (pod read and patch, custom
object merge), content types, and the one error map (:func:`kube_error`, :func:`no_client`).
"""

from __future__ import annotations

import datetime as dt
import inspect
import logging
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, TypeVar

import aiohttp
import msgspec

from schemas import wellknown
from schemas.actions import (
    Action,
    AnyAction,
    PodRef,
)
from slurmbridge.kube import apis, writes
from slurmbridge.kube.api import CLUSTER_API, NODESET_API, read_raw
from slurmbridge.kube.apis import ApiException
from slurmbridge.kube.errors import Conflict, NotFound, TooManyRequests, Unavailable, typed
from slurmbridge.kube.wire import DECODE_POD, RawPod, RawTaint
from slurmbridge.runtime.outcomes import EffectResult, Permanent, Transient
from slurmbridge.slurm import errors as slurm_errors

log = logging.getLogger(__name__)

_T = TypeVar("_T")


SMP = "application/strategic-merge-patch+json"


#: ESLURM_NODE_ALREADY_EXISTS (slurm_errno.h).
NODE_ALREADY_EXISTS = 2168


MERGE = "application/merge-patch+json"


JSON_PATCH = "application/json-patch+json"


#: Job states after which a job can never run again (as in reconcilers.workload).
JOB_ENDED = wellknown.JOB_ENDED_STATES


def taint_dict(t: RawTaint) -> dict[str, str]:
    out = {"key": t.key, "effect": t.effect}
    if t.value:
        out["value"] = t.value
    if t.timeAdded:
        out["timeAdded"] = t.timeAdded
    return out


async def merge_custom(
    call: Any, plural: str, namespace: str, name: str, body: dict[str, Any]
) -> bool:
    """Merge-patch a slinky.slurm.net object (or its subresource, by ``call``); False if
    it is gone (404)."""
    try:
        await read_raw(
            call(
                *slinky_api(plural),
                namespace,
                plural,
                name,
                body,
                _content_type=MERGE,
                _preload_content=False,
            )
        )
    except ApiException as exc:
        if isinstance(typed(exc), NotFound):
            return False
        raise
    return True


def no_client(cluster: str) -> Transient:
    """No client for ``cluster`` (yet): a Cluster object's client starts once this process's
    projection has the Cluster, so retry rather than dead-letter."""
    return Transient(f"no Slurm client for cluster {cluster!r} in this process (yet)", 5.0)


def kube_error(exc: ApiException, what: str) -> Exception:
    if isinstance(typed(exc), (Conflict, TooManyRequests, Unavailable)):
        return Transient(
            f"{what}: HTTP {exc.status} {exc.reason}",
            0.1 if isinstance(typed(exc), Conflict) else None,
        )
    return Permanent(f"{what}: HTTP {exc.status} {exc.reason}")


async def patch_pod(
    core: apis.CoreV1Api, pod: PodRef, body: Any, content_type: str = MERGE
) -> None:
    """Patch pod ``pod`` with ``body`` of ``content_type`` (raises ApiException)."""
    await writes.patch_namespaced_pod(core, pod.name, pod.namespace, body, content_type)


async def pod_json(core: apis.CoreV1Api, pod: PodRef) -> bytes:
    """The pod named by ``pod`` as the API server's JSON (any uid).

    Raises:
        ApiException: a non-2xx answer (404 included: see :func:`read_unless_gone`).
    """
    return await read_raw(core.read_namespaced_pod(pod.name, pod.namespace, _preload_content=False))


async def read_pod(core: apis.CoreV1Api, pod: PodRef) -> RawPod | None:
    """The live pod, or None when it is gone or another pod has its name now (another uid)."""
    body = await read_unless_gone(pod_json(core, pod))
    if body is None:
        return None
    raw = DECODE_POD.decode(body)
    if pod.uid and raw.metadata.uid != pod.uid:
        return None
    return raw


async def nothing() -> None:
    """No job to read (a DeletePod for an orphan names job 0)."""


def json_pointer(key: str) -> str:
    """``key`` escaped as one JSON Pointer token (RFC 6901: ``~`` → ``~0``, ``/`` → ``~1``)."""
    return key.replace("~", "~0").replace("/", "~1")


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: NodeSets are read and written at v1beta1, their storage version: a write at v1alpha1
#: would drop the v1beta1-only fields (the CRD's ``conversion: None`` prunes by the version
#: written). Clusters are served at v1alpha1 only.


def slinky_api(plural: str) -> tuple[str, str]:
    """Group and version at which slurmbridge reads and writes ``plural`` (nodesets, clusters)."""
    return NODESET_API if plural == "nodesets" else CLUSTER_API


async def ok_unless_gone(write: Awaitable[object], what: str, done: str = "") -> EffectResult:
    """Await a Kubernetes write (e.g. :func:`read_raw` of a patch): ``ok`` (detail ``done``),
    or ``noop`` "<what> is gone" when the object was deleted before it (404: nothing is left
    to change).

    Raises:
        ApiStatusError: any other non-2xx answer.
    """
    try:
        await write
    except ApiException as exc:
        if isinstance(typed(exc), NotFound):
            return EffectResult("noop", f"{what} is gone")
        raise
    return EffectResult("ok", done)


async def create_unless_exists(call: Any, what: str) -> EffectResult:
    """Await a raw Kubernetes create: ``ok`` "<what> created", or ``noop`` "<what> exists"
    when an object of that name is there already (409: an earlier attempt made it).

    Raises:
        ApiStatusError: any other non-2xx answer.
    """
    try:
        await read_raw(call)
    except ApiException as exc:
        if isinstance(typed(exc), Conflict):
            return EffectResult("noop", f"{what} exists")
        raise
    return EffectResult("ok", f"{what} created")


async def read_unless_gone(read: Awaitable[_T]) -> _T | None:
    """What a Kubernetes read answers, or None when the object is gone (404).

    Raises:
        ApiException: any other non-2xx answer.
    """
    try:
        return await read
    except ApiException as exc:
        if isinstance(typed(exc), NotFound):
            return None
        raise


async def list_items(listing: Any, namespace: str, selector: Mapping[str, str]) -> list[Any]:
    """The items (decoded JSON objects) a namespaced list call answers for the equality
    label ``selector`` (keys sorted).

    Raises:
        ApiStatusError: a non-2xx answer (:func:`~slurmbridge.kube.api.read_raw`).
    """
    raw = await read_raw(
        listing(
            namespace,
            label_selector=",".join(f"{k}={v}" for k, v in sorted(selector.items())),
            _preload_content=False,
        )
    )
    items: list[Any] = msgspec.json.decode(raw).get("items") or []
    return items


async def read_slinky(
    custom: apis.CustomObjectsApi, plural: str, kind: str, namespace: str, name: str, uid: str
) -> dict[str, Any] | EffectResult:
    """Read a ``slinky.slurm.net`` object (``plural``: nodesets, clusters); a ``noop`` result
    instead when it is gone (404) or was re-created under its name (another ``uid``: the new
    object gets its own decision).

    Raises:
        ApiStatusError: any other non-2xx answer.
    """
    obj: dict[str, Any] | None = await read_unless_gone(
        custom.get_namespaced_custom_object(*slinky_api(plural), namespace, plural, name)
    )
    if obj is None:
        return EffectResult("noop", f"{kind} is gone")
    if uid and (obj.get("metadata") or {}).get("uid") != uid:
        return EffectResult("noop", f"{kind} was re-created")
    return obj


def condition_entry(
    type_: str, status: str, reason: str, message: str, since: str | None = None
) -> dict[str, str]:
    """One status condition for a strategic merge of ``status.conditions`` (merge key
    ``type``: the kubelet's and other controllers' conditions stay untouched);
    ``lastTransitionTime`` is ``since``, else now (RFC 3339, seconds)."""
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since or now_rfc3339(),
    }


#: An effect: one action type's coroutine (the action in, the outcome out).
Handler = Callable[[Any], Awaitable[EffectResult]]


def effect_error(exc: Exception, name: str) -> EffectResult:
    """The one error map of every effector: what a failure of action ``name`` means.

    Kubernetes: 409, 429 and 5xx, or the API unreachable ⇒ :class:`Transient` (409 soon:
    an optimistic-concurrency miss); other statuses ⇒ :class:`Permanent`. Slurm:
    ``Unsupported`` ⇒ the ``unsupported`` outcome (recorded once, nothing to retry);
    ``Unavailable`` / ``Conflict`` / ``Unauthorized`` ⇒ Transient (a token being rotated, a
    controller restarting); any other Slurm error ⇒ Permanent (a dead letter with Slurm's
    reason). Transient and Permanent raised by an effect pass through unchanged.

    Returns:
        the outcome for an ``Unsupported`` failure.

    Raises:
        Transient / Permanent: as above; any other exception unchanged.
    """
    if isinstance(exc, Transient | Permanent):
        raise exc
    if isinstance(exc, ApiException):
        raise kube_error(exc, name) from exc
    if isinstance(exc, aiohttp.ClientError | TimeoutError):
        raise Transient(f"{name}: Kubernetes API unreachable: {exc}") from exc
    if isinstance(exc, slurm_errors.Unsupported):
        return EffectResult("unsupported", str(exc))
    if isinstance(
        exc, slurm_errors.Unavailable | slurm_errors.Conflict | slurm_errors.Unauthorized
    ):
        raise Transient(f"{name}: {exc}") from exc
    if isinstance(exc, slurm_errors.SlurmError):
        raise Permanent(f"{name}: {exc}") from exc
    raise exc


class Effector:
    """An effector: :attr:`TABLE` maps each action type it performs to the name of the
    coroutine method that performs it — a class constant, so the router knows the types of
    an effector that is not configured here; :meth:`apply` dispatches through it and maps
    failures once (:func:`effect_error`)."""

    TABLE: ClassVar[Mapping[type[Action], str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check the table when the class is made (at import, so at start-up): each entry
        names a coroutine method of this class whose first parameter (any others have
        defaults) is annotated with that action type, or a union of action types holding it
        (the signature mypy checks).

        Raises:
            TypeError: naming the action type and the method that does not match.
        """
        super().__init_subclass__(**kwargs)
        for kind, name in cls.TABLE.items():
            method = getattr(cls, name, None)
            if method is None or not inspect.iscoroutinefunction(method):
                raise TypeError(f"{cls.__name__}.TABLE: {kind.__name__} -> no coroutine {name}")
            hints = typing.get_type_hints(method)
            params = list(inspect.signature(method).parameters.values())[1:]
            required = [p for p in params if p.default is inspect.Parameter.empty]
            takes = hints.get(params[0].name) if params and len(required) <= 1 else None
            if takes is not kind and kind not in typing.get_args(takes):
                raise TypeError(
                    f"{cls.__name__}.{name} must take one {kind.__name__} (TABLE), "
                    f"takes {[hints.get(p.name) for p in params]}"
                )

    async def apply(self, action: AnyAction) -> EffectResult:
        """Perform ``action``.

        Raises:
            Transient / Permanent: see :func:`effect_error`; Permanent for an action type
                this effector does not perform.
        """
        name = type(action).__name__
        method = self.TABLE.get(type(action))
        if method is None:
            raise Permanent(f"{type(self).__name__} cannot perform {name}")
        effect: Handler = getattr(self, method)
        try:
            return await effect(action)
        except Exception as exc:  # noqa: BLE001 - mapped (or re-raised) by the one error map
            return effect_error(exc, name)
