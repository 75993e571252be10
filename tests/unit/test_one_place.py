"""One word, one place (issue 31 item 4): the Slurm state predicates, the pod's job id and
``PodRef.of`` have one definition each, and a schema event and the Slurm client model it is
translated from keep the same fields."""

from __future__ import annotations

import msgspec
import pytest

from reconcilers import _handoff
from schemas import events, wellknown
from schemas.actions import PodRef
from slurmbridge.slurm import models

#: The event envelope every observation carries (not a Slurm field).
ENVELOPE = frozenset(events.Event.__struct_fields__) | {"cluster"}


def _fields(cls: type[msgspec.Struct]) -> frozenset[str]:
    return frozenset(cls.__struct_fields__)


@pytest.mark.parametrize(
    ("event", "model", "model_only"),
    [
        # ``name`` becomes the event's ``key``.
        (events.SlurmNode, models.Node, {"name"}),
        (events.SlurmPartition, models.Partition, {"name"}),
        # ``name`` is the job's own name (key = job id); ``user_name`` is not published.
        (events.SlurmJob, models.Job, {"user_name"}),
    ],
)
def test_event_and_client_model_keep_the_same_fields(
    event: type[msgspec.Struct], model: type[msgspec.Struct], model_only: set[str]
) -> None:
    """A field added to one side only fails here: the producer would drop it silently."""
    assert _fields(event) - ENVELOPE == _fields(model) - model_only


@pytest.mark.parametrize(
    ("state", "busy", "drained"),
    [
        (("IDLE",), False, False),
        (("IDLE", "DRAIN"), False, True),
        (("IDLE", "DRAIN", "UNDRAIN"), False, False),
        (("ALLOCATED", "DRAIN"), True, False),
        (("MIXED", "DRAIN"), True, False),
        (("IDLE", "COMPLETING", "DRAIN"), True, False),
        (("DOWN", "DRAIN"), False, True),
    ],
)
def test_node_state_predicates_agree_on_both_sides(
    state: tuple[str, ...], busy: bool, drained: bool
) -> None:
    event = events.SlurmNode(source="slurm.c", key="n", state=state)
    node = models.Node(name="n", state=state)
    assert (wellknown.slurm_busy(state), event.busy, node.busy) == (busy, busy, busy)
    assert (wellknown.slurm_drained(state), event.drained, node.drained) == (
        drained,
        drained,
        drained,
    )


def test_client_base_states_are_the_wellknown_ones() -> None:
    assert models.BASE_STATES is wellknown.SLURM_BASE_STATES


@pytest.mark.parametrize(
    ("labels", "job_id"),
    [
        ({}, None),
        ({wellknown.LABEL_SLURM_JOBID: ""}, None),
        ({wellknown.LABEL_SLURM_JOBID: "42"}, 42),
        ({wellknown.LABEL_SLURM_JOBID: "0"}, 0),
        ({wellknown.LABEL_SLURM_JOBID: "-3"}, None),
        ({wellknown.LABEL_SLURM_JOBID: "x1"}, None),
        # str.isdigit() accepts these; int() does not: a user's label must not crash a reconciler.
        ({wellknown.LABEL_SLURM_JOBID: "\u00b2"}, None),
        ({wellknown.LABEL_SLURM_JOBID: "\u2460"}, None),
    ],
)
def test_slurm_job_id_reads_only_ascii_digits(labels: dict[str, str], job_id: int | None) -> None:
    assert wellknown.slurm_job_id(labels) == job_id


def test_allocation_id_of_a_superscript_label_is_none_not_a_crash() -> None:
    pod = events.KubePod(
        source="kube",
        key="ns/p",
        namespace="ns",
        name="p",
        labels={wellknown.LABEL_SLURM_JOBID: "\u00b2"},
    )
    assert _handoff.allocation_id(pod) == 0


def test_podref_of_a_pod_observation() -> None:
    pod = events.KubePod(source="kube", key="ns/p", namespace="ns", name="p", uid="u-1")
    assert PodRef.of(pod) == PodRef(namespace="ns", name="p", uid="u-1")
