"""Which BRIDGE_OBS consumers an older release left (``schemas.streams.retired_consumer``)."""

from __future__ import annotations

import pytest

from schemas.streams import retired_consumer

NAMES = ("placement", "node_taint")


@pytest.mark.parametrize(
    ("durable", "retired"),
    [
        ("rc-placement", True),
        ("rc-node_taint-p0of3", True),
        ("rc-placement-KubePod", False),
        ("rc-placement-p0of2-KubePod", False),
        ("rc-placement-pxof2", False),
        ("rc-nodeset", False),  # not a reconciler this list names
        ("my-own-consumer", False),
    ],
)
def test_only_a_reconciler_s_single_consumer_of_old_is_retired(durable: str, retired: bool) -> None:
    assert retired_consumer(durable, NAMES) is retired
