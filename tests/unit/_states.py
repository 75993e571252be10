"""Hypothesis strategies for generated store states, one family per group of reconcilers.

Each strategy draws a :class:`tests.unit._world.World` (the observed objects) and a key to
reconcile. The objects come from small pools of names that refer to each other (a Kubernetes
node and the Slurm node of the same name, a pod group and the job whose marker names it, a
NodeSet and its ``<name>-<ordinal>`` pods and Slurm nodes), so the interesting relations
appear often; the values mix the ordinary with the hostile (FQDN node names, an
administrator's drain, another cluster's objects, annotations that do not parse).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from reconcilers import _pods, autoscale, node_register
from reconcilers.base import Context
from schemas import wellknown
from schemas.events import (
    Event,
    KubeListed,
    KubeNode,
    KubePod,
    KubeScaler,
    KubeWorkload,
    NodeCondition,
    NodeSetStatus,
    OwnerRef,
    PodCondition,
    SlurmCluster,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmPing,
    Taint,
)
from schemas.subjects import KUBE_SOURCE, slurm_source
from tests.unit._pods import kube_nodeset
from tests.unit._world import World

CLUSTER = "c1"
SOURCE = slurm_source(CLUSTER)
#: Another Slurm cluster: its objects must never count for ``CLUSTER``.
OTHER = slurm_source("c2")
SCHED = "slurm-bridge-scheduler"
NOW = 100_000.0
CTX = Context(scheduler_name=SCHED, cluster=CLUSTER, now=NOW, stuck_pod_grace_s=300.0)

TAINT = wellknown.TAINT_MANAGED_NODE
NO_EXECUTE = wellknown.TAINT_MANAGED_NODE_EFFECT
FIN = wellknown.FINALIZER_SCHEDULER
JOBID = wellknown.LABEL_SLURM_JOBID
SLURM_NODE = wellknown.ANNOTATION_SLURM_NODE

BASE_STATES = ["IDLE", "ALLOCATED", "MIXED", "DOWN", "FUTURE"]
FLAGS = ["DRAIN", "EXTERNAL", "COMPLETING", "DYNAMIC_NORM", "NOT_RESPONDING"]


def world(objs: list[Event]) -> World:
    return World(objs, NOW)


def subset(pool: list[Any], *, min_size: int = 0) -> st.SearchStrategy[list[Any]]:
    return st.lists(st.sampled_from(pool), unique=True, min_size=min_size, max_size=len(pool))


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


# --- nodes: node_taint, slurm_drain, node_register ----------------------------------------

KUBE_NAMES = ["n0", "n1.example.com"]
SLURM_NAMES = ["n0", "n1.example.com", "s2"]
PARTITIONS = ["p1", "p2"]
NODE_REASONS = [
    "",
    "maintenance (an administrator's drain)",
    "slurm-bridge: some other reason of ours",
    wellknown.scale_in_drain_reason("slurm", "n0"),
    *(wellknown.cordon_drain_reason(k) for k in KUBE_NAMES),
    *(wellknown.external_removal_reason(k) for k in KUBE_NAMES),
    *(wellknown.external_resize_reason(k) for k in KUBE_NAMES),
]
TAINTS = [
    Taint(key=TAINT, value=SCHED, effect=NO_EXECUTE),
    Taint(key=TAINT, value="another-scheduler", effect=NO_EXECUTE),
    Taint(key=TAINT, value=SCHED, effect="NoSchedule"),
    Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule"),
]
REGISTERED = wellknown.CONDITION_SLURM_REGISTERED
NODE_CONDITIONS = [
    *(
        NodeCondition(
            type=REGISTERED,
            status="True",
            reason="Registered",
            message=f"Slurm node {n} is registered",
        )
        for n in SLURM_NAMES
    ),
    NodeCondition(type=REGISTERED, status="False", reason="PartitionNotFound", message="stale"),
]


@st.composite
def kube_node(draw: st.DrawFn, name: str) -> KubeNode:
    labels: dict[str, str] = {}
    if draw(st.booleans()):
        labels[wellknown.LABEL_SLURM_NODENAME] = draw(st.sampled_from(SLURM_NAMES))
    external = draw(st.sampled_from([None, "true", "true", "true", "false", "False", "", "yes"]))
    if external is not None:
        labels[wellknown.LABEL_EXTERNAL_NODE] = external
    annotations: dict[str, str] = {}
    parts = draw(maybe(st.lists(st.sampled_from(["p1", "p2", " p1 ", "", "p1", "p9"]), max_size=3)))
    if parts is not None:
        annotations[wellknown.ANNOTATION_EXTERNAL_NODE_PARTITIONS] = ",".join(parts)
    topology = draw(maybe(st.sampled_from(["", "block1"])))
    if topology is not None:
        annotations[wellknown.ANNOTATION_TOPOLOGY_SPEC] = topology
    return KubeNode(
        source=KUBE_SOURCE,
        key=name,
        uid=f"uid-{name}",
        labels=labels,
        annotations=annotations,
        unschedulable=draw(st.booleans()),
        taints=tuple(draw(subset(TAINTS))),
        ready=draw(st.booleans()),
        cpu_millis=draw(st.sampled_from([0, 999, 4000])),
        memory_bytes=draw(st.sampled_from([0, 2**30, 8 * 2**30 + 5])),
        gpus=draw(st.sampled_from([0, 2])),
        conditions=tuple(draw(st.lists(st.sampled_from(NODE_CONDITIONS), max_size=1))),
    )


@st.composite
def slurm_node(
    draw: st.DrawFn, name: str, source: str = SOURCE, reasons: list[str] = NODE_REASONS
) -> SlurmNode:
    flags = draw(subset(FLAGS))
    drained = "DRAIN" in flags
    return SlurmNode(
        source=source,
        key=name,
        cluster=source.removeprefix("slurm:"),
        state=(draw(st.sampled_from(BASE_STATES)), *flags),
        reason=draw(st.sampled_from(reasons)) if drained or draw(st.booleans()) else "",
        cpus=draw(st.sampled_from([1, 4, 0])),
        real_memory=draw(st.sampled_from([0, 1024, 8192])),
        gres=draw(st.sampled_from(["", "gpu:2"])),
        features=tuple(draw(subset(PARTITIONS))),
    )


@st.composite
def registered(draw: st.DrawFn, kube: KubeNode, source: str = SOURCE) -> SlurmNode:
    """The Slurm node ``kube`` maps to, as node_register would have created it (the same
    resources, its partitions as features, EXTERNAL) and then maybe drained by anyone."""
    d = node_register.desired(kube)
    flags = draw(subset(["EXTERNAL", "EXTERNAL", "DRAIN", "DYNAMIC_NORM"]))
    return SlurmNode(
        source=source,
        key=d.name,
        cluster=source.removeprefix("slurm:"),
        state=(draw(st.sampled_from(["IDLE", "ALLOCATED", "MIXED"])), *dict.fromkeys(flags)),
        reason=draw(st.sampled_from(NODE_REASONS)) if "DRAIN" in flags else "",
        cpus=d.cpus,
        real_memory=d.real_memory,
        gres=d.gres,
        features=d.partitions if draw(st.booleans()) else tuple(draw(subset(PARTITIONS))),
    )


@st.composite
def node_states(draw: st.DrawFn) -> tuple[World, str]:
    """Kubernetes nodes, Slurm nodes (of this cluster and another; some exactly as
    registered from a Kubernetes node), partitions; a node key."""
    kube = [draw(kube_node(n)) for n in draw(subset(KUBE_NAMES))]
    objs: list[Event] = list(kube)
    slurm: dict[str, SlurmNode] = {n: draw(slurm_node(n)) for n in draw(subset(SLURM_NAMES))}
    for k in kube:
        if draw(st.integers(min_value=0, max_value=2)):
            node = draw(registered(k))
            slurm[node.key] = node
    objs += slurm.values()
    objs += [draw(slurm_node(n, OTHER)) for n in draw(subset(SLURM_NAMES))]
    for source in (SOURCE, OTHER):
        objs += [
            SlurmPartition(source=source, key=p, cluster=source.removeprefix("slurm:"))
            for p in draw(subset(PARTITIONS, min_size=1 if source == SOURCE else 0))
        ]
    if draw(st.booleans()):
        objs.append(SlurmPing(source=SOURCE, key=CLUSTER, cluster=CLUSTER, responding=True))
        objs.append(KubeListed(source="k8s", key="pods", resource="pods"))
    return world(objs), draw(st.sampled_from(KUBE_NAMES))


# --- pods: placement, workload ---------------------------------------------------------------

NS = "ns"
JOB_GROUP = _pods.Group(namespace=NS, kind="Job", name="train")
SOLO_GROUP = _pods.Group(namespace=NS, kind="Pod", name="solo")
GROUP_KEYS = [JOB_GROUP.key, SOLO_GROUP.key]
JOB_IDS = [100, 101, 102]
MARKERS = [
    _pods.marker(JOB_GROUP, "uid-train"),
    _pods.marker(JOB_GROUP, "uid-train-before"),  # an earlier Job of that name
    _pods.marker(SOLO_GROUP, "uid-solo"),
    "someone else's job",
]
PREFIX = wellknown.ANNOTATION_SLURMJOB_PREFIX
#: Job annotations: the first value of each is valid (and more likely), the others not.
JOB_ANNOTATIONS = {
    "partition": ["p1", "p1", "p9", "", "p1,p2"],
    "mem-per-node": ["4Gi", "4Gi", "lots", "1" * 400, "0"],
    "timelimit": ["10", "1:30:00", "soon", "0"],
    "cpu-per-task": ["2", "2", "-1", "nan"],
    "min-nodes": ["1", "3"],
    "max-nodes": ["2", "1"],
    "gres": ["gpu:1", ""],
    "exclusive": ["true", "true", "maybe"],
}
POD_NODES = ["n0", "n1", "x9"]  # x9: a Slurm node without a Kubernetes node


@st.composite
def job_annotations(draw: st.DrawFn) -> dict[str, str]:
    names = draw(st.lists(st.sampled_from(sorted(JOB_ANNOTATIONS)), unique=True, max_size=2))
    return {PREFIX + n: draw(st.sampled_from(JOB_ANNOTATIONS[n])) for n in names}


@st.composite
def kube_pod(draw: st.DrawFn, name: str, *, job: bool) -> KubePod:
    node = draw(st.sampled_from(["", "", "n0", "n1"]))
    labels: dict[str, str] = {_pods.LABEL_JOB_NAME: "train"} if job else {}
    job_label = draw(maybe(st.sampled_from(JOB_IDS)))
    if job_label is not None:
        labels[JOBID] = str(job_label)
    annotations = {} if job else draw(job_annotations())
    if node and draw(st.booleans()):
        annotations[SLURM_NODE] = node  # bound by placement
    deleted_at = draw(st.sampled_from([0, 0, 0, 0, int(NOW) - 1_000, int(NOW) + 10]))
    condition = draw(
        maybe(
            st.builds(
                PodCondition,
                type=st.just("PodScheduled"),
                status=st.just("False"),
                reason=st.just("SlurmJobInvalid"),
                message=st.sampled_from(["stale", "cannot become a Slurm job: x"]),
            )
        )
    )
    return KubePod(
        source=KUBE_SOURCE,
        key=f"{NS}/{name}",
        uid=f"uid-{name}",
        namespace=NS,
        name=name,
        phase=draw(st.sampled_from(["Pending", "Pending", "Running", "Succeeded", "Failed"])),
        node_name=node,
        scheduler_name=draw(st.sampled_from([SCHED, SCHED, "default-scheduler"])),
        labels=labels,
        annotations=annotations,
        finalizers=(FIN,) if draw(st.booleans()) else (),
        tolerations=(TAINT,) if draw(st.booleans()) else (),
        deletion_timestamp=deleted_at,
        deletion_grace_s=30 if deleted_at else 0,
        owner=OwnerRef(api_version="batch/v1", kind="Job", name="train", uid="uid-train")
        if job
        else None,
        conditions=(condition,) if condition is not None else (),
        cpu_millis=draw(st.sampled_from([0, 1500])),
        memory_bytes=draw(st.sampled_from([0, 2**30])),
        gpus=draw(st.sampled_from([0, 1])),
    )


@st.composite
def slurm_job(draw: st.DrawFn, job_id: int, source: str = SOURCE) -> SlurmJob:
    state = draw(
        st.sampled_from(
            [("PENDING",), ("RUNNING",), ("RUNNING", "COMPLETING"), ("COMPLETED",), ("CANCELLED",)]
        )
    )
    running = state[0] == "RUNNING"
    return SlurmJob(
        source=source,
        key=str(job_id),
        cluster=source.removeprefix("slurm:"),
        job_id=job_id,
        state=state,
        nodes=tuple(draw(subset(POD_NODES, min_size=1))) if running else (),
        partition="p1",
        comment=draw(st.sampled_from(MARKERS)),
        excluded_nodes=tuple(sorted(draw(subset(POD_NODES)))),
        end_time=int(NOW) - 100 if state[0] in wellknown.JOB_ENDED_STATES else 0,
    )


@st.composite
def pod_states(draw: st.DrawFn) -> tuple[World, str]:
    """A Job's pods and its KubeWorkload, a bare pod, Slurm jobs naming either group (or
    someone else), Kubernetes and Slurm nodes, partitions; a group key."""
    objs: list[Event] = [draw(kube_pod(f"train-{i}", job=True)) for i in draw(subset([0, 1, 2]))]
    if draw(st.booleans()):
        objs.append(draw(kube_pod("solo", job=False)))
    if draw(st.booleans()):
        objs.append(
            KubeWorkload(
                source=KUBE_SOURCE,
                key=f"{NS}/Job:train",
                uid="uid-train",
                namespace=NS,
                name="train",
                workload_kind="Job",
                api_version="batch/v1",
                annotations=draw(job_annotations()),
                size=draw(st.integers(min_value=0, max_value=3)),
            )
        )
    objs += [draw(slurm_job(j)) for j in draw(subset(JOB_IDS))]
    objs += [draw(slurm_job(j, OTHER)) for j in draw(subset(JOB_IDS))]
    for name in draw(subset(["n0", "n1"])):
        objs.append(
            KubeNode(
                source=KUBE_SOURCE,
                key=name,
                ready=draw(st.booleans()),
                unschedulable=draw(st.booleans()),
            )
        )
    objs += [
        SlurmNode(source=SOURCE, key=n, cluster=CLUSTER, state=("IDLE",))
        for n in draw(subset(POD_NODES))
    ]
    if draw(st.booleans()):
        objs.append(
            SlurmPartition(source=SOURCE, key="p1", cluster=CLUSTER, nodes=("n0", "n1", "x9"))
        )
    if draw(st.booleans()):
        objs.append(SlurmPartition(source=SOURCE, key="p2", cluster=CLUSTER, nodes=("x9",)))
    if draw(st.booleans()):
        objs.append(SlurmPing(source=SOURCE, key=CLUSTER, cluster=CLUSTER, responding=True))
        objs.append(KubeListed(source="k8s", key="pods", resource="pods"))
    return world(objs), draw(st.sampled_from(GROUP_KEYS))


# --- NodeSets: nodeset, autoscale --------------------------------------------------------------

NODESET_KEY = "slurm/gpu"
ORDINALS = [0, 1, 2, 3]


def scale_in_reason(i: int) -> str:
    return wellknown.scale_in_drain_reason("slurm", f"gpu-{i}")


FAILURES_ANNOTATIONS = [
    json.dumps({"gpu-1": [1, int(NOW) - 5, "u1"]}),
    json.dumps({"gpu-2": [3, int(NOW) - 100, "u2"], "gpu-9": [1, int(NOW) - 5, "old"]}),
    json.dumps({"gpu-0": [2, int(NOW) - 1_000, "u0"]}),
    "{not json",
    "5",
    "[]",
    json.dumps(
        {"gpu-\u00b2": [1, int(NOW) - 5, "u"]}
    ),  # a superscript two: isdigit() but not int()
]


@st.composite
def nodeset_pod(draw: st.DrawFn, i: int) -> KubePod:
    labels = {"app.kubernetes.io/name": "slurmd", "app.kubernetes.io/instance": "gpu"}
    if draw(st.booleans()):
        labels[wellknown.LABEL_POD_PROTECT] = "true"
    annotations = {}
    cost = draw(maybe(st.sampled_from(["5", "-3", "x", " 7 "])))
    if cost is not None:
        annotations[wellknown.ANNOTATION_POD_DELETION_COST] = cost
    phase = draw(
        st.sampled_from(["Pending", "Running", "Running", "Unknown", "Failed", "Succeeded"])
    )
    deleted_at = draw(st.sampled_from([0, 0, 0, int(NOW) - 5]))
    return KubePod(
        source=KUBE_SOURCE,
        key=f"slurm/gpu-{i}",
        uid=f"u{i}",
        namespace="slurm",
        name=f"gpu-{i}",
        phase=phase,
        ready=phase == "Running" and draw(st.booleans()),
        node_name=draw(st.sampled_from(["", "k1", "k1"])),
        labels=labels,
        annotations=annotations,
        deletion_timestamp=deleted_at,
        deletion_grace_s=30 if deleted_at else 0,
    )


@st.composite
def nodeset_states(draw: st.DrawFn) -> tuple[World, str]:
    """A NodeSet, its pods, their Slurm nodes (of its cluster and another), a Cluster object
    that serves cluster ``c9``; the NodeSet's key."""
    cluster_name = draw(st.sampled_from(["", "", CLUSTER, "c9"]))
    annotations: dict[str, str] = {}
    failures = draw(maybe(st.sampled_from(FAILURES_ANNOTATIONS)))
    if failures is not None:
        annotations[wellknown.ANNOTATION_NODESET_POD_FAILURES] = failures
    # spec.partition (rule 19): a stamp of ours (pending, or what was ensured) or none, our
    # finalizer with it or left over, and maybe a partition of the name in Slurm.
    stamp = draw(maybe(st.sampled_from(["pending", "gpu-0", "gpu-0,gpu-1 MaxTime=60"])))
    if stamp is not None:
        annotations[wellknown.ANNOTATION_NODESET_PARTITION] = stamp
    finalizers = (
        (wellknown.FINALIZER_NODESET_SLURM,)
        if draw(st.integers(min_value=0, max_value=2)) < (2 if stamp is not None else 1)
        else ()
    )
    objs: list[Event] = []
    if draw(st.integers(min_value=0, max_value=9)):  # mostly present
        objs.append(
            kube_nodeset(
                "slurm",
                "gpu",
                uid="ns-uid",
                generation=draw(st.sampled_from([1, 2])),
                replicas=draw(st.integers(min_value=0, max_value=4)),
                cluster_name=cluster_name,
                annotations=annotations,
                deleting=draw(st.integers(min_value=0, max_value=9)) == 0,
                finalizers=finalizers,
                partition_enabled=draw(st.booleans()),
                partition_config=draw(st.sampled_from(["", "MaxTime=60", "Bogus=1 State=UP"])),
                status=draw(
                    st.sampled_from([NodeSetStatus(), NodeSetStatus(replicas=2, ready_replicas=1)])
                ),
            )
        )
    source = slurm_source(cluster_name or CLUSTER)
    objs += [draw(nodeset_pod(i)) for i in draw(subset(ORDINALS))]
    for i in draw(subset(ORDINALS)):
        reasons = ["", "maintenance", scale_in_reason(i), scale_in_reason((i + 1) % 4)]
        objs.append(draw(slurm_node(f"gpu-{i}", source, reasons)))
    objs += [draw(slurm_node(f"gpu-{i}", OTHER)) for i in draw(subset(ORDINALS))]
    if draw(st.booleans()):
        nodes = tuple(f"gpu-{i}" for i in draw(subset(ORDINALS)))
        cluster = cluster_name or CLUSTER
        objs.append(SlurmPartition(source=source, key="gpu", cluster=cluster, nodes=nodes))
    if draw(st.booleans()):  # the cluster listed: rules that act on absence may
        cluster = cluster_name or CLUSTER
        objs.append(SlurmPing(source=source, key=cluster, cluster=cluster, responding=True))
    if draw(st.booleans()):
        objs.append(
            SlurmCluster(
                source=KUBE_SOURCE, key="slurm/c9", uid="c9-uid", namespace="slurm", name="c9"
            )
        )
    return world(objs), NODESET_KEY


#: Policy annotations: valid values more likely than the broken ones.
AUTOSCALE = {
    "partition": ["p1"],
    "min-replicas": ["0", "1", "1", "x", "nan"],
    "max-replicas": ["4", "4", "2", "inf", "1e400", "nan", "-1"],
    "jobs-per-node": ["1", "2", "2", "0"],
    "cooldown": ["60", "0", "0", "nan"],
    "idle-to-zero-after": ["300", "0", "0"],
    "enabled": ["true", "false"],
}


@st.composite
def autoscale_states(draw: st.DrawFn) -> tuple[World, str]:
    """An autoscaled NodeSet (policy annotations good and bad, the last scale's time and
    direction), jobs of its partition, its pods and their Slurm nodes, maybe an HPA."""
    names = draw(st.lists(st.sampled_from(sorted(AUTOSCALE)), unique=True, max_size=3))
    annotations = {autoscale.PREFIX + n: draw(st.sampled_from(AUTOSCALE[n])) for n in names}
    if draw(st.integers(min_value=0, max_value=4)):
        annotations[autoscale.PREFIX + "partition"] = "p1"
        annotations.setdefault(autoscale.PREFIX + "max-replicas", "4")
    last = draw(maybe(st.sampled_from([str(int(NOW) - 10), str(int(NOW) - 1_000), "garbage"])))
    if last is not None:
        annotations[autoscale.LAST_SCALE] = last
    direction = draw(maybe(st.sampled_from(["up", "down"])))
    if direction is not None:
        annotations[autoscale.LAST_DIRECTION] = direction
    objs: list[Event] = [
        kube_nodeset(
            "slurm",
            "gpu",
            uid="ns-uid",
            replicas=draw(st.integers(min_value=0, max_value=6)),
            annotations=annotations,
        )
    ]
    for job_id in range(draw(st.integers(min_value=0, max_value=4))):
        state = draw(st.sampled_from(["PENDING", "PENDING", "RUNNING", "COMPLETED"]))
        objs.append(
            SlurmJob(
                source=draw(st.sampled_from([SOURCE, SOURCE, OTHER])),
                key=str(job_id),
                cluster=CLUSTER,
                job_id=job_id,
                state=(state,),
                partition="p1",
                end_time=int(NOW) - draw(st.sampled_from([10, 1_000]))
                if state == "COMPLETED"
                else 0,
            )
        )
    for i in draw(subset([0, 1, 2])):
        objs.append(draw(nodeset_pod(i)))
        objs.append(draw(slurm_node(f"gpu-{i}", SOURCE, ["", scale_in_reason(i)])))
    if draw(st.integers(min_value=0, max_value=5)) == 0:
        objs.append(
            KubeScaler(
                source=KUBE_SOURCE,
                key="slurm/HorizontalPodAutoscaler:gpu",
                namespace="slurm",
                name="gpu",
                scaler_kind="HorizontalPodAutoscaler",
                target_kind="NodeSet",
                target_name="gpu",
            )
        )
    return world(objs), NODESET_KEY


# --- Clusters: cluster -----------------------------------------------------------------------

CLUSTER_KEYS = ["team-a/alpha", "team-b/alpha", "team-a/c1", "team-a/bad.name"]
CLUSTER_REASONS = ["", "Ready", "Connecting", "NotServed", "Unreachable"]


@st.composite
def cluster_states(draw: st.DrawFn) -> tuple[World, str]:
    """Cluster objects (a name used twice, the static cluster's name, a name that is no
    subject token), pings of their Slurm clusters; a Cluster key."""
    objs: list[Event] = []
    for key in draw(subset(CLUSTER_KEYS)):
        namespace, _, name = key.partition("/")
        objs.append(
            SlurmCluster(
                source=KUBE_SOURCE,
                key=key,
                uid=f"uid-{key}",
                namespace=namespace,
                name=name,
                generation=draw(st.sampled_from([1, 2])),
                server=f"http://{name}:6820",
                deleting=draw(st.integers(min_value=0, max_value=5)) == 0,
                is_ready=draw(st.sampled_from([None, True, False])),
                ready_reason=draw(st.sampled_from(CLUSTER_REASONS)),
                ready_message=draw(st.sampled_from(["", "stale"])),
            )
        )
    objs.extend(
        SlurmPing(
            source=slurm_source(name),
            key=name,
            cluster=name,
            responding=draw(st.booleans()),
            hostnames=tuple(draw(subset(["ctl-0", "ctl-1"]))),
            api_version="v0.0.44",
            error=draw(st.sampled_from(["", "connection refused"])),
            error_kind=draw(st.sampled_from(["", "Unauthorized", "Unavailable", "BadResponse"])),
        )
        for name in draw(subset(["alpha", "c1"]))
    )
    return world(objs), draw(st.sampled_from(CLUSTER_KEYS))


#: Every reconciler of ``reconcilers.ALL`` and the family of states it reads.
STATES: dict[str, st.SearchStrategy[tuple[World, str]]] = {
    "node_taint": node_states(),
    "slurm_drain": node_states(),
    "node_register": node_states(),
    "placement": pod_states(),
    "workload": pod_states(),
    "nodeset": nodeset_states(),
    "autoscale": autoscale_states(),
    "cluster": cluster_states(),
}
