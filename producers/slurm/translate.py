"""Pure translations of the Slurm client's version-neutral models into observations (no I/O,
no decisions): :func:`node_to_event`, :func:`partition_to_event`, :func:`job_to_event`,
:func:`ping_to_event`, and the content hash that versions them.
"""

from __future__ import annotations

import hashlib
from typing import TypeVar

import msgspec

from schemas import subjects
from schemas.events import (
    Event,
    GresAlloc,
    NodeAlloc,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmPing,
)
from slurmbridge.slurm.models import Job, Node, Partition, Ping

_HASH_ENC = msgspec.json.Encoder()


_ENVELOPE = {"observed_at": 0, "version": "", "producer": ""}


def content_hash(event: Event) -> str:
    """Hash of an event's snapshot, envelope excluded (16 hex chars)."""
    stripped = msgspec.structs.replace(event, **_ENVELOPE)
    return hashlib.blake2b(_HASH_ENC.encode(stripped), digest_size=8).hexdigest()


def _stamp(event: Event, producer: str, observed_at: int) -> Event:
    return msgspec.structs.replace(
        event, version=content_hash(event), producer=producer, observed_at=observed_at
    )


_E = TypeVar("_E", SlurmNode, SlurmPartition)


def _named(
    kind: type[_E], obj: Node | Partition, cluster: str, producer: str, observed_at: int
) -> _E:
    """``obj`` as a ``kind`` observation keyed by its name: every other field of the client's
    model is a field of the observation under the same name (a test keeps it so for nodes),
    so it is one copy, not a list written twice."""
    fields = msgspec.structs.asdict(obj)
    ev = kind(
        source=subjects.slurm_source(cluster), key=fields.pop("name"), cluster=cluster, **fields
    )
    return _stamp(ev, producer, observed_at)  # type: ignore[return-value]


def node_to_event(
    node: Node, *, cluster: str, producer: str = "", observed_at: int = 0
) -> SlurmNode:
    """Translate a Slurm node (pure). ``version`` is the content hash."""
    return _named(SlurmNode, node, cluster, producer, observed_at)


def partition_to_event(
    part: Partition, *, cluster: str, producer: str = "", observed_at: int = 0
) -> SlurmPartition:
    """Translate a Slurm partition (pure). ``version`` is the content hash."""
    return _named(SlurmPartition, part, cluster, producer, observed_at)


def job_to_event(job: Job, *, cluster: str, producer: str = "", observed_at: int = 0) -> SlurmJob:
    """Translate a Slurm job (pure). ``key`` is the job id."""
    # Every field of the client's Job but ``user_name`` (not carried) is a field of the
    # observation under the same name; the sequences become tuples, the allocation events'.
    fields = msgspec.structs.asdict(job)
    del fields["user_name"]
    fields.update(
        state=tuple(job.state),
        nodes=tuple(job.nodes),
        flags=tuple(job.flags),
        allocation=tuple(
            NodeAlloc(
                node=a.node,
                gres=tuple(
                    GresAlloc(name=g.name, type=g.type, count=g.count, indices=g.indices)
                    for g in a.gres
                ),
                cores=a.cores,
            )
            for a in job.allocation
        ),
    )
    ev = SlurmJob(
        source=subjects.slurm_source(cluster), key=str(job.job_id), cluster=cluster, **fields
    )
    return _stamp(ev, producer, observed_at)  # type: ignore[return-value]


def ping_to_event(
    ping: Ping | None,
    *,
    cluster: str,
    error: str = "",
    error_kind: str = "",
    producer: str = "",
    observed_at: int = 0,
) -> SlurmPing:
    """Translate a ping answer, or a failure (``ping`` None, ``error`` the reason and
    ``error_kind`` the class of the client error, e.g. ``Unauthorized``) (pure)."""
    ev = SlurmPing(
        source=subjects.slurm_source(cluster),
        key=cluster,
        cluster=cluster,
        responding=bool(ping and ping.responding and not error),
        hostnames=tuple(ping.hostnames) if ping else (),
        api_version=ping.api_version if ping else "",
        error=error or (ping.error if ping else ""),
        error_kind=error_kind,
    )
    return _stamp(ev, producer, observed_at)  # type: ignore[return-value]
