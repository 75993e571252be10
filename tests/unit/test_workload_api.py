"""The Kubernetes Workload API (``scheduling.k8s.io`` PodGroup and Workload) as pod groups:
translation and watcher decoding, grouping, the gang's wait, the annotation merge, the
PodGroup's scheduled condition (placement), short gangs and cleanup (workload), and the
simulator's validation of the fields used."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import pytest

from producers.kube.translate import pod_to_event, workload_to_event
from producers.kube.watch import RESOURCES, SchedulingWatcher
from reconcilers import _pods, placement, workload
from reconcilers.base import NOTHING, Context
from schemas import wellknown
from schemas.actions import (
    BindPod,
    CancelSlurmJob,
    SetPodGroupScheduled,
    SubmitSlurmJob,
)
from schemas.events import (
    Event,
    KubeListed,
    KubeNode,
    KubePod,
    KubeWorkload,
    OwnerRef,
    SlurmJob,
    SlurmPartition,
    SlurmPing,
    tombstone,
)
from slurmbridge.devtools.sim.kube import ApiError, KubeSim
from slurmbridge.kube.wire import DECODE_POD, DECODE_WORKLOAD, DECODE_WORKLOAD_LIST
from slurmbridge.runtime.projection import Projection
from tests.unit._listing import listed
from tests.unit._pods import kube_workload, ns_pod

SCHED = wellknown.DEFAULT_SCHEDULER_NAME
CTX = Context(scheduler_name=SCHED, cluster="c1", now=1000.0)
P = wellknown.ANNOTATION_SLURMJOB_PREFIX
JOBID = wellknown.LABEL_SLURM_JOBID
FIN = wellknown.FINALIZER_SCHEDULER
NATIVE = wellknown.KIND_NATIVE_POD_GROUP
WORKLOAD = wellknown.KIND_NATIVE_WORKLOAD
KEY = f"ns/{NATIVE}:train-workers"
MIB = 1024 * 1024
BATCH = SlurmPartition(source="slurm:c1", key="batch", cluster="c1")
PING = SlurmPing(source="slurm:c1", key="c1", cluster="c1", responding=True)
PODS_LISTED = KubeListed(source="k8s", key="pods", resource="pods")
JOB_OWNER = OwnerRef(api_version="batch/v1", kind="Job", name="train", uid="uid-train")


def pod(
    name: str,
    *,
    group: str = "train-workers",
    labels: dict[str, str] | None = None,
    owner: OwnerRef | None = JOB_OWNER,
    job: int | None = None,
    node: str = "",
    phase: str = "Pending",
) -> KubePod:
    labels = dict(labels or {})
    if owner is not None and owner.kind == "Job":
        labels.setdefault(_pods.LABEL_JOB_NAME, owner.name)
    marks: dict[str, Any] = {}
    if job is not None:
        labels[JOBID] = str(job)
        marks = {"finalizers": (FIN,), "tolerations": (wellknown.TAINT_MANAGED_NODE,)}
    return ns_pod(
        name,
        scheduler_name=SCHED,
        labels=labels,
        owner=owner,
        scheduling_group=group,
        node_name=node,
        phase=phase,
        cpu_millis=1000,
        memory_bytes=256 * MIB,
        **marks,
    )


def pod_group(
    *,
    policy: str = "gang",
    size: int = 4,
    annotations: dict[str, str] | None = None,
    scheduled: bool = False,
    api: str = "v1beta1",
) -> KubeWorkload:
    return kube_workload(
        "ns",
        NATIVE,
        "train-workers",
        uid="uid-pg",
        api_version=f"scheduling.k8s.io/{api}",
        size=size if policy == "gang" else 0,
        policy=policy,
        workload_name="train",
        template_name="workers",
        annotations=annotations or {},
        scheduled=scheduled,
    )


def wl(templates: dict[str, int], annotations: dict[str, str] | None = None) -> KubeWorkload:
    return kube_workload(
        "ns", WORKLOAD, "train", uid="uid-wl", templates=templates, annotations=annotations or {}
    )


def batch_job(annotations: dict[str, str] | None = None) -> KubeWorkload:
    return kube_workload("ns", "Job", "train", size=4, annotations=annotations or {})


def sjob(job_id: int, state: str, nodes: tuple[str, ...] = ()) -> SlurmJob:
    return SlurmJob(
        source="slurm:c1",
        key=str(job_id),
        cluster="c1",
        job_id=job_id,
        state=(state,),
        nodes=nodes,
        comment=f"slurmbridge:{KEY}:uid-pg",
    )


def store(*objs: Event) -> Projection:
    """``objs`` in a complete Slurm listing (tests.unit._listing)."""
    p = Projection()
    for i, o in enumerate(listed(objs), 1):
        p.apply(o, i)
    return p


def place(*objs: Event) -> Any:
    return placement.decide(placement.view(store(*objs), KEY, CTX))


def of(d: Any, kind: type[Any]) -> list[Any]:
    return [a for a in d.actions if isinstance(a, kind)]


PODS4 = tuple(pod(f"train-{i}") for i in range(4))


# --- translation and the watcher's decoding --------------------------------------------------


def test_a_pods_scheduling_group_is_translated_and_kept_in_its_tombstone() -> None:
    raw = DECODE_POD.decode(
        b'{"metadata":{"name":"w-0","namespace":"ns","uid":"u"},'
        b'"spec":{"schedulingGroup":{"podGroupName":"train-workers"}}}'
    )
    ev = pod_to_event(raw, producer="p", observed_at=1)
    assert ev.scheduling_group == "train-workers"
    assert tombstone(ev, version="9", producer="p", observed_at=2).scheduling_group == (
        "train-workers"
    )
    bare = pod_to_event(
        DECODE_POD.decode(b'{"metadata":{"name":"x"}}'), producer="p", observed_at=1
    )
    assert bare.scheduling_group == ""


PG_V1ALPHA2 = b"""{"apiVersion":"scheduling.k8s.io/v1alpha2","kind":"PodGroup",
 "metadata":{"name":"train-workers","namespace":"ns","uid":"u1","resourceVersion":"5",
   "annotations":{"slurmjob.slinky.slurm.net/qos":"high","other.io/x":"y"}},
 "spec":{"podGroupTemplateRef":{"workload":{"workloadName":"train","podGroupTemplateName":"workers"}},
   "schedulingPolicy":{"gang":{"minCount":4}}},
 "status":{"conditions":[{"type":"PodGroupScheduled","status":"True","reason":"Scheduled"}]}}"""
PG_V1BETA1 = b"""{"apiVersion":"scheduling.k8s.io/v1beta1","kind":"PodGroup",
 "metadata":{"name":"train-workers","namespace":"ns","uid":"u1"},
 "spec":{"workloadRef":{"workloadName":"train","templateName":"workers"},
   "schedulingPolicy":{"basic":{}}},
 "status":{"conditions":[{"type":"PodGroupInitiallyScheduled","status":"False"}]}}"""
WL = b"""{"apiVersion":"scheduling.k8s.io/v1beta1","kind":"Workload",
 "metadata":{"name":"train","namespace":"ns","uid":"u2"},
 "spec":{"controllerRef":{"apiGroup":"batch","kind":"Job","name":"train"},
   "podGroupTemplates":[{"name":"workers","schedulingPolicy":{"gang":{"minCount":4}}},
                        {"name":"driver","schedulingPolicy":{"basic":{}}}]}}"""


def _watcher(plural: str) -> SchedulingWatcher:
    kind = next(
        r.extra["kind"] for r in RESOURCES if r.extra.get("kind", ("", ""))[1:] == (plural,)
    )
    return SchedulingWatcher(None, None, producer="p", seed={}, kind=kind)  # type: ignore[arg-type]


def test_the_scheduling_watchers_are_in_the_resource_table_with_their_listing_names() -> None:
    pg, wk = _watcher("podgroups"), _watcher("workloads")
    assert (pg.resource, pg.kind, pg.group) == (
        "podgroups.scheduling.k8s.io",
        NATIVE,
        "scheduling.k8s.io",
    )
    assert (wk.resource, wk.kind) == ("workloads.scheduling.k8s.io", WORKLOAD)
    assert pg.version == "v1beta1", "the newest version is tried first"


def test_a_v1alpha2_pod_group_decodes_to_its_gang_reference_and_scheduled_condition() -> None:
    w = _watcher("podgroups")
    w.version = "v1alpha2"
    ev = w._translate(w._decode_item(PG_V1ALPHA2), 1)
    assert ev.key == f"ns/{NATIVE}:train-workers"
    assert (ev.workload_kind, ev.api_version) == (NATIVE, "scheduling.k8s.io/v1alpha2")
    assert (ev.size, ev.policy, ev.workload_name, ev.template_name) == (
        4,
        "gang",
        "train",
        "workers",
    )
    assert ev.scheduled is True
    assert ev.annotations == {P + "qos": "high"}


def test_a_v1beta1_basic_pod_group_is_no_gang_and_not_scheduled_while_its_condition_is_false() -> (
    None
):
    w = _watcher("podgroups")
    listing = b'{"metadata":{"resourceVersion":"7"},"items":[' + PG_V1BETA1 + b"]}"
    items, rv = w._decode_list(listing)
    assert rv == "7"
    ev = w._translate(items[0], 1)
    assert (ev.size, ev.policy, ev.template_name, ev.scheduled) == (0, "basic", "workers", False)
    assert ev.api_version == "scheduling.k8s.io/v1beta1"


def test_a_workload_decodes_to_its_templates_min_counts() -> None:
    raw = DECODE_WORKLOAD.decode(WL)
    raw.kind = WORKLOAD  # as its watcher sets it
    ev = workload_to_event(raw, producer="p", observed_at=1)
    assert ev.key == f"ns/{WORKLOAD}:train"
    assert ev.templates == {"workers": 4, "driver": 0}
    assert ev.size == 0


def test_a_coscheduling_pod_group_keeps_its_own_kind() -> None:
    raw = DECODE_WORKLOAD_LIST.decode(
        b'{"items":[{"kind":"PodGroup","metadata":{"name":"pg","namespace":"ns"},'
        b'"spec":{"minMember":3}}]}'
    ).items[0]
    ev = workload_to_event(raw, producer="p", observed_at=1)
    assert (ev.workload_kind, ev.size, ev.policy) == ("PodGroup", 3, "")


# --- grouping --------------------------------------------------------------------------------


def test_the_scheduling_group_wins_over_every_other_grouping() -> None:
    """Slinky TranslateToSlurmJobIR: spec.schedulingGroup.podGroupName before the coscheduling
    label and the owner chain."""
    p = pod(
        "x",
        labels={_pods.LABEL_JOBSET: "js", _pods.LABEL_POD_GROUP: "cos", _pods.LABEL_LWS_NAME: "l"},
    )
    g = _pods.group_of(p)
    assert (g.kind, g.name, g.key) == (NATIVE, "train-workers", KEY)
    assert _pods.parse_group_key(KEY) == g
    assert g.root_key == f"ns/{NATIVE}:train-workers"
    assert _pods.group_of(pod("y", group="")).key == "ns/Job:train"


def test_a_pod_placed_from_its_job_before_keeps_that_job_by_the_jobs_word() -> None:
    """A pod placed as its Job's (by a bridge that did not read spec.schedulingGroup) stays
    in the Job's group while its job lives: it never leaves that job looking orphaned."""
    placed = pod("train-0", job=7, node="n0", phase="Running")
    job = SlurmJob(
        source="slurm:c1",
        key="7",
        cluster="c1",
        job_id=7,
        state=("RUNNING",),
        comment="slurmbridge:ns/Job:train:uid-train",
    )
    s = store(pod_group(), batch_job(), placed, job)
    assert _pods.resolve_group(placed, s, "c1").key == "ns/Job:train"
    assert _pods.pods_of(_pods.group_of(placed), s, "c1") == []
    job_group = _pods.parse_group_key("ns/Job:train")
    assert job_group is not None
    assert [p.name for p in _pods.pods_of(job_group, s, "c1")] == ["train-0"]
    # Without the job's word, the scheduling group wins.
    fresh = pod("train-1")
    assert _pods.resolve_group(fresh, store(fresh), "c1").key == KEY


def test_pods_of_a_native_group_are_found_by_their_scheduling_group_in_its_namespace() -> None:
    other_ns = msgspec.structs.replace(pod("z"), key="ms/z", namespace="ms")
    s = store(pod("b"), pod("a"), pod("c", group="else"), other_ns)
    g = _pods.group_of(pod("a"))
    assert [p.name for p in _pods.pods_of(g, s, "c1")] == ["a", "b"]


def test_a_workload_and_a_job_trigger_the_native_groups_they_configure() -> None:
    s = store(pod_group(), pod("train-0"), batch_job(), wl({"workers": 4}))
    assert _pods.groups_under(wl({"workers": 4}), s, "c1") == [KEY]
    assert _pods.groups_under(batch_job(), s, "c1") == ["ns/Job:train", KEY]
    assert _pods.groups_under(pod_group(), s, "c1") == [KEY]


@dataclass(frozen=True)
class SizeCase:
    name: str
    root: KubeWorkload | None
    owner: KubeWorkload | None
    want: int


SIZES = [
    SizeCase("gang minCount", pod_group(size=4), None, 4),
    SizeCase("basic: no gang", pod_group(policy="basic"), wl({"workers": 4}), 0),
    SizeCase("no policy: the template's", pod_group(policy="", size=0), wl({"workers": 3}), 3),
    SizeCase("no policy, template basic", pod_group(policy="", size=0), wl({"workers": 0}), 0),
    SizeCase("no policy, no Workload", pod_group(policy="", size=0), None, 0),
    SizeCase("PodGroup not observed", None, None, 0),
]


@pytest.mark.parametrize("case", SIZES, ids=lambda c: c.name)
def test_the_expected_size_of_a_native_group(case: SizeCase) -> None:
    g = _pods.group_of(pod("a"))
    assert _pods.expected_size(g, case.root, case.owner) == case.want


def test_annotations_merge_pod_group_then_job_then_workload_root_most_winning() -> None:
    """Slinky parsePodGroupSlurmAnnotations: Workload > controller (Job) > PodGroup."""
    g = _pods.group_of(pod("a"))
    merged = _pods.annotations_of(
        g,
        [pod("a")],
        pod_group(annotations={P + "timelimit": "9", P + "qos": "pg", P + "account": "a"}),
        controller=batch_job({P + "timelimit": "5", P + "qos": "job"}),
        template_owner=wl({}, {P + "timelimit": "7"}),
    )
    assert merged == {P + "timelimit": "7", P + "qos": "job", P + "account": "a"}


# --- placement -------------------------------------------------------------------------------


def test_pods_wait_for_their_pod_group_to_be_observed() -> None:
    d = place(*PODS4, BATCH)
    assert d.actions == ()
    assert "waiting for" in d.reason and "observed" in d.reason


@dataclass(frozen=True)
class WaitCase:
    name: str
    objs: tuple[Event, ...]
    tasks: int | None  # None: still waiting


WAITS = [
    WaitCase("3 of minCount 4 wait", (pod_group(), *PODS4[:3]), None),
    WaitCase("4 of minCount 4 run", (pod_group(), *PODS4), 4),
    WaitCase("5 pods: sized by the pods present", (pod_group(), *PODS4, pod("train-4")), 5),
    # A basic policy is no gang and its pods keep their own grouping:
    # tests/unit/test_slinky13_workload_api.py.
    WaitCase(
        "no policy: the Workload template's minCount",
        (pod_group(policy="", size=0), wl({"workers": 3}), *PODS4[:2]),
        None,
    ),
    WaitCase(
        "no policy: template met",
        (pod_group(policy="", size=0), wl({"workers": 3}), *PODS4[:3]),
        3,
    ),
]


@pytest.mark.parametrize("case", WAITS, ids=lambda c: c.name)
def test_the_gang_waits_for_min_count_pods(case: WaitCase) -> None:
    d = place(*case.objs, BATCH)
    submits = of(d, SubmitSlurmJob)
    if case.tasks is None:
        assert d.actions == ()
        assert "waiting for the group's pods" in d.reason
        return
    (submit,) = submits
    assert (submit.group, submit.spec.tasks, submit.spec.min_nodes) == (KEY, case.tasks, case.tasks)
    assert submit.marker == f"slurmbridge:{KEY}:uid-pg"
    assert submit.spec.name == "train-workers"  # the PodGroup's name (Slinky fromPodGroup)


def test_the_job_is_configured_by_the_merged_annotations() -> None:
    d = place(
        pod_group(annotations={P + "timelimit": "9", P + "qos": "high"}),
        batch_job({P + "timelimit": "5", P + "partition": "batch"}),
        wl({"workers": 4}, {P + "timelimit": "7", P + "job-name": "train-gang"}),
        *PODS4,
        BATCH,
    )
    (submit,) = of(d, SubmitSlurmJob)
    spec = submit.spec
    assert (spec.name, spec.time_limit_minutes, spec.qos, spec.partition) == (
        "train-gang",
        7,
        "high",
        "batch",
    )


def test_a_pod_with_the_coscheduling_label_too_is_not_held_as_a_missing_pod_group() -> None:
    labelled = tuple(
        msgspec.structs.replace(p, labels={_pods.LABEL_POD_GROUP: "absent"}) for p in PODS4
    )
    d = place(pod_group(), *labelled, BATCH)
    assert len(of(d, SubmitSlurmJob)) == 1
    assert not [a for a in d.actions if getattr(a, "reason", "") == placement.PODGROUP_MISSING]


def _bound(i: int, job: int = 7) -> KubePod:
    return pod(f"train-{i}", job=job, node=f"n{i}", phase="Running")


RUNNING = sjob(7, "RUNNING", ("n0", "n1", "n2", "n3"))
NODES = tuple(KubeNode(source="k8s", key=f"n{i}", ready=True) for i in range(4))


def test_the_pod_group_is_marked_scheduled_once_every_pod_is_bound() -> None:
    d = place(pod_group(api="v1alpha2"), *(_bound(i) for i in range(4)), RUNNING, BATCH, PING)
    (mark,) = of(d, SetPodGroupScheduled)
    assert mark == SetPodGroupScheduled(
        namespace="ns",
        name="train-workers",
        uid="uid-pg",
        api_version="scheduling.k8s.io/v1alpha2",
        message=f"Pod group admitted by {SCHED}",
    )


def test_a_scheduled_pod_group_is_not_marked_again() -> None:
    d = place(pod_group(scheduled=True), *(_bound(i) for i in range(4)), RUNNING, BATCH, PING)
    assert d == NOTHING


def test_the_pod_group_is_not_marked_while_a_pod_is_unbound() -> None:
    unbound = pod("train-3", job=7)
    d = place(pod_group(), *(_bound(i) for i in range(3)), unbound, RUNNING, *NODES, BATCH, PING)
    assert [a.pod.name for a in of(d, BindPod)] == ["train-3"]
    assert of(d, SetPodGroupScheduled) == []


# --- workload --------------------------------------------------------------------------------


def clean(*objs: Event, key: str = KEY) -> Any:
    return workload.decide(workload.view(store(*objs), key, CTX))


def test_a_short_gang_gives_up_its_pending_job() -> None:
    d = clean(pod_group(), *(pod(f"train-{i}", job=7) for i in range(3)), sjob(7, "PENDING"), PING)
    (cancel,) = of(d, CancelSlurmJob)
    assert cancel.job_id == 7 and "3 of its 4 pods" in cancel.why


def test_a_basic_pod_group_is_no_short_gang() -> None:
    d = clean(pod_group(policy="basic"), pod("train-0", job=7), sjob(7, "PENDING"), PING)
    assert of(d, CancelSlurmJob) == []


def test_the_job_of_a_native_group_whose_pods_are_all_gone_is_cancelled() -> None:
    gone = tombstone(_bound(0), version="9", producer="p", observed_at=2)
    s = store(pod_group(), _bound(0), RUNNING, PING, PODS_LISTED)
    s.apply(gone, 99)
    (key,) = workload.SPEC.keys_of(gone, s, CTX)
    assert key == KEY, "a tombstone still names its group"
    d = workload.decide(workload.view(s, key, CTX))
    (cancel,) = of(d, CancelSlurmJob)
    assert cancel.job_id == 7 and "gone" in cancel.why


# --- the simulator's Workload API ------------------------------------------------------------


def _pg(version: str, policy: dict[str, Any], name: str = "pg") -> dict[str, Any]:
    ref = (
        {"podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}}}
        if version == "v1alpha2"
        else {"workloadRef": {"workloadName": "w", "templateName": "t"}}
    )
    return {
        "apiVersion": f"scheduling.k8s.io/{version}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {**ref, "schedulingPolicy": policy},
    }


def _causes(exc: pytest.ExceptionInfo[ApiError]) -> list[str]:
    assert exc.value.code == 422
    return [c["field"] for c in (exc.value.details or {})["causes"]]


@pytest.mark.parametrize("version", ["v1alpha2", "v1beta1"])
@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ({"gang": {"minCount": 0}}, "spec.schedulingPolicy.gang.minCount"),
        ({"gang": {}}, "spec.schedulingPolicy.gang.minCount"),
        ({"gang": {"minCount": 2}, "basic": {}}, "spec.schedulingPolicy"),
        ({}, "spec.schedulingPolicy"),
    ],
)
def test_the_simulator_refuses_an_invalid_scheduling_policy(
    version: str, policy: dict[str, Any], field: str
) -> None:
    sim = KubeSim(workload_api=version)
    with pytest.raises(ApiError) as exc:
        sim.create(_pg(version, policy))
    assert _causes(exc) == [field]


def test_v1alpha2_pod_group_policy_is_immutable_v1beta1_min_count_is_not() -> None:
    old = KubeSim(workload_api="v1alpha2")
    old.create(_pg("v1alpha2", {"gang": {"minCount": 2}}))
    with pytest.raises(ApiError) as exc:
        old.patch_merge(
            "podgroups.scheduling.k8s.io",
            "pg",
            {"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}},
            namespace="default",
        )
    assert _causes(exc) == ["spec.schedulingPolicy"]
    new = KubeSim(workload_api="v1beta1")
    new.create(_pg("v1beta1", {"gang": {"minCount": 2}}))
    scaled = new.patch_merge(
        "podgroups.scheduling.k8s.io",
        "pg",
        {"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}},
        namespace="default",
    )
    assert scaled["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    with pytest.raises(ApiError) as exc:
        new.patch_merge(
            "podgroups.scheduling.k8s.io",
            "pg",
            {"spec": {"schedulingPolicy": {"gang": None, "basic": {}}}},
            namespace="default",
        )
    assert _causes(exc) == ["spec.schedulingPolicy"]


def test_the_simulator_validates_workload_templates() -> None:
    sim = KubeSim(workload_api="v1alpha2")
    body = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {
            "podGroupTemplates": [
                {"name": f"t{i}", "schedulingPolicy": {"basic": {}}} for i in range(9)
            ]
        },
    }
    with pytest.raises(ApiError) as exc:
        sim.create(body)
    assert _causes(exc) == ["spec.podGroupTemplates"]
    body["spec"]["podGroupTemplates"] = [
        {"name": "t", "schedulingPolicy": {"gang": {"minCount": 2}}}
    ]
    sim.create(body)
    with pytest.raises(ApiError) as exc:
        sim.patch_merge(
            "workloads", "w", {"spec": {"controllerRef": {"kind": "Job", "name": "x"}}}, "default"
        )
    assert _causes(exc) == ["spec"], "a v1alpha2 Workload's spec is immutable"


def test_the_pod_group_status_is_written_through_its_subresource_only() -> None:
    sim = KubeSim(workload_api="v1beta1")
    sim.create(_pg("v1beta1", {"gang": {"minCount": 2}}))
    cond = {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}
    ignored = sim.patch_merge(
        "podgroups.scheduling.k8s.io", "pg", {"status": {"conditions": [cond]}}, "default"
    )
    assert "status" not in ignored or not ignored["status"]
    written = sim.patch_merge(
        "podgroups.scheduling.k8s.io",
        "pg",
        {"status": {"conditions": [cond]}},
        "default",
        subresource="status",
    )
    assert written["status"]["conditions"] == [cond]


def _pod(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"schedulingGroup": {"podGroupName": group}, "containers": [{"name": "c"}]},
    }


def test_a_pods_scheduling_group_is_validated_immutable_or_dropped_without_the_api() -> None:
    sim = KubeSim(workload_api="v1beta1")
    with pytest.raises(ApiError) as exc:
        sim.create(_pod("Not_A_Name"))
    assert _causes(exc) == ["spec.schedulingGroup.podGroupName"]
    created = sim.create(_pod("pg"))
    assert created["spec"]["schedulingGroup"] == {"podGroupName": "pg"}
    with pytest.raises(ApiError) as exc:
        sim.patch_merge(
            "pods", "p", {"spec": {"schedulingGroup": {"podGroupName": "other"}}}, "default"
        )
    assert exc.value.code == 422
    old = KubeSim()  # a 1.35 server
    assert "schedulingGroup" not in old.create(_pod("pg"))["spec"]
    with pytest.raises(ApiError) as exc:
        old.get("podgroups.scheduling.k8s.io", "pg", "default")
    assert exc.value.code == 404
