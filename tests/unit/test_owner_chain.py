"""A bare pod's owner chain Pod → ReplicaSet → Deployment (issue 28 item 9): the root's
annotations configure its job; a link not observed keeps the pod pending with an Event.
Cases in our words from Slinky slurm-bridge 1.3
``internal/utils/slurmjobir/owner_test.go`` (``getRootOwnerMetadata``)."""

from __future__ import annotations

import pytest

from reconcilers import _pods, placement
from schemas.actions import RecordEvent, SetPodCondition, SubmitSlurmJob
from schemas.events import Event, KubeWorkload, OwnerRef, SlurmPartition
from tests.unit._pods import kube_workload
from tests.unit.test_placement import decide, pod

P = _pods.PREFIX
BATCH = SlurmPartition(source="slurm:c1", key="batch", cluster="c1")


def apps(kind: str, name: str, owner: OwnerRef | None = None, **annotations: str) -> KubeWorkload:
    return kube_workload(
        "ns",
        kind,
        name,
        api_version="apps/v1",
        owner=owner,
        annotations={P + k.replace("_", "-"): v for k, v in annotations.items()},
    )


def ref(kind: str, name: str) -> OwnerRef:
    return OwnerRef(api_version="apps/v1", kind=kind, name=name, uid=f"uid-{name}")


RS = ref("ReplicaSet", "web-5d8f")
DEPLOY = ref("Deployment", "web")


@pytest.mark.parametrize(
    ("objs", "partition", "missing"),
    [
        pytest.param((apps("ReplicaSet", "web-5d8f", partition="rs"),), "rs", "", id="RS => Pod"),
        pytest.param(
            (
                apps("ReplicaSet", "web-5d8f", DEPLOY, partition="rs"),
                apps("Deployment", "web", partition="deploy"),
            ),
            "deploy",
            "",
            id="Deployment => RS => Pod",
        ),
        pytest.param(
            (apps("ReplicaSet", "web-5d8f", DEPLOY),), "", "Deployment ns/web", id="missing higher"
        ),
        pytest.param((), "", "ReplicaSet ns/web-5d8f", id="missing direct owner"),
    ],
)
def test_the_owner_chains_root_configures_the_job(
    objs: tuple[Event, ...], partition: str, missing: str
) -> None:
    parts = (SlurmPartition(source="slurm:c1", key=name, cluster="c1") for name in ("rs", "deploy"))
    p = pod("p", owner=RS, annotations={P + "partition": "own"})
    d = decide("ns/Pod:p", p, BATCH, *parts, *objs)
    submits = [a for a in d.actions if isinstance(a, SubmitSlurmJob)]
    if not missing:
        assert [s.spec.partition for s in submits] == [partition]
        return
    assert submits == []
    (cond,) = [a for a in d.actions if isinstance(a, SetPodCondition)]
    assert (cond.status, cond.reason) == ("False", _pods.OWNER_MISSING)
    assert missing in cond.message
    (event,) = [a for a in d.actions if isinstance(a, RecordEvent)]
    assert (event.type, event.reason) == ("Warning", _pods.OWNER_MISSING)


def test_a_link_appearing_reaches_its_pods() -> None:
    from tests.unit.test_placement import CTX, store

    p = pod("p", owner=RS)
    s = store(p, apps("ReplicaSet", "web-5d8f", DEPLOY))
    deploy = apps("Deployment", "web")
    assert list(placement.SPEC.keys_of(deploy, s, CTX)) == ["ns/Pod:p"]
    assert list(placement.SPEC.keys_of(apps("ReplicaSet", "web-5d8f"), s, CTX)) == ["ns/Pod:p"]
