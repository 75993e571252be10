"""The operator's cordon annotation both ways (issue 28 item 8): ``pod-cordon=true`` written
on a slurmd pod whose node is cordoned, removed (with an undrain, our reason only) when the
node is no longer cordoned. Cases in our words from slurm-operator
``internal/controller/nodeset/nodeset_sync_test.go`` ``TestNodeSetReconciler_syncCordon``
(``wantPodCordoned``)."""

from __future__ import annotations

import pytest

from reconcilers.nodeset import _slurmd
from schemas import wellknown
from schemas.actions import DrainSlurmNode, SetPodAnnotation, UndrainSlurmNode
from schemas.events import KubeNode, KubePod, SlurmNode
from tests.unit._pods import kube_pod

CORDON = wellknown.ANNOTATION_POD_CORDON
NODE_REASON = wellknown.node_cordon_drain_reason("k1", "slurm", "gpu-0")
POD_REASON = wellknown.pod_cordon_drain_reason("slurm", "gpu-0")


def pod(cordoned: bool) -> KubePod:
    return kube_pod(
        "slurm",
        "gpu-0",
        uid="u",
        node_name="k1",
        phase="Running",
        annotations={CORDON: "true"} if cordoned else {},
    )


def slurm(*state: str, reason: str = "") -> SlurmNode:
    return SlurmNode(
        source="slurm:c1", key="gpu-0", cluster="c1", state=state or ("IDLE",), reason=reason
    )


def kube(cordoned: bool) -> KubeNode:
    return KubeNode(source="k8s", key="k1", ready=True, unschedulable=cordoned)


@pytest.mark.parametrize(
    ("node_cordoned", "pod_cordoned", "slurm_node", "mark", "drain", "undrain"),
    [
        pytest.param(True, False, slurm(), True, True, False, id="node cordoned: mark and drain"),
        pytest.param(
            True,
            True,
            slurm("IDLE", "DRAIN", reason=NODE_REASON),
            None,
            False,
            False,
            id="node cordoned, already marked and drained: nothing",
        ),
        pytest.param(
            False, True, slurm(), None, True, False, id="a cordoned pod on a schedulable node"
        ),
        pytest.param(
            False,
            True,
            slurm("IDLE", "DRAIN", reason=NODE_REASON),
            False,
            False,
            True,
            id="the node uncordoned: unmark and undrain",
        ),
        pytest.param(
            False,
            True,
            slurm("IDLE", "DRAIN", reason=POD_REASON),
            None,
            False,
            False,
            id="someone's pod cordon stays",
        ),
        pytest.param(
            True,
            False,
            slurm("IDLE", "DRAIN", reason="maintenance by admin"),
            None,
            False,
            False,
            id="an external reason: left unchanged",
        ),
        pytest.param(
            True,
            False,
            slurm("DOWN", "NOT_RESPONDING", reason="Not responding"),
            None,
            False,
            False,
            id="an unresponsive node: left unchanged",
        ),
    ],
)
def test_the_cordon_annotation_both_ways(
    node_cordoned: bool,
    pod_cordoned: bool,
    slurm_node: SlurmNode,
    mark: bool | None,
    drain: bool,
    undrain: bool,
) -> None:
    actions, _why = _slurmd.cordon_actions(pod(pod_cordoned), kube(node_cordoned), slurm_node, "c1")
    marks = [a for a in actions if isinstance(a, SetPodAnnotation)]
    if mark is None:
        assert marks == []
    else:
        assert [(m.annotation, m.value) for m in marks] == [(CORDON, "true" if mark else None)]
    assert any(isinstance(a, DrainSlurmNode) for a in actions) is drain
    assert any(isinstance(a, UndrainSlurmNode) for a in actions) is undrain


def test_a_pod_condemned_by_a_scale_in_is_marked() -> None:
    """slurm-operator makePodCordonAndDrain on scale-in: the condemned pod whose node is busy
    waits drained and marked ``pod-cordon=true``; one deleted at once is not marked first."""
    from schemas.actions import DeleteNodeSetPod
    from tests.unit.test_nodeset import K1, NODES_LISTED, decide, ns, of, sn
    from tests.unit.test_nodeset import pod as slurmd_pod

    busy = decide(ns(1), NODES_LISTED, K1, slurmd_pod(0), sn(0), slurmd_pod(1), sn(1, "MIXED"))
    marks = of(SetPodAnnotation, busy)
    assert [(m.pod.name, m.annotation, m.value) for m in marks] == [("gpu-1", CORDON, "true")]
    idle = decide(ns(1), NODES_LISTED, K1, slurmd_pod(0), sn(0), slurmd_pod(1), sn(1))
    assert [a.pod.name for a in of(DeleteNodeSetPod, idle)] == ["gpu-1"]
    assert [m for m in of(SetPodAnnotation, idle) if m.annotation == CORDON] == []
