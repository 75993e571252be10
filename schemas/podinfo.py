"""Slinky slurm-operator's PodInfo: who a slurmd pod's Slurm node belongs to, kept as JSON in
the Slurm node's ``comment``.

Source: slurm-operator 1.x internal/utils/podinfo/podinfo.go (the struct, its JSON names and
``omitempty`` on the NodeSet fields, ``ParseIntoPodInfo``), written by
internal/controller/nodeset/slurmcontrol/slurmcontrol.go ``UpdateNodeWithPodInfo`` and read
by ``GetDefunctNodesForNodeSet``. The same bytes as 1.x writes, so a cluster moved between the
two systems keeps its records: ``{"namespace":…,"podName":…,"node":…}`` then
``"nodeSetName"`` and ``"nodeSetUID"`` only when non-empty.
"""

from __future__ import annotations

from typing import Final

import msgspec


class PodInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A slurmd pod as its Slurm node's comment names it.

    ``namespace`` / ``pod_name``: the pod; ``node``: the Kubernetes node it runs on
    (``spec.nodeName``); ``nodeset_name`` / ``nodeset_uid``: its NodeSet (``""`` = not
    named). Two infos are equal when 1.x's ``PodInfo.Equal`` (equal JSON) says so: field by
    field, an absent NodeSet field being ``""``.
    """

    namespace: str = msgspec.field(default="", name="namespace")
    pod_name: str = msgspec.field(default="", name="podName")
    node: str = msgspec.field(default="", name="node")
    nodeset_name: str = msgspec.field(default="", name="nodeSetName")
    nodeset_uid: str = msgspec.field(default="", name="nodeSetUID")

    def to_comment(self) -> str:
        """The JSON 1.x's ``ToString`` writes: the first three fields always, the NodeSet
        ones only when non-empty (Go ``omitempty``), in the struct's order."""
        out: dict[str, str] = {
            "namespace": self.namespace,
            "podName": self.pod_name,
            "node": self.node,
        }
        if self.nodeset_name:
            out["nodeSetName"] = self.nodeset_name
        if self.nodeset_uid:
            out["nodeSetUID"] = self.nodeset_uid
        return _ENCODER.encode(out).decode()


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(PodInfo)


def parse(comment: str) -> PodInfo | None:
    """The PodInfo in a Slurm node's ``comment``, ``None`` when it holds none: empty, not
    JSON, not an object, or a field of the wrong type (where 1.x's ``ParseIntoPodInfo``
    returns an error). Unknown keys are ignored, as Go's ``json.Unmarshal`` does."""
    if not comment:
        return None
    try:
        return _DECODER.decode(comment)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
