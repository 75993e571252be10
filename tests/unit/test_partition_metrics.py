"""KEDA-facing partition metrics, kept from observations."""

from __future__ import annotations

from prometheus_client import REGISTRY

from schemas.events import SlurmJob, SlurmNode, SlurmPartition
from slurmbridge.observability.partition_metrics import PartitionMetrics

C = "metrics-test"
SRC = f"slurm:{C}"


def value(name: str, partition: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"cluster": C, "partition": partition, **labels})


def job(
    jid: int, state: str, nodes: int = 1, partition: str = "p", *, gone: bool = False
) -> SlurmJob:
    return SlurmJob(
        source=SRC, key=str(jid), job_id=jid, state=(state,), partition=partition,
        node_count=nodes, op="deleted" if gone else "observed",
    )  # fmt: skip


def test_jobs_pending_running_and_the_largest_pending_job() -> None:
    m = PartitionMetrics()
    for ev in (job(1, "PENDING", 4), job(2, "PENDING", 2), job(3, "RUNNING", 1)):
        m.observe(ev, 0)
    assert value("slurm_partition_pending_jobs", "p") == 2
    assert value("slurm_partition_max_pending_nodes", "p") == 4
    assert value("slurm_partition_jobs", "p") == 3
    m.observe(job(1, "RUNNING", 4), 0)  # the big one starts
    assert value("slurm_partition_pending_jobs", "p") == 1
    assert value("slurm_partition_max_pending_nodes", "p") == 2
    m.observe(job(2, "CANCELLED", 2), 0)
    m.observe(job(3, "RUNNING", gone=True), 0)
    assert value("slurm_partition_pending_jobs", "p") == 0
    assert value("slurm_partition_max_pending_nodes", "p") == 0
    assert value("slurm_partition_jobs", "p") == 1
    # A job moving to another partition leaves the first one.
    m.observe(job(1, "PENDING", 1, partition="q"), 0)
    assert value("slurm_partition_jobs", "p") == 0
    assert value("slurm_partition_pending_jobs", "q") == 1


def test_nodes_and_their_states() -> None:
    m = PartitionMetrics()
    m.observe(SlurmPartition(source=SRC, key="p", nodes=("a", "b", "c")), 0)
    for name, state in (("a", ("IDLE",)), ("b", ("MIXED",)), ("c", ("IDLE", "DRAIN"))):
        m.observe(SlurmNode(source=SRC, key=name, state=state, partitions=("p",)), 0)
    assert value("slurm_partition_nodes", "p") == 3
    assert value("slurm_partition_node_state", "p", state="idle") == 2
    assert value("slurm_partition_node_state", "p", state="allocated") == 1
    assert value("slurm_partition_node_state", "p", state="drain") == 1
    m.observe(SlurmNode(source=SRC, key="c", state=("DOWN",), partitions=("p",)), 0)
    assert value("slurm_partition_node_state", "p", state="idle") == 1
    assert value("slurm_partition_node_state", "p", state="drain") == 0
    assert value("slurm_partition_node_state", "p", state="down") == 1
    m.observe(SlurmNode(source=SRC, key="c", op="deleted"), 0)
    assert value("slurm_partition_node_state", "p", state="down") == 0
