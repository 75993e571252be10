"""Simulators, the test harness, the real-Slurm rigs and the demo's story
(docs/architecture.md "Packages").

Never imported by the runtime (import-linter enforces it: only :mod:`slurmbridge.cli` and
the tests may), and left out of the production image.
"""
