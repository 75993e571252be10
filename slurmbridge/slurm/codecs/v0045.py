"""API v0.0.45 — Slurm 26.05, the newest.

Against v0.0.44: partitions report ``flags`` (``DEFAULT`` marks the default partition, which
no data_parser version before reported), the node-state enum gains ``POWER_DOWN_ASAP`` and
``POWER_DOWN_FORCE``, ping entries lose the deprecated ``pinged``/``mode`` and gain ``status``,
and ``POST /partitions/`` / ``DELETE /partition/{name}`` appear (not used here).
``POST /new/node/`` and ``DELETE /node/{name}`` are as in v0.0.44.
"""

from __future__ import annotations

from typing import ClassVar, Final

from slurmbridge.slurm.codecs._common import Paths
from slurmbridge.slurm.codecs._dataparser import DataParserCodec, paths_for
from slurmbridge.slurm.codecs.v0044 import NODE_STATES_V0044

__all__ = ["CODEC", "NODE_STATES_V0045", "V0045"]

#: v0.0.45's node-state enum.
NODE_STATES_V0045: Final = NODE_STATES_V0044 | {"POWER_DOWN_ASAP", "POWER_DOWN_FORCE"}


class V0045(DataParserCodec):
    """Codec for slurmrestd v0.0.45 (Slurm 26.05)."""

    external_job: ClassVar[bool] = True
    version: ClassVar[str] = "v0.0.45"
    paths: ClassVar[Paths] = paths_for("v0.0.45", new_node=True, reservation_write=True)
    node_states: ClassVar[frozenset[str]] = NODE_STATES_V0045
    node_topology: ClassVar[bool] = True
    node_create: ClassVar[bool] = True
    reports_default: ClassVar[bool] = True


CODEC: Final = V0045()
