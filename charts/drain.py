"""The backlog's predicted drain, drawn: charts left over time, with the band, from the plan's ETAs.

Pure arithmetic over the plan's finish times (no queries), shaped for a server-rendered SVG: the
page's Content-Security-Policy allows no inline script or style, so the geometry is computed here
and the colours come from the portal's stylesheet by class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

WIDTH = 600
HEIGHT = 160
MARGIN_LEFT = 40
MARGIN_BOTTOM = 20
TICKS = 4
# A time axis shorter than this labels its ticks to the second.
SECONDS_WITHIN = timedelta(minutes=10)


@dataclass(frozen=True)
class Finish:
    """One unfinished chart's predicted finish: the ETA and its p10-p90 band."""

    eta: datetime
    low: datetime
    high: datetime


@dataclass(frozen=True)
class Tick:
    x: float
    at: datetime


@dataclass(frozen=True)
class Step:
    """The plot read at one tick of its time axis: the charts left by the ETAs (the line) and by the
    early (p10) and the late (p90) finishes (the band's edges), for its table."""

    at: datetime
    median: int
    early: int
    late: int


@dataclass(frozen=True)
class DrainPlot:
    """SVG geometry: `line` the charts left by the ETAs, `band` the area between the charts left by
    the early (p10) and the late (p90) finishes; x is time from `start` to `end`, y charts left."""

    start: datetime
    end: datetime
    total: int
    line: str
    band: str
    ticks: list[Tick]
    steps: list[Step]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = MARGIN_LEFT
    bottom: int = HEIGHT - MARGIN_BOTTOM

    @property
    def to_the_second(self) -> bool:
        """Whether the axis labels its ticks to the second: over minutes, four ticks to the minute
        would read '08:01 08:02 08:02 08:02 08:02'."""
        return self.end - self.start < SECONDS_WITHIN


def _left_over_time(finishes: Sequence[datetime], total: int, start: datetime) -> list[tuple[datetime, int]]:
    """A step curve: (time, charts left just after it), one step down per finish, from `total` at `start`."""
    points = [(start, total)]
    left = total
    for finish in sorted(max(start, f) for f in finishes):
        points.append((finish, left))
        left -= 1
        points.append((finish, left))
    return points


def drain_plot(*, finishes: Sequence[Finish], now: datetime) -> DrainPlot | None:
    """The plot of the backlog draining, or None when nothing is predicted.

    1. The time axis runs from now to the latest p90 finish (at least a minute, so that a backlog
       minutes away still spreads out).
    2. Three step curves count the charts left: by ETA (the line), by p10 and by p90 finish (the
       band's two edges; the band is the p90 edge forward and the p10 edge back).
    3. Times and counts are scaled to the drawing area; four ticks label the time axis.
    4. The three curves are read at each tick, for the plot's table (its text alternative).
    """
    if not finishes:
        return None
    total = len(finishes)
    end = max(now + timedelta(minutes=1), max(f.high for f in finishes))
    span = (end - now).total_seconds()
    plot_width = WIDTH - MARGIN_LEFT
    plot_height = HEIGHT - MARGIN_BOTTOM

    def xy(point: tuple[datetime, int]) -> str:
        at, left = point
        x = MARGIN_LEFT + plot_width * (at - now).total_seconds() / span
        y = plot_height * (1 - left / total)
        return f"{x:.1f},{y:.1f}"

    line = [xy(p) for p in _left_over_time([f.eta for f in finishes], total, now)]
    late = [xy(p) for p in _left_over_time([f.high for f in finishes], total, now)]
    early = [xy(p) for p in _left_over_time([f.low for f in finishes], total, now)]
    ticks = [
        Tick(x=MARGIN_LEFT + plot_width * step / TICKS, at=now + timedelta(seconds=span * step / TICKS))
        for step in range(TICKS + 1)
    ]
    steps = [
        Step(
            at=tick.at,
            median=sum(f.eta > tick.at for f in finishes) if tick.at > now else total,
            early=sum(f.low > tick.at for f in finishes) if tick.at > now else total,
            late=sum(f.high > tick.at for f in finishes) if tick.at > now else total,
        )
        for tick in ticks
    ]
    return DrainPlot(
        start=now,
        end=end,
        total=total,
        line=" ".join(line),
        band=" ".join(late + early[::-1]),
        ticks=ticks,
        steps=steps,
    )
