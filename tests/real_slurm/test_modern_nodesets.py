"""NodeSet rules against real Slurm 26.05 (REST v0.0.45): cordon sync, a rolling update that
never deletes a pod whose node runs a job, ScheduledUpdate's MAINT reservation, DaemonSet
mode following node labels, and ``spec.partition`` made, changed and deleted over REST.

Kubernetes is the simulator; each slurmd pod is played by a dynamic ``State=External`` node
of its name (``_RealSlurmdRegistrar`` of test_modern_pipeline.py). 24.11 is skipped: it
cannot create such nodes (no ``new/node``; scontrol creates FUTURE/CLOUD nodes only), and its
REST API (v0.0.40-v0.0.42) cannot create reservations (``POST reservation`` is v0.0.43+).
Every test deletes its NodeSet's Slurm nodes and reservation before it ends.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas import wellknown
from schemas.actions import (
    DeleteNodeSetPod,
    DrainSlurmNode,
    EnsureSlurmReservation,
    UndrainSlurmNode,
)
from schemas.events import SlurmNode
from slurmbridge.devtools.realslurm_modern import ModernSlurm
from slurmbridge.devtools.testing import MANAGED_NODE_TOLERATION, Stack
from tests.real_slurm.test_modern_pipeline import _RealSlurmdRegistrar, hold_with_a_job

NS = "slurm"
NO_EXTERNAL_NODES = "24.11 cannot create State=External nodes (no new/node, scontrol refuses)"
#: The Slurm node names of the DaemonSet test's pods (its nodes' hostname-override).
DS_HOSTS = ("ds1", "ds2", "ds3")


@pytest.fixture
async def stack(modern_slurm: ModernSlurm) -> AsyncIterator[Stack]:
    if modern_slurm.release == "24.11":
        pytest.skip(NO_EXTERNAL_NODES)
    async with Stack(nodes=4, real_slurm=modern_slurm, poll_interval=0.2) as s:
        s.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        registrar = _RealSlurmdRegistrar(s, modern_slurm)
        registrar.attach()
        try:
            yield s
            assert registrar.removed_busy == [], "a pod whose Slurm node ran a job was deleted"
        finally:
            registrar.detach()
            modern_slurm.run("scancel", "--user", "root", check=False)
            modern_slurm.run("scontrol", "delete", "reservation=SlurmOperatorMaint-rs", check=False)
            modern_slurm.run("scontrol", "delete", "partition=rs", check=False)
            for name in ("rs-0", "rs-1", *DS_HOSTS):
                modern_slurm.run("scontrol", "delete", f"nodename={name}", check=False)
    for node in ("n1", "n2", "n3", "n4"):
        if "drain" in modern_slurm.node_states().get(node, ""):
            modern_slurm.undrain(node)


def _nodeset(replicas: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "slinky.slurm.net/v1beta1",
        "kind": "NodeSet",
        "metadata": {"name": "rs", "namespace": NS},
        "spec": {
            "replicas": replicas,
            "template": {
                "spec": {
                    "containers": [{"name": "slurmd", "image": "slurmd:26.05"}],
                    "tolerations": [MANAGED_NODE_TOLERATION],
                }
            },
            **spec,
        },
    }


def _pods(stack: Stack) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["name"]: p
        for p in stack.kube.list("pods", NS)
        if not p["metadata"].get("deletionTimestamp")
    }


def _running(stack: Stack) -> set[str]:
    return {n for n, p in _pods(stack).items() if (p.get("status") or {}).get("phase") == "Running"}


def _revision(pod: dict[str, Any]) -> str:
    return str(pod["metadata"].get("labels", {}).get(wellknown.LABEL_REVISION_HASH, ""))


def _condition(stack: Stack, pod: str, kind: str) -> dict[str, Any] | None:
    for c in ((_pods(stack).get(pod) or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def _shown(slurm: ModernSlurm, node: str) -> str:
    return slurm.run("scontrol", "-o", "show", "node", node, check=False).stdout


def _reason(slurm: ModernSlurm, node: str) -> str:
    out = _shown(slurm, node)
    return out.split("Reason=", 1)[1].split(" [", 1)[0].strip() if "Reason=" in out else ""


def _drained(slurm: ModernSlurm, node: str) -> bool:
    return "drain" in slurm.node_states().get(node, "")


async def _registered(stack: Stack, slurm: ModernSlurm, names: set[str]) -> None:
    await stack.wait_for(
        lambda: names <= set(slurm.node_states()) and names <= _running(stack),
        timeout=30,
        what=f"{sorted(names)} Running and registered in Slurm",
    )


async def test_a_cordoned_nodes_slurmd_pod_drains_with_the_operators_reason(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    """slurm-operator nodeset_sync.go ``syncCordon`` / ``syncPodUncordon`` on real Slurm: a
    cordoned Kubernetes node's slurmd pod's Slurm node is drained with the operator's reason,
    which the pod's ``SlurmNodeStateDrain`` condition shows; uncordon undrains; an
    administrator's drain is neither overwritten by a cordon nor undone by an uncordon."""
    stack.kube.create(_nodeset(1))
    await _registered(stack, modern_slurm, {"rs-0"})
    kube_node = str(_pods(stack)["rs-0"]["spec"]["nodeName"])
    reason = wellknown.node_cordon_drain_reason(kube_node, NS, "rs-0")

    stack.cordon(kube_node)
    await stack.wait_for(
        lambda: _drained(modern_slurm, "rs-0") and _reason(modern_slurm, "rs-0") == reason,
        timeout=30,
        what="rs-0 drained in Slurm with the operator's reason",
    )
    await stack.wait_for(
        lambda: (
            (c := _condition(stack, "rs-0", "SlurmNodeStateDrain")) is not None
            and c.get("status") == "True"
            and c.get("message") == reason
        ),
        timeout=30,
        what="rs-0's SlurmNodeStateDrain condition with the reason",
    )
    stack.uncordon(kube_node)
    await stack.wait_for(
        lambda: not _drained(modern_slurm, "rs-0"), timeout=30, what="rs-0 undrained"
    )
    await stack.wait_for(
        lambda: _condition(stack, "rs-0", "SlurmNodeStateDrain") is None,
        timeout=30,
        what="the Drain condition removed",
    )

    # An administrator's drain (scontrol) is never overwritten nor undone.
    def changes() -> int:
        return sum(
            1
            for r in records
            if isinstance(r.action, DrainSlurmNode | UndrainSlurmNode)
            and r.action.node == "rs-0"
            and r.outcome == "ok"
        )

    records = await stack.action_records()
    ours = changes()
    assert ours >= 2, "the cordon's drain and the uncordon's undrain"
    modern_slurm.admin_drain("rs-0", "admin: replace fan")
    assert stack.app is not None
    proj = stack.app.projection
    await stack.wait_for(
        lambda: (n := proj.get(SlurmNode, "rs-0")) is not None and n.reason == "admin: replace fan",
        timeout=30,
        what="the administrator's drain observed",
    )
    stack.cordon(kube_node)
    await stack.settled()
    stack.uncordon(kube_node)
    await stack.settled()
    assert stack.app.poller is not None
    poller = stack.app.poller
    polls = poller.polls
    await stack.wait_for(lambda: poller.polls >= polls + 3, what="three more polls")
    await stack.settled()
    assert _drained(modern_slurm, "rs-0")
    assert _reason(modern_slurm, "rs-0") == "admin: replace fan"
    records = await stack.action_records()
    assert changes() == ours, "the administrator's drain was overwritten or undone"
    assert await stack.dead_letters() == []


async def test_a_template_change_rolls_one_pod_at_a_time_and_waits_for_a_running_job(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    """RollingUpdate, maxUnavailable 1 (nodeset_sync.go ``syncRollingUpdate``), on real
    Slurm: the idle pod is replaced first; the pod whose node runs a real batch job is
    drained with the pending-termination reason and replaced only after the job ended."""
    stack.kube.create(
        _nodeset(
            2, updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
        )
    )
    await _registered(stack, modern_slurm, {"rs-0", "rs-1"})
    first = _revision(_pods(stack)["rs-0"])
    assert first and _revision(_pods(stack)["rs-1"]) == first
    # A real job holding rs-1: an external node has no slurmd to run a batch script, so the
    # job is an EXTERNAL_JOB allocation (26.05), as test_modern_pipeline's scale-in test.
    job_id = await hold_with_a_job(stack, modern_slurm, "rs-1", what="rs-1 running the batch job")
    # The bridge must know rs-1 is busy before the update starts (its pod-deadline is then
    # written): otherwise the newest pod, rs-1, is condemned first, found busy on the drain,
    # and holds the one unavailable slot until its job ends (as 1.x's pod-cordon does).
    await stack.wait_for(
        lambda: (
            wellknown.ANNOTATION_POD_DEADLINE
            in (_pods(stack)["rs-1"]["metadata"].get("annotations") or {})
        ),
        timeout=30,
        what="rs-1's job deadline observed",
    )
    uid1 = _pods(stack)["rs-1"]["metadata"]["uid"]

    unavailable_high = 0

    def note() -> dict[str, dict[str, Any]]:
        nonlocal unavailable_high
        current = _pods(stack)
        ready = sum(
            1
            for p in current.values()
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        )
        unavailable_high = max(unavailable_high, 2 - ready)
        return current

    template = {
        "spec": {
            "containers": [{"name": "slurmd", "image": "slurmd:26.05.1"}],
            "tolerations": [MANAGED_NODE_TOLERATION],
        }
    }
    stack.kube.patch("nodesets", "rs", {"spec": {"template": template}}, NS)

    def rs0_rolled() -> bool:
        current = note()
        return (
            "rs-0" in current
            and _revision(current["rs-0"]) not in ("", first)
            and "rs-0" in _running(stack)
        )

    await stack.wait_for(rs0_rolled, timeout=60, what="idle rs-0 replaced")
    await stack.wait_for(
        lambda: _reason(modern_slurm, "rs-1") == wellknown.scale_in_drain_reason(NS, "rs-1"),
        timeout=30,
        what="busy rs-1 drained for the update",
    )
    await stack.settled()
    assert _pods(stack)["rs-1"]["metadata"]["uid"] == uid1, "a pod whose job runs was deleted"
    # sinfo's "draining": DRAIN while a job still runs there.
    assert modern_slurm.node_states()["rs-1"] == "draining", "the job still runs"

    modern_slurm.scancel(job_id)

    def all_rolled() -> bool:
        current = note()
        return (
            set(current) == {"rs-0", "rs-1"}
            and all(_revision(p) not in ("", first) for p in current.values())
            and _running(stack) == {"rs-0", "rs-1"}
        )

    await stack.wait_for(all_rolled, timeout=60, what="rs-1 replaced once its job ended")
    assert unavailable_high <= 1, f"{unavailable_high} pods unavailable at once"
    await _registered(stack, modern_slurm, {"rs-0", "rs-1"})
    assert not _drained(modern_slurm, "rs-1"), "the replacement's node is not drained"


async def test_scheduled_update_creates_a_maint_reservation_on_the_nodesets_nodes(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    """ScheduledUpdate (nodeset_sync.go ``syncSlurmReservation``, slurmcontrol.go
    ``SyncReservationForNodeSet``): reservation ``SlurmOperatorMaint-rs`` appears in real
    Slurm with MAINT and IGNORE_JOBS on the NodeSet's nodes; once it is active a template
    change replaces the pods under it; switching back to RollingUpdate deletes it."""
    start = int(time.time()) + 4
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))
    strategy = {
        "type": "ScheduledUpdate",
        "scheduledUpdate": {"startTime": stamp, "duration": "30m"},
    }
    stack.kube.create(_nodeset(2, updateStrategy=strategy))
    await _registered(stack, modern_slurm, {"rs-0", "rs-1"})

    def shown() -> str:
        return modern_slurm.run(
            "scontrol", "-o", "show", "reservation", "SlurmOperatorMaint-rs", check=False
        ).stdout

    # Scale-out is a slow start (rs-0, then rs-1): the reservation may first hold rs-0 alone
    # and is updated to the NodeSet's nodes as they register.
    await stack.wait_for(
        lambda: "Nodes=rs-[0-1] " in shown(),
        timeout=30,
        what="the reservation in Slurm on both nodes",
    )
    res = shown()
    flags = res.split("Flags=", 1)[1].split()[0].split(",")
    assert "MAINT" in flags and "IGNORE_JOBS" in flags, res
    assert "Duration=00:30:00" in res, res
    assert "Users=root" in res, res
    assert stack.app is not None
    proj = stack.app.projection

    def under_reservation(name: str) -> bool:
        node = proj.get(SlurmNode, name)
        return (
            node is not None
            and node.has("MAINTENANCE")
            and node.reservation == "SlurmOperatorMaint-rs"
        )

    await stack.wait_for(
        lambda: under_reservation("rs-0") and under_reservation("rs-1"),
        timeout=30,
        what="rs-0 and rs-1 observed under the active MAINT reservation",
    )
    assert "MAINT" in _shown(modern_slurm, "rs-0").split("State=", 1)[1].split()[0]
    first = _revision(_pods(stack)["rs-0"])
    template = {
        "spec": {
            "containers": [{"name": "slurmd", "image": "slurmd:26.05.1"}],
            "tolerations": [MANAGED_NODE_TOLERATION],
        }
    }
    stack.kube.patch("nodesets", "rs", {"spec": {"template": template}}, NS)
    await stack.wait_for(
        lambda: (
            (current := _pods(stack)).keys() == {"rs-0", "rs-1"}
            and all(_revision(p) not in ("", first) for p in current.values())
            and _running(stack) == {"rs-0", "rs-1"}
        ),
        timeout=60,
        what="both pods replaced inside the window",
    )
    ensured = [
        r for r in await stack.action_records() if isinstance(r.action, EnsureSlurmReservation)
    ]
    # The stamp and finalizer are written with the NodeSet's resourceVersion: a status write
    # in between is a 409, retried (outcome "retry"), never a failure.
    assert any(r.outcome == "ok" for r in ensured), ensured
    assert {r.outcome for r in ensured} <= {"ok", "retry", "noop"}, ensured

    stack.kube.patch("nodesets", "rs", {"spec": {"updateStrategy": {"type": "RollingUpdate"}}}, NS)
    await stack.wait_for(
        lambda: "ReservationName=" not in shown(), timeout=30, what="the reservation deleted"
    )
    await stack.wait_for(
        lambda: (
            wellknown.ANNOTATION_NODESET_RESERVATION
            not in (stack.kube.get("nodesets", "rs", NS)["metadata"].get("annotations") or {})
        ),
        what="the reservation stamp removed",
    )


async def test_daemonset_mode_follows_node_labels(stack: Stack, modern_slurm: ModernSlurm) -> None:
    """DaemonSet mode (slurm-operator nodeset_sync.go ``syncNodeSetPods`` /
    ``podsShouldBeOnNode``, utils.go ``GetDaemonSetPodHostname``) on real Slurm: labelling
    Kubernetes nodes adds one slurmd pod on each, its Slurm node registered under the pod's
    hostname (the node's hostname-override annotation: n1..n4 are Slurm nodes of the static
    cluster already); removing a label drains that Slurm node with the scale-in reason, keeps
    the pod (same uid) while a real job runs there, and deletes it once the job ended."""
    for i, host in enumerate(DS_HOSTS, start=1):
        stack.kube.patch(
            "nodes",
            f"n{i}",
            {"metadata": {"annotations": {wellknown.ANNOTATION_NODE_HOSTNAME_OVERRIDE: host}}},
        )
    stack.kube.create(
        {
            "apiVersion": "slinky.slurm.net/v1beta1",
            "kind": "NodeSet",
            "metadata": {"name": "ds", "namespace": NS},
            "spec": {
                "scalingMode": "DaemonSet",
                "replicas": 7,  # ignored in DaemonSet mode
                "template": {
                    "spec": {
                        "containers": [{"name": "slurmd", "image": "slurmd:26.05"}],
                        "nodeSelector": {"slurmd": "yes"},
                        "tolerations": [MANAGED_NODE_TOLERATION],
                    }
                },
            },
        }
    )

    def ds_pods() -> dict[str, dict[str, Any]]:
        """Live pods of NodeSet ds by the Kubernetes node they are bound to."""
        return {
            str(p["spec"].get("nodeName", "")): p
            for p in _pods(stack).values()
            if p["metadata"]["labels"].get("app.kubernetes.io/instance") == "ds"
        }

    def ds_status() -> dict[str, Any]:
        return dict(stack.kube.get("nodesets", "ds", NS).get("status") or {})

    await stack.wait_for(lambda: ds_status().get("desired") == 0, what="status: no node wanted")
    assert ds_pods() == {}
    assert not set(DS_HOSTS) & set(modern_slurm.node_states())

    for i in (1, 2):
        stack.kube.patch("nodes", f"n{i}", {"metadata": {"labels": {"slurmd": "yes"}}})
    await stack.wait_for(
        lambda: (
            {"ds1", "ds2"} <= set(modern_slurm.node_states())
            and {p["metadata"]["name"] for p in ds_pods().values()} <= _running(stack)
            and set(ds_pods()) == {"n1", "n2"}
        ),
        timeout=30,
        what="a Running pod on n1 and n2, ds1 and ds2 registered in Slurm",
    )
    by_node = ds_pods()
    assert set(by_node) == {"n1", "n2"}, "one pod per labelled node"
    p1 = by_node["n1"]
    pod1 = str(p1["metadata"]["name"])
    assert pod1.startswith("ds-") and p1["spec"]["hostname"] == "ds1"
    assert by_node["n2"]["spec"]["hostname"] == "ds2"
    assert "ds3" not in modern_slurm.node_states(), "n3 is not labelled"
    await stack.wait_for(
        lambda: ds_status().get("desired") == 2 and ds_status().get("replicas") == 2,
        what="status: 2 desired, 2 pods",
    )

    # A real job holds ds1 (an EXTERNAL_JOB allocation, as the rolling update test's).
    job_id = await hold_with_a_job(stack, modern_slurm, "ds1", what="ds1 running the job")
    # The bridge has seen the job on ds1 (its pod's deadline, rule 9, names the pod by the
    # Slurm node's hostname) before the label goes.
    await stack.wait_for(
        lambda: (
            wellknown.ANNOTATION_POD_DEADLINE
            in (_pods(stack)[pod1]["metadata"].get("annotations") or {})
        ),
        timeout=30,
        what="ds1's job deadline on its pod",
    )
    uid1 = p1["metadata"]["uid"]

    stack.kube.patch("nodes", "n1", {"metadata": {"labels": {"slurmd": None}}})
    await stack.wait_for(
        lambda: _reason(modern_slurm, "ds1") == wellknown.scale_in_drain_reason(NS, pod1),
        timeout=30,
        what="ds1 drained in Slurm (label removed)",
    )
    await stack.wait_for(lambda: ds_status().get("desired") == 1, what="status: 1 desired")
    await stack.settled()
    assert pod1 in _pods(stack), "a pod whose Slurm node runs a job was deleted"
    assert _pods(stack)[pod1]["metadata"]["uid"] == uid1, "the busy pod was replaced"
    # sinfo's "draining": DRAIN while the job still runs there.
    assert modern_slurm.node_states()["ds1"] == "draining", "the job still runs"
    assert not _drained(modern_slurm, "ds2"), "ds2's node keeps its label"

    modern_slurm.scancel(job_id)
    await stack.wait_for(
        lambda: set(ds_pods()) == {"n2"} and pod1 not in _pods(stack),
        timeout=30,
        what="n1's pod deleted once ds1 was idle",
    )
    await stack.wait_for(
        lambda: "ds1" not in modern_slurm.node_states(), timeout=30, what="ds1 left Slurm"
    )
    assert ds_pods()["n2"]["metadata"]["uid"] == by_node["n2"]["metadata"]["uid"]
    assert not _drained(modern_slurm, "ds2")
    await stack.settled()  # the delete's action record is written after the delete
    deletes = [
        r.action
        for r in await stack.action_records()
        if isinstance(r.action, DeleteNodeSetPod) and r.outcome == "ok"
    ]
    assert [(d.pod.name, d.slurm_node) for d in deletes] == [(pod1, "ds1")], deletes

    # n3 labelled and n1 labelled again: a new pod on each, ds1 back in Slurm undrained.
    for i in (1, 3):
        stack.kube.patch("nodes", f"n{i}", {"metadata": {"labels": {"slurmd": "yes"}}})
    await stack.wait_for(
        lambda: (
            set(ds_pods()) == {"n1", "n2", "n3"}
            and {p["metadata"]["name"] for p in ds_pods().values()} <= _running(stack)
            and {"ds1", "ds2", "ds3"} <= set(modern_slurm.node_states())
        ),
        timeout=30,
        what="pods on n1, n2, n3 Running, ds1 and ds3 registered",
    )
    assert ds_pods()["n1"]["metadata"]["name"] != pod1
    assert ds_pods()["n3"]["spec"]["hostname"] == "ds3"
    await stack.wait_for(lambda: ds_status().get("desired") == 3, what="status: 3 desired")
    await stack.settled()
    assert not any(_drained(modern_slurm, h) for h in DS_HOSTS), modern_slurm.node_states()
    assert await stack.dead_letters() == []


def _partition(slurm: ModernSlurm, name: str) -> dict[str, str]:
    """``scontrol -o show partition`` as ``Key: value`` ({} when there is none)."""
    out = slurm.run("scontrol", "-o", "show", "partition", name, check=False).stdout
    if not out.startswith("PartitionName="):
        return {}
    return dict(w.split("=", 1) for w in out.split() if "=" in w)


async def test_spec_partition_is_made_changed_and_deleted_over_rest(
    stack: Stack, modern_slurm: ModernSlurm
) -> None:
    """slurm-operator 1.x writes ``PartitionName=<nodeset> Nodes=<nodeset> <config>`` into
    slurm.conf (controller_config.go ``buildNodeSetConf``); on real Slurm 26.05 slurmbridge
    makes the same partition through ``POST partitions/``: on the NodeSet's nodes, with the
    config's keys, back to Slurm's defaults for a key removed from the config, deleted with
    the NodeSet (whose finalizer holds it until then)."""
    config = "MaxTime=1:30:00 PriorityTier=5 OverSubscribe=EXCLUSIVE LLN=YES Bogus=1"
    stack.kube.create(_nodeset(2, partition={"enabled": True, "config": config}))
    await _registered(stack, modern_slurm, {"rs-0", "rs-1"})
    await stack.wait_for(
        lambda: _partition(modern_slurm, "rs").get("Nodes") == "rs-[0-1]",
        timeout=30,
        what="partition rs on rs-[0-1]",
    )
    part = _partition(modern_slurm, "rs")
    assert (part["MaxTime"], part["PriorityTier"], part["Exclusive"], part["LLN"]) == (
        "01:30:00",
        "5",
        "NODE",
        "YES",
    )
    meta = stack.kube.get("nodesets", "rs", NS)["metadata"]
    assert wellknown.FINALIZER_NODESET_SLURM in meta["finalizers"]
    # Events are written off the reconcile path (as client-go's recorder): wait for it.
    await stack.wait_for(
        lambda: any(
            e.get("reason") == "PartitionConfigIgnored" and "Bogus" in e["message"]
            for e in stack.kube.list("events", NS)
        ),
        what="the Warning naming Bogus",
    )

    stack.kube.patch(
        "nodesets", "rs", {"spec": {"partition": {"config": "OverSubscribe=FORCE:2"}}}, NS
    )
    await stack.wait_for(
        lambda: _partition(modern_slurm, "rs").get("OverSubscribe") == "FORCE:2",
        timeout=30,
        what="the new config in Slurm",
    )
    part = _partition(modern_slurm, "rs")
    # Removed keys are back at what a new partition has.
    assert (part["MaxTime"], part["PriorityTier"], part["Exclusive"], part["LLN"]) == (
        "UNLIMITED",
        "1",
        "NO",
        "NO",
    )

    stack.kube.patch("nodesets", "rs", {"spec": {"replicas": 1}}, NS, subresource="scale")
    await stack.wait_for(
        lambda: (
            _partition(modern_slurm, "rs").get("Nodes") == "rs-0"
            and "rs-1" not in modern_slurm.node_states()
        ),
        timeout=60,
        what="rs-1 out of the partition and of Slurm",
    )

    stack.kube.delete("nodesets", "rs", NS)
    await stack.wait_for(
        lambda: not _partition(modern_slurm, "rs"), timeout=30, what="partition rs deleted"
    )
    await stack.wait_for(
        lambda: not any(n["metadata"]["name"] == "rs" for n in stack.kube.list("nodesets", NS)),
        timeout=30,
        what="the NodeSet released by its finalizer",
    )
    assert await stack.dead_letters() == []
