"""``nodeset``: Slinky NodeSets — slurmd pods, one Slurm node each, scaled with drain-before-delete.

Source of the rules: Slinky slurm-operator's NodeSet controller (scale-in order and drain
reason), with its PR #79 (a failed Slurm lookup means *not* drained). A NodeSet's key is
``namespace/name``; its pods are ``<nodeset>-<ordinal>`` (ordinals zero-padded to
``ordinalPadding`` digits), labelled ``app.kubernetes.io/name=slurmd`` and
``app.kubernetes.io/instance=<nodeset>``, and each pod's Slurm node has the pod's name (its
hostname, as slurmd registers it).

1. **Scale-out.** Fewer live pods than ``replicas`` ⇒ create missing ones at the lowest
   free ordinals (a name still terminating is not free), in slow-start batches
   (:func:`slow_start_batch`, after Kubernetes' ReplicaSet ``slowStartBatch``): a decision
   creates at most as many pods as are live (at least 1, at most 500), so the set at most
   doubles per pass and a decision never holds more than 500 creates; the pods that appear
   trigger the next pass. One ``ScalingUp`` Event. Nothing here is sized by ``replicas``.
2. **Scale-in.** More live pods than ``replicas`` ⇒ condemn the surplus in this order, first
   condemned first: not yet on a node; Pending before Unknown before Running; not ready
   before ready; lower ``nodeset.slinky.slurm.net/pod-deletion-cost`` first; earlier
   ``nodeset.slinky.slurm.net/pod-deadline`` first (none before any: the pods whose jobs
   end soonest go first); ``nodeset.slinky.slurm.net/pod-cordon`` before not cordoned
   (both as slurm-operator internal/controller/nodeset/utils/sort.go); Slurm node already
   drained first; then as Kubernetes' ActivePods order breaks ties: the pod that became
   ready most recently first, then the newest; higher ordinal last. (1.x's sort.go puts the
   ordinal before the ready time; slurmbridge keeps ActivePods' order there, issue 18.)
   A condemned pod's Slurm node is drained with ``slurm-operator: Pod (<ns>/<pod>) is
   pending termination for scale-in``; the pod is deleted only once its node is drained:
   DRAIN, not UNDRAIN (an undrain under way is never raced), and not ALLOCATED, MIXED or
   COMPLETING (or Slurm does not know it). The effector checks that again against Slurm
   before deleting. One ``ScalingDown`` Event.
3. **Reversal.** A live pod that is no longer condemned and whose node carries *that* drain
   reason is undrained; any other drain (an administrator's) stays.

   A condemned pod whose node is idle when it is drained is deleted in the same reconcile,
   right after the drain (the effector's re-read of the node is the check).
4. **Protection.** Pods whose Slurm node is ALLOCATED, MIXED or COMPLETING carry label
   ``nodeset.slinky.slurm.net/pod-protect=true``; others do not. When a pod gets the label,
   PodDisruptionBudget ``<nodeset>`` (``maxUnavailable: 0`` over the protected pods) is
   ensured, so an eviction (``kubectl drain``) cannot take a busy slurmd away.
5. **Failed pods.** A pod that is Failed or Succeeded (its slurmd is gone) is deleted at
   once, and its name is recreated after a back-off: 10 s after the first failure, doubling
   up to 300 s; a failure older than 600 s is forgotten. The count and time live in the
   NodeSet's ``nodeset.slurmbridge.dev/pod-failures`` annotation (written before the delete,
   with the failed pod's uid so a redelivery does not count twice), so the back-off survives
   restarts. A name waiting out its back-off keeps its ordinal. The Warning Event
   ``PodFailed`` on the NodeSet carries the kubelet's reason and message
   (``KubePod.kubelet_reason``: ``OutOfcpu``, ``TaintToleration``, ``Evicted``, a container's
   ``Error`` / ``OOMKilled`` …). A live pod that does not come up gets one Warning Event
   ``PodNotRunning`` per pod and reason (``RecordEvent.once``), with the reason and message:
   a container the kubelet cannot start (``ImagePullBackOff``, ``ErrImagePull``,
   ``CrashLoopBackOff``, ``CreateContainerConfigError`` …), or, while unbound, the
   ``PodScheduled=False`` condition's (``Unschedulable``: the scheduler's words on the nodes).
   Only the first :data:`NOT_RUNNING_EVENTS` such pods by name get one (a wrong image fails
   them all alike). Nothing else is done about such a pod (the kubelet retries; a scale-in or
   update removes it). Event messages are cut at :data:`EVENT_MESSAGE_LIMIT` characters.
6. **Status.** ``replicas``, ``readyReplicas``, ``availableReplicas`` from the pods;
   ``slurmIdle`` / ``slurmAllocated`` / ``slurmDown`` / ``slurmDrain`` from their Slurm nodes;
   ``observedGeneration``; ``selector``. Written only when it changed.
7. **Cordon sync.** A live pod that is not condemned follows its Kubernetes node's cordon
   and its own ``nodeset.slinky.slurm.net/pod-cordon`` annotation: drained while either
   asks, undrained when neither does and the drain is ours — never an administrator's or
   an unresponsive node's (rules and sources in :mod:`reconcilers._slurmd`). This
   supersedes rule 3's narrower undrain (it undrains any ``slurm-operator: `` reason).
8. **Slurm state on the pods.** Every live pod carries ``SlurmNodeState<State>``
   conditions mirroring its Slurm node, with Slurm's reason as message, written only when
   they change (:mod:`reconcilers._slurmd`).

9. **Deadlines.** With a complete Slurm listing, each live pod's ``pod-deadline`` annotation
   is the latest end of its Slurm node's RUNNING jobs (start + time limit; no limit ⇒ Go's
   longest duration), RFC 3339 UTC, removed when the node runs nothing; written only when
   it differs (slurm-operator nodeset_sync.go ``syncSlurmDeadline``, slurmcontrol.go
   ``GetNodeDeadlines``). The sort (rule 2) uses those deadlines, or the annotation without
   a listing. A SlurmJob on a slurmd pod's node triggers a reconcile.
10. **Revisions.** Each observation carries the hash of its template's revision
    (:mod:`slurmbridge.kube.revisions`); pods are created labelled
    ``controller.kubernetes.io/hash=<hash>`` with the hash of the NodeSet the effector read.
    When the status would name a new hash or the pods' revisions may have changed,
    :class:`EnsureNodeSetRevision` records the ControllerRevision and prunes the history
    to ``revisionHistoryLimit``, just before the status write. Status gains
    ``nodeSetHash``, ``updatedReplicas`` (live pods at that hash), ``unavailableReplicas``
    and ``desired``; ``availableReplicas`` counts pods Ready for ``minReadySeconds``
    (nodeset_sync_status.go ``calculateReplicaStatus``).
11. **Updates** (:func:`update_pods`), only when no scale-out or scale-in is under way in
    this decision: RollingUpdate replaces old-revision pods — every unhealthy one, then
    healthy ones within ``maxUnavailable`` (default ``25%``, rounded up) minus the
    unavailable (missing slots, new pods not yet available) — each condemned as in rule 2:
    drained with the pending-termination reason and deleted only once drained, never while
    its node runs a job; rule 1 re-creates it at the new revision. OnDelete replaces
    nothing. ScheduledUpdate replaces every unhealthy old pod, and the healthy old pods whose
    Slurm node is MAINTENANCE inside the NodeSet's reservation (rule 17) — no
    ``maxUnavailable`` budget (slurm-operator nodeset_sync.go ``syncScheduledUpdate``,
    slurmcontrol.go ``GetPodsUnderReservation``).
12. **DaemonSet mode** (``scalingMode: DaemonSet``; rules in :mod:`reconcilers._daemon`,
    as slurm-operator nodeset_sync.go ``syncNodeSetPods`` / ``podsShouldBeOnNode``):
    ``replicas`` is ignored; with a complete node listing, each Kubernetes node the
    template may run on and that has no live pod of the NodeSet gets one
    (``generateName: <nodeset>-``, hostname = its Slurm node name, pinned by node
    affinity); the pods on a node where they may no longer continue (a label removed, an
    untolerated ``NoExecute`` taint) are condemned as in rule 2 — drained, deleted only
    once their Slurm node is drained and idle. ``desired`` is the number of eligible nodes.
    A Failed or Succeeded pod is deleted as in rule 5, its failure counted under
    ``node/<node>`` (the back-off is the node's, as 1.x's ``failedPodsBackoffKey``); a node
    gets no new pod while a pod of the NodeSet on it is ending (terminal or terminating: 1.x
    ``getNodesToDaemonPods`` still counts it) or while that back-off runs (1.x holds the
    failed pod's deletion for the back-off instead; either way the node waits, and no pod
    churns against a kubelet that keeps rejecting it). A live pod whose
    hostname label is no longer the node's hostname (the ``hostname-override`` annotation
    changed) is condemned as in rule 2 and re-created under the new name once it is gone
    (``podsShouldBeOnNode``, "hostname mismatch"); its Slurm node is the old name, so the
    drain never touches the new one.
    A KubeNode change triggers every DaemonSet-mode NodeSet (as Kubernetes' DaemonSet
    controller, pkg/controller/daemon/daemon_controller.go ``updateNode``; 1.x's
    eventhandler_node.go only enqueues the NodeSets with a pod on the node).
13. **Scaling mode switch.** Live pods labelled for the other mode
    (``nodeset.slinky.slurm.net/scaling-mode``; none = StatefulSet) are condemned as in
    rule 2 (nodeset_sync.go ``syncNodeSetPods`` deletes them).
14. **pinToNode** (StatefulSet mode): ``status.ordinalToNode`` is kept as
    :func:`reconcilers._daemon.pins` computes it, and a re-created ordinal with a pin is
    created with that node as required node affinity (utils.go ``pinPodToNode``).
15. **Identity** (:mod:`reconcilers._ident` rules 1–4): each healthy pod's Slurm node
    comment holds its PodInfo; the Kubernetes node's ``features.slinky.slurm.net/spec``
    and ``topology.slinky.slurm.net/spec`` annotations become the Slurm node's ``k8s/``
    features and topology; a healthy, available pod whose Slurm node never registered is
    deleted (and re-created by rule 1) with a Warning ``SlurmNodeNotRegistered``.
16. **Pruning records** (:mod:`reconcilers._ident` rule 5): ``pruneSlurmNodeRecords:
    NodeNotFound`` on a DaemonSet-mode NodeSet deletes the defunct Slurm node records
    naming it.
17. **ScheduledUpdate reservation** (:func:`reservation_actions`; nodeset_sync.go
    ``syncSlurmReservation``, slurmcontrol.go ``SyncReservationForNodeSet`` and
    ``formatReservationForSchedule``). With ``updateStrategy.type: ScheduledUpdate``,
    ``replicas`` > 0 and at least one of the pods' Slurm nodes idle or allocated, reservation
    ``SlurmOperatorMaint-<nodeset>`` is ensured on those nodes from ``startTime`` for
    ``duration`` (whole minutes) with flags ``IGNORE_JOBS``, ``MAINT`` and the spec's extra
    flags, for user root. It is sent when it differs from the NodeSet's
    ``nodeset.slurmbridge.dev/reservation`` stamp (what was last ensured) — not when the
    window has ended, and not first created once its start has passed unless the flags
    include ``FORCE_START`` (as 1.x). Another strategy, or ``replicas`` 0, with a stamp ⇒ the
    reservation is deleted. The REST API can create and delete reservations from v0.0.43
    (Slurm 25.05); older versions answer ``unsupported``.

Clusters: ``clusterName`` empty or equal to ``slurm.cluster`` means slurmbridge's static
Slurm cluster; another name must be a served Cluster object (:func:`reconcilers.cluster.served`),
else the NodeSet is left alone and the decision says why.

The pods' PersistentVolumeClaims (``volumeClaimTemplates``) are made by the effector with
each pod (:func:`slurmbridge.kube.nodeset_pod.claims_for`).

18. **Claims on scale-in** (``persistentVolumeClaimRetentionPolicy``; Kubernetes
    stateful_pod_control.go ``ClaimsMatchRetentionPolicy`` /
    ``UpdatePodClaimForRetentionPolicy``, slurm-operator podcontrol.go
    ``updateClaimOwnerRefForSetAndPod``). The deletes of pods condemned by a scale-in
    (rule 2, and rule 12's pods on nodes they may no longer run on — not updates, not a
    mode switch) carry the NodeSet: just before the delete the effector makes the pod its
    claims' controller owner when ``whenScaled: Delete`` (the garbage collector deletes them
    with the pod), else leaves the NodeSet as owner with ``whenDeleted: Delete``
    (:func:`slurmbridge.kube.nodeset_pod.claim_owners`). A live pod that is not condemned
    but whose node carries its pending-termination drain (a reversed scale-in) gets
    :class:`KeepNodeSetPodClaims`: its claims are owned as a kept pod's — never by the pod.

19. **Partition** (:func:`partition_actions`; ``spec.partition``, which 1.x renders into
    slurm.conf as ``PartitionName=<nodeset> Nodes=<nodeset> <config>``:
    controller_config.go ``buildNodeSetConf``). slurmbridge writes no slurm.conf: with
    ``enabled`` and a complete Slurm listing, partition ``<nodeset>`` is ensured through
    slurmrestd (v0.0.45+, Slurm 26.05; older versions answer ``unsupported``) holding the
    Slurm nodes of the live pods, with the ``config`` keys that have a REST field
    (:mod:`schemas.partitionconf`); every other key, and every unreadable value, gets a
    Warning Event ``PartitionConfigIgnored`` naming it. It is sent when it differs from the
    NodeSet's ``nodeset.slurmbridge.dev/partition`` stamp or Slurm lists it with other nodes
    (or not at all: made again). The stamp also marks the partition as slurmbridge's:
    ``enabled`` false with a stamp ⇒ deleted; a partition of the name that Slurm lists while
    the NodeSet has no stamp is someone else's: never changed nor deleted (Warning
    ``PartitionNotOurs``, once per generation). The effector marks the stamp ``pending`` and
    adds finalizer ``nodeset.slurmbridge.dev/slurm-objects`` before it sends the partition.

20. **Finalizer** (:func:`finalize`). A NodeSet being deleted with a partition or
    ScheduledUpdate reservation stamp gets :class:`DeleteSlurmPartition` /
    :class:`DeleteSlurmReservation` (each effect removes its stamp and, with the last, the
    finalizer); our finalizer without a stamp is released (:class:`ReleaseNodeSetFinalizer`).
    Nothing else is decided for a NodeSet being deleted (its pods go with it).

21. **Bounded replicas.** ``replicas`` above :data:`MAX_REPLICAS` (the CRD's ``maximum``;
    only a NodeSet stored under an older CRD, or with validation bypassed, can hold it) is
    not acted on: the set is held at its live pods (no scale-out, no scale-in), the status
    carries condition ``ReplicaFailure`` (True, reason ``ReplicasAboveMaximum``, the field
    and the bound in the message) and a Warning Event says the same once; the other rules
    go on. Fixing ``replicas`` removes the condition.

Not yet: in DaemonSet mode the failed-pod back-off (rule 5), the removal of duplicate pods on one
node and the re-creation on a hostname-override change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Final

import msgspec

from reconcilers import _daemon, _ident, _slurmd
from reconcilers import cluster as cluster_rules
from reconcilers.base import (
    Context,
    Decision,
    ReconcilerSpec,
    Store,
    kube_listed,
    slurm_listed,
)
from schemas import partitionconf, podinfo, wellknown
from schemas.actions import (
    AnyAction,
    CreateNodeSetPod,
    DeleteFailedNodeSetPod,
    DeleteNodeSetPod,
    DeleteSlurmPartition,
    DeleteSlurmReservation,
    DrainSlurmNode,
    EnsureNodeSetPDB,
    EnsureNodeSetRevision,
    EnsureSlurmPartition,
    EnsureSlurmReservation,
    KeepNodeSetPodClaims,
    NodeSetRef,
    PodRef,
    RecordEvent,
    ReleaseNodeSetFinalizer,
    SetNodeSetStatus,
    SetPodAnnotation,
    SetPodLabel,
)
from schemas.events import (
    KubeNode,
    KubeNodeSet,
    KubePod,
    NodeSetCondition,
    NodeSetStatus,
    SlurmCluster,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
)
from schemas.subjects import KUBE_SOURCE, slurm_source

NAME: Final = "nodeset"
#: The node watcher's listing name (producers.kube.watch NodeWatcher.resource).
NODES_LISTING: Final = "nodes"
#: The pod watcher's listing name (producers.kube.watch PodWatcher.resource).
PODS_LISTING: Final = "pods"
#: The version slurmbridge reads and writes NodeSets at (the CRD's storage version).
API_VERSION: Final = "slinky.slurm.net/v1beta1"
LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_INSTANCE: Final = "app.kubernetes.io/instance"
SLURMD: Final = "slurmd"
BUSY: Final = ("ALLOCATED", "MIXED", "COMPLETING")
#: Seconds between looks at a scale-in waiting for its nodes to drain (Slurm node changes
#: trigger a reconcile too; this only bounds the wait if a poll is missed).
DRAIN_RECHECK_S: Final = 5.0
_PHASE_RANK: Final = {"Pending": 0, "Unknown": 1, "Running": 2}
#: Recreation back-off of failed pods (rule 5), seconds.
BACKOFF_BASE_S: Final = 10.0
BACKOFF_MAX_S: Final = 300.0
FORGET_FAILURE_S: Final = 600.0
_FAILURES: Final = msgspec.json.Decoder(dict[str, tuple[int, int, str]])
#: A job without a time limit runs "forever": Go's largest Duration, in seconds, as
#: slurmcontrol.go ``GetNodeDeadlines`` adds for an INFINITE limit.
INFINITE_S: Final = (2**63 - 1) // 10**9
#: updateStrategy.rollingUpdate.maxUnavailable when unset (internal/defaults/nodeset.go).
DEFAULT_MAX_UNAVAILABLE: Final = "25%"
#: ScheduledUpdate's reservation: name prefix and required flags (slurmcontrol.go
#: ``resDescFlags``).
RESERVATION_PREFIX: Final = "SlurmOperatorMaint-"
RESERVATION_FLAGS: Final = ("IGNORE_JOBS", "MAINT")
#: Go's strconv.ParseBool spellings of true (structutils.GetBoolFromAnnotations).
_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
#: The largest ``spec.replicas`` acted on (rule 21), the CRD's ``maximum``
#: (deploy/crds/nodesets.slinky.slurm.net.yaml; tests/unit/test_crds.py keeps them equal).
#: Twice the 5,000 nodes Kubernetes supports in one cluster ("Considerations for large
#: clusters"): one slurmd pod per node, or a few with ``oversubscribeNode``. A NodeSet
#: asking for more is a typo (``replicas: 1000000000``), not a plan.
MAX_REPLICAS: Final = 10_000
#: Scale-out slow start (rule 1), after Kubernetes' ReplicaSet controller
#: (pkg/controller/replicaset/replica_set.go): ``slowStartBatch`` starts with
#: ``SlowStartInitialBatchSize`` (1) creates and doubles the batch while the creates succeed,
#: and one sync creates at most ``BurstReplicas`` (500) pods.
SLOW_START_INITIAL: Final = 1
BURST_REPLICAS: Final = 500
#: Rule 21's condition (Kubernetes' ReplicaSet ``ReplicaFailure`` condition type: "one of
#: its pods fails to be created"), with this reason; no condition when replicas is sane.
CONDITION_REPLICA_FAILURE: Final = wellknown.NODESET_CONDITION_REPLICA_FAILURE
REASON_REPLICAS_TOO_MANY: Final = "ReplicasAboveMaximum"
#: Pod names listed in full in a ScalingUp Event; more are summarised.
_NAMES_SHOWN: Final = 10
#: The longest Event message written (characters): the 1 kB of an events.k8s.io ``note``
#: (k8s.io/kubernetes pkg/apis/events/validation ``NoteLengthLimit``), which a core/v1 Event
#: becomes when read through that API.
EVENT_MESSAGE_LIMIT: Final = 1024
#: Rule 5's Warning on a live pod that does not come up, for at most this many pods a
#: decision (the first by name).
REASON_POD_NOT_RUNNING: Final = "PodNotRunning"
NOT_RUNNING_EVENTS: Final = 5


class View(msgspec.Struct, frozen=True, kw_only=True):
    """One NodeSet, its pods (deleting ones too) and their Slurm nodes by name."""

    nodeset: KubeNodeSet | None
    pods: tuple[KubePod, ...]
    slurm: dict[str, SlurmNode]
    cluster: str
    served: bool
    now: float = 0.0
    #: The log holds a complete, current listing of the cluster (base.slurm_listed): only
    #: then is a pod without a Slurm node "unknown to Slurm" and deletable undrained.
    slurm_listed: bool = False
    #: The Kubernetes nodes the pods are bound to, by name (rule 7).
    kube_nodes: dict[str, KubeNode] = {}
    #: Node condition types that make a cordon's drain reason (Context).
    propagated_node_conditions: tuple[str, ...] = ()
    #: Rule 13 (pruning, DaemonSet mode with ``NodeNotFound`` only): the cluster's Slurm
    #: nodes whose comment names this NodeSet, the keys (``namespace/name``) of the pods
    #: they name that exist, and whether the log holds a complete pod listing.
    records: tuple[SlurmNode, ...] = ()
    record_pods: frozenset[str] = frozenset()
    pods_listed: bool = False
    #: The log holds a complete Kubernetes node listing (base.kube_listed): a pod's node
    #: missing from ``kube_nodes`` is then gone, not merely unseen yet.
    nodes_listed: bool = False
    #: Per Slurm node of these pods: when its running jobs end at the latest (epoch s; a
    #: node running nothing is absent) — :func:`node_deadlines` (rule 9).
    deadlines: dict[str, int] = {}
    #: Rule 19: the cluster's Slurm partition named as the NodeSet (None: Slurm lists none).
    partition: SlurmPartition | None = None


def slow_start_batch(created: int, missing: int) -> int:
    """How many of ``missing`` pods one decision creates when ``created`` live pods exist.

    Kubernetes' ``slowStartBatch`` creates 1, then 2, 4 … while the creates succeed. A
    decision here cannot see its own creates succeed (the effector performs them after it),
    so each pass takes the pods that exist — creates that succeeded — as the measure: it
    creates as many again (at least :data:`SLOW_START_INITIAL`), so the set at most doubles
    per pass, never more than :data:`BURST_REPLICAS`. Creates that fail (quota, admission)
    add no pods, so the next pass does not grow. Bounded by ``BURST_REPLICAS`` whatever
    ``missing`` is."""
    if missing <= 0:
        return 0
    return min(missing, BURST_REPLICAS, max(SLOW_START_INITIAL, created))


def lowest_free(count: int, taken: set[int] | frozenset[int]) -> list[int]:
    """The ``count`` lowest ordinals not in ``taken``: O(count + len(taken)), never more."""
    free: list[int] = []
    ordinal = 0
    while len(free) < count:
        if ordinal not in taken:
            free.append(ordinal)
        ordinal += 1
    return free


def _some(names: list[str]) -> str:
    """``a, b, c``, or the first few and a count when there are many."""
    if len(names) <= _NAMES_SHOWN:
        return ", ".join(names)
    return f"{', '.join(names[:_NAMES_SHOWN])} and {len(names) - _NAMES_SHOWN} more"


def replicas_message(replicas: int) -> str:
    """Rule 21's condition message, in the API server's words for a field over its
    ``maximum`` (apiextensions-apiserver, kube-openapi ``ExceedsMaximum``)."""
    return (
        f"spec.replicas: Invalid value: {replicas}: spec.replicas in body should be less than "
        f"or equal to {MAX_REPLICAS}; the NodeSet is held at its current pods until it is"
        " fixed"
    )


def replica_conditions(
    ns: KubeNodeSet, bad: bool, now: float
) -> tuple[tuple[NodeSetCondition, ...], bool]:
    """Rule 21: the NodeSet's ``ReplicaFailure`` condition (none when ``bad`` is False), and
    whether it is new or changed (then a Warning Event goes with it). An unchanged
    condition keeps its ``lastTransitionTime``."""
    if not bad:
        return (), False
    message = replicas_message(ns.replicas)
    old = next((c for c in ns.status.conditions if c.type == CONDITION_REPLICA_FAILURE), None)
    if (
        old is not None
        and old.status == "True"
        and old.reason == REASON_REPLICAS_TOO_MANY
        and old.message == message
    ):
        return (old,), False
    cond = NodeSetCondition(
        type=CONDITION_REPLICA_FAILURE,
        status="True",
        reason=REASON_REPLICAS_TOO_MANY,
        message=message,
        last_transition=int(now),
    )
    return (cond,), True


def pod_name(nodeset: str, ordinal: int, padding: int) -> str:
    """``<nodeset>-<ordinal>``, the ordinal zero-padded to ``padding`` digits."""
    return f"{nodeset}-{ordinal:0{padding}d}" if padding else f"{nodeset}-{ordinal}"


def ordinal_of(nodeset: str, pod: str) -> int | None:
    """The ordinal in pod name ``<nodeset>-<ordinal>`` (None: not one of its names)."""
    prefix = nodeset + "-"
    tail = pod[len(prefix) :] if pod.startswith(prefix) else ""
    # ASCII only: "²".isdigit() is true, but int("²") raises (names in the failures
    # annotation are whatever someone wrote there).
    return int(tail) if tail.isascii() and tail.isdigit() else None


def _deletion_cost(p: KubePod) -> int:
    raw = p.annotations.get(wellknown.ANNOTATION_POD_DELETION_COST, "0").strip()
    try:
        return int(raw)
    except ValueError:
        return 0  # as Kubernetes' ReplicaSet controller: an invalid cost counts as 0


def is_busy(node: SlurmNode | None) -> bool:
    """The node runs something: ALLOCATED, MIXED or COMPLETING."""
    return node is not None and any(node.has(s) for s in BUSY)


def parse_deadline(text: str | None) -> int:
    """An RFC 3339 ``pod-deadline`` as epoch seconds; absent or unreadable ⇒ 0 (Go's zero
    time, before every deadline: structutils.GetTimeFromAnnotations)."""
    if not text:
        return 0
    try:
        return int(datetime.fromisoformat(text).timestamp())
    except ValueError:
        return 0


def format_deadline(epoch_s: int) -> str:
    """Epoch seconds as RFC 3339 in UTC (Go's ``time.RFC3339`` layout), e.g.
    ``2026-01-02T03:04:05Z``."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_deadlines(jobs: Iterable[SlurmJob], nodes: set[str]) -> dict[str, int]:
    """For each of ``nodes`` running a job: the latest end of its RUNNING jobs, epoch
    seconds — ``start_time`` + the time limit, or + :data:`INFINITE_S` without one
    (slurm-operator slurmcontrol.go ``GetNodeDeadlines``, a TimeStore keeping the greater)."""
    out: dict[str, int] = {}
    for job in jobs:
        if job.base_state != "RUNNING":
            continue
        limit = job.time_limit_minutes
        end = job.start_time + (INFINITE_S if limit is None else limit * 60)
        for name in job.nodes:
            if name in nodes and end > out.get(name, 0):
                out[name] = end
    return out


def _deadline(p: KubePod, deadlines: dict[str, int] | None) -> int:
    if deadlines is not None:
        return deadlines.get(p.name, 0)
    return parse_deadline(p.annotations.get(wellknown.ANNOTATION_POD_DEADLINE))


def _cordoned(p: KubePod) -> bool:
    return p.annotations.get(wellknown.ANNOTATION_POD_CORDON, "") in _TRUE


def active_pods_key(
    p: KubePod,
    nodeset: str,
    slurm: dict[str, SlurmNode],
    deadlines: dict[str, int] | None = None,
) -> tuple[object, ...]:
    """Sort key: pods that sort first are condemned first (module docstring, rule 2).

    ``deadlines``: the Slurm nodes' job deadlines (:func:`node_deadlines`) when the log holds
    a complete Slurm listing; else each pod's ``pod-deadline`` annotation is read."""
    node = slurm.get(p.name)
    drained = node is not None and node.has("DRAIN") and not node.has("UNDRAIN")
    return (
        bool(p.node_name),
        _PHASE_RANK.get(p.phase, 1),
        p.ready,
        _deletion_cost(p),
        # slurm-operator utils/sort.go: the earliest pod-deadline first (none = Go's zero
        # time, first of all), then cordoned (pod-cordon) before not cordoned.
        _deadline(p, deadlines),
        not _cordoned(p),
        not drained,
        # Kubernetes' ActivePods order (pkg/controller/controller_utils.go): the pod that
        # became ready most recently first, then the newest; an unset time first.
        (p.ready_since != 0, -p.ready_since),
        (p.created_at != 0, -p.created_at),
        -(ordinal_of(nodeset, p.name) or 0),
    )


def scale_in_order(
    pods: Iterable[KubePod],
    nodeset: str,
    slurm: dict[str, SlurmNode],
    deadlines: dict[str, int] | None = None,
) -> list[KubePod]:
    """Pods sorted so that the first ones are condemned first (:func:`active_pods_key`)."""
    return sorted(pods, key=lambda p: active_pods_key(p, nodeset, slurm, deadlines))


def max_unavailable(value: str, total: int) -> int:
    """``maxUnavailable`` (an integer, or a percentage of ``total`` rounded up) as a count;
    ``""`` is 1.x's default ``25%``; an unreadable value counts as 1
    (internal/utils/mathutils ``GetScaledValueFromIntOrPercent`` over apimachinery intstr)."""
    text = value or DEFAULT_MAX_UNAVAILABLE
    try:
        if text.endswith("%"):
            return math.ceil(int(text[:-1]) * total / 100)
        return int(text)
    except ValueError:
        return 1


def is_available(p: KubePod, min_ready_s: int, now: float) -> bool:
    """Ready for at least ``min_ready_s`` seconds (Kubernetes podutil ``IsPodAvailable``)."""
    return p.ready and (min_ready_s <= 0 or p.ready_since + min_ready_s <= now)


def _healthy(p: KubePod) -> bool:
    # podutils.IsHealthy: Running, Ready and not terminating.
    return p.phase == "Running" and p.ready and not p.deleting


def revision_of(p: KubePod) -> str:
    """The pod's revision hash (label ``controller.kubernetes.io/hash``; ``""`` none)."""
    return p.labels.get(wellknown.LABEL_REVISION_HASH, "")


def _ref(p: KubePod) -> PodRef:
    return PodRef(namespace=p.namespace, name=p.name, uid=p.uid)


def _event(ns: KubeNodeSet, reason: str, message: str, *, warning: bool = False) -> RecordEvent:
    if len(message) > EVENT_MESSAGE_LIMIT:
        message = message[: EVENT_MESSAGE_LIMIT - 1] + "…"
    return RecordEvent(
        api_version=API_VERSION,
        object_kind="NodeSet",
        name=ns.name,
        namespace=ns.namespace,
        uid=ns.uid,
        type="Warning" if warning else "Normal",
        reason=reason,
        message=message,
        on=("ok",),
    )


def _why(reason: str, message: str) -> str:
    """`` (<reason>: <message>)`` for an Event, ``""`` without a reason."""
    if not reason:
        return ""
    return f" ({reason}: {message})" if message else f" ({reason})"


def not_running(p: KubePod) -> tuple[str, str] | None:
    """``(reason, message)`` of a live pod that does not come up (rule 5): the kubelet's
    (a container it cannot start), else, while unbound, the ``PodScheduled=False``
    condition's; None for a pod that is fine, starting, terminal or being deleted."""
    if p.terminal or p.deleting:
        return None
    if p.kubelet_reason:
        return p.kubelet_reason, p.kubelet_message
    scheduled = p.condition("PodScheduled")
    if not p.node_name and scheduled is not None and scheduled.status == "False":
        return scheduled.reason or "Unschedulable", scheduled.message
    return None


def _occasion(p: KubePod, reason: str) -> str:
    """``RecordEvent.once`` for rule 5's Warning on ``p``: the pod (its uid: a pod re-created
    under the name gets its own) and the reason, as DNS-label characters."""
    word = "".join(ch if ch.isalnum() else "-" for ch in reason.lower())[:40].strip("-")
    return f"pod-{p.uid or p.name}.{word or 'unknown'}"


def _not_running_events(ns: KubeNodeSet, pods: Iterable[KubePod]) -> list[AnyAction]:
    """One Warning per live pod and reason it does not come up for (rule 5), for the first
    :data:`NOT_RUNNING_EVENTS` such pods by name: a wrong image fails every pod the same
    way, and each decision re-sends its ``once`` Events (a 409 each once they exist), so a
    large NodeSet must not multiply them."""
    out: list[AnyAction] = []
    stuck = [(p, why) for p in pods if (why := not_running(p)) is not None]
    for p, why in sorted(stuck, key=lambda pw: pw[0].name)[:NOT_RUNNING_EVENTS]:
        event = _event(
            ns,
            REASON_POD_NOT_RUNNING,
            f"{p.name} is {p.phase}{_why(*why)}",
            warning=True,
        )
        out.append(msgspec.structs.replace(event, once=_occasion(p, why[0])))
    return out


def _status(
    ns: KubeNodeSet,
    live: list[KubePod],
    slurm: dict[str, SlurmNode],
    now: float = 0.0,
    *,
    desired: int | None = None,
    pins: dict[str, str] | None = None,
) -> NodeSetStatus:
    nodes = [slurm[p.name] for p in live if p.name in slurm]
    ready = sum(1 for p in live if p.ready)
    available = sum(1 for p in live if is_available(p, ns.min_ready_seconds, now))
    return NodeSetStatus(
        replicas=len(live),
        ready_replicas=ready,
        available_replicas=available,
        slurm_idle=sum(1 for n in nodes if n.base_state == "IDLE" and not n.has("DRAIN")),
        slurm_allocated=sum(1 for n in nodes if n.base_state in ("ALLOCATED", "MIXED")),
        slurm_down=sum(1 for n in nodes if n.base_state == "DOWN"),
        slurm_drain=sum(1 for n in nodes if n.has("DRAIN")),
        observed_generation=ns.generation,
        selector=",".join(f"{k}={v}" for k, v in sorted(_selector(ns).items())),
        # nodeset_sync_status.go calculateReplicaStatus (StatefulSet mode).
        updated_replicas=(
            sum(1 for p in live if revision_of(p) == ns.revision_hash) if ns.revision_hash else 0
        ),
        unavailable_replicas=max(0, len(live) - available),
        desired=max(0, ns.replicas) if desired is None else desired,
        node_set_hash=ns.revision_hash,
        ordinal_to_node=ns.status.ordinal_to_node if pins is None else pins,
    )


def failures_of(ns: KubeNodeSet) -> dict[str, tuple[int, int, str]]:
    """The recorded failures by pod name: ``(count, last epoch s, uid of the pod that failed
    last)`` (rule 5). An unreadable annotation counts as none: the back-off then starts
    again, which is safe."""
    raw = ns.annotations.get(wellknown.ANNOTATION_NODESET_POD_FAILURES)
    if not raw:
        return {}
    try:
        return _FAILURES.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return {}


def backoff_s(failures: int) -> float:
    """Seconds before a name that failed ``failures`` times is recreated (rule 5)."""
    if failures <= 0:
        return 0.0
    return min(BACKOFF_MAX_S, BACKOFF_BASE_S * float(2 ** min(failures - 1, 16)))


def _selector(ns: KubeNodeSet) -> dict[str, str]:
    return ns.selector or {LABEL_NAME: SLURMD, LABEL_INSTANCE: ns.name}


def decide(v: View | None) -> Decision:
    """Scale-out, drain-before-delete scale-in, reversal, protection, status (module doc)."""
    if v is None or v.nodeset is None:
        return Decision(reason="no NodeSet (its pods go with it: owner references)")
    ns = v.nodeset
    if not v.served:
        return Decision(reason=f"Slurm cluster {ns.cluster_name!r} is not served here")
    if ns.deleting:
        return finalize(v, ns)
    if ns.scaling_mode not in (_daemon.STATEFULSET, _daemon.DAEMONSET):
        return Decision(reason=f"scalingMode {ns.scaling_mode} is unknown; left alone")
    daemon = ns.scaling_mode == _daemon.DAEMONSET
    ref = NodeSetRef(namespace=ns.namespace, name=ns.name, uid=ns.uid)
    running = [p for p in v.pods if not p.deleting and not p.terminal]
    # Rule 13: pods made for the other scaling mode go.
    other_mode = [p for p in running if _daemon.mode_of(p) != ns.scaling_mode]
    live = [p for p in running if _daemon.mode_of(p) == ns.scaling_mode]
    actions: list[AnyAction] = []
    requeue: float | None = None
    want = max(0, ns.replicas)
    # Rule 21: replicas above the bound (a NodeSet written under an older CRD without the
    # maximum) is not acted on: the set is held at its live pods, and the condition says why.
    bad_replicas = not daemon and ns.replicas > MAX_REPLICAS
    if bad_replicas:
        want = len(live)
    pins: dict[str, str] | None = None
    daemon_gone: list[KubePod] = []
    daemon_note = ""
    prune_note = ""
    if daemon:
        # Rule 16: defunct records of this NodeSet's pods (DaemonSet mode only, as 1.x).
        pruned, notes = _ident.prune_actions(
            ns,
            v.records,
            v.record_pods,
            v.kube_nodes,
            v.cluster,
            listed=v.slurm_listed and v.nodes_listed and v.pods_listed,
        )
        for prune, message in pruned:
            actions += [prune, _event(ns, "DefunctSlurmNodePruned", message)]
        prune_note = "; ".join([*(f"pruning {prune.node}" for prune, _ in pruned), *notes])
        pins = {}  # 1.x keeps no pins in DaemonSet mode (calculateOrdinalToNode)
        want, daemon_gone, daemon_note, daemon_wait = _daemon_pods(v, live, ref, actions)
        if daemon_wait is not None:
            requeue = daemon_wait
    else:
        pins = _daemon.pins(
            ns,
            live,
            v.kube_nodes,
            {p.name: o for p in live if (o := ordinal_of(ns.name, p.name)) is not None},
            nodes_listed=v.nodes_listed,
        )

    failures = failures_of(ns)
    for p in v.pods:
        if p.terminal and not p.deleting:
            key = failure_key(p)
            count, at, uid = failures.get(key, (0, 0, ""))
            if uid != p.uid:  # this failure is not counted yet
                count = (count if v.now - at < FORGET_FAILURE_S else 0) + 1
                at = int(v.now)
            actions.append(
                DeleteFailedNodeSetPod(
                    nodeset=ref,
                    pod=_ref(p),
                    failures=count,
                    at=at,
                    key="" if key == p.name else key,
                )
            )
            actions.append(
                _event(
                    ns,
                    "PodFailed",
                    f"{p.name} is {p.phase}{_why(p.kubelet_reason, p.kubelet_message)}: "
                    f"deleting it; it is recreated in {backoff_s(count):.0f} s",
                    warning=True,
                )
            )
    actions += _not_running_events(ns, v.pods)
    # Names waiting out a back-off keep their ordinal and are not replaced by another name.
    waiting_out: dict[int, float] = {}
    for name, (count, at, _) in failures.items():
        left = at + backoff_s(count) - v.now
        o = ordinal_of(ns.name, name)
        if o is not None and left > 0 and v.now - at < FORGET_FAILURE_S:
            waiting_out[o] = left
    used = {o for p in v.pods if (o := ordinal_of(ns.name, p.name)) is not None}
    # A failed pod about to be replaced, or a name waiting out its back-off, holds a slot.
    replacing = sum(1 for p in v.pods if p.terminal and not p.deleting)
    replacing += sum(1 for o in waiting_out if o not in used)
    if not daemon and len(live) + replacing < want:
        missing = want - len(live) - replacing
        batch = slow_start_batch(len(live), missing)
        # Only the batch's ordinals are looked for: the walk passes at most the taken ones
        # (pods and back-offs), never ``replicas`` ordinals.
        free = lowest_free(batch, used | waiting_out.keys())
        names = [pod_name(ns.name, o, ns.ordinal_padding) for o in free]
        actions += [
            CreateNodeSetPod(nodeset=ref, pod_name=n, ordinal=o, node=(pins or {}).get(str(o), ""))
            for n, o in zip(names, free, strict=True)
        ]
        actions.append(
            _event(
                ns,
                "ScalingUp",
                f"Scaling up to {want}: creating {_some(names)}"
                + (f" ({batch} of {missing} missing: slow start)" if batch < missing else ""),
            )
        )
    if waiting_out:
        soonest = min(waiting_out.values())
        requeue = soonest if requeue is None else min(requeue, soonest)

    deadlines = v.deadlines if v.slurm_listed else None
    condemned: list[KubePod] = []
    if daemon_gone or other_mode:
        condemned = daemon_gone + other_mode
        # Rule 18: a pod leaving a node it may no longer run on is a DaemonSet-mode scale-in
        # (1.x's doPodScale settles its claims as any podsToDelete); a mode switch is not.
        waiting = _condemn(v, daemon_gone, actions, ref) + _condemn(v, other_mode, actions)
        if waiting:
            requeue = min(requeue or DRAIN_RECHECK_S, DRAIN_RECHECK_S)
        actions.append(
            _event(
                ns,
                "ScalingDown",
                f"Deleting {', '.join(p.name for p in condemned)}"
                + (f" (waiting for {', '.join(waiting)} to drain)" if waiting else ""),
            )
        )
    elif not daemon and len(live) > want:
        condemned = scale_in_order(live, ns.name, v.slurm, deadlines)[: len(live) - want]
        waiting = _condemn(v, condemned, actions, ref)
        if waiting:
            requeue = min(requeue or DRAIN_RECHECK_S, DRAIN_RECHECK_S)
        actions.append(
            _event(
                ns,
                "ScalingDown",
                f"Scaling down to {want}: {', '.join(p.name for p in condemned)}"
                + (f" (waiting for {', '.join(waiting)} to drain)" if waiting else ""),
            )
        )

    update_note = ""
    creating = any(isinstance(a, CreateNodeSetPod) for a in actions)
    if not condemned and not creating:
        updating, update_note, wait_s = update_pods(v, live, deadlines, want)
        if updating:
            waiting = _condemn(v, updating, actions)
            actions.append(
                _event(
                    ns,
                    "RollingUpdate",
                    f"Rolling update to revision {ns.revision_hash}: replacing "
                    f"{', '.join(p.name for p in updating)}"
                    + (f" (waiting for {', '.join(waiting)} to drain)" if waiting else ""),
                )
            )
            if waiting:
                wait_s = min(wait_s or DRAIN_RECHECK_S, DRAIN_RECHECK_S)
        if wait_s is not None:
            requeue = wait_s if requeue is None else min(requeue, wait_s)
        condemned = updating

    doomed = {p.name for p in condemned}
    pdb_ensured = False
    cordons: list[str] = []
    for p in live:
        node = v.slurm.get(p.name)
        kube_node = v.kube_nodes.get(p.node_name) if p.node_name else None
        actions += _slurmd.condition_actions(p, node, slurm_listed=v.slurm_listed)
        actions += _ident.pod_info_actions(ns, p, node, v.cluster)
        actions += _ident.feature_actions(kube_node, node, v.cluster)
        topology, note = _ident.topology_actions(p, kube_node, node, v.cluster)
        actions += topology
        if note:
            cordons.append(note)
        if p.name not in doomed:
            wait = _ident.unregistered(
                p, node, ns.min_ready_seconds, v.now, slurm_listed=v.slurm_listed
            )
            if wait == 0.0:
                actions.append(_ident.unregistered_delete(p, v.cluster))
                actions.append(
                    _event(
                        ns,
                        "SlurmNodeNotRegistered",
                        f"Deleting Pod {p.namespace}/{p.name}: Slurm node is not registered "
                        "but pod is healthy",
                        warning=True,
                    )
                )
            elif wait is not None:
                requeue = wait if requeue is None else min(requeue, wait)
        if p.name in doomed or node is None:
            continue
        if node.reason == wellknown.scale_in_drain_reason(p.namespace, p.name):
            # Rule 18: a reversed scale-in; the pod's claims may already name it as owner.
            actions.append(
                KeepNodeSetPodClaims(nodeset=ref, pod=_ref(p), slurm_node=_daemon.slurm_name(p))
            )
        synced, why = _slurmd.cordon_actions(
            p,
            kube_node,
            node,
            v.cluster,
            v.propagated_node_conditions,
            nodes_listed=v.nodes_listed,
        )
        actions += synced
        if why:
            cordons.append(why)
        protected = p.labels.get(wellknown.LABEL_POD_PROTECT) == "true"
        if is_busy(node) and not protected:
            if not pdb_ensured:
                selector = {**_selector(ns), wellknown.LABEL_POD_PROTECT: "true"}
                actions.append(EnsureNodeSetPDB(nodeset=ref, selector=selector))
                pdb_ensured = True
            actions.append(
                SetPodLabel(pod=_ref(p), label=wellknown.LABEL_POD_PROTECT, value="true")
            )
        elif not is_busy(node) and protected:
            actions.append(SetPodLabel(pod=_ref(p), label=wellknown.LABEL_POD_PROTECT, value=None))

    if deadlines is not None:
        actions += deadline_actions(live, deadlines)
    status = _status(ns, live, v.slurm, v.now, desired=want, pins=pins)
    conditions, changed = replica_conditions(ns, bad_replicas, v.now)
    status = msgspec.structs.replace(status, conditions=conditions)
    if changed:
        actions.append(
            _event(ns, REASON_REPLICAS_TOO_MANY, replicas_message(ns.replicas), warning=True)
        )
    reserving, reserve_note = reservation_actions(v, ref, live, status)
    actions += reserving
    if reserve_note:
        update_note = f"{update_note}; {reserve_note}" if update_note else reserve_note
    parting, part_note = partition_actions(v, ref, live)
    actions += parting
    if part_note:
        update_note = f"{update_note}; {part_note}" if update_note else part_note
    if status != ns.status:
        old = ns.status
        if ns.revision_hash and (
            status.node_set_hash != old.node_set_hash
            or status.updated_replicas != old.updated_replicas
            or status.replicas != old.replicas
        ):
            # The revision is recorded before the status names it, and the history is
            # pruned when the pods' revisions may have changed (rule 10).
            live_revisions = tuple(sorted({r for p in v.pods if (r := revision_of(p))}))
            actions.append(
                EnsureNodeSetRevision(
                    nodeset=ref, revision_hash=ns.revision_hash, live=live_revisions
                )
            )
        actions.append(SetNodeSetStatus(nodeset=ref, status=status))
    if (
        ns.min_ready_seconds > 0
        and status.ready_replicas != status.available_replicas
        and status.ready_replicas
    ):
        # Look again when the next ready pod becomes available (nodeset_sync_status.go
        # resyncs after minReadySeconds for the same reason).
        due = min(
            p.ready_since + ns.min_ready_seconds - v.now
            for p in live
            if p.ready and not is_available(p, ns.min_ready_seconds, v.now)
        )
        requeue = max(0.1, due) if requeue is None else min(requeue, max(0.1, due))
    return Decision(
        actions=tuple(actions),
        requeue_after=requeue,
        reason=f"{len(live)} live pod(s), {want} wanted"
        + (
            f"; spec.replicas {ns.replicas} is above {MAX_REPLICAS}: held at the live pods"
            if bad_replicas
            else ""
        )
        + (f"; {daemon_note}" if daemon_note else "")
        + (f"; {prune_note}" if prune_note else "")
        + (f"; {update_note}" if update_note else "")
        + "".join(f"; {why}" for why in cordons),
    )


def failure_key(p: KubePod) -> str:
    """The name pod ``p``'s failures are counted under (rules 5 and 12): its own name (the
    ordinal's), or for a DaemonSet-mode pod ``node/<its node>``."""
    if _daemon.mode_of(p) == _daemon.DAEMONSET:
        return f"node/{_daemon.target_node(p) or p.name}"
    return p.name


def _daemon_pods(
    v: View, live: list[KubePod], ref: NodeSetRef, actions: list[AnyAction]
) -> tuple[int, list[KubePod], str, float | None]:
    """DaemonSet mode (rule 12): append the creations (and their ``ScalingUp`` Event) to
    ``actions``; return ``(desired, pods to condemn, note, seconds until a node's back-off
    ends or None)``. ``desired`` counts the nodes the template may run on
    (nodeset_sync_status.go, DaemonSet mode)."""
    ns = v.nodeset
    assert ns is not None
    on_node = _daemon.by_node(live)
    # A node whose pod ended or is terminating gets its new pod once that one is gone from
    # the log (1.x: such a pod still "exists" on its node, getNodesToDaemonPods).
    ending = _daemon.by_node(
        p for p in v.pods if (p.terminal or p.deleting) and _daemon.mode_of(p) == _daemon.DAEMONSET
    )
    failures = failures_of(ns)
    desired = 0
    creates: list[CreateNodeSetPod] = []
    gone: list[KubePod] = []
    held: list[str] = []
    wait: float | None = None
    for name, node in sorted(v.kube_nodes.items()):
        run, keep = _daemon.should_run(ns, node)
        desired += run
        pods = on_node.get(name, [])
        if run and not pods:
            count, at, _ = failures.get(f"node/{name}", (0, 0, ""))
            left = at + backoff_s(count) - v.now
            if ending.get(name):
                held.append(name)
                continue
            if count and left > 0 and v.now - at < FORGET_FAILURE_S:
                held.append(name)
                wait = left if wait is None else min(wait, left)
                continue
            creates.append(
                CreateNodeSetPod(
                    nodeset=ref,
                    pod_name="",
                    ordinal=-1,
                    node=name,
                    hostname=_daemon.hostname(node),
                )
            )
        elif not keep and pods:
            gone += pods
        elif pods:
            hostname = _daemon.hostname(node)
            gone += [p for p in pods if p.labels.get(wellknown.LABEL_POD_HOSTNAME) != hostname]
    if not v.nodes_listed:
        # Without the complete node listing an unseen node may be eligible or not: wait.
        return desired, [], "waiting for the Kubernetes node listing", None
    if creates:
        actions += creates
        actions.append(
            _event(
                ns,
                "ScalingUp",
                f"Creating {len(creates)} daemon pod(s) on {', '.join(c.node for c in creates)}",
            )
        )
    note = f"{desired} eligible node(s)"
    if held:
        note += f"; {', '.join(held)} waiting for a pod to go or a failed pod's back-off"
    return desired, gone, note, wait


def _condemn(
    v: View,
    pods: list[KubePod],
    actions: list[AnyAction],
    scaled_from: NodeSetRef | None = None,
) -> list[str]:
    """Drain-before-delete for ``pods`` (rules 2 and 11): append the drains and deletes to
    ``actions``; return the names still waiting for their node to drain. ``scaled_from``:
    the pods are condemned by a scale-in of that NodeSet (rule 18: the deletes carry it)."""
    waiting = []
    for p in pods:
        node = v.slurm.get(p.name)
        if node is not None and not node.has("DRAIN"):
            actions.append(
                DrainSlurmNode(
                    cluster=v.cluster,
                    node=node.key,
                    reason=wellknown.scale_in_drain_reason(p.namespace, p.name),
                )
            )
            if is_busy(node):
                waiting.append(p.name)
            else:
                # Idle now: delete right after the drain instead of a poll later; the
                # effector re-reads the node and deletes only if it is DRAIN and idle.
                actions.append(
                    DeleteNodeSetPod(
                        pod=_ref(p),
                        cluster=v.cluster,
                        slurm_node=_daemon.slurm_name(p),
                        scaled_from=scaled_from,
                    )
                )
        elif (
            is_busy(node)
            or (node is not None and node.has("UNDRAIN"))
            or (node is None and not v.slurm_listed)
        ):
            # Deleted only when drained (DRAIN, not UNDRAIN: an undrain under way must not
            # be raced) and idle. No node in a current listing: unknown to Slurm,
            # deletable; with no listing at all, its node may be running a job.
            waiting.append(p.name)
        else:
            actions.append(
                DeleteNodeSetPod(
                    pod=_ref(p),
                    cluster=v.cluster,
                    slurm_node=_daemon.slurm_name(p),
                    scaled_from=scaled_from,
                )
            )
    if scaled_from is not None:
        # slurm-operator marks a pod condemned by a scale-in (makePodCordonAndDrain); one
        # deleted in this very decision is not marked first.
        actions.extend(
            _slurmd.cordon_mark(p, True) for p in pods if p.name in waiting and not _cordoned(p)
        )
    return waiting


def _draining_for_us(p: KubePod, slurm: dict[str, SlurmNode]) -> bool:
    """The pod's Slurm node carries our pending-termination drain: it was condemned."""
    node = slurm.get(p.name)
    return (
        node is not None
        and node.has("DRAIN")
        and node.reason == wellknown.scale_in_drain_reason(p.namespace, p.name)
    )


def update_pods(
    v: View, live: list[KubePod], deadlines: dict[str, int] | None, want: int | None = None
) -> tuple[list[KubePod], str, float | None]:
    """The old-revision pods to replace now (rule 11): ``(pods, note, recheck in s)``.

    RollingUpdate, as slurm-operator nodeset_sync.go ``syncRollingUpdate`` and
    ``splitUpdatePods``: every unhealthy old pod (not Running and Ready), then healthy old
    pods within the budget ``maxUnavailable − unavailable``, where unavailable counts the
    replica slots with no live pod and the new pods not yet available (Ready for
    ``minReadySeconds``). Healthy old pods are taken in the scale-in order
    (:func:`active_pods_key`), except that those whose Slurm node already carries our
    pending-termination drain come first: slurmbridge marks a condemned pod by that drain
    (slurm-operator by ``pod-cordon``, also first in its order), so a pod whose jobs are
    draining stays the one being replaced and its budget is not spent twice.
    OnDelete: nothing (a deleted pod is re-created at the new revision by rule 1).
    ScheduledUpdate: every unhealthy old pod and the old pods whose Slurm node is
    MAINTENANCE in reservation ``SlurmOperatorMaint-<nodeset>`` (rule 17), no budget.
    """
    ns = v.nodeset
    assert ns is not None
    if not ns.revision_hash:
        return [], "", None
    if ns.update_strategy == "OnDelete":
        return [], "", None
    if ns.update_strategy == "ScheduledUpdate":
        old = [p for p in live if revision_of(p) != ns.revision_hash]
        name = reservation_name(ns)
        chosen = [p for p in old if not _healthy(p) or _under_reservation(p, v.slurm, name)]
        note = (
            f"scheduled update: {len(old)} old pod(s), {len(chosen)} unhealthy or under "
            f"reservation {name}"
            if old
            else ""
        )
        return chosen, note, None
    new = [p for p in live if revision_of(p) == ns.revision_hash]
    old = [p for p in live if revision_of(p) != ns.revision_hash]
    if not old:
        return [], "", None
    unhealthy = [p for p in old if not _healthy(p)]
    healthy = [p for p in old if _healthy(p)]
    total = max(0, ns.replicas) if want is None else want
    missing = min(total, max(0, total - len(new) - len(old)))
    not_available = [p for p in new if not is_available(p, ns.min_ready_seconds, v.now)]
    budget_max = max_unavailable(ns.max_unavailable, total)
    budget = max(0, min(budget_max - missing - len(not_available), budget_max))
    ordered = sorted(
        healthy,
        key=lambda p: (
            not _draining_for_us(p, v.slurm),
            active_pods_key(p, ns.name, v.slurm, deadlines),
        ),
    )
    chosen = unhealthy + ordered[:budget]
    note = (
        f"rolling update: {len(new)} pod(s) at {ns.revision_hash}, {len(old)} old, "
        f"maxUnavailable {budget_max}, {missing + len(not_available)} unavailable"
    )
    wait_s = None
    if not_available and ns.min_ready_seconds > 0:
        wait_s = max(0.1, min(p.ready_since + ns.min_ready_seconds - v.now for p in not_available))
    return chosen, note, wait_s


def reservation_name(ns: KubeNodeSet) -> str:
    """``SlurmOperatorMaint-<nodeset>`` (slurmcontrol.go)."""
    return RESERVATION_PREFIX + ns.name


def _under_reservation(p: KubePod, slurm: dict[str, SlurmNode], name: str) -> bool:
    # slurmcontrol.go GetPodsUnderReservation: MAINTENANCE and in *our* reservation (another
    # MAINT reservation, an administrator's, replaces nothing).
    node = slurm.get(p.name)
    return node is not None and node.has("MAINTENANCE") and node.reservation == name


def reservation_flags(ns: KubeNodeSet) -> tuple[str, ...]:
    """``IGNORE_JOBS``, ``MAINT`` and the spec's flags, upper case, sorted, once each
    (slurmcontrol.go ``parseReservationFlags``)."""
    return tuple(sorted(set(RESERVATION_FLAGS) | {f.upper() for f in ns.scheduled_flags}))


def reservation_actions(
    v: View, ref: NodeSetRef, live: list[KubePod], status: NodeSetStatus
) -> tuple[list[AnyAction], str]:
    """Rule 17: the reservation to ensure or delete, and a note (``""`` none)."""
    ns = v.nodeset
    assert ns is not None
    name = reservation_name(ns)
    stamped = ns.annotations.get(wellknown.ANNOTATION_NODESET_RESERVATION, "")
    scheduled = ns.update_strategy == "ScheduledUpdate"
    if not scheduled or ns.replicas <= 0:
        if stamped:
            return [DeleteSlurmReservation(nodeset=ref, cluster=v.cluster, name=name)], (
                f"deleting reservation {name}"
            )
        return [], ""
    if status.slurm_idle + status.slurm_allocated <= 0:
        return [], f"reservation {name} waits for an idle or allocated Slurm node"
    if ns.scheduled_start <= 0:
        return [], "scheduledUpdate.startTime is unset or unreadable: no reservation"
    minutes = max(0, ns.scheduled_duration_s) // 60
    flags = reservation_flags(ns)
    nodes = tuple(sorted(p.name for p in live if p.name in v.slurm))
    stamp = f"{ns.scheduled_start} {minutes} {','.join(flags)} {','.join(nodes)}"
    if stamp == stamped:
        return [], ""
    if v.now >= ns.scheduled_start + minutes * 60:
        return [], f"the scheduledUpdate window of {name} has ended"
    if not stamped and v.now >= ns.scheduled_start and "FORCE_START" not in flags:
        return [], f"scheduledUpdate.startTime passed before {name} was created (no FORCE_START)"
    ensure = EnsureSlurmReservation(
        nodeset=ref,
        cluster=v.cluster,
        name=name,
        nodes=nodes,
        start_time=ns.scheduled_start,
        duration_minutes=minutes,
        flags=flags,
        stamp=stamp,
    )
    return [ensure], f"ensuring reservation {name} on {len(nodes)} node(s)"


def finalize(v: View, gone: KubeNodeSet) -> Decision:
    """Rule 20: a NodeSet being deleted (it has finalizers: ours while a stamp is present)
    first loses the Slurm partition and reservation slurmbridge made for it (their stamps),
    each effect removing its stamp and, with the last one, the finalizer; a finalizer of
    ours without a stamp (a crash between two writes) is released."""
    ref = NodeSetRef(namespace=gone.namespace, name=gone.name, uid=gone.uid)
    actions: list[AnyAction] = []
    names: list[str] = []
    if wellknown.ANNOTATION_NODESET_PARTITION in gone.annotations:
        actions.append(DeleteSlurmPartition(nodeset=ref, cluster=v.cluster, name=gone.name))
        names.append(f"partition {gone.name}")
    if wellknown.ANNOTATION_NODESET_RESERVATION in gone.annotations:
        name = reservation_name(gone)
        actions.append(DeleteSlurmReservation(nodeset=ref, cluster=v.cluster, name=name))
        names.append(f"reservation {name}")
    if actions:
        return Decision(
            actions=tuple(actions),
            reason=f"NodeSet is being deleted: deleting {' and '.join(names)}",
        )
    if wellknown.FINALIZER_NODESET_SLURM in gone.finalizers:
        return Decision(
            actions=(ReleaseNodeSetFinalizer(nodeset=ref),),
            reason="NodeSet is being deleted: nothing of ours left in Slurm; finalizer released",
        )
    return Decision(reason="NodeSet is being deleted (its pods go with it: owner references)")


def partition_actions(v: View, ref: NodeSetRef, live: list[KubePod]) -> tuple[list[AnyAction], str]:
    """Rule 19: the NodeSet's partition to ensure or delete, and a note (``""`` none).

    Ensured (``enabled``, complete Slurm listing) as partition ``<nodeset>`` on the Slurm
    nodes (hostnames) of the live pods that Slurm lists, sorted, with the parsed ``config``
    (:func:`schemas.partitionconf.parse`), when that differs from the stamp, or Slurm lists
    the partition with other nodes or not at all; each ignored config word gets a Warning
    Event with the ensure. A partition of that name that Slurm lists while the NodeSet has no
    stamp is someone else's: left alone, with a Warning. Deleted when disabled and stamped.
    """
    ns = v.nodeset
    assert ns is not None
    stamped = ns.annotations.get(wellknown.ANNOTATION_NODESET_PARTITION)
    if not ns.partition_enabled:
        if stamped is not None:
            return [DeleteSlurmPartition(nodeset=ref, cluster=v.cluster, name=ns.name)], (
                f"deleting partition {ns.name}"
            )
        return [], ""
    if not v.slurm_listed:
        return [], f"partition {ns.name} waits for a complete Slurm listing"
    if stamped is None and v.partition is not None:
        why = (
            f"Slurm partition {ns.name} exists and was not made by slurmbridge (no "
            "nodeset.slurmbridge.dev/partition stamp); it is left alone"
        )
        # One Warning per generation of the spec, not one per reconcile of the NodeSet.
        warn = _event(ns, "PartitionNotOurs", f"spec.partition: {why}", warning=True)
        return [msgspec.structs.replace(warn, once=f"partition-not-ours.g{ns.generation}")], why
    settings, problems = partitionconf.parse(ns.partition_config)
    nodes = tuple(sorted(_daemon.slurm_name(p) for p in live if p.name in v.slurm))
    stamp = " ".join([",".join(nodes), *(f"{k}={val}" for k, val in settings)])
    in_slurm = v.partition is not None and set(v.partition.nodes) == set(nodes)
    if stamp == stamped and in_slurm:
        return [], ""
    out: list[AnyAction] = [
        EnsureSlurmPartition(
            nodeset=ref,
            cluster=v.cluster,
            name=ns.name,
            nodes=nodes,
            settings=settings,
            stamp=stamp,
        )
    ]
    out += [
        _event(
            ns,
            "PartitionConfigIgnored",
            f"spec.partition.config: {word} {why}; partition {ns.name} is made without it",
            warning=True,
        )
        for word, why in problems
    ]
    return out, f"ensuring partition {ns.name} on {len(nodes)} node(s)"


def deadline_actions(live: list[KubePod], deadlines: dict[str, int]) -> list[AnyAction]:
    """Keep each live pod's ``pod-deadline`` annotation equal to its Slurm node's job
    deadline, removed when it runs nothing (rule 9)."""
    out: list[AnyAction] = []
    for p in live:
        end = deadlines.get(p.name)
        want = format_deadline(end) if end else None
        if p.annotations.get(wellknown.ANNOTATION_POD_DEADLINE) != want:
            out.append(
                SetPodAnnotation(
                    pod=_ref(p), annotation=wellknown.ANNOTATION_POD_DEADLINE, value=want
                )
            )
    return out


def view(store: Store, key: str, ctx: Context) -> View | None:
    """The NodeSet, its pods (by the instance label, in its namespace) and their nodes."""
    ns = store.get(KubeNodeSet, key, KUBE_SOURCE)
    namespace, _, name = key.partition("/")
    pods = tuple(
        sorted(
            (
                p
                for p in store.by_label(KubePod, LABEL_INSTANCE, name)
                if p.namespace == namespace and p.labels.get(LABEL_NAME) == SLURMD
            ),
            key=lambda p: p.name,
        )
    )
    cluster = (ns.cluster_name if ns is not None else "") or ctx.cluster
    source = slurm_source(cluster)
    # Keyed by pod name: a DaemonSet pod's Slurm node has its hostname (_daemon.slurm_name).
    slurm = {
        p.name: n
        for p in pods
        if (n := store.get(SlurmNode, _daemon.slurm_name(p), source)) is not None
    }
    if ns is not None and (ns.scaling_mode == _daemon.DAEMONSET or ns.pin_to_node):
        # DaemonSet mode and pins read every node (rules 12 and 14).
        kube_nodes = {k.key: k for k in store.values(KubeNode, KUBE_SOURCE)}
    else:
        kube_nodes = {
            p.node_name: k
            for p in pods
            if p.node_name and (k := store.get(KubeNode, p.node_name, KUBE_SOURCE)) is not None
        }
    # Only RUNNING jobs end a deadline: read them through the projection's index on
    # ``base_state`` (bounded by the nodes), not every job of the cluster — pending jobs can be
    # 100,000 (bench/scale.py) and this runs on every NodeSet reconcile.
    names = {_daemon.slurm_name(p): p.name for p in pods}
    running = (j for j in store.by_field(SlurmJob, "base_state", "RUNNING") if j.source == source)
    deadlines = (
        {names[n]: end for n, end in node_deadlines(running, set(names)).items()} if pods else {}
    )
    records: tuple[SlurmNode, ...] = ()
    record_pods: set[str] = set()
    if (
        ns is not None
        and ns.scaling_mode == "DaemonSet"
        and ns.prune_slurm_node_records == _ident.PRUNE_NODE_NOT_FOUND
        and ns.uid
    ):
        # O(nodes of the cluster), only for NodeSets that prune: no index maps a comment
        # to its nodes. The uid test first keeps the JSON parsing to this NodeSet's records.
        records = tuple(
            sorted(
                (
                    n
                    for n in store.values(SlurmNode, source)
                    if ns.uid in n.comment and _ident.is_record_of(n, ns) is not None
                ),
                key=lambda n: n.key,
            )
        )
        for n in records:
            info = _ident.is_record_of(n, ns)
            assert info is not None
            pod_key = f"{info.namespace}/{info.pod_name}"
            if store.get(KubePod, pod_key, KUBE_SOURCE) is not None:
                record_pods.add(pod_key)
            if info.node and (k := store.get(KubeNode, info.node, KUBE_SOURCE)) is not None:
                kube_nodes[info.node] = k
    return View(
        nodeset=ns,
        pods=pods,
        slurm=slurm,
        cluster=cluster,
        served=is_served(store, cluster, ctx),
        now=ctx.now,
        slurm_listed=slurm_listed(store, cluster),
        kube_nodes=kube_nodes,
        propagated_node_conditions=ctx.propagated_node_conditions,
        nodes_listed=kube_listed(store, NODES_LISTING),
        deadlines=deadlines,
        records=records,
        record_pods=frozenset(record_pods),
        pods_listed=kube_listed(store, PODS_LISTING),
        partition=store.get(SlurmPartition, ns.name, source) if ns is not None else None,
    )


def is_served(store: Store, cluster: str, ctx: Context) -> bool:
    """The static cluster, or one a served Cluster object names."""
    return cluster == ctx.cluster or cluster in cluster_rules.served(store, ctx)


def _itself(event: KubeNodeSet, _store: Store, _ctx: Context) -> Iterable[str]:
    return [event.key]


def _served_by(event: SlurmCluster, store: Store, ctx: Context) -> Iterable[str]:
    """The NodeSets of the Cluster's name (serving it may have started or stopped)."""
    return sorted(
        n.key
        for n in store.values(KubeNodeSet, KUBE_SOURCE)
        if n.cluster_name == event.name and n.cluster_name != ctx.cluster
    )


def _of_slurmd_pod(event: KubePod, _store: Store, _ctx: Context) -> Iterable[str]:
    """A slurmd pod's NodeSet."""
    instance = event.labels.get(LABEL_INSTANCE)
    if event.labels.get(LABEL_NAME) == SLURMD and instance:
        return [f"{event.namespace}/{instance}"]
    return []


def _of_slurm_node(event: SlurmNode, store: Store, ctx: Context) -> Iterable[str]:
    """The NodeSet of the slurmd pod with the node's name, and the NodeSet its comment's
    PodInfo names (its pod may be gone: rule 13)."""
    keys = _of_slurm_node_name(event.key, event.source, store, ctx)
    info = podinfo.parse(event.comment)
    if info is not None and info.namespace and info.nodeset_name:
        key = f"{info.namespace}/{info.nodeset_name}"
        ns = store.get(KubeNodeSet, key, KUBE_SOURCE)
        if ns is not None and event.source == slurm_source(ns.cluster_name or ctx.cluster):
            keys.add(key)
    return sorted(keys)


def _of_slurm_node_name(name: str, source: str, store: Store, ctx: Context) -> set[str]:
    keys = set()
    named = [*store.by_field(KubePod, "name", name)]
    named += store.by_label(KubePod, wellknown.LABEL_POD_HOSTNAME, name)
    for p in named:
        if p.labels.get(LABEL_NAME) != SLURMD or LABEL_INSTANCE not in p.labels:
            continue
        if _daemon.slurm_name(p) != name:
            continue
        key = f"{p.namespace}/{p.labels[LABEL_INSTANCE]}"
        ns = store.get(KubeNodeSet, key, KUBE_SOURCE)
        if ns is None or source == slurm_source(ns.cluster_name or ctx.cluster):
            keys.add(key)
    return keys


def _of_job_nodes(event: SlurmJob, store: Store, ctx: Context) -> Iterable[str]:
    """The NodeSets of the slurmd pods a job runs (or ran) on: its deadline is theirs
    (rule 9)."""
    keys: set[str] = set()
    for name in event.nodes:
        keys.update(_of_slurm_node_name(name, event.source, store, ctx))
    return sorted(keys)


def _of_partition(event: SlurmPartition, store: Store, ctx: Context) -> Iterable[str]:
    """The NodeSets of the partition's name with ``spec.partition`` enabled (rule 19)."""
    return sorted(
        n.key
        for n in store.by_field(KubeNodeSet, "name", event.key)
        if n.partition_enabled and event.source == slurm_source(n.cluster_name or ctx.cluster)
    )


def _on_kube_node(event: KubeNode, store: Store, _ctx: Context) -> Iterable[str]:
    """The NodeSets with a slurmd pod on the node (its cordon, annotations or conditions
    may have changed: slurm-operator eventhandler/eventhandler_node.go), and every
    DaemonSet-mode or pinToNode NodeSet (the node may have become eligible or not: rules 12
    and 14)."""
    keys = {
        n.key
        for n in store.values(KubeNodeSet, KUBE_SOURCE)
        if n.scaling_mode == _daemon.DAEMONSET or n.pin_to_node
    }
    for p in store.by_field(KubePod, "node_name", event.key):
        instance = p.labels.get(LABEL_INSTANCE)
        if p.labels.get(LABEL_NAME) == SLURMD and instance:
            keys.add(f"{p.namespace}/{instance}")
    return sorted(keys)


def all_keys(store: Store, ctx: Context) -> Iterable[str]:
    """Every NodeSet."""
    del ctx
    return [n.key for n in store.values(KubeNodeSet, KUBE_SOURCE)]


SPEC = ReconcilerSpec(
    name=NAME,
    keys={
        KubeNodeSet: _itself,
        KubePod: _of_slurmd_pod,
        SlurmNode: _of_slurm_node,
        SlurmJob: _of_job_nodes,
        SlurmPartition: _of_partition,
        SlurmCluster: _served_by,
        KubeNode: _on_kube_node,
    },
    key_kind="KubeNodeSet",
    all_keys=all_keys,
    view=view,
    decide=decide,
    description="Slinky NodeSets: slurmd pods scaled out, drained before deletion on scale-in",
)
