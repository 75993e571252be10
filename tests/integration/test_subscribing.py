"""docs/subscribing.md is true: its worked example, taken from the page as written, runs against
a real nats-server and the whole system (Stack) and prints what happened — a drain with its
reason, a tombstone, from the start, from a sequence, from a time and live; its key decoder
inverts schemas.subjects.encode_key; the page names every kind, source and reconciler; and the
JSON Schema files carry the encoding rules."""

from __future__ import annotations

import asyncio
import datetime as dt
import importlib.util
import json
import re
import signal
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

import reconcilers
from schemas import events, subjects
from schemas.export import json_schemas
from slurmbridge.devtools.testing import Stack

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "subscribing.md"
REASON_N1 = "slurm-bridge: Corresponding Kubernetes node (n1) is unschedulable"


def example_source() -> str:
    (code,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    return code


@pytest.fixture(scope="module")
def example_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("subscriber") / "subscribe.py"
    path.write_text(example_source())
    return path


async def run_example(example_file: Path, *args: str) -> list[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(example_file),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()[-2000:]
    return out.decode().splitlines()


def seq_of(line: str) -> int:
    return int(line.split()[0].lstrip("#"))


@given(st.text(min_size=1))
def test_the_examples_decoder_inverts_the_encoding(key: str) -> None:
    module = _example_module()
    assert module.decode_key(subjects.encode_key(key)) == key


_LOADED: list[ModuleType] = []


def _example_module() -> ModuleType:
    if not _LOADED:
        spec = importlib.util.spec_from_loader("subscribe_example_h", loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        exec(compile(example_source(), str(DOC), "exec"), module.__dict__)
        _LOADED.append(module)
    return _LOADED[0]


def test_the_key_table_is_what_encode_key_does() -> None:
    text = DOC.read_text()
    section = text[text.index("## Key encoding") : text.index("## The message")]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|$", section, re.MULTILINE)
    assert len(rows) >= 4
    for key, token in rows:
        assert subjects.encode_key(key) == token, key
        assert _example_module().decode_key(token) == key


def test_the_page_names_every_kind_source_and_reconciler() -> None:
    text = DOC.read_text()
    for kind in events.KINDS:
        assert f"`{kind}`" in text, kind
    for name in reconcilers.ALL:
        assert f"`{name}`" in text, name
    assert f"`{subjects.KUBE_SOURCE}`" in text and "`slurm:<cluster>`" in text
    assert "`deleted`" in text and "UTC nanoseconds" in text and "Nats-Msg-Id" in text


def test_the_json_schemas_carry_the_encoding_rules() -> None:
    docs = json_schemas()
    for name in events.KINDS:
        doc = docs[f"{name}.json"]
        assert f"bridge.obs.<source>.{name}.<encoded key>" in doc["description"]
        assert "'/' becomes '~'" in doc["description"] and "Nats-Msg-Id" in doc["description"]
        props = doc["$defs"][name]["properties"]
        assert "nanoseconds" in props["observed_at"]["description"]
        assert "tombstone" in props["op"]["description"]
        assert "slurm:<cluster>" in props["source"]["description"]
    record = docs["ActionRecord.json"]
    assert "bridge.act.<reconciler>.<key_kind>.<encoded key>" in record["description"]
    assert "nanoseconds" in record["$defs"]["ActionRecord"]["properties"]["at"]["description"]
    # The checked-in files are these (schema export --check says so too).
    for name, doc in docs.items():
        on_disk = json.loads((ROOT / "schemas" / "jsonschema" / name).read_text())
        assert on_disk["description"] == doc["description"], name


async def test_the_worked_example_reads_the_log(example_file: Path) -> None:
    async with Stack(nodes=4, poll_interval=0.1) as stack:
        url = stack.nats.url

        async def stored(node: str, wanted: str) -> None:
            """Until the log holds an observation of Slurm node ``node`` matching ``wanted``."""
            deadline = time.monotonic() + 15
            while True:
                found = [
                    json.loads(d)
                    for d in await stack.observations(f"bridge.obs.*.SlurmNode.{node}")
                ]
                if any(
                    (wanted == "deleted" and f["op"] == "deleted") or wanted in f["state"]
                    for f in found
                ):
                    return
                assert time.monotonic() < deadline, f"no {wanted} observation of {node}"
                await asyncio.sleep(0.05)

        stack.cordon("n1")
        await stored("n1", "DRAIN")
        # Live: from now on, following new observations (started before the change).
        live = await asyncio.create_subprocess_exec(
            sys.executable,
            str(example_file),
            url,
            "--since",
            dt.datetime.now(dt.UTC).isoformat(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        before_n4 = time.time()
        stack.slurm.remove_node("n4")

        await stored("n4", "deleted")

        everything = await run_example(example_file, url, "--history")
        drained = [ln for ln in everything if " slurm:default n1 IDLE+DRAIN " in ln]
        assert drained, everything
        assert f"reason={REASON_N1!r}" in drained[0]
        assert re.search(r"\(id SlurmNode:n1:\S+\)$", drained[0]), drained[0]
        (gone,) = [ln for ln in everything if " n4 deleted " in ln]
        seqs = [seq_of(ln) for ln in everything]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        # Every node was seen (the poller's first listing), all from source slurm:default.
        assert {ln.split()[3] for ln in everything} == {"n1", "n2", "n3", "n4"}

        # From a sequence: that message first.
        from_drain = await run_example(
            example_file, url, "--from-seq", str(seq_of(drained[0])), "--history"
        )
        assert from_drain[0] == drained[0] and gone in from_drain

        # From a time: only what was observed since.
        since = dt.datetime.fromtimestamp(before_n4, dt.UTC).isoformat().replace("+00:00", "Z")
        later = await run_example(example_file, url, "--since", since, "--history")
        assert gone in later and drained[0] not in later

        # Live: the tombstone arrived while it followed; Ctrl-C ends it quietly.
        assert live.stdout is not None
        seen: list[str] = []
        while not any(" n4 deleted " in ln for ln in seen):
            line = await asyncio.wait_for(live.stdout.readline(), 20)
            assert line, "the live example ended"
            seen.append(line.decode().strip())
        live.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(live.communicate(), 20)
        assert live.returncode == 0, err.decode()[-2000:]
