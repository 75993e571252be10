"""Heterogeneous jobs on the wire (issue 28, item 5), without a server: the submit body, the
het fields of a job, and ``SlurmClient.submit_het_job`` against answers recorded from real
Slurm 26.05.5 on the rig (``meta`` and fields the client does not read trimmed; the whole
exchange is repeated against the real server and the simulator in
tests/real_slurm/test_modern_hetjob.py). Slinky slurm-bridge 1.3 submits a multi-component job
the same way (slurmcontrol.go ``submitJob``: ``jobs`` instead of ``job``, the ids from
``het_job_id_set``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.codecs import get as for_version
from slurmbridge.slurm.errors import BadResponse, NotFound
from slurmbridge.slurm.models import JobSubmit


def _nv(n: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": n}


def _job(job_id: int, name: str, offset: int, id_set: str, nodes: str) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "name": name,
        "job_state": ["RUNNING"],
        "state_reason": "None",
        "nodes": nodes,
        "partition": "batch",
        "comment": "slurmbridge:test",
        "flags": ["EXTERNAL_JOB"],
        "het_job_id": _nv(1) if id_set else _nv(0),
        "het_job_id_set": id_set,
        "het_job_offset": _nv(offset),
    }


#: POST /slurm/v0.0.45/job/submit {"jobs": [leader, workers]} (26.05.5): the leader only.
SUBMITTED = {
    "job_id": 1,
    "step_id": "batch",
    "job_submit_user_msg": "",
    "errors": [],
    "warnings": [],
}
#: GET /slurm/v0.0.45/job/1 right after: every component.
LEADER = {
    "jobs": [_job(1, "leader", 0, "1-2", "n1"), _job(2, "workers", 1, "1-2", "n[2-3]")],
    "last_backfill": _nv(0),
    "last_update": _nv(0),
    "errors": [],
    "warnings": [],
}
#: A component in an unknown partition (26.05.5): 422.
REFUSED = {
    "errors": [
        {
            "description": "HetJob submission failed",
            "error_number": 2000,
            "error": "Invalid partition name specified",
            "source": "slurm_submit_batch_het_job()",
        }
    ],
    "warnings": [],
}

PARTS = (
    JobSubmit(name="leader", min_nodes=1, exclusive=True, comment="c"),
    JobSubmit(name="workers", tasks=2, min_nodes=2, exclusive=True, comment="c"),
)


def test_a_het_submit_sends_jobs_one_description_per_component() -> None:
    codec = for_version("v0.0.45")
    body = json.loads(codec.encode_het_submit(PARTS))
    assert list(body) == ["jobs"], "never job beside jobs (slurmrestd: 9000)"
    assert [d["name"] for d in body["jobs"]] == ["leader", "workers"]
    assert [d["minimum_nodes"] for d in body["jobs"]] == [1, 2]
    assert all(d["flags"] == ["EXTERNAL_JOB"] for d in body["jobs"])
    assert body["jobs"][0] == json.loads(codec.encode_submit(PARTS[0]))["job"]
    with pytest.raises(ValueError, match="components"):
        codec.encode_het_submit(())


def test_a_jobs_het_fields_are_decoded() -> None:
    listing = for_version("v0.0.45").decode_jobs(msgspec.json.encode(LEADER))
    assert listing is not None
    leader, worker = listing.jobs
    assert (leader.het_job_id, leader.het_job_offset, leader.het_job_ids) == (1, 0, (1, 2))
    assert (worker.het_job_id, worker.het_job_offset, worker.het_job_ids) == (1, 1, (1, 2))
    plain = {**LEADER, "jobs": [_job(11, "plain", 0, "", "n1")]}
    (job,) = for_version("v0.0.45").decode_jobs(msgspec.json.encode(plain)).jobs  # type: ignore[union-attr]
    assert (job.het_job_id, job.het_job_offset, job.het_job_ids) == (0, 0, ())
    bad = {**LEADER, "jobs": [_job(3, "x", 0, "a-b", "n1")]}
    with pytest.raises(BadResponse, match="het_job_id_set"):
        for_version("v0.0.45").decode_jobs(msgspec.json.encode(bad))


def _client(handler: Any, tmp_path: Path) -> SlurmClient:
    token = tmp_path / "token"
    token.write_text("x.eyJzdW4iOiJyb290IiwiZXhwIjoxfQ.c2ln\n")
    return SlurmClient(
        "http://slurm.test:6820",
        token,
        None,
        "v0.0.45",
        5.0,
        transport=httpx.MockTransport(handler),
    )


async def test_submit_het_job_returns_every_components_id(tmp_path: Path) -> None:
    seen: list[tuple[str, str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        seen.append((request.method, request.url.path, body))
        if request.method == "POST":
            return httpx.Response(200, json=SUBMITTED)
        return httpx.Response(200, json=LEADER)

    client = _client(handler, tmp_path)
    try:
        assert await client.submit_het_job(PARTS) == (1, 2)
    finally:
        await client.aclose()
    assert [(m, p) for m, p, _ in seen] == [
        ("POST", "/slurm/v0.0.45/job/submit"),
        ("GET", "/slurm/v0.0.45/job/1"),
    ]
    assert [d["name"] for d in seen[0][2]["jobs"]] == ["leader", "workers"]


async def test_a_refused_component_fails_the_whole_het_job(tmp_path: Path) -> None:
    client = _client(lambda _r: httpx.Response(422, json=REFUSED), tmp_path)
    try:
        with pytest.raises(NotFound, match="2000"):
            await client.submit_het_job(PARTS)
        with pytest.raises(ValueError, match="components"):
            await client.submit_het_job(())
    finally:
        await client.aclose()
