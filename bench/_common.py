"""Helpers shared by the benchmarks (never part of the test run)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from typing import Any


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
        from slurmbridge.natsserver import find_binary

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
