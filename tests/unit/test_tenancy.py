"""Tenancy (issue 27): the policy's rules as tables, the settings that carry it, placement
refusing and stamping jobs with it, the webhook denying early, and ``explain``'s line.

Pure: no servers. The end-to-end proofs are tests/integration/test_tenancy_e2e.py
(simulators) and tests/real_slurm/test_modern_tenancy.py (real Slurm 26.05).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import msgspec
import pytest

from reconcilers import _pods, _tenancy, placement
from reconcilers.base import Context
from schemas import wellknown
from schemas.actions import RecordEvent, SetPodCondition, SlurmJobSpec, SubmitSlurmJob
from schemas.events import Event, KubePod, OwnerRef, SlurmPartition
from schemas.tenancy import Tenancy, Tenant
from slurmbridge import config, webhook
from slurmbridge.runtime.projection import Projection
from tests._helpers import pod_review
from tests.unit._listing import listed
from tests.unit._pods import kube_pod, kube_workload

P = _pods.PREFIX
SCHED = wellknown.DEFAULT_SCHEDULER_NAME
ALICE = Tenant(
    name="team-a",
    namespaces=("tenant-a",),
    user_id=43001,
    group_id=43001,
    user_name="alice",
    accounts=("a", "a2"),
    qos=("normal",),
    partitions=("batch",),
    reservations=("a-resv",),
    default_account="a",
    default_partition="batch",
)
BOB = Tenant(name="team-b", namespaces=("tenant-b",), user_id=43002, group_id=43002)
POLICY = Tenancy(tenants=(ALICE, BOB))


# --- the rules -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "annotations", "rule"),
    [
        # allowed
        ("tenant-a", {}, None),
        ("tenant-a", {"user-id": "43001", "group-id": "43001"}, None),
        ("tenant-a", {"account": "a2", "qos": "normal", "partition": "batch"}, None),
        ("tenant-a", {"reservation": "a-resv"}, None),
        ("tenant-a", {"cpu-per-task": "2", "wckey": "anything"}, None),
        ("default", {"account": "b", "partition": "gpu"}, None),  # no policy: Slurm judges
        # denied
        ("tenant-a", {"user-id": "0"}, "user-id"),
        ("tenant-a", {"user-id": " 43002 "}, "user-id"),
        ("tenant-a", {"user-id": "alice"}, "user-id"),
        ("tenant-a", {"group-id": "0"}, "group-id"),
        ("tenant-a", {"account": "b"}, "account"),
        ("tenant-a", {"account": "A"}, "account"),  # exact names (Slurm lowercases accounts)
        ("tenant-a", {"qos": "high"}, "qos"),
        ("tenant-a", {"qos": "normal,high"}, "qos"),
        ("tenant-a", {"partition": "gpu"}, "partition"),
        ("tenant-a", {"partition": "batch,gpu"}, "partition"),
        ("tenant-a", {"reservation": "slurmonly"}, "reservation"),
        ("tenant-b", {"account": "b"}, "account"),  # empty list: may not be used at all
        ("tenant-b", {"user-id": "43001"}, "user-id"),  # another tenant's user
        # unknown namespace: no identity may be chosen
        ("default", {"user-id": "0"}, "user-id"),
        ("default", {"group-id": "1000"}, "group-id"),
        # the first rule broken is named (RULES order)
        ("tenant-a", {"partition": "gpu", "account": "b", "user-id": "0"}, "user-id"),
    ],
)
def test_policy_table(namespace: str, annotations: dict[str, str], rule: str | None) -> None:
    got = _tenancy.check(POLICY, namespace, {P + k: v for k, v in annotations.items()})
    assert (got.rule if got else None) == rule
    if got is not None:
        field = f"metadata.annotations[{P}{rule}]"
        assert got.field == field and got.message.startswith(field + ": ")
        assert _tenancy.rule_of(got.message) == rule
        tenant = POLICY.tenant_of(namespace)
        if tenant is not None:
            assert f"tenancy policy {tenant.name!r}" in got.message and got.policy == tenant.name
        else:
            assert "has no tenancy policy" in got.message and got.policy == ""


def test_denials_name_what_is_allowed() -> None:
    got = _tenancy.check(POLICY, "tenant-a", {P + "account": "b"})
    assert got is not None
    assert got.message == (
        f"metadata.annotations[{P}account]: 'b' is not allowed for namespace tenant-a "
        "(tenancy policy 'team-a'); allowed: a, a2"
    )
    got = _tenancy.check(POLICY, "tenant-a", {P + "user-id": "0"})
    assert got is not None and "runs as alice (uid 43001, gid 43001)" in got.message
    got = _tenancy.check(POLICY, "tenant-b", {P + "qos": "high"})
    assert got is not None and got.message.endswith(
        "allowed: none (the annotation may not be used)"
    )


@pytest.mark.parametrize(
    ("namespace", "spec", "want"),
    [
        # defaults fill what the annotations left out; the identity is always the tenant's
        ("tenant-a", SlurmJobSpec(name="j"), (43001, 43001, "a", "batch")),
        ("tenant-a", SlurmJobSpec(name="j", account="a2"), (43001, 43001, "a2", "batch")),
        ("tenant-b", SlurmJobSpec(name="j"), (43002, 43002, "", "")),
        # no policy: unchanged (the token's user)
        ("default", SlurmJobSpec(name="j", account="x"), (None, None, "x", "")),
    ],
)
def test_apply_sets_identity_and_defaults(
    namespace: str, spec: SlurmJobSpec, want: tuple[Any, ...]
) -> None:
    got = _tenancy.apply(POLICY, namespace, spec)
    assert (got.user_id, got.group_id, got.account, got.partition) == want


@pytest.mark.parametrize(
    ("namespace", "managed", "selector", "served"),
    [
        ("anything", (), False, True),  # no list: every namespace, as before
        ("hpc", ("hpc",), False, True),
        ("other", ("hpc",), False, False),
        ("tenant-a", ("hpc",), False, True),  # a tenant's namespace is served
        ("other", ("hpc",), True, True),  # a selector may match it: the webhook decides
    ],
)
def test_served_namespaces(
    namespace: str, managed: tuple[str, ...], selector: bool, served: bool
) -> None:
    assert _tenancy.served(namespace, POLICY, managed, selector=selector) is served


def test_no_tenant_and_no_list_serves_everything() -> None:
    assert _tenancy.served("x", Tenancy(), ())


def test_describe_names_the_policy() -> None:
    assert _tenancy.describe(POLICY, "tenant-a") == (
        "tenancy policy 'team-a': namespace tenant-a runs as alice (uid 43001, gid 43001); "
        "accounts a, a2 (default a); qos normal; partitions batch (default batch); "
        "reservations a-resv"
    )
    assert _tenancy.describe(POLICY, "default").startswith("no tenancy policy for namespace")


# --- the settings ----------------------------------------------------------------------------

GOOD = {
    "tenancy": {
        "tenants": [
            {
                "name": "team-a",
                "namespaces": ["tenant-a"],
                "userId": 43001,
                "groupId": 43001,
                "userName": "alice",
                "accounts": ["a"],
                "defaultAccount": "a",
                "partitions": ["batch"],
                "defaultPartition": "batch",
            },
            {"name": "team-b", "namespaces": ["tenant-b"], "userId": 43002, "groupId": 43002},
        ]
    }
}


def test_settings_carry_the_policy(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(msgspec.json.encode(GOOD).decode())  # JSON is YAML
    s = config.load(path=f, env={})
    assert s.tenancy.tenant_of("tenant-a") == msgspec.convert(GOOD["tenancy"]["tenants"][0], Tenant)
    assert s.tenancy.tenant_of("default") is None


def _tenant(**over: Any) -> dict[str, Any]:
    return {**GOOD["tenancy"]["tenants"][0], **over}


@pytest.mark.parametrize(
    ("tenants", "path"),
    [
        ([_tenant(userId=0)], r"\$\.tenancy\.tenants\[0\]\.userId"),
        ([_tenant(groupId=-1)], r"\$\.tenancy\.tenants\[0\]\.groupId"),
        ([{k: v for k, v in _tenant().items() if k != "groupId"}], r"\$\.tenancy\.tenants\[0\]"),
        ([_tenant(namespaces=["Not_A_Name"])], r"\$\.tenancy\.tenants\[0\]\.namespaces\[0\]"),
        ([_tenant(namespaces=[])], r"\$\.tenancy\.tenants\[0\]\.namespaces: a tenant needs"),
        ([_tenant(accounts=["a,b"])], r"\$\.tenancy\.tenants\[0\]\.accounts\[0\]"),
        ([_tenant(defaultAccount="z")], r"\$\.tenancy\.tenants\[0\]\.defaultAccount: 'z'"),
        ([_tenant(defaultPartition="gpu")], r"\$\.tenancy\.tenants\[0\]\.defaultPartition"),
        ([_tenant(userID=5)], r"\$\.tenancy\.tenants\[0\]"),  # unknown key (a misspelling)
        (
            [_tenant(), _tenant(name="team-c")],
            r"\$\.tenancy\.tenants\[1\]\.namespaces\[0\]: namespace 'tenant-a' already belongs "
            "to tenant 'team-a'",
        ),
        ([_tenant(), _tenant(namespaces=["x"])], r"\$\.tenancy\.tenants\[1\]\.name: tenant"),
    ],
)
def test_bad_settings_name_the_path(tenants: list[dict[str, Any]], path: str) -> None:
    with pytest.raises(config.ConfigError, match=path):
        config.load(env={}, overrides={"tenancy": {"tenants": tenants}})


# --- placement -------------------------------------------------------------------------------

CTX = Context(scheduler_name=SCHED, cluster="c1", tenancy=POLICY)


def kpod(
    name: str = "p",
    namespace: str = "tenant-a",
    annotations: dict[str, str] | None = None,
    **kw: Any,
) -> KubePod:
    return kube_pod(
        namespace,
        name,
        uid=f"u-{name}",
        scheduler_name=SCHED,
        annotations={P + k: v for k, v in (annotations or {}).items()},
        phase="Pending",
        cpu_millis=1000,
        **kw,
    )


def decide(p: KubePod, ctx: Context = CTX, *more: Event) -> Any:
    store = Projection()
    for i, o in enumerate(listed((p, *more, *PARTS)), 1):
        store.apply(o, i)
    key = _pods.resolve_group(p, store, ctx.cluster).key
    return placement.decide(placement.view(store, key, ctx))


PARTS = tuple(SlurmPartition(source="slurm:c1", key=n, cluster="c1") for n in ("batch", "gpu"))


def test_a_plain_pod_of_a_tenant_runs_as_its_user_in_its_default_account() -> None:
    d = decide(kpod())
    (submit,) = [a for a in d.actions if isinstance(a, SubmitSlurmJob)]
    s = submit.spec
    assert (s.user_id, s.group_id, s.account, s.partition) == (43001, 43001, "a", "batch")
    assert submit.tenant == "team-a"


def test_a_pod_without_a_policy_runs_as_the_token_user() -> None:
    (submit,) = [
        a for a in decide(kpod(namespace="default")).actions if isinstance(a, SubmitSlurmJob)
    ]
    assert (submit.spec.user_id, submit.spec.group_id, submit.tenant) == (None, None, "")


@pytest.mark.parametrize(
    ("namespace", "annotations", "rule"),
    [
        ("tenant-a", {"user-id": "0"}, "user-id"),
        ("tenant-a", {"account": "b"}, "account"),
        ("tenant-a", {"qos": "high"}, "qos"),
        ("tenant-a", {"partition": "gpu"}, "partition"),
        ("tenant-a", {"reservation": "slurmonly"}, "reservation"),
        ("default", {"user-id": "0"}, "user-id"),
    ],
)
def test_placement_refuses_and_never_submits(
    namespace: str, annotations: dict[str, str], rule: str
) -> None:
    d = decide(kpod(namespace=namespace, annotations=annotations))
    assert not [a for a in d.actions if isinstance(a, SubmitSlurmJob)]
    (cond,) = [a for a in d.actions if isinstance(a, SetPodCondition)]
    (event,) = [a for a in d.actions if isinstance(a, RecordEvent)]
    field = f"metadata.annotations[{P}{rule}]"
    assert (cond.type, cond.status, cond.reason) == ("PodScheduled", "False", "SlurmPolicyDenied")
    assert cond.message.startswith(field)
    assert (event.type, event.reason, event.message) == (
        "Warning",
        "SlurmPolicyDenied",
        cond.message,
    )


def test_a_refusal_already_on_the_pod_is_not_repeated() -> None:
    first = decide(kpod(annotations={"qos": "high"}))
    (cond,) = [a for a in first.actions if isinstance(a, SetPodCondition)]
    from schemas.events import PodCondition

    marked = kpod(
        annotations={"qos": "high"},
        conditions=(
            PodCondition(type=cond.type, status="False", reason=cond.reason, message=cond.message),
        ),
    )
    assert decide(marked).actions == ()


def test_annotations_of_a_job_are_checked_too() -> None:
    owner = OwnerRef(api_version="batch/v1", kind="Job", name="train", uid="uid-train")
    labels = {_pods.LABEL_JOB_NAME: "train"}
    p = kpod(labels=labels, owner=owner)
    job = kube_workload("tenant-a", "Job", "train", size=1, annotations={P + "account": "b"})
    d = decide(p, CTX, job)
    assert [a.reason for a in d.actions if isinstance(a, SetPodCondition)] == ["SlurmPolicyDenied"]


def test_a_pod_outside_the_served_namespaces_is_left_alone_with_a_warning() -> None:
    ctx = msgspec.structs.replace(CTX, managed_namespaces=("hpc",))
    d = decide(kpod(namespace="elsewhere"), ctx)
    (event,) = d.actions
    assert isinstance(event, RecordEvent)
    assert (event.type, event.reason, event.once) == (
        "Warning",
        "SlurmBridgeNotServed",
        "not-served",
    )
    assert "namespace elsewhere is not served" in event.message


def test_a_nodeset_slurmd_pod_is_never_placed() -> None:
    owner = OwnerRef(api_version="slinky.slurm.net/v1beta1", kind="NodeSet", name="ns1", uid="x")
    d = decide(kpod(owner=owner))
    (event,) = d.actions
    assert isinstance(event, RecordEvent)
    assert (event.reason, event.once) == ("SlurmBridgeNotServed", "slurmd")
    d = decide(kpod(labels={"app.kubernetes.io/name": "slurmd"}))
    assert [type(a).__name__ for a in d.actions] == ["RecordEvent"]


# --- webhook ---------------------------------------------------------------------------------


def review(namespace: str, annotations: dict[str, str], op: str = "CREATE") -> webhook.Request:
    obj = {
        "metadata": {
            "name": "p",
            "namespace": namespace,
            "annotations": {P + k: v for k, v in annotations.items()},
        },
        "spec": {"schedulerName": SCHED},
    }
    body = pod_review("1", op, namespace, obj, oldObject=obj if op == "UPDATE" else None)
    return webhook.decode_review(msgspec.json.encode(body))


WEBHOOK = webhook.Policy(tenancy=POLICY, service_account="system:serviceaccount:sb:sb")


@pytest.mark.parametrize(
    ("namespace", "annotations", "rule"),
    [
        ("tenant-a", {}, None),
        ("tenant-a", {"account": "a", "user-id": "43001"}, None),
        ("tenant-a", {"user-id": "0"}, "user-id"),
        ("tenant-a", {"account": "b"}, "account"),
        ("tenant-a", {"qos": "high"}, "qos"),
        ("tenant-a", {"partition": "gpu"}, "partition"),
        ("tenant-a", {"reservation": "slurmonly"}, "reservation"),
        ("default", {"user-id": "0"}, "user-id"),
        ("default", {"group-id": "0"}, "group-id"),
    ],
)
@pytest.mark.parametrize("op", ["CREATE", "UPDATE"])
def test_webhook_denies_naming_annotation_and_policy(
    namespace: str, annotations: dict[str, str], rule: str | None, op: str
) -> None:
    denied = webhook.validate(review(namespace, annotations, op), WEBHOOK)
    if rule is None:
        assert denied is None
        return
    assert denied is not None and denied.startswith(f"metadata.annotations[{P}{rule}]: ")
    assert ("tenancy policy 'team-a'" if namespace == "tenant-a" else "no tenancy policy") in denied
    answer = msgspec.json.decode(webhook.response("1", denied=denied))["response"]
    assert answer["allowed"] is False and answer["status"]["code"] == 403


def test_webhook_gives_a_tenants_pods_our_scheduler() -> None:
    body = pod_review("1", "CREATE", "tenant-a", {"metadata": {"name": "p"}, "spec": {}})
    req = webhook.decode_review(msgspec.json.encode(body))
    patch = webhook.mutate(req, WEBHOOK, {})
    assert patch == [{"op": "add", "path": "/spec/schedulerName", "value": SCHED}]
    assert base64  # (the answer's encoding is covered in test_webhook.py)


# --- the submit's encoding -------------------------------------------------------------------


def test_v0038_refuses_to_submit_as_another_user_instead_of_dropping_the_ids() -> None:
    from slurmbridge.slurm import codecs
    from slurmbridge.slurm.errors import Rejected
    from slurmbridge.slurm.models import JobSubmit

    as_alice = JobSubmit(name="j", user_id=43001, group_id=43001, external=True)
    with pytest.raises(Rejected, match="cannot submit a job as another user"):
        codecs.get("v0.0.38").encode_submit(as_alice)
    # The token's own user needs no ids: unchanged.
    assert codecs.get("v0.0.38").encode_submit(JobSubmit(name="j", external=True))
    for version in ("v0.0.42", "v0.0.44", "v0.0.45"):
        job = msgspec.json.decode(codecs.get(version).encode_submit(as_alice))["job"]
        assert (job["user_id"], job["group_id"]) == ("43001", "43001")


def test_webhook_never_gives_a_slurmd_pod_our_scheduler() -> None:
    def create(meta: dict[str, Any]) -> webhook.Request:
        body = pod_review(
            "1", "CREATE", "tenant-a", {"metadata": {"name": "p", **meta}, "spec": {}}
        )
        return webhook.decode_review(msgspec.json.encode(body))

    owner = {"ownerReferences": [{"kind": "NodeSet", "name": "n", "controller": True}]}
    assert webhook.mutate(create(owner), WEBHOOK, {}) == []
    labelled = {"labels": {"app.kubernetes.io/name": "slurmd"}}
    assert webhook.mutate(create(labelled), WEBHOOK, {}) == []
    assert webhook.mutate(create({}), WEBHOOK, {}) != []
