"""Why each reconciler's consumer has one filter subject: delivery rate by filter shape.

Publishes N observations of two kinds (KubeNode and SlurmNode, 1,000 keys each) into
BRIDGE_OBS, then drains a durable pull consumer (slurmbridge's continuous pull + ack) with
each filter shape and reports messages/s:

* ``all``: one filter, ``bridge.obs.>`` (what a multi-kind reconciler uses, acking the
  kinds it does not want);
* ``one_kind``: one filter, ``bridge.obs.*.KubeNode.*``;
* ``two_kinds``: two filter subjects (``filter_subjects``) for the two kinds.

    python bench/filters.py --json [--events 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit, machine
from schemas import events, streams, subjects
from schemas.events import KubeNode, SlurmNode
from slurmbridge.config import NatsSettings
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.natsserver import NatsServer
from slurmbridge.runtime.pull import PullConsumer

SHAPES = {
    "all": ["bridge.obs.>"],
    "one_kind": ["bridge.obs.*.KubeNode.*"],
    "two_kinds": ["bridge.obs.*.KubeNode.*", "bridge.obs.*.SlurmNode.*"],
}


async def measure(url: str, name: str, filters: list[str], expected: int) -> float:
    b = await busmod.connect(NatsSettings(), url)
    await b.js.add_consumer(
        streams.OBS_STREAM,
        durable_name=name,
        ack_policy="explicit",
        filter_subjects=filters,
        max_ack_pending=expected + 1,
    )
    puller = PullConsumer(b.nc, streams.OBS_STREAM, name, batch=256)
    t0 = time.perf_counter()
    await puller.start()
    got = 0
    while got < expected:
        for m in await puller.next_batch():
            await m.ack()
            got += 1
    rate = expected / (time.perf_counter() - t0)
    await puller.stop()
    await b.close()
    return rate


async def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        async with NatsServer(store_dir=Path(d)) as server:
            b = await busmod.connect(NatsSettings(), server.url)
            await b.ensure_streams(streams.stream_specs(obs_max_msgs_per_subject=-1))
            pub = b.batch()
            for i in range(args.events):
                k = i % 1000
                ev: events.Event = (
                    KubeNode(source="k8s", key=f"n{k}", version=str(i))
                    if i % 2 == 0
                    else SlurmNode(source="slurm:c", key=f"n{k}", cluster="c", version=str(i))
                )
                await pub.publish(
                    subjects.obs_subject(ev.source, events.kind_of(ev), ev.key),
                    events.encode_event(ev),
                )
            await pub.flush()
            await b.close()
            result: dict[str, object] = {"events": args.events}
            for name, filters in SHAPES.items():
                expected = args.events // 2 if name == "one_kind" else args.events
                result[f"{name}_msgs_per_s"] = round(
                    await measure(server.url, name, filters, expected)
                )
    result["machine"] = machine()
    emit(result, args.json)


if __name__ == "__main__":
    asyncio.run(main())
