"""A big pending queue must cost nothing (issue 30, item 4; Slinky's users report the opposite,
slurm-bridge#45: every attempt lists all jobs, low-priority pods starve).

Laid out as ``bench/workload.py``: slurmbridge as its own process (``slurmbridge run``), nats-server
as another, the Kubernetes and slurmrestd simulators in this process. Partition ``gpu`` (n1–n2)
is held whole by a foreign exclusive job that never ends (no free node, no free CPU);
``batch`` (every node) has free nodes.

The simulators share this process with the bench, so the fill can be bound by them rather than
by slurmbridge: the slurmrestd simulator runs a scheduling pass over every pending job at each
submit, as slurmctld does. Until 2026-11-28 the foreign job took one CPU of each ``gpu`` node,
so each node kept CPUs free, the simulator's skip for a partition with no CPU free never
applied, and every submit cost a pass over every queued job's shape (the fill of 10,000 took
12 minutes of this process's CPU). Holding the nodes whole changes nothing slurmbridge sees of
a queued job (PENDING, ``Resources`` for the first, ``Priority`` for the rest; every queued
job asks for whole nodes either way) and lets the fill measure the bridge.

1. **empty queue**: after one warm-up pod, ``--probes`` bare pods for ``batch``, one at a
   time: each one's time from creation to its Binding (``bind_empty_queue_*``).
2. **fill**: ``--queue`` bare pods for ``gpu``; slurmbridge submits a job for each, and each
   stays PENDING in Slurm (no free node). ``queue_fill_s``: until every pod carries its job;
   ``queue_settled_s``: then until neither simulator served a write for ``--settle`` seconds
   (each waiting pod's ``PodScheduled=False`` condition and first Event are written).
   ``fill_decides_per_pod``: each reconciler's decides over fill and settling, per queued pod
   (slurmbridge's ``slurmbridge_decides_total``, scraped from its ``/metrics``): an arrival
   that re-decided the queue would show here as a figure growing with ``--queue``.
3. **idle**: nothing changes for ``--idle-seconds``: the slurmbridge process's CPU time over
   that wall time (``cpu_idle_pct_of_core``; target ≤ 5 %), with the HTTP requests it sent to
   each simulator meanwhile (``idle_requests``, by verb and resource or endpoint) and the
   decides it made (``idle_decides``; scraped outside the measured window).
4. **behind the queue**: ``--probes`` more bare pods for ``batch``, one at a time, as in 1
   (``bind_full_queue_*``; p99 of five is their maximum): no head-of-line blocking means the
   same figures as 1. A pod not bound within ``--probe-timeout`` seconds is counted in
   ``bind_*_timeouts``. ``--profile FILE`` runs slurmbridge under cProfile.

    python bench/idle_queue.py --json [--queue 10000] [--idle-seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp

from bench._common import emit, free_port, machine, percentile, start_slurmbridge, tear_down, until
from bench._work import cpu_seconds, kube_writes, prometheus_totals, slurm_writes
from reconcilers import _pods
from schemas import wellknown
from slurmbridge.devtools.sim.kube import Change
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Simulators
from slurmbridge.runtime.natsserver import NatsServer

JOBID = wellknown.LABEL_SLURM_JOBID
PARTITION = wellknown.ANNOTATION_SLURMJOB_PREFIX + "partition"


def _requests(sims: Simulators) -> dict[str, float]:
    """HTTP requests the Kubernetes and slurmrestd simulators have served so far, by verb
    and resource (Kubernetes) or method and endpoint (Slurm)."""
    out = {f"kube {verb} {what}": float(n) for (verb, what), n in sims.kube.requests.items()}
    out.update({f"slurm {what}": float(n) for what, n in sims.slurm.counters.items()})
    return out


async def _probe(
    sims: Simulators,
    name: str,
    bound: dict[str, float],
    timeout: float,
    created: dict[str, float] | None = None,
) -> float | None:
    """Seconds from creating bare pod ``name`` (partition batch) to its Binding; None when it
    was not bound within ``timeout`` seconds (counted in ``*_timeouts``, not an error: a pod
    stuck behind the queue is what this bench looks for)."""
    t0 = time.monotonic()
    if created is not None:
        created[name] = t0
    create_group(
        sims.kube,
        "Pod",
        name,
        1,
        annotations={PARTITION: "batch"},
        requests={"cpu": "1"},
        run_seconds=0.1,
    )
    try:
        await until(lambda: name in bound, timeout, f"{name} bound")
    except TimeoutError:
        return None
    return bound[name] - t0


async def _quiet(sims: Simulators, settle: float, cap: float) -> float:
    """Wait until neither simulator has served a write for ``settle`` seconds (at most
    ``cap``); returns the seconds waited."""
    t0 = time.monotonic()

    def writes() -> float:
        return sum(kube_writes(dict(sims.kube.requests)).values()) + sum(
            slurm_writes(dict(sims.slurm.counters)).values()
        )

    last, since = writes(), time.monotonic()
    while time.monotonic() - since < settle and time.monotonic() - t0 < cap:
        await asyncio.sleep(0.5)
        now = writes()
        if now != last:
            last, since = now, time.monotonic()
    return time.monotonic() - t0


async def _decides(url: str) -> dict[str, float]:
    """slurmbridge's ``slurmbridge_decides_total`` by reconciler, scraped from ``url``."""
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        text = await resp.text()
    return prometheus_totals(text, "slurmbridge_decides_total", by="reconciler")


def _per(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    """The decides of each reconciler between two scrapes, per ``n`` pods."""
    return {
        k: round((v - before.get(k, 0.0)) / max(n, 1), 2)
        for k, v in sorted(after.items())
        if v - before.get(k, 0.0)
    }


def _ms(samples: list[float | None]) -> dict[str, float | int | None]:
    values = [v for v in samples if v is not None]
    return {
        "p50_ms": round(statistics.median(values) * 1000, 1) if values else None,
        "p99_ms": round(percentile(values, 99) * 1000, 1) if values else None,
        "max_ms": round(max(values) * 1000, 1) if values else None,
        "timeouts": len(samples) - len(values),
    }


def _pod_of_marker(comment: str) -> str | None:
    """The name of the bare pod whose placeholder job carries ``comment`` (slurmbridge's
    marker), None for anyone else's job."""
    key = _pods.group_key_of_marker(comment)
    group = _pods.parse_group_key(key) if key is not None else None
    return group.name if group is not None else None


def _stages(
    created: dict[str, float],
    submitted_at: dict[str, float],
    started_at: dict[str, float],
    labelled_at: dict[str, float],
    bound: dict[str, float],
) -> dict[str, float | int | None]:
    """Each probe's bind in four stages, three of them slurmbridge's:
    ``bind_{empty,full}_queue_to_submitted_*`` (the pod seen, published, decided, its intent
    stored, the submit sent), ``..._submitted_to_started_*`` (the slurmrestd simulator's
    submit: its scheduling pass over the queue, in this process, starts the job),
    ``..._started_to_labelled_*`` (the submit's answer, the pod marked with the job's id)
    and ``..._labelled_to_bound_*`` (the job's start seen, published, decided, the Binding
    written)."""
    out: dict[str, float | int | None] = {}
    for phase, prefix in (("empty", "e"), ("full", "f")):
        names = [n for n in created if n.startswith(prefix) and n in labelled_at]
        stages = {
            "to_submitted": [submitted_at[n] - created[n] for n in names if n in submitted_at],
            "submitted_to_started": [
                started_at[n] - submitted_at[n]
                for n in names
                if n in started_at and n in submitted_at
            ],
            "started_to_labelled": [
                labelled_at[n] - started_at[n] for n in names if n in started_at
            ],
            "labelled_to_bound": [bound[n] - labelled_at[n] for n in names if n in bound],
        }
        for stage, samples in stages.items():
            for k, v in _ms(list(samples)).items():
                if k != "timeouts":
                    out[f"bind_{phase}_queue_{stage}_{k}"] = v
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="slurmbridge-idle-queue-"))
    sims = Simulators(nodes=args.nodes, workdir=workdir / "sims", kubelet=True)
    nats = NatsServer(store_dir=workdir / "nats")
    await nats.start()
    await sims.start()
    # gpu (n1, n2) held whole for good by someone else's job: whatever is queued there waits.
    sims.slurm.submit(
        {"partition": "gpu", "tasks": 2, "min_nodes": 2, "exclusive": True}, external=True
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    proc = await start_slurmbridge(
        sims.overrides(),
        nats.url,
        workdir,
        args.poll_interval,
        profile=args.profile,
        metrics_port=port,
    )
    bound: dict[str, float] = {}
    labelled: set[str] = set()
    #: name -> monotonic time its pod first carried its job's id (the bridge's submit and
    #: mark done): splits a probe's bind into before and after its job is in Slurm.
    labelled_at: dict[str, float] = {}

    def on_write(change: Change) -> None:
        if change.resource.name == "pods" and change.type == "MODIFIED":
            obj = change.object
            if (obj.get("spec") or {}).get("nodeName"):
                bound.setdefault(obj["metadata"]["name"], time.monotonic())
            if JOBID in (obj["metadata"].get("labels") or {}):
                labelled.add(obj["metadata"]["name"])
                labelled_at.setdefault(obj["metadata"]["name"], time.monotonic())

    sims.kube.on_write.append(on_write)
    #: name -> monotonic time the simulated slurmctld started its pod's job (at the submit:
    #: a probe's partition has free nodes)
    started_at: dict[str, float] = {}

    def on_job_state(job_id: int, state: str, at: float) -> None:
        job = sims.slurm.jobs_by_id.get(job_id)
        name = _pod_of_marker(job.comment) if job is not None else None
        if state == "RUNNING" and name is not None:
            started_at.setdefault(name, at)

    sims.slurm.on_job_state.append(on_job_state)
    #: name -> monotonic time its pod's job was submitted (the simulator's submit began)
    submitted_at: dict[str, float] = {}

    def on_submit(job_id: int, comment: str, at: float) -> None:
        del job_id
        if (name := _pod_of_marker(comment)) is not None:
            submitted_at.setdefault(name, at)

    sims.slurm.on_submit.append(on_submit)
    try:
        if await _probe(sims, "warm-up", bound, 120) is None:  # slurmbridge up: one pod placed
            raise TimeoutError("slurmbridge did not place the warm-up pod within 120 s")
        created: dict[str, float] = {}
        empty = [
            await _probe(sims, f"e{i}", bound, args.probe_timeout, created)
            for i in range(args.probes)
        ]

        decides0 = await _decides(url)
        t_fill = time.monotonic()
        names = [
            create_group(sims.kube, "Pod", f"q{i}", 1, annotations={PARTITION: "gpu"})[0]
            for i in range(args.queue)
        ]

        queued = set(names)
        await until(lambda: queued <= labelled, args.timeout, "every queued pod's job")
        fill_s = time.monotonic() - t_fill
        pending = sum(
            1
            for j in sims.slurm.jobs
            if j.comment.startswith("slurmbridge:") and j.state[0] == "PENDING"
        )
        # Idle means the bridge has done what the queue asked of it (each pod's job, then its
        # PodScheduled=False condition and one Event): no write for --settle seconds.
        settled_s = await _quiet(sims, args.settle, args.timeout)
        decides1 = await _decides(url)

        requests0 = _requests(sims)
        cpu0, wall0 = cpu_seconds(proc.pid), time.monotonic()
        await asyncio.sleep(args.idle_seconds)
        cpu1, wall1 = cpu_seconds(proc.pid), time.monotonic()
        requests1 = _requests(sims)
        decides2 = await _decides(url)

        full = [
            await _probe(sims, f"f{i}", bound, args.probe_timeout, created)
            for i in range(args.probes)
        ]
    finally:
        await tear_down([proc], sims, nats, workdir=workdir)
    return {
        "queue": args.queue,
        "queue_pending_in_slurm": pending,
        "queue_fill_s": round(fill_s, 1),
        "queue_settled_s": round(settled_s, 1),
        "idle_seconds": round(wall1 - wall0, 1),
        "cpu_idle_pct_of_core": round(100 * (cpu1 - cpu0) / (wall1 - wall0), 2),
        "fill_decides_per_pod": _per(decides0, decides1, args.queue),
        "idle_decides": _per(decides1, decides2, 1),
        "idle_requests": {
            k: n - requests0.get(k, 0.0)
            for k, n in sorted(requests1.items())
            if n - requests0.get(k, 0.0)
        },
        **{f"bind_empty_queue_{k}": v for k, v in _ms(empty).items()},
        **{f"bind_full_queue_{k}": v for k, v in _ms(full).items()},
        **_stages(created, submitted_at, started_at, labelled_at, bound),
        "poll_interval_s": args.poll_interval,
        "machine": machine(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--queue", type=int, default=10000, help="pods pending in Slurm")
    parser.add_argument("--nodes", type=int, default=8, help="simulated nodes (≥ 3)")
    parser.add_argument("--probes", type=int, default=5, help="pods timed before and after")
    parser.add_argument(
        "--probe-timeout",
        type=float,
        default=60.0,
        help="seconds a timed pod may wait for its Binding (then counted in *_timeouts)",
    )
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument(
        "--settle", type=float, default=12.0, help="seconds without a write before idling"
    )
    parser.add_argument("--poll-interval", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=1800.0, help="to fill the queue")
    parser.add_argument("--profile", default="", help="run slurmbridge under cProfile, into FILE")
    args = parser.parse_args()
    emit(asyncio.run(run(args)), args.json)


if __name__ == "__main__":
    main()
