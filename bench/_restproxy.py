"""A tracing reverse proxy in front of slurmrestd (``bench/workload.py --slurm real
--trace-rest``): slurmbridge talks to it instead of slurmrestd, and it records every request
it forwards — method, endpoint, send and receipt times (``time.monotonic()``, the clock of
the other figures) and, for the job reads, the jobs each answer showed RUNNING — so the bench
can tell *when the bridge first asked Slurm about a started job, and through which
endpoint*, from when the log has it. The proxy adds one loopback hop to each request.
"""

from __future__ import annotations

import itertools
import re
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from bench._common import free_port

#: ``/slurm/v0.0.45/job/123`` → ``GET job/{id}``; the version and ids are dropped.
_PATH = re.compile(r"^/slurm(?:db)?/v[0-9.]+/(.*)$")


def endpoint(method: str, path: str, query: str = "") -> str:
    """``"GET job/{id}"`` for ``GET /slurm/v0.0.45/job/123`` (numbers become ``{id}``);
    ``"GET jobs/state?job_id"`` for ``jobs/state`` asked for some jobs by id (the bridge's
    hot loop), ``"GET jobs/state"`` for the whole list (its state poll)."""
    m = _PATH.match(path)
    rest = m[1] if m else path
    point = f"{method} " + "/".join("{id}" if p.isdigit() else p for p in rest.split("/") if p)
    if point == "GET jobs/state" and "job_id=" in query:
        point += "?job_id"
    return point


@dataclass
class Trace:
    """One forwarded request: ``running`` = the job ids its answer showed RUNNING."""

    method: str
    endpoint: str
    sent: float
    received: float
    status: int
    running: tuple[int, ...] = ()
    path: str = ""


@dataclass
class RestProxy:
    """Forwards ``http://127.0.0.1:<port>/…`` to ``upstream`` and records :class:`Trace`."""

    upstream: str
    traces: list[Trace] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=64), auto_decompress=False
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        self.port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in ("host", "content-length", "transfer-encoding")
        }
        sent = time.monotonic()
        async with self._session.request(
            request.method, self.upstream + request.path_qs, data=body or None, headers=headers
        ) as resp:
            data = await resp.read()
            received = time.monotonic()
            status = resp.status
            out_headers = {
                k: v
                for k, v in resp.headers.items()
                if k.lower() not in ("content-length", "transfer-encoding", "connection")
            }
        point = endpoint(request.method, request.path, request.query_string)
        running: tuple[int, ...] = ()
        if point in _JOB_READS and status == 200:
            running = _running(data)
        self.traces.append(
            Trace(request.method, point, sent, received, status, running, request.path)
        )
        return web.Response(body=data, status=status, headers=out_headers)


#: The endpoints whose answers show job states.
_JOB_READS = frozenset(("GET job/{id}", "GET jobs/state", "GET jobs/state?job_id", "GET jobs"))


def _running(data: bytes) -> tuple[int, ...]:
    import json

    try:
        jobs = json.loads(data).get("jobs") or []
    except ValueError:
        return ()
    out = []
    for job in jobs:
        state = job.get("job_state") or job.get("state") or ()
        if isinstance(state, str):
            state = (state,)
        if "RUNNING" in state:
            out.append(int(job["job_id"]))
    return tuple(out)


def first_running(traces: list[Trace], started: dict[int, float]) -> dict[int, tuple[float, str]]:
    """Per job of ``started`` (job id → when the probe first saw it RUNNING): when the bridge
    first received an answer showing it RUNNING, and the endpoint that brought it —
    ``GET jobs/state?job_id`` is the hot loop, ``GET jobs/state`` and ``GET jobs`` the full
    poll, ``GET job/{id}`` a whole read (the hot loop's, the full poll's or an effector's)."""
    first: dict[int, tuple[float, str]] = {}
    for t in sorted(traces, key=lambda t: t.received):
        for job in t.running:
            if job in started and job not in first and t.received >= started[job] - 1.0:
                first[job] = (t.received, t.endpoint)
    return first


def summary(traces: list[Trace], t0: float, t1: float, started: dict[int, float]) -> dict[str, Any]:
    """What slurmbridge asked of slurmrestd between ``t0`` and ``t1``: requests per second
    and round-trip p50/p99 by endpoint; and, per job of ``started`` (job id → when the probe
    first saw it RUNNING), the wait until slurmbridge first *received* an answer showing it
    RUNNING, split by the endpoint that brought it."""
    from bench._common import percentile

    window = [t for t in traces if t0 <= t.sent <= t1]
    by: dict[str, list[float]] = {}
    for t in window:
        by.setdefault(t.endpoint, []).append(t.received - t.sent)
    span = max(1e-9, t1 - t0)
    requests = {
        k: {
            "per_s": round(len(v) / span, 1),
            "rtt_p50_ms": round(percentile(v, 50) * 1000, 1),
            "rtt_p99_ms": round(percentile(v, 99) * 1000, 1),
        }
        for k, v in sorted(by.items())
    }
    first = first_running(traces, started)
    waits: dict[str, list[float]] = {}
    for job, (at, point) in first.items():
        waits.setdefault(point, []).append(at - started[job])
    # Each full poll of the bridge begins with GET ping and asks jobs/state (the whole list)
    # last but for the GETs of the jobs it found changed (producers/slurm/poller.py
    # poll_once): the gaps between pings are the poll loop's period (pollInterval when on
    # time), ping sent → whole jobs/state received its own requests' time.
    pings = sorted(t.sent for t in window if t.endpoint == "GET ping")
    gaps = [b - a for a, b in itertools.pairwise(pings)]
    lists = sorted((t.sent, t.received) for t in window if t.endpoint == "GET jobs/state")
    took = []
    for ping in pings:
        after = next((r for s, r in lists if s >= ping), None)
        if after is not None:
            took.append(after - ping)
    full_poll = {
        "polls": len(pings),
        "gap_p50_ms": round(percentile(gaps, 50) * 1000, 1) if gaps else None,
        "gap_max_ms": round(max(gaps) * 1000, 1) if gaps else None,
        "ping_to_job_states_p50_ms": round(percentile(took, 50) * 1000, 1) if took else None,
        "ping_to_job_states_max_ms": round(max(took) * 1000, 1) if took else None,
    }
    return {
        "requests": requests,
        "full_poll": full_poll,
        "first_running_answer_by_endpoint": {
            k: {
                "jobs": len(v),
                "after_probe_p50_ms": round(percentile(v, 50) * 1000, 1),
                "after_probe_max_ms": round(max(v) * 1000, 1),
            }
            for k, v in sorted(waits.items())
        },
        "jobs_never_seen_running_by_bridge": len(set(started) - set(first)),
    }
