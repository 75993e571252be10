#!/usr/bin/env python3
"""Regenerate slurmbridge/devtools/sim/kubeproto_fields.json from Kubernetes' generated.proto.

Usage: scripts/gen-kube-proto-table.py API_CHECKOUT APIMACHINERY_CHECKOUT

API_CHECKOUT is a checkout of k8s.io/api (github.com/kubernetes/api), APIMACHINERY_CHECKOUT
one of k8s.io/apimachinery. The table keeps, for each message reachable from the kinds the
simulator decodes from protobuf (ROOTS), its field numbers with name, cardinality and type:
the wire facts of the kubectl 1.37 request bodies, not the .proto text.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOTS = (
    "k8s.io.api.core.v1.Namespace",
    "k8s.io.api.core.v1.ConfigMap",
    "k8s.io.api.core.v1.Secret",
    "k8s.io.api.core.v1.Pod",
    "k8s.io.api.core.v1.Service",
    "k8s.io.api.batch.v1.Job",
    "k8s.io.api.batch.v1.CronJob",
    "k8s.io.api.apps.v1.Deployment",
)
FILES = {
    "api": ("core/v1", "batch/v1", "apps/v1", "scheduling/v1alpha3"),
    "apimachinery": (
        "pkg/apis/meta/v1",
        "pkg/api/resource",
        "pkg/util/intstr",
        "pkg/runtime",
        "pkg/runtime/schema",
    ),
}
FIELD = re.compile(r"^\s*(optional|repeated)\s+(\S+)\s+(\w+)\s*=\s*(\d+)\s*;")
MAP = re.compile(r"^\s*map<\s*string\s*,\s*(\S+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")
SCALARS = {"string", "bytes", "bool", "int32", "int64", "double", "float", "uint32", "uint64"}


def parse(path: Path, messages: dict[str, dict[str, list[str]]]) -> None:
    package = ""
    current: dict[str, list[str]] | None = None
    for line in path.read_text().splitlines():
        if m := re.match(r"^package\s+([\w.]+);", line):
            package = m.group(1)
        elif m := re.match(r"^message\s+(\w+)\s*\{", line):
            current = messages.setdefault(f"{package}.{m.group(1)}", {})
        elif line.startswith("}"):
            current = None
        elif current is not None and (m := FIELD.match(line)):
            kind, typ, name, num = m.groups()
            current[num] = [name, "rep" if kind == "repeated" else "opt", qualify(typ, package)]
        elif current is not None and (m := MAP.match(line)):
            typ, name, num = m.groups()
            current[num] = [name, "map", qualify(typ, package)]


def qualify(typ: str, package: str) -> str:
    if typ in SCALARS:
        return typ
    return typ[1:] if typ.startswith(".") else f"{package}.{typ}"


def main() -> None:
    api, machinery = Path(sys.argv[1]), Path(sys.argv[2])
    messages: dict[str, dict[str, list[str]]] = {}
    for sub in FILES["api"]:
        parse(api / sub / "generated.proto", messages)
    for sub in FILES["apimachinery"]:
        parse(machinery / sub / "generated.proto", messages)
    keep: dict[str, dict[str, list[str]]] = {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep[name] = messages[name]
        todo.extend(t for _, _, t in keep[name].values() if t not in SCALARS)
    out = Path(__file__).resolve().parent.parent / "slurmbridge/devtools/sim/kubeproto_fields.json"
    text = json.dumps(dict(sorted(keep.items())), sort_keys=True, separators=(",", ":"))
    out.write_text(text + "\n")
    sys.stdout.write(f"{out}: {len(keep)} messages\n")


if __name__ == "__main__":
    main()
