"""`helm template` output, run as Kubernetes would run it (issue 17, 9 and acceptance): the
chart's container args, settings file and environment — with the service links Kubernetes
injects for every Service of the release, as it would for a pod whose chart did not turn them
off — start ``slurmbridge run``, which gets ready and drains a cordoned node.

The pod's paths and endpoints are mapped onto this machine: the mounted Secrets are files under
a temporary directory (the webhook certificate is the one the chart generated), NATS is a real
nats-server, the Kubernetes API and slurmrestd are the simulators (a kubeconfig instead of the
service account: nothing else of the rendered file changes), and the ports are free ones.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import helm_python as helm
import httpx
import pytest
import yaml

from slurmbridge.cli import main as cli
from slurmbridge.devtools.testing import Simulators
from slurmbridge.runtime.natsserver import NatsServer, free_port
from tests.unit.test_deploy import CHART, container, of_kind, service_links

pytestmark = pytest.mark.e2e

RELEASE, NAMESPACE = "slurmbridge", "slurm"
REASON_N1 = "slurm-bridge: Corresponding Kubernetes node (n1) is unschedulable"
#: The API server's own Service (default/kubernetes), whose links every pod gets.
API_SERVER = {
    "metadata": {"name": "kubernetes"},
    "spec": {"ports": [{"name": "https", "port": 443}]},
}


def helm_template(values: dict[str, Any]) -> list[dict[str, Any]]:
    out = helm.Chart.load(CHART).render(values, name=RELEASE, namespace=NAMESPACE)
    return [
        d
        for path, text in sorted(out.items())
        if path.endswith(".yaml")
        for d in yaml.safe_load_all(text)
        if d
    ]


async def test_helm_template_with_service_links_starts_slurmbridge_run(tmp_path: Path) -> None:
    sims = Simulators(nodes=2, workdir=tmp_path / "sims")
    await sims.start()
    try:
        async with NatsServer(store_dir=tmp_path / "nats") as nats:
            await _run_the_rendered_pod(tmp_path, sims, nats)
    finally:
        await sims.stop()


async def _run_the_rendered_pod(tmp_path: Path, sims: Simulators, nats: NatsServer) -> None:
    docs = helm_template(
        {"config": {"slurmRestApi": sims.slurm.url, "slurm": {"cluster": "default"}}}
    )
    (deployment,) = of_kind(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["enableServiceLinks"] is False  # the chart's own answer; the loader's is below
    c = container(deployment)
    (cm,) = of_kind(docs, "ConfigMap")

    # The mounted Secrets.
    secrets = tmp_path / "secrets"
    (secrets / "slurm").mkdir(parents=True)
    (secrets / "slurm" / "token").write_text(sims.token_file.read_text())
    (tls,) = [s for s in of_kind(docs, "Secret") if s["type"] == "kubernetes.io/tls"]
    (secrets / "webhook").mkdir()
    for key in ("tls.crt", "tls.key"):
        (secrets / "webhook" / key).write_bytes(base64.b64decode(tls["data"][key]))

    # The ConfigMap's file, its paths and endpoints mapped onto this machine.
    args = cli.build_parser().parse_args(c["args"])
    settings = yaml.safe_load(
        cm["data"][Path(args.config).name].replace("/var/run/secrets", str(secrets))
    )
    assert settings["kube"]["inCluster"] is True
    metrics, health, webhook = free_port(), free_port(), free_port()
    settings["kube"] = {**settings["kube"], "inCluster": False, "kubeconfig": str(sims.kubeconfig)}
    settings["nats"] = {**settings["nats"], "url": nats.url, "replicas": 1}
    settings["observability"] = {
        **settings["observability"],
        "metricsPort": metrics,
        "healthPort": health,
    }
    settings["webhook"] = {**settings["webhook"], "port": webhook, "bind": "127.0.0.1"}
    settings["slurm"] = {**settings["slurm"], "userName": "slurmrest", "pollInterval": 0.2}
    config_file = tmp_path / "etc" / Path(args.config).name
    config_file.parent.mkdir()
    config_file.write_text(yaml.safe_dump(settings))
    argv = [a if a != args.config else str(config_file) for a in c["args"]]

    # The environment Kubernetes gives the container: its env, the service links of every
    # Service of the release (and of the API server's), nothing of this test's shell.
    links = service_links(of_kind(docs, "Service"))
    assert {"SLURMBRIDGE_METRICS_SERVICE_HOST", "SLURMBRIDGE_WEBHOOK_PORT"} <= set(links)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
        **links,
        **service_links([API_SERVER], {"kubernetes": "10.96.0.1"}),
        **{e["name"]: e["value"] for e in c.get("env", [])},
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "slurmbridge", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        async with httpx.AsyncClient() as http:
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, proc.communicate()[1][-3000:]
                try:
                    if (await http.get(f"http://127.0.0.1:{health}/readyz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "not ready"
                await asyncio.sleep(0.1)
            assert (await http.get(f"http://127.0.0.1:{metrics}/metrics")).status_code == 200
        sims.kube.cordon("n1")
        deadline = time.monotonic() + 30
        while not sims.slurm.node("n1").has("DRAIN"):
            assert proc.poll() is None and time.monotonic() < deadline, "n1 not drained"
            await asyncio.sleep(0.05)
        assert sims.slurm.node("n1").reason == REASON_N1
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, err[-3000:]
    assert "unknown key" not in err and "ignoring environment" not in err, err[-3000:]
