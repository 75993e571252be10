"""Admission webhook rules (pure): mutation, validation, selectors, decoding."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from schemas import wellknown
from schemas.events import KubeDeviceClass
from slurmbridge import config
from slurmbridge.kube.labelselector import check_selector, selector_matches
from slurmbridge.webhook import (
    CachedNamespaceLabels,
    Policy,
    ReloadingTLS,
    WebhookError,
    WebhookServer,
    decode_review,
    mutate,
    response,
    validate,
)

OURS = wellknown.DEFAULT_SCHEDULER_NAME
JOBID = wellknown.LABEL_SLURM_JOBID
NODE = wellknown.ANNOTATION_SLURM_NODE
SA = "system:serviceaccount:slurmbridge:slurmbridge"
P = wellknown.ANNOTATION_SLURMJOB_PREFIX


def pod(
    *,
    ns: str = "hpc",
    scheduler: str | None = None,
    node: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    phase: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}], **spec}
    if scheduler is not None:
        s["schedulerName"] = scheduler
    if node is not None:
        s["nodeName"] = node
    p: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": ns, "labels": labels or {}},
        "spec": s,
    }
    if annotations:
        p["metadata"]["annotations"] = annotations
    if phase:
        p["status"] = {"phase": phase}
    return p


def review(
    obj: dict[str, Any] | None,
    *,
    op: str = "CREATE",
    old: dict[str, Any] | None = None,
    sub: str = "",
    user: str = "alice",
) -> bytes:
    req: dict[str, Any] = {
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": op,
        "namespace": (obj or old or {}).get("metadata", {}).get("namespace", ""),
        "name": "p",
        "userInfo": {"username": user},
        "object": obj,
        "oldObject": old,
    }
    if sub:
        req["subResource"] = sub
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
    ).encode()


BY_LIST = Policy(managed_namespaces=frozenset({"hpc"}), service_account=SA)
BY_SELECTOR = Policy(
    managed_namespace_selector={"matchLabels": {"slurm": "yes"}}, service_account=SA
)


def by_expression(op: str, *values: str) -> Policy:
    expr: dict[str, Any] = {"key": "slurm", "operator": op}
    if values:
        expr["values"] = list(values)
    return Policy(managed_namespace_selector={"matchExpressions": [expr]}, service_account=SA)


@dataclass(frozen=True)
class MutateCase:
    name: str
    pod: dict[str, Any]
    want: list[dict[str, Any]]
    policy: Policy = BY_LIST
    ns_labels: dict[str, str] = field(default_factory=dict)


SET = {"op": "add", "path": "/spec/schedulerName", "value": OURS}
CLEAR = {"op": "remove", "path": "/spec/nodeName"}
MUTATE = [
    MutateCase("managed by list, no scheduler", pod(), [SET]),
    MutateCase("managed by list, default-scheduler", pod(scheduler="default-scheduler"), [SET]),
    MutateCase("not managed", pod(ns="web"), []),
    MutateCase("another scheduler asked for explicitly", pod(scheduler="volcano"), []),
    MutateCase("already ours", pod(scheduler=OURS), []),
    MutateCase("ours with nodeName", pod(scheduler=OURS, node="n1"), [CLEAR]),
    MutateCase("managed, nodeName set", pod(node="n1"), [SET, CLEAR]),
    MutateCase("unmanaged nodeName kept", pod(ns="web", node="n1"), []),
    MutateCase("selector matches", pod(), [SET], BY_SELECTOR, {"slurm": "yes"}),
    MutateCase("selector does not match", pod(), [], BY_SELECTOR, {"slurm": "no"}),
    MutateCase("selector, namespace unlabelled", pod(), [], BY_SELECTOR, {}),
    MutateCase("In matches", pod(), [SET], by_expression("In", "a", "b"), {"slurm": "b"}),
    MutateCase("In, other value", pod(), [], by_expression("In", "a"), {"slurm": "c"}),
    MutateCase("In, key absent", pod(), [], by_expression("In", "a"), {}),
    MutateCase("NotIn, other value", pod(), [SET], by_expression("NotIn", "a"), {"slurm": "c"}),
    MutateCase("NotIn, key absent", pod(), [SET], by_expression("NotIn", "a"), {}),
    MutateCase("NotIn, listed value", pod(), [], by_expression("NotIn", "a"), {"slurm": "a"}),
    MutateCase("Exists", pod(), [SET], by_expression("Exists"), {"slurm": ""}),
    MutateCase("Exists, key absent", pod(), [], by_expression("Exists"), {"x": "y"}),
    MutateCase("DoesNotExist", pod(), [SET], by_expression("DoesNotExist"), {"x": "y"}),
    MutateCase("DoesNotExist, key set", pod(), [], by_expression("DoesNotExist"), {"slurm": "1"}),
    MutateCase(
        "listed beats selector",
        pod(),
        [SET],
        Policy(
            managed_namespaces=frozenset({"hpc"}),
            managed_namespace_selector={"matchLabels": {"slurm": "yes"}},
        ),
    ),
]


@pytest.mark.parametrize("case", MUTATE, ids=lambda c: c.name)
def test_mutate(case: MutateCase) -> None:
    assert mutate(decode_review(review(case.pod)), case.policy, case.ns_labels) == case.want


def test_mutate_only_on_create() -> None:
    req = decode_review(review(pod(), op="UPDATE", old=pod()))
    assert mutate(req, BY_LIST, {}) == []


def test_other_resources_pass_untouched() -> None:
    """A configuration that also sends, say, Deployments gets them allowed as they are; their
    objects are not even decoded as pods."""
    body = json.loads(review(pod(scheduler=OURS, labels={JOBID: "1"})))
    body["request"]["resource"] = {"group": "apps", "version": "v1", "resource": "deployments"}
    body["request"]["object"]["status"] = {"phase": 3}  # not a Pod's status: never read
    req = decode_review(json.dumps(body).encode())
    assert not req.is_pod and req.object is None
    assert mutate(req, BY_LIST, {}) == []
    assert validate(req, BY_LIST) is None


@dataclass(frozen=True)
class ValidateCase:
    name: str
    body: bytes
    denied: str | None  # a fragment of the message, None = allowed


RUNNING = pod(scheduler=OURS, node="n1", labels={JOBID: "7"}, annotations={NODE: "n1"})
RUNNING_PHASE = dict(RUNNING, status={"phase": "Running"})
PENDING = pod(scheduler=OURS, labels={JOBID: "7"})
VALIDATE = [
    ValidateCase("plain pod of ours", review(pod(scheduler=OURS)), None),
    ValidateCase(
        "user sets the jobid label",
        review(pod(scheduler=OURS, labels={JOBID: "1"})),
        f"metadata.labels[{JOBID}]: set by slurm-bridge",
    ),
    ValidateCase(
        "user sets the node annotation",
        review(pod(scheduler=OURS, annotations={NODE: "n1"})),
        f"metadata.annotations[{NODE}]: set by slurm-bridge",
    ),
    ValidateCase(
        "resourceClaims are allowed (their classes are checked when the server reads them)",
        review(pod(scheduler=OURS, resourceClaims=[{"name": "gpu"}])),
        None,
    ),
    ValidateCase(
        "topology spread constraints",
        review(
            pod(
                scheduler=OURS,
                topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone"}],
            )
        ),
        "spec.topologySpreadConstraints",
    ),
    ValidateCase("empty lists are fine", review(pod(scheduler=OURS, resourceClaims=[])), None),
    ValidateCase(
        "another scheduler's pod may do anything",
        review(pod(scheduler="volcano", labels={JOBID: "1"}, resourceClaims=[{"name": "x"}])),
        None,
    ),
    ValidateCase(
        "pods/resize of our pod",
        review(RUNNING, op="UPDATE", old=RUNNING, sub="resize"),
        "pods/resize",
    ),
    ValidateCase(
        "pods/resize of another scheduler's pod",
        review(pod(scheduler="volcano"), op="UPDATE", old=pod(scheduler="volcano"), sub="resize"),
        None,
    ),
    ValidateCase(
        "jobid label changed on a bound pod",
        review(
            pod(scheduler=OURS, node="n1", labels={JOBID: "8"}, annotations={NODE: "n1"}),
            op="UPDATE",
            old=RUNNING,
        ),
        f"metadata.labels[{JOBID}]: cannot change on a pod that is bound or running",
    ),
    ValidateCase(
        "jobid label removed on a running pod",
        review(
            dict(
                pod(scheduler=OURS, node="n1", annotations={NODE: "n1"}),
                status={"phase": "Running"},
            ),
            op="UPDATE",
            old=RUNNING_PHASE,
        ),
        f"metadata.labels[{JOBID}]",
    ),
    ValidateCase(
        "node annotation changed on a bound pod",
        review(
            pod(scheduler=OURS, node="n1", labels={JOBID: "7"}, annotations={NODE: "n9"}),
            op="UPDATE",
            old=RUNNING,
        ),
        f"metadata.annotations[{NODE}]: cannot change",
    ),
    ValidateCase(
        "slurmbridge itself may change them",
        review(
            pod(scheduler=OURS, node="n1", labels={JOBID: "8"}, annotations={NODE: "n1"}),
            op="UPDATE",
            old=RUNNING,
            user=SA,
        ),
        None,
    ),
    ValidateCase(
        "label change on a pending unbound pod is allowed",
        review(pod(scheduler=OURS, labels={JOBID: "9"}), op="UPDATE", old=PENDING),
        None,
    ),
    ValidateCase(
        "other updates of a running pod are allowed",
        review(
            pod(scheduler=OURS, node="n1", labels={JOBID: "7", "x": "y"}, annotations={NODE: "n1"}),
            op="UPDATE",
            old=RUNNING,
        ),
        None,
    ),
    # Slinky admission.go validateConstraintsAnnotation (admission_test.go): what Slurm
    # cannot AND with slurm_bridge_gres_compatible is denied, on CREATE and UPDATE.
    ValidateCase(
        "constraints Slurm cannot combine",
        review(pod(scheduler=OURS, annotations={P + "constraints": "(a&b)|(c&d)"})),
        f"metadata.annotations[{P}constraints]: constraint '(a&b)|(c&d)'",
    ),
    ValidateCase(
        "a count outside brackets, on UPDATE",
        review(
            pod(scheduler=OURS, annotations={P + "constraints": "rack1*2"}),
            op="UPDATE",
            old=pod(scheduler=OURS),
        ),
        "feature count outside square brackets",
    ),
    ValidateCase(
        "constraints Slurm can combine",
        review(pod(scheduler=OURS, annotations={P + "constraints": "gpu|fat"})),
        None,
    ),
    ValidateCase("binding subresource is not ours to judge", review(None, sub="binding"), None),
    ValidateCase("DELETE", review(None, op="DELETE", old=RUNNING), None),
]


@pytest.mark.parametrize("case", VALIDATE, ids=lambda c: c.name)
def test_validate(case: ValidateCase) -> None:
    got = validate(decode_review(case.body), BY_LIST)
    if case.denied is None:
        assert got is None
    else:
        assert got is not None and case.denied in got, got


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "$: not JSON"),
        (b"[]", "$: Expected `object`, got `array`"),
        (
            b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}',
            "$.apiVersion/kind: expected admission.k8s.io/v1 AdmissionReview",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
            "$.request: required",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",'
            b' "request": {"operation": "CREATE"}}',
            "$.request.uid: required",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",'
            b' "request": {"uid": "u", "operation": "CREATE", "userInfo": {"username": 1}}}',
            "$.request.userInfo.username: Expected `str`, got `int`",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",'
            b' "request": {"uid": "u", "operation": "CREATE", "resource": {"resource": "pods"},'
            b' "object": {"spec": {"nodeName": 3}}}}',
            "$.request.object.spec.nodeName: Expected `str`, got `int`",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",'
            b' "request": {"uid": "u", "operation": "UPDATE", "resource": {"resource": "pods"},'
            b' "object": {}, "oldObject": {"metadata": {"labels": {"a": 1}}}}}',
            "$.request.oldObject.metadata.labels[...]: Expected `str`, got `int`",
        ),
    ],
)
def test_bad_reviews_name_the_field(body: bytes, field: str) -> None:
    with pytest.raises(WebhookError) as err:
        decode_review(body)
    assert str(err.value).startswith(field), str(err.value)


SEL = {
    "matchLabels": {"team": "hpc"},
    "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
        {"key": "frozen", "operator": "DoesNotExist"},
        {"key": "slurm", "operator": "Exists"},
        {"key": "env", "operator": "NotIn", "values": ["dev"]},
    ],
}


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        ({"team": "hpc", "tier": "gold", "slurm": ""}, True),
        ({"team": "hpc", "tier": "gold", "slurm": "", "env": "prod"}, True),
        ({"team": "hpc", "tier": "gold", "slurm": "", "env": "dev"}, False),  # NotIn
        ({"team": "hpc", "tier": "bronze", "slurm": ""}, False),  # In
        ({"team": "hpc", "tier": "gold"}, False),  # Exists
        ({"team": "hpc", "tier": "gold", "slurm": "", "frozen": "1"}, False),  # DoesNotExist
        ({"team": "web", "tier": "gold", "slurm": ""}, False),  # matchLabels
    ],
)
def test_selector_matches(labels: dict[str, str], want: bool) -> None:
    assert selector_matches(SEL, labels) is want
    assert selector_matches({}, labels) is True


@pytest.mark.parametrize(
    ("selector", "msg"),
    [
        ({"matchLabel": {}}, r"sel\.matchLabel: unknown key"),
        ({"matchExpressions": [{"key": "a", "operator": "Like"}]}, r"\[0\]\.operator"),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, r"\[0\]\.values"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "values"),
        ({"matchExpressions": [{"operator": "Exists"}]}, r"\[0\]\.key"),
        ({"matchExpressions": {"key": "a"}}, r"sel\.matchExpressions: must be a list"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}, r"\[0\]\.values"),
        ({"matchLabels": {"a": 1}}, r"sel\.matchLabels"),
    ],
)
def test_check_selector_names_the_path(selector: dict[str, Any], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        check_selector(selector, "sel")


def test_config_rejects_a_bad_selector_and_missing_cert(tmp_path: Any) -> None:
    bad = {"managedNamespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}}
    with pytest.raises(config.ConfigError, match=r"\$\.managedNamespaceSelector\.matchExpressions"):
        config.load(env={}, overrides=bad)
    with pytest.raises(config.ConfigError, match=r"\$\.webhook\.certFile: no such file"):
        config.load(env={}, overrides={"webhook": {"certFile": str(tmp_path / "none.pem")}})
    with pytest.raises(config.ConfigError, match=r"\$\.webhook\.port"):
        config.load(env={}, overrides={"webhook": {"port": 70000}})
    cert = tmp_path / "tls.crt"
    cert.write_text("not checked here")
    with pytest.raises(config.ConfigError, match=r"\$\.webhook\.keyFile: set certFile and keyFile"):
        config.load(env={}, overrides={"webhook": {"certFile": str(cert)}})
    with pytest.raises(
        config.ConfigError, match=r"\$\.webhook\.certFile: set certFile and keyFile"
    ):
        config.load(env={}, overrides={"webhook": {"keyFile": str(cert)}})
    s = config.load(env={"SLURMBRIDGE_WEBHOOK_PORT": "8443"})
    assert s.webhook.port == 8443


def test_response_shapes() -> None:
    allowed = json.loads(response("u", patch=[SET]))
    assert allowed["apiVersion"] == "admission.k8s.io/v1"
    r = allowed["response"]
    assert (r["uid"], r["allowed"], r["patchType"]) == ("u", True, "JSONPatch")
    assert json.loads(base64.b64decode(r["patch"])) == [SET]
    denied = json.loads(response("u", denied="spec.x: no"))["response"]
    assert denied["allowed"] is False
    assert denied["status"] == {"code": 403, "reason": "Forbidden", "message": "spec.x: no"}
    plain = json.loads(response("u"))["response"]
    assert plain == {"uid": "u", "allowed": True}


@pytest.mark.parametrize(
    ("cert", "key", "field"),
    [(None, None, "certFile"), (None, "k.pem", "certFile"), ("c.pem", None, "keyFile")],
)
def test_tls_is_required(cert: str | None, key: str | None, field: str) -> None:
    with pytest.raises(config.ConfigError, match=rf"^\$\.webhook\.{field}: required"):
        ReloadingTLS(cert, key)


async def test_namespace_labels_are_cached_for_the_ttl() -> None:
    now = [100.0]
    reads: list[str] = []
    answers: dict[str, dict[str, str]] = {"hpc": {"slurm": "yes"}}

    async def read(name: str) -> dict[str, str]:
        reads.append(name)
        if name not in answers:
            raise LookupError(f"namespaces {name!r} not found")
        return dict(answers[name])

    labels = CachedNamespaceLabels(read, ttl=30.0, clock=lambda: now[0])
    assert await labels("hpc") == {"slurm": "yes"}
    answers["hpc"] = {}
    now[0] += 29.0
    assert await labels("hpc") == {"slurm": "yes"}  # cached
    now[0] += 2.0
    assert await labels("hpc") == {}  # expired: read again
    assert await labels("gone") == {}  # a failed read is no labels …
    assert await labels("gone") == {}  # … and is not cached
    assert reads == ["hpc", "hpc", "gone", "gone"]


# --- DRA (Slinky slurm-bridge internal/admission; dra.go validateDeviceClassRequests) ------

GPU = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"
EXAMPLE = "deviceclass.resource.kubernetes.io/gpu.example.com"
CPU = "deviceclass.resource.kubernetes.io/dra.cpu"
GRES = wellknown.ANNOTATION_SLURMJOB_PREFIX + "gres"
PER_TASK = wellknown.ANNOTATION_SLURMJOB_PREFIX + "cpu-per-task"


def ctr(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None):
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    return {"name": name, "image": "busybox", "resources": res}


@dataclass(frozen=True)
class DraCase:
    name: str
    body: bytes
    denied: str | None
    claims: dict[str, tuple[str, ...]] | None = None


DRA = [
    DraCase("nvidia GPUs", review(pod(scheduler=OURS, containers=[ctr("c", {GPU: "2"})])), None),
    DraCase(
        "example GPUs in limits",
        review(pod(scheduler=OURS, containers=[ctr("c", limits={EXAMPLE: "1"})])),
        None,
    ),
    DraCase("dra.cpu alone", review(pod(scheduler=OURS, containers=[ctr("c", {CPU: "2"})])), None),
    DraCase(
        "an unsupported class in a request",
        review(
            pod(
                scheduler=OURS,
                containers=[ctr("c", {"deviceclass.resource.kubernetes.io/fpga.x": "1"})],
            )
        ),
        "spec.containers[c].resources.requests[deviceclass.resource.kubernetes.io/fpga.x]: "
        "device class 'fpga.x' is not supported",
    ),
    DraCase(
        "an unsupported class in an init container's limit",
        review(
            pod(
                scheduler=OURS,
                initContainers=[ctr("i", limits={"deviceclass.resource.kubernetes.io/nic": "1"})],
            )
        ),
        "spec.initContainers[i].resources.limits[deviceclass.resource.kubernetes.io/nic]",
    ),
    DraCase(
        "native cpu request with dra.cpu",
        review(pod(scheduler=OURS, containers=[ctr("c", {"cpu": "1", CPU: "2"})])),
        "resources[cpu]: cannot be set together with the CPU DRA resource",
    ),
    DraCase(
        "native cpu limit in another container with dra.cpu",
        review(
            pod(
                scheduler=OURS,
                containers=[ctr("a", {CPU: "2"}), ctr("b", limits={"cpu": "1"})],
            )
        ),
        "resources[cpu]: cannot be set",
    ),
    DraCase(
        "pod-level cpu with dra.cpu",
        review(
            pod(
                scheduler=OURS,
                containers=[ctr("a", {CPU: "2"})],
                resources={"requests": {"cpu": "2"}},
            )
        ),
        "resources[cpu]: cannot be set",
    ),
    DraCase(
        "gres annotation with a GPU class",
        review(pod(scheduler=OURS, annotations={GRES: "gpu:2"}, containers=[ctr("c", {GPU: "2"})])),
        f"metadata.annotations[{GRES}]: conflicts with DRA device class 'gpu.nvidia.com'",
    ),
    DraCase(
        "gres annotation with dra.cpu only is fine",
        review(pod(scheduler=OURS, annotations={GRES: "gpu:2"}, containers=[ctr("c", {CPU: "2"})])),
        None,
    ),
    DraCase(
        "cpu-per-task annotation with dra.cpu",
        review(pod(scheduler=OURS, annotations={PER_TASK: "2"}, containers=[ctr("c", {CPU: "2"})])),
        f"metadata.annotations[{PER_TASK}]: conflicts with the CPU DRA resource",
    ),
    DraCase(
        "one GPU class requested by two containers",
        review(pod(scheduler=OURS, containers=[ctr("a", {GPU: "1"}), ctr("b", {GPU: "1"})])),
        "spec.containers[b].resources.requests[deviceclass.resource.kubernetes.io/gpu.nvidia.com]"
        ": device class 'gpu.nvidia.com' is also requested by container 'a'",
    ),
    DraCase(
        "dra.cpu in two containers is fine (Slinky)",
        review(pod(scheduler=OURS, containers=[ctr("a", {CPU: "1"}), ctr("b", {CPU: "1"})])),
        None,
    ),
    DraCase(
        "a zero request in a second container is not a second request",
        review(pod(scheduler=OURS, containers=[ctr("a", {GPU: "1"}), ctr("b", {GPU: "0"})])),
        None,
    ),
    DraCase(
        "a claim of a supported class",
        review(
            pod(scheduler=OURS, resourceClaims=[{"name": "g", "resourceClaimTemplateName": "t"}])
        ),
        None,
        {"g": ("gpu.nvidia.com",)},
    ),
    DraCase(
        "a claim of another class",
        review(pod(scheduler=OURS, resourceClaims=[{"name": "g", "resourceClaimName": "c1"}])),
        "spec.resourceClaims[0] (g): device class 'fpga.example.com' is not supported",
        {"g": ("fpga.example.com",)},
    ),
    DraCase(
        "a GPU claim with the gres annotation",
        review(
            pod(
                scheduler=OURS,
                annotations={GRES: "gpu:1"},
                resourceClaims=[{"name": "g", "resourceClaimName": "c1"}],
            )
        ),
        f"metadata.annotations[{GRES}]: conflicts",
        {"g": ("gpu.example.com",)},
    ),
    DraCase(
        "a dra.cpu claim with native cpu",
        review(
            pod(
                scheduler=OURS,
                containers=[ctr("c", {"cpu": "1"})],
                resourceClaims=[{"name": "g", "resourceClaimName": "c1"}],
            )
        ),
        "resources[cpu]: cannot be set",
        {"g": ("dra.cpu",)},
    ),
    DraCase(
        "an unreadable claim is not checked here",
        review(pod(scheduler=OURS, resourceClaims=[{"name": "g", "resourceClaimName": "c1"}])),
        None,
        {},
    ),
    DraCase(
        "another scheduler's pod is not checked",
        review(
            pod(
                scheduler="volcano",
                containers=[ctr("c", {"deviceclass.resource.kubernetes.io/x": "1"})],
            )
        ),
        None,
    ),
    DraCase(
        "an update adding the gres annotation to a GPU pod",
        review(
            pod(scheduler=OURS, annotations={GRES: "gpu:1"}, containers=[ctr("c", {GPU: "1"})]),
            op="UPDATE",
            old=pod(scheduler=OURS, containers=[ctr("c", {GPU: "1"})]),
        ),
        f"metadata.annotations[{GRES}]: conflicts",
    ),
    DraCase(
        "slurmbridge's own update is not judged",
        review(
            pod(scheduler=OURS, annotations={GRES: "gpu:1"}, containers=[ctr("c", {GPU: "1"})]),
            op="UPDATE",
            old=pod(scheduler=OURS, containers=[ctr("c", {GPU: "1"})]),
            user=SA,
        ),
        None,
    ),
]


@pytest.mark.parametrize("case", DRA, ids=lambda c: c.name)
def test_dra_rules(case: DraCase) -> None:
    got = validate(decode_review(case.body), BY_LIST, case.claims)
    if case.denied is None:
        assert got is None
    else:
        assert got is not None and case.denied in got, got


async def test_the_server_reads_claim_classes_and_skips_unreadable_ones() -> None:
    asked: list[tuple[str, str, str]] = []

    async def lookup(namespace: str, claim: str, template: str) -> tuple[str, ...] | None:
        asked.append((namespace, claim, template))
        if template == "broken":
            raise RuntimeError("API down")
        if claim == "gone":
            return None
        return ("gpu.nvidia.com",) if template else ("fpga.example.com",)

    server = WebhookServer(BY_LIST, bind="127.0.0.1", port=0, cert_file=None, key_file=None)
    server.claim_lookup = lookup
    claims = [
        {"name": "a", "resourceClaimTemplateName": "t"},
        {"name": "b", "resourceClaimName": "c"},
        {"name": "c", "resourceClaimName": "gone"},
        {"name": "d", "resourceClaimTemplateName": "broken"},
    ]
    req = decode_review(review(pod(scheduler=OURS, resourceClaims=claims)))
    got = await server._claim_classes(req)
    assert got == {"a": ("gpu.nvidia.com",), "b": ("fpga.example.com",)}
    assert asked == [("hpc", "", "t"), ("hpc", "c", ""), ("hpc", "gone", ""), ("hpc", "", "broken")]
    denied = validate(req, BY_LIST, got)
    assert denied is not None and denied.startswith("spec.resourceClaims[1] (b): device class")
    # Without a lookup (no API access), nothing is read.
    assert (
        await WebhookServer(BY_LIST, bind="", port=0, cert_file=None, key_file=None)._claim_classes(
            req
        )
        is None
    )


# --- DeviceClasses by device profile (issue 28, item 6; Slinky 1.3 internal/dra) -------------

NVIDIA_PROFILE = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)
ACCEL = "deviceclass.resource.kubernetes.io/accel"


@pytest.mark.parametrize(
    ("kinds", "requests", "denied"),
    [
        # registry.go MatchDeviceClass: the class's selector makes it a GPU class, any name.
        ({"accel": "gpu"}, {ACCEL: "2"}, None),
        ({"my-cpus": "cpu"}, {"deviceclass.resource.kubernetes.io/my-cpus": "2"}, None),
        # A CPU profile class still excludes native cpu (admission validateCPUResources).
        (
            {"my-cpus": "cpu"},
            {"deviceclass.resource.kubernetes.io/my-cpus": "2", "cpu": "1"},
            "resources[cpu]: cannot be set",
        ),
        # Its DeviceClass matches no profile, and the name is none slurmbridge knows.
        ({"accel": ""}, {ACCEL: "1"}, "its DeviceClass's selector is not exactly one of"),
        # No DeviceClass read at all: the name decides.
        ({}, {ACCEL: "1"}, "no DeviceClass of that name selects a supported device profile"),
        # NICs (dranet-rdma) are not asked of Slurm yet.
        ({"rdma": "nic"}, {"deviceclass.resource.kubernetes.io/rdma": "1"}, "is not supported"),
    ],
    ids=["gpu alias", "cpu alias", "cpu alias and cpu", "no profile", "unknown", "nic"],
)
def test_dra_rules_by_device_profile(
    kinds: dict[str, str], requests: dict[str, str], denied: str | None
) -> None:
    req = decode_review(review(pod(scheduler=OURS, containers=[ctr("c", requests)])))
    got = validate(req, BY_LIST, None, kinds)
    if denied is None:
        assert got is None
    else:
        assert got is not None and denied in got, got


async def test_the_server_matches_the_pods_device_classes_to_profiles() -> None:
    asked: list[str] = []

    async def lookup(name: str) -> KubeDeviceClass | None:
        asked.append(name)
        if name == "broken":
            raise RuntimeError("API down")
        if name == "gone":
            return None
        expr = NVIDIA_PROFILE if name == "accel" else "device.driver == 'x'"
        return KubeDeviceClass(source="k8s", key=name, selectors=(expr,))

    server = WebhookServer(BY_LIST, bind="127.0.0.1", port=0, cert_file=None, key_file=None)
    server.class_lookup = lookup
    res = "deviceclass.resource.kubernetes.io/"
    containers = [ctr("c", {res + n: "1" for n in ("accel", "odd", "gone", "broken")})]
    req = decode_review(review(pod(scheduler=OURS, containers=containers)))
    got = await server._class_kinds(req, {"g": ("accel", "")})
    assert got == {"accel": "gpu", "odd": ""}
    assert asked == ["accel", "broken", "gone", "odd"]
