"""Benchmark of the strict JSON reading every API body and lever goes through (a figure, not a test).

    .venv/bin/python bench/bench_strict_json.py

`common.strict.loads` against a bare `json.loads` on bodies the API takes: a single submission, and
bulk submissions of 1,000 and 10,000 items (each with a small nested payload). Best of 9 runs each.

Figure behind `common.strict.loads`'s depth measure, as measured when it was written: a 10,000-item
bulk body costs it ~20 ms.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")

from bench.backlog import best
from common import strict


def item(index: int) -> dict[str, object]:
    return {"workflow": "render", "external_id": f"e{index}", "payload": {"n": index, "tags": ["a", {"b": 1}]}}


def main() -> None:
    bodies = {
        "single": json.dumps(item(0)).encode(),
        "bulk 1,000": json.dumps({"items": [item(i) for i in range(1_000)]}).encode(),
        "bulk 10,000": json.dumps({"items": [item(i) for i in range(10_000)]}).encode(),
    }
    print(f"{'body':<12} {'bytes':>10} {'json.loads':>12} {'strict.loads':>13} {'ratio':>6}")
    for name, body in bodies.items():
        plain = best(lambda body=body: json.loads(body), runs=9)
        checked = best(lambda body=body: strict.loads(body), runs=9)
        print(f"{name:<12} {len(body):>10,} {plain * 1000:>10.2f}ms {checked * 1000:>11.2f}ms {checked / plain:>5.1f}x")


if __name__ == "__main__":
    main()
