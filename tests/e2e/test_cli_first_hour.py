"""The first hour with the ``slurmbridge`` command, as a new user lives it (issue 17, 10-14):
``run`` never simulates a cluster by accident and says when it does, an unreachable NATS is
an error with a deadline, signals always stop a command, a failed start is one line naming
the setting and leaves nothing behind, and the log tools find the running instance."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from slurmbridge import config
from slurmbridge.runtime.natsserver import NatsServer, find_binary, free_port

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "slurmbridge"]


def sandbox(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a person's shell on a machine of their own: none of our settings,
    not in a pod, a temporary directory and a runtime directory of this test's own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURMBRIDGE_", "KUBERNETES_", "XDG_RUNTIME_DIR"))
    }
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmp_path / "tmp")
    env["XDG_RUNTIME_DIR"] = str(tmp_path / "xdg")  # runtime files in xdg/slurmbridge
    env.update(extra)
    return env


def nats_servers_under(folder: Path) -> list[int]:
    """Pids of nats-server processes whose configuration lies under ``folder``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"nats-server") and str(folder).encode() in b" ".join(argv):
            pids.append(int(proc.name))
    return pids


def leftovers(tmp_path: Path) -> list[str]:
    """What a finished command left: files in its TMPDIR, runtime files, nats-servers."""
    found = [str(p) for p in (tmp_path / "tmp").iterdir()]
    runtime = tmp_path / "xdg" / "slurmbridge"
    if runtime.is_dir():
        found += [str(p) for p in runtime.iterdir()]
    found += [f"nats-server pid {pid}" for pid in nats_servers_under(tmp_path)]
    return found


@pytest.fixture(autouse=True)
def _reap(tmp_path: Path) -> Iterator[None]:
    yield
    for pid in nats_servers_under(tmp_path):  # only ever after a failure
        os.kill(pid, signal.SIGKILL)


def closed_port() -> int:
    """A loopback port nobody listens on (connections are refused)."""
    return free_port()


def write_kubeconfig(path: Path, server: str = "http://127.0.0.1:1") -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


def last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def cli(
    tmp_path: Path, *args: str, timeout: float = 60, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=sandbox(tmp_path, **env),
        check=False,
    )


# --- 10: run never drives a fake cluster by accident -----------------------------------------


def test_run_in_a_pod_never_uses_the_simulators(tmp_path: Path) -> None:
    proc = cli(tmp_path, "run", KUBERNETES_SERVICE_HOST="10.96.0.1", KUBERNETES_SERVICE_PORT="443")
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = last_line(proc.stderr)
    assert "$.kube.kubeconfig (--kubeconfig) or $.kube.inCluster (--in-cluster)" in line
    assert "$.slurm.url (--slurm-url" in line and "pod" in line
    assert leftovers(tmp_path) == []  # nothing was started


@pytest.mark.parametrize(
    ("flags", "missing"),
    [
        (["--nats-url", "nats://127.0.0.1:4222"], ["$.kube.kubeconfig", "$.slurm.url"]),
        (["--slurm-url", "http://127.0.0.1:6820"], ["$.kube.kubeconfig"]),
    ],
    ids=["a NATS URL", "a Slurm URL"],
)
def test_any_real_endpoint_makes_the_missing_ones_errors(
    tmp_path: Path, flags: list[str], missing: list[str]
) -> None:
    proc = cli(tmp_path, "run", *flags)
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = last_line(proc.stderr)
    for setting in missing:
        assert setting in line, line
    assert "simulators are not used" in line
    assert leftovers(tmp_path) == []


@pytest.fixture
def nats_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A NATS of its own (a nats-server process, store outside the test's directory, so
    :func:`leftovers` does not count it) for runs that must get past NATS."""
    store = tmp_path_factory.mktemp("external-nats")
    port = free_port()
    server = subprocess.Popen(
        [str(find_binary()), "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(store)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            assert server.poll() is None and time.monotonic() < deadline, "nats-server down"
            time.sleep(0.05)
        yield f"nats://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(30)


@pytest.mark.parametrize(
    ("flags", "env"),
    [
        (["--kubeconfig", "KUBECONFIG", "--slurm-url", "http://127.0.0.1:6820"], {}),
        (["--slurm-url", "http://127.0.0.1:6820"], {}),
        ([], {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}),
        (
            ["--config", "CONFIG"],
            {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
        ),
    ],
    ids=["a kubeconfig and a Slurm URL", "a Slurm URL", "in a pod", "in a pod, from a file"],
)
def test_without_a_nats_url_run_never_keeps_its_log_in_a_throwaway_nats(
    tmp_path: Path, flags: list[str], env: dict[str, str]
) -> None:
    """Item 7 of "Fail closed at every edge": an embedded nats-server's log is removed at
    exit, so where the log matters (a pod, a real endpoint) a missing nats.url is an error."""
    kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig"))
    settings = tmp_path / "config.yaml"
    settings.write_text(f"slurmRestApi: http://127.0.0.1:6820\nkube:\n  kubeconfig: {kubeconfig}\n")
    args = [{"KUBECONFIG": kubeconfig, "CONFIG": str(settings)}.get(f, f) for f in flags]
    proc = cli(tmp_path, "run", *args, "--metrics-port", "0", "--health-port", "0", **env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = last_line(proc.stderr)
    assert "$.nats.url (--nats-url)" in line and "required" in line, line
    assert "an embedded NATS whose log is removed at exit" in line
    assert "Traceback" not in proc.stderr
    assert leftovers(tmp_path) == []  # nothing was started


@pytest.fixture
def first_try(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``slurmbridge run`` with nothing configured; yields it and its banner."""
    if config.SERVICE_ACCOUNT_TOKEN.exists():
        pytest.skip("a pod (service-account token mounted): `slurmbridge run` has no first try")
    metrics, health = free_port(), free_port()
    proc = subprocess.Popen(
        [*CLI, "run", "--metrics-port", str(metrics), "--health-port", str(health)],
        env=sandbox(tmp_path),
        text=True,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    banner: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, f"run ended ({proc.poll()}): {''.join(banner)[-2000:]}"
            if banner or "FIRST TRY" in line:
                banner.append(line)
            if len(banner) > 1 and line.startswith("──"):
                break
        else:
            raise AssertionError("no first-try banner")
        # Keep reading stderr, so the process never blocks on a full pipe.
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        yield proc, "".join(banner)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def test_the_first_try_says_so_and_names_its_endpoints(
    tmp_path: Path, first_try: tuple[subprocess.Popen[str], str]
) -> None:
    proc, banner = first_try
    assert "SIMULATORS" in banner and "n1…n4" in banner
    kubeconfig = banner.split("kubectl --kubeconfig ", 1)[1].split()[0]
    assert Path(kubeconfig).is_file()
    nats = banner.split("--nats-url ", 1)[1].split()[0]
    assert nats.startswith("nats://127.0.0.1:")
    assert "slurmbridge run --kubeconfig FILE --slurm-url URL" in banner
    if shutil.which("kubectl"):
        nodes = subprocess.run(
            ["kubectl", "--kubeconfig", kubeconfig, "get", "nodes", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
        assert nodes == ["node/n1", "node/n2", "node/n3", "node/n4"]
    # 14: the log tools find it without --nats-url.
    env = sandbox(tmp_path)
    got = subprocess.run(
        [*CLI, "tail", "bridge.obs.>", "--from-start", "--count", "1", "--format", "jsonl"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert json.loads(got.stdout)["kind"]
    assert f"at {nats}" in got.stderr  # it says which log it reads
    for args in (["streams"], ["explain", "SlurmNode/n1"], ["replay"]):
        done = subprocess.run(
            [*CLI, *args], capture_output=True, text=True, timeout=60, env=env, check=False
        )
        assert done.returncode == 0, (args, done.stderr[-2000:])
    # 12: a clean stop leaves nothing: no temporary store, no simulator files, no runtime file.
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert leftovers(tmp_path) == []


# --- 11: an unreachable NATS has a deadline, and signals always stop -------------------------


def _unreachable(tmp_path: Path, command: str) -> list[str]:
    url = f"nats://127.0.0.1:{closed_port()}"
    if command == "run":
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig")
        return [
            "run",
            "--nats-url",
            url,
            "--kubeconfig",
            str(kubeconfig),
            "--slurm-url",
            "http://127.0.0.1:1",
            "--metrics-port",
            "0",
            "--health-port",
            "0",
        ]
    return [*command.split(), "--nats-url", url]


COMMANDS = ["run", "tail", "streams", "replay", "explain SlurmNode/n1"]


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unreachable_nats_is_an_error_after_the_connect_timeout(
    tmp_path: Path, command: str
) -> None:
    # A hang is caught by cli()'s own timeout (it raises); no wall-clock assertion here, so a
    # busy machine cannot fail what a 1 s connect timeout means.
    proc = cli(
        tmp_path, *_unreachable(tmp_path, command), timeout=90, SLURMBRIDGE_NATS_CONNECT_TIMEOUT="1"
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = last_line(proc.stderr)
    assert "no NATS server answered at nats://127.0.0.1:" in line
    assert "$.nats.connectTimeout" in line and "Traceback" not in proc.stderr
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("command", ["run", "tail", "replay"])
def test_a_signal_stops_a_command_waiting_for_nats(
    tmp_path: Path, command: str, sig: signal.Signals
) -> None:
    proc = subprocess.Popen(
        [*CLI, *_unreachable(tmp_path, command)],
        env=sandbox(tmp_path, SLURMBRIDGE_NATS_CONNECT_TIMEOUT="120"),
        text=True,
        stderr=subprocess.PIPE,
    )
    try:
        # Until it is connecting (its first refused attempt is logged).
        assert proc.stderr is not None
        deadline = time.monotonic() + 30
        while "Connection refused" not in proc.stderr.readline():
            assert time.monotonic() < deadline and proc.poll() is None
        proc.send_signal(sig)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in (0, 130), proc.returncode
    assert leftovers(tmp_path) == []


# --- 12 and 13: a failed start is one line naming the setting, and leaves nothing ------------


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        yield s.getsockname()[1]


def _failure(case: str, tmp_path: Path, busy: int, nats: str) -> tuple[list[str], str]:
    kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig"))
    empty = tmp_path / "empty-token"
    empty.write_text("")
    real = [
        *("--kubeconfig", kubeconfig, "--nats-url", nats),
        *("--metrics-port", "0", "--health-port", "0"),
    ]
    return {
        "metrics port in use": (
            ["run", "--metrics-port", str(busy), "--health-port", "0"],
            f"port 0.0.0.0:{busy} is in use ($.observability.metricsPort, --metrics-port)",
        ),
        "unreachable Slurm URL": (
            ["run", *real, "--slurm-url", f"http://127.0.0.1:{closed_port()}"],
            "$.slurm.url (--slurm-url) http://127.0.0.1:",
        ),
        "malformed Slurm URL": (
            ["run", *real, "--slurm-url", "slurmrestd:6820"],
            "$.slurm.url: 'slurmrestd:6820' is not an http:// or https:// URL",
        ),
        "empty token file": (
            ["run", *real, "--slurm-url", "http://127.0.0.1:1", "--slurm-token-file", str(empty)],
            f"$.slurm.tokenFile (--slurm-token-file): token file {empty} is empty",
        ),
        "bad log level": (["run", "--log-level", "LOUD"], "$.observability.logLevel: must be"),
    }[case]


@pytest.mark.parametrize(
    "case",
    [
        "metrics port in use",
        "unreachable Slurm URL",
        "malformed Slurm URL",
        "empty token file",
        "bad log level",
    ],
)
def test_a_failed_start_is_one_line_and_leaves_nothing(
    tmp_path: Path, busy_port: int, nats_url: str, case: str
) -> None:
    args, message = _failure(case, tmp_path, busy_port, nats_url)
    proc = cli(tmp_path, *args, timeout=60)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert message in last_line(proc.stderr), proc.stderr[-3000:]
    assert leftovers(tmp_path) == []


def test_sim_port_in_use_is_one_line(tmp_path: Path, busy_port: int) -> None:
    proc = cli(tmp_path, "sim", "kube", "--port", str(busy_port), "--host", "0.0.0.0", timeout=30)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"port 0.0.0.0:{busy_port} is in use (--port, --host)" in last_line(proc.stderr)


# --- 14: the simulators pair, the log tools work as their help says -------------------------


def test_sim_kube_names_its_nodes_as_sim_slurmrestd_does(tmp_path: Path) -> None:
    port = free_port()
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [*CLI, "sim", "kube", "--port", str(port), "--nodes", "4", "--kubeconfig-out",
         str(kubeconfig)],
        env=sandbox(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not kubeconfig.exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        items = httpx.get(f"http://127.0.0.1:{port}/api/v1/nodes").json()["items"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    assert [n["metadata"]["name"] for n in items] == ["n1", "n2", "n3", "n4"]
    # What `sim slurmrestd --nodes 4` seeds: 2 CPUs, 1000 MiB each.
    assert {n["status"]["capacity"]["cpu"] for n in items} == {"2"}
    assert {n["status"]["capacity"]["memory"] for n in items} == {"1000Mi"}


@pytest.fixture
def kept_store(tmp_path: Path) -> Path:
    """A stopped NATS's store holding the streams and one observation."""
    from schemas import streams
    from schemas.events import SlurmNode, encode_event
    from slurmbridge.config import NatsSettings
    from slurmbridge.runtime import bus as busmod

    store = tmp_path / "kept" / "nats"

    async def keep() -> None:
        async with NatsServer(store_dir=store) as server:
            bus = await busmod.connect(NatsSettings(), server.url)
            await bus.ensure_streams(streams.stream_specs())
            node = SlurmNode(source="slurm:default", key="n1", state=("IDLE",), observed_at=1)
            await bus.js.publish("bridge.obs.slurm:default.SlurmNode.n1", encode_event(node))
            await bus.close()

    asyncio.run(keep())
    return store


def test_tail_and_streams_read_a_kept_store(tmp_path: Path, kept_store: Path) -> None:
    store = ["--nats-store", str(kept_store)]
    tail = cli(tmp_path, "tail", "--from-start", "--format", "jsonl", "--timeout", "2", *store)
    assert tail.returncode == 0, tail.stderr[-2000:]
    (obj,) = [json.loads(ln) for ln in tail.stdout.splitlines()]
    assert (obj["kind"], obj["key"]) == ("SlurmNode", "n1")
    streams = cli(tmp_path, "streams", *store)
    assert streams.returncode == 0, streams.stderr[-2000:]
    assert "BRIDGE_OBS" in streams.stdout and "messages=1 " in streams.stdout
    assert nats_servers_under(tmp_path) == []


def test_tail_refuses_a_kind_that_does_not_exist(tmp_path: Path, kept_store: Path) -> None:
    proc = cli(tmp_path, "tail", "--kind", "Node", "--from-start", "--timeout", "2",
               "--nats-store", str(kept_store))  # fmt: skip
    assert proc.returncode == 2
    line = last_line(proc.stderr)
    assert "--kind 'Node': unknown kind" in line and "KubeNode" in line and "SlurmNode" in line


def test_without_a_running_instance_the_log_tools_say_what_to_pass(tmp_path: Path) -> None:
    for command in (["tail"], ["streams"], ["explain", "SlurmNode/n1"], ["replay"]):
        proc = cli(tmp_path, *command, timeout=30)
        assert proc.returncode == 2, (command, proc.stderr[-2000:])
        line = last_line(proc.stderr)
        assert "no running `slurmbridge run` or `demo` found" in line, line
        assert "--nats-url" in line and "--nats-store" in line


def test_the_log_tools_help_tells_the_truth() -> None:
    for command in ("tail", "streams", "replay", "explain"):
        text = subprocess.run(
            [*CLI, command, "--help"], capture_output=True, text=True, check=True, timeout=30
        ).stdout
        assert "embedded nats-server on loopback" not in text
        assert "running on this machine" in " ".join(text.split()), command
