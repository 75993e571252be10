"""The CRDs in deploy/crds/: valid for the Kubernetes versions we support, their schemas
accept good objects and name the field of bad ones, and the simulator serves them alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from slurmbridge.devtools.sim.kube import DEFAULT_RESOURCES

CRDS = Path(__file__).parents[2] / "deploy" / "crds"
K8S_VERSIONS = ("1.29.0", "1.33.0")


def crd(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((CRDS / f"{name}.yaml").read_text())
    return doc


def schema_of(name: str) -> dict[str, Any]:
    (version,) = crd(name)["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
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
    errors = list(jsonschema.Draft7Validator(schema_of(name)).iter_errors(obj))
    if field is None:
        assert errors == []
    else:
        assert errors, f"{field}: accepted"
        where = " ".join(str(p) for e in errors for p in [*e.absolute_path, e.message])
        assert field in where


def test_scale_subresource_points_at_schema_fields() -> None:
    (version,) = crd("nodesets.slinky.slurm.net")["spec"]["versions"]
    scale = version["subresources"]["scale"]
    props = version["schema"]["openAPIV3Schema"]["properties"]
    for path in scale.values():
        section, field = path.lstrip(".").split(".")
        assert field in props[section]["properties"], path


@pytest.mark.parametrize("name", ["nodesets.slinky.slurm.net", "clusters.slinky.slurm.net"])
def test_the_simulator_serves_the_crd_as_defined(name: str) -> None:
    doc = crd(name)
    spec = next(s for s in DEFAULT_RESOURCES if s.name == name)
    (version,) = doc["spec"]["versions"]
    assert (spec.group, spec.version, spec.plural, spec.kind) == (
        doc["spec"]["group"],
        version["name"],
        doc["spec"]["names"]["plural"],
        doc["spec"]["names"]["kind"],
    )
    assert spec.status == ("status" in version["subresources"])
    if spec.scale is not None:
        scale = version["subresources"]["scale"]
        assert "." + ".".join(spec.scale.spec_replicas) == scale["specReplicasPath"]
        assert "." + ".".join(spec.scale.status_replicas) == scale["statusReplicasPath"]
        assert spec.scale.label_selector is not None
        assert "." + ".".join(spec.scale.label_selector) == scale["labelSelectorPath"]
