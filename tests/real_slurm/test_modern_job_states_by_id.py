"""``GET jobs/state/?job_id=<csv>`` (issue 30): what real Slurm 24.11 and 26.05 answer, and the
simulator answering the same.

The Slurm poller's hot loop asks for the jobs its pods wait for in one request of this query
instead of one ``GET job/{id}`` each (producers/slurm/poller.py ``_hot_loop``), so how
slurmrestd answers it is what that loop relies on. One sequence is sent to a real slurmrestd
and to :class:`SlurmSim` of the same release; each answer is normalised (HTTP status, Slurm's
error numbers, the ids relative to the first job, their states) and the two lists must be
equal.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from slurmbridge.devtools.realslurm_modern import ModernSlurm
from slurmbridge.devtools.sim.slurmrestd import SlurmSim
from tests.real_slurm.test_modern_hetjob import desc

VERSIONS = {"24.11": "v0.0.42", "26.05": "v0.0.45"}


def _desc(name: str, nodes: int) -> dict[str, Any]:
    """The het test's placeholder as a batch job: ``EXTERNAL_JOB`` is v0.0.43+, and 24.11
    serves up to v0.0.42."""
    job = {k: v for k, v in desc(name, nodes).items() if k != "flags"}
    return {
        **job,
        "script": "#!/bin/sh\nexec sleep infinity\n",
        "standard_output": "/dev/null",
        "standard_error": "/dev/null",
    }


async def _exchange(url: str, token: str, version: str, nodes: int) -> list[dict[str, Any]]:
    """The sequence, normalised (module docstring): a job that runs, one too big to run (it
    waits), and the query for both, for one, for an unknown id among them, and for a bad id."""
    out: list[dict[str, Any]] = []
    async with httpx.AsyncClient(
        base_url=f"{url}/slurm/{version}", headers={"X-SLURM-USER-TOKEN": token}, timeout=20
    ) as c:
        submitted = await c.post("/job/submit", json={"job": _desc("js-small", 1)})
        small = int(submitted.json()["job_id"])
        submitted = await c.post("/job/submit", json={"job": _desc("js-big", nodes)})
        big = int(submitted.json()["job_id"])
        deadline = time.monotonic() + 15
        while True:
            body = (await c.get(f"/job/{small}")).json()
            if [s for j in body.get("jobs") or [] for s in j.get("job_state") or []] == ["RUNNING"]:
                break
            if time.monotonic() > deadline:
                pytest.fail("timed out waiting for the small job to run")
            await asyncio.sleep(0.05)

        def rel(job_id: str) -> str:
            return str(int(job_id) - small)

        for what, query in (
            ("both", f"{small},{big}"),
            ("one", f"{big}"),
            ("with an unknown id", f"{small},{big + 1000}"),
            ("only unknown", f"{big + 1000}"),
            ("spaces", f"{small}, {big}"),
            ("not a number", "x"),
            ("encoded comma", f"{small}%2C{big}"),
            ("repeated", f"{small}&job_id={big}"),
            ("repeated with an unknown id", f"{small}&job_id={big + 1000}&job_id={big}"),
            ("repeated, one bad", f"{small}&job_id=x"),
            ("empty", ""),
        ):
            resp = await c.get(f"/jobs/state/?job_id={query}")
            try:
                body = resp.json()
            except ValueError:  # e.g. "Unspecified error", as text
                body = {"errors": [{"error_number": -1, "description": resp.text}]}
            out.append(
                {
                    "request": what,
                    "status": resp.status_code,
                    "type": resp.headers.get("content-type", "").partition(";")[0],
                    "errors": sorted(e.get("error_number") for e in body.get("errors") or []),
                    "said": [e.get("description") for e in body.get("errors") or []],
                    "jobs": sorted(
                        (rel(j["job_id"]), tuple(j.get("state") or ()))
                        for j in body.get("jobs") or []
                    )
                    if resp.status_code == 200
                    else None,
                }
            )
        for job_id in (small, big):
            await c.delete(f"/job/{job_id}")
    return out


async def test_the_simulator_answers_job_states_by_id_as_real_slurm(
    modern_slurm: ModernSlurm,
) -> None:
    release = modern_slurm.release
    version = VERSIONS[release]
    nodes = modern_slurm.nodes
    try:
        real = await _exchange(modern_slurm.url, modern_slurm.token, version, nodes)
    finally:
        for name in ("js-small", "js-big"):
            modern_slurm.run("scancel", "--name", name, check=False)
    # What real Slurm said, spelt out: one id per parameter, repeated, and never a CSV.
    by = {a["request"]: a for a in real}
    both = [("0", ("RUNNING",)), ("1", ("PENDING",))]
    assert by["repeated"]["jobs"] == both
    assert by["repeated with an unknown id"]["jobs"] == both
    assert by["only unknown"]["jobs"] == []
    csv = (400, "Unable to parse query.") if release == "24.11" else (500, "Unspecified error")
    for what in ("both", "with an unknown id", "spaces"):
        assert (by[what]["status"], by[what]["type"], *by[what]["said"]) == (
            csv[0],
            "text/plain",
            csv[1],
        ), what
    for what in ("not a number", "encoded comma", "repeated, one bad", "empty"):
        assert (by[what]["status"], by[what]["errors"]) == (422, [9000]), what
    # The simulator of that release, through the same code, answers the same.
    s = SlurmSim(cluster="modern", slurm_release=release)
    s.seed_default(nodes)
    url = await s.start()
    try:
        simulated = await _exchange(url, s.mint_token("root", 3600), version, nodes)
    finally:
        await s.stop()
    assert simulated == real
