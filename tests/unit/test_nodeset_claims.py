"""NodeSet ``persistentVolumeClaimRetentionPolicy`` (reconcilers.nodeset rule 18): the
claims' owner references (slurmbridge.kube.nodeset_pod.claim_owners, Kubernetes
stateful_set_utils.go ``updateClaimOwnerRefForSetAndPod``) and which deletes carry the
scale-in (``DeleteNodeSetPod.scaled_from``) or ask to keep the claims (reversal)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from schemas.actions import DeleteNodeSetPod, KeepNodeSetPodClaims, NodeSetRef
from slurmbridge.kube.nodeset_pod import claim_owners
from tests.unit.test_nodeset import K1, NODES_LISTED, decide, ns, of, ours, pod, sn
from tests.unit.test_nodeset_modes import DS, dpod, knode
from tests.unit.test_nodeset_modes import decide as decide_modes
from tests.unit.test_nodeset_modes import sn as ds_sn
from tests.unit.test_nodeset_update import NEW, rp, rs

SET = ("gpu", "ns-uid")
POD = ("gpu-1", "u1")


def set_ref(uid: str = "ns-uid", *, controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "slinky.slurm.net/v1beta1",
        "kind": "NodeSet",
        "name": "gpu",
        "uid": uid,
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def pod_ref(uid: str = "u1", *, controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "gpu-1",
        "uid": uid,
        "controller": controller,
        "blockOwnerDeletion": True,
    }


OTHER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "cm"}
OTHER_CONTROLLER = {**OTHER, "controller": True}


@dataclass(frozen=True)
class Owners:
    name: str
    when_deleted: str
    when_scaled: str
    scaled: bool
    refs: list[dict[str, Any]]
    want: list[dict[str, Any]]


OWNER_CASES = [
    Owners("Retain/Retain: no refs", "Retain", "Retain", True, [], []),
    Owners("Retain/Retain: ours removed", "", "", False, [set_ref(), pod_ref()], []),
    Owners("whenDeleted Delete, kept: the NodeSet", "Delete", "Retain", False, [], [set_ref()]),
    Owners("whenDeleted Delete, scaled: still the NodeSet", "Delete", "", True, [], [set_ref()]),
    Owners("whenScaled Delete, condemned: the pod", "Retain", "Delete", True, [], [pod_ref()]),
    Owners("whenScaled Delete, kept: nobody", "Retain", "Delete", False, [pod_ref()], []),
    Owners(
        "both Delete, condemned: the pod replaces the NodeSet",
        "Delete",
        "Delete",
        True,
        [set_ref()],
        [pod_ref()],
    ),
    Owners(
        "both Delete, reversed: the NodeSet replaces the pod",
        "Delete",
        "Delete",
        False,
        [pod_ref()],
        [set_ref()],
    ),
    Owners(
        "other owners are kept",
        "Delete",
        "Delete",
        True,
        [OTHER, set_ref()],
        [OTHER, pod_ref()],
    ),
    Owners(
        "a non-controller ref of ours becomes a controller ref",
        "Retain",
        "Delete",
        True,
        [pod_ref(controller=False)],
        [pod_ref()],
    ),
    Owners(
        "another controller: ours scrubbed, none added",
        "Retain",
        "Delete",
        True,
        [OTHER_CONTROLLER, set_ref()],
        [OTHER_CONTROLLER],
    ),
    Owners(
        "another controller under Retain/Retain: ours removed as usual",
        "Retain",
        "Retain",
        False,
        [OTHER_CONTROLLER, set_ref()],
        [OTHER_CONTROLLER],
    ),
    Owners(
        "a stale NodeSet ref (another uid): left alone",
        "Delete",
        "Delete",
        True,
        [set_ref("old-uid")],
        [set_ref("old-uid")],
    ),
    Owners(
        "a stale pod ref (an earlier pod of that name): left alone",
        "Retain",
        "Delete",
        True,
        [pod_ref("u0")],
        [pod_ref("u0")],
    ),
    Owners("an unknown policy counts as Retain", "Sometimes", "Maybe", True, [set_ref()], []),
]


@pytest.mark.parametrize("case", OWNER_CASES, ids=lambda c: c.name)
def test_claim_owners(case: Owners) -> None:
    got = claim_owners(
        case.refs,
        when_deleted=case.when_deleted,
        when_scaled=case.when_scaled,
        nodeset=SET,
        pod=POD,
        scaled=case.scaled,
    )
    assert got == case.want


def test_up_to_date_refs_are_returned_as_they_are() -> None:
    # The effector skips the write when it gets its own list back.
    refs = [OTHER, pod_ref()]
    assert (
        claim_owners(refs, when_deleted="", when_scaled="Delete", nodeset=SET, pod=POD, scaled=True)
        is refs
    )


REF = NodeSetRef(namespace="slurm", name="gpu", uid="ns-uid")


def test_scale_in_deletes_carry_the_nodeset() -> None:
    acts = decide(ns(1), pod(0), sn(0), pod(1), sn(1, "IDLE", "DRAIN", reason=ours(1)))
    deletes = of(DeleteNodeSetPod, acts)
    assert [(d.pod.name, d.scaled_from) for d in deletes] == [("gpu-1", REF)]  # type: ignore[attr-defined]
    # The idle-now path (delete right after the drain) carries it too.
    acts = decide(ns(1), pod(0), sn(0), pod(1), sn(1))
    assert [d.scaled_from for d in of(DeleteNodeSetPod, acts)] == [REF]  # type: ignore[attr-defined]


def test_update_deletes_are_not_scale_in() -> None:
    # Kubernetes keeps a replaced pod's claims (its ordinal stays): no retention policy.
    acts = decide(rs(2), rp(0, NEW), sn(0), rp(1), sn(1, "IDLE", "DRAIN", reason=ours(1)))
    deletes = of(DeleteNodeSetPod, acts)
    assert [d.pod.name for d in deletes] == ["gpu-1"]  # type: ignore[attr-defined]
    assert [d.scaled_from for d in deletes] == [None]  # type: ignore[attr-defined]


def test_a_reversed_scale_in_keeps_the_claims() -> None:
    acts = decide(
        ns(2),
        NODES_LISTED,
        K1,
        pod(0),
        sn(0),
        pod(1),
        sn(1, "IDLE", "DRAIN", reason=ours(1)),
    )
    keeps = of(KeepNodeSetPodClaims, acts)
    assert [(k.pod.name, k.pod.uid, k.nodeset, k.slurm_node) for k in keeps] == [  # type: ignore[attr-defined]
        ("gpu-1", "u1", REF, "gpu-1")
    ]
    # Another drain (an administrator's) is no reversal: nothing about claims.
    acts = decide(
        ns(2), NODES_LISTED, K1, pod(0), sn(0), pod(1), sn(1, "IDLE", "DRAIN", reason="admin")
    )
    assert of(KeepNodeSetPodClaims, acts) == []


def test_daemonset_mode_leaving_a_node_is_a_scale_in_and_a_mode_switch_is_not() -> None:
    # 1.x's doPodScale settles the claims of every DaemonSet pod it deletes for a node the
    # template no longer fits; a pod of the other scaling mode goes without (not a scale-in).
    d = decide_modes(knode("a"), dpod("gpu-abcde", "a"), ds_sn("a"))
    (delete,) = of(DeleteNodeSetPod, d.actions)
    assert delete.scaled_from == NodeSetRef(namespace="slurm", name="gpu", uid=DS.uid)  # type: ignore[attr-defined]
    ss = ns(0)
    d = decide_modes(knode("a", {"slurm": "yes"}), dpod("gpu-abcde", "a"), ds_sn("a"), ns=ss)
    (delete,) = of(DeleteNodeSetPod, d.actions)
    assert delete.scaled_from is None  # type: ignore[attr-defined]
