"""A minimal direct binder, the reference ``bench/workload.py --baseline direct`` measures
slurmbridge against: no log, no projection, no reconcilers.

Runs as its own process (as slurmbridge does in the bench, so its CPU time is its own):

    watch pods with ``spec.schedulerName == --scheduler`` (Kubernetes list + watch)
      → per unbound pod: ``POST job/submit`` (one exclusive external placeholder job per pod,
        in --partition); every --poll seconds one ``GET jobs/state`` naming every job still
        waiting, then ``GET job/{id}`` of each that runs (its node) → ``POST
        pods/{name}/binding`` to the job's node
      → when the pod has ended (Succeeded/Failed) or is deleted: ``DELETE job/{id}``.

No gangs, no eligibility, no conditions or Events, no restart safety: the least work a
bridge must do per pod. Prints ``READY`` once its watch is open.

Why one ``jobs/state`` for all waiting jobs rather than a ``GET job`` per job and tick: with a
request per waiting job every 20 ms, a binder that fell behind (jobs waiting for nodes) paid
for its backlog on every tick — 12–13 CPU ms a pod at 68–73 pods/s, against 4.4 ms at 198
pods/s in a run where it kept up (2026-11-29, ``--arrival 200 --pods 1000``) — so the
ceiling it reported swung threefold between runs. With one request a tick and each started
job read by a task of its own (a tick that waited for those reads gave 93–96 pods/s), two
runs gave 145.0 and 134.8 pods/s at 5.3–5.7 CPU ms a pod. slurmbridge's own hot loop asks
the same way (producers/slurm/poller.py).

    python bench/_direct.py --kube-url URL --slurm-url URL --slurm-token-file F
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from schemas.wellknown import JOB_ENDED_STATES
from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.models import Job, JobSubmit


class Direct:
    """The binder's state: pods seen and their jobs."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.kube_url = args.kube_url.rstrip("/")
        self.slurm = SlurmClient(
            args.slurm_url,
            Path(args.slurm_token_file),
            user_name="slurmrest",
            api_version=args.api_version,
        )
        self.seen: set[str] = set()
        self.jobs: dict[str, int] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        #: Jobs submitted and not yet seen running → what their ``place`` waits for.
        self.waiting: dict[int, asyncio.Future[Job | None]] = {}

    async def run(self) -> None:
        async with aiohttp.ClientSession() as http:
            self.http = http
            self.spawn(self.poll())
            async with http.get(f"{self.kube_url}/api/v1/pods") as resp:
                listing = await resp.json()
            for pod in listing.get("items", []):
                self.on_pod(pod, deleted=False)
            rv = listing["metadata"]["resourceVersion"]
            url = f"{self.kube_url}/api/v1/pods?watch=1&resourceVersion={rv}"
            async with http.get(url, timeout=aiohttp.ClientTimeout(total=None)) as resp:
                print("READY", flush=True)
                async for line in resp.content:
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    if ev.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self.on_pod(ev["object"], deleted=ev["type"] == "DELETED")

    def on_pod(self, pod: dict[str, Any], *, deleted: bool) -> None:
        spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
        if spec.get("schedulerName") != self.args.scheduler:
            return
        key = f"{meta.get('namespace', 'default')}/{meta['name']}"
        phase = (pod.get("status") or {}).get("phase")
        if deleted or phase in ("Succeeded", "Failed"):
            job = self.jobs.pop(key, None)
            if job is not None:
                self.spawn(self.slurm.cancel_job(job))
            return
        if key not in self.seen and not spec.get("nodeName"):
            self.seen.add(key)
            self.spawn(self.place(key))

    def spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def place(self, key: str) -> None:
        ns, name = key.split("/", 1)
        job = await self.slurm.submit_job(
            JobSubmit(
                name=name,
                partition=self.args.partition,
                memory_per_node_mib=64,
                exclusive=True,
                external=True,
            )
        )
        self.jobs[key] = job
        started = self.waiting[job] = asyncio.get_running_loop().create_future()
        info = await started
        if info is None or key not in self.jobs:
            return
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": info.nodes[0]},
        }
        url = f"{self.kube_url}/api/v1/namespaces/{ns}/pods/{name}/binding"
        async with self.http.post(url, json=body) as resp:
            await resp.read()

    async def poll(self) -> None:
        """Every ``--poll`` seconds: the states of the waiting jobs in one request. A job that
        runs is read for its node by a task of its own (the next tick does not wait for it)
        and handed to its ``place``; one that ended, or that Slurm no longer holds, is handed
        ``None``."""
        while True:
            await asyncio.sleep(self.args.poll)
            if not self.waiting:
                continue
            asked = list(self.waiting)  # jobs submitted during the request wait for the next
            try:
                states = await self.slurm.job_states_of(asked)
            except Exception as exc:  # said, then asked again next tick
                print(f"jobs/state failed: {exc!r}", file=sys.stderr, flush=True)
                continue
            for job in asked:
                flags = states.get(str(job))
                if flags is None or JOB_ENDED_STATES.intersection(flags):
                    self.waiting.pop(job).set_result(None)
                elif "RUNNING" in flags:
                    self.spawn(self.started(job, self.waiting.pop(job)))

    async def started(self, job: int, fut: asyncio.Future[Job | None]) -> None:
        """Read running ``job`` for its node and hand it over (back to the waiting jobs when
        Slurm names no node yet)."""
        info = await self.slurm.get_job(job)
        if info is not None and "RUNNING" in info.state and not info.nodes:
            self.waiting[job] = fut
            return
        fut.set_result(info)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--kube-url", required=True)
    ap.add_argument("--slurm-url", required=True)
    ap.add_argument("--slurm-token-file", required=True)
    ap.add_argument("--api-version", default="v0.0.44")
    ap.add_argument("--scheduler", default="direct-binder", help="pods' schedulerName")
    ap.add_argument("--partition", default="batch")
    ap.add_argument("--poll", type=float, default=0.02, help="seconds between job polls")
    asyncio.run(Direct(ap.parse_args()).run())


if __name__ == "__main__":
    main()
