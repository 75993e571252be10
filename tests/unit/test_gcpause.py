"""collector_paused: the collector is off inside, back as it was after — nested, on error."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from slurmbridge.runtime.gcpause import YOUNG_THRESHOLD, collector_paused, freeze_startup


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    (gc.enable if enabled else gc.disable)()


def test_paused_inside_and_enabled_after() -> None:
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # only the outermost block enables it again
    assert gc.isenabled()


def test_enabled_again_when_the_block_raises() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("decode failed")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_freeze_startup_moves_what_lives_now_out_of_collections() -> None:
    before = gc.get_threshold()
    try:
        frozen = freeze_startup()
        assert frozen == gc.get_freeze_count() > 1000
        assert not any(
            o is test_freeze_startup_moves_what_lives_now_out_of_collections
            for o in gc.get_objects()
        )
        # The young generation is collected less often; the older ones as before.
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
