"""Slinky 1.3's rules (issue 28) against real Slurm 26.05 (REST v0.0.45).

1. The ``k8s/`` feature sync keeps a node's inactive features inactive (slurm-operator
   ``internal/controller/nodeset/slurmcontrol/slurmcontrol.go`` ``UpdateNodeFeatures``).
2. Shared gangs on the same nodes never wait for each other: the one that cannot bind has
   its job cancelled and submitted again until the other ends (slurm-bridge 1.3
   ``internal/scheduler/plugins/slurmbridge/eligibility.go``).
3. A gang bigger than the free nodes queues in slurmctld behind our own running job, with no
   node excluded, and starts when that job ends (``eligibility.go``).

Kubernetes is the simulator (``Stack``), Slurm real.

Every test restores the nodes it changed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas import wellknown
from schemas.actions import CancelSlurmJob, SetSlurmNodeOwnedFeatures
from schemas.events import KubeNodeUsage
from slurmbridge.devtools.realslurm_modern import ModernSlurm
from slurmbridge.devtools.sim.kube import ApiError
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Stack
from slurmbridge.effectors.slurm_nodes import SlurmEffector
from slurmbridge.slurm.client import SlurmClient

CLUSTER = "linux"
JOBID = wellknown.LABEL_SLURM_JOBID
NODES = ("n1", "n2", "n3", "n4")


@pytest.fixture
async def stack(modern_slurm: ModernSlurm) -> AsyncIterator[Stack]:
    if modern_slurm.release != "26.05":
        pytest.skip("issue 28 names 26.05")
    async with Stack(nodes=4, real_slurm=modern_slurm, poll_interval=0.2) as s:
        yield s
    modern_slurm.run("scancel", "--user", "root", check=False)
    for node in NODES:
        if "drain" in modern_slurm.node_states().get(node, ""):
            modern_slurm.undrain(node)


def _pod(stack: Stack, name: str) -> dict[str, Any]:
    try:
        return stack.kube.get("pods", name, "default")
    except ApiError:
        return {}


def _phase(stack: Stack, name: str) -> str:
    return str((_pod(stack, name).get("status") or {}).get("phase") or "")


def _node_of(stack: Stack, name: str) -> str:
    return str((_pod(stack, name).get("spec") or {}).get("nodeName") or "")


def _job_of(stack: Stack, name: str) -> str:
    return str((_pod(stack, name).get("metadata", {}).get("labels") or {}).get(JOBID) or "")


def _used(stack: Stack, node: str) -> int:
    assert stack.app is not None
    usage = stack.app.projection.get(KubeNodeUsage, node, "k8s")
    return usage.pods if usage is not None else 0


def _features(slurm: ModernSlurm, node: str) -> tuple[list[str], list[str]]:
    """(available, active) as ``scontrol show node`` prints them."""
    fields = dict(
        f.split("=", 1) for f in slurm.scontrol("-o", "show", "node", node).split() if "=" in f
    )

    def listed(key: str) -> list[str]:
        value = fields.get(key, "(null)")
        return [] if value == "(null)" else sorted(value.split(","))

    return listed("AvailableFeatures"), listed("ActiveFeatures")


async def test_owned_features_keep_a_plugins_inactive_feature_inactive(
    modern_slurm: ModernSlurm,
) -> None:
    """slurmcontrol_test.go "plugin-managed features survive", on slurmctld: ``mig=off``
    available but not active stays inactive while ``k8s/old`` becomes ``k8s/nn-a`` in both
    sets (26.05 accepts the pair: active ⊆ available, errno 2031 otherwise)."""
    if modern_slurm.release != "26.05":
        pytest.skip("issue 28 names 26.05")
    node = "n4"
    before = _features(modern_slurm, node)
    modern_slurm.scontrol(
        "update",
        f"nodename={node}",
        "AvailableFeatures=foo,mig=on,mig=off,k8s/old",
        "ActiveFeatures=foo,mig=on,k8s/old",
    )
    try:
        assert _features(modern_slurm, node) == (
            ["foo", "k8s/old", "mig=off", "mig=on"],
            ["foo", "k8s/old", "mig=on"],
        )
        async with SlurmClient(
            modern_slurm.url, modern_slurm.token_file, modern_slurm.user
        ) as client:
            effector = SlurmEffector({CLUSTER: client})
            action = SetSlurmNodeOwnedFeatures(
                cluster=CLUSTER, node=node, prefix="k8s/", features=("k8s/nn-a",)
            )
            assert (await effector.apply(action)).outcome == "ok"
            assert _features(modern_slurm, node) == (
                ["foo", "k8s/nn-a", "mig=off", "mig=on"],
                ["foo", "k8s/nn-a", "mig=on"],
            )
            assert (await effector.apply(action)).outcome == "noop"
    finally:
        available = ",".join(before[0]) or ""
        active = ",".join(before[1]) or ""
        modern_slurm.scontrol(
            "update",
            f"nodename={node}",
            f"AvailableFeatures={available}",
            f"ActiveFeatures={active}",
        )


async def test_a_gang_bigger_than_the_free_nodes_queues_behind_our_job(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    """Two whole-node pods of ours run on two of the four nodes; a gang of four whole-node
    pods is submitted with no node excluded, waits in slurmctld's queue, and runs on all
    four once our job ends (before: the busy nodes were excluded, so the gang could never
    be placed)."""
    hog = create_group(stack.kube, "Job", "hog", 2, requests={"cpu": "2"})
    await stack.wait_for(
        lambda: all(_node_of(stack, n) for n in hog), timeout=60, what="the hog bound"
    )
    await stack.wait_for(
        lambda: all(_used(stack, _node_of(stack, n)) for n in hog), what="its usage observed"
    )
    gang = create_group(stack.kube, "Job", "gang", 4, requests={"cpu": "2"})
    await stack.wait_for(
        lambda: all(_job_of(stack, n) for n in gang), timeout=60, what="the gang submitted"
    )
    job = _job_of(stack, gang[0])
    shown = modern_slurm.scontrol("-o", "show", "job", job)
    assert "JobState=PENDING" in shown, shown
    assert "ExcNodeList=(null)" in shown, shown
    assert all(not _node_of(stack, n) for n in gang)
    modern_slurm.scancel(_job_of(stack, hog[0]))
    await stack.wait_for(
        lambda: all(_node_of(stack, n) for n in gang), timeout=90, what="the gang bound"
    )
    assert sorted(_node_of(stack, n) for n in gang) == list(NODES)
    assert stack.kube.kubelet is not None and stack.kube.kubelet.rejected == []


async def test_shared_gangs_on_the_same_nodes_both_finish(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    """Every node: 2 Slurm CPUs but 1.5 allocatable CPUs in Kubernetes. slurmctld runs a
    second shared gang of four 1-CPU pods beside the first; Kubernetes fits one pod per
    node, so the second gang's job is cancelled (never left waiting for a live allocation)
    and submitted again until the first gang ends — then it runs, and both finish."""
    for n in NODES:
        stack.kube.patch_merge(
            "nodes", n, {"status": {"allocatable": {"cpu": "1500m"}}}, subresource="status"
        )
    shared = {"slurmjob.slinky.slurm.net/exclusive": "false"}
    a = create_group(
        stack.kube, "Job", "a", 4, requests={"cpu": "1"}, annotations=shared, run_seconds=6
    )
    await stack.wait_for(
        lambda: all(_phase(stack, n) == "Running" for n in a), timeout=60, what="a Running"
    )
    await stack.wait_for(lambda: all(_used(stack, n) for n in NODES), what="a's usage observed")
    b = create_group(
        stack.kube, "Job", "b", 4, requests={"cpu": "1"}, annotations=shared, run_seconds=1
    )
    # b finishes, or — bound in the instant its cancelled job is not yet seen ended — its
    # pods go with that job (a Job controller would re-create them; the simulated
    # Kubernetes has none). Either way nothing waits for ever.
    await stack.wait_for(
        lambda: (
            all(_phase(stack, n) == "Succeeded" for n in a)
            and all(_phase(stack, n) in ("Succeeded", "") for n in b)
        ),
        timeout=120,
        what="both gangs done",
    )
    cancelled = [
        r.action.marker
        for r in await stack.action_records()
        if isinstance(r.action, CancelSlurmJob) and r.outcome == "ok"
    ]
    assert any("default/Job:b" in m for m in cancelled), "b never waited for the live a"
    assert stack.kube.kubelet is not None and stack.kube.kubelet.rejected == []
