"""Long-running commands: ``run``, ``sim kube|slurmrestd`` and ``streams``.

``run`` never drives a fake cluster by accident (docs/architecture.md "Packages"): the built-in
simulators stand in for Kubernetes and Slurm only when nothing real is configured — no kubeconfig,
no ``kube.inCluster``, no Slurm URL, no NATS URL — and the process is not in a pod; that *first try*
says so in a banner naming the endpoints to look at. Anything real configured, or a pod, makes a
missing kubeconfig, Slurm URL or NATS URL an error naming the setting (exit 2): the embedded
nats-server's log is thrown away at exit, which only a first try may afford.

A start that fails (a port in use, an unreachable or malformed endpoint, an empty token
file, a NATS that does not answer within ``nats.connectTimeout``) prints one line naming the
cause and the setting and exits with status 2, as a configuration error does; whatever the
start had begun — the embedded nats-server and its temporary store, the simulators and their
directory — is stopped and removed first, as it is at every exit.

A running process whose embedded nats-server died and could not be started again
(``nats.embeddedRestarts``) prints one line saying so and exits with status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import importlib.util
import logging
import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from nats.js.errors import BucketNotFoundError
from nats.js.kv import KeyValue

import reconcilers
from schemas import streams
from slurmbridge import config
from slurmbridge.app import App, UsageError
from slurmbridge.cli import logs as logcmds
from slurmbridge.config import Settings, redact_url
from slurmbridge.kube.client import KubeConfigError
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime import leases
from slurmbridge.runtime.natsserver import NatsServerError
from slurmbridge.slurm.errors import MissingToken, SlurmError, Unauthorized

if TYPE_CHECKING:  # the simulators are imported only for a first try
    from slurmbridge.devtools.testing import Simulators

log = logging.getLogger("slurmbridge")
#: Whether the simulators of the first try are installed (the production image leaves
#: ``slurmbridge.devtools`` out: there ``run`` needs real endpoints).
DEVTOOLS = importlib.util.find_spec("slurmbridge.devtools") is not None

#: Nodes of the first try's simulators (n1..n4 on both sides).
FIRST_TRY_NODES = 4
#: Exit status of a run stopped by a signal before it had started (a shell's 128 + SIGINT).
INTERRUPTED = 130


def _endpoint_problem(settings: Settings, only: Iterable[str] | None) -> str | None:
    """Why ``run`` may not start with these endpoints (None: it may).

    Outside the first try every endpoint must be real: a kubeconfig (or ``kube.inCluster``),
    a Slurm URL and a NATS URL. The embedded nats-server keeps its log in a temporary
    directory removed at exit; in a pod, or next to a real cluster, that would silently
    throw away the audit trail and the observation history at every restart, and replicas
    would each hold a log of their own (leases could not make one of them active). A kept
    store (``nats.storeDir``, ``--nats-store``) is not thrown away: on a machine (a small
    site's one process, under systemd) it stands for a NATS URL; in a pod it does not (the
    pod's file system, and a second replica's, are its own).
    """
    if only is not None and set(only) == {"webhook"}:
        return None  # the webhook needs no Slurm, and Kubernetes only for a namespace selector
    has_kube = bool(settings.kube.kubeconfig or settings.kube.in_cluster)
    has_slurm = bool(settings.slurm_url)
    has_nats = bool(settings.nats.url) or (bool(settings.nats.store_dir) and not config.in_pod())
    if has_kube and has_slurm and has_nats:
        return None
    kube = "$.kube.kubeconfig (--kubeconfig) or $.kube.inCluster (--in-cluster)"
    slurm = "$.slurm.url (--slurm-url, or slurmRestApi)"
    nats = "$.nats.url (--nats-url)"
    missing = [m for m, ok in ((kube, has_kube), (slurm, has_slurm), (nats, has_nats)) if not ok]
    what = " and ".join(missing) + " required"
    throwaway = "nor an embedded NATS whose log is removed at exit"
    if config.in_pod():
        why = f"in a Kubernetes pod the built-in simulators are never used, {throwaway}"
    elif has_kube or has_slurm or has_nats:
        given = ", ".join(
            name
            for name, ok in (
                ("a Kubernetes cluster", has_kube),
                ("a Slurm URL", has_slurm),
                ("a NATS URL", has_nats),
            )
            if ok
        )
        why = f"{given} is configured, so the built-in simulators are not used, {throwaway}"
    elif not DEVTOOLS:
        why = (
            "this installation has no built-in simulators (slurmbridge.devtools is left out "
            "of the production image)"
        )
    else:
        return None  # the first try
    return f"{what}: {why}"


def _banner(app: App, sims: Simulators) -> str:
    """The first try's banner: what runs, and the endpoints to use."""
    rule = "─" * 78
    nats = redact_url(app.nats_url)
    store = app.nats_server.store_dir if app.nats_server is not None else None
    return "\n".join(
        [
            rule,
            "slurmbridge run: FIRST TRY. Nothing real is configured, so this process runs its own",
            "nats-server and the built-in Kubernetes and slurmrestd SIMULATORS "
            f"(nodes n1…n{sims.nodes}).",
            "Nothing outside this process is touched; everything is removed at exit. Try:",
            f"  kubectl --kubeconfig {sims.kubeconfig} get nodes",
            f"  kubectl --kubeconfig {sims.kubeconfig} cordon n1     # slurm_drain drains n1",
            f"  slurmbridge tail --nats-url {nats}     # (or just: slurmbridge tail)",
            "  slurmbridge explain SlurmNode/n1",
            f"  Slurm: {redact_url(sims.slurm.url)} (token in {sims.token_file})"
            + (f"; NATS store {store}" if store else ""),
            "Against real clusters (never simulated in a pod, or once any of these is set):",
            "  slurmbridge run --kubeconfig FILE --slurm-url URL --slurm-token-file FILE "
            "--nats-url URL",
            rule,
        ]
    )


def _port_setting(settings: Settings, port: int) -> str:
    o, w = settings.observability, settings.webhook
    for value, name in (
        (o.metrics_port, "$.observability.metricsPort, --metrics-port"),
        (o.health_port, "$.observability.healthPort, --health-port"),
        (w.port, "$.webhook.port"),
    ):
        if value == port:
            return name
    return "a port setting"


_BIND = re.compile(r"\(\s*'([^']*)',\s*(\d+)\s*\)")


def _slurm_url(settings: Settings) -> str:
    return redact_url(settings.slurm_url or "")


def startup_problem(exc: BaseException, settings: Settings) -> str | None:
    """One line naming the cause of a failed start and the setting to change, for the
    failures a person can fix; None for anything else (a bug: its traceback is shown)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, OSError) and exc.errno in (errno.EADDRINUSE, errno.EACCES):
        m = _BIND.search(str(exc))
        if m:
            where = f"{m.group(1)}:{m.group(2)}"
            cause = "is in use" if exc.errno == errno.EADDRINUSE else "may not be bound"
            return f"port {where} {cause} ({_port_setting(settings, int(m.group(2)))})"
    if isinstance(exc, UsageError):
        m = _BIND.search(str(exc))
        if m and "in use" in str(exc):
            where = f"{m.group(1)}:{m.group(2)}"
            return f"port {where} is in use ({_port_setting(settings, int(m.group(2)))})"
        return text
    if isinstance(exc, MissingToken):
        return f"$.slurm.tokenFile (--slurm-token-file): {text}"
    if isinstance(exc, Unauthorized):
        return (
            f"$.slurm.tokenFile (--slurm-token-file): slurmrestd at {_slurm_url(settings)} "
            f"refused the token: {text}"
        )
    if isinstance(exc, SlurmError):
        return f"$.slurm.url (--slurm-url) {_slurm_url(settings)}: {text}"
    if isinstance(exc, KubeConfigError):
        return text
    if isinstance(exc, NatsServerError):
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        last = f" ({lines[-1]})" if len(lines) > 1 else ""
        first = lines[0] if lines else "nats-server failed"
        return f"embedded {first}{last} ($.nats.url, --nats-url: use a running NATS instead)"
    if isinstance(
        exc, (logcmds.NatsUnreachableError, busmod.NatsRefusedError, busmod.StreamAdminError)
    ):
        return text
    return None


async def _start(app: App, settings: Settings, stop: asyncio.Event) -> bool:
    """``app.start()``; False when ``stop`` was set first (a signal during start-up).

    Raises:
        logcmds.NatsUnreachableError: an external NATS did not answer within
            ``nats.connectTimeout``.
        Exception: whatever ``app.start()`` raised.
    """
    starting = asyncio.ensure_future(app.start())
    stopper = asyncio.ensure_future(stop.wait())
    both = {starting, stopper}
    try:
        deadline = settings.nats.connect_timeout if settings.nats.url else None
        done, _ = await asyncio.wait(both, timeout=deadline, return_when=asyncio.FIRST_COMPLETED)
        if not done and app.bus is None:
            raise logcmds.NatsUnreachableError(logcmds.unreachable(settings, app.nats_url))
        if not done:
            done, _ = await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
        if starting in done:
            starting.result()
            return True
        return False
    finally:
        stopper.cancel()
        if not starting.done():
            starting.cancel()
            with contextlib.suppress(BaseException):
                await starting


async def run(settings: Settings, only: Iterable[str] | None, stop: asyncio.Event) -> int:
    """``slurmbridge run``: start the components and run until ``stop`` is set (module
    docstring: when the simulators stand in, and how a failed start ends)."""
    problem = _endpoint_problem(settings, only)
    if problem is None:
        try:
            code = await _run(settings, only, stop)
        except _Failed as exc:
            # After everything started was stopped: the cause is the last line.
            print(f"slurmbridge run: {exc}; exiting", file=sys.stderr)
            return 1
        except Exception as exc:
            problem = startup_problem(exc, settings)
            if problem is None:
                raise
        else:
            if code == INTERRUPTED:  # after everything started was stopped: the last line
                print("slurmbridge run: interrupted during start-up", file=sys.stderr)
            return code
    # After everything started was stopped: the cause is the last line.
    print(f"slurmbridge run: {problem}", file=sys.stderr)
    return 2


class _Failed(Exception):  # noqa: N818 - a reason to stop, not an error of this module
    """The running process cannot go on (:meth:`App.run_until`); the message says why."""


async def _run(settings: Settings, only: Iterable[str] | None, stop: asyncio.Event) -> int:
    webhook_only = only is not None and set(only) == {"webhook"}
    first_try = not webhook_only and not (
        settings.kube.kubeconfig or settings.kube.in_cluster or settings.slurm_url
    )
    sims: Simulators | None = None
    app: App | None = None
    try:
        if first_try:
            from slurmbridge.devtools.testing import Simulators

            # kubectl is the user's tool here: Jobs get their pods (the Job controller).
            sims = Simulators(nodes=FIRST_TRY_NODES, api_version=None, job_controller=True)
            await sims.start()
            settings.kube.kubeconfig = str(sims.kubeconfig)
            settings.slurm.url = sims.slurm.url
            settings.slurm.token_file = str(sims.token_file)
            settings.slurm.user_name = "slurmrest"
        app = App(settings, only=only)
        if not await _start(app, settings, stop):
            return INTERRUPTED
        # The webhook alone uses no NATS.
        nats = redact_url(app.nats_url) if app.bus is not None else "not used"
        log.info("slurmbridge running: %s (NATS %s)", ", ".join(app.components), nats)
        registered = (
            logcmds.registered(settings, "run", app.nats_url)
            if app.bus is not None
            else contextlib.nullcontext()
        )
        with registered:
            if sims is not None:
                print(_banner(app, sims), file=sys.stderr, flush=True)
            failure = await app.run_until(stop)
            if failure is not None:
                # Alive but without its log, the process would do nothing: exit, so whatever
                # supervises it (the kubelet, systemd) starts it afresh.
                raise _Failed(failure)
            log.info("stopping")
        return 0
    finally:
        if app is not None:
            await app.stop()
            if app.nats_server is not None:
                app.nats_server.cleanup()
        if sims is not None:
            await sims.stop()


async def run_sim(args: argparse.Namespace, stop: asyncio.Event) -> int:
    """``slurmbridge sim kube|slurmrestd``: one simulator until ``stop``."""
    if args.sim == "kube":
        from slurmbridge.devtools.sim import kube

        task = asyncio.create_task(
            kube.serve(args.host, args.port, nodes=args.nodes, kubeconfig=args.kubeconfig_out)
        )
        print(
            f"Kubernetes API simulator on http://{args.host}:{args.port}"
            + (f"; kubeconfig {args.kubeconfig_out}" if args.kubeconfig_out else ""),
            flush=True,
        )
    else:
        from slurmbridge.devtools.sim import slurmrestd

        task = asyncio.create_task(
            slurmrestd.serve(
                args.host,
                args.port,
                api_versions=args.api_version,
                token_file=args.token_file,
                seed_path=args.seed,
                nodes=args.nodes,
            )
        )
        print(
            f"slurmrestd simulator on http://{args.host}:{args.port}"
            + (f"; token in {args.token_file}" if args.token_file else ""),
            flush=True,
        )
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if task in done and task.exception() is not None:
        exc = task.exception()
        cause = " ".join(str(exc).split())
        if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
            cause = f"port {args.host}:{args.port} is in use (--port, --host)"
        print(f"slurmbridge sim {args.sim}: {cause}", file=sys.stderr)
        return 2
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return 0


async def streams_cmd(
    settings: Settings, stop: asyncio.Event | None = None, *, apply: bool = False
) -> int:
    """``slurmbridge streams``: print the streams, their consumers and the lease bucket, and
    how each stream differs from the settings; nothing is changed (a debugging view, needing
    only stream info). ``apply`` (``--apply``): first create what is missing and update what
    differs, printing each change, and delete the reconciler consumers an older release left
    (:func:`schemas.streams.retired_consumer`) — the one use that needs stream-administration
    rights (docs/security.md). The NATS is found as the log commands find it
    (:func:`slurmbridge.cli.logs.open_log`)."""
    try:
        async with logcmds.open_log(settings, "streams", stop) as bus:
            return await _streams(bus, settings, apply=apply)
    except logcmds.LogUnavailableError as exc:
        print(exc, file=sys.stderr)
        return 2
    except busmod.StreamAdminError as exc:
        print(f"slurmbridge streams: {exc}", file=sys.stderr)
        return 1


async def _streams(bus: busmod.Bus, settings: Settings, *, apply: bool) -> int:
    """Print (after applying, with ``apply``) the streams' and the bucket's state."""
    specs = streams.stream_specs(
        replicas=settings.nats.replicas,
        obs_max_msgs_per_subject=settings.nats.obs_max_msgs_per_subject,
        obs_max_age_s=settings.nats.obs_max_age,
        act_max_age_s=settings.nats.act_max_age,
    )
    kv: KeyValue | None
    if apply:

        def applied(plan: busmod.StreamPlan) -> None:
            if plan.info is None:
                print(f"created stream {plan.spec.name}", flush=True)
            for change in plan.changes:
                print(f"updated stream {plan.spec.name}: {change.change()}", flush=True)

        await bus.apply_streams(specs, applied)
    try:
        kv = await bus.js.key_value(leases.BUCKET)
    except BucketNotFoundError:
        kv = None
    if kv is None and apply:
        kv = await leases.open_bucket(bus.js, replicas=settings.nats.replicas)
        print(f"created key-value bucket {leases.BUCKET}")
    for plan in await bus.plan_streams(specs):
        name = plan.spec.name
        if plan.info is None:
            print(f"{name:<11} missing (slurmbridge streams --apply creates it)")
            continue
        st, cfg = plan.info.state, plan.info.config
        print(
            f"{name:<11} subjects={','.join(cfg.subjects or ()):<14} "
            f"messages={st.messages:<8} bytes={st.bytes:<10} first_seq={st.first_seq} "
            f"last_seq={st.last_seq} consumers={st.consumer_count} replicas={cfg.num_replicas}"
        )
        for change in plan.changes:
            print(f"  differs: {change.found()}  (slurmbridge streams --apply changes it)")
        for ci in await bus.js.consumers_info(name):
            retired = name == streams.OBS_STREAM and streams.retired_consumer(
                ci.name, reconcilers.ALL
            )
            if retired and apply:
                await bus.js.delete_consumer(name, ci.name)
                print(f"deleted consumer {ci.name} (an older release's; no worker reads it)")
                continue
            print(
                f"  consumer {ci.name:<22} pending={ci.num_pending:<6} "
                f"ack_pending={ci.num_ack_pending:<6} redelivered={ci.num_redelivered}"
                + ("  retired: no worker reads it (--apply deletes it)" if retired else "")
            )
    if kv is None:
        print(f"{'KV ' + leases.BUCKET:<11} missing (slurmbridge streams --apply creates it)")
    else:
        status = await kv.status()
        print(f"{'KV ' + leases.BUCKET:<11} values={status.values} history={status.history}")
    return 0
