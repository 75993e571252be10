"""A NodeSet's ``spec.partition`` end to end in the simulators (reconcilers.nodeset rules
19-20; slurm-operator 1.x renders it into slurm.conf, controller_config.go
``buildNodeSetConf``): the partition is made over REST v0.0.45 on the NodeSet's nodes with its
config, follows a scale-out and a config change, is deleted when disabled, never touched when
it is someone else's, and goes with the NodeSet (our finalizer holds the NodeSet until it has).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas import wellknown
from slurmbridge.devtools.sim.kube import ApiError
from slurmbridge.devtools.testing import MANAGED_NODE_TOLERATION, Stack

pytestmark = pytest.mark.integration

NS = "slurm"
PART = wellknown.ANNOTATION_NODESET_PARTITION
FIN = wellknown.FINALIZER_NODESET_SLURM


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=4, poll_interval=0.2, api_version="v0.0.45") as s:
        # No slurm.conf partition per NodeSet here: spec.partition makes it.
        s.sims.slurmd.nodeset_partitions = False
        s.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield s


def _nodeset(name: str, replicas: int, partition: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "slinky.slurm.net/v1beta1",
        "kind": "NodeSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "partition": partition,
            "template": {
                "spec": {
                    "containers": [{"name": "slurmd", "image": "slurmd:25.05"}],
                    "tolerations": [MANAGED_NODE_TOLERATION],
                }
            },
        },
    }


def _meta(stack: Stack, name: str) -> dict[str, Any]:
    try:
        meta: dict[str, Any] = stack.kube.get("nodesets", name, NS)["metadata"]
    except ApiError:
        return {}
    return meta


def _gone(stack: Stack, name: str) -> bool:
    return not _meta(stack, name)


async def test_the_partition_follows_the_nodeset_and_goes_with_it(stack: Stack) -> None:
    stack.kube.create(_nodeset("hpc", 2, {"enabled": True, "config": "MaxTime=60 Bogus=1"}))
    await stack.wait_for(
        lambda: (
            "hpc" in stack.slurm.partitions
            and set(stack.slurm.partitions["hpc"].nodes) == {"hpc-0", "hpc-1"}
        ),
        timeout=20,
        what="partition hpc on both slurmd nodes",
    )
    assert stack.slurm.partitions["hpc"].max_time == 60
    await stack.wait_for(
        lambda: _meta(stack, "hpc").get("annotations", {}).get(PART) == "hpc-0,hpc-1 MaxTime=60",
        what="the stamp",
    )
    assert FIN in _meta(stack, "hpc")["finalizers"]
    # Events are written off the reconcile path (as client-go's recorder): wait for it.
    await stack.wait_for(
        lambda: any(
            e.get("reason") == "PartitionConfigIgnored"
            and "Bogus has no slurmrestd partition field" in e["message"]
            for e in stack.kube.list("events", NS)
        ),
        what="the Warning naming Bogus",
    )

    stack.kube.patch("nodesets", "hpc", {"spec": {"replicas": 3}}, NS, subresource="scale")
    await stack.wait_for(
        lambda: set(stack.slurm.partitions["hpc"].nodes) == {"hpc-0", "hpc-1", "hpc-2"},
        timeout=20,
        what="the new node in the partition",
    )
    stack.kube.patch(
        "nodesets", "hpc", {"spec": {"partition": {"config": "MaxTime=UNLIMITED"}}}, NS
    )
    await stack.wait_for(
        lambda: stack.slurm.partitions["hpc"].max_time is None, what="MaxTime back to UNLIMITED"
    )

    # A job in the partition: Slurm refuses to delete it (2075 "Partition is in use"), and
    # the finalizer keeps the NodeSet until the job is done and the partition deleted.
    job = stack.slurm.submit({"partition": "hpc", "tasks": 1, "min_nodes": 1}, external=True)
    stack.kube.delete("nodesets", "hpc", NS)
    await stack.wait_for(
        lambda: stack.slurm.counters["DELETE partition"] >= 2, what="the delete refused, retried"
    )
    assert "hpc" in stack.slurm.partitions
    assert FIN in _meta(stack, "hpc")["finalizers"]
    stack.slurm.complete_job(job)
    await stack.wait_for(lambda: "hpc" not in stack.slurm.partitions, what="partition deleted")
    await stack.wait_for(lambda: _gone(stack, "hpc"), what="NodeSet gone")
    assert await stack.dead_letters() == []


async def test_disabling_deletes_ours_and_another_partition_of_the_name_is_never_touched(
    stack: Stack,
) -> None:
    # The simulator's own "gpu" partition (an administrator's): NodeSet gpu never touches it.
    assert stack.slurm.partitions["gpu"].nodes
    before = list(stack.slurm.partitions["gpu"].nodes)
    stack.kube.create(_nodeset("gpu", 1, {"enabled": True}))
    stack.kube.create(_nodeset("cpu", 1, {"enabled": True}))
    await stack.wait_for(
        lambda: (
            "cpu" in stack.slurm.partitions and stack.slurm.partitions["cpu"].nodes == ["cpu-0"]
        ),
        timeout=20,
        what="partition cpu",
    )
    await stack.wait_for(
        lambda: any(e.get("reason") == "PartitionNotOurs" for e in stack.kube.list("events", NS)),
        what="the Warning on NodeSet gpu",
    )
    assert stack.slurm.partitions["gpu"].nodes == before
    assert "gpu" not in stack.slurm.partition_bodies

    stack.kube.patch("nodesets", "cpu", {"spec": {"partition": {"enabled": False}}}, NS)
    await stack.wait_for(lambda: "cpu" not in stack.slurm.partitions, what="partition cpu deleted")
    await stack.wait_for(
        lambda: (
            FIN not in (_meta(stack, "cpu").get("finalizers") or [])
            and PART not in (_meta(stack, "cpu").get("annotations") or {})
        ),
        what="stamp and finalizer removed",
    )
    stack.kube.delete("nodesets", "gpu", NS)
    await stack.wait_for(lambda: _gone(stack, "gpu"), what="gpu gone")
    assert stack.slurm.partitions["gpu"].nodes == before
    assert await stack.dead_letters() == []
