"""`manage.py readyz`: the `/readyz` checks for processes that serve no HTTP (Celery, beat, the
Temporal worker), as a container or systemd health check. Exit 0 when ready, else 1 naming what failed."""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import BaseCommand

from fairsched.health import readiness_checks


class Command(BaseCommand):
    help = "Check PostgreSQL, migrations, Redis and Temporal as /readyz does; exit 1 if any fails."

    def handle(self, *args: Any, **options: Any) -> None:
        """Print one line per check and leave with `os._exit`: the process used a Temporal client,
        and such a process can abort while the interpreter finalizes (temporalio sdk-python issue 300)."""
        results = readiness_checks()
        for result in results:
            self.stdout.write(f"{result.name}: {result.reason}")
        failed = [result.name for result in results if not result.ok]
        if failed:
            self.stderr.write(f"not ready: {', '.join(failed)}")
        else:
            self.stdout.write("ready")
        self.stdout.flush()
        self.stderr.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1 if failed else 0)
