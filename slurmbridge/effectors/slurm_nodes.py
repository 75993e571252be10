"""Slurm node effects: drain, undrain, create, delete, features, topology."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

from schemas.actions import (
    Action,
    CreateSlurmNode,
    DeleteSlurmNode,
    DrainSlurmNode,
    UndrainSlurmNode,
    UpdateSlurmNodeFeatures,
    UpdateSlurmNodeTopology,
)
from slurmbridge.effectors.common import NODE_ALREADY_EXISTS, Effector, no_client
from slurmbridge.runtime.outcomes import EffectResult
from slurmbridge.slurm import errors as slurm_errors
from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.models import NodeUpdate

_Effect = Callable[["SlurmEffector", Any], Awaitable[EffectResult]]


def _gone_is_noop(effect: _Effect) -> _Effect:
    """A node action on a node Slurm no longer has is done: nothing is left to change."""

    @functools.wraps(effect)
    async def run(self: SlurmEffector, action: Any) -> EffectResult:
        try:
            return await effect(self, action)
        except slurm_errors.NotFound:
            return EffectResult("noop", "Slurm node is gone")

    return run


class SlurmEffector(Effector):
    """Slurm node actions through one :class:`SlurmClient` per cluster.

    Create is a no-op when the node exists; delete re-reads the node and proceeds only when
    it is DRAIN with one of our reasons and runs nothing (fail closed).
    """

    TABLE: ClassVar[Mapping[type[Action], str]] = {
        DrainSlurmNode: "_drain",
        UndrainSlurmNode: "_undrain",
        CreateSlurmNode: "_create",
        DeleteSlurmNode: "_delete",
        UpdateSlurmNodeFeatures: "_features",
        UpdateSlurmNodeTopology: "_topology",
    }

    def __init__(self, clients: dict[str, SlurmClient]) -> None:
        self.clients = clients

    def _client(self, cluster: str) -> SlurmClient:
        try:
            return self.clients[cluster]
        except KeyError:
            raise no_client(cluster) from None

    @_gone_is_noop
    async def _drain(self, action: DrainSlurmNode) -> EffectResult:
        c = self._client(action.cluster)
        c.require("update_node")  # v0.0.38 cannot: fail before any request
        node = await c.get_node(action.node)
        if "DRAIN" in node.state:
            return EffectResult("noop", f"already DRAIN (reason {node.reason!r})")
        await c.drain(action.node, action.reason)
        return EffectResult("ok")

    @_gone_is_noop
    async def _undrain(self, action: UndrainSlurmNode) -> EffectResult:
        c = self._client(action.cluster)
        c.require("update_node")
        node = await c.get_node(action.node)
        if "DRAIN" not in node.state:
            return EffectResult("noop", "not drained")
        if node.reason and not node.reason.startswith(action.owned_prefixes):
            return EffectResult("skipped", f"drain reason {node.reason!r} is not ours")
        await c.undrain(action.node)
        return EffectResult("ok")

    @_gone_is_noop
    async def _create(self, action: CreateSlurmNode) -> EffectResult:
        c = self._client(action.cluster)
        c.require("create_node")  # before v0.0.44 there is no POST /new/node/
        try:
            # Slurm itself refuses a duplicate (ESLURM_NODE_ALREADY_EXISTS): one request, not
            # a read first — registering a thousand nodes at once halves its cost.
            await c.create_node(action.node_conf)
        except slurm_errors.Conflict as exc:
            if exc.error_number == NODE_ALREADY_EXISTS:
                return EffectResult("noop", "Slurm node exists")
            raise
        return EffectResult("ok")

    @_gone_is_noop
    async def _delete(self, action: DeleteSlurmNode) -> EffectResult:
        c = self._client(action.cluster)
        c.require("delete_node")
        node = await c.get_node(action.node)
        if not node.drained:
            return EffectResult("skipped", f"not drained and idle ({'+'.join(node.state)})")
        if not node.reason.startswith(action.owned_prefixes):
            return EffectResult("skipped", f"drain reason {node.reason!r} is not ours")
        await c.delete_node(action.node)
        return EffectResult("ok")

    @_gone_is_noop
    async def _features(self, action: UpdateSlurmNodeFeatures) -> EffectResult:
        c = self._client(action.cluster)
        c.require("update_node")
        node = await c.get_node(action.node)
        if sorted(node.features) == sorted(action.features):
            return EffectResult("noop", "features already set")
        await c.update_node(action.node, NodeUpdate(features=action.features))
        return EffectResult("ok")

    @_gone_is_noop
    async def _topology(self, action: UpdateSlurmNodeTopology) -> EffectResult:
        c = self._client(action.cluster)
        c.require("update_node")
        node = await c.get_node(action.node)
        if node.topology is None:
            # v0.0.42 would answer 200 and ignore topology_str (with a warning).
            raise slurm_errors.Unsupported(c.api_version or "", "update_node topology")
        if node.topology == action.topology:
            return EffectResult("noop", "topology already set")
        await c.update_node(action.node, NodeUpdate(topology=action.topology))
        return EffectResult("ok")
