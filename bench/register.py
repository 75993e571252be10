"""1,000 Kubernetes nodes labelled as external nodes at once: time until all are in Slurm.

Everything runs as separate processes, as in production: the Kubernetes API simulator
(``slurmbridge sim kube``), the slurmrestd simulator (``bench/_slurmsim.py``, which reports the
arrival of each ``POST /slurm/v0.0.44/new/node/``), nats-server, and slurmbridge (every
component, in this process). A separate "kubectl" process creates the nodes, each with label
``scheduler.slinky.slurm.net/external-node`` and partitions ``batch``; the clock starts when
it starts and stops at the last registration. Concurrency towards Slurm is bounded by the
worker's ``concurrency`` setting (reconciles in flight per reconciler).

    python bench/register.py --json [--nodes 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit, machine
from bench.latency import RemoteSlurm
from schemas import wellknown
from schemas.events import KubeNode
from slurmbridge import config
from slurmbridge.app import App
from slurmbridge.runtime.natsserver import NatsServer, free_port

KUBECTL = r"""
import sys, httpx
url, n, label, ann = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
with httpx.Client(base_url=url) as c:
    for i in range(n):
        c.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": f"ext-{i:04d}", "labels": {label: "true"}, "annotations": {ann: "batch"}},
            "status": {"capacity": {"cpu": "8", "memory": "16Gi"}}}).raise_for_status()
"""


async def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="reconciles in flight per reconciler (the worker setting)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="slurmbridge-register-"))
    remote = RemoteSlurm(1, 0, workdir)
    await remote.start()
    kube_port = free_port()
    kubeconfig = workdir / "kubeconfig"
    kube = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "slurmbridge",
            "sim",
            "kube",
            "--port",
            str(kube_port),
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        stdout=subprocess.DEVNULL,
    )
    nats = NatsServer(store_dir=workdir / "nats")
    await nats.start()
    app: App | None = None
    try:
        deadline = time.monotonic() + 30
        while not kubeconfig.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        settings = config.load(
            env={},
            overrides={
                "nats": {"url": nats.url},
                "kube": {"kubeconfig": str(kubeconfig)},
                "slurm": {
                    "url": remote.url,
                    "tokenFile": str(remote.token_file),
                    "userName": remote.user,
                },
                "observability": {"metricsPort": 0, "healthPort": 0, "logLevel": "WARNING"},
                "worker": {"concurrency": args.concurrency},
            },
        )
        app = App(settings, with_health=False)
        await app.start()
        t0 = time.monotonic()
        kubectl = subprocess.Popen(
            [
                sys.executable,
                "-c",
                KUBECTL,
                f"http://127.0.0.1:{kube_port}",
                str(args.nodes),
                wellknown.LABEL_EXTERNAL_NODE,
                wellknown.ANNOTATION_EXTERNAL_NODE_PARTITIONS,
            ]
        )
        while len(remote.created) < args.nodes:
            if time.monotonic() - t0 > 300:
                raise TimeoutError(f"only {len(remote.created)} registered after 300 s")
            await asyncio.sleep(0.05)
        elapsed = max(remote.created.values()) - t0
        kubectl.wait()
        observed = app.projection.count(str(KubeNode.__struct_config__.tag))
        concurrency = settings.worker.concurrency
    finally:
        if app is not None:
            await app.stop()
        await nats.stop()
        kube.terminate()
        kube.wait()
        await remote.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    emit(
        {
            "nodes": args.nodes,
            "all_registered_s": round(elapsed, 2),
            "kube_nodes_observed": observed,
            "worker_concurrency": concurrency,
            "machine": machine(),
        },
        args.json,
    )


if __name__ == "__main__":
    asyncio.run(main())
