"""Bad input is bounded (``nodeset`` rules 1 and 21, pure): scale-out in slow-start batches,
memory that does not follow ``spec.replicas``, and absurd replicas held with a condition and
a Warning Event instead of acted on."""

from __future__ import annotations

import tracemalloc

import msgspec

from producers.kube.translate import nodeset_to_event
from reconcilers import nodeset
from schemas.actions import CreateNodeSetPod, DeleteNodeSetPod, RecordEvent, SetNodeSetStatus
from schemas.events import Event, KubePod
from slurmbridge.kube.wire import RawNodeSet
from slurmbridge.runtime.projection import Projection
from tests.unit.test_nodeset import CTX, KEY, LISTED, ns, of, pod, sn

#: What one decision may allocate at its peak, whatever ``replicas`` says (bytes). The views
#: here hold at most a few hundred pods; a decision sized by replicas=10**9 needs gigabytes.
PEAK_BYTES = 4 * 1024 * 1024


def decision(*objs: Event) -> nodeset.Decision:
    p = Projection()
    for i, o in enumerate((LISTED, *objs), 1):
        p.apply(o, i)
    return nodeset.decide(nodeset.view(p, KEY, CTX))


def world(n: int) -> list[Event]:
    """``n`` live pods and their idle Slurm nodes."""
    out: list[Event] = []
    for i in range(n):
        out += [pod(i), sn(i)]
    return out


def peak_of(*objs: Event) -> tuple[nodeset.Decision, int]:
    """The decision over ``objs`` and the peak bytes its view + decide allocated."""
    p = Projection()
    for i, o in enumerate((LISTED, *objs), 1):
        p.apply(o, i)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        d = nodeset.decide(nodeset.view(p, KEY, CTX))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return d, peak


def test_a_billion_replicas_creates_nothing_in_bounded_memory() -> None:
    """replicas=10**9 (above the CRD maximum: an object stored under an older CRD): no pod
    is created or deleted, the decision and its memory are as small as for a sane NodeSet,
    and the NodeSet gets the ReplicaFailure condition and one Warning Event naming the
    field and the bound."""
    d, peak = peak_of(ns(10**9), *world(3))
    assert not of(CreateNodeSetPod, d.actions)
    assert not of(DeleteNodeSetPod, d.actions)
    assert peak < PEAK_BYTES, f"decide allocated {peak} bytes at its peak"
    (status,) = of(SetNodeSetStatus, d.actions)
    (cond,) = status.status.conditions  # type: ignore[attr-defined]
    assert (cond.type, cond.status, cond.reason) == (
        "ReplicaFailure",
        "True",
        "ReplicasAboveMaximum",
    )
    assert "spec.replicas" in cond.message
    assert str(nodeset.MAX_REPLICAS) in cond.message
    assert status.status.desired == 3  # type: ignore[attr-defined]
    warnings = [e for e in of(RecordEvent, d.actions) if e.type == "Warning"]  # type: ignore[attr-defined]
    assert [e.reason for e in warnings] == ["ReplicasAboveMaximum"]  # type: ignore[attr-defined]
    assert "spec.replicas" in d.reason


def test_the_condition_is_kept_quietly_and_removed_when_fixed() -> None:
    """Observed back, the condition is not rewritten (same lastTransitionTime) and the
    Warning is not repeated; replicas fixed, the condition goes and scale-out resumes."""
    first = decision(ns(10**9), *world(2))
    (written,) = of(SetNodeSetStatus, first.actions)
    observed = ns(10**9, status=written.status)  # type: ignore[attr-defined]
    again = decision(observed, *world(2))
    assert not of(SetNodeSetStatus, again.actions)
    assert not [e for e in of(RecordEvent, again.actions) if e.type == "Warning"]  # type: ignore[attr-defined]

    fixed = ns(4, status=written.status)  # type: ignore[attr-defined]
    d = decision(fixed, *world(2))
    (status,) = of(SetNodeSetStatus, d.actions)
    assert status.status.conditions == ()  # type: ignore[attr-defined]
    assert [a.pod_name for a in of(CreateNodeSetPod, d.actions)] == ["gpu-2", "gpu-3"]  # type: ignore[attr-defined]


def test_the_maximum_itself_is_acted_on_in_bounded_batches() -> None:
    """replicas at the maximum is valid: it is scaled out, one slow-start batch at a time —
    at most as many creates as live pods, never more than BURST_REPLICAS — in bounded
    memory."""
    d, peak = peak_of(ns(nodeset.MAX_REPLICAS))
    assert [a.pod_name for a in of(CreateNodeSetPod, d.actions)] == ["gpu-0"]  # type: ignore[attr-defined]
    assert peak < PEAK_BYTES, f"decide allocated {peak} bytes at its peak"
    d, peak = peak_of(ns(nodeset.MAX_REPLICAS), *world(600))
    creates = of(CreateNodeSetPod, d.actions)
    assert len(creates) == nodeset.BURST_REPLICAS
    assert creates[0].pod_name == "gpu-600"  # type: ignore[attr-defined]
    assert peak < 4 * PEAK_BYTES, f"decide allocated {peak} bytes at its peak"
    (up,) = [e for e in of(RecordEvent, d.actions) if e.reason == "ScalingUp"]  # type: ignore[attr-defined]
    assert "and 490 more" in up.message  # type: ignore[attr-defined]
    assert "slow start" in up.message  # type: ignore[attr-defined]


def test_the_batch_grows_as_pods_come_up() -> None:
    """Each pass creates as many pods as came up before it (1, 1, 2, 4 …): the set doubles
    per pass until replicas, and a pass whose creates failed does not grow."""
    objs: list[Event] = [ns(20)]
    sizes: list[int] = []
    for _ in range(10):
        creates = of(CreateNodeSetPod, decision(*objs).actions)
        if not creates:
            break
        sizes.append(len(creates))
        for a in creates:
            o = a.ordinal  # type: ignore[attr-defined]
            objs += [pod(o), sn(o)]
    assert sizes == [1, 1, 2, 4, 8, 4]
    live = sorted(o.name for o in objs if isinstance(o, KubePod))
    assert len(live) == 20
    # The creates of a pass that did not come up: the next pass asks for the same batch.
    stuck = [ns(20), *world(4)]
    first = [a.pod_name for a in of(CreateNodeSetPod, decision(*stuck).actions)]  # type: ignore[attr-defined]
    second = [a.pod_name for a in of(CreateNodeSetPod, decision(*stuck).actions)]  # type: ignore[attr-defined]
    assert first == second == ["gpu-4", "gpu-5", "gpu-6", "gpu-7"]


def test_slow_start_batch_is_bounded() -> None:
    assert nodeset.slow_start_batch(0, 10**9) == 1
    assert nodeset.slow_start_batch(3, 10**9) == 3
    assert nodeset.slow_start_batch(10**6, 10**9) == nodeset.BURST_REPLICAS
    assert nodeset.slow_start_batch(7, 2) == 2
    assert nodeset.slow_start_batch(7, 0) == 0
    assert nodeset.lowest_free(3, {0, 2, 3}) == [1, 4, 5]


def test_daemonset_mode_ignores_replicas_so_is_not_held() -> None:
    """DaemonSet mode never reads replicas (rule 12): an absurd value there is no failure."""
    d = decision(ns(10**9, scaling_mode="DaemonSet"))
    statuses = of(SetNodeSetStatus, d.actions)
    assert all(s.status.conditions == () for s in statuses)  # type: ignore[attr-defined]


def test_the_producer_carries_only_our_condition_and_reads_it_as_written() -> None:
    """A NodeSet read back carries the ReplicaFailure condition as the decision wrote it
    (so the next decision does not rewrite it) and none of others' conditions."""
    d = decision(ns(10**9))
    (status,) = of(SetNodeSetStatus, d.actions)
    (cond,) = status.status.conditions  # type: ignore[attr-defined]
    raw = msgspec.convert(
        {
            "metadata": {"name": "gpu", "namespace": "slurm", "uid": "ns-uid"},
            "spec": {"replicas": 10**9},
            "status": {
                "conditions": [
                    {
                        "type": "Available",
                        "status": "True",
                        "reason": "Theirs",
                        "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    },
                    {
                        "type": cond.type,
                        "status": cond.status,
                        "reason": cond.reason,
                        "message": cond.message,
                        "lastTransitionTime": "1970-01-01T00:00:00Z",
                    },
                ]
            },
        },
        RawNodeSet,
    )
    ev = nodeset_to_event(raw, producer="p", observed_at=1)
    assert ev.status.conditions == (cond,)
