"""Effects as typed handlers (issue 31 item 2): every action type of the schema has one
handler, whose signature takes exactly that type; a wrong table fails when the class is made."""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from schemas.actions import Action, AnyAction, TaintNode, UntaintNode
from slurmbridge.effectors.common import Effector
from slurmbridge.effectors.router import _SIDES, ACTION_TYPES, check_handlers
from slurmbridge.runtime.outcomes import EffectResult


def test_every_action_type_of_the_schema_union_has_one_handler() -> None:
    kinds = typing.get_args(AnyAction)
    assert set(ACTION_TYPES) == set(kinds)
    for kind in kinds:
        owners = [cls for cls, _ in _SIDES if kind in cls.TABLE]
        assert len(owners) == 1, kind.__name__


def test_a_missing_handler_fails_the_check() -> None:
    class Partial(Effector):
        TABLE: ClassVar[Mapping[type[Action], str]] = {TaintNode: "_taint"}

        async def _taint(self, action: TaintNode) -> EffectResult:
            return EffectResult("noop")

    with pytest.raises(TypeError, match="UntaintNode"):
        check_handlers(((Partial, "test"),))


def test_a_handler_taking_another_type_fails_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match="must take one UntaintNode"):

        class Wrong(Effector):
            TABLE: ClassVar[Mapping[type[Action], str]] = {UntaintNode: "_untaint"}

            async def _untaint(self, action: TaintNode) -> EffectResult:
                return EffectResult("noop")


def test_a_table_naming_no_method_fails_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match="no coroutine"):

        class Missing(Effector):
            TABLE: ClassVar[Mapping[type[Action], str]] = {UntaintNode: "_absent"}


#: The effector modules, each imported directly here; the handler groups are the modules that
#: define a handler some effector's table names (grouped by the object they touch).
from slurmbridge.effectors import (  # noqa: E402 - listed next to the tests that use them
    claims,
    clusters,
    common,
    events,
    nodes,
    nodeset_base,
    nodeset_pods,
    nodesets,
    pod_writes,
    podgroups,
    pods,
    revisions,
    router,
    slurm_nodes,
    slurm_objects,
)

HANDLER_GROUPS = (
    claims,
    nodes,
    nodeset_pods,
    nodesets,
    pod_writes,
    pods,
    revisions,
    slurm_nodes,
    slurm_objects,
)
#: The effects KubeEffector's handlers (nodes.py) delegate to, one function each.
DELEGATES = (clusters, events, podgroups)
SHARED = (common, nodeset_base, router)
EFFECTORS = Path(common.__file__).parent


def _defined_in(cls: type, name: str) -> str:
    owner = next(c for c in cls.__mro__ if name in vars(c))
    return owner.__module__


def test_every_effector_module_is_listed_here() -> None:
    listed = {m.__name__.rsplit(".", 1)[1] for m in HANDLER_GROUPS + DELEGATES + SHARED}
    on_disk = {p.stem for p in EFFECTORS.glob("*.py")} - {"__init__"}
    assert listed == on_disk


@pytest.mark.parametrize("group", HANDLER_GROUPS, ids=lambda m: m.__name__)
def test_each_handler_group_defines_handlers_of_the_tables(group: object) -> None:
    defined = {_defined_in(cls, name) for cls, _ in _SIDES for name in cls.TABLE.values()}
    assert getattr(group, "__name__", "") in defined


@pytest.mark.parametrize("path", sorted(EFFECTORS.glob("*.py")), ids=lambda p: p.name)
def test_effector_modules_stay_short_and_call_kubernetes_through_kube(path: Path) -> None:
    text = path.read_text()
    assert "kubernetes_asyncio" not in text
    # Status codes are mapped once, in slurmbridge/kube/errors.py.
    assert not re.search(r"\.status\s*(==|!=|>=|<=|in\b)\s*\(?\d", text)
    assert len(text.splitlines()) <= 500


@pytest.mark.parametrize("module", DELEGATES, ids=lambda m: m.__name__)
def test_the_delegated_effects_are_reached_from_kube_effector_handlers(module: object) -> None:
    assert f"from {getattr(module, '__name__', '')} import" in Path(nodes.__file__).read_text()
