"""The rules the code refers to live in the repository, and every reference resolves.

* No comment or docstring points to a design document the repository does not hold
  (a "DESIGN" section sign): the rules are in docs/architecture.md.
* Every ``docs/<page>.md "Heading"`` reference names a heading that page has.
* Every Sphinx role in a docstring (``:func:`…```, ``:class:`…```, ``:mod:`…```, ``:meth:`…```
  …) names something that exists: a dotted name from one of the project's packages imports
  and resolves attribute by attribute; a bare name resolves in its module, in one of the
  module's classes, as an instance attribute or Struct field assigned there, as a builtin or
  as a module.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("slurmbridge", "schemas", "reconcilers", "producers")
ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|exc|obj):`~?([A-Za-z_][\w.]*)`")
DOC_REF = re.compile(r'(docs/[\w-]+\.md):? ((?:"[^"\n]+"(?:, )?)+)')
DESIGN_REF = re.compile(r"DESIGN(?:\.md)? ?§")


def _sources(*, devtools: bool = True) -> list[Path]:
    out = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    out += [*list((ROOT / "tests").rglob("*.py")), ROOT / "pyproject.toml"]
    out += [*list((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    return [p for p in out if devtools or "devtools" not in p.parts]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _headings(page: Path) -> set[str]:
    return {
        line.lstrip("#").strip()
        for line in page.read_text().splitlines()
        if line.startswith("#") and not line.startswith("#!")
    }


def _qualified(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for part in parts[i:]:
                obj = getattr(obj, part)
        except AttributeError:
            return False
        return True
    return False


def _bare(name: str, module: ModuleType) -> bool:
    first = name.split(".")[0]
    scopes: list[object] = [module, builtins]
    scopes += [
        c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__
    ]
    for scope in scopes:
        obj = scope
        try:
            for part in name.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            continue
        return True
    source = inspect.getsource(module)
    if re.search(rf"self\.{first}\s*[:=]|^\s+{first}\s*:", source, re.MULTILINE):
        return True
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def test_no_reference_to_a_design_document_the_repository_does_not_hold() -> None:
    this = Path(__file__).resolve()
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in _sources()
        if p != this
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if DESIGN_REF.search(line)
    ]
    assert not found, f"point these to docs/architecture.md instead: {found}"


def test_every_docs_heading_reference_names_a_heading_of_that_page() -> None:
    bad: list[str] = []
    seen = 0
    for path in _sources():
        for m in DOC_REF.finditer(path.read_text()):
            page = ROOT / m.group(1)
            if not page.exists():
                bad.append(f"{path.relative_to(ROOT)}: {m.group(1)} does not exist")
                continue
            headings = _headings(page)
            for title in re.findall(r'"([^"\n]+)"', m.group(2)):
                seen += 1
                if title not in headings:
                    bad.append(f'{path.relative_to(ROOT)}: {m.group(1)} has no heading "{title}"')
    assert seen >= 10, "the pattern no longer finds the references it was written for"
    assert not bad, "\n".join(bad)


def test_every_docstring_role_resolves() -> None:
    bad: list[str] = []
    seen = 0
    for path in _sources(devtools=False):
        if path.suffix != ".py" or path.parts[len(ROOT.parts)] not in PACKAGES:
            continue
        text = path.read_text()
        refs = ROLE.findall(text)
        if not refs:
            continue
        module = importlib.import_module(_module_name(path))
        for name in refs:
            seen += 1
            ok = _qualified(name) if name.split(".")[0] in PACKAGES else _bare(name, module)
            if not ok:
                bad.append(f"{path.relative_to(ROOT)}: {name}")
    assert seen >= 100, "the pattern no longer finds the references it was written for"
    assert not bad, "these docstring references name nothing:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("name", "module", "resolves"),
    [
        ("slurmbridge.runtime.gate.ListingGate", None, True),
        ("slurmbridge.runtime.gate.NoSuchThing", None, False),
        ("schemas.events.tombstone", None, True),
        ("tombstone", "schemas.events", True),
        ("encode_applied", "reconcilers._devprofile", False),
        ("repr", "schemas.events", True),
    ],
)
def test_the_resolver_tells_a_name_from_no_name(
    name: str, module: str | None, resolves: bool
) -> None:
    got = _qualified(name) if module is None else _bare(name, importlib.import_module(module))
    assert got is resolves
