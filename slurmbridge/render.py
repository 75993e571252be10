"""Decode any slurmbridge message by its subject and render it for people or for programs.

Shared by ``slurmbridge tail`` and ``slurmbridge demo``. ``jsonl`` prints the decoded value
re-encoded as one JSON object per line, carrying its schema tag (``kind`` for observations,
``type`` for action records and dead letters) plus ``subject`` and ``seq`` when known.
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
    parts = subject.split(".")
    if len(parts) >= 3 and parts[0] == subjects.PREFIX:
        if parts[1] == subjects.OBS and len(parts) == 5:
            if parts[3] not in events.KINDS:
                raise ValueError(f"subject {subject!r}: unknown observation kind {parts[3]!r}")
            return events.decode_event(parts[3], data)
        if parts[1] == subjects.ACT:
            return actions.decode_record(data)
        if parts[1] == subjects.DLQ:
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


def pretty(value: Decoded) -> str:
    """One human line."""
    if isinstance(value, Event):
        return (
            f"{_ts(value.observed_at)}  obs  {events.kind_of(value):<14} "
            f"{value.key:<20} {_event_summary(value)}"
        )
    if isinstance(value, ActionRecord):
        a = value.action
        fields = ", ".join(f"{k}={v!r}" for k, v in msgspec.structs.asdict(a).items())
        tail = f" — {value.error}" if value.error else ""
        return (
            f"{_ts(value.at)}  act  {value.reconciler:<14} {value.key:<20} "
            f"{actions.action_name(a)}({fields}) → {value.outcome}{tail}"
        )
    return (
        f"{_ts(value.at)}  dlq  {value.reconciler:<14} seq={value.stream_seq} "
        f"{value.subject}: {value.reason}"
    )
