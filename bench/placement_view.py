"""What one placement decide of a pending job's group costs on a cluster of ``--nodes`` nodes.

While a placeholder job of ours is pending, every decide of its group reads which nodes it
may not use (cordoned, not Ready, infeasible for one of its pods, or Slurm nodes without a
Kubernetes node), to keep the job's excluded nodes right. At saturation the pending groups
are decided again on every node change, so this read is paid per decide. The bench builds
the world in a :class:`~slurmbridge.runtime.projection.Projection` (``--nodes`` Kubernetes
nodes with their usage and Slurm nodes, one partition, a complete listing, one pending
group) and times ``placement.view`` + ``placement.decide`` of that group, CPU time per call
(``time.process_time``, mean over ``--repeat`` calls):

* ``decide_cold_ms`` — with the store's kept answers dropped before each call (the first
  decide, or one after every node changed);
* ``decide_warm_ms`` — nothing changed since the last call;
* ``decide_one_usage_changed_ms`` — one node's ``KubeNodeUsage`` replaced before each call
  (a pod bound or gone there: what happens between two decides under load).

    python bench/placement_view.py --json [--nodes 200] [--repeat 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit, machine
from reconcilers import _pods, placement
from reconcilers.base import Context
from schemas import wellknown
from schemas.events import (
    KubeNode,
    KubeNodeUsage,
    KubePod,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmPing,
)
from slurmbridge.runtime.projection import Projection

SCHED = "slurm-bridge-scheduler"
CTX = Context(scheduler_name=SCHED, cluster="c1")
GROUP = "ns/Pod:p"
JOB_ID = 7


def world(nodes: int) -> Projection:
    """The cluster and one pending group of ours (pod ``ns/p``, job :data:`JOB_ID`)."""
    group = _pods.parse_group_key(GROUP)
    assert group is not None
    names = [f"k{i}" for i in range(nodes)]
    objs: list[object] = [SlurmPing(source="slurm:c1", key="c1", cluster="c1", responding=True)]
    objs.append(SlurmPartition(source="slurm:c1", key="batch", cluster="c1", nodes=tuple(names)))
    for name in names:
        objs.append(
            KubeNode(source="k8s", key=name, ready=True, alloc_cpu_millis=4000, alloc_pods=110)
        )
        objs.append(KubeNodeUsage(source="k8s", key=name, cpu_millis=1000, pods=1))
        objs.append(
            SlurmNode(
                source="slurm:c1",
                key=name,
                cluster="c1",
                state=("IDLE",),
                features=(wellknown.FEATURE_GRES_COMPATIBLE,),
            )
        )
    objs.append(
        SlurmJob(
            source="slurm:c1",
            key=str(JOB_ID),
            cluster="c1",
            job_id=JOB_ID,
            state=("PENDING",),
            partition="batch",
            comment=_pods.marker(group, "u-p"),
        )
    )
    objs.append(
        KubePod(
            source="k8s",
            key="ns/p",
            namespace="ns",
            name="p",
            uid="u-p",
            scheduler_name=SCHED,
            labels={wellknown.LABEL_SLURM_JOBID: str(JOB_ID)},
            finalizers=(wellknown.FINALIZER_SCHEDULER,),
            tolerations=(wellknown.TAINT_MANAGED_NODE,),
            cpu_millis=1000,
        )
    )
    store = Projection()
    for seq, ev in enumerate(objs, 1):
        store.apply(ev, seq)  # type: ignore[arg-type]
    return store


def per_call_ms(store: Projection, repeat: int, before: Callable[[int], None]) -> float:
    """Mean CPU ms of one view + decide of the group, ``before(i)`` run ahead of call i
    (outside the timing)."""
    spent = 0.0
    for i in range(repeat):
        before(i)
        t0 = time.process_time()
        view = placement.view(store, GROUP, CTX)
        placement.decide(view)
        spent += time.process_time() - t0
        if view is None or not view.partitions:
            raise SystemExit("the group's view read no eligibility: the world is not as meant")
    return round(spent / repeat * 1000, 3)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=200, help="Kubernetes and Slurm nodes (200)")
    ap.add_argument("--repeat", type=int, default=200, help="calls per figure (200)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    store = world(args.nodes)
    seq = [10_000_000]

    def drop_kept(_: int) -> None:
        store.cache("placement.infeasible").clear()
        store.cache("placement.unmapped").clear()

    def nothing(_: int) -> None:
        pass

    def one_usage(i: int) -> None:
        seq[0] += 1
        name = f"k{i % args.nodes}"
        store.apply(KubeNodeUsage(source="k8s", key=name, cpu_millis=1000 + i % 2, pods=1), seq[0])

    result: dict[str, object] = {
        "nodes": args.nodes,
        "repeat": args.repeat,
        "decide_cold_ms": per_call_ms(store, args.repeat, drop_kept),
        "decide_warm_ms": per_call_ms(store, args.repeat, nothing),
        "decide_one_usage_changed_ms": per_call_ms(store, args.repeat, one_usage),
        "machine": machine(),
    }
    emit(result, args.json)


if __name__ == "__main__":
    main()
