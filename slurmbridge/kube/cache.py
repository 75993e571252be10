"""The pods the pod watch delivered last, for the pod writes to start from.

client-go's informer keeps a store of what its watch delivered, and controller-runtime's
client reads from that store instead of the API server; a write then carries the
``resourceVersion`` it read as a precondition, and a stale read costs a 409 Conflict (or a
failed JSON patch ``test``, 422), never a lost update. :class:`PodCache` is that store for
the pods with slurmbridge's ``schedulerName``: :class:`producers.kube.watch.PodWatcher`
fills it as it lists and watches, and :class:`slurmbridge.effectors.pods.PodEffector` starts
its pod writes from it, reading the pod from the API server only when the cache has no copy,
the copy's write conflicted, or the copy says there is nothing to write (a decision never
rests on a copy that may be stale: issue 30, a ``GET`` before each of three pod writes
was a third of the requests per placed pod).

A copy may lag the API server (the watch is behind, or the watcher stopped and another
replica publishes): that costs a refused write and a fresh read, nothing else. Only one
process's watcher fills its own cache; a process that runs no pod watcher keeps it empty.
"""

from __future__ import annotations

from slurmbridge.kube.wire import RawPod


class PodCache:
    """The newest copy of each pod one watch delivered, by ``namespace/name``."""

    def __init__(self) -> None:
        self._pods: dict[str, RawPod] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def put(self, raw: RawPod) -> None:
        """Keep ``raw``, the pod as a list or a watch event (ADDED, MODIFIED) gave it."""
        meta = raw.metadata
        self._pods[f"{meta.namespace}/{meta.name}"] = raw

    def drop(self, raw: RawPod) -> None:
        """Forget the pod of ``raw`` (a DELETED event) — unless a newer pod of another uid
        holds the name already."""
        meta = raw.metadata
        key = f"{meta.namespace}/{meta.name}"
        held = self._pods.get(key)
        if held is not None and held.metadata.uid == meta.uid:
            del self._pods[key]

    def clear(self) -> None:
        """Forget every copy (a relist begins, or the watcher stopped)."""
        self._pods.clear()

    def get(self, namespace: str, name: str, uid: str = "") -> RawPod | None:
        """The copy of pod ``namespace/name`` (of ``uid``, when given), else None."""
        raw = self._pods.get(f"{namespace}/{name}")
        if raw is None or (uid and raw.metadata.uid != uid):
            return None
        return raw
