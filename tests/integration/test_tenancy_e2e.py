"""Tenancy end to end (issue 27): a namespace's pods run in Slurm as its tenant's user, and
a pod naming another identity, account, QOS, partition or reservation is denied at admission
and, created past the webhook, never gets a job.

The scenario (:func:`scenario`) runs here against the simulators and, unchanged, against real
Slurm 26.05 in tests/real_slurm/test_modern_tenancy.py (which also records the answers the
simulator's identity rules copy). The Kubernetes simulator has no admission chain, so every
pod it holds was "created past the webhook"; the webhook's own answers are checked over TLS
with the same settings (:func:`test_the_webhook_denies_what_placement_refuses`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY

from schemas import wellknown
from schemas.actions import SubmitSlurmJob
from slurmbridge import config
from slurmbridge.cli import logs
from slurmbridge.devtools.sim.kube import ApiError
from slurmbridge.devtools.sim.slurmreservations import SimReservation
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import Stack
from slurmbridge.logview import explain
from slurmbridge.webhook import Policy, WebhookServer
from tests._helpers import pod_review
from tests.integration.certs import make_certs, trusting

P = wellknown.ANNOTATION_SLURMJOB_PREFIX
JOBID = wellknown.LABEL_SLURM_JOBID
ALICE, ALICE_UID = "alice", 43001
TENANT_NS = "tenant-a"
#: The policy of the acceptance: tenant-a runs as alice in account a (partition batch).
SETTINGS: dict[str, Any] = {
    "tenancy": {
        "tenants": [
            {
                "name": "team-a",
                "namespaces": [TENANT_NS],
                "userId": ALICE_UID,
                "groupId": ALICE_UID,
                "userName": ALICE,
                "accounts": ["a"],
                "defaultAccount": "a",
                "qos": ["normal"],
                "partitions": ["batch"],
                "defaultPartition": "batch",
            }
        ]
    }
}
#: A reservation only root may use (the acceptance's "reservation for another user").
RESERVATION = "slurmonly"
#: Pods that must never get a job: (namespace, name, annotations, the annotation named).
DENIED: tuple[tuple[str, str, dict[str, str], str], ...] = (
    (TENANT_NS, "as-root", {"user-id": "0"}, "user-id"),
    (TENANT_NS, "account-b", {"account": "b"}, "account"),
    (TENANT_NS, "qos-high", {"qos": "high"}, "qos"),
    (TENANT_NS, "gpu", {"partition": "gpu"}, "partition"),
    (TENANT_NS, "resv", {"reservation": RESERVATION}, "reservation"),
    ("default", "no-policy", {"user-id": "0"}, "user-id"),
)

#: How a test reads a Slurm job: job id → (user name, group name, account, partition).
JobReader = Callable[[int], tuple[str, str, str, str]]


def _pod(stack: Stack, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return stack.kube.get("pods", name, ns)
    except ApiError:
        return None


def _condition(stack: Stack, ns: str, name: str) -> dict[str, Any]:
    p = _pod(stack, ns, name) or {}
    conds = (p.get("status") or {}).get("conditions") or []
    return next((c for c in conds if c.get("type") == "PodScheduled"), {})


async def scenario(stack: Stack, read_job: JobReader) -> None:
    """The acceptance, on a started stack with :data:`SETTINGS`, user alice and the
    reservation :data:`RESERVATION` (Users=root) in Slurm."""
    stack.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TENANT_NS}})
    (plain,) = create_group(
        stack.kube, "Pod", "plain", 1, namespace=TENANT_NS, requests={"cpu": "1"}, run_seconds=30
    )
    for ns, name, asked, _ in DENIED:
        create_group(
            stack.kube,
            "Pod",
            name,
            1,
            namespace=ns,
            annotations={P + k: v for k, v in asked.items()},
            requests={"cpu": "1"},
        )
    await stack.wait_for(
        lambda: bool(((_pod(stack, TENANT_NS, plain) or {}).get("spec") or {}).get("nodeName")),
        timeout=60,
        what="the plain pod bound",
    )
    p = _pod(stack, TENANT_NS, plain)
    assert p is not None
    job_id = int(p["metadata"]["labels"][JOBID])
    assert read_job(job_id) == (ALICE, ALICE, "a", "batch")
    for ns, name, _, rule in DENIED:
        await stack.wait_for(
            lambda ns=ns, name=name: (
                _condition(stack, ns, name).get("reason")  # type: ignore[misc]
                == wellknown.REASON_SLURM_POLICY_DENIED
            ),
            timeout=30,
            what=f"{ns}/{name} refused by the policy",
        )
        cond = _condition(stack, ns, name)
        assert cond["status"] == "False"
        assert cond["message"].startswith(f"metadata.annotations[{P}{rule}]: "), cond
        events = [
            e
            for e in stack.kube.list("events", ns)
            if (e.get("involvedObject") or {}).get("name") == name
            and e.get("reason") == wellknown.REASON_SLURM_POLICY_DENIED
        ]
        assert events and events[0]["type"] == "Warning"
        assert events[0]["message"].startswith(f"metadata.annotations[{P}{rule}]")
    await stack.settled()
    submitted = [
        r.action.group
        for r in await stack.action_records()
        if isinstance(r.action, SubmitSlurmJob) and r.outcome != "intended"
    ]
    assert submitted == [f"{TENANT_NS}/Pod:{plain}"], submitted
    for ns, name, _, _ in DENIED:
        labels = ((_pod(stack, ns, name) or {}).get("metadata") or {}).get("labels") or {}
        assert JOBID not in labels, (ns, name)


# --- the simulators --------------------------------------------------------------------------


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    def seed(s: Stack) -> None:
        s.slurm.add_user(ALICE, ALICE_UID)
        s.slurm.reservations[RESERVATION] = SimReservation(
            name=RESERVATION,
            nodes=("n4",),
            start=int(time.time()) - 60,
            end=int(time.time()) + 3600,
            users=("root",),
        )

    async with Stack(nodes=4, poll_interval=0.2, settings=SETTINGS, setup=seed) as s:
        yield s


async def test_a_tenant_runs_as_its_user_and_is_refused_the_rest_in_the_simulators(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    def read_job(job_id: int) -> tuple[str, str, str, str]:
        j = stack.slurm.jobs_by_id[job_id]
        return (j.user_name, j.group_name, j.account, j.partition)

    before = {rule: _denials("placement", rule) for _, _, _, rule in DENIED}
    await scenario(stack, read_job)
    # explain pod/NS/NAME names the identity and the policy each decision applied.
    assert stack.app is not None
    story = await explain.pod_steps(stack.app.bus, f"{TENANT_NS}/plain")
    steps = [st.what for st in story.steps]
    assert any(
        st.startswith(
            "placeholder job submitted as uid 43001, gid 43001, account a, partition batch "
            "(tenancy policy 'team-a')"
        )
        for st in steps
    ), steps
    story = await explain.pod_steps(stack.app.bus, f"{TENANT_NS}/account-b")
    assert [st.what for st in story.steps] == [
        f"denied by tenancy: metadata.annotations[{P}account]: 'b' is not allowed for "
        "namespace tenant-a (tenancy policy 'team-a'); allowed: a"
    ]
    job = next(j for j in stack.slurm.jobs_by_id.values() if j.user_name == ALICE)
    assert (job.user_id, job.group_id) == (ALICE_UID, ALICE_UID)
    # The command prints the steps, then the policy the settings give the namespace now.
    assert stack.settings is not None
    code = await logs.explain_cmd(stack.settings, argparse.Namespace(ref=f"pod/{TENANT_NS}/plain"))
    out = capsys.readouterr().out
    assert code == 0
    assert (
        "  policy now: tenancy policy 'team-a': namespace tenant-a runs as alice (uid 43001, "
        "gid 43001); accounts a (default a)"
    ) in out, out
    # The denial metric counts each refused pod once, by the annotation that broke the rule.
    wanted: dict[str, int] = {}
    for _, _, _, rule in DENIED:
        wanted[rule] = wanted.get(rule, 0) + 1
    await stack.settled()
    assert {r: _denials("placement", r) - before[r] for r in wanted} == wanted


def _denials(where: str, rule: str) -> float:
    value = REGISTRY.get_sample_value(
        "slurmbridge_tenancy_denials_total", {"where": where, "rule": rule}
    )
    return value or 0.0


# --- the webhook -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certs(tmp_path_factory.mktemp("certs"))


async def test_the_webhook_denies_what_placement_refuses(certs: dict[str, Path]) -> None:
    s = config.load(env={}, overrides=SETTINGS)
    srv = WebhookServer(
        Policy(
            scheduler_name=s.scheduler_name,
            managed_namespaces=frozenset(s.managed_namespaces),
            service_account=s.webhook.service_account,
            tenancy=s.tenancy,
        ),
        bind="127.0.0.1",
        port=0,
        cert_file=str(certs["cert"]),
        key_file=str(certs["key"]),
    )
    await srv.start()
    try:
        async with httpx.AsyncClient(verify=trusting(certs)) as http:

            async def answer(ns: str, annotations: dict[str, str]) -> dict[str, Any]:
                obj = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": "p",
                        "namespace": ns,
                        "annotations": {P + k: v for k, v in annotations.items()},
                    },
                    "spec": {"schedulerName": s.scheduler_name, "containers": [{"name": "c"}]},
                }
                review = pod_review("u1", "CREATE", ns, obj, userInfo={"username": "mallory"})
                r = await http.post(f"https://127.0.0.1:{srv.port}/validate", json=review)
                assert r.status_code == 200
                return dict(r.json()["response"])

            assert (await answer(TENANT_NS, {}))["allowed"] is True
            before = _denials("admission", "user-id")
            for ns, _, asked, rule in DENIED:
                got = await answer(ns, asked)
                assert got["allowed"] is False and got["status"]["code"] == 403
                message = got["status"]["message"]
                assert message.startswith(f"metadata.annotations[{P}{rule}]: "), message
                policy = "tenancy policy 'team-a'" if ns == TENANT_NS else "no tenancy policy"
                assert policy in message, message
            assert _denials("admission", "user-id") - before == 2
    finally:
        await srv.stop()


# --- served namespaces -----------------------------------------------------------------------


async def test_pods_outside_the_served_namespaces_and_slurmd_pods_are_left_alone() -> None:
    """Item 4: with ``managedNamespaces`` set, a pod of ours elsewhere gets one Warning Event
    and no job; a NodeSet's slurmd pod with our schedulerName never gets a job either."""
    settings = {"managedNamespaces": ["hpc"]}
    async with Stack(nodes=4, poll_interval=0.2, settings=settings) as s:
        s.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hpc"}})
        (served,) = create_group(s.kube, "Pod", "served", 1, namespace="hpc", requests={"cpu": "1"})
        (elsewhere,) = create_group(s.kube, "Pod", "elsewhere", 1, requests={"cpu": "1"})
        s.kube.add_pod(
            "slurmd-0",
            "hpc",
            labels={"app.kubernetes.io/name": "slurmd"},
            scheduler_name=wellknown.DEFAULT_SCHEDULER_NAME,
            requests={"cpu": "1"},
        )

        def warned(ns: str, name: str) -> list[dict[str, Any]]:
            return [
                e
                for e in s.kube.list("events", ns)
                if (e.get("involvedObject") or {}).get("name") == name
                and e.get("reason") == wellknown.REASON_NOT_SERVED
            ]

        await s.wait_for(lambda: bool(warned("default", elsewhere)), what="elsewhere warned")
        await s.wait_for(lambda: bool(warned("hpc", "slurmd-0")), what="slurmd pod warned")
        await s.wait_for(
            lambda: bool(((_pod(s, "hpc", served) or {}).get("spec") or {}).get("nodeName")),
            timeout=30,
            what="the served pod bound",
        )
        await s.settled()
        assert warned("default", elsewhere)[0]["type"] == "Warning"
        assert "namespace default is not served" in warned("default", elsewhere)[0]["message"]
        submitted = [
            r.action.group
            for r in await s.action_records()
            if isinstance(r.action, SubmitSlurmJob) and r.outcome != "intended"
        ]
        assert submitted == [f"hpc/Pod:{served}"], submitted
        for ns, name in (("default", elsewhere), ("hpc", "slurmd-0")):
            assert len(warned(ns, name)) == 1, "one Event, not one per reconcile"
            p = _pod(s, ns, name) or {}
            assert JOBID not in ((p.get("metadata") or {}).get("labels") or {})
            assert not (p.get("spec") or {}).get("nodeName")
