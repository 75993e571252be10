"""Version-neutral Slurm models: what the client returns whichever REST API version it speaks.

The per-version codecs (:mod:`slurmbridge.slurm.codecs`) decode slurmrestd's responses into
these frozen msgspec Structs, and the Slurm producer translates them into the ``SlurmNode`` /
``SlurmPartition`` / ``SlurmPing`` events of :mod:`schemas.events` field by field, so the names,
units and conventions here are the events' ones:

* node ``state`` is upper case, the base state first, then the flags in the order Slurm lists
  them: ``("IDLE", "DRAIN")`` is drained, ``("ALLOCATED", "DRAIN")`` / ``("MIXED", "DRAIN")``
  is draining (v0.0.38's lower-case ``state`` + ``state_flags`` pair and v0.0.40+'s state array
  both map onto it);
* times are whole seconds since the epoch, ``0`` when Slurm has none;
* memory is in MiB, time limits in minutes, ``None`` when Slurm says INFINITE or unset;
* strings Slurm leaves unset (``null`` in v0.0.38) are ``""``.
"""

from __future__ import annotations

from typing import Final

import msgspec

from schemas import wellknown
from schemas.actions import SlurmJobSpec

__all__ = [
    "BASE_STATES",
    "PLACEHOLDER_SCRIPT",
    "Job",
    "JobGres",
    "JobList",
    "JobNodeResources",
    "JobSubmit",
    "Node",
    "NodeList",
    "NodeUpdate",
    "Partition",
    "PartitionDesc",
    "PartitionList",
    "Ping",
    "Reservation",
    "ReservationDesc",
]

#: Slurm's base node states (``NODE_STATE_BASE`` values); anything else in a state list is a flag.
#: ``EXTERNAL`` and ``INVALID`` are kept here for codecs' sake although Slurm reports EXTERNAL
#: as a flag after the base state (``["IDLE", "EXTERNAL", "DYNAMIC_NORM"]``), so the base
#: state of an external node is still ``IDLE`` (the first base state in the list wins).
BASE_STATES: Final[frozenset[str]] = wellknown.SLURM_BASE_STATES


class Node(msgspec.Struct, frozen=True, kw_only=True):
    """One Slurm node.

    ``state``: base state then flags, upper case (see the module docstring).
    ``reason`` / ``reason_set_by_user`` / ``reason_changed_at``: why the node is DOWN or
    DRAIN, who set it (a user name) and when (epoch seconds, 0 = unset).
    ``cpus`` / ``alloc_cpus``: configured and allocated CPUs. ``real_memory``: MiB.
    ``features``: available features. ``active_features``: the active ones (REST
    ``active_features``; a NodeFeatures plugin such as ``knl``/``helpers`` keeps only some of
    the available ones active; ``None`` when the version does not report them).
    ``partitions``: partitions containing the node.
    ``gres``: generic resources as Slurm prints them (``gpu:2``). ``address``: NodeAddr.
    ``topology``: a dynamic node's topology spec (``topo1:b1``; ``""`` none); ``None`` when
    the API version does not report it (before v0.0.43). ``reservation``: the active
    reservation the node is in (``""`` none; always ``""`` on v0.0.38). ``extra``: the
    node's free-form ``Extra`` string (slurmbridge keeps its applied DRA inventory there, as
    Slinky slurm-bridge 1.3 does; ``""`` none).
    """

    name: str
    state: tuple[str, ...] = ()
    reason: str = ""
    reason_set_by_user: str = ""
    reason_changed_at: int = 0
    cpus: int = 0
    alloc_cpus: int = 0
    real_memory: int = 0
    features: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    gres: str = ""
    address: str = ""
    comment: str = ""
    topology: str | None = None
    reservation: str = ""
    extra: str = ""
    active_features: tuple[str, ...] | None = None

    @property
    def base_state(self) -> str:
        """The base state (``IDLE``, ``ALLOCATED`` …), ``""`` when Slurm reported none."""
        return self.state[0] if self.state and self.state[0] in BASE_STATES else ""

    @property
    def flags(self) -> tuple[str, ...]:
        """The state flags (``DRAIN``, ``NOT_RESPONDING`` …) without the base state."""
        return self.state[1:] if self.base_state else self.state

    def has(self, flag: str) -> bool:
        """True when ``flag`` (a base state or a flag, upper case) is in the node's state."""
        return flag in self.state

    @property
    def drained(self) -> bool:
        """Drained and running nothing: DRAIN, not UNDRAIN (an undrain under way: an
        administrator's, which a deletion must never race), and not ALLOCATED, MIXED or
        COMPLETING. The one test before deleting a node or its pod (Slinky slurm-operator's
        ``IsNodeDrained``; issue 18)."""
        return wellknown.slurm_drained(self.state)

    @property
    def busy(self) -> bool:
        """Running or finishing a job (:func:`schemas.wellknown.slurm_busy`)."""
        return wellknown.slurm_busy(self.state)


class NodeList(msgspec.Struct, frozen=True, kw_only=True):
    """A full node listing.

    ``last_update``: the value to pass back as ``update_time`` for the next conditional poll
    (epoch seconds): Slurm's time of the last change, lowered when that change is so recent
    that a later change could fall into the same second (Slurm compares whole seconds, so
    it would be missed) — see :class:`~slurmbridge.slurm.client.SlurmClient`. Also set on
    v0.0.38, which reports no time, from the request time. ``0`` = unknown.
    ``server_last_update``: Slurm's own ``last_update`` as reported (0 on v0.0.38).
    """

    nodes: tuple[Node, ...] = ()
    last_update: int = 0
    server_last_update: int = 0


class Partition(msgspec.Struct, frozen=True, kw_only=True):
    """One Slurm partition.

    ``state``: ``UP`` / ``DOWN`` / ``DRAIN`` / ``INACTIVE``. ``nodes``: the expanded node
    names (``n[1-2]`` ⇒ ``("n1", "n2")``). ``max_time_minutes``: MaxTime in minutes, ``None``
    for INFINITE or unset. ``is_default``: the default partition — v0.0.42-v0.0.44 do not
    report it and always give ``False``.
    """

    name: str
    state: str = ""
    nodes: tuple[str, ...] = ()
    total_cpus: int = 0
    total_nodes: int = 0
    max_time_minutes: int | None = None
    is_default: bool = False


class PartitionList(msgspec.Struct, frozen=True, kw_only=True):
    """A full partition listing; ``last_update`` / ``server_last_update`` as in
    :class:`NodeList`."""

    partitions: tuple[Partition, ...] = ()
    last_update: int = 0
    server_last_update: int = 0


class Ping(msgspec.Struct, frozen=True, kw_only=True):
    """slurmrestd's answer to ``GET …/ping``.

    ``responding``: at least one slurmctld answered. ``hostnames``: the controllers pinged,
    primary first. ``api_version``: the REST API version that answered (``v0.0.44``).
    ``error``: Slurm's error text when no controller responded or errors were reported.
    """

    responding: bool = False
    hostnames: tuple[str, ...] = ()
    api_version: str = ""
    error: str = ""


class NodeUpdate(msgspec.Struct, frozen=True, kw_only=True):
    """A change to one node (``scontrol update nodename=… …``); ``None`` fields stay as they are.

    ``state``: new state(s), upper case: ``("DRAIN",)`` (with a ``reason``), ``("UNDRAIN",)``
    (clear DRAIN, keep the rest), ``("RESUME",)`` (clear DRAIN/DOWN/FAIL), ``("DOWN",)`` …
    ``features``: the node's new available features (replaces the list; ``()`` clears it;
    without a NodeFeatures plugin Slurm sets the active features to the same list). Each is one
    feature name: no empty names, no commas (Slurm joins the list with commas).
    ``active_features``: the node's new active features (``features_act``); ``None`` sends
    ``features`` as the active set too (a node without a NodeFeatures plugin, where both are
    one list). Give both when the node's active set differs from its available one: Slurm
    26.05 refuses an active set that is not a subset of the available one (error 2031).
    ``comment``: free text. ``topology``: a dynamic node's topology spec
    (``name:unit[,name:unit]``, ``""`` clears it; ``update_node_msg.topology_str``, v0.0.43+).
    ``extra``: the node's ``Extra`` string (``""`` clears it; ``update_node_msg.extra``).
    """

    state: tuple[str, ...] = ()
    reason: str | None = None
    features: tuple[str, ...] | None = None
    comment: str | None = None
    topology: str | None = None
    extra: str | None = None
    active_features: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        """Reject lower-case states and empty updates early, before anything is sent.

        Raises:
            ValueError: a state is not upper case, a feature is empty or has a comma or
                whitespace, or the update changes nothing.
        """
        for s in self.state:
            if not s or s != s.upper():
                raise ValueError(f"node state {s!r} must be upper case (DRAIN, UNDRAIN, RESUME …)")
        for f in (*(self.features or ()), *(self.active_features or ())):
            if not f or "," in f or f != f.strip() or any(c.isspace() for c in f):
                raise ValueError(f"feature {f!r} must be one non-empty name without commas")
        if self.topology is not None and any(c.isspace() for c in self.topology):
            raise ValueError(f"topology {self.topology!r} must not contain whitespace")
        fields = (
            self.reason,
            self.features,
            self.comment,
            self.topology,
            self.extra,
            self.active_features,
        )
        if not self.state and all(f is None for f in fields):
            raise ValueError(
                "empty NodeUpdate: set one of state, reason, features, comment, topology, extra"
            )


class JobGres(msgspec.Struct, frozen=True, kw_only=True):
    """One generic resource a job holds on one node (an entry of ``gres_detail``, e.g.
    ``gpu:nvidia:2(IDX:0-1)``): ``name``, ``type`` (``""`` when the job asked for none),
    ``count``, and the node's device ``indices`` (``()`` when Slurm gives only a count)."""

    name: str
    type: str = ""
    count: int = 0
    indices: tuple[int, ...] = ()


class JobNodeResources(msgspec.Struct, frozen=True, kw_only=True):
    """What a job holds on one node: its ``gres`` and ``cores``, Slurm's abstract core
    indices on the node (socket × cores per socket + core: the bits of the job's core
    bitmap for the node)."""

    node: str
    gres: tuple[JobGres, ...] = ()
    cores: tuple[int, ...] = ()


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """One Slurm job.

    ``state``: upper case, the base job state first (``PENDING``, ``RUNNING``, ``COMPLETED``,
    ``CANCELLED``, ``TIMEOUT``, ``PREEMPTED``, ``FAILED``, ``NODE_FAIL`` …), then flags such
    as ``COMPLETING``. ``nodes``: the expanded node list (``n[1-2]`` ⇒ ``("n1", "n2")``).
    Times are epoch seconds (``0`` = unset); ``time_limit_minutes`` is minutes, ``None`` for
    INFINITE or unset. ``node_count``: nodes allocated, or asked for while pending (0 = unknown).
    ``excluded_nodes``: the nodes the job may not use (``ExcNodeList``), expanded.
    ``required_nodes``: the nodes the job must run on (``ReqNodeList``), expanded.
    ``allocation``: per allocated node (in ``nodes`` order), what the job holds there, from
    ``gres_detail`` and ``job_resources`` (``()`` while pending or when not reported).
    ``het_job_id`` / ``het_job_offset``: a heterogeneous job's leader id and this component's
    offset (0 / 0 for a plain job); ``het_job_ids``: every component's id, in offset order,
    from ``het_job_id_set`` (``()`` for a plain job).
    """

    job_id: int
    name: str = ""
    state: tuple[str, ...] = ()
    state_reason: str = ""
    nodes: tuple[str, ...] = ()
    partition: str = ""
    admin_comment: str = ""
    comment: str = ""
    flags: tuple[str, ...] = ()
    user_id: int | None = None
    #: The job's owner (``user_name``; ``""`` when the answer has none).
    user_name: str = ""
    submit_time: int = 0
    start_time: int = 0
    end_time: int = 0
    time_limit_minutes: int | None = None
    node_count: int = 0
    excluded_nodes: tuple[str, ...] = ()
    required_nodes: tuple[str, ...] = ()
    #: Slurm's job priority (higher is tried first); None when unset (NoVal) or not sent.
    priority: int | None = None
    allocation: tuple[JobNodeResources, ...] = ()
    het_job_id: int = 0
    het_job_offset: int = 0
    het_job_ids: tuple[int, ...] = ()

    @property
    def base_state(self) -> str:
        """The base job state (``RUNNING`` …), ``""`` if none was reported."""
        return self.state[0] if self.state else ""


class JobList(msgspec.Struct, frozen=True, kw_only=True):
    """A full job listing; ``last_update`` / ``server_last_update`` as in :class:`NodeList`."""

    jobs: tuple[Job, ...] = ()
    last_update: int = 0
    server_last_update: int = 0


class JobStates(msgspec.Struct, frozen=True, kw_only=True):
    """``GET jobs/state``: every job slurmctld holds, by job id, with its state only.

    ``states``: job id as a decimal string (an array task's or a heterogeneous component's
    own job id, as :class:`Job` keys them) → its state flags, upper case, in the server's
    order (the same ``JOB_STATE`` rendering as a full listing's ``job_state``).

    ``changed``: the job ids whose entries appeared, changed or vanished since the previous
    listing decoded with the same :class:`~slurmbridge.slurm.codecs._common.JobStateMemo` (a job
    absent from ``states`` and named here is gone); ``None`` when that is not known (no memo,
    or its first listing), i.e. any job may have changed.
    """

    states: dict[str, tuple[str, ...]] = {}
    changed: frozenset[str] | None = None


#: The script of the placeholder batch job submitted where ``EXTERNAL_JOB`` does not exist
#: (before v0.0.43): it holds the allocation until slurmbridge cancels it.
PLACEHOLDER_SCRIPT: Final = "#!/bin/sh\nexec sleep infinity\n"

#: Where the placeholder batch job's output goes: nowhere. Slurm's default is
#: ``slurm-<jobid>.out`` in the working directory (``/tmp``) of the node, as the job's user:
#: a file left on every node, and a job that fails at once when a file of that name from
#: another user is there ("Could not open stdout file … Permission denied", Slurm 24.11.5).
PLACEHOLDER_OUTPUT: Final = {"standard_output": "/dev/null", "standard_error": "/dev/null"}


class JobSubmit(SlurmJobSpec, frozen=True, kw_only=True):
    """A job to submit (``POST job/submit``): the version-neutral job spec of a pod group
    (:class:`schemas.actions.SlurmJobSpec`, every field of it) and how it is submitted.

    ``memory_per_node_mib``: MiB (``None`` = Slurm's default). ``time_limit_minutes``: minutes
    (``None`` = the partition's default). ``tres_per_node``: e.g. ``gres/gpu=2``.
    ``external``: a placeholder for pods — ``EXTERNAL_JOB`` (Slurm runs nothing; v0.0.43+)
    or, on older versions, a batch job running :data:`PLACEHOLDER_SCRIPT`; ``external=False``
    runs ``script``. ``excluded_nodes``: nodes the job must not use. ``required_nodes``:
    nodes the job must get, every one of them (``ReqNodeList``, sbatch ``--nodelist``; only
    for a job that re-backs pods already running there: slurm-bridge #43).

    Raises (on construction):
        ValueError: a count below 1, ``min_nodes > max_nodes``, an empty excluded or required
            node name, a node both required and excluded, or neither ``external`` nor a
            ``script``; the message names the field.
    """

    admin_comment: str = ""
    comment: str = ""
    external: bool = True
    script: str = ""
    working_directory: str = "/tmp"
    environment: tuple[str, ...] = ("PATH=/bin:/usr/bin",)

    def __post_init__(self) -> None:
        """Validate counts and names (see the class docstring)."""
        for field in ("cpus_per_task", "tasks", "min_nodes"):
            if getattr(self, field) < 1:
                raise ValueError(f"{field}: must be at least 1, not {getattr(self, field)}")
        if self.max_nodes is not None and self.max_nodes < self.min_nodes:
            raise ValueError(f"max_nodes: {self.max_nodes} is below min_nodes {self.min_nodes}")
        if any(not n.strip() for n in self.excluded_nodes):
            raise ValueError("excluded_nodes: a node name is empty")
        if any(not n.strip() for n in self.required_nodes):
            raise ValueError("required_nodes: a node name is empty")
        if both := sorted(set(self.required_nodes) & set(self.excluded_nodes)):
            raise ValueError(f"required_nodes: {','.join(both)} also excluded")
        if not self.external and not self.script:
            raise ValueError("script: a non-external job needs a script")


class Reservation(msgspec.Struct, frozen=True, kw_only=True):
    """One Slurm reservation as ``GET reservation/{name}`` reports it (v0.0.43+).

    ``nodes``: the expanded node list. ``flags``: upper case as Slurm reports them (it adds
    the output-only ``SPEC_NODES`` to one made from a node list). ``start_time`` /
    ``end_time``: epoch seconds.
    """

    name: str
    nodes: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    start_time: int = 0
    end_time: int = 0

    def active(self, now: float) -> bool:
        """Started and not ended at ``now`` (epoch s) — Slurm's ``State=ACTIVE``
        (slurm-operator slurmcontrol.go ``isReservationActive``)."""
        return self.start_time <= now < self.end_time


class ReservationDesc(msgspec.Struct, frozen=True, kw_only=True):
    """A reservation to create or update (``reservation_desc_msg``; ``POST reservation``
    creates it, or updates the one of that name).

    ``start_time``: epoch seconds (``None``: not sent — an update of an active reservation
    may not name a start: Slurm answers 2104 "Reservation already started").
    ``duration_minutes``: ``None`` not sent. ``users``: who may run in it.
    """

    name: str
    nodes: tuple[str, ...] = ()
    start_time: int | None = None
    duration_minutes: int | None = None
    flags: tuple[str, ...] = ()
    users: tuple[str, ...] = ()


class PartitionDesc(msgspec.Struct, frozen=True, kw_only=True):
    """A partition to create or update (``partition_info`` in v0.0.45's ``POST partitions/``,
    which creates it, or updates the one of that name).

    ``nodes``: its node names (all of them: the list replaces the partition's).
    ``settings``: ``(slurm.conf key, normalised value)`` pairs as
    :func:`schemas.partitionconf.parse` returns them.
    """

    name: str
    nodes: tuple[str, ...] = ()
    settings: tuple[tuple[str, str], ...] = ()
