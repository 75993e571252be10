"""Helpers shared by the end-to-end tests over a :class:`~slurmbridge.devtools.testing.Stack`."""

from __future__ import annotations

from typing import Any

from schemas import wellknown
from slurmbridge.devtools.sim.kube import ApiError
from slurmbridge.devtools.testing import MANAGED_NODE_TOLERATION, Stack


def pod(stack: Stack, name: str) -> dict[str, Any] | None:
    """The pod ``default/<name>`` as the simulated API server holds it, ``None`` once gone."""
    try:
        return stack.kube.get("pods", name, "default")
    except ApiError:
        return None


async def bound_pod(stack: Stack, name: str) -> tuple[dict[str, Any], int]:
    """Wait (60 s) until pod ``default/<name>`` is bound to a node; the pod and the Slurm job
    id its ``scheduler.slinky.slurm.net/slurm-jobid`` label names."""
    await stack.wait_for(
        lambda: bool(((pod(stack, name) or {}).get("spec") or {}).get("nodeName")),
        timeout=60,
        what="pod bound",
    )
    p = pod(stack, name)
    assert p is not None
    return p, int(p["metadata"]["labels"][wellknown.LABEL_SLURM_JOBID])


def phase(stack: Stack, name: str) -> str:
    """The ``status.phase`` of pod ``default/<name>``; ``""`` when it has none or is gone."""
    return str(((pod(stack, name) or {}).get("status") or {}).get("phase") or "")


def phase_of(p: dict[str, Any] | None) -> str:
    """A pod's ``status.phase`` (``Pending`` when it has none yet); ``""`` for no pod."""
    return "" if p is None else str((p.get("status") or {}).get("phase") or "Pending")


def our_jobs(stack: Stack) -> list[Any]:
    """The simulated Slurm's jobs that slurmbridge submitted (comment ``slurmbridge:…``)."""
    return [j for j in stack.slurm.jobs if j.comment.startswith("slurmbridge:")]


def slurmd_template(image: str, **spec: Any) -> dict[str, Any]:
    """A NodeSet's pod ``template``: one ``slurmd`` container of ``image`` that tolerates the
    managed-node taint (without it the kubelet refuses a pod bound after the taint lands), and
    ``spec``'s other fields."""
    return {
        "spec": {
            "containers": [{"name": "slurmd", "image": image}],
            "tolerations": [MANAGED_NODE_TOLERATION],
            **spec,
        }
    }


def nodeset(
    name: str,
    namespace: str,
    *,
    version: str = "v1alpha1",
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A ``slinky.slurm.net/<version>`` NodeSet manifest ``<namespace>/<name>`` with ``spec``
    (and ``metadata.annotations`` when given)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {
        "apiVersion": f"slinky.slurm.net/{version}",
        "kind": "NodeSet",
        "metadata": metadata,
        "spec": spec,
    }


def create_namespace(stack: Stack, name: str) -> None:
    """Create the Namespace ``name`` in the simulated API server."""
    stack.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def create_slurmd_nodeset(
    stack: Stack, namespace: str, *, replicas: int, template: dict[str, Any]
) -> None:
    """Create the Namespace ``namespace`` and in it the NodeSet ``gpu`` (``replicas``,
    ``serviceName: slurmd``, pod ``template``): the NodeSet tests' starting point."""
    create_namespace(stack, namespace)
    stack.kube.create(
        nodeset("gpu", namespace, replicas=replicas, serviceName="slurmd", template=template)
    )


def pod_review(
    uid: str, operation: str, namespace: str, obj: dict[str, Any] | None, **request: Any
) -> dict[str, Any]:
    """An ``admission.k8s.io/v1`` AdmissionReview of a core/v1 pod: ``request`` with ``uid``,
    ``operation``, the ``pods`` resource, ``namespace``, ``object`` and the other ``request``
    fields given (``kind``, ``userInfo``, ``oldObject``, …)."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "operation": operation,
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "object": obj,
            **request,
        },
    }


# --- DRA (resource.k8s.io/v1) manifests ------------------------------------------------------


def device_class(name: str, expression: str, **spec: Any) -> dict[str, Any]:
    """A DeviceClass ``name`` selecting devices by the CEL ``expression``, with ``spec``'s
    other fields (``extendedResourceName``)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}], **spec},
    }


def resource_slice(node: str, driver: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    """The ResourceSlice ``<node>-<driver>`` a DRA driver publishes for ``node``: one slice in
    pool ``node`` (generation 1) with ``devices``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim_template(name: str, namespace: str, device_class: str, count: int) -> dict[str, Any]:
    """A ResourceClaimTemplate ``name`` asking (request ``gpus``) for exactly ``count``
    devices of ``device_class``."""
    request = {"name": "gpus", "exactly": {"deviceClassName": device_class, "count": count}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def pod_with_claim_template(
    name: str, namespace: str, annotations: dict[str, str], template: str
) -> dict[str, Any]:
    """A pod of ours (``annotations``; 1 CPU, 100Mi) whose container uses the claim ``gpu``
    made from the ResourceClaimTemplate ``template``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "schedulerName": wellknown.DEFAULT_SCHEDULER_NAME,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "100Mi"},
                        "claims": [{"name": "gpu"}],
                    },
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
        },
    }
