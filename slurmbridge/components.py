"""Names of the components one process can run (``slurmbridge run --only``)."""

from __future__ import annotations

import reconcilers

PRODUCERS = ("kube-watcher", "slurm-poller")


def component_names() -> tuple[str, ...]:
    """Every component ``run --only`` accepts: the producers, then the reconcilers."""
    return (*PRODUCERS, *reconcilers.ALL)
