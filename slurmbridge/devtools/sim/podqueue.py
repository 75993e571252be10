"""The work queue the simulated controllers share (the kubelet, the resourceclaim
controller): pods marked during one turn of the event loop are synced once, in the next,
as a client-go workqueue coalesces keys."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from slurmbridge.devtools.sim.kube import Change, KubeSim

log = logging.getLogger(__name__)


class PodQueue:
    """Attach to a :class:`KubeSim`'s writes and sync each pod marked dirty once per loop
    turn. Subclasses give :meth:`_on_write` (which marks) and :meth:`_sync` (one pod);
    ``what`` names the controller in the log line of a sync that raised."""

    what = "simulated controller"

    def __init__(self, sim: KubeSim) -> None:
        self.sim = sim
        self._dirty: set[tuple[str, str]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush: asyncio.Handle | None = None

    def attach(self) -> None:
        """Start reacting to the simulator's writes (on the running event loop); every pod
        that exists is synced once."""
        self._loop = asyncio.get_running_loop()
        self.sim.on_write.append(self._on_write)
        for pod in self.sim.list("pods"):
            meta = pod["metadata"]
            self._mark(meta["namespace"], meta["name"])

    def detach(self) -> None:
        """Stop reacting; a pass not yet run is dropped."""
        with contextlib.suppress(ValueError):
            self.sim.on_write.remove(self._on_write)
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        self._loop = None

    def _on_write(self, change: Change) -> None:
        raise NotImplementedError

    def _sync(self, namespace: str, name: str) -> None:
        raise NotImplementedError

    def _mark(self, namespace: str, name: str) -> None:
        if self._loop is None:
            return
        self._dirty.add((namespace, name))
        if self._flush is None:
            self._flush = self._loop.call_soon(self._sync_dirty)

    def _sync_dirty(self) -> None:
        self._flush = None
        dirty, self._dirty = self._dirty, set()
        sync: Callable[[str, str], None] = self._sync
        for namespace, name in sorted(dirty):
            try:
                sync(namespace, name)
            except Exception:
                log.exception("%s: pod %s/%s", self.what, namespace, name)
