"""Scale-out, scale-in and failed pods (rules 1, 2, 5, 12, 13, 14, 16, 18 and 21 of
:mod:`reconcilers.nodeset`), after slurm-operator ``internal/controller/nodeset/nodeset_sync.go``
``syncNodeSetPods`` / ``doPodScale`` / ``processCondemned`` (StatefulSet and DaemonSet mode,
``podsShouldBeOnNode``, ``getNodesToDaemonPods``, ``failedPodsBackoffKey``) and Kubernetes'
ReplicaSet ``slowStartBatch`` (pkg/controller/replicaset/replica_set.go).
"""

from __future__ import annotations

import msgspec

from reconcilers._steps import Stop
from reconcilers.nodeset import _daemon, _ident, _slurmd
from reconcilers.nodeset._common import (
    _FAILURES,
    _NAMES_SHOWN,
    BACKOFF_BASE_S,
    BACKOFF_MAX_S,
    BURST_REPLICAS,
    DRAIN_RECHECK_S,
    FORGET_FAILURE_S,
    MAX_REPLICAS,
    SLOW_START_INITIAL,
    NodeSetPlan,
    View,
    _event,
    _why,
    is_busy,
)
from reconcilers.nodeset.order import (
    _cordoned,
    lowest_free,
    ordinal_of,
    pod_name,
    scale_in_order,
)
from reconcilers.nodeset.pods import (
    _not_running_events,
)
from schemas import wellknown
from schemas.actions import (
    AnyAction,
    CreateNodeSetPod,
    DeleteFailedNodeSetPod,
    DeleteNodeSetPod,
    DrainSlurmNode,
    NodeSetRef,
    PodRef,
)
from schemas.events import (
    KubeNodeSet,
    KubePod,
)


def slow_start_batch(created: int, missing: int) -> int:
    """How many of ``missing`` pods one decision creates when ``created`` live pods exist.

    Kubernetes' ``slowStartBatch`` creates 1, then 2, 4 … while the creates succeed. A
    decision here cannot see its own creates succeed (the effector performs them after it),
    so each pass takes the pods that exist — creates that succeeded — as the measure: it
    creates as many again (at least :data:`SLOW_START_INITIAL`), so the set at most doubles
    per pass, never more than :data:`BURST_REPLICAS`. Creates that fail (quota, admission)
    add no pods, so the next pass does not grow. Bounded by ``BURST_REPLICAS`` whatever
    ``missing`` is."""
    if missing <= 0:
        return 0
    return min(missing, BURST_REPLICAS, max(SLOW_START_INITIAL, created))


def _some(names: list[str]) -> str:
    """``a, b, c``, or the first few and a count when there are many."""
    if len(names) <= _NAMES_SHOWN:
        return ", ".join(names)
    return f"{', '.join(names[:_NAMES_SHOWN])} and {len(names) - _NAMES_SHOWN} more"


def failures_of(ns: KubeNodeSet) -> dict[str, tuple[int, int, str]]:
    """The recorded failures by pod name: ``(count, last epoch s, uid of the pod that failed
    last)`` (rule 5). An unreadable annotation counts as none: the back-off then starts
    again, which is safe."""
    raw = ns.annotations.get(wellknown.ANNOTATION_NODESET_POD_FAILURES)
    if not raw:
        return {}
    try:
        return _FAILURES.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return {}


def backoff_s(failures: int) -> float:
    """Seconds before a name that failed ``failures`` times is recreated (rule 5)."""
    if failures <= 0:
        return 0.0
    return min(BACKOFF_MAX_S, BACKOFF_BASE_S * float(2 ** min(failures - 1, 16)))


def failure_key(p: KubePod) -> str:
    """The name pod ``p``'s failures are counted under (rules 5 and 12): its own name (the
    ordinal's), or for a DaemonSet-mode pod ``node/<its node>``."""
    if _daemon.mode_of(p) == _daemon.DAEMONSET:
        return f"node/{_daemon.target_node(p) or p.name}"
    return p.name


def _daemon_pods(
    v: View, live: list[KubePod], ref: NodeSetRef
) -> tuple[int, list[KubePod], list[AnyAction], str, float | None]:
    """DaemonSet mode (rule 12): ``(desired, pods to condemn, the creations and their
    ``ScalingUp`` Event, note, seconds until a node's back-off ends or None)``. ``desired``
    counts the nodes the template may run on (nodeset_sync_status.go, DaemonSet mode;
    nodeset_sync.go ``getNodesToDaemonPods``, ``podsShouldBeOnNode``)."""
    ns = v.nodeset
    assert ns is not None
    on_node = _daemon.by_node(live)
    # A node whose pod ended or is terminating gets its new pod once that one is gone from
    # the log (1.x: such a pod still "exists" on its node, getNodesToDaemonPods).
    ending = _daemon.by_node(
        p for p in v.pods if (p.terminal or p.deleting) and _daemon.mode_of(p) == _daemon.DAEMONSET
    )
    failures = failures_of(ns)
    desired = 0
    creates: list[CreateNodeSetPod] = []
    gone: list[KubePod] = []
    held: list[str] = []
    wait: float | None = None
    for name, node in sorted(v.kube_nodes.items()):
        run, keep = _daemon.should_run(ns, node)
        desired += run
        pods = on_node.get(name, [])
        if run and not pods:
            count, at, _ = failures.get(f"node/{name}", (0, 0, ""))
            left = at + backoff_s(count) - v.now
            if ending.get(name):
                held.append(name)
                continue
            if count and left > 0 and v.now - at < FORGET_FAILURE_S:
                held.append(name)
                wait = left if wait is None else min(wait, left)
                continue
            creates.append(
                CreateNodeSetPod(
                    nodeset=ref,
                    pod_name="",
                    ordinal=-1,
                    node=name,
                    hostname=_daemon.hostname(node),
                )
            )
        elif not keep and pods:
            gone += pods
        elif pods:
            hostname = _daemon.hostname(node)
            gone += [p for p in pods if p.labels.get(wellknown.LABEL_POD_HOSTNAME) != hostname]
    if not v.nodes_listed:
        # Without the complete node listing an unseen node may be eligible or not: wait.
        return desired, [], [], "waiting for the Kubernetes node listing", None
    actions: list[AnyAction] = []
    if creates:
        actions += creates
        actions.append(
            _event(
                ns,
                "ScalingUp",
                f"Creating {len(creates)} daemon pod(s) on {', '.join(c.node for c in creates)}",
            )
        )
    note = f"{desired} eligible node(s)"
    if held:
        note += f"; {', '.join(held)} waiting for a pod to go or a failed pod's back-off"
    return desired, gone, actions, note, wait


def _condemn(
    plan: NodeSetPlan,
    v: View,
    pods: list[KubePod],
    scaled_from: NodeSetRef | None = None,
) -> list[str]:
    """Drain-before-delete for ``pods`` (rules 2 and 11): add the drains and deletes to
    ``plan``; return the names still waiting for their node to drain. ``scaled_from``:
    the pods are condemned by a scale-in of that NodeSet (rule 18: the deletes carry it)
    (slurm-operator nodeset_sync.go ``processCondemned``, ``makePodCordonAndDrain``)."""
    waiting = []
    for p in pods:
        node = v.slurm.get(p.name)
        delete = DeleteNodeSetPod(
            pod=PodRef.of(p),
            cluster=v.cluster,
            slurm_node=_daemon.slurm_name(p),
            scaled_from=scaled_from,
        )
        if node is not None and not node.has("DRAIN"):
            plan.add(
                DrainSlurmNode(
                    cluster=v.cluster,
                    node=node.key,
                    reason=wellknown.scale_in_drain_reason(p.namespace, p.name),
                )
            )
            if is_busy(node):
                waiting.append(p.name)
            else:
                # Idle now: delete right after the drain instead of a poll later; the
                # effector re-reads the node and deletes only if it is DRAIN and idle.
                plan.add(delete)
        elif (
            is_busy(node)
            or (node is not None and node.has("UNDRAIN"))
            or (node is None and not v.slurm_listed)
        ):
            # Deleted only when drained (DRAIN, not UNDRAIN: an undrain under way must not
            # be raced) and idle. No node in a current listing: unknown to Slurm,
            # deletable; with no listing at all, its node may be running a job.
            waiting.append(p.name)
        else:
            plan.add(delete)
    if scaled_from is not None:
        # slurm-operator marks a pod condemned by a scale-in (makePodCordonAndDrain); one
        # deleted in this very decision is not marked first.
        plan.extend(
            _slurmd.cordon_mark(p, True) for p in pods if p.name in waiting and not _cordoned(p)
        )
    return waiting


def hold_replicas(plan: NodeSetPlan, v: View) -> Stop | None:
    """Rule 21: ``replicas`` above :data:`MAX_REPLICAS` (StatefulSet mode) is not acted on:
    the set is held at its live pods. slurm-operator has no such step (its CRD's bound is
    enforced by the API server); the bound is the CRD's ``maximum``
    (deploy/crds/nodesets.slinky.slurm.net.yaml)."""
    del v
    if plan.daemon or plan.ns.replicas <= MAX_REPLICAS:
        return None
    plan.bad_replicas = True
    plan.want = len(plan.live)
    plan.note(f"spec.replicas {plan.ns.replicas} is above {MAX_REPLICAS}: held at the live pods")
    return None


def sync_daemon_pods(plan: NodeSetPlan, v: View) -> Stop | None:
    """Rules 16 and 12 (DaemonSet mode only): prune this NodeSet's defunct Slurm node
    records, then create a pod on each eligible node without one and pick the pods that
    must leave their node (slurm-operator nodeset_sync.go ``syncSlurmNodeRecordsNodeNotFound``,
    ``syncNodeSetPods``, ``getNodesToDaemonPods``, ``podsShouldBeOnNode``). No pins in this
    mode (nodeset_sync_status.go ``calculateOrdinalToNode``)."""
    if not plan.daemon:
        return None
    ns = plan.ns
    pruned, notes = _ident.prune_actions(
        ns,
        v.records,
        v.record_pods,
        v.kube_nodes,
        v.cluster,
        listed=v.slurm_listed and v.nodes_listed and v.pods_listed,
    )
    for prune, message in pruned:
        plan.add(prune, _event(ns, "DefunctSlurmNodePruned", message))
    plan.pins = {}
    plan.want, plan.daemon_gone, creates, note, wait = _daemon_pods(v, plan.live, plan.ref)
    plan.extend(creates)
    plan.requeue(wait)
    plan.note(note)
    plan.note("; ".join([*(f"pruning {prune.node}" for prune, _ in pruned), *notes]))
    return None


def pin_ordinals(plan: NodeSetPlan, v: View) -> Stop | None:
    """Rule 14 (StatefulSet mode): the ``status.ordinalToNode`` pins (slurm-operator
    nodeset_sync_status.go ``calculateOrdinalToNode``; utils.go ``pinPodToNode`` reads them
    at scale-out)."""
    if plan.daemon:
        return None
    ns, live = plan.ns, plan.live
    plan.pins = _daemon.pins(
        ns,
        live,
        v.kube_nodes,
        {p.name: o for p in live if (o := ordinal_of(ns.name, p.name)) is not None},
        nodes_listed=v.nodes_listed,
    )
    return None


def sync_failed_pods(plan: NodeSetPlan, v: View) -> Stop | None:
    """Rule 5: each Failed or Succeeded pod is deleted, its failure counted for the
    back-off, with a Warning ``PodFailed``; then the ``PodNotRunning`` Warnings
    (slurm-operator nodeset_sync.go ``syncNodeSetPods``, ``failedPodsBackoffKey``)."""
    ns = plan.ns
    for p in v.pods:
        if not p.terminal or p.deleting:
            continue
        key = failure_key(p)
        count, at, uid = plan.failures.get(key, (0, 0, ""))
        if uid != p.uid:  # this failure is not counted yet
            count = (count if v.now - at < FORGET_FAILURE_S else 0) + 1
            at = int(v.now)
        plan.add(
            DeleteFailedNodeSetPod(
                nodeset=plan.ref,
                pod=PodRef.of(p),
                failures=count,
                at=at,
                key="" if key == p.name else key,
            ),
            _event(
                ns,
                "PodFailed",
                f"{p.name} is {p.phase}{_why(p.kubelet_reason, p.kubelet_message)}: "
                f"deleting it; it is recreated in {backoff_s(count):.0f} s",
                warning=True,
            ),
        )
    plan.extend(_not_running_events(ns, v.pods))
    return None


def _waiting_out(plan: NodeSetPlan, now: float) -> dict[int, float]:
    """The ordinals whose name waits out a failure's back-off: seconds left (rule 5)."""
    out: dict[int, float] = {}
    for name, (count, at, _) in plan.failures.items():
        left = at + backoff_s(count) - now
        o = ordinal_of(plan.ns.name, name)
        if o is not None and left > 0 and now - at < FORGET_FAILURE_S:
            out[o] = left
    return out


def scale_out(plan: NodeSetPlan, v: View) -> Stop | None:
    """Rule 1 (StatefulSet mode): create the missing pods at the lowest free ordinals, in a
    slow-start batch; names waiting out a back-off keep their ordinal and bring a re-check
    (slurm-operator nodeset_sync.go ``doPodScale``, ``newNodeSetPodOrdinal``; Kubernetes
    ``slowStartBatch``)."""
    ns = plan.ns
    waiting_out = _waiting_out(plan, v.now)
    used = {o for p in v.pods if (o := ordinal_of(ns.name, p.name)) is not None}
    # A failed pod about to be replaced, or a name waiting out its back-off, holds a slot.
    replacing = sum(1 for p in v.pods if p.terminal and not p.deleting)
    replacing += sum(1 for o in waiting_out if o not in used)
    if not plan.daemon and len(plan.live) + replacing < plan.want:
        missing = plan.want - len(plan.live) - replacing
        batch = slow_start_batch(len(plan.live), missing)
        # Only the batch's ordinals are looked for: the walk passes at most the taken ones
        # (pods and back-offs), never ``replicas`` ordinals.
        free = lowest_free(batch, used | waiting_out.keys())
        names = [pod_name(ns.name, o, ns.ordinal_padding) for o in free]
        pins = plan.pins or {}
        plan.extend(
            CreateNodeSetPod(nodeset=plan.ref, pod_name=n, ordinal=o, node=pins.get(str(o), ""))
            for n, o in zip(names, free, strict=True)
        )
        plan.add(
            _event(
                ns,
                "ScalingUp",
                f"Scaling up to {plan.want}: creating {_some(names)}"
                + (f" ({batch} of {missing} missing: slow start)" if batch < missing else ""),
            )
        )
    if waiting_out:
        plan.requeue(min(waiting_out.values()))
    return None


def scale_in(plan: NodeSetPlan, v: View) -> Stop | None:
    """Rules 2, 12 and 13: condemn the pods leaving their node (DaemonSet mode) or made for
    the other mode, else the surplus over ``want`` in the scale-in order; drain before
    delete, one ``ScalingDown`` Event, a re-check while a node drains (slurm-operator
    nodeset_sync.go ``syncNodeSetPods``, ``doPodScale``, ``processCondemned``; utils/sort.go
    ``ActivePods``)."""
    ns, live = plan.ns, plan.live
    if plan.daemon_gone or plan.other_mode:
        condemned = plan.daemon_gone + plan.other_mode
        # Rule 18: a pod leaving a node it may no longer run on is a DaemonSet-mode scale-in
        # (1.x's doPodScale settles its claims as any podsToDelete); a mode switch is not.
        waiting = _condemn(plan, v, plan.daemon_gone, plan.ref)
        waiting += _condemn(plan, v, plan.other_mode)
        headline = "Deleting "
    elif not plan.daemon and len(live) > plan.want:
        condemned = scale_in_order(live, ns.name, v.slurm, plan.deadlines)
        condemned = condemned[: len(live) - plan.want]
        waiting = _condemn(plan, v, condemned, plan.ref)
        headline = f"Scaling down to {plan.want}: "
    else:
        return None
    plan.condemned = condemned
    if waiting:
        plan.requeue(DRAIN_RECHECK_S)
    plan.add(
        _event(
            ns,
            "ScalingDown",
            headline
            + ", ".join(p.name for p in condemned)
            + (f" (waiting for {', '.join(waiting)} to drain)" if waiting else ""),
        )
    )
    return None
