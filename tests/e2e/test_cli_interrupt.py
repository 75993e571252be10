"""Ctrl-C during start-up (issue 29 item 4): at any moment of ``slurmbridge run``'s start — its
modules still loading, the simulators and nats-server starting, the components taking their
leases — SIGINT ends it without a traceback and without "never retrieved" reports, with
status 130 when the start was interrupted (0 when it had finished: then it is an ordinary
stop), and leaves nothing behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_cli_first_hour import leftovers, nats_servers_under, sandbox

pytestmark = pytest.mark.e2e


def interrupt_at(tmp_path: Path, marker: str, *, importtime: bool = False) -> tuple[int, str]:
    """Start the first try, send SIGINT once ``marker`` is on its stderr; (status, stderr)."""
    argv = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "slurmbridge"]
    proc = subprocess.Popen(
        [*argv, "run", "--metrics-port", "0", "--health-port", "0", "--log-format", "text"],
        env=sandbox(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while not seen or marker not in seen[-1]:
            line = proc.stderr.readline()
            assert line and time.monotonic() < deadline, "".join(seen)[-3000:]
            seen.append(line)
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(seen) + rest


@pytest.mark.parametrize(
    ("marker", "importtime"),
    [
        # While the command's modules load (before its signal handlers exist).
        ("kubernetes_asyncio.client.api", True),
        # While the components start: the streams exist, the leases are not all taken.
        ("created stream", False),
        ("lease reconciler.node_taint acquired", False),
    ],
    ids=["importing", "streams created", "leases"],
)
def test_ctrl_c_during_start_up(tmp_path: Path, marker: str, importtime: bool) -> None:
    code, err = interrupt_at(tmp_path, marker, importtime=importtime)
    assert "Traceback" not in err, err[-3000:]
    assert "never retrieved" not in err, err[-3000:]
    started = "FIRST TRY" in err
    assert code == (0 if started else 130), (code, err[-3000:])
    if not started:
        assert "interrupted" in [ln for ln in err.splitlines() if ln.strip()][-1]
    assert nats_servers_under(tmp_path) == []
    assert leftovers(tmp_path) == []
