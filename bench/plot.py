"""PNG plots for docs/benchmarks.md (issue 7): the Slurm poll's cost against cluster size, and
the cordon → DRAIN latency percentiles against load.

* ``poll``: ``bench/scale.py --only poll --json`` at each size (nodes, jobs = 10 × nodes), in a
  fresh process, twice: a full listing of every job each cycle (``--relist-every 1``, the
  poll's upper bound) and the default (``jobs/state`` between full listings every 15
  cycles). Figures in ``docs/img/poll_cost.json``, plot ``docs/img/poll_cost.png``.
* ``latency``: ``bench/latency.py --json --loads …`` (one series of ``--trials`` cordons at
  each churn rate, 0 = idle) → p50 / p90 / p99 / max against the rate the pipeline settled.
  Figures in ``docs/img/latency_load.json``, plot ``docs/img/latency_load.png``.

* ``areas``: one bar chart per remaining area of docs/benchmarks.md (pipeline, workload,
  nodeset, register, kube, memory), from the figures the doc reports, kept in
  ``docs/img/areas.json``; nothing is measured. Plots ``docs/img/<area>.png``.

* ``curve``: bind p50 / p99 against the arrival rate, ``bench/workload.py --json --arrival R
  --pods P`` at each rate of ``--rates`` (P = 10 × R, at least 200 and at most
  ``--max-pods``; ``--nodes`` as that script sets it for R, passed to both series so they
  place on the same cluster), each point in a fresh process, for two series: **before**,
  the bench of commit ``--before`` run from a detached git worktree of it (removed after),
  and **after**, this tree, which also places the same workload with the minimal direct
  binder (``--baseline direct``: the machine's ceiling). Each point keeps the work per pod
  (``decides_per_pod``, ``api_writes_per_pod``, ``cpu_ms_per_pod``, ``nats_msgs_per_pod``),
  ``bound_pods_per_s`` and the load average before and after it (the machine may be
  shared). Figures in ``docs/img/workload_curve.json``, plot ``docs/img/workload_curve.png``.

``--from-json`` re-plots the saved figures without measuring; ``--series after`` measures
only this tree and keeps the saved before series.

    python bench/plot.py [--only poll,latency,areas,curve] [--sizes 1000,2500,5000,10000]
        [--loads 0,250,500,1000,2000] [--trials 200] [--rates 10,25,50,100,200,300]
        [--max-pods 1000] [--before 3f65c24] [--series before,after] [--from-json]

Needs matplotlib (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "img"


def _run(script: str, *args: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--json", *args],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    row: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


def measure_poll(sizes: list[int]) -> list[dict[str, object]]:
    rows = []
    for nodes in sizes:
        for relist in (1, 15):
            row = _run(
                "scale.py", "--only", "poll", "--nodes", str(nodes), "--jobs", str(nodes * 10),
                "--relist-every", str(relist),
            )  # fmt: skip
            print(
                f"{nodes:>6} nodes {nodes * 10:>7} jobs, relist every {relist:>2}: "
                f"{row['slurm_poll_ms_10k_100k']} ms CPU, {row['slurm_poll_wall_ms']} ms wall",
                flush=True,
            )
            rows.append(row)
    return rows


def plot_poll(rows: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    modes = ((1, "o-", "full listing every cycle"), (15, "s-", "jobs/state, full listing 1 in 15"))
    for relist, style, label in modes:
        sel = [r for r in rows if int(r.get("relist_every", 1)) == relist]  # type: ignore[call-overload]
        if not sel:
            continue
        objects = [int(r["nodes"]) + int(r["jobs"]) for r in sel]  # type: ignore[call-overload]
        cpu = [float(r["slurm_poll_ms_10k_100k"]) for r in sel]  # type: ignore[arg-type]
        ax.plot(objects, cpu, style, label=f"CPU per cycle: {label}")
    ax.axhline(200, color="tab:red", lw=1, ls=":", label="target: 200 ms CPU at 110k objects")
    ax.set_xlabel("Slurm objects per cycle (nodes + jobs, jobs = 10 × nodes)")
    ax.set_ylabel("ms of slurmbridge CPU per 2 s poll cycle")
    ax.set_title("Slurm poll cost vs cluster size")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def measure_latency(loads: str, trials: int) -> dict[str, object]:
    result = _run("latency.py", "--loads", loads, "--trials", str(trials))
    for point in result["loads"]:  # type: ignore[attr-defined]
        print(
            f"{point['target_per_s']:>7.0f}/s target, {point['events_per_s']:>5}/s settled: "
            f"p50 {point['p50_ms']} p90 {point['p90_ms']} p99 {point['p99_ms']} "
            f"max {point['max_ms']} ms",
            flush=True,
        )
    return result


def plot_latency(result: dict[str, object], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points: list[dict[str, float]] = result["loads"]  # type: ignore[assignment]
    rate = [p["events_per_s"] for p in points]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for key, style in (("p50_ms", "o-"), ("p90_ms", "s-"), ("p99_ms", "^-"), ("max_ms", "x:")):
        ax.plot(rate, [p[key] for p in points], style, label=key.removesuffix("_ms"))
    ax.axhline(20, color="tab:red", lw=1, ls=":", label="idle p99 target: 20 ms")
    ax.axhline(50, color="tab:orange", lw=1, ls=":", label="p99 under churn target: 50 ms")
    ax.set_xlabel("churn: KubeNode observations per second the pipeline settled")
    ax.set_ylabel("cordon → DRAIN at slurmrestd (ms)")
    ax.set_title(f"Cordon → DRAIN latency vs load ({result['trials']} trials per point)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


#: The work figures each curve point keeps from bench/workload.py's JSON.
CURVE_FIELDS = (
    "pods",
    "nodes",
    "cluster_capacity_pods_per_s",
    "arrival_pods_per_s",
    "bound_pods_per_s",
    "bind_p50_ms",
    "bind_p99_ms",
    "decides_per_pod",
    "api_writes_per_pod",
    "nats_msgs_per_pod",
    "cpu_ms_per_pod",
    "slurmbridge_cpu_share_bind_phase",
    "direct_bound_pods_per_s",
    "direct_bind_p99_ms",
    "direct_cpu_ms_per_pod",
)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def curve_point(rate: int, max_pods: int, cwd: Path, direct: bool) -> dict[str, object]:
    """``bench/workload.py --json --arrival rate`` run from ``cwd`` (its packages win: the
    script puts its tree first on ``sys.path``, and ``slurmbridge run`` is started with
    ``-m`` from the same directory)."""
    sys.path.insert(0, str(ROOT))
    from bench.workload import default_nodes

    pods = max(200, min(max_pods, 10 * rate))
    nodes = default_nodes(False, rate, 0.5)
    args = ["--arrival", str(rate), "--pods", str(pods), "--nodes", str(nodes)]
    # The cleanup phase is not part of the curve: keep it short.
    args += ["--cleanup-pods", "5"] + (["--baseline", "direct"] if direct else [])
    load_before = _load()
    out = subprocess.run(
        [sys.executable, str(cwd / "bench" / "workload.py"), "--json", *args],
        capture_output=True, text=True, check=False, cwd=cwd,
    )  # fmt: skip
    if out.returncode != 0:
        return {"rate": rate, "pods": pods, "nodes": nodes, "error": out.stderr[-600:]}
    row = json.loads(out.stdout.strip().splitlines()[-1])
    point = {"rate": rate, **{k: row[k] for k in CURVE_FIELDS if k in row}}
    point["load_before"], point["load_after"] = load_before, _load()
    return point


def measure_curve(
    rates: list[int], max_pods: int, before: str, series: list[str]
) -> dict[str, object]:
    result: dict[str, object] = {
        "command": "python bench/workload.py --json --arrival R --pods P --nodes N "
        "--cleanup-pods 5 [--baseline direct]",
        "max_pods": max_pods,
    }
    if "before" in series:
        result["before_commit"] = before
    if "after" in series:
        result["after_commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
    for name in series:
        points = []
        tree = ROOT
        if name == "before":
            tree = Path(tempfile.mkdtemp(prefix="old-bench-")) / "tree"
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(tree), before],
                check=True, cwd=ROOT, capture_output=True,
            )  # fmt: skip
        try:
            for rate in rates:
                point = curve_point(rate, max_pods, tree, direct=name == "after")
                print(f"{name:>6} {rate:>4}/s: {json.dumps(point)}", flush=True)
                points.append(point)
        finally:
            if name == "before":
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(tree)], check=False, cwd=ROOT
                )
        result[name] = points
    return result


def plot_curve(result: dict[str, Any], path: Path) -> None:
    """Left: bind p50 and p99 per series against the arrival rate (log scale); right: pods
    bound per second, with the direct binder's from the after series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)
    top = 1.0
    for name, color in (("before", "tab:gray"), ("after", "tab:blue")):
        points = [p for p in result.get(name, []) if "error" not in p]
        if not points:
            continue
        rate = [p["rate"] for p in points]
        top = max(top, *rate)
        ax.plot(rate, [p["bind_p99_ms"] for p in points], "o-", color=color, label=f"{name}: p99")
        ax.plot(rate, [p["bind_p50_ms"] for p in points], "s--", color=color, label=f"{name}: p50")
        bx.plot(rate, [p["bound_pods_per_s"] for p in points], "o-", color=color, label=name)
        direct = [p for p in points if "direct_bound_pods_per_s" in p]
        if direct:
            bx.plot(
                [p["rate"] for p in direct],
                [p["direct_bound_pods_per_s"] for p in direct],
                "^:",
                color="tab:green",
                label="direct binder (same run)",
            )
    ax.axhline(100, color="tab:red", lw=1, ls=":", label="p99 target: 100 ms")
    ax.set_yscale("log")
    ax.set_xlabel("arrival (pods/s)")
    ax.set_ylabel("bind latency, job start → Binding (ms)")
    ax.set_title("Bind latency vs arrival rate")
    bx.plot([0, top], [0, top], color="tab:red", lw=1, ls=":", label="= arrival")
    bx.set_xlabel("arrival (pods/s)")
    bx.set_ylabel("pods bound per second")
    bx.set_title("Placement throughput vs arrival rate")
    for a in (ax, bx):
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def plot_area(area: dict[str, object], path: Path) -> None:
    """Grouped bars: ``series`` (name → one value per label) over ``labels``, with an
    optional ``target`` line ``[value, text]``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels: list[str] = area["labels"]  # type: ignore[assignment]
    series: dict[str, list[float]] = area["series"]  # type: ignore[assignment]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series.items()):
        xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
        ax.bar(xs, values, width, label=name)
    target = area.get("target")
    if isinstance(target, list):
        ax.axhline(float(target[0]), color="tab:red", lw=1, ls=":", label=str(target[1]))
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel(str(area["ylabel"]))
    ax.set_title(str(area["title"]))
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--only", default="poll,latency", help="comma-separated: poll, latency, areas, curve"
    )
    ap.add_argument("--sizes", default="1000,2500,5000,10000", help="poll: node counts")
    ap.add_argument("--loads", default="0,250,500,1000,2000", help="latency: churn rates")
    ap.add_argument("--trials", type=int, default=200, help="latency: cordons per load")
    ap.add_argument("--rates", default="10,25,50,100,200,300", help="curve: arrival rates")
    ap.add_argument("--max-pods", type=int, default=1000, help="curve: most pods per point")
    ap.add_argument("--before", default="3f65c24", help="curve: commit of the before series")
    ap.add_argument("--series", default="before,after", help="curve: before, after")
    ap.add_argument(
        "--from-json", action="store_true", help="plot the saved figures instead of measuring"
    )
    args = ap.parse_args()
    parts = {p.strip() for p in args.only.split(",") if p.strip()}
    known = {"poll", "latency", "areas", "curve"}
    if parts - known:
        raise SystemExit(f"--only: unknown {sorted(parts - known)}")
    if "areas" in parts:
        for name, area in json.loads((OUT / "areas.json").read_text()).items():
            plot_area(area, OUT / f"{name}.png")
            print(f"wrote {OUT / name}.png")
    OUT.mkdir(parents=True, exist_ok=True)
    if "poll" in parts:
        saved = OUT / "poll_cost.json"
        if args.from_json:
            rows = json.loads(saved.read_text())
        else:
            rows = measure_poll([int(s) for s in args.sizes.split(",")])
            saved.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
        plot_poll(rows, OUT / "poll_cost.png")
        print(f"wrote {OUT / 'poll_cost.png'}")
    if "latency" in parts:
        saved = OUT / "latency_load.json"
        if args.from_json:
            result = json.loads(saved.read_text())
        else:
            result = measure_latency(args.loads, args.trials)
            saved.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        plot_latency(result, OUT / "latency_load.png")
        print(f"wrote {OUT / 'latency_load.png'}")
    if "curve" in parts:
        saved = OUT / "workload_curve.json"
        if args.from_json:
            curve = json.loads(saved.read_text())
        else:
            # A series not measured now keeps its saved points (``--series after`` re-runs
            # this tree against the saved before).
            kept = json.loads(saved.read_text()) if saved.exists() else {}
            curve = kept | measure_curve(
                [int(r) for r in args.rates.split(",")],
                args.max_pods,
                args.before,
                [s.strip() for s in args.series.split(",") if s.strip()],
            )
            saved.write_text(json.dumps(curve, indent=1, sort_keys=True) + "\n")
        plot_curve(curve, OUT / "workload_curve.png")
        print(f"wrote {OUT / 'workload_curve.png'}")


if __name__ == "__main__":
    main()
