"""``/readyz`` tells the truth: 503 naming each failing check and why until every watcher has
listed and every Slurm cluster answered a poll with its token accepted; 503 again, naming the
cluster and the rejection, once a token is rejected for more than three poll intervals; the
poller's warning about it is repeated with back-off; a standby is ready."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import logging
import re

import httpx
import msgspec
import pytest

from slurmbridge.app import App
from slurmbridge.devtools.testing import Stack
from slurmbridge.runtime.natsserver import free_port

NS = "slurm"
POLL = 0.2


async def readyz(port: int) -> tuple[int, str]:
    async with httpx.AsyncClient() as http:
        resp = await http.get(f"http://127.0.0.1:{port}/readyz")
        return resp.status_code, resp.text


def block_nodes_and_reject_the_token(stack: Stack) -> None:
    """Before the app starts: the node list fails, and the token file's token is refused."""
    stack.kube.fail_next(10**6, 500, verb="list", resource="nodes")
    stack.slurm.rotate_token()


def poller_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "producers.slurm.poller"
        and r.levelno == logging.WARNING
        and r.getMessage().startswith("poll of Slurm cluster default ")
    ]


async def test_readyz_names_what_is_not_ready_and_a_rejected_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    async with Stack(
        nodes=2, poll_interval=POLL, health_port=port, setup=block_nodes_and_reject_the_token
    ) as stack:
        # Started, but the nodes were never listed and no poll was answered.
        status, body = await readyz(port)
        assert status == 503, body
        assert body.startswith("not ready: slurm, watch\n"), body
        assert "\nwatch: nodes: not listed yet (failing for " in body, body
        assert '\nslurm: cluster "default": ' in body, body  # no answer yet, or the rejection

        # Kubernetes answers: every watcher has listed; the token is still refused.
        stack.kube.clear_faults()
        await stack.wait_for(
            lambda: stack.app is not None and "watch" not in stack.app.not_ready(),
            timeout=20,
            what="every watcher listed",
        )
        await stack.wait_for(
            lambda: (
                "token rejected" in (stack.app.not_ready() if stack.app else {}).get("slurm", "")
            ),
            timeout=10,
            what="the rejection polled",
        )
        status, body = await readyz(port)
        assert status == 503 and body.startswith("not ready: slurm\n"), body
        # Never answered with the token accepted: not ready at once, saying why.
        assert '\nslurm: cluster "default": token rejected (HTTP 511) for ' in body, body

        # A good token: ready.
        stack.slurm.write_token(stack.sims.token_file)
        await stack.wait_for(
            lambda: stack.app is not None and not stack.app.not_ready(),
            timeout=10,
            what="ready",
        )
        assert await readyz(port) == (200, "ready\n")

        # The token rejected again, for more than 3 poll intervals: 503 naming the cluster,
        # the rejection and how long; the warning is said again, less and less often.
        caplog.set_level(logging.WARNING, logger="producers.slurm.poller")
        caplog.clear()
        stack.slurm.rotate_token()
        await stack.wait_for(
            lambda: "slurm" in (stack.app.not_ready() if stack.app else {}),
            timeout=10,
            what="not ready after the rotation",
        )
        status, body = await readyz(port)
        assert status == 503, body
        assert re.search(
            r'^slurm: cluster "default": token rejected \(HTTP 511\) for [0-9.]+ s '
            r"\(Unauthorized: ",
            body,
            re.MULTILINE,
        ), body
        await stack.wait_for(
            lambda: len(poller_warnings(caplog)) >= 4, timeout=20, what="four warnings"
        )
        lines = poller_warnings(caplog)
        assert "failing (Unauthorized" in lines[0], lines
        assert all("still failing after " in line for line in lines[1:]), lines
        gaps = [float(re.search(r"said again in ([0-9.]+) s", m).group(1)) for m in lines]  # type: ignore[union-attr]
        assert gaps[0] == pytest.approx(3 * POLL)
        assert all(b > a for a, b in itertools.pairwise(gaps)), gaps

        # A good token again: ready, and one line says the outage is over.
        caplog.set_level(logging.INFO, logger="producers.slurm.poller")
        stack.slurm.write_token(stack.sims.token_file)
        await stack.wait_for(
            lambda: stack.app is not None and not stack.app.not_ready(), timeout=10, what="ready"
        )
        assert any(" recovered after " in r.getMessage() for r in caplog.records)


def _secret(name: str, token: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "data": {"auth-token": base64.b64encode(token.encode()).decode()},
    }


async def test_a_clusters_rejected_token_makes_the_poller_process_not_ready() -> None:
    async with Stack(nodes=2, poll_interval=POLL) as stack:
        app = stack.app
        assert app is not None and app.clusters is not None
        await stack.wait_for(lambda: not app.not_ready(), timeout=20, what="ready")
        stack.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        stack.kube.create(_secret("beta-token", "not-a-valid-token"))
        stack.kube.create(
            {
                "apiVersion": "slinky.slurm.net/v1alpha1",
                "kind": "Cluster",
                "metadata": {"name": "beta", "namespace": NS},
                "spec": {"server": stack.slurm.url, "token": {"secretRef": {"name": "beta-token"}}},
            }
        )
        await stack.wait_for(
            lambda: 'cluster "beta": token rejected' in app.not_ready().get("slurm", ""),
            timeout=20,
            what="beta's rejected token named",
        )
        assert 'cluster "default"' not in app.not_ready()["slurm"]
        assert "not-a-valid-token" not in app.not_ready()["slurm"]
        stack.kube.patch(
            "secrets",
            "beta-token",
            {"data": {"auth-token": base64.b64encode(stack.slurm.mint_token().encode()).decode()}},
            NS,
        )
        await stack.wait_for(lambda: not app.not_ready(), timeout=20, what="ready again")


async def test_a_standby_is_ready_while_its_own_parts_are() -> None:
    async with Stack(nodes=2, poll_interval=POLL) as stack:
        assert stack.settings is not None and stack.app is not None
        standby = App(
            msgspec.structs.replace(stack.settings, instance_id="standby"), with_health=False
        )
        await standby.start()
        try:
            assert standby.leases and not any(lease.held for lease in standby.leases.values())
            await stack.wait_for(lambda: not standby.not_ready(), timeout=20, what="ready")
            assert standby.watcher is None and standby.poller is None
        finally:
            await standby.stop()


async def test_readyz_says_starting_until_the_start_has_returned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Until :meth:`App.start` returns (a worker still creating its consumers), ``/readyz`` is
    503 with ``started: starting`` though every other check passes: a rollout that took that
    answer as ready could stop the process mid-start (it then exits as interrupted)."""
    held = asyncio.Event()
    start_workers = App._start_workers

    def one_more(self: App) -> list[asyncio.Event]:
        return [*start_workers(self), held]  # a worker whose start has not finished

    monkeypatch.setattr(App, "_start_workers", one_more)
    port = free_port()
    stack = Stack(nodes=2, poll_interval=POLL, health_port=port)
    starting = asyncio.create_task(stack.start())
    try:

        async def only_starting() -> bool:
            try:
                status, body = await readyz(port)
            except httpx.HTTPError:
                return False
            return status == 503 and body.startswith("not ready: started\n")

        async with asyncio.timeout(30):
            while not await only_starting():
                await asyncio.sleep(0.05)
        _status, body = await readyz(port)
        assert "\nstarted: starting" in body, body
        assert not starting.done()
        held.set()
        await asyncio.wait_for(starting, 30)
        async with asyncio.timeout(30):
            while (await readyz(port))[0] != 200:
                await asyncio.sleep(0.05)
    finally:
        held.set()
        with contextlib.suppress(Exception):
            await starting
        await stack.stop()
