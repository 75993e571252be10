"""An API server (re)start: 503 then 429 for seconds; watchers back off quietly (issue 17, 6).

For 5–10 s after a real kube-apiserver 1.32 (re)started, custom resources answered 503 "the
request has been made before all known HTTP paths have been installed", then 429 "storage is
(re)initializing"; its 11 watchers logged ~277 warnings in 75 s. Now each watcher backs off
(honouring Retry-After, with jitter, capped) and logs one warning per outage and one info line
when it recovers.
"""

from __future__ import annotations

import base64
import logging
import random
import re
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from schemas.events import KubeNodeSet, KubeScaler, KubeWorkload, SlurmCluster, workload_key
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.devtools.testing import Stack
from slurmbridge.kube.watch import Watcher

pytestmark = pytest.mark.integration

NS = "default"
WATCH_LINE = re.compile(r"^watch (\S+) ")
NOT_INSTALLED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "the request has been made before all known HTTP paths have been installed, "
    "please try again",
    "reason": "ServiceUnavailable",
    "details": {"retryAfterSeconds": 5},
    "code": 503,
}
INITIALIZING = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "storage is (re)initializing",
    "reason": "TooManyRequests",
    "details": {"retryAfterSeconds": 1},
    "code": 429,
}


# --- the simulator answers as a starting API server ------------------------------------------


@pytest.fixture
async def sim() -> AsyncIterator[KubeSim]:
    async with KubeSim() as s:
        s.add_node("n1")
        yield s


async def _get(http: aiohttp.ClientSession, url: str, **params: str) -> tuple[int, str | None, Any]:
    async with http.get(url, params=params) as r:
        return r.status, r.headers.get("Retry-After"), await r.json()


async def test_the_restart_window_answers_503_then_429_as_a_real_server(sim: KubeSim) -> None:
    nodesets = f"{sim.url}/apis/slinky.slurm.net/v1alpha1/nodesets"
    nodes, pods = f"{sim.url}/api/v1/nodes", f"{sim.url}/api/v1/pods"
    async with aiohttp.ClientSession() as http:
        # Paths not installed yet: custom resources (list and watch alike) and unknown paths.
        sim.restart_window(60, 60)
        assert sim.starting
        for params in ({"limit": "500"}, {"watch": "1", "allowWatchBookmarks": "true"}):
            assert await _get(http, nodesets, **params) == (503, "5", NOT_INSTALLED)
        assert (await _get(http, f"{sim.url}/apis/nope.example/v1/things"))[:2] == (503, "5")
        status, _, body = await _get(http, nodes, limit="500")  # built-ins are served
        assert status == 200 and body["items"]

        # Watch caches initializing: every watch, and lists the cache must serve, of any kind.
        sim.restart_window(0, 60, restart=False)
        for url, params in (
            (nodesets, {"watch": "1"}),
            (nodes, {"watch": "1", "resourceVersion": sim.resource_version}),
            (pods, {"limit": "500", "fieldSelector": "spec.schedulerName=x"}),
            (nodes, {"labelSelector": "a=b", "limit": "500"}),
            (nodes, {}),  # no limit: the cache serves it
        ):
            assert await _get(http, url, **params) == (429, "1", INITIALIZING), (url, params)
        # Delegated to etcd (shouldDelegateListOnNotReadyCache): a paged list, no selectors.
        for url in (nodes, nodesets):
            assert (await _get(http, url, limit="500"))[0] == 200
        assert (await _get(http, f"{nodes}/n1"))[0] == 200  # gets read etcd

        sim.restart_window(0, 0, restart=False)
        assert not sim.starting
        assert (await _get(http, nodesets))[0] == 200
        assert (await _get(http, nodes, watch="1", timeoutSeconds="1"))[0] == 200


async def test_a_restart_cuts_watches_and_expires_their_resource_versions(sim: KubeSim) -> None:
    old = sim.resource_version
    sim.add_node("n2")
    sim.restart_window(0, 0)
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{sim.url}/api/v1/nodes", params={"watch": "1", "resourceVersion": old}) as r,
    ):
        lines = (await r.read()).splitlines()
    assert [line for line in lines if b'"code":410' in line], lines


def test_backoff_is_exponential_jittered_capped_and_honours_retry_after() -> None:
    from slurmbridge.kube.watch import Backoff

    b = Backoff(base=0.2, cap=10.0, rng=random.Random(7))
    delays = [b.next_delay() for _ in range(10)]
    steps = [min(10.0, 0.2 * 2**n) for n in range(10)]
    assert all(s / 2 <= d <= s for d, s in zip(delays, steps, strict=True)), delays
    assert len({round(d / s, 6) for d, s in zip(delays, steps, strict=True)}) > 1  # jittered
    assert max(delays) <= 10.0
    assert b.next_delay(retry_after=25.0) == 25.0  # the server asked for longer
    assert b.next_delay(retry_after=3600.0) == 60.0  # trusted up to max_retry_after
    b.reset()
    assert 0.1 <= b.next_delay(retry_after=1.0) == 1.0


# --- the watchers, in the whole stack --------------------------------------------------------


def _objects(kube: KubeSim) -> None:
    """One object of several watched kinds (created in-process: no request fails)."""
    target = {"apiVersion": "slinky.slurm.net/v1alpha1", "kind": "NodeSet", "name": "ns1"}
    for obj in (
        {
            "apiVersion": "slinky.slurm.net/v1alpha1",
            "kind": "NodeSet",
            "metadata": {"name": "ns1", "namespace": NS},
            "spec": {
                "replicas": 0,
                "template": {"spec": {"containers": [{"name": "slurmd", "image": "s"}]}},
            },
        },
        {
            "apiVersion": "slinky.slurm.net/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": "c1", "namespace": NS},
            "spec": {"server": "http://slurm.invalid", "token": {"secretRef": {"name": "t"}}},
        },
        {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": {"name": "so1", "namespace": NS},
            "spec": {"scaleTargetRef": target, "triggers": []},
        },
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "js1", "namespace": NS},
            "spec": {"replicatedJobs": []},
        },
    ):
        kube.create(obj)


def _listed(stack: Stack) -> bool:
    assert stack.app is not None
    p = stack.app.projection
    return (
        p.get(KubeNodeSet, f"{NS}/ns1") is not None
        and p.get(SlurmCluster, f"{NS}/c1") is not None
        and p.get(KubeScaler, workload_key(NS, "ScaledObject", "so1")) is not None
        and p.get(KubeWorkload, workload_key(NS, "JobSet", "js1")) is not None
    )


def _watchers(stack: Stack) -> list[Watcher[Any]]:
    assert stack.app is not None and stack.app.watcher is not None
    return [stack.app.watcher, *stack.app.extra_watchers]


def _all_watching(stack: Stack) -> bool:
    """Every watcher of a served resource has its stream open (the simulator is a 1.35
    server: the Workload API watchers find it not served and look again now and then)."""
    return (
        stack.app is not None
        and stack.app.watcher is not None
        and all(w.watching or w.missing for w in _watchers(stack))
    )


def _recovered(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if " recovered after " in r.getMessage()]


def _lines(caplog: pytest.LogCaptureFixture, level: int) -> Counter[str]:
    """Lines of producers.kube at exactly ``level``, per watcher; every warning names one."""
    out: Counter[str] = Counter()
    for rec in caplog.records:
        if rec.name != "slurmbridge.kube.watch" or rec.levelno != level:
            continue
        m = WATCH_LINE.match(rec.getMessage())
        assert m or level < logging.WARNING, rec.getMessage()
        if m:
            out[m.group(1)] += 1
    return out


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=2, poll_interval=0.2, components=("kube-watcher",)) as s:
        yield s


async def test_an_api_server_restart_is_one_warning_and_one_recovery_per_watcher(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    await stack.wait_for(lambda: _all_watching(stack), timeout=20, what="every watch open")
    names = {w.resource for w in _watchers(stack) if not w.missing}
    # nodes, pods, slurmd pods, node usage, NodeSets, Clusters, 2 scalers, 6 kinds (the owner
    # chain's ReplicaSets and Deployments among them), 3 DRA kinds (ResourceSlices,
    # ResourceClaims, DeviceClasses)
    assert len(names) == 17
    # Not served by this (1.35) simulator: asleep between looks, they miss the window.
    assert {w.resource for w in _watchers(stack) if w.missing} == {
        "podgroups.scheduling.k8s.io",
        "workloads.scheduling.k8s.io",
        "compositepodgroups.scheduling.k8s.io",
    }
    caplog.set_level(logging.INFO, logger="slurmbridge.kube.watch")
    caplog.clear()

    stack.kube.restart_window(3.0, 3.0)  # cuts every watch; 6 s of 503s and 429s
    _objects(stack.kube)  # written meanwhile: seen only by a list after the window
    await stack.wait_for(lambda: not stack.kube.starting, timeout=10, what="window over")
    await stack.wait_for(lambda: _all_watching(stack), timeout=30, what="every watch back")
    await stack.wait_for(lambda: _listed(stack), timeout=10, what="objects listed")

    warnings = _lines(caplog, logging.WARNING)
    assert set(warnings) == names, warnings  # each watcher saw its stream cut …
    assert max(warnings.values()) == 1, warnings  # … and said so once
    assert not _lines(caplog, logging.ERROR)
    await stack.wait_for(
        lambda: len(_recovered(caplog)) >= len(names), timeout=10, what="recoveries logged"
    )
    recovered = _recovered(caplog)
    assert sorted(WATCH_LINE.match(m).group(1) for m in recovered) == sorted(names)  # type: ignore[union-attr]
    # Custom resources waited out the 503s and the 429s (Retry-After) and say how long.
    nodesets = next(m for m in recovered if m.startswith("watch nodesets "))
    assert float(re.search(r"after ([0-9.]+) s", nodesets).group(1)) >= 5.0  # type: ignore[union-attr]
    assert stack.kube.requests[("watch", "nodesets")] < 12, "backed off, not hammering"


async def test_watchers_started_in_the_window_back_off_quietly_and_list_afterwards(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    await stack.stop_app()
    _objects(stack.kube)
    caplog.set_level(logging.INFO, logger="slurmbridge.kube.watch")
    stack.kube.restart_window(3.0, 3.0)
    await stack.start_app()
    await stack.wait_for(lambda: not stack.kube.starting, timeout=10, what="window over")
    await stack.wait_for(lambda: _all_watching(stack), timeout=30, what="every watch open")
    await stack.wait_for(lambda: _listed(stack), timeout=10, what="objects listed")

    warnings = _lines(caplog, logging.WARNING)
    custom = {"nodesets", "clusters", "jobsets", "leaderworkersets", "podgroups", "scaledobjects"}
    assert custom <= set(warnings), warnings  # they did start in the 503s
    assert max(warnings.values()) == 1, warnings
    await stack.wait_for(
        lambda: len(_recovered(caplog)) >= len(warnings), timeout=10, what="recoveries logged"
    )
    assert {WATCH_LINE.match(m).group(1) for m in _recovered(caplog)} == set(warnings)  # type: ignore[union-attr]


async def test_a_clusters_secret_watch_backs_off_quietly_through_the_429s(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The Secret watch of a served Cluster (slurm-poller) is a watcher too: its list has a
    field selector, so the storage part of a restart answers it 429 until the cache is up."""
    async with Stack(nodes=2, components=("kube-watcher", "slurm-poller")) as stack:
        stack.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "alpha-token", "namespace": NS},
                "data": {"auth-token": base64.b64encode(b"t").decode()},
            }
        )
        stack.kube.create(
            {
                "apiVersion": "slinky.slurm.net/v1alpha1",
                "kind": "Cluster",
                "metadata": {"name": "alpha", "namespace": NS},
                "spec": {
                    "server": stack.slurm.url,
                    "token": {"secretRef": {"name": "alpha-token"}},
                },
            }
        )
        app = stack.app
        assert app is not None and app.clusters is not None
        await stack.wait_for(lambda: "alpha" in app.clusters.running, what="alpha served")
        await stack.wait_for(
            lambda: stack.kube.requests[("watch", "secrets")] >= 1, what="Secret watched"
        )
        caplog.set_level(logging.INFO, logger="slurmbridge.clusters")
        caplog.clear()

        stack.kube.restart_window(0.0, 3.0)
        await stack.wait_for(lambda: not stack.kube.starting, timeout=10, what="window over")

        def lines(level: int) -> list[str]:
            return [
                r.getMessage()
                for r in caplog.records
                if r.name == "slurmbridge.clusters"
                and r.levelno == level
                and "watching Secret" in r.getMessage()
            ]

        after = stack.kube.requests[("watch", "secrets")]
        await stack.wait_for(
            lambda: stack.kube.requests[("watch", "secrets")] > after,
            timeout=15,
            what="the Secret watched again after the window",
        )
        assert stack.kube.requests[("list", "secrets")] >= 3  # it did meet the 429s …
        assert len(lines(logging.WARNING)) == 1, lines(logging.WARNING)  # … and said so once
        await stack.wait_for(
            lambda: any(" recovered after " in m for m in lines(logging.INFO)),
            timeout=5,
            what="the Secret watch's recovery logged",
        )
