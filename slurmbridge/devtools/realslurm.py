"""A real Slurm 22.05 cluster on loopback: the ``real_slurm`` test tier and a hand-run sandbox.

Debian 12 ships Slurm 22.05 (REST API v0.0.38). This module installs it (:func:`install`) and
brings up a private, throw-away cluster in one directory (:class:`RealSlurm`): its own munged
and key, a JWT key, a ``slurm.conf`` with nodes ``n1..nN`` on 127.0.0.1 (2 CPUs and 1000 MiB
each, forced with ``SlurmdParameters=config_overrides``), partitions ``batch`` (every node,
the default) and ``gpu`` (``n1``-``n2``), slurmctld, one slurmd per node, and slurmrestd on
``127.0.0.1`` with JWT authentication. It is used by ``tests/real_slurm/conftest.py`` (one
cluster per pytest session) and by people who want a real slurmrestd for
``slurmbridge run --slurm-url ... --slurm-token-file ...``::

    python -m slurmbridge.devtools.realslurm install        # root, Debian: apt-get only if needed
    python -m slurmbridge.devtools.realslurm up /tmp/slurm  # writes /tmp/slurm/slurm.env
    python -m slurmbridge.devtools.realslurm down /tmp/slurm

Choices that are not obvious:

* Every daemon runs in the foreground (``-D`` / ``-F``) as a child of ours in its own session,
  so a start-up failure is seen at once (the child exits, and its log tail goes into the
  error), Ctrl-C in a terminal does not hit the daemons, and an in-process :meth:`RealSlurm.stop`
  reaps them. Each writes a pid file; ``down DIR`` from another process stops them by those
  files, checking that the pid still runs a command line naming ``DIR`` (never by name).
* Ports are picked at random below the kernel's ephemeral range and checked free, so two
  clusters (two sessions, or a person's and a test run's) can share one machine and a port is
  not taken meanwhile by an outgoing connection.
* Every wait polls a condition every 10 ms with a deadline (munge socket, TCP accept,
  ``sinfo`` node states); there is no fixed sleep. Bring-up takes about 0.1 s for 4 nodes
  on the project's machines (2 cores), stop about 0.15 s.
* ``SLURM_JWT`` is removed from every client environment: in a root shell it would make
  ``scontrol`` authenticate as the REST user. The token is exposed as :attr:`RealSlurm.token`
  and in a 0600 file (:attr:`RealSlurm.token_file`), never exported as ``SLURM_JWT``.
* slurmrestd refuses to run as root, so it drops to the system user ``slurmrest`` (created if
  missing); that user must reach ``slurm.conf`` and the munge socket, hence the 0755
  directories and the check that every parent of the work directory is searchable.

What the REST API of this cluster (v0.0.38) really does, including where it departs from
its own OpenAPI document, is pinned by ``tests/real_slurm/test_realslurm_helper.py``: send
both ``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN`` (either alone is 401); node updates
are 405 (drain with :meth:`RealSlurm.admin_drain`); ``/nodes?update_time=`` answers 500
when nodes changed but partitions did not (a 22.05 bug); errors carry ``errno`` on
nodes/partitions and ``error_number`` on jobs.
"""

from __future__ import annotations

import abc
import argparse
import contextlib
import json
import os
import random
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, Literal, Self

__all__ = [
    "BINARIES",
    "OPENAPI_PLUGINS",
    "PACKAGES",
    "REST_USER",
    "DaemonError",
    "NotInstalledError",
    "RealSlurm",
    "RealSlurmError",
    "SlurmRig",
    "find_binary",
    "install",
    "main",
    "missing_binaries",
    "submit_body",
]

PACKAGES: Final[tuple[str, ...]] = ("slurmctld", "slurmd", "slurmrestd", "munge", "slurm-client")
"""The Debian packages :func:`install` installs."""

BINARIES: Final[Mapping[str, str]] = {
    "munged": "munge",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "slurmrestd": "slurmrestd",
    "scontrol": "slurm-client",
    "sinfo": "slurm-client",
    "squeue": "slurm-client",
    "scancel": "slurm-client",
}
"""Every program the cluster needs, mapped to the Debian package that ships it."""

REST_USER: Final = "slurmrest"
"""The system user slurmrestd drops to (it refuses root) and the token's user name."""

OPENAPI_PLUGINS: Final = "openapi/v0.0.37,openapi/v0.0.38"
"""slurmrestd ``-s``: without it slurmrestd also loads the accounting plugin and exits."""

INSTALL_HINT: Final = (
    "run '.ci/install-real-slurm.sh' or 'python -m slurmbridge.devtools.realslurm install' as root"
)

# sbin is not on every PATH (sudo, cron), and the daemons live there.
_EXTRA_PATH: Final = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_STATE_FILE: Final = "realslurm.json"
_LOG_TAIL_LINES: Final = 25
_POLL: Final = 0.01  # seconds between checks of a condition


class RealSlurmError(RuntimeError):
    """The real Slurm cluster could not be installed, started, queried or stopped."""


class NotInstalledError(RealSlurmError):
    """Slurm or munge binaries are missing (the message names them and how to install)."""


class DaemonError(RealSlurmError):
    """A daemon exited or did not become ready; the message carries the tail of its logs."""


# --------------------------------------------------------------------------- installation


def _search_path(path: str | None = None) -> str:
    """``path`` (default: ``$PATH``) followed by the sbin/bin folders it lacks."""
    value = os.environ.get("PATH", "") if path is None else path
    parts = [p for p in value.split(os.pathsep) if p]
    return os.pathsep.join(parts + [p for p in _EXTRA_PATH if p not in parts])


def find_binary(name: str) -> str | None:
    """The absolute path of program ``name`` (``PATH`` first, then the sbin/bin folders)."""
    return shutil.which(name, path=_search_path())


def missing_binaries() -> list[str]:
    """The names in :data:`BINARIES` that cannot be found, in a stable order (empty = ready)."""
    return [name for name in BINARIES if find_binary(name) is None]


def _require_binaries() -> dict[str, str]:
    missing = missing_binaries()
    if missing:
        packages = sorted({BINARIES[name] for name in missing})
        raise NotInstalledError(
            f"real Slurm is not installed: missing {', '.join(missing)} "
            f"(Debian packages {' '.join(packages)}); {INSTALL_HINT}"
        )
    return {name: str(find_binary(name)) for name in BINARIES}


def _require_root(action: str) -> None:
    if os.geteuid() != 0:
        raise RealSlurmError(f"must be root to {action} (running as uid {os.geteuid()})")


def _is_debian() -> bool:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return Path("/etc/debian_version").exists()
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip('"')
    return fields.get("ID") == "debian" or "debian" in fields.get("ID_LIKE", "").split()


def install(*, apt: bool = True) -> None:
    """Make sure Slurm 22.05 and munge are installed (Debian packages :data:`PACKAGES`).

    Does nothing when every program in :data:`BINARIES` is found. Otherwise, with ``apt``,
    runs ``apt-get update`` and ``apt-get install -y`` with ``DEBIAN_FRONTEND=noninteractive``
    (about 15 s on a fresh Debian 12); no daemon is started by the packages.

    Args:
        apt: False ⇒ only check, never install.

    Raises:
        NotInstalledError: something is missing and ``apt`` is False, or still missing after
            apt-get.
        RealSlurmError: something is missing and we are not root, not on Debian (or a
            derivative), or apt-get failed (its output tail is in the message).
    """
    if not missing_binaries():
        return
    if not apt:
        _require_binaries()
    _require_root("install Slurm with apt-get")
    if not _is_debian() or find_binary("apt-get") is None:
        raise RealSlurmError(
            "cannot install real Slurm: this is not Debian (or a derivative with apt-get); "
            f"install the packages {' '.join(PACKAGES)} (Slurm 22.05) by other means"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", *PACKAGES]):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = _tail_text(done.stdout + done.stderr)
            raise RealSlurmError(f"{' '.join(argv)} failed (exit {done.returncode}):\n{tail}")
    _require_binaries()


# --------------------------------------------------------------------------- processes


@dataclass(frozen=True, slots=True)
class _ProcInfo:
    state: str  # one letter from /proc/<pid>/stat; "Z" is a zombie
    ppid: int
    start: int  # clock ticks after boot: tells a reused pid apart


def _proc_info(pid: int) -> _ProcInfo | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    # the command name is in parentheses and may contain spaces: split after the last ')'
    fields = raw[raw.rindex(")") + 2 :].split()
    return _ProcInfo(state=fields[0], ppid=int(fields[1]), start=int(fields[19]))


def _running(pid: int, start: int | None = None) -> bool:
    """True while ``pid`` exists and is not a zombie (and, given ``start``, is that process)."""
    info = _proc_info(pid)
    return info is not None and info.state != "Z" and (start is None or info.start == start)


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
        info = _proc_info(pid)
        if info is not None:
            children.setdefault(info.ppid, []).append(pid)
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def _uses_dir(pid: int, root: Path) -> bool:
    """True if ``pid`` works in ``root`` or holds a file under it (slurmstepd: slurmd's log)."""
    prefix = f"{root}/"
    with contextlib.suppress(OSError):
        cwd = os.readlink(f"/proc/{pid}/cwd")
        if cwd == str(root) or cwd.startswith(prefix):
            return True
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(fd).startswith(prefix):
                return True
    return False


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _tail_text(text: str, lines: int = _LOG_TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _tail_file(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"--- {path}: (missing)"
    return f"--- {path} (last {lines} lines):\n{_tail_text(text, lines) or '(empty)'}"


def _wait(
    what: str,
    condition: Callable[[], bool],
    timeout: float,
    check: Callable[[], None] | None = None,
    details: Callable[[], str] | None = None,
) -> None:
    """Poll ``condition`` every few ms until true; ``check`` raises early (a daemon died).

    Raises:
        DaemonError: not true after ``timeout`` seconds (with ``details()`` appended).
    """
    deadline = time.monotonic() + timeout
    while True:
        if check is not None:
            check()
        if condition():
            return
        if time.monotonic() >= deadline:
            extra = f"\n{details()}" if details is not None else ""
            raise DaemonError(f"timed out after {timeout:g} s waiting for {what}{extra}")
        time.sleep(_POLL)


def _tcp_accepts(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def _free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports, free on every address, below the ephemeral range.

    Outgoing connections take ports from the ephemeral range, so a port from there could be
    taken between this check and the daemon's bind; random picks elsewhere keep two clusters
    on one machine apart.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    lo, hi = (10000, low - 1) if low > 12000 else (40000, 65535)
    held: list[socket.socket] = []
    try:
        for _ in range(2000):
            if len(held) == count:
                break
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind(("0.0.0.0", random.randint(lo, hi)))
            except OSError:
                sock.close()
                continue
            held.append(sock)
        if len(held) < count:
            raise RealSlurmError(f"could not find {count} free TCP ports in {lo}-{hi}")
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for sock in held:
            sock.close()


def _ensure_user(name: str) -> None:
    """Create the system user ``name`` (no home, no login shell) unless it exists."""
    import pwd

    with contextlib.suppress(KeyError):
        pwd.getpwnam(name)
        return
    done = subprocess.run(
        ["useradd", "-r", "-M", "-d", "/nonexistent", "-s", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PATH": _search_path()},
    )
    try:
        pwd.getpwnam(name)  # another session may have created it meanwhile
    except KeyError:
        raise RealSlurmError(
            f"could not create system user {name!r} for slurmrestd "
            f"(useradd exit {done.returncode}): {done.stderr.strip()}"
        ) from None


def _check_reachable(path: Path, user: str) -> None:
    """Every existing folder from / to ``path`` must be searchable by others (``user`` runs
    slurmrestd, which reads ``slurm.conf`` and the munge socket below ``path``).

    Raises:
        RealSlurmError: naming the first folder that is not, e.g. pytest's 0700 ``tmp_path``
            base.
    """
    for folder in [*reversed(path.parents), path]:
        try:
            mode = folder.stat().st_mode
        except FileNotFoundError:
            return
        if not mode & stat.S_IXOTH:
            raise RealSlurmError(
                f"{folder} has mode {stat.S_IMODE(mode):04o}: slurmrestd runs as {user!r} and "
                f"cannot reach {path}; use a work directory whose parents are world-searchable "
                "(e.g. under /tmp)"
            )


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` with mode 0600 from the first byte on."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)


def submit_body(
    script: str = "#!/bin/bash\nsleep 30\n",
    *,
    name: str = "realslurm",
    partition: str = "batch",
    nodes: int = 1,
    time_limit: int = 5,
) -> dict[str, object]:
    """A ``POST /slurm/v0.0.38/job/submit`` body that Slurm 22.05 accepts.

    Output goes to ``/dev/null`` (otherwise the job writes ``slurm-<id>.out`` into its working
    directory, ``/tmp``), and ``environment`` is the dict v0.0.38 requires.

    Args:
        script: the batch script, starting with ``#!``.
        name: job name.
        partition: ``batch`` (every node) or ``gpu`` (``n1``-``n2``).
        nodes: node count.
        time_limit: minutes.
    """
    return {
        "script": script,
        "job": {
            "name": name,
            "partition": partition,
            "current_working_directory": "/tmp",
            "environment": {"PATH": "/bin:/usr/bin"},
            "nodes": str(nodes),
            "tasks": 1,
            "time_limit": time_limit,
            "standard_output": "/dev/null",
            "standard_error": "/dev/null",
        },
    }


# --------------------------------------------------------------------------- the cluster


@dataclass(slots=True)
class _Daemon:
    name: str  # "munged", "slurmctld", "slurmd-n1", "slurmrestd"
    pidfile: Path
    logs: tuple[Path, ...]
    proc: subprocess.Popen[bytes] | None = None


class SlurmRig(abc.ABC):
    """What every real-Slurm rig offers tests and people: Slurm's commands against the
    cluster, node states, an administrator's drain and resume, and ``with`` / ``async with``
    (start, then stop). Subclasses say how to start, stop and run a command
    (:class:`RealSlurm` for Debian's 22.05, ``realslurm_modern.ModernSlurm`` for 24.11 and
    26.05 under chroot)."""

    #: The cluster's own directory (None until given or made by :meth:`start`).
    _workdir: Path | None = None

    @property
    def workdir(self) -> Path:
        """The work directory (set at construction or by :meth:`start`).

        Raises:
            RealSlurmError: not started and no directory was given.
        """
        if self._workdir is None:
            raise RealSlurmError(
                f"{type(self).__name__} has no work directory yet: call start() first"
            )
        return self._workdir

    #: The REST token while started (None before :meth:`start` and after :meth:`stop`).
    _token: str | None = None
    #: How errors name the cluster ("real Slurm", "Slurm 26.05").
    _title: str = "real Slurm"

    @property
    def started(self) -> bool:
        """True between a successful :meth:`start` and :meth:`stop`."""
        return self._token is not None

    def _require_started(self) -> None:
        if not self.started:
            raise RealSlurmError(f"the {self._title} cluster is not started")

    @property
    def token(self) -> str:
        """The JWT for the rig's REST user; send it as ``X-SLURM-USER-TOKEN``. Never log it.

        Raises:
            RealSlurmError: not started.
        """
        if self._token is None:
            raise RealSlurmError(f"the {self._title} cluster is not started")
        return self._token

    @property
    def token_file(self) -> Path:
        """A file holding :attr:`token` (mode 0600, owned by the user who started the rig)."""
        return self.workdir / "token"

    @property
    def env_file(self) -> Path:
        """``slurm.env``: shell ``export`` lines for this cluster (the token is named by its
        file, never written in it)."""
        return self.workdir / "slurm.env"

    @property
    def conf(self) -> Path:
        """Path of ``slurm.conf`` (what ``SLURM_CONF`` must name; the same path inside a
        chroot)."""
        return self.workdir / "etc" / "slurm.conf"

    @abc.abstractmethod
    def start(self) -> Self:
        """Bring the cluster up (idempotent for a started rig)."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop every process of the cluster (idempotent)."""

    @abc.abstractmethod
    def run(
        self, program: str, *args: str, check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm command (``scontrol``, ``sinfo`` …) against this cluster, as root.

        Raises:
            RealSlurmError: it exited non-zero (with ``check``) or timed out.
        """

    def scontrol(self, *args: str, timeout: float = 30.0) -> str:
        """``scontrol ARGS`` as root; returns its stdout. Raises :class:`RealSlurmError`."""
        return self.run("scontrol", *args, timeout=timeout).stdout

    def squeue(self, *args: str, timeout: float = 30.0) -> str:
        """``squeue ARGS`` as root; returns its stdout. Raises :class:`RealSlurmError`."""
        return self.run("squeue", *args, timeout=timeout).stdout

    def sinfo(self, *args: str, timeout: float = 30.0) -> str:
        """``sinfo ARGS`` as root; returns its stdout. Raises :class:`RealSlurmError`."""
        return self.run("sinfo", *args, timeout=timeout).stdout

    def scancel(self, *args: str, timeout: float = 30.0) -> str:
        """``scancel ARGS`` as root; returns its stdout. Raises :class:`RealSlurmError`."""
        return self.run("scancel", *args, timeout=timeout).stdout

    def node_states(self) -> dict[str, str]:
        """Each node's long state as ``sinfo`` prints it, e.g. ``{"n1": "idle", "n2": "drained"}``.

        Raises:
            RealSlurmError: sinfo failed (slurmctld down).
        """
        states: dict[str, str] = {}
        for line in self.sinfo("-h", "-N", "-o", "%N %T").splitlines():
            name, _, state = line.strip().partition(" ")
            if name:
                states[name] = state.strip()
        return states

    def admin_drain(self, node: str, reason: str) -> None:
        """Drain ``node`` as an administrator would (``scontrol update ... state=drain``).

        Slurm 22.05's REST API cannot update nodes (405), so tests drain this way; the node
        then shows ``state_flags`` with ``DRAIN``, ``reason`` and ``reason_set_by_user`` root.

        Raises:
            RealSlurmError: scontrol refused (unknown node, empty reason).
        """
        self.scontrol("update", f"nodename={node}", "state=drain", f"reason={reason}")

    def undrain(self, node: str, *, state: Literal["resume", "undrain"] = "resume") -> None:
        """Return a drained ``node`` to service (``scontrol update ... state=resume``).

        Args:
            state: ``resume`` (clears DRAIN and DOWN, what Slinky sends) or ``undrain``
                (clears DRAIN only).

        Raises:
            RealSlurmError: scontrol refused (e.g. the node is not drained).
        """
        self.scontrol("update", f"nodename={node}", f"state={state}")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        import asyncio

        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        import asyncio

        await asyncio.to_thread(self.stop)


class RealSlurm(SlurmRig):
    """One private Slurm 22.05 cluster on loopback, in one work directory.

    Use it as a context manager (sync or async), or call :meth:`start` and :meth:`stop`. All
    commands run as the current user, which must be root (slurmd and slurmctld run as root;
    slurmrestd drops to :data:`REST_USER`).

    Work directory layout: ``etc/`` (slurm.conf, jwt.key), ``munge/`` (key, socket), ``log/``
    (one log per daemon, ``*.out`` for what a daemon wrote before opening its log),
    ``state/``, ``spool/<node>/``, ``*.pid``, ``token`` (0600), ``slurm.env`` (0600) and
    ``realslurm.json`` (ports, so :meth:`attach` can find the cluster from another process).

    Args:
        nodes: number of nodes ``n1..nN`` (at least 2: partition ``gpu`` is ``n1``-``n2``).
        workdir: the work directory. None ⇒ a new ``/tmp/realslurm-*`` removed by a successful
            :meth:`stop`. A given directory is created if missing and kept; it must be empty
            or hold a stopped cluster of ours (whose files are then replaced).
        token_lifespan: seconds the REST token stays valid.
        slurmd_timeout: ``SlurmdTimeout`` in seconds (a killed slurmd shows
            ``down ['NOT_RESPONDING']`` after about this plus 10 s).
        start_timeout: seconds to wait for each readiness condition.
    """

    def __init__(
        self,
        nodes: int = 4,
        workdir: str | os.PathLike[str] | None = None,
        *,
        token_lifespan: int = 86400,
        slurmd_timeout: int = 30,
        start_timeout: float = 30.0,
    ) -> None:
        if nodes < 2:
            raise ValueError(f"nodes must be >= 2 (partition gpu is n1-n2), got {nodes}")
        self.nodes = nodes
        self.node_names: tuple[str, ...] = tuple(f"n{i}" for i in range(1, nodes + 1))
        self.user: str = REST_USER
        self.token_lifespan = token_lifespan
        self.slurmd_timeout = slurmd_timeout
        self.start_timeout = start_timeout
        self._own_workdir = workdir is None
        self._workdir: Path | None = None if workdir is None else Path(workdir).absolute()
        self._ctld_port = 0
        self._rest_port = 0
        self._node_ports: list[int] = []
        self._token = None
        self._daemons: list[_Daemon] = []
        self._bin: dict[str, str] = {}
        self.startup_seconds: float | None = None
        """Wall-clock seconds the last :meth:`start` took (None before)."""

    # ----------------------------------------------------------------- public properties

    @property
    def url(self) -> str:
        """slurmrestd's base URL, ``http://127.0.0.1:<port>``.

        Raises:
            RealSlurmError: not started.
        """
        self._require_started()
        return f"http://127.0.0.1:{self._rest_port}"

    @property
    def auth_headers(self) -> dict[str, str]:
        """``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN`` headers for slurmrestd."""
        return {"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": self.token}

    @property
    def ctld_port(self) -> int:
        """slurmctld's TCP port (0 before start)."""
        return self._ctld_port

    @property
    def rest_port(self) -> int:
        """slurmrestd's TCP port on 127.0.0.1 (0 before start)."""
        return self._rest_port

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """An environment for subprocesses that use this cluster.

        ``base`` (default: ``os.environ``) without any ``SLURM_*`` variable (``SLURM_JWT``
        would make root's ``scontrol`` act as the REST user), plus ``SLURM_CONF``,
        ``SLURM_REST`` (the URL), ``SLURM_REST_USER`` and ``SLURM_REST_TOKEN_FILE``, and a
        ``PATH`` that includes the sbin folders. The token itself is not in it.
        """
        env = dict(os.environ if base is None else base)
        for key in [k for k in env if k.startswith("SLURM_")]:
            del env[key]
        env["PATH"] = _search_path(env.get("PATH", ""))
        env["SLURM_CONF"] = str(self.conf)
        if self._rest_port:
            env["SLURM_REST"] = f"http://127.0.0.1:{self._rest_port}"
            env["SLURM_REST_USER"] = self.user
            env["SLURM_REST_TOKEN_FILE"] = str(self.token_file)
        return env

    # ----------------------------------------------------------------- client commands

    def run(
        self, program: str, *args: str, check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client (``scontrol``, ``sinfo``, ...) against this cluster, as root.

        Args:
            program: the program name (found on ``PATH`` or in the sbin folders).
            args: its arguments, passed as they are (no shell).
            check: raise when it exits non-zero.
            timeout: seconds before it is killed.

        Raises:
            RealSlurmError: it exited non-zero (with ``check``; the message has its stderr),
                timed out, or is not installed.
        """
        exe = self._bin.get(program) or find_binary(program)
        if exe is None:
            raise NotInstalledError(f"{program} not found; {INSTALL_HINT}")
        argv = [exe, *args]
        try:
            done = subprocess.run(
                argv,
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise RealSlurmError(
                f"{shlex.join([program, *args])} timed out after {timeout:g} s"
            ) from exc
        if check and done.returncode != 0:
            raise RealSlurmError(
                f"{shlex.join([program, *args])} failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()}"
            )
        return done

    # ----------------------------------------------------------------- start

    def start(self) -> Self:
        """Bring the cluster up and wait until every node is idle and slurmrestd listens.

        Takes about 0.1 s for 4 nodes once installed. A failed start stops what it started
        and keeps the work directory (its path is in the message) for the logs.

        Returns:
            self, started.

        Raises:
            NotInstalledError: binaries missing (see :func:`install`).
            RealSlurmError: not root, work directory unusable, user creation failed.
            DaemonError: a daemon exited or a readiness condition was not met within
                ``start_timeout`` seconds; the message has the tail of the relevant logs.
        """
        if self.started:
            return self
        t0 = time.monotonic()
        _require_root("start a real Slurm cluster")
        self._bin = _require_binaries()
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="realslurm-")).resolve()
        self._prepare_workdir()
        _ensure_user(self.user)
        try:
            self._bring_up()
        except BaseException as exc:
            try:
                self._stop_processes()
            except RealSlurmError as stop_exc:
                exc.add_note(f"and stopping what had started failed: {stop_exc}")
            if isinstance(exc, RealSlurmError) and exc.args:
                exc.args = (f"{exc.args[0]}\n(work directory kept: {self.workdir})",)
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _prepare_workdir(self) -> None:
        d = self.workdir
        _check_reachable(d.parent, self.user)  # before touching anything
        if d.exists():
            entries = list(d.iterdir())
            if entries and not (d / _STATE_FILE).exists():
                raise RealSlurmError(
                    f"{d} is not empty and holds no realslurm cluster; refusing to overwrite it"
                )
            if entries:
                if self._live_daemons(d):
                    raise RealSlurmError(
                        f"a cluster is still running in {d}: "
                        f"run 'python -m slurmbridge.devtools.realslurm down {d}' first"
                    )
                for entry in entries:
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry)
                    else:
                        entry.unlink()
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(0o755)
        _check_reachable(d, self.user)
        for sub in ("etc", "munge", "state", "log", *(f"spool/{n}" for n in self.node_names)):
            (d / sub).mkdir(parents=True, exist_ok=True)
        (d / "spool").chmod(0o755)

    def _bring_up(self) -> None:
        d = self.workdir
        ports = _free_ports(2 + self.nodes)
        self._ctld_port, self._rest_port, self._node_ports = ports[0], ports[1], ports[2:]
        (d / _STATE_FILE).write_text(
            json.dumps(
                {
                    "nodes": self.nodes,
                    "ctld_port": self._ctld_port,
                    "rest_port": self._rest_port,
                    "node_ports": self._node_ports,
                    "user": self.user,
                },
                indent=1,
            )
            + "\n"
        )
        _write_private(d / "munge" / "munge.key", os.urandom(1024))
        _write_private(d / "etc" / "jwt.key", os.urandom(32))
        self.conf.write_text(self._slurm_conf())
        self.conf.chmod(0o644)

        # munged: private key and socket; the socket folder must be reachable by slurmrest
        (d / "munge").chmod(0o755)
        munge_socket = d / "munge" / "munge.socket"
        self._spawn(
            "munged",
            [
                self._bin["munged"],
                "--foreground",
                "--force",
                f"--socket={munge_socket}",
                f"--key-file={d / 'munge' / 'munge.key'}",
                f"--pid-file={d / 'munge' / 'munged.pid'}",
                f"--seed-file={d / 'munge' / 'munged.seed'}",
            ],
            pidfile=d / "munge" / "munged.pid",
            log=d / "log" / "munged.out",  # --foreground: munged logs to stderr
        )
        self._wait("munged to create its socket", munge_socket.exists)

        conf = str(self.conf)
        self._spawn(
            "slurmctld",
            [self._bin["slurmctld"], "-D", "-i", "-f", conf],
            pidfile=d / "slurmctld.pid",
            log=d / "log" / "slurmctld.log",
        )
        # slurmrestd needs only slurm.conf and munge to start: bring it up meanwhile
        self._spawn(
            "slurmrestd",
            [
                self._bin["slurmrestd"],
                "-f",
                conf,
                "-a",
                "rest_auth/jwt",
                "-s",
                OPENAPI_PLUGINS,
                "-u",
                self.user,
                f"127.0.0.1:{self._rest_port}",
            ],
            pidfile=d / "slurmrestd.pid",
            log=d / "log" / "slurmrestd.out",  # slurmrestd logs to stderr
            extra_env={"SLURM_JWT": "daemon"},
        )
        self._wait("slurmctld to accept connections", lambda: _tcp_accepts(self._ctld_port))
        for node in self.node_names:
            self._spawn(
                f"slurmd-{node}",
                [self._bin["slurmd"], "-D", "-N", node, "-f", conf],
                pidfile=d / f"slurmd-{node}.pid",
                log=d / "log" / f"slurmd-{node}.log",
            )
        self._wait(f"nodes {','.join(self.node_names)} to be idle", self._all_idle)
        self._wait("slurmrestd to accept connections", lambda: _tcp_accepts(self._rest_port))

        out = self.scontrol("token", f"username={self.user}", f"lifespan={self.token_lifespan}")
        token = out.strip().removeprefix("SLURM_JWT=")
        if not token or "=" in token.split(".")[0]:
            raise RealSlurmError(f"unexpected 'scontrol token' output: {out.strip()[:80]!r}")
        _write_private(self.token_file, token.encode() + b"\n")
        lines = [
            f"export SLURM_CONF={shlex.quote(conf)}",
            f"export SLURM_REST={shlex.quote(f'http://127.0.0.1:{self._rest_port}')}",
            f"export SLURM_REST_USER={shlex.quote(self.user)}",
            f"export SLURM_REST_TOKEN_FILE={shlex.quote(str(self.token_file))}",
            "# not SLURM_JWT: exported in a root shell it makes scontrol act as the REST user",
            f"export SLURM_REST_TOKEN={shlex.quote(token)}",
        ]
        _write_private(self.env_file, ("\n".join(lines) + "\n").encode())
        self._token = token

    def _slurm_conf(self) -> str:
        d = self.workdir
        last = self.nodes
        node_lines = "\n".join(
            f"NodeName={node} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} "
            "CPUs=2 RealMemory=1000 State=UNKNOWN"
            for node, port in zip(self.node_names, self._node_ports, strict=True)
        )
        return f"""\
# generated by slurmbridge.devtools.realslurm: a throw-away cluster on loopback
ClusterName=realslurm
SlurmctldHost=localhost
SlurmctldPort={self._ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge/munge.socket
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key={d}/etc/jwt.key
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout={self.slurmd_timeout}
InactiveLimit=0
KillWait=2
MinJobAge=60
SchedulerParameters=sched_interval=1,bf_interval=1
{node_lines}
PartitionName=batch Nodes=n[1-{last}] Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=n[1-2] MaxTime=60 State=UP
"""

    def _spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        pidfile: Path,
        log: Path,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        out_path = self.workdir / "log" / f"{name}.out"
        env = self.env()
        env.update(extra_env or {})
        with out_path.open("ab") as out:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.workdir,
                start_new_session=True,  # Ctrl-C in a terminal must not reach the daemons
            )
        # the daemon does not fork (-D/--foreground): this is its pid; it may write the same
        pidfile.write_text(f"{proc.pid}\n")
        logs = (log, out_path) if log != out_path else (log,)
        self._daemons.append(_Daemon(name=name, pidfile=pidfile, logs=logs, proc=proc))

    def _check_daemons(self) -> None:
        for daemon in self._daemons:
            if daemon.proc is not None and daemon.proc.poll() is not None:
                raise DaemonError(
                    f"{daemon.name} exited with status {daemon.proc.returncode} during start-up\n"
                    + "\n".join(_tail_file(p) for p in daemon.logs)
                )

    def _logs_tail(self) -> str:
        return "\n".join(_tail_file(p) for d in self._daemons for p in d.logs[:1])

    def _wait(self, what: str, condition: Callable[[], bool]) -> None:
        _wait(what, condition, self.start_timeout, self._check_daemons, self._logs_tail)

    def _all_idle(self) -> bool:
        try:
            states = self.node_states()
        except RealSlurmError:
            return False
        return all(states.get(node) == "idle" for node in self.node_names)

    # ----------------------------------------------------------------- stop

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the cluster; safe to call twice, after a failed start, or on an attached one.

        Order: cancel every job while slurmctld still runs (and wait up to 5 s for them to
        end); SIGKILL any slurmstepd that holds a file under the work directory, with its
        process tree (slurmstepd ignores SIGTERM and outlives slurmd); SIGTERM the daemons
        named by the pid files (only if the pid still runs a command naming the work
        directory), then munged; SIGKILL what is left after ``timeout`` seconds. A zombie
        counts as stopped. Removes the work directory if :class:`RealSlurm` created it.

        Raises:
            RealSlurmError: a daemon survived SIGKILL (its pid is in the message).
        """
        if self._workdir is None or not (self._workdir / _STATE_FILE).exists():
            return
        self._token = None
        self._cancel_jobs()
        self._stop_processes(timeout)
        if self._own_workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def _cancel_jobs(self) -> None:
        ctld = _read_pid(self.workdir / "slurmctld.pid")
        if not self._ctld_port or ctld is None or not _running(ctld):
            return
        if not _tcp_accepts(self._ctld_port):
            return
        with contextlib.suppress(RealSlurmError):
            ids = self.squeue("-h", "-o", "%i", timeout=5).split()
            if ids:
                self.scancel(*ids, timeout=5)
            _wait(
                "jobs to end",
                lambda: not self.squeue("-h", "-t", "R,CG,S", "-o", "%i", timeout=5).strip(),
                timeout=5.0,
            )

    def _stop_processes(self, timeout: float = 10.0) -> None:
        d = self.workdir
        # 1. stray job steps of ours, whole tree, by pid
        for pid in _all_pids():
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if comm == "slurmstepd" and _uses_dir(pid, d):
                victims = [pid, *_descendants(pid)]
                for victim in victims:
                    _signal(victim, signal.SIGKILL)
        # 2. daemons by pid file; munged last so the others can still authenticate
        procs = {dm.pidfile: dm.proc for dm in self._daemons}
        pidfiles = [
            d / "slurmrestd.pid",
            *sorted(d.glob("slurmd-*.pid")),
            d / "slurmctld.pid",
        ]
        survivors = self._terminate(pidfiles, procs, timeout)
        survivors += self._terminate([d / "munge" / "munged.pid"], procs, timeout)
        self._daemons = []
        if survivors:
            raise RealSlurmError(f"processes survived SIGKILL: {survivors}")

    def _terminate(
        self,
        pidfiles: Sequence[Path],
        procs: Mapping[Path, subprocess.Popen[bytes] | None],
        timeout: float,
    ) -> list[int]:
        """SIGTERM our daemons named by ``pidfiles`` (+ their children), SIGKILL after timeout."""
        targets: list[tuple[int, int]] = []  # (pid, start time)
        for pidfile in pidfiles:
            pid = _read_pid(pidfile)
            if pid is None or not _is_ours(pid, self.workdir):
                continue
            for member in [pid, *_descendants(pid)]:
                info = _proc_info(member)
                if info is not None and info.state != "Z":
                    targets.append((member, info.start))
        for pid, _ in targets:
            _signal(pid, signal.SIGTERM)

        def all_gone() -> bool:
            for proc in procs.values():
                if proc is not None:
                    proc.poll()  # reap our own children so they do not stay zombies
            return not any(_running(pid, start) for pid, start in targets)

        with contextlib.suppress(DaemonError):
            _wait("daemons to exit", all_gone, timeout)
        for pid, start in targets:
            if _running(pid, start):
                _signal(pid, signal.SIGKILL)
        with contextlib.suppress(DaemonError):
            _wait("daemons to exit after SIGKILL", all_gone, 5.0)
        return [pid for pid, start in targets if _running(pid, start)]

    # ----------------------------------------------------------------- attach, contexts

    @classmethod
    def attach(cls, workdir: str | os.PathLike[str]) -> RealSlurm:
        """The cluster that ``up`` (or :meth:`start`) left in ``workdir``, for :meth:`stop`.

        The returned object is started if slurmrestd still runs and the token file exists.

        Raises:
            RealSlurmError: ``workdir`` holds no realslurm cluster.
        """
        d = Path(workdir).absolute()
        try:
            state = json.loads((d / _STATE_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise RealSlurmError(f"{d} holds no realslurm cluster ({exc})") from None
        self = cls(nodes=int(state["nodes"]), workdir=d)
        self._ctld_port = int(state["ctld_port"])
        self._rest_port = int(state["rest_port"])
        self._node_ports = [int(p) for p in state["node_ports"]]
        self.user = str(state["user"])
        rest = _read_pid(d / "slurmrestd.pid")
        if rest is not None and _running(rest) and self.token_file.exists():
            self._token = self.token_file.read_text().strip()
        return self

    @staticmethod
    def _live_daemons(d: Path) -> list[int]:
        pidfiles = [*d.glob("*.pid"), d / "munge" / "munged.pid"]
        pids = [_read_pid(p) for p in pidfiles]
        return [p for p in pids if p is not None and _running(p) and _is_ours(p, d)]

    def __repr__(self) -> str:
        where = self._workdir or "(no workdir)"
        state = f"up at 127.0.0.1:{self._rest_port}" if self.started else "stopped"
        return f"<RealSlurm {self.nodes} nodes {state} in {where}>"


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _is_ours(pid: int, workdir: Path) -> bool:
    """True if ``pid``'s command line names ``workdir`` (a pid file may outlive its process)."""
    return f"{workdir}/" in _cmdline(pid)


# --------------------------------------------------------------------------- CLI


def rig_subcommands(
    parser: argparse.ArgumentParser, *, install: str, up: str, down: str
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """A rig CLI's ``install``, ``up`` and ``down DIR`` subcommands (``up`` with the options
    both rigs take: ``--nodes``, ``--token-lifespan``); returns ``install`` and ``up`` for
    the rig's own arguments."""
    sub = parser.add_subparsers(dest="command", required=True)
    p_install = sub.add_parser("install", help=install)
    p_up = sub.add_parser("up", help=up)
    p_up.add_argument("--nodes", type=int, default=4, help="node count (default 4)")
    p_up.add_argument(
        "--token-lifespan", type=int, default=86400, help="token validity, seconds (default 1 d)"
    )
    sub.add_parser("down", help=down).add_argument("dir", type=Path)
    return p_install, p_up


def run_command(args: argparse.Namespace, command: Callable[[argparse.Namespace], str]) -> int:
    """A rig CLI's command: its report on stdout and exit code 0, or the rig's error on stderr
    and exit code 1."""
    try:
        sys.stdout.write(command(args))
    except RealSlurmError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    return 0


def _command(args: argparse.Namespace) -> str:
    if args.command == "install":
        install(apt=not args.check)
        return "real Slurm is installed\n"
    if args.command == "up":
        cluster = RealSlurm(args.nodes, args.dir, token_lifespan=args.token_lifespan)
        cluster.start()
        return (
            f"real Slurm up in {cluster.startup_seconds or 0:.2f} s: {cluster.url} "
            f"({cluster.nodes} nodes, user {cluster.user}); "
            f"token in {cluster.token_file}\n"
            f"  source {cluster.env_file}\n"
            f"  stop with: python -m slurmbridge.devtools.realslurm down {cluster.workdir}\n"
        )
    RealSlurm.attach(args.dir).stop()
    return f"real Slurm in {args.dir} stopped\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m slurmbridge.devtools.realslurm install | up DIR | down DIR``; returns the exit
    code.

    ``up`` prints the URL and where ``slurm.env`` is; source that file to get ``SLURM_CONF``,
    ``SLURM_REST``, ``SLURM_REST_USER``, ``SLURM_REST_TOKEN_FILE`` and ``SLURM_REST_TOKEN``.
    """
    parser = argparse.ArgumentParser(
        prog="python -m slurmbridge.devtools.realslurm",
        description="A throw-away real Slurm 22.05 cluster on loopback (Debian, root).",
    )
    p_install, p_up = rig_subcommands(
        parser,
        install="apt-get install the Slurm packages if missing",
        up="start a cluster in DIR and write DIR/slurm.env",
        down="stop the cluster in DIR (by its pid files)",
    )
    p_install.add_argument("--check", action="store_true", help="only check, never install")
    p_up.add_argument("dir", type=Path)
    return run_command(parser.parse_args(argv), _command)


if __name__ == "__main__":
    raise SystemExit(main())
