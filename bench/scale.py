"""Scale: what one Slurm poll cycle costs slurmbridge on a large cluster (issue 7).

The slurmrestd simulator runs in its own process with ``--nodes`` nodes and ``--jobs``
pending jobs (API v0.0.44). Every 100 ms it changes one node, renames one job, ends one job
and submits one, so every poll's conditional requests (``update_time``) return the full
listings and every poll sees ~20 jobs change state and ~20 new ones — a busy cluster. This
process runs the real client and :class:`producers.slurm.poller.SlurmPoller` (ping, nodes,
partitions, jobs: request, msgspec decode into models, translate to events, diff) with a
publisher that only counts, and reports the CPU time this process spent per cycle
(``time.process_time``; the simulator's CPU is not in it) and the wall time.

The poller reads every job only every ``slurm.jobRelistInterval`` (30 s, i.e. one poll in
15 at the 2 s interval); the polls between read ``GET jobs/state`` and fetch the jobs whose
state changed. The bench measures ``--relist-every`` (15) consecutive cycles, the first of
them a full listing, and reports ``slurm_poll_ms_10k_100k`` = the mean CPU per cycle over
that window (what a 2 s cycle costs on average, full listing included), the median of the
state-only cycles and the full-listing cycle apart. ``--relist-every 1`` measures a full
listing every poll (``jobRelistInterval: 0``, the behaviour before). Target (issue 7):
≤ 200 ms CPU per cycle at 10,000 nodes and 100,000 jobs, i.e. ≤ 10 % of a core at the 2 s
poll interval.

It also measures the two other scale figures of issue 7:

* ``rss_mb_5k_150k_100k`` — the VmRSS of a fresh process whose projection holds 5,000
  KubeNodes, 5,000 SlurmNodes, 150,000 KubePods and 100,000 SlurmJobs (:func:`sample_events`:
  the fields the producers keep, at typical sizes), fed as a worker is fed — each event encoded
  and decoded from its bytes (``Projection.feed``), so no string is shared that would not be
  shared in production — then with the indexes the reconcilers build (:data:`INDEXES`), after
  ``gc.collect()``. Also the RSS after imports, the delta, the RSS without indexes, and where the
  memory goes (``rss_breakdown``: deep ``sys.getsizeof`` per kind, per field and per index).
  Target ≤ 400 MB.
* ``catchup_s_1m`` — a restarted worker's catch-up: a real nats-server (file store) with the
  streams as ``App.start`` makes them, BRIDGE_OBS holding ``--events`` observations
  (``--events / --versions`` objects × ``--versions`` messages each, none discarded), then a
  fresh worker process times ``Projection.start`` → ``wait_caught_up`` as ``App.start`` does it
  (the last message per subject, the garbage collector paused). ``catchup_every_msg_s_1m``
  replays every message in order (``every_message=True``). The publish time is reported
  apart. ``--versions 1`` makes every message the last of its subject (the restart then reads
  all of them). Target ≤ 30 s.

    python bench/scale.py --json [--only poll,rss,catchup] [--nodes 10000] [--jobs 100000]
        [--relist-every 15] [--rss-nodes 5000] [--pods 150000] [--rss-jobs 100000] [--no-breakdown]
        [--events 1000000] [--versions 5]

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
from producers.slurm.poller import SlurmPoller
from schemas import events, streams, subjects
from schemas.events import Event
from slurmbridge.config import NatsSettings
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.bus import Published
from slurmbridge.runtime.natsserver import NatsServer
from slurmbridge.runtime.projection import Projection
from slurmbridge.slurm.client import SlurmClient

SIM = r"""
import asyncio, sys
from slurmbridge.devtools.sim.slurmrestd import SlurmSim

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
    while True:  # a busy cluster: jobs end, arrive and change between any two polls
        await asyncio.sleep(0.1)
        i += 1
        renamed = sim.jobs_by_id.get(first + jobs // 2 + i)
        if renamed is not None:
            renamed.name = f"renamed{i}"
        ended = sim.jobs_by_id.get(first + i)
        if ended is not None:  # ends without a scheduling pass over 100,000 pending jobs
            ended.state, ended.end_time = "CANCELLED", int(sim._now())
        job = sim._make_job({"partition": "batch", "tasks": 1, "name": f"new{i}"},
                            external=False, user_id=1000)
        sim.jobs_by_id[job.job_id] = job
        sim._jobs_touched()
        sim._touch_nodes()

asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
"""


async def measure(nodes: int, jobs: int, relist_every: int) -> dict[str, object]:
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
                # The bench decides which cycle lists every job (below), not the clock: its
                # cycles are not 2 s apart.
                job_relist_interval=0 if relist_every == 1 else 1e9,
            )
            cpu0, wall0 = time.process_time(), time.perf_counter()
            await poller.poll_once()
            first_cpu = time.process_time() - cpu0
            first_wall = time.perf_counter() - wall0
            first_published = published
            first_state_cpu = None
            if relist_every > 1:
                # A poller's first state poll compares every job (it has no earlier state
                # list to compare entries with); once per poller, reported apart like the
                # first poll.
                await asyncio.sleep(0.25)
                c0 = time.process_time()
                await poller.poll_once()
                first_state_cpu = time.process_time() - c0
            cpu: list[float] = []
            wall: list[float] = []
            full: list[bool] = []
            for cycle in range(relist_every):
                await asyncio.sleep(0.25)  # let the simulator change something
                if cycle == 0:
                    poller._jobs_listed_at = None  # this cycle is the relist
                listed_at = poller._jobs_listed_at
                c0, w0 = time.process_time(), time.perf_counter()
                await poller.poll_once()
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - w0)
                full.append(poller._jobs_listed_at != listed_at)
    finally:
        proc.terminate()
        proc.wait(10)
    between = [c for c, f in zip(cpu, full, strict=True) if not f]
    listed = [c for c, f in zip(cpu, full, strict=True) if f]
    return {
        "nodes": nodes,
        "jobs": jobs,
        "relist_every": relist_every,
        "slurm_poll_ms_10k_100k": round(statistics.fmean(cpu) * 1000, 1),
        "slurm_poll_cpu_ms_max": round(max(cpu) * 1000, 1),
        "slurm_poll_state_cycle_ms": round(statistics.median(between) * 1000, 1)
        if between
        else None,
        "slurm_poll_full_listing_ms": round(statistics.median(listed) * 1000, 1)
        if listed
        else None,
        "full_listings": len(listed),
        "slurm_poll_wall_ms": round(statistics.median(wall) * 1000, 1),
        "cpu_share_at_2s": round(statistics.fmean(cpu) / 2.0, 3),
        "first_poll_ms": round(first_cpu * 1000, 1),
        "first_poll_wall_ms": round(first_wall * 1000, 1),
        "first_poll_published": first_published,
        "first_state_poll_ms": round(first_state_cpu * 1000, 1) if first_state_cpu else None,
        "steady_published_per_cycle": round((published - first_published) / relist_every, 1),
    }


# --- projection memory and catch-up ----------------------------------------------------------

#: What a worker running every reconciler indexes (``by_label`` / ``by_field`` build an index on
#: first use and keep it): reconcilers/_pods.py, nodeset/_view.py, autoscale.py, workload.py,
#: _nodes.py.
INDEXES: tuple[tuple[type[Event], str], ...] = (
    (events.KubePod, "batch.kubernetes.io/job-name"),
    (events.KubePod, "jobset.sigs.k8s.io/jobset-name"),
    (events.KubePod, "leaderworkerset.sigs.k8s.io/name"),
    (events.KubePod, "scheduling.x-k8s.io/pod-group"),
    (events.KubePod, "app.kubernetes.io/instance"),
    (events.KubePod, ".name"),
    (events.KubeNode, "slinky.slurm.net/slurm-nodename"),
    (events.SlurmJob, ".partition"),
    (events.SlurmJob, ".comment"),
)

POD_GROUP = 4  # pods per batch/v1 Job (one placeholder Slurm job each)


def size_tag(n: int) -> str:
    """``1000000`` → ``1m``, ``150000`` → ``150k``, ``500`` → ``500``."""
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n >= 1000:
        return f"{n // 1000}k"
    return str(n)


def mix(objects: int) -> tuple[int, int, int]:
    """(nodes, pods, jobs) in the proportions of the memory figure (5k × 2 : 150k : 100k)."""
    nodes = objects * 5 // 260
    pods = objects * 150 // 260
    return nodes, pods, objects - 2 * nodes - pods


def _uid(kind: int, i: int, version: int = 0) -> str:
    return f"{i:08x}-{kind:04x}-4{version:03x}-8000-{(i * 2654435761) % 2**48:012x}"


def sample_events(nodes: int, pods: int, jobs: int, *, version: int = 0) -> Iterator[Event]:
    """Realistic observations, as the producers build them (see producers/kube/translate.py
    and producers/slurm/translate.py for what is kept): ``nodes`` KubeNodes (the 11 labels of
    a cloud node,
    Slurm's taint) and as many SlurmNodes; ``pods`` pods of indexed batch/v1 Jobs of
    :data:`POD_GROUP` pods (the Job controller's labels, Slinky's annotation and finalizer, the
    Job's finalizer, owner, PodScheduled, tolerations); ``jobs`` Slurm jobs, first the
    placeholder of each pod group (our marker, the pods in ``admin_comment``), the rest native
    batch jobs. ``version`` changes the resourceVersion / content hash, time and state."""
    now_ns = time.time_ns() + version * 1_000_000_000
    now = now_ns // 1_000_000_000
    producer = f"slurmbridge-7d9f6c5b8-x2q7w-{1000 + version}"
    n = max(nodes, 1)
    for i in range(nodes):
        name = f"node{i:05d}"
        zone = f"us-east-1{'abc'[i % 3]}"
        yield events.KubeNode(
            source="k8s",
            key=name,
            observed_at=now_ns + i,
            version=str(41_000_000 + version * 1_000_000 + i),
            producer=producer,
            uid=_uid(1, i),
            labels={
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": "c7i.16xlarge",
                "beta.kubernetes.io/os": "linux",
                "failure-domain.beta.kubernetes.io/region": "us-east-1",
                "failure-domain.beta.kubernetes.io/zone": zone,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "c7i.16xlarge",
                "topology.kubernetes.io/region": "us-east-1",
                "topology.kubernetes.io/zone": zone,
            },
            taints=(
                events.Taint(
                    key="slinky.slurm.net/managed-node",
                    value="slurm-bridge-scheduler",
                    effect="NoExecute",
                ),
            ),
            ready=True,
            cpu_millis=64_000,
            memory_bytes=256 * 2**30,
        )
        yield events.SlurmNode(
            source="slurm:default",
            key=name,
            observed_at=now_ns + i,
            version=f"{(i * 0x9E3779B97F4A7C15 + version) % 2**64:016x}",
            producer=producer,
            cluster="default",
            state=("MIXED",) if (i + version) % 2 else ("ALLOCATED",),
            cpus=64,
            alloc_cpus=32 if (i + version) % 2 else 64,
            real_memory=256_000,
            features=("c7i", "avx512"),
            partitions=("batch", "all"),
            address=f"10.{i // 65536}.{i // 256 % 256}.{i % 256}",
        )
    groups = (pods + POD_GROUP - 1) // POD_GROUP
    for i in range(pods):
        g, idx = divmod(i, POD_GROUP)
        ns, job = f"team-{g % 50:02d}", f"train-{g:06d}"
        name = f"{job}-{idx}-{(i * 40503) % 36**5:05x}"
        node = f"node{i % n:05d}"
        job_uid = _uid(2, g)
        running = (i + version) % 5 != 0
        yield events.KubePod(
            source="k8s",
            key=f"{ns}/{name}",
            observed_at=now_ns + i,
            version=str(41_000_000 + version * 1_000_000 + i),
            producer=producer,
            uid=_uid(3, i),
            namespace=ns,
            name=name,
            phase="Running" if running else "Pending",
            node_name=node if running else "",
            scheduler_name="slurm-bridge-scheduler",
            labels={
                "app.kubernetes.io/name": "trainer",
                "batch.kubernetes.io/controller-uid": job_uid,
                "batch.kubernetes.io/job-completion-index": str(idx),
                "batch.kubernetes.io/job-name": job,
                "controller-uid": job_uid,
                "job-name": job,
                "scheduler.slinky.slurm.net/slurm-jobid": str(100_000 + g),
            },
            annotations={"slinky.slurm.net/slurm-node": node} if running else {},
            finalizers=("batch.kubernetes.io/job-tracking", "scheduler.slinky.slurm.net/finalizer"),
            cpu_millis=4000,
            memory_bytes=16 * 2**30,
            owner=events.OwnerRef(api_version="batch/v1", kind="Job", name=job, uid=job_uid),
            ready=running,
            conditions=(events.PodCondition(type="PodScheduled", status="True"),)
            if running
            else (),
            tolerations=(
                "node.kubernetes.io/not-ready",
                "node.kubernetes.io/unreachable",
                "slinky.slurm.net/managed-node",
            ),
            created_at=now - 3600,
        )
    for i in range(jobs):
        job_id = 100_000 + i
        state = ("RUNNING",) if (i + version) % 4 else ("PENDING",)
        running = state == ("RUNNING",)
        common = {
            "source": "slurm:default",
            "key": str(job_id),
            "observed_at": now_ns + i,
            "version": f"{(i * 0x9E3779B97F4A7C15 + version) % 2**64:016x}",
            "producer": producer,
            "cluster": "default",
            "job_id": job_id,
            "state": state,
            "state_reason": "None" if running else "Priority",
            "partition": "batch",
            "submit_time": now - 7200,
            "start_time": now - 3600 if running else 0,
            "end_time": now + 3600 if running else 0,
            "time_limit_minutes": 120,
        }
        if i < groups:  # the placeholder of pod group i
            ns, job = f"team-{i % 50:02d}", f"train-{i:06d}"
            keys = [
                f"{ns}/{job}-{k}-{((i * POD_GROUP + k) * 40503) % 36**5:05x}"
                for k in range(min(POD_GROUP, pods - i * POD_GROUP))
            ]
            yield events.SlurmJob(
                **common,
                name=f"{ns}/Job:{job}",
                nodes=tuple(f"node{(i * POD_GROUP + k) % n:05d}" for k in range(len(keys)))
                if running
                else (),
                admin_comment=json.dumps({"pods": keys}, separators=(",", ":")),
                comment=f"slurmbridge:{ns}/Job:{job}:{_uid(2, i)}",
                flags=("EXTERNAL_JOB",),
                user_id=65532,
                node_count=len(keys),
            )
        else:  # a native Slurm batch job
            count = 1 + i % 4
            yield events.SlurmJob(
                **common,
                name=f"sim_run_{i:06d}.sh",
                nodes=tuple(f"node{(i + k) % n:05d}" for k in range(count)) if running else (),
                user_id=1000 + i % 200,
                node_count=count,
            )


def rss_mb(field: str = "VmRSS") -> float:
    """This process's resident set size (``VmHWM``: its peak), MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def deep_size(obj: object, seen: set[int]) -> int:
    """Bytes of ``obj`` and everything it references that ``seen`` does not hold yet."""
    total = 0
    stack = [obj]
    while stack:
        o = stack.pop()
        if o is None or o is True or o is False or id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, tuple | list | set | frozenset):
            stack.extend(o)
        elif hasattr(o, "__struct_fields__"):
            stack.extend(getattr(o, f) for f in o.__struct_fields__)  # type: ignore[attr-defined]
        elif hasattr(o, "__slots__") and not isinstance(o, str | int | float | bytes):
            stack.extend(getattr(o, s) for s in o.__slots__)  # type: ignore[attr-defined]
    return total


def breakdown(p: Projection) -> dict[str, object]:
    """Where the projection's memory goes, MB (deep ``sys.getsizeof``, shared objects counted
    once, in this order): per kind the events (struct, strings, dicts, tuples, ints) and the
    ``Entry`` + dict slots that hold them, then each index."""
    seen: set[int] = set()
    mb = 1024 * 1024
    out: dict[str, object] = {}
    for tag, by_source in p._objs.items():
        holder = n = wire = 0
        fields: dict[str, int] = {}
        for objs in by_source.values():
            holder += sys.getsizeof(objs)
            for key, entry in objs.items():
                n += 1
                ev = entry.event
                wire += len(events.encode_event(ev))
                seen.add(id(ev))
                fields["(struct)"] = fields.get("(struct)", 0) + sys.getsizeof(ev)
                for f in ev.__struct_fields__:
                    fields[f] = fields.get(f, 0) + deep_size(getattr(ev, f), seen)
                # the dict's key is the event's own key string, counted above
                holder += sys.getsizeof(entry) + deep_size(key, seen) + deep_size(entry.seq, seen)
        ev_bytes = sum(fields.values())
        top = sorted(fields.items(), key=lambda kv: -kv[1])[:6]
        out[tag] = {
            "objects": n,
            "events_mb": round(ev_bytes / mb, 1),
            "bytes_per_event": round(ev_bytes / max(n, 1)),
            "json_bytes_per_event": round(wire / max(n, 1)),
            "entry_and_dict_mb": round(holder / mb, 1),
            "largest_fields_mb": {k: round(v / mb, 1) for k, v in top},
        }
    for (tag, label), index in p._label_index.items():
        out[f"index {tag}[{label}]"] = round(deep_size(index, seen) / mb, 1)
    return out


RSS_CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[4])
from bench.scale import INDEXES, breakdown, rss_mb, sample_events
from schemas import events, subjects
from slurmbridge.runtime.projection import Projection
gc.collect()
before = rss_mb()
p = Projection()
t0 = time.perf_counter()
seq = 0
for seq, ev in enumerate(sample_events(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])), 1):
    # As the worker gets them: decoded from the bytes on the wire (no shared strings).
    kind = events.kind_of(ev)
    p.feed(subjects.obs_subject(ev.source, kind, ev.key), events.encode_event(ev), seq)
applied = time.perf_counter() - t0
gc.collect()
no_index = rss_mb()
t1 = time.perf_counter()
for kind, label in INDEXES:
    if label.startswith("."):
        p.by_field(kind, label[1:], "x")
    else:
        p.by_label(kind, label, "x")
indexed = time.perf_counter() - t1
gc.collect()
gc.freeze()  # as App.start does once caught up
out = {"rss_mb": rss_mb(), "rss_before_mb": before, "rss_no_index_mb": no_index,
       "peak_mb": rss_mb("VmHWM"), "objects": seq, "apply_s": round(applied, 2),
       "index_s": round(indexed, 2)}
if sys.argv[5] == "1":
    out["breakdown"] = breakdown(p)
print(json.dumps(out))
"""


def measure_rss(nodes: int, pods: int, jobs: int, *, detail: bool = True) -> dict[str, object]:
    """The projection of ``nodes`` × 2 + ``pods`` + ``jobs`` objects in a fresh process."""
    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run(
        [sys.executable, "-c", RSS_CHILD, str(nodes), str(pods), str(jobs), root, str(int(detail))],
        capture_output=True,
        text=True,
        check=True,
    )
    child = json.loads(out.stdout.strip().splitlines()[-1])
    key = f"rss_mb_{size_tag(nodes)}_{size_tag(pods)}_{size_tag(jobs)}"
    result: dict[str, object] = {
        key: child["rss_mb"],
        "rss_delta_mb": round(child["rss_mb"] - child["rss_before_mb"], 1),
        "rss_after_imports_mb": child["rss_before_mb"],
        "rss_without_indexes_mb": child["rss_no_index_mb"],
        "rss_peak_mb": child["peak_mb"],
        "projection_objects": child["objects"],
        "projection_apply_s": child["apply_s"],
        "projection_index_s": child["index_s"],
    }
    if "breakdown" in child:
        result["rss_breakdown"] = child["breakdown"]
    return result


CATCHUP_CHILD = r"""
import asyncio, gc, json, resource, sys, time
sys.path.insert(0, sys.argv[3])
from bench.scale import rss_mb
from schemas import events
from slurmbridge.runtime import bus as busmod
from slurmbridge.config import NatsSettings
from slurmbridge.runtime.projection import Projection

async def main(url, every):
    bus = await busmod.connect(NatsSettings(), url)
    try:
        p = Projection()
        delivered = 0
        def count(ev, seq):
            nonlocal delivered
            delivered += 1
        p.add_listener(count)
        cpu0, t0 = time.process_time(), time.perf_counter()
        gc.disable()  # as App.start: no collections during the rebuild
        await p.start(bus, every_message=every)
        await p.wait_caught_up(timeout=1800)
        gc.enable()
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        await p.stop()
        counts = {k: p.count(k) for k in events.KINDS if p.count(k)}
        print(json.dumps({"s": round(wall, 2), "cpu_s": round(cpu, 2), "delivered": delivered,
                          "applied_seq": p.applied_seq, "malformed": p.malformed,
                          "counts": counts, "rss_mb": rss_mb()}))
    finally:
        await bus.close()

asyncio.run(main(sys.argv[1], sys.argv[2] == "every"))
"""


async def measure_catchup(total: int, versions: int) -> dict[str, object]:
    """``total`` observations (``total // versions`` objects × ``versions``) in a real
    BRIDGE_OBS made as ``App.start`` makes it; then a fresh worker process's catch-up, as
    ``App.start`` does it (last message per subject) and replaying every message."""
    settings = NatsSettings()
    if versions > settings.obs_max_msgs_per_subject:
        raise SystemExit(f"--versions {versions} > obs_max_msgs_per_subject: some are discarded")
    objects = total // versions
    nodes, pods, jobs = mix(objects)
    root = str(Path(__file__).resolve().parent.parent)
    tag = size_tag(total)
    # a file store in a temporary directory of its own, removed on exit (error or not)
    async with NatsServer() as srv:
        bus = await busmod.connect(settings, srv.url)
        try:
            await bus.ensure_streams(
                streams.stream_specs(
                    replicas=settings.replicas,
                    obs_max_msgs_per_subject=settings.obs_max_msgs_per_subject,
                    obs_max_age_s=settings.obs_max_age,
                    act_max_age_s=settings.act_max_age,
                )
            )
            t0 = time.perf_counter()
            sent = failed = 0
            for v in range(versions):
                batch = bus.batch()
                for ev in sample_events(nodes, pods, jobs, version=v):
                    subject = subjects.obs_subject(ev.source, events.kind_of(ev), ev.key)
                    await batch.publish(subject, events.encode_event(ev))
                    sent += 1
                    if len(batch) >= 50_000:
                        failed += sum(r.error is not None for r in await batch.flush(120))
                        batch = bus.batch()
                failed += sum(r.error is not None for r in await batch.flush(120))
            publish_s = time.perf_counter() - t0
            # the raw answer: nats-py's StreamState drops num_subjects
            info = await bus.nc.request(f"$JS.API.STREAM.INFO.{streams.OBS_STREAM}", b"", 10)
            state = json.loads(info.data)["state"]
        finally:
            await bus.close()
        results: dict[str, object] = {
            "catchup_published": sent,
            "catchup_publish_failed": failed,
            "catchup_publish_s": round(publish_s, 1),
            "catchup_publish_msgs_per_s": round(sent / publish_s),
            "catchup_stream_msgs": state["messages"],
            "catchup_stream_subjects": state["num_subjects"],
            "catchup_stream_mb": round(state["bytes"] / 2**20, 1),
            "catchup_versions": versions,
        }
        for mode, name in (("last", f"catchup_s_{tag}"), ("every", f"catchup_every_msg_s_{tag}")):
            out = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                CATCHUP_CHILD,
                srv.url,
                mode,
                root,
                stdout=asyncio.subprocess.PIPE,
            )
            stdout, _ = await out.communicate()
            if out.returncode != 0:
                raise RuntimeError(f"catch-up ({mode}) failed: exit {out.returncode}")
            child = json.loads(stdout.decode().strip().splitlines()[-1])
            if child["counts"].get("KubePod", 0) != pods:
                raise RuntimeError(f"catch-up ({mode}): not every pod applied: {child}")
            prefix = "catchup" if mode == "last" else "catchup_every_msg"
            results[name] = child["s"]
            results[f"{prefix}_delivered"] = child["delivered"]
            results[f"{prefix}_msgs_per_s"] = round(child["delivered"] / child["s"])
            results[f"{prefix}_worker_cpu_s"] = child["cpu_s"]
            results[f"{prefix}_worker_rss_mb"] = child["rss_mb"]
            results[f"{prefix}_objects"] = child["counts"]
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--only", default="poll,rss,catchup", help="comma-separated: poll, rss, catchup"
    )
    ap.add_argument("--nodes", type=int, default=10_000, help="poll: Slurm nodes")
    ap.add_argument("--jobs", type=int, default=100_000, help="poll: pending Slurm jobs")
    ap.add_argument(
        "--relist-every",
        type=int,
        default=15,
        help="poll: cycles measured, the first a full job listing (15 = jobRelistInterval "
        "30 s at the 2 s poll interval; 1 = a full listing every poll)",
    )
    ap.add_argument("--rss-nodes", type=int, default=5_000, help="rss: KubeNodes (+ SlurmNodes)")
    ap.add_argument("--pods", type=int, default=150_000, help="rss: KubePods")
    ap.add_argument("--rss-jobs", type=int, default=100_000, help="rss: SlurmJobs")
    ap.add_argument(
        "--no-breakdown", action="store_true", help="rss: skip the per-kind memory breakdown"
    )
    ap.add_argument("--events", type=int, default=1_000_000, help="catchup: messages in the log")
    ap.add_argument("--versions", type=int, default=5, help="catchup: messages per object")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    parts = {p.strip() for p in args.only.split(",")}
    unknown = parts - {"poll", "rss", "catchup"}
    if unknown:
        ap.error(f"--only: unknown part(s) {', '.join(sorted(unknown))}")
    result: dict[str, object] = {"machine": machine()}
    if "poll" in parts:
        result.update(asyncio.run(measure(args.nodes, args.jobs, args.relist_every)))
    if "rss" in parts:
        result.update(
            measure_rss(args.rss_nodes, args.pods, args.rss_jobs, detail=not args.no_breakdown)
        )
    if "catchup" in parts:
        result.update(asyncio.run(measure_catchup(args.events, args.versions)))
    emit(result, args.json)


if __name__ == "__main__":
    main()
