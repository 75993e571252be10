"""The slurmrestd simulator gives the answers real Slurm 24.11.5 and 26.05.5 gave (issue 16).

Each test sends, over real HTTP, a request that was recorded against a real slurmrestd (the
project's rig, :mod:`slurmbridge.devtools.realslurm_modern`; the same bodies are pinned for the
client
in ``tests/unit/test_slurm_real_answers.py``) and checks the simulator's answer against the
real one's key facts, quoted in its docstring. Where the releases differ the test runs once
per release (``SlurmSim(slurm_release=...)``), 24.11 over v0.0.42 (the newest version it
serves) and 26.05 over v0.0.45. Every exchange is also validated against the real OpenAPI
documents by :func:`tests.integration.test_sim_slurmrestd.running` (with the divergences its
module docstring lists).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import httpx
import pytest

from slurmbridge.devtools.sim.slurmrestd import SlurmSim, mint_jwt
from slurmbridge.slurm import codecs
from slurmbridge.slurm.errors import Rejected, SlurmError, Unauthorized
from slurmbridge.slurm.models import JobSubmit, NodeUpdate
from tests.integration.test_sim_slurmrestd import T0, Stack, _auth, running

pytestmark = pytest.mark.integration

#: (release, the version its test speaks, the HTTP status of a Slurm error there)
RELEASES: Final = [
    pytest.param("24.11", "v0.0.42", 500, id="24.11"),
    pytest.param("26.05", "v0.0.45", 422, id="26.05"),
]
NV0: Final = {"set": True, "infinite": False, "number": 0}
UNSET: Final = {"set": False, "infinite": False, "number": 0}
EXTERNAL_LINE: Final = "NodeName=ext1 CPUs=4 RealMemory=2048 State=External Feature=ext"


@asynccontextmanager
async def raw_http(s: Stack) -> AsyncIterator[httpx.AsyncClient]:
    """Plain HTTP through the stack's recorder (so the exchanges are validated)."""
    async with httpx.AsyncClient(base_url=s.sim.url, transport=s.recorder) as client:
        yield client


def _as(s: Stack, user: str, *, token_user: str | None = None) -> dict[str, str]:
    """Headers of a request by ``user`` (with a token of ``token_user``, default ``user``)."""
    return {
        "X-SLURM-USER-TOKEN": s.sim.mint_token(token_user or user),
        "X-SLURM-USER-NAME": user,
    }


def _submit_body(version: str, **kw: Any) -> bytes:
    return codecs.get(version).encode_submit(JobSubmit(**{"name": "t", **kw}))


async def _node_wire(raw: httpx.AsyncClient, s: Stack, version: str, name: str) -> Any:
    resp = await raw.get(f"/slurm/{version}/node/{name}", headers=_auth(s))
    assert resp.status_code == 200, resp.text
    return resp.json()["nodes"][0]


def _only_error(resp: httpx.Response) -> dict[str, Any]:
    errors = resp.json()["errors"]
    assert len(errors) == 1, errors
    entry: dict[str, Any] = errors[0]
    return entry


# --- 1: conditional listings -----------------------------------------------------------------


@pytest.mark.parametrize(("release", "version", "failed"), RELEASES)
async def test_quiet_conditional_job_listing_is_200_with_a_warning(
    tmp_path: Path, release: str, version: str, failed: int
) -> None:
    """``GET jobs/?update_time=T``, no job changed since T (24.11.5 and 26.05.5): HTTP 200, not
    304; ``"jobs": []``, ``last_backfill`` and ``last_update`` ``{"set": true, "number": 0}``,
    ``errors: []``, ``warnings: [{"description": "No job changes since
    update_time[T]=<T as %Y-%m-%dT%H:%M:%S local>", "source": "op_handler_jobs"}]``. Nodes and
    partitions with nothing changed stay 304."""
    del failed
    async with running(tmp_path, (version,), slurm_release=release) as s:
        job_id = await s.client.submit_job(JobSubmit(name="q", partition="batch"))
        since = s.clock.advance(5)
        async with raw_http(s) as raw:
            resp = await raw.get(
                f"/slurm/{version}/jobs/", params={"update_time": str(since)}, headers=_auth(s)
            )
            assert resp.status_code == 200
            body = resp.json()
            local = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
            assert body["jobs"] == []
            assert body["last_backfill"] == body["last_update"] == NV0
            assert body["errors"] == []
            assert body["warnings"] == [
                {
                    "description": f"No job changes since update_time[{since}]={local}",
                    "source": "op_handler_jobs",
                }
            ]
            for path in ("nodes/", "partitions/"):
                quiet = await raw.get(
                    f"/slurm/{version}/{path}",
                    params={"update_time": str(since)},
                    headers=_auth(s),
                )
                assert quiet.status_code == 304, path
        # the client reads the quiet answer as "unchanged", never as "every job is gone"
        assert await s.client.list_jobs(update_time=since) is None
        s.clock.advance()
        s.sim.cancel_job(job_id)
        changed = await s.client.list_jobs(update_time=since)
        assert changed is not None
        assert [(j.job_id, j.state) for j in changed.jobs] == [(job_id, ("CANCELLED",))]


async def test_quiet_conditional_job_listing_is_304_on_v0038(tmp_path: Path) -> None:
    """Slurm 22.05 (v0.0.38) answers a conditional job listing with nothing changed by 304."""
    async with running(tmp_path, ("v0.0.38",)) as s:
        since = s.clock.advance(5)
        async with raw_http(s) as raw:
            resp = await raw.get(
                "/slurm/v0.0.38/jobs", params={"update_time": str(since)}, headers=_auth(s)
            )
        assert resp.status_code == 304


@pytest.mark.parametrize(("release", "version", "failed"), RELEASES)
async def test_job_states_ignore_update_time(
    tmp_path: Path, release: str, version: str, failed: int
) -> None:
    """``GET jobs/state/?update_time=T`` (24.11.5 and 26.05.5): every job all the same, and the
    warning ``{"description": "Ignoring unknown field \\"update_time\\" of type string in
    DATA_PARSER_OPENAPI_JOB_STATE_QUERY", "source": "#/update_time/"}``."""
    del failed
    async with running(tmp_path, (version,), slurm_release=release) as s:
        job_id = await s.client.submit_job(JobSubmit(name="q", partition="batch"))
        since = s.clock.advance(5)
        async with raw_http(s) as raw:
            resp = await raw.get(
                f"/slurm/{version}/jobs/state/",
                params={"update_time": str(since)},
                headers=_auth(s),
            )
        assert resp.status_code == 200
        body = resp.json()
        assert body["jobs"] == [{"job_id": str(job_id), "state": ["RUNNING"]}]
        assert body["warnings"] == [
            {
                "description": 'Ignoring unknown field "update_time" of type string in '
                "DATA_PARSER_OPENAPI_JOB_STATE_QUERY",
                "source": "#/update_time/",
            }
        ]


# --- 2: operators ------------------------------------------------------------------------------


@pytest.mark.parametrize(("release", "version", "failed"), RELEASES)
async def test_admin_comment_needs_an_operator(
    tmp_path: Path, release: str, version: str, failed: int
) -> None:
    """``POST job/submit`` with ``admin_comment`` by a user who is neither operator nor
    administrator: HTTP 422 on 26.05.5 (500 on 24.11.5), ``errors: [{"error_number": 2002,
    "error": "Access/permission denied", "description": "Batch job submission failed",
    "source": "slurm_submit_batch_job()"}]``. The same job without it is accepted. A root token
    with ``X-SLURM-USER-NAME`` naming the plain user acts as that user (impersonation)."""
    async with running(tmp_path, (version,), slurm_release=release) as s:
        path = f"/slurm/{version}/job/submit"
        with_comment = _submit_body(version, admin_comment='{"pods":[]}', partition="batch")
        without = _submit_body(version, partition="batch")
        json_type = {"Content-Type": "application/json"}
        async with raw_http(s) as raw:
            for headers in (_as(s, "alice"), _as(s, "alice", token_user="root")):
                refused = await raw.post(
                    path, content=with_comment, headers={**headers, **json_type}
                )
                assert refused.status_code == failed
                assert _only_error(refused) == {
                    "error_number": 2002,
                    "error": "Access/permission denied",
                    "description": "Batch job submission failed",
                    "source": "slurm_submit_batch_job()",
                }
                accepted = await raw.post(path, content=without, headers={**headers, **json_type})
                assert accepted.status_code == 200, accepted.text
            # operators: root, slurm, the harness's slurmrest, and whoever is added
            for headers in (_as(s, "root"), _auth(s), _as(s, "slurm")):
                ok = await raw.post(path, content=with_comment, headers={**headers, **json_type})
                assert ok.status_code == 200, ok.text
            s.sim.operators.add("alice")
            ok = await raw.post(
                path, content=with_comment, headers={**_as(s, "alice"), **json_type}
            )
            assert ok.status_code == 200, ok.text
        assert len(s.sim.jobs) == 6
        assert s.sim.operators == {"root", "slurm", "slurmrest", "alice"}


@pytest.mark.parametrize(("release", "version", "failed"), RELEASES)
async def test_node_changes_need_an_administrator(
    tmp_path: Path, release: str, version: str, failed: int
) -> None:
    """A node update by a plain user, also through a root token naming that user
    (impersonation): refused with error 2010 "Invalid user id" (ESLURM_USER_ID_MISSING;
    recorded from 24.11.5 and 26.05.5 — the real_slurm tier's dead letter names it), HTTP 422
    on 26.05 and 500 on 24.11; nothing changes. Creating (26.05) and deleting a node are
    refused the same way (slurmctld's administrator check; not recorded separately)."""
    async with running(tmp_path, (version,), slurm_release=release) as s:
        s.sim.create_node("NodeName=dyn1 CPUs=2 State=FUTURE")
        async with raw_http(s) as raw:
            for headers in (_as(s, "alice"), _as(s, "alice", token_user="root")):
                upd = await raw.post(
                    f"/slurm/{version}/node/n1",
                    json={"state": ["DRAIN"], "reason": "x"},
                    headers=headers,
                )
                assert upd.status_code == failed
                assert _only_error(upd) == {
                    "error_number": 2010,
                    "error": "Invalid user id",
                    "description": "Failure to update node n1",
                    "source": "_update_node",
                }
                gone = await raw.delete(f"/slurm/{version}/node/dyn1", headers=headers)
                assert gone.status_code == failed
                assert _only_error(gone)["error_number"] == 2010
                if version == "v0.0.45":
                    new = await raw.post(
                        f"/slurm/{version}/new/node/",
                        json={"node_conf": EXTERNAL_LINE},
                        headers=headers,
                    )
                    assert new.status_code == failed
                    assert _only_error(new)["error_number"] == 2010
        assert s.sim.node("n1").state == ("IDLE",)
        assert s.sim.created_nodes == ("dyn1",)


# --- 3: node features --------------------------------------------------------------------------


@pytest.mark.parametrize(("release", "version", "failed"), RELEASES)
async def test_node_feature_updates(
    tmp_path: Path, release: str, version: str, failed: int
) -> None:
    """``POST node/{name}`` (26.05.5; 24.11 answers the error with HTTP 500): ``"features":
    []`` changes nothing; ``[""]`` clears the available features but, the active ones no longer
    being a subset, answers error 2031 "Active features not subset of available features"
    (description "Failure to update node <name>", source "_update_node"); so does
    ``["batch"]`` on a node whose active features are ``["gpu"]``. With ``features_act`` (a
    subset of the new available features) the update succeeds and both are stored."""
    async with running(tmp_path, (version,), slurm_release=release) as s:
        s.sim.add_node("f1", partitions=("batch",), features=("gpu",))
        path = f"/slurm/{version}/node/f1"
        not_subset = {
            "error_number": 2031,
            "error": "Active features not subset of available features",
            "description": "Failure to update node f1",
            "source": "_update_node",
        }
        async with raw_http(s) as raw:

            async def features() -> tuple[list[str], list[str]]:
                wire = await _node_wire(raw, s, version, "f1")
                return wire["features"], wire["active_features"]

            ignored = await raw.post(path, json={"features": []}, headers=_auth(s))
            assert ignored.status_code == 200
            assert ignored.json()["errors"] == []
            assert await features() == (["gpu"], ["gpu"])

            other = await raw.post(path, json={"features": ["batch"]}, headers=_auth(s))
            assert other.status_code == failed
            assert _only_error(other) == not_subset
            assert await features() == (["batch"], ["gpu"])

            cleared = await raw.post(path, json={"features": [""]}, headers=_auth(s))
            assert cleared.status_code == failed
            assert _only_error(cleared) == not_subset
            assert await features() == ([], ["gpu"])

            both = await raw.post(
                path,
                json={"features": ["batch", "gpu"], "features_act": ["gpu"]},
                headers=_auth(s),
            )
            assert both.status_code == 200, both.text
            assert await features() == (["batch", "gpu"], ["gpu"])

            outside = await raw.post(path, json={"features_act": ["fast"]}, headers=_auth(s))
            assert outside.status_code == failed
            assert _only_error(outside)["error_number"] == 2031
            assert await features() == (["batch", "gpu"], ["gpu"])

            clear_both = await raw.post(
                path, json={"features": [""], "features_act": [""]}, headers=_auth(s)
            )
            assert clear_both.status_code == 200, clear_both.text
            assert await features() == ([], [])
        # what the client sends (features with features_act) goes through
        await s.client.update_node("f1", NodeUpdate(features=("gpu",)))
        assert s.sim.node("f1").features == ("gpu",)


async def test_a_feature_update_does_not_move_a_dynamic_node(tmp_path: Path) -> None:
    """Observed on 26.05.5: a dynamic node joins the partitions whose NodeSet feature it has
    when it is created; changing its features later leaves its partitions as they were."""
    async with running(tmp_path, ("v0.0.45",)) as s:
        s.sim.add_partition("ext")
        await s.client.create_node(EXTERNAL_LINE)
        assert (await s.client.get_node("ext1")).partitions == ("ext",)
        await s.client.update_node("ext1", NodeUpdate(features=("batch", "gpu")))
        node = await s.client.get_node("ext1")
        assert (node.features, node.partitions) == (("batch", "gpu"), ("ext",))
        await s.client.update_node("ext1", NodeUpdate(features=()))
        node = await s.client.get_node("ext1")
        assert (node.features, node.partitions) == ((), ("ext",))


# --- 4: job excluded_nodes ---------------------------------------------------------------------


@pytest.mark.parametrize(("release", "version", "failed"), RELEASES)
async def test_job_excluded_nodes_update(
    tmp_path: Path, release: str, version: str, failed: int
) -> None:
    """``POST job/{id}`` with ``excluded_nodes``: ``[]`` changes nothing, ``[""]`` clears
    (24.11.5 and 26.05.5). 26.05.5 answers HTTP 200 ``{"results": null, "errors": [],
    "warnings": []}``; on 24.11 the answer keeps the v0.0.42 document's shape (a
    ``results`` array)."""
    del failed
    async with running(tmp_path, (version,), slurm_release=release) as s:
        s.sim.allocate("n1", 2)  # the job needs all four nodes of batch: it waits
        job_id = await s.client.submit_job(JobSubmit(name="x", partition="batch", min_nodes=4))
        assert s.sim.job(job_id).state == ("PENDING",)
        path = f"/slurm/{version}/job/{job_id}"
        async with raw_http(s) as raw:
            answers = []
            for value, expected in (
                (["n3", "n4"], ("n3", "n4")),
                ([], ("n3", "n4")),
                ([""], ()),
            ):
                resp = await raw.post(path, json={"excluded_nodes": value}, headers=_auth(s))
                assert resp.status_code == 200, resp.text
                answers.append(resp.json())
                assert s.sim.job(job_id).excluded_nodes == expected, value
        for body in answers:
            assert (body["errors"], body["warnings"]) == ([], [])
            if release == "26.05":
                assert body["results"] is None
            else:
                assert isinstance(body["results"], list)
        await s.client.set_job_excluded_nodes(job_id, ("n2",))
        await s.client.set_job_excluded_nodes(job_id, ())
        assert s.sim.job(job_id).excluded_nodes == ()


# --- 5: cancel ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("release", "version", "failed"), RELEASES)
async def test_cancel_answers_200_with_per_job_status(
    tmp_path: Path, release: str, version: str, failed: int
) -> None:
    """``DELETE job/{id}`` (24.11.5 and 26.05.5): HTTP 200 and ``errors: []`` whatever happens;
    success ⇒ ``"status": []``; an unknown job ⇒ one status entry ``{"error": {"string":
    "Invalid job id specified", "code": 2017, "message": …}, "step_id": "<id>", "job_id":
    {"set": false, …, "number": 0}, "federation": {"sibling": ""}}``; a job already ended ⇒
    code 2021 "Job/step already completing or completed" with ``job_id`` set to it."""
    del failed
    async with running(tmp_path, (version,), slurm_release=release) as s:
        job_id = await s.client.submit_job(JobSubmit(name="c", partition="batch"))
        async with raw_http(s) as raw:
            unknown = await raw.delete(f"/slurm/{version}/job/999999", headers=_auth(s))
            done = await raw.delete(f"/slurm/{version}/job/{job_id}", headers=_auth(s))
            again = await raw.delete(f"/slurm/{version}/job/{job_id}", headers=_auth(s))
        for resp in (unknown, done, again):
            assert resp.status_code == 200
            assert resp.json()["errors"] == []
        assert unknown.json()["status"] == [
            {
                "error": {
                    "string": "Invalid job id specified",
                    "code": 2017,
                    "message": "Invalid job id specified",
                },
                "step_id": "999999",
                "job_id": UNSET,
                "federation": {"sibling": ""},
            }
        ]
        assert done.json()["status"] == []
        assert again.json()["status"] == [
            {
                "error": {
                    "string": "Job/step already completing or completed",
                    "code": 2021,
                    "message": "Job/step already completing or completed",
                },
                "step_id": str(job_id),
                "job_id": {"set": True, "infinite": False, "number": job_id},
                "federation": {"sibling": ""},
            }
        ]
        assert s.sim.job(job_id).state == ("CANCELLED",)
        await s.client.cancel_job(job_id)  # idempotent for the client
        await s.client.cancel_job(999999)


async def test_cancel_on_v0038_is_unchanged(tmp_path: Path) -> None:
    """Slurm 22.05 (v0.0.38): an unknown job is HTTP 500 with ``errors[].errno`` 2017."""
    async with running(tmp_path, ("v0.0.38",)) as s:
        async with raw_http(s) as raw:
            resp = await raw.delete("/slurm/v0.0.38/job/999999", headers=_auth(s))
        assert resp.status_code == 500
        assert resp.json()["errors"][0]["errno"] == 2017


# --- 6: a token slurmctld rejects --------------------------------------------------------------


@pytest.mark.parametrize(("release", "version", "failed"), RELEASES)
@pytest.mark.parametrize("kind", ["bad-signature", "expired"])
async def test_rejected_token(
    tmp_path: Path, release: str, version: str, failed: int, kind: str
) -> None:
    """A token slurmctld rejects (24.11.5 and 26.05.5): ``GET ping/`` is HTTP 200 with
    ``pings: [{"hostname": <controller>, "responding": false, "latency": <int>, "primary":
    true, "status": "Protocol authentication error"}]`` on 26.05 (24.11: no ``status``,
    ``"pinged": "DOWN"``, ``"mode": "primary"``); ``GET nodes/`` and ``GET jobs/`` are HTTP 511
    with error 1007 "Protocol authentication error" ("Failure to query nodes" / "_dump_nodes",
    "Unable to query jobs" / "slurm_load_jobs()"); ``GET partitions/`` is 511 with no error
    entry. No token at all stays 401."""
    del failed
    async with running(tmp_path, (version,), slurm_release=release) as s:
        if kind == "expired":
            bad = mint_jwt(s.sim.jwt_key, "slurmrest", now=T0 - 10_000, lifetime=60)
        else:
            bad = mint_jwt(b"not the key", "slurmrest", now=T0, lifetime=60)
        headers = {"X-SLURM-USER-TOKEN": bad, "X-SLURM-USER-NAME": "slurmrest"}
        async with raw_http(s) as raw:
            ping = await raw.get(f"/slurm/{version}/ping/", headers=headers)
            nodes = await raw.get(f"/slurm/{version}/nodes/", headers=headers)
            jobs = await raw.get(f"/slurm/{version}/jobs/", headers=headers)
            parts = await raw.get(f"/slurm/{version}/partitions/", headers=headers)
            missing = await raw.get(f"/slurm/{version}/nodes/")
        assert ping.status_code == 200
        (entry,) = ping.json()["pings"]
        assert isinstance(entry.pop("latency"), int)
        if release == "26.05":
            assert entry == {
                "hostname": "slurmctld-sim",
                "responding": False,
                "primary": True,
                "status": "Protocol authentication error",
            }
        else:
            assert entry == {
                "hostname": "slurmctld-sim",
                "pinged": "DOWN",
                "responding": False,
                "mode": "primary",
                "primary": True,
            }
        assert (nodes.status_code, jobs.status_code, parts.status_code) == (511, 511, 511)
        assert _only_error(nodes) == {
            "description": "Failure to query nodes",
            "error_number": 1007,
            "error": "Protocol authentication error",
            "source": "_dump_nodes",
        }
        assert _only_error(jobs) == {
            "description": "Unable to query jobs",
            "error_number": 1007,
            "error": "Protocol authentication error",
            "source": "slurm_load_jobs()",
        }
        assert parts.json()["errors"] == []
        assert missing.status_code == 401
        # the client tells a rejected token from a silent controller
        s.token_file.write_text(bad + "\n")
        with pytest.raises(Unauthorized):
            await s.client.ping()


# --- 7a/7b: after RESUME / UNDRAIN -------------------------------------------------------------


@pytest.mark.parametrize(("release", "version", "failed"), RELEASES)
@pytest.mark.parametrize("how", ["UNDRAIN", "RESUME"])
async def test_a_resumed_node_reads_not_responding_for_a_second(
    tmp_path: Path, release: str, version: str, failed: int, how: str
) -> None:
    """Right after UNDRAIN/RESUME of a drained node it reads ``IDLE+NOT_RESPONDING`` (``sinfo``
    ``idle*``) until slurmctld's next ping, about 1 s later (24.11.5 and 26.05.5);
    ``not_responding_after_resume_s = 0`` turns that off."""
    del failed
    async with running(tmp_path, (version,), slurm_release=release) as s:
        await s.client.drain("n1", "bad fan")
        await s.client.update_node("n1", NodeUpdate(state=(how,)))
        assert (await s.client.get_node("n1")).state == ("IDLE", "NOT_RESPONDING")
        assert s.sim.node("n1").state == ("IDLE", "NOT_RESPONDING")
        s.clock.advance(0.5)
        assert (await s.client.get_node("n1")).state == ("IDLE", "NOT_RESPONDING")
        s.clock.advance(0.5)
        assert (await s.client.get_node("n1")).state == ("IDLE",)

        s.sim.not_responding_after_resume_s = 0
        await s.client.drain("n2", "bad fan")
        await s.client.update_node("n2", NodeUpdate(state=(how,)))
        assert (await s.client.get_node("n2")).state == ("IDLE",)


@pytest.mark.parametrize(("release", "version", "failed"), RELEASES)
async def test_undrain_keeps_the_reason_on_24_11(
    tmp_path: Path, release: str, version: str, failed: int
) -> None:
    """After UNDRAIN, 24.11.5 still shows the old drain reason (with its user and time);
    26.05.5 clears it."""
    del failed
    async with running(tmp_path, (version,), slurm_release=release) as s:
        s.clock.advance(3)
        await s.client.drain("n1", "bad fan")
        await s.client.undrain("n1")
        node = await s.client.get_node("n1")
        assert not node.has("DRAIN")
        if release == "24.11":
            assert (node.reason, node.reason_set_by_user, node.reason_changed_at) == (
                "bad fan",
                "slurmrest",
                int(T0) + 3,
            )
        else:
            assert (node.reason, node.reason_set_by_user, node.reason_changed_at) == ("", "", 0)


# --- 7c: an external job on an external node ---------------------------------------------------


async def test_external_job_on_an_external_node(tmp_path: Path) -> None:
    """26.05.5: a node created with ``State=External`` running an ``EXTERNAL_JOB`` reports
    ``alloc_cpus: 0``, ``alloc_idle_cpus`` = its CPUs and state ``["ALLOCATED", "EXTERNAL",
    "DYNAMIC_NORM"]``; it is IDLE again once the job is cancelled."""
    async with running(tmp_path, ("v0.0.45",)) as s:
        s.sim.add_partition("ext")
        await s.client.create_node(EXTERNAL_LINE)
        job_id = await s.client.submit_job(JobSubmit(name="pod", partition="ext", external=True))
        job = await s.client.get_job(job_id)
        assert job is not None
        assert (job.base_state, job.nodes, job.flags) == ("RUNNING", ("ext1",), ("EXTERNAL_JOB",))
        async with raw_http(s) as raw:
            wire = await _node_wire(raw, s, "v0.0.45", "ext1")
            assert wire["state"] == ["ALLOCATED", "EXTERNAL", "DYNAMIC_NORM"]
            assert (wire["alloc_cpus"], wire["alloc_idle_cpus"], wire["cpus"]) == (0, 4, 4)
            await s.client.cancel_job(job_id)
            wire = await _node_wire(raw, s, "v0.0.45", "ext1")
        assert wire["state"] == ["IDLE", "EXTERNAL", "DYNAMIC_NORM"]
        assert (wire["alloc_cpus"], wire["alloc_idle_cpus"]) == (0, 4)


# --- 7d: the status of a Slurm error -----------------------------------------------------------


@pytest.mark.parametrize(("release", "version", "failed"), RELEASES)
async def test_slurm_errors_are_422_on_26_05_and_500_on_24_11(
    tmp_path: Path, release: str, version: str, failed: int
) -> None:
    """26.05.5 answers Slurm errors (an unknown partition on submit, an invalid node update,
    a node that cannot be deleted) with HTTP 422 where 24.11.5 answers 500. Answers with a
    status of their own keep it: an unknown node is HTTP 200 with an error entry, an unknown
    partition 422 (9000), an unknown URL 404."""
    async with running(tmp_path, (version,), slurm_release=release) as s:
        async with raw_http(s) as raw:
            submit = await raw.post(
                f"/slurm/{version}/job/submit",
                content=_submit_body(version, partition="nosuch"),
                headers={**_auth(s), "Content-Type": "application/json"},
            )
            resume = await raw.post(
                f"/slurm/{version}/node/n1", json={"state": ["RESUME"]}, headers=_auth(s)
            )
            delete = await raw.delete(f"/slurm/{version}/node/n1", headers=_auth(s))
            node = await raw.get(f"/slurm/{version}/node/nosuch", headers=_auth(s))
            part = await raw.get(f"/slurm/{version}/partition/nosuch", headers=_auth(s))
        async with httpx.AsyncClient(base_url=s.sim.url) as plain:  # not a documented path
            url = await plain.get(f"/slurm/{version}/nosuch/", headers=_auth(s))
        assert (submit.status_code, _only_error(submit)["error_number"]) == (failed, 2000)
        transition = 2028 if version == "v0.0.42" else 2180
        assert (resume.status_code, _only_error(resume)["error_number"]) == (failed, transition)
        assert (delete.status_code, _only_error(delete)["error_number"]) == (failed, 2028)
        assert (node.status_code, _only_error(node)["error_number"]) == (200, 0)
        assert (part.status_code, _only_error(part)["error_number"]) == (422, 9000)
        assert url.status_code == 404


async def test_v0038_errors_stay_500(tmp_path: Path) -> None:
    """Slurm 22.05 (v0.0.38) answers Slurm errors with HTTP 500 whatever the release set."""
    async with running(tmp_path, ("v0.0.38",)) as s:
        with pytest.raises(SlurmError) as info:
            await s.client.submit_job(JobSubmit(name="x", partition="nosuch"))
        assert (info.value.status, info.value.error_number) == (500, 2000)


# --- 7e: what 24.11 serves ---------------------------------------------------------------------


def test_unknown_release_is_refused() -> None:
    with pytest.raises(ValueError, match="slurm_release"):
        SlurmSim(slurm_release="23.02")


async def test_24_11_serves_v0042_only_without_new_node_or_external_jobs(tmp_path: Path) -> None:
    """24.11.5 serves v0.0.40-v0.0.42 (the simulator knows only v0.0.42 of them), has no
    ``POST new/node/`` (404) and rejects the ``EXTERNAL_JOB`` flag (error 9207, HTTP 500)."""
    sim = SlurmSim(slurm_release="24.11")
    with pytest.raises(ValueError, match=r"v0\.0\.45"):
        await sim.start(versions=("v0.0.45",))
    async with running(tmp_path, ("v0.0.42",), slurm_release="24.11") as s:
        assert s.sim.versions == ("v0.0.42",)
        assert await s.client.negotiate() == "v0.0.42"
        # not through the recorder: these paths are not in the v0.0.42 document, and the
        # EXTERNAL_JOB flag is not in its enum (which is the point)
        body = codecs.get("v0.0.45").encode_submit(JobSubmit(name="pod", partition="batch"))
        async with httpx.AsyncClient(base_url=s.sim.url) as plain:
            doc = (await plain.get("/openapi/v3", headers=_auth(s))).json()
            new = await plain.post(
                "/slurm/v0.0.42/new/node/", json={"node_conf": EXTERNAL_LINE}, headers=_auth(s)
            )
            newer = await plain.get("/slurm/v0.0.45/ping/", headers=_auth(s))
            external = await plain.post(
                "/slurm/v0.0.42/job/submit",
                content=body,
                headers={**_auth(s), "Content-Type": "application/json"},
            )
        assert {p.split("/")[2] for p in doc["paths"] if p.startswith("/slurm/")} == {"v0.0.42"}
        assert (new.status_code, newer.status_code) == (404, 404)
        assert external.status_code == 500
        assert _only_error(external)["error_number"] == 9207
        assert s.sim.jobs == []
    default = SlurmSim(slurm_release="24.11")
    await default.start()
    try:
        assert default.versions == ("v0.0.42",)
    finally:
        await default.stop()


# --- 7f: more nodes than the partition has -----------------------------------------------------


@pytest.mark.parametrize(("release", "version", "failed"), RELEASES)
async def test_more_nodes_than_the_partition_has(
    tmp_path: Path, release: str, version: str, failed: int
) -> None:
    """A job asking for 3 nodes of the 2-node partition ``gpu``: 24.11.5 refuses it at submit
    with 2014 "Requested node configuration is not available" (HTTP 500); 26.05.5 accepts it
    and leaves it PENDING with reason ``PartitionConfig``."""
    async with running(tmp_path, (version,), slurm_release=release) as s:
        job = JobSubmit(name="big", partition="gpu", min_nodes=3, tasks=3)
        if release == "24.11":
            with pytest.raises(Rejected) as info:
                await s.client.submit_job(job)
            assert (info.value.status, info.value.error_number) == (failed, 2014)
            assert "Requested node configuration is not available" in str(info.value)
            assert s.sim.jobs == []
        else:
            job_id = await s.client.submit_job(job)
            got = await s.client.get_job(job_id)
            assert got is not None
            assert (got.state, got.state_reason) == (("PENDING",), "PartitionConfig")
