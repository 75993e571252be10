"""NodeSet revisions, rolling updates, pod deadlines and the 1.x scale-in criteria (pure):
tables over views built in a real Projection (reconcilers.nodeset rules 2, 9–11;
slurmbridge/kube/revisions.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import pytest

from reconcilers import nodeset
from reconcilers.base import Decision
from schemas import wellknown
from schemas.actions import (
    AnyAction,
    CreateNodeSetPod,
    DeleteNodeSetPod,
    DrainSlurmNode,
    EnsureNodeSetRevision,
    SetNodeSetStatus,
    SetPodAnnotation,
)
from schemas.events import Event, KubeNodeSet, KubePod, SlurmJob
from slurmbridge.kube import revisions
from slurmbridge.runtime.projection import Projection
from tests.unit.test_nodeset import CTX, KEY, LISTED, ns, ours, pod, sn

NEW = "newhash"
OLD = "oldhash"


def rs(replicas: int, **kw: object) -> KubeNodeSet:
    """A NodeSet whose template is at revision NEW."""
    kw.setdefault("revision_hash", NEW)
    kw.setdefault("max_unavailable", "1")
    return ns(replicas, **kw)


def rp(ordinal: int, rev: str = OLD, **kw: object) -> KubePod:
    p = pod(ordinal, **kw)  # type: ignore[arg-type]
    return msgspec.structs.replace(p, labels={**p.labels, wellknown.LABEL_REVISION_HASH: rev})


def job(job_id: int, node: str, *, start: int = 1000, limit: int | None = 60) -> SlurmJob:
    return SlurmJob(
        source="slurm:c1",
        key=str(job_id),
        cluster="c1",
        job_id=job_id,
        state=("RUNNING",),
        nodes=(node,),
        start_time=start,
        time_limit_minutes=limit,
    )


def decision(*objs: Event, now: float = 0.0) -> Decision:
    p = Projection()
    for i, o in enumerate((LISTED, *objs), 1):
        p.apply(o, i)
    ctx = msgspec.structs.replace(CTX, now=now)
    return nodeset.decide(nodeset.view(p, KEY, ctx))


def names(kind: type, actions: tuple[AnyAction, ...]) -> list[str]:
    out = []
    for a in actions:
        if isinstance(a, kind):
            if isinstance(a, DrainSlurmNode):
                out.append(a.node)
            elif isinstance(a, (DeleteNodeSetPod, SetPodAnnotation)):
                out.append(a.pod.name)
            elif isinstance(a, CreateNodeSetPod):
                out.append(a.pod_name)
    return out


# --- revisions ---------------------------------------------------------------------------


def test_revision_hash_is_kubernetes_fnv1_then_safe_encoded() -> None:
    # Go: fnv.New32() of "hello" is 0xb6fa7167 (FNV-1, not FNV-1a's 0x4f9f2cab).
    assert revisions.fnv1_32(b"hello") == 0xB6FA7167
    # rand.SafeEncodeString maps each byte of the decimal string into its alphabet.
    # ("0" is byte 48, 48 % 27 = 21: "4").
    assert revisions.safe_encode("0123456789") == "456789bcdf"
    # The collision count is hashed after the data, in decimal (HashControllerRevision).
    data = b'{"spec":{}}'
    assert revisions.revision_hash(data, 0) == revisions.safe_encode(
        str(revisions.fnv1_32(data + b"0"))
    )
    assert revisions.revision_hash(data, 1) != revisions.revision_hash(data, 0)
    assert revisions.revision_name("gpu", "abc") == "gpu-abc"
    assert revisions.revision_name("x" * 300, "abc") == "x" * 223 + "-abc"


def test_revision_data_is_1x_patch_sorted_and_go_escaped() -> None:
    spec = {
        "replicas": 3,  # not part of a revision: scaling is no update
        "template": {"spec": {"containers": [{"name": "slurmd", "image": "a<b>&c"}]}},
        "slurmd": {"image": "slurmd:25.11"},
        "logfile": {},  # empty: absent (omitzero)
        "extraConf": "Features=gpu",
        "ordinalPadding": 2,
    }
    assert revisions.revision_data(spec) == (
        b'{"spec":{"extraConf":"Features=gpu","ordinalPadding":2,"oversubscribeNode":false,'
        b'"slurmd":{"$patch":"replace","image":"slurmd:25.11"},'
        b'"template":{"$patch":"replace","spec":{"containers":'
        b'[{"image":"a\\u003cb\\u003e\\u0026c","name":"slurmd"}]}}}}'
    )
    scaled = {**spec, "replicas": 9}
    assert revisions.spec_revision_hash(scaled) == revisions.spec_revision_hash(spec)
    changed = {**spec, "template": {"spec": {"containers": [{"name": "slurmd", "image": "b"}]}}}
    assert revisions.spec_revision_hash(changed) != revisions.spec_revision_hash(spec)


@pytest.mark.parametrize(
    ("value", "total", "want"),
    [
        ("", 4, 1),  # default 25% of 4
        ("", 5, 2),  # rounded up
        ("25%", 0, 0),
        ("50%", 4, 2),
        ("3", 4, 3),
        ("0", 4, 0),
        ("lots", 4, 1),  # unreadable: 1 (mathutils default)
    ],
)
def test_max_unavailable(value: str, total: int, want: int) -> None:
    assert nodeset.max_unavailable(value, total) == want


# --- deadlines and the 1.x sort criteria --------------------------------------------------


def test_node_deadlines_take_the_latest_running_job() -> None:
    jobs = [
        job(1, "gpu-0", start=1000, limit=10),
        job(2, "gpu-0", start=1000, limit=60),
        job(3, "gpu-1", start=500, limit=None),
        msgspec.structs.replace(job(4, "gpu-2"), state=("PENDING",)),
        job(5, "other", start=1, limit=1),
    ]
    got = nodeset.node_deadlines(jobs, {"gpu-0", "gpu-1", "gpu-2"})
    assert got == {"gpu-0": 1000 + 3600, "gpu-1": 500 + nodeset.INFINITE_S}


def test_deadline_annotation_written_from_slurm_and_removed_when_idle() -> None:
    stale = msgspec.structs.replace(
        pod(1), annotations={wellknown.ANNOTATION_POD_DEADLINE: "2000-01-01T00:00:00Z"}
    )
    d = decision(ns(2), pod(0), sn(0, "ALLOCATED"), stale, sn(1), job(7, "gpu-0"))
    sets = [a for a in d.actions if isinstance(a, SetPodAnnotation)]
    assert [(a.pod.name, a.value) for a in sets] == [
        ("gpu-0", nodeset.format_deadline(1000 + 3600)),
        ("gpu-1", None),
    ]
    assert nodeset.parse_deadline(nodeset.format_deadline(4600)) == 4600
    assert nodeset.parse_deadline("not a time") == 0


@dataclass(frozen=True)
class Order:
    name: str
    objs: tuple[Event, ...]
    first: str


def _ann(p: KubePod, **ann: str) -> KubePod:
    return msgspec.structs.replace(p, annotations={**p.annotations, **ann})


ORDERS = [
    Order(
        "the pod whose jobs end soonest goes first; no job at all before any",
        (
            ns(2),
            pod(0),
            sn(0),
            pod(1),
            sn(1, "MIXED"),
            pod(2),
            sn(2, "MIXED"),
            job(1, "gpu-1", limit=600),
            job(2, "gpu-2", limit=5),
        ),
        "gpu-0",
    ),
    Order(
        "among busy pods, the earliest deadline first (not the highest ordinal)",
        (
            ns(1),
            pod(1),
            sn(1, "MIXED"),
            pod(2),
            sn(2, "MIXED"),
            job(1, "gpu-1", limit=5),
            job(2, "gpu-2", limit=600),
        ),
        "gpu-1",
    ),
    Order(
        "without a Slurm listing the pod-deadline annotation decides",
        (
            ns(1),
            _ann(pod(1), **{wellknown.ANNOTATION_POD_DEADLINE: "2030-01-01T00:00:00Z"}),
            sn(1),
            _ann(pod(2), **{wellknown.ANNOTATION_POD_DEADLINE: "2031-01-01T00:00:00Z"}),
            sn(2),
        ),
        "gpu-1",
    ),
    Order(
        "a cordoned pod before one that is not",
        (ns(1), _ann(pod(0), **{wellknown.ANNOTATION_POD_CORDON: "true"}), sn(0), pod(1), sn(1)),
        "gpu-0",
    ),
    Order(
        "deletion cost still comes before the deadline",
        (ns(1), pod(0, cost=-1), sn(0, "MIXED"), pod(1), sn(1), job(1, "gpu-0")),
        "gpu-0",
    ),
]


@pytest.mark.parametrize("case", ORDERS, ids=lambda c: c.name)
def test_scale_in_order_1x_criteria(case: Order) -> None:
    p = Projection()
    listed = "without a Slurm listing" not in case.name
    for i, o in enumerate((LISTED, *case.objs) if listed else case.objs, 1):
        p.apply(o, i)
    v = nodeset.view(p, KEY, CTX)
    assert v is not None
    live = [x for x in v.pods if not x.deleting]
    order = nodeset.scale_in_order(live, "gpu", v.slurm, v.deadlines if v.slurm_listed else None)
    assert order[0].name == case.first


# --- rolling updates ---------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    objs: tuple[Event, ...]
    drains: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    creates: list[str] = field(default_factory=list)
    note: str = ""
    now: float = 0.0


def four(*pods_and_nodes: Event) -> tuple[Event, ...]:
    return (rs(4), *pods_and_nodes)


IDLE4 = (rp(0), sn(0), rp(1), sn(1), rp(2), sn(2), rp(3), sn(3))
CASES = [
    Case("all pods at the new revision: nothing", (rs(2), rp(0, NEW), sn(0), rp(1, NEW), sn(1))),
    Case(
        "maxUnavailable 1: one idle old pod, drained and deleted at once",
        four(*IDLE4),
        drains=["gpu-3"],
        deletes=["gpu-3"],
    ),
    Case(
        "maxUnavailable 50%: two at once",
        (rs(4, max_unavailable="50%"), *IDLE4),
        drains=["gpu-3", "gpu-2"],
        deletes=["gpu-3", "gpu-2"],
    ),
    Case(
        "a busy old pod is drained, never deleted while its node runs a job",
        (rs(1), rp(0), sn(0, "ALLOCATED"), job(1, "gpu-0")),
        drains=["gpu-0"],
    ),
    Case(
        "a pod already draining for the update stays the one replaced (budget spent)",
        four(
            rp(0),
            sn(0),
            rp(1),
            sn(1),
            rp(2),
            sn(2),
            rp(3),
            sn(3, "MIXED", "DRAIN", reason=ours(3)),
            job(1, "gpu-3"),
        ),
    ),
    Case(
        "its job ends: drained and idle, deleted",
        four(
            rp(0), sn(0), rp(1), sn(1), rp(2), sn(2), rp(3), sn(3, "IDLE", "DRAIN", reason=ours(3))
        ),
        deletes=["gpu-3"],
    ),
    Case(
        "idle old pods go before busy ones (deadline order)",
        four(rp(0), sn(0), rp(1), sn(1), rp(2), sn(2), rp(3), sn(3, "MIXED"), job(1, "gpu-3")),
        drains=["gpu-2"],
        deletes=["gpu-2"],
    ),
    Case(
        "a new pod not yet ready uses the budget",
        four(rp(0, NEW, ready=False, phase="Pending"), rp(1), sn(1), rp(2), sn(2), rp(3), sn(3)),
    ),
    Case(
        "a new pod ready for less than minReadySeconds uses the budget",
        (rs(2, min_ready_seconds=10), rp(0, NEW, ready_since=95), sn(0), rp(1), sn(1)),
        now=100.0,
    ),
    Case(
        "… and once available, the next old pod goes",
        (rs(2, min_ready_seconds=10), rp(0, NEW, ready_since=85), sn(0), rp(1), sn(1)),
        drains=["gpu-1"],
        deletes=["gpu-1"],
        now=100.0,
    ),
    Case(
        "a missing replica: scale-out first, no update in that decision",
        four(rp(0), sn(0), rp(1), sn(1), rp(2), sn(2)),
        creates=["gpu-3"],
    ),
    Case(
        "unhealthy old pods are replaced whatever the budget",
        four(rp(0, NEW, ready=False), sn(0), rp(1, ready=False), sn(1), rp(2), sn(2), rp(3), sn(3)),
        drains=["gpu-1"],
        deletes=["gpu-1"],
    ),
    Case("OnDelete: nothing", (rs(2, update_strategy="OnDelete"), rp(0), sn(0), rp(1), sn(1))),
    Case(
        "ScheduledUpdate before its window: nothing (no node is MAINT in the reservation)",
        (rs(2, update_strategy="ScheduledUpdate"), rp(0), sn(0), rp(1), sn(1)),
        note="scheduled update: 2 old pod(s), 0 unhealthy or under reservation",
    ),
    Case(
        "an observation from before revisions (no hash): nothing",
        (ns(2), rp(0), sn(0), rp(1), sn(1)),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_rolling_update(case: Case) -> None:
    d = decision(*case.objs, now=case.now)
    assert names(DrainSlurmNode, d.actions) == case.drains
    assert names(DeleteNodeSetPod, d.actions) == case.deletes
    assert names(CreateNodeSetPod, d.actions) == case.creates
    assert case.note in d.reason
    for a in d.actions:
        if isinstance(a, DrainSlurmNode):
            assert a.reason == wellknown.scale_in_drain_reason("slurm", a.node)


def test_min_ready_seconds_requeues_when_the_new_pod_becomes_available() -> None:
    d = decision(
        rs(2, min_ready_seconds=10), rp(0, NEW, ready_since=95), sn(0), rp(1), sn(1), now=100.0
    )
    assert d.requeue_after == pytest.approx(5.0)


def test_status_names_the_revision_and_records_it_first() -> None:
    objs = (rp(0, NEW), sn(0), rp(1), sn(1, "MIXED"), job(1, "gpu-1"))
    d = decision(rs(2), *objs)
    kinds = [type(a) for a in d.actions if isinstance(a, (EnsureNodeSetRevision, SetNodeSetStatus))]
    assert kinds == [EnsureNodeSetRevision, SetNodeSetStatus]
    ensure = next(a for a in d.actions if isinstance(a, EnsureNodeSetRevision))
    assert ensure.revision_hash == NEW
    assert ensure.live == (NEW, OLD)
    status = next(a for a in d.actions if isinstance(a, SetNodeSetStatus)).status
    assert (status.node_set_hash, status.updated_replicas, status.desired) == (NEW, 1, 2)
    # Written: only the Slurm counts change next ⇒ the status, not the revision again.
    busy_again = msgspec.structs.replace(status, slurm_allocated=0, slurm_idle=2)
    d2 = decision(rs(2, status=busy_again), *objs)
    assert [type(a) for a in d2.actions if isinstance(a, EnsureNodeSetRevision)] == []
    assert any(isinstance(a, SetNodeSetStatus) for a in d2.actions)
