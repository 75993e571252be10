"""The Kubernetes wire shapes slurmbridge reads: partial msgspec Structs of Node, Pod, the pod
group owners (Job, JobSet, LeaderWorkerSet, PodGroup), NodeSet, Cluster, the scalers and the
DRA ResourceSlice and ResourceClaim (resource.k8s.io/v1), of
lists, list pages and watch events, and their decoders.

Only the fields read are declared (msgspec skips the rest), so objects from API servers newer
than kubernetes_asyncio decode, and a 150,000-pod list decodes without building the
generated models. Field names are Kubernetes' own (API reference, core/v1 and the CRDs).
"""

from __future__ import annotations

import msgspec


class RawMeta(msgspec.Struct, kw_only=True):
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


class RawNodeSpec(msgspec.Struct, kw_only=True):
    unschedulable: bool | None = None
    taints: list[RawTaint] | None = None


class RawCondition(msgspec.Struct, kw_only=True):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    lastTransitionTime: str | None = None  # noqa: N815 (Kubernetes' field name)


class RawNodeStatus(msgspec.Struct, kw_only=True):
    capacity: dict[str, str] | None = None
    allocatable: dict[str, str] | None = None
    conditions: list[RawCondition] | None = None


class RawNode(msgspec.Struct, kw_only=True):
    """The fields of a v1 Node that slurmbridge reads."""

    metadata: RawMeta = msgspec.field(default_factory=RawMeta)
    spec: RawNodeSpec = msgspec.field(default_factory=RawNodeSpec)
    status: RawNodeStatus = msgspec.field(default_factory=RawNodeStatus)


class RawListMeta(msgspec.Struct, kw_only=True):
    resourceVersion: str = ""  # noqa: N815
    # "continue" is a Python keyword; msgspec renames it on the wire.
    continue_: str | None = msgspec.field(default=None, name="continue")


class RawListPage(msgspec.Struct, kw_only=True):
    """Any list response's metadata (its items skipped): the resourceVersion and the
    ``continue`` token of a paged list."""

    metadata: RawListMeta = msgspec.field(default_factory=RawListMeta)


class RawNodeList(msgspec.Struct, kw_only=True):
    """A v1 NodeList."""

    metadata: RawListMeta = msgspec.field(default_factory=RawListMeta)
    items: list[RawNode] = []


class RawStatusDetails(msgspec.Struct, kw_only=True):
    retryAfterSeconds: int = 0  # noqa: N815 - Kubernetes wire name


class RawStatus(msgspec.Struct, kw_only=True):
    code: int = 0
    reason: str = ""
    message: str = ""
    details: RawStatusDetails | None = None


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


class RawObjMeta(msgspec.Struct, kw_only=True):
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


class RawResources(msgspec.Struct, kw_only=True):
    requests: dict[str, str] | None = None
    limits: dict[str, str] | None = None


class RawContainerPort(msgspec.Struct, kw_only=True):
    """A container's ``ports[]`` entry: only host ports matter to the scheduler."""

    hostPort: int | None = None  # noqa: N815 - Kubernetes wire name
    protocol: str | None = None
    hostIP: str | None = None  # noqa: N815 - Kubernetes wire name


class RawContainer(msgspec.Struct, kw_only=True):
    name: str = ""
    resources: RawResources = msgspec.field(default_factory=RawResources)
    ports: list[RawContainerPort] | None = None


class RawToleration(msgspec.Struct, kw_only=True):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None


class RawNodeSelectorRequirement(msgspec.Struct, kw_only=True):
    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class RawNodeSelectorTerm(msgspec.Struct, kw_only=True):
    matchExpressions: list[RawNodeSelectorRequirement] | None = None  # noqa: N815
    matchFields: list[RawNodeSelectorRequirement] | None = None  # noqa: N815


class RawNodeSelector(msgspec.Struct, kw_only=True):
    nodeSelectorTerms: list[RawNodeSelectorTerm] | None = None  # noqa: N815


class RawNodeAffinity(msgspec.Struct, kw_only=True):
    requiredDuringSchedulingIgnoredDuringExecution: RawNodeSelector | None = None  # noqa: N815


class RawLabelSelector(msgspec.Struct, kw_only=True):
    matchLabels: dict[str, str] | None = None  # noqa: N815
    matchExpressions: list[RawNodeSelectorRequirement] | None = None  # noqa: N815


class RawPodAffinityTerm(msgspec.Struct, kw_only=True):
    labelSelector: RawLabelSelector | None = None  # noqa: N815
    namespaces: list[str] | None = None
    namespaceSelector: RawLabelSelector | None = None  # noqa: N815
    topologyKey: str = ""  # noqa: N815


class RawPodAffinity(msgspec.Struct, kw_only=True):
    requiredDuringSchedulingIgnoredDuringExecution: list[RawPodAffinityTerm] | None = None  # noqa: N815


class RawAffinity(msgspec.Struct, kw_only=True):
    nodeAffinity: RawNodeAffinity | None = None  # noqa: N815
    podAffinity: RawPodAffinity | None = None  # noqa: N815
    podAntiAffinity: RawPodAffinity | None = None  # noqa: N815


class RawSchedulingGroup(msgspec.Struct, kw_only=True):
    """``spec.schedulingGroup`` of a Pod (Kubernetes 1.36+, GenericWorkload; core/v1
    PodSchedulingGroup): the PodGroup it joins."""

    podGroupName: str | None = None  # noqa: N815 - Kubernetes wire name


class RawPodSpec(msgspec.Struct, kw_only=True):
    nodeName: str | None = None  # noqa: N815
    schedulerName: str | None = None  # noqa: N815
    containers: list[RawContainer] | None = None
    initContainers: list[RawContainer] | None = None  # noqa: N815
    overhead: dict[str, str] | None = None
    tolerations: list[RawToleration] | None = None
    nodeSelector: dict[str, str] | None = None  # noqa: N815
    affinity: RawAffinity | None = None
    #: Pod-level resources (Kubernetes 1.32+, PodLevelResources): win over the containers'.
    resources: RawResources | None = None
    schedulingGroup: RawSchedulingGroup | None = None  # noqa: N815
    resourceClaims: list[RawPodResourceClaim] | None = None  # noqa: N815


class RawPodResourceClaim(msgspec.Struct, kw_only=True):
    """A ``spec.resourceClaims[]`` entry (core/v1 PodResourceClaim)."""

    name: str = ""
    resourceClaimName: str | None = None  # noqa: N815
    resourceClaimTemplateName: str | None = None  # noqa: N815


class RawPodResourceClaimStatus(msgspec.Struct, kw_only=True):
    """A ``status.resourceClaimStatuses[]`` entry (core/v1 PodResourceClaimStatus)."""

    name: str = ""
    resourceClaimName: str | None = None  # noqa: N815


class RawExtendedResourceClaimStatus(msgspec.Struct, kw_only=True):
    """``status.extendedResourceClaimStatus`` (core/v1 PodExtendedResourceClaimStatus)."""

    resourceClaimName: str = ""  # noqa: N815


class RawContainerStateWhy(msgspec.Struct, kw_only=True):
    """``state.waiting`` / ``state.terminated`` of a container status (core/v1
    ContainerStateWaiting, ContainerStateTerminated): the kubelet's reason and message."""

    reason: str = ""
    message: str = ""
    exitCode: int = 0  # noqa: N815


class RawContainerState(msgspec.Struct, kw_only=True):
    waiting: RawContainerStateWhy | None = None
    terminated: RawContainerStateWhy | None = None


class RawContainerStatus(msgspec.Struct, kw_only=True):
    name: str = ""
    state: RawContainerState = msgspec.field(default_factory=RawContainerState)


class RawPodStatus(msgspec.Struct, kw_only=True):
    phase: str | None = None
    #: The kubelet's word on a pod it rejected or evicted (``OutOfcpu``, ``Evicted`` …).
    reason: str = ""
    message: str = ""
    conditions: list[RawCondition] | None = None
    initContainerStatuses: list[RawContainerStatus] | None = None  # noqa: N815
    containerStatuses: list[RawContainerStatus] | None = None  # noqa: N815
    resourceClaimStatuses: list[RawPodResourceClaimStatus] | None = None  # noqa: N815
    extendedResourceClaimStatus: RawExtendedResourceClaimStatus | None = None  # noqa: N815


class RawPod(msgspec.Struct, kw_only=True):
    """The fields of a v1 Pod that slurmbridge reads."""

    metadata: RawObjMeta = msgspec.field(default_factory=RawObjMeta)
    spec: RawPodSpec = msgspec.field(default_factory=RawPodSpec)
    status: RawPodStatus = msgspec.field(default_factory=RawPodStatus)


class RawPodList(msgspec.Struct, kw_only=True):
    """A v1 PodList."""

    metadata: RawListMeta = msgspec.field(default_factory=RawListMeta)
    items: list[RawPod] = []


class RawJobTemplateSpec(msgspec.Struct, kw_only=True):
    parallelism: int | None = None


class RawJobTemplate(msgspec.Struct, kw_only=True):
    spec: RawJobTemplateSpec = msgspec.field(default_factory=RawJobTemplateSpec)


class RawReplicatedJob(msgspec.Struct, kw_only=True):
    replicas: int | None = None
    template: RawJobTemplate = msgspec.field(default_factory=RawJobTemplate)


class RawLeaderWorkerTemplate(msgspec.Struct, kw_only=True):
    size: int | None = None


class RawGangPolicy(msgspec.Struct, kw_only=True):
    minCount: int | None = None  # noqa: N815 - scheduling.k8s.io GangSchedulingPolicy
    minGroupCount: int | None = None  # noqa: N815 - v1alpha3 CompositeGangSchedulingPolicy


class RawSchedulingPolicy(msgspec.Struct, kw_only=True):
    """scheduling.k8s.io PodGroupSchedulingPolicy: exactly one of ``basic`` / ``gang``."""

    basic: dict[str, object] | None = None
    gang: RawGangPolicy | None = None


class RawPodGroupTemplate(msgspec.Struct, kw_only=True):
    """A Workload's ``spec.podGroupTemplates[]`` entry."""

    name: str = ""
    schedulingPolicy: RawSchedulingPolicy | None = None  # noqa: N815


class RawWorkloadTemplateRef(msgspec.Struct, kw_only=True):
    """v1alpha2 ``podGroupTemplateRef.workload`` and v1beta1 ``workloadRef`` (their field
    names differ: ``podGroupTemplateName`` became ``templateName``)."""

    workloadName: str = ""  # noqa: N815
    podGroupTemplateName: str = ""  # noqa: N815 - v1alpha2
    templateName: str = ""  # noqa: N815 - v1beta1


class RawPodGroupTemplateRef(msgspec.Struct, kw_only=True):
    workload: RawWorkloadTemplateRef | None = None


class RawWorkloadSpec(msgspec.Struct, kw_only=True):
    parallelism: int | None = None  # batch/v1 Job
    activeDeadlineSeconds: int | None = None  # noqa: N815 - batch/v1 Job
    replicatedJobs: list[RawReplicatedJob] | None = None  # noqa: N815 - JobSet
    leaderWorkerTemplate: RawLeaderWorkerTemplate | None = None  # noqa: N815 - LeaderWorkerSet
    minMember: int | None = None  # noqa: N815 - PodGroup
    minResources: dict[str, str] | None = None  # noqa: N815 - PodGroup
    # scheduling.k8s.io PodGroup (v1alpha2 podGroupTemplateRef, v1beta1 workloadRef) and
    # Workload (podGroupTemplates).
    schedulingPolicy: RawSchedulingPolicy | None = None  # noqa: N815
    podGroupTemplateRef: RawPodGroupTemplateRef | None = None  # noqa: N815
    workloadRef: RawWorkloadTemplateRef | None = None  # noqa: N815
    podGroupTemplates: list[RawPodGroupTemplate] | None = None  # noqa: N815
    # PodGroup and CompositePodGroup of a group tree (CompositePodGroup feature gate, 1.37).
    parentCompositePodGroupName: str | None = None  # noqa: N815


class RawWorkloadStatus(msgspec.Struct, kw_only=True):
    phase: str | None = None  # PodGroup (coscheduling): Pending, Running, Finished …
    conditions: list[RawCondition] | None = None  # PodGroup (scheduling.k8s.io)


class RawWorkload(msgspec.Struct, kw_only=True):
    """The fields of a Job / JobSet / LeaderWorkerSet / PodGroup that slurmbridge reads."""

    apiVersion: str = ""  # noqa: N815
    kind: str = ""
    metadata: RawObjMeta = msgspec.field(default_factory=RawObjMeta)
    spec: RawWorkloadSpec = msgspec.field(default_factory=RawWorkloadSpec)
    status: RawWorkloadStatus = msgspec.field(default_factory=RawWorkloadStatus)


class RawWorkloadList(msgspec.Struct, kw_only=True):
    """A list of workload objects."""

    metadata: RawListMeta = msgspec.field(default_factory=RawListMeta)
    items: list[RawWorkload] = []


class RawSelector(msgspec.Struct, kw_only=True):
    matchLabels: dict[str, str] | None = None  # noqa: N815


class RawLocalObjectRef(msgspec.Struct, kw_only=True):
    """A core/v1 LocalObjectReference."""

    name: str = ""


class RawNodeSetPartition(msgspec.Struct, kw_only=True):
    """v1beta1 ``spec.partition`` (slurm-operator api/v1beta1/nodeset_types.go)."""

    enabled: bool = False
    config: str = ""


class RawRollingUpdate(msgspec.Struct, kw_only=True):
    """``updateStrategy.rollingUpdate``: ``maxUnavailable`` is an int-or-string."""

    maxUnavailable: int | str | None = None  # noqa: N815


class RawScheduledUpdate(msgspec.Struct, kw_only=True):
    """``updateStrategy.scheduledUpdate`` (slurm-operator api/v1beta1/nodeset_types.go
    ``ScheduledUpdateNodeSetStrategy``): ``startTime`` RFC 3339, ``duration`` a Go duration
    (CRD default ``30m``), ``flags`` extra Slurm reservation flags."""

    startTime: str | None = None  # noqa: N815
    duration: str | None = None
    flags: list[str] | None = None


class RawNodeSetUpdateStrategy(msgspec.Struct, kw_only=True):
    type: str = "RollingUpdate"
    rollingUpdate: RawRollingUpdate = msgspec.field(default_factory=RawRollingUpdate)  # noqa: N815
    scheduledUpdate: RawScheduledUpdate = msgspec.field(default_factory=RawScheduledUpdate)  # noqa: N815


class RawNodeSetSpec(msgspec.Struct, kw_only=True):
    """Both versions' spec fields slurmbridge reads: v1alpha1's ``clusterName``,
    ``serviceName`` and ``selector``; v1beta1's (slurm-operator 1.x) ``controllerRef`` and the
    fields after it, with the defaults its CRD gives them."""

    replicas: int | None = None
    clusterName: str = ""  # noqa: N815
    ordinalPadding: int = 0  # noqa: N815
    serviceName: str = ""  # noqa: N815
    selector: RawSelector | None = None
    controllerRef: RawLocalObjectRef | None = None  # noqa: N815
    scalingMode: str = "StatefulSet"  # noqa: N815
    partition: RawNodeSetPartition = msgspec.field(default_factory=RawNodeSetPartition)
    extraConf: str = ""  # noqa: N815
    pinToNode: bool = False  # noqa: N815
    workloadDisruptionProtection: bool | None = None  # noqa: N815
    pruneSlurmNodeRecords: str = "Never"  # noqa: N815
    updateStrategy: RawNodeSetUpdateStrategy = msgspec.field(  # noqa: N815
        default_factory=RawNodeSetUpdateStrategy
    )
    minReadySeconds: int = 0  # noqa: N815
    revisionHistoryLimit: int = 0  # noqa: N815
    oversubscribeNode: bool = False  # noqa: N815
    # Kept undecoded: only hashed as a NodeSet revision's data (slurmbridge.kube.revisions).
    template: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    slurmd: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    logfile: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    ssh: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class RawNodeSetStatus(msgspec.Struct, kw_only=True):
    replicas: int = 0
    readyReplicas: int = 0  # noqa: N815
    availableReplicas: int = 0  # noqa: N815
    slurmIdle: int = 0  # noqa: N815
    slurmAllocated: int = 0  # noqa: N815
    slurmDown: int = 0  # noqa: N815
    slurmDrain: int = 0  # noqa: N815
    observedGeneration: int = 0  # noqa: N815
    selector: str = ""
    updatedReplicas: int = 0  # noqa: N815
    unavailableReplicas: int = 0  # noqa: N815
    desired: int = 0
    nodeSetHash: str = ""  # noqa: N815
    collisionCount: int | None = None  # noqa: N815
    ordinalToNode: dict[str, str] | None = None  # noqa: N815
    conditions: list[RawCondition] | None = None


class RawNodeSetMeta(RawObjMeta, kw_only=True):
    generation: int = 0


class RawNodeSet(msgspec.Struct, kw_only=True):
    """The fields of a Slinky NodeSet that slurmbridge reads (``apiVersion``:
    ``slinky.slurm.net/v1beta1`` or ``…/v1alpha1``)."""

    apiVersion: str = ""  # noqa: N815
    metadata: RawNodeSetMeta = msgspec.field(default_factory=RawNodeSetMeta)
    spec: RawNodeSetSpec = msgspec.field(default_factory=RawNodeSetSpec)
    status: RawNodeSetStatus = msgspec.field(default_factory=RawNodeSetStatus)


class RawNodeSetList(msgspec.Struct, kw_only=True):
    """A NodeSetList."""

    metadata: RawListMeta = msgspec.field(default_factory=RawListMeta)
    items: list[RawNodeSet] = []


class RawDeviceAttribute(msgspec.Struct, kw_only=True):
    """A ResourceSlice device attribute: exactly one of its values is set
    (resource.k8s.io/v1 DeviceAttribute)."""

    # "int" and "bool" would shadow the builtins in the class body: renamed on the wire.
    int_: int | None = msgspec.field(default=None, name="int")
    bool_: bool | None = msgspec.field(default=None, name="bool")
    string: str | None = None
    version: str | None = None


class RawDevice(msgspec.Struct, kw_only=True):
    """A ResourceSlice ``spec.devices[]`` entry (resource.k8s.io/v1 Device)."""

    name: str = ""
    attributes: dict[str, RawDeviceAttribute] | None = None


class RawResourcePool(msgspec.Struct, kw_only=True):
    name: str = ""
    generation: int = 0
    resourceSliceCount: int = 0  # noqa: N815


class RawResourceSliceSpec(msgspec.Struct, kw_only=True):
    driver: str = ""
    pool: RawResourcePool = msgspec.field(default_factory=RawResourcePool)
    nodeName: str | None = None  # noqa: N815
    devices: list[RawDevice] | None = None


class RawResourceSlice(msgspec.Struct, kw_only=True):
    """The fields of a resource.k8s.io/v1 ResourceSlice that slurmbridge reads."""

    metadata: RawObjMeta = msgspec.field(default_factory=RawObjMeta)
    spec: RawResourceSliceSpec = msgspec.field(default_factory=RawResourceSliceSpec)


class RawCELSelector(msgspec.Struct, kw_only=True):
    """A DeviceClass ``spec.selectors[].cel``."""

    expression: str = ""


class RawDeviceSelector(msgspec.Struct, kw_only=True):
    """A DeviceClass ``spec.selectors[]`` entry (resource.k8s.io/v1 DeviceSelector)."""

    cel: RawCELSelector | None = None


class RawDeviceClassSpec(msgspec.Struct, kw_only=True):
    selectors: list[RawDeviceSelector] | None = None
    config: list[msgspec.Raw] | None = None
    extendedResourceName: str | None = None  # noqa: N815


class RawDeviceClass(msgspec.Struct, kw_only=True):
    """The fields of a resource.k8s.io/v1 DeviceClass that slurmbridge reads."""

    metadata: RawObjMeta = msgspec.field(default_factory=RawObjMeta)
    spec: RawDeviceClassSpec = msgspec.field(default_factory=RawDeviceClassSpec)


class RawDeviceClassList(msgspec.Struct, kw_only=True):
    metadata: RawListMeta = msgspec.field(default_factory=RawListMeta)
    items: list[RawDeviceClass] = []


class RawResourceSliceList(msgspec.Struct, kw_only=True):
    metadata: RawListMeta = msgspec.field(default_factory=RawListMeta)
    items: list[RawResourceSlice] = []


class RawExactDeviceRequest(msgspec.Struct, kw_only=True):
    deviceClassName: str = ""  # noqa: N815
    allocationMode: str | None = None  # noqa: N815
    count: int | None = None


class RawDeviceRequest(msgspec.Struct, kw_only=True):
    """A ResourceClaim ``spec.devices.requests[]`` entry (resource.k8s.io/v1 DeviceRequest:
    ``exactly`` or ``firstAvailable``)."""

    name: str = ""
    exactly: RawExactDeviceRequest | None = None


class RawDeviceClaim(msgspec.Struct, kw_only=True):
    requests: list[RawDeviceRequest] | None = None


class RawResourceClaimSpec(msgspec.Struct, kw_only=True):
    devices: RawDeviceClaim = msgspec.field(default_factory=RawDeviceClaim)


class RawDeviceResult(msgspec.Struct, kw_only=True):
    """A ``status.allocation.devices.results[]`` entry."""

    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""


class RawDeviceAllocation(msgspec.Struct, kw_only=True):
    results: list[RawDeviceResult] | None = None


class RawAllocation(msgspec.Struct, kw_only=True):
    devices: RawDeviceAllocation = msgspec.field(default_factory=RawDeviceAllocation)
    nodeSelector: RawNodeSelector | None = None  # noqa: N815


class RawConsumer(msgspec.Struct, kw_only=True):
    """A ``status.reservedFor[]`` entry (ResourceClaimConsumerReference)."""

    apiGroup: str = ""  # noqa: N815
    resource: str = ""
    name: str = ""
    uid: str = ""


class RawResourceClaimStatus(msgspec.Struct, kw_only=True):
    allocation: RawAllocation | None = None
    reservedFor: list[RawConsumer] | None = None  # noqa: N815


class RawResourceClaim(msgspec.Struct, kw_only=True):
    """The fields of a resource.k8s.io/v1 ResourceClaim that slurmbridge reads."""

    metadata: RawObjMeta = msgspec.field(default_factory=RawObjMeta)
    spec: RawResourceClaimSpec = msgspec.field(default_factory=RawResourceClaimSpec)
    status: RawResourceClaimStatus = msgspec.field(default_factory=RawResourceClaimStatus)


class RawResourceClaimList(msgspec.Struct, kw_only=True):
    metadata: RawListMeta = msgspec.field(default_factory=RawListMeta)
    items: list[RawResourceClaim] = []


class RawSecretRef(msgspec.Struct, kw_only=True):
    name: str = ""
    key: str = "auth-token"


class RawClusterToken(msgspec.Struct, kw_only=True):
    secretRef: RawSecretRef = msgspec.field(default_factory=RawSecretRef)  # noqa: N815


class RawClusterSpec(msgspec.Struct, kw_only=True):
    server: str = ""
    token: RawClusterToken = msgspec.field(default_factory=RawClusterToken)


class RawClusterStatus(msgspec.Struct, kw_only=True):
    isReady: bool | None = None  # noqa: N815
    conditions: list[RawCondition] | None = None


class RawCluster(msgspec.Struct, kw_only=True):
    """The fields of a Slinky Cluster that slurmbridge reads."""

    metadata: RawNodeSetMeta = msgspec.field(default_factory=RawNodeSetMeta)
    spec: RawClusterSpec = msgspec.field(default_factory=RawClusterSpec)
    status: RawClusterStatus = msgspec.field(default_factory=RawClusterStatus)


class RawClusterList(msgspec.Struct, kw_only=True):
    """A ClusterList."""

    metadata: RawListMeta = msgspec.field(default_factory=RawListMeta)
    items: list[RawCluster] = []


class RawScaleTargetRef(msgspec.Struct, kw_only=True):
    apiVersion: str = ""  # noqa: N815
    kind: str = ""
    name: str = ""


class RawScalerSpec(msgspec.Struct, kw_only=True):
    scaleTargetRef: RawScaleTargetRef = msgspec.field(default_factory=RawScaleTargetRef)  # noqa: N815


class RawScaler(msgspec.Struct, kw_only=True):
    """The fields of a HorizontalPodAutoscaler or KEDA ScaledObject slurmbridge reads."""

    kind: str = ""
    metadata: RawObjMeta = msgspec.field(default_factory=RawObjMeta)
    spec: RawScalerSpec = msgspec.field(default_factory=RawScalerSpec)


class RawScalerList(msgspec.Struct, kw_only=True):
    """A HorizontalPodAutoscalerList or ScaledObjectList."""

    metadata: RawListMeta = msgspec.field(default_factory=RawListMeta)
    items: list[RawScaler] = []


class RawSecret(msgspec.Struct, kw_only=True):
    """A v1 Secret: its ``data`` (base64 values) is all a Cluster's token needs."""

    metadata: RawObjMeta = msgspec.field(default_factory=RawObjMeta)
    data: dict[str, str] | None = None


class RawSecretList(msgspec.Struct, kw_only=True):
    metadata: RawListMeta = msgspec.field(default_factory=RawListMeta)
    items: list[RawSecret] = []


DECODE_RESOURCE_SLICE_LIST = msgspec.json.Decoder(RawResourceSliceList)
DECODE_RESOURCE_SLICE = msgspec.json.Decoder(RawResourceSlice)
DECODE_RESOURCE_CLAIM_LIST = msgspec.json.Decoder(RawResourceClaimList)
DECODE_RESOURCE_CLAIM = msgspec.json.Decoder(RawResourceClaim)
DECODE_DEVICE_CLASS_LIST = msgspec.json.Decoder(RawDeviceClassList)
DECODE_DEVICE_CLASS = msgspec.json.Decoder(RawDeviceClass)
DECODE_SECRET_LIST = msgspec.json.Decoder(RawSecretList)
DECODE_SECRET = msgspec.json.Decoder(RawSecret)
DECODE_SCALER_LIST = msgspec.json.Decoder(RawScalerList)


DECODE_SCALER = msgspec.json.Decoder(RawScaler)


DECODE_CLUSTER_LIST = msgspec.json.Decoder(RawClusterList)


DECODE_CLUSTER = msgspec.json.Decoder(RawCluster)


DECODE_NODESET_LIST = msgspec.json.Decoder(RawNodeSetList)


DECODE_NODESET = msgspec.json.Decoder(RawNodeSet)


DECODE_POD_LIST = msgspec.json.Decoder(RawPodList)


DECODE_POD = msgspec.json.Decoder(RawPod)


DECODE_WORKLOAD_LIST = msgspec.json.Decoder(RawWorkloadList)


DECODE_WORKLOAD = msgspec.json.Decoder(RawWorkload)


DECODE_NODE_LIST = msgspec.json.Decoder(RawNodeList)


DECODE_NODE = msgspec.json.Decoder(RawNode)


DECODE_WATCH = msgspec.json.Decoder(RawWatchEvent)


DECODE_STATUS = msgspec.json.Decoder(RawStatus)


DECODE_LIST_PAGE = msgspec.json.Decoder(RawListPage)
