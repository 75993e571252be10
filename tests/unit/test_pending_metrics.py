"""``slurmbridge_pending_pods{reason}``: unbound pods of ours by why they wait."""

from __future__ import annotations

from prometheus_client import REGISTRY

from schemas import wellknown
from schemas.events import KubePod, PodCondition, SlurmJob
from slurmbridge.observability.pending_metrics import PendingPodMetrics, pending_reason
from tests.unit._pods import kube_pod

SCHED = "pending-metrics-test"
COND = wellknown.CONDITION_POD_SCHEDULED


def value(reason: str) -> float:
    return REGISTRY.get_sample_value("slurmbridge_pending_pods", {"reason": reason}) or 0.0


def pod(
    name: str,
    *,
    reason: str = "",
    message: str = "",
    job: bool = False,
    node: str = "",
    phase: str = "Pending",
    scheduler: str = SCHED,
    gone: bool = False,
) -> KubePod:
    conds = (PodCondition(type=COND, status="False", reason=reason, message=message),)
    return kube_pod(
        "ns",
        name,
        scheduler_name=scheduler,
        node_name=node,
        phase=phase,
        labels={wellknown.LABEL_SLURM_JOBID: "7"} if job else {},
        conditions=conds if reason else (),
        op="deleted" if gone else "observed",
    )


def test_the_reason_of_each_kind_of_wait() -> None:
    pending = wellknown.pending_message("Priority", 12, "gpu")
    assert pending == "Priority, 12th in partition gpu"
    waiting = "SlurmJobPending"
    cases = [
        (pod("a", reason=waiting, message=pending, job=True), "SlurmJobPending:Priority"),
        (pod("b", reason=waiting, message="Resources", job=True), "SlurmJobPending:Resources"),
        (pod("c", reason="SlurmJobInvalid", message="no such annotation"), "SlurmJobInvalid"),
        (pod("d", reason="SlurmJobRejected", message="refused"), "SlurmJobRejected"),
        (pod("e", job=True), "submitted"),
        (pod("f"), "waiting-for-group"),
        (pod("g", node="k1", phase="Running", job=True), None),
        (pod("h", phase="Failed"), None),
        (pod("i", scheduler="default-scheduler"), None),
        (pod("j", gone=True), None),
    ]  # fmt: skip
    for p, reason in cases:
        assert pending_reason(p, SCHED) == reason, p.name


def test_pods_move_between_reasons_and_leave_when_bound_or_gone() -> None:
    m = PendingPodMetrics(SCHED)
    base = {r: value(r) for r in ("waiting-for-group", "submitted", "SlurmJobPending:Priority")}

    def delta(reason: str) -> float:
        return value(reason) - base.get(reason, 0.0)

    m.observe(pod("a"), 1)
    m.observe(pod("b"), 2)
    assert delta("waiting-for-group") == 2
    m.observe(pod("a", job=True), 3)
    assert (delta("waiting-for-group"), delta("submitted")) == (1, 1)
    waiting = pod("a", job=True, reason="SlurmJobPending", message="Priority, 2nd in partition p")
    m.observe(waiting, 4)
    m.observe(waiting, 5)  # the same again counts once
    assert (delta("submitted"), delta("SlurmJobPending:Priority")) == (0, 1)
    m.observe(pod("a", job=True, node="k1", phase="Running"), 6)  # bound
    assert delta("SlurmJobPending:Priority") == 0
    m.observe(pod("b", gone=True), 7)
    assert delta("waiting-for-group") == 0
    # Other kinds are ignored.
    m.observe(SlurmJob(source="slurm:c", key="7", job_id=7, state=("PENDING",)), 8)
    assert delta("waiting-for-group") == 0
