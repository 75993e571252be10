"""NodeSet ``spec.partition`` (reconcilers.nodeset rules 19 and 20): the pure rule, its
config parser, the v0.0.45 body (measured against Slurm 26.05.5) and the client against a
fake slurmrestd (slurm-operator controller_config.go ``buildNodeSetConf`` renders the same
NodeSet into slurm.conf)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx
import msgspec
import pytest

from schemas import partitionconf, wellknown
from schemas.actions import (
    DeleteSlurmPartition,
    DeleteSlurmReservation,
    EnsureSlurmPartition,
    RecordEvent,
    ReleaseNodeSetFinalizer,
)
from schemas.events import Event, KubeNodeSet, SlurmPartition
from slurmbridge.slurm import codecs
from slurmbridge.slurm.client import SlurmClient, TokenHolder
from slurmbridge.slurm.codecs.v0045 import PARTITION_DEFAULTS, PARTITION_FIELDS, partition_body
from slurmbridge.slurm.errors import Conflict, NotFound, Unsupported
from slurmbridge.slurm.models import PartitionDesc
from tests.unit.test_nodeset import sn
from tests.unit.test_nodeset_update import decision, rp, rs

PART = wellknown.ANNOTATION_NODESET_PARTITION
FIN = wellknown.FINALIZER_NODESET_SLURM


def test_every_parsed_key_has_a_rest_field() -> None:
    assert set(partitionconf.KINDS) == set(PARTITION_FIELDS)


@pytest.mark.parametrize(
    ("config", "settings", "problem_keys"),
    [
        (
            "MaxTime=UNLIMITED OverSubscribe=EXCLUSIVE",
            (("MaxTime", "INFINITE"), ("OverSubscribe", "EXCLUSIVE")),
            (),
        ),
        (
            "maxtime=1-00:00:30 PreemptMode=REQUEUE",
            (("MaxTime", "1441"), ("PreemptMode", "REQUEUE")),
            (),
        ),
        ("Nodes=x Bogus=1 MaxNodes=ten", (), ("Nodes", "Bogus", "MaxNodes")),
        ("Default=yes MaxTime=10 MaxTime=20", (("Default", "YES"), ("MaxTime", "20")), ()),
        ("", (), ()),
    ],
)
def test_parse(config: str, settings: tuple, problem_keys: tuple) -> None:
    got, problems = partitionconf.parse(config)
    assert got == settings
    assert tuple(k for k, _ in problems) == problem_keys


def test_every_default_is_a_parsed_value() -> None:
    for key, value in PARTITION_DEFAULTS.items():
        got, problems = partitionconf.parse(f"{key}={value or 'x'}")
        assert not problems, (key, problems)
        assert got[0][0] == key


@pytest.mark.parametrize(
    ("text", "minutes"),
    [("90", "90"), ("1:30", "2"), ("1:00:00", "60"), ("1-0", "1440"), ("2-1:1:1", "2942")],
)
def test_slurm_times_are_minutes_rounded_up(text: str, minutes: str) -> None:
    assert partitionconf.minutes(text) == minutes


def test_the_body_is_the_whole_partition() -> None:
    body = partition_body(
        PartitionDesc(
            name="gpu",
            nodes=("gpu-0", "gpu-1"),
            settings=(("Default", "YES"), ("MaxTime", "INFINITE"), ("OverSubscribe", "FORCE:2")),
        )
    )
    assert body["name"] == "gpu"
    assert body["nodes"] == {"configured": "gpu-0,gpu-1"}
    assert body["maximums"]["time"] == {"set": True, "infinite": True, "number": 0}
    assert body["partition"] == {"exclusive": "NO", "oversubscribe": "FORCE:2", "state": ["UP"]}
    # Every flag key is sent: YES as the flag, the others cleared (26.05.5 keeps what it is
    # not sent, so a key removed from config must be sent at its default).
    assert body["flags"] == [
        "DEFAULT",
        "HIDDEN_CLEAR",
        "LLN_CLEAR",
        "NO_ROOT_CLEAR",
        "REQ_RESV_CLEAR",
        "ROOT_ONLY_CLEAR",
    ]
    assert body["accounts"] == {"allowed": "ALL", "deny": ""}
    assert body["priority"] == {"job_factor": 1, "tier": 1}
    assert body["minimums"] == {"nodes": 1}
    # One memory value per pair: reset through *PerNode only when neither key is set.
    assert body["defaults"] == {
        "partition_memory_per_node": {"set": True, "infinite": False, "number": 0}
    }
    assert "defaults" not in body or "time" not in body["defaults"]  # NONE cannot be sent


def test_exclusive_is_its_own_field_and_memory_pairs_are_not_both_sent() -> None:
    body = partition_body(
        PartitionDesc(
            name="gpu",
            settings=(
                ("DefMemPerCPU", "100"),
                ("MaxMemPerCPU", "INFINITE"),
                ("OverSubscribe", "EXCLUSIVE"),
            ),
        )
    )
    # 26.05.5: oversubscribe NO beside exclusive NODE clears the latter again.
    assert body["partition"] == {"exclusive": "NODE", "state": ["UP"]}
    assert body["defaults"] == {
        "partition_memory_per_cpu": {"set": True, "infinite": False, "number": 100}
    }
    assert body["maximums"]["partition_memory_per_cpu"]["infinite"] is True
    assert "partition_memory_per_node" not in body["maximums"]


# --- the rule ------------------------------------------------------------------------------


def pns(replicas: int = 2, stamp: str | None = None, **kw: object) -> KubeNodeSet:
    kw.setdefault("partition_enabled", True)
    annotations = {PART: stamp} if stamp is not None else {}
    return rs(replicas, annotations=annotations, **kw)


def part(*nodes: str, name: str = "gpu") -> SlurmPartition:
    return SlurmPartition(source="slurm:c1", key=name, cluster="c1", nodes=nodes)


PODS = (rp(0), sn(0), rp(1), sn(1))
STAMP = "gpu-0,gpu-1"


@dataclass(frozen=True)
class Case:
    name: str
    objs: tuple[Event, ...]
    ensure: str | None = None  # the stamp of the EnsureSlurmPartition, if one
    delete: bool = False
    events: tuple[str, ...] = ()
    note: str = ""


CASES = [
    Case("enabled, none in Slurm: ensure it on the pods' nodes", (pns(), *PODS), ensure=STAMP),
    Case("ensured, Slurm lists it so: nothing", (pns(stamp=STAMP), *PODS, part("gpu-0", "gpu-1"))),
    Case(
        "the config's keys are in the stamp, sorted; unknown ones are Warnings",
        (pns(partition_config="MaxTime=1:30:00 Bogus=1 Default=yes"), *PODS),
        ensure=f"{STAMP} Default=YES MaxTime=90",
        events=("PartitionConfigIgnored",),
    ),
    Case(
        "a node joined: ensure again",
        (pns(3, stamp=STAMP), *PODS, rp(2), sn(2), part("gpu-0", "gpu-1")),
        ensure="gpu-0,gpu-1,gpu-2",
    ),
    Case(
        "a pod whose Slurm node is not listed yet is not in the partition",
        (pns(3, stamp=STAMP), *PODS, rp(2), part("gpu-0", "gpu-1")),
    ),
    Case(
        "stamped but gone from Slurm (deleted by hand): made again",
        (pns(stamp=STAMP), *PODS),
        ensure=STAMP,
    ),
    Case(
        "a pending stamp (a crash before the partition was made): made",
        (pns(stamp="pending"), *PODS),
        ensure=STAMP,
    ),
    Case(
        "a partition of that name that is not ours: left alone, with a Warning",
        (pns(), *PODS, part("n1")),
        events=("PartitionNotOurs",),
        note="not made by slurmbridge",
    ),
    Case(
        "disabled with a stamp: delete it",
        (pns(stamp=STAMP, partition_enabled=False), *PODS, part("gpu-0", "gpu-1")),
        delete=True,
    ),
    Case(
        "disabled, never ours: nothing, even with a partition of that name",
        (pns(partition_enabled=False), *PODS, part("n1")),
    ),
    Case(
        "scaled to 0: an empty partition (1.x keeps its line with no nodes)",
        (pns(0, stamp=STAMP), part("gpu-0", "gpu-1")),
        ensure="",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_partition(case: Case) -> None:
    d = decision(*case.objs)
    ensures = [a for a in d.actions if isinstance(a, EnsureSlurmPartition)]
    deletes = [a for a in d.actions if isinstance(a, DeleteSlurmPartition)]
    assert [a.stamp for a in ensures] == ([case.ensure] if case.ensure is not None else [])
    assert [a.name for a in deletes] == (["gpu"] if case.delete else [])
    reasons = [
        a.reason for a in d.actions if isinstance(a, RecordEvent) and "Partition" in a.reason
    ]
    assert tuple(reasons) == case.events
    assert case.note in d.reason
    for a in ensures:
        assert a.name == "gpu" and a.cluster == "c1"
        assert ",".join(a.nodes) == a.stamp.split(" ")[0]


def test_no_partition_before_a_complete_slurm_listing() -> None:
    from reconcilers import nodeset
    from slurmbridge.runtime.projection import Projection
    from tests.unit.test_nodeset_update import CTX, KEY

    p = Projection()
    for i, o in enumerate((pns(), *PODS), 1):
        p.apply(o, i)
    d = nodeset.decide(nodeset.view(p, KEY, CTX))
    assert not [a for a in d.actions if isinstance(a, EnsureSlurmPartition)]
    assert "waits for a complete Slurm listing" in d.reason


DELETING = [
    (
        "with both stamps: the partition and the reservation go",
        {PART: STAMP, wellknown.ANNOTATION_NODESET_RESERVATION: "1 30 MAINT gpu-0"},
        (FIN,),
        ["DeleteSlurmPartition", "DeleteSlurmReservation"],
    ),
    (
        "a pending stamp: deleted too (it may exist)",
        {PART: "pending"},
        (FIN,),
        ["DeleteSlurmPartition"],
    ),
    ("our finalizer and no stamp: released", {}, (FIN,), ["ReleaseNodeSetFinalizer"]),
    ("no finalizer of ours: nothing", {}, ("other/finalizer",), []),
]


@pytest.mark.parametrize(
    ("annotations", "finalizers", "kinds"),
    [c[1:] for c in DELETING],
    ids=[c[0] for c in DELETING],
)
def test_a_deleted_nodeset_loses_what_it_made_in_slurm_first(
    annotations: dict[str, str], finalizers: tuple[str, ...], kinds: list[str]
) -> None:
    gone = rs(2, annotations=annotations, finalizers=finalizers, deleting=True)
    d = decision(gone, *PODS, part("gpu-0"))
    assert [type(a).__name__ for a in d.actions] == kinds
    for a in d.actions:
        assert isinstance(
            a, (DeleteSlurmPartition, DeleteSlurmReservation, ReleaseNodeSetFinalizer)
        )
        assert a.nodeset.uid == "ns-uid"


# --- REST ----------------------------------------------------------------------------------


def _client(version: str, handler: object) -> SlurmClient:
    transport = httpx.MockTransport(handler)  # type: ignore[arg-type]
    return SlurmClient(
        "http://slurm",
        api_version=version,
        transport=transport,
        token=TokenHolder("jwt-not-in-any-answer"),
    )


async def test_the_client_creates_updates_and_deletes_partitions() -> None:
    seen: list[tuple[str, str, bytes]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, request.content))
        if request.method == "DELETE" and request.url.path.endswith("/gone"):
            # Recorded from 26.05.5: deleting a partition that does not exist.
            body = {
                "errors": [
                    {
                        "description": "Unable to delete partition",
                        "error_number": 2000,
                        "error": "Invalid partition name specified",
                        "source": "slurm_delete_partition()",
                    }
                ]
            }
            return httpx.Response(422, json=body)
        if request.method == "DELETE" and request.url.path.endswith("/busy"):
            # Recorded from 26.05.5: a partition with a job in it.
            body = {
                "errors": [
                    {
                        "description": "Unable to delete partition",
                        "error_number": 2075,
                        "error": "Partition is in use",
                        "source": "slurm_delete_partition()",
                    }
                ]
            }
            return httpx.Response(422, json=body)
        if request.method == "POST" and b"zz9" in request.content:
            body = {
                "errors": [
                    {
                        "description": "Failed to create partition gpu with description at index 0",
                        "error_number": 2018,
                        "error": "Invalid node name specified",
                        "source": "slurm_create_partition",
                    }
                ]
            }
            return httpx.Response(422, json=body)
        return httpx.Response(200, json={"errors": [], "warnings": []})

    async with _client("v0.0.45", handler) as c:
        await c.put_partition(PartitionDesc(name="gpu", nodes=("gpu-0",)))
        with pytest.raises(NotFound, match="Invalid node name"):
            await c.put_partition(PartitionDesc(name="gpu", nodes=("zz9",)))
        assert await c.delete_partition("gpu") is True
        assert await c.delete_partition("gone") is False
        with pytest.raises(Conflict, match="Partition is in use"):  # retried: jobs end
            await c.delete_partition("busy")
    assert [(m, p) for m, p, _ in seen] == [
        ("POST", "/slurm/v0.0.45/partitions/"),
        ("POST", "/slurm/v0.0.45/partitions/"),
        ("DELETE", "/slurm/v0.0.45/partition/gpu"),
        ("DELETE", "/slurm/v0.0.45/partition/gone"),
        ("DELETE", "/slurm/v0.0.45/partition/busy"),
    ]
    sent = json.loads(seen[0][2])
    assert [p["name"] for p in sent["partitions"]] == ["gpu"]


@pytest.mark.parametrize("version", ["v0.0.44", "v0.0.42", "v0.0.38"])
async def test_versions_before_v0045_refuse_before_sending(version: str) -> None:
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        return httpx.Response(500)

    async with _client(version, handler) as c:
        with pytest.raises(Unsupported, match=r"v0\.0\.45"):
            await c.put_partition(PartitionDesc(name="gpu"))
        with pytest.raises(Unsupported, match=r"v0\.0\.45"):
            await c.delete_partition("gpu")
    assert sent == []
    with pytest.raises(Unsupported):
        codecs.get(version).encode_partition(PartitionDesc(name="gpu"))


def test_the_partition_spec_reaches_the_observation() -> None:
    from producers.kube.translate import nodeset_to_event
    from slurmbridge.kube.wire import RawNodeSet

    raw = msgspec.json.decode(
        json.dumps(
            {
                "apiVersion": "slinky.slurm.net/v1beta1",
                "kind": "NodeSet",
                "metadata": {
                    "name": "gpu",
                    "namespace": "slurm",
                    "uid": "u",
                    "finalizers": [FIN],
                    "annotations": {PART: STAMP, "unrelated": "x"},
                },
                "spec": {"partition": {"enabled": True, "config": "MaxTime=60"}},
            }
        ),
        type=RawNodeSet,
    )
    ev = nodeset_to_event(raw, producer="p", observed_at=0)
    assert (ev.partition_enabled, ev.partition_config) == (True, "MaxTime=60")
    assert ev.finalizers == (FIN,)
    assert ev.annotations == {PART: STAMP}
