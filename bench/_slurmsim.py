"""The slurmrestd simulator in its own process, reporting node updates on stdout.

Benchmarks run slurmrestd out of process, as in production, so its request handling does not
share the event loop being measured. Prints ``URL <url>`` once, then one line per accepted
node update: ``UPDATE <node> <STATE,…> <time.monotonic()>``, and one per dynamic node
created: ``CREATE <node> - <time.monotonic()>`` (CLOCK_MONOTONIC is system-wide,
so the parent can subtract its own readings).

    python bench/_slurmsim.py --nodes 40 --extra 200 --token-file /tmp/t
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slurmbridge.devtools.sim.slurmrestd import SlurmSim
from slurmbridge.slurm.models import NodeUpdate


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--extra", type=int, default=0, help="nodes churn-0..churn-N-1 too")
    ap.add_argument("--token-file", required=True)
    args = ap.parse_args()
    sim = SlurmSim(cluster="default")
    sim.seed_default(args.nodes)
    for k in range(args.extra):
        sim.add_node(f"churn-{k}", cpus=2, real_memory=1000, partitions=("batch",))

    def on_update(name: str, update: NodeUpdate, ts: float) -> None:
        sys.stdout.write(f"UPDATE {name} {','.join(update.state) or '-'} {ts!r}\n")
        sys.stdout.flush()

    def on_create(name: str, ts: float) -> None:
        sys.stdout.write(f"CREATE {name} - {ts!r}\n")
        sys.stdout.flush()

    sim.on_update.append(on_update)
    sim.on_create.append(on_create)
    await sim.start(versions=("v0.0.44",))
    sim.write_token(args.token_file)
    print(f"URL {sim.url}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
