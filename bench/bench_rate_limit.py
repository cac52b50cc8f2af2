"""What the API's rate limit costs a request: the same GET a few thousand times, limits off and on.

Run: `.venv/bin/python bench/bench_rate_limit.py`. It uses a throwaway test database on the server of
DATABASE_URL and the cache of REDIS_URL, and Django's in-process test client (no server), so the
figure is the limit's own work: one cache read and write of the caller's recent request times.
The "on" rate keeps up to 400 times per caller, more than the default limit (100/s) ever holds.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")

REQUESTS = 2_000
WARMUP = 200


def main() -> None:
    import django

    django.setup()
    # The "on" runs answer many 429s on purpose; Django logs each as a warning.
    logging.getLogger("django.request").setLevel(logging.ERROR)
    from django.test.utils import setup_databases, setup_test_environment, teardown_databases

    setup_test_environment()
    databases = setup_databases(verbosity=0, interactive=False)
    try:
        measure()
    finally:
        teardown_databases(databases, verbosity=0)


def measure() -> None:
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    from orgs.access import CallerReadThrottle, api_token_issue
    from tests.factories import ChartFactory, MembershipFactory, OrgFactory, WorkflowFactory

    org = OrgFactory(slug="bench")
    user = User.objects.create_user("bench-rate-limit")
    MembershipFactory(user=user, org=org)
    chart = ChartFactory(org=org, workflow=WorkflowFactory(name="bench"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_issue(user=user, org=org)}")
    url = f"/api/v1/charts/{chart.pk}/"
    # Alternated three times: on a shared machine, the best of each is the figure.
    for label, rate in (("limits off", None), ("limits on (400/s)", "400/s")) * 3:
        CallerReadThrottle.THROTTLE_RATES = {"read": rate, "write": rate}
        for _ in range(WARMUP):
            client.get(url)
        started = time.perf_counter()
        statuses = {client.get(url).status_code for _ in range(REQUESTS)}
        per_request = (time.perf_counter() - started) / REQUESTS * 1000
        print(f"{label:<20} {per_request:6.3f} ms per GET (statuses {sorted(statuses)})")


if __name__ == "__main__":
    main()
