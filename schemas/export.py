"""JSON Schema for every observation kind and the action records (``slurmbridge schema export``).

Programs in other languages subscribe to ``bridge.obs.>`` / ``bridge.act.>`` with these
schemas; ``schemas/jsonschema/`` holds the checked-in output and a test fails when it is stale.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from schemas.actions import ActionRecord, DeadLetter
from schemas.events import KINDS


def json_schemas() -> dict[str, dict[str, Any]]:
    """File name → JSON Schema document (draft 2020-12), one per kind plus the records."""
    out: dict[str, dict[str, Any]] = {}
    for name, cls in {**KINDS, "ActionRecord": ActionRecord, "DeadLetter": DeadLetter}.items():
        schema = msgspec.json.schema(cls)
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["title"] = name
        out[f"{name}.json"] = schema
    return out


def render(schema: dict[str, Any]) -> str:
    """Stable text for a schema file (sorted keys, trailing newline)."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
