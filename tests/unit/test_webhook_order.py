"""The order of the webhook's denials (:func:`slurmbridge.webhook.validate`): a pod breaking
several rules is told the first one only, in one fixed order per operation, so the answer a
user sees does not change when the rules are rearranged (issue 31 split ``validate`` into
per-field checks). Each case removes the first broken rule; the next one must then answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from slurmbridge.webhook import decode_review, validate
from tests.unit.test_webhook import BY_LIST, JOBID, NODE, OURS, RUNNING, P, pod, review

EXAMPLE = "deviceclass.resource.kubernetes.io/fpga.example.com"
SPREAD = [{"maxSkew": 1, "topologyKey": "zone"}]
BAD_CONSTRAINTS = {P + "constraints": "(a&b)|(c&d)"}
BAD_DRA = [{"name": "c", "image": "busybox", "resources": {"requests": {EXAMPLE: "1"}}}]


def create(labels: dict[str, str], annotations: dict[str, str], **spec: Any) -> bytes:
    return review(pod(scheduler=OURS, labels=labels, annotations=annotations, **spec))


#: CREATE: the jobid label, the slurm-node annotation, topology spread, the constraints
#: annotation, then the DRA rules.
CREATE = [
    (
        create({JOBID: "1"}, {NODE: "n1", **BAD_CONSTRAINTS}, topologySpreadConstraints=SPREAD),
        f"metadata.labels[{JOBID}]: set by slurm-bridge",
    ),
    (
        create({}, {NODE: "n1", **BAD_CONSTRAINTS}, topologySpreadConstraints=SPREAD),
        f"metadata.annotations[{NODE}]: set by slurm-bridge",
    ),
    (
        create({}, BAD_CONSTRAINTS, topologySpreadConstraints=SPREAD, containers=BAD_DRA),
        "spec.topologySpreadConstraints: not supported",
    ),
    (create({}, BAD_CONSTRAINTS, containers=BAD_DRA), f"metadata.annotations[{P}constraints]: "),
    (create({}, {}, containers=BAD_DRA), f"spec.containers[c].resources.requests[{EXAMPLE}]: "),
]


@pytest.mark.parametrize(("body", "first"), CREATE, ids=range(len(CREATE)))
def test_create_answers_the_first_broken_rule(body: bytes, first: str) -> None:
    got = validate(decode_review(body), BY_LIST)
    assert got is not None and got.startswith(first), got


def update(labels: dict[str, str], annotations: dict[str, str], **spec: Any) -> bytes:
    new = pod(scheduler=OURS, node="n1", labels=labels, annotations=annotations, **spec)
    return review(new, op="UPDATE", old=RUNNING)


#: UPDATE of a bound pod: the constraints annotation, the DRA rules, then a changed jobid
#: label, then a changed slurm-node annotation.
UPDATE = [
    (
        update({JOBID: "8"}, {NODE: "n9", **BAD_CONSTRAINTS}, containers=BAD_DRA),
        f"metadata.annotations[{P}constraints]: ",
    ),
    (
        update({JOBID: "8"}, {NODE: "n9"}, containers=BAD_DRA),
        f"spec.containers[c].resources.requests[{EXAMPLE}]: ",
    ),
    (update({JOBID: "8"}, {NODE: "n9"}), f"metadata.labels[{JOBID}]: cannot change"),
    (update({JOBID: "7"}, {NODE: "n9"}), f"metadata.annotations[{NODE}]: cannot change"),
    (update({JOBID: "7"}, {NODE: "n1"}), ""),
]


@pytest.mark.parametrize(("body", "first"), UPDATE, ids=range(len(UPDATE)))
def test_update_answers_the_first_broken_rule(body: bytes, first: str) -> None:
    got = validate(decode_review(body), BY_LIST)
    if not first:
        assert got is None
    else:
        assert got is not None and got.startswith(first), got
