"""Logging set-up: records go to the stderr of the moment, never to a stream closed since."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest

from slurmbridge.observability.logs import StderrHandler, setup_logging


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield root
    root.handlers[:] = handlers
    root.setLevel(level)


def test_a_record_goes_to_the_stderr_of_the_moment_not_a_closed_one(
    root_logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    setup_logging("INFO", "json")
    first.close()  # whoever set it has gone (a test's captured output, an embedding program)
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    logging.getLogger("slurmbridge.test").info("hello %s", "there")
    line = json.loads(second.getvalue().splitlines()[-1])
    assert (line["msg"], line["level"], line["logger"]) == (
        "hello there",
        "INFO",
        "slurmbridge.test",
    )
    assert [type(h) for h in root_logger.handlers] == [StderrHandler]


def test_plain_text_format_for_terminals(
    root_logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    setup_logging("WARNING", "text")
    logging.getLogger("slurmbridge.test").info("not shown")
    logging.getLogger("slurmbridge.test").warning("shown")
    assert "not shown" not in out.getvalue()
    assert "WARNING slurmbridge.test: shown" in out.getvalue()
