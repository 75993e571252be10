"""Public test harness: the whole stack in one call.

    async with Stack(nodes=4) as stack:            # nats-server + both simulators + all workers
        stack.cordon("n1")
        await stack.wait_for(lambda: stack.slurm_node("n1").has("DRAIN"), what="n1 drained")
        records = await stack.action_records()

Tests, benchmarks, ``slurmbridge demo`` and users' own checks drive slurmbridge the same way:
:class:`Simulators` starts the Kubernetes API simulator and the slurmrestd simulator (with a
kubeconfig and a token file in a private directory) and gives the settings that point at them;
:class:`Stack` adds an embedded nats-server and an :class:`~slurmbridge.app.App` running every
component in-process, plus helpers to change Kubernetes and Slurm state and to await
convergence (conditions with timeouts, never fixed sleeps).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final, Protocol

import nats.errors
import nats.js.errors

from schemas import actions, streams, wellknown
from schemas.actions import ActionRecord, DeadLetter
from slurmbridge import config
from slurmbridge.app import App
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.devtools.sim.slurmd import DefaultScheduler, SlurmdRegistrar
from slurmbridge.devtools.sim.slurmrestd import SlurmSim
from slurmbridge.runtime.natsserver import NatsServer
from slurmbridge.runtime.worker import Effector
from slurmbridge.slurm.models import Node

Obj = dict[str, Any]

#: The toleration slurmd pods of a NodeSet need on nodes slurmbridge taints as managed
#: (``slinky.slurm.net/managed-node=<scheduler>:NoExecute``): without it the kubelet refuses
#: them (NoExecute, pkg/kubelet/lifecycle/predicate.go), as Slinky's own hybrid example gives
#: its NodeSet pods (slurm-bridge ``hack/slurm-bridge-hybrid.yaml``). slurmbridge now adds
#: one to every slurmd pod whose template has none (reconcilers.nodeset._daemon.slurmd_tolerations);
#: a template that gives this one keeps it as written.
MANAGED_NODE_TOLERATION: Final[Obj] = {
    "key": wellknown.TAINT_MANAGED_NODE,
    "operator": "Equal",
    "value": wellknown.DEFAULT_SCHEDULER_NAME,
    "effect": wellknown.TAINT_MANAGED_NODE_EFFECT,
}


def slurmd_nodeset(name: str, namespace: str, annotations: dict[str, str] | None = None) -> Obj:
    """A v1alpha1 NodeSet of ``replicas: 0`` whose slurmd pods tolerate the managed-node taint
    (:data:`MANAGED_NODE_TOLERATION`): the simulated nodes are Slurm's too, so without it the
    kubelet refuses the pods once the taint lands. ``annotations``: the NodeSet's own."""
    meta: Obj = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "slinky.slurm.net/v1alpha1",
        "kind": "NodeSet",
        "metadata": meta,
        "spec": {
            "replicas": 0,
            "template": {
                "spec": {
                    "containers": [{"name": "slurmd", "image": "slurmd"}],
                    "tolerations": [MANAGED_NODE_TOLERATION],
                }
            },
        },
    }


class SlurmEndpoint(Protocol):
    """A real slurmrestd to use instead of the simulator (e.g. a started RealSlurm)."""

    @property
    def url(self) -> str:
        """slurmrestd base URL."""
        ...

    @property
    def token_file(self) -> Path:
        """File holding an accepted JWT."""
        ...

    @property
    def user(self) -> str:
        """X-SLURM-USER-NAME."""
        ...


class Simulators:
    """The Kubernetes and slurmrestd simulators with ``nodes`` matching nodes ``n1..nN``.

    Kubernetes nodes get 2 CPUs / 1000 MiB like the Slurm ones; Slurm partitions are ``batch``
    (all nodes) and ``gpu`` (n1–n2). ``api_version`` is the one version the slurmrestd
    simulator serves (``None`` = every supported version, so the client negotiates).
    ``kubelet``: simulated kubelets move bound pods through their phases and finish graceful
    deletions (:mod:`slurmbridge.devtools.sim.kubelet`); False leaves that to the test.
    ``job_controller``: batch/v1 Jobs get their pods (:mod:`slurmbridge.devtools.sim.
    jobcontroller`; the first try of ``slurmbridge run``, where kubectl makes the Jobs);
    off, a test makes a Job's pods itself (:func:`slurmbridge.devtools.sim.workloads.
    create_group`).
    """

    def __init__(
        self,
        *,
        nodes: int = 4,
        api_version: str | None = "v0.0.44",
        workdir: Path | None = None,
        real_slurm: SlurmEndpoint | None = None,
        kubelet: bool = True,
        job_controller: bool = False,
    ) -> None:
        self.nodes = nodes
        self.real_slurm = real_slurm
        self.api_version = api_version
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="slurmbridge-sims-"))
        self.kube = KubeSim(bookmark_interval=1.0, kubelet=kubelet, job_controller=job_controller)
        self.slurm = SlurmSim(cluster="default")
        self.kubeconfig = self.workdir / "kubeconfig"
        self.token_file = self.workdir / "slurm-token"
        #: Binds pods that ask for Kubernetes' default scheduler (NodeSets' slurmd pods).
        self.default_scheduler = DefaultScheduler(self.kube)
        #: Plays slurmd: running NodeSet pods become Slurm nodes.
        self.slurmd = SlurmdRegistrar(self.kube, self.slurm)

    async def start(self) -> None:
        """Start both simulators and write the kubeconfig and the token file."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        for i in range(1, self.nodes + 1):
            self.kube.add_node(f"n{i}", cpu="2", memory="1000Mi")
        await self.kube.start()
        self.kube.write_kubeconfig(self.kubeconfig)
        self.default_scheduler.attach()
        if self.real_slurm is not None:
            return
        self.slurmd.attach()
        self.slurm.seed_default(self.nodes)
        versions = (self.api_version,) if self.api_version else None
        if versions:
            await self.slurm.start(versions=versions)
        else:
            await self.slurm.start()
        self.slurm.write_token(self.token_file)

    async def stop(self) -> None:
        """Stop both simulators (and remove their directory when it is ours)."""
        self.default_scheduler.detach()
        self.slurmd.detach()
        await self.kube.stop()
        if self.real_slurm is None:
            await self.slurm.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def overrides(self) -> dict[str, Any]:
        """Settings overrides (YAML shape) that point slurmbridge at the simulators."""
        if self.real_slurm is not None:
            url, token, user = (
                self.real_slurm.url,
                str(self.real_slurm.token_file),
                self.real_slurm.user,
            )
        else:
            url, token, user = self.slurm.url, str(self.token_file), "slurmrest"
        return {
            "kube": {"kubeconfig": str(self.kubeconfig)},
            "slurm": {"url": url, "tokenFile": token, "userName": user, "cluster": "default"},
        }


class TmpfsError(RuntimeError):
    """This machine cannot mount a tmpfs here (not root, no mount namespace rights)."""


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``mount -o size=``: ``24m`` …) mounted on ``path`` for the block:
    a small disk to fill up (a JetStream store that runs out of space). Needs root.

    Raises:
        TmpfsError: the mount failed.
    """
    path.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise TmpfsError(f"cannot mount a tmpfs on {path}: {exc}") from exc
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


async def wait_until(
    cond: Callable[[], object], *, timeout: float = 10.0, what: str = "condition"
) -> None:
    """Wait until ``cond()`` is truthy, looking every 10 ms.

    Raises:
        TimeoutError: not true after ``timeout`` seconds (names ``what``).
    """
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.01)


class Stack:
    """NATS + simulators + slurmbridge, in this process.

    ``real_slurm`` replaces the slurmrestd simulator with a real slurmrestd (its nodes must be
    ``n1..nN`` to match the Kubernetes nodes). ``poll_interval`` (seconds) is the Slurm poll
    period; ``components`` limits what runs
    (default: everything); ``effector`` replaces the real effectors; ``settings`` are extra
    overrides in the YAML shape (e.g. ``{"worker": {"maxDeliver": 3}}``); ``setup`` is called
    with the stack once the simulators run, before the app starts; ``kubelet`` as in
    :class:`Simulators`; ``nats_url`` uses an external NATS instead of starting one;
    ``health_port`` serves ``/healthz`` and ``/readyz`` there (0: no health endpoints).
    """

    def __init__(
        self,
        *,
        nodes: int = 4,
        api_version: str | None = "v0.0.44",
        poll_interval: float = 0.2,
        components: Iterable[str] | None = None,
        effector: Effector | None = None,
        settings: dict[str, Any] | None = None,
        workdir: Path | None = None,
        real_slurm: SlurmEndpoint | None = None,
        kubelet: bool = True,
        nats_url: str | None = None,
        setup: Callable[[Stack], Awaitable[None] | None] | None = None,
        health_port: int = 0,
    ) -> None:
        #: Called once the simulators run and before the app starts (seed a world that the
        #: app then finds at its first start).
        self.setup = setup
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="slurmbridge-stack-"))
        #: An external NATS (e.g. a :class:`~slurmbridge.runtime.natsserver.NatsCluster`'s URL):
        #: then :attr:`nats` is neither started nor stopped here.
        self.nats_url = nats_url
        self.sims = Simulators(
            nodes=nodes,
            api_version=api_version,
            workdir=self.workdir / "sims",
            real_slurm=real_slurm,
            kubelet=kubelet,
        )
        self.nats = NatsServer(store_dir=self.workdir / "nats")
        self.poll_interval = poll_interval
        self.health_port = health_port
        self.components = tuple(components) if components else None
        self.effector = effector
        self.extra = settings or {}
        self.app: App | None = None
        self.settings: config.Settings | None = None

    @property
    def kube(self) -> KubeSim:
        """The Kubernetes API simulator."""
        return self.sims.kube

    @property
    def slurm(self) -> SlurmSim:
        """The slurmrestd simulator."""
        return self.sims.slurm

    async def __aenter__(self) -> Stack:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start NATS, the simulators and the app; returns when the workers run."""
        if self.nats_url is None:
            await self.nats.start()
        await self.sims.start()
        overrides = _deep_merge(
            self.sims.overrides(),
            {
                "nats": {"url": self.nats_url or self.nats.url},
                "slurm": {"pollInterval": self.poll_interval},
                "observability": {
                    "metricsPort": 0,
                    "healthPort": self.health_port,
                    "logFormat": "text",
                },
                "instanceId": "stack",
            },
        )
        self.settings = config.load(env={}, overrides=_deep_merge(overrides, self.extra))
        if self.setup is not None:
            done = self.setup(self)
            if done is not None:
                await done
        await self.start_app()

    async def start_app(self) -> App:
        """(Re)start the slurmbridge process part; NATS and the simulators keep running."""
        assert self.settings is not None
        self.app = App(
            self.settings,
            only=self.components,
            effector=self.effector,
            with_health=bool(self.health_port),
        )
        await self.app.start()
        return self.app

    async def stop_app(self) -> None:
        """Stop the slurmbridge part only (a worker crash/restart, as far as the log can tell)."""
        if self.app is not None:
            await self.app.stop()
            self.app = None

    async def stop(self) -> None:
        """Stop everything and remove the working directory."""
        await self.stop_app()
        await self.sims.stop()
        await self.nats.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # --- changing the world ----------------------------------------------------------------
    def cordon(self, node: str) -> Obj:
        """``kubectl cordon``."""
        return self.kube.cordon(node)

    def uncordon(self, node: str) -> Obj:
        """``kubectl uncordon``."""
        return self.kube.uncordon(node)

    def admin_drain(self, node: str, reason: str) -> None:
        """``scontrol update nodename=<node> state=drain reason=<reason>`` as root."""
        self.slurm.admin_drain(node, reason)

    # --- reading the world -----------------------------------------------------------------
    def slurm_node(self, name: str) -> Node:
        """The simulator's current view of a Slurm node."""
        return self.slurm.node(name)

    def kube_node(self, name: str) -> Obj:
        """The simulator's current Node object."""
        return self.kube.get("nodes", name)

    def taints(self, node: str) -> list[tuple[str, str, str]]:
        """``(key, value, effect)`` of a node's taints."""
        spec = self.kube_node(node).get("spec", {})
        return [(t["key"], t.get("value", ""), t["effect"]) for t in spec.get("taints") or []]

    async def wait_for(
        self, cond: Callable[[], bool], *, timeout: float = 10.0, what: str = "condition"
    ) -> None:
        """Wait until ``cond()`` is true (:func:`wait_until`)."""
        await wait_until(cond, timeout=timeout, what=what)

    async def settled(self, timeout: float = 10.0) -> None:
        """Wait until every worker is idle and has consumed everything in the log."""
        app = self.app
        assert app is not None
        bus = app.bus
        assert bus is not None
        deadline = time.monotonic() + timeout
        while True:
            # Consumer → (not yet delivered, delivered and not settled, redelivered, pull
            # requests waiting): what a timeout names, so a failure says which reconciler
            # holds what.
            where: dict[str, tuple[int, int, int, int]] = {}
            try:
                info = await bus.js.stream_info(streams.OBS_STREAM)
                last = info.state.last_seq
                pending = 0
                for w in list(app.workers.values()):
                    for c in w.consumers:
                        ci = await bus.js.consumer_info(streams.OBS_STREAM, c.durable)
                        pending += ci.num_pending + ci.num_ack_pending
                        if ci.num_pending or ci.num_ack_pending:
                            where[c.durable] = (
                                ci.num_pending,
                                ci.num_ack_pending,
                                ci.num_redelivered or 0,
                                ci.num_waiting or 0,
                            )
            except (nats.errors.TimeoutError, nats.js.errors.APIError):
                # A clustered stream or consumer electing a leader does not answer for a
                # few seconds: not settled yet.
                last, pending = app.projection.applied_seq + 1, -1
            if (
                pending == 0
                and app.projection.applied_seq >= last
                and all(w.idle for w in app.workers.values())
            ):
                return
            if time.monotonic() > deadline:
                busy = sorted(name for name, w in app.workers.items() if not w.idle)
                raise TimeoutError(
                    f"not settled after {timeout}s ({pending} triggers pending; consumer: "
                    f"(not delivered, unacknowledged, redelivered, pull requests) {where}; "
                    f"workers not idle: {busy}; projection at {app.projection.applied_seq} "
                    f"of {last})"
                )
            await asyncio.sleep(0.02)

    async def _read_all(self, stream: str, subject: str) -> list[bytes]:
        assert self.app is not None and self.app.bus is not None
        js = self.app.bus.js
        info = await js.stream_info(stream)
        out: list[bytes] = []
        seq = info.state.first_seq
        while info.state.messages and seq <= info.state.last_seq:
            try:
                msg = await js.get_msg(stream, seq=seq, next=True, subject=subject)
            except Exception:  # noqa: BLE001 - no further message on that subject
                break
            out.append(msg.data or b"")
            seq = (msg.seq or seq) + 1
        return out

    async def observations(self, subject: str = "bridge.obs.>") -> list[bytes]:
        """Every observation in BRIDGE_OBS on ``subject`` (a filter), oldest first, as the
        raw JSON published (decode with :func:`schemas.events.decode` when needed)."""
        return await self._read_all(streams.OBS_STREAM, subject)

    async def action_records(self, *, intents: bool = False) -> list[ActionRecord]:
        """Every action record in BRIDGE_ACT, oldest first: the outcome records, and with
        ``intents`` the write-ahead ``intended`` records too."""
        records = [
            actions.decode_record(d)
            for d in await self._read_all(streams.ACT_STREAM, "bridge.act.>")
        ]
        return [r for r in records if intents or r.outcome != "intended"]

    async def dead_letters(self) -> list[DeadLetter]:
        """Every dead-letter record in BRIDGE_DLQ, oldest first."""
        return [
            actions.decode_dead_letter(d)
            for d in await self._read_all(streams.DLQ_STREAM, "bridge.dlq.>")
        ]


def _deep_merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = (
            _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        )
    return out
