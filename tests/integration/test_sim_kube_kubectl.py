"""What kubectl needs of the Kubernetes simulator, checked over HTTP without kubectl: request
media types (protobuf bodies kubectl 1.37 sends, captured in tests/data/kubectl-1.37/, and
415 for the rest), Table answers, the OpenAPI documents, the Job controller and the default
scheduler's taint filter. tests/e2e/test_kubectl.py runs kubectl itself.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from slurmbridge.devtools.sim import kubeproto
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.devtools.sim.slurmd import DefaultScheduler

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data" / "kubectl-1.37"
PROTOBUF = "application/vnd.kubernetes.protobuf"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


@pytest.fixture
async def sim() -> AsyncIterator[KubeSim]:
    s = KubeSim(bookmark_interval=0.2, kubelet=True, job_controller=True)
    s.add_node("n1", cpu="2", memory="1000Mi")
    s.add_node("n2", cpu="2", memory="1000Mi")
    await s.start()
    scheduler = DefaultScheduler(s)  # binds the Job's pods, as kube-scheduler would
    scheduler.attach()
    try:
        yield s
    finally:
        scheduler.detach()
        await s.stop()


@pytest.fixture
async def http(sim: KubeSim) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=sim.url) as session:
        yield session


async def _until(what: str, cond: Callable[[], bool], timeout: float = 10) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.02)
    assert cond(), what


# --- request media types ----------------------------------------------------------------------


def test_kubectls_protobuf_bodies_decode_to_their_json_objects() -> None:
    assert kubeproto.decode((DATA / "create-namespace.pb").read_bytes()) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "x"},
    }
    assert kubeproto.decode((DATA / "create-job.pb").read_bytes()) == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j1"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "j1", "image": "busybox", "command": ["sleep", "5"]}],
                    "restartPolicy": "Never",
                }
            }
        },
    }
    deployment = kubeproto.decode((DATA / "create-deployment.pb").read_bytes())
    assert deployment["spec"]["replicas"] == 1  # a pointer's explicit value is kept
    assert deployment["spec"]["selector"] == {"matchLabels": {"app": "d"}}
    assert kubeproto.decode((DATA / "create-configmap.pb").read_bytes())["data"] == {"a": "b"}
    with pytest.raises(kubeproto.ProtobufError, match="magic"):
        kubeproto.decode(b'{"kind": "Namespace"}')


async def test_create_takes_protobuf_json_and_yaml_and_refuses_other_media_types(
    sim: KubeSim, http: aiohttp.ClientSession
) -> None:
    body = (DATA / "create-namespace.pb").read_bytes()
    async with http.post("/api/v1/namespaces", data=body, headers={"Content-Type": PROTOBUF}) as r:
        assert r.status == 201, await r.text()
    assert sim.get("namespaces", "x")["metadata"]["name"] == "x"
    yaml_body = b"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: y\n"
    async with http.post(
        "/api/v1/namespaces", data=yaml_body, headers={"Content-Type": "application/yaml"}
    ) as r:
        assert r.status == 201, await r.text()
    async with http.post(
        "/api/v1/namespaces", data=b"name: z", headers={"Content-Type": "text/plain"}
    ) as r:
        assert r.status == 415
        status = await r.json()
    assert status["reason"] == "UnsupportedMediaType"
    assert status["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )
    # Custom resources have no protobuf encoding (apiextensions-apiserver).
    async with http.post(
        "/apis/slinky.slurm.net/v1beta1/namespaces/default/nodesets",
        data=body,
        headers={"Content-Type": PROTOBUF},
    ) as r:
        assert r.status == 415
        assert (await r.json())["message"].endswith("application/json, application/yaml")


# --- Table answers ----------------------------------------------------------------------------


async def test_nodes_answer_as_a_table_with_the_printers_columns(
    sim: KubeSim, http: aiohttp.ClientSession
) -> None:
    sim.cordon("n1")
    async with http.get("/api/v1/nodes", headers={"Accept": TABLE}) as r:
        table = await r.json()
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names[:5] == ["Name", "Status", "Roles", "Age", "Version"]
    assert [c["priority"] for c in table["columnDefinitions"]][5:] == [1] * 5
    rows = {r["cells"][0]: r for r in table["rows"]}
    assert rows["n1"]["cells"][1] == "Ready,SchedulingDisabled"
    assert rows["n2"]["cells"][1] == "Ready"
    assert rows["n1"]["object"]["kind"] == "PartialObjectMetadata"
    assert table["metadata"]["resourceVersion"] == sim.resource_version
    # Without the Table clause the answer is the plain list, as before.
    async with http.get("/api/v1/nodes") as r:
        assert (await r.json())["kind"] == "NodeList"


async def test_a_watch_for_tables_sends_one_row_per_event_headers_first(
    sim: KubeSim, http: aiohttp.ClientSession
) -> None:
    async with http.get(
        "/api/v1/nodes?watch=true&resourceVersion=0", headers={"Accept": TABLE}
    ) as r:
        first = json.loads(await r.content.readline())
        second = json.loads(await r.content.readline())
        sim.cordon("n2")
        third = json.loads(await r.content.readline())
    assert first["type"] == second["type"] == "ADDED"
    assert first["object"]["kind"] == "Table"
    assert [c["name"] for c in first["object"]["columnDefinitions"]][:2] == ["Name", "Status"]
    assert second["object"]["columnDefinitions"] == []
    assert third["type"] == "MODIFIED"
    assert third["object"]["rows"][0]["cells"][:2] == ["n2", "Ready,SchedulingDisabled"]


async def test_a_custom_resource_prints_its_crds_printer_columns(
    sim: KubeSim, http: aiohttp.ClientSession
) -> None:
    sim.create(
        {
            "apiVersion": "slinky.slurm.net/v1beta1",
            "kind": "NodeSet",
            "metadata": {"name": "ns1", "namespace": "default"},
            "spec": {"replicas": 2},
        }
    )
    sim.patch_merge(
        "nodesets",
        "ns1",
        {"status": {"replicas": 2, "desired": 2}},
        "default",
        subresource="status",
    )
    path = "/apis/slinky.slurm.net/v1beta1/namespaces/default/nodesets"
    async with http.get(path, headers={"Accept": TABLE}) as r:
        table = await r.json()
    cols = [(c["name"], c["type"], c["priority"]) for c in table["columnDefinitions"]]
    assert cols[:5] == [
        ("Name", "string", 0),
        ("Desired", "integer", 0),
        ("Replicas", "integer", 0),
        ("Updated", "integer", 0),
        ("Ready", "integer", 0),
    ]
    assert ("Idle", "integer", 1) in cols
    cells = table["rows"][0]["cells"]
    assert cells[:5] == ["ns1", 2, 2, None, None]
    assert cells[-1].endswith("s")  # Age: "0s"


# --- OpenAPI ----------------------------------------------------------------------------------


async def test_openapi_v3_lets_kubectl_ask_for_server_side_field_validation(
    http: aiohttp.ClientSession,
) -> None:
    async with http.get("/openapi/v3") as r:
        paths = (await r.json())["paths"]
    url = paths["apis/slinky.slurm.net/v1beta1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/slinky.slurm.net/v1beta1?hash=")
    assert "api/v1" in paths and "apis/batch/v1" in paths
    async with http.get(url) as r:
        assert r.headers["Etag"] == f'"{url.split("hash=")[1]}"'
        doc = await r.json()
    item = doc["paths"]["/apis/slinky.slurm.net/v1beta1/namespaces/{namespace}/nodesets/{name}"]
    patch = item["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "slinky.slurm.net",
        "version": "v1beta1",
        "kind": "NodeSet",
    }
    assert {"fieldValidation", "fieldManager", "dryRun"} <= {
        p["name"] for p in patch["parameters"] if p["in"] == "query"
    }
    schema = doc["components"]["schemas"]["net.slurm.slinky.v1beta1.NodeSet"]
    assert "replicas" in schema["properties"]["spec"]["properties"]
    async with http.get(url.split("?")[0] + "?hash=stale", allow_redirects=False) as r:
        assert r.status == 301 and r.headers["Location"] == url
    async with http.get("/openapi/v2", headers={"Accept": "application/json"}) as r:
        v2 = await r.json()
    assert v2["swagger"] == "2.0" and "net.slurm.slinky.v1beta1.NodeSet" in v2["definitions"]
    proto = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    async with http.get("/openapi/v2", headers={"Accept": proto}) as r:
        assert r.status == 406


async def test_strict_field_validation_refuses_unknown_fields_of_a_custom_resource(
    sim: KubeSim, http: aiohttp.ClientSession
) -> None:
    body: dict[str, Any] = {
        "apiVersion": "slinky.slurm.net/v1beta1",
        "kind": "NodeSet",
        "metadata": {"name": "ns1"},
        "spec": {"replicas": 1, "bogus": 1, "template": {"other": "x"}},
    }
    path = "/apis/slinky.slurm.net/v1beta1/namespaces/default/nodesets"
    async with http.post(path + "?fieldValidation=Strict", json=body) as r:
        assert r.status == 400
        status = await r.json()
    assert status["message"] == (
        'NodeSet in version "v1beta1" cannot be handled as a NodeSet: strict decoding error: '
        'unknown field "spec.bogus", unknown field "spec.template.other"'
    )
    async with http.post(path, json=body) as r:  # Warn/Ignore: pruned, stored
        assert r.status == 201
    assert "bogus" not in sim.get("nodesets", "ns1", "default")["spec"]


# --- discovery --------------------------------------------------------------------------------


async def test_a_group_lists_every_version_its_resources_are_served_at(
    http: aiohttp.ClientSession,
) -> None:
    async with http.get("/apis/slinky.slurm.net") as r:
        group = await r.json()
    assert [v["version"] for v in group["versions"]] == ["v1beta1", "v1alpha1"]
    assert group["preferredVersion"]["version"] == "v1beta1"
    async with http.get("/apis/slinky.slurm.net/v1beta1") as r:
        resources = {x["name"]: x for x in (await r.json())["resources"]}
    assert resources["nodesets"]["shortNames"] == ["nss", "slurmd"]
    assert resources["nodesets"]["categories"] == ["slurm"]
    async with http.get("/api/v1") as r:
        core = {x["name"]: x for x in (await r.json())["resources"]}
    assert core["pods"]["categories"] == ["all"]  # kubectl get all
    assert "categories" not in core["nodes"]


# --- the Job controller -----------------------------------------------------------------------


def _job(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            **spec,
            "template": {
                "metadata": {"annotations": {"sim.slurmbridge.dev/run-seconds": "0.05"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]},
            },
        },
    }


def _pods_of(sim: KubeSim, job: str) -> list[dict[str, Any]]:
    return sim.list("pods", namespace="default", label_selector=f"job-name={job}")


async def test_a_job_runs_at_most_parallelism_pods_until_completions(sim: KubeSim) -> None:
    seen_active: list[int] = []
    sim.on_write.append(
        lambda c: (
            seen_active.append(
                sum(
                    1
                    for p in _pods_of(sim, "pi")
                    if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                )
            )
            if c.resource.name == "pods"
            else None
        )
    )
    sim.create(_job("pi", parallelism=2, completions=5))
    job = sim.get("jobs", "pi", "default")
    assert job["spec"]["backoffLimit"] == 6 and job["spec"]["completionMode"] == "NonIndexed"

    def complete() -> bool:
        conds = (sim.get("jobs", "pi", "default").get("status") or {}).get("conditions") or []
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conds)

    await _until("the Job complete", complete)
    status = sim.get("jobs", "pi", "default")["status"]
    assert status["succeeded"] == 5 and "active" not in status
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert len(_pods_of(sim, "pi")) == 5
    assert max(seen_active) == 2


async def test_a_job_without_completions_ends_at_its_first_success(sim: KubeSim) -> None:
    sim.create(_job("one"))  # completions and parallelism default to 1
    spec = sim.get("jobs", "one", "default")["spec"]
    assert (spec["completions"], spec["parallelism"]) == (1, 1)
    await _until(
        "one success",
        lambda: (sim.get("jobs", "one", "default").get("status") or {}).get("succeeded") == 1,
    )
    assert len(_pods_of(sim, "one")) == 1


async def test_a_failing_job_stops_at_its_backoff_limit(sim: KubeSim) -> None:
    job = _job("fails", backoffLimit=0)
    job["spec"]["template"]["metadata"]["annotations"]["sim.slurmbridge.dev/exit-code"] = "1"
    sim.create(job)

    def failed() -> bool:
        conds = (sim.get("jobs", "fails", "default").get("status") or {}).get("conditions") or []
        return any(c["type"] == "Failed" for c in conds)

    await _until("the Job failed", failed)
    status = sim.get("jobs", "fails", "default")["status"]
    assert status["failed"] == 1
    failed_cond = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed_cond["reason"] == "BackoffLimitExceeded"
    assert len(_pods_of(sim, "fails")) == 1  # no replacement past the limit


# --- the default scheduler's taint filter -----------------------------------------------------


async def test_the_default_scheduler_skips_nodes_whose_taints_the_pod_does_not_tolerate(
    sim: KubeSim,
) -> None:
    sim.patch_merge(
        "nodes", "n1", {"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}}
    )
    sim.patch_merge(
        "nodes",
        "n2",
        {"spec": {"taints": [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]}},
    )
    for i in range(3):
        sim.add_pod(f"p{i}", scheduler_name="default-scheduler")
    await _until(
        "three pods bound",
        lambda: all(sim.get("pods", f"p{i}", "default")["spec"].get("nodeName") for i in range(3)),
    )
    # PreferNoSchedule only scores; NoExecute filters.
    assert {sim.get("pods", f"p{i}", "default")["spec"]["nodeName"] for i in range(3)} == {"n2"}
    sim.patch_merge(
        "nodes",
        "n2",
        {"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}},
    )
    sim.add_pod("late", scheduler_name="default-scheduler")
    sim.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "tolerant", "namespace": "default"},
            "spec": {
                "containers": [{"name": "c", "image": "i"}],
                "tolerations": [{"key": "k", "operator": "Exists"}],
            },
        }
    )
    await _until(
        "the tolerant pod bound",
        lambda: bool(sim.get("pods", "tolerant", "default")["spec"].get("nodeName")),
    )
    assert not sim.get("pods", "late", "default")["spec"].get("nodeName")
