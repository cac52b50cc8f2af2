"""Replan pass on PostgreSQL: load + plan + persist, with 10k and 100k queued charts.

Run: `.venv/bin/python bench/bench_replan.py [--sizes 10000,100000]`. It uses its own database
(`<name>_bench_replan` beside the database `<name>` of DATABASE_URL, created and dropped here), 500
orgs, budget 200. Each size: a warm pass, then the best of three passes, each split into load, plan and persist;
then the load alone and the persist alone, three times each (medians of wall time and CPU).

Figures the code's comments point to, as measured when each change was made (moved here from the
docstrings):

- `charts.models.ChartPromise`, a table of its own: updating as many chart rows instead cost the first
  replan after a bulk submission of 100k charts 25 s.
- `scheduling.packed_rows`: reading a binary COPY row by row cost 0.85 s of CPU for a 1M queue, against
  0.1 s for one bytea; the server's aggregate costs ~0.1 s more than the COPY's messages.
- `scheduling.copy_binary`: yielding views of record arrays, 0.15 s of CPU at 1M rows against 0.22 s for
  one bytes object.
"""

# Where the time goes (issue #17; 2-core machine shared with other sessions, load average 5-8, so
# every wall figure here is 2-4x a quiet machine's; the splits held run after run):
#
# Before (main at 18:43, 100k queued): pass 2.28 s = load 0.60 + plan 0.53 + persist ~1.15.
# - persist: the plan went as text rows (a float repr per time, 4 per chart: 0.8-1.3 s of Python),
#   into a temp table, then DELETE of the whole plan table (0.1 s) and INSERT ... SELECT
#   to_timestamp(...) into it, maintaining its two indexes row by row (1.2 s).
# - load: the chart query sorted 100k rows (index scan + incremental sort, 0.17 s on the server);
#   the cyclic GC walked the snapshot's objects at every allocation burst (~0.3 s); per-chart
#   tuple lookups of cost and duration.
# - A diff does not pay: between two passes nearly every row changes (here every ETA moves with the
#   clock; in service a dispatch shifts every position), and an UPDATE of 100k changed rows took
#   1.4 s against 0.35 s for COPY plus index builds into a fresh table.
#
# After (this branch, 100k, back to back with main at load average 6-8: 2.4-3.7 s against main's
# 6.1-8.0 s; at 18:43, load 5: 1.11 s = load 0.37 + plan 0.43 + persist 0.31 against main's 2.28 s):
# - persist: columns built with numpy (~0.05-0.1 s: chart ids read back from their keys as one
#   array, positions from the planner's layout, NULLs and text labels without a Python step per
#   value), one binary COPY (times already in PostgreSQL's form) into a new table, frozen (0.1-0.2 s),
#   its two indexes built by sort (0.1-0.2 s), then the swap: drop and renames, 1-7 ms under the
#   plan table's lock, last before the commit.
# - load: the chart query unsorted (the plan does not depend on the order), the GC paused, cost and
#   duration per (org, workflow) pair spread by a numpy index: 0.37 s of which the query is ~0.2 s.
# - What is left at 100k is the core's plan (0.27 s quiet) and the chart query's server time.
#
# At 19:12 (load 3.8-4.8): this branch 1.19 s (load 0.37 + plan 0.49 + persist 0.33) and 1.39 s,
# main 5.10 s in between.
#
# At 1M, load average ~7-8: this branch 22.9 s (load 8.2 + plan 8.7 + persist 6.1) against main's
# 60.9 s (load 15.2, plan 16.7, persist ~29); target 5 s not met. The core's plan alone is ~3 s on a
# quiet machine; the load is the chart query (~2 s on the server under this load), its rows
# transposed to columns (~1 s), the chart keys formatted (0.8 s) and the arrival history's grouped
# query (0.9 s); the persist grows linearly (COPY and two index builds of 1M rows).
#
# Session 2 of issue 17 (20:45-21:45 UTC, load average 4-18: other engineers' suites and benches).
# Wall figures swung 2-3x run to run (the same core plan took 0.42-1.05 s at 100k), so the split below
# is CPU time: the replan process's (`time.process_time`) and its PostgreSQL backend's (utime+stime
# from /proc/<pg_backend_pid()>/stat), medians of 5 passes, each build alone, back to back with main.
#
#   100k: load   client 0.14 s, server 0.12 s;  plan table build+swap+commit client 0.07, server 0.16
#   1M:   load   client 1.5 s,  server 1.0-1.2;  plan table build+swap+commit client 1.15-1.3, server 1.4-1.7
#
# So at 100k the pass is ~0.5 s of CPU besides the core's plan (0.3-0.5 s quiet): the 1.0 s target is
# within reach only on a machine with a core to spare for each side. At 1M the core's plan (3 s quiet,
# branch `core`) alone is over half the 5 s, and each of load and persist costs ~2.5-3 s of CPU split
# between Python (chart keys formatted one by one, the 1M-entry spread dict, lists built from the
# rows) and the server (the chart scan, COPY and two index builds of 1M rows).
# - Tried and dropped: the load as one bytea per column (string_agg of each value's send format, read
#   with numpy.frombuffer). Wall times looked 3x better in isolated runs, but its CPU, counted as
#   above, was the same (100k: client 0.14 / server 0.12-0.13 either way; 1M: client 1.50 vs 1.49 s,
#   server 1.04 vs 1.20 s), and so was the peak RSS of a 1M load (590 MB): the server pays per row
#   for the send calls and the aggregates what the client saves on parsing. Numpy-formatted chart
#   keys: 0.74-0.83 s against 0.84-1.0 s for the f-strings at 1M (the str objects are the cost).
# - Kept: `Epoch` as date_part (the same float8, half the server time of EXTRACT's numeric: 39 vs
#   85 ms for three epoch columns of 100k rows under EXPLAIN ANALYZE); the plan table unlogged: a
#   logged build writes at least its pages to the WAL, 9.9 MB of heap and 4.4 MB of indexes at 100k,
#   96 + 43 MB at 1M (a checkpoint every 7 replans at 1M with max_wal_size 1 GB), and the commit
#   waits for their flush. Its CPU did not move measurably (server 0.14-0.16 s either way at 100k);
#   what it spares is I/O. A server crash empties the table until the next replan. And the COPY
#   stream written as views of its record arrays (`copy_binary.chunks`) instead of one bytes object
#   that psycopg then slices: client CPU at 1M 0.22 -> 0.15 s, nothing at 100k.
# - This bench at 100k, main (a099fde) and this branch back to back three times, 21:38-21:43, load
#   average 8-10: main 2.55, 2.36, 3.07 s (persist 0.68, 0.78, 0.76), branch 2.39, 2.40, 2.77 s
#   (persist 0.71, 0.60, 0.78): within the noise of this machine, as the CPU counts above say.
# - Not done, what would close 1M: a diff persist does not pay while every ETA moves with the clock
#   (see above); the spread passed to the core as a column aligned with the queue instead of a dict
#   (needs a change in scheduling/core's `spreads`), chart keys kept as integers through the core.
#
# Session 3 of issue 17, the persist (23:30-01:15 UTC, load average 4-7 throughout: other engineers'
# suites, benches and valgrind; no quiet window, so again CPU counts first). Where the persist's time
# went at 1M (main d9a2d48; `bench_replan` counts as "persist" everything after the core's plan):
# - the core's waiting columns (reason, until, head of line), worked out lazily on the persist's
#   first read: 0.26-0.39 s of client CPU (scheduling/core's, not the persist's own);
# - the COPY stream encoded as whole columns: 0.60-0.86 s of client CPU, the spread from fresh
#   memory: `chart_ids` alone allocates a 152 MB digit matrix (0.06 s warm, up to 0.47 s page-faulted);
# - COPY on the server: ~0.7 s CPU (perf of the backend: parsing 35% of it, of which timestamptz_recv
#   is most, as its range check runs timestamp2tm on every value, 5 a row; heap inserts 21%; the file
#   extended a page at a time and written 25%). Each timestamp column is ~0.04 s of it at 1M, each
#   value column ~0.07 s with its client side (measured by dropping columns one at a time);
# - the two index builds: ~0.5 s of the backend's CPU plus its parallel workers' (0.7-0.85 s serial);
#   at the 64 MB default a build got one worker, and a sort of the position index spilled (trace_sort);
# - the org clear-times and the sample 0.05 s, the swap and the commit a few ms.
# Changed: the stream encoded a block of 65,536 rows at a time (`replan._plan_rows`) and handed to
# psycopg's writer thread, so the client encodes block k+1 while the server parses block k (on a free
# core the encoding hides behind the server's COPY), and each block's arrays stay in the caches:
# encoding CPU 0.44-0.46 s against 0.60-0.86 s; `maintenance_work_mem` raised to the rows' need
# for the index builds (96 B a row, never lowered): at 1M two workers and in-memory sorts, index
# builds alone min/median wall 1.02/1.17 s against 1.24/1.71 s at the default (6 each, load 5.8).
# Figures, persist of one plan (the core's waiting computed beforehand), main and this branch in
# alternate processes, 2 x 3 passes at 1M, 3 x 5 at 100k (/tmp scripts, not kept), load 4.7-5.4:
#   1M:   wall main 3.78-5.18 s (median 4.8), branch 2.86-3.95 s (median 3.4); client CPU median
#         0.97 s against 0.59 s; backend CPU 1.29-1.43 s either way.
#   100k: wall median 0.49 vs 0.46 s (min 0.42 vs 0.39); client CPU median 0.072 vs 0.077 s; backend
#         0.15 s either way: no worse.
# This bench, `--sizes 100000,1000000`, branch / main / branch in a row (00:08-00:17, load 5-7):
#   1M persist 2.99 / 3.82 / 3.01 s; 100k persist 0.55 / 0.51 / 0.43 s. (Quiet machine, main: 2.45 s.)
# Since the end of this session, "core plan" includes the core's waiting columns (plan_refresh reads them right
# after the plan), so "persist" is the writing alone: 0.26-0.39 s at 1M and ~0.035 s at 100k moved
# from the one to the other. This bench then, 00:25-00:27, load 2.8-3.3: 100k pass 1.50 s (load 0.37,
# plan 0.68, persist 0.45); 1M pass 13.15 s (load 3.75, plan 6.85, persist 2.55).
# The writer thread, measured alone at 1M (one plan, 4 pairs alternated, load 2.2): with a plain
# write the client sat 0.34 s blocked in `Copy.write` and the COPY took 1.36 s; with the thread it
# never blocks (0.00-0.08 s) and the COPY takes 1.07-1.23 s; the build 1.91-2.01 s against 2.10-2.13.
# (The kernel's socket buffers already let a plain write run some MB ahead, hence no more than that.)
# This bench, branch then main (d9a2d48, whose persist still counts the core's waiting columns):
# 00:31-00:35, load 2.2-3.9: 100k persist 0.23 / 0.44 s; 1M persist 2.67 / 4.05 s.
# - Tried and dropped: parallel builds forced off (serial: more wall, the client idles meanwhile);
#   the position index without deduplication (no measurable change); the heap written in position
#   order for the position index (it already nearly is: rows come grouped by layout within a block).
# - Not done, what would close the rest (on 2 cores the floor is the server's ~1.2 s of CPU plus the
#   core's waiting columns): times as bigint microseconds or the band as offsets would spare
#   timestamptz_recv (~0.04 s a column at 1M) but every reader of the plan reads them as datetimes;
#   `waiting_until` stored NULL where it equals `predicted_start` (budget, turn, org_cap,
#   retry_budget: nearly every row) would save a column's parse and 8 B a row, with the readers
#   (ChartManager, CHART_COLUMNS, the queue selector) taking it back with a COALESCE.
#
# Session 3 of issue 17, the load (branch `load`, 23:30-00:45 UTC, load average 3-7). CPU of one
# load_snapshot on a seeded 1M backlog, main against this branch interleaved in one process (process_time;
# the backend's utime+stime), 4 pairs at load average 6: main 2.67-2.77 s client + 0.55-0.59 s server,
# wall 6.3-6.8 s; branch 1.10-1.13 s client + 0.74-0.75 s server, wall 2.84-2.95 s. 100k, 6 pairs at
# load 5.6: main 0.23-0.25 + 0.06-0.07 s, wall 0.41-0.57; branch 0.12-0.13 + 0.07-0.08 s, wall 0.22-0.29.
# - Where main's client time went at 1M (each piece alone, GC off): the rows parsed by psycopg 0.65 s (of
#   which libpq's result 0.23, three date_part floats a row), transposed to columns 0.38, ids to arrays
#   0.19, chart keys formatted one by one 0.35, the 1M-entry spread dict 0.46, org keys and lists 0.15,
#   recent_history 0.08-0.15 (26k groups). The server: the scan and the text output of 11 columns, 0.6 s.
# - Now: the charts come as one binary COPY of fixed-width rows (every field NOT NULL: a missing time
#   is -infinity, a missing cost 0, the state its index) read with one numpy.frombuffer
#   (`copy_binary.copy_out`, `decode`; times converted as date_part converts them, to the bit); chart keys
#   made by numpy four digits at a time and one str.split (`snapshot.chart_keys`: 0.35 -> 0.10 s); the
#   spreads go to the core as columns aligned with the queue and the running charts (`Scenario.spread`,
#   `running_spread`): no dict to build, none for the planner to look up; (org, workflow) pairs numbered
#   by a table instead of a sort; history rows as plain tuples, each pair looked up once.
# - Where the branch's 1.1 s go at 1M: reading the COPY's million messages through psycopg's
#   `Copy` 0.7 s (a Python step per message inside the driver), decoding 0.12, the three time columns
#   0.04, chart keys 0.10, the core's lists 0.13, the rest 0.1. The server's 0.75 s (the binary send of
#   11 fields a row, 0.2 s more than the text output) runs while the client reads, so on a quiet
#   machine the load should take about 0.75 s of streaming plus 0.4 s of decoding and lists: ~1.2 s.
# - Tried and dropped: (1) libpq's get_copy_data driven by hand on `Connection.pgconn` reads the stream
#   in 0.36 s instead of 0.72 s (interleaved, 4 pairs), but the server's 0.75 s is as long, so a quiet
#   machine's wall would not move, and it leaves psycopg's protocol handling (errors, cancellation) to
#   this code. (2) The rows aggregated on the server (string_agg of each row's send format, one bytea):
#   client 0.1 s but server 0.9 s, none of it overlapped: slower in wall. (3) array_agg per column, read
#   raw: server 1.0-1.1 s. (4) Checking every field's length in every row: as long as the rest of the
#   decoding (0.1 s at 1M); the field counts of every row and the lengths of the first and last catch a
#   NULL or a field of another width. (5) Fields packed into fewer int8s on the server: the arithmetic
#   costs what the send calls save.
# - Left: the core's lists (QueueColumns takes lists: 0.13 s to make them from the arrays; arrays would
#   save that if the planner took them), and psycopg's per-message read of the COPY.
#   Command: `.venv/bin/python bench/bench_replan.py --sizes 100000,1000000`; each size also prints the
#   load alone (medians of its wall, this process's CPU and its backend's CPU).
# - Not understood: inside this bench's own process, main's load measures only 1.25-1.34 s of client CPU
#   at 1M (1.9-2.4 s wall, load average 3-5, three runs), about the branch's 1.30 s, whereas in every
#   other process measured (fresh; after two replans; after seeding in process: five set-ups, main's
#   code from `git archive`) main's takes 2.2-2.8 s and the branch's 1.0-1.4 s. The branch's figure is
#   the same everywhere; what makes main's load twice as fast here was not found.
#
# After the merges (session 6, 01:09-01:12 UTC, quiet machine, load average 1.0-1.4; this session's
# machine ran d9a2d48's 1M caps plan() in 2.90 s against last session's 1.98 s, so compare within it):
#   d9a2d48: 100k 0.88 s (load 0.28, plan 0.37, persist 0.23); 1M 9.36 s (2.98, 4.00, 2.38)
#   main:    100k 0.63 s (load 0.14, plan 0.29, persist 0.19); 1M 6.25 s (1.35, 3.49, 1.41)
# ("plan" now includes the core's waiting columns, which the persist used to pay for on first read.)
# The 1M pass still misses 5 s. The core's plan is now most of it (the replay ~1.5 s; see
# bench_replan_plan.py); on 2 cores the shell's floor is the server's ~0.8 s (load) + ~1.2 s (persist).
#
# Session 7 of issue 17, the load (branch `load`, 02:18-03:40 UTC, load average 4-18 throughout: other
# engineers' suites and benches; no quiet window, so CPU counts, old and new interleaved). Where main's
# load of a 1M queue went (a lab database seeded by backlog.py; /tmp scripts, not kept):
# - Server: the chart COPY, 0.91-0.95 s of its backend's CPU, of which the scan and the state filter
#   are 0.05 s (count(*) under the same WHERE). The rest is output, ~0.19 s a million rows plus ~0.065 s
#   a field (COPY of 1 field 0.26 s, 5 fields 0.51, 6 0.61, 11 0.94); perf: pq_begintypsend 14.5% (the
#   1 KB buffer each send call allocates), memmove and StringInfo appends 12%, SendFunctionCall 3%.
# - Client: psycopg's `Copy` iteration, 0.85 s of CPU (a Python step a message, a message a row); the
#   same messages read with libpq's get_copy_data by hand, 0.30-0.44 s.
# Alternatives measured at 1M (server CPU / client CPU; one backend unless said):
#   binary COPY, psycopg's iteration                        0.91 / 0.85
#   binary COPY, get_copy_data by hand                      0.93 / 0.30-0.44
#   string_agg of each row's send formats (one 63 MB bytea) 1.04-1.10 / 0.12-0.15
#   string_agg a column                                     1.14 / 0.11
#   string_agg of record_send(ROW(...))                     1.71-1.77 / 0.30
#   in halves (id % 2), two backends with one snapshot: COPY by hand 0.46-0.53 each / 0.29-0.40;
#   string_agg 0.51-0.58 each / 0.06-0.13
#   (PostgreSQL 15: string_agg and array_agg have no combine function yet, so no parallel aggregate.)
# - Changed: the charts come as rows packed by the server (`scheduling.packed_rows`: each row's send
#   formats end to end, the rows aggregated into one bytea, checked against count(*) so that a NULL
#   field cannot drop a row unseen), read by one numpy.frombuffer. A table of 200k rows or more is read
#   in halves, even and odd ids, by Django's connection and a second one in a thread, which imports the
#   first one's exported snapshot (REPEATABLE READ): one view of the table, as one statement gave; inside
#   a caller's transaction, one statement as before. The five small fields go two to an int8 (a send
#   call and a concatenation fewer each): server CPU of the load 1.51-1.93 s (median ~1.7) against
#   1.68-2.11 s (~2.0) without, 3 x 2 passes at load average 6-7.
# - Figures, load_snapshot at 1M, main (ffcdd06) and this branch in alternate processes, 3 x 2 passes:
#   at load average 4-5: main client 1.95-2.39 s, backend 1.03-1.36 s; branch (halves, before the
#   small fields were packed) client 0.83-1.04 s, backends 0.53-0.70 + 0.62-0.71 s.
#   at load average 11-16: main client 3.03-3.24 s, backend 1.57-1.88 s, wall 9.9-18.8 s; branch client
#   1.21-1.40 s, backends 0.81-0.94 + 0.95-1.13 s, wall 6.9-13.2 s.
#   This bench, `--sizes 1000000`, main then branch, 02:54-03:07, load average 6.4-7.6 (walls 5x a quiet
#   machine's): main pass 36.56 s (load 9.42); load alone wall 10.47 s, client 3.25 s, backend 1.83 s;
#   branch pass 39.05 s (load 7.54); load alone wall 7.01 s, client 1.46 s, backends 1.88 s.
#   So the load's CPU fell by a third or more (client -55 to -60%, server +5 to +15%: a second scan,
#   the aggregate), and the server's part is split over two cores. On a quiet machine the load should take
#   ~0.05 s of small queries, ~0.55 s while the two backends pack their halves (the client mostly waits,
#   and unpacks the even half), then ~0.45 s of client work: the core's lists and chart keys (~0.25 s),
#   the arrival history (0.1-0.2 s, its query included): ~1.0-1.1 s, against 1.69 s measured on main.
#   The 0.8 s target is not met.
# - Then the backlogged and ready orgs found from the queue's arrays (one numpy pass; since the merge
#   with `glue`, `snapshot.backlogged_and_ready` on `QueueColumns.arrays`) instead of a Python step
#   per chart (0.14 s under cProfile):
#   client CPU 1.21-1.25 s against 1.28-1.33 s (59b150f), 2 x 2 passes at load average 13-18.
# - Left: the client work after the read runs on one core while the other is idle (the core's lists
#   could be made from arrays by halves, but the core takes whole lists); the second connection is
#   opened per load (10-17 ms, in the thread, behind the even half); the split's threshold
#   (SPLIT_FROM_ROWS, 200k rows) is a judgement: no quiet machine to measure 100k-300k on.
# - After the merges (lead, 04:52-04:59, load average 1.1-1.5, this machine at about half its speed of
#   02:14): the halves end to end (even ids, then odd) cost the core plan 1.4 s at 1M (3.71 s, against
#   2.27 s read in one piece): the fair order's runs of one creation second no longer lay in one
#   ascending stretch of ids. The load now sorts the halves by id (one merge of two runs). Pass at 1M:
#   ffcdd06 9.32 s (load 2.19, plan 4.25, persist 2.88); main before the sort 8.76 s (2.30 / 3.71 / 2.74);
#   after it 7.79 s (2.10 / 2.95 / 2.74). Load alone 2.19 s wall, backends 1.85 s, client 0.93 s.
#
# Session 7 of issue 17, the persist (branch `persist`, 02:18-04:00 UTC, load average 4-9 throughout:
# other engineers' suites, benches and load runs; every wall figure 2-5x a quiet machine's, so CPU
# first). Where the persist's time went at 1M (main ffcdd06, one plan written again and again):
# - client: the COPY stream's encoding 0.52-0.88 s of CPU, of which the chart ids parsed back from
#   their keys (a join of 1M strings and a digit matrix: ~0.2 s), the five time lists turned into
#   arrays (~0.1 s), the lists sliced per block, the reasons coded (0.06 s) and the record arrays
#   (0.08 s); 0.10-0.15 s of it before the first block went out (the server idle meanwhile); then
#   the sample's Counter of 1M org keys, 0.05 s.
# - server, the COPY: 0.9-1.0 s of the backend's CPU at load 5 (perf: the fields' receive calls 33%,
#   of which timestamptz_recv 27%: its range check runs timestamp2tm, j2date included, on each of
#   five values a row; the per-field loop 9%; heap_multi_insert 18%, of which extending the file a
#   page at a time and writing the pages out of the bulk-write ring 10%; heap_form_tuple 12%;
#   reading the socket 4%; the CHECK on position 4%).
# - server, the index builds: leader 0.55-0.6 s + its two workers 0.5 s of CPU, as much as one
#   process building both serially (1.2 s, load 5.6): the parallel builds already fill both cores.
#   The heap comes in fair order, so the position index's sort meets nearly sorted runs; the
#   primary key's sort meets random ids. In a table copied in id order the two trade places
#   (serial, load 6: key 0.68-0.79 s against 1.24-1.70, position 1.3-1.8 s against 0.62-0.74): one
#   of the two always pays a full sort.
# - org clear-times 0.02 s, the swap a few ms, the commit 5 ms (its WAL flush; 5 ms with
#   synchronous_commit off too).
# - What overlaps: the client's encoding with the server's COPY (the writer thread), the index
#   builds' workers with each other. Nothing else.
# Changed: the plan's rows written from arrays. The core's Plan has `arrays` (`core.model.PlanArrays`):
# its layout as indices into the queue, and the starts, ETAs and bands as the float arrays the
# planner had anyway. The chart ids are the snapshot's id column (`Snapshot.waiting`, `in_flight`:
# the `ActiveCharts` rows aligned with the scenario) gathered by that layout; places are 0..n-1 by
# construction; the sample counts the queue per org from the org id column. The COPY stream is byte
# for byte the old one (1M, a fixed now). Client CPU of the encoding (/tmp scripts, main and this
# branch in alternate processes, load 3.7-4.4): 0.52-0.88 s -> 0.20-0.26 s; before the first block
# 0.10-0.15 s -> 0.03-0.04 s; of the whole persist (3 passes each, two pairs, load 4.4-6.4):
# 0.95-1.13 s -> 0.46-0.56 s; the backend's CPU unchanged (2.1-2.4 s, workers not counted).
# This bench now also prints the persist alone (wall, this process's CPU, its backend's CPU).
# This bench, `--sizes 1000000`, branch / main / branch in a row (02:55-03:08, load 5.6-7.3, every
# figure 4-5x a quiet machine's): persist 9.27 / 9.11 / 4.74 s (pass 39.15 / 36.20 / 24.08 s):
# noise at this load; the CPU counts above are the comparison.
# - Measured and not done: (1) both index builds at once on two connections, the next table
#   committed first by a helper connection: the CPU is the same (1.2 s for both, serial) and the
#   parallel builds already use both cores, so a quiet 2-core machine's wall would not move (under
#   load it only wins a larger share of the CPUs). (2) The COPY as two streams on two connections
#   into one committed table: the one route found to ~0.9 s on a quiet machine (the server parses
#   the COPY in one process, ~0.65 s quiet, while the client now needs ~0.2 s of the other core),
#   but COPY FREEZE needs the table created in the same transaction: without it the backends spent
#   0.2 s more CPU (likely the hint bits the index builds' scans set, and the pages written again); and a table
#   committed outside the replan's transaction goes wrong inside a caller's transaction (every test):
#   the replan's own uncommitted swap renames and locks the committed next table, and a helper of a
#   second replan in that transaction would wait for it forever. (3) max_parallel_maintenance_workers
#   1 instead of 2: 1.25 against 1.45 s of CPU, walls not told apart at load 8. (4) The reasons coded
#   by object identity instead of a dict: slower.
# - The floor on 2 cores within one transaction: the COPY's ~0.65 s in one server process (quiet)
#   + the index builds' ~0.6 s of CPU on both cores + ~0.1 s: ~1.1 s. Target 0.9 s not met.
#
# Session 8 (2026-12-01, 06:26-06:34 UTC, load average 0.7-1.3, no other work on the machine), this
# bench, `--sizes 100000,1000000`, with the code of the pass as session 7 left it (7.79 s at 1M then):
# the machine ran about 3x faster than in session 7's slow hours (`make test` 5 min 15 s against 14 min).
#   100k: pass 0.38 s (load 0.09, core plan 0.17, persist 0.13); target 1.0 s met.
#   1M:   pass 2.76 s (load 0.71, core plan 0.82, persist 1.22), all three 2.76-2.92 s; target 5 s met.
#         Load alone 0.68 s wall (backends 0.55 s CPU, client 0.29); persist alone 0.95 s (backend 0.90).
#
# Issue 25 (2026-12-02, 19:01-19:10 UTC, load average 8-14: six engineers' tests on 2 cores), the plan's
# expected duration of in-flight charts (a float8 column, NULL for the waiting) and the promises at
# enqueue (`replan._record_first_plans`). This bench, `--sizes 10000,100000`, branch and main (cc9e1f6)
# alternated twice; "first pass" is the warm pass, now printed (it records the first plans):
#   100k pass    branch 5.98 / 2.42 s (persist 1.60 / 0.75), main 4.16 / 2.23 s (persist 1.58 / 0.64)
#   100k persist alone, CPU client / backend: branch 0.10 / 0.27 and 0.09 / 0.28 s, main 0.12 / 0.35
#        and 0.10 / 0.26 s: no difference above the noise.
# The first plans of 100k new charts (a bulk upload, every chart new; /tmp script, not kept): 1.25 s of a
# 3.57 s first pass, 0.011 s in the next pass. Tried first and dropped: the promise as columns of the
# chart, set by an UPDATE of the new charts' rows (their many indexes rewritten): 25-27 s for 100k.
#
# After the session's merges for issue 27 (2026-12-03, quiet machine, load 1.0-1.9), `--sizes 1000000`:
#   main 0faee60: replan pass 6.85 s best of 6.91 / 6.85 / 7.07 (load 1.84, core plan 2.42, persist
#   2.59); load alone 2.01 s wall, persist alone 2.93 s. The session's base 5d639fd, right after on
#   the same machine: 5.97 s best of 6.76 / 5.97 / 6.69 (load 1.83, plan 1.93, persist 2.21); load
#   alone 1.81 s, persist alone 2.44 s. Both over the 5 s target; medians 6.91 against 6.69 s.
#
# Issue 27, the chart ids as integers (branch `record`, 2026-12-03), `--sizes 1000000`: the core takes
# the snapshot's id array itself (no 19-digit keys formatted in the load, none read back in the
# persist's alignment check or for the heads of line). In isolation at 1M those two were 0.09-0.10 s
# and 0.04-0.07 s of CPU. Main (982c9fd) at 14:03-14:05, load average 1.3-3.1: pass 4.35 s best of
# 5.07 / 4.35 / 4.62 (load 1.09, core plan 1.42, persist 1.84); load alone wall 1.13 s, CPU 0.38 s
# (backends 0.70); persist alone wall 2.37 s, CPU 0.39 s (backend 1.27); the whole bench 19.3 s user
# + 9.8 s system, peak RSS 1.28 GB. The branch at 14:51-14:54, load average 9.0-12.2 (other sessions'
# suites): pass 7.54 s best of 7.54 / 8.46 / 11.41 (load 1.92, core plan 3.17, persist 2.44); load
# alone wall 3.15 s, CPU 0.39 s (backends 0.80); persist alone wall 4.80 s, CPU 0.21 s (backend 1.20);
# the whole bench 16.1 s user + 6.8 s system, peak RSS 1.08 GB. Walls at that load are 2-3x a quiet
# machine's; the CPU figures are the comparison: the persist's own CPU halved, the load's unchanged.
# Again at 14:58-15:01, load average 2.7 at the start, 7.5-8.6 during: pass 10.19 s best of 18.89 /
# 13.11 / 10.19; load alone CPU 0.42 s (backends 0.79), persist alone CPU 0.23 s (backend 1.46); peak
# RSS 1.08 GB. The 5 s target is not shown on this shared machine; no quiet window to measure it in.

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from backlog import BASE_URL, run_at_sizes, seed_backlog, use_database

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BENCH_DB = BASE_URL.rsplit("/", 1)[1] + "_bench_replan"  # one per engineer's DATABASE_URL
use_database(BENCH_DB)


PASSES = 3
TARGET_SECONDS = {100_000: 1.0, 1_000_000: 5.0}  # issue #17


def backend_cpu_seconds(pid: int) -> float | None:
    """CPU time (user and system) the PostgreSQL backend `pid` has used so far; None when the server is
    not on this machine."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_backend_pid() -> int:
    """The process id of the PostgreSQL backend of Django's connection."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    return int(pid)


def measure_load() -> str:
    """The snapshot's load alone, PASSES times: the medians of its wall time, of this process's CPU and of
    its PostgreSQL backends' CPU (the figures the other processes of a shared machine move least): its
    connection's, plus that of the second connection that reads half the charts (`packed_rows`), if
    any, taken once its half is read."""

    from scheduling import packed_rows
    from scheduling.snapshot import load_snapshot

    own_pid = own_backend_pid()
    others: list[float] = []
    fetch = packed_rows._fetch

    def fetch_counted(pgconnection: Any, statement: str, params: Any) -> Any:
        row = fetch(pgconnection, statement, params)
        if (pid := pgconnection.info.backend_pid) != own_pid and (seconds := backend_cpu_seconds(pid)) is not None:
            others.append(seconds)
        return row

    packed_rows._fetch = fetch_counted  # type: ignore[assignment]
    walls, clients, servers = [], [], []
    try:
        for _ in range(PASSES):
            others.clear()
            server, client, wall = backend_cpu_seconds(own_pid), time.process_time(), time.perf_counter()
            load_snapshot()
            walls.append(time.perf_counter() - wall)
            clients.append(time.process_time() - client)
            server_after = backend_cpu_seconds(own_pid)
            if server is not None and server_after is not None:
                servers.append(server_after - server + sum(others))
    finally:
        packed_rows._fetch = fetch  # type: ignore[assignment]
    server_figure = f"{statistics.median(servers):.2f} s" if servers else "n/a (a remote server)"
    return (
        f"load alone, medians of {PASSES}: wall {statistics.median(walls):.2f} s, CPU of this process"
        f" {statistics.median(clients):.2f} s, of its PostgreSQL backends {server_figure}"
    )


def measure_persist() -> str:
    """The persist alone (`replan.write_plan` of one plan), PASSES times: the medians as `measure_load`'s
    (the backend's CPU is its own: a parallel index build's workers are not counted)."""
    from scheduling import core
    from scheduling.replan import write_plan
    from scheduling.snapshot import load_snapshot

    own_pid = own_backend_pid()
    snapshot = load_snapshot()
    plan = core.plan(snapshot.scenario)
    plan.reason.column()
    walls, clients, servers = [], [], []
    for _ in range(PASSES):
        server, client, wall = backend_cpu_seconds(own_pid), time.process_time(), time.perf_counter()
        write_plan(snapshot, plan)
        walls.append(time.perf_counter() - wall)
        clients.append(time.process_time() - client)
        server_after = backend_cpu_seconds(own_pid)
        if server is not None and server_after is not None:
            servers.append(server_after - server)
    server_figure = f"{statistics.median(servers):.2f} s" if servers else "n/a (a remote server)"
    return (
        f"persist alone, medians of {PASSES}: wall {statistics.median(walls):.2f} s, CPU of this process"
        f" {statistics.median(clients):.2f} s, of its PostgreSQL backend {server_figure}"
    )


def measure(size: int) -> None:
    from scheduling.replan import plan_refresh

    seed_backlog(size)
    first = plan_refresh()  # warm: the first pass plans a backlog no replan has seen
    print(
        f"{size:>8,} queued: first pass {first.seconds:6.2f} s (persist"
        f" {first.seconds - first.load_seconds - first.plan_seconds:.2f} s: every chart's first plan recorded)"
    )
    results = [plan_refresh() for _ in range(PASSES)]
    best = min(results, key=lambda result: result.seconds)
    target = TARGET_SECONDS.get(size)
    print(
        f"{size:>8,} queued: replan pass {best.seconds:6.2f} s (load {best.load_seconds:.2f} s, core plan "
        f"{best.plan_seconds:.2f} s, persist {best.seconds - best.load_seconds - best.plan_seconds:.2f} s;"
        f" {best.ordered:,} ordered; best of {PASSES}, all: {', '.join(f'{r.seconds:.2f}' for r in results)})"
        + (f" target <= {target} s" if target else "")
        + f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"{size:>8,} queued: {measure_load()}; load average {os.getloadavg()[0]:.1f}")
    print(f"{size:>8,} queued: {measure_persist()}; load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    run_at_sizes(BENCH_DB, measure, description=__doc__)


if __name__ == "__main__":
    main()
