"""The Slurm client's HTTP transport (:class:`slurmbridge.slurm.transport.AiohttpTransport`,
issue 30): what httpx's own transport did, it does — the request as sent (method, path,
repeated query parameters, headers, body, no credentials in the URL), the answer as received,
and each failure as the httpx error the client maps to ``Unavailable``."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from slurmbridge.slurm import errors as slurm_errors
from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.transport import AiohttpTransport

pytestmark = pytest.mark.integration


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[web.Request], list[bytes]]]:
    seen: list[web.Request] = []
    bodies: list[bytes] = []
    stall = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(request)
        bodies.append(await request.read())
        if request.path.startswith("/slow"):
            await stall.wait()
        if request.path == "/drop":
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        return web.Response(
            status=201, body=b'{"ok": true}', headers={"X-Answer": "a", "Set-Cookie": "c=1"}
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", seen, bodies
    finally:
        stall.set()
        await runner.cleanup()


async def test_a_request_goes_out_and_its_answer_comes_back_as_sent(
    server: tuple[str, list[web.Request], list[bytes]],
) -> None:
    url, seen, bodies = server
    user_url = url.replace("http://", "http://bridge:s3cret@")
    async with httpx.AsyncClient(base_url=user_url, transport=AiohttpTransport()) as client:
        resp = await client.post(
            "/slurm/v0.0.44/jobs/state/",
            params={"job_id": ["1", "2"]},
            content=b'{"a": 1}',
            headers={"X-SLURM-USER-TOKEN": "t", "Content-Type": "application/json"},
        )
    assert resp.status_code == 201 and resp.json() == {"ok": True}
    assert resp.headers["X-Answer"] == "a"
    (req,) = seen
    assert req.method == "POST" and req.path == "/slurm/v0.0.44/jobs/state/"
    assert req.query.getall("job_id") == ["1", "2"]
    assert req.headers["X-SLURM-USER-TOKEN"] == "t"
    # httpx made the URL's credentials a header; the URL sent holds none.
    assert req.headers["Authorization"].startswith("Basic ") and "@" not in str(req.url)
    assert bodies == [b'{"a": 1}']


async def test_failures_are_the_httpx_errors_the_client_maps_to_unavailable(
    server: tuple[str, list[web.Request], list[bytes]], tmp_path: Path
) -> None:
    url, _, _ = server
    timeout = httpx.Timeout(0.3)
    async with httpx.AsyncClient(base_url=url, transport=AiohttpTransport(), timeout=timeout) as c:
        with pytest.raises(httpx.ReadTimeout):
            await c.get("/slow")
        with pytest.raises(httpx.ReadError):
            await c.get("/drop")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    async with httpx.AsyncClient(transport=AiohttpTransport()) as c:
        with pytest.raises(httpx.ConnectError):
            await c.get(f"http://127.0.0.1:{closed}/")
    # Through the Slurm client: each is Unavailable, naming no request object.
    token = tmp_path / "jwt"
    token.write_text("t")
    for target, words in ((url, "timed out"), (f"http://127.0.0.1:{closed}", "cannot reach")):
        async with SlurmClient(target, token, api_version="v0.0.44", timeout=0.3) as client:
            client._http.base_url = httpx.URL(target + ("/slow" if target == url else ""))
            with pytest.raises(slurm_errors.Unavailable, match=words):
                await client.ping()
