"""Scale: what one Slurm poll cycle costs slurmbridge on a large cluster (issue 7).

The slurmrestd simulator runs in its own process with ``--nodes`` nodes and ``--jobs``
pending jobs (API v0.0.44); it changes one node and one job every 100 ms, so every poll's
conditional requests (``update_time``) return the full listings — the worst steady state,
a busy cluster. This process runs the real client and :class:`producers.slurm.SlurmPoller`
(ping, nodes, partitions, jobs: request, msgspec decode into models, translate to events,
content-hash diff against the last snapshot) with a publisher that only counts, and reports
the CPU time this process spent per cycle (``time.process_time``; the simulator's CPU is not
in it) and the wall time. Target (issue 7): ≤ 200 ms CPU per cycle at 10,000 nodes and
100,000 jobs, i.e. ≤ 10 % of a core at the 2 s poll interval.

    python bench/scale.py --json [--nodes 10000] [--jobs 100000] [--cycles 5]

``--json`` → ``{"slurm_poll_ms_10k_100k", "slurm_poll_wall_ms", "first_poll_ms", …}``
(the first poll, which publishes every object, is reported apart).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit, machine
from producers.slurm import SlurmPoller
from schemas.events import Event
from slurmbridge.bus import Published
from slurmbridge.slurm.client import SlurmClient

SIM = r"""
import asyncio, sys
from slurmbridge.sim.slurmrestd import SlurmSim

async def main(nodes, jobs, token_file):
    sim = SlurmSim(cluster="default")
    for i in range(nodes):
        sim.add_node(f"node{i:05d}", cpus=64, real_memory=256000, partitions=("batch",))
    for i in range(jobs):
        job = sim._make_job({"partition": "batch", "tasks": 1, "name": f"job{i}"},
                            external=False, user_id=1000)
        sim.jobs_by_id[job.job_id] = job
    sim._jobs_touched()
    await sim.start(versions=("v0.0.44",))
    sim.write_token(token_file)
    print("URL", sim.url, flush=True)
    first = min(sim.jobs_by_id)
    i = 0
    while True:  # a busy cluster: something changes between any two polls
        await asyncio.sleep(0.1)
        i += 1
        sim.update_job(first + i % jobs, name=f"renamed{i}")
        sim._touch_nodes()

asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
"""


async def measure(nodes: int, jobs: int, cycles: int) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="slurmbridge-scale-"))
    token = work / "token"
    proc = subprocess.Popen(
        [sys.executable, "-c", SIM, str(nodes), str(jobs), str(token)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.get_running_loop().run_in_executor(None, proc.stdout.readline)
        if not line.startswith("URL "):
            raise RuntimeError(f"simulator did not start: {line!r}")
        url = line.split()[1]
        published = 0

        async def publish(batch: Sequence[tuple[Event, str]]) -> list[Published]:
            nonlocal published
            start = published
            published += len(batch)
            return [Published("", start + i + 1, False) for i in range(len(batch))]

        async with SlurmClient(url, token_file=token, timeout=120) as client:
            await client.negotiate()
            poller = SlurmPoller(
                client,
                publish,
                cluster="default",
                producer="bench",
                poll_interval=2.0,
                seed={},
            )
            cpu0, wall0 = time.process_time(), time.perf_counter()
            await poller.poll_once()
            first_cpu = time.process_time() - cpu0
            first_wall = time.perf_counter() - wall0
            first_published = published
            cpu: list[float] = []
            wall: list[float] = []
            for _ in range(cycles):
                await asyncio.sleep(0.25)  # let the simulator change something
                c0, w0 = time.process_time(), time.perf_counter()
                await poller.poll_once()
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - w0)
    finally:
        proc.terminate()
        proc.wait(10)
    return {
        "machine": machine(),
        "nodes": nodes,
        "jobs": jobs,
        "cycles": cycles,
        "slurm_poll_ms_10k_100k": round(statistics.median(cpu) * 1000, 1),
        "slurm_poll_cpu_ms_max": round(max(cpu) * 1000, 1),
        "slurm_poll_wall_ms": round(statistics.median(wall) * 1000, 1),
        "cpu_share_at_2s": round(statistics.median(cpu) / 2.0, 3),
        "first_poll_ms": round(first_cpu * 1000, 1),
        "first_poll_wall_ms": round(first_wall * 1000, 1),
        "first_poll_published": first_published,
        "steady_published_per_cycle": round((published - first_published) / cycles, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    emit(asyncio.run(measure(args.nodes, args.jobs, args.cycles)), args.json)


if __name__ == "__main__":
    main()
