"""Sustained events/s through observation → projection → decide → ack, against raw nats-py.

Both sides consume the same N observations, published beforehand by a separate process with
``publish_async`` (its rate is reported too), so each measurement is the consuming side alone:

* **raw** (the reference, measured in the same run): one durable pull consumer with nats-py's
  ``fetch(256)`` + ``ack()`` per message — what any Python JetStream consumer starts from;
* **pipeline**: the real runtime — the projection's ordered consumer applies *every* event
  (``every_message``; in production it rebuilds from the last message per subject), the
  ``slurm_drain`` worker pulls the same events, waits for read-your-trigger, runs
  keys_of → view → decide on a projection of K Kubernetes/Slurm node pairs, and acks. Effects
  are no-ops: the events change labels only, so decide runs its whole rule and finds nothing
  to do (this measures the pipeline, not an effector).

A third figure, ``raw_pull_ack_per_s``, is slurmbridge's own continuous pull
(:mod:`slurmbridge.runtime.pull`) with acks and nothing else: the ceiling the pipeline works under.
The msgspec reference (``msgspec_decode_per_s``, ``msgspec_decode_mix_per_s`` and their MB/s)
is decoding alone, no NATS: :func:`decode_reference`.

Rate = messages / (last ack − start). ``--json`` prints one JSON object:
``{"pipeline_events_per_s", "raw_fetch_ack_per_s", "ratio", "publish_async_per_s", …}``.

    python bench/pipeline.py --json [--events 50000] [--keys 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit, machine
from reconcilers import slurm_drain
from reconcilers.base import Context
from schemas import events, streams, subjects
from schemas.events import KubeNode, SlurmNode
from slurmbridge.config import NatsSettings, WorkerSettings
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.natsserver import NatsServer
from slurmbridge.runtime.projection import Projection
from slurmbridge.runtime.pull import PullConsumer
from slurmbridge.runtime.worker import NoopEffector, Worker

EVERY = True

PUBLISHER = r"""
import asyncio, sys, nats
async def run():
    url, payload_file, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pairs = [l.split(b"\t", 1) for l in open(payload_file, "rb").read().split(b"\n\x00\n") if l]
    nc = await nats.connect(url)
    js = nc.jetstream(publish_async_max_pending=4096)
    futs = []
    for i in range(n):
        subj, data = pairs[i % len(pairs)]
        futs.append(await js.publish_async(subj.decode(), data))
        if len(futs) >= 4096:
            await asyncio.gather(*futs); futs.clear()
    await asyncio.gather(*futs)
    await nc.close()
asyncio.run(run())
"""


def _payloads(keys: int, variants: int = 8) -> list[tuple[str, bytes]]:
    out = []
    for v in range(variants):
        for k in range(keys):
            ev = KubeNode(
                source="k8s",
                key=f"node-{k:05d}",
                uid=f"u{k}",
                version=str(v),
                labels={"bench/variant": str(v), "kubernetes.io/hostname": f"node-{k:05d}"},
                cpu_millis=64000,
                memory_bytes=256 << 30,
                ready=True,
            )
            out.append((subjects.obs_subject("k8s", "KubeNode", ev.key), events.encode_event(ev)))
    return out


def decode_reference(payloads: list[tuple[str, bytes]], n: int) -> dict[str, float]:
    """msgspec alone, measured in the same run: ``n`` decodes of the bench's payloads with
    :func:`schemas.events.decode_event` (the decoder the projection and the workers use), and
    of a mix of the kinds a real log holds (pods, Slurm jobs, nodes: ``bench/scale.py``'s
    ``sample_events``, 1.3 KB per pod). Events per second and MB of JSON per second."""
    from bench.scale import sample_events

    mix = [(events.kind_of(ev), events.encode_event(ev)) for ev in sample_events(100, 3000, 2000)]
    out: dict[str, float] = {}
    for name, items in (
        ("msgspec_decode", [(s.split(".")[3], d) for s, d in payloads]),
        ("msgspec_decode_mix", mix),
    ):
        work = [items[i % len(items)] for i in range(n)]
        size = sum(len(d) for _, d in work)
        decode = events.decode_event
        t0 = time.perf_counter()
        for kind, data in work:
            decode(kind, data)
        elapsed = time.perf_counter() - t0
        out[f"{name}_per_s"] = round(n / elapsed)
        out[f"{name}_mb_per_s"] = round(size / elapsed / 2**20, 1)
    return out


async def _prepublish(url: str, payloads: list[tuple[str, bytes]], n: int, tmp: Path) -> float:
    f = tmp / "payloads.bin"
    f.write_bytes(b"\n\x00\n".join(s.encode() + b"\t" + d for s, d in payloads))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", PUBLISHER, url, str(f), str(n)])
    await asyncio.get_running_loop().run_in_executor(None, proc.wait)
    return n / (time.perf_counter() - t0)


async def raw(
    server: NatsServer, payloads: list[tuple[str, bytes]], n: int, tmp: Path
) -> tuple[float, float]:
    b = await busmod.connect(NatsSettings(), server.url)
    await b.ensure_streams(streams.stream_specs(obs_max_msgs_per_subject=-1))
    await b.js.add_consumer(
        streams.OBS_STREAM, durable_name="raw", ack_policy="explicit", max_ack_pending=n + 1
    )
    pub_rate = await _prepublish(server.url, payloads, n, tmp)
    psub = await b.js.pull_subscribe_bind("raw", stream=streams.OBS_STREAM)
    got = 0
    t0 = time.perf_counter()
    while got < n:
        try:
            msgs = await psub.fetch(256, timeout=1.0)
        except Exception:
            continue
        for m in msgs:
            await m.ack()
        got += len(msgs)
    elapsed = time.perf_counter() - t0
    await b.close()
    return n / elapsed, pub_rate


async def raw_pull(
    server: NatsServer, payloads: list[tuple[str, bytes]], n: int, tmp: Path
) -> float:
    """Our continuous pull (slurmbridge.runtime.pull) + ack, nothing else: the ceiling of the
    pipeline."""
    b = await busmod.connect(NatsSettings(), server.url)
    await b.ensure_streams(streams.stream_specs(obs_max_msgs_per_subject=-1))
    await b.js.add_consumer(
        streams.OBS_STREAM, durable_name="rawpull", ack_policy="explicit", max_ack_pending=n + 1
    )
    await _prepublish(server.url, payloads, n, tmp)
    puller = PullConsumer(b.nc, streams.OBS_STREAM, "rawpull", batch=256)
    t0 = time.perf_counter()
    await puller.start()
    got = 0
    while got < n:
        msgs = await puller.next_batch()
        for m in msgs:
            await m.ack()
        got += len(msgs)
    elapsed = time.perf_counter() - t0
    await puller.stop()
    await b.close()
    return n / elapsed


async def pipeline(
    server: NatsServer, payloads: list[tuple[str, bytes]], n: int, keys: int, tmp: Path
) -> tuple[float, int]:
    b = await busmod.connect(NatsSettings(), server.url)
    await b.ensure_streams(streams.stream_specs(obs_max_msgs_per_subject=-1))
    # The Slurm half of each pair, so views are full and decide runs its whole rule.
    pub = b.batch()
    for k in range(keys):
        ev = SlurmNode(source="slurm:bench", key=f"node-{k:05d}", cluster="bench", state=("IDLE",))
        await pub.publish(
            subjects.obs_subject(ev.source, "SlurmNode", ev.key), events.encode_event(ev)
        )
    await pub.flush()
    await _prepublish(server.url, payloads, n, tmp)
    total = n + keys
    t0 = time.perf_counter()
    proj = Projection()
    await proj.start(b, every_message=EVERY)
    worker = Worker(
        slurm_drain.SPEC,
        bus=b,
        projection=proj,
        effector=NoopEffector(),
        ctx=Context(scheduler_name="s", cluster="bench"),
        settings=WorkerSettings(max_ack_pending=total + 1),
        instance_id="bench",
    )
    await worker.start()
    while worker.settled < total:
        await asyncio.sleep(0.001)
    elapsed = time.perf_counter() - t0
    reconciles = worker.reconciles
    await worker.stop()
    await proj.stop()
    await b.close()
    return total / elapsed, reconciles


async def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    payloads = _payloads(args.keys)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        async with NatsServer(store_dir=tmp / "raw") as s1:
            raw_rate, pub_rate = await raw(s1, payloads, args.events, tmp)
        async with NatsServer(store_dir=tmp / "pull") as s3:
            pull_rate = await raw_pull(s3, payloads, args.events, tmp)
        async with NatsServer(store_dir=tmp / "pipe") as s2:
            pipe_rate, reconciles = await pipeline(s2, payloads, args.events, args.keys, tmp)
    reference = decode_reference(payloads, args.events)
    emit(
        {
            "events": args.events,
            "keys": args.keys,
            "pipeline_events_per_s": round(pipe_rate),
            "raw_fetch_ack_per_s": round(raw_rate),
            "ratio": round(pipe_rate / raw_rate, 3),
            "publish_async_per_s": round(pub_rate),
            "raw_pull_ack_per_s": round(pull_rate),
            "reconciles": reconciles,
            **reference,
            "machine": machine(),
        },
        args.json,
    )


if __name__ == "__main__":
    asyncio.run(main())
