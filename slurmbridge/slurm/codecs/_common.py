"""What every codec shares: the codec interface, Slurm's NoVal numbers, error bodies, states.

A codec turns one API version's JSON into the version-neutral models and back. It never does
I/O: the client sends, checks the HTTP status and hands the body over. Responses are decoded
with msgspec Structs typed to the fields we read; msgspec ignores the many other fields, so a
server that adds fields keeps working, while a field we read that changes type fails loudly as
:class:`~slurmbridge.slurm.errors.BadResponse`.

Slurm's "NoVal" numbers: v0.0.40+ wraps integers that may be unset or infinite in
``{"set": bool, "infinite": bool, "number": int}``; v0.0.38 writes ``null`` for unset and the
raw ``uint32`` sentinels as ``-1`` (INFINITE) / ``-2`` (NO_VAL) or ``4294967295`` /
``4294967294``. :func:`noval` maps every spelling to ``int | None``.
"""

from __future__ import annotations

import abc
import hashlib
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar, Final, NamedTuple, TypeVar

import msgspec

from slurmbridge.slurm.errors import BadResponse, Unsupported
from slurmbridge.slurm.models import (
    BASE_STATES,
    JobGres,
    JobList,
    JobStates,
    JobSubmit,
    NodeList,
    NodeUpdate,
    PartitionDesc,
    PartitionList,
    Ping,
    Reservation,
    ReservationDesc,
)

__all__ = [
    "Codec",
    "ErrorEntry",
    "ErrorReport",
    "ItemMemo",
    "JobStateMemo",
    "NoVal",
    "Paths",
    "csv_tuple",
    "decode",
    "error_report",
    "noval",
    "parse_gres_detail",
    "parse_index_list",
    "state_tuple",
]

T = TypeVar("T")
M = TypeVar("M")

#: uint32 INFINITE and NO_VAL, and the 64-bit ones, as Slurm may print them raw.
_SENTINELS: Final = frozenset({0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFE})


class NoVal(msgspec.Struct, frozen=True):
    """Slurm's ``*_no_val_struct``: ``number`` counts only when ``set`` and not ``infinite``."""

    set: bool = False
    infinite: bool = False
    number: int = 0


def noval(value: NoVal | int | None) -> int | None:
    """The number, or ``None`` for unset / infinite / a raw sentinel / a negative value."""
    if value is None:
        return None
    if isinstance(value, NoVal):
        if value.infinite or not value.set:
            return None
        value = value.number
    if value < 0 or value in _SENTINELS:
        return None
    return value


class ErrorEntry(msgspec.Struct, frozen=True):
    """One entry of a response's ``errors`` list (v0.0.38 uses ``errno`` in some answers)."""

    error: str | None = None
    error_number: int | None = None
    errno: int | None = None
    description: str | None = None
    source: str | None = None

    @property
    def number(self) -> int:
        """The Slurm errno (0 when absent)."""
        if self.error_number is not None:
            return self.error_number
        return self.errno or 0

    @property
    def text(self) -> str:
        """``description: error`` (whichever parts are present)."""
        parts = [p for p in (self.description, self.error) if p]
        return ": ".join(dict.fromkeys(parts)) or f"Slurm error {self.number}"


class _ErrorsBody(msgspec.Struct, frozen=True):
    errors: list[ErrorEntry] | None = None


class ErrorReport(NamedTuple):
    """The errors of one response: the first non-zero errno and every text."""

    error_number: int
    texts: tuple[str, ...]


_ERRORS_DECODER: Final = msgspec.json.Decoder(_ErrorsBody)


def error_report(body: bytes) -> ErrorReport:
    """Read the ``errors`` list of any slurmrestd JSON body (empty when not JSON or absent)."""
    try:
        parsed = _ERRORS_DECODER.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return ErrorReport(0, ())
    entries = parsed.errors or []
    number = next((e.number for e in entries if e.number), 0)
    return ErrorReport(number, tuple(e.text for e in entries))


def decode(decoder: msgspec.json.Decoder[T], body: bytes, what: str) -> T:
    """Decode ``body`` or raise :class:`BadResponse` naming ``what``."""
    try:
        return decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadResponse(f"unexpected {what} response: {exc}") from None


_DIGEST: Final = operator.methodcaller("digest")


class ItemMemo:
    """The models decoded from a listing's items, by a digest of each item's raw JSON.

    A large cluster's listings repeat mostly unchanged items every poll; an item whose bytes
    are the same as in the previous listing gets the *same* model object back, without being
    decoded again — and the poller, seeing the same object, skips translating and diffing it
    (bench/scale.py measures the difference). Digests are SHA-256 of the item's bytes (with
    SHA CPU extensions 2.5× faster than BLAKE2b here), so a reused model always comes from
    identical JSON. Holds the last listing's items only.
    """

    def __init__(self) -> None:
        self.items: dict[bytes, object] = {}
        self.reused = 0

    def map(self, raws: Sequence[msgspec.Raw], decode_one: Callable[[msgspec.Raw], M]) -> list[M]:
        """``decode_one`` applied to each raw item, or the model of an identical earlier one."""
        # Digests and lookups run as C-level map()s: at 100,000 items a Python loop over
        # them costs more than the hashing (bench/scale.py).
        digests = list(map(_DIGEST, map(hashlib.sha256, raws)))
        models: list[object | None] = list(map(self.items.get, digests))
        missing = [i for i, m in enumerate(models) if m is None]
        fresh: dict[bytes, object] = {}
        for i in missing:
            digest = digests[i]
            model = fresh.get(digest)
            if model is None:
                model = fresh[digest] = decode_one(raws[i])
            models[i] = model
        self.items = dict(zip(digests, models, strict=True))
        self.reused = len(raws) - len(missing)
        return models  # type: ignore[return-value]


class JobStateMemo:
    """What the previous ``GET jobs/state`` listing said, kept to tell the next one's changes
    by comparing raw entries instead of decoding and comparing every job.

    A busy cluster's state list repeats ~100,000 unchanged entries every poll; the codec finds
    the entries whose bytes are new or gone with two set differences (C-level) and decodes
    only those (bench/scale.py). Entries are kept as their bytes (~80 B each pretty-printed),
    not digests: hashing 100,000 small items with hashlib costs more than copying them.

    ``entries``: raw entry → (job id, state). ``count``: job id → how many entries name it (a
    pending array's expanded tasks share the meta record's id). ``states``: job id → state,
    the listing as :attr:`JobStates.states` gives it (mutated by the next listing).
    """

    def __init__(self) -> None:
        self.entries: dict[bytes, tuple[str, tuple[str, ...]]] = {}
        self.count: dict[str, int] = {}
        self.states: dict[str, tuple[str, ...]] = {}
        #: False until a listing was decoded with this memo (its ``changed`` is then None).
        self.primed = False


def state_tuple(states: Iterable[str]) -> tuple[str, ...]:
    """Upper-case states with the base state moved first, flags in the server's order."""
    upper = [s.upper() for s in states if s]
    base = next((s for s in upper if s in BASE_STATES), None)
    if base is None:
        return tuple(upper)
    rest = list(upper)
    rest.remove(base)
    return (base, *rest)


def csv_tuple(value: Sequence[str] | str | None) -> tuple[str, ...]:
    """A csv string or a list of strings as a tuple of non-empty items."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    return tuple(s.strip() for s in items if s and s.strip())


#: One entry of a job's ``gres_detail``: ``name[:type]:count(IDX:list)``, ``name[:type](CNT:n)``
#: or a shared GRES's ``name[:type]:count(per-device use)`` — Slurm's
#: ``gres_stepmgr_job_build_details`` (src/stepmgr/gres_stepmgr.c) prints them, comma
#: separated, one string per node of the job in node order.
_GRES_DETAIL: Final = re.compile(r"(?P<spec>[^,()]+?)(?::(?P<count>\d+))?\((?P<body>[^()]*)\)")


def parse_index_list(text: str) -> tuple[int, ...]:
    """A Slurm bitmap list (``bit_fmt``: ``0-1,3``) as sorted indices.

    Raises:
        BadResponse: not such a list.
    """
    out: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise BadResponse(f"GRES index list {text!r} is not like 0-1,3")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise BadResponse(f"GRES index list {text!r}: {part} runs backwards")
        out.update(range(first, last + 1))
    return tuple(sorted(out))


def parse_gres_detail(text: str) -> tuple[JobGres, ...]:
    """The GRES of one node of a job from its ``gres_detail`` entry: ``gpu:nvidia:2(IDX:0-1)``,
    ``gpu:2(IDX:0,2)``, ``gpu(CNT:2)`` (no indices), several comma separated. A shared
    GRES (``shard:2(2/4,0/4)``) keeps its count and no indices.

    Raises:
        BadResponse: an entry that is none of these.
    """
    out: list[JobGres] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _GRES_DETAIL.match(text, pos)
        if m is None:
            raise BadResponse(f"gres_detail {text!r} is not like gpu:nvidia:2(IDX:0-1)")
        name, _, gres_type = m.group("spec").strip().partition(":")
        body = m.group("body")
        count = int(m.group("count")) if m.group("count") is not None else 0
        indices: tuple[int, ...] = ()
        if body.startswith("IDX:"):
            if body[4:] != "N/A":
                indices = parse_index_list(body[4:])
        elif body.startswith("CNT:") and body[4:].isdigit():
            count = int(body[4:])
        out.append(JobGres(name=name, type=gres_type, count=count or len(indices), indices=indices))
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise BadResponse(f"gres_detail {text!r} is not like gpu:nvidia:2(IDX:0-1)")
            pos += 1
    return tuple(out)


class Paths(NamedTuple):
    """URL paths of one API version, exactly as its OpenAPI document spells them.

    ``node`` / ``partition`` contain ``{node_name}`` / ``{partition_name}``. ``new_node`` is
    ``POST new/node/`` (dynamic node creation), ``""`` where the version has none (before
    v0.0.44).
    """

    ping: str
    nodes: str
    node: str
    partitions: str
    partition: str
    new_node: str = ""
    jobs: str = ""
    job: str = ""
    job_submit: str = ""
    #: ``GET jobs/state/`` (job ids and states only; v0.0.42+), ``""`` where absent.
    job_states: str = ""
    #: ``GET``/``DELETE reservation/{reservation_name}`` and ``POST reservation`` (create or
    #: update); ``reservation_new`` is ``""`` before v0.0.43 (GET only there: no create,
    #: update or delete in the v0.0.41/v0.0.42 documents).
    reservation: str = ""
    reservation_new: str = ""
    #: ``GET reservations/`` (v0.0.41+).
    reservations: str = ""
    #: ``POST partitions/`` (create or update; v0.0.45+), ``""`` where absent; the
    #: same version has ``DELETE`` on ``partition``.
    partition_new: str = ""


class _Submitted(msgspec.Struct):
    job_id: int | None = None


#: Built once: a class and a decoder made per submit cost more than the answer's decoding.
_SUBMITTED: Final = msgspec.json.Decoder(_Submitted)


class Codec(abc.ABC):
    """One slurmrestd API version: paths, capabilities, and JSON ⇄ models.

    Capabilities (class attributes, read from the version's OpenAPI document):
    ``node_update`` — ``POST node/{node_name}`` exists; ``node_create`` — ``POST new/node/``
    exists (v0.0.44+); ``node_delete`` — ``DELETE node/{node_name}`` exists (v0.0.40+);
    ``nodes_update_time`` / ``partitions_update_time`` — the listing accepts
    ``?update_time=`` and answers 304.
    """

    version: ClassVar[str]
    paths: ClassVar[Paths]
    node_update: ClassVar[bool] = True
    node_create: ClassVar[bool] = False
    node_delete: ClassVar[bool] = True
    nodes_update_time: ClassVar[bool] = True
    partitions_update_time: ClassVar[bool] = True

    def encode_reservation(self, desc: ReservationDesc) -> bytes:
        """``reservation_desc_msg`` for ``POST reservation``.

        Raises:
            Unsupported: the version cannot create reservations (before v0.0.43).
        """
        del desc
        raise Unsupported(self.version, "create_reservation")

    def encode_partition(self, desc: PartitionDesc) -> bytes:
        """``openapi_partitions_mod_req`` for ``POST partitions/``.

        Raises:
            Unsupported: the version cannot create partitions (before v0.0.45).
        """
        del desc
        raise Unsupported(self.version, "create_partition")

    def decode_reservations(self, body: bytes) -> tuple[Reservation, ...]:
        """``GET reservation/{name}``. Raises Unsupported here (versions that read
        reservations override it)."""
        del body
        raise Unsupported(self.version, "get_reservation")

    @abc.abstractmethod
    def decode_ping(self, body: bytes) -> Ping:
        """Decode ``GET ping``. Raises BadResponse."""

    @abc.abstractmethod
    def decode_nodes(self, body: bytes, memo: ItemMemo | None = None) -> NodeList | None:
        """Decode ``GET nodes`` / ``GET node/{name}``; ``None`` when the body has no node list
        (slurmrestd's answer to an error, even with HTTP 200). ``memo``: reuse the models of
        unchanged items (:class:`ItemMemo`; versions may ignore it). Raises BadResponse."""

    @abc.abstractmethod
    def decode_partitions(self, body: bytes) -> PartitionList | None:
        """Decode ``GET partitions``; ``None`` when the body has no partition list.
        Raises BadResponse."""

    @abc.abstractmethod
    def encode_node_update(self, update: NodeUpdate) -> bytes:
        """The JSON body of ``POST node/{name}``.

        Raises:
            Unsupported: the version has no node update, or does not know a requested state.
        """

    def encode_create_node(self, node_conf: str) -> bytes:
        """The JSON body of ``POST new/node/`` (``openapi_create_node_req``).

        Raises:
            Unsupported: the version cannot create nodes (the default; v0.0.44+ override).
        """
        del node_conf
        raise Unsupported(self.version, "create_node")

    def decode_jobs(self, body: bytes, memo: ItemMemo | None = None) -> JobList | None:
        """Decode ``GET jobs`` / ``GET job/{id}``; ``None`` when the body has no job list.
        ``memo``: reuse the models of unchanged items (:class:`ItemMemo`).

        Raises:
            BadResponse: the body does not match; Unsupported: the version has no jobs.
        """
        del body, memo
        raise Unsupported(self.version, "list_jobs")

    def decode_job_states(self, body: bytes, memo: JobStateMemo | None = None) -> JobStates | None:
        """Decode ``GET jobs/state``; ``None`` when the body has no job list. ``memo``: tell
        the changes since the previous listing decoded with it (:attr:`JobStates.changed`).

        Raises:
            BadResponse: the body does not match; Unsupported: the version has no
                ``jobs/state`` (the default; the data_parser versions override).
        """
        del body, memo
        raise Unsupported(self.version, "list_job_states")

    def encode_job_update(self, excluded_nodes: tuple[str, ...]) -> bytes:
        """The body of ``POST job/{job_id}`` changing a pending job's excluded nodes.

        Raises:
            Unsupported: the version cannot update jobs this way (the default).
        """
        del excluded_nodes
        raise Unsupported(self.version, "update_job")

    def encode_submit(self, job: JobSubmit) -> bytes:
        """The JSON body of ``POST job/submit``.

        Raises:
            Unsupported: the version cannot submit jobs.
        """
        del job
        raise Unsupported(self.version, "submit_job")

    def encode_het_submit(self, components: tuple[JobSubmit, ...]) -> bytes:
        """The JSON body of ``POST job/submit`` for a heterogeneous job.

        Raises:
            Unsupported: the version cannot (the default; data_parser versions can).
        """
        del components
        raise Unsupported(self.version, "submit_het_job")

    def decode_submit(self, body: bytes) -> int:
        """The job id of a ``POST job/submit`` answer. Raises BadResponse."""
        parsed = decode(_SUBMITTED, body, "job submit")
        if parsed.job_id is None:
            raise BadResponse("job submit response has no job_id")
        return parsed.job_id

    def update_time_param(self, update_time: int) -> str:
        """The ``update_time`` query value (epoch seconds as a decimal string)."""
        return str(int(update_time))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.version}>"
