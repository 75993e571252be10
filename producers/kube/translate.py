"""Pure translations of Kubernetes objects into observations (no I/O, no decisions):
:func:`node_to_event`, :func:`pod_to_event`, :func:`workload_to_event`,
:func:`nodeset_to_event`, :func:`cluster_to_event`, :func:`scaler_to_event`,
:func:`resource_slice_to_event`, :func:`resource_claim_to_event`, their tombstones, and the
quantity parser they share.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final, Protocol, TypeVar

import msgspec

from schemas import subjects, wellknown
from schemas.events import (
    AllocatedDevice,
    ClaimConsumer,
    ClaimRequest,
    Condition,
    DraRequest,
    Event,
    HostPort,
    KubeDeviceClass,
    KubeNode,
    KubeNodeSet,
    KubePod,
    KubeResourceClaim,
    KubeResourceSlice,
    KubeScaler,
    KubeWorkload,
    NodeCondition,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeSetCondition,
    NodeSetStatus,
    OwnerRef,
    PodAffinityTerm,
    PodClaim,
    PodCondition,
    SliceDevice,
    SlurmCluster,
    Taint,
    Toleration,
    workload_key,
)
from slurmbridge.kube import revisions
from slurmbridge.kube.wire import (
    RawCluster,
    RawCondition,
    RawContainer,
    RawDeviceClass,
    RawNode,
    RawNodeSelector,
    RawNodeSelectorRequirement,
    RawNodeSet,
    RawNodeSetSpec,
    RawObjMeta,
    RawOwnerRef,
    RawPod,
    RawPodSpec,
    RawPodStatus,
    RawResourceClaim,
    RawResourceSlice,
    RawScaler,
    RawScheduledUpdate,
    RawSchedulingPolicy,
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
#: A DRA extended resource: ``deviceclass.resource.kubernetes.io/<device class>``
#: (resource.k8s.io/v1 ``ResourceDeviceClassPrefix``).
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"


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


def _ours(condition_type: str) -> bool:
    """A node condition slurmbridge sets: ``Slurm…`` and Slinky's ``SlinkySlurm…`` (the GRES
    condition keeps Slinky's name, ``SlinkySlurmGRESCompatible``)."""
    return condition_type.startswith(("Slurm", "SlinkySlurm"))


class _Meta(Protocol):
    """What every watched object's metadata has (``RawMeta``, ``RawObjMeta``)."""

    name: str
    uid: str
    resourceVersion: str  # noqa: N815 - Kubernetes wire name


def _envelope(md: _Meta, producer: str, observed_at: int, key: str) -> dict[str, Any]:
    """The fields every Kubernetes observation carries (schemas.events ``Event``): the
    Kubernetes source, ``key``, when and by whom it was observed, the object's
    resourceVersion (``version``) and uid."""
    return {
        "source": subjects.KUBE_SOURCE,
        "key": key,
        "observed_at": observed_at,
        "version": md.resourceVersion,
        "producer": producer,
        "uid": md.uid,
    }


def _namespaced(
    md: RawObjMeta, producer: str, observed_at: int, key: str | None = None
) -> dict[str, Any]:
    """:func:`_envelope` of a namespaced object, with its ``namespace`` and ``name``; the key
    is ``namespace/name`` unless given."""
    return {
        **_envelope(md, producer, observed_at, f"{md.namespace}/{md.name}" if key is None else key),
        "namespace": md.namespace,
        "name": md.name,
    }


def node_to_event(raw: RawNode, *, producer: str, observed_at: int) -> KubeNode:
    """Translate a raw Node into a ``KubeNode`` observation (pure).

    ``cpu_millis`` from ``capacity.cpu``; ``memory_bytes`` from ``capacity.memory``;
    ``gpus`` sums ``nvidia.com/gpu`` and ``amd.com/gpu``; ``ready`` from the Ready condition;
    ``annotations`` keeps only Slinky's (``*slinky.slurm.net/*``); ``alloc_*`` from
    ``status.allocatable`` (cpu, memory, pods; 0 when absent; ``alloc_extended`` every other
    resource, :func:`extended_amounts`).
    """
    md, spec, status = raw.metadata, raw.spec, raw.status
    cap = status.capacity or {}
    alloc = status.allocatable or {}
    return KubeNode(
        **_envelope(md, producer, observed_at, md.name),
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
            if _ours(c.type)
        ),
        true_conditions=tuple(
            NodeCondition(type=c.type, status=c.status, reason=c.reason, message=c.message)
            for c in status.conditions or []
            if c.status == "True" and c.type != "Ready" and not _ours(c.type)
        ),
        cpu_millis=_capacity(cap, "cpu", 1000),
        memory_bytes=_capacity(cap, "memory", 1),
        gpus=sum(_capacity(cap, g, 1) for g in GPU_RESOURCES),
        alloc_cpu_millis=_capacity(alloc, "cpu", 1000),
        alloc_memory_bytes=_capacity(alloc, "memory", 1),
        alloc_pods=_capacity(alloc, "pods", 1),
        alloc_extended=extended_amounts(alloc),
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


_C = TypeVar("_C", bound=Condition)


def _conditions(
    kind: type[_C], raw: list[RawCondition] | None, carried: Callable[[str], bool]
) -> tuple[_C, ...]:
    """The conditions of the types ``carried`` selects, as ``kind``, in their order."""
    return tuple(
        kind(
            type=c.type,
            status=c.status,
            reason=c.reason,
            message=c.message,
            last_transition=_epoch(c.lastTransitionTime),
        )
        for c in raw or []
        if carried(c.type)
    )


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


#: Resources NodeResourcesFit does not read from ``extended`` (cpu and memory have their own
#: fields; ``pods`` is a count of pods, not a request).
_NOT_EXTENDED: Final = frozenset({"cpu", "memory", "pods"})


def _whole(raw: str) -> int:
    """A quantity in whole units, rounded up (``resource.Quantity.Value``); 0 when malformed."""
    try:
        return math.ceil(parse_quantity(raw) - 1e-9)
    except (ValueError, OverflowError):
        return 0


def extended_amounts(values: dict[str, str] | None) -> dict[str, int]:
    """Every resource of ``values`` but cpu, memory and pods, in whole units (rounded up),
    zeros left out: a node's allocatable extended resources, hugepages and storage."""
    out = {k: _whole(v) for k, v in (values or {}).items() if k not in _NOT_EXTENDED}
    return {k: v for k, v in out.items() if v > 0}


def pod_extended(spec: RawPodSpec) -> dict[str, int]:
    """A pod's effective request of every resource but cpu and memory (and DRA extended
    resources, which DRA allocates), as kube-scheduler computes it (``_effective``: the
    containers' sum or the largest init container, plus ``spec.overhead``; a container's
    request, else its limit). Whole units, rounded up; zeros left out.
    (``pkg/scheduler/framework/plugins/noderesources/fit.go`` ``computePodResourceRequest``.)"""
    names: set[str] = set()
    for c in [*(spec.containers or []), *(spec.initContainers or [])]:
        names.update(c.resources.requests or {})
        names.update(c.resources.limits or {})
    names.update(spec.overhead or {})
    names -= _NOT_EXTENDED
    out: dict[str, int] = {}
    for name in sorted(n for n in names if not n.startswith(DEVICE_CLASS_PREFIX)):

        def amount(c: RawContainer, name: str = name) -> int:
            r = c.resources
            raw = (r.requests or {}).get(name)
            if raw is None:
                raw = (r.limits or {}).get(name)
            return _whole(raw) if raw is not None else 0

        overhead = (spec.overhead or {}).get(name)
        total = _effective(spec, amount, _whole(overhead) if overhead is not None else 0)
        if total > 0:
            out[name] = total
    return out


def pod_affinity_terms(spec: RawPodSpec, *, anti: bool) -> tuple[PodAffinityTerm, ...]:
    """The required terms of ``spec.affinity.podAntiAffinity`` (``anti``) or ``podAffinity``
    (see ``PodAffinityTerm``)."""
    affinity = spec.affinity
    side = (
        None if affinity is None else (affinity.podAntiAffinity if anti else affinity.podAffinity)
    )
    terms = side.requiredDuringSchedulingIgnoredDuringExecution if side is not None else None
    return tuple(
        PodAffinityTerm(
            match_labels=dict((t.labelSelector.matchLabels or {}) if t.labelSelector else {}),
            match_expressions=_requirements(
                t.labelSelector.matchExpressions if t.labelSelector else None
            ),
            has_selector=t.labelSelector is not None,
            namespaces=tuple(t.namespaces or ()),
            all_namespaces=t.namespaceSelector is not None,
            topology_key=t.topologyKey,
        )
        for t in terms or ()
    )


def pod_host_ports(spec: RawPodSpec) -> tuple[HostPort, ...]:
    """The host ports of a pod's containers and init containers, sorted (NodePorts'
    ``getContainerPorts``: a port with ``hostPort`` 0 binds nothing on the node)."""
    ports = {
        HostPort(port=p.hostPort, protocol=p.protocol or "TCP", host_ip=p.hostIP or "")
        for c in [*(spec.initContainers or []), *(spec.containers or [])]
        for p in c.ports or ()
        if p.hostPort
    }
    return tuple(sorted(ports, key=lambda h: (h.port, h.protocol, h.host_ip)))


def pod_requests(spec: RawPodSpec) -> tuple[int, int]:
    """A pod's effective request: (millicpu, bytes), as kube-scheduler sums it into a node's
    ``NodeInfo.Requested`` (:func:`_effective` of the containers' requests, limits where a
    container sets only limits, plus ``spec.overhead``)."""
    return (
        _effective(
            spec,
            lambda c: _container_request(c, "cpu", 1000),
            _quantity(spec.overhead, "cpu", 1000),
        ),
        _effective(
            spec,
            lambda c: _container_request(c, "memory", 1),
            _quantity(spec.overhead, "memory", 1),
        ),
    )


def _requirements(
    reqs: list[RawNodeSelectorRequirement] | None,
) -> tuple[NodeSelectorRequirement, ...]:
    return tuple(
        NodeSelectorRequirement(key=r.key, operator=r.operator, values=tuple(r.values or ()))
        for r in reqs or ()
    )


def _node_affinity(spec: RawPodSpec) -> tuple[NodeSelectorTerm, ...] | None:
    """The required node affinity's terms; None when the pod has none (an empty list of terms
    is kept: it matches no node)."""
    na = spec.affinity.nodeAffinity if spec.affinity is not None else None
    required = na.requiredDuringSchedulingIgnoredDuringExecution if na is not None else None
    if required is None:
        return None
    return tuple(
        NodeSelectorTerm(
            match_expressions=_requirements(t.matchExpressions),
            match_fields=_requirements(t.matchFields),
        )
        for t in required.nodeSelectorTerms or ()
    )


def _controller(refs: list[RawOwnerRef] | None) -> OwnerRef | None:
    for r in refs or []:
        if r.controller:
            return OwnerRef(api_version=r.apiVersion, kind=r.kind, name=r.name, uid=r.uid)
    return None


def _dra_requests(spec: RawPodSpec) -> tuple[DraRequest, ...]:
    """The containers' DRA extended resources (init containers first): the request, or the
    limit where only that is set (the API server defaults a request to the limit)."""
    return tuple(
        DraRequest(
            container=c.name,
            resource=name,
            device_class=name[len(DEVICE_CLASS_PREFIX) :],
            count=_container_request(c, name, 1),
        )
        for c in [*(spec.initContainers or []), *(spec.containers or [])]
        for name in sorted({**(c.resources.limits or {}), **(c.resources.requests or {})})
        if name.startswith(DEVICE_CLASS_PREFIX)
    )


def _pod_claims(raw: RawPod) -> tuple[PodClaim, ...]:
    """``spec.resourceClaims`` with the claims made from templates
    (``status.resourceClaimStatuses``)."""
    made = {st.name: st.resourceClaimName or "" for st in raw.status.resourceClaimStatuses or []}
    return tuple(
        PodClaim(
            name=c.name,
            resource_claim_name=c.resourceClaimName or "",
            template_name=c.resourceClaimTemplateName or "",
            generated=made.get(c.name, "") if c.resourceClaimTemplateName else "",
        )
        for c in raw.spec.resourceClaims or []
    )


def pod_to_event(raw: RawPod, *, producer: str, observed_at: int) -> KubePod:
    """Translate a raw Pod into a ``KubePod`` observation (pure; see KubePod for the fields)."""
    md, spec, status = raw.metadata, raw.spec, raw.status

    def gpus(c: RawContainer) -> int:
        return sum(_quantity(c.resources.limits, g, 1) for g in GPU_RESOURCES)

    cpu_millis, memory_bytes = pod_requests(spec)
    why = _kubelet_why(status)

    return KubePod(
        **_namespaced(md, producer, observed_at),
        phase=status.phase or "Pending",
        node_name=spec.nodeName or "",
        scheduler_name=spec.schedulerName or "",
        labels=dict(md.labels or {}),
        annotations={k: v for k, v in (md.annotations or {}).items() if SLINKY_ANNOTATION in k},
        finalizers=tuple(md.finalizers or ()),
        deletion_timestamp=_epoch(md.deletionTimestamp),
        deletion_grace_s=md.deletionGracePeriodSeconds or 0,
        cpu_millis=cpu_millis,
        memory_bytes=memory_bytes,
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
        conditions=_conditions(
            PodCondition,
            status.conditions,
            lambda t: t == "PodScheduled" or t.startswith(wellknown.SLURM_NODE_STATE_PREFIX),
        ),
        tolerations=tuple(
            sorted({t.key or "" for t in spec.tolerations or [] if t.key or t.operator == "Exists"})
        ),
        created_at=_epoch(md.creationTimestamp),
        scheduling_group=(spec.schedulingGroup.podGroupName or "") if spec.schedulingGroup else "",
        dra_requests=_dra_requests(spec),
        claims=_pod_claims(raw),
        extended_claim=(
            status.extendedResourceClaimStatus.resourceClaimName
            if status.extendedResourceClaimStatus is not None
            else ""
        ),
        node_selector=dict(spec.nodeSelector or {}),
        node_affinity=_node_affinity(spec),
        toleration_specs=_tolerations(spec),
        extended=pod_extended(spec),
        host_ports=pod_host_ports(spec),
        pod_affinity=pod_affinity_terms(spec, anti=False),
        pod_anti_affinity=pod_affinity_terms(spec, anti=True),
        kubelet_reason=why[0],
        kubelet_message=why[1],
    )


#: The longest kubelet message a KubePod carries (characters; longer ones end in ``…``): an
#: image pull error can quote a registry's whole answer, and it travels in every observation.
KUBELET_MESSAGE_LIMIT: Final = 512
#: Container waiting reasons of a container that is merely starting (kubelet
#: pkg/kubelet/kuberuntime and kubelet_pods.go): not a failure.
_STARTING: Final = frozenset({"", "ContainerCreating", "PodInitializing"})


def _clip(text: str) -> str:
    return text if len(text) <= KUBELET_MESSAGE_LIMIT else text[: KUBELET_MESSAGE_LIMIT - 1] + "…"


def _kubelet_why(status: RawPodStatus) -> tuple[str, str]:
    """``(kubelet_reason, kubelet_message)`` of a pod (see KubePod; ``("", "")``: the
    kubelet says nothing)."""
    if status.reason:
        return status.reason, _clip(status.message)
    containers = [*(status.initContainerStatuses or ()), *(status.containerStatuses or ())]
    for c in containers:
        waiting = c.state.waiting
        if waiting is not None and waiting.reason not in _STARTING:
            message = f"container {c.name}: {waiting.message}" if waiting.message else ""
            return waiting.reason, _clip(message)
    if (status.phase or "") in ("Failed", "Succeeded"):
        for c in containers:
            ended = c.state.terminated
            if ended is not None and ended.exitCode:
                message = f"container {c.name} exited with {ended.exitCode}"
                if ended.message:
                    message += f": {ended.message}"
                return ended.reason or "Error", _clip(message)
    return "", ""


def _tolerations(spec: RawPodSpec) -> tuple[Toleration, ...]:
    """``spec.tolerations`` in full."""
    return tuple(
        # No API default: an empty operator reads as Equal (core/v1 toleration.go).
        Toleration(
            key=t.key or "",
            operator=t.operator or "Equal",
            value=t.value or "",
            effect=t.effect or "",
        )
        for t in spec.tolerations or ()
    )


class _RawTemplate(msgspec.Struct, kw_only=True):
    """A NodeSet's ``spec.template``: only the pod spec's node filters are read."""

    spec: RawPodSpec = msgspec.field(default_factory=RawPodSpec)


_DECODE_TEMPLATE = msgspec.json.Decoder(_RawTemplate)


def _template_spec(raw: msgspec.Raw) -> RawPodSpec:
    """The template's pod spec (an absent or unreadable template: an empty spec)."""
    if not len(raw):
        return RawPodSpec()
    try:
        return _DECODE_TEMPLATE.decode(raw).spec
    except (msgspec.DecodeError, msgspec.ValidationError):
        return RawPodSpec()


def _gang(policy: RawSchedulingPolicy | None, *, composite: bool = False) -> tuple[str, int]:
    """A scheduling.k8s.io scheduling policy as (``gang`` | ``basic`` | ``""``, minCount —
    a CompositePodGroup's (``composite``) minGroupCount; 0 unless gang)."""
    if policy is None:
        return "", 0
    if policy.gang is not None:
        count = policy.gang.minGroupCount if composite else policy.gang.minCount
        return "gang", max(0, count or 0)
    if policy.basic is not None:
        return "basic", 0
    return "", 0


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
    if raw.kind == wellknown.KIND_NATIVE_POD_GROUP:
        return _gang(spec.schedulingPolicy)[1]
    if raw.kind == wellknown.KIND_NATIVE_COMPOSITE:
        return _gang(spec.schedulingPolicy, composite=True)[1]
    return 0


def _native_fields(raw: RawWorkload) -> dict[str, Any]:
    """The KubeWorkload fields of a scheduling.k8s.io PodGroup, CompositePodGroup or Workload
    (empty for other kinds). Field names: k8s-openapi ``v1_36/api/scheduling/v1alpha2`` and
    ``v1_37/api/scheduling/v1beta1`` (PodGroupSpec, WorkloadReference, PodGroupStatus);
    kubernetes ``staging/src/k8s.io/api/scheduling/v1alpha3/types.go``
    (CompositePodGroupSpec, PodGroupSpec ``parentCompositePodGroupName``)."""
    spec = raw.spec
    if raw.kind == wellknown.KIND_NATIVE_WORKLOAD:
        return {
            "templates": {
                t.name: _gang(t.schedulingPolicy)[1] for t in spec.podGroupTemplates or [] if t.name
            }
        }
    parent = spec.parentCompositePodGroupName or ""
    if raw.kind == wellknown.KIND_NATIVE_COMPOSITE:
        cref = spec.workloadRef
        return {
            "policy": _gang(spec.schedulingPolicy, composite=True)[0],
            "workload_name": cref.workloadName if cref is not None else "",
            "template_name": cref.templateName if cref is not None else "",
            "parent": parent,
        }
    if raw.kind != wellknown.KIND_NATIVE_POD_GROUP:
        return {}
    ref = spec.workloadRef  # v1beta1
    if ref is None and spec.podGroupTemplateRef is not None:
        ref = spec.podGroupTemplateRef.workload  # v1alpha2
    types = set(wellknown.CONDITION_POD_GROUP_SCHEDULED.values())
    return {
        "policy": _gang(spec.schedulingPolicy)[0],
        "workload_name": ref.workloadName if ref is not None else "",
        "template_name": (ref.templateName or ref.podGroupTemplateName) if ref is not None else "",
        "scheduled": any(
            c.type in types and c.status == "True" for c in raw.status.conditions or []
        ),
        "parent": parent,
    }


def workload_to_event(raw: RawWorkload, *, producer: str, observed_at: int) -> KubeWorkload:
    """Translate a raw Job / JobSet / LeaderWorkerSet / PodGroup (pure); a scheduling.k8s.io
    PodGroup or Workload arrives with ``kind`` set to its group-kind token
    (``wellknown.KIND_NATIVE_POD_GROUP`` / ``KIND_NATIVE_WORKLOAD``, by its watcher)."""
    md = raw.metadata
    return KubeWorkload(
        **_namespaced(md, producer, observed_at, workload_key(md.namespace, raw.kind, md.name)),
        workload_kind=raw.kind,
        api_version=raw.apiVersion,
        annotations={k: v for k, v in (md.annotations or {}).items() if SLINKY_ANNOTATION in k},
        size=workload_size(raw),
        owner=_controller(md.ownerReferences),
        active_deadline_s=max(0, raw.spec.activeDeadlineSeconds or 0) if raw.kind == "Job" else 0,
        min_cpu_millis=_quantity(raw.spec.minResources, "cpu", 1000),
        min_memory_bytes=_quantity(raw.spec.minResources, "memory", 1),
        phase=(raw.status.phase or "") if raw.kind == "PodGroup" else "",
        **_native_fields(raw),
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
    template = _template_spec(spec.template)
    return KubeNodeSet(
        **_namespaced(md, producer, observed_at),
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
        finalizers=tuple(md.finalizers or ()),
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
            ordinal_to_node=dict(st.ordinalToNode or {}),
            conditions=_conditions(
                NodeSetCondition, st.conditions, lambda t: t in wellknown.NODESET_CONDITIONS
            ),
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
        node_selector=dict(template.nodeSelector or {}),
        node_affinity=_node_affinity(template),
        toleration_specs=_tolerations(template),
        **_scheduled_update(spec.updateStrategy.scheduledUpdate),
    )


def _scheduled_update(raw: RawScheduledUpdate) -> dict[str, Any]:
    """``updateStrategy.scheduledUpdate`` as KubeNodeSet fields: start (epoch s, 0 = unset or
    unreadable), duration (s; unset ⇒ the CRD's default ``30m``, unreadable ⇒ 0) and flags
    upper-cased (slurm-operator nodeset_types.go ``ScheduledUpdateNodeSetStrategy``;
    slurmcontrol.go ``parseReservationFlags`` upper-cases them)."""
    start = 0
    if raw.startTime:
        try:
            start = int(datetime.fromisoformat(raw.startTime).timestamp())
        except ValueError:
            start = 0
    duration = go_duration_s(raw.duration) if raw.duration else 1800.0
    return {
        "scheduled_start": start,
        "scheduled_duration_s": int(duration or 0),
        "scheduled_flags": tuple(f.upper() for f in raw.flags or ()),
    }


_GO_UNITS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_GO_DURATION: Final = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")


def go_duration_s(text: str) -> float | None:
    """A Go ``time.ParseDuration`` string (``30m``, ``1h30m``, ``90s``, ``-5m``) in seconds;
    ``None`` when it does not parse (metav1.Duration's JSON form)."""
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body.lstrip("+-")
    if body == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(body):
        m = _GO_DURATION.match(body, pos)
        if m is None:
            return None
        total += float(m.group(1)) * _GO_UNITS[m.group(2)]
        pos = m.end()
    return sign * total if body else None


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
        **_namespaced(md, producer, observed_at),
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
        **_namespaced(md, producer, observed_at, workload_key(md.namespace, kind, md.name)),
        scaler_kind=kind,
        target_kind=ref.kind,
        target_name=ref.name,
        target_api_version=ref.apiVersion,
    )


def resource_slice_to_event(
    raw: RawResourceSlice, *, producer: str, observed_at: int
) -> KubeResourceSlice:
    """Translate a ResourceSlice (pure): each device keeps the value of each attribute
    (``int``, ``bool``, ``string`` or ``version``, whichever is set)."""
    md, spec = raw.metadata, raw.spec
    devices = []
    for d in spec.devices or []:
        attrs: dict[str, int | bool | str] = {}
        for name, a in (d.attributes or {}).items():
            value = next((v for v in (a.int_, a.bool_, a.string, a.version) if v is not None), None)
            if value is not None:
                attrs[name] = value
        devices.append(SliceDevice(name=d.name, attributes=attrs))
    return KubeResourceSlice(
        **_envelope(md, producer, observed_at, md.name),
        node=spec.nodeName or "",
        driver=spec.driver,
        pool=spec.pool.name,
        pool_generation=spec.pool.generation,
        slice_count=spec.pool.resourceSliceCount,
        devices=tuple(devices),
    )


def device_class_to_event(
    raw: RawDeviceClass, *, producer: str, observed_at: int
) -> KubeDeviceClass:
    """Translate a DeviceClass (pure): each selector's CEL expression (None for another kind
    of selector), whether it has ``config``, its ``extendedResourceName``."""
    md, spec = raw.metadata, raw.spec
    return KubeDeviceClass(
        **_envelope(md, producer, observed_at, md.name),
        selectors=tuple(
            s.cel.expression if s.cel is not None else None for s in spec.selectors or []
        ),
        has_config=bool(spec.config),
        extended_resource_name=spec.extendedResourceName or "",
    )


def selected_node(selector: RawNodeSelector | None) -> str:
    """The one node a claim allocation's ``nodeSelector`` names: a ``metadata.name``
    ``matchFields`` term (what the kube-scheduler and Slinky write) or a
    ``kubernetes.io/hostname`` ``matchExpressions`` term with one value; ``""`` otherwise."""
    if selector is None:
        return ""
    for term in selector.nodeSelectorTerms or []:
        for req, key in (
            *((r, "metadata.name") for r in term.matchFields or []),
            *((r, "kubernetes.io/hostname") for r in term.matchExpressions or []),
        ):
            if req.key == key and req.operator == "In" and len(req.values or []) == 1:
                return (req.values or [""])[0]
    return ""


def resource_claim_to_event(
    raw: RawResourceClaim, *, producer: str, observed_at: int
) -> KubeResourceClaim:
    """Translate a ResourceClaim (pure; see KubeResourceClaim for the fields)."""
    md, spec, st = raw.metadata, raw.spec, raw.status
    ann = md.annotations or {}
    alloc = st.allocation
    return KubeResourceClaim(
        **_namespaced(md, producer, observed_at),
        owner=_controller(md.ownerReferences),
        pod_claim_name=ann.get("resource.kubernetes.io/pod-claim-name", ""),
        extended=ann.get("resource.kubernetes.io/extended-resource-claim") == "true",
        requests=tuple(
            ClaimRequest(
                name=r.name,
                device_class=r.exactly.deviceClassName if r.exactly else "",
                mode=(r.exactly.allocationMode or "ExactCount") if r.exactly else "",
                count=(r.exactly.count if r.exactly.count is not None else 1) if r.exactly else 0,
            )
            for r in spec.devices.requests or []
        ),
        allocated=alloc is not None,
        results=tuple(
            AllocatedDevice(request=r.request, driver=r.driver, pool=r.pool, device=r.device)
            for r in (alloc.devices.results or [] if alloc is not None else [])
        ),
        node=selected_node(alloc.nodeSelector) if alloc is not None else "",
        reserved_for=tuple(
            ClaimConsumer(resource=c.resource, name=c.name, uid=c.uid) for c in st.reservedFor or []
        ),
        deleting=bool(md.deletionTimestamp),
    )
