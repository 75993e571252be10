"""``slurmbridge replay``: decide again from the log and compare with what was done.

Every action record carries the log position its decision saw (``view_seq``: the last
BRIDGE_OBS sequence the worker's projection had applied) and the clock it saw
(``decided_at``). Replay groups the records of one decision — same worker, reconciler, key,
``view_seq`` and ``decided_at`` — rebuilds a projection by applying BRIDGE_OBS in order up
to that sequence, runs the reconciler's ``view`` and ``decide`` with that clock, and compares
the actions with the recorded ones (Kubernetes Events excluded: they are best effort).

A decision is **reproduced** when its recorded actions appear, in order, among the decided
ones, and every decided action that was not recorded is explained by what the worker does:
an action it performed for the same key less than :data:`Worker.EXPECT_S` before was held
back (expectations), or an earlier action of the decision asked for a retry or failed.
Anything else is a **difference**, printed as ``- recorded, not decided`` / ``+ decided,
not recorded`` lines.

Exactness needs the observations up to ``view_seq`` to be retained: per subject the stream
keeps ``nats.obsMaxMsgsPerSubject`` (32) messages for ``nats.obsMaxAge`` (7 d). Records
written before this feature (``view_seq`` 0) are counted as not replayable. Run replay with
the configuration of the run (scheduler name, static cluster, partition): it shapes the
reconcilers' context.
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import msgspec
from tqdm import tqdm

from reconcilers.base import Context, ReconcilerSpec
from schemas import actions as act
from schemas import streams
from schemas.actions import ActionRecord, AnyAction, RecordEvent
from slurmbridge.logview import logread
from slurmbridge.runtime.bus import Bus
from slurmbridge.runtime.projection import Projection
from slurmbridge.runtime.worker import Worker

#: Outcomes after which the worker performs none of the decision's later actions.
_STOPPING = ("retry", "failed")
#: Slack (seconds) on the expectation window: record times and the worker's clock differ by
#: the time it takes to write the record.
_SLACK_S = 0.05


@dataclass
class Decided:
    """One recorded decision and its replay."""

    reconciler: str
    key: str
    worker: str
    view_seq: int
    decided_at: float
    recorded: list[ActionRecord]
    replayed: list[AnyAction] = field(default_factory=list)
    missing: list[AnyAction] = field(default_factory=list)  # recorded, not decided
    extra: list[AnyAction] = field(default_factory=list)  # decided, not recorded nor explained
    error: str = ""

    @property
    def same(self) -> bool:
        """True when replay reproduced the recorded actions."""
        return not (self.missing or self.extra or self.error)


@dataclass
class Report:
    """What a replay found."""

    decisions: list[Decided] = field(default_factory=list)
    not_replayable: int = 0
    observations: int = 0

    @property
    def differing(self) -> list[Decided]:
        """The decisions whose replay differs."""
        return [d for d in self.decisions if not d.same]


@dataclass(frozen=True)
class Range:
    """Which decisions to replay: times in epoch seconds, sequences of BRIDGE_OBS."""

    since: float | None = None
    until: float | None = None
    from_seq: int | None = None
    to_seq: int | None = None
    reconciler: str | None = None

    def __contains__(self, r: ActionRecord) -> bool:
        t = r.decided_at
        return (
            (self.reconciler is None or r.reconciler == self.reconciler)
            and (self.since is None or t >= self.since)
            and (self.until is None or t <= self.until)
            and (self.from_seq is None or r.view_seq >= self.from_seq)
            and (self.to_seq is None or r.view_seq <= self.to_seq)
        )


def _plain(actions: Sequence[AnyAction]) -> list[AnyAction]:
    return [a for a in actions if not isinstance(a, RecordEvent)]


def compare(d: Decided, history: Sequence[ActionRecord]) -> None:
    """Fill ``d.missing`` / ``d.extra`` from ``d.replayed`` (module docstring).
    ``history``: every record of the same worker, reconciler and key (any decision).

    Matched as multisets: a run of independent actions (a group's binds) is performed
    concurrently, so their records arrive in completion order, not in decision order."""
    unmatched = _plain(d.replayed)
    missing: list[AnyAction] = []
    for r in d.recorded:
        if isinstance(r.action, RecordEvent):
            continue
        try:
            unmatched.remove(r.action)
        except ValueError:
            missing.append(r.action)
    d.missing = missing
    if any(r.outcome in _STOPPING for r in d.recorded):
        return  # the worker stopped at a retry or a failure: later actions never ran
    d.extra = [a for a in unmatched if not _expected(a, d, history)]


def _expected(action: AnyAction, d: Decided, history: Sequence[ActionRecord]) -> bool:
    """The worker had performed ``action`` for this key moments before, so its expectations
    held it back (:meth:`Worker._expected`)."""
    window = Worker.EXPECT_S + _SLACK_S
    for r in history:
        if r.outcome in ("ok", "noop") and r.action == action:
            age = d.decided_at - r.at / 1e9
            if -_SLACK_S <= age < window:
                return True
    return False


async def replay(
    bus: Bus,
    specs: Mapping[str, ReconcilerSpec],
    ctx: Context,
    wanted: Range,
    *,
    progress: TextIO | None = None,
) -> Report:
    """Replay every recorded decision in ``wanted`` (module docstring)."""
    report = Report()
    history: dict[tuple[str, str, str], list[ActionRecord]] = collections.defaultdict(list)
    groups: dict[tuple[str, str, str, int, float], Decided] = {}
    async for raw in logread.read(bus, streams.ACT_STREAM, "bridge.act.>"):
        try:
            r = act.decode_record(raw.data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if r.outcome == "intended":
            continue  # the write-ahead record: its outcome record stands for the effect
        history[(r.worker, r.reconciler, r.key)].append(r)
        if isinstance(r.action, RecordEvent) or r not in wanted:
            continue
        if not r.view_seq or r.reconciler not in specs:
            report.not_replayable += 1
            continue
        gk = (r.worker, r.reconciler, r.key, r.view_seq, r.decided_at)
        if gk not in groups:
            groups[gk] = Decided(r.reconciler, r.key, r.worker, r.view_seq, r.decided_at, [])
        groups[gk].recorded.append(r)
    pending = sorted(groups.values(), key=lambda g: (g.view_seq, g.decided_at))
    report.decisions = pending
    if not pending:
        return report
    end = pending[-1].view_seq
    projection = Projection()
    bar = _progress(end, progress)
    nxt = 0

    def decide_up_to(seq: int) -> int:
        j = nxt
        while j < len(pending) and pending[j].view_seq <= seq:
            d = pending[j]
            spec = specs[d.reconciler]
            try:
                view = spec.view(projection, d.key, msgspec.structs.replace(ctx, now=d.decided_at))
                d.replayed = list(spec.decide(view).actions)
            except Exception as exc:  # noqa: BLE001 - a rule that raises is a finding, not a crash
                d.error = f"decide raised {exc!r}"
            else:
                compare(d, history[(d.worker, d.reconciler, d.key)])
            j += 1
        return j

    async for raw in logread.read(bus, streams.OBS_STREAM, "bridge.obs.>", end_seq=end):
        nxt = decide_up_to(raw.seq - 1)
        projection.feed(raw.subject, raw.data, raw.seq)
        report.observations += 1
        if bar is not None:
            bar.update(raw.seq - bar.n)
    decide_up_to(end)
    if bar is not None:
        bar.close()
    return report


def _progress(total: int, out: TextIO | None) -> tqdm[Any] | None:
    """A progress bar on ``out`` (a terminal) for long replays; None otherwise."""
    if out is None or total < 10_000 or not out.isatty():
        return None
    return tqdm(total=total, unit="obs", file=out, leave=False)


def _name(a: AnyAction) -> str:
    fields = ", ".join(f"{k}={v!r}" for k, v in msgspec.structs.asdict(a).items())
    return f"{act.action_name(a)}({fields})"


def render(report: Report, out: TextIO = sys.stdout, *, verbose: bool = False) -> None:
    """Print the differences (all decisions with ``verbose``) and a summary line."""
    for d in report.decisions:
        if d.same and not verbose:
            continue
        head = f"{d.reconciler} {d.key} @seq {d.view_seq} ({d.worker})"
        if d.same:
            print(f"= {head}: {len(d.recorded)} action(s) reproduced", file=out)
            continue
        print(f"≠ {head}", file=out)
        if d.error:
            print(f"    ! {d.error}", file=out)
        for a in d.missing:
            print(f"    - recorded, not decided: {_name(a)}", file=out)
        for a in d.extra:
            print(f"    + decided, not recorded: {_name(a)}", file=out)
    n, bad = len(report.decisions), len(report.differing)
    print(
        f"replayed {n} decision(s) over {report.observations} observation(s): "
        f"{n - bad} reproduced, {bad} differing"
        + (f", {report.not_replayable} record(s) not replayable" if report.not_replayable else ""),
        file=out,
    )
