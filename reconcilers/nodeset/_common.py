"""What the NodeSet rules share: constants, the :class:`View`, the :class:`NodeSetPlan` the steps
write into, and small helpers (an Event on the NodeSet, the default pod selector).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import msgspec

from reconcilers._steps import Plan, Stop
from schemas import wellknown
from schemas.actions import (
    NodeSetRef,
    RecordEvent,
)
from schemas.events import (
    KubeNode,
    KubeNodeSet,
    KubePod,
    NodeSetStatus,
    SlurmNode,
    SlurmPartition,
)

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


#: The Slurm node states that make a NodeSet pod's node busy: the one set,
#: :data:`schemas.wellknown.SLURM_BUSY_STATES` (slurm-operator ``IsNodeBusy``), kept under
#: this name because :mod:`reconcilers.nodeset` exports it.
BUSY: Final = wellknown.SLURM_BUSY_STATES


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
    #: node running nothing is absent) — :func:`reconcilers.nodeset.order.node_deadlines` (rule 9).
    deadlines: dict[str, int] = {}
    #: Rule 19: the cluster's Slurm partition named as the NodeSet (None: Slurm lists none).
    partition: SlurmPartition | None = None


@dataclass(slots=True, kw_only=True)
class NodeSetPlan(Plan):
    """The accumulator the NodeSet steps (:data:`reconcilers.nodeset.STEPS`) write into: a
    :class:`reconcilers._steps.Plan` (actions, notes, the earliest requeue) plus what one
    rule works out and a later one reads.

    ``live``: the pods of the NodeSet's scaling mode neither terminal nor being deleted, by
    name; ``other_mode``: live pods made for the other mode (rule 13); ``want``: the pods
    wanted (``replicas``; the live count under rule 21; the eligible nodes in DaemonSet
    mode); ``failures``: :func:`reconcilers.nodeset.scale.failures_of`; ``deadlines``: the
    Slurm nodes' job deadlines by pod name with a complete Slurm listing, else None (rule 9);
    ``pins``: ``status.ordinalToNode`` to write (None: keep it); ``daemon_gone``: DaemonSet
    pods to remove; ``condemned``: the pods a scale-in or update replaces in this decision;
    ``status``: the status computed for this decision; ``pod_notes``: per-pod sentences
    (cordons, topology) told after every other note, as the reason always read.
    """

    ns: KubeNodeSet
    ref: NodeSetRef
    daemon: bool
    live: list[KubePod]
    other_mode: list[KubePod]
    want: int
    failures: dict[str, tuple[int, int, str]]
    deadlines: dict[str, int] | None
    bad_replicas: bool = False
    pins: dict[str, str] | None = None
    daemon_gone: list[KubePod] = field(default_factory=list)
    condemned: list[KubePod] = field(default_factory=list)
    status: NodeSetStatus | None = None
    pod_notes: list[str] = field(default_factory=list)


#: One NodeSet rule over the plan and the view (:data:`reconcilers._steps.Step`).
NodeSetStep = Callable[[NodeSetPlan, View], Stop | None]


def is_busy(node: SlurmNode | None) -> bool:
    """The node runs something: ALLOCATED, MIXED or COMPLETING
    (:func:`schemas.wellknown.slurm_busy`, slurm-operator ``IsNodeBusy``); False for no node."""
    return node is not None and wellknown.slurm_busy(node.state)


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


def _selector(ns: KubeNodeSet) -> dict[str, str]:
    return ns.selector or {LABEL_NAME: SLURMD, LABEL_INSTANCE: ns.name}
