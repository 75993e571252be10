"""PodEffector through ``apply``: the Kubernetes simulator and the slurmrestd simulator, both
over HTTP.

SubmitSlurmJob (also refused for good: Rejected / Forbidden), MarkPods, BindPod,
CancelSlurmJob, SetJobExcludedNodes, DeletePod, RemovePodFinalizer and SetPodCondition: the
outcome each reports, the pods and jobs afterwards, the preconditions (a pod re-created under
the same name is another pod; a job not ours is never touched; a RUNNING job keeps its pod)
and how failures on either side map onto Transient / Permanent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from kubernetes_asyncio import client

from schemas import wellknown
from schemas.actions import (
    BindPod,
    CancelSlurmJob,
    DeletePod,
    DrainSlurmNode,
    MarkPods,
    PodRef,
    RemovePodFinalizer,
    SetJobExcludedNodes,
    SetPodCondition,
    SlurmJobSpec,
    SubmitSlurmJob,
)
from slurmbridge.devtools.sim.kube import ApiError, KubeSim
from slurmbridge.devtools.sim.slurmrestd import SlurmSim
from slurmbridge.effectors.pods import PodEffector
from slurmbridge.kube.cache import PodCache
from slurmbridge.kube.wire import DECODE_POD
from slurmbridge.runtime.outcomes import Permanent, Transient
from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.models import NodeUpdate

pytestmark = pytest.mark.integration

NS = "default"
CLUSTER = "sim"
SCHED = wellknown.DEFAULT_SCHEDULER_NAME
JOBID = wellknown.LABEL_SLURM_JOBID
FIN = wellknown.FINALIZER_SCHEDULER
SLURM_NODE = wellknown.ANNOTATION_SLURM_NODE
SCHEDULED = wellknown.CONDITION_POD_SCHEDULED
REJECTED = wellknown.REASON_SLURM_JOB_REJECTED
OTHER_FIN = "example.com/keep"
TOLERATION = {
    "key": wellknown.TAINT_MANAGED_NODE,
    "operator": "Equal",
    "value": SCHED,
    "effect": wellknown.TAINT_MANAGED_NODE_EFFECT,
}


class Hooks(httpx.AsyncBaseTransport):
    """The Slurm client's transport: runs a test's hook just before a matching request leaves
    (someone else acting between two requests of one effect), then sends it."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.before: list[tuple[str, str, Callable[[], None]]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        for method, suffix, hook in self.before:
            if request.method == method and request.url.path.endswith(suffix):
                hook()
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class World:
    kube: KubeSim
    slurm: SlurmSim
    hooks: Hooks
    effector: PodEffector
    changed: list[tuple[str, int]] = field(default_factory=list)

    def pod(self, name: str) -> dict[str, Any] | None:
        try:
            return self.kube.get("pods", name, NS)
        except ApiError:
            return None

    def meta(self, name: str) -> dict[str, Any]:
        pod = self.pod(name)
        assert pod is not None, f"pod {name} is gone"
        return dict(pod["metadata"])

    def ours(self, marker: str) -> list[Any]:
        return [j for j in self.slurm.jobs if j.comment == marker]


@contextlib.asynccontextmanager
async def world(
    kube: KubeSim, api: client.ApiClient, tmp_path: Path, slurm_release: str = "26.05"
) -> AsyncIterator[World]:
    slurm = SlurmSim(cluster=CLUSTER, slurm_release=slurm_release)
    slurm.seed_default(4)
    await slurm.start()
    hooks = Hooks()
    c = SlurmClient(
        slurm.url, slurm.write_token(tmp_path / "slurm-token"), "slurmrest", transport=hooks
    )
    try:
        await c.negotiate()
        effector = PodEffector(api, {CLUSTER: c})
        w = World(kube, slurm, hooks, effector)
        effector.on_job_changed = lambda cluster, job: w.changed.append((cluster, job))
        yield w
    finally:
        await c.aclose()
        await slurm.stop()


@pytest.fixture
async def w(sim: KubeSim, api: client.ApiClient, tmp_path: Path) -> AsyncIterator[World]:
    async with world(sim, api, tmp_path) as it:
        yield it


def ref(pod: dict[str, Any]) -> PodRef:
    meta = pod["metadata"]
    return PodRef(namespace=meta["namespace"], name=meta["name"], uid=meta["uid"])


def replace(kube: KubeSim, name: str) -> dict[str, Any]:
    """Delete pod ``name`` and create another of that name; the new pod."""
    kube.delete_pod(name, NS, grace_period_seconds=0)
    return kube.add_pod(name, labels={"app": "new"})


def submit(marker: str, *pods: PodRef, **spec: Any) -> SubmitSlurmJob:
    return SubmitSlurmJob(
        cluster=CLUSTER,
        group=f"{NS}/{marker}",
        marker=marker,
        pods=pods,
        spec=SlurmJobSpec(name=marker, partition="batch", **spec),
        scheduler_name=SCHED,
    )


def marked(meta: dict[str, Any], pod: dict[str, Any], job_id: int) -> bool:
    return (
        meta.get("labels", {}).get(JOBID) == str(job_id)
        and FIN in (meta.get("finalizers") or [])
        and TOLERATION in (pod["spec"].get("tolerations") or [])
    )


def is_marked(w: World, name: str, job_id: int) -> bool:
    pod = w.pod(name)
    return pod is not None and marked(pod["metadata"], pod, job_id)


def condition(w: World, name: str, kind: str) -> dict[str, Any] | None:
    pod = w.pod(name)
    assert pod is not None
    found = [c for c in pod.get("status", {}).get("conditions") or [] if c["type"] == kind]
    return found[0] if found else None


def events_about(w: World, name: str) -> list[dict[str, Any]]:
    return [e for e in w.kube.list("events", NS) if e["involvedObject"]["name"] == name]


def job_of(w: World, marker: str, state: str = "RUNNING") -> int:
    """Submit a job of ours (comment ``marker``) straight to Slurm; its id."""
    job_id = w.slurm.submit(
        {"name": marker, "partition": "batch", "comment": marker}, external=True
    )
    assert w.slurm.job(job_id).state == (state,)
    return job_id


# --- SubmitSlurmJob --------------------------------------------------------------------------


async def test_submit_creates_one_job_and_marks_the_pods(w: World) -> None:
    a, b = w.kube.add_pod("sub-a", scheduler_name=SCHED), w.kube.add_pod("sub-b")
    action = submit("slurmbridge:sub", ref(a), ref(b), cpus_per_task=1)

    result = await w.effector.apply(action)
    assert result.outcome == "ok"
    [job] = w.ours("slurmbridge:sub")
    assert result.detail == f"Slurm job {job.job_id}"
    assert "EXTERNAL_JOB" in job.flags
    assert job.admin_comment == '{"pods":["default/sub-a","default/sub-b"]}'
    assert (job.name, job.partition) == ("slurmbridge:sub", "batch")
    assert is_marked(w, "sub-a", job.job_id)
    assert is_marked(w, "sub-b", job.job_id)
    assert w.changed == [(CLUSTER, job.job_id)]

    # Redelivered: the live job with the marker is found, nothing is submitted or written.
    patches = w.kube.requests[("patch", "pods")]
    result = await w.effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", f"Slurm job {job.job_id}")
    assert len(w.ours("slurmbridge:sub")) == 1
    assert w.kube.requests[("patch", "pods")] == patches
    assert w.changed == [(CLUSTER, job.job_id)]


async def test_submit_marks_pods_for_a_job_submitted_before_a_crash(w: World) -> None:
    pod = w.kube.add_pod("sub-c")
    job_id = job_of(w, "slurmbridge:crash")
    result = await w.effector.apply(submit("slurmbridge:crash", ref(pod)))
    assert (result.outcome, result.detail) == ("ok", f"Slurm job {job_id}")
    assert len(w.ours("slurmbridge:crash")) == 1
    assert is_marked(w, "sub-c", job_id)
    assert w.changed == []  # no job submitted


async def test_submit_again_after_the_markers_job_ended(w: World) -> None:
    pod = w.kube.add_pod("sub-d")
    ended = job_of(w, "slurmbridge:again")
    w.slurm.cancel_job(ended)
    result = await w.effector.apply(submit("slurmbridge:again", ref(pod)))
    assert result.outcome == "ok"
    live = [j for j in w.ours("slurmbridge:again") if j.job_id != ended]
    assert len(live) == 1
    assert is_marked(w, "sub-d", live[0].job_id)


async def test_a_re_back_submit_takes_only_a_job_on_or_for_its_nodes(w: World) -> None:
    """Issue "Fail closed at every edge" (3): running pods whose job Slurm lost are re-backed
    by a job requiring exactly their nodes. A job of ours that slurmctld restored from older
    state (RUNNING elsewhere) does not back them: a new job is submitted, asking for the
    nodes (``required_nodes``), and Slurm starts it there."""
    pod = w.kube.add_pod("sub-rb")
    elsewhere = job_of(w, "slurmbridge:rb")
    held = w.slurm.job(elsewhere).nodes
    free = next(n for n in sorted(w.slurm.nodes) if n not in held)
    action = submit("slurmbridge:rb", ref(pod), required_nodes=(free,), min_nodes=1, max_nodes=1)
    result = await w.effector.apply(action)
    assert result.outcome == "ok"
    [new] = [j for j in w.ours("slurmbridge:rb") if j.job_id != elsewhere]
    assert (new.required_nodes, new.nodes, new.state) == ((free,), (free,), ("RUNNING",))
    assert is_marked(w, "sub-rb", new.job_id)
    # Redelivered: that job backs the nodes now.
    result = await w.effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", f"Slurm job {new.job_id}")


async def test_submit_leaves_a_replaced_pod_alone(w: World) -> None:
    kept, old = w.kube.add_pod("sub-e"), w.kube.add_pod("sub-f")
    replace(w.kube, "sub-f")
    result = await w.effector.apply(submit("slurmbridge:replaced", ref(kept), ref(old)))
    assert result.outcome == "ok"
    [job] = w.ours("slurmbridge:replaced")
    assert is_marked(w, "sub-e", job.job_id)
    new = w.meta("sub-f")
    assert new["labels"] == {"app": "new"}
    assert not new.get("finalizers")


async def test_a_job_slurm_refuses_is_rejected_on_every_pod(
    sim: KubeSim, api: client.ApiClient, tmp_path: Path
) -> None:
    """Slurm 24.11 refuses a job larger than its partition (2014): no job, no retry loop —
    ``PodScheduled=False`` reason SlurmJobRejected and a Warning Event on each pod."""
    async with world(sim, api, tmp_path, slurm_release="24.11") as w:
        a, b = w.kube.add_pod("rej-a"), w.kube.add_pod("rej-b")
        result = await w.effector.apply(submit("slurmbridge:big", ref(a), ref(b), min_nodes=9))
        assert result.outcome == "rejected"
        assert "Requested node configuration is not available" in result.detail
        assert w.ours("slurmbridge:big") == []
        for name in ("rej-a", "rej-b"):
            cond = condition(w, name, SCHEDULED)
            assert cond is not None
            assert (cond["status"], cond["reason"]) == ("False", REJECTED)
            assert cond["message"] == result.detail
            [event] = events_about(w, name)
            assert (event["type"], event["reason"], event["message"]) == (
                "Warning",
                REJECTED,
                result.detail,
            )
            assert event["involvedObject"]["uid"] == w.meta(name)["uid"]
            assert JOBID not in w.meta(name)["labels"]
            assert not w.meta(name).get("finalizers")
        assert w.changed == []


async def test_a_refusal_after_a_pending_wait_starts_the_back_off_afresh(
    sim: KubeSim, api: client.ApiClient, tmp_path: Path
) -> None:
    """The pod waited (``PodScheduled=False``, SlurmJobPending, long ago), its job was
    cancelled, and the resubmit is refused: the SlurmJobRejected condition's
    lastTransitionTime is now, so placement's back-off runs from the refusal (the status
    stayed False, which alone would keep the old time)."""
    async with world(sim, api, tmp_path, slurm_release="24.11") as w:
        pod = w.kube.add_pod("rej-p")
        old = "2020-01-01T00:00:00Z"
        w.kube.patch_merge(
            "pods",
            "rej-p",
            {
                "status": {
                    "conditions": [
                        {
                            "type": SCHEDULED,
                            "status": "False",
                            "reason": wellknown.REASON_SLURM_JOB_PENDING,
                            "message": "Priority, 2nd in partition batch",
                            "lastTransitionTime": old,
                        }
                    ]
                }
            },
            NS,
            subresource="status",
        )
        result = await w.effector.apply(submit("slurmbridge:late", ref(pod), min_nodes=9))
        assert result.outcome == "rejected"
        cond = condition(w, "rej-p", SCHEDULED)
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("False", REJECTED)
        assert cond["lastTransitionTime"] != old


async def test_a_submit_the_token_may_not_make_is_rejected_with_the_role_to_grant(
    w: World,
) -> None:
    """Forbidden (2002), also once resubmitted without ``admin_comment``."""
    pod = w.kube.add_pod("forbid")
    w.hooks.before.append(
        ("POST", "/job/submit", lambda: w.slurm.fail_next(1, 500, error_number=2002))
    )
    result = await w.effector.apply(submit("slurmbridge:forbid", ref(pod)))
    assert result.outcome == "rejected"
    assert "lacks the role" in result.detail
    assert w.slurm.counters["POST job"] == 2  # the client's resubmit without admin_comment
    assert w.ours("slurmbridge:forbid") == []
    cond = condition(w, "forbid", SCHEDULED)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", REJECTED)
    assert [e["reason"] for e in events_about(w, "forbid")] == [REJECTED]


async def test_submit_while_slurm_is_unavailable_is_transient(w: World) -> None:
    pod = w.kube.add_pod("sub-g")
    w.slurm.fail_next(1, 503)
    with pytest.raises(Transient, match="SubmitSlurmJob"):
        await w.effector.apply(submit("slurmbridge:down", ref(pod)))
    assert w.ours("slurmbridge:down") == []
    assert JOBID not in w.meta("sub-g")["labels"]


async def test_submit_for_a_cluster_without_a_client_is_retried(w: World) -> None:
    """As for every effector (one error map): a Cluster object's client starts once this
    process's projection has the Cluster, so the action waits instead of dead-lettering."""
    pod = w.kube.add_pod("sub-h")
    action = SubmitSlurmJob(
        cluster="elsewhere",
        group="g",
        marker="m",
        pods=(ref(pod),),
        spec=SlurmJobSpec(name="m"),
        scheduler_name=SCHED,
    )
    with pytest.raises(Transient, match="no Slurm client for cluster 'elsewhere'") as exc:
        await w.effector.apply(action)
    assert exc.value.delay == 5.0
    assert w.slurm.jobs == []


# --- MarkPods --------------------------------------------------------------------------------


async def test_mark_pods_adds_label_finalizer_and_toleration_keeping_the_others(
    w: World,
) -> None:
    pod = w.kube.add_pod("mk-a", labels={"app": "x"}, finalizers=[OTHER_FIN])
    tolerations_before = pod["spec"]["tolerations"]
    action = MarkPods(job_id=77, pods=(ref(pod),), scheduler_name=SCHED)

    result = await w.effector.apply(action)
    assert (result.outcome, result.detail) == ("ok", "1 pod(s) marked")
    after = w.kube.get("pods", "mk-a", NS)
    assert after["metadata"]["labels"] == {"app": "x", JOBID: "77"}
    assert after["metadata"]["finalizers"] == [OTHER_FIN, FIN]
    assert after["spec"]["tolerations"] == [*tolerations_before, TOLERATION]

    patches = w.kube.requests[("patch", "pods")]
    result = await w.effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", "0 pod(s) marked")
    assert w.kube.requests[("patch", "pods")] == patches


async def test_mark_pods_adds_no_toleration_to_a_pod_tolerating_everything(w: World) -> None:
    pod = w.kube.add_pod("mk-b")
    everything = {"operator": "Exists"}
    w.kube.patch(
        "pods",
        "mk-b",
        [{"op": "add", "path": "/spec/tolerations/-", "value": everything}],
        NS,
        patch_type="json",
    )
    result = await w.effector.apply(MarkPods(job_id=5, pods=(ref(pod),), scheduler_name=SCHED))
    assert result.outcome == "ok"
    after = w.kube.get("pods", "mk-b", NS)
    assert after["metadata"]["labels"][JOBID] == "5"
    assert TOLERATION not in after["spec"]["tolerations"]


async def test_mark_pods_leaves_replaced_gone_and_deleting_pods_alone(w: World) -> None:
    old = w.kube.add_pod("mk-c")
    replace(w.kube, "mk-c")
    deleting = w.kube.add_pod("mk-d", finalizers=[OTHER_FIN])
    w.kube.delete_pod("mk-d", NS)
    gone = PodRef(namespace=NS, name="mk-gone", uid="0000")
    action = MarkPods(job_id=6, pods=(ref(old), ref(deleting), gone), scheduler_name=SCHED)

    result = await w.effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", "0 pod(s) marked")
    assert w.meta("mk-c")["labels"] == {"app": "new"}
    assert JOBID not in w.meta("mk-d")["labels"]
    assert w.meta("mk-d")["finalizers"] == [OTHER_FIN]


async def test_mark_pods_reads_a_pod_that_changed_once_again(w: World) -> None:
    pod = w.kube.add_pod("mk-e")
    w.kube.fail_next(1, 422, verb="patch", resource="pods")  # the resourceVersion test failed
    result = await w.effector.apply(MarkPods(job_id=8, pods=(ref(pod),), scheduler_name=SCHED))
    assert result.outcome == "ok"
    assert is_marked(w, "mk-e", 8)
    assert w.kube.requests[("get", "pods")] == 2


async def test_mark_pods_gives_a_pod_that_keeps_changing_back_for_later(w: World) -> None:
    pod = w.kube.add_pod("mk-f")
    w.kube.fail_next(2, 422, verb="patch", resource="pods")
    with pytest.raises(Transient, match="keeps changing"):
        await w.effector.apply(MarkPods(job_id=9, pods=(ref(pod),), scheduler_name=SCHED))
    assert not is_marked(w, "mk-f", 9)


async def test_mark_pods_never_overwrites_a_change_made_after_its_read(w: World) -> None:
    """The patch tests the resourceVersion read: a label added meanwhile survives, and the
    pod is marked on the re-read."""
    pod = w.kube.add_pod("mk-g", labels={"app": "x"})
    w.kube.delay_next(1, 0.3, verb="patch", resource="pods")
    task = asyncio.create_task(
        w.effector.apply(MarkPods(job_id=10, pods=(ref(pod),), scheduler_name=SCHED))
    )
    async with asyncio.timeout(5):
        while w.kube.requests[("patch", "pods")] == 0:
            await asyncio.sleep(0.005)
    w.kube.patch_merge("pods", "mk-g", {"metadata": {"labels": {"late": "yes"}}}, NS)
    assert (await task).outcome == "ok"
    assert w.meta("mk-g")["labels"] == {"app": "x", "late": "yes", JOBID: "10"}
    assert w.kube.requests[("patch", "pods")] == 2


async def test_mark_pods_of_a_pod_deleted_between_read_and_patch_is_a_noop(w: World) -> None:
    pod = w.kube.add_pod("mk-h")
    w.kube.delay_next(1, 0.3, verb="patch", resource="pods")
    task = asyncio.create_task(
        w.effector.apply(MarkPods(job_id=11, pods=(ref(pod),), scheduler_name=SCHED))
    )
    async with asyncio.timeout(5):
        while w.kube.requests[("patch", "pods")] == 0:
            await asyncio.sleep(0.005)
    w.kube.delete_pod("mk-h", NS)
    assert w.pod("mk-h") is None
    result = await task
    assert result.outcome == "noop"


# --- BindPod ---------------------------------------------------------------------------------


def bind(pod: PodRef, node: str = "kn-1", slurm_node: str = "n1") -> BindPod:
    return BindPod(pod=pod, node=node, slurm_node=slurm_node, job_id=1)


async def test_bind_binds_and_annotates_then_is_a_noop(w: World) -> None:
    pod = w.kube.add_pod("bd-a")
    result = await w.effector.apply(bind(ref(pod)))
    assert (result.outcome, result.detail) == ("ok", "bound to kn-1")
    after = w.kube.get("pods", "bd-a", NS)
    assert after["spec"]["nodeName"] == "kn-1"
    assert after["metadata"]["annotations"][SLURM_NODE] == "n1"
    assert condition(w, "bd-a", "PodScheduled") is not None

    result = await w.effector.apply(bind(ref(pod)))
    assert (result.outcome, result.detail) == ("noop", "already bound to kn-1")


async def test_bind_skips_a_pod_bound_elsewhere_or_being_deleted(w: World) -> None:
    elsewhere = w.kube.add_pod("bd-b", node_name="kn-9")
    result = await w.effector.apply(bind(ref(elsewhere)))
    assert result.outcome == "skipped"
    assert w.kube.get("pods", "bd-b", NS)["spec"]["nodeName"] == "kn-9"
    assert SLURM_NODE not in w.meta("bd-b")["annotations"]

    deleting = w.kube.add_pod("bd-c", finalizers=[OTHER_FIN])
    w.kube.delete_pod("bd-c", NS)
    result = await w.effector.apply(bind(ref(deleting)))
    assert (result.outcome, result.detail) == ("skipped", "pod is being deleted")
    assert not w.kube.get("pods", "bd-c", NS)["spec"].get("nodeName")


async def test_bind_of_a_gone_or_replaced_pod_is_a_noop(w: World) -> None:
    result = await w.effector.apply(bind(PodRef(namespace=NS, name="bd-gone", uid="0000")))
    assert (result.outcome, result.detail) == ("noop", "pod is gone")

    old = w.kube.add_pod("bd-d")
    replace(w.kube, "bd-d")
    result = await w.effector.apply(bind(ref(old)))
    assert (result.outcome, result.detail) == ("noop", "pod is gone")
    assert not w.kube.get("pods", "bd-d", NS)["spec"].get("nodeName")


@pytest.mark.parametrize(("status", "expected"), [(500, Transient), (403, Permanent)])
async def test_bind_errors_map_to_transient_or_permanent(
    w: World, status: int, expected: type[Exception]
) -> None:
    pod = w.kube.add_pod("bd-e")
    w.kube.fail_next(1, status, verb="create", resource="pods/binding")
    with pytest.raises(expected, match="BindPod"):
        await w.effector.apply(bind(ref(pod)))
    assert not w.kube.get("pods", "bd-e", NS)["spec"].get("nodeName")


# --- CancelSlurmJob --------------------------------------------------------------------------


async def test_cancel_cancels_our_running_job_then_is_a_noop(w: World) -> None:
    job_id = job_of(w, "slurmbridge:cx")
    action = CancelSlurmJob(cluster=CLUSTER, job_id=job_id, marker="slurmbridge:cx", why="done")
    result = await w.effector.apply(action)
    assert (result.outcome, result.detail) == ("ok", "done")
    assert w.slurm.job(job_id).state == ("CANCELLED",)
    assert w.changed == [(CLUSTER, job_id)]

    result = await w.effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", "job already CANCELLED")
    assert w.changed == [(CLUSTER, job_id)]


async def test_cancel_never_touches_a_job_that_is_not_ours(w: World) -> None:
    job_id = job_of(w, "someone-else")
    result = await w.effector.apply(
        CancelSlurmJob(cluster=CLUSTER, job_id=job_id, marker="slurmbridge:cy")
    )
    assert result.outcome == "skipped"
    assert w.slurm.job(job_id).state == ("RUNNING",)
    assert w.slurm.counters["DELETE job"] == 0


async def test_a_pending_only_cancel_leaves_a_job_that_started(w: World) -> None:
    """A re-back job that started between the decision and the cancel backs its pods."""
    job_id = job_of(w, "slurmbridge:cp")
    action = CancelSlurmJob(
        cluster=CLUSTER, job_id=job_id, marker="slurmbridge:cp", why="late", pending_only=True
    )
    result = await w.effector.apply(action)
    assert (result.outcome, result.detail) == ("skipped", f"job {job_id} is RUNNING")
    assert w.slurm.job(job_id).state == ("RUNNING",)


async def test_cancel_of_an_unknown_job_is_a_noop(w: World) -> None:
    result = await w.effector.apply(
        CancelSlurmJob(cluster=CLUSTER, job_id=999_999, marker="slurmbridge:cz")
    )
    assert (result.outcome, result.detail) == ("noop", "no such job")
    assert w.slurm.counters["DELETE job"] == 0


async def test_cancel_while_slurm_is_unavailable_is_transient(w: World) -> None:
    job_id = job_of(w, "slurmbridge:cw")
    w.slurm.fail_next(1, 503)
    with pytest.raises(Transient, match="CancelSlurmJob"):
        await w.effector.apply(
            CancelSlurmJob(cluster=CLUSTER, job_id=job_id, marker="slurmbridge:cw")
        )
    assert w.slurm.job(job_id).state == ("RUNNING",)


# --- SetJobExcludedNodes ---------------------------------------------------------------------


def pending_job(w: World, marker: str) -> int:
    """A job of ours that waits: every node is drained."""
    for node in ("n1", "n2", "n3", "n4"):
        w.slurm.admin_drain(node, "maintenance")
    return job_of(w, marker, state="PENDING")


def exclude(job_id: int, marker: str, *nodes: str) -> SetJobExcludedNodes:
    return SetJobExcludedNodes(cluster=CLUSTER, job_id=job_id, marker=marker, excluded_nodes=nodes)


async def test_exclusions_of_our_pending_job_are_replaced_then_noop(w: World) -> None:
    job_id = pending_job(w, "slurmbridge:ex")
    result = await w.effector.apply(exclude(job_id, "slurmbridge:ex", "n3", "n2"))
    assert result.outcome == "ok"
    assert w.slurm.job(job_id).excluded_nodes == ("n2", "n3")
    assert w.changed == [(CLUSTER, job_id)]

    result = await w.effector.apply(exclude(job_id, "slurmbridge:ex", "n2", "n3"))
    assert (result.outcome, result.detail) == ("noop", "excluded nodes already as wanted")

    result = await w.effector.apply(exclude(job_id, "slurmbridge:ex"))  # clear them
    assert result.outcome == "ok"
    assert w.slurm.job(job_id).excluded_nodes == ()


async def test_exclusions_of_a_job_not_ours_are_never_changed(w: World) -> None:
    job_id = pending_job(w, "theirs")
    result = await w.effector.apply(exclude(job_id, "slurmbridge:ey", "n1"))
    assert result.outcome == "skipped"
    assert w.slurm.job(job_id).excluded_nodes == ()


@pytest.mark.parametrize("state", ["RUNNING", "gone"])
async def test_exclusions_of_a_job_that_does_not_wait_are_a_noop(w: World, state: str) -> None:
    job_id = job_of(w, "slurmbridge:ez") if state == "RUNNING" else 999_999
    result = await w.effector.apply(exclude(job_id, "slurmbridge:ez", "n1"))
    assert (result.outcome, result.detail) == ("noop", "job is not pending")
    assert w.slurm.counters["POST job"] == 0


async def test_exclusions_of_a_job_that_started_meanwhile_are_left(w: World) -> None:
    """The job starts between the effector's read and its update: Slurm refuses the update;
    the effect ends as a noop (at the latest on the retry), the job unchanged."""
    job_id = pending_job(w, "slurmbridge:ew")

    def start_it() -> None:
        w.slurm.admin_update("n1", NodeUpdate(state=("UNDRAIN",)))
        w.slurm.schedule()

    w.hooks.before.append(("POST", f"/job/{job_id}", start_it))
    action = exclude(job_id, "slurmbridge:ew", "n4")
    try:
        result = await w.effector.apply(action)
    except Transient:
        result = await w.effector.apply(action)
    assert result.outcome == "noop"
    job = w.slurm.job(job_id)
    assert (job.state, job.excluded_nodes) == (("RUNNING",), ())


# --- DeletePod -------------------------------------------------------------------------------


def delete(pod: PodRef, job_id: int) -> DeletePod:
    return DeletePod(pod=pod, cluster=CLUSTER, job_id=job_id, why="job ended")


async def test_delete_pod_of_a_running_job_is_skipped(w: World) -> None:
    job_id = job_of(w, "slurmbridge:da")
    pod = w.kube.add_pod("dp-a", node_name="kn-1", labels={JOBID: str(job_id)})
    result = await w.effector.apply(delete(ref(pod), job_id))
    assert result.outcome == "skipped"
    assert w.pod("dp-a") is not None
    assert not w.meta("dp-a").get("deletionTimestamp")


async def test_delete_pod_with_a_marker_is_not_held_by_another_groups_job(w: World) -> None:
    """The id the pod's label names was handed to another group's job (slurmctld restarted
    from older state): that job RUNNING keeps nothing; our own RUNNING job still does."""
    foreign = job_of(w, "slurmbridge:other-group")
    pod = w.kube.add_pod("dp-m", finalizers=[FIN], labels={JOBID: str(foreign)})
    action = DeletePod(
        pod=ref(pod), cluster=CLUSTER, job_id=foreign, why="lost", marker="slurmbridge:dm"
    )
    assert (await w.effector.apply(action)).outcome == "ok"
    assert w.meta("dp-m")["deletionTimestamp"]
    ours = job_of(w, "slurmbridge:dm2")
    kept = w.kube.add_pod("dp-n", labels={JOBID: str(ours)})
    action = DeletePod(
        pod=ref(kept), cluster=CLUSTER, job_id=ours, why="x", marker="slurmbridge:dm2"
    )
    assert (await w.effector.apply(action)).outcome == "skipped"


@pytest.mark.parametrize("job", ["ended", "unknown to Slurm"])
async def test_delete_pod_of_a_job_that_no_longer_runs(w: World, job: str) -> None:
    job_id = job_of(w, "slurmbridge:db")
    if job == "ended":
        w.slurm.cancel_job(job_id)
    else:
        job_id = 999_999
    pod = w.kube.add_pod("dp-b", finalizers=[FIN])
    result = await w.effector.apply(delete(ref(pod), job_id))
    assert (result.outcome, result.detail) == ("ok", "job ended")
    assert w.meta("dp-b")["deletionTimestamp"]  # held by our finalizer

    result = await w.effector.apply(delete(ref(pod), job_id))
    assert (result.outcome, result.detail) == ("noop", "pod is already being deleted")


async def test_delete_pod_passes_the_grace_period(w: World) -> None:
    """Issue 20 (6): a preempted job's pod is deleted with DeleteOptions.gracePeriodSeconds;
    the API server records it (deletionGracePeriodSeconds; deletionTimestamp = now + grace)."""
    job_id = job_of(w, "slurmbridge:dg")
    w.slurm.preempt_job(job_id)
    pod = w.kube.add_pod("dp-g", node_name="kn-1", finalizers=[FIN])
    action = DeletePod(
        pod=ref(pod), cluster=CLUSTER, job_id=job_id, why="preempted", grace_period_s=7
    )
    result = await w.effector.apply(action)
    assert result.outcome == "ok"
    meta = w.meta("dp-g")
    assert meta["deletionGracePeriodSeconds"] == 7
    assert meta["deletionTimestamp"]


async def test_delete_pod_of_an_orphan_asks_slurm_nothing(w: World) -> None:
    pod = w.kube.add_pod("dp-c")
    before = w.slurm.requests_total
    result = await w.effector.apply(delete(ref(pod), 0))
    assert result.outcome == "ok"
    assert w.pod("dp-c") is None
    assert w.slurm.requests_total == before


async def test_delete_pod_of_a_gone_or_replaced_pod_is_a_noop(w: World) -> None:
    result = await w.effector.apply(delete(PodRef(namespace=NS, name="dp-gone", uid="0"), 0))
    assert (result.outcome, result.detail) == ("noop", "pod is gone")

    old = w.kube.add_pod("dp-d")
    replace(w.kube, "dp-d")
    result = await w.effector.apply(delete(ref(old), 0))
    assert (result.outcome, result.detail) == ("noop", "pod is gone")
    assert w.meta("dp-d")["labels"] == {"app": "new"}
    assert not w.meta("dp-d").get("deletionTimestamp")


async def test_delete_pod_fails_closed_when_slurm_cannot_be_asked(w: World) -> None:
    pod = w.kube.add_pod("dp-e", node_name="kn-1")
    w.slurm.fail_next(1, 503)
    with pytest.raises(Transient, match="DeletePod"):
        await w.effector.apply(delete(ref(pod), 1234))
    assert w.pod("dp-e") is not None
    assert not w.meta("dp-e").get("deletionTimestamp")


# --- RemovePodFinalizer ----------------------------------------------------------------------


async def test_remove_finalizer_removes_only_that_one(w: World) -> None:
    pod = w.kube.add_pod("rf-a", finalizers=[OTHER_FIN, FIN])
    action = RemovePodFinalizer(pod=ref(pod), finalizer=FIN, why="job gone")
    result = await w.effector.apply(action)
    assert (result.outcome, result.detail) == ("ok", "job gone")
    assert w.meta("rf-a")["finalizers"] == [OTHER_FIN]

    result = await w.effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", "finalizer already removed")


async def test_removing_the_last_finalizer_lets_a_deleted_pod_go(w: World) -> None:
    pod = w.kube.add_pod("rf-b", finalizers=[FIN])
    w.kube.delete_pod("rf-b", NS)
    assert w.meta("rf-b")["deletionTimestamp"]
    result = await w.effector.apply(RemovePodFinalizer(pod=ref(pod), finalizer=FIN))
    assert result.outcome == "ok"
    assert w.pod("rf-b") is None


async def test_remove_finalizer_of_a_gone_or_replaced_pod_is_a_noop(w: World) -> None:
    result = await w.effector.apply(
        RemovePodFinalizer(pod=PodRef(namespace=NS, name="rf-gone", uid="0"), finalizer=FIN)
    )
    assert (result.outcome, result.detail) == ("noop", "pod is gone")

    old = w.kube.add_pod("rf-c", finalizers=[FIN])
    w.kube.patch_merge("pods", "rf-c", {"metadata": {"finalizers": None}}, NS)
    w.kube.delete_pod("rf-c", NS)
    w.kube.add_pod("rf-c", finalizers=[FIN])
    result = await w.effector.apply(RemovePodFinalizer(pod=ref(old), finalizer=FIN))
    assert (result.outcome, result.detail) == ("noop", "pod is gone")
    assert w.meta("rf-c")["finalizers"] == [FIN]


async def test_remove_finalizer_conflict_is_transient(w: World) -> None:
    pod = w.kube.add_pod("rf-d", finalizers=[FIN])
    w.kube.fail_next(1, 409, verb="patch", resource="pods")
    with pytest.raises(Transient) as exc:
        await w.effector.apply(RemovePodFinalizer(pod=ref(pod), finalizer=FIN))
    assert exc.value.delay == 0.1
    assert w.meta("rf-d")["finalizers"] == [FIN]


# --- SetPodCondition -------------------------------------------------------------------------


async def test_set_pod_condition_merges_by_type(w: World) -> None:
    pod = w.kube.add_pod("pc-a", phase="Running")
    ready = condition(w, "pc-a", "Ready")
    action = SetPodCondition(
        pod=ref(pod), type=SCHEDULED, status="False", reason="Waiting", message="no room"
    )
    assert (await w.effector.apply(action)).outcome == "ok"
    cond = condition(w, "pc-a", SCHEDULED)
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Waiting", "no room")
    assert condition(w, "pc-a", "Ready") == ready


async def test_set_pod_condition_of_a_gone_pod_is_a_noop(w: World) -> None:
    result = await w.effector.apply(
        SetPodCondition(
            pod=PodRef(namespace=NS, name="pc-gone", uid="0"),
            type=SCHEDULED,
            status="False",
            reason="R",
            message="m",
        )
    )
    assert (result.outcome, result.detail) == ("noop", "pod is gone")


async def test_set_pod_condition_never_writes_to_a_replaced_pod(w: World) -> None:
    old = w.kube.add_pod("pc-b")
    replace(w.kube, "pc-b")
    result = await w.effector.apply(
        SetPodCondition(pod=ref(old), type=SCHEDULED, status="False", reason=REJECTED, message="m")
    )
    assert result.outcome == "noop"
    assert condition(w, "pc-b", SCHEDULED) is None


# --- other actions, unreachable API ----------------------------------------------------------


async def test_an_action_it_does_not_handle_is_permanent(w: World) -> None:
    with pytest.raises(Permanent, match="cannot perform DrainSlurmNode"):
        await w.effector.apply(DrainSlurmNode(cluster=CLUSTER, node="n1", reason="r"))
    assert "DRAIN" not in w.slurm.node("n1").state


async def test_an_unreachable_api_server_is_transient(w: World) -> None:
    pod = w.kube.add_pod("un-a")
    await w.kube.stop()
    with pytest.raises(Transient, match="unreachable"):
        await w.effector.apply(RemovePodFinalizer(pod=ref(pod), finalizer=FIN))


async def test_set_pod_condition_moves_the_transition_time_only_when_the_status_flips(
    w: World,
) -> None:
    """Kubernetes API conventions: ``lastTransitionTime`` is when the status last changed; a
    new reason or message keeps it, the same condition again writes nothing."""
    pod = w.kube.add_pod("pc-t")
    old = "2020-01-01T00:00:00Z"
    w.kube.patch_merge(
        "pods",
        "pc-t",
        {
            "status": {
                "conditions": [
                    {
                        "type": SCHEDULED,
                        "status": "False",
                        "reason": "A",
                        "message": "a",
                        "lastTransitionTime": old,
                    }
                ]
            }
        },
        NS,
        subresource="status",
    )
    reason_b = SetPodCondition(
        pod=ref(pod), type=SCHEDULED, status="False", reason="B", message="b"
    )
    assert (await w.effector.apply(reason_b)).outcome == "ok"
    cond = condition(w, "pc-t", SCHEDULED)
    assert cond is not None
    assert (cond["reason"], cond["lastTransitionTime"]) == ("B", old)
    assert (await w.effector.apply(reason_b)).outcome == "noop"
    flip = SetPodCondition(pod=ref(pod), type=SCHEDULED, status="True", reason="", message="")
    assert (await w.effector.apply(flip)).outcome == "ok"
    cond = condition(w, "pc-t", SCHEDULED)
    assert cond is not None and cond["status"] == "True" and cond["lastTransitionTime"] != old


async def test_submits_list_slurms_jobs_once_per_epoch(w: World) -> None:
    """The submit reads no job listing: Slurm's jobs are listed once per cluster and epoch
    (Slinky slurm-bridge#45: a big queue made every placement list it); a redelivered
    submit re-reads only the job it made (``GET job/{id}``). ``relist()`` (a placement
    worker starting) opens a new epoch, which finds a job another process submitted."""
    pods = [w.kube.add_pod(f"ep-{i}", scheduler_name=SCHED) for i in range(4)]
    for i, pod in enumerate(pods[:3]):
        result = await w.effector.apply(submit(f"slurmbridge:ep{i}", ref(pod)))
        assert result.outcome == "ok"
    assert w.slurm.counters["GET jobs"] == 1
    again = await w.effector.apply(submit("slurmbridge:ep0", ref(pods[0])))
    assert again.outcome == "noop"
    assert len(w.ours("slurmbridge:ep0")) == 1
    assert w.slurm.counters["GET jobs"] == 1
    assert w.slurm.counters["GET job"] >= 1
    # Another replica submitted for a group this process now takes over.
    theirs = job_of(w, "slurmbridge:ep3")
    w.effector.relist()
    result = await w.effector.apply(submit("slurmbridge:ep3", ref(pods[3])))
    assert (result.outcome, result.detail) == ("ok", f"Slurm job {theirs}")
    assert len(w.ours("slurmbridge:ep3")) == 1
    assert w.slurm.counters["GET jobs"] == 2


# --- pod writes from the pod watch's copies (slurmbridge.kube.cache) -------------------------


def cached(w: World, *names: str) -> PodCache:
    """A pod cache holding the pods ``names`` as they are now (as the pod watch keeps them),
    given to the effector."""
    cache = PodCache()
    for name in names:
        cache.put(DECODE_POD.decode(msgspec.json.encode(w.kube.get("pods", name, NS))))
    w.effector.pod_cache = cache
    return cache


def gets(w: World) -> int:
    return w.kube.requests[("get", "pods")]


async def test_pod_writes_start_from_the_pod_caches_copy_without_a_read(w: World) -> None:
    """Issue 30: mark, condition and finalizer removal each read the pod before writing;
    with the pod watch's copy none of them reads it."""
    pod = w.kube.add_pod("cw-a", finalizers=[OTHER_FIN])
    cached(w, "cw-a")
    before = gets(w)
    mark = MarkPods(job_id=21, pods=(ref(pod),), scheduler_name=SCHED)
    assert (await w.effector.apply(mark)).outcome == "ok"
    assert is_marked(w, "cw-a", 21)
    cached(w, "cw-a")
    say = SetPodCondition(pod=ref(pod), type=SCHEDULED, status="False", reason="R", message="m")
    assert (await w.effector.apply(say)).outcome == "ok"
    cached(w, "cw-a")
    unfin = RemovePodFinalizer(pod=ref(pod), finalizer=FIN, why="job gone")
    assert (await w.effector.apply(unfin)).outcome == "ok"
    assert gets(w) == before
    assert w.meta("cw-a")["finalizers"] == [OTHER_FIN]
    cond = condition(w, "cw-a", SCHEDULED)
    assert cond is not None and (cond["reason"], cond["message"]) == ("R", "m")


async def test_a_stale_copy_is_refused_by_its_resource_version_and_the_pod_read_again(
    w: World,
) -> None:
    """The pod changed after the watch's copy: each write's precondition refuses it (409, or
    422 for the mark's JSON patch test), the pod is read from the API server, the write is
    decided again on it, and the change made meanwhile survives."""
    pod = w.kube.add_pod("cw-b", finalizers=[FIN])
    cache = cached(w, "cw-b")
    w.kube.patch_merge("pods", "cw-b", {"metadata": {"labels": {"late": "1"}}}, NS)
    say = SetPodCondition(pod=ref(pod), type=SCHEDULED, status="False", reason="R", message="m")
    before = gets(w)
    assert (await w.effector.apply(say)).outcome == "ok"
    assert gets(w) == before + 1
    assert w.effector.pod_cache is cache  # still the stale copy
    assert (
        await w.effector.apply(MarkPods(job_id=22, pods=(ref(pod),), scheduler_name=SCHED))
    ).outcome == "ok"
    assert gets(w) == before + 2
    unfin = RemovePodFinalizer(pod=ref(pod), finalizer=FIN, why="job gone")
    assert (await w.effector.apply(unfin)).outcome == "ok"
    assert gets(w) == before + 3
    meta = w.meta("cw-b")
    assert meta["labels"] == {"late": "1", JOBID: "22"}
    assert FIN not in (meta.get("finalizers") or [])
    assert condition(w, "cw-b", SCHEDULED) is not None


async def test_a_copy_that_says_nothing_is_to_write_is_checked_on_the_api_server(
    w: World,
) -> None:
    """A copy newer than the pod is now (someone undid our write after the watch saw it)
    must not make the write a noop: only the API server's pod does."""
    pod = w.kube.add_pod("cw-c", finalizers=[FIN])
    say = SetPodCondition(pod=ref(pod), type=SCHEDULED, status="False", reason="R", message="m")
    mark = MarkPods(job_id=23, pods=(ref(pod),), scheduler_name=SCHED)
    assert (await w.effector.apply(say)).outcome == "ok"
    assert (await w.effector.apply(mark)).outcome == "ok"
    cached(w, "cw-c")  # says: condition set, pod marked
    w.kube.patch_merge(
        "pods", "cw-c", {"metadata": {"labels": {JOBID: None}, "finalizers": None}}, NS
    )
    w.kube.patch_merge(
        "pods",
        "cw-c",
        {"status": {"conditions": [{"type": SCHEDULED, "status": "True"}]}},
        NS,
        subresource="status",
    )
    assert (await w.effector.apply(say)).outcome == "ok"
    assert (await w.effector.apply(mark)).outcome == "ok"
    assert is_marked(w, "cw-c", 23)
    cond = condition(w, "cw-c", SCHEDULED)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "R")
    # And a finalizer the copy still shows but the pod no longer holds: a noop, said so.
    cached(w, "cw-c")
    w.kube.patch_merge("pods", "cw-c", {"metadata": {"finalizers": None}}, NS)
    unfin = RemovePodFinalizer(pod=ref(pod), finalizer=FIN, why="job gone")
    result = await w.effector.apply(unfin)
    assert (result.outcome, result.detail) == ("noop", "finalizer already removed")


async def test_a_copy_of_a_replaced_pod_is_not_used(w: World) -> None:
    old = w.kube.add_pod("cw-d")
    cached(w, "cw-d")
    replace(w.kube, "cw-d")
    say = SetPodCondition(pod=ref(old), type=SCHEDULED, status="False", reason="R", message="m")
    result = await w.effector.apply(say)
    assert (result.outcome, result.detail) == ("noop", "pod is gone")
    assert condition(w, "cw-d", SCHEDULED) is None
