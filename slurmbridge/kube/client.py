"""Kubernetes client setup (kubernetes_asyncio) from :class:`~slurmbridge.config.KubeSettings`.

Every client says who it is: ``User-Agent: slurmbridge/<version>`` instead of the generated
client's ``OpenAPI-Generator/…/python``, so an API server's audit events (their ``userAgent``
field) and request logs name slurmbridge rather than any client generated from the OpenAPI
document.
"""

from __future__ import annotations

from importlib import metadata

from kubernetes_asyncio import client, config

from slurmbridge.config import KubeSettings


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
