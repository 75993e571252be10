"""A worker deciding many keys lets the event loop run between them (issue 30, item 4): a
decide that performs nothing never suspends, so a start-up resync or a burst of many keys ran
as one synchronous block — 10,000 queued groups were seconds without a lease renewal, and
the leases expired under it (slurmbridge.runtime.leases renews on the same loop)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from reconcilers.base import Context, Decision, ReconcilerSpec
from schemas import streams
from schemas.actions import AnyAction
from schemas.events import KubeNode
from slurmbridge.config import NatsSettings, WorkerSettings
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.natsserver import NatsServer
from slurmbridge.runtime.outcomes import EffectResult
from slurmbridge.runtime.projection import Projection
from slurmbridge.runtime.worker import Worker

KEYS = 100


class Nothing:
    async def apply(self, action: AnyAction) -> EffectResult:
        raise AssertionError(f"no action expected, got {action!r}")


async def until(cond: Callable[[], bool], timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.01)


async def test_a_resync_of_many_keys_lets_other_tasks_run_meanwhile(
    nats_server: NatsServer,
) -> None:
    decided: list[str] = []

    def view(store: object, key: str, ctx: object) -> str:
        # A view that takes a while (placement reads a group's pods, nodes and job): 2 ms.
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end:
            pass
        decided.append(key)
        return key

    spec = ReconcilerSpec(
        name="breathes",
        keys={KubeNode: lambda ev, store, ctx: [ev.key]},
        key_kind="KubeNode",
        all_keys=lambda store, ctx: [f"k{i}" for i in range(KEYS)],
        view=view,
        decide=lambda _: Decision(reason="in sync"),
    )
    bus = await busmod.connect(NatsSettings(), nats_server.url)
    projection = Projection()
    worker: Worker | None = None
    seen: list[int] = []
    try:
        await bus.ensure_streams(streams.stream_specs(storage="file"))
        await projection.start(bus)
        await projection.wait_caught_up(10)
        worker = Worker(
            spec,
            bus=bus,
            projection=projection,
            effector=Nothing(),
            ctx=Context(scheduler_name="sched", cluster="c1"),
            settings=WorkerSettings(max_deliver=5),
            instance_id="test",
        )

        async def watch() -> None:
            # Another task on the loop (a lease renewal): when does it get to run?
            while len(decided) < KEYS:
                seen.append(len(decided))
                await asyncio.sleep(0)

        watcher = asyncio.create_task(watch())
        await worker.start()
        await until(lambda: len(decided) >= KEYS)
        await asyncio.wait_for(watcher, 10)
    finally:
        if worker is not None:
            await worker.stop()
        await projection.stop()
        await bus.close()
    assert sorted(decided) == sorted(f"k{i}" for i in range(KEYS))
    # 100 decides of 2 ms: the other task ran while they were under way, not only after.
    assert any(0 < n < KEYS for n in seen), sorted(set(seen))
