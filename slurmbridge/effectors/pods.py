"""Pod and placeholder-job effects (Slinky slurm-bridge scheduler and workload controller)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

import msgspec

from schemas import wellknown
from schemas.actions import (
    Action,
    AllocateResourceClaim,
    BindPod,
    CancelSlurmJob,
    CreateExtendedResourceClaim,
    DeletePod,
    MarkPods,
    PodRef,
    RecordEvent,
    ReleaseResourceClaim,
    RemovePodFinalizer,
    SetJobExcludedNodes,
    SetPodCondition,
    SlurmJobSpec,
    SubmitSlurmJob,
)
from slurmbridge.effectors.claims import ClaimEffects
from slurmbridge.effectors.common import (
    JOB_ENDED,
    Effector,
    no_client,
    nothing,
    ok_unless_gone,
    read_pod,
)
from slurmbridge.effectors.nodes import KubeEffector
from slurmbridge.effectors.pod_writes import PodWriteHandlers
from slurmbridge.kube import apis, writes
from slurmbridge.kube.api import read_raw
from slurmbridge.kube.apis import ApiException
from slurmbridge.kube.cache import PodCache
from slurmbridge.kube.errors import Conflict, NotFound, typed
from slurmbridge.kube.wire import RawPod
from slurmbridge.runtime.outcomes import EffectResult
from slurmbridge.slurm import errors as slurm_errors
from slurmbridge.slurm.client import SlurmClient
from slurmbridge.slurm.models import JobSubmit


class PodEffector(PodWriteHandlers, ClaimEffects, Effector):
    """Pod placement and workload actions: they touch both sides, so this effector holds a
    Kubernetes ApiClient and the Slurm clients.

    * submit: look for a live job whose ``comment`` is the action's marker first (for a
      re-back, one that holds or requires every node the spec requires), so a redelivered
      or retried submit never makes a second job; then mark the pods. Slurm's jobs are
      listed once per cluster and :meth:`relist` epoch (the app calls it when a placement
      worker starts), later submits only re-read the jobs this process knows carry the
      marker (``GET job/{id}``), or nothing at all;
    * mark: read each pod (uid precondition: a re-created pod is left alone), then one JSON
      patch that tests ``metadata.resourceVersion`` (the pod changed meanwhile ⇒ Transient)
      and sets the job-id label, adds our finalizer and the managed-node toleration; the
      group's pods concurrently. ``on_job_changed(cluster, job_id)`` is told each job it
      submits or cancels, so an in-process poller can look at it at once;
    * bind: one POST of the Binding subresource carrying the ``slinky.slurm.net/slurm-node``
      annotation (the API server copies it onto the pod); already bound to that node ⇒ noop,
      bound elsewhere or being deleted ⇒ skipped, gone ⇒ noop;
    * cancel: re-read the job; only ours (comment = marker) and only while it can still run;
      "no such job" ⇒ noop;
    * delete pod: re-read the job first and skip while it RUNNING (fail closed: a Slurm
      error is retried, never read as "job gone") — when the action names the group's
      marker, only while that RUNNING job carries it (a reused id is another group's job);
      delete with a uid precondition and the action's grace period
      (``gracePeriodSeconds``) when it has one;
    * finalizer removal and pod conditions: read, then patch with resourceVersion;
    * mark, finalizer removal and conditions start from the ``pod_cache`` copy when it holds
      one (:mod:`slurmbridge.kube.cache`): a conflict, or a copy that says there is
      nothing to write, reads the pod from the API server and decides again;
    * DRA ResourceClaims: allocate, make for extended resources, release
      (:mod:`slurmbridge.effectors.claims`).

    Raises Transient / Permanent as the other effectors do.
    """

    #: Markers remembered per cluster before a new listing epoch starts.
    MAX_MARKERS = 100_000

    TABLE: ClassVar[Mapping[type[Action], str]] = {
        SubmitSlurmJob: "_submit",
        MarkPods: "_mark_pods",
        BindPod: "_bind",
        CancelSlurmJob: "_cancel",
        SetJobExcludedNodes: "_exclusions",
        DeletePod: "_delete",
        RemovePodFinalizer: "_unfinalize",
        SetPodCondition: "_condition",
        AllocateResourceClaim: "_allocate_claim",
        CreateExtendedResourceClaim: "_extended_claim",
        ReleaseResourceClaim: "_release_claim",
    }

    def __init__(
        self,
        api: apis.ApiClient,
        slurm: dict[str, SlurmClient],
        *,
        placeholder_script: str = "",
        pod_cache: PodCache | None = None,
    ) -> None:
        self.core = apis.CoreV1Api(api)
        self.pod_cache = pod_cache
        self.custom = apis.CustomObjectsApi(api)
        self.slurm = slurm
        self.placeholder_script = placeholder_script
        self.on_job_changed: Callable[[str, int], None] | None = None
        self._events = KubeEffector(api)
        #: Per cluster, marker → ids of the live jobs carrying it (see _known_jobs); a
        #: cluster missing has no epoch open: its next submit lists Slurm's jobs.
        self._markers: dict[str, dict[str, list[int]]] = {}

    def _client(self, cluster: str) -> SlurmClient:
        try:
            return self.slurm[cluster]
        except KeyError:
            raise no_client(cluster) from None

    def relist(self) -> None:
        """Forget which jobs carry which markers: the next submit of each cluster lists
        Slurm's jobs once again. Call it whenever another process may have submitted for
        keys this one now handles (a placement worker started: at start-up, or a lease
        taken over from another replica)."""
        self._markers.clear()

    async def _known_jobs(self, c: SlurmClient, cluster: str) -> dict[str, list[int]]:
        """Marker → ids of the live jobs carrying it, as far as this process can know: one
        full listing per cluster and :meth:`relist` epoch, then the jobs it submits itself.
        A job of ours this process did not submit came from an earlier process or another
        replica, and the listing that opens the epoch (taken after that one stopped
        submitting for these keys) shows it."""
        known = self._markers.get(cluster)
        if known is None:
            listing = await c.list_jobs()
            known = {}
            for job in listing.jobs if listing is not None else ():
                if job.comment and job.base_state not in JOB_ENDED:
                    # A heterogeneous job's pods carry its id (the leader's).
                    known.setdefault(job.comment, []).append(job.het_job_id or job.job_id)
            self._markers[cluster] = known
        return known

    async def _existing(self, c: SlurmClient, action: SubmitSlurmJob) -> int | None:
        """The live job of ours that already serves ``action``, re-read one by one (``GET
        job/{id}``): never a full job listing per submit (Slinky slurm-bridge#45: a big
        pending queue made every placement list it)."""
        known = await self._known_jobs(c, action.cluster)
        ids = known.get(action.marker)
        if not ids:
            return None
        need = set(action.spec.required_nodes)
        live: list[int] = []
        found = None
        for job_id in ids:
            job = await c.get_job(job_id)
            if job is None or job.comment != action.marker or job.base_state in JOB_ENDED:
                continue
            live.append(job_id)
            # A re-back (required nodes) is satisfied only by a job of ours on, or asking
            # for, every one of those nodes: an older job of the group that slurmctld
            # restored from its state could start anywhere.
            held = set(job.nodes) if job.base_state == "RUNNING" else set(job.required_nodes)
            if found is None and need <= held:
                found = job_id
        if live:
            known[action.marker] = live
        else:
            known.pop(action.marker, None)
        return found

    def _remember(self, cluster: str, marker: str, job_id: int) -> None:
        known = self._markers.get(cluster)
        if known is None:
            return  # no epoch open: the next submit lists, and sees this job
        if len(known) >= self.MAX_MARKERS:
            # Bounded memory: start a new epoch (one listing) rather than grow for ever.
            del self._markers[cluster]
            return
        known.setdefault(marker, []).append(job_id)

    async def _submit(self, action: SubmitSlurmJob) -> EffectResult:
        c = self._client(action.cluster)
        existing = await self._existing(c, action)
        outcome = "noop"
        raws: list[RawPod | None] | None = None
        if existing is None:
            submit: Awaitable[int]
            if action.components:
                submit = self._submit_het(c, action)
            else:
                submit = c.submit_job(_job_submit(action.spec, action.pods, action.marker))
            # The pods are read while Slurm takes the job, so once it exists (and may
            # already run) marking them costs one request each, not two — none at all for a
            # pod the pod cache holds (its mark starts from that copy).
            try:
                job_id, read = await asyncio.gather(
                    submit, asyncio.gather(*(self._read_uncached(pod) for pod in action.pods))
                )
            except slurm_errors.Rejected as exc:
                return await self._refused(action, exc)
            existing, raws = job_id, list(read)
            outcome = "ok"
            self._remember(action.cluster, action.marker, job_id)
            if self.on_job_changed is not None:
                self.on_job_changed(action.cluster, existing)
        marked = await self._mark_all(action.pods, existing, action.scheduler_name, raws)
        return EffectResult(
            "ok" if "ok" in (outcome, marked.outcome) else "noop", f"Slurm job {existing}"
        )

    async def _submit_het(self, c: SlurmClient, action: SubmitSlurmJob) -> int:
        """Submit ``action``'s components as one heterogeneous job; its id (the leader's).
        Every component's job is announced (``on_job_changed``) so the log hears of each."""
        ids = await c.submit_het_job(
            tuple(_job_submit(h.spec, h.pods, action.marker) for h in action.components)
        )
        if self.on_job_changed is not None:
            for job_id in ids[1:]:
                self.on_job_changed(action.cluster, job_id)
        return ids[0]

    async def _refused(self, action: SubmitSlurmJob, exc: slurm_errors.Rejected) -> EffectResult:
        """Slurm refused the submit for good (a role the token lacks, a job Slurm cannot
        take): say so on every pod, as kube-scheduler does for a pod it cannot place —
        ``PodScheduled=False`` with reason ``SlurmJobRejected`` and Slurm's words, and a
        Warning Event. ``placement`` reads the condition and waits before submitting again,
        so a permanent refusal is never retried in a loop.

        The back-off runs from the condition's ``lastTransitionTime``, so a refusal that
        follows another ``PodScheduled=False`` (the pods waited on a job an administrator
        then cancelled: ``SlurmJobPending``) starts it afresh rather than inherit the older
        time, which would let the next submit go at once."""

        message = f"Slurm refused the placeholder job: {exc}"
        if isinstance(exc, slurm_errors.Forbidden):
            message += (
                " (the Slurm token's user lacks the role for this request; docs/slurm.md"
                " lists the role the bridge needs)"
            )
        for pod in action.pods:
            await self._condition(
                SetPodCondition(
                    pod=pod,
                    type=wellknown.CONDITION_POD_SCHEDULED,
                    status="False",
                    reason=wellknown.REASON_SLURM_JOB_REJECTED,
                    message=message,
                ),
                new_reason_restarts=True,
            )
            await self._events.apply(
                RecordEvent(
                    api_version="v1",
                    object_kind="Pod",
                    name=pod.name,
                    namespace=pod.namespace,
                    uid=pod.uid,
                    type="Warning",
                    reason=wellknown.REASON_SLURM_JOB_REJECTED,
                    message=message,
                )
            )
        return EffectResult("rejected", message)

    async def _bind(self, action: BindPod) -> EffectResult:
        # One request: the API server copies the Binding's annotations onto the pod, refuses
        # (409) a pod already bound or being deleted, and checks the uid precondition.
        meta: dict[str, Any] = {
            "name": action.pod.name,
            "namespace": action.pod.namespace,
            "annotations": {wellknown.ANNOTATION_SLURM_NODE: action.slurm_node},
        }
        if action.pod.uid:
            meta["uid"] = action.pod.uid
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": action.node},
        }
        try:
            await writes.create_namespaced_pod_binding(
                self.core, action.pod.name, action.pod.namespace, body
            )
        except ApiException as exc:
            if isinstance(typed(exc), NotFound):
                return EffectResult("noop", "pod is gone")
            if not isinstance(typed(exc), Conflict):
                raise
            raw = await read_pod(self.core, action.pod)
            if raw is None:
                return EffectResult("noop", "pod is gone")
            if raw.spec.nodeName == action.node:
                return EffectResult("noop", f"already bound to {action.node}")
            if raw.spec.nodeName:
                return EffectResult("skipped", f"bound to {raw.spec.nodeName}, not {action.node}")
            if raw.metadata.deletionTimestamp:
                return EffectResult("skipped", "pod is being deleted")
            raise
        return EffectResult("ok", f"bound to {action.node}")

    async def _cancel(self, action: CancelSlurmJob) -> EffectResult:
        c = self._client(action.cluster)
        job = await c.get_job(action.job_id)
        if job is None:
            return EffectResult("noop", "no such job")
        if job.comment != action.marker:
            return EffectResult("skipped", f"job {action.job_id} is not ours")
        if job.base_state in JOB_ENDED:
            return EffectResult("noop", f"job already {job.base_state}")
        if action.pending_only and job.base_state != "PENDING":
            return EffectResult("skipped", f"job {action.job_id} is {job.base_state}")
        if not c.may_cancel(job):
            # A user who is not an administrator cancelling someone else's job over REST
            # deadlocks slurmctld (24.11.5 and 26.05.5); such a job was not submitted by us
            # anyway (only an administrator can submit for another user).
            return EffectResult(
                "skipped",
                f"job {action.job_id} belongs to {job.user_name!r}, not to the token's user "
                f"{c.token_user!r}: not cancelled",
            )
        await c.cancel_job(action.job_id)
        if self.on_job_changed is not None:
            self.on_job_changed(action.cluster, action.job_id)
        return EffectResult("ok", action.why)

    async def _exclusions(self, action: SetJobExcludedNodes) -> EffectResult:
        """Re-read the job: only ours, only while PENDING, only when the list differs."""
        c = self._client(action.cluster)
        job = await c.get_job(action.job_id)
        if job is None or job.base_state != "PENDING":
            return EffectResult("noop", "job is not pending")
        if job.comment != action.marker:
            return EffectResult("skipped", f"job {action.job_id} is not ours")
        if sorted(job.excluded_nodes) == sorted(action.excluded_nodes):
            return EffectResult("noop", "excluded nodes already as wanted")
        try:
            await c.set_job_excluded_nodes(action.job_id, action.excluded_nodes)
        except slurm_errors.Rejected as exc:
            # It started meanwhile (ESLURM_JOB_NOT_PENDING and the like): nothing to change.
            return EffectResult("noop", f"job no longer pending: {exc}")
        if self.on_job_changed is not None:
            self.on_job_changed(action.cluster, action.job_id)
        return EffectResult("ok", f"excluded nodes now {','.join(action.excluded_nodes) or 'none'}")

    async def _delete(self, action: DeletePod) -> EffectResult:
        c = self._client(action.cluster)
        # Both reads at once: the pod is only deleted if the job, read from Slurm now, is
        # not RUNNING (fail closed), and the pod read gives the uid precondition.
        job, raw = await asyncio.gather(
            c.get_job(action.job_id) if action.job_id else nothing(),
            read_pod(self.core, action.pod),
        )
        if (
            job is not None
            and job.base_state == "RUNNING"
            and (not action.marker or job.comment == action.marker)
        ):
            return EffectResult("skipped", f"job {action.job_id} is RUNNING")
        if raw is None:
            return EffectResult("noop", "pod is gone")
        if raw.metadata.deletionTimestamp:
            return EffectResult("noop", "pod is already being deleted")
        delete: Any = self.core.delete_namespaced_pod
        options: dict[str, Any] = {"preconditions": {"uid": raw.metadata.uid}}
        if action.grace_period_s is not None:
            # DeleteOptions.gracePeriodSeconds (meta/v1): the pod's containers get this long
            # between SIGTERM and SIGKILL instead of its terminationGracePeriodSeconds.
            options["gracePeriodSeconds"] = action.grace_period_s
        return await ok_unless_gone(
            read_raw(
                delete(
                    action.pod.name,
                    action.pod.namespace,
                    body=options,
                    _preload_content=False,
                )
            ),
            "pod",
            action.why,
        )


def _job_submit(spec: SlurmJobSpec, pods: tuple[PodRef, ...], marker: str) -> JobSubmit:
    """The placeholder job (``EXTERNAL_JOB``) for ``spec``: ``comment`` the group's marker,
    ``admin_comment`` Slinky's ``{"pods": [...]}`` of the pods it places."""
    admin = msgspec.json.encode({"pods": [p.key for p in pods]}).decode()
    return JobSubmit(
        **msgspec.structs.asdict(spec), admin_comment=admin, comment=marker, external=True
    )
