"""Differential test: the same REST exchange against the slurmrestd simulator and real Slurm.

One sequence of requests (listings, a quiet conditional job listing, a held EXTERNAL_JOB and
its excluded nodes, cancels, a time limit past 32 bits, a drain and undrain, an external
node's features, an unknown node, a plain user's admin_comment, a rejected token) is sent to
:class:`SlurmSim`
(``slurm_release`` as the real one) and to a real slurmrestd of that release, through the same
code. Each answer is normalised — HTTP status, the top-level keys, Slurm's error numbers, the
warnings' sources, and the facts the bridge reads (node states, reasons, features, partitions,
a job's state and excluded nodes, cancel failures, ping) — and the two lists must be equal.
A simulator that is kinder (or harsher) than the real server fails here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from slurmbridge.devtools.realslurm_modern import ModernSlurm
from slurmbridge.devtools.sim.slurmrestd import SlurmSim

PLAIN_USER, PLAIN_UID = "sbdiff", 42426
NORMAL = {"26.05": "v0.0.45", "24.11": "v0.0.42"}
#: Node states that come and go with timing (slurmctld's ping after a resume), not with the
#: request: left out of the comparison.
TRANSIENT = {"NOT_RESPONDING"}


@dataclass
class Target:
    """One server: its URL, an administrator's token, a plain user's token, a bad token."""

    url: str
    admin: str
    plain: str
    bad: str
    version: str


def _norm(status: int, body: dict[str, Any]) -> dict[str, Any]:
    """The comparable part of an answer."""
    out: dict[str, Any] = {
        "status": status,
        "keys": sorted(k for k in body if k != "meta"),
        "errors": sorted(e.get("error_number", 0) for e in body.get("errors") or []),
        "warnings": sorted(
            w.get("source", "")
            for w in body.get("warnings") or []
            # The rig runs no slurmdbd: a site's configuration, not the release's behaviour.
            if "accounting storage is disabled" not in w.get("description", "")
        ),
    }
    if body.get("nodes"):
        out["nodes"] = [
            {
                "name": n["name"],
                "state": sorted(set(n.get("state") or []) - TRANSIENT),
                "reason": n.get("reason", ""),
                "features": sorted(f for f in n.get("features") or [] if f),
                "partitions": sorted(n.get("partitions") or []),
                "cpus": n.get("cpus"),
                "real_memory": n.get("real_memory"),
            }
            for n in body["nodes"]
        ]
    if "partitions" in body:
        out["partitions"] = sorted(
            (p["name"], p["nodes"]["configured"]) for p in body["partitions"] or []
        )
    if body.get("jobs") and "job_state" in body["jobs"][0]:
        out["jobs"] = [
            {
                "state": j.get("job_state"),
                "excluded_nodes": j.get("excluded_nodes") or "",
                "flags_external": "EXTERNAL_JOB" in (j.get("flags") or []),
                "time_limit": j.get("time_limit"),
            }
            for j in body["jobs"]
        ]
    if "jobs" in body and not body["jobs"]:
        out["jobs"] = []
    if "last_update" in body and "jobs" in body:
        out["last_update_set"] = bool((body["last_update"] or {}).get("number"))
    if body.get("status") is not None and isinstance(body["status"], list):
        out["cancel"] = [s["error"]["code"] for s in body["status"]]
    if "pings" in body:
        out["pings"] = [
            {"responding": p.get("responding"), "status": p.get("status", "")}
            for p in body["pings"]
        ]
    if "job_id" in body:
        out["job_id"] = isinstance(body["job_id"], int)
    return out


async def _exchange(t: Target) -> list[dict[str, Any]]:
    """The request sequence against one server; returns the normalised answers."""
    base = f"/slurm/{t.version}"
    answers: list[dict[str, Any]] = []
    job_id = 0
    async with httpx.AsyncClient(base_url=t.url, timeout=20) as http:

        async def call(
            method: str,
            path: str,
            body: dict[str, Any] | None = None,
            token: str | None = None,
            params: dict[str, str] | None = None,
        ) -> dict[str, Any]:
            resp = await http.request(
                method,
                base + path,
                json=body,
                params=params,
                headers={"X-SLURM-USER-TOKEN": token or t.admin},
            )
            data = resp.json() if resp.content.strip() else {}
            shown = path.replace(f"/{job_id}", "/{job_id}") if job_id else path
            answers.append({"request": f"{method} {shown}", **_norm(resp.status_code, data)})
            return data

        async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
            deadline = time.monotonic() + 20
            while not await check():
                assert time.monotonic() < deadline, f"{t.url}: {what}"
                await asyncio.sleep(0.1)

        async def node_base(name: str, want: str) -> bool:
            resp = await http.get(f"{base}/node/{name}", headers={"X-SLURM-USER-TOKEN": t.admin})
            states = set(resp.json()["nodes"][0]["state"]) - TRANSIENT
            return want in states and "DRAIN" not in states

        await call("GET", "/ping/")
        await call("GET", "/nodes/")
        await call("GET", "/partitions/")
        # Quiet conditional job listing (finding 1): nothing changed since a second from now.
        await call("GET", "/jobs/", params={"update_time": str(int(time.time()) + 1)})
        job = {
            "name": "diff",
            "tasks": 1,
            "hold": True,
            "current_working_directory": "/tmp",
            "environment": ["PATH=/bin"],
            "flags": ["EXTERNAL_JOB"],
            "excluded_nodes": ["n3"],
            "comment": "slurmbridge:diff",
        }
        submitted = await call("POST", "/job/submit", {"job": job})
        job_id = submitted["job_id"]
        await call("GET", f"/job/{job_id}")
        await call("POST", f"/job/{job_id}", {"excluded_nodes": []})  # finding 4: ignored
        await call("GET", f"/job/{job_id}")
        await call("POST", f"/job/{job_id}", {"excluded_nodes": [""]})  # clears
        await call("GET", f"/job/{job_id}")
        await call("DELETE", f"/job/{job_id}")  # finding 5
        await call("DELETE", f"/job/{job_id}")
        await call("DELETE", "/job/999999")
        # A time limit past 32 bits is no limit at all (data_parser: NO_VAL and up ⇒ INFINITE).
        endless = {**job, "name": "diff-endless", "time_limit": {"set": True, "number": 10**12}}
        job_id = (await call("POST", "/job/submit", {"job": endless}))["job_id"]
        await call("GET", f"/job/{job_id}")
        await call("DELETE", f"/job/{job_id}")
        await call("POST", "/node/n2", {"state": ["DRAIN"], "reason": "diff: test"})
        await call("GET", "/node/n2")
        await call("POST", "/node/n2", {"state": ["UNDRAIN"]})
        await until(lambda: node_base("n2", "IDLE"), "n2 idle again")
        # An external node and its features (finding 3).
        conf = "NodeName=dx1 NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=2 RealMemory=1000"
        await call("POST", "/new/node/", {"node_conf": f"{conf} State=External Feature=batch"})
        await call("GET", "/node/dx1")
        await call("POST", "/node/dx1", {"features": []})
        await call("GET", "/node/dx1")
        await call("POST", "/node/dx1", {"features": [""]})
        await call("POST", "/node/dx1", {"features": ["gpu"], "features_act": ["gpu"]})
        await call("GET", "/node/dx1")
        await call("DELETE", "/node/dx1")
        await call("GET", "/node/dx1")
        # A plain user's admin_comment (finding 2) and node update.
        plain = {**job, "hold": False, "admin_comment": '{"pods":[]}', "name": "diff-plain"}
        await call("POST", "/job/submit", {"job": plain}, token=t.plain)
        await call("POST", "/node/n4", {"state": ["DRAIN"], "reason": "x"}, token=t.plain)
        # A token slurmctld rejects (finding 6).
        await call("GET", "/ping/", token=t.bad)
        await call("GET", "/nodes/", token=t.bad)
    return answers


def _bad(token: str) -> str:
    return token[:-5] + ("AAAAA" if not token.endswith("AAAAA") else "BBBBB")


@pytest.fixture
async def sim_target() -> AsyncIterator[Target]:
    sim = SlurmSim(cluster="modern", slurm_release="26.05")
    sim.seed_default(4)
    url = await sim.start()
    admin = sim.mint_token("root", 3600)
    try:
        yield Target(
            url=url,
            admin=admin,
            plain=sim.mint_token(PLAIN_USER, 3600),
            bad=_bad(admin),
            version=NORMAL["26.05"],
        )
    finally:
        await sim.stop()


async def test_the_simulator_answers_as_real_slurm_26_05(
    sim_target: Target, slurm_2605: ModernSlurm
) -> None:
    slurm_2605.add_user(PLAIN_USER, PLAIN_UID)
    real = Target(
        url=slurm_2605.url,
        admin=slurm_2605.token,
        plain=slurm_2605.token_for(PLAIN_USER),
        bad=_bad(slurm_2605.token),
        version=NORMAL["26.05"],
    )
    try:
        real_answers = await _exchange(real)
    finally:
        slurm_2605.run("scontrol", "delete", "nodename=dx1", check=False)
        slurm_2605.run("scancel", "--user", PLAIN_USER, check=False)
        slurm_2605.run("scancel", "--name", "diff", check=False)
        slurm_2605.run("scancel", "--name", "diff-endless", check=False)
    # 10^12 minutes became UNLIMITED (why slurmbridge refuses such a timelimit annotation).
    endless = [a for a in real_answers if a["request"] == "GET /job/{job_id}"][-1]
    assert endless["jobs"][0]["time_limit"] == {"set": False, "infinite": True, "number": 0}
    sim_answers = await _exchange(sim_target)
    assert len(sim_answers) == len(real_answers)
    for real_answer, sim_answer in zip(real_answers, sim_answers, strict=True):
        assert sim_answer == real_answer, real_answer["request"]
