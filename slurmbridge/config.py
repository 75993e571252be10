"""The one typed settings object, built once in ``main`` and passed down.

Sources, later wins: defaults < YAML file (``--config``) < ``SLURMBRIDGE_*`` environment
< command-line flags. Nothing else in the project reads ``os.environ``.

The YAML file uses camelCase keys and accepts Slinky slurm-bridge's ``config.yaml`` keys as
they are at the top level (``schedulerName``, ``slurmRestApi``, ``managedNamespaces``,
``managedNamespaceSelector``, ``mcsLabel``, ``partition``), so an existing Slinky config works
unchanged. Environment variables name the path in upper snake case:
``SLURMBRIDGE_NATS_URL``, ``SLURMBRIDGE_SLURM_POLL_INTERVAL`` …, ``SLURMBRIDGE_SCHEDULER_NAME``.

The environment is shared with everything else in the process's world, so it is read more
leniently than the file (whose every key is meant for slurmbridge):

* Kubernetes injects *service links* into every pod — for each Service of the namespace,
  ``<NAME>_SERVICE_HOST``, ``<NAME>_SERVICE_PORT[_<PORT>]``, ``<NAME>_PORT`` and
  ``<NAME>_PORT_<n>_<PROTO>[_PROTO|_PORT|_ADDR]`` (``pkg/kubelet/envvars``). A release named
  ``slurmbridge`` has Services ``slurmbridge-metrics`` and ``slurmbridge-webhook``, so its pods
  get ``SLURMBRIDGE_METRICS_SERVICE_HOST`` … and even ``SLURMBRIDGE_WEBHOOK_PORT=tcp://…:443``,
  which looks like the ``webhook.port`` setting. Those shapes (for ``*_PORT``: a
  ``tcp|udp|sctp://host:port`` value) are never settings and are skipped silently. The chart
  also turns service links off (``enableServiceLinks: false``); other pods may not.
* Any other ``SLURMBRIDGE_*`` variable that names no setting (a test harness's
  ``SLURMBRIDGE_SKIP_REAL_SLURM``, a typo) is ignored with one warning naming it, instead of
  stopping start-up. A variable that names a setting must hold a valid value.

A wrong value stops start-up with :class:`ConfigError`, whose message names the path of the
bad value (``$.slurm.pollInterval``) and the reason.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import msgspec
import msgspec.inspect
import yaml

from schemas import wellknown
from schemas.tenancy import Tenancy
from slurmbridge.kube.labelselector import check_selector
from slurmbridge.paths import path_message

log = logging.getLogger(__name__)

#: The file every pod with a mounted service-account token has (Kubernetes' convention).
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class ConfigError(ValueError):
    """Invalid configuration; the message names the path of the bad value and the reason."""


#: Range and pattern rules of the settings, checked when the config is decoded (a bad value
#: stops start-up with its path, e.g. ``$.slurm.pollInterval: Expected `float` > 0``).
Seconds = Annotated[float, msgspec.Meta(gt=0, description="seconds, > 0")]
SecondsOrZero = Annotated[float, msgspec.Meta(ge=0, description="seconds, >= 0")]
#: Whole seconds (Kubernetes' DeleteOptions.gracePeriodSeconds is an integer).
WholeSecondsOrZero = Annotated[int, msgspec.Meta(ge=0, description="whole seconds, >= 0")]
AtLeastOne = Annotated[int, msgspec.Meta(ge=1)]
Port = Annotated[int, msgspec.Meta(ge=0, le=65535, description="a TCP port (0: none)")]
#: A subject token (the cluster name is one): letters, digits, '-' and '_'.
Token = Annotated[
    str,
    msgspec.Meta(
        pattern=r"^[A-Za-z0-9_-]+$",
        description="letters, digits, '-' or '_' (it is a subject token)",
    ),
]
ApiVersion = Annotated[
    str, msgspec.Meta(pattern=r"^v0\.0\.\d+$", description="an API version like v0.0.44")
]


class _Base(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    pass


class NatsSettings(_Base):
    """NATS connection. ``url`` None ⇒ embedded: start nats-server from the wheel on loopback.

    ``replicas``: stream replicas — 1 locally, 3 on a production NATS cluster.
    ``store_dir``: JetStream store of the embedded server (None ⇒ a temporary directory,
    removed at exit).
    ``connect_timeout``: seconds within which a command's first connection must succeed
    (attempts are repeated meanwhile, so a NATS starting alongside is waited for); then the
    command stops with exit status 2 and says so, instead of hanging on a wrong URL. 10 s:
    longer than a local nats-server takes to start, short enough for a person to wait. Once
    connected, lost connections are re-established forever (a NATS restart is survived).
    ``ack_timeout``: seconds a watch event's publish may wait for the stream's
    acknowledgement before it counts as lost and the watcher re-lists and republishes (a
    server that died with the message unread never answers, and a publish's future has no
    deadline of its own: ``runtime.bus.AckedPublisher``). 5 s: nats-py's own request
    timeout; a replicated stream electing a leader may take longer, which costs one
    deduplicated relist, never a lost observation.
    ``embedded_restarts``: how many times in a row ``run`` starts its embedded nats-server
    again on the same store after it exited on its own (killed, crashed), 0.5 s doubling to
    8 s apart; then ``run`` exits with status 1 so whatever supervises it restarts the whole
    process. 5: about 15 s of attempts — a server that cannot start for that long on its own
    store will not by waiting longer.
    """

    url: str | None = None
    user: str | None = None
    password: str | None = None
    token: str | None = None
    creds_file: str | None = None
    nkey_seed_file: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    replicas: int = 1
    store_dir: str | None = None
    connect_timeout: Seconds = 10.0
    ack_timeout: Seconds = 5.0
    embedded_restarts: Annotated[int, msgspec.Meta(ge=0, description="restarts, >= 0")] = 5
    # Observation history per object: enough to explain recent changes, while the
    # projection itself only needs the last message of each subject.
    obs_max_msgs_per_subject: int = 32
    obs_max_age: float = 7 * 86_400.0
    act_max_age: float = 30 * 86_400.0


class KubeSettings(_Base):
    """Kubernetes API access. No kubeconfig and not in a pod ⇒ the built-in simulator (demo).

    ``watch_timeout``: server-side watch timeout (seconds); the watch is re-opened from the
    last resourceVersion afterwards. Kept under the API server's default (~30 min) and long
    against the bookmark period (~1 min), so quiet clusters still advance resourceVersion.
    ``watch_pods``: watch the pods with our schedulerName (placement, workload).
    ``watch_workloads``: watch Jobs, JobSets, LeaderWorkerSets, PodGroups and the Kubernetes
    Workload API's PodGroups and Workloads (their ``slurmjob.slinky.slurm.net/*`` annotations
    configure the pods' Slurm job).
    ``watch_node_sets``: watch Slinky NodeSets and their slurmd pods (the ``nodeset``
    reconciler).
    ``watch_clusters``: watch Slinky Clusters (the ``cluster`` reconciler; a poller and a
    Slurm client per served Cluster).
    ``watch_scalers``: watch HorizontalPodAutoscalers and KEDA ScaledObjects (the
    ``autoscale`` reconciler leaves the NodeSets they target alone).
    ``watch_dra``: watch DRA ResourceSlices and ResourceClaims (``resource.k8s.io/v1``,
    Kubernetes 1.34+): placement allocates the claims of pods asking for DRA devices from
    their Slurm job's GPUs and cores.
    ``watch_node_usage``: watch every pod bound to a node, whoever scheduled it, and publish
    what they request per node (``KubeNodeUsage``), so ``placement`` keeps our pods off nodes
    whose allocatable they no longer fit; only while ``watch_pods`` is on (see
    :attr:`node_usage`).
    ``namespace``: the namespace slurmbridge runs in (the Helm chart sets its release's). It
    does not place Events: an Event goes to its object's namespace, and one about a Node to
    ``default``, as client-go's recorder puts it, since the API server refuses it anywhere
    else (422; kubernetes pkg/apis/core/validation/events.go).
    ``stuck_pod_grace``: seconds a pod may stay Terminating past its grace period on a node
    whose kubelet does not answer before slurmbridge removes its finalizer (slurm-bridge #49).
    ``preemption_grace``: seconds a pod whose Slurm job was preempted gets to stop (its
    deletion's ``gracePeriodSeconds``: SIGTERM, then SIGKILL after this long). 30 s, the
    grace CoreWeave SUNK gives the pods of preempted jobs and Kubernetes' default
    ``terminationGracePeriodSeconds``: enough to checkpoint or flush, short enough that the
    preempting job, which already holds the nodes in Slurm, is not kept waiting long.
    ``lost_job_grace``: seconds Slurm gets to start the job that re-backs running pods whose
    job it lost (slurmctld restarted from older state): a new placeholder job asking for
    exactly the pods' nodes; only if it has not started this long after its submit are the
    pods deleted, as Slinky deletes pods whose job is not running. 60 s: several scheduler
    passes of slurmctld (its main scheduler runs at least every minute, and at once on a
    submit) and a few polls, while a node Slurm already calls IDLE is not left unreserved
    for long; ``0`` deletes as soon as the re-back job is seen not running.
    """

    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    watch_timeout: int = 300
    node_label_selector: str = ""
    namespace: str = "default"
    watch_pods: bool = True
    watch_workloads: bool = True
    watch_node_sets: bool = True
    watch_clusters: bool = True
    watch_scalers: bool = True
    watch_dra: bool = True
    stuck_pod_grace: float = 300.0
    preemption_grace: WholeSecondsOrZero = 30
    watch_node_usage: bool = True
    lost_job_grace: SecondsOrZero = 60.0

    @property
    def node_usage(self) -> bool:
        """Whether the per-node usage watcher runs: ``watch_node_usage`` and ``watch_pods``
        (only ``placement`` reads it)."""
        return self.watch_node_usage and self.watch_pods


class SlurmSettings(_Base):
    """One Slurm cluster reached through slurmrestd.

    ``poll_interval`` seconds between polls (Slinky re-lists every 30 s; 2 s keeps drains
    prompt at ≈ 3 ms per GET /nodes). ``api_version`` None ⇒ the highest the server offers.
    ``token_file`` is re-read on every request, so rotating it needs no restart.
    ``job_relist_interval``: seconds between full job listings; the polls in between read only
    job ids and states (``GET jobs/state``, v0.0.42+) and fetch the jobs whose state changed,
    so a change that leaves a job's state alone (a pending job's partition or name) shows
    within this interval (Slinky's job re-list anchor: 30 s). 0 ⇒ a full listing every poll.
    """

    url: str | None = None
    cluster: Token = "default"
    token_file: str | None = None
    user_name: str | None = None
    api_version: ApiVersion | None = None
    poll_interval: Seconds = 2.0
    pending_job_poll_interval: float = 0.02
    job_relist_interval: SecondsOrZero = 30.0
    timeout: Seconds = 10.0


class WorkerSettings(_Base):
    """Reconciler runtime.

    ``concurrency``: reconciles in flight per reconciler (distinct keys only).
    ``max_deliver``: deliveries of one trigger before it goes to the dead-letter stream.
    ``ack_wait``: seconds before JetStream redelivers an unacknowledged trigger (a worker
    that died; one that stops hands its triggers back at once); a trigger held longer —
    queued behind a busy key, or in a long effect — is told to JetStream as in progress
    every third of it.
    ``fetch_batch``: messages pulled per fetch (bounded by ``max_ack_pending``).
    ``partitions``: split each reconciler's keys into this many partitions (CRC-32 of the key
    modulo N), each with its own durable consumer and lease, so N replicas share the work and
    no key is ever handled in two places. ``partition_indices``: the partitions this process
    competes for (empty: all of them).
    ``intent_timeout``: seconds the worker waits for the stream to store an action's
    write-ahead ``intended`` record before it performs nothing and tries the key again with
    back-off (5 s: nats-py's request timeout; a nats-server whose store cannot be written,
    e.g. ENOSPC, answers no publish at all).
    """

    concurrency: AtLeastOne = 32
    max_deliver: Annotated[int, msgspec.Meta(ge=2)] = 20
    ack_wait: Seconds = 30.0
    fetch_batch: AtLeastOne = 256
    max_ack_pending: int = 10_000
    trigger_wait: float = 10.0
    intent_timeout: Seconds = 5.0
    partitions: AtLeastOne = 1
    partition_indices: list[int] = []


class LeaseSettings(_Base):
    """Leases in the JetStream KV bucket ``bridge-leases`` (:mod:`slurmbridge.runtime.leases`).

    ``enabled``: every poller, the watcher set and each reconciler (partition) is active in
    one process at a time — run as many replicas as you like. ``ttl``: seconds within which
    a dead holder is replaced (its renewals stop; a clean stop hands over at once).
    """

    enabled: bool = True
    ttl: Annotated[float, msgspec.Meta(ge=1.5)] = 10.0


class ObservabilitySettings(_Base):
    """Metrics on ``metrics_port`` (/metrics), health on ``health_port`` (/healthz, /readyz).

    Port 0 disables the endpoint. ``log_format``: ``json`` (production) or ``text``.
    """

    metrics_port: Port = 8080
    health_port: Port = 8081
    bind: str = "0.0.0.0"
    log_level: str = "INFO"
    log_format: Literal["json", "text"] = "json"


class WebhookSettings(_Base):
    """The admission webhook (``run --only webhook``).

    HTTPS only, on ``bind:port`` (9443: the port Slinky's and most webhooks use; the API
    server reaches it through a Service). ``cert_file`` / ``key_file``: PEM certificate (with
    its chain) and key, both or neither; re-read when their files change (cert-manager
    rotation). ``service_account``: the username of slurmbridge's own requests, which may
    change the job-id label and node annotation of bound or running pods.
    """

    bind: str = "0.0.0.0"
    port: Port = 9443
    cert_file: str | None = None
    key_file: str | None = None
    service_account: str = "system:serviceaccount:slurmbridge:slurmbridge"


class Settings(_Base):
    """All settings. Top-level keys are Slinky slurm-bridge's ``config.yaml`` keys.

    ``runtime_dir``: where ``run`` and ``demo`` leave a file naming their NATS while they run,
    so ``tail``, ``explain``, ``replay`` and ``streams`` find it without ``--nats-url`` (None ⇒
    ``$XDG_RUNTIME_DIR/slurmbridge``, else ``<temp dir>/slurmbridge-<uid>``).
    ``propagated_node_conditions``: Kubernetes node condition types whose True conditions
    become the drain reason of a cordoned node's slurmd pods (slurm-operator's Helm value
    ``propagatedNodeConditions``; empty: its default reason).
    ``managed_namespaces``: the namespaces the bridge serves (Slinky's key): the webhook gives
    their pods our scheduler, and placement leaves a pod with our schedulerName in any other
    namespace alone, with a Warning Event. Empty, with no tenant and no
    ``managed_namespace_selector``: every namespace. A tenant's namespaces are served too.
    ``tenancy``: the Slurm identity and the allowed accounts, QOS, partitions and
    reservations of each tenant's namespaces (:mod:`schemas.tenancy`, docs/security.md).
    """

    scheduler_name: str = wellknown.DEFAULT_SCHEDULER_NAME
    slurm_rest_api: str | None = None
    managed_namespaces: list[str] = []
    managed_namespace_selector: dict[str, Any] | None = None
    mcs_label: str | None = None
    partition: str | None = None
    nats: NatsSettings = msgspec.field(default_factory=NatsSettings)
    kube: KubeSettings = msgspec.field(default_factory=KubeSettings)
    slurm: SlurmSettings = msgspec.field(default_factory=SlurmSettings)
    worker: WorkerSettings = msgspec.field(default_factory=WorkerSettings)
    observability: ObservabilitySettings = msgspec.field(default_factory=ObservabilitySettings)
    webhook: WebhookSettings = msgspec.field(default_factory=WebhookSettings)
    leases: LeaseSettings = msgspec.field(default_factory=LeaseSettings)
    instance_id: str = ""
    runtime_dir: str | None = None
    propagated_node_conditions: list[str] = []
    tenancy: Tenancy = msgspec.field(default_factory=Tenancy)

    @property
    def slurm_url(self) -> str | None:
        """slurmrestd URL: ``slurm.url``, else Slinky's ``slurmRestApi``."""
        return self.slurm.url or self.slurm_rest_api


_SECTIONS = ("nats", "kube", "slurm", "worker", "observability", "webhook", "leases")
_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")


def _camel(snake: str) -> str:
    head, *rest = snake.lower().split("_")
    return head + "".join(p.capitalize() for p in rest)


_PREFIX = "SLURMBRIDGE_"
#: Service-link names (pkg/kubelet/envvars: FromServices, makeLinkVariables) of any Service
#: whose name starts with "slurmbridge": never settings.
_LINK_NAME = re.compile(
    r"^SLURMBRIDGE(?:_[A-Z0-9_]+)?_(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?"
    r"|PORT_\d+_(?:TCP|UDP|SCTP)(?:_PROTO|_PORT|_ADDR)?)$"
)
#: The value of ``<NAME>_PORT``: the first port as Docker links spelled it.
_LINK_URL = re.compile(r"^(?:tcp|udp|sctp)://(?:\[[0-9A-Fa-f:.]+\]|[0-9.]+):\d+$")


def service_link(name: str, value: str) -> bool:
    """True for an environment variable Kubernetes injects for a Service (a service link),
    which is never a setting even where its name looks like one (``SLURMBRIDGE_WEBHOOK_PORT``
    = ``tcp://10.96.0.12:443`` for a Service ``slurmbridge-webhook``)."""
    return bool(_LINK_NAME.match(name)) or (name.endswith("_PORT") and bool(_LINK_URL.match(value)))


def _fields(cls: type[msgspec.Struct]) -> frozenset[str]:
    return frozenset(f.encode_name for f in msgspec.structs.fields(cls))


_KNOWN: dict[str | None, frozenset[str]] = {
    None: _fields(Settings),
    **{
        f.encode_name: _fields(f.type)
        for f in msgspec.structs.fields(Settings)
        if isinstance(f.type, type) and issubclass(f.type, msgspec.Struct)
    },
}


def _env_overlay(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ignored: list[str] = []
    for name, value in sorted(env.items()):
        if not name.startswith(_PREFIX) or service_link(name, value):
            continue
        rest = name[len(_PREFIX) :].lower()
        section = next((s for s in _SECTIONS if rest.startswith(s + "_")), None)
        if _camel(rest) in _KNOWN[None]:
            section = None  # SLURMBRIDGE_SLURM_REST_API: Slinky's slurmRestApi, not slurm.restApi
        key = _camel(rest if section is None else rest[len(section) + 1 :])
        if key not in _KNOWN[section]:
            ignored.append(name)
        elif section is None:
            out[key] = _env_value(rest, value)
        else:
            out.setdefault(section, {})[key] = value
    if ignored:
        log.warning(
            "ignoring environment variable(s) that name no setting: %s (settings are "
            "SLURMBRIDGE_<SECTION>_<FIELD> or SLURMBRIDGE_<KEY>, e.g. SLURMBRIDGE_NATS_URL)",
            ", ".join(ignored),
        )
    return out


def _env_value(key: str, value: str) -> Any:
    if key == "managed_namespaces":
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


def _rule_of(path: str) -> str:
    """The description of the rule of the setting at ``$.a.b`` (its ``msgspec.Meta``), ``""``
    when it has none."""
    node: Any = msgspec.inspect.type_info(Settings)
    for name in path.removeprefix("$.").split("."):
        if not isinstance(node, msgspec.inspect.StructType):
            return ""
        field = next((f for f in node.fields if f.encode_name == name), None)
        if field is None:
            return ""
        node = field.type
        if isinstance(node, msgspec.inspect.UnionType):
            node = next(t for t in node.types if not isinstance(t, msgspec.inspect.NoneType))
    if isinstance(node, msgspec.inspect.Metadata):
        return str((node.extra_json_schema or {}).get("description", ""))
    return ""


def _explained(message: str) -> str:
    """A decoding error in words: a pattern's regex is replaced by what the rule means."""
    path, _, why = message.partition(": ")
    rule = _rule_of(path)
    if rule and "matching regex" in why:
        return f"{path}: must be {rule}"
    return f"{message} ({rule})" if rule else message


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping):
            out[k] = _merge(out[k] if isinstance(out.get(k), dict) else {}, v)
        elif v is not None:
            out[k] = v
    return out


def _validate(s: Settings) -> None:
    def bad(path: str, why: str) -> ConfigError:
        return ConfigError(f"$.{path}: {why}")

    if not s.scheduler_name:
        raise bad("schedulerName", "must not be empty")
    if s.slurm.token_file is not None and not Path(s.slurm.token_file).is_file():
        raise bad("slurm.tokenFile", f"no such file: {s.slurm.token_file}")
    if s.kube.kubeconfig is not None and not Path(s.kube.kubeconfig).is_file():
        raise bad("kube.kubeconfig", f"no such file: {s.kube.kubeconfig}")
    for path, url in (("slurm.url", s.slurm.url), ("slurmRestApi", s.slurm_rest_api)):
        if url is not None and not _http_url(url):
            raise bad(path, f"{redact_url(url)!r} is not an http:// or https:// URL with a host")
    if s.nats.url is not None:
        for part in s.nats.url.split(","):
            if not _nats_url(part.strip()):
                raise bad(
                    "nats.url",
                    f"{redact_url(part.strip())!r} is not a NATS URL (nats://, tls://, ws:// or "
                    "wss:// with a host; several comma-separated)",
                )
    if s.observability.log_level.upper() not in LOG_LEVELS:
        raise bad("observability.logLevel", f"must be one of {', '.join(LOG_LEVELS)}")
    if s.nats.replicas not in (1, 3, 5):
        raise bad("nats.replicas", "must be 1, 3 or 5")
    for name in ("creds_file", "nkey_seed_file", "tls_ca", "tls_cert", "tls_key"):
        value = getattr(s.nats, name)
        if value is not None and not Path(value).is_file():
            raise bad(f"nats.{_camel(name)}", f"no such file: {value}")
    for i, index in enumerate(s.worker.partition_indices):
        if not 0 <= index < s.worker.partitions:
            raise bad(f"worker.partitionIndices[{i}]", f"must be in 0…{s.worker.partitions - 1}")
    for name in ("cert_file", "key_file"):
        value = getattr(s.webhook, name)
        if value is not None and not Path(value).is_file():
            raise bad(f"webhook.{_camel(name)}", f"no such file: {value}")
    if (s.webhook.cert_file is None) != (s.webhook.key_file is None):
        missing = "keyFile" if s.webhook.key_file is None else "certFile"
        raise bad(f"webhook.{missing}", "set certFile and keyFile together")
    if s.managed_namespace_selector is not None:
        try:
            check_selector(s.managed_namespace_selector, "managedNamespaceSelector")
        except ValueError as exc:
            raise ConfigError(f"$.{exc}") from None
    _validate_tenancy(s.tenancy)


def _validate_tenancy(tenancy: Tenancy) -> None:
    """What the types cannot say: one tenant per namespace, unique tenant names, a tenant
    with a namespace, and defaults that are in their tenant's lists.

    Raises:
        ConfigError: naming the path, e.g. ``$.tenancy.tenants[1].namespaces[0]``.
    """
    owner: dict[str, str] = {}
    names: set[str] = set()
    for i, t in enumerate(tenancy.tenants):
        at = f"$.tenancy.tenants[{i}]"
        if t.name in names:
            raise ConfigError(f"{at}.name: tenant {t.name!r} is named twice")
        names.add(t.name)
        if not t.namespaces:
            raise ConfigError(f"{at}.namespaces: a tenant needs at least one namespace")
        for j, ns in enumerate(t.namespaces):
            if ns in owner:
                raise ConfigError(
                    f"{at}.namespaces[{j}]: namespace {ns!r} already belongs to tenant "
                    f"{owner[ns]!r} (one tenant per namespace)"
                )
            owner[ns] = t.name
        for key, default, allowed in (
            ("defaultAccount", t.default_account, t.accounts),
            ("defaultPartition", t.default_partition, t.partitions),
        ):
            if default and default not in allowed:
                listed = "accounts" if key == "defaultAccount" else "partitions"
                raise ConfigError(f"{at}.{key}: {default!r} is not in {listed}")


def _http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _nats_url(url: str) -> bool:
    if "://" not in url:
        url = "nats://" + url  # as nats-py reads host:port
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return False
    return parts.scheme in ("nats", "tls", "ws", "wss") and bool(parts.hostname)


def redact_url(url: str) -> str:
    """``url`` (one URL or a comma-separated list; with or without a scheme) with the
    credentials of each replaced: ``nats://user:pass@host:4222`` → ``nats://user:***@host:4222``,
    ``nats://TOKEN@host`` → ``nats://***@host`` (a user name alone may be a token, as in
    nats-py and the NATS URL convention). Text without ``@`` is returned unchanged; it never
    raises, so it can redact a malformed URL in the error that names it.

    The one redaction of the project: every log line, error, banner and command output that
    shows a NATS or slurmrestd URL passes it through here (docs/security.md).
    """
    return ",".join(_redact_one(part) for part in url.split(","))


def _redact_one(part: str) -> str:
    scheme, sep, rest = part.partition("://")
    if not sep:
        scheme, rest = "", part
    userinfo, at, host = rest.rpartition("@")
    if not at:
        return part
    user, colon, _ = userinfo.partition(":")
    shown = f"{user}:***" if colon and user else "***"
    return f"{scheme}{sep}{shown}@{host}"


def in_pod(env: Mapping[str, str] | None = None, token: Path = SERVICE_ACCOUNT_TOKEN) -> bool:
    """True when this process runs in a Kubernetes pod: the API server's address is in the
    environment (``KUBERNETES_SERVICE_HOST``, set in every pod) or a service-account token is
    mounted. ``slurmbridge run`` never falls back to its simulators there."""
    env = os.environ if env is None else env
    return bool(env.get("KUBERNETES_SERVICE_HOST")) or token.is_file()


def default_runtime_dir(env: Mapping[str, str] | None = None) -> str:
    """``$XDG_RUNTIME_DIR/slurmbridge``, else ``<temp dir>/slurmbridge-<uid>``."""
    env = os.environ if env is None else env
    if env.get("XDG_RUNTIME_DIR"):
        return str(Path(env["XDG_RUNTIME_DIR"]) / "slurmbridge")
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return str(Path(tempfile.gettempdir()) / f"slurmbridge-{uid}")


def _from_file(message: str, file_data: Mapping[str, Any]) -> bool:
    """Whether the setting a ``$.a.b: …`` message names was written in the file (so the
    message should name the file too); False for one from the environment or a flag."""
    m = re.match(r"\$((?:\.[A-Za-z0-9_]+)+)", message)
    if not m:
        return False
    node: Any = file_data
    for key in m.group(1).split(".")[1:]:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: where in the file (1-based line and column) and what PyYAML found there
    (its own message names ``<unicode string>`` rather than the file, and spans lines)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = exc.problem or "invalid"
        context = f" ({exc.context})" if exc.context else ""
        return f"{where}not valid YAML: {what}{context}"
    return "not valid YAML: " + " ".join(str(exc).split())


def load(
    *,
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings: defaults < YAML ``path`` < ``env`` < ``overrides`` (flags).

    ``overrides`` uses the YAML shape (camelCase, nested sections); None values are ignored
    so unset flags do not clear lower layers. ``env`` defaults to ``os.environ``.

    Raises:
        ConfigError: unreadable file, bad YAML, unknown key or invalid value — the message
            names the path (``$.slurm.pollInterval``) and the reason.
    """
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except OSError as exc:
            raise ConfigError(f"config file {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path}: {_yaml_problem(exc)}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path}: $: expected a mapping at the top level")
        data = loaded
    file_data = data
    environ = os.environ if env is None else env
    data = _merge(data, _env_overlay(environ))
    if overrides:
        data = _merge(data, overrides)
    try:
        try:
            settings = msgspec.convert(data, Settings, strict=False)
        except msgspec.ValidationError as exc:
            raise ConfigError(_explained(path_message(str(exc)))) from exc
        _validate(settings)
    except ConfigError as exc:
        if path is not None and _from_file(str(exc), file_data):
            raise ConfigError(f"config file {path}: {exc}") from exc
        raise
    if not settings.instance_id:
        settings.instance_id = f"{socket.gethostname()}-{os.getpid()}"
    if not settings.runtime_dir:
        settings.runtime_dir = default_runtime_dir(environ)
    return settings
