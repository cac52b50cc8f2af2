"""Benchmark the REST API on a live server: ingest (one by one and in bulk) and chart status latency.

    .venv/bin/python bench/bench_api.py [--server gunicorn|daphne] [--web-workers 2] [--single 500]
        [--submit-clients 10] [--bulk-requests 5] [--clients 50] [--per-client 40] [--pace 1,0.5]

1. Create a fresh database `<name>_bench_api` on the server of DATABASE_URL, migrate it, make an org,
   a workflow and one org token per client (the rate limits stay on, at their production defaults:
   each client is a caller of its own, as 50 pollers are).
2. Start the web server on a free port of 127.0.0.1 against that database: the Procfile's `web`
   command (gunicorn with `--web-workers` uvicorn workers, pooled database connections), or with
   `--server daphne` one daphne process (what `make run` used before), for a before/after figure.
3. Ingest: `--single` POSTs of one chart, spread over `--submit-clients` clients one after another
   each (each client is one token that keeps to the write rate: calls at least 1/20 s apart, and a
   429 waited out and asked again, counted); then `--bulk-requests` POSTs of 10,000 (0: none). Besides
   throughput and latency, the single submits' CPU a chart: the web server's, the database backends'
   (the benchmark's database's sessions, from /proc) and this client's; and how busy the whole
   machine was meanwhile (/proc/stat: near 100%, the cores are the limit, not a lock).
4. Status: `--clients` threads, each with its own keep-alive connection and token, GET a chart
   `--per-client` times back to back (closed loop: the server is never idle), then paced at one
   request per client every `--pace` seconds (how status pages and pollers really call).
   p50/p95/p99 of each run; a 429 counts as an error.
5. Stop the server and drop the database. Every loop is bounded; the script prints its figures.

Target for bulk ingest (issue 17): >= 20,000 charts/s. Where a 10,000-chart bulk's time went before
(cProfile of `chart_submit_bulk`): ~80% in `bulk_create` of the charts and of their events (Django
preparing 260,000 values one by one, psycopg adapting them as query parameters), the rest the commit.
Then: one validating pass that writes each row once (payload JSON text included), a COPY into a
temporary table, and one INSERT ... SELECT that also writes the events and returns (id, external id).

Issue 17, where the rest went (2026-11-30, 18:46-19:10 UTC, load average 5-8). cProfile of one
10,000-chart request through the Django test client in process (view, service, database), statement
times (CaptureQueriesContext), EXPLAIN (ANALYZE, BUFFERS, WAL) of the statements. Before (a3bd2fd):
0.45-0.55 s of CPU a request, 0.9-3 s wall, most of it waiting for PostgreSQL.

- Python's cyclic collector: a third of the CPU (0.55 -> 0.30 s with it off). A bulk allocates some
  200,000 containers; the full collections walk every object of the process. Paused over the bulk
  view (`common.memory.collector_paused`): nothing it builds is a cycle.
- Building the answer's charts: `Model.__init__` per chart (22 fields set through descriptors, then
  org, workflow and the plan's fields): a quarter of the rest. They are built from the values written
  as `from_db` leaves an instance (`charts.services._written_chart`, pinned field by field in a test).
- Validation: `id_problem` asked unicodedata about every character of every id, and every payload was
  walked and then encoded. ASCII ids are judged by `isprintable()`; a payload by its encoded text
  (`strict.encoded_is_clean`), walked only when that text is suspect (same answers: tests).
- Strict JSON (`bench/bench_strict_json.py`): ~50 ms of which json.loads 10, the duplicate-key hook 15,
  the depth walk 10-20 and a regex over the whole text 9. The regex looked for a raw NUL or surrogate,
  which only text given as a string can hold (the parser refuses raw controls, strict UTF-8 refuses
  surrogates): now run only there. The hook and the walk stay: they are the guarantees.
- The database. The lookup of existing ids joined the staged rows with the org's charts, and the
  planner (no statistics on a temporary table) hashed every chart of the org: 116 ms at 100,000
  charts, 275 ms under EXPLAIN, growing with the org; the insert's NOT EXISTS did it a second time.
  Now no lookup: the INSERT skips repeats on the unique (org, external id) index as it writes
  (ON CONFLICT DO NOTHING), only repeats are read, and a conflict or a full queue found after it
  raises and takes the insert back. Tried and dropped: `= ANY(ARRAY(SELECT unnest(ids)))` (an index
  probe per id, 20 ms at 500,000, but on a table not yet analyzed a scan that searches the array per
  row: 6 s for 10,000 ids among 20,000 charts) and `= ANY(ids)` (priced above a parallel scan: 120 ms).
- Writing: 10,000 charts are 70,000 WAL records (the row and 6 indexes, 5.8 MB), their events 40,000
  (3.2 MB); the insert takes 0.26-0.31 s and the commit (flushing that WAL) 0.25-0.45 s at load 7.
  The org's own index was covered by the unique (org, external id) one: dropped (charts 0008), 5
  indexes a chart now.

After, in process: 0.14-0.17 s of CPU a request; the rest is PostgreSQL's insert and commit.
Back to back through the server (`--single 0 --bulk-requests 3 --clients 2 --per-client 5 --pace 1`),
main (a3bd2fd) then this branch, three times, 19:11-19:13 UTC, load average 6.6 falling to 3.8:

    main:   14,783  11,476  7,827 charts/s; web CPU 0.41  0.50  0.46 s a request
    branch: 22,907  21,793  9,852 charts/s; web CPU 0.16  0.19  0.19 s a request

The web CPU a request (what other load moves least) is 2.5x less; the third pair ran while the
database was busy with other engineers' work. What is left is the database's: at load 7 the insert
and commit take ~0.55 s, which alone holds one request stream under 18,000/s. Not taken: COPY straight into the charts
table with ids drawn from its sequence (skips the temporary table, ~30-50 ms), dropping an index of
the events (`chart_event_at_idx` serves the feeds) or of workflows (the forecast reads by workflow),
and an asynchronous commit (an acknowledged chart must be durable).

Where the time went (issue 14 item 5; profiled on 2026-11-30 on this 2-core machine, shared with three
other engineers' test runs, load average 4-7: every figure below moves by tens of percent run to run).
Profiles: pyinstrument over the WSGI handler in process, the ASGI application called in process with
CPU time counted over every thread, and `py-spy record -p <gunicorn worker>` during this benchmark.

- ASGI hops. Django's ASGI handler built the middleware stack in async mode, so every MiddlewareMixin
  middleware (security, sessions, CSRF, auth, messages, clickjacking, CSP) ran process_request and
  process_response each in a hop to the sync thread, and the sync-only guards hopped back to the event
  loop: about fifteen hand-overs a request. `fairsched.asgi.OneHopASGIHandler` builds it in sync mode and
  calls it once in the sync thread. CPU per status read, ASGI in process: 7.2-8.0 ms -> 6.1-7.1 ms.
- ORM query building. The token lookup (annotate + subquery + select_related) and the chart read
  (the plan annotations + select_related + first()) spent most of their 1.4 ms and 2.1 ms building and
  compiling the query. Both are now one constant statement written from the models' columns
  (`common/rows.py`; still 2 queries, pinned in tests/api/test_charts.py). CPU per status read
  through the sync stack in process: 4.5-5.9 ms -> 3.3 ms; through ASGI in process: 4.7 ms wall.
- Middleware: the request guards, CSP and axes together were under 0.3 ms of a status read: not a cause.
- Submit: the after-commit broadcast (async_to_sync to two groups: two hops to the worker's busy event
  loop and Redis round trips) and the replan request (Redis, Celery publish) ran inside the request,
  holding the worker's only sync thread. They now go to a sender thread (`common/events.py`; replan
  requests queued together are one), and a new chart is answered from what was written instead of read
  again. One submit after another through the ASGI application in process: 145 ms -> 14.5 ms.
- Workers: 4 gunicorn workers instead of 2 on 2 cores gave no more (150 req/s back to back, 36 submits/s):
  the machine is CPU-bound; `WEB_CONCURRENCY` stays 2.

Back to back, the same command (`--single 300 --bulk-requests 1 --pace 0.5`, rate limits on), the code
before (a3fb629) then after, 16:39-16:41 UTC:

    before: single submit 41 charts/s (p50 168 ms); status back to back 124 req/s, p95 542 ms;
            paced 1 per 0.5 s p50 42 ms, p95 266 ms
    after:  single submit 51 charts/s (p50 135 ms); status back to back 173 req/s, p95 608 ms;
            paced 1 per 0.5 s p50 11 ms, p95 31 ms (meets p95 <= 50 ms)

After that, the scope's membership queryset is built only when it runs (7% of a status read, left in
the profile above); the same command at 16:44 UTC, load average 2.8 (a quieter moment, not back to back
with a before run):

    after:  single submit 55 charts/s (p50 137 ms); status back to back 322 req/s, p50 125 ms,
            p95 352 ms; paced 1 per 0.5 s p50 6.7 ms, p95 12 ms

Still short of the goals on this machine: 350 req/s back to back and 200 submits/s. One submit at a time
is 14 ms through the server (`--single 100 --submit-clients 1`, write rate off); ten clients queue
behind two workers whose CPU share is what the other processes on the machine leave.

Issue 14 item 5, continued (2026-11-30, 17:40-18:25 UTC, the machine shared with four other engineers'
runs, load average 3-15). Profiled with cProfile (wall and CPU timers) over the sync handler in process,
the ASGI application driven in process, per-thread CPU of one uvicorn process from /proc, and statement
counts and times (CaptureQueriesContext).

- The benchmark itself. gunicorn's master listens before its workers have loaded the application, so
  the single submits started while both workers still imported (~1.5 s of CPU each): that start fell
  into the single-submit figure (and its first requests waited for it). The benchmark now waits until
  the server is idle, and prints the web server's CPU per request (master and workers, from /proc),
  the figure that other load on the machine moves least.
- Submit, database. A single submit was 10 statements; creating and dropping the temporary table the
  bulk path stages its rows in wrote PostgreSQL's catalog (3 statements, and most of the commit's
  work). Up to 100 rows are now a VALUES list in the same statements (COPY above that): 8 statements,
  pinned in tests/api/test_charts.py (the status read stays at 2). Merging the org's lock with the
  read of existing charts would save one more, but is wrong: a `FOR UPDATE` that waits re-checks only
  the locked row, so a concurrent duplicate committed meanwhile would not be seen.
- Submit, CPU. The org an org token implies, the workflows and the org's lock were ORM queries built
  per request (~30% of a submit's CPU); they are constant statements now (`rows.instances_where`).
  In process, sync handler: 8.5 -> 5.7 ms CPU a submit, wall 30 -> 8-15 ms.
- Status read. DRF's ModelSerializer built its fields per object (0.59 ms of a ~2.5 ms read); they are
  built once per class (`common.outputs.OutputFieldsOnce`, same output: 0.07 ms).
- First requests. A worker's first request imported the URLconf and every view (~0.3 s of CPU); the
  ASGI application loads them when the worker starts.
- Left as they were: the commit's fsync (synchronous_commit stays on: an acknowledged chart is
  durable), the middleware (CSP, sessions, axes: under 10% of a read), the worker count.

Back to back, the same command (`--single 300 --bulk-requests 3 --pace 0.5`, rate limits on), main
(ec35beb) then this branch, twice, 18:19-18:23 UTC, load average 4.2-6.6:

    main:   single 41 and 61 charts/s, web CPU 14.1 and 11.2 ms a chart; status back to back 215 and
            215 req/s, p95 440 and 511 ms, web CPU 4.41 and 3.65 ms a request; paced p95 26 and 102 ms
    branch: single 110 and 80 charts/s, web CPU 7.8 and 7.1 ms a chart; status back to back 259 and
            266 req/s, p95 383 and 367 ms, web CPU 3.08 and 3.20 ms a request; paced p95 18 and 66 ms

At a quieter moment (18:15, load 6) the branch made 436 req/s back to back (p95 241 ms), 140 single
submits/s and a paced p95 of 14 ms. With the other engineers' runs on the same two cores, neither the
350 req/s at p95 150 ms nor 200 submits/s can be shown here; the web CPU per request is what the code
controls (at ~3 ms a status read, 350 req/s take about one core in the web workers; PostgreSQL, Redis
and the 50 client threads share the other). Bulk ingest (the COPY path, unchanged) moved 3.7k-12.7k
charts/s in these runs: noise, not a change.

Issue 14 item 5, the status read again (2026-11-30, 20:50-21:40 UTC, load average 5 rising to 20: five
other engineers' suites on the same two cores). cProfile (thread CPU timer) and pyinstrument over the
WSGI handler in process, 2,000 status reads of a 10,100-chart org, then the ASGI application driven in
process; shares of the profiled CPU of one read (a099fde):

- Django's handler and middleware before the view: ~33% (django-csp builds its header from the
  settings on every response, twice: 8%; URL resolution through the router's patterns: 4%).
- DRF's machinery around the work: ~15% (Request wrapping, content negotiation 3.5%, the permission
  and throttle loops, finalize_response, the TemplateResponse rendering).
- Token lookup 19% and chart read 18%: each a round trip, most of it psycopg and Django's cursor
  wrapper; PostgreSQL plans each statement anew (warm: ~0.2 ms of planning, 0.05 ms executing).
- The throttle: one Redis round trip (EVALSHA) already, 10%; the serializer 8%.
- Under ASGI (uvicorn's worker) ~1.2 ms more a read than the WSGI handler: the event loop, the
  request's own thread (asgiref's per-request ThreadSensitiveContext starts one: ~0.13 ms) and the
  hand-overs.

What changed: `charts/status_api.py` answers a plain token read (GET, no query string, a JSON Accept)
without DRF's generic machinery, in one statement (the token with its user and role, and the chart with
its org, workflow and plan), with the same checks through the same functions (`token_accepted`,
`token_used`, `CallerReadThrottle.allow`, `scope_for`) and the same bytes (`ChartDetailSerializer`,
`JSONRenderer`, `Vary` and `Allow`: tests/api/test_status_read.py). Anything else goes to the viewset.
No token cache: a revoked token, a member who left, a deactivated user is refused on the next read.

In process, the old code (a099fde) and this one alternately, five runs each of 1,000 reads, CPU of the
process a read (median, min):

    WSGI handler:      2.58 (2.51) -> 2.06 (1.98) ms
    ASGI application:  4.14 (3.72) -> 3.28 (2.87) ms; wall 12.1 -> 8.8 ms (one round trip fewer)

Through the server (`--single 300 --bulk-requests 3 --pace 0.5`, three pairs, 21:22-21:32, load average
10-20): status back to back old 148, 81, 108 req/s, new 102, 120, 68 req/s; web CPU old 4.57, 4.08,
4.50 ms, new 4.83, 3.53, 4.24 ms a read. At that load the figures are the other processes' and move by
50% run to run; the in-process CPU above is the comparison. Single submit was not changed (27-54
charts/s, web CPU 9-11 ms a chart in the same runs): a submit holds 5 statements and a commit, ~60 ms
of wall time at this load against ~8 ms of CPU, so ten clients wait on PostgreSQL. Tried and dropped:
the org's lock taken FOR SHARE when it has no queue limit (submits of one org would not queue behind
each other): no change measurable here (40 vs 51 charts/s, noise).

Issues 17 and 14, the submit paths' CPU (2026-11-30, 21:45-22:20 UTC, load average 6-15 on the 2 cores).
Measured in process with `bench/bench_submit_cpu.py` (the ASGI application called in a loop: CPU of
the process and of the handler's thread a request; cProfile of that thread with `--profile`), since
throughput through the server swung by +-50% with the load. Where the time went before (a099fde):

- Single submit: 6-8 ms of process CPU a chart, of which the handler's thread (middleware, view,
  service, driver) 3.6-4.8 ms; the rest is the event loop's ASGI work and the sender thread's
  announcements (two Channels group sends and the replan request through Redis). In the handler's
  profile: token and throttle ~17%, the input serializer ~13% (its fields deep-copied and bound per
  request: 9% under the profiler, 95-130 us a request in a timeit of old and new side by side), the
  statements (token, org, workflow, lock, insert: their Python side ~15%), the answer's serializer ~6%,
  django-csp's header ~6% under the profiler (30-40 us a response measured side by side).
- Bulk of 10,000 (0.14-0.20 s of CPU, wall 0.6-1.5 s in process): strict JSON ~19 ms, the shape pass
  (`parse_bulk_items`) ~18 ms, the validating pass ~40 ms of which the payloads' encoding 14-28 ms
  (`JSONEncoder.encode` makes a C encoder on every call), the COPY ~10 ms, the charts built from what
  was written ~10 ms. In PostgreSQL (EXPLAIN ANALYZE with the constraints immediate): the insert of the
  charts 89 ms (70,000 WAL records, 6.6 MB), of their events 30 ms (40,000, 3.2 MB), and the deferred
  foreign-key checks 108 ms (33 + 31 ms for the charts' org and workflow, 43 ms for the events' chart:
  one lookup per row each, run at COMMIT), then the commit's flush (~70 ms at this load). The database
  is most of a bulk's wall time, and a third of its statement time is the foreign keys.

Changed: the strict request bodies' fields built once per class (`common.strict.StrictSerializer`),
the CSP header built once from the settings (`fairsched.middleware.PolicyOnceCSPMiddleware`), the
payloads encoded by one C encoder (`charts.services._encode_payload`: 10,000 small payloads 14.4-15.4 ->
4.6-4.7 ms). Side by side in one process (timeit, best of 7): the submit serializer's validation
123-171 -> 29-39 us, the CSP middleware 34-43 -> 4-5 us a response. Through the application in process,
base and branch interleaved four times (`bench_submit_cpu.py --single 300 --bulk 3 --rounds 2`), the
load's swing (+-20% run to run) hides a difference of this size: single 6.2-8.6 vs 6.6-8.4 ms CPU a
chart, bulk 0.150-0.206 vs 0.143-0.185 s a request. Through the server, base (a099fde) then branch,
three pairs, 22:12-22:17 UTC, load average 5-8 (`--single 300 --bulk-requests 5 --clients 2
--per-client 5 --pace 1`); the web CPU a request, then the throughput (which the load moves most):

    base:   single web CPU 9.2  8.6  9.2 ms a chart, 33  70  90 charts/s;
            bulk web CPU 0.23  0.16  0.20 s a request, 8,645  11,375  14,178 charts/s
    branch: single web CPU 8.5  7.6  7.0 ms a chart, 80  107  123 charts/s;
            bulk web CPU 0.15  0.15  0.16 s a request, 6,880  17,334  23,045 charts/s

The branch always ran second of its pair; the side-by-side figures above are the firmer ones.

Not done, and what would close the gaps: the foreign keys' per-row checks (a third of the bulk's
statement time; dropping the constraints, or checking org and workflow once under the org's lock, is
a schema decision), COPY straight into the charts table with ids drawn beforehand (no temporary
table, no INSERT ... SELECT; a repeat would fall back to ON CONFLICT under a savepoint), one pass
instead of the shape pass plus the validating pass, and for the single submit the ~3 ms a chart
outside the handler's thread (the announcements' Redis round trips and the ASGI loop).

Issue 14 item 5, the ASGI overhead (2026-11-30, 21:59-22:20 UTC, load average 6-9, five other
engineers' work on the same two cores). Where it went: Django's ASGI handler (even with the stack in
one hop, `OneHopASGIHandler`) started two threads per request (asgiref's per-request
ThreadSensitiveContext gives each request a fresh executor and thread) and handed over between the
event loop and threads four times (`call_soon_threadsafe`), counted over 500 reads in process: 1,004
threads started and 2,000 hand-overs. Now `fairsched/wsgi_bridge.py` runs Django's WSGI handler whole
in a pool thread (`FAIRSCHED_WEB_THREADS`, 8): 6 threads for the whole run and one hand-over a read;
request_started/request_finished run on the request's thread, as under gunicorn's gthread.
WebSockets stay on Channels. A body is received as the application reads it (Django's ASGI handler
spooled all of it before the view), so one past the limit is refused after receiving about the limit.

In process (`bench/bench_http_cpu.py asgi --reads 1000`, the old code (8b11e3b) and this one
alternately, five runs each), CPU of the process a read, median (min):

    ASGI application:  3.68 (2.84) -> 2.07 (1.71) ms (-44%); wall 14.0 -> 6.2 ms (medians)
    WSGI handler called directly (`wsgi`, three runs, the floor): 2.00 (1.43) ms

Through the server (`--single 300 --bulk-requests 3 --pace 0.5`), old then new, five pairs,
22:05-22:15 UTC, load average 5-7.8:

    status back to back  old 211, 246, 221, 288, 309 req/s (p95 415, 328, 466, 311, 304 ms;
                             web CPU 3.11, 3.07, 3.80, 3.24, 2.95 ms a read)
                         new 531, 250, 396, 304, 586 req/s (p95 167, 378, 197, 219, 147 ms;
                             web CPU 1.76, 2.33, 2.09, 2.82, 1.44 ms a read)
    status paced p95     old 158, 73, 79, 17, 16 ms; new 27, 25, 581, 13, 15 ms
    single submit        old 60, 57, 70, 99, 97 charts/s (web CPU 8.8, 9.7, 11.4, 8.9, 8.6 ms)
                         new 83, 74, 85, 126, 122 charts/s (web CPU 6.7, 8.5, 7.6, 6.3, 6.9 ms)

Medians: status back to back 246 -> 396 req/s, p95 328 -> 197 ms, web CPU 3.11 -> 2.09 ms a read
(-33%); single submit 70 -> 85 charts/s. The quietest pair (the fifth) meets both status goals:
586 req/s at p95 147 ms. The new run 2's paced phase had 6 answers 429 (the clients' read rate, spent
by the back-to-back phase just before: the rate limits stay on), and the new run 3's paced p95 of
581 ms came with a p50 of 10 ms: a stall of the machine, not seen in the other four.

Session 5, main after the lean read path, the one-hop WSGI bridge, the CSP header built once and the
strict serializers' fields built once, on a quiet machine (load average ~2), one run:
`.venv/bin/python bench/bench_api.py --single 400 --submit-clients 20 --bulk-requests 5 --clients 50
--per-client 40 --pace 0.5`: status back to back 647 req/s, p95 116 ms, web CPU 1.53 ms a read (goal
350 at p95 150: met); paced 100 req/s p95 7.1 ms (met); bulk 20,856 charts/s (goal 20,000: met);
single submit 180 charts/s, p50 102 ms, web CPU 6.1 ms a chart (goal 200: missed). Twenty submit
clients, not ten: the write rate is 20/s a token, so ten clients cannot exceed 200/s by construction
and a quiet run is throttled. The submits of one org queue on its row lock and their commits.

Issue 14, single submit (session 6, 2026-11-30 23:30 - 12-01 00:10 UTC, the machine shared with four
other engineers' runs, load average 2-7). Where the time went, before (d9a2d48):

- The org's row lock. pg_stat_activity of the benchmark's database sampled every 5 ms during 3,000
  submits (20 clients, one org): on average 8.4 sessions waited for the org's tuple lock and 1.0 for
  its holder's transaction, and the holder was "idle in transaction" 1.1 of the time, i.e. waiting for
  its web thread (Python between the lock, the insert and the commit, sharing the GIL and the cores).
  Submissions of one org ran one at a time, for the length of a web thread's turn.
- The announcements' sender thread: 1.23-1.30 ms of CPU a chart (bench_submit_cpu.py, from /proc),
  a fifth of the process: two channel-layer sends and the replan request's Redis round trip, each
  with a wake-up, for every chart; each send alone is ~0.12 ms of CPU.
- The rest, per chart through the server: web CPU 5-7 ms, database CPU 1.7-2.4 ms, client 0.4-0.6 ms;
  the machine ~100% busy.

What changed:

- `chart_submit_bulk` reads the org FOR KEY SHARE instead of locking it FOR UPDATE: the org's limit
  and hold cannot change meanwhile (the levers lock FOR UPDATE), the org's other submissions (and the
  dispatcher's UPDATE of `served`) go on. Submissions that must see each other (the org has a queue
  limit, or more than one chart: two bulks with ids in common would deadlock in the unique index)
  take turns on a per-org transaction advisory lock. After: the same sampling shows no lock wait;
  sessions are idle in transaction 2.4 and in the commit's WAL flush ~0.9 on average.
- The sender thread sends at most one batch every 50 ms (a lone announcement goes at once) and merges
  a batch's identical broadcasts (their `submitted` summed): 0.33-0.60 ms of CPU a chart in process.

`bench_api.py --single 1000 --submit-clients 20 --bulk-requests 0 --clients 2 --per-client 2 --pace
0.5`, base (d9a2d48) and branch alternately, 23:41-23:59 UTC, load average 1.8-5.9 (charts/s; p50):

    lock only:         base 135, 110 (126, 160 ms)   branch 196, 150 (80, 97 ms)
    lock and sender:   base 103, 102 (157, 174 ms)   branch 174, 240 (84, 62 ms)
                       web CPU a chart 7.1, 6.6 -> 4.2, 4.7 ms; database CPU 2.4, 2.1 -> 1.6, 1.7 ms

The whole command (`--single 400 --submit-clients 20 --bulk-requests 5 --clients 50 --per-client 40
--pace 0.5`), base then branch twice, 00:02-00:07 UTC, load average 5.6-7.2 (other engineers' work):
single submit 83, 81 -> 129, 178 charts/s (p50 230, 194 -> 86, 79 ms; web CPU 7.4, 7.1 -> 5.6, 4.6
ms a chart; database CPU 2.2, 2.2 -> 1.8, 1.6 ms); bulk, status and paced status unchanged within
the noise (bulk 9.1k, 8.9k -> 9.3k, 9.3k charts/s at this load). In process
(`bench_submit_cpu.py --single 300 --bulk 0 --rounds 3`, alternately, load 4.5-5): CPU a single
submit 6.08, 6.20 -> 5.28, 4.90 ms, of which the handler's thread 4.3 -> 4.2 ms (the sender's share
is what moved). No quiet machine this session to show the 200/s figure; at load 6-7 the branch's
runs went 129-240/s against the base's 81-135/s.
Then quiet (01:12-01:17 UTC, load average 1-2, the full command above): main 258, 208, 261, 195/s
(p50 55-92 ms), d9a2d48 203/s in one run. The status read in the same runs: main 629, 510, 610, 462
req/s, d9a2d48 753, 636, 472: this machine's CPU swings (the same read's web CPU 1.45-2.42 ms).

Looked at and left: the insert's per-call preparation of the default columns (89 us a submit by
timeit: 2%); the view's unlocked read of the org before the service's locked one (one statement,
~5% of a submit, but the services take an `Org` from every caller); prepared statements
(psycopg's server-side binding would plan each statement once per connection, but it changes how
every query of the project binds its parameters).

Figures the code's comments point to, as measured when each change was made (moved here from the
docstrings; this run re-measures the paths they are part of):

- `charts.services._encode_payload`: making the C encoder anew was three quarters of a small payload's
  encoding, 10-35 ms of a 10,000-chart bulk.
- `fairsched.asgi._http_application`: loading the URLconf and its views lazily cost a worker's first
  request ~0.3 s of CPU.
- `fairsched.middleware.PolicyOnceCSPMiddleware`: django-csp's per-response header building was ~8% of
  a small API request's handler CPU.
- `orgs.access` (the caller's scope): building the membership queryset eagerly cost a status read 7%
  of its time.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from functools import partial
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fairsched.devservices import ServiceError, free_port, port_accepts, wait_until
from fairsched.launcher import procfile_commands

ROOT = Path(__file__).resolve().parent.parent
BULK_SIZE = 10_000
GOAL_BULK_PER_SECOND = 20_000
GOAL_SINGLE_PER_SECOND = 200
GOAL_STATUS_PER_SECOND = 350
GOAL_STATUS_BACK_TO_BACK_P95_MS = 150.0
GOAL_STATUS_P95_MS = 50.0
# The write rate a token has by default (FAIRSCHED_API_WRITE_RATE, 20/s), kept by each submit client
# with a little room (the server's clock stamps the window, not the client's).
WRITE_GAP_SECONDS = 1.05 / 20
# The server is idle (its workers have started) when it uses less CPU than this in a probe.
IDLE_PROBE_SECONDS = 0.5
IDLE_CPU_SECONDS = 0.05
ISSUE_TOKENS = (
    "from django.contrib.auth.models import User; from orgs.access import api_token_issue; "
    "from orgs.models import Org, Membership; org = Org.objects.get(slug='bench'); "
    "users = [User.objects.create(username=f'bench-{{i}}') for i in range({count})]; "
    "[Membership.objects.create(user=u, org=org, role='member') for u in users]; "
    "print(' '.join(api_token_issue(user=u, org=org) for u in users))"
)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class Api:
    """One keep-alive connection with the token; each call returns (status, body, seconds)."""

    def __init__(self, port: int, token: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Authorization": f"Token {token}", "Accept": "application/json"}
        self.last_retry_after: str | None = None

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any, float]:
        headers = dict(self.headers)
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        started = time.perf_counter()
        self.connection.request(method, path, body=payload, headers=headers)
        response = self.connection.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - started
        self.last_retry_after = response.getheader("Retry-After")
        is_json = response.getheader("Content-Type", "").startswith("application/json")
        return response.status, json.loads(data) if is_json and data else data[:300], elapsed


def create_database(url: str, suffix: str = "_bench_api") -> str:
    """A fresh database next to the one DATABASE_URL names (its name + `suffix`); returns its URL."""
    parsed = urlparse(url)
    name = (parsed.path.lstrip("/") or "fairsched") + suffix
    admin = urlunparse(parsed._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return urlunparse(parsed._replace(path=f"/{name}"))


def drop_database(url: str) -> None:
    parsed = urlparse(url)
    admin = urlunparse(parsed._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{parsed.path.lstrip("/")}" WITH (FORCE)')


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def server_command(kind: str, port: int) -> list[str]:
    if kind == "daphne":
        return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "fairsched.asgi:application"]
    return ["sh", "-c", procfile_commands(ROOT / "Procfile")["web"]]


def start_server(env: dict[str, str], port: int, kind: str) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        server_command(kind, port),
        cwd=ROOT,
        env={**env, "PORT": str(port), "HOST": "127.0.0.1", "PATH": f"{Path(sys.executable).parent}:{env['PATH']}"},
        stdout=subprocess.DEVNULL,
        stderr=open(os.environ.get("BENCH_SERVER_LOG", os.devnull), "wb"),  # noqa: SIM115
    )
    alive = lambda: server.poll() is None  # noqa: E731
    try:
        wait_until(partial(port_accepts, port), what="the server", alive=alive)
        # gunicorn's master listens before its workers have loaded the application (about 1.5 s of
        # CPU each): wait until the server is idle, so that no figure counts the workers' start.
        wait_until(partial(server_idle, server.pid), what="the server's workers", alive=alive)
    except ServiceError:
        server.kill()
        raise
    return server


def server_idle(pid: int) -> bool:
    """Whether the web server used less than IDLE_CPU_SECONDS of CPU in the next IDLE_PROBE_SECONDS."""
    used = web_cpu_seconds(pid)
    time.sleep(IDLE_PROBE_SECONDS)
    return web_cpu_seconds(pid) - used < IDLE_CPU_SECONDS


def web_cpu_seconds(pid: int) -> float:
    """CPU time (user and system) the web server has used so far: its master and every worker.

    Per request, the figure that the load of other processes on the machine moves least: they take
    the server's turns on the cores (its latency and throughput), not the work of a request."""
    total, pending = 0.0, [pid]
    while pending:
        current = pending.pop()
        try:
            total += process_cpu_seconds(current)
            for task in Path(f"/proc/{current}/task").iterdir():
                pending.extend(int(child) for child in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def process_cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of one process (all its threads) so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def database_cpu_seconds(url: str) -> float:
    """CPU seconds used so far by the PostgreSQL backends connected to the benchmark's database (the
    web workers' pooled connections; the server runs on this machine). Read from /proc, which needs
    the right to read the postgres user's processes; 0 where it cannot."""
    parsed = urlparse(url)
    admin = urlunparse(parsed._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        pids = [
            pid
            for (pid,) in connection.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s", [parsed.path.lstrip("/")]
            ).fetchall()
        ]
    total = 0.0
    for pid in pids:
        try:
            total += process_cpu_seconds(pid)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine so far, every core, from /proc/stat: the share of
    busy time over a phase says whether the machine, not a lock, was the limit."""
    ticks = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    clock = os.sysconf("SC_CLK_TCK")
    return (sum(ticks) - idle) / clock, sum(ticks) / clock


def bench_single(port: int, tokens: list[str], count: int) -> dict[str, float]:
    """`count` single submissions, spread over one client per token, each one after another.

    A client keeps to the write rate as a well-behaved one would: its calls start at least
    WRITE_GAP_SECONDS apart (once the server answers in under that, a client back to back would go
    over 20 a second and be refused), and after a 429 it waits the Retry-After and asks again (the
    429s are counted; the charts a second figures the retries' waits in)."""
    latencies: list[float] = []
    refused: list[int] = []
    lock = threading.Lock()

    def client(index: int) -> None:
        api = Api(port, tokens[index])
        mine, throttled = [], 0
        next_start = time.perf_counter()
        for i in range(index, count, len(tokens)):
            while True:
                time.sleep(max(0.0, next_start - time.perf_counter()))
                next_start = time.perf_counter() + WRITE_GAP_SECONDS
                status, body, elapsed = api.call(
                    "POST", "/api/v1/charts/", {"workflow": "bench", "external_id": f"single-{i}"}
                )
                if status != 429:
                    break
                throttled += 1
                next_start = time.perf_counter() + float(api.last_retry_after or 1)
            assert status == 201, (status, body)
            mine.append(elapsed)
        with lock:
            latencies.extend(mine)
            refused.append(throttled)

    threads = [threading.Thread(target=client, args=(index,)) for index in range(len(tokens))]
    started, client_cpu = time.perf_counter(), time.process_time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = time.perf_counter() - started
    return {
        "throttled": sum(refused),
        "client_cpu_ms": 1000 * (time.process_time() - client_cpu) / count,
        "charts_per_s": count / total,
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * percentile(latencies, 0.95),
    }


def bench_bulk(api: Api, requests: int) -> dict[str, float]:
    durations = []
    for r in range(requests):
        items = [{"workflow": "bench", "external_id": f"bulk-{r}-{i}", "payload": {"n": i}} for i in range(BULK_SIZE)]
        status, body, elapsed = api.call("POST", "/api/v1/charts/bulk/", {"items": items})
        assert status == 201, (status, str(body)[:200])
        assert body["created"] == BULK_SIZE
        durations.append(elapsed)
    return {
        "charts_per_s": BULK_SIZE * requests / sum(durations),
        "request_s_median": statistics.median(durations),
    }


def bench_status(
    port: int, tokens: list[str], ids: list[int], clients: int, per_client: int, pace: float | None
) -> dict[str, float]:
    """`clients` threads GET chart status; back to back when pace is None, else one request per `pace` s."""
    latencies: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def client(seed: int) -> None:
        api = Api(port, tokens[seed % len(tokens)])
        pick = random.Random(seed)
        api.call("GET", f"/api/v1/charts/{ids[0]}/")  # open the connection
        barrier.wait()
        mine = []
        next_at = time.perf_counter() + (pick.random() * pace if pace else 0)
        for _ in range(per_client):
            if pace:
                time.sleep(max(0.0, next_at - time.perf_counter()))
                next_at += pace
            status, body, elapsed = api.call("GET", f"/api/v1/charts/{pick.choice(ids)}/")
            if status != 200 and not errors:
                print(f"first error: {status} {body!r}", file=sys.stderr)
            if status != 200:
                errors.append(status)
            mine.append(elapsed)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = time.perf_counter() - started
    return {
        "requests": len(latencies),
        "errors": len(errors),
        "req_per_s": len(latencies) / total,
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * percentile(latencies, 0.95),
        "p99_ms": 1000 * percentile(latencies, 0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", choices=["gunicorn", "daphne"], default="gunicorn", help="the web server")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn's worker processes")
    parser.add_argument("--single", type=int, default=500, help="charts submitted one by one")
    parser.add_argument(
        "--submit-clients",
        type=int,
        default=20,
        # Ten clients at the write rate of 20/s a token stay under the 200/s goal by construction.
        help="clients (tokens) of the single submits",
    )
    parser.add_argument("--bulk-requests", type=int, default=5, help=f"bulk requests of {BULK_SIZE} charts")
    parser.add_argument("--clients", type=int, default=50, help="concurrent status clients")
    parser.add_argument("--per-client", type=int, default=40, help="status requests per client")
    parser.add_argument(
        "--pace", default="1,0.5", help="comma-separated seconds between a paced client's requests, one run each"
    )
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()

    database_url = create_database(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fairsched"))
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/12"),
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "pooled_settings",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), str(ROOT)]),
        "WEB_CONCURRENCY": str(args.web_workers),
        "PATH": os.environ.get("PATH", ""),
    }
    for rate in ("FAIRSCHED_API_READ_RATE", "FAIRSCHED_API_WRITE_RATE"):
        env.pop(rate, None)  # the production defaults
    server = None
    try:
        manage(env, "migrate", "-v0")
        manage(
            env,
            "shell",
            "-c",
            "from orgs.models import Org, Workflow; Org.objects.create(name='Bench', slug='bench'); "
            "Workflow.objects.create(name='bench', workflow_type='fairsched.demo', task_queue='bench')",
        )
        tokens = (
            manage(env, "shell", "-c", ISSUE_TOKENS.format(count=max(args.clients, args.submit_clients)))
            .splitlines()[-1]
            .split()
        )
        port = free_port()
        server = start_server(env, port, args.server)
        api = Api(port, tokens[0])

        single: dict[str, float] | None = None
        if args.single:
            cpu_before, database_before = web_cpu_seconds(server.pid), database_cpu_seconds(database_url)
            busy_before, all_before = machine_busy_seconds()
            single = bench_single(port, tokens[: args.submit_clients], args.single)
            busy_after, all_after = machine_busy_seconds()
            single["web_cpu_ms"] = 1000 * (web_cpu_seconds(server.pid) - cpu_before) / args.single
            single["database_cpu_ms"] = 1000 * (database_cpu_seconds(database_url) - database_before) / args.single
            single["machine_busy"] = (busy_after - busy_before) / max(1e-9, all_after - all_before)
        bulk: dict[str, float] | None = None
        if args.bulk_requests:
            cpu_before = web_cpu_seconds(server.pid)
            bulk = bench_bulk(api, args.bulk_requests)
            bulk["web_cpu_s"] = (web_cpu_seconds(server.pid) - cpu_before) / args.bulk_requests
        _, page, _ = api.call("GET", "/api/v1/charts/?page_size=1000")
        ids = [row["id"] for row in page["results"]]
        cpu_before = web_cpu_seconds(server.pid)
        status_runs = {"back to back": bench_status(port, tokens, ids, args.clients, args.per_client, pace=None)}
        status_runs["back to back"]["web_cpu_ms"] = (
            1000 * (web_cpu_seconds(server.pid) - cpu_before) / (args.clients * (args.per_client + 1))
        )
        for pace in (float(value) for value in args.pace.split(",")):
            status_runs[f"paced 1 per {pace:g} s"] = bench_status(
                port, tokens, ids, args.clients, args.per_client, pace=pace
            )
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        if not args.keep:
            drop_database(database_url)

    server_name = "daphne" if args.server == "daphne" else f"gunicorn with {args.web_workers} uvicorn workers"
    print(f"reproduce: .venv/bin/python bench/bench_api.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"server: {server_name}; rate limits on (each client its own token)")
    if single is not None:
        verdict = "meets" if single["charts_per_s"] >= GOAL_SINGLE_PER_SECOND else "MISSES"
        print(
            f"single submit: {single['charts_per_s']:.0f} charts/s ({args.submit_clients} clients), "
            f"p50 {single['p50_ms']:.1f} ms, p95 {single['p95_ms']:.1f} ms, {single['throttled']:.0f} answered 429;"
            f" a chart: web CPU {single['web_cpu_ms']:.1f} ms, database CPU {single['database_cpu_ms']:.1f} ms,"
            f" client CPU {single['client_cpu_ms']:.1f} ms; machine {single['machine_busy']:.0%} busy"
            f" - {verdict} the goal of {GOAL_SINGLE_PER_SECOND}/s"
        )
    if bulk is not None:
        verdict = "meets" if bulk["charts_per_s"] >= GOAL_BULK_PER_SECOND else "MISSES"
        print(
            f"bulk submit:   {bulk['charts_per_s']:.0f} charts/s ({args.bulk_requests} x {BULK_SIZE}, "
            f"median {bulk['request_s_median']:.2f} s a request, web CPU {bulk['web_cpu_s']:.2f} s a request)"
            f" - {verdict} the goal of {GOAL_BULK_PER_SECOND}/s"
        )
    print(f"pooled connections: {find_spec('psycopg_pool') is not None}")
    for label, figures in status_runs.items():
        if label == "back to back":
            met = (
                figures["req_per_s"] >= GOAL_STATUS_PER_SECOND and figures["p95_ms"] <= GOAL_STATUS_BACK_TO_BACK_P95_MS
            )
            goal = f"{GOAL_STATUS_PER_SECOND} req/s at p95 {GOAL_STATUS_BACK_TO_BACK_P95_MS:.0f} ms"
        else:
            met = figures["p95_ms"] <= GOAL_STATUS_P95_MS
            goal = f"p95 {GOAL_STATUS_P95_MS:.0f} ms"
        print(
            f"chart status, {args.clients} clients {label}: {figures['req_per_s']:.0f} req/s, "
            f"p50 {figures['p50_ms']:.1f} ms, p95 {figures['p95_ms']:.1f} ms, p99 {figures['p99_ms']:.1f} ms, "
            f"{figures['errors']} errors"
            + (f", web CPU {figures['web_cpu_ms']:.2f} ms a request" if "web_cpu_ms" in figures else "")
            + f" - {'meets' if met else 'MISSES'} the goal of {goal}"
        )


if __name__ == "__main__":
    main()
