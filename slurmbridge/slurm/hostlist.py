"""Slurm hostlist expressions: ``n[1-4,7],gpu[01-02]`` ⇄ ``n1 n2 n3 n4 n7 gpu01 gpu02``.

slurmrestd reports a partition's nodes as one compressed hostlist string; the client expands it
(:func:`expand`) so events carry plain names, and the simulator compresses its node lists the
way slurmctld prints them (:func:`compress`).

Grammar (as Slurm's ``hostlist_create`` accepts it): a comma-separated list of host
expressions, where commas inside brackets separate ranges, not hosts. A host expression is text
with zero or more bracket groups; each group is a comma-separated list of numbers or ``lo-hi``
ranges, and several groups in one expression multiply (``r[1-2]n[1-2]`` ⇒ ``r1n1 r1n2 r2n1
r2n2``). A range keeps the width of its lower bound, so ``gpu[01-10]`` is zero-padded to two
digits while ``n[1-10]`` is not. Order is kept and duplicates are dropped (Slurm's
``hostlist_uniq`` also sorts; we keep the server's order, which is already sorted).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from typing import Final

__all__ = ["HostlistError", "compress", "expand"]

#: An upper bound on one expansion, so a hostile ``n[0-999999999]`` cannot exhaust memory.
MAX_HOSTS: Final = 1_000_000

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_TAIL_NUMBER = re.compile(r"^(.*?)(\d+)$")


class HostlistError(ValueError):
    """A malformed hostlist expression (unbalanced bracket, bad range, too many hosts)."""


def _split_top(expr: str) -> list[str]:
    """Split at commas outside brackets."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested '[' in hostlist {expr!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in hostlist {expr!r}")
        elif ch == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"unbalanced '[' in hostlist {expr!r}")
    parts.append(expr[start:])
    return parts


def _expand_group(group: str, expr: str) -> list[str]:
    """``1-3,07`` ⇒ ``["1", "2", "3", "07"]``."""
    out: list[str] = []
    for item in group.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise HostlistError(f"bad range {item!r} in hostlist {expr!r}")
        lo_s, hi_s = m.group(1), m.group(2)
        lo = int(lo_s)
        hi = int(hi_s) if hi_s is not None else lo
        if hi < lo:
            raise HostlistError(f"descending range {item!r} in hostlist {expr!r}")
        if hi - lo >= MAX_HOSTS:
            raise HostlistError(f"range {item!r} in hostlist {expr!r} is too large")
        width = len(lo_s)
        out.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return out


def _expand_one(host: str, expr: str) -> list[str]:
    """Expand one host expression (possibly with several bracket groups)."""
    pieces = re.split(r"(\[[^\]]*\])", host)
    choices: list[list[str]] = []
    for piece in pieces:
        if piece.startswith("[") and piece.endswith("]"):
            choices.append(_expand_group(piece[1:-1], expr))
        elif "[" in piece or "]" in piece:
            raise HostlistError(f"unbalanced bracket in hostlist {expr!r}")
        else:
            choices.append([piece])
    total = 1
    for c in choices:
        total *= len(c)
        if total > MAX_HOSTS:
            raise HostlistError(f"hostlist {expr!r} expands to too many hosts")
    return ["".join(p) for p in itertools.product(*choices)]


def expand(expr: str | None) -> tuple[str, ...]:
    """Expand a Slurm hostlist expression into node names, in order, without duplicates.

    ``""``, ``None`` and Slurm's ``"(null)"`` give ``()``.

    Raises:
        HostlistError: the expression is malformed or expands to more than ``MAX_HOSTS`` names.
    """
    if expr is None:
        return ()
    expr = expr.strip()
    if not expr or expr == "(null)":
        return ()
    seen: dict[str, None] = {}
    for part in _split_top(expr):
        host = part.strip()
        if not host:
            continue
        for name in _expand_one(host, expr):
            seen.setdefault(name, None)
            if len(seen) > MAX_HOSTS:
                raise HostlistError(f"hostlist {expr!r} expands to too many hosts")
    return tuple(seen)


def compress(names: Iterable[str]) -> str:
    """Compress node names into a hostlist expression (``n1 n2 n3 n7`` ⇒ ``n[1-3,7]``).

    Names are grouped by their non-numeric prefix and the width of their numeric suffix, as
    Slurm prints them; a name without a numeric suffix stays as it is. Groups appear in order
    of first appearance, numbers within a group ascending. ``expand(compress(x))`` returns the
    names of ``x`` (grouped, sorted within each group).
    """
    groups: dict[tuple[str, int], list[int]] = {}
    plain: dict[str, None] = {}
    order: list[tuple[str, int] | str] = []
    for name in names:
        m = _TAIL_NUMBER.match(name)
        if not m:
            if name not in plain:
                plain[name] = None
                order.append(name)
            continue
        prefix, digits = m.group(1), m.group(2)
        # a zero-padded number keeps its width; an unpadded one (any length) groups together
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        key = (prefix, width)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(digits))
    out: list[str] = []
    for item in order:
        if isinstance(item, str):
            out.append(item)
            continue
        prefix, width = item
        numbers = sorted(set(groups[item]))
        if len(numbers) == 1:
            out.append(f"{prefix}{str(numbers[0]).zfill(width)}")
            continue
        ranges: list[str] = []
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            lo, hi = str(start).zfill(width), str(prev).zfill(width)
            ranges.append(lo if start == prev else f"{lo}-{hi}")
            if n is not None:
                start = prev = n
        out.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(out)
