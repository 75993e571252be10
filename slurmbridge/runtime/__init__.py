"""The event-sourcing machinery: bus, publish, pull, projection, leases, outcomes, worker
and its key queue, the embedded nats-server (docs/architecture.md: "Packages", "The log",
"The reconciler runtime"). Imports schemas and reconcilers.base only among the project's packages.
"""
