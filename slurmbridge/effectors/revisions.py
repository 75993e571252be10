"""NodeSet ControllerRevisions (Kubernetes ``controller_history.go`` / slurm-operator 1.x
revision history): :meth:`RevisionHandlers._revision`."""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec

from schemas import wellknown
from schemas.actions import (
    EnsureNodeSetRevision,
    NodeSetRef,
)
from slurmbridge.effectors.common import (
    MERGE,
    list_items,
    read_slinky,
)
from slurmbridge.effectors.nodeset_base import NodeSetClients
from slurmbridge.kube import revisions
from slurmbridge.kube.api import NODESET_API, read_raw
from slurmbridge.kube.errors import Conflict, NotFound
from slurmbridge.kube.nodeset_pod import owner_ref
from slurmbridge.runtime.outcomes import EffectResult, Transient


class RevisionHandlers(NodeSetClients):
    """The ControllerRevision effect (record the template, prune the history) of
    :class:`~slurmbridge.effectors.nodesets.NodeSetEffector`, whose clients it uses."""

    async def _revision(self, action: EnsureNodeSetRevision) -> EffectResult:
        """Record the NodeSet's template as a ControllerRevision and prune the history
        (slurm-operator nodeset_history.go ``getNodeSetRevisions``, ``truncateHistory``;
        Kubernetes pkg/controller/history for names and hashes).

        Reads the NodeSet (gone or re-created ⇒ noop) and computes the revision from what it
        read. Lists the revisions labelled with the NodeSet's pod selector that it controls
        (or that nobody controls). An equal revision (same data) that is the latest ⇒ kept;
        an equal older one ⇒ its ``revision`` becomes the next number (a rollback: a merge
        patch with the resourceVersion read as precondition); none ⇒ create
        ``<nodeset>-<hash>`` (labels: the template's, the selector, the hash; the NodeSet as
        controller owner). A name taken by other data (a hash collision) ⇒ the NodeSet's
        ``status.collisionCount`` is raised and the action retried (the next observation
        carries the new hash). Then revisions whose hash is neither the update revision's,
        ``status.nodeSetHash`` nor one of the action's ``live`` hashes are deleted, lowest
        ``revision`` first, until ``spec.revisionHistoryLimit`` (default 0) remain. Unlike
        1.x, liveness is decided by hash (1.x compares pod hashes with revision names).

        Raises Transient on 409 (the NodeSet or a revision changed meanwhile), as the other
        writes.
        """
        ref = action.nodeset
        obj = await read_slinky(
            self.custom, "nodesets", "NodeSet", ref.namespace, ref.name, ref.uid
        )
        if isinstance(obj, EffectResult):
            return obj
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        collisions = int(status.get("collisionCount") or 0)
        data = revisions.revision_data(spec)
        hash_ = revisions.revision_hash(data, collisions)
        selector = {"app.kubernetes.io/name": "slurmd", "app.kubernetes.io/instance": ref.name}
        owned = await self._revisions(ref, str(meta.get("uid") or ""), selector)
        owned.sort(key=lambda r: int(r.get("revision") or 0))
        latest = int(owned[-1].get("revision") or 0) if owned else 0
        wanted = msgspec.json.decode(data)
        equal = [r for r in owned if r.get("data") == wanted]
        done: str
        if equal and equal[-1] is owned[-1]:
            done = f"revision {latest} is current"
        elif equal:
            done = await self._rollback(ref, equal[-1], latest + 1)
        else:
            body = _revision_body(obj, ref, hash_, wanted, selector, latest + 1)
            done = await self._create_revision(ref, body, wanted, meta, collisions)
            owned.append(body)
        live = {hash_, str(status.get("nodeSetHash") or ""), *action.live}
        limit = max(0, int(spec.get("revisionHistoryLimit") or 0))
        pruned = await self._prune(ref, owned, live, limit)
        return EffectResult("ok", done + (f"; pruned {', '.join(pruned)}" if pruned else ""))

    async def _rollback(self, ref: NodeSetRef, rev: dict[str, Any], number: int) -> str:
        """Give the equal older revision ``rev`` the next ``number`` (a merge patch with the
        resourceVersion read as precondition); what was done, in words."""
        rmeta = rev.get("metadata") or {}
        body = {
            "metadata": {"resourceVersion": rmeta.get("resourceVersion", "")},
            "revision": number,
        }
        patch: Any = self.apps.patch_namespaced_controller_revision
        await read_raw(
            patch(
                rmeta.get("name"),
                ref.namespace,
                body,
                _content_type=MERGE,
                _preload_content=False,
            )
        )
        return f"rolled back to {rmeta.get('name')} as revision {number}"

    async def _create_revision(
        self,
        ref: NodeSetRef,
        body: dict[str, Any],
        wanted: Any,
        meta: dict[str, Any],
        collisions: int,
    ) -> str:
        """Create revision ``body``; its name taken (409) ⇒ :meth:`_collision`."""
        name = body["metadata"]["name"]
        create: Any = self.apps.create_namespaced_controller_revision
        try:
            await read_raw(create(ref.namespace, body, _preload_content=False))
        except Conflict:
            await self._collision(ref, name, wanted, meta, collisions)
        return f"{name} created as revision {body['revision']}"

    async def _prune(
        self, ref: NodeSetRef, owned: list[dict[str, Any]], live: set[str], limit: int
    ) -> list[str]:
        """Delete the revisions of ``owned`` (lowest ``revision`` first) whose hash is not in
        ``live`` until ``limit`` of those remain; the names deleted (or gone already)."""
        history = [
            r
            for r in owned
            if ((r.get("metadata") or {}).get("labels") or {}).get(wellknown.LABEL_REVISION_HASH)
            not in live
        ]
        pruned = []
        delete: Any = self.apps.delete_namespaced_controller_revision
        for rev in history[: max(0, len(history) - limit)]:
            rname = (rev.get("metadata") or {}).get("name")
            with contextlib.suppress(NotFound):
                await read_raw(delete(rname, ref.namespace, _preload_content=False))
            pruned.append(str(rname))
        return pruned

    async def _revisions(
        self, ref: NodeSetRef, uid: str, selector: dict[str, str]
    ) -> list[dict[str, Any]]:
        """The NodeSet's ControllerRevisions: those matching ``selector`` that it controls
        or that have no controller (historycontrol.go ``ListControllerRevisions``)."""
        listing: Any = self.apps.list_namespaced_controller_revision
        items: list[dict[str, Any]] = await list_items(listing, ref.namespace, selector)
        out = []
        for item in items:
            owners = (item.get("metadata") or {}).get("ownerReferences") or []
            controller = next((o for o in owners if o.get("controller")), None)
            if controller is None or controller.get("uid") == uid:
                out.append(item)
        return out

    async def _collision(
        self,
        ref: NodeSetRef,
        name: str,
        wanted: Any,
        meta: dict[str, Any],
        collisions: int,
    ) -> None:
        """Revision ``name`` exists: ours (same data, an earlier attempt) ⇒ return; another
        one's ⇒ raise ``status.collisionCount`` and retry (historycontrol.go
        ``CreateControllerRevision``)."""
        read: Any = self.apps.read_namespaced_controller_revision
        existing = msgspec.json.decode(
            await read_raw(read(name, ref.namespace, _preload_content=False))
        )
        if existing.get("data") == wanted:
            return
        body = {
            "metadata": {"resourceVersion": meta.get("resourceVersion", "")},
            "status": {"collisionCount": collisions + 1},
        }
        await self._merge(self.custom.patch_namespaced_custom_object_status, ref, body)
        raise Transient(f"ControllerRevision {name} holds other data: collisionCount raised", 0.1)


def _revision_body(
    nodeset: dict[str, Any],
    ref: NodeSetRef,
    hash_: str,
    wanted: Any,
    selector: dict[str, str],
    number: int,
) -> dict[str, Any]:
    """ControllerRevision ``<nodeset>-<hash>`` of ``nodeset`` as read: labels the
    template's, the selector and the hash; the NodeSet as controller owner; ``data``
    ``wanted``; ``revision`` ``number``."""
    meta = nodeset.get("metadata") or {}
    tmeta = ((nodeset.get("spec") or {}).get("template") or {}).get("metadata") or {}
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revisions.revision_name(ref.name, hash_),
            "namespace": ref.namespace,
            "labels": {
                **(tmeta.get("labels") or {}),
                **selector,
                wellknown.LABEL_REVISION_HASH: hash_,
            },
            "ownerReferences": [
                owner_ref("/".join(NODESET_API), "NodeSet", ref.name, meta.get("uid", ref.uid))
            ],
        },
        "data": wanted,
        "revision": number,
    }
