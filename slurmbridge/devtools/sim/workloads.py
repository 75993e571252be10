"""Pod groups in the Kubernetes simulator, shaped as their controllers shape them.

:func:`create_group` creates the owner object and its pods the way the batch Job, JobSet,
LeaderWorkerSet and coscheduling controllers would (names, labels, ``ownerReferences``), so
slurmbridge's grouping sees what it sees in a real cluster. No controller runs afterwards: a
deleted pod is not recreated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from schemas import wellknown
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.devtools.sim.kubelet import ANNOTATION_EXIT_CODE, ANNOTATION_RUN_SECONDS

Obj = dict[str, Any]

#: Group kinds :func:`create_group` builds.
GROUP_KINDS: Final = ("Pod", "Job", "JobSet", "LeaderWorkerSet", "PodGroup")

_OWNER_API: Final = {
    "Job": "batch/v1",
    "JobSet": "jobset.x-k8s.io/v1alpha2",
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1",
    "PodGroup": "scheduling.x-k8s.io/v1alpha1",
}


def _ref(obj: Obj) -> Obj:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def create_group(
    sim: KubeSim,
    kind: str,
    name: str,
    size: int,
    *,
    namespace: str = "default",
    annotations: Mapping[str, str] | None = None,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    scheduler_name: str = wellknown.DEFAULT_SCHEDULER_NAME,
    run_seconds: float | None = None,
    exit_code: int = 0,
    leader_requests: Mapping[str, str] | None = None,
    leader_run_seconds: float | None = None,
) -> list[str]:
    """Create a ``kind`` group ``name`` of ``size`` pods; returns the pod names.

    ``annotations`` go on the group's root object (the pod itself for ``Pod``, which needs
    ``size`` 1) — that is where ``slurmjob.slinky.slurm.net/*`` are read. ``requests`` /
    ``limits`` are one container's (``{"cpu": "1", "memory": "100Mi"}``). ``run_seconds``
    makes the simulated kubelet end each pod that long after it starts, with ``exit_code``.
    ``leader_requests`` / ``leader_run_seconds`` (LeaderWorkerSet only): the leader's own
    container requests and run time, from ``leaderWorkerTemplate.leaderTemplate`` as the
    LeaderWorkerSet controller makes the leader pod (a leader shaped apart from its workers).

    Raises:
        ValueError: unknown ``kind``, ``size`` < 1, or a bare ``Pod`` group of size ≠ 1.
        slurmbridge.devtools.sim.kube.ApiError: the simulator refused an object (e.g. it exists).
    """
    if kind not in GROUP_KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(GROUP_KINDS)}")
    if size < 1:
        raise ValueError(f"size: must be ≥ 1, not {size}")
    if kind == "Pod" and size != 1:
        raise ValueError("size: a bare Pod group has exactly one pod")
    container: Obj = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
    resources: Obj = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    if resources:
        container["resources"] = resources
    pod_spec: Obj = {
        "schedulerName": scheduler_name,
        "restartPolicy": "Never",
        "containers": [container],
    }
    pod_annotations: dict[str, str] = {}
    if run_seconds is not None:
        pod_annotations[ANNOTATION_RUN_SECONDS] = str(run_seconds)
        pod_annotations[ANNOTATION_EXIT_CODE] = str(exit_code)

    def make_pod(
        pod_name: str,
        labels: Mapping[str, str],
        owner: Obj | None,
        spec: Obj | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> str:
        meta: Obj = {
            "name": pod_name,
            "namespace": namespace,
            "labels": dict(labels),
            "annotations": {**pod_annotations, **(extra or {})},
        }
        if owner is not None:
            meta["ownerReferences"] = [_ref(owner)]
        sim.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec or pod_spec})
        return pod_name

    if kind == "Pod":
        pod_annotations.update(annotations or {})
        return [make_pod(name, {}, None)]

    root_meta: Obj = {"name": name, "namespace": namespace, "annotations": dict(annotations or {})}
    template: Obj = {"metadata": {}, "spec": pod_spec}
    body: Obj = {"apiVersion": _OWNER_API[kind], "kind": kind, "metadata": root_meta}
    if kind == "Job":
        body["spec"] = {"parallelism": size, "completions": size, "template": template}
        job = sim.create(body)
        uid = job["metadata"]["uid"]
        labels = {
            "batch.kubernetes.io/job-name": name,
            "job-name": name,
            "batch.kubernetes.io/controller-uid": uid,
            "controller-uid": uid,
        }
        return [
            make_pod(
                f"{name}-{i}", {**labels, "batch.kubernetes.io/job-completion-index": str(i)}, job
            )
            for i in range(size)
        ]
    if kind == "JobSet":
        body["spec"] = {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {"spec": {"parallelism": size, "template": template}},
                }
            ]
        }
        jobset = sim.create(body)
        child_name = f"{name}-workers-0"
        child = sim.create(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": child_name,
                    "namespace": namespace,
                    "labels": {"jobset.sigs.k8s.io/jobset-name": name},
                    "ownerReferences": [_ref(jobset)],
                },
                "spec": {"parallelism": size, "completions": size, "template": template},
            }
        )
        labels = {
            "jobset.sigs.k8s.io/jobset-name": name,
            "jobset.sigs.k8s.io/replicatedjob-name": "workers",
            "batch.kubernetes.io/job-name": child_name,
        }
        return [make_pod(f"{child_name}-{i}", labels, child) for i in range(size)]
    if kind == "LeaderWorkerSet":
        lwt: Obj = {"size": size, "workerTemplate": template}
        leader_spec: Obj | None = None
        leader_extra: dict[str, str] = {}
        if leader_requests is not None:
            leader_container = {**container, "resources": {"requests": dict(leader_requests)}}
            leader_spec = {**pod_spec, "containers": [leader_container]}
            lwt["leaderTemplate"] = {"metadata": {}, "spec": leader_spec}
        if leader_run_seconds is not None:
            leader_extra = {
                ANNOTATION_RUN_SECONDS: str(leader_run_seconds),
                ANNOTATION_EXIT_CODE: str(exit_code),
            }
        body["spec"] = {"replicas": 1, "leaderWorkerTemplate": lwt}
        lws = sim.create(body)
        labels = {
            "leaderworkerset.sigs.k8s.io/name": name,
            "leaderworkerset.sigs.k8s.io/group-index": "0",
        }
        names = [
            make_pod(
                f"{name}-0",
                {**labels, "leaderworkerset.sigs.k8s.io/worker-index": "0"},
                lws,
                leader_spec,
                leader_extra,
            )
        ]
        names += [
            make_pod(
                f"{name}-0-{i}", {**labels, "leaderworkerset.sigs.k8s.io/worker-index": str(i)}, lws
            )
            for i in range(1, size)
        ]
        return names
    # PodGroup (coscheduling): pods carry the label; the PodGroup owns nothing.
    body["spec"] = {"minMember": size}
    sim.create(body)
    return [
        make_pod(f"{name}-{i}", {"scheduling.x-k8s.io/pod-group": name}, None) for i in range(size)
    ]
