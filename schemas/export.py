"""JSON Schema for every observation kind and the action records (``slurmbridge schema export``).

Programs in other languages subscribe to ``bridge.obs.>`` / ``bridge.act.>`` with these
schemas; ``schemas/jsonschema/`` holds the checked-in output and a test fails when it is stale.
Each file carries, besides the shapes msgspec derives, what a subscriber must know that a shape
cannot say (docs/subscribing.md tells the same at length): the subject the message arrives on,
how the key is encoded into it, tombstones, units, and ``Nats-Msg-Id``.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import msgspec

from schemas.actions import ActionRecord, DeadLetter
from schemas.events import KINDS

#: How an object key becomes the last subject token (schemas.subjects.encode_key).
KEY_ENCODING = (
    "The key is encoded into one subject token: '/' becomes '~', every byte of its UTF-8 "
    "encoding outside [A-Za-z0-9_-:=@+,] becomes %XX (upper-case hex; '.', '~' and '%' "
    "included), everything else is kept; decoding inverts it exactly (ns/name -> ns~name, "
    "a.b -> a%2Eb). The payload's own `key` field holds the key unencoded."
)

_OBSERVATION = (
    "An observation, JSON-encoded, on subject bridge.obs.<source>.{kind}.<encoded key> of "
    "stream BRIDGE_OBS (the last 32 messages per subject, 7 days by default). "
    + KEY_ENCODING
    + " `op` is 'observed' (a snapshot of the object) or 'deleted' (a tombstone: the object is "
    "gone, and every field but the envelope keeps its default). The header Nats-Msg-Id "
    "identifies the observation (a retried publish carries the same id, and JetStream drops "
    "such a duplicate within 2 minutes). Decode by the subject's kind "
    "token; fields may be added in later versions (with defaults), never renamed or retyped."
)

_ENVELOPE = {
    "kind": "The kind, also the fourth subject token.",
    "source": "Who observed it: 'k8s' (the Kubernetes watchers) or 'slurm:<cluster>' (the "
    "poller of Slurm cluster <cluster>); also the third subject token.",
    "key": "The object key, unencoded: a name (nodes, Slurm objects) or namespace/name; the "
    "subject's last token is its encoding.",
    "op": "'observed' (a snapshot) or 'deleted' (a tombstone: only the envelope is set).",
    "observed_at": "When the producer saw it: UTC nanoseconds since the Unix epoch.",
    "version": "Kubernetes resourceVersion, or a content hash of the Slurm object; equal "
    "versions mean equal content.",
    "producer": "Id of the producer instance (host, pid, start generation).",
}

_RECORDS = {
    "ActionRecord": (
        "What one effect did, JSON-encoded, on subject "
        "bridge.act.<reconciler>.<key_kind>.<encoded key> of stream BRIDGE_ACT (30 days). "
        + KEY_ENCODING
        + " Each record has a unique Nats-Msg-Id (a retried publish is stored once).",
        {
            "at": "When the effect finished: UTC nanoseconds since the Unix epoch.",
            "cause_seq": "BRIDGE_OBS stream sequence of the observation that triggered the "
            "decision (0: a resync).",
            "view_seq": "The last BRIDGE_OBS sequence the deciding worker had applied (0: not "
            "recorded).",
            "decided_at": "The clock the decision saw: seconds since the Unix epoch (float).",
            "duration_s": "The effector's wall time, seconds.",
            "key": "The reconciled key, unencoded (the subject's last token is its encoding).",
            "key_kind": "The kind the key names; also the fourth subject token.",
            "lease_revision": "The fencing token of the worker's lease when it acted (0: no "
            "leases).",
        },
    ),
    "DeadLetter": (
        "A message a reconciler gave up on, JSON-encoded, on subject bridge.dlq.<reconciler> "
        "of stream BRIDGE_DLQ (30 days).",
        {
            "at": "When it was given up: UTC nanoseconds since the Unix epoch.",
            "data": "The original message payload, base64.",
            "subject": "The original message's subject (its key token still encoded).",
            "stream_seq": "The original message's BRIDGE_OBS stream sequence.",
        },
    ),
}


def _describe(schema: dict[str, Any], name: str, doc: str, fields: dict[str, str]) -> None:
    schema["description"] = doc
    props = schema.get("$defs", {}).get(name, {}).get("properties", {})
    for field, text in fields.items():
        if field in props:
            props[field]["description"] = text


def _cleandoc(node: Any) -> None:
    """Dedent every docstring-derived ``description`` in place (:func:`inspect.cleandoc`):
    msgspec 0.23 dedents class docstrings in its schemas and 0.22 did not, so without this
    the checked-in files would depend on which msgspec is installed."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "description" and isinstance(v, str):
                node[k] = inspect.cleandoc(v)
            else:
                _cleandoc(v)
    elif isinstance(node, list):
        for v in node:
            _cleandoc(v)


def json_schemas() -> dict[str, dict[str, Any]]:
    """File name → JSON Schema document (draft 2020-12), one per kind plus the records."""
    out: dict[str, dict[str, Any]] = {}
    for name, cls in {**KINDS, "ActionRecord": ActionRecord, "DeadLetter": DeadLetter}.items():
        schema = msgspec.json.schema(cls)
        _cleandoc(schema)
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["title"] = name
        if name in _RECORDS:
            _describe(schema, name, *_RECORDS[name])
        else:
            _describe(schema, name, _OBSERVATION.format(kind=name), _ENVELOPE)
        out[f"{name}.json"] = schema
    return out


def render(schema: dict[str, Any]) -> str:
    """Stable text for a schema file (sorted keys, trailing newline)."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
