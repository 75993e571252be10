"""Heterogeneous jobs over REST (issue 28, item 5): what real Slurm 26.05 answers, and the
simulator answering the same.

One sequence of heterogeneous submits (``POST job/submit`` with ``jobs: [...]``, v0.0.45) is
sent to a real slurmrestd 26.05 and to :class:`SlurmSim` (``slurm_release="26.05"``) through
the same code; each answer is normalised (HTTP status, Slurm's error numbers, and the het
facts — ids relative to the leader, offsets, ``het_job_id_set``, states, node counts, what
``GET job/{id}`` and ``jobs/state`` list) and the two lists must be equal. Facts recorded on
the rig and checked here:

* the answer names only the leader (``job_id``, ``step_id`` ``batch``); the components have
  consecutive ids, offsets 0, 1, … and ``het_job_id_set`` ``"<first>-<last>"`` each;
* ``GET job/{leader}`` lists every component, ``GET job/{other}`` that one;
  ``jobs/state`` names them ``"<id>+<offset>"``; a plain job has ``het_job_id`` 0;
* cancelling a component ends only it, cancelling the leader ends them all;
* ``job`` beside ``jobs``: 422, 9000; ``jobs: []``: refused, no job, with an error number
  and HTTP status that are a left-over errno (seen: 200 with 0, 500 with 11); a component
  in an unknown partition: 422, 2000, and the leader made before it is left CANCELLED;
* a het job larger than the cluster is accepted and waits (``Resources``), every component;
* the client's :meth:`SlurmClient.submit_het_job` returns every component's id.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from schemas import wellknown
from slurmbridge.devtools.realslurm_modern import ModernSlurm
from slurmbridge.devtools.sim.kube import ApiError
from slurmbridge.devtools.sim.slurmrestd import SlurmSim
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Stack
from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.errors import NotFound
from slurmbridge.slurm.models import JobSubmit

VERSION = "v0.0.45"


def desc(name: str, nodes: int, *, partition: str = "batch") -> dict[str, Any]:
    """A placeholder component as slurmbridge sends one (EXTERNAL_JOB, whole nodes)."""
    return {
        "name": name,
        "cpus_per_task": 1,
        "tasks": nodes,
        "minimum_nodes": nodes,
        "maximum_nodes": nodes,
        "current_working_directory": "/tmp",
        "environment": ["PATH=/bin:/usr/bin"],
        "partition": partition,
        "flags": ["EXTERNAL_JOB"],
        "shared": ["none"],
        "comment": f"slurmbridge:test:{name}",
    }


def _ids(text: str, leader: int) -> list[int]:
    """``het_job_id_set`` relative to the leader (``"5-6"`` with leader 5 ⇒ [0, 1])."""
    if not text:
        return []
    lo, _, hi = text.partition("-")
    return [int(lo) - leader, int(hi or lo) - leader]


def _job(j: dict[str, Any], leader: int) -> dict[str, Any]:
    het = j.get("het_job_id") or {}
    return {
        "id": j["job_id"] - leader,
        "name": j.get("name"),
        "state": j.get("job_state"),
        "reason": j.get("state_reason"),
        "het_job_id": het.get("number", 0) - leader if het.get("number") else 0,
        "het_job_id_set": _ids(j.get("het_job_id_set") or "", leader),
        "het_job_offset": (j.get("het_job_offset") or {}).get("number"),
        "nodes": len([n for n in (j.get("nodes") or "").replace("[", ",").split(",") if n]),
        "comment": j.get("comment"),
    }


async def _exchange(url: str, token: str) -> list[dict[str, Any]]:
    """The sequence, normalised (module docstring)."""
    out: list[dict[str, Any]] = []
    async with httpx.AsyncClient(
        base_url=f"{url}/slurm/{VERSION}", headers={"X-SLURM-USER-TOKEN": token}, timeout=20
    ) as c:

        async def call(
            what: str, method: str, path: str, *, loose: bool = False, **kw: Any
        ) -> dict[str, Any]:
            resp = await c.request(method, path, **kw)
            body = resp.json()
            if loose:
                # Slurm's number and HTTP status here are a left-over errno (seen: 200 with
                # error_number 0, and 500 with 11): only the refusal and its words are stable.
                out.append(
                    {
                        "request": what,
                        "job_id": body.get("job_id"),
                        "descriptions": [e.get("description") for e in body.get("errors") or []],
                    }
                )
                return dict(body)
            out.append(
                {
                    "request": what,
                    "status": resp.status_code,
                    "errors": sorted(e.get("error_number") for e in body.get("errors") or []),
                    "step_id": body.get("step_id"),
                    "has_job_id": body.get("job_id") is not None,
                }
            )
            return dict(body)

        async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
            deadline = time.monotonic() + 15
            while not await check():
                if time.monotonic() > deadline:
                    pytest.fail(f"timed out waiting for {what}")
                await asyncio.sleep(0.05)

        async def jobs_of(job_id: int, leader: int, what: str) -> list[dict[str, Any]]:
            body = await call(what, "GET", f"/job/{job_id}")
            listed = [_job(j, leader) for j in body.get("jobs") or []]
            out.append({"request": f"{what}: jobs", "jobs": listed})
            return listed

        async def states(leader: int) -> list[str]:
            body = (await c.get(f"/job/{leader}")).json()
            return [s for j in body.get("jobs") or [] for s in j.get("job_state") or []]

        # 1. a leader and two workers
        sub = await call(
            "submit het", "POST", "/job/submit", json={"jobs": [desc("hj-l", 1), desc("hj-w", 2)]}
        )
        leader = int(sub["job_id"])

        async def running() -> bool:
            return await states(leader) == ["RUNNING", "RUNNING"]

        await until(running, "the het job to run")
        await jobs_of(leader, leader, "GET leader")
        await jobs_of(leader + 1, leader, "GET component")
        body = (await c.get("/jobs/state")).json()
        mine = [
            e["job_id"]
            for e in body["jobs"]
            if e["job_id"].partition("+")[0] in (str(leader), str(leader + 1))
        ]
        rel = sorted(f"{int(i.partition('+')[0]) - leader}+{i.partition('+')[2]}" for i in mine)
        out.append({"request": "jobs/state ids", "ids": rel})
        # 2. cancel a component, then the leader
        await call("cancel component", "DELETE", f"/job/{leader + 1}")

        async def component_gone() -> bool:
            return await states(leader) == ["RUNNING", "CANCELLED"]

        await until(component_gone, "the component to end")
        await jobs_of(leader, leader, "after component cancel")
        await call("cancel leader", "DELETE", f"/job/{leader}")
        # 3. a second het job: cancelling its leader ends every component
        sub = await call(
            "submit het 2",
            "POST",
            "/job/submit",
            json={"jobs": [desc("hj-l2", 1), desc("hj-w2", 1)]},
        )
        leader2 = int(sub["job_id"])

        async def running2() -> bool:
            return await states(leader2) == ["RUNNING", "RUNNING"]

        await until(running2, "the second het job to run")
        await call("cancel leader 2", "DELETE", f"/job/{leader2}")

        async def all_gone() -> bool:
            return await states(leader2) == ["CANCELLED", "CANCELLED"]

        await until(all_gone, "every component to end with the leader")
        await jobs_of(leader2, leader2, "after leader cancel")
        # 4. refusals
        both = {"job": desc("hj-x", 1), "jobs": [desc("hj-y", 1)]}
        await call("job and jobs", "POST", "/job/submit", json=both)
        await call("no component", "POST", "/job/submit", loose=True, json={"jobs": []})
        bad = {"jobs": [desc("hj-bad-l", 1), desc("hj-bad-w", 1, partition="nope")]}
        await call("unknown partition", "POST", "/job/submit", json=bad)
        listing = (await c.get("/jobs")).json()["jobs"]
        left = [(j["name"], j["job_state"]) for j in listing if j["name"].startswith("hj-bad")]
        out.append({"request": "left after a refused component", "jobs": left})
        # 5. larger than the cluster: accepted, every component waits
        big = {"jobs": [desc("hj-big-l", 1), desc("hj-big-w", 4)]}
        sub = await call("too big", "POST", "/job/submit", json=big)
        big_leader = int(sub["job_id"])

        async def waiting() -> bool:
            body = (await c.get(f"/job/{big_leader}")).json()
            return all(j.get("state_reason") == "Resources" for j in body["jobs"])

        await until(waiting, "the big het job to wait for resources")
        await jobs_of(big_leader, big_leader, "too big")
        await call("cancel big", "DELETE", f"/job/{big_leader}")
        # 6. one component, and a plain job
        sub = await call("one component", "POST", "/job/submit", json={"jobs": [desc("hj-1", 1)]})
        one = int(sub["job_id"])

        async def one_runs() -> bool:
            return await states(one) == ["RUNNING"]

        await until(one_runs, "the one-component het job to run")
        await jobs_of(one, one, "one component")
        await call("cancel one", "DELETE", f"/job/{sub['job_id']}")
        sub = await call("plain", "POST", "/job/submit", json={"job": desc("hj-plain", 1)})
        plain = int(sub["job_id"])

        async def plain_runs() -> bool:
            return await states(plain) == ["RUNNING"]

        await until(plain_runs, "the plain job to run")
        await jobs_of(plain, plain, "plain")
        await call("cancel plain", "DELETE", f"/job/{sub['job_id']}")
    return out


async def _client_ids(url: str, token: str, tmp_path: Path) -> tuple[int, ...]:
    """``SlurmClient.submit_het_job`` for a leader and two workers (then cancelled)."""
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    client = SlurmClient(url, token_file, None, VERSION, 20.0)
    try:
        parts = (
            JobSubmit(name="hj-client-l", min_nodes=1, exclusive=True, comment="c"),
            JobSubmit(name="hj-client-w", tasks=2, min_nodes=2, exclusive=True, comment="c"),
        )
        ids = await client.submit_het_job(parts)
        with pytest.raises(NotFound, match="2000"):
            await client.submit_het_job(
                (parts[0], JobSubmit(name="hj-client-bad", partition="nope"))
            )
        await client.cancel_job(ids[0])
        return ids
    finally:
        await client.aclose()


@pytest.fixture
async def sim() -> AsyncIterator[tuple[str, str]]:
    s = SlurmSim(cluster="modern", slurm_release="26.05")
    s.seed_default(4)
    url = await s.start()
    try:
        yield url, s.mint_token("root", 3600)
    finally:
        await s.stop()


async def test_the_simulator_answers_het_submits_as_real_slurm_26_05(
    sim: tuple[str, str], slurm_2605: ModernSlurm, tmp_path: Path
) -> None:
    try:
        real = await _exchange(slurm_2605.url, slurm_2605.token)
        real_ids = await _client_ids(slurm_2605.url, slurm_2605.token, tmp_path)
    finally:
        for prefix in ("hj-l", "hj-w", "hj-big-l", "hj-big-w", "hj-1", "hj-plain"):
            slurm_2605.run("scancel", "--name", prefix, check=False)
    # What real Slurm said, spelt out (the facts of the module docstring).
    by = {a["request"]: a for a in real}
    assert by["submit het"]["status"] == 200 and by["submit het"]["step_id"] == "batch"
    assert [j["het_job_offset"] for j in by["GET leader: jobs"]["jobs"]] == [0, 1]
    assert [j["het_job_id_set"] for j in by["GET leader: jobs"]["jobs"]] == [[0, 1], [0, 1]]
    assert [j["id"] for j in by["GET component: jobs"]["jobs"]] == [1]
    assert by["jobs/state ids"]["ids"] == ["0+0", "1+1"]
    assert [j["state"] for j in by["after component cancel: jobs"]["jobs"]] == [
        ["RUNNING"],
        ["CANCELLED"],
    ]
    assert (by["job and jobs"]["status"], by["job and jobs"]["errors"]) == (422, [9000])
    assert by["no component"] == {
        "request": "no component",
        "job_id": None,
        "descriptions": ["Refusing HetJob submission without any components"],
    }
    assert (by["unknown partition"]["status"], by["unknown partition"]["errors"]) == (422, [2000])
    assert by["left after a refused component"]["jobs"] == [("hj-bad-l", ["CANCELLED"])]
    assert [j["reason"] for j in by["too big: jobs"]["jobs"]] == ["Resources", "Resources"]
    assert by["plain: jobs"]["jobs"][0]["het_job_id_set"] == []
    assert real_ids[1] == real_ids[0] + 1
    # The simulator, through the same code, answers the same.
    simulated = await _exchange(*sim)
    assert len(simulated) == len(real)
    for real_answer, sim_answer in zip(real, simulated, strict=True):
        assert sim_answer == real_answer, real_answer["request"]
    sim_ids = await _client_ids(*sim, tmp_path)
    assert sim_ids[1] == sim_ids[0] + 1 and len(sim_ids) == 2


# --- the pipeline against real Slurm 26.05 ---------------------------------------------------


def _state(slurm: ModernSlurm, job_id: int) -> str:
    out = slurm.run("scontrol", "-o", "show", "job", str(job_id), check=False).stdout
    for field in out.split():
        if field.startswith("JobState="):
            return field.partition("=")[2]
    return ""


async def test_a_leader_and_workers_run_as_one_het_job_on_real_slurm(
    modern_slurm: ModernSlurm,
) -> None:
    """26.05 (EXTERNAL_JOB components) and 24.11 (REST v0.0.42: sleeping batch components).
    A LeaderWorkerSet whose leader asks 2 CPUs and whose workers ask 1: real Slurm gets
    one het job (``HetJobId``/``HetJobOffset`` in scontrol), every pod names the het job and
    runs on a node of its own component; the leader finishing first releases nothing; once
    the workers finish every component ends and no finalizer of ours is left."""

    def pod(stack: Stack, name: str) -> dict[str, Any]:
        try:
            return stack.kube.get("pods", name, "default")
        except ApiError:
            return {}

    def phase(p: dict[str, Any]) -> str:
        return str((p.get("status") or {}).get("phase") or "")

    try:
        async with Stack(nodes=4, real_slurm=modern_slurm, poll_interval=0.2) as stack:
            names = create_group(
                stack.kube,
                "LeaderWorkerSet",
                "real-het",
                3,
                requests={"cpu": "1", "memory": "100Mi"},
                leader_requests={"cpu": "2", "memory": "200Mi"},
                run_seconds=6.0,
                leader_run_seconds=1.0,
            )
            leader, workers = names[0], names[1:]
            await stack.wait_for(
                lambda: all(pod(stack, n).get("spec", {}).get("nodeName") for n in names),
                timeout=60,
                what="every pod bound",
            )
            ids = {pod(stack, n)["metadata"]["labels"][wellknown.LABEL_SLURM_JOBID] for n in names}
            assert len(ids) == 1
            het_id = int(ids.pop())
            shown = modern_slurm.scontrol("-o", "show", "job", str(het_id))
            lines = [ln for ln in shown.splitlines() if ln.strip()]
            assert len(lines) == 2, "scontrol shows both components of the het job"
            assert all(f"HetJobId={het_id}" in ln for ln in lines)
            offsets = sorted(
                int(f.partition("=")[2])
                for ln in lines
                for f in ln.split()
                if f.startswith("HetJobOffset=")
            )
            assert offsets == [0, 1]
            nodes_of = {
                int(
                    next(f for f in ln.split() if f.startswith("HetJobOffset=")).partition("=")[2]
                ): next(f for f in ln.split() if f.startswith("NodeList=")).partition("=")[2]
                for ln in lines
            }
            assert pod(stack, leader)["spec"]["nodeName"] in nodes_of[0]
            for n in workers:
                assert pod(stack, n)["spec"]["nodeName"] != pod(stack, leader)["spec"]["nodeName"]
            component = het_id + 1
            await stack.wait_for(
                lambda: phase(pod(stack, leader)) == "Succeeded", timeout=60, what="leader done"
            )
            await stack.settled(timeout=30)
            assert all(phase(pod(stack, n)) == "Running" for n in workers)
            assert _state(modern_slurm, component) == "RUNNING", (
                "a finished leader releases nothing"
            )
            await stack.wait_for(
                lambda: all(phase(pod(stack, n)) == "Succeeded" for n in names),
                timeout=60,
                what="every pod Succeeded",
            )
            await stack.wait_for(
                lambda: (
                    _state(modern_slurm, het_id) in ("CANCELLED", "COMPLETED", "")
                    and _state(modern_slurm, component) in ("CANCELLED", "COMPLETED", "")
                ),
                timeout=60,
                what="every component ended",
            )
            await stack.wait_for(
                lambda: (
                    not any(
                        wellknown.FINALIZER_SCHEDULER
                        in pod(stack, n).get("metadata", {}).get("finalizers", [])
                        for n in names
                    )
                ),
                timeout=30,
                what="finalizers removed",
            )
            assert await stack.dead_letters() == []
    finally:
        modern_slurm.run("scancel", "--user", "root", check=False)
