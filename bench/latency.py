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
    python bench/latency.py --json --slurm real [--release 26.05] [--trials 200]

``--loads`` runs one series at each churn rate and reports p50/p90/p99/max and the rate the
pipeline actually settled for each (``loads``): what ``bench/plot.py`` draws.

``--slurm real`` (root; the release's root file system built once with
``python -m slurmbridge.devtools.realslurm_modern install 26.05``) starts its own real Slurm
cluster of
``--nodes`` nodes (default 4) instead of the simulator, and stops it at the end. The bench
reads Slurm itself through slurmrestd (``GET node/{name}``, its own connection, back to back
while a trial is open). Two series, idle (no churn):

* **cordon → DRAIN**: from ``time.monotonic()`` before the cordon PATCH to the receipt of the
  first REST answer whose node state has DRAIN;
* **uncordon → undrained**: once slurmbridge's poller has seen that DRAIN (it only undoes a
  drain it has observed), from before the uncordon PATCH to the receipt of the first REST
  answer without DRAIN.

Each node runs its own cordon/uncordon cycles; the timed windows hold a lock, so no two
overlap, while the waits for the poller (``--poll-interval``) run side by side. ``--trials``
(default 50 per node) is bounded by ``--max-seconds``.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import add_slurm_options, emit, machine, percentile, real_slurm_fields
from schemas.events import KubeNode, SlurmNode
from slurmbridge.devtools.testing import SlurmEndpoint, Stack

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


def _stack(args: argparse.Namespace, slurm: SlurmEndpoint, workdir: Path) -> Stack:
    """slurmbridge in this process (quiet logs) on ``args.nodes`` simulated Kubernetes nodes,
    polling ``slurm`` (a real cluster, or the remote simulator) every ``args.poll_interval``."""
    return Stack(
        nodes=args.nodes,
        poll_interval=args.poll_interval,
        real_slurm=slurm,
        settings={"observability": {"logLevel": "WARNING"}},
        workdir=workdir / "stack",
    )


async def real_slurm(args: argparse.Namespace) -> dict[str, Any]:
    """Cordon → DRAIN and uncordon → undrained against a real Slurm ``args.release``."""
    from bench._realslurm import Probe, cluster

    nodes = [f"n{i}" for i in range(1, args.nodes + 1)]
    per_node = -(-args.trials // args.nodes)
    drain: list[float] = []
    undrain: list[float] = []
    window = asyncio.Lock()
    workdir = Path(tempfile.mkdtemp(prefix="slurmbridge-latency-"))
    t_start = time.monotonic()
    async with cluster(args.release, args.nodes) as slurm, Probe(slurm) as probe:
        stack = _stack(args, slurm, workdir)
        await stack.start()
        try:
            app = stack.app
            assert app is not None
            await stack.settled(timeout=60)
            deadline = time.monotonic() + args.max_seconds

            def seen(node: str, drained: bool) -> bool:
                s = app.projection.get(SlurmNode, node)
                return s is not None and s.has("DRAIN") == drained

            def schedulable(node: str) -> bool:
                k = app.projection.get(KubeNode, node)
                return k is not None and not k.unschedulable

            async def cycles(node: str) -> None:
                for _ in range(per_node):
                    if time.monotonic() > deadline:
                        return
                    # A clean node: slurmbridge sees it schedulable and undrained, and Slurm
                    # has it back (no DRAIN, responding again after the UNDRAIN).
                    await stack.wait_for(
                        lambda: schedulable(node) and seen(node, False),
                        timeout=30,
                        what=f"{node} clean",
                    )
                    await probe.node_until(
                        node,
                        lambda st: not st & {"DRAIN", "NOT_RESPONDING"},
                        timeout=30,
                        interval=0.05,
                    )
                    async with window:
                        t0 = time.monotonic()
                        stack.cordon(node)
                        got = await probe.node_until(node, lambda st: "DRAIN" in st, timeout=10)
                        drain.append((got.by - t0) * 1000)
                        if len(drain) % 50 == 0:
                            print(f"  {len(drain)} trials", file=sys.stderr, flush=True)
                    await stack.wait_for(
                        lambda: seen(node, True), timeout=30, what=f"{node} DRAIN seen"
                    )
                    async with window:
                        t0 = time.monotonic()
                        stack.uncordon(node)
                        got = await probe.node_until(node, lambda st: "DRAIN" not in st, timeout=10)
                        undrain.append((got.by - t0) * 1000)

            await asyncio.gather(*(cycles(n) for n in nodes))
        finally:
            await stack.stop()
            shutil.rmtree(workdir, ignore_errors=True)
        version = slurm.slurm_version
        api = probe.version
        rtt = sorted(probe.rtts)
    elapsed = time.monotonic() - t_start
    return {
        **real_slurm_fields(args, version, api),
        "trials": len(drain),
        "trials_asked": per_node * args.nodes,
        "cordon_to_drain": summary(drain),
        "uncordon_to_undrained": summary(undrain),
        "probe_rtt_p50_ms": round(percentile(rtt, 50) * 1000, 2),
        "probe_rtt_p99_ms": round(percentile(rtt, 99) * 1000, 2),
        "poll_interval_s": args.poll_interval,
        "elapsed_s": round(elapsed, 1),
        "machine": machine(),
    }


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
    add_slurm_options(ap)
    ap.add_argument(
        "--trials", type=int, default=None, help="trials per series (500; real: 50 per node)"
    )
    ap.add_argument("--churn-rate", type=float, default=1000.0)
    ap.add_argument(
        "--nodes", type=int, default=None, help="nodes the trials rotate over (40; real: 4)"
    )
    ap.add_argument(
        "--max-seconds",
        type=float,
        default=600.0,
        help="real: start no trial after this many seconds (600)",
    )
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
    if args.slurm == "real":
        if args.loads:
            ap.error("--loads is for the simulator only (--slurm real measures idle)")
        args.nodes = args.nodes or 4
        args.trials = args.trials or 50 * args.nodes
        emit(await real_slurm(args), args.json)
        return
    args.nodes = args.nodes or 40
    args.trials = args.trials or 500
    workdir = Path(tempfile.mkdtemp(prefix="slurmbridge-latency-"))
    remote = RemoteSlurm(args.nodes, 200, workdir)
    await remote.start()
    stack = _stack(args, remote, workdir)
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
