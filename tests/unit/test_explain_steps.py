"""``explain pod/NS/NAME``: the reference form and how the steps print (issue 20, 5); the
steps themselves are read from a real log in tests/integration/test_why_pending_e2e.py."""

from __future__ import annotations

import io

import pytest

from slurmbridge.logview import explain, render


def test_the_pod_reference_is_a_kubepod() -> None:
    assert explain.parse_ref("pod/default/train-0") == ("KubePod", "default/train-0")
    for bad in ("pod/train-0", "pod/default/", "pod//x", "pod/a/b/c"):
        with pytest.raises(explain.ExplainError, match="pod/NAMESPACE/NAME"):
            explain.parse_ref(bad)
    with pytest.raises(explain.ExplainError, match="unknown kind 'Pd'"):
        explain.parse_ref("Pd/default/x")


@pytest.mark.parametrize(
    ("ref", "kind", "key"),
    [
        ("Pod/default/train-0", "KubePod", "default/train-0"),
        ("pods/default/train-0", "KubePod", "default/train-0"),
        ("po/default/train-0", "KubePod", "default/train-0"),
        ("NodeSet/slurm/burst", "KubeNodeSet", "slurm/burst"),
        ("nodesets/slurm/burst", "KubeNodeSet", "slurm/burst"),
        ("nss/slurm/burst", "KubeNodeSet", "slurm/burst"),
        ("KubeNodeSet/slurm/burst", "KubeNodeSet", "slurm/burst"),
        ("node/n1", "KubeNode", "n1"),
        ("Node/n1", "KubeNode", "n1"),
        ("slurmnode/n1", "SlurmNode", "n1"),
        ("Cluster/slurm/c1", "SlurmCluster", "slurm/c1"),
        ("Job/default/train", "KubeWorkload", "default/Job:train"),
        ("jobset/ml/big", "KubeWorkload", "ml/JobSet:big"),
        ("lws/ml/serve", "KubeWorkload", "ml/LeaderWorkerSet:serve"),
    ],
)
def test_explain_accepts_the_kind_names_people_type(ref: str, kind: str, key: str) -> None:
    """kubectl's names, short names and the objects' Kinds, in any case (issue 29, 4)."""
    assert explain.parse_ref(ref) == (kind, key)


def test_a_pod_in_any_short_form_gets_its_steps() -> None:
    assert all(explain.is_pod_ref(r) for r in ("pod/a/b", "Pod/a/b", "pods/a/b", "po/a/b"))
    assert not explain.is_pod_ref("KubePod/a/b")  # the timeline only, as before
    with pytest.raises(explain.ExplainError, match="expected NodeSet/NAMESPACE/NAME"):
        explain.parse_ref("NodeSet/burst")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0, "+0.0 s"), (0.44, "+0.4 s"), (12.34, "+12.3 s"), (125.0, "+2 min 5 s"),
     (3780.0, "+1 h 3 min"), (-1.5, "-1.5 s")],
)  # fmt: skip
def test_offsets(seconds: float, text: str) -> None:
    assert render.offset(seconds) == text


def test_steps_print_as_offsets_from_the_pods_creation() -> None:
    story = explain.PodStory(
        key="default/w",
        created=1_700_000_000.0,
        steps=[
            explain.Step(1_700_000_000.4, "group complete: default/Pod:w (1 pod), submit decided"),
            explain.Step(1_700_000_095.0, "job 7 RUNNING on n1"),
        ],
    )
    out = io.StringIO()
    explain.print_steps(story, out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "pod default/w: created 22:13:20.000"
    assert lines[1].split() == ["+0.4", "s", "group", "complete:", "default/Pod:w", "(1", "pod),",
                                "submit", "decided"]  # fmt: skip
    assert lines[2].split()[:4] == ["+1", "min", "35", "s"]
    empty = io.StringIO()
    explain.print_steps(explain.PodStory(key="default/x", created=0.0, steps=[]), empty)
    assert empty.getvalue() == "pod default/x: nothing in the log\n"
