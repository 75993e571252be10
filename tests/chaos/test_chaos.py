"""Chaos: a mixed workload while everything underneath fails, then an invariant check.

For ``CHAOS_SECONDS`` (45 by default; ``SLURMBRIDGE_CHAOS_SECONDS`` changes it) in the
simulators:

* workload — cordons and uncordons, pod groups placed through Slurm (run, complete, cleaned
  up), a NodeSet scaled up and down while external jobs occupy some of its nodes;
* faults — nats-server (file store) killed with SIGKILL and restarted every few seconds; the
  slurmbridge process crashed (leases left to expire) and restarted; slurmrestd failing 30 %
  of requests (503 before or after the effect, slow answers past the client time-out,
  connection resets); the Kubernetes API answering 409 Conflict to patches, 429 to
  evictions and 503 to other requests (15 %), dropping every watch and expiring
  resourceVersions (410 storms); a second producer process publishing the same objects.

Then the faults stop and the checker proves: every change converged; no pod was deleted
while its Slurm node or job ran; no administrator's drain was touched; no job was cancelled
while a pod of its group could still run; no effect happened twice where once was right. It
prints the counts: faults injected, observations, actions, violations (which must be 0).
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest

from reconcilers import nodeset, placement, workload
from schemas import events, streams, subjects, wellknown
from schemas.actions import BindPod, CancelSlurmJob, DrainSlurmNode, SubmitSlurmJob
from schemas.events import KubePod, SlurmNode
from slurmbridge.app import App
from slurmbridge.devtools.sim.workloads import create_group
from slurmbridge.devtools.testing import MANAGED_NODE_TOLERATION, Stack

pytestmark = pytest.mark.chaos

CHAOS_SECONDS = float(os.environ.get("SLURMBRIDGE_CHAOS_SECONDS", "45"))
NODES = ["n1", "n2", "n3", "n4", "n5"]
ADMIN = "n6"
ADMIN_REASON = "admin: chaos-proof DIMM swap"
NS = "default"


class Checker:
    """Watches both simulators while the chaos runs and collects violations."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.violations: list[str] = []
        self.cordon_episodes: collections.Counter[str] = collections.Counter()
        stack.slurm.on_update.append(self._slurm_update)
        stack.slurm.on_job_state.append(self._job_state)
        stack.kube.on_write.append(self._kube_write)

    def _slurm_update(self, name: str, update: Any, ts: float) -> None:
        del ts
        # The administrator's drain is theirs: no state or reason may change on that node.
        # The bridge's own feature (slurm_bridge_gres_compatible, Slinky 1.3: on every
        # compatible node, drained or not) is no drain of anyone's.
        if name == ADMIN and (update.state or update.reason is not None):
            self.violations.append(f"the administrator's node {ADMIN} was updated: {update}")

    def _job_state(self, job_id: int, state: str, ts: float) -> None:
        del ts
        if state != "CANCELLED":
            return
        for p in self.stack.kube.list("pods", NS):
            labels = p["metadata"].get("labels") or {}
            if labels.get(wellknown.LABEL_SLURM_JOBID) != str(job_id):
                continue
            phase = (p.get("status") or {}).get("phase")
            if phase not in ("Succeeded", "Failed"):
                self.violations.append(
                    f"job {job_id} cancelled while pod {p['metadata']['name']} is {phase}"
                )

    def _kube_write(self, change: Any) -> None:
        if change.resource.name != "pods":
            return
        meta = change.object.get("metadata") or {}
        labels = meta.get("labels") or {}
        raw = labels.get(wellknown.LABEL_SLURM_JOBID, "")
        deleting = change.type == "DELETED" or meta.get("deletionTimestamp")
        phase = (change.object.get("status") or {}).get("phase")
        if not deleting or not raw.isdigit() or phase in ("Succeeded", "Failed"):
            return
        job = self.stack.slurm.jobs_by_id.get(int(raw))
        if job is not None and job.state == "RUNNING":
            self.violations.append(
                f"pod {meta.get('name')} ({phase}) deleted while its job {raw} is RUNNING"
            )


def describe(stack: Stack, names: list[str]) -> str:
    """Where the named pods are stuck (for a failure message)."""
    out = []
    for name in names:
        p = stack.kube.get("pods", name, NS)
        labels = p["metadata"].get("labels") or {}
        raw = labels.get(wellknown.LABEL_SLURM_JOBID, "")
        job = stack.slurm.jobs_by_id.get(int(raw)) if raw.isdigit() else None
        out.append(
            f"{name}: {(p.get('status') or {}).get('phase')} on {p['spec'].get('nodeName')!r}"
            f" finalizers={p['metadata'].get('finalizers')} job={raw or '-'}"
            f" {job.state if job else ''} deleting={bool(p['metadata'].get('deletionTimestamp'))}"
        )
    return "; ".join(out)


async def every(period: float, stop: asyncio.Event, step: Callable[[], Awaitable[None]]) -> None:
    while not stop.is_set():
        await step()
        try:
            await asyncio.wait_for(stop.wait(), period)
        except TimeoutError:
            pass


async def test_chaos_keeps_every_invariant() -> None:
    rng = random.Random(20261122)
    settings = {
        "leases": {"ttl": 2.0},
        "slurm": {"timeout": 1.0},
        "worker": {"ackWait": 5.0},
        "kube": {"watchTimeout": 5},
    }
    async with Stack(nodes=6, poll_interval=0.2, settings=settings) as stack:
        checker = Checker(stack)
        stack.admin_drain(ADMIN, ADMIN_REASON)
        stack.slurm.add_partition("cs")
        # The pods' partition holds the Kubernetes nodes only, as slurm-bridge's docs set it
        # up: a NodeSet's slurmd nodes also join "batch", and a placeholder job pending there
        # could start on one registered after it was submitted (no pod can be bound there).
        stack.slurm.add_partition("k8s", [*NODES, ADMIN])
        stack.kube.create(
            {
                "apiVersion": "slinky.slurm.net/v1alpha1",
                "kind": "NodeSet",
                "metadata": {"name": "cs", "namespace": NS},
                "spec": {
                    "replicas": 0,
                    "template": {
                        "spec": {
                            "containers": [{"name": "slurmd", "image": "s"}],
                            "tolerations": [MANAGED_NODE_TOLERATION],
                        }
                    },
                },
            }
        )
        assert stack.settings is not None
        # A second producer publishing the same objects (deduplicated by Nats-Msg-Id).
        twin_settings = msgspec.structs.replace(
            stack.settings,
            instance_id="twin-producer",
            leases=msgspec.structs.replace(stack.settings.leases, enabled=False),
        )
        twin = App(twin_settings, only=("kube-watcher", "slurm-poller"), with_health=False)
        await twin.start()

        stop = asyncio.Event()
        cordoned: set[str] = set()
        groups: list[str] = []
        faults: collections.Counter[str] = collections.Counter()

        async def toggle() -> None:
            node = rng.choice(NODES)
            if node in cordoned:
                stack.uncordon(node)
                cordoned.discard(node)
            else:
                stack.cordon(node)
                cordoned.add(node)
                checker.cordon_episodes[node] += 1

        async def place() -> None:
            name = f"g{len(groups)}"
            create_group(
                stack.kube,
                "Job",
                name,
                2,
                annotations={wellknown.ANNOTATION_SLURMJOB_PREFIX + "partition": "k8s"},
                requests={"cpu": "1", "memory": "100Mi"},
                run_seconds=1.0,
            )
            groups.append(name)

        async def scale() -> None:
            replicas = rng.randint(0, 3)
            stack.kube.patch(
                "nodesets", "cs", {"spec": {"replicas": replicas}}, NS, subresource="scale"
            )
            nodes = [n for n in stack.slurm.nodes if n.startswith("cs-")]
            if nodes and rng.random() < 0.5:
                node = rng.choice(nodes)
                others = [n for n in stack.slurm.nodes if n != node]
                stack.slurm.submit(
                    {"partition": "cs", "tasks": 2, "min_nodes": 1, "excluded_nodes": others},
                    external=True,
                )

        async def end_external_jobs() -> None:
            for job in list(stack.slurm.jobs_by_id.values()):
                if job.partition == "cs" and job.state == "RUNNING" and rng.random() < 0.5:
                    stack.slurm.complete_job(job.job_id)

        async def nats_crash() -> None:
            await stack.nats.kill()
            faults["nats kill -9"] += 1
            await asyncio.sleep(0.3)
            await stack.nats.start()

        async def kube_storms() -> None:
            faults["watches dropped"] += stack.kube.drop_watches()
            if rng.random() < 0.5:
                stack.kube.compact()  # every resourceVersion so far is now 410 Gone
                faults["410 storm"] += 1

        async def app_crash() -> None:
            if stack.app is not None and rng.random() < 0.5:
                await stack.app.stop(crash=True)
                stack.app = None
                faults["slurmbridge crash"] += 1
                await stack.start_app()

        stack.slurm.chaos_rate = 0.30
        stack.slurm.chaos_slow_s = 1.5
        stack.kube.chaos_rate = 0.15
        started = time.monotonic()
        tasks = [
            asyncio.create_task(every(0.7, stop, toggle)),
            asyncio.create_task(every(1.5, stop, place)),
            asyncio.create_task(every(3.0, stop, scale)),
            asyncio.create_task(every(2.0, stop, end_external_jobs)),
            asyncio.create_task(every(CHAOS_SECONDS / 10, stop, nats_crash)),
            asyncio.create_task(every(2.0, stop, kube_storms)),
            asyncio.create_task(every(CHAOS_SECONDS / 3, stop, app_crash)),
        ]
        try:
            await asyncio.sleep(CHAOS_SECONDS)
        finally:
            stop.set()
            await asyncio.gather(*tasks)
        stack.slurm.chaos_rate = 0.0
        stack.kube.chaos_rate = 0.0
        if not stack.nats.running:
            await stack.nats.start()
        if stack.app is None:
            await stack.start_app()
        for job in list(stack.slurm.jobs_by_id.values()):
            if job.partition == "cs" and job.state in ("RUNNING", "PENDING"):
                stack.slurm.complete_job(job.job_id)
        # Every node back in service, so that every group can run to its end.
        for node in sorted(cordoned):
            stack.uncordon(node)
        cordoned.clear()

        # --- convergence ------------------------------------------------------------------
        def drained() -> set[str]:
            return {n for n in NODES if stack.slurm_node(n).has("DRAIN")}

        def groups_done() -> list[str]:
            open_groups = []
            for p in stack.kube.list("pods", NS):
                labels = p["metadata"].get("labels") or {}
                if "batch.kubernetes.io/job-name" not in labels and "job-name" not in labels:
                    continue
                phase = (p.get("status") or {}).get("phase")
                ours = [f for f in p["metadata"].get("finalizers") or [] if "slinky" in f]
                if phase != "Succeeded" or ours:
                    open_groups.append(p["metadata"]["name"])
            return open_groups

        def nodeset_pods() -> int:
            return sum(
                1
                for p in stack.kube.list("pods", NS)
                if p["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == "cs"
                and not p["metadata"].get("deletionTimestamp")
            )

        replicas = int(stack.kube.get("nodesets", "cs", NS)["spec"]["replicas"])
        await stack.wait_for(lambda: drained() == cordoned, timeout=60, what="drains converge")
        try:
            # The groups left when the faults stop run a few at a time on 4 nodes: on a busy
            # machine that takes longer than any fixed bound, so what must hold is progress —
            # a group finishes at least every 60 s until none is left.
            while left := groups_done():
                n = len(left)
                await stack.wait_for(
                    lambda n=n: len(groups_done()) < n, timeout=60, what="a group done"
                )
        except TimeoutError:
            app = stack.app
            assert app is not None
            open_groups = sorted({n.rsplit("-", 1)[0] for n in groups_done()})
            state = {
                "workers": {n: (w.caught_up, w.idle) for n, w in app.workers.items()},
                "leases": {n: lease.held for n, lease in app.leases.items()},
                "waiting": {
                    n: {k: why for k, why in w.waiting().items() if "/Job:g" in k}
                    for n, w in app.workers.items()
                },
                "records": [
                    (r.reconciler, r.key, type(r.action).__name__, r.outcome, r.error)
                    for r in await stack.action_records()
                    if any(r.key.endswith(f"/Job:{g}") for g in open_groups)
                ][-12:],
                "placement": {
                    g: placement.decide(
                        placement.view(app.projection, f"{NS}/Job:{g}", app.ctx)
                    ).reason
                    for g in open_groups
                },
                "workload": {
                    g: workload.decide(workload.view(app.projection, f"{NS}/Job:{g}", app.ctx))
                    for g in open_groups
                },
            }
            raise AssertionError(
                f"groups not done: {describe(stack, groups_done())}\n{state}"
            ) from None
        try:
            await stack.wait_for(
                lambda: nodeset_pods() == replicas, timeout=60, what="NodeSet at its replicas"
            )
        except TimeoutError:
            app = stack.app
            assert app is not None
            decision = nodeset.decide(nodeset.view(app.projection, f"{NS}/cs", app.ctx))
            pods = [
                (
                    p["metadata"]["name"],
                    (p.get("status") or {}).get("phase"),
                    bool(p["metadata"].get("deletionTimestamp")),
                    p["spec"].get("nodeName"),
                )
                for p in stack.kube.list("pods", NS)
                if p["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == "cs"
            ]
            slurm = {n: stack.slurm.node(n).state for n in stack.slurm.nodes if n.startswith("cs-")}
            seen = {
                n.key: (n.state, n.reason, n.producer, n.version)
                for n in app.projection.values(SlurmNode)
                if n.key.startswith("cs-")
            }
            recent = [
                (r.outcome, type(r.action).__name__, r.reason or r.error)
                for r in await stack.action_records()
                if r.key == f"{NS}/cs"
            ][-8:]
            # Every observation of the NodeSet's Slurm nodes in the log, and what each
            # poller believes it published last: where the log and Slurm parted.
            history: dict[str, list[Any]] = {}
            for name in slurm:
                subject = subjects.obs_subject(subjects.slurm_source("default"), "SlurmNode", name)
                history[name] = [
                    (ev.op, ev.state, ev.producer, ev.version[:6], ev.observed_at)
                    for raw in await stack.observations(subject)
                    if isinstance(ev := events.decode_event("SlurmNode", raw), SlurmNode)
                ][-6:]
            held = {
                p.name: (p.uid[:8], p.version, p.producer, p.phase, p.deleting)
                for p in app.projection.values(KubePod)
                if p.labels.get("app.kubernetes.io/instance") == "cs"
            }
            for name in held:
                subject = subjects.obs_subject(subjects.KUBE_SOURCE, "KubePod", f"{NS}/{name}")
                history[f"pod {name}"] = [
                    (ev.op, ev.uid[:8], ev.version, ev.producer)
                    for raw in await stack.observations(subject)
                    if isinstance(ev := events.decode_event("KubePod", raw), KubePod)
                ][-8:]
            believed = {
                who: {
                    n: (e[0].op, getattr(e[0], "state", None), e[1])
                    for (kind, n), e in poller.last.items()
                    if kind == "SlurmNode" and n.startswith("cs-")
                }
                for who, poller in (("main", app.poller), ("twin", twin.poller))
                if poller is not None
            }
            raise AssertionError(
                f"NodeSet cs: {nodeset_pods()} pods for {replicas} replicas\n"
                f"decide: {decision.reason} {decision.actions} "
                f"requeue={decision.requeue_after}\npods: {pods}\nSlurm: {slurm}\n"
                f"projection: {seen}\nlast records: {recent}\n"
                f"log: {history}\npollers: {believed}\nheld pods: {held}\n"
                f"stale skipped: {app.projection.stale}\n"
                f"registered: {[n for n in stack.sims.slurmd.registered if n.startswith('cs-')]}\n"
                f"workers: { {n: (w.caught_up, w.idle) for n, w in app.workers.items()} }"
            ) from None

        def live_jobs() -> list[int]:
            return [
                j.job_id
                for j in stack.slurm.jobs_by_id.values()
                if j.partition != "cs" and j.state in ("PENDING", "RUNNING")
            ]

        await stack.wait_for(lambda: not live_jobs(), timeout=60, what="every job of ours ended")
        await stack.settled(timeout=60)
        await twin.stop()

        # --- invariants -------------------------------------------------------------------
        violations = list(checker.violations)
        admin = stack.slurm_node(ADMIN)
        if not admin.has("DRAIN") or admin.reason != ADMIN_REASON:
            violations.append(f"admin drain on {ADMIN} changed: {admin.state} {admin.reason!r}")
        if stack.sims.slurmd.removed_busy:
            violations.append(f"slurmd pods deleted under a job: {stack.sims.slurmd.removed_busy}")
        records = await stack.action_records()
        ok = [r for r in records if r.outcome == "ok"]
        drains = collections.Counter(
            r.action.node for r in ok if isinstance(r.action, DrainSlurmNode) and r.key in NODES
        )
        for node, n in drains.items():
            if n > checker.cordon_episodes[node]:
                violations.append(
                    f"{node} drained {n} times for {checker.cordon_episodes[node]} cordons"
                )
        binds = collections.Counter(r.action.pod.name for r in ok if isinstance(r.action, BindPod))
        violations += [f"pod {p} bound {n} times" for p, n in binds.items() if n > 1]
        # A submit record is "ok" when it made a job or marked the pods of one found by its
        # marker; what must not happen is a second job whose id the bridge was told while its
        # first was live. Jobs whose submit answer chaos lost are the retry's business (the
        # duplicate check below), and a group placement cancelled on purpose (a gang that
        # cannot bind) is submitted again.
        made: dict[str, set[int]] = collections.defaultdict(set)
        for r in ok:
            if isinstance(r.action, SubmitSlurmJob) and (
                m := re.search(r"Slurm job (\d+)", r.error)
            ):
                made[r.key].add(int(m.group(1)))
        resubmits = collections.Counter(
            r.key
            for r in ok
            if r.reconciler == "placement" and isinstance(r.action, CancelSlurmJob)
        )
        for g, ids in made.items():
            told = ids - stack.slurm.chaos_unanswered_jobs
            if len(told) > 1 + resubmits[g]:
                violations.append(f"group {g} submitted {len(told)} times: jobs {sorted(told)}")
        # A submit whose answer is lost (a time-out) may still be carried out by Slurm after
        # the retry submitted again; such a duplicate must not outlive the convergence.
        ours = [j for j in stack.slurm.jobs_by_id.values() if j.partition != "cs"]
        duplicates = sum(n - 1 for n in collections.Counter(j.name for j in ours).values())
        violations += [
            f"job {j.job_id} of {j.name} still {j.state} after convergence"
            for j in ours
            if j.state in ("PENDING", "RUNNING")
        ]
        assert stack.app is not None and stack.app.bus is not None
        obs = (await stack.app.bus.js.stream_info(streams.OBS_STREAM)).state.messages
        print(
            f"\nchaos {time.monotonic() - started:.0f} s: faults "
            f"{dict(faults)} slurmrestd {dict(stack.slurm.chaos_injected)} "
            f"kube {sum(stack.kube.chaos_injected.values())}; {len(groups)} groups, "
            f"{sum(checker.cordon_episodes.values())} cordons; {obs} observations, "
            f"{len(records)} action records ({len(ok)} ok); stale observations not applied "
            f"{stack.app.projection.stale}; duplicate submissions cancelled "
            f"{duplicates}; violations {len(violations)}"
        )
        assert not violations, "\n".join(violations)
        assert (
            faults["nats kill -9"] >= 5 and stack.slurm.chaos_injected and stack.kube.chaos_injected
        )
