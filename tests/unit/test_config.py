"""Settings: layering, Slinky's config.yaml keys, and errors that name the path."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmbridge import config


def test_defaults() -> None:
    s = config.load(env={})
    assert s.scheduler_name == "slurm-bridge-scheduler"
    assert s.nats.url is None
    assert s.slurm.poll_interval == 2.0
    assert s.instance_id


def test_slinky_config_yaml_is_accepted_as_is(tmp_path: Path) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(
        "schedulerName: slurm-bridge-scheduler\n"
        "slurmRestApi: http://slurm-restapi.slurm:6820\n"
        "managedNamespaces: [slurm-bridge, ml]\n"
        "managedNamespaceSelector: {matchLabels: {team: hpc}}\n"
        "mcsLabel: kubernetes\n"
        "partition: slurm-bridge\n"
    )
    s = config.load(path=f, env={})
    assert s.slurm_url == "http://slurm-restapi.slurm:6820"
    assert s.managed_namespaces == ["slurm-bridge", "ml"]
    assert s.partition == "slurm-bridge"
    assert s.mcs_label == "kubernetes"


def test_layering_defaults_yaml_env_flags(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("slurm:\n  pollInterval: 5\n  cluster: fromyaml\nschedulerName: yaml\n")
    s = config.load(
        path=f, env={"SLURMBRIDGE_SLURM_POLL_INTERVAL": "3", "SLURMBRIDGE_SCHEDULER_NAME": "env"}
    )
    assert (s.slurm.poll_interval, s.slurm.cluster, s.scheduler_name) == (3.0, "fromyaml", "env")
    s = config.load(
        path=f,
        env={"SLURMBRIDGE_SLURM_POLL_INTERVAL": "3"},
        overrides={"slurm": {"pollInterval": 1.5, "cluster": None}},
    )
    assert (s.slurm.poll_interval, s.slurm.cluster) == (1.5, "fromyaml")


@pytest.mark.parametrize(
    ("yaml_text", "env", "message"),
    [
        ("slurm:\n  pollInterval: fast\n", {}, "$.slurm.pollInterval: Expected `float`"),
        ("slurm:\n  pollInterval: 0\n", {}, "$.slurm.pollInterval: must be > 0"),
        ("slurm:\n  bogus: 1\n", {}, "$.slurm.bogus: unknown key"),
        ("bogus: 1\n", {}, "$.bogus: unknown key"),
        ("", {"SLURMBRIDGE_SLURM_CLUSTER": "a.b"}, "$.slurm.cluster: must be letters"),
        ("", {"SLURMBRIDGE_NATS_REPLICAS": "2"}, "$.nats.replicas: must be 1, 3 or 5"),
        ("slurm:\n  tokenFile: /nonexistent/token\n", {}, "$.slurm.tokenFile: no such file"),
        ("slurm:\n  apiVersion: '44'\n", {}, "$.slurm.apiVersion: must look like"),
        ("worker:\n  maxDeliver: 1\n", {}, "$.worker.maxDeliver"),
        ("- a\n- b\n", {}, "expected a mapping"),
        ("a: [\n", {}, "not valid YAML"),
    ],
)
def test_errors_name_the_path(
    tmp_path: Path, yaml_text: str, env: dict[str, str], message: str
) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(yaml_text)
    with pytest.raises(config.ConfigError) as err:
        config.load(path=f, env=env)
    assert message in str(err.value)


def test_missing_file() -> None:
    with pytest.raises(config.ConfigError, match=r"config file /nonexistent\.yaml"):
        config.load(path="/nonexistent.yaml", env={})


def test_cli_reports_config_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from slurmbridge.cli import main

    f = tmp_path / "c.yaml"
    f.write_text("slurm:\n  pollInterval: -1\n")
    assert main(["run", "--config", str(f)]) == 2
    assert "$.slurm.pollInterval: must be > 0 seconds" in capsys.readouterr().err
