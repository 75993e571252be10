"""Pods through Slurm: bind latency after the job runs, cleanup latency after the job ends.

Laid out as in production: slurmbridge runs as its own process (``slurmbridge run``, every
component), nats-server as another; this process hosts the Kubernetes API simulator with its
simulated kubelets and the slurmrestd simulator — the cluster slurmbridge talks to — and
timestamps inside their own writes with ``time.monotonic()``:

* **bind** — from the simulated slurmctld starting a placeholder job (``on_job_state``
  RUNNING) to the Binding of each of the group's pods landing in the Kubernetes simulator.
  ``--pods`` pods in groups of every kind (Pod, Job, JobSet, LeaderWorkerSet, PodGroup) arrive
  every ``--spacing`` seconds and run ``--run-seconds``; each pod is one sample.
* **cleanup** — from a running job ending in Slurm (``scancel``, one every ``--cancel-spacing``
  seconds, so the ends fall at every phase of the poll) to the deletion of its bound pod
  (``deletionTimestamp`` set). ``cleanup_removed_p99_ms`` adds the kubelet stopping the pod
  and slurmbridge releasing its finalizer, until the pod is gone.

* **work per placed pod** (``--arrival PODS_PER_S`` paces pods at that rate): over the bind
  phase, until nothing more is written or decided, ``decides_per_pod`` (slurmbridge's
  ``slurmbridge_decides_total``, scraped from its ``/metrics``), ``api_writes_per_pod``
  (POST/PUT/PATCH/DELETE requests both simulators served), ``nats_msgs_per_pod`` (JetStream
  messages stored, all streams) and ``cpu_ms_per_pod`` (the slurmbridge process's CPU time:
  the simulators and the load run in this process, so that figure is the bridge's own), with
  breakdowns by reconciler, request and stream (:mod:`bench._work`), and the effects by
  action and outcome (``slurmbridge_actions_total``: which effect made which request).
* **replicas** (``--replicas 2``): that many slurmbridge processes on one NATS, each given one
  partition of every reconciler's keys (``worker.partitions``, ``partitionIndices``):
  ``replica_decides_share`` and ``replica_effects_ok_share`` (each process's part of the
  decides and of the effects that changed something, from its own ``/metrics``) beside the
  sums, which should equal one process's.
* **direct baseline** (``--baseline direct``): after slurmbridge is stopped, the same workload
  again through ``bench/_direct.py``, a minimal binder in its own process (watch pods → submit
  a job → poll it → bind; no log): ``direct_bound_pods_per_s`` and its work per pod.

A running job's end is seen by the full job listing (``slurm.pollInterval``); a pending job's
start by the hot loop (``slurm.pendingJobPollInterval``). Slinky's anchor for both is its
30 s job re-list.

    python bench/workload.py --json [--pods 200] [--poll-interval 2]
    python bench/workload.py --json --arrival 50 --pods 300 --nodes 100 --baseline direct
    python bench/workload.py --json --arrival 50 --pods 300 --nodes 100 --replicas 2
    python bench/workload.py --json --slurm real [--release 26.05] [--nodes 20]
    python bench/workload.py --json --slurm real --arrival 50 --pods 300 [--trace-rest]

``--slurm real`` (root; the release's root file system built once with
``python -m slurmbridge.devtools.realslurm_modern install 26.05``) replaces the slurmrestd simulator
with its own real Slurm cluster (``--nodes``, default 20, 2 CPUs each; a placeholder job asks
one node per pod), stopped at the end. Real slurmctld tells nobody when it starts a job, so
the bench reads ``jobs/state`` through slurmrestd itself every ``--probe-interval`` seconds
(its own connection); ``bind_*`` run from the receipt of the first answer that showed the
job RUNNING (the earliest any client can know it), ``bind_from_start_midpoint_*`` from the
midpoint between the last answer that did not show it (its send time) and that receipt:
``job_start_uncertainty`` is that half-width. ``bind_stage_running_to_log_*`` (until the
log holds a RUNNING ``SlurmJob``: the bridge's poller) and ``bind_stage_log_to_bound_*``
(then until the Binding) split it; ``--trace-rest`` adds what the bridge asked of
slurmrestd, and when (``bench/_restproxy.py``: the full poll's period as the gaps between
its pings, ``full_poll``), and splits the first stage by the read that first showed the bridge
each start (``bind_stage_running_to_log_by_first_read``: ``GET jobs/state?job_id`` is the hot
loop, ``GET jobs/state`` the full poll); ``slurmctld_sdiag_bind_phase`` says what
slurmctld did. Slurm's own ``start_time`` (whole seconds) is
checked against it (``start_time_agrees``). Cleanup: each long-running job is cancelled with
``DELETE job/{id}`` (its end taken as the middle of that request), ``--cleanup-pods``
(default 20 here) of them.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import nats as nats_py

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    add_slurm_options,
    emit,
    free_port,
    machine,
    percentile,
    real_slurm_fields,
    start_slurmbridge,
    tear_down,
    until,
)
from bench._work import (
    api_reads,
    cpu_seconds,
    delta,
    kube_writes,
    per_pod,
    prometheus_totals,
    slurm_reads,
    slurm_writes,
    stream_seqs,
)
from schemas import subjects, wellknown
from schemas.events import SlurmJob, decode_event
from slurmbridge.devtools.sim.kube import ApiError, Change
from slurmbridge.devtools.sim.workloads import GROUP_KINDS, create_group
from slurmbridge.devtools.testing import Simulators
from slurmbridge.runtime.leases import BUCKET as LEASE_BUCKET
from slurmbridge.runtime.natsserver import NatsServer

JOBID = wellknown.LABEL_SLURM_JOBID
#: The direct binder's pods name it, so slurmbridge never takes them.
DIRECT_SCHEDULER = "direct-binder"


class Clock:
    """Monotonic timestamps of job starts/ends (slurmrestd simulator) and pod binds/deletions
    (Kubernetes simulator), recorded inside the simulators' own writes."""

    def __init__(self) -> None:
        self.started: dict[int, float] = {}
        self.ended: dict[int, float] = {}
        self.bound: dict[str, tuple[int, float]] = {}
        self.deleting: dict[str, tuple[int, float]] = {}
        self.removed: dict[str, tuple[int, float]] = {}
        self.marked: dict[str, tuple[int, float]] = {}
        #: Each pod's ``status.phase`` as of its last write. The waits read it here: reading
        #: the simulator (``KubeSim.get`` copies the pod) for every pod 50 times a second was
        #: a fifth of this process's event loop, the loop that answers the bridge's
        #: Kubernetes requests (py-spy, ``--slurm real``, 2026-11-29).
        self.phase: dict[str, str] = {}

    def succeeded(self, names: list[str]) -> bool:
        """Every pod of ``names`` is Succeeded (as last written)."""
        return all(self.phase.get(n) == "Succeeded" for n in names)

    def on_job(self, job_id: int, state: str, at: float) -> None:
        if state == "RUNNING":
            self.started.setdefault(job_id, at)
        elif state in ("CANCELLED", "COMPLETED", "PREEMPTED", "TIMEOUT", "FAILED"):
            self.ended.setdefault(job_id, at)

    def on_write(self, change: Change) -> None:
        if change.resource.name != "pods":
            return
        now = time.monotonic()
        new, old = change.object, change.old or {}
        meta = new.get("metadata") or {}
        name = str(meta.get("name"))
        job = int((meta.get("labels") or {}).get(JOBID) or 0)
        self.phase[name] = str((new.get("status") or {}).get("phase") or "")
        if job and not ((old.get("metadata") or {}).get("labels") or {}).get(JOBID):
            self.marked.setdefault(name, (job, now))
        if (new.get("spec") or {}).get("nodeName") and not (old.get("spec") or {}).get("nodeName"):
            self.bound.setdefault(name, (job, now))
        old_deleting = bool((old.get("metadata") or {}).get("deletionTimestamp"))
        if change.type == "DELETED":
            self.removed.setdefault(name, (job, now))
            if not old_deleting:
                self.deleting.setdefault(name, (job, now))
        elif meta.get("deletionTimestamp") and not old_deleting:
            self.deleting.setdefault(name, (job, now))


def _ms(samples: list[float], p: float) -> float:
    return round(percentile(samples, p) * 1000, 1)


def _plan(pods: int) -> list[tuple[str, int]]:
    """Groups of every kind cycling, bare pods of 1 and others of 2–8, totalling ``pods``."""
    plan: list[tuple[str, int]] = []
    left, i = pods, 0
    while left > 0:
        kind = GROUP_KINDS[i % len(GROUP_KINDS)]
        size = 1 if kind == "Pod" else min(left, 2 + (i * 3) % 7)
        plan.append((kind, size))
        left -= size
        i += 1
    return plan


class Work:
    """Counters read around a phase: decides (slurmbridge's ``/metrics``, when
    ``metrics_url``), writes served by both simulators, JetStream messages stored, and the
    CPU seconds of process ``pid`` (the bridge, or the direct binder)."""

    def __init__(
        self, sims: Simulators, nc: Any, pids: list[int], metrics_urls: tuple[str, ...] = ()
    ) -> None:
        self.sims, self.nc, self.pids, self.metrics_urls = sims, nc, pids, metrics_urls

    async def snapshot(self, *, metrics: bool = True) -> dict[str, Any]:
        """The counters now; ``metrics=False`` leaves out slurmbridge's ``/metrics``, whose
        rendering costs the bridge CPU (tens of ms per scrape): :meth:`quiet` polls without
        it, so the bench does not charge the bridge for its own polling."""
        decides: dict[str, float] = {}
        triggers: dict[str, float] = {}
        actions: dict[str, float] = {}
        replicas: list[dict[str, float]] = []
        for url in self.metrics_urls if metrics else ():
            async with aiohttp.ClientSession() as http, http.get(url) as resp:
                text = await resp.text()
            mine = prometheus_totals(text, "slurmbridge_decides_total", by="reconciler")
            done = prometheus_totals(text, "slurmbridge_actions_total", by="outcome")
            replicas.append({"decides": sum(mine.values()), "effects_ok": done.get("ok", 0.0)})
            for k, v in mine.items():
                decides[k] = decides.get(k, 0.0) + v
            seen = prometheus_totals(
                text, "slurmbridge_events_consumed_total", by=("reconciler", "kind")
            )
            for k, v in seen.items():
                triggers[k] = triggers.get(k, 0.0) + v
            acted = prometheus_totals(text, "slurmbridge_actions_total", by=("action", "outcome"))
            for k, v in acted.items():
                actions[k] = actions.get(k, 0.0) + v
        return {
            "decides": decides,
            "triggers": triggers,
            "actions": actions,
            "replicas": replicas,
            "kube": kube_writes(dict(self.sims.kube.requests)),
            "slurm": slurm_writes(dict(self.sims.slurm.counters)),
            "reads": {
                **api_reads(dict(self.sims.kube.requests)),
                **slurm_reads(dict(self.sims.slurm.counters)),
            },
            "nats": await stream_seqs(self.nc),
            "cpu": sum(cpu_seconds(pid) for pid in self.pids),
        }

    async def quiet(self, settle: float, cap: float) -> None:
        """Wait until nothing is written or decided for ``settle`` seconds (at most ``cap``):
        the work a pod causes after it has ended (job cancelled, finalizers) counts too."""
        deadline = time.monotonic() + cap
        # Every decide follows an observation or an effect, both JetStream messages: the
        # streams' sequences and the simulators' writes tell quiet without scraping /metrics.
        # Reads go on while idle (the polls): they do not tell work from quiet. Neither do
        # the lease renewals (every 2.3 s at the default lease), which kept every wait at its
        # cap and charged the pods 30 s of an idle bridge's CPU.
        lease_stream = f"KV_{LEASE_BUCKET}"

        async def work_now() -> dict[str, Any]:
            now = await self.snapshot(metrics=False)
            now.pop("cpu"), now.pop("reads")
            now["nats"].pop(lease_stream, None)
            return now

        last = await work_now()
        quiet_since = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - quiet_since < settle:
            await asyncio.sleep(0.25)
            now = await work_now()
            if now != last:
                last, quiet_since = now, time.monotonic()

    @staticmethod
    def per_pod(before: dict[str, Any], after: dict[str, Any], pods: int) -> dict[str, Any]:
        """The figures per placed pod, with the breakdowns they sum."""
        decides = delta(before["decides"], after["decides"])
        triggers = delta(before["triggers"], after["triggers"])
        actions = delta(before["actions"], after["actions"])
        kube = delta(before["kube"], after["kube"])
        slurm = delta(before["slurm"], after["slurm"])
        nats = delta(before["nats"], after["nats"])
        reads = delta(before["reads"], after["reads"])
        shares: dict[str, Any] = {}
        if len(after["replicas"]) > 1:
            for field in ("decides", "effects_ok"):
                done = [
                    a[field] - b[field]
                    for a, b in zip(after["replicas"], before["replicas"], strict=True)
                ]
                total = sum(done) or 1.0
                shares[f"replica_{field}_share"] = [round(d / total, 3) for d in done]
                shares[f"replica_{field}_per_pod"] = [per_pod(d, pods) for d in done]
        return {
            **shares,
            "decides_per_pod": per_pod(sum(decides.values()), pods),
            "api_writes_per_pod": per_pod(sum(kube.values()) + sum(slurm.values()), pods),
            "api_reads_per_pod": per_pod(sum(reads.values()), pods),
            "nats_msgs_per_pod": per_pod(sum(nats.values()), pods),
            "cpu_ms_per_pod": per_pod((after["cpu"] - before["cpu"]) * 1000, pods),
            "decides_by_reconciler_per_pod": {
                k: per_pod(v, pods) for k, v in sorted(decides.items())
            },
            "triggers_by_reconciler_kind_per_pod": {
                k: per_pod(v, pods) for k, v in sorted(triggers.items())
            },
            "actions_by_kind_outcome_per_pod": {
                k: per_pod(v, pods) for k, v in sorted(actions.items()) if v
            },
            "writes_by_request_per_pod": {
                k: per_pod(v, pods) for k, v in sorted({**kube, **slurm}.items())
            },
            "reads_by_request_per_pod": {k: per_pod(v, pods) for k, v in sorted(reads.items())},
            "nats_msgs_by_stream_per_pod": {k: per_pod(v, pods) for k, v in sorted(nats.items())},
        }


async def _arrive(
    sim: Any, args: argparse.Namespace, prefix: str, scheduler: str
) -> tuple[list[str], float]:
    """Create the plan's groups, paced at ``--arrival`` pods/s (or one group every
    ``--spacing`` s); returns the pod names and the phase's start (monotonic)."""
    names: list[str] = []
    t0 = time.monotonic()
    for n, (kind, size) in enumerate(_plan(args.pods)):
        if args.arrival:
            wait = t0 + len(names) / args.arrival - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
        names += create_group(
            sim,
            kind,
            f"{prefix}{n}",
            size,
            requests={"cpu": "1", "memory": "64Mi"},
            run_seconds=args.run_seconds,
            scheduler_name=scheduler,
        )
        if not args.arrival:
            await asyncio.sleep(args.spacing)
    return names, t0


async def run(args: argparse.Namespace) -> dict[str, Any]:
    clock = Clock()
    workdir = Path(tempfile.mkdtemp(prefix="slurmbridge-workload-"))
    sims = Simulators(nodes=args.nodes, workdir=workdir / "sims", kubelet=True)
    nats = NatsServer(store_dir=workdir / "nats")
    await nats.start()
    await sims.start()
    ports = [free_port() for _ in range(args.replicas)]
    procs = []
    for i, port in enumerate(ports):
        # Replicas split every reconciler's keys (worker.partitions), one partition each;
        # the producers' leases make one replica the poller and watcher.
        split = (
            {"worker": {"partitions": args.replicas, "partitionIndices": [i]}}
            if args.replicas > 1
            else {}
        )
        procs.append(
            await start_slurmbridge(
                {**sims.overrides(), **split},
                nats.url,
                workdir,
                args.poll_interval,
                profile=args.profile if i == 0 else "",
                metrics_port=port,
                name=f"slurmbridge-{i}",
            )
        )
    nc = await nats_py.connect(nats.url)
    sim = sims.kube
    direct: dict[str, Any] = {}
    try:

        def phase(name: str) -> str:
            try:
                return str(sim.get("pods", name, "default").get("status", {}).get("phase"))
            except ApiError:
                return ""

        # 0. warm-up: slurmbridge is up once it has placed one pod.
        (warm,) = create_group(sim, "Pod", "warm-up", 1, requests={"cpu": "1"}, run_seconds=0)
        await until(lambda: phase(warm) == "Succeeded", 60, "slurmbridge to place a pod")
        sims.slurm.on_job_state.append(clock.on_job)
        sim.on_write.append(clock.on_write)
        work = Work(
            sims,
            nc,
            [p.pid for p in procs],
            tuple(f"http://127.0.0.1:{port}/metrics" for port in ports),
        )
        await work.quiet(settle=args.poll_interval + 0.5, cap=30)

        # 1. bind: groups arrive, run, finish.
        before = await work.snapshot()
        names, wall0 = await _arrive(sim, args, "b", wellknown.DEFAULT_SCHEDULER_NAME)
        await until(lambda: clock.succeeded(names), args.timeout, "pods Succeeded")
        t_done = time.monotonic()
        bind = [at - clock.started[job] for job, at in (clock.bound[n] for n in names)]
        cpu_share = (sum(cpu_seconds(p.pid) for p in procs) - before["cpu"]) / (t_done - wall0)
        last_bind = max(clock.bound[n][1] for n in names)
        await work.quiet(settle=args.poll_interval + 0.5, cap=30)
        figures = Work.per_pod(before, await work.snapshot(), len(names))
        # Where the bind time goes: job start → pod labelled (submit answered, pods marked),
        # then pod labelled → Binding (watch, log, projection, placement, bind).
        marked = [clock.marked[n][1] - clock.started[clock.marked[n][0]] for n in names]
        to_bind = [clock.bound[n][1] - clock.marked[n][1] for n in names]

        # 2. cleanup: long-running bare pods, then scancel their jobs one by one.
        long_names = [
            create_group(sim, "Pod", f"c{n}", 1, requests={"cpu": "1", "memory": "64Mi"})[0]
            for n in range(args.cleanup_pods)
        ]
        await until(
            lambda: all(phase(n) == "Running" for n in long_names), args.timeout, "pods Running"
        )
        jobs = [int(sim.get("pods", n, "default")["metadata"]["labels"][JOBID]) for n in long_names]
        for job in jobs:
            sims.slurm.cancel_job(job)
            await asyncio.sleep(args.cancel_spacing)
        await until(
            lambda: all(n in clock.removed for n in long_names), args.timeout, "pods removed"
        )
        pairs = list(zip(long_names, jobs, strict=True))
        cleanup = [clock.deleting[n][1] - clock.ended[j] for n, j in pairs]
        removed = [clock.removed[n][1] - clock.ended[j] for n, j in pairs]

        # 3. the same workload through the minimal direct binder, slurmbridge stopped.
        for p in procs:
            p.terminate()
            await p.wait()
        if args.baseline == "direct":
            # Without slurmbridge nobody taints nodes as managed; its NoExecute taint, left
            # behind, would make the kubelets refuse the direct binder's pods.
            for i in range(1, args.nodes + 1):
                node = sim.get("nodes", f"n{i}")
                taints = node.get("spec", {}).get("taints") or []
                kept = [t for t in taints if t.get("key") != wellknown.TAINT_MANAGED_NODE]
                if kept != taints:
                    node["spec"]["taints"] = kept
                    sim.update(node)
            direct = await _direct(args, sims, nc, clock)
    finally:
        await nc.close()
        await tear_down(procs, sims, nats, workdir=workdir)

    n_groups = len(_plan(args.pods))
    arrival = args.arrival or len(names) / max(1e-9, args.spacing * n_groups)
    return {
        "pods": len(bind),
        "nodes": args.nodes,
        "cluster_capacity_pods_per_s": capacity(args.nodes, args.run_seconds),
        "run_seconds": args.run_seconds,
        "replicas": args.replicas,
        "bind_p50_ms": _ms(bind, 50),
        "bind_p99_ms": _ms(bind, 99),
        "bind_max_ms": _ms(bind, 100),
        "bind_stage_marked_p50_ms": _ms(marked, 50),
        "bind_stage_marked_p99_ms": _ms(marked, 99),
        "bind_stage_labelled_to_bound_p50_ms": _ms(to_bind, 50),
        "bind_stage_labelled_to_bound_p99_ms": _ms(to_bind, 99),
        "slurmbridge_cpu_share_bind_phase": round(cpu_share, 2),
        "arrival_pods_per_s": round(arrival, 1),
        "bound_pods_per_s": round(len(names) / max(1e-9, last_bind - wall0), 1),
        **figures,
        **direct,
        "cleanup_pods": len(cleanup),
        "cleanup_p50_ms": _ms(cleanup, 50),
        "cleanup_p99_ms": _ms(cleanup, 99),
        "cleanup_removed_p99_ms": _ms(removed, 99),
        "poll_interval_s": args.poll_interval,
        "pending_job_poll_interval_s": 0.02,
        "machine": machine(),
    }


async def _direct(
    args: argparse.Namespace,
    sims: Simulators,
    nc: Any,
    clock: Clock,
) -> dict[str, Any]:
    """The bind phase again through ``bench/_direct.py`` (its own process), pods named
    ``d<n>-…`` with their own scheduler name; its figures are prefixed ``direct_``."""
    binder = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).resolve().parent / "_direct.py"),
        "--kube-url",
        sims.kube.url,
        "--slurm-url",
        sims.slurm.url,
        "--slurm-token-file",
        str(sims.token_file),
        "--scheduler",
        DIRECT_SCHEDULER,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert binder.stdout is not None
        line = await asyncio.wait_for(binder.stdout.readline(), 60)
        if line.strip() != b"READY":
            raise RuntimeError(f"direct binder did not start: {line!r}")
        work = Work(sims, nc, [binder.pid])
        before = await work.snapshot()
        names, wall0 = await _arrive(sims.kube, args, "d", DIRECT_SCHEDULER)
        await until(lambda: clock.succeeded(names), args.timeout, "direct pods Succeeded")
        last_bind = max(clock.bound[n][1] for n in names)
        # The direct binder labels nothing: its jobs are named after their pods.
        job_of = {j.name: j.job_id for j in sims.slurm.jobs_by_id.values()}
        bind = [clock.bound[n][1] - clock.started[job_of[n]] for n in names]
        await work.quiet(settle=1.0, cap=30)
        figures = Work.per_pod(before, await work.snapshot(), len(names))
    finally:
        binder.terminate()
        await binder.wait()
    return {
        "direct_bound_pods_per_s": round(len(names) / max(1e-9, last_bind - wall0), 1),
        "direct_bind_p50_ms": _ms(bind, 50),
        "direct_bind_p99_ms": _ms(bind, 99),
        "direct_api_writes_per_pod": figures["api_writes_per_pod"],
        "direct_cpu_ms_per_pod": figures["cpu_ms_per_pod"],
        "direct_writes_by_request_per_pod": figures["writes_by_request_per_pod"],
    }


def _other_cpu(slurm: Any, nats: NatsServer) -> dict[str, float]:
    """CPU seconds so far of everything but slurmbridge: this process (the Kubernetes
    simulator, its kubelets, the probe), nats-server and the Slurm cluster's daemons."""
    from bench._realslurm import process_cpu

    usage = resource.getrusage(resource.RUSAGE_SELF)
    out = {"bench (kube sim, kubelets, probe)": usage.ru_utime + usage.ru_stime}
    proc = getattr(nats, "_proc", None)
    if proc is not None:
        out["nats-server"] = cpu_seconds(proc.pid)
    return {**out, **process_cpu(slurm)}


async def _log_running(nc: Any) -> dict[int, float]:
    """Job id → monotonic time the first RUNNING ``SlurmJob`` observation of it reached the
    log (a plain NATS subscription sees each JetStream publish as it is stored)."""
    first: dict[int, float] = {}

    async def seen(msg: Any) -> None:
        now = time.monotonic()
        ev = decode_event("SlurmJob", msg.data)
        if isinstance(ev, SlurmJob) and ev.base_state == "RUNNING":
            first.setdefault(ev.job_id or int(ev.key), now)

    await nc.subscribe(subjects.obs_filter(kind="SlurmJob"), cb=seen)
    await nc.flush()
    return first


def _real_run(args: argparse.Namespace) -> dict[str, Any]:
    return asyncio.run(_real(args))


async def _real(args: argparse.Namespace) -> dict[str, Any]:
    """The bind and cleanup measurements against a real Slurm ``args.release``."""
    from bench._realslurm import JobWatch, Probe, cluster, sdiag
    from bench._restproxy import RestProxy, first_running
    from bench._restproxy import summary as rest_summary

    t_begin = time.monotonic()
    async with cluster(args.release, args.nodes) as slurm, Probe(slurm) as probe:
        clock = Clock()
        watch = JobWatch(probe, args.probe_interval)
        workdir = Path(tempfile.mkdtemp(prefix="slurmbridge-workload-"))
        sims = Simulators(
            nodes=args.nodes, workdir=workdir / "sims", kubelet=True, real_slurm=slurm
        )
        nats = NatsServer(store_dir=workdir / "nats")
        proc: asyncio.subprocess.Process | None = None
        nc: Any = None
        proxy: RestProxy | None = None
        try:
            await nats.start()
            await sims.start()
            overrides = sims.overrides()
            if args.trace_rest:
                proxy = RestProxy(slurm.url)
                await proxy.start()
                overrides["slurm"]["url"] = proxy.url
            proc = await start_slurmbridge(
                overrides, nats.url, workdir, args.poll_interval, profile=args.profile
            )
            sim = sims.kube

            def phase(name: str) -> str:
                try:
                    return str(sim.get("pods", name, "default").get("status", {}).get("phase"))
                except ApiError:
                    return ""

            def job_of(name: str) -> int:
                pod = sim.get("pods", name, "default")
                return int(pod["metadata"]["labels"][JOBID])

            (warm,) = create_group(sim, "Pod", "warm-up", 1, requests={"cpu": "1"}, run_seconds=0)
            await until(lambda: phase(warm) == "Succeeded", 120, "slurmbridge to place a pod")
            sim.on_write.append(clock.on_write)
            nc = await nats_py.connect(nats.url)
            logged = await _log_running(nc)
            watch.start()

            # 1. bind: groups arrive (paced at --arrival, or one every --spacing s), run, finish.
            await asyncio.to_thread(sdiag, slurm, reset=True)
            cpu0 = cpu_seconds(proc.pid)
            others0 = _other_cpu(slurm, nats)
            names, wall0 = await _arrive(sim, args, "b", wellknown.DEFAULT_SCHEDULER_NAME)
            await until(lambda: clock.succeeded(names), args.timeout, "pods Succeeded")
            t_done = time.monotonic()
            others = {
                k: round((v - others0.get(k, 0.0)) / (t_done - wall0), 2)
                for k, v in _other_cpu(slurm, nats).items()
            }
            ctld = await asyncio.to_thread(sdiag, slurm)
            if proxy is not None and args.trace_rest_file:
                Path(args.trace_rest_file).write_text(
                    "".join(json.dumps(dataclasses.astuple(t)) + "\n" for t in proxy.traces)
                )
            traced = (
                {}
                if proxy is None
                else {
                    "rest_trace_bind_phase": rest_summary(
                        proxy.traces,
                        wall0,
                        t_done,
                        {j: seen.by for j, seen in watch.running.items()},
                    )
                }
            )
            batches = list(watch.start_batches)  # the bind phase's job starts
            cpu_share = (cpu_seconds(proc.pid) - cpu0) / (t_done - wall0)
            jobs = {clock.bound[n][0] for n in names}
            missing = sorted(j for j in jobs if j not in watch.running)
            if missing:
                raise RuntimeError(f"jobs never seen RUNNING by the probe: {missing}")
            # Bind: from the receipt of the first jobs/state answer that shows the job
            # RUNNING (the earliest any REST client can know it) to the pod's Binding; the
            # midpoint figure adds half the probe's uncertainty (what Slurm did before).
            bind = [at - watch.running[job].by for job, at in (clock.bound[n] for n in names)]
            bind_mid = [at - watch.running[job].mid for job, at in (clock.bound[n] for n in names)]
            # Where it goes: probe sees RUNNING → the log holds a RUNNING SlurmJob (the
            # bridge's poller: hot loop or state poll) → the pod's Binding.
            unlogged = sorted(j for j in jobs if j not in logged)
            # Which of the bridge's reads brought each start (--trace-rest): the hot loop's
            # jobs/state?job_id, or the full poll's jobs/state (bench/_restproxy.py).
            by_path: dict[str, list[float]] = {}
            if proxy is not None:
                starts = {j: seen.by for j, seen in watch.running.items()}
                for j, (_, point) in first_running(proxy.traces, starts).items():
                    if j in jobs and j in logged:
                        by_path.setdefault(point, []).append(logged[j] - watch.running[j].by)
            # How long each job held its nodes: first seen RUNNING → first seen ended.
            held = [watch.ended[j].by - watch.running[j].by for j in jobs if j in watch.ended]
            to_log = [logged[j] - watch.running[j].by for j in jobs if j in logged]
            log_to_bind = [
                at - logged[job] for job, at in (clock.bound[n] for n in names) if job in logged
            ]
            # Unlike the simulator's, a real job is PENDING when the submit returns and its
            # pods are labelled: Slurm starts it later (backfill, bf_interval=1).
            waited = [watch.running[clock.marked[n][0]].mid - clock.marked[n][1] for n in names]
            widths = [watch.running[j].half_width for j in jobs]
            first_bind = min(at for _, at in clock.bound.values())
            last_bind = max(clock.bound[n][1] for n in names)
            # Slurm's own start_time (whole seconds) against the probe's wall clock.
            agree = 0
            for job in jobs:
                body, _, _ = await probe.get(f"job/{job}")
                start = int(body["jobs"][0]["start_time"]["number"])
                seen = watch.running[job]
                lo, hi = seen.wall - 2 * seen.half_width, seen.wall
                agree += start <= hi and lo < start + 1

            # 2. cleanup: long-running bare pods, then cancel their jobs one by one.
            long_names = [
                create_group(sim, "Pod", f"c{n}", 1, requests={"cpu": "1", "memory": "64Mi"})[0]
                for n in range(args.cleanup_pods)
            ]
            await until(
                lambda: all(phase(n) == "Running" for n in long_names),
                args.timeout,
                "pods Running",
            )
            cancels: dict[int, float] = {}
            long_jobs = [job_of(n) for n in long_names]
            for job in long_jobs:
                t0, t1 = await probe.delete(f"job/{job}")
                cancels[job] = (t0 + t1) / 2
                await asyncio.sleep(args.cancel_spacing)
            await until(
                lambda: all(n in clock.removed for n in long_names), args.timeout, "pods removed"
            )
            pairs = list(zip(long_names, long_jobs, strict=True))
            cleanup = [clock.deleting[n][1] - cancels[j] for n, j in pairs]
            removed = [clock.removed[n][1] - cancels[j] for n, j in pairs]
            polls = watch.polls
        finally:
            await watch.stop()
            if nc is not None:
                await nc.close()
            servers = (proxy, sims, nats) if proxy is not None else (sims, nats)
            await tear_down([proc], *servers, workdir=workdir)
        version, api = slurm.slurm_version, probe.version
        rtt = sorted(probe.rtts)
    n_groups = len(_plan(args.pods))
    return {
        **real_slurm_fields(args, version, api),
        "cluster_capacity_pods_per_s": capacity(args.nodes, args.run_seconds),
        "run_seconds": args.run_seconds,
        "pods": len(bind),
        "jobs": len(jobs),
        "bind_p50_ms": _ms(bind, 50),
        "bind_p99_ms": _ms(bind, 99),
        "bind_max_ms": _ms(bind, 100),
        "bind_from_start_midpoint_p50_ms": _ms(bind_mid, 50),
        "bind_from_start_midpoint_p99_ms": _ms(bind_mid, 99),
        "bind_stage_running_to_log_p50_ms": _ms(to_log, 50),
        "bind_stage_running_to_log_p99_ms": _ms(to_log, 99),
        "bind_stage_running_to_log_max_ms": _ms(to_log, 100),
        "bind_stage_log_to_bound_p50_ms": _ms(log_to_bind, 50),
        "bind_stage_log_to_bound_p99_ms": _ms(log_to_bind, 99),
        "jobs_running_not_logged": len(unlogged),
        "bind_stage_running_to_log_by_first_read": {
            point: {"jobs": len(v), "p50_ms": _ms(v, 50), "p99_ms": _ms(v, 99)}
            for point, v in sorted(by_path.items())
        },
        "job_held_nodes_p50_ms": _ms(held, 50),
        "job_held_nodes_p99_ms": _ms(held, 99),
        "slurm_pending_jobs_max": watch.pending_max,
        "slurm_start_after_labelled_p50_ms": _ms(waited, 50),
        "slurm_start_after_labelled_p99_ms": _ms(waited, 99),
        "job_start_uncertainty_p50_ms": _ms(widths, 50),
        "job_start_uncertainty_max_ms": _ms(widths, 100),
        "start_time_agrees": f"{agree}/{len(jobs)}",
        "job_starts_per_answer_max": max(batches),
        "job_starts_per_answer_mean": round(sum(batches) / len(batches), 2),
        "probe_interval_s": args.probe_interval,
        "probe_polls": polls,
        "probe_rtt_p50_ms": _ms(rtt, 50),
        "slurmbridge_cpu_share_bind_phase": round(cpu_share, 2),
        "other_cpu_share_bind_phase": others,
        "slurmctld_sdiag_bind_phase": ctld,
        **traced,
        "arrival_pods_per_s": round(
            args.arrival or len(names) / max(1e-9, args.spacing * n_groups), 1
        ),
        "bound_pods_per_s": round(len(names) / max(1e-9, last_bind - wall0), 1),
        "bound_pods_per_s_first_to_last": round(
            (len(names) - 1) / max(1e-9, last_bind - first_bind), 1
        ),
        "all_succeeded_s": round(t_done - wall0, 1),
        "cleanup_pods": len(cleanup),
        "cleanup_p50_ms": _ms(cleanup, 50),
        "cleanup_p99_ms": _ms(cleanup, 99),
        "cleanup_removed_p99_ms": _ms(removed, 99),
        "poll_interval_s": args.poll_interval,
        "pending_job_poll_interval_s": 0.02,
        "elapsed_s": round(time.monotonic() - t_begin, 1),
        "machine": machine(),
    }


def default_nodes(real: bool, arrival: float, run_seconds: float) -> int:
    """``--nodes`` when not given: 20 against real Slurm; 32 in the simulator, or, with an
    arrival rate, enough for twice it. A placeholder job holds one whole node per pod
    (exclusive, ``reconcilers/_pods.py``) while its pod runs, so ``nodes`` nodes place at
    most ``nodes / run_seconds`` pods/s; below the arrival rate the run measures the
    cluster's queue, not the bridge."""
    if real:
        return 20
    return max(32, math.ceil(2 * arrival * run_seconds))


def capacity(nodes: int, run_seconds: float) -> float:
    """Pods/s ``nodes`` whole nodes place at most when each pod runs ``run_seconds``."""
    return round(nodes / max(1e-9, run_seconds), 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    add_slurm_options(ap)
    ap.add_argument(
        "--probe-interval",
        type=float,
        default=0.01,
        help="real: seconds between the bench's jobs/state reads (0.01)",
    )
    ap.add_argument(
        "--trace-rest",
        action="store_true",
        help="real: put a tracing proxy (bench/_restproxy.py) between slurmbridge and "
        "slurmrestd and report what it asked, when (one more loopback hop per request)",
    )
    ap.add_argument(
        "--trace-rest-file",
        default="",
        metavar="FILE",
        help="real, with --trace-rest: also write every traced request there (JSON lines: "
        "method, endpoint, sent, received, status, jobs shown RUNNING, path)",
    )
    ap.add_argument("--pods", type=int, default=200, help="pods in the bind phase (200)")
    ap.add_argument(
        "--cleanup-pods",
        type=int,
        default=None,
        help="pods scancelled (30; real: 20); at most --nodes: each holds a whole node",
    )
    ap.add_argument(
        "--nodes",
        type=int,
        default=None,
        help="nodes, 2 CPUs each; each pod holds a whole node for at least --run-seconds, so "
        "the cluster places at most nodes / run-seconds pods/s (cluster_capacity_pods_per_s). "
        "Default: real 20; sim 32, or with --arrival R at least 2 × R × run-seconds (200 "
        "at 200 pods/s), so that the run measures the bridge, not a full cluster",
    )
    ap.add_argument("--poll-interval", type=float, default=2.0, help="slurm.pollInterval (2 s)")
    ap.add_argument(
        "--spacing", type=float, default=0.2, help="seconds between groups (0.2: ~21 pods/s)"
    )
    ap.add_argument(
        "--arrival",
        type=float,
        default=0.0,
        metavar="PODS_PER_S",
        help="pods arrive at this rate, whatever their groups (replaces --spacing); "
        "sim: --nodes then defaults to twice the capacity this rate needs",
    )
    ap.add_argument(
        "--baseline",
        choices=("none", "direct"),
        default="none",
        help="sim: direct = place the same workload with bench/_direct.py too",
    )
    ap.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="sim: slurmbridge processes on one NATS, each one partition of every "
        "reconciler's keys (1)",
    )
    ap.add_argument("--run-seconds", type=float, default=0.5, help="pod run time (0.5 s)")
    ap.add_argument(
        "--cancel-spacing", type=float, default=0.173, help="seconds between scancels (0.173)"
    )
    ap.add_argument("--timeout", type=float, default=300.0, help="give up after (300 s)")
    ap.add_argument("--profile", default="", help="run slurmbridge under cProfile, into FILE")
    args = ap.parse_args()
    real = args.slurm == "real"
    args.nodes = args.nodes or default_nodes(real, args.arrival, args.run_seconds)
    args.cleanup_pods = args.cleanup_pods if args.cleanup_pods is not None else (20 if real else 30)
    if args.cleanup_pods > args.nodes:
        # Placeholder jobs take whole nodes (exclusive by default): more long-running pods
        # than nodes would never all run, and the cleanup phase would wait out --timeout.
        ap.error(f"--cleanup-pods ({args.cleanup_pods}) must be at most --nodes ({args.nodes})")
    emit(_real_run(args) if real else asyncio.run(run(args)), args.json)


if __name__ == "__main__":
    main()
