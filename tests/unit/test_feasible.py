"""Table cases for every rule of ``reconcilers._feasible.fits`` (Kubernetes' node filters)."""

from __future__ import annotations

from typing import Any

import pytest

from reconcilers import _feasible
from reconcilers._feasible import fits
from schemas import wellknown
from schemas.events import (
    KubeNode,
    KubeNodeUsage,
    KubePod,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
)

GI = 1024**3
AFFINITY = "node(s) didn't match Pod's node affinity/selector"


def node(name: str = "n1", **kw: Any) -> KubeNode:
    kw.setdefault("labels", {"kubernetes.io/hostname": name, "zone": "a", "rank": "5"})
    return KubeNode(source="k8s", key=name, **kw)


def pod(**kw: Any) -> KubePod:
    return KubePod(source="k8s", key="ns/p", namespace="ns", name="p", **kw)


def req(key: str, op: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key=key, operator=op, values=values)


def terms(*each: tuple[NodeSelectorRequirement, ...]) -> tuple[NodeSelectorTerm, ...]:
    return tuple(NodeSelectorTerm(match_expressions=e) for e in each)


def field(op: str, *values: str, key: str = "metadata.name") -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm(match_fields=(req(key, op, *values),)),)


def usage(cpu: int = 0, memory: int = 0, pods: int = 0) -> KubeNodeUsage:
    return KubeNodeUsage(source="k8s", key="n1", cpu_millis=cpu, memory_bytes=memory, pods=pods)


# --- node selector and required node affinity ------------------------------------------------

AFFINITY_CASES = [
    # (case, pod fields, fits?)
    ("nothing asked", {}, True),
    ("selector matches", {"node_selector": {"zone": "a"}}, True),
    ("selector value differs", {"node_selector": {"zone": "b"}}, False),
    ("selector label absent", {"node_selector": {"disk": "ssd"}}, False),
    ("hostname is a plain label", {"node_selector": {"kubernetes.io/hostname": "n1"}}, True),
    ("hostname of another node", {"node_selector": {"kubernetes.io/hostname": "n2"}}, False),
    ("In", {"node_affinity": terms((req("zone", "In", "b", "a"),))}, True),
    ("In, not listed", {"node_affinity": terms((req("zone", "In", "b"),))}, False),
    ("In, label absent", {"node_affinity": terms((req("disk", "In", "ssd"),))}, False),
    ("In without values does not parse", {"node_affinity": terms((req("zone", "In"),))}, False),
    ("NotIn", {"node_affinity": terms((req("zone", "NotIn", "b"),))}, True),
    ("NotIn, listed", {"node_affinity": terms((req("zone", "NotIn", "a"),))}, False),
    ("NotIn, label absent", {"node_affinity": terms((req("disk", "NotIn", "ssd"),))}, True),
    ("Exists", {"node_affinity": terms((req("zone", "Exists"),))}, True),
    ("Exists, absent", {"node_affinity": terms((req("disk", "Exists"),))}, False),
    ("Exists with values", {"node_affinity": terms((req("zone", "Exists", "a"),))}, False),
    ("DoesNotExist", {"node_affinity": terms((req("disk", "DoesNotExist"),))}, True),
    ("DoesNotExist, present", {"node_affinity": terms((req("zone", "DoesNotExist"),))}, False),
    ("Gt", {"node_affinity": terms((req("rank", "Gt", "4"),))}, True),
    ("Gt, equal", {"node_affinity": terms((req("rank", "Gt", "5"),))}, False),
    ("Lt", {"node_affinity": terms((req("rank", "Lt", "6"),))}, True),
    ("Lt, larger", {"node_affinity": terms((req("rank", "Lt", "-1"),))}, False),
    ("Gt on a non-integer label", {"node_affinity": terms((req("zone", "Gt", "1"),))}, False),
    ("Gt, label absent", {"node_affinity": terms((req("disk", "Gt", "1"),))}, False),
    ("Gt, non-integer value", {"node_affinity": terms((req("rank", "Gt", "1.5"),))}, False),
    ("Gt, two values", {"node_affinity": terms((req("rank", "Gt", "1", "2"),))}, False),
    ("unknown operator", {"node_affinity": terms((req("zone", "Like", "a"),))}, False),
    (
        "a term's expressions are ANDed",
        {"node_affinity": terms((req("zone", "In", "a"), req("rank", "Gt", "9")))},
        False,
    ),
    (
        "terms are ORed",
        {"node_affinity": terms((req("zone", "In", "b"),), (req("rank", "Gt", "1"),))},
        True,
    ),
    ("an empty list of terms matches nothing", {"node_affinity": ()}, False),
    ("an empty term matches nothing", {"node_affinity": (NodeSelectorTerm(),)}, False),
    (
        "an empty term next to a matching one",
        {"node_affinity": (NodeSelectorTerm(), *terms((req("zone", "In", "a"),)))},
        True,
    ),
    (
        "selector and affinity both apply",
        {"node_selector": {"zone": "b"}, "node_affinity": terms((req("zone", "In", "a"),))},
        False,
    ),
    ("matchFields metadata.name In", {"node_affinity": field("In", "n1")}, True),
    ("matchFields metadata.name In other", {"node_affinity": field("In", "n2")}, False),
    ("matchFields metadata.name NotIn", {"node_affinity": field("NotIn", "n2")}, True),
    ("matchFields NotIn itself", {"node_affinity": field("NotIn", "n1")}, False),
    ("matchFields two values", {"node_affinity": field("In", "n1", "n2")}, False),
    ("matchFields Exists", {"node_affinity": field("Exists")}, False),
    ("matchFields another field", {"node_affinity": field("In", "x", key="metadata.uid")}, False),
    (
        "matchFields and expressions ANDed",
        {
            "node_affinity": (
                NodeSelectorTerm(
                    match_expressions=(req("zone", "In", "a"),),
                    match_fields=(req("metadata.name", "In", "n2"),),
                ),
            )
        },
        False,
    ),
]


@pytest.mark.parametrize(
    ("case", "fields", "ok"), AFFINITY_CASES, ids=[c[0] for c in AFFINITY_CASES]
)
def test_node_selector_and_affinity(case: str, fields: dict[str, Any], ok: bool) -> None:
    assert fits(pod(**fields), node(), None) == (None if ok else AFFINITY), case


# --- taints and tolerations ------------------------------------------------------------------


def tol(key: str = "", op: str = "Equal", value: str = "", effect: str = "") -> Toleration:
    return Toleration(key=key, operator=op, value=value, effect=effect)


DEDICATED = Taint(key="dedicated", value="gpu", effect="NoSchedule")
TAINT_CASES = [
    # (case, taint, tolerations, fits?)
    ("untolerated NoSchedule", DEDICATED, (), False),
    ("untolerated NoExecute", Taint(key="k", value="v", effect="NoExecute"), (), False),
    ("PreferNoSchedule is a preference", Taint(key="k", effect="PreferNoSchedule"), (), True),
    ("Equal, same value", DEDICATED, (tol("dedicated", value="gpu"),), True),
    ("Equal, other value", DEDICATED, (tol("dedicated", value="cpu"),), False),
    ("empty operator is Equal", DEDICATED, (tol("dedicated", op="", value="gpu"),), True),
    ("Exists, any value", DEDICATED, (tol("dedicated", op="Exists"),), True),
    ("Exists with an empty key: everything", DEDICATED, (tol(op="Exists"),), True),
    ("other key", DEDICATED, (tol("other", op="Exists"),), False),
    ("same effect", DEDICATED, (tol("dedicated", "Exists", effect="NoSchedule"),), True),
    ("other effect", DEDICATED, (tol("dedicated", "Exists", effect="NoExecute"),), False),
    ("Gt (alpha, off) tolerates nothing", DEDICATED, (tol("dedicated", "Gt", "1"),), False),
    (
        "the managed-node taint counts as tolerated",
        Taint(key=wellknown.TAINT_MANAGED_NODE, value="x", effect="NoExecute"),
        (),
        True,
    ),
    (
        "the cordon taint follows the cordon logic",
        Taint(key=_feasible.TAINT_UNSCHEDULABLE, effect="NoSchedule"),
        (),
        True,
    ),
]


@pytest.mark.parametrize(
    ("case", "taint", "tolerations", "ok"), TAINT_CASES, ids=[c[0] for c in TAINT_CASES]
)
def test_taints_and_tolerations(
    case: str, taint: Taint, tolerations: tuple[Toleration, ...], ok: bool
) -> None:
    got = fits(pod(toleration_specs=tolerations), node(taints=(taint,)), None)
    want = None if ok else f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
    assert got == want, case


def test_the_first_untolerated_taint_is_named() -> None:
    taints = (
        Taint(key="soft", effect="PreferNoSchedule"),
        Taint(key="a", value="1", effect="NoExecute"),
        Taint(key="b", value="2", effect="NoSchedule"),
    )
    assert fits(pod(), node(taints=taints), None) == "node(s) had untolerated taint {a: 1}"


# --- resources ------------------------------------------------------------------------------

ALLOC = {"alloc_cpu_millis": 4000, "alloc_memory_bytes": 8 * GI, "alloc_pods": 10}
RESOURCE_CASES = [
    # (case, pod fields, node fields, usage, reason)
    ("fits an empty node", {"cpu_millis": 4000, "memory_bytes": 8 * GI}, ALLOC, None, None),
    ("fits exactly next to others", {"cpu_millis": 1000}, ALLOC, usage(3000, GI, 3), None),
    ("cpu short", {"cpu_millis": 1001}, ALLOC, usage(3000), "Insufficient cpu"),
    ("memory short", {"memory_bytes": 2 * GI}, ALLOC, usage(0, 7 * GI), "Insufficient memory"),
    ("pods full", {}, ALLOC, usage(pods=10), "Too many pods"),
    ("pods first", {"cpu_millis": 9000}, ALLOC, usage(pods=10), "Too many pods"),
    (
        "cpu before memory",
        {"cpu_millis": 9000, "memory_bytes": 9 * GI},
        ALLOC,
        None,
        "Insufficient cpu",
    ),
    ("no request fits an overcommitted node", {}, ALLOC, usage(9000, 9 * GI, 1), None),
    (
        "unknown allocatable is not checked",
        {"cpu_millis": 10**6, "memory_bytes": 10**15},
        {},
        None,
        None,
    ),
    (
        "unknown cpu only",
        {"cpu_millis": 10**6, "memory_bytes": 9 * GI},
        {"alloc_memory_bytes": 8 * GI},
        None,
        "Insufficient memory",
    ),
    ("no usage known reads as none", {"cpu_millis": 4000}, ALLOC, None, None),
    (
        "a pod bound here is counted in the usage already",
        {"cpu_millis": 2000, "node_name": "n1"},
        ALLOC,
        usage(4000, 0, 10),
        None,
    ),
]


@pytest.mark.parametrize(
    ("case", "pod_fields", "node_fields", "used", "reason"),
    RESOURCE_CASES,
    ids=[c[0] for c in RESOURCE_CASES],
)
def test_resources_fit(
    case: str,
    pod_fields: dict[str, Any],
    node_fields: dict[str, Any],
    used: KubeNodeUsage | None,
    reason: str | None,
) -> None:
    assert fits(pod(**pod_fields), node(**node_fields), used) == reason, case


def test_a_pod_bound_elsewhere_fits_no_other_node() -> None:
    assert fits(pod(node_name="n2"), node(), None) == _feasible.NODE_NAME


def test_filters_run_in_kube_schedulers_order() -> None:
    """Taints before affinity before resources: the first failing filter names the reason."""
    p = pod(node_selector={"zone": "b"}, cpu_millis=10**6)
    n = node(taints=(DEDICATED,), **ALLOC)
    assert fits(p, n, None) == "node(s) had untolerated taint {dedicated: gpu}"
    assert fits(p, node(**ALLOC), None) == AFFINITY
    assert fits(pod(cpu_millis=10**6), node(**ALLOC), None) == "Insufficient cpu"


def test_plus_adds_a_pod_to_a_nodes_usage() -> None:
    p = pod(cpu_millis=500, memory_bytes=GI)
    added = _feasible.plus(None, p, "n1")
    assert (added.key, added.cpu_millis, added.memory_bytes, added.pods) == ("n1", 500, GI, 1)
    again = _feasible.plus(added, p, "n1")
    assert (again.cpu_millis, again.memory_bytes, again.pods) == (1000, 2 * GI, 2)
