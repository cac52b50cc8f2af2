"""The shared scenarios (`../shared/scenarios` beside the repository) and the project's own
(`scenarios/` here): each gives its exact plan."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from scheduling.core import parse_scenario, plan, plan_to_json

from .support import replay_forced

SCENARIOS = Path(__file__).resolve().parents[3].parent / "shared" / "scenarios"
# The project's own scenarios of its extensions (due first, late chances), checked alike.
OWN_SCENARIOS = Path(__file__).resolve().parent / "scenarios"
INPUTS = sorted(
    path
    for folder in (SCENARIOS, OWN_SCENARIOS)
    for path in folder.glob("*.json")
    if not path.name.endswith(".plan.json")
)

needs_scenarios = pytest.mark.skipif(not INPUTS, reason=f"no shared scenarios in {SCENARIOS}")


def difference(got: object, want: object, path: str = "plan") -> str | None:
    """Where `got` differs from `want` (numbers within 1e-9 relative, 1e-6 absolute), or None."""
    if isinstance(got, int | float) and isinstance(want, int | float) and not isinstance(got, bool):
        return None if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-6) else f"{path}: {got} != {want}"
    if isinstance(got, dict) and isinstance(want, dict):
        if got.keys() != want.keys():
            return f"{path}: keys {sorted(got.keys() ^ want.keys())[:5]} differ"
        return next((d for key in want if (d := difference(got[key], want[key], f"{path}.{key}"))), None)
    if isinstance(got, list) and isinstance(want, list):
        if len(got) != len(want):
            return f"{path}: length {len(got)} != {len(want)}"
        pairs = zip(got, want, strict=True)
        return next((d for i, (g, w) in enumerate(pairs) if (d := difference(g, w, f"{path}[{i}]"))), None)
    return None if got == want else f"{path}: {got!r} != {want!r}"


def expected_plan(scenario: Path) -> object:
    return json.loads(scenario.with_name(scenario.stem + ".plan.json").read_text())


@needs_scenarios
@pytest.mark.parametrize("scenario", INPUTS, ids=[path.stem for path in INPUTS])
def test_the_plan_command_gives_the_expected_plan(scenario: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "scheduling.core", "plan", str(scenario)], capture_output=True, text=True, check=False
    )
    assert (run.returncode, run.stderr) == (0, "")
    assert difference(json.loads(run.stdout), expected_plan(scenario)) is None


@needs_scenarios
@pytest.mark.parametrize("scenario", INPUTS, ids=[path.stem for path in INPUTS])
def test_the_event_replay_alone_gives_the_expected_plan(scenario: Path) -> None:
    parsed = parse_scenario(json.loads(scenario.read_text()))
    with replay_forced(lanes=False):
        got = plan_to_json(plan(parsed))
    assert difference(json.loads(json.dumps(got)), expected_plan(scenario)) is None
