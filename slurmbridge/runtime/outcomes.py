"""Retry intent as values, mapped one-to-one onto JetStream verbs by the worker.

========================  ==============================================================
value                     JetStream verb
========================  ==============================================================
:data:`OK`                ``ack``
:class:`RetryLater`       ``nak`` with ``delay`` (``term`` + dead letter once the
                          delivery count reaches the consumer's ``max_deliver``)
:class:`GiveUp`           ``term`` + a dead-letter record with the reason
(long work)               ``in_progress`` while the reconcile runs past a third of ack_wait
========================  ==============================================================

Effectors signal failures by raising :class:`Transient` (→ RetryLater) or :class:`Permanent`
(→ GiveUp), and report what they did as an :class:`EffectResult`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from schemas.actions import Outcome


@dataclass(frozen=True, slots=True)
class Ok:
    """The reconcile converged (or has nothing to do): ack."""


OK: Final = Ok()


@dataclass(frozen=True, slots=True)
class RetryLater:
    """Transient failure: redeliver after ``delay`` seconds."""

    delay: float
    reason: str


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Permanent failure: stop redelivering and dead-letter with ``reason``."""

    reason: str


Result = Ok | RetryLater | GiveUp


@dataclass(frozen=True, slots=True)
class EffectResult:
    """What an effector did: ``ok`` changed the world, ``noop`` found it already so,
    ``skipped`` found a precondition no longer true, ``unsupported`` cannot on this API."""

    outcome: Outcome
    detail: str = ""


class Transient(Exception):  # noqa: N818 - the name states the intent, like kopf's TemporaryError
    """A failure worth retrying (network, 5xx, 409 conflict, 429). ``delay`` in seconds or
    None for the worker's back-off."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class Permanent(Exception):  # noqa: N818
    """A failure that retrying will not fix (rejected request, invalid object)."""


def backoff(num_delivered: int, *, base: float = 0.25, cap: float = 30.0) -> float:
    """Exponential back-off in seconds for the ``num_delivered``-th attempt (1-based):
    ``min(cap, base · 2ⁿ⁻¹)``. The one back-off curve of the project: redeliveries, the
    watchers' :class:`~slurmbridge.kube.watch.Backoff` (with jitter), publish retries."""
    return min(cap, base * 2.0 ** min(max(0, num_delivered - 1), 60))
