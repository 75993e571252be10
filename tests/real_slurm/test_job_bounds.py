"""The bounds slurmbridge puts on placeholder-job annotations are real Slurm's
(reconcilers/_pods.py "Bounds"), against real 24.11 and 26.05.

* A job's ``time_limit`` and ``priority`` (uint32_no_val) are taken up to
  :data:`reconcilers._pods.MAX_UINT32_NO_VAL`; from ``NO_VAL`` up slurmrestd reads INFINITE,
  so the job gets something else than was asked (no time limit; priority 1).
* ``cpus_per_task`` beyond every node of the partition can never run: 24.11 refuses the
  job (2014, "Requested node configuration is not available"), 26.05 takes it and leaves it
  PENDING with reason ``PartitionConfig`` for ever.

Each job is submitted held and cancelled at once; nothing is left running.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from reconcilers._pods import MAX_UINT32_NO_VAL
from slurmbridge.devtools.realslurm_modern import ModernSlurm

API = {"26.05": "v0.0.45", "24.11": "v0.0.42"}


def _submit(cluster: ModernSlurm, **fields: Any) -> tuple[int, dict[str, Any]]:
    """Submit a batch job (held unless ``fields`` say otherwise) with ``fields``; (HTTP status,
    the job as listed or the answer's body). The job is cancelled before this returns."""
    version = API[cluster.release]
    job = {
        "name": "sb-bounds",
        "tasks": 1,
        "hold": True,
        "current_working_directory": "/tmp",
        "environment": ["PATH=/bin"],
        "script": "#!/bin/sh\nsleep 1\n",
        **fields,
    }
    headers = {"X-SLURM-USER-TOKEN": cluster.token}
    with httpx.Client(base_url=f"{cluster.url}/slurm/{version}", headers=headers) as http:
        resp = http.post("/job/submit", json={"job": job})
        body = resp.json()
        job_id = body.get("job_id")
        if not job_id:
            return resp.status_code, body
        try:
            return resp.status_code, http.get(f"/job/{job_id}").json()["jobs"][0]
        finally:
            http.delete(f"/job/{job_id}")


def _n(number: int) -> dict[str, Any]:
    return {"set": True, "number": number}


@pytest.mark.parametrize("field", ["time_limit", "priority"])
def test_the_largest_uint32_no_val_is_taken_as_asked(modern_slurm: ModernSlurm, field: str) -> None:
    status, job = _submit(modern_slurm, **{field: _n(MAX_UINT32_NO_VAL)})
    assert status == 200
    assert job[field] == {"set": True, "infinite": False, "number": MAX_UINT32_NO_VAL}


@pytest.mark.parametrize("asked", [MAX_UINT32_NO_VAL + 1, 2**32 - 1, 10**12])
def test_from_no_val_up_slurm_takes_something_else(modern_slurm: ModernSlurm, asked: int) -> None:
    _, job = _submit(modern_slurm, time_limit=_n(asked))
    assert job["time_limit"] == {"set": False, "infinite": True, "number": 0}
    _, job = _submit(modern_slurm, priority=_n(asked))
    assert job["priority"]["number"] != asked


def test_more_cpus_per_task_than_any_node_never_runs(modern_slurm: ModernSlurm) -> None:
    status, answer = _submit(modern_slurm, cpus_per_task=999, hold=False)
    if modern_slurm.release == "24.11":
        assert status == 500
        assert [e["error_number"] for e in answer["errors"]] == [2014]
    else:
        assert status == 200
        assert (answer["job_state"], answer["state_reason"]) == (["PENDING"], "PartitionConfig")
