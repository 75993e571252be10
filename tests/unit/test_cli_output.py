"""What the command line says to a person (issue 17, 15): ``demo --nodes`` below what its
story needs is refused, not silently changed; action lines are short human lines while the
JSON output keeps every field."""

from __future__ import annotations

import json

import msgspec
import pytest

from schemas import actions as act
from slurmbridge.cli import main as cli
from slurmbridge.logview import render

POD_COUNT = 32
PODS = tuple(
    act.PodRef(namespace="default", name=f"train-{i}", uid=f"{i:08d}-aaaa-bbbb-cccc-dddddddddddd")
    for i in range(POD_COUNT)
)
SPEC = act.SlurmJobSpec(
    name="default-train",
    partition="batch",
    account="physics",
    qos="normal",
    tasks=POD_COUNT,
    cpus_per_task=4,
    min_nodes=8,
    memory_per_node_mib=64_000,
    time_limit_minutes=600,
    excluded_nodes=("n1", "n2", "n3"),
    mcs_label="kubernetes",
)
GROUP = "default/Job:train"
HEAVY = [
    act.ActionRecord(
        reconciler="placement",
        key_kind="PodGroup",
        key=GROUP,
        action=act.SubmitSlurmJob(
            cluster="default",
            group=GROUP,
            marker="slurmbridge:group=default/Job:train;uid=0f0e0d0c-0b0a-0908-0706-050403020100",
            pods=PODS,
            spec=SPEC,
            scheduler_name="slurm-bridge-scheduler",
        ),
        outcome="retry",
        reason="the group's pods are all Pending and none has a job",
        error="slurmrestd at http://slurm-restapi.slurm:6820 answered 500: " + "x" * 400,
        at=1_764_000_000_000_000_000,
    ),
    act.ActionRecord(
        reconciler="placement",
        key_kind="PodGroup",
        key=GROUP,
        action=act.MarkPods(job_id=4711, pods=PODS, scheduler_name="slurm-bridge-scheduler"),
        outcome="ok",
    ),
    act.ActionRecord(
        reconciler="slurm_drain",
        key_kind="KubeNode",
        key="n1",
        action=act.DrainSlurmNode(
            cluster="default",
            node="n1",
            reason="slurm-bridge: Corresponding Kubernetes node (n1) is unschedulable",
        ),
        outcome="ok",
    ),
    act.ActionRecord(
        reconciler="node_register",
        key_kind="KubeNode",
        key="ext-1",
        action=act.RecordEvent(
            api_version="v1",
            object_kind="Node",
            name="ext-1",
            uid="9d194cfd-a962-4faa-b19e-96285a70f845",
            type="Warning",
            reason="SlurmNodeNotRegistered",
            message="partition gpu2 of annotation "
            "scheduler.slinky.slurm.net/external-node-partitions does not exist " * 3,
        ),
        outcome="ok",
    ),
]


def test_demo_refuses_fewer_nodes_than_its_story_needs(capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli.build_parser()
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["demo", "--nodes", "1"])
    assert exit_.value.code == 2
    assert "the story needs at least 4 nodes" in capsys.readouterr().err
    assert parser.parse_args(["demo", "--nodes", "6"]).nodes == 6  # honoured, not capped
    assert parser.parse_args(["demo"]).nodes == 4


@pytest.mark.parametrize("record", HEAVY, ids=lambda r: type(r.action).__name__)
def test_an_action_line_is_a_short_human_line(record: act.ActionRecord) -> None:
    line = render.pretty(record)
    assert "\n" not in line
    assert len(line) <= 220, (len(line), line)
    name = type(record.action).__name__
    assert f" {name} " in line and f"→ {record.outcome}" in line
    for struct in ("PodRef(", "SlurmJobSpec(", "ActionRecord("):
        assert struct not in line, line
    assert "uid=" not in line  # nobody reads uids in a line
    if record.error:
        assert "— slurmrestd at" in line


def test_an_action_line_names_what_was_acted_on() -> None:
    submit, mark, drain, event = (render.pretty(r) for r in HEAVY)
    assert f"pods=[default/train-0,… {POD_COUNT} in all]" in mark
    assert "job_id=4711" in mark
    assert "node=n1" in drain and "reason='slurm-bridge: Corresponding" in drain
    assert "reason=SlurmNodeNotRegistered" in event
    assert "group=default/Job:train" in submit


@pytest.mark.parametrize("record", HEAVY, ids=lambda r: type(r.action).__name__)
def test_the_json_lines_keep_everything(record: act.ActionRecord) -> None:
    line = render.jsonl(record, subject="bridge.act.placement.PodGroup.x", seq=7)
    obj = json.loads(line)
    assert (obj.pop("subject"), obj.pop("seq")) == ("bridge.act.placement.PodGroup.x", 7)
    assert msgspec.convert(obj, act.ActionRecord) == record
