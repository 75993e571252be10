"""The Kubernetes client names itself (issue 17, finding 7).

kubernetes_asyncio sends ``User-Agent: OpenAPI-Generator/<version>/python`` unless told
otherwise; an API server's audit log then cannot tell slurmbridge from any generated client.
Every client slurmbridge builds (:func:`slurmbridge.kube.client.api_client`) sends
``slurmbridge/<package version>``, and the simulator records the agent of each request.
"""

from __future__ import annotations

import base64
from importlib import metadata
from pathlib import Path

import pytest
from aiohttp import web
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


async def test_the_environment_s_proxy_is_read_once_and_used_for_every_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``HTTP(S)_PROXY`` / ``NO_PROXY`` are honoured as read when the client is built, and
    the session no longer looks them (or ``~/.netrc``) up on each request (issue 30: those
    lookups ran in a worker thread per request)."""
    seen: list[tuple[str, str]] = []

    async def proxy(request: web.Request) -> web.Response:
        # A forward proxy is sent the absolute URL (RFC 9112 §3.2.2).
        seen.append((str(request.url), request.headers.get("Proxy-Authorization", "")))
        return web.json_response({"kind": "NodeList", "apiVersion": "v1", "items": []})

    runner = web.AppRunner(web.Application())
    runner.app.router.add_route("*", "/{tail:.*}", proxy)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with KubeSim() as sim:
            settings = KubeSettings(kubeconfig=str(sim.write_kubeconfig(tmp_path / "kubeconfig")))
            monkeypatch.setenv("HTTP_PROXY", f"http://bridge:s3cret@127.0.0.1:{port}")
            monkeypatch.setenv("NO_PROXY", "")
            async with await kube.api_client(settings) as api:
                assert api.rest_client.pool_manager.trust_env is False
                monkeypatch.delenv("HTTP_PROXY")  # read once: later changes do not count
                await client.CoreV1Api(api).list_node()
            assert len(seen) == 1
            url, auth = seen[0]
            assert url.endswith("/api/v1/nodes") and url.startswith(sim.url)
            assert auth == "Basic " + base64.b64encode(b"bridge:s3cret").decode()
            monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
            monkeypatch.setenv("NO_PROXY", "127.0.0.1")
            async with await kube.api_client(settings) as api:
                assert (await client.CoreV1Api(api).list_node()).items == []
            assert len(seen) == 1  # NO_PROXY: straight to the API server
    finally:
        await runner.cleanup()
