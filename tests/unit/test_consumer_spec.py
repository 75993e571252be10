"""A reconciler's consumer waits ``ack_wait_s`` before a redelivery (``schemas.streams.
ConsumerSpec``): nats-server replaces AckWait by the first BackOff entry, so a backoff
that starts below it may not be given."""

from __future__ import annotations

import pytest

from schemas import streams
from slurmbridge.runtime.bus import consumer_config


def test_a_reconciler_consumer_asks_for_its_ack_wait_and_no_backoff() -> None:
    spec = streams.consumer_spec("placement-KubePod", ("bridge.obs.*.KubePod.*",), ack_wait_s=30.0)
    cfg = consumer_config(spec)
    assert cfg.ack_wait == 30.0
    assert cfg.backoff is None


def test_a_backoff_starting_at_ack_wait_is_sent_as_given() -> None:
    spec = streams.consumer_spec("x", ("bridge.obs.>",), ack_wait_s=30.0, backoff_s=(30.0, 60.0))
    assert consumer_config(spec).backoff == [30.0, 60.0]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"ack_wait_s": 30.0, "backoff_s": (1.0, 2.0, 5.0)}, "backoff_s"),
        ({"ack_wait_s": 0.0}, "ack_wait_s"),
    ],
)
def test_a_backoff_below_ack_wait_or_no_ack_wait_is_refused_naming_the_field(
    overrides: dict[str, object], field: str
) -> None:
    with pytest.raises(ValueError, match=f"^{field}:"):
        streams.consumer_spec("x", ("bridge.obs.>",), **overrides)
