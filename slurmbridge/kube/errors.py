"""The Kubernetes API's failures as types, raised in one place (as kopf's ``APIError``
family and ``slurmbridge.slurm.errors`` for Slurm): callers catch :class:`NotFound` or
:class:`Conflict` instead of comparing ``exc.status`` with numbers.

The status codes are the API server's (k8s.io/apimachinery ``pkg/api/errors/errors.go``:
``IsNotFound`` 404, ``IsConflict`` 409, ``IsGone``/``IsResourceExpired`` 410, ``IsInvalid``
422, ``IsTooManyRequests`` 429, ``IsServiceUnavailable`` 503, ``IsInternalError`` 500,
``IsForbidden`` 403, ``IsUnauthorized`` 401, ``IsUnsupportedMediaType`` 415).

Every class is an :class:`ApiStatusError` and so a ``kubernetes_asyncio`` ``ApiException``:
``.status`` (int) and ``.reason`` (the Status message) keep their meaning, and
``.retry_after`` (seconds, or None) is what the server asked us to wait.
"""

from __future__ import annotations

from typing import Final

from kubernetes_asyncio.client.exceptions import ApiException


class ApiStatusError(ApiException):
    """A failed request as the API server's ``Status`` says it (HTTP status or in-stream
    ERROR), with the seconds it asked us to wait (``retry_after``; None when it did not)."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(status=status, reason=message)
        self.retry_after = retry_after


class Unauthorized(ApiStatusError):  # noqa: N818 (the names of the API's reasons, as slurm.errors)
    """401: the credentials were refused (a rotated token, a wrong kubeconfig)."""


class Forbidden(ApiStatusError):  # noqa: N818 (the names of the API's reasons, as slurm.errors)
    """403: RBAC (or an admission policy) refused the request."""


class NotFound(ApiStatusError):  # noqa: N818 (the names of the API's reasons, as slurm.errors)
    """404: the object, or its kind (a CRD not installed, an API not served), is absent."""


class Conflict(ApiStatusError):  # noqa: N818 (the names of the API's reasons, as slurm.errors)
    """409: a stale ``resourceVersion``, or a create of a name that exists."""


class Gone(ApiStatusError):  # noqa: N818 (the names of the API's reasons, as slurm.errors)
    """410: the ``resourceVersion`` or ``continue`` token is older than the server keeps."""


class UnsupportedMediaType(ApiStatusError):  # noqa: N818 (the names of the API's reasons, as slurm.errors)
    """415: the server refused the content type (e.g. an apply patch it does not serve)."""


class Invalid(ApiStatusError):  # noqa: N818 (the names of the API's reasons, as slurm.errors)
    """422: validation refused the object; ``.reason`` names the field."""


class TooManyRequests(ApiStatusError):  # noqa: N818 (the names of the API's reasons, as slurm.errors)
    """429: API Priority and Fairness or an eviction budget; honour ``.retry_after``."""


class Unavailable(ApiStatusError):  # noqa: N818 (the names of the API's reasons, as slurm.errors)
    """5xx: the server (or etcd behind it) could not answer now; retry later."""


_BY_STATUS: Final[dict[int, type[ApiStatusError]]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    415: UnsupportedMediaType,
    422: Invalid,
    429: TooManyRequests,
}


def error_for(status: int, message: str, retry_after: float | None = None) -> ApiStatusError:
    """The typed error for an HTTP ``status`` (any 5xx is :class:`Unavailable`; a status
    without a type of its own is a plain :class:`ApiStatusError`)."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = Unavailable if status >= 500 else ApiStatusError
    return cls(status, message, retry_after)


def typed(exc: ApiException) -> ApiStatusError:
    """``exc`` as its typed error (itself when it already is one), keeping the server's
    message and its ``Retry-After`` header (seconds)."""
    if isinstance(exc, ApiStatusError):
        return exc
    wait: float | None = None
    headers = getattr(exc, "headers", None)
    if headers:
        try:
            wait = float(headers.get("Retry-After") or 0) or None
        except ValueError:
            wait = None
    status = int(exc.status or 0)
    return error_for(status, str(exc.reason or ""), wait)
