"""Kubernetes node effects: taints and node conditions; with :mod:`.clusters`,
:mod:`.podgroups` and :mod:`.events`, the Kubernetes-only actions of :class:`KubeEffector`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from schemas.actions import (
    Action,
    RecordEvent,
    SetClusterStatus,
    SetNodeCondition,
    SetPodGroupScheduled,
    TaintNode,
    UntaintNode,
)
from slurmbridge.effectors.clusters import set_cluster_status
from slurmbridge.effectors.common import (
    SMP,
    Effector,
    condition_entry,
    ok_unless_gone,
    taint_dict,
)
from slurmbridge.effectors.events import record_event
from slurmbridge.effectors.podgroups import set_pod_group_scheduled
from slurmbridge.kube import apis
from slurmbridge.kube.api import read_raw
from slurmbridge.kube.apis import ApiException
from slurmbridge.kube.errors import NotFound, typed
from slurmbridge.kube.wire import DECODE_NODE, RawNode
from slurmbridge.runtime.outcomes import EffectResult


class KubeEffector(Effector):
    """Node taints, node conditions and Kubernetes Events through one Kubernetes
    ApiClient (raw JSON requests and responses)."""

    TABLE: ClassVar[Mapping[type[Action], str]] = {
        TaintNode: "_taint",
        UntaintNode: "_taint",
        SetNodeCondition: "_condition",
        SetClusterStatus: "_cluster_status",
        SetPodGroupScheduled: "_pod_group_scheduled",
        RecordEvent: "_event",
    }

    def __init__(
        self,
        api: apis.ApiClient,
        *,
        component: str = "slurmbridge",
    ) -> None:
        self.core = apis.CoreV1Api(api)
        self.custom = apis.CustomObjectsApi(api)
        self.component = component

    async def _cluster_status(self, action: SetClusterStatus) -> EffectResult:
        return await set_cluster_status(self.custom, action)

    async def _pod_group_scheduled(self, action: SetPodGroupScheduled) -> EffectResult:
        return await set_pod_group_scheduled(self.custom, action)

    async def _event(self, action: RecordEvent) -> EffectResult:
        return await record_event(self.core, action, component=self.component)

    async def _read(self, name: str) -> RawNode | None:
        """The node as the API server holds it now (``None``: gone).

        Raises:
            ApiException: any other API error (classified by the caller's error map).
        """
        try:
            # Raw JSON into our own Struct: the generated client's models reject objects from
            # API servers newer than the client, and we only need a few fields.
            return DECODE_NODE.decode(
                await read_raw(self.core.read_node(name, _preload_content=False))
            )
        except ApiException as exc:
            if isinstance(typed(exc), NotFound):
                return None
            raise

    async def _taint(self, action: TaintNode | UntaintNode) -> EffectResult:
        node = await self._read(action.node)
        if node is None:
            return EffectResult("noop", "node is gone")
        current = node.spec.taints or []
        ours = [t for t in current if t.key == action.key and t.effect == action.effect]
        keep = [
            taint_dict(t)
            for t in current
            if not (t.key == action.key and t.effect == action.effect)
        ]
        if isinstance(action, TaintNode):
            if len(ours) == 1 and (ours[0].value or "") == action.value:
                return EffectResult("noop", "taint already present")
            desired = [*keep, {"key": action.key, "value": action.value, "effect": action.effect}]
        else:
            if not ours:
                return EffectResult("noop", "taint already absent")
            desired = keep
        body = {
            "metadata": {"resourceVersion": node.metadata.resourceVersion},
            "spec": {"taints": desired},
        }
        # Typed stubs omit `_content_type`; the generated client accepts it.
        patch_node: Any = self.core.patch_node
        return await ok_unless_gone(
            read_raw(patch_node(action.node, body, _content_type=SMP, _preload_content=False)),
            "node",
        )

    async def _condition(self, action: SetNodeCondition) -> EffectResult:
        # Re-read first: a condition already as wanted is not written again (a replica that
        # took over decides before the echo of its predecessor's write reaches it, and
        # lastTransitionTime must not move when nothing changed).
        node = await self._read(action.node)
        if node is None:
            return EffectResult("noop", "node is gone")
        for c in node.status.conditions or ():
            if c.type == action.type and (c.status, c.reason or "", c.message or "") == (
                action.status,
                action.reason,
                action.message,
            ):
                return EffectResult("noop", "condition already set")
        entry = condition_entry(action.type, action.status, action.reason, action.message)
        entry["lastHeartbeatTime"] = entry["lastTransitionTime"]
        body = {"status": {"conditions": [entry]}}
        # Strategic merge on status.conditions merges by `type`: the kubelet's stay untouched.
        patch_status: Any = self.core.patch_node_status
        return await ok_unless_gone(
            read_raw(patch_status(action.node, body, _content_type=SMP, _preload_content=False)),
            "node",
        )
