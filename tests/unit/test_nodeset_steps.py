"""The NodeSet reconciler as named steps (issue 31 item 1): ``decide`` runs
:data:`reconcilers.nodeset.STEPS` over one :class:`reconcilers.nodeset.NodeSetPlan`, each step
one rule group whose docstring names the slurm-operator function (or the other source) it
follows, and the helper rules live in the package."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

from reconcilers import nodeset
from reconcilers._steps import Plan

#: A backquoted Go function or file name of the upstream source, e.g. ``syncCordon``.
_UPSTREAM = re.compile(r"``[A-Za-z_./]*(sync|calculate|do|process|pin|get|podsShould)\w*``|\.go")


def test_decide_is_a_list_of_named_steps_over_one_plan() -> None:
    names = [step.__name__ for step in nodeset.STEPS]
    assert names == [
        "hold_replicas",
        "sync_daemon_pods",
        "pin_ordinals",
        "sync_failed_pods",
        "scale_out",
        "scale_in",
        "sync_update",
        "sync_pods",
        "sync_deadlines",
        "calculate_status",
        "sync_reservation",
        "sync_partition",
        "sync_status",
    ]
    assert issubclass(nodeset.NodeSetPlan, Plan)


@pytest.mark.parametrize("step", nodeset.STEPS, ids=lambda s: s.__name__)
def test_each_step_names_its_source(step: object) -> None:
    doc = inspect.getdoc(step) or ""
    assert "Rule" in doc, f"{step} does not say which rule of reconcilers.nodeset it is"
    assert _UPSTREAM.search(doc) or "deploy/crds" in doc, f"{step} names no upstream source"


@pytest.mark.parametrize(
    "module",
    [
        "_daemon",
        "_ident",
        "_slurmd",
        "order",
        "scale",
        "update",
        "pods",
        "status",
        "reservation",
        "partition",
    ],
)
def test_the_rules_live_in_the_package(module: str) -> None:
    mod = importlib.import_module(f"reconcilers.nodeset.{module}")
    assert mod.__name__.startswith("reconcilers.nodeset.")
    assert getattr(nodeset, module) is mod


def test_no_step_merges_a_requeue_by_hand() -> None:
    """The earliest re-check is merged in Plan.requeue only: no module of the package
    assigns ``requeue_after`` or takes a ``min`` with the plan's requeue."""
    for module in ("scale", "update", "pods", "status", "reservation", "partition"):
        source = inspect.getsource(importlib.import_module(f"reconcilers.nodeset.{module}"))
        assert "requeue_after =" not in source, module
        assert "min(plan.requeue" not in source, module
