"""Benchmark of the scheduling core (a benchmark to report, never a timed test).

    .venv/bin/python bench/bench_core.py [--quick]

1. The plan command's work, JSON in and out (read, parse and check, plan, write), for 100,000
   queued charts from 500 orgs under a budget of 200, next to a bare json.loads + json.dumps of
   the same scenario and to a bare numpy order + heap-of-lanes reference giving the same plan
   (`reference_command`, checked equal). Target: the command within 1.0x of the reference.
2. `plan()` on a `Scenario` of `QueuedChart`s at 10k, 100k and 1M charts, round_robin and deficit,
   without and with caps (the caps, and a few charts in backoff, send the replay down the event
   path). Building the dataclasses is not timed.

Each figure is the best of a few runs. `--quick` stops at 100k. Target: `plan()` at 1M charts within
2 s, with and without caps, both policies.

Where the time goes (cProfile of `plan()` at 1M charts with caps, round_robin; 2-core machine shared
with other engineers, so CPU seconds are the figure to compare):
- before (issue 17): the event replay took ~2.2 s CPU of ~3.3 s: ~1M `Dispatcher.walk` calls (one
  per finish: a saturated pool starts one chart per finish), ~2.4M resumptions of the candidates
  generator and ~1M `_finish` calls; the heap operations themselves were ~0.5 s of it.
- after: `org_replay` runs the walk inline (one loop, a heap of plain chart numbers, ends of lists
  marked by a sentinel), ~1.1 s CPU, and once every chart left is of a capped org and the budget can
  no longer bind, it replays each org on its own: a running sum in numpy for a cap of 1 (the last
  ~180k charts of this scenario, in 6 orgs). The rest of `plan()` (~1.2-1.5 s CPU: columns, fair
  order, ids and times out) is shared with the uncapped path.
- after, the replay's cost per instant (issue 17, this session): at 1M charts with caps there are
  ~865k decision instants for ~990k charts (~797k of them start a single chart), so what each
  instant pays is the cost: a pop and a push on the finishes, a replace on the org heads, and a
  park and unpark of a capped org at its cap. The finishes are now a heap of floats (charts by time
  in a dict: a bare loop of 865k pop+push takes 0.20 s CPU on floats, 0.42 s on (time, chart)
  tuples), each org's charts are linked (`following[chart]`) and an org is parked as its start
  takes it to its cap. Old and new in one process, interleaved, best of 3 (CPU, load 4-8):
  round_robin 2.81 -> 2.67 s, deficit 2.60 -> 2.58 s (within this machine's noise). Steps of
  `plan()` at 1M with caps, CPU s, load average 5-6: `_queue` 0.27 (columns of 1M dataclasses),
  fair order 0.34, `_columns` 0.17, `_replay` 1.2-1.35, `_real_plan` 0.25, freeing the temporary
  lists ~0.3. What is left to reach 2 s is the per-instant walk in Python (~1.4 us an instant):
  it needs fewer instants (lanes batched where no cap can bind) or the walk compiled.
- the caps path, this session (issue 17: 1M with caps 2.9/3.1 s on a quiet machine). Profile
  (cProfile, then counts of the replay's events) of `plan()` at 1M charts with caps: `org_replay`
  1.13-1.21 s CPU of 2.47-2.73, the rest as above. Of the 1M charts, 816k start while the budget
  binds: 702k of uncapped orgs (70k of them dearer than one unit) and 115k of the 100 capped orgs;
  the last 173k (capped orgs only) take the closed-form tail. Every start paid for a finish popped
  with its chart's identity (a dict), its org's slot and a replace on a 500-entry heap of org heads,
  though only a capped org's finish can change who comes first. Now the charts of uncapped orgs are
  one stream (the line: the walk never skips them), the budget's finishes are bare floats, and only
  a capped org's finish (time, org, units) or an arrival interrupts the line, which between two
  such events is the lane simulation (one heapreplace per one-unit chart). Counts at 1M
  round_robin: 430k starts by one heap replace, 200k other line starts, 115k capped starts, 204k
  instants made by a capped finish or an arrival. Replay alone, old (a099fde) and new interleaved in
  one process, medians of 5 (CPU, load 10-18): round_robin 1.28-1.60 -> 0.78-0.83 s, deficit
  1.28-1.48 -> 0.74-0.92 s; the lane replay of the same charts without caps takes 0.31-0.36 s and
  `org_replay` on them 0.51-0.55 s. What is left above the lane replay: ~115k capped finishes, each
  an instant in Python (~3 us: its slot, the unparked head, its start), and the line's checks for
  a barrier, a dearer finish and a head ahead of it (~0.2 us a chart). Closing the rest to 2 s would
  take handing a lagging capped org's slot straight to its next chart (its own lanes, while no
  earlier head can take the unit) or the loop compiled.
- the caps path, session 7 (issue 17: 1M with caps 2.10 s deficit, 1.98 s round_robin on a quiet
  machine; aim <= 1.85). Where the time went (main, steps of `plan()` at 1M with caps timed apart,
  CPU s, load 4-5): queue 0.25, org codes 0.05, fair order 0.33-0.45 (the sort by created 0.09, the
  final sort by round 0.06 round_robin / 0.08 deficit: numpy's timsort on int64 and float keys),
  columns 0.14, replay 0.67-0.73, real plan 0.27, freeing 0.09. Inside the replay: setup 0.10 (a
  1M-entry link list 0.03), two tail checks 0.046 and the tail 0.04 (both mostly copies of the 1M
  units and durations into numpy), the loop ~0.5: 124k instants, 115k of them capped finishes, and
  of those 57k of an org whose next chart the line had not reached (nothing changes who comes
  first). Now (`org_replay`): a capped org is parked only when the walk meets its head at its cap
  (or a start takes it to its cap with its next chart already behind the line), so only a parked
  org's finish is an event (66k instants); its other finishes give their slots back when the walk
  next meets its head. A chart waiting for the budget counts the finishes before the barrier in one
  tight loop. The tail check and the cap-1 tail read the charts left, not 1M-entry copies; streams
  are per-org lists. Whole-number sort keys (rounds, priorities, org codes; created when it is
  whole seconds) sort by 16-bit radix passes (`order.stable_argsort`): the final sort 0.055 ->
  0.023 s round_robin, 0.077 -> 0.024 s deficit. Figures in callgrind instructions (repeatable on
  this shared machine; the scenario fed as columns, the same to both): replay alone at 1M
  round_robin 6.40G -> 5.18G (-19%); `plan()` at 1M with caps against main ced0cb0: round_robin
  12.55G -> 11.15G (-11.2%), deficit 12.65G -> 11.20G (-11.5%); bench_replan_plan's replay
  (1.25M charts, half of them dearer than a unit, 511k capped starts, most instants made by 250k
  arrivals) 10.83G -> 10.73G. CPU of `plan()` in one process, main and branch interleaved, medians of 4 (load 2.9-3.5):
  round_robin 2.40 -> 2.25 s, deficit 2.72 -> 2.44 s (both packages imported side by side, `plan`
  of one `Scenario` alternately). `.venv/bin/python bench/bench_core.py` at load 4.2-4.8 (00:53,
  a callgrind run of this session's beside it): 1M with caps round_robin 2.10 s CPU (6.9 s wall),
  deficit 2.22 s CPU (6.3 s wall); without caps 1.58 and 1.65 s CPU. Tried and dropped: a heap
  of the times of finishes that free more than a unit, to test a finish by one float comparison instead of a
  dict lookup (-2% of the replay here, but +1.2M heap operations and +3% in bench_replan_plan where
  half the charts are dearer); a lagging org's slot handed on at its wake-up without the walk (-2%
  of the replay beyond parking at start, for a second copy of the start). What is left: the walk in
  Python (~0.4 us a line chart against the lane replay's ~0.3) and ~1 us a wake-up (57k); fewer
  wake-ups need a lagging org's run committed as a batch, which must be undone when a chart ahead
  of it blocks on the budget (an arrival, a dearer head): not done.
- the plan command at 100k (issue 17: 1.12x the reference; 1.04-1.18x here): the difference was
  the scenario's checks, chart by chart (`io._queue` and its per-field helpers, ~0.2 s of ~0.65 s
  CPU), which the bare reference skips. `io._queue_by_columns` now reads and checks each field as a
  whole column (C passes and numpy, ~0.05-0.08 s); only input with a bad (or borderline) value is
  read chart by chart again, for the message naming it. Back to back, best of 5 (CPU): before
  1.13x and 1.17x, after 1.00x and 0.90x.
- After the merges of session 6 (quiet machine, 01:06-01:09 UTC; this machine is slower than
  the last session's), d9a2d48 then main, `plan()` at 1M: caps round_robin 2.90 -> 2.10 and 2.00 s,
  deficit 2.45 -> 2.09 and 1.99 s; no caps 1.62/1.71 -> 1.58-1.70/1.68-1.72 s. The plan command's
  ratio swung 1.00-1.11x for both (three interleaved --quick pairs: old 1.01/1.00/1.04x, new
  1.04/1.03/1.06x; the whole command's CPU, interleaved: old 0.62/0.58 s, new 0.58/0.60 s).
- The replay compiled (branch `jit`, issue 17: numba, `scheduling/core/compiled.py`; the pure
  replays unchanged, its reference). It takes a queue of 10k charts or more once loaded in the
  process; this bench loads it first, as the Celery worker does (printed apart, not in the
  figures). A load costs, CPU: import numba 0.22-0.30 s + the module 0.09 s + the kernel from its
  cache 0.26-0.28 s; the first process after a checkout or an edit compiles it instead, 4-7 s (9.8
  s at load 10+). Measured with `NUMBA_CACHE_DIR` set to an empty folder, three processes in a row.
  Replay stage alone at 1M (`planner._replay` on the same columns, `FAIRSCHED_COMPILED_CORE=0`
  and on, one process, 02:23, load 6.0): no caps (lanes) 0.35-0.39 -> 0.14-0.17 s CPU, caps
  0.76-0.86 -> 0.14-0.16 s (kernel 0.11-0.14, the lists of starts and ETAs 0.02-0.05). Interleaved,
  3 each, medians (03:30-03:38, load 8-14, so ~2x the quiet CPU): no caps round_robin 0.74 -> 0.29,
  deficit 0.77 -> 0.27; caps 1.76 -> 0.34 and 1.77 -> 0.34 s. Warm, it wins from ~100 charts
  (1k with caps: 1.8 -> 0.2 ms); cold, the load is won back only at ~1M charts with caps (~3M
  without), hence `replay.COMPILED_MIN_CHARTS_COLD`: the plan command at 100k (this bench's
  step 1) never imports numba. `.venv/bin/python bench/bench_core.py`, main ffcdd06 then this
  branch, back to back on a swamped machine (load 6-16, CPU figures ~2-3x the quiet ones): 1M no
  caps round_robin 4.08 -> 3.42 s CPU, deficit 4.37 -> 3.59; caps 5.94 -> 3.70, 6.25 -> 3.34; the
  command at 100k 1.02x -> 1.07x (pure on both: noise). To be measured again on a quiet machine.
- The replays behind one seam (`scheduling/core/replay/`: the reference walk, the lanes, the
  compiled one; `org_replay`, the pure fast path with caps described above, deleted, since this
  bench, like the worker, takes the compiled replay at 1M). `.venv/bin/python bench/bench_core.py`,
  before (5d639fd) then after, 06:10-06:30 UTC, load 5-7 (wall 3-4x the CPU: CPU is the figure), CPU
  s at 1M: no caps round_robin 1.86 -> 1.73, deficit 1.90 -> 1.82; caps 2.05 -> 2.10, 2.11 -> 2.15
  (within noise: the compiled replay on both). With `FAIRSCHED_COMPILED_CORE=0` (pure; the caps
  path was `org_replay`, now the reference `EventReplay`): 1M caps 3.01 -> 5.99 and 3.35 -> 6.74 s
  CPU, 100k caps 0.33 -> 0.48 s; no caps (lanes) unchanged. The cold threshold moved to match: a
  process that has not loaded the kernel plans 100k capped charts in 0.60 s pure against 0.21 s
  compiled + 0.79 s to load it, 200k in 1.22 s against 0.37 + 0.8 s, 400k in 2.67 against 0.93 +
  0.8 s, so `replay.COMPILED_MIN_CHARTS_COLD` is 200k (was 1M). The reasons (`waiting_reasons`,
  now read from `Dispatcher.walk` at `now`) at 1M: 0.08-0.13 -> 0.12-0.16 s CPU, the same reasons.
- After the session's merges (#27's walk and data crossing; 2026-12-03 08:14 UTC, quiet machine, load
  1.0): `plan()` at 1M, wall: no caps round_robin 1.91 s, deficit 1.74 s; caps 1.50 s and 1.62 s
  (all within the 2 s target); the plan command at 100k 1.14 s, 1.13x the bare reference.

Figures moved here from the core's docstrings and comments (#27), as measured when they were written:
- `order._sort_by_keys_then_id`: a backlog whose `created` is in whole seconds (as a snapshot reads
  it) has ~86k runs of tied keys at 1M charts; reading the table in id order leaves few of them to
  sort by id. Sorting those runs on a list, not on numpy slices read and written per run: a slice
  per run cost twice the sort itself.
- `replay.compiled`: sorting the later charts by `available_at` inside the kernel doubled the time
  of its first compile, so numpy sorts them before the call.

Figures behind `fairsched.celery.load_compiled_core`, as measured when it was written: loading the
compiled replay costs a process ~0.6 s; in a fresh checkout numba takes ~4-7 s of CPU to compile it.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import random
import sys
import time
from collections.abc import Callable
from functools import partial

import numpy as np

from scheduling.core import (
    OrgPolicy,
    QueuedChart,
    RunningChart,
    Scenario,
    load_compiled_replay,
    parse_scenario,
    plan,
    plan_to_json,
)

NOW = 1_000_000.0
BUDGET = 200
ORG_COUNT = 500
# Seconds of `plan()` by chart count (issue 17).
PLAN_TARGETS = {1_000_000: 2.0}
# The plan command against a bare reference doing the same work (issue 17).
COMMAND_TARGET_RATIO = 1.0


def scenario_json(chart_count: int, *, policy: str, capped: bool, seed: int = 7) -> dict[str, object]:
    """A saturated scenario: orgs of skewed sizes and weights, mixed costs, priorities, pauses.

    With `capped`, one org in five has a cap of 1 to 3 and one chart in a hundred is in backoff.
    """
    rng = random.Random(seed)
    org_names = [f"org{index:03d}" for index in range(ORG_COUNT)]
    org_sizes = [1.0 / (rank + 1) for rank in range(ORG_COUNT)]
    orgs: dict[str, dict[str, object]] = {}
    for index, name in enumerate(org_names):
        policy_json: dict[str, object] = {"weight": rng.choice((1, 1, 1, 2, 3, 5))}
        if capped and index % 5 == 0:
            policy_json["max_concurrency"] = rng.randint(1, 3)
        orgs[name] = policy_json
    queued = []
    chart_orgs = rng.choices(org_names, weights=org_sizes, k=chart_count)
    for index, org in enumerate(chart_orgs):
        chart: dict[str, object] = {
            "id": f"c{index:07d}",
            "org": org,
            "created": round(NOW - rng.uniform(0, 86_400), 3),
            "avg": round(rng.uniform(60, 3_600), 1),
        }
        if rng.random() < 0.1:
            chart["cost"] = rng.choice((2, 3, 4))
        if rng.random() < 0.05:
            chart["priority"] = rng.choice((-1, 1, 2))
        if rng.random() < 0.002:
            chart["high_priority"] = True
        if rng.random() < 0.01:
            chart["paused"] = True
        if capped and rng.random() < 0.01:
            chart["available_at"] = round(NOW + rng.uniform(0, 7_200), 1)
        queued.append(chart)
    running = [
        {
            "id": f"r{index:04d}",
            "org": rng.choice(org_names),
            "started": round(NOW - rng.uniform(0, 3_000), 1),
            "avg": round(rng.uniform(60, 3_600), 1),
        }
        for index in range(BUDGET)
    ]
    return {
        "now": NOW,
        "budget": BUDGET,
        "policy": policy,
        "quantum": 1,
        "aging": {"step": 3_600, "cap": 2},
        "orgs": orgs,
        "queued": queued,
        "running": running,
    }


def best_of(runs: int, action: Callable[[], object]) -> tuple[float, float]:
    """The fastest of `runs` runs of `action`: (wall-clock seconds, CPU seconds of this process).

    On a shared machine the CPU time shows the work itself when other processes compete.
    """
    timings = []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        action()
        timings.append((time.perf_counter() - wall, time.process_time() - cpu))
    return min(timings)


def bench_command() -> None:
    """Step 1: the plan command's work against bare JSON reading and writing."""
    document = json.dumps(scenario_json(100_000, policy="round_robin", capped=False)).encode()

    def command() -> str:
        return json.dumps(plan_to_json(plan(parse_scenario(json.loads(document)))))

    def json_only() -> str:
        return json.dumps(json.loads(document))

    if json.loads(reference_command(document)) != json.loads(command()):
        print("  (the bare reference does not give the command's plan: its ratio below means nothing)")
    json_wall, json_cpu = best_of(3, json_only)
    reference_wall, reference_cpu = best_of(3, lambda: reference_command(document))
    command_wall, command_cpu = best_of(3, command)
    print(f"plan command, 100,000 charts / {ORG_COUNT} orgs / budget {BUDGET}, JSON in and out:")
    print(f"  scenario JSON: {len(document):,} bytes")
    print(f"  command (loads + parse + plan + dumps): {command_wall:.3f} s wall, {command_cpu:.3f} s CPU")
    print(f"  json.loads + json.dumps only:           {json_wall:.3f} s wall, {json_cpu:.3f} s CPU")
    print(f"  bare numpy + heap-of-lanes reference:   {reference_wall:.3f} s wall, {reference_cpu:.3f} s CPU")
    print(f"  ratio to json only:                     {command_wall / json_wall:.2f}x")
    ratio = command_cpu / reference_cpu
    print(f"  ratio to the reference (CPU):           {ratio:.2f}x  target <= {COMMAND_TARGET_RATIO:.1f}x")


def reference_command(document: bytes) -> str:
    """The plan command's work written bare, for a round_robin scenario without caps or backoff (the
    one step 1 plans): json.loads, columns as numpy arrays, the order by two lexsorts (ids ranked
    once as the last key), the heap of lanes, json.dumps. No checks, no dataclasses."""
    data = json.loads(document)
    now, budget, aging, orgs = data["now"], data["budget"], data["aging"], data["orgs"]
    queued, running = data["queued"], data["running"]
    codes: dict[str, int] = {name: index for index, name in enumerate(orgs)}
    org = np.array([codes.setdefault(chart["org"], len(codes)) for chart in queued], dtype=np.intp)
    weight = np.array([orgs.get(name, {}).get("weight", 1) for name in codes], dtype=np.int64)
    created = np.array([chart["created"] for chart in queued], dtype=np.float64)
    avg = np.array([chart["avg"] for chart in queued], dtype=np.float64)
    units = np.minimum(np.array([chart.get("cost", 1) for chart in queued], dtype=np.int64), budget)
    priority = np.array([chart.get("priority", 0) for chart in queued], dtype=np.float64)
    priority += np.minimum(aging["cap"], np.floor(np.maximum(0, now - created) / aging["step"]))
    high = np.array([chart.get("high_priority", False) for chart in queued], dtype=bool)
    paused = np.array([chart.get("paused", False) for chart in queued], dtype=bool)
    ids = [chart["id"] for chart in queued]
    id_rank = np.empty(len(ids), dtype=np.intp)
    id_rank[np.argsort(np.array(ids))] = np.arange(len(ids))
    eligible = ~paused & (weight[org] > 0)
    fair = np.flatnonzero(eligible & ~high)
    fair = fair[np.lexsort((id_rank[fair], created[fair], -priority[fair], org[fair]))]
    first_of_org = np.flatnonzero(np.r_[True, org[fair][1:] != org[fair][:-1]])
    k = np.arange(len(fair)) - np.repeat(first_of_org, np.diff(np.r_[first_of_org, len(fair)]))
    rounds = k // weight[org[fair]]
    fair = fair[np.lexsort((id_rank[fair], created[fair], -priority[fair], rounds))]
    top = np.flatnonzero(eligible & high)
    top = top[np.lexsort((id_rank[top], created[top]))]
    order = np.concatenate((top, fair))
    running_finish = [max(now, chart["started"] + chart["avg"]) for chart in running]
    lanes = sorted(
        finish
        for finish, chart in zip(running_finish, running, strict=True)
        for _ in range(min(chart.get("cost", 1), budget))
    )
    lanes = lanes[max(0, len(lanes) - budget) :] + [now] * max(0, budget - len(lanes))
    heapq.heapify(lanes)
    starts, etas = [], []
    for chart_units, chart_avg in zip(units[order].tolist(), avg[order].tolist(), strict=True):
        if chart_units == 1:
            start = lanes[0]
            eta = start + chart_avg
            heapq.heapreplace(lanes, eta)
        else:
            for _ in range(chart_units):
                start = heapq.heappop(lanes)
            eta = start + chart_avg
            for _ in range(chart_units):
                heapq.heappush(lanes, eta)
        starts.append(start)
        etas.append(eta)
    order_ids = [ids[index] for index in order.tolist()]
    left_out = [ids[index] for index in np.flatnonzero(~eligible).tolist()]
    run_ids = [chart["id"] for chart in running]
    start_of = (
        dict(zip(order_ids, starts, strict=True)) | dict.fromkeys(left_out) | {c["id"]: c["started"] for c in running}
    )
    eta_of = (
        dict(zip(order_ids, etas, strict=True))
        | dict.fromkeys(left_out)
        | dict(zip(run_ids, running_finish, strict=True))
    )
    finish_org = np.concatenate((org[order], [codes[chart["org"]] for chart in running])).astype(np.intp)
    latest = np.full(len(codes), -np.inf)
    np.fmax.at(latest, finish_org, np.array([*etas, *running_finish]))
    org_clear = {
        name: (None if clear == -np.inf else clear) for name, clear in zip(codes, latest.tolist(), strict=True)
    }
    clears = [clear for clear in org_clear.values() if clear is not None]
    plan_json = {"order": order_ids, "start": start_of, "eta": eta_of, "org_clear": org_clear,
                 "global_clear": max(clears) if clears else None}  # fmt: skip
    return json.dumps(plan_json)


def dataclass_scenario(data: dict[str, object]) -> Scenario:
    """The `Scenario` of a scenario JSON, built from dataclasses as the live system builds it."""
    parsed = parse_scenario(data)
    return dataclasses.replace(
        parsed,
        queued=list(parsed.queued),
        running=[RunningChart(**dataclasses.asdict(chart)) for chart in parsed.running],
        orgs={name: OrgPolicy(**dataclasses.asdict(org)) for name, org in parsed.orgs.items()},
    )


def bench_plan(sizes: list[int]) -> None:
    """Step 2: `plan()` compute time by size, policy and caps."""
    wall, cpu = time.perf_counter(), time.process_time()
    loaded = load_compiled_replay()  # as the Celery worker does before its first plan
    print(
        f"compiled replay {'loaded' if loaded else 'not available'} first, as the worker does: "
        f"{time.perf_counter() - wall:.2f} s wall, {time.process_time() - cpu:.2f} s CPU (not in the figures below)"
    )
    print("plan() on a Scenario of QueuedChart dataclasses (construction not timed):")
    print(f"  {'charts':>9}  {'policy':<11}  {'caps':<4}  {'wall s':>7}  {'CPU s':>7}  {'us/chart':>8}  target")
    for size in sizes:
        for capped in (False, True):
            base = dataclass_scenario(scenario_json(size, policy="round_robin", capped=capped))
            assert all(isinstance(chart, QueuedChart) for chart in base.queued[:1])
            for policy in ("round_robin", "deficit"):
                scenario = dataclasses.replace(base, policy=policy)
                wall, cpu = best_of(3 if size <= 100_000 else 2, partial(plan, scenario))
                label = "yes" if capped else "no"
                target = f"<= {PLAN_TARGETS[size]:.1f} s" if size in PLAN_TARGETS else "-"
                per_chart = wall / size * 1e6
                print(f"  {size:>9,}  {policy:<11}  {label:<4}  {wall:>7.3f}  {cpu:>7.3f}  {per_chart:>8.2f}  {target}")


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    bench_command()
    bench_plan([10_000, 100_000] if quick else [10_000, 100_000, 1_000_000])


if __name__ == "__main__":
    main()
