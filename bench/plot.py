"""PNG plots for docs/benchmarks.md (issue 7): the Slurm poll's cost against cluster size.

Runs ``bench/scale.py --only poll --relist-every 1 --json`` at each size (nodes, jobs =
10 × nodes; a full listing of every job each cycle, the poll's upper bound) in a fresh
process, writes the figures to ``docs/img/poll_cost.json`` and the plot to
``docs/img/poll_cost.png``. ``--from-json`` re-plots saved figures without measuring.

    python bench/plot.py [--sizes 1000,2500,5000,10000] [--from-json docs/img/poll_cost.json]

Needs matplotlib (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "img"


def measure(sizes: list[int]) -> list[dict[str, object]]:
    rows = []
    for nodes in sizes:
        out = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "scale.py"), "--only", "poll", "--json",
             "--nodes", str(nodes), "--jobs", str(nodes * 10), "--relist-every", "1"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"{nodes:>6} nodes {nodes * 10:>7} jobs: {row['slurm_poll_ms_10k_100k']} ms CPU, "
            f"{row['slurm_poll_wall_ms']} ms wall per cycle",
            flush=True,
        )
        rows.append(row)
    return rows


def plot(rows: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    objects = [int(r["nodes"]) + int(r["jobs"]) for r in rows]  # type: ignore[call-overload]
    cpu = [float(r["slurm_poll_ms_10k_100k"]) for r in rows]  # type: ignore[arg-type]
    wall = [float(r["slurm_poll_wall_ms"]) for r in rows]  # type: ignore[arg-type]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    ax.plot(objects, cpu, "o-", label="slurmbridge CPU per cycle")
    ax.plot(objects, wall, "s--", label="wall per cycle (incl. slurmrestd simulator)")
    ax.axhline(200, color="tab:red", lw=1, ls=":", label="target: 200 ms CPU at 110k objects")
    ax.set_xlabel("Slurm objects listed per cycle (nodes + jobs, jobs = 10 × nodes)")
    ax.set_ylabel("ms per poll cycle")
    ax.set_title("Slurm poll cost vs cluster size (every listing full)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,2500,5000,10000", help="node counts")
    ap.add_argument("--from-json", help="plot these saved figures instead of measuring")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        rows = json.loads(Path(args.from_json).read_text())
    else:
        rows = measure([int(s) for s in args.sizes.split(",")])
        (OUT / "poll_cost.json").write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    plot(rows, OUT / "poll_cost.png")
    print(f"wrote {OUT / 'poll_cost.png'}")


if __name__ == "__main__":
    main()
