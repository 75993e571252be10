"""Kubernetes client setup (kubernetes_asyncio) from :class:`~slurmbridge.config.KubeSettings`.

Every client says who it is: ``User-Agent: slurmbridge/<version>`` instead of the generated
client's ``OpenAPI-Generator/…/python``, so an API server's audit events (their ``userAgent``
field) and request logs name slurmbridge rather than any client generated from the OpenAPI
document.

This module is also where the rest of the product gets the generated API classes
(:class:`ApiClient`, :class:`CoreV1Api`, :class:`BatchV1Api`, :class:`CustomObjectsApi`) and
:func:`call`, which awaits one of their calls and raises the typed errors of
:mod:`slurmbridge.kube.errors`: ``slurmbridge.kube`` is the only package importing
``kubernetes_asyncio`` (an import-linter contract in pyproject.toml keeps it so).
"""

from __future__ import annotations

from collections.abc import Awaitable
from importlib import metadata
from typing import TypeVar

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client import ApiClient, BatchV1Api, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException
from yarl import URL

from slurmbridge.config import KubeSettings
from slurmbridge.kube import errors

__all__ = [
    "ApiClient",
    "BatchV1Api",
    "CoreV1Api",
    "CustomObjectsApi",
    "KubeConfigError",
    "api_client",
    "call",
    "user_agent",
]

T = TypeVar("T")


async def call(pending: Awaitable[T]) -> T:
    """Await one generated-client call (``_preload_content`` left on), raising its failure as
    the typed error of :mod:`slurmbridge.kube.errors` (:class:`~slurmbridge.kube.errors.NotFound`
    for 404, …) instead of a plain ``ApiException``.

    Raises:
        slurmbridge.kube.errors.ApiStatusError: the server answered with a non-2xx status.
    """
    try:
        return await pending
    except ApiException as exc:
        raise errors.typed(exc) from exc


def user_agent() -> str:
    """``slurmbridge/<installed package version>`` (``slurmbridge/unknown`` when the package
    metadata is missing, e.g. run from a bare source tree)."""
    try:
        version = metadata.version("slurmbridge")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return f"slurmbridge/{version}"


class KubeConfigError(RuntimeError):
    """No usable Kubernetes credentials (names what was tried)."""


async def api_client(settings: KubeSettings) -> client.ApiClient:
    """An ApiClient for the configured cluster: in-cluster service account or a kubeconfig,
    sending :func:`user_agent`.

    Raises:
        KubeConfigError: neither ``in_cluster`` nor ``kubeconfig`` is usable.
    """
    if settings.in_cluster:
        cfg = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except config.ConfigException as exc:
            raise KubeConfigError(f"$.kube.inCluster: {exc}") from exc
        api = client.ApiClient(configuration=cfg)
    else:
        if settings.kubeconfig is None:
            raise KubeConfigError("$.kube.kubeconfig: not set and $.kube.inCluster is false")
        try:
            api = await config.new_client_from_config(
                config_file=settings.kubeconfig, context=settings.context, persist_config=False
            )
        except config.ConfigException as exc:
            raise KubeConfigError(f"$.kube.kubeconfig ({settings.kubeconfig}): {exc}") from exc
    api.user_agent = user_agent()
    _environment_read_once(api)
    return api


def _environment_read_once(api: client.ApiClient) -> None:
    """Read the proxy settings of the environment (``HTTPS_PROXY``, ``NO_PROXY`` …) for the
    API server once, here, instead of on every request.

    Why: kubernetes-asyncio's session trusts the environment (``trust_env=True``,
    client/rest.py), so aiohttp looks the proxy up and parses ``~/.netrc`` on each request,
    each in a worker thread (aiohttp client.py ``_request``): measured at 50 pods/s, about a
    sixth of the bridge's CPU (bench/workload.py under py-spy). The environment does not
    change while the process runs, so one lookup gives every request the same proxy (client-go
    also reads it from the environment, ``http.ProxyFromEnvironment``). ``~/.netrc`` is not
    read: the API server is authenticated by token or certificate, and a netrc entry for its
    host would only make aiohttp refuse each request (it will not send a netrc login beside
    the Authorization header kubernetes-asyncio sets).
    """
    rest = api.rest_client
    session: aiohttp.ClientSession = rest.pool_manager
    if not rest.proxy:
        try:
            proxy, auth = get_env_proxy_for_url(URL(api.configuration.host or ""))
        except LookupError:
            pass
        else:
            # Credentials stay in the URL, where aiohttp turns them into Proxy-Authorization
            # (for a CONNECT tunnel too).
            if auth is not None:
                proxy = proxy.with_user(auth.login).with_password(auth.password)
            rest.proxy = str(proxy)
    # The one switch aiohttp gives for both lookups; the session is otherwise unchanged.
    session._trust_env = False
