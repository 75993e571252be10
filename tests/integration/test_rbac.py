"""The chart's RBAC against what the code really asks of Kubernetes: the whole system runs
against the Kubernetes simulator through a story that touches every component (cordons, a
placed pod whose job ends, an external node, a Cluster with its token Secret, an autoscaled
NodeSet growing and shrinking), and every request the simulator served must be granted by the
all-in-one ClusterRole the chart renders. (tests/unit/test_deploy.py checks the other way: every
grant names a call the code makes.)"""

from __future__ import annotations

from typing import Any

import helm_python as helm
import yaml

from schemas import wellknown
from slurmbridge.sim.kube import DEFAULT_RESOURCES
from slurmbridge.sim.slurmrestd import SlurmSim
from slurmbridge.testing import Stack
from tests.integration.test_clusters_e2e import NS, cluster, secret
from tests.unit.test_deploy import CHART, grants

P = "autoscale.slurmbridge.dev/"
SCHED = wellknown.DEFAULT_SCHEDULER_NAME
GROUPS = {spec.plural: spec.group for spec in DEFAULT_RESOURCES}


def granted() -> set[tuple[str, str, str]]:
    out = helm.Chart.load(CHART).render({}, name="sb", namespace="slurm")
    docs = [
        d
        for path, text in out.items()
        if path.endswith(".yaml")
        for d in yaml.safe_load_all(text)
        if d
    ]
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    return grants(role["rules"])


def nodeset() -> dict[str, Any]:
    return {
        "apiVersion": "slinky.slurm.net/v1alpha1",
        "kind": "NodeSet",
        "metadata": {
            "name": "burst",
            "namespace": NS,
            "annotations": {
                P + "partition": "burst",
                P + "max-replicas": "2",
                P + "cooldown": "1",
                P + "idle-to-zero-after": "1",
            },
        },
        "spec": {
            "replicas": 0,
            "template": {"spec": {"containers": [{"name": "slurmd", "image": "s"}]}},
        },
    }


async def test_every_request_the_system_makes_is_granted_by_the_chart() -> None:
    beta = SlurmSim(cluster="beta")
    beta.seed_default(1)
    await beta.start(versions=("v0.0.44",))
    try:
        async with Stack(nodes=3, poll_interval=0.2) as s:
            s.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            # node_taint, slurm_drain: a cordon and an uncordon.
            s.cordon("n1")
            await s.wait_for(lambda: s.slurm_node("n1").has("DRAIN"), what="drained")
            s.uncordon("n1")
            # placement, workload: a pod placed through a job that then ends.
            s.kube.add_pod("solo", scheduler_name=SCHED, requests={"cpu": "1", "memory": "1Mi"})

            def job_of_solo() -> int:
                labels = s.kube.get("pods", "solo")["metadata"].get("labels") or {}
                return int(labels.get(wellknown.LABEL_SLURM_JOBID, "0"))

            await s.wait_for(lambda: bool(s.kube.get("pods", "solo")["spec"].get("nodeName")))
            s.slurm.complete_job(job_of_solo())
            await s.wait_for(
                lambda: not any(p["metadata"]["name"] == "solo" for p in s.kube.list("pods")),
                what="pod of the ended job deleted",
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
            s.kube.create(secret("beta-token", beta.mint_token()))
            s.kube.create(cluster("beta", beta.url, "beta-token"))
            await s.wait_for(
                lambda: (
                    (s.kube.get("clusters", "beta", NS).get("status") or {}).get("isReady") is True
                ),
                what="beta ready",
            )
            # nodeset, autoscale: a wave grows the NodeSet, the quiet shrinks it back.
            s.slurm.add_partition("burst")
            s.kube.create(nodeset())
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
            for j in jobs:
                s.slurm.complete_job(j)
            await s.wait_for(lambda: replicas() == 0, timeout=15, what="back to zero")
            await s.wait_for(lambda: not s.kube.list("pods", NS), timeout=15, what="pods gone")
            await s.settled()

            made = {
                (GROUPS[label.split("/")[0]], label, verb)
                for (verb, label), count in s.kube.requests.items()
                if count
            }
    finally:
        await beta.stop()

    allowed = granted()
    assert made - allowed == set(), "requests the chart's ClusterRole does not allow"
    # The story reached every component's kind of call, so the check above means something.
    for must in [
        ("", "nodes", "patch"),
        ("", "pods/binding", "create"),
        ("", "pods", "delete"),
        ("", "nodes/status", "patch"),
        ("", "secrets", "watch"),
        ("slinky.slurm.net", "clusters/status", "patch"),
        ("slinky.slurm.net", "nodesets/scale", "patch"),
        ("slinky.slurm.net", "nodesets/status", "patch"),
        ("", "pods", "create"),
        ("", "events", "create"),
    ]:
        assert must in made, must
