"""The kube-controller-manager's Job controller for :class:`~slurmbridge.devtools.sim.kube.KubeSim`
(``KubeSim(job_controller=True)``): a batch/v1 Job gets its pods, as kubernetes
pkg/controller/job/job_controller.go ``syncJob`` makes them, for ``completionMode:
NonIndexed``:

* pods are made from ``spec.template``: ``generateName`` ``<job>-``, the template's labels
  (the API server added ``controller-uid``, ``job-name`` and their ``batch.kubernetes.io/``
  forms, :func:`~slurmbridge.devtools.sim.kube._prepare_job`) and annotations, the Job as
  controller owner (``blockOwnerDeletion``); a Normal ``SuccessfulCreate`` Event each
  (``Created pod: <name>``);
* how many run at once (``wantActive``, job_controller.go ``manageJob``): without
  ``completions``, ``parallelism`` until a pod succeeded, then no new ones; with it,
  ``min(parallelism, completions - succeeded)``; surplus active pods are deleted (not-yet-
  bound first, then the newest); a failed pod is replaced after the pod-failure back-off
  (10 s doubling per failure, at most 10 min: ``DefaultJobPodFailureBackOff``,
  ``MaxJobPodFailureBackOff``); ``podReplacementPolicy`` TerminatingOrFailed (the default):
  a terminating pod does not count as active;
* ``status``: ``active``, ``ready``, ``terminating``, ``succeeded``, ``failed`` (counted once
  per pod uid, so a finished pod deleted later still counts, as the tracking finalizer
  guarantees there), ``startTime`` at the first sync of an unsuspended Job;
* the end: ``succeeded`` reaching ``completions`` (or, without ``completions``, a success and
  no active pod) adds ``SuccessCriteriaMet`` and ``Complete`` (reason ``CompletionsReached``),
  ``completionTime`` and a Normal ``Completed`` Event; more failures than ``backoffLimit``
  (reason ``BackoffLimitExceeded``) or a run past ``activeDeadlineSeconds``
  (``DeadlineExceeded``) add ``FailureTarget`` and ``Failed`` and delete the active pods;
* ``suspend: true`` deletes the active pods and adds ``Suspended`` (``JobSuspended``);
* a deleted Job's pods are deleted (the garbage collector's background propagation, which
  the simulator has nowhere else).

Not modelled: ``Indexed`` completion mode (such a Job gets no pods, and a Warning Event says
so), ``podFailurePolicy``, ``successPolicy``, ``backoffLimitPerIndex``, the
``batch.kubernetes.io/job-tracking`` finalizer and ``uncountedTerminatedPods``, ``managedBy``
(a Job managed by another controller is left alone, as the real one leaves it), and
``ttlSecondsAfterFinished``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from datetime import UTC, datetime
from typing import Any, Final

from slurmbridge.devtools.sim.kube import ApiError, Change, KubeSim
from slurmbridge.devtools.sim.podqueue import PodQueue

log = logging.getLogger(__name__)

Obj = dict[str, Any]

#: job_controller.go: the first retry of a failed pod waits this long, doubling per failure.
BACKOFF_S: Final = 10.0
BACKOFF_MAX_S: Final = 600.0
_MANAGED_BY_DEFAULT: Final = "kubernetes.io/job-controller"


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _controller_uid(pod: Obj) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Job":
            return str(ref.get("uid"))
    return None


def _controller_name(pod: Obj) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Job":
            return str(ref.get("name"))
    return None


def _condition(job: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


class JobController(PodQueue):
    """See the module docstring; :attr:`created` counts the pods it made."""

    what = "simulated job controller"

    def __init__(self, sim: KubeSim) -> None:
        super().__init__(sim)
        self.created = 0
        #: Per Job uid: uids of the pods counted as succeeded / failed.
        self._succeeded: dict[str, set[str]] = {}
        self._failed: dict[str, set[str]] = {}
        #: Per Job uid: monotonic time of the last pod failure seen.
        self._last_failure: dict[str, float] = {}
        self._timers: dict[tuple[str, str], Any] = {}
        self._refused: set[str] = set()

    def attach(self) -> None:
        """Start reacting; every Job that exists is synced once."""
        super().attach()
        self._dirty.clear()
        for job in self.sim.list("jobs"):
            self._mark(job["metadata"]["namespace"], job["metadata"]["name"])

    def detach(self) -> None:
        """Stop reacting and drop the pending back-off timers."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        super().detach()

    def _on_write(self, change: Change) -> None:
        meta = change.object.get("metadata") or {}
        ns = str(meta.get("namespace", ""))
        if change.resource.name == "jobs.batch":
            if change.type == "DELETED":
                self._collect(change.object)
            else:
                self._mark(ns, str(meta.get("name", "")))
        elif change.resource.name == "pods":
            owner = _controller_name(change.object)
            if owner is not None:
                self._mark(ns, owner)

    def _later(self, namespace: str, name: str, delay: float) -> None:
        key = (namespace, name)
        if key in self._timers or self._loop is None:
            return

        def fire() -> None:
            self._timers.pop(key, None)
            self._mark(namespace, name)

        self._timers[key] = self._loop.call_later(delay, fire)

    # the sync -----------------------------------------------------------------------------------
    def _sync(self, namespace: str, name: str) -> None:
        try:
            job = self.sim.get("jobs", name, namespace)
        except ApiError:
            return
        meta, spec = job["metadata"], job.get("spec") or {}
        managed_by = spec.get("managedBy")
        if meta.get("deletionTimestamp") or managed_by not in (None, _MANAGED_BY_DEFAULT):
            return
        if _condition(job, "Complete") or _condition(job, "Failed"):
            return
        uid = str(meta["uid"])
        if spec.get("completionMode", "NonIndexed") != "NonIndexed":
            if uid not in self._refused:
                self._refused.add(uid)
                self._event(
                    job, "Warning", "IndexedJobNotSimulated", "Indexed Jobs get no pods here"
                )
            return
        pods = [p for p in self.sim.list("pods", namespace=namespace) if _controller_uid(p) == uid]
        succeeded = self._succeeded.setdefault(uid, set())
        failed = self._failed.setdefault(uid, set())
        for pod in pods:
            phase = (pod.get("status") or {}).get("phase")
            puid = str(pod["metadata"]["uid"])
            if phase == "Succeeded":
                succeeded.add(puid)
            elif phase == "Failed" and puid not in failed:
                failed.add(puid)
                self._last_failure[uid] = time.monotonic()
        active = [
            p
            for p in pods
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not p["metadata"].get("deletionTimestamp")
        ]
        terminating = [
            p
            for p in pods
            if p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        status: Obj = dict(job.get("status") or {})
        conditions: list[Obj] = list(status.get("conditions") or [])
        now = _stamp()
        events: list[tuple[str, str, str]] = []
        suspended = bool(spec.get("suspend"))
        if not suspended and not status.get("startTime"):
            status["startTime"] = now
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        backoff_limit = int(spec.get("backoffLimit", 6))
        deadline = spec.get("activeDeadlineSeconds")
        finished = ""
        if len(failed) > backoff_limit:
            finished = "BackoffLimitExceeded"
        elif deadline is not None and status.get("startTime") and not suspended:
            started = datetime.fromisoformat(str(status["startTime"]))
            left = float(deadline) - (datetime.now(UTC) - started).total_seconds()
            if left <= 0:
                finished = "DeadlineExceeded"
            else:
                self._later(namespace, name, left)
        complete = (completions is not None and len(succeeded) >= int(completions)) or (
            completions is None and succeeded and not active
        )
        if finished:
            for pod in active:
                self._delete(pod)
            active = []
            message = (
                "Job has reached the specified backoff limit"
                if finished == "BackoffLimitExceeded"
                else "Job was active longer than specified deadline"
            )
            conditions += [
                self._cond(k, finished, message, now) for k in ("FailureTarget", "Failed")
            ]
            events.append(("Warning", finished, message))
        elif complete and not active:
            reached = "Reached expected number of succeeded pods"
            conditions += [
                self._cond(k, "CompletionsReached", reached, now)
                for k in ("SuccessCriteriaMet", "Complete")
            ]
            status["completionTime"] = now
            events.append(("Normal", "Completed", "Job completed"))
        elif suspended:
            for pod in active:
                self._delete(pod)
            active = []
            if not _condition(job, "Suspended"):
                conditions = [c for c in conditions if c.get("type") != "Suspended"]
                conditions.append(self._cond("Suspended", "JobSuspended", "Job suspended", now))
                events.append(("Normal", "Suspended", "Job suspended"))
        else:
            if completions is None:
                want = len(active) if succeeded else parallelism
            else:
                want = max(0, min(parallelism, int(completions) - len(succeeded)))
            if len(active) > want:
                surplus = sorted(
                    active,
                    key=lambda p: (
                        bool((p.get("spec") or {}).get("nodeName")),
                        (p.get("status") or {}).get("phase") == "Running",
                        _ready(p),
                    ),
                )[: len(active) - want]
                for pod in surplus:
                    self._delete(pod)
                active = [p for p in active if p not in surplus]
            elif len(active) < want:
                wait = self._backoff_left(uid, len(failed))
                if wait > 0:
                    self._later(namespace, name, wait)
                else:
                    for _ in range(want - len(active)):
                        made = self._make(job)
                        if made is not None:
                            active.append(made)
                            created = f"Created pod: {made['metadata']['name']}"
                            events.append(("Normal", "SuccessfulCreate", created))
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if _ready(p))
        status["terminating"] = len(terminating)
        status["succeeded"] = len(succeeded)
        status["failed"] = len(failed)
        for key in ("active", "succeeded", "failed"):
            if not status[key]:
                del status[key]  # omitempty in batch/v1 JobStatus
        status["conditions"] = conditions
        if not conditions:
            del status["conditions"]
        old = job.get("status") or {}
        if status != old:
            gone = {k: None for k in old if k not in status}
            with contextlib.suppress(ApiError):
                self.sim.patch(
                    "jobs", name, {"status": {**status, **gone}}, namespace, subresource="status"
                )
        for kind, reason, message in events:
            self._event(job, kind, reason, message)

    def _backoff_left(self, uid: str, failures: int) -> float:
        if not failures:
            return 0.0
        delay: float = min(BACKOFF_S * 2.0 ** (failures - 1), BACKOFF_MAX_S)
        return self._last_failure.get(uid, 0.0) + delay - time.monotonic()

    @staticmethod
    def _cond(kind: str, reason: str, message: str, now: str) -> Obj:
        return {
            "type": kind,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }

    # writes -------------------------------------------------------------------------------------
    def _make(self, job: Obj) -> Obj | None:
        meta = job["metadata"]
        template = (job.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        pod: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{meta['name']}-",
                "namespace": meta["namespace"],
                "labels": dict(tmeta.get("labels") or {}),
                "annotations": dict(tmeta.get("annotations") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": dict(template.get("spec") or {}),
        }
        if not pod["metadata"]["annotations"]:
            del pod["metadata"]["annotations"]
        try:
            made = self.sim.create(pod)
        except ApiError as exc:
            self._event(job, "Warning", "FailedCreate", f"Error creating: {exc}")
            return None
        self.created += 1
        return made

    def _delete(self, pod: Obj) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(ApiError):
            self.sim.delete("pods", meta["name"], meta["namespace"])

    def _collect(self, job: Obj) -> None:
        """The garbage collector's background deletion of a deleted Job's pods."""
        uid = str(job["metadata"].get("uid"))
        ns = str(job["metadata"].get("namespace"))
        self._succeeded.pop(uid, None)
        self._failed.pop(uid, None)
        self._last_failure.pop(uid, None)
        for pod in self.sim.list("pods", namespace=ns):
            if _controller_uid(pod) == uid and not pod["metadata"].get("deletionTimestamp"):
                self._delete(pod)

    def _event(self, job: Obj, kind: str, reason: str, message: str) -> None:
        meta = job["metadata"]
        with contextlib.suppress(ApiError):
            self.sim.create(
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {
                        "generateName": f"{meta['name']}.",
                        "namespace": meta["namespace"],
                    },
                    "involvedObject": {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta["name"],
                        "namespace": meta["namespace"],
                        "uid": meta.get("uid", ""),
                    },
                    "type": kind,
                    "reason": reason,
                    "message": message,
                    "source": {"component": "job-controller"},
                    "count": 1,
                    "firstTimestamp": _stamp(),
                    "lastTimestamp": _stamp(),
                }
            )
