"""Pausing the cyclic garbage collector around bursts of allocation.

Decoding a large listing (150,000 pods, 100,000 Slurm jobs) or rebuilding a projection makes
millions of container objects that live on and form no cycles. While they are made, every
700 allocations start a young collection, and the growing older generations are scanned again
and again: decoding a 28 MB list of 20,000 pods took 775 ms with the collector running and
102 ms with it paused (``bench/kube_scale.py`` measures the watcher). Nothing the burst makes
needs collecting during it; the collector runs again right after.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the garbage collector inside the block; enable it again after, if it was enabled.

    Nests: only the outermost block re-enables it. Meant for synchronous bursts (a decode, a
    translation loop) or a start-up phase: in a running worker, a block that awaits would
    pause collection for every other task too.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def freeze_startup() -> int:
    """Collect once, then move every object alive now into the collector's permanent
    generation (:func:`gc.freeze`); returns how many objects are frozen.

    ``App.start`` calls it once the projection is rebuilt: that projection, and the modules,
    classes and functions (~89,000 tracked objects once ``slurmbridge.cli.run`` is imported,
    ~59,000 of them kubernetes-asyncio's client), live as long as the process, yet every full
    collection would walk them — 44 ms each for the imports alone, which the event loop feels
    as a stall. Frozen objects are
    still freed by reference counting when they go; only a cycle among them never would be.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
