"""Properties of every codec at the edges of slurmbridge:

* the log's codecs (``schemas/events.py``, ``schemas/actions.py``): every observation kind,
  every action inside an :class:`ActionRecord`, and :class:`DeadLetter` round trip through
  JSON; garbage bytes, arbitrary JSON and valid payloads with one field broken are either
  decoded into the right type or rejected with msgspec's typed errors (``DecodeError``, of
  which ``ValidationError`` is a subclass) — never ``KeyError``, ``TypeError``,
  ``AttributeError`` … (an unknown *kind* is the documented ``KeyError`` of
  :func:`events.decode_event`);
* the places that decode raw messages: ``Projection.feed`` (counts and skips what it cannot
  decode, never raises) and ``render.decode`` (``tail``, ``demo``, ``explain``: ValueError or
  msgspec's errors, as its docstring says);
* the slurmrestd codecs of every supported API version (``slurmbridge/slurm/codecs``):
  any body is decoded or rejected with the client's typed errors (:class:`SlurmError`:
  ``BadResponse``, or ``Unsupported`` for what a version cannot do), with and without the
  listing memo; a job-state list decoded through :class:`JobStateMemo` gives the states a
  fresh decode gives, and names every job whose state changed.

Generated values come from the Structs' own type information (``msgspec.inspect``), so a new
field or kind is covered without touching this file.
"""

from __future__ import annotations

import contextlib
import string
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from schemas import actions, events
from schemas.actions import ACTIONS, ActionRecord, DeadLetter
from schemas.events import KINDS
from slurmbridge.logview import render
from slurmbridge.runtime.projection import Projection
from slurmbridge.slurm import codecs
from slurmbridge.slurm.codecs import _dataparser, v0038
from slurmbridge.slurm.codecs._common import ItemMemo, JobStateMemo
from slurmbridge.slurm.errors import SlurmError
from slurmbridge.slurm.models import JobList, JobStates, NodeList, PartitionList, Ping

# --- strategies from msgspec type information -----------------------------------------------

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
#: Leaves for the slurmrestd shapes: hostlist-like text, so expansions are exercised.
HOSTLISTISH = st.text(alphabet="nx0123456789[]-, ", max_size=16)
TEXT = st.text(max_size=16)

#: Any JSON value (the "wrong shape" of a field or of a whole body).
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def typed(t: mi.Type, text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """A strategy for valid Python values of msgspec type ``t`` (Structs built as instances),
    with ``text`` for every string."""
    if isinstance(t, mi.StrType):
        return text
    if isinstance(t, mi.IntType):
        return INT64
    if isinstance(t, mi.FloatType):
        # JSON has no NaN or infinity (msgspec writes null); slurmbridge's floats are
        # durations and wall-clock times, always finite.
        return st.floats(allow_nan=False, allow_infinity=False)
    if isinstance(t, mi.BoolType):
        return st.booleans()
    if isinstance(t, mi.BytesType):
        return st.binary(max_size=16)
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.LiteralType):
        return st.sampled_from(t.values)
    if isinstance(t, mi.UnionType):
        return st.one_of([typed(x, text) for x in t.types])
    if isinstance(t, mi.DictType):
        return st.dictionaries(typed(t.key_type, text), typed(t.value_type, text), max_size=3)
    if isinstance(t, mi.VarTupleType):
        return st.lists(typed(t.item_type, text), max_size=3).map(tuple)
    if isinstance(t, mi.ListType):
        return st.lists(typed(t.item_type, text), max_size=3)
    if isinstance(t, mi.TupleType):
        return st.tuples(*(typed(x, text) for x in t.item_types))
    if isinstance(t, mi.StructType):
        fields = {f.name: typed(f.type, text) for f in t.fields}
        return st.fixed_dictionaries(fields).map(lambda kw, cls=t.cls: cls(**kw))
    if isinstance(t, mi.RawType):
        return json_values.map(lambda v: msgspec.Raw(msgspec.json.encode(v)))
    raise NotImplementedError(f"no strategy for {t!r}")


_CACHE: dict[tuple[Any, str], st.SearchStrategy[Any]] = {}


def instances(cls: Any, text: st.SearchStrategy[str] = TEXT) -> st.SearchStrategy[Any]:
    """Valid instances of Struct ``cls`` (or values of any msgspec-typed ``cls``)."""
    key = (cls, repr(text))
    if key not in _CACHE:
        _CACHE[key] = typed(mi.type_info(cls), text)
    return _CACHE[key]


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> bytes:
    """The JSON of ``value`` with one part, at any depth, dropped or replaced by any JSON
    value (the "wrong shape": a missing field, a string for a number, an object for a list)."""
    root: list[Any] = [msgspec.to_builtins(value)]
    holder: Any = root
    index: Any = 0
    while True:
        node = holder[index]
        if not isinstance(node, dict | list) or not node or draw(st.booleans()):
            break
        holder, index = (
            node,
            draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node)))),
        )
    if isinstance(holder, dict) and draw(st.booleans()):
        del holder[index]
    else:
        holder[index] = draw(json_values)
    return msgspec.json.encode(root[0])


garbage = st.one_of(
    st.binary(max_size=64),
    json_values.map(msgspec.json.encode),
    st.sampled_from([b"", b"{", b"null", b"[]", b"{}", b'{"kind":1}', b"\xff\xfe", b'"\\ud800"']),
)

EVENT_KINDS = sorted(KINDS)
ACTION_KINDS = sorted(ACTIONS)
#: Tests repeated per kind (ten observation kinds, 25 actions) get a quarter of the profile's
#: examples each, so the whole file stays within a few seconds.
PER_KIND = settings(max_examples=max(5, settings.default.max_examples // 4))


def records(action: st.SearchStrategy[Any]) -> st.SearchStrategy[ActionRecord]:
    """Action records around actions drawn from ``action``."""
    fields = {
        f.name: typed(f.type, TEXT)
        for f in mi.type_info(ActionRecord).fields  # type: ignore[attr-defined]
        if f.name != "action"
    }
    return st.fixed_dictionaries({**fields, "action": action}).map(lambda kw: ActionRecord(**kw))


def _check_event(kind: str, data: bytes) -> None:
    """Decoding either gives an instance of the kind or raises msgspec's typed error."""
    try:
        ev = events.decode_event(kind, data)
    except msgspec.DecodeError:  # ValidationError is a DecodeError
        return
    assert type(ev) is KINDS[kind]
    assert events.kind_of(ev) == kind


# --- observations --------------------------------------------------------------------------


@PER_KIND
@pytest.mark.parametrize("kind", EVENT_KINDS)
@given(data=st.data())
def test_event_round_trip(kind: str, data: st.DataObject) -> None:
    ev = data.draw(instances(KINDS[kind]))
    raw = events.encode_event(ev)
    assert msgspec.json.decode(raw)["kind"] == kind
    assert events.decode_event(kind, raw) == ev


@PER_KIND
@pytest.mark.parametrize("kind", EVENT_KINDS)
@given(data=st.data())
def test_event_decoder_rejects_garbage_with_typed_errors(kind: str, data: st.DataObject) -> None:
    ev = data.draw(instances(KINDS[kind]))
    _check_event(kind, data.draw(st.one_of(garbage, mutated(ev))))
    # A payload of another kind on this kind's subject is rejected by its tag.
    other = data.draw(instances(KINDS[data.draw(st.sampled_from(EVENT_KINDS))]))
    if type(other) is not KINDS[kind]:
        with pytest.raises(msgspec.ValidationError):
            events.decode_event(kind, events.encode_event(other))


@given(st.text(max_size=12).filter(lambda k: k not in KINDS), garbage)
def test_unknown_kind_is_the_documented_key_error(kind: str, body: bytes) -> None:
    with pytest.raises(KeyError):
        events.decode_event(kind, body)


# --- actions, records, dead letters ------------------------------------------------------------


@PER_KIND
@pytest.mark.parametrize("name", ACTION_KINDS)
@given(data=st.data())
def test_action_record_round_trip(name: str, data: st.DataObject) -> None:
    record = data.draw(records(instances(ACTIONS[name])))
    raw = actions.encode(record)
    back = actions.decode_record(raw)
    assert back == record
    assert actions.action_name(back.action) == name
    assert msgspec.json.decode(raw)["action"]["action"] == name


@given(instances(DeadLetter))
def test_dead_letter_round_trip(dlq: DeadLetter) -> None:
    assert actions.decode_dead_letter(actions.encode(dlq)) == dlq


@given(data=st.data())
def test_record_decoders_reject_garbage_with_typed_errors(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(ACTION_KINDS))
    record = data.draw(records(instances(ACTIONS[name])))
    dlq = data.draw(instances(DeadLetter))
    for decode, valid, cls in (
        (actions.decode_record, record, ActionRecord),
        (actions.decode_dead_letter, dlq, DeadLetter),
    ):
        body = data.draw(st.one_of(garbage, mutated(valid)))
        try:
            value = decode(body)
        except msgspec.DecodeError:
            continue
        assert type(value) is cls


#: Actions with a required field: ``{"action": name}`` alone cannot decode.
ACTIONS_WITH_REQUIRED = [
    name
    for name in ACTION_KINDS
    if any(f.required for f in mi.type_info(ACTIONS[name]).fields)  # type: ignore[attr-defined]
]


@given(data=st.data())
def test_record_with_an_unknown_or_broken_action_is_a_validation_error(
    data: st.DataObject,
) -> None:
    record = data.draw(records(st.sampled_from([None])))
    doc = msgspec.to_builtins(record)
    doc["action"] = data.draw(
        st.one_of(
            st.text(max_size=12).filter(lambda a: a not in ACTIONS).map(lambda a: {"action": a}),
            st.sampled_from(ACTIONS_WITH_REQUIRED).map(lambda a: {"action": a}),
            json_values.filter(lambda v: not isinstance(v, dict)),
        )
    )
    with pytest.raises(msgspec.ValidationError):
        actions.decode_record(msgspec.json.encode(doc))


# --- the places that decode raw messages ---------------------------------------------------------

subject_tokens = st.one_of(
    st.sampled_from(["KubeNode", "SlurmJob", "NoSuchKind", "", "*"]),
    st.text(alphabet=string.ascii_letters, max_size=8),
)


@given(
    kind=st.one_of(st.sampled_from(EVENT_KINDS), subject_tokens),
    source=st.sampled_from(["k8s", "slurm:c1"]),
    key=st.text(alphabet=string.ascii_letters + "~%", min_size=1, max_size=6),
    body=garbage,
    seq=st.integers(min_value=1, max_value=2**40),
)
def test_projection_feed_never_raises(
    kind: str, source: str, key: str, body: bytes, seq: int
) -> None:
    p = Projection()
    p.feed(f"bridge.obs.{source}.{kind}.{key}", body, seq)
    p.feed("bridge.obs.short", body, seq + 1)
    assert p.applied_seq == seq + 1, "every message advances the applied sequence"
    assert p.malformed >= 1  # the short subject at least


@given(data=st.data())
def test_projection_feed_applies_what_decodes(data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(EVENT_KINDS))
    ev = data.draw(instances(KINDS[kind]))
    p = Projection()
    p.feed(f"bridge.obs.x.{kind}.k", events.encode_event(ev), 7)
    assert p.malformed == 0
    assert p.applied_seq == 7
    entry = p.entry(kind, ev.source, ev.key)
    if ev.deleted:
        assert entry is None
        assert p.last_seq(kind, ev.source, ev.key) == 7
    else:
        assert entry is not None
        assert entry.event == ev


@given(
    family=st.sampled_from(["obs", "act", "dlq", "nope"]),
    kind=st.one_of(st.sampled_from(EVENT_KINDS), subject_tokens),
    body=garbage,
)
@example(family="obs", kind="KubeFuture", body=b"{}")  # a kind from a newer producer
def test_render_decode_raises_only_its_documented_errors(
    family: str, kind: str, body: bytes
) -> None:
    subject = f"bridge.{family}.src.{kind}.key" if family != "dlq" else "bridge.dlq.node_taint"
    try:
        value = render.decode(subject, body)
    except (ValueError, msgspec.DecodeError):
        return
    assert isinstance(value, events.Event | ActionRecord | DeadLetter)


# --- slurmrestd codecs --------------------------------------------------------------------------

CODEC_VERSIONS = sorted(codecs.CODECS)
_Submitted = msgspec.defstruct("Submitted", [("job_id", int | None, None)])
#: Each decode method: the body types it reads (v0.0.38's own and the data_parser versions'
#: private Structs) and the result types it documents.
METHODS: dict[str, tuple[tuple[Any, ...], tuple[type, ...]]] = {
    "decode_ping": ((v0038._PINGS.type, _dataparser._PINGS.type), (Ping,)),
    "decode_nodes": ((v0038._NODES.type, _dataparser._NODES.type), (NodeList, type(None))),
    "decode_partitions": (
        (v0038._PARTITIONS.type, _dataparser._PARTITIONS.type),
        (PartitionList, type(None)),
    ),
    "decode_jobs": ((_dataparser._JOBS.type,), (JobList, type(None))),
    "decode_job_states": ((_dataparser._JOB_STATES.type,), (JobStates, type(None))),
    "decode_submit": ((_Submitted,), (int,)),
}


def _decode_all_ways(method: str, body: bytes) -> None:
    """Decode ``body`` with every API version's codec (and through the listing memo where the
    method takes one): the result has the documented type, or the client's typed error is
    raised (BadResponse; Unsupported for what a version cannot do) — nothing else."""
    for version in CODEC_VERSIONS:
        decode = getattr(codecs.get(version), method)
        calls = [lambda decode=decode: decode(body)]
        if method in ("decode_nodes", "decode_jobs"):
            calls.append(lambda decode=decode: decode(body, ItemMemo()))
        if method == "decode_job_states":
            # a memo that has seen a listing, so the next one is compared entry by entry
            memo = JobStateMemo()
            with contextlib.suppress(SlurmError):  # Unsupported by v0.0.38
                decode(b'{"jobs": [{"job_id": "1", "state": ["PENDING"]}]}', memo)
            calls.append(lambda decode=decode, memo=memo: decode(body, memo))
        for call in calls:
            try:
                result = call()
            except SlurmError:
                continue
            assert isinstance(result, METHODS[method][1]), (version, result)


@pytest.mark.parametrize("method", sorted(METHODS))
@given(data=st.data())
def test_slurm_codecs_reject_garbage_with_typed_errors(method: str, data: st.DataObject) -> None:
    shape = data.draw(st.sampled_from(METHODS[method][0]))
    valid = data.draw(instances(shape, HOSTLISTISH) | instances(shape))
    body = data.draw(
        st.one_of(garbage, st.just(msgspec.json.encode(valid)), mutated(valid)), label="body"
    )
    _decode_all_ways(method, body)


@pytest.mark.parametrize(
    ("method", "body"),
    [
        ("decode_jobs", b'{"jobs":[{"job_id":1,"nodes":"n[1-"}]}'),
        ("decode_jobs", b'{"jobs":[{"job_id":1,"nodes":"n1","excluded_nodes":"n[3-1]"}]}'),
        ("decode_partitions", b'{"partitions":[{"name":"p","nodes":"n[0-99999999]"}]}'),
        ("decode_partitions", b'{"partitions":[{"name":"p","nodes":{"configured":"n[a]"}}]}'),
    ],
)
def test_slurm_codecs_reject_malformed_hostlists(method: str, body: bytes) -> None:
    """Bodies the generator found: a hostlist Slurm would never print is a bad response, not
    a ``HostlistError`` escaping the codec (the poller survives only SlurmError: anything
    else loses the whole poll, ping included)."""
    _decode_all_ways(method, body)


#: jobs/state entries: a job id, maybe an array task or heterogeneous component suffix.
_STATE_IDS = st.integers(1, 12)
_STATE_SUFFIXES = st.sampled_from(["", "_0", "_1", "_7", "+1"])
_STATES = st.sampled_from([["PENDING"], ["RUNNING"], ["RUNNING", "COMPLETING"], ["CANCELLED"]])


@st.composite
def _state_listing(draw: st.DrawFn) -> list[dict[str, object]]:
    """One jobs/state answer as a data_parser renders it: each job's entries (a pending
    array's expanded tasks) carry that job's one state."""
    states = draw(st.dictionaries(_STATE_IDS, _STATES, max_size=8))
    entries = [
        {"job_id": f"{job}{suffix}", "state": state}
        for job, state in states.items()
        for suffix in draw(st.sets(_STATE_SUFFIXES, min_size=1, max_size=3))
    ]
    return draw(st.permutations(entries))


@given(listings=st.lists(_state_listing(), min_size=1, max_size=6))
def test_job_state_memo_agrees_with_a_fresh_decode(listings: list[list[dict[str, object]]]) -> None:
    codec = codecs.get("v0.0.44")
    memo = JobStateMemo()
    before: dict[str, tuple[str, ...]] | None = None
    for listing in listings:
        body = msgspec.json.encode({"jobs": listing})
        fresh = codec.decode_job_states(body)
        remembered = codec.decode_job_states(body, memo)
        assert fresh is not None and remembered is not None
        assert remembered.states == fresh.states
        if before is None:
            assert remembered.changed is None
        else:
            assert remembered.changed is not None
            moved = {
                k
                for k in before.keys() | fresh.states.keys()
                if before.get(k) != fresh.states.get(k)
            }
            assert moved <= remembered.changed
        before = dict(fresh.states)
