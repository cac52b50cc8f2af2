"""Glue between the admin and the services: service errors become admin messages, not 500s, and a
change form writes only what its user changed."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.core.exceptions import ValidationError
from django.db.models import Model
from django.forms import BaseInlineFormSet, ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.text import capfirst

from common.errors import InvalidInput, ServiceError
from common.strict import REASON_MAX_LENGTH, reason_problem

T = TypeVar("T")
M = TypeVar("M", bound=Model)


class EditedFieldsForm(ModelForm[Any]):
    """A change form that tells its user's edits from what others changed since the page was opened.

    Each field posts the value it was opened with (a hidden input), so `changed_data` lists only the
    fields the user edited, not those someone else moved meanwhile (an operator's hold would otherwise
    read as "weight 0 -> 1" and be undone). `clean` refuses an edited field whose stored value is no
    longer the one the user saw: both edits were meant, and the later one must not silently win.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.show_hidden_initial = True

    def opened(self, name: str) -> Any:
        """The value field `name` had when the page was opened (None if the page did not send it)."""
        bound, field = self[name], self.fields[name]
        raw = field.hidden_widget().value_from_datadict(self.data, self.files, bound.html_initial_name)
        try:
            return field.to_python(raw)
        except ValidationError:
            return None

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if self.instance._state.adding:  # a row being added: nobody else could have changed it
            return cleaned
        for name in self.changed_data:
            bound, field = self[name], self.fields[name]
            opened = field.hidden_widget().value_from_datadict(self.data, self.files, bound.html_initial_name)
            if field.has_changed(bound.initial, opened):
                current = getattr(self.instance, name)
                shown = "empty" if current is None else current
                self.add_error(
                    name,
                    f"{field.label or name} was changed by someone else since you opened this page: it is now "
                    f"{shown}. Nothing was saved; check the value and save again.",
                )
        return cleaned


def _reason_valid(value: str) -> None:
    problem = reason_problem(value)
    if problem is not None:
        raise ValidationError(problem)


def reason_field(help_text: str = "Why, in one line: kept in the history, for staff.") -> forms.CharField:
    """A change form's optional reason, checked as the API checks it; the services write it in the
    history of whatever the save changed."""
    return forms.CharField(
        required=False, max_length=REASON_MAX_LENGTH, strip=True, validators=[_reason_valid], help_text=help_text
    )


class ReasonActionForm(ActionForm):
    """The list's action bar with a reason for the action, passed to the service of each row, and for
    the list's edits (`list_edit_reason`): the bar is in the list's form, posted with its rows."""

    reason = forms.CharField(required=False, label="Reason (optional, for an action or the list's edits):")


def action_reason(model_admin: admin.ModelAdmin[Any], request: HttpRequest) -> str | None:
    """The reason typed in the action bar (`ReasonActionForm`), stripped; None, with the refusal shown,
    when it is not acceptable (the action then changes nothing)."""
    reason = request.POST.get("reason", "").strip()
    problem = reason_problem(reason)
    if problem is not None:
        model_admin.message_user(request, f"Nothing was changed: {problem}.", messages.ERROR)
        return None
    return reason


def list_edit_reason(request: HttpRequest) -> str:
    """The reason typed in the action bar for the list's edits, stripped; a reason that is not
    acceptable refuses the whole save (`ServiceModelAdmin` undoes it and says why)."""
    reason = request.POST.get("reason", "").strip()
    problem = reason_problem(reason)
    if problem is not None:
        raise InvalidInput(f"Nothing was changed: {problem}", field="reason")
    return reason


def row_labelled(form: forms.BaseForm) -> None:
    """Name each input of a list's or an inline's row for assistive technology, by its field and its
    row ("Weight of Acme", "Delete alice in Acme (member)"): such a row shows no label beside a cell."""
    instance = getattr(form, "instance", None)
    row = str(instance) if instance is not None and instance.pk is not None else "the new row"
    for name, field in form.fields.items():
        label = capfirst(str(field.label or name))
        field.widget.attrs["aria-label"] = f"Delete {row}" if name == "DELETE" else f"{label} of {row}"


class RowLabelledForm(ModelForm[Any]):
    """A list row's form, its inputs named by `row_labelled`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        row_labelled(self)


class RowLabelledInlineFormSet(BaseInlineFormSet[Any, Any, Any]):
    """A tabular inline's rows, their inputs (the delete box included) named by `row_labelled`."""

    def add_fields(self, form: forms.BaseForm, index: int | None) -> None:
        super().add_fields(form, index)
        row_labelled(form)


def edited_fields(form: type[ModelForm[Any]]) -> type[ModelForm[Any]]:
    """The admin's form class, as an `EditedFieldsForm`."""
    return type(form.__name__, (EditedFieldsForm, form), {})


class ServiceModelAdmin(admin.ModelAdmin[M]):
    """An admin whose saves call services: a refusal undoes the whole save and says why.

    `save_model` and `save_formset` let a `ServiceError` propagate. The admin runs a save in one
    transaction, so nothing of it is written; the user goes back to the page with the service's reason,
    never a "saved successfully" for a change that was refused.

    A change form and the list's editable rows are `EditedFieldsForm`s, so `save_model` writes
    `form.changed_data` only (what the user edited) and an edit of a field changed meanwhile is a form
    error. On a change form the row is locked before the form compares the stored values
    (`get_object`), so no write slips between the check and the services' writes. The list compares
    before Django opens the transaction of its saves, so a service it calls compares again under its
    lock with the value the list showed (`EditedFieldsForm.opened`: the orgs' weights,
    `org_weight_set(expected=...)`), and a write landing in between refuses the whole save.
    """

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        return form if obj is None else edited_fields(form)

    def get_changelist_form(self, request: HttpRequest, **kwargs: Any) -> Any:
        """The list's editable columns too: a row someone else changed since the list was shown is not
        written back when another row is saved; each row's inputs are named by their row."""
        form = edited_fields(super().get_changelist_form(request, **kwargs))
        return type(form.__name__, (RowLabelledForm, form), {})

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> M | None:
        if request.method == "POST" and from_field is None:
            # Inside the admin's transaction of the save: held until it commits. The lock is taken on
            # the bare table, as `get_queryset` may group (PostgreSQL refuses FOR UPDATE with GROUP BY).
            try:
                list(self.model._default_manager.select_for_update().filter(pk=object_id))
            except (ValueError, ValidationError):
                return None
        return super().get_object(request, object_id, from_field)

    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except ServiceError as error:
            self.message_user(request, error.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        try:
            return super().changelist_view(request, extra_context)
        except ServiceError as error:
            self.message_user(request, error.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


def apply_each(
    model_admin: admin.ModelAdmin[Any],
    request: HttpRequest,
    objects: Iterable[T],
    action: Callable[[T], object],
    verb: str,
) -> None:
    """Run a service on every selected object; report how many succeeded and each refusal by name."""
    done = 0
    for obj in objects:
        try:
            action(obj)
        except ServiceError as error:
            model_admin.message_user(request, f"{obj}: {error.message}", messages.ERROR)
        else:
            done += 1
    if done:
        model_admin.message_user(request, f"{verb} {done} item(s).", messages.SUCCESS)
