"""The ``replay`` and ``explain`` commands: connect to the log, run, print.

The log is reached at ``nats.url``, or — for a log kept on disk, e.g. by
``slurmbridge demo --keep-log DIR`` — through an embedded nats-server started on the store
directory ``--nats-store`` for the duration of the command.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import reconcilers
from reconcilers.base import Context
from slurmbridge import bus as busmod
from slurmbridge import explain as explain_mod
from slurmbridge import replay as replay_mod
from slurmbridge.config import Settings
from slurmbridge.natsserver import NatsServer


class LogUnavailableError(RuntimeError):
    """Neither a NATS URL nor a store directory was given (the message says how)."""


def parse_time(text: str) -> float:
    """Epoch seconds from ``1700000000`` or ISO 8601 (``2026-11-22T03:14:00Z``; naive = UTC).

    Raises:
        ValueError: neither form (the message shows both).
    """
    try:
        return float(text)
    except ValueError:
        pass
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r}: expected epoch seconds or ISO 8601 such as 2026-11-22T03:14:00Z"
        ) from None
    return (t if t.tzinfo else t.replace(tzinfo=dt.UTC)).timestamp()


@contextlib.asynccontextmanager
async def open_log(settings: Settings, command: str) -> AsyncIterator[busmod.Bus]:
    """A connection to the log (``nats.url``, or an embedded server on ``nats.storeDir``).

    Raises:
        LogUnavailableError: neither is configured.
    """
    server: NatsServer | None = None
    url = settings.nats.url
    if not url:
        store = settings.nats.store_dir
        if not store or not Path(store).is_dir():  # noqa: ASYNC240 - once, before any I/O
            raise LogUnavailableError(
                f"slurmbridge {command}: --nats-url, or --nats-store DIR with a JetStream store "
                "(e.g. the nats/ directory kept by `slurmbridge demo --keep-log DIR`), is required"
            )
        server = NatsServer(store_dir=Path(store))
        await server.start()
        url = server.url
    try:
        bus = await busmod.connect(settings.nats, url, name=f"slurmbridge {command}")
        try:
            yield bus
        finally:
            await bus.close()
    finally:
        if server is not None:
            await server.stop()


def context_of(settings: Settings) -> Context:
    """The reconcilers' context a run with ``settings`` used."""
    return Context(
        scheduler_name=settings.scheduler_name,
        cluster=settings.slurm.cluster,
        stuck_pod_grace_s=settings.kube.stuck_pod_grace,
        default_partition=settings.partition or "",
        mcs_label=settings.mcs_label or "",
    )


async def replay_cmd(settings: Settings, args: argparse.Namespace) -> int:
    """``slurmbridge replay``: exit 0 when every decision is reproduced, 1 otherwise."""
    try:
        wanted = replay_mod.Range(
            since=parse_time(args.since) if args.since else None,
            until=parse_time(args.until) if args.until else None,
            from_seq=args.from_seq,
            to_seq=args.to_seq,
            reconciler=args.reconciler,
        )
    except ValueError as exc:
        print(f"slurmbridge replay: {exc}", file=sys.stderr)
        return 2
    if args.reconciler and args.reconciler not in reconcilers.ALL:
        print(
            f"slurmbridge replay: --reconciler {args.reconciler!r}: one of "
            f"{', '.join(reconcilers.ALL)}",
            file=sys.stderr,
        )
        return 2
    try:
        async with open_log(settings, "replay") as bus:
            report = await replay_mod.replay(
                bus, reconcilers.ALL, context_of(settings), wanted, progress=sys.stderr
            )
    except LogUnavailableError as exc:
        print(exc, file=sys.stderr)
        return 2
    replay_mod.render(report, verbose=args.verbose)
    return 1 if report.differing else 0


async def explain_cmd(settings: Settings, args: argparse.Namespace) -> int:
    """``slurmbridge explain KIND/KEY``."""
    try:
        kind, key = explain_mod.parse_ref(args.ref)
        async with open_log(settings, "explain") as bus:
            lines = await explain_mod.explain(bus, kind, key)
    except explain_mod.ExplainError as exc:
        print(f"slurmbridge explain: {exc}", file=sys.stderr)
        return 2
    except LogUnavailableError as exc:
        print(exc, file=sys.stderr)
        return 2
    explain_mod.print_timeline(lines, kind, key)
    return 0
