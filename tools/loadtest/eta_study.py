"""`python -m tools.loadtest.eta_study --log reports/events.json`: where the live run's ETA error
comes from (issue 25), read from the event log alone, without re-running.

Every scored ETA (at enqueue, sampled over the wait, sampled over the run; only charts that
succeeded) is split by:
- phase: `fault` when a fault's disruption (from the fault to the pool full again after it) overlaps
  the span from the ETA to the chart's finish, else `quiet`;
- when it was made (in the first tenth of the window or after), its org, its depth;
- its parts, where the sample has the predicted start (`EtaSample.start`): the wait's error
  (predicted start - first start) and the duration's (ETA - predicted start - time from the first
  start to the finish), each over the time left, their sum the ETA's signed error;
- what the pair had learned: nothing (the cold start: the default duration and spread) or runs,
  replayed here with the core's rule (`core.durations.duration_learn`) over the succeeded runs in the
  order they closed, as reconcile learns them (the runs in flight are left out);
- swaps: the same ETAs with the chart's own duration taken as the true median of its workflow (the
  payload's lognormal, as the workload draws it) or as the median of its pair's runs in the whole
  log, and with the wait taken as exact (the duration's part alone).
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduling.core.durations import WARMUP_RUNS, DurationState, duration_learn
from tools.loadtest import metrics, workload
from tools.loadtest.document import Table, markdown_table

KINDS = ("enqueue", "wait", "run")


@dataclass
class Scored:
    """One scored ETA of a succeeded chart."""

    kind: str  # enqueue, wait (sampled over the wait) or run (sampled over the run)
    chart: Mapping[str, Any]
    at: float
    eta: float
    low: float | None
    high: float | None
    start: float | None
    finished: float
    first_start: float | None
    fault: bool
    learned: int  # runs of its pair learned when it was made

    @property
    def left(self) -> float:
        return self.finished - self.at

    @property
    def error(self) -> float:
        return (self.eta - self.finished) / self.left

    @property
    def inside(self) -> bool | None:
        if self.low is None or self.high is None:
            return None
        return self.low <= self.finished <= self.high

    @property
    def parts(self) -> tuple[float, float] | None:
        """(wait's error, duration's error) over the time left, or None without a predicted start."""
        if self.start is None or self.first_start is None or self.kind == "run":
            return None
        return (self.start - self.first_start) / self.left, (
            self.eta - self.start - (self.finished - self.first_start)
        ) / self.left


@dataclass
class Row:
    name: str
    errors: list[float] = field(default_factory=list)
    inside: list[bool] = field(default_factory=list)

    def add(self, scored: Scored, error: float | None = None) -> None:
        self.errors.append(scored.error if error is None else error)
        if scored.inside is not None:
            self.inside.append(scored.inside)

    def cells(self) -> list[str]:
        figures = metrics.error_figures(self.errors)
        band = sum(self.inside) / len(self.inside) if self.inside else None
        return [self.name, str(figures.count), _pct(figures.median), _pct(figures.p90), _pct(figures.bias), _pct(band)]


HEADER = ["ETAs", "count", "median abs.", "p90", "median signed", "band"]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def disruptions(log: Mapping[str, Any]) -> list[tuple[str, float, float]]:
    """Each fault's disruption: (kind, from the fault, to the pool full again after it, or the
    service back + 10 s if it never filled)."""
    spans = []
    for recovery in metrics.recoveries(log):
        restored = recovery.restored if recovery.restored is not None else recovery.at
        end = recovery.pool_full if recovery.pool_full is not None else restored + 10.0
        spans.append((recovery.kind, recovery.at, max(end, restored)))
    return spans


def learned_counts(log: Mapping[str, Any]) -> Callable[[str, str, float], int]:
    """How many runs of (org, workflow) had closed successfully by an instant."""
    closes: dict[tuple[str, str], list[float]] = defaultdict(list)
    for chart in log["charts"]:
        for run in chart["runs"]:
            if run["status"] == "completed" and run["close"] is not None:
                closes[(chart["org"], chart["workflow"])].append(run["close"])
    for values in closes.values():
        values.sort()

    def count(org: str, workflow: str, at: float) -> int:
        return sum(1 for close in closes.get((org, workflow), ()) if close <= at)

    return count


def scored_etas(log: Mapping[str, Any]) -> list[Scored]:
    spans = disruptions(log)
    learned = learned_counts(log)
    out = []
    for chart in log["charts"]:
        finished = chart["finished"]
        if chart["state"] != "succeeded" or finished is None:
            continue
        first_start = next((run["start"] for run in chart["runs"] if run["start"] is not None), chart["started"])
        samples = [("enqueue", chart["eta_enqueue"])] if chart["eta_enqueue"] else []
        samples += [("wait", s) for s in chart.get("eta_wait", [])]
        samples += [("run", s) for s in chart.get("eta_run", [])]
        for kind, sample in samples:
            at = sample["at"]
            if finished <= at:
                continue
            fault = any(start < finished and at < end for _, start, end in spans)
            out.append(
                Scored(
                    kind,
                    chart,
                    at,
                    sample["eta"],
                    sample["low"],
                    sample["high"],
                    sample.get("start"),
                    finished,
                    first_start,
                    fault,
                    learned(chart["org"], chart["workflow"], at),
                )
            )
    return out


def true_median(log: Mapping[str, Any], chart: Mapping[str, Any]) -> float:
    """The median of the payload duration the workload draws for this chart (lognormal, SIGMA)."""
    median = workload.MEDIAN_SECONDS * (workload.SLOW_FACTOR if chart["workflow"] == "slow" else 1.0)
    drift = log["meta"].get("drift")
    if drift and chart["org"] == drift["org"] and chart["submitted"] >= drift["at"]:
        median *= drift["factor"]
    return median


def run_durations(log: Mapping[str, Any]) -> dict[tuple[str, str, bool], list[float]]:
    """Every completed run's Temporal duration by (org, workflow, submitted after the drift)."""
    drift = log["meta"].get("drift") or {}
    out: dict[tuple[str, str, bool], list[float]] = defaultdict(list)
    for chart in log["charts"]:
        late = bool(drift) and chart["org"] == drift["org"] and chart["submitted"] >= drift["at"]
        for run in chart["runs"]:
            if run["status"] == "completed" and run["start"] is not None and run["close"] is not None:
                out[(chart["org"], chart["workflow"], late)].append(run["close"] - run["start"])
    return out


def overhead_rows(log: Mapping[str, Any]) -> list[list[str]]:
    """Per workflow: the payload's duration against the run's in Temporal, and the first start's
    lag after the chart's previous lane freed (the loop's own gap between runs)."""
    ratios: dict[str, list[float]] = defaultdict(list)
    extra: dict[str, list[float]] = defaultdict(list)
    for chart in log["charts"]:
        runs = [r for r in chart["runs"] if r["status"] == "completed" and r["start"] is not None and r["close"]]
        for run in runs:
            ratios[chart["workflow"]].append((run["close"] - run["start"]) / chart["planned_duration"])
            extra[chart["workflow"]].append(run["close"] - run["start"] - chart["planned_duration"])
    return [
        [name, str(len(ratios[name])), _num(metrics.quantile(ratios[name], 0.5), 3),
         _num(metrics.quantile(extra[name], 0.5), 2), _num(metrics.quantile(extra[name], 0.9), 2)]
        for name in sorted(ratios)
    ]  # fmt: skip


def loop_lags(log: Mapping[str, Any]) -> list[list[str]]:
    """Per run: the claim to its start in Temporal, its run, its close to its settle; and from each
    settle to the next claim (any chart's): what a lane is held beyond the run."""
    events: dict[int, list[tuple[float, str, str]]] = defaultdict(list)
    for chart_id, at, from_state, to_state in log["transitions"]:
        events[chart_id].append((at, from_state, to_state))
    parts: dict[str, list[float]] = defaultdict(list)
    for chart in log["charts"]:
        claims = [at for at, _, to in events[chart["id"]] if to == "dispatching"]
        settles = [
            at for at, was, to in events[chart["id"]] if was in metrics.IN_FLIGHT and to not in metrics.IN_FLIGHT
        ]
        runs = [r for r in chart["runs"] if r["start"] is not None and r["close"] is not None]
        for claim, settle, run in zip(claims, settles, runs, strict=False):
            parts["claim to start"].append(run["start"] - claim)
            parts["run (start to close)"].append(run["close"] - run["start"])
            parts["close to settle"].append(settle - run["close"])
    claims = sorted(at for _, at, _, to in log["transitions"] if to == "dispatching")
    for _, at, was, to in log["transitions"]:
        if was in metrics.IN_FLIGHT and to not in metrics.IN_FLIGHT:
            following = bisect.bisect_left(claims, at)
            if following < len(claims):
                parts["settle to the next claim"].append(claims[following] - at)
    return [
        [name, str(len(values)), _num(metrics.quantile(values, 0.5)), _num(metrics.quantile(values, 0.9)),
         _num(sum(values) / len(values))]
        for name, values in parts.items()
    ]  # fmt: skip


def by_window(scored: Sequence[Scored], width: float = 20.0) -> list[Row]:
    """The ETAs sampled over the wait by when they were made, `width` s at a time."""
    rows: dict[float, Row] = {}
    for item in scored:
        if item.kind == "wait":
            start = width * math.floor(item.at / width)
            rows.setdefault(start, Row(f"{start:.0f}-{start + width:.0f} s")).add(item)
    return [rows[key] for key in sorted(rows)]


def _steps(levels: Sequence[tuple[float, int]]) -> list[tuple[float, int]]:
    """Levels (at, units) as changes (at, delta)."""
    out, last = [], 0
    for at, units in levels:
        out.append((at, units - last))
        last = units
    return out


def lane_use(log: Mapping[str, Any], step: float = 0.1) -> list[list[str]]:
    """While charts that could start wait (queued, their org not held, their provider not paused:
    two or more), the share of the budget claimed (claim to settle, what the loop holds) and running
    in Temporal (a run's start to its close, what the durations are learned from), quiet and in the
    disruptions: the plan frees a lane at a run's learned end, so what the loop holds beyond the
    runs is time the plan does not see."""
    budget = int(log["meta"]["budget"])
    cost = {chart["id"]: min(chart["cost"], budget) for chart in log["charts"]}
    org_of = {chart["id"]: chart["org"] for chart in log["charts"]}
    blocked = [(org, start, end) for org, start, end in metrics.blackouts_of(log)]
    spans = disruptions(log)
    events = [(at, units, 0) for at, units in _steps(metrics.budget_figures(log).in_flight)]
    for chart in log["charts"]:
        for run in chart["runs"]:
            if run["start"] is not None and run["close"] is not None:
                events += [(run["start"], 0, cost[chart["id"]]), (run["close"], 0, -cost[chart["id"]])]
    events.sort(key=lambda e: e[0])
    state: dict[int, str] = {}
    sums = {"quiet": [0.0, 0.0, 0], "fault": [0.0, 0.0, 0]}
    claimed = running = 0
    index = 0
    transitions = log["transitions"]
    t_index = 0
    end = float(log["meta"]["ended"])
    t = 0.0
    while t < end:
        while index < len(events) and events[index][0] <= t:
            claimed += events[index][1]
            running += events[index][2]
            index += 1
        while t_index < len(transitions) and transitions[t_index][1] <= t:
            chart_id, _, _, to_state = transitions[t_index]
            state[chart_id] = to_state
            t_index += 1
        ready = sum(
            1
            for chart_id, current in state.items()
            if current == "queued"
            and not any(org == org_of.get(chart_id) and start <= t < stop for org, start, stop in blocked)
        )
        if ready >= 2:
            phase = "fault" if any(start <= t < stop for _, start, stop in spans) else "quiet"
            sums[phase][0] += claimed / budget
            sums[phase][1] += running / budget
            sums[phase][2] += 1
        t += step
    return [[phase, f"{n * step:.0f} s", _pct(c / n), _pct(r / n)] for phase, (c, r, n) in sums.items() if n]


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def learned_replay(log: Mapping[str, Any]) -> list[list[str]]:
    """Each pair's learned mean (the core's rule over its successes in close order, with the
    workflow's pooled log-duration as `usual` under WARMUP_RUNS, as reconcile does) at the end of
    the run and at each tenth, against the mean of its runs."""
    runs = []
    for chart in log["charts"]:
        for run in chart["runs"]:
            if run["status"] == "completed" and run["start"] is not None and run["close"] is not None:
                runs.append((run["close"], chart["org"], chart["workflow"], run["close"] - run["start"], run["start"]))
    runs.sort()
    states: dict[tuple[str, str], DurationState] = defaultdict(DurationState)
    pooled: dict[str, list[float]] = defaultdict(list)
    seen: dict[tuple[str, str], list[float]] = defaultdict(list)
    for _, org, flow, seconds, started in runs:
        state = states[(org, flow)]
        logs = pooled[flow]
        usual = None
        if state.count < WARMUP_RUNS and len(logs) >= WARMUP_RUNS:
            mean = sum(logs) / len(logs)
            usual = (mean, math.sqrt(max(0.0, sum(v * v for v in logs) / len(logs) - mean * mean)))
        states[(org, flow)] = duration_learn(state, seconds, usual=usual, started=started)
        logs.append(math.log(max(seconds, 1e-3)))
        seen[(org, flow)].append(seconds)
    rows = []
    for (org, flow), state in sorted(states.items()):
        values = seen[(org, flow)]
        rows.append(
            [f"{org} / {flow}", str(len(values)), _num(state.mean_seconds), _num(sum(values) / len(values)),
             _num(metrics.quantile(values, 0.5)), _num(state.log_sigma)]
        )  # fmt: skip
    return rows


def ideal_rows(log: Mapping[str, Any]) -> list[list[str]]:
    """`ideal.ideal_etas` (no overhead, faults or failures, true mean durations) on the charts that
    arrived after the first tenth: the floors of the after-first-tenth target."""
    from tools.loadtest.report import ideal_etas_of, replays_of

    results = ideal_etas_of(log, replays_of(log), sample_every=2, since=0.1 * float(log["meta"]["seconds"]))
    return [
        [r.name, str(r.errors.count), _pct(r.errors.median), _pct(r.errors.p90), _pct(r.errors.bias)] for r in results
    ]


def table(rows: Iterable[Row]) -> str:
    return markdown_table(Table(HEADER, [row.cells() for row in rows if row.errors]))


def grouped(scored: Sequence[Scored], name: Callable[[Scored], str | None]) -> list[Row]:
    rows: dict[str, Row] = {}
    for item in scored:
        key = name(item)
        if key is not None:
            rows.setdefault(key, Row(key)).add(item)
    return [rows[key] for key in sorted(rows)]


def study(log: Mapping[str, Any]) -> str:
    seconds = float(log["meta"]["seconds"])
    scored = scored_etas(log)
    later = [s for s in scored if s.at >= 0.1 * seconds]
    out = [f"Disruptions: {', '.join(f'{k} {a:.0f}-{b:.0f} s' for k, a, b in disruptions(log))}", ""]
    out.append("## By kind and phase (ETAs made after the first tenth)\n")
    out.append(table(grouped(later, lambda s: f"{s.kind} / {'fault' if s.fault else 'quiet'}")))
    out.append(table(grouped(later, lambda s: f"{s.kind} / all")))
    out.append("\n## First tenth vs after (all kinds)\n")
    out.append(table(grouped(scored, lambda s: f"{s.kind} / {'first tenth' if s.at < 0.1 * seconds else 'after'}")))
    out.append("\n## Sampled over the wait, by when the ETA was made\n")
    out.append(table(by_window(scored)))
    out.append("\n## Cold start: the pair's runs learned when the ETA was made\n")

    def learned_bucket(s: Scored) -> str:
        bucket = "0 (default)" if s.learned == 0 else "1-4" if s.learned < WARMUP_RUNS else "5+"
        return f"{s.kind} / learned {bucket}"

    out.append(table(grouped(scored, learned_bucket)))
    out.append("\n## Per org, at enqueue after the first tenth\n")
    out.append(table(grouped([s for s in later if s.kind == "enqueue"], lambda s: str(s.chart["org"]))))
    out.append("\n## Per org, sampled over the run (running charts)\n")
    out.append(table(grouped([s for s in scored if s.kind == "run"], lambda s: str(s.chart["org"]))))
    out.append("\n## Retried charts vs first-attempt successes (enqueue, after the first tenth)\n")
    out.append(
        table(grouped([s for s in later if s.kind == "enqueue"], lambda s: f"attempts {min(s.chart['attempt'], 2)}+"))
    )
    out.append("\n## The parts of the signed error (queued ETAs with a predicted start, after the first tenth)\n")
    parts = [s for s in later if s.parts is not None]
    rows = []
    for kind in ("enqueue", "wait"):
        for phase in ("quiet", "fault"):
            chosen = [s for s in parts if s.kind == kind and ("fault" if s.fault else "quiet") == phase]
            if not chosen:
                continue
            wait = [s.parts[0] for s in chosen if s.parts]
            own = [s.parts[1] for s in chosen if s.parts]
            rows.append(
                [f"{kind} / {phase}", str(len(chosen)),
                 _pct(metrics.quantile([abs(s.error) for s in chosen], 0.5)),
                 _pct(metrics.quantile(wait, 0.5)), _pct(metrics.quantile([abs(v) for v in wait], 0.5)),
                 _pct(metrics.quantile(own, 0.5)), _pct(metrics.quantile([abs(v) for v in own], 0.5))]
            )  # fmt: skip
    out.append(
        markdown_table(
            Table(
                ["ETAs", "count", "median abs. error", "wait: median signed", "abs.", "duration: signed", "abs."],
                rows,
            )
        )
    )
    out.append("\n## Swaps (queued ETAs with a predicted start, after the first tenth; median abs. / signed)\n")
    durations = run_durations(log)
    drift = log["meta"].get("drift") or {}

    def pair_median(s: Scored) -> float:
        late = bool(drift) and s.chart["org"] == drift["org"] and s.chart["submitted"] >= drift["at"]
        return metrics.quantile(durations[(s.chart["org"], s.chart["workflow"], late)], 0.5) or 0.0

    swaps: list[tuple[str, Callable[[Scored], float]]] = [
        ("as made", lambda s: s.eta),
        ("own duration = the workflow's true median", lambda s: (s.start or 0.0) + true_median(log, s.chart)),
        ("own duration = its pair's median run (whole log)", lambda s: (s.start or 0.0) + pair_median(s)),
        ("exact wait (the duration's part alone)", lambda s: (s.first_start or 0.0) + (s.eta - (s.start or 0.0))),
        ("exact own duration (the wait's part alone)", lambda s: (s.start or 0.0) + s.finished - (s.first_start or 0)),
    ]
    rows = []
    for name, eta in swaps:
        for kind in ("enqueue", "wait"):
            chosen = [s for s in parts if s.kind == kind]
            errors = [(eta(s) - s.finished) / s.left for s in chosen]
            quiet = [(eta(s) - s.finished) / s.left for s in chosen if not s.fault]
            rows.append(
                [name, kind, str(len(errors)),
                 f"{_pct(metrics.quantile([abs(e) for e in errors], 0.5))} / {_pct(metrics.quantile(errors, 0.5))}",
                 f"{_pct(metrics.quantile([abs(e) for e in quiet], 0.5))} / {_pct(metrics.quantile(quiet, 0.5))}"]
            )  # fmt: skip
    out.append(markdown_table(Table(["ETA", "kind", "count", "all", "quiet"], rows)))
    out.append("\n## Run durations: payload vs Temporal (completed runs)\n")
    header = ["workflow", "runs", "run / payload p50", "extra s p50", "extra s p90"]
    out.append(markdown_table(Table(header, overhead_rows(log))))
    out.append("\n## Learned at the end (the core's rule replayed) vs the runs\n")
    out.append("\n## What a lane is held for, per run (seconds)\n")
    out.append(markdown_table(Table(["part", "runs", "p50", "p90", "mean"], loop_lags(log))))
    out.append("\n## Lanes while charts could start waited (share of the budget)\n")
    out.append(
        markdown_table(Table(["phase", "time", "claimed (claim to settle)", "running in Temporal"], lane_use(log)))
    )
    header = ["pair", "runs", "learned mean", "runs' mean", "runs' median", "learned log-sigma"]
    out.append(markdown_table(Table(header, learned_replay(log))))
    out.append("\n## The ideal loop's ETAs at arrival, charts arriving after the first tenth (every 2nd)\n")
    out.append(markdown_table(Table(["ideal loop", "charts", "median abs.", "p90", "median signed"], ideal_rows(log))))
    running = metrics.running_eta_figures(log)
    out.append(
        f"\nRunning charts' plan rows behind the clock: {len(running.past)} of {running.checked} checks"
        + (f", at most {running.latest_lag:.1f} s" if running.latest_lag is not None else "")
        + "; at: "
        + ", ".join(f"{p['at']:.0f}" for p in running.past[:40])
    )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Where the live run's ETA error comes from.")
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args(argv)
    print(study(json.loads(args.log.read_text())))


if __name__ == "__main__":
    main()
