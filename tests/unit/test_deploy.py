"""deploy/: the Helm chart renders and lints offline (helm-python-sdk, Helm's Go engine without a
helm binary) for both layouts, every manifest validates for the Kubernetes versions we support,
pods run restricted, each component's RBAC is its own, every granted rule names calls the code
makes, and the ConfigMap is a configuration slurmbridge accepts. Also the Dockerfile, compose
file and Grafana dashboard."""

from __future__ import annotations

import filecmp
import json
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

import reconcilers
from slurmbridge import components, config

ROOT = Path(__file__).parents[2]
CHART = ROOT / "deploy" / "helm" / "slurmbridge"
K8S_VERSIONS = ("1.29.0", "1.33.0")
SOURCES = [
    *sorted((ROOT / "slurmbridge").glob("*.py")),
    *sorted((ROOT / "producers").glob("*.py")),
]

LAYOUTS: dict[str, dict[str, Any]] = {
    "default": {},
    "per-component": {"layout": "per-component"},
    "cert-manager and ServiceMonitor": {
        "webhook": {"certManager": {"enabled": True}},
        "serviceMonitor": {"enabled": True},
        "externalNats": {"credsSecret": {"name": "nats-creds"}},
    },
    "per-component, no webhook": {"layout": "per-component", "webhook": {"enabled": False}},
}

#: Kinds kubernetes-validate has no schema for (CRDs of other projects): checked by hand.
FOREIGN = {("cert-manager.io/v1", "Issuer"), ("cert-manager.io/v1", "Certificate"),
           ("monitoring.coreos.com/v1", "ServiceMonitor")}  # fmt: skip


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    out = helm.Chart.load(CHART).render(values, name="sb", namespace="slurm")
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
    return args[args.index("--only") + 1 :]


@pytest.mark.parametrize("values", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_the_chart_lints(values: dict[str, Any]) -> None:
    for k8s in K8S_VERSIONS:
        report = helm.lint(CHART, values, kube_version=f"v{k8s}")
        assert report["errors"] == [], report
        warnings = [m["error"] for m in report["messages"] if m["severity"] >= 2]
        # The NATS subchart is fetched by `helm dependency build` (no network here).
        assert warnings == ["chart directory is missing these dependencies: nats"], report


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
    assert cert["spec"]["secretName"] == "sb-slurmbridge-webhook-tls"
    assert "sb-slurmbridge-webhook.slurm.svc" in cert["spec"]["dnsNames"]
    assert cert["spec"]["issuerRef"] == {"name": "sb-slurmbridge-selfsigned", "kind": "Issuer"}
    (issuer,) = of_kind(docs, "Issuer")
    assert issuer["spec"] == {"selfSigned": {}}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (hook,) = of_kind(docs, kind)
        inject = hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        assert inject == "slurm/sb-slurmbridge-webhook"
        assert "caBundle" not in hook["webhooks"][0]["clientConfig"]
    (monitor,) = of_kind(docs, "ServiceMonitor")
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s"}
    ]
    (metrics,) = [s for s in of_kind(docs, "Service") if s["metadata"]["name"].endswith("metrics")]
    assert (
        metrics["metadata"]["labels"].items() >= monitor["spec"]["selector"]["matchLabels"].items()
    )


def test_all_in_one_runs_every_component_in_one_deployment() -> None:
    docs = render({})
    (deployment,) = of_kind(docs, "Deployment")
    assert sorted(only_of(deployment)) == sorted(
        [*components.PRODUCERS, *reconcilers.ALL, "webhook"]
    )
    assert deployment["spec"]["replicas"] == 2
    # The webhook's certificate: generated (no cert-manager), trusted by both configurations.
    (secret,) = of_kind(docs, "Secret")
    assert secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == {
        "tls.crt",
        "tls.key",
        "ca.crt",
    }
    for kind, path in (("Mutating", "/mutate"), ("Validating", "/validate")):
        (hook,) = of_kind(docs, f"{kind}WebhookConfiguration")
        client = hook["webhooks"][0]["clientConfig"]
        assert client["caBundle"] == secret["data"]["ca.crt"]
        assert client["service"]["path"] == path
        assert client["service"]["name"] == "sb-slurmbridge-webhook"


def test_per_component_layout_gives_each_its_deployment_and_service_account() -> None:
    docs = render({"layout": "per-component"})
    deployments = {d["metadata"]["name"]: d for d in of_kind(docs, "Deployment")}
    ran = sorted(c for d in deployments.values() for c in only_of(d))
    assert ran == sorted([*components.PRODUCERS, *reconcilers.ALL, "webhook"]), "once each"
    accounts = {d["spec"]["template"]["spec"]["serviceAccountName"] for d in deployments.values()}
    assert len(accounts) == len(deployments)
    assert {a["metadata"]["name"] for a in of_kind(docs, "ServiceAccount")} == accounts
    # The webhook alone serves no health port: its probes use its own TLS /healthz.
    probe = container(deployments["sb-slurmbridge-webhook"])["readinessProbe"]["httpGet"]
    assert probe == {"path": "/healthz", "port": "webhook", "scheme": "HTTPS"}
    # ... and the webhook lets placement's service account (which binds pods) label them.
    (cm,) = of_kind(docs, "ConfigMap")
    settings = yaml.safe_load(cm["data"]["config.yaml"])
    assert settings["webhook"]["serviceAccount"] == (
        "system:serviceaccount:slurm:sb-slurmbridge-placement"
    )


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
        assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]


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
    assert set(rules_table()) == {*components.PRODUCERS, *reconcilers.ALL, "webhook"}


def test_each_component_account_gets_only_its_own_rules() -> None:
    docs = render({"layout": "per-component"})
    table = rules_table()
    roles = {r["metadata"]["name"]: r for r in of_kind(docs, "ClusterRole")}
    bindings = {b["metadata"]["name"]: b for b in of_kind(docs, "ClusterRoleBinding")}
    for d in of_kind(docs, "Deployment"):
        name = d["metadata"]["name"]
        want = grants([rule for c in only_of(d) for rule in table[c]])
        assert grants(roles[name]["rules"]) == want, name
        (subject,) = bindings[name]["subjects"]
        assert subject["name"] == d["spec"]["template"]["spec"]["serviceAccountName"]
    # A few that matter: only workload and nodeset may delete pods; no one may delete nodes.
    deleters = {n for n, r in roles.items() if ("", "pods", "delete") in grants(r["rules"])}
    assert deleters == {"sb-slurmbridge-workload", "sb-slurmbridge-nodeset"}
    assert not any(("", "nodes", "delete") in grants(r["rules"]) for r in roles.values())
    assert not any("*" in str(r["rules"]) for r in roles.values())


#: The calls behind each grant (resource, verb) → code that makes it. A rule nobody calls is
#: a grant the code does not need.
CALLS: dict[tuple[str, str], str] = {
    ("nodes", "list"): r"list_node\(",
    ("nodes", "watch"): r"list_node\(",
    ("pods", "list"): r"list_pod_for_all_namespaces\(",
    ("pods", "watch"): r"list_pod_for_all_namespaces\(",
    ("jobs", "list"): r"list_job_for_all_namespaces\(",
    ("jobs", "watch"): r"list_job_for_all_namespaces\(",
    ("jobsets", "list"): r'"jobsets"',
    ("jobsets", "watch"): r'"jobsets"',
    ("leaderworkersets", "list"): r'"leaderworkersets"',
    ("leaderworkersets", "watch"): r'"leaderworkersets"',
    ("podgroups", "list"): r'"podgroups"',
    ("podgroups", "watch"): r'"podgroups"',
    ("nodesets", "list"): r'resource = "nodesets"',
    ("nodesets", "watch"): r'resource = "nodesets"',
    ("clusters", "list"): r'resource = "clusters"',
    ("clusters", "watch"): r'resource = "clusters"',
    ("horizontalpodautoscalers", "list"): r'"horizontalpodautoscalers"',
    ("horizontalpodautoscalers", "watch"): r'"horizontalpodautoscalers"',
    ("scaledobjects", "list"): r'"scaledobjects"',
    ("scaledobjects", "watch"): r'"scaledobjects"',
    ("secrets", "list"): r"list_namespaced_secret\(",
    (
        "secrets",
        "watch",
    ): r"list_namespaced_secret\(\s*c\.namespace,\s*field_selector=selector,\s*watch=True",
    ("nodes", "get"): r"read_node\(",
    ("nodes", "patch"): r"patch_node\b",
    ("nodes/status", "patch"): r"patch_node_status\b",
    ("events", "create"): r"create_namespaced_event\b",
    ("pods", "get"): r"read_namespaced_pod\(",
    ("pods", "patch"): r"patch_namespaced_pod\b",
    ("pods", "create"): r"create_namespaced_pod\b(?!_)",
    ("pods", "delete"): r"delete_namespaced_pod\b",
    ("pods/binding", "create"): r"create_namespaced_pod_binding\b",
    ("pods/status", "patch"): r"patch_namespaced_pod_status\b",
    ("nodesets", "get"): r"get_namespaced_custom_object\(",
    ("nodesets", "patch"): r"patch_namespaced_custom_object\b(?!_)",
    ("nodesets/status", "patch"): r"patch_namespaced_custom_object_status\b",
    ("nodesets/scale", "get"): r"get_namespaced_custom_object_scale\(",
    ("nodesets/scale", "patch"): r"patch_namespaced_custom_object_scale\b",
    ("poddisruptionbudgets", "create"): r"create_namespaced_pod_disruption_budget\b",
    ("clusters", "get"): r"get_namespaced_custom_object\(",
    ("clusters/status", "patch"): r"patch_namespaced_custom_object_status\b",
    ("namespaces", "get"): r"read_namespace\(",
}


def test_every_granted_rule_names_calls_the_code_makes() -> None:
    code = "\n".join(p.read_text() for p in SOURCES)
    for component, rules in rules_table().items():
        for _, resource, verb in grants(rules):
            pattern = CALLS.get((resource, verb))
            assert pattern, f"{component}: {verb} {resource} is granted but no call is known"
            assert re.search(pattern, code), f"{component}: {verb} {resource}: no {pattern}"


def test_the_chart_crds_are_deploy_crds() -> None:
    ours = sorted(p.name for p in (ROOT / "deploy" / "crds").glob("*.yaml"))
    assert sorted(p.name for p in (CHART / "crds").glob("*.yaml")) == ours
    for name in ours:
        assert filecmp.cmp(CHART / "crds" / name, ROOT / "deploy" / "crds" / name, shallow=False)


def test_the_configmap_is_a_valid_configuration_with_slinky_keys(tmp_path: Path) -> None:
    values = {
        "config": {
            "schedulerName": "my-scheduler",
            "slurmRestApi": "http://slurm:6820",
            "managedNamespaces": ["hpc", "ml"],
            "mcsLabel": "mcs",
            "partition": "batch",
        },
        "externalNats": {"url": "nats://a:4222,nats://b:4222"},
    }
    (cm,) = of_kind(render(values), "ConfigMap")
    text = cm["data"]["config.yaml"]
    # The files the pod has mounted: here, under tmp_path.
    for mounted in ("slurm/token", "webhook/tls.crt", "webhook/tls.key"):
        assert f"/var/run/secrets/{mounted}" in text
        (tmp_path / mounted).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / mounted).write_text("x")
    path = tmp_path / "config.yaml"
    path.write_text(text.replace("/var/run/secrets", str(tmp_path)))
    s = config.load(path=path, env={})
    assert (s.scheduler_name, s.partition) == ("my-scheduler", "batch")
    assert s.slurm_url == "http://slurm:6820"
    assert s.managed_namespaces == ["hpc", "ml"] and s.mcs_label == "mcs"
    assert s.nats.url == "nats://a:4222,nats://b:4222"
    assert s.slurm.token_file == f"{tmp_path}/slurm/token" and s.kube.in_cluster
    assert s.webhook.cert_file == f"{tmp_path}/webhook/tls.crt"
    # Both webhooks only look at the managed namespaces.
    hooks = of_kind(render(values), "ValidatingWebhookConfiguration")
    selector = hooks[0]["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]
    assert selector["values"] == ["hpc", "ml"]


def test_an_unknown_layout_stops_rendering_with_its_name() -> None:
    with pytest.raises(helm.HelmRenderError, match="layout"):
        render({"layout": "everything-everywhere"})


# --- Dockerfile, compose, Grafana --------------------------------------------------------------


def test_dockerfile_is_slim_pinned_and_non_root() -> None:
    lines = [
        ln.strip()
        for ln in (ROOT / "Dockerfile").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    bases = [ln.split()[1] for ln in lines if ln.startswith("FROM ")]
    assert bases and all(b.startswith("python:3.11-slim") for b in bases), bases
    assert not any(b.endswith(":latest") or ":" not in b for b in bases)
    user = [ln for ln in lines if ln.startswith("USER ")]
    assert user == ["USER 65532:65532"]
    assert lines.index(user[0]) > max(i for i, ln in enumerate(lines) if ln.startswith("RUN "))
    assert 'ENTRYPOINT ["slurmbridge"]' in lines
    assert "EXPOSE 8080 8081 9443" in lines
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "tests"} <= set(ignored)


def test_compose_runs_nats_with_jetstream_then_slurmbridge() -> None:
    doc = yaml.safe_load((ROOT / "compose.yaml").read_text())
    nats, bridge = doc["services"]["nats"], doc["services"]["slurmbridge"]
    assert "-js" in nats["command"] and "healthcheck" in nats
    assert not nats["image"].endswith(":latest")
    assert bridge["build"] == "."
    assert bridge["depends_on"] == {"nats": {"condition": "service_healthy"}}
    assert bridge["environment"]["SLURMBRIDGE_NATS_URL"] == "nats://nats:4222"
    assert bridge["read_only"] is True


def test_grafana_dashboard_queries_only_metrics_we_export() -> None:
    from prometheus_client import REGISTRY

    import slurmbridge.metrics
    import slurmbridge.partition_metrics

    del slurmbridge.metrics
    exported: set[str] = set()
    for family in REGISTRY.collect():
        exported.add(family.name)
        exported.update(s.name for s in family.samples)
        if family.type == "histogram":
            exported.update(f"{family.name}_{x}" for x in ("bucket", "sum", "count"))
        if family.type == "counter":
            exported.add(f"{family.name}_total")
    dash = json.loads((ROOT / "deploy" / "grafana" / "slurmbridge.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    used = {m for e in exprs for m in re.findall(r"\b(slurm(?:bridge)?_[a-z_]+)\b", e)}
    assert used and used <= exported, used - exported
    ours = {n for n in exported if n.startswith(("slurmbridge_", "slurm_partition_"))}
    families = {n.removesuffix("_total").removesuffix("_bucket") for n in used}
    missing = {n for n in ours if not n.endswith(("_created", "_sum", "_count", "_bucket"))}
    missing = {n.removesuffix("_total") for n in missing} - families
    assert not missing, f"metrics without a panel: {sorted(missing)}"
