"""``slurmbridge demo``: the whole system on one machine, with a scripted story printed live.

Embedded nats-server, the Kubernetes and slurmrestd simulators with nodes ``n1..nN``, and every
component. Story (spread over ``--duration`` seconds):

1. start-up — every Kubernetes node with a Slurm node gets the managed-node taint;
   a batch Job ``train`` of 3 pods asks for slurmbridge's scheduler — placement submits one
   placeholder job for the group, labels the pods and binds them to the job's nodes when it
   runs; the simulated kubelets run the pods to completion, and workload cancels the job
   and releases the pods' finalizers;
2. ``kubectl cordon n1`` — slurm_drain drains n1 with Slinky's reason text;
3. ``kubectl uncordon n1`` — n1 is undrained (the drain was ours);
4. an administrator drains n2 (``scontrol update … state=drain``), then n2 is cordoned and
   uncordoned — the administrator's drain is left alone;
5. n4 leaves Slurm — node_taint removes its taint;
6. a NodeSet ``burst`` autoscaled on partition ``burst``: a wave of three jobs scales it
   0 → 3, the jobs run on the new slurmd nodes; scaled to 1 while burst-1 still runs a job,
   the idle burst-2 goes at once and burst-1 only once its job ends; when the partition is
   quiet it goes to 0;
7. Kubernetes node ext-1 is labelled as an external node — node_register creates it in Slurm
   (``State=External``, its partitions as features); its partitions change — it is drained,
   deleted and created again with the new ones (Slurm places a dynamic node in partitions
   only when it is created); the label is removed — it is drained, then deleted from Slurm.

Every observation and action record is printed as it is published: ``pretty`` lines, or
``jsonl`` (one JSON object each, carrying its schema tag; narration goes to stderr then).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import nats

from schemas import wellknown
from schemas.actions import ActionRecord
from schemas.wellknown import AUTOSCALE_PREFIX as AUTOSCALE
from slurmbridge.config import Settings
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Stack, slurmd_nodeset
from slurmbridge.logview import render


async def demo(
    settings: Settings,
    *,
    duration: float,
    fmt: str,
    api_version: str,
    nodes: int,
    stop: asyncio.Event,
    keep_log: Path | None = None,
    on_nats: Callable[[str], None] | None = None,
) -> int:
    """Run the story for ``duration`` seconds; returns the exit code. ``keep_log``: a
    directory that keeps the run's files, its JetStream store in ``nats/`` (otherwise a
    temporary directory, removed at the end). ``nodes``: at least 4 (the story drains n1 and
    n2 and removes n4). ``on_nats`` is called with the NATS URL once it is up (the CLI
    leaves a runtime file with it, so ``slurmbridge tail`` finds the demo).

    Raises:
        ValueError: fewer than 4 nodes.
    """
    if nodes < 4:
        raise ValueError(f"demo: {nodes} nodes: the story needs at least 4")
    t0 = time.monotonic()
    counts: collections.Counter[str] = collections.Counter()

    def say(text: str) -> None:
        line = f"── {time.monotonic() - t0:5.1f}s  {text}"
        print(line, file=sys.stderr if fmt == "jsonl" else sys.stdout, flush=True)

    async def on_msg(msg: Any) -> None:
        try:
            value = render.decode(msg.subject, msg.data)
        except (ValueError, KeyError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            print(f"# undecodable message on {msg.subject}: {exc}", file=sys.stderr)
            return
        if isinstance(value, ActionRecord):
            if value.outcome == "intended" and fmt != "jsonl":
                return  # the write-ahead record; its outcome line follows
            counts[f"{type(value.action).__name__}:{value.outcome}"] += 1
        line = render.jsonl(value, subject=msg.subject) if fmt == "jsonl" else render.pretty(value)
        print(line, flush=True)

    log_reader: list[Any] = []  # the NATS connection that prints the log

    async def read_the_log(stack: Stack) -> None:
        # Before the app starts, so its first effects are printed whole: an early worker
        # writes its write-ahead record while later workers are still starting.
        nc = await nats.connect(stack.nats_url or stack.nats.url)
        log_reader.append(nc)
        await nc.subscribe("bridge.>", cb=on_msg)

    stack = Stack(
        nodes=nodes,
        setup=read_the_log,
        workdir=keep_log,
        api_version=api_version,
        poll_interval=min(1.0, settings.slurm.poll_interval),
        settings={"schedulerName": settings.scheduler_name},
    )
    say(
        f"starting nats-server, Kubernetes and slurmrestd ({api_version}) simulators, {nodes} nodes"
    )
    await stack.start()
    assert stack.app is not None and stack.app.bus is not None
    if on_nats is not None:
        on_nats(stack.nats.url)
    say(f"NATS at {stack.nats.url}: `slurmbridge tail`, `explain` and `replay` read it meanwhile")

    # A Kubernetes-only node, registered in Slurm later in the story.
    stack.kube.add_node("ext-1", cpu="8", memory="16Gi")
    ext_labels = {wellknown.LABEL_EXTERNAL_NODE: "true"}
    burst_jobs: list[int] = []

    def burst_nodeset() -> None:
        stack.slurm.add_partition("burst")  # its nodes join as their slurmd pods register
        stack.kube.create(
            slurmd_nodeset(
                "burst",
                "default",
                {
                    AUTOSCALE + "partition": "burst",
                    AUTOSCALE + "max-replicas": "3",
                    AUTOSCALE + "cooldown": str(round(0.015 * duration, 2)),
                    AUTOSCALE + "idle-to-zero-after": str(round(0.025 * duration, 2)),
                },
            )
        )

    def burst_wave() -> None:
        burst_jobs.extend(
            stack.slurm.submit({"partition": "burst", "tasks": 2, "min_nodes": 1}, external=True)
            for _ in range(3)
        )

    def finish_job_on(node: str) -> None:
        for j in burst_jobs:
            job = stack.slurm.job(j)
            if job.nodes == (node,) and job.state == ("RUNNING",):
                stack.slurm.complete_job(j)

    story: list[tuple[float, str, Callable[[], object]]] = [
        (
            0.01,
            f"kubectl create job train --parallelism 3 (schedulerName {settings.scheduler_name},"
            f" each pod runs {0.04 * duration:.1f}s)",
            lambda: create_group(
                stack.kube,
                "Job",
                "train",
                3,
                requests={"cpu": "1", "memory": "100Mi"},
                scheduler_name=settings.scheduler_name,
                run_seconds=round(0.04 * duration, 2),
            ),
        ),
        (0.08, "kubectl cordon n1", lambda: stack.cordon("n1")),
        (
            0.58,
            "kubectl apply nodeset/burst (0 replicas; autoscaled on partition burst, max 3)",
            burst_nodeset,
        ),
        (0.61, "sbatch -p burst ×3 (one whole node each): a wave of pending jobs", burst_wave),
        (0.67, "the job on burst-2 finishes", lambda: finish_job_on("burst-2")),
        (
            # Two polls after the wave, so the autoscaler has seen the jobs run: a person
            # scaling in against jobs it still believes pending would be scaled back up.
            0.72,
            "kubectl scale nodeset/burst --replicas=1 (burst-1 still runs a job)",
            lambda: stack.kube.patch(
                "nodesets", "burst", {"spec": {"replicas": 1}}, "default", subresource="scale"
            ),
        ),
        (0.76, "the job on burst-1 finishes", lambda: finish_job_on("burst-1")),
        (
            0.80,
            "the job on burst-0 finishes: the partition goes quiet",
            lambda: finish_job_on("burst-0"),
        ),
        (0.18, "kubectl uncordon n1", lambda: stack.uncordon("n1")),
        (
            0.26,
            "administrator: scontrol update nodename=n2 state=drain reason='bad DIMM'",
            lambda: stack.admin_drain("n2", "bad DIMM"),
        ),
        (0.31, "kubectl cordon n2", lambda: stack.cordon("n2")),
        (
            0.38,
            "kubectl uncordon n2 (the administrator's drain must stay)",
            lambda: stack.uncordon("n2"),
        ),
        (
            0.46,
            "n4 leaves Slurm (scontrol delete nodename=n4)",
            lambda: stack.slurm.remove_node("n4"),
        ),
        (
            0.55,
            f"kubectl label node ext-1 {wellknown.LABEL_EXTERNAL_NODE}=true "
            f"(annotation {wellknown.ANNOTATION_EXTERNAL_NODE_PARTITIONS}=batch)",
            lambda: stack.kube.patch_merge(
                "nodes",
                "ext-1",
                {
                    "metadata": {
                        "labels": ext_labels,
                        "annotations": {wellknown.ANNOTATION_EXTERNAL_NODE_PARTITIONS: "batch"},
                    }
                },
            ),
        ),
        (
            0.68,
            "kubectl annotate node ext-1 partitions=batch,gpu",
            lambda: stack.kube.patch_merge(
                "nodes",
                "ext-1",
                {
                    "metadata": {
                        "annotations": {wellknown.ANNOTATION_EXTERNAL_NODE_PARTITIONS: "batch,gpu"}
                    }
                },
            ),
        ),
        (
            0.82,
            f"kubectl label node ext-1 {wellknown.LABEL_EXTERNAL_NODE}-",
            lambda: stack.kube.patch_merge(
                "nodes", "ext-1", {"metadata": {"labels": {wellknown.LABEL_EXTERNAL_NODE: None}}}
            ),
        ),
    ]
    try:
        for fraction, text, act in sorted(story, key=lambda step: step[0]):
            if await _sleep_until(t0 + fraction * duration, stop):
                break
            say(text)
            act()
        await _sleep_until(t0 + duration, stop)
        burst = [
            p["metadata"]["name"]
            for p in stack.kube.list("pods", "default")
            if p["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == "burst"
        ]
        say(
            f"end: nodeset/burst has {len(burst)} pod(s); "
            f"pods deleted under a running job: {len(stack.sims.slurmd.removed_busy)}"
        )
        n2 = stack.slurm_node("n2")
        jobs = [j for j in stack.slurm.jobs if j.comment.startswith("slurmbridge:")]
        pods = [
            f"{p['metadata']['name']} {p.get('status', {}).get('phase', 'Pending')}"
            for p in stack.kube.list("pods", "default")
        ]
        say(
            f"end: job(s) of train: {', '.join(f'{j.job_id} {j.state[0]}' for j in jobs)}; "
            f"pods: {', '.join(pods)}"
        )
        say(
            f"end: n2 is {'+'.join(n2.state)} with reason {n2.reason!r}; "
            f"actions: {', '.join(f'{k}={v}' for k, v in sorted(counts.items())) or 'none'}"
        )
    finally:
        for nc in log_reader:
            with contextlib.suppress(Exception):
                await nc.close()
        await stack.stop()
    return 0


async def _sleep_until(deadline: float, stop: asyncio.Event) -> bool:
    """Sleep until ``deadline`` (monotonic); True when ``stop`` was set first."""
    delay = deadline - time.monotonic()
    if delay <= 0:
        return stop.is_set()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), delay)
    return stop.is_set()
