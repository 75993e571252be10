"""Kubernetes client setup (kubernetes_asyncio) from :class:`~slurmbridge.config.KubeSettings`."""

from __future__ import annotations

from kubernetes_asyncio import client, config

from slurmbridge.config import KubeSettings


class KubeConfigError(RuntimeError):
    """No usable Kubernetes credentials (names what was tried)."""


async def api_client(settings: KubeSettings) -> client.ApiClient:
    """An ApiClient for the configured cluster: in-cluster service account or a kubeconfig.

    Raises:
        KubeConfigError: neither ``in_cluster`` nor ``kubeconfig`` is usable.
    """
    if settings.in_cluster:
        cfg = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except config.ConfigException as exc:
            raise KubeConfigError(f"$.kube.inCluster: {exc}") from exc
        return client.ApiClient(configuration=cfg)
    if settings.kubeconfig is None:
        raise KubeConfigError("$.kube.kubeconfig: not set and $.kube.inCluster is false")
    try:
        return await config.new_client_from_config(
            config_file=settings.kubeconfig, context=settings.context, persist_config=False
        )
    except config.ConfigException as exc:
        raise KubeConfigError(f"$.kube.kubeconfig ({settings.kubeconfig}): {exc}") from exc
