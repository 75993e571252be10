"""Table-driven tests of pod groups and their translation into a Slurm job (reconcilers._pods)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest

from producers.kube.translate import pod_to_event
from reconcilers import _pods
from reconcilers._pods import Group, TranslationError, parse_memory_mib, parse_time_limit, translate
from schemas.events import KubePod, KubeWorkload, OwnerRef
from slurmbridge.kube.wire import RawPod
from tests.unit._decisions import store
from tests.unit._pods import kube_pod, kube_workload

P = _pods.PREFIX
MIB = 1024 * 1024
GIB = 1024 * MIB
SCHED = "slurm-bridge-scheduler"
JOB_OWNER = OwnerRef(api_version="batch/v1", kind="Job", name="train", uid="job-uid")
BARE = Group(namespace="ns", kind="Pod", name="a")
JOB = Group(namespace="ns", kind="Job", name="train")


def pod(
    name: str = "a",
    *,
    ns: str = "ns",
    labels: dict[str, str] | None = None,
    owner: OwnerRef | None = None,
    cpu: int = 1000,
    mem: int = 64 * MIB,
    gpus: int = 0,
    annotations: dict[str, str] | None = None,
    cpu_max: int = 0,
    mem_max: int = 0,
) -> KubePod:
    return kube_pod(
        ns,
        name,
        uid=f"u-{name}",
        scheduler_name=SCHED,
        labels=labels or {},
        owner=owner,
        cpu_millis=cpu,
        memory_bytes=mem,
        gpus=gpus,
        annotations=annotations or {},
        cpu_millis_max=cpu_max,
        memory_bytes_max=mem_max,
    )


def job_pod(name: str, job: str = "train", ns: str = "ns", **kw: Any) -> KubePod:
    owner = OwnerRef(api_version="batch/v1", kind="Job", name=job, uid=f"uid-{job}")
    return pod(name, ns=ns, labels={_pods.LABEL_JOB_NAME: job}, owner=owner, **kw)


def lws_pod(name: str, lws: str, index: str | None) -> KubePod:
    labels = {_pods.LABEL_LWS_NAME: lws}
    if index is not None:
        labels[_pods.LABEL_LWS_GROUP_INDEX] = index
    return pod(name, labels=labels)


# --- groups ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupCase:
    name: str
    labels: dict[str, str]
    owner: OwnerRef | None
    key: str
    root_key: str | None


JS = {_pods.LABEL_JOBSET: "js"}
LWS = {_pods.LABEL_LWS_NAME: "l", _pods.LABEL_LWS_GROUP_INDEX: "2"}
PG = {_pods.LABEL_POD_GROUP: "pg"}

GROUP_CASES = [
    GroupCase("bare pod", {}, None, "ns/Pod:a", None),
    GroupCase("batch Job owner", {}, JOB_OWNER, "ns/Job:train", "ns/Job:train"),
    GroupCase(
        "batch/v2 Job owner still a Job",
        {},
        OwnerRef(api_version="batch/v2", kind="Job", name="t"),
        "ns/Job:t",
        "ns/Job:t",
    ),
    GroupCase(
        "a Job kind of another API group is not a batch Job",
        {},
        OwnerRef(api_version="example.com/v1", kind="Job", name="t"),
        "ns/Pod:a",
        None,
    ),
    GroupCase(
        "ReplicaSet owner ⇒ bare",
        {},
        OwnerRef(api_version="apps/v1", kind="ReplicaSet", name="rs"),
        "ns/Pod:a",
        None,
    ),
    GroupCase("JobSet label", JS, None, "ns/JobSet:js", "ns/JobSet:js"),
    GroupCase("JobSet beats its child Job owner", JS, JOB_OWNER, "ns/JobSet:js", "ns/JobSet:js"),
    GroupCase(
        "LeaderWorkerSet name + group index",
        LWS,
        None,
        "ns/LeaderWorkerSet:l/2",
        "ns/LeaderWorkerSet:l",
    ),
    GroupCase(
        "LeaderWorkerSet without index ⇒ replica 0",
        {_pods.LABEL_LWS_NAME: "l"},
        None,
        "ns/LeaderWorkerSet:l/0",
        "ns/LeaderWorkerSet:l",
    ),
    GroupCase("PodGroup label", PG, None, "ns/PodGroup:pg", "ns/PodGroup:pg"),
    GroupCase("PodGroup beats a Job owner", PG, JOB_OWNER, "ns/PodGroup:pg", "ns/PodGroup:pg"),
    GroupCase(
        "JobSet beats LeaderWorkerSet and PodGroup",
        {**JS, **LWS, **PG},
        None,
        "ns/JobSet:js",
        "ns/JobSet:js",
    ),
    GroupCase(
        "LeaderWorkerSet beats PodGroup",
        {**LWS, **PG},
        None,
        "ns/LeaderWorkerSet:l/2",
        "ns/LeaderWorkerSet:l",
    ),
    GroupCase("empty label value does not count", {_pods.LABEL_JOBSET: ""}, None, "ns/Pod:a", None),
]


@pytest.mark.parametrize("case", GROUP_CASES, ids=lambda c: c.name)
def test_group_of(case: GroupCase) -> None:
    g = _pods.group_of(pod(labels=case.labels, owner=case.owner))
    assert g.key == case.key
    assert g.root_key == case.root_key
    assert _pods.parse_group_key(g.key) == g


@pytest.mark.parametrize(
    "key",
    ["", "ns", "ns/Pod", "ns/Pod:", "ns/:a", "/Pod:a", "Pod:a", "ns:Pod/a"],
)
def test_parse_group_key_rejects_non_group_keys(key: str) -> None:
    assert _pods.parse_group_key(key) is None


def test_parse_group_key_keeps_the_replica_index() -> None:
    g = _pods.parse_group_key("team-a/LeaderWorkerSet:lws/3")
    assert g == Group(namespace="team-a", kind="LeaderWorkerSet", name="lws/3")


@dataclass(frozen=True)
class PodsOfCase:
    name: str
    group: Group
    pods: tuple[KubePod, ...]
    want: list[str]


POD_CASES = [
    PodsOfCase("bare pod by key", BARE, (pod("a"), pod("b")), ["a"]),
    PodsOfCase("bare pod absent", BARE, (pod("b"),), []),
    PodsOfCase(
        "Job pods by label, sorted, other Job and namespace excluded",
        JOB,
        (
            job_pod("w-1"),
            job_pod("w-0"),
            job_pod("x", job="other"),
            job_pod("y", ns="other-ns"),
            pod("z"),
        ),
        ["w-0", "w-1"],
    ),
    PodsOfCase(
        "a pod with the Job label but another owner belongs elsewhere",
        JOB,
        (job_pod("w-0"), pod("imposter", labels={_pods.LABEL_JOB_NAME: "train"})),
        ["w-0"],
    ),
    PodsOfCase(
        "a Job's pods that also carry the JobSet label belong to the JobSet",
        JOB,
        (pod("w", labels={_pods.LABEL_JOB_NAME: "train", **JS}, owner=JOB_OWNER),),
        [],
    ),
    PodsOfCase(
        "JobSet pods",
        Group(namespace="ns", kind="JobSet", name="js"),
        (pod("b", labels=JS), pod("a", labels=JS), pod("c")),
        ["a", "b"],
    ),
    PodsOfCase(
        "LeaderWorkerSet: one replica only",
        Group(namespace="ns", kind="LeaderWorkerSet", name="l/1"),
        (lws_pod("l-1", "l", "1"), lws_pod("l-1-1", "l", "1"), lws_pod("l-0", "l", "0")),
        ["l-1", "l-1-1"],
    ),
    PodsOfCase(
        "PodGroup pods",
        Group(namespace="ns", kind="PodGroup", name="pg"),
        (pod("p1", labels=PG), pod("p2", labels={_pods.LABEL_POD_GROUP: "other"})),
        ["p1"],
    ),
    PodsOfCase("unknown kind", Group(namespace="ns", kind="Deployment", name="d"), (pod(),), []),
]


@pytest.mark.parametrize("case", POD_CASES, ids=lambda c: c.name)
def test_pods_of(case: PodsOfCase) -> None:
    assert [p.name for p in _pods.pods_of(case.group, store(*case.pods), "c1")] == case.want


def test_pods_of_forgets_a_deleted_pod() -> None:
    s = store(job_pod("w-0"), job_pod("w-1"), KubePod(source="k8s", key="ns/w-0", op="deleted"))
    assert [p.name for p in _pods.pods_of(JOB, s, "c1")] == ["w-1"]


def workload(kind: str, name: str, **kw: Any) -> KubeWorkload:
    return kube_workload("ns", kind, name, **kw)


def test_groups_under() -> None:
    s = store(lws_pod("l-0", "l", "0"), lws_pod("l-1", "l", "1"), lws_pod("l-1-1", "l", "1"))
    assert _pods.groups_under(workload("LeaderWorkerSet", "l"), s, "c1") == [
        "ns/LeaderWorkerSet:l/0",
        "ns/LeaderWorkerSet:l/1",
    ]
    assert _pods.groups_under(workload("LeaderWorkerSet", "none"), s, "c1") == []
    assert _pods.groups_under(workload("Job", "train"), s, "c1") == ["ns/Job:train"]
    assert _pods.groups_under(workload("JobSet", "js"), s, "c1") == ["ns/JobSet:js"]


# --- markers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "group",
    [
        BARE,
        JOB,
        Group(namespace="ns", kind="JobSet", name="js"),
        Group(namespace="ns", kind="LeaderWorkerSet", name="l/4"),
        Group(namespace="ns", kind="PodGroup", name="pg"),
    ],
    ids=lambda g: g.key,
)
def test_marker_names_the_group(group: Group) -> None:
    m = _pods.marker(group, "0c7f-uid")
    assert m == f"slurmbridge:{group.key}:0c7f-uid"
    assert _pods.group_key_of_marker(m) == group.key
    assert _pods.group_key_of_marker(_pods.marker(group, "")) == group.key


@pytest.mark.parametrize(
    "comment",
    ["", "my analysis job", "slurmbridge:", "slurmbridge:garbage", "slurmbridge:ns/Pod:a", "x:ns"],
)
def test_foreign_comments_are_not_markers(comment: str) -> None:
    assert _pods.group_key_of_marker(comment) is None


def test_root_uid_and_annotations_of() -> None:
    ann = {P + "qos": "high"}
    bare = pod("a", annotations=ann)
    assert _pods.root_uid(BARE, [bare], None) == "u-a"
    assert _pods.root_uid(BARE, [], None) == ""
    assert _pods.annotations_of(BARE, [bare], None) == ann
    wl = workload("Job", "train", annotations={P + "qos": "low"})
    member = job_pod("w-0", annotations=ann)
    # A group's settings come from its root object, never from its pods.
    assert _pods.root_uid(JOB, [member], wl) == "uid-train"
    assert _pods.annotations_of(JOB, [member], wl) == {P + "qos": "low"}
    assert _pods.root_uid(JOB, [member], None) == ""
    assert _pods.annotations_of(JOB, [member], None) == {}


# --- translation: defaults and every annotation ----------------------------------------------


def test_defaults_for_a_bare_pod() -> None:
    s = translate(BARE, [pod(cpu=1500, mem=100 * MIB + 1)], {})
    assert s.name == "a"  # the group's name (Slinky 1.3)
    assert (s.tasks, s.min_nodes, s.max_nodes, s.cpus_per_task) == (1, 1, 1, 2)
    assert s.memory_per_node_mib == 101
    assert (s.partition, s.account, s.qos, s.reservation, s.wckey) == ("", "", "", "", "")
    assert (s.constraints, s.licenses, s.tres_per_node) == ("slurm_bridge_gres_compatible", "", "")
    assert (s.time_limit_minutes, s.priority, s.user_id, s.group_id) == (None, None, None, None)
    # Slinky sends shared=["none"] (whole nodes) unless the annotation says "false".
    assert s.exclusive is True
    assert s.excluded_nodes == ()


def test_the_job_holds_what_the_pods_may_use_not_only_their_requests() -> None:
    """Issue 18 (5): per container max(request, limit) — the producer's ``*_max`` — so Slurm
    never allocates less than a pod may use; observations from before those fields (0) fall
    back to the request."""
    s = translate(BARE, [pod(cpu=500, mem=64 * MIB, cpu_max=2500, mem_max=300 * MIB)], {})
    assert (s.cpus_per_task, s.memory_per_node_mib) == (3, 300)
    s = translate(BARE, [pod(cpu=1500, mem=64 * MIB)], {})
    assert (s.cpus_per_task, s.memory_per_node_mib) == (2, 64)


def _workload(**kw: object) -> KubeWorkload:
    return KubeWorkload(source="k8s", key="ns/Job:j", namespace="ns", name="j", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("deadline", "annotation", "want"),
    [(90, None, 2), (60, None, 1), (3600, None, 60), (0, None, None), (90, "5", 5)],
)
def test_a_jobs_active_deadline_becomes_the_time_limit(
    deadline: int, annotation: str | None, want: int | None
) -> None:
    """Issue 18 (5), Slinky slurmjobir job.go: seconds rounded up to minutes; 0 = none; the
    timelimit annotation wins."""
    ann = {P + "timelimit": annotation} if annotation else {}
    wl = _workload(workload_kind="Job", active_deadline_s=deadline)
    s = translate(JOB, [job_pod("a")], ann, workload=wl)
    assert s.time_limit_minutes == want


def test_a_podgroups_min_resources_count() -> None:
    """Issue 18 (5), Slinky slurmjobir podgroup_coscheduling.go: minResources' CPU and memory
    are at least what the job asks for per task and per node."""
    wl = _workload(workload_kind="PodGroup", min_cpu_millis=3500, min_memory_bytes=2048 * MIB)
    s = translate(JOB, [job_pod("a"), job_pod("b")], {}, workload=wl)
    assert (s.cpus_per_task, s.memory_per_node_mib) == (4, 2048)


def test_a_leaderworkerset_groups_job_is_named_after_the_set_and_index() -> None:
    """Issue 18 (6), Slinky slurmjobir leaderworkerset.go: ``<lws>-<group index>``."""
    group = Group(namespace="ns", kind="LeaderWorkerSet", name="lws/3")
    assert translate(group, [job_pod("a")], {}).name == "lws-3"
    assert translate(group, [job_pod("a")], {P + "job-name": "mine"}).name == "mine"


def test_excluded_nodes_pass_through() -> None:
    s = translate(BARE, [pod()], {}, excluded_nodes=("s2", "s7"))
    assert s.excluded_nodes == ("s2", "s7")


@dataclass(frozen=True)
class AnnCase:
    annotation: str
    value: str
    attr: str
    want: object


ANN_CASES = [
    AnnCase("account", "physics", "account", "physics"),
    AnnCase("account", "  physics  ", "account", "physics"),
    AnnCase("constraints", "fast&ib", "constraints", "slurm_bridge_gres_compatible&fast&ib"),
    AnnCase("constraints", "fast|ib", "constraints", "slurm_bridge_gres_compatible&(fast|ib)"),
    AnnCase("cpu-per-task", "4", "cpus_per_task", 4),
    AnnCase("cpu-per-task", " 2 ", "cpus_per_task", 2),
    # A Kubernetes quantity, rounded up (Slinky reads it with resource.ParseQuantity).
    AnnCase("cpu-per-task", "200m", "cpus_per_task", 1),
    AnnCase("cpu-per-task", "1500m", "cpus_per_task", 2),
    AnnCase("cpu-per-task", "1.5", "cpus_per_task", 2),
    AnnCase("exclusive", "true", "exclusive", True),
    AnnCase("exclusive", "TRUE", "exclusive", True),
    AnnCase("exclusive", "false", "exclusive", False),
    AnnCase("gres", "gpu:a100:2", "tres_per_node", "gres/gpu:a100:2"),
    AnnCase("gres", "gres/gpu=4", "tres_per_node", "gres/gpu=4"),
    AnnCase("group-id", "100", "group_id", 100),
    AnnCase("group-id", "0", "group_id", 0),
    AnnCase("job-name", "train-llm", "name", "train-llm"),
    AnnCase("licenses", "matlab:1,ansys:2", "licenses", "matlab:1,ansys:2"),
    AnnCase("max-nodes", "3", "max_nodes", 3),
    AnnCase("mem-per-node", "4096", "memory_per_node_mib", 4096),
    AnnCase("mem-per-node", "4Gi", "memory_per_node_mib", 4096),
    AnnCase("mem-per-node", "500M", "memory_per_node_mib", 477),
    AnnCase("min-nodes", "1", "min_nodes", 1),
    AnnCase("partition", "gpu", "partition", "gpu"),
    AnnCase("priority", "0", "priority", 0),
    AnnCase("priority", "4294", "priority", 4294),
    AnnCase("priority", "4294967293", "priority", 4294967293),  # the largest Slurm takes
    AnnCase("qos", "high", "qos", "high"),
    AnnCase("reservation", "maint", "reservation", "maint"),
    AnnCase("timelimit", "90", "time_limit_minutes", 90),
    AnnCase("timelimit", "1:30:00", "time_limit_minutes", 90),
    AnnCase("timelimit", "2-00:00", "time_limit_minutes", 2880),
    # sbatch --time forms: M:S is minutes and seconds (not hours and minutes).
    AnnCase("timelimit", "10:30", "time_limit_minutes", 11),
    AnnCase("timelimit", "90:00", "time_limit_minutes", 90),
    AnnCase("timelimit", "2-12", "time_limit_minutes", 3600),
    AnnCase("timelimit", "1-2:30:15", "time_limit_minutes", 1591),
    AnnCase("timelimit", "4294967293", "time_limit_minutes", 4294967293),
    AnnCase("user-id", "1000", "user_id", 1000),
    AnnCase("user-id", "0", "user_id", 0),
    AnnCase("wckey", "proj-42", "wckey", "proj-42"),
]


def test_every_annotation_has_a_case() -> None:
    assert {c.annotation for c in ANN_CASES} == set(_pods.ANNOTATIONS)


@pytest.mark.parametrize(
    "case", ANN_CASES, ids=lambda c: f"{c.annotation}={c.value.strip()}->{c.attr}"
)
def test_annotation_is_translated(case: AnnCase) -> None:
    spec = translate(BARE, [pod()], {P + case.annotation: case.value})
    assert getattr(spec, case.attr) == case.want


def test_all_annotations_together() -> None:
    ann = {
        P + "account": "acct",
        P + "constraints": "fast",
        P + "cpu-per-task": "4",
        P + "exclusive": "true",
        P + "gres": "gpu:2",
        P + "group-id": "100",
        P + "job-name": "train",
        P + "licenses": "matlab:1",
        P + "max-nodes": "4",
        P + "mem-per-node": "2Gi",
        P + "min-nodes": "2",
        P + "partition": "gpu",
        P + "priority": "10",
        P + "qos": "high",
        P + "reservation": "r1",
        P + "timelimit": "1-00:30",
        P + "user-id": "1000",
        P + "wckey": "w",
    }
    s = translate(JOB, [job_pod("a"), job_pod("b"), job_pod("c")], ann)
    assert s == type(s)(
        name="train",
        partition="gpu",
        account="acct",
        qos="high",
        reservation="r1",
        wckey="w",
        constraints="slurm_bridge_gres_compatible&fast",
        licenses="matlab:1",
        cpus_per_task=4,
        tasks=3,
        min_nodes=2,
        max_nodes=4,
        memory_per_node_mib=2048,
        tres_per_node="gres/gpu:2",
        time_limit_minutes=1470,
        priority=10,
        user_id=1000,
        group_id=100,
        exclusive=True,
    )


def test_annotations_without_our_prefix_are_ignored() -> None:
    # (Slinky's old names, slinky.slurm.net/<name>, are refused: tests/unit/test_slinky_names.py)
    ann = {"partition": "gpu", "other.io/qos": "high", "slinky.slurm.net/slurm-node": "x"}
    s = translate(BARE, [pod()], ann)
    assert (s.partition, s.qos) == ("", "")


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("partiton", "partition"),
        ("timelimt", "timelimit"),
        ("cpus-per-task", "cpu-per-task"),
        ("unknown", ""),
    ],
)
def test_an_unknown_key_under_our_prefix_is_refused_with_the_nearest_name(
    name: str, hint: str
) -> None:
    """Issue 17 (18): a misspelled annotation was ignored, so the job ran with Slurm's
    defaults (e.g. its default partition) and nothing said why."""
    with pytest.raises(TranslationError) as err:
        translate(BARE, [pod()], {P + name: "gpu", P + "partition": "gpu"})
    assert err.value.field == f"metadata.annotations[{P}{name}]"
    assert "unknown annotation" in err.value.reason
    if hint:
        assert err.value.reason.endswith(f"did you mean {P}{hint}?")
    else:
        assert "did you mean" not in err.value.reason


# --- translation errors: each names its field ------------------------------------------------

ERROR_CASES = [
    ("account", ""),
    ("account", "   "),
    ("constraints", "a\tb"),
    # Slinky slurmconstraint_test.go: what Slurm cannot AND with slurm_bridge_gres_compatible.
    ("constraints", "rack1*2"),
    ("constraints", "(a&b)|(c&d)"),
    ("cpu-per-task", "0"),
    ("cpu-per-task", "two"),
    ("cpu-per-task", "0m"),
    ("cpu-per-task", "2 cores"),
    ("exclusive", "yes"),
    ("exclusive", ""),
    ("gres", ""),
    ("gres", "gpu:\n1"),
    ("group-id", "-1"),
    ("group-id", "wheel"),
    ("job-name", "  "),
    ("job-name", "line\nbreak"),
    ("licenses", "a\rb"),
    ("max-nodes", "0"),
    ("max-nodes", "many"),
    ("mem-per-node", "0"),
    ("mem-per-node", "lots"),
    ("mem-per-node", "4GB"),
    ("mem-per-node", "-1Gi"),
    ("min-nodes", "0"),
    ("min-nodes", "-1"),
    ("partition", "a,b"),
    ("partition", ""),
    ("priority", "-1"),
    ("priority", "high"),
    # Slurm keeps priorities in 32 bits with NO_VAL and INFINITE reserved (slurmrestd reads
    # both, and more, as INFINITE; the job then gets priority 1, not the one asked).
    ("priority", "4294967294"),
    ("priority", "4294967295"),
    ("priority", "18446744073709551616"),
    ("qos", ""),
    ("reservation", "\t"),
    ("timelimit", "0"),
    ("timelimit", "soon"),
    ("timelimit", "1:75"),
    ("timelimit", "1:30:60"),
    ("timelimit", "1-2:75"),
    ("timelimit", "0:00"),
    ("timelimit", "-5"),
    ("timelimit", "1000000000000"),  # 10^12 minutes became UNLIMITED
    ("timelimit", "4294967294"),
    ("user-id", "root"),
    ("user-id", "-2"),
    ("wckey", " "),
]


def test_every_annotation_has_an_error_case() -> None:
    assert {name for name, _ in ERROR_CASES} == set(_pods.ANNOTATIONS)


@pytest.mark.parametrize(("name", "value"), ERROR_CASES, ids=lambda x: repr(x))
def test_bad_annotation_raises_naming_the_field(name: str, value: str) -> None:
    with pytest.raises(TranslationError) as err:
        translate(BARE, [pod()], {P + name: value})
    want = f"metadata.annotations[{P}{name}]"
    assert err.value.field == want
    assert str(err.value).startswith(f"{want}: ")
    assert err.value.reason
    assert isinstance(err.value, ValueError)


def test_no_pods_is_an_error() -> None:
    with pytest.raises(TranslationError) as err:
        translate(JOB, [], {})
    assert err.value.field == "pods"


# --- resources over the group's pods ---------------------------------------------------------


@dataclass(frozen=True)
class ResCase:
    name: str
    pods: tuple[KubePod, ...]
    ann: dict[str, str] = field(default_factory=dict)
    cpus: int = 1
    mem: int | None = None
    tres: str = ""


RES_CASES = [
    ResCase("no requests ⇒ 1 CPU, Slurm's memory", (pod(cpu=0, mem=0),)),
    ResCase("1 millicpu rounds up", (pod(cpu=1, mem=1),), cpus=1, mem=1),
    ResCase("1001m ⇒ 2 CPUs", (pod(cpu=1001, mem=0),), cpus=2),
    ResCase("exactly 100 MiB", (pod(cpu=1000, mem=100 * MIB),), cpus=1, mem=100),
    ResCase("one byte over ⇒ rounded up", (pod(cpu=1000, mem=100 * MIB + 1),), cpus=1, mem=101),
    ResCase(
        "largest of the pods, one pod per node",
        (
            job_pod("a", cpu=500, mem=3 * GIB),
            job_pod("b", cpu=3500, mem=GIB),
            job_pod("c", cpu=1000, mem=2 * GIB + 1),
        ),
        cpus=4,
        mem=3072,
    ),
    ResCase(
        "memory × pods per node when min-nodes packs them",
        (job_pod("a", mem=GIB), job_pod("b", mem=2 * GIB), job_pod("c", mem=GIB)),
        ann={P + "min-nodes": "2"},
        mem=4096,  # 2048 MiB × ⌈3 / 2⌉
    ),
    ResCase(
        "mem-per-node replaces the pods' memory",
        (job_pod("a", mem=8 * GIB),),
        ann={P + "mem-per-node": "1Gi"},
        mem=1024,
    ),
    ResCase(
        "cpu-per-task replaces the pods' CPUs",
        (job_pod("a", cpu=8000),),
        ann={P + "cpu-per-task": "2"},
        cpus=2,
        mem=64,
    ),
    ResCase("GPUs ⇒ gres/gpu", (pod(gpus=2),), mem=64, tres="gres/gpu=2"),
    ResCase(
        "largest GPU count × pods per node",
        (job_pod("a", gpus=1), job_pod("b", gpus=2), job_pod("c"), job_pod("d")),
        ann={P + "max-nodes": "2"},
        mem=128,
        tres="gres/gpu=4",
    ),
    ResCase(
        "gres annotation replaces the GPU limits",
        (pod(gpus=8),),
        ann={P + "gres": "gpu:h100:1"},
        mem=64,
        tres="gres/gpu:h100:1",
    ),
]


@pytest.mark.parametrize("case", RES_CASES, ids=lambda c: c.name)
def test_resources(case: ResCase) -> None:
    group = _pods.group_of(case.pods[0])
    s = translate(group, list(case.pods), case.ann)
    assert (s.cpus_per_task, s.memory_per_node_mib, s.tres_per_node) == (
        case.cpus,
        case.mem,
        case.tres,
    )
    assert s.tasks == len(case.pods)


def raw_pod(name: str, limits: dict[str, str]) -> RawPod:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
        "spec": {
            "schedulerName": SCHED,
            "containers": [{"name": "main", "resources": {"limits": limits}}],
        },
        "status": {"phase": "Pending"},
    }
    return msgspec.json.decode(msgspec.json.encode(body), type=RawPod)


@pytest.mark.parametrize(
    ("limits", "tres"),
    [
        ({"nvidia.com/gpu": "2"}, "gres/gpu=2"),
        ({"amd.com/gpu": "1"}, "gres/gpu=1"),
        ({"nvidia.com/gpu": "1", "amd.com/gpu": "1"}, "gres/gpu=2"),
        ({"intel.com/gpu": "1"}, ""),
        ({"cpu": "2", "memory": "1Gi"}, ""),
    ],
)
def test_gpu_limits_of_a_real_pod_become_gres(limits: dict[str, str], tres: str) -> None:
    p = pod_to_event(raw_pod("a", limits), producer="t", observed_at=0)
    assert translate(_pods.group_of(p), [p], {}).tres_per_node == tres


# --- min-nodes / max-nodes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "min_nodes", "max_nodes", "want"),
    [
        (4, None, None, (4, 4, 64)),
        (4, "2", None, (2, 4, 128)),
        (4, None, "2", (2, 2, 128)),
        (4, "1", "1", (1, 1, 256)),
        (4, "1", None, (1, 4, 256)),
        (4, None, "8", (4, 8, 64)),
        (3, "2", "2", (2, 2, 128)),
        (2, "3", None, (3, 3, 64)),
        (1, None, "5", (1, 5, 64)),
        (4, "2", "2", (2, 2, 128)),
    ],
)
def test_min_and_max_nodes(
    n: int, min_nodes: str | None, max_nodes: str | None, want: tuple[int, int, int]
) -> None:
    ann = {}
    if min_nodes is not None:
        ann[P + "min-nodes"] = min_nodes
    if max_nodes is not None:
        ann[P + "max-nodes"] = max_nodes
    pods = [job_pod(f"w-{i}") for i in range(n)]
    s = translate(JOB, pods, ann)
    assert (s.min_nodes, s.max_nodes, s.memory_per_node_mib) == want


@pytest.mark.parametrize(("min_nodes", "max_nodes"), [("3", "2"), ("5", "1")])
def test_max_nodes_below_min_nodes_names_max_nodes(min_nodes: str, max_nodes: str) -> None:
    ann = {P + "min-nodes": min_nodes, P + "max-nodes": max_nodes}
    with pytest.raises(TranslationError) as err:
        translate(JOB, [job_pod("w-0"), job_pod("w-1")], ann)
    assert err.value.field == f"metadata.annotations[{P}max-nodes]"
    assert f"min-nodes {min_nodes}" in err.value.reason


def test_max_nodes_below_the_pods_packs_them() -> None:
    # No min-nodes: the job may use at most max-nodes, so it needs them all.
    s = translate(JOB, [job_pod(f"w-{i}", gpus=1) for i in range(5)], {P + "max-nodes": "2"})
    assert (s.min_nodes, s.max_nodes, s.tasks, s.tres_per_node) == (2, 2, 5, "gres/gpu=3")


# --- time limits and memory sizes ------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "minutes"),
    [
        ("1", 1),
        ("90", 90),
        (" 45 ", 45),
        ("0:01", 1),
        ("1:30", 2),  # M:S — one minute thirty seconds, as sbatch --time reads it
        ("01:30:00", 90),
        ("00:00:30", 1),  # seconds round up to a whole minute
        ("0:59:59", 60),
        ("2-00:00", 2880),
        ("1-00:30", 1470),
        ("1-02:03:04", 1440 + 120 + 3 + 1),
        ("100:00", 100),
        ("3-4", 3 * 1440 + 240),  # D-H
        # Slurm's largest finite time limit (NO_VAL - 1), in minutes and as D-H:M:S.
        ("4294967293", 4294967293),
        ("2982616-04:13:00", 4294967293),
        ("2982616-04:12:01", 4294967293),  # seconds round up onto the largest
    ],
)
def test_parse_time_limit(raw: str, minutes: int) -> None:
    assert parse_time_limit(raw) == minutes


@pytest.mark.parametrize(
    "raw",
    ["", "0", "00:00", "0-00:00:00", "soon", "1:60", "1:00:60", "1.5", "-1", "2-", "1:2:3:4", "1d"],
)
def test_parse_time_limit_rejects(raw: str) -> None:
    with pytest.raises(ValueError, match=r"minute|Slurm time|below 60"):
        parse_time_limit(raw)


# Slinky slurm-bridge 1.3 reads the timelimit annotation as a Go duration too
# (internal/utils/slurmjobir/slurmjobir.go, its time-limit parser and tests), in our words:
# whole h/m/s parts, rounded up to a minute; fractions and sub-second units refused.
@pytest.mark.parametrize(
    ("raw", "minutes"),
    [("2h", 120), ("30s", 1), ("90m", 90), ("1h30m", 90), ("1m1s", 2), ("3600s", 60)],
)
def test_parse_time_limit_reads_go_durations(raw: str, minutes: int) -> None:
    assert parse_time_limit(raw) == minutes


@pytest.mark.parametrize("raw", ["1.5h", "0h", "0s", "500ms", "2d", "h", "1h 30m", "-2h"])
def test_parse_time_limit_refuses_other_durations(raw: str) -> None:
    with pytest.raises(ValueError, match=r"minute|Slurm time|Go duration"):
        parse_time_limit(raw)


@pytest.mark.parametrize(
    "raw",
    [
        "4294967294",  # NO_VAL: slurmrestd reads it, and anything above, as INFINITE
        "4294967295",  # INFINITE
        "4294967296",
        "1000000000000",  # the 10^12, which became UNLIMITED
        "2982616-04:13:01",  # one second past the largest: rounds up to NO_VAL
        "9999999-00:00",
        "9" * 400,
    ],
)
def test_parse_time_limit_refuses_what_slurm_would_read_as_unlimited(raw: str) -> None:
    with pytest.raises(ValueError, match="above Slurm's largest time limit 4294967293"):
        parse_time_limit(raw)


def test_a_jobs_active_deadline_beyond_slurms_largest_limit_is_capped() -> None:
    """Kubernetes takes any int64 ``activeDeadlineSeconds``; Slurm would read more than its
    largest finite limit as UNLIMITED, the opposite of a deadline."""
    wl = _workload(workload_kind="Job", active_deadline_s=2**62)
    assert translate(JOB, [job_pod("a")], {}, workload=wl).time_limit_minutes == 4294967293


@pytest.mark.parametrize(
    ("raw", "mib"),
    [
        ("4096", 4096),
        ("1", 1),
        ("0.5", 1),
        ("1536Mi", 1536),
        ("4Gi", 4096),
        ("1.5Gi", 1536),
        ("1Ti", 1024 * 1024),
        ("1024Ki", 1),
        ("1Ki", 1),
        ("500M", 477),
        ("1G", 954),
        ("1K", 1),
        ("1T", 953675),
        (" 2Gi ", 2048),
    ],
)
def test_parse_memory_mib(raw: str, mib: int) -> None:
    assert parse_memory_mib(raw) == mib


@pytest.mark.parametrize("raw", ["", "0", "0Gi", "lots", "4GB", "4gi", "-1", "1e3", "Gi"])
def test_parse_memory_mib_rejects(raw: str) -> None:
    with pytest.raises(ValueError, match=r"MiB|more than zero"):
        parse_memory_mib(raw)
