"""The modern Slurm rig itself (slurmbridge.devtools.realslurm_modern), against real 24.11 and
26.05.

Each test taking ``modern_slurm`` runs once per release (ids ``slurm24.11`` and
``slurm26.05``) on that release's session cluster. Node roles: n1-n3 are read-only here, n4
belongs to the drain round trip.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from slurmbridge.devtools.realslurm import RealSlurmError
from slurmbridge.devtools.realslurm_modern import RELEASES, SUITES, ModernSlurm, default_rootfs

EXPECTED_API_VERSIONS = {
    "24.11": ("v0.0.40", "v0.0.41", "v0.0.42"),
    "26.05": ("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"),
}
COMMON = "/slurm/v0.0.42"  # the one REST version both releases serve
NODES = ("n1", "n2", "n3", "n4")
# A plain (non-operator) user, created in the root file systems by the token test.
PLAIN_USER, PLAIN_UID = "sbtest", 42424


def wait_until(what: str, condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``condition`` every 20 ms; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def rest(cluster: ModernSlurm, token: str | None = None) -> httpx.Client:
    """An httpx client for ``cluster``'s slurmrestd sending only ``X-SLURM-USER-TOKEN``."""
    return httpx.Client(
        base_url=cluster.url,
        headers={"X-SLURM-USER-TOKEN": token or cluster.token},
        timeout=10,
    )


def all_idle(cluster: ModernSlurm) -> bool:
    states = cluster.node_states()
    return all(states.get(node) == "idle" for node in NODES)


# --------------------------------------------------------------------------- no cluster


def test_unknown_release_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"release .*'23\.02'"):
        ModernSlurm("23.02")


def test_defaults() -> None:
    assert RELEASES == ("24.11", "26.05")
    assert SUITES == {"24.11": "trixie", "26.05": "sid"}
    assert default_rootfs("26.05") == Path("/var/tmp/slurm-modern/sid")
    cluster = ModernSlurm("24.11", workdir="/nonexistent/x")
    assert not cluster.started
    assert cluster.cluster_processes() == []
    with pytest.raises(RealSlurmError, match="not started"):
        _ = cluster.url
    cluster.stop()  # nothing to stop: a no-op


# --------------------------------------------------------------------------- the cluster


def test_nodes_idle_with_their_resources(modern_slurm: ModernSlurm) -> None:
    wait_until("n1-n4 idle", lambda: all_idle(modern_slurm))
    assert set(modern_slurm.node_states()) == set(NODES)
    lines = modern_slurm.sinfo("-h", "-N", "-p", "batch", "-o", "%N %c %m").split()
    table = {lines[i]: (lines[i + 1], lines[i + 2]) for i in range(0, len(lines), 3)}
    assert table == dict.fromkeys(NODES, ("2", "1000"))
    gpu = modern_slurm.sinfo("-h", "-N", "-p", "gpu", "-o", "%N").split()
    assert sorted(gpu) == ["n1", "n2"]


def test_version_and_rest(modern_slurm: ModernSlurm) -> None:
    release = modern_slurm.release
    assert modern_slurm.slurm_version.startswith(f"{release}.")
    assert modern_slurm.api_versions == EXPECTED_API_VERSIONS[release]
    assert modern_slurm.user == "root"
    assert modern_slurm.token_file.read_text().strip() == modern_slurm.token
    assert oct(modern_slurm.token_file.stat().st_mode & 0o777) == "0o600"
    with rest(modern_slurm) as client:
        r = client.get("/openapi/v3")
        assert r.status_code == 200, r.text[:300]
        paths = r.json()["paths"]
        served = sorted({p.split("/")[2] for p in paths if p.startswith("/slurm/v0.0.")})
        assert tuple(served) == EXPECTED_API_VERSIONS[release]
        r = client.get(f"{COMMON}/ping/")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["meta"]["slurm"]["release"].startswith(f"{release}.")
        assert [p["pinged"] for p in body["pings"]] == ["UP"]
    # no token at all: refused
    assert httpx.get(f"{modern_slurm.url}{COMMON}/ping/", timeout=10).status_code == 401


def test_admin_drain_and_undrain(modern_slurm: ModernSlurm) -> None:
    node = "n4"
    wait_until(f"{node} idle", lambda: modern_slurm.node_states()[node] == "idle")
    try:
        modern_slurm.admin_drain(node, "rig test")
        assert modern_slurm.node_states()[node] == "drained"
        with rest(modern_slurm) as client:
            r = client.get(f"{COMMON}/node/{node}")
            assert r.status_code == 200, r.text
            [info] = r.json()["nodes"]
            assert "DRAIN" in info["state"]
            assert info["reason"] == "rig test"
    finally:
        modern_slurm.undrain(node)
    # IDLE+NOT_RESPONDING ("idle*") for up to about 1 s, until slurmctld's next ping
    wait_until(f"{node} idle again", lambda: modern_slurm.node_states()[node] == "idle")
    with pytest.raises(RealSlurmError, match="failed"):
        modern_slurm.admin_drain("nosuchnode", "x")


def test_token_for_a_plain_user(modern_slurm: ModernSlurm) -> None:
    modern_slurm.add_user(PLAIN_USER, PLAIN_UID)
    modern_slurm.add_user(PLAIN_USER, PLAIN_UID)  # idempotent
    token = modern_slurm.token_for(PLAIN_USER)
    assert token != modern_slurm.token
    with rest(modern_slurm, token) as client:
        r = client.get(f"{COMMON}/ping/")
        assert r.status_code == 200, r.text
        # slurmrestd answers ping with 200 even for a token slurmctld rejects; the ping
        # result tells: UP only when slurmctld accepted the credential.
        assert [p["pinged"] for p in r.json()["pings"]] == ["UP"]
        r = client.get(f"{COMMON}/jobs/")
        assert r.status_code == 200, r.text
    with rest(modern_slurm, "not.a.token") as client:
        r = client.get(f"{COMMON}/ping/")
        assert [p["pinged"] for p in r.json()["pings"]] == ["DOWN"]
        assert client.get(f"{COMMON}/jobs/").status_code != 200


def _alive_in(pid: int, mntns: str) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt") == mntns
    except OSError:
        return False


async def test_second_cluster_leaves_nothing(modern_slurm: ModernSlurm, tmp_path: Path) -> None:
    workdir = tmp_path / "second"
    cluster = ModernSlurm(modern_slurm.release, nodes=2, workdir=workdir)
    async with cluster:
        assert cluster.started
        assert cluster.url != modern_slurm.url
        assert cluster.node_states() == {"n1": "idle", "n2": "idle"}
        mntns = (workdir / "run" / "mntns").read_text().strip()
        pids = {f.name: int(f.read_text()) for f in (workdir / "run").glob("*.pid")}
        assert {"ns.pid", "munged.pid", "slurmctld.pid", "slurmrestd.pid"} <= set(pids)
        assert {"slurmd-n1.pid", "slurmd-n2.pid"} <= set(pids)
        members = cluster.cluster_processes()
        assert set(pids.values()) <= set(members)
        assert modern_slurm.cluster_processes() != []
        assert not set(members) & set(modern_slurm.cluster_processes())
    assert not cluster.started
    assert cluster.cluster_processes() == []
    assert [name for name, pid in pids.items() if _alive_in(pid, mntns)] == []
    # the mount point inside the root file system is gone, the logs are kept
    assert not (cluster.rootfs / str(workdir).lstrip("/")).exists()
    assert (workdir / "log" / "slurmctld.log").stat().st_size > 0
    cluster.stop()  # twice is fine
    cluster.stop()
    with pytest.raises(RealSlurmError, match="not started"):
        _ = cluster.token
    # the session cluster is untouched
    assert set(modern_slurm.node_states()) == set(NODES)
