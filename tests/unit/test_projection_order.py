"""The projection keeps the newest state of a Kubernetes object whatever the log's order
(slurmbridge.runtime.projection, "Order"): two producers publishing the same object can store
an older state after a newer one, and the newer one's own later copy is a duplicate."""

from __future__ import annotations

import msgspec

from schemas import events
from schemas.events import KubePod, SlurmNode
from schemas.subjects import KUBE_SOURCE
from slurmbridge.runtime.projection import Projection


def pod(rv: str, phase: str, uid: str = "u1") -> KubePod:
    return KubePod(
        source=KUBE_SOURCE, key="ns/p", uid=uid, namespace="ns", name="p", phase=phase, version=rv
    )


def test_an_older_resource_version_after_a_newer_one_is_not_applied() -> None:
    p = Projection()
    p.apply(pod("100", "Pending"), 1)
    p.apply(pod("110", "Succeeded"), 2)
    p.apply(pod("100", "Pending"), 3)  # another producer's late publish
    held = p.get(KubePod, "ns/p", KUBE_SOURCE)
    assert held is not None and held.phase == "Succeeded"
    assert p.stale == 1
    assert p.applied_seq == 3  # consumed all the same: waiters on seq 3 are released


def test_a_late_state_does_not_bring_back_a_deleted_object() -> None:
    p = Projection()
    p.apply(pod("100", "Running"), 1)
    tomb = events.tombstone(pod("100", "Running"), version="120", producer="a", observed_at=0)
    p.apply(tomb, 2)
    p.apply(pod("110", "Running"), 3)
    assert p.get(KubePod, "ns/p", KUBE_SOURCE) is None
    # A new object of that name is newer than the tombstone: applied.
    p.apply(pod("130", "Pending", uid="u2"), 4)
    held = p.get(KubePod, "ns/p", KUBE_SOURCE)
    assert held is not None and held.uid == "u2"


def test_equal_and_newer_versions_apply_and_other_versions_are_never_compared() -> None:
    p = Projection()
    p.apply(pod("100", "Pending"), 1)
    p.apply(msgspec.structs.replace(pod("100", "Pending"), producer="twin"), 2)
    assert p.last_seq("KubePod", KUBE_SOURCE, "ns/p") == 2
    p.apply(pod("", "Running"), 3)  # no resourceVersion (a hand-made observation)
    held = p.get(KubePod, "ns/p", KUBE_SOURCE)
    assert held is not None and held.phase == "Running"
    # Slurm observations carry content hashes: their order is the log's.
    a = SlurmNode(source="slurm:c1", key="n1", cluster="c1", state=("IDLE",), version="9000")
    b = SlurmNode(source="slurm:c1", key="n1", cluster="c1", state=("DOWN",), version="1000")
    p.apply(a, 4)
    p.apply(b, 5)
    node = p.get(SlurmNode, "n1", "slurm:c1")
    assert node is not None and node.state == ("DOWN",)
    assert p.stale == 0


def test_changes_count_the_applied_observations_of_a_kind_and_caches_persist() -> None:
    """Store.changes moves with every observation of the kind applied (a tombstone too), not
    with a stale one nor with another kind's; Store.cache hands back the same dict."""
    p = Projection()
    assert p.changes(KubePod) == 0
    p.apply(pod("100", "Pending"), 1)
    p.apply(pod("110", "Running"), 2)
    p.apply(pod("105", "Pending"), 3)  # stale: not applied
    assert p.changes(KubePod) == 2
    p.apply(SlurmNode(source="slurm:c1", key="n1", cluster="c1"), 4)
    assert p.changes(KubePod) == 2 and p.changes(SlurmNode) == 1
    p.apply(events.tombstone(pod("110", "Running"), version="120", producer="a", observed_at=0), 5)
    assert p.changes(KubePod) == 3
    kept = p.cache("x")
    kept["k"] = 1
    assert p.cache("x") is kept and p.cache("y") == {}


def node(name: str, rv: str) -> events.KubeNode:
    return events.KubeNode(source=KUBE_SOURCE, key=name, version=rv)


def test_changed_since_names_the_keys_taken_in_once_asked_and_within_its_bound() -> None:
    """Store.changed_since: None until a kind is asked for (nothing kept before), then the
    keys after a count, oldest first, tombstones and repeats included; a stale state (not
    applied) is not a change; None again once more came than the journal keeps."""
    p = Projection()
    p.apply(node("a", "1"), 1)
    assert p.changed_since(events.KubeNode, 0) is None  # not journalled before this call
    start = p.changes(events.KubeNode)
    assert p.changed_since(events.KubeNode, start) == []
    p.apply(node("b", "2"), 2)
    p.apply(node("a", "3"), 3)
    p.apply(node("a", "2"), 4)  # older than the one held: not applied, not a change
    p.apply(events.tombstone(node("b", "2"), version="5", producer="t", observed_at=0), 5)
    assert p.changed_since(events.KubeNode, start) == ["b", "a", "b"]
    assert p.changed_since(events.KubeNode, start + 2) == ["b"]
    assert p.changed_since(events.KubeNode, start - 1) is None  # before the journal began
    assert p.changed_since(SlurmNode, 0) is None  # each kind on its own
    q = Projection()
    q.JOURNAL_MAX = 2
    assert q.changed_since(events.KubeNode, 0) is None
    for i in range(3):
        q.apply(node(f"n{i}", str(i + 1)), i + 1)
    assert q.changed_since(events.KubeNode, 1) == ["n1", "n2"]
    assert q.changed_since(events.KubeNode, 0) is None  # n0's change was let go
