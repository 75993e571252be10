"""What placement reads of its triggers (``ReconcilerSpec.reads``; issue 30, items 2 and 4):
a node's usage changing only by the pods of our own Slurm allocations triggers no decide, as
the pending groups a usage change re-decides ignore those pods (Slinky slurm-bridge 1.3
eligibility.go); a node's change re-decides only the pending jobs of its partitions."""

from __future__ import annotations

from reconcilers import placement
from reconcilers.base import Context
from schemas.events import (
    Event,
    HostPort,
    KubeNode,
    KubeNodeUsage,
    KubePod,
    PeerPod,
    PodAffinityTerm,
    SlurmJob,
    SlurmPartition,
)
from slurmbridge.runtime.projection import Projection

BASE = KubeNodeUsage(source="k8s", key="n1", cpu_millis=500, memory_bytes=1 << 20, pods=1)


def plus_ours(u: KubeNodeUsage, cpu: int) -> KubeNodeUsage:
    """``u`` with one more pod of our allocations (``cpu`` millis, 1 GPU)."""
    extended = {**u.extended, "nvidia.com/gpu": u.extended.get("nvidia.com/gpu", 0) + 1}
    bridge = {**u.bridge_extended, "nvidia.com/gpu": u.bridge_extended.get("nvidia.com/gpu", 0) + 1}
    return KubeNodeUsage(
        source=u.source,
        key=u.key,
        cpu_millis=u.cpu_millis + cpu,
        memory_bytes=u.memory_bytes,
        pods=u.pods + 1,
        extended=extended,
        host_ports=u.host_ports,
        bridge_cpu_millis=u.bridge_cpu_millis + cpu,
        bridge_memory_bytes=u.bridge_memory_bytes,
        bridge_pods=u.bridge_pods + 1,
        bridge_extended=bridge,
    )


def test_a_pod_of_ours_binding_changes_nothing_placement_reads() -> None:
    assert placement.SPEC.reads[KubeNodeUsage] is placement.usage_read
    assert placement.usage_read(plus_ours(BASE, 1000)) == placement.usage_read(BASE)


def test_a_pod_of_someone_else_or_a_host_port_is_read() -> None:
    other = KubeNodeUsage(source="k8s", key="n1", cpu_millis=1500, memory_bytes=1 << 20, pods=2)
    assert placement.usage_read(other) != placement.usage_read(BASE)
    port = KubeNodeUsage(
        source="k8s",
        key="n1",
        cpu_millis=500,
        memory_bytes=1 << 20,
        pods=1,
        host_ports=(HostPort(port=8080, protocol="TCP"),),
    )
    assert placement.usage_read(port) != placement.usage_read(BASE)


def _pending(job_id: int, partition: str, group: str) -> SlurmJob:
    return SlurmJob(
        source="slurm:c1",
        key=str(job_id),
        job_id=job_id,
        cluster="c1",
        partition=partition,
        state=("PENDING",),
        comment=f"slurmbridge:default/Pod:{group}:uid-{group}",
    )


def test_a_node_changing_re_decides_only_the_pending_jobs_of_its_partitions() -> None:
    store = Projection()
    objs = [
        SlurmPartition(source="slurm:c1", key="gpu", cluster="c1", nodes=("n1", "n2")),
        SlurmPartition(source="slurm:c1", key="batch", cluster="c1", nodes=("n1", "n2", "n3")),
        KubeNode(source="k8s", key="n1"),
        KubeNode(source="k8s", key="n3"),
        KubeNode(source="k8s", key="edge"),
        *(_pending(100 + i, "gpu", f"q{i}") for i in range(3)),
        _pending(200, "batch", "b0"),
    ]
    for seq, ev in enumerate(objs, 1):
        store.apply(ev, seq)
    ctx = Context(scheduler_name="slurm-bridge-scheduler", cluster="c1")
    keys = placement.SPEC.keys_of

    def groups(ev: Event) -> list[str]:
        return [k.rsplit(":", 1)[1] for k in keys(ev, store, ctx)]

    assert groups(KubeNodeUsage(source="k8s", key="n3")) == ["b0"], "n3 is in batch only"
    assert groups(KubeNodeUsage(source="k8s", key="n1")) == ["b0", "q0", "q1", "q2"]
    assert groups(KubeNode(source="k8s", key="edge")) == [], "in no partition"


def _usage(*peers: PeerPod, cpu: int = 500) -> KubeNodeUsage:
    return KubeNodeUsage(
        source="k8s", key="n1", cpu_millis=cpu, memory_bytes=1 << 20, pods=1, peers=peers
    )


def _peers_world() -> Projection:
    """Partition gpu (n1) with two pending groups: q-plain's pod asks for no pod affinity,
    q-near's for pods labelled app=db on its node."""
    store = Projection()
    near = PodAffinityTerm(match_labels={"app": "db"}, topology_key="kubernetes.io/hostname")
    objs: list[Event] = [
        SlurmPartition(source="slurm:c1", key="gpu", cluster="c1", nodes=("n1",)),
        KubeNode(source="k8s", key="n1"),
        _pending(300, "gpu", "q-plain"),
        _pending(301, "gpu", "q-near"),
        KubePod(
            source="k8s",
            key="default/q-plain",
            namespace="default",
            name="q-plain",
            uid="uid-q-plain",
            scheduler_name=SCHED,
        ),
        KubePod(
            source="k8s",
            key="default/q-near",
            namespace="default",
            name="q-near",
            uid="uid-q-near",
            scheduler_name=SCHED,
            pod_affinity=(near,),
        ),
    ]
    for seq, ev in enumerate(objs, 1):
        store.apply(ev, seq)
    return store


SCHED = "slurm-bridge-scheduler"


def test_a_node_s_peers_changing_re_decides_only_groups_asking_for_pod_affinity() -> None:
    """Issue 30, item 2: a pod binding on a node or leaving it changes the node's peers
    (InterPodAffinity); that moves only the pending groups with pod (anti-)affinity terms.
    Resources, host ports, or a peer's required anti-affinity (which every pod must
    respect) move every pending group of the node's partitions."""
    store = _peers_world()
    ctx = Context(scheduler_name=SCHED, cluster="c1")
    read = placement.usage_read

    def groups(before: KubeNodeUsage, after: KubeNodeUsage) -> list[str]:
        keys = placement.SPEC.keys_of(after, store, ctx, parts=(read(before), read(after)))
        return [k.rsplit(":", 1)[1] for k in keys]

    web = PeerPod(namespace="default", labels={"app": "web"})
    db = PeerPod(namespace="default", labels={"app": "db"})
    shy = PeerPod(
        namespace="default",
        labels={"app": "shy"},
        anti_affinity=(PodAffinityTerm(match_labels={"app": "web"}, topology_key="zone"),),
    )
    assert groups(_usage(web), _usage(web, db)) == ["q-near"]
    assert groups(_usage(web, db), _usage(web)) == ["q-near"]
    assert groups(_usage(web), _usage(web, shy)) == ["q-near", "q-plain"]
    assert groups(_usage(web), _usage(web, cpu=900)) == ["q-near", "q-plain"]
    # Without the part read before (a worker's start, a redelivery): every pending group.
    assert [k.rsplit(":", 1)[1] for k in placement.SPEC.keys_of(_usage(web), store, ctx)] == [
        "q-near",
        "q-plain",
    ]
