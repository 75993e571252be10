"""Pod groups and their translation into one Slurm job (pure; Slinky slurm-bridge scheduler).

**Groups.** Pods that must start together become one Slurm job. A pod's group is, in order:

* a Kubernetes Workload API PodGroup (``scheduling.k8s.io``, 1.36+) — the pod's
  ``spec.schedulingGroup.podGroupName``, whatever its owners and labels say (Slinky
  slurm-bridge ``slurmjobir.TranslateToSlurmJobIR`` looks at it before the coscheduling
  label and the owner chain). Group kind token ``PodGroup.scheduling.k8s.io``
  (:data:`KIND_NATIVE`). Unlike a coscheduling PodGroup there is no fallback: while the
  PodGroup is not observed the pods wait (Kubernetes keeps such pods Pending, and Slinky
  fails to translate them). A PodGroup below a gang CompositePodGroup (Kubernetes 1.37,
  ``parentCompositePodGroupName``) is placed with the rest of its tree: the group is the
  CompositePodGroup (:func:`composite_group`, kind token
  ``CompositePodGroup.scheduling.k8s.io``), one Slurm (heterogeneous) job for all of it;
* a JobSet — label ``jobset.sigs.k8s.io/jobset-name``;
* one LeaderWorkerSet replica — labels ``leaderworkerset.sigs.k8s.io/name`` and
  ``leaderworkerset.sigs.k8s.io/group-index``;
* a coscheduling PodGroup — label ``scheduling.x-k8s.io/pod-group``, when that PodGroup
  exists (:func:`resolve_group`: a pod naming a PodGroup that a complete Kubernetes list
  lacks is translated from its owner, as Slinky's ``slurmjobir.TranslateToSlurmJobIR`` does);
* a batch/v1 Job — its controller ``ownerReference``;
* otherwise the pod alone ("bare" pod, also pods of other controllers). A bare pod whose
  controller is an apps/v1 ReplicaSet takes its job's annotations from the root of its owner
  chain Pod → ReplicaSet → Deployment (:func:`owner_root`; Slinky slurm-bridge 1.3
  ``internal/utils/slurmjobir/owner.go``); while a link is not observed the pod stays
  pending with ``PodScheduled=False`` (reason :data:`OWNER_MISSING`) and a Warning Event.

A group key is ``namespace/Kind:name`` (``default/Job:train``; a LeaderWorkerSet replica is
``default/LeaderWorkerSet:lws/<group-index>``; a Workload API PodGroup
``default/PodGroup.scheduling.k8s.io:train-workers``). The job's settings come from the
annotations ``slurmjob.slinky.slurm.net/<name>`` of the group's *root* object (the JobSet, the
LeaderWorkerSet, the PodGroup, the Job, or the bare pod itself). A Workload API PodGroup's
are merged from three objects, a later one winning a conflict: the PodGroup, then its first
pod's root controller (a JobSet above the Job, a LeaderWorkerSet, the Job, or a bare pod's own
annotations), then the Workload the PodGroup was made from (Slinky slurm-bridge 1.3
``applySlurmAnnotations`` / ``parsePodGroupSlurmAnnotations``, annotations.go, podgroup.go).
Its gang waits until ``minCount`` pods exist (``spec.schedulingPolicy.gang.minCount``, or the
Workload template's when the PodGroup gives no policy) and the job is sized by the pods
present (Slinky ``fromPodGroup`` and ``PreFilterPodGroup``). A ``basic`` PodGroup is no group
(:func:`is_basic`, :func:`basic_group`): each pod keeps its controller's grouping — a Job's
pods one by one (``Job:<job>/<pod>``), a LeaderWorkerSet its replica, a bare pod alone — and
the PodGroup and its Workload only add annotations around the group's root (Slinky 1.3
slurmjobir.go, basic_podgroup_test.go). docs/slinky-1.3.md lists what is kept different.

**Translation** (:func:`translate`), with the defaults used when an annotation is absent:

============== =================================== ==============================================
annotation     Slurm field                          default
============== =================================== ==============================================
job-name       name                                 the group's name; ``<lws>-<index>`` for a
                                                    LeaderWorkerSet replica, the pod's for a
                                                    Job's pod placed alone
partition      partition                            Slurm's default partition
account, qos,  account, qos, reservation, wckey,    unset
reservation,   licenses, constraints
wckey,
licenses,
constraints
cpu-per-task   cpus_per_task (≥ 1; an integer or a  the CPUs the group's largest pod may use
               quantity such as ``500m``, rounded   (per container max(request, limit), or
               up; at most the CPUs of the          pod-level ``spec.resources``), rounded up;
               partition's largest node)            at least a PodGroup's ``minResources``
min-nodes      min_nodes (≥ 1)                      one node per pod
max-nodes      max_nodes (≥ min-nodes)              one node per pod
mem-per-node   memory_per_node (MiB, or a quantity  largest pod memory (max(request, limit) as
               such as ``4Gi``; at most the         for CPUs; MiB, rounded up) × pods per node
               partition's largest node's)          (pods ÷ min-nodes, rounded up); at least a
                                                    PodGroup's ``minResources``
gres           tres_per_node ``gres/<value>``       ``gres/gpu=N`` from ``nvidia.com/gpu`` /
                                                     ``amd.com/gpu`` limits, or the GPUs the
                                                     pod asks for through DRA (GPU device
                                                     classes, the larger), × pods per node;
                                                     refused together with a DRA GPU class
exclusive      exclusive (``true`` / ``false``)     true: whole nodes (``shared: ["none"]``), as
                                                    Slinky
priority       priority (integer, 0 to              unset
               4294967293)
timelimit      time limit (sbatch ``--time``: M,   a Job's ``activeDeadlineSeconds`` in
               M:S, H:M:S, D-H, D-H:M, D-H:M:S;     minutes, rounded up (at most 4294967293);
               at most 4294967293 minutes)          else the partition's
user-id,       user_id, group_id (integers ≥ 0)     slurmrestd's user
group-id
============== =================================== ==============================================

DRA (:mod:`reconcilers._dra`): a pod's ``deviceclass.resource.kubernetes.io/dra.cpu`` count
is a CPU count (Slinky: "the extended resource quantity is used as the Slurm CPU count"); its
GPU-class devices ask Slurm for untyped ``gres/gpu=N`` (Slinky asks ``gres/gpu:<class>=N``,
which only nodes whose GRES type is the class name satisfy; untyped also fits nodes an
administrator configured, ``Gres=gpu:nvidia:4``, and the node's ResourceSlices tell which
driver's devices the indices are). Unsupported classes, a class in two containers and two
GPU classes in one pod raise :class:`TranslationError`.

``constraints`` (Slinky slurm-bridge 1.3 slurmcontrol ``gresCompatibilityConstraint``): every
job, and every component of a heterogeneous one, requires the node feature
``slurm_bridge_gres_compatible`` (which ``node_register`` puts on the nodes whose GRES match
their DRA inventory), AND-ed with the annotation in Slurm's grammar
(:func:`reconcilers._constraint.compose`: ``gpu|fat`` ⇒
``slurm_bridge_gres_compatible&(gpu|fat)``); an expression Slurm cannot combine with it
(``rack1*2``, ``(a&b)|(c&d)``) is refused naming the annotation. The one job without it is
the one re-backing running pods (``placement``): it only keeps their nodes.

``tasks`` is the number of pods. An annotation that cannot be translated, or an unknown key
under the prefix (a misspelling), raises :class:`TranslationError` naming it (and the nearest
known name); the pod then stays Pending (see ``placement``).

**Bounds.** Slurm keeps a job's time limit and priority in 32 bits and reserves the top two
values: slurmrestd reads any number from ``NO_VAL`` (0xfffffffe) up as ``INFINITE``
(0xffffffff; data_parser ``PARSE_FUNC(UINT32_NO_VAL)``: ``num >= NO_VAL`` ⇒ ``INFINITE``), so a
larger ``timelimit`` would silently become UNLIMITED and a larger ``priority`` is not the one
asked (real 24.11 and 26.05 give such a job priority 1). Both are refused above
:data:`MAX_UINT32_NO_VAL` (4294967293, which both releases take as asked).
``cpu-per-task`` and ``mem-per-node`` are checked against the largest node of the job's
partition (:func:`check_node_sizes`, :func:`partition_node_sizes`) once the log holds a
complete Slurm listing: a task cannot span nodes, so more CPUs than any node has (or more
memory per node) can never run. tests/real_slurm/test_job_bounds.py checks these against
real Slurm.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Final

import msgspec

from reconcilers import _constraint, _dra
from reconcilers.base import Context, Store, kube_listed
from schemas import wellknown
from schemas.actions import RecordEvent, SlurmJobSpec
from schemas.events import (
    KubePod,
    KubeWorkload,
    OwnerRef,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    workload_key,
)
from schemas.subjects import slurm_source

LABEL_JOBSET: Final = "jobset.sigs.k8s.io/jobset-name"
LABEL_LWS_NAME: Final = "leaderworkerset.sigs.k8s.io/name"
LABEL_LWS_GROUP_INDEX: Final = "leaderworkerset.sigs.k8s.io/group-index"
LABEL_POD_GROUP: Final = "scheduling.x-k8s.io/pod-group"
LABEL_JOB_NAME: Final = "batch.kubernetes.io/job-name"
#: Label of the pods of a Job before Kubernetes 1.27 (still set next to the new one).
LABEL_JOB_NAME_LEGACY: Final = "job-name"
#: The watcher listing name of coscheduling PodGroups (``KubeListed.resource``).
PODGROUPS: Final = "podgroups"
#: Group kind tokens of the Kubernetes Workload API PodGroup and Workload (scheduling.k8s.io).
KIND_NATIVE: Final = wellknown.KIND_NATIVE_POD_GROUP
KIND_NATIVE_WORKLOAD: Final = wellknown.KIND_NATIVE_WORKLOAD
#: Group kind token of a Kubernetes 1.37 CompositePodGroup gang (:func:`composite_group`).
KIND_COMPOSITE: Final = wellknown.KIND_NATIVE_COMPOSITE
#: Group kinds whose pods must start whole (a gang, when its size is known and above 0).
GANGS: Final = ("LeaderWorkerSet", "PodGroup", KIND_NATIVE, KIND_COMPOSITE)

MIB: Final = 1024 * 1024
#: The largest finite value of a Slurm ``uint32_no_val`` field (a job's ``time_limit`` in
#: minutes, its ``priority``): ``NO_VAL`` (0xfffffffe) and ``INFINITE`` (0xffffffff) are
#: reserved (slurm.h), and slurmrestd's data_parser turns every number from ``NO_VAL`` up
#: into ``INFINITE`` (``PARSE_FUNC(UINT32_NO_VAL)``), i.e. UNLIMITED.
MAX_UINT32_NO_VAL: Final = 0xFFFFFFFD
#: A CPU quantity: a decimal number with an optional milli or SI suffix (``500m``, ``2``,
#: ``1.5``, ``1k``).
_CPU_QTY: Final = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(m|k|M|G|)")
_CPU_SCALE: Final = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}
PREFIX: Final = wellknown.ANNOTATION_SLURMJOB_PREFIX
#: The prefix of the job annotations' names before Slinky slurm-bridge 1.0 (its
#: ``internal/wellknown/annotations.go`` then: ``slinky.slurm.net/timelimit`` …): refused with
#: the name to write (:func:`_check_known`).
LEGACY_PREFIX: Final = "slinky.slurm.net/"
#: The annotations :func:`translate` reads (without the prefix).
ANNOTATIONS: Final = (
    "account",
    "constraints",
    "cpu-per-task",
    "exclusive",
    "gres",
    "group-id",
    "job-name",
    "licenses",
    "max-nodes",
    "mem-per-node",
    "min-nodes",
    "partition",
    "priority",
    "qos",
    "reservation",
    "timelimit",
    "user-id",
    "wckey",
)


class Group(msgspec.Struct, frozen=True, kw_only=True):
    """A pod group: ``kind`` (Pod | Job | JobSet | LeaderWorkerSet | PodGroup |
    PodGroup.scheduling.k8s.io), ``name``
    (for a LeaderWorkerSet replica ``<lws>/<group-index>``), and where its pods are found."""

    namespace: str
    kind: str
    name: str

    @property
    def key(self) -> str:
        """``namespace/Kind:name``."""
        return f"{self.namespace}/{self.kind}:{self.name}"

    @property
    def root_key(self) -> str | None:
        """Key of the root KubeWorkload holding the annotations (None: the bare pod itself)."""
        if self.kind == "Pod":
            return None
        return workload_key(self.namespace, self.kind, self.name.split("/", 1)[0])


class TranslationError(ValueError):
    """An annotation (or the pods) cannot become a Slurm job; ``field`` names it."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def group_of(pod: KubePod, *, pod_group: bool = True, native: bool = True) -> Group:
    """The group a pod belongs to by its labels and owner (module docstring, first match
    wins); ``pod_group=False`` ignores the coscheduling label (the PodGroup does not exist),
    ``native=False`` the Workload API scheduling group. Reconcilers use
    :func:`resolve_group`, which knows whether the PodGroup exists."""
    ns, labels = pod.namespace, pod.labels
    if native and pod.scheduling_group:
        return Group(namespace=ns, kind=KIND_NATIVE, name=pod.scheduling_group)
    if name := labels.get(LABEL_JOBSET):
        return Group(namespace=ns, kind="JobSet", name=name)
    if name := labels.get(LABEL_LWS_NAME):
        return Group(
            namespace=ns,
            kind="LeaderWorkerSet",
            name=f"{name}/{labels.get(LABEL_LWS_GROUP_INDEX, '0')}",
        )
    if pod_group and (name := labels.get(LABEL_POD_GROUP)):
        return Group(namespace=ns, kind="PodGroup", name=name)
    if (
        pod.owner is not None
        and pod.owner.kind == "Job"
        and pod.owner.api_version.startswith("batch/")
    ):
        return Group(namespace=ns, kind="Job", name=pod.owner.name)
    return Group(namespace=ns, kind="Pod", name=pod.name)


def resolve_group(pod: KubePod, store: Store, cluster: str) -> Group:
    """The group a pod belongs to, knowing which coscheduling PodGroups exist.

    Slinky slurm-bridge (``slurmjobir.TranslateToSlurmJobIR``): a pod whose
    ``scheduling.x-k8s.io/pod-group`` names a PodGroup that does not exist is translated from
    its owner (its Job, or the pod alone). "Does not exist" needs a complete list of
    PodGroups in the log (``KubeListed`` ``podgroups``; a 404 for the CRD counts as an empty
    list): before it, the pod waits for its PodGroup. A pod that already carries a job label
    keeps the group its job's marker names (the job's word), so a PodGroup created or deleted
    after the pod was placed never moves a placed pod between groups (which would make the
    group it left look empty and its job "orphaned").
    """
    group = group_of(pod)
    if group.kind not in ("PodGroup", KIND_NATIVE):
        return group
    if group.kind == KIND_NATIVE:
        pod_group = store.get(KubeWorkload, group.root_key or "")
        composite = composite_group(pod_group, store)
        if composite is not None:
            return composite
        if is_basic(pod_group, store):
            return basic_group(pod)
    alone = group_of(pod, pod_group=False, native=False)
    job_id = wellknown.slurm_job_id(pod.labels)
    if job_id is not None:
        job = store.get(SlurmJob, str(job_id), slurm_source(cluster))
        if job is not None:
            named = group_key_of_marker(job.comment)
            for candidate in (group, group_of(pod, native=False), alone):
                if named == candidate.key:
                    return candidate
    if group.kind == KIND_NATIVE:
        return group  # no fallback: the pods wait for their PodGroup
    root = group.root_key
    if root is not None and store.get(KubeWorkload, root) is None and kube_listed(store, PODGROUPS):
        return alone
    return group


def composite_group(pod_group: KubeWorkload | None, store: Store) -> Group | None:
    """The CompositePodGroup gang a Workload API PodGroup's pods are placed with, if any
    (Kubernetes 1.37, ``scheduling.k8s.io/v1alpha3``; kubernetes
    ``staging/src/k8s.io/api/scheduling/v1alpha3/types.go``).

    A gang CompositePodGroup admits its child groups together ("all-or-nothing"), a basic
    one schedules them independently. So, walking up from the PodGroup's
    ``parentCompositePodGroupName``, the pods belong to the highest CompositePodGroup reached
    through gang parents only: the whole subtree below it is one Slurm job (a heterogeneous
    job when its pods differ in shape, :mod:`reconcilers._hetjob`). A basic parent ends the
    walk (its children stay separate jobs); a PodGroup whose parent is basic keeps its own
    group (None). An ancestor not observed yet has no known policy: the pods are grouped
    under it and wait until it is observed (placement waits for a group's root). A walk
    longer than ``wellknown.COMPOSITE_MAX_DEPTH``, or a cycle, stops where it is; the group's
    root then still names a parent, which placement refuses as an invalid layout (as
    kube-scheduler's ``CompositePodGroupReasonInvalid``)."""
    if pod_group is None or pod_group.workload_kind != KIND_NATIVE or not pod_group.parent:
        return None
    ns, name, found = pod_group.namespace, pod_group.parent, ""
    seen: set[str] = set()
    for _ in range(wellknown.COMPOSITE_MAX_DEPTH):
        cpg = store.get(KubeWorkload, workload_key(ns, KIND_COMPOSITE, name))
        if cpg is None:
            return Group(namespace=ns, kind=KIND_COMPOSITE, name=name)
        if cpg.policy != "gang":
            break
        found = name
        seen.add(name)
        if not cpg.parent or cpg.parent in seen:
            break
        name = cpg.parent
    return Group(namespace=ns, kind=KIND_COMPOSITE, name=found) if found else None


def composite_tree(root: KubeWorkload, store: Store) -> tuple[list[KubeWorkload], int]:
    """(The Workload API PodGroups below the CompositePodGroup ``root``, observed, by name;
    its direct children observed, PodGroups and CompositePodGroups). At most
    ``wellknown.COMPOSITE_MAX_DEPTH`` levels are walked, each CompositePodGroup once."""
    ns = root.namespace
    leaves: dict[str, KubeWorkload] = {}
    direct = 0
    level, seen = [root.name], {root.name}
    for depth in range(wellknown.COMPOSITE_MAX_DEPTH):
        below: list[str] = []
        for name in level:
            for child in store.by_field(KubeWorkload, "parent", name):
                if child.namespace != ns:
                    continue
                if depth == 0 and child.workload_kind in (KIND_NATIVE, KIND_COMPOSITE):
                    direct += 1
                if child.workload_kind == KIND_NATIVE:
                    leaves[child.name] = child
                elif child.workload_kind == KIND_COMPOSITE and child.name not in seen:
                    seen.add(child.name)
                    below.append(child.name)
        level = below
    return [leaves[n] for n in sorted(leaves)], direct


def composite_size(root: KubeWorkload, store: Store) -> int:
    """Pods a CompositePodGroup gang waits for before its job is submitted: every observed
    PodGroup below it at its own minimum (:func:`expected_size`; a basic or unsized one at
    least one pod), plus one pod for each direct child its ``minGroupCount`` asks for that is
    not observed yet — a Slurm heterogeneous job cannot gain a component after the submit,
    so the gang is submitted whole or not at all (pods of a group that appears later are
    strays, ``PodShapeNotInHetJob``)."""
    leaves, direct = composite_tree(root, store)
    total = sum(
        max(
            1,
            expected_size(
                Group(namespace=pg.namespace, kind=KIND_NATIVE, name=pg.name),
                pg,
                template_owner_of(pg, store),
            ),
        )
        for pg in leaves
    )
    return total + max(0, root.size - direct)


def is_basic(pod_group: KubeWorkload | None, store: Store) -> bool:
    """A Workload API PodGroup (observed) whose scheduling policy is ``basic``, or that gives
    none and whose Workload template (observed) is basic. Such a PodGroup is no gang: its pods
    keep their own controller's grouping and the PodGroup only adds annotations (Slinky
    slurm-bridge 1.3 slurmjobir.go ``TranslateToSlurmJobIR``: only a Gang PodGroup replaces
    the workload root; basic_podgroup_test.go). A PodGroup not observed yet, or giving no
    policy while its Workload is not observed, is not known to be basic: its pods wait."""
    if pod_group is None or pod_group.workload_kind != KIND_NATIVE:
        return False
    if pod_group.policy == "basic":
        return True
    if pod_group.policy:
        return False
    owner = template_owner_of(pod_group, store)
    return owner is not None and owner.templates.get(pod_group.template_name, -1) == 0


def basic_group(pod: KubePod) -> Group:
    """The group of a pod whose Workload API PodGroup is ``basic`` (:func:`is_basic`): its
    controller's (a JobSet, a LeaderWorkerSet replica, or the pod alone), except that a
    batch/v1 Job's pods are placed one by one — ``Job:<job>/<pod>``, the Job still the root
    (its annotations, its ``activeDeadlineSeconds``) — as Slinky's ``fromJob`` translates
    only the pod at hand (basic_podgroup_test.go ``TranslateToSlurmJobIR_BasicPodGroupJobs``:
    a sibling pod, running or ended, is never part of the allocation)."""
    group = group_of(pod, pod_group=False, native=False)
    if group.kind == "Job":
        return Group(namespace=group.namespace, kind="Job", name=f"{group.name}/{pod.name}")
    return group


def pod_group_of(pods: Iterable[KubePod], store: Store) -> KubeWorkload | None:
    """The observed Workload API PodGroup the first of ``pods`` (by name) names in
    ``spec.schedulingGroup``, if any."""
    for p in sorted(pods, key=lambda p: p.name):
        if p.scheduling_group:
            return store.get(
                KubeWorkload, workload_key(p.namespace, KIND_NATIVE, p.scheduling_group)
            )
    return None


def parse_group_key(key: str) -> Group | None:
    """Invert :attr:`Group.key`; None when ``key`` is not a group key."""
    ns, sep, rest = key.partition("/")
    kind, sep2, name = rest.partition(":")
    if not (sep and sep2 and ns and kind and name):
        return None
    return Group(namespace=ns, kind=kind, name=name)


def pods_of(group: Group, store: Store, cluster: str) -> list[KubePod]:
    """The group's pods in the projection (any scheduler, any phase), sorted by name; a pod
    belongs to the group :func:`resolve_group` gives it."""
    if group.kind == "Pod":
        pod = store.get(KubePod, f"{group.namespace}/{group.name}")
        return [pod] if pod is not None and resolve_group(pod, store, cluster) == group else []
    if group.kind == "JobSet":
        found: Iterable[KubePod] = store.by_label(KubePod, LABEL_JOBSET, group.name)
    elif group.kind == "LeaderWorkerSet":
        found = store.by_label(KubePod, LABEL_LWS_NAME, group.name.split("/", 1)[0])
    elif group.kind == "PodGroup":
        found = store.by_label(KubePod, LABEL_POD_GROUP, group.name)
    elif group.kind == KIND_NATIVE:
        # The projection's field index (built on first use, kept up to date on every apply).
        found = store.by_field(KubePod, "scheduling_group", group.name)
    elif group.kind == KIND_COMPOSITE:
        root = store.get(KubeWorkload, group.root_key or "")
        members = composite_tree(root, store)[0] if root is not None else []
        found = [p for pg in members for p in store.by_field(KubePod, "scheduling_group", pg.name)]
    elif group.kind == "Job":
        found = store.by_label(KubePod, LABEL_JOB_NAME, group.name.split("/", 1)[0])
    else:
        return []
    out = [
        p
        for p in found
        if p.namespace == group.namespace and resolve_group(p, store, cluster) == group
    ]
    return sorted(out, key=lambda p: p.name)


def groups_under(workload: KubeWorkload, store: Store, cluster: str) -> list[str]:
    """Keys of the groups whose root is ``workload`` (a LeaderWorkerSet has one per replica;
    a PodGroup's pods also belong to the groups they were placed in while it did not exist),
    or whose job it configures: a Workload API Workload's PodGroups, and the Workload API
    PodGroups of a Job's pods (their annotations merge, see :func:`annotations_of`)."""
    ns = workload.namespace
    if workload.workload_kind == KIND_NATIVE_WORKLOAD:
        keys = set()
        for pg in store.by_field(KubeWorkload, "workload_name", workload.name):
            if pg.namespace == ns and pg.workload_kind == KIND_NATIVE:
                keys.update(_native_groups(pg, store, cluster))
        return sorted(keys)
    if workload.workload_kind == KIND_NATIVE:
        return sorted(_native_groups(workload, store, cluster))
    if workload.workload_kind == KIND_COMPOSITE:
        keys = {Group(namespace=ns, kind=KIND_COMPOSITE, name=workload.name).key}
        for pg in composite_tree(workload, store)[0]:
            keys.update(_native_groups(pg, store, cluster))
        return sorted(keys)
    if workload.workload_kind == "Job":
        keys = {Group(namespace=ns, kind="Job", name=workload.name).key}
        for p in store.by_label(KubePod, LABEL_JOB_NAME, workload.name):
            if p.namespace == ns:
                keys.add(resolve_group(p, store, cluster).key)
                if p.scheduling_group:
                    keys.add(Group(namespace=ns, kind=KIND_NATIVE, name=p.scheduling_group).key)
        return sorted(keys)
    if workload.workload_kind == "LeaderWorkerSet":
        return sorted(
            {
                resolve_group(p, store, cluster).key
                for p in store.by_label(KubePod, LABEL_LWS_NAME, workload.name)
                if p.namespace == workload.namespace
            }
        )
    if workload.workload_kind in OWNER_CHAIN:
        return owned_groups(workload, store)
    own = Group(namespace=workload.namespace, kind=workload.workload_kind, name=workload.name)
    if workload.workload_kind != "PodGroup":
        return [own.key]
    keys = {own.key}
    keys.update(
        resolve_group(p, store, cluster).key
        for p in store.by_label(KubePod, LABEL_POD_GROUP, workload.name)
        if p.namespace == workload.namespace
    )
    return sorted(keys)


def _native_groups(pod_group: KubeWorkload, store: Store, cluster: str) -> set[str]:
    """The PodGroup's own group key and the groups its pods are in (a ``basic`` PodGroup's
    pods keep their controller's groups, whose job its annotations configure)."""
    ns = pod_group.namespace
    keys = {Group(namespace=ns, kind=KIND_NATIVE, name=pod_group.name).key}
    keys.update(
        resolve_group(p, store, cluster).key
        for p in store.by_field(KubePod, "scheduling_group", pod_group.name)
        if p.namespace == ns
    )
    return keys


#: The owner kinds (apps/v1) walked from a bare pod to the object whose annotations
#: configure its job: Pod → ReplicaSet → Deployment (Slinky slurm-bridge 1.3
#: ``internal/utils/slurmjobir/owner.go`` ``getRootOwnerMetadata``, and ``owner_test.go``).
OWNER_CHAIN: Final = ("ReplicaSet", "Deployment")
#: Event and condition reason while a pod's owner chain cannot be read.
OWNER_MISSING: Final = "SlurmJobOwnerMissing"


def _apps_owner(owner: OwnerRef | None, kind: str) -> bool:
    return owner is not None and owner.kind == kind and owner.api_version.startswith("apps/")


def owner_root(pod: KubePod, store: Store) -> tuple[KubeWorkload | None, str]:
    """The root of a bare pod's owner chain Pod → ReplicaSet → Deployment (module
    docstring): ``(root, "")``; ``(None, why)`` when a link of the chain is not observed —
    missing, re-created under another uid, or not served — which keeps the pod pending, as
    Slinky's translation fails on a missing owner; ``(None, "")`` when the pod has no such
    owner (its own annotations configure its job)."""
    if not _apps_owner(pod.owner, "ReplicaSet"):
        return None, ""
    link: OwnerRef | None = pod.owner
    root: KubeWorkload | None = None
    for kind in OWNER_CHAIN:
        if link is None or not _apps_owner(link, kind):
            break
        found = store.get(KubeWorkload, workload_key(pod.namespace, kind, link.name))
        if found is None or found.deleted or (link.uid and found.uid and link.uid != found.uid):
            return None, f"its owner {kind} {pod.namespace}/{link.name} is not observed"
        root, link = found, found.owner
    return root, ""


def owned_groups(workload: KubeWorkload, store: Store) -> list[str]:
    """The bare-pod groups whose owner chain passes through ReplicaSet or Deployment
    ``workload`` (a link appearing may unblock them, its annotations configure them)."""
    keys = []
    for p in store.values(KubePod):
        if p.namespace != workload.namespace or not _apps_owner(p.owner, "ReplicaSet"):
            continue
        assert p.owner is not None
        hit = workload.workload_kind == "ReplicaSet" and p.owner.name == workload.name
        if not hit and workload.workload_kind == "Deployment":
            rs = store.get(KubeWorkload, workload_key(p.namespace, "ReplicaSet", p.owner.name))
            hit = (
                rs is not None
                and _apps_owner(rs.owner, "Deployment")
                and (rs.owner is not None and rs.owner.name == workload.name)
            )
        if hit and group_of(p).kind == "Pod":
            keys.append(Group(namespace=p.namespace, kind="Pod", name=p.name).key)
    return sorted(keys)


def marker(group: Group, root_uid: str) -> str:
    """The ``comment`` that marks a Slurm job as the placeholder of ``group`` (and of this
    incarnation of its root object: a re-created Job with the same name gets a new job)."""
    return f"slurmbridge:{group.key}:{root_uid}"


def group_key_of_marker(comment: str) -> str | None:
    """The group key inside a :func:`marker` comment, None for anyone else's comment."""
    if not comment.startswith("slurmbridge:"):
        return None
    body = comment[len("slurmbridge:") :]
    key, sep, _uid = body.rpartition(":")
    return key if sep and parse_group_key(key) is not None else None


def group_of_job(event: SlurmJob, store: Store, ctx: Context) -> list[str]:
    """The group a job of ``ctx.cluster`` is the placeholder of (its marker), if ours, and
    the groups of the pods whose job-id label names it: the SlurmJob trigger of
    ``placement`` and ``workload``. A tombstone keeps no marker, and an id slurmctld handed
    out again (it restarted from older state) carries another group's marker, so only the
    label reaches the group whose job Slurm lost."""
    if event.cluster and event.cluster != ctx.cluster:
        return []
    keys = set()
    key = group_key_of_marker(event.comment)
    if key is not None:
        keys.add(key)
    keys.update(
        resolve_group(p, store, ctx.cluster).key
        for p in store.by_label(KubePod, wellknown.LABEL_SLURM_JOBID, event.key)
    )
    return sorted(keys)


def is_groups_job(comment: str, group: Group, root_uid: str) -> bool:
    """A job whose ``comment`` is ``comment`` is ``group``'s placeholder: its marker names
    the group and, when the root's uid is known (``root_uid`` not ``""``), this incarnation
    of it (:func:`marker`). Any other job — a user's, another group's, an id slurmctld
    handed out again after it lost state — is "no job" for the group: never adopted, never
    cancelled."""
    if group_key_of_marker(comment) != group.key:
        return False
    return not root_uid or comment == marker(group, root_uid)


def root_uid(group: Group, pods: list[KubePod], workload: KubeWorkload | None) -> str:
    """The uid of the group's root object (the bare pod's own uid)."""
    if group.kind == "Pod":
        return pods[0].uid if pods else ""
    return workload.uid if workload is not None else ""


# --- translation ---------------------------------------------------------------------------

_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
#: A Go duration (``time.ParseDuration``) of whole ``h``/``m``/``s`` parts: ``2h``, ``1h30m``.
_GO_DURATION = re.compile(r"^(?:\d+[hms])+$")
_GO_PART = re.compile(r"(\d+)([hms])")
_GO_UNIT_S = {"h": 3600, "m": 60, "s": 1}
_QTY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|K|M|G|T)?$")
_QTY_BYTES: Final = {
    None: MIB,  # a bare number is MiB, as Slurm's --mem
    "Ki": 1024,
    "Mi": MIB,
    "Gi": 1024 * MIB,
    "Ti": 1024 * 1024 * MIB,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
}


def default_job_name(group: Group) -> str:
    """The job's name without a ``job-name`` annotation: the group's name (a Workload API
    PodGroup's name, as Slinky slurm-bridge 1.3 podgroup.go ``fromPodGroup`` names its job
    after the PodGroup; a Job's, JobSet's, coscheduling PodGroup's or bare pod's name), except
    a LeaderWorkerSet replica's ``<lws>-<group index>`` (slurmjobir leaderworkerset.go) and a
    pod of a Job placed alone (:func:`basic_group`), named after the pod. Never the
    kind-qualified key: Slurm shows the name in ``squeue``, where Slinky's jobs show the
    object's name."""
    if "/" in group.name:
        parent, _, rest = group.name.partition("/")
        return f"{parent}-{rest}" if group.kind == "LeaderWorkerSet" else rest
    return group.name


def _cpu_quantity(ann: Mapping[str, str]) -> int | None:
    """``cpu-per-task`` as whole CPUs: an integer or a Kubernetes quantity, rounded up
    (``200m`` ⇒ 1, ``1.5`` ⇒ 2), as Slinky reads it with ``resource.ParseQuantity``.

    Raises:
        TranslationError: not a quantity, or below one millicpu.
    """
    raw = ann.get(PREFIX + "cpu-per-task")
    if raw is None:
        return None
    m = _CPU_QTY.fullmatch(raw.strip())
    if not m:
        raise TranslationError(
            _field("cpu-per-task"), f"{raw!r} is not a CPU count or quantity such as 500m"
        )
    number, suffix = float(m.group(1)), m.group(2)
    value = number / 1000 if suffix == "m" else number * _CPU_SCALE[suffix]
    if not math.isfinite(value) or value <= 0:
        raise TranslationError(_field("cpu-per-task"), f"{raw!r} must be more than zero")
    return math.ceil(value)


def _check_known(annotations: Mapping[str, str]) -> None:
    """Refuse a key under our prefix that :func:`translate` does not read: a misspelled
    ``slurmjob.slinky.slurm.net/partiton`` would otherwise be ignored and the job run with
    Slurm's default partition (Slinky ignores it silently). Also refuse the job annotations'
    old names, ``slinky.slurm.net/<name>`` (:data:`LEGACY_PREFIX`), naming the key to write:
    Slinky's own older quickstart uses them and Slinky 1.x ignores them, so a job would run
    without its account or time limit (docs/deploy.md, Coming from Slinky, says why they are
    refused rather than read).

    Raises:
        TranslationError: the first unknown or old key (sorted), with the key meant.
    """
    for key in sorted(annotations):
        if key.startswith(LEGACY_PREFIX) and key[len(LEGACY_PREFIX) :] in ANNOTATIONS:
            name = key[len(LEGACY_PREFIX) :]
            raise TranslationError(
                f"metadata.annotations[{key}]",
                f"Slinky's old name of {PREFIX}{name}, which Slinky 1.x ignores; write "
                f"{PREFIX}{name}",
            )
        if not key.startswith(PREFIX) or key[len(PREFIX) :] in ANNOTATIONS:
            continue
        name = key[len(PREFIX) :]
        near = difflib.get_close_matches(name, ANNOTATIONS, n=1)
        hint = f"; did you mean {PREFIX}{near[0]}?" if near else ""
        raise TranslationError(
            _field(name), f"unknown annotation (known: {', '.join(ANNOTATIONS)}){hint}"
        )


def _field(name: str) -> str:
    return f"metadata.annotations[{PREFIX}{name}]"


def _parsed(ann: Mapping[str, str], name: str, parse: Callable[[str], int]) -> int | None:
    """Annotation ``name`` (``PREFIX`` + ``name``) as ``parse`` reads it; None when absent.

    Raises:
        TranslationError: ``parse`` refuses the value (ValueError), naming the annotation.
    """
    raw = ann.get(PREFIX + name)
    if raw is None:
        return None
    try:
        return parse(raw)
    except ValueError as exc:
        raise TranslationError(_field(name), str(exc)) from None


def _int(
    ann: Mapping[str, str], name: str, *, minimum: int, maximum: int | None = None
) -> int | None:
    raw = ann.get(PREFIX + name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise TranslationError(_field(name), f"{raw!r} is not an integer") from None
    if value < minimum:
        raise TranslationError(_field(name), f"{value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise TranslationError(_field(name), f"{value} is above the maximum {maximum}")
    return value


def _text(ann: Mapping[str, str], name: str) -> str:
    raw = ann.get(PREFIX + name)
    if raw is None:
        return ""
    value = raw.strip()
    if not value:
        raise TranslationError(_field(name), "is empty")
    if any(c in value for c in "\n\r\t"):
        raise TranslationError(_field(name), f"{raw!r} contains a control character")
    return value


def parse_time_limit(raw: str) -> int:
    """A Slurm time limit as minutes, in sbatch's ``--time`` forms: ``M``, ``M:S``,
    ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S`` (so ``10:30`` is ten and a half minutes, as
    in Slurm); seconds are rounded up to a whole minute.

    Also a Go duration of whole hours, minutes and seconds, as Slinky slurm-bridge 1.3
    reads the ``timelimit`` annotation (``internal/utils/slurmjobir/slurmjobir.go`` through
    its time-limit parser): ``2h`` is 120 minutes, ``1h30m`` 90, ``30s`` one (rounded up).
    A fraction (``1.5h``) or a unit below the second (``ms``) is refused: a time limit is
    whole minutes, and guessing the rounding of a fraction would hide a typo.

    Raises:
        ValueError: not one of those forms, a minute or second field ≥ 60 where it is not
            the leading field, zero, or above :data:`MAX_UINT32_NO_VAL` minutes (slurmrestd
            would read it as UNLIMITED).
    """
    text = raw.strip()
    if _GO_DURATION.match(text):
        seconds = sum(int(n) * _GO_UNIT_S[u] for n, u in _GO_PART.findall(text))
        return _bounded_minutes(raw, (seconds + 59) // 60)
    m = _TIME.match(text)
    if not m:
        raise ValueError(
            f"{raw!r} is not a Slurm time (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) or a Go "
            "duration of whole h/m/s (2h, 1h30m, 30s)"
        )
    days_s, a, b, c = m.groups()
    first, second, third = int(a), int(b or 0), int(c or 0)
    if days_s is None and b is None:  # M
        days, hours, mins, secs = 0, 0, first, 0
    elif days_s is None and c is None:  # M:S
        days, hours, mins, secs = 0, 0, first, second
    elif days_s is None:  # H:M:S
        days, hours, mins, secs = 0, first, second, third
    else:  # D-H[:M[:S]]
        days, hours, mins, secs = int(days_s), first, second, third
    if secs >= 60 or (mins >= 60 and (hours or days or c is not None or days_s is not None)):
        raise ValueError(f"{raw!r}: minutes and seconds must be below 60")
    return _bounded_minutes(raw, days * 1440 + hours * 60 + mins + (1 if secs else 0))


def _bounded_minutes(raw: str, minutes: int) -> int:
    """``minutes`` when Slurm can take it as a time limit (:func:`parse_time_limit`).

    Raises:
        ValueError: zero, or above :data:`MAX_UINT32_NO_VAL` minutes.
    """
    if minutes <= 0:
        raise ValueError(f"{raw!r} must be at least one minute")
    if minutes > MAX_UINT32_NO_VAL:
        raise ValueError(
            f"{raw!r} is {minutes} minutes, above Slurm's largest time limit "
            f"{MAX_UINT32_NO_VAL} (more would be UNLIMITED)"
        )
    return minutes


def parse_memory_mib(raw: str) -> int:
    """A memory size as MiB, rounded up: ``4096`` (MiB), ``4Gi``, ``500M``.

    Raises:
        ValueError: not a number with an optional Ki/Mi/Gi/Ti/K/M/G/T suffix, or zero.
    """
    m = _QTY.match(raw.strip())
    if not m:
        raise ValueError(f"{raw!r} is not MiB or a quantity such as 4Gi")
    size = float(m.group(1)) * _QTY_BYTES[m.group(2)] / MIB
    if not math.isfinite(size):  # hundreds of digits: math.ceil would raise OverflowError
        raise ValueError(f"{raw!r} is too large")
    mib = math.ceil(size)
    if mib <= 0:
        raise ValueError(f"{raw!r} must be more than zero")
    return mib


def translate(
    group: Group,
    pods: list[KubePod],
    annotations: Mapping[str, str],
    *,
    excluded_nodes: tuple[str, ...] = (),
    workload: KubeWorkload | None = None,
    dra_gpus: Mapping[str, int] | None = None,
    device_classes: _dra.Classes = _dra.NO_CLASSES,
    gres_compatible: bool = True,
) -> SlurmJobSpec:
    """The Slurm job for ``pods`` (a group's live pods) under its root's ``annotations``;
    ``workload`` is the group's root object when it has one (a Job's deadline, a PodGroup's
    minResources); ``dra_gpus``: pod key → GPUs it asks for through DRA (its extended
    resources and its ResourceClaims; pods absent: from its extended resources alone);
    ``device_classes``: the DeviceClasses the pods name (a class is a CPU or GPU class by its
    device profile, whatever its name: :func:`reconcilers._dra.class_kind`).
    ``gres_compatible``: the job's ``constraints`` require the node feature
    ``slurm_bridge_gres_compatible`` AND-ed with the ``constraints`` annotation in Slurm's
    grammar (:func:`reconcilers._constraint.compose`; Slinky slurm-bridge 1.3 slurmcontrol
    ``gresCompatibilityConstraint``: every job the bridge submits, every component).

    Rules and defaults: module docstring.

    Raises:
        TranslationError: an annotation is malformed or out of range (``field`` names it), a
            ``constraints`` expression Slurm cannot combine with the feature, or there are
            no pods.
    """
    if not pods:
        raise TranslationError("pods", "the group has no pod to place")
    _check_known(annotations)
    n = len(pods)
    ann = annotations
    _check_dra(pods, device_classes)
    cpu = _cpus_per_task(ann, pods, workload, device_classes)
    min_nodes, max_nodes = _node_counts(ann, n)
    per_node = math.ceil(n / min_nodes)
    memory = _memory_per_node(ann, pods, per_node, workload)
    tres = _tres_per_node(ann, pods, per_node, dra_gpus, device_classes)
    exclusive = _exclusive(ann)
    limit = _time_limit(ann, workload)
    partition = _partition(ann)
    constraints = _constraints(ann, gres_compatible=gres_compatible)
    return SlurmJobSpec(
        name=_text(ann, "job-name") or default_job_name(group),
        partition=partition,
        account=_text(ann, "account"),
        qos=_text(ann, "qos"),
        reservation=_text(ann, "reservation"),
        wckey=_text(ann, "wckey"),
        constraints=constraints,
        licenses=_text(ann, "licenses"),
        cpus_per_task=cpu,
        tasks=n,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        memory_per_node_mib=memory,
        tres_per_node=tres,
        time_limit_minutes=limit,
        priority=_int(ann, "priority", minimum=0, maximum=MAX_UINT32_NO_VAL),
        user_id=_int(ann, "user-id", minimum=0),
        group_id=_int(ann, "group-id", minimum=0),
        exclusive=exclusive,
        excluded_nodes=excluded_nodes,
    )


def _check_dra(pods: list[KubePod], device_classes: _dra.Classes) -> None:
    """Each pod's DRA extended resources are ones a job can ask for
    (:func:`reconcilers._dra.check_extended`).

    Raises:
        TranslationError: naming the pod and its field.
    """
    for p in pods:
        try:
            _dra.check_extended(p, device_classes)
        except _dra.DraError as exc:
            raise TranslationError(f"pod {p.name}: {exc.field}", exc.reason) from None


def _cpus_per_task(
    ann: Mapping[str, str],
    pods: list[KubePod],
    workload: KubeWorkload | None,
    device_classes: _dra.Classes,
) -> int:
    """``cpu-per-task``, else the most CPUs a pod may use — the larger of its request and
    limit, a ``dra.cpu`` count being a CPU count — and at least a PodGroup's
    ``minResources``, in whole CPUs (Slinky slurmjobir.go ``parsePodsCpuAndMemory``, then
    ``parseAnnotations``).

    Raises:
        TranslationError: the annotation is malformed, or set next to ``dra.cpu`` requests
            (Slinky admission ``validateAnnotationConflicts``: the DRA request is
            authoritative).
    """
    cpu = _cpu_quantity(ann)
    if cpu is not None and any(_dra.cpus_asked(p, device_classes) for p in pods):
        raise TranslationError(
            _field("cpu-per-task"),
            f"conflicts with the pods' {_dra.DEVICE_CLASS_PREFIX}{_dra.CPU_CLASS} requests",
        )
    if cpu is not None:
        return cpu
    most = max(
        max(p.cpu_millis_max, p.cpu_millis, 1000 * _dra.cpus_asked(p, device_classes)) for p in pods
    )
    if workload is not None:
        most = max(most, workload.min_cpu_millis)
    return max(1, math.ceil(most / 1000))


def _node_counts(ann: Mapping[str, str], n: int) -> tuple[int, int]:
    """``(min-nodes, max-nodes)``: by default one node per pod, a lone ``max-nodes``
    lowering the minimum to it and a lone ``min-nodes`` raising the maximum to it.

    Raises:
        TranslationError: a count is not an integer ≥ 1, or ``max-nodes`` < ``min-nodes``.
    """
    min_nodes = _int(ann, "min-nodes", minimum=1)
    max_nodes = _int(ann, "max-nodes", minimum=1)
    if min_nodes is None:
        min_nodes = n if max_nodes is None else min(n, max_nodes)
    if max_nodes is None:
        max_nodes = max(n, min_nodes)
    if max_nodes < min_nodes:
        raise TranslationError(_field("max-nodes"), f"{max_nodes} is below min-nodes {min_nodes}")
    return min_nodes, max_nodes


def _memory_per_node(
    ann: Mapping[str, str], pods: list[KubePod], per_node: int, workload: KubeWorkload | None
) -> int | None:
    """MiB per node: ``mem-per-node``, else the largest pod's (request or limit, the larger)
    × ``per_node`` pods, at least a PodGroup's ``minResources``; None when no pod says
    (Slinky slurmjobir.go ``parsePodsCpuAndMemory``: Slurm's partition default then).

    Raises:
        TranslationError: ``mem-per-node`` is malformed (:func:`parse_memory_mib`).
    """
    given = _parsed(ann, "mem-per-node", parse_memory_mib)
    if given is not None:
        return given
    largest = max(math.ceil(max(p.memory_bytes_max, p.memory_bytes) / MIB) for p in pods)
    memory = largest * per_node if largest else None
    if workload is not None and workload.min_memory_bytes:
        memory = max(memory or 0, math.ceil(workload.min_memory_bytes / MIB))
    return memory


def _tres_per_node(
    ann: Mapping[str, str],
    pods: list[KubePod],
    per_node: int,
    dra_gpus: Mapping[str, int] | None,
    device_classes: _dra.Classes,
) -> str:
    """``tres_per_node``: ``gres`` as ``gres/<value>``, else ``gres/gpu=N`` for the most GPUs
    a pod asks for (device plugins or DRA) × ``per_node`` pods, else ``""`` (Slinky
    slurmjobir.go ``parseGPUDevicePlugin``).

    Raises:
        TranslationError: ``gres`` is malformed, or set next to DRA GPU requests (Slinky
            admission ``validateAnnotationConflicts``: explicit DRA requests are
            authoritative; a gres annotation would replace them).
    """
    gres = _text(ann, "gres")
    dra = dict(dra_gpus or {})
    dra_gpus_max = max(
        (dra.get(p.key, _dra.gpus_asked(p, classes=device_classes)) for p in pods), default=0
    )
    if gres:
        if dra_gpus_max:
            raise TranslationError(
                _field("gres"), "conflicts with the pods' DRA GPU requests (they size the job)"
            )
        return gres if gres.startswith("gres/") else f"gres/{gres}"
    gpus = max(dra_gpus_max, *(p.gpus for p in pods))
    return f"gres/gpu={gpus * per_node}" if gpus else ""


def _exclusive(ann: Mapping[str, str]) -> bool:
    """Whole nodes unless ``exclusive`` says ``false`` (Slinky slurm-bridge slurmcontrol.go
    ``sharedFromExclusiveAnnotation``).

    Raises:
        TranslationError: the annotation is neither ``true`` nor ``false``.
    """
    exclusive_raw = ann.get(PREFIX + "exclusive")
    if exclusive_raw is None:
        return True
    value = exclusive_raw.strip().lower()
    if value not in ("true", "false"):
        raise TranslationError(_field("exclusive"), f"{exclusive_raw!r} is not true or false")
    return value == "true"


def _time_limit(ann: Mapping[str, str], workload: KubeWorkload | None) -> int | None:
    """Minutes: ``timelimit`` (:func:`parse_time_limit`), else a Job's
    ``activeDeadlineSeconds`` rounded up, else None (the partition's).

    Raises:
        TranslationError: ``timelimit`` is malformed or out of range.
    """
    given = _parsed(ann, "timelimit", parse_time_limit)
    if given is not None:
        return given
    if workload is None or workload.active_deadline_s <= 0:
        return None
    # Slinky slurm-bridge (slurmjobir job.go): a Job's activeDeadlineSeconds, rounded up
    # to whole minutes so the job is never cut short; 0 means none (Slurm's 0 would be
    # "unlimited", the opposite).
    limit = math.ceil(workload.active_deadline_s / 60)
    # Kubernetes takes any int64; beyond Slurm's largest finite limit (some 8000
    # years) slurmrestd would read UNLIMITED, so the deadline is capped there.
    return min(limit, MAX_UINT32_NO_VAL)


def _partition(ann: Mapping[str, str]) -> str:
    """``partition`` (``""``: Slurm's default).

    Raises:
        TranslationError: the annotation is empty, has a control character, or names more
            than one partition.
    """
    partition = _text(ann, "partition")
    if "," in partition:
        raise TranslationError(_field("partition"), f"{partition!r}: name exactly one partition")
    return partition


#: Partition name → (CPUs, MiB of memory) of its largest nodes; the key ``""`` stands for a
#: job that names no partition (Slurm's default partition, or every partition when none is
#: flagged default).
NodeSizes = dict[str, tuple[int, int]]


def _constraints(ann: Mapping[str, str], *, gres_compatible: bool) -> str:
    """The job's ``constraints``: the annotation, with ``slurm_bridge_gres_compatible`` AND-ed
    in when ``gres_compatible`` (Slinky slurm-bridge 1.3 slurmcontrol
    ``gresCompatibilityConstraint``, through :func:`reconcilers._constraint.compose`).

    Raises:
        TranslationError: an expression Slurm cannot combine with the feature.
    """
    constraints = _text(ann, "constraints")
    if not gres_compatible:
        return constraints
    try:
        return _constraint.compose(wellknown.FEATURE_GRES_COMPATIBLE, constraints)
    except _constraint.ConstraintError as exc:
        raise TranslationError(_field("constraints"), str(exc)) from None


def partition_node_sizes(store: Store, source: str) -> NodeSizes:
    """The most CPUs and the most memory (MiB, ``real_memory``) a node of each partition of
    ``source`` has (each its own maximum; nodes reporting 0 count for nothing), for
    :func:`check_node_sizes`. Reads every partition and its nodes once."""
    sizes: NodeSizes = {}
    default = ""
    for part in store.values(SlurmPartition, source):
        if part.deleted:
            continue
        cpus = mem = 0
        for name in part.nodes:
            node = store.get(SlurmNode, name, source)
            if node is not None and not node.deleted:
                cpus, mem = max(cpus, node.cpus), max(mem, node.real_memory)
        sizes[part.key] = (cpus, mem)
        if part.is_default and not default:
            default = part.key
    if default:
        sizes[""] = sizes[default]
    elif sizes:
        sizes[""] = (max(c for c, _ in sizes.values()), max(m for _, m in sizes.values()))
    return sizes


def check_node_sizes(spec: SlurmJobSpec, annotations: Mapping[str, str], sizes: NodeSizes) -> None:
    """Refuse a ``cpu-per-task`` or ``mem-per-node`` annotation asking more than the largest
    node of the job's partition has (``sizes``: :func:`partition_node_sizes`, from a complete
    Slurm listing): one task runs on one node, so the job could never start. Slurm 24.11
    refuses such a job (2014, "Requested node configuration is not available"); 26.05 takes
    one with too many CPUs per task and leaves it PENDING (reason ``PartitionConfig``) for
    ever. A partition whose size is unknown (no node reports it) bounds nothing. Counts from
    the pods' own requests are left to Slurm: no annotation would name the cause.

    Raises:
        TranslationError: naming the annotation, the count and the largest node's.
    """
    cpus, mem = sizes.get(spec.partition, (0, 0))
    where = f"partition {spec.partition!r}" if spec.partition else "Slurm's default partition"
    if PREFIX + "cpu-per-task" in annotations and cpus and spec.cpus_per_task > cpus:
        raise TranslationError(
            _field("cpu-per-task"),
            f"{spec.cpus_per_task} CPUs per task: the largest node of {where} has {cpus}",
        )
    mib = spec.memory_per_node_mib
    if PREFIX + "mem-per-node" in annotations and mem and mib is not None and mib > mem:
        raise TranslationError(
            _field("mem-per-node"),
            f"{mib} MiB per node: the largest node of {where} has {mem} MiB",
        )


def sized_by_annotation(annotations: Mapping[str, str]) -> bool:
    """True when ``cpu-per-task`` or ``mem-per-node`` is given (:func:`check_node_sizes`
    has something to check)."""
    return PREFIX + "cpu-per-task" in annotations or PREFIX + "mem-per-node" in annotations


def annotations_of(
    group: Group,
    pods: list[KubePod],
    workload: KubeWorkload | None,
    *,
    controller: KubeWorkload | None = None,
    template_owner: KubeWorkload | None = None,
    pod_group: KubeWorkload | None = None,
) -> Mapping[str, str]:
    """The annotations that configure the job: the root object's, the bare pod's own.

    Merged, a later source winning a key (Slinky slurm-bridge 1.3 annotations.go
    ``applySlurmAnnotations`` and podgroup.go ``parsePodGroupSlurmAnnotations``; order as
    basic_podgroup_test.go checks it: PodGroup, then controller, then Workload):

    * a Workload API gang (``workload`` is the PodGroup): the PodGroup, its first pod's root
      ``controller`` (:func:`controller_of`; a pod with no owner: its own annotations), the
      Workload (``template_owner``);
    * a pod group of a ``basic`` PodGroup (``pod_group``): the PodGroup, the group's own root
      (``workload``, or the bare pod), the PodGroup's Workload (``template_owner``);
    * a CompositePodGroup gang: the CompositePodGroup, then its Workload.
    """
    own: Mapping[str, str] = {}
    if group.kind == "Pod":
        own = pods[0].annotations if pods else {}
    elif workload is not None:
        own = workload.annotations
    if group.kind == KIND_NATIVE:
        first = min(pods, key=lambda p: p.name) if pods else None
        middle: Mapping[str, str] = {}
        if controller is not None:
            middle = controller.annotations
        elif first is not None and first.owner is None:
            middle = first.annotations
        return {**own, **middle, **(template_owner.annotations if template_owner else {})}
    if group.kind == KIND_COMPOSITE:
        # The CompositePodGroup, then the Workload it was made from (as for a PodGroup).
        return {**own, **(template_owner.annotations if template_owner else {})}
    if pod_group is not None:
        return {
            **pod_group.annotations,
            **own,
            **(template_owner.annotations if template_owner else {}),
        }
    return own


def configuring_pod_group(
    group: Group, pods: Iterable[KubePod], workload: KubeWorkload | None, store: Store
) -> tuple[KubeWorkload | None, KubeWorkload | None]:
    """(``basic`` PodGroup, Workload) whose annotations configure a group's job besides its
    root (:func:`annotations_of`): for a Workload API gang (None, its Workload); for a group
    whose pods name a ``basic`` PodGroup (:func:`is_basic`) that PodGroup and its Workload;
    otherwise (None, None)."""
    if group.kind in (KIND_NATIVE, KIND_COMPOSITE):
        return None, template_owner_of(workload, store)
    pg = pod_group_of(pods, store)
    if pg is None or not is_basic(pg, store):
        return None, None
    return pg, template_owner_of(pg, store)


def template_owner_of(root: KubeWorkload | None, store: Store) -> KubeWorkload | None:
    """The Workload (scheduling.k8s.io) a Workload API PodGroup ``root`` was made from, if
    it names one and it is observed (a missing Workload adds nothing, as in Slinky)."""
    if root is None or root.workload_kind not in (KIND_NATIVE, KIND_COMPOSITE):
        return None
    if not root.workload_name:
        return None
    return store.get(
        KubeWorkload, workload_key(root.namespace, KIND_NATIVE_WORKLOAD, root.workload_name)
    )


def controller_of(group: Group, pods: list[KubePod], store: Store) -> KubeWorkload | None:
    """The root controller of a Workload API PodGroup's first pod (by name), when observed:
    its JobSet (label, or its Job's owner), its LeaderWorkerSet, or its batch/v1 Job (Slinky
    slurm-bridge 1.3 annotations.go: ``getRootOwnerMetadata`` of the first pod); None for
    other groups and for a pod with no such controller."""
    if group.kind != KIND_NATIVE or not pods:
        return None
    p = min(pods, key=lambda p: p.name)
    ns = p.namespace
    if name := p.labels.get(LABEL_JOBSET):
        return store.get(KubeWorkload, workload_key(ns, "JobSet", name))
    if name := p.labels.get(LABEL_LWS_NAME):
        return store.get(KubeWorkload, workload_key(ns, "LeaderWorkerSet", name))
    owner = p.owner
    if owner is None or owner.kind != "Job" or not owner.api_version.startswith("batch/"):
        return None
    job = store.get(KubeWorkload, workload_key(ns, "Job", owner.name))
    if job is not None and job.owner is not None and job.owner.kind == "JobSet":
        return store.get(KubeWorkload, workload_key(ns, "JobSet", job.owner.name)) or job
    return job


def expected_size(
    group: Group, root: KubeWorkload | None, template_owner: KubeWorkload | None = None
) -> int:
    """Pods the group waits for before its job is submitted (0: no minimum): the root's
    ``size``; for a Workload API PodGroup its gang ``minCount``, 0 for a ``basic`` policy,
    and the Workload template's ``minCount`` when the PodGroup gives no policy."""
    if root is None or (group.kind == "Job" and "/" in group.name):
        return 0  # a Job's pod placed alone (basic_group) waits for no sibling
    if group.kind == KIND_NATIVE and root.policy == "":
        if template_owner is None:
            return 0
        return template_owner.templates.get(root.template_name, 0)
    return root.size


def pod_event(pod: KubePod, reason: str, message: str, *, warning: bool = False) -> RecordEvent:
    """A Kubernetes Event on ``pod`` (Normal, or Warning)."""
    return RecordEvent(
        api_version="v1",
        object_kind="Pod",
        name=pod.name,
        namespace=pod.namespace,
        uid=pod.uid,
        type="Warning" if warning else "Normal",
        reason=reason,
        message=message,
    )


def group_read(event: KubePod) -> KubePod:
    """What ``placement`` and ``workload`` read of a pod (``ReconcilerSpec.reads``): all of
    it but readiness (``ready``, ``ready_since``) and the phase beyond "ended or not"
    (:attr:`~schemas.events.KubePod.terminal`; neither reconciler, nor a module they use,
    tells Pending from Running), and without the envelope's bookkeeping. A pod starting on
    its node therefore triggers neither."""
    return msgspec.structs.replace(
        event,
        phase="ended" if event.terminal else "",
        ready=False,
        ready_since=0,
        observed_at=0,
        version="",
        producer="",
    )
