"""The reconciler runtime against a real nats-server: keyed queue, outcomes, dead letters,
read-your-trigger and resuming from the durable consumer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import msgspec
import nats.errors
import pytest

from reconcilers import slurm_drain
from reconcilers.base import Context, Decision, ReconcilerSpec
from schemas import actions, streams, subjects
from schemas.actions import (
    AnyAction,
    BindPod,
    DrainSlurmNode,
    PodRef,
    RecordEvent,
    UndrainSlurmNode,
)
from schemas.events import Event, KubeNode, KubePod, SlurmNode
from slurmbridge.config import NatsSettings, WorkerSettings
from slurmbridge.runtime import bus as busmod
from slurmbridge.runtime.natsserver import NatsServer
from slurmbridge.runtime.outcomes import EffectResult, GiveUp, Transient
from slurmbridge.runtime.projection import Projection
from slurmbridge.runtime.publish import ObservationPublisher
from slurmbridge.runtime.worker import Worker

CTX = Context(scheduler_name="sched", cluster="c1")
#: slurm_drain's durable consumers: one per trigger kind.
DRAIN_CONSUMERS = ("rc-slurm_drain-KubeNode", "rc-slurm_drain-SlurmNode")


async def until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.01)


def outcomes(raw: list[bytes]) -> list[actions.ActionRecord]:
    """The outcome records among ``raw`` (the write-ahead ``intended`` ones left out)."""
    records = [actions.decode_record(d) for d in raw]
    return [r for r in records if r.outcome != "intended"]


@dataclass
class World:
    """An effector that records actions and can be told to fail transiently."""

    calls: list[AnyAction] = field(default_factory=list)
    fail_times: int = 0

    async def apply(self, action: AnyAction) -> EffectResult:
        if self.fail_times and not isinstance(action, RecordEvent):
            self.fail_times -= 1
            raise Transient("injected", delay=0.05)
        self.calls.append(action)
        return EffectResult("ok")

    def drains(self) -> list[AnyAction]:
        return [a for a in self.calls if isinstance(a, DrainSlurmNode | UndrainSlurmNode)]


class Harness:
    def __init__(self, server: NatsServer) -> None:
        self.server = server
        self.bus: busmod.Bus | None = None
        self.projection = Projection()
        self.worker: Worker | None = None
        self.world = World()
        self.seq = 0

    async def start(self, settings: WorkerSettings | None = None) -> None:
        self.bus = await busmod.connect(NatsSettings(), self.server.url)
        await self.bus.ensure_streams(streams.stream_specs(storage="file"))
        self.projection = Projection()
        await self.projection.start(self.bus)
        await self.projection.wait_caught_up(10)
        self.worker = self.new_worker(settings or WorkerSettings(max_deliver=5))
        await self.worker.start()

    def new_worker(self, settings: WorkerSettings, instance_id: str = "test") -> Worker:
        """A slurm_drain worker on this harness's bus, projection and world (not started)."""
        assert self.bus is not None
        return Worker(
            slurm_drain.SPEC,
            bus=self.bus,
            projection=self.projection,
            effector=self.world,
            ctx=CTX,
            settings=settings,
            instance_id=instance_id,
        )

    async def stop(self) -> None:
        if self.worker:
            await self.worker.stop()
        await self.projection.stop()
        if self.bus:
            await self.bus.close()

    async def publish(self, *evs: Event) -> None:
        assert self.bus is not None
        self.seq += 1
        await ObservationPublisher(self.bus)([(e, f"t{self.seq}-{i}") for i, e in enumerate(evs)])

    async def records(self, stream: str, subject: str) -> list[bytes]:
        assert self.bus is not None
        out: list[bytes] = []
        sub = await self.bus.js.subscribe(subject, stream=stream, ordered_consumer=True)
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=0.3)
                except Exception:
                    return out
                out.append(msg.data)
        finally:
            await sub.unsubscribe()


@pytest.fixture
async def h(nats_server: NatsServer) -> AsyncIterator[Harness]:
    harness = Harness(nats_server)
    await harness.start()
    try:
        yield harness
    finally:
        await harness.stop()


def kn(name: str, unschedulable: bool) -> KubeNode:
    return KubeNode(source="k8s", key=name, uid="u-" + name, unschedulable=unschedulable)


def sn(name: str, *state: str, reason: str = "") -> SlurmNode:
    return SlurmNode(
        source="slurm:c1", key=name, cluster="c1", state=state or ("IDLE",), reason=reason
    )


async def test_cordon_drains_once_and_records_action(h: Harness) -> None:
    await h.publish(sn("n1"), kn("n1", unschedulable=True))
    await until(lambda: len(h.world.drains()) == 1)
    a = h.world.drains()[0]
    assert isinstance(a, DrainSlurmNode)
    assert a.reason == "slurm-bridge: Corresponding Kubernetes node (n1) is unschedulable"
    recs = outcomes(await h.records(streams.ACT_STREAM, "bridge.act.>"))
    drains = [r for r in recs if isinstance(r.action, DrainSlurmNode)]
    assert len(drains) == 1
    assert drains[0].outcome == "ok"
    assert drains[0].cause_seq > 0
    assert drains[0].key == "n1"


async def test_malformed_payload_is_dead_lettered_and_consumer_continues(h: Harness) -> None:
    assert h.bus is not None
    await h.bus.publish(
        subjects.obs_subject("k8s", "KubeNode", "bad"), b'{"kind":"KubeNode","key":'
    )
    await h.bus.publish(
        subjects.obs_subject("k8s", "KubeNode", "wrong"), b'{"kind":"KubeNode","source":3}'
    )
    await h.bus.publish("bridge.obs.k8s.Unknown.x", b"{}")
    await h.publish(sn("n2"), kn("n2", unschedulable=True))
    await until(lambda: len(h.world.drains()) == 1)
    async with asyncio.timeout(10):
        while True:
            dlq = [
                actions.decode_dead_letter(d)
                for d in await h.records(streams.DLQ_STREAM, "bridge.dlq.>")
            ]
            if len(dlq) >= 2:
                break
    by_subject = {d.subject: d for d in dlq}
    bad = by_subject["bridge.obs.k8s.KubeNode.bad"]
    assert bad.reconciler == "slurm_drain"
    assert bad.reason.startswith("malformed observation:")
    assert bad.data == b'{"kind":"KubeNode","key":'
    assert "Expected `str`, got `int`" in by_subject["bridge.obs.k8s.KubeNode.wrong"].reason
    # "Unknown" kind is not in this consumer's filter: nothing to dead-letter for it here.
    assert "bridge.obs.k8s.Unknown.x" not in by_subject
    assert h.projection.malformed >= 2


async def test_transient_failure_naks_and_retries_until_done(h: Harness) -> None:
    h.world.fail_times = 2
    await h.publish(sn("n3"), kn("n3", unschedulable=True))
    await until(lambda: len(h.world.drains()) == 1)
    recs = outcomes(await h.records(streams.ACT_STREAM, "bridge.act.>"))
    assert [r.outcome for r in recs if isinstance(r.action, DrainSlurmNode)] == [
        "retry",
        "retry",
        "ok",
    ]


async def test_exhausted_retries_go_to_dead_letter(nats_server: NatsServer) -> None:
    h = Harness(nats_server)
    await h.start(WorkerSettings(max_deliver=3))
    try:
        h.world.fail_times = 1000
        await h.publish(sn("n4"), kn("n4", unschedulable=True))
        async with asyncio.timeout(15):
            while True:
                dlq = [
                    actions.decode_dead_letter(d)
                    for d in await h.records(streams.DLQ_STREAM, "bridge.dlq.>")
                ]
                if dlq:
                    break
        assert "exhausted max_deliver (3)" in dlq[0].reason
        assert dlq[0].num_delivered == 3
    finally:
        await h.stop()


async def test_a_reconcile_no_message_asked_for_is_retried_when_its_effect_fails(
    nats_server: NatsServer,
) -> None:
    # A reconcile of the start-up resync (or of a requeue timer, or of a key the gate let
    # go) has no message to nak. Its retry used to be lost: the chaos test found a group's
    # job left RUNNING for good after its pods had all succeeded, because the cancel was
    # tried on a timer while slurmrestd failed, and nothing more happened to the group.
    h1 = Harness(nats_server)
    await h1.start(WorkerSettings(max_deliver=2))
    try:
        h1.world.fail_times = 1000
        await h1.publish(sn("n9"), kn("n9", unschedulable=True))
        async with asyncio.timeout(15):
            while not await h1.records(streams.DLQ_STREAM, "bridge.dlq.>"):
                pass
    finally:
        await h1.stop()
    # The trigger is dead-lettered: the drain it wanted is left only to the resync.
    h2 = Harness(nats_server)
    h2.world.fail_times = 2
    await h2.start(WorkerSettings(max_deliver=2))
    try:
        await until(lambda: len(h2.world.drains()) == 1)
        assert isinstance(h2.world.drains()[0], DrainSlurmNode)
        assert h2.world.fail_times == 0
    finally:
        await h2.stop()


async def test_triggers_for_one_key_coalesce(h: Harness) -> None:
    evs: list[Event] = [sn("n5")]
    evs += [kn("n5", unschedulable=bool(i % 2)) for i in range(50)]
    evs.append(kn("n5", unschedulable=True))
    await h.publish(*evs)
    await until(lambda: h.worker is not None and h.worker.idle and len(h.world.drains()) >= 1)
    await asyncio.sleep(0)  # let the last completions run
    # Level-based: the final state is cordoned, so the last effect must be a drain, and far
    # fewer reconciles than triggers ran.
    assert isinstance(h.world.drains()[-1], DrainSlurmNode)
    assert h.worker is not None
    assert h.worker.reconciles < 52


async def test_restart_resumes_from_durable_consumer(nats_server: NatsServer) -> None:
    # A short ack_wait: a message the dying worker's last pull request took is redelivered
    # within seconds (in production, within ack_wait).
    quick = WorkerSettings(max_deliver=5, ack_wait=2.0)
    h1 = Harness(nats_server)
    await h1.start(quick)
    await h1.publish(sn("a"), kn("a", unschedulable=True))
    await until(lambda: len(h1.world.drains()) == 1)
    # The poller observes the drain; then the worker dies.
    await h1.publish(
        sn(
            "a",
            "IDLE",
            "DRAIN",
            reason="slurm-bridge: Corresponding Kubernetes node (a) is unschedulable",
        )
    )
    await until(lambda: h1.worker is not None and h1.worker.idle and h1.projection.applied_seq >= 3)
    await h1.stop()
    # While no worker runs, node b is cordoned.
    h0 = Harness(nats_server)
    h0.bus = await busmod.connect(NatsSettings(), nats_server.url)
    h0.seq = 50
    await h0.publish(sn("b"), kn("b", unschedulable=True))
    await h0.bus.close()

    h2 = Harness(nats_server)
    await h2.start(quick)
    try:
        await until(lambda: any(getattr(x, "node", "") == "b" for x in h2.world.drains()))
        await until(lambda: h2.worker is not None and h2.worker.idle)
        # "a" is drained in its latest observation: the new worker does not drain it again.
        # ("b" may be asked twice — start-up resync and its trigger — as this fake world never
        # reports the drain back; the real effector re-reads the node and would find it done.)
        assert {getattr(x, "node", "") for x in h2.world.drains()} == {"b"}
        assert h2.bus is not None
        async with asyncio.timeout(10):
            for durable in DRAIN_CONSUMERS:
                while (await h2.bus.js.consumer_info(streams.OBS_STREAM, durable)).num_ack_pending:
                    await asyncio.sleep(0.02)
        for durable in DRAIN_CONSUMERS:
            info = await h2.bus.js.consumer_info(streams.OBS_STREAM, durable)
            assert info.num_pending == 0
    finally:
        await h2.stop()


def test_dead_letter_round_trip() -> None:
    d = actions.DeadLetter(reconciler="r", subject="s", stream_seq=1, reason="x", data=b"\x00\xff")
    assert actions.decode_dead_letter(msgspec.json.encode(d)) == d


@dataclass
class SlowBinds:
    """Counts how many effects run at once; BindPod of ``fail`` raises Transient."""

    fail: str = ""
    running: int = 0
    peak: int = 0
    done: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    async def apply(self, action: AnyAction) -> EffectResult:
        if isinstance(action, RecordEvent):
            self.events.append(action.name)
            return EffectResult("ok")
        assert isinstance(action, BindPod)
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(0.05)
            if action.pod.name == self.fail:
                raise Transient("injected", delay=30)
            self.done.append(action.pod.name)
            return EffectResult("ok")
        finally:
            self.running -= 1


def _binds_spec(pods: tuple[str, ...]) -> ReconcilerSpec:
    def decide(_: object) -> Decision:
        acts: list[AnyAction] = []
        for name in pods:
            acts.append(
                BindPod(pod=PodRef(namespace="ns", name=name), node="n", slurm_node="n", job_id=1)
            )
            acts.append(
                RecordEvent(api_version="v1", object_kind="Pod", name=name, reason="R", message="m")
            )
        return Decision(actions=tuple(acts), reason="bind the group")

    return ReconcilerSpec(
        name="binds",
        keys={KubeNode: lambda ev, store, ctx: [ev.key]},
        key_kind="KubeNode",
        all_keys=lambda store, ctx: [],
        view=lambda store, key, ctx: key,
        decide=decide,
    )


@contextlib.asynccontextmanager
async def running(
    server: NatsServer, spec: ReconcilerSpec, effector: SlowBinds
) -> AsyncIterator[tuple[busmod.Bus, Worker]]:
    """A worker for ``spec`` against ``server``, started; stopped on exit."""
    bus = await busmod.connect(NatsSettings(), server.url)
    await bus.ensure_streams(streams.stream_specs(storage="file"))
    projection = Projection()
    await projection.start(bus)
    await projection.wait_caught_up(10)
    worker = Worker(
        spec,
        bus=bus,
        projection=projection,
        effector=effector,
        ctx=CTX,
        settings=WorkerSettings(max_deliver=5),
        instance_id="test",
    )
    try:
        yield bus, worker
    finally:
        await worker.stop()
        await projection.stop()
        await bus.close()


@pytest.mark.parametrize("fail", ["", "p1"])
async def test_independent_actions_run_concurrently_and_events_follow_their_own(
    nats_server: NatsServer, fail: str
) -> None:
    """A group's binds are performed at once; each Event runs only after its own bind
    succeeded; one bind failing retries the trigger without losing the others' records."""
    effector = SlowBinds(fail=fail)
    async with running(nats_server, _binds_spec(("p0", "p1", "p2")), effector) as (bus, worker):
        await worker.start()
        await ObservationPublisher(bus)([(kn("n1", unschedulable=False), "m1")])
        want = {"p0", "p2"} if fail else {"p0", "p1", "p2"}
        await until(lambda: set(effector.done) == want and worker.idle)
        assert effector.peak == 3
        assert sorted(effector.events) == sorted(want)  # no Event for the failed bind
        info = await bus.js.stream_info(streams.ACT_STREAM)
        kinds = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            rec = actions.decode_record((await bus.js.get_msg(streams.ACT_STREAM, seq)).data)
            if rec.outcome == "intended":
                continue
            kinds.append((type(rec.action).__name__, rec.outcome))
        assert kinds.count(("BindPod", "ok")) == len(want)
        assert kinds.count(("BindPod", "retry")) == (1 if fail else 0)
        assert kinds.count(("RecordEvent", "ok")) == len(want)


async def test_an_action_just_performed_is_not_repeated_until_its_expectation_lapses(
    nats_server: NatsServer,
) -> None:
    """Two triggers in a row decide the same bind: it is performed once; when the log still
    does not show its effect after EXPECT_S, the key is looked at again and it is redone."""
    effector = SlowBinds()
    async with running(nats_server, _binds_spec(("p0",)), effector) as (bus, worker):
        worker.EXPECT_S = 0.5
        await worker.start()
        publish = ObservationPublisher(bus)
        await publish([(kn("n1", unschedulable=False), "m1")])
        await until(lambda: effector.done == ["p0"])
        await publish([(kn("n1", unschedulable=True), "m2")])
        await publish([(kn("n1", unschedulable=False), "m3")])
        await until(lambda: worker.idle)
        assert effector.done == ["p0"], "repeated inside the expectation window"
        await until(lambda: effector.done == ["p0", "p0"], timeout=5)


async def test_flush_sends_again_what_the_stream_did_not_store(nats_server: NatsServer) -> None:
    """While no stream answers (a replicated stream electing a leader looks the same to a
    publisher), a message with a Nats-Msg-Id is sent again until stored, once; one without an
    id is reported failed, not resent (its acknowledgement may have been the part lost)."""
    bus = await busmod.connect(NatsSettings(), nats_server.url)
    try:
        spec = streams.StreamSpec(name="LATE", subjects=("late.>",), storage="memory")

        async def create_late() -> None:
            await asyncio.sleep(1.2)  # the first rounds of the retry find no stream
            await bus.ensure_streams((spec,))

        pub = bus.batch()
        await pub.publish("late.a", b"1", msg_id="rec-1")
        await pub.publish("late.b", b"2")
        creator = asyncio.create_task(create_late())
        results = await pub.flush(timeout=5, retry_for=10)
        await creator
        assert [r.subject for r in results] == ["late.a", "late.b"]
        assert results[0].error is None and results[0].seq == 1
        assert results[1].error is not None
        info = await bus.js.stream_info("LATE")
        assert info.state.messages == 1

        pub = bus.batch()
        await pub.publish("nowhere.a", b"1", msg_id="rec-2")
        (res,) = await pub.flush(timeout=5)
        assert res.error is not None, "retry_for=0 reports the failure at once"
    finally:
        await bus.close()


async def test_a_decision_with_effects_is_decided_once(h: Harness) -> None:
    """The fast path's decision is what the reconcile task performs when nothing was applied
    in between: ``decide`` runs once for the trigger, not twice (issue 19)."""
    await h.publish(sn("n2"))
    await until(lambda: h.worker.settled >= 1)
    before = h.worker.reconciles
    await h.publish(kn("n2", unschedulable=True))
    await until(lambda: len(h.world.drains()) == 1)
    await until(lambda: h.worker.settled >= 2)
    assert h.worker.reconciles - before == 1


class HeldWorld(World):
    """A World whose effects on node ``held`` wait until :attr:`release` is set."""

    def __init__(self, held: str) -> None:
        super().__init__()
        self.held = held
        self.release = asyncio.Event()
        self.holding = asyncio.Event()

    async def apply(self, action: AnyAction) -> EffectResult:
        if getattr(action, "node", "") == self.held:
            self.holding.set()
            await self.release.wait()
        return await super().apply(action)


@pytest.mark.parametrize("destructive", [False, True], ids=["drain", "undrain"])
async def test_a_queued_decision_is_decided_again_only_when_its_key_moved_or_it_destroys(
    nats_server: NatsServer, destructive: bool
) -> None:
    """A decision with effects made on the fast path waits in the queue (the one reconcile
    task is busy) while observations of *other* keys are applied. It is performed as decided,
    without a second decide: no change reached its key. A destructive one (an undrain) is
    decided again on the latest view, as a change on its way might undo its reason."""
    h = Harness(nats_server)
    h.world = HeldWorld("busy")
    ours = "slurm-bridge: Corresponding Kubernetes node (n3) is unschedulable"
    await h.start(WorkerSettings(max_deliver=5, concurrency=1))
    assert h.worker is not None
    decided: list[str] = []
    real = h.worker._decide

    def counting(key: str, now: float | None = None) -> Decision | GiveUp:
        decided.append(key)
        return real(key, now)

    h.worker._decide = counting  # type: ignore[method-assign]
    try:
        n3 = sn("n3", "IDLE", "DRAIN", reason=ours) if destructive else sn("n3")
        await h.publish(sn("busy"), n3, kn("n3", unschedulable=destructive))
        await until(lambda: h.worker is not None and h.worker.settled >= 3 and h.worker.idle)
        await h.publish(kn("busy", unschedulable=True))
        await h.world.holding.wait()  # the one reconcile task waits on busy's drain
        # n3's first observations came on two consumers, so it may have been decided once or
        # twice already: wait for the decide of the change queued now.
        earlier = decided.count("n3")
        await h.publish(kn("n3", unschedulable=not destructive))  # queued behind it
        await until(lambda: decided.count("n3") > earlier)
        # Other keys' observations applied meanwhile (each decided, none with effects).
        await h.publish(*(sn(f"x{i}") for i in range(5)))
        await until(lambda: h.worker is not None and h.projection.applied_seq >= 10)
        before = decided.count("n3")
        h.world.release.set()
        await until(lambda: len(h.world.drains()) == 2)
        await until(lambda: h.worker is not None and h.worker.idle)
        assert type(h.world.drains()[-1]) is (UndrainSlurmNode if destructive else DrainSlurmNode)
        assert decided.count("n3") - before == (1 if destructive else 0)
    finally:
        await h.stop()


async def test_a_burst_for_one_key_is_decided_once(nats_server: NatsServer) -> None:
    """Triggers for one key fetched in one batch are decided once: the projection already
    holds the whole batch, so every further decide would see the same view."""
    # Published before any worker runs: the burst waits in the log and arrives in one batch.
    h0 = Harness(nats_server)
    h0.bus = await busmod.connect(NatsSettings(), nats_server.url)
    await h0.bus.ensure_streams(streams.stream_specs(storage="file"))
    burst = [KubeNode(source="k8s", key="n7", uid="u-n7", labels={"i": str(i)}) for i in range(40)]
    await h0.publish(sn("n7"), *burst)
    await h0.bus.close()
    h = Harness(nats_server)
    await h.start()
    assert h.worker is not None
    try:
        assert h.bus is not None
        async with asyncio.timeout(10):
            while True:
                infos = [
                    await h.bus.js.consumer_info(streams.OBS_STREAM, d) for d in DRAIN_CONSUMERS
                ]
                if not any(i.num_pending or i.num_ack_pending for i in infos) and h.worker.idle:
                    break
                await asyncio.sleep(0.02)
        # The stream keeps the latest few per subject: most of the burst is still there.
        assert h.worker.settled >= 20
        assert h.worker is not None
        # The start-up resync decides n7 once more; nothing here changes a decision.
        assert h.worker.reconciles <= 3, h.worker.reconciles
        assert h.world.drains() == []
    finally:
        await h.stop()


async def test_a_reconciler_is_not_delivered_a_kind_it_does_not_trigger_on(h: Harness) -> None:
    """slurm_drain triggers on KubeNode and SlurmNode only: each has a consumer of its own
    filtered to its kind, so pods (nine observations per placed pod) are never delivered to
    it — not even to be acknowledged unread."""
    assert h.worker is not None and h.bus is not None
    assert [c.filter_subjects for c in h.worker.consumers] == [
        ("bridge.obs.*.KubeNode.*",),
        ("bridge.obs.*.SlurmNode.*",),
    ]
    pods = [
        KubePod(source="k8s", key=f"default/p{i}", namespace="default", name=f"p{i}")
        for i in range(30)
    ]
    await h.publish(*pods, kn("n4", unschedulable=True), sn("n4"))
    await until(lambda: h.worker is not None and len(h.world.drains()) == 1 and h.worker.idle)
    await until(lambda: h.worker is not None and h.worker.settled >= 2)
    assert h.worker.settled == 2  # the two node observations, no pod
    delivered = 0
    for durable in DRAIN_CONSUMERS:
        info = await h.bus.js.consumer_info(streams.OBS_STREAM, durable)
        assert info.num_pending == 0
        assert info.delivered is not None
        delivered += info.delivered.consumer_seq or 0
    assert delivered == 2


async def test_a_change_the_reconciler_does_not_read_triggers_no_decide(h: Harness) -> None:
    """slurm_drain reads a Slurm node's DRAIN flag and reason, not its jobs: a node going
    ALLOCATED and back (its ``alloc_cpus`` with it) is acknowledged without a decide; a
    drain is decided."""
    assert h.worker is not None
    await h.publish(sn("n9"), kn("n9", unschedulable=False))
    await until(lambda: h.worker is not None and h.worker.settled >= 2 and h.worker.idle)
    before = h.worker.reconciles
    busy = SlurmNode(source="slurm:c1", key="n9", cluster="c1", state=("ALLOCATED",), alloc_cpus=2)
    await h.publish(busy)
    await h.publish(sn("n9", "MIXED"))
    await h.publish(sn("n9"))
    await until(lambda: h.worker is not None and h.worker.settled >= 5 and h.worker.idle)
    assert h.worker.reconciles == before
    assert h.worker.unread == 3
    await h.publish(sn("n9", "IDLE", "DRAIN", reason="admin"))
    await until(lambda: h.worker is not None and h.worker.settled >= 6 and h.worker.idle)
    assert h.worker.reconciles == before + 1
    assert h.world.drains() == []


async def test_a_redelivered_trigger_is_decided_though_its_read_part_is_unchanged(
    h: Harness,
) -> None:
    """``SPEC.reads`` compares an observation with the one delivered before it; the
    redelivery of a trigger whose effect must be retried carries the same part, and is
    decided again all the same."""
    assert h.worker is not None
    await h.publish(kn("r1", unschedulable=True))
    await until(lambda: h.worker is not None and h.worker.settled >= 1 and h.worker.idle)
    h.world.fail_times = 1
    await h.publish(sn("r1"))  # the pair is complete: drain, which fails once
    await until(lambda: len(h.world.drains()) == 1)
    recs = outcomes(await h.records(streams.ACT_STREAM, "bridge.act.>"))
    assert [r.outcome for r in recs if isinstance(r.action, DrainSlurmNode)] == ["retry", "ok"]


async def test_a_trigger_whose_change_is_known_reaches_only_the_keys_it_can_move(
    nats_server: NatsServer,
) -> None:
    """``ReconcilerSpec.changed`` (issue 30, item 2): once the worker has seen an object, a
    change of it reaches ``changed`` with the parts read before and now, and only the keys
    it returns are decided; the first observation (nothing seen before) goes to ``keys``."""
    calls: list[tuple[object, object]] = []
    decided: list[str] = []

    def read(ev: KubeNode) -> object:
        return (ev.unschedulable, tuple(sorted(ev.labels.items())))

    def changed(
        before: object, after: object, ev: KubeNode, store: object, ctx: object
    ) -> list[str]:
        calls.append((before, after))
        assert isinstance(before, tuple) and isinstance(after, tuple)
        return [ev.key] if before[0] != after[0] else []  # labels move no key

    def view(store: object, key: str, ctx: object) -> str:
        decided.append(key)
        return key

    spec = ReconcilerSpec(
        name="changed",
        keys={KubeNode: lambda ev, store, ctx: [ev.key]},
        key_kind="KubeNode",
        all_keys=lambda store, ctx: [],
        view=view,
        decide=lambda _: Decision(reason="in sync"),
        reads={KubeNode: read},
        changed={KubeNode: changed},
    )
    async with running(nats_server, spec, SlowBinds()) as (bus, worker):
        await worker.start()
        publish = ObservationPublisher(bus)
        await publish([(kn("c1", unschedulable=False), "c1-0")])
        await until(lambda: worker.settled >= 1 and worker.idle)
        assert decided == ["c1"] and calls == []
        relabelled = KubeNode(source="k8s", key="c1", uid="u-c1", labels={"team": "a"})
        await publish([(relabelled, "c1-1")])
        await until(lambda: worker.settled >= 2 and worker.idle)
        assert decided == ["c1"], "a change that moves no key decides nothing"
        assert calls == [((False, ()), (False, (("team", "a"),)))]
        await publish([(kn("c1", unschedulable=True), "c1-2")])
        await until(lambda: worker.settled >= 3 and worker.idle)
        assert decided == ["c1", "c1"]
        assert len(calls) == 2


@dataclass
class StuckWorld(World):
    """An effector whose drains wait until :attr:`release` is set."""

    entered: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def apply(self, action: AnyAction) -> EffectResult:
        if isinstance(action, DrainSlurmNode):
            self.entered.set()
            await self.release.wait()
        return await super().apply(action)


async def test_a_trigger_held_past_ack_wait_is_kept_in_progress_not_delivered_again(
    h: Harness,
) -> None:
    """A trigger waiting behind a busy key, and the one whose reconcile is slow, are told to
    JetStream as in progress every third of ack_wait: neither is delivered again, however
    long they wait (issue 30: at saturation, queued triggers were sent again and again)."""
    await h.stop()
    h.world = StuckWorld()
    await h.start(WorkerSettings(ack_wait=2.0))
    world = h.world
    assert isinstance(world, StuckWorld) and h.bus is not None and h.worker is not None
    await h.publish(sn("a"), kn("a", unschedulable=True))
    async with asyncio.timeout(10):
        await world.entered.wait()
    # Another change of the same node: queued behind the drain in flight.
    await h.publish(sn("a", "IDLE", reason="maintenance"))

    async def consumers(field: str) -> int:
        """``field`` of the ConsumerInfo, summed over slurm_drain's consumers."""
        assert h.bus is not None
        infos = [await h.bus.js.consumer_info(streams.OBS_STREAM, d) for d in DRAIN_CONSUMERS]
        return sum(int(getattr(ci, field)) for ci in infos)

    async def redelivered() -> int:
        return await consumers("num_redelivered")

    async def held() -> int:
        return await consumers("num_ack_pending")

    await until(lambda: h.projection.applied_seq >= 3)
    # Watched for 2.5 ack_waits: every trigger is still held, none sent again.
    loop = asyncio.get_running_loop()
    watch_until = loop.time() + 5.0
    while loop.time() < watch_until:
        assert await redelivered() == 0
        await asyncio.sleep(0.2)
    assert await held() == 3
    world.release.set()
    await until(lambda: h.worker is not None and h.worker.idle and not h.worker._held)
    assert await redelivered() == 0
    async with asyncio.timeout(10):
        while await held():
            await asyncio.sleep(0.05)
    assert len(world.drains()) == 1


async def test_a_stopping_worker_hands_its_held_triggers_back_at_once(h: Harness) -> None:
    """A worker that stops (its lease lost, the process shutting down) naks every trigger it
    holds — the one being reconciled and the one queued behind it — once its pull inboxes are
    unsubscribed, so the next holder of its partition is delivered them at once, not after
    ack_wait (30 s here): a trigger held by a worker that is gone waits for nobody."""
    await h.stop()
    h.world = StuckWorld()
    settings = WorkerSettings(ack_wait=30.0)
    await h.start(settings)
    world = h.world
    assert isinstance(world, StuckWorld) and h.bus is not None and h.worker is not None
    await h.publish(sn("a"), kn("a", unschedulable=True))
    async with asyncio.timeout(10):
        await world.entered.wait()
    await h.publish(sn("a", "IDLE", reason="maintenance"))  # queued behind the drain
    await until(lambda: h.projection.applied_seq >= 3)

    async def consumers(field: str) -> int:
        assert h.bus is not None
        infos = [await h.bus.js.consumer_info(streams.OBS_STREAM, d) for d in DRAIN_CONSUMERS]
        return sum(int(getattr(ci, field)) for ci in infos)

    async with asyncio.timeout(10):
        while await consumers("num_ack_pending") < 3:
            await asyncio.sleep(0.05)
    await h.worker.stop()  # the drain is cancelled half-way
    world.release.set()
    h.worker = h.new_worker(settings, "next")
    await h.worker.start()
    # Each held trigger is delivered again, to the new worker, and settled well inside
    # ack_wait.
    nxt = h.worker
    async with asyncio.timeout(15):
        while nxt.settled < 3 or await consumers("num_ack_pending"):
            await asyncio.sleep(0.05)
    assert len(world.drains()) == 1


async def test_a_worker_that_fails_to_start_leaves_no_puller_asking(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer not created in time (its stream electing a leader) fails the worker's start,
    and the pullers it had started stop: one left behind kept asking for triggers that nobody
    read, so a trigger delivered to it was never acknowledged and the next worker waited for
    it past ack_wait (30 s here) — test_nats_cluster.py's stream-leader kill."""
    assert h.bus is not None and h.worker is not None
    await h.worker.stop()
    bus = h.bus
    real = bus.ensure_consumer
    calls: list[str] = []

    async def second_times_out(spec: streams.ConsumerSpec) -> object:
        calls.append(spec.durable)
        if len(calls) == 2:
            raise nats.errors.TimeoutError
        return await real(spec)

    monkeypatch.setattr(bus, "ensure_consumer", second_times_out)
    half = h.new_worker(WorkerSettings(), "half")
    with pytest.raises(nats.errors.TimeoutError):
        await half.start()
    assert calls == list(DRAIN_CONSUMERS)
    monkeypatch.setattr(bus, "ensure_consumer", real)
    h.worker = h.new_worker(WorkerSettings(), "whole")
    await h.worker.start()
    await h.publish(sn("a"), kn("a", unschedulable=True))
    await until(lambda: len(h.world.drains()) == 1, timeout=10)
    # Both triggers reached the whole worker and were acknowledged, none waits for ack_wait.
    async with asyncio.timeout(10):
        while True:
            infos = [await bus.js.consumer_info(streams.OBS_STREAM, d) for d in DRAIN_CONSUMERS]
            if all(ci.num_ack_pending == 0 and ci.num_pending == 0 for ci in infos):
                break
            await asyncio.sleep(0.05)


async def test_a_reconcile_that_raises_lets_its_trigger_be_delivered_again(h: Harness) -> None:
    """A reconcile failing unexpectedly (a bug, not an outcome) does not keep its trigger in
    progress for ever: it is delivered again after ack_wait and reconciled then."""
    await h.stop()
    await h.start(WorkerSettings(ack_wait=2.0))
    worker = h.worker
    assert worker is not None
    real = worker._reconcile
    raised: list[str] = []

    async def once_broken(key: str, cause: int, adds: int = -1) -> object:
        if not raised:
            raised.append(key)
            raise RuntimeError("a bug")
        return await real(key, cause, adds)

    worker._reconcile = once_broken  # type: ignore[method-assign,assignment]
    await h.publish(sn("a"), kn("a", unschedulable=True))
    await until(lambda: len(h.world.drains()) == 1, timeout=15)
    assert raised == ["a"]
