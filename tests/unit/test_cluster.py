"""The ``cluster`` reconciler (pure): which Cluster objects are served, readiness from pings,
status written only when it differs; the Secret → token translation; NodeSets of served
Clusters."""

from __future__ import annotations

import base64

import pytest

from reconcilers import cluster, nodeset
from reconcilers.base import Context
from schemas.actions import RecordEvent, SetClusterStatus
from schemas.events import Event, KubeNodeSet, SlurmCluster, SlurmPing
from schemas.subjects import slurm_source
from slurmbridge.clusters import token_from
from slurmbridge.kube.wire import RawSecret
from tests.unit._decisions import store

CTX = Context(scheduler_name="s", cluster="static")


def cl(name: str, ns: str = "slurm", **kw: object) -> SlurmCluster:
    return SlurmCluster(
        source="k8s",
        key=f"{ns}/{name}",
        uid=f"uid-{ns}-{name}",
        namespace=ns,
        name=name,
        server=f"http://{name}:6820",
        secret_name=f"{name}-token",
        generation=3,
        **kw,  # type: ignore[arg-type]
    )


def ping(name: str, **kw: object) -> SlurmPing:
    return SlurmPing(source=slurm_source(name), key=name, cluster=name, **kw)  # type: ignore[arg-type]


def decide(key: str, *objs: Event) -> tuple[object, ...]:
    s = store(*objs)
    return cluster.decide(cluster.view(s, key, CTX)).actions


def status_of(actions: tuple[object, ...]) -> tuple[bool, str, str]:
    (st,) = [a for a in actions if isinstance(a, SetClusterStatus)]
    return st.is_ready, st.reason, st.message


@pytest.mark.parametrize(
    ("p", "want"),
    [
        (None, (False, "Connecting")),
        (ping("a", responding=True, hostnames=("ctl",), api_version="v0.0.44"), (True, "Ready")),
        (ping("a", responding=False), (False, "NotResponding")),
        (
            ping("a", error="HTTP 401: bad token", error_kind="Unauthorized"),
            (False, "Unauthorized"),
        ),
        (ping("a", error="Secret x not found", error_kind="MissingToken"), (False, "MissingToken")),
        (ping("a", error="cannot reach", error_kind="Unavailable"), (False, "Unreachable")),
        (ping("a", error="bad JSON", error_kind="BadResponse"), (False, "PingFailed")),
    ],
)
def test_readiness_from_the_last_ping(p: SlurmPing | None, want: tuple[bool, str]) -> None:
    objs: list[Event] = [cl("a")]
    if p is not None:
        objs.append(p)
    actions = decide("slurm/a", *objs)
    assert status_of(actions)[:2] == want
    (event,) = [a for a in actions if isinstance(a, RecordEvent)]
    assert event.reason == ("ClusterReady" if want[0] else "ClusterNotReady")
    assert event.type == ("Normal" if want[0] else "Warning")


def test_error_message_is_the_pings() -> None:
    actions = decide("slurm/a", cl("a"), ping("a", error="HTTP 401 x", error_kind="Unauthorized"))
    assert status_of(actions)[2] == "HTTP 401 x"


def test_status_already_written_means_nothing_to_do() -> None:
    p = ping("a", responding=True, hostnames=("ctl",), api_version="v0.0.44")
    first = decide("slurm/a", cl("a"), p)
    ready, reason, message = status_of(first)
    again = decide(
        "slurm/a",
        cl("a", is_ready=ready, ready_reason=reason, ready_message=message),
        p,
    )
    assert again == ()


def test_no_event_when_readiness_does_not_flip() -> None:
    # isReady stays false, only the reason changes: the status is written, no Event.
    actions = decide(
        "slurm/a",
        cl("a", is_ready=False, ready_reason="Connecting", ready_message="waiting"),
        ping("a", error="HTTP 401", error_kind="Unauthorized"),
    )
    assert status_of(actions)[:2] == (False, "Unauthorized")
    assert not [a for a in actions if isinstance(a, RecordEvent)]


@pytest.mark.parametrize(
    ("objs", "key", "why"),
    [
        ((cl("static"),), "slurm/static", "static cluster"),
        ((cl("a.b"),), "slurm/a.b", "subject token"),
        ((cl("a", ns="x"), cl("a", ns="y")), "y/a", "Cluster x/a has the same name"),
        ((cl("a", deleting=True),), "slurm/a", ""),  # deleting: nothing written at all
    ],
)
def test_unserved_clusters(objs: tuple[SlurmCluster, ...], key: str, why: str) -> None:
    s = store(*objs)
    v = cluster.view(s, key, CTX)
    actions = cluster.decide(v).actions
    if not why:
        assert actions == ()
        assert cluster.served(s, CTX) == {}
        return
    assert why in v.not_served
    assert status_of(actions)[:2] == (False, "NotServed")
    assert key not in {c.key for c in cluster.served(s, CTX).values()}


def test_first_of_two_same_names_is_served_and_the_other_takes_over_when_it_goes() -> None:
    s = store(cl("a", ns="x"), cl("a", ns="y"))
    assert cluster.served(s, CTX)["a"].key == "x/a"
    s.apply(SlurmCluster(source="k8s", key="x/a", op="deleted", name="a", namespace="x"), 9)
    assert cluster.served(s, CTX)["a"].key == "y/a"
    # The tombstone triggers a look at every Cluster of that name.
    assert list(cluster.SPEC.keys_of(cl("a", ns="x"), s, CTX)) == ["x/a", "y/a"]


def test_ping_reaches_the_clusters_of_its_name() -> None:
    s = store(cl("a"), cl("b"))
    assert list(cluster.SPEC.keys_of(ping("a"), s, CTX)) == ["slurm/a"]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    ("data", "token", "why"),
    [
        (None, "", "not found"),
        ({"other": b64("t")}, "", "no key 'auth-token'"),
        ({"auth-token": "%%%"}, "", "not base64"),
        ({"auth-token": b64("  \n")}, "", "is empty"),
        ({"auth-token": b64("jwt.value\n")}, "jwt.value", ""),
    ],
)
def test_token_from_secret(data: dict[str, str] | None, token: str, why: str) -> None:
    c = cl("a")
    secret = None if data is None else RawSecret(data=data)
    got, reason = token_from(secret, c)
    assert got == token
    assert why in reason
    if why:
        assert "Secret slurm/a-token" in reason


def test_nodeset_of_a_served_cluster_is_served_and_unknown_names_are_not() -> None:
    def ns(cluster_name: str) -> KubeNodeSet:
        return KubeNodeSet(
            source="k8s", key="slurm/gpu", namespace="slurm", name="gpu", cluster_name=cluster_name
        )

    for name, objs, served in [
        ("", (), True),
        ("static", (), True),
        ("a", (cl("a"),), True),
        ("a", (), False),
        ("a", (cl("a", deleting=True),), False),
    ]:
        s = store(ns(name), *objs)
        v = nodeset.view(s, "slurm/gpu", CTX)
        assert v is not None and v.served is served, (name, objs)
        assert v.cluster == (name or "static")
        if not served:
            assert "not served" in nodeset.decide(v).reason
