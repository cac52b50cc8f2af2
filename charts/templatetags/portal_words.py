"""A chart's state, tries and place in line as the portal says them (`charts.words`)."""

from __future__ import annotations

from django import template

from charts import words
from charts.models import Chart

register = template.Library()


@register.filter
def state_words(state: str) -> str:
    return words.state_words(state)


@register.filter
def place_words(position: int | None) -> str:
    return words.place_words(position)


@register.simple_tag
def tries(chart: Chart, max_attempts: int) -> str:
    return words.tries_words(chart, max_attempts=max_attempts)
