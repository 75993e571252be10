"""Actions (what a reconciler wants done) and the records the runtime keeps of them.

An action is a value: a frozen Struct tagged by its ``action`` field that carries what an
effector needs and nothing else. Effectors are idempotent and re-check preconditions (the
action says *what the world should look like*, e.g. "this node drained with this reason"),
so a redelivered or replayed action converges instead of repeating work.

Every effect becomes an :class:`ActionRecord` on ``bridge.act.<reconciler>.<kind>.<key>``
(the audit trail, used by ``explain`` and ``replay``); every message the runtime gives up on
becomes a :class:`DeadLetter` on ``bridge.dlq.<reconciler>``.
"""

from __future__ import annotations

import typing
from typing import ClassVar, Final, Literal

import msgspec

from schemas.events import AllocatedDevice, ClaimRequest, NodeSetStatus
from schemas.podinfo import PodInfo


class Action(msgspec.Struct, frozen=True, kw_only=True, tag_field="action"):
    """Base of every action.

    ``independent``: consecutive actions of such a type (each with the RecordEvents that
    follow it) touch distinct objects, so a worker may perform them concurrently.
    """

    independent: ClassVar[bool] = False

    @property
    def destructive(self) -> bool:
        """True when the action removes or stops something (gated on catch-up and leases)."""
        return False


class TaintNode(Action, frozen=True, kw_only=True, tag="TaintNode"):
    """Ensure Kubernetes node ``node`` carries taint ``key=value:effect``."""

    node: str
    key: str
    value: str
    effect: str


class UntaintNode(Action, frozen=True, kw_only=True, tag="UntaintNode"):
    """Ensure Kubernetes node ``node`` carries no taint with ``key`` and ``effect``."""

    node: str
    key: str
    effect: str

    @property
    def destructive(self) -> bool:
        return True


class DrainSlurmNode(Action, frozen=True, kw_only=True, tag="DrainSlurmNode"):
    """Ensure Slurm node ``node`` of ``cluster`` is DRAIN with ``reason``."""

    cluster: str
    node: str
    reason: str


class UndrainSlurmNode(Action, frozen=True, kw_only=True, tag="UndrainSlurmNode"):
    """Undrain Slurm node ``node`` of ``cluster`` — only while its reason is ours.

    The effector re-reads the node and does nothing unless the current reason is empty or
    starts with one of ``owned_prefixes`` (an administrator may have drained it meanwhile).
    """

    cluster: str
    node: str
    owned_prefixes: tuple[str, ...]

    @property
    def destructive(self) -> bool:
        return True


class CreateSlurmNode(Action, frozen=True, kw_only=True, tag="CreateSlurmNode"):
    """Ensure Slurm node ``node`` exists, created from ``node_conf`` (a slurm.conf NodeName
    line) through ``POST /new/node/`` (Slurm REST v0.0.44+)."""

    cluster: str
    node: str
    node_conf: str


class DeleteSlurmNode(Action, frozen=True, kw_only=True, tag="DeleteSlurmNode"):
    """Delete Slurm node ``node`` — only while it is DRAIN, runs nothing (not ALLOCATED,
    MIXED or COMPLETING) and its reason starts with one of ``owned_prefixes``; the effector
    re-reads the node and does nothing otherwise (fail closed)."""

    cluster: str
    node: str
    owned_prefixes: tuple[str, ...]

    @property
    def destructive(self) -> bool:
        return True


class UpdateSlurmNodeFeatures(Action, frozen=True, kw_only=True, tag="UpdateSlurmNodeFeatures"):
    """Set the available features of Slurm node ``node`` (replaces the list)."""

    cluster: str
    node: str
    features: tuple[str, ...]


class UpdateSlurmNodeTopology(Action, frozen=True, kw_only=True, tag="UpdateSlurmNodeTopology"):
    """Set the topology spec of dynamic Slurm node ``node`` (``name:unit[,name:unit]``; ``""``
    clears it) — ``update_node_msg.topology_str``, REST v0.0.43+ (Slinky slurm-bridge node
    controller, ``updateNodeTopology``)."""

    cluster: str
    node: str
    topology: str


class SetSlurmNodeExtra(Action, frozen=True, kw_only=True, tag="SetSlurmNodeExtra"):
    """Set the ``Extra`` string of Slurm node ``node`` to ``extra`` (``""`` clears it) —
    ``update_node_msg.extra`` — only while its current value is empty or starts with
    ``owned_prefix`` (Slinky slurm-bridge 1.3 slurmcontrol ``updateNodeExtra``: an
    administrator's Extra is never overwritten; the effector re-reads the node)."""

    cluster: str
    node: str
    extra: str
    owned_prefix: str


class SetSlurmNodeFeature(Action, frozen=True, kw_only=True, tag="SetSlurmNodeFeature"):
    """Make feature ``feature`` present (``present``) or absent on Slurm node ``node``, in its
    available and, separately, in its active set, keeping every other member of each (Slinky
    slurm-bridge 1.3 slurmcontrol ``updateGRESCompatibilityFeature``: the feature slurmbridge
    owns, ``slurm_bridge_gres_compatible``). The effector re-reads the node and recomputes both
    sets from it, so features others changed meanwhile are kept."""

    cluster: str
    node: str
    feature: str
    present: bool


class SetNodeCondition(Action, frozen=True, kw_only=True, tag="SetNodeCondition"):
    """Ensure Kubernetes node ``node`` has condition ``type`` with this status/reason/message
    (``status``: "True" | "False" | "Unknown")."""

    node: str
    type: str
    status: str
    reason: str
    message: str


class RecordEvent(Action, frozen=True, kw_only=True, tag="RecordEvent"):
    """Create a Kubernetes Event on an object (``type``: Normal | Warning).

    Placed after another action, it runs only when that action's outcome is in ``on``
    (default: it changed something), so redeliveries do not repeat Events. ``once``: for an
    Event that follows no action (a state worth one Warning, decided on every reconcile),
    a DNS-label suffix naming the occasion (e.g. ``partition-not-ours.g3``): the Event is
    named ``<name>.<once>`` and is created only if no Event of that name exists, whatever
    the outcome of the action before it (``on`` does not apply).
    """

    api_version: str
    object_kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    type: str = "Normal"
    reason: str
    message: str
    on: tuple[str, ...] = ("ok",)
    once: str = ""


class ObjectRef(msgspec.Struct, frozen=True, kw_only=True):
    """A namespaced Kubernetes object: ``namespace``, ``name`` and ``uid`` (a precondition:
    an object re-created under the same name is another object, never touched by an action
    meant for the old one; ``""`` = no precondition)."""

    namespace: str
    name: str
    uid: str = ""

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


class _HasPodIdentity(typing.Protocol):
    """Anything naming one pod: a ``KubePod`` event, a ``PodInfo``, a reconciler's pod view."""

    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...


class PodRef(ObjectRef, frozen=True, kw_only=True):
    """One pod: ``namespace``, ``name`` and ``uid`` (a precondition: one re-created under
    the same name is another; ``""`` = none)."""

    @classmethod
    def of(cls, pod: _HasPodIdentity) -> PodRef:
        """The ref of a pod observation (its ``namespace``, ``name`` and ``uid``): the one
        place a reconciler turns a pod it saw into the pod an action touches."""
        return cls(namespace=pod.namespace, name=pod.name, uid=pod.uid)


class SlurmJobSpec(msgspec.Struct, frozen=True, kw_only=True):
    """The Slurm job a pod group becomes (version-neutral; the client maps it per API version).

    ``memory_per_node_mib``: MiB, ``None`` = Slurm's default. ``time_limit_minutes``: minutes,
    ``None`` = the partition's default. ``tres_per_node``: ``gres/gpu=N`` or ``""``.
    ``user_id`` / ``group_id``: numeric ids to submit as (``None`` = slurmrestd's user).
    ``excluded_nodes``: Slurm nodes the group's pods cannot use (never ``required_nodes``:
    slurm-bridge issue #43). ``mcs_label``: the job's MCS label (``""`` = none).
    ``required_nodes``: only for a job that re-backs pods already running on those nodes
    after Slurm lost their job (``placement``): every one is required, so Slurm gives those
    nodes to no one else; ``()`` for every other job (never to place pods: #43).
    """

    name: str
    partition: str = ""
    account: str = ""
    qos: str = ""
    reservation: str = ""
    wckey: str = ""
    constraints: str = ""
    licenses: str = ""
    cpus_per_task: int = 1
    tasks: int = 1
    min_nodes: int = 1
    max_nodes: int | None = None
    memory_per_node_mib: int | None = None
    tres_per_node: str = ""
    time_limit_minutes: int | None = None
    priority: int | None = None
    user_id: int | None = None
    group_id: int | None = None
    exclusive: bool = False
    excluded_nodes: tuple[str, ...] = ()
    mcs_label: str = ""
    required_nodes: tuple[str, ...] = ()


class HetComponent(msgspec.Struct, frozen=True, kw_only=True):
    """One component of a heterogeneous placeholder job: its job and the pods it places."""

    spec: SlurmJobSpec
    pods: tuple[PodRef, ...]


class SubmitSlurmJob(Action, frozen=True, kw_only=True, tag="SubmitSlurmJob"):
    """Ensure pod group ``group`` has a placeholder job in Slurm, then mark its pods.

    Idempotent: the effector first looks in Slurm for a live job whose ``comment`` is
    ``marker``, and submits only when there is none (``EXTERNAL_JOB`` with
    ``admin_comment={"pods":[…]}`` on v0.0.43+, a sleeping batch job before). Then each pod
    in ``pods`` gets label ``scheduler.slinky.slurm.net/slurm-jobid``, finalizer
    ``scheduler.slinky.slurm.net/finalizer`` and the managed-node toleration
    (value ``scheduler_name``).

    ``components`` (a group whose pods have different shapes): submitted as one Slurm
    heterogeneous job, one component per entry (each with ``comment`` ``marker`` and its own
    pods in ``admin_comment``; ``spec`` is then the first component's); every pod is labelled
    with the het job's id (the leader's). An existing live job with the marker counts by its
    het job id.
    ``tenant``: the tenancy policy whose identity and defaults
    the spec carries (``""``: the namespace has none; the job runs as slurmrestd's user).
    """

    cluster: str
    group: str
    marker: str
    pods: tuple[PodRef, ...]
    spec: SlurmJobSpec
    scheduler_name: str
    components: tuple[HetComponent, ...] = ()
    tenant: str = ""


class MarkPods(Action, frozen=True, kw_only=True, tag="MarkPods"):
    """Ensure ``pods`` carry the job-id label ``job_id``, our finalizer and the managed-node
    toleration (value ``scheduler_name``) — for pods that joined a group after its job."""

    job_id: int
    pods: tuple[PodRef, ...]
    scheduler_name: str


class BindPod(Action, frozen=True, kw_only=True, tag="BindPod"):
    """Annotate pod ``pod`` with ``slinky.slurm.net/slurm-node: slurm_node`` and bind it to
    Kubernetes node ``node`` through the Binding subresource (already bound there ⇒ noop).
    A group's binds are independent: a worker performs them concurrently."""

    independent: ClassVar[bool] = True

    pod: PodRef
    node: str
    slurm_node: str
    job_id: int


class ClaimRef(ObjectRef, frozen=True, kw_only=True):
    """One ResourceClaim: ``namespace``, ``name`` and ``uid`` (a precondition: one re-created under
    the same name is another; ``""`` = none)."""


class ExtendedResourceMapping(msgspec.Struct, frozen=True, kw_only=True):
    """One ``status.extendedResourceClaimStatus.requestMappings[]`` entry of a pod: its
    container ``container`` gets request ``request`` of the claim for extended resource
    ``resource``."""

    container: str
    request: str
    resource: str


class AllocateResourceClaim(Action, frozen=True, kw_only=True, tag="AllocateResourceClaim"):
    """Allocate ResourceClaim ``claim`` for pod ``pod`` on Kubernetes node ``node``, as the
    kube-scheduler's DRA plugin would, from the devices Slurm gave the pod's job: write
    ``status.allocation`` (``devices.results`` = ``devices``, ``nodeSelector`` matching
    ``metadata.name`` = ``node``) and ``status.reservedFor`` = the pod (Slinky slurm-bridge
    ``bindClaim``). Before :class:`BindPod`. The effector re-reads the claim (uid
    precondition): already allocated to these devices and reserved for the pod ⇒ noop;
    allocated otherwise ⇒ skipped (never re-allocated)."""

    claim: ClaimRef
    pod: PodRef
    node: str
    devices: tuple[AllocatedDevice, ...]


class CreateExtendedResourceClaim(
    Action, frozen=True, kw_only=True, tag="CreateExtendedResourceClaim"
):
    """Make the ResourceClaim of pod ``pod``'s DRA extended resources
    (``deviceclass.resource.kubernetes.io/<class>``) on node ``node`` (Slinky slurm-bridge
    ``manageResourceClaim``): create it (``generateName`` ``<pod>-extended-resources-``, the
    pod as controller owner, annotation ``resource.kubernetes.io/extended-resource-claim:
    "true"``, ``spec.devices.requests`` = ``requests``), allocate it to ``devices`` and
    reserve it for the pod as :class:`AllocateResourceClaim` does, then write the pod's
    ``status.extendedResourceClaimStatus`` (``mappings``, the claim's name). Before
    :class:`BindPod`. Idempotent: a claim of the pod with that annotation is re-used."""

    pod: PodRef
    node: str
    requests: tuple[ClaimRequest, ...]
    devices: tuple[AllocatedDevice, ...]
    mappings: tuple[ExtendedResourceMapping, ...]


class ReleaseResourceClaim(Action, frozen=True, kw_only=True, tag="ReleaseResourceClaim"):
    """Release ResourceClaim ``claim`` of pod ``pod``, which ended: remove the pod from
    ``status.reservedFor`` and, with no consumer left, clear ``status.allocation``; with
    ``delete`` (a claim slurmbridge made for the pod's extended resources) delete the claim
    instead. The effector re-reads the claim (uid precondition); gone ⇒ noop."""

    claim: ClaimRef
    pod: PodRef
    delete: bool = False

    @property
    def destructive(self) -> bool:
        """Takes devices away from a claim."""
        return True


class CancelSlurmJob(Action, frozen=True, kw_only=True, tag="CancelSlurmJob"):
    """Cancel Slurm job ``job_id`` of ``cluster`` — only while its ``comment`` is ``marker``
    (ours); the effector re-reads the job, does nothing for a finished or foreign job and
    treats "no such job" as done. ``pending_only``: cancel only while the job is PENDING (a
    re-back job that started meanwhile backs its pods and stays)."""

    cluster: str
    job_id: int
    marker: str
    why: str = ""
    pending_only: bool = False

    @property
    def destructive(self) -> bool:
        return True


class SetJobExcludedNodes(Action, frozen=True, kw_only=True, tag="SetJobExcludedNodes"):
    """Replace the excluded nodes of placeholder job ``job_id`` while it is pending — only
    while its ``comment`` is ``marker`` (ours). A job keeps the exclusions it was submitted
    with, so without this a job submitted while nodes were cordoned could never use them
    after they were uncordoned (found by the chaos tier)."""

    cluster: str
    job_id: int
    marker: str
    excluded_nodes: tuple[str, ...]


class DeletePod(Action, frozen=True, kw_only=True, tag="DeletePod"):
    """Delete pod ``pod`` (graceful, uid precondition) because its job ``job_id`` no longer
    runs (``0``: an orphan, bound with no job of ours). Fail closed: the effector re-reads
    the job from Slurm and skips when it is RUNNING or when Slurm cannot be asked.
    ``grace_period_s``: DeleteOptions ``gracePeriodSeconds`` (seconds the containers get
    between SIGTERM and SIGKILL; ``None``: the pod's own ``terminationGracePeriodSeconds``).
    ``marker``: the group's marker (``""``: any RUNNING job blocks the delete): only a
    RUNNING job whose ``comment`` is this marker keeps the pod — after slurmctld lost state
    and handed the id out again, the id names another group's job."""

    pod: PodRef
    cluster: str
    job_id: int
    why: str
    grace_period_s: int | None = None
    marker: str = ""

    @property
    def destructive(self) -> bool:
        return True


class RemovePodFinalizer(Action, frozen=True, kw_only=True, tag="RemovePodFinalizer"):
    """Remove ``finalizer`` from pod ``pod`` (uid precondition; absent ⇒ noop)."""

    pod: PodRef
    finalizer: str
    why: str = ""


class SetPodCondition(Action, frozen=True, kw_only=True, tag="SetPodCondition"):
    """Ensure pod ``pod`` has condition ``type`` with this status/reason/message (status
    subresource; ``status``: "True" | "False" | "Unknown")."""

    pod: PodRef
    type: str
    status: str
    reason: str
    message: str


class SlurmStateCondition(msgspec.Struct, frozen=True, kw_only=True):
    """One ``SlurmNodeState<State>`` pod condition: ``type`` and ``message`` (Slurm's reason);
    its status is always ``"True"`` (slurm-operator slurmcontrol.go ``nodeState``)."""

    type: str
    message: str = ""


class SetSlurmNodeConditions(Action, frozen=True, kw_only=True, tag="SetSlurmNodeConditions"):
    """Make pod ``pod``'s ``SlurmNodeState*`` conditions exactly ``conditions`` (each
    ``status: "True"``; the others of that prefix removed; conditions of other types kept),
    as slurm-operator nodeset_sync_status.go ``applySlurmPodConditions`` does. The effector
    re-reads the pod (uid precondition) and writes nothing when they already match."""

    pod: PodRef
    conditions: tuple[SlurmStateCondition, ...] = ()


class SetPodGroupScheduled(Action, frozen=True, kw_only=True, tag="SetPodGroupScheduled"):
    """Ensure the Kubernetes Workload API PodGroup ``namespace/name`` (``uid``: the one
    observed; a re-created PodGroup gets its own decision) carries its scheduled condition
    with status True, reason ``Scheduled`` and ``message`` (status subresource).
    ``api_version`` (``scheduling.k8s.io/v1beta1`` or ``/v1alpha2``) is the version it was
    observed at: it picks the endpoint and the condition type (``PodGroupInitiallyScheduled``
    / ``PodGroupScheduled``). Source: Slinky slurm-bridge podgroup_status.go."""

    namespace: str
    name: str
    uid: str
    api_version: str
    message: str


class NodeSetRef(ObjectRef, frozen=True, kw_only=True):
    """One NodeSet: ``namespace``, ``name`` and ``uid`` (a precondition: one re-created under
    the same name is another; ``""`` = none)."""


class ClusterRef(ObjectRef, frozen=True, kw_only=True):
    """One Slinky Cluster: ``namespace``, ``name`` and ``uid`` (a precondition: one re-created under
    the same name is another; ``""`` = none)."""


class SetClusterStatus(Action, frozen=True, kw_only=True, tag="SetClusterStatus"):
    """Write Cluster ``cluster``'s status: ``isReady`` and its ``Ready`` condition (``reason``,
    ``message``; ``lastTransitionTime`` kept unless the condition's status flips;
    ``observedGeneration`` = ``generation``). Source: Slinky slurm-operator's Cluster
    controller (isReady from pinging slurmrestd)."""

    cluster: ClusterRef
    is_ready: bool
    reason: str
    message: str
    generation: int = 0


class CreateNodeSetPod(Action, frozen=True, kw_only=True, tag="CreateNodeSetPod"):
    """Create pod ``pod_name`` (ordinal ``ordinal``) from NodeSet ``nodeset``'s template —
    or, in DaemonSet mode (``hostname`` set), pod ``<nodeset>-<random>`` for node ``node``:
    hostname = pod name (DaemonSet: ``hostname``), labels ``app.kubernetes.io/name=slurmd`` and
    ``app.kubernetes.io/instance=<nodeset>``, the NodeSet as controller owner. The effector
    reads the NodeSet (uid precondition) for its template; an existing pod ⇒ noop.
    Source: Slinky slurm-operator NodeSet controller."""

    nodeset: NodeSetRef
    pod_name: str
    ordinal: int
    #: Pin the pod to this Kubernetes node by its required node affinity (DaemonSet mode,
    #: and pinToNode): ``""`` none.
    node: str = ""
    #: DaemonSet mode: the pod's hostname (its Slurm node name); the pod is then created
    #: with ``generateName: <nodeset>-`` and ``pod_name`` is ``""``.
    hostname: str = ""

    independent: ClassVar[bool] = True


class DeleteNodeSetPod(Action, frozen=True, kw_only=True, tag="DeleteNodeSetPod"):
    """Delete pod ``pod`` of a NodeSet on scale-in — only when its Slurm node ``slurm_node``
    of ``cluster`` is DRAIN and not ALLOCATED, MIXED or COMPLETING, or unknown to Slurm. The
    effector re-reads the node first; a failed lookup means *not* drained (fail closed,
    slurm-operator PR #79).

    ``scaled_from``: set when the pod is condemned by a scale-in (not by an update): the
    NodeSet whose ``persistentVolumeClaimRetentionPolicy`` applies. Just before the delete,
    with ``whenScaled: Delete``, the pod's claims get the pod as controller owner, so
    Kubernetes' garbage collector deletes them with it (Kubernetes
    pkg/controller/statefulset/stateful_pod_control.go ``UpdatePodClaimForRetentionPolicy``;
    slurm-operator podcontrol.go ``updateClaimOwnerRefForSetAndPod``)."""

    pod: PodRef
    cluster: str
    slurm_node: str
    scaled_from: NodeSetRef | None = None

    @property
    def destructive(self) -> bool:
        """Deleting a pod stops its slurmd."""
        return True


class KeepNodeSetPodClaims(Action, frozen=True, kw_only=True, tag="KeepNodeSetPodClaims"):
    """NodeSet ``nodeset``'s pod ``pod`` (Slurm node / hostname ``slurm_node``) is kept after
    all (a reversed scale-in): make its PersistentVolumeClaims' owners what the NodeSet's
    ``persistentVolumeClaimRetentionPolicy`` asks of a kept pod — never the pod; the NodeSet
    as controller with ``whenDeleted: Delete`` (Kubernetes stateful_set_utils.go
    ``updateClaimOwnerRefForSetAndPod``). The effector reads the NodeSet (uid precondition)
    and each claim, and writes only a claim whose owners differ (resourceVersion
    precondition). Claims missing ⇒ skipped."""

    nodeset: NodeSetRef
    pod: PodRef
    slurm_node: str


class DeleteFailedNodeSetPod(Action, frozen=True, kw_only=True, tag="DeleteFailedNodeSetPod"):
    """Delete NodeSet ``nodeset``'s pod ``pod`` whose phase is Failed or Succeeded (its slurmd
    is gone), so the ordinal is recreated, and record on the NodeSet that this name has now
    failed ``failures`` times, the last at ``at`` (epoch seconds) — the recreation back-off's
    memory (annotation ``nodeset.slurmbridge.dev/pod-failures``). The effector re-reads the
    pod: only that uid, only while terminal."""

    nodeset: NodeSetRef
    pod: PodRef
    failures: int
    at: int
    #: The name the failure is counted under: ``""`` the pod's own name (StatefulSet mode:
    #: the ordinal's); DaemonSet mode ``node/<node>`` (the back-off is the node's).
    key: str = ""

    @property
    def destructive(self) -> bool:
        """Deletes a pod."""
        return True


class EnsureNodeSetPDB(Action, frozen=True, kw_only=True, tag="EnsureNodeSetPDB"):
    """Create PodDisruptionBudget ``<nodeset>`` with ``maxUnavailable: 0`` over the NodeSet's
    pods that carry ``nodeset.slinky.slurm.net/pod-protect=true`` (``selector`` has both),
    owned by the NodeSet, unless it exists — evictions (``kubectl drain``) then spare the
    pods whose Slurm node runs a job. Source: Slinky slurm-operator's NodeSet controller."""

    nodeset: NodeSetRef
    selector: dict[str, str]


class SetNodeSetStatus(Action, frozen=True, kw_only=True, tag="SetNodeSetStatus"):
    """Write NodeSet ``nodeset``'s status subresource (merge patch; uid precondition)."""

    nodeset: NodeSetRef
    status: NodeSetStatus


class EnsureNodeSetRevision(Action, frozen=True, kw_only=True, tag="EnsureNodeSetRevision"):
    """Record NodeSet ``nodeset``'s current template as an apps/v1 ControllerRevision and
    prune its history (slurm-operator nodeset_history.go ``getNodeSetRevisions`` and
    ``truncateHistory``). The effector reads the NodeSet (uid precondition) and computes the
    revision from what it read: an equal revision that is the latest ⇒ nothing; an equal
    older one ⇒ its ``revision`` becomes the next number (a rollback); none ⇒ create
    ``<nodeset>-<hash>`` owned by the NodeSet. Then revisions whose hash is not live (the
    update revision, ``status.nodeSetHash``, or one of ``live`` — the pods' revision hashes)
    are deleted, oldest first, down to ``spec.revisionHistoryLimit``."""

    nodeset: NodeSetRef
    revision_hash: str
    live: tuple[str, ...] = ()


class SetPodAnnotation(Action, frozen=True, kw_only=True, tag="SetPodAnnotation"):
    """Set (``value``) or remove (``None``) annotation ``annotation`` on pod ``pod``."""

    pod: PodRef
    annotation: str
    value: str | None


class ScaleNodeSet(Action, frozen=True, kw_only=True, tag="ScaleNodeSet"):
    """Set NodeSet ``nodeset``'s ``spec.replicas`` to ``replicas`` through its scale
    subresource, and stamp annotation ``autoscale.slurmbridge.dev/last-scale-time`` with
    ``at`` (epoch seconds) — the autoscaler's cool-down clock. Source: the KEDA recipe of
    Slinky slurm-operator's docs, as a reconciler."""

    nodeset: NodeSetRef
    replicas: int
    at: int
    why: str


class SetPodLabel(Action, frozen=True, kw_only=True, tag="SetPodLabel"):
    """Set (``value``) or remove (``None``) label ``label`` on pod ``pod``."""

    pod: PodRef
    label: str
    value: str | None


class SetSlurmNodePodInfo(Action, frozen=True, kw_only=True, tag="SetSlurmNodePodInfo"):
    """Write ``info`` as Slurm node ``node``'s comment (the JSON of
    :meth:`schemas.podinfo.PodInfo.to_comment`). The effector re-reads the node: a comment
    already holding an equal PodInfo is left as it is. When the old comment named another
    Kubernetes node (the pod moved), the node is then set IDLE — only from DOWN or IDLE (what
    Slurm accepts) and never over a drain that is not ours. Source: slurm-operator
    slurmcontrol.go ``UpdateNodeWithPodInfo``."""

    cluster: str
    node: str
    info: PodInfo


class SetSlurmNodeOwnedFeatures(Action, frozen=True, kw_only=True, tag="SetSlurmNodeOwnedFeatures"):
    """Make the features of Slurm node ``node`` that start with ``prefix`` exactly
    ``features`` (each already carrying ``prefix``), keeping every other feature. The
    effector re-reads the node and recomputes from its current list, so features others
    changed meanwhile are kept. Source: slurm-operator slurmcontrol.go
    ``UpdateNodeFeatures`` / ``replaceFeatureNamespace``."""

    cluster: str
    node: str
    prefix: str
    features: tuple[str, ...]


class PruneSlurmNodeRecord(Action, frozen=True, kw_only=True, tag="PruneSlurmNodeRecord"):
    """Delete the record of Slurm node ``node``, left by pod ``pod`` of NodeSet ``nodeset``
    which is gone — only while the node is a dynamic one (``DYNAMIC_NORM``), DOWN and
    NOT_RESPONDING, runs nothing, and its comment's PodInfo names that NodeSet (namespace,
    name and uid) and that pod. The effector re-reads the node and does nothing otherwise
    (fail closed). Source: slurm-operator nodeset_sync.go ``syncSlurmNodeRecordsNodeNotFound``,
    slurmcontrol.go ``GetDefunctNodesForNodeSet`` / ``DeleteNode``."""

    cluster: str
    node: str
    nodeset: NodeSetRef
    pod: str

    @property
    def destructive(self) -> bool:
        """The record and its state are gone for good."""
        return True


class EnsureSlurmReservation(Action, frozen=True, kw_only=True, tag="EnsureSlurmReservation"):
    """Ensure Slurm reservation ``name`` of ``cluster`` reserves ``nodes`` from
    ``start_time`` (epoch s) for ``duration_minutes`` with ``flags`` for user ``root`` — a
    NodeSet's ScheduledUpdate window (slurm-operator slurmcontrol.go
    ``SyncReservationForNodeSet``). The effector reads the reservation: none ⇒ create it;
    not active and different ⇒ update it; active ⇒ only its node list may change (Slurm
    refuses other changes to a started reservation). Then it writes ``stamp`` into NodeSet
    ``nodeset``'s annotation ``nodeset.slurmbridge.dev/reservation`` (what was ensured, so
    the same window is not sent again, nor re-created after Slurm purged it)."""

    nodeset: NodeSetRef
    cluster: str
    name: str
    nodes: tuple[str, ...]
    start_time: int
    duration_minutes: int
    flags: tuple[str, ...]
    stamp: str


class DeleteSlurmReservation(Action, frozen=True, kw_only=True, tag="DeleteSlurmReservation"):
    """Delete Slurm reservation ``name`` of ``cluster`` (gone already ⇒ noop), then remove
    NodeSet ``nodeset``'s ``nodeset.slurmbridge.dev/reservation`` annotation."""

    nodeset: NodeSetRef
    cluster: str
    name: str

    @property
    def destructive(self) -> bool:
        return True


class EnsureSlurmPartition(Action, frozen=True, kw_only=True, tag="EnsureSlurmPartition"):
    """Ensure Slurm partition ``name`` of ``cluster`` holds exactly ``nodes`` with
    ``settings`` — a NodeSet's ``spec.partition`` (slurm-operator controller_config.go
    ``buildNodeSetConf`` renders it into slurm.conf; slurmbridge uses slurmrestd v0.0.45's
    ``POST partitions/``, which creates or updates). ``settings``: ``(slurm.conf key,
    normalised value)`` pairs (:func:`schemas.partitionconf.parse`). Then the effector writes
    ``stamp`` into NodeSet ``nodeset``'s annotation ``nodeset.slurmbridge.dev/partition``
    (what was ensured: it marks the partition as slurmbridge's, so only then is it deleted,
    and the same partition is not sent again). Before the partition is sent, the annotation
    is ``pending`` and the NodeSet gets finalizer ``nodeset.slurmbridge.dev/slurm-objects``,
    so a NodeSet deleted meanwhile still loses its partition first."""

    nodeset: NodeSetRef
    cluster: str
    name: str
    nodes: tuple[str, ...]
    settings: tuple[tuple[str, str], ...] = ()
    stamp: str


class DeleteSlurmPartition(Action, frozen=True, kw_only=True, tag="DeleteSlurmPartition"):
    """Delete Slurm partition ``name`` of ``cluster`` (gone already ⇒ noop; slurmrestd
    v0.0.45 ``DELETE partition/{name}``), then remove NodeSet ``nodeset``'s
    ``nodeset.slurmbridge.dev/partition`` annotation, and its finalizer
    ``nodeset.slurmbridge.dev/slurm-objects`` when no other stamp is left."""

    nodeset: NodeSetRef
    cluster: str
    name: str

    @property
    def destructive(self) -> bool:
        return True


class ReleaseNodeSetFinalizer(Action, frozen=True, kw_only=True, tag="ReleaseNodeSetFinalizer"):
    """Remove slurmbridge's finalizer ``nodeset.slurmbridge.dev/slurm-objects`` from NodeSet
    ``nodeset`` (being deleted, with no partition or reservation stamp left)."""

    nodeset: NodeSetRef


AnyAction = (
    TaintNode
    | UntaintNode
    | DrainSlurmNode
    | UndrainSlurmNode
    | CreateSlurmNode
    | DeleteSlurmNode
    | UpdateSlurmNodeFeatures
    | UpdateSlurmNodeTopology
    | SetSlurmNodeExtra
    | SetSlurmNodeFeature
    | SetNodeCondition
    | RecordEvent
    | SubmitSlurmJob
    | MarkPods
    | BindPod
    | CancelSlurmJob
    | DeletePod
    | RemovePodFinalizer
    | SetPodCondition
    | CreateNodeSetPod
    | DeleteNodeSetPod
    | KeepNodeSetPodClaims
    | SetNodeSetStatus
    | SetPodLabel
    | ScaleNodeSet
    | SetClusterStatus
    | SetJobExcludedNodes
    | DeleteFailedNodeSetPod
    | EnsureNodeSetPDB
    | SetSlurmNodeConditions
    | SetPodGroupScheduled
    | AllocateResourceClaim
    | CreateExtendedResourceClaim
    | ReleaseResourceClaim
    | EnsureNodeSetRevision
    | SetPodAnnotation
    | SetSlurmNodePodInfo
    | SetSlurmNodeOwnedFeatures
    | PruneSlurmNodeRecord
    | EnsureSlurmReservation
    | DeleteSlurmReservation
    | EnsureSlurmPartition
    | DeleteSlurmPartition
    | ReleaseNodeSetFinalizer
)

Outcome = Literal["intended", "ok", "noop", "retry", "failed", "unsupported", "skipped", "rejected"]


class ActionRecord(msgspec.Struct, frozen=True, kw_only=True, tag="ActionRecord"):
    """What one effect did.

    ``cause_seq`` is the BRIDGE_OBS stream sequence of the trigger whose reconcile produced
    the action (0 for a resync), ``duration_s`` the effector's wall time in seconds,
    ``at`` UTC nanoseconds. ``outcome``: ``intended`` (the write-ahead record, stored
    before the effector runs: an effect never happens without it; its outcome record
    follows with the same ``op_id``), ``ok`` (changed the world), ``noop`` (already as
    wanted), ``retry`` (transient failure, will be retried), ``failed`` (gave up),
    ``unsupported`` (the Slurm API version lacks the operation; recorded once),
    ``skipped`` (a precondition no longer held, e.g. an administrator's drain),
    ``rejected`` (Slurm refused it for good; the refusal is recorded on the objects).
    ``lease_revision``: the fencing token of the worker's lease when it acted (0: no leases).
    ``view_seq``: the last BRIDGE_OBS sequence the worker's projection had applied when it
    decided, and ``decided_at`` the clock (epoch seconds) the decision saw: together they let
    ``slurmbridge replay`` rebuild the exact view and decide again (0: not recorded).
    ``op_id``: one effect's id, shared by its ``intended`` record and its outcome record
    (``""`` in records written before write-ahead records existed). An ``intended`` record
    without an outcome record names an effect that may or may not have happened (the worker
    stopped in between); the next reconcile of the key finds out, level-based.
    """

    reconciler: str
    key_kind: str
    key: str
    action: AnyAction
    outcome: Outcome
    reason: str = ""
    error: str = ""
    cause_seq: int = 0
    duration_s: float = 0.0
    at: int = 0
    worker: str = ""
    lease_revision: int = 0
    view_seq: int = 0
    decided_at: float = 0.0
    op_id: str = ""


class DeadLetter(msgspec.Struct, frozen=True, kw_only=True, tag="DeadLetter"):
    """A message the runtime gave up on, with the reason (``data`` is the original payload)."""

    reconciler: str
    subject: str
    stream_seq: int
    reason: str
    num_delivered: int = 0
    data: bytes = b""
    at: int = 0
    worker: str = ""


#: Every action type by its tag, derived from :data:`AnyAction` (one list to keep).
ACTIONS: Final[dict[str, type[Action]]] = {
    cls.__struct_config__.tag: cls for cls in typing.get_args(AnyAction)
}

_RECORD_DECODER: Final = msgspec.json.Decoder(ActionRecord)
_DLQ_DECODER: Final = msgspec.json.Decoder(DeadLetter)
_ENCODER: Final = msgspec.json.Encoder()


def encode(value: msgspec.Struct) -> bytes:
    """Encode an action, record or dead letter as JSON."""
    return _ENCODER.encode(value)


def decode_record(data: bytes) -> ActionRecord:
    """Decode an action record. Raises msgspec.ValidationError / DecodeError."""
    return _RECORD_DECODER.decode(data)


def decode_dead_letter(data: bytes) -> DeadLetter:
    """Decode a dead-letter record. Raises msgspec.ValidationError / DecodeError."""
    return _DLQ_DECODER.decode(data)


def action_name(action: Action) -> str:
    """The tag of an action instance (``TaintNode`` …)."""
    return type(action).__struct_config__.tag  # type: ignore[return-value]
