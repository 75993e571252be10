"""Kubernetes cordon → DRAIN request received by slurmrestd: p50/p99, idle and under churn.

The whole stack runs as in production, minus real clusters: nats-server, the Kubernetes API
simulator (the watcher sees the cordon through a real watch), the slurmrestd simulator in its
own process as slurmrestd would be (``bench/_slurmsim.py``; it timestamps the arrival of the
DRAIN request with the system-wide monotonic clock) and every component. A trial
cordons one node (``time.monotonic()`` before the PATCH) and ends when the DRAIN for that node
reaches the simulator; the node is then uncordoned and rotated out until it is clean again.

Churn: a separate process publishes KubeNode observations for 200 other nodes (that also
exist in Slurm, so both reconcilers run their whole rule) at ``--churn-rate`` events/s while
the second series runs.

    python bench/latency.py --json [--trials 500] [--churn-rate 1000]
    python bench/latency.py --json --loads 0,250,500,1000,2000 [--trials 200]

``--loads`` runs one series at each churn rate and reports p50/p90/p99/max and the rate the
pipeline actually settled for each (``loads``): what ``bench/plot.py`` draws.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit, machine, percentile
from schemas.events import KubeNode, SlurmNode
from slurmbridge.testing import Stack

CHURN = r"""
import asyncio, sys, time, nats, msgspec
sys.path.insert(0, sys.argv[4])
from schemas import events, subjects
from schemas.events import KubeNode, Taint
# Already tainted as node_taint wants it: churn exercises the pipeline, not the effectors.
TAINT = Taint(key="slinky.slurm.net/managed-node", value="slurm-bridge-scheduler",
              effect="NoExecute")
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


class RemoteSlurm:
    """bench/_slurmsim.py as a child process: URL, token file, and DRAIN arrival times."""

    user = "slurmrest"

    def __init__(self, nodes: int, extra: int, workdir: Path) -> None:
        self.token_file = workdir / "slurm-token"
        self.nodes = nodes
        self.extra = extra
        self.url = ""
        self.proc: asyncio.subprocess.Process | None = None
        self.waiters: dict[str, asyncio.Future[float]] = {}
        self.created: dict[str, float] = {}
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(Path(__file__).parent / "_slurmsim.py"),
            "--nodes",
            str(self.nodes),
            "--extra",
            str(self.extra),
            "--token-file",
            str(self.token_file),
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        line = (await asyncio.wait_for(self.proc.stdout.readline(), 30)).decode().split()
        self.url = line[1]
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            what, node, states, ts = raw.decode().split()
            if what == "CREATE":
                self.created[node] = float(ts)
                continue
            fut = self.waiters.pop(node, None) if "DRAIN" in states.split(",") else None
            if fut is not None and not fut.done():
                fut.set_result(float(ts))

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self.proc is not None:
            self.proc.terminate()
            await self.proc.wait()


async def series(stack: Stack, remote: RemoteSlurm, nodes: list[str], trials: int) -> list[float]:
    app = stack.app
    assert app is not None
    out: list[float] = []
    cleanups: set[asyncio.Task[None]] = set()

    def observed(node: str, drained: bool) -> bool:
        s = app.projection.get(SlurmNode, node)
        return s is not None and s.has("DRAIN") == drained

    async def cleanup(node: str) -> None:
        # Uncordon only once the poller has seen the drain: otherwise slurm_drain (rightly)
        # has nothing to undo yet, and the node would stay drained.
        await stack.wait_for(lambda: observed(node, True), timeout=30, what=f"{node} DRAIN seen")
        stack.uncordon(node)

    for i in range(trials):
        node = nodes[i % len(nodes)]

        def clean(node: str = node) -> bool:
            k = app.projection.get(KubeNode, node)
            return k is not None and not k.unschedulable and observed(node, False)

        await stack.wait_for(clean, timeout=30, what=f"{node} clean")
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        remote.waiters[node] = fut
        t0 = time.monotonic()
        stack.cordon(node)
        ts = await asyncio.wait_for(fut, 10)
        out.append((ts - t0) * 1000)
        if (i + 1) % 100 == 0:
            print(f"  {i + 1} trials", file=sys.stderr, flush=True)
        task = asyncio.create_task(cleanup(node))
        cleanups.add(task)
        task.add_done_callback(cleanups.discard)
    await asyncio.gather(*cleanups)
    return out


def summary(ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(ms, 50), 2),
        "p90_ms": round(percentile(ms, 90), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "max_ms": round(max(ms), 2),
    }


async def under_load(
    stack: Stack, remote: RemoteSlurm, nodes: list[str], trials: int, rate: float
) -> dict[str, float]:
    """A series of ``trials`` while a separate process publishes ``rate`` KubeNode
    observations a second (0: none); its percentiles and the rate the pipeline settled."""
    app = stack.app
    assert app is not None
    if rate <= 0:
        return {**summary(await series(stack, remote, nodes, trials)), "events_per_s": 0}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHURN,
            stack.nats.url,
            str(rate),
            "200",
            str(Path(__file__).resolve().parent.parent),
        ]
    )
    try:
        base = app.workers["slurm_drain"].settled
        t_churn = time.monotonic()
        await asyncio.sleep(2.0)  # let churn reach its rate before measuring
        churn = await series(stack, remote, nodes, trials)
        churned = app.workers["slurm_drain"].settled - base
        settled = churned / (time.monotonic() - t_churn)
    finally:
        proc.terminate()
        proc.wait()
    return {**summary(churn), "events_per_s": round(settled)}


async def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--churn-rate", type=float, default=1000.0)
    ap.add_argument("--nodes", type=int, default=40, help="nodes the trials rotate over")
    ap.add_argument(
        "--poll-interval",
        type=float,
        default=2.0,
        help="Slurm poll interval in seconds (the product default)",
    )
    ap.add_argument(
        "--loads",
        type=lambda text: [float(x) for x in text.split(",") if x.strip()],
        default=[],
        help="comma-separated churn rates (events/s; 0 = idle): one series at each instead "
        "of idle + --churn-rate (bench/plot.py --only latency)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="slurmbridge-latency-"))
    remote = RemoteSlurm(args.nodes, 200, workdir)
    await remote.start()
    stack = Stack(
        nodes=args.nodes,
        poll_interval=args.poll_interval,
        real_slurm=remote,
        settings={"observability": {"logLevel": "WARNING"}},
        workdir=workdir / "stack",
    )
    await stack.start()
    try:
        nodes = [f"n{i}" for i in range(1, args.nodes + 1)]
        await stack.settled(timeout=60)
        if args.loads:
            loads = [
                {"target_per_s": rate, **await under_load(stack, remote, nodes, args.trials, rate)}
                for rate in args.loads
            ]
        else:
            idle = await under_load(stack, remote, nodes, args.trials, 0)
            churn = await under_load(stack, remote, nodes, args.trials, args.churn_rate)
    finally:
        await stack.stop()
        await remote.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if args.loads:
        emit(
            {
                "trials": args.trials,
                "loads": loads,
                "poll_interval_s": args.poll_interval,
                "machine": machine(),
            },
            args.json,
        )
        return
    emit(
        {
            "trials": args.trials,
            "idle": {k: v for k, v in idle.items() if k != "events_per_s"},
            "churn": churn,
            "poll_interval_s": args.poll_interval,
            "machine": machine(),
        },
        args.json,
    )


if __name__ == "__main__":
    asyncio.run(main())
