"""A reconciler's ``decide`` as a short list of named steps over one accumulator.

The shape follows slurm-operator's NodeSet sync (``internal/controller/nodeset/
nodeset_sync.go``: ``syncCordon``, ``syncSlurmDeadline``, ``syncNodeSetPods``,
``syncSlurmReservation``), where one reconcile calls one function per rule in turn. Ours
stay pure: a step reads the view and writes into a :class:`Plan`; it performs nothing.

A step is ``step(plan, view) -> STOP | None``. It adds actions in the order they must run,
asks for a re-check with :meth:`Plan.requeue` (the earliest one wins: the merge happens
there and nowhere else), and may set the decision's reason or add a note to it. Returning
:data:`STOP` ends the list: the rule decided the whole outcome (a refusal, a wait, a
finished group), so later rules must not add to it. :func:`run` turns the plan into the
:class:`reconcilers.base.Decision` the worker, the action records and ``replay`` already know;
nothing downstream sees the steps.

A reconciler that needs state shared between its steps (a status one rule refines and the
last one reports) subclasses :class:`Plan` with those fields.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from reconcilers.base import NOTHING, Decision
from schemas.actions import AnyAction


class Stop(enum.Enum):
    """The one value a step returns to end the list (:data:`STOP`)."""

    STOP = "stop"


#: Returned by a step whose rule decided the whole outcome: no later step runs.
STOP = Stop.STOP


@dataclass(slots=True)
class Plan:
    """What the steps so far want: actions in order, the earliest re-check, and why.

    ``requeue_after``: seconds until the key is reconciled again without a trigger (None:
    no re-check); written only by :meth:`requeue`. ``reason``: the decision's headline,
    ``"in sync"`` (:data:`reconcilers.base.NOTHING`) until a step says otherwise.
    ``notes``: sentences appended to the headline, ``"; "``-separated, in the order added.
    """

    actions: list[AnyAction] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    requeue_after: float | None = None
    reason: str = NOTHING.reason

    def add(self, *actions: AnyAction) -> None:
        """Append ``actions`` after those already planned (the worker runs them in order)."""
        self.actions.extend(actions)

    def extend(self, actions: Iterable[AnyAction]) -> None:
        """Append every action of ``actions``, in order."""
        self.actions.extend(actions)

    def requeue(self, after: float | None) -> None:
        """Ask for a re-check ``after`` seconds from now; the earliest asked for wins.
        ``None`` asks for nothing (a rule with nothing to wait for)."""
        if after is None:
            return
        if self.requeue_after is None or after < self.requeue_after:
            self.requeue_after = after

    def note(self, text: str) -> None:
        """Add ``text`` to the reason, after the headline and earlier notes."""
        self.notes.append(text)

    def stop(self, reason: str | None = None) -> Stop:
        """Set the headline (when given) and return :data:`STOP` for the step to return."""
        if reason is not None:
            self.reason = reason
        return STOP

    def decision(self) -> Decision:
        """The plan as the :class:`reconcilers.base.Decision` the worker performs."""
        reason = "; ".join(part for part in (self.reason, *self.notes) if part)
        return Decision(
            actions=tuple(self.actions), requeue_after=self.requeue_after, reason=reason
        )


P = TypeVar("P", bound=Plan)
V = TypeVar("V")

#: One named rule: reads the view, writes into the plan, returns :data:`STOP` to end.
Step = Callable[[P, V], Stop | None]


def run(steps: Sequence[Step[P, V]], plan: P, view: V) -> Decision:
    """Run ``steps`` in order over ``plan`` and ``view`` until one returns :data:`STOP` or
    none is left; the plan's :class:`reconcilers.base.Decision`."""
    for step in steps:
        if step(plan, view) is STOP:
            break
    return plan.decision()
