"""A test-side model of the world the effectors change, for the reconciler properties.

:class:`World` holds the latest observation of every object (what the projection would hold
once the producers have seen an effect) and applies each action kind the way its effector in
``slurmbridge/effectors.py`` does — the same preconditions, the same no-ops — returning
whether the observed state changed. A reconciler's decision can then be applied and decided
again, as the runtime does once the log has caught up with the effects.

Deliberately not modelled (nothing any reconciler reads):

* Kubernetes Events (``RecordEvent``): best-effort, never observed back;
* the kubelet and the passing of time: a pod deleted while bound stays Terminating, jobs do
  not start or end by themselves, ``now`` stays where the test put it;
* a created Slurm node joining the partitions its features name.

PodDisruptionBudgets (``EnsureNodeSetPDB``) are kept in :attr:`World.pdbs`, and the
ControllerRevisions recorded (``EnsureNodeSetRevision``) in :attr:`World.revisions`: no view
reads them, but creating one is a change.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, ClassVar

import msgspec

from reconcilers.base import Context, ReconcilerSpec
from reconcilers.nodeset import _ident
from schemas import podinfo, wellknown
from schemas.actions import (
    AllocateResourceClaim,
    AnyAction,
    BindPod,
    CancelSlurmJob,
    ClaimRef,
    CreateExtendedResourceClaim,
    CreateNodeSetPod,
    CreateSlurmNode,
    DeleteFailedNodeSetPod,
    DeleteNodeSetPod,
    DeletePod,
    DeleteSlurmNode,
    DeleteSlurmPartition,
    DeleteSlurmReservation,
    DrainSlurmNode,
    EnsureNodeSetPDB,
    EnsureNodeSetRevision,
    EnsureSlurmPartition,
    EnsureSlurmReservation,
    KeepNodeSetPodClaims,
    MarkPods,
    PodRef,
    PruneSlurmNodeRecord,
    RecordEvent,
    ReleaseNodeSetFinalizer,
    ReleaseResourceClaim,
    RemovePodFinalizer,
    ScaleNodeSet,
    SetClusterStatus,
    SetJobExcludedNodes,
    SetNodeCondition,
    SetNodeSetStatus,
    SetPodAnnotation,
    SetPodCondition,
    SetPodGroupScheduled,
    SetPodLabel,
    SetSlurmNodeConditions,
    SetSlurmNodeExtra,
    SetSlurmNodeFeature,
    SetSlurmNodeOwnedFeatures,
    SetSlurmNodePodInfo,
    SubmitSlurmJob,
    TaintNode,
    UndrainSlurmNode,
    UntaintNode,
    UpdateSlurmNodeFeatures,
    UpdateSlurmNodeTopology,
)
from schemas.events import (
    ClaimConsumer,
    Event,
    KubeNode,
    KubeNodeSet,
    KubePod,
    KubeResourceClaim,
    KubeWorkload,
    NodeCondition,
    OwnerRef,
    PodCondition,
    SlurmCluster,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    Taint,
    kind_of,
    workload_key,
)
from schemas.subjects import KUBE_SOURCE, slurm_source
from slurmbridge.devtools.sim.slurmrestd import SimError, _parse_node_conf
from slurmbridge.runtime.projection import Projection

BUSY = ("ALLOCATED", "MIXED", "COMPLETING")
ENDED = wellknown.JOB_ENDED_STATES
#: Grace period the model's API server gives a deleted pod (seconds).
GRACE_S = 30

ObjKey = tuple[str, str, str]


def _replace(ev: Event, **changes: Any) -> Event:
    return msgspec.structs.replace(ev, **changes)


class World:
    """Observed objects by (kind, source, key), and the effects applied to them."""

    def __init__(self, objs: Iterable[Event], now: float) -> None:
        self.objs: dict[ObjKey, Event] = {}
        for ev in objs:
            if not ev.deleted:
                self.objs[(kind_of(ev), ev.source, ev.key)] = ev
        self.now = now
        self.pdbs: set[str] = set()
        self.revisions: set[tuple[str, str]] = set()
        #: Slurm reservations ensured (EnsureSlurmReservation), by name: no view reads them.
        self.reservations: dict[str, EnsureSlurmReservation] = {}
        self._last_id = 90_000

    def __repr__(self) -> str:  # what Hypothesis prints for a failing example
        lines = [f"World(now={self.now}, pdbs={sorted(self.pdbs)}, objs=["]
        lines += [f"    {ev!r}," for ev in self.objs.values()]
        return "\n".join([*lines, "])"])

    def new_id(self) -> int:
        """A fresh Slurm job id / uid number."""
        self._last_id += 1
        return self._last_id

    def copy(self) -> World:
        other = World(self.objs.values(), self.now)
        other.pdbs = set(self.pdbs)
        other.revisions = set(self.revisions)
        other.reservations = dict(self.reservations)
        other._last_id = self._last_id
        return other

    def store(self) -> Projection:
        """A projection holding exactly the current objects."""
        p = Projection()
        for seq, ev in enumerate(self.objs.values(), 1):
            p.apply(ev, seq)
        return p

    def decide(self, spec: ReconcilerSpec, key: str, ctx: Context) -> tuple[AnyAction, ...]:
        return spec.decide(spec.view(self.store(), key, ctx)).actions

    def state(self) -> tuple[dict[ObjKey, Event], frozenset[str]]:
        return dict(self.objs), frozenset(self.pdbs)

    # --- object access -------------------------------------------------------------------

    def _get(self, kind: type[Event], source: str, key: str) -> Any:
        return self.objs.get((str(kind.__struct_config__.tag), source, key))

    def _put(self, ev: Event) -> bool:
        k = (kind_of(ev), ev.source, ev.key)
        if self.objs.get(k) == ev:
            return False
        self.objs[k] = ev
        return True

    def _drop(self, ev: Event) -> bool:
        return self.objs.pop((kind_of(ev), ev.source, ev.key), None) is not None

    def _pod(self, ref: PodRef) -> KubePod | None:
        """The pod ``ref`` names, None when gone or re-created (another uid), as the
        effectors' uid precondition."""
        pod: KubePod | None = self._get(KubePod, KUBE_SOURCE, ref.key)
        if pod is None or (ref.uid and pod.uid != ref.uid):
            return None
        return pod

    def _job(self, cluster: str, job_id: int) -> SlurmJob | None:
        job: SlurmJob | None = self._get(SlurmJob, slurm_source(cluster), str(job_id))
        return job

    # --- effects ---------------------------------------------------------------------------

    def apply(self, action: AnyAction) -> bool:
        """Apply ``action`` as its effector would; True when the observed state changed."""
        return bool(self._handlers[type(action)](self, action))

    def apply_all(self, actions: Iterable[AnyAction]) -> list[AnyAction]:
        """Apply ``actions`` in order; the ones that changed something."""
        return [a for a in actions if self.apply(a)]

    # Each method applies one action kind (the name of the kind in snake case).

    def record_event(self, a: RecordEvent) -> bool:
        del a
        return False

    # Kubernetes nodes

    def taint_node(self, a: TaintNode) -> bool:
        node: KubeNode | None = self._get(KubeNode, KUBE_SOURCE, a.node)
        if node is None:
            return False
        ours = [t for t in node.taints if t.key == a.key and t.effect == a.effect]
        if len(ours) == 1 and ours[0].value == a.value:
            return False
        keep = tuple(t for t in node.taints if not (t.key == a.key and t.effect == a.effect))
        taint = Taint(key=a.key, value=a.value, effect=a.effect)
        return self._put(_replace(node, taints=(*keep, taint)))

    def untaint_node(self, a: UntaintNode) -> bool:
        node: KubeNode | None = self._get(KubeNode, KUBE_SOURCE, a.node)
        if node is None:
            return False
        keep = tuple(t for t in node.taints if not (t.key == a.key and t.effect == a.effect))
        return self._put(_replace(node, taints=keep))

    def set_node_condition(self, a: SetNodeCondition) -> bool:
        node: KubeNode | None = self._get(KubeNode, KUBE_SOURCE, a.node)
        if node is None:
            return False
        cond = NodeCondition(type=a.type, status=a.status, reason=a.reason, message=a.message)
        rest = tuple(c for c in node.conditions if c.type != a.type)
        return self._put(_replace(node, conditions=(*rest, cond)))

    # Slurm nodes

    def _slurm_node(self, cluster: str, name: str) -> SlurmNode | None:
        node: SlurmNode | None = self._get(SlurmNode, slurm_source(cluster), name)
        return node

    def drain_slurm_node(self, a: DrainSlurmNode) -> bool:
        node = self._slurm_node(a.cluster, a.node)
        if node is None or node.has("DRAIN"):
            return False
        return self._put(_replace(node, state=(*node.state, "DRAIN"), reason=a.reason))

    def undrain_slurm_node(self, a: UndrainSlurmNode) -> bool:
        node = self._slurm_node(a.cluster, a.node)
        if node is None or not node.has("DRAIN"):
            return False
        if node.reason and not node.reason.startswith(a.owned_prefixes):
            return False  # skipped: an administrator's drain
        state = tuple(s for s in node.state if s != "DRAIN")
        return self._put(_replace(node, state=state, reason=""))

    def create_slurm_node(self, a: CreateSlurmNode) -> bool:
        if self._slurm_node(a.cluster, a.node) is not None:
            return False  # ESLURM_NODE_ALREADY_EXISTS
        try:
            names, conf = _parse_node_conf(a.node_conf)
        except SimError:
            return False  # rejected by slurmctld: nothing created
        changed = False
        for name in names:
            features = tuple(f.strip() for f in conf.get("features", "").split(",") if f.strip())
            node = SlurmNode(
                source=slurm_source(a.cluster),
                key=name,
                cluster=a.cluster,
                state=("IDLE", "EXTERNAL", "DYNAMIC_NORM"),
                cpus=int(conf.get("cpus") or 1),
                real_memory=int(conf.get("realmemory", 1)),
                features=features,
                gres=conf.get("gres", ""),
                topology=conf.get("topology", ""),  # as REST v0.0.43+ report it
            )
            changed |= self._put(node)
        return changed

    def delete_slurm_node(self, a: DeleteSlurmNode) -> bool:
        node = self._slurm_node(a.cluster, a.node)
        if node is None:
            return False
        if not node.has("DRAIN") or any(node.has(s) for s in BUSY):
            return False
        if not node.reason.startswith(a.owned_prefixes):
            return False
        return self._drop(node)

    def update_slurm_node_features(self, a: UpdateSlurmNodeFeatures) -> bool:
        node = self._slurm_node(a.cluster, a.node)
        if node is None or sorted(node.features) == sorted(a.features):
            return False
        return self._put(_replace(node, features=a.features))

    def set_slurm_node_pod_info(self, a: SetSlurmNodePodInfo) -> bool:
        node = self._slurm_node(a.cluster, a.node)
        if node is None or podinfo.parse(node.comment) == a.info:
            return False
        return self._put(_replace(node, comment=a.info.to_comment()))

    def set_slurm_node_owned_features(self, a: SetSlurmNodeOwnedFeatures) -> bool:
        node = self._slurm_node(a.cluster, a.node)
        if node is None:
            return False
        new = tuple(_ident.replace_owned(node.features, a.prefix, a.features))
        act = node.active_features
        active = tuple(_ident.replace_owned(act, a.prefix, a.features)) if act is not None else None
        if set(new) == set(node.features) and set(active or ()) == set(act or ()):
            return False
        return self._put(_replace(node, features=new, active_features=active))

    def prune_slurm_node_record(self, a: PruneSlurmNodeRecord) -> bool:
        node = self._slurm_node(a.cluster, a.node)
        info = podinfo.parse(node.comment) if node is not None else None
        if node is None or info is None or info.pod_name != a.pod:
            return False
        if (info.namespace, info.nodeset_name, info.nodeset_uid) != (
            a.nodeset.namespace,
            a.nodeset.name,
            a.nodeset.uid,
        ):
            return False
        if not all(node.has(s) for s in ("DOWN", "NOT_RESPONDING", "DYNAMIC_NORM")):
            return False
        return self._drop(node)

    def update_slurm_node_topology(self, a: UpdateSlurmNodeTopology) -> bool:
        node = self._slurm_node(a.cluster, a.node)
        if node is None or node.topology is None or node.topology == a.topology:
            return False
        return self._put(_replace(node, topology=a.topology))

    def set_slurm_node_extra(self, a: SetSlurmNodeExtra) -> bool:
        node = self._slurm_node(a.cluster, a.node)
        if node is None or node.extra == a.extra:
            return False
        if node.extra and not node.extra.startswith(a.owned_prefix):
            return False
        return self._put(_replace(node, extra=a.extra))

    def set_slurm_node_feature(self, a: SetSlurmNodeFeature) -> bool:
        """As the effector: the one feature in or out of each set, the rest kept."""
        node = self._slurm_node(a.cluster, a.node)
        if node is None:
            return False

        def one(current: tuple[str, ...]) -> tuple[str, ...]:
            kept = tuple(f for f in current if f != a.feature)
            return (*kept, a.feature) if a.present else kept

        new = one(node.features)
        act = node.active_features
        active = one(act) if act is not None else None
        if set(new) == set(node.features) and set(active or ()) == set(act or ()):
            return False
        return self._put(_replace(node, features=new, active_features=active))

    # Pods and jobs

    def _mark(self, ref: PodRef, job_id: int) -> bool:
        pod = self._pod(ref)
        if pod is None or pod.deleting:
            return False
        labels = {**pod.labels, wellknown.LABEL_SLURM_JOBID: str(job_id)}
        finalizers = pod.finalizers
        if wellknown.FINALIZER_SCHEDULER not in finalizers:
            finalizers = (*finalizers, wellknown.FINALIZER_SCHEDULER)
        tolerations = pod.tolerations
        if wellknown.TAINT_MANAGED_NODE not in tolerations and "" not in tolerations:
            tolerations = (*tolerations, wellknown.TAINT_MANAGED_NODE)
        return self._put(
            _replace(pod, labels=labels, finalizers=finalizers, tolerations=tolerations)
        )

    def submit_slurm_job(self, a: SubmitSlurmJob) -> bool:
        source = slurm_source(a.cluster)
        existing = next(
            (
                ev
                for (kind, src, _), ev in self.objs.items()
                if kind == "SlurmJob"
                and src == source
                and isinstance(ev, SlurmJob)
                and ev.comment == a.marker
                and ev.base_state not in ENDED
            ),
            None,
        )
        changed = False
        if existing is None:
            job_id = self.new_id()
            spec = a.spec
            job = SlurmJob(
                source=source,
                key=str(job_id),
                cluster=a.cluster,
                job_id=job_id,
                name=spec.name,
                state=("PENDING",),
                partition=spec.partition,
                admin_comment=json.dumps({"pods": [p.key for p in a.pods]}),
                comment=a.marker,
                node_count=spec.min_nodes,
                excluded_nodes=spec.excluded_nodes,
            )
            changed = self._put(job)
        else:
            job_id = existing.job_id
        for ref in a.pods:
            changed |= self._mark(ref, job_id)
        return changed

    def mark_pods(self, a: MarkPods) -> bool:
        changed = [self._mark(ref, a.job_id) for ref in a.pods]  # every pod, no short cut
        return any(changed)

    def bind_pod(self, a: BindPod) -> bool:
        pod = self._pod(a.pod)
        if pod is None or pod.node_name or pod.deleting:
            return False  # gone, bound (here or elsewhere: 409), or being deleted
        annotations = {**pod.annotations, wellknown.ANNOTATION_SLURM_NODE: a.slurm_node}
        return self._put(_replace(pod, node_name=a.node, annotations=annotations))

    def cancel_slurm_job(self, a: CancelSlurmJob) -> bool:
        job = self._job(a.cluster, a.job_id)
        if job is None or job.comment != a.marker or job.base_state in ENDED:
            return False
        return self._put(_replace(job, state=("CANCELLED",), end_time=int(self.now)))

    def set_job_excluded_nodes(self, a: SetJobExcludedNodes) -> bool:
        job = self._job(a.cluster, a.job_id)
        if job is None or job.base_state != "PENDING" or job.comment != a.marker:
            return False
        if sorted(job.excluded_nodes) == sorted(a.excluded_nodes):
            return False
        return self._put(_replace(job, excluded_nodes=a.excluded_nodes))

    def _delete_pod(self, pod: KubePod) -> bool:
        """Graceful deletion: the pod goes at once only when unbound and without finalizers."""
        if pod.deleting:
            return False
        if not pod.node_name and not pod.finalizers:
            return self._drop(pod)
        return self._put(
            _replace(pod, deletion_timestamp=int(self.now) + GRACE_S, deletion_grace_s=GRACE_S)
        )

    def delete_pod(self, a: DeletePod) -> bool:
        job = self._job(a.cluster, a.job_id)
        if job is not None and job.base_state == "RUNNING":
            return False  # fail closed: the job runs
        pod = self._pod(a.pod)
        return pod is not None and self._delete_pod(pod)

    def remove_pod_finalizer(self, a: RemovePodFinalizer) -> bool:
        pod = self._pod(a.pod)
        if pod is None or a.finalizer not in pod.finalizers:
            return False
        rest = tuple(f for f in pod.finalizers if f != a.finalizer)
        if pod.deleting and not pod.node_name and not rest:
            return self._drop(pod)
        return self._put(_replace(pod, finalizers=rest))

    def set_pod_condition(self, a: SetPodCondition) -> bool:
        pod = self._pod(a.pod)
        if pod is None:
            return False
        cond = PodCondition(type=a.type, status=a.status, reason=a.reason, message=a.message)
        rest = tuple(c for c in pod.conditions if c.type != a.type)
        return self._put(_replace(pod, conditions=(*rest, cond)))

    def set_slurm_node_conditions(self, a: SetSlurmNodeConditions) -> bool:
        pod = self._pod(a.pod)
        if pod is None:
            return False
        prefix = wellknown.SLURM_NODE_STATE_PREFIX
        rest = tuple(c for c in pod.conditions if not c.type.startswith(prefix))
        mine = tuple(
            PodCondition(type=c.type, status="True", message=c.message) for c in a.conditions
        )
        return self._put(_replace(pod, conditions=(*rest, *mine)))

    def set_pod_annotation(self, a: SetPodAnnotation) -> bool:
        pod = self._pod(a.pod)
        if pod is None:
            return False
        annotations = {k: v for k, v in pod.annotations.items() if k != a.annotation}
        if a.value is not None:
            annotations[a.annotation] = a.value
        return self._put(_replace(pod, annotations=annotations))

    def set_pod_label(self, a: SetPodLabel) -> bool:
        pod = self._pod(a.pod)
        if pod is None:
            return False
        labels = {k: v for k, v in pod.labels.items() if k != a.label}
        if a.value is not None:
            labels[a.label] = a.value
        return self._put(_replace(pod, labels=labels))

    # NodeSets

    def _nodeset(self, namespace: str, name: str, uid: str) -> KubeNodeSet | None:
        ns: KubeNodeSet | None = self._get(KubeNodeSet, KUBE_SOURCE, f"{namespace}/{name}")
        if ns is None or (uid and ns.uid != uid):
            return None
        return ns

    def create_node_set_pod(self, a: CreateNodeSetPod) -> bool:
        ref = a.nodeset
        if self._nodeset(ref.namespace, ref.name, ref.uid) is None:
            return False
        key = f"{ref.namespace}/{a.pod_name}"
        if self._get(KubePod, KUBE_SOURCE, key) is not None:
            return False  # 409: exists
        ns = self._nodeset(ref.namespace, ref.name, ref.uid)
        labels = {"app.kubernetes.io/name": "slurmd", "app.kubernetes.io/instance": ref.name}
        if ns is not None and ns.revision_hash:
            labels[wellknown.LABEL_REVISION_HASH] = ns.revision_hash
        pod = KubePod(
            source=KUBE_SOURCE,
            key=key,
            uid=f"uid-{self.new_id()}",
            namespace=ref.namespace,
            name=a.pod_name,
            labels=labels,
            created_at=int(self.now),
        )
        return self._put(pod)

    def delete_node_set_pod(self, a: DeleteNodeSetPod) -> bool:
        node = self._slurm_node(a.cluster, a.slurm_node)
        if node is not None and (not node.has("DRAIN") or any(node.has(s) for s in BUSY)):
            return False  # skipped: not drained and idle
        pod = self._pod(a.pod)
        return pod is not None and self._delete_pod(pod)

    def delete_failed_node_set_pod(self, a: DeleteFailedNodeSetPod) -> bool:
        pod = self._pod(a.pod)
        if pod is None or pod.uid != a.pod.uid:
            return False
        if not pod.terminal:
            return False
        ns = self._nodeset(a.nodeset.namespace, a.nodeset.name, a.nodeset.uid)
        if ns is not None:
            ann = wellknown.ANNOTATION_NODESET_POD_FAILURES
            try:
                failures = dict(json.loads(ns.annotations.get(ann, "{}")))
            except (ValueError, TypeError):
                failures = {}
            horizon = a.at - 600
            failures = {
                k: v
                for k, v in failures.items()
                if isinstance(v, list) and len(v) == 3 and isinstance(v[1], int) and v[1] > horizon
            }
            failures[pod.name] = [a.failures, a.at, pod.uid]
            annotations = {**ns.annotations, ann: json.dumps(failures, separators=(",", ":"))}
            self._put(_replace(ns, annotations=annotations))
        return self._drop(pod)

    def keep_node_set_pod_claims(self, a: KeepNodeSetPodClaims) -> bool:
        # PersistentVolumeClaims are not modelled (no reconciler observes them): no change.
        return False

    def ensure_node_set_pdb(self, a: EnsureNodeSetPDB) -> bool:
        key = a.nodeset.key
        if key in self.pdbs:
            return False
        self.pdbs.add(key)
        return True

    def ensure_node_set_revision(self, a: EnsureNodeSetRevision) -> bool:
        entry = (a.nodeset.key, a.revision_hash)
        if entry in self.revisions:
            return False
        self.revisions.add(entry)
        return True

    def ensure_slurm_reservation(self, a: EnsureSlurmReservation) -> bool:
        # As the effector: the reservation as asked, then the stamp on the NodeSet.
        self.reservations[a.name] = a
        ns = self._nodeset(a.nodeset.namespace, a.nodeset.name, a.nodeset.uid)
        if ns is None:
            return True
        ann = wellknown.ANNOTATION_NODESET_RESERVATION
        return self._put(_replace(ns, annotations={**ns.annotations, ann: a.stamp}))

    def delete_slurm_reservation(self, a: DeleteSlurmReservation) -> bool:
        existed = self.reservations.pop(a.name, None) is not None
        ns = self._nodeset(a.nodeset.namespace, a.nodeset.name, a.nodeset.uid)
        ann = wellknown.ANNOTATION_NODESET_RESERVATION
        if ns is None or ann not in ns.annotations:
            return existed
        rest = {k: v for k, v in ns.annotations.items() if k != ann}
        return self._put(_replace(ns, annotations=rest)) or existed

    def _stamp(self, ns: KubeNodeSet, ann: str, value: str | None) -> bool:
        """As the effector's ``_stamp``: the stamp written or removed, our finalizer kept
        exactly while a stamp is left (a NodeSet being deleted with none left is gone)."""
        annotations = {k: v for k, v in ns.annotations.items() if k != ann}
        if value is not None:
            annotations[ann] = value
        fin = wellknown.FINALIZER_NODESET_SLURM
        ours = any(a in annotations for a in wellknown.NODESET_SLURM_STAMPS)
        finalizers = tuple(f for f in ns.finalizers if f != fin)
        if ours and (fin in ns.finalizers or not ns.deleting):
            finalizers = (*finalizers, fin)
        if ns.deleting and not finalizers:
            return self._drop(ns)
        return self._put(_replace(ns, annotations=annotations, finalizers=finalizers))

    def ensure_slurm_partition(self, a: EnsureSlurmPartition) -> bool:
        ns = self._nodeset(a.nodeset.namespace, a.nodeset.name, a.nodeset.uid)
        if ns is None or ns.deleting:
            return False  # the effector's _hold: nothing is made for a NodeSet going away
        part = SlurmPartition(
            source=slurm_source(a.cluster), key=a.name, cluster=a.cluster, nodes=a.nodes
        )
        changed = self._put(part)
        return self._stamp(ns, wellknown.ANNOTATION_NODESET_PARTITION, a.stamp) or changed

    def delete_slurm_partition(self, a: DeleteSlurmPartition) -> bool:
        part = self._get(SlurmPartition, slurm_source(a.cluster), a.name)
        existed = part is not None and self._drop(part)
        ns = self._nodeset(a.nodeset.namespace, a.nodeset.name, a.nodeset.uid)
        if ns is None:
            return existed
        return self._stamp(ns, wellknown.ANNOTATION_NODESET_PARTITION, None) or existed

    def release_node_set_finalizer(self, a: ReleaseNodeSetFinalizer) -> bool:
        ns = self._nodeset(a.nodeset.namespace, a.nodeset.name, a.nodeset.uid)
        return ns is not None and self._stamp(ns, wellknown.ANNOTATION_NODESET_PARTITION, None)

    def set_node_set_status(self, a: SetNodeSetStatus) -> bool:
        ns = self._nodeset(a.nodeset.namespace, a.nodeset.name, a.nodeset.uid)
        return ns is not None and self._put(_replace(ns, status=a.status))

    def scale_node_set(self, a: ScaleNodeSet) -> bool:
        ns = self._nodeset(a.nodeset.namespace, a.nodeset.name, "")
        if ns is None or ns.replicas == a.replicas:
            return False
        annotations = {
            **ns.annotations,
            wellknown.ANNOTATION_AUTOSCALE_LAST_SCALE: str(a.at),
            wellknown.ANNOTATION_AUTOSCALE_LAST_DIRECTION: "up"
            if a.replicas > ns.replicas
            else "down",
        }
        return self._put(_replace(ns, replicas=a.replicas, annotations=annotations))

    # Clusters

    def set_cluster_status(self, a: SetClusterStatus) -> bool:
        ref = a.cluster
        c: SlurmCluster | None = self._get(SlurmCluster, KUBE_SOURCE, f"{ref.namespace}/{ref.name}")
        if c is None or (ref.uid and c.uid != ref.uid):
            return False
        return self._put(
            _replace(
                c,
                is_ready=a.is_ready,
                ready_reason=a.reason,
                # The effector writes at most 32768 characters (a condition's message limit).
                ready_message=a.message[:32768],
            )
        )

    # Workload API PodGroups

    def set_pod_group_scheduled(self, a: SetPodGroupScheduled) -> bool:
        key = workload_key(a.namespace, wellknown.KIND_NATIVE_POD_GROUP, a.name)
        pg: KubeWorkload | None = self._get(KubeWorkload, KUBE_SOURCE, key)
        if pg is None or (a.uid and pg.uid != a.uid) or pg.scheduled:
            return False
        return self._put(_replace(pg, scheduled=True))

    # DRA ResourceClaims (effectors/claims.py)

    def _claim(self, ref: ClaimRef) -> KubeResourceClaim | None:
        claim: KubeResourceClaim | None = self._get(KubeResourceClaim, KUBE_SOURCE, ref.key)
        if claim is None or (ref.uid and claim.uid != ref.uid):
            return None
        return claim

    def _reserve(
        self, claim: KubeResourceClaim, pod: PodRef, node: str, devices: tuple[Any, ...]
    ) -> bool:
        if claim.allocated and set(claim.results) != set(devices):
            return False  # allocated elsewhere: the effector retries (Transient)
        consumer = ClaimConsumer(resource="pods", name=pod.name, uid=pod.uid)
        reserved = claim.reserved_for
        if not claim.reserved_for_pod(pod.uid):
            reserved = (*reserved, consumer)
        if claim.allocated:
            return self._put(_replace(claim, reserved_for=reserved))
        return self._put(
            _replace(claim, allocated=True, results=devices, node=node, reserved_for=reserved)
        )

    def allocate_resource_claim(self, a: AllocateResourceClaim) -> bool:
        claim = self._claim(a.claim)
        return claim is not None and self._reserve(claim, a.pod, a.node, a.devices)

    def create_extended_resource_claim(self, a: CreateExtendedResourceClaim) -> bool:
        pod = self._pod(a.pod)
        if pod is None or pod.node_name:
            return False
        claim = next(
            (
                c
                for c in self.objs.values()
                if isinstance(c, KubeResourceClaim)
                and c.extended
                and c.owner is not None
                and c.owner.uid == pod.uid
            ),
            None,
        )
        changed = False
        if claim is None:
            name = f"{pod.name}-extended-resources-{self.new_id()}"
            claim = KubeResourceClaim(
                source=KUBE_SOURCE,
                key=f"{pod.namespace}/{name}",
                uid=f"uid-{self.new_id()}",
                namespace=pod.namespace,
                name=name,
                owner=OwnerRef(api_version="v1", kind="Pod", name=pod.name, uid=pod.uid),
                extended=True,
                requests=a.requests,
            )
            changed = self._put(claim)
        changed = self._reserve(claim, a.pod, a.node, a.devices) or changed
        if pod.extended_claim != claim.name:
            changed = self._put(_replace(pod, extended_claim=claim.name)) or changed
        return changed

    def release_resource_claim(self, a: ReleaseResourceClaim) -> bool:
        claim = self._claim(a.claim)
        if claim is None:
            return False
        if a.delete:
            return self._drop(claim)
        rest = tuple(c for c in claim.reserved_for if c.uid != a.pod.uid)
        if rest == claim.reserved_for and (rest or not claim.allocated):
            return False
        if rest:
            return self._put(_replace(claim, reserved_for=rest))
        return self._put(_replace(claim, reserved_for=(), allocated=False, results=(), node=""))

    _handlers: ClassVar[dict[type, Any]] = {
        RecordEvent: record_event,
        TaintNode: taint_node,
        UntaintNode: untaint_node,
        SetNodeCondition: set_node_condition,
        DrainSlurmNode: drain_slurm_node,
        UndrainSlurmNode: undrain_slurm_node,
        CreateSlurmNode: create_slurm_node,
        DeleteSlurmNode: delete_slurm_node,
        UpdateSlurmNodeFeatures: update_slurm_node_features,
        UpdateSlurmNodeTopology: update_slurm_node_topology,
        SetSlurmNodeExtra: set_slurm_node_extra,
        SetSlurmNodeFeature: set_slurm_node_feature,
        SetSlurmNodePodInfo: set_slurm_node_pod_info,
        SetSlurmNodeOwnedFeatures: set_slurm_node_owned_features,
        PruneSlurmNodeRecord: prune_slurm_node_record,
        SubmitSlurmJob: submit_slurm_job,
        MarkPods: mark_pods,
        BindPod: bind_pod,
        CancelSlurmJob: cancel_slurm_job,
        SetJobExcludedNodes: set_job_excluded_nodes,
        DeletePod: delete_pod,
        RemovePodFinalizer: remove_pod_finalizer,
        SetPodCondition: set_pod_condition,
        SetPodLabel: set_pod_label,
        SetSlurmNodeConditions: set_slurm_node_conditions,
        CreateNodeSetPod: create_node_set_pod,
        DeleteNodeSetPod: delete_node_set_pod,
        KeepNodeSetPodClaims: keep_node_set_pod_claims,
        DeleteFailedNodeSetPod: delete_failed_node_set_pod,
        EnsureNodeSetPDB: ensure_node_set_pdb,
        EnsureNodeSetRevision: ensure_node_set_revision,
        SetPodAnnotation: set_pod_annotation,
        EnsureSlurmReservation: ensure_slurm_reservation,
        DeleteSlurmReservation: delete_slurm_reservation,
        EnsureSlurmPartition: ensure_slurm_partition,
        DeleteSlurmPartition: delete_slurm_partition,
        ReleaseNodeSetFinalizer: release_node_set_finalizer,
        SetNodeSetStatus: set_node_set_status,
        ScaleNodeSet: scale_node_set,
        SetClusterStatus: set_cluster_status,
        SetPodGroupScheduled: set_pod_group_scheduled,
        AllocateResourceClaim: allocate_resource_claim,
        CreateExtendedResourceClaim: create_extended_resource_claim,
        ReleaseResourceClaim: release_resource_claim,
    }
