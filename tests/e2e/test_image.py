"""What the production image holds (Dockerfile), built as its build stage builds it.

The build stage copies ``pyproject.toml``, ``README.md`` and the package folders, removes what
its ``RUN rm -rf`` lines name, and builds one wheel: the same is done here into a temporary
folder (no Docker needed), and the wheel's file list is checked. Then ``slurmbridge run``
from that wheel alone, with no endpoint configured, must stop with the settings to give
instead of starting simulators that are not there (docs/architecture.md: "Packages").
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _build_stage() -> tuple[list[str], list[str]]:
    """The build stage's ``COPY`` sources and ``RUN rm -rf`` targets, in order."""
    copies, removed = [], []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if not line.startswith(("FROM ", "COPY ", "RUN rm ")):
            continue
        words = shlex.split(line)
        if line.startswith("FROM ") and copies:
            break  # the runtime stage
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            copies += words[1:-1]
        if words[:3] == ["RUN", "rm", "-rf"]:
            removed += words[3:]
    return copies, removed


def _image_wheel(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    copies, removed = _build_stage()
    assert "slurmbridge" in copies and removed == ["slurmbridge/devtools"]
    for name in copies:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, src / name)
    for name in removed:
        shutil.rmtree(src / name)
    out = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--wheel-dir",
            str(out),
            str(src),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = out.glob("slurmbridge-*.whl")
    return wheel


def _in_image(tmp_path: Path, wheel: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``slurmbridge ARGV`` with only the wheel's packages importable."""
    site = tmp_path / "site"
    if not site.is_dir():
        zipfile.ZipFile(wheel).extractall(site)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURMBRIDGE_", "KUBERNETES_"))}
    env |= {"PYTHONPATH": str(site), "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path)}
    script = (
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
        "import slurmbridge\n"
        f"assert slurmbridge.__file__.startswith({str(site)!r}), slurmbridge.__file__\n"
        "from slurmbridge.cli.main import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_image_lists_only_the_commands_it_has(tmp_path: Path) -> None:
    """Issue 29, 5: without the simulators, no ``demo`` and no ``sim`` to try and fail."""
    wheel = _image_wheel(tmp_path)
    listed = _in_image(tmp_path, wheel, ["--help"])
    assert listed.returncode == 0, listed.stderr
    # argparse lists the commands indented by four spaces under COMMAND.
    commands = [ln.split()[0] for ln in listed.stdout.splitlines() if ln.startswith("    ")]
    assert "run" in commands and "tail" in commands
    assert "demo" not in commands and "sim" not in commands, commands
    for absent in ("demo", "sim"):
        proc = _in_image(tmp_path, wheel, [absent])
        assert proc.returncode == 2 and "invalid choice" in proc.stderr, proc.stderr


def test_the_image_leaves_devtools_out_and_run_asks_for_endpoints(tmp_path: Path) -> None:
    wheel = _image_wheel(tmp_path)
    files = zipfile.ZipFile(wheel).namelist()
    assert not [f for f in files if f.startswith("slurmbridge/devtools/")]
    for needed in (
        "slurmbridge/cli/main.py",
        "slurmbridge/app.py",
        "slurmbridge/runtime/worker.py",
        "slurmbridge/effectors/router.py",
        "slurmbridge/kube/wire.py",
        "producers/kube/watch.py",
        "reconcilers/placement/__init__.py",
        "schemas/events.py",
    ):
        assert needed in files, needed
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURMBRIDGE_", "KUBERNETES_"))}
    env |= {"PYTHONPATH": str(site), "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path)}
    # Only the wheel's packages: the checkout's editable install (a meta path finder) is
    # dropped before anything of ours is imported.
    script = (
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
        "import slurmbridge\n"
        f"assert slurmbridge.__file__.startswith({str(site)!r}), slurmbridge.__file__\n"
        "from slurmbridge.cli.main import main\n"
        "sys.exit(main(['run']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "$.kube.kubeconfig" in proc.stderr and "$.slurm.url" in proc.stderr
    assert "no built-in simulators" in proc.stderr
