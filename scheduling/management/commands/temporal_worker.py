"""`manage.py temporal_worker [--task-queue QUEUE ...]`: run the demo workflows' Temporal worker."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import traceback
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from common import tracing
from scheduling.temporal.worker import DEFAULT_TASK_QUEUE, enqueue_reconcile_hint, run_worker


class Command(BaseCommand):
    help = "Run the Temporal worker for fairsched's demo workflows until SIGINT or SIGTERM."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--task-queue",
            action="append",
            dest="task_queues",
            metavar="QUEUE",
            help="Task queue to poll; repeat for several (default: settings.TEMPORAL_TASK_QUEUE).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Serve until a signal, then leave with `os._exit`.

        The process used a Temporal client, and such a process can abort while the interpreter
        finalizes (temporalio sdk-python issue 300), so it flushes its output and exits without
        finalizing: 0 after a clean stop, 1 if the worker failed.
        """
        queues = options["task_queues"] or [getattr(settings, "TEMPORAL_TASK_QUEUE", DEFAULT_TASK_QUEUE)]
        code = 0
        try:
            asyncio.run(self._serve(queues))
            self.stdout.write("temporal worker stopped")
        except Exception:
            self.stderr.write(f"temporal worker failed:\n{traceback.format_exc()}")
            code = 1
        finally:
            tracing.flush()  # os._exit ends the exporter's thread with what it still holds
            self.stdout.flush()
            self.stderr.flush()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    async def _serve(self, queues: list[str]) -> None:
        """Run the worker; SIGINT and SIGTERM set its stop event for a graceful shutdown."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        self.stdout.write(f"temporal worker polling {', '.join(queues)}; Ctrl-C stops it")
        self.stdout.flush()
        await run_worker(task_queues=queues, stop_event=stop, completion_hook=enqueue_reconcile_hint)
