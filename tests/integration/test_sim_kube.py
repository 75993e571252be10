"""The Kubernetes API simulator, driven over HTTP by kubernetes_asyncio (the real client).

Each test gets its own simulator on a free port and a kubeconfig in a temp dir. Nothing sleeps
for a fixed time: tests wait on conditions (an event arriving, a watch being open) with
timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from slurmbridge.devtools.sim.kube import ApiError, Change, KubeSim

pytestmark = pytest.mark.integration

SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
GROUP, VERSION = "slinky.slurm.net", "v1alpha1"

MANAGED = {"key": "slinky.slurm.net/managed-node", "value": "sched", "effect": "NoExecute"}
OTHER = {"key": "example.com/other", "value": "x", "effect": "NoSchedule"}


@pytest.fixture
async def sim() -> AsyncIterator[KubeSim]:
    s = KubeSim(bookmark_interval=0.2)
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


async def _api_client(sim: KubeSim, path: Path) -> client.ApiClient:
    cfg = client.Configuration()
    await config.load_kube_config(
        config_file=str(sim.write_kubeconfig(path)), client_configuration=cfg
    )
    return client.ApiClient(configuration=cfg)


@pytest.fixture
async def api(sim: KubeSim, tmp_path: Path) -> AsyncIterator[client.ApiClient]:
    api_client = await _api_client(sim, tmp_path / "kubeconfig")
    async with api_client:
        yield api_client


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


async def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def body_of(exc: ApiException) -> dict[str, Any]:
    return json.loads(exc.body)


class Stream:
    """Consume a kubernetes_asyncio watch in the background; ``next()`` awaits one event."""

    def __init__(self, func: Any, **kwargs: Any) -> None:
        self.events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.watch = watch.Watch()
        self.task = asyncio.create_task(self._run(func, kwargs))

    async def _run(self, func: Any, kwargs: dict[str, Any]) -> None:
        try:
            async for event in self.watch.stream(func, **kwargs):
                await self.events.put(event)
        finally:
            await self.events.put(None)  # end of stream

    async def next(self, timeout: float = 5.0) -> dict[str, Any] | None:
        return await asyncio.wait_for(self.events.get(), timeout)

    async def close(self) -> None:
        if not self.task.done():
            self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.watch.close()


async def drain(func: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """All events of a watch that ends by itself (``timeout_seconds`` or an error)."""
    async with watch.Watch() as w, asyncio.timeout(10):
        return [event async for event in w.stream(func, **kwargs)]


def node_names(items: list[Any]) -> list[str]:
    return [n.metadata.name for n in items]


# --- basics ----------------------------------------------------------------------------------


async def test_nodes_list_get_create(sim: KubeSim, core: client.CoreV1Api) -> None:
    sim.add_node("n1", labels={"pool": "a"}, cpu=8, memory="16Gi")

    listing = await core.list_node()
    assert node_names(listing.items) == ["n1"]
    assert listing.metadata.resource_version == sim.resource_version

    node = await core.read_node("n1")
    assert node.status.capacity["cpu"] == "8"
    assert node.metadata.labels["pool"] == "a"
    assert node.metadata.uid
    assert node.metadata.creation_timestamp

    created = await core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n2")))
    assert created.metadata.resource_version == sim.resource_version
    with pytest.raises(ApiException) as exc:
        await core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n2")))
    assert exc.value.status == 409
    assert body_of(exc.value)["reason"] == "AlreadyExists"

    with pytest.raises(ApiException) as exc:
        await core.read_node("missing")
    status = body_of(exc.value)
    assert (exc.value.status, status["reason"], status["message"]) == (
        404,
        "NotFound",
        'nodes "missing" not found',
    )
    assert status["kind"] == "Status"
    assert status["status"] == "Failure"


async def test_global_resource_version_and_noop_writes(sim: KubeSim) -> None:
    before = int(sim.resource_version)
    sim.add_node("n1", ready=False)  # keeps its admission taint: one write
    sim.add_pod("p1")
    assert int(sim.resource_version) == before + 2
    # A patch that changes nothing writes nothing (like the real server).
    sim.patch_merge("nodes", "n1", {"metadata": {"labels": {"kubernetes.io/os": "linux"}}})
    assert int(sim.resource_version) == before + 2
    # The node turns Ready: its status write, then the node lifecycle controller's untaint.
    sim.patch(
        "nodes",
        "n1",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        patch_type="strategic",
        subresource="status",
    )
    assert int(sim.resource_version) == before + 4
    assert "taints" not in sim.get("nodes", "n1")["spec"]


async def test_namespaced_create_needs_namespace(core: client.CoreV1Api) -> None:
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="p"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="i")]),
    )
    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_pod("nope", pod)
    assert exc.value.status == 404
    assert body_of(exc.value)["message"] == 'namespaces "nope" not found'
    created = await core.create_namespaced_pod("default", pod)
    assert created.status.phase == "Pending"
    assert created.spec.scheduler_name == "default-scheduler"


async def test_discovery(api: client.ApiClient) -> None:
    groups = await client.ApisApi(api).get_api_versions()
    assert GROUP in {g.name for g in groups.groups}
    resources = await client.CoreV1Api(api).get_api_resources()
    names = {r.name for r in resources.resources}
    assert {"nodes", "pods", "pods/binding", "pods/eviction", "pods/status"} <= names


# --- watch -----------------------------------------------------------------------------------


async def test_watch_resume_bookmark_and_timeout(sim: KubeSim, core: client.CoreV1Api) -> None:
    sim.add_node("n1")
    listing = await core.list_node()
    sim.add_node("n2")
    sim.cordon("n1")

    # The replayed events move the watch's start to the cordon's resourceVersion; a bookmark
    # comes only once the kind moves past it (the watch cache's rule), with the kind's newest.
    seen: list[tuple[str, str | None]] = []
    async with watch.Watch() as w:
        async with asyncio.timeout(5):
            async for event in w.stream(
                core.list_node,
                resource_version=listing.metadata.resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=30,
            ):
                raw = event["raw_object"]
                seen.append((event["type"], raw["metadata"].get("name")))
                if event["type"] == "MODIFIED":
                    sim.add_node("n3")
                if event["type"] == "BOOKMARK":
                    assert raw["metadata"]["resourceVersion"] == sim.resource_version
                    break
    assert seen == [("ADDED", "n2"), ("MODIFIED", "n1"), ("ADDED", "n3"), ("BOOKMARK", None)]

    # timeoutSeconds ends the stream: the iteration stops on its own.
    ended = await drain(core.list_node, resource_version=sim.resource_version, timeout_seconds=1)
    assert ended == []


async def test_bookmarks_only_when_the_kind_moved_past_the_watch_start(sim: KubeSim) -> None:
    """A real API server sent no bookmark in 125 s on idle Nodes (issue 17): the watch cache
    sends one only with a resourceVersion newer than the watch's start. Writes to other kinds
    do not count; the bookmark carries the watched kind's own last resourceVersion."""
    sim.add_node("n1")
    start = sim.resource_version
    async with aiohttp.ClientSession() as http:

        async def lines(seconds: float, during: Callable[[], object] | None = None) -> list[Any]:
            params = {
                "watch": "1",
                "resourceVersion": start,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "30",
            }
            out: list[Any] = []
            async with http.get(f"{sim.url}/api/v1/nodes", params=params) as r:
                assert r.status == 200
                await wait_until(lambda: sim.watch_count == 1)
                if during is not None:
                    during()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(seconds):
                        async for line in r.content:
                            if line.strip():
                                out.append(json.loads(line))  # noqa: PERF401 - kept on timeout
            await wait_until(lambda: sim.watch_count == 0)
            return out

        # Idle nodes, busy pods: 5 bookmark periods and not one bookmark.
        quiet = await lines(1.0, lambda: sim.add_pod("p1", "default"))
        assert quiet == []
        assert sim.bookmarks["nodes"] == 0

        # Nodes move once, then only pods (the global resourceVersion moves on).
        moved = await lines(1.0, lambda: (sim.cordon("n1"), sim.add_pod("p2", "default")))
        node_rv = moved[0]["object"]["metadata"]["resourceVersion"]
        assert int(node_rv) < int(sim.resource_version)
        assert moved[0]["type"] == "MODIFIED"
        bookmarks = [e for e in moved if e["type"] == "BOOKMARK"]
        assert bookmarks
        assert {e["object"]["metadata"]["resourceVersion"] for e in bookmarks} == {node_rv}
        assert sim.bookmarks["nodes"] == len(bookmarks)


async def test_watch_from_zero_sends_synthetic_added(sim: KubeSim, core: client.CoreV1Api) -> None:
    sim.add_node("n1")
    sim.add_node("n2")
    events = await drain(core.list_node, resource_version="0", timeout_seconds=1)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "n1"),
        ("ADDED", "n2"),
    ]


async def test_watch_410_after_compact_is_an_in_stream_error(
    sim: KubeSim, core: client.CoreV1Api
) -> None:
    old = sim.resource_version
    sim.add_node("n1")
    sim.compact()
    with pytest.raises(ApiException) as exc:
        await drain(core.list_node, resource_version=old, timeout_seconds=5)
    assert exc.value.status == 410

    # On the wire: HTTP 200 and one ERROR event carrying the Status, as the watch cache sends.
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{sim.url}/api/v1/nodes", params={"watch": "1", "resourceVersion": old}) as r,
    ):
        assert r.status == 200
        lines = (await r.read()).splitlines()
    assert [json.loads(line) for line in lines] == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {old} ({sim.resource_version})",
                "reason": "Expired",
                "code": 410,
            },
        }
    ]


async def test_watch_history_window_and_stale_continue(tmp_path: Path) -> None:
    async with KubeSim(history_size=2) as sim:
        start = sim.resource_version
        for name in ("a", "b", "c"):
            sim.add_node(name)
        async with await _api_client(sim, tmp_path / "kc") as api:
            core = client.CoreV1Api(api)
            with pytest.raises(ApiException) as exc:
                await drain(core.list_node, resource_version=start, timeout_seconds=5)
            assert exc.value.status == 410

            page = await core.list_node(limit=2)
            assert node_names(page.items) == ["a", "b"]
            assert page.metadata.remaining_item_count == 1
            rest = await core.list_node(limit=2, _continue=page.metadata._continue)
            assert node_names(rest.items) == ["c"]
            assert not rest.metadata._continue

            sim.add_node("d")
            sim.compact()  # the first page's revision is now older than the history
            with pytest.raises(ApiException) as exc:
                await core.list_node(limit=2, _continue=page.metadata._continue)
            assert exc.value.status == 410
            status = body_of(exc.value)
            assert status["reason"] == "Expired"
            # The server hands out a token that continues inconsistently at the latest version.
            fresh = await core.list_node(limit=5, _continue=status["metadata"]["continue"])
            assert node_names(fresh.items) == ["c", "d"]


async def test_pages_follow_the_storage_key_order(sim: KubeSim, core: client.CoreV1Api) -> None:
    # etcd ranges over "namespace/name": namespace "a-b" comes before "a" ('-' < '/'), and a
    # continue token at "a/…" must not skip "a-b".
    for ns in ("a", "a-b"):
        sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for name in ("p1", "p2"):
            sim.add_pod(name, ns)
    want = ["a-b/p1", "a-b/p2", "a/p1", "a/p2"]

    def keys(items: list[Any]) -> list[str]:
        return [f"{p.metadata.namespace}/{p.metadata.name}" for p in items]

    assert keys((await core.list_pod_for_all_namespaces()).items) == want
    paged: list[str] = []
    token = None
    for _ in range(len(want) + 1):
        page = await core.list_pod_for_all_namespaces(limit=1, _continue=token)
        paged += keys(page.items)
        token = page.metadata._continue
        if not token:
            break
    assert paged == want
    assert keys((await core.list_namespaced_pod("a-b", limit=5)).items) == want[:2]


async def test_paged_list_in_a_namespace_with_selector_and_writes_between_pages(
    sim: KubeSim, core: client.CoreV1Api
) -> None:
    # Neighbouring namespaces ("a-b" sorts before "a", "ab" after) must not leak into a
    # namespaced page; objects created or deleted between pages are seen by the later pages
    # (the simulator serves continues from its current state).
    for ns in ("a", "a-b", "ab"):
        sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for i in range(4):
            sim.add_pod(f"p{i}", ns, labels={"tier": "gpu" if i % 2 else "cpu"})

    first = await core.list_namespaced_pod("a", limit=2)
    assert node_names(first.items) == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 2
    sim.delete("pods", "p2", "a")
    sim.add_pod("p9", "a", labels={"tier": "gpu"})
    rest = await core.list_namespaced_pod("a", limit=2, _continue=first.metadata._continue)
    assert node_names(rest.items) == ["p3", "p9"]
    assert not rest.metadata._continue

    gpu = await core.list_namespaced_pod("ab", label_selector="tier=gpu", limit=1)
    assert node_names(gpu.items) == ["p1"]
    assert gpu.metadata.remaining_item_count is None  # not given under a selector
    more = await core.list_namespaced_pod(
        "ab", label_selector="tier=gpu", limit=1, _continue=gpu.metadata._continue
    )
    assert node_names(more.items) == ["p3"]
    assert not more.metadata._continue


@pytest.mark.parametrize("spelling", ["True", "true", "1"])
async def test_watch_param_spellings(sim: KubeSim, spelling: str) -> None:
    sim.add_node("n1")
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{sim.url}/api/v1/nodes", params={"watch": spelling, "timeoutSeconds": "1"}) as r,
    ):
        assert r.status == 200
        lines = (await r.read()).splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["ADDED"]


async def test_legacy_watch_path(sim: KubeSim) -> None:
    sim.add_pod("p1")
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{sim.url}/api/v1/watch/namespaces/default/pods/p1", params={"timeoutSeconds": "1"}
        ) as r,
    ):
        events = [json.loads(line) for line in (await r.read()).splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "p1")]


async def test_watch_selectors_send_transitions(sim: KubeSim, core: client.CoreV1Api) -> None:
    stream = Stream(
        core.list_namespaced_pod,
        namespace="default",
        label_selector="app=web",
        field_selector="status.phase=Pending",
        timeout_seconds=30,
    )
    try:
        await wait_until(lambda: sim.watch_count == 1)
        sim.add_pod("other", labels={"app": "db"})
        sim.add_pod("web-1", labels={"app": "web"})
        event = await stream.next()
        assert event is not None
        assert (event["type"], event["object"].metadata.name) == ("ADDED", "web-1")

        sim.patch_merge("pods", "web-1", {"metadata": {"labels": {"app": "db"}}}, "default")
        event = await stream.next()
        assert event is not None
        assert (event["type"], event["object"].metadata.name) == ("DELETED", "web-1")

        sim.patch_merge("pods", "other", {"metadata": {"labels": {"app": "web"}}}, "default")
        event = await stream.next()
        assert event is not None
        assert (event["type"], event["object"].metadata.name) == ("ADDED", "other")

        # Leaving the field selector (phase Pending -> Running) is a DELETED too.
        sim.patch_merge(
            "pods", "other", {"status": {"phase": "Running"}}, "default", subresource="status"
        )
        event = await stream.next()
        assert event is not None
        assert (event["type"], event["object"].status.phase) == ("DELETED", "Running")
    finally:
        await stream.close()


async def test_drop_watches_ends_streams(sim: KubeSim, core: client.CoreV1Api) -> None:
    stream = Stream(core.list_node, timeout_seconds=60)
    try:
        await wait_until(lambda: sim.watch_count == 1)
        assert sim.drop_watches() == 1
        assert await stream.next() is None  # the stream ended
        assert sim.watch_count == 0
    finally:
        await stream.close()


# --- selectors -------------------------------------------------------------------------------


async def test_label_and_field_selectors(sim: KubeSim, core: client.CoreV1Api) -> None:
    sim.add_node("a1", labels={"pool": "a"})
    sim.add_node("b1", labels={"pool": "b", "gpu": "yes"})
    sim.add_node("c1")
    sim.cordon("c1")

    async def names(**kw: Any) -> list[str]:
        return node_names((await core.list_node(**kw)).items)

    assert await names(label_selector="pool=a") == ["a1"]
    assert await names(label_selector="pool==b") == ["b1"]
    assert await names(label_selector="pool!=a") == ["b1", "c1"]
    assert await names(label_selector="pool in (a, b)") == ["a1", "b1"]
    assert await names(label_selector="pool notin (a)") == ["b1", "c1"]
    assert await names(label_selector="gpu") == ["b1"]
    assert await names(label_selector="!gpu") == ["a1", "c1"]
    assert await names(label_selector="pool,!gpu") == ["a1"]
    assert await names(field_selector="spec.unschedulable=true") == ["c1"]
    assert await names(field_selector="spec.unschedulable!=true") == ["a1", "b1"]
    assert await names(field_selector="metadata.name==b1") == ["b1"]
    assert await names(field_selector="metadata.name!=b1", label_selector="pool") == ["a1"]

    sim.add_pod("unbound", scheduler_name="slurm-bridge-scheduler")
    sim.add_pod("bound", node_name="a1", phase="Running", ready=True)

    async def pods(**kw: Any) -> list[str]:
        listing = await core.list_pod_for_all_namespaces(**kw)
        return [p.metadata.name for p in listing.items]

    assert await pods(field_selector="spec.nodeName=") == ["unbound"]
    assert await pods(field_selector="spec.nodeName=a1") == ["bound"]
    assert await pods(field_selector="spec.schedulerName=slurm-bridge-scheduler") == ["unbound"]
    assert await pods(field_selector="status.phase=Running,metadata.namespace=default") == ["bound"]

    with pytest.raises(ApiException) as exc:
        await core.list_node(field_selector="spec.bogus=1")
    assert exc.value.status == 400
    with pytest.raises(ApiException) as exc:
        await core.list_node(label_selector="pool in (a")
    assert exc.value.status == 400


# --- patches ---------------------------------------------------------------------------------


async def test_node_taint_patches(sim: KubeSim, core: client.CoreV1Api) -> None:
    sim.add_node("n1", taints=[OTHER])

    # NodeSpec.taints is +listType=atomic: a strategic merge patch replaces the whole list.
    node = await core.patch_node("n1", {"spec": {"taints": [MANAGED]}}, _content_type=SMP)
    assert [t.key for t in node.spec.taints] == [MANAGED["key"]]

    node = await core.patch_node("n1", {"spec": {"taints": [OTHER, MANAGED]}}, _content_type=MERGE)
    assert [t.key for t in node.spec.taints] == [OTHER["key"], MANAGED["key"]]

    # JSON patch with a `test` precondition: applies when the list is what we saw ...
    node = await core.patch_node(
        "n1",
        [
            {"op": "test", "path": "/spec/taints", "value": [OTHER, MANAGED]},
            {"op": "replace", "path": "/spec/taints", "value": [OTHER]},
        ],
        _content_type=JSON_PATCH,
    )
    assert [t.key for t in node.spec.taints] == [OTHER["key"]]
    rv = node.metadata.resource_version

    # ... and is refused with 422 Invalid (and no write) when it is not.
    with pytest.raises(ApiException) as exc:
        await core.patch_node(
            "n1",
            [
                {"op": "test", "path": "/spec/taints/0/key", "value": MANAGED["key"]},
                {"op": "remove", "path": "/spec/taints/0"},
            ],
            _content_type=JSON_PATCH,
        )
    assert exc.value.status == 422
    status = body_of(exc.value)
    assert status["reason"] == "Invalid"
    assert status["message"] == "the server rejected our request due to an error in our request"
    assert (await core.read_node("n1")).metadata.resource_version == rv

    # Removing one taint by strategic merge means sending the list without it.
    node = await core.patch_node("n1", {"spec": {"taints": None}}, _content_type=SMP)
    assert node.spec.taints is None


async def test_pod_strategic_merge(sim: KubeSim, core: client.CoreV1Api) -> None:
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="p", finalizers=["a/one"]),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(name="a", image="img:1"),
                client.V1Container(name="b", image="img:1"),
            ]
        ),
    )
    await core.create_namespaced_pod("default", pod)

    # status.conditions merge by `type`.
    ready = {"type": "Ready", "status": "False"}
    await core.patch_namespaced_pod_status(
        "p", "default", {"status": {"conditions": [ready]}}, _content_type=SMP
    )
    got = await core.patch_namespaced_pod_status(
        "p",
        "default",
        {
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "True"},
                ]
            }
        },
        _content_type=SMP,
    )
    assert {c.type: c.status for c in got.status.conditions} == {
        "Ready": "True",
        "PodScheduled": "True",
    }
    got = await core.patch_namespaced_pod_status(
        "p",
        "default",
        {"status": {"conditions": [{"type": "PodScheduled", "$patch": "delete"}]}},
        _content_type=SMP,
    )
    assert [c.type for c in got.status.conditions] == ["Ready"]

    # spec.containers merge by `name`: only b's image changes.
    got = await core.patch_namespaced_pod(
        "p",
        "default",
        {"spec": {"containers": [{"name": "b", "image": "img:2"}]}},
        _content_type=SMP,
    )
    assert [(c.name, c.image) for c in got.spec.containers] == [("a", "img:1"), ("b", "img:2")]

    # metadata.finalizers merge as a set; $deleteFromPrimitiveList removes one.
    got = await core.patch_namespaced_pod(
        "p", "default", {"metadata": {"finalizers": ["b/two", "a/one"]}}, _content_type=SMP
    )
    assert got.metadata.finalizers == ["a/one", "b/two"]
    got = await core.patch_namespaced_pod(
        "p",
        "default",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a/one"]}},
        _content_type=SMP,
    )
    assert got.metadata.finalizers == ["b/two"]

    # Pod updates may not change spec beyond images etc. (real validation) ...
    with pytest.raises(ApiException) as exc:
        await core.patch_namespaced_pod(
            "p", "default", {"spec": {"nodeName": "n1"}}, _content_type=MERGE
        )
    assert exc.value.status == 422
    # ... and the main resource ignores status.
    got = await core.patch_namespaced_pod(
        "p", "default", {"status": {"phase": "Failed"}}, _content_type=MERGE
    )
    assert got.status.phase == "Pending"


async def test_stale_resource_version_conflicts(sim: KubeSim, core: client.CoreV1Api) -> None:
    sim.add_node("n1")
    stale = await core.read_node("n1")
    sim.cordon("n1")

    stale.metadata.labels["x"] = "y"
    with pytest.raises(ApiException) as exc:
        await core.replace_node("n1", stale)
    status = body_of(exc.value)
    assert (exc.value.status, status["reason"]) == (409, "Conflict")
    assert status["message"] == (
        'Operation cannot be fulfilled on nodes "n1": the object has been modified; please '
        "apply your changes to the latest version and try again"
    )

    old_rv = stale.metadata.resource_version
    for content_type in (MERGE, SMP):
        with pytest.raises(ApiException) as exc:
            await core.patch_node(
                "n1",
                {"metadata": {"resourceVersion": old_rv, "labels": {"x": "y"}}},
                _content_type=content_type,
            )
        assert exc.value.status == 409

    current = await core.read_node("n1")
    patched = await core.patch_node(
        "n1",
        {"metadata": {"resourceVersion": current.metadata.resource_version, "labels": {"x": "y"}}},
        _content_type=MERGE,
    )
    assert patched.metadata.labels["x"] == "y"
    current.metadata.resource_version = None  # unconditional update
    current.metadata.labels["z"] = "1"
    replaced = await core.replace_node("n1", current)
    assert replaced.metadata.labels["z"] == "1"


async def test_finalizers_keep_a_deleted_object(sim: KubeSim, core: client.CoreV1Api) -> None:
    sim.add_pod("p", finalizers=["scheduler.slinky.slurm.net/finalizer"])
    pod = await core.read_namespaced_pod("p", "default")
    stream = Stream(
        core.list_namespaced_pod,
        namespace="default",
        resource_version=pod.metadata.resource_version,
        timeout_seconds=30,
    )
    try:
        with pytest.raises(ApiException) as exc:
            await core.delete_namespaced_pod(
                "p", "default", body=client.V1DeleteOptions(preconditions={"uid": "other"})
            )
        assert exc.value.status == 409

        await core.delete_namespaced_pod("p", "default")
        kept = await core.read_namespaced_pod("p", "default")
        assert kept.metadata.deletion_timestamp is not None
        event = await stream.next()
        assert event is not None
        assert event["type"] == "MODIFIED"

        with pytest.raises(ApiException) as exc:  # no new finalizers while deleting
            await core.patch_namespaced_pod(
                "p", "default", {"metadata": {"finalizers": ["x/y"]}}, _content_type=SMP
            )
        assert exc.value.status == 422

        await core.patch_namespaced_pod(
            "p", "default", {"metadata": {"finalizers": None}}, _content_type=MERGE
        )
        event = await stream.next()
        assert event is not None
        assert event["type"] == "DELETED"
        with pytest.raises(ApiException) as exc:
            await core.read_namespaced_pod("p", "default")
        assert exc.value.status == 404
    finally:
        await stream.close()


async def test_delete_with_resource_version_precondition(
    sim: KubeSim, core: client.CoreV1Api
) -> None:
    sim.add_node("n1")
    old = sim.get("nodes", "n1")["metadata"]["resourceVersion"]
    sim.cordon("n1")
    with pytest.raises(ApiException) as exc:
        await core.delete_node(
            "n1",
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version=old)),
        )
    assert exc.value.status == 409
    status = await core.delete_node("n1")
    assert status.status == "Success"
    assert sim.list("nodes") == []


# --- pods: binding and eviction --------------------------------------------------------------


async def test_binding(sim: KubeSim, core: client.CoreV1Api) -> None:
    sim.add_node("n1")
    sim.add_pod("p", scheduler_name="slurm-bridge-scheduler")
    binding = client.V1Binding(
        metadata=client.V1ObjectMeta(name="p"),
        target=client.V1ObjectReference(kind="Node", name="n1"),
    )
    # The Binding subresource answers with a Status, which kubernetes_asyncio cannot
    # deserialize as V1Binding (target is required): read the raw response.
    resp = await core.create_namespaced_pod_binding("p", "default", binding, _preload_content=False)
    assert resp.status == 201
    resp.release()
    pod = await core.read_namespaced_pod("p", "default")
    assert pod.spec.node_name == "n1"
    assert [(c.type, c.status) for c in pod.status.conditions] == [("PodScheduled", "True")]

    resp = await core.create_namespaced_pod_binding("p", "default", binding, _preload_content=False)
    status = await resp.json()
    assert resp.status == 409
    assert status["message"] == (
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"'
    )


async def test_eviction_respects_pdbs(sim: KubeSim, api: client.ApiClient) -> None:
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    for name in ("web-1", "web-2"):
        sim.add_pod(name, labels={"app": "web"}, node_name="n1", phase="Running", ready=True)
    sim.add_pod("web-pending", labels={"app": "web"})
    await policy.create_namespaced_pod_disruption_budget(
        "default",
        client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1PodDisruptionBudgetSpec(
                max_unavailable=0, selector=client.V1LabelSelector(match_labels={"app": "web"})
            ),
        ),
    )

    def eviction(name: str) -> client.V1Eviction:
        return client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace="default"))

    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))
    status = body_of(exc.value)
    assert (exc.value.status, status["reason"]) == (429, "TooManyRequests")
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"][0]["reason"] == "DisruptionBudget"

    # Pending pods bypass PDBs.
    await core.create_namespaced_pod_eviction("web-pending", "default", eviction("web-pending"))

    await policy.patch_namespaced_pod_disruption_budget(
        "web",
        "default",
        {"spec": {"maxUnavailable": None, "minAvailable": 1}},
        _content_type=MERGE,
    )
    await core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))
    assert [p["metadata"]["name"] for p in sim.list("pods", "default")] == ["web-2"]
    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_pod_eviction("web-2", "default", eviction("web-2"))
    assert exc.value.status == 429
    assert sim.requests[("create", "pods/eviction")] == 4


# --- custom resources ------------------------------------------------------------------------


async def test_nodeset_status_and_scale(sim: KubeSim, api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeSet",
        "metadata": {"name": "ns1"},
        # v1alpha1 requires spec.template (the CRD's schema, enforced as a real server does).
        "spec": {"replicas": 2, "template": {}},
        "status": {"replicas": 99},
    }
    created = await custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", "nodesets", body
    )
    assert "status" not in created  # status subresource: ignored on create
    assert created["metadata"]["generation"] == 1

    scale = await custom.get_namespaced_custom_object_scale(
        GROUP, VERSION, "default", "nodesets", "ns1"
    )
    assert scale["kind"] == "Scale"
    assert scale["spec"] == {"replicas": 2}

    scale = await custom.patch_namespaced_custom_object_scale(
        GROUP,
        VERSION,
        "default",
        "nodesets",
        "ns1",
        {"spec": {"replicas": 5}},
        _content_type=MERGE,
    )
    assert scale["spec"]["replicas"] == 5
    obj = await custom.get_namespaced_custom_object(GROUP, VERSION, "default", "nodesets", "ns1")
    assert obj["spec"]["replicas"] == 5
    assert obj["metadata"]["generation"] == 2

    await custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        "default",
        "nodesets",
        "ns1",
        {"status": {"replicas": 3, "selector": "app=ns1"}},
        _content_type=MERGE,
    )
    scale = await custom.get_namespaced_custom_object_scale(
        GROUP, VERSION, "default", "nodesets", "ns1"
    )
    assert scale["status"] == {"replicas": 3, "selector": "app=ns1"}
    obj = await custom.get_namespaced_custom_object(GROUP, VERSION, "default", "nodesets", "ns1")
    assert obj["metadata"]["generation"] == 2  # status writes do not bump generation

    # The main resource ignores status; custom resources reject strategic merge (415).
    obj = await custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        "nodesets",
        "ns1",
        {"status": {"replicas": 0}},
        _content_type=MERGE,
    )
    assert obj["status"]["replicas"] == 3
    with pytest.raises(ApiException) as exc:
        await custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "default",
            "nodesets",
            "ns1",
            {"spec": {"replicas": 1}},
            _content_type=SMP,
        )
    assert exc.value.status == 415

    stale = dict(scale, spec={"replicas": 1})
    sim.patch_merge("nodesets", "ns1", {"metadata": {"labels": {"bump": "1"}}}, "default")
    with pytest.raises(ApiException) as exc:
        await custom.replace_namespaced_custom_object_scale(
            GROUP, VERSION, "default", "nodesets", "ns1", stale
        )
    assert exc.value.status == 409


# --- in-process API, hooks, faults, auth -----------------------------------------------------


async def test_hooks_faults_and_counters(sim: KubeSim, core: client.CoreV1Api) -> None:
    changes: list[Change] = []
    sim.on_write.append(changes.append)
    sim.add_node("n1")
    await core.patch_node("n1", {"spec": {"unschedulable": True}}, _content_type=SMP)
    assert [(c.type, c.verb, c.resource.plural) for c in changes] == [
        ("ADDED", "create", "nodes"),
        ("MODIFIED", "patch", "nodes"),
    ]

    sim.fail_next(1, 503, verb="list", resource="nodes")
    with pytest.raises(ApiException) as exc:
        await core.list_node()
    assert exc.value.status == 503
    assert node_names((await core.list_node()).items) == ["n1"]
    assert sim.requests[("list", "nodes")] == 2
    assert sim.requests[("patch", "nodes")] == 1

    with pytest.raises(ApiError) as err:
        sim.get("nodes", "missing")
    assert err.value.code == 404


async def test_bearer_token(tmp_path: Path) -> None:
    async with KubeSim(token="s3cret") as sim:
        sim.add_node("n1")
        async with await _api_client(sim, tmp_path / "kc") as api:
            listing = await client.CoreV1Api(api).list_node()
            assert node_names(listing.items) == ["n1"]
        async with aiohttp.ClientSession() as http, http.get(f"{sim.url}/api/v1/nodes") as r:
            assert r.status == 401


# --- Events: the namespace must agree with the involved object's ----------------------------

# (event namespace, involvedObject namespace, eventTime set, created?) — kubernetes
# pkg/apis/core/validation/events.go legacyValidateEvent, for a core/v1 request.
EVENT_NAMESPACE_RULES = [
    ("default", "", False, True),  # a Node's Event where client-go's recorder puts it
    ("kube-system", "", False, False),  # a Node's Event in slurmbridge's own namespace
    ("kube-public", "kube-public", False, True),  # a Pod's Event in the Pod's namespace
    ("default", "kube-public", False, False),  # ... and not in another one
    ("kube-system", "", True, True),  # the eventTime form also allows kube-system
    ("kube-public", "", True, False),
]


@pytest.mark.parametrize(("event_ns", "object_ns", "event_time", "created"), EVENT_NAMESPACE_RULES)
async def test_an_event_outside_its_objects_namespace_is_invalid(
    core: client.CoreV1Api, event_ns: str, object_ns: str, event_time: bool, created: bool
) -> None:
    involved = {"apiVersion": "v1", "kind": "Pod" if object_ns else "Node", "name": "obj"}
    if object_ns:
        involved["namespace"] = object_ns
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "obj.1", "namespace": event_ns},
        "involvedObject": involved,
        "reason": "Tested",
        "message": "m",
        "type": "Normal",
    }
    if event_time:
        body["eventTime"] = "2026-01-01T00:00:00.000000Z"
    create: Any = core.create_namespaced_event
    if created:
        await create(event_ns, body)
        got = await core.read_namespaced_event("obj.1", event_ns)
        assert got.involved_object.name == "obj"
        return
    with pytest.raises(ApiException) as exc:
        await create(event_ns, body)
    assert exc.value.status == 422
    quoted = json.dumps(object_ns)
    assert body_of(exc.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'Event "obj.1" is invalid: involvedObject.namespace: Invalid value: '
        f"{quoted}: does not match event.namespace",
        "reason": "Invalid",
        "details": {
            "name": "obj.1",
            "kind": "Event",
            "causes": [
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {quoted}: does not match event.namespace",
                    "field": "involvedObject.namespace",
                }
            ],
        },
        "code": 422,
    }
    assert (await core.list_namespaced_event(event_ns)).items == []


# --- CRD schemas: the simulator enforces them as kube-apiserver does -------------------------

BETA = "v1beta1"


def _beta_nodeset(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{BETA}",
        "kind": "NodeSet",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"containers": [{"name": "slurmd", "image": "s"}]}}, **spec},
    }


async def _refused(call: Any) -> dict[str, Any]:
    with pytest.raises(ApiException) as exc:
        await call
    assert exc.value.status == 422
    status: dict[str, Any] = json.loads(exc.value.body)
    assert status["reason"] == "Invalid"
    return status


async def test_a_bad_enum_is_refused_naming_the_field(api: client.ApiClient) -> None:
    """apiextensions-apiserver: an enum violation is 422 with a FieldValueNotSupported
    cause at the field's path and the supported values in the CRD's order."""
    custom = client.CustomObjectsApi(api)
    status = await _refused(
        custom.create_namespaced_custom_object(
            GROUP, BETA, "default", "nodesets", _beta_nodeset("bad", scalingMode="bogus")
        )
    )
    # The NodeSet schema has CEL rules, which a blocking error keeps from running: the
    # server says so in a second cause (customresource strategy.go hasBlockingErr).
    assert status["message"] == (
        'NodeSet.slinky.slurm.net "bad" is invalid: [spec.scalingMode: Unsupported value: '
        '"bogus": supported values: "DaemonSet", "StatefulSet", <nil>: Invalid value: "null": '
        "some validation rules were not checked because the object was invalid; correct the "
        "existing errors to complete validation]"
    )
    assert status["details"]["causes"][0] == {
        "reason": "FieldValueNotSupported",
        "message": 'Unsupported value: "bogus": supported values: "DaemonSet", "StatefulSet"',
        "field": "spec.scalingMode",
    }
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.scalingMode", "<nil>"]


async def test_replicas_above_the_maximum_is_refused_on_create_patch_and_scale(
    sim: KubeSim, api: client.ApiClient
) -> None:
    custom = client.CustomObjectsApi(api)
    status = await _refused(
        custom.create_namespaced_custom_object(
            GROUP, BETA, "default", "nodesets", _beta_nodeset("big", replicas=10**9)
        )
    )
    (cause,) = [c for c in status["details"]["causes"] if c["field"] == "spec.replicas"]
    assert cause["message"] == (
        "Invalid value: 1000000000: spec.replicas in body should be less than or equal to 10000"
    )
    await custom.create_namespaced_custom_object(
        GROUP, BETA, "default", "nodesets", _beta_nodeset("ok", replicas=2)
    )
    await _refused(
        custom.patch_namespaced_custom_object(
            GROUP,
            BETA,
            "default",
            "nodesets",
            "ok",
            {"spec": {"replicas": 10**9}},
            _content_type=MERGE,
        )
    )
    await _refused(
        custom.patch_namespaced_custom_object_scale(
            GROUP,
            BETA,
            "default",
            "nodesets",
            "ok",
            {"spec": {"replicas": 10**9}},
            _content_type=MERGE,
        )
    )
    assert sim.get("nodesets", "ok", "default")["spec"]["replicas"] == 2


async def test_defaults_are_applied_and_unknown_fields_pruned(api: client.ApiClient) -> None:
    """Absent fields get the schema's defaults (at every object that exists); fields the
    schema does not name are dropped, except under x-kubernetes-preserve-unknown-fields."""
    custom = client.CustomObjectsApi(api)
    body = _beta_nodeset("d", bogus=1, partition={"enabled": True, "typo": "x"})
    body["spec"]["template"]["spec"]["anything"] = "kept"
    body["metadata"]["labels"] = {"a": "b"}
    created = await custom.create_namespaced_custom_object(GROUP, BETA, "default", "nodesets", body)
    spec = created["spec"]
    assert (spec["replicas"], spec["scalingMode"], spec["pruneSlurmNodeRecords"]) == (
        1,
        "StatefulSet",
        "Never",
    )
    assert spec["workloadDisruptionProtection"] is True
    assert "bogus" not in spec
    assert spec["partition"] == {"enabled": True}
    assert spec["template"]["spec"]["anything"] == "kept"
    assert created["metadata"]["labels"] == {"a": "b"}
    assert "updateStrategy" not in spec  # an absent object gets no defaults inside


async def test_v1alpha1_writes_are_held_to_v1alpha1s_schema(api: client.ApiClient) -> None:
    """Each served version validates with its own schema: v1alpha1 requires spec.template
    and knows no ScheduledUpdate."""
    custom = client.CustomObjectsApi(api)
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeSet", "metadata": {"name": "a"}}
    body["spec"] = {"replicas": 1}
    status = await _refused(
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "nodesets", body)
    )
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.template"]
    body["spec"] = {"template": {}, "updateStrategy": {"type": "ScheduledUpdate"}}
    status = await _refused(
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "nodesets", body)
    )
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.updateStrategy.type"]


async def test_cel_rules_are_evaluated(api: client.ApiClient) -> None:
    """x-kubernetes-validations: a ScheduledUpdate without its window is refused with the
    rule's message at the rule's node (pkg/apiserver/schema/cel/validation.go)."""
    custom = client.CustomObjectsApi(api)
    body = _beta_nodeset("s", updateStrategy={"type": "ScheduledUpdate"})
    status = await _refused(
        custom.create_namespaced_custom_object(GROUP, BETA, "default", "nodesets", body)
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: a ScheduledUpdate needs scheduledUpdate.startTime and "
            "duration",
            "field": "spec.updateStrategy",
        }
    ]
    body["spec"]["updateStrategy"]["scheduledUpdate"] = {"startTime": "2026-01-01T00:00:00Z"}
    created = await custom.create_namespaced_custom_object(GROUP, BETA, "default", "nodesets", body)
    assert created["spec"]["updateStrategy"]["scheduledUpdate"]["duration"] == "30m"


async def test_a_cluster_is_held_to_its_schema(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    body = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "c"},
        "spec": {"server": "ftp://x", "token": {"secretRef": {"name": "t"}}},
    }
    status = await _refused(
        custom.create_namespaced_custom_object(GROUP, "v1alpha1", "default", "clusters", body)
    )
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.server"]
    body["spec"]["server"] = "http://x"
    created = await custom.create_namespaced_custom_object(
        GROUP, "v1alpha1", "default", "clusters", body
    )
    assert created["spec"]["token"]["secretRef"]["key"] == "auth-token"


async def test_a_read_at_v1alpha1_is_pruned_to_v1alpha1s_schema(api: client.ApiClient) -> None:
    """conversion None: the API server prunes an object to the schema of the version it is
    read at (deploy/crds header), so v1beta1-only fields do not show at v1alpha1, and come
    back at v1beta1 (they are stored)."""
    custom = client.CustomObjectsApi(api)
    await custom.create_namespaced_custom_object(
        GROUP, BETA, "default", "nodesets", _beta_nodeset("r", scalingMode="StatefulSet")
    )
    alpha = await custom.get_namespaced_custom_object(GROUP, VERSION, "default", "nodesets", "r")
    assert alpha["apiVersion"] == f"{GROUP}/{VERSION}"
    assert "scalingMode" not in alpha["spec"]
    listed = await custom.list_namespaced_custom_object(GROUP, VERSION, "default", "nodesets")
    assert "scalingMode" not in listed["items"][0]["spec"]
    beta = await custom.get_namespaced_custom_object(GROUP, BETA, "default", "nodesets", "r")
    assert beta["spec"]["scalingMode"] == "StatefulSet"


async def test_pod_quantities_given_as_numbers_are_stored_as_strings(sim: KubeSim) -> None:
    """A real API server decodes a pod's quantities into ``resource.Quantity`` and writes them
    back as strings (quantity.go ``MarshalJSON``): a NodeSet example's ``nvidia.com/gpu: 1``
    never reaches a watcher as the number 1, which a strict decoder refuses."""
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "q"}})
    pod = sim.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "q"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "i",
                        "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": 0.5, "memory": "1Gi"}},
                    }
                ],
                "overhead": {"cpu": 2},
            },
        }
    )
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {"nvidia.com/gpu": "1", "cpu": "500m", "memory": "1Gi"}
    assert resources["requests"] == resources["limits"]
    assert pod["spec"]["overhead"] == {"cpu": "2"}
