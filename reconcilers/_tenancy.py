"""Tenancy rules (pure): a namespace's jobs run as the Slurm identity its tenant was given,
and name only the accounts, QOS, partitions and reservations it allows (docs/security.md).

Callers: ``placement`` (:func:`check` before a submit, :func:`apply` on the job; a denial
becomes ``PodScheduled=False``, reason ``SlurmPolicyDenied``, and a Warning Event), the
admission webhook (:func:`check` on a pod's own annotations, 403 naming the annotation) and
``explain`` (:func:`describe`). The policy itself is :class:`schemas.tenancy.Tenancy`.

Rules, for the annotations ``slurmjob.slinky.slurm.net/<name>`` of a pod group's root:

* namespace with a tenant: ``user-id`` / ``group-id`` may only repeat the tenant's ids;
  ``account``, ``qos``, ``partition``, ``reservation`` may only name entries of the tenant's
  lists (a comma-separated value: every entry — Slurm takes lists for ``qos``, ``partition``
  and ``reservation``); the job is submitted as the tenant's ``user_id`` / ``group_id``, with
  its default account and partition when no annotation names one;
* namespace without a tenant: ``user-id`` and ``group-id`` are refused (the job runs as
  slurmrestd's token user, and choosing another identity is exactly what a policy must
  grant); the other annotations are Slurm's to judge, as before.

Why the bridge checks at all when Slurm enforces associations, ``AllowAccounts`` and
reservation ``Users=`` for the submitted user: the submit uses a privileged token (it must,
to submit for another user), and on a cluster without accounting (no slurmdbd) Slurm 26.05.5
enforces neither accounts nor QOS (measured: an ``account`` outside a partition's
``AllowAccounts`` and an unknown ``qos`` ran); it does enforce reservation ``Users=`` (2052).

A name matches exactly (Slurm lowercases account names, so list them in lower case).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from schemas import wellknown
from schemas.actions import SlurmJobSpec
from schemas.events import KubePod
from schemas.tenancy import Tenancy, Tenant

PREFIX: Final = wellknown.ANNOTATION_SLURMJOB_PREFIX
DENIED: Final = wellknown.REASON_SLURM_POLICY_DENIED
#: The annotations the policy governs, in the order they are checked (also the ``rule``
#: label values of the denial metric, with :data:`RULE_NAMESPACE`).
RULES: Final = ("user-id", "group-id", "account", "qos", "partition", "reservation")
#: The rule of a pod left alone because its namespace is not served.
RULE_NAMESPACE: Final = "namespace"
#: The labels of a NodeSet's slurmd pod (slurm-operator: ``app.kubernetes.io/name: slurmd``),
#: and the kind of its controller.
_LABEL_NAME: Final = "app.kubernetes.io/name"
_SLURMD: Final = "slurmd"
_NODESET: Final = "NodeSet"


class Denial(msgspec.Struct, frozen=True, kw_only=True):
    """Why a group may not become a job: ``rule`` (one of :data:`RULES`), ``field``
    (``metadata.annotations[slurmjob.slinky.slurm.net/<rule>]``), ``policy`` (the tenant's
    name, ``""`` without one) and the whole ``message`` (starts with ``field``)."""

    rule: str
    field: str
    policy: str
    message: str


def field_of(rule: str) -> str:
    """``metadata.annotations[slurmjob.slinky.slurm.net/<rule>]``."""
    return f"metadata.annotations[{PREFIX}{rule}]"


def rule_of(message: str) -> str:
    """The rule a denial ``message`` (from :func:`check`) is about, ``"other"`` when it names
    none: the label of the denial metric, read back from a condition or Event message."""
    for rule in RULES:
        if message.startswith(field_of(rule)):
            return rule
    return RULE_NAMESPACE if message.startswith("namespace ") else "other"


def _values(raw: str) -> list[str]:
    return [v.strip() for v in raw.split(",") if v.strip()] or [raw.strip()]


def _allowed(tenant: Tenant, rule: str) -> tuple[str, ...]:
    return {
        "account": tenant.accounts,
        "qos": tenant.qos,
        "partition": tenant.partitions,
        "reservation": tenant.reservations,
    }[rule]


def _id_of(tenant: Tenant, rule: str) -> int:
    return tenant.user_id if rule == "user-id" else tenant.group_id


def check(tenancy: Tenancy, namespace: str, annotations: Mapping[str, str]) -> Denial | None:
    """The first rule (module docstring; order :data:`RULES`) the ``annotations`` of a group
    in ``namespace`` break, or None when they keep them all."""
    tenant = tenancy.tenant_of(namespace)
    for rule in RULES:
        raw = annotations.get(PREFIX + rule)
        if raw is None:
            continue
        field = field_of(rule)
        if tenant is None:
            if rule in ("user-id", "group-id"):
                return Denial(
                    rule=rule,
                    field=field,
                    policy="",
                    message=f"{field}: namespace {namespace} has no tenancy policy "
                    "($.tenancy.tenants): its jobs run as slurmrestd's user and may not choose "
                    f"another Slurm {'user' if rule == 'user-id' else 'group'}",
                )
            continue
        where = f"namespace {namespace} (tenancy policy {tenant.name!r})"
        if rule in ("user-id", "group-id"):
            want = _id_of(tenant, rule)
            if raw.strip() != str(want):
                what = "user" if rule == "user-id" else "group"
                return Denial(
                    rule=rule,
                    field=field,
                    policy=tenant.name,
                    message=f"{field}: {raw.strip()!r} is not allowed: {where} runs as "
                    f"{tenant.who}; the {what} id may only be {want}",
                )
            continue
        allowed = _allowed(tenant, rule)
        bad = [v for v in _values(raw) if v not in allowed]
        if bad:
            may = ", ".join(allowed) if allowed else "none (the annotation may not be used)"
            return Denial(
                rule=rule,
                field=field,
                policy=tenant.name,
                message=f"{field}: {bad[0]!r} is not allowed for {where}; allowed: {may}",
            )
    return None


def apply(tenancy: Tenancy, namespace: str, spec: SlurmJobSpec) -> SlurmJobSpec:
    """``spec`` (translated from annotations that passed :func:`check`) as the namespace's
    tenant submits it: its ``user_id`` / ``group_id``, and its default account and partition
    where the spec names none. Unchanged without a tenant."""
    tenant = tenancy.tenant_of(namespace)
    if tenant is None:
        return spec
    return msgspec.structs.replace(
        spec,
        user_id=tenant.user_id,
        group_id=tenant.group_id,
        account=spec.account or tenant.default_account,
        partition=spec.partition or tenant.default_partition,
    )


def served(
    namespace: str,
    tenancy: Tenancy,
    managed_namespaces: tuple[str, ...],
    *,
    selector: bool = False,
) -> bool:
    """Does the bridge place pods of ``namespace``: it is in ``managedNamespaces`` or a
    tenant's namespaces, or no list limits the namespaces (``managedNamespaces`` empty:
    every namespace, as before; namespaces without a tenant then run as the token's user).
    With a ``managedNamespaceSelector`` (``selector``), any namespace may match it and only
    the webhook can read Namespace labels, so placement serves every namespace (the
    webhook's mutation still chooses)."""
    if selector or not managed_namespaces:
        return True
    return namespace in managed_namespaces or namespace in tenancy.namespaces


def not_served_message(namespace: str) -> str:
    """The Warning Event of a pod whose namespace is not served."""
    return (
        f"namespace {namespace} is not served by this slurm-bridge (managedNamespaces, "
        "$.tenancy.tenants): the pod is left alone and will not be scheduled"
    )


def slurmd_pod(pod: KubePod) -> bool:
    """A NodeSet's slurmd pod (controller kind ``NodeSet``, or label
    ``app.kubernetes.io/name: slurmd``): it *is* a Slurm node and is never placed through a
    Slurm job, whatever its schedulerName."""
    if pod.owner is not None and pod.owner.kind == _NODESET:
        return True
    return pod.labels.get(_LABEL_NAME) == _SLURMD


def describe(tenancy: Tenancy, namespace: str) -> str:
    """One line for ``explain``: the policy that applies to ``namespace``."""
    tenant = tenancy.tenant_of(namespace)
    if tenant is None:
        return (
            f"no tenancy policy for namespace {namespace}: jobs run as slurmrestd's user; "
            "user-id and group-id annotations are refused"
        )

    def listed(values: tuple[str, ...], default: str = "") -> str:
        text = ", ".join(values) if values else "none"
        return f"{text} (default {default})" if default else text

    return (
        f"tenancy policy {tenant.name!r}: namespace {namespace} runs as {tenant.who}; "
        f"accounts {listed(tenant.accounts, tenant.default_account)}; "
        f"qos {listed(tenant.qos)}; "
        f"partitions {listed(tenant.partitions, tenant.default_partition)}; "
        f"reservations {listed(tenant.reservations)}"
    )
