"""Tenancy against real Slurm 26.05 (issue 27).

1. **The answers the simulator copies**: the same submits (as another user, with another
   group, for an unknown uid or name, into a reservation for root only, with an account
   outside a partition's ``AllowAccounts`` and an unknown QOS) go to real 26.05.5 and to the
   slurmrestd simulator, with root's token and with a plain user's; the normalised answers
   must be equal (:func:`test_the_simulator_answers_identity_submits_as_26_05`). Recorded:
   root may submit for anyone (even a uid with no passwd entry: accepted, and later held,
   ``JobHeldAdmin``, when its batch script cannot start; without ``group_id`` the job keeps
   *root's* group); a plain user submitting for another uid gets
   2010 "Invalid user id", for a group not its own 2113; an unknown user name 2166; a
   reservation whose ``Users=`` lacks the job's user 2052. The rig has no accounting
   (slurmdbd), and then Slurm enforces neither accounts (``AllowAccounts``) nor QOS: both
   submits run. So the bridge's own policy is what keeps a tenant in its accounts and QOS
   here; with slurmdbd and ``AccountingStorageEnforce=associations,qos`` Slurm refuses them
   as well (docs/slurm.md).
2. **The pipeline** (:func:`tests.integration.test_tenancy_e2e.scenario`): with tenant-a
   mapped to alice and account a, a plain pod's job runs as alice in account a; pods asking
   for uid 0, account b, QOS high, partition gpu or root's reservation, and a pod of a
   namespace without a policy asking for uid 0, never get a job.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from slurmbridge.devtools.realslurm_modern import ModernSlurm
from slurmbridge.devtools.sim.slurmreservations import SimReservation
from slurmbridge.devtools.sim.slurmrestd import SlurmSim
from slurmbridge.devtools.testing import Stack
from tests.integration.test_tenancy_e2e import ALICE, ALICE_UID, RESERVATION, SETTINGS, scenario

BOB, BOB_UID = "bob", 43002
VERSION = "v0.0.45"


@dataclass(frozen=True)
class Target:
    url: str
    admin: str
    alice: str


def _job(**fields: Any) -> dict[str, Any]:
    return {
        "job": {
            "name": "tenancy-diff",
            "script": "#!/bin/sh\nsleep 300\n",
            "current_working_directory": "/tmp",
            "environment": ["PATH=/bin:/usr/bin"],
            "standard_output": "/dev/null",
            **fields,
        }
    }


A, B = str(ALICE_UID), str(BOB_UID)
#: (name, token — "admin" or "alice" —, job fields)
SUBMITS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("root submits as alice", "admin", {"user_id": A, "group_id": A}),
    ("root submits as alice, no group", "admin", {"user_id": A}),
    ("root submits as alice by name", "admin", {"user_id": ALICE, "group_id": ALICE}),
    ("root submits for a uid nobody has", "admin", {"user_id": "99999", "group_id": "99999"}),
    ("root submits for an unknown name", "admin", {"user_id": "nosuchuser", "group_id": A}),
    ("alice submits as bob", "alice", {"user_id": B, "group_id": B}),
    ("alice submits as root", "alice", {"user_id": "0", "group_id": "0"}),
    ("alice submits as herself", "alice", {"user_id": A, "group_id": A}),
    ("alice submits with root's group", "alice", {"user_id": A, "group_id": "0"}),
    (
        "root submits as alice into root's reservation",
        "admin",
        {"user_id": A, "group_id": A, "reservation": RESERVATION},
    ),
    (
        "root submits as alice, account outside AllowAccounts",
        "admin",
        {"user_id": A, "group_id": A, "account": "b", "partition": "gpu"},
    ),
    ("root submits as alice, unknown QOS", "admin", {"user_id": A, "group_id": A, "qos": "high"}),
)


async def _exchange(t: Target) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    base = f"/slurm/{VERSION}"
    async with httpx.AsyncClient(base_url=t.url, timeout=20) as http:
        for name, who, fields in SUBMITS:
            token = t.admin if who == "admin" else t.alice
            r = await http.post(
                f"{base}/job/submit", json=_job(**fields), headers={"X-SLURM-USER-TOKEN": token}
            )
            body = r.json()
            answer: dict[str, Any] = {
                "submit": name,
                "status": r.status_code,
                "errors": [
                    {k: e.get(k) for k in ("error_number", "error", "description", "source")}
                    for e in body.get("errors") or []
                ],
            }
            job_id = body.get("job_id")
            if isinstance(job_id, int):
                got = await http.get(
                    f"{base}/job/{job_id}", headers={"X-SLURM-USER-TOKEN": t.admin}
                )
                j = got.json()["jobs"][0]
                answer["job"] = {
                    k: j.get(k)
                    for k in ("user_id", "user_name", "group_id", "group_name", "account")
                }
                await http.delete(f"{base}/job/{job_id}", headers={"X-SLURM-USER-TOKEN": t.admin})
            out.append(answer)
    return out


async def test_the_simulator_answers_identity_submits_as_26_05(slurm_2605: ModernSlurm) -> None:
    slurm_2605.add_user(ALICE, ALICE_UID)
    slurm_2605.add_user(BOB, BOB_UID)
    slurm_2605.scontrol("update", "partitionname=gpu", "AllowAccounts=a")
    slurm_2605.scontrol(
        "create",
        "reservation",
        f"reservationname={RESERVATION}",
        "users=root",
        "nodes=n4",
        "starttime=now",
        "duration=60",
    )
    try:
        real = await _exchange(
            Target(url=slurm_2605.url, admin=slurm_2605.token, alice=slurm_2605.token_for(ALICE))
        )
    finally:
        slurm_2605.run("scancel", "--name", "tenancy-diff", check=False)
        slurm_2605.run("scontrol", "delete", f"reservationname={RESERVATION}", check=False)
        slurm_2605.scontrol("update", "partitionname=gpu", "AllowAccounts=ALL")
    sim = SlurmSim(cluster="modern", slurm_release="26.05")
    sim.seed_default(4)
    sim.add_user(ALICE, ALICE_UID)
    sim.add_user(BOB, BOB_UID)
    sim.reservations[RESERVATION] = SimReservation(
        name=RESERVATION, nodes=("n4",), start=0, end=2**40, users=("root",)
    )
    url = await sim.start()
    try:
        simulated = await _exchange(
            Target(url=url, admin=sim.mint_token("root"), alice=sim.mint_token(ALICE))
        )
    finally:
        await sim.stop()
    for r, s in zip(real, simulated, strict=True):
        assert s == r, r["submit"]
    # What the rest of the tenancy design rests on, read from the real answers:
    by = {a["submit"]: a for a in real}
    assert by["root submits as alice"]["job"]["user_name"] == ALICE
    assert by["root submits as alice, no group"]["job"]["group_name"] == "root"
    assert by["alice submits as bob"]["errors"][0]["error_number"] == 2010
    assert by["root submits as alice into root's reservation"]["errors"][0]["error_number"] == 2052
    assert "job" in by["root submits as alice, account outside AllowAccounts"]


@pytest.fixture
async def stack(slurm_2605: ModernSlurm) -> AsyncIterator[Stack]:
    slurm_2605.add_user(ALICE, ALICE_UID)
    slurm_2605.scontrol(
        "create",
        "reservation",
        f"reservationname={RESERVATION}",
        "users=root",
        "nodes=n4",
        "starttime=now",
        "duration=60",
    )
    try:
        async with Stack(nodes=4, real_slurm=slurm_2605, poll_interval=0.2, settings=SETTINGS) as s:
            yield s
    finally:
        slurm_2605.run("scancel", "--user", ALICE, check=False)
        slurm_2605.run("scancel", "--user", "root", check=False)
        slurm_2605.run("scontrol", "delete", f"reservationname={RESERVATION}", check=False)


async def test_a_tenant_runs_as_its_user_and_is_refused_the_rest_on_26_05(
    stack: Stack, slurm_2605: ModernSlurm
) -> None:
    def read_job(job_id: int) -> tuple[str, str, str, str]:
        shown = slurm_2605.scontrol("-o", "show", "job", str(job_id))
        fields = dict(f.split("=", 1) for f in shown.split() if "=" in f)
        return (
            fields["UserId"].split("(")[0],
            fields["GroupId"].split("(")[0],
            fields["Account"],
            fields["Partition"],
        )

    await scenario(stack, read_job)
