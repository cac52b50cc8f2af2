"""Times in the dashboard's partials. The page's script turns every `data-rel` time into "in 4m" /
"3m ago" as soon as a partial lands and every second after; the server writes the UTC clock time, so
a partial reads correctly before that, and the exact time is always in the title."""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()
DASH = "\u2013"


@register.simple_tag
def rel(iso: str | None) -> SafeString:
    """A time the page keeps relative (`data-rel`), from an ISO 8601 string; a dash when there is none."""
    if not iso:
        return format_html('<span title="not planned" data-rel="">{}</span>', DASH)
    return format_html('<span title="{}" data-rel="{}">{}</span>', iso, iso, iso[11:19])


def eta(iso: str | None, low: str | None, high: str | None) -> str:
    """The ETA with its p10-p90 band when the plan has one (the exact times in the ETA's title), from
    escaped ISO 8601 times. Plain strings, not format_html: 500 rows of that were a third of the table's time."""
    if not iso:
        return f'<span title="not planned" data-rel="">{DASH}</span>'
    if not low or not high or low == high:
        return f'<span title="{iso}" data-rel="{iso}">{iso[11:19]}</span>'
    return (
        f'<span title="{iso}; p10-p90: {low} to {high}" data-rel="{iso}">{iso[11:19]}</span> <small class="band">'
        f'(<span data-rel="{low}">{low[11:19]}</span>{DASH}<span data-rel="{high}">{high[11:19]}</span>)</small>'
    )


@register.simple_tag
def running_eta(iso: str | None, low: str | None, high: str | None) -> SafeString:
    """A running chart's ETA and band as `eta` writes them, marked never to show in the past: the page's
    script writes "any moment" for a time the clock has passed (the next replan has not moved it yet),
    and so does the server for one already past."""
    html = eta(iso and escape(iso), low and escape(low), high and escape(high)).replace(
        "data-rel=", "data-not-past data-rel="
    )
    if iso and datetime.fromisoformat(iso) <= timezone.now():
        html = html.replace(f">{escape(iso)[11:19]}<", ">any moment<", 1)
    return mark_safe(html)  # noqa: S308 - the times are escaped above


@register.simple_tag
def promise(score: dict[str, Any]) -> str:
    """One line of the ETA accuracy panel (`selectors.eta_accuracy`): '12% off, 78% in band (40)'."""
    if not score["charts"]:
        return "no finished chart"
    return f"{score['median_error']:.0%} off, {score['in_band']:.0%} in band ({score['charts']})"


# The org table's rows: 500 orgs, re-rendered at every replan's hint. A row shows its org's levers and
# load and holds no form: the levers are edited in the one editor the page keeps beside the table, which
# reads the row's data-* values when it opens (levers in every row made the table a megabyte of HTML,
# 2.2 KB a row, and its first resync after a lever the dashboard's slowest update). The rows come from one
# format string: the template engine takes a quarter of a second per node-heavy row loop at 500 orgs.
ORG_ROW = (
    '<tr id="org-{id}"{oob} data-org="{slug}" data-held="{held}" data-weight="{weight}" data-cap="{cap}"'
    ' data-limit="{queue_limit}" data-etag="{etag}" data-clear="{clear}" data-queued="{queued}"'
    ' data-running="{running}"{held_class}>'
    '<td><button type="button" class="link" data-edit>{slug}</button> <small>{name}</small></td>'
    '<td class="num">{weight}</td><td>{hold}</td><td class="num">{cap}</td><td class="num">{queue_limit}</td>'
    "<td>{costs}</td>"
    '<td class="num">{queued}</td><td class="num">{paused}</td><td class="num">{running}</td>'
    '<td class="num">{cost_in_use}</td><td>{clears}</td><td class="err" data-err></td></tr>\n'
)
HOLD = '<button type="button" data-hold>Hold</button>'
RELEASE = '<button type="button" class="warn" data-hold title="release restores weight {weight}{told}">Release</button>'
COST = '<span class="tag" data-workflow="{}" data-cost="{}">{}={}</span>'


@register.simple_tag
def org_rows(orgs: list[dict[str, Any]], swap: bool = False) -> SafeString:
    """The rows of the org table (`scheduling.selectors.org_rows`); with `swap`, each row replaces the
    row of its id (an out-of-band swap)."""
    rows = []
    for org in orgs:
        slug = escape(org["slug"])
        held = org["held"]
        clear, low, high = (org[key] and escape(org[key]) for key in ("clear_at", "clear_low", "clear_high"))
        costs = [(escape(name), int(cost)) for name, cost in org["costs"].items()]
        cap = "" if org["max_concurrency"] is None else org["max_concurrency"]
        queue_limit = "" if org["queue_limit"] is None else org["queue_limit"]
        rows.append(
            ORG_ROW.format(
                id=int(org["id"]),
                oob=' hx-swap-oob="true"' if swap else "",
                slug=slug,
                name=escape(org["name"]),
                held="1" if held else "0",
                held_class=' class="is-held"' if held else "",
                weight=org["weight"],
                cap=cap,
                queue_limit=queue_limit,
                etag=escape(org["etag"]),
                clear=clear or "",
                queued=org["queued"],
                paused=org["paused"],
                running=org["running"],
                cost_in_use=org["cost_in_use"],
                hold=RELEASE.format(
                    weight=org["weight_before_hold"] or 1,
                    told=f"; its members read: {escape(org['hold_reason'])}" if org["hold_reason"] else "",
                )
                if held
                else HOLD,
                costs=" ".join(COST.format(name, cost, name, cost) for name, cost in costs),
                clears='<span class="badge held">held</span>' if held else eta(clear, low, high),
            )
        )
    return mark_safe("".join(rows))  # noqa: S308 - every value above is escaped or a number
