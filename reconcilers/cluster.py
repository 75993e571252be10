"""``cluster``: Slinky Cluster objects — which ones are served, and their readiness.

Source of the rules: Slinky slurm-operator's Cluster controller, which keeps one Slurm client
per Cluster (token from ``spec.token.secretRef``) and sets ``status.isReady`` from pinging
slurmrestd. Here the *clients and pollers* are run by the runtime
(:mod:`slurmbridge.clusters`), which follows :func:`served` over the projection — a poller
lives in a process, so starting one is not an action any worker could perform. This
reconciler writes what the log says about each Cluster into its status.

Serving. A Cluster's ``metadata.name`` is the Slurm cluster's name in slurmbridge (its
observations come from ``slurm:<name>``), so names must be unique across namespaces and
distinct from the static cluster of the config (``slurm.cluster``). A Cluster is served
unless it is being deleted, its name is not one subject token, the static cluster has its
name, or another live Cluster with its name comes first by ``namespace/name``.

Readiness. ``isReady`` and the ``Ready`` condition come from the cluster's last
``SlurmPing``:

================== ====================================================================
reason             when
================== ====================================================================
``Ready``          slurmrestd answered and a controller responds
``NotResponding``  slurmrestd answered that no controller responds
``Unauthorized``   slurmrestd rejected the token
``MissingToken``   there is no token to send (the Secret or its key is missing)
``Unreachable``    slurmrestd cannot be reached, timed out or answered 5xx
``PingFailed``     any other failure (unsupported API, a malformed answer)
``Connecting``     no ping recorded yet
``NotServed``      not served (the message says why); isReady false
================== ====================================================================

The status is written only when ``isReady``, the reason or the message differ from the
observed ones; a flip of ``isReady`` also records a Kubernetes Event (``ClusterReady`` /
``ClusterNotReady``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec

from reconcilers.base import Context, Decision, ReconcilerSpec, Store
from schemas.actions import AnyAction, ClusterRef, RecordEvent, SetClusterStatus
from schemas.events import SlurmCluster, SlurmPing
from schemas.subjects import KUBE_SOURCE, slurm_source

NAME: Final = "cluster"
API_VERSION: Final = "slinky.slurm.net/v1alpha1"
_FORBIDDEN: Final = frozenset(".*> \t\r\n")
#: The longest condition message Kubernetes keeps (metav1.Condition); the effector writes no
#: more, so a decision compares and writes the message cut to this length.
MESSAGE_LIMIT: Final = 32768
_REASONS: Final = {
    "Unauthorized": "Unauthorized",
    "MissingToken": "MissingToken",
    "Unavailable": "Unreachable",
}


def not_served_because(cluster: SlurmCluster, clusters: Iterable[SlurmCluster], static: str) -> str:
    """Why ``cluster`` is not served (``""``: it is). ``clusters``: every live Cluster;
    ``static``: the config's cluster name (pure; module docstring, *Serving*)."""
    if cluster.deleting:
        return "the Cluster is being deleted"
    if not cluster.name or any(c in _FORBIDDEN for c in cluster.name):
        return f"name {cluster.name!r} is not one NATS subject token (no '.', '*', '>', spaces)"
    if cluster.name == static:
        return (
            f"slurmbridge's static cluster (slurm.cluster in its config) is named "
            f"{static!r}; rename this Cluster or that setting"
        )
    first = min(
        (c.key for c in clusters if c.name == cluster.name and not c.deleting),
        default=cluster.key,
    )
    if first != cluster.key:
        return f"Cluster {first} has the same name and comes first"
    return ""


def served(store: Store, ctx: Context) -> dict[str, SlurmCluster]:
    """The served Clusters by Slurm cluster name (pure read of the projection)."""
    clusters = list(store.values(SlurmCluster, KUBE_SOURCE))
    return {c.name: c for c in clusters if not not_served_because(c, clusters, ctx.cluster)}


class View(msgspec.Struct, frozen=True, kw_only=True):
    """One Cluster, why it is not served (``""``: it is) and its last ping."""

    cluster: SlurmCluster | None
    not_served: str
    ping: SlurmPing | None


def readiness(v: View) -> tuple[bool, str, str]:
    """``(isReady, reason, message)`` for a served or unserved Cluster (module docstring)."""
    assert v.cluster is not None
    if v.not_served:
        return False, "NotServed", f"not served: {v.not_served}"
    ping = v.ping
    server = v.cluster.server
    if ping is None:
        return False, "Connecting", f"waiting for the first ping of slurmrestd at {server}"
    if ping.responding:
        hosts = ", ".join(ping.hostnames) or "a controller"
        return True, "Ready", f"slurmrestd at {server} ({ping.api_version}): {hosts} responding"
    if not ping.error_kind:
        why = ping.error or "no controller responds"
        return False, "NotResponding", f"slurmrestd at {server}: {why}"
    return False, _REASONS.get(ping.error_kind, "PingFailed"), ping.error


def decide(v: View | None) -> Decision:
    """Write ``isReady`` and the ``Ready`` condition when they differ (module docstring)."""
    if v is None or v.cluster is None or v.cluster.deleting:
        return Decision(reason="no Cluster (its client and poller are stopped)")
    c = v.cluster
    ready, reason, message = readiness(v)
    message = message[:MESSAGE_LIMIT]  # else a longer one never matches what was written
    if (c.is_ready, c.ready_reason, c.ready_message) == (ready, reason, message):
        return Decision(reason=f"status is current: {reason}")
    actions: list[AnyAction] = [
        SetClusterStatus(
            cluster=ClusterRef(namespace=c.namespace, name=c.name, uid=c.uid),
            is_ready=ready,
            reason=reason,
            message=message,
            generation=c.generation,
        )
    ]
    if c.is_ready is not ready:
        actions.append(
            RecordEvent(
                api_version=API_VERSION,
                object_kind="Cluster",
                name=c.name,
                namespace=c.namespace,
                uid=c.uid,
                type="Normal" if ready else "Warning",
                reason="ClusterReady" if ready else "ClusterNotReady",
                message=message,
            )
        )
    return Decision(actions=tuple(actions), reason=f"{reason}: {message}")


def view(store: Store, key: str, ctx: Context) -> View:
    """The Cluster, whether it is served, and the ping of its Slurm cluster."""
    cluster = store.get(SlurmCluster, key, KUBE_SOURCE)
    if cluster is None:
        return View(cluster=None, not_served="", ping=None)
    why = not_served_because(cluster, store.values(SlurmCluster, KUBE_SOURCE), ctx.cluster)
    ping = None if why else store.get(SlurmPing, cluster.name, slurm_source(cluster.name))
    return View(cluster=cluster, not_served=why, ping=ping)


def _same_name(event: SlurmCluster, store: Store, _ctx: Context) -> Iterable[str]:
    """Every Cluster of its name (serving may move between them)."""
    same = {c.key for c in store.values(SlurmCluster, KUBE_SOURCE) if c.name == event.name}
    return sorted(same | {event.key})


def _pinged(event: SlurmPing, store: Store, _ctx: Context) -> Iterable[str]:
    """The Clusters of the pinged cluster's name."""
    return sorted(c.key for c in store.values(SlurmCluster, KUBE_SOURCE) if c.name == event.cluster)


def all_keys(store: Store, ctx: Context) -> Iterable[str]:
    """Every Cluster."""
    del ctx
    return [c.key for c in store.values(SlurmCluster, KUBE_SOURCE)]


SPEC = ReconcilerSpec(
    name=NAME,
    keys={SlurmCluster: _same_name, SlurmPing: _pinged},
    key_kind="SlurmCluster",
    all_keys=all_keys,
    view=view,
    decide=decide,
    description="Slinky Clusters: which are served, isReady and the Ready condition from pings",
)
