"""Nobody rewrites the streams by accident, against real nats-servers: ``slurmbridge streams``
only shows them (and how they differ from the settings), ``streams --apply`` creates and
updates them printing each change, and ``run``'s start-up (:meth:`Bus.ensure_streams`, what
:meth:`App.start` calls) creates the missing ones but never changes an existing one — not its
retention, not its replicas — and warns naming the difference."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator

import pytest
from nats.js.errors import BucketNotFoundError, NotFoundError

from schemas import streams
from slurmbridge import config
from slurmbridge.cli import run as runner
from slurmbridge.config import NatsSettings, Settings
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.leases import BUCKET
from slurmbridge.runtime.natsserver import NatsCluster, NatsServer

#: What an administrator chose for BRIDGE_OBS: one hour, and more history per object than the
#: defaults (7 days, 32 messages) — and a total cap slurmbridge's specs do not set.
ADMIN_MAX_AGE = 3600.0
ADMIN_PER_SUBJECT = 100
ADMIN_MAX_MSGS = 100_000
DEFAULT_MAX_AGE = 7 * streams.DAY


def settings_for(url: str, **nats: object) -> Settings:
    return config.load(env={}, overrides={"nats": {"url": url, **nats}})


@pytest.fixture
async def bus(nats_server: NatsServer) -> AsyncIterator[busmod.Bus]:
    b = await busmod.connect(NatsSettings(), nats_server.url)
    yield b
    await b.close()


async def make_admins_obs_stream(bus: busmod.Bus) -> None:
    """BRIDGE_OBS as an administrator made it (the other streams and the bucket missing),
    holding one observation."""
    (obs, *_) = streams.stream_specs()
    cfg = dataclasses.replace(
        busmod.stream_config(obs),
        max_age=ADMIN_MAX_AGE,
        max_msgs_per_subject=ADMIN_PER_SUBJECT,
        max_msgs=ADMIN_MAX_MSGS,
    )
    await bus.js.add_stream(cfg)
    await bus.publish("bridge.obs.k8s.KubeNode.n1", b"{}")


async def missing(bus: busmod.Bus, name: str) -> bool:
    try:
        await bus.js.stream_info(name)
    except NotFoundError:
        return True
    return False


async def test_streams_changes_nothing_and_names_the_differences(
    bus: busmod.Bus, nats_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    await make_admins_obs_stream(bus)

    assert await runner.streams_cmd(settings_for(nats_server.url)) == 0
    out = capsys.readouterr().out

    cfg = (await bus.js.stream_info(streams.OBS_STREAM)).config
    assert (cfg.max_age, cfg.max_msgs_per_subject, cfg.max_msgs) == (
        ADMIN_MAX_AGE,
        ADMIN_PER_SUBJECT,
        ADMIN_MAX_MSGS,
    )
    assert await missing(bus, streams.ACT_STREAM) and await missing(bus, streams.DLQ_STREAM)
    with pytest.raises(BucketNotFoundError):
        await bus.js.key_value(BUCKET)
    assert "messages=1 " in out and "replicas=1" in out
    assert f"differs: max_age 3600 s (settings: {DEFAULT_MAX_AGE:g} s)" in out
    assert "differs: max_msgs_per_subject 100 (settings: 32)" in out
    assert f"{streams.ACT_STREAM:<11} missing (slurmbridge streams --apply creates it)" in out
    assert f"KV {BUCKET}" in out and "missing" in out.split(f"KV {BUCKET}")[1]
    assert "created" not in out and "updated" not in out


async def test_streams_apply_prints_each_change_and_changes_only_those(
    bus: busmod.Bus, nats_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    await make_admins_obs_stream(bus)
    settings = settings_for(nats_server.url)

    assert await runner.streams_cmd(settings, apply=True) == 0
    lines = capsys.readouterr().out.splitlines()

    assert f"created stream {streams.ACT_STREAM}" in lines
    assert f"created stream {streams.DLQ_STREAM}" in lines
    assert f"created key-value bucket {BUCKET}" in lines
    obs = streams.OBS_STREAM
    assert f"updated stream {obs}: max_age 3600 s → {DEFAULT_MAX_AGE:g} s" in lines
    assert f"updated stream {obs}: max_msgs_per_subject 100 → 32 (lowers)" in lines
    assert [ln for ln in lines if ln.startswith("updated")] == [
        f"updated stream {obs}: max_msgs_per_subject 100 → 32 (lowers)",
        f"updated stream {obs}: max_age 3600 s → {DEFAULT_MAX_AGE:g} s",
    ]
    info = await bus.js.stream_info(obs)
    assert (info.config.max_age, info.config.max_msgs_per_subject) == (DEFAULT_MAX_AGE, 32)
    assert info.config.max_msgs == ADMIN_MAX_MSGS  # not in the spec: the administrator's stays
    assert info.state.messages == 1
    assert not await missing(bus, streams.ACT_STREAM)
    await bus.js.key_value(BUCKET)

    # As specified now: another --apply has nothing to change.
    assert await runner.streams_cmd(settings, apply=True) == 0
    out = capsys.readouterr().out
    assert "created" not in out and "updated" not in out and "differs" not in out


async def test_run_creates_missing_streams_but_never_changes_an_existing_one(
    bus: busmod.Bus, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="slurmbridge.runtime.bus")
    await make_admins_obs_stream(bus)
    specs = streams.stream_specs()  # run's defaults: 7 days, 32 per subject, 1 replica

    plans = await bus.ensure_streams(specs)

    cfg = (await bus.js.stream_info(streams.OBS_STREAM)).config
    assert (cfg.max_age, cfg.max_msgs_per_subject) == (ADMIN_MAX_AGE, ADMIN_PER_SUBJECT)
    for spec in specs[1:]:
        info = await bus.js.stream_info(spec.name)
        assert busmod.stream_differences(info.config, busmod.stream_config(spec)) == []
    assert [p.spec.name for p in plans if p.info is None] == [
        streams.ACT_STREAM,
        streams.DLQ_STREAM,
    ]
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"stream {streams.OBS_STREAM} differs" in warning
    assert "max_msgs_per_subject 100 (settings: 32)" in warning
    assert f"max_age 3600 s (settings: {DEFAULT_MAX_AGE:g} s)" in warning
    assert "slurmbridge streams --apply" in warning
    # A second start finds them all and creates nothing.
    caplog.clear()
    await bus.ensure_streams(specs)
    assert not [r for r in caplog.records if r.getMessage().startswith("created")]


@pytest.fixture
async def cluster() -> AsyncIterator[NatsCluster]:
    c = NatsCluster()
    await c.start()
    yield c
    await c.stop()
    c.cleanup()


async def test_replicas_made_by_an_administrator_are_never_lowered(
    cluster: NatsCluster, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Streams with 3 replicas, then processes started with the defaults (1 replica)."""
    assert await runner.streams_cmd(settings_for(cluster.url, replicas=3), apply=True) == 0
    capsys.readouterr()
    caplog.set_level(logging.WARNING, logger="slurmbridge.runtime.bus")
    b = await busmod.connect(NatsSettings(), cluster.url)
    try:
        await b.ensure_streams(streams.stream_specs(replicas=1))
        assert await runner.streams_cmd(settings_for(cluster.url)) == 0
        for name in (streams.OBS_STREAM, streams.ACT_STREAM, streams.DLQ_STREAM):
            assert (await b.js.stream_info(name)).config.num_replicas == 3
    finally:
        await b.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([w for w in warnings if "num_replicas 3 (settings: 1)" in w]) == 3
    out = capsys.readouterr().out
    assert out.count("replicas=3") == 3 and "replicas=1" not in out
    assert out.count("differs: num_replicas 3 (settings: 1)") == 3


async def test_a_change_the_server_refuses_is_one_line_naming_it(
    bus: busmod.Bus, nats_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """3 replicas asked of one nats-server: the server's reason, not a traceback."""
    await make_admins_obs_stream(bus)
    assert await runner.streams_cmd(settings_for(nats_server.url, replicas=3), apply=True) == 1
    err = capsys.readouterr().err
    assert f"could not update stream {streams.OBS_STREAM} (" in err and "num_replicas" in err
    assert "JetStream refused it: " in err and "Traceback" not in err
    cfg = (await bus.js.stream_info(streams.OBS_STREAM)).config
    assert (cfg.num_replicas, cfg.max_age) == (1, ADMIN_MAX_AGE)


async def test_the_consumer_an_older_release_left_is_named_and_deleted_by_apply(
    bus: busmod.Bus, nats_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each trigger kind of a reconciler has its own consumer (``rc-<name>-<Kind>``); the one
    ``rc-<name>`` consumer of an older release, on ``bridge.obs.>``, is read by no worker:
    ``streams`` names it, ``--apply`` deletes it and leaves the others."""
    await bus.ensure_streams(streams.stream_specs())
    for name in ("placement", "workload-p1of2", "placement-KubePod"):  # durable rc-<name>
        await bus.ensure_consumer(streams.consumer_spec(name, ("bridge.obs.>",)))
    settings = settings_for(nats_server.url)

    assert await runner.streams_cmd(settings) == 0
    out = capsys.readouterr().out
    retired = [ln for ln in out.splitlines() if "retired" in ln]
    assert [ln.split()[1] for ln in retired] == ["rc-placement", "rc-workload-p1of2"]

    assert await runner.streams_cmd(settings, apply=True) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln for ln in lines if ln.startswith("deleted")] == [
        "deleted consumer rc-placement (an older release's; no worker reads it)",
        "deleted consumer rc-workload-p1of2 (an older release's; no worker reads it)",
    ]
    left = sorted(ci.name for ci in await bus.js.consumers_info(streams.OBS_STREAM))
    assert left == ["rc-placement-KubePod"]


async def test_a_trigger_held_longer_than_a_second_is_not_delivered_again_before_ack_wait(
    bus: busmod.Bus,
) -> None:
    """The consumer an older release made (AckWait 30 s with BackOff 1, 2, 5 … s) is updated
    at start-up: nats-server had replaced its AckWait by the first BackOff entry, so every
    trigger still queued behind a busy key after 1 s was delivered again (issue 30: 40 % of
    placement's deliveries at 200 pods/s). Now the server keeps a delivery for ack_wait."""
    await bus.ensure_streams(streams.stream_specs())
    spec = streams.consumer_spec("placement-KubePod", ("bridge.obs.*.KubePod.*",), ack_wait_s=4.0)
    old = dataclasses.replace(
        busmod.consumer_config(spec), ack_wait=30.0, backoff=[1.0, 2.0, 5.0, 10.0, 30.0]
    )
    info = await bus.js.add_consumer(streams.OBS_STREAM, old)
    assert info.config.ack_wait == 1.0  # what the server made of it

    info = await bus.ensure_consumer(spec)
    assert (info.config.ack_wait, info.config.backoff) == (4.0, None)

    await bus.publish("bridge.obs.k8s.KubePod.default~p", b"{}")
    sub = await bus.js.pull_subscribe_bind(spec.durable, spec.stream)
    (msg,) = await sub.fetch(1, timeout=5)
    assert msg.metadata.num_delivered == 1
    # Held for 2.5 s — more than the old first wait, less than ack_wait — it is not sent
    # again: nothing is pending redelivery and a fetch finds nothing.
    with pytest.raises(TimeoutError):
        await sub.fetch(1, timeout=2.5)
    ci = await bus.js.consumer_info(spec.stream, spec.durable)
    assert (ci.num_redelivered, ci.num_ack_pending) == (0, 1)
    # Past ack_wait it is (a worker that died without acknowledging).
    (again,) = await sub.fetch(1, timeout=5)
    assert again.metadata.num_delivered == 2
    await again.ack()
    await sub.unsubscribe()
