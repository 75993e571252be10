"""The event-sourcing machinery: bus, publish, pull, projection, leases, outcomes, worker
and its key queue, the embedded nats-server (DESIGN §1, §3, §5). Imports schemas and
reconcilers.base only among the project's packages.
"""
