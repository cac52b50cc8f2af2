"""The operators' dashboard in headless Chromium against a live daphne: first paint and update lag.

Run: `.venv/bin/python bench/bench_dashboard.py [--size 100000] [--runs 5] [--levers 10]`.
It uses its own database (`fairsched_bench_dashboard` on the server of DATABASE_URL, created and
dropped here) and REDIS_URL's Redis for the channel layer (prefix `bench-dashboard`); BENCH_NAME
replaces both names, so that two checkouts can be measured back to back without sharing either.

1. Seed `size` queued charts over 500 orgs (COPY) and run one real replan, which writes every
   position, predicted start and ETA, the orgs' clear-times and a queue sample.
2. First paint: open /dashboard/ in a fresh browser context `runs` times; report, from navigation
   start, the server's time to first byte, the queue table holding its rows (the page's
   `queue-painted` mark) and the rest drawn (`dashboard-painted`: 500 org rows, plots, events),
   and a jump to row size-10 of the virtualized queue (scroll -> rows fetched and drawn).
3. Update lag: two browsers on the dashboard; one pulls a lever (hold, then release, alternately)
   through the API as the page does (POST /api/v1/orgs/org-0/hold/ with the session's CSRF token);
   the other observes its org row flip when the org table's partial is swapped in. Lag = lever POST
   sent -> the other page shows it (one clock: both pages run in one Chromium on this machine). The
   lags are printed in order too: the first lever is pulled as soon as both sockets are open, while
   the pages' first resync (the header and the whole org table) is still on its way.

Measured (#15), `--runs 5 --levers 20`, this code against 0a246e8 (before the redesign: the page
inlined every table as JSON and drew it), run back to back in six interleaved pairs on a shared,
loaded two-core machine (load average 5-15); medians over the pairs, ms:

                                   0a246e8   now
    time to first byte                440    189
    first paint (queue filled)        790    595
    whole page drawn                 2396   1548
    update lag, median               1092    388
    update lag, worst lever          2271   1088   (worst after the first lever: 2271 vs 756)

The quietest pair (load ~5): first paint 598 vs 495, lag 270 vs 244, worst 522 vs 665. The worst is
always the first lever here: its hint waits for the watcher's first resync (the header and 500 org
rows, 400 KB: ~250 ms of server time, of which the aggregate of every active chart is 70-100 ms and
the rows ~60 ms, then the swap of 500 rows), and then the org's row (~80 ms for org-0's 28k charts).
Before this change the rows held every lever's form (2.2 KB a row, 1.1 MB) and that lever took
1-4 s; the old page had its org table inline, so its first lever did not wait for one.

On a quiet machine (session 5, after every branch merged; the lever loop waits for the watcher's org
row, see `update_lag`), 0a246e8 against main in two interleaved pairs, medians of each run, ms:

                                   0a246e8      main
    time to first byte                188/201    94/50
    first paint (queue filled)        416/478   376/285
    whole page drawn                 1083/1261  964/688
    update lag, median                292/259   211/140
    update lag, worst of 20 levers    484/493   285/181

Under a loaded machine (load 2-5, an engineer's CPU-bound runs beside it), two earlier pairs gave
first paint 428/422 (old) against 494/640 (main) while every other figure stayed better: the new
page's first paint is the one figure that suffers more from a busy machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from backlog import drop_database, recreate_database, seed_backlog, use_database

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BENCH_NAME = os.environ.get("BENCH_NAME", "bench_dashboard")
BENCH_DB = f"fairsched_{BENCH_NAME}"
use_database(BENCH_DB)
os.environ["CHANNELS_PREFIX"] = BENCH_NAME.replace("_", "-")
# Playwright's sync API runs its own loop on this thread; the ORM calls in between are plain sync code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def seed(size: int, orgs: int = 500) -> Any:
    from django.contrib.auth import get_user_model

    seed_backlog(size, orgs)
    return get_user_model().objects.create_user("operator", is_staff=True)


def open_dashboard(browser: Any, base_url: str, user: Any) -> tuple[Any, Any]:
    from tests.dashboard.live import session_cookie

    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    context.add_cookies([session_cookie(user, base_url)])
    page = context.new_page()
    return context, page


def first_paint(browser: Any, base_url: str, user: Any, size: int, screenshot: Path | None = None) -> dict[str, float]:
    context, page = open_dashboard(browser, base_url, user)
    page.goto(base_url + "/dashboard/")
    page.wait_for_selector("body[data-ready='1']")
    timing = page.evaluate(
        """() => {
            const nav = performance.getEntriesByType("navigation")[0];
            const queue = performance.getEntriesByName("queue-painted")[0];
            const all = performance.getEntriesByName("dashboard-painted")[0];
            return {ttfb: nav.responseStart, queue: queue.startTime, all: all.startTime};
        }"""
    )
    page.wait_for_selector("body[data-live=live]")
    if screenshot is not None:
        screenshot.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(screenshot))
    started = time.perf_counter()
    target = size - 10
    page.evaluate(f"() => {{ document.querySelector('#queue-scroll').scrollTop = {target} * 28; }}")
    page.wait_for_selector(f"#queue-rows .vt-row[data-chart] .pos:text-is('{target}')")
    timing["jump"] = (time.perf_counter() - started) * 1000
    context.close()
    return timing


def update_lag(browser: Any, base_url: str, user: Any, levers: int) -> list[float]:
    _, operator = open_dashboard(browser, base_url, user)
    _, watcher = open_dashboard(browser, base_url, user)
    for page in (operator, watcher):
        page.goto(base_url + "/dashboard/")
        page.wait_for_selector("body[data-live=live]")
    # Levers are pulled on a dashboard that shows the org's row: before that, the watcher is still
    # loading, and the row's arrival is the page's first paint (`whole page drawn` above), not a lag.
    # (The old page inlined its org table; the new one brings it with the socket's first resync.)
    watcher.wait_for_selector('#org-rows tr[data-org="org-0"] [data-hold]')
    lags = []
    for i in range(levers):
        action, shows = ("hold", "Release") if i % 2 == 0 else ("release", "Hold")
        watcher.evaluate(
            """(shows) => {
                // The row is swapped in whole: watch the table, read the row's button afresh.
                const table = document.querySelector('#org-rows');
                window.__seen = new Promise((resolve) => {
                    const check = () => {
                        const button = table.querySelector('tr[data-org="org-0"] [data-hold]');
                        if (button && button.textContent === shows) { resolve(Date.now()); return true; }
                    };
                    if (check()) return;
                    new MutationObserver((_, observer) => { if (check()) observer.disconnect(); })
                        .observe(table, {childList: true, characterData: true, subtree: true});
                });
            }""",
            shows,
        )
        sent = operator.evaluate(
            """async (action) => {
                const sent = Date.now();
                const csrf = document.querySelector('meta[name="csrf-token"]').content;
                const response = await fetch(`/api/v1/orgs/org-0/${action}/`, {
                    method: "POST", headers: {"Content-Type": "application/json", "X-CSRFToken": csrf}, body: "{}"});
                if (!response.ok) throw new Error("lever failed: " + response.status);
                return sent;
            }""",
            action,
        )
        seen = watcher.evaluate("() => window.__seen")
        lags.append(float(seen - sent))
    return lags


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--levers", type=int, default=10)
    parser.add_argument("--keep", action="store_true", help="keep the bench database afterwards")
    args = parser.parse_args()

    recreate_database(BENCH_DB)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections
    from playwright.sync_api import sync_playwright

    from scheduling.replan import plan_refresh
    from tests.dashboard.live import daphne, launch_chromium

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    user = seed(args.size)
    seeded = time.perf_counter() - started
    started = time.perf_counter()
    result = plan_refresh()
    print(
        f"seeded {args.size:,} queued charts in {seeded:.1f}s; replan wrote {result.ordered:,} positions"
        f" in {time.perf_counter() - started:.1f}s"
    )
    connections.close_all()

    try:
        # One daphne process, its views one at a time (as one web worker runs them); its connections
        # pooled, as the web process's are in production (gunicorn_conf.py, `make run`).
        server_env = {"DATABASE_URL": os.environ["DATABASE_URL"], "FAIRSCHED_DB_POOL": "1"}
        with daphne(server_env) as base_url, sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            # Warm-up (Python imports, connections, caches), kept as a screenshot.
            first_paint(browser, base_url, user, args.size, ROOT / "test-artifacts" / "bench-dashboard.png")
            paints = [first_paint(browser, base_url, user, args.size) for _ in range(args.runs)]
            lags = update_lag(browser, base_url, user, args.levers)
            browser.close()
    finally:
        connections.close_all()
        if not args.keep:
            drop_database(BENCH_DB)

    def line(name: str, values: list[float]) -> str:
        return f"{name:<34} median {statistics.median(values):7.0f} ms   max {max(values):7.0f} ms"

    print(f"\nDashboard with {args.size:,} queued charts, 500 orgs (Chromium {args.runs} runs after a warm-up)")
    print(line("time to first byte of /dashboard/", [p["ttfb"] for p in paints]))
    print(line("first paint (queue table filled)", [p["queue"] for p in paints]))
    print(line("whole page drawn (orgs, plots)", [p["all"] for p in paints]))
    print(line(f"jump to row {args.size - 10:,} (virtualized)", [p["jump"] for p in paints]))
    print(line(f"update lag, {args.levers} levers", lags))
    print("update lags in order (ms):", " ".join(f"{lag:.0f}" for lag in lags))


if __name__ == "__main__":
    main()
