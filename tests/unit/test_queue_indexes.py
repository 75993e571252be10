"""A big pending queue costs nothing to decide on (issue 30, item 4): placement's
``queue_position`` and workload's ``_marked_job`` read declared indexes
(reconcilers.base.Index, kept by slurmbridge.runtime.projection) instead of scanning every
job, and give exactly the answers the scans gave — checked here against those scans, kept
verbatim below, on random stores that change as jobs join, leave and change."""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from reconcilers import _pods, workload
from reconcilers.base import Index, Store
from reconcilers.placement import _view
from reconcilers.placement._view import PENDING_QUEUE, queue_key, queue_position
from reconcilers.workload import MARKED_JOBS, _marked_job
from schemas import events, wellknown
from schemas.events import SlurmJob
from slurmbridge.runtime.projection import Projection

GROUPS = [_pods.Group(namespace="ns", kind="Pod", name=f"p{i}") for i in range(5)]
CLUSTERS = ("c1", "c2")
STATES = ("PENDING", "PENDING", "PENDING", "RUNNING", "COMPLETED", "CANCELLED", "")


def old_queue_position(store: Store, job: SlurmJob) -> int:
    """reconcilers/placement/_view.py's queue_position before issue 30, item 4: a pass
    over the partition's jobs (``by_field``)."""
    if job.base_state != "PENDING" or not job.partition:
        return 0
    mine = queue_key(job)
    ahead = 0
    for j in store.by_field(SlurmJob, "partition", job.partition):
        if (
            j.base_state == "PENDING"
            and j.job_id != job.job_id
            and j.source == job.source
            and queue_key(j) < mine
        ):
            ahead += 1
            if ahead + 1 >= wellknown.QUEUE_POSITION_CAP:
                break
    return ahead + 1


def old_marked_job(store: Store, group: _pods.Group, source: str) -> SlurmJob | None:
    """reconcilers/workload.py's _marked_job before issue 30, item 4: a pass over every job."""
    return next(
        (
            j
            for j in store.values(SlurmJob, source)
            if _pods.group_key_of_marker(j.comment) == group.key
            and j.base_state not in workload.ENDED
        ),
        None,
    )


def random_job(rng: random.Random, ids: int) -> SlurmJob:
    job_id = rng.randint(1, ids)
    cluster = rng.choice(CLUSTERS)
    group = rng.choice(GROUPS)
    comment = rng.choice(
        [
            _pods.marker(group, rng.choice(("u1", "u2"))),
            _pods.marker(group, rng.choice(("u1", "u2"))),
            "",
            "a user's: comment",
            f"slurmbridge:{group.key}",  # no uid part: no group
        ]
    )
    state = rng.choice(STATES)
    return SlurmJob(
        source=f"slurm:{cluster}",
        key=str(job_id),
        cluster=cluster,
        job_id=job_id,
        state=(state,) if state else (),
        partition=rng.choice(("gpu", "gpu", "cpu", "")),
        priority=rng.choice((None, 0, 50, 100, 100, 200)),
        submit_time=rng.randint(0, 3),
        comment=comment,
    )


def changes(rng: random.Random, steps: int, ids: int) -> Iterator[SlurmJob]:
    """Jobs joining, changing (state, priority, partition, marker) and leaving."""
    live: dict[tuple[str, str], SlurmJob] = {}
    for _ in range(steps):
        if live and rng.random() < 0.25:
            gone = live.pop(rng.choice(sorted(live)))
            yield events.tombstone(gone, version="", producer="test", observed_at=0)
        else:
            job = random_job(rng, ids)
            live[(job.source, job.key)] = job
            yield job


def probes(store: Projection, rng: random.Random, ids: int) -> list[SlurmJob]:
    """Every live job, and jobs the store does not hold (ids it has never seen: a view
    asks for the place of the job it read from the store, so a job the store holds is never
    asked about in another state)."""
    held = [j for c in CLUSTERS for j in store.values(SlurmJob, f"slurm:{c}")]
    unseen = [random_job(rng, ids) for _ in range(5)]
    return held + [msgspec.structs.replace(j, job_id=j.job_id + ids, key=str(j.job_id + ids))
                   for j in unseen]  # fmt: skip


def old_first_pending(store: Store, source: str, partition: str) -> list[SlurmJob]:
    """reconcilers/placement/triggers.py's after_job before issue 30, item 4: the first
    pending jobs of a partition, by a pass over the partition's jobs."""
    pending = [
        j
        for j in store.by_field(SlurmJob, "partition", partition)
        if j.source == source and j.base_state == "PENDING"
    ]
    return heapq.nsmallest(wellknown.QUEUE_POSITION_CAP, pending, key=queue_key)


def check(store: Projection, rng: random.Random, ids: int) -> None:
    for source in (f"slurm:{c}" for c in CLUSTERS):
        for part in ("gpu", "cpu"):
            first = store.by_index(
                PENDING_QUEUE, (source, part), limit=wellknown.QUEUE_POSITION_CAP
            )
            assert first == old_first_pending(store, source, part)
    for job in probes(store, rng, ids):
        assert queue_position(store, job) == old_queue_position(store, job), job
    for c in CLUSTERS:
        for g in GROUPS:
            assert _marked_job(store, g, f"slurm:{c}") == old_marked_job(store, g, f"slurm:{c}")


@pytest.mark.parametrize("seed", range(12))
def test_the_indexed_lookups_answer_as_the_scans_did_as_jobs_join_leave_and_change(
    seed: int,
) -> None:
    """Each lookup after every change (indexes built at once, then kept up to date)."""
    rng = random.Random(seed)
    ids = rng.choice((8, 30, 150))
    store = Projection()
    check(store, rng, ids)
    for seq, event in enumerate(changes(rng, 300, ids), 1):
        store.apply(event, seq)
        check(store, rng, ids)


@pytest.mark.parametrize("seed", range(12))
def test_an_index_built_late_holds_what_one_kept_up_to_date_holds(seed: int) -> None:
    rng = random.Random(100 + seed)
    ids = rng.choice((8, 30, 300))
    kept, steps = Projection(), list(changes(rng, 400, ids))
    kept.rank(PENDING_QUEUE, ("slurm:c1", "gpu"), (0, 0, 0))  # built before any job
    kept.by_index(MARKED_JOBS, ("slurm:c1", GROUPS[0].key))
    for seq, event in enumerate(steps, 1):
        kept.apply(event, seq)
    late = Projection()
    for seq, event in enumerate(steps, 1):
        late.apply(event, seq)
    check(late, rng, ids)
    for index in (PENDING_QUEUE, MARKED_JOBS):
        assert kept._ranked(index) == late._ranked(index)
        # ... and what a pass over every live job gives, sorted by the index's order.
        want: dict[object, list[tuple[object, str, str]]] = {}
        for j in late.values(SlurmJob):
            value = index.value(j)
            if value is not None:
                want.setdefault(value, []).append((index.order(j), j.source, j.key))
        assert kept._ranked(index) == {v: sorted(m) for v, m in want.items()}
        for value, members in want.items():
            assert [(j.source, j.key) for j in kept.by_index(index, value)] == [
                (s, k) for _, s, k in sorted(members)
            ]


def test_rank_counts_the_members_strictly_before_an_order() -> None:
    by_priority: Index[SlurmJob] = Index(
        "jobs by partition, by priority", SlurmJob, lambda j: j.partition, lambda j: j.priority
    )
    store = Projection()
    for seq, (job_id, priority) in enumerate(((1, 5), (2, 3), (3, 5), (4, 9)), 1):
        store.apply(
            SlurmJob(source="slurm:c1", key=str(job_id), job_id=job_id, partition="gpu",
                     priority=priority),
            seq,
        )  # fmt: skip
    assert [store.rank(by_priority, "gpu", p) for p in (0, 3, 4, 5, 6, 9, 10)] == [
        0, 0, 1, 1, 3, 3, 4
    ]  # fmt: skip
    assert [j.job_id for j in store.by_index(by_priority, "gpu")] == [2, 1, 3, 4]
    assert store.rank(by_priority, "cpu", 5) == 0
    assert store.by_index(by_priority, "cpu") == []
    job = store.get(SlurmJob, "2", "slurm:c1")
    assert job is not None
    store.apply(msgspec.structs.replace(job, priority=7), 5)  # moves within its value
    assert [j.job_id for j in store.by_index(by_priority, "gpu")] == [1, 3, 2, 4]
    store.apply(msgspec.structs.replace(job, priority=7, partition="cpu"), 6)  # changes value
    assert [j.job_id for j in store.by_index(by_priority, "gpu")] == [1, 3, 4]
    assert [j.job_id for j in store.by_index(by_priority, "cpu")] == [2]


def test_a_job_near_the_front_of_a_deep_queue_reads_no_job_of_the_queue() -> None:
    """The old pass read every job behind a job near the front (it stopped only at the cap
    of jobs ahead); the index reads none: a store whose jobs cannot be read still answers."""
    jobs = [
        SlurmJob(source="slurm:c1", key=str(i), cluster="c1", job_id=i, state=("PENDING",),
                 partition="gpu", priority=100, comment=_pods.marker(GROUPS[0], f"u{i}"))
        for i in range(1, 2001)
    ]  # fmt: skip

    class Unreadable(Projection):
        def values(self, kind, source=None):  # type: ignore[no-untyped-def,override]
            raise AssertionError("a pass over every job")

        def by_field(self, kind, field, value):  # type: ignore[no-untyped-def,override]
            raise AssertionError("a pass over the partition's jobs")

    store = Unreadable()
    for seq, j in enumerate(jobs, 1):
        store.apply(j, seq)
    assert _view.queue_position(store, jobs[2]) == 3
    assert _view.queue_position(store, jobs[-1]) == wellknown.QUEUE_POSITION_CAP
    one = Unreadable()
    one.apply(jobs[5], 1)
    assert _marked_job(one, GROUPS[0], "slurm:c1") == jobs[5]
    assert _marked_job(one, GROUPS[1], "slurm:c1") is None


def test_a_change_on_a_node_outside_the_queues_partition_parses_no_marker_of_the_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pod of ours binding in a free partition changes its node's usage, and placement
    asks which pending groups that node concerns (triggers.pending_groups): the 2,000 jobs
    queued in another partition are passed over on their partition, their markers unread."""
    from reconcilers.base import Context
    from reconcilers.placement import triggers
    from schemas.events import SlurmPartition

    store = Projection()
    store.apply(SlurmPartition(source="slurm:c1", key="gpu", cluster="c1", nodes=("n1",)), 1)
    store.apply(SlurmPartition(source="slurm:c1", key="batch", cluster="c1", nodes=("n3",)), 2)
    for i in range(1, 2001):
        store.apply(
            SlurmJob(source="slurm:c1", key=str(i), cluster="c1", job_id=i, state=("PENDING",),
                     partition="gpu", comment=_pods.marker(GROUPS[i % 5], f"u{i}")),
            2 + i,
        )  # fmt: skip
    parsed: list[str] = []
    parse = _pods.group_key_of_marker

    def counting(comment: str) -> str | None:
        parsed.append(comment)
        return parse(comment)

    monkeypatch.setattr(_pods, "group_key_of_marker", counting)
    ctx = Context(scheduler_name="sched", cluster="c1")
    read: list[SlurmJob] = []
    by_index = store.by_index

    def reading(index: Index[SlurmJob], value: object, limit: int | None = None) -> list[SlurmJob]:
        found = by_index(index, value, limit)  # type: ignore[arg-type]
        read.extend(found)
        return found

    monkeypatch.setattr(store, "by_index", reading)
    values = store.values

    def no_job_pass(kind: type[Any], source: str | None = None) -> Any:
        assert kind is not SlurmJob, "a pass over every job"
        return values(kind, source)

    monkeypatch.setattr(store, "values", no_job_pass)
    assert triggers.pending_groups(store, ctx, near="n3") == []
    assert parsed == []
    assert read == []  # not one job of the queue read
    assert triggers.pending_groups(store, ctx, near="n1") == sorted(g.key for g in GROUPS)


def old_pending_groups(store: Store, source: str, parts: set[str] | None) -> list[str]:
    """reconcilers/placement/triggers.py's pending_groups pass over every job (before the
    PENDING_BY_PARTITION index), given the partitions the node is in (None: every job)."""
    keys = set()
    for j in store.values(SlurmJob, source):
        if j.base_state != "PENDING":
            continue
        if parts is not None and j.partition and parts.isdisjoint(j.partition.split(",")):
            continue
        if key := _pods.group_key_of_marker(j.comment):
            keys.add(key)
    return sorted(keys)


@pytest.mark.parametrize("seed", range(6))
def test_pending_groups_near_a_node_answer_as_the_pass_over_every_job_did(seed: int) -> None:
    from reconcilers.base import Context
    from reconcilers.placement import triggers
    from schemas.events import SlurmPartition

    rng = random.Random(seed)
    ids = rng.choice((8, 30, 150))
    store = Projection()
    layout = {"gpu": ("n1", "n3"), "cpu": ("n2", "n3")}
    seq = 0
    for c in CLUSTERS:
        for name, nodes in layout.items():
            seq += 1
            store.apply(SlurmPartition(source=f"slurm:{c}", key=name, cluster=c, nodes=nodes), seq)
    near_parts = {"n1": {"gpu"}, "n2": {"cpu"}, "n3": {"gpu", "cpu"}}
    for event in changes(rng, 300, ids):
        seq += 1
        if isinstance(event, SlurmJob) and rng.random() < 0.2:
            event = msgspec.structs.replace(event, partition="gpu,cpu")
        store.apply(event, seq)
        for c in CLUSTERS:
            ctx = Context(scheduler_name="sched", cluster=c)
            for near, parts in near_parts.items():
                got = triggers.pending_groups(store, ctx, near=near)
                assert got == old_pending_groups(store, f"slurm:{c}", parts), (near, c)
            assert triggers.pending_groups(store, ctx, near="n9") == []  # in no partition
