"""Simulators of the APIs slurmbridge talks to (slurmrestd, Kubernetes), for tests and demos."""
