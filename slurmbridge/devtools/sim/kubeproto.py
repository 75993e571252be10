"""Decode the Kubernetes protobuf request bodies kubectl sends into the JSON objects the simulator
stores.

kubectl ≥ 1.3x writes built-in kinds through typed clients with ``Content-Type:
application/vnd.kubernetes.protobuf`` (``kubectl create namespace|job|deployment|configmap``
…); a real API server decodes them (apimachinery ``runtime/serializer/protobuf``), so the
simulator must too. The body is the 4-byte magic ``k8s\\x00`` and a ``runtime.Unknown``
(``typeMeta`` = 1 {``apiVersion`` = 1, ``kind`` = 2}, ``raw`` = 2, the object's message),
apimachinery pkg/runtime/serializer/protobuf/protobuf.go. Messages are proto2 as gogo-protobuf
writes them: every non-pointer field is present even when zero, maps are repeated
``{1: key, 2: value}`` entries, and a handful of apimachinery types have their own JSON form
(``Time``, ``Quantity``, ``IntOrString``, ``RawExtension``, ``FieldsV1``).

The field table (``kubeproto_fields.json``) is generated from k8s.io/api and
k8s.io/apimachinery ``generated.proto`` by ``scripts/gen-kube-proto-table.py``; it covers the
kinds in :data:`KINDS`. Zero values are dropped as Go's ``omitempty`` JSON would drop them,
except for the pointer fields whose zero is not the default (:data:`_POINTER_ZERO`).
"""

from __future__ import annotations

import base64
import json
import struct
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any, Final

MAGIC: Final = b"k8s\x00"
#: The media type (without parameters).
MEDIA_TYPE: Final = "application/vnd.kubernetes.protobuf"

_PACKAGES: Final = {
    "v1": "k8s.io.api.core.v1",
    "batch/v1": "k8s.io.api.batch.v1",
    "apps/v1": "k8s.io.api.apps.v1",
}
#: (apiVersion, kind) pairs this module decodes.
KINDS: Final = frozenset(
    {
        ("v1", "Namespace"),
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "Pod"),
        ("v1", "Service"),
        ("batch/v1", "Job"),
        ("batch/v1", "CronJob"),
        ("apps/v1", "Deployment"),
    }
)
_META: Final = "k8s.io.apimachinery.pkg.apis.meta.v1."
#: Go pointer fields whose zero differs from "unset" (k8s.io/api types.go ``*int32``…).
_POINTER_ZERO: Final = frozenset(
    {
        "replicas",
        "parallelism",
        "completions",
        "backoffLimit",
        "terminationGracePeriodSeconds",
        "revisionHistoryLimit",
        "progressDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    }
)


_SCALARS: Final = frozenset(
    {"string", "bytes", "bool", "int32", "int64", "double", "float", "uint32", "uint64"}
)


class ProtobufError(ValueError):
    """The body is not a Kubernetes protobuf object this module decodes (message says why)."""


@cache
def _fields() -> dict[str, dict[str, list[str]]]:
    text = resources.files(__package__).joinpath("kubeproto_fields.json").read_text()
    table: dict[str, dict[str, list[str]]] = json.loads(text)
    return table


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def _wire(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, raw value) in order: int for varints/fixed, bytes for
    length-delimited."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        value: Any
        if wt == 0:
            value, pos = _varint(buf, pos)
        elif wt == 2:
            size, pos = _varint(buf, pos)
            if pos + size > len(buf):
                raise ProtobufError("truncated field")
            value, pos = buf[pos : pos + size], pos + size
        elif wt == 1:
            value, pos = int.from_bytes(buf[pos : pos + 8], "little"), pos + 8
        elif wt == 5:
            value, pos = int.from_bytes(buf[pos : pos + 4], "little"), pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wt}")
        out.append((num, wt, value))
    return out


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _scalar(typ: str, wt: int, value: Any) -> Any:
    if typ == "string":
        return bytes(value).decode()
    if typ == "bytes":
        return base64.b64encode(bytes(value)).decode()
    if typ == "bool":
        return bool(value)
    if typ in ("int32", "int64"):
        return _signed(value & (1 << 64) - 1, 64)
    if typ in ("uint32", "uint64"):
        return value
    if typ == "double" and wt == 1:
        return struct.unpack("<d", value.to_bytes(8, "little"))[0]
    raise ProtobufError(f"unsupported scalar {typ}")


def _packed(typ: str, data: bytes) -> list[Any]:
    out: list[Any] = []
    pos = 0
    while pos < len(data):
        value, pos = _varint(data, pos)
        out.append(_scalar(typ, 0, value))
    return out


def _special(typ: str, data: bytes) -> tuple[bool, Any]:
    """The JSON form of apimachinery's types with custom marshalling."""
    if typ in (_META + "Time", _META + "MicroTime"):
        parts = {n: v for n, _, v in _wire(data)}
        seconds, nanos = _signed(parts.get(1, 0), 64), parts.get(2, 0)
        if not seconds and not nanos:
            return True, None
        stamp = datetime.fromtimestamp(seconds, UTC)
        if typ.endswith("MicroTime"):
            return True, stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{nanos // 1000:06d}Z"
        return True, stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    if typ == _META + "Duration":
        parts = {n: v for n, _, v in _wire(data)}
        return True, f"{_signed(parts.get(1, 0), 64) / 1e9:g}s"
    if typ == "k8s.io.apimachinery.pkg.api.resource.Quantity":
        parts = {n: v for n, _, v in _wire(data)}
        return True, bytes(parts.get(1, b"")).decode() or None
    if typ == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        parts = {n: v for n, _, v in _wire(data)}
        if parts.get(1, 0) == 1:
            return True, bytes(parts.get(3, b"")).decode()
        return True, _signed(parts.get(2, 0), 64)
    if typ in ("k8s.io.apimachinery.pkg.runtime.RawExtension", _META + "FieldsV1"):
        parts = {n: v for n, _, v in _wire(data)}
        raw = bytes(parts.get(1, b""))
        return True, json.loads(raw) if raw.strip() else None
    return False, None


def _empty(name: str, value: Any) -> bool:
    if value is None or value in ("", {}, []):
        return True
    if isinstance(value, bool) and not value:
        return True
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and value == 0
        and (name not in _POINTER_ZERO)
    )


def _message(typ: str, data: bytes) -> Any:
    special, value = _special(typ, data)
    if special:
        return value
    fields = _fields().get(typ)
    if fields is None:
        raise ProtobufError(f"message {typ} is not in the simulator's protobuf table")
    out: dict[str, Any] = {}
    for num, wt, raw in _wire(data):
        field = fields.get(str(num))
        if field is None:
            raise ProtobufError(f"{typ}: unknown field number {num}")
        name, card, ftype = field
        if card == "map":
            entry = {n: (w, v) for n, w, v in _wire(raw)}
            key = bytes(entry.get(1, (2, b""))[1]).decode()
            w, v = entry.get(2, (2, b""))
            val = _scalar(ftype, w, v) if ftype in _SCALARS else _message(ftype, bytes(v))
            out.setdefault(name, {})[key] = val
            continue
        if ftype in _SCALARS:
            if card == "rep" and wt == 2 and ftype not in ("string", "bytes"):
                out.setdefault(name, []).extend(_packed(ftype, raw))
                continue
            item = _scalar(ftype, wt, raw)
        else:
            item = _message(ftype, bytes(raw))
        if card == "rep":
            out.setdefault(name, []).append(item)
        else:
            out[name] = item
    return {k: v for k, v in out.items() if not _empty(k, v)}


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object of a ``k8s\\x00``-framed protobuf body.

    Raises :class:`ProtobufError` when the frame is wrong, the kind is not one of
    :data:`KINDS` or a field is not in the table.
    """
    if not body.startswith(MAGIC):
        raise ProtobufError("the body does not start with the protobuf magic k8s\\x00")
    unknown = {n: v for n, _, v in _wire(body[len(MAGIC) :])}
    type_meta = {n: v for n, _, v in _wire(bytes(unknown.get(1, b"")))}
    api_version = bytes(type_meta.get(1, b"")).decode()
    kind = bytes(type_meta.get(2, b"")).decode()
    if (api_version, kind) not in KINDS:
        raise ProtobufError(f"{api_version} {kind} is not decoded from protobuf by the simulator")
    obj = _message(f"{_PACKAGES[api_version]}.{kind}", bytes(unknown.get(2, b"")))
    assert isinstance(obj, dict)
    return {"apiVersion": api_version, "kind": kind, **obj}
