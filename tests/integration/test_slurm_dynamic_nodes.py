"""Dynamic (external) nodes: the Slurm client against the slurmrestd simulator over real HTTP.

Create (``POST new/node/``, v0.0.44+), delete (``DELETE node/{name}``, v0.0.42+) and feature
updates, with every exchange validated against the real OpenAPI documents by the recorder of
:mod:`tests.integration.test_sim_slurmrestd` (requests against ``requestBody``, answers against
``responses``), and the errors slurmctld gives (``create_nodes()`` / ``delete_nodes()`` in
``src/slurmctld/node_mgr.c``) mapped to the client's types.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from slurmbridge.devtools.sim.slurmrestd import SimError, SlurmSim, UnknownNodeError
from slurmbridge.slurm import codecs
from slurmbridge.slurm.errors import Conflict, NotFound, Rejected, Unsupported
from slurmbridge.slurm.models import NodeUpdate
from tests.integration.test_sim_slurmrestd import (
    Exchange,
    _auth,
    _pointer,
    openapi,
    running,
    validate_exchange,
)

pytestmark = pytest.mark.integration

CREATORS = ("v0.0.44", "v0.0.45")
DELETERS = ("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")
LINE = (
    "NodeName=k8s-a CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=15872 "
    "State=External Feature=gpu,batch Gres=gpu:2"
)


def _line(name: str, features: str = "batch", **extra: str) -> str:
    more = "".join(f" {k}={v}" for k, v in extra.items())
    return f"NodeName={name} CPUs=2 RealMemory=2048 State=External Feature={features}{more}"


async def _partitions(s: Any) -> dict[str, tuple[str, ...]]:
    parts = await s.client.list_partitions()
    assert parts is not None
    return {p.name: p.nodes for p in parts.partitions}


# --- request bodies against the documents ------------------------------------------------------


@pytest.mark.parametrize("version", DELETERS)
def test_request_bodies_match_the_documents(version: str) -> None:
    api = openapi(version)
    codec = codecs.get(version)
    update = _pointer("paths", f"/slurm/{version}/node/{{node_name}}", "post")
    for upd in (NodeUpdate(features=("gpu", "batch")), NodeUpdate(features=())):
        body = json.loads(codec.encode_node_update(upd))
        api.validate(update + "/requestBody/content/application~1json/schema", body)
    if version in CREATORS:
        create = _pointer("paths", f"/slurm/{version}/new/node/", "post")
        schema = create + "/requestBody/content/application~1json/schema"
        api.validate(schema, json.loads(codec.encode_create_node(LINE)))
        with pytest.raises(AssertionError, match="node_conf"):
            api.validate(schema, {})  # the validator is not vacuous: node_conf is required
    else:
        assert f"/slurm/{version}/new/node/" not in api.doc["paths"]
    assert "delete" in api.doc["paths"][f"/slurm/{version}/node/{{node_name}}"]


def test_validator_checks_create_bodies() -> None:
    x = Exchange(
        "POST", "/slurm/v0.0.44/new/node/", b'{"node_conf": 7}', 200, "application/json", b"{}"
    )
    with pytest.raises(AssertionError, match="is not of type 'string'"):
        validate_exchange(x)


# --- create --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", CREATORS)
async def test_create_external_node(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,)) as s:
        created: list[tuple[str, float]] = []
        s.sim.on_create.append(lambda name, ts: created.append((name, ts)))
        before = time.monotonic()
        await s.client.create_node(LINE)
        assert [n for n, _ in created] == ["k8s-a"]
        assert before <= created[0][1] <= time.monotonic()
        assert s.sim.created_nodes == ("k8s-a",)
        assert s.sim.counters["POST new/node"] == 1

        node = await s.client.get_node("k8s-a")
        assert node.state == ("IDLE", "EXTERNAL", "DYNAMIC_NORM")  # EXTERNAL is a flag
        assert node.base_state == "IDLE" and node.has("EXTERNAL")
        assert (node.cpus, node.real_memory, node.gres) == (8, 15872, "gpu:2")
        assert node.features == ("gpu", "batch")
        assert node.partitions == ("batch", "gpu")  # the seed's partitions its features name
        assert node == s.sim.node("k8s-a")
        parts = await _partitions(s)
        assert parts["batch"] == ("n1", "n2", "n3", "n4", "k8s-a")
        assert parts["gpu"] == ("n1", "n2", "k8s-a")

        # An external node drains and undrains like any other (Slinky's drain reconciler).
        await s.client.drain("k8s-a", "slurm-bridge: leaving")
        drained = await s.client.get_node("k8s-a")
        assert drained.state == ("IDLE", "EXTERNAL", "DRAIN", "DYNAMIC_NORM")
        assert drained.reason == "slurm-bridge: leaving"
        await s.client.undrain("k8s-a")
        # NOT_RESPONDING for about a second after an undrain (recorded from Slurm 26.05.5)
        s.clock.advance(1)
        assert (await s.client.get_node("k8s-a")).state == ("IDLE", "EXTERNAL", "DYNAMIC_NORM")

        raw = next(x for x in s.recorder.exchanges if x.path.endswith("/new/node/"))
        assert json.loads(raw.request_body) == {"node_conf": LINE}


@pytest.mark.parametrize("version", CREATORS)
async def test_create_fields_and_states(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,)) as s:
        s.sim.topologies = {"topo-1": {"s1"}}
        await s.client.create_node(
            "nodename=k8s-[1-2] sockets=2 CoresPerSocket=4 ThreadsPerCore=2 State=EXTERNAL "
            'Features=batch,fast Topology=topo-1:s1 Weight=10 TmpDisk=100 Reason="new node"'
        )
        await s.client.create_node("NodeName=f1 CPUs=4 State=FUTURE")
        await s.client.create_node("NodeName=c1 CPUs=4 State=CLOUD Feature=gpu")
        assert s.sim.created_nodes == ("k8s-1", "k8s-2", "f1", "c1")
        listing = await s.client.list_nodes()
        assert listing is not None
        by_name = {n.name: n for n in listing.nodes}
        k1 = by_name["k8s-1"]
        assert (k1.cpus, k1.features, k1.partitions) == (16, ("batch", "fast"), ("batch",))
        assert by_name["f1"].state == ("FUTURE", "DYNAMIC_NORM")
        assert by_name["c1"].state == ("IDLE", "CLOUD", "POWERED_DOWN", "DYNAMIC_NORM")
        assert by_name["c1"].partitions == ("gpu",)
        async with httpx.AsyncClient(base_url=s.sim.url, transport=s.recorder) as raw:
            resp = await raw.get(f"/slurm/{version}/node/k8s-2", headers=_auth(s))
        wire = resp.json()["nodes"][0]
        assert (wire["sockets"], wire["cores"], wire["threads"]) == (2, 4, 2)
        assert (wire["topology"], wire["weight"], wire["temporary_disk"]) == ("topo-1:s1", 10, 100)
        assert wire["reason"] == "new node"


@pytest.mark.parametrize("version", CREATORS)
async def test_create_errors(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,)) as s:
        await s.client.create_node(LINE)
        for line in (LINE, _line("n1")):  # a created node, a node from slurm.conf
            with pytest.raises(Conflict) as conflict:
                await s.client.create_node(line)
            # HTTP 422: a Slurm error on 26.05 (the simulator's default release)
            assert (conflict.value.status, conflict.value.error_number) == (422, 2168)
            assert "Failure to create node" in str(conflict.value)
        for line, errno in (
            (_line("x1", Colour="blue"), -1),  # not a slurm.conf NodeName key
            (_line("x2", CPUs="many"), -1),
            (_line("x3", Bogus=""), -1),
            ("NodeName=x4 CPUs=2 RealMemory=100", 2028),  # no State
            ("NodeName=x5 CPUs=2 State=IDLE", 2028),
            ("NodeName=x6 NodeName=x7 State=FUTURE", -1),
            ("NodeName=DEFAULT State=FUTURE", -1),
        ):
            with pytest.raises(Rejected) as rejected:
                await s.client.create_node(line)
            assert rejected.value.error_number == errno, line
        assert s.sim.created_nodes == ("k8s-a",)


async def test_create_is_unsupported_before_v0044(tmp_path: Path) -> None:
    for version in ("v0.0.38", "v0.0.42", "v0.0.43"):
        async with running(tmp_path, (version,)) as s:
            await s.client.negotiate()
            await s.client.ping()
            before = s.sim.requests_total
            with pytest.raises(Unsupported) as info:
                s.client.require("create_node")
            assert (info.value.version, info.value.operation) == (version, "create_node")
            with pytest.raises(Unsupported):
                await s.client.create_node(LINE)
            if version == "v0.0.38":
                with pytest.raises(Unsupported):
                    s.client.require("delete_node")
                with pytest.raises(Unsupported) as info:
                    await s.client.delete_node("n1")
                assert info.value.operation == "delete_node"
            assert s.sim.requests_total == before  # nothing was sent
            assert s.sim.counters["POST new/node"] == s.sim.counters["DELETE node"] == 0
            assert "n1" in s.sim.nodes


async def test_unserved_create_path_answers_404(tmp_path: Path) -> None:
    async with running(tmp_path, ("v0.0.43", "v0.0.38")) as s:
        await s.client.ping()
        async with httpx.AsyncClient(base_url=s.sim.url) as raw:
            v43 = await raw.post(
                "/slurm/v0.0.43/new/node/", json={"node_conf": LINE}, headers=_auth(s)
            )
            v38 = await raw.delete("/slurm/v0.0.38/node/n1", headers=_auth(s))
        assert (v43.status_code, v38.status_code) == (404, 405)
        assert "k8s-a" not in s.sim.nodes and "n1" in s.sim.nodes


# --- delete --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", DELETERS)
async def test_delete(tmp_path: Path, version: str) -> None:
    async with running(tmp_path, (version,)) as s:
        deleted: list[str] = []
        s.sim.on_delete.append(lambda name, ts: deleted.append(name))
        if version in CREATORS:
            await s.client.create_node(_line("k8s-b", "batch,gpu"))
        else:  # no REST creation before v0.0.44: an in-process (scontrol) creation
            s.sim.create_node(_line("k8s-b", "batch,gpu"))
        assert "k8s-b" in (await _partitions(s))["gpu"]

        s.sim.allocate("k8s-b", 1)  # a job runs there: slurmctld refuses
        with pytest.raises(Conflict) as busy:
            await s.client.delete_node("k8s-b")
        # HTTP 422: a Slurm error on 26.05 (the simulator's default release)
        assert (busy.value.status, busy.value.error_number) == (422, 2016)
        assert "Failure to delete node k8s-b" in str(busy.value)
        s.sim.release("k8s-b")

        await s.client.delete_node("k8s-b")
        assert deleted == ["k8s-b"]
        assert s.sim.created_nodes == ()
        with pytest.raises(NotFound):
            await s.client.get_node("k8s-b")
        parts = await _partitions(s)
        assert all("k8s-b" not in members for members in parts.values())

        with pytest.raises(NotFound) as missing:
            await s.client.delete_node("k8s-b")
        assert (missing.value.status, missing.value.error_number) == (422, 2018)
        with pytest.raises(Rejected) as static:  # slurm.conf nodes cannot be deleted
            await s.client.delete_node("n1")
        assert static.value.error_number == 2028
        assert "n1" in s.sim.nodes
        assert s.sim.counters["DELETE node"] == 4
        assert deleted == ["k8s-b"]


@pytest.mark.parametrize("version", CREATORS)
async def test_delete_drained_external_node(tmp_path: Path, version: str) -> None:
    """Slinky's order: drain, wait until idle, delete."""
    async with running(tmp_path, (version,)) as s:
        await s.client.create_node(LINE)
        s.sim.allocate("k8s-a", 8)
        await s.client.drain("k8s-a", "slurm-bridge: leaving")
        assert (await s.client.get_node("k8s-a")).state == (
            "ALLOCATED",
            "EXTERNAL",
            "DRAIN",
            "DYNAMIC_NORM",
        )
        with pytest.raises(Conflict):
            await s.client.delete_node("k8s-a")
        s.sim.release("k8s-a")
        assert (await s.client.get_node("k8s-a")).state[:3] == ("IDLE", "EXTERNAL", "DRAIN")
        await s.client.delete_node("k8s-a")
        assert "k8s-a" not in s.sim.nodes


# --- a feature update does not move nodes between partitions -----------------------------------


@pytest.mark.parametrize("version", DELETERS)
async def test_feature_update_keeps_partitions(tmp_path: Path, version: str) -> None:
    """A dynamic node joins the partitions its features name when it is created, and a later
    feature update leaves its partitions alone (recorded from Slurm 26.05.5)."""
    async with running(tmp_path, (version,)) as s:
        line = _line("k8s-c", "batch")
        if version in CREATORS:
            await s.client.create_node(line)
        else:
            s.sim.create_node(line)
        assert (await s.client.get_node("k8s-c")).partitions == ("batch",)

        await s.client.update_node("k8s-c", NodeUpdate(features=("gpu", "nosuchpartition")))
        node = await s.client.get_node("k8s-c")
        assert (node.features, node.partitions) == (("gpu", "nosuchpartition"), ("batch",))
        parts = await _partitions(s)
        assert "k8s-c" in parts["batch"] and "k8s-c" not in parts["gpu"]

        s.sim.add_partition("nosuchpartition")  # a partition created later picks it up
        assert (await s.client.get_node("k8s-c")).partitions == ("batch", "nosuchpartition")

        await s.client.update_node("k8s-c", NodeUpdate(features=()))
        cleared = await s.client.get_node("k8s-c")
        assert (cleared.features, cleared.partitions) == ((), ("batch", "nosuchpartition"))

        # nodes from the seed keep their slurm.conf partitions whatever their features
        await s.client.update_node("n3", NodeUpdate(features=("gpu",)))
        assert (await s.client.get_node("n3")).partitions == ("batch",)
        posts = [x for x in s.recorder.exchanges if x.method == "POST" and "/node/" in x.path]
        bodies = [json.loads(x.request_body) for x in posts if "/new/" not in x.path]
        assert bodies == [
            {"features": ["gpu", "nosuchpartition"], "features_act": ["gpu", "nosuchpartition"]},
            {"features": [""], "features_act": [""]},
            {"features": ["gpu"], "features_act": ["gpu"]},
        ]


# --- in-process helpers and scale ----------------------------------------------------------------


def test_in_process_create_and_delete() -> None:
    sim = SlurmSim()
    sim.seed_default(2)
    (node,) = sim.create_node("NodeName=e1 CPUs=4 State=External Feature=gpu")
    assert node.dynamic and sim.node("e1").partitions == ("gpu",)
    with pytest.raises(SimError) as dup:
        sim.create_node("NodeName=e1 CPUs=4 State=External")
    assert dup.value.errno == 2168
    with pytest.raises(SimError) as static:
        sim.delete_node("n1")
    assert static.value.errno == 2028
    with pytest.raises(UnknownNodeError) as missing:
        sim.delete_node("nope")
    assert missing.value.errno == 2018 and isinstance(missing.value, LookupError)
    sim.delete_node("e1")
    assert sim.created_nodes == () and "e1" not in sim.partitions["gpu"].nodes


async def test_thousand_creates_are_fast(tmp_path: Path) -> None:
    """A registration benchmark's load: 1,000 creates, then listings, then 1,000 deletes."""
    async with running(tmp_path, ("v0.0.44",)) as s:
        arrivals: list[float] = []
        s.sim.on_create.append(lambda name, ts: arrivals.append(ts))
        await s.client.negotiate()
        started = time.monotonic()
        for i in range(1000):
            await s.client.create_node(_line(f"k8s-{i:04d}", "batch,gpu"))
        create_seconds = time.monotonic() - started
        assert len(arrivals) == 1000 and arrivals == sorted(arrivals)
        listing = await s.client.list_nodes()
        parts = await _partitions(s)
        assert listing is not None and len(listing.nodes) == 1004
        assert len(parts["gpu"]) == 1002
        started = time.monotonic()
        for i in range(1000):
            await s.client.delete_node(f"k8s-{i:04d}")
        delete_seconds = time.monotonic() - started
        assert s.sim.created_nodes == ()
        # ~1-2 ms per request on a small machine; the bound only catches O(n²) behaviour
        assert create_seconds < 20 and delete_seconds < 20, (create_seconds, delete_seconds)
        s.recorder.exchanges = s.recorder.exchanges[-50:]  # validate a sample, not 2,000


@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"])
async def test_a_dynamic_nodes_topology_is_read_updated_and_cleared(
    tmp_path: Path, version: str
) -> None:
    """Recorded from Slurm 26.05.5 with a ``topology.yaml`` (topology ``topo1``, blocks b1 and
    b2): ``node.topology`` and ``update_node_msg.topology_str`` exist from v0.0.43; ``""``
    clears; a unit or topology that is not configured is 2178 on create and on update; v0.0.42
    reports no topology (``None``) and the client refuses to send one (Unsupported) instead
    of letting slurmrestd ignore it."""
    async with running(tmp_path, (version,)) as s:
        s.sim.topologies = {"topo1": {"b1", "b2"}}
        s.sim.create_node("NodeName=ext1 CPUs=2 State=EXTERNAL Topology=topo1:b1")
        node = await s.client.get_node("ext1")
        if version == "v0.0.42":
            assert node.topology is None
            with pytest.raises(Unsupported):
                await s.client.update_node("ext1", NodeUpdate(topology="topo1:b2"))
            assert s.sim.node("ext1").topology == "topo1:b1"
            return
        assert node.topology == "topo1:b1"
        await s.client.update_node("ext1", NodeUpdate(topology="topo1:b2"))
        assert (await s.client.get_node("ext1")).topology == "topo1:b2"
        await s.client.update_node("ext1", NodeUpdate(topology=""))
        assert (await s.client.get_node("ext1")).topology == ""
        with pytest.raises(Rejected) as refused:
            await s.client.update_node("ext1", NodeUpdate(topology="topo1:zzz"))
        assert refused.value.error_number == 2178
        with pytest.raises(SimError) as create:
            s.sim.create_node("NodeName=ext2 CPUs=2 State=EXTERNAL Topology=other:b1")
        assert create.value.errno == 2178
        assert (await s.client.get_node("n1")).topology == ""  # slurm.conf nodes: none
