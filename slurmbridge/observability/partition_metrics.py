"""Slurm partition metrics for KEDA users, kept from the projection's stream of events.

Slinky's docs autoscale NodeSets with KEDA's Prometheus scaler on partition metrics; these
gauges give the same series from slurmbridge's log (no extra Slurm polling), labelled by
``cluster`` and ``partition``:

* ``slurm_partition_pending_jobs`` — jobs PENDING;
* ``slurm_partition_max_pending_nodes`` — the most nodes one pending job asks for;
* ``slurm_partition_jobs`` — jobs PENDING or RUNNING;
* ``slurm_partition_nodes`` — nodes in the partition;
* ``slurm_partition_node_state`` — nodes by ``state``: ``idle``, ``allocated`` (ALLOCATED
  or MIXED), ``down``, ``drain`` (the DRAIN flag, whatever the base state).

Each event updates only the partitions it touches (O(1) per event, plus the distinct node
counts of pending jobs for the maximum).
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from prometheus_client import Gauge

from schemas.events import Event, SlurmJob, SlurmNode, SlurmPartition

PENDING_JOBS: Final = Gauge(
    "slurm_partition_pending_jobs", "Jobs PENDING in a partition", ["cluster", "partition"]
)
MAX_PENDING_NODES: Final = Gauge(
    "slurm_partition_max_pending_nodes",
    "Most nodes one pending job of a partition asks for",
    ["cluster", "partition"],
)
JOBS: Final = Gauge(
    "slurm_partition_jobs", "Jobs PENDING or RUNNING in a partition", ["cluster", "partition"]
)
NODES: Final = Gauge("slurm_partition_nodes", "Nodes in a partition", ["cluster", "partition"])
NODE_STATE: Final = Gauge(
    "slurm_partition_node_state",
    "Nodes of a partition by state (idle, allocated, down, drain)",
    ["cluster", "partition", "state"],
)
STATES: Final = ("idle", "allocated", "down", "drain")

Part = tuple[str, str]  # (cluster, partition)


def _cluster(source: str) -> str:
    return source.split(":", 1)[1] if source.startswith("slurm:") else ""


def _node_states(n: SlurmNode) -> tuple[str, ...]:
    out = []
    if n.base_state == "IDLE":
        out.append("idle")
    elif n.base_state in ("ALLOCATED", "MIXED"):
        out.append("allocated")
    elif n.base_state == "DOWN":
        out.append("down")
    if n.has("DRAIN"):
        out.append("drain")
    return tuple(out)


class PartitionMetrics:
    """A projection listener that keeps the gauges above (see the module docstring)."""

    def __init__(self) -> None:
        self._jobs: dict[tuple[str, str], tuple[str, str, int]] = {}  # → partition, state, nodes
        self._pending: dict[Part, Counter[int]] = {}
        self._active: Counter[Part] = Counter()
        self._nodes: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self._node_state: Counter[tuple[str, str, str]] = Counter()

    def observe(self, event: Event, seq: int) -> None:
        """Projection listener: apply one observation."""
        del seq
        if isinstance(event, SlurmJob):
            self._job(event)
        elif isinstance(event, SlurmNode):
            self._node(event)
        elif isinstance(event, SlurmPartition):
            cluster = _cluster(event.source)
            NODES.labels(cluster, event.key).set(0 if event.deleted else len(event.nodes))

    def _job(self, ev: SlurmJob) -> None:
        cluster = _cluster(ev.source)
        key = (cluster, ev.key)
        old = self._jobs.pop(key, None)
        touched: set[Part] = set()
        if old is not None:
            part, state, nodes = old
            touched.add((cluster, part))
            if state == "PENDING":
                self._pending[(cluster, part)][nodes] -= 1
            if state in ("PENDING", "RUNNING"):
                self._active[(cluster, part)] -= 1
        if not ev.deleted:
            state, nodes = ev.base_state, max(1, ev.node_count)
            self._jobs[key] = (ev.partition, state, nodes)
            part_key = (cluster, ev.partition)
            touched.add(part_key)
            if state == "PENDING":
                self._pending.setdefault(part_key, Counter())[nodes] += 1
            if state in ("PENDING", "RUNNING"):
                self._active[part_key] += 1
        for c, p in touched:
            pending = self._pending.get((c, p), Counter())
            live = [n for n, count in pending.items() if count > 0]
            PENDING_JOBS.labels(c, p).set(sum(pending.values()))
            MAX_PENDING_NODES.labels(c, p).set(max(live, default=0))
            JOBS.labels(c, p).set(self._active[(c, p)])

    def _node(self, ev: SlurmNode) -> None:
        cluster = _cluster(ev.source)
        key = (cluster, ev.key)
        old = self._nodes.pop(key, None)
        touched: set[tuple[str, str, str]] = set()
        if old is not None:
            parts, states = old
            for p in parts:
                for st in states:
                    self._node_state[(cluster, p, st)] -= 1
                    touched.add((cluster, p, st))
        if not ev.deleted:
            states = _node_states(ev)
            self._nodes[key] = (ev.partitions, states)
            for p in ev.partitions:
                for st in states:
                    self._node_state[(cluster, p, st)] += 1
                    touched.add((cluster, p, st))
        for c, p, st in touched:
            NODE_STATE.labels(c, p, st).set(self._node_state[(c, p, st)])
