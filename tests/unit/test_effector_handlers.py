"""Effects as typed handlers (issue 31 item 2): every action type of the schema has one
handler, whose signature takes exactly that type; a wrong table fails when the class is made."""

from __future__ import annotations

import typing
from collections.abc import Mapping
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
