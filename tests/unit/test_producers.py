"""Producers translate (pure) and diff: quantities, trimming, tombstones, Msg-Ids."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Sequence

import msgspec
import pytest

from producers.kube import translate as pk
from producers.slurm import poller as slurm_poller
from producers.slurm import translate
from schemas import wellknown
from schemas.events import Event, HostPort, KubeNode, KubePod, SlurmJob, SlurmNode, SlurmPing
from slurmbridge.app import HotJobs
from slurmbridge.kube import watch
from slurmbridge.kube.wire import RawNode, RawPod
from slurmbridge.runtime.bus import Published
from slurmbridge.slurm import codecs
from slurmbridge.slurm import errors as slurm_errors
from slurmbridge.slurm.client import JobStateMemo
from slurmbridge.slurm.models import (
    Job,
    JobList,
    JobStates,
    Node,
    NodeList,
    Partition,
    PartitionList,
    Ping,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("4", 4),
        ("3500m", 3.5),
        ("16Gi", 16 * 2**30),
        ("1000Mi", 1000 * 2**20),
        ("1e9", 1e9),
        ("128974848", 128974848),
        ("129M", 129e6),
        ("123Ki", 123 * 1024),
        ("0.5", 0.5),
    ],
)
def test_parse_quantity(text: str, value: float) -> None:
    assert pk.parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("bad", ["", "abc", "12Q", "1..2", "Gi"])
def test_parse_quantity_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="quantity"):
        pk.parse_quantity(bad)


RAW = b"""{
 "metadata": {"name": "gpu-7.example.com", "uid": "u1", "resourceVersion": "42",
   "labels": {"slinky.slurm.net/slurm-nodename": "g7"},
   "annotations": {"scheduler.slinky.slurm.net/external-node-partitions": "gpu",
                   "flannel.alpha.coreos.com/public-ip": "10.0.0.7",
                   "node.alpha.kubernetes.io/ttl": "0"}},
 "spec": {"unschedulable": true,
          "taints": [{"key": "slinky.slurm.net/managed-node", "value": "s", "effect": "NoExecute"},
                     {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                      "timeAdded": "2026-01-01T00:00:00Z"}]},
 "status": {"capacity": {"cpu": "3500m", "memory": "16Gi", "nvidia.com/gpu": "4",
                         "amd.com/gpu": "1"},
            "conditions": [{"type": "MemoryPressure", "status": "False"},
                           {"type": "Ready", "status": "True"}],
            "nodeInfo": {"bootID": "x"}}
}"""


def test_node_to_event_trims_and_converts() -> None:
    raw = msgspec.json.decode(RAW, type=RawNode)
    ev = pk.node_to_event(raw, producer="p", observed_at=7)
    assert ev.key == "gpu-7.example.com"
    assert ev.version == "42"
    assert ev.unschedulable
    assert ev.ready
    assert (ev.cpu_millis, ev.memory_bytes, ev.gpus) == (3500, 16 * 2**30, 5)
    assert [t.key for t in ev.taints] == [
        "slinky.slurm.net/managed-node",
        "node.kubernetes.io/unschedulable",
    ]
    assert ev.taints[1].value == ""
    assert ev.annotations == {"scheduler.slinky.slurm.net/external-node-partitions": "gpu"}
    assert ev.labels == {"slinky.slurm.net/slurm-nodename": "g7"}


def test_empty_node_translates() -> None:
    ev = pk.node_to_event(RawNode(), producer="p", observed_at=0)
    assert (ev.cpu_millis, ev.ready, ev.taints) == (0, False, ())


def test_bad_capacity_is_zero_not_a_crash() -> None:
    raw = msgspec.json.decode(
        b'{"metadata":{"name":"n"},"status":{"capacity":{"cpu":"lots"}}}', type=RawNode
    )
    assert pk.node_to_event(raw, producer="p", observed_at=0).cpu_millis == 0


def test_same_content_ignores_envelope() -> None:
    a = KubeNode(source="k8s", key="n", version="1", observed_at=1, producer="a")
    b = KubeNode(source="k8s", key="n", version="2", observed_at=2, producer="b")
    assert watch.same_content(a, b)
    assert not watch.same_content(a, msgspec.structs.replace(b, unschedulable=True))


# --- Slurm poller ---------------------------------------------------------------------------


class FakeClient:
    """Answers like SlurmClient: a list, or None for 304, or raises."""

    def __init__(self) -> None:
        self.nodes: list[Node] = [
            Node(name="n1", state=("IDLE",)),
            Node(name="n2", state=("IDLE",)),
        ]
        self.parts = [Partition(name="batch", state="UP", nodes=("n1", "n2"))]
        self.fail: Exception | None = None
        self.not_modified = False
        self.fail_partitions: Exception | None = None
        self.node_update_times: list[int | None] = []
        self.jobs: list[Job] = []
        self.job_gets: list[int] = []
        self.states_offered = True
        self.jobs_not_found: set[int] = set()
        self.job_lists = 0
        self.state_lists = 0
        self.state_lists_by_id: list[tuple[int, ...]] = []

    async def ping(self) -> Ping:
        if self.fail:
            raise self.fail
        return Ping(responding=True, hostnames=("ctl",), api_version="v0.0.44")

    async def list_nodes(self, update_time: int | None = None) -> NodeList | None:
        if self.not_modified and update_time is not None:
            return None
        self.node_update_times.append(update_time)
        return NodeList(nodes=tuple(self.nodes), last_update=100 + len(self.node_update_times))

    async def list_partitions(self, update_time: int | None = None) -> PartitionList | None:
        if self.fail_partitions:
            raise self.fail_partitions
        if self.not_modified and update_time is not None:
            return None
        return PartitionList(partitions=tuple(self.parts), last_update=100)

    async def list_jobs(self, update_time: int | None = None) -> JobList | None:
        self.job_lists += 1
        if self.not_modified and update_time is not None:
            return None
        return JobList(jobs=tuple(self.jobs), last_update=100)

    async def list_job_states(self, memo: JobStateMemo | None = None) -> JobStates:
        if not self.states_offered:
            raise slurm_errors.Unsupported("v0.0.38", "list_job_states")
        self.state_lists += 1
        # The real codec on the body slurmrestd would send, so the memo's raw comparison runs.
        body = msgspec.json.encode(
            {"jobs": [{"job_id": str(j.job_id), "state": list(j.state)} for j in self.jobs]}
        )
        states = codecs.get("v0.0.44").decode_job_states(body, memo)
        assert states is not None
        return states

    async def job_states_of(self, job_ids: Collection[int]) -> dict[str, tuple[str, ...]]:
        if not self.states_offered:
            raise slurm_errors.Unsupported("v0.0.38", "list_job_states")
        self.state_lists_by_id.append(tuple(job_ids))
        wanted = set(job_ids)
        return {str(j.job_id): j.state for j in self.jobs if j.job_id in wanted}

    async def get_job(self, job_id: int) -> Job | None:
        self.job_gets.append(job_id)
        if job_id in self.jobs_not_found:
            return None
        return next((j for j in self.jobs if j.job_id == job_id), None)


class Sink:
    def __init__(self) -> None:
        self.seq = 0
        self.batches: list[list[tuple[Event, str]]] = []

    async def __call__(self, batch: Sequence[tuple[Event, str]]) -> list[Published]:
        self.batches.append(list(batch))
        out = []
        for _ in batch:
            self.seq += 1
            out.append(Published("s", self.seq, False))
        return out

    def last(self) -> list[tuple[str, str, str]]:
        return [(type(e).__name__, e.key, e.op) for e, _ in self.batches[-1]]


def poller(
    client: FakeClient, sink: Sink, seed: dict[tuple[str, str], tuple[Event, int]] | None = None
) -> slurm_poller.SlurmPoller:
    return slurm_poller.SlurmPoller(
        client, sink, cluster="c", producer="p", poll_interval=1.0, seed=seed or {}
    )  # type: ignore[arg-type]


async def test_first_poll_publishes_everything_then_only_changes() -> None:
    c, sink = FakeClient(), Sink()
    p = poller(c, sink)
    assert await p.poll_once() == 4  # ping, n1, n2, batch
    assert await p.poll_once() == 0
    c.nodes[0] = Node(name="n1", state=("IDLE", "DRAIN"), reason="x")
    assert await p.poll_once() == 1
    assert sink.last() == [("SlurmNode", "n1", "observed")]


async def test_vanished_node_gets_a_tombstone_once() -> None:
    c, sink = FakeClient(), Sink()
    p = poller(c, sink)
    await p.poll_once()
    c.nodes.pop()
    await p.poll_once()
    assert sink.last() == [("SlurmNode", "n2", "deleted")]
    tomb = sink.batches[-1][0][0]
    assert isinstance(tomb, SlurmNode)
    assert tomb.cluster == "c"
    assert await p.poll_once() == 0


async def test_outage_never_tombstones() -> None:
    c, sink = FakeClient(), Sink()
    p = poller(c, sink)
    await p.poll_once()
    c.fail = slurm_errors.Unavailable("connection refused")
    assert await p.poll_once() == 1
    ping = sink.batches[-1][0][0]
    assert isinstance(ping, SlurmPing)
    assert not ping.responding
    assert "connection refused" in ping.error
    assert await p.poll_once() == 0  # the same failure is not re-published


async def test_not_modified_publishes_nothing() -> None:
    c, sink = FakeClient(), Sink()
    p = poller(c, sink)
    await p.poll_once()
    c.not_modified = True
    c.nodes.clear()  # would be tombstones if the 304 were misread as an empty list
    assert await p.poll_once() == 0


async def test_restart_seeded_from_the_log_republishes_nothing() -> None:
    c, sink = FakeClient(), Sink()
    p1 = poller(c, sink)
    await p1.poll_once()
    seed = dict(p1.last)
    sink2 = Sink()
    p2 = poller(c, sink2, seed)
    assert await p2.poll_once() == 0
    assert sink2.batches == []


async def test_msg_id_chains_on_previous_sequence() -> None:
    c, sink = FakeClient(), Sink()
    p = poller(c, sink)
    await p.poll_once()
    ids = []
    for state in (("IDLE", "DRAIN"), ("IDLE",), ("IDLE", "DRAIN")):
        c.nodes[0] = Node(name="n1", state=state)
        await p.poll_once()
        ids.append(sink.batches[-1][0][1])
    # A flip back to an earlier state gets a new id: it is not deduplicated away.
    assert ids[0] != ids[2]
    assert ids[0].split(":")[2] == ids[2].split(":")[2]  # same content hash


class StoredButUnacknowledged(Sink):
    """A server that stores the batch and then dies before acknowledging it."""

    def __init__(self) -> None:
        super().__init__()
        self.lose_next = False

    async def __call__(self, batch: Sequence[tuple[Event, str]]) -> list[Published]:
        out = await super().__call__(batch)
        if self.lose_next:
            self.lose_next = False
            raise TimeoutError("nats: timeout waiting for the PubAck")
        return out


async def test_an_unacknowledged_state_is_replaced_even_if_the_world_reverted() -> None:
    """The log holds a tombstone whose PubAck was lost; the node registered again, as it
    was, before the next poll: that poll must publish it again (the chaos test's stale
    tombstone), under an id no earlier copy has."""
    c, sink = FakeClient(), StoredButUnacknowledged()
    p = poller(c, sink)
    await p.poll_once()
    n2 = c.nodes.pop()
    sink.lose_next = True
    with pytest.raises(TimeoutError):
        await p.poll_once()
    assert sink.last() == [("SlurmNode", "n2", "deleted")]  # stored all the same
    c.nodes.append(n2)  # back, with the content last acknowledged
    assert await p.poll_once() == 1
    assert sink.last() == [("SlurmNode", "n2", "observed")]
    ids = [i for b in sink.batches for e, i in b if e.key == "n2"]
    assert len(set(ids)) == len(ids) == 3
    assert ids[-1].endswith(":lost1")
    assert await p.poll_once() == 0  # settled: acknowledged again


class DedupingSink(Sink):
    """JetStream's duplicate window: a message whose id was stored before is dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.stored: list[tuple[Event, str]] = []
        self.ids: dict[str, int] = {}

    async def __call__(self, batch: Sequence[tuple[Event, str]]) -> list[Published]:
        self.batches.append(list(batch))
        out = []
        for ev, msg_id in batch:
            if msg_id in self.ids:
                out.append(Published("s", self.ids[msg_id], True))
                continue
            self.seq += 1
            self.ids[msg_id] = self.seq
            self.stored.append((ev, msg_id))
            out.append(Published("s", self.seq, False))
        return out


async def test_an_object_back_after_a_restart_is_stored_not_taken_for_a_duplicate() -> None:
    """n2 appears, goes (tombstone), and comes back as it was after the poller restarted
    from a log that holds only the tombstone: the new first sighting must be stored."""
    c, sink = FakeClient(), DedupingSink()
    p1 = poller(c, sink)
    await p1.poll_once()
    n2 = c.nodes.pop()
    await p1.poll_once()
    live = {k: v for k, v in p1.last.items() if v[0].op != "deleted"}  # what a log seeds
    c.nodes.append(n2)
    p2 = poller(c, sink, live)
    assert await p2.poll_once() == 1
    last = [(e.key, e.op) for e, _ in sink.stored if e.key == "n2"]
    assert last == [("n2", "observed"), ("n2", "deleted"), ("n2", "observed")]


def test_content_hash_ignores_envelope() -> None:
    a = translate.node_to_event(
        Node(name="n", state=("IDLE",)), cluster="c", producer="x", observed_at=1
    )
    b = translate.node_to_event(
        Node(name="n", state=("IDLE",)), cluster="c", producer="y", observed_at=2
    )
    assert a.version == b.version
    c = translate.node_to_event(Node(name="n", state=("DOWN",)), cluster="c")
    assert c.version != a.version


async def test_a_failed_poll_does_not_advance_the_watermark() -> None:
    c, sink = FakeClient(), Sink()
    p = poller(c, sink)
    await p.poll_once()
    c.nodes[0] = Node(name="n1", state=("DOWN",))
    c.fail_partitions = slurm_errors.Unavailable("timeout")
    await p.poll_once()  # nodes listed, then the poll failed: nothing of it is published
    assert sink.last() == [("SlurmPing", "c", "observed")]
    c.fail_partitions = None
    await p.poll_once()
    # The next conditional poll asks from the old watermark and so still sees the change.
    assert c.node_update_times[-1] == c.node_update_times[-2]
    assert ("SlurmNode", "n1", "observed") in sink.last()


async def test_jobs_are_polled_and_vanished_jobs_get_a_tombstone() -> None:
    c, sink = FakeClient(), Sink()
    c.jobs = [Job(job_id=7, state=("PENDING",), comment="slurmbridge:default/Pod:a:u")]
    p = poller(c, sink)
    await p.poll_once()
    jobs = [e for e, _ in sink.batches[-1] if isinstance(e, SlurmJob)]
    assert [(j.key, j.state, j.comment) for j in jobs] == [
        ("7", ("PENDING",), "slurmbridge:default/Pod:a:u")
    ]
    c.jobs = []
    await p.poll_once()
    assert sink.last() == [("SlurmJob", "7", "deleted")]


async def test_hot_job_poll_publishes_a_start_and_a_full_listing_never_undoes_it() -> None:
    c, sink = FakeClient(), Sink()
    c.jobs = [Job(job_id=7, state=("PENDING",))]
    p = poller(c, sink)
    await p.poll_once()
    c.jobs = [Job(job_id=7, state=("RUNNING",), nodes=("n1",))]
    assert await p.poll_jobs_once([7, 8]) == 1  # 8 is unknown: no tombstone from a GET
    assert sink.last() == [("SlurmJob", "7", "observed")]
    assert c.job_gets == [7, 8]
    # A full listing taken before the GET (older observed_at) must not publish PENDING again.
    stale = translate.job_to_event(Job(job_id=7, state=("PENDING",)), cluster="c", observed_at=1)
    assert p._stale(stale)


async def test_a_hot_poll_reads_whole_only_the_jobs_whose_state_moved() -> None:
    """One ``jobs/state`` request names every hot job; only a job whose state differs from
    its last observation, or that the log lacks, is read whole (issue 30)."""
    c, sink = FakeClient(), Sink()
    c.jobs = [Job(job_id=j, state=("PENDING",)) for j in (7, 8, 9)]
    p = poller(c, sink)
    await p.poll_once()
    c.jobs = [
        Job(job_id=7, state=("PENDING",), state_reason="Priority"),  # same state: not read
        Job(job_id=8, state=("RUNNING",), nodes=("n1",)),
        Job(job_id=9, state=("PENDING",)),
        Job(job_id=10, state=("PENDING",)),  # just submitted: the log lacks it
    ]
    assert await p.poll_jobs_once([10, 9, 8, 7, 11]) == 2
    assert c.state_lists_by_id == [(10, 9, 8, 7, 11)]
    assert c.job_gets == [8, 10, 11]
    assert [k for _, k, _ in sink.last()] == ["10"]
    # A server without jobs/state (v0.0.38): every hot job is read whole, as before.
    c.states_offered, c.job_gets = False, []
    assert await p.poll_jobs_once([9, 7]) == 1  # 7's reason, unseen by the state list
    assert c.job_gets == [9, 7]
    assert await p.poll_jobs_once([9, 7]) == 0
    assert c.job_gets == [9, 7, 9, 7] and len(c.state_lists_by_id) == 1  # not asked again


async def test_a_start_is_published_before_the_jobs_the_log_only_lacks() -> None:
    """In one hot round, the jobs whose state moved (a start) — and a new job that started at
    once — are read and published first; then at most one batch of GETs of the new pending
    jobs (issue 30 item 6: a start waited behind every new job of its round, for seconds on
    a loaded machine)."""
    c, sink = FakeClient(), Sink()
    c.jobs = [Job(job_id=1, state=("PENDING",))]
    p = poller(c, sink)
    await p.poll_once()
    c.jobs = [
        Job(job_id=j, state=("PENDING",)) for j in range(10, 20)
    ]  # submitted since: the log lacks them
    c.jobs += [
        Job(job_id=1, state=("RUNNING",), nodes=("n1",)),
        Job(job_id=20, state=("RUNNING",), nodes=("n2",)),  # new, and started at once
    ]
    c.job_gets.clear()
    batches = len(sink.batches)
    assert await p.poll_jobs_once([*range(10, 21), 1]) == 6
    assert c.job_gets == [20, 1, 10, 11, 12, 13]
    first, second = sink.batches[batches:]
    assert [ev.key for ev, _ in first] == ["20", "1"]
    # One batch of GETs of the lacking jobs per round (JOB_GETS_IN_FLIGHT): the next round
    # reads the next ones, and only those.
    assert [ev.key for ev, _ in second] == ["10", "11", "12", "13"]
    assert await p.poll_jobs_once([*range(10, 21), 1]) == 4
    assert c.job_gets[6:] == [14, 15, 16, 17]


async def _queue_watched(
    c: FakeClient, sink: Sink, n: int, *, hot_interval: float, hinted: bool = False
) -> tuple[slurm_poller.SlurmPoller, HotJobs]:
    """A poller of ``n`` pending jobs (ids 1..n) the log holds, each waited for by a pod, its
    hot loop fed by a :class:`HotJobs` (which also names the hinted jobs when ``hinted``)."""
    c.jobs = [Job(job_id=j, state=("PENDING",), priority=1) for j in range(1, n + 1)]
    hot = HotJobs("c")
    p = slurm_poller.SlurmPoller(
        c,  # type: ignore[arg-type]
        sink,
        cluster="c",
        producer="p",
        poll_interval=3600,
        seed={},
        hot_jobs=hot,
        hinted_jobs=hot.hinted_jobs if hinted else None,
        hot_interval=hot_interval,
    )
    await p.poll_once()
    for ev, _ in sink.batches[-1]:
        hot.observe(ev, 0)
    for j in range(1, n + 1):
        labels = {wellknown.LABEL_SLURM_JOBID: str(j)}
        hot.observe(KubePod(source="k8s", key=f"ns/p{j}", name=f"p{j}", labels=labels), 0)
    return p, hot


async def test_a_long_queue_costs_one_request_of_hot_limit_ids_per_hot_round() -> None:
    """10,000 waiting jobs the log holds: each hot round asks ``jobs/state`` once, naming
    ``hot_limit`` of them — the newest and the head of the queue — and reads none whole
    (issue 30 item 6: before, the 32 newest only, so the jobs about to start were left to
    the state poll)."""
    c, sink = FakeClient(), Sink()
    p, _ = await _queue_watched(c, sink, 10_000, hot_interval=0.001)
    c.job_gets.clear()
    task = asyncio.create_task(p._hot_loop())
    deadline = time.monotonic() + 30
    while len(c.state_lists_by_id) < 3 and not task.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(c.state_lists_by_id) >= 3
    for ids in c.state_lists_by_id:
        assert len(ids) == p.hot_limit == 128
        assert {1, 2, 64, 10_000, 9_937} <= set(ids), "the head and the newest"
    assert c.job_gets == []


async def test_a_hint_behind_a_long_queue_asks_for_the_hinted_job_alone() -> None:
    """Issue 30 item 4: a hint (a job this process just submitted) starts a round naming
    the hinted jobs alone, not the ``hot_limit`` jobs of the queue. A hinted job that
    started at once asks nothing more of the loop; one still pending brings it back to its
    interval (item 6: its start may come with slurmctld's next scheduling pass)."""
    c, sink = FakeClient(), Sink()
    p, hot = await _queue_watched(c, sink, 1_000, hot_interval=0.02, hinted=True)
    now = [0.0]
    pace = slurm_poller.HotPace(0.02, 0.32, calm=1.0, clock=lambda: now[0])
    for _ in range(10):  # an unchanging queue: the loop waits the idle interval
        now[0] += 2.0
        pace.after_round(woken=False, ids=[1], reads=0)
    assert pace.wait == 0.32

    c.jobs.append(Job(job_id=5000, state=("RUNNING",), nodes=("n1",)))  # started at once
    hot.hint(5000)
    assert await p._hinted_round(pace) is False
    assert c.state_lists_by_id[-1] == (5000,)
    assert sink.last() == [("SlurmJob", "5000", "observed")]
    assert pace.wait == 0.32, "a job that started at once asks nothing more of the loop"

    c.jobs.append(Job(job_id=5001, state=("PENDING",)))  # waits for slurmctld's next pass
    hot.hint(5001)
    assert await p._hinted_round(pace) is True
    assert c.state_lists_by_id[-1] == (5001, 5000)  # 5000's hint lasts until the log has it
    assert pace.wait == 0.02

    # The loop itself: a wake-up between regular rounds (5 s apart here) is a hinted round.
    p.hot_interval = 5.0
    c.state_lists_by_id.clear()
    c.jobs.append(Job(job_id=5002, state=("RUNNING",), nodes=("n2",)))
    hot.hint(5002)
    task = asyncio.create_task(p._hot_loop())
    try:
        deadline = time.monotonic() + 30
        while not c.state_lists_by_id and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert len(c.state_lists_by_id[0]) == p.hot_limit  # the first, regular round
        p.wake()
        while len(c.state_lists_by_id) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert c.state_lists_by_id[1] == (5002, 5001, 5000)


class Gathered(FakeClient):
    """Each of a poll's four reads waits until all four are in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.barrier = asyncio.Barrier(4)
        self.fail_nodes: Exception | None = None
        self.fail_ping: Exception | None = None  # raised once the ping has met the others
        self.block: set[str] = set()  # reads that never answer (until cancelled)
        self.cancelled: list[str] = []

    async def _meet(self, what: str) -> None:
        try:
            if what in self.block:
                await asyncio.Event().wait()
            await self.barrier.wait()
        except asyncio.CancelledError:
            self.cancelled.append(what)
            raise

    async def ping(self) -> Ping:
        await self._meet("ping")
        if self.fail_ping is not None:
            raise self.fail_ping
        return await super().ping()

    async def list_nodes(self, update_time: int | None = None) -> NodeList | None:
        if self.fail_nodes is not None:
            raise self.fail_nodes
        await self._meet("nodes")
        return await super().list_nodes(update_time)

    async def list_partitions(self, update_time: int | None = None) -> PartitionList | None:
        await self._meet("partitions")
        return await super().list_partitions(update_time)

    async def list_jobs(self, update_time: int | None = None) -> JobList | None:
        await self._meet("jobs")
        return await super().list_jobs(update_time)

    async def list_job_states(self, memo: JobStateMemo | None = None) -> JobStates:
        await self._meet("job states")
        return await super().list_job_states(memo)


async def test_a_poll_s_reads_are_in_flight_at_once() -> None:
    """Ping, nodes, partitions and jobs are asked together: on a busy event loop each await
    waits behind every ready task, and four in a row made the full poll 2–10 s late at 50
    pods/s (issue 30 item 6). One that fails fails the poll: the reads before it are
    awaited, so the error raised is the one a sequential poll would raise (the ping's, which
    says why a token is refused), and those after it are cancelled before the failure is
    published, so none changes the poller after it."""
    c, sink = Gathered(), Sink()
    p = poller(c, sink)
    assert await asyncio.wait_for(p.poll_once(), 10) == 4
    # Nodes fail at once; the ping answers later, and the job states never.
    c.barrier, c.fail_nodes = asyncio.Barrier(2), slurm_errors.Unavailable("nodes down")
    c.block, c.fail_ping = {"job states"}, slurm_errors.Unauthorized("ping: token rejected")
    assert await asyncio.wait_for(p.poll_once(), 10) == 1
    assert c.cancelled == ["job states"]
    (ping,) = [ev for ev, _ in sink.batches[-1]]
    assert isinstance(ping, SlurmPing) and not ping.responding
    assert "token rejected" in ping.error and p.health.error


async def test_unchanged_models_are_not_translated_again_and_a_lost_publish_is_retried() -> None:
    c, sink = FakeClient(), Sink()
    p = poller(c, sink)
    await p.poll_once()
    translated: list[str] = []
    real = slurm_poller.node_to_event

    def counting(n: Node, **kw: object) -> SlurmNode:
        translated.append(n.name)
        return real(n, **kw)  # type: ignore[arg-type]

    slurm_poller.node_to_event = counting  # type: ignore[assignment]
    try:
        # The client hands back the same objects for unchanged items: nothing re-translated.
        assert await p.poll_once() == 0
        assert translated == []
        c.nodes[0] = Node(name="n1", state=("IDLE", "DRAIN"), reason="x")

        async def failing(batch: Sequence[tuple[Event, str]]) -> list[Published]:
            raise ConnectionError("NATS unreachable")

        p.publish = failing  # type: ignore[assignment]
        with pytest.raises(ConnectionError):
            await p.poll_once()
        p.publish = sink  # type: ignore[assignment]
        # The change was not stored: the next poll translates it again and publishes it.
        assert await p.poll_once() == 1
        assert sink.last() == [("SlurmNode", "n1", "observed")]
        assert translated == ["n1", "n1"]
    finally:
        slurm_poller.node_to_event = real  # type: ignore[assignment]


# --- jobs/state between full job listings --------------------------------------------------


def _jobs(*specs: tuple[int, str]) -> list[Job]:
    return [Job(job_id=i, name=f"j{i}", state=(state,), partition="batch") for i, state in specs]


def _job_events(sink: Sink) -> list[tuple[str, str, str]]:
    return [t for t in sink.last() if t[0] == "SlurmJob"]


async def test_between_listings_only_jobs_whose_state_changed_are_read() -> None:
    c, sink = FakeClient(), Sink()
    c.jobs = _jobs((1, "PENDING"), (2, "PENDING"), (3, "RUNNING"))
    p = poller(c, sink)
    await p.poll_once()
    assert (c.job_lists, c.state_lists) == (1, 0)  # the first poll lists every job

    c.jobs[0] = Job(job_id=1, name="j1", state=("RUNNING",), nodes=("n1",), partition="batch")
    await p.poll_once()
    assert (c.job_lists, c.state_lists) == (1, 1)
    assert c.job_gets == [1]  # only the job whose state changed is read whole
    assert _job_events(sink) == [("SlurmJob", "1", "observed")]
    ev = p.last[("SlurmJob", "1")][0]
    assert isinstance(ev, SlurmJob) and ev.nodes == ("n1",)

    # New job, and a job Slurm no longer lists.
    c.jobs = [c.jobs[0], c.jobs[2], *_jobs((4, "PENDING"))]
    await p.poll_once()
    assert c.job_gets == [1, 4]
    assert sorted(_job_events(sink)) == [
        ("SlurmJob", "2", "deleted"),
        ("SlurmJob", "4", "observed"),
    ]
    assert await p.poll_once() == 0
    assert c.job_lists == 1


async def test_a_change_that_keeps_the_state_waits_for_the_next_full_listing() -> None:
    c, sink = FakeClient(), Sink()
    c.jobs = _jobs((1, "PENDING"))
    p = poller(c, sink)
    await p.poll_once()
    c.jobs = [Job(job_id=1, name="j1", state=("PENDING",), partition="other")]
    assert await p.poll_once() == 0
    assert c.job_gets == []
    assert p._jobs_listed_at is not None
    p._jobs_listed_at -= p.job_relist_interval  # the relist interval has passed
    await p.poll_once()
    assert c.job_lists == 2
    assert _job_events(sink) == [("SlurmJob", "1", "observed")]
    ev = p.last[("SlurmJob", "1")][0]
    assert isinstance(ev, SlurmJob) and ev.partition == "other"


async def test_many_state_changes_read_one_full_listing_instead() -> None:
    c, sink = FakeClient(), Sink()
    c.jobs = _jobs(*((i, "PENDING") for i in range(1, 11)))
    p = slurm_poller.SlurmPoller(
        c,  # type: ignore[arg-type]
        sink,
        cluster="c",
        producer="p",
        poll_interval=1.0,
        seed={},
        job_fetch_limit=3,
    )
    await p.poll_once()
    c.jobs = _jobs(*((i, "RUNNING") for i in range(1, 11)))
    await p.poll_once()
    assert c.job_gets == []
    assert (c.job_lists, c.state_lists) == (2, 1)
    assert len(_job_events(sink)) == 10


async def test_without_jobs_state_every_poll_lists_every_job() -> None:
    c, sink = FakeClient(), Sink()
    c.states_offered = False  # v0.0.38 (Slurm 22.05)
    c.jobs = _jobs((1, "PENDING"))
    p = poller(c, sink)
    for _ in range(3):
        await p.poll_once()
    assert c.job_lists == 3
    c.jobs = _jobs((1, "RUNNING"))
    await p.poll_once()
    assert _job_events(sink) == [("SlurmJob", "1", "observed")]

    c2 = FakeClient()
    p2 = slurm_poller.SlurmPoller(
        c2,  # type: ignore[arg-type]
        Sink(),
        cluster="c",
        producer="p",
        poll_interval=1.0,
        seed={},
        job_relist_interval=0,
    )
    for _ in range(3):
        await p2.poll_once()
    assert (c2.job_lists, c2.state_lists) == (3, 0)


async def test_a_job_a_state_poll_could_not_read_is_read_again_by_the_next() -> None:
    c, sink = FakeClient(), Sink()
    c.jobs = _jobs((1, "PENDING"))
    p = poller(c, sink)
    await p.poll_once()
    # Job 2 appears in the state list but its GET finds nothing (e.g. it was purged in
    # between); its entry does not change again, yet the next poll reads it.
    c.jobs = _jobs((1, "PENDING"), (2, "RUNNING"))
    c.jobs_not_found = {2}
    await p.poll_once()
    assert c.job_gets == [2]
    assert ("SlurmJob", "2") not in p.last
    c.jobs_not_found = set()
    await p.poll_once()
    assert c.job_gets == [2, 2]
    assert _job_events(sink) == [("SlurmJob", "2", "observed")]
    await p.poll_once()
    assert c.job_gets == [2, 2]  # in step now: not read again


async def test_a_state_poll_whose_batch_was_not_stored_is_examined_again() -> None:
    c, sink = FakeClient(), Sink()
    c.jobs = _jobs((1, "PENDING"), (2, "PENDING"))
    p = poller(c, sink)
    await p.poll_once()
    c.jobs = _jobs((1, "RUNNING"))  # 1 changed, 2 ended and was purged

    async def down(batch: Sequence[tuple[Event, str]]) -> list[Published]:
        raise ConnectionError("log unreachable")

    p.publish = down
    with pytest.raises(ConnectionError):
        await p.poll_once()
    # The state list is the same as the one the failed poll read: only a recheck finds
    # what that poll could not publish.
    p.publish = sink
    await p.poll_once()
    assert sorted(_job_events(sink)) == [
        ("SlurmJob", "1", "observed"),
        ("SlurmJob", "2", "deleted"),
    ]
    assert await p.poll_once() == 0


async def test_a_job_recorded_by_the_hot_loop_is_compared_with_the_state_list() -> None:
    c, sink = FakeClient(), Sink()
    c.jobs = _jobs((1, "PENDING"))
    p = poller(c, sink)
    await p.poll_once()
    await p.poll_once()  # the state list is now the memo's
    # The hot loop reads job 1 as RUNNING; the state list (unchanged since) says PENDING
    # again by the next poll — a flip back the memo alone would not see.
    c.jobs = _jobs((1, "RUNNING"))
    await p.poll_jobs_once([1])
    c.jobs = _jobs((1, "PENDING"))
    gets = len(c.job_gets)
    await p.poll_once()
    assert c.job_gets[gets:] == [1]
    ev = p.last[("SlurmJob", "1")][0]
    assert isinstance(ev, SlurmJob) and ev.state == ("PENDING",)


async def test_a_failed_poll_does_not_count_as_a_listing() -> None:
    c, sink = FakeClient(), Sink()
    p = poller(c, sink)
    c.fail = slurm_errors.Unavailable("down")
    await p.poll_once()
    c.fail = None
    await p.poll_once()
    # The first good poll is a full listing (the failed one listed too, at once with its
    # ping, but did not count).
    assert (c.job_lists, c.state_lists) == (2, 0)


def test_every_slurm_node_field_reaches_the_observation() -> None:
    """node_to_event copies the client's Node by field name: each Node field (but its name,
    the key) is a SlurmNode field of the same type."""
    node_fields = {f.name: f.type for f in msgspec.structs.fields(Node) if f.name != "name"}
    event_fields = {f.name: f.type for f in msgspec.structs.fields(SlurmNode)}
    assert node_fields.items() <= event_fields.items()
    full = msgspec.json.decode(
        b'{"name": "n", "state": ["IDLE", "DRAIN"], "reason": "r", "reason_set_by_user": "u",'
        b' "reason_changed_at": 5, "cpus": 4, "alloc_cpus": 1, "real_memory": 100,'
        b' "features": ["f"], "partitions": ["p"], "gres": "gpu:1", "address": "a",'
        b' "comment": "c", "topology": "t:b", "reservation": "maint", "extra": "x=1",'
        b' "active_features": ["f"]}',
        type=Node,
    )
    assert all(getattr(full, name) != getattr(Node(name="n"), name) for name in node_fields)
    ev = translate.node_to_event(full, cluster="c")
    assert ev.key == "n"
    assert all(getattr(ev, name) == getattr(full, name) for name in node_fields)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (b'{"set": true, "infinite": false, "number": 4294901759}', 4294901759),
        (b'{"set": false, "infinite": false, "number": 0}', None),
        (b"1234", 1234),  # v0.0.38: a plain integer
        (b"null", None),
    ],
)
def test_a_jobs_priority_reaches_its_event(raw: bytes, want: int | None) -> None:
    """Issue 20 (1): the REST job's priority (NoVal ⇒ None), and its reason, on SlurmJob."""
    body = (
        b'{"jobs": [{"job_id": 9, "job_state": ["PENDING"], "state_reason": "Priority",'
        b' "partition": "gpu", "priority": ' + raw + b"}]}"
    )
    listing = codecs.get("v0.0.44").decode_jobs(body)
    assert listing is not None
    (job,) = listing.jobs
    ev = translate.job_to_event(job, cluster="c", observed_at=1)
    assert (ev.priority, ev.state_reason, ev.partition) == (want, "Priority", "gpu")


def test_node_allocatable_is_translated_and_zero_when_absent() -> None:
    raw = msgspec.json.decode(
        b'{"metadata":{"name":"n"},"status":{"capacity":{"cpu":"4","memory":"8Gi","pods":"110"},'
        b'"allocatable":{"cpu":"3800m","memory":"7Gi","pods":"100"}}}',
        type=RawNode,
    )
    ev = pk.node_to_event(raw, producer="p", observed_at=0)
    assert (ev.alloc_cpu_millis, ev.alloc_memory_bytes, ev.alloc_pods) == (3800, 7 * 2**30, 100)
    empty = pk.node_to_event(RawNode(), producer="p", observed_at=0)
    assert (empty.alloc_cpu_millis, empty.alloc_memory_bytes, empty.alloc_pods) == (0, 0, 0)


POD_PLACEMENT = b"""{
 "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
 "spec": {
   "nodeSelector": {"disk": "ssd"},
   "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
     "nodeSelectorTerms": [
       {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
       {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]},
       {}
     ]}}},
   "tolerations": [
     {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
     {"operator": "Exists"},
     {"key": "k", "value": "v"}
   ],
   "containers": [{"resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}],
   "overhead": {"cpu": "50m"}
 }
}"""


def test_pod_placement_fields_are_translated() -> None:
    from schemas.events import NodeSelectorRequirement, NodeSelectorTerm, Toleration
    from slurmbridge.kube.wire import RawPod

    raw = msgspec.json.decode(POD_PLACEMENT, type=RawPod)
    ev = pk.pod_to_event(raw, producer="p", observed_at=0)
    assert ev.node_selector == {"disk": "ssd"}
    assert ev.node_affinity == (
        NodeSelectorTerm(
            match_expressions=(
                NodeSelectorRequirement(key="zone", operator="In", values=("a", "b")),
            )
        ),
        NodeSelectorTerm(
            match_fields=(
                NodeSelectorRequirement(key="metadata.name", operator="NotIn", values=("n1",)),
            )
        ),
        NodeSelectorTerm(),
    )
    assert ev.toleration_specs == (
        Toleration(key="dedicated", operator="Equal", value="gpu", effect="NoSchedule"),
        Toleration(key="", operator="Exists"),
        Toleration(key="k", operator="Equal", value="v"),
    )
    assert ev.tolerations == ("", "dedicated", "k")  # the keys, as before
    assert (ev.cpu_millis, ev.memory_bytes) == pk.pod_requests(raw.spec) == (300, 2**30)
    # No required affinity (None) is not an affinity without terms (matches nothing).
    bare = pk.pod_to_event(RawPod(), producer="p", observed_at=0)
    assert (bare.node_selector, bare.node_affinity, bare.toleration_specs) == ({}, None, ())
    empty = msgspec.json.decode(
        b'{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":'
        b'{"nodeSelectorTerms":[]}}}}}',
        type=RawPod,
    )
    assert pk.pod_to_event(empty, producer="p", observed_at=0).node_affinity == ()


def test_extended_resources_and_host_ports_are_translated() -> None:
    """Issue 28 item 4: a node's allocatable extended resources, and a pod's effective
    request of them (the larger of the containers' sum and the largest init container, a
    limit where no request is set, plus overhead; DRA extended resources left out) and its
    host ports (fit.go ``computePodResourceRequest``, node_ports.go)."""
    node = msgspec.json.decode(
        b'{"metadata":{"name":"n"},"status":{"allocatable":{"cpu":"4","memory":"8Gi",'
        b'"pods":"110","nvidia.com/gpu":"8","ephemeral-storage":"1Ki","example.com/x":"0"}}}',
        type=RawNode,
    )
    assert pk.node_to_event(node, producer="p", observed_at=0).alloc_extended == {
        "ephemeral-storage": 1024,
        "nvidia.com/gpu": 8,
    }
    raw = msgspec.json.decode(
        b"""{"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {
          "initContainers": [{"resources": {"requests": {"nvidia.com/gpu": "3"}},
                              "ports": [{"containerPort": 53, "hostPort": 53,
                                         "protocol": "UDP"}]}],
          "containers": [
            {"resources": {"limits": {"nvidia.com/gpu": "1",
                                      "deviceclass.resource.kubernetes.io/gpu": "1"}},
             "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 9000}]},
            {"resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "1"}},
             "ports": [{"containerPort": 80, "hostPort": 8081, "hostIP": "10.0.0.1"}]}],
          "overhead": {"example.com/x": "2"}}}""",
        type=RawPod,
    )
    pod = pk.pod_to_event(raw, producer="p", observed_at=0)
    assert pod.extended == {"example.com/x": 2, "nvidia.com/gpu": 3}
    assert pod.host_ports == (
        HostPort(port=53, protocol="UDP"),
        HostPort(port=8080),
        HostPort(port=8081, host_ip="10.0.0.1"),
    )


def test_the_hot_loop_asks_an_unchanging_queue_ever_less_often_and_a_change_at_once() -> None:
    """Issue 30 item 4: rounds that name the same jobs and read none of them double the wait
    up to the idle interval once nothing changed for ``calm`` seconds; a hint, a new hot set
    or a job read whole resets it. Item 6: until then the rounds keep their interval, so a
    start in slurmctld's next scheduling pass is seen at once."""
    now = [0.0]
    pace = slurm_poller.HotPace(0.02, 0.32, calm=1.0, clock=lambda: now[0])

    def rounds(n: int, ids: list[int], reads: int = 0) -> list[float]:
        waits = []
        for _ in range(n):
            waits.append(pace.wait)
            now[0] += pace.wait
            pace.after_round(woken=False, ids=ids, reads=reads)
        return waits

    # The first round names [1, 2] for the first time: busy; then 50 rounds of 20 ms (the
    # calm second), and only then do quiet rounds double.
    waits = rounds(56, [1, 2])
    assert waits[:51] == [0.02] * 51
    assert waits[51:] == [0.04, 0.08, 0.16, 0.32, 0.32]
    rounds(1, [1, 2, 3])  # a job joined the hot set
    assert pace.wait == 0.02
    assert set(rounds(50, [1, 2, 3])) == {0.02}
    rounds(1, [1, 2, 3], reads=1)  # one moved (a start)
    assert pace.wait == 0.02
    rounds(60, [1, 2, 3])
    assert pace.wait > 0.02
    pace.after_round(woken=True, ids=[1, 2, 3], reads=0)  # a hint woke the loop
    assert pace.wait == 0.02
    rounds(200, [1, 2, 3])  # never beyond the idle interval, however long it stays quiet
    assert pace.wait == 0.32
