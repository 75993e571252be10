"""The pod effector against the Kubernetes simulator (real HTTP, our own client)."""

from __future__ import annotations

from kubernetes_asyncio import client

from schemas import wellknown
from schemas.actions import MarkPods, PodRef
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.effectors.pods import PodEffector

SCHED = wellknown.DEFAULT_SCHEDULER_NAME
NODE = wellknown.ANNOTATION_SLURM_NODE
JOBID = wellknown.LABEL_SLURM_JOBID


def _ref(obj: dict[str, object]) -> PodRef:
    meta = obj["metadata"]
    assert isinstance(meta, dict)
    return PodRef(namespace=meta["namespace"], name=meta["name"], uid=meta["uid"])


async def test_relabelling_an_unbound_pod_clears_the_old_jobs_node(
    sim: KubeSim, api: client.ApiClient
) -> None:
    """Issue 18 (3): a pod whose job ended before it was bound is relabelled to its new job;
    the node annotation of the old job goes with the old label."""
    pod = sim.add_pod(
        "stale",
        scheduler_name=SCHED,
        labels={JOBID: "5"},
        annotations={NODE: "s1", "keep.example.com/x": "y"},
    )
    result = await PodEffector(api, {}).apply(
        MarkPods(job_id=9, pods=(_ref(pod),), scheduler_name=SCHED)
    )
    assert result.outcome == "ok"
    after = sim.get("pods", "stale", "default")
    assert after["metadata"]["labels"][JOBID] == "9"
    assert NODE not in after["metadata"]["annotations"]
    assert after["metadata"]["annotations"]["keep.example.com/x"] == "y"
    assert wellknown.FINALIZER_SCHEDULER in after["metadata"]["finalizers"]


async def test_a_bound_pods_node_annotation_stays(sim: KubeSim, api: client.ApiClient) -> None:
    pod = sim.add_pod(
        "bound", scheduler_name=SCHED, labels={JOBID: "5"}, annotations={NODE: "s1"}, node_name="n1"
    )
    await PodEffector(api, {}).apply(MarkPods(job_id=9, pods=(_ref(pod),), scheduler_name=SCHED))
    after = sim.get("pods", "bound", "default")
    assert after["metadata"]["annotations"][NODE] == "s1"
