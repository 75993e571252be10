"""deploy/: the Helm chart renders and lints offline (helm-python-sdk, Helm's Go engine without a
helm binary) for both layouts, every manifest validates for the Kubernetes versions we support,
pods run restricted, each component's RBAC is its own, every granted rule names calls the code
makes, the webhook configurations send the API server's requests to the webhook exactly when
the webhook's own rules could act on them, and the ConfigMap is a configuration slurmbridge
accepts. Also the Dockerfile, compose file and Grafana dashboard."""

from __future__ import annotations

import copy
import filecmp
import functools
import itertools
import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import celpy
import helm_python as helm
import kubernetes_validate
import pytest
import yaml

import reconcilers
from slurmbridge import components, config, webhook
from slurmbridge.cli import main as cli
from slurmbridge.kube.labelselector import selector_matches

ROOT = Path(__file__).parents[2]
CHART = ROOT / "deploy" / "helm" / "slurmbridge"
K8S_VERSIONS = ("1.29.0", "1.33.0")
#: The code that runs in a deployment (the simulators and rigs of devtools never do).
SOURCES = [
    *sorted(
        p
        for p in (ROOT / "slurmbridge").rglob("*.py")
        if "devtools" not in p.relative_to(ROOT).parts
    ),
    *sorted((ROOT / "producers").rglob("*.py")),
]
ALL_COMPONENTS = sorted([*components.PRODUCERS, *reconcilers.ALL, "webhook"])
SELECTOR = {"matchLabels": {"slurm": "yes"}}

LAYOUTS: dict[str, dict[str, Any]] = {
    "default": {},
    "per-component": {"layout": "per-component"},
    "cert-manager and ServiceMonitor": {
        "webhook": {"certManager": {"enabled": True}},
        "serviceMonitor": {"enabled": True},
        "externalNats": {"credsSecret": {"name": "nats-creds"}},
    },
    "per-component, no webhook": {"layout": "per-component", "webhook": {"enabled": False}},
    "per-component, selector, Cluster namespaces, env": {
        "layout": "per-component",
        "config": {"managedNamespaces": ["hpc"], "managedNamespaceSelector": SELECTOR},
        "rbac": {"clusterSecretNamespaces": ["slurm", "hpc"]},
        "extraEnv": [{"name": "SLURMBRIDGE_WORKER_CONCURRENCY", "value": "8"}],
        "serviceMonitor": {"enabled": True},
    },
    "NATS in the release": {"nats": {"enabled": True}},
}

#: Kinds kubernetes-validate has no schema for (CRDs of other projects): checked by hand.
FOREIGN = {
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
}


def render(values: dict[str, Any], name: str = "sb") -> list[dict[str, Any]]:
    """The manifests of release ``name`` in namespace ``slurm`` (a fresh copy each call)."""
    return copy.deepcopy(_render(json.dumps(values, sort_keys=True), name))


@functools.cache
def _render(values: str, name: str) -> list[dict[str, Any]]:
    out = helm.Chart.load(CHART).render(json.loads(values), name=name, namespace="slurm")
    docs = [
        d
        for path, text in sorted(out.items())
        if path.endswith(".yaml")
        for d in yaml.safe_load_all(text)
        if d
    ]
    assert docs, "nothing rendered"
    return docs


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    return c


def only_of(deployment: dict[str, Any]) -> list[str]:
    args = container(deployment)["args"]
    return list(args[args.index("--only") + 1 :])


def by_name(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"].removeprefix("sb-slurmbridge-"): d for d in of_kind(docs, kind)}


def settings_of(docs: list[dict[str, Any]], key: str = "config.yaml") -> dict[str, Any]:
    (cm,) = of_kind(docs, "ConfigMap")
    out: dict[str, Any] = yaml.safe_load(cm["data"][key])
    return out


@pytest.mark.parametrize("values", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_the_chart_lints(values: dict[str, Any]) -> None:
    for k8s in K8S_VERSIONS:
        report = helm.lint(CHART, values, kube_version=f"v{k8s}")
        assert report["errors"] == [], report
        warnings = [m["error"] for m in report["messages"] if m["severity"] >= 2]
        # The NATS subchart is fetched by `helm dependency build` (no network here).
        assert warnings == ["chart directory is missing these dependencies: nats"], report


def test_lint_reports_what_is_wrong() -> None:
    """The lint above is not vacuous: a template that cannot render is an error in its report.
    (Helm lints in "lint mode", where `fail` and `required` only log and a missing map reads
    as empty: those are caught by rendering, see
    test_an_unknown_layout_or_scheduler_name_stops_rendering_with_its_name.)"""
    report = helm.lint(CHART, {"externalNats": {"credsSecret": "oops"}}, kube_version="v1.29.0")
    assert any("credsSecret" in e for e in report["errors"]), report


@pytest.mark.parametrize("k8s", K8S_VERSIONS)
@pytest.mark.parametrize("values", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_every_manifest_validates(values: dict[str, Any], k8s: str) -> None:
    for doc in render(values):
        if (doc["apiVersion"], doc["kind"]) in FOREIGN:
            assert doc["metadata"]["name"].startswith("sb-slurmbridge")
            continue
        kubernetes_validate.validate(doc, k8s, strict=True)


def test_the_validator_is_not_vacuous() -> None:
    deployment = of_kind(render({}), "Deployment")[0]
    deployment["spec"]["replicaz"] = deployment["spec"].pop("replicas")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[0], strict=True)


def test_foreign_kinds_have_their_fields() -> None:
    docs = render(LAYOUTS["cert-manager and ServiceMonitor"])
    (cert,) = of_kind(docs, "Certificate")
    assert (cert["apiVersion"], cert["metadata"]["namespace"]) == ("cert-manager.io/v1", "slurm")
    assert cert["spec"]["secretName"] == "sb-slurmbridge-webhook-tls"
    assert "sb-slurmbridge-webhook.slurm.svc" in cert["spec"]["dnsNames"]
    assert cert["spec"]["issuerRef"] == {"name": "sb-slurmbridge-selfsigned", "kind": "Issuer"}
    (issuer,) = of_kind(docs, "Issuer")
    assert issuer["apiVersion"] == "cert-manager.io/v1" and issuer["spec"] == {"selfSigned": {}}
    assert not of_kind(docs, "Secret"), "cert-manager writes the TLS Secret"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (hook,) = of_kind(docs, kind)
        inject = hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        assert inject == "slurm/sb-slurmbridge-webhook"
        assert all("caBundle" not in w["clientConfig"] for w in hook["webhooks"])
    (monitor,) = of_kind(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s"}
    ]
    metrics = by_name(docs, "Service")["metrics"]
    assert (
        metrics["metadata"]["labels"].items() >= monitor["spec"]["selector"]["matchLabels"].items()
    )
    # An issuer of one's own: no self-signed Issuer.
    docs = render(
        {
            "webhook": {
                "certManager": {
                    "enabled": True,
                    "issuerRef": {"name": "corp", "kind": "ClusterIssuer"},
                }
            }
        }
    )
    assert not of_kind(docs, "Issuer")
    assert of_kind(docs, "Certificate")[0]["spec"]["issuerRef"] == {
        "name": "corp",
        "kind": "ClusterIssuer",
    }


def test_all_in_one_runs_every_component_in_one_deployment() -> None:
    docs = render({})
    (deployment,) = of_kind(docs, "Deployment")
    assert sorted(only_of(deployment)) == ALL_COMPONENTS
    assert deployment["spec"]["replicas"] == 2
    c = container(deployment)
    assert c["args"][:3] == ["run", "--config", "/etc/slurmbridge/config.yaml"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"metrics": 8080, "health": 8081, "webhook": 9443}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    # The webhook's certificate: generated (no cert-manager), trusted by both configurations.
    (secret,) = of_kind(docs, "Secret")
    assert secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == {
        "tls.crt",
        "tls.key",
        "ca.crt",
    }
    for kind, path in (("Mutating", "/mutate"), ("Validating", "/validate")):
        (hook,) = of_kind(docs, f"{kind}WebhookConfiguration")
        for w in hook["webhooks"]:
            client = w["clientConfig"]
            assert client["caBundle"] == secret["data"]["ca.crt"]
            assert client["service"] == {
                "name": "sb-slurmbridge-webhook",
                "namespace": "slurm",
                "path": path,
                "port": 443,
            }
    service = by_name(docs, "Service")["webhook"]
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "webhook"}]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels.items() >= service["spec"]["selector"].items()


def test_per_component_layout_gives_each_its_deployment_and_service_account() -> None:
    docs = render({"layout": "per-component"})
    deployments = by_name(docs, "Deployment")
    ran = sorted(c for d in deployments.values() for c in only_of(d))
    assert ran == ALL_COMPONENTS, "each component once"
    assert only_of(deployments["producers"]) == ["kube-watcher", "slurm-poller"]
    assert all(d["spec"]["replicas"] == 2 for d in deployments.values())
    accounts = {d["spec"]["template"]["spec"]["serviceAccountName"] for d in deployments.values()}
    assert len(accounts) == len(deployments)
    assert {a["metadata"]["name"] for a in of_kind(docs, "ServiceAccount")} == accounts
    # The webhook alone needs neither NATS nor Slurm, serves no metrics or health port, and
    # makes no Kubernetes call without a managedNamespaceSelector: no token mounted at all.
    hook = container(deployments["webhook"])
    assert hook["args"][:3] == ["run", "--config", "/etc/slurmbridge/webhook.yaml"]
    assert [p["name"] for p in hook["ports"]] == ["webhook"]
    assert hook["readinessProbe"]["httpGet"] == {
        "path": "/healthz",
        "port": "webhook",
        "scheme": "HTTPS",
    }
    assert {m["name"] for m in hook["volumeMounts"]} == {"config", "tmp", "webhook-tls"}
    assert (
        deployments["webhook"]["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    )
    for name, d in deployments.items():
        if name != "webhook":
            c = container(d)
            assert {p["name"] for p in c["ports"]} == {"metrics", "health"}, name
            assert {
                "name": "slurm-token",
                "mountPath": "/var/run/secrets/slurm",
                "readOnly": True,
            } in c["volumeMounts"]
            assert d["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    # ... and the webhook lets placement's service account (which binds pods) label them.
    assert settings_of(docs)["webhook"]["serviceAccount"] == (
        "system:serviceaccount:slurm:sb-slurmbridge-placement"
    )
    # The webhook Service selects the webhook's pods only.
    selector = by_name(docs, "Service")["webhook"]["spec"]["selector"]
    for name, d in deployments.items():
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert (labels.items() >= selector.items()) == (name == "webhook"), name


def test_replicas_and_groups_follow_the_values() -> None:
    values = {
        "layout": "per-component",
        "components": {"placement": {"replicas": 4}, "workload": None},
        "webhook": {"replicas": 3},
    }
    deployments = by_name(render(values), "Deployment")
    assert deployments["placement"]["spec"]["replicas"] == 4
    assert deployments["webhook"]["spec"]["replicas"] == 3
    assert "workload" not in deployments
    (aio,) = of_kind(render({"allInOne": {"replicas": 1}}), "Deployment")
    assert aio["spec"]["replicas"] == 1


@pytest.mark.parametrize("values", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_every_container_runs_a_command_slurmbridge_accepts(values: dict[str, Any]) -> None:
    docs = render(values)
    (cm,) = of_kind(docs, "ConfigMap")
    for d in of_kind(docs, "Deployment"):
        c = container(d)
        args = cli.build_parser().parse_args(c["args"])
        assert (args.command, args.only) == ("run", only_of(d))
        mount = next(m for m in c["volumeMounts"] if m["name"] == "config")
        assert Path(args.config).parent == Path(mount["mountPath"])
        assert Path(args.config).name in cm["data"]
        volume = next(v for v in d["spec"]["template"]["spec"]["volumes"] if v["name"] == "config")
        assert volume["configMap"]["name"] == cm["metadata"]["name"]
        # The pod restarts when its settings change.
        annotations = d["spec"]["template"]["metadata"]["annotations"]
        assert re.fullmatch(r"[0-9a-f]{64}", annotations["checksum/config"])


@pytest.mark.parametrize("values", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_pods_run_restricted(values: dict[str, Any]) -> None:
    for d in of_kind(render(values), "Deployment"):
        pod = d["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 65532
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        c = container(d)
        assert c["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }
        assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
        assert {"name": "tmp", "emptyDir": {}} in pod["volumes"]
        assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]


@pytest.mark.parametrize("values", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_the_network_policy_admits_metrics_health_and_webhook_only(values: dict[str, Any]) -> None:
    docs = render(values)
    (policy,) = of_kind(docs, "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    ports = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    webhook_on = bool(of_kind(docs, "ValidatingWebhookConfiguration"))
    assert ports == ({8080, 8081, 9443} if webhook_on else {8080, 8081})
    assert all(rule.get("ports") for rule in policy["spec"]["ingress"]), "no port-less rule"
    for d in of_kind(docs, "Deployment"):
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert labels.items() >= policy["spec"]["podSelector"]["matchLabels"].items()
    assert not of_kind(render({"networkPolicy": {"enabled": False}}), "NetworkPolicy")


# --- RBAC ------------------------------------------------------------------------------------


def rules_table() -> dict[str, list[dict[str, Any]]]:
    table: dict[str, list[dict[str, Any]]] = yaml.safe_load(
        (CHART / "files" / "rbac.yaml").read_text()
    )
    return table


def grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def test_every_component_has_rbac_rules_and_nothing_else_does() -> None:
    table = rules_table()
    assert sorted(table) == ALL_COMPONENTS
    allowed_keys = {"apiGroups", "resources", "verbs", "namespaced", "onlyWith"}
    for component, rules in table.items():
        for rule in rules:
            assert set(rule) <= allowed_keys, (component, rule)


def test_each_component_account_gets_only_its_own_rules() -> None:
    values = LAYOUTS["per-component, selector, Cluster namespaces, env"]
    docs = render(values)
    table = rules_table()
    roles = by_name(docs, "ClusterRole")
    for name, d in by_name(docs, "Deployment").items():
        rules = [rule for c in only_of(d) for rule in table[c]]
        assert grants(roles[name]["rules"]) == grants([r for r in rules if not r.get("namespaced")])
        (binding,) = [
            b
            for b in of_kind(docs, "ClusterRoleBinding")
            if b["roleRef"]["name"] == roles[name]["metadata"]["name"]
        ]
        (subject,) = binding["subjects"]
        assert subject["name"] == d["spec"]["template"]["spec"]["serviceAccountName"]
        assert subject["namespace"] == "slurm"
        namespaced = grants([r for r in rules if r.get("namespaced")])
        in_namespaces = {
            r["metadata"]["namespace"]: grants(r["rules"])
            for r in of_kind(docs, "Role")
            if r["metadata"]["name"] == roles[name]["metadata"]["name"]
        }
        assert in_namespaces == ({"slurm": namespaced, "hpc": namespaced} if namespaced else {})
    cluster_grants = {n: grants(r["rules"]) for n, r in roles.items()}
    # A few that matter: only workload and nodeset may delete pods; no one may delete nodes;
    # Secrets are never readable cluster-wide, nor writable anywhere.
    deleters = {n for n, g in cluster_grants.items() if ("", "pods", "delete") in g}
    assert deleters == {"workload", "nodeset"}
    assert not any(("", "nodes", "delete") in g for g in cluster_grants.values())
    assert not any(r == "secrets" for g in cluster_grants.values() for _, r, _ in g)
    secret_verbs = {
        v for r in of_kind(docs, "Role") for _, res, v in grants(r["rules"]) if res == "secrets"
    }
    assert secret_verbs == {"list", "watch"}
    assert not any("*" in str(r["rules"]) for r in [*roles.values(), *of_kind(docs, "Role")])


def test_cluster_secrets_are_read_in_the_release_namespace_by_default() -> None:
    docs = render({})
    (role,) = of_kind(docs, "Role")
    assert role["metadata"]["namespace"] == "slurm"
    assert grants(role["rules"]) == {("", "secrets", "list"), ("", "secrets", "watch")}
    (binding,) = of_kind(docs, "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    (cluster_role,) = of_kind(docs, "ClusterRole")
    # Without a managedNamespaceSelector the webhook reads no Namespace: not granted.
    assert ("", "namespaces", "get") not in grants(cluster_role["rules"])
    with_selector = of_kind(
        render({"config": {"managedNamespaceSelector": SELECTOR}}), "ClusterRole"
    )
    assert ("", "namespaces", "get") in grants(with_selector[0]["rules"])


def test_all_in_one_grants_the_union_of_the_components() -> None:
    table = rules_table()
    (role,) = of_kind(render({"config": {"managedNamespaceSelector": SELECTOR}}), "ClusterRole")
    union = grants([r for c in ALL_COMPONENTS for r in table[c] if not r.get("namespaced")])
    assert grants(role["rules"]) == union
    # One rule per (group, resource): readable.
    keys = [(r["apiGroups"][0], r["resources"][0]) for r in role["rules"]]
    assert len(keys) == len(set(keys))


#: The calls behind each grant (apiGroup, resource, verb) → code that makes it. A rule nobody
#: calls is a grant the code does not need. (tests/integration/test_rbac.py checks it at run
#: time too.)
CALLS: dict[tuple[str, str, str], str] = {
    ("", "nodes", "list"): r"list_node\(",
    ("", "nodes", "watch"): r"list_node\(",
    ("", "pods", "list"): r"list_pod_for_all_namespaces\(|core\.list_namespaced_pod\b",
    ("", "pods", "watch"): r"list_pod_for_all_namespaces\(",
    ("batch", "jobs", "list"): r"list_job_for_all_namespaces\(",
    ("batch", "jobs", "watch"): r"list_job_for_all_namespaces\(",
    ("apps", "replicasets", "list"): r'"ReplicaSet", "apps", "v1", "replicasets"',
    ("apps", "replicasets", "watch"): r'"ReplicaSet", "apps", "v1", "replicasets"',
    ("apps", "deployments", "list"): r'"Deployment", "apps", "v1", "deployments"',
    ("apps", "deployments", "watch"): r'"Deployment", "apps", "v1", "deployments"',
    ("jobset.x-k8s.io", "jobsets", "list"): r'"jobset\.x-k8s\.io"[^\n]*\n?[^\n]*"jobsets"',
    ("jobset.x-k8s.io", "jobsets", "watch"): r'"jobset\.x-k8s\.io"[^\n]*\n?[^\n]*"jobsets"',
    ("leaderworkerset.x-k8s.io", "leaderworkersets", "list"): r'"leaderworkersets"',
    ("leaderworkerset.x-k8s.io", "leaderworkersets", "watch"): r'"leaderworkersets"',
    ("scheduling.x-k8s.io", "podgroups", "list"): r'"podgroups"',
    ("scheduling.x-k8s.io", "podgroups", "watch"): r'"podgroups"',
    ("scheduling.k8s.io", "podgroups", "list"): r'KIND_NATIVE_POD_GROUP, "podgroups"',
    ("scheduling.k8s.io", "podgroups", "watch"): r'KIND_NATIVE_POD_GROUP, "podgroups"',
    ("scheduling.k8s.io", "workloads", "list"): r'KIND_NATIVE_WORKLOAD, "workloads"',
    ("scheduling.k8s.io", "workloads", "watch"): r'KIND_NATIVE_WORKLOAD, "workloads"',
    (
        "scheduling.k8s.io",
        "compositepodgroups",
        "list",
    ): r'KIND_NATIVE_COMPOSITE, "compositepodgroups"',
    ("scheduling.k8s.io", "compositepodgroups", "watch"): (
        r'KIND_NATIVE_COMPOSITE, "compositepodgroups"'
    ),
    ("scheduling.k8s.io", "podgroups", "get"): r"custom\.get_namespaced_custom_object\(",
    ("scheduling.k8s.io", "podgroups/status", "patch"): (
        r"patch_namespaced_custom_object_status\b"
    ),
    ("slinky.slurm.net", "nodesets", "list"): r'resource\s*=\s*"nodesets"',
    ("slinky.slurm.net", "nodesets", "watch"): r'resource\s*=\s*"nodesets"',
    ("slinky.slurm.net", "clusters", "list"): r'resource\s*=\s*"clusters"',
    ("slinky.slurm.net", "clusters", "watch"): r'resource\s*=\s*"clusters"',
    ("autoscaling", "horizontalpodautoscalers", "list"): r'"horizontalpodautoscalers"',
    ("autoscaling", "horizontalpodautoscalers", "watch"): r'"horizontalpodautoscalers"',
    ("keda.sh", "scaledobjects", "list"): r'"scaledobjects"',
    ("keda.sh", "scaledobjects", "watch"): r'"scaledobjects"',
    ("", "secrets", "list"): r"list_namespaced_secret\(",
    ("", "secrets", "watch"): (
        r"list_namespaced_secret\(\s*c\.namespace,\s*field_selector=selector,\s*watch=True"
    ),
    ("", "nodes", "get"): r"read_node\(",
    ("", "nodes", "patch"): r"patch_node\b",
    ("", "nodes/status", "patch"): r"patch_node_status\b",
    ("", "events", "create"): r"writes\.create_namespaced_event\(core\b",
    ("", "pods", "get"): r"read_namespaced_pod\(",
    ("", "pods", "patch"): r"patch_namespaced_pod\b",
    ("", "pods", "create"): r"create_namespaced_pod\b(?!_)",
    ("", "pods", "delete"): r"delete_namespaced_pod\b",
    ("", "pods/binding", "create"): r"create_namespaced_pod_binding\b",
    ("", "persistentvolumeclaims", "create"): r"create_namespaced_persistent_volume_claim\b",
    ("", "persistentvolumeclaims", "get"): r"read_namespaced_persistent_volume_claim\b",
    ("", "persistentvolumeclaims", "patch"): r"patch_namespaced_persistent_volume_claim\b",
    ("", "pods/status", "patch"): r"patch_namespaced_pod_status\b",
    ("slinky.slurm.net", "nodesets", "get"): r"get_namespaced_custom_object\(",
    ("slinky.slurm.net", "nodesets", "patch"): r"patch_namespaced_custom_object\b(?!_)",
    ("slinky.slurm.net", "nodesets/status", "patch"): r"patch_namespaced_custom_object_status\b",
    # OwnerReferencesPermissionEnforcement: an owner reference with blockOwnerDeletion needs
    # update on the owner's finalizers (issue 17, 3).
    ("slinky.slurm.net", "nodesets/finalizers", "update"): r'"blockOwnerDeletion": True',
    ("slinky.slurm.net", "nodesets/scale", "get"): r"get_namespaced_custom_object_scale\(",
    ("slinky.slurm.net", "nodesets/scale", "patch"): r"patch_namespaced_custom_object_scale\b",
    ("policy", "poddisruptionbudgets", "create"): r"create_namespaced_pod_disruption_budget\b",
    ("slinky.slurm.net", "clusters", "get"): r"get_namespaced_custom_object\(",
    ("slinky.slurm.net", "clusters/status", "patch"): r"patch_namespaced_custom_object_status\b",
    ("", "namespaces", "get"): r"read_namespace\(",
    ("resource.k8s.io", "resourceslices", "list"): r'resource\s*=\s*"resourceslices"',
    ("resource.k8s.io", "resourceslices", "watch"): r'resource\s*=\s*"resourceslices"',
    ("resource.k8s.io", "resourceclaims", "list"): r'resource\s*=\s*"resourceclaims"',
    ("resource.k8s.io", "resourceclaims", "watch"): r'resource\s*=\s*"resourceclaims"',
    ("resource.k8s.io", "resourceclaims", "get"): (
        r'get_namespaced_custom_object\(\s*\*RESOURCE_API,\s*ref\.namespace,\s*"resourceclaims"'
    ),
    ("resource.k8s.io", "resourceclaims", "create"): (
        r'create_namespaced_custom_object\(\s*\*RESOURCE_API,\s*pod\.namespace,\s*"resourceclaims"'
    ),
    ("resource.k8s.io", "resourceclaims", "delete"): r"delete_namespaced_custom_object\b",
    ("resource.k8s.io", "resourceclaims/status", "patch"): (
        r"self\.custom\.patch_namespaced_custom_object_status"
    ),
    ("resource.k8s.io", "resourceclaimtemplates", "get"): r'"resourceclaimtemplates"',
    ("resource.k8s.io", "deviceclasses", "list"): r'resource\s*=\s*"deviceclasses"',
    ("resource.k8s.io", "deviceclasses", "watch"): r'resource\s*=\s*"deviceclasses"',
    ("resource.k8s.io", "deviceclasses", "get"): r'get_cluster_custom_object\(\s*"resource.k8s.io"',
    ("", "pods/finalizers", "update"): r'"blockOwnerDeletion": True',
    ("apps", "controllerrevisions", "get"): r"read_namespaced_controller_revision\b",
    ("apps", "controllerrevisions", "list"): r"list_namespaced_controller_revision\b",
    ("apps", "controllerrevisions", "create"): r"create_namespaced_controller_revision\b",
    ("apps", "controllerrevisions", "patch"): r"patch_namespaced_controller_revision\b",
    ("apps", "controllerrevisions", "delete"): r"delete_namespaced_controller_revision\b",
}


def test_every_granted_rule_names_calls_the_code_makes() -> None:
    code = "\n".join(p.read_text() for p in SOURCES)
    for component, rules in rules_table().items():
        for grant in grants(rules):
            pattern = CALLS.get(grant)
            assert pattern, f"{component}: {grant} is granted but no call is known"
            assert re.search(pattern, code), f"{component}: {grant}: no {pattern}"
    # Events are core/v1 (CoreV1Api): nothing creates events.k8s.io Events.
    assert "EventsV1Api" not in code


def test_the_chart_crds_are_deploy_crds() -> None:
    ours = sorted(p.name for p in (ROOT / "deploy" / "crds").glob("*.yaml"))
    assert ours, "no CRDs in deploy/crds"
    assert sorted(p.name for p in (CHART / "crds").glob("*.yaml")) == ours
    for name in ours:
        assert filecmp.cmp(CHART / "crds" / name, ROOT / "deploy" / "crds" / name, shallow=False)
    # ... and Helm installs them from there (crds/ of the loaded chart).
    loaded = helm.Chart.load(CHART).crds
    assert sorted(c["name"] for c in loaded) == [f"crds/{n}" for n in ours]
    for crd in loaded:
        assert crd["data"] == (ROOT / "deploy" / crd["name"]).read_text()


def test_the_configmap_is_a_valid_configuration_with_slinky_keys(tmp_path: Path) -> None:
    values = {
        "config": {
            "schedulerName": "my-scheduler",
            "slurmRestApi": "http://slurm:6820",
            "managedNamespaces": ["hpc", "ml"],
            "mcsLabel": "mcs",
            "partition": "batch",
        },
        "externalNats": {
            "url": "nats://a:4222,nats://b:4222",
            "credsSecret": {"name": "nats-creds"},
        },
        "extraEnv": [{"name": "SLURMBRIDGE_SLURM_POLL_INTERVAL", "value": "5"}],
    }
    docs = render(values)
    (cm,) = of_kind(docs, "ConfigMap")
    (d,) = of_kind(docs, "Deployment")
    mounts = {m["mountPath"] for m in container(d)["volumeMounts"]}
    # The files the pod has mounted: here, under tmp_path.
    for mounted in ("slurm/token", "webhook/tls.crt", "webhook/tls.key", "nats/creds"):
        assert f"/var/run/secrets/{mounted}" in cm["data"]["config.yaml"]
        assert str(Path("/var/run/secrets", mounted).parent) in mounts
        (tmp_path / mounted).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / mounted).write_text("x")
    env = {e["name"]: e["value"] for e in container(d)["env"]}
    loaded = {}
    for key in ("config.yaml", "webhook.yaml"):
        path = tmp_path / key
        path.write_text(cm["data"][key].replace("/var/run/secrets", str(tmp_path)))
        loaded[key] = config.load(path=path, env=env)
    s = loaded["config.yaml"]
    assert (s.scheduler_name, s.partition) == ("my-scheduler", "batch")
    assert s.slurm_url == "http://slurm:6820"
    assert s.managed_namespaces == ["hpc", "ml"] and s.mcs_label == "mcs"
    assert s.nats.url == "nats://a:4222,nats://b:4222"
    assert s.nats.creds_file == f"{tmp_path}/nats/creds"
    assert s.slurm.token_file == f"{tmp_path}/slurm/token" and s.kube.in_cluster
    assert s.kube.namespace == "slurm"
    assert s.webhook.cert_file == f"{tmp_path}/webhook/tls.crt"
    assert s.slurm.poll_interval == 5.0, "the environment overrides the file"
    assert (s.observability.metrics_port, s.observability.health_port) == (8080, 8081)
    # The webhook's file names no token and no creds: a webhook-only pod mounts neither.
    w = loaded["webhook.yaml"]
    assert (w.slurm.token_file, w.nats.creds_file) == (None, None)
    assert (w.scheduler_name, w.managed_namespaces) == ("my-scheduler", ["hpc", "ml"])
    assert w.webhook.key_file == f"{tmp_path}/webhook/tls.key"


def test_nats_url_is_the_bundled_servers_or_the_external_one() -> None:
    assert settings_of(render({}))["nats"]["url"] == "nats://nats:4222"
    bundled = {"nats": {"enabled": True}}
    assert settings_of(render(bundled))["nats"]["url"] == "nats://sb-nats.slurm.svc:4222"
    # The official chart's naming: a release whose name holds "nats" is the name.
    assert settings_of(render(bundled, name="my-nats"))["nats"]["url"] == (
        "nats://my-nats.slurm.svc:4222"
    )
    # JetStream is on, on three servers.
    chart_values = helm.Chart.load(CHART).values
    nats = chart_values["nats"]["config"]
    assert nats["jetstream"]["enabled"] is True
    assert nats["cluster"] == {"enabled": True, "replicas": 3}
    assert chart_values["nats"]["enabled"] is False
    (dep,) = yaml.safe_load((CHART / "Chart.yaml").read_text())["dependencies"]
    assert dep["name"] == "nats" and dep["condition"] == "nats.enabled"
    assert dep["repository"] == "https://nats-io.github.io/k8s/helm/charts/"
    with pytest.raises(helm.HelmRenderError, match=r"externalNats\.url"):
        render({"externalNats": {"url": ""}})


def test_the_notes_create_the_streams_the_pods_expect() -> None:
    """The NOTES' `slurmbridge streams` gets the stream settings of the pods' file."""
    values = {"config": {"nats": {"replicas": 5, "obsMaxAge": 86400}}}
    notes = helm.Chart.load(CHART).render(values, name="sb", namespace="slurm")[
        "slurmbridge/templates/NOTES.txt"
    ]
    env = dict(re.findall(r"--env=(SLURMBRIDGE_\w+)=(\S+)", notes))
    assert "streams --apply --nats-url nats://nats:4222" in notes
    cli_side = config.load(env=env).nats
    pod_side = config.load(env={}, overrides={"nats": settings_of(render(values))["nats"]}).nats
    for field in ("replicas", "obs_max_msgs_per_subject", "obs_max_age", "act_max_age"):
        assert getattr(cli_side, field) == getattr(pod_side, field), field
    assert (cli_side.replicas, cli_side.obs_max_age) == (5, 86400.0)


def test_an_unknown_layout_or_scheduler_name_stops_rendering_with_its_name() -> None:
    with pytest.raises(helm.HelmRenderError, match="layout"):
        render({"layout": "everything-everywhere"})
    with pytest.raises(helm.HelmRenderError, match="schedulerName"):
        render({"config": {"schedulerName": "it's-mine"}})


def _merged(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@pytest.mark.parametrize("doc", ["README.md", "docs/deploy.md"])
def test_the_documented_helm_installs_render(doc: str) -> None:
    """Each `helm install` of the docs, its --set flags parsed by Helm's own parser."""
    text = (ROOT / doc).read_text()
    commands = [
        shlex.split(line)
        for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL)
        for line in block.replace("\\\n", " ").splitlines()
        if line.strip().startswith("helm install")
    ]
    assert commands, f"no helm install in {doc}"
    for argv in commands:
        assert argv[:4] == ["helm", "install", "slurmbridge", "deploy/helm/slurmbridge"], argv
        assert (ROOT / argv[3] / "Chart.yaml").is_file()
        values: dict[str, Any] = {}
        for flag, arg in itertools.pairwise(argv):
            if flag == "--set":
                values = _merged(values, helm.parse_set_string(arg))
        docs = render(values)
        settings = settings_of(docs)
        nats = values.get("externalNats", {}).get("url")
        assert settings["nats"]["url"] == (nats or "nats://sb-nats.slurm.svc:4222"), argv
        assert settings["slurmRestApi"] == values["config"]["slurmRestApi"]
        layout = values.get("layout", "all-in-one")
        assert len(of_kind(docs, "Deployment")) == (1 if layout == "all-in-one" else 10)


# --- which admission requests reach the webhook ----------------------------------------------

OURS = "my-scheduler"
#: Namespaces and their labels (as the API server labels them).
NAMESPACES = {
    ns: {"kubernetes.io/metadata.name": ns, **labels}
    for ns, labels in {
        "hpc": {},
        "labelled": {"slurm": "yes"},
        "web": {},
        "slurm": {"slurm": "yes"},  # the release's namespace
        "kube-system": {},
    }.items()
}


def _pod(
    ns: str, scheduler: str | None, node: str | None, jobid: str | None, slurmd: str = ""
) -> dict[str, Any]:
    """A pod; ``slurmd``: ``"label"`` / ``"owner"`` makes it a NodeSet's slurmd pod by its
    label or its controller owner (webhook.slurmd_pod)."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    if node is not None:
        spec["nodeName"] = node
    labels = {} if jobid is None else {"scheduler.slinky.slurm.net/slurm-jobid": jobid}
    meta: dict[str, Any] = {"name": "p", "namespace": ns, "labels": labels}
    if slurmd == "label":
        labels["app.kubernetes.io/name"] = "slurmd"
    elif slurmd == "owner":
        owner = {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "name": "ns"}
        meta["ownerReferences"] = [{**owner, "uid": "u", "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _requests() -> list[dict[str, Any]]:
    """AdmissionReview requests over namespaces × schedulers × nodeName × labels × operations."""
    out = []
    for ns, scheduler, node, jobid, slurmd in itertools.product(
        NAMESPACES,
        [None, "", "default-scheduler", OURS, "other"],
        [None, "n1"],
        [None, "7"],
        ["", "label", "owner"],
    ):
        new = _pod(ns, scheduler, node, jobid, slurmd)
        base = {"uid": "u", "namespace": ns, "userInfo": {"username": "alice"}}
        pods = {"group": "", "version": "v1", "resource": "pods"}
        out.append({**base, "operation": "CREATE", "resource": pods, "object": new})
        old = _pod(ns, scheduler, node, None if jobid is None else "6", slurmd)
        update = {**base, "operation": "UPDATE", "resource": pods, "object": new, "oldObject": old}
        out.extend({**update, "subResource": sub} for sub in ("", "resize"))
    return out


def _reaches(hook: dict[str, Any], request: dict[str, Any], env: celpy.Environment) -> bool:
    """Would the API server call ``hook`` for ``request``: rules, namespaceSelector, and
    matchConditions (CEL, evaluated with cel-python)."""
    resource = request["resource"]["resource"] + (
        f"/{request['subResource']}" if request.get("subResource") else ""
    )
    if not any(
        request["operation"] in rule["operations"] and resource in rule["resources"]
        for rule in hook["rules"]
    ):
        return False
    if not selector_matches(hook["namespaceSelector"], NAMESPACES[request["namespace"]]):
        return False
    activation = {
        "object": celpy.json_to_cel(request["object"]),
        "oldObject": celpy.json_to_cel(request.get("oldObject")),
        "request": celpy.json_to_cel(request),
    }
    results = [
        env.program(env.compile(c["expression"])).evaluate(activation)
        for c in hook["matchConditions"]
    ]
    return all(bool(r) for r in results)


def test_the_webhook_gets_every_request_it_would_act_on_and_no_other() -> None:
    values = {
        "config": {
            "schedulerName": OURS,
            "managedNamespaces": ["hpc"],
            "managedNamespaceSelector": SELECTOR,
        }
    }
    docs = render(values)
    (mutating,) = of_kind(docs, "MutatingWebhookConfiguration")
    (validating,) = of_kind(docs, "ValidatingWebhookConfiguration")
    assert [w["name"] for w in mutating["webhooks"]] == [
        "managed.mutate.pods.slurmbridge.dev",
        "selected.mutate.pods.slurmbridge.dev",
        "nodename.mutate.pods.slurmbridge.dev",
    ]
    s = settings_of(docs)
    policy = webhook.Policy(
        scheduler_name=s["schedulerName"],
        managed_namespaces=frozenset(s["managedNamespaces"]),
        managed_namespace_selector=s["managedNamespaceSelector"],
        service_account=s["webhook"]["serviceAccount"],
    )
    env = celpy.Environment()
    excluded = {"slurm", "kube-system"}
    acted = {"mutate": 0, "validate": 0}
    for request in _requests():
        body = json.dumps(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
        ).encode()
        req = webhook.decode_review(body)
        ns = request["namespace"]
        patch = webhook.mutate(req, policy, NAMESPACES[ns])
        denied = webhook.validate(req, policy)
        mutates = any(_reaches(w, request, env) for w in mutating["webhooks"])
        validates = any(_reaches(w, request, env) for w in validating["webhooks"])
        what = (ns, request["operation"], request.get("subResource"), request["object"]["spec"])
        if ns in excluded:
            assert not (mutates or validates), what
            continue
        acted["mutate"] += bool(patch)
        acted["validate"] += denied is not None
        # Everything the webhook would change or deny reaches it.
        assert mutates or not patch, ("mutation skipped", what, patch)
        assert validates or denied is None, ("validation skipped", what, denied)
        # Pods of other schedulers never reach it; the mutation only where it can act.
        scheduler = request["object"]["spec"].get("schedulerName")
        if scheduler == "other":
            assert not (mutates or validates), what
        if mutates and not patch:
            assert ns in ("hpc", "labelled") or not request["object"]["spec"].get("nodeName"), what
        # A NodeSet's slurmd pod is never rewritten, and never waits on the mutating webhook
        # (a webhook that is down would hold up the NodeSet's scale-out).
        meta = request["object"]["metadata"]
        if meta.get("ownerReferences") or meta["labels"].get("app.kubernetes.io/name"):
            assert not patch and not mutates, ("a slurmd pod reaches the mutation", what)
    assert acted["mutate"] > 10 and acted["validate"] > 10, acted


# --- Dockerfile, compose, Grafana --------------------------------------------------------------


def test_dockerfile_is_slim_pinned_and_non_root() -> None:
    lines = [
        ln.strip()
        for ln in (ROOT / "Dockerfile").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    bases = [ln.split()[1] for ln in lines if ln.startswith("FROM ")]
    assert len(bases) >= 2, "multi-stage"
    assert all(b.startswith("python:3.11-slim") for b in bases), bases
    assert not any(b.endswith(":latest") or ":" not in b for b in bases)
    user = [ln for ln in lines if ln.startswith("USER ")]
    assert user == ["USER 65532:65532"]
    assert lines.index(user[0]) > max(i for i, ln in enumerate(lines) if ln.startswith("RUN "))
    assert 'ENTRYPOINT ["slurmbridge"]' in lines and 'CMD ["run"]' in lines
    assert "EXPOSE 8080 8081 9443" in lines
    assert any(ln.startswith("COPY --from=") for ln in lines), "the venv from the build stage"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "tests"} <= set(ignored)


def test_the_image_pins_its_dependencies_and_checks_its_health() -> None:
    """Issue 29, 5: requirements.lock pins every dependency (within pyproject's ranges) and
    the image installs exactly those; a HEALTHCHECK asks /healthz on the health port."""
    from packaging.requirements import Requirement

    lock = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"not pinned: {line}"
            lock[name.lower().replace("_", "-")] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for req in map(Requirement, project["dependencies"]):
        if req.marker is None or req.marker.evaluate():
            name = req.name.lower().replace("_", "-")
            assert name in lock, f"{req.name} is not in requirements.lock"
            assert req.specifier.contains(lock[name]), (req, lock[name])
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "-r requirements.lock" in dockerfile and "--no-deps" in dockerfile
    assert "pip check" in dockerfile
    health = [ln for ln in dockerfile.splitlines() if ln.startswith("HEALTHCHECK")]
    assert health, "HEALTHCHECK"
    assert "http://127.0.0.1:8081/healthz" in dockerfile
    bridge = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]["slurmbridge"]
    assert "http://127.0.0.1:8081/healthz" in " ".join(bridge["healthcheck"]["test"])


def test_compose_runs_nats_with_jetstream_then_slurmbridge() -> None:
    doc = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert set(doc["services"]) == {"nats", "slurmbridge"}
    nats, bridge = doc["services"]["nats"], doc["services"]["slurmbridge"]
    command = nats["command"]
    assert "-js" in command and command[command.index("-sd") + 1] == "/data"
    assert nats["image"].startswith("nats:2.10") and "healthcheck" in nats
    assert bridge["build"] == "."
    assert bridge["depends_on"] == {"nats": {"condition": "service_healthy"}}
    assert bridge["environment"]["SLURMBRIDGE_NATS_URL"] == "nats://nats:4222"
    assert bridge["read_only"] is True
    # The command is one slurmbridge accepts, with the file the volume mounts.
    args = cli.build_parser().parse_args(bridge["command"])
    assert any(v.endswith(f":{args.kubeconfig}:ro") for v in bridge["volumes"])


def test_compose_is_safe_by_default_and_reads_the_users_credentials() -> None:
    """Issue 17, 16: no port on other interfaces (NATS has no auth there, and whoever can
    publish observations makes the reconcilers act), and the container may run as the user
    owning a 0600 kubeconfig and token."""
    doc = yaml.safe_load((ROOT / "compose.yaml").read_text())
    published = [p for svc in doc["services"].values() for p in svc.get("ports", [])]
    assert published, "metrics, health and NATS for the machine's own user"
    for port in published:
        assert str(port).startswith("127.0.0.1:"), port
    assert {"127.0.0.1:8080:8080", "127.0.0.1:8081:8081"} <= set(
        doc["services"]["slurmbridge"]["ports"]
    )
    user = doc["services"]["slurmbridge"]["user"]
    assert user == "${RUN_AS:-65532:65532}", user  # the image's user unless told otherwise
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    assert 'RUN_AS="$(id -u):$(id -g)"' in deploy and "127.0.0.1" in deploy
    assert "compose" in (ROOT / "docs" / "security.md").read_text()


# --- the environment Kubernetes gives the pods (issue 17, 9) ----------------------------------


def service_links(
    services: list[dict[str, Any]], ips: dict[str, str] | None = None
) -> dict[str, str]:
    """The variables Kubernetes puts into a pod for ``services`` (pkg/kubelet/envvars:
    FromServices and makeLinkVariables), with cluster IPs from ``ips`` (by Service name) or
    10.96.0.<10 + i>."""
    env: dict[str, str] = {}
    for i, svc in enumerate(services):
        ip = (ips or {}).get(svc["metadata"]["name"], f"10.96.0.{10 + i}")
        name = svc["metadata"]["name"].upper().replace("-", "_")
        ports = svc["spec"]["ports"]
        env[f"{name}_SERVICE_HOST"] = ip
        env[f"{name}_SERVICE_PORT"] = str(ports[0]["port"])
        for port in ports:
            if port.get("name"):
                env[f"{name}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = str(
                    port["port"]
                )
        for j, port in enumerate(ports):
            proto = port.get("protocol", "TCP")
            url = f"{proto.lower()}://{ip}:{port['port']}"
            if j == 0:
                env[f"{name}_PORT"] = url
            prefix = f"{name}_PORT_{port['port']}_{proto.upper()}"
            env[prefix] = url
            env[f"{prefix}_PROTO"] = proto.lower()
            env[f"{prefix}_PORT"] = str(port["port"])
            env[f"{prefix}_ADDR"] = ip
    return env


@pytest.mark.parametrize("values", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_pods_get_no_service_links(values: dict[str, Any]) -> None:
    for d in of_kind(render(values), "Deployment"):
        assert d["spec"]["template"]["spec"]["enableServiceLinks"] is False


@pytest.mark.parametrize("values", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_the_settings_load_with_the_service_links_of_a_release_called_slurmbridge(
    values: dict[str, Any], tmp_path: Path
) -> None:
    """Should service links be on after all (an older chart, a pod of one's own next to the
    release), the settings still load: the exact variables of the release's Services."""
    docs = render(values, name="slurmbridge")
    links = service_links(of_kind(docs, "Service"))
    assert "SLURMBRIDGE_METRICS_SERVICE_HOST" in links
    (cm,) = of_kind(docs, "ConfigMap")
    for d in of_kind(docs, "Deployment"):
        c = container(d)
        args = cli.build_parser().parse_args(c["args"])
        text = cm["data"][Path(args.config).name].replace("/var/run/secrets", str(tmp_path))
        for mounted in ("slurm/token", "webhook/tls.crt", "webhook/tls.key", "nats/creds"):
            (tmp_path / mounted).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / mounted).write_text("x")
        path = tmp_path / "settings.yaml"
        path.write_text(text)
        env = {**links, **{e["name"]: e["value"] for e in c.get("env", [])}}
        s = config.load(path=path, env=env)
        assert s.webhook.port == 9443 and s.kube.in_cluster


def test_the_hand_written_service_links_are_what_the_chart_gets() -> None:
    """tests/unit/test_config.py's list is the chart's Services' (and the NATS chart's)."""
    from tests.unit import test_config

    listed = test_config.RELEASE_SLURMBRIDGE_SERVICE_LINKS

    services = of_kind(render({}, name="slurmbridge"), "Service")
    assert {svc["metadata"]["name"] for svc in services} == {
        "slurmbridge-metrics",
        "slurmbridge-webhook",
    }
    ips = {
        "slurmbridge-metrics": listed["SLURMBRIDGE_METRICS_SERVICE_HOST"],
        "slurmbridge-webhook": listed["SLURMBRIDGE_WEBHOOK_SERVICE_HOST"],
    }
    ours = {k: v for k, v in listed.items() if k.startswith(("SLURMBRIDGE_M", "SLURMBRIDGE_W"))}
    assert service_links(services, ips) == ours


def _metric_labels() -> dict[str, set[str]]:
    """Every series name slurmbridge exports → its label names."""
    from prometheus_client.metrics import MetricWrapperBase

    import slurmbridge.observability.metrics
    import slurmbridge.observability.partition_metrics

    out: dict[str, set[str]] = {}
    for module in (slurmbridge.observability.metrics, slurmbridge.observability.partition_metrics):
        for metric in vars(module).values():
            if not isinstance(metric, MetricWrapperBase):
                continue
            name, kind, labels = metric._name, metric._type, set(metric._labelnames)
            if kind == "counter":
                out[f"{name}_total"] = labels
            elif kind == "histogram":
                out[f"{name}_bucket"] = labels | {"le"}
                out[f"{name}_sum"] = out[f"{name}_count"] = labels
            else:
                out[name] = labels
    return out


def test_grafana_dashboard_queries_only_metrics_and_labels_we_export() -> None:
    exported = _metric_labels()
    assert "slurmbridge_events_published_total" in exported
    assert exported["slurm_partition_node_state"] == {"cluster", "partition", "state"}
    dash = json.loads((ROOT / "deploy" / "grafana" / "slurmbridge.json").read_text())
    targets = [t for p in dash["panels"] for t in p["targets"]]
    assert len(targets) >= 10
    used: set[str] = set()
    for t in targets:
        expr = t["expr"]
        names = set(re.findall(r"\b(slurm(?:bridge)?_[a-z_]+)\b", expr))
        assert names and names <= set(exported), (expr, names - set(exported))
        used |= names
        labels = set().union(*(exported[n] for n in names))
        grouped = {
            lab.strip()
            for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr)
            for lab in group.split(",")
            if lab.strip()
        }
        matched = set(
            re.findall(r"([a-z_]+)\s*(?:=~|!~|!=|=)", "".join(re.findall(r"\{([^}]*)\}", expr)))
        )
        assert grouped | matched <= labels, (expr, (grouped | matched) - labels)
        legend = set(re.findall(r"\{\{\s*([a-z_]+)\s*\}\}", t.get("legendFormat", "")))
        shown = (grouped - {"le"}) if grouped else labels
        assert legend <= shown, (expr, t["legendFormat"], legend - shown)
    families = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in used}
    ours = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in exported}
    assert not ours - families, f"metrics without a panel: {sorted(ours - families)}"
    for p in dash["panels"]:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]


def test_the_tenancy_policy_reaches_both_settings_files(tmp_path: Path) -> None:
    """Issue 27: values.config.tenancy is rendered into config.yaml and webhook.yaml and
    loads as the typed policy (placement and the webhook read the same one)."""
    tenant = {
        "name": "team-a",
        "namespaces": ["tenant-a"],
        "userId": 43001,
        "groupId": 43001,
        "accounts": ["a"],
        "defaultAccount": "a",
    }
    docs = render({"config": {"tenancy": {"tenants": [tenant]}}})
    assert settings_of(render({}))["tenancy"] == {"tenants": []}
    for key in ("config.yaml", "webhook.yaml"):
        rendered = settings_of(docs, key)
        assert rendered["tenancy"]["tenants"] == [tenant]
        path = tmp_path / key
        path.write_text(yaml.safe_dump({"tenancy": rendered["tenancy"]}))
        t = config.load(path=path, env={}).tenancy.tenant_of("tenant-a")
        assert t is not None and (t.user_id, t.default_account) == (43001, "a")


def test_a_tenants_namespaces_reach_the_mutating_webhook() -> None:
    """Issue 27: the webhook gives a tenant's pods our scheduler (webhook.managed counts a
    tenant's namespaces as managed), so the chart sends it their CREATEs too."""
    tenant = {"name": "t", "namespaces": ["tenant-a", "hpc"], "userId": 7, "groupId": 7}
    docs = render({"config": {"managedNamespaces": ["hpc"], "tenancy": {"tenants": [tenant]}}})
    (mutating,) = of_kind(docs, "MutatingWebhookConfiguration")
    managed = next(w for w in mutating["webhooks"] if w["name"].startswith("managed."))
    (in_,) = [e for e in managed["namespaceSelector"]["matchExpressions"] if e["operator"] == "In"]
    assert in_["values"] == ["hpc", "tenant-a"]
    docs = render({"config": {"tenancy": {"tenants": [tenant]}}})
    (mutating,) = of_kind(docs, "MutatingWebhookConfiguration")
    assert any(w["name"].startswith("managed.") for w in mutating["webhooks"])


# --- Coming from Slinky (issue 29 item 3) ------------------------------------------------------

#: The keys and defaults of Slinky slurm-bridge's chart (helm/slurm-bridge/values.yaml, 1.x),
#: as a Slinky user's values file carries them.
SLINKY_VALUES: dict[str, Any] = {
    "nameOverride": "",
    "fullnameOverride": "",
    "namespaceOverride": "",
    "scheduler": {
        "image": {"repository": "ghcr.io/slinkyproject/slurm-bridge-scheduler", "tag": ""},
        "replicaCount": 1,
        "leaderElect": False,
        "resources": {},
    },
    "schedulerConfig": {
        "schedulerName": "slurm-bridge-scheduler",
        "mcsLabel": "kubernetes",
        "partition": "slurm-bridge",
        "clientQPS": None,
    },
    "admission": {
        "enabled": True,
        "certManager": {"enabled": True},
        "replicas": 1,
        "managedNamespaces": ["slurm-bridge"],
        "managedNamespaceSelector": {},
    },
    "controllers": {"replicas": 1, "leaderElect": False},
    "sharedConfig": {
        "slurmRestApi": "http://slurm-restapi.slurm:6820",
        "deviceProfiles": None,
        "slurmJwtSecret": {"name": "slurm-bridge-token", "key": "SLURM_JWT"},
    },
}


def test_slinky_chart_values_are_refused_naming_our_keys() -> None:
    with pytest.raises(helm.HelmRenderError) as refused:
        render(SLINKY_VALUES)
    message = str(refused.value)
    for theirs, ours in (
        ("sharedConfig.slurmRestApi", "config.slurmRestApi"),
        ("sharedConfig.slurmJwtSecret", "slurm.tokenSecret"),
        ("sharedConfig.deviceProfiles", "nothing: the DRA device classes are fixed"),
        ("schedulerConfig.schedulerName", "config.schedulerName"),
        ("schedulerConfig.partition", "config.partition"),
        ("schedulerConfig.mcsLabel", "config.mcsLabel"),
        ("schedulerConfig.clientQPS", "nothing: there is no scheduler plugin"),
        ("admission.enabled", "webhook.enabled"),
        ("admission.certManager", "webhook.certManager"),
        ("admission.replicas", "webhook.replicas"),
        ("admission.managedNamespaces", "config.managedNamespaces"),
        ("admission.managedNamespaceSelector", "config.managedNamespaceSelector"),
        ("scheduler.image", "image"),
        ("scheduler.replicaCount", "allInOne.replicas"),
        ("controllers.leaderElect", "nothing: replicas always elect"),
    ):
        assert f"{theirs} -> {ours}" in message, (theirs, message)


@pytest.mark.parametrize("key", ["sharedConfig", "schedulerConfig", "admission"])
def test_each_slinky_key_alone_is_refused(key: str) -> None:
    with pytest.raises(helm.HelmRenderError, match=rf"use: {key}\."):
        render({key: SLINKY_VALUES[key]})


def test_an_unknown_top_level_key_is_refused_by_the_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["additionalProperties"] is False
    # Every key of values.yaml is in the schema (the defaults pass it).
    assert set(helm.Chart.load(CHART).values) <= set(schema["properties"])
    with pytest.raises(helm.HelmValuesError, match="additional properties 'replica' not allowed"):
        render({"replica": 3})
    with pytest.raises(helm.HelmValuesError, match="'repo' not allowed"):
        render({"image": {"repo": "x"}})


def test_the_docs_map_every_slinky_key_the_chart_names() -> None:
    template = (CHART / "templates" / "slinky-values.yaml").read_text()
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    section = deploy[deploy.index("## Coming from Slinky") :]
    for key in re.findall(r'^  "([A-Za-z.]+)" "', template, flags=re.MULTILINE):
        assert f"`{key}`" in section, key
