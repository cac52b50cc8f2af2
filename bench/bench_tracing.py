"""CPU per chart status read (`GET /api/v1/charts/<id>/` through Django's test Client, in process),
with tracing off or on (`common.tracing`), and of another checkout's code (the same read before it).

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/bench_tracing.py off|on [--reads 2000]
        [--project /path/to/checkout]

`off` runs without `OTEL_EXPORTER_OTLP_ENDPOINT`; `on` sets it to an OTLP/HTTP sink started as a
child process (it answers and discards, so its CPU is not the read's), and the read's spans (the
request's and its queries') are exported in batches by the process's own thread, which counts. With
`--project` the project is imported from that checkout (`off` only: `main` before tracing existed).
Uses `bench_http_cpu.prepare` (an org of 1,000 charts, made once, and a member's token) and reads
random charts back to back after 200 reads to warm up; prints the process's CPU (every thread) and
wall time per read.

Figures (this machine, 2 cores shared with other engineers' work, 2,000 reads, three runs each,
interleaved main / off / on; CPU per read, the median first):
- main (before tracing): 2.71 ms (2.56-2.91)
- off: 2.95 ms (2.50-3.11): within the noise of main (the read runs no tracing code when off)
- on: 4.34 ms (3.51-4.57): +1.3-1.6 ms a read, about +50% (the request's span, a span per query and
  their OTLP export by the batch thread)
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path

SINK = """
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Sink(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

server = HTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
"""
WARM_UP = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["off", "on"])
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--project", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    sys.path.insert(0, str(args.project.resolve()))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")
    os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    sink = None
    if args.mode == "on":
        sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
        assert sink.stdout is not None
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{sink.stdout.readline().strip()}"
    try:
        import django

        django.setup()
        from bench_http_cpu import prepare
        from django.test import Client

        token, ids = prepare()
        client = Client(headers={"authorization": f"Token {token}", "accept": "application/json"})
        pick = random.Random(1)

        def one() -> None:
            response = client.get(f"/api/v1/charts/{pick.choice(ids)}/", SERVER_NAME="127.0.0.1")
            assert response.status_code == 200, response.content

        for _ in range(WARM_UP):
            one()
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(args.reads):
            one()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        traced = "opentelemetry" in sys.modules
        print(
            f"{args.mode} ({args.project}): opentelemetry imported {traced}; status read CPU "
            f"{1000 * cpu / args.reads:.3f} ms, wall {1000 * wall / args.reads:.3f} ms ({args.reads} reads)"
        )
    finally:
        if sink is not None:
            sink.kill()
            sink.wait()


if __name__ == "__main__":
    main()
