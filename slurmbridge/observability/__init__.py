"""Metrics, health endpoints, logging set-up and partition metrics (docs/architecture.md:
"Packages", "Observability")."""
