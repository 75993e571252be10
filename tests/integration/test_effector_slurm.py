"""SlurmEffector through ``apply``, against the slurmrestd simulator over HTTP.

Drain / Undrain / Create / Delete of Slurm nodes and their features: the outcome each
reports and the node as Slurm holds it afterwards, the preconditions (an administrator's
drain is never undone, only drained and idle nodes with our reason are deleted), the API
versions that cannot, a cluster without a client, and how slurmrestd's errors map onto
Transient / Permanent.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from schemas import wellknown
from schemas.actions import (
    AnyAction,
    CreateSlurmNode,
    DeleteSlurmNode,
    DrainSlurmNode,
    NodeSetRef,
    PruneSlurmNodeRecord,
    SetSlurmNodeExtra,
    SetSlurmNodeFeature,
    SetSlurmNodeOwnedFeatures,
    SetSlurmNodePodInfo,
    TaintNode,
    UndrainSlurmNode,
    UpdateSlurmNodeFeatures,
    UpdateSlurmNodeTopology,
)
from schemas.podinfo import PodInfo
from slurmbridge.devtools.sim.slurmrestd import SlurmSim
from slurmbridge.effectors.slurm_nodes import SlurmEffector
from slurmbridge.runtime.outcomes import Permanent, Transient
from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.models import NodeUpdate

pytestmark = pytest.mark.integration

CLUSTER = "sim"
OURS = wellknown.OUR_REASON_PREFIXES
OUR_REASON = wellknown.cordon_drain_reason("kn-1")
ADMIN_REASON = "hardware check by the site admin"


@dataclass
class Slurm:
    sim: SlurmSim
    client: SlurmClient
    effector: SlurmEffector

    def state(self, node: str) -> tuple[str, ...]:
        return self.sim.node(node).state

    def reason(self, node: str) -> str:
        return self.sim.node(node).reason


@contextlib.asynccontextmanager
async def running(tmp_path: Path, **start: Any) -> AsyncIterator[Slurm]:
    """A seeded simulator (n1-n4 in ``batch``) and an effector with a negotiated client."""
    sim = SlurmSim(cluster=CLUSTER)
    sim.seed_default(4)
    await sim.start(**start)
    client = SlurmClient(sim.url, sim.write_token(tmp_path / "slurm-token"), "slurmrest")
    try:
        await client.negotiate()  # so that fail_next hits the effector's own requests
        yield Slurm(sim, client, SlurmEffector({CLUSTER: client}))
    finally:
        await client.aclose()
        await sim.stop()


@pytest.fixture
async def slurm(tmp_path: Path) -> AsyncIterator[Slurm]:
    async with running(tmp_path) as s:
        yield s


def line(name: str, features: str = "batch") -> str:
    return f"NodeName={name} CPUs=2 RealMemory=2048 State=External Feature={features}"


# --- drain -----------------------------------------------------------------------------------


async def test_drain_sets_drain_with_the_reason_then_is_a_noop(slurm: Slurm) -> None:
    action = DrainSlurmNode(cluster=CLUSTER, node="n1", reason=OUR_REASON)
    result = await slurm.effector.apply(action)
    assert result.outcome == "ok"
    assert "DRAIN" in slurm.state("n1")
    assert slurm.reason("n1") == OUR_REASON

    assert slurm.sim.counters["POST node"] == 1
    result = await slurm.effector.apply(action)
    assert result.outcome == "noop"
    assert slurm.sim.counters["POST node"] == 1  # read, found done, nothing written


async def test_drain_leaves_an_existing_drain_and_its_reason_alone(slurm: Slurm) -> None:
    slurm.sim.admin_drain("n2", ADMIN_REASON)
    result = await slurm.effector.apply(
        DrainSlurmNode(cluster=CLUSTER, node="n2", reason=OUR_REASON)
    )
    assert result.outcome == "noop"
    assert ADMIN_REASON in result.detail
    assert slurm.reason("n2") == ADMIN_REASON


async def test_drain_of_an_unknown_node_is_a_noop(slurm: Slurm) -> None:
    result = await slurm.effector.apply(
        DrainSlurmNode(cluster=CLUSTER, node="nowhere", reason=OUR_REASON)
    )
    assert (result.outcome, result.detail) == ("noop", "Slurm node is gone")
    assert "nowhere" not in slurm.sim.nodes


# --- undrain ---------------------------------------------------------------------------------


async def test_undrain_clears_our_drain(slurm: Slurm) -> None:
    slurm.sim.admin_drain("n1", OUR_REASON)
    action = UndrainSlurmNode(cluster=CLUSTER, node="n1", owned_prefixes=OURS)
    assert (await slurm.effector.apply(action)).outcome == "ok"
    assert "DRAIN" not in slurm.state("n1")

    result = await slurm.effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", "not drained")


async def test_undrain_clears_a_drain_without_reason(slurm: Slurm) -> None:
    slurm.sim.set_state("n3", "IDLE", flags=["DRAIN"])
    assert slurm.reason("n3") == ""
    result = await slurm.effector.apply(
        UndrainSlurmNode(cluster=CLUSTER, node="n3", owned_prefixes=OURS)
    )
    assert result.outcome == "ok"
    assert "DRAIN" not in slurm.state("n3")


async def test_undrain_never_undoes_an_administrators_drain(slurm: Slurm) -> None:
    slurm.sim.admin_drain("n2", ADMIN_REASON)
    result = await slurm.effector.apply(
        UndrainSlurmNode(cluster=CLUSTER, node="n2", owned_prefixes=OURS)
    )
    assert result.outcome == "skipped"
    assert ADMIN_REASON in result.detail
    assert "DRAIN" in slurm.state("n2")
    assert slurm.reason("n2") == ADMIN_REASON


async def test_undrain_of_an_unknown_node_is_a_noop(slurm: Slurm) -> None:
    result = await slurm.effector.apply(
        UndrainSlurmNode(cluster=CLUSTER, node="nowhere", owned_prefixes=OURS)
    )
    assert result.outcome == "noop"


# --- create ----------------------------------------------------------------------------------


async def test_create_registers_the_node_then_an_existing_one_is_a_noop(slurm: Slurm) -> None:
    action = CreateSlurmNode(cluster=CLUSTER, node="k8s-a", node_conf=line("k8s-a", "batch,gpu"))
    assert (await slurm.effector.apply(action)).outcome == "ok"
    assert slurm.sim.created_nodes == ("k8s-a",)
    node = slurm.sim.node("k8s-a")
    assert "EXTERNAL" in node.state
    assert (node.cpus, node.real_memory, node.features) == (2, 2048, ("batch", "gpu"))

    result = await slurm.effector.apply(action)
    assert (result.outcome, result.detail) == ("noop", "Slurm node exists")
    assert slurm.sim.created_nodes == ("k8s-a",)
    assert slurm.sim.counters["POST new/node"] == 2  # one request each: no read first


async def test_create_of_a_name_slurm_conf_defines_is_a_noop(slurm: Slurm) -> None:
    result = await slurm.effector.apply(
        CreateSlurmNode(cluster=CLUSTER, node="n1", node_conf=line("n1"))
    )
    assert result.outcome == "noop"
    assert slurm.sim.created_nodes == ()


async def test_create_of_a_line_slurm_refuses_is_permanent(slurm: Slurm) -> None:
    bad = "NodeName=k8s-b CPUs=2 State=IDLE"  # only FUTURE / CLOUD / EXTERNAL may be created
    with pytest.raises(Permanent, match="CreateSlurmNode"):
        await slurm.effector.apply(CreateSlurmNode(cluster=CLUSTER, node="k8s-b", node_conf=bad))
    assert "k8s-b" not in slurm.sim.nodes


# --- delete ----------------------------------------------------------------------------------


async def test_delete_removes_a_drained_idle_node_with_our_reason(slurm: Slurm) -> None:
    slurm.sim.create_node(line("k8s-c"))
    slurm.sim.admin_drain("k8s-c", OUR_REASON)
    action = DeleteSlurmNode(cluster=CLUSTER, node="k8s-c", owned_prefixes=OURS)
    assert (await slurm.effector.apply(action)).outcome == "ok"
    assert "k8s-c" not in slurm.sim.nodes

    result = await slurm.effector.apply(action)  # redelivered
    assert (result.outcome, result.detail) == ("noop", "Slurm node is gone")


async def test_delete_skips_a_node_that_is_not_drained(slurm: Slurm) -> None:
    slurm.sim.create_node(line("k8s-d"))
    result = await slurm.effector.apply(
        DeleteSlurmNode(cluster=CLUSTER, node="k8s-d", owned_prefixes=OURS)
    )
    assert result.outcome == "skipped"
    assert "k8s-d" in slurm.sim.nodes


async def test_delete_skips_a_draining_node_that_still_runs_a_job(slurm: Slurm) -> None:
    slurm.sim.create_node(line("k8s-e"))
    slurm.sim.set_state("k8s-e", "IDLE", flags=["EXTERNAL", "DYNAMIC_NORM"])
    slurm.sim.allocate("k8s-e", 1)
    slurm.sim.admin_drain("k8s-e", OUR_REASON)
    assert "MIXED" in slurm.state("k8s-e")
    result = await slurm.effector.apply(
        DeleteSlurmNode(cluster=CLUSTER, node="k8s-e", owned_prefixes=OURS)
    )
    assert result.outcome == "skipped"
    assert "k8s-e" in slurm.sim.nodes


@pytest.mark.parametrize("reason", [ADMIN_REASON, ""], ids=["admin", "empty"])
async def test_delete_skips_a_drain_that_is_not_ours(slurm: Slurm, reason: str) -> None:
    slurm.sim.create_node(line("k8s-f"))
    if reason:
        slurm.sim.admin_drain("k8s-f", reason)
    else:
        slurm.sim.set_state("k8s-f", "IDLE", flags=["EXTERNAL", "DYNAMIC_NORM", "DRAIN"])
    result = await slurm.effector.apply(
        DeleteSlurmNode(cluster=CLUSTER, node="k8s-f", owned_prefixes=OURS)
    )
    assert result.outcome == "skipped"
    assert "not ours" in result.detail
    assert "k8s-f" in slurm.sim.nodes


async def test_delete_of_a_static_node_is_permanent(slurm: Slurm) -> None:
    """slurm.conf's nodes cannot be deleted (2028): retrying cannot help."""
    slurm.sim.admin_drain("n4", OUR_REASON)
    with pytest.raises(Permanent, match="DeleteSlurmNode"):
        await slurm.effector.apply(DeleteSlurmNode(cluster=CLUSTER, node="n4", owned_prefixes=OURS))
    assert "n4" in slurm.sim.nodes


# --- features --------------------------------------------------------------------------------


async def test_update_features_replaces_the_list_then_is_a_noop(slurm: Slurm) -> None:
    slurm.sim.create_node(line("k8s-g", "batch,gpu,old"))
    action = UpdateSlurmNodeFeatures(cluster=CLUSTER, node="k8s-g", features=("gpu", "batch"))
    assert (await slurm.effector.apply(action)).outcome == "ok"
    assert sorted(slurm.sim.node("k8s-g").features) == ["batch", "gpu"]

    assert slurm.sim.counters["POST node"] == 1
    result = await slurm.effector.apply(
        UpdateSlurmNodeFeatures(cluster=CLUSTER, node="k8s-g", features=("batch", "gpu"))
    )
    assert (result.outcome, result.detail) == ("noop", "features already set")
    assert slurm.sim.counters["POST node"] == 1


async def test_update_features_of_an_unknown_node_is_a_noop(slurm: Slurm) -> None:
    result = await slurm.effector.apply(
        UpdateSlurmNodeFeatures(cluster=CLUSTER, node="nowhere", features=("x",))
    )
    assert result.outcome == "noop"


# --- a NodeSet pod's identity: PodInfo comment, k8s/ features, pruned records -----------------

INFO = PodInfo(
    namespace="slurm", pod_name="gpu-0", node="k2", nodeset_name="gpu", nodeset_uid="ns-uid"
)
INFO_JSON = (
    '{"namespace":"slurm","podName":"gpu-0","node":"k2","nodeSetName":"gpu","nodeSetUID":"ns-uid"}'
)


async def test_pod_info_writes_the_comment_then_is_a_noop(slurm: Slurm) -> None:
    slurm.sim.create_node(line("k8s-g"))
    action = SetSlurmNodePodInfo(cluster=CLUSTER, node="k8s-g", info=INFO)
    result = await slurm.effector.apply(action)
    assert (result.outcome, result.detail) == ("ok", "")
    assert slurm.sim.node("k8s-g").comment == INFO_JSON
    assert "IDLE" in slurm.state("k8s-g")
    assert slurm.sim.counters["POST node"] == 1
    result = await slurm.effector.apply(action)
    assert result.outcome == "noop"
    assert slurm.sim.counters["POST node"] == 1


async def test_pod_info_after_a_move_sets_a_down_node_idle(slurm: Slurm) -> None:
    """slurmcontrol.go UpdateNodeWithPodInfo: the old comment named another node."""
    slurm.sim.create_node(line("k8s-g"))
    slurm.sim.nodes["k8s-g"].comment = INFO_JSON.replace('"k2"', '"k1"')
    slurm.sim.set_state("k8s-g", "DOWN", ["DYNAMIC_NORM", "NOT_RESPONDING"])
    result = await slurm.effector.apply(
        SetSlurmNodePodInfo(cluster=CLUSTER, node="k8s-g", info=INFO)
    )
    assert result.outcome == "ok"
    assert result.detail == "moved from Kubernetes node k1 to k2; set IDLE"
    assert slurm.sim.node("k8s-g").comment == INFO_JSON
    assert slurm.state("k8s-g")[0] == "IDLE"


@pytest.mark.parametrize("busy", [True, False], ids=["allocated", "administrator's drain"])
async def test_pod_info_after_a_move_never_forces_idle_over_work_or_a_drain(
    slurm: Slurm, busy: bool
) -> None:
    slurm.sim.create_node(line("k8s-g"))
    slurm.sim.nodes["k8s-g"].comment = INFO_JSON.replace('"k2"', '"k1"')
    if busy:
        slurm.sim.allocate("k8s-g", 2)
    else:
        slurm.sim.admin_drain("k8s-g", ADMIN_REASON)
    before = slurm.state("k8s-g")
    result = await slurm.effector.apply(
        SetSlurmNodePodInfo(cluster=CLUSTER, node="k8s-g", info=INFO)
    )
    assert result.outcome == "ok"
    assert "not set IDLE" in result.detail
    assert slurm.sim.node("k8s-g").comment == INFO_JSON
    assert slurm.state("k8s-g") == before


async def test_pod_info_of_an_unknown_node_is_a_noop(slurm: Slurm) -> None:
    result = await slurm.effector.apply(
        SetSlurmNodePodInfo(cluster=CLUSTER, node="nowhere", info=INFO)
    )
    assert result.outcome == "noop"


async def test_owned_features_replace_only_the_prefix_from_the_node_as_it_is_now(
    slurm: Slurm,
) -> None:
    slurm.sim.create_node(line("k8s-g", "batch,gpu,k8s/old"))
    # Someone adds a feature after the decision: it is kept (recomputed on the fresh list).
    slurm.sim.admin_update("k8s-g", NodeUpdate(features=("batch", "gpu", "k8s/old", "late")))
    action = SetSlurmNodeOwnedFeatures(
        cluster=CLUSTER, node="k8s-g", prefix="k8s/", features=("k8s/a", "k8s/b")
    )
    assert (await slurm.effector.apply(action)).outcome == "ok"
    node = slurm.sim.nodes["k8s-g"]
    assert sorted(node.features) == ["batch", "gpu", "k8s/a", "k8s/b", "late"]
    # "late" was made available only (an admin's update without ActiveFeatures): it stays
    # inactive; the owned features change in the active set too.
    assert sorted(node.active_features) == ["batch", "gpu", "k8s/a", "k8s/b"]
    posts = slurm.sim.counters["POST node"]
    assert (await slurm.effector.apply(action)).outcome == "noop"
    assert slurm.sim.counters["POST node"] == posts
    clear = SetSlurmNodeOwnedFeatures(cluster=CLUSTER, node="k8s-g", prefix="k8s/", features=())
    assert (await slurm.effector.apply(clear)).outcome == "ok"
    assert sorted(slurm.sim.nodes["k8s-g"].features) == ["batch", "gpu", "late"]


# Slinky slurm-operator internal/controller/nodeset/slurmcontrol/slurmcontrol_test.go
# (Test_realSlurmControl_UpdateNodeFeatures), in our words: only the k8s/ members change,
# in the available and in the active set separately; a NodeFeatures plugin's inactive
# ``mig=off`` never becomes active.
@pytest.mark.parametrize(
    ("available", "active", "wanted", "want_available", "want_active"),
    [
        pytest.param(
            "foo", "foo", ("k8s/a100",), "foo,k8s/a100", "foo,k8s/a100", id="adds, keeps baseline"
        ),
        pytest.param(
            "foo,k8s/old",
            "foo,k8s/old",
            ("k8s/new",),
            "foo,k8s/new",
            "foo,k8s/new",
            id="replaces a stale owned feature",
        ),
        pytest.param("foo,k8s/old", "foo,k8s/old", (), "foo", "foo", id="empty wanted strips"),
        pytest.param(
            "foo,mig=on,mig=off,k8s/old",
            "foo,mig=on,k8s/old",
            ("k8s/nn-a",),
            "foo,k8s/nn-a,mig=off,mig=on",
            "foo,k8s/nn-a,mig=on",
            id="plugin-managed features survive",
        ),
    ],
)
async def test_owned_features_are_replaced_in_each_set_separately(
    slurm: Slurm,
    available: str,
    active: str,
    wanted: tuple[str, ...],
    want_available: str,
    want_active: str,
) -> None:
    slurm.sim.create_node(line("k8s-f", available))
    both = NodeUpdate(
        features=tuple(available.split(",")), active_features=tuple(active.split(","))
    )
    slurm.sim.admin_update("k8s-f", both)
    action = SetSlurmNodeOwnedFeatures(
        cluster=CLUSTER, node="k8s-f", prefix="k8s/", features=wanted
    )
    assert (await slurm.effector.apply(action)).outcome == "ok"
    node = slurm.sim.nodes["k8s-f"]
    assert sorted(node.features) == want_available.split(",")
    assert sorted(node.active_features) == want_active.split(",")
    assert (await slurm.effector.apply(action)).outcome == "noop"


# Slinky slurm-bridge 1.3 internal/controller/node/slurmcontrol/slurmcontrol_test.go
# (AddNode on an existing node, the GRES compatibility feature), in our words: only
# slurm_bridge_gres_compatible changes, in each set separately; a feature that merely starts
# with its name is not it.
@pytest.mark.parametrize(
    ("available", "active", "present", "want_available", "want_active"),
    [
        pytest.param("admin", "admin", True, "admin,F", "admin,F", id="added"),
        pytest.param("admin,F", "admin,F", False, "admin", "admin", id="removed"),
        pytest.param(
            "mig=off,mig=on", "mig=on", True, "F,mig=off,mig=on", "F,mig=on", id="plugin kept"
        ),
        pytest.param("F_x,F", "F_x,F", False, "F_x", "F_x", id="exact name only"),
    ],
)
async def test_the_gres_feature_changes_alone_in_each_set(
    slurm: Slurm,
    available: str,
    active: str,
    present: bool,
    want_available: str,
    want_active: str,
) -> None:
    f = wellknown.FEATURE_GRES_COMPATIBLE

    def csv(text: str) -> tuple[str, ...]:
        return tuple(x.replace("F", f) if x.startswith("F") else x for x in text.split(","))

    slurm.sim.create_node(line("k8s-c", available.replace("F", f)))
    slurm.sim.admin_update(
        "k8s-c", NodeUpdate(features=csv(available), active_features=csv(active))
    )
    action = SetSlurmNodeFeature(cluster=CLUSTER, node="k8s-c", feature=f, present=present)
    assert (await slurm.effector.apply(action)).outcome == "ok"
    node = slurm.sim.nodes["k8s-c"]
    assert sorted(node.features) == sorted(csv(want_available))
    assert sorted(node.active_features) == sorted(csv(want_active))
    assert (await slurm.effector.apply(action)).outcome == "noop"


DS = NodeSetRef(namespace="slurm", name="gpu", uid="ns-uid")


def defunct(slurm: Slurm, name: str, comment: str = INFO_JSON, *flags: str) -> None:
    """A dynamic node whose slurmd is gone: DOWN + NOT_RESPONDING, with its PodInfo."""
    slurm.sim.create_node(line(name))
    slurm.sim.nodes[name].comment = comment
    slurm.sim.set_state(name, "DOWN", flags or ("NOT_RESPONDING", "DYNAMIC_NORM"))


async def test_prune_deletes_a_defunct_record_of_the_nodeset(slurm: Slurm) -> None:
    defunct(slurm, "k8s-d")
    action = PruneSlurmNodeRecord(cluster=CLUSTER, node="k8s-d", nodeset=DS, pod="gpu-0")
    assert (await slurm.effector.apply(action)).outcome == "ok"
    assert "k8s-d" not in slurm.sim.nodes
    assert (await slurm.effector.apply(action)).outcome == "noop"


@pytest.mark.parametrize(
    ("comment", "flags", "why"),
    [
        (INFO_JSON.replace("ns-uid", "other"), (), "does not name"),
        (INFO_JSON.replace("gpu-0", "gpu-1"), (), "does not name"),
        ("rack 4", (), "does not name"),
        (INFO_JSON, ("DYNAMIC_NORM",), "not a defunct dynamic node"),
        (INFO_JSON, ("NOT_RESPONDING",), "not a defunct dynamic node"),
    ],
)
async def test_prune_skips_what_is_not_a_defunct_record_of_the_nodeset(
    slurm: Slurm, comment: str, flags: tuple[str, ...], why: str
) -> None:
    defunct(slurm, "k8s-d", comment, *flags)
    result = await slurm.effector.apply(
        PruneSlurmNodeRecord(cluster=CLUSTER, node="k8s-d", nodeset=DS, pod="gpu-0")
    )
    assert result.outcome == "skipped"
    assert why in result.detail
    assert "k8s-d" in slurm.sim.nodes


# --- topology --------------------------------------------------------------------------------


async def test_update_topology_moves_and_clears_then_is_a_noop(slurm: Slurm) -> None:
    slurm.sim.topologies = {"topo1": {"b1", "b2"}}
    slurm.sim.create_node("NodeName=ext1 CPUs=2 State=EXTERNAL Topology=topo1:b1")
    move = UpdateSlurmNodeTopology(cluster=CLUSTER, node="ext1", topology="topo1:b2")
    assert (await slurm.effector.apply(move)).outcome == "ok"
    assert slurm.sim.node("ext1").topology == "topo1:b2"
    assert (await slurm.effector.apply(move)).outcome == "noop"
    clear = UpdateSlurmNodeTopology(cluster=CLUSTER, node="ext1", topology="")
    assert (await slurm.effector.apply(clear)).outcome == "ok"
    assert slurm.sim.node("ext1").topology == ""


async def test_a_topology_slurm_does_not_have_is_permanent(slurm: Slurm) -> None:
    """2178 "Requested topology configuration is not available" (Slurm 26.05.5)."""
    slurm.sim.create_node("NodeName=ext1 CPUs=2 State=EXTERNAL")
    with pytest.raises(Permanent, match="UpdateSlurmNodeTopology"):
        await slurm.effector.apply(
            UpdateSlurmNodeTopology(cluster=CLUSTER, node="ext1", topology="topo1:b1")
        )
    assert slurm.sim.node("ext1").topology == ""


async def test_update_topology_before_v0043_is_unsupported_and_sends_nothing(
    tmp_path: Path,
) -> None:
    """v0.0.42 reports no topology and would answer 200 while ignoring ``topology_str``."""
    async with running(tmp_path, versions=("v0.0.42",)) as s:
        s.sim.topologies = {"topo1": {"b1"}}
        s.sim.create_node("NodeName=ext1 CPUs=2 State=EXTERNAL")
        result = await s.effector.apply(
            UpdateSlurmNodeTopology(cluster=CLUSTER, node="ext1", topology="topo1:b1")
        )
        assert result.outcome == "unsupported"
        assert s.sim.counters["POST node"] == 0
        assert s.sim.node("ext1").topology == ""


# --- API versions, clients, errors -----------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "action"),
    [
        ("v0.0.38", DrainSlurmNode(cluster=CLUSTER, node="n1", reason=OUR_REASON)),
        ("v0.0.38", UndrainSlurmNode(cluster=CLUSTER, node="n1", owned_prefixes=OURS)),
        ("v0.0.38", UpdateSlurmNodeFeatures(cluster=CLUSTER, node="n1", features=("x",))),
        ("v0.0.38", DeleteSlurmNode(cluster=CLUSTER, node="n1", owned_prefixes=OURS)),
        ("v0.0.43", CreateSlurmNode(cluster=CLUSTER, node="k8s-h", node_conf=line("k8s-h"))),
    ],
    ids=["drain", "undrain", "features", "delete", "create"],
)
async def test_an_api_version_that_cannot_is_unsupported_before_any_request(
    tmp_path: Path, version: str, action: AnyAction
) -> None:
    async with running(tmp_path, versions=(version,)) as s:
        before = s.sim.requests_total
        result = await s.effector.apply(action)
        assert result.outcome == "unsupported"
        assert s.sim.requests_total == before
        assert "DRAIN" not in s.state("n1")
        assert s.sim.created_nodes == ()


async def test_a_cluster_without_a_client_is_retried(slurm: Slurm) -> None:
    with pytest.raises(Transient, match="no Slurm client for cluster 'other'") as exc:
        await slurm.effector.apply(DrainSlurmNode(cluster="other", node="n1", reason=OUR_REASON))
    assert exc.value.delay == 5.0
    assert "DRAIN" not in slurm.state("n1")


@pytest.mark.parametrize(
    ("status", "errno", "expected"),
    [
        (503, None, Transient),  # slurmrestd / a proxy unavailable
        (502, None, Transient),
        (500, 1800, Transient),  # slurmctld unreachable
        (401, None, Transient),  # a token a rotation may cure
        (500, 2010, Permanent),  # the token's user lacks the operator role
        (500, 9999, Permanent),  # anything else Slurm refuses
    ],
)
async def test_slurm_errors_map_to_transient_or_permanent(
    slurm: Slurm, status: int, errno: int | None, expected: type[Exception]
) -> None:
    slurm.sim.fail_next(1, status, error_number=errno)
    with pytest.raises(expected, match="DrainSlurmNode"):
        await slurm.effector.apply(DrainSlurmNode(cluster=CLUSTER, node="n1", reason=OUR_REASON))
    assert "DRAIN" not in slurm.state("n1")


async def test_a_failure_between_read_and_write_is_retried_and_converges(slurm: Slurm) -> None:
    slurm.sim.create_node(line("k8s-i"))
    slurm.sim.admin_drain("k8s-i", OUR_REASON)
    action = DeleteSlurmNode(cluster=CLUSTER, node="k8s-i", owned_prefixes=OURS)
    slurm.sim.fail_next(1, 503)
    with pytest.raises(Transient):
        await slurm.effector.apply(action)
    assert "k8s-i" in slurm.sim.nodes
    assert (await slurm.effector.apply(action)).outcome == "ok"
    assert "k8s-i" not in slurm.sim.nodes


async def test_an_action_it_does_not_handle_is_permanent(slurm: Slurm) -> None:
    with pytest.raises(Permanent, match="cannot perform TaintNode"):
        await slurm.effector.apply(TaintNode(node="n1", key="k", value="v", effect="NoSchedule"))


# --- Extra: the applied DRA inventory (Slinky slurm-bridge 1.3 updateNodeExtra) -------------


async def test_set_extra_writes_ours_and_never_an_administrators(slurm: Slurm) -> None:
    ours = 'slurm-bridge.dra-gres-map={"v":2,"profiles":{}}'
    slurm.sim.create_node("NodeName=ext1 CPUs=2 State=EXTERNAL")
    put = SetSlurmNodeExtra(
        cluster=CLUSTER, node="ext1", extra=ours, owned_prefix="slurm-bridge.dra-gres-map="
    )
    assert (await slurm.effector.apply(put)).outcome == "ok"
    assert slurm.sim.node("ext1").extra == ours
    assert (await slurm.effector.apply(put)).outcome == "noop"
    clear = SetSlurmNodeExtra(
        cluster=CLUSTER, node="ext1", extra="", owned_prefix="slurm-bridge.dra-gres-map="
    )
    assert (await slurm.effector.apply(clear)).outcome == "ok"
    assert slurm.sim.node("ext1").extra == ""
    slurm.sim.nodes["ext1"].extra = "rack=7"
    result = await slurm.effector.apply(put)
    assert (result.outcome, result.detail) == ("skipped", "the node's Extra is already in use")
    assert slurm.sim.node("ext1").extra == "rack=7"
