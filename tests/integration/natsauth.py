"""NATS credentials for the authentication tests: nkeys, and the operator → account → user
JWT chain of decentralised auth (what ``nsc`` makes), written as a ``.creds`` file.

A NATS JWT is ``base64url(header).base64url(claims).base64url(ed25519 signature)``, signed by
the issuer's nkey (the operator signs the account, the account signs the user).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import nkeys


class Key:
    """A fresh nkey of one role (``nkeys.PREFIX_BYTE_USER`` …)."""

    def __init__(self, prefix: int) -> None:
        self.seed: bytes = nkeys.encode_seed(os.urandom(32), prefix)
        self.pair = nkeys.from_seed(bytearray(self.seed))
        self.public: str = self.pair.public_key.decode()

    def sign(self, data: bytes) -> bytes:
        return bytes(self.pair.sign(data))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(issuer: Key, subject: str, name: str, nats: dict[str, Any]) -> str:
    """A JWT of ``subject`` signed by ``issuer``."""
    claims: dict[str, Any] = {
        "iat": int(time.time()),
        "iss": issuer.public,
        "name": name,
        "sub": subject,
        "nats": {**nats, "version": 2},
    }
    digest = hashlib.sha256(json.dumps(claims, sort_keys=True).encode()).digest()
    claims["jti"] = base64.b32encode(digest).decode().rstrip("=")
    head = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64(json.dumps(claims).encode())
    return f"{head}.{body}.{_b64(issuer.sign(f'{head}.{body}'.encode()))}"


UNLIMITED = {
    "subs": -1,
    "data": -1,
    "payload": -1,
    "imports": -1,
    "exports": -1,
    "wildcards": True,
    "conn": -1,
    "leaf": -1,
    # JetStream is enabled for an account by giving it storage.
    "mem_storage": -1,
    "disk_storage": -1,
    "streams": -1,
    "consumer": -1,
}


class Operator:
    """An operator with one account that may use JetStream; :meth:`user_creds` writes a
    ``.creds`` file for a new user of it; :attr:`server_config` trusts them (memory
    resolver)."""

    def __init__(self) -> None:
        self.operator = Key(nkeys.PREFIX_BYTE_OPERATOR)
        self.account = Key(nkeys.PREFIX_BYTE_ACCOUNT)
        self.system = Key(nkeys.PREFIX_BYTE_ACCOUNT)
        self.operator_jwt = jwt(
            self.operator, self.operator.public, "test-operator", {"type": "operator"}
        )
        self.account_jwt = jwt(
            self.operator,
            self.account.public,
            "slurmbridge",
            {"type": "account", "limits": UNLIMITED, "default_permissions": {"pub": {}, "sub": {}}},
        )
        self.system_jwt = jwt(
            self.operator,
            self.system.public,
            "SYS",
            {"type": "account", "limits": {**UNLIMITED, "mem_storage": 0, "disk_storage": 0}},
        )

    @property
    def server_config(self) -> str:
        return (
            f"operator: {self.operator_jwt}\n"
            f"system_account: {self.system.public}\n"
            "resolver: MEMORY\n"
            "resolver_preload: {\n"
            f"  {self.account.public}: {self.account_jwt}\n"
            f"  {self.system.public}: {self.system_jwt}\n"
            "}\n"
        )

    def user_creds(self, path: Path, name: str = "slurmbridge") -> Path:
        user = Key(nkeys.PREFIX_BYTE_USER)
        token = jwt(
            self.account,
            user.public,
            name,
            {"type": "user", "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1},
        )
        path.write_text(
            "-----BEGIN NATS USER JWT-----\n"
            f"{token}\n"
            "------END NATS USER JWT------\n\n"
            "-----BEGIN USER NKEY SEED-----\n"
            f"{user.seed.decode()}\n"
            "------END USER NKEY SEED------\n"
        )
        path.chmod(0o600)
        return path
