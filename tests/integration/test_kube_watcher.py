"""The Kubernetes node watcher: resume, 410 ⇒ re-list with tombstones, broken streams."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from schemas.events import KubeNode
from slurmbridge.testing import Stack


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with Stack(nodes=3, poll_interval=0.2, components=("kube-watcher",)) as s:
        yield s


def _kube(stack: Stack, name: str) -> KubeNode | None:
    assert stack.app is not None
    return stack.app.projection.get(KubeNode, name)


async def test_broken_stream_resumes_without_relist(stack: Stack) -> None:
    assert stack.app is not None
    watcher = stack.app.watcher
    assert watcher is not None
    await stack.wait_for(lambda: _kube(stack, "n3") is not None, what="n3 observed")
    await stack.wait_for(lambda: watcher.watching, what="node watch open")
    relists = watcher.relists
    assert stack.kube.drop_watches(abort=True) >= 1
    stack.cordon("n2")
    await stack.wait_for(
        lambda: (n := _kube(stack, "n2")) is not None and n.unschedulable,
        what="cordon after the stream broke",
    )
    assert watcher.relists == relists  # resumed from its resourceVersion


async def test_expired_watch_relists_and_tombstones_what_vanished(stack: Stack) -> None:
    assert stack.app is not None
    watcher = stack.app.watcher
    assert watcher is not None
    await stack.wait_for(lambda: _kube(stack, "n3") is not None, what="n3 observed")
    relists = watcher.relists
    # Keep the watcher away while n3 is deleted and the history is compacted, so that the
    # DELETED event is gone and only a re-list can notice.
    stack.kube.fail_next(3, 503, verb="watch", resource="nodes")
    stack.kube.drop_watches(abort=True)
    stack.kube.delete("nodes", "n3")
    stack.kube.add_node("n9", cpu="2", memory="1000Mi")
    stack.kube.compact()
    await stack.wait_for(lambda: _kube(stack, "n3") is None, timeout=20, what="n3 tombstoned")
    await stack.wait_for(lambda: _kube(stack, "n9") is not None, what="n9 observed")
    assert watcher.relists > relists
    assert _kube(stack, "n1") is not None
