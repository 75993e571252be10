"""One codec per slurmrestd API version, and the registry the client picks from.

:data:`SUPPORTED` lists the versions in order of preference (newest first); :func:`get`
returns a version's codec. Each module's docstring records what its OpenAPI document (in
``tests/data/slurm-openapi/``) says that differs from its neighbours.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from slurmbridge.slurm.codecs import v0038, v0042, v0043, v0044, v0045
from slurmbridge.slurm.codecs._common import Codec, Paths
from slurmbridge.slurm.errors import Unsupported

__all__ = ["CODECS", "DEFAULT_VERSION", "SUPPORTED", "Codec", "Paths", "get"]

#: Every supported version's codec, newest first.
CODECS: Final[Mapping[str, Codec]] = {
    c.version: c for c in (v0045.CODEC, v0044.CODEC, v0043.CODEC, v0042.CODEC, v0038.CODEC)
}

#: Supported API versions in order of preference (the client negotiates the first offered).
SUPPORTED: Final[tuple[str, ...]] = tuple(CODECS)

#: The version used when nothing else decides (Slinky's current default).
DEFAULT_VERSION: Final = "v0.0.44"


def get(version: str) -> Codec:
    """The codec of ``version`` (``v0.0.44``).

    Raises:
        Unsupported: the version is not one this client speaks.
    """
    try:
        return CODECS[version]
    except KeyError:
        raise Unsupported(
            version,
            "any operation",
            f"slurmrestd API {version!r} is not supported (supported: {', '.join(SUPPORTED)})",
        ) from None
