"""The effector modules no other test imports by name (issue 31: every effector module has its
own direct test): ``events``, ``clusters``, ``podgroups`` and ``common`` called directly
against the Kubernetes simulator over HTTP, each on its outcomes and preconditions, and the
device comparison of ``claims`` (its effects run through PodEffector in test_dra_e2e.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from schemas import wellknown
from schemas.actions import (
    AllocatedDevice,
    ClusterRef,
    RecordEvent,
    SetClusterStatus,
    SetPodGroupScheduled,
)
from slurmbridge.config import KubeSettings
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.effectors import claims, clusters, common, events, podgroups
from slurmbridge.kube import client as kube
from slurmbridge.kube import errors
from slurmbridge.runtime.outcomes import Permanent, Transient

NS = "default"


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[tuple[KubeSim, client.ApiClient]]:
    async with KubeSim(workload_api="v1beta1") as sim:
        api = await kube.api_client(
            KubeSettings(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig")))
        )
        try:
            yield sim, api
        finally:
            await api.close()


async def test_an_event_with_an_occasion_is_recorded_once(
    api: tuple[KubeSim, client.ApiClient],
) -> None:
    sim, a = api
    action = RecordEvent(
        api_version="v1",
        object_kind="Node",
        name="n1",
        reason="Drained",
        message="m",
        once="first.g1",
    )
    core = client.CoreV1Api(a)
    first = await events.record_event(core, action, component="slurmbridge")
    again = await events.record_event(core, action, component="slurmbridge")
    assert (first.outcome, again.outcome) == ("ok", "noop")
    (ev,) = sim.list("events", namespace=events.CLUSTER_SCOPED_EVENTS_NAMESPACE)
    assert ev["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}
    assert ev["reportingComponent"] == "slurmbridge"


async def test_a_cluster_status_is_written_and_a_missing_cluster_is_a_noop(
    api: tuple[KubeSim, client.ApiClient],
) -> None:
    sim, a = api
    custom = client.CustomObjectsApi(a)
    created = sim.create(
        {
            "apiVersion": "slinky.slurm.net/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": "alpha", "namespace": NS},
            # The CRD requires the token's Secret (the simulator enforces the schema).
            "spec": {"server": "http://slurmrestd:6820", "token": {"secretRef": {"name": "t"}}},
        }
    )
    ref = ClusterRef(namespace=NS, name="alpha", uid=created["metadata"]["uid"])
    action = SetClusterStatus(cluster=ref, is_ready=True, reason="Pinged", message="ok")
    assert (await clusters.set_cluster_status(custom, action)).outcome == "ok"
    status = sim.get("clusters", "alpha", NS)["status"]
    assert status["isReady"] is True
    assert [c["type"] for c in status["conditions"]] == ["Ready"]
    gone = SetClusterStatus(
        cluster=ClusterRef(namespace=NS, name="beta", uid="u"),
        is_ready=False,
        reason="x",
        message="y",
    )
    assert (await clusters.set_cluster_status(custom, gone)).outcome == "noop"


async def test_a_pod_groups_scheduled_condition_is_set_once(
    api: tuple[KubeSim, client.ApiClient],
) -> None:
    sim, a = api
    custom = client.CustomObjectsApi(a)
    pg = sim.create(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": NS},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}},
        }
    )
    action = SetPodGroupScheduled(
        namespace=NS,
        name="g",
        uid=pg["metadata"]["uid"],
        api_version="scheduling.k8s.io/v1beta1",
        message="admitted",
    )
    assert (await podgroups.set_pod_group_scheduled(custom, action)).outcome == "ok"
    assert (await podgroups.set_pod_group_scheduled(custom, action)).outcome == "noop"
    with pytest.raises(Permanent):
        await podgroups.set_pod_group_scheduled(
            custom, SetPodGroupScheduled(**{**_fields(action), "api_version": "v1"})
        )


def _fields(action: Any) -> dict[str, Any]:
    return {f: getattr(action, f) for f in action.__struct_fields__}


@pytest.mark.parametrize(
    ("status", "kind"),
    [(409, Transient), (429, Transient), (503, Transient), (404, Permanent), (422, Permanent)],
)
def test_the_one_error_map_reads_the_typed_errors(status: int, kind: type[Exception]) -> None:
    with pytest.raises(kind):
        common.effect_error(errors.error_for(status, "why"), "Patch")


def test_a_label_key_is_one_json_pointer_token() -> None:
    assert common.json_pointer(wellknown.LABEL_SLURM_JOBID) == (
        wellknown.LABEL_SLURM_JOBID.replace("/", "~1")
    )
    assert common.json_pointer("a~b/c") == "a~0b~1c"


def test_a_claim_counts_as_allocated_to_the_same_devices_in_any_order() -> None:
    wanted = (
        AllocatedDevice(request="gpu", driver="gpu.example.com", pool="n1", device="gpu-0"),
        AllocatedDevice(request="gpu", driver="gpu.example.com", pool="n1", device="gpu-1"),
    )
    results = list(reversed(claims._results(wanted)))
    obj = {"status": {"allocation": {"devices": {"results": results}}}}
    assert claims._same_devices(obj, wanted)
    assert not claims._same_devices(obj, wanted[:1])
    assert not claims._same_devices({}, wanted)
