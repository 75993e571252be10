"""How the log commands reach the log, and the ``replay`` and ``explain`` commands.

``tail``, ``replay``, ``explain`` and ``streams`` all open the log with :func:`open_log`, in
this order of preference:

1. ``nats.url`` (``--nats-url``, ``SLURMBRIDGE_NATS_URL``, the config file);
2. ``--nats-store DIR``: a log kept on disk (``slurmbridge demo --keep-log DIR`` keeps it in
   ``DIR/nats``), read through an embedded nats-server started on it for the command;
3. the ``slurmbridge run`` or ``demo`` running on this machine: while they run, each leaves a
   *runtime file* ``<runtime dir>/<pid>.json`` naming its NATS (:func:`registered`), removed
   when it stops (a file whose process is gone is ignored and removed).

Connecting has a deadline (``nats.connectTimeout``): an unreachable NATS is reported with
exit status 2 instead of being waited for forever, and a signal stops the wait at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import reconcilers
from reconcilers import _tenancy
from slurmbridge.app import context_of
from slurmbridge.config import Settings, redact_url
from slurmbridge.logview import explain as explain_mod
from slurmbridge.logview import replay as replay_mod
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.natsserver import NatsServer


class LogUnavailableError(RuntimeError):
    """No NATS URL, no store directory and no running instance (the message says how)."""


class NatsUnreachableError(RuntimeError):
    """No NATS server answered within ``nats.connectTimeout`` (the message names it)."""


class Interrupted(Exception):  # noqa: N818 - a signal, not a failure
    """A signal arrived while connecting."""


# --- runtime files: how the log commands find a running instance --------------------------


@dataclass(frozen=True)
class Running:
    """A ``slurmbridge run`` or ``demo`` found through its runtime file."""

    pid: int
    command: str
    nats_url: str
    path: Path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process of that pid: alive
    return True


def running(settings: Settings) -> list[Running]:
    """The instances whose runtime files are in ``settings.runtime_dir`` and whose process
    is alive (the files of dead ones are removed), oldest pid first."""
    found: list[Running] = []
    folder = Path(settings.runtime_dir or "")
    if not settings.runtime_dir or not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
            item = Running(int(doc["pid"]), str(doc["command"]), str(doc["nats_url"]), path)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(item.pid):
            found.append(item)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return sorted(found, key=lambda r: r.pid)


@contextlib.contextmanager
def registered(settings: Settings, command: str, nats_url: str) -> Iterator[Path | None]:
    """Leave a runtime file naming ``nats_url`` while the block runs (``run``, ``demo``).

    A runtime directory that cannot be written is not an error: the log commands then need
    ``--nats-url``, which the start-up banner prints anyway.
    """
    path: Path | None = None
    if settings.runtime_dir:
        folder = Path(settings.runtime_dir)
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            path = folder / f"{os.getpid()}.json"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(
                json.dumps({"pid": os.getpid(), "command": command, "nats_url": nats_url}) + "\n"
            )
            tmp.replace(path)
        except OSError:
            path = None
    try:
        yield path
    finally:
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()


# --- connecting ---------------------------------------------------------------------------


async def connect(
    settings: Settings, url: str, *, name: str, stop: asyncio.Event | None = None
) -> busmod.Bus:
    """:func:`slurmbridge.runtime.bus.connect` with the deadline ``nats.connectTimeout``.

    Raises:
        NatsUnreachableError: no server answered in time (the message names the setting).
        Interrupted: ``stop`` was set first.
        NatsRefusedError: a server refused the credentials (from :mod:`slurmbridge.runtime.bus`).
    """
    connecting = asyncio.ensure_future(busmod.connect(settings.nats, url, name=name))
    stopper = asyncio.ensure_future(stop.wait()) if stop is not None else None
    waits: set[asyncio.Future[Any]] = {connecting} | ({stopper} if stopper else set())
    try:
        done, _ = await asyncio.wait(
            waits, timeout=settings.nats.connect_timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        if stopper is not None:
            stopper.cancel()
    if connecting in done:
        return connecting.result()
    connecting.cancel()
    with contextlib.suppress(BaseException):
        await connecting
    if stopper is not None and stopper in done:
        raise Interrupted
    raise NatsUnreachableError(unreachable(settings, url))


def unreachable(settings: Settings, url: str) -> str:
    """The message for a NATS that did not answer in time."""
    return (
        f"no NATS server answered at {redact_url(url)} within {settings.nats.connect_timeout:g} s "
        "($.nats.url, --nats-url; the wait is $.nats.connectTimeout, --nats-connect-timeout)"
    )


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


def _find_log(settings: Settings, command: str) -> str:
    """The NATS URL of the one instance running on this machine (module docstring)."""
    found = running(settings)
    how = (
        "pass --nats-url URL, or --nats-store DIR for a kept log (the nats/ directory of "
        "`slurmbridge demo --keep-log DIR`)"
    )
    if not found:
        raise LogUnavailableError(
            f"slurmbridge {command}: no running `slurmbridge run` or `demo` found on this "
            f"machine (runtime files in {settings.runtime_dir}): {how}"
        )
    if len(found) > 1:
        listed = "; ".join(f"{r.command} (pid {r.pid}) at {redact_url(r.nats_url)}" for r in found)
        raise LogUnavailableError(
            f"slurmbridge {command}: {len(found)} instances are running ({listed}): "
            "pass --nats-url with one of those URLs"
        )
    one = found[0]
    print(
        f"# {command}: the log of slurmbridge {one.command} (pid {one.pid}) at "
        f"{redact_url(one.nats_url)}",
        file=sys.stderr,
        flush=True,
    )
    return one.nats_url


@contextlib.asynccontextmanager
async def open_log(
    settings: Settings, command: str, stop: asyncio.Event | None = None
) -> AsyncIterator[busmod.Bus]:
    """A connection to the log: ``nats.url``, an embedded server on ``nats.storeDir``, or the
    instance running on this machine (module docstring).

    Raises:
        LogUnavailableError: none of them (the message says what to pass).
        NatsUnreachableError: the NATS did not answer within ``nats.connectTimeout``.
        Interrupted: ``stop`` was set while connecting.
    """
    server: NatsServer | None = None
    url = settings.nats.url
    if not url and settings.nats.store_dir:
        store = Path(settings.nats.store_dir)
        if not (store / "jetstream").is_dir():
            raise LogUnavailableError(
                f"slurmbridge {command}: --nats-store {store}: no JetStream store there "
                "(expected the nats/ directory kept by `slurmbridge demo --keep-log DIR`)"
            )
        server = NatsServer(store_dir=store)
        await server.start()
        url = server.url
    elif not url:
        url = _find_log(settings, command)
    try:
        bus = await connect(settings, url, name=f"slurmbridge {command}", stop=stop)
        try:
            yield bus
        finally:
            await bus.close()
    finally:
        if server is not None:
            await server.stop()


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
    """``slurmbridge explain KIND/KEY`` (``pod/NS/NAME``: the pod's steps, then its timeline)."""
    story: explain_mod.PodStory | None = None
    try:
        kind, key = explain_mod.parse_ref(args.ref)
        async with open_log(settings, "explain") as bus:
            if explain_mod.is_pod_ref(args.ref):
                story = await explain_mod.pod_steps(bus, key)
            lines = await explain_mod.explain(bus, kind, key)
    except explain_mod.ExplainError as exc:
        print(f"slurmbridge explain: {exc}", file=sys.stderr)
        return 2
    except LogUnavailableError as exc:
        print(exc, file=sys.stderr)
        return 2
    if story is not None:
        explain_mod.print_steps(story)
        # The policy as the settings given to this command say; the steps above name the
        # policy each decision applied (it may have changed since).
        print(f"  policy now: {_tenancy.describe(settings.tenancy, key.partition('/')[0])}")
        print()
    explain_mod.print_timeline(lines, kind, key)
    return 0
