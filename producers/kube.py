"""Kubernetes producer: watch Nodes and publish trimmed ``KubeNode`` observations.

Translation only — no decisions. :func:`node_to_event` is the pure translation; the
:class:`NodeWatcher` does the I/O:

1. **list** nodes (raw JSON, decoded straight into msgspec Structs: kubernetes_asyncio's
   generated models are slow to build for large lists and are not needed for a trimmed
   snapshot), publish what differs from what was last published, and a tombstone for every
   node that vanished since (so deletions missed while not watching are not lost);
2. **watch** from the list's resourceVersion with bookmarks; every event is translated and
   published (identical trimmed content — e.g. a kubelet heartbeat — is not re-published);
3. on ``410 Gone``, an in-stream ERROR, a broken stream or a timeout: re-watch from the last
   resourceVersion, or re-list when it expired. The task is supervised: any unexpected error
   is logged and the cycle restarts with back-off instead of ending the producer.

What was last published is seeded from the projection (the log), so a restarted producer
re-publishes nothing that did not change. ``Nats-Msg-Id`` is ``uid:resourceVersion`` (for a
tombstone ``uid:resourceVersion:deleted``), so two producers watching at once dedupe.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas import subjects
from schemas.events import KubeNode, NodeCondition, Taint
from slurmbridge import metrics

log = logging.getLogger(__name__)


# --- raw shapes (only what we read) --------------------------------------------------------


class _Meta(msgspec.Struct, kw_only=True):
    name: str = ""
    uid: str = ""
    resourceVersion: str = ""  # noqa: N815 - Kubernetes wire name
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class RawTaint(msgspec.Struct, kw_only=True):
    """A v1 Taint as it is on the wire."""

    key: str = ""
    value: str | None = None
    effect: str = ""
    timeAdded: str | None = None  # noqa: N815 - Kubernetes wire name


class _NodeSpec(msgspec.Struct, kw_only=True):
    unschedulable: bool | None = None
    taints: list[RawTaint] | None = None


class _Condition(msgspec.Struct, kw_only=True):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""


class _NodeStatus(msgspec.Struct, kw_only=True):
    capacity: dict[str, str] | None = None
    conditions: list[_Condition] | None = None


class RawNode(msgspec.Struct, kw_only=True):
    """The fields of a v1 Node that slurmbridge reads."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _NodeSpec = msgspec.field(default_factory=_NodeSpec)
    status: _NodeStatus = msgspec.field(default_factory=_NodeStatus)


class _ListMeta(msgspec.Struct, kw_only=True):
    resourceVersion: str = ""  # noqa: N815
    # "continue" is a Python keyword; msgspec renames it on the wire.
    continue_: str | None = msgspec.field(default=None, name="continue")


class RawNodeList(msgspec.Struct, kw_only=True):
    """A v1 NodeList."""

    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[RawNode] = []


class _Status(msgspec.Struct, kw_only=True):
    code: int = 0
    reason: str = ""
    message: str = ""


class RawWatchEvent(msgspec.Struct, kw_only=True):
    """One watch line: ``type`` ADDED | MODIFIED | DELETED | BOOKMARK | ERROR."""

    type: str
    object: msgspec.Raw


_NODE_LIST = msgspec.json.Decoder(RawNodeList)
_NODE = msgspec.json.Decoder(RawNode)
_WATCH = msgspec.json.Decoder(RawWatchEvent)
_STATUS = msgspec.json.Decoder(_Status)


# --- pure translation ----------------------------------------------------------------------

_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
SLINKY_ANNOTATION = "slinky.slurm.net/"


def parse_quantity(value: str) -> float:
    """A Kubernetes resource quantity (``"3500m"``, ``"16Gi"``, ``"1e9"``) as a number.

    Raises:
        ValueError: not a quantity (names the value).
    """
    m = _QTY.match(value.strip())
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"quantity {value!r}: not a Kubernetes resource quantity")
    try:
        number = float(m.group(1))
    except ValueError:
        raise ValueError(f"quantity {value!r}: not a Kubernetes resource quantity") from None
    return number * _SUFFIX[m.group(2)]


def _capacity(cap: dict[str, str], name: str, scale: float) -> int:
    raw = cap.get(name)
    if raw is None:
        return 0
    try:
        return int(parse_quantity(raw) * scale + 1e-9)
    except ValueError:
        log.warning("node capacity %s=%r is not a quantity; using 0", name, raw)
        return 0


def node_to_event(raw: RawNode, *, producer: str, observed_at: int) -> KubeNode:
    """Translate a raw Node into a ``KubeNode`` observation (pure).

    ``cpu_millis`` from ``capacity.cpu``; ``memory_bytes`` from ``capacity.memory``;
    ``gpus`` sums ``nvidia.com/gpu`` and ``amd.com/gpu``; ``ready`` from the Ready condition;
    ``annotations`` keeps only Slinky's (``*slinky.slurm.net/*``).
    """
    md, spec, status = raw.metadata, raw.spec, raw.status
    cap = status.capacity or {}
    return KubeNode(
        source=subjects.KUBE_SOURCE,
        key=md.name,
        observed_at=observed_at,
        version=md.resourceVersion,
        producer=producer,
        uid=md.uid,
        labels=dict(md.labels or {}),
        # Only Slinky's annotations: the others (CNI, CSI, kubeadm …) are large, change often
        # and no rule reads them.
        annotations={k: v for k, v in (md.annotations or {}).items() if SLINKY_ANNOTATION in k},
        unschedulable=bool(spec.unschedulable),
        taints=tuple(
            Taint(key=t.key, value=t.value or "", effect=t.effect) for t in (spec.taints or [])
        ),
        ready=any(c.type == "Ready" and c.status == "True" for c in status.conditions or []),
        conditions=tuple(
            NodeCondition(type=c.type, status=c.status, reason=c.reason, message=c.message)
            for c in status.conditions or []
            if c.type.startswith("Slurm")
        ),
        cpu_millis=_capacity(cap, "cpu", 1000),
        memory_bytes=_capacity(cap, "memory", 1),
        gpus=sum(_capacity(cap, g, 1) for g in GPU_RESOURCES),
    )


def tombstone(last: KubeNode, *, version: str, producer: str, observed_at: int) -> KubeNode:
    """The deletion marker for a node last seen as ``last`` (pure)."""
    return KubeNode(
        source=last.source,
        key=last.key,
        op="deleted",
        observed_at=observed_at,
        version=version,
        producer=producer,
        uid=last.uid,
    )


def same_content(a: KubeNode, b: KubeNode) -> bool:
    """True when two observations differ at most in envelope fields (version, time, producer)."""
    strip = {"observed_at": 0, "version": "", "producer": ""}
    return msgspec.structs.replace(a, **strip) == msgspec.structs.replace(b, **strip)


# --- the watcher ---------------------------------------------------------------------------


class Expired(Exception):  # noqa: N818 - mirrors the API server's reason
    """The watch's resourceVersion is too old (410 Gone): re-list."""


class PublishLost(Exception):  # noqa: N818
    """An observation may not have been stored: re-list and republish everything."""


#: Watch events published but not yet acknowledged, at most.
WINDOW = 1024


Publish = Callable[[list[tuple[KubeNode, str]]], Awaitable[object]]
Send = Callable[[KubeNode, str], Awaitable["asyncio.Future[Any]"]]


class NodeWatcher:
    """List + watch Kubernetes Nodes, publishing ``KubeNode`` observations.

    ``publish`` receives ``[(event, msg_id), …]`` and must persist them before returning.
    ``seed`` are the last published observations (from the projection).
    """

    resource = "nodes"

    def __init__(
        self,
        api: client.ApiClient,
        publish: Publish,
        *,
        producer: str,
        seed: dict[str, KubeNode],
        label_selector: str = "",
        watch_timeout: int = 300,
        send: Send | None = None,
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.publish = publish
        self.send = send
        self._inflight: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._republish = False
        self.producer = producer
        self.last: dict[str, KubeNode] = dict(seed)
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.resource_version = ""
        self.last_event_at = time.monotonic()
        self.listed = asyncio.Event()
        self.relists = 0

    def _selector(self) -> dict[str, Any]:
        return {"label_selector": self.label_selector} if self.label_selector else {}

    def age(self) -> float:
        """Seconds since the last watch event or bookmark."""
        return time.monotonic() - self.last_event_at

    async def run(self) -> None:
        """Run forever: list, watch, re-watch or re-list as needed (supervised)."""
        failures = 0
        while True:
            try:
                if not self.resource_version:
                    await self.relist()
                await self.watch_once()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Expired:
                metrics.WATCH_RESTARTS.labels(self.resource, "expired").inc()
                self.resource_version = ""
            except PublishLost as exc:
                metrics.WATCH_RESTARTS.labels(self.resource, "publish").inc()
                log.warning(
                    "watch %s: an observation may be lost (%s); re-listing", self.resource, exc
                )
                self.resource_version = ""
                self._republish = True
            except (aiohttp.ClientError, TimeoutError, ApiException, ConnectionError) as exc:
                failures += 1
                metrics.WATCH_RESTARTS.labels(self.resource, "error").inc()
                log.warning("watch %s failed (%s); retrying", self.resource, exc)
                await asyncio.sleep(min(5.0, 0.1 * 2**failures))
            except Exception:
                failures += 1
                metrics.WATCH_RESTARTS.labels(self.resource, "crash").inc()
                log.exception("watch %s crashed; re-listing", self.resource)
                self.resource_version = ""
                await asyncio.sleep(min(5.0, 0.1 * 2**failures))

    async def relist(self) -> None:
        """List all nodes, publish changes and tombstones, remember the resourceVersion."""
        self.relists += 1
        resp: Any = await self.core.list_node(**self._selector(), _preload_content=False)
        try:
            body = await resp.read()
        finally:
            resp.release()
        listing = _NODE_LIST.decode(body)
        now = time.time_ns()
        batch: list[tuple[KubeNode, str]] = []
        seen: set[str] = set()
        for raw in listing.items:
            ev = node_to_event(raw, producer=self.producer, observed_at=now)
            seen.add(ev.key)
            prev = self.last.get(ev.key)
            if self._republish or prev is None or not same_content(prev, ev):
                batch.append((ev, f"{ev.uid}:{ev.version}"))
        for key in set(self.last) - seen:
            tomb = tombstone(
                self.last[key],
                version=listing.metadata.resourceVersion,
                producer=self.producer,
                observed_at=now,
            )
            batch.append((tomb, f"{tomb.uid}:{tomb.version}:deleted"))
        if batch:
            await self._publish(batch)
        self._republish = False
        self.resource_version = listing.metadata.resourceVersion
        self.last_event_at = time.monotonic()
        self.listed.set()

    async def _publish(self, batch: list[tuple[KubeNode, str]]) -> None:
        await self._drain_inflight()
        await self.publish(batch)
        for ev, _ in batch:
            if ev.op == "deleted":
                self.last.pop(ev.key, None)
            else:
                self.last[ev.key] = ev

    async def watch_once(self) -> None:
        """One watch request from ``resource_version`` until it ends.

        Raises:
            Expired: the server answered 410 Gone (in-stream or as HTTP status).
        """
        try:
            resp: Any = await self.core.list_node(
                watch=True,
                resource_version=self.resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.watch_timeout,
                _preload_content=False,
                _request_timeout=self.watch_timeout + 30,
                **self._selector(),
            )
        except ApiException as exc:
            if exc.status == 410:
                raise Expired(str(exc.reason)) from exc
            raise
        try:
            while True:
                line = await resp.content.readline()
                if not line:
                    return  # server closed the stream (timeoutSeconds): re-watch
                if line.strip():
                    await self._on_line(line)
        finally:
            resp.release()

    async def _on_line(self, line: bytes) -> None:
        ev = _WATCH.decode(line)
        self.last_event_at = time.monotonic()  # exported by watch_age_loop, not per event
        if ev.type == "ERROR":
            status = _STATUS.decode(ev.object)
            if status.code == 410:
                raise Expired(status.message)
            raise ApiException(status=status.code, reason=status.message)
        raw = _NODE.decode(ev.object)
        if raw.metadata.resourceVersion:
            self.resource_version = raw.metadata.resourceVersion
        if ev.type == "BOOKMARK":
            return
        now = time.time_ns()
        if ev.type == "DELETED":
            prev = self.last.get(raw.metadata.name)
            base = prev or node_to_event(raw, producer=self.producer, observed_at=now)
            tomb = tombstone(
                base, version=raw.metadata.resourceVersion, producer=self.producer, observed_at=now
            )
            await self._send(tomb, f"{tomb.uid}:{tomb.version}:deleted")
            return
        node = node_to_event(raw, producer=self.producer, observed_at=now)
        prev = self.last.get(node.key)
        if prev is not None and same_content(prev, node):
            return
        await self._send(node, f"{node.uid}:{node.version}")

    async def _send(self, ev: KubeNode, msg_id: str) -> None:
        """Publish one watch event without waiting for its acknowledgement (bounded window).

        A failed publish is found at the next event (or when the window is full) and raises
        :class:`PublishLost`: the run loop re-lists and republishes every node (deduplicated by
        ``Nats-Msg-Id`` where nothing was lost).
        """
        if self.send is None:
            await self._publish([(ev, msg_id)])
            return
        self._inflight.append(await self.send(ev, msg_id))
        if ev.op == "deleted":
            self.last.pop(ev.key, None)
        else:
            self.last[ev.key] = ev
        while self._inflight and (self._inflight[0].done() or len(self._inflight) > WINDOW):
            fut = self._inflight.popleft()
            try:
                await fut
            except Exception as exc:
                self._inflight.clear()
                raise PublishLost(str(exc)) from exc

    async def _drain_inflight(self) -> None:
        pending, self._inflight = self._inflight, collections.deque()
        results = await asyncio.gather(*pending, return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise PublishLost(str(failed[0]))


def seed_from(values: Any) -> dict[str, KubeNode]:
    """Index the projection's live KubeNode observations by key (the producer's seed)."""
    return {n.key: n for n in values if isinstance(n, KubeNode)}


async def watch_age_loop(watcher: NodeWatcher, period: float = 1.0) -> None:
    """Export "seconds since last event or bookmark" every ``period`` seconds."""
    while True:
        metrics.WATCH_AGE.labels(watcher.resource).set(watcher.age())
        await asyncio.sleep(period)
