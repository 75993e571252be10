"""API v0.0.45 — Slurm 26.05, the newest.

Against v0.0.44: partitions report ``flags`` (``DEFAULT`` marks the default partition, which
no data_parser version before reported), the node-state enum gains ``POWER_DOWN_ASAP`` and
``POWER_DOWN_FORCE``, ping entries lose the deprecated ``pinged``/``mode`` and gain ``status``,
and ``POST /partitions/`` / ``DELETE /partition/{name}`` appear (a NodeSet's partition:
:meth:`V0045.encode_partition`).
``POST /new/node/`` and ``DELETE /node/{name}`` are as in v0.0.44.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import msgspec

from slurmbridge.slurm.codecs._common import Paths
from slurmbridge.slurm.codecs._dataparser import DataParserCodec, paths_for
from slurmbridge.slurm.codecs.v0044 import NODE_STATES_V0044
from slurmbridge.slurm.models import PartitionDesc

__all__ = ["CODEC", "NODE_STATES_V0045", "PARTITION_FIELDS", "V0045"]

#: v0.0.45's node-state enum.
NODE_STATES_V0045: Final = NODE_STATES_V0044 | {"POWER_DOWN_ASAP", "POWER_DOWN_FORCE"}

#: slurm.conf partition key → where v0.0.45's ``partition_info`` holds it (a path of object
#: keys, or ``flags`` for the YES/NO keys that are partition flags), from
#: /slurm/v0.0.45 OpenAPI ``v0.0.45_partition_info`` (each field's description names its
#: slurm.conf key). Keys: :data:`schemas.partitionconf.KINDS`.
PARTITION_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "AllowAccounts": ("accounts", "allowed"),
    "AllowGroups": ("groups", "allowed"),
    "AllowQos": ("qos", "allowed"),
    "Alternate": ("alternate",),
    "DefaultTime": ("defaults", "time"),
    "DefMemPerCPU": ("defaults", "partition_memory_per_cpu"),
    "DefMemPerNode": ("defaults", "partition_memory_per_node"),
    "Default": ("flags", "DEFAULT"),
    "DenyAccounts": ("accounts", "deny"),
    "DenyQos": ("qos", "deny"),
    "DisableRootJobs": ("flags", "NO_ROOT"),
    "GraceTime": ("grace_time",),
    "Hidden": ("flags", "HIDDEN"),
    "LLN": ("flags", "LLN"),
    "MaxCPUsPerNode": ("maximums", "cpus_per_node"),
    "MaxCPUsPerSocket": ("maximums", "cpus_per_socket"),
    "MaxMemPerCPU": ("maximums", "partition_memory_per_cpu"),
    "MaxMemPerNode": ("maximums", "partition_memory_per_node"),
    "MaxNodes": ("maximums", "nodes"),
    "MaxTime": ("maximums", "time"),
    "MinNodes": ("minimums", "nodes"),
    "OverSubscribe": ("partition", "oversubscribe"),
    "OverTimeLimit": ("maximums", "over_time_limit"),
    "PreemptMode": ("preempt_mode",),
    "PriorityJobFactor": ("priority", "job_factor"),
    "PriorityTier": ("priority", "tier"),
    "QOS": ("qos", "assigned"),
    "ReqResv": ("flags", "REQ_RESV"),
    "RootOnly": ("flags", "ROOT_ONLY"),
    "State": ("partition", "state"),
}
#: The ``*_no_val_struct`` fields (``{"set", "infinite", "number"}``).
_NO_VAL: Final = frozenset(
    {
        "DefaultTime", "DefMemPerCPU", "DefMemPerNode", "MaxCPUsPerNode", "MaxCPUsPerSocket",
        "MaxMemPerCPU", "MaxMemPerNode", "MaxNodes", "MaxTime", "OverTimeLimit",
    }
)  # fmt: skip
_INTS: Final = frozenset({"GraceTime", "MinNodes", "PriorityJobFactor", "PriorityTier"})


def _no_val(value: str) -> dict[str, Any]:
    if value == "INFINITE":
        return {"set": True, "infinite": True, "number": 0}
    return {"set": True, "infinite": False, "number": int(value)}


#: What a key left out of ``config`` is sent as, so that the partition is exactly the
#: config (a key removed from it returns to this): the value ``scontrol create
#: PartitionName=x Nodes=…`` gives a new partition on 26.05.5, in :func:`partition_body`'s
#: value forms. Not here, because slurmrestd cannot send them: ``DefaultTime`` and
#: ``OverTimeLimit`` (their default NONE is NO_VAL, which the REST parser reads as
#: "unchanged"), ``PreemptMode`` (its default is the cluster's ``PreemptMode``); those keep
#: their last value when removed from ``config`` until the partition is re-created.
PARTITION_DEFAULTS: Final[dict[str, str]] = {
    "AllowAccounts": "ALL",
    "AllowGroups": "ALL",
    "AllowQos": "ALL",
    "Alternate": "",
    "Default": "NO",
    "DenyAccounts": "",
    "DenyQos": "",
    "DisableRootJobs": "NO",
    "GraceTime": "0",
    "Hidden": "NO",
    "LLN": "NO",
    "MaxCPUsPerNode": "INFINITE",
    "MaxCPUsPerSocket": "INFINITE",
    "MaxNodes": "INFINITE",
    "MaxTime": "INFINITE",
    "MinNodes": "1",
    "OverSubscribe": "NO",
    "PriorityJobFactor": "1",
    "PriorityTier": "1",
    "QOS": "",
    "ReqResv": "NO",
    "RootOnly": "NO",
    "State": "UP",
}
#: Slurm keeps ``DefMemPerCPU``/``DefMemPerNode`` in one value (and ``MaxMemPer*`` in
#: another), so a pair is reset together, as ``*PerNode`` 0 / UNLIMITED, and only when
#: neither key of it is set (sending both would leave whichever slurmctld reads last).
_MEMORY_PAIRS: Final = (
    ("DefMemPerCPU", "DefMemPerNode", "0"),
    ("MaxMemPerCPU", "MaxMemPerNode", "INFINITE"),
)


def partition_body(desc: PartitionDesc) -> dict[str, Any]:
    """One ``v0.0.45_partition_info`` holding the whole partition: ``name``,
    ``nodes.configured`` (comma list), each of ``desc.settings`` at its
    :data:`PARTITION_FIELDS` place, and every other key at its :data:`PARTITION_DEFAULTS`
    value (``POST partitions/`` changes only what it is sent).

    A YES flag key adds its flag, NO its ``*_CLEAR`` flag. ``OverSubscribe``
    ``NO``/``YES[:N]``/``FORCE[:N]`` is the string ``partition.oversubscribe`` with
    ``partition.exclusive`` ``NO``; ``EXCLUSIVE`` is ``partition.exclusive`` ``NODE`` alone
    (measured on 26.05.5: the deprecated ``maximums.oversubscribe`` object is ignored on
    write, ``partition.oversubscribe`` refuses EXCLUSIVE, and sending it ``NO`` beside
    ``exclusive`` ``NODE`` clears the latter).

    Raises:
        KeyError: a key without a field (never for :func:`schemas.partitionconf.parse`'s).
    """
    settings = dict(desc.settings)
    for key, value in PARTITION_DEFAULTS.items():
        settings.setdefault(key, value)
    for per_cpu, per_node, reset in _MEMORY_PAIRS:
        if per_cpu not in settings and per_node not in settings:
            settings[per_node] = reset
    body: dict[str, Any] = {"name": desc.name, "nodes": {"configured": ",".join(desc.nodes)}}
    flags: list[str] = []
    for key, value in sorted(settings.items()):
        path = PARTITION_FIELDS[key]
        if path[0] == "flags":
            flags.append(path[1] if value == "YES" else f"{path[1]}_CLEAR")
            continue
        encoded: Any
        if key in _NO_VAL:
            encoded = _no_val(value)
        elif key in _INTS:
            encoded = int(value)
        elif key == "PreemptMode":
            encoded = ["DISABLED" if w == "OFF" else w for w in value.split(",")]
        elif key == "State":
            encoded = [value]
        elif key == "OverSubscribe":
            shape = body.setdefault("partition", {})
            if value == "EXCLUSIVE":
                shape["exclusive"] = "NODE"
            else:
                shape["exclusive"] = "NO"
                shape["oversubscribe"] = value
            continue
        else:
            encoded = value
        at = body
        for part in path[:-1]:
            at = at.setdefault(part, {})
        at[path[-1]] = encoded
    body["flags"] = sorted(flags)
    return body


class V0045(DataParserCodec):
    """Codec for slurmrestd v0.0.45 (Slurm 26.05)."""

    external_job: ClassVar[bool] = True
    version: ClassVar[str] = "v0.0.45"
    paths: ClassVar[Paths] = paths_for(
        "v0.0.45", new_node=True, reservation_write=True, partition_write=True
    )
    node_states: ClassVar[frozenset[str]] = NODE_STATES_V0045
    node_topology: ClassVar[bool] = True
    node_create: ClassVar[bool] = True
    reports_default: ClassVar[bool] = True

    def encode_partition(self, desc: PartitionDesc) -> bytes:
        """``{"partitions": [partition_info]}`` (:func:`partition_body`)."""
        return msgspec.json.encode({"partitions": [partition_body(desc)]})


CODEC: Final = V0045()
