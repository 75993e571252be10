"""The HTTP transport under :class:`~slurmbridge.slurm.client.SlurmClient`: httpx's API on
aiohttp's connection pool for reads, and on h11 over asyncio streams for writes.

Why: the Slurm client speaks httpx (its requests, responses and errors, and the tests'
``httpx.MockTransport``), but httpx's own transport (httpcore over anyio and h11) cost about
0.5–0.8 ms of CPU per request more than aiohttp on this machine (1.50–2.03 against
0.96–1.27 ms for a ``GET job/{id}`` through the whole client, ``bench/slurm_client.py``),
and at 50 pods/s the
Slurm requests were a third of the bridge's CPU (py-spy, ``bench/workload.py``). aiohttp is
already the Kubernetes client's transport (kubernetes-asyncio), so no new dependency.

What httpx's default transport did is kept: the TLS context is httpx's own
(:func:`httpx.create_ssl_context`: certifi, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``), the
client's timeouts apply per request (connect and read), and failures are raised
as httpx's transport errors, which the client maps to :class:`~slurmbridge.slurm.errors.
Unavailable`.

Writes do not go through aiohttp (see :meth:`AiohttpTransport.handle_async_request`), and no
longer through httpx's own transport either: httpcore's pool over anyio cost 1.6–3.9 ms of
CPU per submit (``bench/slurm_client.py``) and the writes were 9 % of the bridge's CPU at
200 pods/s for 0.48 writes per pod (py-spy, ``bench/workload.py``). :class:`H11Pool` reads
with h11 (httpx's and httpcore's own HTTP/1.1 parser, so an answer is read exactly as
before: the first of two, the rest dropped) on asyncio's streams, without anyio.

A proxy in the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``) is not this
transport's business: httpx's client mounts no proxy in front of a transport it is given, so
:class:`~slurmbridge.slurm.client.SlurmClient` then leaves this one out and lets httpx's
own transports go through the proxy (``NO_PROXY`` honoured), as before aiohttp was used.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time

import aiohttp
import h11
import httpx
from yarl import URL

#: Writes (every request but a GET) sent at once; the rest wait for a slot. Why: slurmctld
#: takes job writes one at a time under its job write lock, so more in flight only queue
#: there; and httpcore's pool, which sent them before :class:`H11Pool`, cost 4.6–4.9 ms of
#: CPU per submit in a burst of 64 against 1.5–1.9 ms four at a time (``bench/slurm_client.py``).
WRITES_IN_FLIGHT = 4

#: Bytes asked of the socket per read of an answer.
_READ_SIZE = 65536


class _Conn:
    """One HTTP/1.1 connection: its streams, its h11 state, when it was last left idle
    (monotonic seconds)."""

    __slots__ = ("h11", "idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(our_role=h11.CLIENT)
        self.idle_since = 0.0

    def usable(self, now: float, keepalive: float) -> bool:
        """Still fit for a request: not closed by the server (its EOF is seen by the loop
        while the connection sits idle), not idle longer than ``keepalive`` seconds."""
        return (
            now - self.idle_since < keepalive
            and not self.reader.at_eof()
            and not self.writer.is_closing()
        )

    def close(self) -> None:
        self.writer.close()


class H11Pool:
    """HTTP/1.1 requests with h11 on asyncio streams, over keep-alive connections per origin
    (at most ``max_idle`` idle ones kept, each for ``keepalive_expiry`` seconds).

    An answer is read as httpcore reads it, with the same parser: up to the end of the
    first response; a connection the server marked ``Connection: close`` (or that h11 cannot
    reuse) is closed, whatever came after on it dropped. A request is sent once: a failure
    is raised, never retried on another connection.
    """

    def __init__(self, *, max_idle: int, keepalive_expiry: float) -> None:
        self._max_idle = max_idle
        self._keepalive = keepalive_expiry
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._ssl: ssl.SSLContext | None = None

    async def send(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` (its body already read: httpx's ``content=``) and read its answer
        whole; ``request.extensions["timeout"]`` (httpx's, seconds) bounds the connect, the
        write and each read.

        Raises:
            httpx.ConnectTimeout / httpx.WriteTimeout / httpx.ReadTimeout: a timeout ran out.
            httpx.ConnectError: no connection (refused, unreachable, TLS).
            httpx.ReadError / httpx.WriteError: the connection failed or closed mid-request.
            httpx.RemoteProtocolError: the answer is not HTTP/1.1 h11 can read.
            httpx.LocalProtocolError: the request is not HTTP/1.1 h11 can send.
        """
        limits = request.extensions.get("timeout", {})
        url = request.url
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        conn = self._take(origin) or await self._connect(request, origin, limits.get("connect"))
        try:
            response = await self._exchange(conn, request, limits)
        except BaseException:
            conn.close()
            raise
        if conn.h11.our_state is h11.DONE and conn.h11.their_state is h11.DONE:
            conn.h11.start_next_cycle()
            self._put(origin, conn)
        else:
            conn.close()
        return response

    def _take(self, origin: tuple[str, str, int]) -> _Conn | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.usable(now, self._keepalive):
                return conn
            conn.close()
        return None

    def _put(self, origin: tuple[str, str, int], conn: _Conn) -> None:
        idle = self._idle.setdefault(origin, [])
        if len(idle) >= self._max_idle:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    async def _connect(
        self, request: httpx.Request, origin: tuple[str, str, int], timeout: float | None
    ) -> _Conn:
        scheme, host, port = origin
        context: ssl.SSLContext | None = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context()
            context = self._ssl
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=context, limit=_READ_SIZE
                )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout("connect timed out", request=request) from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        return _Conn(reader, writer)

    async def _exchange(
        self, conn: _Conn, request: httpx.Request, limits: dict[str, float | None]
    ) -> httpx.Response:
        body = request.content
        try:
            out = conn.h11.send(
                h11.Request(
                    method=request.method,
                    target=request.url.raw_path,
                    headers=request.headers.raw,
                )
            )
            if body:
                out += conn.h11.send(h11.Data(data=body))
            out += conn.h11.send(h11.EndOfMessage())
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc), request=request) from exc
        try:
            conn.writer.write(out)
            async with asyncio.timeout(limits.get("write")):
                await conn.writer.drain()
        except TimeoutError as exc:
            raise httpx.WriteTimeout("write timed out", request=request) from exc
        except OSError as exc:
            raise httpx.WriteError(str(exc) or type(exc).__name__, request=request) from exc
        head: h11.Response | None = None
        chunks: list[bytes] = []
        read_timeout = limits.get("read")
        while True:
            try:
                event = conn.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc), request=request) from exc
            if event is h11.NEED_DATA:
                try:
                    async with asyncio.timeout(read_timeout):
                        data = await conn.reader.read(_READ_SIZE)
                except TimeoutError as exc:
                    raise httpx.ReadTimeout("read timed out", request=request) from exc
                except OSError as exc:
                    raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
                conn.h11.receive_data(data)  # b"": the server closed; h11 says what it means
            elif isinstance(event, h11.Response):
                head = event
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                raise httpx.ReadError("server closed the connection mid-answer", request=request)
            # h11.InformationalResponse (1xx): the real answer follows.
        assert head is not None  # h11 gives the Response before any Data or EndOfMessage
        return httpx.Response(
            head.status_code,
            headers=head.headers.raw_items(),
            content=b"".join(chunks),
            request=request,
            extensions={"http_version": b"HTTP/" + head.http_version},
        )

    async def aclose(self) -> None:
        """Close every idle connection."""
        conns = [c for idle in self._idle.values() for c in idle]
        self._idle.clear()
        for conn in conns:
            conn.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                await conn.writer.wait_closed()


class _UnparsableError(Exception):
    """aiohttp refused an answer h11 reads (more data after a ``Connection: close`` one)."""


class AiohttpTransport(httpx.AsyncBaseTransport):
    """One aiohttp connection pool of at most ``max_connections`` connections (kept alive
    ``keepalive_expiry`` seconds when idle), created on the first request (it needs the
    running loop)."""

    def __init__(self, *, max_connections: int = 16, keepalive_expiry: float = 5.0) -> None:
        self._limit = max_connections
        self._keepalive = keepalive_expiry
        self._session: aiohttp.ClientSession | None = None
        #: At most :data:`WRITES_IN_FLIGHT` writes in flight at once.
        self._slots = asyncio.Semaphore(WRITES_IN_FLIGHT)
        #: The writes' connections (see handle_async_request)
        self._h11 = H11Pool(max_idle=max_connections, keepalive_expiry=keepalive_expiry)

    def _pool(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._limit,
                keepalive_timeout=self._keepalive,
                ssl=httpx.create_ssl_context(),
            )
            # The body is handed to httpx as it came (httpx decodes any Content-Encoding);
            # the environment's proxies are httpx's business, read once by its client.
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, trust_env=False
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; its ``timeout`` extension (httpx's per-request timeouts, seconds)
        bounds connecting and each read.

        Only GETs go through aiohttp; every other request, and a GET whose answer aiohttp
        cannot parse, through :class:`H11Pool`. Why: real slurmrestd answers a refused
        operation twice on one connection — its JSON error with ``Connection: Close``, then
        a second ``text/plain`` response (recorded from 26.05.5: a submit refused with 2002
        "Access/permission denied"). aiohttp (llhttp, and its Python parser alike) refuses
        the whole read ("Data after `Connection: close`") and loses the first answer; h11
        reads the first and drops the rest. A GET is read again safely; a submit, a cancel
        or an update is not sent twice. The hot path — job reads, ``jobs/state``, the polls —
        is GETs.

        Raises:
            httpx.ConnectTimeout / httpx.ReadTimeout: a timeout ran out.
            httpx.ConnectError: no connection (refused, unreachable, TLS).
            httpx.ReadError: the connection failed or closed mid-answer.
        """
        if request.method != "GET":
            return await self._by_h11(request)
        try:
            return await self._get(request)
        except _UnparsableError:
            return await self._by_h11(request)

    async def _by_h11(self, request: httpx.Request) -> httpx.Response:
        """``request`` through :class:`H11Pool`, holding one of :attr:`_slots`."""
        async with self._slots:
            return await self._h11.send(request)

    async def _get(self, request: httpx.Request) -> httpx.Response:
        limits = request.extensions.get("timeout", {})
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=limits.get("pool"),
            sock_connect=limits.get("connect"),
            sock_read=limits.get("read"),
        )
        # Credentials in the URL are httpx's to turn into a header (it has): aiohttp would
        # refuse a URL holding them beside an Authorization header.
        url = URL(
            f"{request.url.scheme}://{request.url.netloc.decode('ascii')}"
            f"{request.url.raw_path.decode('ascii')}",
            encoded=True,
        )
        headers = [
            (k, v)
            for k, v in request.headers.multi_items()
            if k.lower() not in ("host", "content-length", "transfer-encoding")
        ]
        body = request.content or None
        try:
            async with self._pool().request(
                request.method,
                url,
                headers=headers,
                data=body,
                timeout=timeout,
                allow_redirects=False,
            ) as resp:
                content = await resp.read()
                return httpx.Response(
                    resp.status,
                    headers=list(resp.raw_headers),
                    content=content,
                    request=request,
                )
        except (aiohttp.ConnectionTimeoutError, aiohttp.ServerTimeoutError) as exc:
            if isinstance(exc, aiohttp.ConnectionTimeoutError):
                raise httpx.ConnectTimeout(
                    str(exc) or "connect timed out", request=request
                ) from exc
            raise httpx.ReadTimeout(str(exc) or "read timed out", request=request) from exc
        except TimeoutError as exc:
            raise httpx.ReadTimeout("timed out", request=request) from exc
        except aiohttp.ClientResponseError as exc:
            if exc.status == 400 and "Data after" in exc.message:
                raise _UnparsableError from exc
            raise httpx.RemoteProtocolError(exc.message, request=request) from exc
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc

    async def aclose(self) -> None:
        await self._h11.aclose()
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
            # aiohttp's advice: let the transports' close callbacks run before the loop ends.
            await asyncio.sleep(0)
