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

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client import ApiClient, BatchV1Api, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

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
    return api
