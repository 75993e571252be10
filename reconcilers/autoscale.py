"""``autoscale``: a NodeSet's replicas follow the pending jobs of a Slurm partition.

Slinky's docs scale NodeSets with KEDA on the partition's pending-job metric; this does the
same as a reconciler, so it needs no KEDA, and its decisions are in the log like any other.
The policy lives in the NodeSet's annotations (prefix ``autoscale.slurmbridge.dev/``):

==================== ======================================================== ==========
annotation           meaning                                                  default
==================== ======================================================== ==========
partition            the Slurm partition whose jobs drive it (required: no    —
                     partition, no autoscaling)
max-replicas         upper bound (required, ≥ min-replicas)                   —
min-replicas         lower bound                                              0
jobs-per-node        pending jobs one more node is worth                      1
cooldown             seconds before a change that is not growth (below)       60
idle-to-zero-after   seconds the partition must be quiet (nothing pending     300
                     or running) before scaling to ``min-replicas``
enabled              ``false`` hands the NodeSet back to people              true
==================== ======================================================== ==========

A NodeSet that a HorizontalPodAutoscaler or a KEDA ScaledObject targets (its
``scaleTargetRef`` names the NodeSet) is theirs: this reconciler then changes nothing, whatever
the annotations say, and its reason names the scaler.

Rules: with jobs pending, ``replicas`` = the busy nodes of the NodeSet + ⌈pending ÷
jobs-per-node⌉, clamped to [min, max], and only upwards (a wave never shrinks the set);
with nothing pending, nothing changes while jobs still run; once the partition has been quiet
for ``idle-to-zero-after``, ``replicas`` = min. As an HPA's default behaviour does, growth
is not held back: a step up right after a step up is made at once (a wave that reaches the
log over two polls is followed in two steps). Every other change — any step down, and a step
up after a step down — comes no sooner than ``cooldown`` after the previous change, so the
set never oscillates faster than that. The last change's time and direction are the
``last-scale-time`` and ``last-scale-direction`` annotations the effector writes with each
change. Scale-in itself
is the ``nodeset`` reconciler's: drain, then delete only idle nodes.

A policy that cannot be read (a missing or bad value) changes nothing and says why in the
decision's reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

import msgspec

from reconcilers import nodeset as ns_rules
from reconcilers.base import Context, Decision, ReconcilerSpec, Store, slurm_listed
from schemas import wellknown
from schemas.actions import NodeSetRef, ScaleNodeSet
from schemas.events import KubeNodeSet, KubePod, KubeScaler, SlurmJob, SlurmNode
from schemas.subjects import KUBE_SOURCE, slurm_source

NAME: Final = "autoscale"
PREFIX: Final = wellknown.AUTOSCALE_PREFIX
LAST_SCALE: Final = wellknown.ANNOTATION_AUTOSCALE_LAST_SCALE
LAST_DIRECTION: Final = wellknown.ANNOTATION_AUTOSCALE_LAST_DIRECTION
#: Seconds between looks while the log holds no current listing (a ping does not trigger).
LISTING_RECHECK_S: Final = 10.0


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """A NodeSet's autoscaling policy (module docstring); times in seconds."""

    partition: str
    min_replicas: int = 0
    max_replicas: int
    jobs_per_node: int = 1
    cooldown_s: float = 60.0
    idle_to_zero_s: float = 300.0


class PolicyError(ValueError):
    """An annotation of the policy cannot be read; the message names it."""


def policy_of(annotations: dict[str, str]) -> Policy | None:
    """The policy in ``annotations`` (None: not autoscaled).

    Raises:
        PolicyError: a value is missing or invalid (the message names the annotation).
    """
    if PREFIX + "partition" not in annotations:
        return None
    if annotations.get(PREFIX + "enabled", "true").strip().lower() == "false":
        return None

    def num(name: str, default: float | None, *, minimum: float) -> float:
        raw = annotations.get(PREFIX + name)
        if raw is None:
            if default is None:
                raise PolicyError(f"{PREFIX}{name}: required")
            return default
        try:
            value = float(raw)
        except ValueError:
            raise PolicyError(f"{PREFIX}{name}: {raw!r} is not a number") from None
        if not math.isfinite(value):  # "nan", "inf", "1e400": int() would raise
            raise PolicyError(f"{PREFIX}{name}: {raw!r} is not a finite number")
        if value < minimum:
            raise PolicyError(f"{PREFIX}{name}: {value:g} is below {minimum:g}")
        return value

    lo = int(num("min-replicas", 0, minimum=0))
    hi = int(num("max-replicas", None, minimum=0))
    if hi < lo:
        raise PolicyError(f"{PREFIX}max-replicas: {hi} is below min-replicas {lo}")
    return Policy(
        partition=annotations[PREFIX + "partition"].strip(),
        min_replicas=lo,
        max_replicas=hi,
        jobs_per_node=int(num("jobs-per-node", 1, minimum=1)),
        cooldown_s=num("cooldown", 60.0, minimum=0),
        idle_to_zero_s=num("idle-to-zero-after", 300.0, minimum=0),
    )


class View(msgspec.Struct, frozen=True, kw_only=True):
    """The NodeSet, the partition's jobs and the NodeSet's busy nodes."""

    nodeset: KubeNodeSet | None
    pending: int
    running: int
    last_end: int
    busy: int
    now: float
    scaled_by: str = ""
    #: The log holds a complete, current listing of the cluster (base.slurm_listed): only
    #: then does "no job" mean the partition is quiet.
    slurm_listed: bool = False


def decide(v: View | None) -> Decision:
    """Follow the pending jobs within the policy (module docstring)."""
    if v is None or v.nodeset is None or v.nodeset.deleting:
        return Decision(reason="no NodeSet")
    ns = v.nodeset
    try:
        policy = policy_of(ns.annotations)
    except PolicyError as exc:
        return Decision(reason=f"autoscaling off: {exc}")
    if policy is None:
        return Decision(reason="not autoscaled")
    if v.scaled_by:
        return Decision(reason=f"{v.scaled_by} scales this NodeSet; autoscale stays out")
    current = ns.replicas
    if v.pending:
        want = v.busy + math.ceil(v.pending / policy.jobs_per_node)
        target = max(current, min(policy.max_replicas, max(policy.min_replicas, want)))
        why = f"{v.pending} job(s) pending in {policy.partition}, {v.busy} node(s) busy"
    elif v.running:
        return Decision(reason=f"{v.running} job(s) running in {policy.partition}; holding")
    elif not v.slurm_listed:
        # No jobs seen proves nothing before a good poll is in the log, or while polls fail.
        return Decision(
            requeue_after=LISTING_RECHECK_S if current > policy.min_replicas else None,
            reason=f"no current listing of the Slurm cluster: {policy.partition} not scaled down",
        )
    else:
        quiet_for = v.now - v.last_end if v.last_end else math.inf
        if quiet_for < policy.idle_to_zero_s:
            wait = policy.idle_to_zero_s - quiet_for
            return Decision(
                requeue_after=wait if current > policy.min_replicas else None,
                reason=f"{policy.partition} quiet for {quiet_for:.0f} s",
            )
        target = policy.min_replicas
        why = f"{policy.partition} quiet for {policy.idle_to_zero_s:.0f} s"
    target = min(policy.max_replicas, max(policy.min_replicas, target))
    if target == current:
        return Decision(reason=f"{current} replica(s) is right: {why}")
    last = _last_scale(ns)
    growing = target > current and ns.annotations.get(LAST_DIRECTION) == "up"
    if last and v.now - last < policy.cooldown_s and not growing:
        wait = policy.cooldown_s - (v.now - last)
        return Decision(requeue_after=wait, reason=f"cool-down: {wait:.1f} s left ({why})")
    ref = NodeSetRef(namespace=ns.namespace, name=ns.name, uid=ns.uid)
    return Decision(
        actions=(
            ScaleNodeSet(
                nodeset=ref, replicas=target, at=int(v.now), why=f"{current} → {target}: {why}"
            ),
        ),
        reason=f"scale {current} → {target}: {why}",
    )


def _last_scale(ns: KubeNodeSet) -> float:
    try:
        return float(ns.annotations.get(LAST_SCALE, "0"))
    except ValueError:
        return 0.0


def view(store: Store, key: str, ctx: Context) -> View | None:
    """The NodeSet and the counts its policy needs."""
    ns = store.get(KubeNodeSet, key, KUBE_SOURCE)
    pending = running = last_end = busy = 0
    if ns is not None:
        try:
            policy = policy_of(ns.annotations)
        except PolicyError:
            policy = None
        source = slurm_source(ns.cluster_name or ctx.cluster)
        if policy is not None:
            for job in store.by_field(SlurmJob, "partition", policy.partition):
                if job.source != source:
                    continue
                if job.base_state == "PENDING":
                    pending += 1
                elif job.base_state == "RUNNING":
                    running += 1
                elif job.base_state in wellknown.JOB_ENDED_STATES:
                    last_end = max(last_end, job.end_time)
            namespace, _, name = key.partition("/")
            for p in store.by_label(KubePod, ns_rules.LABEL_INSTANCE, name):
                node = store.get(SlurmNode, p.name, source)
                if p.namespace == namespace and ns_rules.is_busy(node):
                    busy += 1
    cluster = (ns.cluster_name if ns is not None else "") or ctx.cluster
    namespace, _, name = key.partition("/")
    scaled_by = min(
        (
            f"{s.scaler_kind} {s.key}"
            for s in store.values(KubeScaler, KUBE_SOURCE)
            if s.target_kind == "NodeSet" and s.namespace == namespace and s.target_name == name
        ),
        default="",
    )
    return View(
        nodeset=ns,
        pending=pending,
        running=running,
        last_end=last_end,
        busy=busy,
        now=ctx.now,
        scaled_by=scaled_by,
        slurm_listed=slurm_listed(store, cluster),
    )


def _itself(event: KubeNodeSet, _store: Store, _ctx: Context) -> Iterable[str]:
    return [event.key]


def _scaled(event: KubeScaler, _store: Store, _ctx: Context) -> Iterable[str]:
    """The NodeSet an HPA or ScaledObject targets."""
    if event.target_kind == "NodeSet" and event.target_name:
        return [f"{event.namespace}/{event.target_name}"]
    return []


def _of_partition(event: SlurmJob, store: Store, ctx: Context) -> Iterable[str]:
    """The autoscaled NodeSets of the job's partition."""
    out = []
    for n in store.values(KubeNodeSet, KUBE_SOURCE):
        if event.source != slurm_source(n.cluster_name or ctx.cluster):
            continue
        if n.annotations.get(PREFIX + "partition", "").strip() == event.partition:
            out.append(n.key)
    return sorted(out)


def all_keys(store: Store, ctx: Context) -> Iterable[str]:
    """Every NodeSet with a policy."""
    del ctx
    return [
        n.key
        for n in store.values(KubeNodeSet, KUBE_SOURCE)
        if PREFIX + "partition" in n.annotations
    ]


SPEC = ReconcilerSpec(
    name=NAME,
    keys={KubeNodeSet: _itself, SlurmJob: _of_partition, KubeScaler: _scaled},
    key_kind="KubeNodeSet",
    all_keys=all_keys,
    view=view,
    decide=decide,
    description="NodeSet replicas follow a partition's pending jobs (bounds, cool-down, idle)",
)
