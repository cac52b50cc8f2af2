"""Closed-loop load on the chart status read, for the multi-instance run: how many reads a second one
web process serves, and two.

`status_throughput` runs `clients` threads, each with its own keep-alive connection and its own API
token (so each is a caller of its own under the rate limits, which stay on), spread over the given
web processes round-robin; each GETs a random chart `per_client` times back to back.
"""

from __future__ import annotations

import http.client
import random
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Throughput:
    web_processes: int
    requests: int
    errors: int
    per_second: float
    p50_ms: float
    p95_ms: float


def _quantile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def status_throughput(*, ports: list[int], tokens: list[str], chart_ids: list[int], per_client: int = 40) -> Throughput:
    """Every client (one per token) reads `per_client` chart statuses back to back; bounded by the
    connections' 60 s timeout."""
    latencies: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(tokens))

    def client(index: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", ports[index % len(ports)], timeout=60)
        headers = {"Authorization": f"Token {tokens[index]}", "Accept": "application/json"}
        pick = random.Random(index)
        mine: list[float] = []
        failed: list[int] = []
        barrier.wait()
        for _ in range(per_client):
            started = time.perf_counter()
            try:
                connection.request("GET", f"/api/v1/charts/{pick.choice(chart_ids)}/", headers=headers)
                response = connection.getresponse()
                response.read()
                status = response.status
            except OSError:
                connection.close()
                status = 0
            mine.append(time.perf_counter() - started)
            if status != 200:
                failed.append(status)
        connection.close()
        with lock:
            latencies.extend(mine)
            errors.extend(failed)

    threads = [threading.Thread(target=client, args=(index,)) for index in range(len(tokens))]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = time.perf_counter() - started
    return Throughput(
        web_processes=len(ports),
        requests=len(latencies),
        errors=len(errors),
        per_second=len(latencies) / total if total else 0.0,
        p50_ms=1000 * _quantile(latencies, 0.5),
        p95_ms=1000 * _quantile(latencies, 0.95),
    )
