"""ObservationPublisher.send against a real nats-server that stops answering: the future of a
publish nobody acknowledges fails after ``ack_timeout`` instead of staying pending for good
(nats-py's ``publish_async`` has no deadline), so a watcher learns the log may lack it."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

import pytest

from schemas import streams
from schemas.events import KubeNode
from slurmbridge.config import NatsSettings
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.natsserver import NatsServer, thread_states, wait_stopped
from slurmbridge.runtime.publish import AckTimeoutError, ObservationPublisher

pytestmark = pytest.mark.integration


def node(name: str) -> KubeNode:
    return KubeNode(source="k8s", key=name, uid=name, version="1")


async def test_an_unanswered_publish_fails_after_the_ack_timeout(nats_server: NatsServer) -> None:
    bus = await busmod.connect(NatsSettings(), nats_server.url)
    try:
        await bus.ensure_streams(streams.stream_specs(storage="file"))
        publish = ObservationPublisher(bus, ack_timeout=0.3)
        stored = await publish.send(node("n1"), "ack-n1")
        assert (await asyncio.wait_for(stored, 5)).seq >= 1
        nats_server.pause()
        try:
            lost = await publish.send(node("n2"), "ack-n2")
            with pytest.raises(AckTimeoutError, match=r"no acknowledgement within 0\.3 s"):
                await asyncio.wait_for(lost, 5)
        finally:
            nats_server.resume()
        # The server answers again: the window has its slot back and a publish is stored.
        again = await publish.send(node("n3"), "ack-n3")
        assert (await asyncio.wait_for(again, 5)).seq >= 2
    finally:
        await bus.close()


LINUX_PROC = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")


@LINUX_PROC
async def test_pause_returns_once_every_server_thread_is_stopped(nats_server: NatsServer) -> None:
    # kill(SIGSTOP) returns before the threads stop: a publish sent at once was still stored
    # and acknowledged now and then (the test above, on a loaded machine).
    pid = nats_server.pid
    assert pid is not None
    for _ in range(20):
        nats_server.pause()
        try:
            states = thread_states(pid)
            assert states and set(states) == {"T"}, states
        finally:
            nats_server.resume()
        assert wait_running(pid)


def wait_running(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "T" not in thread_states(pid):
            return True
        time.sleep(0.001)
    return False


@LINUX_PROC
def test_wait_stopped_says_so_when_a_process_keeps_running() -> None:
    with subprocess.Popen(["sleep", "30"]) as proc:
        try:
            assert not wait_stopped(proc.pid, timeout=0.05)
            proc.send_signal(signal.SIGSTOP)
            assert wait_stopped(proc.pid, timeout=5.0)
        finally:
            proc.kill()
