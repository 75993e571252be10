"""Key encoding round trips and subject grammar."""

from __future__ import annotations

import pytest

from schemas import subjects

HOSTILE = [
    "n1",
    "node-1.example.com",
    "ns/name",
    "ns/pod.with.dots",
    "a*b",
    "a>b",
    "100%",
    "%41",
    "with space",
    "tab\there",
    "new\nline",
    "tilde~name",
    "ns/~/x",
    "ünïcødé-nöde",
    "节点",
    "emoji-🚀",
    "..",
    ".",
    "/",
    "~",
    "%",
    "a.b/c.d",
    "x" * 300,
    "UPPER_lower-09:=@+,",
]


@pytest.mark.parametrize("key", HOSTILE)
def test_round_trip(key: str) -> None:
    token = subjects.encode_key(key)
    assert token
    assert not any(c in token for c in ".*> \t\r\n"), token
    assert subjects.decode_key(token) == key


@pytest.mark.parametrize("key", HOSTILE)
def test_subject_parses_back(key: str) -> None:
    subj = subjects.obs_subject("k8s", "KubeNode", key)
    assert len(subj.split(".")) == 5
    parsed = subjects.parse_subject(subj)
    assert parsed == ("obs", "k8s", "KubeNode", key)


def test_encoding_is_injective_on_lookalikes() -> None:
    keys = ["a/b", "a~b", "a%7Eb", "a%2Fb", "a.b", "a%2Eb"]
    tokens = {subjects.encode_key(k) for k in keys}
    assert len(tokens) == len(keys)


def test_plain_names_are_unchanged() -> None:
    assert subjects.encode_key("n12") == "n12"
    assert subjects.encode_key("default/pod-0") == "default~pod-0"


@pytest.mark.parametrize("bad", ["", "%", "%4", "%zz", "a.b", "a b", "%FF"])
def test_decode_rejects_garbage(bad: str) -> None:
    with pytest.raises(ValueError, match="key token"):
        subjects.decode_key(bad)


def test_empty_key_rejected() -> None:
    with pytest.raises(ValueError, match="key: must not be empty"):
        subjects.encode_key("")


@pytest.mark.parametrize("bad", ["", "a.b", "a*", ">"])
def test_source_and_reconciler_must_be_tokens(bad: str) -> None:
    with pytest.raises(ValueError):
        subjects.obs_subject(bad, "KubeNode", "n1")
    with pytest.raises(ValueError):
        subjects.dlq_subject(bad)


def test_parse_rejects_other_subjects() -> None:
    with pytest.raises(ValueError, match="expected bridge"):
        subjects.parse_subject("bridge.dlq.node_taint")


def test_slurm_source() -> None:
    assert subjects.slurm_source("c1") == "slurm:c1"
    assert subjects.obs_subject("slurm:c1", "SlurmNode", "n1") == "bridge.obs.slurm:c1.SlurmNode.n1"


@pytest.mark.parametrize(
    ("subject", "family"),
    [
        ("bridge.obs.k8s.KubeNode.n1", "obs"),
        ("bridge.obs.>", "obs"),
        ("bridge.act.slurm_drain.Node.n1", "act"),
        ("bridge.dlq.placement", "dlq"),
        ("bridge.>", None),
        ("bridge.*.k8s", None),
        ("other.obs.x", None),
        ("bridge", None),
    ],
)
def test_family_of(subject: str, family: str | None) -> None:
    assert subjects.family_of(subject) == family


def test_the_fast_paths_take_exactly_the_characters_never_escaped() -> None:
    # The regular expressions of encode_key's and decode_key's fast paths must agree with
    # _SAFE (plus "/" and its "~"): a character more would skip its escape.
    for code in range(256):
        c = chr(code)
        safe = code in subjects._SAFE
        assert bool(subjects._PLAIN.fullmatch(c)) is (safe or c == "/"), repr(c)
        assert bool(subjects._PLAIN_TOKEN.fullmatch(c)) is (safe or c == "~"), repr(c)
    assert subjects.encode_key("ns/pod-0") == "ns~pod-0"
    assert subjects.decode_key("ns~pod-0") == "ns/pod-0"
    with pytest.raises(ValueError, match="never encoded"):
        subjects.decode_key("ns~pod.0")
