"""Autoscaling end to end: a wave of pending jobs scales a NodeSet up to its max, the jobs run
on the new nodes, and after the quiet period it scales back to zero — never changing faster
than the cool-down."""

from __future__ import annotations

import itertools

from schemas.actions import ScaleNodeSet
from schemas.events import SlurmJob
from slurmbridge.devtools.testing import Stack
from tests._helpers import create_namespace, nodeset, slurmd_template

NS = "slurm"
P = "autoscale.slurmbridge.dev/"


async def test_a_wave_scales_up_to_max_and_back_to_zero() -> None:
    async with Stack(nodes=4, poll_interval=0.2) as s:
        s.slurm.add_partition("burst")  # the NodeSet's nodes join it as they register
        create_namespace(s, NS)
        annotations = {
            P + "partition": "burst",
            P + "max-replicas": "4",
            P + "cooldown": "1",
            P + "idle-to-zero-after": "2",
        }
        s.kube.create(
            nodeset("burst", NS, annotations=annotations, replicas=0, template=slurmd_template("s"))
        )

        def replicas() -> int:
            return int(s.kube.get("nodesets", "burst", NS)["spec"]["replicas"])

        # A wave of 10 one-node jobs (each fills a 2-CPU node).
        jobs = [
            s.slurm.submit({"partition": "burst", "tasks": 2, "min_nodes": 1}, external=True)
            for _ in range(10)
        ]
        await s.wait_for(lambda: replicas() == 4, timeout=15, what="scaled up to max")

        def running() -> list[int]:
            return [j for j in jobs if s.slurm.job(j).state == ("RUNNING",)]

        await s.wait_for(lambda: len(running()) == 4, timeout=20, what="4 jobs running")
        assert {s.slurm.job(j).nodes[0] for j in running()} == {f"burst-{i}" for i in range(4)}
        # The jobs finish, a few at a time; the set holds while any runs or waits.
        while any(s.slurm.job(j).state[0] in ("PENDING", "RUNNING") for j in jobs):
            for j in running():
                s.slurm.complete_job(j)
            assert replicas() == 4
            await s.wait_for(
                lambda: (
                    all(s.slurm.job(j).state[0] != "PENDING" for j in jobs) or len(running()) > 0
                ),
                timeout=10,
                what="the next jobs start",
            )
        await s.wait_for(lambda: replicas() == 0, timeout=15, what="back to zero when quiet")
        await s.wait_for(
            lambda: not s.kube.list("pods", NS), timeout=15, what="pods drained and deleted"
        )
        assert s.sims.slurmd.removed_busy == []
        await s.settled()
        scales = [r for r in await s.action_records() if isinstance(r.action, ScaleNodeSet)]
        ok = [r for r in scales if r.outcome == "ok"]
        steps = [r.action.replicas for r in ok]  # type: ignore[union-attr]
        # Up (in one step, or two when the wave reached the log over two polls), then 0.
        peak = steps.index(4)
        assert steps[: peak + 1] == sorted(steps[: peak + 1]) and steps[peak + 1 :] == [0], steps
        # Only growth may follow a change within the cool-down (1 s): no oscillation.
        for a, b in itertools.pairwise(ok):
            if b.action.replicas < a.action.replicas:  # type: ignore[union-attr]
                assert (b.at - a.at) / 1e9 >= 1.0, steps


async def test_an_hpa_or_scaledobject_on_the_nodeset_keeps_autoscale_out() -> None:
    async with Stack(nodes=2, poll_interval=0.2) as s:
        s.slurm.add_partition("burst")
        create_namespace(s, NS)
        annotations = {P + "partition": "burst", P + "max-replicas": "3"}
        s.kube.create(
            nodeset("burst", NS, annotations=annotations, replicas=0, template=slurmd_template("s"))
        )
        target = {"apiVersion": "slinky.slurm.net/v1alpha1", "kind": "NodeSet", "name": "burst"}
        s.kube.create(
            {
                "apiVersion": "keda.sh/v1alpha1",
                "kind": "ScaledObject",
                "metadata": {"name": "burst", "namespace": NS},
                "spec": {"scaleTargetRef": target, "triggers": []},
            }
        )
        s.kube.create(
            {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "burst", "namespace": NS},
                "spec": {"scaleTargetRef": target, "minReplicas": 1, "maxReplicas": 3},
            }
        )

        def replicas() -> int:
            return int(s.kube.get("nodesets", "burst", NS)["spec"]["replicas"])

        for _ in range(3):
            s.slurm.submit({"partition": "burst", "tasks": 2, "min_nodes": 1}, external=True)
        await s.wait_for(
            lambda: any(
                j.partition == "burst"
                for j in s.app.projection.values(SlurmJob)  # type: ignore[union-attr]
            ),
            what="the pending jobs in the log",
        )
        await s.settled()
        assert replicas() == 0, "autoscale scaled a NodeSet that KEDA / an HPA owns"
        # One scaler gone is not enough; with both gone, autoscale takes over.
        s.kube.delete("scaledobjects", "burst", NS)
        await s.settled()
        assert replicas() == 0
        s.kube.delete("horizontalpodautoscalers", "burst", NS)
        await s.wait_for(lambda: replicas() == 3, timeout=10, what="autoscale takes over")
