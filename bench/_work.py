"""Work per placed pod: counting helpers for ``bench/workload.py`` (unit-tested in
``tests/unit/test_bench_work.py``; the timings themselves are never tested).

Every figure is a delta between two snapshots taken around one phase, divided by the pods the
phase placed:

* **decides** — ``slurmbridge_decides_total`` (one per ``decide()`` call, every reconciler)
  scraped from the slurmbridge process's ``/metrics``: :func:`prometheus_totals`.
* **API writes** — requests the simulators served that change something: the Kubernetes
  simulator's ``requests`` counter is keyed ``(verb, resource)`` (verbs ``create``, ``update``,
  ``patch``, ``delete``, ``deletecollection`` write), the slurmrestd simulator's ``counters``
  ``"<METHOD> <endpoint>"`` (``POST``, ``PUT``, ``PATCH``, ``DELETE`` write):
  :func:`kube_writes`, :func:`slurm_writes`; the rest are **API reads**: :func:`api_reads`,
  :func:`slurm_reads`.
* **NATS messages** — JetStream messages stored: the sum over streams of ``state.last_seq``
  (a sequence never goes back, unlike ``state.messages`` under limits or purges):
  :func:`stream_seqs`.
* **CPU** — user + system seconds of a process from ``/proc/<pid>/stat``: :func:`cpu_seconds`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Kubernetes verbs that write (kubernetes staging/src/k8s.io/apiserver/pkg/endpoints/request
#: requestinfo.go maps POST/PUT/PATCH/DELETE to these).
KUBE_WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
#: HTTP methods that write at slurmrestd.
SLURM_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

#: ``name{labels} value`` (a label value may hold ``}`` and escaped quotes).
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^}"]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def prometheus_totals(text: str, name: str, by: str | tuple[str, ...] = "") -> dict[str, float]:
    """Sum the samples of metric ``name`` in a Prometheus text exposition.

    Returns ``{"": total}`` when ``by`` is empty, else the sums per value of label ``by``, or
    per ``"/"``-joined values of several labels (a missing label counts as ``""``). Comments
    and other metrics are skipped; a sample whose value does not parse is skipped too.
    """
    labels = (by,) if isinstance(by, str) else by
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None or m.group(1) != name:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        key = ""
        if by:
            found = dict(_LABEL.findall(m.group(2) or ""))
            key = "/".join(found.get(label, "") for label in labels)
        out[key] = out.get(key, 0.0) + value
    return out if by else {"": out.get("", 0.0)}


def delta(before: Mapping[Any, float], after: Mapping[Any, float]) -> dict[Any, float]:
    """``after - before`` per key (a key missing on one side counts 0); zero deltas dropped."""
    out = {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)}
    return {k: v for k, v in out.items() if v}


def kube_writes(requests: Mapping[tuple[str, str], float]) -> dict[str, float]:
    """The writing requests of a Kubernetes simulator ``requests`` counter (or a delta of
    two), as ``{"<verb> <resource>": count}``."""
    return {f"{verb} {res}": n for (verb, res), n in requests.items() if verb in KUBE_WRITE_VERBS}


def slurm_writes(counters: Mapping[str, float]) -> dict[str, float]:
    """The writing requests of a slurmrestd simulator ``counters`` (``"<METHOD> <endpoint>"``,
    or a delta of two)."""
    return {k: n for k, n in counters.items() if k.split(" ", 1)[0] in SLURM_WRITE_METHODS}


def api_reads(requests: Mapping[tuple[str, str], float]) -> dict[str, float]:
    """The requests of a Kubernetes simulator ``requests`` counter that only read (``get``,
    ``list``, ``watch``: one per watch opened, not per event), as ``{"<verb> <resource>":
    count}``."""
    return {
        f"{verb} {res}": n for (verb, res), n in requests.items() if verb not in KUBE_WRITE_VERBS
    }


def slurm_reads(counters: Mapping[str, float]) -> dict[str, float]:
    """The ``GET`` requests of a slurmrestd simulator ``counters``."""
    return {k: n for k, n in counters.items() if k.split(" ", 1)[0] == "GET"}


def per_pod(total: float, pods: int) -> float:
    """``total / pods`` to two decimals (``nan`` when no pod was placed)."""
    return round(total / pods, 2) if pods else float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (``/proc/<pid>/stat`` fields 14 and 15;
    the command name in field 2 may hold spaces and parentheses, so split after the last
    ``)``). Raises OSError when there is no such process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def stream_seqs(nc: Any) -> dict[str, int]:
    """``{stream: state.last_seq}`` for every JetStream stream of connection ``nc``."""
    js = nc.jsm()
    return {s.config.name: int(s.state.last_seq) for s in await js.streams_info()}
