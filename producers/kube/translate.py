"""Pure translations of Kubernetes objects into observations (no I/O, no decisions):
:func:`node_to_event`, :func:`pod_to_event`, :func:`workload_to_event`,
:func:`nodeset_to_event`, :func:`cluster_to_event`, :func:`scaler_to_event`, their
tombstones, and the quantity parser they share.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import msgspec

from schemas import subjects, wellknown
from schemas.events import (
    Event,
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
from slurmbridge.kube import revisions
from slurmbridge.kube.wire import (
    RawCluster,
    RawContainer,
    RawNode,
    RawNodeSet,
    RawNodeSetSpec,
    RawOwnerRef,
    RawPod,
    RawPodSpec,
    RawScaler,
    RawWorkload,
)

_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")

log = logging.getLogger(__name__)

E = TypeVar("E", bound=Event)


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
        true_conditions=tuple(
            NodeCondition(type=c.type, status=c.status, reason=c.reason, message=c.message)
            for c in status.conditions or []
            if c.status == "True" and c.type != "Ready" and not c.type.startswith("Slurm")
        ),
        cpu_millis=_capacity(cap, "cpu", 1000),
        memory_bytes=_capacity(cap, "memory", 1),
        gpus=sum(_capacity(cap, g, 1) for g in GPU_RESOURCES),
    )


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


def _container_request(c: RawContainer, name: str, scale: float) -> int:
    # The API server defaults a missing request to the limit.
    r = c.resources
    if r.requests and name in r.requests:
        return _quantity(r.requests, name, scale)
    return _quantity(r.limits, name, scale)


def _container_most(c: RawContainer, name: str, scale: float) -> int:
    """The most a container may use of a resource: the larger of its request and limit."""
    r = c.resources
    return max(_quantity(r.requests, name, scale), _quantity(r.limits, name, scale))


def _pod_most(spec: RawPodSpec, name: str, scale: float) -> int:
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


def _effective(spec: RawPodSpec, amount: Callable[[RawContainer], int], overhead: int) -> int:
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

    def gpus(c: RawContainer) -> int:
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
            if c.type == "PodScheduled" or c.type.startswith(wellknown.SLURM_NODE_STATE_PREFIX)
        ),
        tolerations=tuple(
            sorted({t.key or "" for t in spec.tolerations or [] if t.key or t.operator == "Exists"})
        ),
        created_at=_epoch(md.creationTimestamp),
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


def nodeset_to_event(raw: RawNodeSet, *, producer: str, observed_at: int) -> KubeNodeSet:
    """Translate a raw NodeSet of either served version (pure).

    The Slurm cluster is v1beta1's ``spec.controllerRef.name`` (slurm-operator 1.x names its
    Controller object there; slurmbridge reads it as the Cluster's name), else v1alpha1's
    ``spec.clusterName``; the v1beta1 fields keep their CRD defaults when absent (see
    KubeNodeSet).
    """
    md, spec, st = raw.metadata, raw.spec, raw.status
    ref = spec.controllerRef.name if spec.controllerRef is not None else ""
    wdp = spec.workloadDisruptionProtection
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
        cluster_name=ref or spec.clusterName,
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
            updated_replicas=st.updatedReplicas,
            unavailable_replicas=st.unavailableReplicas,
            desired=st.desired,
            node_set_hash=st.nodeSetHash,
        ),
        scaling_mode=spec.scalingMode or "StatefulSet",
        partition_enabled=spec.partition.enabled,
        partition_config=spec.partition.config,
        extra_conf=spec.extraConf,
        pin_to_node=spec.pinToNode,
        workload_disruption_protection=True if wdp is None else wdp,
        prune_slurm_node_records=spec.pruneSlurmNodeRecords or "Never",
        update_strategy=spec.updateStrategy.type or "RollingUpdate",
        min_ready_seconds=spec.minReadySeconds,
        api_version=raw.apiVersion,
        revision_hash=revisions.revision_hash(
            revisions.revision_data(_revision_fields(spec)), st.collisionCount or 0
        ),
        max_unavailable=_int_or_string(spec.updateStrategy.rollingUpdate.maxUnavailable),
        revision_history_limit=spec.revisionHistoryLimit,
        collision_count=st.collisionCount or 0,
    )


def _revision_fields(spec: RawNodeSetSpec) -> dict[str, Any]:
    """The spec fields a NodeSet revision stores, decoded (slurmbridge.kube.revisions)."""
    out: dict[str, Any] = {
        "ordinalPadding": spec.ordinalPadding,
        "oversubscribeNode": spec.oversubscribeNode,
        "extraConf": spec.extraConf,
    }
    for name in ("template", "slurmd", "logfile", "ssh"):
        raw: msgspec.Raw = getattr(spec, name)
        if len(raw):  # an empty Raw: the field is absent
            out[name] = msgspec.json.decode(raw)
    return out


def _int_or_string(value: int | str | None) -> str:
    """An int-or-string field as text (``""`` when unset)."""
    return "" if value is None else str(value)


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
