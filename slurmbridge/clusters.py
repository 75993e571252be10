"""Slurm clients and pollers for Slinky Cluster objects, following the log.

Slinky slurm-operator's Cluster controller keeps one Slurm client per Cluster, with the token
from the Secret its ``spec.token.secretRef`` names. Here :class:`ClusterSupervisor` does that
in every process that needs Slurm clients for Cluster objects (the ``slurm-poller`` and the
``nodeset`` worker): it follows :func:`reconcilers.cluster.served` over the projection and,
per served Cluster,

* creates a :class:`~slurmbridge.slurm.client.SlurmClient` for ``spec.server`` and puts it in
  the shared ``clients`` mapping (the effectors look clusters up there);
* watches the Secret (list + watch of that one name) and swaps the token in place when it
  changes — a rotated Secret needs no restart; a missing Secret or key leaves the client
  without a token, so every request fails with ``MissingToken`` and says which Secret;
* with ``publish`` (the ``slurm-poller`` component), runs a
  :class:`~producers.slurm.poller.SlurmPoller` whose observations carry ``slurm:<name>``, so
  subjects and metrics are separated per cluster; its pings drive the Cluster's status
  (``reconcilers.cluster``).

A Cluster that stops being served (deleted, renamed, its server or Secret changed) has its
poller and client stopped; a changed spec starts them again with the new values. Nothing of
the stopped cluster is tombstoned: deleting a Cluster object says nothing about whether its
Slurm jobs ended, and reconcilers must not act as if they had.

The token never leaves this module's memory: it is not logged, published or put in errors.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import aiohttp
import msgspec

from producers.slurm.poller import SlurmPoller
from reconcilers import cluster as cluster_rules
from reconcilers.base import Context
from schemas import subjects
from schemas.events import Event, SlurmCluster, SlurmJob, SlurmNode, SlurmPartition, SlurmPing
from slurmbridge.kube import client as kclient
from slurmbridge.kube.api import check_stream, read_raw
from slurmbridge.kube.errors import ApiStatusError
from slurmbridge.kube.watch import Outage
from slurmbridge.kube.wire import DECODE_SECRET, DECODE_SECRET_LIST, DECODE_WATCH, RawSecret
from slurmbridge.observability import metrics
from slurmbridge.runtime.bus import Published
from slurmbridge.runtime.projection import Projection
from slurmbridge.runtime.tasks import cancel_and_wait
from slurmbridge.slurm.client import SlurmClient, TokenHolder

log = logging.getLogger(__name__)

Publish = Callable[[Sequence[tuple[Event, str]]], Awaitable[list[Published]]]
Leased = Callable[[str, Callable[[], Coroutine[Any, Any, None]]], Coroutine[Any, Any, None]]


def slurm_seed(projection: Projection, cluster: str) -> dict[tuple[str, str], tuple[Event, int]]:
    """The last observation and its stream sequence per (kind, key) of one Slurm cluster's
    source in the projection: a poller's starting point, so a restart re-publishes nothing."""
    source = subjects.slurm_source(cluster)
    seed: dict[tuple[str, str], tuple[Event, int]] = {}
    for kind in (SlurmNode, SlurmPartition, SlurmPing, SlurmJob):
        tag = str(kind.__struct_config__.tag)
        for ev in projection.values(kind, source):
            entry = projection.entry(tag, source, ev.key)
            if entry is not None:
                seed[(tag, ev.key)] = (ev, entry.seq)
    return seed


def token_from(secret: RawSecret | None, cluster: SlurmCluster) -> tuple[str, str]:
    """``(token, why)`` from a Secret's ``data`` (pure): the token, or ``""`` and the reason
    (naming the Secret and key, never a value)."""
    where = f"Secret {cluster.namespace}/{cluster.secret_name}"
    if secret is None:
        return "", f"{where} (spec.token.secretRef) not found"
    raw = (secret.data or {}).get(cluster.secret_key)
    if raw is None:
        return "", f"{where} has no key {cluster.secret_key!r}"
    try:
        token = base64.b64decode(raw, validate=True).decode("utf-8").strip()
    except (binascii.Error, UnicodeDecodeError):
        return "", f"{where} key {cluster.secret_key!r} is not base64-encoded UTF-8"
    if not token:
        return "", f"{where} key {cluster.secret_key!r} is empty"
    return token, ""


class _Running(msgspec.Struct, kw_only=True):
    cluster: SlurmCluster
    client: SlurmClient
    holder: TokenHolder
    tasks: list[asyncio.Task[None]]
    poller: SlurmPoller | None = None
    #: Set once the Secret has been read (found or not): the first poll waits for it, so a
    #: Cluster does not report "no token" just because its Secret was not read yet.
    loaded: asyncio.Event = msgspec.field(default_factory=asyncio.Event)


def _identity(c: SlurmCluster) -> tuple[str, str, str, str, str]:
    """What a running client depends on: a change restarts it."""
    return (c.uid, c.server, c.namespace, c.secret_name, c.secret_key)


class ClusterSupervisor:
    """Clients (and, with ``publish``, pollers) for the served Cluster objects (module doc).

    Args:
        projection: this process's projection (the supervisor registers a listener).
        kube_api: reads and watches the Secrets.
        clients: the mapping the effectors use; the supervisor adds and removes entries.
        ctx: the reconcilers' context (its ``cluster`` is the static cluster's name).
        publish: persists a poller's batch; ``None`` runs no pollers (clients only).
        producer: instance id stamped on observations.
        poll_interval: seconds between polls; ``timeout``: seconds per Slurm request;
        job_relist_interval: seconds between full job listings (``slurm.jobRelistInterval``);
        watch_timeout: seconds a Secret watch stays open before it is re-opened.
        leased: runs a poller only while this process holds lease ``poller.<cluster>``
            (``App._hold``); None polls unconditionally.
        catch_up: awaited before a poller seeds itself from the projection (a newly elected
            poller must see what the previous one published).
    """

    def __init__(
        self,
        *,
        projection: Projection,
        kube_api: kclient.ApiClient,
        clients: dict[str, SlurmClient],
        ctx: Context,
        publish: Publish | None,
        producer: str,
        poll_interval: float = 2.0,
        job_relist_interval: float = 30.0,
        timeout: float = 10.0,
        watch_timeout: int = 300,
        leased: Leased | None = None,
        catch_up: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.projection = projection
        self.leased = leased
        self.catch_up = catch_up
        self.core = kclient.CoreV1Api(kube_api)
        self.clients = clients
        self.ctx = ctx
        self.publish = publish
        self.producer = producer
        self.poll_interval = poll_interval
        self.job_relist_interval = job_relist_interval
        self.timeout = timeout
        self.watch_timeout = watch_timeout
        self.running: dict[str, _Running] = {}
        self._changed = asyncio.Event()
        self._changed.set()
        projection.add_listener(self._observe)

    def _observe(self, event: Event, seq: int) -> None:
        del seq
        if isinstance(event, SlurmCluster):
            self._changed.set()

    @property
    def pollers(self) -> dict[str, SlurmPoller]:
        """The running pollers by cluster name."""
        return {n: r.poller for n, r in self.running.items() if r.poller is not None}

    async def run(self) -> None:
        """Follow the served Clusters until cancelled; then stop everything it started."""
        try:
            while True:
                await self._changed.wait()
                self._changed.clear()
                await self.sync()
        finally:
            for name in list(self.running):
                await self._stop(name)

    async def sync(self) -> None:
        """Start, restart and stop clients and pollers to match the projection (level-based)."""
        want = cluster_rules.served(self.projection, self.ctx)
        for name, run in list(self.running.items()):
            c = want.get(name)
            if c is None or _identity(c) != _identity(run.cluster):
                await self._stop(name)
        for name, c in sorted(want.items()):
            if name not in self.running:
                self._start(c)

    def _start(self, c: SlurmCluster) -> None:
        holder = TokenHolder(why=f"waiting for Secret {c.namespace}/{c.secret_name}")
        slurm = SlurmClient(c.server, token=holder, timeout=self.timeout)
        run = _Running(cluster=c, client=slurm, holder=holder, tasks=[])
        run.tasks.append(asyncio.create_task(self._watch_secret(c, run), name=f"secret-{c.name}"))
        if self.publish is not None:
            run.tasks.append(asyncio.create_task(self._poll(run), name=f"slurm-poller-{c.name}"))
        self.running[c.name] = run
        self.clients[c.name] = slurm
        metrics.CLUSTERS_SERVED.labels(c.name).set(1)
        log.info(
            "Cluster %s: serving Slurm cluster %s at %s%s",
            c.key,
            c.name,
            slurm.shown_url,
            " (polling)" if run.poller else "",
        )

    async def _poll(self, run: _Running) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.loaded.wait(), self.timeout)
        if self.leased is None:
            await self._active_poller(run)
        else:
            await self.leased(f"poller.{run.cluster.name}", lambda: self._active_poller(run))

    async def _active_poller(self, run: _Running) -> None:
        assert self.publish is not None
        if self.catch_up is not None:
            await self.catch_up()
        name = run.cluster.name
        run.poller = SlurmPoller(
            run.client,
            self.publish,
            cluster=name,
            producer=self.producer,
            poll_interval=self.poll_interval,
            seed=slurm_seed(self.projection, name),
            job_relist_interval=self.job_relist_interval,
        )
        try:
            await run.poller.run()
        finally:
            run.poller = None

    async def _stop(self, name: str) -> None:
        run = self.running.pop(name)
        if self.clients.get(name) is run.client:
            del self.clients[name]
        await cancel_and_wait(run.tasks)
        await run.client.aclose()
        with contextlib.suppress(KeyError):
            metrics.CLUSTERS_SERVED.remove(name)
        log.info("Cluster %s: stopped serving Slurm cluster %s", run.cluster.key, name)

    # --- the Secret --------------------------------------------------------------------------

    async def _watch_secret(self, c: SlurmCluster, run: _Running) -> None:
        """List + watch the one Secret; keep the client's token equal to it (supervised).

        Failures back off as the Kubernetes watchers do (honouring ``Retry-After``, e.g. the
        429 "storage is (re)initializing" of a restarting API server) and are logged as they
        are (:class:`~slurmbridge.kube.watch.Outage`): a warning when it starts failing,
        repeated with back-off while it lasts, an info line when a watch is open again."""
        holder = run.holder
        outage = Outage(
            f"Cluster {c.key}: watching Secret {c.namespace}/{c.secret_name}", logger=log
        )
        selector = f"metadata.name={c.secret_name}"
        while True:
            try:
                body = await read_raw(
                    self.core.list_namespaced_secret(
                        c.namespace, field_selector=selector, _preload_content=False
                    )
                )
                listing = DECODE_SECRET_LIST.decode(body)
                self._apply(c, holder, listing.items[0] if listing.items else None)
                run.loaded.set()
                version = listing.metadata.resourceVersion
                resp: Any = await self.core.list_namespaced_secret(
                    c.namespace,
                    field_selector=selector,
                    watch=True,
                    resource_version=version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=self.watch_timeout,
                    _request_timeout=self.watch_timeout + 30,
                    _preload_content=False,
                )
                try:
                    await check_stream(resp)
                    outage.recovered()
                    while line := await resp.content.readline():
                        if not line.strip():
                            continue
                        ev = DECODE_WATCH.decode(line)
                        if ev.type == "ERROR":
                            break  # 410 Gone and the like: list again
                        if ev.type in ("ADDED", "MODIFIED"):
                            self._apply(c, holder, DECODE_SECRET.decode(ev.object))
                        elif ev.type == "DELETED":
                            self._apply(c, holder, None)
                finally:
                    resp.release()
            except asyncio.CancelledError:
                raise
            except (ApiStatusError, aiohttp.ClientError, TimeoutError, msgspec.DecodeError) as exc:
                await asyncio.sleep(outage.failed(exc))

    def _apply(self, c: SlurmCluster, holder: TokenHolder, secret: RawSecret | None) -> None:
        token, why = token_from(secret, c)
        if token == holder.token and (token or why == holder.why):
            return
        holder.set(token, why)
        if token:
            log.info("Cluster %s: token loaded from Secret %s", c.key, c.secret_name)
        else:
            log.warning("Cluster %s: no token: %s", c.key, why)
        run = self.running.get(c.name)
        if run is not None and run.poller is not None:
            # Poll now, so a rotated token shows in the status without waiting a period.
            run.poller.poll_soon()
