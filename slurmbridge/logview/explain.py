"""``slurmbridge explain KIND/KEY``: the story of one object, from the log.

The timeline merges, oldest first:

* every retained observation of the object (any source: ``bridge.obs.*.<KIND>.<key>``);
* every action record about it — recorded under its key, or acting on it from another key
  (a drain of Slurm node ``n12`` decided for Kubernetes node ``n12``, a NodeSet deleting its
  pod) — with the decision's reason and the observation that triggered it (``cause_seq``).

So "why was node n12 drained at 03:14" reads: the cordon observed, the decision and its
reason, the drain and its outcome, then Slurm reporting DRAIN.

``slurmbridge explain pod/NS/NAME`` first answers "why is my pod pending" (Slinky
slurm-bridge #45) with the pod's steps, each timed from the pod's creation
(:func:`pod_steps`): the group complete (placement's submit decision), the job submitted, each
distinct reason Slurm gave while the job waited, the job RUNNING, the pod bound, the pod
Running — then the full timeline of ``KubePod/NS/NAME``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, TextIO

import msgspec

from schemas import actions as act
from schemas import events, streams, subjects, wellknown
from schemas.actions import ActionRecord, AnyAction, BindPod, SetPodCondition, SubmitSlurmJob
from schemas.events import Event, KubePod, SlurmJob
from slurmbridge.logview import logread, render
from slurmbridge.runtime.bus import Bus


class ExplainError(ValueError):
    """The object reference cannot be read (the message says why)."""


#: The short form ``pod/NS/NAME`` (its steps, then the timeline of ``KubePod/NS/NAME``).
POD_ALIAS = "pod"

#: The kind names people type (kubectl's resource names, singular and plural, its short
#: names, and the Kinds of the objects), lower-cased, → the observed kind. A bare ``node`` is
#: the Kubernetes node, as in kubectl (``SlurmNode/n1`` for Slurm's).
KIND_ALIASES: dict[str, str] = {
    **dict.fromkeys(("pod", "pods", "po"), "KubePod"),
    **dict.fromkeys(("node", "nodes", "no"), "KubeNode"),
    **dict.fromkeys(("nodeset", "nodesets", "nss"), "KubeNodeSet"),
    **dict.fromkeys(("cluster", "clusters"), "SlurmCluster"),
    **dict.fromkeys(("resourceslice", "resourceslices"), "KubeResourceSlice"),
    **dict.fromkeys(("resourceclaim", "resourceclaims"), "KubeResourceClaim"),
    **{kind.lower(): kind for kind in events.KINDS},
}
#: Workload kinds typed as ``Job/NS/NAME`` (kubectl's names) → the KubeWorkload kind token;
#: the key becomes ``NS/Kind:NAME`` (:func:`schemas.events.workload_key`).
WORKLOAD_ALIASES: dict[str, str] = {
    **dict.fromkeys(("job", "jobs"), "Job"),
    **dict.fromkeys(("jobset", "jobsets"), "JobSet"),
    **dict.fromkeys(("leaderworkerset", "leaderworkersets", "lws"), "LeaderWorkerSet"),
    **dict.fromkeys(("podgroup", "podgroups"), "PodGroup"),
}


def parse_ref(ref: str) -> tuple[str, str]:
    """``KIND/KEY`` → ``(kind, key)``; KEY may contain ``/`` (``KubePod/default/train-0``).
    KIND is an observed kind or a name people type for it, in any case
    (:data:`KIND_ALIASES`: ``pod/NS/NAME`` and ``Pod/NS/NAME`` are ``KubePod/NS/NAME``,
    ``NodeSet/NS/NAME`` and ``nss/NS/NAME`` are ``KubeNodeSet/NS/NAME``); a workload kind
    (:data:`WORKLOAD_ALIASES`: ``Job/NS/NAME``) is the ``KubeWorkload`` ``NS/Job:NAME``.

    Raises:
        ExplainError: no ``/``, an unknown kind (the message lists the kinds and the names
            accepted), or a namespaced reference that is not ``KIND/NAMESPACE/NAME``.
    """
    typed, sep, key = ref.partition("/")
    if not sep or not key:
        raise ExplainError(f"{ref!r}: expected KIND/KEY, e.g. SlurmNode/n12 or KubePod/ns/name")
    workload = WORKLOAD_ALIASES.get(typed.lower())
    kind = "KubeWorkload" if workload else KIND_ALIASES.get(typed.lower())
    if kind is None:
        raise ExplainError(
            f"{ref!r}: unknown kind {typed!r}; one of {', '.join(events.KINDS)} (or pod, node, "
            "nodeset, cluster, job, jobset, lws, podgroup)"
        )
    namespaced = workload is not None or (
        kind in ("KubePod", "KubeNodeSet", "SlurmCluster") and typed not in events.KINDS
    )
    if namespaced:
        ns, slash, name = key.partition("/")
        if not (slash and ns and name) or "/" in name:
            raise ExplainError(
                f"{ref!r}: expected {typed}/NAMESPACE/NAME, e.g. {typed}/default/train-0"
            )
    if workload is not None:
        ns, _, name = key.partition("/")
        return kind, events.workload_key(ns, workload, name)
    return kind, key


def is_pod_ref(ref: str) -> bool:
    """Whether ``ref`` names a pod in a short form (``pod/``, ``pods/``, ``po/``, ``Pod/``):
    explain then prints the pod's steps first."""
    typed = ref.partition("/")[0]
    return typed not in events.KINDS and KIND_ALIASES.get(typed.lower()) == "KubePod"


def targets(action: AnyAction) -> set[str]:
    """The object keys an action acts on (node names, ``namespace/name`` of pods and
    NodeSets, job ids), found in its fields."""
    out: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, msgspec.Struct):
            fields = msgspec.structs.asdict(value)
            ns, name = fields.get("namespace"), fields.get("name")
            if isinstance(name, str) and isinstance(ns, str) and ns:
                out.add(f"{ns}/{name}")
            for k, v in fields.items():
                if k in ("node", "slurm_node", "pod_name", "name") and isinstance(v, str) and v:
                    out.add(v)
                elif k == "job_id" and isinstance(v, int) and v:
                    out.add(str(v))
                elif k == "nodes" and isinstance(v, tuple):
                    out.update(x for x in v if isinstance(x, str))
                else:
                    walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    walk(action)
    return out


@dataclass(frozen=True)
class Line:
    """One timeline entry: when (UTC ns), where (``obs#12``: BRIDGE_OBS sequence 12,
    ``act#3``: BRIDGE_ACT sequence 3) and the text."""

    at: int
    where: str
    text: str


def _decoded(raw: logread.Raw) -> object:
    """The observation, or None for one that does not decode (listed as malformed above)."""
    try:
        return render.decode(raw.subject, raw.data)
    except (ValueError, KeyError):  # msgspec's errors are ValueErrors
        return None


async def explain(bus: Bus, kind: str, key: str) -> list[Line]:
    """The timeline of ``kind``/``key`` (module docstring), oldest first."""
    lines: list[Line] = []
    obs_subject = f"{subjects.PREFIX}.{subjects.OBS}.*.{kind}.{subjects.encode_key(key)}"
    async for raw in logread.read(bus, streams.OBS_STREAM, obs_subject):
        try:
            ev = events.decode_event(kind, raw.data)
        except (msgspec.DecodeError, msgspec.ValidationError, KeyError) as exc:
            # Part of the story (the reconcilers dead-lettered it): say so, keep going.
            at = lines[-1].at if lines else 0
            lines.append(Line(at, f"obs#{raw.seq}", f"malformed {raw.subject}: {exc}"))
            continue
        lines.append(
            Line(ev.observed_at, f"obs#{raw.seq}", f"observed  {_source(ev)}  {_summary(ev)}")
        )
    causes: dict[int, str] = {}
    records: list[tuple[int, ActionRecord]] = []
    async for raw in logread.read(bus, streams.ACT_STREAM, "bridge.act.>"):
        try:
            r = act.decode_record(raw.data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        about = r.key == key and r.key_kind == kind
        if about or key in targets(r.action):
            records.append((raw.seq, r))
            if r.cause_seq:
                causes[r.cause_seq] = ""
    # A write-ahead ``intended`` record is told only when no outcome record followed it
    # (the worker stopped in between: the effect may or may not have happened).
    done_ops = {r.op_id for _, r in records if r.op_id and r.outcome != "intended"}
    records = [(s, r) for s, r in records if r.outcome != "intended" or r.op_id not in done_ops]
    for seq in sorted(causes):
        causes[seq] = await _cause(bus, seq)
    # What each decision saw of the object it reconciled: that key's observations (any kind
    # and source), the latest of each at or before the decision's view of the log.
    seen: dict[str, list[tuple[int, Event]]] = {}
    for k in {r.key for _, r in records if r.view_seq}:
        subject = f"{subjects.PREFIX}.{subjects.OBS}.*.*.{subjects.encode_key(k)}"
        seen[k] = [
            (raw.seq, obs)
            async for raw in logread.read(bus, streams.OBS_STREAM, subject)
            if isinstance(obs := _decoded(raw), Event)
        ]
    for seq, r in records:
        text = f"acted     {render.pretty(r).split('  act  ', 1)[-1].strip()}"
        if r.reason:
            text += f"\n{'':>34}why: {r.reason}"
        if r.view_seq:
            latest: dict[tuple[str, str], tuple[int, Event]] = {}
            for obs_seq, ev in seen.get(r.key, ()):
                if obs_seq <= r.view_seq:
                    latest[(events.kind_of(ev), ev.source)] = (obs_seq, ev)
            for obs_seq, ev in sorted(latest.values(), key=lambda x: x[0]):
                text += f"\n{'':>34}saw: obs#{obs_seq}: {_source(ev)} {_summary(ev)}"
        if r.cause_seq:
            text += f"\n{'':>34}after: obs#{causes[r.cause_seq].removeprefix('seq ')}"
        # An effect sits where it began: its outcome record is stored once it finished,
        # and an observation showing its result may have been read in between.
        lines.append(Line(r.at - int(r.duration_s * 1e9), f"act#{seq}", text))
    lines.sort(key=lambda line: line.at)
    return lines


def _source(ev: Event) -> str:
    return f"{events.kind_of(ev)} {ev.key} ({ev.source})"


def _summary(ev: Event) -> str:
    return render.pretty(ev).split(ev.key, 1)[-1].strip()


async def _cause(bus: Bus, seq: int) -> str:
    try:
        msg = await bus.js.get_msg(streams.OBS_STREAM, seq)
        value = render.decode(msg.subject or "", msg.data or b"")
    except Exception as exc:  # noqa: BLE001 - an aged-out trigger is worth saying, not failing
        return f"seq {seq} (no longer retained: {type(exc).__name__})"
    if isinstance(value, Event):
        return f"seq {seq}: {_source(value)} {_summary(value)}"
    return f"seq {seq}"


@dataclass(frozen=True)
class Step:
    """One step of a pod's way to running: when (epoch seconds) and what."""

    at: float
    what: str


@dataclass(frozen=True)
class PodStory:
    """A pod's steps (:func:`pod_steps`), oldest first, and its creation (epoch seconds; 0:
    never observed)."""

    key: str
    created: float
    steps: list[Step]


def _obs_subject(kind: str, key: str) -> str:
    return f"{subjects.PREFIX}.{subjects.OBS}.*.{kind}.{subjects.encode_key(key)}"


async def pod_steps(bus: Bus, key: str) -> PodStory:
    """The steps of pod ``key`` (``namespace/name``) from the log, oldest first:

    * ``group complete`` — placement decided to submit the group's job (the SubmitSlurmJob
      record's decision time; the group was whole, its root and partition known);
    * ``placeholder job submitted`` — that record's effect (its start: the request went out
      within it) and outcome (``rejected``: Slurm refused it);
    * ``job N pending: <reason>`` — each observation of the job (named by the pod's
      ``slurm-jobid`` label) whose Slurm reason differs from the one before;
    * ``job N RUNNING on <nodes>`` — the first observation of it running;
    * ``bound to <node>`` — the BindPod record that bound it;
    * ``Running`` — the first observation of the pod in phase Running.

    A retried group (a job cancelled, the group submitted again) shows each job in turn.
    Only the log's retained history is read (observations keep the last few per object).
    """
    created, job_ids, steps = await _pod_history(bus, key)
    steps.extend(await _action_steps(bus, key))
    for job_id in job_ids:
        steps.extend(await _job_steps(bus, job_id))
    # Stable: steps at the same time keep the order above (pod, actions, each job).
    steps.sort(key=lambda s: s.at)
    return PodStory(key=key, created=created, steps=steps)


async def _pod_history(bus: Bus, key: str) -> tuple[float, list[int], list[Step]]:
    """From the pod's observations: its creation (epoch seconds; 0 when none says), the
    job ids its ``slurm-jobid`` label named in turn, and its first ``Running``."""
    created = 0.0
    job_ids: list[int] = []
    steps: list[Step] = []
    running = False
    async for raw in logread.read(bus, streams.OBS_STREAM, _obs_subject("KubePod", key)):
        pod = _decoded(raw)
        if not isinstance(pod, KubePod) or pod.deleted:
            continue
        if pod.created_at and not created:
            created = float(pod.created_at)
        job_id = wellknown.slurm_job_id(pod.labels)
        if job_id is not None and job_id not in job_ids:
            job_ids.append(job_id)
        if pod.phase == "Running" and not running:
            running = True
            steps.append(Step(pod.observed_at / 1e9, "Running (pod phase)"))
    return created, job_ids, steps


async def _action_steps(bus: Bus, key: str) -> list[Step]:
    """The steps placement's action records tell about pod ``key``, in log order (each
    record's outcome, never its write-ahead ``intended`` record)."""
    steps: list[Step] = []
    async for raw in logread.read(bus, streams.ACT_STREAM, "bridge.act.placement.>"):
        try:
            r = act.decode_record(raw.data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if r.outcome != "intended":
            steps.extend(_record_steps(r, key))
    return steps


def _record_steps(r: ActionRecord, key: str) -> list[Step]:
    """What one placement record says of pod ``key``: its group's submit (decided, then
    sent), its tenancy denial, or its binding; nothing for any other record."""
    a = r.action
    if isinstance(a, SubmitSlurmJob):
        return _submit_steps(r, a) if any(p.key == key for p in a.pods) else []
    if not isinstance(a, (SetPodCondition, BindPod)):
        return []
    namespace, _, name = key.partition("/")
    if (a.pod.namespace, a.pod.name) != (namespace, name):
        return []
    if (
        isinstance(a, SetPodCondition)
        and a.reason == wellknown.REASON_SLURM_POLICY_DENIED
        and r.outcome in ("ok", "noop")
    ):
        return [Step(r.decided_at or r.at / 1e9, f"denied by tenancy: {a.message}")]
    if isinstance(a, BindPod) and r.outcome == "ok":
        return [Step(r.at / 1e9, f"bound to {a.node} (Slurm node {a.slurm_node})")]
    return []


def _submit_steps(r: ActionRecord, a: SubmitSlurmJob) -> list[Step]:
    """A group's submit: ``group complete`` at the decision, then the request's outcome at
    the start of its effect."""
    decided = r.decided_at or r.at / 1e9
    pods = f"{len(a.pods)} pod{'' if len(a.pods) == 1 else 's'}"
    done: str = "submitted" if r.outcome in ("ok", "noop") else r.outcome
    detail = f": {r.error}" if r.error else ""
    done += f" {_identity(a)}"
    # The effect's start: the submit request goes out within it, and the record is
    # written only after the pods are marked, when Slurm may have shown the job.
    sent = r.at / 1e9 - r.duration_s
    return [
        Step(decided, f"group complete: {a.group} ({pods}), submit decided"),
        Step(sent, f"placeholder job {done}{detail}"),
    ]


async def _job_steps(bus: Bus, job_id: int) -> list[Step]:
    """Job ``job_id``'s observations: each distinct reason it waited for, then its first
    observation RUNNING."""
    steps: list[Step] = []
    reason: str | None = None
    started = False
    async for raw in logread.read(bus, streams.OBS_STREAM, _obs_subject("SlurmJob", str(job_id))):
        job = _decoded(raw)
        if not isinstance(job, SlurmJob) or job.deleted:
            continue
        at = job.observed_at / 1e9
        if job.base_state == "PENDING" and job.state_reason != reason:
            reason = job.state_reason
            steps.append(Step(at, f"job {job_id} pending: {reason or 'None'}"))
        elif job.base_state == "RUNNING" and not started:
            started = True
            steps.append(Step(at, f"job {job_id} RUNNING on {','.join(job.nodes) or '?'}"))
    return steps


def _identity(a: SubmitSlurmJob) -> str:
    """Who the job was submitted as, and the tenancy policy that said so."""
    spec = a.spec
    if spec.user_id is None:
        who = "as slurmrestd's user"
    else:
        who = f"as uid {spec.user_id}, gid {spec.group_id}"
    policy = f"tenancy policy {a.tenant!r}" if a.tenant else "no tenancy policy"
    extras = [
        f"account {spec.account}" if spec.account else "",
        f"partition {spec.partition}" if spec.partition else "",
    ]
    where = "".join(f", {e}" for e in extras if e)
    return f"{who}{where} ({policy})"


def print_steps(story: PodStory, out: TextIO = sys.stdout) -> None:
    """Print a pod's steps, each as its offset from the pod's creation."""
    if not story.steps and not story.created:
        print(f"pod {story.key}: nothing in the log", file=out)
        return
    origin = story.created or story.steps[0].at
    print(f"pod {story.key}: created {render.timestamp(int(origin * 1e9))}", file=out)
    for step in story.steps:
        print(f"  {render.offset(step.at - origin):>10}  {step.what}", file=out)


def print_timeline(lines: list[Line], kind: str, key: str, out: TextIO = sys.stdout) -> None:
    """Print the timeline (or say that the log knows nothing of the object)."""
    if not lines:
        print(f"{kind}/{key}: nothing in the log", file=out)
        return
    print(f"{kind}/{key}: {len(lines)} entr{'y' if len(lines) == 1 else 'ies'}", file=out)
    for line in lines:
        print(f"{render.timestamp(line.at)}  {line.where:<9} {line.text}", file=out)
