"""Assemble and run the components of one slurmbridge process.

Components (``--only`` picks a subset; the default runs all of them in one process, which is
what small sites and ``compose.yaml`` use): ``kube-watcher``, ``slurm-poller`` and one per
reconciler (``node_taint``, ``slurm_drain`` …). Every process keeps its own projection.

Start-up order matters: streams exist before anything publishes; the projection has caught up
with the log before producers seed their "last published" state from it and before workers
make decisions. The health endpoints come first, so ``/readyz`` says what a start waits for.

Readiness (``/readyz``, :meth:`App.not_ready`) is the truth about this process's own parts,
each a named check that reads state already in memory: ``started`` (:meth:`App.start` has
returned: every component runs here or is known to run elsewhere; a probe answered while
workers still created their consumers said ready to a process that a SIGTERM then stopped
mid-start), ``nats`` (connected; the embedded server running), ``projection`` (caught up with
the log), ``watch`` (every Kubernetes watcher listed once, and alive), ``slurm`` (every Slurm
cluster this process polls answered a poll with its token accepted, and no token rejected
for more than three poll intervals). A
component whose lease another process holds is not this process's part: a standby is ready
as long as the rest is. The embedded nats-server is restarted when it dies; when it cannot be,
:meth:`App.run_until` returns the reason and ``run`` exits non-zero.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import functools
import itertools
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from pathlib import Path
from typing import Any

from nats.js.kv import KeyValue

import reconcilers
from producers.kube.watch import RESOURCES, NodeWatcher
from producers.slurm.poller import SlurmPoller
from reconcilers.base import Context, ReconcilerSpec
from schemas import streams, subjects, wellknown
from schemas.events import (
    Event,
    KubeDeviceClass,
    KubeNode,
    KubePod,
    SlurmJob,
)
from slurmbridge.clusters import ClusterSupervisor, slurm_seed
from slurmbridge.components import component_names, default_components
from slurmbridge.config import Settings, redact_url
from slurmbridge.effectors.nodes import KubeEffector
from slurmbridge.effectors.nodesets import NodeSetEffector
from slurmbridge.effectors.pods import PodEffector
from slurmbridge.effectors.router import Router
from slurmbridge.effectors.slurm_nodes import SlurmEffector
from slurmbridge.kube import client as kube
from slurmbridge.kube.cache import PodCache
from slurmbridge.kube.errors import NotFound
from slurmbridge.kube.watch import Watcher, seed_from
from slurmbridge.observability.health import HealthServer, Readiness
from slurmbridge.observability.partition_metrics import PartitionMetrics
from slurmbridge.observability.pending_metrics import PendingPodMetrics
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.gate import ListingGate
from slurmbridge.runtime.gcpause import collector_paused, freeze_startup
from slurmbridge.runtime.leases import Lease, open_bucket, reconciler_lease
from slurmbridge.runtime.natsserver import NatsServer, NatsServerError
from slurmbridge.runtime.projection import Projection
from slurmbridge.runtime.publish import ObservationPublisher
from slurmbridge.runtime.tasks import cancel_and_wait, wait_all
from slurmbridge.runtime.worker import Effector, Worker
from slurmbridge.slurm.client import SlurmClient
from slurmbridge.webhook import CachedNamespaceLabels, NamespaceLabels, Policy, WebhookServer

log = logging.getLogger(__name__)

#: A leased component: runs while the lease is held, sets the event once started.
Active = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


def _claim_lookup(
    custom: kube.CustomObjectsApi,
) -> Callable[[str, str, str], Awaitable[tuple[str, ...] | None]]:
    """The webhook's reader of a pod claim's device classes: the ResourceClaim, or the
    ResourceClaimTemplate's ``spec.spec`` (resource.k8s.io/v1); None when absent (404)."""

    async def read(namespace: str, claim: str, template: str) -> tuple[str, ...] | None:
        plural, name = ("resourceclaims", claim) if claim else ("resourceclaimtemplates", template)
        if not name:
            return None
        try:
            obj = await kube.call(
                custom.get_namespaced_custom_object(
                    "resource.k8s.io", "v1", namespace, plural, name
                )
            )
        except NotFound:
            return None
        spec = obj.get("spec") or {}
        if plural == "resourceclaimtemplates":
            spec = spec.get("spec") or {}
        requests = (spec.get("devices") or {}).get("requests") or []
        return tuple(
            str((r.get("exactly") or {}).get("deviceClassName") or "")
            for r in requests
            if r.get("exactly")
        )

    return read


def _class_lookup(
    custom: kube.CustomObjectsApi,
) -> Callable[[str], Awaitable[KubeDeviceClass | None]]:
    """The webhook's reader of a DeviceClass (resource.k8s.io/v1, cluster-scoped): its
    selectors' CEL expressions and whether it has ``config``; None when absent (404)."""

    async def read(name: str) -> KubeDeviceClass | None:
        try:
            obj = await kube.call(
                custom.get_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", name)
            )
        except NotFound:
            return None
        spec = obj.get("spec") or {}
        selectors = tuple(
            (s.get("cel") or {}).get("expression") if s.get("cel") is not None else None
            for s in spec.get("selectors") or []
        )
        return KubeDeviceClass(
            source="k8s", key=name, selectors=selectors, has_config=bool(spec.get("config"))
        )

    return read


def context_of(settings: Settings) -> Context:
    """The reconcilers' context a run with ``settings`` uses (and ``slurmbridge logs
    replay`` uses again)."""
    return Context(
        scheduler_name=settings.scheduler_name,
        cluster=settings.slurm.cluster,
        stuck_pod_grace_s=settings.kube.stuck_pod_grace,
        preemption_grace_s=settings.kube.preemption_grace,
        lost_job_grace_s=settings.kube.lost_job_grace,
        default_partition=settings.partition or "",
        mcs_label=settings.mcs_label or "",
        propagated_node_conditions=tuple(settings.propagated_node_conditions),
        tenancy=settings.tenancy,
        managed_namespaces=tuple(settings.managed_namespaces),
        namespace_selector=settings.managed_namespace_selector is not None,
    )


class UsageError(ValueError):
    """A component name or combination that cannot run (message names it)."""


class HotJobs:
    """The jobs the Slurm poller should watch closely, most urgent first: the jobs this
    process just submitted or cancelled (:meth:`hint`), then, alternately, the newest jobs
    an unbound pod of ours waits for and the ones at the head of Slurm's queue among them.
    Kept up to date from the projection's stream of applied events; asking for the
    first ``limit`` of them costs O(limit) however long the queue (the poller asks for
    ``SlurmPoller.hot_limit`` each round, and asks ``jobs/state`` for them in one request).

    Why both ends of the queue: a job starts when slurmctld reaches it, and it reaches the
    head of its queue first — ``sort_job_queue2`` (slurmctld job_scheduler.c) orders pending
    jobs by partition priority tier, job priority, then submit time, then job id; the main
    scheduler stops at a partition's first job that does not fit. So the oldest waiting jobs
    are the ones that start next, while the newest are those that may start at once on an
    idle cluster. Watching only the newest (a 10 s window, before issue 30 item 6) left the
    head — the jobs about to start — to the 2 s state poll: 57–61 of 72 jobs reached the
    bridge that way at 50 pods/s on 20 nodes (bench/workload.py ``--slurm real``). A job in
    the middle of a long queue is left to the regular state poll (``GET jobs/state`` every
    poll interval) until it nears either end, so 10,000 waiting jobs cost one request of
    ``limit`` ids per round, and a new pod's job is never behind them (Slinky's users
    report the opposite: slurm-bridge#45, every attempt lists all jobs and low-priority pods
    starve).

    The head is ordered by the log's last pending observation of each job (``priority``,
    ``submit_time``, job id; partition tiers are not in the log and are ignored); a job the
    log has not shown pending yet is not in it (it is new, so it is hinted or among the
    newest).
    """

    #: Seconds a hinted job stays hot without being seen in the log (a lost hint expires).
    HINT_TTL = 30.0

    def __init__(self, cluster: str) -> None:
        self.source = subjects.slurm_source(cluster)
        self.waiting: dict[str, int] = {}  # pod key → job id
        self.waiters: collections.Counter[int] = collections.Counter()  # job id → its pods
        self.running: set[int] = set()
        #: jobs an unbound pod waits for, not seen RUNNING, in the order their first pod
        #: began to wait (newest last)
        self.queued: dict[int, None] = {}
        self.seen: set[int] = set()  # jobs the log holds (not ended, not deleted)
        #: job id → (monotonic time of the hint, whether the log held the job then); in
        #: hint order (oldest first), so expiry pops from the front
        self.hinted: dict[int, tuple[float, bool]] = {}
        #: job id → its place in slurmctld's queue, from its last pending observation:
        #: (-priority, submit time, job id), smaller first
        self._rank: dict[int, tuple[int, int, int]] = {}
        #: the ranks of the queued jobs that have one, sorted: the head of the queue first
        self._head: list[tuple[int, int, int]] = []

    def hint(self, job_id: int) -> None:
        """A job this process just submitted or cancelled: hot until the log has its next
        state — a submitted job its first (then, pending, it is :attr:`queued` while its
        pods wait), a cancelled one its end — so its pods are bound, or released, without
        waiting for the next state poll, and no redundant effect is decided in between."""
        self.hinted.pop(job_id, None)  # re-inserted: newest last
        self.hinted[job_id] = (time.monotonic(), job_id in self.seen)

    def observe(self, event: Event, seq: int) -> None:
        """Projection listener."""
        del seq
        if isinstance(event, KubePod):
            gone = event.deleted or event.node_name or event.deleting or event.terminal
            # Job ids start at 1: a "0" label names no job to watch.
            job_id = None if gone else wellknown.slurm_job_id(event.labels)
            self._wait(event.key, job_id or None)
        elif isinstance(event, SlurmJob) and event.source == self.source:
            job_id = int(event.key) if event.key.isdigit() else event.job_id
            ended = event.deleted or event.base_state in wellknown.JOB_ENDED_STATES
            pending = not event.deleted and event.base_state == "PENDING"
            self._rerank(
                job_id, (-(event.priority or 0), event.submit_time, job_id) if pending else None
            )
            if not event.deleted and event.base_state == "RUNNING":
                self.running.add(job_id)
                self.queued.pop(job_id, None)
            else:
                self.running.discard(job_id)
            if ended:
                self.seen.discard(job_id)
            else:
                self.seen.add(job_id)
            hinted = self.hinted.get(job_id)
            if hinted is not None and (ended or not hinted[1]):
                del self.hinted[job_id]

    def _rerank(self, job_id: int, rank: tuple[int, int, int] | None) -> None:
        """Job ``job_id`` now has place ``rank`` in Slurm's queue (None: not pending)."""
        old = self._rank.get(job_id)
        if old == rank:
            return
        if old is not None:
            del self._rank[job_id]
            if job_id in self.queued:
                self._unhead(old)
        if rank is not None:
            self._rank[job_id] = rank
            if job_id in self.queued:
                bisect.insort(self._head, rank)

    def _unhead(self, rank: tuple[int, int, int]) -> None:
        i = bisect.bisect_left(self._head, rank)
        if i < len(self._head) and self._head[i] == rank:
            del self._head[i]

    def _wait(self, pod: str, job_id: int | None) -> None:
        """Pod ``pod`` now waits for ``job_id`` (None: for nothing)."""
        old = self.waiting.get(pod)
        if old == job_id:
            return
        if old is not None:
            del self.waiting[pod]
            self.waiters[old] -= 1
            if self.waiters[old] <= 0:
                del self.waiters[old]
                if old in self.queued:
                    del self.queued[old]
                    if (rank := self._rank.get(old)) is not None:
                        self._unhead(rank)
        if job_id is not None:
            self.waiting[pod] = job_id
            self.waiters[job_id] += 1
            if self.waiters[job_id] == 1 and job_id not in self.running:
                self.queued[job_id] = None
                if (rank := self._rank.get(job_id)) is not None:
                    bisect.insort(self._head, rank)

    def __call__(self, limit: int | None = None) -> list[int]:
        """The first ``limit`` jobs to watch (all when None), each once: the hinted jobs,
        newest first; then the queued ones, alternately the newest and the head of the
        queue. Costs O(limit), however long the queue: the rest is never looked at."""
        self._expire()
        return list(itertools.islice(self._hot(), limit))

    def hinted_jobs(self, limit: int | None = None) -> list[int]:
        """The first ``limit`` hinted jobs (all when None), newest first: what the poller's
        round after a hint names (``SlurmPoller(hinted_jobs=)``)."""
        self._expire()
        return list(itertools.islice(reversed(self.hinted), limit))

    def _expire(self) -> None:
        """Forget the hints older than :attr:`HINT_TTL` (a lost hint expires)."""
        if self.hinted:
            stale = time.monotonic() - self.HINT_TTL
            while self.hinted:
                oldest, (at, _) = next(iter(self.hinted.items()))
                if at >= stale:
                    break
                del self.hinted[oldest]

    def _hot(self) -> Iterator[int]:
        # Consumed at once by __call__, so the dicts do not change under the iterators.
        hinted = self.hinted
        yield from reversed(hinted)
        newest = (j for j in reversed(self.queued) if j not in hinted)
        head = (r[2] for r in self._head if r[2] not in hinted)
        given: set[int] = set()
        for pair in itertools.zip_longest(newest, head):
            for j in pair:
                if j is not None and j not in given:
                    given.add(j)
                    yield j
            if len(given) >= len(self.queued):
                return  # the two ends met: every queued job given once


class App:
    """One slurmbridge process: projection, producers, workers, health.

    ``effector`` replaces the real effectors (benchmarks, dry runs). ``with_health`` False
    skips the metrics/health listeners (tests and benchmarks run many apps per process).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        only: Iterable[str] | None = None,
        effector: Effector | None = None,
        with_health: bool = True,
    ) -> None:
        self.settings = settings
        wanted = tuple(only) if only else default_components()
        unknown = sorted(set(wanted) - set(component_names()))
        if unknown:
            raise UsageError(
                f"--only: unknown component(s) {', '.join(unknown)}; "
                f"choose from {', '.join(component_names())}"
            )
        self.components = wanted
        self.effector_override = effector
        self.with_health = with_health
        self.nats_server: NatsServer | None = None
        self.bus: busmod.Bus | None = None
        self.projection = Projection()
        self.workers: dict[str, Worker] = {}
        self.watcher: NodeWatcher | None = None
        self.extra_watchers: list[Watcher[Any]] = []
        self.hot_jobs = HotJobs(settings.slurm.cluster)
        #: The pods this process's pod watcher delivered, for the pod writes to start from
        #: (empty while no pod watcher runs here).
        self.pod_cache = PodCache()
        self.projection.add_listener(self.hot_jobs.observe)
        self.projection.add_listener(PartitionMetrics().observe)
        self.projection.add_listener(PendingPodMetrics(settings.scheduler_name).observe)
        self.poller: SlurmPoller | None = None
        self.slurm_client: SlurmClient | None = None
        #: Slurm clients by cluster name: the static one and those of served Cluster objects.
        self.clients: dict[str, SlurmClient] = {}
        self.clusters: ClusterSupervisor | None = None
        self.lease_kv: KeyValue | None = None
        self.leases: dict[str, Lease] = {}
        #: The pod effector (None until built, or when an effector_override replaces it).
        self.pod_effector: PodEffector | None = None
        self.effector: Effector | None = None
        self._publish: ObservationPublisher | None = None
        self.kube_api: kube.ApiClient | None = None
        self.health: HealthServer | None = None
        #: The readiness checks (module doc); ``/readyz`` answers from them.
        self.readiness = Readiness()
        #: Set when :meth:`start` returns (the ``started`` readiness check).
        self.started = False
        #: Why this process cannot go on (set once; :meth:`run_until` returns it).
        self.failure: str | None = None
        self._failed = asyncio.Event()
        #: When the NATS connection was lost (monotonic; None while connected).
        self._nats_lost_at: float | None = None
        self.webhook: WebhookServer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.ctx = context_of(settings)
        #: No destructive action for a cluster before the log holds complete listings of
        #: both sides (runtime.gate): the core Kubernetes listings this deployment watches.
        self.gate = ListingGate(
            self.projection,
            kube_listings=(
                "nodes",
                *(("pods",) if settings.kube.watch_pods else ()),
                *(("slurmd-pods",) if settings.kube.watch_node_sets else ()),
            ),
            default_cluster=settings.slurm.cluster,
        )

    def describe_store(self) -> str:
        """Where the log is stored, for errors about it: the embedded server's store
        directory and its free space (``ENOSPC`` when none is left), or the NATS server's
        address (its store is the server's; never the URL's credentials)."""
        if self.nats_server is not None:
            store = self.nats_server.store_dir
            try:
                free = shutil.disk_usage(store).free
            except OSError as exc:
                return f"store {store}: {exc.strerror}"
            full = ", ENOSPC" if free < 64 * 1024 else ""
            return f"store {store}, {free // 1024} KiB free{full}"
        return f"the store of NATS server {redact_url(self.settings.nats.url or '')}"

    @property
    def nats_url(self) -> str:
        """The NATS URL in use (the embedded server's when none was configured)."""
        if self.settings.nats.url:
            return self.settings.nats.url
        if self.nats_server is None:
            raise RuntimeError("embedded NATS not started")
        return self.nats_server.url

    async def start(self) -> None:
        """Start everything; returns once workers run (raises on configuration problems).

        The phases run in the order controller-runtime's manager starts its runnables
        (pkg/manager/internal.go ``controllerManager.Start``: HTTP servers, webhooks, caches
        synced, then the leader-elected runnables): the webhook, the health listeners, the
        log, the projection caught up with it, the API clients, and last the producers and
        workers, each under its lease. Module docstring: why the order matters.
        """
        if "webhook" in self.components:
            await self._start_webhook()
            if self.components == ("webhook",):
                return  # the webhook alone needs neither NATS nor Slurm
        self._add_checks()
        await self._start_health()
        bus = await self._start_log()
        await self._catch_up_projection(bus)
        await self._open_kube()
        await self._open_slurm()
        publish = ObservationPublisher(bus, ack_timeout=self.settings.nats.ack_timeout)
        self._publish = publish
        if self.settings.leases.enabled:
            self.lease_kv = await open_bucket(bus.js, replicas=self.settings.nats.replicas)
        ready = [*self._start_producers(publish), *self._start_workers()]
        if ready:
            # Every lease was tried once: each component is active here or known to be
            # active elsewhere.
            await wait_all([r.wait() for r in ready], timeout=60)
        self.started = True

    async def _start_health(self) -> None:
        """The metrics and health listeners, first, so ``/readyz`` says what a start waits
        for (none when ``with_health`` is False or no port is configured)."""
        obs = self.settings.observability
        if not self.with_health or not (obs.metrics_port or obs.health_port):
            return
        self.health = HealthServer(
            bind=obs.bind,
            metrics_port=obs.metrics_port,
            health_port=obs.health_port,
            readiness=self.readiness,
        )
        await self.health.start()

    async def _start_log(self) -> busmod.Bus:
        """The log: the embedded nats-server when no URL is configured (kept running by
        :meth:`_keep_nats`), the connection, and the streams, created before anything
        publishes."""
        s = self.settings
        if not s.nats.url:
            store = Path(s.nats.store_dir) if s.nats.store_dir else None
            self.nats_server = NatsServer(store_dir=store)
            await self.nats_server.start()
            log.info(
                "embedded nats-server at %s (store %s)",
                self.nats_server.url,
                self.nats_server.store_dir,
            )
            self._spawn(self._keep_nats(self.nats_server), "nats-server")
        self.bus = await busmod.connect(
            s.nats,
            self.nats_url,
            name=f"slurmbridge {s.instance_id}",
            on_state=self._on_nats_state,
        )
        await self.bus.ensure_streams(
            streams.stream_specs(
                replicas=s.nats.replicas,
                obs_max_msgs_per_subject=s.nats.obs_max_msgs_per_subject,
                obs_max_age_s=s.nats.obs_max_age,
                act_max_age_s=s.nats.act_max_age,
            )
        )
        return self.bus

    async def _catch_up_projection(self, bus: busmod.Bus) -> None:
        """Rebuild the projection from the log and wait until it has caught up (at most
        300 s), before producers seed from it and workers decide."""
        # The rebuild makes a long-lived object graph per observation and frees almost
        # nothing, so collections during it only re-scan that growing graph: paused until
        # caught up (bench/scale.py catchup_s_1m; 200,000 objects: 4.1 → 3.4 s).
        with collector_paused():
            await self.projection.start(bus)
            await self.projection.wait_caught_up(timeout=300)
        # The rebuilt projection is long-lived: move it (and everything imported so far) out of
        # the collector's reach, so full collections stay short instead of pausing the event
        # loop in proportion to the size of the cluster.
        freeze_startup()

    async def _open_kube(self) -> None:
        """The Kubernetes API client, when a component needs one and one is configured."""
        s = self.settings
        # The poller process also runs the pollers of Cluster objects, which read their token
        # Secrets: it needs the Kubernetes API even without the watchers.
        needs_kube = (
            "kube-watcher" in self.components
            or "slurm-poller" in self.components
            or (
                self.effector_override is None
                and any(c in reconcilers.ALL for c in self.components)
            )
        )
        if needs_kube and (s.kube.kubeconfig or s.kube.in_cluster):
            self.kube_api = await kube.api_client(s.kube)

    async def _open_slurm(self) -> None:
        """The static cluster's Slurm client, its API version negotiated, when the poller or
        the real effectors run and a URL is configured."""
        s = self.settings
        if not s.slurm_url or (
            "slurm-poller" not in self.components and self.effector_override is not None
        ):
            return
        self.slurm_client = SlurmClient(
            s.slurm_url,
            token_file=Path(s.slurm.token_file) if s.slurm.token_file else None,
            user_name=s.slurm.user_name,
            api_version=s.slurm.api_version,
            timeout=s.slurm.timeout,
        )
        await self.slurm_client.negotiate()
        self.clients[s.slurm.cluster] = self.slurm_client
        log.info(
            "Slurm cluster %s at %s speaks %s",
            s.slurm.cluster,
            s.slurm_url,
            self.slurm_client.api_version,
        )

    def _start_producers(self, publish: ObservationPublisher) -> list[asyncio.Event]:
        """The Kubernetes watchers and the Slurm poller, each under its lease, and the
        supervisor of Cluster objects; the events set once each leased part has started.

        Raises:
            UsageError: a producer is asked for without the API it reads.
        """
        s = self.settings
        ready: list[asyncio.Event] = []
        if "kube-watcher" in self.components:
            if self.kube_api is None:
                raise UsageError(
                    "kube-watcher: no Kubernetes API configured "
                    "($.kube.kubeconfig or $.kube.inCluster)"
                )
            ready.append(self._leased("kube-watchers", self._run_watchers))
        if "slurm-poller" in self.components:
            if self.slurm_client is None:
                raise UsageError("slurm-poller: no Slurm REST API configured ($.slurm.url)")
            ready.append(self._leased(f"poller.{s.slurm.cluster}", self._run_poller))
        polls = "slurm-poller" in self.components
        if self.kube_api is not None and (
            polls or (self.effector_override is None and "nodeset" in self.components)
        ):
            # Cluster objects: a client each where effectors need one, a poller each in the
            # process that polls (reconcilers.cluster, slurmbridge.clusters).
            self.clusters = ClusterSupervisor(
                projection=self.projection,
                kube_api=self.kube_api,
                clients=self.clients,
                ctx=self.ctx,
                publish=publish if polls else None,
                producer=s.instance_id,
                poll_interval=s.slurm.poll_interval,
                job_relist_interval=s.slurm.job_relist_interval,
                timeout=s.slurm.timeout,
                watch_timeout=s.kube.watch_timeout,
                leased=self._hold if s.leases.enabled else None,
                catch_up=self.catch_up,
            )
            self._spawn(self.clusters.run(), "clusters")
        return ready

    def _start_workers(self) -> list[asyncio.Event]:
        """The effectors, and one worker per reconciler component and work partition, each
        under its lease; the events set once each has started or is known to run
        elsewhere."""
        n = self.settings.worker.partitions
        indices = self.settings.worker.partition_indices or list(range(n))
        self.effector = self.effector_override or Router(
            KubeEffector(self.kube_api) if self.kube_api else None,
            SlurmEffector(self.clients),
            self._pod_effector(),
            NodeSetEffector(self.kube_api, self.clients) if self.kube_api else None,
        )
        ready: list[asyncio.Event] = []
        for name in self.components:
            spec = reconcilers.ALL.get(name)
            if spec is None:
                continue
            ready.extend(
                self._leased(
                    reconciler_lease(name, index, n),
                    functools.partial(self._run_worker, spec, index),
                )
                for index in indices
            )
        return ready

    # --- readiness and failure -----------------------------------------------------------

    def _add_checks(self) -> None:
        """Register the readiness checks of the components this process runs (module doc)."""
        add = self.readiness.add_check
        add("started", lambda: None if self.started else "starting")
        add("nats", self._nats_problem)
        add("projection", self._projection_problem)
        if "kube-watcher" in self.components:
            add("watch", self._watch_problem)
        if "slurm-poller" in self.components:
            add("slurm", self._slurm_problem)
        if any(c in reconcilers.ALL for c in self.components):
            add("log", self._log_problem)

    def not_ready(self) -> dict[str, str]:
        """The failing readiness checks with their reasons (empty: ready)."""
        return self.readiness.failing()

    def _standby(self, lease: str) -> bool:
        """True when this process competes for ``lease`` without holding it: the component
        runs elsewhere (or will here at the next attempt), so it is not this process's part
        to be ready in. A lease not tried yet is not standby: the component is starting."""
        if self.lease_kv is None:
            return False
        held = self.leases.get(lease)
        return held is not None and not held.held

    def _nats_problem(self) -> str | None:
        server = self.nats_server
        if server is not None and server.down is not None:
            return f"embedded nats-server {server.down}"
        if self.bus is None:
            return "connecting to NATS"
        if not self.bus.nc.is_connected:
            lost = self._nats_lost_at
            return "not connected to NATS" + (
                f" for {time.monotonic() - lost:.1f} s (reconnecting)" if lost else ""
            )
        return None

    def _log_problem(self) -> str | None:
        """A worker's last write-ahead record was refused (runtime.worker): it performs
        nothing until the stream stores them again."""
        refused = sorted(
            f"{name}: {w.log_refusal}" for name, w in self.workers.items() if w.log_refusal
        )
        return "; ".join(refused) or None

    def _projection_problem(self) -> str | None:
        if self.projection.caught_up:
            return None
        return f"catching up with the log (applied up to seq {self.projection.applied_seq})"

    def _watch_problem(self) -> str | None:
        if self._standby("kube-watchers"):
            return None
        if self.watcher is None:
            return "watchers not started yet"
        limit = self.settings.kube.watch_timeout + 60
        problems = [w.problem(max_age=limit) for w in (self.watcher, *self.extra_watchers)]
        return "; ".join(p for p in problems if p) or None

    def _slurm_problem(self) -> str | None:
        s = self.settings
        polled: list[tuple[str, SlurmPoller | None]] = []
        if self.slurm_client is not None:
            polled.append((s.slurm.cluster, self.poller))
        if self.clusters is not None and self.clusters.publish is not None:
            polled.extend((name, run.poller) for name, run in sorted(self.clusters.running.items()))
        now, grace = time.monotonic(), 3 * s.slurm.poll_interval
        problems = []
        for name, poller in polled:
            if self._standby(f"poller.{name}"):
                continue
            if poller is None:
                problems.append(f'cluster "{name}": poller not started yet')
                continue
            problem = poller.health.problem(now=now, grace=grace)
            if problem is not None:
                problems.append(f'cluster "{name}": {problem}')
        return "; ".join(problems) or None

    async def _on_nats_state(self, state: str) -> None:
        if state == "disconnected":
            self._nats_lost_at = self._nats_lost_at or time.monotonic()
        elif state == "reconnected":
            self._nats_lost_at = None

    async def _keep_nats(self, server: NatsServer) -> None:
        """Restart the embedded nats-server when it dies (:meth:`NatsServer.supervise`);
        when it cannot be, this process fails (:meth:`run_until`)."""
        try:
            await server.supervise(restarts=self.settings.nats.embedded_restarts)
        except NatsServerError as exc:
            log.error("embedded %s", exc)
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
            last = f" (its log: {lines[-1]})" if len(lines) > 1 else ""
            self._fail(f"embedded {lines[0]}{last}")

    def _fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason
        self._failed.set()

    async def run_until(self, stop: asyncio.Event) -> str | None:
        """Run until ``stop`` is set (returns None) or this process cannot go on (returns
        why: its embedded nats-server could not be restarted)."""
        waits = {
            asyncio.ensure_future(stop.wait()),
            asyncio.ensure_future(self._failed.wait()),
        }
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        return None if stop.is_set() else self.failure

    # --- leased components ----------------------------------------------------------------

    def _leased(self, name: str, active: Active) -> asyncio.Event:
        """Run ``active`` while this process holds lease ``name`` (always, without leases).
        The returned event is set once ``active`` has started here, or once the lease was
        found held by another process."""
        ready = asyncio.Event()
        if self.lease_kv is None:
            self._spawn(active(ready), name)
        else:
            self._spawn(self._hold(name, lambda: active(ready), on_standby=ready.set), name)
        return ready

    async def _hold(
        self,
        name: str,
        active: Callable[[], Coroutine[Any, Any, None]],
        on_standby: Callable[[], None] | None = None,
    ) -> None:
        assert self.bus is not None and self.lease_kv is not None
        lease = Lease(
            self.bus.js,
            self.lease_kv,
            name,
            self.settings.instance_id,
            ttl=self.settings.leases.ttl,
        )
        self.leases[name] = lease
        await lease.hold(active, on_standby=on_standby)

    async def catch_up(self) -> None:
        """Wait until the projection has applied everything in the log now: a newly elected
        producer seeds from it, so it must not miss what the previous holder published."""
        assert self.bus is not None
        info = await self.bus.js.stream_info(streams.OBS_STREAM)
        await self.projection.wait_caught_up()
        if info.state.messages and not await self.projection.wait_applied(
            info.state.last_seq, timeout=300
        ):
            raise TimeoutError(f"projection did not reach seq {info.state.last_seq}")

    async def _run_watchers(self, ready: asyncio.Event) -> None:
        s, api, publish = self.settings, self.kube_api, self._publish
        assert api is not None and publish is not None
        await self.catch_up()
        self.watcher = NodeWatcher(
            api,
            publish,
            producer=s.instance_id,
            seed=seed_from(self.projection.values(KubeNode, subjects.KUBE_SOURCE)),
            label_selector=s.kube.node_label_selector,
            send=publish.send,
            watch_timeout=s.kube.watch_timeout,
        )
        watchers: list[Watcher[Any]] = []

        def add(cls: type[Watcher[Any]], observes: type[Event], **extra: Any) -> None:
            watchers.append(
                cls(
                    api,
                    publish,
                    producer=s.instance_id,
                    seed=seed_from(self.projection.values(observes, subjects.KUBE_SOURCE)),
                    send=publish.send,
                    watch_timeout=s.kube.watch_timeout,
                    **extra,
                )
            )

        for r in RESOURCES:
            if getattr(s.kube, r.switch):
                scheduler = {"scheduler_name": s.scheduler_name} if r.scheduler else {}
                cache = {"pod_cache": self.pod_cache} if r.caches_pods else {}
                add(r.watcher, r.observes, **r.extra, **scheduler, **cache)
        self.extra_watchers = watchers
        tasks = [
            asyncio.create_task(self.watcher.run(), name="kube-watcher"),
            *(asyncio.create_task(w.run(), name=f"watch-{w.resource}") for w in watchers),
        ]
        ready.set()
        try:
            await asyncio.gather(*tasks)
        finally:
            await cancel_and_wait(tasks)
            self.watcher = None
            self.extra_watchers = []

    async def _run_poller(self, ready: asyncio.Event) -> None:
        s = self.settings
        assert self.slurm_client is not None and self._publish is not None
        await self.catch_up()
        self.poller = SlurmPoller(
            self.slurm_client,
            self._publish,
            cluster=s.slurm.cluster,
            producer=s.instance_id,
            poll_interval=s.slurm.poll_interval,
            seed=slurm_seed(self.projection, s.slurm.cluster),
            hot_jobs=self.hot_jobs,
            hinted_jobs=self.hot_jobs.hinted_jobs,
            hot_interval=s.slurm.pending_job_poll_interval,
            job_relist_interval=s.slurm.job_relist_interval,
        )
        ready.set()
        try:
            await self.poller.run()
        finally:
            self.poller = None

    async def _run_worker(self, spec: ReconcilerSpec, index: int, ready: asyncio.Event) -> None:
        s = self.settings
        assert self.bus is not None and self.effector is not None
        name = reconciler_lease(spec.name, index, s.worker.partitions)
        lease = self.leases.get(name)
        worker = Worker(
            spec,
            bus=self.bus,
            projection=self.projection,
            effector=self.effector,
            ctx=self.ctx,
            settings=s.worker,
            instance_id=s.instance_id,
            partition=(index, s.worker.partitions),
            fence=lease.token if lease is not None else None,
            gate=self.gate,
            describe_store=self.describe_store,
        )
        key = (
            spec.name if s.worker.partitions == 1 else f"{spec.name}[{index}/{s.worker.partitions}]"
        )
        if spec.name == "placement" and self.pod_effector is not None:
            # Another process may have submitted for these keys until now: list once more.
            self.pod_effector.relist()
        try:
            # Inside: a worker half started (a consumer not created in time) is stopped too.
            await worker.start()
            self.workers[key] = worker
            ready.set()
            await asyncio.Event().wait()  # until the lease is lost or the app stops
        finally:
            self.workers.pop(key, None)
            await worker.stop()

    async def _start_webhook(self) -> None:
        s = self.settings
        namespace_labels: NamespaceLabels | None = None
        if s.managed_namespace_selector is not None and (s.kube.kubeconfig or s.kube.in_cluster):
            self.kube_api = self.kube_api or await kube.api_client(s.kube)
            core = kube.CoreV1Api(self.kube_api)

            async def read(name: str) -> dict[str, str]:
                ns = await core.read_namespace(name)
                return dict(ns.metadata.labels or {})

            namespace_labels = CachedNamespaceLabels(read)
        elif s.managed_namespace_selector is not None:
            log.warning(
                "webhook: $.managedNamespaceSelector is set but no Kubernetes API is configured "
                "($.kube.kubeconfig or $.kube.inCluster): namespaces count as unlabelled"
            )
        # The webhook reads claims only where it has API access anyway (the chart mounts a
        # token only with a managedNamespaceSelector); without, placement checks the classes.
        claim_lookup = class_lookup = None
        if self.kube_api is not None:
            claim_lookup = _claim_lookup(kube.CustomObjectsApi(self.kube_api))
            class_lookup = _class_lookup(kube.CustomObjectsApi(self.kube_api))
        self.webhook = WebhookServer(
            Policy(
                scheduler_name=s.scheduler_name,
                managed_namespaces=frozenset(s.managed_namespaces),
                managed_namespace_selector=s.managed_namespace_selector,
                service_account=s.webhook.service_account,
                tenancy=s.tenancy,
            ),
            bind=s.webhook.bind,
            port=s.webhook.port,
            cert_file=s.webhook.cert_file,
            key_file=s.webhook.key_file,
            namespace_labels=namespace_labels,
            claim_lookup=claim_lookup,
            class_lookup=class_lookup,
        )
        try:
            await self.webhook.start()
        except (ValueError, OSError) as exc:  # no or bad certificate (ssl.SSLError), port taken
            raise UsageError(f"webhook: {exc}") from None

    def _pod_effector(self) -> PodEffector | None:
        if self.kube_api is None or self.slurm_client is None:
            return None
        pods = PodEffector(
            self.kube_api,
            {self.settings.slurm.cluster: self.slurm_client},
            pod_cache=self.pod_cache,
        )

        def changed(cluster: str, job_id: int) -> None:
            if cluster == self.settings.slurm.cluster:
                self.hot_jobs.hint(job_id)
                if self.poller is not None:
                    self.poller.wake()

        pods.on_job_changed = changed
        self.pod_effector = pods
        return pods

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)

        def done(t: asyncio.Task[None]) -> None:
            if not t.cancelled() and t.exception() is not None:
                log.error("component %s stopped: %r", name, t.exception())

        task.add_done_callback(done)
        self._tasks.append(task)

    async def stop(self, *, crash: bool = False) -> None:
        """Stop workers, producers, projection, connections and the embedded server, and
        release the leases. ``crash``: act as a killed process would — stop acting at once
        but leave the leases to expire (failover tests)."""
        if crash:
            for lease in self.leases.values():
                lease.abandon()
        # Workers, pollers and watchers stop with their tasks (each in its lease's task).
        await cancel_and_wait(self._tasks)
        self.workers.clear()
        self._tasks.clear()
        if self.health is not None:
            await self.health.stop()
        if self.webhook is not None:
            await self.webhook.stop()
        await self.projection.stop()
        if self.bus is not None:
            with contextlib.suppress(Exception):
                await self.bus.close()
        if self.slurm_client is not None:
            await self.slurm_client.aclose()
        if self.kube_api is not None:
            await self.kube_api.close()
        if self.nats_server is not None:
            await self.nats_server.stop()

    async def idle(self) -> bool:
        """True when every worker has nothing queued or in flight."""
        return all(w.idle for w in self.workers.values())
