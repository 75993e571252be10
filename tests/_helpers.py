"""Helpers shared by the end-to-end tests over a :class:`~slurmbridge.devtools.testing.Stack`."""

from __future__ import annotations

from typing import Any

from slurmbridge.devtools.sim.kube import ApiError
from slurmbridge.devtools.testing import Stack


def pod(stack: Stack, name: str) -> dict[str, Any] | None:
    """The pod ``default/<name>`` as the simulated API server holds it, ``None`` once gone."""
    try:
        return stack.kube.get("pods", name, "default")
    except ApiError:
        return None
