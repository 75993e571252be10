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

It also measures the two other scale figures of issue 7:

* ``rss_mb_5k_150k_100k`` — the RSS of a process whose projection holds 5,000 KubeNodes,
  150,000 KubePods, 100,000 SlurmJobs and 5,000 SlurmNodes (realistic labels, annotations,
  conditions), measured in a fresh subprocess after ``gc.collect()``. Target ≤ 400 MB.
* ``catchup_s_1m`` — a restarted worker's catch-up: a real nats-server (file store) whose
  BRIDGE_OBS holds 1,000,000 observations (200,000 objects × 5 versions), then the seconds from
  ``Projection.start`` to caught up, as ``App.start`` does it (last message per subject).
  ``catchup_every_message_s`` replays all 1,000,000 in order (``every_message=True``, what
  ``replay`` does). Target ≤ 30 s.

    python bench/scale.py --json [--only poll,rss,catchup] [--nodes 10000] [--jobs 100000]
                                 [--cycles 5] [--events 1000000]

``--json`` → ``{"slurm_poll_ms_10k_100k", "rss_mb_5k_150k_100k", "catchup_s_1m", …}``
(the first poll, which publishes every object, is reported apart).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit, machine
from producers.slurm import SlurmPoller
from schemas import events, streams, subjects
from schemas.events import Event
from slurmbridge import bus as busmod
from slurmbridge.bus import Published
from slurmbridge.config import NatsSettings
from slurmbridge.natsserver import NatsServer
from slurmbridge.projection import Projection
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


# --- projection memory and catch-up ----------------------------------------------------------


def sample_events(nodes: int, pods: int, jobs: int, *, version: int = 0) -> Iterator[events.Event]:
    """Realistic observations: Kubernetes nodes with labels and conditions, pods of Jobs with
    labels, annotations and a finalizer, Slurm jobs with our marker and Slurm nodes."""
    now = int(time.time())
    for i in range(nodes):
        yield events.KubeNode(
            source="k8s",
            key=f"node{i:05d}",
            uid=f"{i:08x}-node-uid-0000-000000000000",
            labels={
                "kubernetes.io/hostname": f"node{i:05d}",
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "c7.16xlarge",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
            },
            ready=True,
            cpu_millis=64_000,
            memory_bytes=256 * 2**30,
            conditions=(events.NodeCondition(type="Ready", status="True", reason="KubeletReady"),),
            taints=(
                events.Taint(
                    key="slinky.slurm.net/managed-node",
                    value="slurm-bridge-scheduler",
                    effect="NoExecute",
                ),
            ),
            observed_at=now,
            version=f"v{version}",
        )
        yield events.SlurmNode(
            source="slurm:default",
            key=f"node{i:05d}",
            cluster="default",
            state=("IDLE",) if i % 2 else ("ALLOCATED",),
            cpus=64,
            alloc_cpus=0 if i % 2 else 64,
            real_memory=256_000,
            partitions=("batch",),
            address=f"10.0.{i // 250}.{i % 250}",
            observed_at=now,
            version=f"v{version}",
        )
    for i in range(pods):
        ns, job = f"team-{i % 50}", f"train-{i // 8}"
        yield events.KubePod(
            source="k8s",
            key=f"{ns}/{job}-{i % 8}-x{i:06d}",
            uid=f"{i:08x}-pod-uid-0000-000000000000",
            namespace=ns,
            name=f"{job}-{i % 8}-x{i:06d}",
            phase="Running",
            node_name=f"node{i % max(nodes, 1):05d}",
            scheduler_name="slurm-bridge-scheduler",
            labels={
                "batch.kubernetes.io/job-name": job,
                "job-name": job,
                "controller-uid": f"{i // 8:08x}-job-uid",
                "scheduler.slinky.slurm.net/slurm-jobid": str(100_000 + i // 8),
            },
            annotations={"slinky.slurm.net/slurm-node": f"node{i % max(nodes, 1):05d}"},
            finalizers=("scheduler.slinky.slurm.net/finalizer",),
            cpu_millis=4000,
            memory_bytes=8 * 2**30,
            owner=events.OwnerRef(api_version="batch/v1", kind="Job", name=job, uid="u"),
            ready=True,
            created_at=now,
            observed_at=now,
            version=f"v{version}",
        )
    for i in range(jobs):
        yield events.SlurmJob(
            source="slurm:default",
            key=str(100_000 + i),
            cluster="default",
            job_id=100_000 + i,
            name=f"team-{i % 50}/Job:train-{i}",
            state=("RUNNING",) if i % 3 else ("PENDING",),
            nodes=(f"node{i % max(nodes, 1):05d}",) if i % 3 else (),
            partition="batch",
            comment=f"slurmbridge:team-{i % 50}/Job:train-{i}",
            user_id=1000,
            submit_time=now,
            start_time=now,
            time_limit_minutes=60,
            node_count=1,
            observed_at=now,
            version=f"v{version}",
        )


RSS_CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[4])
from bench.scale import rss_mb, sample_events
from slurmbridge.projection import Projection
before = rss_mb()
p = Projection()
t0 = time.perf_counter()
for seq, ev in enumerate(sample_events(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])), 1):
    p.apply(ev, seq)
applied = time.perf_counter() - t0
gc.collect()
print(json.dumps({"rss_mb": rss_mb(), "rss_before_mb": before, "objects": seq,
                  "apply_s": round(applied, 2)}))
"""


def rss_mb() -> float:
    """This process's resident set size, MB (VmRSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def measure_rss(nodes: int, pods: int, jobs: int) -> dict[str, object]:
    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run(
        [sys.executable, "-c", RSS_CHILD, str(nodes), str(pods), str(jobs), root],
        capture_output=True,
        text=True,
        check=True,
    )
    child = json.loads(out.stdout.strip().splitlines()[-1])
    key = f"rss_mb_{nodes // 1000}k_{pods // 1000}k_{jobs // 1000}k"
    return {
        key: child["rss_mb"],
        "rss_after_imports_mb": child["rss_before_mb"],
        "projection_objects": child["objects"],
        "projection_apply_s": child["apply_s"],
    }


async def measure_catchup(total: int) -> dict[str, object]:
    """``total`` observations (objects × 5 versions) in a real BRIDGE_OBS, then catch-up."""
    versions = 5
    objects = total // versions
    pods = objects * 3 // 4
    jobs = objects - pods
    work = Path(tempfile.mkdtemp(prefix="slurmbridge-catchup-"))
    async with NatsServer(store_dir=work / "nats") as srv:
        bus = await busmod.connect(NatsSettings(), srv.url)
        try:
            await bus.ensure_streams(streams.stream_specs())
            t0 = time.perf_counter()
            sent = 0
            for v in range(versions):
                batch = bus.batch()
                for ev in sample_events(0, pods, jobs, version=v):
                    subject = subjects.obs_subject(ev.source, events.kind_of(ev), ev.key)
                    await batch.publish(subject, events.encode_event(ev))
                    sent += 1
                    if len(batch) >= 50_000:
                        await batch.flush()
                        batch = bus.batch()
                await batch.flush()
            publish_s = time.perf_counter() - t0
            held = (await bus.js.stream_info(streams.OBS_STREAM)).state.messages
            results: dict[str, object] = {
                "catchup_events": held,
                "catchup_objects": objects,
                "catchup_publish_s": round(publish_s, 1),
            }
            for name, every in (("catchup_s_1m", False), ("catchup_every_message_s", True)):
                p = Projection()
                t1 = time.perf_counter()
                await p.start(bus, every_message=every)
                await p.wait_caught_up(timeout=600)
                results[name] = round(time.perf_counter() - t1, 2)
                await p.stop()
                assert len(list(p.values(events.KubePod))) == pods, "not every pod applied"
            results["catchup_msgs_per_s"] = round(held / float(results["catchup_every_message_s"]))  # type: ignore[arg-type]
            return results
        finally:
            await bus.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="poll,rss,catchup", help="comma-separated parts to run")
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--rss-nodes", type=int, default=5_000)
    ap.add_argument("--rss-pods", type=int, default=150_000)
    ap.add_argument("--rss-jobs", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    parts = set(args.only.split(","))
    result: dict[str, object] = {"machine": machine()}
    if "poll" in parts:
        result.update(asyncio.run(measure(args.nodes, args.jobs, args.cycles)))
    if "rss" in parts:
        result.update(measure_rss(args.rss_nodes, args.rss_pods, args.rss_jobs))
    if "catchup" in parts:
        result.update(asyncio.run(measure_catchup(args.events)))
    emit(result, args.json)


if __name__ == "__main__":
    main()
