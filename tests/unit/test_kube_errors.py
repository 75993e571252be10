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


async def _fails(exc: BaseException) -> None:
    raise exc


async def test_a_generated_client_call_raises_its_typed_error_once() -> None:
    """``slurmbridge.kube.client.call`` is where a plain ``ApiException`` of a generated
    client call becomes its typed error (the callers outside slurmbridge.kube catch
    ``NotFound``, never ``exc.status == 404``)."""
    from slurmbridge.kube import client as kclient

    with pytest.raises(errors.NotFound) as info:
        await kclient.call(_fails(ApiException(status=404, reason='claims "c" not found')))
    assert info.value.reason == 'claims "c" not found'
    with pytest.raises(errors.Unavailable):
        await kclient.call(_fails(ApiException(status=503, reason="etcd")))

    async def ok() -> dict[str, str]:
        return {"kind": "ResourceClaim"}

    assert await kclient.call(ok()) == {"kind": "ResourceClaim"}
