"""API v0.0.44 — Slurm 25.11; the client's default and Slinky's current version.

Against v0.0.43 the node-state enum gains ``EXTERNAL`` and ``BLOCKED``, and
``POST /new/node/`` appears (dynamic node creation from a slurm.conf ``NodeName`` line:
``openapi_create_node_req.node_conf``). ``EXTERNAL`` is a state *flag* in Slurm
(``NODE_STATE_EXTERNAL = SLURM_BIT(4)`` in ``slurm.h``, not a ``NODE_STATE_BASE`` value): a
node created with ``State=External`` is reported as ``["IDLE", "EXTERNAL", "DYNAMIC_NORM"]``
(``state_str2int`` gives ``IDLE|EXTERNAL``, creation adds ``DYNAMIC_NORM``), so
:attr:`Node.base_state <slurmbridge.slurm.models.Node.base_state>` stays ``IDLE`` and
``node.has("EXTERNAL")`` tells an external node. Partitions still do not report the DEFAULT
flag. An invalid state transition answers ``ESLURM_INVALID_NODE_STATE_TRANSITION`` (2180).
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

    external_job: ClassVar[bool] = True
    version: ClassVar[str] = "v0.0.44"
    paths: ClassVar[Paths] = paths_for("v0.0.44", new_node=True, reservation_write=True)
    node_states: ClassVar[frozenset[str]] = NODE_STATES_V0044
    node_topology: ClassVar[bool] = True
    node_create: ClassVar[bool] = True


CODEC: Final = V0044()
