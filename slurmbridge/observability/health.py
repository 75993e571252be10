"""``/metrics`` (Prometheus text) and ``/healthz`` + ``/readyz`` over aiohttp.

``/healthz`` answers 200 while the process runs its event loop (liveness); ``/readyz``
answers 200 only when every readiness check passes and 503 otherwise, with one line per
failing check saying why (``slurm: cluster "c1": token rejected (HTTP 401) for 12.0 s …``).
The checks themselves are the application's (:class:`slurmbridge.app.App` registers them;
docs/deploy.md lists them): each is a function of no arguments that reads state the process
already holds — no I/O, so a probe never waits on NATS, Kubernetes or Slurm — and returns
``None`` when its part is ready, else the reason (one line, never a secret).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

log = logging.getLogger(__name__)

#: A readiness check: ``None`` when ready, else why not (one line, no secrets, no I/O).
Check = Callable[[], str | None]


class Readiness:
    """Named readiness checks. Adding one is one line::

    readiness.add_check("jetstream", lambda: None if writable else "store refuses writes")
    """

    def __init__(self) -> None:
        self.checks: dict[str, Check] = {}

    def add_check(self, name: str, check: Check) -> None:
        """Register (or replace) the check ``name``."""
        self.checks[name] = check

    def failing(self) -> dict[str, str]:
        """The failing checks by name, with their reasons (empty: ready). A check that raises
        fails, with the exception as its reason (a bug must not read as "ready")."""
        out: dict[str, str] = {}
        for name, check in self.checks.items():
            try:
                reason = check()
            except Exception as exc:
                log.exception("readiness check %s raised", name)
                reason = f"check raised {exc!r}"
            if reason is not None:
                out[name] = reason or "not ready"
        return out

    def body(self) -> tuple[int, str]:
        """The ``/readyz`` answer: ``(200, "ready")`` or ``(503, "not ready: …")`` with a
        line per failing check."""
        failing = self.failing()
        if not failing:
            return 200, "ready\n"
        names = sorted(failing)
        lines = [f"not ready: {', '.join(names)}", *(f"{n}: {failing[n]}" for n in names)]
        return 503, "\n".join(lines) + "\n"


class HealthServer:
    """Serves metrics and/or health on the given ports (0 = that endpoint is off);
    ``/readyz`` answers from ``readiness`` (a new, empty one when not given)."""

    def __init__(
        self,
        *,
        bind: str,
        metrics_port: int,
        health_port: int,
        readiness: Readiness | None = None,
    ) -> None:
        self.bind = bind
        self.metrics_port = metrics_port
        self.health_port = health_port
        self.readiness = readiness or Readiness()
        self._runners: list[web.AppRunner] = []
        self.ports: dict[str, int] = {}

    def add_check(self, name: str, check: Check) -> None:
        """Register a readiness check (:class:`Readiness`)."""
        self.readiness.add_check(name, check)

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        status, text = self.readiness.body()
        return web.Response(status=status, text=text)

    async def start(self) -> None:
        """Bind the enabled endpoints (one port may serve both)."""
        routes: dict[int, list[web.RouteDef]] = {}
        if self.metrics_port:
            routes.setdefault(self.metrics_port, []).append(web.get("/metrics", self._metrics))
        if self.health_port:
            routes.setdefault(self.health_port, []).extend(
                [web.get("/healthz", self._healthz), web.get("/readyz", self._readyz)]
            )
        for port, defs in routes.items():
            app = web.Application()
            app.add_routes(defs)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, self.bind, port)
            await site.start()
            self._runners.append(runner)
            for d in defs:
                self.ports[d.path] = port

    async def stop(self) -> None:
        """Close the listeners."""
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
