"""The whole system as users run it: the ``slurmbridge`` command in separate processes."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from slurmbridge.runtime.natsserver import NatsServer, free_port

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "slurmbridge"]
REASON_N1 = "slurm-bridge: Corresponding Kubernetes node (n1) is unschedulable"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURMBRIDGE_")}


def test_demo_jsonl_tells_the_story(tmp_path: Path) -> None:
    log = tmp_path / "log"
    proc = subprocess.run(
        [*CLI, "demo", "--duration", "20", "--format", "jsonl", "--keep-log", str(log)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    objs = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert objs, "demo printed nothing"
    assert all("kind" in o or "type" in o for o in objs)  # every object carries its tag
    every = [o for o in objs if o.get("type") == "ActionRecord"]
    # Each effect's write-ahead record comes first, with the same op_id as its outcome's.
    intents = {r["op_id"] for r in every if r["outcome"] == "intended"}
    records = [r for r in every if r["outcome"] != "intended"]
    effects = [r for r in records if r["action"]["action"] != "RecordEvent"]
    assert effects and all(r["op_id"] in intents for r in effects)
    by_action = {(r["action"]["action"], r["key"], r["outcome"]) for r in records}
    assert ("TaintNode", "n1", "ok") in by_action
    assert ("DrainSlurmNode", "n1", "ok") in by_action
    assert ("UndrainSlurmNode", "n1", "ok") in by_action
    drain = next(r for r in records if r["action"]["action"] == "DrainSlurmNode")
    assert drain["action"]["reason"] == REASON_N1
    # The administrator's drain on n2 is never undone.
    assert not any(
        r["action"]["action"] == "UndrainSlurmNode" and r["key"] == "n2" for r in records
    )
    assert "n2 is IDLE+DRAIN with reason 'bad DIMM'" in proc.stderr
    assert any(
        o.get("kind") == "SlurmNode" and o["key"] == "n4" and o["op"] == "deleted" for o in objs
    )
    assert ("UntaintNode", "n4", "ok") in by_action
    # External node: registered; its partitions changed, so re-registered (real Slurm does
    # not move a dynamic node on a feature update); then drained and deleted.
    for action in ("CreateSlurmNode", "DrainSlurmNode", "DeleteSlurmNode"):
        assert (action, "ext-1", "ok") in by_action, action
    creates = [
        r for r in records if r["key"] == "ext-1" and r["action"]["action"] == "CreateSlurmNode"
    ]
    # Created twice; a create decided again before the log caught up is a harmless noop
    # (the effector finds the node there).
    outcomes = [r["outcome"] for r in creates]
    assert outcomes.count("ok") == 2
    assert set(outcomes) <= {"ok", "noop"}
    # The workload story: the 3-pod Job is one placeholder job, bound, run, cleaned up.
    group = "default/Job:train"
    ok = [r for r in records if r["key"] == group and r["outcome"] == "ok"]
    assert [r["action"]["action"] for r in ok].count("SubmitSlurmJob") == 1
    bound = {r["action"]["pod"]["name"] for r in ok if r["action"]["action"] == "BindPod"}
    assert bound == {"train-0", "train-1", "train-2"}
    assert ("CancelSlurmJob", group, "ok") in by_action
    released = {
        r["action"]["pod"]["name"] for r in ok if r["action"]["action"] == "RemovePodFinalizer"
    }
    assert released == bound
    assert "pods: train-0 Succeeded, train-1 Succeeded, train-2 Succeeded" in proc.stderr
    # The NodeSet story: a wave scales burst 0 → 3, a manual scale-in spares the busy node
    # until its job ends, and the quiet partition takes it to 0.
    burst = [r for r in records if r["key"] == "default/burst" and r["outcome"] == "ok"]
    steps = [r["action"]["replicas"] for r in burst if r["action"]["action"] == "ScaleNodeSet"]
    # Up to 3 (in one step, or two when the wave reached the log over two polls), then 0.
    assert steps[-2:] == [3, 0] and steps[:-1] == sorted(steps[:-1]), steps
    deleted = [
        r["action"]["pod"]["name"] for r in burst if r["action"]["action"] == "DeleteNodeSetPod"
    ]
    assert deleted == ["burst-2", "burst-1", "burst-0"]
    assert "nodeset/burst has 0 pod(s); pods deleted under a running job: 0" in proc.stderr
    assert "CANCELLED" in proc.stderr

    # The kept log, read back: every recorded decision is reproduced by replay …
    store = ["--nats-store", str(log / "nats")]
    replay = subprocess.run(
        [*CLI, "replay", *store], capture_output=True, text=True, timeout=60, env=_env()
    )
    assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-2000:]
    summary = replay.stdout.strip().splitlines()[-1]
    assert " 0 differing" in summary, summary
    replayed = int(summary.split("replayed ")[1].split(" ")[0])
    decided = sum(1 for r in records if r["action"]["action"] != "RecordEvent")
    assert 0 < replayed <= decided, (replayed, decided)
    # … and explain tells why n1 was drained: the cordon, the decision, Slurm's DRAIN.
    why = subprocess.run(
        [*CLI, "explain", "SlurmNode/n1", *store],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )
    assert why.returncode == 0, why.stderr[-2000:]
    text = why.stdout
    assert "DrainSlurmNode" in text and "→ ok" in text, text
    assert "KubeNode n1 (k8s) unschedulable" in text, text  # the triggering observation
    assert f"reason={REASON_N1!r}" in text, text  # Slurm reporting our drain
    order = [text.index("DrainSlurmNode"), text.index("UndrainSlurmNode")]
    assert order == sorted(order), "timeline out of order"


def _wait_port_file(
    proc: subprocess.Popen[str], what: str, cond: object, timeout: float = 20
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            # Its own words, when they were piped here (an exit 2 names the setting or port).
            said = proc.stderr.read()[-2000:] if proc.stderr is not None else ""
            raise AssertionError(f"{what} exited with {proc.returncode}: {said}")
        if callable(cond) and cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in started:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()


async def test_run_against_standalone_simulators(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    kube_port, slurm_port, metrics, health = (free_port() for _ in range(4))
    kubeconfig, token = tmp_path / "kubeconfig", tmp_path / "token"
    env = _env()
    procs.append(
        subprocess.Popen(
            [*CLI, "sim", "kube", "--port", str(kube_port), "--kubeconfig-out", str(kubeconfig)],
            env=env,
            text=True,
        )
    )
    procs.append(
        subprocess.Popen(
            [
                *CLI,
                "sim",
                "slurmrestd",
                "--port",
                str(slurm_port),
                "--nodes",
                "2",
                "--api-version",
                "v0.0.44",
                "--token-file",
                str(token),
            ],
            env=env,
            text=True,
        )
    )
    _wait_port_file(procs[0], "sim kube", kubeconfig.exists)
    _wait_port_file(procs[1], "sim slurmrestd", token.exists)
    kube = f"http://127.0.0.1:{kube_port}"
    for name in ("n1", "n2"):
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name},
            "status": {"capacity": {"cpu": "2", "memory": "1000Mi"}},
        }
        httpx.post(f"{kube}/api/v1/nodes", json=node).raise_for_status()

    async with NatsServer(store_dir=tmp_path / "nats") as nats:
        run = subprocess.Popen(
            [
                *CLI,
                "run",
                "--nats-url",
                nats.url,
                "--kubeconfig",
                str(kubeconfig),
                "--slurm-url",
                f"http://127.0.0.1:{slurm_port}",
                "--slurm-token-file",
                str(token),
                "--slurm-user",
                "slurmrest",
                "--poll-interval",
                "0.2",
                "--metrics-port",
                str(metrics),
                "--health-port",
                str(health),
            ],
            env=env,
            text=True,
            stderr=subprocess.PIPE,
        )
        procs.append(run)

        def ready() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{health}/readyz").status_code == 200
            except httpx.HTTPError:
                return False

        _wait_port_file(run, "slurmbridge run /readyz", ready, timeout=30)
        httpx.patch(
            f"{kube}/api/v1/nodes/n1",
            json={"spec": {"unschedulable": True}},
            headers={"Content-Type": "application/merge-patch+json"},
        ).raise_for_status()

        def drained() -> bool:
            out = subprocess.run(
                [
                    *CLI,
                    "tail",
                    "bridge.act.>",
                    "--nats-url",
                    nats.url,
                    "--from-start",
                    "--format",
                    "jsonl",
                    "--timeout",
                    "1",
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=30,
                check=False,
            ).stdout
            recs = [json.loads(line) for line in out.splitlines() if line.strip()]
            return any(
                r["action"]["action"] == "DrainSlurmNode"
                and r["outcome"] == "ok"
                and r["action"]["reason"] == REASON_N1
                for r in recs
            )

        _wait_port_file(run, "DrainSlurmNode record", drained, timeout=30)
        metrics_text = httpx.get(f"http://127.0.0.1:{metrics}/metrics").text
        assert (
            'slurmbridge_actions_total{action="DrainSlurmNode",outcome="ok",reconciler="slurm_drain"}'
            in metrics_text
        )
        token_text = token.read_text().strip()
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=30)
        assert run.returncode == 0, err[-2000:]
        assert token_text not in err  # the Slurm token never reaches the logs


def test_run_only_webhook_refuses_to_start_without_tls() -> None:
    proc = subprocess.run(
        [*CLI, "run", "--only", "webhook"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        check=False,
    )
    assert proc.returncode == 2
    assert "$.webhook.certFile" in proc.stderr
    assert "simulators" not in proc.stderr  # the webhook alone starts nothing else


def test_run_only_webhook_serves_admission_reviews(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    port = free_port()
    env = {
        **_env(),
        "SLURMBRIDGE_WEBHOOK_CERT_FILE": str(cert),
        "SLURMBRIDGE_WEBHOOK_KEY_FILE": str(key),
        "SLURMBRIDGE_WEBHOOK_BIND": "127.0.0.1",
        "SLURMBRIDGE_WEBHOOK_PORT": str(port),
        "SLURMBRIDGE_MANAGED_NAMESPACES": "hpc",
    }
    run = subprocess.Popen(
        [*CLI, "run", "--only", "webhook", "--metrics-port", "0", "--health-port", "0"],
        env=env,
        text=True,
        stderr=subprocess.PIPE,
    )
    procs.append(run)
    base = f"https://localhost:{port}"
    trust = ssl.create_default_context(cafile=str(cert))

    def up() -> bool:
        try:
            return httpx.get(f"{base}/healthz", verify=trust).status_code == 200
        except httpx.HTTPError:
            return False

    _wait_port_file(run, "slurmbridge run --only webhook", up, timeout=30)
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "e2e",
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": "hpc",
            "object": {"metadata": {"name": "p", "namespace": "hpc"}, "spec": {}},
        },
    }
    resp = httpx.post(f"{base}/mutate", json=review, verify=trust).json()["response"]
    assert resp["uid"] == "e2e" and resp["patchType"] == "JSONPatch"
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=30)
    assert run.returncode == 0, err[-2000:]
    assert "simulators" not in err
