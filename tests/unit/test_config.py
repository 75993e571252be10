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
        ("slurm:\n  pollInterval: 0\n", {}, "$.slurm.pollInterval: Expected `float` > 0"),
        ("slurm:\n  bogus: 1\n", {}, "$.slurm.bogus: unknown key"),
        ("bogus: 1\n", {}, "$.bogus: unknown key"),
        ("", {"SLURMBRIDGE_SLURM_CLUSTER": "a.b"}, "$.slurm.cluster: must be letters, digits"),
        ("", {"SLURMBRIDGE_NATS_REPLICAS": "2"}, "$.nats.replicas: must be 1, 3 or 5"),
        ("slurm:\n  tokenFile: /nonexistent/token\n", {}, "$.slurm.tokenFile: no such file"),
        (
            "slurm:\n  apiVersion: '44'\n",
            {},
            "$.slurm.apiVersion: must be an API version like v0.0.44",
        ),
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
    from slurmbridge.cli.main import main

    f = tmp_path / "c.yaml"
    f.write_text("slurm:\n  pollInterval: -1\n")
    assert main(["run", "--config", str(f)]) == 2
    assert "$.slurm.pollInterval: Expected `float` > 0.0 (seconds, > 0)" in capsys.readouterr().err


# --- the environment a Kubernetes pod gets (issue 17, 9) ---------------------------------------

#: What Kubernetes injects (pkg/kubelet/envvars) into every pod of the namespace of a release
#: called ``slurmbridge``: its Services ``slurmbridge-metrics`` (port 8080 ``metrics``) and
#: ``slurmbridge-webhook`` (port 443 ``https``), and the bundled NATS chart's ``slurmbridge-nats``
#: (4222 ``nats``, 7422 ``leafnodes``, 8222 ``monitor``), besides the API server's own.
RELEASE_SLURMBRIDGE_SERVICE_LINKS = {
    "SLURMBRIDGE_METRICS_SERVICE_HOST": "10.96.14.2",
    "SLURMBRIDGE_METRICS_SERVICE_PORT": "8080",
    "SLURMBRIDGE_METRICS_SERVICE_PORT_METRICS": "8080",
    "SLURMBRIDGE_METRICS_PORT": "tcp://10.96.14.2:8080",
    "SLURMBRIDGE_METRICS_PORT_8080_TCP": "tcp://10.96.14.2:8080",
    "SLURMBRIDGE_METRICS_PORT_8080_TCP_PROTO": "tcp",
    "SLURMBRIDGE_METRICS_PORT_8080_TCP_PORT": "8080",
    "SLURMBRIDGE_METRICS_PORT_8080_TCP_ADDR": "10.96.14.2",
    "SLURMBRIDGE_WEBHOOK_SERVICE_HOST": "10.96.14.3",
    "SLURMBRIDGE_WEBHOOK_SERVICE_PORT": "443",
    "SLURMBRIDGE_WEBHOOK_SERVICE_PORT_HTTPS": "443",
    "SLURMBRIDGE_WEBHOOK_PORT": "tcp://10.96.14.3:443",  # looks like the webhook.port setting
    "SLURMBRIDGE_WEBHOOK_PORT_443_TCP": "tcp://10.96.14.3:443",
    "SLURMBRIDGE_WEBHOOK_PORT_443_TCP_PROTO": "tcp",
    "SLURMBRIDGE_WEBHOOK_PORT_443_TCP_PORT": "443",
    "SLURMBRIDGE_WEBHOOK_PORT_443_TCP_ADDR": "10.96.14.3",
    "SLURMBRIDGE_NATS_SERVICE_HOST": "fd00:10:96::4",  # a dual-stack cluster's IPv6 address
    "SLURMBRIDGE_NATS_SERVICE_PORT": "4222",
    "SLURMBRIDGE_NATS_SERVICE_PORT_NATS": "4222",
    "SLURMBRIDGE_NATS_SERVICE_PORT_LEAFNODES": "7422",
    "SLURMBRIDGE_NATS_SERVICE_PORT_MONITOR": "8222",
    "SLURMBRIDGE_NATS_PORT": "tcp://[fd00:10:96::4]:4222",
    **{
        f"SLURMBRIDGE_NATS_PORT_{port}_TCP{suffix}": value
        for port in (4222, 7422, 8222)
        for suffix, value in (
            ("", f"tcp://[fd00:10:96::4]:{port}"),
            ("_PROTO", "tcp"),
            ("_PORT", str(port)),
            ("_ADDR", "fd00:10:96::4"),
        )
    },
    "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    "KUBERNETES_SERVICE_PORT": "443",
    "KUBERNETES_SERVICE_PORT_HTTPS": "443",
    "KUBERNETES_PORT": "tcp://10.96.0.1:443",
    "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443",
    "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
    "KUBERNETES_PORT_443_TCP_PORT": "443",
    "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
}


def test_the_service_links_of_a_release_called_slurmbridge_are_not_settings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    s = config.load(env=RELEASE_SLURMBRIDGE_SERVICE_LINKS)
    assert s == config.load(env={})  # as if there were none
    assert s.webhook.port == 9443 and s.observability.metrics_port == 8080
    assert not caplog.records, "service links are expected in every pod: no warning"
    # Real settings next to them still count.
    s = config.load(
        env={
            **RELEASE_SLURMBRIDGE_SERVICE_LINKS,
            "SLURMBRIDGE_WEBHOOK_PORT": "9444",
            "SLURMBRIDGE_NATS_URL": "nats://slurmbridge-nats:4222",
        }
    )
    assert (s.webhook.port, s.nats.url) == (9444, "nats://slurmbridge-nats:4222")
    for name, value in RELEASE_SLURMBRIDGE_SERVICE_LINKS.items():
        assert config.service_link(name, value) or not name.startswith("SLURMBRIDGE_"), name


def test_other_variables_that_name_no_setting_are_ignored_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    s = config.load(
        env={"SLURMBRIDGE_SKIP_REAL_SLURM": "1", "SLURMBRIDGE_SLURM_POLL_INTERVALL": "9"}
    )
    assert s.slurm.poll_interval == 2.0
    (warning,) = caplog.records
    assert "SLURMBRIDGE_SKIP_REAL_SLURM" in warning.getMessage()
    assert "SLURMBRIDGE_SLURM_POLL_INTERVALL" in warning.getMessage()
    # A variable that names a setting still needs a valid value.
    with pytest.raises(config.ConfigError, match=r"\$\.webhook\.port"):
        config.load(env={"SLURMBRIDGE_WEBHOOK_PORT": "https"})


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SLURMBRIDGE_OBSERVABILITY_LOG_LEVEL": "LOUD"}, "$.observability.logLevel: must be"),
        ({"SLURMBRIDGE_SLURM_URL": "slurmrestd:6820"}, "$.slurm.url: 'slurmrestd:6820' is not"),
        ({"SLURMBRIDGE_SLURM_REST_API": "ftp://x"}, "$.slurmRestApi: 'ftp://x' is not"),
        ({"SLURMBRIDGE_NATS_URL": "http://nats:4222"}, "$.nats.url: 'http://nats:4222' is not"),
        ({"SLURMBRIDGE_NATS_CONNECT_TIMEOUT": "0"}, "$.nats.connectTimeout: Expected `float` > 0"),
    ],
)
def test_start_up_values_are_checked_before_anything_starts(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(config.ConfigError) as err:
        config.load(env=env)
    assert message in str(err.value)


def test_nats_urls_as_nats_py_reads_them() -> None:
    for url in ("nats://a:4222", "a:4222", "tls://a:4222,nats://b:4222", "ws://a:80"):
        assert config.load(env={"SLURMBRIDGE_NATS_URL": url}).nats.url == url


def test_in_pod(tmp_path: Path) -> None:
    token = tmp_path / "token"
    assert not config.in_pod({}, token)
    assert config.in_pod({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, token)
    token.write_text("x")
    assert config.in_pod({}, token)


def test_runtime_dir() -> None:
    assert config.load(env={"XDG_RUNTIME_DIR": "/run/user/7"}).runtime_dir == (
        "/run/user/7/slurmbridge"
    )
    assert config.load(env={"SLURMBRIDGE_RUNTIME_DIR": "/x"}).runtime_dir == "/x"
    assert config.load(env={}).runtime_dir


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SLURMBRIDGE_SLURM_JOB_RELIST_INTERVAL": "-1"}, "$.slurm.jobRelistInterval: Expected"),
        ({"SLURMBRIDGE_SLURM_TIMEOUT": "0"}, "$.slurm.timeout: Expected `float` > 0"),
        ({"SLURMBRIDGE_WORKER_MAX_DELIVER": "1"}, "$.worker.maxDeliver: Expected `int` >= 2"),
        ({"SLURMBRIDGE_WORKER_PARTITIONS": "0"}, "$.worker.partitions: Expected `int` >= 1"),
        ({"SLURMBRIDGE_LEASES_TTL": "1"}, "$.leases.ttl: Expected `float` >= 1.5"),
        ({"SLURMBRIDGE_WEBHOOK_PORT": "70000"}, "$.webhook.port: Expected `int` <= 65535"),
    ],
)
def test_range_rules_are_declared_on_the_settings(env: dict[str, str], message: str) -> None:
    """Issue 19 (5): the range rules live in msgspec.Meta on the fields, checked at decode."""
    with pytest.raises(config.ConfigError) as err:
        config.load(env=env)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("nats://bridge:s3cret@nats:4222", "nats://bridge:***@nats:4222"),
        ("nats://s3cret@nats:4222", "nats://***@nats:4222"),  # a token as the user name
        ("nats://:s3cret@nats:4222", "nats://***@nats:4222"),
        ("bridge:s3cret@nats:4222", "bridge:***@nats:4222"),  # nats-py adds nats://
        ("tls://a:s3cret@n1:4222,nats://n2:4222", "tls://a:***@n1:4222,nats://n2:4222"),
        ("nats://a:s3:cr@t@nats:4222", "nats://a:***@nats:4222"),  # raw ':' and '@' in it
        ("http://slurm:s3cret@slurmrestd:6820/api", "http://slurm:***@slurmrestd:6820/api"),
        ("nats://nats:4222", "nats://nats:4222"),
        (
            "nats://127.0.0.1:4222,nats://127.0.0.1:4223",
            "nats://127.0.0.1:4222,nats://127.0.0.1:4223",
        ),
        ("", ""),
    ],
)
def test_redact_url_hides_the_credentials_of_every_url(url: str, shown: str) -> None:
    assert config.redact_url(url) == shown
    assert "s3cr" not in config.redact_url(url)


@pytest.mark.parametrize(
    "env",
    [
        {"SLURMBRIDGE_NATS_URL": "http://bridge:s3cret@nats:4222"},
        {"SLURMBRIDGE_NATS_URL": "nats://n1:4222,http://bridge:s3cret@n2:4222"},
        {"SLURMBRIDGE_SLURM_URL": "ftp://slurm:s3cret@slurmrestd:6820"},
    ],
)
def test_a_malformed_url_is_named_without_its_credentials(env: dict[str, str]) -> None:
    with pytest.raises(config.ConfigError) as err:
        config.load(env=env)
    assert "s3cret" not in str(err.value) and ":***@" in str(err.value)
