"""The Slurm REST client against the slurmrestd simulator, over real HTTP, for every version.

Every request the client sends and every answer the simulator gives in these tests is recorded
(:class:`Recorder`, an httpx transport) and validated against the matching real OpenAPI
document in ``tests/data/slurm-openapi/`` with jsonschema (``$ref`` resolved inside the
document): successful answers strictly against ``responses["200"]``, node-update bodies
against ``requestBody``. Two documented divergences of the real servers from their own
documents are reproduced by the simulator and validated accordingly:

* error answers of v0.0.42+ (HTTP 422/500, and the HTTP 200 answer for an unknown node) lack the
  listing's ``required`` fields, so each field they do carry is validated against the
  ``default`` response schema's property of that name;
* v0.0.38's document types the ``default`` (error) response as an array, while Slurm 22.05
  answers errors with the same object as a success (``meta``, ``errors``, an empty list), so
  error answers are validated against the ``200`` schema;
* ``GET jobs/state/`` (v0.0.42+) is documented as ``openapi_job_info_resp``, but Slurm's
  data_parser renders OPENAPI_JOB_STATE_RESP (``src/plugins/data_parser/v0.0.44/parsers.c``:
  ``jobs`` of ``{"job_id": "<string>", "state": [flags]}``, no ``last_update``), so its answers
  are validated against :data:`JOB_STATES_SCHEMA`, that shape;
* ``POST job/{job_id}`` answers ``"results": null`` (recorded from Slurm 26.05.5) where the
  document wants an array, so a ``null`` there is left out before validating;
* with a token slurmctld rejects, ``GET partitions/`` answers HTTP 511 with an empty
  ``errors`` list (recorded from 24.11.5 and 26.05.5), so a 511 needs no error entry;
* the data_parser documents list nested fields as ``required`` names with a slash
  (``kill_jobs_resp_job`` requires ``"error/string"``, ``"federation/sibling"`` …), which no
  object can have; they are read as what they mean: ``error`` required, and ``string``
  required inside it (:func:`_nested_required`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import httpx
import msgspec
import pytest
from jsonschema import Draft7Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from slurmbridge.devtools.sim.slurmrestd import ALL_VERSIONS, SlurmSim, serve
from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.errors import (
    Conflict,
    NotFound,
    Rejected,
    Unauthorized,
    Unavailable,
    Unsupported,
)
from slurmbridge.slurm.models import JobSubmit, NodeUpdate, ReservationDesc

pytestmark = pytest.mark.integration

DOCS = Path(__file__).parents[1] / "data" / "slurm-openapi"
VERSIONS = ("v0.0.38", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")
UPDATABLE = VERSIONS[1:]
T0 = 1_800_000_000.0


# --- OpenAPI validation ------------------------------------------------------------------------


def _pointer(*parts: str) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def _nested_required(node: Any) -> None:
    """Rewrite, in place, ``required`` names like ``"error/string"`` into ``"error"`` required
    here and ``"string"`` required in ``properties.error`` (when that is an inline object)."""
    if isinstance(node, list):
        for item in node:
            _nested_required(item)
        return
    if not isinstance(node, dict):
        return
    required = node.get("required")
    if isinstance(required, list) and any("/" in r for r in required):
        flat: list[str] = []
        for name in required:
            head, _, rest = name.partition("/")
            if head not in flat:
                flat.append(head)
            inner = node.get("properties", {}).get(head)
            if rest and isinstance(inner, dict) and "properties" in inner:
                inner["required"] = [*inner.get("required", []), rest]
        node["required"] = flat
    for value in node.values():
        _nested_required(value)


class OpenAPI:
    """One real OpenAPI document, with validators that resolve ``$ref`` inside it."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.doc: dict[str, Any] = json.loads(
            (DOCS / f"v{version[1:].replace('.', '')}.json").read_text()
        )
        _nested_required(self.doc)  # see the module docstring
        self.uri = f"urn:slurm-openapi:{version}"
        self.registry: Registry[Any] = Registry().with_resource(
            self.uri, Resource.from_contents(self.doc, default_specification=DRAFT7)
        )
        # OpenAPI: a concrete path matches before a templated one (/job/submit, not
        # /job/{job_id}).
        paths = sorted(
            (p for p in self.doc["paths"] if p.startswith(f"/slurm/{version}/")),
            key=lambda p: p.count("{"),
        )
        self.templates = [
            (re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(p)) + "$"), p)
            for p in paths
        ]

    def template(self, path: str) -> str:
        """The document's path template matching ``path`` exactly (slashes included)."""
        for rx, template in self.templates:
            if rx.match(path):
                return template
        raise AssertionError(f"{path} is not a path of the {self.version} document")

    def validate(self, pointer: str, value: Any) -> None:
        schema = {"$ref": self.uri + "#" + quote(pointer, safe="/~")}
        errors = sorted(
            Draft7Validator(schema, registry=self.registry).iter_errors(value),
            key=lambda e: list(e.absolute_path),
        )
        assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:10])

    def resolve(self, pointer: str) -> Any:
        node: Any = self.doc
        for part in pointer.split("/")[1:]:
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node


@functools.cache
def openapi(version: str) -> OpenAPI:
    return OpenAPI(version)


@dataclass
class Exchange:
    method: str
    path: str
    request_body: bytes
    status: int
    content_type: str
    body: bytes


class Recorder(httpx.AsyncBaseTransport):
    """A real HTTP transport that keeps every request and answer."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        await response.aclose()
        self.exchanges.append(
            Exchange(
                request.method,
                request.url.path,
                request.content,
                response.status_code,
                response.headers.get("content-type", ""),
                body,
            )
        )
        return httpx.Response(
            response.status_code, headers=response.headers, content=body, request=request
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


#: What Slurm's data_parser sends for ``GET jobs/state/`` (see the module docstring).
JOB_STATES_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["jobs"],
    "properties": {
        "jobs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["job_id", "state"],
                "additionalProperties": False,
                "properties": {
                    "job_id": {"type": "string", "pattern": r"^[0-9]+([_+].+)?$"},
                    "state": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "meta": {"type": "object"},
        "errors": {"type": "array"},
        "warnings": {"type": "array"},
    },
}


def validate_exchange(x: Exchange) -> str:
    """Validate one exchange against its version's document; returns what was checked."""
    version = x.path.split("/")[2] if x.path.startswith("/slurm/") else ""
    if version not in VERSIONS:
        return "skipped"
    api = openapi(version)
    template = api.template(x.path)
    operation = api.doc["paths"][template].get(x.method.lower())
    if operation is None:
        assert x.status == 405, f"{x.method} {x.path} is not in the document but got {x.status}"
        return "405"
    op_ptr = _pointer("paths", template, x.method.lower())
    if x.request_body:
        api.validate(
            op_ptr + "/requestBody/content/application~1json/schema", json.loads(x.request_body)
        )
    if x.status == 304:
        assert x.body == b""
        return "304"
    if not x.content_type.startswith("application/json"):
        assert x.status in (401, 404, 405, 500, 502, 503, 504), (x.status, x.body)
        return "text"
    body = json.loads(x.body)
    if "content" not in operation["responses"].get("200", {}):
        # v0.0.38 documents no body for job update/cancel answers: only its errors count.
        assert x.status == 200 or body.get("errors"), (x.status, body)
        return "undocumented-body"
    ok_ptr = op_ptr + "/responses/200/content/application~1json/schema"
    if template.endswith("/jobs/state/") and x.status == 200 and not body.get("errors"):
        errors = list(Draft7Validator(JOB_STATES_SCHEMA).iter_errors(body))
        assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
        return "job-states"
    if x.status == 200 and not body.get("errors"):
        if x.method == "POST" and "/job/" in template and body.get("results", []) is None:
            body = {k: v for k, v in body.items() if k != "results"}  # see module docstring
        api.validate(ok_ptr, body)
        return "200"
    if version == "v0.0.38":
        api.validate(ok_ptr, body)
        return "error-38"
    ref = api.resolve(op_ptr + "/responses/default/content/application~1json/schema")["$ref"]
    component = ref.removeprefix("#")
    properties = api.resolve(component)["properties"]
    for key, value in body.items():
        assert key in properties, f"{key!r} is not a property of {component}"
        api.validate(component + _pointer("properties", key), value)
    assert body["errors"] or x.status == 511, "an error answer without errors"
    return "error"


@pytest.mark.parametrize(
    ("version", "path", "body"),
    [
        (
            "v0.0.44",
            "/slurm/v0.0.44/nodes/",
            {"nodes": [{"state": ["BOGUS"]}], "last_update": {"set": True, "number": 1}},
        ),
        ("v0.0.44", "/slurm/v0.0.44/nodes/", {"nodes": []}),  # last_update is required
        (
            "v0.0.42",
            "/slurm/v0.0.42/partitions/",
            {"partitions": [{"nodes": "n1"}], "last_update": {}},
        ),
        ("v0.0.38", "/slurm/v0.0.38/nodes", {"nodes": [{"state": ["idle"]}]}),
        # jobs/state: the job id is a string, and a full job record is not what Slurm sends.
        ("v0.0.44", "/slurm/v0.0.44/jobs/state/", {"jobs": [{"job_id": 5, "state": ["PENDING"]}]}),
        (
            "v0.0.45",
            "/slurm/v0.0.45/jobs/state/",
            {"jobs": [{"job_id": "5", "state": ["PENDING"], "name": "x"}]},
        ),
    ],
)
def test_validator_is_not_vacuous(version: str, path: str, body: dict[str, Any]) -> None:
    x = Exchange("GET", path, b"", 200, "application/json", json.dumps(body).encode())
    with pytest.raises(AssertionError):
        validate_exchange(x)


def test_validator_reads_nested_required_fields() -> None:
    """``"error/code"`` in the document's ``required`` means ``error.code`` is required."""
    entry = {
        "error": {"string": "x", "message": "x"},
        "step_id": "1",
        "job_id": {"set": True, "infinite": False, "number": 1},
        "federation": {"sibling": ""},
    }
    body = json.dumps({"status": [entry], "errors": [], "warnings": []}).encode()
    x = Exchange("DELETE", "/slurm/v0.0.45/job/1", b"", 200, "application/json", body)
    with pytest.raises(AssertionError, match="'code' is a required property"):
        validate_exchange(x)
    entry["error"] = {"string": "x", "code": 2017, "message": "x"}
    body = json.dumps({"status": [entry], "errors": [], "warnings": []}).encode()
    ok = Exchange("DELETE", "/slurm/v0.0.45/job/1", b"", 200, "application/json", body)
    assert validate_exchange(ok) == "200"


def test_validator_checks_request_bodies() -> None:
    x = Exchange(
        "POST", "/slurm/v0.0.44/node/n1", b'{"state": "DRAIN"}', 200, "application/json", b"{}"
    )
    with pytest.raises(AssertionError, match="is not of type 'array'"):
        validate_exchange(x)


# --- fixtures ----------------------------------------------------------------------------------


class Clock:
    """The simulator's epoch clock, moved by the test."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float = 1.0) -> int:
        self.now += seconds
        return int(self.now)


@dataclass
class Stack:
    sim: SlurmSim
    client: SlurmClient
    recorder: Recorder
    clock: Clock
    token_file: Path


@contextlib.asynccontextmanager
async def running(
    tmp_path: Path,
    versions: tuple[str, ...],
    *,
    api_version: str | None = None,
    static_token: str | None = None,
    **sim_kw: Any,
) -> AsyncIterator[Stack]:
    """Simulator + client; on exit every recorded exchange is validated."""
    clock = Clock()
    sim = SlurmSim(clock=clock, **sim_kw)
    sim.seed_default(4)
    await sim.start(versions=versions, token=static_token)
    token_file = sim.write_token(tmp_path / "token")
    recorder = Recorder()
    client = SlurmClient(
        sim.url, token_file, "slurmrest", api_version, 5.0, transport=recorder, clock=clock
    )
    try:
        yield Stack(sim, client, recorder, clock, token_file)
        checked = [validate_exchange(x) for x in recorder.exchanges]
        assert checked, "nothing was exchanged"
    finally:
        await client.aclose()
        await sim.stop()


# --- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("served", "chosen"),
    [
        (ALL_VERSIONS, "v0.0.45"),
        (("v0.0.42", "v0.0.44"), "v0.0.44"),
        (("v0.0.43",), "v0.0.43"),
        (("v0.0.38",), "v0.0.38"),
        (("v0.0.38", "v0.0.42"), "v0.0.42"),
    ],
)
async def test_negotiate(tmp_path: Path, served: tuple[str, ...], chosen: str) -> None:
    async with running(tmp_path, served) as s:
        assert await s.client.negotiate() == chosen
        assert set(s.client.offered) == set(served)
        assert (await s.client.ping()).api_version == chosen


@pytest.mark.parametrize("version", VERSIONS)
async def test_openapi_v3_lists_the_served_paths(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,)) as s:
        await s.client.ping()
        async with httpx.AsyncClient(base_url=s.sim.url) as raw:
            served = (await raw.get("/openapi/v3", headers=_auth(s))).json()["paths"]
    real = openapi(version).doc["paths"]
    slurm_paths = {p: ops for p, ops in served.items() if p.startswith("/slurm/")}
    assert slurm_paths
    for path, ops in slurm_paths.items():
        assert path.startswith(f"/slurm/{version}/")
        assert path in real, path
        assert set(ops) <= set(real[path]), (path, set(ops), set(real[path]))


@pytest.mark.parametrize("version", VERSIONS)
async def test_ping_nodes_partitions(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,)) as s:
        s.sim.add_node(
            "gpu01",
            cpus=8,
            real_memory=64000,
            partitions=("gpu",),
            features=("a100", "ib"),
            gres="gpu:a100:4",
        )
        ping = await s.client.ping()
        assert ping.responding
        assert ping.hostnames == ("slurmctld-sim",)
        assert ping.api_version == version

        nodes = await s.client.list_nodes()
        assert nodes is not None
        assert [n.name for n in nodes.nodes] == ["n1", "n2", "n3", "n4", "gpu01"]
        assert nodes.server_last_update == (0 if version == "v0.0.38" else int(T0))
        assert nodes.last_update == int(T0) - 2  # changed this second: a safe watermark
        by_name = {n.name: n for n in nodes.nodes}
        assert by_name["n1"] == s.sim.node("n1", version)
        assert by_name["n1"].partitions == ("batch", "gpu")
        gpu01 = by_name["gpu01"]
        assert (gpu01.cpus, gpu01.real_memory, gpu01.gres) == (8, 64000, "gpu:a100:4")
        assert gpu01.features == ("a100", "ib")
        assert gpu01.state == ("IDLE",)

        parts = await s.client.list_partitions()
        assert parts is not None
        batch, gpu = parts.partitions
        assert batch.nodes == ("n1", "n2", "n3", "n4")
        assert (batch.total_cpus, batch.total_nodes, batch.max_time_minutes) == (8, 4, None)
        assert batch.is_default is (version in ("v0.0.38", "v0.0.45"))
        assert gpu.nodes == ("n1", "n2", "gpu01")
        assert (gpu.total_cpus, gpu.total_nodes, gpu.max_time_minutes) == (12, 3, 60)
        assert batch.state == gpu.state == "UP"

        assert await s.client.get_node("n3") == s.sim.node("n3", version)
        with pytest.raises(NotFound):
            await s.client.get_node("nope")


@pytest.mark.parametrize("version", VERSIONS)
async def test_update_time_answers_304(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,)) as s:
        s.clock.advance(5)
        first = await s.client.list_nodes()
        assert first is not None
        since = first.last_update
        # the client's watermark: the request's second less the clock-skew margin and one
        assert since == int(T0) + 3
        assert await s.client.list_nodes(update_time=since) is None
        assert await s.client.list_partitions(update_time=since) is None

        s.clock.advance()
        s.sim.admin_drain("n2", "bad fan")
        changed = await s.client.list_nodes(update_time=since)
        assert changed is not None  # via the released-slurmrestd error and a full listing
        assert changed.nodes[1].state == ("IDLE", "DRAIN")
        statuses = [x.status for x in s.recorder.exchanges if x.path.endswith(("nodes", "nodes/"))]
        # a Slurm error is HTTP 422 from Slurm 25.05 on (the simulator's default: 26.05)
        assert statuses == [200, 304, 500 if version == "v0.0.38" else 422, 200]
        assert await s.client.list_partitions(update_time=since) is None

        s.clock.advance()
        s.sim.add_partition("debug", ["n4"], max_time=30)
        parts = await s.client.list_partitions(update_time=since)
        assert parts is not None
        assert [p.name for p in parts.partitions] == ["batch", "gpu", "debug"]


@pytest.mark.parametrize("version", VERSIONS)
async def test_same_second_changes_are_not_hidden(tmp_path: Path, version: str) -> None:
    """Slurm compares whole seconds, and a change in the second of ``update_time`` is still
    listed (measured on 26.05.5); the watermark keeps it visible either way."""
    async with running(tmp_path, (version,), update_time_quirk=False) as s:
        s.clock.advance(5)
        s.sim.admin_drain("n1", "first change")
        listing = await s.client.list_nodes()
        assert listing is not None
        assert listing.nodes[0].state == ("IDLE", "DRAIN")
        s.sim.admin_update("n1", NodeUpdate(state=("UNDRAIN",)))  # the same second
        if version != "v0.0.38":
            same = await s.client.list_nodes(update_time=listing.server_last_update)
            assert same is not None and not same.nodes[0].has("DRAIN")
        seen = await s.client.list_nodes(update_time=listing.last_update)
        assert seen is not None
        assert seen.nodes[0].base_state == "IDLE"
        assert not seen.nodes[0].has("DRAIN")  # (NOT_RESPONDING for a second on v0.0.42+)


@pytest.mark.parametrize("version", VERSIONS)
async def test_update_time_without_the_quirk(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,), update_time_quirk=False) as s:
        s.clock.advance()  # the nodes were made at T0: a listing from T0 would list them
        since = int(s.clock())
        assert await s.client.list_nodes(update_time=since) is None
        s.clock.advance()
        s.sim.set_state("n1", "DOWN")
        changed = await s.client.list_nodes(update_time=since)
        assert changed is not None
        assert changed.nodes[0].state == ("DOWN",)
        statuses = [x.status for x in s.recorder.exchanges if x.path.endswith(("nodes", "nodes/"))]
        assert statuses == [304, 200]


@pytest.mark.parametrize("version", UPDATABLE)
async def test_drain_and_undrain(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,)) as s:
        arrivals: list[tuple[str, NodeUpdate, float]] = []
        s.sim.on_update.append(lambda name, upd, ts: arrivals.append((name, upd, ts)))
        s.clock.advance(5)
        before = asyncio.get_running_loop().time()
        reason = "slurm-bridge: Corresponding Kubernetes node (n1) is unschedulable"
        await s.client.drain("n1", reason)
        node = await s.client.get_node("n1")
        assert node.state == ("IDLE", "DRAIN")
        assert node.reason == reason
        assert node.reason_set_by_user == "slurmrest"
        assert node.reason_changed_at == int(T0) + 5
        assert [(n, u.state) for n, u, _ in arrivals] == [("n1", ("DRAIN",))]
        assert before <= arrivals[0][2] <= asyncio.get_running_loop().time()

        await s.client.undrain("n1")
        node = await s.client.get_node("n1")
        # recorded from Slurm 24.11.5 and 26.05.5: idle* until slurmctld's next ping
        assert node.state == ("IDLE", "NOT_RESPONDING")
        assert (node.reason, node.reason_set_by_user, node.reason_changed_at) == ("", "", 0)
        s.clock.advance(1)
        assert (await s.client.get_node("n1")).state == ("IDLE",)

        await s.client.update_node("n2", NodeUpdate(features=("fast",), comment="rack 1"))
        n2 = await s.client.get_node("n2")
        assert (n2.features, n2.comment) == (("fast",), "rack 1")

        with pytest.raises(NotFound):
            await s.client.drain("nope", "x")
        with pytest.raises(Conflict) as info:
            await s.client.update_node("n3", NodeUpdate(state=("RESUME",)))
        assert info.value.error_number == (2028 if version in ("v0.0.42", "v0.0.43") else 2180)
        posts = [x for x in s.recorder.exchanges if x.method == "POST"]
        assert len(posts) == 5
        assert all(x.request_body for x in posts)


@pytest.mark.parametrize("version", VERSIONS)
async def test_admin_drain_fields_and_drain_completion(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,)) as s:
        s.clock.advance(7)
        s.sim.admin_drain("n2", "maintenance", user="root")
        n2 = await s.client.get_node("n2")
        assert n2.state == ("IDLE", "DRAIN")
        assert (n2.reason, n2.reason_set_by_user, n2.reason_changed_at) == (
            "maintenance",
            "root",
            int(T0) + 7,
        )

        s.sim.allocate("n3", 2)
        s.sim.admin_drain("n3", "drain busy")
        assert (await s.client.get_node("n3")).state == ("ALLOCATED", "DRAIN")
        s.sim.allocate("n4", 1)
        s.sim.admin_drain("n4", "drain mixed")
        assert (await s.client.get_node("n4")).state == ("MIXED", "DRAIN")
        s.sim.release("n3")
        n3 = await s.client.get_node("n3")
        assert n3.state == ("IDLE", "DRAIN")  # the drain completed when the node went idle
        assert n3.reason == "drain busy"

        s.sim.set_state("n1", "DOWN", ["NOT_RESPONDING"])
        assert (await s.client.get_node("n1")).state == ("DOWN", "NOT_RESPONDING")
        s.sim.admin_update("n1", NodeUpdate(state=("RESUME",)))
        assert (await s.client.get_node("n1")).state == ("IDLE", "NOT_RESPONDING")


async def test_v0038_node_update_is_unsupported(tmp_path: Path) -> None:
    async with running(tmp_path, ("v0.0.38",)) as s:
        await s.client.negotiate()
        with pytest.raises(Unsupported) as info:
            s.client.require("update_node")
        assert (info.value.version, info.value.operation) == ("v0.0.38", "update_node")
        with pytest.raises(Unsupported):
            await s.client.drain("n1", "x")
        with pytest.raises(Unsupported):
            await s.client.undrain("n1")
        async with httpx.AsyncClient(base_url=s.sim.url, transport=s.recorder) as raw:
            resp = await raw.post(
                "/slurm/v0.0.38/node/n1", json={"state": "drain"}, headers=_auth(s)
            )
        assert resp.status_code == 405
        assert resp.headers["content-type"].startswith("text/plain")
        assert s.sim.node("n1").state == ("IDLE",)


@pytest.mark.parametrize("version", VERSIONS)
async def test_missing_token_is_401(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,)) as s:
        anonymous = SlurmClient(s.sim.url, None, None, version, transport=s.recorder)
        with pytest.raises(Unauthorized) as info:
            await anonymous.list_nodes()
        assert info.value.status == 401
        await anonymous.aclose()


@pytest.mark.parametrize("version", VERSIONS)
async def test_bad_token(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,)) as s:
        bad = "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJzbHVybXJlc3QifQ.Zm9yZ2Vk"
        s.token_file.write_text(bad)
        if version == "v0.0.38":
            # Slurm 22.05 passes the token to slurmctld and reports its refusal as errno -1
            with pytest.raises(Rejected) as info:
                await s.client.list_nodes()
            assert (info.value.status, info.value.error_number) == (500, -1)
        else:
            # recorded from Slurm 24.11.5 and 26.05.5: slurmctld rejects the token (1007),
            # which slurmrestd answers with HTTP 511
            with pytest.raises(Unauthorized) as info:  # type: ignore[assignment]
                await s.client.list_nodes()
            assert (info.value.status, info.value.error_number) == (511, 1007)
        assert bad not in str(info.value)
        assert bad not in repr(s.client)


@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.44"])
@pytest.mark.parametrize("static", [True, False])
async def test_token_rotation_needs_no_restart(tmp_path: Path, version: str, static: bool) -> None:
    async with running(tmp_path, (version,), static_token="first" if static else None) as s:
        assert (await s.client.ping()).responding
        s.sim.rotate_token("second" if static else None)  # old tokens stop working
        with pytest.raises(Unauthorized if version != "v0.0.38" else Rejected):
            await s.client.ping()
        s.sim.write_token(s.token_file)  # the file is replaced; the same client goes on
        assert (await s.client.ping()).responding
        assert "second" not in repr(s.client)


@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.45"])
async def test_fault_injection(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,)) as s:
        await s.client.negotiate()
        s.sim.fail_next(1, 503)
        with pytest.raises(Unavailable):
            await s.client.list_nodes()
        s.sim.fail_next(2, 500, error_number=1800)
        with pytest.raises(Unavailable) as info:
            await s.client.ping()
        assert info.value.error_number == 1800
        with pytest.raises(Unavailable):
            await s.client.list_partitions()
        assert (await s.client.ping()).responding
        assert s.sim.counters["GET ping"] == 2
        assert s.sim.counters["GET openapi"] == 1
        assert s.sim.requests_total == 5


async def test_unreachable_server_is_unavailable(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = SlurmClient(f"http://127.0.0.1:{port}", None, None, "v0.0.44", timeout=2)
    with pytest.raises(Unavailable, match="cannot reach"):
        await client.ping()
    await client.aclose()


@pytest.mark.parametrize("version", VERSIONS)
async def test_partition_endpoints(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,)) as s:
        codec_paths = {
            "v0.0.38": "/slurm/v0.0.38/partition/{}",
        }.get(version, f"/slurm/{version}/partition/{{}}")
        async with httpx.AsyncClient(base_url=s.sim.url, transport=s.recorder) as raw:
            ok = await raw.get(codec_paths.format("gpu"), headers=_auth(s))
            missing = await raw.get(codec_paths.format("nope"), headers=_auth(s))
            cond = await raw.get(
                # nothing changed in that second or after (the partitions were made at T0)
                codec_paths.format("gpu"),
                headers=_auth(s),
                params={"update_time": str(int(T0) + 1)},
            )
        assert ok.status_code == 200
        assert [p["name"] for p in ok.json()["partitions"]] == ["gpu"]
        assert missing.status_code == (500 if version == "v0.0.38" else 422)
        assert cond.status_code == 304


async def test_node_list_when_the_cluster_is_empty(tmp_path: Path) -> None:
    for version in ("v0.0.38", "v0.0.44"):
        async with running(tmp_path, (version,)) as s:
            for name in list(s.sim.nodes):
                s.sim.remove_node(name)
            listing = await s.client.list_nodes()
            assert listing is not None
            assert listing.nodes == ()
            parts = await s.client.list_partitions()
            assert parts is not None
            assert all(p.nodes == () for p in parts.partitions)


async def test_load_seed(tmp_path: Path) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text(
        "partitions:\n"
        "  - {name: cpu, nodes: 'c[1-2]', default: true}\n"
        "  - {name: gpu, nodes: [g1], max_time: 120}\n"
        "nodes:\n"
        "  - {name: c1, cpus: 4, real_memory: 4000, partitions: [cpu]}\n"
        "  - {name: c2, cpus: 4, real_memory: 4000}\n"
        "  - {name: g1, cpus: 16, real_memory: 64000, partitions: [gpu], gres: 'gpu:2'}\n"
    )
    sim = SlurmSim()
    sim.load_seed(seed)
    assert {p.name: p.nodes for p in sim.partitions.values()} == {
        "cpu": ["c1", "c2"],
        "gpu": ["g1"],
    }
    assert sim.node("g1").gres == "gpu:2"
    assert sim.node("c2").partitions == ("cpu",)
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [{cpus: 2}]\n")
    with pytest.raises(ValueError, match="name"):
        SlurmSim().load_seed(bad)


async def test_serve_runner(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token_file = tmp_path / "token"
    task = asyncio.create_task(
        serve(
            "127.0.0.1",
            port,
            api_versions=["v0.0.43", "v0.0.38"],
            token_file=token_file,
            seed_path=None,
            nodes=3,
        )
    )
    try:
        for _ in range(200):
            if token_file.exists():
                break
            await asyncio.sleep(0.01)
        async with SlurmClient(f"http://127.0.0.1:{port}", token_file, "slurmrest") as client:
            assert await client.negotiate() == "v0.0.43"
            nodes = await client.list_nodes()
            assert nodes is not None
            assert [n.name for n in nodes.nodes] == ["n1", "n2", "n3"]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _auth(s: Stack) -> dict[str, str]:
    return {
        "X-SLURM-USER-TOKEN": s.token_file.read_text().strip(),
        "X-SLURM-USER-NAME": "slurmrest",
    }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("asked", "stored"), [(4294967293, 4294967293), (10**12, None)])
async def test_a_time_limit_from_no_val_up_is_no_limit(
    tmp_path: Path, version: str, asked: int, stored: int | None
) -> None:
    """slurmrestd reads a uint32_no_val number from NO_VAL (0xfffffffe) up as INFINITE
    (data_parser PARSE_FUNC(UINT32_NO_VAL)), and v0.0.38 one past 32 bits as NO_VAL: the
    job has no limit, not 10^12 minutes (slurmbridge refuses such annotations)."""
    async with running(tmp_path, (version,)) as s:
        await s.client.negotiate()
        job_id = await s.client.submit_job(
            JobSubmit(name="t", partition="batch", time_limit_minutes=asked, comment="c")
        )
        job = await s.client.get_job(job_id)
        assert job is not None and job.time_limit_minutes == stored


@pytest.mark.parametrize("version", VERSIONS)
async def test_jobs_submit_get_list_update_cancel(tmp_path: Path, version: str) -> None:
    """Every job endpoint's requests and answers validate against the real document."""
    async with running(tmp_path, (version,)) as s:
        await s.client.negotiate()
        job_id = await s.client.submit_job(
            JobSubmit(name="g", partition="batch", tasks=2, min_nodes=2, comment="slurmbridge:x")
        )
        job = await s.client.get_job(job_id)
        assert job is not None
        assert (job.base_state, len(job.nodes), job.comment) == ("RUNNING", 2, "slurmbridge:x")
        listing = await s.client.list_jobs()
        assert listing is not None and [j.job_id for j in listing.jobs] == [job_id]
        limit: Any = 7 if version == "v0.0.38" else {"set": True, "infinite": False, "number": 7}
        async with httpx.AsyncClient(base_url=s.sim.url, transport=s.recorder) as raw:
            path = f"/slurm/{version}/job/{job_id}"
            # v0.0.38's job_properties requires the environment even in an update.
            env = {"environment": {"PATH": "/bin"}} if version == "v0.0.38" else {}
            update = {"time_limit": limit, "comment": "c2", **env}
            r = await raw.post(path, json=update, headers=_auth(s))
            assert r.status_code == 200, r.text
            updated = s.sim.job(job_id)
            assert (updated.time_limit_minutes, updated.comment) == (7, "c2")
            r = await raw.post(f"/slurm/{version}/job/999999", json=env, headers=_auth(s))
            # a Slurm error: HTTP 422 from Slurm 25.05 on (the simulator's default: 26.05)
            failed = 500 if version == "v0.0.38" else 422
            assert r.status_code == failed
            await s.client.cancel_job(job_id)
            assert s.sim.job(job_id).state == ("CANCELLED",)
            r = await raw.post(path, json={"comment": "late", **env}, headers=_auth(s))
            assert r.status_code == failed  # ESLURM_JOB_FINISHED
            assert s.sim.job(job_id).comment == "c2"
        assert await s.client.get_job(999999) is None


@pytest.mark.parametrize("version", VERSIONS)
async def test_pending_jobs_carry_their_priority_and_reason(tmp_path: Path, version: str) -> None:
    """Issue 20 (1): priority/basic priorities (one less per job, below job_mgr.c's
    TOP_PRIORITY), an explicit priority kept, and squeue's reasons in queue order
    (sort_job_queue2): the first job of a full partition waits for Resources, the ones
    behind it for Priority; the client reads both back."""
    async with running(tmp_path, (version,)) as s:
        await s.client.negotiate()

        def whole(name: str, nodes: int = 1, priority: int | None = None) -> JobSubmit:
            return JobSubmit(
                name=name,
                partition="batch",
                tasks=nodes,
                min_nodes=nodes,
                cpus_per_task=2,  # every CPU of a seeded node
                priority=priority,
            )

        hog = await s.client.submit_job(whole("hog", 4))
        a = await s.client.submit_job(whole("a"))
        b = await s.client.submit_job(whole("b"))
        listing = await s.client.list_jobs()
        assert listing is not None
        jobs = {j.job_id: j for j in listing.jobs}
        assert jobs[hog].base_state == "RUNNING"
        assert [(jobs[j].base_state, jobs[j].state_reason) for j in (a, b)] == [
            ("PENDING", "Resources"),
            ("PENDING", "Priority"),
        ]
        pa, pb = jobs[a].priority, jobs[b].priority
        assert pa is not None and pb is not None and 0xFFFF0000 > pa > pb
        urgent = await s.client.submit_job(whole("urgent", priority=0xFFFF0000 + 10))
        job = await s.client.get_job(urgent)
        assert job is not None and job.priority == 0xFFFF0000 + 10
        reasons = {j: s.sim.job(j).state_reason for j in (urgent, a, b)}
        assert reasons == {urgent: "Resources", a: "Priority", b: "Priority"}
        await s.client.cancel_job(hog)
        assert all(s.sim.job(j).state == ("RUNNING",) for j in (urgent, a, b))


@pytest.mark.parametrize("version", VERSIONS)
async def test_job_states(tmp_path: Path, version: str) -> None:
    """``GET jobs/state/`` (v0.0.42+): every job's id and state, the answer in the shape
    Slurm's data_parser gives it; v0.0.38 has no such path."""
    async with running(tmp_path, (version,)) as s:
        await s.client.negotiate()
        first = await s.client.submit_job(JobSubmit(name="a", partition="batch", tasks=1))
        second = await s.client.submit_job(JobSubmit(name="b", partition="batch", tasks=1))
        await s.client.cancel_job(second)
        if version == "v0.0.38":
            with pytest.raises(Unsupported):
                await s.client.list_job_states()
            with pytest.raises(Unsupported):
                s.client.require("list_job_states")
            await s.client.ping()  # the validator needs one exchange at least
            return
        states = await s.client.list_job_states()
        assert states.states == {str(first): ("RUNNING",), str(second): ("CANCELLED",)}
        listing = await s.client.list_jobs()
        assert listing is not None
        assert {str(j.job_id): j.state for j in listing.jobs} == states.states
        async with httpx.AsyncClient(base_url=s.sim.url, transport=s.recorder) as raw:
            r = await raw.get(
                f"/slurm/{version}/jobs/state/", params={"job_id": str(first)}, headers=_auth(s)
            )
            assert r.status_code == 200
            assert [j["job_id"] for j in r.json()["jobs"]] == [str(first)]


@pytest.mark.parametrize("version", ["v0.0.43", "v0.0.44", "v0.0.45"])
async def test_reservations_create_update_activate_delete(tmp_path: Path, version: str) -> None:
    """POST reservation creates, then updates; the active MAINT reservation shows on its
    nodes (RESERVED, MAINTENANCE, ``reservation``) and moves the node change time; a start
    sent to a started reservation is 2104; DELETE of an unknown one is 2053 (answers as
    Slurm 26.05.5's, slurmbridge/devtools/sim/slurmreservations.py)."""
    async with running(tmp_path, (version,)) as s:
        c = s.client
        assert await c.get_reservation("maint") is None
        start = int(s.clock.now) + 60
        desc = ReservationDesc(
            name="maint",
            nodes=("n1", "n2"),
            start_time=start,
            duration_minutes=30,
            flags=("IGNORE_JOBS", "MAINT"),
            users=("root",),
        )
        await c.put_reservation(desc)
        res = await c.get_reservation("maint")
        assert res is not None
        assert res.nodes == ("n1", "n2") and res.start_time == start
        assert res.end_time == start + 1800 and {"MAINT", "SPEC_NODES"} <= set(res.flags)
        await c.put_reservation(msgspec.structs.replace(desc, nodes=("n1", "n2", "n3")))
        res = await c.get_reservation("maint")
        assert res is not None and res.nodes == ("n1", "n2", "n3")
        assert "MAINTENANCE" not in (await c.get_node("n1")).state
        listing = await c.list_nodes()
        assert listing is not None
        s.clock.advance(61)
        assert await c.list_nodes(listing.last_update) is not None, "a started reservation"
        node = await c.get_node("n1")
        assert node.reservation == "maint"
        assert {"RESERVED", "MAINTENANCE"} <= set(node.state)
        assert (await c.get_node("n4")).reservation == ""
        with pytest.raises(Rejected) as refused:
            await c.put_reservation(desc)
        assert refused.value.error_number == 2104
        await c.put_reservation(ReservationDesc(name="maint", nodes=("n1",)))
        res = await c.get_reservation("maint")
        assert res is not None and res.nodes == ("n1",)
        assert await c.delete_reservation("maint") is True
        assert await c.delete_reservation("maint") is False
        assert "MAINTENANCE" not in (await c.get_node("n1")).state


async def test_v0042_reads_reservations_but_cannot_create_them(tmp_path: Path) -> None:
    async with running(tmp_path, ("v0.0.42",)) as s:
        assert await s.client.get_reservation("maint") is None
        with pytest.raises(Unsupported, match=r"v0\.0\.43"):
            await s.client.put_reservation(ReservationDesc(name="maint"))
        async with httpx.AsyncClient(base_url=s.sim.url) as raw:
            resp = await raw.post("/slurm/v0.0.42/reservation", json={}, headers=_auth(s))
        assert resp.status_code in (404, 405)


@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.45"])
async def test_required_nodes_and_a_restart_from_older_state(tmp_path: Path, version: str) -> None:
    """A job with ``required_nodes`` starts on every one of them or waits (``Resources``
    while one is busy, ``ReqNodeNotAvail`` while one is drained), an unknown name is
    refused with 2018; restoring saved state (slurmctld restarted from an older
    StateSaveLocation) forgets later jobs, frees their nodes and hands their ids out again.
    The answers validate against the real documents."""
    async with running(tmp_path, (version,)) as s:
        await s.client.negotiate()
        saved = s.sim.save_state()
        first = await s.client.submit_job(
            JobSubmit(name="a", partition="batch", exclusive=True, required_nodes=("n3",))
        )
        job = await s.client.get_job(first)
        assert job is not None
        assert (job.base_state, job.nodes, job.required_nodes) == ("RUNNING", ("n3",), ("n3",))
        busy = await s.client.submit_job(
            JobSubmit(name="b", partition="batch", exclusive=True, required_nodes=("n3",))
        )
        assert s.sim.job(busy).state_reason == "Resources"
        s.sim.admin_drain("n4", "maintenance")
        drained = await s.client.submit_job(
            JobSubmit(name="c", partition="batch", required_nodes=("n4",))
        )
        assert s.sim.job(drained).state_reason == "ReqNodeNotAvail"
        with pytest.raises(NotFound) as info:
            await s.client.submit_job(JobSubmit(name="d", required_nodes=("n9",)))
        assert info.value.error_number == 2018
        s.sim.restore_state(saved)
        assert s.sim.jobs == []
        assert s.sim.nodes["n3"].alloc_cpus == 0
        again = await s.client.submit_job(JobSubmit(name="e", partition="batch"))
        assert again == first
