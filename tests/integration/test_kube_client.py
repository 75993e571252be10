"""The Kubernetes client names itself (issue 17, finding 7).

kubernetes_asyncio sends ``User-Agent: OpenAPI-Generator/<version>/python`` unless told
otherwise; an API server's audit log then cannot tell slurmbridge from any generated client.
Every client slurmbridge builds (:func:`slurmbridge.kube.client.api_client`) sends
``slurmbridge/<package version>``, and the simulator records the agent of each request.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from slurmbridge.config import KubeSettings
from slurmbridge.devtools.sim.kube import KubeSim
from slurmbridge.effectors.common import MERGE
from slurmbridge.kube import client as kube
from slurmbridge.kube import writes
from slurmbridge.kube.errors import Conflict

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def _serving(handler: Any) -> AsyncIterator[int]:
    """An HTTP server on a free port answering every request with ``handler``; its port."""
    runner = web.AppRunner(web.Application())
    runner.app.router.add_route("*", "/{tail:.*}", handler)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


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

    async with _serving(proxy) as port, KubeSim() as sim:
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


async def test_the_lean_writes_send_what_the_generated_calls_send(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:mod:`slurmbridge.kube.writes` sends, for each of its calls, the request of the
    generated method of the same name: method, path (quoted), the same headers (agent,
    bearer token, Accept, Content-Type) and the same JSON body; through the environment's
    proxy too. A refusal raises the typed error with the server's message."""
    seen: list[tuple[str, str, dict[str, str], object]] = []

    async def server(request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else None
        keep = ("User-Agent", "Authorization", "Accept", "Content-Type", "Proxy-Authorization")
        seen.append(
            (
                request.method,
                str(request.url),
                {h: request.headers[h] for h in keep if h in request.headers},
                body,
            )
        )
        if request.path.endswith("/refused"):
            status = {"kind": "Status", "status": "Failure", "message": "nope", "code": 409}
            return web.json_response(status, status=409)
        return web.json_response({"kind": "Pod", "apiVersion": "v1"})

    async with _serving(server) as port:
        cfg = client.Configuration(host=f"http://127.0.0.1:{port}")
        cfg.api_key = {"BearerToken": "t0ken"}
        cfg.api_key_prefix = {"BearerToken": "Bearer"}
        status = {"status": {"conditions": [{"type": "X", "status": "True"}]}}
        event = {"kind": "Event", "message": "naïve ✓", "count": 1}
        calls = [
            ("patch_namespaced_pod", ("p q", "ns", [{"op": "add"}]), "application/json-patch+json"),
            ("patch_namespaced_pod_status", ("p", "ns", status), "application/merge-patch+json"),
            ("create_namespaced_pod_binding", ("p", "ns", {"kind": "Binding"}), None),
            ("create_namespaced_event", ("ns", event), None),
        ]
        for proxied in (False, True):
            if proxied:
                monkeypatch.setenv("HTTP_PROXY", f"http://bridge:s3cret@127.0.0.1:{port}")
                monkeypatch.setenv("NO_PROXY", "")
                cfg.host = "http://kube.invalid:6443"  # only the proxy can reach it
            async with client.ApiClient(configuration=cfg) as api:
                api.user_agent = kube.user_agent()
                kube._environment_read_once(api)
                core = client.CoreV1Api(api)
                for name, args, content_type in calls:
                    extra = {"_content_type": content_type} if content_type else {}
                    await getattr(core, name)(*args, **extra, _preload_content=False)
                    generated = seen.pop()
                    lean = getattr(writes, name)
                    await lean(core, *args, *([content_type] if content_type else []))
                    assert seen.pop() == generated, name
                    assert generated[2]["Authorization"] == "Bearer t0ken"
                    assert ("Proxy-Authorization" in generated[2]) is proxied
                with pytest.raises(Conflict, match="nope"):
                    await writes.patch_namespaced_pod(core, "refused", "ns", {}, MERGE)
