"""External nodes end to end: labelled Kubernetes nodes registered in the slurmrestd simulator."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from schemas import wellknown
from schemas.actions import DrainSlurmNode, UndrainSlurmNode
from slurmbridge.devtools.testing import Stack
from slurmbridge.slurm.errors import SlurmError

EXT = {wellknown.LABEL_EXTERNAL_NODE: "true"}
PARTS = wellknown.ANNOTATION_EXTERNAL_NODE_PARTITIONS


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=2, poll_interval=0.1) as s:
        yield s


def exists(stack: Stack, name: str) -> bool:
    try:
        stack.slurm_node(name)
    except (KeyError, SlurmError, LookupError):
        return False
    return True


def condition(stack: Stack, node: str) -> dict[str, str] | None:
    conds = stack.kube_node(node).get("status", {}).get("conditions") or []
    return next((c for c in conds if c["type"] == wellknown.CONDITION_SLURM_REGISTERED), None)


def events_for(stack: Stack, node: str) -> list[dict[str, str]]:
    return [e for e in stack.kube.list("events", "default") if e["involvedObject"]["name"] == node]


async def test_labelled_node_is_registered_with_its_partitions(stack: Stack) -> None:
    stack.kube.add_node(
        "ext-1", cpu="8", memory="16Gi", gpus=2, labels=EXT, annotations={PARTS: "batch, gpu"}
    )
    await stack.wait_for(lambda: exists(stack, "ext-1"), what="ext-1 in Slurm")
    node = stack.slurm_node("ext-1")
    assert node.has("EXTERNAL")
    assert (node.cpus, node.real_memory, node.gres) == (8, 16384, "gpu:2")
    # Slinky 1.3 AddNode: the GRES-compatibility feature beside the partitions.
    assert sorted(node.features) == ["batch", "gpu", "slurm_bridge_gres_compatible"]
    await stack.wait_for(
        lambda: (c := condition(stack, "ext-1")) is not None and c["status"] == "True",
        what="condition True",
    )
    assert node.partitions == ("batch", "gpu")
    # Only the partitions change. Slurm does not move a dynamic node between partitions on a
    # feature update (the simulator follows Slurm 26.05.5), so the node is re-registered:
    # drained, deleted and created again with the new features.
    stack.kube.patch_merge("nodes", "ext-1", {"metadata": {"annotations": {PARTS: "batch"}}})
    await stack.wait_for(
        lambda: (
            exists(stack, "ext-1")
            and (stack.slurm_node("ext-1").features, stack.slurm_node("ext-1").partitions)
            == (("slurm_bridge_gres_compatible", "batch"), ("batch",))
        ),
        what="ext-1 re-registered in batch only",
    )
    await stack.settled()
    recs = [r for r in await stack.action_records() if r.key == "ext-1"]
    kinds = [type(r.action).__name__ for r in recs]
    assert (kinds.count("CreateSlurmNode"), kinds.count("DeleteSlurmNode")) == (2, 1), kinds
    assert sum(isinstance(r.action, DrainSlurmNode) for r in recs) == 1
    assert not stack.slurm_node("ext-1").has("DRAIN")


async def test_missing_partition_blocks_registration_until_it_exists(stack: Stack) -> None:
    stack.kube.add_node("ext-2", cpu="4", memory="8Gi", labels=EXT, annotations={PARTS: "batch,ml"})
    await stack.wait_for(
        lambda: (c := condition(stack, "ext-2")) is not None and c["reason"] == "PartitionNotFound",
        what="condition False",
    )
    assert "ml" in (condition(stack, "ext-2") or {})["message"]
    await stack.wait_for(
        lambda: any(
            e["reason"] == "PartitionNotFound" and e["type"] == "Warning"
            for e in events_for(stack, "ext-2")
        ),
        what="Warning event",
    )
    assert not exists(stack, "ext-2")
    stack.slurm.add_partition("ml", nodes=())
    await stack.wait_for(lambda: exists(stack, "ext-2"), what="registered once ml exists")


async def test_resized_node_is_drained_deleted_and_recreated(stack: Stack) -> None:
    stack.kube.add_node("ext-3", cpu="4", memory="8Gi", labels=EXT, annotations={PARTS: "batch"})
    await stack.wait_for(lambda: exists(stack, "ext-3"), what="ext-3 registered")
    stack.kube.patch_merge(
        "nodes", "ext-3", {"status": {"capacity": {"cpu": "8"}}}, subresource="status"
    )
    await stack.wait_for(
        lambda: exists(stack, "ext-3") and stack.slurm_node("ext-3").cpus == 8,
        timeout=20,
        what="re-registered with 8 CPUs",
    )
    node = stack.slurm_node("ext-3")
    assert not node.has("DRAIN")


async def test_busy_node_unlabelled_drains_once_never_undrains_deletes_after_jobs(
    stack: Stack,
) -> None:
    stack.kube.add_node("ext-4", cpu="4", memory="8Gi", labels=EXT, annotations={PARTS: "batch"})
    await stack.wait_for(lambda: exists(stack, "ext-4"), what="ext-4 registered")
    stack.slurm.allocate("ext-4", cpus=4)
    await stack.settled()
    stack.kube.patch_merge(
        "nodes", "ext-4", {"metadata": {"labels": {wellknown.LABEL_EXTERNAL_NODE: None}}}
    )
    await stack.wait_for(lambda: stack.slurm_node("ext-4").has("DRAIN"), what="ext-4 draining")
    assert stack.app is not None
    poller = stack.app.poller
    assert poller is not None
    polls = poller.polls
    await stack.wait_for(lambda: poller.polls >= polls + 5, what="several polls while busy")
    await stack.settled()
    assert exists(stack, "ext-4")  # never deleted while a job runs
    stack.slurm.release("ext-4")
    await stack.wait_for(lambda: not exists(stack, "ext-4"), what="ext-4 deleted")
    await stack.settled()
    recs = [r for r in await stack.action_records() if r.key == "ext-4"]
    drains = [r for r in recs if isinstance(r.action, DrainSlurmNode) and r.outcome == "ok"]
    assert len(drains) == 1
    assert not any(isinstance(r.action, UndrainSlurmNode) for r in recs)


async def test_old_api_is_unsupported_recorded_once_with_an_event() -> None:
    async with Stack(nodes=1, api_version="v0.0.42", poll_interval=0.1) as stack:
        stack.kube.add_node(
            "ext-5", cpu="4", memory="8Gi", labels=EXT, annotations={PARTS: "batch"}
        )
        await stack.settled()
        for i in range(3):
            stack.kube.patch_merge("nodes", "ext-5", {"metadata": {"labels": {"try": str(i)}}})
            await stack.settled()
        recs = [r for r in await stack.action_records() if r.key == "ext-5"]
        creates = [r for r in recs if type(r.action).__name__ == "CreateSlurmNode"]
        assert [r.outcome for r in creates] == ["unsupported"]
        warnings = [e for e in events_for(stack, "ext-5") if e["reason"] == "SlurmNodeUnsupported"]
        assert len(warnings) == 1
        assert await stack.dead_letters() == []
