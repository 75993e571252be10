"""Why a slurmd pod does not run, told on its NodeSet (issue 29 item 2; reconcilers.nodeset
rule 5): the kubelet's reason travels in the KubePod observation (producers/kube/translate.py)
and the pure decision puts it in the Warning Event, bounded."""

from __future__ import annotations

import msgspec
import pytest

from producers.kube.translate import KUBELET_MESSAGE_LIMIT, pod_to_event
from reconcilers import nodeset
from schemas.actions import RecordEvent
from schemas.events import KubePod, PodCondition
from slurmbridge.kube.wire import RawPod
from tests.unit.test_nodeset import decide, ns, of, pod


def translate(status: dict[str, object]) -> KubePod:
    raw = msgspec.convert(
        {"metadata": {"name": "gpu-0", "namespace": "slurm", "uid": "u0"}, "status": status},
        RawPod,
    )
    return pod_to_event(raw, producer="t", observed_at=0)


def waiting(name: str, reason: str, message: str = "") -> dict[str, object]:
    return {"name": name, "state": {"waiting": {"reason": reason, "message": message}}}


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        # kubelet.go rejectPod: the pod's own reason and message.
        (
            {"phase": "Failed", "reason": "OutOfcpu", "message": "Pod was rejected: Node didn't"},
            ("OutOfcpu", "Pod was rejected: Node didn't"),
        ),
        ({"phase": "Failed", "reason": "Evicted", "message": ""}, ("Evicted", "")),
        # A container the kubelet cannot start; init containers first.
        (
            {
                "phase": "Pending",
                "initContainerStatuses": [waiting("logfile", "ErrImagePull", "pull denied")],
                "containerStatuses": [waiting("slurmd", "PodInitializing")],
            },
            ("ErrImagePull", "container logfile: pull denied"),
        ),
        (
            {
                "phase": "Running",
                "containerStatuses": [waiting("slurmd", "CrashLoopBackOff", "back-off 5m0s")],
            },
            ("CrashLoopBackOff", "container slurmd: back-off 5m0s"),
        ),
        # Merely starting: nothing to say.
        (
            {"phase": "Pending", "containerStatuses": [waiting("slurmd", "ContainerCreating")]},
            ("", ""),
        ),
        ({"phase": "Running", "containerStatuses": [{"name": "slurmd", "state": {}}]}, ("", "")),
        # A terminal pod whose container failed.
        (
            {
                "phase": "Failed",
                "containerStatuses": [
                    {
                        "name": "slurmd",
                        "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
                    }
                ],
            },
            ("OOMKilled", "container slurmd exited with 137"),
        ),
        # An exit code alone is not a reason while the pod still runs (it restarts).
        (
            {
                "phase": "Running",
                "containerStatuses": [{"name": "s", "state": {"terminated": {"exitCode": 1}}}],
            },
            ("", ""),
        ),
    ],
)
def test_the_kubelets_reason_is_read_from_the_pod_status(
    status: dict[str, object], expected: tuple[str, str]
) -> None:
    p = translate(status)
    assert (p.kubelet_reason, p.kubelet_message) == expected


def test_a_long_kubelet_message_is_cut() -> None:
    p = translate({"phase": "Failed", "reason": "Evicted", "message": "x" * 10_000})
    assert len(p.kubelet_message) == KUBELET_MESSAGE_LIMIT
    assert p.kubelet_message.endswith("…")


def test_the_failed_pods_warning_names_the_kubelets_reason() -> None:
    failed = msgspec.structs.replace(
        pod(0, phase="Failed"),
        kubelet_reason="TaintToleration",
        kubelet_message="Pod was rejected: Predicate TaintToleration failed",
    )
    (event,) = [e for e in of(RecordEvent, decide(ns(1), failed)) if e.reason == "PodFailed"]  # type: ignore[attr-defined]
    assert isinstance(event, RecordEvent)
    assert event.type == "Warning"
    assert event.message.startswith(
        "gpu-0 is Failed (TaintToleration: Pod was rejected: Predicate TaintToleration failed): "
        "deleting it"
    )


@pytest.mark.parametrize(
    ("p", "reason", "text"),
    [
        (
            msgspec.structs.replace(
                pod(0, phase="Pending", ready=False),
                kubelet_reason="ImagePullBackOff",
                kubelet_message='container slurmd: Back-off pulling image "slurmd:nope"',
            ),
            "ImagePullBackOff",
            "gpu-0 is Pending (ImagePullBackOff: container slurmd: "
            'Back-off pulling image "slurmd:nope")',
        ),
        (
            msgspec.structs.replace(
                pod(0, ready=False),
                kubelet_reason="CrashLoopBackOff",
                kubelet_message="container slurmd: back-off 5m0s",
            ),
            "CrashLoopBackOff",
            "gpu-0 is Running (CrashLoopBackOff: container slurmd: back-off 5m0s)",
        ),
        (
            msgspec.structs.replace(
                pod(0, phase="Pending", ready=False, node=""),
                conditions=(
                    PodCondition(
                        type="PodScheduled",
                        status="False",
                        reason="Unschedulable",
                        message="0/4 nodes are available: 4 node(s) had untolerated taint",
                    ),
                ),
            ),
            "Unschedulable",
            "gpu-0 is Pending (Unschedulable: 0/4 nodes are available: 4 node(s) had untolerated "
            "taint)",
        ),
    ],
)
def test_a_pod_that_does_not_come_up_gets_one_warning_with_the_reason(
    p: KubePod, reason: str, text: str
) -> None:
    events = [e for e in of(RecordEvent, decide(ns(1), p)) if e.reason == "PodNotRunning"]  # type: ignore[attr-defined]
    (event,) = events
    assert isinstance(event, RecordEvent)
    assert (event.type, event.message) == ("Warning", text)
    # One Event per pod and reason (a named Event, created once), not one per reconcile.
    assert event.once == f"pod-u0.{reason.lower()}"
    why = nodeset.not_running(p)
    assert why is not None
    assert why[0] == reason


def test_healthy_starting_and_deleting_pods_get_no_warning() -> None:
    starting = pod(0, phase="Pending", ready=False)
    bound_unscheduled = msgspec.structs.replace(
        pod(1, phase="Pending", ready=False),
        conditions=(PodCondition(type="PodScheduled", status="True"),),
    )
    going = msgspec.structs.replace(
        pod(2, deleting=True), kubelet_reason="CrashLoopBackOff", kubelet_message="m"
    )
    actions = decide(ns(3), starting, bound_unscheduled, going)
    assert not [e for e in of(RecordEvent, actions) if e.reason == "PodNotRunning"]  # type: ignore[attr-defined]


def test_the_event_message_is_bounded() -> None:
    p = msgspec.structs.replace(
        pod(0, ready=False), kubelet_reason="CrashLoopBackOff", kubelet_message="y" * 5000
    )
    (event,) = [e for e in of(RecordEvent, decide(ns(1), p)) if e.reason == "PodNotRunning"]  # type: ignore[attr-defined]
    assert isinstance(event, RecordEvent)
    assert len(event.message) == nodeset.EVENT_MESSAGE_LIMIT
    assert event.message.endswith("…")


def test_a_nodeset_whose_pods_all_fail_alike_warns_for_a_few_of_them() -> None:
    """A wrong image fails every pod: the first NOT_RUNNING_EVENTS by name are named, so a
    large NodeSet does not send one Event per pod on every decision."""
    stuck = [
        msgspec.structs.replace(
            pod(i, phase="Pending", ready=False), kubelet_reason="ImagePullBackOff"
        )
        for i in range(12)
    ]
    events = [e for e in of(RecordEvent, decide(ns(12), *stuck)) if e.reason == "PodNotRunning"]  # type: ignore[attr-defined]
    names = sorted(p.name for p in stuck)[: nodeset.NOT_RUNNING_EVENTS]
    assert [e.message.split()[0] for e in events] == names  # type: ignore[attr-defined]
