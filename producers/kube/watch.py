"""The Kubernetes producer's watchers. Resources that differ only in data — NodeSets,
Clusters, DRA ResourceSlices, ResourceClaims and DeviceClasses — are :class:`WatchSpec`
records run by the one :class:`SpecWatcher`; a class of its own (a
:class:`~slurmbridge.kube.watch.Watcher` subclass) remains where behaviour differs: Nodes (the
producer's always-on watcher), Pods with our ``schedulerName`` (field selector, seed filter),
slurmd pods (label selector), the pod group owners of :data:`WORKLOAD_KINDS` (kind filled in)
and of :data:`SCHEDULING_KINDS` (version discovery, the Kubernetes Workload API), the scalers
of :data:`SCALER_KINDS` (kind-filtered seed), and :class:`NodeUsageWatcher`, which sums what
every assigned pod requests per node. Each names its list call, decoders and translation
(:mod:`producers.kube.translate`); :data:`RESOURCES` is the table the app starts them from.
Translation only: no decisions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Final

import msgspec

from producers.kube.translate import (
    cluster_to_event,
    device_class_to_event,
    node_to_event,
    nodeset_to_event,
    pod_affinity_terms,
    pod_extended,
    pod_host_ports,
    pod_requests,
    pod_to_event,
    resource_claim_to_event,
    resource_slice_to_event,
    scaler_to_event,
    workload_to_event,
)
from schemas import events, subjects, wellknown
from slurmbridge.kube import client as kclient
from slurmbridge.kube.cache import PodCache
from slurmbridge.kube.watch import E, Watcher, same_content
from slurmbridge.kube.wire import (
    DECODE_CLUSTER,
    DECODE_CLUSTER_LIST,
    DECODE_DEVICE_CLASS,
    DECODE_DEVICE_CLASS_LIST,
    DECODE_NODE,
    DECODE_NODE_LIST,
    DECODE_NODESET,
    DECODE_NODESET_LIST,
    DECODE_POD,
    DECODE_POD_LIST,
    DECODE_RESOURCE_CLAIM,
    DECODE_RESOURCE_CLAIM_LIST,
    DECODE_RESOURCE_SLICE,
    DECODE_RESOURCE_SLICE_LIST,
    DECODE_SCALER,
    DECODE_SCALER_LIST,
    DECODE_WATCH,
    DECODE_WORKLOAD,
    DECODE_WORKLOAD_LIST,
    RawPod,
)

log = logging.getLogger(__name__)


class KubeWatcher(Watcher[E]):
    """A watcher of this producer: its deletions are :func:`~schemas.events.tombstone`
    markers (one constructor for every kind)."""

    def _tombstone(self, last: E, version: str, now: int) -> E:
        return events.tombstone(last, version=version, producer=self.producer, observed_at=now)


class NodeWatcher(KubeWatcher[events.KubeNode]):
    """List + watch Kubernetes Nodes, publishing ``KubeNode`` observations."""

    resource = "nodes"

    async def _call(self, **kwargs: Any) -> Any:
        return await kclient.CoreV1Api(self.api).list_node(**kwargs, _preload_content=False)

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        listing = DECODE_NODE_LIST.decode(body)
        return list(listing.items), listing.metadata.resourceVersion

    def _decode_item(self, data: bytes) -> Any:
        return DECODE_NODE.decode(data)

    def _translate(self, raw: Any, now: int) -> events.KubeNode:
        return node_to_event(raw, producer=self.producer, observed_at=now)


class PodWatcher(KubeWatcher[events.KubePod]):
    """List + watch the Pods whose ``spec.schedulerName`` is ``scheduler_name`` (a field
    selector, so the API server filters), publishing ``KubePod`` observations."""

    resource = "pods"

    def __init__(
        self, *args: Any, scheduler_name: str, pod_cache: PodCache | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.scheduler_name = scheduler_name
        #: Where each pod listed or watched is kept for the pod writes
        #: (:mod:`slurmbridge.kube.cache`); emptied at each relist and when the watcher stops.
        self.pod_cache = pod_cache
        # Only its own pods: a relist tombstones what it no longer lists, so it must never
        # hold the slurmd pods another watcher publishes.
        self.last = {k: v for k, v in self.last.items() if v.scheduler_name == scheduler_name}

    async def _call(self, **kwargs: Any) -> Any:
        return await kclient.CoreV1Api(self.api).list_pod_for_all_namespaces(
            **kwargs,
            field_selector=f"spec.schedulerName={self.scheduler_name}",
            _preload_content=False,
        )

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        listing = DECODE_POD_LIST.decode(body)
        return list(listing.items), listing.metadata.resourceVersion

    def _decode_item(self, data: bytes) -> Any:
        return DECODE_POD.decode(data)

    def _observed(self, raw: Any, *, deleted: bool) -> None:
        if self.pod_cache is not None:
            if deleted:
                self.pod_cache.drop(raw)
            else:
                self.pod_cache.put(raw)

    async def relist(self) -> None:
        # A pod deleted while the watch was down would stay in the cache: start it afresh.
        if self.pod_cache is not None:
            self.pod_cache.clear()
        await super().relist()

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            # Nobody keeps the copies up to date any more.
            if self.pod_cache is not None:
                self.pod_cache.clear()

    def _translate(self, raw: Any, now: int) -> events.KubePod:
        return pod_to_event(raw, producer=self.producer, observed_at=now)


#: Workload kinds that group pods: (kind, group, version, plural); group "batch" = built-in.
WORKLOAD_KINDS: tuple[tuple[str, str, str, str], ...] = (
    ("Job", "batch", "v1", "jobs"),
    # A pod's owner chain Pod → ReplicaSet → Deployment (Slinky slurm-bridge 1.3
    # internal/utils/slurmjobir/owner.go: the root owner carries the job's annotations).
    ("ReplicaSet", "apps", "v1", "replicasets"),
    ("Deployment", "apps", "v1", "deployments"),
    ("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets"),
    ("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
    ("PodGroup", "scheduling.x-k8s.io", "v1alpha1", "podgroups"),
)


class WorkloadWatcher(KubeWatcher[events.KubeWorkload]):
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
            return await kclient.BatchV1Api(self.api).list_job_for_all_namespaces(
                **kwargs, _preload_content=False
            )
        return await kclient.CustomObjectsApi(self.api).list_cluster_custom_object(
            self.group, self.version, self.plural, **kwargs, _preload_content=False
        )

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        listing = DECODE_WORKLOAD_LIST.decode(body)
        for item in listing.items:
            item.kind = item.kind or self.kind  # list items may omit kind
            item.apiVersion = item.apiVersion or (
                f"{self.group}/{self.version}" if self.group != "batch" else "batch/v1"
            )
        return list(listing.items), listing.metadata.resourceVersion

    def _decode_item(self, data: bytes) -> Any:
        item = DECODE_WORKLOAD.decode(data)
        item.kind = item.kind or self.kind
        return item

    def _translate(self, raw: Any, now: int) -> events.KubeWorkload:
        return workload_to_event(raw, producer=self.producer, observed_at=now)


#: The Kubernetes Workload API kinds (Kubernetes 1.36+): (group-kind token, plural); each is
#: served at one of ``wellknown.SCHEDULING_VERSIONS``, a CompositePodGroup (1.37, alpha) at
#: ``wellknown.COMPOSITE_VERSIONS`` only (:func:`versions_of`).
SCHEDULING_KINDS: tuple[tuple[str, str], ...] = (
    (wellknown.KIND_NATIVE_POD_GROUP, "podgroups"),
    (wellknown.KIND_NATIVE_WORKLOAD, "workloads"),
    (wellknown.KIND_NATIVE_COMPOSITE, "compositepodgroups"),
)


def versions_of(token: str) -> tuple[str, ...]:
    """The versions a Workload API kind is looked for at, newest first."""
    if token == wellknown.KIND_NATIVE_COMPOSITE:
        return wellknown.COMPOSITE_VERSIONS
    return wellknown.SCHEDULING_VERSIONS


class SchedulingWatcher(WorkloadWatcher):
    """List + watch one kind of the Kubernetes Workload API (an entry of
    :data:`SCHEDULING_KINDS`: ``scheduling.k8s.io`` PodGroups or Workloads), publishing
    ``KubeWorkload`` observations whose ``workload_kind`` is the group-kind token.

    The version is found at each list: ``v1beta1`` (Kubernetes 1.37) first, then
    ``v1alpha2`` (1.36) when the newer one answers 404 (not served); the version in use is
    logged when it changes. When none is served (a 1.35 cluster, or the GenericWorkload
    feature gate off; for CompositePodGroups, v1alpha3 or the CompositePodGroup gate off)
    the 404 reaches the run loop, which retries slowly, as for a CRD that is not installed
    (``Watcher.run``). The listing name (``KubeListed``) is ``<plural>.scheduling.k8s.io``,
    distinct from the coscheduling ``podgroups``.
    """

    def __init__(self, *args: Any, kind: tuple[str, str], **kwargs: Any) -> None:
        token, plural = kind
        self.versions = versions_of(token)
        super().__init__(
            *args,
            kind=(token, wellknown.SCHEDULING_GROUP, self.versions[0], plural),
            **kwargs,
        )
        self.resource = f"{plural}.{wellknown.SCHEDULING_GROUP}"
        self._served = ""

    async def _call(self, **kwargs: Any) -> Any:
        if kwargs.get("watch"):
            return await super()._call(**kwargs)
        versions = self.versions
        # Every first page starts from the newest version (a cluster upgraded to 1.37 moves
        # on); a later page keeps the version of the first.
        first_page = "_continue" not in kwargs
        if first_page:
            self.version = versions[0]
        while True:
            resp = await super()._call(**kwargs)
            i = versions.index(self.version)
            if resp.status == 404 and first_page and i + 1 < len(versions):
                resp.release()  # not served at this version: try the next one
                self.version = versions[i + 1]
                continue
            if resp.status == 404:
                self._served = ""
            elif resp.status < 300 and self._served != self.version:
                self._served = self.version
                log.info(
                    "watch %s: served at %s/%s",
                    self.resource,
                    wellknown.SCHEDULING_GROUP,
                    self.version,
                )
            return resp

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        items, rv = super()._decode_list(body)
        for item in items:
            # Built-in kinds: the token, whatever the object says (its kind is "PodGroup",
            # which would read as the coscheduling CRD).
            item.kind = self.kind
            item.apiVersion = f"{wellknown.SCHEDULING_GROUP}/{self.version}"
        return items, rv

    def _decode_item(self, data: bytes) -> Any:
        item = super()._decode_item(data)
        item.kind = self.kind
        item.apiVersion = f"{wellknown.SCHEDULING_GROUP}/{self.version}"
        return item


#: Label of the slurmd pods of NodeSets (the pods a :class:`SlurmdPodWatcher` watches).
SLURMD_SELECTOR: Final = "app.kubernetes.io/name=slurmd"


class SlurmdPodWatcher(PodWatcher):
    """List + watch the slurmd pods of NodeSets (label ``app.kubernetes.io/name=slurmd``),
    publishing ``KubePod`` observations like :class:`PodWatcher`."""

    def __init__(self, *args: Any, seed: dict[str, events.KubePod], **kwargs: Any) -> None:
        kwargs.setdefault("label_selector", SLURMD_SELECTOR)
        super().__init__(*args, seed=seed, scheduler_name="", **kwargs)
        self.resource = "slurmd-pods"
        self.last = {
            k: v for k, v in seed.items() if v.labels.get("app.kubernetes.io/name") == "slurmd"
        }

    async def _call(self, **kwargs: Any) -> Any:
        return await kclient.CoreV1Api(self.api).list_pod_for_all_namespaces(
            **kwargs, _preload_content=False
        )


#: What scales workloads besides slurmbridge: (kind, group, version, plural).
SCALER_KINDS: tuple[tuple[str, str, str, str], ...] = (
    ("HorizontalPodAutoscaler", "autoscaling", "v2", "horizontalpodautoscalers"),
    ("ScaledObject", "keda.sh", "v1alpha1", "scaledobjects"),
)


class ScalerWatcher(KubeWatcher[events.KubeScaler]):
    """List + watch one kind of :data:`SCALER_KINDS`, publishing ``KubeScaler``
    observations. Without KEDA installed, ScaledObjects answer 404: the watcher retries
    slowly, as :class:`WorkloadWatcher` does."""

    def __init__(self, *args: Any, kind: tuple[str, str, str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind, self.group, self.version, self.plural = kind
        self.resource = self.plural
        self.last = {k: v for k, v in self.last.items() if v.scaler_kind == self.kind}

    async def _call(self, **kwargs: Any) -> Any:
        return await kclient.CustomObjectsApi(self.api).list_cluster_custom_object(
            self.group, self.version, self.plural, **kwargs, _preload_content=False
        )

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        listing = DECODE_SCALER_LIST.decode(body)
        return list(listing.items), listing.metadata.resourceVersion

    def _decode_item(self, data: bytes) -> Any:
        return DECODE_SCALER.decode(data)

    def _translate(self, raw: Any, now: int) -> events.KubeScaler:
        return scaler_to_event(raw, kind=self.kind, producer=self.producer, observed_at=now)


class WatchSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What a watcher of one cluster-wide custom resource is, as data: its
    ``group``/``version``/``resource`` (the plural; also the ``KubeListed`` name and the metric
    label), the decoders of its list and of one object, and its translation
    (``translate(raw, producer=…, observed_at=…)`` → the observation). A :class:`SpecWatcher`
    runs one; a kind whose behaviour differs (selectors, seeds filtered by kind, version
    discovery, aggregation) keeps a class of its own."""

    group: str
    version: str
    resource: str
    list_decoder: msgspec.json.Decoder[Any]
    item_decoder: msgspec.json.Decoder[Any]
    translate: Callable[..., Any]


class SpecWatcher(KubeWatcher[Any]):
    """List + watch the resource a :class:`WatchSpec` names (all namespaces, through
    ``CustomObjectsApi.list_cluster_custom_object``), publishing what its ``translate`` makes.
    Without the resource (a CRD that is not installed, an API the server does not serve:
    404) it retries slowly (``Watcher.run``), as :class:`WorkloadWatcher` does."""

    def __init__(self, *args: Any, spec: WatchSpec, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec = spec
        self.resource = spec.resource

    async def _call(self, **kwargs: Any) -> Any:
        spec = self.spec
        return await kclient.CustomObjectsApi(self.api).list_cluster_custom_object(
            spec.group, spec.version, spec.resource, **kwargs, _preload_content=False
        )

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        listing = self.spec.list_decoder.decode(body)
        return list(listing.items), listing.metadata.resourceVersion

    def _decode_item(self, data: bytes) -> Any:
        return self.spec.item_decoder.decode(data)

    def _translate(self, raw: Any, now: int) -> Any:
        return self.spec.translate(raw, producer=self.producer, observed_at=now)


#: Slinky NodeSets (``nodesets.slinky.slurm.net``) → ``KubeNodeSet``. Read at ``v1beta1``, the
#: storage version: with the CRD's ``conversion: None`` every NodeSet — written at v1alpha1 or
#: v1beta1 — is served there, with only ``apiVersion`` changed; the v1beta1 schema keeps
#: v1alpha1's ``clusterName``, ``serviceName`` and ``selector`` so those survive storage, and
#: the translation reads both shapes (deploy/crds/nodesets.slinky.slurm.net.yaml,
#: docs/deploy.md).
NODESETS: Final = WatchSpec(
    group="slinky.slurm.net",
    version="v1beta1",
    resource="nodesets",
    list_decoder=DECODE_NODESET_LIST,
    item_decoder=DECODE_NODESET,
    translate=nodeset_to_event,
)
#: Slinky Clusters (``clusters.slinky.slurm.net``) → ``SlurmCluster`` (the token's Secret is
#: named, never read).
CLUSTERS: Final = WatchSpec(
    group="slinky.slurm.net",
    version="v1alpha1",
    resource="clusters",
    list_decoder=DECODE_CLUSTER_LIST,
    item_decoder=DECODE_CLUSTER,
    translate=cluster_to_event,
)
# DRA (resource.k8s.io/v1, Kubernetes 1.34+): without it pods asking for devices are not placed.
#: ResourceSlices → ``KubeResourceSlice`` (the devices DRA drivers publish per node).
RESOURCE_SLICES: Final = WatchSpec(
    group="resource.k8s.io",
    version="v1",
    resource="resourceslices",
    list_decoder=DECODE_RESOURCE_SLICE_LIST,
    item_decoder=DECODE_RESOURCE_SLICE,
    translate=resource_slice_to_event,
)
#: ResourceClaims → ``KubeResourceClaim``.
RESOURCE_CLAIMS: Final = WatchSpec(
    group="resource.k8s.io",
    version="v1",
    resource="resourceclaims",
    list_decoder=DECODE_RESOURCE_CLAIM_LIST,
    item_decoder=DECODE_RESOURCE_CLAIM,
    translate=resource_claim_to_event,
)
#: DeviceClasses → ``KubeDeviceClass`` (a class is matched to a device profile by its
#: selector: :mod:`reconcilers._devprofile`).
DEVICE_CLASSES: Final = WatchSpec(
    group="resource.k8s.io",
    version="v1",
    resource="deviceclasses",
    list_decoder=DECODE_DEVICE_CLASS_LIST,
    item_decoder=DECODE_DEVICE_CLASS,
    translate=device_class_to_event,
)


#: kube-scheduler's informer of assigned pods (pkg/scheduler/eventhandlers.go and
#: factory ``NewPodInformer``): bound and not terminal.
ASSIGNED_PODS: Final = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


class _Counted(msgspec.Struct, frozen=True, kw_only=True):
    """What one counted pod adds to its node (:class:`NodeUsageWatcher`)."""

    node: str
    cpu: int
    memory: int
    extended: dict[str, int]
    ports: tuple[events.HostPort, ...]
    peer: events.PeerPod
    #: A pod of a Slurm allocation of ours (``KubeNodeUsage.bridge_*``).
    bridge: bool


def _bridge_pod(raw: RawPod, scheduler_name: str) -> bool:
    """Slinky slurm-bridge eligibility.go ``podAllocationID`` > 0 for a pod of ours: its
    scheduler is ours and its ``slurm-jobid`` label a positive job id."""
    if not scheduler_name or (raw.spec.schedulerName or "") != scheduler_name:
        return False
    # A job id label is decimal digits, so a true one is positive: "0" names no job.
    return bool(wellknown.slurm_job_id(raw.metadata.labels or {}))


class NodeUsageWatcher(KubeWatcher[events.KubeNodeUsage]):
    """List + watch every assigned, non-terminal pod (all schedulers, all namespaces:
    :data:`ASSIGNED_PODS`) and publish, per node, what they request in total
    (``KubeNodeUsage``): kube-scheduler's ``NodeInfo.Requested``, which
    ``reconcilers._feasible`` compares with a node's allocatable — cpu, memory, pods, every
    other resource, the host ports, and the part of them held by pods of our Slurm
    allocations (``scheduler_name``'s pods with a job label: ``bridge_*``).

    The pods themselves are never published (what a pod adds is held here only, per key):
    one event per node whose totals changed. A pod leaving the selector (it finished, or was
    deleted) arrives as DELETED. A relist recomputes every total from the list, publishes the
    nodes whose totals differ from the last published, and a tombstone for each node that has
    no such pod any more (a tombstone reads as zero usage). Message id
    ``usage:<node>:<resourceVersion>`` (the pod event's or the list's), so two producers
    computing the same totals at the same version dedupe.
    """

    resource = "node-usage"

    def __init__(self, *args: Any, scheduler_name: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scheduler_name = scheduler_name
        #: pod key (namespace/name) → what it adds to its node: the pods counted now.
        self.pods: dict[str, _Counted] = {}
        #: node → the keys of its counted pods.
        self.by_node: dict[str, set[str]] = {}

    async def _call(self, **kwargs: Any) -> Any:
        return await kclient.CoreV1Api(self.api).list_pod_for_all_namespaces(
            **kwargs, field_selector=ASSIGNED_PODS, _preload_content=False
        )

    def _decode_list(self, body: bytes) -> tuple[list[Any], str]:
        listing = DECODE_POD_LIST.decode(body)
        return list(listing.items), listing.metadata.resourceVersion

    def _decode_item(self, data: bytes) -> Any:
        return DECODE_POD.decode(data)

    def _msg_id(self, ev: events.KubeNodeUsage) -> str:
        return f"usage:{ev.key}:{ev.version}" + (":deleted" if ev.deleted else "")

    def _counted(self, raw: RawPod) -> tuple[str, _Counted] | None:
        """The pod's key and what it adds to its node; None when it is not counted (the
        selector already says so; checked again for a list served without it)."""
        node = raw.spec.nodeName or ""
        if not node or (raw.status.phase or "") in ("Succeeded", "Failed"):
            return None
        cpu, memory = pod_requests(raw.spec)
        return f"{raw.metadata.namespace}/{raw.metadata.name}", _Counted(
            node=node,
            cpu=cpu,
            memory=memory,
            extended=pod_extended(raw.spec),
            ports=pod_host_ports(raw.spec),
            peer=events.PeerPod(
                namespace=raw.metadata.namespace,
                labels=dict(raw.metadata.labels or {}),
                anti_affinity=pod_affinity_terms(raw.spec, anti=True),
            ),
            bridge=_bridge_pod(raw, self.scheduler_name),
        )

    def _put(self, key: str, counted: _Counted | None) -> None:
        old = self.pods.pop(key, None)
        if old is not None:
            keys = self.by_node.get(old.node, set())
            keys.discard(key)
            if not keys:
                self.by_node.pop(old.node, None)
        if counted is not None:
            self.pods[key] = counted
            self.by_node.setdefault(counted.node, set()).add(key)

    def _event(self, node: str, version: str, now: int) -> events.KubeNodeUsage | None:
        """The node's totals over its counted pods (None: it has none)."""
        keys = self.by_node.get(node)
        if not keys:
            return None
        counted = [self.pods[k] for k in sorted(keys)]
        extended: dict[str, int] = {}
        bridge_extended: dict[str, int] = {}
        for c in counted:
            for name, amount in c.extended.items():
                extended[name] = extended.get(name, 0) + amount
                if c.bridge:
                    bridge_extended[name] = bridge_extended.get(name, 0) + amount
        ports = sorted(
            (p for c in counted for p in c.ports), key=lambda h: (h.port, h.protocol, h.host_ip)
        )
        bridge = [c for c in counted if c.bridge]
        return events.KubeNodeUsage(
            source=subjects.KUBE_SOURCE,
            key=node,
            observed_at=now,
            version=version,
            producer=self.producer,
            cpu_millis=sum(c.cpu for c in counted),
            memory_bytes=sum(c.memory for c in counted),
            pods=len(counted),
            extended=dict(sorted(extended.items())),
            host_ports=tuple(ports),
            peers=tuple(
                sorted(
                    (c.peer for c in counted),
                    key=lambda p: (p.namespace, sorted(p.labels.items())),
                )
            ),
            bridge_cpu_millis=sum(c.cpu for c in bridge),
            bridge_memory_bytes=sum(c.memory for c in bridge),
            bridge_pods=len(bridge),
            bridge_extended=dict(sorted(bridge_extended.items())),
        )

    def _changed(
        self, node: str, current: events.KubeNodeUsage | None, version: str, now: int
    ) -> events.KubeNodeUsage | None:
        """What to publish for ``node`` (its totals, or a tombstone), None when unchanged."""
        prev = self.last.get(node)
        if current is None:
            # A tombstone sent but not acknowledged: the log may still hold the node's totals.
            gone = prev if prev is not None else self.unacked_tombstones.get(node)
            return self._tombstone(gone, version, now) if gone is not None else None
        if prev is not None and same_content(prev, current) and not self._republish:
            return None
        return current

    async def relist(self) -> None:
        """List every counted pod (in pages, as :meth:`Watcher.relist`), recompute every
        node's totals, publish what changed and a tombstone for each node left without pods,
        then the ``KubeListed`` marker."""
        self.relists += 1
        now = time.time_ns()
        self.pods, self.by_node = {}, {}
        list_rv = ""
        async for items, rv in self._list_pages():
            list_rv = list_rv or rv
            for raw in items:
                counted = self._counted(raw)
                if counted is not None:
                    self._put(*counted)
            del items
        batch: list[tuple[events.KubeNodeUsage, str]] = []
        for node in sorted(set(self.by_node) | set(self.last) | set(self.unacked_tombstones)):
            ev = self._changed(node, self._event(node, list_rv, now), list_rv, now)
            if ev is not None:
                batch.append((ev, self._msg_id(ev)))
        if batch:
            await self._publish(batch)
        self.unacked_tombstones.clear()
        await self._relisted(list_rv, now)

    async def _on_line(self, line: bytes) -> None:
        ev = DECODE_WATCH.decode(line)
        if ev.type in ("ERROR", "BOOKMARK"):
            await super()._on_line(line)
            return
        self.last_event_at = time.monotonic()
        raw = self._decode_item(ev.object)
        version = raw.metadata.resourceVersion
        if version:
            self.resource_version = version
        key = f"{raw.metadata.namespace}/{raw.metadata.name}"
        before = self.pods.get(key)
        after = None if ev.type == "DELETED" else self._counted(raw)
        now_counted = after[1] if after is not None else None
        if before == now_counted:
            return
        self._put(key, now_counted)
        now = time.time_ns()
        # A pod's node never changes once set (spec.nodeName is immutable), but look at both.
        nodes = {c.node for c in (before, now_counted) if c is not None}
        for node in sorted(nodes):
            out = self._changed(node, self._event(node, version, now), version, now)
            if out is not None:
                await self._send(out, self._msg_id(out))


class WatchedResource(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of :data:`RESOURCES`: the watcher class, the observation kind it publishes
    (its seed is read from the projection), the ``KubeSettings`` switch that turns it on
    (``watch_pods`` …), its constructor's extra arguments, and whether it takes the
    scheduler name (``PodWatcher``)."""

    watcher: type[KubeWatcher[Any]]
    observes: type[events.Event]
    switch: str
    extra: dict[str, Any] = {}
    scheduler: bool = False
    #: It fills the app's :class:`~slurmbridge.kube.cache.PodCache` (``pod_cache``).
    caches_pods: bool = False


#: Every resource the producer watches besides Nodes (which always run, on the node label
#: selector): the table :mod:`slurmbridge.app` starts the watchers from.
RESOURCES: Final[tuple[WatchedResource, ...]] = (
    WatchedResource(
        watcher=PodWatcher,
        observes=events.KubePod,
        switch="watch_pods",
        scheduler=True,
        caches_pods=True,
    ),
    WatchedResource(
        watcher=NodeUsageWatcher,
        observes=events.KubeNodeUsage,
        switch="node_usage",
        scheduler=True,
    ),
    WatchedResource(
        watcher=SpecWatcher,
        observes=events.KubeNodeSet,
        switch="watch_node_sets",
        extra={"spec": NODESETS},
    ),
    WatchedResource(watcher=SlurmdPodWatcher, observes=events.KubePod, switch="watch_node_sets"),
    WatchedResource(
        watcher=SpecWatcher,
        observes=events.SlurmCluster,
        switch="watch_clusters",
        extra={"spec": CLUSTERS},
    ),
    *(
        WatchedResource(
            watcher=SpecWatcher, observes=observes, switch="watch_dra", extra={"spec": spec}
        )
        for spec, observes in (
            (RESOURCE_SLICES, events.KubeResourceSlice),
            (RESOURCE_CLAIMS, events.KubeResourceClaim),
            (DEVICE_CLASSES, events.KubeDeviceClass),
        )
    ),
    *(
        WatchedResource(watcher=watcher, observes=observes, switch=switch, extra={"kind": kind})
        for watcher, observes, switch, kinds in (
            (ScalerWatcher, events.KubeScaler, "watch_scalers", SCALER_KINDS),
            (WorkloadWatcher, events.KubeWorkload, "watch_workloads", WORKLOAD_KINDS),
            (SchedulingWatcher, events.KubeWorkload, "watch_workloads", SCHEDULING_KINDS),
        )
        for kind in kinds
    ),
)
