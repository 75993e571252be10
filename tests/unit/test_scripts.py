"""scripts/test, the project's one check (issue 29 item 6): naming a test file runs just that
file after the same static checks; no argument (what ``.ci/run`` does) runs every tier.

The script runs in a copy of the checkout's layout whose ``.venv/bin`` tools only write their
arguments to a log: what is checked is which tools the script calls, and with what."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
TIERS = [
    "tests/unit",
    "tests/integration",
    "tests/e2e",
    "tests/chaos",
    "tests/real_slurm",
    "tests/real_kube",
]
TOOLS = ("python", "ruff", "mypy", "lint-imports", "slurmbridge", "pytest")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A directory laid out as the checkout, with recording tools."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "test", tmp_path / "scripts" / "test")
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    for tier in TIERS:
        (tmp_path / tier).mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "test_config.py").write_text("")
    (tmp_path / "tests" / "real_slurm" / "test_x.py").write_text("")
    fakes = [tmp_path / ".venv" / "bin" / tool for tool in TOOLS]
    fakes.append(tmp_path / ".ci" / "install-real-slurm.sh")
    fakes[0].parent.mkdir(parents=True)
    for fake in fakes:
        fake.write_text(f'#!/bin/sh\necho "{fake.name} $*" >> "$CALLS"\n')
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return tmp_path


def calls(checkout: Path, *argv: str, script: str = "scripts/test") -> list[str]:
    log = checkout / "calls.log"
    env = {k: v for k, v in os.environ.items() if k != "SLURMBRIDGE_SKIP_REAL_SLURM"}
    env["CALLS"] = str(log)
    subprocess.run(
        ["bash", str(checkout / script), *argv], cwd=checkout, env=env, check=True, timeout=60
    )
    return log.read_text().splitlines()


def pytest_args(lines: list[str]) -> list[str]:
    (line,) = [ln for ln in lines if ln.startswith("pytest ")]
    return line.split()[1:]


def static_checks(lines: list[str]) -> list[str]:
    return [ln.split()[0] for ln in lines if ln.split()[0] in ("ruff", "mypy", "lint-imports")]


def test_one_file_runs_just_that_file_after_the_same_static_checks(checkout: Path) -> None:
    lines = calls(checkout, "tests/unit/test_config.py")
    args = pytest_args(lines)
    assert [a for a in args if a.startswith("tests")] == ["tests/unit/test_config.py"]
    assert static_checks(lines) == ["ruff", "mypy", "lint-imports"]
    assert "slurmbridge schema export --check" in lines
    # Real Slurm is installed only for the tier that needs it.
    assert not any(ln.startswith("install-real-slurm.sh") for ln in lines)


def test_a_test_id_and_pytest_options_select_too(checkout: Path) -> None:
    args = pytest_args(calls(checkout, "-x", "tests/unit/test_config.py::test_one"))
    assert [a for a in args if a.startswith("tests")] == ["tests/unit/test_config.py::test_one"]
    assert "-x" in args


def test_the_real_slurm_tier_named_installs_real_slurm(checkout: Path) -> None:
    lines = calls(checkout, "tests/real_slurm/test_x.py")
    assert any(ln.startswith("install-real-slurm.sh") for ln in lines)


@pytest.mark.parametrize(
    ("argv", "script"),
    [((), "scripts/test"), ((), ".ci/run"), (("-k", "drain"), "scripts/test")],
    ids=["scripts/test", ".ci/run", "-k drain"],
)
def test_without_a_path_every_tier_runs(checkout: Path, argv: tuple[str, ...], script: str) -> None:
    lines = calls(checkout, *argv, script=script)
    args = pytest_args(lines)
    assert [a for a in args if a.startswith("tests")] == TIERS
    assert all(a in args for a in argv)
    assert static_checks(lines) == ["ruff", "mypy", "lint-imports"]
    assert any(ln.startswith("install-real-slurm.sh") for ln in lines)


def test_the_readme_shows_how_to_run_one_file() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "./scripts/test tests/unit/test_config.py" in readme
