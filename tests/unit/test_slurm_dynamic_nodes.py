"""Dynamic (external) nodes in the Slurm client, without a server: which versions can create
and delete nodes, the request bodies, the errors slurmctld answers mapped to types, and
``Unsupported`` raised before any request is sent (the client runs over
``httpx.MockTransport``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from slurmbridge.slurm import codecs
from slurmbridge.slurm.client import OPERATIONS, SlurmClient
from slurmbridge.slurm.errors import (
    Conflict,
    Forbidden,
    NotFound,
    Rejected,
    SlurmError,
    Unavailable,
    Unsupported,
    classify,
)
from slurmbridge.slurm.models import NodeUpdate

TOKEN = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXRva2VuLXZhbHVl.c2lnbmF0dXJl"
LINE = (
    "NodeName=k8s-a CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=15872 "
    "State=External Feature=gpu,batch Gres=gpu:2"
)
#: version ⇒ (create_node, delete_node, update_node) offered, from the OpenAPI documents.
CAPABILITIES = {
    "v0.0.38": (False, False, False),
    "v0.0.42": (False, True, True),
    "v0.0.43": (False, True, True),
    "v0.0.44": (True, True, True),
    "v0.0.45": (True, True, True),
}


def _client(handler: Any, tmp_path: Path, version: str | None) -> SlurmClient:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    return SlurmClient(
        "http://slurm.test:6820",
        token_file,
        "slurmrest",
        version,
        5.0,
        transport=httpx.MockTransport(handler),
    )


def _error(status: int, errno: int, description: str = "x") -> httpx.Response:
    return httpx.Response(
        status,
        json={"errors": [{"error_number": errno, "error": "e", "description": description}]},
    )


# --- codecs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", sorted(CAPABILITIES))
def test_capabilities_and_paths(version: str) -> None:
    codec = codecs.get(version)
    create, delete, update = CAPABILITIES[version]
    assert (codec.node_create, codec.node_delete, codec.node_update) == (create, delete, update)
    assert codec.paths.new_node == (f"/slurm/{version}/new/node/" if create else "")
    if create:
        body = json.loads(codec.encode_create_node(LINE))
        assert body == {"node_conf": LINE}
    else:
        with pytest.raises(Unsupported) as info:
            codec.encode_create_node(LINE)
        assert (info.value.version, info.value.operation) == (version, "create_node")


@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"])
@pytest.mark.parametrize(
    ("features", "expected"),
    [(("gpu", "batch"), ["gpu", "batch"]), (("batch",), ["batch"]), ((), [""])],
)
def test_feature_update_encoding(
    version: str, features: tuple[str, ...], expected: list[str]
) -> None:
    body = codecs.get(version).encode_node_update(NodeUpdate(features=features))
    # csv_string: an array of strings; [""] clears (Slurm ignores []); the active features go
    # with them, or Slurm 26.05 refuses with 2031 "Active features not subset of available".
    assert json.loads(body) == {"features": expected, "features_act": expected}


@pytest.mark.parametrize("features", [("a,b",), ("",), (" a",), ("a b",)])
def test_feature_names_are_checked(features: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="feature"):
        NodeUpdate(features=features)


@pytest.mark.parametrize(
    ("status", "errno", "expected"),
    [
        (500, 2016, Conflict),  # ESLURM_NODES_BUSY
        (500, 2168, Conflict),  # ESLURM_NODE_ALREADY_EXISTS
        (500, 2018, NotFound),  # ESLURM_INVALID_NODE_NAME
        (500, -1, Rejected),  # unparsable node line
    ],
)
def test_classify_dynamic_node_errors(status: int, errno: int, expected: type[SlurmError]) -> None:
    assert type(classify(status, errno, "m")) is expected


# --- the client ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", sorted(CAPABILITIES))
async def test_require_and_unsupported_before_sending(tmp_path: Path, version: str) -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"errors": [], "warnings": []})

    assert {"create_node", "delete_node"} <= OPERATIONS
    create, delete, _ = CAPABILITIES[version]
    async with _client(handler, tmp_path, version) as client:
        for op, offered in (("create_node", create), ("delete_node", delete)):
            if offered:
                client.require(op)
            else:
                with pytest.raises(Unsupported) as info:
                    client.require(op)
                assert (info.value.version, info.value.operation) == (version, op)
        if create:
            await client.create_node(LINE)
        else:
            with pytest.raises(Unsupported):
                await client.create_node(LINE)
        if delete:
            await client.delete_node("k8s-a")
        else:
            with pytest.raises(Unsupported):
                await client.delete_node("k8s-a")
    expected: list[tuple[str, str, dict[str, str] | None]] = []
    if create:
        expected.append(("POST", f"/slurm/{version}/new/node/", {"node_conf": LINE}))
    if delete:
        expected.append(("DELETE", f"/slurm/{version}/node/k8s-a", None))
    assert [
        (r.method, r.url.path, json.loads(r.content) if r.content else None) for r in sent
    ] == expected
    for r in sent:
        assert r.headers["X-SLURM-USER-TOKEN"] == TOKEN
        if r.method == "POST":
            assert r.headers["Content-Type"] == "application/json"


async def test_require_before_negotiation_says_nothing(tmp_path: Path) -> None:
    async with _client(lambda r: httpx.Response(500), tmp_path, None) as client:
        client.require("create_node")  # nothing known yet: the operation itself will decide
        client.require("delete_node")
        with pytest.raises(ValueError, match="unknown operation"):
            client.require("create_nodes")


@pytest.mark.parametrize(
    "line",
    ["", "   ", "CPUs=8 NodeName=a", "NodeName=a\nNodeName=b", "nodename"],
)
async def test_create_node_rejects_bad_lines_locally(tmp_path: Path, line: str) -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={})

    async with _client(handler, tmp_path, "v0.0.44") as client:
        with pytest.raises(ValueError, match="NodeName"):
            await client.create_node(line)
        with pytest.raises(ValueError, match="name"):
            await client.delete_node("")
    assert sent == []


async def test_create_node_strips_and_accepts_lower_case_key(tmp_path: Path) -> None:
    bodies: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"errors": []})

    async with _client(handler, tmp_path, "v0.0.45") as client:
        await client.create_node("  nodename=x State=FUTURE \n")
    assert bodies == [{"node_conf": "nodename=x State=FUTURE"}]


@pytest.mark.parametrize(
    ("op", "response", "expected", "errno"),
    [
        ("create", _error(500, 2168, "Failure to create node"), Conflict, 2168),
        ("create", _error(500, 2028, "Failure to create node"), Rejected, 2028),
        ("create", _error(500, -1, "Failure to create node"), Rejected, -1),
        ("create", _error(500, 2010), Forbidden, 2010),  # not SlurmUser / root
        ("create", _error(502, 1800), Unavailable, 1800),
        ("create", httpx.Response(404, text="Unable find requested URL."), Unsupported, 0),
        ("delete", _error(500, 2018, "Failure to delete node k8s-a"), NotFound, 2018),
        ("delete", _error(500, 2016, "Failure to delete node k8s-a"), Conflict, 2016),
        ("delete", _error(500, 2028, "Failure to delete node k8s-a"), Rejected, 2028),
        ("delete", httpx.Response(405, text="not defined"), Unsupported, 0),
        ("delete", _error(200, 2016), Conflict, 2016),  # errors with HTTP 200 still fail
    ],
)
async def test_dynamic_node_errors(
    tmp_path: Path,
    op: str,
    response: httpx.Response,
    expected: type[SlurmError],
    errno: int,
) -> None:
    async with _client(lambda r: response, tmp_path, "v0.0.44") as client:
        call = client.create_node(LINE) if op == "create" else client.delete_node("k8s-a")
        with pytest.raises(expected) as info:
            await call
    assert info.value.error_number == errno
    assert TOKEN not in str(info.value)
    assert op + "_node k8s-a" in str(info.value)


async def test_delete_node_quotes_the_name(tmp_path: Path) -> None:
    paths: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.raw_path.decode())
        return httpx.Response(200, json={"errors": []})

    async with _client(handler, tmp_path, "v0.0.42") as client:
        await client.delete_node("a/b c")
    assert paths == ["/slurm/v0.0.42/node/a%2Fb%20c"]
