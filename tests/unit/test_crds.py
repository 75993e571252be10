"""The CRDs in deploy/crds/: valid for the Kubernetes versions we support, their schemas
accept good objects and name the field of bad ones, and the simulator serves them alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from schemas import wellknown
from schemas.actions import CreateNodeSetPod, NodeSetRef
from slurmbridge.devtools.sim.kube import DEFAULT_RESOURCES
from slurmbridge.kube.nodeset_pod import nodeset_pod

CRDS = Path(__file__).parents[2] / "deploy" / "crds"
K8S_VERSIONS = ("1.29.0", "1.33.0")


def crd(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((CRDS / f"{name}.yaml").read_text())
    return doc


def versions_of(name: str) -> dict[str, dict[str, Any]]:
    """The CRD's versions by name."""
    return {v["name"]: v for v in crd(name)["spec"]["versions"]}


def storage_version(name: str) -> dict[str, Any]:
    (version,) = [v for v in crd(name)["spec"]["versions"] if v["storage"]]
    return version


def schema_of(name: str, version: str | None = None) -> dict[str, Any]:
    """The schema of ``version`` (default: the storage version)."""
    v = versions_of(name)[version] if version else storage_version(name)
    schema: dict[str, Any] = v["schema"]["openAPIV3Schema"]
    return schema


def test_every_crd_file_is_here() -> None:
    assert sorted(p.name for p in CRDS.glob("*.yaml")) == [
        "clusters.slinky.slurm.net.yaml",
        "nodesets.slinky.slurm.net.yaml",
    ]


@pytest.mark.parametrize("k8s", K8S_VERSIONS)
@pytest.mark.parametrize("name", ["nodesets.slinky.slurm.net", "clusters.slinky.slurm.net"])
def test_crd_validates_against_the_kubernetes_api(name: str, k8s: str) -> None:
    doc = crd(name)
    assert doc["metadata"]["name"] == f"{doc['spec']['names']['plural']}.{doc['spec']['group']}"
    kubernetes_validate.validate(doc, k8s, strict=True)


def test_a_broken_crd_is_refused() -> None:
    """The validator is not vacuous: a CRD with a misspelt field fails."""
    doc = crd("nodesets.slinky.slurm.net")
    doc["spec"]["scopee"] = doc["spec"].pop("scope")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSIONS[-1], strict=True)


NODESET = {
    "apiVersion": "slinky.slurm.net/v1alpha1",
    "kind": "NodeSet",
    "metadata": {"name": "gpu", "namespace": "slurm"},
    "spec": {
        "clusterName": "slurm",
        "replicas": 3,
        "selector": {"matchLabels": {"app.kubernetes.io/instance": "gpu"}},
        "serviceName": "slurm-compute",
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/instance": "gpu"}},
            "spec": {"containers": [{"name": "slurmd", "image": "ghcr.io/slinkyproject/slurmd"}]},
        },
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
        "minReadySeconds": 5,
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"},
        "ordinalPadding": 3,
    },
    "status": {
        "replicas": 3,
        "readyReplicas": 2,
        "slurmIdle": 1,
        "slurmAllocated": 1,
        "slurmDown": 0,
        "slurmDrain": 1,
        "observedGeneration": 4,
        "selector": "app.kubernetes.io/instance=gpu",
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "lastTransitionTime": "2026-11-22T10:00:00Z",
                "reason": "MinimumReplicasAvailable",
                "message": "",
            }
        ],
    },
}
CLUSTER = {
    "apiVersion": "slinky.slurm.net/v1alpha1",
    "kind": "Cluster",
    "metadata": {"name": "slurm", "namespace": "slurm"},
    "spec": {
        "server": "http://slurm-restapi.slurm:6820",
        "token": {"secretRef": {"name": "slurm-token", "key": "auth-token"}},
    },
    "status": {"isReady": False},
}


def _with(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out: dict[str, Any] = yaml.safe_load(yaml.safe_dump(obj))
    cur = out
    for key in path[:-1]:
        cur = cur[key]
    if value is _DROP:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return out


_DROP = object()


@pytest.mark.parametrize(
    ("name", "obj", "field"),
    [
        ("nodesets.slinky.slurm.net", NODESET, None),
        ("clusters.slinky.slurm.net", CLUSTER, None),
        ("nodesets.slinky.slurm.net", _with(NODESET, ("spec", "replicas"), -1), "replicas"),
        (
            "nodesets.slinky.slurm.net",
            _with(NODESET, ("spec", "updateStrategy", "type"), "Sometimes"),
            "type",
        ),
        ("nodesets.slinky.slurm.net", _with(NODESET, ("spec", "template"), _DROP), "template"),
        (
            "nodesets.slinky.slurm.net",
            _with(NODESET, ("spec", "persistentVolumeClaimRetentionPolicy", "whenScaled"), "Keep"),
            "whenScaled",
        ),
        ("clusters.slinky.slurm.net", _with(CLUSTER, ("spec", "server"), "ftp://x"), "server"),
        ("clusters.slinky.slurm.net", _with(CLUSTER, ("spec", "token"), {}), "secretRef"),
    ],
)
def test_schema_accepts_good_objects_and_names_the_bad_field(
    name: str, obj: dict[str, Any], field: str | None
) -> None:
    version = str(obj["apiVersion"]).rpartition("/")[2]
    errors = list(jsonschema.Draft7Validator(schema_of(name, version)).iter_errors(obj))
    if field is None:
        assert errors == []
    else:
        assert errors, f"{field}: accepted"
        where = " ".join(str(p) for e in errors for p in [*e.absolute_path, e.message])
        assert field in where


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha1"])
def test_scale_subresource_points_at_schema_fields(version: str) -> None:
    v = versions_of("nodesets.slinky.slurm.net")[version]
    scale = v["subresources"]["scale"]
    props = v["schema"]["openAPIV3Schema"]["properties"]
    for path in scale.values():
        section, field = path.lstrip(".").split(".")
        assert field in props[section]["properties"], path


@pytest.mark.parametrize("name", ["nodesets.slinky.slurm.net", "clusters.slinky.slurm.net"])
def test_the_simulator_serves_the_crd_as_defined(name: str) -> None:
    """The simulator stores at the storage version and serves every served version (the
    CRD's conversion ``None``), with each version's subresources."""
    doc = crd(name)
    spec = next(s for s in DEFAULT_RESOURCES if s.name == name)
    storage = storage_version(name)
    served = sorted(v["name"] for v in doc["spec"]["versions"] if v["served"])
    assert doc["spec"].get("conversion", {"strategy": "None"})["strategy"] == "None"
    assert (spec.group, spec.version, spec.plural, spec.kind) == (
        doc["spec"]["group"],
        storage["name"],
        doc["spec"]["names"]["plural"],
        doc["spec"]["names"]["kind"],
    )
    assert sorted((spec.version, *spec.served_versions)) == served
    for version in doc["spec"]["versions"]:
        assert spec.status == ("status" in version["subresources"])
        if spec.scale is not None:
            scale = version["subresources"]["scale"]
            assert "." + ".".join(spec.scale.spec_replicas) == scale["specReplicasPath"]
            assert "." + ".".join(spec.scale.status_replicas) == scale["statusReplicasPath"]
            assert spec.scale.label_selector is not None
            assert "." + ".".join(spec.scale.label_selector) == scale["labelSelectorPath"]


EXAMPLES = Path(__file__).parents[2] / "deploy" / "examples"


def test_there_are_nodeset_examples() -> None:
    assert {p.name for p in EXAMPLES.glob("nodeset-*.yaml")} >= {
        "nodeset-statefulset.yaml",
        "nodeset-daemonset.yaml",
        "nodeset-partition.yaml",
    }


def strict(schema: Any) -> Any:
    """``schema`` as the API server applies it under strict field validation: every object
    schema that lists ``properties`` and neither ``additionalProperties`` nor
    ``x-kubernetes-preserve-unknown-fields`` refuses other fields. (A structural schema prunes
    unknown fields; with ``fieldValidation=Strict`` — ``kubectl --validate=strict``, the
    default since kubectl 1.27 — the server answers them as errors instead: Kubernetes docs
    "Custom Resources", "Field pruning" and "Field validation".)"""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def example(path: Path) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(path.read_text())
    return obj


NODESET_EXAMPLES = sorted(EXAMPLES.glob("nodeset-*.yaml"))


@pytest.mark.parametrize("path", NODESET_EXAMPLES, ids=lambda p: p.name)
def test_nodeset_examples_validate_against_the_crd(path: Path) -> None:
    """Each slurm-operator 1.x example is a v1beta1 NodeSet our CRD's schema accepts under
    strict field validation (an unknown field is an error, not pruned)."""
    obj = example(path)
    assert obj["apiVersion"] == "slinky.slurm.net/v1beta1"
    assert obj["kind"] == "NodeSet"
    schema = strict(schema_of("nodesets.slinky.slurm.net", "v1beta1"))
    errors = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(obj)]
    assert errors == []


def test_strict_validation_names_an_unknown_field() -> None:
    """The strict check is not vacuous: a misspelt field of the spec, of the partition or of
    the slurmd container's neighbours is refused; the pod template's spec is not checked
    here (it is kept whole, ``x-kubernetes-preserve-unknown-fields``, and checked as a Pod)."""
    schema = strict(schema_of("nodesets.slinky.slurm.net", "v1beta1"))
    base = example(EXAMPLES / "nodeset-partition.yaml")
    for path in (("spec", "replica"), ("spec", "partition", "enable")):
        errors = list(jsonschema.Draft7Validator(schema).iter_errors(_with(base, path, 1)))
        assert errors, f"{'.'.join(path)}: accepted"
    kept = _with(base, ("spec", "template"), {"spec": {"anything": 1}})
    assert list(jsonschema.Draft7Validator(schema).iter_errors(kept)) == []


@pytest.mark.parametrize("k8s", K8S_VERSIONS)
@pytest.mark.parametrize("path", NODESET_EXAMPLES, ids=lambda p: p.name)
def test_the_pods_and_claims_made_from_each_example_are_valid(path: Path, k8s: str) -> None:
    """What slurmbridge creates from each 1.x example — the slurmd pod (``spec.slurmd``
    merged into the template, ``extraConf`` as ``--conf``, pinning, claim volumes) and its
    PersistentVolumeClaims — passes kubernetes-validate, strict, for each Kubernetes
    version we support: the API server would create them."""
    obj = example(path)
    obj["metadata"]["uid"] = "0b7c6f2e-1d1a-4a47-9a55-3a4e8f8c9b10"
    ref = NodeSetRef(namespace="slurm", name=obj["metadata"]["name"], uid="")
    daemon = obj["spec"].get("scalingMode") == "DaemonSet"
    action = CreateNodeSetPod(
        nodeset=ref,
        pod_name="" if daemon else f"{ref.name}-0",
        ordinal=0,
        node="worker-1" if daemon or obj["spec"].get("pinToNode") else "",
        hostname="worker-1" if daemon else "",
    )
    pod, claims = nodeset_pod(obj, action)
    assert pod["spec"]["containers"], "no container"
    kubernetes_validate.validate(pod, k8s, strict=True)
    for claim in claims:
        kubernetes_validate.validate(claim, k8s, strict=True)
    if obj["spec"].get("volumeClaimTemplates"):
        assert claims, "no claim made from volumeClaimTemplates"


@pytest.mark.parametrize("path", NODESET_EXAMPLES, ids=lambda p: p.name)
def test_each_examples_pod_tolerates_the_managed_node_taint_once(path: Path) -> None:
    """slurmbridge puts ``slinky.slurm.net/managed-node:NoExecute`` on the nodes its slurmd
    pods make Slurm nodes: the pod made from each example tolerates it (added unless the
    template gives one), and a template's own toleration of it is not doubled."""
    obj = example(path)
    ref = NodeSetRef(namespace="slurm", name=obj["metadata"]["name"], uid="")
    action = CreateNodeSetPod(nodeset=ref, pod_name=f"{ref.name}-0", ordinal=0)
    pod, _ = nodeset_pod(obj, action)
    managed = [
        t for t in pod["spec"]["tolerations"] if t.get("key") == wellknown.TAINT_MANAGED_NODE
    ]
    assert managed == [
        {"key": wellknown.TAINT_MANAGED_NODE, "operator": "Exists", "effect": "NoExecute"}
    ]
    own = {"key": wellknown.TAINT_MANAGED_NODE, "operator": "Equal", "value": "s"}
    obj.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})["tolerations"] = [
        {"key": "gpu", "operator": "Exists"},
        own,
    ]
    pod, _ = nodeset_pod(obj, action)
    assert pod["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}, own]


def test_a_pod_with_a_misspelt_field_is_refused() -> None:
    """kubernetes-validate strict is not vacuous on pods: a misspelt container field fails."""
    obj = example(EXAMPLES / "nodeset-statefulset.yaml")
    obj["spec"]["slurmd"]["imagee"] = obj["spec"]["slurmd"].pop("image")
    action = CreateNodeSetPod(
        nodeset=NodeSetRef(namespace="slurm", name="gpu-workers", uid=""),
        pod_name="gpu-workers-0",
        ordinal=0,
    )
    pod, _ = nodeset_pod(obj, action)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, K8S_VERSIONS[-1], strict=True)


def test_v1beta1_schema_refuses_what_1x_refuses() -> None:
    """The v1beta1 enums and patterns are 1.x's: a wrong scalingMode, pruning policy, update
    strategy or a multi-line partition config is named."""
    schema = schema_of("nodesets.slinky.slurm.net", "v1beta1")
    base = yaml.safe_load((EXAMPLES / "nodeset-partition.yaml").read_text())
    for path, value, field in [
        (("spec", "scalingMode"), "ReplicaSet", "scalingMode"),
        (("spec", "pruneSlurmNodeRecords"), "Always", "pruneSlurmNodeRecords"),
        (("spec", "updateStrategy"), {"type": "Sometimes"}, "type"),
        (("spec", "partition", "config"), "a\nb", "config"),
        (("spec", "replicas"), -1, "replicas"),
    ]:
        errors = list(jsonschema.Draft7Validator(schema).iter_errors(_with(base, path, value)))
        assert errors, f"{field}: accepted"
        assert field in " ".join(str(p) for e in errors for p in e.absolute_path)


def test_v1alpha1_objects_keep_their_cluster_in_v1beta1() -> None:
    """conversion None prunes to the version read at: v1beta1 keeps v1alpha1's clusterName,
    serviceName and selector (deprecated) so stored v1alpha1 NodeSets are read whole."""
    beta = schema_of("nodesets.slinky.slurm.net", "v1beta1")["properties"]["spec"]["properties"]
    alpha = schema_of("nodesets.slinky.slurm.net", "v1alpha1")["properties"]["spec"]["properties"]
    assert set(alpha) <= set(beta)


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha1"])
def test_replicas_is_bounded_at_the_reconcilers_maximum(version: str) -> None:
    """The CRD's ``replicas`` maximum is the bound the nodeset reconciler holds NodeSets at
    (reconcilers.nodeset.MAX_REPLICAS): one number, checked in two places."""
    from reconcilers.nodeset import MAX_REPLICAS

    replicas = schema_of("nodesets.slinky.slurm.net", version)["properties"]["spec"]["properties"][
        "replicas"
    ]
    assert replicas["maximum"] == MAX_REPLICAS
    obj = _with(NODESET, ("spec", "replicas"), 10**9)
    obj["apiVersion"] = f"slinky.slurm.net/{version}"
    if version == "v1beta1":
        obj = _with(example(EXAMPLES / "nodeset-statefulset.yaml"), ("spec", "replicas"), 10**9)
    errors = list(
        jsonschema.Draft7Validator(schema_of("nodesets.slinky.slurm.net", version)).iter_errors(obj)
    )
    assert [list(e.absolute_path) for e in errors] == [["spec", "replicas"]]


def _strings_without_max_length(schema: Any, path: str = "") -> list[str]:
    """Paths of string fields without ``maxLength`` or ``enum`` (the status is written by
    slurmbridge, the pod template is checked as a Pod, conditions carry their own bounds)."""
    out: list[str] = []
    if not isinstance(schema, dict):
        return out
    bounded = "maxLength" in schema or "enum" in schema or schema.get("format") == "date-time"
    if schema.get("type") == "string" and not bounded:
        out.append(path)
    for name, sub in (schema.get("properties") or {}).items():
        out += _strings_without_max_length(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        out += _strings_without_max_length(schema["items"], f"{path}[]")
    return out


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha1"])
def test_every_spec_string_has_a_length_bound(version: str) -> None:
    spec = schema_of("nodesets.slinky.slurm.net", version)["properties"]["spec"]
    # Label maps are bounded by Kubernetes' own label rules when the pods are created.
    assert _strings_without_max_length(spec) == []
    cluster = schema_of("clusters.slinky.slurm.net")["properties"]["spec"]
    assert _strings_without_max_length(cluster) == []


SIM_CRDS = Path(__file__).parents[2] / "slurmbridge" / "devtools" / "sim" / "crds"


def test_the_simulator_packages_the_deploy_crds() -> None:
    """The simulator reads its CRDs from its package (deploy/ is not in the wheel): byte for
    byte deploy/crds, and each served version's schema is what the simulator enforces."""
    ours = sorted(p.name for p in CRDS.glob("*.yaml"))
    assert sorted(p.name for p in SIM_CRDS.glob("*.yaml")) == ours
    for name in ours:
        assert (SIM_CRDS / name).read_bytes() == (CRDS / name).read_bytes(), name
    for name in ("nodesets.slinky.slurm.net", "clusters.slinky.slurm.net"):
        spec = next(s for s in DEFAULT_RESOURCES if s.name == name)
        assert dict(spec.schemas) == {
            version: v["schema"]["openAPIV3Schema"] for version, v in versions_of(name).items()
        }


def test_an_update_is_not_blamed_for_what_it_did_not_change() -> None:
    """Ratcheting (CRDValidationRatcheting): an object stored before a tighter schema can
    still be written when the update leaves the bad field as it was; changing it is refused."""
    from slurmbridge.devtools.sim import crdschema

    schema = schema_of("nodesets.slinky.slurm.net", "v1beta1")
    old = {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "metadata": {}}
    old["spec"] = {"replicas": 10**9}
    same = yaml.safe_load(yaml.safe_dump(old))
    same["status"] = {"replicas": 3}
    assert crdschema.admit(same, schema, old) == []
    worse = yaml.safe_load(yaml.safe_dump(old))
    worse["spec"]["replicas"] = 10**9 + 1
    assert [c[0] for c in crdschema.admit(worse, schema, old)] == ["spec.replicas"]
    assert [c[0] for c in crdschema.admit(worse, schema)] == ["spec.replicas"]
