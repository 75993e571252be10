"""The Kubernetes client names itself (issue 17, finding 7).

kubernetes_asyncio sends ``User-Agent: OpenAPI-Generator/<version>/python`` unless told
otherwise; an API server's audit log then cannot tell slurmbridge from any generated client.
Every client slurmbridge builds (:func:`slurmbridge.kube.client.api_client`) sends
``slurmbridge/<package version>``, and the simulator records the agent of each request.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from slurmbridge.config import KubeSettings
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.kube import client as kube

pytestmark = pytest.mark.integration


async def test_every_request_names_slurmbridge_and_its_version(tmp_path: Path) -> None:
    expected = f"slurmbridge/{metadata.version('slurmbridge')}"
    assert kube.user_agent() == expected
    async with KubeSim() as sim:
        sim.add_node("n1")
        settings = KubeSettings(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig")))
        async with await kube.api_client(settings) as api:
            core = client.CoreV1Api(api)
            await core.list_node()
            await core.read_node("n1")
            await client.CustomObjectsApi(api).list_cluster_custom_object(
                "slinky.slurm.net", "v1alpha1", "nodesets"
            )
        assert dict(sim.user_agents) == {expected: 3}
