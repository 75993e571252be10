"""Pod observations for the reconciler table tests: one pod ``ns/<name>`` with uid
``u-<name>`` as the Kubernetes watcher publishes it."""

from __future__ import annotations

from typing import Any

from schemas.events import KubePod


def ns_pod(name: str, **fields: Any) -> KubePod:
    """The ``KubePod`` ``ns/<name>`` (source ``k8s``, uid ``u-<name>``) with ``fields``."""
    return KubePod(
        source="k8s", key=f"ns/{name}", namespace="ns", name=name, uid=f"u-{name}", **fields
    )
