"""Credentials never printed (docs/security.md): a NATS URL carrying a user and password
(``nats://user:pass@host``) — against a real nats-server that requires them — appears
redacted in ``run``'s "running" line, in the line by which a log tool names the instance it
found, in ``streams`` output and in start-up error lines (a refused credential, a NATS that does
not answer). The commands run as a person runs them, in their own processes; the simulators
run in this one."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from slurmbridge.devtools.testing import Simulators
from slurmbridge.runtime.natsserver import NatsServer, free_port

CLI = [sys.executable, "-m", "slurmbridge"]
PASSWORD = secrets.token_hex(12)
#: A Kubernetes cluster nobody serves: the NATS is what fails first.
KUBECONFIG = """{"apiVersion": "v1", "kind": "Config", "current-context": "c",
"clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
"users": [{"name": "u", "user": {}}],
"contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}"""


def env_of(tmp_path: Path, connect_timeout: str = "5") -> dict[str, str]:
    """A person's shell: none of our settings, not in a pod, a runtime directory of its own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURMBRIDGE_", "KUBERNETES_", "XDG_RUNTIME_DIR"))
    }
    env["XDG_RUNTIME_DIR"] = str(tmp_path / "xdg")
    env["SLURMBRIDGE_NATS_CONNECT_TIMEOUT"] = connect_timeout
    return env


async def cli(tmp_path: Path, *args: str, connect_timeout: str = "5") -> tuple[int, str]:
    """Run one command to its end; its exit status and everything it printed."""
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        *args,
        env=env_of(tmp_path, connect_timeout),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


@pytest.fixture
async def nats_with_password(tmp_path: Path) -> AsyncIterator[NatsServer]:
    srv = NatsServer(
        store_dir=tmp_path / "nats",
        extra_config=f'authorization {{ users = [{{user: bridge, password: "{PASSWORD}"}}] }}',
    )
    await srv.start()
    yield srv
    await srv.stop()


def with_password(url: str, password: str = PASSWORD) -> str:
    return url.replace("nats://", f"nats://bridge:{password}@")


async def test_a_nats_password_in_the_url_is_never_printed(
    tmp_path: Path, nats_with_password: NatsServer
) -> None:
    url = with_password(nats_with_password.url)
    shown = nats_with_password.url.replace("nats://", "nats://bridge:***@")
    sims = Simulators(nodes=1, workdir=tmp_path / "sims")
    await sims.start()
    run: asyncio.subprocess.Process | None = None
    printed: list[str] = []
    try:
        run = await asyncio.create_subprocess_exec(
            *CLI,
            "run",
            "--only",
            "slurm-poller",
            "--nats-url",
            url,
            "--kubeconfig",
            str(sims.kubeconfig),
            "--slurm-url",
            sims.slurm.url,
            "--slurm-token-file",
            str(sims.token_file),
            "--slurm-user",
            "slurmrest",
            "--metrics-port",
            "0",
            "--health-port",
            "0",
            "--log-format",
            "text",
            env=env_of(tmp_path),
            stderr=asyncio.subprocess.PIPE,
        )
        assert run.stderr is not None

        async def until_running() -> str:
            assert run is not None and run.stderr is not None
            while True:
                line = (await run.stderr.readline()).decode()
                assert line, f"run ended: {''.join(printed)[-2000:]}"
                printed.append(line)
                if "slurmbridge running" in line:
                    return line

        running = await asyncio.wait_for(until_running(), 60)
        assert f"(NATS {shown})" in running
        # The log tools find the running instance by its runtime file and say whose log
        # they read; streams prints the log's state, --apply each change.
        for args in (["streams"], ["streams", "--apply", "--nats-url", url]):
            code, out = await cli(tmp_path, *args)
            assert code == 0, out[-2000:]
            assert "BRIDGE_OBS" in out
            printed.append(out)
        assert f"the log of slurmbridge run (pid {run.pid}) at {shown}" in printed[-2]
    finally:
        if run is not None and run.returncode is None:
            run.send_signal(signal.SIGTERM)
            assert run.stderr is not None
            _, rest = await asyncio.wait_for(run.communicate(), 30)
            printed.append(rest.decode())
        await sims.stop()
    assert run.returncode == 0, "".join(printed)[-2000:]
    assert PASSWORD not in "".join(printed)


@pytest.mark.parametrize("case", ["refused by the server", "no NATS answers", "malformed"], ids=str)
async def test_error_lines_name_the_url_without_its_password(
    tmp_path: Path, nats_with_password: NatsServer, case: str
) -> None:
    wrong = secrets.token_hex(12)
    url, message = {
        "refused by the server": (
            with_password(nats_with_password.url, wrong),
            "refused the connection",
        ),
        "no NATS answers": (
            with_password(f"nats://127.0.0.1:{free_port()}", wrong),
            "no NATS server answered at nats://bridge:***@127.0.0.1:",
        ),
        "malformed": (f"http://bridge:{wrong}@127.0.0.1:4222", "$.nats.url: 'http://bridge:***@"),
    }[case]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    run = ["run", "--kubeconfig", str(kubeconfig), "--slurm-url", "http://127.0.0.1:1"]
    for command in (run, ["streams"], ["tail", "--timeout", "1"]):
        code, out = await cli(tmp_path, *command, "--nats-url", url, connect_timeout="2")
        assert code == 2, out[-2000:]
        assert message in out, out[-2000:]
        assert "bridge:***@" in out
        assert wrong not in out
