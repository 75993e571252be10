"""Pod writes of :class:`~slurmbridge.effectors.pods.PodEffector`: mark a group's pods (job-id
label, finalizer, managed-node toleration), remove the finalizer, set a pod condition —
each a read, then a patch carrying the resourceVersion read.

The read is the pod cache's copy when it holds one (:mod:`slurmbridge.kube.cache`,
controller-runtime's cached client): the write's resourceVersion precondition refuses a
stale copy (409 Conflict, or 422 for the mark's JSON patch ``test``), and then the pod is
read from the API server and the write decided again. A copy that says there is nothing to
write is never believed alone: the API server's copy decides a noop."""

from __future__ import annotations

import asyncio
from typing import Any

from reconcilers import _tenancy
from schemas import wellknown
from schemas.actions import (
    MarkPods,
    PodRef,
    RemovePodFinalizer,
    SetPodCondition,
)
from slurmbridge.effectors.common import (
    MERGE,
    SMP,
    condition_entry,
    json_pointer,
    ok_unless_gone,
    patch_pod,
    read_pod,
)
from slurmbridge.kube import apis, writes
from slurmbridge.kube.apis import ApiException
from slurmbridge.kube.cache import PodCache
from slurmbridge.kube.errors import Conflict, Invalid, NotFound, typed
from slurmbridge.kube.wire import RawCondition, RawPod
from slurmbridge.observability import metrics
from slurmbridge.runtime.outcomes import EffectResult, Transient


class PodWriteHandlers:
    """The pod write handlers (module docstring); needs a ``core`` API client."""

    core: apis.CoreV1Api
    pod_cache: PodCache | None

    def _cached(self, pod: PodRef) -> RawPod | None:
        """The pod cache's copy of ``pod`` (of its uid), else None."""
        if self.pod_cache is None:
            return None
        return self.pod_cache.get(pod.namespace, pod.name, pod.uid)

    async def _read_uncached(self, pod: PodRef) -> RawPod | None:
        """``pod`` read from the API server — or None, without a request, when the pod cache
        has a copy (a mark given None starts from that copy)."""
        if self._cached(pod) is not None:
            return None
        return await read_pod(self.core, pod)

    async def _patch(self, pod: PodRef, body: Any, content_type: str = MERGE) -> None:
        await patch_pod(self.core, pod, body, content_type)

    async def _mark_pods(self, action: MarkPods) -> EffectResult:
        return await self._mark_all(action.pods, action.job_id, action.scheduler_name)

    async def _mark_all(
        self,
        pods: tuple[PodRef, ...],
        job_id: int,
        scheduler_name: str,
        raws: list[RawPod | None] | None = None,
    ) -> EffectResult:
        # Concurrently: each pod is its own object, and a group's bind waits for all of them.
        known = raws if raws is not None else [None] * len(pods)
        changed = sum(
            await asyncio.gather(
                *(
                    self._mark(pod, job_id, scheduler_name, raw)
                    for pod, raw in zip(pods, known, strict=True)
                )
            )
        )
        return EffectResult("ok" if changed else "noop", f"{changed} pod(s) marked")

    async def _mark(
        self, pod: PodRef, job_id: int, scheduler_name: str, raw: RawPod | None = None
    ) -> int:
        """Mark one pod, starting from ``raw`` when it was just read, else from the pod
        cache's copy. A pod that changed in between (the patch's test fails) is read again
        once before giving up for now; a copy from the cache that the patch's test refuses,
        or that says the pod is marked already, is one more read."""
        cached = False
        if raw is None:
            raw = self._cached(pod)
            cached = raw is not None
        attempts = 3 if cached else 2
        for attempt in range(attempts):
            if raw is None or attempt:
                raw = await read_pod(self.core, pod)
            try:
                marked = await self._mark_once(pod, job_id, scheduler_name, raw)
            except ApiException as exc:
                if isinstance(typed(exc), NotFound):  # deleted between the read and the patch
                    return 0
                if not isinstance(typed(exc), Invalid):
                    raise
                if attempt == attempts - 1:  # changing under us: let the redelivery read it
                    raise Transient(f"MarkPods: pod {pod.key} keeps changing") from exc
                continue
            if marked or not cached or attempt:
                return marked
        raise AssertionError("unreachable")

    async def _mark_once(
        self, pod: PodRef, job_id: int, scheduler_name: str, raw: RawPod | None
    ) -> int:
        if raw is None or raw.metadata.deletionTimestamp:
            return 0
        labels = raw.metadata.labels or {}
        finalizers = list(raw.metadata.finalizers or [])
        tolerated = any(
            t.key == wellknown.TAINT_MANAGED_NODE or (not t.key and t.operator == "Exists")
            for t in raw.spec.tolerations or []
        )
        label_ok = labels.get(wellknown.LABEL_SLURM_JOBID) == str(job_id)
        finalized = wellknown.FINALIZER_SCHEDULER in finalizers
        if label_ok and finalized and tolerated:
            return 0
        # One JSON patch: a "test" of the resourceVersion read makes it fail (422) if the pod
        # changed meanwhile, and "add" is the only way to extend a pod's tolerations (they
        # may only grow, and re-sending the list would have to reproduce it exactly).
        ops: list[dict[str, Any]] = [
            {
                "op": "test",
                "path": "/metadata/resourceVersion",
                "value": raw.metadata.resourceVersion,
            }
        ]
        if not label_ok:
            stale_node = wellknown.ANNOTATION_SLURM_NODE in (raw.metadata.annotations or {})
            if stale_node and not raw.spec.nodeName:
                # Relabelled to another job while unbound (its old job ended or vanished):
                # the node the old job named is not where the new one will run.
                path = "/metadata/annotations/" + json_pointer(wellknown.ANNOTATION_SLURM_NODE)
                ops.append({"op": "remove", "path": path})
            if labels:
                path = "/metadata/labels/" + json_pointer(wellknown.LABEL_SLURM_JOBID)
                ops.append({"op": "add", "path": path, "value": str(job_id)})
            else:
                ops.append(
                    {
                        "op": "add",
                        "path": "/metadata/labels",
                        "value": {wellknown.LABEL_SLURM_JOBID: str(job_id)},
                    }
                )
        if not finalized:
            if finalizers:
                fin = {"op": "add", "path": "/metadata/finalizers/-"}
                ops.append({**fin, "value": wellknown.FINALIZER_SCHEDULER})
            else:
                ops.append(
                    {
                        "op": "add",
                        "path": "/metadata/finalizers",
                        "value": [wellknown.FINALIZER_SCHEDULER],
                    }
                )
        if not tolerated:
            toleration = {
                "key": wellknown.TAINT_MANAGED_NODE,
                "operator": "Equal",
                "value": scheduler_name,
                "effect": wellknown.TAINT_MANAGED_NODE_EFFECT,
            }
            ops.append(
                {"op": "add", "path": "/spec/tolerations/-", "value": toleration}
                if raw.spec.tolerations
                else {"op": "add", "path": "/spec/tolerations", "value": [toleration]}
            )
        await self._patch(pod, ops, "application/json-patch+json")
        return 1

    async def _unfinalize(self, action: RemovePodFinalizer) -> EffectResult:
        cached = self._cached(action.pod)
        if cached is not None and action.finalizer in (cached.metadata.finalizers or ()):
            try:
                return await self._remove_finalizer(action, cached)
            except ApiException as exc:
                if not isinstance(typed(exc), Conflict):
                    raise
        raw = await read_pod(self.core, action.pod)
        if raw is None:
            return EffectResult("noop", "pod is gone")
        if action.finalizer not in (raw.metadata.finalizers or ()):
            return EffectResult("noop", "finalizer already removed")
        return await self._remove_finalizer(action, raw)

    async def _remove_finalizer(self, action: RemovePodFinalizer, raw: RawPod) -> EffectResult:
        rest = [f for f in raw.metadata.finalizers or () if f != action.finalizer]
        body = {
            "metadata": {
                "resourceVersion": raw.metadata.resourceVersion,
                "finalizers": rest or None,
            }
        }
        return await ok_unless_gone(self._patch(action.pod, body), "pod", action.why)

    async def _condition(
        self, action: SetPodCondition, *, new_reason_restarts: bool = False
    ) -> EffectResult:
        """Read the pod (its uid must be the action's: a pod re-created under the name gets
        its own decision), then strategic-merge its condition with the resourceVersion read
        as precondition; ``lastTransitionTime`` moves only when the status flips (Kubernetes
        API conventions) — or, with ``new_reason_restarts``, also when the reason changes
        (a clock a rule reads: see :meth:`slurmbridge.effectors.pods.PodEffector._refused`)."""
        cached = self._cached(action.pod)
        if cached is not None and not _holds(cached, action):
            try:
                return await self._write_condition(action, cached, new_reason_restarts)
            except ApiException as exc:
                if not isinstance(typed(exc), Conflict):
                    raise
        raw = await read_pod(self.core, action.pod)
        if raw is None:
            return EffectResult("noop", "pod is gone")
        if _holds(raw, action):
            return EffectResult("noop", "condition already set")
        return await self._write_condition(action, raw, new_reason_restarts)

    async def _write_condition(
        self, action: SetPodCondition, raw: RawPod, new_reason_restarts: bool
    ) -> EffectResult:
        cur = _current(raw, action)
        since = cur.lastTransitionTime if cur is not None and cur.status == action.status else None
        if new_reason_restarts and cur is not None and cur.reason != action.reason:
            since = None
        body = {
            "metadata": {"resourceVersion": raw.metadata.resourceVersion},
            "status": {
                "conditions": [
                    condition_entry(
                        action.type, action.status, action.reason, action.message, since
                    )
                ]
            },
        }
        result = await ok_unless_gone(
            writes.patch_namespaced_pod_status(
                self.core, action.pod.name, action.pod.namespace, body, SMP
            ),
            "pod",
        )
        if action.reason == wellknown.REASON_SLURM_POLICY_DENIED and result.outcome == "ok":
            # One count per pod and refusal: the condition is written once per new message.
            metrics.TENANCY_DENIALS.labels("placement", _tenancy.rule_of(action.message)).inc()
        return result


def _current(raw: RawPod, action: SetPodCondition) -> RawCondition | None:
    return next((c for c in raw.status.conditions or () if c.type == action.type), None)


def _holds(raw: RawPod, action: SetPodCondition) -> bool:
    """The pod's condition of ``action.type`` says what ``action`` would write."""
    cur = _current(raw, action)
    return cur is not None and (cur.status, cur.reason, cur.message) == (
        action.status,
        action.reason,
        action.message,
    )
