"""A slurmd pod's Slurm node identity and records (reconcilers.nodeset._ident through
reconcilers.nodeset): PodInfo comment, ``k8s/`` features, topology, never-registered pods and
pruned records — tables, pure."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import pytest

from reconcilers import nodeset
from reconcilers.base import Context
from reconcilers.nodeset import _ident
from schemas import podinfo, wellknown
from schemas.actions import (
    AnyAction,
    DeleteNodeSetPod,
    NodeSetRef,
    PodRef,
    PruneSlurmNodeRecord,
    RecordEvent,
    SetNodeSetStatus,
    SetPodAnnotation,
    SetSlurmNodeOwnedFeatures,
    SetSlurmNodePodInfo,
    UpdateSlurmNodeTopology,
)
from schemas.events import (
    Event,
    KubeListed,
    KubeNode,
    KubeNodeSet,
    KubePod,
    SlurmNode,
    SlurmPing,
)
from schemas.podinfo import PodInfo
from slurmbridge.runtime.projection import Projection
from tests.unit._pods import kube_nodeset, kube_pod

NOW = 100_000.0
CTX = Context(scheduler_name="s", cluster="c1", now=NOW)
NS = KubeNodeSet(source="k8s", key="slurm/gpu", uid="ns-uid", namespace="slurm", name="gpu")
DS = kube_nodeset(
    "slurm", "gpu", uid="ns-uid", scaling_mode="DaemonSet", prune_slurm_node_records="NodeNotFound"
)
PING = SlurmPing(source="slurm:c1", key="c1", cluster="c1", responding=True)
PODS_LISTED = KubeListed(source="k8s", key="pods")
NODES_LISTED = KubeListed(source="k8s", key="nodes")
LISTED = (PING, PODS_LISTED, NODES_LISTED)
FEATURES = wellknown.ANNOTATION_NODE_FEATURES_SPEC
TOPOLOGY = wellknown.ANNOTATION_TOPOLOGY_SPEC
INFO = PodInfo(
    namespace="slurm", pod_name="gpu-0", node="k1", nodeset_name="gpu", nodeset_uid="ns-uid"
)
#: What slurm-operator 1.x writes for INFO (podinfo.go, encoding/json field order).
INFO_JSON = (
    '{"namespace":"slurm","podName":"gpu-0","node":"k1","nodeSetName":"gpu","nodeSetUID":"ns-uid"}'
)


def _fields(ns: KubeNodeSet) -> dict[str, object]:
    return {f: getattr(ns, f) for f in ns.__struct_fields__}


def knode(name: str = "k1", **annotations: str) -> KubeNode:
    return KubeNode(source="k8s", key=name, uid=name, annotations=annotations)


def pod(
    name: str = "gpu-0",
    *,
    ready: bool = True,
    phase: str = "Running",
    node: str = "k1",
    ready_since: float = NOW - 60,
    annotations: dict[str, str] | None = None,
) -> KubePod:
    return kube_pod(
        "slurm",
        name,
        uid=f"u-{name}",
        phase=phase,
        ready=ready,
        ready_since=int(ready_since) if ready else 0,
        node_name=node,
        labels={nodeset.LABEL_NAME: "slurmd", nodeset.LABEL_INSTANCE: "gpu"},
        annotations=annotations or {},
    )


def sn(
    name: str = "gpu-0",
    *state: str,
    comment: str = INFO_JSON,
    features: tuple[str, ...] = ("gpu",),
    topology: str | None = "",
) -> SlurmNode:
    return SlurmNode(
        source="slurm:c1",
        key=name,
        cluster="c1",
        state=state or ("IDLE",),
        comment=comment,
        features=features,
        topology=topology,
    )


def decide(
    *objs: Event, ns: KubeNodeSet = NS, listed: tuple[Event, ...] = LISTED
) -> nodeset.Decision:
    p = Projection()
    for i, o in enumerate((*listed, ns, *objs), 1):
        p.apply(o, i)
    return nodeset.decide(nodeset.view(p, ns.key, CTX))


IDENT = (SetSlurmNodePodInfo, SetSlurmNodeOwnedFeatures, SetPodAnnotation, UpdateSlurmNodeTopology)


def ident(actions: tuple[AnyAction, ...]) -> list[AnyAction]:
    """The actions of rules 1–3 (the reconciler's other rules are tested elsewhere)."""
    return [a for a in actions if isinstance(a, IDENT)]


REF = PodRef(namespace="slurm", name="gpu-0", uid="u-gpu-0")


@dataclass(frozen=True)
class Case:
    name: str
    objs: tuple[Event, ...]
    want: list[AnyAction] = field(default_factory=list)


CASES = [
    # --- rule 1: PodInfo --------------------------------------------------------------------
    Case(
        "a healthy pod's node without a comment gets its PodInfo",
        (knode(), pod(), sn(comment="")),
        [SetSlurmNodePodInfo(cluster="c1", node="gpu-0", info=INFO)],
    ),
    Case("the same PodInfo is left alone", (knode(), pod(), sn())),
    Case(
        "equal PodInfo in another key order, with an unknown key, is left alone",
        (
            knode(),
            pod(),
            sn(
                comment='{"nodeSetUID":"ns-uid","node":"k1","x":1,"podName":"gpu-0",'
                '"nodeSetName":"gpu","namespace":"slurm"}'
            ),
        ),
    ),
    Case(
        "a comment naming another Kubernetes node is rewritten",
        (knode(), pod(), sn(comment=INFO_JSON.replace('"k1"', '"k9"'))),
        [SetSlurmNodePodInfo(cluster="c1", node="gpu-0", info=INFO)],
    ),
    Case(
        "an administrator's free-text comment is replaced",
        (knode(), pod(), sn(comment="rack 4, slot 2")),
        [SetSlurmNodePodInfo(cluster="c1", node="gpu-0", info=INFO)],
    ),
    Case("a pod that is not Ready writes nothing", (knode(), pod(ready=False), sn(comment=""))),
    Case(
        "a Pending pod writes nothing",
        (knode(), pod(phase="Pending", ready=False), sn(comment="")),
    ),
    Case("no Slurm node, no comment", (knode(), pod(ready_since=NOW - 1))),
    # --- rule 2: k8s/ features --------------------------------------------------------------
    Case(
        "the node annotation becomes k8s/ features, trimmed, sorted, deduplicated",
        (knode(**{FEATURES: " nvme, gpu-a100 ,,nvme"}), pod(), sn()),
        [
            SetSlurmNodeOwnedFeatures(
                cluster="c1",
                node="gpu-0",
                prefix="k8s/",
                features=("k8s/gpu-a100", "k8s/nvme"),
            )
        ],
    ),
    Case(
        "features already in place (any order) are left alone",
        (knode(**{FEATURES: "nvme,a"}), pod(), sn(features=("k8s/nvme", "gpu", "k8s/a"))),
    ),
    Case(
        "an annotation removed clears the k8s/ features only",
        (knode(), pod(), sn(features=("gpu", "k8s/old"))),
        [SetSlurmNodeOwnedFeatures(cluster="c1", node="gpu-0", prefix="k8s/", features=())],
    ),
    Case(
        "a replaced value swaps the k8s/ feature",
        (knode(**{FEATURES: "new"}), pod(), sn(features=("gpu", "k8s/old"))),
        [
            SetSlurmNodeOwnedFeatures(
                cluster="c1", node="gpu-0", prefix="k8s/", features=("k8s/new",)
            )
        ],
    ),
    Case(
        "a Kubernetes node the log does not hold changes nothing",
        (pod(), sn(features=("gpu", "k8s/old"))),
    ),
    # --- rule 3: topology -------------------------------------------------------------------
    Case(
        "the node's topology goes onto the pod and the Slurm node",
        (knode(**{TOPOLOGY: "topo:s1"}), pod(), sn()),
        [
            SetPodAnnotation(pod=REF, annotation=TOPOLOGY, value="topo:s1"),
            UpdateSlurmNodeTopology(cluster="c1", node="gpu-0", topology="topo:s1"),
        ],
    ),
    Case(
        "both in place: nothing",
        (
            knode(**{TOPOLOGY: "topo:s1"}),
            pod(annotations={TOPOLOGY: "topo:s1"}),
            sn(topology="topo:s1"),
        ),
    ),
    Case(
        "no topology anywhere writes no empty annotation",
        (knode(), pod(), sn()),
    ),
    Case(
        "an annotation removed from the node clears the pod's and Slurm's",
        (knode(), pod(annotations={TOPOLOGY: "topo:s1"}), sn(topology="topo:s1")),
        [
            SetPodAnnotation(pod=REF, annotation=TOPOLOGY, value=""),
            UpdateSlurmNodeTopology(cluster="c1", node="gpu-0", topology=""),
        ],
    ),
    Case(
        "a REST API without topology (before v0.0.43): the pod only",
        (knode(**{TOPOLOGY: "topo:s1"}), pod(), sn(topology=None)),
        [SetPodAnnotation(pod=REF, annotation=TOPOLOGY, value="topo:s1")],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_identity_rules(case: Case) -> None:
    assert ident(decide(*case.objs).actions) == case.want


def test_pod_info_json_is_what_the_operator_writes() -> None:
    assert INFO.to_comment() == INFO_JSON
    assert podinfo.parse(INFO_JSON) == INFO
    # omitempty on the NodeSet fields only (podinfo.go)
    assert PodInfo(namespace="a", pod_name="b").to_comment() == (
        '{"namespace":"a","podName":"b","node":""}'
    )


@pytest.mark.parametrize("text", ["", "rack 4", "[1]", '{"podName": 3}', "null"])
def test_a_comment_without_pod_info_parses_to_none(text: str) -> None:
    assert podinfo.parse(text) is None


# --- rule 4: never registered -----------------------------------------------------------------


def _deleted(d: nodeset.Decision) -> list[AnyAction]:
    return [
        a
        for a in d.actions
        if isinstance(a, DeleteNodeSetPod)
        or (isinstance(a, RecordEvent) and a.reason == "SlurmNodeNotRegistered")
    ]


def test_a_healthy_pod_never_registered_is_deleted_with_a_warning() -> None:
    two = KubeNodeSet(**{**_fields(NS), "replicas": 2})
    d = decide(knode(), pod(ready_since=NOW - 11), pod("gpu-1"), sn("gpu-1"), ns=two)
    delete, event = _deleted(d)
    assert delete == DeleteNodeSetPod(pod=REF, cluster="c1", slurm_node="gpu-0")
    assert isinstance(event, RecordEvent)
    assert (event.type, event.object_kind, event.name) == ("Warning", "NodeSet", "gpu")
    assert event.message == (
        "Deleting Pod slurm/gpu-0: Slurm node is not registered but pod is healthy"
    )


@pytest.mark.parametrize(
    ("name", "objs", "kw", "requeue"),
    [
        ("within the grace: look again when it ends", (pod(ready_since=NOW - 4),), {}, 6.0),
        (
            "minReadySeconds adds to the grace",
            (pod(ready_since=NOW - 20),),
            {"ns": KubeNodeSet(**{**_fields(NS), "min_ready_seconds": 30})},
            # 20 s left of the grace; the availability re-check (rule 10) comes first
            10.0,
        ),
        ("not Ready: cannot tell", (pod(ready=False),), {}, None),
        ("no complete Slurm listing: absence proves nothing", (pod(),), {"listed": ()}, None),
        ("registered: nothing", (pod(), sn()), {}, None),
    ],
)
def test_never_registered_waits_or_leaves_alone(
    name: str, objs: tuple[Event, ...], kw: dict[str, object], requeue: float | None
) -> None:
    del name
    d = decide(knode(), *objs, **kw)  # type: ignore[arg-type]
    assert _deleted(d) == []
    if requeue is not None:
        assert d.requeue_after == pytest.approx(requeue, abs=1.0)


def test_a_condemned_pod_is_not_deleted_as_unregistered() -> None:
    # Scale-in to 0 condemns gpu-0: the drain-before-delete rule owns it, not rule 4.
    ns0 = KubeNodeSet(**{**_fields(NS), "replicas": 0})
    d = decide(knode(), pod(ready_since=NOW - 60), ns=ns0)
    assert next(a for a in d.actions if isinstance(a, RecordEvent)).reason == "ScalingDown"
    assert not any(
        isinstance(a, RecordEvent) and a.reason == "SlurmNodeNotRegistered" for a in d.actions
    )


# --- rule 5: pruning records ------------------------------------------------------------------

DS_REF = NodeSetRef(namespace="slurm", name="gpu", uid="ns-uid")
DEFUNCT = ("DOWN", "NOT_RESPONDING", "DYNAMIC_NORM")


def record(
    name: str = "k1",
    *state: str,
    info: PodInfo | None = None,
) -> SlurmNode:
    i = info or PodInfo(
        namespace="slurm", pod_name="gpu-abc", node=name, nodeset_name="gpu", nodeset_uid="ns-uid"
    )
    return sn(name, *(state or DEFUNCT), comment=i.to_comment())


def _pruned(d: nodeset.Decision) -> list[str]:
    return [a.node for a in d.actions if isinstance(a, PruneSlurmNodeRecord)]


def test_a_defunct_record_whose_pod_and_node_are_gone_is_pruned_with_an_event() -> None:
    d = decide(record("k1"), ns=DS)
    # DaemonSet-mode NodeSets are managed now: the prune and its Event come first, then
    # the status write of the rest of the reconcile.
    prune, event, status = d.actions
    assert isinstance(status, SetNodeSetStatus)
    assert prune == PruneSlurmNodeRecord(cluster="c1", node="k1", nodeset=DS_REF, pod="gpu-abc")
    assert isinstance(event, RecordEvent)
    assert (event.type, event.reason) == ("Normal", "DefunctSlurmNodePruned")
    assert event.message == (
        "Deleted defunct Slurm node k1: backing Pod slurm/gpu-abc is gone and Kubernetes "
        "node k1 no longer maps to its Slurm node"
    )
    assert "pruning k1" in d.reason


OTHER_UID = PodInfo(
    namespace="slurm", pod_name="gpu-abc", node="k1", nodeset_name="gpu", nodeset_uid="old"
)
NO_UID = PodInfo(namespace="slurm", pod_name="gpu-abc", node="k1", nodeset_name="gpu")
OTHER_NS = PodInfo(
    namespace="hpc", pod_name="gpu-abc", node="k1", nodeset_name="gpu", nodeset_uid="ns-uid"
)
NO_NODE = PodInfo(namespace="slurm", pod_name="gpu-abc", nodeset_name="gpu", nodeset_uid="ns-uid")


@dataclass(frozen=True)
class PruneCase:
    name: str
    objs: tuple[Event, ...]
    pruned: tuple[str, ...] = ()
    ns: KubeNodeSet = DS
    listed: tuple[Event, ...] = LISTED


PRUNE_CASES = [
    PruneCase(
        "the Kubernetes node exists but maps to another name (hostname-override)",
        (
            record("k1"),
            knode("k1", **{wellknown.ANNOTATION_NODE_HOSTNAME_OVERRIDE: "k1-new"}),
        ),
        ("k1",),
    ),
    PruneCase(
        "the Kubernetes node still maps to it (name up to the first dot): kept",
        (
            record("k1", info=msgspec.structs.replace(NO_NODE, node="k1.example.org")),
            knode("k1.example.org"),
        ),
    ),
    PruneCase("its pod still exists: kept", (record("k1"), pod("gpu-abc", node="k1"))),
    PruneCase(
        "pruneSlurmNodeRecords Never: kept",
        (record("k1"),),
        ns=KubeNodeSet(**{**_fields(DS), "prune_slurm_node_records": "Never"}),
    ),
    PruneCase(
        "StatefulSet mode (1.x prunes only DaemonSet NodeSets): kept",
        (record("k1"),),
        ns=KubeNodeSet(**{**_fields(DS), "scaling_mode": "StatefulSet"}),
    ),
    PruneCase("responding (not NOT_RESPONDING): kept", (record("k1", "DOWN", "DYNAMIC_NORM"),)),
    PruneCase("not DOWN: kept", (record("k1", "IDLE", "NOT_RESPONDING", "DYNAMIC_NORM"),)),
    PruneCase(
        "not dynamic (Slurm deletes no other): kept", (record("k1", "DOWN", "NOT_RESPONDING"),)
    ),
    PruneCase("another NodeSet uid (re-created NodeSet): kept", (record("k1", info=OTHER_UID),)),
    PruneCase("no NodeSet uid in the comment: kept", (record("k1", info=NO_UID),)),
    PruneCase("another namespace: kept", (record("k1", info=OTHER_NS),)),
    PruneCase("no Kubernetes node in the PodInfo: kept", (record("k1", info=NO_NODE),)),
    PruneCase("a free-text comment: kept", (sn("k1", *DEFUNCT, comment="rack 4"),)),
    PruneCase("no complete pod listing: kept", (record("k1"),), listed=(PING, NODES_LISTED)),
    PruneCase("no complete node listing: kept", (record("k1"),), listed=(PING, PODS_LISTED)),
    PruneCase("no Slurm listing: kept", (record("k1"),), listed=(PODS_LISTED, NODES_LISTED)),
]


@pytest.mark.parametrize("case", PRUNE_CASES, ids=lambda c: c.name)
def test_pruning_records(case: PruneCase) -> None:
    assert tuple(_pruned(decide(*case.objs, ns=case.ns, listed=case.listed))) == case.pruned


def test_a_record_triggers_its_nodeset_even_when_its_pod_is_gone() -> None:
    p = Projection()
    p.apply(DS, 1)
    assert list(nodeset.SPEC.keys[SlurmNode](record("k1"), p, CTX)) == ["slurm/gpu"]
    assert list(nodeset.SPEC.keys[SlurmNode](sn("x", comment="rack 4"), p, CTX)) == []
    other_cluster = msgspec.structs.replace(record("k1"), source="slurm:c2")
    assert list(nodeset.SPEC.keys[SlurmNode](other_cluster, p, CTX)) == []


def test_replace_owned_keeps_other_features() -> None:
    assert _ident.replace_owned(("b", "k8s/x", "a"), "k8s/", ("k8s/y",)) == ["a", "b", "k8s/y"]


# Slinky slurm-operator internal/controller/nodeset/slurmcontrol/slurmcontrol_test.go
# (Test_realSlurmControl_UpdateNodeFeatures), in our words: the k8s/ members are replaced in
# the available and in the active set separately; a set in sync sends nothing.
@pytest.mark.parametrize(
    ("available", "active", "annotation", "sent"),
    [
        pytest.param(("foo",), ("foo",), "a100", True, id="adds k8s/a100 to both sets"),
        pytest.param(("foo", "k8s/a100"), ("foo", "k8s/a100"), "a100", False, id="in sync"),
        pytest.param(("foo",), ("foo",), "", False, id="nothing owned, nothing wanted"),
        # available already right, active lacks the owned feature: still sent
        pytest.param(("foo", "k8s/a100"), ("foo",), "a100", True, id="active set behind"),
        pytest.param(
            ("foo", "mig=on", "mig=off", "k8s/a100"),
            ("foo", "mig=on", "k8s/a100"),
            "a100",
            False,
            id="plugin-managed inactive feature: in sync",
        ),
    ],
)
def test_owned_features_compare_the_active_set_too(
    available: tuple[str, ...], active: tuple[str, ...], annotation: str, sent: bool
) -> None:
    kube = knode("k1", **({FEATURES: annotation} if annotation else {}))
    node = msgspec.structs.replace(sn(features=available), active_features=active)
    actions = _ident.feature_actions(kube, node, "c1")
    assert bool(actions) == sent
