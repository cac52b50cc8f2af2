# fairsched: `make run` starts everything on an embedded default; `make test` runs the whole suite.
VENV ?= .venv
PY := $(VENV)/bin/python
# Tests use their own Redis database so that they never feed a running development worker.
TEST_REDIS_URL ?= redis://127.0.0.1:6379/9
# The suite runs on this many xdist workers (each takes the next Redis database: 9, 10, ...); 0 runs it in one process.
TEST_WORKERS ?= 2

.PHONY: run test lint bench report multirun venv

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

run: venv
	$(PY) -m fairsched.launcher

test: venv
	REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)} $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .
	$(VENV)/bin/lint-imports
	$(PY) manage.py makemigrations --check --dry-run

# Benchmarks print figures; none is a timed test. Each uses databases and servers of its own.
bench: venv
	$(PY) bench/bench_machine.py
	$(PY) bench/bench_core.py
	$(PY) bench/bench_replan.py --sizes 10000,100000,1000000
	$(PY) bench/bench_replan_plan.py
	$(PY) bench/bench_what_if.py
	$(PY) bench/bench_reconcile.py
	$(PY) bench/bench_durations.py
	$(PY) bench/bench_fair_service.py
	$(PY) bench/bench_latency.py
	$(PY) bench/bench_api.py
	$(PY) bench/bench_strict_json.py
	REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)} $(PY) bench/bench_rate_limit.py
	REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)} $(PY) bench/bench_dashboard.py

# The hostile load run on the real stack (its own services) and its report in reports/; a few minutes.
# LOADRUN_POLICY=round_robin runs it under the other policy (the default is deficit).
report: venv
	LOADRUN_SECONDS=$${LOADRUN_SECONDS:-180} $(PY) -m tools.loadtest.report $${LOADRUN_POLICY:+--policy $$LOADRUN_POLICY}

# The hostile load on two of every process (web, Celery worker with beat, Temporal worker), with the
# faults and the dispatcher killed mid-pass repeatedly; figures in reports/multirun/. A few minutes.
multirun: venv
	MULTIRUN_SECONDS=$${MULTIRUN_SECONDS:-120} $(PY) -m tools.loadtest.multirun
