"""API v0.0.42 — Slurm 24.11 (the lowest version Slinky still supports).

Shapes as in :mod:`._dataparser`. Differences from the newer versions: the node-state enum
has no ``EXTERNAL`` / ``BLOCKED`` (a node update asking for them raises ``Unsupported``
before anything is sent), partitions do not report the DEFAULT flag, and an invalid state
transition answers ``ESLURM_INVALID_NODE_STATE`` (2028).
No ``POST /new/node/`` (node creation is v0.0.44+: ``create_node`` raises
``Unsupported`` before sending); ``DELETE /node/{name}`` exists.
"""

from __future__ import annotations

from typing import ClassVar, Final

from slurmbridge.slurm.codecs._common import Paths
from slurmbridge.slurm.codecs._dataparser import NODE_STATES_V0042, DataParserCodec, paths_for

__all__ = ["CODEC", "V0042"]


class V0042(DataParserCodec):
    """Codec for slurmrestd v0.0.42 (Slurm 24.11)."""

    version: ClassVar[str] = "v0.0.42"
    paths: ClassVar[Paths] = paths_for("v0.0.42")
    node_states: ClassVar[frozenset[str]] = NODE_STATES_V0042


CODEC: Final = V0042()
