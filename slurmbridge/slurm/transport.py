"""The HTTP transport under :class:`~slurmbridge.slurm.client.SlurmClient`: httpx's API on
aiohttp's connection pool for reads.

Why: the Slurm client speaks httpx (its requests, responses and errors, and the tests'
``httpx.MockTransport``), but httpx's own transport (httpcore over anyio and h11) cost about
0.5–0.8 ms of CPU per request more than aiohttp on this machine (1.50–2.03 against
0.96–1.27 ms for a ``GET job/{id}`` through the whole client, ``bench/slurm_client.py``),
and at 50 pods/s the
Slurm requests were a third of the bridge's CPU (py-spy, ``bench/workload.py``). aiohttp is
already the Kubernetes client's transport (kubernetes-asyncio), so no new dependency.

What httpx's default transport did is kept: the TLS context is httpx's own
(:func:`httpx.create_ssl_context`: certifi, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``), the
client's timeouts apply per request (connect and read), proxies from the environment are
still httpx's (it mounts its proxy transports in front of this one), and failures are raised
as httpx's transport errors, which the client maps to :class:`~slurmbridge.slurm.errors.
Unavailable`.
"""

from __future__ import annotations

import asyncio

import aiohttp
import httpx
from yarl import URL

#: Requests in httpx's own transport at once (the writes). Why: httpcore's pool checks every
#: connection against every waiting request each time one is sent or done (``is_idle``,
#: ``has_expired``, which asks anyio for the socket's attributes), so a burst of 64 submits
#: cost 4.6–4.9 ms of CPU each against 2.2–2.3 ms one at a time; four at a time, 1.5–1.9 ms,
#: and the burst was done sooner (``bench/slurm_client.py``). slurmctld takes job writes one
#: at a time under its job write lock anyway.
WRITES_IN_FLIGHT = 4


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
        #: At most :data:`WRITES_IN_FLIGHT` requests inside httpx's transport at once.
        self._slots = asyncio.Semaphore(WRITES_IN_FLIGHT)
        #: httpx's own transport, for every request but a GET (see handle_async_request)
        self._httpcore = httpx.AsyncHTTPTransport(
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
                keepalive_expiry=keepalive_expiry,
            )
        )

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
        cannot parse, through httpx's own transport. Why: real slurmrestd answers a refused
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
            return await self._by_httpcore(request)
        try:
            return await self._get(request)
        except _UnparsableError:
            return await self._by_httpcore(request)

    async def _by_httpcore(self, request: httpx.Request) -> httpx.Response:
        """``request`` through httpx's own transport, its answer read whole while holding
        one of :attr:`_slots` (so the connection is free again when the slot is)."""
        async with self._slots:
            response = await self._httpcore.handle_async_request(request)
            try:
                content = await response.aread()
            finally:
                await response.aclose()
            return httpx.Response(
                response.status_code,
                headers=response.headers.raw,
                content=content,
                request=request,
                extensions=response.extensions,
            )

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
        await self._httpcore.aclose()
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
            # aiohttp's advice: let the transports' close callbacks run before the loop ends.
            await asyncio.sleep(0)
