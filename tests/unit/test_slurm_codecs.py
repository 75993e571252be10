"""Slurm REST client without a server: hostlists, NoVal numbers, per-version decoding of
recorded-looking payloads, node-update encoding, error classification, and the token never
leaking (the client runs over ``httpx.MockTransport``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from slurmbridge.slurm import codecs, hostlist
from slurmbridge.slurm.client import JobStateMemo, SlurmClient
from slurmbridge.slurm.codecs._common import NoVal, error_report, noval, state_tuple
from slurmbridge.slurm.errors import (
    BadResponse,
    Conflict,
    Forbidden,
    NotFound,
    Rejected,
    SlurmError,
    Unauthorized,
    Unavailable,
    Unsupported,
    classify,
)
from slurmbridge.slurm.models import Node, NodeList, NodeUpdate

DATA_PARSER_VERSIONS = ("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")
TOKEN = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXRva2VuLXZhbHVl.c2lnbmF0dXJl"


def _b(obj: Any) -> bytes:
    return json.dumps(obj).encode()


# --- hostlists ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("n[1-4,7],gpu[01-02]", ("n1", "n2", "n3", "n4", "n7", "gpu01", "gpu02")),
        ("n1", ("n1",)),
        ("n1,n2", ("n1", "n2")),
        ("", ()),
        (None, ()),
        ("(null)", ()),
        ("n[8-11]", ("n8", "n9", "n10", "n11")),
        ("gpu[001-003]", ("gpu001", "gpu002", "gpu003")),
        ("n[09-11]", ("n09", "n10", "n11")),
        ("n[1-2]-ib", ("n1-ib", "n2-ib")),
        ("r[1-2]n[1-2]", ("r1n1", "r1n2", "r2n1", "r2n2")),
        ("n[3]", ("n3",)),
        ("n1,n1,n[1-2]", ("n1", "n2")),
        (" n[1-2] , m1 ", ("n1", "n2", "m1")),
        ("node-a,node-b", ("node-a", "node-b")),
        ("n[0-1]", ("n0", "n1")),
    ],
)
def test_hostlist_expand(expr: str | None, expected: tuple[str, ...]) -> None:
    assert hostlist.expand(expr) == expected


@pytest.mark.parametrize(
    "expr", ["n[1-", "n]1[", "n[3-1]", "n[a-b]", "n[[1]]", "n[1-2", "n[]", "n[0-99999999]"]
)
def test_hostlist_rejects_malformed(expr: str) -> None:
    with pytest.raises(hostlist.HostlistError):
        hostlist.expand(expr)


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["n1", "n2", "n3", "n7"], "n[1-3,7]"),
        (["n1"], "n1"),
        (["gpu01", "gpu02", "n1"], "gpu[01-02],n1"),
        (["login", "n2", "n1"], "login,n[1-2]"),
        ([], ""),
    ],
)
def test_hostlist_compress(names: list[str], expected: str) -> None:
    assert hostlist.compress(names) == expected
    assert set(hostlist.expand(expected)) == set(names)


# --- NoVal numbers and states ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (NoVal(set=True, infinite=False, number=5), 5),
        (NoVal(set=True, infinite=False, number=0), 0),
        (NoVal(set=False, infinite=False, number=7), None),
        (NoVal(set=True, infinite=True, number=7), None),
        (NoVal(set=False, infinite=True, number=0), None),
        (60, 60),
        (-1, None),
        (-2, None),
        (4294967295, None),
        (4294967294, None),
    ],
)
def test_noval(value: NoVal | int | None, expected: int | None) -> None:
    assert noval(value) == expected


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        (["idle"], ("IDLE",)),
        (["idle", "DRAIN"], ("IDLE", "DRAIN")),
        (["DRAIN", "ALLOCATED"], ("ALLOCATED", "DRAIN")),
        (["MIXED", "DRAIN", "COMPLETING"], ("MIXED", "DRAIN", "COMPLETING")),
        (["down", "NOT_RESPONDING"], ("DOWN", "NOT_RESPONDING")),
        (["", "DRAIN"], ("DRAIN",)),
        ([], ()),
    ],
)
def test_state_tuple(states: list[str], expected: tuple[str, ...]) -> None:
    assert state_tuple(states) == expected


# --- v0.0.38 (recorded from a real Slurm 22.05.8 slurmrestd) ------------------------------------

V38_META = {
    "plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
    "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"},
}
V38_NODE_DRAINED = {
    "architecture": "x86_64",
    "boards": 1,
    "boot_time": 1795330774,
    "comment": "",
    "cores": 1,
    "cpus": 2,
    "features": "",
    "active_features": "",
    "gres": "",
    "gres_drained": "N/A",
    "name": "n1",
    "next_state_after_reboot": "invalid",
    "address": "127.0.0.1",
    "hostname": "localhost",
    "state": "idle",
    "state_flags": ["DRAIN"],
    "next_state_after_reboot_flags": [],
    "owner": None,
    "partitions": ["batch", "gpu"],
    "port": 37841,
    "real_memory": 1000,
    "reason": "drain mixed",
    "reason_changed_at": 1795331435,
    "reason_set_by_user": "root",
    "alloc_memory": 0,
    "alloc_cpus": 0,
    "idle_cpus": 2,
    "tres_used": None,
    "tres_weighted": 0.0,
}
V38_NODE_PLAIN = {
    **V38_NODE_DRAINED,
    "name": "n2",
    "state": "allocated",
    "state_flags": [],
    "reason": "",
    "reason_changed_at": 0,
    "reason_set_by_user": None,
    "features": "fast,ib",
    "gres": "gpu:2",
    "alloc_cpus": 2,
}
V38_PARTITIONS = {
    "meta": V38_META,
    "errors": [],
    "partitions": [
        {
            "flags": ["default"],
            "preemption_mode": ["disabled"],
            "default_time_limit": None,
            "max_time_limit": -1,
            "min nodes per job": 0,
            "name": "batch",
            "nodes": "n[1-4]",
            "state": "UP",
            "total_cpus": 8,
            "total_nodes": 4,
        },
        {
            "flags": [],
            "max_time_limit": 60,
            "name": "gpu",
            "nodes": "n[1-2],gpu[01-02]",
            "state": "UP",
            "total_cpus": 4,
            "total_nodes": 4,
        },
    ],
}


def test_v0038_nodes() -> None:
    body = _b({"meta": V38_META, "errors": [], "nodes": [V38_NODE_DRAINED, V38_NODE_PLAIN]})
    listing = codecs.get("v0.0.38").decode_nodes(body)
    assert listing is not None
    assert listing.last_update == 0
    drained, busy = listing.nodes
    assert drained == Node(
        name="n1",
        state=("IDLE", "DRAIN"),
        reason="drain mixed",
        reason_set_by_user="root",
        reason_changed_at=1795331435,
        cpus=2,
        alloc_cpus=0,
        real_memory=1000,
        features=(),
        partitions=("batch", "gpu"),
        gres="",
        address="127.0.0.1",
        comment="",
    )
    assert busy.state == ("ALLOCATED",)
    assert busy.reason_set_by_user == ""  # null on the wire
    assert busy.features == ("fast", "ib")
    assert busy.gres == "gpu:2"
    assert drained.base_state == "IDLE"
    assert drained.flags == ("DRAIN",)
    assert drained.has("DRAIN")


def test_v0038_partitions() -> None:
    parts = codecs.get("v0.0.38").decode_partitions(_b(V38_PARTITIONS))
    assert parts is not None
    batch, gpu = parts.partitions
    assert batch.nodes == ("n1", "n2", "n3", "n4")
    assert batch.max_time_minutes is None  # -1 = INFINITE
    assert batch.is_default
    assert gpu.nodes == ("n1", "n2", "gpu01", "gpu02")
    assert gpu.max_time_minutes == 60
    assert not gpu.is_default
    assert (batch.total_cpus, batch.total_nodes, batch.state) == (8, 4, "UP")


@pytest.mark.parametrize(
    ("ping", "responding", "error"),
    [
        ({"hostname": "vm", "ping": "UP", "status": 0, "mode": "primary"}, True, ""),
        (
            {"hostname": "vm", "ping": "DOWN", "status": -1, "mode": "primary"},
            False,
            "no slurmctld responded",
        ),
    ],
)
def test_v0038_ping(ping: dict[str, Any], responding: bool, error: str) -> None:
    result = codecs.get("v0.0.38").decode_ping(
        _b({"meta": V38_META, "errors": [], "pings": [ping]})
    )
    assert result.responding is responding
    assert result.hostnames == ("vm",)
    assert result.api_version == "v0.0.38"
    assert result.error == error


def test_v0038_has_no_node_update() -> None:
    codec = codecs.get("v0.0.38")
    assert not codec.node_update
    with pytest.raises(Unsupported) as info:
        codec.encode_node_update(NodeUpdate(state=("DRAIN",), reason="x"))
    assert (info.value.version, info.value.operation) == ("v0.0.38", "update_node")


# --- v0.0.42 … v0.0.45 ----------------------------------------------------------------------


def _meta4x(version: str) -> dict[str, Any]:
    return {
        "plugin": {
            "type": "openapi/slurmctld",
            "name": "Slurm OpenAPI slurmctld",
            "data_parser": f"data_parser/{version}",
            "accounting_storage": "",
        },
        "client": {"source": "127.0.0.1", "user": "slurmrest", "group": "slurmrest"},
        "command": [],
        "slurm": {
            "version": {"major": "25", "micro": "7", "minor": "11"},
            "release": "25.11.7",
            "cluster": "c",
        },
    }


def _nv(n: int | None, infinite: bool = False) -> dict[str, Any]:
    return {"set": n is not None, "infinite": infinite, "number": n or 0}


def _node4x(name: str, state: list[str], **extra: Any) -> dict[str, Any]:
    node = {
        "name": name,
        "state": state,
        "cpus": 4,
        "alloc_cpus": 0,
        "real_memory": 8000,
        "features": ["fast"],
        "active_features": ["fast"],
        "partitions": ["batch"],
        "gres": "",
        "address": "10.0.0.1",
        "comment": "",
        "reason": "",
        "reason_set_by_user": "",
        "reason_changed_at": _nv(None),
        "boot_time": _nv(1),
        "energy": {"current_watts": {"set": False, "infinite": False, "number": 0}},
        "next_state_after_reboot": ["INVALID"],
    }
    node.update(extra)
    return node


@pytest.mark.parametrize("version", DATA_PARSER_VERSIONS)
@pytest.mark.parametrize(
    ("wire_state", "expected"),
    [
        (["IDLE"], ("IDLE",)),
        (["IDLE", "DRAIN"], ("IDLE", "DRAIN")),
        (["ALLOCATED", "DRAIN"], ("ALLOCATED", "DRAIN")),
        (["DRAIN", "MIXED"], ("MIXED", "DRAIN")),
        (["DOWN", "NOT_RESPONDING"], ("DOWN", "NOT_RESPONDING")),
    ],
)
def test_data_parser_node_states(
    version: str, wire_state: list[str], expected: tuple[str, ...]
) -> None:
    body = _b(
        {
            "nodes": [_node4x("n1", wire_state)],
            "last_update": _nv(1795331000),
            "meta": _meta4x(version),
            "errors": [],
            "warnings": [],
        }
    )
    listing = codecs.get(version).decode_nodes(body)
    assert listing is not None
    assert listing.nodes[0].state == expected
    assert listing.last_update == 1795331000


@pytest.mark.parametrize("version", DATA_PARSER_VERSIONS)
def test_data_parser_node_fields(version: str) -> None:
    node = _node4x(
        "gpu01",
        ["ALLOCATED", "DRAIN"],
        reason="slurm-bridge: cordoned",
        reason_set_by_user="slurmrest",
        reason_changed_at=_nv(1795331435),
        alloc_cpus=4,
        gres="gpu:a100:2",
        partitions=["batch", "gpu"],
        features=["a100", "ib"],
        comment="rack 3",
        topology="topo1:b1",
    )
    listing = codecs.get(version).decode_nodes(
        _b({"nodes": [node], "last_update": _nv(5), "meta": _meta4x(version)})
    )
    assert listing == NodeList(
        nodes=(
            Node(
                name="gpu01",
                state=("ALLOCATED", "DRAIN"),
                reason="slurm-bridge: cordoned",
                reason_set_by_user="slurmrest",
                reason_changed_at=1795331435,
                cpus=4,
                alloc_cpus=4,
                real_memory=8000,
                features=("a100", "ib"),
                partitions=("batch", "gpu"),
                gres="gpu:a100:2",
                address="10.0.0.1",
                comment="rack 3",
                # node.topology exists from v0.0.43 (None: not reported, never compared)
                topology=None if version == "v0.0.42" else "topo1:b1",
                active_features=("fast",),
            ),
        ),
        last_update=5,
        server_last_update=5,
    )


@pytest.mark.parametrize("version", DATA_PARSER_VERSIONS)
def test_data_parser_unknown_node_answer_has_no_list(version: str) -> None:
    # Real v0.0.43 answer to GET node/bad-node-name (HTTP 200), SlinkyProject/slurm-operator#79
    body = _b(
        {
            "errors": [
                {
                    "description": "Failure to query node bad-node-name",
                    "error_number": 0,
                    "error": "No error",
                    "source": "_dump_nodes",
                }
            ],
            "warnings": [],
            "meta": _meta4x(version),
        }
    )
    assert codecs.get(version).decode_nodes(body) is None
    assert error_report(body).texts == ("Failure to query node bad-node-name: No error",)


def _partition4x(name: str, nodes: str, time: dict[str, Any], **extra: Any) -> dict[str, Any]:
    part = {
        "nodes": {"allowed_allocation": "", "configured": nodes, "total": 7},
        "cpus": {"task_binding": 0, "total": 28},
        "partition": {"state": ["UP"]},
        "maximums": {"time": time, "nodes": _nv(None, infinite=True)},
        "defaults": {"time": _nv(None)},
        "name": name,
    }
    part.update(extra)
    return part


@pytest.mark.parametrize(
    ("version", "default_reported"),
    [("v0.0.42", False), ("v0.0.43", False), ("v0.0.44", False), ("v0.0.45", True)],
)
def test_data_parser_partitions(version: str, default_reported: bool) -> None:
    body = _b(
        {
            "partitions": [
                _partition4x(
                    "batch", "n[1-4,7],gpu[01-02]", _nv(None, infinite=True), flags=["DEFAULT"]
                ),
                _partition4x("gpu", "gpu[01-02]", _nv(60)),
                _partition4x("unset", "", _nv(None)),
            ],
            "last_update": _nv(1795330000),
            "meta": _meta4x(version),
            "errors": [],
            "warnings": [],
        }
    )
    parts = codecs.get(version).decode_partitions(body)
    assert parts is not None
    assert parts.last_update == 1795330000
    batch, gpu, unset = parts.partitions
    assert batch.nodes == ("n1", "n2", "n3", "n4", "n7", "gpu01", "gpu02")
    assert (batch.total_cpus, batch.total_nodes, batch.state) == (28, 7, "UP")
    assert batch.max_time_minutes is None
    assert batch.is_default is default_reported
    assert gpu.max_time_minutes == 60
    assert not gpu.is_default
    assert unset.nodes == ()
    assert unset.max_time_minutes is None


@pytest.mark.parametrize(
    ("version", "entry", "responding"),
    [
        (
            "v0.0.42",
            {
                "hostname": "ctl",
                "pinged": "UP",
                "responding": True,
                "latency": 90,
                "mode": "primary",
                "primary": True,
            },
            True,
        ),
        (
            "v0.0.44",
            {
                "hostname": "ctl",
                "pinged": "DOWN",
                "responding": False,
                "latency": 0,
                "mode": "primary",
                "primary": True,
            },
            False,
        ),
        (
            "v0.0.45",
            {
                "hostname": "ctl",
                "responding": True,
                "latency": 90,
                "primary": True,
                "status": "No error",
            },
            True,
        ),
        ("v0.0.43", {"hostname": "ctl", "pinged": "UP", "primary": True}, True),
    ],
)
def test_data_parser_ping(version: str, entry: dict[str, Any], responding: bool) -> None:
    backup = {"hostname": "ctl-backup", "responding": False, "primary": False}
    ping = codecs.get(version).decode_ping(
        _b({"pings": [backup, entry], "meta": _meta4x(version), "errors": [], "warnings": []})
    )
    assert ping.responding is responding
    assert ping.hostnames == ("ctl", "ctl-backup")  # primary first
    assert ping.api_version == version
    assert (ping.error == "") is responding


def test_ping_error_text_comes_from_errors() -> None:
    body = _b(
        {
            "pings": [{"hostname": "ctl", "responding": False, "primary": True}],
            "errors": [
                {
                    "description": "Unable to contact slurm controller",
                    "error_number": 1800,
                    "error": "connect failure",
                }
            ],
        }
    )
    ping = codecs.get("v0.0.44").decode_ping(body)
    assert ping.error == "Unable to contact slurm controller: connect failure"


@pytest.mark.parametrize("version", ["v0.0.38", *DATA_PARSER_VERSIONS])
@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        _b({"nodes": [{"name": 3}]}),
        _b({"nodes": [{"name": "n1", "cpus": "many"}]}),
        _b({"nodes": "n1"}),
    ],
)
def test_bad_responses(version: str, body: bytes) -> None:
    with pytest.raises(BadResponse):
        codecs.get(version).decode_nodes(body)


def test_bad_hostlist_is_bad_response() -> None:
    bad = {**V38_PARTITIONS, "partitions": [{"name": "p", "nodes": "n[1-"}]}
    with pytest.raises(BadResponse, match="partition p"):
        codecs.get("v0.0.38").decode_partitions(_b(bad))


# --- node update encoding ---------------------------------------------------------------------


@pytest.mark.parametrize("version", DATA_PARSER_VERSIONS)
@pytest.mark.parametrize(
    ("update", "expected"),
    [
        (NodeUpdate(state=("DRAIN",), reason="why"), {"state": ["DRAIN"], "reason": "why"}),
        (NodeUpdate(state=("UNDRAIN",)), {"state": ["UNDRAIN"]}),
        (NodeUpdate(state=("RESUME",)), {"state": ["RESUME"]}),
        (
            NodeUpdate(features=("a", "b"), comment=""),
            {"features": ["a", "b"], "features_act": ["a", "b"], "comment": ""},
        ),
        # Slurm 24.11.5/26.05.5 ignore "features": [] and clear only on [""]; available
        # features without the active ones are refused (2031), so both go together.
        (NodeUpdate(features=()), {"features": [""], "features_act": [""]}),
        (NodeUpdate(reason=""), {"reason": ""}),
        # the k8s/ feature sync sends each set (slurm-operator slurmcontrol.go
        # UpdateNodeFeatures): a NodeFeatures plugin's inactive mig=off stays inactive
        (
            NodeUpdate(features=("mig=off", "mig=on"), active_features=("mig=on",)),
            {"features": ["mig=off", "mig=on"], "features_act": ["mig=on"]},
        ),
    ],
)
def test_encode_node_update(version: str, update: NodeUpdate, expected: dict[str, Any]) -> None:
    assert json.loads(codecs.get(version).encode_node_update(update)) == expected


@pytest.mark.parametrize("version", DATA_PARSER_VERSIONS)
@pytest.mark.parametrize(("nodes", "expected"), [((), [""]), (("n1", "n2"), ["n1", "n2"])])
def test_encode_job_update_clears_with_an_empty_string(
    version: str, nodes: tuple[str, ...], expected: list[str]
) -> None:
    """Slurm 24.11.5/26.05.5 leave a pending job's ExcNodeList as it was for
    ``"excluded_nodes": []`` and clear it for ``[""]``."""
    body = json.loads(codecs.get(version).encode_job_update(nodes))
    assert body == {"excluded_nodes": expected}


@pytest.mark.parametrize(
    ("version", "allowed"),
    [("v0.0.42", False), ("v0.0.43", False), ("v0.0.44", True), ("v0.0.45", True)],
)
def test_external_state_only_from_v0044(version: str, allowed: bool) -> None:
    update = NodeUpdate(state=("EXTERNAL",))
    if allowed:
        assert json.loads(codecs.get(version).encode_node_update(update)) == {"state": ["EXTERNAL"]}
    else:
        with pytest.raises(Unsupported, match="EXTERNAL"):
            codecs.get(version).encode_node_update(update)


@pytest.mark.parametrize("kwargs", [{}, {"state": ("drain",)}, {"state": ("",)}])
def test_node_update_validation(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"state|empty"):
        NodeUpdate(**kwargs)


def test_codec_registry() -> None:
    assert codecs.SUPPORTED == ("v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42", "v0.0.38")
    assert codecs.DEFAULT_VERSION in codecs.SUPPORTED
    assert codecs.get("v0.0.38").paths.nodes == "/slurm/v0.0.38/nodes"
    assert codecs.get("v0.0.44").paths.nodes == "/slurm/v0.0.44/nodes/"
    assert codecs.get("v0.0.44").paths.node.format(node_name="n1") == "/slurm/v0.0.44/node/n1"
    with pytest.raises(Unsupported):
        codecs.get("v0.0.39")


# --- error classification ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "errno", "expected"),
    [
        (500, 2018, NotFound),  # unknown node, as slurmrestd answers it
        # 2017 with a text that is not Slurm's line: not Slurm's word on a job (issue 28)
        (500, 2017, Rejected),
        (404, 2017, Rejected),
        (500, 2000, NotFound),  # unknown partition
        (404, 0, NotFound),
        (500, 1800, Unavailable),  # slurmctld unreachable (22.05)
        (502, 1800, Unavailable),  # slurmctld unreachable (24.11+)
        (500, 2027, Unavailable),  # standby controller
        (502, 0, Unavailable),
        (503, 0, Unavailable),
        (504, 5004, Unavailable),
        (401, 0, Unauthorized),
        (403, 0, Unauthorized),
        (511, 1007, Unauthorized),
        (500, 1007, Unauthorized),
        (500, 2002, Forbidden),  # the user lacks the role: permanent
        (422, 2002, Forbidden),  # 26.05's status for the same answer
        (500, 6001, Unauthorized),
        (500, 2028, Conflict),  # invalid node state (24.11/25.05)
        (500, 2180, Conflict),  # invalid node state transition (25.11+)
        (500, 2168, Conflict),  # node already exists
        (409, 0, Conflict),
        (500, -1, Rejected),
        (500, 9207, Rejected),
        (422, 9000, Rejected),
        (400, 9001, Rejected),
        (200, 0, Rejected),
    ],
)
def test_classify(status: int, errno: int, expected: type[SlurmError]) -> None:
    err = classify(status, errno, "msg", ("text",))
    assert type(err) is expected
    assert (err.status, err.error_number, err.errors) == (status, errno, ("text",))


@pytest.mark.parametrize(
    ("errno", "text", "expected"),
    [
        (2017, "Invalid job id specified", NotFound),
        (2017, " Invalid job id specified ", NotFound),
        (2017, "Invalid job id specified (cached)", Rejected),
        (2021, "Job/step already completing or completed", Conflict),
        (2021, "already completing", Rejected),
    ],
)
def test_a_job_is_gone_only_by_slurms_exact_line(
    errno: int, text: str, expected: type[SlurmError]
) -> None:
    """Slinky slurm-bridge 1.3 slurmcontrol.go ``tolerateError``: the whole text, not a part."""
    assert type(classify(500, errno, "msg", (text,))) is expected


def test_error_report_reads_both_spellings() -> None:
    v38 = _b({"errors": [{"error": "Invalid node name specified", "errno": 2018}], "nodes": []})
    v44 = _b(
        {
            "errors": [
                {
                    "description": "Failure to update node n9",
                    "error_number": 2018,
                    "error": "Invalid node name specified",
                    "source": "_update_node",
                }
            ]
        }
    )
    assert error_report(v38) == (2018, ("Invalid node name specified",))
    assert error_report(v44) == (2018, ("Failure to update node n9: Invalid node name specified",))
    assert error_report(b"Authentication failure") == (0, ())
    assert error_report(_b({"errors": [{"error_number": 0}, {"errno": 7}]})).error_number == 7


# --- the client over a mock transport -----------------------------------------------------------

Handler = Callable[[httpx.Request], httpx.Response]


def _openapi(*versions: str) -> httpx.Response:
    paths: dict[str, Any] = {"/openapi/v3": {}}
    for v in versions:
        codec = codecs.get(v) if v in codecs.CODECS else None
        ping = codec.paths.ping if codec else f"/slurm/{v}/ping/"
        paths[ping] = {"get": {}}
    return httpx.Response(200, json={"openapi": "3.0.3", "paths": paths})


def _client(
    handler: Handler, tmp_path: Path, version: str | None = "v0.0.44", token: str = TOKEN
) -> SlurmClient:
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    return SlurmClient(
        "http://slurm.test:6820",
        token_file,
        "slurmrest",
        version,
        5.0,
        transport=httpx.MockTransport(handler),
    )


async def test_headers_and_token_rotation(tmp_path: Path) -> None:
    seen: list[tuple[str | None, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(
            (request.headers.get("X-SLURM-USER-TOKEN"), request.headers.get("X-SLURM-USER-NAME"))
        )
        return httpx.Response(
            200, json={"pings": [{"hostname": "c", "responding": True, "primary": True}]}
        )

    async with _client(handler, tmp_path) as client:
        await client.ping()
        (tmp_path / "token").write_text("rotated-token\n")
        await client.ping()
    assert seen == [(TOKEN, "slurmrest"), ("rotated-token", "slurmrest")]


@pytest.mark.parametrize(
    ("status", "body", "expected", "errno"),
    [
        (
            500,
            {
                "errors": [
                    {
                        "description": "Failure to update node n1",
                        "error_number": 2018,
                        "error": "Invalid node name specified",
                    }
                ]
            },
            NotFound,
            2018,
        ),
        (
            500,
            {"errors": [{"error": "Invalid node name specified", "errno": 2018}], "nodes": []},
            NotFound,
            2018,
        ),
        (
            500,
            {"errors": [{"error_number": 2180, "error": "Invalid node state transition"}]},
            Conflict,
            2180,
        ),
        (500, {"errors": [{"error_number": 1800, "error": "connect failure"}]}, Unavailable, 1800),
        (500, {"errors": [{"error_number": -1, "error": "Unspecified error"}]}, Rejected, -1),
        (503, None, Unavailable, 0),
        (401, None, Unauthorized, 0),
        (405, None, Unsupported, 0),
        (404, None, Unsupported, 0),
        (200, {"errors": [{"error_number": 9207, "error": "invalid flag"}]}, Rejected, 9207),
    ],
)
async def test_update_errors_are_classified(
    tmp_path: Path,
    status: int,
    body: dict[str, Any] | None,
    expected: type[SlurmError],
    errno: int,
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if body is None:
            return httpx.Response(status, text="Authentication failure")
        return httpx.Response(status, json=body)

    async with _client(handler, tmp_path) as client:
        with pytest.raises(expected) as info:
            await client.drain("n1", "maintenance")
    assert info.value.error_number == errno
    assert info.value.status == status


async def test_token_never_in_errors_or_repr(tmp_path: Path) -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        token = request.headers["X-SLURM-USER-TOKEN"]
        return httpx.Response(
            500,
            json={"errors": [{"error_number": 2002, "error": f"Access denied for token {token}"}]},
        )

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused while sending {request.headers}", request=request)

    for handler, expected in ((echo, Forbidden), (refuse, Unavailable)):
        async with _client(handler, tmp_path) as client:
            assert TOKEN not in repr(client)
            assert TOKEN not in str(client.__dict__.get("_token"))
            with pytest.raises(expected) as info:
                await client.list_nodes()
            err = info.value
            assert TOKEN not in str(err)
            assert TOKEN not in repr(err)
            assert all(TOKEN not in t for t in err.errors)
            assert err.__cause__ is None


async def test_token_file_problems_are_unauthorized(tmp_path: Path) -> None:
    client = SlurmClient(
        "http://slurm.test",
        tmp_path / "missing",
        None,
        "v0.0.44",
        transport=httpx.MockTransport(lambda r: httpx.Response(200)),
    )
    with pytest.raises(Unauthorized, match="cannot read token file"):
        await client.ping()
    (tmp_path / "empty").write_text("  \n")
    client2 = SlurmClient(
        "http://slurm.test",
        tmp_path / "empty",
        None,
        "v0.0.44",
        transport=httpx.MockTransport(lambda r: httpx.Response(200)),
    )
    with pytest.raises(Unauthorized, match="empty"):
        await client2.ping()
    await client.aclose()
    await client2.aclose()


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        (("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43"), "v0.0.43"),
        (("v0.0.37", "v0.0.38"), "v0.0.38"),
        (("v0.0.42", "v0.0.44", "v0.0.45", "v0.0.46"), "v0.0.45"),
    ],
)
async def test_negotiate_from_openapi_document(
    tmp_path: Path, offered: tuple[str, ...], chosen: str
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/openapi/v3"
        return _openapi(*offered)

    async with _client(handler, tmp_path, version=None) as client:
        assert client.api_version is None
        assert await client.negotiate() == chosen
        assert await client.negotiate() == chosen  # once
        assert client.api_version == chosen


async def test_negotiate_probes_ping_without_document(tmp_path: Path) -> None:
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        if request.url.path == "/slurm/v0.0.43/ping/":
            return httpx.Response(500, json={"errors": [{"error_number": 1800}]})
        return httpx.Response(404, text="Unable find requested URL.")

    async with _client(handler, tmp_path, version=None) as client:
        assert await client.negotiate() == "v0.0.43"
    assert asked == [
        "/openapi/v3",
        "/slurm/v0.0.45/ping/",
        "/slurm/v0.0.44/ping/",
        "/slurm/v0.0.43/ping/",
    ]


async def test_negotiate_nothing_supported(tmp_path: Path) -> None:
    async with _client(lambda r: _openapi("v0.0.39", "v0.0.40"), tmp_path, None) as client:
        with pytest.raises(Unsupported, match=r"v0\.0\.39"):
            await client.negotiate()


async def test_negotiate_unauthorized(tmp_path: Path) -> None:
    async with _client(
        lambda r: httpx.Response(401, text="Authentication failure"), tmp_path, None
    ) as client:
        with pytest.raises(Unauthorized):
            await client.negotiate()


def test_configured_version_is_normalised_and_checked(tmp_path: Path) -> None:
    client = SlurmClient("http://x", None, None, "0.0.42")
    assert client.api_version == "v0.0.42"
    client.require("update_node")
    with pytest.raises(Unsupported):
        SlurmClient("http://x", None, None, "v0.0.39")
    with pytest.raises(Unsupported):
        SlurmClient("http://x", None, None, "v0.0.38").require("update_node")
    with pytest.raises(ValueError, match="unknown operation"):
        client.require("fly")


async def test_conditional_node_listing_survives_the_released_500(tmp_path: Path) -> None:
    """slurmrestd ≤ 26.05.3 answers 500/-1 when nodes changed but partitions did not."""
    last_update = {"value": 200}
    calls: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        since = request.url.params.get("update_time")
        calls.append(since)
        if since is not None:
            return httpx.Response(
                500,
                json={
                    "errors": [
                        {
                            "description": "Unable to query partitions",
                            "error_number": -1,
                            "error": "Unspecified error",
                            "source": "_dump_nodes",
                        }
                    ]
                },
            )
        return httpx.Response(
            200, json={"nodes": [_node4x("n1", ["IDLE"])], "last_update": _nv(last_update["value"])}
        )

    async with _client(handler, tmp_path) as client:
        listing = await client.list_nodes(update_time=100)
        assert listing is not None
        assert listing.last_update == 200
        assert await client.list_nodes(update_time=200) is None  # full answer proves no change
    assert calls == ["100", None, "200", None]


async def test_conditional_listing_304_and_unconditional_errors(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if "update_time" in request.url.params:
            return httpx.Response(304)
        return httpx.Response(500, json={"errors": [{"error_number": -1}]})

    async with _client(handler, tmp_path) as client:
        assert await client.list_nodes(update_time=5) is None
        assert await client.list_partitions(update_time=5) is None
        with pytest.raises(Rejected):
            await client.list_nodes()


async def test_v0038_empty_cluster_is_an_empty_list(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            500,
            json={
                "meta": V38_META,
                "nodes": [],
                "errors": [{"error": "Invalid node name specified", "errno": 2018}],
            },
        )

    async with _client(handler, tmp_path, version="v0.0.38") as client:
        assert await client.list_nodes() == NodeList()
        with pytest.raises(NotFound):
            await client.get_node("n1")


async def test_get_node_unknown_on_data_parser_versions(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "errors": [
                    {
                        "description": "Failure to query node nope",
                        "error_number": 0,
                        "error": "No error",
                        "source": "_dump_nodes",
                    }
                ],
                "warnings": [],
            },
        )

    async with _client(handler, tmp_path) as client:
        with pytest.raises(NotFound, match="Failure to query node nope"):
            await client.get_node("nope")


async def test_node_names_are_quoted_in_paths(tmp_path: Path) -> None:
    paths: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.raw_path)
        return httpx.Response(
            200, json={"nodes": [_node4x("a/b c", ["IDLE"])], "last_update": _nv(1)}
        )

    async with _client(handler, tmp_path) as client:
        node = await client.get_node("a/b c")
    assert node.name == "a/b c"
    assert paths == [b"/slurm/v0.0.44/node/a%2Fb%20c"]


async def test_timeout_is_unavailable(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    async with _client(handler, tmp_path) as client:
        with pytest.raises(Unavailable, match="timed out"):
            await client.ping()


@pytest.mark.parametrize(
    ("version", "server_last_update", "now", "expected"),
    [
        ("v0.0.44", 1000, 1000.5, 998),  # a change this very second: keep a margin
        ("v0.0.44", 1000, 1001.9, 999),
        ("v0.0.44", 1000, 1002.0, 1000),  # settled: Slurm's own value
        ("v0.0.44", 1000, 5000.0, 1000),
        ("v0.0.38", 0, 1000.5, 998),  # no value reported: the request time
    ],
)
async def test_last_update_is_a_safe_watermark(
    tmp_path: Path, version: str, server_last_update: int, now: float, expected: int
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body: dict[str, Any] = {"nodes": [], "partitions": []}
        if version != "v0.0.38":
            body["last_update"] = _nv(server_last_update)
        return httpx.Response(200, json=body)

    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    async with SlurmClient(
        "http://slurm.test",
        token_file,
        None,
        version,
        transport=httpx.MockTransport(handler),
        clock=lambda: now,
    ) as client:
        nodes = await client.list_nodes()
        parts = await client.list_partitions()
    assert nodes is not None
    assert parts is not None
    assert nodes.last_update == parts.last_update == expected
    assert nodes.server_last_update == parts.server_last_update == server_last_update


def test_models_are_frozen_and_encodable() -> None:
    node = Node(name="n1", state=("IDLE",))
    with pytest.raises(AttributeError):
        node.name = "n2"  # type: ignore[misc]
    assert msgspec.json.decode(msgspec.json.encode(node), type=Node) == node


@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.44", "v0.0.45"])
def test_item_memo_reuses_models_of_unchanged_items(version: str) -> None:
    from slurmbridge.slurm.codecs._common import ItemMemo

    codec = codecs.get(version)

    def jobs_body(*jobs: tuple[int, str]) -> bytes:
        return json.dumps(
            {"jobs": [{"job_id": j, "name": n, "job_state": ["PENDING"]} for j, n in jobs]}
        ).encode()

    def nodes_body(*nodes: tuple[str, str]) -> bytes:
        return json.dumps({"nodes": [{"name": n, "state": [s]} for n, s in nodes]}).encode()

    memo = ItemMemo()
    first = codec.decode_jobs(jobs_body((1, "a"), (2, "b")), memo)
    second = codec.decode_jobs(jobs_body((1, "a"), (2, "renamed"), (3, "c")), memo)
    assert first is not None and second is not None
    assert second.jobs[0] is first.jobs[0]  # same bytes: the same model object
    assert second.jobs[1] is not first.jobs[1] and second.jobs[1].name == "renamed"
    assert [j.job_id for j in second.jobs] == [1, 2, 3]
    assert memo.reused == 1
    # Equal to decoding without the memo, object identity aside.
    assert second == codec.decode_jobs(jobs_body((1, "a"), (2, "renamed"), (3, "c")))
    nmemo = ItemMemo()
    n1 = codec.decode_nodes(nodes_body(("n1", "IDLE"), ("n2", "IDLE")), nmemo)
    n2 = codec.decode_nodes(nodes_body(("n1", "IDLE"), ("n2", "ALLOCATED")), nmemo)
    assert n1 is not None and n2 is not None
    assert n2.nodes[0] is n1.nodes[0] and n2.nodes[1].state == ("ALLOCATED",)
    with pytest.raises(BadResponse, match="jobs"):
        codec.decode_jobs(b'{"jobs": [{"job_id": "not a number"}]}', memo)


# --- jobs/state -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"])
def test_job_states_as_slurms_data_parser_renders_them(version: str) -> None:
    codec = codecs.get(version)
    assert codec.paths.job_states == f"/slurm/{version}/jobs/state/"
    body = {
        "jobs": [
            {"job_id": "10", "state": ["PENDING"]},
            {"job_id": "11", "state": ["RUNNING", "COMPLETING"]},
            # an array's split task (its own job id first) and a pending array's expanded
            # tasks, which share the meta record's id and state
            {"job_id": "12_3", "state": ["RUNNING"]},
            {"job_id": "13_0", "state": ["PENDING"]},
            {"job_id": "13_1", "state": ["PENDING"]},
            {"job_id": "14+1", "state": ["RUNNING"]},
        ],
        "meta": {},
        "errors": [],
        "warnings": [],
    }
    states = codec.decode_job_states(json.dumps(body).encode())
    assert states is not None
    assert states.states == {
        "10": ("PENDING",),
        "11": ("RUNNING", "COMPLETING"),
        "12": ("RUNNING",),
        "13": ("PENDING",),
        "14": ("RUNNING",),
    }
    assert codec.decode_job_states(b'{"errors": [{"error": "x"}]}') is None


@pytest.mark.parametrize(
    "body",
    [
        b'{"jobs": [{"job_id": "abc", "state": ["PENDING"]}]}',
        b'{"jobs": [{"job_id": 10, "state": ["PENDING"]}]}',
        b'{"jobs": [{"state": ["PENDING"]}]}',
        b"not json",
    ],
)
def test_job_states_reject_what_is_not_a_job_state_list(body: bytes) -> None:
    with pytest.raises(BadResponse):
        codecs.get("v0.0.44").decode_job_states(body)


def test_job_states_with_a_memo_name_the_jobs_whose_entries_changed() -> None:
    codec = codecs.get("v0.0.44")
    memo = JobStateMemo()

    def body(*entries: tuple[str, str]) -> bytes:
        jobs = [{"job_id": i, "state": [s]} for i, s in entries]
        return json.dumps({"jobs": jobs}, indent=2).encode()

    first = codec.decode_job_states(
        body(("10", "PENDING"), ("11", "RUNNING"), ("13_0", "PENDING"), ("13_1", "PENDING")),
        memo,
    )
    assert first is not None
    assert first.changed is None  # nothing to compare with yet
    assert first.states == {"10": ("PENDING",), "11": ("RUNNING",), "13": ("PENDING",)}

    # 10 starts; 11 ends and is purged; one task of array 13 starts and splits off as 14;
    # 15 is new.
    second = codec.decode_job_states(
        body(("10", "RUNNING"), ("13_1", "PENDING"), ("14_0", "RUNNING"), ("15", "PENDING")),
        memo,
    )
    assert second is not None
    assert second.changed == {"10", "11", "13", "14", "15"}
    assert second.states == {
        "10": ("RUNNING",),
        "13": ("PENDING",),
        "14": ("RUNNING",),
        "15": ("PENDING",),
    }
    unchanged = body(("10", "RUNNING"), ("13_1", "PENDING"), ("14_0", "RUNNING"), ("15", "PENDING"))
    third = codec.decode_job_states(unchanged, memo)
    assert third is not None and third.changed == frozenset()
    assert third.states == second.states

    # A bad entry is refused and leaves the memo as it was.
    with pytest.raises(BadResponse):
        codec.decode_job_states(body(("10", "RUNNING"), ("x1", "PENDING")), memo)
    again = codec.decode_job_states(unchanged, memo)
    assert again is not None and again.changed == frozenset()

    # Many new entries at once are decoded in one pass, with the same answer.
    many = [(str(i), "PENDING") for i in range(100, 700)]
    big = codec.decode_job_states(body(*many), memo)
    assert big is not None
    assert big.changed == {"10", "13", "14", "15"} | {str(i) for i in range(100, 700)}
    assert big.states == {str(i): ("PENDING",) for i in range(100, 700)}


def test_v0038_has_no_job_states() -> None:
    codec = codecs.get("v0.0.38")
    assert codec.paths.job_states == ""
    with pytest.raises(Unsupported):
        codec.decode_job_states(b"{}")
