"""Table-driven tests of node_register: the node_conf line and every rule."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import pytest

from reconcilers import node_register as nr
from reconcilers import slurm_drain
from reconcilers.base import Context
from schemas import wellknown
from schemas.actions import (
    CreateSlurmNode,
    DeleteSlurmNode,
    DrainSlurmNode,
    RecordEvent,
    SetNodeCondition,
    UndrainSlurmNode,
    UpdateSlurmNodeFeatures,
    UpdateSlurmNodeTopology,
)
from schemas.events import (
    Event,
    KubeNode,
    NodeCondition,
    SlurmNode,
    SlurmPartition,
    SlurmPing,
)
from slurmbridge.runtime.projection import Projection

CTX = Context(scheduler_name="s", cluster="c1")
GiB = 1024**3
EXT = {wellknown.LABEL_EXTERNAL_NODE: "true"}
PARTS = wellknown.ANNOTATION_EXTERNAL_NODE_PARTITIONS
REMOVE = wellknown.external_removal_reason("k1")
RESIZE = wellknown.external_resize_reason("k1")


def kn(
    name: str = "k1",
    *,
    labels: dict[str, str] | None = None,
    parts: str | None = "batch",
    cpu: int = 8000,
    mem: int = 16 * GiB,
    gpus: int = 0,
    topo: str = "",
    cond: NodeCondition | None = None,
) -> KubeNode:
    ann = {} if parts is None else {PARTS: parts}
    if topo:
        ann[wellknown.ANNOTATION_TOPOLOGY_SPEC] = topo
    return KubeNode(
        source="k8s",
        key=name,
        uid="u",
        labels=EXT if labels is None else labels,
        annotations=ann,
        cpu_millis=cpu,
        memory_bytes=mem,
        gpus=gpus,
        conditions=(cond,) if cond else (),
    )


def sn(
    name: str = "k1",
    *state: str,
    reason: str = "",
    cpus: int = 8,
    mem: int = 16384,
    gres: str = "",
    features: tuple[str, ...] = (wellknown.FEATURE_GRES_COMPATIBLE, "batch"),
) -> SlurmNode:
    return SlurmNode(
        source="slurm:c1",
        key=name,
        cluster="c1",
        state=state or ("EXTERNAL",),
        reason=reason,
        cpus=cpus,
        real_memory=mem,
        gres=gres,
        features=features,
    )


def part(name: str) -> SlurmPartition:
    return SlurmPartition(source="slurm:c1", key=name, cluster="c1")


def sn_static() -> SlurmNode:
    """k1 as slurm.conf defines it: no EXTERNAL flag, its own CPUs and no features."""
    return sn("k1", "IDLE", cpus=4, features=())


REGISTERED = NodeCondition(
    type=wellknown.CONDITION_SLURM_REGISTERED,
    status="True",
    reason="Registered",
    message="Slurm node k1 is registered",
)


@pytest.mark.parametrize(
    ("node", "conf"),
    [
        (
            kn(),
            "NodeName=k1 CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=16384 "
            "State=External "
            "Feature=slurm_bridge_gres_compatible,batch",
        ),
        (
            kn(cpu=3500, mem=1000 * 1024**2 + 5),
            "NodeName=k1 CPUs=3 Sockets=1 CoresPerSocket=3 "
            "ThreadsPerCore=1 RealMemory=1000 State=External "
            "Feature=slurm_bridge_gres_compatible,batch",
        ),
        (
            kn(cpu=500, parts=None),
            "NodeName=k1 CPUs=1 Sockets=1 CoresPerSocket=1 "
            "ThreadsPerCore=1 RealMemory=16384 State=External "
            "Feature=slurm_bridge_gres_compatible",
        ),
        (
            kn(parts=" gpu , ,batch,, "),
            "NodeName=k1 CPUs=8 Sockets=1 CoresPerSocket=8 "
            "ThreadsPerCore=1 RealMemory=16384 State=External "
            "Feature=slurm_bridge_gres_compatible,gpu,batch",
        ),
        (
            kn(gpus=4, topo="switch:s1"),
            "NodeName=k1 CPUs=8 Sockets=1 CoresPerSocket=8 "
            "ThreadsPerCore=1 RealMemory=16384 State=External "
            "Feature=slurm_bridge_gres_compatible,batch Topology=switch:s1 "
            "Gres=gpu:4",
        ),
        (
            kn(labels={**EXT, wellknown.LABEL_SLURM_NODENAME: "slurm-7"}),
            "NodeName=slurm-7 CPUs=8 "
            "Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=16384 State=External "
            "Feature=slurm_bridge_gres_compatible,batch",
        ),
    ],
)
def test_node_conf(node: KubeNode, conf: str) -> None:
    assert nr.node_conf(nr.desired(node)) == conf


@dataclass(frozen=True)
class Case:
    name: str
    objs: tuple[Event, ...]
    want: list[str]
    check: dict[str, object] = field(default_factory=dict)


#: A complete listing of cluster c1 is in the log (its ping, published last, carries no error).
LISTED = SlurmPing(source="slurm:c1", key="c1", cluster="c1", responding=True)


def store(*objs: Event, listed: bool = True) -> Projection:
    p = Projection()
    for i, o in enumerate((*objs, LISTED) if listed else objs, 1):
        p.apply(o, i)
    return p


@pytest.mark.parametrize(
    "objs",
    [
        (),
        (SlurmPing(source="slurm:c1", key="c1", cluster="c1", error="cannot reach it"),),
    ],
    ids=["no-listing-yet", "last-poll-failed"],
)
def test_nothing_is_decided_before_a_complete_slurm_listing(objs: tuple[Event, ...]) -> None:
    """Issue 18 (2): before the first complete listing a labelled node got a new/node that
    Slurm refused with 2168 (it existed), or a false PartitionNotFound (recorded on 24.11)."""
    d = nr.decide(nr.view(store(kn(), *objs, listed=False), "k1", CTX))
    assert d.actions == ()
    assert d.requeue_after == nr.LISTING_WAIT_S


CASES = [
    Case(
        "labelled, partitions exist ⇒ create",
        (kn(), part("batch")),
        ["CreateSlurmNode", "RecordEvent", "RecordEvent"],
    ),
    Case(
        "labelled, partition missing ⇒ condition + warning, no Slurm call",
        (kn(parts="batch,gpu"), part("batch")),
        ["SetNodeCondition", "RecordEvent"],
    ),
    Case(
        "missing partition already reported ⇒ nothing",
        (
            kn(
                parts="gpu",
                cond=NodeCondition(
                    type=wellknown.CONDITION_SLURM_REGISTERED,
                    status="False",
                    reason="PartitionNotFound",
                    message="Slurm has no partition gpu: the node is not registered",
                ),
            ),
        ),
        [],
    ),
    Case(
        "registered and in step ⇒ condition only", (kn(), part("batch"), sn()), ["SetNodeCondition"]
    ),
    Case("registered, condition set ⇒ nothing", (kn(cond=REGISTERED), part("batch"), sn()), []),
    Case(
        # Issue 17 (8): a slurm.conf node labelled as external was drained, deleted (2028,
        # dead letter) and re-created.
        "labelled, but a static Slurm node of that name ⇒ refused with condition + warning",
        (kn(cpu=16000), part("batch"), sn_static()),
        # Still a node bridge jobs run on: it has no DRA device, so it gets the feature
        # (Slinky reconcileHybridNode).
        ["SetNodeCondition", "RecordEvent", "SetSlurmNodeFeature"],
    ),
    Case(
        # Real Slurm (26.05.5) keeps a dynamic node in the partitions it joined at creation
        # whatever its features become: only a new node moves.
        "partitions changed ⇒ drain to re-register",
        (kn(parts="batch,gpu", cond=REGISTERED), part("batch"), part("gpu"), sn()),
        ["DrainSlurmNode", "RecordEvent"],
    ),
    Case(
        # Issue 18 (10): an undrain under way is not "drained".
        "label removed, drained but undraining ⇒ wait",
        (
            kn(labels={}, parts=None),
            part("batch"),
            sn(
                "k1",
                "IDLE",
                "DRAIN",
                "UNDRAIN",
                "EXTERNAL",
                reason=wellknown.external_removal_reason("k1"),
            ),
        ),
        [],
    ),
    Case(
        "partitions changed, drained and idle ⇒ delete",
        (
            kn(parts="batch,gpu", cond=REGISTERED),
            part("batch"),
            part("gpu"),
            sn("k1", "IDLE", "DRAIN", reason=wellknown.external_repartition_reason("k1")),
        ),
        ["DeleteSlurmNode", "RecordEvent"],
    ),
    Case(
        "cpus changed ⇒ drain first",
        (kn(cpu=16000, cond=REGISTERED), part("batch"), sn()),
        ["DrainSlurmNode", "RecordEvent"],
    ),
    Case(
        "gpus changed ⇒ drain first",
        (kn(gpus=2, cond=REGISTERED), part("batch"), sn()),
        ["DrainSlurmNode", "RecordEvent"],
    ),
    Case(
        "resized, draining with jobs ⇒ wait",
        (kn(cpu=16000), part("batch"), sn("k1", "MIXED", "DRAIN", reason=RESIZE)),
        [],
    ),
    Case(
        "resized, drained idle ⇒ delete",
        (kn(cpu=16000), part("batch"), sn("k1", "EXTERNAL", "DRAIN", reason=RESIZE)),
        ["DeleteSlurmNode", "RecordEvent"],
    ),
    Case("label removed ⇒ drain", (kn(labels={}), sn()), ["DrainSlurmNode", "RecordEvent"]),
    Case(
        "label removed, busy ⇒ wait, never undrain",
        (kn(labels={}), sn("k1", "ALLOCATED", "DRAIN", reason=REMOVE)),
        [],
    ),
    Case(
        "label removed, completing ⇒ wait",
        (kn(labels={}), sn("k1", "IDLE", "DRAIN", "COMPLETING", reason=REMOVE)),
        [],
    ),
    Case(
        "label removed, drained idle ⇒ delete",
        (kn(labels={}), sn("k1", "IDLE", "DRAIN", reason=REMOVE)),
        ["DeleteSlurmNode", "RecordEvent"],
    ),
    Case(
        "label removed, admin drain ⇒ never delete",
        (kn(labels={}), sn("k1", "EXTERNAL", "DRAIN", reason="admin: broken")),
        [],
    ),
    Case("label false ⇒ not external", (kn(labels={wellknown.LABEL_EXTERNAL_NODE: "false"}),), []),
    Case(
        # Slinky 1.3 hybrid node: nothing to verify without DRA devices, so the feature every
        # bridge job requires goes on (and nothing else is touched).
        "not external, ordinary Slurm node ⇒ the feature only",
        (kn(labels={}), sn("k1", "IDLE", features=("batch",))),
        ["SetSlurmNodeFeature"],
    ),
    Case(
        "not external, ordinary Slurm node with the feature ⇒ nothing",
        (kn(labels={}), sn("k1", "IDLE")),
        [],
    ),
    Case(
        # Registered by an older slurmbridge, before the feature: it gets it in place.
        "registered without the feature ⇒ the feature only",
        (kn(cond=REGISTERED), part("batch"), sn(features=("batch",))),
        ["SetSlurmNodeFeature"],
    ),
    Case(
        "removal reversed before delete ⇒ undrain our drain",
        (kn(cond=REGISTERED), part("batch"), sn("k1", "EXTERNAL", "DRAIN", reason=REMOVE)),
        ["UndrainSlurmNode"],
    ),
    Case("kube node gone ⇒ nothing", (sn(),), []),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_decide(case: Case) -> None:
    decision = nr.decide(nr.view(store(*case.objs), "k1", CTX))
    assert [type(a).__name__ for a in decision.actions] == case.want, decision.reason
    for a in decision.actions:
        if isinstance(a, DrainSlurmNode):
            assert a.reason.startswith(wellknown.EXTERNAL_REASON_PREFIX)
        if isinstance(a, DeleteSlurmNode | UndrainSlurmNode):
            assert a.owned_prefixes == (wellknown.EXTERNAL_REASON_PREFIX,)
        if isinstance(a, CreateSlurmNode):
            assert a.node_conf.startswith("NodeName=k1 ")
        if isinstance(a, UpdateSlurmNodeFeatures):
            assert a.features == ("batch", "gpu")
        if isinstance(a, SetNodeCondition):
            assert a.type == wellknown.CONDITION_SLURM_REGISTERED


def test_a_topology_annotation_that_would_add_keys_is_refused_with_an_event() -> None:
    """The annotation goes into the node's slurm.conf line: a space would let it set any
    other key (here a Weight and a State)."""
    bad = kn(topo="default:s1 Weight=1 State=IDLE")
    d = nr.decide(nr.view(store(bad, part("batch")), "k1", CTX))
    assert not any(isinstance(a, CreateSlurmNode) for a in d.actions)
    warning = next(a for a in d.actions if isinstance(a, RecordEvent))
    assert warning.type == "Warning" and warning.reason == "InvalidAnnotation"
    assert wellknown.ANNOTATION_TOPOLOGY_SPEC in warning.message
    ok = nr.decide(nr.view(store(kn(topo="default:s1,block:b-2"), part("batch")), "k1", CTX))
    create = next(a for a in ok.actions if isinstance(a, CreateSlurmNode))
    assert create.node_conf.endswith("Topology=default:s1,block:b-2")


def test_create_announces_unsupported_once_as_a_warning() -> None:
    d = nr.decide(nr.view(store(kn(), part("batch")), "k1", CTX))
    events = [a for a in d.actions if isinstance(a, RecordEvent)]
    assert [(e.type, e.on) for e in events] == [("Normal", ("ok",)), ("Warning", ("unsupported",))]


def test_slurm_drain_never_undoes_a_removal_drain() -> None:
    """The flap: a busy external node being removed is not undrained by slurm_drain."""
    p = store(kn(labels={}), sn("k1", "ALLOCATED", "DRAIN", reason=REMOVE))
    assert slurm_drain.decide(slurm_drain.view(p, "k1", CTX)).actions == ()


def test_partition_change_wakes_waiting_external_nodes() -> None:
    p = store(
        kn("k1", parts="gpu"),
        kn("k2", labels={}, parts="gpu"),
        kn("k3", parts="gpu,x"),
        kn("k4", parts="batch"),
        kn("k5", parts="gpu"),
        sn("k5"),
    )
    # k2 is not external, k4 does not name gpu, k5 is registered already.
    assert sorted(nr.SPEC.keys_of(part("gpu"), p, CTX)) == ["k1", "k3"]
    assert (
        list(nr.SPEC.keys_of(SlurmPartition(source="slurm:x", key="gpu", cluster="x"), p, CTX))
        == []
    )


@pytest.mark.parametrize(
    ("annotation", "reported", "want"),
    [
        # Slinky updateNodeTopology: changed in place, cleared when the annotation goes
        ("topo1:b2", "topo1:b1", "topo1:b2"),
        ("", "topo1:b1", ""),
        ("topo1:b1", "", "topo1:b1"),
        # in step: nothing sent
        ("topo1:b1", "topo1:b1", None),
        ("", "", None),
        # the API version reports no topology (before v0.0.43): nothing to compare or send
        ("topo1:b1", None, None),
    ],
)
def test_an_external_nodes_topology_follows_its_annotation(
    annotation: str, reported: str | None, want: str | None
) -> None:
    """Issue 18 (11): the topology annotation is applied in place (no re-registration) and
    cleared when removed; an API version without ``node.topology`` is never updated (it
    would answer 200 and ignore ``topology_str``: a loop)."""
    node = msgspec.structs.replace(kn(topo=annotation), conditions=(REGISTERED,))
    slurm = msgspec.structs.replace(sn("k1", "IDLE", "EXTERNAL"), topology=reported)
    d = nr.decide(nr.view(store(node, slurm, part("batch")), "k1", CTX))
    updates = [a for a in d.actions if isinstance(a, UpdateSlurmNodeTopology)]
    assert not any(isinstance(a, (CreateSlurmNode, DrainSlurmNode)) for a in d.actions)
    if want is None:
        assert updates == [] and d.actions == ()
    else:
        assert updates == [UpdateSlurmNodeTopology(cluster="c1", node="k1", topology=want)]
        (event,) = [a for a in d.actions if isinstance(a, RecordEvent)]
        assert event.reason == "SlurmNodeTopology"


def _job_variants(s: SlurmNode) -> list[SlurmNode]:
    """``s`` as its jobs start and end: other running base states and ``alloc_cpus``."""
    running = ("IDLE", "ALLOCATED", "MIXED", "COMPLETING")
    states = [s.state]
    if s.state[:1] and s.state[0] in running:
        states = [(b, *s.state[1:]) for b in running]
    elif s.state:
        states += [("IDLE", *s.state), ("ALLOCATED", *s.state)]
    return [msgspec.structs.replace(s, state=st, alloc_cpus=a) for st in states for a in (0, 3)]


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if any(isinstance(o, SlurmNode) for o in c.objs)],
    ids=lambda c: c.name,
)
def test_what_the_node_reconcilers_read_of_a_slurm_node_decides(case: Case) -> None:
    """``ReconcilerSpec.reads`` is sound: Slurm nodes with equal parts get equal decisions
    (node_register, slurm_drain and node_taint), so skipping an unchanged part is a no-op."""
    from reconcilers import node_taint

    specs = (nr.SPEC, slurm_drain.SPEC, node_taint.SPEC)
    compared = 0
    for i, obj in enumerate(case.objs):
        if not isinstance(obj, SlurmNode):
            continue
        for variant in _job_variants(obj):
            objs = (*case.objs[:i], variant, *case.objs[i + 1 :])
            for spec in specs:
                read = spec.reads[SlurmNode]
                if read(variant) != read(obj):
                    continue
                want = spec.decide(spec.view(store(*case.objs), "k1", CTX))
                got = spec.decide(spec.view(store(*objs), "k1", CTX))
                assert got == want, (spec.name, variant.state, variant.alloc_cpus)
                compared += 1
    assert compared >= len(specs)  # at least the node itself with another alloc_cpus
