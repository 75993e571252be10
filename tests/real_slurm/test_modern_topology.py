"""An external node's topology on real Slurm 26.05 with a ``topology.yaml`` (issue 18, 11).

Slinky's node controller sets ``Topology=`` when it registers a node and keeps it in step
with the annotation ``topology.slinky.slurm.net/spec`` afterwards (``updateNodeTopology``).
The cluster here has topology ``topo1`` with blocks ``b1`` (n1) and ``b2`` (n2): without such
a file Slurm refuses every node topology with 2178.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from schemas import wellknown
from slurmbridge.devtools.realslurm_modern import ModernSlurm
from slurmbridge.devtools.testing import Stack
from tests.real_slurm.conftest import modern_cluster

TOPO = wellknown.ANNOTATION_TOPOLOGY_SPEC


@pytest.fixture(scope="module")
def slurm_topology(real_slurm_available: None) -> Iterator[ModernSlurm]:
    yield from modern_cluster("26.05", topology="block")


@pytest.fixture
async def stack(slurm_topology: ModernSlurm) -> AsyncIterator[Stack]:
    async with Stack(nodes=4, real_slurm=slurm_topology, poll_interval=0.2) as s:
        yield s


def _topology(slurm: ModernSlurm, node: str) -> str | None:
    """``Topology=`` of ``scontrol show node`` (None: no such node)."""
    out = slurm.run("scontrol", "-o", "show", "node", node, check=False).stdout
    if f"NodeName={node} " not in out:
        return None
    for word in out.split():
        if word.startswith("Topology="):
            return word.removeprefix("Topology=")
    return ""


async def test_an_external_nodes_topology_is_set_moved_and_cleared_in_place(
    stack: Stack, slurm_topology: ModernSlurm
) -> None:
    ext = {wellknown.LABEL_EXTERNAL_NODE: "true"}
    parts = {wellknown.ANNOTATION_EXTERNAL_NODE_PARTITIONS: "batch", TOPO: "topo1:b1"}
    stack.kube.add_node("ext-t", cpu="2", memory="1000Mi", labels=ext, annotations=parts)
    await stack.wait_for(
        lambda: _topology(slurm_topology, "ext-t") == "topo1:b1", timeout=30, what="created in b1"
    )
    stack.kube.patch_merge("nodes", "ext-t", {"metadata": {"annotations": {TOPO: "topo1:b2"}}})
    await stack.wait_for(
        lambda: _topology(slurm_topology, "ext-t") == "topo1:b2", timeout=30, what="moved to b2"
    )
    blocks = slurm_topology.run("scontrol", "show", "topology").stdout
    assert any(line.startswith("BlockName=b2") and "ext-t" in line for line in blocks.splitlines())
    stack.kube.patch_merge("nodes", "ext-t", {"metadata": {"annotations": {TOPO: None}}})
    await stack.wait_for(
        lambda: _topology(slurm_topology, "ext-t") in ("", "(null)"), timeout=30, what="cleared"
    )
    await stack.settled()
    records = [
        (type(r.action).__name__, r.outcome)
        for r in await stack.action_records()
        if r.key == "ext-t" and type(r.action).__name__ != "RecordEvent"
    ]
    # In place: created once, never drained or deleted, two topology updates.
    assert [a for a, o in records if o == "ok"].count("CreateSlurmNode") == 1
    assert not any(a in ("DrainSlurmNode", "DeleteSlurmNode") for a, _ in records)
    assert [a for a, o in records if o == "ok"].count("UpdateSlurmNodeTopology") == 2
    assert await stack.dead_letters() == []
    stack.kube.patch_merge(
        "nodes", "ext-t", {"metadata": {"labels": {wellknown.LABEL_EXTERNAL_NODE: None}}}
    )
    await stack.wait_for(
        lambda: _topology(slurm_topology, "ext-t") is None, timeout=60, what="deleted"
    )
