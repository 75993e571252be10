"""Table-driven tests of node_taint and slurm_drain ``decide()`` (and their views/keys)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from reconcilers import node_taint, slurm_drain
from reconcilers.base import Context
from schemas import wellknown
from schemas.actions import DrainSlurmNode, RecordEvent, TaintNode, UndrainSlurmNode, UntaintNode
from schemas.events import Event, KubeNode, SlurmJob, SlurmNode, Taint
from tests.unit._decisions import store

CTX = Context(scheduler_name="slurm-bridge-scheduler", cluster="c1")
SRC = "slurm:c1"
OURS = Taint(key=wellknown.TAINT_MANAGED_NODE, value="slurm-bridge-scheduler", effect="NoExecute")
CORDON = wellknown.cordon_drain_reason


def kn(
    name: str,
    *,
    unschedulable: bool = False,
    taints: tuple[Taint, ...] = (),
    labels: dict[str, str] | None = None,
) -> KubeNode:
    return KubeNode(
        source="k8s",
        key=name,
        uid=f"uid-{name}",
        unschedulable=unschedulable,
        taints=taints,
        labels=labels or {},
    )


def sn(name: str, *state: str, reason: str = "", cluster: str = "c1") -> SlurmNode:
    return SlurmNode(
        source=f"slurm:{cluster}",
        key=name,
        cluster=cluster,
        state=state or ("IDLE",),
        reason=reason,
    )


def kinds(actions: tuple[object, ...]) -> list[str]:
    return [type(a).__name__ for a in actions]


@dataclass(frozen=True)
class Case:
    name: str
    objs: tuple[Event, ...]
    key: str
    want: list[str]


TAINT_CASES = [
    Case("managed, untainted ⇒ taint", (kn("n1"), sn("n1")), "n1", ["TaintNode", "RecordEvent"]),
    Case("managed, tainted ⇒ nothing", (kn("n1", taints=(OURS,)), sn("n1")), "n1", []),
    Case(
        "managed, wrong value ⇒ retaint",
        (kn("n1", taints=(Taint(key=OURS.key, value="other", effect="NoExecute"),)), sn("n1")),
        "n1",
        ["TaintNode", "RecordEvent"],
    ),
    Case(
        "managed, duplicate taints ⇒ taint rewrites to one",
        (kn("n1", taints=(OURS, OURS)), sn("n1")),
        "n1",
        ["TaintNode", "RecordEvent"],
    ),
    Case(
        "same key other effect is not ours",
        (kn("n1", taints=(Taint(key=OURS.key, value="x", effect="NoSchedule"),)),),
        "n1",
        [],
    ),
    Case(
        "unmanaged, tainted ⇒ untaint",
        (kn("n1", taints=(OURS,)),),
        "n1",
        ["UntaintNode", "RecordEvent"],
    ),
    Case("unmanaged, untainted ⇒ nothing", (kn("n1"),), "n1", []),
    Case(
        "other taints kept, no action",
        (kn("n1", taints=(Taint(key="x", effect="NoSchedule"),)),),
        "n1",
        [],
    ),
    Case(
        "label maps to slurm name",
        (kn("k8s-a", labels={wellknown.LABEL_SLURM_NODENAME: "s1"}), sn("s1")),
        "k8s-a",
        ["TaintNode", "RecordEvent"],
    ),
    Case(
        "label points at missing slurm node ⇒ unmanaged even if same name exists",
        (kn("n1", labels={wellknown.LABEL_SLURM_NODENAME: "zz"}, taints=(OURS,)), sn("n1")),
        "n1",
        ["UntaintNode", "RecordEvent"],
    ),
    Case(
        "slurm node of another cluster does not count", (kn("n1"), sn("n1", cluster="c2")), "n1", []
    ),
    Case(
        "slurm node tombstoned ⇒ untaint",
        (
            kn("n1", taints=(OURS,)),
            sn("n1"),
            SlurmNode(source=SRC, key="n1", cluster="c1", op="deleted"),
        ),
        "n1",
        ["UntaintNode", "RecordEvent"],
    ),
    Case("kube node gone ⇒ nothing", (sn("n1"),), "n1", []),
    Case(
        "kube node tombstoned ⇒ nothing",
        (kn("n1"), KubeNode(source="k8s", key="n1", op="deleted"), sn("n1")),
        "n1",
        [],
    ),
]


@pytest.mark.parametrize("case", TAINT_CASES, ids=lambda c: c.name)
def test_node_taint(case: Case) -> None:
    decision = node_taint.decide(node_taint.view(store(*case.objs), case.key, CTX))
    assert kinds(decision.actions) == case.want
    for a in decision.actions:
        if isinstance(a, TaintNode):
            assert (a.node, a.key, a.value, a.effect) == (
                case.key,
                wellknown.TAINT_MANAGED_NODE,
                "slurm-bridge-scheduler",
                "NoExecute",
            )
        if isinstance(a, UntaintNode):
            assert (a.node, a.key, a.effect) == (
                case.key,
                wellknown.TAINT_MANAGED_NODE,
                "NoExecute",
            )


DRAIN_CASES = [
    Case(
        "cordoned, idle ⇒ drain",
        (kn("n1", unschedulable=True), sn("n1")),
        "n1",
        ["DrainSlurmNode", "RecordEvent"],
    ),
    Case(
        "cordoned, allocated ⇒ drain",
        (kn("n1", unschedulable=True), sn("n1", "ALLOCATED")),
        "n1",
        ["DrainSlurmNode", "RecordEvent"],
    ),
    Case(
        "cordoned, already our drain ⇒ nothing",
        (kn("n1", unschedulable=True), sn("n1", "IDLE", "DRAIN", reason=CORDON("n1"))),
        "n1",
        [],
    ),
    Case(
        "cordoned, admin drain ⇒ nothing (left alone)",
        (kn("n1", unschedulable=True), sn("n1", "IDLE", "DRAIN", reason="bad dimm")),
        "n1",
        [],
    ),
    Case(
        "cordoned, draining ⇒ nothing",
        (kn("n1", unschedulable=True), sn("n1", "ALLOCATED", "DRAIN", reason=CORDON("n1"))),
        "n1",
        [],
    ),
    Case(
        "uncordoned, our drain ⇒ undrain",
        (kn("n1"), sn("n1", "IDLE", "DRAIN", reason=CORDON("n1"))),
        "n1",
        ["UndrainSlurmNode", "RecordEvent"],
    ),
    Case(
        "uncordoned, empty reason ⇒ undrain",
        (kn("n1"), sn("n1", "IDLE", "DRAIN")),
        "n1",
        ["UndrainSlurmNode", "RecordEvent"],
    ),
    Case(
        "uncordoned, admin drain ⇒ never undone",
        (kn("n1"), sn("n1", "IDLE", "DRAIN", reason="maintenance by admin")),
        "n1",
        [],
    ),
    Case(
        "uncordoned, operator scale-in drain ⇒ not ours to undo",
        (kn("n1"), sn("n1", "IDLE", "DRAIN", reason=wellknown.scale_in_drain_reason("ns", "p"))),
        "n1",
        [],
    ),
    Case(
        "uncordoned, other bridge drain (external node removal) ⇒ left",
        (kn("n1"), sn("n1", "IDLE", "DRAIN", reason="slurm-bridge: external node removed")),
        "n1",
        [],
    ),
    Case("uncordoned, not drained ⇒ nothing", (kn("n1"), sn("n1")), "n1", []),
    Case("uncordoned, down not drained ⇒ nothing", (kn("n1"), sn("n1", "DOWN")), "n1", []),
    Case("no slurm node ⇒ nothing", (kn("n1", unschedulable=True),), "n1", []),
    Case("no kube node ⇒ nothing", (sn("n1", "IDLE", "DRAIN", reason=CORDON("n1")),), "n1", []),
    Case(
        "label mapping drains the slurm name",
        (kn("k1", unschedulable=True, labels={wellknown.LABEL_SLURM_NODENAME: "s9"}), sn("s9")),
        "k1",
        ["DrainSlurmNode", "RecordEvent"],
    ),
]


@pytest.mark.parametrize("case", DRAIN_CASES, ids=lambda c: c.name)
def test_slurm_drain(case: Case) -> None:
    decision = slurm_drain.decide(slurm_drain.view(store(*case.objs), case.key, CTX))
    assert kinds(decision.actions) == case.want
    for a in decision.actions:
        if isinstance(a, DrainSlurmNode):
            assert a.cluster == "c1"
            assert (
                a.reason
                == f"slurm-bridge: Corresponding Kubernetes node ({case.key}) is unschedulable"
            )
        if isinstance(a, UndrainSlurmNode):
            assert a.owned_prefixes == (slurm_drain.CORDON_REASON_PREFIX,)
        if isinstance(a, RecordEvent):
            assert a.object_kind == "Node"
            assert a.name == case.key


def test_drain_reason_is_slinkys_text() -> None:
    assert (
        CORDON("node-7") == "slurm-bridge: Corresponding Kubernetes node (node-7) is unschedulable"
    )


def test_keys_of_maps_slurm_nodes_to_kube_nodes() -> None:
    p = store(kn("a", labels={wellknown.LABEL_SLURM_NODENAME: "s1"}), kn("s1"), kn("b"))
    # "s1" the Kubernetes node points nowhere else, so both map to Slurm node s1.
    assert sorted(node_taint.SPEC.keys_of(sn("s1"), p, CTX)) == ["a", "s1"]
    assert list(node_taint.SPEC.keys_of(sn("b"), p, CTX)) == ["b"]
    assert list(node_taint.SPEC.keys_of(sn("zz"), p, CTX)) == []
    assert list(node_taint.SPEC.keys_of(sn("b", cluster="other"), p, CTX)) == []
    assert list(node_taint.SPEC.keys_of(kn("q"), p, CTX)) == ["q"]


def test_label_index_follows_changes() -> None:
    p = store(kn("a", labels={wellknown.LABEL_SLURM_NODENAME: "s1"}))
    assert [n.key for n in p.by_label(KubeNode, wellknown.LABEL_SLURM_NODENAME, "s1")] == ["a"]
    p.apply(kn("a", labels={wellknown.LABEL_SLURM_NODENAME: "s2"}), 10)
    assert list(p.by_label(KubeNode, wellknown.LABEL_SLURM_NODENAME, "s1")) == []
    assert [n.key for n in p.by_label(KubeNode, wellknown.LABEL_SLURM_NODENAME, "s2")] == ["a"]
    p.apply(KubeNode(source="k8s", key="a", op="deleted"), 11)
    assert list(p.by_label(KubeNode, wellknown.LABEL_SLURM_NODENAME, "s2")) == []


def test_field_index_follows_changes() -> None:
    def job(key: str, partition: str, source: str = "slurm:c") -> SlurmJob:
        return SlurmJob(source=source, key=key, job_id=int(key), partition=partition)

    p = store(job("1", "gpu"), job("2", "cpu"), job("3", "gpu", source="slurm:d"))
    assert sorted(j.key for j in p.by_field(SlurmJob, "partition", "gpu")) == ["1", "3"]
    p.apply(job("1", "cpu"), 10)  # moved (scontrol update partition=…)
    assert [j.key for j in p.by_field(SlurmJob, "partition", "gpu")] == ["3"]
    assert sorted(j.key for j in p.by_field(SlurmJob, "partition", "cpu")) == ["1", "2"]
    p.apply(SlurmJob(source="slurm:c", key="2", op="deleted"), 11)
    assert [j.key for j in p.by_field(SlurmJob, "partition", "cpu")] == ["1"]
    p.apply(job("4", "cpu"), 12)  # added after the index was built
    assert sorted(j.key for j in p.by_field(SlurmJob, "partition", "cpu")) == ["1", "4"]
    assert list(p.by_field(SlurmJob, "no_such_field", "x")) == []


@pytest.mark.parametrize("case", TAINT_CASES + DRAIN_CASES, ids=lambda c: c.name)
def test_decisions_converge(case: Case) -> None:
    """Applying a decision's intended state and deciding again yields no action."""
    p = store(*case.objs)
    for spec in (node_taint, slurm_drain):
        decision = spec.decide(spec.view(p, case.key, CTX))
        seq = 100
        for a in decision.actions:
            seq += 1
            node = p.get(KubeNode, case.key)
            assert node is not None
            if isinstance(a, TaintNode):
                keep = tuple(t for t in node.taints if t.key != a.key)
                p.apply(
                    KubeNode(
                        source="k8s",
                        key=node.key,
                        uid=node.uid,
                        labels=node.labels,
                        unschedulable=node.unschedulable,
                        taints=(*keep, Taint(key=a.key, value=a.value, effect=a.effect)),
                    ),
                    seq,
                )
            elif isinstance(a, UntaintNode):
                keep = tuple(
                    t for t in node.taints if not (t.key == a.key and t.effect == a.effect)
                )
                p.apply(
                    KubeNode(
                        source="k8s",
                        key=node.key,
                        uid=node.uid,
                        labels=node.labels,
                        unschedulable=node.unschedulable,
                        taints=keep,
                    ),
                    seq,
                )
            elif isinstance(a, DrainSlurmNode):
                p.apply(sn(a.node, "IDLE", "DRAIN", reason=a.reason), seq)
            elif isinstance(a, UndrainSlurmNode):
                p.apply(sn(a.node, "IDLE"), seq)
        again = spec.decide(spec.view(p, case.key, CTX))
        assert again.actions == (), f"{spec.NAME} not idempotent: {again}"
