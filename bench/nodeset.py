"""NodeSet scaling: pod creation after a scale-out, pod deletion after a node is drained and idle.

Laid out as in production: slurmbridge runs as its own process (`slurmbridge run`), nats-server
as another; this process hosts the Kubernetes simulator (kubelets, a default scheduler) and the
slurmrestd simulator, whose slurmd stand-in registers each running NodeSet pod as a Slurm node.
Timestamps are taken inside the simulators' own writes (``time.monotonic()``):

* **scale-out**: ``--nodes`` pods wanted at once (``kubectl scale`` from 0); each sample is
  the time from the scale request to that pod's creation.
* **rolling update**: jobs run on a third of the nodes, then the template changes
  (``updateStrategy`` RollingUpdate, ``maxUnavailable`` ``--max-unavailable``). The idle
  pods are replaced in waves; the busy ones are drained and wait. Once the idle ones run at
  the new revision the jobs end, one every ``--cancel-spacing`` seconds. Reported: the time
  from the template change to all idle pods Running at the new revision, to all pods
  (``roll_total_s``), and from the last job's end to the last pod rolled; and how many pods
  were deleted while their Slurm node ran a job (the slurmd stand-in counts them; must be 0).
* **scale-in**: jobs run on half the nodes, then the NodeSet is scaled to 0. Idle nodes are
  drained and deleted; busy ones are drained and wait. Their jobs then end one every
  ``--cancel-spacing`` seconds. Each sample is the time from the node being *drained and
  idle* (the later of its DRAIN and its last job's end) to its pod's deletion. Slurm node
  changes reach slurmbridge through the poll (``slurm.pollInterval``), so the budget is the
  poll interval + 1 s (Slinky's anchor: a 30 s requeue).

    python bench/nodeset.py --json [--nodes 32] [--poll-interval 2] [--max-unavailable 25%]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit, machine, percentile, start_slurmbridge, tear_down, until
from schemas import wellknown
from slurmbridge.devtools.sim.kube import Change
from slurmbridge.devtools.testing import Simulators, slurmd_nodeset
from slurmbridge.runtime.natsserver import NatsServer
from slurmbridge.slurm.models import NodeUpdate

NS = "slurm"


class Clock:
    """Pod creations/deletions and node drains / job ends, as the simulators record them."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.deleting: dict[str, float] = {}
        self.drained: dict[str, float] = {}
        self.job_end: dict[int, float] = {}

    def on_write(self, change: Change) -> None:
        if change.resource.name != "pods":
            return
        now = time.monotonic()
        meta = change.object.get("metadata") or {}
        name = str(meta.get("name"))
        if change.type == "ADDED":
            self.created.setdefault(name, now)
        old = (change.old or {}).get("metadata") or {}
        if (change.type == "DELETED" or meta.get("deletionTimestamp")) and not old.get(
            "deletionTimestamp"
        ):
            self.deleting.setdefault(name, now)

    def on_update(self, name: str, update: NodeUpdate, ts: float) -> None:
        if "DRAIN" in update.state:
            self.drained.setdefault(name, ts)

    def on_job(self, job_id: int, state: str, at: float) -> None:
        if state != "RUNNING":
            self.job_end.setdefault(job_id, at)


def _submit_on(slurm: Any, node: str) -> int:
    """An external job filling ``node`` until cancelled."""
    others = [n for n in slurm.nodes if n != node]
    job_id: int = slurm.submit(
        {"partition": "batch", "tasks": 2, "min_nodes": 1, "excluded_nodes": others},
        external=True,
    )
    return job_id


async def rolling_update(
    args: argparse.Namespace, kube: Any, slurm: Any, names: list[str], sims: Simulators
) -> dict[str, Any]:
    """The rolling-update run (module docstring); the NodeSet runs ``names``, all idle."""

    def revisions() -> dict[str, str]:
        return {
            str(p["metadata"]["name"]): (p["metadata"].get("labels") or {}).get(
                wellknown.LABEL_REVISION_HASH, ""
            )
            for p in kube.list("pods", NS)
            if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") == "Running"
        }

    before = revisions()
    old = set(before.values())
    busy = names[::3]
    jobs = {node: _submit_on(slurm, node) for node in busy}
    await until(
        lambda: all(slurm.job(j).nodes for j in jobs.values()), args.timeout, "jobs running"
    )
    removed_before = len(sims.slurmd.removed_busy)
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": args.max_unavailable}}
    kube.patch("nodesets", "bench", {"spec": {"updateStrategy": strategy}}, NS)
    template = {"spec": {"containers": [{"name": "slurmd", "image": "slurmd:next"}]}}
    t0 = time.monotonic()
    kube.patch("nodesets", "bench", {"spec": {"template": template}}, NS)
    idle = [n for n in names if n not in jobs]

    def rolled(which: list[str]) -> bool:
        now = revisions()
        return all(now.get(n, "") not in old | {""} for n in which)

    await until(lambda: rolled(idle), args.timeout, "idle pods rolled")
    idle_s = time.monotonic() - t0
    still_old = [n for n in busy if revisions().get(n) in old]
    for node in busy:
        slurm.cancel_job(jobs[node])
        await asyncio.sleep(args.cancel_spacing)
    last_end = time.monotonic()
    await until(lambda: rolled(names), args.timeout, "all pods rolled")
    done = time.monotonic()
    return {
        "roll_max_unavailable": args.max_unavailable,
        "roll_busy_pods": len(busy),
        "roll_busy_kept_until_job_end": len(still_old),
        "roll_idle_s": round(idle_s, 2),
        "roll_total_s": round(done - t0, 2),
        "roll_after_last_job_s": round(done - last_end, 2),
        "roll_pods_deleted_under_a_job": len(sims.slurmd.removed_busy) - removed_before,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    clock = Clock()
    workdir = Path(tempfile.mkdtemp(prefix="slurmbridge-nodeset-"))
    k8s_nodes = max(4, args.nodes // 4)
    sims = Simulators(nodes=k8s_nodes, workdir=workdir / "sims", kubelet=True)
    nats = NatsServer(store_dir=workdir / "nats")
    await nats.start()
    await sims.start()
    proc = await start_slurmbridge(sims.overrides(), nats.url, workdir, args.poll_interval)
    kube, slurm = sims.kube, sims.slurm
    try:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        kube.create(slurmd_nodeset("bench", NS))
        # slurmbridge is up once it has written the NodeSet's status.
        await until(
            lambda: "status" in kube.get("nodesets", "bench", NS), 60, "slurmbridge to start"
        )
        kube.on_write.append(clock.on_write)
        slurm.on_update.append(clock.on_update)
        slurm.on_job_state.append(clock.on_job)
        names = [f"bench-{i}" for i in range(args.nodes)]

        def running() -> int:
            return sum(
                1
                for p in kube.list("pods", NS)
                if (p.get("status") or {}).get("phase") == "Running"
            )

        t0 = time.monotonic()
        kube.patch("nodesets", "bench", {"spec": {"replicas": args.nodes}}, NS, subresource="scale")
        await until(lambda: all(n in clock.created for n in names), args.timeout, "pods created")
        create = [clock.created[n] - t0 for n in names]
        await until(lambda: running() == args.nodes, args.timeout, "pods Running")
        await until(lambda: all(n in slurm.nodes for n in names), args.timeout, "registered")

        roll = await rolling_update(args, kube, slurm, names, sims)
        # The roll drained and deleted pods of these names: the scale-in starts afresh.
        clock.drained.clear()
        clock.deleting.clear()
        clock.job_end.clear()

        busy = names[::2]
        jobs: dict[str, int] = {}
        for node in busy:
            others = [n for n in slurm.nodes if n != node]
            jobs[node] = slurm.submit(
                {"partition": "batch", "tasks": 2, "min_nodes": 1, "excluded_nodes": others},
                external=True,
            )
        kube.patch("nodesets", "bench", {"spec": {"replicas": 0}}, NS, subresource="scale")
        await until(lambda: all(n in clock.drained for n in names), args.timeout, "all drained")
        for node in busy:
            slurm.cancel_job(jobs[node])
            await asyncio.sleep(args.cancel_spacing)
        await until(lambda: all(n in clock.deleting for n in names), args.timeout, "deleted")
        delete = []
        for n in names:
            idle_at = max(clock.drained[n], clock.job_end.get(jobs.get(n, -1), 0.0))
            delete.append(clock.deleting[n] - idle_at)
        removed_busy = list(sims.slurmd.removed_busy)
    finally:
        await tear_down([proc], sims, nats, workdir=workdir)
    return {
        "nodes": args.nodes,
        "scale_out_create_p50_ms": round(percentile(create, 50) * 1000, 1),
        "scale_out_create_p99_ms": round(percentile(create, 99) * 1000, 1),
        **roll,
        "scale_in_delete_p50_s": round(percentile(delete, 50), 3),
        "scale_in_delete_p99_s": round(percentile(delete, 99), 3),
        "scale_in_delete_max_s": round(max(delete), 3),
        "pods_deleted_under_a_job": len(removed_busy),
        "poll_interval_s": args.poll_interval,
        "machine": machine(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--nodes", type=int, default=32, help="NodeSet replicas at the peak (32)")
    ap.add_argument("--poll-interval", type=float, default=2.0, help="slurm.pollInterval (2 s)")
    ap.add_argument(
        "--cancel-spacing", type=float, default=0.137, help="seconds between job ends (0.137)"
    )
    ap.add_argument("--timeout", type=float, default=120.0, help="give up after (120 s)")
    ap.add_argument(
        "--max-unavailable", default="25%", help="rolling update maxUnavailable (25%%, 1.x's)"
    )
    args = ap.parse_args()
    emit(asyncio.run(run(args)), args.json)


if __name__ == "__main__":
    main()
