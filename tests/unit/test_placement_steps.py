"""Placement as named steps (issue 31 item 1): ``decide`` runs
:data:`reconcilers.placement.STEPS` over one :class:`reconcilers.placement.bind.GroupPlan`,
a group without a job runs :data:`reconcilers.placement.submit.SUBMIT_STEPS` over one
:class:`reconcilers.placement.submit.SubmitPlan`, and each step's docstring names the Slinky
function it follows (or says Slinky has no such rule)."""

from __future__ import annotations

import inspect
import re

import pytest

from reconcilers import placement
from reconcilers._steps import Plan
from reconcilers.placement import bind, submit

#: A Slinky source named in a step's docstring: a Go file or a backquoted function.
_SLINKY = re.compile(r"Slinky\b.*(\.go\b|``[A-Za-z]\w*``|slurmjobir)|Slinky has no", re.DOTALL)


def test_decide_and_submit_are_lists_of_named_steps_over_one_plan() -> None:
    assert [s.__name__ for s in placement.STEPS] == [
        "left_alone",
        "nothing_live",
        "without_job",
        "mark",
        "strays",
        "exclusions",
        "not_running",
        "components_start",
        "bind_each",
        "misfits",
        "bound",
    ]
    assert [s.__name__ for s in submit.SUBMIT_STEPS] == [
        "refused_backoff",
        "podgroup_done",
        "podgroup_missing",
        "exclusions_checkable",
        "members",
        "claims",
        "owner_chain",
        "policy",
        "translate",
        "node_sizes",
        "components",
        "feature_listing",
        "eligible_nodes",
        "featured",
        "submit_job",
    ]
    assert issubclass(bind.GroupPlan, Plan)
    assert issubclass(submit.SubmitPlan, Plan)


@pytest.mark.parametrize("step", [*placement.STEPS, *submit.SUBMIT_STEPS], ids=lambda s: s.__name__)
def test_each_step_names_its_slinky_source(step: object) -> None:
    doc = inspect.getdoc(step) or ""
    assert _SLINKY.search(doc), f"{step} names no Slinky source"


def test_the_last_step_of_each_list_always_decides() -> None:
    """A list that ran to its end without a step deciding would return "in sync" for a
    group that has work: the last step of each returns STOP whatever the view."""
    for steps in (placement.STEPS, submit.SUBMIT_STEPS):
        ret = inspect.signature(steps[-1]).return_annotation
        assert ret in ("Stop", "STOP"), steps[-1].__name__
