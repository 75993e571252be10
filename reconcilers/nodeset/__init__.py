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
   an unresponsive node's (rules and sources in :mod:`reconcilers.nodeset._slurmd`). This
   supersedes rule 3's narrower undrain (it undrains any ``slurm-operator: `` reason).
8. **Slurm state on the pods.** Every live pod carries ``SlurmNodeState<State>``
   conditions mirroring its Slurm node, with Slurm's reason as message, written only when
   they change (:mod:`reconcilers.nodeset._slurmd`).

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
    :class:`~schemas.actions.EnsureNodeSetRevision` records the ControllerRevision and prunes
    the history to ``revisionHistoryLimit``, just before the status write. Status gains
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
12. **DaemonSet mode** (``scalingMode: DaemonSet``; rules in :mod:`reconcilers.nodeset._daemon`,
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
    :func:`reconcilers.nodeset._daemon.pins` computes it, and a re-created ordinal with a pin is
    created with that node as required node affinity (utils.go ``pinPodToNode``).
15. **Identity** (:mod:`reconcilers.nodeset._ident` rules 1–4): each healthy pod's Slurm node
    comment holds its PodInfo; the Kubernetes node's ``features.slinky.slurm.net/spec``
    and ``topology.slinky.slurm.net/spec`` annotations become the Slurm node's ``k8s/``
    features and topology; a healthy, available pod whose Slurm node never registered is
    deleted (and re-created by rule 1) with a Warning ``SlurmNodeNotRegistered``.
16. **Pruning records** (:mod:`reconcilers.nodeset._ident` rule 5): ``pruneSlurmNodeRecords:
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
    :class:`~schemas.actions.KeepNodeSetPodClaims`: its claims are owned as a kept pod's —
    never by the pod.

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
    ScheduledUpdate reservation stamp gets :class:`~schemas.actions.DeleteSlurmPartition` /
    :class:`~schemas.actions.DeleteSlurmReservation` (each effect removes its stamp and, with
    the last, the finalizer); our finalizer without a stamp is released
    (:class:`~schemas.actions.ReleaseNodeSetFinalizer`).
    Nothing else is decided for a NodeSet being deleted (its pods go with it).

21. **Bounded replicas.** ``replicas`` above :data:`MAX_REPLICAS` (the CRD's ``maximum``;
    only a NodeSet stored under an older CRD, or with validation bypassed, can hold it) is
    not acted on: the set is held at its live pods (no scale-out, no scale-in), the status
    carries condition ``ReplicaFailure`` (True, reason ``ReplicasAboveMaximum``, the field
    and the bound in the message) and a Warning Event says the same once; the other rules
    go on. Fixing ``replicas`` removes the condition.

Not yet: in DaemonSet mode the failed-pod back-off (rule 5), the removal of duplicate pods on one
node and the re-creation on a hostname-override change.

Layout. :func:`decide` runs :data:`STEPS`, one function per rule group, over one
:class:`NodeSetPlan` (:mod:`reconcilers._steps`: actions in order, notes, the earliest
requeue merged in :meth:`reconcilers._steps.Plan.requeue` only), in the order slurm-operator's
``internal/controller/nodeset/nodeset_sync.go`` ``sync`` calls its own: scale
(:mod:`.scale`: ``syncNodeSetPods``), update (:mod:`.update`: ``syncUpdate``), the pods
(:mod:`.pods`: ``syncCordon``, ``syncSlurmNodes``, ``syncSlurmDeadline``), status
(:mod:`.status`: nodeset_sync_status.go ``syncStatus``), reservation (:mod:`.reservation`:
``syncSlurmReservation``), partition (:mod:`.partition`). The scale-in order is
:mod:`.order` (utils/sort.go); the view and event keys :mod:`._view`; DaemonSet rules
:mod:`._daemon`, Slurm node identity :mod:`._ident`, cordon and state conditions
:mod:`._slurmd`.
"""

from __future__ import annotations

from typing import Final

from reconcilers._steps import Step, run
from reconcilers.base import Decision, ReconcilerSpec
from reconcilers.nodeset import (
    _daemon,
    _ident,
    _slurmd,
    order,
    partition,
    pods,
    reservation,
    scale,
    status,
    update,
)
from reconcilers.nodeset._common import (
    API_VERSION,
    BACKOFF_BASE_S,
    BACKOFF_MAX_S,
    BURST_REPLICAS,
    BUSY,
    CONDITION_REPLICA_FAILURE,
    DEFAULT_MAX_UNAVAILABLE,
    DRAIN_RECHECK_S,
    EVENT_MESSAGE_LIMIT,
    FORGET_FAILURE_S,
    INFINITE_S,
    LABEL_INSTANCE,
    LABEL_NAME,
    MAX_REPLICAS,
    NAME,
    NODES_LISTING,
    NOT_RUNNING_EVENTS,
    PODS_LISTING,
    REASON_POD_NOT_RUNNING,
    REASON_REPLICAS_TOO_MANY,
    RESERVATION_FLAGS,
    RESERVATION_PREFIX,
    SLOW_START_INITIAL,
    SLURMD,
    NodeSetPlan,
    NodeSetStep,
    View,
    is_busy,
)
from reconcilers.nodeset._view import (
    _itself,
    _of_job_nodes,
    _of_partition,
    _of_slurm_node,
    _of_slurmd_pod,
    _on_kube_node,
    _served_by,
    all_keys,
    is_served,
    view,
)
from reconcilers.nodeset.finalize import (
    finalize,
)
from reconcilers.nodeset.order import (
    active_pods_key,
    format_deadline,
    lowest_free,
    node_deadlines,
    ordinal_of,
    parse_deadline,
    pod_name,
    scale_in_order,
)
from reconcilers.nodeset.partition import (
    partition_actions,
)
from reconcilers.nodeset.pods import (
    deadline_actions,
    not_running,
)
from reconcilers.nodeset.reservation import (
    reservation_actions,
    reservation_flags,
    reservation_name,
)
from reconcilers.nodeset.scale import (
    backoff_s,
    failure_key,
    failures_of,
    slow_start_batch,
)
from reconcilers.nodeset.status import (
    is_available,
    replica_conditions,
    replicas_message,
    revision_of,
)
from reconcilers.nodeset.update import (
    max_unavailable,
    update_pods,
)
from schemas.actions import NodeSetRef
from schemas.events import (
    KubeNode,
    KubeNodeSet,
    KubePod,
    SlurmCluster,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
)

#: The NodeSet rules in the order they run (each names the slurm-operator function it
#: follows). None returns STOP: every rule adds to the one decision.
STEPS: Final[tuple[Step[NodeSetPlan, View], ...]] = (
    scale.hold_replicas,
    scale.sync_daemon_pods,
    scale.pin_ordinals,
    scale.sync_failed_pods,
    scale.scale_out,
    scale.scale_in,
    update.sync_update,
    pods.sync_pods,
    pods.sync_deadlines,
    status.calculate_status,
    reservation.sync_reservation,
    partition.sync_partition,
    status.sync_status,
)


def _plan(v: View, ns: KubeNodeSet) -> NodeSetPlan:
    """The accumulator for one decision: the live pods of the NodeSet's mode and the
    others (rule 13), ``want`` = ``replicas``, the failures and, with a complete Slurm
    listing, the deadlines."""
    running = [p for p in v.pods if not p.deleting and not p.terminal]
    return NodeSetPlan(
        ns=ns,
        ref=NodeSetRef(namespace=ns.namespace, name=ns.name, uid=ns.uid),
        daemon=ns.scaling_mode == _daemon.DAEMONSET,
        live=[p for p in running if _daemon.mode_of(p) == ns.scaling_mode],
        other_mode=[p for p in running if _daemon.mode_of(p) != ns.scaling_mode],
        want=max(0, ns.replicas),
        failures=failures_of(ns),
        deadlines=v.deadlines if v.slurm_listed else None,
    )


def decide(v: View | None) -> Decision:
    """Scale-out, drain-before-delete scale-in, reversal, protection, status (module doc):
    a NodeSet that is gone, not served, being deleted (:func:`finalize`) or of an unknown
    scaling mode is answered at once; any other runs :data:`STEPS`."""
    if v is None or v.nodeset is None:
        return Decision(reason="no NodeSet (its pods go with it: owner references)")
    ns = v.nodeset
    if not v.served:
        return Decision(reason=f"Slurm cluster {ns.cluster_name!r} is not served here")
    if ns.deleting:
        return finalize(v, ns)
    if ns.scaling_mode not in (_daemon.STATEFULSET, _daemon.DAEMONSET):
        return Decision(reason=f"scalingMode {ns.scaling_mode} is unknown; left alone")
    return run(STEPS, _plan(v, ns), v)


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


__all__ = [
    "API_VERSION",
    "BACKOFF_BASE_S",
    "BACKOFF_MAX_S",
    "BURST_REPLICAS",
    "BUSY",
    "CONDITION_REPLICA_FAILURE",
    "DEFAULT_MAX_UNAVAILABLE",
    "DRAIN_RECHECK_S",
    "EVENT_MESSAGE_LIMIT",
    "FORGET_FAILURE_S",
    "INFINITE_S",
    "LABEL_INSTANCE",
    "LABEL_NAME",
    "MAX_REPLICAS",
    "NAME",
    "NODES_LISTING",
    "NOT_RUNNING_EVENTS",
    "PODS_LISTING",
    "REASON_POD_NOT_RUNNING",
    "REASON_REPLICAS_TOO_MANY",
    "RESERVATION_FLAGS",
    "RESERVATION_PREFIX",
    "SLOW_START_INITIAL",
    "SLURMD",
    "SPEC",
    "STEPS",
    "NodeSetPlan",
    "NodeSetStep",
    "View",
    "_daemon",
    "_ident",
    "_slurmd",
    "active_pods_key",
    "all_keys",
    "backoff_s",
    "deadline_actions",
    "decide",
    "failure_key",
    "failures_of",
    "finalize",
    "format_deadline",
    "is_available",
    "is_busy",
    "is_served",
    "lowest_free",
    "max_unavailable",
    "node_deadlines",
    "not_running",
    "order",
    "ordinal_of",
    "parse_deadline",
    "partition",
    "partition_actions",
    "pod_name",
    "pods",
    "replica_conditions",
    "replicas_message",
    "reservation",
    "reservation_actions",
    "reservation_flags",
    "reservation_name",
    "revision_of",
    "scale",
    "scale_in_order",
    "slow_start_batch",
    "status",
    "update",
    "update_pods",
    "view",
]
