"""``slurmbridge tail``: print decoded messages of a subject as they arrive.

New messages come from a plain NATS subscription (what is published, from now on);
``--from-start`` first replays what the streams hold with an ordered consumer per stream.
The log is found as every log command finds it (:func:`slurmbridge.cli.logs.open_log`: the
URL, a kept store, or the instance running on this machine). ``--kind`` must name a kind
(an unknown one is an error listing them, not a silent filter that matches nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from typing import Any

import msgspec
from nats.js import api

import reconcilers
from schemas import events, streams, subjects
from schemas.events import Event
from slurmbridge.cli import logs as logcmds
from slurmbridge.config import Settings
from slurmbridge.logview import render
from slurmbridge.runtime import bus as busmod

_STREAM_OF = {
    subjects.OBS: streams.OBS_STREAM,
    subjects.ACT: streams.ACT_STREAM,
    subjects.DLQ: streams.DLQ_STREAM,
}


def _wanted(value: render.Decoded, kind: str | None, key: str | None) -> bool:
    if isinstance(value, Event):
        return (kind is None or events.kind_of(value) == kind) and (key is None or value.key == key)
    if kind is not None and getattr(value, "key_kind", None) not in (kind, None):
        return False
    return key is None or getattr(value, "key", None) == key


def kinds() -> list[str]:
    """What ``--kind`` accepts: every observation kind, and the kinds action records are
    keyed by (``PodGroup``)."""
    return sorted(set(events.KINDS) | {spec.key_kind for spec in reconcilers.ALL.values()})


def overlap(a: str, b: str) -> bool:
    """Whether some subject matches both NATS subject filters ``a`` and ``b`` (``*`` one
    token, ``>`` one or more trailing tokens; NATS subject-based messaging)."""
    ta, tb = a.split("."), b.split(".")
    for x, y in zip(ta, tb, strict=False):
        if ">" in (x, y):
            return True  # '>' needs at least one token, and the other side has one here
        if x != y and "*" not in (x, y):
            return False
    return len(ta) == len(tb)


def stream_holding(subject: str) -> str | None:
    """The first stream whose subjects overlap ``subject`` (None: no stream holds any of
    it, so a tail of it would wait forever)."""
    for spec in streams.stream_specs():
        if any(overlap(subject, held) for held in spec.subjects):
            return spec.name
    return None


async def tail(settings: Settings, args: argparse.Namespace, stop: asyncio.Event) -> int:
    """Run the tail until ``stop``, ``--count`` messages or ``--timeout`` idle seconds;
    exit status 2 at once when no stream holds the subject, or ``--kind`` is unknown."""
    if stream_holding(args.subject) is None:
        held = ", ".join(
            f"{spec.name} {' '.join(spec.subjects)}" for spec in streams.stream_specs()
        )
        print(
            f"slurmbridge tail: no stream holds subject {args.subject!r}, so nothing would "
            f"ever be printed; the streams hold {held} (e.g. bridge.> or bridge.act.>)",
            file=sys.stderr,
        )
        return 2
    if args.kind is not None and args.kind not in kinds():
        print(
            f"slurmbridge tail: --kind {args.kind!r}: unknown kind; one of {', '.join(kinds())}",
            file=sys.stderr,
        )
        return 2
    try:
        async with logcmds.open_log(settings, "tail", stop) as bus:
            return await _tail(bus, args, stop)
    except logcmds.Interrupted:
        return 0
    except logcmds.LogUnavailableError as exc:
        print(exc, file=sys.stderr)
        return 2


async def _tail(bus: busmod.Bus, args: argparse.Namespace, stop: asyncio.Event) -> int:
    queue: asyncio.Queue[Any] = asyncio.Queue()
    subs: list[Any] = []

    async def cb(msg: Any) -> None:
        await queue.put(msg)

    try:
        if args.from_start:
            family = subjects.family_of(args.subject)
            families = [family] if family in _STREAM_OF else list(_STREAM_OF)
            for fam in families:
                with contextlib.suppress(Exception):
                    subs.append(
                        await bus.js.subscribe(
                            args.subject,
                            stream=_STREAM_OF[fam],
                            ordered_consumer=True,
                            deliver_policy=api.DeliverPolicy.ALL,
                            cb=cb,
                        )
                    )
        else:
            subs.append(await bus.nc.subscribe(args.subject, cb=cb))
        seen = 0
        while not stop.is_set():
            get = asyncio.ensure_future(queue.get())
            stopper = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait(
                {get, stopper}, timeout=args.timeout or None, return_when=asyncio.FIRST_COMPLETED
            )
            stopper.cancel()
            if get not in done:
                get.cancel()
                break
            msg = get.result()
            try:
                value = render.decode(msg.subject, msg.data)
            except (ValueError, KeyError, msgspec.DecodeError, msgspec.ValidationError) as exc:
                print(f"# undecodable message on {msg.subject}: {exc}", file=sys.stderr)
                continue
            if not _wanted(value, args.kind, args.key):
                continue
            seq = 0
            with contextlib.suppress(Exception):
                seq = msg.metadata.sequence.stream
            line = (
                render.jsonl(value, subject=msg.subject, seq=seq)
                if args.format == "jsonl"
                else render.pretty(value)
            )
            print(line, flush=True)
            seen += 1
            if args.count and seen >= args.count:
                break
    finally:
        for s in subs:
            with contextlib.suppress(Exception):
                await s.unsubscribe()
    return 0
