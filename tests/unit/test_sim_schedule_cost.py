"""The slurmrestd simulator's scheduling pass stays cheap behind a long queue, and answers as
before: a job of the same shape as one that could not start in this pass is given the same
reason without trying the nodes again (slurmctld's main scheduler likewise gives up on a
partition once a job there waits for resources: job_scheduler.c, ``failed_parts``)."""

from __future__ import annotations

import dataclasses
import time

import pytest

from slurmbridge.devtools.sim.slurmrestd import SlurmSim

#: A whole-node job in ``gpu`` (n1, n2), as slurmbridge submits a bare pod's placeholder.
WHOLE = {"partition": "gpu", "tasks": 1, "min_nodes": 1, "exclusive": True}


def queued_sim(n: int) -> SlurmSim:
    sim = SlurmSim()
    sim.seed_default(8)
    # gpu held by someone else's job of one CPU per node: no node is idle, none is full.
    sim.submit({"partition": "gpu", "tasks": 2, "min_nodes": 2}, external=True)
    for _ in range(n):
        sim.submit(WHOLE, external=False)
    return sim


def test_a_long_queue_of_one_shape_costs_one_try_per_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim = queued_sim(500)
    tries = 0
    real = SlurmSim._usable

    def counting(self: SlurmSim, *args: object, **kw: object) -> bool:
        nonlocal tries
        tries += 1
        return real(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(SlurmSim, "_usable", counting)
    assert sim.schedule() == 0
    assert tries <= 2 * 2, f"{tries} node checks for 500 queued jobs on 2 nodes"


def test_the_reasons_are_slurmctlds() -> None:
    sim = queued_sim(3)
    ours = sorted((j for j in sim.jobs if "EXTERNAL_JOB" not in j.flags), key=lambda j: j.job_id)
    assert [j.state[0] for j in ours] == ["PENDING"] * 3
    assert [j.state_reason for j in ours] == ["Resources", "Priority", "Priority"]
    # A job of another shape behind them is still tried: one CPU fits beside the holder.
    small = sim.submit({"partition": "gpu", "tasks": 1, "min_nodes": 1}, external=False)
    assert sim.jobs_by_id[small].state == "RUNNING"


class _CountingJobs(dict[int, object]):
    """The simulator's jobs, counting the scans over them."""

    scans = 0

    def values(self):  # type: ignore[no-untyped-def,override]
        type(self).scans += 1
        return super().values()


def test_a_look_behind_a_long_queue_scans_the_jobs_only_when_a_purge_can_be_due() -> None:
    sim = queued_sim(300)
    sim.minute_s = 0.2  # a one-minute limit runs out in 0.2 s
    limited = sim.submit({"partition": "batch", "tasks": 1, "time_limit": 1}, external=False)
    assert sim.jobs_by_id[limited].state == "RUNNING"
    sim.jobs_by_id = _CountingJobs(sim.jobs_by_id)  # type: ignore[assignment]
    _CountingJobs.scans = 0
    sim._purge()
    scans = _CountingJobs.scans
    for _ in range(50):  # the hot loop's looks: nothing changed, nothing due
        sim._purge()
    assert _CountingJobs.scans == scans
    # Still exact: the limit ends the job at the first look after it runs out, and an ended
    # job vanishes at the first look after MinJobAge.
    deadline = time.monotonic() + 5
    while sim.jobs_by_id[limited].state == "RUNNING" and time.monotonic() < deadline:
        sim._purge()
        time.sleep(0.01)
    assert sim.jobs_by_id[limited].state == "TIMEOUT"
    sim.min_job_age = 0.05
    sim._purge()
    deadline = time.monotonic() + 5
    while limited in sim.jobs_by_id and time.monotonic() < deadline:
        sim._purge()
        time.sleep(0.01)
    assert limited not in sim.jobs_by_id
    # A write the purge depends on (an update of the time limit) is seen at once.
    other = sim.submit({"partition": "batch", "tasks": 1}, external=False)
    sim._purge()
    sim.jobs_by_id[other].time_limit = 1
    sim.jobs_by_id[other].start_mono -= 1.0
    sim._purge()
    assert sim.jobs_by_id[other].state == "TIMEOUT"


def _looks_scan(sim: SlurmSim) -> int:
    """How many scans over the jobs one look (``_purge``) made."""
    _CountingJobs.scans = 0
    sim._purge()
    return _CountingJobs.scans


def test_a_submit_a_start_and_an_end_are_read_alone_and_still_purged_on_time() -> None:
    sim = queued_sim(300)
    sim.min_job_age = 0.2
    sim.jobs_by_id = _CountingJobs(sim.jobs_by_id)  # type: ignore[assignment]
    _looks_scan(sim)
    job = sim.submit({"partition": "batch", "tasks": 1}, external=False)
    assert sim.jobs_by_id[job].state == "RUNNING"
    assert _looks_scan(sim) == 0, "a look after a submit and a start scanned the queue"
    sim.cancel_job(job)
    assert _looks_scan(sim) == 0, "a look after an end scanned the queue"
    # The end is due for its purge after MinJobAge: the first look after it removes it.
    deadline = time.monotonic() + 5
    while job in sim.jobs_by_id and time.monotonic() < deadline:
        sim._purge()
        time.sleep(0.01)
    assert job not in sim.jobs_by_id


def test_a_restored_job_and_one_built_outside_the_simulator_are_still_purged_on_time() -> None:
    """A job restored from saved state keeps its simulator's note (``copy.deepcopy`` copies
    the weak reference as it is); a job a test builds itself has none, so a write to it makes
    the next look scan all the jobs: either way a time limit written on it is enforced."""
    sim = queued_sim(5)
    sim.minute_s = 0.2
    job = sim.submit({"partition": "batch", "tasks": 1}, external=False)
    saved = sim.save_state()
    sim.restore_state(saved)
    sim._purge()
    restored = sim.jobs_by_id[job]
    assert restored is not saved.jobs[job]
    restored.time_limit = 1
    restored.start_mono -= 1.0
    sim._purge()
    assert restored.state == "TIMEOUT"

    other = sim.submit({"partition": "batch", "tasks": 1}, external=False)
    sim._purge()
    built = dataclasses.replace(sim.jobs_by_id[other])  # through __init__: no note
    sim.jobs_by_id[other] = built
    sim._purge()
    built.time_limit = 1
    built.start_mono -= 1.0
    sim._purge()
    assert built.state == "TIMEOUT"
