"""ScheduledUpdate (pure rule and REST layer): the MAINT reservation a NodeSet gets, the pods
replaced inside it, and the reservation codec and client against a fake slurmrestd
(reconcilers.nodeset rules 11-12; slurm-operator nodeset_sync.go ``syncSlurmReservation``
and ``syncScheduledUpdate``, slurmcontrol.go ``SyncReservationForNodeSet``,
``GetPodsUnderReservation``, ``formatReservationForSchedule``)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx
import msgspec
import pytest

from producers.kube.translate import go_duration_s, nodeset_to_event
from schemas import wellknown
from schemas.actions import (
    DeleteNodeSetPod,
    DeleteSlurmReservation,
    DrainSlurmNode,
    EnsureSlurmReservation,
)
from schemas.events import Event, KubeNodeSet, SlurmNode
from slurmbridge.kube.wire import RawNodeSet
from slurmbridge.slurm import codecs
from slurmbridge.slurm.client import SlurmClient, TokenHolder
from slurmbridge.slurm.errors import Unsupported
from slurmbridge.slurm.models import ReservationDesc
from tests.unit.test_nodeset import sn
from tests.unit.test_nodeset_update import NEW, decision, rp, rs

START = 10_000
NAME = "SlurmOperatorMaint-gpu"
STAMP = f"{START} 30 IGNORE_JOBS,MAINT gpu-0,gpu-1"


def sched(replicas: int = 2, stamp: str = "", **kw: object) -> KubeNodeSet:
    kw.setdefault("update_strategy", "ScheduledUpdate")
    kw.setdefault("scheduled_start", START)
    kw.setdefault("scheduled_duration_s", 1800)
    annotations = {wellknown.ANNOTATION_NODESET_RESERVATION: stamp} if stamp else {}
    return rs(replicas, annotations=annotations, **kw)


def maint(ordinal: int, *state: str, reservation: str = NAME) -> SlurmNode:
    return msgspec.structs.replace(
        sn(ordinal, *(state or ("IDLE",)), "RESERVED", "MAINTENANCE"), reservation=reservation
    )


@dataclass(frozen=True)
class Case:
    name: str
    objs: tuple[Event, ...]
    ensure: str | None = None  # the stamp of the EnsureSlurmReservation, if one
    delete: bool = False
    note: str = ""
    now: float = 0.0


PODS = (rp(0), sn(0), rp(1), sn(1))
CASES = [
    Case("a future window, not ensured yet: ensure it", (sched(), *PODS), ensure=STAMP),
    Case("already ensured (same stamp): nothing", (sched(stamp=STAMP), *PODS)),
    Case(
        "a node joined: ensure again with the new node list",
        (sched(3, stamp=STAMP), *PODS, rp(2), sn(2)),
        ensure=f"{START} 30 IGNORE_JOBS,MAINT gpu-0,gpu-1,gpu-2",
    ),
    Case(
        "extra flags are upper-cased, sorted and merged with the required ones",
        (sched(scheduled_flags=("daily", "MAINT")), *PODS),
        ensure=f"{START} 30 DAILY,IGNORE_JOBS,MAINT gpu-0,gpu-1",
    ),
    Case(
        "90 s of duration is 1 whole minute (Go's Duration.Minutes truncated)",
        (sched(scheduled_duration_s=90), *PODS),
        ensure=f"{START} 1 IGNORE_JOBS,MAINT gpu-0,gpu-1",
    ),
    Case(
        "the start passed before it was ever created: not created (1.x)",
        (sched(), *PODS),
        note="passed before",
        now=START + 1,
    ),
    Case(
        "...unless FORCE_START",
        (sched(scheduled_flags=("FORCE_START",)), *PODS),
        ensure=f"{START} 30 FORCE_START,IGNORE_JOBS,MAINT gpu-0,gpu-1",
        now=START + 1,
    ),
    Case(
        "inside the window, created before: a new node list is still sent",
        (sched(3, stamp=STAMP), *PODS, rp(2), sn(2)),
        ensure=f"{START} 30 IGNORE_JOBS,MAINT gpu-0,gpu-1,gpu-2",
        now=START + 60,
    ),
    Case(
        "the window ended: never re-created",
        (sched(3, stamp=STAMP), *PODS, rp(2), sn(2)),
        note="has ended",
        now=START + 1800,
    ),
    Case(
        "no Slurm node idle or allocated yet: wait (1.x nodeSetHasIdlePods)",
        (sched(), rp(0), sn(0, "DOWN"), rp(1), sn(1, "DOWN")),
        note="waits for an idle or allocated",
    ),
    Case("no startTime: nothing", (sched(scheduled_start=0), *PODS), note="startTime is unset"),
    Case(
        "strategy changed away with a stamp: delete the reservation",
        (sched(stamp=STAMP, update_strategy="RollingUpdate"), *PODS),
        delete=True,
    ),
    Case("scaled to 0 with a stamp: delete", (sched(0, stamp=STAMP),), delete=True),
    Case("RollingUpdate without a stamp: nothing", (rs(2), *PODS)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_reservation(case: Case) -> None:
    d = decision(*case.objs, now=case.now)
    ensures = [a for a in d.actions if isinstance(a, EnsureSlurmReservation)]
    deletes = [a for a in d.actions if isinstance(a, DeleteSlurmReservation)]
    assert [a.stamp for a in ensures] == ([case.ensure] if case.ensure else [])
    assert [a.name for a in deletes] == ([NAME] if case.delete else [])
    assert case.note in d.reason
    for a in ensures:
        assert a.name == NAME and a.cluster == "c1" and a.start_time == START
        assert a.nodes == tuple(a.stamp.split()[3].split(","))
        assert a.flags == tuple(a.stamp.split()[2].split(","))


UPDATE_CASES = [
    (
        "old pods under our active MAINT reservation are replaced, all at once, idle now",
        (sched(stamp=STAMP), rp(0), maint(0), rp(1), maint(1)),
        ["gpu-0", "gpu-1"],
        ["gpu-0", "gpu-1"],
    ),
    (
        "one under it, one whose window has not reached it: only the first",
        (sched(stamp=STAMP), rp(0), maint(0), rp(1), sn(1)),
        ["gpu-0"],
        ["gpu-0"],
    ),
    (
        "a busy node under the reservation (IGNORE_JOBS) is drained, deleted once idle",
        (sched(stamp=STAMP), rp(0), maint(0, "ALLOCATED"), rp(1), sn(1)),
        ["gpu-0"],
        [],
    ),
    (
        "another MAINT reservation (an administrator's) replaces nothing",
        (sched(stamp=STAMP), rp(0), maint(0, reservation="admin"), rp(1), sn(1)),
        [],
        [],
    ),
    (
        "an unhealthy old pod is replaced outside the window",
        (sched(stamp=STAMP), rp(0, ready=False), sn(0), rp(1), sn(1)),
        ["gpu-0"],
        ["gpu-0"],
    ),
    (
        "a pod already at the new revision stays",
        (sched(stamp=STAMP), rp(0, NEW), maint(0), rp(1), sn(1)),
        [],
        [],
    ),
]


@pytest.mark.parametrize(
    ("objs", "drains", "deletes"),
    [c[1:] for c in UPDATE_CASES],
    ids=[c[0] for c in UPDATE_CASES],
)
def test_scheduled_update_replaces_pods_under_the_reservation(
    objs: tuple[Event, ...], drains: list[str], deletes: list[str]
) -> None:
    d = decision(*objs, now=START + 60)
    assert [a.node for a in d.actions if isinstance(a, DrainSlurmNode)] == drains
    assert [a.pod.name for a in d.actions if isinstance(a, DeleteNodeSetPod)] == deletes


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800.0), ("1h30m", 5400.0), ("90s", 90.0), ("1.5h", 5400.0), ("0", 0.0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert go_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "30", "5d", "m"])
def test_unreadable_go_durations(text: str) -> None:
    assert go_duration_s(text) is None


# --- REST ----------------------------------------------------------------------------------


def test_the_reservation_body_is_a_v0045_reservation_desc_msg() -> None:
    desc = ReservationDesc(
        name=NAME,
        nodes=("gpu-0", "gpu-1"),
        start_time=START,
        duration_minutes=30,
        flags=("IGNORE_JOBS", "MAINT"),
        users=("root",),
    )
    assert json.loads(codecs.get("v0.0.45").encode_reservation(desc)) == {
        "name": NAME,
        "node_list": ["gpu-0", "gpu-1"],
        "start_time": {"set": True, "infinite": False, "number": START},
        "duration": {"set": True, "infinite": False, "number": 30},
        "flags": ["IGNORE_JOBS", "MAINT"],
        "users": ["root"],
    }
    # An update of an active reservation names no start (Slurm: "Reservation already started").
    only_nodes = ReservationDesc(name=NAME, nodes=("gpu-0",))
    assert json.loads(codecs.get("v0.0.43").encode_reservation(only_nodes)) == {
        "name": NAME,
        "node_list": ["gpu-0"],
    }


@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.38"])
def test_versions_before_v0043_cannot_write_reservations(version: str) -> None:
    with pytest.raises(Unsupported):
        codecs.get(version).encode_reservation(ReservationDesc(name=NAME))
    assert codecs.get(version).paths.reservation_new == ""


def _client(version: str, handler: object) -> SlurmClient:
    transport = httpx.MockTransport(handler)  # type: ignore[arg-type]
    return SlurmClient(
        "http://slurm", api_version=version, transport=transport, token=TokenHolder("t")
    )


#: Recorded from Slurm 26.05.5 (``GET /slurm/v0.0.45/reservations/``, abridged).
LISTING = {
    "reservations": [
        {
            "name": NAME,
            "node_list": "gpu-[0-1]",
            "flags": ["MAINT", "IGNORE_JOBS", "SPEC_NODES"],
            "start_time": {"set": True, "infinite": False, "number": START},
            "end_time": {"set": True, "infinite": False, "number": START + 1800},
        }
    ],
    "errors": [],
    "warnings": [],
}


async def test_the_client_reads_creates_and_deletes_reservations() -> None:
    seen: list[tuple[str, str, bytes]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, request.content))
        if request.method == "GET":
            return httpx.Response(200, json=LISTING)
        if request.method == "DELETE" and request.url.path.endswith("/gone"):
            # 26.05.5: deleting an unknown reservation.
            body = {"errors": [{"error_number": 2053, "error": "Requested reservation is invalid"}]}
            return httpx.Response(422, json=body)
        return httpx.Response(200, json={"errors": [], "warnings": []})

    async with _client("v0.0.45", handler) as c:
        res = await c.get_reservation(NAME)
        assert res is not None
        assert res.nodes == ("gpu-0", "gpu-1")
        assert "MAINT" in res.flags
        assert res.active(START + 1) and not res.active(START + 1800)
        assert await c.get_reservation("other") is None
        await c.put_reservation(ReservationDesc(name=NAME, nodes=("gpu-0",)))
        assert await c.delete_reservation(NAME) is True
        assert await c.delete_reservation("gone") is False
    assert [(m, p) for m, p, _ in seen] == [
        ("GET", "/slurm/v0.0.45/reservations/"),
        ("GET", "/slurm/v0.0.45/reservations/"),
        ("POST", "/slurm/v0.0.45/reservation"),
        ("DELETE", f"/slurm/v0.0.45/reservation/{NAME}"),
        ("DELETE", "/slurm/v0.0.45/reservation/gone"),
    ]


async def test_v0042_refuses_before_sending() -> None:
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        return httpx.Response(500)

    async with _client("v0.0.42", handler) as c:
        with pytest.raises(Unsupported, match=r"v0\.0\.43"):
            await c.put_reservation(ReservationDesc(name=NAME))
        with pytest.raises(Unsupported, match=r"v0\.0\.43"):
            await c.delete_reservation(NAME)
    assert sent == []


@pytest.mark.parametrize(
    ("scheduled", "start", "duration_s", "flags"),
    [
        (
            {"startTime": "2026-01-02T03:04:05Z", "duration": "1h30m", "flags": ["daily"]},
            1767323045,
            5400,
            ("DAILY",),
        ),
        ({"startTime": "2026-01-02T03:04:05Z"}, 1767323045, 1800, ()),  # the CRD's 30m
        ({"startTime": "not a time", "duration": "5d"}, 0, 0, ()),
        ({}, 0, 1800, ()),
    ],
)
def test_the_scheduled_update_spec_reaches_the_observation(
    scheduled: dict[str, object], start: int, duration_s: int, flags: tuple[str, ...]
) -> None:
    raw = msgspec.json.decode(
        json.dumps(
            {
                "apiVersion": "slinky.slurm.net/v1beta1",
                "kind": "NodeSet",
                "metadata": {"name": "gpu", "namespace": "slurm", "uid": "u"},
                "spec": {
                    "updateStrategy": {"type": "ScheduledUpdate", "scheduledUpdate": scheduled}
                },
            }
        ),
        type=RawNodeSet,
    )
    ev = nodeset_to_event(raw, producer="p", observed_at=1)
    assert ev.update_strategy == "ScheduledUpdate"
    assert (ev.scheduled_start, ev.scheduled_duration_s, ev.scheduled_flags) == (
        start,
        duration_s,
        flags,
    )
