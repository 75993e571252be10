"""``slurmbridge run``'s embedded nats-server killed with SIGKILL: the process starts it again
on the same port and store (``/readyz`` is 503 meanwhile, naming it) and goes on working — a
cordon is drained afterwards; when it cannot be started again, ``run`` exits with status 1
instead of living on without its log."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from slurmbridge.runtime.natsserver import free_port, wait_stopped

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "slurmbridge"]
REASON_N1 = "slurm-bridge: Corresponding Kubernetes node (n1) is unschedulable"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURMBRIDGE_")}
    return {**env, **extra}


def _until(
    proc: subprocess.Popen[str], what: str, cond: Callable[[], bool], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {proc.returncode}")
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _children(pid: int, name: str) -> list[int]:
    """Live child processes of ``pid`` called ``name`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if int(ppid) == pid and comm == name and state != "Z":
            out.append(int(entry.name))
    return out


class Run:
    """The simulators and ``slurmbridge run`` with an embedded nats-server on ``store``."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.tmp = tmp_path
        self.env = env
        self.procs: list[subprocess.Popen[str]] = []
        self.kube_port, self.slurm_port, self.health = (free_port() for _ in range(3))
        self.kubeconfig, self.token = tmp_path / "kubeconfig", tmp_path / "token"
        self.store = tmp_path / "nats"
        self.log = tmp_path / "run.log"
        self.run: subprocess.Popen[str] | None = None

    def start(self) -> subprocess.Popen[str]:
        kube = ["sim", "kube", "--port", str(self.kube_port)]
        kube += ["--kubeconfig-out", str(self.kubeconfig)]
        slurm = ["sim", "slurmrestd", "--port", str(self.slurm_port), "--nodes", "2"]
        slurm += ["--api-version", "v0.0.44", "--token-file", str(self.token)]
        sims = [kube, slurm]
        for args in sims:
            self.procs.append(subprocess.Popen([*CLI, *args], env=self.env, text=True))
        _until(self.procs[0], "sim kube", self.kubeconfig.exists, 20)
        _until(self.procs[1], "sim slurmrestd", self.token.exists, 20)
        for name in ("n1", "n2"):
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name},
                "status": {"capacity": {"cpu": "2", "memory": "1000Mi"}},
            }
            httpx.post(f"{self.kube}/api/v1/nodes", json=node).raise_for_status()
        with self.log.open("w") as log:
            args = [*CLI, "run", "--kubeconfig", str(self.kubeconfig)]
            args += ["--slurm-url", f"http://127.0.0.1:{self.slurm_port}"]
            args += ["--slurm-token-file", str(self.token), "--slurm-user", "slurmrest"]
            args += ["--poll-interval", "0.2", "--metrics-port", "0"]
            args += ["--health-port", str(self.health), "--nats-store", str(self.store)]
            self.run = subprocess.Popen(
                args,
                env=self.env,
                text=True,
                stderr=log,
            )
        self.procs.append(self.run)
        _until(self.run, "/readyz 200", lambda: self.readyz()[0] == 200, 60)
        return self.run

    @property
    def kube(self) -> str:
        return f"http://127.0.0.1:{self.kube_port}"

    def readyz(self) -> tuple[int, str]:
        try:
            resp = httpx.get(f"http://127.0.0.1:{self.health}/readyz")
        except httpx.HTTPError:
            return 0, ""
        return resp.status_code, resp.text

    def nats_url(self) -> str:
        conf = (self.store / "nats-server.conf").read_text()
        m = re.search(r'listen: "([^"]+)"', conf)
        assert m, conf
        return f"nats://{m.group(1)}"

    def kill_nats_and_break_its_store(self) -> int:
        """SIGKILL the embedded nats-server with ``run`` stopped meanwhile, and put a file
        where its JetStream directory was, so starting it again fails until restored."""
        assert self.run is not None
        (victim,) = _children(self.run.pid, "nats-server")
        os.kill(self.run.pid, signal.SIGSTOP)
        # Stopped for real before nats-server dies, or it may still see the death and start
        # another (natsserver.wait_stopped: kill returns before the threads stop).
        assert wait_stopped(self.run.pid), "slurmbridge run did not stop on SIGSTOP"
        try:
            os.kill(victim, signal.SIGKILL)
            (self.store / "jetstream").rename(self.store / "jetstream.kept")
            (self.store / "jetstream").write_text("not a directory\n")
        finally:
            os.kill(self.run.pid, signal.SIGCONT)
        return victim

    def restore_store(self) -> None:
        (self.store / "jetstream").unlink()
        (self.store / "jetstream.kept").rename(self.store / "jetstream")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


def _drained(nats_url: str, env: dict[str, str]) -> bool:
    args = [*CLI, "tail", "bridge.act.>", "--nats-url", nats_url, "--from-start"]
    args += ["--format", "jsonl", "--timeout", "1"]
    out = subprocess.run(
        args,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    ).stdout
    recs = [json.loads(line) for line in out.splitlines() if line.strip()]
    return any(
        r["action"]["action"] == "DrainSlurmNode"
        and r["outcome"] == "ok"
        and r["action"]["reason"] == REASON_N1
        for r in recs
    )


def test_a_killed_embedded_nats_server_is_restarted_on_its_store(tmp_path: Path) -> None:
    env = _env()
    r = Run(tmp_path, env)
    try:
        run = r.start()
        url = r.nats_url()
        victim = r.kill_nats_and_break_its_store()

        # Down, and the restarts fail: not ready, and the body says why.
        def down() -> bool:
            status, body = r.readyz()
            return status == 503 and "\nnats: embedded nats-server " in body

        _until(run, "/readyz 503 naming the embedded nats-server", down, 20)
        status, body = r.readyz()
        assert status == 503 and "; restart " in body, body

        # The store is back: the next restart brings the server up on it, on the same port.
        r.restore_store()
        _until(run, "/readyz 200 after the restart", lambda: r.readyz()[0] == 200, 30)
        (server,) = _children(run.pid, "nats-server")
        assert server != victim
        assert r.nats_url() == url

        # Work resumes: a cordon is drained.
        httpx.patch(
            f"{r.kube}/api/v1/nodes/n1",
            json={"spec": {"unschedulable": True}},
            headers={"Content-Type": "application/merge-patch+json"},
        ).raise_for_status()
        _until(run, "n1 drained after the restart", lambda: _drained(url, env), 60)

        run.send_signal(signal.SIGTERM)
        run.wait(30)
        assert run.returncode == 0, r.log.read_text()[-3000:]
        log = r.log.read_text()
        assert "embedded nats-server exited with status -9" in log, log[-3000:]
        assert "embedded nats-server running again on " in log, log[-3000:]
    finally:
        r.stop()


def test_an_embedded_nats_server_that_cannot_be_restarted_ends_run_with_status_1(
    tmp_path: Path,
) -> None:
    r = Run(tmp_path, _env(SLURMBRIDGE_NATS_EMBEDDED_RESTARTS="2"))
    try:
        run = r.start()
        r.kill_nats_and_break_its_store()
        with contextlib.suppress(subprocess.TimeoutExpired):
            run.wait(60)
        assert run.returncode == 1, (run.returncode, r.log.read_text()[-3000:])
        # One line says why (asyncio may log about a cancelled future after it, when the
        # interpreter collects it).
        said = [ln for ln in r.log.read_text().splitlines() if ln.startswith("slurmbridge run:")]
        assert len(said) == 1, r.log.read_text()[-3000:]
        last = said[0]
        assert last.startswith("slurmbridge run: embedded nats-server on nats://"), last
        assert "exited with status -9" in last and "[FTL]" in last, last
        assert "2 restarts" in last and last.endswith("; exiting"), last
        assert not _children(run.pid, "nats-server")
    finally:
        r.stop()
