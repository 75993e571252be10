"""ScheduledUpdate end to end in the simulators (reconcilers.nodeset rules 11-12;
slurm-operator nodeset_sync.go ``syncSlurmReservation`` / ``syncScheduledUpdate``): the
NodeSet's MAINT reservation is created over REST on its nodes, a template change replaces
no pod before the window opens and every pod inside it, and switching the strategy away
deletes the reservation."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas import wellknown
from schemas.actions import DeleteNodeSetPod, EnsureSlurmReservation
from slurmbridge.devtools.testing import Stack
from tests._helpers import create_namespace, slurmd_template

pytestmark = pytest.mark.integration

NS = "slurm"
NAME = "SlurmOperatorMaint-gpu"
WINDOW_IN_S = 4


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=4, poll_interval=0.2) as s:
        create_namespace(s, NS)
        yield s


def _pods(stack: Stack) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["name"]: p
        for p in stack.kube.list("pods", NS)
        if not p["metadata"].get("deletionTimestamp")
    }


def _running(stack: Stack) -> set[str]:
    return {n for n, p in _pods(stack).items() if (p.get("status") or {}).get("phase") == "Running"}


def _revisions(stack: Stack) -> set[str]:
    return {
        str(p["metadata"]["labels"].get(wellknown.LABEL_REVISION_HASH, ""))
        for p in _pods(stack).values()
    }


async def test_scheduled_update_reserves_the_nodes_and_replaces_pods_inside_the_window(
    stack: Stack,
) -> None:
    start = int(time.time()) + WINDOW_IN_S
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))
    stack.kube.create(
        {
            "apiVersion": "slinky.slurm.net/v1beta1",
            "kind": "NodeSet",
            "metadata": {"name": "gpu", "namespace": NS},
            "spec": {
                "replicas": 2,
                "template": slurmd_template("slurmd:25.05"),
                "updateStrategy": {
                    "type": "ScheduledUpdate",
                    "scheduledUpdate": {"startTime": stamp, "duration": "30m", "flags": ["daily"]},
                },
            },
        }
    )
    both = {"gpu-0", "gpu-1"}
    await stack.wait_for(
        lambda: _running(stack) == both and both <= set(stack.slurm.nodes),
        timeout=20,
        what="2 slurmd pods Running and in Slurm",
    )
    # Scale-out is a slow start (gpu-0, then gpu-1): the reservation may first hold gpu-0
    # alone, and is updated to the NodeSet's nodes as they register.
    await stack.wait_for(
        lambda: (
            NAME in stack.slurm.reservations and set(stack.slurm.reservations[NAME].nodes) == both
        ),
        what="the reservation on both nodes",
    )
    res = stack.slurm.reservations[NAME]
    assert res.start == start and res.end == start + 1800
    assert set(res.flags) == {"DAILY", "IGNORE_JOBS", "MAINT"}
    assert res.users == ("root",)
    (first,) = _revisions(stack)

    stack.kube.patch("nodesets", "gpu", {"spec": {"template": slurmd_template("slurmd:25.11")}}, NS)
    await stack.wait_for(
        lambda: _running(stack) == both and first not in _revisions(stack),
        timeout=WINDOW_IN_S + 30,
        what="both pods replaced inside the window",
    )
    assert stack.sims.slurmd.removed_busy == []
    # A delete's outcome record is stored after the effect: read them once the workers are idle.
    await stack.settled()
    deletes = [
        r
        for r in await stack.action_records()
        if isinstance(r.action, DeleteNodeSetPod) and r.outcome == "ok"
    ]
    assert {r.action.pod.name for r in deletes} == both
    assert all(r.at >= start * 10**9 for r in deletes), "a pod was replaced before the window"
    ensured = [
        r for r in await stack.action_records() if isinstance(r.action, EnsureSlurmReservation)
    ]
    # The stamp and finalizer are written with the NodeSet's resourceVersion: a status write
    # in between is a 409, retried (outcome "retry"), never a failure.
    assert any(r.outcome == "ok" for r in ensured), ensured
    assert {r.outcome for r in ensured} <= {"ok", "retry", "noop"}, ensured

    stack.kube.patch("nodesets", "gpu", {"spec": {"updateStrategy": {"type": "RollingUpdate"}}}, NS)
    await stack.wait_for(lambda: NAME not in stack.slurm.reservations, what="reservation deleted")
    await stack.wait_for(
        lambda: (
            wellknown.ANNOTATION_NODESET_RESERVATION
            not in (stack.kube.get("nodesets", "gpu", NS)["metadata"].get("annotations") or {})
        ),
        what="the stamp removed",
    )
    assert await stack.dead_letters() == []
