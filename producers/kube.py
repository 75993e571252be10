"""Kubernetes producer: watch Nodes, Pods and pod-group owners; publish trimmed observations.

Translation only — no decisions. :func:`node_to_event`, :func:`pod_to_event` and
:func:`workload_to_event` are the pure translations; the watchers (:class:`NodeWatcher`,
:class:`PodWatcher` for pods with our ``schedulerName``, :class:`WorkloadWatcher` for Jobs,
JobSets, LeaderWorkerSets and PodGroups) share :class:`Watcher`, which does the I/O:

1. **list** nodes (raw JSON, decoded straight into msgspec Structs: kubernetes_asyncio's
   generated models are slow to build for large lists and are not needed for a trimmed
   snapshot), publish what differs from what was last published, and a tombstone for every
   node that vanished since (so deletions missed while not watching are not lost);
2. **watch** from the list's resourceVersion with bookmarks; every event is translated and
   published (identical trimmed content — e.g. a kubelet heartbeat — is not re-published);
3. on ``410 Gone``, an in-stream ERROR, a broken stream or a timeout: re-watch from the last
   resourceVersion, or re-list when it expired. The task is supervised: any unexpected error
   is logged and the cycle restarts with back-off instead of ending the producer.

Failures back off quietly (:class:`Backoff`: exponential with jitter, capped, never sooner than
the server's ``Retry-After``): an API server that restarts answers 503 on custom resources
until their paths are installed, then 429 "storage is (re)initializing" for several seconds,
and eleven watchers retrying at once used to log a warning per attempt. :class:`Outage` logs
one warning when a watcher starts failing and one info line, with the outage's length, once
its watch stream delivers again.

Liveness is exported per watcher (``slurmbridge_watch_seconds_since_alive``,
``slurmbridge_watch_connected``): a real API server sends a bookmark only when the kind's
resourceVersion moved past the one the watch started from (none at all on an idle kind), so a
healthy quiet watch is alive because its stream is open and the server ends it cleanly every
``watch_timeout`` seconds, not because events arrive.

What was last published is seeded from the projection (the log), so a restarted producer
re-publishes nothing that did not change. ``Nats-Msg-Id`` is ``uid:resourceVersion`` (for a
tombstone ``uid:resourceVersion:deleted``), so two producers watching at once dedupe.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Final, Generic, TypeVar

import aiohttp
import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas import subjects
from schemas.events import (
    Event,
    KubeListed,
    KubeNode,
    KubeNodeSet,
    KubePod,
    KubeScaler,
    KubeWorkload,
    NodeCondition,
    NodeSetStatus,
    OwnerRef,
    PodCondition,
    SlurmCluster,
    Taint,
    workload_key,
)
from slurmbridge.observability import metrics
from slurmbridge.runtime.gcpause import collector_paused

log = logging.getLogger(__name__)

E = TypeVar("E", bound=Event)


# --- raw shapes (only what we read) --------------------------------------------------------


class _Meta(msgspec.Struct, kw_only=True):
    name: str = ""
    uid: str = ""
    resourceVersion: str = ""  # noqa: N815 - Kubernetes wire name
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class RawTaint(msgspec.Struct, kw_only=True):
    """A v1 Taint as it is on the wire."""

    key: str = ""
    value: str | None = None
    effect: str = ""
    timeAdded: str | None = None  # noqa: N815 - Kubernetes wire name


class _NodeSpec(msgspec.Struct, kw_only=True):
    unschedulable: bool | None = None
    taints: list[RawTaint] | None = None


class _Condition(msgspec.Struct, kw_only=True):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    lastTransitionTime: str | None = None  # noqa: N815 (Kubernetes' field name)


class _NodeStatus(msgspec.Struct, kw_only=True):
    capacity: dict[str, str] | None = None
    conditions: list[_Condition] | None = None


class RawNode(msgspec.Struct, kw_only=True):
    """The fields of a v1 Node that slurmbridge reads."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _NodeSpec = msgspec.field(default_factory=_NodeSpec)
    status: _NodeStatus = msgspec.field(default_factory=_NodeStatus)


class _ListMeta(msgspec.Struct, kw_only=True):
    resourceVersion: str = ""  # noqa: N815
    # "continue" is a Python keyword; msgspec renames it on the wire.
    continue_: str | None = msgspec.field(default=None, name="continue")


class _ListPage(msgspec.Struct, kw_only=True):
    """Any list response's metadata (its items skipped): the resourceVersion and the
    ``continue`` token of a paged list."""

    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)


class RawNodeList(msgspec.Struct, kw_only=True):
    """A v1 NodeList."""

    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[RawNode] = []


class _StatusDetails(msgspec.Struct, kw_only=True):
    retryAfterSeconds: int = 0  # noqa: N815 - Kubernetes wire name


class _Status(msgspec.Struct, kw_only=True):
    code: int = 0
    reason: str = ""
    message: str = ""
    details: _StatusDetails | None = None


class RawWatchEvent(msgspec.Struct, kw_only=True):
    """One watch line: ``type`` ADDED | MODIFIED | DELETED | BOOKMARK | ERROR."""

    type: str
    object: msgspec.Raw


class RawOwnerRef(msgspec.Struct, kw_only=True):
    """A metadata.ownerReferences entry."""

    apiVersion: str = ""  # noqa: N815
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class _ObjMeta(msgspec.Struct, kw_only=True):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""  # noqa: N815
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    finalizers: list[str] | None = None
    deletionTimestamp: str | None = None  # noqa: N815
    deletionGracePeriodSeconds: int | None = None  # noqa: N815
    creationTimestamp: str | None = None  # noqa: N815
    ownerReferences: list[RawOwnerRef] | None = None  # noqa: N815


class _Resources(msgspec.Struct, kw_only=True):
    requests: dict[str, str] | None = None
    limits: dict[str, str] | None = None


class _Container(msgspec.Struct, kw_only=True):
    resources: _Resources = msgspec.field(default_factory=_Resources)


class _Toleration(msgspec.Struct, kw_only=True):
    key: str | None = None
    operator: str | None = None


class _PodSpec(msgspec.Struct, kw_only=True):
    nodeName: str | None = None  # noqa: N815
    schedulerName: str | None = None  # noqa: N815
    containers: list[_Container] | None = None
    initContainers: list[_Container] | None = None  # noqa: N815
    overhead: dict[str, str] | None = None
    tolerations: list[_Toleration] | None = None
    #: Pod-level resources (Kubernetes 1.32+, PodLevelResources): win over the containers'.
    resources: _Resources | None = None


class _PodStatus(msgspec.Struct, kw_only=True):
    phase: str | None = None
    conditions: list[_Condition] | None = None


class RawPod(msgspec.Struct, kw_only=True):
    """The fields of a v1 Pod that slurmbridge reads."""

    metadata: _ObjMeta = msgspec.field(default_factory=_ObjMeta)
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)
    status: _PodStatus = msgspec.field(default_factory=_PodStatus)


class RawPodList(msgspec.Struct, kw_only=True):
    """A v1 PodList."""

    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[RawPod] = []


class _JobTemplateSpec(msgspec.Struct, kw_only=True):
    parallelism: int | None = None


class _JobTemplate(msgspec.Struct, kw_only=True):
    spec: _JobTemplateSpec = msgspec.field(default_factory=_JobTemplateSpec)


class _ReplicatedJob(msgspec.Struct, kw_only=True):
    replicas: int | None = None
    template: _JobTemplate = msgspec.field(default_factory=_JobTemplate)


class _LeaderWorkerTemplate(msgspec.Struct, kw_only=True):
    size: int | None = None


class _WorkloadSpec(msgspec.Struct, kw_only=True):
    parallelism: int | None = None  # batch/v1 Job
    activeDeadlineSeconds: int | None = None  # noqa: N815 - batch/v1 Job
    replicatedJobs: list[_ReplicatedJob] | None = None  # noqa: N815 - JobSet
    leaderWorkerTemplate: _LeaderWorkerTemplate | None = None  # noqa: N815 - LeaderWorkerSet
    minMember: int | None = None  # noqa: N815 - PodGroup
    minResources: dict[str, str] | None = None  # noqa: N815 - PodGroup


class _WorkloadStatus(msgspec.Struct, kw_only=True):
    phase: str | None = None  # PodGroup (coscheduling): Pending, Running, Finished …


class RawWorkload(msgspec.Struct, kw_only=True):
    """The fields of a Job / JobSet / LeaderWorkerSet / PodGroup that slurmbridge reads."""

    apiVersion: str = ""  # noqa: N815
    kind: str = ""
    metadata: _ObjMeta = msgspec.field(default_factory=_ObjMeta)
    spec: _WorkloadSpec = msgspec.field(default_factory=_WorkloadSpec)
    status: _WorkloadStatus = msgspec.field(default_factory=_WorkloadStatus)


class RawWorkloadList(msgspec.Struct, kw_only=True):
    """A list of workload objects."""

    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[RawWorkload] = []


class _Selector(msgspec.Struct, kw_only=True):
    matchLabels: dict[str, str] | None = None  # noqa: N815


class _NodeSetSpec(msgspec.Struct, kw_only=True):
    replicas: int | None = None
    clusterName: str = ""  # noqa: N815
    ordinalPadding: int = 0  # noqa: N815
    serviceName: str = ""  # noqa: N815
    selector: _Selector | None = None


class _NodeSetStatus(msgspec.Struct, kw_only=True):
    replicas: int = 0
    readyReplicas: int = 0  # noqa: N815
    availableReplicas: int = 0  # noqa: N815
    slurmIdle: int = 0  # noqa: N815
    slurmAllocated: int = 0  # noqa: N815
    slurmDown: int = 0  # noqa: N815
    slurmDrain: int = 0  # noqa: N815
    observedGeneration: int = 0  # noqa: N815
    selector: str = ""


class _NodeSetMeta(_ObjMeta, kw_only=True):
    generation: int = 0


class RawNodeSet(msgspec.Struct, kw_only=True):
    """The fields of a Slinky NodeSet that slurmbridge reads."""

    metadata: _NodeSetMeta = msgspec.field(default_factory=_NodeSetMeta)
    spec: _NodeSetSpec = msgspec.field(default_factory=_NodeSetSpec)
    status: _NodeSetStatus = msgspec.field(default_factory=_NodeSetStatus)


class RawNodeSetList(msgspec.Struct, kw_only=True):
    """A NodeSetList."""

    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[RawNodeSet] = []


class _SecretRef(msgspec.Struct, kw_only=True):
    name: str = ""
    key: str = "auth-token"


class _ClusterToken(msgspec.Struct, kw_only=True):
    secretRef: _SecretRef = msgspec.field(default_factory=_SecretRef)  # noqa: N815


class _ClusterSpec(msgspec.Struct, kw_only=True):
    server: str = ""
    token: _ClusterToken = msgspec.field(default_factory=_ClusterToken)


class _ClusterStatus(msgspec.Struct, kw_only=True):
    isReady: bool | None = None  # noqa: N815
    conditions: list[_Condition] | None = None


class RawCluster(msgspec.Struct, kw_only=True):
    """The fields of a Slinky Cluster that slurmbridge reads."""

    metadata: _NodeSetMeta = msgspec.field(default_factory=_NodeSetMeta)
    spec: _ClusterSpec = msgspec.field(default_factory=_ClusterSpec)
    status: _ClusterStatus = msgspec.field(default_factory=_ClusterStatus)


class RawClusterList(msgspec.Struct, kw_only=True):
    """A ClusterList."""

    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[RawCluster] = []


class _ScaleTargetRef(msgspec.Struct, kw_only=True):
    apiVersion: str = ""  # noqa: N815
    kind: str = ""
    name: str = ""


class _ScalerSpec(msgspec.Struct, kw_only=True):
    scaleTargetRef: _ScaleTargetRef = msgspec.field(default_factory=_ScaleTargetRef)  # noqa: N815


class RawScaler(msgspec.Struct, kw_only=True):
    """The fields of a HorizontalPodAutoscaler or KEDA ScaledObject slurmbridge reads."""

    kind: str = ""
    metadata: _ObjMeta = msgspec.field(default_factory=_ObjMeta)
    spec: _ScalerSpec = msgspec.field(default_factory=_ScalerSpec)


class RawScalerList(msgspec.Struct, kw_only=True):
    """A HorizontalPodAutoscalerList or ScaledObjectList."""

    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[RawScaler] = []


_SCALER_LIST = msgspec.json.Decoder(RawScalerList)
_SCALER = msgspec.json.Decoder(RawScaler)
_CLUSTER_LIST = msgspec.json.Decoder(RawClusterList)
_CLUSTER = msgspec.json.Decoder(RawCluster)
_NODESET_LIST = msgspec.json.Decoder(RawNodeSetList)
_NODESET = msgspec.json.Decoder(RawNodeSet)
_POD_LIST = msgspec.json.Decoder(RawPodList)
_POD = msgspec.json.Decoder(RawPod)
_WORKLOAD_LIST = msgspec.json.Decoder(RawWorkloadList)
_WORKLOAD = msgspec.json.Decoder(RawWorkload)
_NODE_LIST = msgspec.json.Decoder(RawNodeList)
_NODE = msgspec.json.Decoder(RawNode)
_WATCH = msgspec.json.Decoder(RawWatchEvent)
_STATUS = msgspec.json.Decoder(_Status)
_LIST_PAGE = msgspec.json.Decoder(_ListPage)


# --- pure translation ----------------------------------------------------------------------

_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
SLINKY_ANNOTATION = "slinky.slurm.net/"


@functools.lru_cache(maxsize=4096)
def parse_quantity(value: str) -> float:
    """A Kubernetes resource quantity (``"3500m"``, ``"16Gi"``, ``"1e9"``) as a number.

    Memoised: a cluster's pods repeat a handful of quantities, and a list of 150,000 pods
    parses each container's requests and limits (bench/kube_scale.py).

    Raises:
        ValueError: not a quantity (names the value).
    """
    m = _QTY.match(value.strip())
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"quantity {value!r}: not a Kubernetes resource quantity")
    try:
        number = float(m.group(1))
    except ValueError:
        raise ValueError(f"quantity {value!r}: not a Kubernetes resource quantity") from None
    return number * _SUFFIX[m.group(2)]


def _capacity(cap: dict[str, str], name: str, scale: float) -> int:
    raw = cap.get(name)
    if raw is None:
        return 0
    try:
        return int(parse_quantity(raw) * scale + 1e-9)
    except ValueError:
        log.warning("node capacity %s=%r is not a quantity; using 0", name, raw)
        return 0


def node_to_event(raw: RawNode, *, producer: str, observed_at: int) -> KubeNode:
    """Translate a raw Node into a ``KubeNode`` observation (pure).

    ``cpu_millis`` from ``capacity.cpu``; ``memory_bytes`` from ``capacity.memory``;
    ``gpus`` sums ``nvidia.com/gpu`` and ``amd.com/gpu``; ``ready`` from the Ready condition;
    ``annotations`` keeps only Slinky's (``*slinky.slurm.net/*``).
    """
    md, spec, status = raw.metadata, raw.spec, raw.status
    cap = status.capacity or {}
    return KubeNode(
        source=subjects.KUBE_SOURCE,
        key=md.name,
        observed_at=observed_at,
        version=md.resourceVersion,
        producer=producer,
        uid=md.uid,
        labels=dict(md.labels or {}),
        # Only Slinky's annotations: the others (CNI, CSI, kubeadm …) are large, change often
        # and no rule reads them.
        annotations={k: v for k, v in (md.annotations or {}).items() if SLINKY_ANNOTATION in k},
        unschedulable=bool(spec.unschedulable),
        taints=tuple(
            Taint(key=t.key, value=t.value or "", effect=t.effect) for t in (spec.taints or [])
        ),
        ready=any(c.type == "Ready" and c.status == "True" for c in status.conditions or []),
        conditions=tuple(
            NodeCondition(type=c.type, status=c.status, reason=c.reason, message=c.message)
            for c in status.conditions or []
            if c.type.startswith("Slurm")
        ),
        cpu_millis=_capacity(cap, "cpu", 1000),
        memory_bytes=_capacity(cap, "memory", 1),
        gpus=sum(_capacity(cap, g, 1) for g in GPU_RESOURCES),
    )


def tombstone(last: KubeNode, *, version: str, producer: str, observed_at: int) -> KubeNode:
    """The deletion marker for a node last seen as ``last`` (pure)."""
    return KubeNode(
        source=last.source,
        key=last.key,
        op="deleted",
        observed_at=observed_at,
        version=version,
        producer=producer,
        uid=last.uid,
    )


def same_content(a: Event, b: Event) -> bool:
    """True when two observations differ at most in envelope fields (version, time, producer)."""
    strip = {"observed_at": 0, "version": "", "producer": ""}
    return msgspec.structs.replace(a, **strip) == msgspec.structs.replace(b, **strip)


@functools.lru_cache(maxsize=4096)
def _epoch(ts: str | None) -> int:
    """An RFC 3339 timestamp as whole epoch seconds (0 when absent or malformed); memoised,
    as pods created together share their creation second."""
    if not ts:
        return 0
    try:
        return int(datetime.fromisoformat(ts).timestamp())
    except ValueError:
        return 0


def _quantity(values: dict[str, str] | None, name: str, scale: float) -> int:
    raw = (values or {}).get(name)
    if raw is None:
        return 0
    try:
        return int(parse_quantity(raw) * scale + 1e-9)
    except ValueError:
        return 0


def _container_request(c: _Container, name: str, scale: float) -> int:
    # The API server defaults a missing request to the limit.
    r = c.resources
    if r.requests and name in r.requests:
        return _quantity(r.requests, name, scale)
    return _quantity(r.limits, name, scale)


def _container_most(c: _Container, name: str, scale: float) -> int:
    """The most a container may use of a resource: the larger of its request and limit."""
    r = c.resources
    return max(_quantity(r.requests, name, scale), _quantity(r.limits, name, scale))


def _pod_most(spec: _PodSpec, name: str, scale: float) -> int:
    """The most a pod may use of a resource: pod-level ``spec.resources`` when it names the
    resource (Kubernetes 1.32+, PodLevelResources), else per container the larger of request
    and limit, as Kubernetes aggregates requests (sum, or the largest init container);
    plus ``spec.overhead``."""
    overhead = _quantity(spec.overhead, name, scale)
    pod = spec.resources
    if pod is not None and name in {**(pod.requests or {}), **(pod.limits or {})}:
        return max(_quantity(pod.requests, name, scale), _quantity(pod.limits, name, scale)) + (
            overhead
        )
    return _effective(spec, lambda c: _container_most(c, name, scale), overhead)


def _effective(spec: _PodSpec, amount: Callable[[_Container], int], overhead: int) -> int:
    """Kubernetes' effective pod request: max(sum of containers, largest init) + overhead."""
    main = sum(amount(c) for c in spec.containers or [])
    init = max((amount(c) for c in spec.initContainers or []), default=0)
    return max(main, init) + overhead


def _controller(refs: list[RawOwnerRef] | None) -> OwnerRef | None:
    for r in refs or []:
        if r.controller:
            return OwnerRef(api_version=r.apiVersion, kind=r.kind, name=r.name, uid=r.uid)
    return None


def pod_to_event(raw: RawPod, *, producer: str, observed_at: int) -> KubePod:
    """Translate a raw Pod into a ``KubePod`` observation (pure; see KubePod for the fields)."""
    md, spec, status = raw.metadata, raw.spec, raw.status

    def gpus(c: _Container) -> int:
        return sum(_quantity(c.resources.limits, g, 1) for g in GPU_RESOURCES)

    return KubePod(
        source=subjects.KUBE_SOURCE,
        key=f"{md.namespace}/{md.name}",
        observed_at=observed_at,
        version=md.resourceVersion,
        producer=producer,
        uid=md.uid,
        namespace=md.namespace,
        name=md.name,
        phase=status.phase or "Pending",
        node_name=spec.nodeName or "",
        scheduler_name=spec.schedulerName or "",
        labels=dict(md.labels or {}),
        annotations={k: v for k, v in (md.annotations or {}).items() if SLINKY_ANNOTATION in k},
        finalizers=tuple(md.finalizers or ()),
        deletion_timestamp=_epoch(md.deletionTimestamp),
        deletion_grace_s=md.deletionGracePeriodSeconds or 0,
        cpu_millis=_effective(
            spec,
            lambda c: _container_request(c, "cpu", 1000),
            _quantity(spec.overhead, "cpu", 1000),
        ),
        memory_bytes=_effective(
            spec,
            lambda c: _container_request(c, "memory", 1),
            _quantity(spec.overhead, "memory", 1),
        ),
        gpus=_effective(spec, gpus, 0),
        cpu_millis_max=_pod_most(spec, "cpu", 1000),
        memory_bytes_max=_pod_most(spec, "memory", 1),
        owner=_controller(md.ownerReferences),
        ready=any(c.type == "Ready" and c.status == "True" for c in status.conditions or []),
        ready_since=next(
            (
                _epoch(c.lastTransitionTime)
                for c in status.conditions or []
                if c.type == "Ready" and c.status == "True"
            ),
            0,
        ),
        conditions=tuple(
            PodCondition(
                type=c.type,
                status=c.status,
                reason=c.reason,
                message=c.message,
                last_transition=_epoch(c.lastTransitionTime),
            )
            for c in status.conditions or []
            if c.type == "PodScheduled"
        ),
        tolerations=tuple(
            sorted({t.key or "" for t in spec.tolerations or [] if t.key or t.operator == "Exists"})
        ),
        created_at=_epoch(md.creationTimestamp),
    )


def pod_tombstone(last: KubePod, *, version: str, producer: str, observed_at: int) -> KubePod:
    """The deletion marker for a pod last seen as ``last`` (pure). It keeps the identity —
    namespace, name, uid, labels, owner, schedulerName — so consumers still find its group."""
    return KubePod(
        source=last.source,
        key=last.key,
        op="deleted",
        observed_at=observed_at,
        version=version,
        producer=producer,
        uid=last.uid,
        namespace=last.namespace,
        name=last.name,
        scheduler_name=last.scheduler_name,
        labels=last.labels,
        owner=last.owner,
    )


def workload_size(raw: RawWorkload) -> int:
    """Pods a workload object expects (see KubeWorkload.size); 0 when it cannot tell."""
    spec = raw.spec
    if raw.kind == "Job":
        return spec.parallelism if spec.parallelism is not None else 1
    if raw.kind == "JobSet":
        return sum(
            (rj.replicas if rj.replicas is not None else 1)
            * (rj.template.spec.parallelism if rj.template.spec.parallelism is not None else 1)
            for rj in spec.replicatedJobs or []
        )
    if raw.kind == "LeaderWorkerSet":
        lwt = spec.leaderWorkerTemplate
        return lwt.size if lwt is not None and lwt.size is not None else 1
    if raw.kind == "PodGroup":
        return spec.minMember or 0
    return 0


def workload_to_event(raw: RawWorkload, *, producer: str, observed_at: int) -> KubeWorkload:
    """Translate a raw Job / JobSet / LeaderWorkerSet / PodGroup (pure)."""
    md = raw.metadata
    return KubeWorkload(
        source=subjects.KUBE_SOURCE,
        key=workload_key(md.namespace, raw.kind, md.name),
        observed_at=observed_at,
        version=md.resourceVersion,
        producer=producer,
        uid=md.uid,
        namespace=md.namespace,
        name=md.name,
        workload_kind=raw.kind,
        api_version=raw.apiVersion,
        annotations={k: v for k, v in (md.annotations or {}).items() if SLINKY_ANNOTATION in k},
        size=workload_size(raw),
        owner=_controller(md.ownerReferences),
        active_deadline_s=max(0, raw.spec.activeDeadlineSeconds or 0) if raw.kind == "Job" else 0,
        min_cpu_millis=_quantity(raw.spec.minResources, "cpu", 1000),
        min_memory_bytes=_quantity(raw.spec.minResources, "memory", 1),
        phase=(raw.status.phase or "") if raw.kind == "PodGroup" else "",
    )


# --- the watchers --------------------------------------------------------------------------


class ApiStatusError(ApiException):
    """A failed request as the API server's ``Status`` says it (HTTP status or in-stream
    ERROR), with the seconds it asked us to wait (``retry_after``; None when it did not)."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(status=status, reason=message)
        self.retry_after = retry_after


def status_error(resp: Any, body: bytes) -> ApiStatusError:
    """The error of a non-2xx raw response: its Status message, and the wait from its
    ``Retry-After`` header (else the Status's ``details.retryAfterSeconds``)."""
    try:
        status: _Status | None = _STATUS.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        status = None
    message = status.message if status is not None else ""
    wait = _seconds(resp.headers.get("Retry-After")) if resp.headers is not None else None
    if wait is None and status is not None and status.details is not None:
        wait = float(status.details.retryAfterSeconds) or None
    return ApiStatusError(resp.status, message or str(resp.reason), wait)


def _seconds(value: str | None) -> float | None:
    # The API server always sends delta-seconds; an HTTP-date is not honoured.
    try:
        return float(value) if value else None
    except ValueError:
        return None


def retry_after(exc: BaseException) -> float | None:
    """The seconds the server asked to wait before retrying after ``exc``, or None."""
    if isinstance(exc, ApiStatusError):
        return exc.retry_after
    headers = getattr(exc, "headers", None)
    return _seconds(headers.get("Retry-After")) if headers else None


def describe(exc: BaseException) -> str:
    """One short line for a failure (ApiException's own text spans lines and headers)."""
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}".strip()
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _check_status(resp: Any, body: bytes) -> None:
    """Raise :class:`ApiStatusError` for a non-2xx raw response (kubernetes_asyncio does not
    check ``_preload_content=False`` responses): e.g. 404 for a CRD that is not installed."""
    if resp.status >= 300:
        raise status_error(resp, body)


class Backoff:
    """Exponential back-off with jitter, capped, that honours the server's ``Retry-After``.

    The n-th failure in a row waits a random time between half and all of
    ``min(cap, base · 2ⁿ⁻¹)`` ("equal jitter": watchers that fail together do not come back
    together), and never less than the server asked (``Retry-After``, trusted up to
    ``max_retry_after``). ``base`` 0.2 s re-opens a broken stream at once; ``cap`` 10 s keeps
    the bridge's own recovery within seconds of the API server's (client-go's reflectors cap
    at 30 s, sized for thousands of kubelets; these are a dozen watches of one process).
    ``rng`` is injectable so tests see the exact delays.
    """

    def __init__(
        self,
        *,
        base: float = 0.2,
        cap: float = 10.0,
        max_retry_after: float = 60.0,
        rng: random.Random | None = None,
    ) -> None:
        self.base = base
        self.cap = cap
        self.max_retry_after = max_retry_after
        self.rng = rng or random.Random()
        self.failures = 0

    def next_delay(self, retry_after: float | None = None) -> float:
        """Count one more failure; the seconds to wait before the next attempt."""
        self.failures += 1
        step = min(self.cap, self.base * 2.0 ** min(self.failures - 1, 30))
        delay = step * (0.5 + 0.5 * self.rng.random())
        if retry_after is not None and retry_after > 0:
            delay = max(delay, min(retry_after, self.max_retry_after))
        return delay

    def reset(self) -> None:
        """The next failure starts again from ``base`` (after a proven recovery)."""
        self.failures = 0


class Outage:
    """The log of one thing that retries (a watcher, a Secret's watch): ONE warning when it
    starts failing, debug lines while it keeps failing, ONE info line with the outage's length
    and attempts when it works again; and the :class:`Backoff` between attempts.

    ``what`` names it in every line (``"watch nodes"``); ``logger`` is the caller's module
    logger, ``clock`` a monotonic clock (injectable for tests).
    """

    def __init__(
        self,
        what: str,
        *,
        logger: logging.Logger | None = None,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.logger = logger or log
        self.backoff = backoff or Backoff()
        self.clock = clock
        #: When the current outage began (``clock``), None while working.
        self.since: float | None = None
        self.attempts = 0

    @property
    def failing(self) -> bool:
        """True from the first failure until :meth:`recovered`."""
        return self.since is not None

    def failed(self, exc: BaseException, *, crash: bool = False) -> float:
        """Record a failed attempt; returns the seconds to wait before the next one.

        The first failure of an outage is a warning (``crash``: an error with the traceback,
        as it is a bug rather than the server); later ones are debug lines."""
        delay = self.backoff.next_delay(retry_after(exc))
        self.attempts += 1
        if self.since is None:
            self.since = self.clock()
            if crash:
                self.logger.error(
                    "%s crashed (%s); retrying with back-off",
                    self.what,
                    describe(exc),
                    exc_info=exc,
                )
            else:
                self.logger.warning(
                    "%s failing (%s); retrying with back-off, quietly until it recovers",
                    self.what,
                    describe(exc),
                )
        else:
            self.logger.debug(
                "%s still failing (%s); next try in %.1f s", self.what, describe(exc), delay
            )
        return delay

    def recovered(self) -> None:
        """It works again: log the outage once (when there was one) and reset the back-off."""
        self.backoff.reset()
        if self.since is None:
            return
        self.logger.info(
            "%s recovered after %.1f s (%d failed attempts)",
            self.what,
            self.clock() - self.since,
            self.attempts,
        )
        self.since = None
        self.attempts = 0


class Expired(Exception):  # noqa: N818 - mirrors the API server's reason
    """The watch's resourceVersion is too old (410 Gone): re-list."""


class PublishLost(Exception):  # noqa: N818
    """An observation may not have been stored: re-list and republish everything."""


#: Watch events published but not yet acknowledged, at most.
WINDOW = 1024


Publish = Callable[[list[tuple[Any, str]]], Awaitable[object]]
Send = Callable[[Any, str], Awaitable["asyncio.Future[Any]"]]

#: The watcher exporting each ``resource`` label (several may exist in one process, e.g. a
#: standby taking over): only it sets, and at its end removes, that label's series.
_EXPORTING: dict[str, Watcher[Any]] = {}


class Watcher(Generic[E]):
    """List + watch one Kubernetes resource, publishing trimmed observations of type ``E``.

    Subclasses say how to request (:meth:`_call`), decode (:meth:`_decode_list`,
    :meth:`_decode_item`) and translate (:meth:`_translate`, :meth:`_tombstone`).
    ``publish`` receives ``[(event, msg_id), …]`` and must persist them before returning.
    ``seed`` are the last published observations (from the projection).
    """

    resource = ""
    #: Objects per list request (``limit``); client-go's reflector pages by 500.
    list_page_size = 500
    #: Seconds a re-opened watch stream must stay open without an error (or deliver a line,
    #: or end cleanly) before an outage counts as over: a server that accepts the watch and
    #: then sends an in-stream error (410 after a restart) has not recovered yet.
    confirm_after = 1.0

    def __init__(
        self,
        api: client.ApiClient,
        publish: Publish,
        *,
        producer: str,
        seed: dict[str, E],
        label_selector: str = "",
        watch_timeout: int = 300,
        send: Send | None = None,
    ) -> None:
        self.api = api
        self.publish = publish
        self.send = send
        self._inflight: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._republish = False
        self.producer = producer
        self.last: dict[str, E] = dict(seed)
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.resource_version = ""
        #: Monotonic time of the last watch line (event or bookmark); set per line.
        self.last_event_at = time.monotonic()
        #: Monotonic time the watch was otherwise last known alive: a list, a (re)connect,
        #: a clean end of the stream (see :meth:`age`).
        self.alive_at = self.last_event_at
        #: Failures, back-off and their log lines (named once ``resource`` is known).
        self.outage = Outage("watch", logger=log)
        self._confirm: asyncio.TimerHandle | None = None
        self.listed = asyncio.Event()
        self.relists = 0
        self.missing = False
        self.missing_retry = 60.0
        #: True while a watch stream is open (tests wait for it before breaking streams).
        self.watching = False
        self._watch_resp: Any = None
        self._store_failed = False

    def _selector(self) -> dict[str, Any]:
        return {"label_selector": self.label_selector} if self.label_selector else {}

    # --- what a subclass provides ----------------------------------------------------------

    async def _call(self, **kwargs: Any) -> Any:
        """The list (or, with ``watch=True``, watch) request, ``_preload_content=False``."""
        raise NotImplementedError

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        """The raw items of a list response and its resourceVersion."""
        raise NotImplementedError

    def _decode_item(self, data: bytes) -> Any:
        """One raw object of a watch event (with ``metadata.resourceVersion``)."""
        raise NotImplementedError

    def _translate(self, raw: Any, now: int) -> E:
        raise NotImplementedError

    def _tombstone(self, last: E, version: str, now: int) -> E:
        raise NotImplementedError

    def _msg_id(self, ev: E) -> str:
        return f"{getattr(ev, 'uid', '')}:{ev.version}" + (":deleted" if ev.deleted else "")

    def age(self) -> float:
        """Seconds since the watch was last known alive: its last event or bookmark, or the
        last successful list, watch (re)connect, or clean end of a stream (the server closes
        every watch after ``watch_timeout`` seconds).

        Not "since the last event": an API server sends a bookmark only when the kind's
        resourceVersion moved past the one the watch started from (the watch cache,
        cache_watcher.go ``process``), so on an idle kind none comes at all. A healthy watch
        therefore stays under ``watch_timeout`` (plus a reconnect); above it, the stream is
        stuck or the watcher keeps failing.
        """
        return time.monotonic() - max(self.last_event_at, self.alive_at)

    async def run(self) -> None:
        """Run forever: list, watch, re-watch or re-list as needed (supervised).

        Failures back off (:class:`Backoff`, honouring ``Retry-After``) and are logged once
        per outage (:class:`Outage`); the outage ends when a watch stream delivers again."""
        self.outage.what = f"watch {self.resource}"
        self._export()
        try:
            while True:
                try:
                    if not self.resource_version:
                        await self.relist()
                    await self.watch_once()
                except asyncio.CancelledError:
                    raise
                except Expired:
                    metrics.WATCH_RESTARTS.labels(self.resource, "expired").inc()
                    self.resource_version = ""
                except PublishLost as exc:
                    metrics.WATCH_RESTARTS.labels(self.resource, "publish").inc()
                    log.warning(
                        "watch %s: an observation may be lost (%s); re-listing", self.resource, exc
                    )
                    self.resource_version = ""
                    self._republish = True
                except ApiException as exc:
                    if exc.status != 404:
                        metrics.WATCH_RESTARTS.labels(self.resource, "error").inc()
                        await asyncio.sleep(self.outage.failed(exc))
                        continue
                    # The resource is not served (a CRD that is not installed): look again now
                    # and then, without filling the log.
                    if not self.missing:
                        log.info(
                            "%s are not served by this API server; checking every %.0f s",
                            self.resource,
                            self.missing_retry,
                        )
                        if not self.last:
                            # None can exist: a complete, empty list (a pod naming a
                            # PodGroup of an uninstalled CRD is placed from its owner).
                            # Objects seen before are kept, not tombstoned: an API server
                            # that is starting answers 404 for CRDs until it serves them.
                            await self._listed("", time.time_ns())
                    self.missing = True
                    await asyncio.sleep(self.missing_retry)
                except (aiohttp.ClientError, TimeoutError, ConnectionError) as exc:
                    metrics.WATCH_RESTARTS.labels(self.resource, "error").inc()
                    await asyncio.sleep(self.outage.failed(exc))
                except Exception as exc:  # noqa: BLE001 - supervised; Outage logs the traceback
                    metrics.WATCH_RESTARTS.labels(self.resource, "crash").inc()
                    self.resource_version = ""
                    await asyncio.sleep(self.outage.failed(exc, crash=True))
        finally:
            self._unexport()

    # --- liveness ----------------------------------------------------------------------------

    def _export(self) -> None:
        """Export this watcher's liveness: the age is computed when Prometheus scrapes."""
        _EXPORTING[self.resource] = self
        metrics.WATCH_ALIVE_AGE.labels(self.resource).set_function(self.age)
        metrics.WATCH_CONNECTED.labels(self.resource).set(1 if self.watching else 0)

    def _unexport(self) -> None:
        if _EXPORTING.get(self.resource) is not self:
            return
        del _EXPORTING[self.resource]
        for gauge in (metrics.WATCH_ALIVE_AGE, metrics.WATCH_CONNECTED):
            with contextlib.suppress(KeyError):
                gauge.remove(self.resource)

    def _connected(self, resp: Any) -> None:
        """A watch stream is open: alive now; the outage (if any) ends once it delivers."""
        self.watching = True
        self._watch_resp = resp
        self.alive_at = time.monotonic()
        if _EXPORTING.get(self.resource) is self:
            metrics.WATCH_CONNECTED.labels(self.resource).set(1)
        if self.outage.failing:
            self._confirm = asyncio.get_running_loop().call_later(
                self.confirm_after, self._recovered
            )

    def _recovered(self) -> None:
        if self._confirm is not None:
            self._confirm.cancel()
            self._confirm = None
        self.outage.recovered()

    def _disconnected(self) -> None:
        self.watching = False
        self._watch_resp = None
        if self._confirm is not None:
            self._confirm.cancel()
            self._confirm = None
        if _EXPORTING.get(self.resource) is self:
            metrics.WATCH_CONNECTED.labels(self.resource).set(0)

    async def relist(self) -> None:
        """List everything, publish changes and tombstones, remember the resourceVersion.

        The list is read in pages of :attr:`list_page_size` objects (``limit`` and
        ``continue``, as client-go's reflector does): one response for 150,000 pods is a
        203 MB body decoded and translated in one go, which held 1.3 GB and the event loop
        for 5.2 s; in pages, 535 MB and 69 ms (``bench/kube_scale.py``). Every page is
        served from the first page's snapshot (one resourceVersion); an expired continue
        token fails the relist, and the run loop lists again.
        """
        self.relists += 1
        now = time.time_ns()
        seen: set[str] = set()
        list_rv = ""
        token = ""
        while True:
            paging: dict[str, Any] = {"limit": self.list_page_size}
            if token:
                paging["_continue"] = token
            resp: Any = await self._call(**self._selector(), **paging)
            try:
                body = await resp.read()
            finally:
                resp.release()
            _check_status(resp, body)
            batch: list[tuple[E, str]] = []
            # A page makes thousands of long-lived objects at once: collections during it
            # would only re-scan them (slurmbridge.runtime.gcpause; no await inside).
            with collector_paused():
                page = _LIST_PAGE.decode(body).metadata
                items, rv = self._decode_list(body)
                list_rv = list_rv or rv
                for raw in items:
                    ev = self._translate(raw, now)
                    seen.add(ev.key)
                    prev = self.last.get(ev.key)
                    if self._republish or prev is None or not same_content(prev, ev):
                        batch.append((ev, self._msg_id(ev)))
                del items, body
            if batch:
                await self._publish(batch)
            token = page.continue_ or ""
            if not token:
                break
        gone = [self._tombstone(self.last[key], list_rv, now) for key in set(self.last) - seen]
        if gone:
            await self._publish([(tomb, self._msg_id(tomb)) for tomb in gone])
        # Last, after every object and tombstone of the list: the log now holds a complete
        # list of this resource (reconcilers.base.kube_listed). Two producers listing the same
        # resourceVersion dedupe on the message id.
        await self._listed(list_rv, now)
        self.missing = False
        self._republish = False
        self.resource_version = list_rv
        self.alive_at = time.monotonic()
        self.listed.set()

    async def _listed(self, version: str, now: int) -> None:
        """Publish the ``KubeListed`` marker of this resource at ``version`` (two producers
        listing the same resourceVersion dedupe on the message id)."""
        marker = KubeListed(
            source=subjects.KUBE_SOURCE,
            key=self.resource,
            observed_at=now,
            version=version,
            producer=self.producer,
            resource=self.resource,
        )
        await self.publish([(marker, f"listed:{self.resource}:{version}")])

    async def _publish(self, batch: list[tuple[E, str]]) -> None:
        await self._drain_inflight()
        await self.publish(batch)
        for ev, _ in batch:
            if ev.op == "deleted":
                self.last.pop(ev.key, None)
            else:
                self.last[ev.key] = ev

    async def watch_once(self) -> None:
        """One watch request from ``resource_version`` until it ends.

        Raises:
            Expired: the server answered 410 Gone (in-stream or as HTTP status).
        """
        try:
            resp: Any = await self._call(
                watch=True,
                resource_version=self.resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.watch_timeout,
                _request_timeout=self.watch_timeout + 30,
                **self._selector(),
            )
        except ApiException as exc:
            if exc.status == 410:
                raise Expired(str(exc.reason)) from exc
            raise
        if resp.status >= 300:
            try:
                body = await resp.read()
            finally:
                resp.release()
            if resp.status == 410:
                raise Expired(_STATUS.decode(body).message if body else "410 Gone")
            _check_status(resp, body)
        self._connected(resp)
        try:
            while True:
                try:
                    line = await resp.content.readline()
                except (aiohttp.ClientError, ConnectionError):
                    if not self._store_failed:
                        raise
                    line = b""
                if self._store_failed:
                    self._store_failed = False
                    self._inflight.clear()
                    raise PublishLost("an observation was not stored")
                if not line:
                    # The server closed the stream (timeoutSeconds): alive, re-watch.
                    self.alive_at = time.monotonic()
                    if self.outage.failing:
                        self._recovered()
                    return
                if line.strip():
                    await self._on_line(line)
                    if self._confirm is not None:
                        self._recovered()  # it delivers: the outage is over
        finally:
            self._disconnected()
            resp.release()

    async def _on_line(self, line: bytes) -> None:
        ev = _WATCH.decode(line)
        self.last_event_at = time.monotonic()
        if ev.type == "ERROR":
            status = _STATUS.decode(ev.object)
            if status.code == 410:
                raise Expired(status.message)
            wait = status.details.retryAfterSeconds if status.details is not None else 0
            raise ApiStatusError(status.code, status.message, float(wait) or None)
        raw = self._decode_item(ev.object)
        if raw.metadata.resourceVersion:
            self.resource_version = raw.metadata.resourceVersion
        if ev.type == "BOOKMARK":
            return
        now = time.time_ns()
        if ev.type == "DELETED":
            current = self._translate(raw, now)
            base = self.last.get(current.key) or current
            tomb = self._tombstone(base, raw.metadata.resourceVersion, now)
            await self._send(tomb, self._msg_id(tomb))
            return
        obj = self._translate(raw, now)
        prev = self.last.get(obj.key)
        if prev is not None and same_content(prev, obj):
            return
        await self._send(obj, self._msg_id(obj))

    async def _send(self, ev: E, msg_id: str) -> None:
        """Publish one watch event without waiting for its acknowledgement (bounded window).

        A failed publish is found at the next event (or when the window is full) and raises
        :class:`PublishLost`: the run loop re-lists and republishes every node (deduplicated by
        ``Nats-Msg-Id`` where nothing was lost). On a quiet resource there may be no next
        event: the failure then closes the open watch (:meth:`_on_stored`), with the same
        result.
        """
        if self.send is None:
            await self._publish([(ev, msg_id)])
            return
        fut = await self.send(ev, msg_id)
        fut.add_done_callback(self._on_stored)
        self._inflight.append(fut)
        if ev.op == "deleted":
            self.last.pop(ev.key, None)
        else:
            self.last[ev.key] = ev
        while self._inflight and (self._inflight[0].done() or len(self._inflight) > WINDOW):
            fut = self._inflight.popleft()
            try:
                await fut
            except Exception as exc:
                self._inflight.clear()
                raise PublishLost(str(exc)) from exc

    def _on_stored(self, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is None:
            return
        self._store_failed = True
        resp = self._watch_resp
        if resp is not None:
            resp.close()  # the reading loop wakes up and re-lists (see watch_once)

    async def _drain_inflight(self) -> None:
        pending, self._inflight = self._inflight, collections.deque()
        results = await asyncio.gather(*pending, return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise PublishLost(str(failed[0]))


class NodeWatcher(Watcher[KubeNode]):
    """List + watch Kubernetes Nodes, publishing ``KubeNode`` observations."""

    resource = "nodes"

    async def _call(self, **kwargs: Any) -> Any:
        return await client.CoreV1Api(self.api).list_node(**kwargs, _preload_content=False)

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        listing = _NODE_LIST.decode(body)
        return list(listing.items), listing.metadata.resourceVersion

    def _decode_item(self, data: bytes) -> Any:
        return _NODE.decode(data)

    def _translate(self, raw: Any, now: int) -> KubeNode:
        return node_to_event(raw, producer=self.producer, observed_at=now)

    def _tombstone(self, last: KubeNode, version: str, now: int) -> KubeNode:
        return tombstone(last, version=version, producer=self.producer, observed_at=now)


class PodWatcher(Watcher[KubePod]):
    """List + watch the Pods whose ``spec.schedulerName`` is ``scheduler_name`` (a field
    selector, so the API server filters), publishing ``KubePod`` observations."""

    resource = "pods"

    def __init__(self, *args: Any, scheduler_name: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scheduler_name = scheduler_name
        # Only its own pods: a relist tombstones what it no longer lists, so it must never
        # hold the slurmd pods another watcher publishes.
        self.last = {k: v for k, v in self.last.items() if v.scheduler_name == scheduler_name}

    async def _call(self, **kwargs: Any) -> Any:
        return await client.CoreV1Api(self.api).list_pod_for_all_namespaces(
            **kwargs,
            field_selector=f"spec.schedulerName={self.scheduler_name}",
            _preload_content=False,
        )

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        listing = _POD_LIST.decode(body)
        return list(listing.items), listing.metadata.resourceVersion

    def _decode_item(self, data: bytes) -> Any:
        return _POD.decode(data)

    def _translate(self, raw: Any, now: int) -> KubePod:
        return pod_to_event(raw, producer=self.producer, observed_at=now)

    def _tombstone(self, last: KubePod, version: str, now: int) -> KubePod:
        return pod_tombstone(last, version=version, producer=self.producer, observed_at=now)


#: Workload kinds that group pods: (kind, group, version, plural); group "batch" = built-in.
WORKLOAD_KINDS: tuple[tuple[str, str, str, str], ...] = (
    ("Job", "batch", "v1", "jobs"),
    ("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets"),
    ("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
    ("PodGroup", "scheduling.x-k8s.io", "v1alpha1", "podgroups"),
)


class WorkloadWatcher(Watcher[KubeWorkload]):
    """List + watch one workload kind (an entry of :data:`WORKLOAD_KINDS`), publishing
    ``KubeWorkload`` observations. A kind whose CRD is not installed answers 404: the watcher
    then retries slowly (the run loop's back-off), and the pods of such groups wait."""

    def __init__(self, *args: Any, kind: tuple[str, str, str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind, self.group, self.version, self.plural = kind
        self.resource = self.plural
        self.last = {k: v for k, v in self.last.items() if v.workload_kind == self.kind}

    async def _call(self, **kwargs: Any) -> Any:
        if self.group == "batch":
            return await client.BatchV1Api(self.api).list_job_for_all_namespaces(
                **kwargs, _preload_content=False
            )
        return await client.CustomObjectsApi(self.api).list_cluster_custom_object(
            self.group, self.version, self.plural, **kwargs, _preload_content=False
        )

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        listing = _WORKLOAD_LIST.decode(body)
        for item in listing.items:
            item.kind = item.kind or self.kind  # list items may omit kind
            item.apiVersion = item.apiVersion or (
                f"{self.group}/{self.version}" if self.group != "batch" else "batch/v1"
            )
        return list(listing.items), listing.metadata.resourceVersion

    def _decode_item(self, data: bytes) -> Any:
        item = _WORKLOAD.decode(data)
        item.kind = item.kind or self.kind
        return item

    def _translate(self, raw: Any, now: int) -> KubeWorkload:
        return workload_to_event(raw, producer=self.producer, observed_at=now)

    def _tombstone(self, last: KubeWorkload, version: str, now: int) -> KubeWorkload:
        return KubeWorkload(
            source=last.source,
            key=last.key,
            op="deleted",
            observed_at=now,
            version=version,
            producer=self.producer,
            uid=last.uid,
            namespace=last.namespace,
            name=last.name,
            workload_kind=last.workload_kind,
        )


def nodeset_to_event(raw: RawNodeSet, *, producer: str, observed_at: int) -> KubeNodeSet:
    """Translate a raw NodeSet (pure)."""
    md, spec, st = raw.metadata, raw.spec, raw.status
    return KubeNodeSet(
        source=subjects.KUBE_SOURCE,
        key=f"{md.namespace}/{md.name}",
        observed_at=observed_at,
        version=md.resourceVersion,
        producer=producer,
        uid=md.uid,
        namespace=md.namespace,
        name=md.name,
        generation=md.generation,
        replicas=spec.replicas if spec.replicas is not None else 1,
        cluster_name=spec.clusterName,
        ordinal_padding=spec.ordinalPadding,
        service_name=spec.serviceName,
        selector=dict((spec.selector.matchLabels if spec.selector else None) or {}),
        annotations={
            k: v
            for k, v in (md.annotations or {}).items()
            if SLINKY_ANNOTATION in k or "slurmbridge.dev/" in k
        },
        deleting=bool(md.deletionTimestamp),
        status=NodeSetStatus(
            replicas=st.replicas,
            ready_replicas=st.readyReplicas,
            available_replicas=st.availableReplicas,
            slurm_idle=st.slurmIdle,
            slurm_allocated=st.slurmAllocated,
            slurm_down=st.slurmDown,
            slurm_drain=st.slurmDrain,
            observed_generation=st.observedGeneration,
            selector=st.selector,
        ),
    )


#: Label of the slurmd pods of NodeSets (the pods a :class:`SlurmdPodWatcher` watches).
SLURMD_SELECTOR: Final = "app.kubernetes.io/name=slurmd"


class SlurmdPodWatcher(PodWatcher):
    """List + watch the slurmd pods of NodeSets (label ``app.kubernetes.io/name=slurmd``),
    publishing ``KubePod`` observations like :class:`PodWatcher`."""

    def __init__(self, *args: Any, seed: dict[str, KubePod], **kwargs: Any) -> None:
        kwargs.setdefault("label_selector", SLURMD_SELECTOR)
        super().__init__(*args, seed=seed, scheduler_name="", **kwargs)
        self.resource = "slurmd-pods"
        self.last = {
            k: v for k, v in seed.items() if v.labels.get("app.kubernetes.io/name") == "slurmd"
        }

    async def _call(self, **kwargs: Any) -> Any:
        return await client.CoreV1Api(self.api).list_pod_for_all_namespaces(
            **kwargs, _preload_content=False
        )


class _SlinkyWatcher(Watcher[E]):
    """List + watch one ``slinky.slurm.net/v1alpha1`` resource (all namespaces). Without its
    CRD (404) it retries slowly, as :class:`WorkloadWatcher` does. Subclasses give the
    decoders and :meth:`_translate`; the tombstone keeps uid, namespace and name."""

    _list: msgspec.json.Decoder[Any]
    _item: msgspec.json.Decoder[Any]
    event_type: type[E]

    async def _call(self, **kwargs: Any) -> Any:
        return await client.CustomObjectsApi(self.api).list_cluster_custom_object(
            "slinky.slurm.net", "v1alpha1", self.resource, **kwargs, _preload_content=False
        )

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        listing = self._list.decode(body)
        return list(listing.items), listing.metadata.resourceVersion

    def _decode_item(self, data: bytes) -> Any:
        return self._item.decode(data)

    def _tombstone(self, last: E, version: str, now: int) -> E:
        return self.event_type(  # type: ignore[call-arg]
            source=last.source,
            key=last.key,
            op="deleted",
            observed_at=now,
            version=version,
            producer=self.producer,
            uid=getattr(last, "uid", ""),
            namespace=getattr(last, "namespace", ""),
            name=getattr(last, "name", ""),
        )


class NodeSetWatcher(_SlinkyWatcher[KubeNodeSet]):
    """List + watch Slinky NodeSets (``nodesets.slinky.slurm.net``), publishing
    ``KubeNodeSet`` observations."""

    resource = "nodesets"
    _list = _NODESET_LIST
    _item = _NODESET
    event_type = KubeNodeSet

    def _translate(self, raw: Any, now: int) -> KubeNodeSet:
        return nodeset_to_event(raw, producer=self.producer, observed_at=now)


def cluster_to_event(raw: RawCluster, *, producer: str, observed_at: int) -> SlurmCluster:
    """Translate a raw Cluster (pure). The token's Secret is named, never read."""
    md, spec, st = raw.metadata, raw.spec, raw.status
    ready = next((c for c in st.conditions or () if c.type == "Ready"), None)
    return SlurmCluster(
        source=subjects.KUBE_SOURCE,
        key=f"{md.namespace}/{md.name}",
        observed_at=observed_at,
        version=md.resourceVersion,
        producer=producer,
        uid=md.uid,
        namespace=md.namespace,
        name=md.name,
        generation=md.generation,
        server=spec.server,
        secret_name=spec.token.secretRef.name,
        secret_key=spec.token.secretRef.key or "auth-token",
        deleting=bool(md.deletionTimestamp),
        is_ready=st.isReady,
        ready_reason=ready.reason if ready else "",
        ready_message=ready.message if ready else "",
    )


class ClusterWatcher(_SlinkyWatcher[SlurmCluster]):
    """List + watch Slinky Clusters (``clusters.slinky.slurm.net``), publishing
    ``SlurmCluster`` observations (the token's Secret is named, never read)."""

    resource = "clusters"
    _list = _CLUSTER_LIST
    _item = _CLUSTER
    event_type = SlurmCluster

    def _translate(self, raw: Any, now: int) -> SlurmCluster:
        return cluster_to_event(raw, producer=self.producer, observed_at=now)


#: What scales workloads besides slurmbridge: (kind, group, version, plural).
SCALER_KINDS: tuple[tuple[str, str, str, str], ...] = (
    ("HorizontalPodAutoscaler", "autoscaling", "v2", "horizontalpodautoscalers"),
    ("ScaledObject", "keda.sh", "v1alpha1", "scaledobjects"),
)


def scaler_to_event(raw: RawScaler, *, kind: str, producer: str, observed_at: int) -> KubeScaler:
    """Translate a raw HPA or ScaledObject (pure)."""
    md, ref = raw.metadata, raw.spec.scaleTargetRef
    return KubeScaler(
        source=subjects.KUBE_SOURCE,
        key=workload_key(md.namespace, kind, md.name),
        observed_at=observed_at,
        version=md.resourceVersion,
        producer=producer,
        uid=md.uid,
        namespace=md.namespace,
        name=md.name,
        scaler_kind=kind,
        target_kind=ref.kind,
        target_name=ref.name,
        target_api_version=ref.apiVersion,
    )


class ScalerWatcher(Watcher[KubeScaler]):
    """List + watch one kind of :data:`SCALER_KINDS`, publishing ``KubeScaler``
    observations. Without KEDA installed, ScaledObjects answer 404: the watcher retries
    slowly, as :class:`WorkloadWatcher` does."""

    def __init__(self, *args: Any, kind: tuple[str, str, str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind, self.group, self.version, self.plural = kind
        self.resource = self.plural
        self.last = {k: v for k, v in self.last.items() if v.scaler_kind == self.kind}

    async def _call(self, **kwargs: Any) -> Any:
        return await client.CustomObjectsApi(self.api).list_cluster_custom_object(
            self.group, self.version, self.plural, **kwargs, _preload_content=False
        )

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        listing = _SCALER_LIST.decode(body)
        return list(listing.items), listing.metadata.resourceVersion

    def _decode_item(self, data: bytes) -> Any:
        return _SCALER.decode(data)

    def _translate(self, raw: Any, now: int) -> KubeScaler:
        return scaler_to_event(raw, kind=self.kind, producer=self.producer, observed_at=now)

    def _tombstone(self, last: KubeScaler, version: str, now: int) -> KubeScaler:
        return KubeScaler(
            source=last.source,
            key=last.key,
            op="deleted",
            observed_at=now,
            version=version,
            producer=self.producer,
            uid=last.uid,
            namespace=last.namespace,
            name=last.name,
            scaler_kind=last.scaler_kind,
            target_kind=last.target_kind,
            target_name=last.target_name,
        )


def seed_from(values: Any) -> dict[str, Any]:
    """Index the projection's live observations by key (the producer's seed)."""
    return {n.key: n for n in values if isinstance(n, Event)}
