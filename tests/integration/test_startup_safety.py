"""Never act before Kubernetes is listed (issue 18, 1): a first start whose pod list is slow
or failing must not cancel a running placeholder job and delete its bound pod.

A world that exists before slurmbridge first starts (an empty log): a bound, Running pod of
ours and its RUNNING placeholder job. The app then starts while the API server answers the
first pod lists with 503 (starting up) or 429 (storage re-initializing), so the Slurm
listing reaches the log seconds before the pods'. ``workload``'s "a job of ours whose pods
are all gone ⇒ cancel" must wait for the pods' ``KubeListed`` marker.
"""

from __future__ import annotations

import pytest

from reconcilers import _pods
from schemas import wellknown
from schemas.actions import CancelSlurmJob, DeletePod
from schemas.events import KubeListed, SlurmJob
from slurmbridge.devtools.testing import Stack

GROUP = _pods.Group(namespace="default", kind="Pod", name="held")


@pytest.mark.parametrize(
    "status", [503, 429, 0], ids=["starting-503", "storage-429", "delayed-list"]
)
async def test_a_slow_first_pod_list_cancels_nothing_and_deletes_nothing(status: int) -> None:
    seeded: dict[str, int] = {}

    def setup(stack: Stack) -> None:
        pod = stack.kube.add_pod(
            "held",
            node_name="n1",
            scheduler_name=wellknown.DEFAULT_SCHEDULER_NAME,
            phase="Running",
            ready=True,
            finalizers=(wellknown.FINALIZER_SCHEDULER,),
            annotations={wellknown.ANNOTATION_SLURM_NODE: "n1"},
        )
        marker = _pods.marker(GROUP, pod["metadata"]["uid"])
        job_id = stack.slurm.submit(
            {
                "name": GROUP.key,
                "partition": "batch",
                "tasks": 1,
                "min_nodes": 1,
                "comment": marker,
                "excluded_nodes": ["n2", "n3", "n4"],
            },
            external=True,
        )
        assert stack.slurm.job(job_id).base_state == "RUNNING"
        stack.kube.patch_merge(
            "pods",
            "held",
            {"metadata": {"labels": {wellknown.LABEL_SLURM_JOBID: str(job_id)}}},
            "default",
        )
        seeded["job"] = job_id
        if status:
            # The first pod lists fail: seconds of back-off before the pods are listed.
            stack.kube.fail_next(5, status, verb="list", resource="pods")
        else:
            # The first pod list answers late (a slow API server, a long paged list).
            stack.kube.delay_next(1, 3.0, verb="list", resource="pods")

    async with Stack(nodes=4, poll_interval=0.2, setup=setup) as stack:
        assert stack.app is not None
        proj = stack.app.projection
        job_id = seeded["job"]
        await stack.wait_for(
            lambda: proj.get(SlurmJob, str(job_id), "slurm:default") is not None,
            what="the running job in the log",
        )
        await stack.wait_for(
            lambda: proj.get(KubeListed, "pods", "k8s") is not None,
            timeout=60,
            what="the pods listed at last",
        )
        await stack.settled()
        records = await stack.action_records()
        assert not [r for r in records if isinstance(r.action, CancelSlurmJob | DeletePod)]
        assert stack.slurm.job(job_id).base_state == "RUNNING"
        pod = stack.kube.get("pods", "held", "default")
        assert not pod["metadata"].get("deletionTimestamp")
