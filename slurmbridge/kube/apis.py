"""The generated Kubernetes API classes the effectors call, and the exception a preloaded call
raises: the effectors import them from here, so :mod:`slurmbridge.kube` is the only package
that imports ``kubernetes_asyncio`` (issue 31: one Kubernetes client).

A ``_preload_content=False`` call read by :func:`slurmbridge.kube.api.read_raw` raises the
typed errors of :mod:`slurmbridge.kube.errors`; a preloaded call raises a plain
:class:`ApiException` (:func:`slurmbridge.kube.errors.typed` turns it into one of those).
"""

from __future__ import annotations

from kubernetes_asyncio.client import (
    ApiClient,
    AppsV1Api,
    CoreV1Api,
    CustomObjectsApi,
    PolicyV1Api,
)
from kubernetes_asyncio.client.exceptions import ApiException

__all__ = [
    "ApiClient",
    "ApiException",
    "AppsV1Api",
    "CoreV1Api",
    "CustomObjectsApi",
    "PolicyV1Api",
]
