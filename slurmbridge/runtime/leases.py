"""Leases in a JetStream KV bucket, with fencing (docs/architecture.md: "Running many workers").

One lease per Slurm poller (``poller.<cluster>``), one for the Kubernetes watcher set
(``kube-watchers``) and one per reconciler or reconciler partition (``reconciler.<name>`` or
``reconciler.<name>.<i>-of-<n>``), so any number of replicas can run every component while
exactly one of them is active for each.

* **Acquire**: ``create`` (succeeds only when nobody holds the key). **Renew**:
  ``update(last=revision)`` (fails when someone else wrote since). **Expire**: every write
  carries a per-message TTL, so a holder that dies (no renewal) loses the key after it.
  **Release** (clean stop): ``delete(last=revision)``, so a standby takes over at once.
* **Fencing**: the revision of the holder's last successful write is its fencing token;
  :meth:`Lease.token` returns it only while the lease is certainly still ours (the time of
  that write plus the message TTL, minus a safety margin, has not passed), and the worker
  asks for it before every effect and puts it in the action record. A holder cut off from
  NATS stops acting before anyone else can acquire.
* **Timing** for a lease of ``ttl`` seconds (the handover bound): messages live
  ``0.7·ttl`` (whole seconds, at least 1), the holder renews every third of that, a standby
  tries to acquire every ``0.1·ttl``; a dead holder is replaced within
  ``0.7·ttl + 0.1·ttl`` plus the server's expiry granularity.
* **Lost**: a renewal refused says why in ``Lease.lost_reason`` and the log: ``expired``
  when it was sent after our last write's TTL had run out (the holder's event loop was
  blocked, or NATS out of reach, for that long: the message was gone, nobody took it), else
  ``taken over``. A lease that expires this way under a long synchronous burst is a bug of the
  burst (issue 30, item 4: a resync of 10,000 queued groups), not of the other replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Callable, Coroutine
from typing import Any, Final

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from slurmbridge.observability import metrics
from slurmbridge.runtime.bus import administer

log = logging.getLogger(__name__)

BUCKET: Final = "bridge-leases"
#: JetStream's "wrong last sequence" error codes (JSStreamWrongLastSequenceErrF / …ConstantErr).
_WRONG_LAST_SEQUENCE: Final = (10071, 10164)


def partition_of(key: str, partitions: int) -> int:
    """The partition (``0 … partitions-1``) of a reconciler key: CRC-32 of its UTF-8 bytes
    modulo ``partitions`` — stable across processes and Python versions (``hash()`` is
    salted per process)."""
    return zlib.crc32(key.encode("utf-8")) % partitions if partitions > 1 else 0


def reconciler_lease(name: str, index: int, partitions: int) -> str:
    """The lease name of reconciler ``name``'s partition ``index`` of ``partitions``."""
    return f"reconciler.{name}" if partitions <= 1 else f"reconciler.{name}.{index}-of-{partitions}"


class Lease:
    """One named lease held (or wanted) by ``holder`` (module docstring).

    Args:
        js: the JetStream context; ``kv``: the ``bridge-leases`` bucket.
        name: the lease (a KV key: letters, digits, ``-_.=/``).
        holder: this process's instance id (stored as the value, for ``explain`` and humans).
        ttl: seconds within which a dead holder is replaced (> 1.5).
    """

    def __init__(
        self, js: JetStreamContext, kv: KeyValue, name: str, holder: str, *, ttl: float
    ) -> None:
        if ttl < 1.5:
            raise ValueError(f"lease {name}: ttl {ttl:g} s is below 1.5 s")
        self.js = js
        self.kv = kv
        self.name = name
        self.holder = holder
        self.ttl = ttl
        self.msg_ttl = max(1, int(ttl * 0.7))
        self.retry_s = max(0.1, ttl * 0.1)
        self.renew_s = self.msg_ttl / 3
        self.revision = 0
        self._valid_until = 0.0
        self._written_at = 0.0  # monotonic send time of our last successful write
        #: Why the last renewal was refused: ``expired`` or ``taken over`` ("" before any).
        self.lost_reason = ""
        self.acquisitions = 0
        self.acquired_at = 0.0  # monotonic time of the last acquisition
        self._abandoned = False
        self._gauge = metrics.LEASE_HELD.labels(name)

    def token(self) -> int | None:
        """The fencing token (revision of our last write) while the lease is certainly ours,
        else None."""
        if self.revision and time.monotonic() < self._valid_until:
            return self.revision
        return None

    @property
    def held(self) -> bool:
        """Same as ``token() is not None``."""
        return self.token() is not None

    async def try_acquire(self) -> bool:
        """One attempt to take the lease; True when it is now ours."""
        started = time.monotonic()
        try:
            rev = await self.kv.create(self.name, self.holder.encode(), msg_ttl=self.msg_ttl)
        except nats.js.errors.KeyWrongLastSequenceError:
            return False
        self._took(rev, started)
        self.acquisitions += 1
        self.acquired_at = time.monotonic()
        return True

    async def renew(self) -> bool:
        """Extend the lease; False when it is no longer ours (someone wrote since)."""
        if not self.revision:
            return False
        started = time.monotonic()
        # KeyValue.update takes no per-message TTL: publish what it would, plus the TTL.
        headers = {"Nats-Expected-Last-Subject-Sequence": str(self.revision)}
        try:
            ack = await self.js.publish(
                f"$KV.{BUCKET}.{self.name}",
                self.holder.encode(),
                headers=headers,
                msg_ttl=self.msg_ttl,
            )
        except nats.js.errors.APIError as exc:
            if exc.err_code in _WRONG_LAST_SEQUENCE:
                late = started - self._written_at
                if late >= self.msg_ttl:
                    self.lost_reason = "expired"
                    log.warning(
                        "lease %s expired: renewed %.1f s after our last write, past its %d s"
                        " TTL (the event loop was blocked, or NATS out of reach, that long)",
                        self.name,
                        late,
                        self.msg_ttl,
                    )
                else:
                    self.lost_reason = "taken over"
                self._lost()
                return False
            raise
        rev = ack.seq
        self._took(rev, started)
        return True

    def abandon(self) -> None:
        """Stop acting under the lease without releasing it, as a killed process would: a
        standby takes over only when it expires (tests and ``App.stop(crash=True)``)."""
        self._abandoned = True
        self._lost()

    async def release(self) -> None:
        """Give the lease up (a standby takes over at its next attempt)."""
        if not self.revision or self._abandoned:
            return
        rev, self.revision = self.revision, 0
        self._valid_until = 0.0
        self._gauge.set(0)
        with contextlib.suppress(Exception):  # expiry releases it anyway
            await self.kv.delete(self.name, last=rev)

    def _took(self, rev: int, started: float) -> None:
        self.revision = rev
        self._written_at = started
        # Counted from when the write was sent: the server may have stamped it earlier than
        # we saw the answer, never later.
        self._valid_until = started + self.msg_ttl - self.retry_s
        self._gauge.set(1)

    def _lost(self) -> None:
        self.revision = 0
        self._valid_until = 0.0
        self._gauge.set(0)

    async def hold(
        self,
        active: Callable[[], Coroutine[Any, Any, None]],
        *,
        on_standby: Callable[[], None] | None = None,
    ) -> None:
        """Forever: acquire the lease, run ``active()`` while it is held, cancel it when the
        lease is lost (or ``active`` ends), then compete again. ``on_standby`` is called after
        each attempt that found the lease held elsewhere. Releases on cancellation."""
        try:
            while True:
                try:
                    got = await self.try_acquire()
                except (nats.errors.Error, TimeoutError) as exc:
                    log.warning("lease %s: cannot reach the bucket (%s)", self.name, exc)
                    got = False
                if not got:
                    if on_standby is not None:
                        on_standby()
                    await asyncio.sleep(self.retry_s)
                    continue
                log.info(
                    "lease %s acquired by %s (revision %d)", self.name, self.holder, self.revision
                )
                task = asyncio.create_task(active(), name=f"lease-{self.name}")
                try:
                    await self._keep(task)
                finally:
                    if not task.done():
                        task.cancel()
                    # Not `await task`: a cancellation of hold() itself must still propagate.
                    await asyncio.wait({task})
                failed = not task.cancelled() and task.exception() is not None
                if failed:
                    log.error("lease %s: active part failed: %r", self.name, task.exception())
                if self.revision:  # active() ended on its own: hand over
                    await self.release()
                log.info("lease %s no longer held by %s", self.name, self.holder)
                if failed:  # let another process try before this one again
                    await asyncio.sleep(self.ttl)
        finally:
            await self.release()

    async def _keep(self, task: asyncio.Task[None]) -> None:
        """Renew until the lease is lost or ``task`` ends."""
        while not task.done():
            done, _ = await asyncio.wait({task}, timeout=self.renew_s)
            if done:
                return
            try:
                if not await self.renew():
                    log.warning("lease %s %s; stopping", self.name, self.lost_reason)
                    return
            except (nats.errors.Error, TimeoutError) as exc:
                if self.token() is None:
                    log.warning("lease %s: cannot renew (%s); stopping", self.name, exc)
                    self._lost()
                    return


async def open_bucket(js: JetStreamContext, *, replicas: int = 1) -> KeyValue:
    """Create or bind the ``bridge-leases`` bucket (history 1, per-message TTLs).

    Raises:
        StreamAdminError: the bucket is missing and this NATS user may not create it.
    """
    try:
        return await js.key_value(BUCKET)
    except nats.js.errors.BucketNotFoundError:
        return await administer(
            js.create_key_value(bucket=BUCKET, history=1, replicas=replicas),
            f"create the key-value bucket {BUCKET}",
        )
