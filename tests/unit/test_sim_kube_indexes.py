"""The Kubernetes simulator's indexes answer as a scan of every object would: the sorted
storage keys kept up to date by insertion and removal (not rebuilt at each create), and the
pods by ``spec.nodeName`` that kube-apiserver's watch cache indexes (pkg/registry/core/pod/
strategy.go ``NodeNameIndexFunc``), which a kubelet's list of its node's pods reads."""

from __future__ import annotations

import random
from typing import Any

from slurmbridge.devtools.sim.kube import ApiError, KubeSim, parse_field_selector

NODES = ["a1", "a2", "b1"]


def _pod(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def _scan(sim: KubeSim, node: str, namespace: str | None) -> list[tuple[str, str]]:
    """What a list with ``spec.nodeName=node`` must answer: every pod, filtered here."""
    return [
        (p["metadata"]["namespace"], p["metadata"]["name"])
        for p in sim.list("pods", namespace)
        if (p["spec"].get("nodeName") or "") == node
    ]


def _paged(sim: KubeSim, selector: str, namespace: str | None, limit: int) -> list[tuple[str, str]]:
    store = sim._store
    spec = store.lookup("pods")
    fields = parse_field_selector(spec, selector)
    out: list[tuple[str, str]] = []
    token = ""
    while True:
        page = store.list(spec, namespace, fields=fields, limit=limit, continue_token=token)
        out += [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in page["items"]]
        token = page["metadata"].get("continue", "")
        if not token:
            return out


def test_node_and_key_indexes_answer_as_a_scan_through_creates_binds_and_deletes() -> None:
    rng = random.Random(20261128)
    sim = KubeSim()
    for ns in ("a", "a-b", "z"):
        sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    live: list[tuple[str, str]] = []
    for step in range(600):
        op = rng.random()
        if op < 0.45 or not live:
            ns = rng.choice(["default", "a", "a-b", "z"])
            name = f"p{step}"
            sim.create(_pod(name, ns))
            live.append((ns, name))
        elif op < 0.75:
            ns, name = rng.choice(live)
            try:
                sim.bind(name, rng.choice(NODES), namespace=ns)
            except ApiError:
                pass  # bound already: a Binding of a bound pod is refused (409)
        else:
            ns, name = live.pop(rng.randrange(len(live)))
            sim.delete_pod(name, ns, grace_period_seconds=0)
        if step % 25 == 0:
            for node in ["", *NODES]:
                for namespace in (None, "a", "default"):
                    want = _scan(sim, node, namespace)
                    got = [
                        (p["metadata"]["namespace"], p["metadata"]["name"])
                        for p in sim.list("pods", namespace, field_selector=f"spec.nodeName={node}")
                    ]
                    assert got == want, (step, node, namespace)
                    assert _paged(sim, f"spec.nodeName={node}", namespace, 7) == want
            assert [
                (p["metadata"]["namespace"], p["metadata"]["name"]) for p in sim.list("pods")
            ] == sorted(live, key=lambda k: f"{k[0]}/{k[1]}")
