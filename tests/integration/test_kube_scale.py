"""Scaling a NodeSet from zero (issue 17, finding 1).

A real kube-apiserver answers ``GET …/nodesets/X/scale`` with ``"spec": {}`` when the NodeSet
has zero replicas (autoscaling/v1 ``ScaleSpec.replicas`` is omitempty). ScaleNodeSet read that
as "no replicas known" and stamped ``last-scale-direction: down`` on a step up from zero, so
the autoscaler's next step up waited out the cool-down. The simulator now answers as the real
server does, and the effector reads a missing ``replicas`` as 0.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from schemas import wellknown
from schemas.actions import NodeSetRef, ScaleNodeSet
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.effectors.nodesets import NodeSetEffector

pytestmark = pytest.mark.integration

NS = "default"
GROUP, VERSION = "slinky.slurm.net", "v1alpha1"
DIRECTION = wellknown.ANNOTATION_AUTOSCALE_LAST_DIRECTION
LAST = wellknown.ANNOTATION_AUTOSCALE_LAST_SCALE


def nodeset(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "slurmd", "image": "s"}]}},
        },
    }


async def test_the_scale_of_a_nodeset_at_zero_has_an_empty_spec(
    sim: KubeSim, api: client.ApiClient
) -> None:
    sim.create(nodeset("zero", 0))
    custom = client.CustomObjectsApi(api)
    scale = await custom.get_namespaced_custom_object_scale(GROUP, VERSION, NS, "nodesets", "zero")
    # ScaleSpec.replicas is omitempty; ScaleStatus.replicas is not.
    assert scale["spec"] == {}
    assert scale["status"] == {"replicas": 0}
    sim.patch_merge("nodesets", "zero", {"spec": {"replicas": 2}}, NS, subresource="scale")
    scale = await custom.get_namespaced_custom_object_scale(GROUP, VERSION, NS, "nodesets", "zero")
    assert scale["spec"] == {"replicas": 2}


async def test_scaling_up_from_zero_is_recorded_as_up(sim: KubeSim, api: client.ApiClient) -> None:
    uid = sim.create(nodeset("burst", 0))["metadata"]["uid"]
    ref = NodeSetRef(namespace=NS, name="burst", uid=uid)
    effector = NodeSetEffector(api, {})

    result = await effector.apply(ScaleNodeSet(nodeset=ref, replicas=2, at=1000, why="0 → 2"))
    assert result.outcome == "ok"
    obj = sim.get("nodesets", "burst", NS)
    assert obj["spec"]["replicas"] == 2
    # "up": the autoscaler's next step up is not held back by the cool-down.
    assert obj["metadata"]["annotations"] == {LAST: "1000", DIRECTION: "up"}

    result = await effector.apply(ScaleNodeSet(nodeset=ref, replicas=0, at=1100, why="2 → 0"))
    assert result.outcome == "ok"
    obj = sim.get("nodesets", "burst", NS)
    assert obj["spec"]["replicas"] == 0
    assert obj["metadata"]["annotations"] == {LAST: "1100", DIRECTION: "down"}

    # At zero (the Scale says `spec: {}`), a decision for zero is done already.
    result = await effector.apply(ScaleNodeSet(nodeset=ref, replicas=0, at=1200, why="again"))
    assert (result.outcome, result.detail) == ("noop", "already 0 replica(s)")
    assert sim.get("nodesets", "burst", NS)["metadata"]["annotations"][LAST] == "1100"
