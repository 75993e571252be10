"""Annotations a Slinky user brings (issue 29 item 3): the job annotations' old names
(``slinky.slurm.net/<name>``, Slinky slurm-bridge before 1.0 and its older quickstart) are
never dropped silently — each is refused naming the ``slurmjob.slinky.slurm.net/`` key to write
(placement turns the refusal into SlurmJobInvalid and a Warning Event on the pods)."""

from __future__ import annotations

import pytest

from reconcilers import _pods
from reconcilers._pods import Group, TranslationError, translate
from schemas import wellknown
from tests.unit.test_pod_translate import BARE, JOB, job_pod, pod

OLD = "slinky.slurm.net/"


@pytest.mark.parametrize("name", _pods.ANNOTATIONS)
def test_an_old_name_is_refused_naming_the_key_to_write(name: str) -> None:
    with pytest.raises(TranslationError) as err:
        translate(BARE, [pod()], {OLD + name: "5"})
    assert err.value.field == f"metadata.annotations[{OLD}{name}]"
    assert err.value.reason.endswith(f"write {_pods.PREFIX}{name}")


def test_slinkys_quickstart_job_is_refused_not_run_without_its_account() -> None:
    """The batch Job of Slinky's older quickstart: job-name, timelimit and account."""
    annotations = {
        OLD + "job-name": "job-sleep-single",
        OLD + "timelimit": "5",
        OLD + "account": "foo",
    }
    group = Group(namespace="slurm-bridge", kind="Job", name="job-sleep-single")
    with pytest.raises(TranslationError, match=r"write slurmjob\.slinky\.slurm\.net/account"):
        translate(group, [job_pod("p0", job="job-sleep-single")], annotations)


def test_our_own_annotations_under_that_prefix_are_not_job_annotations() -> None:
    # The slurm-node annotation slurmbridge writes on a bound pod keeps working.
    spec = translate(BARE, [pod(annotations={})], {wellknown.ANNOTATION_SLURM_NODE: "n1"})
    assert spec.name
    spec = translate(JOB, [job_pod("p0")], {_pods.PREFIX + "timelimit": "5"})
    assert spec.time_limit_minutes == 5
