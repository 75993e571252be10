"""Names of the components one process can run (``slurmbridge run --only``)."""

from __future__ import annotations

import reconcilers

PRODUCERS = ("kube-watcher", "slurm-poller")
#: Components only ``--only`` starts: the admission webhook needs its TLS certificate.
OPTIONAL = ("webhook",)


def component_names() -> tuple[str, ...]:
    """Every component ``run --only`` accepts: the producers, the reconcilers, the webhook."""
    return (*PRODUCERS, *reconcilers.ALL, *OPTIONAL)


def default_components() -> tuple[str, ...]:
    """What ``run`` starts without ``--only``: everything but :data:`OPTIONAL`."""
    return (*PRODUCERS, *reconcilers.ALL)
