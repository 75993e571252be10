"""``replay`` and ``explain`` over a recorded run: the recorded decisions come back exactly;
a changed rule shows up as a difference; explain tells one node's story."""

from __future__ import annotations

import dataclasses
import io

import msgspec
import pytest

import reconcilers
from reconcilers.base import Decision
from schemas.actions import BindPod, CreateSlurmNode, DrainSlurmNode, PodRef, TaintNode
from slurmbridge.cli.logs import context_of, parse_time
from slurmbridge.devtools.testing import Stack
from slurmbridge.logview import explain, replay


@pytest.fixture
async def recorded() -> Stack:
    stack = Stack(nodes=3, poll_interval=0.1)
    await stack.start()
    stack.cordon("n1")
    await stack.wait_for(lambda: stack.slurm_node("n1").has("DRAIN"), what="n1 DRAIN")
    stack.uncordon("n1")
    await stack.wait_for(lambda: not stack.slurm_node("n1").has("DRAIN"), what="n1 undrained")
    await stack.settled()
    return stack


async def test_replay_reproduces_then_shows_a_changed_rule(recorded: Stack) -> None:
    stack = recorded
    try:
        assert stack.app is not None and stack.app.bus is not None and stack.settings
        bus, ctx = stack.app.bus, context_of(stack.settings)
        report = await replay.replay(bus, reconcilers.ALL, ctx, replay.Range())
        assert report.decisions and not report.differing, [
            (d.reconciler, d.key, d.missing, d.extra) for d in report.differing
        ]
        assert {d.reconciler for d in report.decisions} >= {"node_taint", "slurm_drain"}

        # The same log against a rule that no longer drains: the drain shows as missing.
        original = reconcilers.ALL["slurm_drain"]

        def never_drain(view: object) -> Decision:
            d = original.decide(view)
            kept = tuple(a for a in d.actions if not isinstance(a, DrainSlurmNode))
            return msgspec.structs.replace(d, actions=kept)

        changed = {
            **reconcilers.ALL,
            "slurm_drain": dataclasses.replace(original, decide=never_drain),
        }
        report = await replay.replay(bus, changed, ctx, replay.Range(reconciler="slurm_drain"))
        assert len(report.differing) == 1
        (d,) = report.differing
        assert d.key == "n1" and [type(a) for a in d.missing] == [DrainSlurmNode]
        out = io.StringIO()
        replay.render(report, out)
        text = out.getvalue()
        assert "- recorded, not decided: DrainSlurmNode(cluster='default', node='n1'" in text
        assert text.strip().endswith("1 differing")
        # Ranges: nothing before the first observation was decided.
        empty = await replay.replay(bus, reconcilers.ALL, ctx, replay.Range(to_seq=0))
        assert empty.decisions == []
    finally:
        await stack.stop()


async def test_explain_tells_why_a_node_was_drained(recorded: Stack) -> None:
    stack = recorded
    try:
        assert stack.app is not None and stack.app.bus is not None
        lines = await explain.explain(stack.app.bus, "SlurmNode", "n1")
        text = "\n".join(f"{line.where} {line.text}" for line in lines)
        drain = next(line for line in lines if "DrainSlurmNode" in line.text)
        assert "why: Kubernetes node is unschedulable" in drain.text
        assert "after: obs#" in drain.text  # the trigger
        assert "saw: obs#" in drain.text and "KubeNode n1 (k8s) unschedulable" in drain.text
        # Slurm reporting the drain comes after the drain itself.
        reported = next(
            i for i, line in enumerate(lines) if "observed" in line.text and "DRAIN" in line.text
        )
        assert lines.index(drain) < reported, text
        assert [line.at for line in lines] == sorted(line.at for line in lines)
        assert await explain.explain(stack.app.bus, "SlurmNode", "nowhere") == []
        # A malformed observation in the log is part of the story, not a crash.
        await stack.app.bus.publish("bridge.obs.slurm:default.SlurmNode.n1", b"{not json")
        await stack.app.bus.publish("bridge.obs.k8s.KubeNode.n1", b'{"kind": "KubeNode"}')
        again = await explain.explain(stack.app.bus, "SlurmNode", "n1")
        malformed = [line for line in again if line.text.startswith("malformed")]
        assert len(malformed) == 1 and "bridge.obs.slurm:default.SlurmNode.n1" in malformed[0].text
        # The stack is live: the story may have grown meanwhile (a later poll, an action
        # record), but what was told before is told again, unchanged and first.
        assert [line for line in again if line not in malformed][: len(lines)] == lines
    finally:
        await stack.stop()


def test_refs_targets_and_times() -> None:
    assert explain.parse_ref("KubePod/default/train-0") == ("KubePod", "default/train-0")
    with pytest.raises(explain.ExplainError, match="unknown kind 'Pd'"):
        explain.parse_ref("Pd/x")
    with pytest.raises(explain.ExplainError, match="expected Pod/NAMESPACE/NAME"):
        explain.parse_ref("Pod/x")
    with pytest.raises(explain.ExplainError, match="expected KIND/KEY"):
        explain.parse_ref("SlurmNode")
    assert explain.targets(TaintNode(node="n1", key="k", value="v", effect="NoExecute")) == {"n1"}
    create = CreateSlurmNode(cluster="c", node="ext-1", node_conf="NodeName=ext-1 CPUs=2")
    assert "ext-1" in explain.targets(create)
    bind = BindPod(
        pod=PodRef(namespace="ns", name="p", uid="u"), node="n1", slurm_node="n1", job_id=7
    )
    assert {"ns/p", "n1", "7"} <= explain.targets(bind)
    assert parse_time("1700000000") == 1_700_000_000
    assert parse_time("2023-11-14T22:13:20Z") == 1_700_000_000
    assert parse_time("2023-11-14T22:13:20") == 1_700_000_000  # naive = UTC
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_time("yesterday")
