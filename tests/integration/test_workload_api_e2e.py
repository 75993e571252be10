"""The Kubernetes Workload API (``scheduling.k8s.io`` PodGroup and Workload, 1.36+) through
Slurm, in the simulators with their simulated kubelets.

A gang of 4 (a Workload whose template says ``minCount: 4``, its PodGroup, a Job's pods that
join it through ``spec.schedulingGroup.podGroupName``) waits until its 4 pods exist, then runs
as ONE Slurm job configured by the merged annotations, the PodGroup gets its scheduled
condition, and the job is released when the pods finish. On a server without the API (1.35)
the same pods are placed from their Job.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from schemas import wellknown
from schemas.actions import SetPodGroupScheduled, SubmitSlurmJob
from schemas.events import KubeListed, KubeWorkload
from slurmbridge.config import KubeSettings
from slurmbridge.devtools.sim.kube import ApiError, KubeSim, workload_api_resources
from slurmbridge.devtools.sim.kubelet import ANNOTATION_RUN_SECONDS
from slurmbridge.devtools.sim.slurmjobs import ENDED
from slurmbridge.devtools.testing import Stack
from slurmbridge.effectors.nodes import KubeEffector
from slurmbridge.kube import client as kube
from tests._helpers import our_jobs, phase_of
from tests.integration._scheduling_watch import first_listing

JOBID = wellknown.LABEL_SLURM_JOBID
FIN = wellknown.FINALIZER_SCHEDULER
P = wellknown.ANNOTATION_SLURMJOB_PREFIX
NS = "default"
PODGROUPS = "podgroups.scheduling.k8s.io"


def pod(stack: Stack, name: str) -> dict[str, Any] | None:
    try:
        return stack.kube.get("pods", name, NS)
    except ApiError:
        return None


def serve(version: str) -> Any:
    """A Stack ``setup`` serving the Workload API at ``version`` before the app starts."""

    def setup(stack: Stack) -> None:
        for spec in workload_api_resources(version):
            stack.kube.register(spec)

    return setup


def gang(sim: KubeSim, version: str, name: str, min_count: int) -> dict[str, Any]:
    """A Workload (annotations: job-name, partition, timelimit 7) with one gang template, its
    PodGroup (annotations: timelimit 9, qos), and a Job (annotation: timelimit 5) without
    pods yet; returns the Job."""
    api = f"scheduling.k8s.io/{version}"
    policy = {"gang": {"minCount": min_count}}
    sim.create(
        {
            "apiVersion": api,
            "kind": "Workload",
            "metadata": {
                "name": name,
                "namespace": NS,
                "annotations": {
                    P + "job-name": f"{name}-gang",
                    P + "partition": "batch",
                    P + "timelimit": "7",
                },
            },
            "spec": {
                "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": name},
                "podGroupTemplates": [{"name": "workers", "schedulingPolicy": policy}],
            },
        }
    )
    ref_field, ref = (
        (
            "podGroupTemplateRef",
            {"workload": {"workloadName": name, "podGroupTemplateName": "workers"}},
        )
        if version == "v1alpha2"
        else ("workloadRef", {"workloadName": name, "templateName": "workers"})
    )
    sim.create(
        {
            "apiVersion": api,
            "kind": "PodGroup",
            "metadata": {
                "name": f"{name}-workers",
                "namespace": NS,
                "annotations": {P + "timelimit": "9", P + "qos": "normal"},
            },
            "spec": {ref_field: ref, "schedulingPolicy": policy},
        }
    )
    return sim.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "annotations": {P + "timelimit": "5"}},
            "spec": {"parallelism": min_count, "completions": min_count, "template": {}},
        }
    )


def job_pod(sim: KubeSim, job: dict[str, Any], i: int, group: str, run_s: float) -> str:
    """Pod ``i`` of ``job``, joining PodGroup ``group``; the kubelet ends it ``run_s`` after
    it starts."""
    name = f"{job['metadata']['name']}-{i}"
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
        "controller": True,
    }
    sim.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NS,
                "labels": {"batch.kubernetes.io/job-name": job["metadata"]["name"]},
                "annotations": {ANNOTATION_RUN_SECONDS: str(run_s)},
                "ownerReferences": [owner],
            },
            "spec": {
                "schedulerName": wellknown.DEFAULT_SCHEDULER_NAME,
                "restartPolicy": "Never",
                "schedulingGroup": {"podGroupName": group},
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "1", "memory": "100Mi"}},
                    }
                ],
            },
        }
    )
    return name


@pytest.mark.parametrize(
    ("version", "condition"),
    [("v1beta1", "PodGroupInitiallyScheduled"), ("v1alpha2", "PodGroupScheduled")],
)
async def test_a_gang_of_4_waits_for_its_pods_then_runs_as_one_job(
    version: str, condition: str
) -> None:
    async with Stack(nodes=6, poll_interval=0.2, setup=serve(version)) as stack:
        job = gang(stack.kube, version, "train", 4)
        group = "train-workers"
        names = [job_pod(stack.kube, job, i, group, run_s=1.5) for i in range(3)]
        await stack.settled(timeout=30)
        assert our_jobs(stack) == [], "3 of minCount 4: no job yet"
        assert all(not (pod(stack, n) or {})["spec"].get("nodeName") for n in names)

        names.append(job_pod(stack.kube, job, 3, group, run_s=1.5))
        await stack.wait_for(
            lambda: all(phase_of(pod(stack, n)) in ("Running", "Succeeded") for n in names),
            timeout=30,
            what="the 4 pods started",
        )
        (slurm_job,) = our_jobs(stack)
        assert slurm_job.node_count == 4, "sized by the pods present: one node per pod"
        # Annotations merged PodGroup → Job → Workload, root-most winning: the Workload's
        # job-name, partition and timelimit (7, over the Job's 5 and the PodGroup's 9), the
        # PodGroup's qos (set nowhere else).
        assert (slurm_job.name, slurm_job.partition, slurm_job.time_limit_minutes) == (
            "train-gang",
            "batch",
            7,
        )
        assert slurm_job.comment.startswith(f"slurmbridge:{NS}/PodGroup.scheduling.k8s.io:{group}:")
        ids = {(pod(stack, n) or {})["metadata"]["labels"][JOBID] for n in names}
        assert ids == {str(slurm_job.job_id)}
        bound = {(pod(stack, n) or {})["spec"]["nodeName"] for n in names}
        assert bound == set(slurm_job.nodes)

        def scheduled() -> list[dict[str, Any]]:
            pg = stack.kube.get(PODGROUPS, group, NS)
            return [
                c
                for c in (pg.get("status") or {}).get("conditions") or []
                if c["type"] == condition
            ]

        await stack.wait_for(lambda: bool(scheduled()), timeout=20, what=f"{condition} set")
        (cond,) = scheduled()
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "True",
            "Scheduled",
            f"Pod group admitted by {wellknown.DEFAULT_SCHEDULER_NAME}",
        )
        assert cond["lastTransitionTime"] and cond["observedGeneration"] == 1

        # The pods finish: the workload reconciler releases the job and the finalizers.
        await stack.wait_for(
            lambda: all(phase_of(pod(stack, n)) == "Succeeded" for n in names),
            timeout=30,
            what="the 4 pods Succeeded",
        )
        await stack.wait_for(
            lambda: stack.slurm.job(slurm_job.job_id).state[0] in ENDED,
            timeout=20,
            what="the job released",
        )
        await stack.wait_for(
            lambda: (
                not any(
                    FIN in (pod(stack, n) or {})["metadata"].get("finalizers", []) for n in names
                )
            ),
            timeout=20,
            what="our finalizers removed",
        )
        await stack.settled(timeout=30)
        assert len(our_jobs(stack)) == 1, "one Slurm job for the gang, none twice"
        records = await stack.action_records()
        ok = [r for r in records if r.outcome == "ok"]
        assert sum(isinstance(r.action, SubmitSlurmJob) for r in ok) == 1
        assert sum(isinstance(r.action, SetPodGroupScheduled) for r in ok) == 1


async def test_without_the_workload_api_the_pods_are_placed_from_their_job() -> None:
    """A 1.35 server: the Workload API answers 404 and drops ``spec.schedulingGroup``; the
    watchers keep looking, and the pods are the Job's group."""
    async with Stack(nodes=4, poll_interval=0.2) as stack:
        job = stack.kube.create(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "old", "namespace": NS},
                "spec": {"parallelism": 2, "completions": 2, "template": {}},
            }
        )
        names = [job_pod(stack.kube, job, i, "old-workers", run_s=30) for i in range(2)]
        assert all("schedulingGroup" not in (pod(stack, n) or {})["spec"] for n in names)
        await stack.wait_for(
            lambda: all(phase_of(pod(stack, n)) == "Running" for n in names),
            timeout=30,
            what="the Job's pods Running",
        )
        (slurm_job,) = our_jobs(stack)
        assert slurm_job.comment.startswith(f"slurmbridge:{NS}/Job:old:")
        with pytest.raises(ApiError) as missing:
            stack.kube.get(PODGROUPS, "old-workers", NS)
        assert missing.value.code == 404


@pytest.mark.parametrize("served", ["v1beta1", "v1alpha2", None])
async def test_the_pod_group_watcher_finds_the_served_version(
    served: str | None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """v1beta1 first, v1alpha2 when it is not served (and the log says which); none served
    (1.35) ⇒ an empty complete list, and the watcher keeps looking."""
    caplog.set_level(logging.INFO)
    async with KubeSim(workload_api=served) as sim:
        if served is not None:
            gang(sim, served, "train", 2)
        published = await first_listing(sim, "podgroups", tmp_path)
    listed = [e for e in published if isinstance(e, KubeListed)]
    assert listed[0].resource == "podgroups.scheduling.k8s.io"
    groups = [e for e in published if isinstance(e, KubeWorkload)]
    if served is None:
        assert groups == []
        assert "not served" in caplog.text
        return
    (pg,) = groups
    assert (pg.workload_kind, pg.api_version) == (
        wellknown.KIND_NATIVE_POD_GROUP,
        f"scheduling.k8s.io/{served}",
    )
    assert (pg.size, pg.workload_name, pg.template_name) == (2, "train", "workers")
    assert f"served at scheduling.k8s.io/{served}" in caplog.text


async def test_the_scheduled_condition_effector_keeps_other_conditions_and_its_preconditions(
    tmp_path: Path,
) -> None:
    """SetPodGroupScheduled: written once (status subresource, other conditions kept), then a
    noop; a PodGroup re-created under the name, or gone, is left alone."""
    async with KubeSim(workload_api="v1alpha2") as sim:
        gang(sim, "v1alpha2", "train", 2)
        other = {"type": "DisruptionTarget", "status": "False", "reason": "R", "message": ""}
        sim.patch_merge(
            PODGROUPS,
            "train-workers",
            {"status": {"conditions": [other]}},
            NS,
            subresource="status",
        )
        uid = sim.get(PODGROUPS, "train-workers", NS)["metadata"]["uid"]
        api = await kube.api_client(
            KubeSettings(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig")))
        )
        effector = KubeEffector(api)

        def action(name: str = "train-workers", uid: str = uid) -> SetPodGroupScheduled:
            return SetPodGroupScheduled(
                namespace=NS,
                name=name,
                uid=uid,
                api_version="scheduling.k8s.io/v1alpha2",
                message="Pod group admitted by me",
            )

        try:
            assert (await effector.apply(action(uid="another"))).outcome == "noop"
            assert (await effector.apply(action(name="absent"))).outcome == "noop"
            first = await effector.apply(action())
            assert first.outcome == "ok"
            conds = sim.get(PODGROUPS, "train-workers", NS)["status"]["conditions"]
            assert [c["type"] for c in conds] == ["DisruptionTarget", "PodGroupScheduled"]
            assert conds[0] == other
            assert (conds[1]["status"], conds[1]["reason"], conds[1]["message"]) == (
                "True",
                "Scheduled",
                "Pod group admitted by me",
            )
            assert (await effector.apply(action())).outcome == "noop"
        finally:
            await api.close()
