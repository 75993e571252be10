"""The ``autoscale`` reconciler's rules (pure): policy parsing, the wave up, holding, the
quiet period, bounds and the cool-down."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import pytest

from reconcilers import autoscale
from reconcilers.autoscale import PREFIX, PolicyError, View, policy_of
from schemas.actions import ScaleNodeSet
from schemas.events import KubeNodeSet

NOW = 10_000.0


def nodeset(
    replicas: int, last: float | None = None, direction: str = "", **policy: str
) -> KubeNodeSet:
    ann = {PREFIX + k.replace("_", "-"): v for k, v in policy.items()}
    if last is not None:
        ann[autoscale.LAST_SCALE] = str(int(last))
    if direction:
        ann[autoscale.LAST_DIRECTION] = direction
    return KubeNodeSet(
        source="k8s", key="slurm/gpu", namespace="slurm", name="gpu", uid="u",
        replicas=replicas, annotations=ann,
    )  # fmt: skip


BASE = {"partition": "gpu", "max_replicas": "6", "cooldown": "30", "idle_to_zero_after": "120"}


@dataclass(frozen=True)
class Case:
    name: str
    ns: KubeNodeSet
    pending: int = 0
    running: int = 0
    busy: int = 0
    last_end: int = 0
    want: int | None = None  # None: no change


CASES = [
    Case("a wave scales up", nodeset(0, **BASE), pending=4, want=4),
    Case("up to max only", nodeset(0, **BASE), pending=40, want=6),
    Case("busy nodes count", nodeset(2, **BASE), pending=1, busy=2, want=3),
    Case("jobs-per-node", nodeset(0, **BASE, jobs_per_node="4"), pending=9, want=3),
    Case("a wave never shrinks the set", nodeset(5, **BASE), pending=1, want=None),
    Case("jobs running, nothing pending: hold", nodeset(4, **BASE), running=3, want=None),
    Case(
        "quiet, but not long enough",
        nodeset(4, **BASE),
        last_end=int(NOW) - 60,
        want=None,
    ),
    Case("quiet long enough: to min", nodeset(4, **BASE), last_end=int(NOW) - 121, want=0),
    Case("min-replicas is the floor", nodeset(4, **BASE, min_replicas="1"), want=1),
    Case("already at min", nodeset(0, **BASE), want=None),
    Case("cool-down holds a change", nodeset(0, last=NOW - 10, **BASE), pending=3, want=None),
    Case("after the cool-down", nodeset(0, last=NOW - 31, **BASE), pending=3, want=3),
    Case(
        "growth after growth is not held",
        nodeset(1, last=NOW - 1, direction="up", **BASE),
        pending=3,
        want=3,
    ),
    Case(
        "growth after a step down is held",
        nodeset(0, last=NOW - 1, direction="down", **BASE),
        pending=3,
        want=None,
    ),
    Case(
        "a step down after growth is held",
        nodeset(4, last=NOW - 1, direction="up", **BASE),
        last_end=int(NOW) - 121,
        want=None,
    ),
    Case("no policy", nodeset(0), pending=3, want=None),
    Case("disabled (an HPA or KEDA owns it)", nodeset(0, **BASE, enabled="false"), pending=3),
    Case("bad policy changes nothing", nodeset(0, **{**BASE, "max_replicas": "x"}), pending=3),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_rules(case: Case) -> None:
    d = autoscale.decide(
        View(
            nodeset=case.ns,
            pending=case.pending,
            running=case.running,
            last_end=case.last_end,
            busy=case.busy,
            now=NOW,
            slurm_listed=True,
        )
    )
    scales = [a for a in d.actions if isinstance(a, ScaleNodeSet)]
    if case.want is None:
        assert scales == [], d.reason
    else:
        assert [(a.replicas, a.at) for a in scales] == [(case.want, int(NOW))], d.reason


def test_waits_are_requeued() -> None:
    cool = autoscale.decide(
        View(nodeset=nodeset(0, last=NOW - 10, **BASE), pending=3, running=0, last_end=0,
             busy=0, now=NOW, slurm_listed=True)
    )  # fmt: skip
    assert cool.requeue_after == pytest.approx(20.0)
    quiet = autoscale.decide(
        View(nodeset=nodeset(4, **BASE), pending=0, running=0, last_end=int(NOW) - 60, busy=0,
             now=NOW, slurm_listed=True)
    )  # fmt: skip
    assert quiet.requeue_after == pytest.approx(60.0)


def test_no_jobs_seen_is_not_quiet_without_a_current_listing() -> None:
    """Fail closed: before a good poll is in the log, or while polls fail, an empty partition
    may be a busy one we cannot see; scaling down would drain its nodes."""
    unseen = View(nodeset=nodeset(4, **BASE), pending=0, running=0, last_end=0, busy=0, now=NOW)
    d = autoscale.decide(unseen)
    assert d.actions == () and d.requeue_after == autoscale.LISTING_RECHECK_S
    assert "no current listing" in d.reason
    listed = autoscale.decide(msgspec.structs.replace(unseen, slurm_listed=True))
    assert [a.replicas for a in listed.actions if isinstance(a, ScaleNodeSet)] == [0]


@pytest.mark.parametrize(
    ("ann", "message"),
    [
        ({"partition": "gpu"}, "max-replicas: required"),
        ({"partition": "gpu", "max-replicas": "2", "min-replicas": "3"}, "below min-replicas"),
        ({"partition": "gpu", "max-replicas": "-1"}, "below 0"),
        ({"partition": "gpu", "max-replicas": "2", "cooldown": "soon"}, "cooldown: 'soon'"),
        ({"partition": "gpu", "max-replicas": "2", "jobs-per-node": "0"}, "jobs-per-node"),
    ],
)
def test_policy_errors_name_the_annotation(ann: dict[str, str], message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        policy_of({PREFIX + k: v for k, v in ann.items()})


def test_policy_defaults() -> None:
    p = policy_of({PREFIX + "partition": "gpu", PREFIX + "max-replicas": "4"})
    assert p is not None
    assert (p.min_replicas, p.jobs_per_node, p.cooldown_s, p.idle_to_zero_s) == (0, 1, 60, 300)
