"""Real Slurm 24.11 and 26.05 on loopback: the modern half of the ``real_slurm`` test tier.

Debian 12's own Slurm is 22.05 (REST v0.0.38 only; :mod:`slurmbridge.devtools.realslurm`). This
module
runs the real daemons of newer releases on the same machine without touching the host's
packages: a ~100 MB Debian root file system per release, built once with ``mmdebstrap``
(:func:`install`, script ``rigs/slurm-modern/install.sh``), and a throw-away cluster in one
directory (:class:`ModernSlurm`, scripts ``up.sh`` / ``down.sh``): munged, slurmctld, one
slurmd per node (``n1..nN`` on 127.0.0.1, 2 CPUs and 1000 MiB each; partitions ``batch`` =
all, default, and ``gpu`` = ``n1``-``n2``, plus node sets by feature ``batch`` / ``gpu`` for
dynamic nodes) and slurmrestd with JWT auth, all chrooted into the root file system inside a
private mount namespace (nothing is mounted on the host). Bring-up takes about 2.5 s, stop
about 0.3 s::

    python -m slurmbridge.devtools.realslurm_modern install 26.05        # root; once, about 60 s
    python -m slurmbridge.devtools.realslurm_modern up 26.05 /tmp/s26    # writes /tmp/s26/slurm.env
    /tmp/s26/bin/slurm scontrol show node n1                    # any Slurm command, as root
    python -m slurmbridge.devtools.realslurm_modern down /tmp/s26

=========  ======  =================================  ==================  =================
release    suite   REST versions served               ``EXTERNAL_JOB``    ``POST new/node/``
=========  ======  =================================  ==================  =================
26.05.5    sid     v0.0.42 v0.0.43 v0.0.44 v0.0.45    yes (v0.0.43+)      yes (v0.0.44+)
24.11.5    trixie  v0.0.40 v0.0.41 v0.0.42            no (9207)           no
=========  ======  =================================  ==================  =================

(24.11 rejects the ``EXTERNAL_JOB`` flag with error 9207 and creates a dynamic node only with
``scontrol create`` and ``State=FUTURE``/``CLOUD``; both serve ``jobs/state/``.)

Pitfalls (met on the real daemons; the scripts handle the first three):

* slurmd 24.11+/26.05 insists on a cgroup plugin even with ``proctrack/linuxproc`` and
  ``task/none``; the chroot has no cgroup file system, so ``cgroup.conf`` says
  ``CgroupPlugin=disabled``.
* 24.11's slurmrestd also loads ``openapi/slurmdbd`` by default and dies without accounting
  ("Failure loading plugin path bindings"): it is started with ``-s openapi/slurmctld``.
  26.05's default plugin set works.
* slurmrestd refuses root; it runs as ``slurmrest`` (created in the root file system).
* The REST token is for ``root`` (an operator: 24.11+ need one for node updates, node create
  and delete, and ``admin_comment`` on submit). **Never send** ``X-SLURM-USER-NAME`` **naming
  another user**: with an admin token slurmrestd then impersonates that user, who lacks admin
  rights. Hence :attr:`ModernSlurm.user` is the token's user (``root``); for a plain user's
  view use :meth:`ModernSlurm.token_for` (after :meth:`ModernSlurm.add_user`).
* Right after ``RESUME``/``UNDRAIN`` a node reads ``IDLE+NOT_RESPONDING`` (``sinfo``:
  ``idle*``) for up to about 1 s, until slurmctld's next ping; wait on a condition. 24.11 also
  keeps the old drain reason afterwards (26.05 clears it).
* **Slurm bug: a non-admin user cancelling another user's job over REST deadlocks slurmctld**
  (24.11.5 and 26.05.5, ``DELETE job/{id}`` → ``validate_operator_locked`` waits on the
  assoc_mgr lock for ever; ``scancel`` from the CLI is fine). Never do that in a test; the
  down script still stops such a cluster (its queries time out, then it kills by pid file and
  by mount namespace).
* A batch job writes ``slurm-<id>.out`` into its working directory inside the root file system
  unless ``standard_output`` is set.

Every process of a cluster lives in the cluster's own mount namespace (its id is in
``DIR/run/mntns``), so :meth:`ModernSlurm.cluster_processes` tells exactly what is left, and
the down script stops daemons by pid file and then whatever else is in that namespace, never
anything by name.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, Self

from slurmbridge.devtools.realslurm import (
    DaemonError,
    NotInstalledError,
    RealSlurmError,
    SlurmRig,
    rig_subcommands,
    run_command,
)

__all__ = [
    "RELEASES",
    "RIG_DIR",
    "SUITES",
    "ModernSlurm",
    "RootRequiredError",
    "default_rootfs",
    "down",
    "install",
    "installed",
    "main",
]

RELEASES: Final[tuple[str, ...]] = ("24.11", "26.05")
"""The Slurm releases this rig runs."""

SUITES: Final[Mapping[str, str]] = {"24.11": "trixie", "26.05": "sid"}
"""The Debian suite each release comes from."""

RIG_DIR: Final = Path(__file__).resolve().parent / "rigs" / "slurm-modern"
"""The rig's scripts: ``install.sh``, ``up.sh``, ``down.sh`` (package data)."""

ROOTFS_BASE: Final = Path("/var/tmp/slurm-modern")
MARKER: Final = ".slurm-modern"
"""The file ``install.sh`` writes last into a finished root file system."""

_CLUSTER_MARKER: Final = ".slurm-modern-cluster"
_SBIN_PATH: Final = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
# environment variables up.sh reads: never inherited from the caller, only set by us
_SCRIPT_KNOBS: Final = frozenset(
    {
        "CTLD_PORT",
        "REST_PORT",
        "NODE_PORT0",
        "NNODES",
        "NODE_CPUS",
        "NODE_MEMORY",
        "SLURMD_TIMEOUT",
        "MAX_DYNAMIC_NODES",
        "TOKEN_USER",
        "TOKEN_LIFESPAN",
        "REST_ARGS",
        "UP_TIMEOUT",
        "REBUILD",
        "SLURM_MOUNT_PROPAGATION",
        "TOPOLOGY",
        "GPUS",
    }
)
_TAIL_LINES: Final = 30


class RootRequiredError(RealSlurmError):
    """The operation (install, start, stop, add a user) must run as root."""


# --------------------------------------------------------------------------- helpers


def _check_release(release: str) -> str:
    if release not in SUITES:
        raise ValueError(f"release must be one of {', '.join(RELEASES)}, got {release!r}")
    return release


def default_rootfs(release: str) -> Path:
    """``/var/tmp/slurm-modern/<suite>``: where :func:`install` puts ``release`` by default.

    Raises:
        ValueError: unknown release.
    """
    return ROOTFS_BASE / SUITES[_check_release(release)]


def _rootfs(release: str, rootfs: str | os.PathLike[str] | None) -> Path:
    return default_rootfs(release) if rootfs is None else Path(rootfs).absolute()


def _require_root(action: str) -> None:
    if os.geteuid() != 0:
        raise RootRequiredError(f"must be root to {action} (running as uid {os.geteuid()})")


def _script_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without ``SLURM_*`` and the scripts' knobs, plus ``extra``;
    ``PATH`` gets the sbin folders (chroot, nsenter, useradd live there)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("SLURM_") and k not in _SCRIPT_KNOBS
    }
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p]
    env["PATH"] = os.pathsep.join(parts + [p for p in _SBIN_PATH if p not in parts])
    env.update(extra or {})
    return env


def _script(
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    capture: bool = True,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as the rig runs its scripts and chroot commands: with ``env`` (default
    :func:`_script_env`), no stdin, text output (captured unless ``capture`` is False), the
    exit status left to the caller.

    Raises:
        subprocess.TimeoutExpired: ``timeout`` seconds passed.
    """
    return subprocess.run(
        argv,
        env=_script_env() if env is None else env,
        capture_output=capture,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )


def _tail(text: str, lines: int = _TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def installed(release: str, rootfs: str | os.PathLike[str] | None = None) -> bool:
    """True if the root file system for ``release`` is built (its marker file exists).

    Raises:
        ValueError: unknown release.
    """
    return (_rootfs(release, rootfs) / MARKER).is_file()


def install(
    release: str, rootfs: str | os.PathLike[str] | None = None, *, capture: bool = True
) -> None:
    """Build the root file system for ``release`` with ``install.sh`` (about 60 s, once).

    Returns at once when it is already built. Installs ``mmdebstrap`` on the host with apt-get
    if missing; uses the Debian mirror the host's apt uses (``MIRROR=`` overrides).

    Args:
        release: ``24.11`` or ``26.05``.
        rootfs: where to build it (default :func:`default_rootfs`).
        capture: False ⇒ the script's progress goes to our stdout/stderr.

    Raises:
        ValueError: unknown release.
        RootRequiredError: not root.
        RealSlurmError: the script failed (its output tail is in the message).
    """
    root = _rootfs(release, rootfs)
    if installed(release, root):
        return
    _require_root(f"build the Slurm {release} root file system")
    argv = ["bash", str(RIG_DIR / "install.sh"), release, str(root)]
    done = _script(argv, capture=capture)
    if done.returncode != 0:
        output = (done.stdout or "") + (done.stderr or "")
        raise RealSlurmError(
            f"building the Slurm {release} root file system in {root} failed "
            f"(exit {done.returncode})" + (f":\n{_tail(output)}" if output else "")
        )


def down(workdir: str | os.PathLike[str]) -> str:
    """Stop the cluster in ``workdir`` with ``down.sh`` (idempotent); returns its report.

    Raises:
        RootRequiredError: not root.
        RealSlurmError: the script failed (e.g. processes left in the cluster's namespace).
    """
    _require_root("stop a Slurm cluster")
    argv = ["bash", str(RIG_DIR / "down.sh"), str(Path(workdir).absolute())]
    try:
        done = _script(argv, timeout=120)
    except subprocess.TimeoutExpired as exc:
        raise RealSlurmError(f"down.sh {workdir} timed out after 120 s") from exc
    if done.returncode != 0:
        raise RealSlurmError(
            f"stopping the Slurm cluster in {workdir} failed (exit {done.returncode}):\n"
            f"{_tail(done.stderr or done.stdout)}"
        )
    return done.stdout.strip()


def _read_env(path: Path) -> dict[str, str]:
    """The ``export KEY=VALUE`` lines of ``slurm.env`` (shell-quoted values)."""
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line, comments=True)
        if len(words) == 2 and words[0] == "export":
            key, sep, value = words[1].partition("=")
            if sep:
                values[key] = value
    return values


def _mntns_inode(ns: str) -> int | None:
    """``mnt:[4026532301]`` → 4026532301."""
    inner = ns.strip().removeprefix("mnt:[").removesuffix("]")
    return int(inner) if inner.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return raw[raw.rindex(")") + 2 :].split()[0] != "Z"


# --------------------------------------------------------------------------- the cluster


class ModernSlurm(SlurmRig):
    """One throw-away Slurm 24.11 or 26.05 cluster on loopback, in one work directory.

    Use it as a context manager (sync or async), or call :meth:`start` and :meth:`stop`.
    Must run as root. The public surface matches :class:`slurmbridge.devtools.realslurm.RealSlurm`
    where the tests use it (``url``, ``token``, ``token_file``, ``user``, ``run``,
    ``scontrol``, ``sinfo``, ``node_states``, ``admin_drain``, ``undrain`` ...).

    Work directory layout (written by ``up.sh``): ``etc/`` (slurm.conf, cgroup.conf,
    jwt.key), ``munge/``, ``state/``, ``spool/<node>/``, ``log/`` (one log per daemon),
    ``run/`` (pid files, ``mntns``: the cluster's mount namespace), ``bin/slurm`` (runs a
    Slurm command against the cluster), ``token`` (0600) and ``slurm.env``.

    Args:
        release: ``24.11`` or ``26.05``.
        nodes: number of nodes ``n1..nN`` (at least 2: partition ``gpu`` is ``n1``-``n2``).
        cpus, memory_mib: CPUs and RealMemory (MiB) of every node (2 and 1000 by default).
        workdir: the work directory. None ⇒ a new ``/tmp/slurm-modern-*`` removed by a
            successful :meth:`stop`. A given directory must be empty, missing, or hold a
            cluster of this rig; it is kept.
        rootfs: the root file system (default :func:`default_rootfs`).
        token_lifespan: seconds the REST token stays valid.
        start_timeout: seconds ``up.sh`` waits for each readiness condition.
        topology: ``"block"`` configures a ``topology.yaml`` (topology ``topo1``, blocks
            ``b1`` = n1 and ``b2`` = n2) so dynamic nodes may take ``Topology=topo1:b1``
            (Slurm 25.05+: 26.05 only here); ``None``: no topology, and Slurm refuses any
            node topology with 2178.
        gpus: GPUs per static node (0: none). N > 0 gives every node ``Gres=gpu:nvidia:N``
            with a ``gres.conf`` whose ``File=`` are dummy character devices in
            ``DIR/dev`` (``AutoDetect=off``), so jobs get GPU indices. 24.11 and 26.05.
        gpu_type: the GPUs' GRES type (``nvidia``: ``Gres=gpu:nvidia:N``); ``gpu-nvidia``
            is the type of slurmbridge's ``gpu-nvidia`` DRA device profile, so a node
            publishing that many whole NVIDIA GPUs is GRES-compatible.

    Raises:
        ValueError: an unknown release or topology, fewer than 2 nodes, gpus outside 0-64,
            a gpu_type that is not a plain name.
    """

    def __init__(
        self,
        release: str,
        *,
        nodes: int = 4,
        cpus: int = 2,
        memory_mib: int = 1000,
        workdir: str | os.PathLike[str] | None = None,
        rootfs: str | os.PathLike[str] | None = None,
        token_lifespan: int = 86400,
        start_timeout: float = 60.0,
        topology: str | None = None,
        gpus: int = 0,
        gpu_type: str = "nvidia",
    ) -> None:
        self._release = _check_release(release)
        self._title = f"Slurm {self._release}"
        if topology not in (None, "block"):
            raise ValueError(f"topology must be None or 'block', got {topology!r}")
        self.topology = topology
        if not 0 <= gpus <= 64:
            raise ValueError(f"gpus must be 0-64, got {gpus}")
        #: GPUs per static node: > 0 ⇒ ``GresTypes=gpu``, ``Gres=gpu:nvidia:<gpus>`` on
        #: n1..nN and a ``gres.conf`` (``AutoDetect=off``, ``File=`` dummy character devices
        #: ``DIR/dev/nvidia<i>``), so Slurm gives jobs GPU indices
        #: (``gres_detail`` ``gpu:nvidia:2(IDX:0-1)``); see ``up.sh``.
        self.gpus = gpus
        if not re.fullmatch(r"[A-Za-z0-9_-]+", gpu_type):
            raise ValueError(f"gpu_type must be a plain name, got {gpu_type!r}")
        self.gpu_type = gpu_type
        if nodes < 2:
            raise ValueError(f"nodes must be >= 2 (partition gpu is n1-n2), got {nodes}")
        if cpus < 1 or memory_mib < 1:
            raise ValueError(f"cpus and memory_mib must be >= 1, got {cpus} and {memory_mib}")
        self.nodes = nodes
        #: CPUs and RealMemory (MiB) of each node (slurmd takes them as configured:
        #: ``SlurmdParameters=config_overrides``).
        self.cpus, self.memory_mib = cpus, memory_mib
        self.node_names: tuple[str, ...] = tuple(f"n{i}" for i in range(1, nodes + 1))
        self.rootfs = _rootfs(release, rootfs)
        self.token_lifespan = token_lifespan
        self.start_timeout = start_timeout
        self._own_workdir = workdir is None
        self._workdir: Path | None = None if workdir is None else Path(workdir).absolute()
        self._env: dict[str, str] = {}
        self._token = None
        self._mntns: str | None = None
        self.startup_output = ""
        """What ``up.sh`` printed at the last :meth:`start` (URL, versions, time taken)."""

    # ----------------------------------------------------------------- properties

    @property
    def release(self) -> str:
        """``24.11`` or ``26.05``."""
        return self._release

    def _field(self, key: str) -> str:
        self._require_started()
        try:
            return self._env[key]
        except KeyError:
            raise RealSlurmError(f"{self.env_file} has no {key}") from None

    @property
    def url(self) -> str:
        """slurmrestd's base URL, ``http://127.0.0.1:<port>``. Raises if not started."""
        return self._field("SLURM_REST")

    @property
    def user(self) -> str:
        """The token's user, ``root``: the only name to send as ``X-SLURM-USER-NAME``
        (another name makes slurmrestd impersonate that user)."""
        return self._env.get("SLURM_REST_USER", "root")

    @property
    def auth_headers(self) -> dict[str, str]:
        """``X-SLURM-USER-NAME`` (:attr:`user`) and ``X-SLURM-USER-TOKEN`` for slurmrestd."""
        return {"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": self.token}

    @property
    def slurm_version(self) -> str:
        """The Debian package version of the daemons, e.g. ``26.05.5-1``."""
        return self._field("SLURM_VERSION")

    @property
    def api_versions(self) -> tuple[str, ...]:
        """The REST versions slurmrestd serves, oldest first, e.g. ``("v0.0.40", ...)``."""
        return tuple(self._field("SLURM_REST_VERSIONS").split())

    @property
    def rest_port(self) -> int:
        """slurmrestd's TCP port on 127.0.0.1. Raises if not started."""
        return int(self.url.rsplit(":", 1)[1])

    # ----------------------------------------------------------------- start / stop

    def start(self) -> Self:
        """Run ``up.sh``: bring the cluster up, every node idle and slurmrestd answering.

        Takes about 2.5 s for 4 nodes. A failed start stops what it started (``up.sh`` does)
        and keeps the work directory for the logs.

        Returns:
            self, started.

        Raises:
            RootRequiredError: not root.
            NotInstalledError: the root file system is not built (see :func:`install`).
            DaemonError: ``up.sh`` failed; the message has its stderr tail (with log tails).
        """
        if self.started:
            return self
        _require_root(f"start a Slurm {self._release} cluster")
        if not installed(self._release, self.rootfs):
            raise NotInstalledError(
                f"no Slurm {self._release} root file system at {self.rootfs}: run "
                f"'python -m slurmbridge.devtools.realslurm_modern install {self._release}' or "
                f"'.ci/install-real-slurm.sh' as root"
            )
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="slurm-modern-")).resolve()
        env = _script_env(
            {
                "SLURM_ROOTFS": str(self.rootfs),
                "NNODES": str(self.nodes),
                "NODE_CPUS": str(self.cpus),
                **({"TOPOLOGY": self.topology} if self.topology else {}),
                **({"GPUS": str(self.gpus), "GPU_TYPE": self.gpu_type} if self.gpus else {}),
                "NODE_MEMORY": str(self.memory_mib),
                "TOKEN_USER": "root",
                "TOKEN_LIFESPAN": str(self.token_lifespan),
                "UP_TIMEOUT": str(max(1, round(self.start_timeout))),
            }
        )
        argv = ["bash", str(RIG_DIR / "up.sh"), self._release, str(self.workdir)]
        try:
            done = _script(argv, env=env, timeout=4 * self.start_timeout + 30)
        except subprocess.TimeoutExpired as exc:
            with contextlib.suppress(RealSlurmError):
                down(self.workdir)
            raise DaemonError(
                f"up.sh {self._release} {self.workdir} timed out "
                f"(work directory kept: {self.workdir})"
            ) from exc
        if done.returncode != 0:
            raise DaemonError(
                f"starting Slurm {self._release} in {self.workdir} failed "
                f"(exit {done.returncode}; work directory kept):\n"
                f"{_tail(done.stderr or done.stdout)}"
            )
        self.startup_output = done.stdout.strip()
        self._env = _read_env(self.env_file)
        self._mntns = (self.workdir / "run" / "mntns").read_text().strip()
        self._token = self.token_file.read_text().strip()
        return self

    def stop(self) -> None:
        """Run ``down.sh``: cancel jobs, stop the daemons, kill what is left in the cluster's
        namespace. Safe to call twice or after a failed start. Removes the work directory if
        :class:`ModernSlurm` created it (and nothing of the cluster is left).

        Raises:
            RootRequiredError: not root.
            RealSlurmError: ``down.sh`` failed (processes left; their pids are in the message).
        """
        self._token = None
        d = self._workdir
        if d is None or not (d / _CLUSTER_MARKER).exists():
            return
        if self._mntns is None:
            with contextlib.suppress(OSError):
                self._mntns = (d / "run" / "mntns").read_text().strip()
        down(d)
        if self._own_workdir and not self.cluster_processes():
            shutil.rmtree(d, ignore_errors=True)

    def cluster_processes(self) -> list[int]:
        """The pids still living in the cluster's mount namespace (``DIR/run/mntns``), zombies
        excluded: empty once :meth:`stop` has run (or before the first start)."""
        ns = self._mntns
        if ns is None and self._workdir is not None:
            with contextlib.suppress(OSError):
                ns = (self._workdir / "run" / "mntns").read_text().strip()
        inode = None if ns is None else _mntns_inode(ns)
        if inode is None:
            return []
        pids: list[int] = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if (entry / "ns" / "mnt").stat().st_ino != inode:
                    continue
            except OSError:
                continue
            pid = int(entry.name)
            if _alive(pid):
                pids.append(pid)
        return sorted(pids)

    # ----------------------------------------------------------------- commands

    def run(
        self, program: str, *args: str, check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm program (``scontrol``, ``sinfo`` ...) as root against this cluster,
        through ``DIR/bin/slurm`` (inside the chroot, with a clean environment).

        Raises:
            RealSlurmError: it exited non-zero (with ``check``; the message has its stderr),
                timed out, or the cluster is not running.
        """
        wrapper = self.workdir / "bin" / "slurm"
        if not wrapper.exists():
            raise RealSlurmError(f"no cluster in {self.workdir} (missing {wrapper})")
        shown = shlex.join([program, *args])
        try:
            done = _script(["bash", str(wrapper), program, *args], timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise RealSlurmError(f"{shown} timed out after {timeout:g} s") from exc
        if check and done.returncode != 0:
            raise RealSlurmError(
                f"{shown} failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()}"
            )
        return done

    def token_for(self, user: str, lifespan: int = 3600) -> str:
        """A JWT for ``user`` (``scontrol token username=USER``), to act as a plain user over
        REST. Slurm accepts jobs only from users that exist in the root file system: see
        :meth:`add_user`.

        Raises:
            RealSlurmError: scontrol refused.
        """
        out = self.scontrol("token", f"username={user}", f"lifespan={lifespan}").strip()
        token = out.removeprefix("SLURM_JWT=")
        if not token or token == out or "." not in token:
            raise RealSlurmError(f"unexpected 'scontrol token' output: {out[:80]!r}")
        return token

    def add_user(self, name: str, uid: int) -> None:
        """Create user ``name`` with ``uid`` in the root file system unless it exists
        (``useradd -M -s /usr/sbin/nologin``). Idempotent; every cluster of this root file
        system sees the user at once.

        Raises:
            RootRequiredError: not root.
            RealSlurmError: useradd failed (e.g. ``uid`` taken by another name).
        """
        _require_root("add a user to the Slurm root file system")

        def exists() -> bool:
            done = _script(["chroot", str(self.rootfs), "getent", "passwd", name])
            return done.returncode == 0

        if exists():
            return
        useradd = ["useradd", "-M", "-u", str(uid), "-s", "/usr/sbin/nologin", name]
        done = _script(["chroot", str(self.rootfs), *useradd])
        if done.returncode != 0 and not exists():  # another process may have added it
            raise RealSlurmError(
                f"useradd {name} (uid {uid}) in {self.rootfs} failed (exit {done.returncode}): "
                f"{done.stderr.strip()}"
            )

    # ----------------------------------------------------------------- losing state

    def save_state(self) -> Path:
        """Copy slurmctld's StateSaveLocation (``DIR/state``) as it is now, for
        :meth:`restart_slurmctld`; returns the copy's directory (``DIR/state.saved-<n>``).
        slurmctld writes its state files whole and renames them into place, so a copy taken
        while it runs holds complete files (possibly a few seconds older than its memory).

        Raises:
            RealSlurmError: no cluster in the work directory.
        """
        src = self.workdir / "state"
        if not src.is_dir():
            raise RealSlurmError(f"no state directory {src}")
        n = 1
        while (self.workdir / f"state.saved-{n}").exists():
            n += 1
        dst = self.workdir / f"state.saved-{n}"
        # slurmctld saves a file as ``X.new``, then renames ``X`` to ``X.old`` and ``X.new`` to
        # ``X``: a file listed by the copy can be gone when its turn comes (a fresh-clone CI
        # run failed on ``node_state.new``). The half-written ``.new`` files are left out, and
        # a copy that met a rename is taken again.
        skip = shutil.ignore_patterns("*.new")
        for _ in range(4):
            try:
                shutil.copytree(src, dst, symlinks=True, ignore=skip)
                return dst
            except shutil.Error:
                shutil.rmtree(dst, ignore_errors=True)
                time.sleep(0.05)
        shutil.copytree(src, dst, symlinks=True, ignore=skip)
        return dst

    def restart_slurmctld(self, state: Path | None = None, timeout: float = 30.0) -> None:
        """``kill -9`` slurmctld and start it again (``slurmctld -i``, as ``up.sh`` does),
        from ``state`` (a :meth:`save_state` copy) instead of what it saved last when given:
        the jobs submitted since the copy are forgotten and their ids handed out again.
        slurmd and slurmrestd keep running; returns once slurmctld answers ``sinfo``.

        Raises:
            RootRequiredError: not root.
            RealSlurmError: slurmctld did not die, or did not come back within ``timeout``.
        """
        _require_root("restart slurmctld")
        pid_file = self.workdir / "run" / "slurmctld.pid"
        pid = int(pid_file.read_text().strip())
        if pid in self.cluster_processes():
            os.kill(pid, 9)
        deadline = time.monotonic() + timeout
        while _alive(pid):
            if time.monotonic() > deadline:
                raise RealSlurmError(f"slurmctld (pid {pid}) did not die")
            time.sleep(0.02)
        if state is not None:
            live = self.workdir / "state"
            shutil.rmtree(live)
            shutil.copytree(state, live, symlinks=True)
        log = self.workdir / "log" / "slurmctld.out"
        with log.open("a") as out:
            done = subprocess.run(
                ["bash", str(self.workdir / "bin" / "slurm"), "slurmctld", "-i"],
                env=_script_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                check=False,
                timeout=timeout,
            )
        if done.returncode != 0:
            raise RealSlurmError(f"slurmctld did not start again (exit {done.returncode})")
        while self.run("sinfo", "-h", check=False, timeout=timeout).returncode != 0:
            if time.monotonic() > deadline:
                raise RealSlurmError(f"slurmctld did not answer within {timeout:g} s")
            time.sleep(0.05)

    def __repr__(self) -> str:
        where = self._workdir or "(no workdir)"
        state = f"up at {self._env.get('SLURM_REST')}" if self.started else "stopped"
        return f"<ModernSlurm {self._release} {self.nodes} nodes {state} in {where}>"


# --------------------------------------------------------------------------- CLI


def _command(args: argparse.Namespace) -> str:
    if args.command == "install":
        install(args.release, args.rootfs, capture=False)
        root = _rootfs(args.release, args.rootfs)
        return f"Slurm {args.release} root file system ready in {root}\n"
    if args.command == "up":
        cluster = ModernSlurm(
            args.release,
            nodes=args.nodes,
            workdir=args.dir,
            rootfs=args.rootfs,
            token_lifespan=args.token_lifespan,
        )
        cluster.start()
        return (
            f"{cluster.startup_output}\n  source {cluster.env_file}\n"
            "  stop with: python -m slurmbridge.devtools.realslurm_modern down "
            f"{cluster.workdir}\n"
        )
    return down(args.dir) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m slurmbridge.devtools.realslurm_modern install RELEASE | up RELEASE DIR | down
    DIR``."""
    parser = argparse.ArgumentParser(
        prog="python -m slurmbridge.devtools.realslurm_modern",
        description=(
            "Real Slurm 24.11 (Debian trixie) or 26.05 (Debian sid) on loopback; root, Debian 12.\n"
            "  install  builds the release's root file system once (mmdebstrap, about 60 s,\n"
            "           ~100 MB in /var/tmp/slurm-modern/<suite>)\n"
            "  up       starts a throw-away cluster in DIR (nodes n1..nN, slurmrestd with a\n"
            "           root JWT) and writes DIR/slurm.env (SLURM_REST, SLURM_REST_TOKEN_FILE,\n"
            "           SLURM_REST_VERSIONS ...); DIR/bin/slurm runs any Slurm command on it\n"
            "  down     stops it (only its own processes; logs stay in DIR/log)"
        ),
        epilog=(
            "examples (as root):\n"
            "  python -m slurmbridge.devtools.realslurm_modern install 26.05\n"
            "  python -m slurmbridge.devtools.realslurm_modern up 26.05 /tmp/s26\n"
            '  . /tmp/s26/slurm.env; curl -H "X-SLURM-USER-TOKEN: $(cat $SLURM_REST_TOKEN_FILE)" '
            "$SLURM_REST/slurm/v0.0.45/nodes/\n"
            "  /tmp/s26/bin/slurm sinfo -N\n"
            "  python -m slurmbridge.devtools.realslurm_modern down /tmp/s26\n"
            "Send no X-SLURM-USER-NAME other than the token's user (root): that impersonates."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_install, p_up = rig_subcommands(
        parser,
        install="build the root file system of RELEASE (once)",
        up="start a cluster of RELEASE in DIR; write DIR/slurm.env",
        down="stop the cluster in DIR (idempotent; logs are kept)",
    )
    for p in (p_install, p_up):
        p.add_argument("release", choices=RELEASES)
        p.add_argument("--rootfs", type=Path, help="default /var/tmp/slurm-modern/<suite>")
    p_up.add_argument("dir", type=Path, help="empty, missing, or a cluster directory of ours")
    return run_command(parser.parse_args(argv), _command)


if __name__ == "__main__":
    raise SystemExit(main())
