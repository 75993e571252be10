"""Jobs for the slurmrestd simulator: submit, list, get, cancel, and a small scheduler.

Mixed into :class:`~slurmbridge.devtools.sim.slurmrestd.SlurmSim`. The scheduler runs on every
change
that can start a job (a submit, a cancel, a job ending, :meth:`JobsMixin.schedule`): pending
jobs, in id order, start on the first ``min_nodes`` usable nodes of their partition (the
default partition when they name none) — IDLE or MIXED, not DRAIN/DOWN/FAIL, not in
``excluded_nodes`` — with ``cpus_per_task × ⌈tasks / min_nodes⌉`` free CPUs each; an
exclusive job takes whole idle nodes. Starting allocates the CPUs on the nodes
(``ALLOCATED`` / ``MIXED``), ending releases them, so node states follow as in Slurm.

External jobs (flag ``EXTERNAL_JOB``, v0.0.43+; v0.0.42's parser does not know the flag: 9207,
as on 24.11.5) and placeholder batch jobs stay RUNNING until
cancelled; :meth:`complete_job`, :meth:`preempt_job` and :meth:`timeout_job` end a job the way
the job itself, preemption and the time limit would; a RUNNING job whose ``time_limit``
(minutes, each :attr:`JobsMixin.minute_s` seconds long) has passed ends TIMEOUT the next time
jobs are read. Ended jobs stay listed for
``min_job_age`` seconds (Slurm's MinJobAge), then vanish. ``on_job_state`` hooks receive
``(job_id, state, time.monotonic())`` on every state change. An external job on an external
node holds its CPUs without reporting them (the node reads ALLOCATED with ``alloc_cpus`` 0,
recorded from Slurm 26.05.5).

Submit errors use Slurm's numbers: 2000 unknown partition (ESLURM_INVALID_PARTITION_NAME),
2017 unknown job id (ESLURM_INVALID_JOB_ID), 9000 a body that does not parse, 9207 an unknown
flag. A job asking for more nodes than its partition has is refused with 2014
(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE) on Slurm 24.11 and left PENDING with reason
``PartitionConfig`` on 25.05+ (recorded from 24.11.5 and 26.05.5); an empty partition (its
dynamic nodes still to come) makes jobs wait on every release.

Pending jobs carry a priority and a reason as slurmctld gives them. Priorities follow
priority/basic (``src/plugins/priority/basic/priority_basic.c``: each job gets one less than
the previous one, starting below ``TOP_PRIORITY`` 0xffff0000 of ``src/slurmctld/job_mgr.c``),
unless the submit sets ``priority`` (an operator's explicit priority). The scheduler tries
pending jobs in the order of slurmctld's job queue (``sort_job_queue2`` in
``src/slurmctld/job_scheduler.c``: priority descending, then submit time, then job id), and a
job that does not start gets squeue's JOB REASON CODES (``man squeue``): ``Resources`` for the
first job of a partition that waits for nodes, ``Priority`` for the jobs behind it ("one or
more higher priority jobs exist for the partition"), ``PartitionConfig`` for a job larger
than its partition, ``JobHeldUser`` for a held job; ``None`` before the scheduler looked.
Jobs further back still start when they fit (as Slurm's backfill scheduler starts them).

Required nodes (``required_nodes``, sbatch ``--nodelist``; data_parser versions): the job
starts only on every one of them, plus others when ``min_nodes`` asks for more (slurmctld
raises ``min_nodes`` to their count: ``_job_create`` in src/slurmctld/job_mgr.c); a name
Slurm does not know is refused with 2018 (ESLURM_INVALID_NODE_NAME). While a required node
cannot take it, the job waits with reason ``ReqNodeNotAvail`` when that node is drained,
down or failing (WAIT_NODE_NOT_AVAIL, src/slurmctld/job_scheduler.c), ``Resources`` when it
is merely busy (all three recorded from 26.05.5: ``sbatch -w``). Slurm knows nothing of
Kubernetes: a node whose pods run without a job is IDLE to it and a required-node job starts
there.

Losing state (:meth:`JobsMixin.save_state` / :meth:`JobsMixin.restore_state`): slurmctld
killed and restarted from a StateSaveLocation written before the latest submits. The jobs of
the saved state come back as they were (a RUNNING one holds its nodes again), every later
job is gone without a trace (no ended record), and the job id counter is the saved one, so
the next submits get the lost jobs' ids again — as a real slurmctld recovering
``job_state`` does (its ``last_job_id`` is part of that file).

Heterogeneous jobs (``POST job/submit`` with ``jobs: [...]``; recorded from Slurm 26.05.5 on
the rig, tests/real_slurm/test_modern_hetjob.py): the components get consecutive job ids, the
first is the leader (``het_job_id`` = its id, ``het_job_offset`` 0, 1, …, every component's
``het_job_id_set`` ``"<first>-<last>"``); a job of one component is a het job too
(``het_job_id_set`` ``"<id>"``); a plain job reads ``het_job_id`` 0, ``het_job_id_set`` ``""``.
The components start together or not at all (each waits with the same reason), each on its
own nodes with its own comment; ``GET job/{leader}`` lists every component, ``GET
job/{component}`` that one; ``jobs/state`` names them ``"<id>+<offset>"``. Cancelling the
leader ends every component, cancelling another component ends only it. A component Slurm
refuses (an unknown partition) fails the whole submit, and the components made before it are
left CANCELLED (their ids used up), as slurmctld leaves them.

Job updates read ``excluded_nodes`` as slurmrestd's ``csv_string``: ``[]`` leaves it as it
was, ``[""]`` clears it (recorded from 24.11.5 and 26.05.5).

Generic resources and cores: a job's ``tres_per_node`` ``gres/gpu=N`` or ``gres/gpu:<type>=N``
starts only on nodes with N free GPUs (of that type) in their ``Gres`` (``gpu:<type>:<count>``,
several comma separated; a node's GPU indices run over its entries in order, as slurmd
numbers the devices of its gres.conf), and takes the lowest free indices; its CPUs take the
lowest free cores (``⌈cpus / threads per core⌉``; a node without ``Sockets`` /
``CoresPerSocket`` is ``cpus`` sockets of one single-threaded core, as the node records say).
Constraints (``constraints``, sbatch ``--constraint``; recorded from Slurm 26.05.5 on the rig,
tests/real_slurm/test_modern_dra_profiles.py): a feature no node of the cluster has in its
available features refuses the submit with 2029 "Invalid feature specification"; an
expression no node of the job's partition satisfies with its available features, with 2014;
a job starts only on nodes whose *active* features satisfy it. ``&`` (AND), ``|`` (OR) and
one level of ``()`` / ``[]`` are evaluated per node; a ``*count`` and the matching-OR of
brackets (every node the same alternative) are not modelled (read as the plain feature and as
parentheses) — slurmbridge sends neither of its own accord.

A running job reports them as Slurm does: ``gres_detail`` (one string per node, in node order,
``gpu:nvidia:2(IDX:0-1)`` with the node's GRES type even when the job asked for untyped
``gres/gpu=2`` — recorded from 24.11.5 and 26.05.5; ``gpu:2(IDX:0-1)`` on an untyped node —
``gres_stepmgr_job_build_details``, src/stepmgr/gres_stepmgr.c) and
``job_resources.nodes.allocation[].sockets[].cores[]`` (every core of every socket, status
``ALLOCATED`` or ``UNALLOCATED`` — data_parser ``_dump_node_res``, parsers.c; v0.0.40+).
"""

from __future__ import annotations

import copy
import math
import operator
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from slurmbridge.slurm import hostlist
from slurmbridge.slurm.models import Job, JobGres, JobNodeResources

if TYPE_CHECKING:
    from slurmbridge.devtools.sim.slurmrestd import SimNode, SimPartition

Json = Any
JobCallback = Callable[[int, str, float], None]

ENDED = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "PREEMPTED", "NODE_FAIL")
#: slurmctld's job_mgr.c TOP_PRIORITY: priority/basic hands out one less to each new job.
TOP_PRIORITY = 0xFFFF0000
#: The fields a job's purge depends on (time limit, end, MinJobAge). A write to one of them
#: on a job its simulator made (:class:`_Touched`) is noted for that simulator: its next look
#: reads that job alone. A write to one on any other job (one a test built or copied) makes
#: every simulator's next look scan all its jobs again.
_PURGE_FIELDS = frozenset({"state", "time_limit", "start_mono", "ended_mono"})
_purge_writes = [0]


class _Touched:
    """The jobs of one simulator whose purge fields were written since its last look, by
    ``id()`` (a :class:`SimJob` is a dataclass with ``eq``, so unhashable). Each job holds a
    weak reference to it: ``copy.deepcopy`` copies a weak reference as it is (the saved
    state of :meth:`JobsMixin.save_state` does not copy the simulator), and a job outliving
    its simulator notes nothing."""

    __slots__ = ("__weakref__", "jobs")

    def __init__(self) -> None:
        self.jobs: dict[int, SimJob] = {}


_QUEUE_FIELDS = frozenset({"priority", "submit_time", "job_id"})


@dataclass
class SimJob:
    """A simulated job (memory in MiB, time limit in minutes)."""

    job_id: int
    name: str
    partition: str
    state: str = "PENDING"
    reason: str = "None"
    nodes: list[str] = field(default_factory=list)
    cpus_per_task: int = 1
    tasks: int = 1
    min_nodes: int = 1
    memory_per_node: int = 0
    excluded: frozenset[str] = frozenset()
    #: ``required_nodes``: the job runs on every one of them (module docstring).
    required: tuple[str, ...] = ()
    exclusive: bool = False
    flags: list[str] = field(default_factory=list)
    admin_comment: str = ""
    comment: str = ""
    user_id: int = 0
    #: The job's group (``group_id``, else the submitting user's primary group), and the
    #: names Slurm resolves for both ("" when the id has no name), as they are recorded.
    group_id: int = 0
    user_name: str = ""
    group_name: str = ""
    account: str = ""
    qos: str = ""
    reservation: str = ""
    submit_time: int = 0
    start_time: int = 0
    end_time: int = 0
    time_limit: int | None = None
    #: Submitted with ``hold: true``: PENDING, reason JobHeldUser, never started here.
    held: bool = False
    #: Slurm's job priority (higher is tried first; see the module docstring).
    priority: int = 0
    alloc: dict[str, int] = field(default_factory=dict)
    #: ``tres_per_node`` GRES: (name, type — ``""`` when none asked —, count per node).
    gres: tuple[str, str, int] | None = None
    #: Node → the GPU indices / abstract cores held there while running.
    gres_alloc: dict[str, list[int]] = field(default_factory=dict)
    #: Node → the GRES type of each held index, from the node's ``Gres`` (Slurm names the
    #: node's type in ``gres_detail`` even when the job asked for none).
    gres_types: dict[str, dict[int, str]] = field(default_factory=dict)
    core_alloc: dict[str, list[int]] = field(default_factory=dict)
    ended_mono: float = 0.0
    start_mono: float = 0.0
    #: Heterogeneous job: the leader's id (0: a plain job), this component's offset, and
    #: every component's id in offset order.
    het_job_id: int = 0
    het_offset: int = 0
    het_ids: tuple[int, ...] = ()
    #: ``constraints``: the feature expression its nodes must satisfy (``""``: none).
    constraints: str = ""

    @property
    def het_id_set(self) -> str:
        """``het_job_id_set`` as slurmctld renders it: ``""`` (plain), ``"5"``, ``"5-7"``."""
        if not self.het_ids:
            return ""
        first, last = self.het_ids[0], self.het_ids[-1]
        return str(first) if first == last else f"{first}-{last}"

    def model(self) -> Job:
        """The version-neutral view (what the client decodes)."""
        return Job(
            job_id=self.job_id,
            name=self.name,
            state=(self.state,),
            state_reason=self.reason,
            nodes=tuple(self.nodes),
            partition=self.partition,
            admin_comment=self.admin_comment,
            comment=self.comment,
            flags=tuple(self.flags),
            user_id=self.user_id,
            submit_time=self.submit_time,
            start_time=self.start_time,
            end_time=self.end_time,
            time_limit_minutes=self.time_limit,
            node_count=len(self.nodes) or self.min_nodes,
            excluded_nodes=tuple(sorted(self.excluded)),
            required_nodes=self.required,
            priority=self.priority,
            het_job_id=self.het_job_id,
            het_job_offset=self.het_offset,
            het_job_ids=self.het_ids,
            allocation=tuple(
                JobNodeResources(
                    node=n,
                    gres=tuple(
                        JobGres(name=self.gres[0], type=t, count=len(held), indices=held)
                        for t, held in self.typed_gres(n)
                    )
                    if self.gres is not None and self.gres_alloc
                    else (),
                    cores=tuple(sorted(self.core_alloc.get(n, ()))),
                )
                for n in self.nodes
            )
            if self.core_alloc
            else (),
        )

    def typed_gres(self, node: str) -> list[tuple[str, tuple[int, ...]]]:
        """The GRES held on ``node`` as (type, sorted indices) per type of the node's ``Gres``
        (in index order), as ``gres_detail`` lists them: real Slurm 24.11.5 and 26.05.5
        answer ``gpu:nvidia:2(IDX:1-2)`` to an untyped ``gres/gpu=2`` on a node with
        ``Gres=gpu:nvidia:4`` (recorded on the rig, ``ModernSlurm(gpus=4)``)."""
        held = sorted(self.gres_alloc.get(node, ()))
        types = self.gres_types.get(node, {})
        out: list[tuple[str, list[int]]] = []
        for i in held:
            t = types.get(i, self.gres[1] if self.gres is not None else "")
            if out and out[-1][0] == t:
                out[-1][1].append(i)
            else:
                out.append((t, [i]))
        asked = self.gres[1] if self.gres is not None else ""
        return [(t, tuple(ix)) for t, ix in out] or [(asked, ())]

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _PURGE_FIELDS:
            ref = self.__dict__.get("_touched")
            touched = ref() if ref is not None else None
            if touched is not None:
                touched.jobs[id(self)] = self
            else:
                _purge_writes[0] += 1
        object.__setattr__(self, name, value)
        if name in _QUEUE_FIELDS:
            # slurmctld's job queue order (``sort_job_queue2``): priority descending, then
            # submit time, then job id — kept as they are written: the scheduling pass sorts
            # the queue at every submit, and a key computed per job per sort was most of that
            # pass behind 10,000 queued jobs.
            d = self.__dict__
            if "priority" in d and "submit_time" in d:
                d["_queue_key"] = (-d["priority"], d["submit_time"], d["job_id"])


#: A job's place in the queue (``SimJob.__setattr__`` keeps it): the sort key of a pass.
_QUEUE_KEY = operator.attrgetter("_queue_key")


@dataclass(frozen=True)
class SavedJobs:
    """slurmctld's saved job state (:meth:`JobsMixin.save_state`): the jobs by id, the next
    job id's predecessor and the last priority handed out."""

    jobs: dict[int, SimJob]
    next_job_id: int
    last_priority: int


def _csv_string(value: Any) -> list[str] | None:
    """A data_parser ``csv_string`` field of an update: ``None`` when absent or ``[]`` (Slurm
    leaves the field as it was), else its comma-separated items, ``[""]`` / ``""`` meaning
    none, which clears (recorded from Slurm 24.11.5 and 26.05.5: node features, a job's
    ``excluded_nodes``).

    Raises:
        TypeError: neither a string nor a list of strings.
    """
    if value is None or value == []:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        joined = ",".join(value)
    elif isinstance(value, str):
        joined = value
    else:
        raise TypeError(f"not a csv_string: {value!r}")
    return [item.strip() for item in joined.split(",") if item.strip()]


class _SubmitError(Exception):
    def __init__(self, errno: int, description: str, source: str = "") -> None:
        super().__init__(description)
        self.errno = errno
        self.description = description
        #: The ``errors[].source`` when it is not the handler's (a data_parser path).
        self.source = source


def _number(value: Any) -> int | None:
    """A plain number or a NoVal object (``{"set": true, "number": N}``)."""
    if isinstance(value, dict):
        if value.get("infinite") or not value.get("set", True):
            return None
        value = value.get("number")
    if value is None:
        return None
    return int(value)


#: slurm.h ``NO_VAL``: the first of the two values a uint32 field reserves (``INFINITE`` is
#: 0xffffffff).
NO_VAL = 0xFFFFFFFE


def _time_limit(value: int | None) -> int | None:
    """A submitted time limit (minutes) as slurmctld stores it, ``None`` for no
    limit. slurmrestd's data_parser (v0.0.40+) turns every number from ``NO_VAL`` up into
    ``INFINITE`` (``PARSE_FUNC(UINT32_NO_VAL)`` in src/plugins/data_parser/*/parsers.c:
    ``num >= NO_VAL`` ⇒ ``INFINITE``); v0.0.38's parser reads a number with any of its upper
    32 bits set as ``NO_VAL`` (unset): either way no finite limit, so 10^12 minutes is
    UNLIMITED, not 10^12."""
    if value is None or value >= NO_VAL:
        return None
    return value


def constraint_features(expr: str) -> list[str]:
    """The feature names of a constraint expression (``a&(b|c)*2`` ⇒ ``a``, ``b``, ``c``)."""
    out: list[str] = []
    word = ""
    for ch in expr + "&":
        if ch in "&|()[]*,":
            if word.strip() and not (out and out[-1] == "*"):
                out.append(word.strip())
            word = ""
            if ch == "*":
                out.append("*")
        elif ch.isdigit() and out and out[-1] == "*" and not word:
            continue
        else:
            if out and out[-1] == "*":
                out.pop()
            word += ch
    return [f for f in out if f != "*"]


def satisfies(expr: str, features: Iterable[str]) -> bool:
    """Whether a node with ``features`` satisfies ``expr`` (module docstring: ``&``, ``|``,
    ``()``/``[]``, counts read as the plain feature; without parentheses left to right, as
    Slurm evaluates it)."""
    have = set(features)
    tokens: list[str] = []
    word = ""
    skip_digits = False
    for ch in expr:
        if skip_digits and ch.isdigit():
            continue
        skip_digits = False
        if ch in "&|()[]*":
            if word.strip():
                tokens.append(word.strip())
            word = ""
            if ch == "*":
                skip_digits = True
            else:
                tokens.append({"[": "(", "]": ")"}.get(ch, ch))
        else:
            word += ch
    if word.strip():
        tokens.append(word.strip())
    pos = 0

    def term() -> bool:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok == "(":
            value = expression()
            pos += 1  # ")"
            return value
        return tok in have

    def expression() -> bool:
        nonlocal pos
        value = term()
        while pos < len(tokens) and tokens[pos] in "&|":
            op = tokens[pos]
            pos += 1
            right = term()
            value = (value and right) if op == "&" else (value or right)
        return value

    return expression() if tokens else True


def parse_tres_gres(tres: str) -> tuple[str, str, int] | None:
    """The GRES of a ``tres_per_node`` (``gres/gpu=2``, ``gres/gpu:nvidia=2``, possibly among
    other comma-separated TRES): (name, type, count), None when it names no GRES.

    Raises:
        _SubmitError: 2072 (ESLURM_INVALID_GRES) a GRES entry that is not ``gres/name[:type]=N``.
    """
    for item in filter(None, (t.strip() for t in tres.split(","))):
        if not item.startswith("gres/"):
            continue
        spec, sep, count = item[len("gres/") :].partition("=")
        name, _, gres_type = spec.partition(":")
        if not sep or not count.isdigit() or not name:
            raise _SubmitError(2072, "Invalid generic resource (gres) specification")
        return name, gres_type, int(count)
    return None


def node_gres(gres: str) -> list[tuple[str, str, int]]:
    """A node's ``Gres`` (``gpu:nvidia:4``, ``gpu:2``, ``gpu:a100:2(S:0-1)``, comma
    separated) as (name, type, count) entries in order; unreadable entries are skipped."""
    out = []
    for entry in filter(None, (e.strip() for e in gres.split(","))):
        parts = entry.split("(", 1)[0].split(":")
        if len(parts) >= 2 and parts[-1].isdigit():
            name, gres_type = parts[0], ":".join(parts[1:-1])
            out.append((name, gres_type, int(parts[-1])))
    return out


def gres_indices(gres: str, name: str, gres_type: str) -> list[int]:
    """The device indices of node ``Gres`` ``gres`` for GRES ``name`` of type ``gres_type``
    (any type when ``""``): indices run over the node's entries of that name in order."""
    out: list[int] = []
    base = 0
    for n, t, count in node_gres(gres):
        if n != name:
            continue
        if not gres_type or t == gres_type:
            out.extend(range(base, base + count))
        base += count
    return out


def gres_type_of(gres: str, name: str) -> dict[int, str]:
    """Device index → type for GRES ``name`` of node ``Gres`` ``gres`` (indices as in
    :func:`gres_indices`)."""
    out: dict[int, str] = {}
    base = 0
    for n, t, count in node_gres(gres):
        if n != name:
            continue
        out.update(dict.fromkeys(range(base, base + count), t))
        base += count
    return out


def bit_fmt(indices: Iterable[int]) -> str:
    """Slurm's ``bit_fmt``: sorted indices as ranges (``0-1,3``)."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(indices):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def core_layout(node: SimNode) -> tuple[int, int, int]:
    """(sockets, cores per socket, threads per core) as the node's record reports them."""
    return (node.sockets or node.cpus, node.cores or 1, node.threads or 1)


#: The user the harness's token names (``SlurmSim.write_token``'s default): the bridge's.
HARNESS_USER: Final = "slurmrest"


class JobsMixin:
    """Job state and REST handlers; needs the host's nodes, partitions, allocate/release."""

    nodes: dict[str, SimNode]
    partitions: dict[str, SimPartition]
    versions: tuple[str, ...]
    slurm_release: str

    def _init_jobs(self) -> None:
        self.jobs_by_id: dict[int, SimJob] = {}
        self.next_job_id = 1000
        self.min_job_age = 300.0
        #: Seconds one minute of a job's time limit lasts here (60 = real time; tests shrink
        #: it so that a 1-minute limit runs out in a fraction of a second).
        self.minute_s = 60.0
        #: When the next look must scan the jobs (_purge), and what it was computed from.
        self._purge_due = 0.0
        self._purge_seen: tuple[object, ...] = ()
        #: This simulator's jobs whose purge fields were written since the last look.
        self._touched = _Touched()
        self.on_job_state: list[JobCallback] = []
        #: Called as ``hook(job_id, comment, at)`` when a job is submitted, before the
        #: scheduling pass (``at``: time.monotonic() of the submit's arrival): a bench splits
        #: the simulator's own pass from the client's time with it.
        self.on_submit: list[Callable[[int, str, float], None]] = []
        self.jobs_changed_at = int(time.time())
        #: The last priority priority/basic handed out (the next job gets one less).
        self.last_priority = TOP_PRIORITY
        #: The passwd and group databases slurmctld resolves ids with: user name → (uid,
        #: primary gid), gid → group name. ``root`` at first; :meth:`add_user` adds the users
        #: a test creates (the real rigs' ``useradd``), and a token's user the database lacks
        #: is added with the next free uid from 60000 at its first submit (a real token's user
        #: exists: Slurm resolves it), so each job's user is the token's, as in Slurm.
        self.users: dict[str, tuple[int, int]] = {"root": (0, 0)}
        self.groups: dict[int, str] = {0: "root"}

    if TYPE_CHECKING:  # provided by SlurmSim

        def allocate(self, name: str, cpus: int, memory: int = 0) -> None: ...
        def release(self, name: str, cpus: int | None = None, memory: int = 0) -> None: ...
        def _now(self) -> int: ...

    # --- public -------------------------------------------------------------------------------

    def add_user(self, name: str, uid: int, gid: int | None = None) -> None:
        """Create user ``name`` with ``uid`` and a primary group of its own name (``gid``,
        default ``uid``), as ``useradd`` does on the real rigs."""
        gid = uid if gid is None else gid
        self.users[name] = (uid, gid)
        self.groups.setdefault(gid, name)

    def submit_identity(self, user: str, operator: bool, desc: Json) -> tuple[int, int | None]:
        """The uid and gid a submit by ``user`` (the token's) runs as, by slurmctld's rules
        as recorded from Slurm 26.05.5 (tests/real_slurm/test_modern_tenancy.py):

        * no ``user_id``: the token's user; no ``group_id``: the job's user's primary group
          for a plain user, and *the token user's* group for an operator submitting for
          another user (root's token, ``user_id`` alice, no ``group_id`` ⇒ gid 0);
        * ``user_id`` / ``group_id`` as digits, or a name slurmrestd resolves (an unknown
          name: 2166 "Unable to resolve user ID to user name");
        * an operator (root, SlurmUser) may submit for any uid (one no user has too:
          :meth:`submit`); a plain user only for its own uid (else 2010 "Invalid
          user id") and its own primary group (else 2113 "Invalid group id"; Slurm also
          accepts the user's supplementary groups, which this database does not hold).

        Raises:
            _SubmitError: 2166, 2010 or 2113 as above.
        """
        own_uid, own_gid = self._ensure_user(user) if user else (0, 0)
        uid = self._resolve_id(desc.get("user_id"), user=True)
        gid = self._resolve_id(desc.get("group_id"), user=False)
        if uid is None:
            uid = own_uid
        if not operator:
            if uid != own_uid:
                raise _SubmitError(2010, "Batch job submission failed")
            if gid is not None and gid != own_gid:
                raise _SubmitError(2113, "Batch job submission failed")
        elif gid is None and uid != own_uid:
            gid = own_gid
        return uid, gid

    def _ensure_user(self, name: str) -> tuple[int, int]:
        """``name``'s (uid, gid), adding it with the next free uid from 60000 if missing."""
        if name not in self.users:
            self.add_user(name, max([60000, *(u + 1 for u, _ in self.users.values())]))
        return self.users[name]

    def _resolve_id(self, raw: Any, *, user: bool) -> int | None:
        if raw is None or raw == "":
            return None
        text = str(raw).strip()
        if text.isdigit():
            return int(text)
        if user:
            if text in self.users:
                return self.users[text][0]
            raise _SubmitError(2166, f"Unable to resolve user: {text}", source="#/job/user_id/")
        for gid, name in self.groups.items():
            if name == text:
                return gid
        raise _SubmitError(2166, f"Unable to resolve group: {text}", source="#/job/group_id/")

    def _primary_gid(self, uid: int) -> int:
        return next((g for u, g in self.users.values() if u == uid), 0)

    def _user_name(self, uid: int) -> str:
        return next((n for n, (u, _) in self.users.items() if u == uid), "")

    def _group_name(self, gid: int) -> str:
        return self.groups.get(gid, "")

    @property
    def jobs(self) -> list[Job]:
        """Every listed job (version-neutral), oldest first."""
        self._purge()
        return [j.model() for j in self.jobs_by_id.values()]

    def job(self, job_id: int) -> Job:
        """One job. Raises KeyError: unknown."""
        return self.jobs_by_id[job_id].model()

    def save_state(self) -> SavedJobs:
        """What slurmctld's StateSaveLocation holds now (jobs and the job id counter), for
        :meth:`restore_state`."""
        self._purge()
        return SavedJobs(copy.deepcopy(self.jobs_by_id), self.next_job_id, self.last_priority)

    def restore_state(self, saved: SavedJobs) -> None:
        """slurmctld killed and restarted from ``saved`` (:meth:`save_state`; module
        docstring): later jobs vanish, saved RUNNING jobs hold their nodes again, and job
        ids handed out since are handed out again."""
        for job in self.jobs_by_id.values():
            if job.state == "RUNNING":
                self._release_alloc(job)
        self.jobs_by_id = copy.deepcopy(saved.jobs)
        self._purge_due = 0.0  # the copies were made without a write _purge would see
        self.next_job_id, self.last_priority = saved.next_job_id, saved.last_priority
        for job in self.jobs_by_id.values():
            if job.state == "RUNNING":
                self._hold_alloc(job)
        self._jobs_touched()
        self.schedule()

    def submit(
        self,
        desc: Json,
        *,
        external: bool,
        user_id: int | None = None,
        group_id: int | None = None,
    ) -> int:
        """Submit a job from a version-neutral description (see :meth:`_parse_submit`) as
        ``user_id`` / ``group_id`` (None: the harness's token user :data:`HARNESS_USER`, as
        a test's "job submitted straight to Slurm" is one of the bridge's; the user's primary
        group); the REST handler first applies slurmctld's identity rules
        (``SlurmSim.submit_identity``).
        A ``user_id`` no known user has is accepted as it is (recorded from Slurm 26.05.5: uid
        99999 without a passwd entry; real Slurm holds it later, ``JobHeldAdmin``, when its
        batch script fails to start on a node — not modelled: jobs run nothing here)."""
        at = time.monotonic()
        if user_id is None:
            user_id = self._ensure_user(HARNESS_USER)[0]
        job = self._make_job(desc, external=external, user_id=user_id)
        job.group_id = self._primary_gid(user_id) if group_id is None else group_id
        job.user_name = self._user_name(user_id)
        job.group_name = self._group_name(job.group_id)
        self.jobs_by_id[job.job_id] = job
        self._jobs_touched()
        for hook in list(self.on_submit):
            hook(job.job_id, job.comment, at)
        self.schedule()
        return job.job_id

    def submit_het(
        self,
        descs: list[tuple[Json, bool]],
        *,
        user_id: int | None = None,
        group_id: int | None = None,
    ) -> int:
        """Submit a heterogeneous job (one description and its ``external`` per component);
        returns the leader's id (module docstring). ``user_id`` / ``group_id`` as for
        :meth:`submit` (every component runs as the leader's identity).

        Raises:
            _SubmitError: a component is refused (its errno); the components made before it
                are left CANCELLED, as slurmctld leaves them (recorded from 26.05.5).
        """
        if user_id is None:
            user_id = self._ensure_user(HARNESS_USER)[0]
        made: list[SimJob] = []
        try:
            for desc, external in descs:
                job = self._make_job(desc, external=external, user_id=user_id)
                job.group_id = self._primary_gid(user_id) if group_id is None else group_id
                job.user_name = self._user_name(user_id)
                job.group_name = self._group_name(job.group_id)
                made.append(job)
        except _SubmitError:
            for job in made:
                self._join_het(job, made)
                job.state, job.end_time, job.ended_mono = "CANCELLED", self._now(), time.monotonic()
                self.jobs_by_id[job.job_id] = job
            self._jobs_touched()
            raise
        for job in made:
            self._join_het(job, made)
            self.jobs_by_id[job.job_id] = job
        self._jobs_touched()
        self.schedule()
        return made[0].job_id

    @staticmethod
    def _join_het(job: SimJob, made: list[SimJob]) -> None:
        job.het_job_id = made[0].job_id
        job.het_offset = made.index(job)
        job.het_ids = tuple(j.job_id for j in made)

    def components(self, job: SimJob) -> list[SimJob]:
        """A het leader's components (itself first); any other job alone."""
        if job.het_ids and job.het_offset == 0:
            return [self.jobs_by_id[i] for i in job.het_ids if i in self.jobs_by_id]
        return [job]

    def update_job(
        self,
        job_id: int,
        *,
        time_limit: int | None = None,
        name: str | None = None,
        comment: str | None = None,
        admin_comment: str | None = None,
        excluded_nodes: Iterable[str] | None = None,
    ) -> None:
        """``scontrol update job``: the given fields change; a new time limit applies to a
        running job from its start.

        Raises:
            KeyError: unknown job. _SubmitError: 2021 (ESLURM_JOB_FINISHED) once it ended.
        """
        job = self.jobs_by_id[job_id]
        if job.state in ENDED:
            raise _SubmitError(2021, "Job/step already completing or completed")
        if time_limit is not None:
            job.time_limit = time_limit
        if name is not None:
            job.name = name
        if comment is not None:
            job.comment = comment
        if admin_comment is not None:
            job.admin_comment = admin_comment
        if excluded_nodes is not None:
            if job.state != "PENDING":
                raise _SubmitError(2021, "Job is no longer pending execution")
            job.excluded = frozenset(excluded_nodes)
        self._jobs_touched()
        if excluded_nodes is not None:
            self.schedule()

    def cancel_job(self, job_id: int) -> None:
        """``scancel``: the job ends CANCELLED (a finished job is left alone); a het leader
        takes every component with it, another component goes alone (recorded from 26.05.5)."""
        job = self.jobs_by_id.get(job_id)
        for part in self.components(job) if job is not None else []:
            self._end(part.job_id, "CANCELLED")

    def complete_job(self, job_id: int, state: str = "COMPLETED") -> None:
        """The job's script ended (COMPLETED, or FAILED …)."""
        self._end(job_id, state)

    def preempt_job(self, job_id: int) -> None:
        """Preemption (PreemptMode=CANCEL): the job ends PREEMPTED."""
        self._end(job_id, "PREEMPTED")

    def timeout_job(self, job_id: int) -> None:
        """The time limit passed: the job ends TIMEOUT."""
        self._end(job_id, "TIMEOUT")

    def schedule(self) -> int:
        """Start every pending job that fits now, in queue order, and give the others their
        reason (module docstring); returns how many started."""
        started = 0
        waiting: set[str] = set()  # partitions where a job ahead waits for resources
        full: dict[str, bool] = {}  # partition → no node of it has a CPU free (this pass)
        # Shape (_shape) → the reason a job of that shape could not start, this pass: until
        # a job starts the nodes do not change, so a job of the same shape cannot start
        # either and would be given the same reason; trying it would cost a pass over the
        # nodes (10,000 queued jobs of one shape made every submit O(n × nodes)).
        failed: dict[tuple[object, ...], str] = {}
        # Partitions in ``waiting`` and ``full`` (since the last start): a job told
        # "Priority" there is skipped below; tested first, since behind 10,000 queued jobs
        # nearly every job of a pass is one (the fuller test cost 8 ms a pass).
        skip: set[str] = set()
        changed = False
        pending = [j for j in self.jobs_by_id.values() if j.state == "PENDING"]
        for job in sorted(pending, key=_QUEUE_KEY):
            if (
                job.partition in skip
                and job.reason == "Priority"
                and not job.required
                and not job.het_ids
            ):
                continue
            if job.het_ids and job.het_offset:
                continue  # a component starts with its leader
            before = job.reason
            if (
                job.reason == "Priority"
                and job.partition in waiting
                and not job.required
                and not job.het_ids
            ):
                # Told "Priority" before, still behind a job waiting for resources, and no
                # node of the partition has a CPU free: it cannot start, and trying it costs
                # a pass over the nodes (10,000 queued jobs made every submit O(n × nodes)).
                if job.partition not in full:
                    full[job.partition] = self._partition_full(job.partition)
                if full[job.partition]:
                    skip.add(job.partition)
                    continue
            shape = self._shape(job)
            if shape is not None and shape in failed:
                job.reason = failed[shape]
            elif self._try_start_all(job):
                started += 1
                full.clear()
                skip.clear()
                failed.clear()
                continue
            elif shape is not None:
                failed[shape] = job.reason
            if job.reason == "Resources":
                if job.partition in waiting:
                    job.reason = "Priority"
                waiting.add(job.partition)
            changed = changed or job.reason != before
        if changed:
            self._jobs_touched()
        return started

    # --- internals ----------------------------------------------------------------------------

    def _jobs_touched(self) -> None:
        self.jobs_changed_at = self._now()

    def _notify_job(self, job: SimJob) -> None:
        at = time.monotonic()
        for hook in list(self.on_job_state):
            hook(job.job_id, job.state, at)

    def _purge_inputs(self) -> tuple[object, ...]:
        return (_purge_writes[0], self.minute_s, self.min_job_age)

    def _purge_due_of(self, job: SimJob) -> float:
        """When ``job`` is next due for a look (monotonic seconds): its purge after MinJobAge
        once ended, its time limit while running; ``inf`` otherwise."""
        if job.state in ENDED:
            return job.ended_mono + self.min_job_age
        if job.state == "RUNNING" and job.time_limit:
            return job.start_mono + job.time_limit * self.minute_s
        return math.inf

    def _purge(self) -> None:
        now = time.monotonic()
        # Every GET looks, and the hot loop of a bridge asks every 20 ms: behind 10,000
        # queued jobs a scan cost ~9 ms each, most of the bench process's loop (bench/
        # idle_queue.py). Until the earliest time limit or MinJobAge falls due, a scan would
        # find nothing; a job this simulator made and that was written since is read alone
        # (a submit, a start and an end each wrote one: a scan after each was 8 ms of the
        # bench process per probe behind 10,000 jobs, bench/idle_queue.py).
        touched = self._touched.jobs
        if self._purge_seen == self._purge_inputs():
            due = self._purge_due
            for job in touched.values():
                if self.jobs_by_id.get(job.job_id) is job:
                    due = min(due, self._purge_due_of(job))
            touched.clear()
            self._purge_due = due
            if now < due:
                return
        touched.clear()
        # The time limit is enforced lazily, when someone looks: same outcome as slurmctld's
        # periodic check, without a timer task.
        for j in list(self.jobs_by_id.values()):
            limit = j.time_limit
            if j.state == "RUNNING" and limit and now - j.start_mono >= limit * self.minute_s:
                self._end(j.job_id, "TIMEOUT")
        gone = []
        due = math.inf
        for j in self.jobs_by_id.values():
            if j.state in ENDED:
                if now - j.ended_mono > self.min_job_age:
                    gone.append(j.job_id)
                else:
                    due = min(due, j.ended_mono + self.min_job_age)
            elif j.state == "RUNNING" and j.time_limit:
                due = min(due, j.start_mono + j.time_limit * self.minute_s)
        for jid in gone:
            del self.jobs_by_id[jid]
        if gone:
            self._jobs_touched()
        self._purge_due, self._purge_seen = due, self._purge_inputs()

    def _default_partition(self) -> str:
        for p in self.partitions.values():
            if p.default:
                return p.name
        return next(iter(self.partitions), "")

    def _make_job(self, desc: Json, *, external: bool, user_id: int) -> SimJob:
        partition = str(desc.get("partition") or self._default_partition())
        part = self.partitions.get(partition)
        if part is None:
            raise _SubmitError(2000, f"Invalid partition name specified: {partition!r}")
        required = tuple(desc.get("required_nodes") or ())
        unknown = [n for n in required if n not in self.nodes]
        if unknown:
            raise _SubmitError(2018, "Invalid node name specified")
        # job_mgr.c _job_create: min_nodes is raised to the number of required nodes.
        min_nodes = max(int(desc.get("min_nodes") or 1), len(required))
        # An empty partition is one whose (dynamic) nodes are still to come: jobs wait. Else
        # recorded from Slurm 24.11.5: too many nodes is refused at submit (26.05.5 accepts
        # the job and leaves it PENDING, reason PartitionConfig: see _try_start).
        if self.slurm_release == "24.11" and part.nodes and min_nodes > len(part.nodes):
            raise _SubmitError(2014, "Requested node configuration is not available")
        constraints = str(desc.get("constraints") or "").strip()
        if constraints:
            # recorded from Slurm 26.05.5: a feature no node has ⇒ 2029; none of the
            # partition's nodes satisfies the expression ⇒ 2014 (available features).
            known = {f for n in self.nodes.values() for f in n.features}
            if any(f not in known for f in constraint_features(constraints)):
                raise _SubmitError(2029, "Batch job submission failed", "slurm_submit_batch_job()")
            if not any(
                satisfies(constraints, self.nodes[n].features)
                for n in part.nodes
                if n in self.nodes
            ):
                raise _SubmitError(2014, "Batch job submission failed", "slurm_submit_batch_job()")
        self.next_job_id += 1
        flags = ["EXTERNAL_JOB"] if external else []
        # priority/basic: an explicit priority (above 1) is kept, else one less than the
        # last job's.
        explicit = desc.get("priority")
        if isinstance(explicit, int) and explicit > 1:
            priority = explicit
        else:
            self.last_priority = max(1, self.last_priority - 1)
            priority = self.last_priority
        writes = _purge_writes[0]
        job = SimJob(
            job_id=self.next_job_id,
            name=str(desc.get("name") or "sim"),
            partition=partition,
            cpus_per_task=int(desc.get("cpus_per_task") or 1),
            tasks=int(desc.get("tasks") or 1),
            min_nodes=min_nodes,
            memory_per_node=int(desc.get("memory_per_node") or 0),
            excluded=frozenset(desc.get("excluded_nodes") or ()),
            required=required,
            exclusive=bool(desc.get("exclusive")),
            flags=flags,
            admin_comment=str(desc.get("admin_comment") or ""),
            comment=str(desc.get("comment") or ""),
            account=str(desc.get("account") or ""),
            qos=str(desc.get("qos") or ""),
            reservation=str(desc.get("reservation") or ""),
            user_id=user_id,
            submit_time=self._now(),
            time_limit=desc.get("time_limit"),
            held=bool(desc.get("hold")),
            reason="JobHeldUser" if desc.get("hold") else "None",
            priority=priority,
            gres=parse_tres_gres(str(desc.get("tres_per_node") or "")),
            constraints=constraints,
        )
        # A job no simulator holds yet cannot change any simulator's purge: its construction
        # is not a write the others must scan for, and this simulator's next look reads it.
        _purge_writes[0] = writes
        object.__setattr__(job, "_touched", weakref.ref(self._touched))
        self._touched.jobs[id(job)] = job
        return job

    def _shape(self, job: SimJob) -> tuple[object, ...] | None:
        """What :meth:`_try_start` reads of ``job`` to choose its nodes or its reason
        (partition, CPUs per node, node count, whole nodes, features, GRES, excluded nodes):
        two jobs of one shape start, or fail with one reason, on the same nodes. None for a
        job whose outcome depends on more (held, required nodes, heterogeneous, or a
        partition that does not exist)."""
        if job.held or job.required or job.het_ids or job.partition not in self.partitions:
            return None
        per_node = job.cpus_per_task * math.ceil(job.tasks / job.min_nodes)
        return (
            job.partition,
            per_node,
            job.min_nodes,
            job.exclusive,
            job.constraints,
            job.gres,
            job.excluded,
        )

    def _partition_full(self, name: str) -> bool:
        """No node of partition ``name`` could take any job now (every one allocated to its
        last CPU, down, drained, failing or not responding)."""
        part = self.partitions.get(name)
        for n in part.nodes if part is not None else ():
            node = self.nodes.get(n)
            if node is None or node.base is not None:
                continue
            if any(f in node.flags for f in ("DRAIN", "FAIL", "NOT_RESPONDING")):
                continue
            if node.alloc_cpus < node.cpus:
                return False
        return True

    def _usable(self, node: SimNode, job: SimJob, cpus: int) -> bool:
        if node.name in job.excluded or node.base is not None:
            return False
        if job.constraints and not satisfies(job.constraints, node.active_features):
            return False
        if any(f in node.flags for f in ("DRAIN", "FAIL", "NOT_RESPONDING")):
            return False
        if job.gres is not None and len(self._free_gres(node, job.gres)) < job.gres[2]:
            return False
        if job.exclusive:
            return node.alloc_cpus == 0
        return node.cpus - node.alloc_cpus >= cpus

    def _free_gres(self, node: SimNode, gres: tuple[str, str, int]) -> list[int]:
        return [i for i in gres_indices(node.gres, gres[0], gres[1]) if i not in node.gres_held]

    def _take_cores(self, node: SimNode, cpus: int) -> list[int]:
        sockets, cores, threads = core_layout(node)
        free = [c for c in range(sockets * cores) if c not in node.cores_held]
        return free[: math.ceil(cpus / threads)]

    def _try_start(self, job: SimJob, *, announce: bool = True) -> bool:
        part = self.partitions.get(job.partition)
        if part is None or job.held:
            return False
        per_node = job.cpus_per_task * math.ceil(job.tasks / job.min_nodes)
        if job.required:
            blocked = [n for n in job.required if not self._usable(self.nodes[n], job, per_node)]
            if blocked:
                unavailable = [
                    n
                    for n in blocked
                    if self.nodes[n].base is not None
                    or any(f in self.nodes[n].flags for f in ("DRAIN", "FAIL", "NOT_RESPONDING"))
                ]
                job.reason = "ReqNodeNotAvail" if unavailable else "Resources"
                return False
        chosen = (
            list(job.required)
            + [
                n
                for n in sorted(part.nodes)
                if n in self.nodes
                and n not in job.required
                and self._usable(self.nodes[n], job, per_node)
            ][: max(0, job.min_nodes - len(job.required))]
        )
        if len(chosen) < job.min_nodes:
            # recorded from Slurm 26.05.5: more nodes than the partition has
            too_many = bool(part.nodes) and job.min_nodes > len(part.nodes)
            job.reason = "PartitionConfig" if too_many else "Resources"
            return False
        for name in chosen:
            node = self.nodes[name]
            cpus = node.cpus if job.exclusive else per_node
            job.alloc[name] = cpus
            job.core_alloc[name] = self._take_cores(node, cpus)
            if job.gres is not None:
                job.gres_alloc[name] = self._free_gres(node, job.gres)[: job.gres[2]]
                job.gres_types[name] = gres_type_of(node.gres, job.gres[0])
        self._hold_alloc(job)
        job.nodes = chosen
        job.state, job.reason = "RUNNING", "None"
        job.start_time = self._now()
        job.start_mono = time.monotonic()
        self._jobs_touched()
        if announce:
            self._notify_job(job)
        return True

    def _hold_alloc(self, job: SimJob) -> None:
        """Take on the nodes what ``job`` holds (its ``alloc``, cores and GRES)."""
        external = "EXTERNAL_JOB" in job.flags
        for name, cpus in job.alloc.items():
            node = self.nodes[name]
            self.allocate(name, cpus, job.memory_per_node)
            node.cores_held.update(job.core_alloc.get(name, ()))
            node.gres_held.update(job.gres_alloc.get(name, ()))
            if external and "EXTERNAL" in node.flags:
                node.external_cpus += cpus

    def _release_alloc(self, job: SimJob) -> None:
        """Give back on the nodes what ``job`` holds (its records stay as they are)."""
        for name, cpus in job.alloc.items():
            node = self.nodes.get(name)
            if node is not None:
                node.gres_held.difference_update(job.gres_alloc.get(name, ()))
                node.cores_held.difference_update(job.core_alloc.get(name, ()))
                if "EXTERNAL_JOB" in job.flags:
                    node.external_cpus = max(0, node.external_cpus - cpus)
                self.release(name, cpus, job.memory_per_node)

    def _try_start_all(self, job: SimJob) -> bool:
        """Start ``job`` — a het leader with every pending component, all or none; a
        component that cannot start leaves the others unstarted, each with its reason."""
        parts = [j for j in self.components(job) if j.state == "PENDING"]
        if len(parts) == 1:
            return self._try_start(job)
        started: list[SimJob] = []
        for part in parts:
            if not self._try_start(part, announce=False):
                for done in started:
                    self._release(done)
                    done.state, done.nodes = "PENDING", []
                for other in parts:
                    other.reason = part.reason
                return False
            started.append(part)
        for part in started:
            self._notify_job(part)
        return True

    def _release(self, job: SimJob) -> None:
        """Give back what ``job`` holds on its nodes, and forget it."""
        self._release_alloc(job)
        job.alloc.clear()
        job.gres_alloc.clear()
        job.gres_types.clear()
        job.core_alloc.clear()

    def _end(self, job_id: int, state: str) -> None:
        job = self.jobs_by_id.get(job_id)
        if job is None or job.state in ENDED:
            return
        self._release(job)
        job.state = state
        job.end_time = self._now()
        job.ended_mono = time.monotonic()
        self._jobs_touched()
        self._notify_job(job)
        self.schedule()

    # --- wire shapes --------------------------------------------------------------------------

    @staticmethod
    def _parse_submit(version: str, body: Json) -> tuple[Json, bool]:
        """A version-neutral description from a submit body, and whether it is external."""
        if not isinstance(body, dict) or not isinstance(body.get("job"), dict):
            raise _SubmitError(9000, "Rejecting request. Failure parsing job description.")
        job = body["job"]
        desc: dict[str, Any] = {
            k: job.get(k)
            for k in (
                "name",
                "partition",
                "cpus_per_task",
                "tasks",
                "admin_comment",
                "comment",
                "tres_per_node",
                "user_id",
                "group_id",
                "account",
                "qos",
                "reservation",
                "constraints",
            )
        }
        # v0.0.38: a string of digits (job_properties); data_parser: uint32_no_val.
        raw_priority = job.get("priority")
        if isinstance(raw_priority, str):
            raw_priority = int(raw_priority) if raw_priority.isdigit() else None
        desc["priority"] = _number(raw_priority)
        if version == "v0.0.38":
            nodes = job.get("nodes") or [1]
            desc["min_nodes"] = int(nodes[0])
            desc["memory_per_node"] = job.get("memory_per_node")
            raw_limit = job.get("time_limit")
            desc["time_limit"] = _time_limit(raw_limit if isinstance(raw_limit, int) else None)
            # recorded from Slurm 22.05.8: "exclusive" (or user/mcs) is taken; the
            # document's "true" is refused
            if job.get("exclusive") == "true":
                raise _SubmitError(-1, "Invalid exclusive specification")
            desc["exclusive"] = job.get("exclusive") == "exclusive"
            external = False
        else:
            desc["min_nodes"] = job.get("minimum_nodes")
            desc["memory_per_node"] = _number(job.get("memory_per_node"))
            desc["time_limit"] = _time_limit(_number(job.get("time_limit")))
            desc["excluded_nodes"] = job.get("excluded_nodes") or []
            desc["required_nodes"] = _csv_string(job.get("required_nodes")) or []
            desc["exclusive"] = "none" in (job.get("shared") or [])
            desc["hold"] = job.get("hold") is True
            external = "EXTERNAL_JOB" in (job.get("flags") or [])
            if external and version == "v0.0.42":
                # recorded from Slurm 24.11.5: v0.0.42's parser has no such flag
                raise _SubmitError(9207, 'Unknown flag "EXTERNAL_JOB"')
        if not external and not (body.get("script") or job.get("script")):
            raise _SubmitError(9000, "batch job submission needs a script")
        return desc, external

    @staticmethod
    def _parse_update(version: str, body: Json) -> dict[str, Any]:
        """The fields of a job update body (v0.0.38 ``job_properties``, else
        ``job_desc_msg``) the simulator applies: time_limit, name, comment, admin_comment.

        Raises:
            TypeError: not a JSON object. ValueError: a time limit that is not minutes.
        """
        if not isinstance(body, dict):
            raise TypeError("the body is not a JSON object")
        out: dict[str, Any] = {}
        for key in ("name", "comment", "admin_comment"):
            if isinstance(body.get(key), str):
                out[key] = body[key]
        excluded = _csv_string(body.get("excluded_nodes"))
        if excluded is not None:  # [] changes nothing, [""] clears
            out["excluded_nodes"] = excluded
        raw = body.get("time_limit")
        limit = raw if version == "v0.0.38" else _number(raw)
        if limit is not None:
            if not isinstance(limit, int) or limit < 0:
                raise ValueError(f"time_limit: not a number of minutes: {raw!r}")
            out["time_limit"] = limit
        return out

    def _gres_detail(self, j: SimJob) -> list[str]:
        """``gres_detail``: one string per node of a running job that holds GRES, in node
        order (``gres_stepmgr_job_build_details``): ``name[:type]:count(IDX:list)``, the type
        being the node's (:meth:`SimJob.typed_gres`), comma separated per type (a node of
        two GPU types was not recorded from a real server)."""
        if j.gres is None or not j.gres_alloc:
            return []
        name = j.gres[0]
        out = []
        for node in j.nodes:
            parts = []
            for t, held in j.typed_gres(node):
                spec = f"{name}:{t}" if t else name
                parts.append(f"{spec}:{len(held)}(IDX:{bit_fmt(held) or 'N/A'})")
            out.append(",".join(parts))
        return out

    def _job_resources(self, version: str, j: SimJob) -> Json | None:
        """``job_resources`` of a running job (v0.0.40+; ``_dump_node_res`` in data_parser
        parsers.c: every core of every socket, ALLOCATED or UNALLOCATED)."""
        if not j.core_alloc:
            return None
        allocation = []
        for i, name in enumerate(j.nodes):
            node = self.nodes.get(name)
            if node is None:
                continue
            sockets, cores, threads = core_layout(node)
            held = set(j.core_alloc.get(name, ()))
            allocation.append(
                {
                    "index": i,
                    "name": name,
                    "cpus": {"count": j.alloc.get(name, 0), "used": 0},
                    "memory": {"used": 0, "allocated": j.memory_per_node},
                    "sockets": [
                        {
                            "index": s,
                            "cores": [
                                {
                                    "index": c,
                                    "status": [
                                        "ALLOCATED" if s * cores + c in held else "UNALLOCATED"
                                    ],
                                }
                                for c in range(cores)
                            ],
                        }
                        for s in range(sockets)
                    ],
                }
            )
        threads = core_layout(self.nodes[j.nodes[0]])[2] if j.nodes[0] in self.nodes else 1
        return {
            # v0.0.45 renamed the consumable-resource flags (CR_CORE_MEMORY …).
            "select_type": ["CR_CORE_MEMORY"] if version == "v0.0.45" else ["CORE", "MEMORY"],
            "nodes": {
                "count": len(j.nodes),
                "select_type": ["AVAILABLE"],
                "list": hostlist.compress(j.nodes),
                "whole": j.exclusive,
                "allocation": allocation,
            },
            "cpus": sum(j.alloc.values()),
            "threads_per_core": {"set": True, "infinite": False, "number": threads},
        }

    def _render_job_full(self, version: str, j: SimJob) -> Json:
        """A job as ``GET jobs`` renders it, with its GRES and cores once running."""
        out = self._render_job(version, j)
        out["gres_detail"] = self._gres_detail(j)
        if version != "v0.0.38":
            res = self._job_resources(version, j)
            if res is not None:
                out["job_resources"] = res
        if j.gres is not None:
            name, gres_type, count = j.gres
            out["tres_per_node"] = f"gres/{name}{':' + gres_type if gres_type else ''}={count}"
        return out

    @staticmethod
    def _render_job(version: str, j: SimJob) -> Json:
        def nv(n: int | None) -> Json:
            if version == "v0.0.38":  # plain integers; INFINITE (0xffffffff) when unset
                return n if n is not None else 4294967295
            if n is None:
                return {"set": False, "infinite": True, "number": 0}
            return {"set": True, "infinite": False, "number": n}

        return {
            "job_id": j.job_id,
            "name": j.name,
            "job_state": j.state if version == "v0.0.38" else [j.state],
            "state_reason": j.reason,
            "nodes": hostlist.compress(j.nodes),
            "partition": j.partition,
            "admin_comment": j.admin_comment,
            "comment": j.comment,
            "flags": list(j.flags),
            "user_id": j.user_id,
            "user_name": j.user_name,
            "group_id": j.group_id,
            "group_name": j.group_name,
            "account": j.account,
            "qos": j.qos,
            "submit_time": nv(j.submit_time),
            "start_time": nv(j.start_time),
            "end_time": nv(j.end_time),
            "time_limit": nv(j.time_limit),
            "node_count": nv(len(j.nodes) or j.min_nodes),
            "excluded_nodes": hostlist.compress(sorted(j.excluded)),
            "required_nodes": hostlist.compress(sorted(j.required)),
            # openapi job_info: uint32_no_val on data_parser versions, an integer on v0.0.38
            "priority": nv(j.priority),
            **(
                {}
                if version == "v0.0.38"
                else {
                    # recorded from 26.05.5: a plain job reads 0 / "" / 0, all "set"
                    "het_job_id": {"set": True, "infinite": False, "number": j.het_job_id},
                    "het_job_id_set": j.het_id_set,
                    "het_job_offset": {"set": True, "infinite": False, "number": j.het_offset},
                }
            ),
        }
