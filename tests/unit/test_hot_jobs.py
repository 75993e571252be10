"""The jobs the Slurm poller watches closely (slurmbridge.app.HotJobs; issue 30, items 4 and
6): a long queue costs O(limit) per hot round, a new pod's job is never behind it, and the
head of Slurm's queue — the jobs that start next — is watched however long they waited."""

from __future__ import annotations

import pytest

from schemas import wellknown
from schemas.events import KubePod, SlurmJob
from slurmbridge import app
from slurmbridge.app import HotJobs
from tests.unit._pods import kube_pod


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(app.time, "monotonic", c)
    return c


def waiting(name: str, job: int, *, node: str = "") -> KubePod:
    return kube_pod("default", name, labels={wellknown.LABEL_SLURM_JOBID: str(job)}, node_name=node)


def job(job_id: int, state: str) -> SlurmJob:
    return SlurmJob(source="slurm:c1", key=str(job_id), job_id=job_id, state=(state,))


def test_a_new_job_is_first_however_long_the_queue(clock: Clock) -> None:
    hot = HotJobs("c1")
    for i in range(1, 10_001):
        hot.observe(waiting(f"q{i}", i), i)
    clock.now += 0.5
    hot.observe(waiting("new", 20_000), 20_001)
    assert hot()[:2] == [20_000, 10_000], "newest first"


def pending(job_id: int, *, priority: int = 1, submit: int = 0) -> SlurmJob:
    return SlurmJob(
        source="slurm:c1",
        key=str(job_id),
        job_id=job_id,
        state=("PENDING",),
        priority=priority,
        submit_time=submit or 1_700_000_000 + job_id,
    )


def test_the_head_of_the_queue_stays_hot_however_long_it_waited(clock: Clock) -> None:
    """The oldest waiting jobs are the ones slurmctld starts next (sort_job_queue2): they
    stay hot past any window, beside the newest (before issue 30 item 6, a job waiting more
    than 10 s was left to the 2 s state poll — 57–61 of 72 jobs at 50 pods/s)."""
    hot = HotJobs("c1")
    for i in range(1, 101):
        hot.observe(waiting(f"q{i}", i), i)
        hot.observe(pending(i), 1000 + i)
    clock.now += 3600
    hot.observe(waiting("new", 200), 2000)
    assert hot()[:6] == [200, 1, 100, 2, 99, 3], "newest and head, alternately"
    assert sorted(hot()) == [*range(1, 101), 200], "each once, however the ends overlap"


def test_the_head_follows_slurm_s_priority_then_submit_time(clock: Clock) -> None:
    hot = HotJobs("c1")
    for i in range(1, 11):
        hot.observe(waiting(f"q{i}", i), i)
        hot.observe(pending(i), 100 + i)
    hot.observe(pending(7, priority=5), 200)  # raised: now first in Slurm's queue
    hot.observe(pending(3, submit=1_600_000_000), 201)  # submitted earlier
    head = [j for j in hot() if j not in (10, 9, 8)][:3]
    assert head == [7, 3, 1]
    assert hot(2) == [10, 7]
    # Started, or no longer waited for: out of the head (and the next takes its place).
    hot.observe(job(7, "RUNNING"), 300)
    hot.observe(waiting("q3", 3, node="n1"), 301)
    assert hot(2) == [10, 1]


def test_a_round_reads_only_limit_jobs_of_a_long_queue(clock: Clock) -> None:
    """10,000 waiting jobs: one round's answer is ``limit`` long, and building it reads
    only O(limit) of the queue (the iteration is lazy; a list of all is never built)."""
    hot = HotJobs("c1")
    for i in range(1, 10_001):
        hot.observe(waiting(f"q{i}", i), i)
        hot.observe(pending(i), 20_000 + i)
    read = 0
    queued = hot.queued

    class Counting(dict[int, None]):
        def __reversed__(self):  # type: ignore[no-untyped-def]
            nonlocal read
            for j in reversed(queued):
                read += 1
                yield j

    hot.queued = Counting(queued)
    newest, head = range(10_000, 9_936, -1), range(1, 65)
    assert hot(128) == [j for pair in zip(newest, head, strict=True) for j in pair]
    assert read <= 65


def test_a_job_that_leaves_the_queue_leaves_the_head(clock: Clock) -> None:
    """Ended, deleted, or its last pod gone: no longer hot, and the head does not keep it."""
    hot = HotJobs("c1")
    for i in (1, 2, 3, 4):
        hot.observe(waiting(f"q{i}", i), i)
        hot.observe(pending(i), 10 + i)
    hot.observe(job(1, "CANCELLED"), 20)
    hot.observe(waiting("q1", 1, node="n1"), 21)
    hot.observe(SlurmJob(source="slurm:c1", key="2", job_id=2, op="deleted"), 22)
    hot.observe(waiting("q2", 2, node="n1"), 23)
    hot.observe(waiting("q3", 3, node="n1"), 24)
    assert hot() == [4]
    assert hot._head == [(-1, 1_700_000_004, 4)]
    # A job of another cluster never enters it.
    other = SlurmJob(source="slurm:c2", key="5", job_id=5, state=("PENDING",), priority=9)
    hot.observe(waiting("q5", 5), 25)
    hot.observe(other, 26)
    assert hot() == [5, 4]


def test_a_started_job_or_a_bound_pod_is_not_hot(clock: Clock) -> None:
    hot = HotJobs("c1")
    hot.observe(waiting("a", 1), 1)
    hot.observe(waiting("b", 2), 2)
    hot.observe(job(1, "RUNNING"), 3)
    hot.observe(waiting("b", 2, node="n1"), 4)
    assert hot() == []


def test_a_hinted_job_comes_first_until_its_next_state(clock: Clock) -> None:
    hot = HotJobs("c1")
    hot.observe(waiting("a", 1), 1)
    hot.hint(7)
    assert hot() == [7, 1]
    hot.observe(job(7, "RUNNING"), 2)
    assert hot() == [1]


def test_a_submitted_job_is_hinted_until_the_log_has_it(clock: Clock) -> None:
    hot = HotJobs("c1")
    for i in range(1, 301):
        hot.hint(i)
    hot.hint(500)
    assert hot()[0] == 500, "the newest hint first"
    for i in range(1, 301):
        hot.observe(job(i, "PENDING"), i)
    assert hot() == [500], "a submitted job seen pending is no longer hinted"


def test_a_cancelled_job_is_hinted_until_it_ends(clock: Clock) -> None:
    hot = HotJobs("c1")
    hot.observe(job(3, "PENDING"), 1)
    hot.hint(3)
    hot.observe(job(3, "PENDING"), 2)
    assert hot() == [3]
    hot.observe(job(3, "CANCELLED"), 3)
    assert hot() == []
