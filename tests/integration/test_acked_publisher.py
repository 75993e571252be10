"""AckedPublisher against a real nats-server: every publish's future ends with the stream's
acknowledgement or its refusal — the refusals nats-py's ``publish_async`` never resolves
included — and no more than ``window`` publishes wait for an answer at once."""

from __future__ import annotations

import asyncio

import nats.js.errors
import pytest
from nats.js.api import DiscardPolicy, StreamConfig

from slurmbridge.config import NatsSettings
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.natsserver import NatsServer

pytestmark = pytest.mark.integration


async def test_answers_are_the_stream_s_acknowledgements_and_refusals(
    nats_server: NatsServer,
) -> None:
    bus = await busmod.connect(NatsSettings(), nats_server.url)
    try:
        await bus.js.add_stream(
            StreamConfig(name="ONE", subjects=["one.>"], max_msgs=2, discard=DiscardPolicy.NEW)
        )
        acked = bus.acked
        first = await acked.publish("one.a", b"1", {busmod.MSG_ID: "m1"})
        again = await acked.publish("one.a", b"1", {busmod.MSG_ID: "m1"})
        second = await acked.publish("one.b", b"2")
        ack = await asyncio.wait_for(first, 5)
        assert (ack.stream, ack.seq, ack.duplicate) == ("ONE", 1, None)
        dup = await asyncio.wait_for(again, 5)
        assert (dup.seq, dup.duplicate) == (1, True)
        assert (await asyncio.wait_for(second, 5)).seq == 2
        # The stream is full and discards new messages: it answers with an error, which
        # nats-py's publish_async hands to the error callback, leaving the future pending.
        full = await acked.publish("one.c", b"3")
        with pytest.raises(nats.js.errors.APIError, match="maximum messages exceeded"):
            await asyncio.wait_for(full, 5)
        nowhere = await acked.publish("none.x", b"?")
        with pytest.raises(nats.js.errors.NoStreamResponseError):
            await asyncio.wait_for(nowhere, 5)
        assert acked.pending() == 0
    finally:
        await bus.close()


async def test_at_most_window_publishes_wait_for_their_answer(nats_server: NatsServer) -> None:
    nc = (await busmod.connect(NatsSettings(), nats_server.url)).nc
    bus = busmod.Bus(nc, publish_window=2)
    try:
        await bus.js.add_stream(StreamConfig(name="W", subjects=["w.>"]))
        acked = bus.acked
        nats_server.pause()
        try:
            held = [await acked.publish(f"w.{i}", b"x") for i in range(2)]
            third = asyncio.ensure_future(acked.publish("w.2", b"x"))
            # Nothing is answered while the server is stopped: the third waits for a slot.
            done, _ = await asyncio.wait([third, *held], timeout=0.3)
            assert not done and acked.pending() == 2
        finally:
            nats_server.resume()
        fut = await asyncio.wait_for(third, 10)
        seqs = sorted([(await asyncio.wait_for(f, 10)).seq for f in [*held, fut]])
        assert seqs == [1, 2, 3]
        # A caller that gives up (cancels) frees its slot at once; a late answer is dropped.
        nats_server.pause()
        try:
            given_up = [await acked.publish(f"w.{i}", b"y") for i in range(2)]
            for f in given_up:
                f.cancel()
            await asyncio.wait(given_up)  # their done callbacks, the slots' release, ran first
            assert acked.pending() == 0
        finally:
            nats_server.resume()
        last = await acked.publish("w.9", b"z")
        assert (await asyncio.wait_for(last, 10)).seq == 6
    finally:
        await bus.close()
