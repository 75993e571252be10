"""The Kubernetes API's failures map to one typed error each (slurmbridge.kube.errors)."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from slurmbridge.kube import errors


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (401, errors.Unauthorized),
        (403, errors.Forbidden),
        (404, errors.NotFound),
        (409, errors.Conflict),
        (410, errors.Gone),
        (415, errors.UnsupportedMediaType),
        (422, errors.Invalid),
        (429, errors.TooManyRequests),
        (500, errors.Unavailable),
        (503, errors.Unavailable),
        (504, errors.Unavailable),
        (400, errors.ApiStatusError),
    ],
)
def test_each_status_has_its_type(status: int, cls: type[errors.ApiStatusError]) -> None:
    err = errors.error_for(status, "why", 2.0)
    assert type(err) is cls
    assert (err.status, err.reason, err.retry_after) == (status, "why", 2.0)
    assert isinstance(err, ApiException)


def test_a_client_exception_becomes_its_typed_error_with_the_servers_wait() -> None:
    exc = ApiException(status=429, reason="slow down")
    exc.headers = {"Retry-After": "3"}
    err = errors.typed(exc)
    assert isinstance(err, errors.TooManyRequests)
    assert (err.reason, err.retry_after) == ("slow down", 3.0)
    assert errors.typed(err) is err
