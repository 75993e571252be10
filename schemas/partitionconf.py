"""A NodeSet's ``spec.partition.config``: slurm.conf partition ``Key=Value`` words, parsed.

slurm-operator 1.x appends ``config`` verbatim to ``PartitionName=<nodeset> Nodes=<nodeset>``
in slurm.conf (internal/builder/controllerbuilder/controller_config.go ``buildNodeSetConf``).
slurmbridge writes no slurm.conf; it creates the partition through slurmrestd v0.0.45's
``POST partitions/``, whose ``partition_info`` body has a field for most slurm.conf
partition keys. :func:`parse` keeps the keys with such a field (:data:`KINDS`, keys as
slurm.conf spells them; matched case-insensitively, as slurmctld's parser does) and returns
the others, and the values it cannot read, as problems naming the key.

Value forms (slurm.conf(5), PARTITION CONFIGURATION):

* ``minutes`` — a time: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S`` or
  ``UNLIMITED``/``INFINITE``; normalised to whole minutes (seconds round up, as Slurm's
  ``time_str2mins``) or ``INFINITE``.
* ``count`` — a non-negative integer or ``UNLIMITED``/``INFINITE`` (normalised to ``INFINITE``).
* ``int`` — a non-negative integer.
* ``list`` — a comma-separated list, kept as written.
* ``yesno`` — ``YES`` or ``NO`` (upper-cased).
* ``enum`` — one of the key's words (:data:`ENUMS`), upper-cased; ``PreemptMode`` takes a
  comma-separated list of them.
* ``oversubscribe`` — ``NO``, ``EXCLUSIVE``, ``YES[:N]`` or ``FORCE[:N]`` (upper-cased).
"""

from __future__ import annotations

import re
from typing import Final

#: slurm.conf partition key → value form. Every key here has a ``partition_info`` field in
#: slurmrestd v0.0.45 (slurmbridge.slurm.codecs.v0045 ``PARTITION_FIELDS``).
KINDS: Final[dict[str, str]] = {
    "AllowAccounts": "list",
    "AllowGroups": "list",
    "AllowQos": "list",
    "Alternate": "list",
    "DefaultTime": "minutes",
    "DefMemPerCPU": "int",
    "DefMemPerNode": "int",
    "Default": "yesno",
    "DenyAccounts": "list",
    "DenyQos": "list",
    "GraceTime": "int",
    "Hidden": "yesno",
    "LLN": "yesno",
    "MaxCPUsPerNode": "count",
    "MaxCPUsPerSocket": "count",
    "MaxMemPerCPU": "count",
    "MaxMemPerNode": "count",
    "MaxNodes": "count",
    "MaxTime": "minutes",
    "MinNodes": "int",
    "OverSubscribe": "oversubscribe",
    "OverTimeLimit": "count",
    "PreemptMode": "enum",
    "PriorityJobFactor": "int",
    "PriorityTier": "int",
    "QOS": "list",
    "ReqResv": "yesno",
    "RootOnly": "yesno",
    "State": "enum",
    "DisableRootJobs": "yesno",
}
#: The words an ``enum`` key takes (v0.0.45's ``preempt_mode`` and ``partition.state`` enums).
ENUMS: Final[dict[str, frozenset[str]]] = {
    # v0.0.45's preempt_mode enum has no GANG or WITHIN (OFF is its DISABLED).
    "PreemptMode": frozenset({"OFF", "CANCEL", "REQUEUE", "SUSPEND"}),
    "State": frozenset({"UP", "DOWN", "DRAIN", "INACTIVE"}),
}
_BY_LOWER: Final = {k.lower(): k for k in KINDS}
_TIME: Final = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_INFINITE: Final = frozenset({"UNLIMITED", "INFINITE"})
INFINITE: Final = "INFINITE"


def minutes(text: str) -> str | None:
    """A slurm.conf time as whole minutes (``"90"``) or ``INFINITE``; ``None`` unreadable.

    Slurm's ``time_str2mins`` (src/common/parse_time.c): ``M``, ``M:S``, ``H:M:S``, ``D-H``,
    ``D-H:M``, ``D-H:M:S``; seconds round up to a minute.
    """
    if text.upper() in _INFINITE:
        return INFINITE
    m = _TIME.match(text)
    if m is None:
        return None
    d, a, b, c = m.groups()
    days = int(d) if d else 0
    if d is not None:  # D-H, D-H:M, D-H:M:S
        hours, mins, secs = int(a), int(b or 0), int(c or 0)
    elif c is not None:  # H:M:S
        hours, mins, secs = int(a), int(b), int(c)
    elif b is not None:  # M:S
        hours, mins, secs = 0, int(a), int(b)
    else:  # M
        hours, mins, secs = 0, int(a), 0
    total = ((days * 24 + hours) * 60 + mins) * 60 + secs
    return str((total + 59) // 60)


def _value(key: str, raw: str) -> str | None:
    kind = KINDS[key]
    up = raw.upper()
    if kind == "minutes":
        return minutes(raw)
    if kind == "count":
        if up in _INFINITE:
            return INFINITE
        return raw if raw.isdigit() else None
    if kind == "int":
        return raw if raw.isdigit() else None
    if kind == "list":
        return raw or None
    if kind == "yesno":
        return up if up in ("YES", "NO") else None
    if kind == "enum":
        words = up.split(",")
        ok = ENUMS[key]
        if not all(w in ok for w in words) or (key == "State" and len(words) != 1):
            return None
        return up
    # oversubscribe
    mode, _, jobs = up.partition(":")
    if mode in ("NO", "EXCLUSIVE") and not jobs:
        return mode
    if mode in ("YES", "FORCE") and (not jobs or jobs.isdigit()):
        return up
    return None


def parse(config: str) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """``(settings, problems)`` of a partition config line.

    ``settings``: ``(Key, value)`` pairs, keys spelled as :data:`KINDS`, values normalised
    (module doc), sorted by key; a key given twice keeps its last value (slurm.conf's rule).
    ``problems``: ``(word, why)`` for each word that is not ``Key=Value``, names a key with no
    REST field (``PartitionName`` and ``Nodes`` included: slurmbridge sets those), or has an
    unreadable value. Never raises.
    """
    settings: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for word in config.split():
        key, sep, raw = word.partition("=")
        if not sep or not key:
            problems.append((word, "is not Key=Value"))
            continue
        known = _BY_LOWER.get(key.lower())
        if known is None:
            problems.append((key, "has no slurmrestd partition field"))
            continue
        value = _value(known, raw)
        if value is None:
            problems.append((known, f"value {raw!r} is not a valid {KINDS[known]}"))
            continue
        settings[known] = value
    return tuple(sorted(settings.items())), tuple(problems)
