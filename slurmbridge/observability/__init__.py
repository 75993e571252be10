"""Metrics, health endpoints, logging set-up and partition metrics (DESIGN §1, §8)."""
