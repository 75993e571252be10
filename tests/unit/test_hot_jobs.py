"""The jobs the Slurm poller watches closely (slurmbridge.app.HotJobs; issue 30, item 4): a
long queue costs nothing per hot round, and a new pod's job is never behind it."""

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


def test_a_job_pending_past_the_window_is_left_to_the_regular_poll(clock: Clock) -> None:
    hot = HotJobs("c1")
    for i in range(1, 10_001):
        hot.observe(waiting(f"q{i}", i), i)
    assert len(hot()) == 10_000
    clock.now += HotJobs.HOT_WINDOW + 0.1
    assert hot() == [], "10,000 pending jobs: nothing to GET each hot round"
    hot.observe(waiting("q1-sibling", 1), 10_002)
    assert hot() == [], "a second pod of a cold job does not heat it again"


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
