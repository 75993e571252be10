"""Kubernetes 1.37's CompositePodGroup (``scheduling.k8s.io/v1alpha3``) through the simulators
(issue 28, item 5): a gang CompositePodGroup over a leader PodGroup (one pod of one shape) and
a worker PodGroup (two pods of another shape) waits until both member groups have their
pods, then runs as ONE Slurm heterogeneous job with a component per shape, every pod bound
and labelled with the het job's id. Without the CompositePodGroup gate the API server refuses
a PodGroup naming a parent, and the watcher finds nothing to watch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schemas import wellknown
from schemas.events import KubeListed, KubeWorkload
from slurmbridge.devtools.sim.kube import (
    ApiError,
    KubeSim,
    composite_pod_group_resource,
    workload_api_resources,
)
from slurmbridge.devtools.testing import Stack
from tests.integration._scheduling_watch import first_listing

JOBID = wellknown.LABEL_SLURM_JOBID
P = wellknown.ANNOTATION_SLURMJOB_PREFIX
NS = "default"
BETA = "scheduling.k8s.io/v1beta1"
ALPHA3 = "scheduling.k8s.io/v1alpha3"


def serve_composite(stack: Stack) -> None:
    """A 1.37 server with the CompositePodGroup gate on (v1beta1 + v1alpha3)."""
    for spec in (*workload_api_resources("v1beta1"), composite_pod_group_resource()):
        stack.kube.register(spec)


def tree(sim: KubeSim, name: str) -> None:
    """A Workload with one composite template, its gang CompositePodGroup (minGroupCount 2)
    and two gang PodGroups below it: ``<name>-leader`` (minCount 1), ``<name>-workers``
    (minCount 2)."""
    gang = {"gang": {"minCount": 1}}
    sim.create(
        {
            "apiVersion": BETA,
            "kind": "Workload",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "compositePodGroupTemplates": [
                    {
                        "name": "root",
                        "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                        "podGroupTemplates": [
                            {"name": "leader", "schedulingPolicy": gang},
                            {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}},
                        ],
                    }
                ]
            },
        }
    )
    sim.create(
        {
            "apiVersion": ALPHA3,
            "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": NS, "annotations": {P + "partition": "batch"}},
            "spec": {
                "workloadRef": {"workloadName": name, "templateName": "root"},
                "schedulingPolicy": {"gang": {"minGroupCount": 2}},
            },
        }
    )
    for member, count in (("leader", 1), ("workers", 2)):
        sim.create(
            {
                "apiVersion": BETA,
                "kind": "PodGroup",
                "metadata": {"name": f"{name}-{member}", "namespace": NS},
                "spec": {
                    "parentCompositePodGroupName": name,
                    "workloadRef": {"workloadName": name, "templateName": member},
                    "schedulingPolicy": {"gang": {"minCount": count}},
                },
            }
        )


def member_pod(sim: KubeSim, name: str, group: str, cpu: str) -> str:
    sim.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "schedulerName": wellknown.DEFAULT_SCHEDULER_NAME,
                "schedulingGroup": {"podGroupName": group},
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}},
                    }
                ],
            },
        }
    )
    return name


def pod(stack: Stack, name: str) -> dict[str, Any]:
    return stack.kube.get("pods", name, NS)


async def test_a_composite_pod_group_runs_as_one_heterogeneous_job() -> None:
    async with Stack(nodes=6, poll_interval=0.2, setup=serve_composite) as stack:
        tree(stack.kube, "train")
        leader = member_pod(stack.kube, "train-leader-0", "train-leader", "2")
        workers = [member_pod(stack.kube, "train-workers-0", "train-workers", "1")]
        await stack.settled(timeout=30)

        def ours() -> list[Any]:
            return [j for j in stack.slurm.jobs if j.comment.startswith("slurmbridge:")]

        assert ours() == [], "the workers' group has 1 of its 2 pods: nothing submitted"

        workers.append(member_pod(stack.kube, "train-workers-1", "train-workers", "1"))
        names = [leader, *workers]
        await stack.wait_for(
            lambda: all(pod(stack, n)["spec"].get("nodeName") for n in names),
            timeout=30,
            what="the 3 pods bound",
        )
        jobs = ours()
        assert len(jobs) == 2, "one het job, a component per shape"
        head = next(j for j in jobs if j.het_job_offset == 0)
        tail = next(j for j in jobs if j.het_job_offset == 1)
        assert head.het_job_ids == tail.het_job_ids == (head.job_id, tail.job_id)
        assert head.comment.startswith(
            f"slurmbridge:{NS}/CompositePodGroup.scheduling.k8s.io:train:"
        )
        assert head.partition == "batch", "the CompositePodGroup's annotations configure it"
        assert {pod(stack, n)["metadata"]["labels"][JOBID] for n in names} == {str(head.job_id)}
        assert pod(stack, leader)["spec"]["nodeName"] in head.nodes
        assert {pod(stack, n)["spec"]["nodeName"] for n in workers} == set(tail.nodes)


def test_without_the_gate_a_pod_group_may_not_name_a_parent() -> None:
    sim = KubeSim(workload_api="v1beta1")
    body = {
        "apiVersion": BETA,
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": NS},
        "spec": {
            "parentCompositePodGroupName": "root",
            "workloadRef": {"workloadName": "w", "templateName": "t"},
            "schedulingPolicy": {"gang": {"minCount": 1}},
        },
    }
    with pytest.raises(ApiError) as refused:
        sim.create(body)
    assert refused.value.code == 422
    assert "spec.parentCompositePodGroupName" in str(refused.value.status())
    with_gate = KubeSim(workload_api="v1beta1", composite_pod_groups=True)
    assert with_gate.create(body)["spec"]["parentCompositePodGroupName"] == "root"


def test_a_composite_pod_group_is_validated_as_the_api_server_does() -> None:
    sim = KubeSim(workload_api="v1beta1", composite_pod_groups=True)
    bad = {
        "apiVersion": ALPHA3,
        "kind": "CompositePodGroup",
        "metadata": {"name": "c", "namespace": NS},
        "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 0}}},
    }
    with pytest.raises(ApiError) as refused:
        sim.create(bad)
    text = str(refused.value.status())
    assert refused.value.code == 422
    assert "spec.schedulingPolicy.gang.minGroupCount" in text
    assert "spec.workloadRef" in text


@pytest.mark.parametrize("gate", [True, False])
async def test_the_watcher_lists_composite_pod_groups_where_served(
    gate: bool, tmp_path: Path
) -> None:
    """Served (1.37 with the gate): the CompositePodGroup is published with its gang minimum,
    template and no parent; not served: an empty complete list, nothing else."""
    async with KubeSim(workload_api="v1beta1", composite_pod_groups=gate) as sim:
        if gate:
            tree(sim, "train")
        published = await first_listing(sim, "compositepodgroups", tmp_path)
    listed = [e for e in published if isinstance(e, KubeListed)]
    assert listed[0].resource == "compositepodgroups.scheduling.k8s.io"
    groups = [e for e in published if isinstance(e, KubeWorkload)]
    if not gate:
        assert groups == []
        return
    (cpg,) = groups
    assert (cpg.workload_kind, cpg.api_version, cpg.key) == (
        wellknown.KIND_NATIVE_COMPOSITE,
        ALPHA3,
        f"{NS}/CompositePodGroup.scheduling.k8s.io:train",
    )
    assert (cpg.size, cpg.policy, cpg.workload_name, cpg.template_name, cpg.parent) == (
        2,
        "gang",
        "train",
        "root",
        "",
    )
