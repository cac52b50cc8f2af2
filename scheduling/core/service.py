"""Each org's place in the rounds across replans, kept as virtual time (start-time fair queueing).

The contract numbers rounds from the waiting charts alone; replanning after every start would then
restart every org at round 0 and hand each slot that frees one at a time to the oldest head. So a
caller that replans (the live shell, the simulator) keeps each org's service as virtual time in
rounds, a unit that no lever can rescale, with the two rules below. They live here so that every
caller shares them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .model import OrgPolicy, Policy


def start_service(*, weight: int, cost: int, policy: Policy | str, quantum: float) -> float:
    """The virtual time (in rounds) one fair-tier start adds to its org, with the weight and quantum
    of that moment: 1/weight under `round_robin`, cost/(weight x quantum) under `deficit`."""
    if policy == "deficit":
        return cost / (weight * quantum)
    return 1 / weight


@dataclass(frozen=True, slots=True)
class OrgService:
    """What `fair_service` needs of an org: its weight, cap and virtual time in rounds."""

    weight: int
    max_concurrency: int | None
    virtual_time: float


def fair_service(
    orgs: Mapping[str, OrgService],
    *,
    ready: Iterable[str],
    backlogged: Iterable[str],
    policy: Policy | str,
    quantum: float,
) -> tuple[dict[str, OrgPolicy], float | None]:
    """Each org's policy for the core, with its place in the rounds under way, and that round R.

    1. Each fair-tier start adds `start_service` to its org's virtual time (the caller records it, so
       that an undone start gives back exactly that).
    2. R is the least virtual time among the `ready` orgs: backlogged (eligible fair-tier charts
       waiting, weight > 0) *and* able to start now (a chart available now, under the org's cap).
       With none ready, the least among the `backlogged`; with none, there is no R (None).
    3. Every other org (idle, held, capped, all its charts in backoff or behind a paused provider, or
       paused) is to be raised to R by the caller, so that it joins the round under way with no
       credit and no debt; an org ahead of R keeps its lead, which it was already given.
    4. The core receives `served` in its contract unit: (virtual time - R) x the org's current unit
       (weight, or weight x quantum). A weight change, hold, release, cap, pause or policy switch
       thus takes effect from the next round, with no rescaled past.
    """
    candidates = [orgs[key].virtual_time for key in ready] or [orgs[key].virtual_time for key in backlogged]
    round_under_way = min(candidates, default=None)
    policies: dict[str, OrgPolicy] = {}
    for key, org in orgs.items():
        unit = org.weight * (quantum if policy == "deficit" else 1.0)
        ahead = 0.0 if round_under_way is None else max(0.0, org.virtual_time - round_under_way)
        # Rounded so that three starts of 1/3 are one whole round, not 0.999... of one.
        policies[key] = OrgPolicy(weight=org.weight, max_concurrency=org.max_concurrency, served=round(ahead * unit, 9))
    return policies, round_under_way
