"""A slurmrestd simulator (aiohttp) for API v0.0.38 and v0.0.42-v0.0.45.

Who uses it: the integration tests, ``slurmbridge demo`` and ``slurmbridge sim slurmrestd``
(through :func:`serve`), and benchmarks (through :attr:`SlurmSim.on_update`,
:attr:`SlurmSim.on_create` and :attr:`SlurmSim.on_delete`). Its fidelity is
itself tested: every response is validated against the real OpenAPI documents in
``tests/data/slurm-openapi/``, and its behaviour is the one observed on a real Slurm 22.05,
24.11.5 and 26.05.5 (each such place names the release it was recorded from), else read in
Slurm's sources.

Model. One cluster: nodes and partitions, a "last changed" second for each (slurmctld's
``last_node_update`` / ``last_part_update``) and a clock (injectable, so tests control
``update_time``). A node's base state is derived from its allocated CPUs (IDLE / MIXED /
ALLOCATED) unless overridden (DOWN, FUTURE …), and its flags (DRAIN, FAIL …) are kept apart,
so a drain requested on a busy node shows as ``ALLOCATED+DRAIN`` and becomes ``IDLE+DRAIN``
by itself when :meth:`SlurmSim.release` frees the node — the hook a job scheduler will use
(:meth:`SlurmSim.allocate` / :meth:`SlurmSim.release`; jobs themselves come later).
Node updates from REST and from the in-process "administrator" helpers go through one
function (:meth:`SlurmSim._update_node`) that follows slurmctld's ``update_node()`` rules:
RESUME is only valid on DOWN/DRAIN/FAIL nodes, a reason is recorded with its user and time,
and the reason is cleared once the node is neither DOWN, DRAIN nor FAIL.

Deliberate fidelity, where real slurmrestd and its OpenAPI document disagree:

* v0.0.38 answers node updates with 405 (text/plain) and unknown nodes/partitions with HTTP
  500 and ``errors[].errno``; a present but invalid token with HTTP 500 and ``errno`` -1
  (a real 22.05 does that: the token is passed through to slurmctld, which rejects it). A
  missing token or user name is 401.
* v0.0.42+ answers a missing token with 401, and a token slurmctld rejects (bad signature,
  expired, another user's name without an admin token) the way 24.11.5 and 26.05.5 do: the
  ping is HTTP 200 with the controller "not responding" (v0.0.45 adds ``status: "Protocol
  authentication error"``), the listings are HTTP 511 with error 1007 (partitions: 511 and
  an empty ``errors`` list).
* v0.0.42+ answers ``GET node/{unknown}`` with HTTP 200, an ``errors`` entry whose
  ``error_number`` is 0, and no ``nodes`` (SlinkyProject/slurm-operator#79).
* ``GET nodes?update_time=T`` and ``GET partitions?update_time=T`` answer 304 when nothing
  changed in second ``T`` or after (slurmctld compares ``T - 1 >= last change``, so a change
  in the same second as the previous listing is still listed), and a listing's
  ``last_update`` is the time of the listing, not of the last change (both measured on
  26.05.5: a drain in the second of ``T`` is listed, and ``last_update`` is "now");
  ``GET jobs?update_time=T`` answers 304 only on v0.0.38 — the data_parser
  versions answer HTTP 200, ``"jobs": []``, ``last_update`` 0 and a warning "No job changes
  since update_time[T]=…" (24.11.5 and 26.05.5). In every released slurmrestd (22.05 …
  26.05.3) a conditional node listing fails with error -1 when nodes changed but partitions
  did not (SchedMD commit cbbcf7bd; ``update_time_quirk=False`` gives the fixed behaviour).
* Error bodies lack the listing's required fields (``nodes``, ``last_update``), as real ones do.
* A Slurm error slurmrestd maps to no particular status is HTTP 500 on 22.05 (v0.0.38) and
  24.11, and HTTP 422 from 25.05 on (recorded from 26.05.5) — ``slurm_release`` chooses.
* ``POST job/{id}`` answers ``"results": null`` on 25.05+ (recorded from 26.05.5) where the
  document wants an array; ``DELETE job/{id}`` answers HTTP 200 with ``errors: []`` and each
  job's failure in ``status[]`` (2017 unknown job, 2021 already done).

Where only the document can be followed (v0.0.38's ``meta.Slurm.version`` numbers, which the
real server prints as integers, and fields it prints as ``null``), the simulator follows the
document: integers become strings and ``null`` fields are left out.

Releases. ``SlurmSim(slurm_release=…)`` (24.11, 25.05, 25.11, 26.05; default 26.05) selects
what differs between releases: the versions served (24.11: v0.0.42 only, so no ``POST
new/node/`` and no ``EXTERNAL_JOB``; 26.05: v0.0.42-45, and v0.0.38, which always stands for
a Slurm 22.05 server), the status of Slurm errors (above), whether UNDRAIN keeps the drain
reason (24.11) and whether a job asking for more nodes than its partition has is refused at
submit (24.11: 2014) or left PENDING with reason ``PartitionConfig`` (26.05). ``meta`` keeps
naming the release of each version's document.

Permissions. :attr:`SlurmSim.operators` are the users slurmctld treats as operators or
administrators; only they may set ``admin_comment`` on submit (others get 2002
"Access/permission denied") or update, create and delete nodes (others get 2010 "Invalid user
id", ESLURM_USER_ID_MISSING), as on 24.11.5 and 26.05.5 (recorded for submit and node update;
create and delete are assumed to answer as the update does). The request's
user is the token's, or ``X-SLURM-USER-NAME`` when a root/slurm token names another user
(slurmrestd then acts as that user: impersonation). The default operators include
``slurmrest``, the user :meth:`SlurmSim.write_token` issues tokens for, so the harness acts as
an administrator as the real rigs' root token does.

Identity (recorded from Slurm 26.05.5, tests/real_slurm/test_modern_tenancy.py): a submit's
``user_id`` / ``group_id`` (digits or a name) are recorded on the job (``user_id``,
``user_name``, ``group_id``, ``group_name`` in listings; :meth:`SlurmSim.add_user` fills the
passwd database, which holds only ``root`` at first). An operator may submit for any user; a
plain user's submit for another uid is refused with 2010, for another group with 2113; an
unknown name is 2166; a reservation whose ``Users=`` lacks the job's user is 2052. Accounts and
QOS are recorded, not enforced: real Slurm without accounting (the rigs have no slurmdbd) takes
any account, even one a partition's ``AllowAccounts`` excludes, and any QOS.

Nodes after RESUME/UNDRAIN. A drained node that is resumed or undrained reads
``IDLE+NOT_RESPONDING`` for :attr:`SlurmSim.not_responding_after_resume_s` seconds of the
simulator's clock (1 s; until slurmctld's next ping on a real cluster, 24.11.5 and 26.05.5);
the scheduler ignores that flag (simplification: nothing would retry pending jobs when it
goes). An external node running an external job (``EXTERNAL_JOB``) reads ``ALLOCATED`` with
``alloc_cpus`` 0 (26.05.5).

Dynamic (external) nodes, v0.0.44+ ``POST new/node/`` and v0.0.42+ ``DELETE node/{name}``,
follow slurmctld's ``create_nodes()`` / ``delete_nodes()`` (``src/slurmctld/node_mgr.c``,
Slurm 25.11): the ``node_conf`` line is parsed with slurm.conf's NodeName keys (an unknown
key or a malformed value ⇒ error -1, as ``slurm_conf_parse_nodeline`` fails);
only ``State=FUTURE``, ``CLOUD…`` or ``EXTERNAL…`` are accepted (else 2028); a known name ⇒
2168 ``ESLURM_NODE_ALREADY_EXISTS``. ``EXTERNAL`` is a state flag in Slurm, so an external
node is ``IDLE`` + ``EXTERNAL`` + ``DYNAMIC_NORM`` (drain and undrain work as on any node).
Deleting an unknown node ⇒ 2018, a node from the seed (not dynamic) ⇒ 2028 ("Can't delete
non-dynamic node"), a node with allocated CPUs (:meth:`SlurmSim.allocate`) or COMPLETING /
RESERVED ⇒ 2016 ``ESLURM_NODES_BUSY``; all with the release's error status. A created node
joins every existing partition whose name is one of its features — real sites get that effect
with ``NodeSet=x Feature=x`` + ``PartitionName=x Nodes=x`` in slurm.conf — at creation only:
a later feature update does **not** move it between partitions (observed on 26.05.5; a
partition added later with :meth:`SlurmSim.add_partition` still picks up the dynamic nodes
whose features name it). Nodes from the seed keep their explicit partitions whatever their
features. Node features follow ``update_node()``: ``"features": []`` changes nothing,
``[""]`` clears; the available features change even when the active ones
(``features_act``, stored) are then not a subset of them, but the answer is error 2031 "Active
features not subset of available features" (26.05.5).

Auth: ``X-SLURM-USER-TOKEN`` is either a JWT (HS256, verified with :attr:`SlurmSim.jwt_key`,
claims ``sun`` and ``exp`` as ``scontrol token`` issues them) or, when ``start(token=...)``
was given, that static string. :meth:`SlurmSim.write_token` writes an accepted token to a file.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import hashlib
import hmac
import json
import logging
import os
import random
import re
import secrets
import shlex
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec
import orjson
from aiohttp import web

from slurmbridge.devtools.sim.slurmjobs import ENDED, JobsMixin, SimJob, _csv_string, _SubmitError
from slurmbridge.devtools.sim.slurmreservations import ReservationsMixin
from slurmbridge.slurm import hostlist
from slurmbridge.slurm.codecs._dataparser import NODE_FLAGS_V0042, NODE_STATES_V0042
from slurmbridge.slurm.models import BASE_STATES, Node, NodeUpdate

_CHAOS_DONE: Final = web.RequestKey("chaos-done", bool)

__all__ = [
    "ALL_VERSIONS",
    "RELEASES",
    "SLURM_RELEASES",
    "NodeCallback",
    "SimError",
    "SimNode",
    "SimPartition",
    "SlurmSim",
    "UnknownNodeError",
    "UpdateCallback",
    "serve",
]

log = logging.getLogger(__name__)

#: Every version the simulator can serve, newest first.
ALL_VERSIONS: Final[tuple[str, ...]] = ("v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42", "v0.0.38")

#: The Slurm release whose OpenAPI document each version follows.
RELEASES: Final[Mapping[str, str]] = {
    "v0.0.38": "22.05.8",
    "v0.0.42": "24.11.6",
    "v0.0.43": "25.05.8",
    "v0.0.44": "25.11.7",
    "v0.0.45": "26.05.2",
}

#: The Slurm releases :class:`SlurmSim` can behave as (``slurm_release``), and the versions
#: each serves by default, newest first. A real 24.11 serves v0.0.40-42, 25.05 v0.0.41-43,
#: 25.11 v0.0.42-44 and 26.05.5 v0.0.42-45 (recorded from 24.11.5 and 26.05.5); the simulator
#: knows only v0.0.38 and v0.0.42+. v0.0.38 always stands for a Slurm 22.05 server; it is kept
#: with 26.05 (the default) so that one simulator serves the old and the new API.
SLURM_RELEASES: Final[Mapping[str, tuple[str, ...]]] = {
    "24.11": ("v0.0.42",),
    "25.05": ("v0.0.43", "v0.0.42"),
    "25.11": ("v0.0.44", "v0.0.43", "v0.0.42"),
    "26.05": ALL_VERSIONS,
}

#: Node states each version's document accepts in ``node.state`` and ``update_node_msg.state``
#: (the same enum the client's codecs check against, from the OpenAPI documents).
_STATES_42: Final = NODE_STATES_V0042
_STATES_44: Final = _STATES_42 | {"EXTERNAL", "BLOCKED"}
_NODE_STATES: Final[Mapping[str, frozenset[str]]] = {
    "v0.0.42": _STATES_42,
    "v0.0.43": _STATES_42,
    "v0.0.44": _STATES_44,
    "v0.0.45": _STATES_44 | {"POWER_DOWN_ASAP", "POWER_DOWN_FORCE"},
}

# Slurm errno values and texts (slurm/slurm_errno.h, src/common/slurm_errno.c).
_ERRNO_TEXT: Final[Mapping[int, str]] = {
    -1: "Unspecified error",
    0: "No error",
    1007: "Protocol authentication error",
    2000: "Invalid partition name specified",
    2002: "Access/permission denied",
    2010: "Invalid user id",
    2014: "Requested node configuration is not available",
    2016: "Requested nodes are busy",
    2017: "Invalid job id specified",
    2018: "Invalid node name specified",
    2021: "Job/step already completing or completed",
    2028: "Invalid node state specified",
    2029: "Invalid feature specification",
    2031: "Active features not subset of available features",
    2052: "Access denied to requested reservation",
    2053: "Requested reservation is invalid",
    2113: "Invalid group id",
    2166: "Unable to resolve user ID to user name",
    2075: "Partition is in use",
    2104: "Reservation already started",
    2168: "Node already exists in the node table",
    2180: "Invalid node state transition",
    9000: "Query empty or not RFC7320 compliant",
    9001: "Failure during parsing",
    9207: "Data parser unable to parse invalid flag",
}
_UNKNOWN_URL: Final = "Unable find requested URL. Please view /openapi/v3 for API reference."
_NO_METHOD: Final = (
    "Requested REST method is not defined at URL. Please view /openapi/v3 for API reference."
)
_AUTH_FAILURE: Final = "Authentication failure"
_ARRIVED: Final = web.RequestKey("arrived", float)
_USER: Final = web.RequestKey("user", str)
#: slurmctld's answer to a token it rejects (SLURM_PROTOCOL_AUTHENTICATION_ERROR), which
#: slurmrestd maps to HTTP 511 (recorded from 24.11.5 and 26.05.5).
_AUTH_ERRNO: Final = 1007
#: ESLURM_ACCESS_DENIED: ``admin_comment`` on submit by a user who is not an operator
#: (recorded from 24.11.5 and 26.05.5).
_ACCESS_DENIED: Final = 2002
#: ESLURM_USER_ID_MISSING: a node update (create, delete) by a user who is not an
#: administrator (recorded from 24.11.5 and 26.05.5: 2010 "Invalid user id").
_NOT_ADMIN: Final = 2010
#: ESLURM_ACTIVE_FEATURE_NOT_SUBSET (recorded from 26.05.5).
_NOT_SUBSET: Final = 2031
#: slurmctld's refusals of a submit that slurmrestd reports as "Batch job submission failed"
#: from ``slurm_submit_batch_job()`` (recorded from 26.05.5): another user's uid (2010) or a
#: group not the user's (2113) by a plain user, a reservation whose ``Users=`` lacks the
#: job's user (2052).
_SUBMIT_REFUSALS: Final = frozenset({2010, 2113, 2052, 2053})

#: Node state flags in the order data_parser (v0.0.42-45) lists them after the base state
#: (``PARSER_FLAG_ARRAY(NODE_STATES)`` in ``src/plugins/data_parser/v0.0.44/parsers.c``).
_FLAG_ORDER: Final[Mapping[str, int]] = {
    f: i for i, f in enumerate(("EXTERNAL", *NODE_FLAGS_V0042, "BLOCKED"))
}

#: slurm.conf NodeName keys (``_nodename_options`` in ``src/common/read_config.c``, 25.11),
#: lower case (Slurm compares them case-insensitively), with the kind of value each takes.
_NODE_CONF_KEYS: Final[Mapping[str, str]] = {
    "bcastaddr": "str",
    "boards": "int",
    "corespeccount": "int",
    "corespersocket": "int",
    "cpus": "int",
    "cpuspeclist": "str",
    "cpubind": "str",
    "feature": "str",
    "features": "str",
    "gres": "str",
    "gresconf": "str",
    "memspeclimit": "int",
    "nodeaddr": "str",
    "nodehostname": "str",
    "parameters": "str",
    "port": "str",
    "procs": "int",
    "realmemory": "int",
    "reason": "str",
    "restrictedcorespergpu": "int",
    "sockets": "int",
    "socketsperboard": "int",
    "state": "str",
    "threadspercore": "int",
    "tmpdisk": "int",
    "topology": "str",
    "tresweights": "str",
    "weight": "int",
}

Json = dict[str, Any]
UpdateCallback = Callable[[str, NodeUpdate, float], None]
"""``on_update`` hook: node name, the update, ``time.monotonic()`` when the request arrived."""
NodeCallback = Callable[[str, float], None]
"""``on_create`` / ``on_delete`` hook: node name, ``time.monotonic()`` when the request
arrived (called once per node, after the change is applied)."""


class SimError(ValueError):
    """A Slurm error raised by the simulator's state model (errno + text)."""

    def __init__(self, errno: int, description: str) -> None:
        super().__init__(f"{description} ({errno}: {_ERRNO_TEXT.get(errno, '')})")
        self.errno = errno
        self.description = description


class UnknownNodeError(SimError, LookupError):
    """2018 ``ESLURM_INVALID_NODE_NAME``: no node of that name (also a :class:`LookupError`,
    so ``except LookupError`` catches a missing node in tests and harnesses)."""

    def __init__(self, name: str) -> None:
        super().__init__(2018, f"Invalid node name {name}")
        self.name = name


@dataclass
class SimNode:
    """A simulated node. ``base`` overrides the derived base state (DOWN, FUTURE …);
    ``None`` derives it from ``alloc_cpus`` (IDLE / MIXED / ALLOCATED). ``dynamic``: created
    through ``POST new/node/`` (deletable; joins the partitions its features name when
    created). ``sockets`` / ``cores`` (per socket) / ``threads`` (per core): 0 = not
    configured, reported as ``cpus`` sockets of one single-threaded core. ``real_memory`` /
    ``tmp_disk`` in MiB. ``active_features``: Slurm's ``features_act`` (the available
    ``features`` when not given). ``external_cpus``: the part of ``alloc_cpus`` external jobs
    hold on an external node (reported as 0 allocated CPUs). ``unresponsive_until``: epoch
    second until which the node reads NOT_RESPONDING after a RESUME/UNDRAIN (module
    docstring)."""

    name: str
    cpus: int = 2
    real_memory: int = 1000
    features: list[str] = field(default_factory=list)
    gres: str = ""
    address: str = "127.0.0.1"
    comment: str = ""
    #: ``Extra`` (``scontrol update nodename=… extra=…``; REST ``update_node_msg.extra``).
    extra: str = ""
    base: str | None = None
    flags: list[str] = field(default_factory=list)
    alloc_cpus: int = 0
    alloc_memory: int = 0
    reason: str = ""
    reason_user: str = ""
    reason_time: int = 0
    boot_time: int = 0
    dynamic: bool = False
    sockets: int = 0
    cores: int = 0
    threads: int = 0
    topology: str = ""
    weight: int = 1
    tmp_disk: int = 0
    active_features: list[str] = field(default_factory=list)
    external_cpus: int = 0
    unresponsive_until: float = 0.0
    #: GPU indices / abstract cores running jobs hold (slurmjobs: the GRES and core layout).
    gres_held: set[int] = field(default_factory=set)
    cores_held: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not self.active_features:
            self.active_features = list(self.features)

    @property
    def base_state(self) -> str:
        """The base state Slurm would report."""
        if self.base is not None:
            return self.base
        if self.external_cpus > 0:
            # An external job makes its external node ALLOCATED whatever its CPU count
            # (recorded from Slurm 26.05.5: alloc_cpus 0, state ALLOCATED+EXTERNAL).
            return "ALLOCATED"
        if self.alloc_cpus <= 0:
            return "IDLE"
        return "ALLOCATED" if self.alloc_cpus >= self.cpus else "MIXED"

    @property
    def shown_alloc_cpus(self) -> int:
        """``alloc_cpus`` as Slurm reports it: external jobs' CPUs do not count (recorded
        from Slurm 26.05.5)."""
        return self.alloc_cpus - self.external_cpus

    def state_at(self, now: float) -> tuple[str, ...]:
        """:attr:`state` as the data_parser versions report it at epoch second ``now``: with
        NOT_RESPONDING while a RESUME/UNDRAIN is fresh (recorded from Slurm 24.11.5 and
        26.05.5: ``idle*`` for about 1 s)."""
        if now < self.unresponsive_until and "NOT_RESPONDING" not in self.flags:
            flags = sorted(
                [*self.flags, "NOT_RESPONDING"],
                key=lambda f: _FLAG_ORDER.get(f, len(_FLAG_ORDER)),
            )
            return (self.base_state, *flags)
        return self.state

    @property
    def state(self) -> tuple[str, ...]:
        """Base state, then flags in the order Slurm's data_parser lists them."""
        flags = sorted(self.flags, key=lambda f: _FLAG_ORDER.get(f, len(_FLAG_ORDER)))
        return (self.base_state, *flags)

    def add_flag(self, flag: str) -> None:
        """Set ``flag`` (kept in insertion order, once)."""
        if flag not in self.flags:
            self.flags.append(flag)

    def clear_flag(self, flag: str) -> None:
        """Clear ``flag`` if set."""
        if flag in self.flags:
            self.flags.remove(flag)


@dataclass
class SimPartition:
    """A simulated partition. ``max_time`` in minutes, ``None`` = INFINITE."""

    name: str
    nodes: list[str] = field(default_factory=list)
    state: str = "UP"
    max_time: int | None = None
    default: bool = False


class _SeedPartition(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    nodes: str | list[str] = ""
    default: bool = False
    max_time: int | None = None
    state: str = "UP"


class _SeedNode(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    cpus: int = 2
    real_memory: int = 1000
    partitions: list[str] = []
    features: list[str] = []
    gres: str = ""


class _Seed(msgspec.Struct, frozen=True, kw_only=True):
    partitions: list[_SeedPartition] = []
    nodes: list[_SeedNode] = []


class _UpdateBody(msgspec.Struct, frozen=True):
    """The ``update_node_msg`` fields the simulator acts on (others are accepted, ignored)."""

    state: list[str] | None = None
    reason: str | None = None
    reason_uid: str | None = None
    features: list[str] | str | None = None
    features_act: list[str] | str | None = None
    comment: str | None = None
    #: v0.0.43+ only; v0.0.42 ignores it with a warning (recorded from Slurm 26.05.5).
    topology_str: str | None = None
    extra: str | None = None


_UPDATE_BODY: Final = msgspec.json.Decoder(_UpdateBody)


class _CreateBody(msgspec.Struct, frozen=True):
    """``openapi_create_node_req`` (``meta`` / ``errors`` / ``warnings`` are ignored)."""

    node_conf: str


_CREATE_BODY: Final = msgspec.json.Decoder(_CreateBody)


class _AuthError(Exception):
    """The token is present but invalid (signature, expiry, user)."""


# --- JWT (HS256) ----------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint_jwt(key: bytes, user: str, *, now: float, lifetime: int) -> str:
    """An HS256 JWT as ``scontrol token`` issues it (claims ``iat``, ``exp``, ``sun``)."""
    header = _b64(b'{"alg":"HS256","typ":"JWT"}')
    claims = {"iat": int(now), "exp": int(now) + lifetime, "sun": user}
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = hmac.new(key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


def verify_jwt(key: bytes, token: str, *, now: float) -> str:
    """The user (``sun``) of a valid HS256 token.

    Raises:
        _AuthError: malformed, wrong algorithm or signature, expired, or no user.
    """
    try:
        header_b64, payload_b64, sig_b64 = token.split(".")
        header = json.loads(_unb64(header_b64))
        claims = json.loads(_unb64(payload_b64))
        signature = _unb64(sig_b64)
    except (ValueError, binascii.Error) as exc:
        raise _AuthError("malformed token") from exc
    if not isinstance(header, dict) or header.get("alg") != "HS256":
        raise _AuthError("unsupported token algorithm")
    expected = hmac.new(key, f"{header_b64}.{payload_b64}".encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(expected, signature):
        raise _AuthError("bad signature")
    if not isinstance(claims, dict):
        raise _AuthError("malformed claims")
    exp = claims.get("exp")
    if isinstance(exp, int | float) and exp < now:
        raise _AuthError("token expired")
    user = claims.get("sun")
    if not isinstance(user, str) or not user:
        raise _AuthError("token has no user")
    return user


# --- JSON helpers -----------------------------------------------------------------------------


def _nv(number: int | None, *, infinite: bool = False) -> Json:
    """A NoVal number object: set ⇔ ``number`` is not None."""
    if infinite:
        return {"set": False, "infinite": True, "number": 0}
    if number is None:
        return {"set": False, "infinite": False, "number": 0}
    return {"set": True, "infinite": False, "number": number}


def _json(body: Json, status: int = 200) -> web.Response:
    # Indented, as slurmrestd answers. orjson, not json.dumps(indent=2): an indent makes the
    # standard library fall back to its pure-Python encoder, which spent ~5 % of the bench
    # process on the 2 s jobs/state listing of a 10,000-job queue (bench/idle_queue.py).
    try:
        data = orjson.dumps(body, option=orjson.OPT_INDENT_2)
    except TypeError:  # beyond orjson (an int past 64 bits): the standard library's answer
        data = json.dumps(body, indent=2).encode()
    return web.Response(body=data, status=status, content_type="application/json")


def _text(text: str, status: int) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/plain")


def _version_of(path: str) -> str | None:
    m = re.match(r"^/slurm/(v\d+\.\d+\.\d+)/", path)
    return m.group(1) if m else None


_ENDPOINT: Final = re.compile(
    r"^/slurm/v[\d.]+/(ping|nodes|node|partitions|partition|new/node|jobs/state|jobs|job)"
)
_DATA_KEY: Final[Mapping[str, str]] = {
    "ping": "pings",
    "nodes": "nodes",
    "node": "nodes",
    "partitions": "partitions",
    "partition": "partitions",
}


def _endpoint_of(path: str) -> str:
    if path.startswith("/openapi"):
        return "openapi"
    m = _ENDPOINT.match(path)
    return m.group(1) if m else "other"


# --- the simulator ---------------------------------------------------------------------------


class SlurmSim(JobsMixin, ReservationsMixin):
    """An in-process slurmrestd with a small, inspectable cluster.

    Args:
        jwt_key: HS256 key for tokens (random when omitted).
        clock: epoch seconds (``time.time``); Slurm's ``last_update`` values and token expiry
            read it, so a test can move time explicitly.
        cluster: the cluster name reported in ``meta``.
        update_time_quirk: reproduce released slurmrestd's HTTP 500 on conditional node
            listings when only nodes changed (module docstring).
        controller: the slurmctld host name reported by ping.
        slurm_release: the Slurm release whose behaviour to reproduce where releases differ
            (module docstring): "24.11", "25.05", "25.11" or "26.05".

    Raises:
        ValueError: an unknown ``slurm_release``.

    State worth reading or poking from tests: :attr:`nodes` / :attr:`partitions` (the model;
    change it through the helpers so ``last_update`` moves), :attr:`controller_up` (False ⇒
    ping reports the controller DOWN), :attr:`nodes_changed_at` / :attr:`parts_changed_at`
    (epoch seconds of the last change), :attr:`counters` (requests per ``"<METHOD>
    <endpoint>"``, e.g. ``"GET nodes"``, ``"POST new/node"``, ``"DELETE node"``),
    :attr:`on_update` (hooks called after each accepted REST node update — not for in-process
    admin updates — with the node name, the update and ``time.monotonic()`` at the request's
    arrival), :attr:`on_create` / :attr:`on_delete` (likewise for each node created by
    ``POST new/node/`` or deleted by ``DELETE node/{name}``: name, arrival),
    :attr:`created_nodes` (the dynamic nodes present now), :attr:`operators` (users with
    operator rights; module docstring), :attr:`not_responding_after_resume_s` (seconds a
    resumed node reads NOT_RESPONDING; 0 disables), :attr:`topologies` (the topology units a
    dynamic node's ``Topology=`` / ``topology_str`` may name).
    """

    def __init__(
        self,
        *,
        jwt_key: bytes | None = None,
        clock: Callable[[], float] = time.time,
        cluster: str = "sim",
        update_time_quirk: bool = True,
        controller: str = "slurmctld-sim",
        slurm_release: str = "26.05",
    ) -> None:
        if slurm_release not in SLURM_RELEASES:
            raise ValueError(
                f"slurm_release must be one of {', '.join(SLURM_RELEASES)}, not {slurm_release!r}"
            )
        self.slurm_release = slurm_release
        #: Users slurmctld treats as operators/administrators (module docstring): root, the
        #: SlurmUser ``slurm``, and ``slurmrest``, the user :meth:`write_token` issues tokens
        #: for (the harness's REST user acts as an administrator, like the real rigs' root).
        self.operators: set[str] = {"root", "slurm", "slurmrest"}
        #: Seconds a drained node reads NOT_RESPONDING after RESUME/UNDRAIN (recorded from
        #: Slurm 24.11.5 and 26.05.5: about 1 s, until slurmctld's next ping); 0 disables.
        self.not_responding_after_resume_s = 1.0
        #: topology name → its units (``topology.yaml``): a dynamic node's topology spec
        #: (``name:unit[,name:unit]``) must name only these, else 2178 "Requested topology
        #: configuration is not available" — also when no topology is configured at all
        #: (recorded from Slurm 26.05.5, on create and on update; ``""`` always clears).
        self.topologies: dict[str, set[str]] = {}
        self.jwt_key = jwt_key or secrets.token_bytes(32)
        self.clock = clock
        self.cluster = cluster
        self.update_time_quirk = update_time_quirk
        self.controller = controller
        self.controller_up = True
        self.static_token: str | None = None
        self.nodes: dict[str, SimNode] = {}
        self.partitions: dict[str, SimPartition] = {}
        #: The last ``POST partitions/`` body of each partition, by name.
        self.partition_bodies: dict[str, Json] = {}
        self.versions: tuple[str, ...] = ()
        self.counters: collections.Counter[str] = collections.Counter()
        self.on_update: list[UpdateCallback] = []
        self.on_create: list[NodeCallback] = []
        self.on_delete: list[NodeCallback] = []
        self._faults: collections.deque[tuple[int, int | None]] = collections.deque()
        #: Chaos (tests/chaos): the share of requests that fail — half with 503 before
        #: anything happens, the rest split between a slow answer (``chaos_slow_s``, for client
        #: time-outs; the request still takes effect), a connection reset, and a 503 *after*
        #: the request took effect. ``chaos_injected`` counts them by kind.
        self.chaos_rate = 0.0
        self.chaos_slow_s = 2.0
        self.chaos_rng = random.Random(0)
        self.chaos_injected: collections.Counter[str] = collections.Counter()
        #: Jobs created by a request whose answer chaos delayed past the client's patience or
        #: replaced by a 503: the client cannot know their ids (a retry may submit again).
        self.chaos_unanswered_jobs: set[int] = set()
        now = self._now()
        self.nodes_changed_at = now
        self.parts_changed_at = now
        self._init_jobs()
        self._init_reservations()
        self._runner: web.AppRunner | None = None
        self._host = "127.0.0.1"
        self._port = 0

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        versions: Sequence[str] | None = None,
        token: str | None = None,
    ) -> str:
        """Serve ``versions`` (default: every version :attr:`slurm_release` serves) on
        ``host:port`` (0 = a free port) and return :attr:`url`.

        ``token`` switches to static-token mode (that exact string is the only valid token).

        Raises:
            ValueError: an unknown version or one the release does not serve, or already
                started.
            OSError: the address is taken.
        """
        if self._runner is not None:
            raise ValueError("simulator already started")
        served = SLURM_RELEASES[self.slurm_release]
        if versions is None:
            versions = served
        chosen = tuple(dict.fromkeys(_normalise(v) for v in versions))
        unknown = [v for v in chosen if v not in served]
        if unknown or not chosen:
            raise ValueError(
                f"unsupported API version(s) {unknown} for Slurm {self.slurm_release}; "
                f"choose from {served}"
            )
        self.versions = tuple(v for v in ALL_VERSIONS if v in chosen)
        if token is not None:
            self.static_token = token
        app = web.Application(middlewares=[self._middleware])
        self._add_routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, host, port).start()
        except OSError:
            await self._runner.cleanup()
            self._runner = None
            raise
        self._host = "127.0.0.1" if host in ("", "0.0.0.0") else host
        self._port = int(self._runner.addresses[0][1])
        log.info("slurmrestd simulator on %s serving %s", self.url, ", ".join(self.versions))
        return self.url

    async def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        """``http://host:port`` of the running simulator."""
        return f"http://{self._host}:{self._port}"

    @property
    def requests_total(self) -> int:
        """Requests received (all endpoints)."""
        return sum(self.counters.values())

    # --- tokens -------------------------------------------------------------------------------

    def mint_token(self, user: str = "slurmrest", lifetime: int = 86_400) -> str:
        """A token the simulator accepts: the static token, or a fresh JWT for ``user``
        valid ``lifetime`` seconds."""
        if self.static_token is not None:
            return self.static_token
        return mint_jwt(self.jwt_key, user, now=self.clock(), lifetime=lifetime)

    def write_token(
        self, path: Path | str, user: str = "slurmrest", lifetime: int = 86_400
    ) -> Path:
        """Write :meth:`mint_token` to ``path`` (mode 0600, replaced atomically) and return it."""
        target = Path(path)
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(self.mint_token(user, lifetime) + "\n")
        tmp.replace(target)
        return target

    def rotate_token(self, token: str | None = None) -> None:
        """Invalidate every token issued so far: a new static token (``token``, or a random one
        in static mode) or a new JWT key."""
        if self.static_token is not None or token is not None:
            self.static_token = token or secrets.token_urlsafe(24)
        else:
            self.jwt_key = secrets.token_bytes(32)

    # --- cluster state (in-process helpers) --------------------------------------------------

    def _now(self) -> int:
        return int(self.clock())

    def _touch_nodes(self) -> None:
        self.nodes_changed_at = self._now()

    def _touch_partitions(self) -> None:
        self.parts_changed_at = self._now()

    def add_partition(
        self,
        name: str,
        nodes: Iterable[str] | str = (),
        *,
        max_time: int | None = None,
        default: bool = False,
        state: str = "UP",
    ) -> SimPartition:
        """Create (or extend) partition ``name``; ``nodes`` is a list or a hostlist string.
        ``max_time`` minutes, ``None`` = INFINITE. Returns the partition.

        Raises:
            HostlistError: ``nodes`` is a malformed hostlist.
        """
        names = hostlist.expand(nodes) if isinstance(nodes, str) else tuple(nodes)
        part = self.partitions.get(name)
        if part is None:
            part = self.partitions[name] = SimPartition(
                name=name, max_time=max_time, default=default, state=state.upper()
            )
            # dynamic nodes join the partitions their features name (module docstring)
            part.nodes.extend(
                n.name for n in self.nodes.values() if n.dynamic and name in n.features
            )
        for n in names:
            if n not in part.nodes:
                part.nodes.append(n)
        self._touch_partitions()
        self._touch_nodes()  # node records list their partitions
        return part

    def add_node(
        self,
        name: str,
        cpus: int = 2,
        real_memory: int = 1000,
        partitions: Iterable[str] = ("batch",),
        *,
        features: Iterable[str] = (),
        gres: str = "",
        address: str = "127.0.0.1",
        state: str | None = None,
        flags: Iterable[str] = (),
    ) -> SimNode:
        """Add node ``name`` (idle unless ``state`` says otherwise) to ``partitions``
        (created when missing). ``real_memory`` in MiB.

        Raises:
            ValueError: the node exists.
        """
        if name in self.nodes:
            raise ValueError(f"node {name} exists")
        node = SimNode(
            name=name,
            cpus=cpus,
            real_memory=real_memory,
            features=list(features),
            gres=gres,
            address=address,
            flags=[f.upper() for f in flags],
            boot_time=self._now(),
        )
        if state is not None:
            self._set_base(node, state.upper())
        self.nodes[name] = node
        for p in partitions:
            self.add_partition(p, [name])
        self._touch_nodes()
        return node

    def remove_node(self, name: str) -> None:
        """Remove node ``name`` from the cluster and its partitions.

        Raises:
            KeyError: no such node.
        """
        del self.nodes[name]
        for part in self.partitions.values():
            if name in part.nodes:
                part.nodes.remove(name)
        self._touch_nodes()
        self._touch_partitions()

    @property
    def created_nodes(self) -> tuple[str, ...]:
        """Names of the dynamic nodes (created through ``POST new/node/`` or
        :meth:`create_node`) present now, oldest first."""
        return tuple(n.name for n in self.nodes.values() if n.dynamic)

    def create_node(self, node_conf: str) -> tuple[SimNode, ...]:
        """Create the node(s) of a slurm.conf ``NodeName`` line like slurmctld's
        ``create_nodes()`` (module docstring): ``NodeName`` may be a hostlist
        (``k8s-[1-3]``); all-or-nothing here. The same path ``POST new/node/`` takes.

        Keys: ``CPUs`` (default Sockets×CoresPerSocket×ThreadsPerCore), ``Sockets``,
        ``CoresPerSocket``, ``ThreadsPerCore``, ``RealMemory`` / ``TmpDisk`` (MiB),
        ``State`` (FUTURE, CLOUD or EXTERNAL), ``Feature``/``Features`` (comma list),
        ``Gres``, ``Topology``, ``NodeAddr``, ``Weight``, ``Reason``; the other slurm.conf
        NodeName keys are accepted and ignored.

        Raises:
            SimError: -1 the line does not parse (unknown key, bad number, no or two
                NodeName); 2028 a State other than FUTURE / CLOUD / EXTERNAL; 2178 a
                ``Topology`` not in :attr:`topologies`; 2168 a node of
                that name exists.
        """
        names, conf = _parse_node_conf(node_conf)
        state = conf.get("state", "").upper()
        if state == "FUTURE":
            base: str | None = "FUTURE"
            flags = ["DYNAMIC_NORM"]
        elif state.startswith("CLOUD"):  # state_str2int: IDLE | CLOUD | POWERED_DOWN
            base, flags = None, ["CLOUD", "POWERED_DOWN", "DYNAMIC_NORM"]
        elif state.startswith("EXTERNAL"):  # state_str2int: IDLE | EXTERNAL
            base, flags = None, ["EXTERNAL", "DYNAMIC_NORM"]
        else:
            raise SimError(
                2028, "Only State=FUTURE, CLOUD, or EXTERNAL allowed for nodes created by scontrol"
            )
        taken = [n for n in names if n in self.nodes]
        if taken:
            raise SimError(2168, f"Node {taken[0]} already exists")
        sockets = int(conf.get("sockets") or conf.get("socketsperboard") or 0)
        cores = int(conf.get("corespersocket", 0))
        threads = int(conf.get("threadspercore", 0))
        cpus = int(conf.get("cpus") or conf.get("procs") or 0)
        if not cpus:
            cpus = max(1, sockets or 1) * max(1, cores or 1) * max(1, threads or 1)
        features = [f.strip() for f in conf.get("features", "").split(",") if f.strip()]
        self._check_topology(conf.get("topology", ""))
        created = []
        for name in names:
            node = SimNode(
                name=name,
                cpus=cpus,
                real_memory=int(conf.get("realmemory", 1)),
                features=list(features),
                gres=conf.get("gres", ""),
                address=conf.get("nodeaddr") or name,
                base=base,
                flags=list(flags),
                reason=conf.get("reason", ""),
                boot_time=0,
                dynamic=True,
                sockets=sockets,
                cores=cores,
                threads=threads,
                topology=conf.get("topology", ""),
                weight=int(conf.get("weight", 1)),
                tmp_disk=int(conf.get("tmpdisk", 0)),
            )
            self.nodes[name] = node
            for f in dict.fromkeys(features):
                part = self.partitions.get(f)
                if part is not None:
                    part.nodes.append(name)  # a new name: no duplicate check needed
            created.append(node)
        self._touch_nodes()
        self._touch_partitions()  # slurmctld's _update_parts()
        return tuple(created)

    def _check_topology(self, spec: str) -> None:
        """Raise 2178 unless every ``name:unit`` of ``spec`` is configured (:attr:`topologies`)."""
        for part in filter(None, spec.split(",")):
            name, _, unit = part.partition(":")
            if unit not in self.topologies.get(name, ()):
                raise SimError(2178, "Requested topology configuration is not available")

    def delete_node(self, name: str) -> None:
        """Delete node ``name`` like slurmctld's ``delete_nodes()`` (``scontrol delete``);
        the path ``DELETE node/{name}`` takes. :meth:`remove_node` removes any node without
        these checks.

        Raises:
            SimError: 2018 no such node; 2028 not a dynamic node ("Can't delete non-dynamic
                node"); 2016 the node is in use (allocated CPUs, COMPLETING) or RESERVED.
        """
        node = self._node(name)
        if not node.dynamic and "EXTERNAL" not in node.flags:
            raise SimError(2028, f"Can't delete non-dynamic node '{name}'.")
        if node.alloc_cpus > 0 or {"COMPLETING", "RESERVED"} & set(node.flags):
            raise SimError(2016, f"Node '{name}' can't be delete because it's still in use.")
        self.remove_node(name)

    def _node(self, name: str) -> SimNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise UnknownNodeError(name) from None

    def _set_base(self, node: SimNode, base: str) -> None:
        if base == "IDLE":
            node.base, node.alloc_cpus, node.alloc_memory = None, 0, 0
        elif base == "ALLOCATED":
            node.base, node.alloc_cpus = None, node.cpus
        elif base == "MIXED" and node.cpus > 1:
            node.base, node.alloc_cpus = None, max(1, node.cpus // 2)
        elif base in BASE_STATES:
            node.base = base
            if base in ("DOWN", "FUTURE"):
                node.alloc_cpus = node.alloc_memory = 0
        else:
            raise ValueError(f"unknown base state {base!r}; one of {sorted(BASE_STATES)}")

    def set_state(self, name: str, base: str, flags: Iterable[str] | None = None) -> None:
        """Force node ``name`` into ``base`` (IDLE, ALLOCATED, MIXED, DOWN, FUTURE …) and, when
        given, exactly ``flags`` (``None`` keeps them). IDLE/MIXED/ALLOCATED set the allocated
        CPUs accordingly. A state change, not an update: no reason bookkeeping.

        Raises:
            SimError: no such node. ValueError: unknown base state.
        """
        node = self._node(name)
        self._set_base(node, base.upper())
        if flags is not None:
            node.flags = list(dict.fromkeys(f.upper() for f in flags))
        self._touch_nodes()

    def allocate(self, name: str, cpus: int, memory: int = 0) -> None:
        """Allocate ``cpus`` (and ``memory`` MiB) on node ``name`` — what a scheduler does
        when a job starts there.

        Raises:
            SimError: no such node. ValueError: not enough free CPUs, or the node is not usable.
        """
        node = self._node(name)
        if node.base is not None or "DRAIN" in node.flags or "FAIL" in node.flags:
            raise ValueError(f"node {name} is {'+'.join(node.state)}: cannot allocate")
        if node.alloc_cpus + cpus > node.cpus:
            raise ValueError(f"node {name} has {node.cpus - node.alloc_cpus} free CPUs, not {cpus}")
        node.alloc_cpus += cpus
        node.alloc_memory += memory
        self._touch_nodes()

    def release(self, name: str, cpus: int | None = None, memory: int = 0) -> None:
        """Free ``cpus`` (all when ``None``) on node ``name``; a draining node whose last CPU
        is freed becomes drained (``IDLE+DRAIN``).

        Raises:
            SimError: no such node.
        """
        node = self._node(name)
        node.alloc_cpus = 0 if cpus is None else max(0, node.alloc_cpus - cpus)
        node.alloc_memory = 0 if cpus is None else max(0, node.alloc_memory - memory)
        self._touch_nodes()

    def admin_drain(self, name: str, reason: str, user: str = "root") -> None:
        """``scontrol update nodename=<name> state=drain reason=<reason>`` as ``user``.

        Raises:
            SimError: no such node.
        """
        self._update_node(name, NodeUpdate(state=("DRAIN",), reason=reason), user=user)

    def admin_update(self, name: str, update: NodeUpdate, user: str = "root") -> None:
        """Any ``scontrol update nodename=…`` as ``user`` (same rules as REST updates).

        Raises:
            SimError: no such node, or an invalid state transition.
        """
        self._update_node(name, update, user=user)

    def node(self, name: str, version: str = "v0.0.45") -> Node:
        """Node ``name`` as the client's version-neutral model (for assertions), as API
        ``version`` reports it.

        The state and ``alloc_cpus`` are those the data_parser versions report (with a fresh
        RESUME's NOT_RESPONDING, without external jobs' CPUs); ``topology`` is ``None`` where
        the version has no such field (before v0.0.43).

        Raises:
            SimError: no such node.
        """
        n = self._node(name)
        reservation, reserved = self.node_reservation(n.name)
        return Node(
            name=n.name,
            state=(*n.state_at(self.clock()), *reserved),
            reason=n.reason,
            reason_set_by_user=n.reason_user,
            reason_changed_at=n.reason_time,
            cpus=n.cpus,
            alloc_cpus=n.shown_alloc_cpus,
            real_memory=n.real_memory,
            features=tuple(n.features),
            partitions=self._partitions_of(n.name),
            gres=n.gres,
            address=n.address,
            comment=n.comment,
            topology=None if version in ("v0.0.38", "v0.0.42") else n.topology,
            reservation="" if version == "v0.0.38" else reservation,
            extra=n.extra,
            active_features=None if version == "v0.0.38" else tuple(n.active_features),
        )

    def _partitions_of(self, name: str) -> tuple[str, ...]:
        return tuple(p.name for p in self.partitions.values() if name in p.nodes)

    async def _chaos(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        roll = self.chaos_rng.random()
        if roll < 0.5:
            self.chaos_injected["503"] += 1
            return _text("injected fault (HTTP 503)", 503)
        if roll < 0.7:
            self.chaos_injected["slow"] += 1
            await asyncio.sleep(self.chaos_slow_s)
            before = set(self.jobs_by_id)
            late = await self._middleware(request, handler)  # late, but real
            self.chaos_unanswered_jobs |= set(self.jobs_by_id) - before
            return late
        if roll < 0.85:
            self.chaos_injected["reset"] += 1
            if request.transport is not None:
                request.transport.abort()
            return _text("reset", 503)
        self.chaos_injected["503-after-effect"] += 1
        before = set(self.jobs_by_id)
        await self._middleware(request, handler)
        self.chaos_unanswered_jobs |= set(self.jobs_by_id) - before
        return _text("injected fault after the effect (HTTP 503)", 503)

    def fail_next(self, n: int = 1, status: int = 503, *, error_number: int | None = None) -> None:
        """Answer the next ``n`` requests (any endpoint) with ``status``; with
        ``error_number``, as a Slurm error body carrying that errno, else as plain text."""
        for _ in range(n):
            self._faults.append((status, error_number))

    def seed_default(self, nodes: int = 4) -> None:
        """The recipe's cluster: ``n1..nN`` (2 CPUs, 1000 MiB) in ``batch`` (default, no time
        limit), ``n1``-``n2`` also in ``gpu`` (MaxTime 60 minutes)."""
        self.add_partition("batch", default=True)
        self.add_partition("gpu", max_time=60)
        for i in range(1, nodes + 1):
            self.add_node(f"n{i}", partitions=("batch", "gpu") if i <= 2 else ("batch",))

    def load_seed(self, path: Path | str) -> None:
        """Seed from YAML: ``{partitions: [{name, nodes, default?, max_time?}], nodes: [{name,
        cpus, real_memory, partitions, features?, gres?}]}``; partition ``nodes`` may be a
        hostlist string or a list.

        Raises:
            OSError: unreadable file. ValueError: not the documented shape.
        """
        import yaml  # only the seed file needs YAML

        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        try:
            seed = msgspec.convert(raw, _Seed)
        except msgspec.ValidationError as exc:
            raise ValueError(f"{path}: {exc}") from None
        for p in seed.partitions:
            self.add_partition(
                p.name,
                default=p.default,
                max_time=p.max_time,
                state=p.state,
            )
        for n in seed.nodes:
            self.add_node(
                n.name,
                n.cpus,
                n.real_memory,
                n.partitions,
                features=n.features,
                gres=n.gres,
            )
        for p in seed.partitions:
            self.add_partition(p.name, p.nodes)

    # --- the one update path -----------------------------------------------------------------

    def _update_node(
        self,
        name: str,
        update: NodeUpdate | None,
        *,
        user: str,
        version: str = "v0.0.45",
        features_act: Sequence[str] | None = None,
    ) -> None:
        """Apply ``update`` (and ``features_act``, the new active features; ``update`` may be
        ``None`` when only those change) like slurmctld's ``update_node()``.

        Features: the available features are replaced first; ``features_act`` must be a
        subset of them, and without it the current active features must be (else 2031, with
        the available features already changed — recorded from Slurm 26.05.5 — and the rest
        of the update not applied). A feature update never moves a node between partitions
        (recorded from Slurm 26.05.5).

        Raises:
            SimError: 2018 no such node; 2028 (v0.0.42/43) or 2180 (v0.0.44+) invalid
                state transition — checked before anything changes; 2031 active features
                not a subset of the available ones.
        """
        node = self._node(name)
        if features_act is None and update is not None:
            features_act = update.active_features
        if update is None:
            if features_act is not None:
                self._update_features(node, None, features_act)
            self._touch_nodes()
            return
        invalid = 2028 if version in ("v0.0.42", "v0.0.43") else 2180
        for s in update.state:
            if not _valid_transition(node, s):
                raise SimError(
                    invalid,
                    f"Invalid node state transition requested for node {name} from="
                    f"{'+'.join(node.state)} to={s}",
                )
        if update.topology is not None:
            self._check_topology(update.topology)
        if update.features is not None or features_act is not None:
            self._update_features(node, update.features, features_act)
        if update.topology is not None:
            node.topology = update.topology
        now = self._now()
        if update.reason:
            node.reason, node.reason_user, node.reason_time = update.reason, user, now
        was_drained = "DRAIN" in node.flags
        for s in update.state:
            _apply_state(node, s)
        if was_drained and {"RESUME", "UNDRAIN"} & set(update.state):
            # recorded from Slurm 24.11.5 and 26.05.5: idle* until slurmctld's next ping
            node.unresponsive_until = self.clock() + self.not_responding_after_resume_s
        if update.comment is not None:
            node.comment = update.comment
        if update.extra is not None:
            node.extra = update.extra
        # recorded from Slurm 24.11.5: UNDRAIN leaves the drain reason (26.05.5 clears it)
        keep_reason = self.slurm_release == "24.11" and "UNDRAIN" in update.state
        if (
            not keep_reason
            and not ({"DRAIN", "FAIL"} & set(node.flags))
            and node.base_state != "DOWN"
        ):
            node.reason, node.reason_user, node.reason_time = "", "", 0
        self._touch_nodes()

    def _update_features(
        self,
        node: SimNode,
        available: Sequence[str] | None,
        active: Sequence[str] | None,
    ) -> None:
        """``update_node()``'s feature part (see :meth:`_update_node`).

        Raises:
            SimError: 2031 the active features are not a subset of the available ones.
        """
        if available is not None:
            node.features = list(available)
            self._touch_nodes()
        if active is not None:
            if not set(active) <= set(node.features):
                raise SimError(_NOT_SUBSET, f"Failure to update node {node.name}")
            node.active_features = list(active)
        elif available is not None and not set(node.active_features) <= set(node.features):
            # recorded from Slurm 26.05.5: the available features stay changed
            raise SimError(_NOT_SUBSET, f"Failure to update node {node.name}")

    # --- HTTP -------------------------------------------------------------------------------

    def _add_routes(self, app: web.Application) -> None:
        r = app.router
        for path in ("/openapi/v3", "/openapi", "/openapi.json"):
            r.add_get(path, self._openapi)
        for v in self.versions:
            base = f"/slurm/{v}"
            for ep, handler in (
                ("ping", self._ping),
                ("nodes", self._nodes),
                ("partitions", self._partitions),
            ):
                r.add_get(f"{base}/{ep}", handler)
                r.add_get(f"{base}/{ep}/", handler)
            r.add_get(f"{base}/node/{{node_name}}", self._get_node)
            if v != "v0.0.38":  # 22.05 has no node update or deletion: the router answers 405
                r.add_post(f"{base}/node/{{node_name}}", self._post_node)
                r.add_delete(f"{base}/node/{{node_name}}", self._delete_node)
            if v not in ("v0.0.38", "v0.0.42", "v0.0.43"):  # node creation is v0.0.44+
                r.add_post(f"{base}/new/node/", self._create_node)
            r.add_get(f"{base}/partition/{{partition_name}}", self._get_partition)
            r.add_get(f"{base}/jobs", self._jobs_handler)
            r.add_get(f"{base}/jobs/", self._jobs_handler)
            if v != "v0.0.38":  # jobs/state is v0.0.42+
                r.add_get(f"{base}/jobs/state", self._job_states_handler)
                r.add_get(f"{base}/jobs/state/", self._job_states_handler)
            r.add_get(f"{base}/job/{{job_id}}", self._get_job)
            r.add_delete(f"{base}/job/{{job_id}}", self._delete_job)
            r.add_post(f"{base}/job/{{job_id}}", self._update_job_handler)
            r.add_post(f"{base}/job/submit", self._submit_job)
            if v != "v0.0.38":  # reservations: slurmreservations.py
                self.add_reservation_routes(r, v)
            if v == "v0.0.45":  # POST partitions/, DELETE partition/{name}: v0.0.45 only
                r.add_post(f"{base}/partitions/", self._post_partitions)
                r.add_delete(f"{base}/partition/{{partition_name}}", self._delete_partition)

    def _doc_paths(self) -> dict[str, Json]:
        """The paths this simulator serves, spelled as each version's document does."""
        paths: dict[str, Json] = {}
        for p in ("/openapi.json", "/openapi", "/openapi/v3"):
            paths[p] = {"get": _op("openapi", "Retrieve OpenAPI Specification")}
        for v in self.versions:
            slash = "" if v == "v0.0.38" else "/"
            base = f"/slurm/{v}"
            tag = v.replace(".", "")
            paths[f"{base}/ping{slash}"] = {"get": _op(f"{tag}_ping", "ping test")}
            paths[f"{base}/nodes{slash}"] = {"get": _op(f"{tag}_get_nodes", "get node(s) info")}
            node: Json = {"get": _op(f"{tag}_get_node", "get node info")}
            if v != "v0.0.38":
                node["post"] = _op(f"{tag}_post_node", "update node properties")
                node["delete"] = _op(f"{tag}_delete_node", "delete node")
            paths[f"{base}/node/{{node_name}}"] = node
            if v not in ("v0.0.38", "v0.0.42", "v0.0.43"):
                paths[f"{base}/new/node/"] = {"post": _op(f"{tag}_post_new_node", "create node")}
            paths[f"{base}/partitions{slash}"] = {
                "get": _op(f"{tag}_get_partitions", "get all partition info")
            }
            paths[f"{base}/partition/{{partition_name}}"] = {
                "get": _op(f"{tag}_get_partition", "get partition info")
            }
            if v == "v0.0.45":  # /work/shared/slurm-openapi/v0045.json
                paths[f"{base}/partitions{slash}"]["post"] = _op(
                    f"{tag}_post_partitions", "create or update partitions"
                )
                paths[f"{base}/partition/{{partition_name}}"]["delete"] = _op(
                    f"{tag}_delete_partition", "delete partition"
                )
            paths[f"{base}/jobs{slash}"] = {"get": _op(f"{tag}_get_jobs", "get list of jobs")}
            if v != "v0.0.38":
                paths[f"{base}/jobs/state/"] = {
                    "get": _op(f"{tag}_get_jobs_state", "get list of job states")
                }
            paths[f"{base}/job/{{job_id}}"] = {
                "get": _op(f"{tag}_get_job", "get job info"),
                "delete": _op(f"{tag}_delete_job", "cancel or signal job"),
            }
            paths[f"{base}/job/submit"] = {"post": _op(f"{tag}_post_job_submit", "submit job")}
            if v != "v0.0.38":
                listing: Json = {"get": _op(f"{tag}_get_reservations", "get all reservation info")}
                one: Json = {"get": _op(f"{tag}_get_reservation", "get reservation info")}
                if v != "v0.0.42":  # POST/DELETE reservation are v0.0.43+
                    one["delete"] = _op(f"{tag}_delete_reservation", "delete a reservation")
                    paths[f"{base}/reservation"] = {
                        "post": _op(f"{tag}_post_reservation", "create or update a reservation")
                    }
                paths[f"{base}/reservations/"] = listing
                paths[f"{base}/reservation/{{reservation_name}}"] = one
        return paths

    async def _post_partitions(self, request: web.Request) -> web.Response:
        """``POST partitions/`` (v0.0.45 ``openapi_partitions_mod_req``: ``{"partitions":
        [partition_info]}``, required): each partition is created, or updated when the name
        exists (slurmctld ``update_part``). Modelled: ``nodes.configured`` (replaces the node
        list; an unknown node is refused with 2018 "Invalid node name specified", HTTP 422,
        source ``slurm_create_partition`` / ``slurm_update_partition`` as 26.05.5 answers),
        ``maximums.time``, ``flags`` ``DEFAULT``/``DEFAULT_CLEAR`` and ``partition.state``;
        the body is kept whole in :attr:`partition_bodies` for tests."""
        v = self._request_version(request)
        fail = self._fail_status(v)
        try:
            body = await request.json()
        except ValueError as exc:
            return self._error(v, "partitions", 400, 9001, str(exc), "_parse", request)
        parts = body.get("partitions") if isinstance(body, dict) else None
        if not isinstance(parts, list) or not all(
            isinstance(p, dict) and isinstance(p.get("name"), str) and p["name"] for p in parts
        ):
            return self._error(
                v, "partitions", fail, 2000, "Invalid partition name specified",
                "update_partitions", request,
            )  # fmt: skip
        if not self._is_operator(request):
            return self._error(
                v, "partitions", fail, 2010, "Error updating partition",
                "slurm_update_partition", request,
            )  # fmt: skip
        for i, p in enumerate(parts):
            configured = (p.get("nodes") or {}).get("configured")
            names = hostlist.expand(configured) if isinstance(configured, str) else None
            if names is not None and any(n not in self.nodes for n in names):
                verb = "update" if p["name"] in self.partitions else "create"
                why = f"Failed to {verb} partition {p['name']} with description at index {i}"
                return self._error(
                    v, "partitions", fail, 2018, why, f"slurm_{verb}_partition", request
                )
        for p in parts:
            name = str(p["name"])
            part = self.partitions.get(name) or self.add_partition(name)
            configured = (p.get("nodes") or {}).get("configured")
            if isinstance(configured, str):
                part.nodes = list(hostlist.expand(configured))
            limit = (p.get("maximums") or {}).get("time")
            if isinstance(limit, dict) and limit.get("set"):
                part.max_time = None if limit.get("infinite") else int(limit.get("number") or 0)
            flags = p.get("flags") or []
            if "DEFAULT" in flags:
                part.default = True
            elif "DEFAULT_CLEAR" in flags:
                part.default = False
            state = (p.get("partition") or {}).get("state")
            if isinstance(state, list) and state:
                part.state = str(state[0]).upper()
            self.partition_bodies[name] = p
        self._touch_partitions()
        self._touch_nodes()  # node records list their partitions
        return self._ok(v, request, {})

    async def _delete_partition(self, request: web.Request) -> web.Response:
        """``DELETE partition/{name}``: an unknown name is error 2000 "Invalid partition name
        specified", one with a pending or running job 2075 "Partition is in use", both HTTP
        422, source ``slurm_delete_partition()`` (26.05.5)."""
        v = self._request_version(request)
        name = request.match_info["partition_name"]
        if not self._is_operator(request):
            return self._error(
                v, "partitions", self._fail_status(v), 2010,
                f"Error deleting partition {name}", "slurm_delete_partition", request,
            )  # fmt: skip
        if name not in self.partitions:
            return self._error(
                v, "partitions", self._fail_status(v), 2000,
                "Unable to delete partition", "slurm_delete_partition()", request,
            )  # fmt: skip
        if any(
            j.partition == name and j.state in ("PENDING", "RUNNING", "SUSPENDED")
            for j in self.jobs_by_id.values()
        ):
            # 26.05.5: error 2075 "Partition is in use" while a job of it is not done.
            return self._error(
                v, "partitions", self._fail_status(v), 2075,
                "Unable to delete partition", "slurm_delete_partition()", request,
            )  # fmt: skip
        del self.partitions[name]
        self.partition_bodies.pop(name, None)
        self._touch_partitions()
        self._touch_nodes()
        return self._ok(v, request, {})

    async def _openapi(self, request: web.Request) -> web.Response:
        del request
        newest = self.versions[0]
        return _json(
            {
                "openapi": "3.0.2" if newest == "v0.0.38" else "3.0.3",
                "info": {
                    "title": "Slurm REST API (slurmbridge simulator)",
                    "version": f"Slurm-{RELEASES[newest]}",
                },
                "paths": self._doc_paths(),
            }
        )

    @web.middleware
    async def _middleware(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        """Count, inject faults, then authenticate in slurmrestd's order: the token must be
        present (401) before routing (404/405); its validity only matters to handlers that
        talk to slurmctld (everything but the OpenAPI document)."""
        request[_ARRIVED] = time.monotonic()
        endpoint = _endpoint_of(request.path)
        self.counters[f"{request.method} {endpoint}"] += 1
        version = _version_of(request.path) or (self.versions[0] if self.versions else "")
        if self._faults:
            status, errno = self._faults.popleft()
            if errno is None:
                return _text(f"injected fault (HTTP {status})", status)
            return self._error(version, endpoint, status, errno, "injected fault", "sim")
        if (
            self.chaos_rate
            and endpoint != "openapi"
            and not request.get(_CHAOS_DONE)
            and self.chaos_rng.random() < self.chaos_rate
        ):
            request[_CHAOS_DONE] = True
            return await self._chaos(request, handler)
        token = request.headers.get("X-SLURM-USER-TOKEN")
        user_name = request.headers.get("X-SLURM-USER-NAME")
        bearer = request.headers.get("Authorization", "")
        if token is None and version != "v0.0.38" and bearer.startswith("Bearer "):
            token = bearer.removeprefix("Bearer ").strip()
        if not token or (version == "v0.0.38" and not user_name):
            return _text(_AUTH_FAILURE, 401)
        unmatched = request.match_info.http_exception
        if unmatched is not None:
            if isinstance(unmatched, web.HTTPMethodNotAllowed):
                return _text(_NO_METHOD, 405)
            return _text(_UNKNOWN_URL, 404)
        if endpoint != "openapi":
            try:
                request[_USER] = self._user_of(token, user_name)
            except _AuthError as exc:
                log.debug("simulated slurmrestd: rejecting token: %s", exc)
                if version == "v0.0.38":
                    # 22.05 passes the token through; slurmctld's refusal comes back as -1
                    return self._error(version, endpoint, 500, -1, "", "")
                return self._token_rejected(version, endpoint, request)
        return await handler(request)

    def _token_rejected(self, version: str, endpoint: str, request: web.Request) -> web.Response:
        """A data_parser version's answer when slurmctld rejects the token (recorded from
        Slurm 24.11.5 and 26.05.5): slurmrestd forwards the token, so the ping is HTTP 200
        with the controller not responding and everything else HTTP 511 with error 1007
        (partitions: 511 and no error entry)."""
        if endpoint == "ping":
            return self._ok(version, request, {"pings": [self._ping_entry(version, auth=False)]})
        if endpoint in ("partitions", "partition"):
            body: Json = {"meta": self._meta(version, request), "errors": [], "warnings": []}
            return _json(body, 511)
        if endpoint in ("nodes", "node") and request.method == "GET":
            description, source = "Failure to query nodes", "_dump_nodes"
        elif endpoint in ("jobs", "job", "jobs/state") and request.method == "GET":
            description, source = "Unable to query jobs", "slurm_load_jobs()"
        else:
            description, source = "", ""
        return self._error(version, endpoint, 511, _AUTH_ERRNO, description, source, request)

    def _user_of(self, token: str, user_name: str | None) -> str:
        """The authenticated user of a request.

        Raises:
            _AuthError: wrong static token, invalid JWT, or a JWT for another user than
                ``X-SLURM-USER-NAME`` (only root/slurm tokens may act for others).
        """
        if self.static_token is not None:
            if not hmac.compare_digest(token.encode(), self.static_token.encode()):
                raise _AuthError("wrong token")
            return user_name or "slurm"
        user = verify_jwt(self.jwt_key, token, now=self.clock())
        if user_name and user_name != user and user not in ("root", "slurm"):
            raise _AuthError("token user differs from X-SLURM-USER-NAME")
        return user_name or user

    # --- responses --------------------------------------------------------------------------

    def _meta(self, version: str, request: web.Request | None = None) -> Json:
        major, minor, micro = RELEASES[version].split(".")
        if version == "v0.0.38":
            return {
                "plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
                "Slurm": {
                    "version": {"major": major, "micro": micro, "minor": minor.lstrip("0")},
                    "release": RELEASES[version],
                },
            }
        user = request.get(_USER, "") if request is not None else ""
        return {
            "plugin": {
                "type": "openapi/slurmctld",
                "name": "Slurm OpenAPI slurmctld",
                "data_parser": f"data_parser/{version}",
                "accounting_storage": "",
            },
            "client": {
                "source": (request.remote or "") if request is not None else "",
                "user": user,
                "group": user,
            },
            "command": [],
            "slurm": {
                "version": {"major": major, "micro": micro, "minor": minor},
                "release": RELEASES[version],
                "cluster": self.cluster,
            },
        }

    def _ok(self, version: str, request: web.Request, payload: Json) -> web.Response:
        body: Json = {"meta": self._meta(version, request), "errors": []}
        if version != "v0.0.38":
            body["warnings"] = []
        body.update(payload)
        return _json(body)

    def _fail_status(self, version: str) -> int:
        """The HTTP status of a Slurm error slurmrestd maps to no particular status: 500 on
        Slurm 22.05 (v0.0.38) and 24.11, 422 from 25.05 on (recorded from Slurm 26.05.5: an
        unknown partition on submit, an invalid node update, … all answer 422; 24.11.5: 500).
        """
        if version == "v0.0.38" or self.slurm_release == "24.11":
            return 500
        return 422

    def _is_operator(self, request: web.Request) -> bool:
        return request.get(_USER, "") in self.operators

    def _check_operator(self, request: web.Request, description: str) -> None:
        """Node creation, update and deletion need an administrator: 2010 "Invalid user id"
        (ESLURM_USER_ID_MISSING) otherwise (recorded from Slurm 24.11.5 and 26.05.5 for an
        update; creation and deletion are assumed to answer the same).

        Raises:
            SimError: 2010 the request's user is not in :attr:`operators`.
        """
        if not self._is_operator(request):
            raise SimError(_NOT_ADMIN, description)

    def _error(
        self,
        version: str,
        endpoint: str,
        status: int,
        errno: int,
        description: str,
        source: str,
        request: web.Request | None = None,
    ) -> web.Response:
        """A Slurm error body in ``version``'s shape."""
        text = _ERRNO_TEXT.get(errno, f"Slurm error {errno}")
        if version == "v0.0.38":
            body: Json = {
                "meta": self._meta(version),
                "errors": [{"error": text, "errno": errno}],
            }
            if endpoint in _DATA_KEY:
                body[_DATA_KEY[endpoint]] = []
            return _json(body, status)
        entry: Json = {"error_number": errno, "error": text}
        if description:
            entry["description"] = description
        if source:
            entry["source"] = source
        return _json(
            {"meta": self._meta(version, request), "errors": [entry], "warnings": []}, status
        )

    def _membership(self) -> dict[str, list[str]]:
        """Node name ⇒ its partitions, built once per listing (O(memberships), not
        O(nodes × partitions × members))."""
        index: dict[str, list[str]] = {}
        for part in self.partitions.values():
            for name in part.nodes:
                index.setdefault(name, []).append(part.name)
        return index

    def _render_node(self, version: str, n: SimNode, parts: list[str] | None = None) -> Json:
        if parts is None:
            parts = list(self._partitions_of(n.name))
        tres = f"cpu={n.cpus},mem={n.real_memory}M,billing={n.cpus}"
        if version == "v0.0.38":
            out: Json = {
                "architecture": "x86_64",
                "burstbuffer_network_address": "",
                "boards": 1,
                "boot_time": n.boot_time,
                "comment": n.comment,
                "cores": 1,
                "cpu_binding": 0,
                "cpu_load": 0,
                "extra": n.extra,
                "free_memory": n.real_memory - n.alloc_memory,
                "cpus": n.cpus,
                "last_busy": n.boot_time,
                "features": ",".join(n.features),
                "active_features": ",".join(n.active_features),
                "gres": n.gres,
                "gres_drained": "N/A",
                "gres_used": "",
                "mcs_label": "",
                "name": n.name,
                "next_state_after_reboot": "invalid",
                "address": n.address,
                "hostname": n.name,
                "state": n.base_state.lower(),
                "state_flags": list(n.flags),
                "next_state_after_reboot_flags": [],
                "operating_system": "Linux (simulated)",
                "partitions": parts,
                "port": 6818,
                "real_memory": n.real_memory,
                "reason": n.reason,
                "reason_changed_at": n.reason_time,
                "slurmd_start_time": n.boot_time,
                "sockets": n.cpus,
                "threads": 1,
                "temporary_disk": 0,
                "weight": 1,
                "tres": tres,
                "slurmd_version": "22.05.8",
                "alloc_memory": n.alloc_memory,
                "alloc_cpus": n.alloc_cpus,
                "idle_cpus": n.cpus - n.alloc_cpus,
                "tres_weighted": 0.0,
            }
            if n.reason_user:  # the real server prints null when unset; the document says string
                out["reason_set_by_user"] = n.reason_user
            return out
        allowed = _NODE_STATES[version]
        reservation, reserved = self.node_reservation(n.name)
        state = (*n.state_at(self.clock()), *reserved)
        out = {
            "architecture": "x86_64",
            "burstbuffer_network_address": "",
            "boards": 1,
            "boot_time": _nv(n.boot_time),
            "cluster_name": "",
            "cores": n.cores or 1,
            "specialized_cores": 0,
            "cpu_binding": 0,
            "cpu_load": 0,
            "free_mem": _nv(n.real_memory - n.alloc_memory),
            "cpus": n.cpus,
            "effective_cpus": n.cpus,
            "specialized_cpus": "",
            "extra": n.extra,
            "features": list(n.features),
            "active_features": list(n.active_features),
            "gpu_spec": "",
            "gres": n.gres,
            "gres_drained": "N/A",
            "gres_used": "",
            "instance_id": "",
            "instance_type": "",
            "last_busy": _nv(n.boot_time),
            "mcs_label": "",
            "specialized_memory": 0,
            "name": n.name,
            "next_state_after_reboot": ["INVALID"],
            "address": n.address,
            "hostname": n.name,
            # a version whose enum lacks a flag (EXTERNAL before v0.0.44) does not print it
            "state": [
                n.base_state if n.base_state in allowed else "UNKNOWN",
                *(s for s in state[1:] if s in allowed),
            ],
            "operating_system": "Linux (simulated)",
            "owner": "",
            "partitions": parts,
            "port": 6818,
            "real_memory": n.real_memory,
            "res_cores_per_gpu": 0,
            "comment": n.comment,
            "reason": n.reason,
            "reason_changed_at": _nv(n.reason_time or None),
            "reason_set_by_user": n.reason_user,
            "resume_after": _nv(None),
            "reservation": reservation,
            "alloc_memory": n.alloc_memory,
            "alloc_cpus": n.shown_alloc_cpus,
            "alloc_idle_cpus": n.cpus - n.shown_alloc_cpus,
            "tres_used": "",
            "slurmd_start_time": _nv(n.boot_time),
            "sockets": n.sockets or n.cpus,
            "threads": n.threads or 1,
            "temporary_disk": n.tmp_disk,
            "weight": n.weight,
            "tres": tres,
            "version": RELEASES[version],
        }
        if version != "v0.0.42":
            out["topology"] = n.topology  # v0.0.43+ (recorded from Slurm 26.05.5)
        return out

    def _render_partition(self, version: str, p: SimPartition) -> Json:
        members = [n for n in p.nodes if n in self.nodes]
        cpus = sum(self.nodes[n].cpus for n in members)
        mem = sum(self.nodes[n].real_memory for n in members)
        nodes_str = hostlist.compress(members)
        tres = f"cpu={cpus},mem={mem}M,node={len(members)},billing={cpus}"
        if version == "v0.0.38":
            return {
                "flags": ["default"] if p.default else [],
                "preemption_mode": ["disabled"],
                "allowed_allocation_nodes": "",
                "allowed_accounts": "",
                "allowed_groups": "",
                "allowed_qos": "",
                "alternative": "",
                "billing_weights": "",
                "denied_accounts": "",
                "denied_qos": "",
                "preemption_grace_time": 0,
                "maximum_cpus_per_node": -1,
                "maximum_nodes_per_job": -1,
                "max_time_limit": -1 if p.max_time is None else p.max_time,
                "min nodes per job": 0,  # sic: 22.05's key has spaces
                "name": p.name,
                "nodes": nodes_str,
                "priority_job_factor": 1,
                "priority_tier": 1,
                "qos": "",
                "state": p.state,
                "total_cpus": cpus,
                "total_nodes": len(members),
                "tres": tres,
            }
        out: Json = {
            "nodes": {"allowed_allocation": "", "configured": nodes_str, "total": len(members)},
            "accounts": {"allowed": "", "deny": ""},
            "groups": {"allowed": ""},
            "qos": {"allowed": "", "deny": "", "assigned": ""},
            "alternate": "",
            "tres": {"billing_weights": "", "configured": tres},
            "cluster": "",
            "cpus": {"task_binding": [] if version == "v0.0.45" else 0, "total": cpus},
            "defaults": {
                "memory_per_cpu": 0,
                "partition_memory_per_cpu": _nv(None),
                "partition_memory_per_node": _nv(None),
                "time": _nv(None),
                "job": "",
            },
            "grace_time": 0,
            "maximums": {
                "cpus_per_node": _nv(None, infinite=True),
                "cpus_per_socket": _nv(None, infinite=True),
                "memory_per_cpu": 0,
                "partition_memory_per_cpu": _nv(None),
                "partition_memory_per_node": _nv(None, infinite=True),
                "nodes": _nv(None, infinite=True),
                "shares": 1,
                "oversubscribe": {"jobs": 1, "flags": []},
                "time": _nv(p.max_time, infinite=p.max_time is None),
                "over_time_limit": _nv(None),
            },
            "minimums": {"nodes": 0},
            "name": p.name,
            "node_sets": "",
            "priority": {"job_factor": 1, "tier": 1},
            "timeouts": {"resume": _nv(None), "suspend": _nv(None)},
            "partition": {"state": [p.state]},
            "suspend_time": _nv(None),
        }
        if version == "v0.0.45":
            out["flags"] = ["DEFAULT"] if p.default else []
        return out

    @staticmethod
    def _request_version(request: web.Request) -> str:
        return _version_of(request.path) or ""

    def _update_time(self, request: web.Request) -> int | None:
        raw = request.query.get("update_time")
        if raw is None or raw == "":
            return None
        try:
            return int(float(raw))
        except ValueError:
            return -1

    async def _ping(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        return self._ok(v, request, {"pings": [self._ping_entry(v)]})

    def _ping_entry(self, v: str, *, auth: bool = True) -> Json:
        """One controller's ping entry; ``auth=False``: slurmctld rejected the token (recorded
        from Slurm 26.05.5 on v0.0.45, ``status`` "Protocol authentication error"; 24.11.5 on
        v0.0.42: ``pinged`` DOWN and no status)."""
        up = self.controller_up and auth
        if v == "v0.0.38":
            return {
                "hostname": self.controller,
                "ping": "UP" if up else "DOWN",
                "status": 0 if up else -1,
                "mode": "primary",
            }
        if v == "v0.0.45":
            if up:
                status = "No error"
            elif not auth:
                status = _ERRNO_TEXT[_AUTH_ERRNO]
            else:
                status = "Unable to contact slurm controller"
            return {
                "hostname": self.controller,
                "responding": up,
                "latency": 120 if auth else 10_000,
                "primary": True,
                "status": status,
            }
        return {
            "hostname": self.controller,
            "pinged": "UP" if up else "DOWN",
            "responding": up,
            "latency": 120 if auth else 10_000,
            "mode": "primary",
            "primary": True,
        }

    async def _nodes(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        since = self._update_time(request)
        if since is not None and since < 0:
            return self._error(
                v,
                "nodes",
                422 if v != "v0.0.38" else 500,
                9000,
                "Rejecting request. Failure parsing query.",
                "_dump_nodes",
                request,
            )
        self.reservation_tick()
        if since is not None and self.nodes_changed_at < since:
            return web.Response(status=304)
        if since is not None and self.update_time_quirk and self.parts_changed_at < since:
            # the status follows the release's rule for Slurm errors (_fail_status)
            return self._error(
                v,
                "nodes",
                self._fail_status(v),
                -1,
                "Unable to query partitions",
                "_dump_nodes",
                request,
            )
        if v == "v0.0.38" and not self.nodes:
            return self._error(v, "nodes", 500, 2018, "", "", request)
        index = self._membership()
        nodes = [self._render_node(v, n, index.get(n.name, [])) for n in self.nodes.values()]
        payload: Json = {"nodes": nodes}
        if v != "v0.0.38":
            payload["last_update"] = _nv(self._now())
        return self._ok(v, request, payload)

    async def _get_node(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        name = request.match_info["node_name"]
        n = self.nodes.get(name)
        self.reservation_tick()
        if n is None:
            if v == "v0.0.38":
                return self._error(v, "node", 500, 2018, "", "", request)
            return self._error(
                v, "node", 200, 0, f"Failure to query node {name}", "_dump_nodes", request
            )
        payload: Json = {"nodes": [self._render_node(v, n)]}
        if v != "v0.0.38":
            payload["last_update"] = _nv(self._now())
        return self._ok(v, request, payload)

    async def _post_node(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        if v == "v0.0.38":
            return _text(_NO_METHOD, 405)
        arrived = request[_ARRIVED]
        name = request.match_info["node_name"]
        fail = self._fail_status(v)
        raw = await request.read()
        try:
            body = _UPDATE_BODY.decode(raw or b"{}")
        except msgspec.DecodeError:
            return self._error(
                v, "node", 400, 9001, "Unable to parse request body", "_update_node", request
            )
        except msgspec.ValidationError as exc:
            return self._error(v, "node", fail, 9207, str(exc), "_update_node", request)
        states = [s.upper() for s in body.state or []]
        unknown = [s for s in states if s not in _NODE_STATES[v]]
        if unknown:
            return self._error(
                v,
                "node",
                fail,
                9207,
                f"Unknown node state flag: {unknown[0]}",
                "_update_node",
                request,
            )
        features = _csv_string(body.features)
        features_act = _csv_string(body.features_act)
        if not self._is_operator(request):
            # recorded from Slurm 24.11.5 and 26.05.5: node updates need an administrator
            return self._error(
                v,
                "node",
                fail,
                _NOT_ADMIN,
                f"Failure to update node {name}",
                "_update_node",
                request,
            )
        topology = body.topology_str if v != "v0.0.42" else None
        changes = (body.reason, features, body.comment, topology, body.extra)
        if not states and all(c is None for c in changes):
            if features_act is None:
                return self._ok(v, request, {})  # nothing to change (e.g. "features": [])
            update = None  # only the active features (no NodeUpdate can say that)
        else:
            update = NodeUpdate(
                state=tuple(states),
                reason=body.reason,
                features=tuple(features) if features is not None else None,
                comment=body.comment,
                topology=topology,
                extra=body.extra,
            )
        user = body.reason_uid or request.get(_USER, "slurm")
        try:
            self._update_node(name, update, user=user, version=v, features_act=features_act)
        except SimError as exc:
            return self._error(
                v,
                "node",
                fail,
                exc.errno,
                f"Failure to update node {name}",
                "_update_node",
                request,
            )
        if update is None:
            return self._ok(v, request, {})
        for cb in list(self.on_update):
            try:
                cb(name, update, arrived)
            except Exception:  # a broken hook must not break the simulator
                log.exception("on_update callback failed")
        if "RESUME" in update.state or "UNDRAIN" in update.state:
            self.schedule()  # slurmctld retries pending jobs when a node returns to service
        return self._ok(v, request, {})

    async def _create_node(self, request: web.Request) -> web.Response:
        """``POST new/node/`` (v0.0.44+): slurmrestd's ``_create_node`` ⇒ ``slurm_create_node``."""
        v = self._request_version(request)
        arrived = request[_ARRIVED]
        raw = await request.read()
        try:
            body = _CREATE_BODY.decode(raw or b"{}")
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            # ESLURM_REST_FAIL_PARSING ⇒ 400 (src/common/http.c)
            return self._error(v, "new/node", 400, 9001, str(exc), "_create_node", request)
        if not self._is_operator(request):
            # as node updates (recorded from Slurm 24.11.5 and 26.05.5): administrators only
            return self._error(
                v,
                "new/node",
                self._fail_status(v),
                _NOT_ADMIN,
                "Failure to create node",
                "_create_node",
                request,
            )
        try:
            created = self.create_node(body.node_conf)
        except SimError as exc:
            log.debug("simulated slurmctld: create_nodes failed: %s", exc)
            return self._error(
                v,
                "new/node",
                self._fail_status(v),
                exc.errno,
                "Failure to create node",
                "_create_node",
                request,
            )
        for node in created:
            self._notify(self.on_create, node.name, arrived)
        return self._ok(v, request, {})

    async def _delete_node(self, request: web.Request) -> web.Response:
        """``DELETE node/{name}`` (v0.0.40+): slurmrestd ⇒ ``slurm_delete_node``."""
        v = self._request_version(request)
        arrived = request[_ARRIVED]
        name = request.match_info["node_name"]
        try:
            self._check_operator(request, f"Failure to delete node {name}")
            self.delete_node(name)
        except SimError as exc:
            log.debug("simulated slurmctld: delete_nodes failed: %s", exc)
            return self._error(
                v,
                "node",
                self._fail_status(v),
                exc.errno,
                f"Failure to delete node {name}",
                "op_handler_node",
                request,
            )
        self._notify(self.on_delete, name, arrived)
        return self._ok(v, request, {})

    @staticmethod
    def _notify(hooks: list[NodeCallback], name: str, arrived: float) -> None:
        for cb in list(hooks):
            try:
                cb(name, arrived)
            except Exception:  # a broken hook must not break the simulator
                log.exception("node callback failed")

    # --- jobs ---------------------------------------------------------------------------------

    async def _jobs_handler(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        self._purge()
        since = self._update_time(request)
        if since is not None and self.jobs_changed_at < since:
            if v == "v0.0.38":
                return web.Response(status=304)
            return self._quiet_jobs(v, request, since)
        payload: Json = {"jobs": [self._render_job_full(v, j) for j in self.jobs_by_id.values()]}
        return self._ok(v, request, self._job_info(v, payload))

    def _quiet_jobs(self, v: str, request: web.Request, since: int) -> web.Response:
        """``GET jobs/?update_time=T`` with no job changed since ``T`` on a data_parser
        version: HTTP 200 (not 304), no jobs, ``last_update`` / ``last_backfill`` 0 and a
        warning naming ``T`` in local time (recorded from Slurm 24.11.5 and 26.05.5)."""
        local = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
        body: Json = {
            "jobs": [],
            "last_backfill": _nv(0),
            "last_update": _nv(0),
            "meta": self._meta(v, request),
            "errors": [],
            "warnings": [
                {
                    "description": f"No job changes since update_time[{since}]={local}",
                    "source": "op_handler_jobs",
                }
            ],
        }
        return _json(body)

    async def _job_states_handler(self, request: web.Request) -> web.Response:
        """``GET jobs/state/[?job_id=1&job_id=2]`` as Slurm's data_parser answers it
        (OPENAPI_JOB_STATE_RESP): ``{"jobs": [{"job_id": "<id>", "state": [...]}]}`` — the job
        id a string, no ``last_update``; an unknown id in ``job_id`` is left out.
        ``update_time`` is not a field of this query: ignored, with a warning (recorded from
        Slurm 24.11.5 and 26.05.5).

        ``job_id`` is answered as real slurmrestd answers it, not as the OpenAPI document's
        "CSV list" says (recorded from 24.11.5 and 26.05.5,
        tests/real_slurm/test_modern_job_states_by_id.py): one id per parameter, repeated; a
        literal comma in it is refused in plain text — HTTP 400 "Unable to parse query." on
        24.11, HTTP 500 "Unspecified error" from 25.05 on —; a value that is not a job id
        (``%2C`` included, or empty) is 422, error 9000 "Rejecting request. Failure parsing
        query"."""
        v = self._request_version(request)
        self._purge()
        jobs: Iterable[SimJob] = self.jobs_by_id.values()
        if "job_id" in request.query:
            if any("," in p for p in request.url.raw_query_string.split("&")):
                if self.slurm_release == "24.11":
                    return web.Response(status=400, text="Unable to parse query.")
                return web.Response(status=500, text="Unspecified error")
            ids = request.query.getall("job_id")
            if not all(p.isdigit() for p in ids):
                return self._error(
                    v, "jobs", 422, 9000, "Rejecting request. Failure parsing query", "", request
                )
            jobs = [self.jobs_by_id[int(p)] for p in ids if int(p) in self.jobs_by_id]
        # recorded from 26.05.5: a het component reads "<id>+<offset>", a plain job "<id>"
        payload: Json = {
            "jobs": [
                {
                    "job_id": f"{j.job_id}+{j.het_offset}" if j.het_ids else str(j.job_id),
                    "state": [j.state],
                }
                for j in jobs
            ]
        }
        if "update_time" in request.query:
            payload["warnings"] = [
                {
                    "description": 'Ignoring unknown field "update_time" of type string in '
                    "DATA_PARSER_OPENAPI_JOB_STATE_QUERY",
                    "source": "#/update_time/",
                }
            ]
        return self._ok(v, request, payload)

    def _job_info(self, v: str, payload: Json) -> Json:
        """``openapi_job_info_resp`` requires ``last_update`` and ``last_backfill`` (v0.0.41+)."""
        if v != "v0.0.38":
            payload["last_update"] = _nv(self._now())
            payload["last_backfill"] = _nv(self.jobs_changed_at)
        return payload

    def _job_from(self, request: web.Request) -> SimJob | None:
        raw = request.match_info["job_id"]
        return self.jobs_by_id.get(int(raw)) if raw.isdigit() else None

    async def _get_job(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        self._purge()
        job = self._job_from(request)
        if job is None:
            return self._error(
                v, "jobs", self._fail_status(v), 2017, "", "_handle_job_get", request
            )
        # recorded from 26.05.5: a het leader's id lists every component, another one's alone
        listed = [self._render_job_full(v, j) for j in self.components(job)]
        return self._ok(v, request, self._job_info(v, {"jobs": listed}))

    async def _delete_job(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        job = self._job_from(request)
        done = job is not None and job.state in ENDED
        if v == "v0.0.38":
            if job is None:
                return self._error(v, "jobs", 500, 2017, "", "_handle_job_delete", request)
            if done:
                return self._error(v, "jobs", 500, 2021, "", "_handle_job_delete", request)
            self.cancel_job(job.job_id)
            return self._ok(v, request, {})
        # openapi_kill_jobs_resp, recorded from Slurm 24.11.5 and 26.05.5: HTTP 200, errors
        # empty, each job that could not be signalled in ``status``.
        if job is None or done:
            errno = 2017 if job is None else 2021
            text = _ERRNO_TEXT[errno]
            entry: Json = {
                "error": {"string": text, "code": errno, "message": text},
                "step_id": request.match_info["job_id"],
                "job_id": _nv(None if job is None else job.job_id),
                "federation": {"sibling": ""},
            }
            return self._ok(v, request, {"status": [entry]})
        self.cancel_job(job.job_id)
        return self._ok(v, request, {"status": []})

    async def _update_job_handler(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        fail = self._fail_status(v)
        job = self._job_from(request)
        if job is None:
            return self._error(v, "jobs", fail, 2017, "", "_handle_job_post", request)
        try:
            changes = self._parse_update(v, await request.json())
        except (ValueError, TypeError) as exc:
            return self._error(v, "jobs", 400, 9000, str(exc), "_handle_job_post", request)
        try:
            self.update_job(job.job_id, **changes)
        except _SubmitError as exc:
            return self._error(
                v, "jobs", fail, exc.errno, exc.description, "_handle_job_post", request
            )
        if v == "v0.0.38":
            return self._ok(v, request, {})
        if self.slurm_release != "24.11":
            # recorded from Slurm 26.05.5: no per-job results for a job that is no array
            return self._ok(v, request, {"results": None})
        # 24.11 (not recorded): the v0.0.42 document's job_array_response_array
        entry = {"job_id": job.job_id, "step_id": "", "error_code": 0, "error": "", "why": ""}
        return self._ok(v, request, {"results": [entry]})

    def _check_reservation(self, desc: Json, uid: int) -> None:
        """A submit naming reservations: each must exist (2053 "Requested reservation is
        invalid": slurmctld ``validate_job_resv``, src/slurmctld/reservation.c) and, when it
        has ``Users=``, list the job's user (2052 "Access denied to requested reservation",
        recorded from Slurm 26.05.5 with ``Users=root`` and a job for alice). Accounts and
        QOS are not checked: without accounting (no slurmdbd) real 26.05.5 takes any
        ``account`` — one outside a partition's ``AllowAccounts`` too — and any ``qos``, and
        this simulator, like the rigs, has no accounting. (Only the access check: jobs are
        not scheduled into reservations here.)"""
        raw = str(desc.get("reservation") or "")
        for name in (n.strip() for n in raw.split(",") if n.strip()):
            resv = self.reservations.get(name)
            if resv is None:
                raise _SubmitError(2053, "Batch job submission failed")
            if resv.users and self._user_name(uid) not in resv.users:
                raise _SubmitError(2052, "Batch job submission failed")

    async def _submit_job(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        fail = self._fail_status(v)
        try:
            body = await request.json()
            if v != "v0.0.38" and isinstance(body, dict) and "jobs" in body:
                return await self._submit_het_job(v, body, request)
            desc, external = self._parse_submit(v, body)
        except (ValueError, TypeError) as exc:
            return self._error(v, "jobs", 400, 9000, str(exc), "_handle_job_submit", request)
        except _SubmitError as exc:
            return self._error(
                v, "jobs", fail, exc.errno, exc.description, "_handle_job_submit", request
            )
        if v != "v0.0.38" and desc.get("admin_comment") and not self._is_operator(request):
            # recorded from Slurm 24.11.5 (HTTP 500) and 26.05.5 (HTTP 422)
            return self._error(
                v,
                "jobs",
                fail,
                _ACCESS_DENIED,
                "Batch job submission failed",
                "slurm_submit_batch_job()",
                request,
            )
        try:
            uid, gid = self.submit_identity(
                request.get(_USER, ""), self._is_operator(request), desc
            )
            self._check_reservation(desc, uid)
            job_id = self.submit(desc, external=external, user_id=uid, group_id=gid)
        except _SubmitError as exc:
            # recorded from Slurm 26.05.5 (identity, reservation): the submit's own source,
            # or the data_parser path of a name it cannot resolve
            source = exc.source or (
                "slurm_submit_batch_job()"
                if exc.errno in _SUBMIT_REFUSALS
                else "_handle_job_submit"
            )
            return self._error(v, "jobs", fail, exc.errno, exc.description, source, request)
        payload: Json = {"job_id": job_id, "step_id": "batch"}
        if v != "v0.0.38":
            # recorded from Slurm 24.11.5/26.05.5: always there (empty without a
            # job_submit plugin message); a held job adds two warnings.
            payload["job_submit_user_msg"] = ""
        response = self._ok(v, request, payload)
        if v != "v0.0.38" and self.jobs_by_id[job_id].held:
            held = "Job is in held state, pending scheduler release"
            body = json.loads(response.body)  # type: ignore[arg-type]
            body["warnings"] = [
                {
                    "description": f"Job submission resulted in non-zero return code: {held}",
                    "source": "slurm_submit_batch_job()",
                },
                {"description": held, "source": "slurm_submit_batch_job()"},
            ]
            return _json(body)
        return response

    async def _submit_het_job(self, v: str, body: Json, request: web.Request) -> web.Response:
        """``POST job/submit`` with ``jobs`` (a heterogeneous job), answered as Slurm 26.05.5
        answers it (recorded on the rig, tests/real_slurm/test_modern_hetjob.py): ``job`` beside
        ``jobs`` ⇒ 422, 9000; ``jobs: []`` ⇒ no job id and an error whose number and HTTP
        status are whatever errno slurmrestd had left (seen: 200 with 0, 500 with 11; here
        the first); a
        component refused ⇒ 422 with its errno, "HetJob submission failed"; else the leader's
        id and ``step_id`` ``batch`` (the other ids only from ``GET job/{leader}``)."""
        fail = self._fail_status(v)
        if "job" in body:
            return self._error(
                v,
                "jobs",
                fail,
                9000,
                'Specify only one "job" or "jobs" fields but never both',
                "_job_post",
                request,
            )
        raw = body.get("jobs")
        if not isinstance(raw, list):
            return self._error(v, "jobs", 400, 9000, "jobs: not a list", "_job_post", request)
        if not raw:
            return self._error(
                v,
                "jobs",
                200,
                0,
                "Refusing HetJob submission without any components",
                "_job_post_het_submit",
                request,
            )
        try:
            descs = [
                self._parse_submit(v, {"job": component, "script": body.get("script")})
                for component in raw
            ]
        except (ValueError, TypeError) as exc:
            return self._error(v, "jobs", 400, 9000, str(exc), "_job_post", request)
        except _SubmitError as exc:
            return self._error(v, "jobs", fail, exc.errno, exc.description, "_job_post", request)
        if any(d.get("admin_comment") for d, _ in descs) and not self._is_operator(request):
            return self._error(
                v,
                "jobs",
                fail,
                _ACCESS_DENIED,
                "HetJob submission failed",
                "slurm_submit_batch_het_job()",
                request,
            )
        try:
            # Every component runs as the identity slurmctld gives the first (the same
            # rules as a single submit's: submit_identity).
            uid, gid = self.submit_identity(
                request.get(_USER, ""), self._is_operator(request), descs[0][0]
            )
            for desc, _external in descs:
                self._check_reservation(desc, uid)
            job_id = self.submit_het(descs, user_id=uid, group_id=gid)
        except _SubmitError as exc:
            return self._error(
                v,
                "jobs",
                fail,
                exc.errno,
                "HetJob submission failed",
                "slurm_submit_batch_het_job()",
                request,
            )
        return self._ok(
            v, request, {"job_id": job_id, "step_id": "batch", "job_submit_user_msg": ""}
        )

    async def _partitions(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        since = self._update_time(request)
        if since is not None and self.parts_changed_at < since:
            return web.Response(status=304)
        parts = [self._render_partition(v, p) for p in self.partitions.values()]
        payload: Json = {"partitions": parts}
        if v != "v0.0.38":
            payload["last_update"] = _nv(self._now())
        return self._ok(v, request, payload)

    async def _get_partition(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        name = request.match_info["partition_name"]
        since = self._update_time(request)
        if since is not None and self.parts_changed_at < since:
            return web.Response(status=304)
        part = next((p for p in self.partitions.values() if p.name.lower() == name.lower()), None)
        if part is None:
            if v == "v0.0.38":
                return self._error(v, "partition", 500, 2000, "", "", request)
            return self._error(
                v,
                "partition",
                422,
                9000,
                f"Unable to find partition {name}",
                "op_handler_partition",
                request,
            )
        payload: Json = {"partitions": [self._render_partition(v, part)]}
        if v != "v0.0.38":
            payload["last_update"] = _nv(self._now())
        return self._ok(v, request, payload)


def _op(operation_id: str, summary: str) -> Json:
    return {
        "operationId": operation_id,
        "summary": summary,
        "responses": {"200": {"description": summary}},
    }


def _normalise(version: str) -> str:
    v = version.strip()
    return v if v.startswith("v") else f"v{v}"


def _parse_node_conf(line: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """A slurm.conf ``NodeName`` line as (node names, {lower-case key: value}); ``Feature``
    and ``Features`` both land in ``features``. Values may be quoted (``Reason="a b"``).

    Raises:
        SimError: -1 when ``slurm_conf_parse_nodeline`` would fail: a token without ``=``, an
            unknown key, a non-numeric value for a numeric key, no NodeName, two NodeNames,
            ``NodeName=DEFAULT`` or a malformed hostlist.
    """

    def fail(why: str) -> SimError:
        return SimError(-1, f"Failed to parse nodeline '{line}': {why}")

    try:
        tokens = shlex.split(line)
    except ValueError as exc:
        raise fail(str(exc)) from None
    names: tuple[str, ...] = ()
    conf: dict[str, str] = {}
    for token in tokens:
        key, eq, value = token.partition("=")
        low = key.lower()
        if not eq or not key:
            raise fail(f"{token!r} is not Key=Value")
        if low == "nodename":
            if names:
                raise fail("more than one NodeName")
            if value.upper() == "DEFAULT" or not value:
                raise fail(f"NodeName={value} cannot be created")
            try:
                names = hostlist.expand(value)
            except hostlist.HostlistError as exc:
                raise fail(str(exc)) from None
            continue
        kind = _NODE_CONF_KEYS.get(low)
        if kind is None:
            raise fail(f"unknown key {key!r}")
        if kind == "int" and not value.isdigit():
            raise fail(f"{key}={value!r} is not a number")
        conf["features" if low == "feature" else low] = value
    if not names:
        raise fail("no NodeName")
    return names, conf


def _valid_transition(node: SimNode, state: str) -> bool:
    """slurmctld's ``_valid_node_state_change`` for the states the simulator models."""
    base = node.base_state
    if state in ("DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "UNDRAIN"):
        return True
    if state == "RESUME":
        return base in ("DOWN", "FUTURE") or bool({"DRAIN", "FAIL"} & set(node.flags))
    if state == "IDLE":
        return base in ("DOWN", "IDLE")
    if state == "FUTURE":
        return base in ("DOWN", "IDLE")
    if state == "ALLOCATED":
        return base == "ALLOCATED"
    return False


def _apply_state(node: SimNode, state: str) -> None:
    """One state of an update (after :func:`_valid_transition` accepted it)."""
    if state == "RESUME":
        node.clear_flag("DRAIN")
        node.clear_flag("FAIL")
        if node.base in ("DOWN", "FUTURE"):
            node.base = None
    elif state == "UNDRAIN":
        node.clear_flag("DRAIN")
    elif state in ("DRAIN", "FAIL", "NOT_RESPONDING"):
        node.add_flag(state)
    elif state == "DOWN":
        node.base = "DOWN"
        node.alloc_cpus = node.alloc_memory = 0
    elif state == "IDLE":
        node.base = None
        node.clear_flag("DRAIN")
        node.clear_flag("FAIL")
    elif state == "FUTURE":
        node.base = "FUTURE"


async def serve(
    host: str,
    port: int,
    *,
    api_versions: Sequence[str] | None = None,
    token_file: Path | str | None = None,
    seed_path: Path | str | None = None,
    nodes: int = 4,
) -> None:
    """Run a simulator until cancelled (the ``slurmbridge sim slurmrestd`` command).

    Seeds from ``seed_path`` (YAML, see :meth:`SlurmSim.load_seed`) or ``n1..n<nodes>``;
    serves ``api_versions`` (default: all); writes an accepted JWT to ``token_file`` when
    given (otherwise no request is accepted until a token is minted in-process).

    Raises:
        OSError: the port is taken or a file cannot be read/written.
        ValueError: bad versions or seed.
    """
    sim = SlurmSim()
    if seed_path is not None:
        sim.load_seed(seed_path)
    else:
        sim.seed_default(nodes)
    await sim.start(host, port, versions=api_versions or None)
    try:
        if token_file is not None:
            sim.write_token(token_file)
            log.info("slurmrestd simulator: token written to %s", token_file)
        await asyncio.Event().wait()
    finally:
        await sim.stop()
