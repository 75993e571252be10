"""The slurmrestd simulator's scheduling pass stays cheap behind a long queue, and answers as
before: a job of the same shape as one that could not start in this pass is given the same
reason without trying the nodes again (slurmctld's main scheduler likewise gives up on a
partition once a job there waits for resources: job_scheduler.c, ``failed_parts``)."""

from __future__ import annotations

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
