"""The one raw-call helper for Kubernetes: read a ``_preload_content=False`` response, turn a
non-2xx answer into an :class:`ApiStatusError` carrying the API server's ``Status`` (reason,
message, ``Retry-After``), and describe failures in one line.
"""

from __future__ import annotations

from typing import Any

import msgspec
from kubernetes_asyncio.client.exceptions import ApiException

from slurmbridge.kube.errors import ApiStatusError, error_for
from slurmbridge.kube.wire import DECODE_STATUS, RawStatus

__all__ = [
    "CLUSTER_API",
    "NODESET_API",
    "ApiStatusError",
    "check_status",
    "describe",
    "read_raw",
    "retry_after",
]

#: Group and version at which slurmbridge reads and writes NodeSets and Clusters.
NODESET_API = ("slinky.slurm.net", "v1beta1")
CLUSTER_API = ("slinky.slurm.net", "v1alpha1")


def status_error(resp: Any, body: bytes) -> ApiStatusError:
    """The error of a non-2xx raw response: its Status message, and the wait from its
    ``Retry-After`` header (else the Status's ``details.retryAfterSeconds``)."""
    try:
        status: RawStatus | None = DECODE_STATUS.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        status = None
    message = status.message if status is not None else ""
    wait = _seconds(resp.headers.get("Retry-After")) if resp.headers is not None else None
    if wait is None and status is not None and status.details is not None:
        wait = float(status.details.retryAfterSeconds) or None
    return error_for(resp.status, message or str(resp.reason), wait)


def _seconds(value: str | None) -> float | None:
    # The API server always sends delta-seconds; an HTTP-date is not honoured.
    try:
        return float(value) if value else None
    except ValueError:
        return None


def retry_after(exc: BaseException) -> float | None:
    """The seconds the server asked to wait before retrying after ``exc``, or None."""
    if isinstance(exc, ApiStatusError):
        return exc.retry_after
    headers = getattr(exc, "headers", None)
    return _seconds(headers.get("Retry-After")) if headers else None


def describe(exc: BaseException) -> str:
    """One short line for a failure (ApiException's own text spans lines and headers)."""
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}".strip()
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def check_status(resp: Any, body: bytes) -> None:
    """Raise :class:`ApiStatusError` for a non-2xx raw response (kubernetes_asyncio does not
    check ``_preload_content=False`` responses): e.g. 404 for a CRD that is not installed."""
    if resp.status >= 300:
        raise status_error(resp, body)


async def check_stream(resp: Any) -> None:
    """Raise the typed :class:`ApiStatusError` for a non-2xx raw *streaming* response (a
    ``watch=True`` call), reading its body only then: a 2xx stream is left unread for the
    caller's line loop.

    Raises:
        ApiStatusError: the answer was not 2xx (``.status``, ``.reason`` = the message).
    """
    if resp.status >= 300:
        raise status_error(resp, await resp.read())


async def read_raw(call: Any) -> bytes:
    """Await a ``_preload_content=False`` call and return its body; a non-2xx answer raises
    :class:`ApiStatusError` with the API server's ``Status`` message (kubernetes_asyncio
    does not check the status of raw responses). The one raw-call helper of the project.

    Raises:
        ApiStatusError: the answer was not 2xx (``.status``, ``.reason`` = the message).
    """
    resp = await call
    try:
        body: bytes = await resp.read()
        check_status(resp, body)
        return body
    finally:
        resp.release()
