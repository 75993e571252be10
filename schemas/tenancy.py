"""The tenancy policy: which Slurm identity each Kubernetes namespace runs as, and what it may
name (settings ``$.tenancy``; rules in :mod:`reconcilers._tenancy`; docs/security.md).

Shared by the settings (:mod:`slurmbridge.config`, which validates it at start-up), the
reconcilers' :class:`reconcilers.base.Context` (placement refuses and stamps jobs with it) and
the admission webhook (which denies early), so all three read one typed value.

A tenant names its namespaces by *name*. Placement decides from the log alone, and the log
holds no Namespace objects, so a namespace label selector could be honoured by the webhook
only, and a pod created past the webhook would then run with no policy: names keep both
checks equal. (A list in the bridge's settings is also a narrower boundary than a label that
anyone allowed to edit Namespaces can set.)

The Slurm identity is numeric (``userId``, ``groupId``): it is what ``job_desc_msg``'s
``user_id`` / ``group_id`` carry and what a pod's ``user-id`` / ``group-id`` annotations (Slinky
slurm-bridge's) are compared with, so no name service is consulted on the bridge's side.
slurmrestd would also take a name and resolve it with *its* host's name service, which may
differ from slurmctld's; measured on Slurm 26.05.5: an unknown name is refused (2166 "Unable
to resolve user ID to user name"), an unknown number is accepted and the job is held
(``JobHeldAdmin``), and a ``user_id`` without ``group_id`` keeps the token user's group (root's
0), so both ids are required. ``userName`` is only shown (Events, ``explain``). uid and gid 0
are refused: a tenant never runs as root.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

#: A POSIX id Slurm accepts for a job (uid_t/gid_t without the NO_VAL sentinels), never 0.
SlurmId = Annotated[
    int, msgspec.Meta(ge=1, le=4294967293, description="an id from 1 to 4294967293 (not root)")
]
#: A Kubernetes namespace name (RFC 1123 DNS label).
NamespaceName = Annotated[
    str,
    msgspec.Meta(
        pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="a namespace name (a DNS label: a-z, 0-9, '-', at most 63)",
    ),
]
#: A name shown in messages and metrics: letters, digits, '-', '_' and '.'.
TenantName = Annotated[
    str,
    msgspec.Meta(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$",
        description="letters, digits, '-', '_' or '.', at most 63",
    ),
]
#: A Slurm object name (account, QOS, partition, reservation): no comma, no space.
SlurmName = Annotated[
    str,
    msgspec.Meta(pattern=r"^[^,\s]+$", description="one Slurm name (no comma, no white space)"),
]


class Tenant(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """One tenant: its namespaces run in Slurm as ``user_id`` / ``group_id``.

    ``accounts``, ``qos``, ``partitions``, ``reservations``: what the namespace's
    ``slurmjob.slinky.slurm.net/<name>`` annotations may name; an empty list means the
    annotation may not be used at all (fail closed). ``default_account`` /
    ``default_partition``: used when no annotation names one (each must be in its list;
    ``""``: Slurm's own default — the user's default account, the default partition, or the
    bridge's ``partition`` setting).
    """

    name: TenantName
    namespaces: tuple[NamespaceName, ...]
    user_id: SlurmId
    group_id: SlurmId
    user_name: str = ""
    accounts: tuple[SlurmName, ...] = ()
    qos: tuple[SlurmName, ...] = ()
    partitions: tuple[SlurmName, ...] = ()
    reservations: tuple[SlurmName, ...] = ()
    default_account: str = ""
    default_partition: str = ""

    @property
    def who(self) -> str:
        """``alice (uid 43001, gid 43001)``, or ``uid 43001, gid 43001`` without a name."""
        ids = f"uid {self.user_id}, gid {self.group_id}"
        return f"{self.user_name} ({ids})" if self.user_name else ids


class Tenancy(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    """``tenants``: at most one per namespace (checked at start-up). A namespace no tenant
    names has no policy: its jobs run as slurmrestd's token user, and its pods may not name a
    ``user-id`` or ``group-id``."""

    tenants: tuple[Tenant, ...] = ()

    def tenant_of(self, namespace: str) -> Tenant | None:
        """The tenant whose ``namespaces`` name ``namespace``, else None."""
        for t in self.tenants:
            if namespace in t.namespaces:
                return t
        return None

    @property
    def namespaces(self) -> frozenset[str]:
        """Every namespace some tenant names."""
        return frozenset(ns for t in self.tenants for ns in t.namespaces)
