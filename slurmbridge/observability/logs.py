"""Structured logging: JSON lines (production) or plain text (terminals).

Records may carry ``trigger_seq``, ``reconciler`` and ``key`` through ``extra=``; the JSON
formatter includes them so one trigger can be followed through the logs of every worker.
"""

from __future__ import annotations

import logging
import sys
import time

import orjson

_EXTRA = ("trigger_seq", "reconciler", "key", "cluster")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, the known extras, exc."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in _EXTRA:
            value = record.__dict__.get(name)
            if value is not None:
                out[name] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes each record to ``sys.stderr`` as it is *when the record is emitted*.

    A handler bound to the stream of its creation keeps writing to it after whoever set it
    (a test harness capturing output, an embedding program) has closed it, and then prints a
    "--- Logging error ---" traceback for every record instead of the record.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        # Called with the handler's lock held (Handler.handle), so the swap is not racy.
        self.stream = sys.stderr
        super().emit(record)


def setup_logging(level: str = "INFO", fmt: str = "json") -> None:
    """Configure the root logger once (stderr, :class:`StderrHandler`)."""
    handler = StderrHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Client libraries log every request at INFO; at a 2 s poll that drowns what matters.
    for noisy in ("nats", "httpx", "httpcore", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(max(root.level, logging.WARNING))
