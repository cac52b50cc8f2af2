"""`python -m tools.loadtest.report` (`make report`): run the hostile workload on the real stack
(unless `--log` names an existing event log), then write `reports/report.md`, `reports/report.html`
and SVG plots, with the live run side by side with the baselines replayed on the same workload.

Steps:
1. Run `tools.loadtest.runner` in a child process (it starts its own services and leaves with
   `os._exit`), writing `reports/events.json`; or read the log given with `--log`.
2. Replay the same workload (arrivals and durations as submitted, holds and provider pauses as
   blackouts) through fairsched's fair order, the "served rounds" what-if, a single FIFO queue and
   the proportional-rounding split (`tools.baselines`).
3. Measure the live run and every replay the same way (`metrics.fairness`), plus the live-only
   figures (ETAs, budget, integrity, recoveries).
4. Describe the report once (`document.Document`: sections of text, tables, the verdict on each
   target, and the plots) and write it as Markdown and as the HTML converted from that Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairsched.devservices import REPO_ROOT
from scheduling.core.model import Policy
from tools.baselines import (
    Blackout,
    Job,
    Outcome,
    replay_fair,
    replay_fair_served,
    replay_fifo,
    replay_loop,
    replay_proportional,
)
from tools.loadtest import metrics, simulate, workload
from tools.loadtest.document import Block, Document, Plot, Section, Table, markdown_table, write
from tools.loadtest.ideal import ideal_etas, workflow_means
from tools.loadtest.svg import PALETTE, Chart

REPORTS = REPO_ROOT / "reports"


# -- baselines on the run's workload ---------------------------------------------------------------


@dataclass
class Replays:
    """The run's workload (arrivals and durations as submitted) and its replays by policy."""

    jobs: list[Job]
    blackouts: list[Blackout]
    outcomes: dict[str, Outcome]


FAIR_REPLAY = "fair order (replay)"
LOOP_REPLAY = "fair loop (replay)"
DUE_FIRST_REPLAY = "fair loop, due first (replay)"
SERVED_REPLAY = "served rounds (what-if)"


def run_policy(log: Mapping[str, Any]) -> Policy:
    """The policy the run was made under (round_robin for a log that does not say)."""
    policy = log["meta"].get("settings", {}).get("policy", "round_robin")
    return "deficit" if policy == "deficit" else "round_robin"


def replays_of(log: Mapping[str, Any]) -> Replays:
    live = metrics.live_schedule(log)
    due = metrics.due_times(log)
    jobs = [
        Job(
            id=str(c["id"]),
            org=c["org"],
            arrival=c["submitted"],
            duration=c["planned_duration"],
            cost=c["cost"],
            due=due.get(str(c["id"])),
        )
        for c in log["charts"]
    ]
    blackouts = [Blackout(org, start, end) for org, start, end in live.blackouts]
    budget, weights, policy = live.budget, live.weights, run_policy(log)
    outcomes = {
        FAIR_REPLAY: replay_fair(jobs, budget=budget, weights=weights, blackouts=blackouts, policy=policy),
        LOOP_REPLAY: replay_loop(jobs, budget=budget, weights=weights, blackouts=blackouts, policy=policy),
        **(
            {
                DUE_FIRST_REPLAY: replay_loop(
                    jobs, budget=budget, weights=weights, blackouts=blackouts, policy=policy, due_first=True
                )
            }
            if due
            else {}
        ),
        SERVED_REPLAY: replay_fair_served(jobs, budget=budget, weights=weights, blackouts=blackouts),
        "FIFO": replay_fifo(jobs, budget=budget, blackouts=blackouts),
        "proportional split": replay_proportional(jobs, budget=budget, blackouts=blackouts),
    }
    return Replays(jobs, blackouts, outcomes)


def baseline_schedules(log: Mapping[str, Any], replays: Replays) -> list[metrics.Schedule]:
    """The run's workload replayed under each baseline policy, as schedules."""
    live = metrics.live_schedule(log)
    eligible = {chart.id: chart.eligible for chart in live.charts}
    schedules = []
    for name, outcome in replays.outcomes.items():
        charts = [
            metrics.ChartRun(
                id=job.id,
                org=job.org,
                arrival=job.arrival,
                eligible=eligible[job.id],
                start=outcome.start.get(job.id),
                finish=outcome.finish.get(job.id),
                cost=job.cost,
            )
            for job in replays.jobs
        ]
        schedules.append(metrics.Schedule(name, charts, live.budget, live.weights, live.kinds, live.blackouts))
    return schedules


def attainment_table(schedules: Sequence[metrics.Schedule], log: Mapping[str, Any]) -> Table:
    """Each org's turnaround attainment (and over all) under the live run and each replay."""
    promised = metrics.promises(log)
    attained = [metrics.attainment(schedule, promised) for schedule in schedules]
    rows = []
    for org in log["orgs"]:
        slug = org["slug"]
        charts = attained[0].charts.get(slug, 0)
        target = org.get("turnaround")
        rows.append(
            [slug, org["kind"], num(target, 0, " s"), str(charts), *(pct(figures.of(slug)) for figures in attained)]
        )
    total = sum(attained[0].charts.values())
    rows.append(["all", "", "", str(total), *(pct(figures.overall) for figures in attained)])
    return Table(["org", "kind", "target", "charts", *(schedule.name for schedule in schedules)], rows)


def due_first_verdicts(
    results: Sequence[metrics.Fairness], attained: Mapping[str, metrics.Attainment]
) -> list[Verdict]:
    """The due-first targets, on the replays of the live loop's order: due first raises attainment
    over the plain fair order, with the fairness checks of the live run (weighted Jain >= 0.95, small
    orgs within one round)."""
    by_name = {result.name: result for result in results}
    first, plain = by_name.get(DUE_FIRST_REPLAY), attained.get(LOOP_REPLAY)
    if first is None or plain is None:
        return []
    raised, before = attained[DUE_FIRST_REPLAY].overall, plain.overall
    within = sum(n.within_round for n in first.newcomers)
    return [
        Verdict(
            "due first raises turnaround attainment over the plain fair order (the fair loop's replays)",
            f"{pct(raised)} vs {pct(before)}",
            None if raised is None or before is None else raised > before,
        ),
        Verdict(
            "due first (replay): weighted Jain index >= 0.95 over saturated windows (mean of cost units taken)",
            f"mean {num(first.jain_mean, 3)}, min {num(min(first.jain_values, default=None), 3)}; "
            f"{len(first.jain_values)} windows (plain: mean {num(by_name[LOOP_REPLAY].jain_mean, 3)})",
            None if first.jain_mean is None else first.jain_mean >= 0.95,
        ),
        Verdict(
            "due first (replay): small orgs' first start within one round",
            f"{within} of {len(first.newcomers)} small orgs",
            bool(first.newcomers) and within == len(first.newcomers),
        ),
    ]


def eta_time_table(eta: metrics.EtaFigures) -> Table:
    return Table(
        ["ETA at enqueue made at (s)", "charts", "median abs. rel. error", "p90", "median signed", "band coverage"],
        [
            [
                f"{start:.0f} - {end:.0f}" if end != float("inf") else f"{start:.0f} -",
                str(f.count),
                pct(f.median),
                pct(f.p90),
                pct(f.bias),
                pct(coverage),
            ]
            for start, end, f, coverage in eta.by_time
        ],
    )


def ideal_etas_of(log: Mapping[str, Any], replays: Replays, **options: Any) -> Any:
    """`ideal.ideal_etas` on the run's workload and replays (`options`: its sampling and `since`)."""
    workflow_of = {str(c["id"]): c["workflow"] for c in log["charts"]}
    return ideal_etas(
        replays.jobs,
        budget=int(log["meta"]["budget"]),
        weights={org["slug"]: org["weight"] for org in log["orgs"]},
        blackouts=replays.blackouts,
        means=workflow_means(replays.jobs, workflow_of),
        fair=replays.outcomes[FAIR_REPLAY],
        served=replays.outcomes[SERVED_REPLAY],
        policy=run_policy(log),
        **options,
    )


def ideal_eta_table(log: Mapping[str, Any], replays: Replays) -> Table:
    results = ideal_etas_of(log, replays)
    return Table(
        ["ideal loop: prediction at arrival", "charts", "median abs. rel. error", "p90", "median signed"],
        [[r.name, str(r.errors.count), pct(r.errors.median), pct(r.errors.p90), pct(r.errors.bias)] for r in results],
    )


# -- tables ----------------------------------------------------------------------------------------


def num(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


@dataclass
class Verdict:
    target: str
    measured: str
    met: bool | None


def verdicts(live: metrics.Fairness, figures: metrics.LiveFigures) -> list[Verdict]:
    eta = figures.eta
    small = [n for n in live.newcomers]
    within = sum(n.within_round for n in small)
    enqueue_p90, naive_p90 = eta.at_enqueue.p90, eta.naive_at_enqueue.p90
    integrity = figures.integrity
    return [
        Verdict(
            "small orgs' first start within one round",
            f"{within} of {len(small)} small orgs",
            bool(small) and within == len(small),
        ),
        Verdict(
            "weighted Jain index >= 0.95 over saturated windows (mean of cost units taken)",
            f"units taken: mean {num(live.jain_mean, 3)}, min {num(min(live.jain_values, default=None), 3)}; "
            f"unit-seconds held: mean {num(live.jain_held_mean, 3)}, "
            f"min {num(min(live.jain_held_values, default=None), 3)}; {len(live.jain_values)} windows",
            None if live.jain_mean is None else live.jain_mean >= 0.95,
        ),
        Verdict(
            "ETA median error <= 10% (at enqueue)",
            pct(eta.at_enqueue.median),
            None if eta.at_enqueue.median is None else eta.at_enqueue.median <= 0.10,
        ),
        Verdict(
            "ETA p90 error <= 25% (at enqueue)",
            pct(enqueue_p90),
            None if enqueue_p90 is None else enqueue_p90 <= 0.25,
        ),
        Verdict(
            "ETA p90 at least 2x better than naive",
            f"{pct(enqueue_p90)} vs naive {pct(naive_p90)}",
            None if enqueue_p90 is None or naive_p90 is None else 2 * enqueue_p90 <= naive_p90,
        ),
        Verdict(
            "p10-p90 band coverage 75-90% (at enqueue)",
            f"{pct(eta.band_enqueue)} (at start {pct(eta.band_start)})",
            None if eta.band_enqueue is None else 0.75 <= eta.band_enqueue <= 0.90,
        ),
        Verdict(
            "p10-p90 band coverage 75-90% sampled over the wait",
            f"{pct(eta.band_sampled)} (median width {num(eta.band_width_sampled, 2)} of the time left)",
            None if eta.band_sampled is None else 0.75 <= eta.band_sampled <= 0.90,
        ),
        *_running_verdicts(figures.running),
        *_drift_verdicts(figures.drift),
        Verdict(
            "ETA median error <= 15% for ETAs made after the first tenth of the run (at enqueue)",
            pct(eta.after_first_tenth.median),
            None if eta.after_first_tenth.median is None else eta.after_first_tenth.median <= 0.15,
        ),
        Verdict(
            "p10-p90 band coverage 75-90% for ETAs made after the first tenth of the run (at enqueue, sampled)",
            f"{pct(eta.band_enqueue_after_first_tenth)}, sampled {pct(eta.band_sampled_after_first_tenth)}",
            None
            if eta.band_enqueue_after_first_tenth is None or eta.band_sampled_after_first_tenth is None
            else all(
                0.75 <= band <= 0.90
                for band in (eta.band_enqueue_after_first_tenth, eta.band_sampled_after_first_tenth)
            ),
        ),
        Verdict("zero lost", str(integrity.lost), integrity.lost == 0),
        Verdict("zero run twice", str(len(integrity.run_twice)), not integrity.run_twice),
        Verdict(
            "Temporal agrees with the database",
            f"{len(integrity.disagreements)} disagreements, {len(integrity.temporal_unknown)} unknown workflows, "
            f"{integrity.runs_described} runs described",
            not integrity.disagreements and not integrity.temporal_unknown,
        ),
        Verdict(
            "budget never exceeded",
            f"peak {figures.budget.peak} of {figures.budget.budget}",
            not figures.budget.exceeded_at,
        ),
    ]


def policy_table(results: Sequence[metrics.Fairness]) -> Table:
    rows = []
    for result in results:
        waits = [n.first_wait for n in result.newcomers if n.first_wait is not None]
        rows.append(
            [
                result.name,
                f"{num(result.jain_mean, 3)} / {num(min(result.jain_values, default=None), 3)} "
                f"({len(result.jain_values)})",
                f"{num(result.jain_held_mean, 3)} / {num(min(result.jain_held_values, default=None), 3)}",
                f"{sum(n.within_round for n in result.newcomers)} of {len(result.newcomers)}",
                num(metrics.quantile(waits, 0.5), 1, " s"),
                num(max(waits, default=None), 1, " s"),
                pct(_mean([n.share_next for n in result.newcomers]))
                + " (fair "
                + pct(_mean([n.fair_share_next for n in result.newcomers]))
                + ")",
            ]
        )
    return Table(
        [
            "policy",
            "Jain, units taken: mean / min (windows)",
            "Jain, unit-seconds held: mean / min",
            "small orgs within one round",
            "small orgs' first wait p50",
            "max",
            "newcomer share of next 20 starts",
        ],
        rows,
    )


def org_table(results: Sequence[metrics.Fairness]) -> Table:
    header = ["org", "kind", "weight", "charts"]
    for result in results:
        header.append(f"{result.name}: first wait / age p50 / p95 (s)")
    by_org = [{o.org: o for o in result.orgs} for result in results]
    rows = []
    for org in results[0].orgs:
        row = [org.org, org.kind, str(org.weight), str(org.charts)]
        for figures in by_org:
            entry = figures.get(org.org)
            row.append(
                "-" if entry is None else f"{num(entry.first_wait)} / {num(entry.age_p50)} / {num(entry.age_p95)}"
            )
        rows.append(row)
    return Table(header, rows)


def newcomer_table(results: Sequence[metrics.Fairness]) -> Table:
    header = ["org", "arrives (s)", "round size"]
    header += [f"{r.name}: others before / share of next 20" for r in results]
    rows = []
    for index, newcomer in enumerate(results[0].newcomers):
        row = [newcomer.org, num(newcomer.arrival), str(newcomer.round_size)]
        for result in results:
            entry = result.newcomers[index]
            row.append(f"{entry.others_before} / {pct(entry.share_next)}")
        rows.append(row)
    return Table(header, rows)


def _running_verdicts(running: metrics.RunningEtaFigures | None) -> list[Verdict]:
    if running is None:
        return []
    lag = running.latest_lag
    return [
        # Between two replans a running chart's plan row can fall behind the clock; the pages then
        # show "any moment now", never a past time (`finish_when`, static/portal/times.js: tested in
        # a browser). What the run can measure is how far behind the rows fell: a figure, unjudged.
        Verdict(
            "running charts' plan rows behind the clock between replans (the pages show them as"
            " 'any moment now', never in the past)",
            f"{len(running.past)} of {running.checked} checks behind"
            + (f" (at most {lag:.1f} s)" if lag is not None else ""),
            None,
        ),
        Verdict(
            "p10-p90 band coverage 75-90% of running charts, sampled over their runs",
            f"{pct(running.band)} (median error {pct(running.sampled.median)} of the time left)",
            None if running.band is None else 0.75 <= running.band <= 0.90,
        ),
    ]


def _drift_verdicts(drift: metrics.DriftFigures | None) -> list[Verdict]:
    if drift is None:
        return []
    before, _, after = drift.windows
    ratio = (
        None
        if after.sampled.median is None or not before.sampled.median
        else after.sampled.median / before.sampled.median
    )
    return [
        Verdict(
            f"drift phase: ETAs made after {metrics.DRIFT_RUNS} changed runs, median error within 1.5x of before "
            "(sampled)",
            f"{pct(after.sampled.median)} vs {pct(before.sampled.median)} before"
            + (f" ({ratio:.2f}x)" if ratio is not None else ""),
            None if ratio is None else ratio <= 1.5,
        )
    ]


def drift_table(drift: metrics.DriftFigures) -> Table:
    """The ETAs made before the drift phase, until the changed runs are learned, and after."""

    def cells(errors: metrics.ErrorFigures, band: float | None) -> list[str]:
        return [str(errors.count), pct(errors.median), pct(errors.bias), pct(band)]

    return Table(
        [
            "ETAs made",
            "from (s)",
            "enqueue: ETAs",
            "median",
            "signed",
            "band",
            "sampled: ETAs",
            "median",
            "signed",
            "band",
            f"{drift.org}'s sampled: ETAs",
            "median",
            "signed",
            "band",
        ],
        [
            [
                window.name,
                num(window.start),
                *cells(window.enqueue, window.enqueue_band),
                *cells(window.sampled, window.sampled_band),
                *cells(window.drifting, window.drifting_band),
            ]
            for window in drift.windows
        ],
    )


def eta_table(eta: metrics.EtaFigures) -> Table:
    def row(name: str, figures: metrics.ErrorFigures) -> list[str]:
        return [name, str(figures.count), pct(figures.median), pct(figures.p90), pct(figures.bias)]

    return Table(
        [
            "prediction",
            "charts (samples)",
            "median abs. rel. error",
            "p90",
            "median signed (+: predicted later than actual)",
        ],
        [
            row("fairsched ETA at enqueue", eta.at_enqueue),
            row("  deep charts (waited >= 5 mean durations)", eta.enqueue_deep),
            row("  shallow charts", eta.enqueue_shallow),
            row("  made after the first tenth of the run", eta.after_first_tenth),
            row("naive (pending x avg / capacity) at enqueue", eta.naive_at_enqueue),
            row("fairsched ETA at enqueue, first-attempt charts", eta.first_attempt_enqueue),
            row("fairsched ETA sampled over the wait (every 5 s)", eta.sampled),
            row("  deep charts", eta.sampled_deep),
            row("  shallow charts", eta.sampled_shallow),
            row("fairsched ETA at start", eta.at_start),
            row("org clear-time (sampled every 5 s)", eta.org_clear),
        ],
    )


def eta_org_table(eta: metrics.EtaFigures) -> Table:
    return Table(
        ["org", "charts", "median", "p90", "median signed (+: predicted later than actual)"],
        [[org, str(f.count), pct(f.median), pct(f.p90), pct(f.bias)] for org, f in eta.by_org.items()],
    )


def fault_table(recoveries: Sequence[metrics.Recovery]) -> Table:
    return Table(
        [
            "fault",
            "at (s)",
            "service back (s)",
            "first start after (s)",
            "pool full again (s)",
            "recovery",
            "charts mid-dispatch",
            "detail",
        ],
        [
            [
                r.kind,
                num(r.at),
                num(r.restored),
                num(r.first_start),
                num(r.pool_full),
                num(r.recovery_seconds, 1, " s"),
                str(r.claimed_at_fault),
                r.detail,
            ]
            for r in recoveries
        ],
    )


def integrity_table(integrity: metrics.IntegrityFigures) -> Table:
    return Table(
        ["submitted (planned)", "in the database", "terminal", "by state", "lost", "run twice", "runs described"],
        [
            [
                str(integrity.planned),
                str(integrity.charts),
                str(integrity.terminal),
                ", ".join(f"{k} {v}" for k, v in sorted(integrity.by_state.items())),
                str(integrity.lost),
                str(len(integrity.run_twice)),
                str(integrity.runs_described),
            ]
        ],
    )


def webhook_verdicts(hooks: metrics.WebhookFigures | None) -> list[Verdict]:
    """The issue's webhook targets, judged on the run's own receiver; none if the run had no receiver."""
    if hooks is None:
        return []
    return [
        Verdict(
            "webhooks: zero lost (every subscribed feed event received, signature good)",
            f"{len(hooks.lost)} of {hooks.subscribed}",
            hooks.subscribed > 0 and not hooks.lost,
        ),
        Verdict(
            "webhooks: zero duplicates without their idempotency key",
            f"{len(hooks.unkeyed_repeats)} of {hooks.repeats} repeats",
            not hooks.unkeyed_repeats,
        ),
        Verdict("webhooks: order kept per endpoint", f"{len(hooks.out_of_order)} out of order", not hooks.out_of_order),
        Verdict(
            "the change feed agrees with the event log",
            f"{len(hooks.feed_only)} only in the feed, {len(hooks.log_only)} only in the log",
            hooks.agrees,
        ),
        Verdict(
            "webhook delivery p95 <= 1 s from commit",
            f"p50 {num(hooks.p50, 2, ' s')}, p95 {num(hooks.p95, 2, ' s')}, max {num(hooks.max, 2, ' s')}",
            None if hooks.p95 is None else hooks.p95 <= 1.0,
        ),
    ]


def webhook_section(hooks: metrics.WebhookFigures) -> Section:
    table = Table(
        ["subscribed events", "receipts", "delivered", "repeats", "bad signatures", "lost", "unkeyed repeats",
         "out of order", "feed only / log only", "latency p50 / p95 / max"],
        [
            [
                str(hooks.subscribed), str(hooks.receipts), str(hooks.delivered), str(hooks.repeats),
                str(hooks.bad_signatures), str(len(hooks.lost)), str(len(hooks.unkeyed_repeats)),
                str(len(hooks.out_of_order)), f"{len(hooks.feed_only)} / {len(hooks.log_only)}",
                f"{num(hooks.p50, 2)} / {num(hooks.p95, 2)} / {num(hooks.max, 2)} s",
            ]
        ],
    )  # fmt: skip
    return Section(
        "Webhooks",
        "One endpoint (every event type) registered at the start of the run, pointing at a receiver on "
        "127.0.0.1 that checks each delivery's signature as examples/webhook_receiver.py does and records it. "
        "After the drain the change feed is read as staff to its end and compared: every subscribed event "
        "received at least once (lost), every repeat carrying the key first seen with its event, first "
        "receipts in feed order, and the feed's rows the same set as the ChartEvent / OrgChange rows. "
        "Latency = first good receipt - the event's commit time (its `at`).",
        [
            table,
            *(["Lost: " + ", ".join(hooks.lost[:20])] if hooks.lost else []),
            *(["Only in the feed: " + "; ".join(hooks.feed_only[:10])] if hooks.feed_only else []),
            *(["Only in the log: " + "; ".join(hooks.log_only[:10])] if hooks.log_only else []),
        ],
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


# -- plots -----------------------------------------------------------------------------------------


def plot_in_flight(log: Mapping[str, Any], figures: metrics.LiveFigures) -> str:
    ended = float(log["meta"]["ended"])
    budget = figures.budget.budget
    chart = Chart(
        "Cost units in flight (live), with faults, hold and provider pause",
        "seconds",
        "units",
        (0, ended),
        (0, budget + 2),
    )
    for hold in log["holds"]:
        chart.band(hold["start"], hold["end"] or ended, "#9467bd", f"{hold['org']} held")
    for pause in log["pauses"]:
        chart.band(pause["start"], pause["end"], "#ff7f0e", f"{pause['provider']} paused")
    steps = [(max(0.0, at), units) for at, units in figures.budget.in_flight]
    chart.line(steps, PALETTE[0], "in flight", step=True)
    chart.line([(0, budget), (ended, budget)], "#d62728", "budget", dash="5,3")
    for row, fault in enumerate(figures.recoveries):
        chart.marker(fault.at, fault.kind, row=row % 4)
    return chart.render()


def plot_first_waits(results: Sequence[metrics.Fairness]) -> str:
    orgs = [n.org for n in results[0].newcomers]
    values = [[n.first_wait for n in result.newcomers] for result in results]
    top = max((v for series in values for v in series if v is not None), default=1.0)
    chart = Chart(
        "Small orgs: wait for their first start, per policy",
        "",
        "seconds",
        (0, len(orgs)),
        (0, top * 1.1),
        height=340,
        margin=(34, 20, 60, 60),
    )
    chart.bars(orgs, [(result.name, series) for result, series in zip(results, values, strict=True)])
    return chart.render(x_ticks=False)


def plot_jain(results: Sequence[metrics.Fairness], ended: float) -> str:
    chart = Chart(
        "Weighted Jain index (units taken) per saturated window", "window start (s)", "Jain index", (0, ended),
        (0, 1.05),
    )  # fmt: skip
    for index, result in enumerate(results):
        points = [(w.start, w.jain) for w in result.windows if w.jain is not None]
        chart.line(points, PALETTE[index % len(PALETTE)], result.name)
        chart.dots(points, PALETTE[index % len(PALETTE)])
    chart.line([(0, 0.95), (ended, 0.95)], "#999", "target 0.95", dash="4,3")
    return chart.render()


def plot_eta(eta: metrics.EtaFigures) -> str:
    actual = [finish - at for at, finish, _, _ in eta.points]
    predicted = [p - at for at, _, p, _ in eta.points] + [n - at for at, _, _, n in eta.points]
    top = max([*actual, *predicted, 1.0])
    chart = Chart(
        "Time left at enqueue: predicted vs actual", "actual seconds to finish", "predicted", (0, top), (0, top),
        height=420, width=560,
    )  # fmt: skip
    chart.line([(0, 0), (top, top)], "#999", "exact", dash="4,3")
    chart.dots([(finish - at, naive - at) for at, finish, _, naive in eta.points], PALETTE[1], "naive formula")
    chart.dots([(finish - at, eta_at - at) for at, finish, eta_at, _ in eta.points], PALETTE[0], "fairsched ETA")
    return chart.render()


def plot_starts(schedule: metrics.Schedule, ended: float) -> str:
    """Cumulative cost units started per org kind (live)."""
    by_kind: dict[str, list[float]] = {}
    for chart_run in schedule.charts:
        if chart_run.start is not None:
            kind = schedule.kinds.get(chart_run.org, chart_run.org)
            by_kind.setdefault(kind, []).append(chart_run.start)
    top = max((len(v) for v in by_kind.values()), default=1)
    chart = Chart("Charts started so far, per kind of org (live)", "seconds", "charts", (0, ended), (0, top * 1.05))
    for index, (kind, starts) in enumerate(sorted(by_kind.items())):
        points = [(at, count + 1) for count, at in enumerate(sorted(starts))]
        chart.line([(0, 0), *points], PALETTE[index % len(PALETTE)], kind, step=True)
    return chart.render()


# -- the report ------------------------------------------------------------------------------------


def simulator_tables(results: Sequence[simulate.Result], orders: Sequence[simulate.OrderResult] = ()) -> list[Block]:
    """The open-arrival simulator's figures (`tools.loadtest.simulate`) and its targets: the ETAs,
    the at-risk predictions and (with `orders`) the due-first order's attainment and fairness."""
    judged = simulate.targets(results) + simulate.miss_targets(results) + simulate.order_targets(orders)
    sizes = "; ".join(f"{r.workload} / {r.policy}: {r.charts} charts, {r.deep_share:.0%} deep" for r in results)
    return [
        Table(simulate.TABLE_HEADER, simulate.table_rows(results)),
        f"Errors are median / p90 / median signed. {sizes}.",
        Table(simulate.MISS_HEADER, simulate.miss_rows(results)),
        "At risk: a chart is predicted to miss its promise when the plan's late chance is >= "
        f"{simulate.AT_RISK:g}, at its arrival and at the kept moment closest to half its wait; precision = "
        "predicted and missed / predicted, recall = predicted and missed / missed (finished after its due "
        "time), on the same charts (every chart arriving with every 4th).",
        *(
            [
                Table(simulate.ORDER_HEADER, simulate.order_rows(orders)),
                Table(simulate.ORG_HEADER, simulate.org_attainment_rows(orders)),
            ]
            if orders
            else []
        ),
        Table(
            ["workload", "policy", "durations", "target (fairsched)", "measured", "met"],
            [[t.workload, t.policy, t.durations, t.target, t.measured, _met(t.met)] for t in judged],
        ),
    ]


def build_report(
    log: Mapping[str, Any],
    out: Path,
    *,
    command: str,
    simulated: Sequence[simulate.Result] = (),
    orders: Sequence[simulate.OrderResult] = (),
) -> list[Verdict]:
    """Write report.md, report.html and the plots into `out`; return the verdicts. `simulated`: the
    open-arrival simulator's results, given their own section when there are any (with `orders`,
    its due-first comparison)."""
    live_schedule = metrics.live_schedule(log)
    replays = replays_of(log)
    schedules = [live_schedule, *baseline_schedules(log, replays)]
    results = [metrics.fairness(schedule) for schedule in schedules]
    figures = metrics.live_figures(log)
    hooks = metrics.webhook_figures(log)
    due = metrics.due_times(log)
    promised = metrics.promises(log)
    attained = {schedule.name: metrics.attainment(schedule, promised) for schedule in schedules}
    judged = verdicts(results[0], figures) + due_first_verdicts(results, attained) + webhook_verdicts(hooks)
    ended = float(log["meta"]["ended"])
    in_flight = Plot("in_flight.svg", plot_in_flight(log, figures))
    first_waits = Plot("first_waits.svg", plot_first_waits(results))
    jain = Plot("jain.svg", plot_jain(results, ended))
    eta = Plot("eta.svg", plot_eta(figures.eta))
    starts = Plot("starts.svg", plot_starts(live_schedule, ended))
    meta = log["meta"]
    sections = [
        Section("Reading", "", reading(results, figures)),
        Section(
            "Targets",
            "Measured on the live run; `met` is judged strictly against the issue's targets.",
            [Table(["target", "measured", "met"], [[v.target, v.measured, _met(v.met)] for v in judged])],
        ),
        Section(
            "Run",
            f"`{command}` — {len(log['charts'])} charts from {len(log['orgs'])} orgs submitted over "
            f"{meta['seconds']:.0f} s, budget {meta['budget']} cost units, seed {meta['seed']}, "
            f"{meta['temporal_workers']} Temporal worker(s), one Celery worker with beat (concurrency 2); "
            f"the run lasted {ended:.0f} s. Faults injected: {', '.join(meta['faults_requested']) or 'none'}. "
            f"Scheduler settings: {json.dumps(meta['settings'])}.",
            [in_flight, starts],
        ),
        Section(
            "Fairness, side by side with the baselines",
            "The live run and the replays of the same arrivals and durations (holds and the provider pause "
            "as blackouts, no failures) measured the same way. Start = first dispatch. A window is saturated "
            "when the pool held budget - 1 units or more for 90% of its 15 s and two or more orgs were "
            "backlogged all through it; Jain's index is over those orgs' cost units taken / weight (units are "
            "taken at every run's start: a retry takes the pool again and is charged to its org like any "
            "start), and over their unit-seconds held / weight. "
            "'Within one round' = no more charts of other orgs started between a small org's first "
            "submission and its first start than the weights of the orgs backlogged at its arrival.",
            [policy_table(results), first_waits, jain],
        ),
        *(
            [
                Section(
                    "Turnaround attainment",
                    "The share of each org's charts finished by their due time (a chart never finished missed "
                    "it, and so did one that failed, in every column; a chart its customer cancelled is not "
                    "counted). Each org has a turnaround target (`workload.TURNAROUNDS`, scaled with the run's "
                    "length) and each chart its own promise, the target x a factor drawn in "
                    f"{workload.PROMISE_FACTORS[0]:g}-{workload.PROMISE_FACTORS[1]:g}: due = submitted + "
                    "promise, computed here from the log for the live run and every replay alike. The fair "
                    "loop's replay is the fair order as the live loop gives it (each org's place in the rounds "
                    "kept from pass to pass: the live run without its overhead, faults and failures); 'due "
                    "first' is the same with `Scenario.due_first` (each org's charts by due time inside its "
                    "share, the rounds across orgs untouched); their fairness is in the table above.",
                    [attainment_table(schedules, log)],
                )
            ]
            if due
            else []
        ),
        Section("Small orgs arriving into the backlog", "", [newcomer_table(results)]),
        Section("Per org", "First wait is the org's first chart; ages are from eligibility.", [org_table(results)]),
        Section(
            "ETAs",
            "Absolute error relative to the time left: |predicted - actual finish| / (actual finish - "
            "time of the prediction). 'At enqueue' is the first ETA the loop wrote for the chart (sampled "
            "each second), 'at start' the last one before its first dispatch. The naive formula is "
            "pending cost units x mean finished run / budget, at the same instants as the enqueue ETAs. "
            f"Band coverage (p10-p90): at enqueue {pct(figures.eta.band_enqueue)}, at start "
            f"{pct(figures.eta.band_start)}, sampled over the wait {pct(figures.eta.band_sampled)} (median width "
            f"{num(figures.eta.band_width_sampled, 2)} of the time left). The ETAs forecast arrivals from the "
            "submissions of the last arrival windows (`scheduling.core.forecast`: rates with decay, bulk uploads "
            "as bursts, newcomers expected while history is thin); the bands add the learned spread of "
            "durations. Deep charts waited 5 mean durations or more before their first dispatch. The org "
            "clear-time is each org's median last finish (never before its latest ETA), sampled every 5 s, "
            "against the latest finish of what it had then. The table by time sets the ETAs made in the "
            "first tenth of the run (before most orgs had shown up, and before any duration was learned) "
            "apart from the rest.",
            [eta_table(figures.eta), eta, eta_time_table(figures.eta), eta_org_table(figures.eta)],
        ),
        *(
            [
                Section(
                    "Drift phase",
                    f"From {figures.drift.at:.0f} s on, {figures.drift.org}'s {figures.drift.workflow} charts take "
                    f"{figures.drift.factor:g}x as long (their payload's duration); the ETAs learn it from the "
                    f"finished runs only. {metrics.DRIFT_RUNS} changed runs had finished at "
                    f"{num(figures.drift.learned_at)} s. Sampled = every 5 s over the waits and the runs; error "
                    "relative to the time left, band = share of finishes inside p10-p90.",
                    [drift_table(figures.drift)],
                )
            ]
            if figures.drift is not None
            else []
        ),
        Section(
            "ETAs of an ideal loop",
            "The same workload replayed without overhead, faults or failures, every duration predicted at "
            "its workflow's true mean; for every 4th chart, the prediction at its arrival (no knowledge of "
            "later arrivals) against its finish in the replay. The static plan is what the live loop "
            "writes; the replayed plans re-apply the order at every instant, as the dispatcher does. The "
            "clairvoyant row is told every chart that will arrive later: what it misses is the durations' "
            "own spread, the floor of any ETA; the gap above it is what later arrivals do to a fair order.",
            [ideal_eta_table(log, replays)],
        ),
        *(
            [
                Section(
                    "ETAs in an open system (simulator)",
                    "`python -m tools.loadtest.simulate`: the core and the live loop's shell rules (served "
                    "rounds, the forecast from history, the dispatch walk) on four open-arrival workloads (drift: "
                    "one org's workflow 3x slower halfway), every predictor scored on the same charts, told the "
                    "true durations or learning them from finished runs ('durations'). Error = |ETA - finish| / "
                    "(finish - time of the ETA), at enqueue (every 4th chart) and sampled every mean duration over "
                    "the wait and over the run (running charts also apart); deep = waited >= 5 "
                    "mean durations. The floor is the plan told every future arrival: what it misses is the "
                    "durations' own spread. Org clear-time: the latest finish of what the org has, scored after "
                    "one arrival window of history. Band: share of finishes inside p10-p90 (median width "
                    "relative to the time left).",
                    simulator_tables(simulated, orders),
                )
            ]
            if simulated
            else []
        ),
        Section(
            "Nothing lost, nothing run twice",
            "Every chart's terminal transitions counted; every attempt's workflow described in Temporal; "
            "Temporal's list of chart workflows compared with the database's. Budget replayed from the "
            f"transitions: peak {figures.budget.peak} of {figures.budget.budget}.",
            [
                integrity_table(figures.integrity),
                *(
                    ["Disagreements: " + "; ".join(figures.integrity.disagreements)]
                    if figures.integrity.disagreements
                    else []
                ),
            ],
        ),
        *([webhook_section(hooks)] if hooks is not None else []),
        Section(
            "Faults and recovery",
            "Recovery = from the fault to the first chart started after the service was back.",
            [fault_table(figures.recoveries)],
        ),
    ]
    write(Document("fairsched under hostile load", sections), out, "report")
    return judged


def reading(results: Sequence[metrics.Fairness], figures: metrics.LiveFigures) -> list[Block]:
    """A few sentences comparing the policies, with this run's numbers."""
    by_name = {result.name: result for result in results}

    def median_wait(name: str) -> float | None:
        result = by_name.get(name)
        if result is None:
            return None
        return metrics.quantile([n.first_wait for n in result.newcomers if n.first_wait is not None], 0.5)

    def small_wait(name: str) -> str:
        return num(median_wait(name))

    live = results[0]
    lines = [
        f"- Small orgs arriving into the backlog waited a median {small_wait(live.name)} s for their first start "
        f"on the live loop; the contract's fair order replayed without overhead gives {small_wait(FAIR_REPLAY)} s, "
        f"FIFO {small_wait('FIFO')} s, the proportional split {small_wait('proportional split')} s, and counting "
        f"running charts as served rounds (what-if) {small_wait(SERVED_REPLAY)} s.",
        "- Weighted Jain index over saturated windows, units taken / unit-seconds held (means): "
        + ", ".join(f"{r.name} {num(r.jain_mean, 2)} / {num(r.jain_held_mean, 2)}" for r in results)
        + ".",
        *(
            [
                "- The fair order's replay is FIFO's to within 10%: the contract recomputes rounds from the waiting "
                "charts at every pass, so when one slot frees at a time the head of the order is the oldest chart "
                "of round 0, the head of the org with the oldest backlog, over and over. The live loop does not "
                "replay that order bare: it keeps each org's service across passes (`Org.served`, passed to the "
                "core as the org's `served` offset), which is why its row differs from the replay's."
            ]
            if _close(median_wait(FAIR_REPLAY), median_wait("FIFO"))
            else []
        ),
        f"- ETA at enqueue: median {pct(figures.eta.at_enqueue.median)}, p90 {pct(figures.eta.at_enqueue.p90)} "
        f"(naive: {pct(figures.eta.naive_at_enqueue.median)}, {pct(figures.eta.naive_at_enqueue.p90)}); p10-p90 "
        f"band coverage {pct(figures.eta.band_enqueue)} (at start {pct(figures.eta.band_start)}). See the table "
        "by time for the ETAs made before most orgs had shown up, and 'ETAs of an ideal loop' for the floor "
        "that a prediction told every later arrival reaches.",
        f"- Integrity: {figures.integrity.lost} lost, {len(figures.integrity.run_twice)} run twice, "
        f"{len(figures.integrity.disagreements)} disagreements with Temporal; budget peak {figures.budget.peak} of "
        f"{figures.budget.budget}; every fault recovered in "
        f"{num(max((r.recovery_seconds or 0.0 for r in figures.recoveries), default=None))} s or less.",
    ]
    return ["\n".join(lines)]


def _close(a: float | None, b: float | None, tolerance: float = 0.1) -> bool:
    return a is not None and b is not None and abs(a - b) <= tolerance * max(abs(a), abs(b), 1.0)


def _met(met: bool | None) -> str:
    return "n/a" if met is None else ("yes" if met else "**no**")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run the hostile workload and write the report.")
    parser.add_argument("--log", type=Path, help="an existing event log (skips the run)")
    parser.add_argument("--out", type=Path, default=REPORTS)
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("LOADRUN_SECONDS", 180)))
    parser.add_argument("--faults", default=None, help="passed to the runner (default: all)")
    parser.add_argument("--seed", type=int, default=None, help="passed to the runner (default: its own)")
    parser.add_argument("--no-simulator", action="store_true", help="leave out the open-arrival simulator")
    parser.add_argument(
        "--policy",
        default=None,
        help="passed to the runner: deficit (default: it shares cost units) or round_robin",
    )
    args = parser.parse_args(argv)
    log_path = args.log
    command = f"python -m tools.loadtest.report --seconds {args.seconds:g}"
    if log_path is None:
        log_path = args.out / "events.json"
        run = [
            sys.executable,
            "-m",
            "tools.loadtest.runner",
            "--seconds",
            str(args.seconds),
            "--out",
            str(log_path),
        ]
        if args.faults is not None:
            run += ["--faults", args.faults]
            command += f" --faults {args.faults}"
        if args.seed is not None:
            run += ["--seed", str(args.seed)]
            command += f" --seed {args.seed}"
        if args.policy is not None:
            run += ["--policy", args.policy]
            command += f" --policy {args.policy}"
        subprocess.run(run, cwd=REPO_ROOT, check=True)
    else:
        command = f"python -m tools.loadtest.report --log {log_path}"
    log = json.loads(log_path.read_text())
    simulated = [] if args.no_simulator else simulate.run()
    orders = [] if args.no_simulator else simulate.orders_run()
    judged = build_report(log, args.out, command=command, simulated=simulated, orders=orders)
    for verdict in judged:
        print(f"{_met(verdict.met).strip('*'):>4}  {verdict.target}: {verdict.measured}")
    if simulated:
        print()
        print("ETAs in an open system (simulator; errors median / p90 / signed):")
        print(markdown_table(Table(simulate.TABLE_HEADER, simulate.table_rows(simulated))))
        print(markdown_table(Table(simulate.MISS_HEADER, simulate.miss_rows(simulated))))
        print(markdown_table(Table(simulate.ORDER_HEADER, simulate.order_rows(orders))))
        for target in simulate.targets(simulated) + simulate.miss_targets(simulated) + simulate.order_targets(orders):
            where = f"{target.workload} / {target.policy} / {target.durations} durations"
            print(f"{_met(target.met).strip('*'):>4}  {where}: {target.target}: {target.measured}")
    print(f"report written to {args.out / 'report.md'} and {args.out / 'report.html'}")


if __name__ == "__main__":
    main()
