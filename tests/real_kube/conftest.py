"""The optional ``real_kube`` tier: a real kube-apiserver and etcd on loopback, the envtest way.

It runs only when ``KUBEBUILDER_ASSETS`` names a folder holding ``kube-apiserver`` and
``etcd`` (the envtest convention; ``setup-envtest use -p path 1.32.x`` prints one). Otherwise
every test of this directory is skipped, and the skip says why (``pytest -rs`` lists it). No
such binaries can be installed on the project's machines, so CI runs the simulator's tests of
the same behaviour (tests/integration/test_kube_*.py); this tier is for anyone who has the
binaries, to check the simulator's answers against the real server's.

One control plane per session, started as controller-runtime's envtest starts it: etcd with a
temporary data dir on a free client port (peer port 0, ``--unsafe-no-fsync``), then
kube-apiserver on a free secure port with a self-signed serving certificate in a temporary
``--cert-dir``, RBAC, a service-account signing key, and the ServiceAccount admission plugin
off (no controller manager creates the ``default`` ServiceAccount). Authentication is a static
token of a ``system:masters`` user. No controller manager and no kubelet run: nothing removes
admission's not-ready taint from a Node, nothing schedules or runs pods, nothing finalizes a
deleted Namespace. The NodeSet CRD of deploy/crds is installed once the server is ready.
Tests use namespaces and Node names of their own.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
import yaml

ASSETS = "KUBEBUILDER_ASSETS"
BINARIES = ("kube-apiserver", "etcd")
CRD = Path(__file__).resolve().parents[2] / "deploy" / "crds" / "nodesets.slinky.slurm.net.yaml"
#: Seconds to wait for the API server to answer /readyz, and for the CRD to be served.
START_TIMEOUT = 90.0


def assets() -> Path:
    """The folder of the envtest binaries; skips the calling test, with the reason, if none."""
    raw = os.environ.get(ASSETS, "")
    if not raw:
        pytest.skip(
            f"real_kube tier: {ASSETS} is not set (it must name a folder with kube-apiserver "
            "and etcd, e.g. the output of `setup-envtest use -p path 1.32.x`)"
        )
    folder = Path(raw)
    missing = [b for b in BINARIES if not os.access(folder / b, os.X_OK)]
    if missing:
        pytest.skip(f"real_kube tier: {ASSETS}={raw} has no executable {' or '.join(missing)}")
    return folder


@pytest.fixture(autouse=True)
def real_kube_assets() -> Path:
    """Guards every test of this directory (and only them): skip without the binaries."""
    return assets()


@dataclass(frozen=True)
class ControlPlane:
    """A running kube-apiserver: its URL, an admin token and a kubeconfig for them."""

    url: str
    token: str
    kubeconfig: Path

    def http(self) -> httpx.Client:
        """A client with the admin token (the serving certificate is self-signed)."""
        headers = {"Authorization": f"Bearer {self.token}"}
        return httpx.Client(base_url=self.url, headers=headers, verify=False, timeout=10.0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def _until(what: str, ready: Any, procs: dict[str, subprocess.Popen[bytes]], logs: Path) -> None:
    """Poll ``ready()`` until true; fail at once when a process died (its log says why)."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with status {proc.returncode} before {what}; see {logs}"
                )
        try:
            if ready():
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {START_TIMEOUT:.0f} s; see {logs}")
        time.sleep(0.2)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd and kube-apiserver for the session, with the NodeSet CRD installed."""
    folder = assets()
    root = tmp_path_factory.mktemp("real-kube")
    etcd_url = f"http://127.0.0.1:{_free_port()}"
    port = _free_port()
    url = f"https://127.0.0.1:{port}"
    token = secrets.token_hex(16)
    (root / "tokens.csv").write_text(f'{token},admin,admin-uid,"system:masters"\n')
    _openssl("genrsa", "-out", str(root / "sa.key"), "2048")
    _openssl("rsa", "-in", str(root / "sa.key"), "-pubout", "-out", str(root / "sa.pub"))
    files: list[IO[bytes]] = []
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, argv in (
            (
                "etcd",
                [
                    str(folder / "etcd"),
                    f"--data-dir={root / 'etcd'}",
                    f"--listen-client-urls={etcd_url}",
                    f"--advertise-client-urls={etcd_url}",
                    "--listen-peer-urls=http://127.0.0.1:0",
                    "--unsafe-no-fsync=true",
                ],
            ),
            (
                "kube-apiserver",
                [
                    str(folder / "kube-apiserver"),
                    f"--etcd-servers={etcd_url}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={port}",
                    f"--cert-dir={root / 'certs'}",
                    f"--token-auth-file={root / 'tokens.csv'}",
                    "--authorization-mode=RBAC",
                    "--service-cluster-ip-range=10.0.0.0/24",
                    f"--service-account-issuer={url}",
                    f"--service-account-key-file={root / 'sa.pub'}",
                    f"--service-account-signing-key-file={root / 'sa.key'}",
                    "--disable-admission-plugins=ServiceAccount",
                    "--allow-privileged=true",
                ],
            ),
        ):
            log = (root / f"{name}.log").open("wb")
            files.append(log)
            procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        plane = ControlPlane(url=url, token=token, kubeconfig=root / "kubeconfig")
        with plane.http() as http:
            _until("/readyz", lambda: http.get("/readyz").status_code == 200, procs, root)
            crd = yaml.safe_load(CRD.read_text())
            created = http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
            created.raise_for_status()

            def established() -> bool:
                got = http.get(
                    f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
                ).json()
                return any(
                    c.get("type") == "Established" and c.get("status") == "True"
                    for c in (got.get("status") or {}).get("conditions") or []
                )

            _until("the NodeSet CRD established", established, procs, root)
            # Established is not served yet: the path answers 404/503 for a moment.
            _until(
                "NodeSets served",
                lambda: http.get("/apis/slinky.slurm.net/v1alpha1/nodesets").status_code == 200,
                procs,
                root,
            )
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "real", "cluster": {"server": url, "insecure-skip-tls-verify": True}}
            ],
            "users": [{"name": "admin", "user": {"token": token}}],
            "contexts": [{"name": "real", "context": {"cluster": "real", "user": "admin"}}],
            "current-context": "real",
        }
        plane.kubeconfig.write_text(json.dumps(config))
        yield plane
    finally:
        for proc in reversed(procs.values()):
            _stop(proc)
        for f in files:
            f.close()
