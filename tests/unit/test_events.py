"""Event encoding, per-kind decoding, tombstones and the checked-in JSON Schema."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from schemas import events
from schemas.events import KubeNode, SlurmNode, SlurmPartition, SlurmPing, Taint
from schemas.export import json_schemas, render

SAMPLES = [
    KubeNode(
        source="k8s",
        key="n1.example.com",
        version="12",
        labels={"a": "b"},
        taints=(Taint(key="k", value="v", effect="NoExecute"),),
        unschedulable=True,
    ),
    KubeNode(source="k8s", key="gone", op="deleted", version="13"),
    SlurmNode(source="slurm:c", key="n1", cluster="c", state=("IDLE", "DRAIN"), reason="x"),
    SlurmPartition(source="slurm:c", key="batch", cluster="c", nodes=("n1", "n2")),
    SlurmPing(source="slurm:c", key="c", cluster="c", responding=True),
]


@pytest.mark.parametrize("ev", SAMPLES, ids=lambda e: f"{events.kind_of(e)}-{e.key}")
def test_round_trip_per_kind(ev: events.Event) -> None:
    data = events.encode_event(ev)
    back = events.decode_event(events.kind_of(ev), data)
    assert back == ev
    assert msgspec.json.decode(data)["kind"] == events.kind_of(ev)


def test_per_kind_decoder_rejects_other_tags() -> None:
    data = events.encode_event(SAMPLES[2])
    with pytest.raises(msgspec.ValidationError):
        events.decode_event("KubeNode", data)


def test_unknown_kind_is_keyerror() -> None:
    with pytest.raises(KeyError):
        events.decode_event("Nope", b"{}")


@pytest.mark.parametrize(
    "bad", [b"", b"{", b"[]", b'{"kind":"KubeNode"}', b'{"kind":"KubeNode","source":1,"key":"n"}']
)
def test_garbage_is_rejected(bad: bytes) -> None:
    with pytest.raises((msgspec.DecodeError, msgspec.ValidationError)):
        events.decode_event("KubeNode", bad)


def test_unknown_fields_from_newer_producers_are_ignored() -> None:
    data = b'{"kind":"SlurmPing","source":"slurm:c","key":"c","new_field":42}'
    ev = events.decode_event("SlurmPing", data)
    assert isinstance(ev, SlurmPing)
    assert ev.responding is False


def test_events_are_frozen() -> None:
    with pytest.raises(AttributeError):
        SAMPLES[0].key = "x"  # type: ignore[misc]


def test_checked_in_json_schema_is_current() -> None:
    folder = Path(events.__file__).parent / "jsonschema"
    wanted = {name: render(doc) for name, doc in json_schemas().items()}
    present = {p.name: p.read_text() for p in folder.glob("*.json")}
    assert present == wanted, "stale schemas/jsonschema: run `slurmbridge schema export`"


def test_slurm_node_helpers() -> None:
    n = SlurmNode(source="slurm:c", key="n", state=("ALLOCATED", "DRAIN"))
    assert n.base_state == "ALLOCATED"
    assert n.has("DRAIN")
    assert not n.has("IDLE")
    assert SlurmNode(source="s", key="n").base_state == ""


def _acyclic(t: msgspec.inspect.Type, path: str) -> list[str]:
    """Why ``t`` could hold a reference cycle (empty when it cannot): what ``gc=False`` on
    the event structs relies on."""
    mi = msgspec.inspect
    if isinstance(t, mi.StrType | mi.IntType | mi.BoolType | mi.FloatType | mi.NoneType):
        return []
    if isinstance(t, mi.LiteralType):
        return []
    if isinstance(t, mi.DictType):
        return _acyclic(t.key_type, path + "{key}") + _acyclic(t.value_type, path + "{value}")
    if isinstance(t, mi.VarTupleType):
        return _acyclic(t.item_type, path + "[]")
    if isinstance(t, mi.UnionType):
        return [why for member in t.types for why in _acyclic(member, path)]
    if isinstance(t, mi.StructType):
        untracked = [] if not t.cls.__struct_config__.gc else [f"{path}: {t.cls.__name__} gc=True"]
        return untracked + [why for f in t.fields for why in _acyclic(f.type, f"{path}.{f.name}")]
    return [f"{path}: {type(t).__name__} may hold a reference cycle"]


@pytest.mark.parametrize("cls", events.KINDS.values(), ids=lambda c: c.__name__)
def test_event_structs_are_untracked_and_cannot_form_cycles(cls: type[events.Event]) -> None:
    assert _acyclic(msgspec.inspect.type_info(cls), cls.__name__) == []


def test_decoded_events_are_not_tracked_by_the_collector() -> None:
    import gc

    for ev in SAMPLES:
        back = events.decode_event(events.kind_of(ev), events.encode_event(ev))
        assert not gc.is_tracked(back)
        for value in msgspec.structs.astuple(back):
            if isinstance(value, tuple) and value and isinstance(value[0], msgspec.Struct):
                assert not any(gc.is_tracked(v) for v in value)
