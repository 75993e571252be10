"""A healthy quiet watch is not stale (issue 17, finding 5).

A real API server (1.32) sent no bookmark in 125 s on idle Nodes: the watch cache sends one only
when the kind's resourceVersion moved past the watch's start. So "seconds since the last event or
bookmark" grows without bound on a healthy quiet watch. What bounds a healthy watch is the
server's ``timeoutSeconds``: it ends the stream cleanly every ``watch_timeout`` seconds and the
watcher re-opens it, so the exported liveness stays under ``watch_timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from producers.kube.watch import NodeWatcher
from slurmbridge.config import KubeSettings
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.kube import client as kube

pytestmark = pytest.mark.integration


def _sample(name: str, resource: str) -> float | None:
    value: float | None = REGISTRY.get_sample_value(name, {"resource": resource})
    return value


async def test_a_quiet_watch_gets_no_bookmark_and_is_not_reported_stale(tmp_path: Path) -> None:
    watch_timeout = 1  # the server ends every watch after 1 s; quiet for 4 of them
    async with KubeSim() as sim:
        sim.add_node("n1")
        api = await kube.api_client(
            KubeSettings(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig")))
        )
        published: list[Any] = []

        async def publish(batch: list[tuple[Any, str]]) -> None:
            published.extend(ev for ev, _ in batch)

        watcher = NodeWatcher(api, publish, producer="test", seed={}, watch_timeout=watch_timeout)
        task = asyncio.create_task(watcher.run())
        try:
            async with asyncio.timeout(5):
                while not watcher.watching:
                    await asyncio.sleep(0.01)
            watches = sim.requests[("watch", "nodes")]
            ages: list[float] = []
            exported: list[float | None] = []
            connected: list[float | None] = []
            loop = asyncio.get_running_loop()
            end = loop.time() + 4 * watch_timeout + 0.5
            while loop.time() < end:
                ages.append(watcher.age())
                exported.append(_sample("slurmbridge_watch_seconds_since_alive", "nodes"))
                connected.append(_sample("slurmbridge_watch_connected", "nodes"))
                await asyncio.sleep(0.05)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await api.close()

    # Nothing changed, so the server sent nothing: no event, no bookmark …
    assert sim.bookmarks["nodes"] == 0
    # … and the server's timeout ended the stream cleanly, again and again (no failures).
    assert sim.requests[("watch", "nodes")] - watches >= 3
    assert watcher.relists == 1
    # Yet the watch is alive: never older than the server's timeout (plus a reconnect), where
    # "seconds since the last event" passed 4 s.
    assert max(ages) < watch_timeout + 0.5, max(ages)
    assert all(v is not None for v in exported), "exported while it runs"
    assert max(v for v in exported if v is not None) < watch_timeout + 0.5
    assert sum(c == 1 for c in connected) > 0.8 * len(connected), connected
    # Once stopped, its series are gone rather than growing stale.
    assert _sample("slurmbridge_watch_seconds_since_alive", "nodes") is None
    assert _sample("slurmbridge_watch_connected", "nodes") is None
