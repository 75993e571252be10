"""NodeSet revisions: the data a ControllerRevision stores and its hash (pure).

Who calls it: the NodeSet producer (``producers/kube/translate.py``: each observation carries
the hash of its spec's revision, so the pure ``nodeset`` reconciler can tell new pods from
old) and the NodeSet effector (it labels pods and creates ControllerRevisions from the
NodeSet it reads, so a pod's label always names the template it was built from).

Sources:

* The data is a patch that re-applies the spec's template and the fields slurm-operator 1.x
  stores beside it (internal/controller/nodeset/nodeset_history.go ``getPatch``): ``spec``
  with ``template`` (``"$patch": "replace"``), ``ordinalPadding``, ``oversubscribeNode``,
  and when present and not empty ``slurmd``, ``logfile``, ``ssh`` (each ``"$patch":
  "replace"``) and ``extraConf`` (1.x's ``omitzero`` fields). Encoded as Go's
  ``json.Marshal`` of a map: keys sorted, no blanks, ``<``, ``>``, ``&``, U+2028 and
  U+2029 escaped.
* The hash is Kubernetes' pkg/controller/history ``HashControllerRevision``: 32-bit FNV-1
  over the data, then the collision count in decimal when there is one, printed in decimal
  and mapped through apimachinery ``rand.SafeEncodeString``; the name is
  ``ControllerRevisionName``: ``<nodeset>-<hash>`` (prefix cut to 223 bytes).

The bytes hashed are this reading of the object, not 1.x's typed Go struct (which also
writes the zero values of fields it knows), so a hash equals 1.x's only where both encode
the same bytes: pods labelled by slurm-operator are treated as an older revision and are
rolled once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

#: apimachinery pkg/util/rand: the alphabet ``SafeEncodeString`` maps each byte into
#: (no vowels, no 0/1/3: no bad words, no look-alikes).
_SAFE: Final = "bcdfghjklmnpqrstvwxz2456789"
_FNV_OFFSET: Final = 0x811C9DC5
_FNV_PRIME: Final = 0x01000193
_MAX_PREFIX: Final = 223
#: Fields outside the template that 1.x's patch replaces as a whole when present.
_REPLACED: Final = ("slurmd", "logfile", "ssh")
_ENCODER: Final = msgspec.json.Encoder(order="sorted")
#: Go's encoding/json escapes these inside strings (HTML safety, JavaScript line breaks).
_GO_ESCAPES: Final = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def revision_data(spec: Mapping[str, Any]) -> bytes:
    """The patch a ControllerRevision of a NodeSet with ``spec`` (decoded JSON) stores."""
    template = dict(spec.get("template") or {})
    template["$patch"] = "replace"
    out: dict[str, Any] = {
        "template": template,
        "ordinalPadding": int(spec.get("ordinalPadding") or 0),
        "oversubscribeNode": bool(spec.get("oversubscribeNode") or False),
    }
    for name in _REPLACED:
        value = spec.get(name)
        if isinstance(value, dict) and value:
            out[name] = {**value, "$patch": "replace"}
    if isinstance(spec.get("extraConf"), str) and spec["extraConf"]:
        out["extraConf"] = spec["extraConf"]
    data = _ENCODER.encode({"spec": out})
    for raw, escaped in _GO_ESCAPES:
        data = data.replace(raw, escaped)
    return data


def fnv1_32(data: bytes) -> int:
    """32-bit FNV-1 (Go's ``hash/fnv.New32``: multiply, then xor)."""
    h = _FNV_OFFSET
    for byte in data:
        h = (h * _FNV_PRIME) & 0xFFFFFFFF
        h ^= byte
    return h


def safe_encode(text: str) -> str:
    """apimachinery ``rand.SafeEncodeString``: each byte mapped into :data:`_SAFE`."""
    return "".join(_SAFE[b % len(_SAFE)] for b in text.encode())


def revision_hash(data: bytes, collision_count: int | None = None) -> str:
    """The revision's hash (``HashControllerRevision``): ``collision_count`` is the
    NodeSet's ``status.collisionCount`` (1.x always passes one, 0 when unset)."""
    probe = b"" if collision_count is None else str(collision_count).encode()
    return safe_encode(str(fnv1_32(data + probe)))


def spec_revision_hash(spec: Mapping[str, Any], collision_count: int = 0) -> str:
    """:func:`revision_hash` of :func:`revision_data` of ``spec``."""
    return revision_hash(revision_data(spec), collision_count)


def revision_name(nodeset: str, hash_: str) -> str:
    """``<nodeset>-<hash>``, the prefix cut to 223 bytes (``ControllerRevisionName``)."""
    return f"{nodeset[:_MAX_PREFIX]}-{hash_}"
