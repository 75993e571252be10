"""A NodeSet scale-in on REST v0.0.38 (Slurm 22.05), which cannot drain a node (issue 29
item 8): the drain is recorded ``unsupported`` once, the delete that must wait for that drain
is recorded once (``unsupported``, naming the drain it waits for: the worker then never sends
it again), and later reconciles of the NodeSet record nothing more — not a ``skipped`` record
at every reconcile, without end, into a stream kept 30 days."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas.actions import DeleteNodeSetPod, DrainSlurmNode
from slurmbridge.devtools.testing import Stack
from tests._helpers import create_slurmd_nodeset, slurmd_template

NS = "slurm"


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=4, poll_interval=0.2, api_version="v0.0.38") as s:
        create_slurmd_nodeset(s, NS, replicas=2, template=slurmd_template("slurmd:22.05"))
        yield s


def running(stack: Stack) -> set[str]:
    return {
        p["metadata"]["name"]
        for p in stack.kube.list("pods", NS)
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    }


async def test_a_scale_in_that_cannot_drain_records_once_and_backs_off(stack: Stack) -> None:
    want = {"gpu-0", "gpu-1"}
    await stack.wait_for(lambda: running(stack) == want, timeout=30, what="2 slurmd pods")
    await stack.wait_for(lambda: want <= set(stack.slurm.nodes), what="2 Slurm nodes")
    stack.kube.patch("nodesets", "gpu", {"spec": {"replicas": 1}}, NS, subresource="scale")

    async def records() -> list[Any]:
        return [
            r
            for r in await stack.action_records()
            if isinstance(r.action, DrainSlurmNode | DeleteNodeSetPod) and r.outcome != "intended"
        ]

    deadline = asyncio.get_running_loop().time() + 30
    while not any(isinstance(r.action, DeleteNodeSetPod) for r in await records()):
        assert asyncio.get_running_loop().time() < deadline, "the scale-in's delete recorded"
        await asyncio.sleep(0.1)
    await stack.settled()
    # More reconciles of the NodeSet: each would decide the same drain and delete again.
    for i in range(5):
        stack.kube.patch_merge("nodesets", "gpu", {"metadata": {"labels": {"try": str(i)}}}, NS)
        await stack.settled()
    got = sorted((type(r.action).__name__, r.outcome) for r in await records())
    assert got == [("DeleteNodeSetPod", "unsupported"), ("DrainSlurmNode", "unsupported")], got
    (delete,) = [r for r in await records() if isinstance(r.action, DeleteNodeSetPod)]
    assert "v0.0.38" in delete.error and "not drained" in delete.error
    assert running(stack) == want  # nothing deleted without its drain
