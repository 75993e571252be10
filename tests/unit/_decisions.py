"""Helpers the reconciler table tests share: a projection over events, and a decision's
actions by type."""

from __future__ import annotations

from typing import Any

from reconcilers.base import Decision
from schemas.actions import PodRef
from schemas.events import Event
from slurmbridge.runtime.projection import Projection


def store(*objs: Event) -> Projection:
    """A projection holding ``objs`` at sequence numbers 1, 2, …"""
    p = Projection()
    for i, o in enumerate(objs, 1):
        p.apply(o, i)
    return p


def kinds(d: Decision) -> list[str]:
    """The type names of ``d``'s actions, in order."""
    return [type(a).__name__ for a in d.actions]


def of(d: Decision, kind: type[Any]) -> list[Any]:
    """``d``'s actions of type ``kind``, in order."""
    return [a for a in d.actions if isinstance(a, kind)]


def ref(name: str) -> PodRef:
    """The ref of pod ``ns/<name>`` (uid ``u-<name>``, as :func:`tests.unit._pods.ns_pod`)."""
    return PodRef(namespace="ns", name=name, uid=f"u-{name}")
