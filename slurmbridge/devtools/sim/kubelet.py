"""Simulated kubelets for :class:`~slurmbridge.devtools.sim.kube.KubeSim`: bound pods go through
phases.

One object plays the kubelet of every node. It reacts to the simulator's writes (never to a
timer loop) and writes pod status through the simulator's in-process API, as a kubelet does
through the ``pods/status`` subresource:

* a pod bound to a node (``spec.nodeName``) whose kubelet runs goes ``Pending`` → ``Running``
  (``Ready=True``, a running container status, ``startTime``) after ``start_delay`` seconds;
* annotation :data:`ANNOTATION_RUN_SECONDS` (seconds, float) ends it that long after it
  started: ``Succeeded``, or ``Failed`` when :data:`ANNOTATION_EXIT_CODE` is not ``0``
  (without the annotation a pod runs until deleted, like a server);
* a deleted pod (``deletionTimestamp``) is stopped after ``min(grace period,
  stop_seconds)``: its phase becomes terminal (``Failed``, exit code 143, unless it had
  already ended — Kubernetes ≥ 1.27 kubelets record a terminal phase before the pod goes),
  then the kubelet deletes it with grace 0, so the API server removes it once its finalizers
  are gone;
* a pod using DRA ResourceClaims (``spec.resourceClaims``, or DRA extended resources through
  ``status.extendedResourceClaimStatus``) stays ``Pending`` until every claim exists, is
  allocated and lists the pod in ``status.reservedFor`` — the kubelet's DRA manager refuses
  to prepare a claim that is not reserved for the pod (pkg/kubelet/cm/dra/manager.go,
  ``prepareResources``: "pod … is not allowed to use resource claim …"); a claim's write
  makes the kubelet look again;
* :meth:`stop` / :meth:`start` of one node's kubelet: while stopped, nothing happens to its
  pods (they stay Terminating — slurm-bridge #49) and the Node's ``Ready`` condition is
  ``Unknown`` with reason ``NodeStatusUnknown``, as the node lifecycle controller reports it.

Pods of nodes the simulator does not know are left alone, so a test can still play the
kubelet itself for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Final

from slurmbridge.devtools.sim.kube import ApiError, Change, KubeSim

log = logging.getLogger(__name__)

#: Seconds (float) a pod's container runs before it exits; absent ⇒ runs until deleted.
ANNOTATION_RUN_SECONDS: Final = "sim.slurmbridge.dev/run-seconds"
#: Exit code of that container (default 0 ⇒ ``Succeeded``; anything else ⇒ ``Failed``).
ANNOTATION_EXIT_CODE: Final = "sim.slurmbridge.dev/exit-code"
#: Exit code of a container stopped by SIGTERM (128 + 15).
SIGTERM_EXIT: Final = 143

Obj = dict[str, Any]


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Kubelet:
    """The kubelets of a :class:`KubeSim` (see the module docstring).

    ``start_delay``: seconds from binding to ``Running`` (image pull and container start);
    ``stop_seconds``: seconds a container takes to exit after SIGTERM (capped by the pod's
    grace period). :attr:`transitions` counts phase changes written, by phase.
    """

    def __init__(self, sim: KubeSim, *, start_delay: float = 0.0, stop_seconds: float = 0.0):
        self.sim = sim
        self.start_delay = start_delay
        self.stop_seconds = stop_seconds
        self.stopped: set[str] = set()
        self.transitions: dict[str, int] = {}
        self._started: dict[str, float] = {}  # pod uid -> loop time it turned Running
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._dirty: set[tuple[str, str]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush: asyncio.Handle | None = None

    # lifecycle --------------------------------------------------------------------------------
    def attach(self) -> None:
        """Start reacting to the simulator's writes (call on the running event loop)."""
        self._loop = asyncio.get_running_loop()
        self.sim.on_write.append(self._on_write)
        for pod in self.sim.list("pods"):
            meta = pod["metadata"]
            self._mark(meta["namespace"], meta["name"])

    def detach(self) -> None:
        """Stop reacting; pending timers are cancelled."""
        with contextlib.suppress(ValueError):
            self.sim.on_write.remove(self._on_write)
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        self._loop = None

    def stop(self, node: str) -> None:
        """Stop ``node``'s kubelet: its pods freeze and the Node turns ``Ready=Unknown``."""
        self.stopped.add(node)
        self._node_ready(node, ready=False)

    def start(self, node: str) -> None:
        """Start ``node``'s kubelet again: it reports Ready and catches up with its pods."""
        self.stopped.discard(node)
        self._node_ready(node, ready=True)
        for pod in self.sim.list("pods", field_selector=f"spec.nodeName={node}"):
            meta = pod["metadata"]
            self._mark(meta["namespace"], meta["name"])

    # reacting ---------------------------------------------------------------------------------
    def _on_write(self, change: Change) -> None:
        # Runs inside the simulator's commit: only note the pod, write later.
        meta = change.object.get("metadata") or {}
        if change.resource.name == "resourceclaims.resource.k8s.io":
            for ref in (change.object.get("status") or {}).get("reservedFor") or []:
                if isinstance(ref, dict) and ref.get("resource") == "pods":
                    self._mark(str(meta.get("namespace", "")), str(ref.get("name", "")))
            return
        if change.resource.name != "pods":
            return
        self._mark(str(meta.get("namespace", "")), str(meta.get("name", "")))

    def _claims_ready(self, pod: Obj) -> bool:
        """Every ResourceClaim of the pod exists, is allocated and reserved for it (module
        docstring)."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        status = pod.get("status") or {}
        made = {
            s.get("name"): s.get("resourceClaimName")
            for s in status.get("resourceClaimStatuses") or []
            if isinstance(s, dict)
        }
        names = []
        for pc in spec.get("resourceClaims") or []:
            name = pc.get("resourceClaimName") or made.get(pc.get("name"))
            if not name:
                return False
            names.append(name)
        extended = any(
            str(key).startswith("deviceclass.resource.kubernetes.io/")
            for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
            for key in ((c.get("resources") or {}).get("requests") or {})
        )
        if extended:
            name = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
            if not name:
                return False
            names.append(name)
        for name in names:
            try:
                claim = self.sim.get("resourceclaims", name, meta.get("namespace"))
            except (ApiError, KeyError):
                return False
            st = claim.get("status") or {}
            reserved = any(r.get("uid") == meta.get("uid") for r in st.get("reservedFor") or [])
            if st.get("allocation") is None or not reserved:
                return False
        return True

    def _mark(self, namespace: str, name: str) -> None:
        if self._loop is None:
            return
        self._dirty.add((namespace, name))
        if self._flush is None:
            self._flush = self._loop.call_soon(self._sync_dirty)

    def _sync_dirty(self) -> None:
        self._flush = None
        dirty, self._dirty = self._dirty, set()
        for namespace, name in sorted(dirty):
            try:
                self._sync(namespace, name)
            except Exception:
                log.exception("simulated kubelet: pod %s/%s", namespace, name)

    def _later(self, key: tuple[str, str], delay: float) -> None:
        assert self._loop is not None
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()

        def fire() -> None:
            self._timers.pop(key, None)
            self._mark(*key)

        self._timers[key] = self._loop.call_later(max(0.0, delay), fire)

    def _sync(self, namespace: str, name: str) -> None:
        """Level-based: look at the pod as it is now and take its next step, if any is due."""
        key = (namespace, name)
        try:
            pod = self.sim.get("pods", name, namespace)
        except ApiError:
            timer = self._timers.pop(key, None)
            if timer is not None:
                timer.cancel()
            return
        assert self._loop is not None
        meta, spec = pod["metadata"], pod.get("spec") or {}
        status: Obj = pod.get("status") or {}
        node = spec.get("nodeName")
        if not node or node in self.stopped or not self._node_exists(node):
            return
        uid = str(meta.get("uid", ""))
        phase = status.get("phase") or "Pending"
        now = self._loop.time()
        if meta.get("deletionTimestamp"):
            grace = float(meta.get("deletionGracePeriodSeconds") or 0)
            if phase not in ("Succeeded", "Failed"):
                started = self._started.setdefault(f"stop:{uid}", now)
                wait = started + min(grace, self.stop_seconds) - now
                if wait > 0:
                    self._later(key, wait)
                    return
                self._finish(pod, SIGTERM_EXIT, reason="Error")
            self._started.pop(uid, None)
            self._started.pop(f"stop:{uid}", None)
            # The kubelet's final delete: gone as soon as no finalizer holds it.
            with contextlib.suppress(ApiError):
                self.sim.delete_pod(name, namespace, grace_period_seconds=0, uid=uid)
            return
        if phase == "Pending":
            if not self._claims_ready(pod):
                return
            bound_at = self._started.setdefault(f"bind:{uid}", now)
            wait = bound_at + self.start_delay - now
            if wait > 0:
                self._later(key, wait)
                return
            self._started.pop(f"bind:{uid}", None)
            self._run(pod)
            self._started[uid] = now
            phase = "Running"
        if phase != "Running":
            return
        run = self._annotation_float(meta, ANNOTATION_RUN_SECONDS)
        if run is None:
            return
        started = self._started.setdefault(uid, now)
        wait = started + run - now
        if wait > 0:
            self._later(key, wait)
            return
        code = int(self._annotation_float(meta, ANNOTATION_EXIT_CODE) or 0)
        self._finish(pod, code, reason="Completed" if code == 0 else "Error")
        self._started.pop(uid, None)

    # writes -----------------------------------------------------------------------------------
    def _run(self, pod: Obj) -> None:
        now = _stamp()
        meta = pod["metadata"]
        status = {
            "phase": "Running",
            "startTime": now,
            "hostIP": "10.0.0.1",
            "podIP": "10.244.0.1",
            "conditions": self._conditions(pod, ready=True, now=now),
            "containerStatuses": [
                {
                    "name": c.get("name", "main"),
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "image": c.get("image", ""),
                    "state": {"running": {"startedAt": now}},
                }
                for c in self._containers(pod)
            ],
        }
        self._write(meta, status, "Running")

    def _finish(self, pod: Obj, code: int, *, reason: str) -> None:
        now = _stamp()
        meta = pod["metadata"]
        phase = "Succeeded" if code == 0 else "Failed"
        status = {
            "phase": phase,
            "conditions": self._conditions(pod, ready=False, now=now),
            "containerStatuses": [
                {
                    "name": c.get("name", "main"),
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "image": c.get("image", ""),
                    "state": {
                        "terminated": {"exitCode": code, "reason": reason, "finishedAt": now}
                    },
                }
                for c in self._containers(pod)
            ],
        }
        self._write(meta, status, phase)

    def _write(self, meta: Obj, status: Obj, phase: str) -> None:
        try:
            self.sim.patch_merge(
                "pods",
                meta["name"],
                {"metadata": {"uid": meta.get("uid")}, "status": status},
                meta["namespace"],
                subresource="status",
            )
        except ApiError as exc:  # the pod went away or was replaced meanwhile
            log.debug("simulated kubelet: %s/%s: %s", meta["namespace"], meta["name"], exc)
            return
        self.transitions[phase] = self.transitions.get(phase, 0) + 1

    @staticmethod
    def _containers(pod: Obj) -> Iterator[Obj]:
        for c in (pod.get("spec") or {}).get("containers") or [{}]:
            if isinstance(c, dict):
                yield c

    @staticmethod
    def _conditions(pod: Obj, *, ready: bool, now: str) -> list[Obj]:
        kept = [
            c
            for c in (pod.get("status") or {}).get("conditions") or []
            if isinstance(c, dict) and c.get("type") not in ("Ready", "ContainersReady")
        ]
        value = "True" if ready else "False"
        return kept + [
            {"type": kind, "status": value, "lastProbeTime": None, "lastTransitionTime": now}
            for kind in ("Ready", "ContainersReady")
        ]

    @staticmethod
    def _annotation_float(meta: Obj, key: str) -> float | None:
        raw = (meta.get("annotations") or {}).get(key)
        if raw is None:
            return None
        try:
            return float(raw)
        except ValueError:
            log.warning("simulated kubelet: %s=%r is not a number; ignored", key, raw)
            return None

    def _node_exists(self, node: str) -> bool:
        try:
            self.sim.get("nodes", node)
        except ApiError:
            return False
        return True

    def _node_ready(self, node: str, *, ready: bool) -> None:
        cond = {
            "type": "Ready",
            "status": "True" if ready else "Unknown",
            "reason": "KubeletReady" if ready else "NodeStatusUnknown",
            "message": "kubelet is posting ready status"
            if ready
            else "Kubelet stopped posting node status.",
            "lastHeartbeatTime": _stamp(),
            "lastTransitionTime": _stamp(),
        }
        with contextlib.suppress(ApiError):
            self.sim.patch(
                "nodes",
                node,
                {"status": {"conditions": [cond]}},
                patch_type="strategic",
                subresource="status",
            )
