"""Prometheus metrics (docs/architecture.md: "Observability"), served on ``:8080/metrics`` by
:mod:`slurmbridge.observability.health`.

Names follow Prometheus conventions (``_total`` counters, ``_seconds`` durations). Label values
are bounded sets (kinds, reconcilers, outcomes, clusters, partitions); never object keys.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

EVENTS_PUBLISHED = Counter(
    "slurmbridge_events_published_total", "Observations published", ["source", "kind"]
)
EVENTS_CONSUMED = Counter(
    "slurmbridge_events_consumed_total", "Triggers consumed by a reconciler", ["reconciler", "kind"]
)
RECONCILE_SECONDS = Histogram(
    "slurmbridge_reconcile_duration_seconds",
    "Duration of one reconcile (view + decide + effects)",
    ["reconciler", "outcome"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
DECIDES = Counter(
    "slurmbridge_decides_total",
    "Calls of a reconciler's decide() (view + rules), with or without actions",
    ["reconciler"],
)
ACTIONS = Counter(
    "slurmbridge_actions_total",
    "Actions performed by effectors",
    ["reconciler", "action", "outcome"],
)
HELD_KEYS = Gauge(
    "slurmbridge_held_keys",
    "Keys whose destructive decision waits for a complete listing of both sides in the log",
    ["reconciler"],
)
LOG_REFUSALS = Counter(
    "slurmbridge_log_refusals_total",
    "Write-ahead action records the stream refused or did not acknowledge (nothing performed)",
    ["reconciler"],
)
DEAD_LETTERS = Counter("slurmbridge_dead_letters_total", "Dead-letter records", ["reconciler"])
CONSUMER_PENDING = Gauge(
    "slurmbridge_consumer_pending", "Triggers not yet delivered to a reconciler", ["reconciler"]
)
PROJECTION_MALFORMED = Counter(
    "slurmbridge_projection_malformed_total", "Malformed observations skipped by the projection"
)
PROJECTION_STALE = Counter(
    "slurmbridge_projection_stale_total",
    "Kubernetes observations not applied: an older resourceVersion than the one held",
    ["kind"],
)
PROJECTION_REBUILD_SECONDS = Gauge(
    "slurmbridge_projection_rebuild_seconds", "Seconds the start-up rebuild from the log took"
)
POLL_SECONDS = Histogram(
    "slurmbridge_slurm_poll_duration_seconds",
    "Duration of one Slurm poll cycle",
    ["cluster"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
CLUSTERS_SERVED = Gauge(
    "slurmbridge_slurm_cluster_served",
    "1 for each Slurm cluster of a Cluster object this process serves (client, poller)",
    ["cluster"],
)
POLL_ERRORS = Counter("slurmbridge_slurm_poll_errors_total", "Failed Slurm polls", ["cluster"])
LEASE_HELD = Gauge(
    "slurmbridge_lease_held", "1 while this process holds the lease, else 0", ["lease"]
)
WATCH_ALIVE_AGE = Gauge(
    "slurmbridge_watch_seconds_since_alive",
    "Seconds since the watch was last known alive: its last event or bookmark, or the last "
    "successful list, watch (re)connect or clean end of the stream at the server's watch "
    "timeout. Healthy quiet watches stay under kube.watchTimeout (the API server sends "
    "bookmarks only when the kind's resourceVersion moved), so stale means above it",
    ["resource"],
)
WATCH_CONNECTED = Gauge(
    "slurmbridge_watch_connected",
    "1 while the watch stream of the resource is open, else 0 (listing, backing off)",
    ["resource"],
)
WATCH_RESTARTS = Counter(
    "slurmbridge_watch_restarts_total", "Watch re-opens and re-lists", ["resource", "why"]
)
TENANCY_DENIALS = Counter(
    "slurmbridge_tenancy_denials_total",
    "Pods refused by the tenancy policy: where (admission: the webhook's 403; placement: "
    "PodScheduled=False SlurmPolicyDenied, one per pod and refusal) and rule (the annotation: "
    "user-id, group-id, account, qos, partition, reservation)",
    ["where", "rule"],
)
