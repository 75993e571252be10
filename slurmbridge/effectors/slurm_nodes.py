"""Slurm node effects: drain, undrain, create, delete, features, topology, and a NodeSet
slurmd pod's identity on its node (PodInfo comment, ``k8s/`` features, pruned records)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, ClassVar

from schemas import podinfo, wellknown
from schemas.actions import (
    Action,
    CreateSlurmNode,
    DeleteSlurmNode,
    DrainSlurmNode,
    PruneSlurmNodeRecord,
    SetSlurmNodeExtra,
    SetSlurmNodeFeature,
    SetSlurmNodeOwnedFeatures,
    SetSlurmNodePodInfo,
    UndrainSlurmNode,
    UpdateSlurmNodeFeatures,
    UpdateSlurmNodeTopology,
)
from slurmbridge.effectors.common import NODE_ALREADY_EXISTS, Effector, no_client
from slurmbridge.runtime.outcomes import EffectResult
from slurmbridge.slurm import errors as slurm_errors
from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.models import Node, NodeUpdate


def replace_owned(current: tuple[str, ...], prefix: str, wanted: tuple[str, ...]) -> list[str]:
    """``current`` with its ``prefix`` members replaced by ``wanted``, sorted and
    de-duplicated (slurm-operator slurmcontrol.go ``replaceFeatureNamespace``; the same rule
    as ``reconcilers.nodeset._ident.replace_owned``, which effectors may not import)."""
    return sorted({*(f for f in current if not f.startswith(prefix)), *wanted})


def replace_owned_exact(
    current: tuple[str, ...], feature: str, wanted: tuple[str, ...]
) -> list[str]:
    """``current`` without ``feature`` (the exact name, not a prefix), plus ``wanted``, in
    ``current``'s order with ``wanted`` appended (Slinky ``updateFeatureList``)."""
    kept = [f for f in current if f != feature]
    return kept + [f for f in wanted if f not in kept]


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
        SetSlurmNodeExtra: "_extra",
        SetSlurmNodeFeature: "_feature",
        SetSlurmNodePodInfo: "_pod_info",
        SetSlurmNodeOwnedFeatures: "_owned_features",
        PruneSlurmNodeRecord: "_prune",
    }

    def __init__(self, clients: dict[str, SlurmClient]) -> None:
        self.clients = clients

    def _client(self, cluster: str) -> SlurmClient:
        try:
            return self.clients[cluster]
        except KeyError:
            raise no_client(cluster) from None

    async def _read(self, cluster: str, name: str, operation: str) -> tuple[SlurmClient, Node]:
        """The cluster's client, once it can do ``operation`` (checked before any request:
        an old REST version fails here, not halfway), and the node as Slurm holds it now.

        Raises:
            Unsupported: the negotiated API version lacks ``operation``.
            NotFound: Slurm has no such node (``_gone_is_noop`` makes that a noop).
        """
        c = self._client(cluster)
        c.require(operation)
        return c, await c.get_node(name)

    @_gone_is_noop
    async def _drain(self, action: DrainSlurmNode) -> EffectResult:
        c, node = await self._read(action.cluster, action.node, "update_node")
        if "DRAIN" in node.state:
            return EffectResult("noop", f"already DRAIN (reason {node.reason!r})")
        await c.drain(action.node, action.reason)
        return EffectResult("ok")

    @_gone_is_noop
    async def _undrain(self, action: UndrainSlurmNode) -> EffectResult:
        c, node = await self._read(action.cluster, action.node, "update_node")
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
        c, node = await self._read(action.cluster, action.node, "delete_node")
        if not node.drained:
            return EffectResult("skipped", f"not drained and idle ({'+'.join(node.state)})")
        if not node.reason.startswith(action.owned_prefixes):
            return EffectResult("skipped", f"drain reason {node.reason!r} is not ours")
        await c.delete_node(action.node)
        return EffectResult("ok")

    @_gone_is_noop
    async def _features(self, action: UpdateSlurmNodeFeatures) -> EffectResult:
        c, node = await self._read(action.cluster, action.node, "update_node")
        same = sorted(node.features) == sorted(action.features)
        return await _update(
            c, action.node, same, "features already set", NodeUpdate(features=action.features)
        )

    @_gone_is_noop
    async def _topology(self, action: UpdateSlurmNodeTopology) -> EffectResult:
        c, node = await self._read(action.cluster, action.node, "update_node")
        if node.topology is None:
            # v0.0.42 would answer 200 and ignore topology_str (with a warning).
            raise slurm_errors.Unsupported(c.api_version or "", "update_node topology")
        same = node.topology == action.topology
        return await _update(
            c, action.node, same, "topology already set", NodeUpdate(topology=action.topology)
        )

    @_gone_is_noop
    async def _extra(self, action: SetSlurmNodeExtra) -> EffectResult:
        """Slinky ``updateNodeExtra``: never over someone else's Extra."""
        c, node = await self._read(action.cluster, action.node, "update_node")
        if node.extra == action.extra:
            return EffectResult("noop", "Extra already set")
        if node.extra and not node.extra.startswith(action.owned_prefix):
            return EffectResult("skipped", "the node's Extra is already in use")
        await c.update_node(action.node, NodeUpdate(extra=action.extra))
        return EffectResult("ok")

    @_gone_is_noop
    async def _feature(self, action: SetSlurmNodeFeature) -> EffectResult:
        """One feature in or out of the available and the active set, every other member of
        each kept, from the node as Slurm holds it now (Slinky ``updateGRESCompatibilityFeature``).
        Both sets go in one request: Slurm 26.05.5 takes that adding and removing alike
        (recorded on the rig, tests/real_slurm/test_modern_dra_profiles.py). A version that does
        not report the active set (v0.0.38) gets the available set as both."""
        c, node = await self._read(action.cluster, action.node, "update_node")
        want = (action.feature,) if action.present else ()
        return await _update_features(
            c,
            action.node,
            node,
            lambda current: replace_owned_exact(current, action.feature, want),
            "feature already " + ("set" if action.present else "absent"),
        )

    @_gone_is_noop
    async def _pod_info(self, action: SetSlurmNodePodInfo) -> EffectResult:
        """The comment first; then IDLE after a move to another Kubernetes node, as
        slurmcontrol.go ``UpdateNodeWithPodInfo`` — only from DOWN or IDLE (slurmctld refuses
        IDLE from a busy state) and never over an administrator's drain (IDLE clears DRAIN)."""
        c, node = await self._read(action.cluster, action.node, "update_node")
        old = podinfo.parse(node.comment) or podinfo.PodInfo()
        if old == action.info:
            return EffectResult("noop", "comment already holds the PodInfo")
        await c.update_node(action.node, NodeUpdate(comment=action.info.to_comment()))
        if not old.node or old.node == action.info.node:
            return EffectResult("ok")
        moved = f"moved from Kubernetes node {old.node} to {action.info.node}"
        if node.base_state not in ("DOWN", "IDLE"):
            return EffectResult("ok", f"{moved}; not set IDLE: {'+'.join(node.state)}")
        if "DRAIN" in node.state and not wellknown.is_our_reason(node.reason):
            return EffectResult("ok", f"{moved}; not set IDLE: drain {node.reason!r} not ours")
        await c.update_node(action.node, NodeUpdate(state=("IDLE",)))
        return EffectResult("ok", f"{moved}; set IDLE")

    @_gone_is_noop
    async def _owned_features(self, action: SetSlurmNodeOwnedFeatures) -> EffectResult:
        """Recomputed from the node as it is now (slurm-operator slurmcontrol.go
        ``UpdateNodeFeatures``): features others changed since the decision are kept, and the
        prefix's members are replaced in the available and in the active set separately, so
        a NodeFeatures plugin's inactive features never become active. A version that does
        not report the active set (v0.0.38) gets the available set as both, as before."""
        c, node = await self._read(action.cluster, action.node, "update_node")
        return await _update_features(
            c,
            action.node,
            node,
            lambda current: replace_owned(current, action.prefix, action.features),
            "features already set",
        )

    @_gone_is_noop
    async def _prune(self, action: PruneSlurmNodeRecord) -> EffectResult:
        """Delete only what the action names, as Slurm holds it now (fail closed)."""
        c, node = await self._read(action.cluster, action.node, "delete_node")
        info = podinfo.parse(node.comment)
        ref = action.nodeset
        if (
            info is None
            or info.pod_name != action.pod
            or (info.namespace, info.nodeset_name, info.nodeset_uid)
            != (ref.namespace, ref.name, ref.uid)
            or not ref.uid
        ):
            return EffectResult("skipped", f"comment {node.comment!r} does not name {action.pod}")
        if not all(s in node.state for s in ("DOWN", "NOT_RESPONDING", "DYNAMIC_NORM")):
            return EffectResult("skipped", f"not a defunct dynamic node ({'+'.join(node.state)})")
        if any(s in node.state for s in ("ALLOCATED", "MIXED", "COMPLETING")):
            return EffectResult("skipped", f"runs something ({'+'.join(node.state)})")
        await c.delete_node(action.node)
        return EffectResult("ok")


async def _update_features(
    c: SlurmClient,
    name: str,
    node: Node,
    replace: Callable[[tuple[str, ...]], Iterable[str]],
    noop: str,
) -> EffectResult:
    """``replace`` applied to Slurm node ``name``'s available set and, separately, to its active set
    (``None`` where the API version does not report it), in one update — or ``noop`` (the
    outcome's detail) when neither set would change."""
    new = tuple(replace(node.features))
    active = tuple(replace(node.active_features)) if node.active_features is not None else None
    same = set(new) == set(node.features) and (
        active is None or set(active) == set(node.active_features or ())
    )
    return await _update(c, name, same, noop, NodeUpdate(features=new, active_features=active))


async def _update(
    c: SlurmClient, name: str, same: bool, noop: str, update: NodeUpdate
) -> EffectResult:
    """Send ``update`` for Slurm node ``name`` unless it would change nothing (``same``:
    outcome noop, detail ``noop``)."""
    if same:
        return EffectResult("noop", noop)
    await c.update_node(name, update)
    return EffectResult("ok")
