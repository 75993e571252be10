"""Kubernetes cordon → DRAIN request received by slurmrestd: p50/p99, idle and under churn.

The whole stack runs as in production, minus real clusters: nats-server, the Kubernetes API
simulator (the watcher sees the cordon through a real watch), the slurmrestd simulator (its
``on_update`` hook timestamps the arrival of the DRAIN request) and every component. A trial
cordons one node (``time.monotonic()`` before the PATCH) and ends when the DRAIN for that node
reaches the simulator; the node is then uncordoned and rotated out until it is clean again.

Churn: a separate process publishes KubeNode observations for 200 other nodes (that also
exist in Slurm, so both reconcilers run their whole rule) at ``--churn-rate`` events/s while
the second series runs.

    python bench/latency.py --json [--trials 500] [--churn-rate 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit, machine, percentile
from schemas.events import KubeNode, SlurmNode
from slurmbridge.slurm.models import NodeUpdate
from slurmbridge.testing import Stack

CHURN = r"""
import asyncio, sys, time, nats, msgspec
sys.path.insert(0, sys.argv[4])
from schemas import events, subjects
from schemas.events import KubeNode, Taint
# Already tainted as node_taint wants it: churn exercises the pipeline, not the effectors.
TAINT = Taint(key="slinky.slurm.net/managed-node", value="slurm-bridge-scheduler", effect="NoExecute")
async def run():
    url, rate, nodes = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    nc = await nats.connect(url)
    js = nc.jetstream(publish_async_max_pending=4096)
    i = 0
    t0 = time.monotonic()
    while True:
        # publish in 10 ms slices to hold the rate
        due = int((time.monotonic() - t0) * rate)
        futs = []
        while i < due:
            k = i % nodes
            ev = KubeNode(source="k8s", key=f"churn-{k}", uid=f"c{k}", version=str(i),
                          labels={"churn": str(i)}, ready=True, taints=(TAINT,))
            futs.append(await js.publish_async(subjects.obs_subject("k8s", "KubeNode", ev.key),
                                               events.encode_event(ev)))
            i += 1
        if futs:
            await asyncio.gather(*futs)
        await asyncio.sleep(0.01)
asyncio.run(run())
"""


async def series(stack: Stack, nodes: list[str], trials: int) -> list[float]:
    app = stack.app
    assert app is not None
    arrived: dict[str, float] = {}
    waiters: dict[str, asyncio.Future[float]] = {}

    def on_update(name: str, update: NodeUpdate, ts: float) -> None:
        if "DRAIN" in update.state:
            arrived[name] = ts
            fut = waiters.pop(name, None)
            if fut is not None and not fut.done():
                fut.set_result(ts)

    stack.slurm.on_update.append(on_update)
    out: list[float] = []
    try:
        for i in range(trials):
            node = nodes[i % len(nodes)]

            def clean(node: str = node) -> bool:
                k = app.projection.get(KubeNode, node)
                s = app.projection.get(SlurmNode, node)
                return (
                    k is not None
                    and not k.unschedulable
                    and s is not None
                    and not s.has("DRAIN")
                    and not stack.slurm_node(node).has("DRAIN")
                )

            await stack.wait_for(clean, timeout=30, what=f"{node} clean")
            fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
            waiters[node] = fut
            t0 = time.monotonic()
            stack.cordon(node)
            ts = await asyncio.wait_for(fut, 10)
            out.append((ts - t0) * 1000)
            if (i + 1) % 100 == 0:
                print(f"  {i + 1} trials", file=sys.stderr, flush=True)
            stack.uncordon(node)
    finally:
        stack.slurm.on_update.remove(on_update)
    return out


def summary(ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(ms, 50), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "max_ms": round(max(ms), 2),
    }


async def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--churn-rate", type=float, default=1000.0)
    ap.add_argument("--nodes", type=int, default=40, help="nodes the trials rotate over")
    ap.add_argument("--poll-interval", type=float, default=0.25)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    stack = Stack(
        nodes=args.nodes,
        poll_interval=args.poll_interval,
        settings={"observability": {"logLevel": "WARNING"}},
    )
    await stack.start()
    try:
        for k in range(200):
            stack.slurm.add_node(f"churn-{k}", cpus=2, real_memory=1000, partitions=("batch",))
        nodes = [f"n{i}" for i in range(1, args.nodes + 1)]
        await stack.settled(timeout=60)
        idle = await series(stack, nodes, args.trials)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHURN,
                stack.nats.url,
                str(args.churn_rate),
                "200",
                str(Path(__file__).resolve().parent.parent),
            ]
        )
        try:
            app = stack.app
            assert app is not None
            base = app.workers["slurm_drain"].settled
            t_churn = time.monotonic()
            await asyncio.sleep(2.0)  # let churn reach its rate before measuring
            churn = await series(stack, nodes, args.trials)
            churned = app.workers["slurm_drain"].settled - base
            rate = churned / (time.monotonic() - t_churn)
        finally:
            proc.terminate()
            proc.wait()
    finally:
        await stack.stop()
    emit(
        {
            "trials": args.trials,
            "idle": summary(idle),
            "churn": {**summary(churn), "events_per_s": round(rate)},
            "poll_interval_s": args.poll_interval,
            "machine": machine(),
        },
        args.json,
    )


if __name__ == "__main__":
    asyncio.run(main())
