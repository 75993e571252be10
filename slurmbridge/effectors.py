"""Effectors: the only code that changes Kubernetes or Slurm.

Each effector is idempotent and checks preconditions against the live object, because the
decision it carries out was made on the projection, which may be a poll interval old:

* taints: read the node, compute the new taint list, skip when already right, then a
  strategic-merge patch that carries ``metadata.resourceVersion`` — the API server rejects it
  with 409 if the node changed meanwhile (``spec.taints`` has no patch merge key in the
  Kubernetes API, so the whole list is sent; the resourceVersion makes that safe).
* drain: re-read the Slurm node; already DRAIN ⇒ nothing (whoever drained it owns it).
* undrain: re-read; only when the reason is empty or starts with one of the action's
  ``owned_prefixes`` — an administrator's drain set since the decision is never undone.
* create: one ``POST /new/node/``; Slurm's "already exists" (2168) counts as done.
* delete: re-read; only a node that is DRAIN with one of our reasons and runs nothing.
* features: re-read; skip when already equal. Node conditions: strategic merge on
  ``status.conditions`` (merge key ``type``), so the kubelet's conditions stay untouched.

Failures are classified into :class:`~slurmbridge.runtime.outcomes.Transient` (retry later) and
:class:`~slurmbridge.runtime.outcomes.Permanent` (dead letter). Slurm's ``Unsupported`` (e.g. node
updates on v0.0.38) is reported as the ``unsupported`` outcome, which the worker records once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import uuid
from collections.abc import Callable
from typing import Any

import aiohttp
import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from producers.kube import RawNode, RawPod, RawTaint
from schemas import wellknown
from schemas.actions import (
    AnyAction,
    BindPod,
    CancelSlurmJob,
    CreateNodeSetPod,
    CreateSlurmNode,
    DeleteFailedNodeSetPod,
    DeleteNodeSetPod,
    DeletePod,
    DeleteSlurmNode,
    DrainSlurmNode,
    EnsureNodeSetPDB,
    MarkPods,
    NodeSetRef,
    PodRef,
    RecordEvent,
    RemovePodFinalizer,
    ScaleNodeSet,
    SetClusterStatus,
    SetJobExcludedNodes,
    SetNodeCondition,
    SetNodeSetStatus,
    SetPodCondition,
    SetPodLabel,
    SubmitSlurmJob,
    TaintNode,
    UndrainSlurmNode,
    UntaintNode,
    UpdateSlurmNodeFeatures,
    UpdateSlurmNodeTopology,
)
from slurmbridge.runtime.outcomes import EffectResult, Permanent, Transient
from slurmbridge.slurm import errors as slurm_errors
from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.models import JobSubmit, NodeUpdate

log = logging.getLogger(__name__)

SMP = "application/strategic-merge-patch+json"
#: ESLURM_NODE_ALREADY_EXISTS (slurm_errno.h).
NODE_ALREADY_EXISTS = 2168


_NODE = msgspec.json.Decoder(RawNode)
_POD = msgspec.json.Decoder(RawPod)
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
#: Job states after which a job can never run again (as in reconcilers.workload).
JOB_ENDED = wellknown.JOB_ENDED_STATES


def _taint_dict(t: RawTaint) -> dict[str, str]:
    out = {"key": t.key, "effect": t.effect}
    if t.value:
        out["value"] = t.value
    if t.timeAdded:
        out["timeAdded"] = t.timeAdded
    return out


async def _raw(call: Any) -> bytes:
    """Await a ``_preload_content=False`` call; its body, or ApiException for a non-2xx status
    (kubernetes_asyncio does not check the status of raw responses)."""
    resp = await call
    try:
        body: bytes = await resp.read()
        if resp.status >= 300:
            raise ApiException(status=resp.status, reason=_status_message(body) or resp.reason)
        return body
    finally:
        resp.release()


class _Status(msgspec.Struct):
    message: str = ""


def _status_message(body: bytes) -> str:
    try:
        return msgspec.json.decode(body, type=_Status).message
    except (msgspec.DecodeError, msgspec.ValidationError):
        return ""


async def _merge_custom(
    call: Any, plural: str, namespace: str, name: str, body: dict[str, Any]
) -> bool:
    """Merge-patch a slinky.slurm.net object (or its subresource, by ``call``); False if
    it is gone (404)."""
    try:
        await _raw(
            call(
                *_NODESET_API,
                namespace,
                plural,
                name,
                body,
                _content_type=MERGE,
                _preload_content=False,
            )
        )
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _no_client(cluster: str) -> Transient:
    """No client for ``cluster`` (yet): a Cluster object's client starts once this process's
    projection has the Cluster, so retry rather than dead-letter."""
    return Transient(f"no Slurm client for cluster {cluster!r} in this process (yet)", 5.0)


def _kube_error(exc: ApiException, what: str) -> Exception:
    if exc.status in (409, 429) or exc.status >= 500:
        return Transient(
            f"{what}: HTTP {exc.status} {exc.reason}", 0.1 if exc.status == 409 else None
        )
    return Permanent(f"{what}: HTTP {exc.status} {exc.reason}")


class KubeEffector:
    """Node taints, node conditions and Kubernetes Events through one kubernetes_asyncio
    ApiClient (raw JSON requests and responses)."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        component: str = "slurmbridge",
        events_namespace: str = "default",
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.component = component
        self.events_namespace = events_namespace

    async def apply(self, action: AnyAction) -> EffectResult:
        """Perform a TaintNode, UntaintNode, SetNodeCondition, SetClusterStatus or
        RecordEvent."""
        try:
            if isinstance(action, TaintNode | UntaintNode):
                return await self._taint(action)
            if isinstance(action, RecordEvent):
                return await self._event(action)
            if isinstance(action, SetNodeCondition):
                return await self._condition(action)
            if isinstance(action, SetClusterStatus):
                return await self._cluster_status(action)
        except ApiException as exc:
            raise _kube_error(exc, type(action).__name__) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Transient(f"{type(action).__name__}: Kubernetes API unreachable: {exc}") from exc
        raise Permanent(f"KubeEffector cannot perform {type(action).__name__}")

    async def _taint(self, action: TaintNode | UntaintNode) -> EffectResult:
        try:
            # Raw JSON into our own Struct: kubernetes_asyncio's models reject objects from
            # API servers newer than the client, and we only need taints + resourceVersion.
            node = _NODE.decode(
                await _raw(self.core.read_node(action.node, _preload_content=False))
            )
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "node is gone")
            raise
        current = node.spec.taints or []
        ours = [t for t in current if t.key == action.key and t.effect == action.effect]
        keep = [
            _taint_dict(t)
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
        try:
            await _raw(patch_node(action.node, body, _content_type=SMP, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:  # deleted between the read and the patch
                return EffectResult("noop", "node is gone")
            raise
        return EffectResult("ok")

    async def _condition(self, action: SetNodeCondition) -> EffectResult:
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "status": {
                "conditions": [
                    {
                        "type": action.type,
                        "status": action.status,
                        "reason": action.reason,
                        "message": action.message,
                        "lastTransitionTime": now,
                        "lastHeartbeatTime": now,
                    }
                ]
            }
        }
        # Strategic merge on status.conditions merges by `type`: the kubelet's stay untouched.
        patch_status: Any = self.core.patch_node_status
        try:
            await _raw(patch_status(action.node, body, _content_type=SMP, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "node is gone")
            raise
        return EffectResult("ok")

    async def _cluster_status(self, action: SetClusterStatus) -> EffectResult:
        """Read the Cluster (uid check, current Ready condition), then merge-patch its status
        with a resourceVersion precondition; ``lastTransitionTime`` moves only when the
        condition's status flips (Kubernetes API conventions)."""
        ref = action.cluster
        try:
            obj: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                *_NODESET_API, ref.namespace, "clusters", ref.name
            )
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "Cluster is gone")
            raise
        meta = obj.get("metadata") or {}
        if ref.uid and meta.get("uid") != ref.uid:
            return EffectResult("noop", "Cluster was re-created")
        status = "True" if action.is_ready else "False"
        conditions = list((obj.get("status") or {}).get("conditions") or [])
        old = next((c for c in conditions if c.get("type") == "Ready"), None)
        since = (
            (old or {}).get("lastTransitionTime") if (old or {}).get("status") == status else None
        )
        ready = {
            "type": "Ready",
            "status": status,
            "reason": action.reason,
            "message": action.message[:32768],
            "lastTransitionTime": since or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "observedGeneration": action.generation,
        }
        body = {
            "metadata": {"resourceVersion": meta.get("resourceVersion", "")},
            "status": {
                "isReady": action.is_ready,
                "conditions": [c for c in conditions if c.get("type") != "Ready"] + [ready],
            },
        }
        call = self.custom.patch_namespaced_custom_object_status
        if not await _merge_custom(call, "clusters", ref.namespace, ref.name, body):
            return EffectResult("noop", "Cluster is gone")
        return EffectResult("ok")

    async def _event(self, action: RecordEvent) -> EffectResult:
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        namespace = action.namespace or self.events_namespace
        involved: dict[str, str] = {
            "apiVersion": action.api_version,
            "kind": action.object_kind,
            "name": action.name,
        }
        if action.namespace:
            involved["namespace"] = action.namespace
        if action.uid:
            involved["uid"] = action.uid
        # A plain JSON body: the generated models' recursive serialisation costs more than
        # the request itself when a thousand nodes register at once.
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{action.name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": involved,
            "reason": action.reason,
            "message": action.message,
            "type": action.type,
            "source": {"component": self.component},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": self.component,
        }
        create_event: Any = self.core.create_namespaced_event  # stubs want the model type
        await _raw(create_event(namespace, body, _preload_content=False))
        return EffectResult("ok")


class SlurmEffector:
    """Slurm node actions through one :class:`SlurmClient` per cluster.

    Create is a no-op when the node exists; delete re-reads the node and proceeds only when
    it is DRAIN with one of our reasons and runs nothing (fail closed).
    """

    def __init__(self, clients: dict[str, SlurmClient]) -> None:
        self.clients = clients

    def _client(self, cluster: str) -> SlurmClient:
        try:
            return self.clients[cluster]
        except KeyError:
            raise _no_client(cluster) from None

    async def apply(self, action: AnyAction) -> EffectResult:
        """Perform a Slurm node action (drain, undrain, create, delete, features)."""
        try:
            if isinstance(action, DrainSlurmNode):
                return await self._drain(action)
            if isinstance(action, UndrainSlurmNode):
                return await self._undrain(action)
            if isinstance(action, CreateSlurmNode):
                return await self._create(action)
            if isinstance(action, DeleteSlurmNode):
                return await self._delete(action)
            if isinstance(action, UpdateSlurmNodeFeatures):
                return await self._features(action)
            if isinstance(action, UpdateSlurmNodeTopology):
                return await self._topology(action)
        except slurm_errors.Unsupported as exc:
            return EffectResult("unsupported", str(exc))
        except slurm_errors.NotFound:
            return EffectResult("noop", "Slurm node is gone")
        except (slurm_errors.Unavailable, slurm_errors.Conflict, slurm_errors.Unauthorized) as exc:
            raise Transient(f"{type(action).__name__}: {exc}") from exc
        except slurm_errors.SlurmError as exc:
            raise Permanent(f"{type(action).__name__}: {exc}") from exc
        raise Permanent(f"SlurmEffector cannot perform {type(action).__name__}")

    async def _drain(self, action: DrainSlurmNode) -> EffectResult:
        c = self._client(action.cluster)
        c.require("update_node")  # v0.0.38 cannot: fail before any request
        node = await c.get_node(action.node)
        if "DRAIN" in node.state:
            return EffectResult("noop", f"already DRAIN (reason {node.reason!r})")
        await c.drain(action.node, action.reason)
        return EffectResult("ok")

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

    async def _features(self, action: UpdateSlurmNodeFeatures) -> EffectResult:
        c = self._client(action.cluster)
        c.require("update_node")
        node = await c.get_node(action.node)
        if sorted(node.features) == sorted(action.features):
            return EffectResult("noop", "features already set")
        await c.update_node(action.node, NodeUpdate(features=action.features))
        return EffectResult("ok")

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


POD_ACTIONS = (
    SubmitSlurmJob,
    MarkPods,
    BindPod,
    CancelSlurmJob,
    DeletePod,
    RemovePodFinalizer,
    SetPodCondition,
    SetJobExcludedNodes,
)


async def _patch_pod(
    core: client.CoreV1Api, pod: PodRef, body: Any, content_type: str = MERGE
) -> None:
    """Patch pod ``pod`` with ``body`` of ``content_type`` (raises ApiException)."""
    patch: Any = core.patch_namespaced_pod
    await _raw(
        patch(pod.name, pod.namespace, body, _content_type=content_type, _preload_content=False)
    )


async def _read_pod(core: client.CoreV1Api, pod: PodRef) -> RawPod | None:
    """The live pod, or None when it is gone or another pod has its name now (another uid)."""
    try:
        raw = _POD.decode(
            await _raw(core.read_namespaced_pod(pod.name, pod.namespace, _preload_content=False))
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    if pod.uid and raw.metadata.uid != pod.uid:
        return None
    return raw


async def _none() -> None:
    """No job to read (a DeletePod for an orphan names job 0)."""


def _pointer(key: str) -> str:
    """``key`` escaped as one JSON Pointer token (RFC 6901: ``~`` → ``~0``, ``/`` → ``~1``)."""
    return key.replace("~", "~0").replace("/", "~1")


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PodEffector:
    """Pod placement and workload actions: they touch both sides, so this effector holds a
    Kubernetes ApiClient and the Slurm clients.

    * submit: look in Slurm for a live job whose ``comment`` is the action's marker first, so
      a redelivered or retried submit never makes a second job; then mark the pods;
    * mark: read each pod (uid precondition: a re-created pod is left alone), then one JSON
      patch that tests ``metadata.resourceVersion`` (the pod changed meanwhile ⇒ Transient)
      and sets the job-id label, adds our finalizer and the managed-node toleration; the
      group's pods concurrently. ``on_job_changed(cluster, job_id)`` is told each job it
      submits or cancels, so an in-process poller can look at it at once;
    * bind: one POST of the Binding subresource carrying the ``slinky.slurm.net/slurm-node``
      annotation (the API server copies it onto the pod); already bound to that node ⇒ noop,
      bound elsewhere or being deleted ⇒ skipped, gone ⇒ noop;
    * cancel: re-read the job; only ours (comment = marker) and only while it can still run;
      "no such job" ⇒ noop;
    * delete pod: re-read the job first and skip while it RUNNING (fail closed: a Slurm
      error is retried, never read as "job gone"); delete with a uid precondition;
    * finalizer removal and pod conditions: read, then patch with resourceVersion.

    Raises Transient / Permanent as the other effectors do.
    """

    def __init__(
        self,
        api: client.ApiClient,
        slurm: dict[str, SlurmClient],
        *,
        placeholder_script: str = "",
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.slurm = slurm
        self.placeholder_script = placeholder_script
        self.on_job_changed: Callable[[str, int], None] | None = None
        self._events = KubeEffector(api)

    def _client(self, cluster: str) -> SlurmClient:
        try:
            return self.slurm[cluster]
        except KeyError:
            raise Permanent(f"no Slurm client for cluster {cluster!r}") from None

    async def apply(self, action: AnyAction) -> EffectResult:
        """Perform one of :data:`POD_ACTIONS`."""
        name = type(action).__name__
        try:
            if isinstance(action, SubmitSlurmJob):
                return await self._submit(action)
            if isinstance(action, MarkPods):
                return await self._mark_all(action.pods, action.job_id, action.scheduler_name)
            if isinstance(action, BindPod):
                return await self._bind(action)
            if isinstance(action, CancelSlurmJob):
                return await self._cancel(action)
            if isinstance(action, SetJobExcludedNodes):
                return await self._exclusions(action)
            if isinstance(action, DeletePod):
                return await self._delete(action)
            if isinstance(action, RemovePodFinalizer):
                return await self._unfinalize(action)
            if isinstance(action, SetPodCondition):
                return await self._condition(action)
        except ApiException as exc:
            raise _kube_error(exc, name) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Transient(f"{name}: Kubernetes API unreachable: {exc}") from exc
        except slurm_errors.Unsupported as exc:
            return EffectResult("unsupported", str(exc))
        except (slurm_errors.Unavailable, slurm_errors.Conflict, slurm_errors.Unauthorized) as exc:
            raise Transient(f"{name}: {exc}") from exc
        except slurm_errors.SlurmError as exc:
            raise Permanent(f"{name}: {exc}") from exc
        raise Permanent(f"PodEffector cannot perform {name}")

    async def _patch(self, pod: PodRef, body: Any, content_type: str = MERGE) -> None:
        await _patch_pod(self.core, pod, body, content_type)

    async def _submit(self, action: SubmitSlurmJob) -> EffectResult:
        c = self._client(action.cluster)
        existing = None
        listing = await c.list_jobs()
        for job in listing.jobs if listing is not None else ():
            if job.comment == action.marker and job.base_state not in JOB_ENDED:
                existing = job.job_id
                break
        outcome = "noop"
        raws: list[RawPod | None] | None = None
        if existing is None:
            spec = action.spec
            admin = msgspec.json.encode({"pods": [p.key for p in action.pods]}).decode()
            submit = c.submit_job(
                JobSubmit(
                    name=spec.name,
                    partition=spec.partition,
                    account=spec.account,
                    qos=spec.qos,
                    reservation=spec.reservation,
                    wckey=spec.wckey,
                    constraints=spec.constraints,
                    licenses=spec.licenses,
                    cpus_per_task=spec.cpus_per_task,
                    tasks=spec.tasks,
                    min_nodes=spec.min_nodes,
                    max_nodes=spec.max_nodes,
                    memory_per_node_mib=spec.memory_per_node_mib,
                    tres_per_node=spec.tres_per_node,
                    time_limit_minutes=spec.time_limit_minutes,
                    priority=spec.priority,
                    user_id=spec.user_id,
                    group_id=spec.group_id,
                    exclusive=spec.exclusive,
                    excluded_nodes=spec.excluded_nodes,
                    mcs_label=spec.mcs_label,
                    admin_comment=admin,
                    comment=action.marker,
                    external=True,
                )
            )
            # The pods are read while Slurm takes the job, so once it exists (and may
            # already run) marking them costs one request each, not two.
            try:
                job_id, read = await asyncio.gather(
                    submit, asyncio.gather(*(_read_pod(self.core, pod) for pod in action.pods))
                )
            except slurm_errors.Rejected as exc:
                return await self._refused(action, exc)
            existing, raws = job_id, list(read)
            outcome = "ok"
            if self.on_job_changed is not None:
                self.on_job_changed(action.cluster, existing)
        marked = await self._mark_all(action.pods, existing, action.scheduler_name, raws)
        return EffectResult(
            "ok" if "ok" in (outcome, marked.outcome) else "noop", f"Slurm job {existing}"
        )

    async def _refused(self, action: SubmitSlurmJob, exc: slurm_errors.Rejected) -> EffectResult:
        """Slurm refused the submit for good (a role the token lacks, a job Slurm cannot
        take): say so on every pod, as kube-scheduler does for a pod it cannot place —
        ``PodScheduled=False`` with reason ``SlurmJobRejected`` and Slurm's words, and a
        Warning Event. ``placement`` reads the condition and waits before submitting again,
        so a permanent refusal is never retried in a loop."""
        message = f"Slurm refused the placeholder job: {exc}"
        if isinstance(exc, slurm_errors.Forbidden):
            message += (
                " (the Slurm token's user lacks the role for this request; docs/slurm.md"
                " lists the role the bridge needs)"
            )
        for pod in action.pods:
            await self._condition(
                SetPodCondition(
                    pod=pod,
                    type=wellknown.CONDITION_POD_SCHEDULED,
                    status="False",
                    reason=wellknown.REASON_SLURM_JOB_REJECTED,
                    message=message,
                )
            )
            await self._events.apply(
                RecordEvent(
                    api_version="v1",
                    object_kind="Pod",
                    name=pod.name,
                    namespace=pod.namespace,
                    uid=pod.uid,
                    type="Warning",
                    reason=wellknown.REASON_SLURM_JOB_REJECTED,
                    message=message,
                )
            )
        return EffectResult("rejected", message)

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
        """Mark one pod, starting from ``raw`` when it was just read; a pod that changed in
        between (the patch's test fails) is read again once before giving up for now."""
        for attempt in range(2):
            if raw is None or attempt:
                raw = await _read_pod(self.core, pod)
            try:
                return await self._mark_once(pod, job_id, scheduler_name, raw)
            except ApiException as exc:
                if exc.status == 404:  # deleted between the read and the patch
                    return 0
                if exc.status != 422:
                    raise
                if attempt:  # changing under us: let the redelivery read it afresh
                    raise Transient(f"MarkPods: pod {pod.key} keeps changing") from exc
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
                path = "/metadata/annotations/" + _pointer(wellknown.ANNOTATION_SLURM_NODE)
                ops.append({"op": "remove", "path": path})
            if labels:
                path = "/metadata/labels/" + _pointer(wellknown.LABEL_SLURM_JOBID)
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

    async def _bind(self, action: BindPod) -> EffectResult:
        # One request: the API server copies the Binding's annotations onto the pod, refuses
        # (409) a pod already bound or being deleted, and checks the uid precondition.
        meta: dict[str, Any] = {
            "name": action.pod.name,
            "namespace": action.pod.namespace,
            "annotations": {wellknown.ANNOTATION_SLURM_NODE: action.slurm_node},
        }
        if action.pod.uid:
            meta["uid"] = action.pod.uid
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": action.node},
        }
        create: Any = self.core.create_namespaced_pod_binding
        try:
            await _raw(create(action.pod.name, action.pod.namespace, body, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "pod is gone")
            if exc.status != 409:
                raise
            raw = await _read_pod(self.core, action.pod)
            if raw is None:
                return EffectResult("noop", "pod is gone")
            if raw.spec.nodeName == action.node:
                return EffectResult("noop", f"already bound to {action.node}")
            if raw.spec.nodeName:
                return EffectResult("skipped", f"bound to {raw.spec.nodeName}, not {action.node}")
            if raw.metadata.deletionTimestamp:
                return EffectResult("skipped", "pod is being deleted")
            raise
        return EffectResult("ok", f"bound to {action.node}")

    async def _cancel(self, action: CancelSlurmJob) -> EffectResult:
        c = self._client(action.cluster)
        job = await c.get_job(action.job_id)
        if job is None:
            return EffectResult("noop", "no such job")
        if job.comment != action.marker:
            return EffectResult("skipped", f"job {action.job_id} is not ours")
        if job.base_state in JOB_ENDED:
            return EffectResult("noop", f"job already {job.base_state}")
        if not c.may_cancel(job):
            # A user who is not an administrator cancelling someone else's job over REST
            # deadlocks slurmctld (24.11.5 and 26.05.5); such a job was not submitted by us
            # anyway (only an administrator can submit for another user).
            return EffectResult(
                "skipped",
                f"job {action.job_id} belongs to {job.user_name!r}, not to the token's user "
                f"{c.token_user!r}: not cancelled",
            )
        await c.cancel_job(action.job_id)
        if self.on_job_changed is not None:
            self.on_job_changed(action.cluster, action.job_id)
        return EffectResult("ok", action.why)

    async def _exclusions(self, action: SetJobExcludedNodes) -> EffectResult:
        """Re-read the job: only ours, only while PENDING, only when the list differs."""
        c = self._client(action.cluster)
        job = await c.get_job(action.job_id)
        if job is None or job.base_state != "PENDING":
            return EffectResult("noop", "job is not pending")
        if job.comment != action.marker:
            return EffectResult("skipped", f"job {action.job_id} is not ours")
        if sorted(job.excluded_nodes) == sorted(action.excluded_nodes):
            return EffectResult("noop", "excluded nodes already as wanted")
        try:
            await c.set_job_excluded_nodes(action.job_id, action.excluded_nodes)
        except slurm_errors.Rejected as exc:
            # It started meanwhile (ESLURM_JOB_NOT_PENDING and the like): nothing to change.
            return EffectResult("noop", f"job no longer pending: {exc}")
        if self.on_job_changed is not None:
            self.on_job_changed(action.cluster, action.job_id)
        return EffectResult("ok", f"excluded nodes now {','.join(action.excluded_nodes) or 'none'}")

    async def _delete(self, action: DeletePod) -> EffectResult:
        c = self._client(action.cluster)
        # Both reads at once: the pod is only deleted if the job, read from Slurm now, is
        # not RUNNING (fail closed), and the pod read gives the uid precondition.
        job, raw = await asyncio.gather(
            c.get_job(action.job_id) if action.job_id else _none(), _read_pod(self.core, action.pod)
        )
        if job is not None and job.base_state == "RUNNING":
            return EffectResult("skipped", f"job {action.job_id} is RUNNING")
        if raw is None:
            return EffectResult("noop", "pod is gone")
        if raw.metadata.deletionTimestamp:
            return EffectResult("noop", "pod is already being deleted")
        delete: Any = self.core.delete_namespaced_pod
        try:
            await _raw(
                delete(
                    action.pod.name,
                    action.pod.namespace,
                    body={"preconditions": {"uid": raw.metadata.uid}},
                    _preload_content=False,
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "pod is gone")
            raise
        return EffectResult("ok", action.why)

    async def _unfinalize(self, action: RemovePodFinalizer) -> EffectResult:
        raw = await _read_pod(self.core, action.pod)
        if raw is None:
            return EffectResult("noop", "pod is gone")
        finalizers = list(raw.metadata.finalizers or [])
        if action.finalizer not in finalizers:
            return EffectResult("noop", "finalizer already removed")
        rest = [f for f in finalizers if f != action.finalizer]
        body = {
            "metadata": {
                "resourceVersion": raw.metadata.resourceVersion,
                "finalizers": rest or None,
            }
        }
        try:
            await self._patch(action.pod, body)
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "pod is gone")
            raise
        return EffectResult("ok", action.why)

    async def _condition(self, action: SetPodCondition) -> EffectResult:
        """Read the pod (its uid must be the action's: a pod re-created under the name gets
        its own decision), then strategic-merge its condition with the resourceVersion read
        as precondition; ``lastTransitionTime`` moves only when the status flips (Kubernetes
        API conventions)."""
        raw = await _read_pod(self.core, action.pod)
        if raw is None:
            return EffectResult("noop", "pod is gone")
        cur = next((c for c in raw.status.conditions or [] if c.type == action.type), None)
        if cur is not None and (cur.status, cur.reason, cur.message) == (
            action.status,
            action.reason,
            action.message,
        ):
            return EffectResult("noop", "condition already set")
        since = cur.lastTransitionTime if cur is not None and cur.status == action.status else None
        body = {
            "metadata": {"resourceVersion": raw.metadata.resourceVersion},
            "status": {
                "conditions": [
                    {
                        "type": action.type,
                        "status": action.status,
                        "reason": action.reason,
                        "message": action.message,
                        "lastTransitionTime": since or _now(),
                    }
                ]
            },
        }
        patch_status: Any = self.core.patch_namespaced_pod_status
        try:
            await _raw(
                patch_status(
                    action.pod.name,
                    action.pod.namespace,
                    body,
                    _content_type=SMP,
                    _preload_content=False,
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "pod is gone")
            raise
        return EffectResult("ok")


NODESET_ACTIONS = (
    CreateNodeSetPod,
    DeleteNodeSetPod,
    SetNodeSetStatus,
    SetPodLabel,
    ScaleNodeSet,
    DeleteFailedNodeSetPod,
    EnsureNodeSetPDB,
)
_NODESET_API = ("slinky.slurm.net", "v1alpha1")


class NodeSetEffector:
    """NodeSet actions (Slinky slurm-operator NodeSet controller semantics).

    * create pod: read the NodeSet (its uid must be the action's: a re-created NodeSet gets
      its own decision), build the pod from ``spec.template`` — name and hostname the pod
      name, ``subdomain`` the ``serviceName``, labels ``app.kubernetes.io/name=slurmd`` and
      ``app.kubernetes.io/instance=<nodeset>``, the NodeSet as controller owner — and create
      it; it exists already ⇒ noop;
    * delete pod: ask Slurm for the pod's node first. Unknown to Slurm ⇒ delete; DRAIN and
      not ALLOCATED / MIXED / COMPLETING ⇒ delete (uid precondition); otherwise skipped; the
      lookup failing ⇒ Transient (*not* drained: slurm-operator PR #79);
    * status: read the NodeSet (uid check), merge patch of the status subresource with the
      read's resourceVersion; pod label: read the pod (uid check), JSON patch testing
      ``/metadata/uid``; scale: see :meth:`_scale`. (A ``metadata.uid`` in a merge patch is
      no precondition on a real API server: 422 on a main resource, ignored on a custom
      resource's ``/status`` and ``/scale``.)

    Raises Transient / Permanent as the other effectors do.
    """

    def __init__(self, api: client.ApiClient, slurm: dict[str, SlurmClient]) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.policy = client.PolicyV1Api(api)
        self.slurm = slurm

    async def apply(self, action: AnyAction) -> EffectResult:
        """Perform one of :data:`NODESET_ACTIONS`."""
        name = type(action).__name__
        try:
            if isinstance(action, CreateNodeSetPod):
                return await self._create(action)
            if isinstance(action, DeleteNodeSetPod):
                return await self._delete(action)
            if isinstance(action, SetNodeSetStatus):
                return await self._status(action)
            if isinstance(action, SetPodLabel):
                return await self._label(action)
            if isinstance(action, ScaleNodeSet):
                return await self._scale(action)
            if isinstance(action, DeleteFailedNodeSetPod):
                return await self._delete_failed(action)
            if isinstance(action, EnsureNodeSetPDB):
                return await self._pdb(action)
        except ApiException as exc:
            raise _kube_error(exc, name) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Transient(f"{name}: Kubernetes API unreachable: {exc}") from exc
        raise Permanent(f"NodeSetEffector cannot perform {name}")

    async def _create(self, action: CreateNodeSetPod) -> EffectResult:
        ref = action.nodeset
        try:
            obj: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                *_NODESET_API, ref.namespace, "nodesets", ref.name
            )
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "NodeSet is gone")
            raise
        meta = obj.get("metadata") or {}
        if ref.uid and meta.get("uid") != ref.uid:
            return EffectResult("noop", "NodeSet was re-created")
        spec = obj.get("spec") or {}
        template = spec.get("template") or {}
        tmeta = template.get("metadata") or {}
        pod_spec = dict(template.get("spec") or {})
        pod_spec["hostname"] = action.pod_name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": action.pod_name,
                "namespace": ref.namespace,
                "labels": {
                    **(tmeta.get("labels") or {}),
                    "app.kubernetes.io/name": "slurmd",
                    "app.kubernetes.io/instance": ref.name,
                },
                "annotations": dict(tmeta.get("annotations") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "/".join(_NODESET_API),
                        "kind": "NodeSet",
                        "name": ref.name,
                        "uid": meta.get("uid", ref.uid),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": pod_spec,
        }
        create: Any = self.core.create_namespaced_pod
        try:
            await _raw(create(ref.namespace, pod, _preload_content=False))
        except ApiException as exc:
            if exc.status == 409:
                return EffectResult("noop", f"pod {action.pod_name} exists")
            raise
        return EffectResult("ok", f"created {action.pod_name}")

    async def _delete(self, action: DeleteNodeSetPod) -> EffectResult:
        c = self.slurm.get(action.cluster)
        if c is None:
            raise _no_client(action.cluster)
        try:
            node = await c.get_node(action.slurm_node)
        except slurm_errors.NotFound:
            node = None
        except slurm_errors.SlurmError as exc:
            raise Transient(
                f"DeleteNodeSetPod: cannot tell whether {action.slurm_node} is drained: {exc}"
            ) from exc
        if node is not None and not node.drained:
            return EffectResult(
                "skipped", f"Slurm node {action.slurm_node} is {'+'.join(node.state)}"
            )
        delete: Any = self.core.delete_namespaced_pod
        body = {"preconditions": {"uid": action.pod.uid}} if action.pod.uid else None
        try:
            await _raw(
                delete(action.pod.name, action.pod.namespace, body=body, _preload_content=False)
            )
        except ApiException as exc:
            if exc.status in (404, 409):  # gone, or another pod of that name now
                return EffectResult("noop", "pod is gone")
            raise
        return EffectResult("ok", "drained and idle" if node is not None else "not in Slurm")

    async def _delete_failed(self, action: DeleteFailedNodeSetPod) -> EffectResult:
        """Record the failure on the NodeSet first (so the back-off holds whatever happens
        next), then delete the pod — only that uid, only while it is terminal."""
        ref, pod = action.nodeset, action.pod
        try:
            current = _POD.decode(
                await _raw(
                    self.core.read_namespaced_pod(pod.name, pod.namespace, _preload_content=False)
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "pod is gone")
            raise
        if current.metadata.uid != pod.uid:
            return EffectResult("noop", "another pod of that name now")
        if current.status.phase not in ("Failed", "Succeeded"):
            return EffectResult("skipped", f"pod is {current.status.phase}, not terminal")
        try:
            obj: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                *_NODESET_API, ref.namespace, "nodesets", ref.name
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            obj = {}
        meta = obj.get("metadata") or {}
        if meta and (not ref.uid or meta.get("uid") == ref.uid):
            ann = wellknown.ANNOTATION_NODESET_POD_FAILURES
            try:
                found = msgspec.json.decode((meta.get("annotations") or {}).get(ann, "{}"))
            except msgspec.DecodeError:
                found = {}
            # Whatever someone wrote there ("5", "[]"): start a fresh count, not a TypeError.
            failures = dict(found) if isinstance(found, dict) else {}
            horizon = action.at - 600
            failures = {
                k: v
                for k, v in failures.items()
                if isinstance(v, list) and len(v) == 3 and isinstance(v[1], int) and v[1] > horizon
            }
            failures[pod.name] = [action.failures, action.at, pod.uid]
            body = {
                "metadata": {
                    "resourceVersion": meta.get("resourceVersion", ""),
                    "annotations": {ann: msgspec.json.encode(failures).decode()},
                }
            }
            await self._merge(self.custom.patch_namespaced_custom_object, ref, body)
        delete: Any = self.core.delete_namespaced_pod
        try:
            await _raw(
                delete(
                    pod.name,
                    pod.namespace,
                    body={"preconditions": {"uid": pod.uid}},
                    _preload_content=False,
                )
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                return EffectResult("noop", "pod is gone")
            raise
        return EffectResult("ok", f"failure {action.failures} of {pod.name} recorded")

    async def _pdb(self, action: EnsureNodeSetPDB) -> EffectResult:
        """Create PodDisruptionBudget ``<nodeset>`` unless one of that name exists (ours or
        someone else's: an existing PDB is never changed)."""
        ref = action.nodeset
        body = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "name": ref.name,
                "namespace": ref.namespace,
                "labels": {"app.kubernetes.io/managed-by": "slurmbridge"},
                "ownerReferences": [
                    {
                        "apiVersion": "slinky.slurm.net/v1alpha1",
                        "kind": "NodeSet",
                        "name": ref.name,
                        "uid": ref.uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ]
                if ref.uid
                else [],
            },
            "spec": {
                "maxUnavailable": 0,
                "selector": {"matchLabels": dict(action.selector)},
            },
        }
        create: Any = self.policy.create_namespaced_pod_disruption_budget
        try:
            await _raw(create(ref.namespace, body, _preload_content=False))
        except ApiException as exc:
            if exc.status == 409:
                return EffectResult("noop", f"PodDisruptionBudget {ref.name} exists")
            raise
        return EffectResult("ok", f"PodDisruptionBudget {ref.name} created")

    async def _status(self, action: SetNodeSetStatus) -> EffectResult:
        """Read the NodeSet (a re-created one is not ours to write), then merge-patch its
        status with the read's resourceVersion: the real precondition (409 if it changed
        meanwhile). A uid in the patch would be none — a custom resource's ``/status``
        ignores it and writes onto whatever NodeSet has that name now."""
        ref, st = action.nodeset, action.status
        try:
            obj: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                *_NODESET_API, ref.namespace, "nodesets", ref.name
            )
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "NodeSet is gone")
            raise
        meta = obj.get("metadata") or {}
        if ref.uid and meta.get("uid") != ref.uid:
            return EffectResult("noop", "NodeSet was re-created")
        body = {
            "metadata": {"resourceVersion": meta.get("resourceVersion", "")},
            "status": {
                "replicas": st.replicas,
                "readyReplicas": st.ready_replicas,
                "availableReplicas": st.available_replicas,
                "slurmIdle": st.slurm_idle,
                "slurmAllocated": st.slurm_allocated,
                "slurmDown": st.slurm_down,
                "slurmDrain": st.slurm_drain,
                "observedGeneration": st.observed_generation,
                "selector": st.selector,
            },
        }
        if not await self._merge(self.custom.patch_namespaced_custom_object_status, ref, body):
            return EffectResult("noop", "NodeSet is gone")
        return EffectResult("ok")

    async def _merge(self, call: Any, ref: NodeSetRef, body: dict[str, Any]) -> bool:
        """Merge-patch NodeSet ``ref`` (or its subresource, by ``call``); False if gone."""
        return await _merge_custom(call, "nodesets", ref.namespace, ref.name, body)

    async def _scale(self, action: ScaleNodeSet) -> EffectResult:
        """Read the Scale, stamp the cool-down annotations, then scale — each write guarded by
        a precondition the API server enforces (a uid in a merge patch is none: ``/scale``
        ignores it, the main resource answers 422):

        * the stamp is a merge patch carrying the Scale's resourceVersion (the NodeSet's own),
          so it fails (409, retried) if the NodeSet changed — or was re-created — since;
        * the scale is a JSON patch whose first op tests ``/metadata/uid`` (422 for another
          NodeSet of that name), so status writes in between do not make it fail.

        Stamp first: a retry after a failed scale writes the same stamp again, while a lost
        stamp after a done scale would never be written (the retry sees the replicas done).
        """
        ref = action.nodeset
        current = await self._read_scale(ref)
        if current is None:
            return EffectResult("noop", "NodeSet is gone")
        meta = current.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if ref.uid and uid != ref.uid:
            return EffectResult("noop", "NodeSet was re-created")
        # autoscaling/v1 ScaleSpec.replicas is omitempty: a NodeSet at zero answers "spec": {}.
        before = int((current.get("spec") or {}).get("replicas") or 0)
        if before == action.replicas:
            # Decided again before the change reached the log: done already, and the
            # cool-down clock keeps the first change's time.
            return EffectResult("noop", f"already {action.replicas} replica(s)")
        # The autoscaler's cool-down clock lives on the object it scales.
        stamp = {
            "metadata": {
                "resourceVersion": str(meta.get("resourceVersion") or ""),
                "annotations": {
                    wellknown.ANNOTATION_AUTOSCALE_LAST_SCALE: str(action.at),
                    wellknown.ANNOTATION_AUTOSCALE_LAST_DIRECTION: "up"
                    if action.replicas > before
                    else "down",
                },
            }
        }
        if not await self._merge(self.custom.patch_namespaced_custom_object, ref, stamp):
            return EffectResult("noop", "NodeSet is gone")
        ops = [
            {"op": "test", "path": "/metadata/uid", "value": uid},
            {"op": "add", "path": "/spec/replicas", "value": action.replicas},
        ]
        patch_scale: Any = self.custom.patch_namespaced_custom_object_scale
        try:
            await _raw(
                patch_scale(
                    *_NODESET_API,
                    ref.namespace,
                    "nodesets",
                    ref.name,
                    ops,
                    _content_type=JSON_PATCH,
                    _preload_content=False,
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "NodeSet is gone")
            if exc.status == 422:
                now = await self._read_scale(ref)
                if now is None or (now.get("metadata") or {}).get("uid") != uid:
                    return EffectResult("noop", "NodeSet was re-created")
            raise
        return EffectResult("ok", action.why)

    async def _read_scale(self, ref: NodeSetRef) -> dict[str, Any] | None:
        """NodeSet ``ref``'s Scale, or None when the NodeSet is gone."""
        try:
            scale: dict[str, Any] = await self.custom.get_namespaced_custom_object_scale(
                *_NODESET_API, ref.namespace, "nodesets", ref.name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return scale

    async def _label(self, action: SetPodLabel) -> EffectResult:
        """Read the pod (gone, or another pod of that name now ⇒ noop), skip when the label is
        already as wanted, then one JSON patch whose first op tests ``/metadata/uid``: a merge
        patch carrying the uid would answer 422 ``field is immutable`` for a replaced pod, not
        a precondition failure. Without a labels map to add to, the patch also tests the
        resourceVersion read, so labels added meanwhile are never overwritten."""
        pod = action.pod
        raw = await _read_pod(self.core, pod)
        if raw is None:
            return EffectResult("noop", "pod is gone")
        labels = raw.metadata.labels or {}
        if labels.get(action.label) == action.value:
            return EffectResult("noop", "label already as wanted")
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/uid", "value": raw.metadata.uid}
        ]
        path = "/metadata/labels/" + _pointer(action.label)
        if action.value is None:
            ops.append({"op": "remove", "path": path})
        elif labels:
            ops.append({"op": "add", "path": path, "value": action.value})
        else:
            ops += [
                {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": raw.metadata.resourceVersion,
                },
                {"op": "add", "path": "/metadata/labels", "value": {action.label: action.value}},
            ]
        try:
            await _patch_pod(self.core, pod, ops, JSON_PATCH)
        except ApiException as exc:
            if exc.status == 404:
                return EffectResult("noop", "pod is gone")
            if exc.status != 422:
                raise
            now = await _read_pod(self.core, pod)
            if now is None or now.metadata.uid != raw.metadata.uid:
                return EffectResult("noop", "pod is gone")
            if now.metadata.resourceVersion != raw.metadata.resourceVersion:
                raise Transient(f"SetPodLabel: pod {pod.key} changed meanwhile", 0.1) from exc
            raise
        return EffectResult("ok")


class Router:
    """Sends each action to the effector that handles its type."""

    def __init__(
        self,
        kube: KubeEffector | None,
        slurm: SlurmEffector | None,
        pods: PodEffector | None = None,
        nodesets: NodeSetEffector | None = None,
    ) -> None:
        self.kube = kube
        self.slurm = slurm
        self.pods = pods
        self.nodesets = nodesets

    async def apply(self, action: AnyAction) -> EffectResult:
        """Dispatch ``action``; Permanent when the needed side is not configured."""
        if isinstance(action, NODESET_ACTIONS):
            if self.nodesets is None:
                raise Permanent("NodeSet actions need both a Kubernetes API and a Slurm cluster")
            return await self.nodesets.apply(action)
        if isinstance(action, POD_ACTIONS):
            if self.pods is None:
                raise Permanent("pod actions need both a Kubernetes API and a Slurm cluster")
            return await self.pods.apply(action)
        if isinstance(
            action,
            DrainSlurmNode
            | UndrainSlurmNode
            | CreateSlurmNode
            | DeleteSlurmNode
            | UpdateSlurmNodeFeatures
            | UpdateSlurmNodeTopology,
        ):
            if self.slurm is None:
                raise Permanent("no Slurm cluster configured")
            return await self.slurm.apply(action)
        if self.kube is None:
            raise Permanent("no Kubernetes API configured")
        return await self.kube.apply(action)
