"""Security against a real nats-server (docs/security.md): every authentication method and TLS
(and a refusal of each that fails fast with the reason), the documented per-component subject
permissions (producers and reconcilers in separate processes under their own users converge,
and each is refused the other's subjects), and the Slurm token never leaving its file or
Secret."""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import nats.errors
import nkeys
import pytest
from prometheus_client import REGISTRY, generate_latest

import reconcilers
from schemas import streams, wellknown
from schemas.events import SlurmPing
from schemas.subjects import slurm_source
from slurmbridge import components, config
from slurmbridge.app import App
from slurmbridge.cli import run as runner
from slurmbridge.config import NatsSettings
from slurmbridge.devtools.sim.kube import DEFAULT_RESOURCES
from slurmbridge.devtools.sim.slurmrestd import SlurmSim, mint_jwt
from slurmbridge.devtools.testing import Stack
from slurmbridge.logview import logread
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.bus import Bus, NatsRefusedError, StreamAdminError
from slurmbridge.runtime.leases import BUCKET
from slurmbridge.runtime.natsserver import NatsServer
from tests.integration.certs import make_certs
from tests.integration.natsauth import Key, Operator
from tests.integration.test_clusters_e2e import NS, cluster, secret

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("admin", "producer", "reconciler", "reader")
STREAMS = (streams.OBS_STREAM, streams.ACT_STREAM, streams.DLQ_STREAM)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certs(tmp_path_factory.mktemp("nats-certs"))


@pytest.fixture
async def server_with() -> AsyncIterator[Callable[[str], Any]]:
    """Start nats-servers with extra configuration; all are stopped at the end."""
    started: list[NatsServer] = []

    async def start(extra: str) -> NatsServer:
        srv = NatsServer(extra_config=extra)
        started.append(srv)
        await srv.start()
        return srv

    yield start
    for srv in started:
        await srv.stop()
        srv.cleanup()


async def round_trip(settings: NatsSettings, url: str) -> int:
    """Connect, make the streams and publish one observation: its stream sequence."""
    bus = await asyncio.wait_for(busmod.connect(settings, url), 15)
    try:
        await bus.ensure_streams(streams.stream_specs())
        ack = await bus.publish("bridge.obs.k8s.KubeNode.n1", b"{}")
        return ack.seq
    finally:
        await bus.close()


async def refused_to_connect(settings: NatsSettings, url: str) -> str:
    with pytest.raises(NatsRefusedError) as info:
        await asyncio.wait_for(busmod.connect(settings, url), 15)
    return str(info.value)


def nkey_seed_file(path: Path) -> tuple[Path, str]:
    key = Key(nkeys.PREFIX_BYTE_USER)
    path.write_bytes(key.seed)
    return path, key.public


# --- authentication and TLS ----------------------------------------------------------------


async def test_user_and_password(server_with: Callable[[str], Any]) -> None:
    srv = await server_with('authorization { users = [{user: bridge, password: "s3cret"}] }')
    assert await round_trip(NatsSettings(user="bridge", password="s3cret"), srv.url) == 1
    why = await refused_to_connect(NatsSettings(user="bridge", password="wrong"), srv.url)
    assert "Authorization Violation" in why and "$.nats.user/password" in why
    await refused_to_connect(NatsSettings(), srv.url)


async def test_token(server_with: Callable[[str], Any]) -> None:
    srv = await server_with('authorization { token: "t0ken-abc" }')
    assert await round_trip(NatsSettings(token="t0ken-abc"), srv.url) == 1
    assert "Authorization Violation" in await refused_to_connect(
        NatsSettings(token="t0ken-xyz"), srv.url
    )


async def test_nkey(server_with: Callable[[str], Any], tmp_path: Path) -> None:
    seed, public = nkey_seed_file(tmp_path / "user.nk")
    srv = await server_with(f"authorization {{ users = [{{nkey: {public}}}] }}")
    assert await round_trip(NatsSettings(nkey_seed_file=str(seed)), srv.url) == 1
    stranger, _ = nkey_seed_file(tmp_path / "stranger.nk")
    await refused_to_connect(NatsSettings(nkey_seed_file=str(stranger)), srv.url)


async def test_creds_file_of_decentralised_auth(
    server_with: Callable[[str], Any], tmp_path: Path
) -> None:
    """Operator mode: the server trusts an operator, which signed the account, which signed
    the user whose JWT and seed are in the .creds file (what ``nsc`` produces)."""
    operator = Operator()
    srv = await server_with(operator.server_config)
    creds = operator.user_creds(tmp_path / "bridge.creds")
    assert await round_trip(NatsSettings(creds_file=str(creds)), srv.url) == 1
    foreign = Operator().user_creds(tmp_path / "foreign.creds")
    await refused_to_connect(NatsSettings(creds_file=str(foreign)), srv.url)


async def test_tls(server_with: Callable[[str], Any], certs: dict[str, Path]) -> None:
    srv = await server_with(f'tls {{ cert_file: "{certs["cert"]}", key_file: "{certs["key"]}" }}')
    url = srv.url.replace("nats://", "tls://").replace("127.0.0.1", "localhost")
    assert await round_trip(NatsSettings(tls_ca=str(certs["ca"])), url) == 1
    # A server certificate from a CA we were not told to trust.
    other = make_certs(certs["ca"].parent / "other", "someone-else")
    why = await refused_to_connect(NatsSettings(tls_ca=str(other["ca"])), url)
    assert "certificate" in why.lower()


async def test_mutual_tls(server_with: Callable[[str], Any], certs: dict[str, Path]) -> None:
    srv = await server_with(
        f'tls {{ cert_file: "{certs["cert"]}", key_file: "{certs["key"]}", '
        f'ca_file: "{certs["ca"]}", verify: true }}'
    )
    url = srv.url.replace("nats://", "tls://").replace("127.0.0.1", "localhost")
    client = NatsSettings(
        tls_ca=str(certs["ca"]),
        tls_cert=str(certs["client_cert"]),
        tls_key=str(certs["client_key"]),
    )
    assert await round_trip(client, url) == 1
    # No client certificate: the server ends the handshake. nats-py sees that as a reset
    # connection, which it retries like an unreachable server.
    with pytest.raises((NatsRefusedError, TimeoutError)):
        await asyncio.wait_for(busmod.connect(NatsSettings(tls_ca=str(certs["ca"])), url), 3)


# --- per-component permissions -------------------------------------------------------------


def documented_permissions() -> str:
    """The nats-server block of docs/security.md, as written there."""
    text = (ROOT / "docs" / "security.md").read_text()
    m = re.search(r"```nats-server\n(.*?)```", text, re.DOTALL)
    assert m, "docs/security.md has no nats-server block"
    return m.group(1)


async def stored(admin: Bus, stream: str, subject: str) -> int:
    info = await admin.js.stream_info(stream, subjects_filter=subject)
    return (info.state.subjects or {}).get(subject, 0)


async def refused_publish(
    who: Bus, admin: Bus, stream: str, subject: str, caplog: pytest.LogCaptureFixture
) -> bool:
    """``who`` publishes to ``subject``: True when the server refused it for permissions
    (nothing stored, the violation reported to the client)."""
    before = await stored(admin, stream, subject)
    caplog.clear()
    try:
        await who.js.publish(subject, b"{}", timeout=1.0)
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
        pass
    else:
        return False
    # nats-py lower-cases the server's error text
    violation = f'permissions violation for publish to "{subject}"'.lower()
    return violation in caplog.text.lower() and await stored(admin, stream, subject) == before


async def test_per_component_permissions(
    server_with: Callable[[str], Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="slurmbridge.runtime.bus")
    passwords = {role: secrets.token_hex(12) for role in ROLES}
    for role, password in passwords.items():
        monkeypatch.setenv(f"SLURMBRIDGE_{role.upper()}_PASSWORD", password)
    srv = await server_with(documented_permissions())

    def as_user(role: str) -> NatsSettings:
        return NatsSettings(url=srv.url, user=f"slurmbridge-{role}", password=passwords[role])

    # A component may not make the streams: start-up stops and says who should.
    reconciler = await busmod.connect(as_user("reconciler"), srv.url)
    with pytest.raises(StreamAdminError, match="slurmbridge streams"):
        await reconciler.ensure_streams(streams.stream_specs())
    await reconciler.close()

    admin_settings = config.load(env={}, overrides={"nats": msgspec.to_builtins(as_user("admin"))})
    assert await runner.streams_cmd(admin_settings, apply=True) == 0
    admin = await busmod.connect(as_user("admin"), srv.url)
    reader = await busmod.connect(as_user("reader"), srv.url)

    producers = Stack(
        nodes=3,
        components=components.PRODUCERS,
        nats_url=srv.url,
        settings={"nats": {"user": "slurmbridge-producer", "password": passwords["producer"]}},
    )
    rec: App | None = None
    try:
        await producers.start()
        assert producers.settings is not None and producers.app is not None
        rec = App(
            msgspec.structs.replace(
                producers.settings,
                instance_id="reconcilers",
                nats=msgspec.structs.replace(
                    producers.settings.nats,
                    user="slurmbridge-reconciler",
                    password=passwords["reconciler"],
                ),
            ),
            only=reconcilers.ALL,
            with_health=False,
        )
        await rec.start()

        producers.cordon("n1")
        await producers.wait_for(
            lambda: producers.slurm_node("n1").has("DRAIN"), timeout=20, what="n1 drained"
        )
        await producers.wait_for(
            lambda: any(t[0] == wellknown.TAINT_MANAGED_NODE for t in producers.taints("n3")),
            timeout=20,
            what="managed nodes tainted",
        )

        assert rec.bus is not None and producers.app.bus is not None
        # Keys no component writes: a legitimate write on the subject meanwhile (n2's taint
        # observed) would otherwise read as a refused write that got stored.
        obs, act = "bridge.obs.k8s.KubeNode.n-none", "bridge.act.node_taint.KubeNode.n-none"
        dlq = "bridge.dlq.node_taint"
        # A reconciler cannot publish observations (nor feed another reconciler).
        assert await refused_publish(rec.bus, admin, streams.OBS_STREAM, obs, caplog)
        # A producer cannot write action records or dead letters.
        assert await refused_publish(producers.app.bus, admin, streams.ACT_STREAM, act, caplog)
        assert await refused_publish(producers.app.bus, admin, streams.DLQ_STREAM, dlq, caplog)
        # A reader writes nothing into the log, and reads all of it.
        assert await refused_publish(reader, admin, streams.OBS_STREAM, obs, caplog)
        assert await refused_publish(reader, admin, streams.ACT_STREAM, act, caplog)
        records = [r async for r in logread.read(reader, streams.ACT_STREAM, "bridge.act.>")]
        assert any(r.subject.startswith("bridge.act.slurm_drain.") for r in records)
        # Nobody but the administrator may change a stream or the lease bucket.
        for who in (rec.bus, producers.app.bus, reader):
            js = who.nc.jetstream(timeout=1.0)
            for stream in (streams.OBS_STREAM, f"KV_{BUCKET}"):
                with pytest.raises(nats.errors.TimeoutError):
                    await js.delete_stream(stream)
        assert (await admin.js.stream_info(streams.OBS_STREAM)).state.messages > 0
    finally:
        if rec is not None:
            await rec.stop()
        await producers.stop()
        await admin.close()
        await reader.close()


# --- the Slurm token -------------------------------------------------------------------------


def _ping_error(stack: Stack, cluster: str) -> str:
    assert stack.app is not None
    ping = stack.app.projection.get(SlurmPing, cluster, slurm_source(cluster))
    return ping.error if ping is not None else ""


async def test_the_slurm_token_never_leaks(caplog: pytest.LogCaptureFixture) -> None:
    """Good and bad tokens, in the token file and in Cluster Secrets, used and refused: none
    of them appears in any log record, Kubernetes object other than its Secret, metric, or
    message of any stream."""
    caplog.set_level(logging.DEBUG)
    other = SlurmSim(cluster="beta")
    other.seed_default(2)
    await other.start(versions=("v0.0.44",))
    try:
        async with Stack(nodes=2, poll_interval=0.2) as stack:
            app = stack.app
            assert app is not None and app.bus is not None
            good_file = stack.sims.token_file.read_text().strip()
            good_secret = other.mint_token()
            bad_file = mint_jwt(b"not-the-key", "slurmrest", now=0, lifetime=10**10)
            bad_secret = "bad-secret-" + secrets.token_hex(16)
            tokens = {
                "file": good_file,
                "secret": good_secret,
                "bad file": bad_file,
                "bad secret": bad_secret,
            }

            stack.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            stack.kube.create(secret("beta-token", bad_secret))
            stack.kube.create(cluster("beta", other.url, "beta-token"))
            stack.cordon("n1")
            await stack.wait_for(lambda: stack.slurm_node("n1").has("DRAIN"), what="drained")
            await stack.wait_for(lambda: bool(_ping_error(stack, "beta")), what="beta refused")
            # Rotate the Secret to a good token, and break the file's token for a while.
            stack.kube.patch(
                "secrets",
                "beta-token",
                {"data": {"auth-token": base64.b64encode(good_secret.encode()).decode()}},
                NS,
            )
            stack.sims.token_file.write_text(bad_file + "\n")
            await stack.wait_for(lambda: bool(_ping_error(stack, "default")), what="refused")
            await stack.wait_for(lambda: not _ping_error(stack, "beta"), what="beta rotated")
            stack.sims.token_file.write_text(good_file + "\n")
            await stack.wait_for(lambda: not _ping_error(stack, "default"), what="recovered")
            stack.uncordon("n1")
            await stack.wait_for(lambda: not stack.slurm_node("n1").has("DRAIN"), what="undrain")
            await stack.settled()

            places: dict[str, str] = {"logs": caplog.text}
            places["metrics"] = generate_latest(REGISTRY).decode()
            for spec in DEFAULT_RESOURCES:
                if spec.plural != "secrets":
                    places[f"kube {spec.plural}"] = msgspec.json.encode(
                        stack.kube.list(spec.plural)
                    ).decode(errors="replace")
            for stream in (*STREAMS, f"KV_{BUCKET}"):
                data = [r.data async for r in logread.read(app.bus, stream, ">")]
                places[f"stream {stream}"] = b"\n".join(data).decode(errors="replace")
            assert places["stream BRIDGE_OBS"] and "Unauthorized" in places["stream BRIDGE_OBS"]
            for name, token in tokens.items():
                signature = token.rsplit(".", 1)[-1]
                leaks = [where for where, text in places.items() if signature in text]
                assert not leaks, f"the {name} token appears in {leaks}"
    finally:
        await other.stop()
