"""Table-driven tests of the pure pod and workload translations of producers.kube.

Raw objects are decoded from JSON shaped like the API server's (with fields we do not read),
exactly as the watchers decode them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from producers.kube.translate import pod_to_event, workload_size, workload_to_event
from reconcilers import _pods
from schemas.events import KubePod, OwnerRef, PodCondition, decode_event, encode_event, tombstone
from slurmbridge.kube.wire import RawPod, RawWorkload

MIB = 1024 * 1024
GIB = 1024 * MIB
SCHED = "slurm-bridge-scheduler"


def decode_pod(body: dict[str, Any]) -> RawPod:
    return msgspec.json.decode(msgspec.json.encode(body), type=RawPod)


def raw_pod(
    *,
    meta: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> RawPod:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-0",
            "namespace": "ml",
            "uid": "5b0c-uid",
            "resourceVersion": "4711",
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update"}],
            **(meta or {}),
        },
        "spec": {
            "schedulerName": SCHED,
            "restartPolicy": "Never",
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [{"name": "main", "image": "busybox", "resources": {}}],
            **(spec or {}),
        },
        "status": {"phase": "Pending", "qosClass": "BestEffort", **(status or {})},
    }
    return decode_pod(body)


def event(raw: RawPod) -> KubePod:
    return pod_to_event(raw, producer="prod-1", observed_at=123)


def container(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> Any:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "image": "busybox", "resources": resources}


def test_identity_and_envelope() -> None:
    p = event(
        raw_pod(
            meta={"labels": {"app": "x"}, "finalizers": ["a/b", "c/d"]},
            spec={"nodeName": "k1"},
            status={"phase": "Running"},
        )
    )
    assert (p.source, p.key, p.version, p.producer, p.observed_at) == (
        "k8s",
        "ml/train-0",
        "4711",
        "prod-1",
        123,
    )
    assert (p.uid, p.namespace, p.name, p.scheduler_name) == ("5b0c-uid", "ml", "train-0", SCHED)
    assert (p.phase, p.node_name, p.labels, p.finalizers) == (
        "Running",
        "k1",
        {"app": "x"},
        ("a/b", "c/d"),
    )
    assert p.created_at == int(datetime(2024, 5, 1, 10, tzinfo=UTC).timestamp())
    assert p.op == "observed"
    # The observation survives the wire unchanged.
    assert decode_event("KubePod", encode_event(p)) == p


def test_a_minimal_pod_gets_the_defaults() -> None:
    p = event(decode_pod({"metadata": {"name": "x", "namespace": "ns"}}))
    assert (p.phase, p.node_name, p.scheduler_name) == ("Pending", "", "")
    assert (p.cpu_millis, p.memory_bytes, p.gpus) == (0, 0, 0)
    assert (p.labels, p.annotations, p.finalizers, p.tolerations) == ({}, {}, (), ())
    assert (p.owner, p.conditions, p.ready, p.deleting, p.created_at) == (None, (), False, False, 0)


# --- effective requests ----------------------------------------------------------------------

REQUESTS = [
    ("no resources", [container()], None, None, (0, 0)),
    (
        "sum of the containers",
        [
            container({"cpu": "500m", "memory": "1Gi"}),
            container({"cpu": "250m", "memory": "512Mi"}),
        ],
        None,
        None,
        (750, GIB + 512 * MIB),
    ),
    (
        "requests win over limits",
        [container({"cpu": "1", "memory": "1Gi"}, {"cpu": "4", "memory": "8Gi"})],
        None,
        None,
        (1000, GIB),
    ),
    (
        "limits-only container ⇒ the limits",
        [container(None, {"cpu": "2", "memory": "3Gi"})],
        None,
        None,
        (2000, 3 * GIB),
    ),
    (
        "per resource: cpu requested, memory only limited",
        [container({"cpu": "100m"}, {"memory": "256Mi"})],
        None,
        None,
        (100, 256 * MIB),
    ),
    (
        "limits-only and requests-only containers add up",
        [container(None, {"cpu": "1"}), container({"cpu": "1500m"})],
        None,
        None,
        (2500, 0),
    ),
    (
        "the largest init container wins over a smaller sum",
        [container({"cpu": "500m", "memory": "128Mi"})],
        [container({"cpu": "2", "memory": "64Mi"}), container({"cpu": "1", "memory": "1Gi"})],
        None,
        (2000, GIB),
    ),
    (
        "init containers are not summed",
        [container({"cpu": "3"})],
        [container({"cpu": "2"}), container({"cpu": "2"})],
        None,
        (3000, 0),
    ),
    (
        "overhead is added",
        [container({"cpu": "1", "memory": "1Gi"})],
        [container({"cpu": "2"})],
        {"cpu": "250m", "memory": "128Mi"},
        (2250, GIB + 128 * MIB),
    ),
    (
        "quantity forms",
        [container({"cpu": "0.5", "memory": "1G"}), container({"cpu": "1500m", "memory": "1e6"})],
        None,
        None,
        (2000, 1_001_000_000),
    ),
    (
        "a malformed quantity counts as 0",
        [container({"cpu": "lots", "memory": "2Gi"})],
        None,
        None,
        (0, 2 * GIB),
    ),
]


@pytest.mark.parametrize(
    ("name", "containers", "init", "overhead", "want"), REQUESTS, ids=[c[0] for c in REQUESTS]
)
def test_effective_requests(
    name: str,
    containers: list[Any],
    init: list[Any] | None,
    overhead: dict[str, str] | None,
    want: tuple[int, int],
) -> None:
    del name
    spec: dict[str, Any] = {"containers": containers}
    if init is not None:
        spec["initContainers"] = init
    if overhead is not None:
        spec["overhead"] = overhead
    p = event(raw_pod(spec=spec))
    assert (p.cpu_millis, p.memory_bytes) == want


MOST = [
    (
        "per container the larger of request and limit",
        {"containers": [container({"cpu": "1", "memory": "1Gi"}, {"cpu": "4", "memory": "8Gi"})]},
        (4000, 8 * GIB),
    ),
    (
        "summed over containers (request of one, limit of the other)",
        {"containers": [container({"cpu": "3"}), container({"cpu": "1"}, {"cpu": "2"})]},
        (5000, 0),
    ),
    (
        "the largest init container, plus overhead",
        {
            "containers": [container({"cpu": "1"})],
            "initContainers": [container(None, {"cpu": "3"})],
            "overhead": {"cpu": "250m"},
        },
        (3250, 0),
    ),
    (
        "pod-level spec.resources wins (Kubernetes 1.32+)",
        {
            "containers": [container({"cpu": "1", "memory": "1Gi"})],
            "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "6", "memory": "4Gi"}},
        },
        (6000, 4 * GIB),
    ),
]


@pytest.mark.parametrize(("name", "spec", "want"), MOST, ids=[c[0] for c in MOST])
def test_what_a_pod_may_use(name: str, spec: dict[str, Any], want: tuple[int, int]) -> None:
    """Issue 18 (5): the Slurm job must hold what the pod may use (Slinky: max(requests,
    limits)), not only what it requests."""
    del name
    p = event(raw_pod(spec=spec))
    assert (p.cpu_millis_max, p.memory_bytes_max) == want


GPUS = [
    ("none", [container({"cpu": "1"})], None, 0),
    ("nvidia limit", [container(None, {"nvidia.com/gpu": "2"})], None, 2),
    ("amd limit", [container(None, {"amd.com/gpu": "1"})], None, 1),
    (
        "nvidia and amd over containers add up",
        [container(None, {"nvidia.com/gpu": "2"}), container(None, {"amd.com/gpu": "1"})],
        None,
        3,
    ),
    (
        "requests equal to limits count once",
        [container({"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "4"})],
        None,
        4,
    ),
    ("a GPU request without limit is not counted", [container({"nvidia.com/gpu": "1"})], None, 0),
    ("other vendors are not counted", [container(None, {"intel.com/gpu": "1"})], None, 0),
    (
        "the largest init container wins",
        [container(None, {"nvidia.com/gpu": "1"})],
        [container(None, {"nvidia.com/gpu": "4"}), container(None, {"nvidia.com/gpu": "2"})],
        4,
    ),
]


@pytest.mark.parametrize(("name", "containers", "init", "want"), GPUS, ids=[c[0] for c in GPUS])
def test_gpus_come_from_limits(
    name: str, containers: list[Any], init: list[Any] | None, want: int
) -> None:
    del name
    spec: dict[str, Any] = {"containers": containers, "overhead": {"nvidia.com/gpu": "1"}}
    if init is not None:
        spec["initContainers"] = init
    assert event(raw_pod(spec=spec)).gpus == want


# --- deletion --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ts", "want"),
    [
        ("2024-05-01T10:00:30Z", int(datetime(2024, 5, 1, 10, 0, 30, tzinfo=UTC).timestamp())),
        ("2024-05-01T10:00:30.750Z", int(datetime(2024, 5, 1, 10, 0, 30, tzinfo=UTC).timestamp())),
        ("2024-05-01T12:00:30+02:00", int(datetime(2024, 5, 1, 10, 0, 30, tzinfo=UTC).timestamp())),
        (None, 0),
        ("", 0),
        ("yesterday", 0),
    ],
)
def test_deletion_timestamp(ts: str | None, want: int) -> None:
    meta: dict[str, Any] = {"deletionGracePeriodSeconds": 30}
    if ts is not None:
        meta["deletionTimestamp"] = ts
    p = event(raw_pod(meta=meta))
    assert p.deletion_timestamp == want
    assert p.deleting is (want > 0)
    assert p.deletion_grace_s == 30


# --- owner, annotations, conditions, tolerations ---------------------------------------------


def _ref(kind: str, name: str, controller: bool | None) -> dict[str, Any]:
    r: dict[str, Any] = {"apiVersion": "batch/v1", "kind": kind, "name": name, "uid": f"u-{name}"}
    if controller is not None:
        r["controller"] = controller
        r["blockOwnerDeletion"] = True
    return r


@pytest.mark.parametrize(
    ("refs", "want"),
    [
        (None, None),
        ([], None),
        ([_ref("Job", "j", None)], None),
        ([_ref("Job", "j", False)], None),
        (
            [_ref("Job", "j", True)],
            OwnerRef(api_version="batch/v1", kind="Job", name="j", uid="u-j"),
        ),
        (
            [_ref("ConfigMap", "cm", False), _ref("Job", "j", True)],
            OwnerRef(api_version="batch/v1", kind="Job", name="j", uid="u-j"),
        ),
    ],
)
def test_only_the_controller_owner_is_kept(
    refs: list[dict[str, Any]] | None, want: OwnerRef | None
) -> None:
    meta = {} if refs is None else {"ownerReferences": refs}
    assert event(raw_pod(meta=meta)).owner == want


def test_the_controller_owner_puts_the_pod_in_its_job_group() -> None:
    meta = {
        "ownerReferences": [_ref("Job", "train", True)],
        "labels": {_pods.LABEL_JOB_NAME: "train", _pods.LABEL_JOB_NAME_LEGACY: "train"},
    }
    assert _pods.group_of(event(raw_pod(meta=meta))).key == "ml/Job:train"


def test_only_slinky_annotations_are_kept() -> None:
    ann = {
        "slurmjob.slinky.slurm.net/partition": "gpu",
        "slinky.slurm.net/slurm-node": "s1",
        "nodeset.slinky.slurm.net/pod-deletion-cost": "5",
        "kubectl.kubernetes.io/last-applied-configuration": "{...}",
        "example.com/note": "slinky.slurm.net",
        "partition": "batch",
    }
    p = event(raw_pod(meta={"annotations": ann}))
    assert p.annotations == {
        "slurmjob.slinky.slurm.net/partition": "gpu",
        "slinky.slurm.net/slurm-node": "s1",
        "nodeset.slinky.slurm.net/pod-deletion-cost": "5",
    }


def test_only_the_pod_scheduled_condition_is_kept_and_ready_is_read() -> None:
    conditions = [
        {"type": "Initialized", "status": "True", "lastTransitionTime": "2024-05-01T10:00:00Z"},
        {"type": "Ready", "status": "True"},
        {"type": "ContainersReady", "status": "True"},
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "SlurmJobInvalid",
            "message": "bad",
            "lastProbeTime": None,
        },
    ]
    p = event(raw_pod(status={"phase": "Running", "conditions": conditions}))
    assert p.conditions == (
        PodCondition(type="PodScheduled", status="False", reason="SlurmJobInvalid", message="bad"),
    )
    assert p.condition("PodScheduled") is not None and p.condition("Ready") is None
    assert p.ready is True


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [
        ([], False),
        ([{"type": "Ready", "status": "False"}], False),
        ([{"type": "Ready", "status": "Unknown"}], False),
        ([{"type": "ContainersReady", "status": "True"}], False),
        ([{"type": "Ready", "status": "True"}], True),
    ],
)
def test_ready(conditions: list[dict[str, str]], ready: bool) -> None:
    assert event(raw_pod(status={"conditions": conditions})).ready is ready


@pytest.mark.parametrize(
    ("tolerations", "want"),
    [
        (None, ()),
        ([], ()),
        (
            [
                {"key": "slinky.slurm.net/managed-node", "operator": "Equal", "value": "s"},
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                },
                {"key": "slinky.slurm.net/managed-node", "operator": "Exists"},
            ],
            ("node.kubernetes.io/not-ready", "slinky.slurm.net/managed-node"),
        ),
        ([{"operator": "Exists"}], ("",)),
        ([{"key": "", "operator": "Exists"}], ("",)),
        ([{"effect": "NoSchedule"}], ()),
        ([{"key": "b"}, {"key": "a", "operator": "Equal", "value": "x"}], ("a", "b")),
    ],
)
def test_toleration_keys(tolerations: list[dict[str, str]] | None, want: tuple[str, ...]) -> None:
    spec = {} if tolerations is None else {"tolerations": tolerations}
    assert event(raw_pod(spec=spec)).tolerations == want


# --- tombstone -------------------------------------------------------------------------------


def test_tombstone_keeps_what_names_the_group() -> None:
    last = event(
        raw_pod(
            meta={
                "labels": {_pods.LABEL_JOBSET: "js", "app": "x"},
                "annotations": {"slinky.slurm.net/slurm-node": "s1"},
                "finalizers": ["scheduler.slinky.slurm.net/finalizer"],
                "ownerReferences": [_ref("Job", "js-w", True)],
            },
            spec={"nodeName": "k1", "containers": [container({"cpu": "2"})]},
            status={"phase": "Running"},
        )
    )
    t = tombstone(last, version="4800", producer="prod-2", observed_at=999)
    assert (t.op, t.deleted, t.source, t.key, t.version, t.producer, t.observed_at) == (
        "deleted",
        True,
        "k8s",
        "ml/train-0",
        "4800",
        "prod-2",
        999,
    )
    assert (t.uid, t.namespace, t.name, t.scheduler_name) == ("5b0c-uid", "ml", "train-0", SCHED)
    assert (t.labels, t.owner) == (last.labels, last.owner)
    # Snapshot fields keep their defaults.
    assert (t.annotations, t.finalizers, t.node_name, t.cpu_millis, t.phase) == (
        {},
        (),
        "",
        0,
        "Pending",
    )
    assert _pods.group_of(t) == _pods.group_of(last)
    assert decode_event("KubePod", encode_event(t)) == t


# --- workloads -------------------------------------------------------------------------------


def decode_workload(body: dict[str, Any]) -> RawWorkload:
    return msgspec.json.decode(msgspec.json.encode(body), type=RawWorkload)


def _jobset(*replicated: tuple[int | None, int | None]) -> dict[str, Any]:
    jobs = []
    for i, (replicas, parallelism) in enumerate(replicated):
        rj: dict[str, Any] = {"name": f"rj{i}", "template": {"spec": {"template": {}}}}
        if replicas is not None:
            rj["replicas"] = replicas
        if parallelism is not None:
            rj["template"]["spec"]["parallelism"] = parallelism
        jobs.append(rj)
    return {"replicatedJobs": jobs}


SIZES = [
    ("Job with parallelism", "batch/v1", "Job", {"parallelism": 3, "completions": 6}, 3),
    ("Job without parallelism", "batch/v1", "Job", {"completions": 1}, 1),
    ("suspended Job with parallelism 0", "batch/v1", "Job", {"parallelism": 0}, 0),
    (
        "JobSet: replicas × parallelism",
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        _jobset((2, 3), (1, 4)),
        10,
    ),
    (
        "JobSet: defaults are 1",
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        _jobset((None, None), (3, None)),
        4,
    ),
    ("JobSet without replicated jobs", "jobset.x-k8s.io/v1alpha2", "JobSet", {}, 0),
    (
        "LeaderWorkerSet: pods per replica",
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        {"replicas": 3, "leaderWorkerTemplate": {"size": 4}},
        4,
    ),
    (
        "LeaderWorkerSet without size",
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        {"leaderWorkerTemplate": {}},
        1,
    ),
    ("LeaderWorkerSet without template", "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {}, 1),
    ("PodGroup minMember", "scheduling.x-k8s.io/v1alpha1", "PodGroup", {"minMember": 5}, 5),
    ("PodGroup without minMember", "scheduling.x-k8s.io/v1alpha1", "PodGroup", {}, 0),
    ("another kind", "apps/v1", "Deployment", {"replicas": 3}, 0),
]


@pytest.mark.parametrize(
    ("name", "api_version", "kind", "spec", "size"), SIZES, ids=[c[0] for c in SIZES]
)
def test_workload_size(
    name: str, api_version: str, kind: str, spec: dict[str, Any], size: int
) -> None:
    del name
    raw = decode_workload(
        {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"}, "spec": spec}
    )
    assert workload_size(raw) == size


def test_workload_to_event() -> None:
    raw = decode_workload(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "train",
                "namespace": "ml",
                "uid": "job-uid",
                "resourceVersion": "77",
                "labels": {"jobset.sigs.k8s.io/jobset-name": "js"},
                "annotations": {
                    "slurmjob.slinky.slurm.net/partition": "gpu",
                    "batch.kubernetes.io/job-tracking": "",
                },
                "ownerReferences": [
                    {
                        "apiVersion": "jobset.x-k8s.io/v1alpha2",
                        "kind": "JobSet",
                        "name": "js",
                        "uid": "js-uid",
                        "controller": True,
                    }
                ],
            },
            "spec": {"parallelism": 2, "template": {"spec": {"containers": []}}},
            "status": {"active": 2},
        }
    )
    w = workload_to_event(raw, producer="prod-1", observed_at=5)
    assert (w.source, w.key, w.version, w.producer, w.observed_at) == (
        "k8s",
        "ml/Job:train",
        "77",
        "prod-1",
        5,
    )
    assert (w.uid, w.namespace, w.name, w.workload_kind, w.api_version, w.size) == (
        "job-uid",
        "ml",
        "train",
        "Job",
        "batch/v1",
        2,
    )
    assert w.annotations == {"slurmjob.slinky.slurm.net/partition": "gpu"}
    assert w.owner == OwnerRef(
        api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet", name="js", uid="js-uid"
    )
    # The key is the root key of the group whose pods it owns.
    assert w.key == _pods.Group(namespace="ml", kind="Job", name="train").root_key
    assert decode_event("KubeWorkload", encode_event(w)) == w


def test_a_leader_worker_set_is_the_root_of_each_replica() -> None:
    raw = decode_workload(
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "lws", "namespace": "ml", "uid": "u"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3}},
        }
    )
    w = workload_to_event(raw, producer="p", observed_at=0)
    replica = _pods.Group(namespace="ml", kind="LeaderWorkerSet", name="lws/1")
    assert (w.key, w.size, w.owner) == (replica.root_key, 3, None)


def test_workload_deadline_min_resources_and_phase() -> None:
    """Issue 18 (5, 8): a Job's activeDeadlineSeconds, a PodGroup's minResources and
    status.phase reach the reconcilers."""
    job = workload_to_event(
        decode_workload(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "j", "namespace": "ml"},
                "spec": {"parallelism": 1, "activeDeadlineSeconds": 90},
                "status": {"active": 1},
            }
        ),
        producer="p",
        observed_at=1,
    )
    assert (job.active_deadline_s, job.phase) == (90, "")
    group = workload_to_event(
        decode_workload(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "ml"},
                "spec": {"minMember": 2, "minResources": {"cpu": "3", "memory": "2Gi"}},
                "status": {"phase": "Running"},
            }
        ),
        producer="p",
        observed_at=1,
    )
    assert (group.min_cpu_millis, group.min_memory_bytes, group.phase) == (3000, 2 * GIB, "Running")
    assert group.active_deadline_s == 0
