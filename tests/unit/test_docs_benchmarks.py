"""docs/benchmarks.md reads as a user's page (issue 29 item 7): a one-screen summary first
(what, how fast, on what, the command), one plot per area, every plot present, and no wording
about the project's own work items."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "benchmarks.md"


def sections() -> dict[str, str]:
    text = DOC.read_text()
    parts = re.split(r"^## ", text, flags=re.MULTILINE)
    return {p.splitlines()[0]: p for p in parts[1:]}


def test_the_page_opens_with_a_one_screen_summary() -> None:
    text = DOC.read_text()
    summary = text[: text.index("\n## ")]
    assert len(summary.splitlines()) <= 40, "more than a screen before the details"
    assert "| what | how fast | target | command |" in summary
    rows = [ln for ln in summary.splitlines() if ln.startswith("| ") and "`" in ln]
    assert len(rows) >= 8
    assert all("python bench/" in r or "pytest" in r for r in rows), rows
    assert "2-vCPU" in summary and "Debian 12" in summary  # on what


def test_one_plot_per_area_and_every_plot_exists() -> None:
    for title, body in sections().items():
        if title.startswith(("Pipeline", "Cordon", "External", "Pods through", "NodeSet",
                             "Slurm poll", "Kubernetes side", "Projection memory")):  # fmt: skip
            assert re.search(r"!\[[^\]]*\]\(img/[a-z_]+\.png\)", body), title
    for ref in re.findall(r"\(img/([a-z_]+\.png)\)", DOC.read_text()):
        assert (ROOT / "docs" / "img" / ref).is_file(), ref


def test_no_wording_about_the_projects_work_items() -> None:
    text = DOC.read_text()
    assert not re.search(r"\b[Ii]ssues? \d+|\bthis session\b|\bwork item", text)
