"""API v0.0.38 — Slurm 22.05 (Debian 12's slurmrestd).

Shapes (from the OpenAPI document a real 22.05 slurmrestd serves at ``/openapi/v3`` and from
its answers on this project's machines):

* paths have no trailing slash: ``/slurm/v0.0.38/nodes``;
* node ``state`` is a lower-case base state (``idle``) and ``state_flags`` an upper-case list
  (``["DRAIN"]``): ``idle`` + ``DRAIN`` is drained, ``allocated`` + ``DRAIN`` draining;
* ``features`` is a comma-separated string, ``partitions`` a list; unset strings
  (``reason_set_by_user``, ``owner``) are ``null``, although the document types them string;
* ``reason_changed_at`` is plain epoch seconds (0 = unset);
* partitions: ``nodes`` is a hostlist string, ``max_time_limit`` minutes with ``-1`` for
  INFINITE and ``null`` for unset, ``flags`` lower case (``["default"]``);
* ping: ``pings[].ping`` is ``"UP"``/``"DOWN"``;
* no ``last_update`` in any listing, so :attr:`NodeList.last_update` is 0;
* ``?update_time=`` on ``nodes`` and ``partitions`` answers 304 when nothing changed;
* there is no node update: ``POST node/{name}`` answers 405 (node updates arrived in v0.0.39),
  no node deletion (``DELETE node/{name}`` arrived in v0.0.40) and no node creation
  (``POST new/node/``, v0.0.44): the client raises ``Unsupported`` before sending.
"""

from __future__ import annotations

from typing import ClassVar, Final

import msgspec

from slurmbridge.slurm import hostlist
from slurmbridge.slurm.codecs._common import (
    Codec,
    ItemMemo,
    Paths,
    csv_tuple,
    decode,
    error_report,
    noval,
    state_tuple,
)
from slurmbridge.slurm.codecs._dataparser import decode_job_list
from slurmbridge.slurm.errors import BadResponse, Rejected, Unsupported
from slurmbridge.slurm.models import (
    PLACEHOLDER_OUTPUT,
    PLACEHOLDER_SCRIPT,
    JobList,
    JobSubmit,
    Node,
    NodeList,
    NodeUpdate,
    Partition,
    PartitionList,
    Ping,
)

__all__ = ["CODEC", "V0038"]


class _Node(msgspec.Struct, frozen=True):
    name: str
    state: str | None = None
    state_flags: list[str] | None = None
    reason: str | None = None
    reason_set_by_user: str | None = None
    reason_changed_at: int | None = None
    cpus: int | None = None
    alloc_cpus: int | None = None
    real_memory: int | None = None
    features: str | list[str] | None = None
    partitions: list[str] | None = None
    gres: str | None = None
    address: str | None = None
    comment: str | None = None


class _Nodes(msgspec.Struct, frozen=True):
    nodes: list[_Node] | None = None


class _Partition(msgspec.Struct, frozen=True):
    name: str
    state: str | None = None
    nodes: str | None = None
    total_cpus: int | None = None
    total_nodes: int | None = None
    max_time_limit: int | None = None
    flags: list[str] | None = None


class _Partitions(msgspec.Struct, frozen=True):
    partitions: list[_Partition] | None = None


class _Ping(msgspec.Struct, frozen=True):
    hostname: str | None = None
    ping: str | None = None
    mode: str | None = None
    status: int | None = None


class _Pings(msgspec.Struct, frozen=True):
    pings: list[_Ping] | None = None


_NODES: Final = msgspec.json.Decoder(_Nodes)
_PARTITIONS: Final = msgspec.json.Decoder(_Partitions)
_PINGS: Final = msgspec.json.Decoder(_Pings)


def _node(n: _Node) -> Node:
    return Node(
        name=n.name,
        state=state_tuple([n.state or "", *(n.state_flags or [])]),
        reason=n.reason or "",
        reason_set_by_user=n.reason_set_by_user or "",
        reason_changed_at=noval(n.reason_changed_at) or 0,
        cpus=n.cpus or 0,
        alloc_cpus=n.alloc_cpus or 0,
        real_memory=n.real_memory or 0,
        features=csv_tuple(n.features),
        partitions=tuple(n.partitions or ()),
        gres=n.gres or "",
        address=n.address or "",
        comment=n.comment or "",
    )


def _partition(p: _Partition) -> Partition:
    try:
        nodes = hostlist.expand(p.nodes)
    except hostlist.HostlistError as exc:
        raise BadResponse(f"partition {p.name}: {exc}") from None
    return Partition(
        name=p.name,
        state=(p.state or "").upper(),
        nodes=nodes,
        total_cpus=p.total_cpus or 0,
        total_nodes=p.total_nodes or 0,
        max_time_minutes=noval(p.max_time_limit),
        is_default="DEFAULT" in {f.upper() for f in p.flags or ()},
    )


class V0038(Codec):
    """Codec for slurmrestd v0.0.38 (Slurm 22.05). No node update, creation or deletion
    (:class:`Unsupported`)."""

    version: ClassVar[str] = "v0.0.38"
    paths: ClassVar[Paths] = Paths(
        ping="/slurm/v0.0.38/ping",
        nodes="/slurm/v0.0.38/nodes",
        node="/slurm/v0.0.38/node/{node_name}",
        partitions="/slurm/v0.0.38/partitions",
        partition="/slurm/v0.0.38/partition/{partition_name}",
        jobs="/slurm/v0.0.38/jobs",
        job="/slurm/v0.0.38/job/{job_id}",
        job_submit="/slurm/v0.0.38/job/submit",
    )
    node_update: ClassVar[bool] = False
    node_delete: ClassVar[bool] = False

    def decode_ping(self, body: bytes) -> Ping:
        """``pings[].ping == "UP"`` for any controller ⇒ responding."""
        pings = decode(_PINGS, body, "v0.0.38 ping").pings or []
        responding = any((p.ping or "").upper() == "UP" for p in pings)
        error = ""
        if not responding:
            error = "; ".join(error_report(body).texts) or "no slurmctld responded"
        return Ping(
            responding=responding,
            hostnames=tuple(p.hostname for p in pings if p.hostname),
            api_version=self.version,
            error=error,
        )

    def decode_nodes(self, body: bytes, memo: ItemMemo | None = None) -> NodeList | None:
        """Nodes; ``last_update`` is 0 (v0.0.38 does not report it). ``memo`` is not used:
        Slurm 22.05 sites are small (no conditional listings either)."""
        del memo
        parsed = decode(_NODES, body, "v0.0.38 nodes")
        if parsed.nodes is None:
            return None
        return NodeList(nodes=tuple(_node(n) for n in parsed.nodes), last_update=0)

    def decode_partitions(self, body: bytes) -> PartitionList | None:
        """Partitions with expanded node lists; ``last_update`` is 0."""
        parsed = decode(_PARTITIONS, body, "v0.0.38 partitions")
        if parsed.partitions is None:
            return None
        return PartitionList(partitions=tuple(_partition(p) for p in parsed.partitions))

    def decode_jobs(self, body: bytes, memo: ItemMemo | None = None) -> JobList | None:
        """Jobs (``job_state`` is one string; times plain epoch seconds; no ``last_update``)."""
        return decode_job_list(body, memo)

    def encode_submit(self, job: JobSubmit) -> bytes:
        """``job_submission``: ``{"job": job_properties, "script": …}``.

        v0.0.38 has no ``EXTERNAL_JOB``, ``admin_comment``, ``excluded_nodes`` nor
        ``tres_per_node``: a placeholder is a batch job running PLACEHOLDER_SCRIPT, the pods
        are not listed in Slurm, excluded nodes and GPUs are not sent (``gres``/``exclude``
        are missing from the 22.05 document), and ``comment`` carries slurmbridge's marker.
        ``environment`` is an object there, ``nodes`` a ``[min, max]`` pair.

        Raises:
            Unsupported: ``required_nodes`` (``job_properties`` has no node list: a job that
                must re-back pods on their nodes cannot be asked for, and one that could land
                elsewhere is never sent instead).
        """
        if job.required_nodes:
            raise Unsupported(self.version, "submit_job with required_nodes")
        if job.user_id is not None or job.group_id is not None:
            # v0.0.38's job_properties has no user_id/group_id: leaving them out would run
            # the job as the token's user (root) instead of the tenant's. Fail closed.
            raise Rejected(
                "slurmrestd API v0.0.38 (Slurm 22.05) cannot submit a job as another user "
                "(job_properties has no user_id/group_id): a tenancy policy needs Slurm "
                "23.02+ (v0.0.39+)"
            )
        env = dict(e.split("=", 1) for e in job.environment if "=" in e)
        props: dict[str, object] = {
            "name": job.name,
            "cpus_per_task": job.cpus_per_task,
            "tasks": job.tasks,
            "nodes": [job.min_nodes, job.max_nodes or job.min_nodes],
            "current_working_directory": job.working_directory,
            "environment": env,
        }
        optional: dict[str, object | None] = {
            "partition": job.partition,
            "account": job.account,
            "qos": job.qos,
            "reservation": job.reservation,
            "wckey": job.wckey,
            "constraints": job.constraints,
            "licenses": job.licenses,
            "comment": job.comment,
            "mcs_label": job.mcs_label,
            "memory_per_node": job.memory_per_node_mib,
            "time_limit": job.time_limit_minutes,
            "priority": None if job.priority is None else str(job.priority),
            # Recorded from 22.05.8: the document's "true" is refused ("Invalid exclusive
            # specification"); "exclusive" gives OverSubscribe=NO, whole nodes.
            "exclusive": "exclusive" if job.exclusive else None,
        }
        props.update({k: v for k, v in optional.items() if v not in (None, "")})
        if job.external:
            props.update(PLACEHOLDER_OUTPUT)
        script = PLACEHOLDER_SCRIPT if job.external else job.script
        return msgspec.json.encode({"job": props, "script": script})

    def encode_node_update(self, update: NodeUpdate) -> bytes:
        """Always raises: Slurm 22.05's REST API cannot update nodes.

        Raises:
            Unsupported: always.
        """
        raise Unsupported(self.version, "update_node")


CODEC: Final = V0038()
