"""The step runner (reconcilers._steps): actions keep their order, the earliest requeue wins
in one place, a step that stops ends the list, and the result is the plain Decision."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import pytest

from reconcilers import node_register, workload
from reconcilers._steps import STOP, Plan, Stop, run
from reconcilers.base import NOTHING, Decision
from schemas.actions import DrainSlurmNode, UndrainSlurmNode


def _drain(node: str) -> DrainSlurmNode:
    return DrainSlurmNode(cluster="c", node=node, reason="r")


def _undrain(node: str) -> UndrainSlurmNode:
    return UndrainSlurmNode(cluster="c", node=node, owned_prefixes=("r",))


@pytest.mark.parametrize(
    ("asks", "want"),
    [
        ((), None),
        ((None,), None),
        ((30.0,), 30.0),
        ((30.0, 5.0, 10.0), 5.0),
        ((5.0, None, 30.0), 5.0),
        ((None, 7.5), 7.5),
        ((0.0, 3.0), 0.0),
    ],
)
def test_the_earliest_requeue_wins(asks: tuple[float | None, ...], want: float | None) -> None:
    plan = Plan()
    for after in asks:
        plan.requeue(after)
    assert plan.requeue_after == want
    assert plan.decision().requeue_after == want


def test_actions_keep_the_order_the_steps_added_them() -> None:
    def first(plan: Plan, _v: str) -> Stop | None:
        plan.add(_drain("a"), _drain("b"))
        return None

    def second(plan: Plan, _v: str) -> Stop | None:
        plan.extend(_undrain(n) for n in ("c", "d"))
        plan.add(_drain("e"))
        return None

    d = run((first, second), Plan(), "view")
    assert [a.node for a in d.actions] == ["a", "b", "c", "d", "e"]
    assert [type(a) for a in d.actions] == [
        DrainSlurmNode,
        DrainSlurmNode,
        UndrainSlurmNode,
        UndrainSlurmNode,
        DrainSlurmNode,
    ]


def test_a_step_that_stops_ends_the_list() -> None:
    ran: list[str] = []

    def waits(plan: Plan, v: str) -> Stop | None:
        ran.append("waits")
        plan.add(_drain(v))
        plan.requeue(10.0)
        return plan.stop("waiting")

    def never(plan: Plan, _v: str) -> Stop | None:
        ran.append("never")
        plan.add(_undrain("x"))
        plan.requeue(1.0)
        return None

    d = run((waits, never), Plan(), "n1")
    assert ran == ["waits"]
    assert d == Decision(actions=(_drain("n1"),), requeue_after=10.0, reason="waiting")


def test_every_step_runs_when_none_stops_and_none_is_left_out() -> None:
    ran: list[str] = []

    def step(name: str) -> Callable[[Plan, None], Stop | None]:
        def inner(_plan: Plan, _v: None) -> Stop | None:
            ran.append(name)
            return None

        return inner

    assert run([step("a"), step("b"), step("c")], Plan(), None) == NOTHING
    assert ran == ["a", "b", "c"]


def test_the_reason_is_the_headline_then_the_notes() -> None:
    plan = Plan()
    assert plan.decision() == NOTHING  # nothing said: "in sync", as before the steps
    plan.reason = "job 5 is running"
    plan.note("releasing the ResourceClaims of 2 ended pod(s)")
    plan.note("one more")
    assert plan.decision().reason == (
        "job 5 is running; releasing the ResourceClaims of 2 ended pod(s); one more"
    )
    assert plan.stop() is STOP and plan.reason == "job 5 is running"  # no reason: kept
    plan.notes.clear()
    plan.reason = ""
    assert plan.decision().reason == ""


def test_a_subclass_carries_what_its_steps_share() -> None:
    @dataclass(slots=True)
    class Counted(Plan):
        seen: int = 0

    def count(plan: Counted, v: int) -> Stop | None:
        plan.seen += v
        return None

    def say(plan: Counted, _v: int) -> Stop | None:
        return plan.stop(f"saw {plan.seen}")

    assert run((count, count, say), Counted(), 2).reason == "saw 4"


@pytest.mark.parametrize("module", [workload, node_register])
def test_the_converted_reconcilers_decide_as_a_list_of_named_steps(module: ModuleType) -> None:
    """Each converted ``decide`` runs a short list of named, documented steps."""
    steps = module.STEPS
    assert 3 <= len(steps) <= 16
    names = [s.__name__ for s in steps]
    assert len(set(names)) == len(names)
    assert all(s.__doc__ and s.__doc__.strip() for s in steps), names
