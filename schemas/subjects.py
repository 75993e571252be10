"""Subject grammar and the one reversible encoding of object keys into a subject token.

Subjects::

    bridge.obs.<source>.<kind>.<key>          observations    (stream BRIDGE_OBS)
    bridge.act.<reconciler>.<kind>.<key>      action records  (stream BRIDGE_ACT)
    bridge.dlq.<reconciler>                   dead letters    (stream BRIDGE_DLQ)

A NATS subject token may not contain ``.``, ``*``, ``>`` or white space, but Kubernetes node
names are often FQDNs and namespaced keys contain ``/``. :func:`encode_key` maps any non-empty
string to one token and :func:`decode_key` inverts it exactly: ``/`` becomes ``~`` (namespaced
keys stay readable in ``nats sub`` output), every byte outside ``[A-Za-z0-9_-:=@+,]`` becomes
``%XX`` of its UTF-8 encoding (``.``, ``~`` and ``%`` included, so the mapping is a bijection).
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

PREFIX: Final = "bridge"
OBS: Final = "obs"
ACT: Final = "act"
DLQ: Final = "dlq"

_SAFE: Final = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-:=@+,")
_HEX: Final = "0123456789ABCDEF"
#: A key of safe characters and ``/`` only, and its token (``/`` as ``~``): no escape.
_PLAIN: Final = re.compile(r"[A-Za-z0-9_\-:=@+,/]+")
_PLAIN_TOKEN: Final = re.compile(r"[A-Za-z0-9_\-:=@+,~]+")


def encode_key(key: str) -> str:
    """Encode an object key (``name`` or ``namespace/name``) as one subject token.

    Raises:
        ValueError: ``key`` is empty (an empty token is not a valid subject).
    """
    if not key:
        raise ValueError("key: must not be empty")
    if _PLAIN.fullmatch(key):
        # Fast path: node names and namespaced pod keys (each pod observation is encoded
        # once and parsed by every consumer it reaches; the byte loop below was 1 % of the
        # bridge's samples at 200 pods/s).
        return key.replace("/", "~")
    out: list[str] = []
    for byte in key.encode("utf-8"):
        if byte in _SAFE:
            out.append(chr(byte))
        elif byte == 0x2F:  # "/"
            out.append("~")
        else:
            out.append("%" + _HEX[byte >> 4] + _HEX[byte & 0xF])
    return "".join(out)


def decode_key(token: str) -> str:
    """Invert :func:`encode_key`.

    Raises:
        ValueError: ``token`` is empty, has a malformed ``%XX`` escape, a character or an
            escape that :func:`encode_key` never emits (``%41`` for ``A``, ``%2F`` for ``/``:
            each key has exactly one token), or does not decode to UTF-8.
    """
    if not token:
        raise ValueError("key token: must not be empty")
    if _PLAIN_TOKEN.fullmatch(token):
        return token.replace("~", "/")
    buf = bytearray()
    i = 0
    n = len(token)
    while i < n:
        c = token[i]
        if c == "%":
            pair = token[i + 1 : i + 3]
            if len(pair) != 2 or any(h not in _HEX for h in pair):
                raise ValueError(f"key token {token!r}: malformed escape at offset {i}")
            byte = int(pair, 16)
            if byte in _SAFE or byte == 0x2F:  # never escaped: one token per key
                raise ValueError(f"key token {token!r}: needless escape at offset {i}")
            buf.append(byte)
            i += 3
            continue
        if c == "~":
            buf.append(0x2F)
        elif ord(c) in _SAFE:
            buf.append(ord(c))
        else:
            raise ValueError(f"key token {token!r}: character {c!r} is never encoded")
        i += 1
    try:
        return buf.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"key token {token!r}: not UTF-8 after decoding") from exc


def _check_token(name: str, value: str) -> str:
    if not value or any(c in value for c in ".*> \t\r\n"):
        raise ValueError(f"{name} {value!r}: must be one non-empty subject token")
    return value


def obs_subject(source: str, kind: str, key: str) -> str:
    """``bridge.obs.<source>.<kind>.<key>`` for one observed object."""
    return f"{PREFIX}.{OBS}.{_check_token('source', source)}.{kind}.{encode_key(key)}"


def obs_filter(source: str = "*", kind: str = "*") -> str:
    """Filter subject for the observations of one source and/or kind (``*`` = any)."""
    return f"{PREFIX}.{OBS}.{source}.{kind}.*"


def act_subject(reconciler: str, kind: str, key: str) -> str:
    """``bridge.act.<reconciler>.<kind>.<key>`` for an action record."""
    return f"{PREFIX}.{ACT}.{_check_token('reconciler', reconciler)}.{kind}.{encode_key(key)}"


def act_filter(reconciler: str = "*", kind: str = "*", key: str | None = None) -> str:
    """Filter subject for action records (``*`` = any; ``key`` is encoded when given)."""
    return f"{PREFIX}.{ACT}.{reconciler}.{kind}.{'*' if key is None else encode_key(key)}"


def dlq_subject(reconciler: str) -> str:
    """``bridge.dlq.<reconciler>`` for dead-letter records."""
    return f"{PREFIX}.{DLQ}.{_check_token('reconciler', reconciler)}"


class ParsedSubject(NamedTuple):
    """A parsed observation or action subject: ``middle`` is the source or the reconciler."""

    family: str
    middle: str
    kind: str
    key: str


def parse_subject(subject: str) -> ParsedSubject:
    """Split an observation or action subject into its parts, decoding the key.

    Raises:
        ValueError: the subject is not ``bridge.(obs|act).<x>.<kind>.<key>``.
    """
    parts = subject.split(".")
    if len(parts) != 5 or parts[0] != PREFIX or parts[1] not in (OBS, ACT):
        raise ValueError(f"subject {subject!r}: expected bridge.(obs|act).<x>.<kind>.<key>")
    return ParsedSubject(parts[1], parts[2], parts[3], decode_key(parts[4]))


def family_of(subject: str) -> str | None:
    """The family token of a subject or subject filter — :data:`OBS`, :data:`ACT` or
    :data:`DLQ` for ``bridge.<family>…`` — else None (not ours, or a wildcard there)."""
    prefix, _, rest = subject.partition(".")
    family = rest.partition(".")[0]
    return family if prefix == PREFIX and family in (OBS, ACT, DLQ) else None


def slurm_source(cluster: str) -> str:
    """The ``source`` token of observations from one Slurm cluster: ``slurm:<cluster>``."""
    return "slurm:" + _check_token("cluster", cluster)


KUBE_SOURCE: Final = "k8s"
