"""Observation events: what producers saw, trimmed to the fields the reconcilers use.

Every event is a frozen, keyword-only msgspec Struct tagged by its ``kind`` field, and carries
the common envelope:

``source``      ``k8s`` or ``slurm:<cluster>``
``kind``        the tag (``KubeNode``, ``SlurmNode`` …)
``key``         object key: ``name`` (cluster-scoped / Slurm) or ``namespace/name``
``op``          ``observed`` or ``deleted`` (a tombstone: snapshot fields keep their defaults)
``observed_at`` UTC nanoseconds since the epoch when the producer saw it
``version``     Kubernetes ``resourceVersion`` or a content hash of the Slurm object
``producer``    id of the producer instance (host + pid + start generation)

Evolution (docs/architecture.md "The event contract"): new fields get defaults; wire fields
are never renamed or retyped; a new kind lives on its own subject, and consumers decode per
kind (:func:`decoder_for`) so an old consumer never meets an unknown tag.
"""

from __future__ import annotations

import typing
from typing import Final, Literal, TypeVar

import msgspec

from schemas import wellknown

Op = Literal["observed", "deleted"]


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", gc=False):
    """Common envelope of every observation.

    Events and the structs inside them are ``gc=False`` (inherited): untracked by the cyclic
    garbage collector, whose full collections would otherwise scan every event a watcher,
    poller or projection holds — 150,000 pods made each one 30–160 ms. That is safe because
    an event's fields are strings, numbers, ``dict[str, str]`` and tuples of such structs,
    which cannot form a cycle (``tests/unit/test_events.py`` checks every field type).
    """

    source: str
    key: str
    op: Op = "observed"
    observed_at: int = 0
    version: str = ""
    producer: str = ""

    @property
    def deleted(self) -> bool:
        """True for a tombstone."""
        return self.op == "deleted"


# --- Kubernetes ------------------------------------------------------------------------------


class Taint(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A Kubernetes node taint (``effect``: NoSchedule | PreferNoSchedule | NoExecute)."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


class HostPort(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A container port a pod binds on its node (``ports[].hostPort`` > 0): ``port``,
    ``protocol`` (``TCP`` when the pod leaves it empty, as the API server defaults it) and
    ``host_ip`` (``""`` = every address, ``0.0.0.0``). See ``reconcilers._feasible``."""

    port: int
    protocol: str = "TCP"
    host_ip: str = ""


class NodeCondition(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A Kubernetes node condition (only slurmbridge's own are carried, see KubeNode)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""


class KubeNode(Event, frozen=True, kw_only=True, tag="KubeNode"):
    """A Kubernetes Node. ``key`` is the node name.

    ``cpu_millis`` and ``memory_bytes`` come from ``status.capacity``; ``gpus`` is the sum of
    ``nvidia.com/gpu`` and ``amd.com/gpu`` capacity. ``conditions`` holds only the conditions
    slurmbridge sets (types starting with ``Slurm`` or ``SlinkySlurm``), so kubelet heartbeats are
    not events.
    ``true_conditions``: the other conditions whose status is ``True``, except ``Ready``
    (Node Problem Detector's ``GPUProblem`` …), without their heartbeat times; a cordoned
    node's slurmd drain reason may be built from them (reconcilers.nodeset).
    ``alloc_cpu_millis`` / ``alloc_memory_bytes`` / ``alloc_pods``: ``status.allocatable``
    (millicpu, bytes, pods) — what the scheduler may hand out (capacity less the kubelet's
    reservations); ``0`` = unknown (not reported, or an observation from before these fields).
    ``alloc_extended``: the rest of ``status.allocatable`` (extended resources such as
    ``nvidia.com/gpu``, ``hugepages-*``, ``ephemeral-storage``), name → amount in whole units
    (bytes for storage and hugepages), rounded up; a resource absent is none at all.
    """

    uid: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    ready: bool = False
    cpu_millis: int = 0
    memory_bytes: int = 0
    gpus: int = 0
    conditions: tuple[NodeCondition, ...] = ()
    true_conditions: tuple[NodeCondition, ...] = ()
    alloc_cpu_millis: int = 0
    alloc_memory_bytes: int = 0
    alloc_pods: int = 0
    alloc_extended: dict[str, int] = {}

    def condition(self, type_: str) -> NodeCondition | None:
        """The condition of type ``type_``, if the node has it."""
        return next((c for c in self.conditions if c.type == type_), None)


class KubeNodeUsage(Event, frozen=True, kw_only=True, tag="KubeNodeUsage"):
    """What the pods bound to one Kubernetes node request, all of them (not only ours): the
    sum kube-scheduler keeps as ``NodeInfo.Requested``. ``key`` is the node name.

    Counted: every pod with ``spec.nodeName`` set whose phase is neither Succeeded nor Failed
    (kube-scheduler's informer field selector). ``cpu_millis`` / ``memory_bytes``: the sum of
    the pods' effective requests (as ``KubePod.cpu_millis`` / ``memory_bytes``); ``pods``:
    how many. A node with no such pod left gets a tombstone (``op="deleted"``), which reads
    as zeros. Published by ``producers.kube.watch.NodeUsageWatcher`` when a total changes.

    ``extended``: the sum of the pods' effective requests of every other resource (as
    ``KubePod.extended``), name → amount. ``host_ports``: every host port the counted pods
    bind (one entry per pod and port, sorted). ``bridge_*``: the part of ``cpu_millis``,
    ``memory_bytes``, ``pods`` and ``extended`` requested by pods of a Slurm allocation of
    ours — ``spec.schedulerName`` ours and a positive ``scheduler.slinky.slurm.net/slurm-jobid``
    label (Slinky slurm-bridge eligibility.go ``podAllocationID``): Slurm accounts for
    those, so a node they fill stays eligible for the next allocation (issue 28 item 3).
    """

    cpu_millis: int = 0
    memory_bytes: int = 0
    pods: int = 0
    extended: dict[str, int] = {}
    host_ports: tuple[HostPort, ...] = ()
    #: Every counted pod's namespace, labels and required anti-affinity (InterPodAffinity),
    #: sorted by namespace and labels.
    peers: tuple[PeerPod, ...] = ()
    bridge_cpu_millis: int = 0
    bridge_memory_bytes: int = 0
    bridge_pods: int = 0
    bridge_extended: dict[str, int] = {}


class Condition(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The fields of a Kubernetes status condition slurmbridge carries (metav1.Condition and
    core/v1 PodCondition share them). ``last_transition``: ``lastTransitionTime`` as epoch
    seconds (0 when absent)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition: int = 0


class PodCondition(Condition, frozen=True, kw_only=True, gc=False):
    """A Kubernetes pod condition (only ``PodScheduled`` and ``SlurmNodeState*`` are carried,
    see KubePod).

    ``last_transition``: ``lastTransitionTime`` as epoch seconds (0 when absent).
    """


class OwnerRef(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A pod's controller ``ownerReference`` (``api_version`` like ``batch/v1``)."""

    api_version: str
    kind: str
    name: str
    uid: str = ""


class DraRequest(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A container's request of a DRA extended resource
    (``deviceclass.resource.kubernetes.io/<device_class>``): ``count`` devices (the
    request, or the limit when only that is set, as the API server defaults it)."""

    container: str
    resource: str
    device_class: str
    count: int = 0


class PodClaim(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One ``spec.resourceClaims`` entry of a pod: ``name`` (the pod-local name), and
    exactly one of ``resource_claim_name`` (an existing ResourceClaim) and
    ``template_name`` (a ResourceClaimTemplate); ``generated``: the claim made from the
    template, as ``status.resourceClaimStatuses`` names it (``""`` until the
    kube-controller-manager's resourceclaim controller made it)."""

    name: str
    resource_claim_name: str = ""
    template_name: str = ""
    generated: str = ""

    @property
    def claim(self) -> str:
        """The ResourceClaim's name, ``""`` while a template's claim does not exist yet."""
        return self.resource_claim_name or self.generated


class Toleration(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A pod's ``spec.tolerations`` entry. ``operator``: ``Equal`` (the API default) or
    ``Exists``; ``effect``: ``""`` tolerates every effect; ``key`` ``""`` with ``Exists``
    tolerates every taint (k8s.io/api core/v1 toleration.go ``ToleratesTaint``)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


class NodeSelectorRequirement(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One ``matchExpressions`` / ``matchFields`` entry of a node selector term.
    ``operator``: In | NotIn | Exists | DoesNotExist | Gt | Lt."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


class NodeSelectorTerm(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One ``nodeSelectorTerms`` entry: its expressions and fields, all ANDed."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class PodAffinityTerm(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A required pod (anti-)affinity term: the pods its label selector matches
    (``match_labels`` and ``match_expressions``, ANDed; operators In, NotIn, Exists,
    DoesNotExist; no selector matches no pod), in ``namespaces`` (empty: the term's own pod's
    namespace) or every namespace (``all_namespaces``: a ``namespaceSelector`` was given —
    an empty one is every namespace; a non-empty one is read as every namespace too, as the
    namespaces' labels are not observed), on nodes sharing the value of ``topology_key``."""

    match_labels: dict[str, str] = {}
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    has_selector: bool = True
    namespaces: tuple[str, ...] = ()
    all_namespaces: bool = False
    topology_key: str = ""


class PeerPod(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A pod bound to a node as InterPodAffinity reads it: namespace, labels and its
    required anti-affinity terms (``KubeNodeUsage.peers``)."""

    namespace: str
    labels: dict[str, str] = {}
    anti_affinity: tuple[PodAffinityTerm, ...] = ()


class KubePod(Event, frozen=True, kw_only=True, tag="KubePod"):
    """A Kubernetes Pod that slurmbridge schedules. ``key`` is ``namespace/name``.

    ``phase``: Pending | Running | Succeeded | Failed | Unknown. ``node_name``: ``spec.nodeName``
    (``""`` while unbound). ``deletion_timestamp``: epoch seconds, ``0`` when the pod is not
    being deleted — as the API server sets it, the *end* of the grace period (request time +
    grace); ``deletion_grace_s``: that grace period in seconds.
    ``cpu_millis`` / ``memory_bytes``: the pod's effective request as the Kubernetes scheduler
    computes it — the larger of the containers' sum and the largest init container, plus
    ``spec.overhead`` (requests, or limits where a container sets only limits).
    ``gpus``: ``nvidia.com/gpu`` + ``amd.com/gpu`` limits of the containers (the larger of the
    sum and the largest init container). ``gpu_kinds``: which of the two were asked for.
    ``annotations`` keeps only Slinky's (``*slinky.slurm.net/*``); ``conditions`` only
    ``PodScheduled`` and the ``SlurmNodeState*`` ones (slurmd pods, reconcilers.nodeset);
    ``tolerations`` only the keys of tolerations (``""`` = tolerates all).
    ``created_at``: ``metadata.creationTimestamp`` in epoch seconds.
    ``cpu_millis_max`` / ``memory_bytes_max``: the most the pod may use — per container the
    larger of request and limit (aggregated as requests are, plus overhead), or the pod-level
    ``spec.resources`` when set (Kubernetes 1.32+); what its Slurm job must hold, so Slurm
    never allocates less than the pod may use (Slinky sizes the job from max(requests,
    limits)). ``0`` in observations from before these fields.
    ``ready_since``: while the pod is Ready, its Ready condition's ``lastTransitionTime``
    (epoch seconds; 0 otherwise).
    ``scheduling_group``: ``spec.schedulingGroup.podGroupName`` — the Kubernetes Workload
    API PodGroup (``scheduling.k8s.io``, 1.36+) the pod joins (``""``: none); immutable.
    ``dra_requests``: its containers' (init containers first) DRA extended resources
    (``deviceclass.resource.kubernetes.io/<class>``), one entry per container and class.
    ``claims``: ``spec.resourceClaims`` (with the claim made from a template, from
    ``status.resourceClaimStatuses``). ``extended_claim``:
    ``status.extendedResourceClaimStatus.resourceClaimName`` (``""``: none).
    ``node_selector``: ``spec.nodeSelector``. ``node_affinity``: the terms of
    ``spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`` (ORed;
    ``None`` = no required node affinity, ``()`` = a required affinity without terms, which
    matches no node). ``toleration_specs``: ``spec.tolerations`` in full (``tolerations``
    keeps only their keys). See ``reconcilers._feasible`` for how they are read.
    ``extended``: the effective request (as ``cpu_millis``) of every resource other than cpu
    and memory — ``nvidia.com/gpu``, ``hugepages-2Mi``, ``ephemeral-storage`` … — in whole
    units, rounded up; DRA extended resources (``deviceclass.resource.kubernetes.io/*``) are
    left out (``dra_requests``). ``host_ports``: the containers' host ports (init containers
    too, as kube-scheduler's NodePorts reads them). ``pod_affinity`` /
    ``pod_anti_affinity``: ``spec.affinity.podAffinity`` / ``podAntiAffinity``
    ``requiredDuringSchedulingIgnoredDuringExecution`` (preferred terms are not read).
    ``kubelet_reason`` / ``kubelet_message``: the kubelet's word on why the pod does not run
    (``""``: none) — ``status.reason`` / ``status.message`` of a pod it rejected or evicted
    (``OutOfcpu``, ``TaintToleration``, ``Evicted`` …), else the first container (init
    containers first) waiting for a reason other than ``ContainerCreating`` /
    ``PodInitializing`` (``ImagePullBackOff``, ``CrashLoopBackOff``,
    ``CreateContainerConfigError`` …; message ``container <name>: <message>``), else, on a
    Failed or Succeeded pod, the first container that terminated with a non-zero exit code
    (``Error``, ``OOMKilled``; message ``container <name> exited with <code>…``). The message
    is cut at 512 characters (``…``).
    """

    uid: str = ""
    namespace: str = ""
    name: str = ""
    phase: str = "Pending"
    node_name: str = ""
    scheduler_name: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    finalizers: tuple[str, ...] = ()
    deletion_timestamp: int = 0
    deletion_grace_s: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0
    gpus: int = 0
    owner: OwnerRef | None = None
    ready: bool = False
    conditions: tuple[PodCondition, ...] = ()
    tolerations: tuple[str, ...] = ()
    created_at: int = 0
    cpu_millis_max: int = 0
    memory_bytes_max: int = 0
    ready_since: int = 0
    scheduling_group: str = ""
    dra_requests: tuple[DraRequest, ...] = ()
    claims: tuple[PodClaim, ...] = ()
    extended_claim: str = ""
    node_selector: dict[str, str] = {}
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    toleration_specs: tuple[Toleration, ...] = ()
    extended: dict[str, int] = {}
    host_ports: tuple[HostPort, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    kubelet_reason: str = ""
    kubelet_message: str = ""

    @property
    def terminal(self) -> bool:
        """True once the pod has Succeeded or Failed (its containers will not run again)."""
        return self.phase in ("Succeeded", "Failed")

    @property
    def deleting(self) -> bool:
        """True while the pod is being deleted (``deletionTimestamp`` set)."""
        return self.deletion_timestamp > 0

    def condition(self, type_: str) -> PodCondition | None:
        """The condition of type ``type_``, if the pod has it."""
        return next((c for c in self.conditions if c.type == type_), None)


class KubeWorkload(Event, frozen=True, kw_only=True, tag="KubeWorkload"):
    """An object that groups pods into one Slurm job: a batch/v1 Job, a JobSet, a
    LeaderWorkerSet, a coscheduling PodGroup, or a Kubernetes Workload API PodGroup or
    Workload (``scheduling.k8s.io``; ``workload_kind`` ``PodGroup.scheduling.k8s.io`` /
    ``Workload.scheduling.k8s.io``, see ``schemas.wellknown``).

    ``key`` is ``namespace/Kind:name`` (``default/JobSet:train``), so objects of different
    kinds with one name never collide. ``annotations`` keeps only Slinky's
    (``slurmjob.slinky.slurm.net/*`` among them). ``size``: pods the group is expected to
    have (Job ``parallelism``, the sum over a JobSet's replicated jobs of replicas ×
    parallelism, LeaderWorkerSet ``leaderWorkerTemplate.size``, PodGroup ``minMember``;
    ``0`` = unknown). ``owner``: the object's own controller (a JobSet for its Jobs).
    ``active_deadline_s``: a Job's ``spec.activeDeadlineSeconds`` (seconds; 0 = none).
    ``min_cpu_millis`` / ``min_memory_bytes``: a PodGroup's ``spec.minResources``.
    ``phase``: a PodGroup's ``status.phase`` (``""`` for other kinds or when unset).

    Workload API (``scheduling.k8s.io`` v1alpha2 / v1beta1) only:
    ``size`` of a native PodGroup is its ``spec.schedulingPolicy.gang.minCount`` (0 for the
    ``basic`` policy: no gang). ``policy``: ``gang``, ``basic`` or ``""`` (none given: the
    template's in the Workload applies). ``workload_name`` / ``template_name``: the Workload
    and PodGroupTemplate it was made from (v1alpha2 ``spec.podGroupTemplateRef.workload``,
    v1beta1 ``spec.workloadRef``). ``scheduled``: its ``PodGroupScheduled`` (v1alpha2) or
    ``PodGroupInitiallyScheduled`` (v1beta1) condition is True. ``templates`` of a Workload:
    each ``spec.podGroupTemplates[].name`` → its gang ``minCount`` (0: basic).

    Kubernetes 1.37 CompositePodGroup (``workload_kind`` ``CompositePodGroup.scheduling.k8s.io``,
    v1alpha3): ``size`` is its gang ``minGroupCount`` (child groups that must start together;
    0 for ``basic``), ``policy`` ``gang`` or ``basic``, ``workload_name`` / ``template_name``
    its ``spec.workloadRef``. ``parent``: ``spec.parentCompositePodGroupName`` of a PodGroup
    or CompositePodGroup (``""``: the root of its tree).
    """

    uid: str = ""
    namespace: str = ""
    name: str = ""
    workload_kind: str = ""
    api_version: str = ""
    annotations: dict[str, str] = {}
    size: int = 0
    owner: OwnerRef | None = None
    active_deadline_s: int = 0
    min_cpu_millis: int = 0
    min_memory_bytes: int = 0
    phase: str = ""
    policy: str = ""
    workload_name: str = ""
    template_name: str = ""
    scheduled: bool = False
    templates: dict[str, int] = {}
    parent: str = ""


class KubeScaler(Event, frozen=True, kw_only=True, tag="KubeScaler"):
    """Something else that scales a workload: a HorizontalPodAutoscaler
    (``autoscaling/v2``) or a KEDA ScaledObject (``keda.sh/v1alpha1``). ``key`` is
    ``namespace/Kind:name``; ``target_kind`` / ``target_name`` / ``target_api_version``:
    its ``spec.scaleTargetRef`` (in the same namespace). The ``autoscale`` reconciler stays
    away from a NodeSet one of these targets.
    """

    uid: str = ""
    namespace: str = ""
    name: str = ""
    scaler_kind: str = ""
    target_kind: str = ""
    target_name: str = ""
    target_api_version: str = ""


class KubeListed(Event, frozen=True, kw_only=True, tag="KubeListed"):
    """A Kubernetes watcher completed a full list of what it watches and published every
    object of it (and the tombstones of what the list lacked) before this marker — client-go's
    informer "has synced", recorded in the log so every worker can tell.

    ``key``: the watcher's listing name (``pods``: the pods our scheduler places; ``nodes``;
    ``slurmd-pods``; a workload resource such as ``jobs``). ``version``: the list's
    resourceVersion. Published after every complete list (the first, and each re-list).
    Rules that act on a Kubernetes object's *absence* (a job whose pods are all gone) wait
    for it, as they wait for a complete Slurm listing (``reconcilers.base.kube_listed``).
    """

    resource: str = ""


def workload_key(namespace: str, kind: str, name: str) -> str:
    """The key of a KubeWorkload: ``namespace/Kind:name``."""
    return f"{namespace}/{kind}:{name}"


# --- Dynamic Resource Allocation (resource.k8s.io/v1) -----------------------------------------


class SliceDevice(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One ``spec.devices[]`` entry of a ResourceSlice: its ``name`` and ``attributes``
    (``attributes[<name>]`` of ``int`` / ``bool`` / ``string`` / ``version``, the one value
    it holds; the keys as the driver wrote them, e.g. ``index`` or ``dra.cpu/cpuID``)."""

    name: str
    attributes: dict[str, int | bool | str] = {}


class KubeResourceSlice(Event, frozen=True, kw_only=True, tag="KubeResourceSlice"):
    """A ``resource.k8s.io/v1`` ResourceSlice (cluster-scoped; ``key`` is its name): the
    devices one DRA ``driver`` publishes for ``node`` (``spec.nodeName``; ``""`` for slices
    not bound to one node) in pool ``pool`` (``spec.pool.name``, ``pool_generation``,
    ``slice_count``: ``spec.pool.resourceSliceCount``)."""

    uid: str = ""
    node: str = ""
    driver: str = ""
    pool: str = ""
    pool_generation: int = 0
    slice_count: int = 0
    devices: tuple[SliceDevice, ...] = ()


class KubeDeviceClass(Event, frozen=True, kw_only=True, tag="KubeDeviceClass"):
    """A ``resource.k8s.io/v1`` DeviceClass (cluster-scoped; ``key`` is its name).

    ``selectors``: ``spec.selectors[]``, each its ``cel.expression`` as written (``None`` for a
    selector that is not CEL); ``has_config``: ``spec.config`` is not empty;
    ``extended_resource_name``: ``spec.extendedResourceName`` (``""`` unset). slurmbridge
    matches the class to a device profile by its selector, not its name
    (:mod:`reconcilers._devprofile`; Slinky slurm-bridge ``internal/dra/registry.go``).
    """

    uid: str = ""
    selectors: tuple[str | None, ...] = ()
    has_config: bool = False
    extended_resource_name: str = ""


class ClaimRequest(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One ``spec.devices.requests[]`` entry of a ResourceClaim with ``exactly``:
    ``device_class`` (``deviceClassName``), ``mode`` (``allocationMode``: ExactCount | All)
    and ``count`` (ExactCount's count, default 1)."""

    name: str
    device_class: str = ""
    mode: str = "ExactCount"
    count: int = 1


class AllocatedDevice(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One ``status.allocation.devices.results[]`` entry: the device ``device`` of ``pool``
    published by ``driver``, given to the claim's request ``request``."""

    request: str
    driver: str
    pool: str
    device: str


class ClaimConsumer(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One ``status.reservedFor[]`` entry (``resource``: ``pods`` for a pod)."""

    resource: str
    name: str
    uid: str = ""


class KubeResourceClaim(Event, frozen=True, kw_only=True, tag="KubeResourceClaim"):
    """A ``resource.k8s.io/v1`` ResourceClaim. ``key`` is ``namespace/name``.

    ``owner``: its controller ``ownerReference`` (a pod for claims made from a template or
    for a pod's extended resources). ``pod_claim_name``: annotation
    ``resource.kubernetes.io/pod-claim-name`` (the pod-local name of a claim made from a
    template); ``extended``: annotation ``resource.kubernetes.io/extended-resource-claim``
    is ``"true"``. ``requests``: ``spec.devices.requests`` with ``exactly`` (other forms are
    kept with an empty ``device_class``). ``allocated``: ``status.allocation`` is set;
    ``results`` its devices, ``node`` the node its ``nodeSelector`` names (a
    ``metadata.name`` match field or a ``kubernetes.io/hostname`` expression; ``""``
    otherwise). ``reserved_for``: ``status.reservedFor``. ``deleting``: a
    ``deletionTimestamp`` is set.
    """

    uid: str = ""
    namespace: str = ""
    name: str = ""
    owner: OwnerRef | None = None
    pod_claim_name: str = ""
    extended: bool = False
    requests: tuple[ClaimRequest, ...] = ()
    allocated: bool = False
    results: tuple[AllocatedDevice, ...] = ()
    node: str = ""
    reserved_for: tuple[ClaimConsumer, ...] = ()
    deleting: bool = False

    def reserved_for_pod(self, uid: str) -> bool:
        """The claim is reserved for the pod with this uid."""
        return any(c.resource == "pods" and c.uid == uid for c in self.reserved_for)


# --- Slurm -----------------------------------------------------------------------------------


class NodeSetCondition(Condition, frozen=True, kw_only=True, gc=False):
    """A NodeSet status condition slurmbridge writes (only ``ReplicaFailure`` is carried,
    see NodeSetStatus). ``last_transition``: ``lastTransitionTime`` as epoch seconds."""


class NodeSetStatus(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A NodeSet's ``status`` as last written (so a reconcile writes only what changed)."""

    replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    slurm_idle: int = 0
    slurm_allocated: int = 0
    slurm_down: int = 0
    slurm_drain: int = 0
    observed_generation: int = 0
    selector: str = ""
    #: slurm-operator 1.x (api/v1beta1/nodeset_types.go ``NodeSetStatus``): live pods at
    #: ``node_set_hash`` (the update revision's hash, ``status.nodeSetHash``), pods still
    #: needed for full availability, and the replicas wanted.
    updated_replicas: int = 0
    unavailable_replicas: int = 0
    desired: int = 0
    node_set_hash: str = ""
    #: ``status.ordinalToNode`` (pinToNode, StatefulSet mode): ordinal (decimal text) → the
    #: Kubernetes node its pod is pinned to (nodeset_sync_status.go ``calculateOrdinalToNode``).
    ordinal_to_node: dict[str, str] = {}
    #: ``status.conditions`` of the types slurmbridge writes (``ReplicaFailure``,
    #: reconcilers.nodeset rule 21); others' conditions are not carried and never written.
    conditions: tuple[NodeSetCondition, ...] = ()


class KubeNodeSet(Event, frozen=True, kw_only=True, tag="KubeNodeSet"):
    """A Slinky NodeSet (``nodesets.slinky.slurm.net``). ``key`` is ``namespace/name``.

    ``replicas``: desired pods (``spec.replicas``, default 1). ``cluster_name``: v1beta1's
    ``spec.controllerRef.name``, else v1alpha1's ``spec.clusterName`` (``""`` = slurmbridge's
    static cluster). ``ordinal_padding``: digits of the pod ordinals. ``selector``:
    ``spec.selector.matchLabels`` (v1alpha1 only). ``generation``: ``metadata.generation``.
    ``deleting``: ``deletionTimestamp`` is set. ``annotations`` keeps only Slinky's and
    slurmbridge's (``*slinky.slurm.net/*``, ``*slurmbridge.dev/*``). ``finalizers``:
    ``metadata.finalizers`` (slurmbridge's keeps a NodeSet with a Slurm partition or
    reservation of ours until they are deleted).

    v1beta1 (slurm-operator 1.x) fields, defaulted as its CRD defaults them:
    ``scaling_mode`` (``StatefulSet`` | ``DaemonSet``), ``partition_enabled`` /
    ``partition_config`` (``spec.partition``), ``extra_conf``, ``pin_to_node``,
    ``workload_disruption_protection`` (default True), ``prune_slurm_node_records``
    (``Never`` | ``NodeNotFound``), ``update_strategy`` (``RollingUpdate`` | ``OnDelete`` |
    ``ScheduledUpdate``), ``min_ready_seconds``. ``api_version``: the version the object
    was read at (``slinky.slurm.net/v1beta1`` or ``…/v1alpha1``).

    Revisions (slurm-operator nodeset_history.go): ``revision_hash`` is the hash of the
    spec's revision data (the template and the fields 1.x stores beside it) with
    ``status.collisionCount``, as :mod:`slurmbridge.kube.revisions` computes it (``""`` in
    observations from before this field: updates are then not applied).
    ``max_unavailable``: ``updateStrategy.rollingUpdate.maxUnavailable`` as written (an
    integer or a percentage such as ``"25%"``; ``""`` = 1.x's default ``25%``).
    ``revision_history_limit``: ``spec.revisionHistoryLimit`` (default 0).
    ``collision_count``: ``status.collisionCount``.

    The template's node filters, read as :class:`KubePod` reads a pod's (DaemonSet mode
    decides eligibility with them, :mod:`reconcilers.nodeset`): ``node_selector``
    (``spec.template.spec.nodeSelector``), ``node_affinity`` (its required node affinity's
    terms, ``None`` = none) and ``toleration_specs``.
    ``scheduled_start`` / ``scheduled_duration_s`` / ``scheduled_flags``:
    ``updateStrategy.scheduledUpdate`` — the window's start (epoch s, 0 = unset), its length
    (seconds; the CRD's default 30 min) and the extra Slurm reservation flags (upper case).
    """

    uid: str = ""
    namespace: str = ""
    name: str = ""
    generation: int = 0
    replicas: int = 1
    cluster_name: str = ""
    ordinal_padding: int = 0
    service_name: str = ""
    selector: dict[str, str] = {}
    annotations: dict[str, str] = {}
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    status: NodeSetStatus = NodeSetStatus()
    scaling_mode: str = "StatefulSet"
    partition_enabled: bool = False
    partition_config: str = ""
    extra_conf: str = ""
    pin_to_node: bool = False
    workload_disruption_protection: bool = True
    prune_slurm_node_records: str = "Never"
    update_strategy: str = "RollingUpdate"
    min_ready_seconds: int = 0
    api_version: str = ""
    revision_hash: str = ""
    max_unavailable: str = ""
    revision_history_limit: int = 0
    collision_count: int = 0
    node_selector: dict[str, str] = {}
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    toleration_specs: tuple[Toleration, ...] = ()
    scheduled_start: int = 0
    scheduled_duration_s: int = 1800
    scheduled_flags: tuple[str, ...] = ()


class SlurmNode(Event, frozen=True, kw_only=True, tag="SlurmNode"):
    """A Slurm node. ``key`` is the Slurm node name; ``source`` names the cluster.

    ``state`` holds the base state first, then the flags, all upper case, version-neutral:
    ``("IDLE", "DRAIN")`` is drained, ``("ALLOCATED", "DRAIN")`` is draining (v0.0.38's
    ``state``/``state_flags`` pair and v0.0.40+'s state array both map onto it).
    ``real_memory`` is in MiB. ``reason_changed_at`` is seconds since the epoch (0 = unset).
    ``topology``: a dynamic node's topology spec (``topo1:b1``, ``""`` none); ``None`` when
    the cluster's REST API version does not report it (before v0.0.43).
    """

    cluster: str = ""
    state: tuple[str, ...] = ()
    reason: str = ""
    reason_set_by_user: str = ""
    reason_changed_at: int = 0
    cpus: int = 0
    alloc_cpus: int = 0
    real_memory: int = 0
    features: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    gres: str = ""
    address: str = ""
    comment: str = ""
    topology: str | None = None
    #: The active reservation the node is in (REST ``node.reservation``; ``""`` none).
    reservation: str = ""
    #: The node's ``Extra`` string (REST ``node.extra``; ``""`` none): slurmbridge's applied
    #: DRA inventory lives there (``slurm-bridge.dra-gres-map=…``, Slinky slurm-bridge 1.3).
    extra: str = ""
    #: The active features (REST ``active_features``): a NodeFeatures plugin keeps only some
    #: of the available ``features`` active (``mig=on`` of ``mig=on,mig=off``); ``None`` when
    #: the REST version does not report them (v0.0.38), or in observations from before.
    active_features: tuple[str, ...] | None = None

    @property
    def base_state(self) -> str:
        """Base state (``IDLE``, ``ALLOCATED``, ``MIXED``, ``DOWN`` …), ``""`` if unknown."""
        return self.state[0] if self.state else ""

    def has(self, flag: str) -> bool:
        """True when ``flag`` (base state or flag, upper case) is in the node's state."""
        return flag in self.state

    @property
    def drained(self) -> bool:
        """Drained and running nothing: DRAIN, not UNDRAIN (an undrain under way: an
        administrator's, which a deletion must never race), and not ALLOCATED, MIXED or
        COMPLETING. The one test before deleting a node or its pod (Slinky slurm-operator's
        ``IsNodeDrained``; issue 18)."""
        return wellknown.slurm_drained(self.state)

    @property
    def busy(self) -> bool:
        """Running or finishing a job (:func:`schemas.wellknown.slurm_busy`)."""
        return wellknown.slurm_busy(self.state)


class SlurmPartition(Event, frozen=True, kw_only=True, tag="SlurmPartition"):
    """A Slurm partition. ``key`` is the partition name; ``nodes`` is the expanded node list."""

    cluster: str = ""
    state: str = ""
    nodes: tuple[str, ...] = ()
    total_cpus: int = 0
    total_nodes: int = 0
    max_time_minutes: int | None = None
    is_default: bool = False


class SlurmPing(Event, frozen=True, kw_only=True, tag="SlurmPing"):
    """Reachability of a Slurm cluster's controller(s). ``key`` is the cluster name.

    Published when the answer changes (responding or not, the error text), not every poll.
    ``error_kind``: the class of a failed ping — ``Unauthorized`` (token rejected),
    ``MissingToken`` (no token to send: its Secret or key is missing), ``Unavailable``
    (unreachable, timed out, 5xx), ``Unsupported``, ``Rejected``, ``BadResponse`` — or ``""``
    when slurmrestd answered (``responding`` then says whether a controller did).
    """

    cluster: str = ""
    responding: bool = False
    hostnames: tuple[str, ...] = ()
    api_version: str = ""
    error: str = ""
    error_kind: str = ""


class SlurmCluster(Event, frozen=True, kw_only=True, tag="SlurmCluster"):
    """A Slinky Cluster (``clusters.slinky.slurm.net``): one Slurm cluster reached through
    slurmrestd. ``key`` is ``namespace/name``; ``name`` is the Slurm cluster's name in
    slurmbridge (its observations come from source ``slurm:<name>``).

    ``server``: ``spec.server`` (slurmrestd's URL). ``secret_name`` / ``secret_key``:
    ``spec.token.secretRef`` — the token itself never enters the log. ``is_ready``:
    ``status.isReady`` as last written (None: never written); ``ready_reason`` /
    ``ready_message``: the ``Ready`` condition's reason and message.
    """

    uid: str = ""
    namespace: str = ""
    name: str = ""
    generation: int = 0
    server: str = ""
    secret_name: str = ""
    secret_key: str = "auth-token"  # noqa: S105 (the key's name, not a secret)
    deleting: bool = False
    is_ready: bool | None = None
    ready_reason: str = ""
    ready_message: str = ""


class GresAlloc(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One generic resource a job holds on one node, from Slurm's ``gres_detail``
    (``gpu:nvidia:2(IDX:0-1)``): ``name`` (``gpu``), ``type`` (``nvidia``; ``""`` when the
    job asked for no type), ``count`` and the node's device ``indices`` (``()`` for a count
    without indices, ``gpu(CNT:2)``)."""

    name: str
    type: str = ""
    count: int = 0
    indices: tuple[int, ...] = ()


class NodeAlloc(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What a job holds on one of its nodes: its ``gres`` and its ``cores`` — Slurm's
    abstract core indices on the node (socket × cores per socket + core, the bit index of
    the job's core bitmap; from ``job_resources.nodes.allocation[].sockets[].cores[]``)."""

    node: str
    gres: tuple[GresAlloc, ...] = ()
    cores: tuple[int, ...] = ()


class SlurmJob(Event, frozen=True, kw_only=True, tag="SlurmJob"):
    """A Slurm job. ``key`` is the job id as a decimal string; ``source`` names the cluster.

    ``state``: the base job state first (``PENDING``, ``RUNNING``, ``COMPLETED``,
    ``CANCELLED``, ``TIMEOUT``, ``PREEMPTED``, ``FAILED``, ``NODE_FAIL`` …), then flags such as
    ``COMPLETING``, upper case. ``nodes``: the expanded node list. Times are epoch seconds
    (``0`` = unset); ``time_limit_minutes`` is ``None`` for INFINITE or unset. ``node_count``:
    the nodes it holds, or asks for while pending (``0`` = unknown). ``excluded_nodes``: the
    nodes it may not use (expanded). ``required_nodes``: the nodes it must get, every one
    (expanded; slurmbridge asks for them only to re-back pods whose job Slurm lost).
    ``priority``: Slurm's job priority (higher starts first; ``None`` when the answer has
    none or it is unset).
    ``state_reason``: why a pending job waits (squeue's JOB REASON CODES: ``Priority``,
    ``Resources``, ``None`` …).
    ``admin_comment``: on placeholder jobs, ``{"pods":["ns/name",…]}``; ``comment`` carries
    slurmbridge's group marker (see :mod:`reconcilers.placement`).
    ``allocation``: per node of a running job (in ``nodes`` order), the GRES and cores it
    holds there (``()`` while pending, or from versions that do not report it).
    ``het_job_id`` / ``het_job_offset`` / ``het_job_ids``: a heterogeneous job's leader id,
    this component's offset and every component's id in offset order (``0`` / ``0`` /
    ``()`` for a plain job).
    """

    cluster: str = ""
    job_id: int = 0
    name: str = ""
    state: tuple[str, ...] = ()
    state_reason: str = ""
    nodes: tuple[str, ...] = ()
    partition: str = ""
    admin_comment: str = ""
    comment: str = ""
    flags: tuple[str, ...] = ()
    user_id: int | None = None
    submit_time: int = 0
    start_time: int = 0
    end_time: int = 0
    time_limit_minutes: int | None = None
    node_count: int = 0
    excluded_nodes: tuple[str, ...] = ()
    priority: int | None = None
    allocation: tuple[NodeAlloc, ...] = ()
    required_nodes: tuple[str, ...] = ()
    het_job_id: int = 0
    het_job_offset: int = 0
    het_job_ids: tuple[int, ...] = ()

    def allocation_on(self, node: str) -> NodeAlloc | None:
        """What the job holds on Slurm node ``node`` (None: not reported)."""
        return next((a for a in self.allocation if a.node == node), None)

    @property
    def base_state(self) -> str:
        """Base state (``RUNNING`` …), ``""`` if unknown."""
        return self.state[0] if self.state else ""


ObservationEvent = (
    KubeNode
    | KubeNodeUsage
    | KubePod
    | KubeWorkload
    | KubeNodeSet
    | KubeScaler
    | KubeListed
    | KubeResourceSlice
    | KubeResourceClaim
    | KubeDeviceClass
    | SlurmCluster
    | SlurmNode
    | SlurmPartition
    | SlurmPing
    | SlurmJob
)

_E = TypeVar("_E", bound=Event)


#: What a tombstone keeps of the object it marks deleted, besides ``source`` and ``key``: the
#: identity consumers need to find what it belonged to (a pod's group: its namespace, labels,
#: owner, schedulerName and scheduling group; a scaler's target; a Slurm object's cluster).
TOMBSTONE_KEEPS: Final[dict[type[Event], tuple[str, ...]]] = {
    KubeNode: ("uid",),
    KubeNodeUsage: (),
    KubePod: ("uid", "namespace", "name", "scheduler_name", "labels", "owner", "scheduling_group"),
    KubeWorkload: ("uid", "namespace", "name", "workload_kind"),
    KubeNodeSet: ("uid", "namespace", "name"),
    SlurmCluster: ("uid", "namespace", "name"),
    KubeScaler: ("uid", "namespace", "name", "scaler_kind", "target_kind", "target_name"),
    KubeListed: (),
    KubeResourceSlice: ("uid", "node", "driver"),
    KubeResourceClaim: ("uid", "namespace", "name", "owner"),
    KubeDeviceClass: ("uid",),
    SlurmNode: ("cluster",),
    SlurmPartition: ("cluster",),
    SlurmJob: ("cluster",),
    SlurmPing: ("cluster",),
}


def tombstone(last: _E, *, version: str, producer: str, observed_at: int) -> _E:
    """The deletion marker (``op="deleted"``) for an object last seen as ``last`` (pure): the
    envelope and the fields :data:`TOMBSTONE_KEEPS` names for its kind.

    Raises:
        KeyError: ``last`` is of a kind without an entry in :data:`TOMBSTONE_KEEPS`.
    """
    kept = {name: getattr(last, name) for name in TOMBSTONE_KEEPS[type(last)]}
    return type(last)(
        source=last.source,
        key=last.key,
        op="deleted",
        observed_at=observed_at,
        version=version,
        producer=producer,
        **kept,
    )


#: Every observation kind by its tag (the ``<kind>`` token of its subject).
KINDS: Final[dict[str, type[Event]]] = {
    cls.__struct_config__.tag: cls for cls in typing.get_args(ObservationEvent)
}

_DECODERS: Final = {tag: msgspec.json.Decoder(cls) for tag, cls in KINDS.items()}
_ENCODER: Final = msgspec.json.Encoder()


def decoder_for(kind: str) -> msgspec.json.Decoder[Event]:
    """The JSON decoder for one kind (route by subject, decode per kind: docs/architecture.md
    "The event contract").

    Raises:
        KeyError: ``kind`` is not a known observation kind.
    """
    return _DECODERS[kind]


def decode_event(kind: str, data: bytes) -> Event:
    """Decode one observation payload of a known kind.

    Raises:
        KeyError: unknown kind.
        msgspec.ValidationError / msgspec.DecodeError: the payload does not match the kind.
    """
    return decoder_for(kind).decode(data)


def encode_event(event: Event) -> bytes:
    """Encode an observation as JSON (with its ``kind`` tag)."""
    return _ENCODER.encode(event)


def kind_of(event: Event) -> str:
    """The tag of an event instance (``KubeNode`` …)."""
    return type(event).__struct_config__.tag  # type: ignore[return-value]
