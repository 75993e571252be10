"""The ``slurm-jobid`` label is read in one place (``schemas.wellknown.slurm_job_id``; issue
31 item 4): a label that is not ASCII digits, or is ``0``, names no job for the hot-job
tracker nor for the node-usage watcher, and never raises."""

from __future__ import annotations

import pytest

from producers.kube.watch import _bridge_pod
from schemas import wellknown
from schemas.events import KubePod
from slurmbridge.app import HotJobs
from slurmbridge.kube.wire import RawObjMeta, RawPod, RawPodSpec

SCHED = "slurm-bridge-scheduler"


@pytest.mark.parametrize(
    ("label", "job"),
    [("7", 7), ("0", None), ("²", None), ("x1", None), ("-3", None), ("", None)],
)
def test_hot_jobs_reads_only_a_positive_job_id(label: str, job: int | None) -> None:
    """A superscript digit passes ``str.isdigit`` but not ``int``: it must not raise."""
    hot = HotJobs("c1")
    pod = KubePod(
        source="k8s",
        key="default/p",
        namespace="default",
        name="p",
        labels={wellknown.LABEL_SLURM_JOBID: label},
    )
    hot.observe(pod, 1)
    assert hot.waiting.get("default/p") == job
    assert hot() == ([] if job is None else [job])


@pytest.mark.parametrize(("label", "ours"), [("12", True), ("0", False), ("²", False)])
def test_node_usage_counts_only_a_positive_job_id(label: str, ours: bool) -> None:
    raw = RawPod(
        metadata=RawObjMeta(name="p", namespace="ns", labels={wellknown.LABEL_SLURM_JOBID: label}),
        spec=RawPodSpec(nodeName="n0", schedulerName=SCHED),
    )
    assert _bridge_pod(raw, SCHED) is ours
