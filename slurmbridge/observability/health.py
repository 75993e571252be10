"""``/metrics`` (Prometheus text) and ``/healthz`` + ``/readyz`` over aiohttp.

``/healthz`` answers 200 while the process runs its loops; ``/readyz`` answers 200 only when
every readiness check passes (connected to NATS, projection caught up, watches alive) and 503
with the failing checks' names otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

Check = Callable[[], bool]


class HealthServer:
    """Serves metrics and/or health on the given ports (0 = that endpoint is off)."""

    def __init__(self, *, bind: str, metrics_port: int, health_port: int) -> None:
        self.bind = bind
        self.metrics_port = metrics_port
        self.health_port = health_port
        self.checks: dict[str, Check] = {}
        self._runners: list[web.AppRunner] = []
        self.ports: dict[str, int] = {}

    def add_check(self, name: str, check: Check) -> None:
        """Register a readiness check."""
        self.checks[name] = check

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        failing = [name for name, check in self.checks.items() if not check()]
        if failing:
            return web.Response(status=503, text="not ready: " + ", ".join(sorted(failing)) + "\n")
        return web.Response(text="ready\n")

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
