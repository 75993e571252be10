"""The slurmd pod of a NodeSet and its PersistentVolumeClaims, built from the NodeSet as read
(decoded JSON): :func:`nodeset_pod`, :func:`claims_for`, :func:`claim_owners`. Pure: no I/O
(slurm-operator ``internal/controller/nodeset/utils.go``).
"""

from __future__ import annotations

from typing import Any, Final

from reconcilers.nodeset import _daemon
from schemas import wellknown
from schemas.actions import CreateNodeSetPod
from schemas.events import Toleration
from slurmbridge.kube import revisions
from slurmbridge.kube.api import NODESET_API


def nodeset_pod(
    nodeset: dict[str, Any], action: CreateNodeSetPod
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The slurmd pod ``action`` asks for, built from NodeSet ``nodeset`` as read (decoded
    JSON), and the PersistentVolumeClaims to create before it: ``(pod, claims)``.

    The pod is ``spec.template`` with, as slurm-operator 1.x builds it
    (``internal/controller/nodeset/utils.go`` ``newNodeSetPod``, ``initIdentity``,
    ``UpdateStorage``): name ``<nodeset>-<ordinal>`` (DaemonSet mode: ``generateName``
    ``<nodeset>-`` and the node's hostname), ``hostname``, the pin to ``action.node`` as
    required node affinity, the v1beta1 ``spec.slurmd`` container merged over the template's
    container of that name (or added first), ``extraConf`` as slurmd's ``--conf``,
    ``serviceName`` as ``subdomain``, the slurmd/instance/revision/hostname/scaling-mode
    labels, the NodeSet as controller owner, one volume per claim template, and a toleration
    of the bridge's own ``slinky.slurm.net/managed-node`` taint unless the template has one
    (:func:`reconcilers.nodeset._daemon.slurmd_tolerations`; 1.x's worker_app.go gives its own
    worker taint's toleration the same way). Pure: no I/O.
    """
    ref = action.nodeset
    spec = nodeset.get("spec") or {}
    template = spec.get("template") or {}
    pod_spec = dict(template.get("spec") or {})
    daemon = bool(action.hostname)
    hostname = action.hostname or action.pod_name
    pod_spec["hostname"] = hostname
    if action.node:
        pod_spec["affinity"] = _pin_affinity(pod_spec.get("affinity"), action.node)
    slurmd = spec.get("slurmd") or {}
    if slurmd:
        pod_spec["containers"] = _with_slurmd(list(pod_spec.get("containers") or []), slurmd)
    if spec.get("extraConf"):
        pod_spec["containers"] = _with_conf(
            list(pod_spec.get("containers") or []),
            slurmd.get("name") or "slurmd",
            ref.name,
            str(spec["extraConf"]),
        )
    if spec.get("serviceName"):
        pod_spec["subdomain"] = spec["serviceName"]
    pod_spec["tolerations"] = _with_managed_toleration(list(pod_spec.get("tolerations") or []))
    claims = claims_for(nodeset, daemon, hostname if daemon else action.pod_name)
    if claims:
        pod_spec["volumes"] = _with_claim_volumes(pod_spec.get("volumes") or [], claims)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _pod_metadata(nodeset, action, hostname),
        "spec": pod_spec,
    }
    return pod, [claim for _, claim in claims]


def _with_slurmd(containers: list[dict[str, Any]], slurmd: dict[str, Any]) -> list[dict[str, Any]]:
    """``containers`` with v1beta1's ``spec.slurmd`` (slurm-operator 1.x gives the slurmd
    container apart from the template) merged over the container of its name, or added
    first."""
    cname = slurmd.get("name") or "slurmd"
    at = next((i for i, c in enumerate(containers) if c.get("name") == cname), None)
    merged = {**(containers[at] if at is not None else {}), **slurmd, "name": cname}
    if at is None:
        containers.insert(0, merged)
    else:
        containers[at] = merged
    return containers


def _with_managed_toleration(tolerations: list[Any]) -> list[Any]:
    """``tolerations`` with one of the bridge's managed-node taint added unless one already
    tolerates it: the bridge taints the nodes slurmd pods make Slurm nodes of, so without
    it the kubelet refuses (or evicts) the pod on exactly the nodes it is meant for."""
    if _daemon.tolerates_managed_node(_toleration(t) for t in tolerations):
        return tolerations
    t = _daemon.MANAGED_NODE_TOLERATION
    return [*tolerations, {"key": t.key, "operator": t.operator, "effect": t.effect}]


def _with_claim_volumes(
    volumes: list[dict[str, Any]], claims: list[tuple[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """utils.go UpdateStorage: one volume per claim template, named after it, replacing a
    template volume of that name."""
    names = {tname for tname, _ in claims}
    return [
        {"name": tname, "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
        for tname, claim in claims
    ] + [v for v in volumes if v.get("name") not in names]


def _pod_metadata(
    nodeset: dict[str, Any], action: CreateNodeSetPod, hostname: str
) -> dict[str, Any]:
    """The pod's metadata: name (DaemonSet mode: ``generateName``), the template's labels
    and annotations, the slurmd/instance/revision labels, utils.go initIdentity's Slurm node
    name and scaling mode, and the NodeSet as controller owner."""
    ref = action.nodeset
    daemon = bool(action.hostname)
    meta = nodeset.get("metadata") or {}
    tmeta = ((nodeset.get("spec") or {}).get("template") or {}).get("metadata") or {}
    return {
        **({"generateName": f"{ref.name}-"} if daemon else {"name": action.pod_name}),
        "namespace": ref.namespace,
        "labels": {
            **(tmeta.get("labels") or {}),
            "app.kubernetes.io/name": "slurmd",
            "app.kubernetes.io/instance": ref.name,
            wellknown.LABEL_REVISION_HASH: _revision_hash(nodeset),
            wellknown.LABEL_POD_HOSTNAME: hostname,
            wellknown.LABEL_SCALING_MODE: "DaemonSet" if daemon else "StatefulSet",
        },
        "annotations": dict(tmeta.get("annotations") or {}),
        "ownerReferences": [
            owner_ref("/".join(NODESET_API), "NodeSet", ref.name, meta.get("uid", ref.uid))
        ],
    }


def _toleration(raw: Any) -> Toleration:
    """A template's ``spec.tolerations`` entry (decoded JSON) as a :class:`Toleration`; an
    empty operator reads as Equal (core/v1 toleration.go)."""
    raw = raw if isinstance(raw, dict) else {}
    return Toleration(
        key=str(raw.get("key") or ""),
        operator=str(raw.get("operator") or "Equal"),
        value=str(raw.get("value") or ""),
        effect=str(raw.get("effect") or ""),
    )


def _revision_hash(nodeset: dict[str, Any]) -> str:
    """The revision hash of NodeSet ``nodeset`` as read (decoded JSON)."""
    status = nodeset.get("status") or {}
    return revisions.revision_hash(
        revisions.revision_data(nodeset.get("spec") or {}),
        int(status.get("collisionCount") or 0),
    )


def _pin_affinity(affinity: Any, node: str) -> dict[str, Any]:
    """``affinity`` with its required node affinity replaced by one term
    ``metadata.name In [node]`` (Kubernetes pkg/controller/daemon/util
    ``ReplaceDaemonSetPodNodeNameNodeAffinity``, used by slurm-operator utils.go for
    DaemonSet pods and ``pinPodToNode``): the pod can run on that node only."""
    out = dict(affinity or {})
    node_affinity = dict(out.get("nodeAffinity") or {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }
    out["nodeAffinity"] = node_affinity
    return out


def parse_extra_conf(extra_conf: str) -> dict[str, list[str]] | None:
    """``extraConf`` as ``Key=Value`` items separated by blanks, the key title-cased and the
    values split at commas, repeated keys collected (slurm-operator
    internal/builder/workerbuilder/worker_app.go ``ParseExtraConf``); None when an item is
    not ``Key=Value``."""
    out: dict[str, list[str]] = {}
    for item in extra_conf.split():
        key, eq, value = item.partition("=")
        if not eq:
            return None
        out.setdefault(key.title(), []).extend(value.split(","))
    return out


def conf_arg(nodeset: str, extra_conf: str) -> str:
    """The value slurmd's ``--conf`` gets (worker_app.go ``slurmdConfArgs``): ``Key=Value``
    items sorted and joined by a space — ``Features`` the NodeSet's name plus the
    ``Feature``/``Features`` of ``extraConf`` (sorted, de-duplicated: ``baselineFeatures``),
    the other keys of ``extraConf`` as given; an unreadable ``extraConf`` gives the
    baseline alone. 1.x's ``Topology`` item (a shell variable) and its single quotes (its
    args pass through a shell) are left out: the args here reach slurmd as they are."""
    conf = parse_extra_conf(extra_conf) or {}
    features = sorted({nodeset, *conf.get("Feature", []), *conf.get("Features", [])})
    items = {"Features": ",".join(f for f in features if f)}
    items.update({k: ",".join(v) for k, v in conf.items() if k not in ("Feature", "Features")})
    return " ".join(sorted(f"{k}={v}" for k, v in items.items()))


def _with_conf(
    containers: list[dict[str, Any]], name: str, nodeset: str, extra_conf: str
) -> list[dict[str, Any]]:
    """``containers`` with ``--conf <conf_arg>`` appended to container ``name``'s args."""
    conf = ["--conf", conf_arg(nodeset, extra_conf)]
    return [
        {**c, "args": [*(c.get("args") or []), *conf]} if c.get("name") == name else c
        for c in containers
    ]


def claims_for(
    nodeset: dict[str, Any], daemon: bool, suffix: str
) -> list[tuple[str, dict[str, Any]]]:
    """The PersistentVolumeClaims of one pod of ``nodeset`` (decoded JSON), as
    ``(template name, claim)``: named ``<template>-<nodeset>-<ordinal>`` (StatefulSet mode:
    ``suffix`` is the pod name ``<nodeset>-<ordinal>``) or ``<template>-<nodeset>-<hostname>``
    (DaemonSet mode: ``suffix`` is the hostname) — slurm-operator utils.go
    ``GetPersistentVolumeClaims``, ``GetPersistentVolumeClaimNameOrdinal`` /
    ``…NameNodeName``; labels the template's plus the NodeSet's pod selector. With
    ``persistentVolumeClaimRetentionPolicy.whenDeleted: Delete`` the NodeSet is the claim's
    controller owner, so Kubernetes' garbage collector deletes the claim with the NodeSet
    (podcontrol.go ``updateClaimOwnerRefForSetAndPod``, as a StatefulSet's claims).
    ``whenScaled: Delete`` is applied when a pod is condemned (:func:`claim_owners`)."""
    meta = nodeset.get("metadata") or {}
    spec = nodeset.get("spec") or {}
    name = str(meta.get("name") or "")
    policy = spec.get("persistentVolumeClaimRetentionPolicy") or {}
    owner = [
        {
            "apiVersion": "/".join(NODESET_API),
            "kind": "NodeSet",
            "name": name,
            "uid": meta.get("uid", ""),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    out = []
    for template in spec.get("volumeClaimTemplates") or []:
        tmeta = template.get("metadata") or {}
        tname = str(tmeta.get("name") or "")
        claim_name = f"{tname}-{name}-{suffix}" if daemon else f"{tname}-{suffix}"
        claim: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": claim_name,
                "namespace": meta.get("namespace"),
                "labels": {
                    **(tmeta.get("labels") or {}),
                    "app.kubernetes.io/name": "slurmd",
                    "app.kubernetes.io/instance": name,
                },
                **({"annotations": tmeta["annotations"]} if tmeta.get("annotations") else {}),
                **({"ownerReferences": owner} if policy.get("whenDeleted") == "Delete" else {}),
            },
            "spec": template.get("spec") or {},
        }
        out.append((tname, claim))
    return out


#: Retention policy value that deletes claims (apps/v1
#: ``DeletePersistentVolumeClaimRetentionPolicyType``); anything else keeps them ("Retain",
#: and an unknown value, which Kubernetes logs and treats as Retain).
RETENTION_DELETE: Final = "Delete"


def owner_ref(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    # metav1.NewControllerRef, as Kubernetes' addControllerRef makes it.
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def claim_owners(
    refs: list[dict[str, Any]],
    *,
    when_deleted: str,
    when_scaled: str,
    nodeset: tuple[str, str],
    pod: tuple[str, str],
    scaled: bool,
) -> list[dict[str, Any]]:
    """The ``ownerReferences`` a NodeSet pod's PersistentVolumeClaim should have, given its
    current ``refs`` (decoded JSON), the NodeSet's ``persistentVolumeClaimRetentionPolicy``
    (``when_deleted`` / ``when_scaled``: ``"Delete"``, else Retain), the NodeSet and pod as
    ``(name, uid)``, and whether the pod is condemned by a scale-in (``scaled``). Returns
    ``refs`` itself when nothing needs to change (callers compare to skip the write).

    Rules of Kubernetes pkg/controller/statefulset/stateful_set_utils.go
    ``claimOwnerMatchesSetAndPod`` / ``updateClaimOwnerRefForSetAndPod`` (used by
    stateful_pod_control.go ``ClaimsMatchRetentionPolicy`` /
    ``UpdatePodClaimForRetentionPolicy``), as slurm-operator 1.x podcontrol.go
    ``isClaimOwnerUpToDate`` / ``updateClaimOwnerRefForSetAndPod`` copies them for NodeSets:

    * a reference naming the NodeSet or the pod with another uid (a stale one: an earlier
      object of that name) ⇒ the claim is left alone;
    * another object is the claim's controller (and the policy is not Retain/Retain) ⇒ the
      NodeSet's and pod's references are removed and none added;
    * else the NodeSet's and pod's references are replaced by controller references:
      ``whenScaled: Delete`` and condemned ⇒ the pod (the garbage collector deletes the
      claim with it); otherwise ``whenDeleted: Delete`` ⇒ the NodeSet; otherwise none.
      A kept pod therefore never owns its claims (a reversed scale-in takes it off).

    Unlike 1.x, which takes the ``pod-cordon`` annotation as "scaled down", ``scaled`` is
    the reconciler's scale-in condemnation, as Kubernetes' ``isCondemned``.
    """
    set_name, set_uid = nodeset
    pod_name, pod_uid = pod

    def is_set(r: dict[str, Any]) -> bool:
        return (
            r.get("kind") == "NodeSet"
            and str(r.get("apiVersion") or "").split("/")[0] == NODESET_API[0]
            and r.get("name") == set_name
        )

    def is_pod(r: dict[str, Any]) -> bool:
        return r.get("kind") == "Pod" and r.get("apiVersion") == "v1" and r.get("name") == pod_name

    if any(
        (is_set(r) and r.get("uid") != set_uid) or (is_pod(r) and r.get("uid") != pod_uid)
        for r in refs
    ):
        return refs
    others = [r for r in refs if not is_set(r) and not is_pod(r)]
    retain_all = RETENTION_DELETE not in (when_deleted, when_scaled)
    if not retain_all and any(r.get("controller") for r in others):
        return others if len(others) != len(refs) else refs
    ours: list[dict[str, Any]] = []
    if when_scaled == RETENTION_DELETE and scaled:
        ours.append(owner_ref("v1", "Pod", pod_name, pod_uid))
    elif when_deleted == RETENTION_DELETE:
        ours.append(owner_ref("/".join(NODESET_API), "NodeSet", set_name, set_uid))
    mine = [r for r in refs if is_set(r) or is_pod(r)]
    if [(r.get("uid"), bool(r.get("controller"))) for r in mine] == [
        (r["uid"], True) for r in ours
    ]:
        return refs
    return others + ours
