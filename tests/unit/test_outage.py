"""A lasting failure is warned about again with back-off (OutageLog, on an injected clock), and
a poller's PollHealth turns a rejected token into a readiness reason after the grace."""

from __future__ import annotations

import logging

import pytest

from producers.slurm.poller import PollHealth
from slurmbridge.observability.outage import OutageLog
from slurmbridge.slurm.errors import MissingToken, Unauthorized, Unavailable


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_lasting_failure_is_warned_about_again_less_and_less_often(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    logger = logging.getLogger("test.outage")
    outage = OutageLog("poll of X", logger=logger, repeat=10.0, repeat_cap=40.0, clock=clock)
    caplog.set_level(logging.DEBUG, logger="test.outage")
    warned_at = []
    for _ in range(200):  # one attempt a second for 200 s
        before = len([r for r in caplog.records if r.levelno == logging.WARNING])
        outage.failed("HTTP 401")
        if len([r for r in caplog.records if r.levelno == logging.WARNING]) > before:
            warned_at.append(clock.now - 100.0)
        clock.now += 1.0
    # At the start, then 10, 20, 40, 40 … seconds apart.
    assert warned_at == [0.0, 10.0, 30.0, 70.0, 110.0, 150.0, 190.0]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings[0] == "poll of X failing (HTTP 401); said again in 10.0 s if it goes on"
    assert warnings[2].startswith("poll of X still failing after 30.0 s and 31 attempts")
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 200 - len(warned_at)

    outage.recovered()
    assert (
        caplog.records[-1].getMessage() == "poll of X recovered after 200.0 s (200 failed attempts)"
    )
    assert not outage.failing
    # A new outage starts from the first gap again.
    outage.failed("HTTP 503")
    assert caplog.records[-1].getMessage().endswith("said again in 10.0 s if it goes on")


def test_poll_health_reasons() -> None:
    h = PollHealth()
    assert h.problem(now=0.0, grace=0.6) == "no poll answered yet"
    h.failed(Unavailable("connection refused"), 1.0)
    assert h.problem(now=1.0, grace=0.6) == (
        "no poll answered yet (last: Unavailable: connection refused)"
    )
    # Never answered: a rejected token is a reason at once.
    h.failed(Unauthorized("nope", status=401), 2.0)
    assert (
        h.problem(now=2.5, grace=0.6) == "token rejected (HTTP 401) for 0.5 s (Unauthorized: nope)"
    )
    h.answered(3.0)
    assert h.problem(now=3.0, grace=0.6) is None
    # Answered before: ready until the rejection lasts longer than the grace.
    h.failed(Unauthorized("refused", status=511, error_number=1007), 4.0)
    h.failed(Unavailable("timed out"), 4.2)  # says nothing of the token: still rejected
    assert h.problem(now=4.5, grace=0.6) is None
    assert h.problem(now=4.7, grace=0.6) == (
        "token rejected (HTTP 511, Slurm error 1007) for 0.7 s (Unauthorized: refused)"
    )
    h.failed(MissingToken("Secret slurm/t has no key 'auth-token'"), 5.0)
    assert h.problem(now=5.0, grace=0.6) is not None
    assert h.problem(now=5.0, grace=0.6).startswith("no token for 1.0 s")  # type: ignore[union-attr]
    # Another Slurm failure after an answer is Slurm's outage, not readiness.
    h.answered(6.0)
    h.failed(Unavailable("slurmctld down"), 7.0)
    assert h.problem(now=100.0, grace=0.6) is None
