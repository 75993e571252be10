"""The per-node usage watcher (``NodeUsageWatcher``): what every assigned, non-terminal pod
requests, summed per node — relisted in pages, then kept up to date by the watch, with a
tombstone for a node left without pods."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from producers.kube.watch import RESOURCES, NodeUsageWatcher
from schemas import wellknown
from schemas.events import Event, HostPort, KubeListed, KubeNodeUsage, PeerPod
from slurmbridge.config import KubeSettings
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.devtools.testing import wait_until
from slurmbridge.kube import client as kube

GI = 1024**3


def usage(published: list[Event]) -> dict[str, tuple[int, int, int] | None]:
    """The last published totals per node (None: tombstoned)."""
    out: dict[str, tuple[int, int, int] | None] = {}
    for ev in published:
        if isinstance(ev, KubeNodeUsage):
            out[ev.key] = None if ev.deleted else (ev.cpu_millis, ev.memory_bytes, ev.pods)
    return out


async def test_usage_is_summed_per_node_relisted_and_followed(tmp_path: Path) -> None:
    async with KubeSim() as sim:
        for n in ("n1", "n2", "n3"):
            sim.add_node(n)
        sim.add_pod("a", node_name="n1", requests={"cpu": "500m", "memory": "1Gi"})
        sim.add_pod("b", node_name="n1", requests={"cpu": "1", "memory": "1Gi"})
        sim.add_pod("c", node_name="n2", requests={"cpu": "2"})
        sim.add_pod("unbound", requests={"cpu": "3"})  # not on a node: not counted
        sim.add_pod("done", node_name="n3", phase="Succeeded", requests={"cpu": "3"})
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        api = await kube.api_client(KubeSettings(kubeconfig=str(kubeconfig)))
        published: list[Event] = []

        async def publish(batch: list[tuple[Event, str]]) -> None:
            published.extend(ev for ev, _ in batch)

        stale = KubeNodeUsage(source="k8s", key="gone", cpu_millis=5, pods=1)
        same = KubeNodeUsage(
            source="k8s", key="n2", cpu_millis=2000, pods=1, peers=(PeerPod(namespace="default"),)
        )
        watcher = NodeUsageWatcher(api, publish, producer="test", seed={"gone": stale, "n2": same})
        watcher.list_page_size = 2
        task = asyncio.create_task(watcher.run())
        try:
            await wait_until(lambda: watcher.listed.is_set(), what="listed")
            # The list: n1's two pods summed; n2 as already published (not again); the node
            # with nothing left tombstoned; the marker last.
            assert usage(published) == {"n1": (1500, 2 * GI, 2), "gone": None}
            assert isinstance(published[-1], KubeListed)
            assert published[-1].key == "node-usage"
            assert sim.requests[("list", "pods")] == 2  # 3 counted pods, 2 a page
            await wait_until(lambda: watcher.watching, what="watching")

            sim.add_pod("d", node_name="n3", requests={"cpu": "250m"})
            await wait_until(lambda: "n3" in usage(published), what="n3 counted")
            assert usage(published)["n3"] == (250, 0, 1)

            # A pod that finishes leaves the selector (DELETED): its node's total drops.
            sim.patch_merge("pods", "b", {"status": {"phase": "Succeeded"}}, subresource="status")
            await wait_until(lambda: usage(published)["n1"] == (500, GI, 1), what="n1 without b")
            # The last pod of a node goes: a tombstone, which reads as zero.
            before = len(published)
            sim.delete("pods", "c", "default")
            await wait_until(lambda: usage(published).get("n2", 0) is None, what="n2 tombstoned")
            assert len(published) == before + 1
            # A change that leaves the requests alone publishes nothing.
            # (A label is read: InterPodAffinity selects pods by their labels.)
            sim.patch_merge("pods", "a", {"metadata": {"annotations": {"x": "y"}}})
            sim.add_pod("e", node_name="n3", requests={"cpu": "1"})
            await wait_until(lambda: usage(published)["n3"] == (1250, 0, 2), what="n3 grows")
            assert [ev.key for ev in published[before + 1 :]] == ["n3"]
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await api.close()


def test_the_usage_watcher_runs_only_while_pods_are_watched() -> None:
    entry = next(r for r in RESOURCES if r.watcher is NodeUsageWatcher)
    assert entry.observes is KubeNodeUsage
    assert getattr(KubeSettings(), entry.switch) is True
    assert getattr(KubeSettings(watch_pods=False), entry.switch) is False
    assert getattr(KubeSettings(watch_node_usage=False), entry.switch) is False


async def test_our_allocations_extended_resources_and_host_ports(tmp_path: Path) -> None:
    """Issue 28 items 3 and 4: per node, what pods of our Slurm allocations (our scheduler
    and a positive slurm-jobid label) request is published apart (``bridge_*``), with every
    extended resource and the host ports of every counted pod."""
    jobid = wellknown.LABEL_SLURM_JOBID
    async with KubeSim() as sim:
        sim.add_node("n1", gpus=8)
        ours = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "8"}
        sim.add_pod("ours", node_name="n1", scheduler_name="sb", labels={jobid: "7"}, requests=ours)
        sim.add_pod("unlabelled", node_name="n1", scheduler_name="sb", requests={"cpu": "1"})
        sim.add_pod("other", node_name="n1", labels={jobid: "7"}, requests={"cpu": "2"})
        web = sim.add_pod("web", node_name="n1")
        web["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        sim.delete("pods", "web", "default")
        sim.create({**web, "metadata": {"name": "web", "namespace": "default"}, "status": {}})
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        api = await kube.api_client(KubeSettings(kubeconfig=str(kubeconfig)))
        published: list[Event] = []

        async def publish(batch: list[tuple[Event, str]]) -> None:
            published.extend(ev for ev, _ in batch)

        watcher = NodeUsageWatcher(api, publish, producer="test", seed={}, scheduler_name="sb")
        task = asyncio.create_task(watcher.run())
        try:
            await wait_until(lambda: watcher.listed.is_set(), what="listed")
            (n1,) = [e for e in published if isinstance(e, KubeNodeUsage)]
            assert (n1.cpu_millis, n1.pods, n1.extended) == (4000, 4, {"nvidia.com/gpu": 8})
            assert (n1.bridge_cpu_millis, n1.bridge_memory_bytes, n1.bridge_pods) == (1000, GI, 1)
            assert n1.bridge_extended == {"nvidia.com/gpu": 8}
            assert n1.host_ports == (HostPort(port=8080),)
            # Who runs there, for InterPodAffinity.
            assert sorted(p.labels.get(jobid, "") for p in n1.peers) == ["", "", "7", "7"]
            # The label removed: the pod is no longer Slurm's.
            await wait_until(lambda: watcher.watching, what="watching")
            sim.patch_merge("pods", "ours", {"metadata": {"labels": {jobid: None}}})
            await wait_until(
                lambda: [e for e in published if isinstance(e, KubeNodeUsage)][-1].bridge_pods == 0,
                what="bridge usage gone",
            )
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await api.close()
