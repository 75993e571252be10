"""One Kubernetes client (issue 31): outside ``slurmbridge/kube/`` and devtools no module
imports ``kubernetes_asyncio`` (the import-linter contract in pyproject.toml says the same;
this test reads the source so that it fails under plain pytest too)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schemas", "producers", "reconcilers", "slurmbridge")
ALLOWED = ("slurmbridge/kube/", "slurmbridge/devtools/")


def _imports_kubernetes_asyncio(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        if any(n == "kubernetes_asyncio" or n.startswith("kubernetes_asyncio.") for n in names):
            return True
    return False


def test_only_slurmbridge_kube_imports_kubernetes_asyncio() -> None:
    offenders = sorted(
        rel
        for pkg in PACKAGES
        for path in (ROOT / pkg).rglob("*.py")
        if not (rel := path.relative_to(ROOT).as_posix()).startswith(ALLOWED)
        and _imports_kubernetes_asyncio(path)
    )
    assert offenders == []
