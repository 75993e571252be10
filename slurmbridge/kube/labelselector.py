"""Kubernetes LabelSelector (``matchLabels`` / ``matchExpressions``), checked and evaluated.

Used for Slinky's ``managedNamespaceSelector``: :mod:`slurmbridge.config` checks its shape at
start-up (so a typo stops the process instead of silently managing nothing) and
:mod:`slurmbridge.webhook` evaluates it against a Namespace's labels. Pure functions; the
semantics are apimachinery's ``metav1.LabelSelectorAsSelector`` for the four operators.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")


def check_selector(selector: Mapping[str, Any], path: str) -> None:
    """Check the shape of a LabelSelector.

    Raises:
        ValueError: the message starts with the path of the bad part under ``path``
            (``managedNamespaceSelector.matchExpressions[0].operator: must be one of …``).
    """
    unknown = set(selector) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise ValueError(f"{path}.{min(unknown)}: unknown key")
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        raise ValueError(f"{path}.matchLabels: must map label keys to strings")
    exprs = selector.get("matchExpressions") or []
    if not isinstance(exprs, list):
        raise ValueError(f"{path}.matchExpressions: must be a list")  # noqa: TRY004 - config
    for i, expr in enumerate(exprs):
        where = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
            raise ValueError(f"{where}.key: required")  # noqa: TRY004 - a config value error
        op = expr.get("operator")
        if op not in OPERATORS:
            raise ValueError(f"{where}.operator: must be one of {', '.join(OPERATORS)}")
        values = expr.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ValueError(f"{where}.values: must be a list of strings")
        if op in ("In", "NotIn") and not values:
            raise ValueError(f"{where}.values: {op} needs at least one value")
        if op in ("Exists", "DoesNotExist") and values:
            raise ValueError(f"{where}.values: must be empty for {op}")


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy a selector :func:`check_selector` accepted.

    Every ``matchLabels`` pair and every expression must hold; an empty selector matches
    everything. ``NotIn`` holds when the key is absent (as in Kubernetes).
    """
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True
