"""Slinky slurm-bridge 1.3's reading of the Workload API (issue 28, item 7), as table cases in
our own words from Slinky's Go tests:

* ``internal/utils/slurmjobir/basic_podgroup_test.go`` — a ``basic`` PodGroup only adds
  annotations: each pod keeps its controller's grouping (a Job's pods one by one, a
  LeaderWorkerSet its replica, a bare pod alone), its root and time limit (a Job's
  ``activeDeadlineSeconds``), the annotations merged PodGroup → controller → Workload;
* ``internal/utils/slurmjobir/annotations_test.go`` / ``annotations.go`` — a gang's
  controller is its first pod's root owner (a JobSet above the Job, a bare pod itself);
* ``internal/utils/slurmjobir/podgroup.go`` ``fromPodGroup`` — a gang's job is named after
  the PodGroup (the group's name, never a kind-qualified key);
* ``internal/admission/podgroup_test.go`` ``TestPodAdmission_PodGroupDeprecation`` — a pod
  naming a ``scheduling.x-k8s.io/v1alpha1`` PodGroup is warned, never denied.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from reconcilers import _pods, placement
from reconcilers.base import Context
from schemas import wellknown
from schemas.actions import SubmitSlurmJob
from schemas.events import (
    Event,
    KubePod,
    KubeWorkload,
    OwnerRef,
    SlurmPartition,
    workload_key,
)
from slurmbridge.runtime.projection import Projection
from slurmbridge.webhook import (
    POD_GROUP_DEPRECATED,
    Policy,
    decode_review,
    response,
    validate,
    warnings,
)
from tests.unit._listing import listed
from tests.unit._pods import kube_pod, kube_workload

SCHED = wellknown.DEFAULT_SCHEDULER_NAME
CTX = Context(scheduler_name=SCHED, cluster="c1", now=1000.0)
P = wellknown.ANNOTATION_SLURMJOB_PREFIX
JOBID = wellknown.LABEL_SLURM_JOBID
NATIVE = wellknown.KIND_NATIVE_POD_GROUP
WORKLOAD = wellknown.KIND_NATIVE_WORKLOAD
BATCH = SlurmPartition(source="slurm:c1", key="batch", cluster="c1")
JOB_OWNER = OwnerRef(api_version="batch/v1", kind="Job", name="job", uid="uid-job")


def kpod(
    name: str,
    *,
    owner: OwnerRef | None = JOB_OWNER,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    phase: str = "Pending",
    job: int | None = None,
    group: str = "workers",
) -> KubePod:
    lab = dict(labels or {})
    if owner is not None and owner.kind == "Job":
        lab.setdefault(_pods.LABEL_JOB_NAME, owner.name)
    if job is not None:
        lab[JOBID] = str(job)
    return kube_pod(
        "default",
        name,
        uid=f"u-{name}",
        scheduler_name=SCHED,
        labels=lab,
        annotations=annotations or {},
        owner=owner,
        scheduling_group=group,
        phase=phase,
        node_name="n9" if phase == "Running" else "",
        cpu_millis=1000,
    )


def podgroup(
    policy: str, *, size: int = 0, annotations: dict[str, str] | None = None
) -> KubeWorkload:
    return kube_workload(
        "default",
        NATIVE,
        "workers",
        uid="uid-pg",
        api_version="scheduling.k8s.io/v1beta1",
        size=size,
        policy=policy,
        workload_name="workload",
        template_name="workers",
        annotations=annotations or {},
    )


def workload_obj(annotations: dict[str, str], templates: dict[str, int] | None = None) -> Any:
    return kube_workload(
        "default",
        WORKLOAD,
        "workload",
        uid="uid-wl",
        templates=templates or {"workers": 0},
        annotations=annotations,
    )


def controller(kind: str, name: str, annotations: dict[str, str], **kw: Any) -> KubeWorkload:
    return kube_workload("default", kind, name, annotations=annotations, **kw)


def store(*objs: Event) -> Projection:
    """``objs`` in a complete Slurm listing (tests.unit._listing)."""
    p = Projection()
    for i, o in enumerate(listed(objs), 1):
        p.apply(o, i)
    return p


def submits(objs: tuple[Event, ...], key: str) -> list[SubmitSlurmJob]:
    d = placement.decide(placement.view(store(*objs, BATCH), key, CTX))
    return [a for a in d.actions if isinstance(a, SubmitSlurmJob)]


# The objects of basic_podgroup_test.go's Job cases: the PodGroup gives account, partition and
# QOS; the Workload QOS; the Job partition, QOS and a 120 s deadline; the pod a wckey (ignored:
# the pod is not the root).
BASIC_PG = podgroup(
    "basic", annotations={P + "account": "group-account", P + "partition": "batch", P + "qos": "pg"}
)
WL = workload_obj({P + "qos": "workload-qos"})
JOB = controller(
    "Job",
    "job",
    {P + "partition": "batch", P + "qos": "job-qos"},
    size=1,
    active_deadline_s=120,
)
PENDING = kpod("pending", annotations={P + "wckey": "ignored-pod-wckey"})


@dataclass(frozen=True)
class BasicJobCase:
    """basic_podgroup_test.go ``TestTranslateToSlurmJobIR_BasicPodGroupJobs``: the sibling
    (an earlier pod of the Job, with a job label) never joins the pending pod's job."""

    name: str
    sibling: KubePod


BASIC_JOBS = [
    BasicJobCase("sequential Job after completion", kpod("previous", phase="Succeeded", job=3)),
    BasicJobCase("replacement Job pod after failure", kpod("previous", phase="Failed", job=3)),
    BasicJobCase("parallel Job with a running sibling", kpod("previous", phase="Running", job=3)),
]


@pytest.mark.parametrize("case", BASIC_JOBS, ids=lambda c: c.name)
def test_a_basic_pod_group_leaves_a_jobs_pods_one_by_one(case: BasicJobCase) -> None:
    s = store(BASIC_PG, WL, JOB, PENDING, case.sibling)
    group = _pods.resolve_group(PENDING, s, "c1")
    assert group.key == "default/Job:job/pending"
    assert group.root_key == workload_key("default", "Job", "job")
    assert [p.name for p in _pods.pods_of(group, s, "c1")] == ["pending"]
    (submit,) = submits((BASIC_PG, WL, JOB, PENDING, case.sibling), group.key)
    spec = submit.spec
    assert (spec.tasks, spec.min_nodes, spec.max_nodes) == (1, 1, 1)
    assert spec.time_limit_minutes == 2, "the Job's activeDeadlineSeconds, in minutes"
    # PodGroup < Job < Workload; the pod's own wckey is not read (the Job is the root).
    assert (spec.account, spec.partition, spec.qos, spec.wckey) == (
        "group-account",
        "batch",
        "workload-qos",
        "",
    )
    assert spec.name == "pending"
    assert submit.marker == "slurmbridge:default/Job:job/pending:uid-job"


def test_a_basic_pod_groups_job_pods_each_get_a_job_of_their_own() -> None:
    """basic_podgroup_test.go: "Basic Job should schedule independently"."""
    a, b = kpod("a"), kpod("b")
    s = store(BASIC_PG, WL, JOB, a, b)
    keys = sorted(_pods.resolve_group(p, s, "c1").key for p in (a, b))
    assert keys == ["default/Job:job/a", "default/Job:job/b"]
    assert _pods.groups_under(BASIC_PG, s, "c1") == [*keys, f"default/{NATIVE}:workers"]
    assert set(keys) <= set(_pods.groups_under(JOB, s, "c1"))
    assert set(keys) <= set(_pods.groups_under(WL, s, "c1"))
    for key in keys:
        (submit,) = submits((BASIC_PG, WL, JOB, a, b), key)
        assert submit.spec.tasks == 1


@dataclass(frozen=True)
class OwnerCase:
    """basic_podgroup_test.go ``TestTranslateToSlurmJobIR_BasicPodGroupOwnerScheduling``."""

    name: str
    pods: tuple[KubePod, ...]
    owner: KubeWorkload | None
    key: str
    tasks: int
    qos: str


LWS = controller("LeaderWorkerSet", "lws", {P + "qos": "lws-qos"}, size=2)
LWS_LABELS = {_pods.LABEL_LWS_NAME: "lws", _pods.LABEL_LWS_GROUP_INDEX: "0"}
OWNERS = [
    OwnerCase(
        "standalone Pod: alone, its own annotations",
        tuple(kpod(n, owner=None, annotations={P + "qos": "pod-qos"}) for n in ("p1", "p2")),
        None,
        "default/Pod:p1",
        1,
        "pod-qos",
    ),
    OwnerCase(
        "LeaderWorkerSet: its replica, its annotations",
        tuple(kpod(n, owner=None, labels=LWS_LABELS) for n in ("p1", "p2")),
        LWS,
        "default/LeaderWorkerSet:lws/0",
        2,
        "lws-qos",
    ),
]


@pytest.mark.parametrize("case", OWNERS, ids=lambda c: c.name)
def test_a_basic_pod_group_keeps_the_owners_grouping(case: OwnerCase) -> None:
    pg = podgroup("basic")
    objs: tuple[Event, ...] = (pg, *case.pods) + ((case.owner,) if case.owner else ())
    s = store(*objs)
    assert _pods.resolve_group(case.pods[0], s, "c1").key == case.key
    (submit,) = submits(objs, case.key)
    assert (submit.spec.tasks, submit.spec.qos) == (case.tasks, case.qos)


def test_a_basic_pod_groups_incomplete_leaderworkerset_replica_still_waits() -> None:
    """basic_podgroup_test.go: "Basic PodGroup membership must not bypass LWS readiness"."""
    one = kpod("p1", owner=None, labels=LWS_LABELS)
    assert submits((podgroup("basic"), LWS, one), "default/LeaderWorkerSet:lws/0") == []


def test_a_pod_group_giving_no_policy_is_basic_when_its_workload_template_is() -> None:
    """The Workload template decides a PodGroup without a policy (its gang minCount 0)."""
    pg = podgroup("")
    s = store(pg, workload_obj({}, {"workers": 0}), JOB, PENDING)
    assert _pods.resolve_group(PENDING, s, "c1").key == "default/Job:job/pending"
    gang = store(pg, workload_obj({}, {"workers": 2}), JOB, PENDING)
    assert _pods.resolve_group(PENDING, gang, "c1").key == f"default/{NATIVE}:workers"


# --- gangs: the controller is the first pod's root, the job named after the PodGroup -------


def test_a_gangs_controller_is_the_jobset_above_its_job() -> None:
    """annotations.go ``applySlurmAnnotations``: ``getRootOwnerMetadata`` of the first pod."""
    pg = podgroup("gang", size=1, annotations={P + "qos": "pg"})
    jobset = controller("JobSet", "js", {P + "qos": "jobset"})
    job = controller(
        "Job",
        "job",
        {P + "qos": "job"},
        owner=OwnerRef(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet", name="js", uid="u"),
    )
    p = kpod("w-0")
    key = f"default/{NATIVE}:workers"
    (submit,) = submits((pg, jobset, job, p), key)
    assert submit.spec.qos == "jobset"


def test_a_gang_of_bare_pods_reads_the_first_pods_own_annotations() -> None:
    pg = podgroup("gang", size=2, annotations={P + "qos": "pg", P + "account": "a"})
    pods = (
        kpod("b", owner=None, annotations={P + "qos": "other"}),
        kpod("a", owner=None, annotations={P + "qos": "pod"}),
    )
    (submit,) = submits((pg, *pods), f"default/{NATIVE}:workers")
    assert (submit.spec.qos, submit.spec.account) == ("pod", "a")


@dataclass(frozen=True)
class NameCase:
    """Default job names (podgroup.go ``fromPodGroup``, leaderworkerset.go): the group's
    name, never ``namespace/Kind:name``."""

    key: str
    want: str


NAMES = [
    NameCase(f"default/{NATIVE}:workers", "workers"),
    NameCase("default/Job:train", "train"),
    NameCase("default/Job:train/train-0", "train-0"),
    NameCase("default/JobSet:js", "js"),
    NameCase("default/PodGroup:cos", "cos"),
    NameCase("default/Pod:solo", "solo"),
    NameCase("default/LeaderWorkerSet:lws/3", "lws-3"),
]


@pytest.mark.parametrize("case", NAMES, ids=lambda c: c.key)
def test_default_job_names_are_the_groups_name(case: NameCase) -> None:
    group = _pods.parse_group_key(case.key)
    assert group is not None
    assert _pods.default_job_name(group) == case.want


def test_a_gangs_job_is_named_after_its_pod_group() -> None:
    pods = tuple(kpod(f"w-{i}") for i in range(2))
    (submit,) = submits((podgroup("gang", size=2), JOB, *pods), f"default/{NATIVE}:workers")
    assert submit.spec.name == "workers"


# --- admission: a coscheduling PodGroup is warned about, never denied ----------------------

COS = "scheduling.x-k8s.io/pod-group"
BY_LIST = Policy(managed_namespaces=frozenset({"managed"}))
BY_SELECTOR = Policy(managed_namespace_selector={"matchLabels": {"managed": "true"}})


def wire_pod(
    ns: str, scheduler: str, labels: dict[str, str], group: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"metadata": {"name": "p", "namespace": ns, "labels": labels}, "spec": spec}


def review(op: str, obj: dict[str, Any] | None, old: dict[str, Any] | None = None) -> Any:
    req = {
        "uid": "u",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": op,
        "namespace": (obj or old or {})["metadata"]["namespace"],
        "name": "p",
        "object": obj,
        "oldObject": old,
    }
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
    return decode_review(json.dumps(body).encode())


@dataclass(frozen=True)
class WarnCase:
    """podgroup_test.go ``TestPodAdmission_PodGroupDeprecation``."""

    name: str
    ns: str
    labels: dict[str, str]
    scheduler: str = "default-scheduler"
    group: str | None = None
    policy: Policy = BY_LIST
    ns_labels: dict[str, str] = field(default_factory=dict)
    warn: bool = False


WARNS = [
    WarnCase("coscheduling group in a managed namespace", "managed", {COS: "legacy"}, warn=True),
    WarnCase(
        "coscheduling group naming our scheduler", "elsewhere", {COS: "legacy"}, SCHED, warn=True
    ),
    WarnCase(
        "coscheduling group in a selected namespace",
        "selected",
        {COS: "legacy"},
        policy=BY_SELECTOR,
        ns_labels={"managed": "true"},
        warn=True,
    ),
    WarnCase("coscheduling group elsewhere", "elsewhere", {COS: "legacy"}),
    WarnCase("an empty label", "managed", {COS: ""}),
    WarnCase("no pod group", "managed", {}),
    WarnCase("a Workload API group", "managed", {}, group="native"),
    WarnCase(
        "a Workload API group beside the label", "managed", {COS: "legacy"}, group="n", warn=True
    ),
]


@pytest.mark.parametrize("case", WARNS, ids=lambda c: c.name)
def test_a_pod_naming_a_coscheduling_pod_group_is_warned_never_denied(case: WarnCase) -> None:
    pod = wire_pod(case.ns, case.scheduler, case.labels, case.group)
    bare = wire_pod(case.ns, case.scheduler, {}, case.group)
    ops = {
        "create": (review("CREATE", pod), case.warn),
        "update": (review("UPDATE", pod, pod), case.warn),
        "adding the label": (review("UPDATE", pod, bare), case.warn),
        "removing the label": (review("UPDATE", bare, pod), False),
        "delete": (review("DELETE", None, pod), False),
    }
    for op, (req, want) in ops.items():
        said = warnings(req, case.policy, case.ns_labels)
        assert said == ([POD_GROUP_DEPRECATED] if want else []), op
        assert validate(req, case.policy) is None, f"{op}: a warning, never a denial"
    for part in (
        "scheduling.x-k8s.io/v1alpha1",
        "deprecated",
        "removed in a future release",
        "slurm-bridge",
        "Kubernetes native PodGroups",
        "spec.schedulingGroup.podGroupName",
    ):
        assert part in POD_GROUP_DEPRECATED


def test_the_admission_response_carries_the_warnings() -> None:
    answer = json.loads(response("u", warnings=[POD_GROUP_DEPRECATED]))["response"]
    assert answer == {"uid": "u", "allowed": True, "warnings": [POD_GROUP_DEPRECATED]}
    assert "warnings" not in json.loads(response("u"))["response"]
