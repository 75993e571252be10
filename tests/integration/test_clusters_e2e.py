"""Cluster objects end to end: each served Cluster gets its own Slurm client and poller
(subjects and metrics carry its name), its status follows the pings, a bad token shows as
``isReady: false`` with the reason, and rotating the Secret recovers without a restart."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from prometheus_client import REGISTRY

from schemas import streams
from schemas.actions import DrainSlurmNode
from schemas.events import SlurmJob, SlurmNode
from schemas.subjects import slurm_source
from slurmbridge.app import App
from slurmbridge.devtools.sim.slurmrestd import SlurmSim
from slurmbridge.devtools.testing import Stack
from tests._helpers import nodeset, slurmd_template

NS = "slurm"


def secret(name: str, token: str, key: str = "auth-token") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "type": "Opaque",
        "data": {key: base64.b64encode(token.encode()).decode()},
    }


def cluster(name: str, server: str, secret_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "slinky.slurm.net/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"server": server, "token": {"secretRef": {"name": secret_name}}},
    }


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=2, poll_interval=0.2) as s:
        s.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield s


@pytest.fixture
async def sims() -> AsyncIterator[dict[str, SlurmSim]]:
    out = {name: SlurmSim(cluster=name) for name in ("alpha", "beta")}
    for n, sim in enumerate(out.values()):
        sim.seed_default(2 + n)  # alpha: n1..n2, beta: n1..n3
        await sim.start(versions=("v0.0.44",))
    yield out
    for sim in out.values():
        await sim.stop()


def ready(stack: Stack, name: str) -> tuple[Any, str, str]:
    st = stack.kube.get("clusters", name, NS).get("status") or {}
    cond = next((c for c in st.get("conditions") or () if c["type"] == "Ready"), {})
    return st.get("isReady"), cond.get("reason", ""), cond.get("message", "")


def served_nodes(stack: Stack, name: str) -> set[str]:
    assert stack.app is not None
    return {n.key for n in stack.app.projection.values(SlurmNode, slurm_source(name))}


def poll_count(name: str) -> float:
    value = REGISTRY.get_sample_value(
        "slurmbridge_slurm_poll_duration_seconds_count", {"cluster": name}
    )
    return value or 0.0


async def test_two_clusters_two_pollers_bad_token_then_rotation(
    stack: Stack, sims: dict[str, SlurmSim]
) -> None:
    alpha, beta = sims["alpha"], sims["beta"]
    stack.kube.create(secret("alpha-token", alpha.mint_token()))
    stack.kube.create(secret("beta-token", "not-a-valid-token"))
    stack.kube.create(cluster("alpha", alpha.url, "alpha-token"))
    stack.kube.create(cluster("beta", beta.url, "beta-token"))
    app = stack.app
    assert app is not None and app.clusters is not None and app.bus is not None

    await stack.wait_for(
        lambda: set(app.clusters.pollers) == {"alpha", "beta"}, what="a poller per Cluster"
    )
    await stack.wait_for(
        lambda: served_nodes(stack, "alpha") == {"n1", "n2"}, what="alpha's nodes in the log"
    )
    # Separate subjects: alpha's nodes are under its own source token; beta publishes only
    # its failing pings there.
    info = await app.bus.js.stream_info(
        streams.OBS_STREAM, subjects_filter="bridge.obs.slurm:alpha.SlurmNode.>"
    )
    assert set((info.state.subjects or {}).keys()) == {
        "bridge.obs.slurm:alpha.SlurmNode.n1",
        "bridge.obs.slurm:alpha.SlurmNode.n2",
    }
    assert served_nodes(stack, "beta") == set()
    # The static cluster keeps working beside them.
    assert served_nodes(stack, "default") == {"n1", "n2"}
    assert poll_count("alpha") > 0 and poll_count("beta") > 0 and poll_count("default") > 0
    assert REGISTRY.get_sample_value("slurmbridge_slurm_cluster_served", {"cluster": "beta"}) == 1

    await stack.wait_for(lambda: ready(stack, "alpha")[:2] == (True, "Ready"), what="alpha ready")
    await stack.wait_for(
        lambda: ready(stack, "beta")[:2] == (False, "Unauthorized"), what="beta unauthorized"
    )
    assert "401" in ready(stack, "beta")[2] or "token" in ready(stack, "beta")[2].lower()
    assert "not-a-valid-token" not in ready(stack, "beta")[2]

    # Rotation: the Secret gets a good token; the same poller recovers, nothing restarts.
    poller = app.clusters.pollers["beta"]
    stack.kube.patch(
        "secrets",
        "beta-token",
        {"data": {"auth-token": base64.b64encode(beta.mint_token().encode()).decode()}},
        NS,
    )
    await stack.wait_for(
        lambda: ready(stack, "beta")[:2] == (True, "Ready"), what="beta ready after rotation"
    )
    await stack.wait_for(
        lambda: served_nodes(stack, "beta") == {"n1", "n2", "n3"}, what="beta's nodes"
    )
    assert app.clusters.pollers["beta"] is poller

    # Deleting a Cluster stops its poller and client; the other one keeps going.
    stack.kube.delete("clusters", "alpha", NS)
    await stack.wait_for(lambda: set(app.clusters.pollers) == {"beta"}, what="alpha stopped")
    assert "alpha" not in app.clients and "beta" in app.clients
    stopped_at = poll_count("alpha")
    before = poll_count("beta")
    await stack.wait_for(lambda: poll_count("beta") >= before + 3, what="beta still polled")
    assert poll_count("alpha") == stopped_at
    assert (
        REGISTRY.get_sample_value("slurmbridge_slurm_cluster_served", {"cluster": "alpha"}) is None
    )


async def test_missing_secret_and_name_conflicts_are_reported(
    stack: Stack, sims: dict[str, SlurmSim]
) -> None:
    alpha = sims["alpha"]
    stack.kube.create(cluster("alpha", alpha.url, "nowhere"))
    # The static cluster is called "default": a Cluster of that name is not served.
    stack.kube.create(cluster("default", alpha.url, "nowhere"))
    app = stack.app
    assert app is not None and app.clusters is not None
    await stack.wait_for(
        lambda: ready(stack, "alpha")[:2] == (False, "MissingToken"), what="missing Secret"
    )
    assert "Secret slurm/nowhere" in ready(stack, "alpha")[2]
    await stack.wait_for(
        lambda: ready(stack, "default")[:2] == (False, "NotServed"), what="name conflict"
    )
    assert "static cluster" in ready(stack, "default")[2]
    assert set(app.clusters.pollers) == {"alpha"}

    # The Secret appears (with another key than the default): ready without a restart.
    stack.kube.create(secret("nowhere", alpha.mint_token(), key="jwt"))
    await stack.wait_for(
        lambda: (
            ready(stack, "alpha")[:2] == (False, "MissingToken")
            and "no key 'auth-token'" in ready(stack, "alpha")[2]
        ),
        what="wrong key named",
    )
    stack.kube.patch(
        "clusters",
        "alpha",
        {"spec": {"token": {"secretRef": {"name": "nowhere", "key": "jwt"}}}},
        NS,
    )
    await stack.wait_for(lambda: ready(stack, "alpha")[:2] == (True, "Ready"), what="ready")

    def reasons() -> list[str]:
        return [
            e["reason"]
            for e in stack.kube.list("events", NS)
            if e["involvedObject"]["name"] == "alpha"
        ]

    await stack.wait_for(lambda: "ClusterReady" in reasons(), what="a ClusterReady Event")
    assert "ClusterNotReady" in reasons()


async def test_nodeset_of_a_cluster_object_scales_through_its_client(
    stack: Stack, sims: dict[str, SlurmSim]
) -> None:
    """A NodeSet naming Cluster alpha: its slurmd nodes join alpha (not the static cluster),
    its status counts alpha's nodes, and scale-in drains and deletes through alpha's client:
    the idle pods go first (slurm-operator's order: no pod-deadline before any), and the pod
    whose node runs a job is drained and deleted only once the job has ended."""
    alpha = sims["alpha"]
    stack.sims.slurmd.clusters["alpha"] = alpha
    stack.kube.create(secret("alpha-token", alpha.mint_token()))
    stack.kube.create(cluster("alpha", alpha.url, "alpha-token"))
    stack.kube.create(
        nodeset("gpu", NS, replicas=3, clusterName="alpha", template=slurmd_template("slurmd"))
    )
    want = {"gpu-0", "gpu-1", "gpu-2"}
    await stack.wait_for(lambda: want <= set(alpha.nodes), timeout=20, what="nodes in alpha")
    assert not want & set(stack.slurm.nodes), "registered in the static cluster"

    def status() -> dict[str, Any]:
        return dict(stack.kube.get("nodesets", "gpu", NS).get("status") or {})

    await stack.wait_for(lambda: status().get("slurmIdle") == 3, what="status from alpha")
    others = [n for n in alpha.nodes if n != "gpu-2"]
    job = alpha.submit(
        {"partition": "batch", "tasks": 2, "min_nodes": 1, "excluded_nodes": others},
        external=True,
    )
    assert alpha.job(job).nodes == ("gpu-2",)
    assert stack.app is not None
    proj = stack.app.projection
    # The order reads the job from the log: scale only once the bridge has seen it.
    await stack.wait_for(
        lambda: (
            (j := proj.get(SlurmJob, str(job), slurm_source("alpha"))) is not None
            and j.base_state == "RUNNING"
        ),
        timeout=30,
        what="the job on gpu-2 in the log",
    )

    def live() -> set[str]:
        return {
            p["metadata"]["name"]
            for p in stack.kube.list("pods", NS)
            if not p["metadata"].get("deletionTimestamp")
        }

    stack.kube.patch("nodesets", "gpu", {"spec": {"replicas": 1}}, NS, subresource="scale")
    await stack.wait_for(lambda: live() == {"gpu-2"}, timeout=60, what="the idle pods deleted")
    await stack.settled()
    drained = {
        (r.action.cluster, r.action.node)
        for r in await stack.action_records()
        if isinstance(r.action, DrainSlurmNode) and r.outcome == "ok"
    }
    assert {("alpha", "gpu-0"), ("alpha", "gpu-1")} <= drained, drained
    stack.kube.patch("nodesets", "gpu", {"spec": {"replicas": 0}}, NS, subresource="scale")
    await stack.wait_for(lambda: alpha.node("gpu-2").has("DRAIN"), what="gpu-2 drained in alpha")
    await stack.settled()
    assert "gpu-2" in live(), "a pod whose node runs a job was deleted"
    alpha.cancel_job(job)
    await stack.wait_for(lambda: live() == set(), timeout=60, what="gpu-2 deleted once idle")
    assert stack.sims.slurmd.removed_busy == []


async def test_a_poller_process_without_the_watchers_polls_cluster_objects(
    sims: dict[str, SlurmSim],
) -> None:
    """``--only slurm-poller`` in its own process (the watchers elsewhere) still starts a
    poller for each Cluster: it needs the Kubernetes API for the token Secret."""
    alpha = sims["alpha"]
    async with Stack(nodes=2, poll_interval=0.2, components=["kube-watcher"]) as stack:
        assert stack.settings is not None
        stack.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        poller = App(
            msgspec.structs.replace(stack.settings, instance_id="poller"),
            only=["slurm-poller"],
            with_health=False,
        )
        await poller.start()
        try:
            stack.kube.create(secret("alpha-token", alpha.mint_token()))
            stack.kube.create(cluster("alpha", alpha.url, "alpha-token"))
            await stack.wait_for(
                lambda: poller.clusters is not None and "alpha" in poller.clusters.pollers,
                what="a poller for alpha in the poller process",
            )
            await stack.wait_for(
                lambda: (
                    {n.key for n in poller.projection.values(SlurmNode, slurm_source("alpha"))}
                    == {"n1", "n2"}
                ),
                what="alpha's nodes in the log",
            )
        finally:
            await poller.stop()
