"""CPU per request of the Slurm client (:class:`~slurmbridge.slurm.client.SlurmClient`), by
HTTP transport: httpx's own (httpcore) against the default,
:class:`~slurmbridge.slurm.transport.AiohttpTransport` (its GETs through aiohttp, its
writes through :class:`~slurmbridge.slurm.transport.H11Pool`; the ``aiohttp_*`` figures).

The slurmrestd simulator runs in its own process, so the CPU time measured (user + system of
this process, ``time.process_time``) is the client's alone; each transport does the same
``--requests`` sequential ``GET job/{id}`` and ``POST job/submit``, twice, alternating, then
the same submits ``--concurrency`` at a time (``*_concurrent_submit_job_cpu_ms``: a burst of
groups placed at once).

    python bench/slurm_client.py --json [--requests 300] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.models import JobSubmit

_SIM = """
import asyncio
from slurmbridge.devtools.sim.slurmrestd import SlurmSim
async def main():
    s = SlurmSim(cluster="bench")
    s.seed_default(4)
    url = await s.start()
    print(url, s.mint_token("root", 3600), flush=True)
    # until stdin closes
    await asyncio.get_running_loop().run_in_executor(None, __import__("sys").stdin.read)
asyncio.run(main())
"""


async def _per_request(client: SlurmClient, n: int, concurrency: int) -> dict[str, float]:
    job = JobSubmit(name="bench", min_nodes=1, comment="bench")
    job_id = await client.submit_job(job)
    t0 = time.process_time()
    for _ in range(n):
        await client.get_job(job_id)
    got = (time.process_time() - t0) * 1000 / n
    t0 = time.process_time()
    for _ in range(n):
        await client.submit_job(job)
    sub = (time.process_time() - t0) * 1000 / n
    slots = asyncio.Semaphore(concurrency)

    async def submit() -> None:
        async with slots:
            await client.submit_job(job)

    t0 = time.process_time()
    await asyncio.gather(*(submit() for _ in range(n)))
    burst = (time.process_time() - t0) * 1000 / n
    return {
        "get_job_cpu_ms": round(got, 3),
        "submit_job_cpu_ms": round(sub, 3),
        "concurrent_submit_job_cpu_ms": round(burst, 3),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sim = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _SIM, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert sim.stdout is not None
        url, token = (await sim.stdout.readline()).decode().split()
        with tempfile.NamedTemporaryFile("w", suffix=".jwt") as f:
            f.write(token)
            f.flush()
            out: dict[str, list[dict[str, float]]] = {"httpcore": [], "aiohttp": []}
            for _ in range(2):
                for name in out:
                    transport = httpx.AsyncHTTPTransport() if name == "httpcore" else None
                    async with SlurmClient(
                        url, Path(f.name), api_version="v0.0.44", transport=transport
                    ) as client:
                        out[name].append(
                            await _per_request(client, args.requests, args.concurrency)
                        )
    finally:
        if sim.stdin is not None:
            sim.stdin.close()
        await sim.wait()
    return {
        "requests": args.requests,
        "concurrency": args.concurrency,
        **{
            f"{name}_{field}": min(r[field] for r in runs)
            for name, runs in out.items()
            for field in ("get_job_cpu_ms", "submit_job_cpu_ms", "concurrent_submit_job_cpu_ms")
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--requests", type=int, default=300, help="requests per kind (300)")
    ap.add_argument(
        "--concurrency", type=int, default=64, help="submits in flight at once in the burst (64)"
    )
    args = ap.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
