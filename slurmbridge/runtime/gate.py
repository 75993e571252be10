"""The runtime's "whole world" gate: no destructive action for a cluster on half a world.

Rule (docs/architecture.md, "Rules of trust" 1): until the log holds a complete listing of
*both* sides for a Slurm cluster — every core Kubernetes listing (the ``KubeListed`` markers
of ``nodes``, and of ``pods`` / ``slurmd-pods`` where those are watched) and a complete,
successful Slurm poll of that cluster (its ``SlurmPing`` without error, published after the
poll's listings) — no reconciler removes a taint, undrains, deletes, cancels or unbinds
anything there. Protective actions (a taint, a drain, a submit) may go first.

Why here and not in each reconciler: a reconciler that forgets the guard acts on half a
world at every first start (an empty log, a migration from Slinky's slurm-bridge, a lost
NATS store). ``node_taint`` did: it removed the managed-node taint from every node in the
15–115 ms between the Kubernetes listing and the first Slurm poll, and for good while
slurmrestd rejected the token. The worker asks :meth:`ListingGate.holds` before performing a
decision; a held decision is parked and tried again when a listing marker arrives.

The gate reads only the projection (what the log holds), so it is the same in every
process, whichever of them runs the watchers and pollers.
"""

from __future__ import annotations

from collections.abc import Iterable

from reconcilers.base import Store, kube_listed, slurm_listed
from schemas.actions import AnyAction
from schemas.events import Event, KubeListed, SlurmPing


class ListingGate:
    """Holds destructive actions until both sides of their cluster are listed.

    Args:
        store: the projection (read-only).
        kube_listings: the ``KubeListed`` names that make the Kubernetes side complete
            (``("nodes", "pods")`` …: the core watchers this deployment runs; CRD-backed
            watchers whose CRD may be absent are not required).
        default_cluster: the cluster of an action that names none (``UntaintNode``: the
            Kubernetes nodes mirror the bridge's own Slurm cluster).
    """

    def __init__(self, store: Store, *, kube_listings: Iterable[str], default_cluster: str) -> None:
        self.store = store
        self.kube_listings = tuple(kube_listings)
        self.default_cluster = default_cluster

    def missing(self, cluster: str) -> str | None:
        """Why ``cluster``'s world is incomplete in the log, or None when it is whole."""
        unlisted = [n for n in self.kube_listings if not kube_listed(self.store, n)]
        if unlisted:
            return f"no complete Kubernetes listing of {', '.join(unlisted)} in the log yet"
        if not slurm_listed(self.store, cluster):
            return f"no complete, successful listing of Slurm cluster {cluster!r} in the log yet"
        return None

    def holds(self, actions: Iterable[AnyAction]) -> str | None:
        """The reason to hold a decision with ``actions`` (None: it may go): the first
        destructive action whose cluster is not completely listed."""
        checked: set[str] = set()
        for action in actions:
            if not action.destructive:
                continue
            cluster = str(getattr(action, "cluster", "") or self.default_cluster)
            if cluster in checked:
                continue
            checked.add(cluster)
            why = self.missing(cluster)
            if why is not None:
                return why
        return None

    @staticmethod
    def may_open(event: Event) -> bool:
        """True for an observation after which a held decision may go: a listing marker,
        or a Slurm poll's ping (the first success, or one after failures)."""
        return isinstance(event, KubeListed | SlurmPing)
