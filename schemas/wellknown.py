"""Labels, annotations, taints, finalizers and reason strings shared with Slinky.

The values are Slinky's own (slurm-bridge ``internal/wellknown`` and slurm-operator), so
manifests written for Slinky keep working and a cluster can move between the two systems: a
drain whose reason starts with one of :data:`OUR_REASON_PREFIXES` is ours, any other drain
belongs to an administrator and is never undone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

# --- scheduler -------------------------------------------------------------------------------
DEFAULT_SCHEDULER_NAME: Final = "slurm-bridge-scheduler"

# --- nodes -----------------------------------------------------------------------------------
#: Taint placed on Kubernetes nodes that Slurm also manages (value: the scheduler name).
TAINT_MANAGED_NODE: Final = "slinky.slurm.net/managed-node"
TAINT_MANAGED_NODE_EFFECT: Final = "NoExecute"
#: Label on a Kubernetes node naming its Slurm node when the two names differ.
LABEL_SLURM_NODENAME: Final = "slinky.slurm.net/slurm-nodename"
#: Label asking slurm-bridge to register the Kubernetes node in Slurm as an external node.
LABEL_EXTERNAL_NODE: Final = "scheduler.slinky.slurm.net/external-node"
ANNOTATION_EXTERNAL_NODE_PARTITIONS: Final = "scheduler.slinky.slurm.net/external-node-partitions"
ANNOTATION_TOPOLOGY_SPEC: Final = "topology.slinky.slurm.net/spec"

# --- pods and jobs ---------------------------------------------------------------------------
LABEL_SLURM_JOBID: Final = "scheduler.slinky.slurm.net/slurm-jobid"
ANNOTATION_SLURM_NODE: Final = "slinky.slurm.net/slurm-node"
FINALIZER_SCHEDULER: Final = "scheduler.slinky.slurm.net/finalizer"
ANNOTATION_SLURMJOB_PREFIX: Final = "slurmjob.slinky.slurm.net/"

#: Slurm job states after which a job can never run again (``job_state`` base states).
JOB_ENDED_STATES: Final = frozenset(
    {
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "PREEMPTED",
        "NODE_FAIL",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
        "REVOKED",
        "SPECIAL_EXIT",
    }
)


def slurm_job_id(labels: Mapping[str, str]) -> int | None:
    """The Slurm job id a pod's ``slurm-jobid`` label names: the label's value when it is
    ASCII decimal digits, else ``None`` (absent, empty, or not a number — a label such as
    ``"²"`` passes ``str.isdigit`` yet ``int`` rejects it). Slinky slurm-bridge
    ``internal/utils/podinfo`` reads the same label (``podAllocationID``)."""
    raw = labels.get(LABEL_SLURM_JOBID, "")
    return int(raw) if raw.isascii() and raw.isdigit() else None


# --- Slurm node states -----------------------------------------------------------------------
#: Slurm node base states (``node_state_string`` in Slurm's ``src/common/slurm_protocol_defs.c``).
SLURM_BASE_STATES: Final[frozenset[str]] = frozenset(
    {"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE", "EXTERNAL", "INVALID"}
)
#: States in which a Slurm node runs (or finishes) a job: a node in one of them is busy and is
#: never deleted (Slinky slurm-operator ``IsNodeBusy``: allocated, mixed or completing).
SLURM_BUSY_STATES: Final = ("ALLOCATED", "MIXED", "COMPLETING")


def slurm_busy(state: tuple[str, ...]) -> bool:
    """True when a node's upper-case ``state`` (base state and flags) holds one of
    :data:`SLURM_BUSY_STATES` (Slinky slurm-operator ``IsNodeBusy``)."""
    return any(s in state for s in SLURM_BUSY_STATES)


def slurm_drained(state: tuple[str, ...]) -> bool:
    """Drained and running nothing: ``DRAIN``, not ``UNDRAIN`` (an undrain under way: an
    administrator's, which a deletion must never race), and not busy. The one test before
    deleting a node or its pod (Slinky slurm-operator ``IsNodeDrained``; issue 18)."""
    return "DRAIN" in state and "UNDRAIN" not in state and not slurm_busy(state)


# --- NodeSets (slurm-operator) ---------------------------------------------------------------
ANNOTATION_POD_DELETION_COST: Final = "nodeset.slinky.slurm.net/pod-deletion-cost"
#: On a slurmd pod: ``"true"`` asks for its Slurm node to be drained; removing it undrains
#: (our drains only). slurm-operator api/v1beta1/well_known.go ``AnnotationPodCordon``,
#: read as podutils ``IsPodCordon`` does (the value must be exactly ``"true"``).
ANNOTATION_POD_CORDON: Final = "nodeset.slinky.slurm.net/pod-cordon"
#: On a Kubernetes node: the drain reason its slurmd pods' Slurm nodes get when it is
#: cordoned (slurm-operator api/v1beta1/well_known.go ``AnnotationNodeCordonReason``).
ANNOTATION_NODE_CORDON_REASON: Final = "nodeset.slinky.slurm.net/node-cordon-reason"
#: Prefix of the pod conditions that mirror a slurmd pod's Slurm node state
#: (slurm-operator pkg/conditions/conditions.go ``PodStatePrefix``).
SLURM_NODE_STATE_PREFIX: Final = "SlurmNodeState"
LABEL_POD_PROTECT: Final = "nodeset.slinky.slurm.net/pod-protect"
#: On a slurmd pod: its Slurm node name (the pod's hostname) and the NodeSet scalingMode it
#: was made for (slurm-operator api/v1beta1/well_known.go ``LabelNodeSetPodHostname``,
#: ``LabelNodeSetScalingMode``, set by nodeset/utils/utils.go ``initIdentity``).
LABEL_POD_HOSTNAME: Final = "nodeset.slinky.slurm.net/pod-hostname"
LABEL_SCALING_MODE: Final = "nodeset.slinky.slurm.net/scaling-mode"
#: On a Kubernetes node: the hostname (Slurm node name) its DaemonSet-mode slurmd pod gets
#: instead of the node's (well_known.go ``AnnotationNodeHostnameOverride``).
ANNOTATION_NODE_HOSTNAME_OVERRIDE: Final = "nodeset.slinky.slurm.net/hostname-override"
#: On a slurmd pod: when its Slurm node's running jobs end at the latest (RFC 3339), written
#: by the NodeSet controller from Slurm; scale-in and updates take the pods whose jobs end
#: soonest first (slurm-operator api/v1beta1/well_known.go ``AnnotationPodDeadline``,
#: written by nodeset_sync.go ``syncSlurmDeadline``, read by utils/sort.go).
ANNOTATION_POD_DEADLINE: Final = "nodeset.slinky.slurm.net/pod-deadline"
#: On a Kubernetes node: a comma-separated list of Slurm node features for the slurmd pods
#: running there, applied as ``k8s/<value>`` (slurm-operator api/v1beta1/well_known.go
#: ``AnnotationNodeFeaturesSpec``, nodeset_sync.go ``syncSlurmFeatures``).
ANNOTATION_NODE_FEATURES_SPEC: Final = "features.slinky.slurm.net/spec"
#: The prefix of the Slurm node features the NodeSet controller owns; all others are kept
#: (slurm-operator api/v1beta1/well_known.go ``NodeFeaturePrefix``).
NODE_FEATURE_PREFIX: Final = "k8s/"
#: The label naming a NodeSet pod's revision (its template's ControllerRevision hash) and
#: that revision's hash: Kubernetes' pkg/controller/history ``ControllerRevisionHashLabel``,
#: which slurm-operator 1.x sets on pods (internal/utils/historycontrol/utils.go
#: ``SetRevision``). Not StatefulSet's ``controller-revision-hash``.
LABEL_REVISION_HASH: Final = "controller.kubernetes.io/hash"
#: slurmbridge's own: a NodeSet's failed pods, ``{"<pod>": [failures, last epoch s, uid], …}``
#: (JSON),
#: the memory of the recreation back-off (reconcilers.nodeset).
ANNOTATION_NODESET_POD_FAILURES: Final = "nodeset.slurmbridge.dev/pod-failures"
#: What ScheduledUpdate reservation slurmbridge last ensured for a NodeSet (reconcilers.nodeset
#: rule 12): ``<start> <minutes> <flags> <nodes>``.
ANNOTATION_NODESET_RESERVATION: Final = "nodeset.slurmbridge.dev/reservation"
#: The NodeSet partition slurmbridge last ensured (reconcilers.nodeset rule 19):
#: ``<nodes> <Key=value ...>``; present only while the partition is slurmbridge's.
ANNOTATION_NODESET_PARTITION: Final = "nodeset.slurmbridge.dev/partition"
#: slurmbridge's finalizer on a NodeSet while it has a Slurm partition or ScheduledUpdate
#: reservation of ours (either stamp above): deleting the NodeSet deletes them first.
FINALIZER_NODESET_SLURM: Final = "nodeset.slurmbridge.dev/slurm-objects"
#: The stamps whose Slurm objects :data:`FINALIZER_NODESET_SLURM` guards.
NODESET_SLURM_STAMPS: Final = (
    ANNOTATION_NODESET_PARTITION,
    ANNOTATION_NODESET_RESERVATION,
)
#: slurmbridge's own: a NodeSet's autoscaling policy (reconcilers.autoscale) and its clock.
AUTOSCALE_PREFIX: Final = "autoscale.slurmbridge.dev/"
ANNOTATION_AUTOSCALE_LAST_SCALE: Final = AUTOSCALE_PREFIX + "last-scale-time"
ANNOTATION_AUTOSCALE_LAST_DIRECTION: Final = AUTOSCALE_PREFIX + "last-scale-direction"

# --- drain reasons ---------------------------------------------------------------------------
BRIDGE_REASON_PREFIX: Final = "slurm-bridge: "
OPERATOR_REASON_PREFIX: Final = "slurm-operator: "
OUR_REASON_PREFIXES: Final = (BRIDGE_REASON_PREFIX, OPERATOR_REASON_PREFIX)


#: Prefix of the drain reasons node registration writes (and may therefore clear).
EXTERNAL_REASON_PREFIX: Final = BRIDGE_REASON_PREFIX + "External node ("
#: Node condition slurmbridge sets on external nodes.
CONDITION_SLURM_REGISTERED: Final = "SlurmNodeRegistered"
#: Node condition: the Slurm node's GRES can represent the node's DRA device inventory
#: (Slinky slurm-bridge ``internal/wellknown`` ``NodeConditionSlurmGRESCompatible``), and its
#: reasons (``internal/controller/node/node_condition.go``).
CONDITION_SLURM_GRES_COMPATIBLE: Final = "SlinkySlurmGRESCompatible"
REASON_GRES_COMPATIBLE: Final = "SlurmGRESCompatible"
REASON_GRES_INCOMPATIBLE: Final = "IncompatibleSlurmGRES"
REASON_GRES_VERIFICATION_ERROR: Final = "SlurmGRESVerificationError"
#: Slurm node feature slurmbridge adds to nodes whose GRES match their DRA inventory (Slinky
#: ``wellknown.SlurmFeatureGRESCompatible``); the feature a bridge job's constraints require.
FEATURE_GRES_COMPATIBLE: Final = "slurm_bridge_gres_compatible"
#: The pod condition placement reports on (Kubernetes' own, as kube-scheduler writes it).
CONDITION_POD_SCHEDULED: Final = "PodScheduled"
#: ``PodScheduled=False`` reason: slurmrestd refused the group's placeholder job for good.
REASON_SLURM_JOB_REJECTED: Final = "SlurmJobRejected"
#: ``PodScheduled=False`` reason: the group cannot become a Slurm job (an annotation).
REASON_SLURM_JOB_INVALID: Final = "SlurmJobInvalid"
#: ``PodScheduled=False`` reason (and Warning Event reason): an annotation names a Slurm
#: user, group, account, QOS, partition or reservation the pod's namespace may not use
#: (the tenancy policy, ``$.tenancy``); the message starts with the annotation's field.
REASON_SLURM_POLICY_DENIED: Final = "SlurmPolicyDenied"
#: Warning Event reason on a pod with our schedulerName that placement leaves alone: its
#: namespace is not served (``managedNamespaces``), or it is a NodeSet's slurmd pod.
REASON_NOT_SERVED: Final = "SlurmBridgeNotServed"
#: ``PodScheduled=False`` reason: the group's placeholder job waits in Slurm's queue; the
#: message starts with Slurm's own reason, then a comma (see :func:`pending_message`).
REASON_SLURM_JOB_PENDING: Final = "SlurmJobPending"
#: Kubernetes' ``DisruptionTarget`` pod condition and the reason kube-scheduler gives it
#: before deleting a pod it preempts (k8s.io/api core/v1 types.go: DisruptionTarget,
#: PodReasonPreemptionByScheduler; pkg/scheduler/framework/preemption).
CONDITION_DISRUPTION_TARGET: Final = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"


def ordinal(n: int) -> str:
    """English ordinal of a positive integer: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


#: Places in a partition's queue told exactly; a job further back is "100th or later", so
#: a job leaving the head of a 10,000-deep queue rewrites 100 pods' conditions, not 10,000.
QUEUE_POSITION_CAP: Final = 100


def pending_message(slurm_reason: str, position: int, partition: str) -> str:
    """The message of ``PodScheduled=False`` (reason :data:`REASON_SLURM_JOB_PENDING`):
    Slurm's reason for the wait, then the job's 1-based place among the pending jobs of its
    partition, e.g. ``"Priority, 12th in partition gpu"`` (``position`` 0 or no partition:
    the reason alone; from :data:`QUEUE_POSITION_CAP` on, ``"100th or later"``)."""
    reason = slurm_reason or "None"
    if position <= 0 or not partition:
        return reason
    if position >= QUEUE_POSITION_CAP:
        return f"{reason}, {ordinal(QUEUE_POSITION_CAP)} or later in partition {partition}"
    return f"{reason}, {ordinal(position)} in partition {partition}"


def pending_reason_of(message: str) -> str:
    """Slurm's reason at the head of a :func:`pending_message`."""
    return message.partition(",")[0].strip() or "None"


#: Places told exactly as they move; from here on a place is rewritten only when it has
#: halved or doubled (:func:`pending_rewrite_due`).
QUEUE_PLACE_EXACT: Final = 10

_PLACE = re.compile(
    r"^(?P<head>[^,]*), (?P<n>\d+)(?:st|nd|rd|th)(?: or later)?(?P<tail> in partition .*)$"
)


def pending_rewrite_due(written: str, wanted: str) -> bool:
    """Whether a waiting pod's ``PodScheduled`` message ``written`` must become ``wanted``
    (both :func:`pending_message`): when Slurm's reason or the partition changed, when
    either place is among the first :data:`QUEUE_PLACE_EXACT`, or when the place has at
    least halved or doubled. A pod behind a long queue is thus rewritten O(log n) times as
    the queue drains, not at every job start ahead of it (issue 30: on real Slurm, 2,543
    condition writes for 321 binds), and its message is never off by more than a factor of
    two."""
    if written == wanted:
        return False
    old, new = _PLACE.match(written), _PLACE.match(wanted)
    if old is None or new is None or (old["head"], old["tail"]) != (new["head"], new["tail"]):
        return True
    was, now = int(old["n"]), int(new["n"])
    if min(was, now) <= QUEUE_PLACE_EXACT:
        return True
    return now * 2 <= was or now >= was * 2


# --- Kubernetes Workload API (scheduling.k8s.io, 1.36+) --------------------------------------
#: The API group of the built-in Workload and PodGroup (GenericWorkload feature gate).
SCHEDULING_GROUP: Final = "scheduling.k8s.io"
#: Its versions, newest first: v1beta1 (Kubernetes 1.37), v1alpha2 (1.36). Watchers try them
#: in this order (k8s-openapi 0.29 ``v1_37/api/scheduling`` has v1alpha3 and v1beta1;
#: 0.28 ``v1_36`` has v1alpha2).
SCHEDULING_VERSIONS: Final = ("v1beta1", "v1alpha2")
#: The group-kind tokens of a native PodGroup and Workload in group and workload keys
#: (``ns/PodGroup.scheduling.k8s.io:name``): distinct from the coscheduling ``PodGroup``
#: (``scheduling.x-k8s.io``), and Kubernetes' own ``Kind.group`` spelling.
KIND_NATIVE_POD_GROUP: Final = "PodGroup." + SCHEDULING_GROUP
KIND_NATIVE_WORKLOAD: Final = "Workload." + SCHEDULING_GROUP
#: Kubernetes 1.37's CompositePodGroup: a node of a Workload's group tree whose children are
#: PodGroups and CompositePodGroups naming it in ``spec.parentCompositePodGroupName``. Alpha
#: (CompositePodGroup feature gate), served only at v1alpha3 (kubernetes
#: ``staging/src/k8s.io/api/scheduling/v1alpha3/types.go``).
KIND_NATIVE_COMPOSITE: Final = "CompositePodGroup." + SCHEDULING_GROUP
COMPOSITE_VERSIONS: Final = ("v1alpha3",)
#: The deepest group tree kube-scheduler accepts (v1alpha3 ``WorkloadMaxTreeDepth``): deeper,
#: or a cycle, is an invalid layout (``CompositePodGroupReasonInvalid``).
COMPOSITE_MAX_DEPTH: Final = 4
#: The PodGroup condition that says the gang was admitted: ``PodGroupScheduled`` in
#: v1alpha2, renamed ``PodGroupInitiallyScheduled`` in v1beta1 (k8s-openapi
#: ``v1_36/api/scheduling/v1alpha2/pod_group_status.rs``,
#: ``v1_37/api/scheduling/v1beta1/pod_group_status.rs``).
CONDITION_POD_GROUP_SCHEDULED: Final = {
    "v1alpha2": "PodGroupScheduled",
    "v1beta1": "PodGroupInitiallyScheduled",
}
#: Its reason when slurmbridge admits the gang (Slinky slurm-bridge podgroup_status.go).
REASON_POD_GROUP_SCHEDULED: Final = "Scheduled"


def external_removal_reason(kube_node: str) -> str:
    """Drain reason while an external node whose label was removed leaves Slurm."""
    return f"{EXTERNAL_REASON_PREFIX}{kube_node}) is leaving Slurm: label removed"


def external_resize_reason(kube_node: str) -> str:
    """Drain reason while an external node whose resources changed is re-registered."""
    return f"{EXTERNAL_REASON_PREFIX}{kube_node}) changed resources: re-registering"


def external_repartition_reason(kube_node: str) -> str:
    """Drain reason while an external node whose partitions changed is re-registered."""
    return f"{EXTERNAL_REASON_PREFIX}{kube_node}) changed partitions: re-registering"


def cordon_drain_reason(kube_node: str) -> str:
    """Reason set on a Slurm node drained because its Kubernetes node is unschedulable.

    Source: Slinky slurm-bridge node controller (same text, so drains stay recognisable).
    """
    return f"{BRIDGE_REASON_PREFIX}Corresponding Kubernetes node ({kube_node}) is unschedulable"


def scale_in_drain_reason(namespace: str, pod: str) -> str:
    """Reason set on a Slurm node drained before its NodeSet pod is deleted (slurm-operator)."""
    return f"{OPERATOR_REASON_PREFIX}Pod ({namespace}/{pod}) is pending termination for scale-in"


def node_cordon_drain_reason(kube_node: str, namespace: str, pod: str) -> str:
    """Reason set on the Slurm node of a slurmd pod whose Kubernetes node is cordoned, when the
    node names no reason (slurm-operator internal/controller/nodeset/nodeset_sync.go
    ``syncCordon``; the ``slurm-operator: `` prefix as slurmcontrol.go ``FormatNodeReason``)."""
    return (
        f"{OPERATOR_REASON_PREFIX}Node ({kube_node}) was cordoned, "
        f"Pod ({namespace}/{pod}) must be cordoned"
    )


def pod_cordon_drain_reason(namespace: str, pod: str) -> str:
    """Reason set on a slurmd pod's Slurm node when the pod carries ``pod-cordon=true``
    (slurm-operator nodeset_sync.go ``syncCordon``)."""
    return f"{OPERATOR_REASON_PREFIX}Pod ({namespace}/{pod}) was cordoned"


def is_our_reason(reason: str) -> bool:
    """True when a drain reason was written by slurmbridge or Slinky (never an administrator's).

    An empty reason is *not* ours: callers decide separately what an empty reason means.
    """
    return reason.startswith(OUR_REASON_PREFIXES)


#: The NodeSet status condition slurmbridge writes when it will not act on ``spec.replicas``
#: (reconcilers.nodeset rule 21): Kubernetes' ReplicaSet condition type ``ReplicaFailure``.
NODESET_CONDITION_REPLICA_FAILURE: Final = "ReplicaFailure"
#: Every NodeSet condition type slurmbridge owns: observations carry only these, and the
#: status write replaces only these (others' conditions stay).
NODESET_CONDITIONS: Final = frozenset({NODESET_CONDITION_REPLICA_FAILURE})
