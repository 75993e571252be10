"""The projection's memory savings keep its answers: canonical values and lean indexes (issue 7).

:meth:`Projection.feed` shares the values events repeat (:mod:`slurmbridge.runtime.intern`), and the
``by_label`` / ``by_field`` indexes store a lone ``(source, key)`` without a set. These tests
check that what is stored equals what was decoded, that equal values are shared, that the
caches stay bounded, and that the indexes answer exactly as a scan would.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import events, subjects
from schemas.events import KubePod, OwnerRef, PodCondition, SlurmJob
from slurmbridge.runtime.intern import BoundedCache, Canonicalizer
from slurmbridge.runtime.projection import Projection
from tests.unit.test_properties_codecs import EVENT_KINDS, KINDS, instances


def pod(i: int, *, job: str = "train", ns: str = "team-a", **kw: Any) -> KubePod:
    fields: dict[str, Any] = {
        "source": "k8s",
        "key": f"{ns}/{job}-{i}",
        "observed_at": 1_700_000_000_000_000_000 + i,
        "version": str(41_000_000 + i),
        "producer": "slurmbridge-7d9f6c5b8-x2q7w-1000",
        "uid": f"uid-{job}-{i}",
        "namespace": ns,
        "name": f"{job}-{i}",
        "phase": "Running",
        "node_name": f"node{i % 3:05d}",
        "scheduler_name": "slurm-bridge-scheduler",
        "labels": {
            "batch.kubernetes.io/controller-uid": f"uid-of-job-{job}",
            "batch.kubernetes.io/job-completion-index": str(i),
            "batch.kubernetes.io/job-name": job,
        },
        "annotations": {"slinky.slurm.net/slurm-node": f"node{i % 3:05d}"},
        "finalizers": ("batch.kubernetes.io/job-tracking", "scheduler.slinky.slurm.net/fin"),
        "cpu_millis": 4000,
        "memory_bytes": 16 * 2**30,
        "owner": OwnerRef(api_version="batch/v1", kind="Job", name=job, uid=f"uid-of-job-{job}"),
        "conditions": (PodCondition(type="PodScheduled", status="True"),),
        "tolerations": ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"),
        "created_at": 1_700_000_000,
    }
    fields.update(kw)
    return KubePod(**fields)


def feed(p: Projection, ev: events.Event, seq: int) -> None:
    """As a worker gets it: encoded, then decoded by the projection."""
    kind = events.kind_of(ev)
    p.feed(subjects.obs_subject(ev.source, kind, ev.key), events.encode_event(ev), seq)


def stored(p: Projection, ev: events.Event) -> Any:
    entry = p.entry(events.kind_of(ev), ev.source, ev.key)
    assert entry is not None
    return entry.event


# --- canonical values ------------------------------------------------------------------------


def test_fed_events_equal_the_decoded_ones_and_share_repeated_values() -> None:
    p = Projection()
    a, b = pod(0), pod(1)
    feed(p, a, 1)
    feed(p, b, 2)
    sa, sb = stored(p, a), stored(p, b)
    assert (sa, sb) == (a, b)
    assert events.encode_event(sa) == events.encode_event(a)
    # Equal values of two pods are one object: label keys and values, owner, tuples, strings.
    for (ka, va), (kb, vb) in zip(sa.labels.items(), sb.labels.items(), strict=True):
        assert ka is kb
        if va == vb:
            assert va is vb
    assert sa.labels["batch.kubernetes.io/job-name"] is sb.labels["batch.kubernetes.io/job-name"]
    assert sa.owner is sb.owner
    assert sa.owner.uid is sa.labels["batch.kubernetes.io/controller-uid"]
    for field in ("finalizers", "conditions", "tolerations", "phase", "producer", "source"):
        assert getattr(sa, field) is getattr(sb, field), field
    assert sa.memory_bytes is sb.memory_bytes
    assert sa.created_at is sb.created_at
    # Unique fields are left alone (not cached), and dicts are never shared (mutable).
    assert sa.labels is not sb.labels
    assert sa.annotations is not sb.annotations


def test_slurm_jobs_share_states_and_node_names_not_node_lists() -> None:
    p = Projection()
    jobs = [
        SlurmJob(
            source="slurm:c1",
            key=str(i),
            job_id=i,
            cluster="c1",
            state=("RUNNING",),
            partition="batch",
            nodes=(f"n{i}", "n9"),
            user_id=1000,
        )
        for i in range(1, 3)
    ]
    for seq, job in enumerate(jobs, 1):
        feed(p, job, seq)
    a, b = (stored(p, j) for j in jobs)
    assert (a, b) == tuple(jobs)
    assert a.state is b.state and a.partition is b.partition and a.user_id is b.user_id
    assert a.nodes[1] is b.nodes[1]
    assert a.nodes is not b.nodes


@settings(max_examples=60)
@given(data=st.data())
def test_canonical_events_equal_decoded_ones_of_every_kind(data: st.DataObject) -> None:
    """One canonicalizer over many random events: each one still equals its decoding."""
    c = Canonicalizer(limit=4)  # small, so generations turn over during the example
    for _ in range(6):
        kind = data.draw(st.sampled_from(EVENT_KINDS))
        ev = data.draw(instances(KINDS[kind]))
        body = events.encode_event(ev)
        canon = c.event(events.decode_event(kind, body))
        assert canon == events.decode_event(kind, body) == ev
        assert events.encode_event(canon) == body


# --- bounded caches --------------------------------------------------------------------------


def test_cache_stays_bounded_and_keeps_what_is_in_use() -> None:
    cache = BoundedCache(limit=10)
    hot = "".join(["h", "ot"])
    assert cache.get(hot) is hot
    for i in range(1_000):
        value = f"value-{i}"
        assert cache.get(value) is value
        assert cache.get("".join(["h", "ot"])) is hot  # used all along: survives every turnover
        assert len(cache) <= 20
    cache.clear()
    assert len(cache) == 0


def test_canonicalizer_caches_stay_bounded_under_churn() -> None:
    c = Canonicalizer(limit=16)
    for i in range(2_000):
        ev = pod(i, job=f"job-{i}", ns=f"ns-{i}", cpu_millis=1000 + i, tolerations=(f"t{i}",))
        decoded = events.decode_event("KubePod", events.encode_event(ev))
        assert c.event(decoded) == ev
        assert c.cached() <= 3 * 2 * 16


# --- indexes ---------------------------------------------------------------------------------


def index_of(p: Projection, kind: type[events.Event], label: str) -> dict[str, Any]:
    return p._label_index[(kind.__struct_config__.tag, label)]  # type: ignore[index]


def test_unique_field_index_promotes_to_a_set_and_back() -> None:
    p = Projection()
    feed(p, pod(1, ns="a"), 1)
    assert [x.key for x in p.by_field(KubePod, "name", "train-1")] == ["a/train-1"]
    index = index_of(p, KubePod, ".name")
    assert index["train-1"] == ("k8s", "a/train-1")  # a lone member: no set
    feed(p, pod(1, ns="b"), 2)  # the same name in another namespace
    assert index["train-1"] == {("k8s", "a/train-1"), ("k8s", "b/train-1")}
    assert [x.key for x in p.by_field(KubePod, "name", "train-1")] == ["a/train-1", "b/train-1"]
    feed(p, events.KubePod(source="k8s", key="a/train-1", op="deleted"), 3)
    assert index["train-1"] == ("k8s", "b/train-1")  # back to a lone member
    assert [x.key for x in p.by_field(KubePod, "name", "train-1")] == ["b/train-1"]
    feed(p, pod(1, ns="b", name="renamed"), 4)
    assert "train-1" not in index
    assert list(p.by_field(KubePod, "name", "train-1")) == []
    assert [x.key for x in p.by_field(KubePod, "name", "renamed")] == ["b/train-1"]


def test_a_set_of_members_is_sorted_once_until_one_joins_or_leaves() -> None:
    """Issue 30: placement's queue place reads every pending job of a partition at each
    decide; the index keeps their sorted order until the set changes."""
    p = Projection()
    for i, ns in enumerate(("c", "a", "b"), 1):
        feed(p, pod(1, ns=ns), i)
    keys = [x.key for x in p.by_field(KubePod, "name", "train-1")]
    assert keys == ["a/train-1", "b/train-1", "c/train-1"]
    cached = p._sorted[("KubePod", ".name", "train-1")]
    assert [x.key for x in p.by_field(KubePod, "name", "train-1")] == keys
    assert p._sorted[("KubePod", ".name", "train-1")] is cached  # not sorted again
    feed(p, pod(1, ns="0"), 4)
    assert [x.key for x in p.by_field(KubePod, "name", "train-1")] == ["0/train-1", *keys]
    feed(p, events.KubePod(source="k8s", key="b/train-1", op="deleted"), 5)
    assert [x.key for x in p.by_field(KubePod, "name", "train-1")] == [
        "0/train-1",
        "a/train-1",
        "c/train-1",
    ]
    feed(p, pod(1, ns="c", name="renamed"), 6)  # leaves train-1 for renamed
    assert [x.key for x in p.by_field(KubePod, "name", "train-1")] == ["0/train-1", "a/train-1"]


def test_indexes_of_a_kind_share_one_ref_per_object() -> None:
    p = Projection()
    for i in range(3):
        feed(p, pod(i), i + 1)
    p.by_field(KubePod, "name", "x")
    p.by_label(KubePod, "batch.kubernetes.io/job-name", "x")
    by_name = index_of(p, KubePod, ".name")["train-0"]
    by_job = index_of(p, KubePod, "batch.kubernetes.io/job-name")["train"]
    assert any(ref is by_name for ref in by_job)
    feed(p, pod(0, phase="Succeeded"), 9)  # a new version keeps the object's ref
    entry = p.entry("KubePod", "k8s", "team-a/train-0")
    assert entry is not None and entry.ref is by_name


OPS = st.lists(
    st.tuples(
        st.sampled_from(["k8s", "k8s-2"]),  # source
        st.sampled_from(["a", "b", "c", "d"]),  # key
        st.one_of(st.none(), st.sampled_from(["x", "y", ""])),  # None: a tombstone
        st.sampled_from(["x", "y"]),  # the label's value
    ),
    max_size=30,
)


@given(ops=OPS, build_at=st.integers(min_value=0, max_value=30))
def test_indexes_answer_as_a_scan_would(
    ops: list[tuple[str, str, str | None, str]], build_at: int
) -> None:
    """Adds, changes and tombstones, with the indexes built before, during or after them."""
    p = Projection()
    live: dict[tuple[str, str], KubePod] = {}

    def check() -> None:
        for value in ("x", "y", "", "z"):
            by_name = [ev for (_, _), ev in sorted(live.items()) if ev.name == value]
            by_label = [ev for (_, _), ev in sorted(live.items()) if ev.labels.get("app") == value]
            assert list(p.by_field(KubePod, "name", value)) == by_name
            assert list(p.by_label(KubePod, "app", value)) == by_label
        for index in (index_of(p, KubePod, ".name"), index_of(p, KubePod, "app")):
            for members in index.values():  # a lone ref, or a set of two or more
                assert isinstance(members, tuple) or len(members) >= 2

    for seq, (source, key, name, app) in enumerate(ops, 1):
        if seq == build_at:
            check()
        if name is None:
            feed(p, events.KubePod(source=source, key=key, op="deleted"), seq)
            live.pop((source, key), None)
        else:
            ev = events.KubePod(source=source, key=key, name=name, labels={"app": app})
            feed(p, ev, seq)
            live[(source, key)] = ev
    check()
