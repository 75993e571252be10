"""The ``real_slurm`` tier: real Slurm daemons on loopback, one cluster per release per session.

Every test collected from this directory gets the ``real_slurm`` marker (select or deselect
the tier with ``-m real_slurm`` / ``-m "not real_slurm"``). Clusters (nodes n1-n4, 2 CPUs and
1000 MiB each; partitions batch = all and gpu = n1-n2), each started once, on first use, and
stopped at the end of the session:

* ``real_slurm``: Debian 12's own Slurm 22.05 (REST v0.0.38),
  :class:`~slurmbridge.devtools.realslurm.RealSlurm`, about 0.1 s each way.
* ``slurm_2411`` / ``slurm_2605``: real Slurm 24.11 (REST v0.0.40-42) and 26.05 (REST
  v0.0.42-45) from Debian root file systems under chroot,
  :class:`~slurmbridge.devtools.realslurm_modern.ModernSlurm`, about 2.5 s up and 0.3 s down; at
  stop
  the fixture asserts that no process is left in the cluster's mount namespace.
* ``modern_slurm``: parametrized over both modern releases (ids ``slurm24.11`` and
  ``slurm26.05``); returns the matching session cluster.

Missing Slurm binaries or root file systems make the fixtures FAIL, not skip: CI must never
pass this tier by silently skipping it. Install everything with ``.ci/install-real-slurm.sh``
(root, Debian 12; ``SLURMBRIDGE_REAL_SLURM_RELEASES`` picks releases). Set
``SLURMBRIDGE_SKIP_REAL_SLURM=1`` to skip the tier on purpose.

Tests share the clusters, so a test that changes one (drains a node, submits a job) restores
it before it ends, and tests use different nodes for different purposes. The modern clusters'
REST token is root's: never send ``X-SLURM-USER-NAME`` naming another user with it (that
impersonates the user), and never cancel another user's job over REST as a plain user (a
Slurm bug deadlocks slurmctld).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slurmbridge.devtools.realslurm import RealSlurm, RealSlurmError, missing_binaries
from slurmbridge.devtools.realslurm_modern import ModernSlurm, default_rootfs, installed

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


def modern_cluster(release: str, **options: Any) -> Iterator[ModernSlurm]:
    """Start a 4-node ModernSlurm of ``release`` (``options``: ModernSlurm's keywords); stop
    it and check nothing is left."""
    if not installed(release):
        pytest.fail(
            f"real Slurm {release} is not installed (no root file system at "
            f"{default_rootfs(release)}). Run 'SLURMBRIDGE_REAL_SLURM_RELEASES={release} "
            ".ci/install-real-slurm.sh' or 'python -m slurmbridge.devtools.realslurm_modern "
            f"install {release}' as root (Debian 12), or set {SKIP_ENV}=1 to skip the "
            "real_slurm tier on purpose.",
            pytrace=False,
        )
    cluster = ModernSlurm(release, nodes=4, **options)
    try:
        cluster.start()
    except RealSlurmError as exc:
        pytest.fail(f"could not start the real Slurm {release} cluster: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
        left = cluster.cluster_processes()
        assert left == [], f"processes left in the Slurm {release} cluster's namespace: {left}"


@pytest.fixture(scope="session")
def slurm_2411(real_slurm_available: None) -> Iterator[ModernSlurm]:
    """A started 4-node real Slurm 24.11 cluster (REST v0.0.40-v0.0.42)."""
    yield from modern_cluster("24.11")


@pytest.fixture(scope="session")
def slurm_2605(real_slurm_available: None) -> Iterator[ModernSlurm]:
    """A started 4-node real Slurm 26.05 cluster (REST v0.0.42-v0.0.45)."""
    yield from modern_cluster("26.05")


MODERN_FIXTURES = {"24.11": "slurm_2411", "26.05": "slurm_2605"}


@pytest.fixture(params=list(MODERN_FIXTURES), ids=[f"slurm{r}" for r in MODERN_FIXTURES])
def modern_slurm(request: pytest.FixtureRequest) -> ModernSlurm:
    """The session cluster of each modern release in turn (``slurm24.11``, ``slurm26.05``)."""
    cluster = request.getfixturevalue(MODERN_FIXTURES[request.param])
    assert isinstance(cluster, ModernSlurm)
    return cluster
