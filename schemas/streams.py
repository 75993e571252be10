"""JetStream streams and consumers as data (docs/architecture.md: "The log").

The runtime turns these specs into nats-py configs and creates or updates them idempotently
at start-up; keeping them here lets tests, the CLI (``slurmbridge streams``) and other
languages read the same numbers. Durations are seconds, sizes bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Literal

import msgspec

from schemas import subjects

OBS_STREAM: Final = "BRIDGE_OBS"
ACT_STREAM: Final = "BRIDGE_ACT"
DLQ_STREAM: Final = "BRIDGE_DLQ"
DAY: Final = 86_400.0


class StreamSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One stream. ``max_msgs_per_subject`` -1 = unlimited; ``max_age_s`` 0 = forever."""

    name: str
    subjects: tuple[str, ...]
    storage: Literal["file", "memory"] = "file"
    max_msgs_per_subject: int = -1
    max_age_s: float = 0.0
    max_bytes: int = -1
    duplicate_window_s: float = 120.0
    allow_direct: bool = True
    replicas: int = 1
    description: str = ""


class ConsumerSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A durable pull consumer of one reconciler on BRIDGE_OBS.

    ``max_deliver`` bounds retries (the last failed delivery goes to the dead-letter stream);
    ``ack_wait_s`` (seconds) is how long a delivery may stay unacknowledged before JetStream
    sends it again: it must exceed the longest reconcile (long effects send ``in_progress``)
    and the longest wait of a trigger behind a busy key. ``backoff_s`` (seconds, empty by
    default) are the waits of successive deliveries instead: nats-server then replaces
    ``ack_wait_s`` by their first (``server/consumer.go``, ``setConsumerConfigDefaults``), so a
    list starting below ``ack_wait_s`` would shorten every first delivery's wait. Retries the
    worker asks for are naks with their own delay and do not use it.

    Raises:
        ValueError: ``backoff_s`` starts below ``ack_wait_s``, or ``ack_wait_s`` is not
            positive.
    """

    durable: str
    stream: str
    filter_subjects: tuple[str, ...]
    ack_wait_s: float = 30.0
    max_deliver: int = 20
    backoff_s: tuple[float, ...] = ()
    max_ack_pending: int = 10_000
    description: str = ""

    def __post_init__(self) -> None:
        if self.ack_wait_s <= 0:
            raise ValueError(f"ack_wait_s: must be positive, not {self.ack_wait_s}")
        # A backoff of (1, 2, 5, …) under an ack_wait of 30 s made JetStream redeliver every
        # trigger still queued behind a busy key after 1 s: at 200 pods/s, 40 % of
        # placement's deliveries were such copies (issue 30).
        if self.backoff_s and self.backoff_s[0] < self.ack_wait_s:
            raise ValueError(
                f"backoff_s: its first wait ({self.backoff_s[0]} s) would replace ack_wait_s "
                f"({self.ack_wait_s} s) for every first delivery; start it at ack_wait_s or "
                "leave it empty"
            )


def stream_specs(
    *,
    replicas: int = 1,
    obs_max_msgs_per_subject: int = 32,
    obs_max_age_s: float = 7 * DAY,
    act_max_age_s: float = 30 * DAY,
    dlq_max_age_s: float = 30 * DAY,
    storage: Literal["file", "memory"] = "file",
) -> tuple[StreamSpec, ...]:
    """The three streams (docs/architecture.md "The log") with these replicas and retention.

    Defaults: 32 messages per observation subject (enough history to explain a recent change
    while the projection needs only the last) kept 7 days; action records 30 days.
    """
    # (name, subject token, age, per-subject cap, description): one row per stream.
    rows: tuple[tuple[str, str, float, int, str], ...] = (
        (
            OBS_STREAM,
            subjects.OBS,
            obs_max_age_s,
            obs_max_msgs_per_subject,
            "slurmbridge observations (Kubernetes watches, Slurm polls)",
        ),
        (ACT_STREAM, subjects.ACT, act_max_age_s, -1, "slurmbridge action records (audit trail)"),
        (DLQ_STREAM, subjects.DLQ, dlq_max_age_s, -1, "slurmbridge dead letters with their reason"),
    )
    return tuple(
        StreamSpec(
            name=name,
            subjects=(f"{subjects.PREFIX}.{token}.>",),
            storage=storage,
            max_msgs_per_subject=per_subject,
            max_age_s=max_age_s,
            replicas=replicas,
            description=description,
        )
        for name, token, max_age_s, per_subject, description in rows
    )


def retired_consumer(durable: str, reconcilers: Iterable[str]) -> bool:
    """Whether ``durable`` is the one consumer a reconciler (or a partition of one) had on
    BRIDGE_OBS before each trigger kind got its own (``rc-<reconciler>`` or
    ``rc-<reconciler>-p<i>of<N>``, filter ``bridge.obs.>``): no worker reads it any more.
    ``slurmbridge streams`` names it and ``--apply`` deletes it."""
    for name in reconcilers:
        base = f"rc-{name}"
        if durable == base:
            return True
        rest = durable.removeprefix(base + "-p")
        if rest != durable and _PARTITION.fullmatch(rest):
            return True
    return False


_PARTITION = re.compile(r"[0-9]+of[0-9]+")


def consumer_spec(
    reconciler: str, filter_subjects: tuple[str, ...], **overrides: object
) -> ConsumerSpec:
    """A durable consumer of a reconciler: durable name ``rc-<reconciler>`` (the worker passes
    ``<reconciler>[-p<i>of<N>]-<Kind>``: one consumer per trigger kind and partition)."""
    base = ConsumerSpec(
        durable=f"rc-{reconciler}",
        stream=OBS_STREAM,
        filter_subjects=filter_subjects,
        description=f"slurmbridge reconciler {reconciler}",
    )
    return msgspec.structs.replace(base, **overrides) if overrides else base
