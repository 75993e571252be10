"""The placement path's Kubernetes writes, sent lean: the same requests the generated
client's methods of the same names send, without its generic request building.

Why: a placed pod costs about six writes (its mark, Binding, conditions, Events), and the
generated client's own layer — the method's keyword checks, ``sanitize_for_serialization``
walking the body, ``json.dumps``, the per-request content-type ``re.search`` — was ~5 % of the
bridge's samples at 200 pods/s (py-spy on ``bench/workload.py --json --arrival 200 --pods
1000``; aiohttp's own ~10 % is untouched). Each function here builds the path as the
generated method does, encodes the body once (msgspec, UTF-8 JSON), takes its headers,
bearer token (``update_params_for_auth``: a token file or exec plugin is refreshed as for
any other call), proxy and TLS server name from the ``CoreV1Api``'s own ``ApiClient``, and
sends it on that client's aiohttp session. The names are the generated methods' (deploy's
RBAC test finds each granted verb by them).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import aiohttp
import msgspec

from slurmbridge.kube.api import read_raw
from slurmbridge.kube.client import CoreV1Api

__all__ = [
    "create_namespaced_event",
    "create_namespaced_pod_binding",
    "patch_namespaced_pod",
    "patch_namespaced_pod_status",
]

_JSON = "application/json"
_ENCODE = msgspec.json.Encoder()


async def _send(core: CoreV1Api, method: str, path: str, body: object, content_type: str) -> bytes:
    """Send ``body`` to ``path`` of the API server and return the answer's body.

    Raises:
        slurmbridge.kube.errors.ApiStatusError: the answer was not 2xx (an ``ApiException``
            with the API server's ``Status`` message, as :func:`read_raw` raises it).
        aiohttp.ClientError: no answer (as the generated client raises it).
    """
    api: Any = core.api_client  # type: ignore[attr-defined]  # the stubs omit it
    headers = {**api.default_headers, "Accept": _JSON, "Content-Type": content_type}
    if api.cookie:
        headers["Cookie"] = api.cookie
    await api.update_params_for_auth(headers, None, ["BearerToken"])
    rest: Any = api.rest_client
    extra: dict[str, Any] = {}
    if rest.proxy:
        extra["proxy"] = rest.proxy
    if rest.proxy_headers:
        extra["proxy_headers"] = rest.proxy_headers
    if rest.server_hostname:
        extra["server_hostname"] = rest.server_hostname
    session: aiohttp.ClientSession = rest.pool_manager
    return await read_raw(
        session.request(
            method,
            api.configuration.host + path,
            headers=headers,
            data=_ENCODE.encode(body),
            # No deadline, as the generated client's calls without ``_request_timeout``.
            timeout=aiohttp.ClientTimeout(),
            **extra,
        )
    )


def _pod_path(namespace: str, name: str) -> str:
    # Path parameters quoted with nothing safe, as ``ApiClient.__call_api`` quotes them.
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


async def patch_namespaced_pod(
    core: CoreV1Api, name: str, namespace: str, body: object, content_type: str
) -> bytes:
    """PATCH pod ``namespace/name`` with ``body`` of ``content_type`` (merge, strategic merge
    or JSON patch); the pod's JSON. Raises as :func:`_send`."""
    return await _send(core, "PATCH", _pod_path(namespace, name), body, content_type)


async def patch_namespaced_pod_status(
    core: CoreV1Api, name: str, namespace: str, body: object, content_type: str
) -> bytes:
    """PATCH the ``status`` subresource of pod ``namespace/name``. Raises as :func:`_send`."""
    return await _send(core, "PATCH", _pod_path(namespace, name) + "/status", body, content_type)


async def create_namespaced_pod_binding(
    core: CoreV1Api, name: str, namespace: str, body: object
) -> bytes:
    """POST a ``Binding`` to pod ``namespace/name``'s ``binding`` subresource. Raises as
    :func:`_send`."""
    return await _send(core, "POST", _pod_path(namespace, name) + "/binding", body, _JSON)


async def create_namespaced_event(core: CoreV1Api, namespace: str, body: object) -> bytes:
    """POST a core/v1 ``Event`` into ``namespace``. Raises as :func:`_send`."""
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/events"
    return await _send(core, "POST", path, body, _JSON)
