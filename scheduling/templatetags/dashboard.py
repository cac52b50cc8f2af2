"""Times in the dashboard's partials. The page's script turns every `data-rel` time into "in 4m" /
"3m ago" as soon as a partial lands and every second after; the server writes the UTC clock time, so
a partial reads correctly before that, and the exact time is always in the title."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()
DASH = "\u2013"


@register.simple_tag
def rel(iso: str | None) -> SafeString:
    """A time the page keeps relative (`data-rel`), from an ISO 8601 string; a dash when there is none."""
    if not iso:
        return format_html('<span title="not planned" data-rel="">{}</span>', DASH)
    return format_html('<span title="{}" data-rel="{}">{}</span>', iso, iso, iso[11:19])


@register.simple_tag
def eta(iso: str | None, low: str | None, high: str | None) -> SafeString:
    """The ETA with its p10-p90 band when the plan has one."""
    if not low or not high or low == high:
        return rel(iso)
    band = '{} <small class="band" title="p10-p90: {} to {}">({}{}{})</small>'
    return format_html(band, rel(iso), low, high, rel(low), DASH, rel(high))


# The org table's rows: 500 orgs with five levers each are ~1 MB of HTML, and the template engine takes
# a quarter of a second per node-heavy row loop (measured at 500 orgs); the same markup from one
# format string per row takes a few milliseconds. The table is re-rendered at every replan's hint.
ORG_ROW = (
    '<tr id="org-{id}"{oob} data-org="{slug}" data-held="{held}" data-clear="{clear}" data-queued="{queued}"'
    ' data-running="{running}"{held_class}>\n'
    "<td><b>{slug}</b> <small>{name}</small></td>\n"
    '<td><form class="lever" data-api="PATCH {org_url}"><input name="weight" data-type="number" value="{weight}"'
    ' aria-label="weight of {slug}" inputmode="numeric"><button type="submit">Set</button>'
    '<button type="button" class="ghost" data-preview="weight">?</button></form></td>\n'
    "<td>{hold}</td>\n"
    '<td><form class="lever" data-api="PATCH {org_url}"><input name="max_concurrency" data-type="number"'
    ' value="{cap}" placeholder="none" aria-label="cap of {slug}" inputmode="numeric">'
    '<button type="submit">Set</button></form></td>\n'
    '<td><form class="lever" data-api="PATCH {org_url}"><input name="queue_limit" data-type="number"'
    ' value="{queue_limit}" placeholder="none" aria-label="queue limit of {slug}" inputmode="numeric">'
    '<button type="submit">Set</button></form></td>\n'
    '<td><form class="lever costs" data-api="PUT {org_url}costs/{{workflow}}/" data-null-method="DELETE">'
    "<span>{costs}</span>\n"
    '<select name="workflow" aria-label="workflow">{workflow_options}</select>\n'
    '<input name="cost" data-type="number" placeholder="default" aria-label="cost for {slug}" inputmode="numeric">'
    '<button type="submit">Set</button><button type="button" class="ghost" data-preview="cost">?</button>'
    "</form></td>\n"
    '<td class="num">{queued}</td><td class="num">{paused}</td><td class="num">{running}</td>'
    '<td class="num">{cost_in_use}</td>\n'
    "<td>{clears}</td>\n"
    '<td class="err" data-err></td></tr>\n'
)
HOLD = (
    '<button type="button" data-hold data-api="POST {url}hold/"'
    ' title="weight → 0: nothing of this org dispatches">Hold</button>'
)
RELEASE = (
    '<button type="button" class="warn" data-hold data-api="POST {url}release/"'
    ' title="held; release restores weight {weight}">Release</button>'
)


@register.simple_tag
def org_rows(orgs: list[dict[str, Any]], workflows: list[dict[str, Any]], api: str, swap: bool = False) -> SafeString:
    """The rows of the org table (`scheduling.selectors.org_rows`), each with its levers' API calls;
    with `swap`, each row replaces the row of its id (an out-of-band swap)."""
    options = "".join(
        format_html('<option value="{}">{} ({})</option>', workflow["name"], workflow["name"], workflow["default_cost"])
        for workflow in workflows
    )
    rows = []
    for org in orgs:
        slug = escape(org["slug"])
        url = f"{escape(api)}orgs/{slug}/"
        held = org["held"]
        rows.append(
            ORG_ROW.format(
                id=int(org["id"]),
                oob=' hx-swap-oob="true"' if swap else "",
                slug=slug,
                name=escape(org["name"]),
                held="1" if held else "0",
                held_class=' class="is-held"' if held else "",
                clear=escape(org["clear_at"] or ""),
                queued=org["queued"],
                paused=org["paused"],
                running=org["running"],
                cost_in_use=org["cost_in_use"],
                org_url=url,
                weight=org["weight"],
                hold=RELEASE.format(url=url, weight=org["weight_before_hold"] or 1) if held else HOLD.format(url=url),
                cap="" if org["max_concurrency"] is None else org["max_concurrency"],
                queue_limit="" if org["queue_limit"] is None else org["queue_limit"],
                costs=" ".join(
                    format_html('<span class="tag">{}={}</span>', name, cost) for name, cost in org["costs"].items()
                ),
                workflow_options=options,
                clears='<span class="badge held">held</span>'
                if held
                else eta(org["clear_at"], org["clear_low"], org["clear_high"]),
            )
        )
    return mark_safe("".join(rows))  # noqa: S308 - every value above is escaped or a number
