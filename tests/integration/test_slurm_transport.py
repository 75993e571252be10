"""The Slurm client's HTTP transport (:class:`slurmbridge.slurm.transport.AiohttpTransport`,
issue 30; writes through :class:`slurmbridge.slurm.transport.H11Pool`): what httpx's own
transport did, it does — the request as sent (method, path, repeated query parameters,
headers, body, no credentials in the URL), the answer as received, connections kept alive
and never reused once closed, and each failure as the httpx error the client maps to
``Unavailable``."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from slurmbridge.slurm import errors as slurm_errors
from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.transport import WRITES_IN_FLIGHT, AiohttpTransport

pytestmark = pytest.mark.integration

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _serve(handler: Handler) -> tuple[str, web.AppRunner]:
    """An aiohttp server on a free loopback port answering every path with ``handler``."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return f"http://127.0.0.1:{runner.addresses[0][1]}", runner


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One HTTP/1.1 request off ``reader``, as a raw server reads it: (head, body by its
    ``Content-Length``, empty without one)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    return head, await reader.readexactly(length)


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

    url, runner = await _serve(handler)
    try:
        yield url, seen, bodies
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
        # A write is read by H11Pool: the same errors.
        with pytest.raises(httpx.ReadTimeout):
            await c.post("/slow", content=b"{}")
        with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
            await c.post("/drop", content=b"{}")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    async with httpx.AsyncClient(transport=AiohttpTransport()) as c:
        with pytest.raises(httpx.ConnectError):
            await c.get(f"http://127.0.0.1:{closed}/")
        with pytest.raises(httpx.ConnectError):
            await c.delete(f"http://127.0.0.1:{closed}/slurm/v0.0.44/job/1")
    # Through the Slurm client: each is Unavailable, naming no request object.
    token = tmp_path / "jwt"
    token.write_text("t")
    for target, words in ((url, "timed out"), (f"http://127.0.0.1:{closed}", "cannot reach")):
        base = target + ("/slow" if target == url else "")
        async with SlurmClient(base, token, api_version="v0.0.44", timeout=0.3) as client:
            with pytest.raises(slurm_errors.Unavailable, match=words):
                await client.ping()


async def test_an_answer_followed_by_a_second_one_is_read_as_h11_reads_it() -> None:
    """Real slurmrestd 26.05.5 answers a refused submit twice on one connection (its JSON
    error with ``Connection: Close``, then a ``text/plain`` one); aiohttp refuses such a
    read, so a GET is read again through ``H11Pool`` and any other request goes there at
    once: the first answer comes back either way, and the POST is sent once."""
    body = b'{"errors": [{"error_number": 2002, "error": "Access\\/permission denied"}]}'
    answer = (
        b"HTTP/1.1 422 UNPROCESSABLE CONTENT\r\nConnection: Close\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\nContent-Type: application/json\r\n\r\n"
        + body
        + b"HTTP/1.1 422 UNPROCESSABLE CONTENT\r\nConnection: Close\r\nContent-Length: 24\r\n"
        b"Content-Type: text/plain\r\n\r\nAccess/permission denied"
    )
    methods: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head, _ = await _read_request(reader)
        methods.append(head.split(b" ", 1)[0])
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", transport=AiohttpTransport()
        ) as client:
            got = await client.get("/slurm/v0.0.45/job/7")
            assert (got.status_code, got.json()["errors"][0]["error_number"]) == (422, 2002)
            sent = await client.post("/slurm/v0.0.45/job/submit", content=b"{}")
            assert (sent.status_code, sent.json()["errors"][0]["error_number"]) == (422, 2002)
    finally:
        server.close()
        await server.wait_closed()
    assert methods == [b"GET", b"GET", b"POST"]  # the GET read twice, the POST sent once


async def test_writes_go_out_a_few_at_a_time() -> None:
    """A burst of writes (a placement burst's submits) reaches slurmrestd at most
    ``WRITES_IN_FLIGHT`` at once (slurmctld takes job writes one at a time anyway) and every
    one is answered; GETs are not held back."""
    inside = {"GET": 0, "POST": 0}
    most = {"GET": 0, "POST": 0}
    go = asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        inside[request.method] += 1
        most[request.method] = max(most[request.method], inside[request.method])
        await request.read()
        await go.wait()
        inside[request.method] -= 1
        return web.Response(status=200, body=b"{}")

    url, runner = await _serve(handler)
    try:
        async with httpx.AsyncClient(base_url=url, transport=AiohttpTransport()) as client:
            calls = [client.post("/submit", content=b"{}") for _ in range(12)]
            calls += [client.get("/job") for _ in range(6)]
            tasks = [asyncio.create_task(c) for c in calls]
            async with asyncio.timeout(10):
                while inside["POST"] < WRITES_IN_FLIGHT or inside["GET"] < 6:
                    await asyncio.sleep(0.01)
            # Were a fifth write let through, it would be in by now.
            await asyncio.sleep(0.2)
            assert most == {"GET": 6, "POST": WRITES_IN_FLIGHT}
            go.set()
            answers = await asyncio.gather(*tasks)
        assert [a.status_code for a in answers] == [200] * 18
        assert most["POST"] == WRITES_IN_FLIGHT
    finally:
        await runner.cleanup()


async def test_writes_reuse_a_kept_alive_connection_and_never_one_the_server_closed() -> None:
    """Sequential writes share one connection; a connection the server closed while it sat
    idle (slurmrestd's keep-alive timeout, a restart) is not used again: the next write
    opens a new one and is sent once."""
    peers: list[tuple[str, int]] = []
    requests: list[bytes] = []
    close_after: set[int] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer.get_extra_info("peername"))
        while True:
            try:
                _, body = await _read_request(reader)
            except asyncio.IncompleteReadError:
                break
            requests.append(body)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()
            if len(requests) in close_after:
                break
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        transport = AiohttpTransport()
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", transport=transport
        ) as client:
            for n in range(3):
                got = await client.post("/slurm/v0.0.45/job/submit", content=b'{"n": %d}' % n)
                assert got.status_code == 200 and got.json() == {}
            assert len(peers) == 1  # kept alive
            close_after.add(4)
            await client.delete("/slurm/v0.0.45/job/1")
            # The server has closed it: wait until this side has seen the EOF.
            idle = [c for conns in transport._h11._idle.values() for c in conns]
            async with asyncio.timeout(10):
                while not all(c.reader.at_eof() for c in idle):
                    await asyncio.sleep(0.01)
            got = await client.post("/slurm/v0.0.45/job/submit", content=b'{"n": 9}')
            assert got.status_code == 200
    finally:
        server.close()
        await server.wait_closed()
    assert len(peers) == 2  # a new connection for the write after the close
    assert requests == [b'{"n": 0}', b'{"n": 1}', b'{"n": 2}', b"", b'{"n": 9}']  # each once


async def test_the_slurm_client_sends_what_httpx_s_client_sent_and_honours_a_proxy(
    server: tuple[str, list[web.Request], list[bytes]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a proxy in the environment the client hands its requests to the transport
    itself (httpx's client only cost CPU there): the same method, path, query, headers
    (httpx's defaults, ``Accept``, the token) and body go out. With ``HTTP_PROXY`` set, the
    request goes to the proxy, as httpx's client sends it."""
    url, seen, bodies = server
    token = tmp_path / "jwt"
    token.write_text("t0k")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    async with SlurmClient(url + "/prefix/", token, api_version="v0.0.44") as client:
        got = await client._send("GET", "/slurm/x", operation="t", params={"job_id": ["1", "2"]})
        sent = await client._send("POST", "slurm/y", operation="t", content=b'{"a": 1}')
    assert (got.status_code, got.json(), sent.status_code) == (201, {"ok": True}, 201)
    get, post = seen
    assert (get.method, get.path, get.query.getall("job_id")) == (
        "GET",
        "/prefix/slurm/x",
        ["1", "2"],
    )
    assert (post.method, post.path, bodies[1]) == ("POST", "/prefix/slurm/y", b'{"a": 1}')
    for req in (get, post):
        assert req.headers["Accept"] == "application/json"
        assert req.headers["X-SLURM-USER-TOKEN"] == "t0k"
        assert req.headers["User-Agent"].startswith("python-httpx/")
    assert post.headers["Content-Type"] == "application/json"

    # A proxy: an aiohttp server that answers whatever reaches it.
    via: list[str] = []

    async def proxy(request: web.Request) -> web.Response:
        via.append(str(request.url))
        return web.Response(status=200, body=b"{}")

    proxy_url, runner = await _serve(proxy)
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        async with SlurmClient("http://slurmrestd.invalid:6820", token) as client:
            resp = await client._send("GET", "/slurm/v0.0.44/ping", operation="t")
    finally:
        await runner.cleanup()
    assert resp.status_code == 200
    assert via == ["http://slurmrestd.invalid:6820/slurm/v0.0.44/ping"]
