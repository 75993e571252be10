"""The Kubernetes watchers: resume, 410 ⇒ re-list with tombstones, broken streams, paged lists."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from producers.kube.watch import WORKLOAD_KINDS, PodWatcher, WorkloadWatcher
from schemas.events import Event, KubeListed, KubeNode, KubePod, KubeWorkload
from schemas.wellknown import DEFAULT_SCHEDULER_NAME as SCHEDULER
from slurmbridge.config import KubeSettings
from slurmbridge.devtools.sim.kube import DEFAULT_RESOURCES, KubeSim
from slurmbridge.devtools.testing import Stack, wait_until
from slurmbridge.kube import client as kube
from slurmbridge.kube.cache import PodCache
from slurmbridge.kube.watch import PublishLost


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=3, poll_interval=0.2, components=("kube-watcher",)) as s:
        yield s


def _kube(stack: Stack, name: str) -> KubeNode | None:
    assert stack.app is not None
    return stack.app.projection.get(KubeNode, name)


async def test_broken_stream_resumes_without_relist(stack: Stack) -> None:
    assert stack.app is not None
    watcher = stack.app.watcher
    assert watcher is not None
    await stack.wait_for(lambda: _kube(stack, "n3") is not None, what="n3 observed")
    await stack.wait_for(lambda: watcher.watching, what="node watch open")
    relists = watcher.relists
    assert stack.kube.drop_watches(abort=True) >= 1
    stack.cordon("n2")
    await stack.wait_for(
        lambda: (n := _kube(stack, "n2")) is not None and n.unschedulable,
        what="cordon after the stream broke",
    )
    assert watcher.relists == relists  # resumed from its resourceVersion


async def test_expired_watch_relists_and_tombstones_what_vanished(stack: Stack) -> None:
    assert stack.app is not None
    watcher = stack.app.watcher
    assert watcher is not None
    await stack.wait_for(lambda: _kube(stack, "n3") is not None, what="n3 observed")
    relists = watcher.relists
    # Keep the watcher away while n3 is deleted and the history is compacted, so that the
    # DELETED event is gone and only a re-list can notice.
    stack.kube.fail_next(3, 503, verb="watch", resource="nodes")
    stack.kube.drop_watches(abort=True)
    stack.kube.delete("nodes", "n3")
    stack.kube.add_node("n9", cpu="2", memory="1000Mi")
    stack.kube.compact()
    await stack.wait_for(lambda: _kube(stack, "n3") is None, timeout=20, what="n3 tombstoned")
    await stack.wait_for(lambda: _kube(stack, "n9") is not None, what="n9 observed")
    assert watcher.relists > relists
    assert _kube(stack, "n1") is not None


async def test_a_relist_reads_pages_and_tombstones_what_no_page_held(tmp_path: Path) -> None:
    """A list in pages of ``list_page_size`` (limit/continue) across namespaces whose
    storage order is not (namespace, name) order: every pod once, one snapshot, then
    tombstones only for what no page held."""
    async with KubeSim() as sim:
        for ns in ("a", "a-b"):
            sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            for name in ("p1", "p2", "p3"):
                sim.add_pod(name, ns, scheduler_name=SCHEDULER)
        sim.add_pod("other", "a", scheduler_name="default-scheduler")
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        api = await kube.api_client(KubeSettings(kubeconfig=str(kubeconfig)))
        published: list[Event] = []

        async def publish(batch: list[tuple[Event, str]]) -> None:
            published.extend(ev for ev, _ in batch)

        try:
            gone = KubePod(
                source="k8s",
                key="a/vanished",
                uid="u-gone",
                name="vanished",
                scheduler_name=SCHEDULER,
            )
            watcher = PodWatcher(
                api,
                publish,
                producer="test",
                seed={gone.key: gone},
                scheduler_name=SCHEDULER,
            )
            watcher.list_page_size = 2
            lists = sim.requests[("list", "pods")]
            await watcher.relist()
        finally:
            await api.close()
    assert sim.requests[("list", "pods")] - lists == 3  # 6 pods, 2 a page
    # Last: the list is complete in the log (issue 18, 1).
    assert isinstance(published[-1], KubeListed)
    assert (published[-1].key, published[-1].version) == ("pods", watcher.resource_version)
    published = published[:-1]
    observed = [ev.key for ev in published if ev.op != "deleted"]
    assert sorted(observed) == sorted(f"{ns}/p{i}" for ns in ("a", "a-b") for i in (1, 2, 3))
    assert [ev.key for ev in published if ev.op == "deleted"] == ["a/vanished"]
    assert len({ev.version for ev in published if ev.op == "deleted"}) == 1
    assert watcher.resource_version
    assert set(watcher.last) == set(observed)


async def test_a_relist_whose_publish_failed_republishes_everything(tmp_path: Path) -> None:
    """A failed publish may have been stored (its acknowledgement lost): the next list
    republishes every object, not only those that differ from what was acknowledged — one
    may have reverted to exactly that meanwhile, and the log would keep the other state."""
    async with KubeSim() as sim:
        sim.add_pod("p1", "default", scheduler_name=SCHEDULER)
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        api = await kube.api_client(KubeSettings(kubeconfig=str(kubeconfig)))
        log: list[KubePod] = []
        lose = [False]

        async def publish(batch: list[tuple[Event, str]]) -> None:
            log.extend(ev for ev, _ in batch if isinstance(ev, KubePod))  # stored ...
            if lose[0]:
                lose[0] = False
                raise TimeoutError("nats: timeout")  # ... but not acknowledged

        try:
            watcher = PodWatcher(api, publish, producer="test", seed={}, scheduler_name=SCHEDULER)
            await watcher.relist()
            sim.patch("pods", "p1", {"metadata": {"labels": {"x": "1"}}}, "default")
            lose[0] = True
            with pytest.raises(TimeoutError):
                await watcher.relist()
            assert log[-1].labels.get("x") == "1"  # in the log, unacknowledged
            sim.patch("pods", "p1", {"metadata": {"labels": {"x": None}}}, "default")
            await watcher.relist()  # back to what was acknowledged: published all the same
        finally:
            await api.close()
    assert "x" not in log[-1].labels
    assert len(log) == 3


async def test_a_tombstone_whose_publish_failed_is_sent_again_by_the_relist(
    tmp_path: Path,
) -> None:
    """A watch event's tombstone leaves the watcher's memory when it is sent; if its publish
    then fails, the relist that follows must still tombstone the object (the log may hold it
    live: the chaos test's phantom slurmd pod)."""
    async with KubeSim() as sim:
        sim.add_pod("p1", "default", scheduler_name=SCHEDULER)
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        api = await kube.api_client(KubeSettings(kubeconfig=str(kubeconfig)))
        log: list[KubePod] = []

        async def publish(batch: list[tuple[Event, str]]) -> None:
            log.extend(ev for ev, _ in batch if isinstance(ev, KubePod))

        async def send(ev: Event, msg_id: str) -> asyncio.Future[Any]:
            del msg_id
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            if ev.op == "deleted":
                fut.set_exception(TimeoutError("nats: timeout"))  # not stored
            else:
                log.append(ev)  # type: ignore[arg-type]
                fut.set_result(None)
            return fut

        try:
            watcher = PodWatcher(
                api, publish, producer="test", seed={}, scheduler_name=SCHEDULER, send=send
            )
            await watcher.relist()
            watching = asyncio.ensure_future(watcher.watch_once())
            await wait_until(lambda: watcher.watching, timeout=10)
            sim.delete_pod("p1", "default", grace_period_seconds=0)
            with pytest.raises(PublishLost):
                await asyncio.wait_for(watching, 10)
            assert "default/p1" in watcher.unacked_tombstones
            await watcher.relist()
        finally:
            await api.close()
    assert [(ev.key, ev.op) for ev in log] == [
        ("default/p1", "observed"),
        ("default/p1", "deleted"),
    ]
    assert not watcher.unacked_tombstones


async def test_a_kind_not_served_is_listed_empty_once_and_objects_seen_are_kept(
    tmp_path: Path,
) -> None:
    """Issue 18 (8): a 404 for the PodGroup CRD means no PodGroup exists, so pods naming one
    are placed from their owner: the watcher publishes an empty ``KubeListed`` once. Objects
    seen before are not tombstoned: a starting API server answers 404 for CRDs until it
    serves them."""
    served = [r for r in DEFAULT_RESOURCES if r.plural != "podgroups"]
    async with KubeSim(resources=served) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        api = await kube.api_client(KubeSettings(kubeconfig=str(kubeconfig)))
        published: list[Event] = []

        async def publish(batch: list[tuple[Event, str]]) -> None:
            published.extend(ev for ev, _ in batch)

        podgroups = next(k for k in WORKLOAD_KINDS if k[3] == "podgroups")
        calls = [0]

        def counted(watcher: WorkloadWatcher) -> WorkloadWatcher:
            call = watcher._call

            async def counting(**kwargs: Any) -> Any:
                calls[0] += 1
                return await call(**kwargs)

            watcher._call = counting  # type: ignore[method-assign]
            watcher.missing_retry = 0.05
            return watcher

        seen = KubeWorkload(
            source="k8s", key="ns/PodGroup:g", name="g", namespace="ns", workload_kind="PodGroup"
        )
        try:
            for seed in ({}, {seen.key: seen}):
                watcher = counted(
                    WorkloadWatcher(api, publish, producer="test", kind=podgroups, seed=seed)
                )
                calls[0] = 0
                task = asyncio.create_task(watcher.run())
                await wait_until(lambda: calls[0] >= 3, what="three lists answered 404")
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        finally:
            await api.close()
    assert len(published) == 1
    marker = published[0]
    assert isinstance(marker, KubeListed)
    assert (marker.resource, marker.version) == ("podgroups", "")


async def test_the_pod_watcher_keeps_the_pod_cache_as_the_api_server_has_it(
    tmp_path: Path,
) -> None:
    """The pod writes start from the pod watch's copies (slurmbridge.kube.cache): a list and
    each watch event put the pod in, a deletion takes it out, a relist starts afresh (a pod
    deleted while the watch was down must not stay), and a stopped watcher leaves nothing."""
    async with KubeSim() as sim:
        sim.add_pod("p1", "default", scheduler_name=SCHEDULER)
        sim.add_pod("p2", "default", scheduler_name=SCHEDULER)
        sim.add_pod("other", "default", scheduler_name="default-scheduler")
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        api = await kube.api_client(KubeSettings(kubeconfig=str(kubeconfig)))
        cache = PodCache()

        async def publish(batch: list[tuple[Event, str]]) -> None:
            del batch

        def version(name: str) -> str:
            raw = cache.get("default", name)
            return raw.metadata.resourceVersion if raw is not None else ""

        def current(name: str) -> str:
            return str(sim.get("pods", name, "default")["metadata"]["resourceVersion"])

        watcher = PodWatcher(
            api, publish, producer="test", seed={}, scheduler_name=SCHEDULER, pod_cache=cache
        )
        try:
            await watcher.relist()
            assert len(cache) == 2
            assert version("p1") == current("p1")
            assert cache.get("default", "other") is None
            task = asyncio.create_task(watcher.run())
            await wait_until(lambda: watcher.watching, what="pod watch open")
            sim.patch("pods", "p1", {"metadata": {"labels": {"x": "1"}}}, "default")
            await wait_until(lambda: version("p1") == current("p1"), what="p1's new copy")
            sim.delete_pod("p2", "default", grace_period_seconds=0)
            await wait_until(lambda: cache.get("default", "p2") is None, what="p2 dropped")
            # A deletion the watch never delivers: the relist must not keep p1.
            sim.fail_next(3, 503, verb="watch", resource="pods")
            sim.drop_watches(abort=True)
            sim.delete_pod("p1", "default", grace_period_seconds=0)
            sim.compact()
            relists = watcher.relists
            await wait_until(lambda: watcher.relists > relists, timeout=20, what="relist")
            await wait_until(lambda: len(cache) == 0, what="p1 gone from the cache")
            sim.add_pod("p3", "default", scheduler_name=SCHEDULER)
            await wait_until(lambda: len(cache) == 1, what="p3 cached")
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            assert len(cache) == 0
        finally:
            await api.close()
