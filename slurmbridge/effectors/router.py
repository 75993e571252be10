"""The dispatch table: each action type to the effector that performs it."""

from __future__ import annotations

import typing

from schemas.actions import Action, AnyAction
from slurmbridge.effectors.common import Effector
from slurmbridge.effectors.nodes import KubeEffector
from slurmbridge.effectors.nodesets import NodeSetEffector
from slurmbridge.effectors.pods import PodEffector
from slurmbridge.effectors.slurm_nodes import SlurmEffector
from slurmbridge.runtime.outcomes import EffectResult, Permanent

#: Each effector class, and why its actions fail when it is not configured in this process.
_SIDES: tuple[tuple[type[Effector], str], ...] = (
    (NodeSetEffector, "NodeSet actions need both a Kubernetes API and a Slurm cluster"),
    (PodEffector, "pod actions need both a Kubernetes API and a Slurm cluster"),
    (SlurmEffector, "no Slurm cluster configured"),
    (KubeEffector, "no Kubernetes API configured"),
)


#: Every action type of the schema (:data:`schemas.actions.AnyAction`).
ACTION_TYPES: tuple[type[Action], ...] = typing.get_args(AnyAction)


def check_handlers(sides: tuple[tuple[type[Effector], str], ...] = _SIDES) -> None:
    """Every action type has exactly one handler among ``sides``' tables.

    Raises:
        TypeError: naming the action types without a handler, or handled twice.
    """
    handled = [kind for cls, _ in sides for kind in cls.TABLE]
    missing = sorted(k.__name__ for k in ACTION_TYPES if k not in handled)
    twice = sorted({k.__name__ for k in handled if handled.count(k) > 1})
    if missing or twice:
        raise TypeError(f"action types without a handler: {missing}; handled twice: {twice}")


check_handlers()


class Router:
    """Sends each action to the effector that handles its type (:attr:`Effector.TABLE`).

    An effector that is ``None`` is not configured here: its actions fail Permanent with
    the reason of :data:`_SIDES`.
    """

    def __init__(
        self,
        kube: KubeEffector | None,
        slurm: SlurmEffector | None,
        pods: PodEffector | None = None,
        nodesets: NodeSetEffector | None = None,
    ) -> None:
        given: dict[type[Effector], Effector | None] = {
            KubeEffector: kube,
            SlurmEffector: slurm,
            PodEffector: pods,
            NodeSetEffector: nodesets,
        }
        self.table: dict[type[Action], tuple[Effector | None, str]] = {
            kind: (given[cls], missing) for cls, missing in _SIDES for kind in cls.TABLE
        }

    async def apply(self, action: AnyAction) -> EffectResult:
        """Dispatch ``action``.

        Raises:
            Permanent: no effector performs its type, or that effector is not configured.
            Transient / Permanent: from the effector.
        """
        route = self.table.get(type(action))
        if route is None:
            raise Permanent(f"no effector performs {type(action).__name__}")
        effector, missing = route
        if effector is None:
            raise Permanent(missing)
        return await effector.apply(action)
