"""API v0.0.44 — Slurm 25.11; the client's default and Slinky's current version.

Against v0.0.43 the node-state enum gains ``EXTERNAL`` (a base state: nodes registered from
outside Slurm) and ``BLOCKED``, and ``POST /new/node/`` appears (dynamic node creation; not
used by this client yet). Partitions still do not report the DEFAULT flag. An invalid state
transition answers ``ESLURM_INVALID_NODE_STATE_TRANSITION`` (2180).
"""

from __future__ import annotations

from typing import ClassVar, Final

from slurmbridge.slurm.codecs._common import Paths
from slurmbridge.slurm.codecs._dataparser import NODE_STATES_V0042, DataParserCodec, paths_for

__all__ = ["CODEC", "NODE_STATES_V0044", "V0044"]

#: v0.0.44's node-state enum.
NODE_STATES_V0044: Final = NODE_STATES_V0042 | {"EXTERNAL", "BLOCKED"}


class V0044(DataParserCodec):
    """Codec for slurmrestd v0.0.44 (Slurm 25.11)."""

    version: ClassVar[str] = "v0.0.44"
    paths: ClassVar[Paths] = paths_for("v0.0.44")
    node_states: ClassVar[frozenset[str]] = NODE_STATES_V0044


CODEC: Final = V0044()
