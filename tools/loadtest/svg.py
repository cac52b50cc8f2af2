"""Small hand-written SVG charts for the load report (no plotting library needed)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * step:
            step *= factor
            break
    first = math.ceil(low / step) * step
    return [round(first + i * step, 10) for i in range(int((high - first) / step) + 1)]


def _label(value: float) -> str:
    return f"{value:g}" if abs(value) < 1e5 else f"{value:.2e}"


@dataclass
class Chart:
    """A plot area with linear axes; add series, then `render()` the SVG text."""

    title: str
    x_label: str
    y_label: str
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    width: int = 760
    height: int = 320
    margin: tuple[int, int, int, int] = (34, 20, 46, 60)  # top, right, bottom, left
    items: list[str] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)

    def x(self, value: float) -> float:
        _, right, _, left = self.margin
        low, high = self.x_range
        return left + (value - low) / ((high - low) or 1) * (self.width - left - right)

    def y(self, value: float) -> float:
        top, _, bottom, _ = self.margin
        low, high = self.y_range
        return self.height - bottom - (value - low) / ((high - low) or 1) * (self.height - top - bottom)

    def line(self, points: Sequence[tuple[float, float]], color: str, label: str | None = None, *, step: bool = False,
             width: float = 1.5, dash: str = "") -> None:  # fmt: skip
        if not points:
            return
        coords: list[str] = []
        previous: tuple[float, float] | None = None
        for px, py in points:
            if step and previous is not None:
                coords.append(f"{self.x(px):.1f},{self.y(previous[1]):.1f}")
            coords.append(f"{self.x(px):.1f},{self.y(py):.1f}")
            previous = (px, py)
        dashing = f' stroke-dasharray="{dash}"' if dash else ""
        self.items.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="{width}"{dashing} points="{" ".join(coords)}"/>'
        )
        if label:
            self.legend.append((label, color))

    def dots(self, points: Sequence[tuple[float, float]], color: str, label: str | None = None, radius: float = 2.2
             ) -> None:  # fmt: skip
        for px, py in points:
            self.items.append(
                f'<circle cx="{self.x(px):.1f}" cy="{self.y(py):.1f}" r="{radius}" fill="{color}" fill-opacity="0.6"/>'
            )
        if label:
            self.legend.append((label, color))

    def band(self, start: float, end: float, color: str, label: str) -> None:
        """A shaded vertical span, labelled at its top."""
        x0, x1 = self.x(max(start, self.x_range[0])), self.x(min(end, self.x_range[1]))
        top, _, bottom, _ = self.margin
        self.items.append(
            f'<rect x="{x0:.1f}" y="{top}" width="{max(1.0, x1 - x0):.1f}" height="{self.height - top - bottom}" '
            f'fill="{color}" fill-opacity="0.15"/>'
            f'<text x="{x0 + 2:.1f}" y="{top + 10}" font-size="9" fill="#555">{escape(label)}</text>'
        )

    def marker(self, at: float, label: str, color: str = "#d62728", row: int = 0) -> None:
        """A vertical line at `at` with a label."""
        top, _, bottom, _ = self.margin
        x = self.x(at)
        self.items.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{self.height - bottom}" stroke="{color}" '
            f'stroke-dasharray="3,2"/><text x="{x + 2:.1f}" y="{top + 22 + 10 * row}" font-size="9" '
            f'fill="{color}">{escape(label)}</text>'
        )

    def bars(self, groups: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]]) -> None:
        """Grouped bars: one group per label on the x axis (x_range must be (0, len(groups)))."""
        slot = 1.0 / (len(series) + 1)
        for index, (name, values) in enumerate(series):
            color = PALETTE[index % len(PALETTE)]
            for group, value in enumerate(values):
                if value is None:
                    continue
                x0, x1 = self.x(group + slot * (index + 0.5)), self.x(group + slot * (index + 1.5))
                y0, y1 = self.y(max(self.y_range[0], 0.0)), self.y(min(value, self.y_range[1]))
                self.items.append(
                    f'<rect x="{x0:.1f}" y="{min(y0, y1):.1f}" width="{x1 - x0:.1f}" height="{abs(y0 - y1):.1f}" '
                    f'fill="{color}"><title>{escape(name)} {escape(groups[group])}: {value:.2f}</title></rect>'
                )
            self.legend.append((name, color))
        _, _, bottom, _ = self.margin
        for group, name in enumerate(groups):
            x = self.x(group + 0.5)
            y = self.height - bottom + 12
            self.items.append(
                f'<text x="{x:.1f}" y="{y}" font-size="9" text-anchor="end" transform="rotate(-30 {x:.1f} {y})">'
                f"{escape(name)}</text>"
            )

    def render(self, *, x_ticks: bool = True) -> str:
        top, right, bottom, left = self.margin
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
            f'viewBox="0 0 {self.width} {self.height}" font-family="sans-serif">',
            f'<rect width="{self.width}" height="{self.height}" fill="white"/>',
            f'<text x="{left}" y="18" font-size="13" font-weight="bold">{escape(self.title)}</text>',
        ]
        for tick in nice_ticks(*self.y_range):
            y = self.y(tick)
            parts.append(
                f'<line x1="{left}" x2="{self.width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                f'<text x="{left - 4}" y="{y + 3:.1f}" font-size="10" text-anchor="end">{_label(tick)}</text>'
            )
        if x_ticks:
            for tick in nice_ticks(*self.x_range, count=8):
                x = self.x(tick)
                parts.append(
                    f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{self.height - bottom}" y2="{self.height - bottom + 4}" '
                    f'stroke="#333"/><text x="{x:.1f}" y="{self.height - bottom + 15}" font-size="10" '
                    f'text-anchor="middle">{_label(tick)}</text>'
                )
        parts.append(
            f'<line x1="{left}" x2="{self.width - right}" y1="{self.height - bottom}" y2="{self.height - bottom}" '
            f'stroke="#333"/><line x1="{left}" x2="{left}" y1="{top}" y2="{self.height - bottom}" stroke="#333"/>'
        )
        parts.extend(self.items)
        parts.append(
            f'<text x="{(left + self.width - right) / 2:.0f}" y="{self.height - 4}" font-size="11" '
            f'text-anchor="middle">{escape(self.x_label)}</text>'
            f'<text x="14" y="{(top + self.height - bottom) / 2:.0f}" font-size="11" text-anchor="middle" '
            f'transform="rotate(-90 14 {(top + self.height - bottom) / 2:.0f})">{escape(self.y_label)}</text>'
        )
        for index, (label, color) in enumerate(self.legend):
            y = top + 4 + 13 * index
            x = self.width - right - 170
            parts.append(
                f'<rect x="{x}" y="{y}" width="10" height="10" fill="{color}"/>'
                f'<text x="{x + 14}" y="{y + 9}" font-size="10">{escape(label)}</text>'
            )
        parts.append("</svg>")
        return "\n".join(parts)
