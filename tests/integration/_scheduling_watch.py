"""Run one Workload API watcher (producers.kube.watch.SchedulingWatcher) against a KubeSim
until its first complete listing, and return what it published."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from producers.kube.watch import SCHEDULING_KINDS, SchedulingWatcher
from schemas.events import Event, KubeListed
from slurmbridge.config import KubeSettings
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.devtools.testing import wait_until
from slurmbridge.kube import client as kube


async def first_listing(sim: KubeSim, plural: str, tmp_path: Path) -> list[Event]:
    """The events the watcher of ``plural`` (an entry of SCHEDULING_KINDS) published up to
    and including its first ``KubeListed``."""
    api = await kube.api_client(
        KubeSettings(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig")))
    )
    published: list[Event] = []

    async def publish(batch: list[tuple[Event, str]]) -> None:
        published.extend(ev for ev, _ in batch)

    kind = next(k for k in SCHEDULING_KINDS if k[1] == plural)
    watcher = SchedulingWatcher(api, publish, producer="test", seed={}, kind=kind)
    watcher.missing_retry = 0.05
    task = asyncio.create_task(watcher.run())
    try:
        await wait_until(
            lambda: any(isinstance(e, KubeListed) for e in published), what="a listing"
        )
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await api.close()
    return published
