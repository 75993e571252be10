"""Real slurmrestd 22.05 (API v0.0.38) through raw httpx: the facts our client and simulator copy.

These tests pin what the real server does, including where it departs from its own OpenAPI
document, so that the Slurm client codec for v0.0.38 and ``slurmbridge/devtools/sim/slurmrestd.py``
can
be checked against them. Node roles in the shared session cluster: n1/n2 are read-only (gpu),
n3 belongs to the ``update_time`` test, n4 to the drain test.
"""

from __future__ import annotations

import copy
import json
import os
import random
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft4Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

from slurmbridge.devtools.realslurm import REST_USER, RealSlurm, RealSlurmError, submit_body

V = "/slurm/v0.0.38"
DOC_PATH = Path(__file__).parents[1] / "data" / "slurm-openapi" / "v0038.json"
DOC_URI = "urn:slurmbridge:slurm-openapi:v0038"
REPO = Path(__file__).parents[2]


def wait_until(what: str, condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``condition`` every 20 ms; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def rest(real_slurm: RealSlurm) -> Iterator[httpx.Client]:
    """An httpx client for the session cluster's slurmrestd, with the JWT headers."""
    with httpx.Client(base_url=real_slurm.url, headers=real_slurm.auth_headers, timeout=10) as c:
        yield c


def get_node(rest: httpx.Client, name: str) -> dict[str, Any]:
    r = rest.get(f"{V}/node/{name}")
    assert r.status_code == 200, r.text
    nodes = r.json()["nodes"]
    assert len(nodes) == 1
    node: dict[str, Any] = nodes[0]
    return node


def node_is_clean(rest: httpx.Client, name: str) -> bool:
    """Idle with no flags. After a resume, 22.05 shows ``NOT_RESPONDING`` until slurmd answers
    the ping slurmctld sends at once (about 0.5-1 s)."""
    node = get_node(rest, name)
    return bool(node["state"] == "idle" and node["state_flags"] == [] and node["reason"] == "")


# --------------------------------------------------------------------------- basics


def test_ping(rest: httpx.Client) -> None:
    r = rest.get(f"{V}/ping")
    assert r.status_code == 200
    body = r.json()
    assert body["errors"] == []
    assert body["meta"]["plugin"]["type"] == "openapi/v0.0.38"
    assert body["meta"]["Slurm"]["release"].startswith("22.05.")
    [ping] = body["pings"]
    assert ping["ping"] == "UP"
    assert ping["mode"] == "primary"
    assert ping["status"] == 0


def test_nodes_are_idle_with_documented_shapes(rest: httpx.Client) -> None:
    r = rest.get(f"{V}/nodes")
    assert r.status_code == 200
    body = r.json()
    assert body["errors"] == []
    nodes = {n["name"]: n for n in body["nodes"]}
    assert sorted(nodes) == ["n1", "n2", "n3", "n4"]
    for name, node in nodes.items():
        # lowercase base state + uppercase flags, as the recipe documents
        assert node["state"] == "idle", (name, node["state"], node["state_flags"])
        assert node["state_flags"] == []
        assert node["cpus"] == 2
        assert node["real_memory"] == 1000  # MiB, forced by config_overrides
        assert node["alloc_cpus"] == 0
        assert node["idle_cpus"] == 2
        assert node["address"] == "127.0.0.1"
        assert node["reason"] == ""
        assert node["reason_changed_at"] == 0
        assert node["reason_set_by_user"] is None  # null, not "" (see the OpenAPI test)
        assert node["tres"] == "cpu=2,mem=1000M,billing=2"
    assert nodes["n1"]["partitions"] == ["batch", "gpu"]
    assert nodes["n2"]["partitions"] == ["batch", "gpu"]
    assert nodes["n3"]["partitions"] == ["batch"]
    assert nodes["n4"]["partitions"] == ["batch"]


def test_partitions_shapes(rest: httpx.Client) -> None:
    r = rest.get(f"{V}/partitions")
    assert r.status_code == 200
    parts = {p["name"]: p for p in r.json()["partitions"]}
    assert sorted(parts) == ["batch", "gpu"]
    batch, gpu = parts["batch"], parts["gpu"]
    assert batch["nodes"] == "n[1-4]"
    assert batch["flags"] == ["default"]
    assert batch["total_nodes"] == 4
    assert batch["total_cpus"] == 8
    assert batch["max_time_limit"] == -1  # MaxTime=INFINITE
    assert batch["state"] == "UP"
    assert gpu["nodes"] == "n[1-2]"
    assert gpu["flags"] == []
    assert gpu["total_nodes"] == 2
    assert gpu["max_time_limit"] == 60  # minutes
    # 22.05 spells this key with spaces; the documented "min_nodes_per_job" never appears
    assert batch["min nodes per job"] == 0
    assert "min_nodes_per_job" not in batch


# --------------------------------------------------------------------------- drains


def test_admin_drain_shows_reason_and_resume_clears_it(
    real_slurm: RealSlurm, rest: httpx.Client
) -> None:
    reason = "disk replacement (ticket 42)"
    before = time.time()
    real_slurm.admin_drain("n4", reason)
    try:
        node = get_node(rest, "n4")
        assert node["state"] == "idle"  # drained = idle base state + DRAIN flag
        assert "DRAIN" in node["state_flags"]
        assert node["reason"] == reason
        assert node["reason_set_by_user"] == "root"
        assert node["reason_changed_at"] >= int(before)
        assert real_slurm.node_states()["n4"] == "drained"
    finally:
        real_slurm.undrain("n4")
    wait_until("n4 idle without flags after resume", lambda: node_is_clean(rest, "n4"))
    node = get_node(rest, "n4")
    assert node["reason_set_by_user"] is None
    assert node["reason_changed_at"] == 0


def test_node_update_over_rest_is_405(rest: httpx.Client) -> None:
    # v0.0.38 has no node update (it arrives in v0.0.39): drains go through scontrol
    r = rest.post(f"{V}/node/n1", json={"state": "DRAIN", "reason": "x"})
    assert r.status_code == 405
    assert get_node(rest, "n1")["state_flags"] == []


# --------------------------------------------------------------------------- update_time


def test_update_time_on_nodes(real_slurm: RealSlurm, rest: httpx.Client) -> None:
    """``?update_time=T`` answers 304 when nothing changed since T (seconds, strictly after).

    A 22.05 bug: slurmrestd passes the same T to ``slurm_load_partitions`` after loading the
    nodes (``src/plugins/openapi/v0.0.38/nodes.c``). So when nodes changed but partitions did
    not, /nodes answers **500** ``{"error": "Unspecified error", "errno": -1}`` instead of
    200; only when partitions changed too does it answer 200. A client must treat that 500 as
    "changed, fetch without update_time". (A change of partitions alone gives 304.)
    """

    def nodes_since(mark: int) -> httpx.Response:
        return rest.get(f"{V}/nodes", params={"update_time": mark})

    # Slurm compares whole seconds and answers "no change" when update_time - 1 >= the last
    # change, so a mark one second ahead covers everything so far. slurmctld also touches
    # nodes on its own (node pings, about every 10 s here), so retry with a fresh mark.
    marks: list[tuple[int, int]] = []

    def unchanged_since_fresh_mark() -> bool:
        mark = int(time.time()) + 1
        r = nodes_since(mark)
        marks.append((mark, r.status_code))
        return r.status_code == 304

    wait_until("a 304 from /nodes?update_time", unchanged_since_fresh_mark, timeout=15)
    mark = marks[-1][0]
    r = nodes_since(mark)
    assert r.status_code == 304
    assert r.content == b""
    assert rest.get(f"{V}/partitions", params={"update_time": mark}).status_code == 304
    assert nodes_since(mark - 3600).status_code == 200  # everything changed since then

    # make the change land in a later second than the mark
    wait_until("the clock to pass the mark", lambda: time.time() >= mark, timeout=2)
    real_slurm.admin_drain("n3", "update_time test")
    try:
        r = nodes_since(mark)
        assert r.status_code == 500, r.text  # the bug described above, not a 200
        assert r.json()["errors"] == [{"error": "Unspecified error", "errno": -1}]
        assert r.json()["nodes"] == []
        assert rest.get(f"{V}/partitions", params={"update_time": mark}).status_code == 304
        plain = rest.get(f"{V}/nodes")
        assert plain.status_code == 200
        n3 = next(n for n in plain.json()["nodes"] if n["name"] == "n3")
        assert "DRAIN" in n3["state_flags"]

        # once partitions changed as well, the conditional GET answers 200 with the nodes
        real_slurm.scontrol("update", "partitionname=gpu", "maxtime=59")
        try:
            r = nodes_since(mark)
            assert r.status_code == 200, r.text
            assert {n["name"] for n in r.json()["nodes"]} == {"n1", "n2", "n3", "n4"}
        finally:
            real_slurm.scontrol("update", "partitionname=gpu", "maxtime=60")
    finally:
        real_slurm.undrain("n3")
    wait_until("n3 idle without flags after resume", lambda: node_is_clean(rest, "n3"))


# --------------------------------------------------------------------------- auth, errors


def test_missing_token_is_401(real_slurm: RealSlurm) -> None:
    r = httpx.get(f"{real_slurm.url}{V}/nodes", timeout=10)
    assert r.status_code == 401
    r = httpx.get(
        f"{real_slurm.url}{V}/nodes", headers={"X-SLURM-USER-NAME": REST_USER}, timeout=10
    )
    assert r.status_code == 401
    # 22.05 wants both headers: a token without the user name is refused too ...
    r = httpx.get(
        f"{real_slurm.url}{V}/nodes",
        headers={"X-SLURM-USER-TOKEN": real_slurm.token},
        timeout=10,
    )
    assert r.status_code == 401
    # ... and a wrong token is not a 401: slurmctld rejects the RPC, slurmrestd says 500
    r = httpx.get(
        f"{real_slurm.url}{V}/nodes",
        headers={"X-SLURM-USER-NAME": REST_USER, "X-SLURM-USER-TOKEN": "not-a-jwt"},
        timeout=10,
    )
    assert r.status_code == 500
    assert r.json()["errors"] == [{"error": "Unspecified error", "errno": -1}]


def test_error_bodies_name_the_number_differently_per_endpoint(rest: httpx.Client) -> None:
    """Errors are HTTP 500 objects ``{meta, errors, <items>: []}``, not the documented array
    (``v0.0.38_errors``); nodes/partitions say ``errno``, jobs say ``error_number``."""
    r = rest.get(f"{V}/node/nope")
    assert r.status_code == 500
    body = r.json()
    assert body["nodes"] == []
    assert body["errors"] == [{"error": "Invalid node name specified", "errno": 2018}]

    r = rest.get(f"{V}/partition/nope")
    assert r.status_code == 500
    assert r.json()["errors"] == [{"error": "Invalid partition name specified", "errno": 2000}]

    r = rest.get(f"{V}/job/999999")
    assert r.status_code == 500
    [err] = r.json()["errors"]
    assert err["error_number"] == 2017
    assert err["error"] == "Invalid job id specified"
    assert "errno" not in err


# --------------------------------------------------------------------------- OpenAPI document


def load_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DOC_PATH.read_text())
    return doc


# Where 22.05's responses depart from its own document, found by validating real responses
# and read in the plugin's source (src/plugins/openapi/v0.0.38/{api,nodes,partitions}.c):
# the version numbers are written with data_set_int, and unset values (NO_VAL, a uid with no
# name) with data_set_null, while the hand-written document declares strings and has no
# `nullable`. Each entry: (component schema, property path inside it, where the property
# appears in a response with list indexes as "*", the JSON type the server really sends).
NODE_NULLS = ("owner", "reason_set_by_user", "tres_used")
PARTITION_NULLS = (
    "default_memory_per_cpu",
    "default_memory_per_node",
    "default_time_limit",
    "maximum_cpus_per_node",
    "maximum_memory_per_cpu",
    "maximum_memory_per_node",
    "over_time_limit",
)
KNOWN_DEVIATIONS: list[tuple[str, tuple[str, ...], tuple[str, ...], str]] = [
    *[
        ("v0.0.38_meta", ("Slurm", "version", p), ("meta", "Slurm", "version", p), "integer")
        for p in ("major", "minor", "micro")
    ],
    *[("v0.0.38_node", (p,), ("nodes", "*", p), "null") for p in NODE_NULLS],
    *[("v0.0.38_partition", (p,), ("partitions", "*", p), "null") for p in PARTITION_NULLS],
]


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {str: "string", float: "number", list: "array", dict: "object"}[type(value)]


def relaxed_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with exactly the :data:`KNOWN_DEVIATIONS` allowed, nothing else."""
    relaxed = copy.deepcopy(doc)
    for schema, path, _where, extra in KNOWN_DEVIATIONS:
        node = relaxed["components"]["schemas"][schema]
        for part in path:
            node = node["properties"][part]
        assert isinstance(node["type"], str), (schema, path)
        node["type"] = [node["type"], extra]
    return relaxed


def response_validator(doc: dict[str, Any], path: str) -> Draft4Validator:
    """A validator for the 200 JSON response of ``GET path`` as ``doc`` declares it.

    OpenAPI 3.0 schema objects are a JSON Schema draft 4/5 dialect: Draft4Validator with every
    ``$ref`` resolved inside the document through a ``referencing`` registry.
    """
    registry: Registry[Any] = Registry().with_resource(
        DOC_URI, Resource.from_contents(doc, default_specification=DRAFT4)
    )
    pointer = "/".join(
        [
            "",
            "paths",
            path.replace("~", "~0").replace("/", "~1"),
            "get",
            "responses",
            "200",
            "content",
            "application~1json",
            "schema",
        ]
    )
    return Draft4Validator({"$ref": f"{DOC_URI}#{pointer}"}, registry=registry)


def test_openapi_doc_is_the_one_this_slurmrestd_serves(rest: httpx.Client) -> None:
    r = rest.get("/openapi/v3")
    assert r.status_code == 200
    assert r.json() == load_doc()


@pytest.mark.parametrize(
    ("url", "template"),
    [
        (f"{V}/nodes", f"{V}/nodes"),
        (f"{V}/partitions", f"{V}/partitions"),
        (f"{V}/node/n1", f"{V}/node/{{node_name}}"),
        (f"{V}/partition/gpu", f"{V}/partition/{{partition_name}}"),
        (f"{V}/ping", f"{V}/ping"),
    ],
)
def test_responses_validate_against_openapi_doc(
    rest: httpx.Client, url: str, template: str
) -> None:
    """Real responses break their own document only in the :data:`KNOWN_DEVIATIONS`.

    Strict validation must report nothing but those (so a new mismatch fails here), and the
    document relaxed by exactly those must accept the response.
    """
    r = rest.get(url)
    assert r.status_code == 200
    body = r.json()
    doc = load_doc()

    known = {where: sent for _schema, _path, where, sent in KNOWN_DEVIATIONS}
    strict = list(response_validator(doc, template).iter_errors(body))
    unexplained = []
    for err in strict:
        where = tuple("*" if isinstance(p, int) else str(p) for p in err.absolute_path)
        if err.validator != "type" or known.get(where) != json_type(err.instance):
            unexplained.append(f"{'/'.join(map(str, err.absolute_path))}: {err.message}")
    assert unexplained == [], "responses break the OpenAPI document in new ways"
    # the version numbers are always integers: the deviation list is not stale
    assert any(tuple(e.absolute_path)[:3] == ("meta", "Slurm", "version") for e in strict)

    relaxed_errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in response_validator(relaxed_doc(doc), template).iter_errors(body)
    ]
    assert relaxed_errors == []


# --------------------------------------------------------------------------- the helper itself


def test_token_file_env_and_helpers(real_slurm: RealSlurm) -> None:
    st = real_slurm.token_file.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == os.geteuid()
    assert real_slurm.token_file.read_text().strip() == real_slurm.token
    assert real_slurm.user == "slurmrest"
    assert stat.S_IMODE(real_slurm.workdir.stat().st_mode) == 0o755

    env = real_slurm.env({"PATH": "/usr/bin", "SLURM_JWT": "x", "HOME": "/root"})
    assert "SLURM_JWT" not in env
    assert env["SLURM_CONF"] == str(real_slurm.conf)
    assert env["SLURM_REST"] == real_slurm.url
    assert env["SLURM_REST_TOKEN_FILE"] == str(real_slurm.token_file)
    assert real_slurm.token not in env.values()
    assert env["HOME"] == "/root"

    assert "PartitionName=gpu Nodes=n[1-2]" in real_slurm.conf.read_text()
    assert "n1" in real_slurm.sinfo("-h", "-N", "-o", "%N")
    assert real_slurm.node_states() == dict.fromkeys(("n1", "n2", "n3", "n4"), "idle")


def live_processes_using(workdir: Path) -> list[str]:
    """Non-zombie processes whose command line, cwd or open files name ``workdir``."""
    prefix = f"{workdir}/"
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            status = (proc / "stat").read_text()
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(proc / "cwd")
            fds = []
            for fd in (proc / "fd").iterdir():
                try:
                    fds.append(os.readlink(fd))
                except OSError:
                    pass
        except OSError:
            continue
        if status[status.rindex(")") + 2] == "Z":
            continue
        if (
            prefix in cmd
            or cwd == str(workdir)
            or cwd.startswith(prefix)
            or any(f.startswith(prefix) for f in fds)
        ):
            found.append(f"{proc.name} {cmd}")
    return found


def live_processes_running(command: str) -> list[int]:
    """Non-zombie processes whose command line is exactly ``command``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            status = (proc / "stat").read_text()
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        if cmd == command and status[status.rindex(")") + 2] != "Z":
            found.append(int(proc.name))
    return found


def test_second_cluster_runs_beside_and_stop_ends_running_jobs(
    real_slurm: RealSlurm, rest: httpx.Client
) -> None:
    """Two clusters share the machine; stop() leaves no process behind, even with a job."""
    other = RealSlurm(nodes=2)
    seconds = random.randint(1000, 9999)  # marks this job's process among any others
    with other:
        assert other.url != real_slurm.url
        assert other.startup_seconds is not None
        workdir = other.workdir
        with httpx.Client(base_url=other.url, headers=other.auth_headers, timeout=10) as c:
            r = c.post(f"{V}/job/submit", json=submit_body(f"#!/bin/bash\nsleep {seconds}\n"))
            assert r.status_code == 200, r.text
            job_id = r.json()["job_id"]

            def running() -> bool:
                job = c.get(f"{V}/job/{job_id}").json()["jobs"][0]
                return bool(job["job_state"] == "RUNNING")

            wait_until(f"job {job_id} RUNNING", running)
        # RUNNING is slurmctld's view; slurmd starts slurmstepd and the script just after
        wait_until(
            "the job's slurmstepd and script",
            lambda: (
                any("slurmstepd" in p for p in live_processes_using(workdir))
                and bool(live_processes_running(f"sleep {seconds}"))
            ),
        )
    assert live_processes_using(workdir) == []
    assert live_processes_running(f"sleep {seconds}") == []  # the job's tree went too
    assert not workdir.exists()  # created by RealSlurm, so removed by stop()
    # the session cluster did not notice
    assert rest.get(f"{V}/ping").json()["pings"][0]["ping"] == "UP"
    other.stop()  # a second stop is a no-op


def test_cli_up_writes_env_file_and_down_stops_everything() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="realslurm-cli-"))
    cli = [sys.executable, "-m", "slurmbridge.devtools.realslurm"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    try:
        up = subprocess.run(
            [*cli, "up", str(workdir), "--nodes", "2"],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=60,
            check=False,
        )
        assert up.returncode == 0, up.stderr
        assert f"source {workdir}/slurm.env" in up.stdout

        env_file = workdir / "slurm.env"
        assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
        values = dict(
            line.removeprefix("export ").split("=", 1)
            for line in env_file.read_text().splitlines()
            if line.startswith("export ")
        )
        assert set(values) == {
            "SLURM_CONF",
            "SLURM_REST",
            "SLURM_REST_USER",
            "SLURM_REST_TOKEN_FILE",
            "SLURM_REST_TOKEN",
        }
        assert "SLURM_JWT" not in env_file.read_text().replace("# not SLURM_JWT", "")
        token = Path(values["SLURM_REST_TOKEN_FILE"]).read_text().strip()
        assert token == values["SLURM_REST_TOKEN"]
        r = httpx.get(
            f"{values['SLURM_REST']}{V}/nodes",
            headers={"X-SLURM-USER-NAME": values["SLURM_REST_USER"], "X-SLURM-USER-TOKEN": token},
            timeout=10,
        )
        assert r.status_code == 200
        assert [n["name"] for n in r.json()["nodes"]] == ["n1", "n2"]

        # a second 'up' refuses while the cluster runs
        again = subprocess.run(
            [*cli, "up", str(workdir)],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=60,
            check=False,
        )
        assert again.returncode == 1
        assert "still running" in again.stderr
    finally:
        down = subprocess.run(
            [*cli, "down", str(workdir)],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=60,
            check=False,
        )
    assert down.returncode == 0, down.stderr
    assert live_processes_using(workdir) == []
    assert workdir.exists()  # a directory given by the user is kept
    subprocess.run(["rm", "-rf", str(workdir)], check=True)


def test_refuses_a_work_directory_slurmrestd_cannot_reach(tmp_path: Path) -> None:
    # pytest's tmp_path lives under a 0700 folder: the recipe's first pitfall
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(RealSlurmError, match="cannot reach"):
        RealSlurm(nodes=2, workdir=private / "cluster").start()
