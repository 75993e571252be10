"""Kubernetes 1.37's CompositePodGroup as one Slurm job (issue 28, item 5), as table cases
from the v1alpha3 API's rules (kubernetes ``staging/src/k8s.io/api/scheduling/v1alpha3/
types.go``: a gang CompositePodGroup admits its child groups all-or-nothing, a basic one
schedules them independently; ``WorkloadMaxTreeDepth`` 4; a cycle is an invalid layout):

* which group a PodGroup's pods are placed in (:func:`reconcilers._pods.composite_group`);
* how many pods the gang waits for (:func:`reconcilers._pods.composite_size`);
* what placement submits: one heterogeneous job for a tree of two shapes, nothing while a
  member group is short of pods or missing, a refusal on an invalid tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from reconcilers import _pods, placement
from reconcilers.base import Context
from schemas import wellknown
from schemas.actions import SetPodCondition, SubmitSlurmJob
from schemas.events import Event, KubePod, KubeWorkload, SlurmPartition, workload_key
from slurmbridge.runtime.projection import Projection
from tests.unit._listing import listed
from tests.unit._pods import kube_pod, kube_workload

SCHED = wellknown.DEFAULT_SCHEDULER_NAME
CTX = Context(scheduler_name=SCHED, cluster="c1", now=1000.0)
NATIVE = wellknown.KIND_NATIVE_POD_GROUP
COMPOSITE = wellknown.KIND_NATIVE_COMPOSITE
BATCH = SlurmPartition(source="slurm:c1", key="batch", cluster="c1")
P = wellknown.ANNOTATION_SLURMJOB_PREFIX


def _group(kind: str, name: str, parent: str, size: int, policy: str) -> KubeWorkload:
    composite = kind == COMPOSITE
    return kube_workload(
        "default",
        kind,
        name,
        api_version="scheduling.k8s.io/" + ("v1alpha3" if composite else "v1beta1"),
        size=size if policy == "gang" else 0,
        policy=policy,
        workload_name="w",
        template_name=name,
        parent=parent,
        annotations={P + "partition": "batch"} if composite else {},
    )


def pg(name: str, parent: str = "", *, size: int = 1, policy: str = "gang") -> KubeWorkload:
    """A Workload API PodGroup (gang ``minCount`` ``size``)."""
    return _group(NATIVE, name, parent, size, policy)


def cpg(name: str, parent: str = "", *, groups: int = 2, policy: str = "gang") -> KubeWorkload:
    """A CompositePodGroup (gang ``minGroupCount`` ``groups``), partition ``batch``."""
    return _group(COMPOSITE, name, parent, groups, policy)


def kpod(name: str, group: str, cpu: int = 1000) -> KubePod:
    return kube_pod(
        "default",
        name,
        uid=f"u-{name}",
        scheduler_name=SCHED,
        scheduling_group=group,
        phase="Pending",
        cpu_millis=cpu,
    )


def store(*objs: Event) -> Projection:
    p = Projection()
    for i, o in enumerate(listed((*objs, BATCH)), 1):
        p.apply(o, i)
    return p


def group_name(objs: tuple[Event, ...], pod_group: str) -> str:
    s = store(*objs)
    found = _pods.composite_group(
        s.get(KubeWorkload, workload_key("default", NATIVE, pod_group)), s
    )
    return "" if found is None else found.name


@dataclass(frozen=True)
class GroupCase:
    name: str
    objs: tuple[Event, ...]
    want: str  # the CompositePodGroup the PodGroup "leaf" is placed with ("": its own group)


GROUP_CASES = [
    GroupCase("no parent: its own group", (pg("leaf"),), ""),
    GroupCase("a gang parent", (cpg("root"), pg("leaf", "root")), "root"),
    GroupCase(
        "a basic parent: its own group", (cpg("root", policy="basic"), pg("leaf", "root")), ""
    ),
    GroupCase(
        "gang parents all the way: the top one",
        (cpg("root"), cpg("mid", "root"), pg("leaf", "mid")),
        "root",
    ),
    GroupCase(
        "a basic grandparent stops the walk at the gang parent",
        (cpg("root", policy="basic"), cpg("mid", "root"), pg("leaf", "mid")),
        "mid",
    ),
    GroupCase("a parent not observed: grouped under it (and waits)", (pg("leaf", "root"),), "root"),
    GroupCase(
        "a grandparent not observed: grouped under it",
        (cpg("mid", "root"), pg("leaf", "mid")),
        "root",
    ),
    GroupCase(
        "a cycle stops where it closes", (cpg("a", "b"), cpg("b", "a"), pg("leaf", "a")), "b"
    ),
]


@pytest.mark.parametrize("case", GROUP_CASES, ids=lambda c: c.name)
def test_the_group_a_pod_groups_pods_are_placed_in(case: GroupCase) -> None:
    assert group_name(case.objs, "leaf") == case.want


@dataclass(frozen=True)
class SizeCase:
    name: str
    objs: tuple[Event, ...]
    want: int


SIZE_CASES = [
    SizeCase(
        "both members at their minimum", (cpg("root"), pg("l", "root"), pg("w", "root", size=2)), 3
    ),
    SizeCase("a member not there yet counts one pod", (cpg("root"), pg("w", "root", size=2)), 3),
    SizeCase(
        "a basic member counts one pod",
        (cpg("root"), pg("l", "root", policy="basic"), pg("w", "root", size=2)),
        3,
    ),
    SizeCase(
        "nested: every PodGroup of the tree",
        (cpg("root"), cpg("mid", "root"), pg("l", "root"), pg("a", "mid", size=2), pg("b", "mid")),
        4,
    ),
]


@pytest.mark.parametrize("case", SIZE_CASES, ids=lambda c: c.name)
def test_the_pods_a_composite_gang_waits_for(case: SizeCase) -> None:
    s = store(*case.objs)
    root = s.get(KubeWorkload, workload_key("default", COMPOSITE, "root"))
    assert root is not None
    assert _pods.composite_size(root, s) == case.want


KEY = f"default/{COMPOSITE}:root"
TREE = (cpg("root"), pg("leader", "root"), pg("workers", "root", size=2))


def decide(*objs: Event) -> placement.Decision:
    return placement.decide(placement.view(store(*objs), KEY, CTX))


def test_a_tree_of_two_shapes_is_one_heterogeneous_job() -> None:
    d = decide(
        *TREE,
        kpod("leader-0", "leader", cpu=2000),
        kpod("workers-0", "workers"),
        kpod("workers-1", "workers"),
    )
    (submit,) = [a for a in d.actions if isinstance(a, SubmitSlurmJob)]
    assert [c.spec.partition for c in submit.components] == ["batch", "batch"]
    assert [[p.name for p in c.pods] for c in submit.components] == [
        ["leader-0"],
        ["workers-0", "workers-1"],
    ], "a component per shape, the leader's first"
    assert submit.group == KEY


def test_a_member_short_of_pods_submits_nothing() -> None:
    d = decide(*TREE, kpod("leader-0", "leader", cpu=2000), kpod("workers-0", "workers"))
    assert not [a for a in d.actions if isinstance(a, SubmitSlurmJob)]
    assert "2 of 3" in d.reason


def test_a_cycle_is_refused_on_the_pods() -> None:
    d = placement.decide(
        placement.view(
            store(cpg("a", "b"), cpg("b", "a"), pg("leaf", "a"), kpod("leaf-0", "leaf")),
            f"default/{COMPOSITE}:b",
            CTX,
        )
    )
    assert not [a for a in d.actions if isinstance(a, SubmitSlurmJob)]
    (cond,) = [a for a in d.actions if isinstance(a, SetPodCondition)]
    assert cond.reason == placement.COMPOSITE_INVALID
