"""The ``real_slurm`` tier: Debian's Slurm 22.05 daemons on loopback, one cluster per session.

Every test collected from this directory gets the ``real_slurm`` marker (select or deselect
the tier with ``-m real_slurm`` / ``-m "not real_slurm"``). The ``real_slurm`` fixture starts
a 4-node :class:`~slurmbridge.realslurm.RealSlurm` once and stops it at the end of the session
(about 0.1 s each way).

Missing Slurm binaries make the fixture FAIL, not skip: CI must never pass this tier by
silently skipping it. Install with ``.ci/install-real-slurm.sh`` (root, Debian 12). Set
``SLURMBRIDGE_SKIP_REAL_SLURM=1`` to skip the tier on purpose.

Tests share the cluster, so a test that changes it (drains a node, submits a job) restores it
before it ends, and tests use different nodes for different purposes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmbridge.realslurm import RealSlurm, RealSlurmError, missing_binaries

HERE = Path(__file__).parent.resolve()
SKIP_ENV = "SLURMBRIDGE_SKIP_REAL_SLURM"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of this directory (only) with ``real_slurm``."""
    for item in items:
        if item.path.resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.real_slurm)


@pytest.fixture(scope="session", autouse=True)
def real_slurm_available() -> None:
    """Skip the tier on request; otherwise FAIL (never skip) without Slurm binaries or root.

    Autouse in this conftest, so it guards every test of this directory, including those that
    start their own cluster, and only them.
    """
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"real Slurm tier skipped on request ({SKIP_ENV}=1)")
    missing = missing_binaries()
    if missing:
        pytest.fail(
            f"real Slurm is not installed (missing: {', '.join(missing)}). Run "
            f"'.ci/install-real-slurm.sh' as root (Debian 12), or set {SKIP_ENV}=1 to skip "
            "the real_slurm tier on purpose.",
            pytrace=False,
        )
    if os.geteuid() != 0:
        pytest.fail(
            "the real_slurm tier runs Slurm's daemons and must run as root "
            f"(uid is {os.geteuid()}); set {SKIP_ENV}=1 to skip it on purpose.",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def real_slurm(real_slurm_available: None) -> Iterator[RealSlurm]:
    """A started 4-node real Slurm cluster (nodes n1-n4; partitions batch and gpu=n1-n2)."""
    cluster = RealSlurm(nodes=4)
    try:
        cluster.start()
    except RealSlurmError as exc:
        pytest.fail(f"could not start the real Slurm cluster: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
