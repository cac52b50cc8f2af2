"""`python -m scheduling.core plan FILE` (`-` reads standard input): the plan of a scenario JSON.

Prints the plan JSON on standard output and exits 0. Bad input (unreadable file, invalid JSON, a
scenario that breaks the contract) exits 2 with nothing on standard output and one line on
standard error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from .io import ScenarioError, parse_scenario, plan_to_json
from .planner import plan

USAGE = "usage: python -m scheduling.core plan FILE  (FILE is a scenario JSON; - reads stdin)"
BAD_INPUT = 2


def main(argv: Sequence[str]) -> int:
    """1. Read the scenario; 2. parse and check it; 3. plan it and print the plan."""
    if len(argv) != 2 or argv[0] != "plan":
        return _fail(USAGE)
    path = argv[1]
    try:
        raw = sys.stdin.buffer.read() if path == "-" else open(path, "rb").read()  # noqa: SIM115
    except OSError as error:
        return _fail(f"{path}: cannot read: {error.strerror or error}")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as error:
        return _fail(f"{path}: invalid JSON: {error}")
    try:
        scenario = parse_scenario(data)
    except ScenarioError as error:
        return _fail(str(error))
    sys.stdout.write(json.dumps(plan_to_json(plan(scenario))) + "\n")
    return 0


def _fail(message: str) -> int:
    sys.stderr.write(" ".join(message.split()) + "\n")
    return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
