"""The runtime's whole-world gate (slurmbridge.runtime.gate): table cases.

Rule: a destructive action for a cluster waits until the log holds the core Kubernetes
listings and a complete, successful Slurm poll of that cluster; protective actions never wait.
"""

from __future__ import annotations

import pytest

from schemas import wellknown
from schemas.actions import (
    AnyAction,
    CancelSlurmJob,
    DeleteSlurmNode,
    DrainSlurmNode,
    TaintNode,
    UndrainSlurmNode,
    UntaintNode,
)
from schemas.events import Event, KubeListed, SlurmPing
from slurmbridge.runtime.gate import ListingGate
from slurmbridge.runtime.projection import Projection

UNTAINT = UntaintNode(
    node="n1", key=wellknown.TAINT_MANAGED_NODE, effect=wellknown.TAINT_MANAGED_NODE_EFFECT
)
TAINT = TaintNode(
    node="n1",
    key=wellknown.TAINT_MANAGED_NODE,
    value="s",
    effect=wellknown.TAINT_MANAGED_NODE_EFFECT,
)
DRAIN = DrainSlurmNode(cluster="c1", node="n1", reason="slurm-bridge: x")
UNDRAIN = UndrainSlurmNode(cluster="c1", node="n1", owned_prefixes=("slurm-bridge: ",))
CANCEL_C2 = CancelSlurmJob(cluster="c2", job_id=7, marker="m")
DELETE = DeleteSlurmNode(cluster="c1", node="n1", owned_prefixes=("slurm-bridge: ",))


def listed(name: str) -> KubeListed:
    return KubeListed(source="k8s", key=name, observed_at=1, version="1", resource=name)


def ping(cluster: str, error: str = "") -> SlurmPing:
    return SlurmPing(
        source=f"slurm:{cluster}", key=cluster, observed_at=1, version="1", error=error
    )


WHOLE_C1 = (listed("nodes"), listed("pods"), ping("c1"))

CASES: list[tuple[str, tuple[Event, ...], tuple[AnyAction, ...], str | None]] = [
    ("empty log: a taint goes", (), (TAINT,), None),
    ("empty log: a drain goes", (), (DRAIN,), None),
    ("empty log: an untaint waits for Kubernetes", (), (UNTAINT,), "Kubernetes listing"),
    ("Kubernetes listed, no Slurm poll: untaint waits", WHOLE_C1[:2], (UNTAINT,), "Slurm"),
    ("nodes listed, pods not: undrain waits", (listed("nodes"), ping("c1")), (UNDRAIN,), "pods"),
    (
        "the last poll failed (token rejected): delete waits",
        (*WHOLE_C1[:2], ping("c1", error="HTTP 401: bad token")),
        (DELETE,),
        "Slurm cluster 'c1'",
    ),
    ("both sides listed: untaint goes", WHOLE_C1, (UNTAINT, UNDRAIN), None),
    ("c1 whole, c2 never polled: a cancel on c2 waits", WHOLE_C1, (CANCEL_C2,), "'c2'"),
    ("protective first, destructive after: the whole decision waits", (), (DRAIN, UNTAINT), "Kube"),
]


@pytest.mark.parametrize(
    ("log", "actions", "held"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_gate(log: tuple[Event, ...], actions: tuple[AnyAction, ...], held: str | None) -> None:
    store = Projection()
    for seq, ev in enumerate(log, 1):
        store.apply(ev, seq)
    gate = ListingGate(store, kube_listings=("nodes", "pods"), default_cluster="c1")
    why = gate.holds(actions)
    if held is None:
        assert why is None
    else:
        assert why is not None and held in why


def test_untaint_is_destructive() -> None:
    """Removing the managed-node taint lets any pod onto a Slurm node: it waits like an
    undrain (the taint it removes protects Slurm's jobs)."""
    assert UNTAINT.destructive
    assert not TAINT.destructive
