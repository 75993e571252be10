"""Real Slurm for the benchmarks (``--slurm real``): a throw-away cluster and a REST probe.

:func:`cluster` starts a :class:`~slurmbridge.devtools.realslurm_modern.ModernSlurm` of the given
release (root; its root file system built once with
``python -m slurmbridge.devtools.realslurm_modern install RELEASE``) and always stops it, checking
that
none of its processes is left. :class:`Probe` reads Slurm as any REST client would (its own
connection to slurmrestd, the highest REST version the cluster serves) and timestamps what it
sees with ``time.monotonic()``, the clock the benchmarks use everywhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from slurmbridge.devtools.realslurm_modern import ModernSlurm, installed

ENDED = frozenset({"CANCELLED", "COMPLETED", "FAILED", "TIMEOUT", "PREEMPTED", "NODE_FAIL"})


@contextlib.asynccontextmanager
async def cluster(release: str, nodes: int) -> AsyncIterator[ModernSlurm]:
    """A started ``release`` cluster of ``nodes`` nodes, stopped (in a ``finally``) on exit."""
    if not installed(release):
        raise SystemExit(
            f"no Slurm {release} root file system: run (as root) "
            f"'python -m slurmbridge.devtools.realslurm_modern install {release}'"
        )
    slurm = ModernSlurm(release, nodes=nodes)
    try:
        await asyncio.to_thread(slurm.start)
        print(f"  {slurm.startup_output.splitlines()[0]}", file=sys.stderr, flush=True)
        yield slurm
    finally:
        await asyncio.to_thread(slurm.stop)
        left = slurm.cluster_processes()
        if left:
            print(f"  WARNING: Slurm processes left: {left}", file=sys.stderr, flush=True)


@dataclass
class Seen:
    """When the probe first saw something: between ``after`` (the send time of the last
    answer that did not show it yet) and ``by`` (the receipt of the first that did)."""

    after: float
    by: float
    wall: float = 0.0  # time.time() at ``by``

    @property
    def mid(self) -> float:
        return (self.after + self.by) / 2

    @property
    def half_width(self) -> float:
        return (self.by - self.after) / 2


@dataclass
class Probe:
    """slurmrestd read by the benchmark itself, over its own kept-alive connection.

    aiohttp rather than httpx: the probe asks every 10 ms, from the process that also runs the
    Kubernetes simulator the bridge is measured against. Through httpx it took 18 % of that
    process's py-spy samples in ``bench/workload.py --slurm real`` (2026-11-29); through
    aiohttp about 57 % less per request, so the bridge's Kubernetes requests wait less behind it."""

    slurm: ModernSlurm
    rtts: list[float] = field(default_factory=list)
    _client: aiohttp.ClientSession | None = None

    @property
    def version(self) -> str:
        return self.slurm.api_versions[-1]

    async def __aenter__(self) -> Probe:
        self._client = aiohttp.ClientSession(
            base_url=self.slurm.url,
            headers=self.slurm.auth_headers,
            timeout=aiohttp.ClientTimeout(total=10.0),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.close()

    async def get(self, path: str) -> tuple[dict[str, Any], float, float]:
        """``GET /slurm/<version>/<path>``: (JSON, send time, receipt time)."""
        assert self._client is not None
        t0 = time.monotonic()
        async with self._client.get(f"/slurm/{self.version}/{path}") as r:
            body = await r.read()
            t1 = time.monotonic()
            r.raise_for_status()
        self.rtts.append(t1 - t0)
        return orjson.loads(body), t0, t1

    async def delete(self, path: str) -> tuple[float, float]:
        """``DELETE /slurm/<version>/<path>``: (send time, receipt time)."""
        assert self._client is not None
        t0 = time.monotonic()
        async with self._client.delete(f"/slurm/{self.version}/{path}") as r:
            await r.read()
            t1 = time.monotonic()
            r.raise_for_status()
        return t0, t1

    async def node_state(self, node: str) -> tuple[set[str], float, float]:
        """The node's state flags (``{"IDLE", "DRAIN"}``), send and receipt times."""
        body, t0, t1 = await self.get(f"node/{node}")
        return set(body["nodes"][0]["state"]), t0, t1

    async def node_until(
        self,
        node: str,
        cond: Callable[[set[str]], bool],
        *,
        timeout: float,
        interval: float = 0.0,
    ) -> Seen:
        """Read the node back to back (``interval`` seconds apart) until ``cond(state)``."""
        deadline = time.monotonic() + timeout
        after = time.monotonic()
        while True:
            state, t0, t1 = await self.node_state(node)
            if cond(state):
                return Seen(after=after, by=t1, wall=time.time())
            after = t0
            if t1 > deadline:
                raise TimeoutError(f"{node}: state {sorted(state)} after {timeout} s")
            await asyncio.sleep(interval)


class JobWatch:
    """Polls ``jobs/state`` every ``interval`` seconds and records when each job was first
    seen RUNNING and first seen ended (:class:`Seen` brackets)."""

    def __init__(self, probe: Probe, interval: float) -> None:
        self.probe = probe
        self.interval = interval
        self.running: dict[int, Seen] = {}
        self.ended: dict[int, Seen] = {}
        self.polls = 0
        #: the most jobs one answer showed PENDING (Slurm's queue at its longest)
        self.pending_max = 0
        #: how many jobs each answer showed RUNNING for the first time (answers with any)
        self.start_batches: list[int] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        after = time.monotonic()
        while True:
            body, t0, t1 = await self.probe.get("jobs/state")
            wall = time.time()
            self.polls += 1
            before = len(self.running)
            pending = 0
            for job in body.get("jobs") or []:
                jid = int(job["job_id"])
                state = set(job.get("state") or ())
                pending += "PENDING" in state
                if "RUNNING" in state and jid not in self.running:
                    self.running[jid] = Seen(after=after, by=t1, wall=wall)
                if state & ENDED and jid not in self.ended:
                    self.ended[jid] = Seen(after=after, by=t1, wall=wall)
            self.pending_max = max(self.pending_max, pending)
            if len(self.running) > before:
                self.start_batches.append(len(self.running) - before)
            after = t0
            await asyncio.sleep(self.interval)


def process_cpu(slurm: ModernSlurm) -> dict[str, float]:
    """CPU seconds (user + system) of the cluster's living processes, summed by program name
    (``slurmctld``, ``slurmrestd``, ``slurmd`` …; ended job steps are not counted)."""
    from bench._work import cpu_seconds

    out: dict[str, float] = {}
    for pid in slurm.cluster_processes():
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        out[name] = out.get(name, 0.0) + cpu_seconds(pid)
    return out


_RPC = re.compile(r"^\s*([A-Z_]+)\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:(\d+)\s+total_time:(\d+)")


def sdiag(slurm: ModernSlurm, *, reset: bool = False) -> dict[str, Any]:
    """slurmctld's own statistics (``sdiag``, since the last ``sdiag -r``): the main
    scheduler's and backfill's cycles (``"main"`` / ``"backfill"``: field → number, times in
    µs) and the RPCs by message type (``"rpcs"``: type → ``{count, ave_us, total_ms}``).
    ``reset``: run ``sdiag -r`` instead and return ``{}``."""
    if reset:
        slurm.run("sdiag", "-r")
        return {}
    text = slurm.run("sdiag").stdout
    out: dict[str, Any] = {"main": {}, "backfill": {}, "rpcs": {}}
    section = ""
    for line in text.splitlines():
        if line.startswith("Main schedule statistics"):
            section = "main"
        elif line.startswith("Backfilling stats"):
            section = "backfill"
        elif line.startswith("Remote Procedure Call statistics by message type"):
            section = "rpcs"
        elif line and not line[0].isspace():
            section = ""
        elif section == "rpcs":
            m = _RPC.match(line)
            if m:
                out["rpcs"][m[1]] = {
                    "count": int(m[2]),
                    "ave_us": int(m[3]),
                    "total_ms": round(int(m[4]) / 1000, 1),
                }
        elif section and ":" in line:
            key, _, value = line.strip().partition(":")
            number = value.strip().split(" ")[0]
            if number.isdigit():
                out[section][key.strip()] = int(number)
    return out
