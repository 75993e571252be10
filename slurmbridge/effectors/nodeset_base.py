"""What the NodeSet handlers share: the effector's clients, the NodeSet read and merge."""

from __future__ import annotations

from typing import Any

from schemas.actions import NodeSetRef
from slurmbridge.effectors.common import merge_custom, no_client, read_unless_gone
from slurmbridge.kube import apis
from slurmbridge.kube.api import NODESET_API
from slurmbridge.slurm.client import SlurmClient


class NodeSetClients:
    """The clients of :class:`~slurmbridge.effectors.nodesets.NodeSetEffector` and the
    NodeSet reads and writes its handler groups share."""

    def __init__(self, api: apis.ApiClient, slurm: dict[str, SlurmClient]) -> None:
        self.core = apis.CoreV1Api(api)
        self.apps = apis.AppsV1Api(api)
        self.custom = apis.CustomObjectsApi(api)
        self.policy = apis.PolicyV1Api(api)
        self.slurm = slurm

    def _client(self, cluster: str) -> SlurmClient:
        """The Slurm client of ``cluster``.

        Raises:
            Transient: no client for that cluster (yet): :func:`~.common.no_client`.
        """
        c = self.slurm.get(cluster)
        if c is None:
            raise no_client(cluster)
        return c

    async def _read_nodeset(self, ref: NodeSetRef) -> dict[str, Any] | None:
        """NodeSet ``ref``'s metadata; None when it is gone or re-created (another uid)."""
        obj: dict[str, Any] | None = await read_unless_gone(
            self.custom.get_namespaced_custom_object(
                *NODESET_API, ref.namespace, "nodesets", ref.name
            )
        )
        if obj is None:
            return None
        meta: dict[str, Any] = obj.get("metadata") or {}
        if ref.uid and meta.get("uid") != ref.uid:
            return None
        return meta

    async def _merge(self, call: Any, ref: NodeSetRef, body: dict[str, Any]) -> bool:
        """Merge-patch NodeSet ``ref`` (or its subresource, by ``call``); False if gone."""
        return await merge_custom(call, "nodesets", ref.namespace, ref.name, body)
