"""Pod, workload and NodeSet observations for the reconciler table tests, as the Kubernetes
watcher publishes them: ``kube_pod`` / ``ns_pod`` (``ns/<name>``, uid ``u-<name>``),
``kube_workload`` (``<namespace>/<Kind>:<name>``, uid ``uid-<name>``), ``kube_nodeset``."""

from __future__ import annotations

from typing import Any

from schemas.events import KubeNodeSet, KubePod, KubeWorkload, workload_key


def kube_pod(namespace: str, name: str, **fields: Any) -> KubePod:
    """The ``KubePod`` ``<namespace>/<name>`` (source ``k8s``) with ``fields``."""
    return KubePod(
        source="k8s", key=f"{namespace}/{name}", namespace=namespace, name=name, **fields
    )


def ns_pod(name: str, **fields: Any) -> KubePod:
    """The ``KubePod`` ``ns/<name>`` (source ``k8s``, uid ``u-<name>``) with ``fields``."""
    return kube_pod("ns", name, uid=f"u-{name}", **fields)


def kube_workload(
    namespace: str, kind: str, name: str, *, uid: str = "", **fields: Any
) -> KubeWorkload:
    """The ``KubeWorkload`` ``<namespace>/<kind>:<name>`` (source ``k8s``, uid ``uid`` or
    ``uid-<name>``) with ``fields``."""
    return KubeWorkload(
        source="k8s",
        key=workload_key(namespace, kind, name),
        namespace=namespace,
        name=name,
        uid=uid or f"uid-{name}",
        workload_kind=kind,
        **fields,
    )


def kube_nodeset(namespace: str, name: str, **fields: Any) -> KubeNodeSet:
    """The ``KubeNodeSet`` ``<namespace>/<name>`` (source ``k8s``) with ``fields``."""
    return KubeNodeSet(
        source="k8s", key=f"{namespace}/{name}", namespace=namespace, name=name, **fields
    )
