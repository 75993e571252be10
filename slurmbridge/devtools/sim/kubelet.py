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
  ``Unknown`` with reason ``NodeStatusUnknown``, as the node lifecycle controller reports it;
* **admission** (:meth:`Kubelet._admit`): a pod newly bound to a node is first admitted as
  the real kubelet admits it (pkg/kubelet/lifecycle/predicate.go ``Admit`` /
  ``generalFilter``, calling pkg/scheduler ``AdmissionCheck``): its requests must fit the
  node's ``status.allocatable`` next to the pods admitted there before (pods, then cpu, then
  memory: noderesources ``fitsRequest``), its ``nodeSelector`` and required node affinity
  must match the node's labels, and every ``NoExecute`` taint of the node must be tolerated
  (the kubelet ignores ``NoSchedule``). A pod refused is not started: its phase becomes
  ``Failed`` with ``reason`` ``OutOfpods`` / ``OutOfcpu`` / ``OutOfmemory`` / ``NodeAffinity``
  / ``TaintToleration`` and ``message`` ``Pod was rejected: <why>`` (kubelet.go
  ``rejectPod``), and a Warning Event with that reason. Not modelled: the node name, host
  ports, the OS label and extended resources.

Pods of nodes the simulator does not know are left alone, so a test can still play the
kubelet itself for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Final

from slurmbridge.devtools.sim.kube import ApiError, Change, KubeSim, quantity, ready_condition
from slurmbridge.devtools.sim.podqueue import PodQueue

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


class Kubelet(PodQueue):
    """The kubelets of a :class:`KubeSim` (see the module docstring).

    ``start_delay``: seconds from binding to ``Running`` (image pull and container start);
    ``stop_seconds``: seconds a container takes to exit after SIGTERM (capped by the pod's
    grace period). :attr:`transitions` counts phase changes written, by phase.
    """

    what = "simulated kubelet"

    def __init__(self, sim: KubeSim, *, start_delay: float = 0.0, stop_seconds: float = 0.0):
        super().__init__(sim)
        self.start_delay = start_delay
        self.stop_seconds = stop_seconds
        self.stopped: set[str] = set()
        self.transitions: dict[str, int] = {}
        self._started: dict[str, float] = {}  # pod uid -> loop time it turned Running
        self._admitted: set[str] = set()  # uids of the pods admitted (started or starting)
        #: Pods refused at admission: ``(namespace/name, reason)``.
        self.rejected: list[tuple[str, str]] = []
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}

    # lifecycle --------------------------------------------------------------------------------
    def detach(self) -> None:
        """Stop reacting; pending timers are cancelled."""
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        super().detach()

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
            self._admitted.discard(uid)
            # The kubelet's final delete: gone as soon as no finalizer holds it.
            with contextlib.suppress(ApiError):
                self.sim.delete_pod(name, namespace, grace_period_seconds=0, uid=uid)
            return
        if phase == "Pending" and uid not in self._admitted:
            refused = self._admit(pod, node)
            if refused is not None:
                self._reject(pod, *refused)
                return
            self._admitted.add(uid)
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

    # admission --------------------------------------------------------------------------------
    def _admit(self, pod: Obj, node_name: str) -> tuple[str, str] | None:
        """The kubelet's admission of ``pod`` on ``node_name`` (module docstring): None when
        admitted, else ``(reason, message)`` as ``predicateAdmitHandler.Admit`` returns them —
        the first failure, resources first (``AdmissionCheck`` collects every insufficient
        resource, then node affinity; the NoExecute taints come last)."""
        try:
            node = self.sim.get("nodes", node_name)
        except ApiError:
            return None
        uid = str(pod["metadata"].get("uid", ""))
        others = [
            p
            for p in self.sim.list("pods", field_selector=f"spec.nodeName={node_name}")
            if str(p["metadata"].get("uid", "")) != uid
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and (
                str(p["metadata"].get("uid", "")) in self._admitted
                or (p.get("status") or {}).get("phase") == "Running"
            )
        ]
        refused = _resources_fit(pod, node, others)
        if refused is not None:
            return refused
        if not node_affinity_matches(pod.get("spec") or {}, node):
            return (
                "NodeAffinity",
                "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
            )
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        for taint in (node.get("spec") or {}).get("taints") or []:
            # "Kubelet is only interested in the NoExecute taint" (predicate.go).
            if taint.get("effect") == "NoExecute" and not any(
                tolerates(t, taint) for t in tolerations
            ):
                return (
                    "TaintToleration",
                    "Predicate TaintToleration failed: node(s) had taints that the pod didn't "
                    "tolerate",
                )
        return None

    def _reject(self, pod: Obj, reason: str, message: str) -> None:
        """kubelet.go ``rejectPod``: a Warning Event, then phase Failed with the reason and
        ``Pod was rejected: <message>``; no container ever starts."""
        meta = pod["metadata"]
        self.rejected.append((f"{meta['namespace']}/{meta['name']}", reason))
        with contextlib.suppress(ApiError):
            self.sim.create(
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {
                        "name": f"{meta['name']}.{meta.get('uid', '')[:8]}.rejected",
                        "namespace": meta["namespace"],
                    },
                    "involvedObject": {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": meta["name"],
                        "namespace": meta["namespace"],
                        "uid": meta.get("uid", ""),
                    },
                    "type": "Warning",
                    "reason": reason,
                    "message": message,
                    "source": {"component": "kubelet", "host": pod["spec"].get("nodeName", "")},
                    "count": 1,
                    "firstTimestamp": _stamp(),
                    "lastTimestamp": _stamp(),
                }
            )
        status = {
            "phase": "Failed",
            "reason": reason,
            "message": f"Pod was rejected: {message}",
        }
        self._write(meta, status, "Failed")

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
        # Not ready: what the node lifecycle controller writes when the kubelet stops
        # posting (pkg/controller/nodelifecycle: NodeStatusUnknown).
        now = _stamp()
        cond = (
            ready_condition(now)
            if ready
            else ready_condition(
                now, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
            )
        )
        with contextlib.suppress(ApiError):
            self.sim.patch(
                "nodes",
                node,
                {"status": {"conditions": [cond]}},
                patch_type="strategic",
                subresource="status",
            )


# --- admission rules (module docstring) ------------------------------------------------------


def _request(pod: Obj, resource: str) -> Fraction:
    """The pod's effective request of ``resource`` (core/v1 ``resource.PodRequests``): the
    larger of the containers' sum and the largest init container, plus ``spec.overhead``;
    requests were defaulted from limits when the pod was created."""

    def of(container: Any) -> Fraction:
        if not isinstance(container, dict):
            return Fraction(0)
        raw = ((container.get("resources") or {}).get("requests") or {}).get(resource)
        return (quantity(raw) if raw is not None else None) or Fraction(0)

    spec = pod.get("spec") or {}
    main = sum((of(c) for c in spec.get("containers") or ()), Fraction(0))
    init = max((of(c) for c in spec.get("initContainers") or ()), default=Fraction(0))
    overhead = quantity((spec.get("overhead") or {}).get(resource, 0)) or Fraction(0)
    return max(main, init) + overhead


def _resources_fit(pod: Obj, node: Obj, others: list[Obj]) -> tuple[str, str] | None:
    """noderesources ``fitsRequest`` against ``status.allocatable`` and the pods admitted
    before: the first insufficient resource as (``OutOf<resource>``, the
    ``InsufficientResourceError`` message, in the integer units the kubelet prints:
    millicpu, bytes, pods)."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}

    def amount(resource: str) -> int:
        value = quantity(allocatable.get(resource, 0)) or Fraction(0)
        return int(value * 1000) if resource == "cpu" else int(value)

    def message(resource: str, requested: int, used: int, capacity: int) -> tuple[str, str]:
        return (
            f"OutOf{resource}",
            f"Node didn't have enough resource: {resource}, requested: {requested}, "
            f"used: {used}, capacity: {capacity}",
        )

    allowed = amount("pods")
    if len(others) + 1 > allowed:
        return message("pods", 1, len(others), allowed)
    for resource, scale in (("cpu", 1000), ("memory", 1)):
        want = int(_request(pod, resource) * scale)
        if want <= 0:
            continue
        used = sum(int(_request(p, resource) * scale) for p in others)
        capacity = amount(resource)
        if want > capacity - used:
            return message(resource, want, used, capacity)
    return None


def _int64(text: Any) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``; None when it fails."""
    if not isinstance(text, str) or not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _requirement(req: Obj, labels: dict[str, str]) -> bool:
    """One ``matchExpressions`` entry (apimachinery ``labels.Requirement.Matches``); an entry
    ``labels.NewRequirement`` refuses matches nothing."""
    key, op, values = req.get("key", ""), req.get("operator", ""), list(req.get("values") or [])
    has = key in labels
    if op in ("In", "NotIn") and values:
        inside = has and labels[key] in values
        return inside if op == "In" else not inside
    if op in ("Exists", "DoesNotExist") and not values:
        return has if op == "Exists" else not has
    if op in ("Gt", "Lt") and len(values) == 1:
        bound, value = _int64(values[0]), _int64(labels.get(key))
        if bound is None or value is None:
            return False
        return value > bound if op == "Gt" else value < bound
    return False


def _term(term: Obj, node: Obj) -> bool:
    """One node selector term (component-helpers nodeaffinity ``nodeSelectorTerm.match``):
    expressions and fields ANDed; an empty term matches nothing; ``matchFields`` reads only
    ``metadata.name`` with ``In`` / ``NotIn`` and one value."""
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False
    labels = node["metadata"].get("labels") or {}
    if not all(_requirement(e, labels) for e in exprs):
        return False
    for f in fields:
        values = list(f.get("values") or [])
        if f.get("operator") not in ("In", "NotIn") or len(values) != 1:
            return False
        value = node["metadata"]["name"] if f.get("key") == "metadata.name" else ""
        if (value == values[0]) != (f.get("operator") == "In"):
            return False
    return True


def node_affinity_matches(spec: Obj, node: Obj) -> bool:
    """component-helpers nodeaffinity ``GetRequiredNodeAffinity(pod).Match(node)`` for a pod
    ``spec``: every ``nodeSelector`` pair, then any term of the required node affinity (when
    set). The kubelet's admission and kube-scheduler's NodeAffinity filter run the same code
    (k8s.io/component-helpers scheduling/corev1/nodeaffinity/nodeaffinity.go)."""
    labels = node["metadata"].get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is None:
        return True
    return any(_term(t, node) for t in required.get("nodeSelectorTerms") or [])


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """k8s.io/api core/v1 ``Toleration.ToleratesTaint`` (the alpha Lt/Gt operators are off)."""
    effect, key = toleration.get("effect") or "", toleration.get("key") or ""
    if effect and effect != taint.get("effect"):
        return False
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return op == "Exists"
