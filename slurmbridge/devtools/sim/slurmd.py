"""Glue between the two simulators for NodeSets: a default scheduler and slurmd registration.

* :class:`DefaultScheduler` binds pods that ask for Kubernetes' default scheduler
  (``spec.schedulerName`` empty or ``default-scheduler``) to the schedulable Ready node with
  the fewest pods among those its ``nodeSelector`` and required node affinity admit (as
  kube-scheduler's NodeAffinity filter: :func:`node_affinity_matches`) and whose
  ``NoSchedule``/``NoExecute`` taints it tolerates (TaintToleration and NodeUnschedulable
  filters: :func:`untolerated_taint`); no resource fit. A pod no node admits stays Pending,
  as with kube-scheduler.
* :class:`SlurmdRegistrar` plays slurmd: a NodeSet pod (label ``app.kubernetes.io/name=slurmd``)
  that runs registers a Slurm node named after its hostname (``spec.hostname``, else the pod
  name: slurmd registers as the host's name) in the slurmrestd simulator,
  in partition ``batch`` and in one named after its NodeSet (created on first use, as a
  slurm.conf with a partition per NodeSet has it; :attr:`SlurmdRegistrar.nodeset_partitions`
  False leaves that partition to whoever makes it: a NodeSet's ``spec.partition``), with the
  NodeSet's name as a feature; when the pod is gone, the node
  leaves Slurm. A slurmd registers once, when its pod starts running: a dynamic slurmd
  (``slurmd -Z``) registers at start-up, so a node record deleted while the pod runs
  (``scontrol delete``, a prune) stays gone until a new pod starts — not back at the pod's
  next write, which would hide from a test what slurmbridge must do about it.
  :attr:`SlurmdRegistrar.removed_busy` lists nodes that left while running a job — a pod
  deleted under a running job, which slurmbridge must never cause.

Both react to the Kubernetes simulator's writes and act on the next loop turn.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

from slurmbridge.devtools.sim.kube import ApiError, Change, KubeSim
from slurmbridge.devtools.sim.kubelet import node_affinity_matches, tolerates
from slurmbridge.devtools.sim.slurmrestd import SlurmSim

log = logging.getLogger(__name__)

SLURMD_LABEL: Final = ("app.kubernetes.io/name", "slurmd")
INSTANCE_LABEL: Final = "app.kubernetes.io/instance"


class DefaultScheduler:
    """Binds default-scheduler pods (see the module docstring)."""

    def __init__(self, kube: KubeSim) -> None:
        self.kube = kube
        self._pending: set[tuple[str, str]] = set()
        self._handle: asyncio.Handle | None = None

    def attach(self) -> None:
        """Start reacting (on the running loop); pods already waiting are bound too."""
        self.kube.on_write.append(self._on_write)
        for pod in self.kube.list("pods"):
            self._consider(pod)

    def detach(self) -> None:
        """Stop reacting."""
        if self._on_write in self.kube.on_write:
            self.kube.on_write.remove(self._on_write)
        if self._handle is not None:
            self._handle.cancel()

    def _on_write(self, change: Change) -> None:
        if change.resource.name == "pods" and change.type != "DELETED":
            self._consider(change.object)
        elif change.resource.name == "nodes" and change.type != "DELETED":
            # kube-scheduler moves unschedulable pods back to its active queue on a Node
            # add or update (scheduling queue's MoveAllToActiveOrBackoffQueue on
            # NodeAdd/NodeTaintChange/NodeLabelChange…): an untaint or uncordon binds them.
            for pod in self.kube.list("pods", field_selector="spec.nodeName="):
                self._consider(pod)

    def _consider(self, pod: dict[str, Any]) -> None:
        spec = pod.get("spec") or {}
        meta = pod.get("metadata") or {}
        if spec.get("nodeName") or meta.get("deletionTimestamp"):
            return
        if spec.get("schedulerName") not in (None, "", "default-scheduler"):
            return
        self._pending.add((str(meta.get("namespace")), str(meta.get("name"))))
        if self._handle is None:
            self._handle = asyncio.get_running_loop().call_soon(self._bind_all)

    def _bind_all(self) -> None:
        self._handle = None
        pending, self._pending = self._pending, set()
        all_nodes = {n["metadata"]["name"]: n for n in self.kube.list("nodes")}
        nodes = [
            n["metadata"]["name"]
            for n in all_nodes.values()
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (n.get("status") or {}).get("conditions") or []
            )
        ]
        if not nodes:
            return
        load = dict.fromkeys(nodes, 0)
        for p in self.kube.list("pods"):
            bound = (p.get("spec") or {}).get("nodeName")
            if bound in load:
                load[bound] += 1
        for namespace, name in sorted(pending):
            try:
                spec = self.kube.get("pods", name, namespace).get("spec") or {}
            except ApiError:
                continue
            admitted = [
                n
                for n in nodes
                if node_affinity_matches(spec, all_nodes[n])
                and untolerated_taint(spec, all_nodes[n]) is None
            ]
            if not admitted:
                continue  # unschedulable: stays Pending
            target = min(admitted, key=lambda n: (load[n], n))
            try:
                self.kube.bind(name, target, namespace)
            except ApiError as exc:  # gone, bound meanwhile or being deleted
                log.debug("default scheduler: %s/%s: %s", namespace, name, exc)
                continue
            load[target] += 1


def untolerated_taint(spec: dict[str, Any], node: dict[str, Any]) -> dict[str, Any] | None:
    """The first taint of ``node`` that keeps a pod with ``spec`` off it, or None:
    kube-scheduler's TaintToleration filter (pkg/scheduler/framework/plugins/tainttoleration:
    ``NoSchedule`` and ``NoExecute`` taints must be tolerated; ``PreferNoSchedule`` only
    scores) and its NodeUnschedulable filter (plugins/nodeunschedulable: a cordoned node takes
    only a pod tolerating ``node.kubernetes.io/unschedulable:NoSchedule``)."""
    tolerations = spec.get("tolerations") or []
    taints = list((node.get("spec") or {}).get("taints") or [])
    if (node.get("spec") or {}).get("unschedulable"):
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return dict(taint)
    return None


class SlurmdRegistrar:
    """Registers running slurmd pods as Slurm nodes (see the module docstring)."""

    def __init__(self, kube: KubeSim, slurm: SlurmSim, *, cpus: int = 2, memory: int = 1000):
        self.kube = kube
        self.slurm = slurm
        self.cpus = cpus
        self.memory = memory
        self.registered: list[str] = []
        self.removed_busy: list[str] = []
        #: uids of the pods whose slurmd has registered (once per pod).
        self._started: set[str] = set()
        #: Other Slurm clusters by name: a NodeSet whose ``spec.clusterName`` is one of them
        #: registers its nodes there (as its slurmd would, configured for that cluster).
        self.clusters: dict[str, SlurmSim] = {}
        #: Registering nodes create and join a partition named after their NodeSet; False:
        #: they join one only when it exists, naming their NodeSet (its feature).
        self.nodeset_partitions = True

    def _sim_for(self, namespace: str, labels: dict[str, str], name: str) -> SlurmSim:
        for sim in self.clusters.values():
            if name in sim.nodes:
                return sim
        nodeset = labels.get(INSTANCE_LABEL, "")
        try:
            obj = self.kube.get("nodesets", nodeset, namespace) if nodeset else {}
        except ApiError:
            obj = {}
        cluster = str((obj.get("spec") or {}).get("clusterName") or "")
        return self.clusters.get(cluster, self.slurm)

    def attach(self) -> None:
        """Start reacting to pod writes."""
        self.kube.on_write.append(self._on_write)

    def detach(self) -> None:
        """Stop reacting."""
        if self._on_write in self.kube.on_write:
            self.kube.on_write.remove(self._on_write)

    def _on_write(self, change: Change) -> None:
        if change.resource.name != "pods":
            return
        meta = change.object.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(SLURMD_LABEL[0]) != SLURMD_LABEL[1]:
            return
        # slurmd registers under the host's name: the pod's hostname, else its name.
        name = str((change.object.get("spec") or {}).get("hostname") or meta.get("name"))
        phase = (change.object.get("status") or {}).get("phase")
        sim = self._sim_for(str(meta.get("namespace")), labels, name)
        uid = str(meta.get("uid") or name)
        if change.type == "DELETED":
            self._started.discard(uid)
            node = sim.nodes.get(name)
            if node is not None:
                if node.alloc_cpus:
                    self.removed_busy.append(name)
                    log.error("slurmd pod %s deleted while its node runs a job", name)
                sim.remove_node(name)
            return
        if (
            phase == "Running"
            and not meta.get("deletionTimestamp")
            and uid not in self._started
            and name not in sim.nodes
        ):
            self._started.add(uid)
            nodeset = labels.get(INSTANCE_LABEL, "")
            # As Slinky's NodeSets do: the nodes join a partition named after their NodeSet
            # (and the cluster-wide one), with the NodeSet's name as a feature.
            partitions = ("batch", nodeset) if nodeset and self.nodeset_partitions else ("batch",)
            features = (nodeset,) if nodeset else ()
            sim.add_node(name, self.cpus, self.memory, partitions, features=features)

            self.registered.append(name)
            sim.schedule()  # slurmctld tries pending jobs on a node that registers
