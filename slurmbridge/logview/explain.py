"""``slurmbridge explain KIND/KEY``: the story of one object, from the log.

The timeline merges, oldest first:

* every retained observation of the object (any source: ``bridge.obs.*.<KIND>.<key>``);
* every action record about it — recorded under its key, or acting on it from another key
  (a drain of Slurm node ``n12`` decided for Kubernetes node ``n12``, a NodeSet deleting its
  pod) — with the decision's reason and the observation that triggered it (``cause_seq``).

So "why was node n12 drained at 03:14" reads: the cordon observed, the decision and its
reason, the drain and its outcome, then Slurm reporting DRAIN.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, TextIO

import msgspec

from schemas import actions as act
from schemas import events, streams, subjects
from schemas.actions import ActionRecord, AnyAction
from schemas.events import Event
from slurmbridge.logview import logread, render
from slurmbridge.runtime.bus import Bus


class ExplainError(ValueError):
    """The object reference cannot be read (the message says why)."""


def parse_ref(ref: str) -> tuple[str, str]:
    """``KIND/KEY`` → ``(kind, key)``; KEY may contain ``/`` (``KubePod/default/train-0``).

    Raises:
        ExplainError: no ``/``, or an unknown kind (the message lists the kinds).
    """
    kind, sep, key = ref.partition("/")
    if not sep or not key:
        raise ExplainError(f"{ref!r}: expected KIND/KEY, e.g. SlurmNode/n12 or KubePod/ns/name")
    if kind not in events.KINDS:
        raise ExplainError(f"{ref!r}: unknown kind {kind!r}; one of {', '.join(events.KINDS)}")
    return kind, key


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
        lines.append(Line(r.at, f"act#{seq}", text))
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


def print_timeline(lines: list[Line], kind: str, key: str, out: TextIO = sys.stdout) -> None:
    """Print the timeline (or say that the log knows nothing of the object)."""
    if not lines:
        print(f"{kind}/{key}: nothing in the log", file=out)
        return
    print(f"{kind}/{key}: {len(lines)} entr{'y' if len(lines) == 1 else 'ies'}", file=out)
    for line in lines:
        print(f"{render.timestamp(line.at)}  {line.where:<9} {line.text}", file=out)
