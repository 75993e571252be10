"""The chart's RBAC against what the code really asks of Kubernetes.

The system runs as the chart's per-component layout lays it out: one process (an ``App``) per
Deployment, each with its own Kubernetes client, whose requests the Kubernetes simulator
attributes to it (by User-Agent) and to the namespace they address. A story touches every
component: a cordon and an uncordon, a pod placed through a job that then ends, a pod whose
annotations cannot become a job, an external node, a Cluster with its token Secret, a NodeSet
autoscaled up and back down by a wave of jobs, a NodeSet pod that fails, and an admission
request in a namespace chosen by ``managedNamespaceSelector``.

Then both ways, per Deployment: every request it made is granted by its own ClusterRole, or by
its Role in the namespace it addressed; and every grant of its roles was used, or is listed in
:data:`NOT_EXERCISED` with the reason it is still needed. The all-in-one roles allow everything
made. (tests/unit/test_deploy.py checks that each grant names a call in the code.)

A request is more than its own verb and resource where an admission plugin authorizes more:
OwnerReferencesPermissionEnforcement (OpenShift, hardened clusters) lets a create that sets
``blockOwnerDeletion: true`` on an owner reference through only if the client may also
``update`` the owner's ``finalizers`` subresource. :func:`admission_checks` models it, and
those checks count as requests the client made.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import json
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient

from schemas import wellknown
from slurmbridge.app import App
from slurmbridge.config import KubeSettings, Settings
from slurmbridge.devtools.sim.kube import DEFAULT_RESOURCES, KubeSim
from slurmbridge.devtools.sim.slurmrestd import SlurmSim
from slurmbridge.devtools.testing import MANAGED_NODE_TOLERATION, Stack
from slurmbridge.kube import client as kube
from tests._helpers import pod_review
from tests.integration.certs import make_certs, trusting
from tests.integration.test_clusters_e2e import NS, cluster, secret
from tests.unit.test_deploy import grants, of_kind, only_of, render

P = "autoscale.slurmbridge.dev/"
SCHED = wellknown.DEFAULT_SCHEDULER_NAME
GROUPS = {spec.plural: spec.group for spec in DEFAULT_RESOURCES}
SELECTOR = {"matchLabels": {"slurm": "yes"}}
#: The chart as the story needs it: the webhook reads Namespaces (managedNamespaceSelector),
#: the Cluster objects and their Secrets live in NS.
VALUES: dict[str, Any] = {
    "config": {"managedNamespaceSelector": SELECTOR},
    "rbac": {"clusterSecretNamespaces": [NS]},
}

Grant = tuple[str, str, str]  # (apiGroup, resource, verb)
Made = tuple[str, str | None, str, str]  # (Deployment, namespace or None, verb, resource)

#: Grants the story does not use, by Deployment (its name without the release's prefix), and
#: why the code still needs them.
_DRA = "DRA claims: tests/integration/test_dra_e2e.py drives them (effectors/claims.py)"
_WORKLOAD_API = (
    "the story's simulator is a 1.35 server (no Workload API, its paths are not found): the "
    "scheduling.k8s.io PodGroups and Workloads are listed, watched and the PodGroup's "
    "scheduled condition written on 1.36+ (tests/integration/test_workload_api_e2e.py), "
    "CompositePodGroups on 1.37 with their gate (test_composite_pod_group_e2e.py)"
)
NOT_EXERCISED: dict[tuple[str, Grant], str] = {
    **{
        ("producers", ("scheduling.k8s.io", resource, verb)): _WORKLOAD_API
        for resource in ("podgroups", "workloads", "compositepodgroups")
        for verb in ("list", "watch")
    },
    ("placement", ("scheduling.k8s.io", "podgroups", "get")): _WORKLOAD_API,
    ("placement", ("scheduling.k8s.io", "podgroups/status", "patch")): _WORKLOAD_API,
    ("placement", ("", "pods/finalizers", "update")): _DRA + "; the extended-resource claim "
    "is owned by its pod with blockOwnerDeletion",
    ("placement", ("resource.k8s.io", "resourceclaims", "get")): _DRA,
    ("placement", ("resource.k8s.io", "resourceclaims", "list")): _DRA,
    ("placement", ("resource.k8s.io", "resourceclaims", "create")): _DRA,
    ("placement", ("resource.k8s.io", "resourceclaims/status", "patch")): _DRA,
    ("workload", ("resource.k8s.io", "resourceclaims", "get")): _DRA,
    ("workload", ("resource.k8s.io", "resourceclaims", "delete")): _DRA,
    ("workload", ("resource.k8s.io", "resourceclaims/status", "patch")): _DRA,
    ("webhook", ("resource.k8s.io", "resourceclaims", "get")): "the webhook reads a pod's "
    "claims for the DRA rules (tests/unit/test_webhook.py test_dra_rules)",
    ("webhook", ("resource.k8s.io", "resourceclaimtemplates", "get")): "as resourceclaims",
    ("webhook", ("resource.k8s.io", "deviceclasses", "get")): "the webhook reads the "
    "DeviceClasses a pod names to match them to device profiles (tests/unit/test_webhook.py "
    "test_the_server_matches_the_pods_device_classes_to_profiles)",
    **{
        ("nodeset", ("apps", "controllerrevisions", verb)): "a NodeSet's revision history is "
        "read back, renumbered on a rollback and pruned past revisionHistoryLimit only after "
        "template changes, which the story does not make (tests/integration/"
        "test_effector_nodesets.py drives them)"
        for verb in ("get", "patch", "delete")
    },
    ("nodeset", ("", "persistentvolumeclaims", "create")): "a NodeSet's volumeClaimTemplates "
    "make its pods' claims; the story's NodeSets have none (tests/integration/"
    "test_effector_nodesets.py drives it)",
    **{
        ("nodeset", grant): "a scale-in under persistentVolumeClaimRetentionPolicy hands the "
        "claims to the condemned pod (blockOwnerDeletion); the story's NodeSets have no "
        "claims (tests/integration/test_effector_nodesets.py drives it)"
        for grant in (
            ("", "persistentvolumeclaims", "get"),
            ("", "persistentvolumeclaims", "patch"),
            ("", "pods/finalizers", "update"),
        )
    },
    ("nodeset", ("", "pods", "list")): "a DaemonSet-mode NodeSet's pod creation lists the "
    "pods of that hostname first; the story's NodeSets are StatefulSet mode (tests/"
    "integration/test_nodesets_e2e.py test_daemonset_mode_follows_node_labels drives it)",
}

#: Who is asking, set for each request the simulator serves.
_WHO: contextvars.ContextVar[tuple[str, str | None]] = contextvars.ContextVar("who")

#: (group, kind) → the resource, as the admission plugin's RESTMapper maps an owner reference.
_OWNERS = {(spec.group, spec.kind): spec for spec in DEFAULT_RESOURCES}


def admission_checks(body: Any, namespace: str | None) -> list[tuple[str | None, str, str]]:
    """The extra authorizations the OwnerReferencesPermissionEnforcement admission plugin
    makes for a *create* of ``body`` in ``namespace``, as ``(namespace, verb, resource)``.

    plugin/pkg/admission/gc (``gcPermissionsEnforcement.Validate``): a create may set any
    owner reference (whoever may create a thing could have never created it), but each one
    with ``blockOwnerDeletion: true`` needs ``update`` on ``<owner resource>/finalizers`` in
    the owner's group (``ownerRefToDeleteAttributeRecords``), in the dependent's namespace
    when the owner is namespaced. (Updates also need ``delete`` on the object; the code never
    changes owner references after a create.)
    """
    if not isinstance(body, dict):
        return []
    refs = (body.get("metadata") or {}).get("ownerReferences") or []
    out: list[tuple[str | None, str, str]] = []
    for ref in refs:
        if not isinstance(ref, dict) or ref.get("blockOwnerDeletion") is not True:
            continue
        api_version = str(ref.get("apiVersion", ""))
        group = api_version.rpartition("/")[0]
        owner = _OWNERS.get((group, str(ref.get("kind", ""))))
        assert owner is not None, f"an owner reference the simulator cannot map: {ref}"
        where = namespace if owner.namespaced else None
        out.append((where, "update", f"{owner.plural}/finalizers"))
    return out


class _Attributed(Counter[tuple[str, str]]):
    """``KubeSim.requests``, also counted by (who, namespace)."""

    def __init__(self, into: Counter[Made]) -> None:
        super().__init__()
        self.into = into

    def __setitem__(self, key: tuple[str, str], value: int) -> None:
        agent, namespace = _WHO.get(("?", None))
        verb, resource = key
        self.into[(agent, namespace, verb, resource)] += 1
        super().__setitem__(key, value)


class Roles(msgspec.Struct):
    """What one ServiceAccount may do: cluster-wide, and per namespace (Roles)."""

    cluster: set[Grant]
    namespaced: dict[str, set[Grant]]

    def allows(self, namespace: str | None, grant: Grant) -> bool:
        return grant in self.cluster or (
            namespace is not None and grant in self.namespaced.get(namespace, set())
        )

    def all(self) -> set[Grant]:
        return self.cluster.union(*self.namespaced.values())


def roles_of(docs: list[dict[str, Any]], account: str) -> Roles:
    """The grants of ServiceAccount ``account`` through the bindings in ``docs``."""
    out = Roles(set(), {})
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        for binding in of_kind(docs, kind):
            if not any(s["name"] == account for s in binding["subjects"]):
                continue
            ns = binding["metadata"].get("namespace")
            (role,) = [
                r
                for r in of_kind(docs, role_kind)
                if r["metadata"]["name"] == binding["roleRef"]["name"]
                and r["metadata"].get("namespace") == ns
            ]
            if ns is None:
                out.cluster |= grants(role["rules"])
            else:
                out.namespaced.setdefault(ns, set()).update(grants(role["rules"]))
    return out


def deployments(docs: list[dict[str, Any]]) -> dict[str, tuple[list[str], Roles]]:
    """Deployment name → (its ``--only`` components, its ServiceAccount's grants)."""
    return {
        d["metadata"]["name"]: (
            only_of(d),
            roles_of(docs, d["spec"]["template"]["spec"]["serviceAccountName"]),
        )
        for d in of_kind(docs, "Deployment")
    }


def nodeset(name: str, replicas: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "slinky.slurm.net/v1alpha1",
        "kind": "NodeSet",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "template": {
                "spec": {
                    "containers": [{"name": "slurmd", "image": "s"}],
                    "tolerations": [MANAGED_NODE_TOLERATION],
                }
            },
        },
    }


def review(pod_namespace: str) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "asks", "namespace": pod_namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    return pod_review(
        "u1",
        "CREATE",
        pod_namespace,
        pod,
        kind={"group": "", "version": "v1", "kind": "Pod"},
        userInfo={"username": "alice"},
    )


async def settled(apps: list[App], timeout: float = 15.0) -> None:
    """Every process's workers idle, three looks in a row."""
    deadline = time.monotonic() + timeout
    quiet = 0
    while quiet < 3:
        quiet = quiet + 1 if all([await a.idle() for a in apps]) else 0
        if time.monotonic() > deadline:
            raise TimeoutError("workers still busy")
        await asyncio.sleep(0.1)


async def story(s: Stack, apps: list[App], webhook: App, ca: Path) -> None:
    """Exercise every component once (see the module docstring)."""
    s.kube.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NS, "labels": {"slurm": "yes"}},
        }
    )
    # webhook: a pod asking for the default scheduler in a namespace the selector picks.
    assert webhook.webhook is not None
    async with httpx.AsyncClient(verify=trusting({"ca": ca})) as http:
        r = await http.post(f"https://localhost:{webhook.webhook.port}/mutate", json=review(NS))
    patch = json.loads(base64.b64decode(r.json()["response"]["patch"]))
    assert patch == [{"op": "add", "path": "/spec/schedulerName", "value": SCHED}]

    # node_taint, slurm_drain: a cordon and an uncordon.
    s.cordon("n1")
    await s.wait_for(lambda: s.slurm_node("n1").has("DRAIN"), what="drained")
    s.uncordon("n1")
    # placement, workload: a pod placed through a job that then ends; one that cannot be.
    s.kube.add_pod("solo", scheduler_name=SCHED, requests={"cpu": "1", "memory": "1Mi"})
    s.kube.add_pod(
        "bad",
        scheduler_name=SCHED,
        annotations={wellknown.ANNOTATION_SLURMJOB_PREFIX + "timelimit": "soon"},
    )

    def job_of_solo() -> int:
        labels = s.kube.get("pods", "solo")["metadata"].get("labels") or {}
        return int(labels.get(wellknown.LABEL_SLURM_JOBID, "0"))

    await s.wait_for(lambda: bool(s.kube.get("pods", "solo")["spec"].get("nodeName")))
    s.slurm.complete_job(job_of_solo())
    await s.wait_for(
        lambda: not any(p["metadata"]["name"] == "solo" for p in s.kube.list("pods")),
        what="pod of the ended job deleted",
    )
    await s.wait_for(
        lambda: any(
            c["type"] == "PodScheduled" and c["reason"] == "SlurmJobInvalid"
            for c in s.kube.get("pods", "bad").get("status", {}).get("conditions") or []
        ),
        what="the untranslatable pod's condition",
    )
    # node_register: an external node.
    s.kube.add_node(
        "ext-1",
        cpu="4",
        memory="8Gi",
        labels={wellknown.LABEL_EXTERNAL_NODE: "true"},
        annotations={wellknown.ANNOTATION_EXTERNAL_NODE_PARTITIONS: "batch"},
    )
    # cluster: a Cluster object and its token Secret.
    beta = SlurmSim(cluster="beta")
    beta.seed_default(1)
    await beta.start(versions=("v0.0.44",))
    try:
        s.kube.create(secret("beta-token", beta.mint_token()))
        s.kube.create(cluster("beta", beta.url, "beta-token"))
        await s.wait_for(
            lambda: (s.kube.get("clusters", "beta", NS).get("status") or {}).get("isReady") is True,
            what="beta ready",
        )
    finally:
        await beta.stop()
    # nodeset: a pod that fails is deleted (the NodeSet keeps count of its failures).
    s.kube.create(nodeset("static", 1, {}))
    await s.wait_for(
        lambda: any(p["metadata"]["name"] == "static-0" for p in s.kube.list("pods", NS)),
        what="static-0 created",
    )
    s.kube.patch("pods", "static-0", {"status": {"phase": "Failed"}}, NS, subresource="status")
    await s.wait_for(
        lambda: (
            wellknown.ANNOTATION_NODESET_POD_FAILURES
            in (s.kube.get("nodesets", "static", NS)["metadata"].get("annotations") or {})
        ),
        what="the failure counted",
    )
    s.kube.patch("nodesets", "static", {"spec": {"replicas": 0}}, NS)
    # autoscale (and nodeset): a wave grows the NodeSet, the quiet shrinks it back.
    s.slurm.add_partition("burst")
    s.kube.create(
        nodeset(
            "burst",
            0,
            {
                P + "partition": "burst",
                P + "max-replicas": "2",
                P + "cooldown": "1",
                P + "idle-to-zero-after": "1",
            },
        )
    )
    jobs = [
        s.slurm.submit({"partition": "burst", "tasks": 2, "min_nodes": 1}, external=True)
        for _ in range(2)
    ]

    def replicas() -> int:
        return int(s.kube.get("nodesets", "burst", NS)["spec"]["replicas"])

    await s.wait_for(lambda: replicas() == 2, timeout=15, what="scaled up")
    await s.wait_for(
        lambda: all(s.slurm.job(j).state == ("RUNNING",) for j in jobs),
        timeout=20,
        what="jobs running on the NodeSet",
    )
    # nodeset: its busy pods are protected (a label, and a PodDisruptionBudget over them).
    await s.wait_for(
        lambda: any(
            (p["metadata"].get("labels") or {}).get(wellknown.LABEL_POD_PROTECT) == "true"
            for p in s.kube.list("pods", NS)
        ),
        what="busy NodeSet pods protected",
    )
    for j in jobs:
        s.slurm.complete_job(j)
    await s.wait_for(lambda: replicas() == 0, timeout=15, what="back to zero")
    await s.wait_for(lambda: not s.kube.list("pods", NS), timeout=15, what="pods gone")
    await settled(apps)


async def test_each_deployment_makes_exactly_the_calls_its_roles_grant(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    layout = deployments(render({**VALUES, "layout": "per-component"}))
    made: Counter[Made] = Counter()
    # Attribute each request the simulator serves to the client's User-Agent: one per process,
    # named after its Deployment and set from the kubeconfig each process is given.
    original = KubeSim._dispatch

    async def dispatch(self: KubeSim, request: web.Request, route: Any) -> web.StreamResponse:
        agent = request.headers.get("User-Agent", "?")
        _WHO.set((agent, route.namespace))
        if request.method == "POST" and route.name is None and route.subresource is None:
            # Admission runs after the create itself was authorized (aiohttp keeps the body
            # read here for the simulator to read again).
            body = json.loads(await request.read() or b"null")
            for namespace, verb, resource in admission_checks(body, route.namespace):
                made[(agent, namespace, verb, resource)] += 1
        return await original(self, request, route)

    monkeypatch.setattr(KubeSim, "_dispatch", dispatch)
    agents: dict[str, str] = {}
    real_client = kube.api_client

    async def api_client(settings: KubeSettings) -> ApiClient:
        client = await real_client(settings)
        client.user_agent = agents[str(settings.kubeconfig)]
        return client

    monkeypatch.setattr(kube, "api_client", api_client)

    (producers,) = [n for n, (only, _) in layout.items() if "kube-watcher" in only]
    (webhook_name,) = [n for n, (only, _) in layout.items() if only == ["webhook"]]
    certs = make_certs(tmp_path / "certs")
    s = Stack(nodes=3, poll_interval=0.2, components=layout[producers][0])
    s.kube.requests = _Attributed(made)
    agents[str(s.sims.kubeconfig)] = producers
    apps: list[App] = []
    try:
        await s.start()
        assert s.settings is not None and s.app is not None

        def settings_for(name: str) -> Settings:
            assert s.settings is not None
            path = tmp_path / f"{name}.kubeconfig"
            shutil.copy(s.sims.kubeconfig, path)
            agents[str(path)] = name
            kube_settings = msgspec.structs.replace(s.settings.kube, kubeconfig=str(path))
            return msgspec.structs.replace(s.settings, kube=kube_settings, instance_id=name)

        for name, (only, _) in sorted(layout.items()):
            if name in (producers, webhook_name):
                continue
            app = App(settings_for(name), only=only, with_health=False)
            apps.append(app)
            await app.start()
        base = settings_for(webhook_name)
        webhook_settings = msgspec.structs.replace(
            base.webhook,
            bind="127.0.0.1",
            port=0,
            cert_file=str(certs["cert"]),
            key_file=str(certs["key"]),
        )
        webhook = App(
            msgspec.structs.replace(
                base, managed_namespace_selector=SELECTOR, webhook=webhook_settings
            ),
            only=["webhook"],
            with_health=False,
        )
        apps.append(webhook)
        await webhook.start()
        await story(s, [s.app, *apps], webhook, certs["ca"])
    finally:
        for app in reversed(apps):
            await app.stop()
        await s.stop()

    by_deployment: dict[str, set[tuple[str | None, Grant]]] = {n: set() for n in layout}
    for (who, namespace, verb, label), count in made.items():
        assert who in layout, f"a request from an unknown client {who!r}: {verb} {label}"
        if count:
            by_deployment[who].add((namespace, (GROUPS[label.split("/")[0]], label, verb)))
    for name, (only, roles) in layout.items():
        used = by_deployment[name]
        assert used, f"{name} ({only}) made no request: the story missed it"
        refused = {(ns, g) for ns, g in used if not roles.allows(ns, g)}
        assert not refused, f"{name}: requests its roles do not allow: {sorted(refused, key=str)}"
        unused = roles.all() - {g for _, g in used}
        group = name.removeprefix("sb-slurmbridge-")
        undeclared = {g for g in unused if (group, g) not in NOT_EXERCISED}
        assert not undeclared, f"{name}: granted, never used: {sorted(undeclared)}"

    # The all-in-one Deployment's account allows everything any of them made.
    ((_, everything),) = deployments(render(VALUES)).values()
    for name, used in by_deployment.items():
        for namespace, grant in used:
            assert everything.allows(namespace, grant), (name, namespace, grant)


def test_the_roles_are_read_off_the_bindings() -> None:
    """The helpers above see what the chart grants (else the checks would pass vacuously)."""
    layout = deployments(render({**VALUES, "layout": "per-component"}))
    roles = {name.removeprefix("sb-slurmbridge-"): r for name, (_, r) in layout.items()}
    assert ("", "nodes", "patch") in roles["node-taint"].cluster
    assert ("slinky.slurm.net", "nodesets/finalizers", "update") in roles["nodeset"].cluster
    assert roles["producers"].namespaced == {
        NS: {("", "secrets", "list"), ("", "secrets", "watch")}
    }
    assert not roles["producers"].allows("default", ("", "secrets", "list"))
    assert roles["webhook"].all() == {
        ("", "namespaces", "get"),
        ("resource.k8s.io", "resourceclaims", "get"),
        ("resource.k8s.io", "resourceclaimtemplates", "get"),
        ("resource.k8s.io", "deviceclasses", "get"),
    }
    without = deployments(render({"layout": "per-component"}))
    (hook,) = [r for name, (_, r) in without.items() if name.endswith("webhook")]
    assert hook.all() == set()


def test_the_owner_reference_admission_check_is_modelled() -> None:
    """A blocking owner reference costs an `update` of the owner's finalizers; others nothing."""
    owner = {"apiVersion": "slinky.slurm.net/v1alpha1", "kind": "NodeSet", "name": "a", "uid": "u"}
    pod = {"metadata": {"ownerReferences": [{**owner, "blockOwnerDeletion": True}]}}
    assert admission_checks(pod, NS) == [(NS, "update", "nodesets/finalizers")]
    assert admission_checks({"metadata": {"ownerReferences": [owner]}}, NS) == []
    node_owner = {"apiVersion": "v1", "kind": "Node", "name": "n", "blockOwnerDeletion": True}
    assert admission_checks({"metadata": {"ownerReferences": [node_owner]}}, NS) == [
        (None, "update", "nodes/finalizers")
    ]
    assert admission_checks({"metadata": {}}, NS) == []
