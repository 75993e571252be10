"""bench/_work.py: the counting behind ``bench/workload.py``'s work-per-pod figures (decides,
API writes, JetStream messages, CPU). Counting only; timings are never tested."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_work", ROOT / "bench" / "_work.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


work = _load()

EXPOSITION = """\
# HELP slurmbridge_decides_total Calls of a reconciler's decide()
# TYPE slurmbridge_decides_total counter
slurmbridge_decides_total{reconciler="placement"} 12.0
slurmbridge_decides_total{reconciler="workload"} 7.0
slurmbridge_decides_created{reconciler="placement"} 1.7e+09
slurmbridge_decides_total_extra{reconciler="placement"} 99.0
slurmbridge_actions_total{reconciler="placement",action="BindPod",outcome="changed"} 3.0
slurmbridge_decides_total{reconciler="x",note="a \\"quoted\\" } brace"} 1.0
"""


def test_prometheus_totals_sums_one_metric_over_its_labels() -> None:
    assert work.prometheus_totals(EXPOSITION, "slurmbridge_decides_total") == {"": 20.0}


def test_prometheus_totals_by_label() -> None:
    got = work.prometheus_totals(EXPOSITION, "slurmbridge_decides_total", by="reconciler")
    assert got == {"placement": 12.0, "workload": 7.0, "x": 1.0}


def test_prometheus_totals_by_several_labels() -> None:
    got = work.prometheus_totals(
        EXPOSITION, "slurmbridge_actions_total", by=("reconciler", "action")
    )
    assert got == {"placement/BindPod": 3.0}


def test_prometheus_totals_of_an_absent_metric_is_zero() -> None:
    assert work.prometheus_totals("", "slurmbridge_decides_total") == {"": 0.0}
    assert work.prometheus_totals(EXPOSITION, "nope", by="reconciler") == {}


def test_delta_counts_new_keys_and_drops_unchanged_ones() -> None:
    before = {"a": 1, "b": 5}
    after = {"a": 4, "b": 5, "c": 2}
    assert work.delta(before, after) == {"a": 3, "c": 2}


def test_kube_writes_are_the_writing_verbs_only() -> None:
    requests: dict[tuple[str, str], int] = {
        ("create", "pods/binding"): 3,
        ("patch", "pods"): 6,
        ("update", "pods/status"): 1,
        ("delete", "pods"): 1,
        ("deletecollection", "events"): 1,
        ("get", "pods"): 50,
        ("list", "pods"): 2,
        ("watch", "pods"): 1,
    }
    got = work.kube_writes(requests)
    assert got == {
        "create pods/binding": 3,
        "patch pods": 6,
        "update pods/status": 1,
        "delete pods": 1,
        "deletecollection events": 1,
    }
    assert sum(got.values()) == 12


def test_slurm_writes_are_the_writing_methods_only() -> None:
    counters = {"POST job": 2, "DELETE job": 1, "GET jobs": 40, "GET job": 9, "POST node": 1}
    assert work.slurm_writes(counters) == {"POST job": 2, "DELETE job": 1, "POST node": 1}


def test_reads_are_every_other_request() -> None:
    requests = {("create", "pods/binding"): 3, ("get", "pods"): 50, ("watch", "pods"): 1}
    assert work.api_reads(requests) == {"get pods": 50, "watch pods": 1}
    counters = {"POST job": 2, "GET jobs/state": 40, "GET job": 9, "DELETE job": 1}
    assert work.slurm_reads(counters) == {"GET jobs/state": 40, "GET job": 9}


def test_per_pod_rounds_and_has_no_figure_without_pods() -> None:
    assert work.per_pod(40, 3) == 13.33
    assert math.isnan(work.per_pod(5, 0))


def test_cpu_seconds_reads_this_process() -> None:
    t0 = work.cpu_seconds(os.getpid())
    x = 0
    for i in range(200_000):
        x += i
    assert work.cpu_seconds(os.getpid()) >= t0 >= 0


class _Info:
    def __init__(self, name: str, last_seq: int) -> None:
        self.config = type("C", (), {"name": name})()
        self.state = type("S", (), {"last_seq": last_seq})()


class _Jsm:
    async def streams_info(self) -> list[Any]:
        return [_Info("BRIDGE_OBS", 120), _Info("BRIDGE_ACT", 30)]


class _Nc:
    def jsm(self) -> _Jsm:
        return _Jsm()


async def test_stream_seqs_reads_last_seq_per_stream() -> None:
    assert await work.stream_seqs(_Nc()) == {"BRIDGE_OBS": 120, "BRIDGE_ACT": 30}
