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


#: Allocations (net of deallocations) between two young collections once started; CPython's
#: default is 700 (3.13 raised it to 2,000). Why: an event loop serving watches, pulls and
#: HTTP makes and drops thousands of short-lived containers per placed pod, and most are
#: freed by reference counting before any collection could look at them. Over the bind phase
#: of ``bench/workload.py --json --arrival 200 --pods 1000`` (gc callbacks): 496 young, 45
#: middle and 5 full collections, 2.02 s of CPU, at 700; 11, 1 and 0, 0.44 s, at 10,000.
YOUNG_THRESHOLD = 10_000


def freeze_startup() -> int:
    """Collect once, then move every object alive now into the collector's permanent
    generation (:func:`gc.freeze`), and from then on collect the young generation every
    :data:`YOUNG_THRESHOLD` allocations (the older generations' thresholds are kept);
    returns how many objects are frozen.

    ``App.start`` calls it once the projection is rebuilt: that projection, and the modules,
    classes and functions (~89,000 tracked objects once ``slurmbridge.cli.run`` is imported,
    ~59,000 of them kubernetes-asyncio's client), live as long as the process, yet every full
    collection would walk them — 44 ms each for the imports alone, which the event loop feels
    as a stall. Frozen objects are
    still freed by reference counting when they go; only a cycle among them never would be.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
    return gc.get_freeze_count()
