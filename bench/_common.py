"""Helpers shared by the benchmarks (never part of the test run)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    nats_version = ""
    try:
        from slurmbridge.runtime.natsserver import find_binary

        nats_version = subprocess.run(
            [str(find_binary()), "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except Exception:
        pass
    from importlib.metadata import version

    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "nats_py": version("nats-py"),
        "nats_server": nats_version,
    }


def emit(result: dict[str, Any], as_json: bool) -> None:
    """Print the result: one JSON object (``--json``) or aligned lines."""
    if as_json:
        print(json.dumps(result, sort_keys=True))
        return
    for k, v in result.items():
        print(f"{k:>28}: {v}")
    sys.stdout.flush()


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0–100) by nearest rank."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(p / 100 * len(s) + 0.5) - 1))
    return s[k]


async def start_slurmbridge(
    overrides: dict[str, Any],
    nats_url: str,
    workdir: Path,
    poll_interval: float,
    *,
    profile: str = "",
    metrics_port: int = 0,
    name: str = "slurmbridge",
) -> asyncio.subprocess.Process:
    """``slurmbridge run`` (every component) as its own process, as in production, pointed at
    ``overrides`` (the simulators' settings) and ``nats_url``; quiet logs, no listeners.
    ``profile``: run it under cProfile, writing that file on exit. ``metrics_port``: serve
    ``/metrics`` there (0: no listener). ``name``: of its config file in ``workdir`` (one per
    replica). Its log level is WARNING unless ``BENCH_SLURMBRIDGE_LOG_LEVEL`` says otherwise
    (``DEBUG``: every effect, to see what the bridge spent a run on)."""
    settings = dict(overrides)
    settings["nats"] = {"url": nats_url}
    settings["slurm"] = {**settings.get("slurm", {}), "pollInterval": poll_interval}
    settings["observability"] = {
        "metricsPort": metrics_port,
        "healthPort": 0,
        "logLevel": os.environ.get("BENCH_SLURMBRIDGE_LOG_LEVEL", "WARNING"),
    }
    cfg = workdir / f"{name}.yaml"
    cfg.write_text(json.dumps(settings))  # JSON is YAML
    prof = ("-m", "cProfile", "-o", profile) if profile else ()
    return await asyncio.create_subprocess_exec(
        sys.executable, *prof, "-m", "slurmbridge", "run", "--config", str(cfg)
    )


def real_slurm_fields(args: argparse.Namespace, version: str, api: str) -> dict[str, Any]:
    """The head of a ``--slurm real`` result: which Slurm (``args.release``, the daemons'
    ``version``, the REST ``api`` version) on how many nodes."""
    return {
        "slurm": "real",
        "release": args.release,
        "slurm_version": version,
        "rest_api": api,
        "nodes": args.nodes,
    }


def add_slurm_options(ap: argparse.ArgumentParser) -> None:
    """``--slurm sim|real`` and ``--release``: the benches that also run against a real
    Slurm cluster (root; bench/_realslurm.py)."""
    ap.add_argument(
        "--slurm",
        choices=("sim", "real"),
        default="sim",
        help="sim: the slurmrestd simulator (default); real: a real Slurm cluster (root)",
    )
    ap.add_argument("--release", default="26.05", help="real Slurm release (26.05)")


class _Stoppable(Protocol):
    async def stop(self) -> None: ...


async def tear_down(
    procs: Iterable[asyncio.subprocess.Process | None], *servers: _Stoppable, workdir: Path
) -> None:
    """A bench's end, whatever happened: terminate the slurmbridge processes still running
    (and reap them), stop ``servers`` in order (the simulators before NATS), remove
    ``workdir``."""
    for proc in procs:
        if proc is not None and proc.returncode is None:
            proc.terminate()
            await proc.wait()
    for server in servers:
        await server.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait until ``cond()``; TimeoutError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)
