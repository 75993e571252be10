"""Properties of every reconciler's ``decide`` (``reconcilers.ALL``) over generated states.

**Idempotence and convergence.** For a generated store and key, the decision's actions are
applied to a model of the world (:mod:`tests.unit._world`, which mirrors each effector's
preconditions), and the reconciler decides again on the new state, as the runtime does once
the effects are in the log:

* the new decision never asks again for an action that has just changed the world (no
  repeated effect; an action the world already satisfies is a no-op and not counted);
* single-step reconcilers (``node_taint``, ``slurm_drain``, ``autoscale``, ``cluster``) then
  want nothing more: one decision reaches the fixpoint;
* the others are level-based protocols of several steps (``node_register``: drain, delete
  when drained, create, condition; ``nodeset``: scale, then status; ``workload``: delete a
  pod, then release its finalizer, and cancel orphaned jobs one per decision; ``placement``:
  mark pods for a job that exists, then fix its exclusions or bind), so they must reach a
  fixpoint within a few rounds (:data:`ROUNDS`).

What does not count as a change: Kubernetes Events (``RecordEvent``: best effort, never
observed back by any producer, so they cannot feed a decision). Status writes
(``SetNodeSetStatus``, ``SetClusterStatus``, ``SetNodeCondition``, ``SetPodCondition``) *are*
counted: they are observed back, and a reconciler that kept rewriting one would loop.
Time does not pass (``Context.now`` is fixed), so back-offs, cool-downs and grace periods
hold for the whole run.

**No destructive action on missing data** (the actions whose ``destructive`` marker is set:
``UndrainSlurmNode``, ``DeleteSlurmNode``, ``CancelSlurmJob``, ``DeletePod``,
``DeleteNodeSetPod``, ``DeleteFailedNodeSetPod``): per reconciler, what it must not do when
the Slurm side, a job or a node has not been observed.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from reconcilers import ALL, _pods, nodeset
from schemas import wellknown
from schemas.actions import (
    ACTIONS,
    AnyAction,
    CancelSlurmJob,
    CreateSlurmNode,
    DeleteFailedNodeSetPod,
    DeleteNodeSetPod,
    DeletePod,
    DeleteSlurmPartition,
    DeleteSlurmReservation,
    DrainSlurmNode,
    RecordEvent,
    ReleaseNodeSetFinalizer,
    SetNodeCondition,
    UndrainSlurmNode,
)
from schemas.events import (
    KubeNodeSet,
    KubePod,
    PodCondition,
    SlurmCluster,
    SlurmJob,
    SlurmNode,
    SlurmPing,
)
from schemas.subjects import KUBE_SOURCE
from slurmbridge.runtime.gate import ListingGate
from tests.unit import _states
from tests.unit._pods import kube_nodeset, kube_pod
from tests.unit._states import CTX, NOW, SOURCE, STATES
from tests.unit._world import World

#: Rounds of decide-and-apply each reconciler needs at most to reach its fixpoint.
ROUNDS = {
    "node_taint": 1,
    "slurm_drain": 1,
    "autoscale": 1,
    "cluster": 1,
    "placement": 2,
    # Rule 5 cancels one orphaned job per decision: the generated pool has three job ids.
    "workload": 4,
    # Scale-out slow start (rule 1): up to 6 replicas from none is 1 + 1 + 2 + 2 creates.
    "nodeset": 5,
    "node_register": 4,
}


def decide(w: World, name: str, key: str) -> tuple[AnyAction, ...]:
    return w.decide(ALL[name], key, CTX)


def test_every_reconciler_and_action_is_covered() -> None:
    assert set(STATES) == set(ALL) == set(ROUNDS)
    assert set(World._handlers) == set(ACTIONS.values())


@pytest.mark.parametrize("name", sorted(ALL))
@given(data=st.data())
def test_decide_is_pure(name: str, data: st.DataObject) -> None:
    """The same store gives the same decision (no clock, no randomness, no hidden state)."""
    w, key = data.draw(STATES[name])
    spec = ALL[name]
    store = w.store()
    first = spec.decide(spec.view(store, key, CTX))
    assert spec.decide(spec.view(store, key, CTX)) == first
    assert spec.decide(spec.view(w.store(), key, CTX)) == first


@pytest.mark.parametrize("name", sorted(ALL))
@given(data=st.data())
def test_decide_is_idempotent_and_converges(name: str, data: st.DataObject) -> None:
    w, key = data.draw(STATES[name])
    changed = w.apply_all(decide(w, name, key))
    for _ in range(ROUNDS[name]):
        if not changed:
            return
        again = decide(w, name, key)
        repeated = [a for a in again if a in changed and w.copy().apply(a)]
        assert not repeated, f"asked again for what it just did: {repeated}"
        changed = w.apply_all(again)
    assert not changed, (
        f"{name} still changes the world after {ROUNDS[name]} round(s) of deciding again: {changed}"
    )


# --- no destructive action on missing data ---------------------------------------------------


def destructive(actions: tuple[AnyAction, ...]) -> list[AnyAction]:
    return [a for a in actions if a.destructive]


def without_slurm(w: World) -> World:
    """The same Kubernetes side, and nothing observed of any Slurm cluster (no ping, node,
    partition or job: a poller that never ran, or a log that lost them)."""
    return World((ev for ev in w.objs.values() if ev.source == KUBE_SOURCE), NOW)


SAFE_WITHOUT_SLURM = ["autoscale", "cluster", "node_register", "placement"]


def held_by_the_gate(w: World, actions: tuple[AnyAction, ...]) -> bool:
    """The runtime's whole-world gate (runtime.gate) holds a decision with ``actions`` in
    world ``w``, whatever Kubernetes listings the log holds."""
    gate = ListingGate(w.store(), kube_listings=("nodes", "pods"), default_cluster=CTX.cluster)
    return gate.holds(actions) is not None


@pytest.mark.parametrize("name", sorted(ALL))
@given(data=st.data())
def test_without_the_slurm_side_the_runtime_holds_every_destructive_decision(
    name: str, data: st.DataObject
) -> None:
    """Rule 1 where no reconciler can forget it: a reconciler may want something destroyed
    on the Kubernetes side alone (``node_taint``: no Slurm node, so no taint), but the
    runtime performs no decision with a destructive action before Slurm is listed."""
    w, key = data.draw(STATES[name])
    bare = without_slurm(w)
    actions = decide(bare, name, key)
    if destructive(actions):
        assert held_by_the_gate(bare, actions)


@pytest.mark.parametrize("name", [*SAFE_WITHOUT_SLURM, "slurm_drain"])
@given(data=st.data())
def test_nothing_destructive_without_the_slurm_side(name: str, data: st.DataObject) -> None:
    w, key = data.draw(STATES[name])
    actions = decide(without_slurm(w), name, key)
    assert not destructive(actions)
    if name == "slurm_drain":
        assert not actions, "no Slurm node: nothing to drain or undrain"
    if name == "node_register":
        # Only registration (and saying why not) is possible: never drain nor delete.
        kinds = {type(a) for a in actions}
        assert kinds <= {CreateSlurmNode, SetNodeCondition, RecordEvent}, kinds


@given(_states.node_states())
def test_slurm_drain_and_node_register_leave_unobserved_slurm_nodes_alone(
    state: tuple[World, str],
) -> None:
    """With the key's Slurm node unobserved (but the rest of the cluster seen), neither
    reconciler drains, undrains or deletes anything."""
    w, key = state
    for ev in list(w.objs.values()):
        if isinstance(ev, SlurmNode) and ev.source == SOURCE:
            del w.objs[("SlurmNode", SOURCE, ev.key)]
    for name in ("slurm_drain", "node_register"):
        actions = decide(w, name, key)
        assert not destructive(actions)
        assert not any(isinstance(a, DrainSlurmNode) for a in actions)


# workload


def _pods_of(w: World) -> list[KubePod]:
    return [ev for ev in w.objs.values() if isinstance(ev, KubePod)]


def _job(w: World, job_id: int) -> SlurmJob | None:
    job = w.objs.get(("SlurmJob", SOURCE, str(job_id)))
    return job if isinstance(job, SlurmJob) else None


@given(_states.pod_states())
def test_workload_destroys_only_what_it_has_seen_end(state: tuple[World, str]) -> None:
    """``CancelSlurmJob`` only for a job observed, ours (the group's marker) and not ended;
    ``DeletePod`` never while the job is observed RUNNING, and never for a job never seen
    (no pod says we bound it: slurm-node annotation)."""
    w, key = state
    actions = decide(w, "workload", key)
    for a in actions:
        if isinstance(a, CancelSlurmJob):
            job = _job(w, a.job_id)
            assert job is not None, f"cancels job {a.job_id}, never observed"
            assert job.comment == a.marker
            assert _pods.group_key_of_marker(job.comment) == key
            assert job.base_state not in wellknown.JOB_ENDED_STATES
        if isinstance(a, DeletePod):
            job = _job(w, a.job_id)
            assert job is None or job.base_state != "RUNNING", "deletes a pod of a RUNNING job"
            if job is None:
                bound = [p for p in _pods_of(w) if wellknown.ANNOTATION_SLURM_NODE in p.annotations]
                assert bound, f"job {a.job_id} was never seen, yet its pod is deleted"


def _bound_pod_of_vanished_job() -> tuple[World, str]:
    """A pod placement bound (job-id label, slurm-node annotation, on node n0) while nothing
    at all has been observed of the Slurm cluster."""
    pod = kube_pod(
        "ns",
        "train-0",
        uid="uid-train-0",
        phase="Running",
        node_name="n0",
        scheduler_name=_states.SCHED,
        labels={_pods.LABEL_JOB_NAME: "train", wellknown.LABEL_SLURM_JOBID: "100"},
        annotations={wellknown.ANNOTATION_SLURM_NODE: "n0"},
        finalizers=(wellknown.FINALIZER_SCHEDULER,),
    )
    return World([pod], NOW), _states.JOB_GROUP.key


@given(_states.pod_states())
@example(_bound_pod_of_vanished_job())
def test_workload_nothing_destructive_without_the_slurm_side(state: tuple[World, str]) -> None:
    w, key = state
    assert not destructive(decide(without_slurm(w), "workload", key))


# nodeset


def _nodeset(w: World) -> KubeNodeSet | None:
    ns = w.objs.get(("KubeNodeSet", KUBE_SOURCE, _states.NODESET_KEY))
    return ns if isinstance(ns, KubeNodeSet) else None


def _slurm_nodes_of(w: World, ns: KubeNodeSet) -> dict[str, SlurmNode]:
    source = f"slurm:{ns.cluster_name or _states.CLUSTER}"
    return {
        ev.key: ev for ev in w.objs.values() if isinstance(ev, SlurmNode) and ev.source == source
    }


@given(_states.nodeset_states())
def test_nodeset_deletes_only_drained_idle_surplus_pods(state: tuple[World, str]) -> None:
    """Scale-in deletes at most the surplus; never a pod whose Slurm node is observed busy;
    a pod whose node is observed and not drained only right after draining it; undrains only
    its own scale-in drain; deletes as failed only terminal pods."""
    w, key = state
    actions = decide(w, "nodeset", key)
    ns = _nodeset(w)
    if ns is None:
        assert not actions
        return
    if ns.deleting:
        # Rule 20 only: what our stamps say we made in Slurm, then our finalizer.
        stamps = ns.annotations
        for a in actions:
            if isinstance(a, DeleteSlurmPartition):
                assert wellknown.ANNOTATION_NODESET_PARTITION in stamps and a.name == ns.name
            elif isinstance(a, DeleteSlurmReservation):
                assert wellknown.ANNOTATION_NODESET_RESERVATION in stamps
            else:
                assert isinstance(a, ReleaseNodeSetFinalizer), a
                assert wellknown.FINALIZER_NODESET_SLURM in ns.finalizers
        return
    pods = {p.name: p for p in _pods_of(w)}
    live = [p for p in pods.values() if not p.deleting and not p.terminal]
    nodes = _slurm_nodes_of(w, ns)
    deletes = [a for a in actions if isinstance(a, DeleteNodeSetPod)]
    assert len(deletes) <= max(0, len(live) - max(0, ns.replicas))
    for i, a in enumerate(actions):
        if isinstance(a, DeleteNodeSetPod):
            node = nodes.get(a.slurm_node)
            assert not nodeset.is_busy(node), f"deletes {a.pod.name}, whose Slurm node is busy"
            if node is not None and not node.has("DRAIN"):
                drained_before = [
                    b
                    for b in actions[:i]
                    if isinstance(b, DrainSlurmNode) and b.node == a.slurm_node
                ]
                assert drained_before, f"deletes {a.pod.name} without draining it first"
        if isinstance(a, UndrainSlurmNode):
            node = nodes.get(a.node)
            assert node is not None
            # slurm-operator owns every "slurm-operator: " reason, and an empty one
            # (slurmcontrol.go IsNodeReasonOurs): an administrator's is never undone.
            assert node.has("DRAIN")
            assert node.reason == "" or node.reason.startswith(wellknown.OPERATOR_REASON_PREFIX)
        if isinstance(a, DeleteFailedNodeSetPod):
            assert pods[a.pod.name].terminal
            assert not pods[a.pod.name].deleting


def _surplus_pod_without_slurm() -> tuple[World, str]:
    """A NodeSet scaled to 0 with one Running pod, and nothing observed of Slurm."""
    ns = kube_nodeset("slurm", "gpu", uid="ns-uid", replicas=0)
    pod = kube_pod(
        "slurm",
        "gpu-0",
        uid="u0",
        phase="Running",
        ready=True,
        node_name="k1",
        labels={"app.kubernetes.io/name": "slurmd", "app.kubernetes.io/instance": "gpu"},
    )
    return World([ns, pod], NOW), _states.NODESET_KEY


@given(_states.nodeset_states())
@example(_surplus_pod_without_slurm())
def test_nodeset_nothing_destructive_without_the_slurm_side(state: tuple[World, str]) -> None:
    """Only a pod that already failed may go (its slurmd is not running, whatever Slurm
    says); nothing is drained or deleted on the strength of a node's absence."""
    w, key = state
    pods = {p.name: p for p in _pods_of(w)}
    bare = without_slurm(w)
    for a in destructive(decide(bare, "nodeset", key)):
        if isinstance(a, DeleteSlurmPartition | DeleteSlurmReservation):
            # Slurm objects of a NodeSet being deleted: the runtime holds them until Slurm
            # is listed (runtime.gate).
            assert held_by_the_gate(bare, (a,)), a
            continue
        assert isinstance(a, DeleteFailedNodeSetPod), a
        assert pods[a.pod.name].terminal


@given(_states.nodeset_states())
def test_nodeset_of_an_unserved_cluster_is_left_alone(state: tuple[World, str]) -> None:
    w, key = state
    ns = _nodeset(w)
    served = [c for c in w.objs.values() if isinstance(c, SlurmCluster)]
    if ns is not None and ns.cluster_name == "c9" and not served:
        assert decide(w, "nodeset", key) == ()


# placement and the rest: never destructive at all


@given(data=st.data())
def test_placement_deletes_only_orphans(data: st.DataObject) -> None:
    """Placement's one destructive rule (issue 18, 7): a pod of ours on a node with no job
    label, when no live job of ours names its group."""
    w, key = data.draw(STATES["placement"])
    pods = {p.name: p for p in _pods_of(w)}
    for a in destructive(decide(w, "placement", key)):
        assert isinstance(a, DeletePod), a
        pod = pods[a.pod.name]
        assert pod.node_name
        assert wellknown.LABEL_SLURM_JOBID not in pod.labels


@pytest.mark.parametrize("name", ["autoscale", "cluster"])
@given(data=st.data())
def test_reconcilers_without_destructive_rules_never_destroy(
    name: str, data: st.DataObject
) -> None:
    w, key = data.draw(STATES[name])
    assert not destructive(decide(w, name, key))


def test_cluster_status_with_a_long_ping_error_is_written_once() -> None:
    """Found while modelling the effector, which writes at most 32768 characters of the
    message (a condition's limit): an error longer than that never matched the observed
    status, so every reconcile wrote the status again."""
    c = SlurmCluster(
        source=KUBE_SOURCE, key="a/alpha", uid="u", namespace="a", name="alpha", server="x"
    )
    ping = SlurmPing(
        source="slurm:alpha", key="alpha", cluster="alpha", error="e" * 40_000, error_kind="X"
    )
    w = World([c, ping], NOW)
    assert w.apply_all(decide(w, "cluster", "a/alpha"))
    assert decide(w, "cluster", "a/alpha") == ()


def _unread_variants(pod: KubePod) -> list[KubePod]:
    """``pod`` changed in what a pod watcher reports between a pod's own writes, most changed
    first: its phase short of ending and readiness, then also its ``PodScheduled``
    condition and its tolerations."""
    phase = pod.phase
    if phase in ("Pending", "Running"):
        phase = "Running" if phase == "Pending" else "Pending"
    started = msgspec.structs.replace(
        pod,
        phase=phase,
        ready=not pod.ready,
        ready_since=0 if pod.ready else NOW - 7,
        version="v-other",
    )
    told = msgspec.structs.replace(
        started,
        conditions=(PodCondition(type="PodScheduled", status="False", reason="SlurmJobPending"),),
        tolerations=(*pod.tolerations, "example.com/other"),
    )
    return [told, started]


@pytest.mark.parametrize("name", sorted(n for n in ALL if KubePod in ALL[n].reads))
@given(data=st.data())
def test_what_a_reconciler_does_not_read_of_a_pod_never_changes_its_decision(
    name: str, data: st.DataObject
) -> None:
    """``ReconcilerSpec.reads`` lets the runtime skip a trigger whose read part did not
    change (issue 30, item 2): sound only if no decision depends on the rest. Every pod is
    replaced by the most changed variant (:func:`_unread_variants`) the reconciler reads as
    the same; the decision must not move."""
    w, key = data.draw(STATES[name])
    spec = ALL[name]
    read = spec.reads[KubePod]
    variant = w.copy()
    for k, ev in list(variant.objs.items()):
        if isinstance(ev, KubePod):
            same = [alt for alt in _unread_variants(ev) if read(alt) == read(ev)]
            assert same, "a pod starting is never read (phase short of ending, readiness)"
            variant.objs[k] = same[0]
    before = spec.decide(spec.view(w.store(), key, CTX))
    after = spec.decide(spec.view(variant.store(), key, CTX))
    assert after.actions == before.actions
    assert after.requeue_after == before.requeue_after
