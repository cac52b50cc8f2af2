"""The portal's levers: who may pull them (members and admins act, viewers read, other orgs are 404),
CSRF, the API's write throttle, the event log's actor, and submissions one at a time or by file with
the API's validation, all or nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from charts.models import Chart, ChartEvent, ChartState
from orgs.access import CallerWriteThrottle
from orgs.models import Membership
from tests.conftest import Tenants
from tests.factories import ChartFactory, MembershipFactory, UserFactory

Browser = Callable[[Any], Client]


@pytest.fixture
def viewer(tenants: Tenants) -> Any:
    user = UserFactory(username="vera")
    MembershipFactory(user=user, org=tenants.org_a, role=Membership.Role.VIEWER)
    return user


@pytest.fixture
def admin(tenants: Tenants) -> Any:
    user = UserFactory(username="ada")
    MembershipFactory(user=user, org=tenants.org_a, role=Membership.Role.ADMIN)
    return user


@pytest.fixture
def chart(tenants: Tenants) -> Chart:
    return ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="acme-1")


def csv_file(text: str, name: str = "charts.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="text/csv")


@pytest.mark.parametrize("lever", ["pause", "cancel"])
def test_a_member_pulls_a_lever_and_the_history_names_them(
    tenants: Tenants, browser: Browser, chart: Chart, lever: str
) -> None:
    body = {"reason": "not today", **({"confirmed": "yes"} if lever == "cancel" else {})}
    response = browser(tenants.member_a).post(f"/portal/acme/charts/{chart.pk}/{lever}/", body)

    assert response.status_code == 302
    assert response["Location"] == f"/portal/acme/charts/{chart.pk}/"
    chart.refresh_from_db()
    assert chart.state == {"pause": ChartState.PAUSED, "cancel": ChartState.CANCELLED}[lever]
    event = ChartEvent.objects.filter(chart=chart).latest("id")
    assert (event.actor, event.reason) == ("user:alice", "not today")


def test_the_org_page_has_one_submit_form_of_each_kind(tenants: Tenants, browser: Browser) -> None:
    page = browser(tenants.member_a).get("/portal/acme/").content.decode()
    title = page.split("<title>", 1)[1].split("</title>", 1)[0]

    assert page.count('id="submit-external-id"') == 1
    assert page.count('id="submit-file"') == 1
    assert page.index('id="submit-file"') > page.index("<main")
    assert "<" not in title


def test_an_admin_resumes_a_paused_chart(tenants: Tenants, browser: Browser, admin: Any, chart: Chart) -> None:
    client = browser(admin)
    assert client.post(f"/portal/acme/charts/{chart.pk}/pause/").status_code == 302

    response = client.post(f"/portal/acme/charts/{chart.pk}/resume/", follow=True)

    chart.refresh_from_db()
    assert chart.state == ChartState.QUEUED
    assert b"Resumed acme-1." in response.content


@pytest.mark.parametrize("lever", ["pause", "resume", "cancel"])
def test_a_viewer_sees_no_buttons_and_is_refused(
    tenants: Tenants, browser: Browser, viewer: Any, chart: Chart, lever: str
) -> None:
    client = browser(viewer)
    page = client.get(f"/portal/acme/charts/{chart.pk}/").content.decode()
    org_page = client.get("/portal/acme/").content.decode()

    response = client.post(f"/portal/acme/charts/{chart.pk}/{lever}/")

    assert "<button" not in page.replace('<button type="submit">Log out</button>', "")
    assert "Submit charts" not in org_page
    assert response.status_code == 403
    assert b"read-only" in response.content
    chart.refresh_from_db()
    assert chart.state == ChartState.QUEUED


def test_a_viewer_cannot_submit(tenants: Tenants, browser: Browser, viewer: Any) -> None:
    client = browser(viewer)
    one = client.post("/portal/acme/submit/", {"workflow": "render", "external_id": "v-1"})
    many = client.post("/portal/acme/upload/", {"file": csv_file("workflow,external_id\nrender,v-2\n")})

    assert (one.status_code, many.status_code) == (403, 403)
    assert not Chart.objects.filter(org=tenants.org_a).exists()


@pytest.mark.parametrize("lever", ["pause", "resume", "cancel"])
def test_another_orgs_chart_is_404(tenants: Tenants, browser: Browser, lever: str) -> None:
    theirs = ChartFactory(org=tenants.org_b, workflow=tenants.workflow)
    client = browser(tenants.member_a)

    through_mine = client.post(f"/portal/acme/charts/{theirs.pk}/{lever}/")
    through_theirs = client.post(f"/portal/beta/charts/{theirs.pk}/{lever}/")
    submit_theirs = client.post("/portal/beta/submit/", {"workflow": "render", "external_id": "x"})

    assert (through_mine.status_code, through_theirs.status_code, submit_theirs.status_code) == (404, 404, 404)
    theirs.refresh_from_db()
    assert theirs.state == ChartState.QUEUED
    assert not Chart.objects.filter(org=tenants.org_b, external_id="x").exists()


def test_levers_are_post_only_and_need_a_login(tenants: Tenants, browser: Browser, chart: Chart) -> None:
    assert browser(tenants.member_a).get(f"/portal/acme/charts/{chart.pk}/pause/").status_code == 405
    anonymous = browser(None).post(f"/portal/acme/charts/{chart.pk}/pause/")
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith("/accounts/login/")


def test_csrf_is_checked(tenants: Tenants, chart: Chart) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(tenants.member_a)

    lever = client.post(f"/portal/acme/charts/{chart.pk}/cancel/")
    submit = client.post("/portal/acme/submit/", {"workflow": "render", "external_id": "csrf-1"})
    upload = client.post("/portal/acme/upload/", {"file": csv_file("workflow,external_id\nrender,csrf-2\n")})

    assert (lever.status_code, submit.status_code, upload.status_code) == (403, 403, 403)
    chart.refresh_from_db()
    assert chart.state == ChartState.QUEUED
    assert Chart.objects.filter(org=tenants.org_a).count() == 1

    page = client.get("/portal/acme/")
    token = page.cookies["csrftoken"].value
    allowed = client.post(
        "/portal/acme/submit/", {"workflow": "render", "external_id": "csrf-3", "csrfmiddlewaretoken": token}
    )
    assert allowed.status_code == 302


def test_an_illegal_transition_is_409_naming_the_state(tenants: Tenants, browser: Browser, chart: Chart) -> None:
    response = browser(tenants.member_a).post(f"/portal/acme/charts/{chart.pk}/resume/")

    assert response.status_code == 409
    assert b"Nothing was changed" in response.content


def test_submit_one(tenants: Tenants, browser: Browser) -> None:
    client = browser(tenants.member_a)
    body = {"workflow": "render", "external_id": "one-1", "priority": "5", "payload": '{"pages": 3}'}

    first = client.post("/portal/acme/submit/", body)
    again = client.post("/portal/acme/submit/", body, follow=True)

    chart = Chart.objects.get(org=tenants.org_a, external_id="one-1")
    assert first["Location"] == f"/portal/acme/charts/{chart.pk}/"
    assert (chart.priority, chart.payload) == (5, {"pages": 3})
    assert ChartEvent.objects.get(chart=chart).actor == "user:alice"
    assert b"one-1 was submitted before." in again.content


@pytest.mark.parametrize(
    ("body", "field", "status"),
    [
        ({"workflow": "nope", "external_id": "a"}, "workflow: unknown workflow", 400),
        ({"workflow": "render", "external_id": ""}, "external_id", 400),
        ({"workflow": "render", "external_id": "a", "priority": "ten"}, "priority: priority must be a whole", 400),
        ({"workflow": "render", "external_id": "a", "payload": "{bad"}, "payload: The payload must be valid JSON", 400),
        ({"workflow": "render", "external_id": "a", "payload": "[1]"}, "payload: payload must be a JSON object", 400),
        ({"workflow": "render", "external_id": "a", "priority": "50"}, "priority: tenants may set priority", 403),
    ],
)
def test_submit_one_refuses_bad_input_naming_the_field(
    tenants: Tenants, browser: Browser, body: dict[str, str], field: str, status: int
) -> None:
    response = browser(tenants.member_a).post("/portal/acme/submit/", body)

    assert response.status_code == status
    assert field in response.content.decode()
    assert not Chart.objects.exists()


def test_submit_a_csv_file(tenants: Tenants, browser: Browser) -> None:
    text = 'workflow,external_id,priority,payload\nrender,f-1,2,"{""a"": 1}"\nrender,f-2,,\n\nrender,f-3,-1,\n'

    response = browser(tenants.member_a).post("/portal/acme/upload/", {"file": csv_file(text)}, follow=True)

    charts = {c.external_id: c for c in Chart.objects.filter(org=tenants.org_a)}
    assert sorted(charts) == ["f-1", "f-2", "f-3"]
    assert (charts["f-1"].priority, charts["f-1"].payload, charts["f-3"].priority) == (2, {"a": 1}, -1)
    assert b"Submitted 3 charts; 0 submitted before." in response.content
    assert set(ChartEvent.objects.values_list("actor", flat=True)) == {"user:alice"}


@pytest.mark.parametrize("as_body", [False, True])
def test_submit_a_json_file(tenants: Tenants, browser: Browser, as_body: bool) -> None:
    items = [{"workflow": "render", "external_id": "j-1"}, {"workflow": "render", "external_id": "j-2", "priority": 1}]
    data = json.dumps({"org": "acme", "items": items} if as_body else items).encode()
    upload = SimpleUploadedFile("charts.json", data, content_type="application/json")

    response = browser(tenants.member_a).post("/portal/acme/upload/", {"file": upload})

    assert response.status_code == 302
    assert sorted(Chart.objects.values_list("external_id", flat=True)) == ["j-1", "j-2"]


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        (
            "workflow,external_id,priority\nrender,ok-1,0\nnope,ok-2,0\nrender,,1\n",
            ["row 2 (line 3): workflow: unknown workflow &#x27;nope&#x27;", "row 3 (line 4): external_id: "],
        ),
        (
            'workflow,external_id,priority,payload\nrender,ok-1,high,\nrender,ok-2,0,"{x"\n',
            ["row 1 (line 2): priority: priority must", "row 2 (line 3): payload: The payload must be valid JSON"],
        ),
        ("workflow,external_id\nrender,dup\nrender,dup\n", ["row 2 (line 3): external_id: repeats item 0"]),
        ("workflow,external_id\nrender,a,extra\n", ["row 1 (line 2): detail: has 3 values for 2 columns"]),
        ("workflow,name\nrender,a\n", ["file: the header row must name the columns"]),
        ("workflow,external_id\n", ["file: the file has a header but no charts"]),
        ("", ["file: the file is empty"]),
    ],
)
def test_a_bad_csv_file_is_400_naming_row_and_field_and_writes_nothing(
    tenants: Tenants, browser: Browser, text: str, problems: list[str]
) -> None:
    response = browser(tenants.member_a).post("/portal/acme/upload/", {"file": csv_file(text)})

    assert response.status_code == 400
    for problem in problems:
        assert problem in response.content.decode()
    assert not Chart.objects.exists()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b'[{"workflow": "render", "external_id": "a"}, {"workflow": "render"}]', "row 2: external_id: this field"),
        (b'[{"workflow": "render", "external_id": "a", "colour": "red"}]', "row 1: colour: unknown field"),
        (b'{"items": [], "x": 1}', "file: unknown key"),
        (b'{"org": "beta", "items": [{"workflow": "render", "external_id": "a"}]}', "org: the file names another org"),
        (b'[{"workflow": "render", "external_id": "a", "external_id": "b"}]', "file: the file is not valid JSON"),
        (b"\xff\xfe", "file: the file must be UTF-8"),
    ],
)
def test_a_bad_json_file_is_400_naming_row_and_field(
    tenants: Tenants, browser: Browser, data: bytes, problem: str
) -> None:
    upload = SimpleUploadedFile("charts.json", data, content_type="application/json")

    response = browser(tenants.member_a).post("/portal/acme/upload/", {"file": upload})

    assert response.status_code == 400
    assert problem in response.content.decode()
    assert not Chart.objects.exists()


def test_a_csv_file_reports_every_error_of_every_row_in_one_400(tenants: Tenants, browser: Browser) -> None:
    text = (
        "workflow,external_id,priority,high_priority\n"
        "no-such-workflow,c-1,,\n"
        "render,,99,\n"
        "render,c-3,abc,maybe\n"
        "render,c-1,,true\n"
    )

    response = browser(tenants.member_a).post("/portal/acme/upload/", {"file": csv_file(text)})

    assert response.status_code == 400
    page = response.content.decode()
    for problem in [
        "row 1 (line 2): workflow: unknown workflow",
        "row 2 (line 3): external_id:",
        "row 2 (line 3): priority: tenants may set priority from -10 to 10",
        "row 3 (line 4): priority: priority must be a whole number",
        "row 3 (line 4): high_priority: high_priority must be true or false",
        "row 4 (line 5): external_id: repeats item 0",
        "row 4 (line 5): high_priority: only operators",
    ]:
        assert problem in page
    assert not Chart.objects.exists()


def test_a_json_file_reports_every_error_of_every_item_in_one_400(tenants: Tenants, browser: Browser) -> None:
    data = json.dumps(
        [
            {"workflow": "no-such-workflow", "external_id": "j-1"},
            {"workflow": "render", "external_id": "j-2", "priority": "abc", "high_priority": True},
            {"workflow": "render", "colour": "red"},
        ]
    ).encode()
    upload = SimpleUploadedFile("charts.json", data, content_type="application/json")

    response = browser(tenants.member_a).post("/portal/acme/upload/", {"file": upload})

    assert response.status_code == 400
    page = response.content.decode()
    for problem in [
        "row 1: workflow: unknown workflow",
        "row 2: priority:",
        "row 2: high_priority: only operators",
        "row 3: external_id:",
        "row 3: colour: unknown field",
    ]:
        assert problem in page
    assert not Chart.objects.exists()


def test_a_file_is_all_or_nothing_past_the_queue_limit(tenants: Tenants, browser: Browser) -> None:
    tenants.org_a.queue_limit = 2
    tenants.org_a.save()
    text = "workflow,external_id\nrender,q-1\nrender,q-2\nrender,q-3\n"

    response = browser(tenants.member_a).post("/portal/acme/upload/", {"file": csv_file(text)})

    assert response.status_code == 429
    assert "Retry-After" in response
    assert not Chart.objects.exists()


def test_a_tenant_cannot_ask_for_the_high_tier_by_file(tenants: Tenants, browser: Browser) -> None:
    text = "workflow,external_id,high_priority\nrender,h-1,false\nrender,h-2,true\n"

    response = browser(tenants.member_a).post("/portal/acme/upload/", {"file": csv_file(text)})

    assert response.status_code == 403
    assert "row 2 (line 3): high_priority" in response.content.decode()
    assert not Chart.objects.exists()


def test_a_file_over_the_body_limit_is_413(tenants: Tenants, browser: Browser, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    text = "workflow,external_id\n" + "".join(f"render,big-{i}\n" for i in range(20))

    response = browser(tenants.member_a).post("/portal/acme/upload/", {"file": csv_file(text)})

    assert response.status_code == 413
    assert not Chart.objects.exists()


def test_the_portal_counts_against_the_users_write_rate(
    tenants: Tenants, browser: Browser, chart: Chart, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    default = settings.CACHES["default"]
    settings.CACHES = {**settings.CACHES, "default": {**default, "KEY_PREFIX": f"portal-rate-{uuid.uuid4().hex}"}}
    monkeypatch.setattr(CallerWriteThrottle, "THROTTLE_RATES", {"read": "100/min", "write": "2/min"})
    client = browser(tenants.member_a)

    codes = [client.post("/portal/acme/submit/", {"workflow": "render", "external_id": f"r-{i}"}) for i in range(3)]
    other = browser(tenants.member_b).post("/portal/beta/submit/", {"workflow": "render", "external_id": "b-1"})

    assert [c.status_code for c in codes] == [302, 302, 429]
    assert int(codes[2]["Retry-After"]) >= 1
    assert other.status_code == 302
    assert not Chart.objects.filter(external_id="r-2").exists()


def test_a_lever_reason_is_read_as_the_api_reads_it(tenants: Tenants, browser: Browser, chart: Chart) -> None:
    response = browser(tenants.member_a).post(f"/portal/acme/charts/{chart.pk}/pause/", {"reason": "x" * 501})

    assert response.status_code == 400
    assert "reason: " in response.content.decode()
    chart.refresh_from_db()
    assert chart.state == ChartState.QUEUED


@pytest.mark.parametrize("field", ["workflow", "external_id", "priority", "payload"])
def test_a_nul_in_any_field_is_400_naming_it(tenants: Tenants, browser: Browser, field: str) -> None:
    body = {"workflow": "render", "external_id": "nul-1", "priority": "1", "payload": "{}"}
    body[field] = body[field][:1] + "\x00" + body[field][1:]
    client = browser(tenants.member_a)

    one = client.post("/portal/acme/submit/", body)
    header = ",".join(body)
    row = ",".join(f'"{value}"' for value in body.values()).replace('"{}"', '"{}"')
    many = client.post("/portal/acme/upload/", {"file": csv_file(f"{header}\n{row}\n")})

    assert one.status_code == 400
    assert f"{field}: " in one.content.decode()
    assert many.status_code == 400
    assert f"row 1 (line 2): {field}: " in many.content.decode()
    assert not Chart.objects.exists()


def test_submit_one_reports_every_field_at_once(tenants: Tenants, browser: Browser) -> None:
    body = {"workflow": "nope", "external_id": "", "priority": "50", "payload": "[1]"}

    response = browser(tenants.member_a).post("/portal/acme/submit/", body)

    text = response.content.decode()
    assert response.status_code == 400
    assert "workflow: unknown workflow" in text
    assert "external_id: " in text
    assert "priority: tenants may set priority" in text
    assert "payload: payload must be a JSON object" in text
    assert not Chart.objects.exists()


def test_submit_one_refused_for_a_staff_lever_alone_is_403_with_the_api_rule(
    tenants: Tenants, browser: Browser
) -> None:
    body = {"workflow": "render", "external_id": "a", "priority": "50"}

    response = browser(tenants.member_a).post("/portal/acme/submit/", body)

    assert response.status_code == 403
    assert "priority: tenants may set priority" in response.content.decode()


def test_a_refused_submit_keeps_what_was_typed(tenants: Tenants, browser: Browser) -> None:
    body = {"workflow": "render", "external_id": "kept-<1>", "priority": "ten", "payload": '{"pages": 3'}

    response = browser(tenants.member_a).post("/portal/acme/submit/", body)

    text = response.content.decode()
    assert response.status_code == 400
    assert 'value="kept-&lt;1&gt;"' in text
    assert 'value="ten"' in text
    assert "{&quot;pages&quot;: 3</textarea>" in text
    assert '<option value="render" selected>' in text


def test_a_bad_payload_is_said_in_plain_words(tenants: Tenants, browser: Browser) -> None:
    body = {"workflow": "render", "external_id": "a", "payload": "{bad"}

    response = browser(tenants.member_a).post("/portal/acme/submit/", body)

    text = response.content.decode()
    assert "The payload must be valid JSON: a property name in double quotes is missing at line 1, column 2" in text
    assert "Expecting" not in text


def test_cancel_asks_first_naming_the_chart_and_the_org(tenants: Tenants, browser: Browser, chart: Chart) -> None:
    client = browser(tenants.member_a)

    asked = client.post(f"/portal/acme/charts/{chart.pk}/cancel/", {"reason": "client <withdrew>"})

    text = asked.content.decode()
    assert asked.status_code == 200
    assert f"Cancel chart {chart.external_id} of {tenants.org_a.name}?" in text
    assert 'name="confirmed" value="yes"' in text
    assert 'value="client &lt;withdrew&gt;"' in text  # the reason typed, kept for the second step
    assert f'href="/portal/acme/charts/{chart.pk}/"' in text  # keep it: back to the chart
    chart.refresh_from_db()
    assert chart.state == ChartState.QUEUED
    assert not ChartEvent.objects.filter(chart=chart, to_state=ChartState.CANCELLED).exists()

    done = client.post(f"/portal/acme/charts/{chart.pk}/cancel/", {"reason": "client withdrew", "confirmed": "yes"})

    assert done.status_code == 302
    chart.refresh_from_db()
    assert chart.state == ChartState.CANCELLED


def test_the_queue_limit_refusal_says_how_many_fit_and_when_to_retry(tenants: Tenants, browser: Browser) -> None:
    tenants.org_a.queue_limit = 3
    tenants.org_a.save()
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    text = "workflow,external_id\nrender,q-1\nrender,q-2\nrender,q-3\n"

    response = browser(tenants.member_a).post("/portal/acme/upload/", {"file": csv_file(text)})

    page = response.content.decode()
    assert response.status_code == 429
    assert "Your queue is full: 1 chart is waiting and the limit is 3; 2 more fit now." in page
    assert f"Try again in about 1 min ({response['Retry-After']} s), when your next chart starts." in page
    assert Chart.objects.filter(org=tenants.org_a).count() == 1


def test_a_held_org_s_queue_limit_refusal_says_it_waits_for_the_release(tenants: Tenants, browser: Browser) -> None:
    tenants.org_a.queue_limit = 1
    tenants.org_a.weight = 0
    tenants.org_a.save()
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow)

    response = browser(tenants.member_a).post("/portal/acme/submit/", {"workflow": "render", "external_id": "h"})

    page = response.content.decode()
    assert response.status_code == 429
    assert "Your queue is full: 1 chart is waiting and the limit is 1; none more fit now." in page
    assert "Your organisation is on hold: the queue moves only once it is released." in page


def test_the_submit_form_is_linked_from_above_the_list(tenants: Tenants, browser: Browser) -> None:
    ChartFactory.create_batch(3, org=tenants.org_a, workflow=tenants.workflow)

    page = browser(tenants.member_a).get("/portal/acme/").content.decode()

    assert page.index('href="#submit-heading"') < page.index('id="live"') < page.index('id="submit-heading"')
