"""Scale, Kubernetes side (issue 7): initial list and watch throughput at 5,000 nodes and
150,000 pods.

The Kubernetes API simulator runs in its own process (as an API server would) holding
``--nodes`` Ready nodes and ``--pods`` pods of slurmbridge's scheduler, each shaped like a pod
of an indexed batch/v1 Job that Slinky placed (the Job controller's labels, Slinky's job-id
label and annotation, two finalizers, the controller owner reference, three tolerations,
CPU and memory requests; ~1.35 KB of JSON). This process runs the production watchers
(:class:`producers.kube.NodeWatcher` and :class:`producers.kube.PodWatcher`, through
kubernetes-asyncio over HTTP, as ``App`` builds them, start-up objects frozen out of the
collector as ``App.start`` does) with a publisher that encodes each
observation as the real one does (:func:`schemas.events.encode_event`) and then only counts,
so NATS is not in the figures (``bench/pipeline.py`` measures publishing).

* **Initial list**: each watcher's first ``relist()`` — the list request, the body read,
  msgspec decode, translation to events, the diff, the publish call — timed in wall and
  in this process's CPU (``time.process_time``; the simulator's CPU is not in it), the
  longest the event loop went without a turn meanwhile (``kube_list_loop_stall_ms``: leases
  and health answers wait that long) and the process's peak RSS. Then a
  second relist of the unchanged pods (what a restarted watcher costs against a seeded
  ``last``, or a 410 re-list).
* **Watch throughput**: both watchers watch; the simulator then relabels ``--churn`` pods as
  fast as it can (one JSON merge patch each, so one MODIFIED event each) and the bench
  counts the pod observations the watcher publishes. ``kube_watch_events_per_s`` is
  observations over the wall time from the first to the last; it is bounded by the
  simulator's own speed, so ``kube_watch_cpu_us_per_event`` (this process's CPU per
  observation: read the line, decode, translate, compare, encode) gives the watcher's
  capacity: ``kube_watch_capacity_per_core`` = 10⁶ / that.

    python bench/kube_scale.py --json [--nodes 5000] [--pods 150000] [--churn 20000]
        [--page-size 500]

``--json`` → ``{"kube_initial_list_s_5k_150k", "kube_initial_list_cpu_s", "kube_relist_s",
"kube_watch_events_per_s", "kube_watch_cpu_us_per_event", …}``.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit, machine
from bench.scale import rss_mb
from producers.kube.watch import NodeWatcher, PodWatcher
from schemas import events, wellknown
from schemas.events import Event
from slurmbridge.config import KubeSettings
from slurmbridge.kube import client as kube
from slurmbridge.kube.watch import Watcher
from slurmbridge.runtime.gcpause import freeze_startup

SCHEDULER = wellknown.DEFAULT_SCHEDULER_NAME

SIM = r"""
import asyncio, gc, sys, time
sys.path.insert(0, sys.argv[5])
from slurmbridge.devtools.sim.kube import KubeSim

SCHEDULER = sys.argv[4]
TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"key": "slinky.slurm.net/managed-node", "operator": "Exists", "effect": "NoExecute"},
]

def pod(i):
    job, uid = f"train-{i // 4:05d}", f"0b5e55ed-0000-4000-8000-{i // 4:012d}"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{job}-{i % 4}-{i:06d}", "namespace": "default",
        "labels": {"batch.kubernetes.io/controller-uid": uid,
                   "batch.kubernetes.io/job-name": job, "controller-uid": uid, "job-name": job,
                   "batch.kubernetes.io/job-completion-index": str(i % 4),
                   "slinky.slurm.net/job-id": str(1000 + i // 4), "app": "train"},
        "annotations": {"slinky.slurm.net/slurm-jobid": str(1000 + i // 4)},
        "finalizers": ["batch.kubernetes.io/job-tracking", "slinky.slurm.net/placeholder"],
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid,
                             "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"schedulerName": SCHEDULER, "tolerations": TOLERATIONS, "containers": [
            {"name": "main", "image": "registry.example/train:1", "resources": {
                "requests": {"cpu": "4", "memory": "16Gi"},
                "limits": {"cpu": "4", "memory": "16Gi"}}}]}}

async def main(nodes, pods, kubeconfig):
    sim = KubeSim(history_size=100_000)
    for i in range(nodes):
        sim.add_node(f"node{i:05d}", cpu="64", memory="256Gi")
    names = [sim.create(pod(i))["metadata"]["name"] for i in range(pods)]
    await sim.start()
    sim.write_kubeconfig(kubeconfig)
    # The store's millions of objects out of the collector's scans: the simulator's speed
    # (what bounds the watch rate) should not depend on when its full collections fall.
    gc.freeze()
    print("READY", flush=True)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        count = int(line.split()[1])
        t0 = time.perf_counter()
        for k in range(count):
            sim.patch_merge("pods", names[k % len(names)],
                            {"metadata": {"labels": {"bench/round": str(k)}}}, "default")
            if k % 500 == 0:
                await asyncio.sleep(0)  # let the server stream what is queued
        print(f"DONE {time.perf_counter() - t0:.3f}", flush=True)

asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
"""


class CountingPublisher:
    """What ``App`` hands the watchers (``__call__`` for batches, ``send`` for watch events),
    encoding each observation as the NATS publisher does and then only counting."""

    def __init__(self) -> None:
        self.published = 0
        self.pods = 0
        self.bytes = 0
        self.first_at = 0.0
        self.last_at = 0.0
        self.changed = asyncio.Event()
        self.target = 0

    def _count(self, ev: Event) -> None:
        self.published += 1
        self.bytes += len(events.encode_event(ev))
        if isinstance(ev, events.KubePod):
            self.pods += 1
            now = time.perf_counter()
            if not self.first_at:
                self.first_at = now
            self.last_at = now
            if self.target and self.pods >= self.target:
                self.changed.set()

    async def __call__(self, batch: Sequence[tuple[Event, str]]) -> None:
        for ev, _ in batch:
            self._count(ev)

    async def send(self, ev: Event, msg_id: str) -> asyncio.Future[Any]:
        self._count(ev)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut


async def measure(nodes: int, pods: int, churn: int, page_size: int) -> dict[str, object]:
    freeze_startup()  # as App.start does before it starts the watchers
    work = Path(tempfile.mkdtemp(prefix="slurmbridge-kube-scale-"))
    kubeconfig = work / "kubeconfig"
    root = str(Path(__file__).resolve().parent.parent)
    t_sim = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", SIM, str(nodes), str(pods), str(kubeconfig), SCHEDULER, root],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    loop = asyncio.get_running_loop()
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout
    tasks: list[asyncio.Task[None]] = []
    try:
        line = await loop.run_in_executor(None, stdout.readline)
        if not line.startswith("READY"):
            raise RuntimeError(f"simulator did not start: {line!r}")
        sim_setup_s = time.perf_counter() - t_sim
        api = await kube.api_client(KubeSettings(kubeconfig=str(kubeconfig)))
        pub = CountingPublisher()
        common: dict[str, Any] = {"producer": "bench", "seed": {}, "send": pub.send}
        node_w = NodeWatcher(api, pub, **common)
        pod_w = PodWatcher(api, pub, scheduler_name=SCHEDULER, **common)
        node_w.list_page_size = pod_w.list_page_size = page_size

        stall = 0.0

        async def ticker() -> None:  # the longest the event loop went without a turn
            nonlocal stall
            while True:
                t = time.perf_counter()
                await asyncio.sleep(0.005)
                stall = max(stall, time.perf_counter() - t - 0.005)

        ticking = asyncio.create_task(ticker())
        c0, w0 = time.process_time(), time.perf_counter()
        await node_w.relist()
        node_cpu, node_wall = time.process_time() - c0, time.perf_counter() - w0
        c0, w0 = time.process_time(), time.perf_counter()
        await pod_w.relist()
        pod_cpu, pod_wall = time.process_time() - c0, time.perf_counter() - w0
        # The counting publisher never suspends, so the list's last stretch runs on into
        # here without a loop turn: the ticker has to get one to see (and time) it.
        await asyncio.sleep(0.02)
        ticking.cancel()
        list_stall, rss_peak = stall, rss_mb("VmHWM")
        listed = pub.published
        if len(node_w.last) != nodes or len(pod_w.last) != pods:
            raise RuntimeError(f"listed {len(node_w.last)} nodes, {len(pod_w.last)} pods")

        # A second list of the same pods: nothing to publish (a restarted watcher whose
        # ``last`` was seeded from the projection, or a re-list after 410 Gone).
        c0, w0 = time.process_time(), time.perf_counter()
        await pod_w.relist()
        relist_cpu, relist_wall = time.process_time() - c0, time.perf_counter() - w0
        if pub.published != listed:
            raise RuntimeError("an unchanged re-list published something")

        tasks = [asyncio.create_task(w.run()) for w in (node_w, pod_w)]
        deadline = time.monotonic() + 30
        while not (node_w.watching and pod_w.watching):
            if time.monotonic() > deadline:
                raise RuntimeError("the watches did not open")
            await asyncio.sleep(0.01)
        pub.pods, pub.first_at, pub.target = 0, 0.0, churn
        pub.changed.clear()
        c0 = time.process_time()
        proc.stdin.write(f"churn {churn}\n")
        proc.stdin.flush()
        await asyncio.wait_for(pub.changed.wait(), timeout=600)
        watch_cpu = time.process_time() - c0
        watch_wall = pub.last_at - pub.first_at
        done = await loop.run_in_executor(None, stdout.readline)
        sim_churn_s = float(done.split()[1])
        await api.close()
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        proc.terminate()
        proc.wait(10)
    return {
        "kube_nodes": nodes,
        "kube_pods": pods,
        "kube_list_page_size": page_size,
        "kube_sim_setup_s": round(sim_setup_s, 1),
        "kube_initial_list_s_5k_150k": round(node_wall + pod_wall, 2),
        "kube_initial_list_cpu_s": round(node_cpu + pod_cpu, 2),
        "kube_initial_list_objects_per_s": round((nodes + pods) / (node_wall + pod_wall)),
        "kube_node_list_s": round(node_wall, 2),
        "kube_node_list_cpu_s": round(node_cpu, 2),
        "kube_pod_list_s": round(pod_wall, 2),
        "kube_pod_list_cpu_s": round(pod_cpu, 2),
        "kube_pod_list_cpu_us_per_pod": round(pod_cpu / pods * 1e6, 1),
        "kube_initial_published": listed,
        "kube_list_loop_stall_ms": round(list_stall * 1000, 1),
        "kube_rss_peak_mb": rss_peak,
        "kube_relist_s": round(relist_wall, 2),
        "kube_relist_cpu_s": round(relist_cpu, 2),
        "kube_watch_events": pub.pods,
        "kube_watch_events_per_s": round(pub.pods / watch_wall) if watch_wall > 0 else None,
        "kube_watch_cpu_us_per_event": round(watch_cpu / pub.pods * 1e6, 1),
        "kube_watch_capacity_per_core": round(pub.pods / watch_cpu) if watch_cpu > 0 else None,
        "kube_sim_churn_s": sim_churn_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5000, help="Kubernetes nodes")
    ap.add_argument("--pods", type=int, default=150_000, help="pods of slurmbridge's scheduler")
    ap.add_argument("--churn", type=int, default=20_000, help="pod modifications to watch")
    ap.add_argument(
        "--page-size",
        type=int,
        default=Watcher.list_page_size,
        help="objects per list request (0: the whole list in one response)",
    )
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args()
    result = asyncio.run(measure(args.nodes, args.pods, args.churn, args.page_size))
    result["machine"] = machine()
    emit(result, as_json=args.json)


if __name__ == "__main__":
    main()
