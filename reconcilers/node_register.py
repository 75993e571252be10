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
* the Slurm feature ``slurm_bridge_gres_compatible``, which every bridge job requires
  (:mod:`reconcilers.placement`), is on every registered external node and on every slurmd
  node (any Kubernetes node Slurm knows that is not external) whose GRES are compatible —
  also one with no DRA device at all, which has nothing to verify — and is taken off a
  slurmd node whose condition turns ``False`` or ``Unknown`` and off an external node whose
  inventory cannot be read; it is put into, or taken out of, the node's available and
  active sets separately, every other feature kept (Slinky slurmcontrol
  ``updateGRESCompatibilityFeature``, ``DisableNodeGRESCompatibility``). A slurmd node with
  no DRA device in the log is judged compatible (condition ``True``) once the ResourceSlice
  listing is complete, and gets the feature before it, so a cluster serving no DRA still
  places jobs; nothing is taken off before that listing;
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
(Slinky's controllers flap there). Triggers: KubeNode, SlurmNode, SlurmPartition, KubeResourceSlice,
KubeListed ``resourceslices``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

import msgspec

from reconcilers import _devprofile, _dra, _nodes
from reconcilers._steps import Plan, Step, Stop, run
from reconcilers.base import (
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
    SetNodeCondition,
    SetSlurmNodeExtra,
    SetSlurmNodeFeature,
    UndrainSlurmNode,
    UpdateSlurmNodeTopology,
)
from schemas.events import KubeListed, KubeNode, KubeResourceSlice, SlurmNode, SlurmPartition
from schemas.subjects import slurm_source

NAME = "node_register"
MIB = 1024 * 1024
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
    #: The cluster's REST API updates nodes, so the feature is managed
    #: (:func:`reconcilers._nodes.gres_feature_required`).
    feature: bool = True


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
        feature=_nodes.gres_feature_required(store, ctx.cluster),
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


def _set_condition(
    node: KubeNode, type_: str, status: str, reason: str, message: str
) -> tuple[AnyAction, ...]:
    """Set condition ``type_`` on ``node`` unless it already reads so (nothing then)."""
    cur = node.condition(type_)
    if cur is not None and (cur.status, cur.reason, cur.message) == (status, reason, message):
        return ()
    return (
        SetNodeCondition(node=node.key, type=type_, status=status, reason=reason, message=message),
    )


def _condition(node: KubeNode, status: str, reason: str, message: str) -> tuple[AnyAction, ...]:
    return _set_condition(node, wellknown.CONDITION_SLURM_REGISTERED, status, reason, message)


def _gres_condition(
    node: KubeNode, status: str, reason: str, message: str
) -> tuple[AnyAction, ...]:
    """Set ``SlinkySlurmGRESCompatible`` when it differs; a Warning Event when it turns
    ``False`` (Slinky ``recordSlurmGRESCompatibilityError``: on a transition only)."""
    cur = node.condition(wellknown.CONDITION_SLURM_GRES_COMPATIBLE)
    out = list(
        _set_condition(node, wellknown.CONDITION_SLURM_GRES_COMPATIBLE, status, reason, message)
    )
    if out and status == "False" and (cur is None or cur.status != "False"):
        out.append(_nodes.node_event(node, reason, message, warning=True))
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


def _feature(v: View, slurm: SlurmNode, present: bool) -> tuple[AnyAction, ...]:
    """``slurm_bridge_gres_compatible`` put on (``present``) or taken off the Slurm node, in
    its available and its active set, when either differs (Slinky slurmcontrol
    ``updateGRESCompatibilityFeature``; every other feature is kept)."""
    f = wellknown.FEATURE_GRES_COMPATIBLE
    active = slurm.active_features if slurm.active_features is not None else slurm.features
    if not v.feature or ((f in slurm.features) == present and (f in active) == present):
        return ()
    return (SetSlurmNodeFeature(cluster=v.cluster, node=slurm.key, feature=f, present=present),)


def _compatible(
    v: View, node: KubeNode, slurm: SlurmNode, d: Desired, *, hybrid: bool
) -> tuple[AnyAction, ...]:
    """The applied inventory written, the condition True and (on a slurmd node) the feature
    put on — or the condition Unknown when the node's ``Extra`` is someone else's, and then a
    slurmd node loses the feature (Slinky ``reconcileHybridNode``: an ``updateNodeExtra``
    failure disables compatibility; an external node keeps its feature, as Slinky's
    ``AddNode`` does)."""
    extra = _extra(v, slurm, d)
    if isinstance(extra, str):
        msg = f"Could not verify Slurm GRES compatibility: {extra}"
        return (
            *_gres_condition(node, "Unknown", wellknown.REASON_GRES_VERIFICATION_ERROR, msg),
            *(_feature(v, slurm, False) if hybrid else ()),
        )
    return (
        *extra,
        *_gres_condition(
            node,
            "True",
            wellknown.REASON_GRES_COMPATIBLE,
            "Slurm GRES configuration is compatible with the Kubernetes DRA inventory.",
        ),
        *_feature(v, slurm, True),
    )


def _hybrid_actions(v: View, node: KubeNode, slurm: SlurmNode) -> tuple[AnyAction, ...]:
    """A slurmd-registered node's GRES against its DRA inventory, and the
    ``slurm_bridge_gres_compatible`` feature with the verdict (module docstring; Slinky
    ``syncNodeRegistration`` hybrid branch, ``reconcileHybridNode``,
    ``DisableNodeGRESCompatibility``).

    Before the log holds every ResourceSlice nothing is judged and nothing is taken off
    (half a list would judge half an inventory); only a node whose slices seen so far hold no
    device of any profile gets the feature, as it has nothing to verify — so a cluster whose
    API server serves no DRA (no listing ever comes) still places jobs on its nodes."""
    d = desired(node, v.slices)
    if not v.slices_listed:
        if d.inventory_error or d.dra.gres or any(not s.deleted for s in v.slices):
            return ()
        return _feature(v, slurm, True)
    if d.inventory_error:
        msg = f"Could not verify Slurm GRES compatibility: {d.inventory_error}"
        return (
            *_gres_condition(node, "Unknown", wellknown.REASON_GRES_VERIFICATION_ERROR, msg),
            *_feature(v, slurm, False),
        )
    if not d.dra.gres:
        clear = _extra(v, slurm, d)
        return (
            *(clear if isinstance(clear, tuple) else ()),
            *_gres_condition(
                node,
                "True",
                wellknown.REASON_GRES_COMPATIBLE,
                "Slurm GRES configuration is compatible with the Kubernetes DRA inventory.",
            ),
            *_feature(v, slurm, True),
        )
    missing = _devprofile.missing_gres(slurm.gres, d.dra.gres)
    if missing:
        lines = "\n".join(f"NodeName={slurm.key} {line}" for line in d.dra.conf_lines)
        msg = (
            f"slurm node {slurm.key!r} has GRES {slurm.gres!r}, which is incompatible with "
            f"required DRA GRES {d.dra.gres!r}; gres.conf needs equivalent inventory entries "
            "(include the File, AutoDetect, and Flags settings appropriate for the hardware):"
            f"\n{lines}"
        )
        return (
            *_gres_condition(node, "False", wellknown.REASON_GRES_INCOMPATIBLE, msg),
            *_feature(v, slurm, False),
        )
    return _compatible(v, node, slurm, d, hybrid=True)


def _hybrid(plan: Plan, v: View, node: KubeNode, slurm: SlurmNode) -> Stop:
    """:func:`_hybrid_actions` into the plan (Slinky slurm-bridge node controller, node_sync.go
    ``syncNodeRegistration`` for an unlabelled node Slurm knows and not as EXTERNAL,
    slurmcontrol.go ``UpdateHybridNode``)."""
    acts = _hybrid_actions(v, node, slurm)
    plan.extend(acts)
    return plan.stop("hybrid node GRES checked" if acts else None)


def _drained_idle(slurm: SlurmNode) -> bool:
    return slurm.drained


def _leave(
    plan: Plan, s: _Subject, slurm: SlurmNode, reason_of: Callable[[str], str], why: str
) -> Stop:
    """Drain (once, with the reason ``reason_of`` gives for the Kubernetes node's name), then
    delete when drained and idle (Slinky slurm-bridge node controller, node_sync.go
    ``removeNodeFromSlurmAfterDrain``)."""
    v, node, reason = s.v, s.node, reason_of(s.node.key)
    if not slurm.has("DRAIN"):
        plan.add(
            DrainSlurmNode(cluster=v.cluster, node=slurm.key, reason=reason),
            _nodes.node_event(
                node, "SlurmNodeDrain", f"Draining external Slurm node {slurm.key}: {why}"
            ),
        )
        return plan.stop(why)
    if not slurm.reason.startswith(OWNED):
        return plan.stop(f"drained by someone else ({slurm.reason!r}); not deleting")
    if not _drained_idle(slurm):
        return plan.stop(f"{why}; waiting for the jobs on {slurm.key} to end")
    plan.add(
        DeleteSlurmNode(cluster=v.cluster, node=slurm.key, owned_prefixes=OWNED),
        _nodes.node_event(
            node, "SlurmNodeDeleted", f"Deleted external Slurm node {slurm.key}: {why}"
        ),
    )
    return plan.stop(why)


@dataclass(frozen=True)
class _Subject:
    """The node under reconcile: the view, its Kubernetes node (present) and — computed once,
    when a step first asks — the Slurm node it should have."""

    v: View
    node: KubeNode

    @cached_property
    def want(self) -> Desired:
        """:func:`desired` of the node and its slices."""
        return desired(self.node, self.v.slices)


def _refuse(plan: Plan, node: KubeNode, reason: str, msg: str) -> Stop:
    """Nothing is sent to Slurm: ``SlurmNodeRegistered=False`` with ``reason`` and, when the
    condition turns so, a Warning Event; the decision says why either way."""
    cond = _condition(node, "False", reason, msg)
    if cond:
        plan.extend((*cond, _nodes.node_event(node, reason, msg, warning=True)))
    return plan.stop(msg)


def _await_listing(plan: Plan, s: _Subject) -> Stop | None:
    """Before a complete listing, a missing Slurm node or partition proves nothing: every
    labelled node would get a new/node refused with 2168, or a false PartitionNotFound. The
    listing's ping is published last and triggers nothing here: look again soon."""
    if s.v.listed:
        return None
    plan.requeue(LISTING_WAIT_S)
    return plan.stop("waiting for a complete Slurm listing")


def _unlabelled(plan: Plan, s: _Subject) -> Stop | None:
    """A node without the label: an external Slurm node of it (or one we drained) is drained
    and deleted, a slurmd node's GRES are checked (Slinky slurm-bridge node controller,
    node_sync.go ``syncNodeRegistration``, the branch without ``LabelExternalNode``)."""
    slurm = s.v.slurm
    if is_external(s.node):
        return None
    if slurm is None:
        return plan.stop()
    if not (slurm.has("EXTERNAL") or slurm.reason.startswith(OWNED)):
        return _hybrid(plan, s.v, s.node, slurm)
    return _leave(
        plan,
        s,
        slurm,
        wellknown.external_removal_reason,
        "external-node label removed",
    )


def _invalid_topology(plan: Plan, s: _Subject) -> Stop | None:
    """A topology annotation Slurm would not read as one ``Topology=`` value is refused
    (Slinky ``AddNode`` copies it into the node line unchecked)."""
    topology = s.want.topology
    if not topology or _TOPOLOGY.fullmatch(topology):
        return None
    msg = (
        f"annotation {wellknown.ANNOTATION_TOPOLOGY_SPEC}: {topology!r} is not a "
        "topology spec (letters, digits and _ . : , - only): the node is not registered"
    )
    return _refuse(plan, s.node, "InvalidAnnotation", msg)


def _missing_partitions(plan: Plan, s: _Subject) -> Stop | None:
    """Every partition named must exist in Slurm first (Slinky slurmcontrol.go ``AddNode``,
    ``validatePartitionExists``)."""
    missing = sorted(set(s.want.partitions) - s.v.partitions)
    if not missing:
        return None
    msg = f"Slurm has no partition {', '.join(missing)}: the node is not registered"
    return _refuse(plan, s.node, "PartitionNotFound", msg)


def _unreadable_inventory(plan: Plan, s: _Subject) -> Stop | None:
    """Slinky: the inventory error is recorded, nothing is registered, and an existing node
    stops advertising compatibility (node_sync.go ``nodeRegistrationInventories`` failing
    ``syncNodeRegistration``; slurmcontrol.go ``DisableNodeGRESCompatibility``)."""
    if not s.want.inventory_error:
        return None
    msg = f"Could not verify Slurm GRES compatibility: {s.want.inventory_error}"
    plan.extend(_gres_condition(s.node, "Unknown", wellknown.REASON_GRES_VERIFICATION_ERROR, msg))
    if s.v.slurm is not None and s.v.slices_listed:
        plan.extend(_feature(s.v, s.v.slurm, False))
    return plan.stop(msg)


def _register(plan: Plan, s: _Subject) -> Stop | None:
    """No Slurm node yet: create it from :func:`node_conf` (Slinky slurmcontrol.go
    ``AddNode``); the Warning Event is recorded only when the REST API cannot create
    nodes."""
    if s.v.slurm is not None:
        return None
    conf = node_conf(s.want)
    plan.add(
        CreateSlurmNode(cluster=s.v.cluster, node=s.want.name, node_conf=conf),
        _nodes.node_event(s.node, "SlurmNodeRegistered", f"Registered in Slurm: {conf}"),
        _nodes.node_event(
            s.node,
            "SlurmNodeUnsupported",
            "The Slurm REST API cannot create nodes (needs v0.0.44+, Slurm 25.11): "
            "the node is not registered",
            warning=True,
            on=("unsupported",),
        ),
    )
    return plan.stop("register external node")


def _not_external(plan: Plan, s: _Subject) -> Stop | None:
    """A node from slurm.conf or registered by its own slurmd: re-registering it would
    delete a real compute node's record (Slurm refuses with 2028, "Can't delete non-dynamic
    node", for slurm.conf nodes). Leave it, and say why."""
    slurm = s.v.slurm
    if slurm is None or slurm.has("EXTERNAL") or slurm.reason.startswith(OWNED):
        return None
    msg = (
        f"Slurm node {slurm.key} already exists and is not an external node (it is "
        "defined in slurm.conf or registered by its slurmd): not registered; remove the "
        f"label {wellknown.LABEL_EXTERNAL_NODE} or use another Slurm node name"
    )
    stop = _refuse(plan, s.node, "NotExternal", msg)
    # Still a node bridge jobs run on: its GRES are checked as any slurmd node's (Slinky
    # reconcileHybridNode for a labelled node that is not external).
    plan.extend(_hybrid_actions(s.v, s.node, slurm))
    return stop


def _repartitioned(plan: Plan, s: _Subject) -> Stop | None:
    """Slurm places a dynamic node in the partitions whose NodeSet features it has when it
    is created; a later feature update leaves its partitions as they were (Slurm 26.05.5,
    recorded), so only a new node joins the new partitions: drain, delete, create again."""
    slurm, d = s.v.slurm, s.want
    if slurm is None or partition_features(slurm) == tuple(sorted(d.partitions)):
        return None
    return _leave(
        plan,
        s,
        slurm,
        wellknown.external_repartition_reason,
        f"partitions changed ({','.join(partition_features(slurm)) or 'none'}→"
        f"{','.join(sorted(d.partitions)) or 'none'}): re-registering",
    )


def _resized(plan: Plan, s: _Subject) -> Stop | None:
    """CPUs, memory or GRES changed: drain, delete, create again (Slinky slurmcontrol.go
    ``NodeNeedsRecreate``, then node_sync.go ``removeNodeFromSlurmAfterDrain``)."""
    slurm, d = s.v.slurm, s.want
    if slurm is None or (
        slurm.cpus == d.cpus
        and slurm.real_memory == d.real_memory
        and _devprofile.gres_equal(slurm.gres, d.gres)
    ):
        return None
    return _leave(
        plan,
        s,
        slurm,
        wellknown.external_resize_reason,
        f"resources changed (CPUs {slurm.cpus}→{d.cpus}, RealMemory "
        f"{slurm.real_memory}→{d.real_memory}, Gres {slurm.gres!r}→{d.gres!r})",
    )


def _reversed_removal(plan: Plan, s: _Subject) -> Stop | None:
    """A removal or re-registration was reversed before it completed: our drain goes."""
    slurm = s.v.slurm
    if slurm is not None and slurm.has("DRAIN") and slurm.reason.startswith(OWNED):
        plan.add(UndrainSlurmNode(cluster=s.v.cluster, node=slurm.key, owned_prefixes=OWNED))
    return None


def _topology(plan: Plan, s: _Subject) -> Stop | None:
    """Slinky's ``updateNodeTopology``: in place, no re-registration (Slurm 26.05.5 moves the
    node between blocks at once, recorded); a Slurm node whose topology is None (the API
    version does not report it) has nothing to compare, and no update is sent."""
    slurm, topology = s.v.slurm, s.want.topology
    if slurm is None or slurm.topology is None or slurm.topology == topology:
        return None
    what = f"to {topology!r}" if topology else "cleared"
    plan.add(
        UpdateSlurmNodeTopology(cluster=s.v.cluster, node=slurm.key, topology=topology),
        _nodes.node_event(s.node, "SlurmNodeTopology", f"Slurm node {slurm.key} topology {what}"),
    )
    return None


def _registered(plan: Plan, s: _Subject) -> Stop | None:
    """``SlurmNodeRegistered=True`` once the node is in step."""
    if s.v.slurm is not None:
        key = s.v.slurm.key
        plan.extend(_condition(s.node, "True", "Registered", f"Slurm node {key} is registered"))
    return None


def _applied_inventory(plan: Plan, s: _Subject) -> Stop | None:
    """The applied DRA inventory in the Slurm node's ``Extra`` and the GRES condition
    (Slinky slurmcontrol.go ``updateNodeExtra``); with no indexed GRES left, our ``Extra``
    is cleared once the log holds every ResourceSlice."""
    slurm, d = s.v.slurm, s.want
    if slurm is None:
        return None
    if d.dra.gres:
        plan.extend(_compatible(s.v, s.node, slurm, d, hybrid=False))
        return None
    if s.v.slices_listed:
        clear = _extra(s.v, slurm, d)
        if isinstance(clear, tuple):
            plan.extend(clear)
    # Registered with it; one registered before it was (an older slurmbridge) gets it now
    # (Slinky updateNodeFeatures: every external node carries it).
    plan.extend(_feature(s.v, slurm, True))
    return None


def _in_step(plan: Plan, _s: _Subject) -> Stop | None:
    """The reason of a registered node's decision: "in sync" when nothing is to be done."""
    if plan.actions:
        plan.reason = "external node in step"
    return None


#: The rules in the order they decide (module docstring): the first that refuses, waits,
#: registers or removes ends the list; a registered node runs to the end.
STEPS: tuple[Step[Plan, _Subject], ...] = (
    _await_listing,
    _unlabelled,
    _invalid_topology,
    _missing_partitions,
    _unreadable_inventory,
    _register,
    _not_external,
    _repartitioned,
    _resized,
    _reversed_removal,
    _topology,
    _registered,
    _applied_inventory,
    _in_step,
)


def decide(v: View) -> Decision:
    """Create, update, re-create or remove the external Slurm node: :data:`STEPS` over the
    node (module docstring)."""
    if v.node is None:
        return Decision(reason="Kubernetes node is gone")
    return run(STEPS, Plan(), _Subject(v, v.node))


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


def _after_listing(event: KubeListed, store: Store, ctx: Context) -> Iterable[str]:
    """The ResourceSlice listing completing: every node's GRES can now be judged."""
    return all_keys(store, ctx) if event.key == "resourceslices" else []


def all_keys(store: Store, ctx: Context) -> Iterable[str]:
    """External nodes, nodes with ResourceSlices, and every node Slurm knows (a slurmd
    node's GRES check and its ``slurm_bridge_gres_compatible`` feature; an EXTERNAL one
    whose label was removed)."""
    return [
        n.key
        for n in store.values(KubeNode)
        if is_external(n)
        or any(not s.deleted for s in store.by_field(KubeResourceSlice, "node", n.key))
        or _nodes.slurm_node_for(n, store, ctx) is not None
    ]


SPEC = ReconcilerSpec(
    name=NAME,
    # KubeNode ⇒ itself; SlurmNode ⇒ the nodes mapping to it; SlurmPartition ⇒ the nodes
    # waiting for it.
    keys={
        **_nodes.NODE_KEYS,
        SlurmPartition: _waiting_for,
        KubeResourceSlice: _node_of_slice,
        KubeListed: _after_listing,
    },
    # A node's jobs starting and ending matter only through ``drained``.
    reads={SlurmNode: _nodes.slurm_node_config},
    key_kind="KubeNode",
    all_keys=all_keys,
    view=view,
    decide=decide,
    description="register labelled Kubernetes nodes in Slurm as external nodes",
)
