"""The edges of the ``slurmbridge`` command (issue 29 item 4): ``--version``, help that tells
the truth (the demo's story, every default), a wrong flag refused with its own command's
usage, YAML errors naming the file and the line, ``tail`` of a subject no stream holds
refused at once. Ctrl-C during start-up: tests/e2e/test_cli_interrupt.py; NATS trouble's
log: tests/integration/test_nats_quiet.py; explain's kind names: test_explain_steps.py."""

from __future__ import annotations

import argparse
from importlib import metadata
from pathlib import Path

import pytest

from slurmbridge.cli import main as cli
from slurmbridge.cli import tail


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``slurmbridge ARGV`` in this process: (exit status, stdout, stderr)."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command's parser, by its command line (``sim kube``)."""
    found: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        found.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(f"{name} {sub}".strip(), child)

    walk("", cli.build_parser())
    return found


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.strip() == f"slurmbridge {metadata.version('slurmbridge')}"


def test_demo_help_tells_the_story_it_plays(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "demo", "--help")
    assert code == 0
    text = " ".join(out.split())
    # Each step of slurmbridge/devtools/demo.py's story.
    for step in (
        "managed-node taint",
        'Job "train" of 3 pods is placed through one Slurm job',
        "kubectl cordon n1",
        "kubectl uncordon n1",
        "an administrator drains n2",
        "n4 leaves Slurm",
        'NodeSet "burst" is autoscaled 0 -> 3',
        "external node",
    ):
        assert step in text, step


@pytest.mark.parametrize(("command", "parser"), parsers(), ids=lambda v: str(v) or "top")
def test_every_default_is_shown(command: str, parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            continue
        assert action.help and "default" in action.help, (command, action.option_strings)


def test_sim_port_defaults_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    for sim, port in (("kube", "6443"), ("slurmrestd", "6820")):
        code, out, _ = run(capsys, "sim", sim, "--help")
        assert code == 0 and f"(default {port})" in out, out


def test_streams_help_describes_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "streams", "--help")
    text = " ".join(out.split())
    assert code == 0
    assert "Changes nothing unless --apply is given" in text
    assert "--apply" in text and "create what is missing" in text
    _, top, _ = run(capsys, "--help")
    assert "streams" in top and "--apply: create/update them" in " ".join(top.split())


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (("run", "--bogus"), "usage: slurmbridge run "),
        (("tail", "--bogus"), "usage: slurmbridge tail "),
        (("sim", "kube", "--bogus", "x"), "usage: slurmbridge sim kube "),
        (("schema", "export", "--bogus"), "usage: slurmbridge schema export "),
    ],
)
def test_a_wrong_flag_prints_its_commands_usage(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], usage: str
) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith(usage), err
    assert f"error: unrecognized arguments: {' '.join(argv[argv.index('--bogus') :])}" in err


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("slurm:\n  pollInterval: [1\n", "line 3, column 1: not valid YAML"),
        ("nats:\n  url: a\n   b: c\n", "line 3, column 5: not valid YAML"),
    ],
)
def test_yaml_errors_name_the_file_and_the_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, where: str
) -> None:
    path = tmp_path / "slurmbridge.yaml"
    path.write_text(text)
    code, _, err = run(capsys, "streams", "--config", str(path))
    assert code == 2
    assert err.startswith(f"slurmbridge: invalid configuration: config file {path}: {where}"), err
    assert "<unicode string>" not in err and len(err.strip().splitlines()) == 1, err


def test_a_bad_value_in_the_file_names_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "slurmbridge.yaml"
    path.write_text("slurm:\n  pollInterval: -1\n")
    code, _, err = run(capsys, "streams", "--config", str(path))
    assert code == 2
    assert f"config file {path}: $.slurm.pollInterval:" in err, err
    # The same value from the environment is not the file's.
    path.write_text("slurm: {}\n")
    monkeypatch.setenv("SLURMBRIDGE_SLURM_POLL_INTERVAL", "-1")
    code, _, err = run(capsys, "streams", "--config", str(path))
    assert code == 2 and "config file" not in err and "$.slurm.pollInterval:" in err, err


@pytest.mark.parametrize("subject", ["foo.>", "bridge.ops.>", "bridge", "bridge.obs"])
def test_tail_of_a_subject_no_stream_holds_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, subject: str
) -> None:
    # Refused before looking for a NATS: none runs here, and none is needed to know.
    code, out, err = run(capsys, "tail", subject, "--nats-url", "nats://127.0.0.1:1")
    assert code == 2 and out == ""
    assert f"no stream holds subject {subject!r}" in err
    assert "BRIDGE_OBS bridge.obs.>" in err


@pytest.mark.parametrize(
    ("subject", "stream"),
    [
        ("bridge.>", "BRIDGE_OBS"),
        (">", "BRIDGE_OBS"),
        ("bridge.act.>", "BRIDGE_ACT"),
        ("bridge.*.slurm:default.SlurmNode.n1", "BRIDGE_OBS"),
        ("bridge.dlq.x", "BRIDGE_DLQ"),
    ],
)
def test_the_subjects_the_streams_hold(subject: str, stream: str) -> None:
    assert tail.stream_holding(subject) == stream
