"""NodeSet cordon sync and Slurm state conditions (reconcilers.nodeset._slurmd through
reconcilers.nodeset), and the v1beta1/v1alpha1 translation — tables, pure."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import pytest

from producers.kube.translate import node_to_event, nodeset_to_event, pod_to_event
from reconcilers import nodeset
from reconcilers.base import Context
from reconcilers.nodeset import _slurmd
from schemas import wellknown
from schemas.actions import (
    AnyAction,
    DrainSlurmNode,
    SetSlurmNodeConditions,
    SlurmStateCondition,
    UndrainSlurmNode,
)
from schemas.events import (
    Event,
    KubeListed,
    KubeNode,
    KubeNodeSet,
    KubePod,
    NodeCondition,
    PodCondition,
    SlurmNode,
    SlurmPing,
)
from slurmbridge.kube.wire import RawNode, RawNodeSet, RawPod
from slurmbridge.runtime.projection import Projection
from tests.unit._pods import kube_pod

CTX = Context(scheduler_name="s", cluster="c1", propagated_node_conditions=("GPUProblem",))
OP = wellknown.OPERATOR_REASON_PREFIX
NS = KubeNodeSet(source="k8s", key="slurm/gpu", uid="ns", namespace="slurm", name="gpu")
LISTED = (
    SlurmPing(source="slurm:c1", key="c1", cluster="c1", responding=True),
    KubeListed(source="k8s", key="nodes"),
)


def knode(
    cordoned: bool = False,
    annotations: dict[str, str] | None = None,
    problems: tuple[NodeCondition, ...] = (),
) -> KubeNode:
    return KubeNode(
        source="k8s",
        key="k1",
        uid="k1",
        unschedulable=cordoned,
        annotations=annotations or {},
        true_conditions=problems,
    )


def pod(cordon: str | None = None, node: str = "k1", **kw: object) -> KubePod:
    return kube_pod(
        "slurm",
        "gpu-0",
        uid="u0",
        phase="Running",
        ready=True,
        node_name=node,
        labels={nodeset.LABEL_NAME: "slurmd", nodeset.LABEL_INSTANCE: "gpu"},
        annotations={wellknown.ANNOTATION_POD_CORDON: cordon} if cordon is not None else {},
        **kw,  # type: ignore[arg-type]
    )


def sn(*state: str, reason: str = "") -> SlurmNode:
    return SlurmNode(
        source="slurm:c1", key="gpu-0", cluster="c1", state=state or ("IDLE",), reason=reason
    )


def decide(*objs: Event) -> tuple[AnyAction, ...]:
    p = Projection()
    for i, o in enumerate((*LISTED, NS, *objs), 1):
        p.apply(o, i)
    return nodeset.decide(nodeset.view(p, NS.key, CTX)).actions


@dataclass(frozen=True)
class Case:
    name: str
    objs: tuple[Event, ...]
    drain: str | None = None
    undrain: bool = False
    extra: list[str] = field(default_factory=list)


DEFAULT = f"{OP}Node (k1) was cordoned, Pod (slurm/gpu-0) must be cordoned"
CASES = [
    Case("cordon drains with the default reason", (knode(True), pod(), sn()), drain=DEFAULT),
    Case(
        "the node's cordon-reason annotation wins, sanitised",
        (
            knode(True, {wellknown.ANNOTATION_NODE_CORDON_REASON: " GPU\tECC\x07 error\n "}),
            pod(),
            sn(),
        ),
        drain=f"{OP}GPU ECC error",
    ),
    Case(
        "an empty cordon-reason annotation gives 'unknown'",
        (knode(True, {wellknown.ANNOTATION_NODE_CORDON_REASON: "\x01"}), pod(), sn()),
        drain=f"{OP}unknown",
    ),
    Case(
        "propagated conditions make the reason, joined by '; '",
        (
            knode(
                True,
                problems=(
                    NodeCondition(type="GPUProblem", status="True", reason="Ecc", message="a"),
                    NodeCondition(type="Other", status="True", reason="No", message="b"),
                ),
            ),
            pod(),
            sn(),
        ),
        drain=f"{OP}(Ecc: a)",
    ),
    Case(
        "pod-cordon=true drains",
        (knode(), pod("true"), sn()),
        drain=f"{OP}Pod (slurm/gpu-0) was cordoned",
    ),
    Case("pod-cordon must be exactly 'true'", (knode(), pod("yes"), sn())),
    Case(
        "already drained with our reason: nothing re-sent",
        (knode(True), pod(), sn("IDLE", "DRAIN", reason=f"{OP}earlier")),
    ),
    Case(
        "uncordon undrains our drain",
        (knode(), pod(), sn("IDLE", "DRAIN", reason=DEFAULT)),
        undrain=True,
    ),
    Case(
        "pod-cordon removed undrains our pod-cordon drain",
        (knode(), pod(), sn("IDLE", "DRAIN", reason=f"{OP}Pod (slurm/gpu-0) was cordoned")),
        undrain=True,
    ),
    Case(
        "an administrator's drain is never undone",
        (knode(), pod(), sn("IDLE", "DRAIN", reason="bad fan")),
    ),
    Case(
        "an administrator's drain is not overwritten on cordon",
        (knode(True), pod(), sn("IDLE", "DRAIN", reason="bad fan")),
    ),
    Case(
        "a slurm-bridge drain is not the operator's",
        (knode(), pod(), sn("IDLE", "DRAIN", reason="slurm-bridge: x")),
    ),
    Case(
        "an unresponsive node is left alone on cordon",
        (knode(True), pod(), sn("DOWN", "NOT_RESPONDING")),
    ),
    Case(
        "an unresponsive node's drain is left alone on uncordon",
        (knode(), pod(), sn("DOWN", "DRAIN", reason="Not responding")),
    ),
    Case(
        "an undrain under way is not repeated",
        (knode(), pod(), sn("IDLE", "DRAIN", "UNDRAIN", reason=DEFAULT)),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_cordon_rules(case: Case) -> None:
    acts = decide(*case.objs)
    drains = [a for a in acts if isinstance(a, DrainSlurmNode)]
    undrains = [a for a in acts if isinstance(a, UndrainSlurmNode)]
    assert [d.reason for d in drains] == ([case.drain] if case.drain else [])
    assert all(d.node == "gpu-0" and d.cluster == "c1" for d in drains)
    assert len(undrains) == (1 if case.undrain else 0)
    assert all(u.owned_prefixes == (OP,) for u in undrains)


def test_the_cordon_rule_waits_for_the_node_listing() -> None:
    """A pod on a node the log does not hold yet is left alone until nodes are listed."""
    p = Projection()
    for i, o in enumerate((LISTED[0], NS, pod(), sn("IDLE", "DRAIN", reason=DEFAULT)), 1):
        p.apply(o, i)
    acts = nodeset.decide(nodeset.view(p, NS.key, CTX)).actions
    assert not [a for a in acts if isinstance(a, UndrainSlurmNode | DrainSlurmNode)]


def test_a_kube_node_change_triggers_its_slurmd_pods_nodesets() -> None:
    p = Projection()
    for i, o in enumerate((NS, pod()), 1):
        p.apply(o, i)
    assert list(nodeset.SPEC.keys[KubeNode](knode(True), p, CTX)) == ["slurm/gpu"]
    assert (
        list(nodeset.SPEC.keys[KubeNode](msgspec.structs.replace(knode(), key="k2"), p, CTX)) == []
    )


def test_sanitize_reason_caps_the_length() -> None:
    assert _slurmd.sanitize_reason("x" * 300 + " ") == "x" * 256
    assert _slurmd.sanitize_reason("a\r\nb\x00c") == "a  bc"


@pytest.mark.parametrize(
    ("state", "reason", "types"),
    [
        (("IDLE",), "", ["Idle"]),
        (("IDLE", "DRAIN"), "maint", ["Idle", "Drain"]),
        (("MIXED", "COMPLETING", "DRAIN"), "x", ["Mixed", "Completing", "Drain"]),
        (
            ("DOWN", "NOT_RESPONDING", "INVALID_REG"),
            "Not responding",
            ["Down", "InvalidReg", "NotResponding"],
        ),
        (
            ("ALLOCATED", "MAINTENANCE", "UNDRAIN", "FAIL"),
            "",
            ["Allocated", "Fail", "Maintenance", "Undrain"],
        ),
        (("FUTURE",), "", ["Future"]),
        (("PLANNED",), "", []),
    ],
)
def test_slurm_states_become_pod_conditions(
    state: tuple[str, ...], reason: str, types: list[str]
) -> None:
    """One base state (the operator's order), one condition per flag, Slurm's reason as
    message (slurmcontrol.go CalculateNodeStatus)."""
    conds = _slurmd.state_conditions(sn(*state, reason=reason))
    assert [c.type for c in conds] == [wellknown.SLURM_NODE_STATE_PREFIX + t for t in types]
    assert all(c.message == reason for c in conds)


def test_conditions_are_written_only_on_change() -> None:
    node = sn("IDLE", "DRAIN", reason="maint")
    (act,) = [a for a in decide(knode(), pod(), node) if isinstance(a, SetSlurmNodeConditions)]
    assert act.conditions == (
        SlurmStateCondition(type="SlurmNodeStateIdle", message="maint"),
        SlurmStateCondition(type="SlurmNodeStateDrain", message="maint"),
    )
    shown = pod(
        conditions=(
            PodCondition(type="PodScheduled", status="True"),
            PodCondition(type="SlurmNodeStateDrain", status="True", message="maint"),
            PodCondition(type="SlurmNodeStateIdle", status="True", message="maint"),
        )
    )
    assert not [a for a in decide(knode(), shown, node) if isinstance(a, SetSlurmNodeConditions)]
    # A stale condition (the node is no longer drained) is removed.
    (fix,) = [a for a in decide(knode(), shown, sn()) if isinstance(a, SetSlurmNodeConditions)]
    assert [c.type for c in fix.conditions] == ["SlurmNodeStateIdle"]


def test_a_pod_without_a_slurm_node_loses_its_conditions_only_in_a_full_listing() -> None:
    shown = pod(conditions=(PodCondition(type="SlurmNodeStateIdle", status="True"),))
    assert _slurmd.condition_actions(shown, None, slurm_listed=False) == []
    (act,) = _slurmd.condition_actions(shown, None, slurm_listed=True)
    assert isinstance(act, SetSlurmNodeConditions) and act.conditions == ()


def test_an_unknown_scaling_mode_is_left_alone() -> None:
    p = Projection()
    odd = msgspec.structs.replace(NS, scaling_mode="ReplicaSet", replicas=3)
    for i, o in enumerate((*LISTED, odd), 1):
        p.apply(o, i)
    d = nodeset.decide(nodeset.view(p, NS.key, CTX))
    assert d.actions == () and "ReplicaSet" in d.reason


# --- translation -----------------------------------------------------------------------------


def _raw_nodeset(obj: dict[str, object]) -> RawNodeSet:
    return msgspec.json.decode(msgspec.json.encode(obj), type=RawNodeSet)


def test_v1beta1_nodeset_translates_with_1x_fields() -> None:
    raw = _raw_nodeset(
        {
            "apiVersion": "slinky.slurm.net/v1beta1",
            "kind": "NodeSet",
            "metadata": {"name": "radar", "namespace": "slurm", "uid": "u", "generation": 3},
            "spec": {
                "controllerRef": {"name": "slurm"},
                "replicas": 2,
                "scalingMode": "StatefulSet",
                "partition": {"enabled": True, "config": "MaxTime=UNLIMITED"},
                "extraConf": "Features=radar",
                "pinToNode": True,
                "workloadDisruptionProtection": False,
                "pruneSlurmNodeRecords": "NodeNotFound",
                "updateStrategy": {"type": "OnDelete"},
                "minReadySeconds": 7,
                "ordinalPadding": 3,
            },
        }
    )
    ev = nodeset_to_event(raw, producer="p", observed_at=1)
    assert (ev.cluster_name, ev.replicas, ev.ordinal_padding) == ("slurm", 2, 3)
    assert (ev.partition_enabled, ev.partition_config, ev.extra_conf) == (
        True,
        "MaxTime=UNLIMITED",
        "Features=radar",
    )
    assert (ev.pin_to_node, ev.workload_disruption_protection) == (True, False)
    assert (ev.prune_slurm_node_records, ev.update_strategy, ev.min_ready_seconds) == (
        "NodeNotFound",
        "OnDelete",
        7,
    )
    assert ev.api_version == "slinky.slurm.net/v1beta1"


def test_v1alpha1_nodeset_translates_with_defaults() -> None:
    """A NodeSet written at v1alpha1 (read at v1beta1 storage, conversion None): its
    clusterName is the cluster, the 1.x fields keep their CRD defaults."""
    raw = _raw_nodeset(
        {
            "apiVersion": "slinky.slurm.net/v1beta1",
            "metadata": {"name": "gpu", "namespace": "slurm"},
            "spec": {"clusterName": "other", "serviceName": "svc", "template": {}},
        }
    )
    ev = nodeset_to_event(raw, producer="p", observed_at=1)
    assert (ev.cluster_name, ev.service_name, ev.replicas) == ("other", "svc", 1)
    assert (ev.scaling_mode, ev.workload_disruption_protection, ev.update_strategy) == (
        "StatefulSet",
        True,
        "RollingUpdate",
    )
    both = _raw_nodeset({"spec": {"controllerRef": {"name": "a"}, "clusterName": "b"}})
    assert nodeset_to_event(both, producer="p", observed_at=1).cluster_name == "a"


def test_node_and_pod_translation_keep_what_the_rules_read() -> None:
    node = msgspec.convert(
        {
            "metadata": {"name": "k1"},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "GPUProblem", "status": "True", "reason": "Ecc", "message": "m"},
                    {"type": "SlinkySlurmGRESCompatible", "status": "True", "reason": "r"},
                    {"type": "SlurmNodeRegistered", "status": "True", "reason": "r"},
                ]
            },
        },
        RawNode,
    )
    ev = node_to_event(node, producer="p", observed_at=1)
    assert [c.type for c in ev.true_conditions] == ["GPUProblem"]
    # The conditions slurmbridge sets, Slinky's GRES name included: node_register compares
    # with them, and one it cannot see it writes again at every decide.
    assert [c.type for c in ev.conditions] == ["SlinkySlurmGRESCompatible", "SlurmNodeRegistered"]
    raw_pod = msgspec.convert(
        {
            "metadata": {"name": "gpu-0", "namespace": "slurm"},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "SlurmNodeStateDrain", "status": "True", "message": "x"},
                ]
            },
        },
        RawPod,
    )
    pev = pod_to_event(raw_pod, producer="p", observed_at=1)
    assert [(c.type, c.message) for c in pev.conditions] == [("SlurmNodeStateDrain", "x")]
