"""Long-running commands: ``run``, ``sim kube|slurmrestd`` and ``streams``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Iterable

from schemas import streams
from slurmbridge import bus as busmod
from slurmbridge import leases
from slurmbridge.app import App, UsageError
from slurmbridge.config import Settings

log = logging.getLogger("slurmbridge")


async def run(settings: Settings, only: Iterable[str] | None, stop: asyncio.Event) -> int:
    """``slurmbridge run``: start the components and run until ``stop`` is set.

    With neither a Kubernetes nor a Slurm endpoint configured, the built-in simulators stand in
    for both (the embedded default); configuring only one of them is an error.
    """
    from slurmbridge.testing import Simulators

    has_kube = bool(settings.kube.kubeconfig or settings.kube.in_cluster)
    has_slurm = bool(settings.slurm_url)
    sims: Simulators | None = None
    webhook_only = only is not None and set(only) == {"webhook"}
    if webhook_only:
        pass  # the webhook needs no Slurm, and Kubernetes only for a namespace selector
    elif not has_kube and not has_slurm:
        sims = Simulators(nodes=4, api_version=None)
        await sims.start()
        settings.kube.kubeconfig = str(sims.kubeconfig)
        settings.slurm.url = sims.slurm.url
        settings.slurm.token_file = str(sims.token_file)
        settings.slurm.user_name = "slurmrest"
        log.warning(
            "no Kubernetes or Slurm endpoint configured: using the built-in simulators "
            "(Kubernetes %s, slurmrestd %s)",
            sims.kube.url,
            sims.slurm.url,
        )
    elif not has_kube:
        print(
            "slurmbridge run: $.kube.kubeconfig (--kubeconfig) or $.kube.inCluster (--in-cluster) "
            "is required when a Slurm URL is configured",
            file=sys.stderr,
        )
        return 2
    elif not has_slurm:
        print(
            "slurmbridge run: $.slurm.url (--slurm-url, or slurmRestApi) is required when a "
            "Kubernetes cluster is configured",
            file=sys.stderr,
        )
        return 2
    app = App(settings, only=only)
    try:
        await app.start()
    except (UsageError, busmod.StreamAdminError) as exc:
        print(f"slurmbridge run: {exc}", file=sys.stderr)
        await app.stop()
        return 2
    nats = app.nats_url if app.bus is not None else "not used"  # the webhook alone needs none
    log.info("slurmbridge running: %s (NATS %s)", ", ".join(app.components), nats)
    try:
        await stop.wait()
    finally:
        log.info("stopping")
        await app.stop()
        if sims is not None:
            await sims.stop()
    return 0


async def run_sim(args: argparse.Namespace, stop: asyncio.Event) -> int:
    """``slurmbridge sim kube|slurmrestd``: one simulator until ``stop``."""
    if args.sim == "kube":
        from slurmbridge.sim import kube

        task = asyncio.create_task(
            kube.serve(args.host, args.port, nodes=args.nodes, kubeconfig=args.kubeconfig_out)
        )
        print(
            f"Kubernetes API simulator on http://{args.host}:{args.port}"
            + (f"; kubeconfig {args.kubeconfig_out}" if args.kubeconfig_out else ""),
            flush=True,
        )
    else:
        from slurmbridge.sim import slurmrestd

        task = asyncio.create_task(
            slurmrestd.serve(
                args.host,
                args.port,
                api_versions=args.api_version,
                token_file=args.token_file,
                seed_path=args.seed,
                nodes=args.nodes,
            )
        )
        print(
            f"slurmrestd simulator on http://{args.host}:{args.port}"
            + (f"; token in {args.token_file}" if args.token_file else ""),
            flush=True,
        )
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if task in done and task.exception() is not None:
        print(f"slurmbridge sim {args.sim}: {task.exception()}", file=sys.stderr)
        return 1
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return 0


async def streams_cmd(settings: Settings) -> int:
    """``slurmbridge streams``: create/update the streams and the lease bucket, and print
    their state (the one command that needs stream-administration rights, docs/security.md)."""
    if not settings.nats.url:
        print(
            "slurmbridge streams: --nats-url (or SLURMBRIDGE_NATS_URL) is required", file=sys.stderr
        )
        return 2
    bus = await busmod.connect(settings.nats, settings.nats.url, name="slurmbridge streams")
    try:
        return await _streams(bus, settings)
    except busmod.StreamAdminError as exc:
        print(f"slurmbridge streams: {exc}", file=sys.stderr)
        return 1
    finally:
        await bus.close()


async def _streams(bus: busmod.Bus, settings: Settings) -> int:
    """Create/update the streams and the bucket, then print their state."""
    specs = streams.stream_specs(
        replicas=settings.nats.replicas,
        obs_max_msgs_per_subject=settings.nats.obs_max_msgs_per_subject,
        obs_max_age_s=settings.nats.obs_max_age,
        act_max_age_s=settings.nats.act_max_age,
    )
    await bus.ensure_streams(specs)
    kv = await leases.open_bucket(bus.js, replicas=settings.nats.replicas)
    for spec in specs:
        info = await bus.js.stream_info(spec.name)
        st = info.state
        print(
            f"{spec.name:<11} subjects={','.join(spec.subjects):<14} "
            f"messages={st.messages:<8} bytes={st.bytes:<10} first_seq={st.first_seq} "
            f"last_seq={st.last_seq} consumers={st.consumer_count} replicas={spec.replicas}"
        )
        for ci in await bus.js.consumers_info(spec.name):
            print(
                f"  consumer {ci.name:<22} pending={ci.num_pending:<6} "
                f"ack_pending={ci.num_ack_pending:<6} redelivered={ci.num_redelivered}"
            )
    status = await kv.status()
    print(f"{'KV ' + leases.BUCKET:<11} values={status.values} history={status.history}")
    return 0
