"""The kube-controller-manager's resourceclaim controller for
:class:`~slurmbridge.devtools.sim.kube.KubeSim`, as far as slurmbridge relies on it
(kubernetes ``pkg/controller/resourceclaim/controller.go``, ``syncPod`` / ``handleClaim``):

* a pod whose ``spec.resourceClaims`` entry names a ``resourceClaimTemplateName`` gets a
  ResourceClaim made from the template: ``generateName`` ``<pod>-<entry>-`` (cut to 57
  characters, as the controller does), the template's ``spec.metadata`` labels and
  annotations, annotation ``resource.kubernetes.io/pod-claim-name: <entry>``, the pod as
  controller owner (``blockOwnerDeletion``), ``spec`` = the template's ``spec.spec``; then
  the pod's ``status.resourceClaimStatuses`` records ``{name: <entry>, resourceClaimName}``
  (a strategic merge of ``pods/status``, merge key ``name``);
* a claim of the pod that already exists (owned by it, with that annotation) is recorded
  instead of making a second one (``findPodResourceClaim``);
* a missing template: nothing yet; the template's creation makes the controller look at the
  pods of its namespace again;
* pods that ended (Succeeded, Failed) or are being deleted get no new claims.

Not modelled: removing ``reservedFor`` entries of pods that are gone and deleting claims of
finished pods (the garbage collector is not modelled either), the DRA extended-resource
claims (made by the kube-scheduler, which does not place slurmbridge's pods).

Like the simulated kubelet it reacts to the simulator's writes and writes later (never
inside a commit).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Final

from slurmbridge.devtools.sim.kube import ApiError, Change, KubeSim
from slurmbridge.devtools.sim.podqueue import PodQueue

log = logging.getLogger(__name__)

POD_CLAIM_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
#: generateName is cut to this length (controller.go: ``maxGenerateNameLength``… the API
#: server appends 5 random characters to at most 58).
GENERATE_NAME_MAX: Final = 57

Obj = dict[str, Any]


class ResourceClaimController(PodQueue):
    """See the module docstring; :attr:`made` counts the claims it created."""

    what = "simulated resourceclaim controller"

    def __init__(self, sim: KubeSim) -> None:
        super().__init__(sim)
        self.made = 0

    def _on_write(self, change: Change) -> None:
        meta = change.object.get("metadata") or {}
        ns = str(meta.get("namespace", ""))
        if change.resource.name == "pods" and change.type != "DELETED":
            if (change.object.get("spec") or {}).get("resourceClaims"):
                self._mark(ns, str(meta.get("name", "")))
        elif change.resource.name == "resourceclaimtemplates.resource.k8s.io":
            for pod in self.sim.list("pods", namespace=ns):
                if (pod.get("spec") or {}).get("resourceClaims"):
                    self._mark(ns, pod["metadata"]["name"])

    def _sync(self, namespace: str, name: str) -> None:
        try:
            pod = self.sim.get("pods", name, namespace)
        except ApiError:
            return
        meta, spec = pod["metadata"], pod.get("spec") or {}
        status = pod.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
            return
        recorded = {
            s.get("name") for s in status.get("resourceClaimStatuses") or [] if isinstance(s, dict)
        }
        new_statuses = []
        for pc in spec.get("resourceClaims") or []:
            entry, template_name = pc.get("name"), pc.get("resourceClaimTemplateName")
            if not template_name or entry in recorded:
                continue
            claim_name = self._existing(namespace, meta.get("uid"), entry)
            if claim_name is None:
                try:
                    template = self.sim.get("resourceclaimtemplates", template_name, namespace)
                except ApiError:
                    continue  # looked at again when the template is created
                claim_name = self._make(pod, entry, template)
            new_statuses.append({"name": entry, "resourceClaimName": claim_name})
        if new_statuses:
            with contextlib.suppress(ApiError):
                self.sim.patch(
                    "pods",
                    name,
                    {"status": {"resourceClaimStatuses": new_statuses}},
                    namespace,
                    patch_type="strategic",
                    subresource="status",
                )

    def _existing(self, namespace: str, uid: Any, entry: Any) -> str | None:
        for claim in self.sim.list("resourceclaims", namespace=namespace):
            cmeta = claim["metadata"]
            owned = any(
                o.get("uid") == uid and o.get("controller")
                for o in cmeta.get("ownerReferences") or []
            )
            if owned and (cmeta.get("annotations") or {}).get(POD_CLAIM_ANNOTATION) == entry:
                return str(cmeta["name"])
        return None

    def _make(self, pod: Obj, entry: str, template: Obj) -> str:
        meta = pod["metadata"]
        tspec = template.get("spec") or {}
        tmeta = tspec.get("metadata") or {}
        annotations = {**(tmeta.get("annotations") or {}), POD_CLAIM_ANNOTATION: entry}
        generate = f"{meta['name']}-{entry}"[: GENERATE_NAME_MAX - 1] + "-"
        claim = self.sim.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "generateName": generate,
                    "namespace": meta["namespace"],
                    "labels": dict(tmeta.get("labels") or {}),
                    "annotations": annotations,
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": meta["name"],
                            "uid": meta["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": tspec.get("spec") or {},
            }
        )
        self.made += 1
        return str(claim["metadata"]["name"])
