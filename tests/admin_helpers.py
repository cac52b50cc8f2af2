"""Build the POST data an admin page would send back, from the forms of its GET response.

Tests then change the few values they care about, so each test names only what it edits.
"""

from __future__ import annotations

import json
from typing import Any

from django.forms import BaseForm, BaseFormSet
from django.http import HttpResponse


def form_data(form: BaseForm) -> dict[str, Any]:
    """The values an untouched form posts: its initial values; unchecked boxes and empty values are left out.

    A field that shows its initial value in a hidden input (the admin's change forms, to tell the
    user's edits from someone else's) posts that value too, as the page does.
    """
    data: dict[str, Any] = {}
    for name, field in form.fields.items():
        value = form[name].value()
        if value is None or value is False:
            continue
        if isinstance(value, dict | list):
            value = json.dumps(value)
        data[form.add_prefix(name)] = "on" if value is True else value
        if field.show_hidden_initial:
            data[form[name].html_initial_name] = data[form.add_prefix(name)]
    return data


def formset_data(formset: BaseFormSet[Any]) -> dict[str, Any]:
    data = form_data(formset.management_form)
    for form in formset.forms:
        data.update(form_data(form))
    return data


def change_form_data(response: HttpResponse) -> dict[str, Any]:
    """The admin change (or add) form with all its inline formsets, as the page would post it unchanged."""
    context: Any = response.context
    data = form_data(context["adminform"].form)
    for inline in context["inline_admin_formsets"]:
        data.update(formset_data(inline.formset))
    return data


def changelist_data(response: HttpResponse) -> dict[str, Any]:
    """The list-editable formset of an admin changelist, unchanged, with the save button pressed."""
    context: Any = response.context
    return {**formset_data(context["cl"].formset), "_save": "Save"}


def action_data(action: str, *pks: int) -> dict[str, Any]:
    return {"action": action, "_selected_action": [str(pk) for pk in pks], "index": "0", "select_across": "0"}


def messages_of(response: HttpResponse) -> list[str]:
    context: Any = response.context
    return [str(message) for message in context["messages"]]
