"""Error messages that lead with the JSON path of the bad value (config, admission reviews)."""

from __future__ import annotations

import re

_UNKNOWN = re.compile(r"^Object contains unknown field `([^`]+)`(?: - at `\$([^`]*)`)?$")
_MISSING = re.compile(r"^Object missing required field `([^`]+)`(?: - at `\$([^`]*)`)?$")
_AT = re.compile(r"^(.*) - at `\$([^`]*)`$")


def path_message(msg: str, root: str = "$") -> str:
    """msgspec's ValidationError text rewritten as ``<root><path>: <reason>``.

    ``"Expected `int`, got `str` - at `$.slurm.pollInterval`"`` becomes
    ``"$.slurm.pollInterval: Expected `int`, got `str`"``; unknown and missing fields become
    ``"<path>.<field>: unknown key"`` / ``"<path>.<field>: required"``. ``root`` replaces the
    leading ``$`` (e.g. ``$.request.object`` for a nested document decoded on its own).
    """
    if m := _UNKNOWN.match(msg):
        return f"{root}{m.group(2) or ''}.{m.group(1)}: unknown key"
    if m := _MISSING.match(msg):
        return f"{root}{m.group(2) or ''}.{m.group(1)}: required"
    if m := _AT.match(msg):
        return f"{root}{m.group(2)}: {m.group(1)}"
    return f"{root}: {msg}"
