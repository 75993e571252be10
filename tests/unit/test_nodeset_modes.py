"""NodeSet scalingMode DaemonSet, pinToNode and extraConf (reconcilers.nodeset rules 12-14,
reconcilers.nodeset._daemon; slurmbridge.kube.nodeset_pod conf_arg / _pin_affinity)."""

from __future__ import annotations

import msgspec
import pytest

from producers.kube.translate import nodeset_to_event
from reconcilers import nodeset
from reconcilers.base import Context
from reconcilers.nodeset import _daemon
from schemas import wellknown
from schemas.actions import (
    CreateNodeSetPod,
    DeleteFailedNodeSetPod,
    DeleteNodeSetPod,
    DrainSlurmNode,
    SetNodeSetStatus,
)
from schemas.events import (
    KubeListed,
    KubeNode,
    KubeNodeSet,
    KubePod,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeSetStatus,
    SlurmNode,
    SlurmPing,
    Taint,
    Toleration,
)
from slurmbridge.devtools.sim.slurmd import node_affinity_matches
from slurmbridge.kube.nodeset_pod import _pin_affinity, conf_arg, parse_extra_conf
from slurmbridge.kube.wire import RawNodeSet
from slurmbridge.runtime.projection import Projection
from tests.unit._pods import kube_nodeset, kube_pod

CTX = Context(scheduler_name="s", cluster="c1")
LISTED = (
    SlurmPing(source="slurm:c1", key="c1", cluster="c1", responding=True),
    KubeListed(source="k8s", key="nodes"),
)
DS = kube_nodeset(
    "slurm", "gpu", uid="ns", scaling_mode="DaemonSet", replicas=1, node_selector={"slurm": "yes"}
)


def knode(name: str, labels: dict[str, str] | None = None, **kw: object) -> KubeNode:
    return KubeNode(source="k8s", key=name, uid=name, labels=labels or {}, **kw)  # type: ignore[arg-type]


def dpod(name: str, node: str, hostname: str | None = None, **kw: object) -> KubePod:
    """A DaemonSet pod pinned to ``node`` by node affinity (bound too unless node_name="")."""
    term = NodeSelectorTerm(
        match_fields=(NodeSelectorRequirement(key="metadata.name", operator="In", values=(node,)),)
    )
    return KubePod(
        **{  # type: ignore[arg-type]
            "source": "k8s",
            "key": f"slurm/{name}",
            "uid": name,
            "namespace": "slurm",
            "name": name,
            "phase": "Running",
            "ready": True,
            "node_name": node,
            "node_affinity": (term,),
            "labels": {
                nodeset.LABEL_NAME: "slurmd",
                nodeset.LABEL_INSTANCE: "gpu",
                wellknown.LABEL_SCALING_MODE: "DaemonSet",
                wellknown.LABEL_POD_HOSTNAME: hostname or node.split(".")[0],
            },
            **kw,
        }
    )


def sn(name: str, *state: str, reason: str = "") -> SlurmNode:
    return SlurmNode(
        source="slurm:c1", key=name, cluster="c1", state=state or ("IDLE",), reason=reason
    )


def decide(*objs: object, ns: KubeNodeSet = DS, listed: bool = True):  # type: ignore[no-untyped-def]
    p = Projection()
    for i, o in enumerate((*(LISTED if listed else LISTED[:1]), ns, *objs), 1):
        p.apply(o, i)  # type: ignore[arg-type]
    return nodeset.decide(nodeset.view(p, ns.key, CTX))


# --- eligibility (utils.go PodShouldRunOnNode) ----------------------------------------------


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (knode("a", {"slurm": "yes"}), (True, True)),
        (knode("a", {"slurm": "no"}), (False, False)),
        (knode("a"), (False, False)),
        # A taint the template does not tolerate: no new pod; NoSchedule keeps the old one.
        (
            knode("a", {"slurm": "yes"}, taints=(Taint(key="gpu", effect="NoSchedule"),)),
            (False, True),
        ),
        (
            knode("a", {"slurm": "yes"}, taints=(Taint(key="gpu", effect="NoExecute"),)),
            (False, False),
        ),
        (
            knode("a", {"slurm": "yes"}, taints=(Taint(key="x", effect="PreferNoSchedule"),)),
            (True, True),
        ),
        # No taint is ignored, the cordon's either (1.x adds no DaemonSet tolerations).
        (
            knode(
                "a",
                {"slurm": "yes"},
                taints=(Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule"),),
            ),
            (False, True),
        ),
    ],
)
def test_should_run(node: KubeNode, expected: tuple[bool, bool]) -> None:
    assert _daemon.should_run(DS, node) == expected


def test_tolerations_and_required_affinity_of_the_template() -> None:
    tainted = knode(
        "a", {"slurm": "yes", "zone": "z1"}, taints=(Taint(key="gpu", effect="NoSchedule"),)
    )
    ns = msgspec.structs.replace(DS, toleration_specs=(Toleration(key="gpu", operator="Exists"),))
    assert _daemon.should_run(ns, tainted) == (True, True)
    term = NodeSelectorTerm(
        match_expressions=(NodeSelectorRequirement(key="zone", operator="In", values=("z2",)),)
    )
    assert _daemon.should_run(msgspec.structs.replace(ns, node_affinity=(term,)), tainted) == (
        False,
        False,
    )


def test_names_hostnames_and_target_nodes() -> None:
    assert _daemon.hostname(knode("n1.example.org")) == "n1"
    over = knode("n1", annotations={wellknown.ANNOTATION_NODE_HOSTNAME_OVERRIDE: "slurm-n1"})
    assert _daemon.hostname(over) == "slurm-n1"
    p = dpod("gpu-x7k2p", "n1.example.org", node_name="")
    assert _daemon.target_node(p) == "n1.example.org"
    assert _daemon.slurm_name(p) == "n1"
    # A StatefulSet pod (no mode label) is its own Slurm node.
    plain = msgspec.structs.replace(p, labels={nodeset.LABEL_NAME: "slurmd"})
    assert _daemon.slurm_name(plain) == "gpu-x7k2p"


# --- DaemonSet mode decisions -----------------------------------------------------------------


def test_one_pod_per_eligible_node_and_replicas_ignored() -> None:
    d = decide(knode("a", {"slurm": "yes"}), knode("b", {"slurm": "yes"}), knode("c"))
    creates = [a for a in d.actions if isinstance(a, CreateNodeSetPod)]
    assert [(c.node, c.hostname, c.pod_name) for c in creates] == [("a", "a", ""), ("b", "b", "")]
    (status,) = [a for a in d.actions if isinstance(a, SetNodeSetStatus)]
    assert status.status.desired == 2


def test_a_node_with_its_pod_gets_no_second_one() -> None:
    d = decide(knode("a", {"slurm": "yes"}), dpod("gpu-abcde", "a"), sn("a"))
    assert not [a for a in d.actions if isinstance(a, CreateNodeSetPod)]
    (status,) = [a for a in d.actions if isinstance(a, SetNodeSetStatus)]
    assert (status.status.replicas, status.status.desired) == (1, 1)


def test_no_creation_without_the_node_listing() -> None:
    d = decide(knode("a", {"slurm": "yes"}), listed=False)
    assert not [a for a in d.actions if isinstance(a, CreateNodeSetPod)]
    assert "node listing" in d.reason


def test_label_removed_drains_the_idle_node_then_deletes() -> None:
    d = decide(knode("a"), dpod("gpu-abcde", "a"), sn("a"))
    (drain,) = [a for a in d.actions if isinstance(a, DrainSlurmNode)]
    (delete,) = [a for a in d.actions if isinstance(a, DeleteNodeSetPod)]
    # The Slurm node is the hostname, not the pod name.
    assert drain.node == "a" and delete.slurm_node == "a" and delete.pod.name == "gpu-abcde"
    assert "gpu-abcde" in drain.reason


def test_label_removed_with_a_busy_node_drains_and_waits() -> None:
    d = decide(knode("a"), dpod("gpu-abcde", "a"), sn("a", "ALLOCATED"))
    assert [a for a in d.actions if isinstance(a, DrainSlurmNode)]
    assert not [a for a in d.actions if isinstance(a, DeleteNodeSetPod)]
    assert d.requeue_after is not None
    # Drained but still running a job: still no delete.
    d = decide(knode("a"), dpod("gpu-abcde", "a"), sn("a", "MIXED", "DRAIN"))
    assert not [a for a in d.actions if isinstance(a, (DeleteNodeSetPod, DrainSlurmNode))]
    # Drained and idle: deleted.
    d = decide(knode("a"), dpod("gpu-abcde", "a"), sn("a", "IDLE", "DRAIN"))
    assert [a for a in d.actions if isinstance(a, DeleteNodeSetPod)]


def test_a_noschedule_taint_keeps_the_running_pod() -> None:
    tainted = knode("a", {"slurm": "yes"}, taints=(Taint(key="gpu", effect="NoSchedule"),))
    d = decide(tainted, dpod("gpu-abcde", "a"), sn("a"))
    assert not [a for a in d.actions if isinstance(a, (DeleteNodeSetPod, DrainSlurmNode))]


def test_pods_of_the_other_mode_are_condemned() -> None:
    old = kube_pod(
        "slurm",
        "gpu-0",
        uid="u0",
        phase="Running",
        node_name="a",
        labels={nodeset.LABEL_NAME: "slurmd", nodeset.LABEL_INSTANCE: "gpu"},
    )
    d = decide(knode("a", {"slurm": "yes"}), old, sn("gpu-0"))
    (delete,) = [a for a in d.actions if isinstance(a, DeleteNodeSetPod)]
    assert delete.pod.name == "gpu-0" and delete.slurm_node == "gpu-0"
    # ... and back: a DaemonSet pod in StatefulSet mode.
    ss = msgspec.structs.replace(DS, scaling_mode="StatefulSet", replicas=0)
    d = decide(knode("a", {"slurm": "yes"}), dpod("gpu-abcde", "a"), sn("a"), ns=ss)
    (delete,) = [a for a in d.actions if isinstance(a, DeleteNodeSetPod)]
    assert delete.pod.name == "gpu-abcde"


def decide_at(now: float, *objs: object, ns: KubeNodeSet = DS):  # type: ignore[no-untyped-def]
    p = Projection()
    for i, o in enumerate((*LISTED, ns, *objs), 1):
        p.apply(o, i)  # type: ignore[arg-type]
    return nodeset.decide(
        nodeset.view(p, ns.key, Context(scheduler_name="s", cluster="c1", now=now))
    )


def with_failures(**entries: tuple[int, int, str]) -> KubeNodeSet:
    return msgspec.structs.replace(
        DS,
        annotations={
            wellknown.ANNOTATION_NODESET_POD_FAILURES: msgspec.json.encode(entries).decode()
        },
    )


def test_a_failed_daemon_pod_is_deleted_and_its_node_waits_out_the_backoff() -> None:
    """Rule 12 with rule 5 (1.x podsShouldBeOnNode, failedPodsBackoffKey): the failure is
    the node's, and the node gets its next pod only once the failed one is gone and the
    back-off has run."""
    a = knode("a", {"slurm": "yes"})
    failed = dpod("gpu-abcde", "a", phase="Failed", ready=False)
    d = decide_at(1000.0, a, failed)
    (dead,) = [x for x in d.actions if isinstance(x, DeleteFailedNodeSetPod)]
    assert (dead.pod.name, dead.key, dead.failures, dead.at) == ("gpu-abcde", "node/a", 1, 1000)
    assert not [x for x in d.actions if isinstance(x, CreateNodeSetPod)], "failed pod still there"
    # Redelivered once the failure is recorded: counted once, not twice.
    recorded = with_failures(**{"node/a": (1, 1000, "gpu-abcde")})
    (dead,) = [
        x
        for x in decide_at(1003.0, a, failed, ns=recorded).actions
        if isinstance(x, DeleteFailedNodeSetPod)
    ]
    assert (dead.failures, dead.key) == (1, "node/a")
    # Deleting: still no second pod on the node.
    going = msgspec.structs.replace(failed, deletion_timestamp=1004)
    d = decide_at(1004.0, a, going, ns=recorded)
    assert not [x for x in d.actions if isinstance(x, CreateNodeSetPod)]
    # Gone, back-off running: none yet, and a look again when it ends.
    d = decide_at(1005.0, a, ns=recorded)
    assert not [x for x in d.actions if isinstance(x, CreateNodeSetPod)]
    assert d.requeue_after == pytest.approx(5.0)
    assert "back-off" in d.reason
    # Back-off over: the node gets its pod.
    (create,) = [
        x for x in decide_at(1010.0, a, ns=recorded).actions if isinstance(x, CreateNodeSetPod)
    ]
    assert create.node == "a"
    # Another node is not held by a's back-off.
    b = knode("b", {"slurm": "yes"})
    creates = [
        x for x in decide_at(1005.0, a, b, ns=recorded).actions if isinstance(x, CreateNodeSetPod)
    ]
    assert [c.node for c in creates] == ["b"]


def test_a_second_failure_on_the_node_doubles_its_backoff() -> None:
    a = knode("a", {"slurm": "yes"})
    again = dpod("gpu-fghij", "a", phase="Failed", ready=False)
    recorded = with_failures(**{"node/a": (1, 1000, "gpu-abcde")})
    (dead,) = [
        x
        for x in decide_at(1100.0, a, again, ns=recorded).actions
        if isinstance(x, DeleteFailedNodeSetPod)
    ]
    assert (dead.failures, dead.at) == (2, 1100)
    twice = with_failures(**{"node/a": (2, 1100, "gpu-fghij")})
    assert not [
        x for x in decide_at(1119.0, a, ns=twice).actions if isinstance(x, CreateNodeSetPod)
    ]
    assert [x for x in decide_at(1120.0, a, ns=twice).actions if isinstance(x, CreateNodeSetPod)]


def test_the_soonest_backoff_sets_the_requeue() -> None:
    """A node's back-off ending in 5 s is looked at in 5 s, whatever an ordinal's older
    back-off from StatefulSet mode (ending in 15 s) says."""
    mixed = with_failures(**{"node/a": (1, 1000, "p1"), "gpu-0": (2, 1000, "p0")})
    d = decide_at(1005.0, knode("a", {"slurm": "yes"}), ns=mixed)
    assert d.requeue_after == pytest.approx(5.0)


def test_a_terminating_daemon_pod_gets_no_successor_until_it_is_gone() -> None:
    a = knode("a", {"slurm": "yes"})
    going = dpod("gpu-abcde", "a", deletion_timestamp=999)
    assert not [x for x in decide_at(1000.0, a, going).actions if isinstance(x, CreateNodeSetPod)]


def test_a_hostname_override_change_replaces_the_pod_after_draining_its_old_node() -> None:
    """1.x podsShouldBeOnNode "hostname mismatch": the pod named for the old hostname is
    condemned (its Slurm node is the old name: the drain never touches the new one), and the
    node's new pod comes once it is gone."""
    renamed = knode(
        "a", {"slurm": "yes"}, annotations={wellknown.ANNOTATION_NODE_HOSTNAME_OVERRIDE: "big-a"}
    )
    busy = decide_at(1000.0, renamed, dpod("gpu-abcde", "a"), sn("a", "ALLOCATED"))
    (drain,) = [x for x in busy.actions if isinstance(x, DrainSlurmNode)]
    assert drain.node == "a" and "gpu-abcde" in drain.reason
    assert not [x for x in busy.actions if isinstance(x, (DeleteNodeSetPod, CreateNodeSetPod))]
    idle = decide_at(1001.0, renamed, dpod("gpu-abcde", "a"), sn("a", "IDLE", "DRAIN"))
    (delete,) = [x for x in idle.actions if isinstance(x, DeleteNodeSetPod)]
    assert delete.slurm_node == "a"
    assert not [x for x in idle.actions if isinstance(x, CreateNodeSetPod)]
    (create,) = [x for x in decide_at(1002.0, renamed).actions if isinstance(x, CreateNodeSetPod)]
    assert (create.node, create.hostname) == ("a", "big-a")
    # The pod already named for the override is kept.
    kept = decide_at(1003.0, renamed, dpod("gpu-klmno", "a", hostname="big-a"), sn("big-a"))
    assert not [x for x in kept.actions if isinstance(x, (DrainSlurmNode, DeleteNodeSetPod))]


def test_a_kube_node_change_triggers_daemonset_nodesets() -> None:
    p = Projection()
    other = msgspec.structs.replace(DS, key="slurm/cpu", name="cpu", scaling_mode="StatefulSet")
    for i, o in enumerate((DS, other), 1):
        p.apply(o, i)
    keys = nodeset.SPEC.keys[KubeNode](knode("new", {"slurm": "yes"}), p, CTX)
    assert list(keys) == ["slurm/gpu"]


def test_a_slurm_node_triggers_its_daemonset_pods_nodeset() -> None:
    p = Projection()
    for i, o in enumerate((DS, dpod("gpu-abcde", "n1.example.org")), 1):
        p.apply(o, i)
    assert list(nodeset.SPEC.keys[SlurmNode](sn("n1"), p, CTX)) == ["slurm/gpu"]


# --- pinToNode ---------------------------------------------------------------------------------


PIN = kube_nodeset("slurm", "gpu", uid="ns", replicas=2, pin_to_node=True)


def spod(name: str, node: str, phase: str = "Running") -> KubePod:
    return kube_pod(
        "slurm",
        name,
        uid=name,
        phase=phase,
        ready=True,
        node_name=node,
        labels={nodeset.LABEL_NAME: "slurmd", nodeset.LABEL_INSTANCE: "gpu"},
    )


def test_a_running_pod_pins_its_ordinal() -> None:
    d = decide(knode("a"), knode("b"), spod("gpu-0", "a"), spod("gpu-1", "b"), sn("gpu-0"), ns=PIN)
    (status,) = [a for a in d.actions if isinstance(a, SetNodeSetStatus)]
    assert status.status.ordinal_to_node == {"0": "a", "1": "b"}


def test_the_replacement_of_a_pinned_ordinal_is_pinned() -> None:
    ns = msgspec.structs.replace(PIN, status=NodeSetStatus(ordinal_to_node={"0": "a", "1": "b"}))
    d = decide(knode("a"), knode("b"), spod("gpu-1", "b"), ns=ns)
    (create,) = [a for a in d.actions if isinstance(a, CreateNodeSetPod)]
    assert (create.pod_name, create.node, create.hostname) == ("gpu-0", "a", "")


@pytest.mark.parametrize(
    ("nodes", "listed", "expected"),
    [
        # The node is gone (complete listing): the pin goes.
        ((knode("b"),), True, {"1": "b"}),
        # Not listed yet: the pin stays.
        ((knode("b"),), False, {"0": "a", "1": "b"}),
        # The template no longer matches the node: the pin goes.
        ((knode("a", taints=(Taint(key="t", effect="NoSchedule"),)), knode("b")), True, {"1": "b"}),
    ],
)
def test_pins_reset(nodes: tuple[KubeNode, ...], listed: bool, expected: dict[str, str]) -> None:
    ns = msgspec.structs.replace(PIN, status=NodeSetStatus(ordinal_to_node={"0": "a", "1": "b"}))
    assert _daemon.pins(ns, [], {n.key: n for n in nodes}, {}, nodes_listed=listed) == expected


def test_pins_are_dropped_when_pin_to_node_is_off() -> None:
    ns = msgspec.structs.replace(
        PIN, pin_to_node=False, status=NodeSetStatus(ordinal_to_node={"0": "a"})
    )
    d = decide(knode("a"), spod("gpu-0", "a"), spod("gpu-1", "a"), ns=ns)
    (status,) = [a for a in d.actions if isinstance(a, SetNodeSetStatus)]
    assert status.status.ordinal_to_node == {}
    assert all(not c.node for c in d.actions if isinstance(c, CreateNodeSetPod))


def test_pending_pods_pin_nothing() -> None:
    nodes = {"a": knode("a")}
    pods = [spod("gpu-0", "a", phase="Pending")]
    assert _daemon.pins(PIN, pods, nodes, {"gpu-0": 0}, nodes_listed=True) == {}


# --- translation --------------------------------------------------------------------------------


def test_translation_reads_the_template_filters_and_pins() -> None:
    raw = msgspec.json.decode(
        msgspec.json.encode(
            {
                "apiVersion": "slinky.slurm.net/v1beta1",
                "metadata": {"name": "gpu", "namespace": "slurm", "uid": "u"},
                "spec": {
                    "scalingMode": "DaemonSet",
                    "template": {
                        "spec": {
                            "nodeSelector": {"slurm": "yes"},
                            "tolerations": [{"key": "gpu", "operator": "Exists"}],
                            "affinity": {
                                "nodeAffinity": {
                                    "requiredDuringSchedulingIgnoredDuringExecution": {
                                        "nodeSelectorTerms": [
                                            {
                                                "matchExpressions": [
                                                    {"key": "z", "operator": "Exists"}
                                                ]
                                            }
                                        ]
                                    }
                                }
                            },
                        }
                    },
                },
                "status": {"ordinalToNode": {"0": "a"}},
            }
        ),
        type=RawNodeSet,
    )
    ev = nodeset_to_event(raw, producer="p", observed_at=1)
    assert ev.node_selector == {"slurm": "yes"}
    assert ev.toleration_specs == (Toleration(key="gpu", operator="Exists"),)
    assert ev.node_affinity is not None and ev.node_affinity[0].match_expressions[0].key == "z"
    assert ev.status.ordinal_to_node == {"0": "a"}


# --- effector helpers: extraConf and the node pin ----------------------------------------------


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("", "Features=gpu"),
        ("Weight=10", "Features=gpu Weight=10"),
        ("weight=10 Feature=fast,big features=big", "Features=big,fast,gpu Weight=10"),
        ("Gres=gpu:2 Gres=shard:4", "Features=gpu Gres=gpu:2,shard:4"),
        # Not Key=Value: the baseline alone (1.x degrades the same way).
        ("Weight", "Features=gpu"),
    ],
)
def test_conf_arg(extra: str, expected: str) -> None:
    assert conf_arg("gpu", extra) == expected


def test_parse_extra_conf_rejects_items_without_equals() -> None:
    assert parse_extra_conf("A=1 B") is None
    assert parse_extra_conf("a=1,2") == {"A": ["1", "2"]}


def test_pin_affinity_replaces_required_terms_and_keeps_the_rest() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}],
        },
        "podAntiAffinity": {"x": 1},
    }
    out = _pin_affinity(affinity, "n1")
    assert out["podAntiAffinity"] == {"x": 1}
    assert out["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [{"weight": 1}]
    assert out["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
        ]
    }


# --- the simulators' default scheduler: NodeAffinity filter -------------------------------------


def _aff(*terms: dict[str, object]) -> dict[str, object]:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        }
    }


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, True),
        ({"nodeSelector": {"slurmd": "yes"}}, True),
        ({"nodeSelector": {"slurmd": "no"}}, False),
        (
            _aff({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}),
            True,
        ),
        (
            _aff({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}),
            False,
        ),
        (
            _aff({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z1"]}]}),
            False,
        ),
        (_aff({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}), True),
        (_aff({"matchExpressions": [{"key": "rank", "operator": "Gt", "values": ["2"]}]}), True),
        # A term with neither list matches nothing; terms are ORed.
        (_aff({}), False),
        (_aff({}, {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}), True),
    ],
)
def test_sim_scheduler_node_affinity(spec: dict[str, object], expected: bool) -> None:
    node = {"metadata": {"name": "n1", "labels": {"slurmd": "yes", "zone": "z1", "rank": "3"}}}
    assert node_affinity_matches(spec, node) is expected


# --- the bridge's own managed-node taint (issue 29 item 2) -----------------------------------

MANAGED = Taint(
    key=wellknown.TAINT_MANAGED_NODE, value="slurm-bridge-scheduler", effect="NoExecute"
)


def test_a_managed_node_taint_neither_stops_nor_condemns_a_daemonset_pod() -> None:
    """slurmbridge taints the nodes whose slurmd pods it made Slurm nodes: the pods tolerate
    that taint without the template saying so (1.x worker_app.go's base toleration), so a
    tainted node gets its pod and keeps it — no drain, no delete, no churn."""
    tainted = knode("a", {"slurm": "yes"}, taints=(MANAGED,))
    assert _daemon.should_run(DS, tainted) == (True, True)
    d = decide(tainted)
    assert [(a.node, a.hostname) for a in d.actions if isinstance(a, CreateNodeSetPod)] == [
        ("a", "a")
    ]
    d = decide(tainted, dpod("gpu-abcde", "a"), sn("a"))
    assert not [a for a in d.actions if isinstance(a, (DeleteNodeSetPod, DrainSlurmNode))]


@pytest.mark.parametrize(
    ("given", "added"),
    [
        ((), True),
        ((Toleration(key="gpu", operator="Exists"),), True),
        # Another effect does not speak for NoExecute.
        (
            (Toleration(key=wellknown.TAINT_MANAGED_NODE, operator="Exists", effect="NoSchedule"),),
            True,
        ),
        # The user's own toleration of the key is kept as written, not doubled.
        ((Toleration(key=wellknown.TAINT_MANAGED_NODE, value="s", effect="NoExecute"),), False),
        ((Toleration(key=wellknown.TAINT_MANAGED_NODE, operator="Exists"),), False),
        ((Toleration(operator="Exists"),), False),
    ],
)
def test_slurmd_tolerations_add_the_managed_node_one_once(
    given: tuple[Toleration, ...], added: bool
) -> None:
    got = _daemon.slurmd_tolerations(given)
    assert got[: len(given)] == given
    assert (got[len(given) :] == (_daemon.MANAGED_NODE_TOLERATION,)) is added
    assert len(got) == len(given) + added
