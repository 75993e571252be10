"""The ``nodeset`` reconciler's rules (pure): scale-out, scale-in order, drain-before-delete,
reversal, protection, status — tables over views built in a real Projection."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import pytest

from reconcilers import nodeset
from reconcilers.base import Context
from schemas import wellknown
from schemas.actions import (
    AnyAction,
    CreateNodeSetPod,
    DeleteFailedNodeSetPod,
    DeleteNodeSetPod,
    DrainSlurmNode,
    EnsureNodeSetPDB,
    RecordEvent,
    SetNodeSetStatus,
    SetPodLabel,
    SetSlurmNodeConditions,
    SetSlurmNodePodInfo,
    UndrainSlurmNode,
)
from schemas.events import (
    Event,
    KubeListed,
    KubeNode,
    KubeNodeSet,
    KubePod,
    NodeSetStatus,
    PodCondition,
    SlurmNode,
    SlurmPing,
)
from slurmbridge.runtime.projection import Projection
from tests.unit._pods import kube_nodeset, kube_pod

CTX = Context(scheduler_name="s", cluster="c1")
KEY = "slurm/gpu"
#: A good poll of c1 in the log: its listing is complete (reconcilers.base.slurm_listed).
LISTED = SlurmPing(source="slurm:c1", key="c1", cluster="c1", responding=True)


def ns(replicas: int, **kw: object) -> KubeNodeSet:
    return kube_nodeset(
        "slurm",
        "gpu",
        uid="ns-uid",
        replicas=replicas,
        generation=2,
        **kw,  # type: ignore[arg-type]
    )


def pod(
    ordinal: int,
    *,
    phase: str = "Running",
    ready: bool = True,
    node: str = "k1",
    cost: int | None = None,
    deleting: bool = False,
    protect: bool = False,
    ready_since: int = 0,
    created: int = 0,
) -> KubePod:
    labels = {nodeset.LABEL_NAME: "slurmd", nodeset.LABEL_INSTANCE: "gpu"}
    if protect:
        labels[wellknown.LABEL_POD_PROTECT] = "true"
    ann = {wellknown.ANNOTATION_POD_DELETION_COST: str(cost)} if cost is not None else {}
    return kube_pod(
        "slurm",
        f"gpu-{ordinal}",
        uid=f"u{ordinal}",
        phase=phase,
        ready=ready,
        node_name=node,
        labels=labels,
        annotations=ann,
        deletion_timestamp=100 if deleting else 0,
        ready_since=ready_since if ready else 0,
        created_at=created,
    )


def sn(ordinal: int, *state: str, reason: str = "") -> SlurmNode:
    return SlurmNode(
        source="slurm:c1",
        key=f"gpu-{ordinal}",
        cluster="c1",
        state=state or ("IDLE",),
        reason=reason,
    )


#: The node watcher's complete listing, and the (schedulable) node the pods run on.
NODES_LISTED = KubeListed(source="k8s", key="nodes")
K1 = KubeNode(source="k8s", key="k1", uid="k1-uid")


def ours(ordinal: int) -> str:
    return wellknown.scale_in_drain_reason("slurm", f"gpu-{ordinal}")


def decide(*objs: Event, listed: bool = True) -> tuple[AnyAction, ...]:
    p = Projection()
    for i, o in enumerate((LISTED, *objs) if listed else objs, 1):
        p.apply(o, i)
    return nodeset.decide(nodeset.view(p, KEY, CTX)).actions


def of(kind: type, actions: tuple[AnyAction, ...]) -> list[AnyAction]:
    return [a for a in actions if isinstance(a, kind)]


@dataclass(frozen=True)
class Case:
    name: str
    objs: tuple[Event, ...]
    creates: list[str] = field(default_factory=list)
    drains: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    undrains: list[str] = field(default_factory=list)


CASES = [
    # Slow start (rule 1): as many creates as live pods, at least one.
    Case("0 → 3 creates the lowest ordinal first", (ns(3),), creates=["gpu-0"]),
    Case("1 → 3 creates one more", (ns(3), pod(0), sn(0)), creates=["gpu-1"]),
    Case(
        "2 → 5 creates two more, the lowest ordinals",
        (ns(5), pod(0), sn(0), pod(1), sn(1)),
        creates=["gpu-2", "gpu-3"],
    ),
    Case(
        "a gap is filled first",
        (ns(3), pod(0), sn(0), pod(2), sn(2)),
        creates=["gpu-1"],
    ),
    Case(
        "a terminating name is not reused",
        (ns(2), pod(0), sn(0), pod(1, deleting=True)),
        creates=["gpu-2"],
    ),
    Case("steady state does nothing", (ns(2), pod(0), sn(0), pod(1), sn(1))),
    Case(
        "scale-in drains the highest ordinal first, and deletes it right after when idle",
        (ns(1), pod(0), sn(0), pod(1), sn(1)),
        drains=["gpu-1"],
        deletes=["gpu-1"],
    ),
    Case(
        "a busy node is drained and waits",
        (ns(1), pod(0), sn(0), pod(1), sn(1, "MIXED")),
        drains=["gpu-1"],
    ),
    Case(
        "drained and idle ⇒ delete",
        (ns(1), pod(0), sn(0), pod(1), sn(1, "IDLE", "DRAIN", reason=ours(1))),
        deletes=["gpu-1"],
    ),
    *[
        Case(
            f"drained but {busy} ⇒ wait",
            (ns(1), pod(0), sn(0), pod(1), sn(1, busy, "DRAIN", reason=ours(1))),
        )
        for busy in ("ALLOCATED", "MIXED", "COMPLETING")
    ],
    Case(
        "an administrator's drain counts as drained, and is not rewritten",
        (ns(1), pod(0), sn(0), pod(1), sn(1, "IDLE", "DRAIN", reason="bad DIMM")),
        deletes=["gpu-1"],
    ),
    Case(
        "unknown to Slurm ⇒ delete (the effector asks Slurm again)",
        (ns(1), pod(0), sn(0), pod(1, phase="Pending", ready=False, node="")),
        deletes=["gpu-1"],
    ),
    Case(
        "unassigned before assigned, whatever the ordinal",
        (ns(1), pod(0, phase="Pending", ready=False, node=""), pod(1), sn(1)),
        deletes=["gpu-0"],
    ),
    Case(
        "Pending before Running",
        (ns(1), pod(0, phase="Pending", ready=False), sn(0), pod(1), sn(1)),
        drains=["gpu-0"],
        deletes=["gpu-0"],
    ),
    Case(
        "not ready before ready",
        (ns(1), pod(0, ready=False), sn(0), pod(1), sn(1)),
        drains=["gpu-0"],
        deletes=["gpu-0"],
    ),
    Case(
        "lower deletion cost first",
        (ns(1), pod(0, cost=-5), sn(0), pod(1, cost=10), sn(1)),
        drains=["gpu-0"],
        deletes=["gpu-0"],
    ),
    Case(
        "an invalid deletion cost counts as 0",
        (ns(1), pod(0, cost=None), sn(0), pod(1), sn(1)),
        drains=["gpu-1"],
        deletes=["gpu-1"],
    ),
    Case(
        # Issue 18 (10): an administrator's undrain under way (DRAIN+UNDRAIN) is not
        # "drained": the deletion must not race it.
        "drained but an undrain under way ⇒ wait",
        (ns(1), pod(0), sn(0), pod(1), sn(1, "IDLE", "DRAIN", "UNDRAIN", reason=ours(1))),
    ),
    Case(
        # Issue 18 (12): ties broken as Kubernetes' ActivePods: most recently ready first …
        "the pod ready most recently goes first",
        (ns(1), pod(0, ready_since=500), sn(0), pod(1, ready_since=100), sn(1)),
        drains=["gpu-0"],
        deletes=["gpu-0"],
    ),
    Case(
        # … then the newest.
        "then the newest pod goes first",
        (ns(1), pod(0, created=900), sn(0), pod(1, created=100), sn(1)),
        drains=["gpu-0"],
        deletes=["gpu-0"],
    ),
    Case(
        "already drained before not drained",
        (ns(1), pod(0), sn(0, "IDLE", "DRAIN", reason="x"), pod(1), sn(1)),
        deletes=["gpu-0"],
    ),
    Case(
        "reversal undrains our drains only, on a schedulable node",
        (
            ns(3),
            NODES_LISTED,
            K1,
            pod(0),
            sn(0, "IDLE", "DRAIN", reason=ours(0)),
            pod(1),
            sn(1, "IDLE", "DRAIN", reason="admin: bad fan"),
            pod(2),
            # slurm-operator 1.x owns every "slurm-operator: " reason (IsNodeReasonOurs)
            sn(2, "IDLE", "DRAIN", reason=ours(1)),
        ),
        undrains=["gpu-0", "gpu-2"],
    ),
    Case(
        "reversal waits for the Kubernetes nodes to be listed",
        (ns(1), pod(0), sn(0, "IDLE", "DRAIN", reason=ours(0))),
    ),
    Case(
        "0 replicas condemns everyone",
        (ns(0), pod(0), sn(0), pod(1), sn(1, "ALLOCATED")),
        drains=["gpu-1", "gpu-0"],  # condemned order: higher ordinal first
        deletes=["gpu-0"],  # idle: right after its drain; gpu-1 runs a job and waits
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_rules(case: Case) -> None:
    acts = decide(*case.objs)
    assert [a.pod_name for a in of(CreateNodeSetPod, acts)] == case.creates  # type: ignore[attr-defined]
    assert [a.node for a in of(DrainSlurmNode, acts)] == case.drains  # type: ignore[attr-defined]
    assert [a.pod.name for a in of(DeleteNodeSetPod, acts)] == case.deletes  # type: ignore[attr-defined]
    assert [a.node for a in of(UndrainSlurmNode, acts)] == case.undrains  # type: ignore[attr-defined]
    for d in of(DrainSlurmNode, acts):
        assert isinstance(d, DrainSlurmNode) and d.reason == ours(int(d.node.split("-")[1]))
        assert d.cluster == "c1"
    for u in of(UndrainSlurmNode, acts):
        assert isinstance(u, UndrainSlurmNode)
        assert u.owned_prefixes == (wellknown.OPERATOR_REASON_PREFIX,)


def test_scale_events_name_the_pods() -> None:
    up = of(RecordEvent, decide(ns(2)))
    assert [(e.reason, e.object_kind) for e in up] == [("ScalingUp", "NodeSet")]  # type: ignore[attr-defined]
    down = of(RecordEvent, decide(ns(0), pod(0), sn(0, "ALLOCATED")))
    assert [e.reason for e in down] == ["ScalingDown"]  # type: ignore[attr-defined]
    assert "waiting for gpu-0 to drain" in down[0].message  # type: ignore[attr-defined]


def test_padding_names_pods() -> None:
    acts = decide(ns(3, ordinal_padding=3), pod(0), sn(0))
    assert [a.pod_name for a in of(CreateNodeSetPod, acts)] == ["gpu-001"]  # type: ignore[attr-defined]
    assert nodeset.ordinal_of("gpu", "gpu-007") == 7
    assert nodeset.ordinal_of("gpu", "gpux-1") is None


def test_busy_pods_are_protected_and_released() -> None:
    acts = decide(ns(2), pod(0), sn(0, "MIXED"), pod(1, protect=True), sn(1))
    labels = [(a.pod.name, a.value) for a in of(SetPodLabel, acts)]  # type: ignore[attr-defined]
    assert labels == [("gpu-0", "true"), ("gpu-1", None)]


def test_status_counts_from_slurm_and_is_written_once() -> None:
    objs: tuple[Event, ...] = (
        ns(4),
        pod(0),
        sn(0),
        pod(1),
        sn(1, "ALLOCATED"),
        pod(2, ready=False),
        sn(2, "DOWN"),
        pod(3),
        sn(3, "IDLE", "DRAIN", reason="x"),
    )
    (status,) = of(SetNodeSetStatus, decide(*objs))
    assert isinstance(status, SetNodeSetStatus)
    want = NodeSetStatus(
        replicas=4,
        ready_replicas=3,
        available_replicas=3,
        slurm_idle=1,
        slurm_allocated=1,
        slurm_down=1,
        slurm_drain=1,
        observed_generation=2,
        selector="app.kubernetes.io/instance=gpu,app.kubernetes.io/name=slurmd",
        unavailable_replicas=1,
        desired=4,
    )
    assert status.status == want
    # Once the NodeSet shows that status, nothing is written again.
    again = decide(ns(4, status=want), *objs[1:])
    assert of(SetNodeSetStatus, again) == []


def test_applying_the_actions_converges() -> None:
    """Idempotence: after the effects of a scale-in are observed, nothing more is decided."""
    idle = msgspec.structs.replace(
        pod(0), conditions=(PodCondition(type="SlurmNodeStateIdle", status="True"),)
    )
    first = decide(ns(1), idle, sn(0), pod(1), sn(1, "IDLE", "DRAIN", reason=ours(1)))
    kinds = RecordEvent | SetNodeSetStatus | SetSlurmNodeConditions | SetSlurmNodePodInfo
    assert [type(a) for a in first if not isinstance(a, kinds)] == [DeleteNodeSetPod]
    # The kept pod's node then carries its PodInfo (reconcilers.nodeset._ident rule 1).
    (info,) = [a for a in of(SetSlurmNodePodInfo, first) if a.node == "gpu-0"]  # type: ignore[attr-defined]
    assert isinstance(info, SetSlurmNodePodInfo)
    sn0 = msgspec.structs.replace(sn(0), comment=info.info.to_comment())
    status = nodeset.decide(nodeset.view(_proj(ns(1), idle, sn0), KEY, CTX)).actions
    (st,) = of(SetNodeSetStatus, status)
    assert isinstance(st, SetNodeSetStatus)
    assert decide(ns(1, status=st.status), idle, sn0) == ()


def _proj(*objs: Event) -> Projection:
    p = Projection()
    for i, o in enumerate(objs, 1):
        p.apply(o, i)
    return p


def test_other_clusters_and_deleted_nodesets_are_left_alone() -> None:
    assert decide(ns(3, cluster_name="other")) == ()
    assert decide(ns(3, deleting=True)) == ()
    assert decide() == ()


def test_keys_of() -> None:
    p = _proj(ns(1), pod(0), sn(0))
    assert list(nodeset.SPEC.keys_of(ns(1), p, CTX)) == [KEY]
    assert list(nodeset.SPEC.keys_of(pod(0), p, CTX)) == [KEY]
    assert list(nodeset.SPEC.keys_of(sn(0), p, CTX)) == [KEY]
    assert list(nodeset.SPEC.keys_of(sn(9), p, CTX)) == []
    other = SlurmNode(source="slurm:c2", key="gpu-0", cluster="c2")
    assert list(nodeset.SPEC.keys_of(other, p, CTX)) == []
    stray = KubePod(source="k8s", key="slurm/x", namespace="slurm", name="x", labels={})
    assert list(nodeset.SPEC.keys_of(stray, p, CTX)) == []
    assert list(nodeset.all_keys(p, CTX)) == [KEY]


def decide_at(now: float, *objs: Event) -> tuple[AnyAction, ...]:
    p = Projection()
    for i, o in enumerate((LISTED, *objs), 1):
        p.apply(o, i)
    ctx = Context(scheduler_name="s", cluster="c1", now=now)
    return nodeset.decide(nodeset.view(p, KEY, ctx)).actions


def test_a_pod_without_a_slurm_node_waits_while_slurm_is_not_listed() -> None:
    """Fail closed: with no complete, current listing of the cluster in the log (no poll yet,
    or the last one failed), a pod whose node is missing may be running a job."""
    objs = (ns(1), pod(0), sn(0), pod(1))
    assert [a.pod.name for a in of(DeleteNodeSetPod, decide(*objs))] == ["gpu-1"]  # type: ignore[attr-defined]
    held = decide(*objs, listed=False)
    assert not of(DeleteNodeSetPod, held) and not of(DrainSlurmNode, held)
    failing = msgspec.structs.replace(LISTED, responding=False, error="503 Service Unavailable")
    held = decide(failing, *objs, listed=False)
    assert not of(DeleteNodeSetPod, held)
    p = Projection()
    for i, o in enumerate(objs, 1):
        p.apply(o, i)
    assert nodeset.decide(nodeset.view(p, KEY, CTX)).requeue_after is not None


def failures(**entries: tuple[int, int, str]) -> dict[str, str]:
    import json

    return {wellknown.ANNOTATION_NODESET_POD_FAILURES: json.dumps(entries)}


def test_first_busy_pod_ensures_the_pdb_over_protected_pods() -> None:
    actions = decide(ns(2), pod(0), pod(1), sn(0, "ALLOCATED"), sn(1, "ALLOCATED"))
    (pdb,) = of(EnsureNodeSetPDB, actions)  # once per reconcile, not per pod
    assert pdb.selector == {
        nodeset.LABEL_NAME: "slurmd",
        nodeset.LABEL_INSTANCE: "gpu",
        wellknown.LABEL_POD_PROTECT: "true",
    }
    assert len(of(SetPodLabel, actions)) == 2
    # Already protected: no PDB action either (it was ensured with the label).
    again = decide(ns(2), pod(0, protect=True), sn(0, "ALLOCATED"))
    assert not of(EnsureNodeSetPDB, again)


def test_failed_pod_is_deleted_counted_and_recreated_after_backoff() -> None:
    failed = pod(1, phase="Failed", ready=False)
    actions = decide_at(1000.0, ns(2), pod(0), failed)
    (d,) = of(DeleteFailedNodeSetPod, actions)
    assert (d.pod.name, d.failures, d.at) == ("gpu-1", 1, 1000)
    assert not of(CreateNodeSetPod, actions), "name still taken by the failed pod"
    # Redelivered after the failure was recorded: the same count, not one more.
    recorded = ns(2, annotations=failures(**{"gpu-1": (1, 1000, "u1")}))
    (d,) = of(DeleteFailedNodeSetPod, decide_at(1003.0, recorded, pod(0), failed))
    assert (d.failures, d.at) == (1, 1000)
    # Pod gone: its ordinal is held for 10 s, then recreated under the same name.
    assert not of(CreateNodeSetPod, decide_at(1005.0, recorded, pod(0)))
    p = Projection()
    for i, o in enumerate((recorded, pod(0)), 1):
        p.apply(o, i)
    held = nodeset.decide(nodeset.view(p, KEY, Context(scheduler_name="s", cluster="c1", now=1005)))
    assert held.requeue_after == pytest.approx(5.0)
    (c,) = of(CreateNodeSetPod, decide_at(1010.0, recorded, pod(0)))
    assert c.pod_name == "gpu-1"


def test_backoff_doubles_caps_and_forgets() -> None:
    assert [nodeset.backoff_s(n) for n in (1, 2, 3, 6, 50)] == [10, 20, 40, 300, 300]
    failed = pod(1, phase="Failed", ready=False)
    third = ns(2, annotations=failures(**{"gpu-1": (2, 1000, "old-uid")}))
    (d,) = of(DeleteFailedNodeSetPod, decide_at(1100.0, third, pod(0), failed))
    assert d.failures == 3
    (d,) = of(DeleteFailedNodeSetPod, decide_at(1000.0 + 601, third, pod(0), failed))
    assert d.failures == 1, "a failure older than 600 s is forgotten"
    # A garbled annotation counts as no failures (the back-off starts again).
    garbled = ns(2, annotations={wellknown.ANNOTATION_NODESET_POD_FAILURES: "{nope"})
    (d,) = of(DeleteFailedNodeSetPod, decide_at(1000.0, garbled, pod(0), failed))
    assert d.failures == 1


def test_busy_is_the_one_wellknown_rule() -> None:
    """The NodeSet rules' "node is busy" is slurm-operator's ``IsNodeBusy`` as
    :mod:`schemas.wellknown` defines it once (issue 31): the same states, the same answer."""
    assert nodeset.BUSY is wellknown.SLURM_BUSY_STATES
    for state in (("IDLE",), ("ALLOCATED",), ("MIXED", "DRAIN"), ("IDLE", "COMPLETING"), ()):
        node = SlurmNode(source="slurm:c1", key="n", cluster="c1", state=state)
        assert nodeset.is_busy(node) is wellknown.slurm_busy(state)
    assert nodeset.is_busy(None) is False
