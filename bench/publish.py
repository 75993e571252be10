"""CPU per JetStream publish: nats-py's ``publish_async`` against slurmbridge's
:class:`~slurmbridge.runtime.bus.AckedPublisher`, which every observation, action record and
write-ahead intent goes through (about 19 per placed pod, ``bench/workload.py``).

One embedded nats-server (file storage, one stream); this process publishes ``--messages``
messages of ``--size`` bytes, each with its own ``Nats-Msg-Id``, waiting for the answers in
windows of 256, with each publisher in turn, ``--rounds`` times (alternating, so both see
the same machine). The CPU time (user + system of this process, ``time.process_time``) is
the publishing side's alone: the server runs in its own process. Figures per round and the
median, in µs of CPU per message.

    python bench/publish.py --json [--messages 5000] [--size 400] [--rounds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nats.js.api import StreamConfig

from bench._common import emit, machine
from slurmbridge.cli.main import _loop_factory
from slurmbridge.config import NatsSettings
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.natsserver import NatsServer

Publish = Callable[[str, bytes, dict[str, str]], Awaitable["asyncio.Future[Any]"]]


async def _round(publish: Publish, name: str, n: int, payload: bytes) -> float:
    """CPU µs per message for ``n`` publishes through ``publish``, answers awaited."""
    t0 = time.process_time()
    window: list[asyncio.Future[Any]] = []
    for i in range(n):
        window.append(await publish(f"bench.{i % 100}", payload, {busmod.MSG_ID: f"{name}{i}"}))
        if len(window) >= 256:
            await asyncio.gather(*window)
            window.clear()
    await asyncio.gather(*window)
    return (time.process_time() - t0) * 1e6 / n


async def run(messages: int, size: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(store_dir=Path(tmp) / "nats")
        await server.start()
        bus = await busmod.connect(NatsSettings(), server.url)
        try:
            await bus.js.add_stream(StreamConfig(name="BENCH", subjects=["bench.>"]))
            payload = b"x" * size

            async def nats_py(subject: str, data: bytes, headers: dict[str, str]) -> Any:
                return await bus.js.publish_async(subject, data, headers=headers)

            figures: dict[str, list[float]] = {"nats_py_publish_async": [], "acked_publisher": []}
            for r in range(rounds):
                figures["nats_py_publish_async"].append(
                    await _round(nats_py, f"a{r}-", messages, payload)
                )
                figures["acked_publisher"].append(
                    await _round(bus.acked.publish, f"b{r}-", messages, payload)
                )
        finally:
            await bus.close()
            await server.stop()
    out: dict[str, Any] = {"messages": messages, "size_bytes": size, "rounds": rounds}
    for name, values in figures.items():
        out[f"{name}_cpu_us_per_msg"] = [round(v, 1) for v in values]
        out[f"{name}_cpu_us_per_msg_median"] = round(statistics.median(values), 1)
    out["machine"] = machine()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--size", type=int, default=400, help="payload bytes")
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    # The loop ``slurmbridge run`` uses (uvloop when installed).
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        result = runner.run(run(args.messages, args.size, args.rounds))
    emit(result, as_json=args.json)


if __name__ == "__main__":
    main()
