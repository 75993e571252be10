"""The poller, reconcilers and effectors against real Slurm 24.11 (REST v0.0.42) and 26.05
(REST v0.0.45).

Kubernetes is the simulator; Slurm is real
(:class:`~slurmbridge.devtools.realslurm_modern.ModernSlurm`,
one cluster per release per session). Every test restores what it changed: nodes idle and
undrained, no job left.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from schemas import wellknown
from schemas.actions import DrainSlurmNode, UndrainSlurmNode
from schemas.events import KubeNode, SlurmJob, SlurmNode, SlurmPartition, SlurmPing
from slurmbridge.devtools.realslurm_modern import ModernSlurm
from slurmbridge.devtools.sim.kube import ApiError
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import MANAGED_NODE_TOLERATION, Stack
from tests._helpers import bound_pod

MANAGED = (wellknown.TAINT_MANAGED_NODE, wellknown.DEFAULT_SCHEDULER_NAME, "NoExecute")
JOBID = wellknown.LABEL_SLURM_JOBID
API = {"24.11": "v0.0.42", "26.05": "v0.0.45"}
#: A user with no Slurm role (created in the root file system by the test).
PLAIN_USER, PLAIN_UID = "sbplain", 42425


@pytest.fixture
async def stack(modern_slurm: ModernSlurm) -> AsyncIterator[Stack]:
    async with Stack(nodes=4, real_slurm=modern_slurm, poll_interval=0.2) as s:
        yield s
    modern_slurm.run("scancel", "--user", "root", check=False)
    for node in ("n1", "n2", "n3", "n4"):
        if "drain" in modern_slurm.node_states().get(node, ""):
            modern_slurm.undrain(node)


def _node(stack: Stack, name: str) -> SlurmNode | None:
    assert stack.app is not None
    return stack.app.projection.get(SlurmNode, name)


def _pod(stack: Stack, name: str) -> dict[str, Any] | None:
    try:
        return stack.kube.get("pods", name, "default")
    except ApiError:
        return None


def _job_state(slurm: ModernSlurm, job_id: int) -> str:
    out = slurm.run("scontrol", "-o", "show", "job", str(job_id), check=False).stdout
    for field in out.split():
        if field.startswith("JobState="):
            return field.split("=", 1)[1]
    return ""


async def _idle(stack: Stack, slurm: ModernSlurm, node: str) -> None:
    # After RESUME/UNDRAIN a node reads IDLE+NOT_RESPONDING for up to ~1 s.
    await stack.wait_for(lambda: slurm.node_states().get(node) == "idle", what=f"{node} idle")
    # The undrain's action record is published after slurmctld answered: callers read it.
    await stack.settled()


async def hold_with_a_job(stack: Stack, slurm: ModernSlurm, node: str, *, what: str) -> str:
    """Submit a real job that holds ``node`` and wait until Slurm shows the node allocated or
    mixed (``what``: the wait's name); the job id. The job is an ``EXTERNAL_JOB`` allocation
    (26.05): a ``State=External`` node has no slurmd to run a batch script."""
    body = {
        "job": {
            "name": "busy",
            "tasks": 1,
            "required_nodes": [node],
            "current_working_directory": "/tmp",
            "environment": ["PATH=/bin"],
            "flags": ["EXTERNAL_JOB"],
        }
    }
    async with httpx.AsyncClient(base_url=slurm.url) as http:
        resp = await http.post("/slurm/v0.0.45/job/submit", json=body, headers=slurm.auth_headers)
    job_id = str(resp.json()["job_id"])
    await stack.wait_for(
        lambda: slurm.node_states().get(node, "").startswith(("alloc", "mix")),
        timeout=30,
        what=what,
    )
    return job_id


async def test_nodes_partitions_and_ping_are_observed(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    assert stack.app is not None
    client = stack.app.slurm_client
    assert client is not None
    proj = stack.app.projection
    await stack.wait_for(lambda: len(list(proj.values(SlurmNode))) == 4, what="4 Slurm nodes")
    assert client.api_version == API[modern_slurm.release]
    for name in ("n1", "n2", "n3", "n4"):
        n = _node(stack, name)
        assert n is not None
        assert n.base_state == "IDLE", n.state
        assert (n.cpus, n.real_memory) == (2, 1000)
    parts = {p.key: p for p in proj.values(SlurmPartition)}
    assert parts["batch"].nodes == ("n1", "n2", "n3", "n4")
    assert parts["gpu"].nodes == ("n1", "n2")
    # A poll publishes its listings before its ping: the nodes can be in before it.
    await stack.wait_for(
        lambda: proj.get(SlurmPing, "default") is not None, what="the ping of cluster default"
    )
    ping = proj.get(SlurmPing, "default")
    assert ping is not None
    assert ping.responding, ping.error
    for name in ("n1", "n2", "n3", "n4"):
        await stack.wait_for(lambda n=name: MANAGED in stack.taints(n), what=f"{name} tainted")


async def test_cordon_drains_and_uncordon_undrains_over_rest(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    stack.cordon("n2")
    await stack.wait_for(
        lambda: "drain" in modern_slurm.node_states().get("n2", ""), what="n2 drained in Slurm"
    )
    shown = modern_slurm.scontrol("-o", "show", "node", "n2")
    assert "Reason=slurm-bridge: Corresponding Kubernetes node (n2) is unschedulable" in shown
    stack.uncordon("n2")
    await _idle(stack, modern_slurm, "n2")
    records = await stack.action_records()
    kinds = [(type(r.action).__name__, r.outcome) for r in records if r.key == "n2"]
    assert ("DrainSlurmNode", "ok") in kinds
    assert ("UndrainSlurmNode", "ok") in kinds
    assert await stack.dead_letters() == []


async def test_an_administrators_drain_is_never_undone(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    modern_slurm.admin_drain("n3", "admin: replace fan")
    try:
        await stack.wait_for(
            lambda: (n := _node(stack, "n3")) is not None and n.has("DRAIN"),
            what="n3 DRAIN observed",
        )
        stack.cordon("n3")
        await stack.settled()
        stack.uncordon("n3")
        await stack.settled()
        assert stack.app is not None and stack.app.poller is not None
        poller = stack.app.poller
        polls = poller.polls
        await stack.wait_for(lambda: poller.polls >= polls + 3, what="three more polls")
        await stack.settled()
        assert "drain" in modern_slurm.node_states()["n3"]
        assert "Reason=admin: replace fan" in modern_slurm.scontrol("-o", "show", "node", "n3")
        recs = [r for r in await stack.action_records() if r.key == "n3"]
        assert not any(isinstance(r.action, UndrainSlurmNode) for r in recs)
        assert not any(isinstance(r.action, DrainSlurmNode) and r.outcome == "ok" for r in recs), (
            "the administrator's reason is never overwritten"
        )
    finally:
        modern_slurm.undrain("n3")
        await _idle(stack, modern_slurm, "n3")


@pytest.mark.parametrize("relist", [0, 2], ids=["full-listing-every-poll", "jobs-state"])
async def test_quiet_polls_publish_nothing_and_never_tombstone_a_running_job(
    modern_slurm: ModernSlurm, relist: int
) -> None:
    """Finding 1: a conditional job listing with no change is HTTP 200 with no jobs on
    24.11/26.05; read as a listing it tombstoned every job, running ones included.
    ``relist`` 0: every poll lists jobs with ``update_time`` (the path that broke); 2: polls
    read ``jobs/state`` between full listings every 2 s (the default mode, sped up). Slurm
    moves its job change time for a few seconds after a job starts (scheduler passes), so
    the quiet answers come only after that: 40 polls (8 s) cover it."""
    settings = {"slurm": {"jobRelistInterval": relist}}
    async with Stack(nodes=4, real_slurm=modern_slurm, poll_interval=0.2, settings=settings) as s:
        try:
            await _quiet_polls(s, modern_slurm)
        finally:
            modern_slurm.run("scancel", "--user", "root", check=False)


async def _quiet_polls(stack: Stack, modern_slurm: ModernSlurm) -> None:
    out = modern_slurm.run(
        "sbatch", "--parsable", "-N1", "-w", "n4", "-o", "/dev/null", "--wrap", "sleep 300"
    ).stdout
    job_id = out.strip().split(";")[0]
    assert stack.app is not None and stack.app.poller is not None
    proj = stack.app.projection
    await stack.wait_for(
        lambda: (
            (j := proj.get(SlurmJob, job_id, "slurm:default")) is not None
            and j.base_state == "RUNNING"
        ),
        timeout=30,
        what="the running job observed",
    )
    # n4's own state follows the job a moment later (alloc_cpus, MIXED): wait for it too.
    await stack.wait_for(
        lambda: (
            (n := proj.get(SlurmNode, "n4", "slurm:default")) is not None
            and n.base_state in ("MIXED", "ALLOCATED")
        ),
        timeout=30,
        what="n4 busy in the log",
    )
    await stack.settled()
    poller = stack.app.poller
    # A job an earlier test ended leaves slurmctld MinJobAge (60 s on the rig) after it ended,
    # which may fall in this window: its tombstone is a real change. Anything else is not.
    ended = {
        j.key
        for j in proj.values(SlurmJob)
        if j.key != job_id and j.base_state not in ("PENDING", "RUNNING", "SUSPENDED")
    }
    before = len(await stack.observations())
    polls = poller.polls
    await stack.wait_for(lambda: poller.polls >= polls + 40, timeout=60, what="40 quiet polls")
    after = await stack.observations()
    news = [json.loads(raw) for raw in after[before:]]
    unexpected = [
        e
        for e in news
        if not (e["kind"] == "SlurmJob" and e["op"] == "deleted" and e["key"] in ended)
    ]
    assert not unexpected, unexpected
    running = proj.get(SlurmJob, job_id, "slurm:default")
    assert running is not None and running.base_state == "RUNNING"
    job = proj.get(SlurmJob, job_id, "slurm:default")
    assert job is not None and job.op == "observed" and job.base_state == "RUNNING"


async def test_pods_are_placed_bound_and_cleaned_up(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    """26.05: an EXTERNAL_JOB placeholder; 24.11 (no EXTERNAL_JOB): a sleeping batch job."""
    (name,) = create_group(stack.kube, "Pod", "real-ok", 1, requests={"cpu": "1"}, run_seconds=2)
    p, job_id = await bound_pod(stack, name)
    node = p["spec"]["nodeName"]
    shown = modern_slurm.scontrol("-o", "show", "job", str(job_id))
    assert f"NodeList={node}" in shown
    assert "Comment=slurmbridge:" in shown
    assert 'AdminComment={"pods":["default/real-ok"]}' in shown
    if modern_slurm.release == "26.05":
        assert "BatchFlag=0" in shown, "an EXTERNAL_JOB runs nothing"
    else:
        assert "BatchFlag=1" in shown
    await stack.wait_for(
        lambda: _job_state(modern_slurm, job_id) in ("CANCELLED", "COMPLETED", ""),
        timeout=60,
        what="job ended in real Slurm once the pod completed",
    )
    await stack.wait_for(
        lambda: (
            wellknown.FINALIZER_SCHEDULER
            not in ((_pod(stack, name) or {}).get("metadata", {}).get("finalizers") or [])
        ),
        timeout=30,
        what="finalizer removed",
    )
    assert await stack.dead_letters() == []


async def test_scancel_deletes_the_pod(stack: Stack, modern_slurm: ModernSlurm) -> None:
    (name,) = create_group(stack.kube, "Pod", "real-scancel", 1, requests={"cpu": "1"})
    _, job_id = await bound_pod(stack, name)
    modern_slurm.scancel(str(job_id))
    await stack.wait_for(lambda: _pod(stack, name) is None, timeout=60, what="pod deleted")
    assert _job_state(modern_slurm, job_id) in ("CANCELLED", "")


@dataclass(frozen=True)
class _UserEndpoint:
    """The modern cluster's slurmrestd with a plain user's token (no X-SLURM-USER-NAME)."""

    url: str
    token_file: Path
    user: str = ""


async def test_a_plain_users_token_places_pods_and_is_refused_node_updates(
    modern_slurm: ModernSlurm, tmp_path: Path
) -> None:
    """Finding 2: admin_comment needs an operator (2002), and the client retried it for ever.
    With a plain user's token placeholder jobs go without it (ownership is the comment), and
    a node drain is refused for good (Forbidden: dead letter naming the role), not retried."""
    modern_slurm.add_user(PLAIN_USER, PLAIN_UID)
    token = tmp_path / "token"
    token.write_text(modern_slurm.token_for(PLAIN_USER) + "\n")
    endpoint = _UserEndpoint(url=modern_slurm.url, token_file=token)
    settings = {"worker": {"maxDeliver": 3}}
    async with Stack(nodes=4, real_slurm=endpoint, poll_interval=0.2, settings=settings) as s:
        try:
            (name,) = create_group(s.kube, "Pod", "plain", 1, requests={"cpu": "1"}, run_seconds=2)
            _, job_id = await bound_pod(s, name)
            shown = modern_slurm.scontrol("-o", "show", "job", str(job_id))
            assert f"UserId={PLAIN_USER}(" in shown
            assert "Comment=slurmbridge:" in shown
            assert "AdminComment=" not in shown or "AdminComment=(null)" in shown
            await s.wait_for(
                lambda: _job_state(modern_slurm, job_id) in ("CANCELLED", "COMPLETED", ""),
                timeout=60,
                what="the plain user's job cancelled when the pod completed",
            )
            s.cordon("n4")
            deadline = time.monotonic() + 60
            while not (letters := [d for d in await s.dead_letters() if d.subject.endswith("n4")]):
                assert time.monotonic() < deadline, "the refused drain was not dead-lettered"
                await asyncio.sleep(0.1)
            # 24.11.5 and 26.05.5 answer a plain user's node update with 2010 "Invalid user
            # id" (ESLURM_USER_ID_MISSING).
            assert "error_number 2010" in letters[0].reason, letters[0].reason
            assert "operator or administrator role" in letters[0].reason
            drains = [r for r in await s.action_records() if isinstance(r.action, DrainSlurmNode)]
            assert [r.outcome for r in drains] == ["failed"], "refused once, never retried"
            assert "drain" not in modern_slurm.node_states()["n4"]
        finally:
            modern_slurm.run("scancel", "--user", PLAIN_USER, check=False)


async def test_a_group_bigger_than_its_partition_is_not_submitted_and_says_why(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    """Three pods of 2 CPUs in partition gpu (two 2-CPU nodes). Before Slinky 1.3 the job was
    submitted and Slurm answered for it (24.11 refused the batch placeholder with 2014, 26.05
    left the EXTERNAL_JOB PENDING for PartitionConfig); with 1.3's rule (slurm-bridge
    eligibility.go: fewer eligible nodes than the group needs) nothing is submitted, on
    either release: the pods say why (PodScheduled=False, SlurmNodesIneligible, a Warning
    Event) and no submit follows in the next ten polls."""
    names = create_group(
        stack.kube,
        "Job",
        "too-big",
        3,
        annotations={"slurmjob.slinky.slurm.net/partition": "gpu"},
        requests={"cpu": "2"},
    )

    def said() -> bool:
        conds = [
            c
            for n in names
            for c in (((_pod(stack, n) or {}).get("status") or {}).get("conditions") or [])
            if c.get("type") == "PodScheduled"
        ]
        return len(conds) == 3 and all(c["reason"] == "SlurmNodesIneligible" for c in conds)

    await stack.wait_for(said, timeout=60, what="PodScheduled=False on the pods")
    p = _pod(stack, names[0])
    assert p is not None
    cond = next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["status"] == "False"
    events = [
        e for e in stack.kube.list("events", "default") if e.get("reason") == "SlurmNodesIneligible"
    ]
    assert events and all(e["type"] == "Warning" for e in events)
    await stack.settled()
    assert stack.app is not None and stack.app.poller is not None
    polls = stack.app.poller.polls
    await stack.wait_for(lambda: stack.app.poller.polls >= polls + 10, what="ten polls")
    await stack.settled()
    submits = [
        r
        for r in await stack.action_records()
        if r.key == "default/Job:too-big" and type(r.action).__name__ == "SubmitSlurmJob"
    ]
    assert submits == []
    assert not any(
        JOBID in ((_pod(stack, n) or {}).get("metadata") or {}).get("labels", {}) for n in names
    )
    assert await stack.dead_letters() == []


async def test_an_external_node_is_registered_repartitioned_and_removed(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    """26.05 (``POST new/node/``): a labelled Kubernetes node becomes a ``State=External``
    Slurm node with its partitions as features; new partitions re-register it (Slurm does not
    move a dynamic node on a feature update); the label removed, it is drained and deleted.
    24.11 has no ``new/node/``: the creation is recorded once as unsupported."""
    ext = {wellknown.LABEL_EXTERNAL_NODE: "true"}
    parts = wellknown.ANNOTATION_EXTERNAL_NODE_PARTITIONS
    stack.kube.add_node("ext-a", cpu="2", memory="1000Mi", labels=ext, annotations={parts: "batch"})
    if modern_slurm.release == "24.11":
        await stack.settled()
        deadline = time.monotonic() + 30
        while not [r for r in await stack.action_records() if r.key == "ext-a"]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        recs = [r for r in await stack.action_records() if r.key == "ext-a"]
        creates = [r.outcome for r in recs if type(r.action).__name__ == "CreateSlurmNode"]
        assert creates == ["unsupported"]
        # Decided after the first complete listing: no false "Slurm has no partition batch".
        assert not any("PartitionNotFound" in str(r.action) for r in recs)
        assert "ext-a" not in modern_slurm.node_states()
        return

    def shown() -> str:
        return modern_slurm.run("scontrol", "-o", "show", "node", "ext-a", check=False).stdout

    await stack.wait_for(lambda: "NodeName=ext-a" in shown(), timeout=30, what="ext-a created")
    assert "State=IDLE+DYNAMIC_NORM+EXTERNAL" in shown()
    # Slinky 1.3 (AddNode): the GRES-compatibility feature first, then the partitions.
    assert "AvailableFeatures=slurm_bridge_gres_compatible,batch " in shown()
    assert "Partitions=batch " in shown()
    stack.kube.patch_merge("nodes", "ext-a", {"metadata": {"annotations": {parts: "batch,gpu"}}})
    await stack.wait_for(
        lambda: "Partitions=batch,gpu " in shown(), timeout=60, what="ext-a in gpu too"
    )
    assert "AvailableFeatures=slurm_bridge_gres_compatible,batch,gpu " in shown()
    assert "DRAIN" not in shown().split("State=")[1].split()[0]
    stack.kube.patch_merge(
        "nodes", "ext-a", {"metadata": {"labels": {wellknown.LABEL_EXTERNAL_NODE: None}}}
    )
    await stack.wait_for(lambda: "NodeName=ext-a" not in shown(), timeout=60, what="deleted")
    # The delete's record is published after slurmctld answered: read once it is in.
    await stack.settled()
    recs = [
        (type(r.action).__name__, r.outcome)
        for r in await stack.action_records()
        if r.key == "ext-a" and type(r.action).__name__ != "RecordEvent"
    ]
    assert [a for a, o in recs if o == "ok"].count("CreateSlurmNode") == 2
    assert [a for a, o in recs if o == "ok"].count("DeleteSlurmNode") == 2
    assert await stack.dead_letters() == []


class _RealSlurmdRegistrar:
    """Plays slurmd for NodeSet pods against a real cluster: a Running slurmd pod becomes a
    dynamic ``State=External`` node named by its hostname (``spec.hostname``: the pod name in
    StatefulSet mode, the node's hostname in DaemonSet mode; else the pod name), as
    ``slurmd -Z`` would register one, without a daemon to run; a deleted pod's node is
    deleted; a pod deleted while its node runs a job is recorded in :attr:`removed_busy`
    (what the NodeSet reconciler must never cause)."""

    def __init__(self, stack: Stack, slurm: ModernSlurm) -> None:
        self.stack, self.slurm = stack, slurm
        self.removed_busy: list[str] = []

    def attach(self) -> None:
        self.stack.kube.on_write.append(self._on_write)

    def detach(self) -> None:
        self.stack.kube.on_write.remove(self._on_write)

    def _on_write(self, change: Any) -> None:
        if change.resource.name != "pods":
            return
        meta = change.object.get("metadata") or {}
        if (meta.get("labels") or {}).get("app.kubernetes.io/name") != "slurmd":
            return
        # slurmd registers under its host's name (Slurm: NodeName defaults to the short
        # hostname), and a pod's hostname is spec.hostname, else its name (Kubernetes API
        # reference, PodSpec ``hostname``).
        name = str((change.object.get("spec") or {}).get("hostname") or meta["name"])
        known = (
            f"NodeName={name} "
            in self.slurm.run("scontrol", "-o", "show", "node", name, check=False).stdout
        )
        if change.type == "DELETED":
            if known:
                states = self.slurm.node_states().get(name, "")
                if states.startswith(("alloc", "mix", "comp")):
                    self.removed_busy.append(name)
                self.slurm.run("scontrol", "delete", f"nodename={name}", check=False)
            return
        phase = (change.object.get("status") or {}).get("phase")
        if phase == "Running" and not meta.get("deletionTimestamp") and not known:
            # NodeAddr: without it slurmctld resolves the pod's name, retrying for seconds with
            # its locks held (sinfo then times out: "Socket timed out on send/recv").
            self.slurm.scontrol(
                "create",
                f"NodeName={name}",
                "NodeAddr=127.0.0.1",
                "NodeHostname=localhost",
                "CPUs=2",
                "RealMemory=1000",
                "State=External",
                "Feature=batch",
            )


async def test_nodeset_scale_in_drains_and_deletes_a_pod_only_when_its_node_is_idle(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    """slurm-operator's scale-in on real Slurm: every condemned node is drained over REST with
    the operator's reason; the idle one's pod is deleted at once, the busy one's only after
    its job ended. (26.05 only: 24.11 creates dynamic nodes as FUTURE/CLOUD only.)"""
    if modern_slurm.release == "24.11":
        pytest.skip("24.11 cannot create State=External nodes (no new/node, scontrol refuses)")
    ns = "slurm"
    registrar = _RealSlurmdRegistrar(stack, modern_slurm)
    registrar.attach()
    stack.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    stack.kube.create(
        {
            "apiVersion": "slinky.slurm.net/v1alpha1",
            "kind": "NodeSet",
            "metadata": {"name": "rs", "namespace": ns},
            "spec": {
                "replicas": 2,
                "serviceName": "slurmd",
                # The bridge taints its nodes NoExecute once it sees them in Slurm: without
                # the toleration the kubelet refuses a pod that lands after the taint.
                "template": {
                    "spec": {
                        "containers": [{"name": "slurmd", "image": "slurmd:26.05"}],
                        "tolerations": [MANAGED_NODE_TOLERATION],
                    }
                },
            },
        }
    )

    def live() -> set[str]:
        return {
            p["metadata"]["name"]
            for p in stack.kube.list("pods", ns)
            if not p["metadata"].get("deletionTimestamp")
        }

    try:
        await stack.wait_for(
            lambda: {"rs-0", "rs-1"} <= set(modern_slurm.node_states()),
            timeout=30,
            what="two slurmd pods registered in Slurm",
        )
        job_id = await hold_with_a_job(stack, modern_slurm, "rs-1", what="rs-1 running the job")
        stack.kube.patch("nodesets", "rs", {"spec": {"replicas": 0}}, ns, subresource="scale")
        await stack.wait_for(lambda: "rs-0" not in live(), timeout=60, what="idle rs-0 deleted")
        # rs-1's drain is effected beside rs-0's delete, not necessarily before it.
        await stack.wait_for(
            lambda: (
                "DRAIN"
                in modern_slurm.scontrol("-o", "show", "node", "rs-1").split("State=")[1].split()[0]
            ),
            timeout=30,
            what="busy rs-1 drained",
        )
        shown = modern_slurm.scontrol("-o", "show", "node", "rs-1")
        assert "DRAIN" in shown.split("State=")[1].split()[0], shown
        assert "Reason=slurm-operator: Pod (slurm/rs-1) is pending termination for scale-in" in (
            shown
        )
        await stack.settled()
        assert "rs-1" in live(), "a pod whose Slurm node runs a job is never deleted"
        modern_slurm.scancel(job_id)
        await stack.wait_for(lambda: "rs-1" not in live(), timeout=60, what="rs-1 deleted")
        assert registrar.removed_busy == []
        drains = [r for r in await stack.action_records() if isinstance(r.action, DrainSlurmNode)]
        assert {r.action.node for r in drains if r.outcome == "ok"} == {"rs-0", "rs-1"}
    finally:
        registrar.detach()
        for name in ("rs-0", "rs-1"):
            modern_slurm.run("scontrol", "delete", f"nodename={name}", check=False)


def _scheduled(stack: Stack, name: str) -> dict[str, Any]:
    for c in ((_pod(stack, name) or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return dict(c)
    return {}


async def test_a_waiting_pod_names_slurms_reason_and_place_then_runs(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    """Real slurmctld's pending reason and queue reach the pod (issue 20): a batch job holds
    every node, our placeholder waits behind it with Slurm's own reason, then runs."""
    filler = modern_slurm.run(
        "sbatch", "--parsable", "-N", "4", "--exclusive", "-p", "batch", "--wrap", "sleep 600"
    ).stdout.strip()
    filler_id = int(filler.split(";")[0])
    await stack.wait_for(
        lambda: _job_state(modern_slurm, filler_id) == "RUNNING", timeout=30, what="filler runs"
    )
    (name,) = create_group(stack.kube, "Pod", "real-wait", 1, requests={"cpu": "1"})
    await stack.wait_for(
        lambda: _scheduled(stack, name).get("reason") == wellknown.REASON_SLURM_JOB_PENDING,
        timeout=60,
        what="PodScheduled=False, reason SlurmJobPending",
    )
    p = _pod(stack, name)
    assert p is not None
    job_id = int(p["metadata"]["labels"][JOBID])
    # The message is the reason real slurmctld gives (squeue %r) and the job's place: first,
    # as the filler runs and nothing else waits.
    reason = modern_slurm.run("squeue", "-h", "-j", str(job_id), "-o", "%r").stdout.strip()
    assert reason in ("Resources", "Priority"), reason
    await stack.wait_for(
        lambda: _scheduled(stack, name).get("message") == f"{reason}, 1st in partition batch",
        timeout=30,
        what=f"message {reason!r}, 1st in partition batch",
    )
    assert _scheduled(stack, name)["status"] == "False"
    modern_slurm.scancel(str(filler_id))
    await stack.wait_for(
        lambda: bool(((_pod(stack, name) or {}).get("spec") or {}).get("nodeName")),
        timeout=60,
        what="pod bound once the filler ended",
    )
    assert await stack.dead_letters() == []


def _create_pod(stack: Stack, name: str, **spec: Any) -> None:
    body: dict[str, Any] = {
        "schedulerName": wellknown.DEFAULT_SCHEDULER_NAME,
        "containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": "1"}}}],
        **spec,
    }
    stack.kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": body,
        }
    )


async def test_kubernetes_filters_pick_the_node_slurm_may_use(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    """Issue 20 (1) on real slurmctld: a nodeSelector matching only n3 runs the pod on n3
    (the other nodes reach Slurm as the job's ExcNodeList); a pod tolerating nothing is never
    bound to a tainted node."""
    stack.kube.patch("nodes", "n3", {"metadata": {"labels": {"disk": "ssd"}}})
    taint = {"key": "dedicated", "value": "other", "effect": "NoSchedule"}
    for n in ("n1", "n2"):
        stack.kube.patch("nodes", n, {"spec": {"taints": [taint]}})
    assert stack.app is not None
    proj = stack.app.projection
    await stack.wait_for(
        lambda: (
            all(
                (k := proj.get(KubeNode, n, "k8s")) is not None
                and any(t.key == "dedicated" for t in k.taints)
                for n in ("n1", "n2")
            )
            and (k3 := proj.get(KubeNode, "n3", "k8s")) is not None
            and k3.labels.get("disk") == "ssd"
        ),
        what="the label and taints observed",
    )
    _create_pod(stack, "real-ssd", nodeSelector={"disk": "ssd"})
    await stack.wait_for(
        lambda: bool(((_pod(stack, "real-ssd") or {}).get("spec") or {}).get("nodeName")),
        timeout=60,
        what="the ssd pod bound",
    )
    p = _pod(stack, "real-ssd")
    assert p is not None
    assert p["spec"]["nodeName"] == "n3"
    shown = modern_slurm.scontrol("-o", "show", "job", p["metadata"]["labels"][JOBID])
    assert "NodeList=n3" in shown
    assert "ExcNodeList=n[1-2,4]" in shown, shown
    _create_pod(stack, "real-plain")
    await stack.wait_for(
        lambda: bool(((_pod(stack, "real-plain") or {}).get("spec") or {}).get("nodeName")),
        timeout=60,
        what="the plain pod bound",
    )
    p = _pod(stack, "real-plain")
    assert p is not None
    assert p["spec"]["nodeName"] == "n4", "n1 and n2 are tainted, n3 holds the ssd pod"
    assert await stack.dead_letters() == []


async def test_a_workload_api_gang_of_4_waits_for_its_pods_then_is_one_real_job(
    modern_slurm: ModernSlurm,
) -> None:
    """Issue 20 (2) on real slurmctld: a scheduling.k8s.io/v1beta1 PodGroup with minCount 4
    submits nothing while 3 pods exist, then one job holding the 4 nodes; every pod is bound
    under it and the PodGroup is marked scheduled."""
    from tests.integration.test_workload_api_e2e import PODGROUPS, gang, job_pod, serve

    async with Stack(
        nodes=4, real_slurm=modern_slurm, poll_interval=0.2, setup=serve("v1beta1")
    ) as stack:
        try:
            job = gang(stack.kube, "v1beta1", "rgang", 4)
            # The rig has no accounting: no QOS to name.
            stack.kube.patch(
                PODGROUPS,
                "rgang-workers",
                {"metadata": {"annotations": {wellknown.ANNOTATION_SLURMJOB_PREFIX + "qos": None}}},
                "default",
            )
            names = [job_pod(stack.kube, job, i, "rgang-workers", run_s=30) for i in range(3)]
            await stack.settled(timeout=30)

            def ours() -> list[str]:
                out = modern_slurm.run("squeue", "-h", "-o", "%i %k").stdout.split("\n")
                return [ln.split()[0] for ln in out if "slurmbridge:" in ln]

            assert ours() == [], "3 of minCount 4: no job in Slurm"
            names.append(job_pod(stack.kube, job, 3, "rgang-workers", run_s=30))
            await stack.wait_for(
                lambda: all(
                    ((_pod(stack, n) or {}).get("spec") or {}).get("nodeName") for n in names
                ),
                timeout=60,
                what="the 4 pods bound",
            )
            (job_id,) = ours()
            pods = [_pod(stack, n) or {} for n in names]
            assert {p["metadata"]["labels"][JOBID] for p in pods} == {job_id}
            assert sorted(p["spec"]["nodeName"] for p in pods) == ["n1", "n2", "n3", "n4"]
            shown = modern_slurm.scontrol("-o", "show", "job", job_id)
            assert "NumNodes=4" in shown and "JobName=rgang-gang" in shown, shown
            await stack.wait_for(
                lambda: any(
                    c["type"] == "PodGroupInitiallyScheduled" and c["status"] == "True"
                    for c in (
                        stack.kube.get(PODGROUPS, "rgang-workers", "default").get("status") or {}
                    ).get("conditions")
                    or []
                ),
                timeout=30,
                what="PodGroupInitiallyScheduled=True",
            )
            assert await stack.dead_letters() == []
        finally:
            modern_slurm.run("scancel", "--user", "root", check=False)
