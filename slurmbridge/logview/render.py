"""Decode any slurmbridge message by its subject and render it for people or for programs.

Shared by ``slurmbridge tail`` and ``slurmbridge demo``. ``jsonl`` prints the decoded value
re-encoded as one JSON object per line, carrying its schema tag (``kind`` for observations,
``type`` for action records and dead letters) plus ``subject`` and ``seq`` when known — all of
it. ``pretty`` prints one line a person reads: an action's fields are clipped (a placeholder
job's pods and spec would otherwise make a line of hundreds of characters).
"""

from __future__ import annotations

import datetime as dt

import msgspec

from schemas import actions, events, subjects
from schemas.actions import ActionRecord, DeadLetter
from schemas.events import (
    Event,
    KubeNode,
    KubePod,
    KubeWorkload,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmPing,
)

Decoded = Event | ActionRecord | DeadLetter
_ENC = msgspec.json.Encoder()


def decode(subject: str, data: bytes) -> Decoded:
    """Decode a message of any bridge subject.

    Raises:
        ValueError: not a bridge subject, or an observation kind this version does not know
            (a newer producer's); msgspec errors for a malformed payload.
    """
    family = subjects.family_of(subject)
    if family == subjects.OBS:
        kind = subjects.parse_subject(subject).kind
        if kind not in events.KINDS:
            raise ValueError(f"subject {subject!r}: unknown observation kind {kind!r}")
        return events.decode_event(kind, data)
    if family == subjects.ACT:
        return actions.decode_record(data)
    if family == subjects.DLQ:
        return actions.decode_dead_letter(data)
    raise ValueError(f"subject {subject!r}: not a slurmbridge subject")


def jsonl(value: Decoded, *, subject: str = "", seq: int = 0) -> str:
    """One JSON object (the value's own fields and tag, plus subject/seq)."""
    body = _ENC.encode(value)
    extra = b""
    if subject:
        extra += b',"subject":' + _ENC.encode(subject)
    if seq:
        extra += b',"seq":' + str(seq).encode()
    return (body[:-1] + extra + b"}").decode()


def timestamp(ns: int) -> str:
    """``HH:MM:SS.mmm`` (UTC) of epoch nanoseconds; dashes for 0."""
    return _ts(ns)


def offset(seconds: float) -> str:
    """A signed time offset for people: ``+0.4 s``, ``+12.3 s``, ``+2 min 5 s``, ``+1 h 3 min``."""
    sign = "-" if seconds < 0 else "+"
    left = abs(seconds)
    if left < 60:
        return f"{sign}{left:.1f} s"
    whole = int(left)
    if whole < 3600:
        return f"{sign}{whole // 60} min {whole % 60} s"
    return f"{sign}{whole // 3600} h {whole % 3600 // 60} min"


def _ts(ns: int) -> str:
    if not ns:
        return "--:--:--.---"
    t = dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC)
    return t.strftime("%H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def _event_summary(ev: Event) -> str:
    if ev.op == "deleted":
        return "deleted"
    if isinstance(ev, KubeNode):
        bits = ["unschedulable" if ev.unschedulable else "schedulable"]
        bits += [f"taint {t.key}={t.value}:{t.effect}" for t in ev.taints]
        return ", ".join(bits)
    if isinstance(ev, SlurmNode):
        s = "+".join(ev.state) or "?"
        return f"{s}" + (f" reason={ev.reason!r}" if ev.reason else "")
    if isinstance(ev, SlurmPartition):
        return f"{ev.state} nodes={','.join(ev.nodes)}"
    if isinstance(ev, SlurmPing):
        return "responding" if ev.responding else f"NOT responding: {ev.error}"
    if isinstance(ev, KubePod):
        bits = [ev.phase]
        if ev.node_name:
            bits.append(f"on {ev.node_name}")
        if ev.deleting:
            bits.append("terminating")
        if job := ev.labels.get("scheduler.slinky.slurm.net/slurm-jobid"):
            bits.append(f"job {job}")
        return ", ".join(bits)
    if isinstance(ev, SlurmJob):
        s = "+".join(ev.state) or "?"
        return s + (f" on {','.join(ev.nodes)}" if ev.nodes else "")
    if isinstance(ev, KubeWorkload):
        return f"{ev.workload_kind} size={ev.size}"
    return ""


#: Longest rendering of one field of an action in a human line, of the line, of its error.
_FIELD_MAX = 40
_LINE_MAX = 200
_ERROR_MAX = 60
#: Fields people do not read in a line (the JSON output keeps them).
_UNREAD = frozenset({"uid", "api_version", "marker", "owned_prefixes"})


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _brief(value: object) -> str:
    """A short human rendering of one field of an action: object references as
    ``namespace/name``, lists as their items (or their count), structs as their set fields."""
    if isinstance(value, msgspec.Struct):
        fields = msgspec.structs.asdict(value)
        name, ns = fields.get("name"), fields.get("namespace")
        if isinstance(name, str) and isinstance(ns, str):
            return f"{ns}/{name}" if ns else name
        set_fields = [
            f"{k}={_brief(v)}"
            for k, v in fields.items()
            if v not in ("", (), None) and k not in _UNREAD
        ]
        return "{" + ",".join(set_fields) + "}"
    if isinstance(value, (tuple, list)):
        items = [_brief(v) for v in value]
        text = "[" + ",".join(items) + "]"
        if len(text) > _FIELD_MAX and len(items) > 1:
            return f"[{items[0]},… {len(items)} in all]"
        return text
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}={_brief(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return repr(value) if (" " in value or not value) else value
    return str(value)


def action_line(action: actions.Action, limit: int = 90) -> str:
    """``DrainSlurmNode node=n1 reason='slurm-bridge: …'``: the action's name and its set
    fields, each clipped, the fields together to ``limit`` (``jsonl`` carries everything)."""
    fields = " ".join(
        f"{k}={_clip(_brief(v), _FIELD_MAX)}"
        for k, v in msgspec.structs.asdict(action).items()
        if v not in ("", (), None) and k not in _UNREAD
    )
    return f"{actions.action_name(action)} {_clip(fields, limit)}".rstrip()


def pretty(value: Decoded) -> str:
    """One human line (action records clipped to a screen's width: :func:`action_line`)."""
    if isinstance(value, Event):
        return (
            f"{_ts(value.observed_at)}  obs  {events.kind_of(value):<14} "
            f"{value.key:<20} {_event_summary(value)}"
        )
    if isinstance(value, ActionRecord):
        error = " ".join(value.error.split())
        head = f"{_ts(value.at)}  act  {value.reconciler:<14} {value.key:<20} "
        tail = f" → {value.outcome}" + (f" — {_clip(error, _ERROR_MAX)}" if error else "")
        name = actions.action_name(value.action)
        budget = max(30, _LINE_MAX - len(head) - len(name) - 1 - len(tail))
        return f"{head}{action_line(value.action, budget)}{tail}"
    return (
        f"{_ts(value.at)}  dlq  {value.reconciler:<14} seq={value.stream_seq} "
        f"{value.subject}: {value.reason}"
    )
