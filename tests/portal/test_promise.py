"""The portal tells each chart with a due time whether it keeps it: on track, at risk or late, with
its due time in words and as a `<time datetime>` the viewer's zone rewrites; nothing of other orgs."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from charts.models import Chart, ChartState
from tests.conftest import Tenants
from tests.factories import ChartFactory

Browser = Callable[[Any], Client]
HOUR = timedelta(hours=1)


@pytest.fixture
def promised(tenants: Tenants) -> dict[str, Chart]:
    now = timezone.now().replace(microsecond=0)

    def chart(org: Any, name: str, **fields: Any) -> Chart:
        return ChartFactory(org=org, workflow=tenants.workflow, external_id=name, **fields)

    return {
        "fine": chart(tenants.org_a, "fine", due_at=now + 3 * HOUR, late_chance=0.1, position=0),
        "risky": chart(tenants.org_a, "risky", due_at=now + HOUR, late_chance=0.8, position=1),
        "late": chart(tenants.org_a, "late", state=ChartState.RUNNING, due_at=now - 2 * HOUR, position=2),
        "done-late": chart(
            tenants.org_a, "done-late", state=ChartState.SUCCEEDED, due_at=now - 2 * HOUR, finished_at=now - HOUR
        ),
        "open": chart(tenants.org_a, "open", position=3),
        "beta": chart(tenants.org_b, "beta-risky", due_at=now + HOUR, late_chance=0.9, position=4),
    }


def _words(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def test_the_chart_list_says_whether_each_chart_keeps_its_promise(
    tenants: Tenants, browser: Browser, promised: dict[str, Chart]
) -> None:
    html = browser(tenants.member_a).get("/portal/acme/").content.decode()
    text = _words(html)

    assert "On track: due" in text
    assert "(in 3 h)" in text
    assert "At risk: due" in text
    assert "(in 60 min), likely to finish after it" in text
    assert "Late: was due" in text
    assert "(2 h ago)" in text
    assert "finished 60 min after it" in text
    assert text.count("Late: was due") == 2
    due = promised["risky"].due_at.astimezone(UTC)  # type: ignore[union-attr]
    assert f'<time datetime="{due.isoformat()}">{due:%Y-%m-%d %H:%M:%S} UTC</time>' in html
    assert "beta" not in html.lower()


def test_the_chart_page_says_it_and_a_chart_without_a_due_time_says_nothing(
    tenants: Tenants, browser: Browser, promised: dict[str, Chart]
) -> None:
    client = browser(tenants.member_a)
    risky = _words(client.get(f"/portal/acme/charts/{promised['risky'].pk}/").content.decode())
    fine = _words(client.get(f"/portal/acme/charts/{promised['fine'].pk}/part/").content.decode())
    plain = _words(client.get(f"/portal/acme/charts/{promised['open'].pk}/").content.decode())

    assert "TurnaroundAt risk: due" in risky
    assert "TurnaroundOn track: due" in fine
    assert "Turnaround" not in plain


def test_another_orgs_chart_at_risk_is_not_shown(
    tenants: Tenants, browser: Browser, promised: dict[str, Chart]
) -> None:
    client = browser(tenants.member_b)
    html = client.get("/portal/beta/").content.decode()

    assert "At risk" in _words(html)
    assert "risky" in html
    assert "fine" not in html
    assert "done-late" not in html
    assert client.get(f"/portal/beta/charts/{promised['risky'].pk}/").status_code == 404
