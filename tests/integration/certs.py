"""Throw-away certificates from openssl for the TLS tests (webhook, NATS)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

_EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")


def trusting(certs: dict[str, Path]) -> ssl.SSLContext:
    """A client TLS context that trusts the test CA only."""
    return ssl.create_default_context(cafile=str(certs["ca"]))


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _signed(d: Path, name: str, cn: str, usage: str, alt: str = "") -> None:
    _openssl("req", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", f"/CN={cn}", cwd=d)  # fmt: skip
    (d / f"{name}.cnf").write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature\n"
        f"extendedKeyUsage={usage}\n" + (f"subjectAltName={alt}\n" if alt else "")
    )
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2",
             "-extfile", f"{name}.cnf", cwd=d)  # fmt: skip


def make_certs(d: Path, ca_name: str = "slurmbridge-test-ca") -> dict[str, Path]:
    """A throw-away CA, a server certificate for localhost / 127.0.0.1 and a client
    certificate (CN ``slurmbridge``), in ``d``: keys ``ca``, ``cert``, ``key``,
    ``client_cert``, ``client_key``."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed for the TLS tests (.ci/install-real-slurm.sh)")
    d.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", *_EC, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", f"/CN={ca_name}", cwd=d)  # fmt: skip
    _signed(d, "server", "localhost", "serverAuth", "DNS:localhost,IP:127.0.0.1")
    _signed(d, "client", "slurmbridge", "clientAuth")
    return {
        "ca": d / "ca.pem",
        "cert": d / "server.pem",
        "key": d / "server.key",
        "client_cert": d / "client.pem",
        "client_key": d / "client.key",
    }
