"""``node_register``: register labelled Kubernetes nodes in Slurm as external nodes.

Rules (Slinky slurm-bridge node controller, "Node Registration and Partition Assignment"):

* label ``scheduler.slinky.slurm.net/external-node`` present (any value but ``false``) and no
  Slurm node ⇒ create it (``POST /new/node/``, Slurm REST v0.0.44+) from a ``node_conf`` line:
  ``NodeName`` (label ``slinky.slurm.net/slurm-nodename`` or the node name), ``CPUs``
  (capacity.cpu, whole CPUs), ``Sockets=1``, ``CoresPerSocket=CPUs``, ``ThreadsPerCore=1``
  — or, when the node publishes ``dra.cpu`` devices, its topology from them (CPUs = the
  devices, cores = distinct (socket, core) ids, ``ThreadsPerCore`` = CPUs / cores; Slinky
  slurmcontrol ``desiredNodeCPUConfig``) —, ``RealMemory`` (capacity.memory in MiB, rounded
  down), ``State=External``, ``Feature=`` the partitions of annotation
  ``scheduler.slinky.slurm.net/external-node-partitions`` (comma-separated, trimmed, empties
  dropped) after ``slurm_bridge_gres_compatible`` (Slinky ``AddNode``), ``Topology=`` from
  annotation ``topology.slinky.slurm.net/spec``, ``Gres=gpu:<n>`` from GPU capacity — or,
  when the node's ResourceSlices hold devices of an indexed-GRES device profile
  (:mod:`reconcilers._devprofile`: ``gpu-nvidia`` whole GPUs, ``gpu-example``,
  ``dranet-rdma``), ``Gres=<gres>:<profile>:<n>,…`` and ``GresConf=`` one
  ``count=1,name=<gres>,type=<profile>,file=/dra/<driver>/<pool>/<device>`` record per
  device joined by ``+`` (Slinky ``buildNodeGRESConfig``);
* the node's DRA inventory cannot be read (an inconsistent or incomplete pool) ⇒ the node is
  not registered (nor re-registered), and the Node condition ``SlinkySlurmGRESCompatible`` is
  ``Unknown`` (reason ``SlurmGRESVerificationError``); registered from its inventory ⇒
  ``True`` (``SlurmGRESCompatible``);
* once the log holds a complete ResourceSlice listing, a node Slurm knows from slurm.conf
  or its own slurmd (a *hybrid* node, never registered
  here) whose DRA inventory has indexed GRES ⇒ the same condition says whether its Slurm
  ``Gres`` holds every ``<gres>:<profile>:<n>`` entry exactly (other entries are the
  administrator's): ``False`` (``IncompatibleSlurmGRES``, naming the ``gres.conf`` lines it
  needs) with a Warning Event when it turns so, else ``True`` (Slinky
  ``validateHybridNodeGRES``, ``node_condition.go``);
* a registered external node, or a compatible slurmd node, gets the applied inventory in its
  Slurm ``Extra`` (:func:`reconcilers._devprofile.gres_config`; Slinky ``updateNodeExtra``):
  written when it differs, cleared when no indexed GRES is left, never over a value that is
  not ours (then the condition is ``Unknown``, "Extra field is already in use");
* every partition named must exist in Slurm first; otherwise nothing is sent to Slurm, a
  Warning Event and the node condition ``SlurmNodeRegistered=False`` name the missing
  partitions, and the node is reconsidered whenever partitions change;
* partitions, CPUs, memory or GPUs changed ⇒ drain, wait until drained, delete, create
  again. Partitions too: Slurm puts a dynamic node into the partitions whose NodeSet
  ``Feature=`` it has when the node is created, and a later feature update does not move it
  (observed on Slurm 26.05.5), so updating features in place would change nothing that
  matters;
* the topology annotation changed or was removed ⇒ the node's topology is updated in place
  (``topology_str``, REST v0.0.43+; ``""`` clears it), as Slinky's ``updateNodeTopology``
  does; on older API versions (no ``node.topology``) nothing is compared or sent;
* label removed from a node Slurm knows as EXTERNAL ⇒ drain, wait until drained, delete;
* labelled, but Slurm already has a node of that name that is not EXTERNAL (slurm.conf, or
  its own slurmd) ⇒ nothing is sent to Slurm; condition ``SlurmNodeRegistered=False``
  (reason ``NotExternal``) and a Warning Event say why (it was deleted and re-created, and
  Slurm refused with 2028: a dead letter).

Nothing is decided before the log holds a complete Slurm listing (``slurm_listed``): until
then an absent node or partition proves nothing. Waiting needs no other timer: the Slurm
poller publishes the node's state changes, which trigger a reconcile. Deletion is
fail-closed — only a node that is DRAIN with one of our reasons and runs nothing (not
ALLOCATED, MIXED or COMPLETING), re-checked by the effector against Slurm itself.
Our drains carry the prefix ``slurm-bridge: External node (``, which ``slurm_drain`` never
clears, so a busy node being removed is drained once and never undrained in the same pass
(Slinky's controllers flap there). Triggers: KubeNode, SlurmNode, SlurmPartition, KubeResourceSlice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import msgspec

from reconcilers import _devprofile, _dra, _nodes
from reconcilers.base import (
    NOTHING,
    Context,
    Decision,
    ReconcilerSpec,
    Store,
    kube_listed,
    slurm_listed,
)
from schemas import wellknown
from schemas.actions import (
    AnyAction,
    CreateSlurmNode,
    DeleteSlurmNode,
    DrainSlurmNode,
    RecordEvent,
    SetNodeCondition,
    SetSlurmNodeExtra,
    UndrainSlurmNode,
    UpdateSlurmNodeTopology,
)
from schemas.events import KubeNode, KubeResourceSlice, SlurmNode, SlurmPartition
from schemas.subjects import slurm_source

NAME = "node_register"
MIB = 1024 * 1024
BUSY = ("ALLOCATED", "MIXED", "COMPLETING")
#: Seconds between looks while the log has no complete Slurm listing yet.
LISTING_WAIT_S = 1.0
OWNED = (wellknown.EXTERNAL_REASON_PREFIX,)
#: A topology spec as Slurm reads it after ``Topology=`` (``name:unit[,name:unit]``). Anything
#: else — a space above all — would add other keys to the node's slurm.conf line.
_TOPOLOGY = re.compile(r"[A-Za-z0-9_.:,-]+")


class Desired(msgspec.Struct, frozen=True, kw_only=True):
    """What the Slurm node should be, derived from the Kubernetes node."""

    name: str
    cpus: int
    real_memory: int
    #: GPU capacity (``nvidia.com/gpu``), used when the DRA inventory has no indexed GRES.
    gpus: int
    partitions: tuple[str, ...]
    topology: str
    #: Cores per socket (one socket) and threads per core: from ``dra.cpu`` devices, else
    #: one thread per CPU.
    cores: int = 0
    threads: int = 1
    #: ``Gres``/``GresConf``/applied inventory of the node's DRA devices.
    dra: _devprofile.GresConfig = _devprofile.GresConfig()
    #: Why the node's DRA inventory cannot be read (``""``: it can).
    inventory_error: str = ""

    @property
    def gres(self) -> str:
        """The DRA inventory's ``Gres``, else ``gpu:<n>`` from capacity, else ``""``."""
        if self.dra.gres:
            return self.dra.gres
        return f"gpu:{self.gpus}" if self.gpus else ""

    @property
    def gres_conf(self) -> str:
        """Slinky's ``GresConf`` for the DRA devices (``""`` without them)."""
        return self.dra.gres_conf


class View(msgspec.Struct, frozen=True, kw_only=True):
    """The Kubernetes node, its Slurm node and the partitions that exist in Slurm."""

    node: KubeNode | None
    slurm: SlurmNode | None
    partitions: frozenset[str]
    cluster: str
    #: The log holds a complete listing of the cluster (``reconcilers.base.slurm_listed``).
    listed: bool = True
    #: The node's DRA ResourceSlices.
    slices: tuple[KubeResourceSlice, ...] = ()
    #: The log holds a complete ResourceSlice listing (``reconcilers.base.kube_listed``):
    #: before it, a slurmd node's GRES are not judged and no Extra of ours is cleared.
    slices_listed: bool = True


def is_external(node: KubeNode) -> bool:
    """True when the node asks to be registered in Slurm."""
    value = node.labels.get(wellknown.LABEL_EXTERNAL_NODE)
    return value is not None and value.lower() != "false"


def partitions_of(node: KubeNode) -> tuple[str, ...]:
    """Partitions named by the annotation: comma-separated, trimmed, empties dropped."""
    raw = node.annotations.get(wellknown.ANNOTATION_EXTERNAL_NODE_PARTITIONS, "")
    return tuple(p.strip() for p in raw.split(",") if p.strip())


def desired(node: KubeNode, slices: Iterable[KubeResourceSlice] = ()) -> Desired:
    """The Slurm node a Kubernetes node should have (CPUs at least 1, memory in MiB; CPUs,
    cores and GRES from its DRA inventory when it has one — module docstring)."""
    slices = tuple(slices)
    error = ""
    try:
        inventory = _devprofile.node_inventory(node.key, slices)
    except _devprofile.ProfileError as exc:
        error = str(exc)
        inventory = _devprofile.Inventory(node=node.key)
    cpus = max(1, node.cpu_millis // 1000)
    cores, threads = cpus, 1
    if inventory.devices(_devprofile.CPU.name):
        mine = [s for s in slices if s.node == node.key]
        topology = _dra.cpu_cores(mine)
        if topology:
            cpus = sum(len(c) for c in topology)
            cores = len(topology)
            threads = max(1, cpus // cores)
    return Desired(
        name=_nodes.slurm_name_of(node),
        cpus=cpus,
        real_memory=node.memory_bytes // MIB,
        gpus=node.gpus,
        partitions=partitions_of(node),
        topology=node.annotations.get(wellknown.ANNOTATION_TOPOLOGY_SPEC, "").strip(),
        cores=cores,
        threads=threads,
        dra=_devprofile.gres_config(inventory),
        inventory_error=error,
    )


def node_conf(d: Desired) -> str:
    """The slurm.conf ``NodeName`` line for ``POST /new/node/``."""
    parts = [
        f"NodeName={d.name}",
        f"CPUs={d.cpus}",
        "Sockets=1",
        f"CoresPerSocket={d.cores or d.cpus}",
        f"ThreadsPerCore={d.threads}",
        f"RealMemory={d.real_memory}",
        "State=External",
        "Feature=" + ",".join((wellknown.FEATURE_GRES_COMPATIBLE, *d.partitions)),
    ]
    if d.topology:
        parts.append(f"Topology={d.topology}")
    if d.gres:
        parts.append(f"Gres={d.gres}")
    if d.gres_conf:
        parts.append(f"GresConf={d.gres_conf}")
    return " ".join(parts)


def partition_features(slurm: SlurmNode) -> tuple[str, ...]:
    """The Slurm node's features less the one slurmbridge owns (the partitions it was
    registered with), sorted."""
    return tuple(sorted(f for f in slurm.features if f != wellknown.FEATURE_GRES_COMPATIBLE))


def view(store: Store, key: str, ctx: Context) -> View:
    """Read the node, its Slurm node and the names of the existing partitions."""
    node = store.get(KubeNode, key)
    slurm = _nodes.slurm_node_for(node, store, ctx) if node is not None else None
    parts = frozenset(p.key for p in store.values(SlurmPartition, slurm_source(ctx.cluster)))
    return View(
        node=node,
        slurm=slurm,
        partitions=parts,
        cluster=ctx.cluster,
        listed=slurm_listed(store, ctx.cluster),
        slices=_slices_of(store, key),
        slices_listed=kube_listed(store, "resourceslices"),
    )


def _slices_of(store: Store, node: str) -> tuple[KubeResourceSlice, ...]:
    """The node's slices and every other slice of their pools (a pool's slices are counted
    and must all name one node: :func:`reconcilers._devprofile.node_inventory`)."""
    mine = [s for s in store.by_field(KubeResourceSlice, "node", node) if not s.deleted]
    pools = {(s.driver, s.pool) for s in mine}
    mates = [
        s
        for s in store.values(KubeResourceSlice)
        if not s.deleted and s.node != node and (s.driver, s.pool) in pools
    ]
    return tuple(sorted((*mine, *mates), key=lambda s: s.key))


def _condition(node: KubeNode, status: str, reason: str, message: str) -> tuple[AnyAction, ...]:
    cur = node.condition(wellknown.CONDITION_SLURM_REGISTERED)
    if cur is not None and (cur.status, cur.reason, cur.message) == (status, reason, message):
        return ()
    return (
        SetNodeCondition(
            node=node.key,
            type=wellknown.CONDITION_SLURM_REGISTERED,
            status=status,
            reason=reason,
            message=message,
        ),
    )


def _gres_condition(
    node: KubeNode, status: str, reason: str, message: str
) -> tuple[AnyAction, ...]:
    """Set ``SlinkySlurmGRESCompatible`` when it differs; a Warning Event when it turns
    ``False`` (Slinky ``recordSlurmGRESCompatibilityError``: on a transition only)."""
    cur = node.condition(wellknown.CONDITION_SLURM_GRES_COMPATIBLE)
    if cur is not None and (cur.status, cur.reason, cur.message) == (status, reason, message):
        return ()
    out: list[AnyAction] = [
        SetNodeCondition(
            node=node.key,
            type=wellknown.CONDITION_SLURM_GRES_COMPATIBLE,
            status=status,
            reason=reason,
            message=message,
        )
    ]
    if status == "False" and (cur is None or cur.status != "False"):
        out.append(_event(node, reason, message, warning=True))
    return tuple(out)


def _extra(v: View, slurm: SlurmNode, d: Desired) -> tuple[AnyAction, ...] | str:
    """The write of the applied inventory to the Slurm node's ``Extra`` (Slinky
    ``updateNodeExtra``): none when it is there; ``""`` cleared when the node has no indexed
    GRES left but ours is there; the reason it cannot be written when someone else's value
    is there (never overwritten)."""
    want, have = d.dra.extra, slurm.extra
    if have == want or (not want and not have.startswith(_devprofile.APPLIED_PREFIX)):
        return ()
    if have and not have.startswith(_devprofile.APPLIED_PREFIX):
        return (
            f"cannot record applied DRA inventory on Slurm node {slurm.key!r}: Extra field is "
            "already in use"
        )
    return (
        SetSlurmNodeExtra(
            cluster=v.cluster,
            node=slurm.key,
            extra=want,
            owned_prefix=_devprofile.APPLIED_PREFIX,
        ),
    )


def _compatible(v: View, node: KubeNode, slurm: SlurmNode, d: Desired) -> tuple[AnyAction, ...]:
    """The applied inventory written and the condition True — or Unknown when the node's
    ``Extra`` is someone else's."""
    extra = _extra(v, slurm, d)
    if isinstance(extra, str):
        msg = f"Could not verify Slurm GRES compatibility: {extra}"
        return _gres_condition(node, "Unknown", wellknown.REASON_GRES_VERIFICATION_ERROR, msg)
    return (
        *extra,
        *_gres_condition(
            node,
            "True",
            wellknown.REASON_GRES_COMPATIBLE,
            "Slurm GRES configuration is compatible with the Kubernetes DRA inventory.",
        ),
    )


def _hybrid(v: View, node: KubeNode, slurm: SlurmNode) -> Decision:
    """A slurmd-registered node's GRES against its DRA inventory (module docstring); not
    before the log holds every ResourceSlice (half a list would judge half an inventory)."""
    if not v.slices_listed:
        return NOTHING
    d = desired(node, v.slices)
    if d.inventory_error:
        msg = f"Could not verify Slurm GRES compatibility: {d.inventory_error}"
        acts = _gres_condition(node, "Unknown", wellknown.REASON_GRES_VERIFICATION_ERROR, msg)
        return Decision(actions=acts, reason=msg) if acts else NOTHING
    if not d.dra.gres:
        clear = _extra(v, slurm, d)
        if isinstance(clear, tuple) and clear:
            return Decision(actions=clear, reason="no indexed GRES left: our Extra cleared")
        return NOTHING
    missing = _devprofile.missing_gres(slurm.gres, d.dra.gres)
    if missing:
        lines = "\n".join(f"NodeName={slurm.key} {line}" for line in d.dra.conf_lines)
        msg = (
            f"slurm node {slurm.key!r} has GRES {slurm.gres!r}, which is incompatible with "
            f"required DRA GRES {d.dra.gres!r}; gres.conf needs equivalent inventory entries "
            "(include the File, AutoDetect, and Flags settings appropriate for the hardware):"
            f"\n{lines}"
        )
        acts = _gres_condition(node, "False", wellknown.REASON_GRES_INCOMPATIBLE, msg)
    else:
        acts = _compatible(v, node, slurm, d)
    return Decision(actions=acts, reason="hybrid node GRES checked") if acts else NOTHING


def _event(
    node: KubeNode,
    reason: str,
    message: str,
    *,
    warning: bool = False,
    on: tuple[str, ...] = ("ok",),
) -> RecordEvent:
    return RecordEvent(
        api_version="v1",
        object_kind="Node",
        name=node.key,
        uid=node.uid,
        type="Warning" if warning else "Normal",
        reason=reason,
        message=message,
        on=on,
    )


def _drained_idle(slurm: SlurmNode) -> bool:
    return slurm.drained


def _leave(v: View, node: KubeNode, slurm: SlurmNode, reason: str, why: str) -> Decision:
    """Drain (once), then delete when drained and idle."""
    if not slurm.has("DRAIN"):
        return Decision(
            actions=(
                DrainSlurmNode(cluster=v.cluster, node=slurm.key, reason=reason),
                _event(node, "SlurmNodeDrain", f"Draining external Slurm node {slurm.key}: {why}"),
            ),
            reason=why,
        )
    if not slurm.reason.startswith(OWNED):
        return Decision(reason=f"drained by someone else ({slurm.reason!r}); not deleting")
    if not _drained_idle(slurm):
        return Decision(reason=f"{why}; waiting for the jobs on {slurm.key} to end")
    return Decision(
        actions=(
            DeleteSlurmNode(cluster=v.cluster, node=slurm.key, owned_prefixes=OWNED),
            _event(node, "SlurmNodeDeleted", f"Deleted external Slurm node {slurm.key}: {why}"),
        ),
        reason=why,
    )


def decide(v: View) -> Decision:
    """Create, update, re-create or remove the external Slurm node (module docstring)."""
    node, slurm = v.node, v.slurm
    if node is None:
        return Decision(reason="Kubernetes node is gone")
    if not v.listed:
        # Before a complete listing, a missing Slurm node or partition proves nothing: every
        # labelled node would get a new/node refused with 2168, or a false PartitionNotFound.
        # The listing's ping is published last and triggers nothing here: look again soon.
        return Decision(requeue_after=LISTING_WAIT_S, reason="waiting for a complete Slurm listing")
    if not is_external(node):
        if slurm is None:
            return NOTHING
        if not (slurm.has("EXTERNAL") or slurm.reason.startswith(OWNED)):
            return _hybrid(v, node, slurm)
        return _leave(
            v,
            node,
            slurm,
            wellknown.external_removal_reason(node.key),
            "external-node label removed",
        )
    d = desired(node, v.slices)
    if d.topology and not _TOPOLOGY.fullmatch(d.topology):
        msg = (
            f"annotation {wellknown.ANNOTATION_TOPOLOGY_SPEC}: {d.topology!r} is not a "
            "topology spec (letters, digits and _ . : , - only): the node is not registered"
        )
        cond = _condition(node, "False", "InvalidAnnotation", msg)
        if not cond:
            return Decision(reason=msg)
        return Decision(
            actions=(*cond, _event(node, "InvalidAnnotation", msg, warning=True)), reason=msg
        )
    missing = sorted(set(d.partitions) - v.partitions)
    if missing:
        msg = f"Slurm has no partition {', '.join(missing)}: the node is not registered"
        cond = _condition(node, "False", "PartitionNotFound", msg)
        if not cond:
            return Decision(reason=msg)
        return Decision(
            actions=(*cond, _event(node, "PartitionNotFound", msg, warning=True)), reason=msg
        )
    if d.inventory_error:
        # Slinky: the inventory error is recorded and nothing is sent to Slurm.
        msg = f"Could not verify Slurm GRES compatibility: {d.inventory_error}"
        acts = _gres_condition(node, "Unknown", wellknown.REASON_GRES_VERIFICATION_ERROR, msg)
        return Decision(actions=acts, reason=msg)
    if slurm is None:
        return Decision(
            actions=(
                CreateSlurmNode(cluster=v.cluster, node=d.name, node_conf=node_conf(d)),
                _event(node, "SlurmNodeRegistered", f"Registered in Slurm: {node_conf(d)}"),
                _event(
                    node,
                    "SlurmNodeUnsupported",
                    "The Slurm REST API cannot create nodes (needs v0.0.44+, Slurm 25.11): "
                    "the node is not registered",
                    warning=True,
                    on=("unsupported",),
                ),
            ),
            reason="register external node",
        )
    if not slurm.has("EXTERNAL") and not slurm.reason.startswith(OWNED):
        # A node from slurm.conf or registered by its own slurmd: re-registering it would
        # delete a real compute node's record (Slurm refuses with 2028, "Can't delete
        # non-dynamic node", for slurm.conf nodes). Leave it, and say why.
        msg = (
            f"Slurm node {slurm.key} already exists and is not an external node (it is "
            "defined in slurm.conf or registered by its slurmd): not registered; remove the "
            f"label {wellknown.LABEL_EXTERNAL_NODE} or use another Slurm node name"
        )
        cond = _condition(node, "False", "NotExternal", msg)
        if not cond:
            return Decision(reason=msg)
        return Decision(actions=(*cond, _event(node, "NotExternal", msg, warning=True)), reason=msg)
    resources_changed = (
        slurm.cpus != d.cpus
        or slurm.real_memory != d.real_memory
        or not _devprofile.gres_equal(slurm.gres, d.gres)
    )
    if partition_features(slurm) != tuple(sorted(d.partitions)):
        # Slurm places a dynamic node in the partitions whose NodeSet features it has when
        # it is created; a later feature update leaves its partitions as they were (Slurm
        # 26.05.5, recorded), so only a new node joins the new partitions.
        return _leave(
            v,
            node,
            slurm,
            wellknown.external_repartition_reason(node.key),
            f"partitions changed ({','.join(partition_features(slurm)) or 'none'}→"
            f"{','.join(sorted(d.partitions)) or 'none'}): re-registering",
        )
    if resources_changed:
        return _leave(
            v,
            node,
            slurm,
            wellknown.external_resize_reason(node.key),
            f"resources changed (CPUs {slurm.cpus}→{d.cpus}, RealMemory "
            f"{slurm.real_memory}→{d.real_memory}, Gres {slurm.gres!r}→{d.gres!r})",
        )
    actions: list[AnyAction] = []
    if slurm.has("DRAIN") and slurm.reason.startswith(OWNED):
        # A removal or re-registration was reversed before it completed: our drain goes.
        actions.append(UndrainSlurmNode(cluster=v.cluster, node=slurm.key, owned_prefixes=OWNED))
    if slurm.topology is not None and slurm.topology != d.topology:
        # Slinky's updateNodeTopology: in place, no re-registration (Slurm 26.05.5 moves the
        # node between blocks at once, recorded); None: the API version does not report
        # topology, so there is nothing to compare and no update is sent.
        what = f"to {d.topology!r}" if d.topology else "cleared"
        actions.append(
            UpdateSlurmNodeTopology(cluster=v.cluster, node=slurm.key, topology=d.topology)
        )
        actions.append(_event(node, "SlurmNodeTopology", f"Slurm node {slurm.key} topology {what}"))
    actions.extend(_condition(node, "True", "Registered", f"Slurm node {slurm.key} is registered"))
    if d.dra.gres:
        actions.extend(_compatible(v, node, slurm, d))
    elif v.slices_listed:
        clear = _extra(v, slurm, d)
        if isinstance(clear, tuple):
            actions.extend(clear)
    if not actions:
        return NOTHING
    return Decision(actions=tuple(actions), reason="external node in step")


def _waiting_for(event: SlurmPartition, store: Store, ctx: Context) -> Iterable[str]:
    """The external nodes that name the partition and are not registered yet (its appearing
    may unblock them; registered nodes do not care how a partition's node list changes)."""
    if event.cluster and event.cluster != ctx.cluster:
        return []
    return [
        n.key
        for n in store.values(KubeNode)
        if is_external(n)
        and event.key in partitions_of(n)
        and _nodes.slurm_node_for(n, store, ctx) is None
    ]


def _node_of_slice(event: KubeResourceSlice, _store: Store, _ctx: Context) -> Iterable[str]:
    """A slice's node (its GPUs may change the node's Gres)."""
    return [event.node] if event.node else []


def all_keys(store: Store, ctx: Context) -> Iterable[str]:
    """External nodes, nodes with ResourceSlices (a hybrid node's GRES check), and nodes
    whose Slurm counterpart is EXTERNAL (a removed label)."""
    out = []
    for n in store.values(KubeNode):
        if is_external(n) or any(
            not s.deleted for s in store.by_field(KubeResourceSlice, "node", n.key)
        ):
            out.append(n.key)
        else:
            s = _nodes.slurm_node_for(n, store, ctx)
            if s is not None and (s.has("EXTERNAL") or s.reason.startswith(OWNED)):
                out.append(n.key)
    return out


SPEC = ReconcilerSpec(
    name=NAME,
    # KubeNode ⇒ itself; SlurmNode ⇒ the nodes mapping to it; SlurmPartition ⇒ the nodes
    # waiting for it.
    keys={**_nodes.NODE_KEYS, SlurmPartition: _waiting_for, KubeResourceSlice: _node_of_slice},
    # A node's jobs starting and ending matter only through ``drained``.
    reads={SlurmNode: _nodes.slurm_node_config},
    key_kind="KubeNode",
    all_keys=all_keys,
    view=view,
    decide=decide,
    description="register labelled Kubernetes nodes in Slurm as external nodes",
)
