"""API v0.0.43 — Slurm 25.05.

Same fields and node-state enum as v0.0.42 for everything this client reads (it adds external
jobs, which are not read here). Partitions do not report the DEFAULT flag.
No ``POST /new/node/`` (node creation is v0.0.44+: ``create_node`` raises
``Unsupported`` before sending); ``DELETE /node/{name}`` exists.
"""

from __future__ import annotations

from typing import ClassVar, Final

from slurmbridge.slurm.codecs._common import Paths
from slurmbridge.slurm.codecs._dataparser import NODE_STATES_V0042, DataParserCodec, paths_for

__all__ = ["CODEC", "V0043"]


class V0043(DataParserCodec):
    """Codec for slurmrestd v0.0.43 (Slurm 25.05)."""

    external_job: ClassVar[bool] = True
    version: ClassVar[str] = "v0.0.43"
    paths: ClassVar[Paths] = paths_for("v0.0.43", reservation_write=True)
    node_states: ClassVar[frozenset[str]] = NODE_STATES_V0042
    node_topology: ClassVar[bool] = True


CODEC: Final = V0043()
