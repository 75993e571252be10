"""The admission webhook over real TLS: certificates from openssl, requests from httpx."""

from __future__ import annotations

import base64
import json
import shutil
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from schemas import wellknown
from slurmbridge import config
from slurmbridge.app import App, UsageError
from slurmbridge.webhook import Policy, WebhookServer
from tests._helpers import pod_review
from tests.integration.certs import make_certs, trusting

OURS = wellknown.DEFAULT_SCHEDULER_NAME


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
async def server(certs: dict[str, Path]) -> AsyncIterator[WebhookServer]:
    async def labels(name: str) -> dict[str, str]:
        return {"slurm": "yes"} if name == "labelled" else {}

    srv = WebhookServer(
        Policy(
            managed_namespaces=frozenset({"hpc"}),
            managed_namespace_selector={"matchLabels": {"slurm": "yes"}},
            service_account="system:serviceaccount:slurmbridge:slurmbridge",
        ),
        bind="127.0.0.1",
        port=0,
        cert_file=str(certs["cert"]),
        key_file=str(certs["key"]),
        namespace_labels=labels,
    )
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


def review(obj: dict[str, Any], op: str = "CREATE") -> dict[str, Any]:
    return pod_review(
        "3f1c",
        op,
        obj["metadata"]["namespace"],
        obj,
        kind={"group": "", "version": "v1", "kind": "Pod"},
        userInfo={"username": "alice"},
    )


def pod(ns: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }


async def test_mutate_over_tls_sets_our_scheduler(
    server: WebhookServer, certs: dict[str, Path]
) -> None:
    base = f"https://localhost:{server.port}"
    async with httpx.AsyncClient(verify=trusting(certs)) as http:
        r = await http.post(f"{base}/mutate", json=review(pod("labelled", nodeName="n1")))
        assert r.status_code == 200
        resp = r.json()["response"]
        assert resp["uid"] == "3f1c" and resp["allowed"] is True
        assert json.loads(base64.b64decode(resp["patch"])) == [
            {"op": "add", "path": "/spec/schedulerName", "value": OURS},
            {"op": "remove", "path": "/spec/nodeName"},
        ]
        r = await http.post(f"{base}/mutate", json=review(pod("web")))
        assert r.json()["response"] == {"uid": "3f1c", "allowed": True}
        assert (await http.get(f"{base}/healthz")).text == "ok\n"


async def test_validate_over_tls_denies_with_the_field(
    server: WebhookServer, certs: dict[str, Path]
) -> None:
    base = f"https://127.0.0.1:{server.port}"
    async with httpx.AsyncClient(verify=trusting(certs)) as http:
        bad = pod("hpc", schedulerName=OURS, topologySpreadConstraints=[{"maxSkew": 1}])
        resp = (await http.post(f"{base}/validate", json=review(bad))).json()["response"]
        assert resp["allowed"] is False
        assert resp["status"]["code"] == 403
        assert resp["status"]["message"].startswith("spec.topologySpreadConstraints:")
        fine = pod("hpc", schedulerName=OURS)
        resp = (await http.post(f"{base}/validate", json=review(fine))).json()["response"]
        assert resp["allowed"] is True
        r = await http.post(f"{base}/validate", content=b"{}")
        assert r.status_code == 400
        assert "apiVersion/kind" in r.text


async def test_tls_only(server: WebhookServer, certs: dict[str, Path]) -> None:
    # Plain HTTP to the TLS port gets no AdmissionReview answer.
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.HTTPError):
            await http.post(f"http://127.0.0.1:{server.port}/mutate", json=review(pod("hpc")))
    # A client that does not trust the CA refuses the server.
    async with httpx.AsyncClient(verify=True) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"https://localhost:{server.port}/healthz")
    # No certificate: no server.
    srv = WebhookServer(Policy(), bind="127.0.0.1", port=0, cert_file=None, key_file=None)
    with pytest.raises(config.ConfigError, match=r"^\$\.webhook\.certFile: required"):
        await srv.start()


async def _handshake_ok(port: int, ca: Path) -> bool:
    async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(ca))) as http:
        try:
            return (await http.get(f"https://localhost:{port}/healthz")).status_code == 200
        except httpx.ConnectError:
            return False


async def test_a_rotated_certificate_is_served_without_restart(tmp_path: Path) -> None:
    first, second = make_certs(tmp_path / "a", "ca-a"), make_certs(tmp_path / "b", "ca-b")
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "tls.crt", live / "tls.key"
    shutil.copy(first["cert"], cert)
    shutil.copy(first["key"], key)
    srv = WebhookServer(Policy(), bind="127.0.0.1", port=0, cert_file=str(cert), key_file=str(key))
    await srv.start()
    try:
        assert await _handshake_ok(srv.port, first["ca"])
        assert not await _handshake_ok(srv.port, second["ca"])
        # Half-way through a rotation (new certificate, old key) the old pair stays in use.
        shutil.copy(second["cert"], live / "new.crt")
        (live / "new.crt").replace(cert)
        assert await _handshake_ok(srv.port, first["ca"])
        shutil.copy(second["key"], live / "new.key")
        (live / "new.key").replace(key)
        assert await _handshake_ok(srv.port, second["ca"])
        assert not await _handshake_ok(srv.port, first["ca"])
        assert srv.tls is not None and srv.tls.reloads == 1
    finally:
        await srv.stop()


async def test_run_only_webhook_needs_neither_nats_nor_slurm(certs: dict[str, Path]) -> None:
    settings = config.load(
        env={},
        overrides={
            "managedNamespaces": ["hpc"],
            "nats": {"url": "nats://127.0.0.1:1"},  # unreachable: must not be needed
            "observability": {"metricsPort": 0, "healthPort": 0},
            "webhook": {
                "bind": "127.0.0.1",
                "port": 0,
                "certFile": str(certs["cert"]),
                "keyFile": str(certs["key"]),
            },
        },
    )
    app = App(settings, only=["webhook"], with_health=False)
    await app.start()
    try:
        assert app.webhook is not None and app.bus is None
        async with httpx.AsyncClient(verify=trusting(certs)) as http:
            r = await http.post(
                f"https://localhost:{app.webhook.port}/mutate", json=review(pod("hpc"))
            )
        assert json.loads(base64.b64decode(r.json()["response"]["patch"]))[0]["value"] == OURS
    finally:
        await app.stop()
    no_cert = config.load(env={}, overrides={"webhook": {"port": 0}})
    with pytest.raises(UsageError, match=r"^webhook: \$\.webhook\.certFile: required"):
        await App(no_cert, only=["webhook"], with_health=False).start()
    # A key that does not belong to the certificate: a usage error, not a traceback.
    mismatched = config.load(
        env={},
        overrides={
            "webhook": {
                "port": 0,
                "certFile": str(certs["cert"]),
                "keyFile": str(certs["ca"].with_name("ca.key")),
            }
        },
    )
    with pytest.raises(UsageError, match=r"^webhook: "):
        await App(mismatched, only=["webhook"], with_health=False).start()


def test_the_default_run_leaves_the_webhook_out() -> None:
    app = App(config.load(env={}), with_health=False)
    assert "webhook" not in app.components
    assert "placement" in app.components
