"""Webhooks on the real stack: a receiver on 127.0.0.1 (failing first, redirecting, answering too much),
signatures checked by the example receiver's own code, order and retries per endpoint, the idempotency
key of a send again, disabling after a day of failures, destination checks, and the staff API."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any

import pytest
from rest_framework.test import APIClient

from charts import services as chart_services
from charts.models import Chart
from common.actors import Actor
from fairsched.devservices import REPO_ROOT
from feed import delivery as webhook_delivery
from feed import services
from feed.models import WebhookDelivery, WebhookEndpoint
from feed.selectors import feed_horizon
from orgs import services as org_services
from orgs.access import api_token_issue
from scheduling import metrics
from tests import processes
from tests.conftest import Tenants

RECEIVER_PATH = REPO_ROOT / "examples" / "webhook_receiver.py"
SETTLE_SECONDS = 60.0
HANG_SECONDS = 5.0


def example_receiver() -> ModuleType:
    spec = importlib.util.spec_from_file_location("webhook_receiver", RECEIVER_PATH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


receiver_code = example_receiver()


@dataclass
class Received:
    """What the test receiver heard: each request's headers and body, in arrival order."""

    requests: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    answers: list[tuple[int, bytes, dict[str, str]]] = field(default_factory=list)  # played first, then 200
    # The request of this number (1-based) sets the event, then waits HANG_SECONDS before it answers.
    hang: tuple[int, threading.Event] | None = None

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body in self.requests]


@contextmanager
def receiver() -> Iterator[tuple[str, Received]]:
    """An HTTP server on 127.0.0.1 that records every POST and answers from `answers`, then 200."""
    received = Received()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                received.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                number = len(received.requests)
                status, content, headers = received.answers.pop(0) if received.answers else (200, b"ok", {})
            if received.hang is not None and received.hang[0] == number:
                received.hang[1].set()
                time.sleep(HANG_SECONDS)
            try:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)
            except OSError:  # the sender went away (killed) while this one hung
                pass

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks?from=fairsched", received
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def local_hooks(settings: Any) -> None:
    """Deliveries to the test receiver: plain http, to loopback, retried at once."""
    settings.FAIRSCHED_WEBHOOK_ALLOW_HTTP = True
    settings.FAIRSCHED_WEBHOOK_ALLOW_PRIVATE = True
    settings.FAIRSCHED_WEBHOOK_FIRST_RETRY = 0.01


def settle() -> None:
    """Wait until the feed's horizon passes every transaction begun so far (it is cluster-wide)."""
    with __import__("django.db").db.connection.cursor() as cursor:
        cursor.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
        (xmax,) = cursor.fetchone()
    deadline = time.monotonic() + SETTLE_SECONDS
    while feed_horizon() < xmax:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def pump(endpoint: WebhookEndpoint, until: Callable[[], bool], *, seconds: float = 30.0) -> None:
    """What beat's tick does, over and over: collect the feed's events, send what is due."""
    deadline = time.monotonic() + seconds
    while not until():
        assert time.monotonic() < deadline, "the deliveries did not arrive"
        services.webhook_deliveries_collect(endpoint_id=endpoint.pk)
        services.webhook_endpoint_send(endpoint_id=endpoint.pk)
        time.sleep(0.02)


def webhook_counts() -> dict[str, int]:
    """The webhook counters `/metrics` exports (`fairsched_webhook_*_total`), by their Redis keys."""
    client = metrics._redis()
    counts = {f"attempts:{k.decode()}": int(v) for k, v in client.hgetall(f"{metrics.PREFIX}webhook_attempts").items()}
    counts |= {f"disabled:{k.decode()}": int(v) for k, v in client.hgetall(f"{metrics.PREFIX}webhook_disabled").items()}
    return counts


def counted_since(before: dict[str, int]) -> dict[str, int]:
    after = webhook_counts()
    return {key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key, 0)}


def submitted(tenants: Tenants, external_id: str, org: Any = None) -> Chart:
    chart, _ = chart_services.chart_submit(
        org=org or tenants.org_a, workflow="render", external_id=external_id, actor=Actor("user:alice", staff=True)
    )
    return chart


@pytest.mark.django_db(transaction=True)
def test_deliveries_are_retried_in_order_signed_and_keyed(tenants: Tenants, local_hooks: None) -> None:
    """The receiver fails the first two tries: the first event is tried three times (one key), and the
    later events wait behind it and follow in the feed's order; another org's events never come."""
    counts = webhook_counts()
    with receiver() as (url, received):
        received.answers = [(500, b"down for maintenance", {}), (503, b"still down", {})]
        endpoint, secret = services.webhook_endpoint_create(
            org=tenants.org_a,
            url=url,
            event_types=["chart.cancelled", "org.held"],
            actor=Actor("user:stella", staff=True),
        )
        charts = [submitted(tenants, f"a-{n}") for n in range(3)]
        other = submitted(tenants, "b-1", org=tenants.org_b)
        for chart in charts:
            chart_services.chart_cancel(chart=chart, actor=Actor("user:alice", staff=True))
        chart_services.chart_cancel(chart=other, actor=Actor("user:bob", staff=True))
        org_services.org_hold(org=tenants.org_a, actor=Actor("user:stella", staff=True), reason="unpaid")
        settle()
        pump(endpoint, lambda: len(received.requests) >= 6)

        bodies = received.bodies()
        keys = [headers["idempotency-key"] for headers, _ in received.requests]
        assert [b["type"] for b in bodies] == ["chart.cancelled"] * 5 + ["org.held"]
        assert [b["data"]["chart"] for b in bodies[2:5]] == [c.pk for c in charts]
        assert keys[0] == keys[1] == keys[2]
        assert len(set(keys[2:])) == 4
        assert bodies[5]["data"]["reason"] == ""  # the portal's words: no account manager's note
        for headers, body in received.requests:
            receiver_code.verify(secret=secret, header=headers["fairsched-signature"], body=body)
            assert headers["content-type"] == "application/json"
            assert headers["fairsched-event-type"] == json.loads(body)["type"]
        first = WebhookDelivery.objects.filter(endpoint=endpoint).order_by("id").first()
        assert first is not None
        attempts = list(first.attempts.values_list("status", "response_excerpt"))
        assert attempts == [(500, "down for maintenance"), (503, "still down"), (200, "ok")]
        assert all(a.latency_ms is not None for a in first.attempts.all())
        endpoint.refresh_from_db()
        assert endpoint.failing_since is None
        assert endpoint.active
    assert counted_since(counts) == {"attempts:acme|failed": 2, "attempts:acme|ok": 4}


@pytest.mark.django_db(transaction=True)
def test_a_send_again_carries_the_same_key_and_the_example_recognises_it(tenants: Tenants, local_hooks: None) -> None:
    with receiver() as (url, received):
        endpoint, secret = services.webhook_endpoint_create(
            org=tenants.org_a, url=url, event_types=["chart.cancelled"], actor=Actor("user:stella", staff=True)
        )
        chart_services.chart_cancel(chart=submitted(tenants, "a-1"), actor=Actor("user:alice", staff=True))
        settle()
        pump(endpoint, lambda: len(received.requests) == 1)
        sent = WebhookDelivery.objects.get(endpoint=endpoint)
        again = services.webhook_delivery_send_again(
            endpoint=endpoint, delivery_id=sent.pk, actor=Actor("user:stella", staff=True)
        )
        pump(endpoint, lambda: len(received.requests) == 2)
    assert again.idempotency_key == sent.idempotency_key
    (h1, b1), (h2, b2) = received.requests
    assert h1["idempotency-key"] == h2["idempotency-key"]
    assert b1 == b2
    example = receiver_code.Receiver(secret)
    assert example.first_time(h1["idempotency-key"]) is True
    assert example.first_time(h2["idempotency-key"]) is False


@pytest.mark.django_db(transaction=True)
def test_a_redirect_is_not_followed_and_a_long_answer_is_cut(
    tenants: Tenants, local_hooks: None, settings: Any
) -> None:
    settings.FAIRSCHED_WEBHOOK_RESPONSE_CAP = 1000
    with receiver() as (url, received):
        received.answers = [
            (302, b"", {"Location": "http://169.254.169.254/latest/meta-data/"}),
            (200, b"x" * 500_000, {}),
        ]
        endpoint, _ = services.webhook_endpoint_create(
            org=tenants.org_a, url=url, event_types=["chart.cancelled"], actor=Actor("user:stella", staff=True)
        )
        chart_services.chart_cancel(chart=submitted(tenants, "a-1"), actor=Actor("user:alice", staff=True))
        settle()
        pump(endpoint, lambda: WebhookDelivery.objects.filter(state="delivered").exists())
    assert len(received.requests) == 2  # the redirect's target was never asked
    delivery = WebhookDelivery.objects.get(endpoint=endpoint)
    redirected, answered = delivery.attempts.order_by("number")
    assert redirected.status == 302
    assert "not followed" in redirected.error
    assert answered.status == 200
    assert len(answered.response_excerpt) <= 500


@pytest.mark.django_db(transaction=True)
def test_an_endpoint_failing_for_a_day_is_disabled_and_resumes_when_enabled(
    tenants: Tenants, local_hooks: None, settings: Any
) -> None:
    settings.FAIRSCHED_WEBHOOK_GIVE_UP = 0.0  # "a day" is now: the first failure disables it
    counts = webhook_counts()
    with receiver() as (url, received):
        received.answers = [(500, b"no", {})]
        endpoint, _ = services.webhook_endpoint_create(
            org=tenants.org_a, url=url, event_types=["chart.cancelled"], actor=Actor("user:stella", staff=True)
        )
        chart_services.chart_cancel(chart=submitted(tenants, "a-1"), actor=Actor("user:alice", staff=True))
        settle()
        pump(endpoint, lambda: len(received.requests) == 1)
        endpoint.refresh_from_db()
        assert not endpoint.active
        assert endpoint.disabled_at is not None
        assert "failing since" in endpoint.disabled_reason
        chart_services.chart_cancel(chart=submitted(tenants, "a-2"), actor=Actor("user:alice", staff=True))
        settle()
        assert services.webhook_deliveries_collect(endpoint_id=endpoint.pk) == 0
        assert services.webhook_endpoint_send(endpoint_id=endpoint.pk) == 0

        services.webhook_endpoint_update(endpoint=endpoint, active=True, actor=Actor("user:stella", staff=True))
        pump(endpoint, lambda: WebhookDelivery.objects.filter(state="delivered").count() == 2)
    assert [b["data"]["external_id"] for b in received.bodies()] == ["a-1", "a-1", "a-2"]
    assert counted_since(counts) == {"attempts:acme|failed": 1, "attempts:acme|ok": 2, "disabled:acme": 1}


@pytest.mark.parametrize(
    ("url", "allow_http", "allow_private", "refused"),
    [
        ("http://93.184.216.34/hook", False, False, "must start with https://"),
        ("ftp://93.184.216.34/hook", True, False, "must start with"),
        ("https://127.0.0.1/hook", False, False, "non-public address (127.0.0.1)"),
        ("https://localhost/hook", False, False, "non-public address"),
        ("https://10.1.2.3/hook", False, False, "non-public"),
        ("https://192.168.0.9/hook", False, False, "non-public"),
        ("https://169.254.169.254/latest/meta-data/", False, False, "non-public"),
        ("https://[::1]/hook", False, False, "non-public"),
        ("https://[::ffff:127.0.0.1]/hook", False, False, "non-public"),
        ("https://[fe80::1]/hook", False, False, "non-public"),
        ("https://0.0.0.0/hook", False, False, "non-public"),
        ("https://user:pw@93.184.216.34/hook", False, False, "no user or password"),
        ("https://93.184.216.34:99999/hook", False, False, "port"),
        ("https://no-such-host.invalid/hook", False, False, "does not resolve"),
        ("https:///hook", False, False, "must name a host"),
        ("https://93.184.216.34/hook", False, False, None),
        ("http://127.0.0.1:8080/hook", True, True, None),
    ],
)
def test_destinations_are_checked(
    settings: Any, url: str, allow_http: bool, allow_private: bool, refused: str | None
) -> None:
    settings.FAIRSCHED_WEBHOOK_ALLOW_HTTP = allow_http
    settings.FAIRSCHED_WEBHOOK_ALLOW_PRIVATE = allow_private
    if refused is None:
        assert webhook_delivery.destination(url).address
    else:
        with pytest.raises(webhook_delivery.Refused, match=re.escape(refused)):
            webhook_delivery.destination(url)


def test_a_send_to_a_refused_destination_records_why_and_connects_nowhere(settings: Any) -> None:
    settings.FAIRSCHED_WEBHOOK_ALLOW_PRIVATE = False
    outcome = webhook_delivery.post(
        url="https://127.0.0.1/x", body=b"{}", secret="s", idempotency_key="k", event_type="chart.failed"
    )
    assert not outcome.ok
    assert outcome.status is None
    assert outcome.error.startswith("refused:")


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body() -> None:
    header = webhook_delivery.signature(secret="whsec_test", timestamp=1700000000, body=b'{"a":1}')
    assert header == (
        "t=1700000000,v1=" + __import__("hmac").new(b"whsec_test", b'1700000000.{"a":1}', "sha256").hexdigest()
    )
    receiver_code.verify(secret="whsec_test", header=header, body=b'{"a":1}', now=1700000100)
    with pytest.raises(receiver_code.BadSignature, match="replay window"):
        receiver_code.verify(secret="whsec_test", header=header, body=b'{"a":1}', now=1700000000 + 301)
    with pytest.raises(receiver_code.BadSignature, match="does not match"):
        receiver_code.verify(secret="whsec_test", header=header, body=b'{"a":2}', now=1700000000)


@pytest.fixture
def example_process() -> Iterator[str]:
    """The example receiver as its own process, on a free port of 127.0.0.1."""
    process = processes.start(
        [sys.executable, str(RECEIVER_PATH), "--port", "0"],
        env={"FAIRSCHED_WEBHOOK_SECRET": "whsec_example", "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, line
        yield f"http://127.0.0.1:{match.group(1)}/"
    finally:
        processes.end(process)


def test_the_example_refuses_forged_and_stale_signatures_and_answers_duplicates(example_process: str) -> None:
    body = json.dumps({"id": "e1", "type": "chart.succeeded", "data": {"chart": 1}}).encode()

    def send(header: str, key: str = "k1") -> tuple[int, str]:
        request = urllib.request.Request(  # noqa: S310 (the test's own http URL)
            example_process,
            data=body,
            method="POST",
            headers={"Fairsched-Signature": header, "Idempotency-Key": key, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 (the test's own http)
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode()

    now = int(time.time())
    good = webhook_delivery.signature(secret="whsec_example", timestamp=now, body=body)
    forged = webhook_delivery.signature(secret="whsec_guessed", timestamp=now, body=body)
    stale = webhook_delivery.signature(secret="whsec_example", timestamp=now - 3600, body=body)
    assert send(forged) == (400, "the signature does not match")
    assert send(stale) == (400, "the signature's timestamp is outside the replay window")
    assert send("v1=abc") == (400, "no timestamp in the signature header")
    assert send(good) == (200, "ok")
    assert send(good) == (200, "duplicate")
    assert send(good, key="k2") == (200, "ok")


# The staff API ------------------------------------------------------------------------------------


@pytest.fixture
def staff_api(tenants: Tenants) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_issue(user=tenants.staff, staff=True)}")  # type: ignore[arg-type]
    return client


@pytest.mark.django_db(transaction=True)
def test_staff_register_an_endpoint_and_see_its_secret_once(
    tenants: Tenants, staff_api: APIClient, local_hooks: None
) -> None:
    with receiver() as (url, received):
        created = staff_api.post(
            "/api/v1/webhooks/", {"org": "acme", "url": url, "event_types": ["chart.cancelled"]}, format="json"
        )
        assert created.status_code == 201, created.content
        body = created.json()
        assert body["secret"].startswith("whsec_")
        assert body["org"] == "acme"
        listed = staff_api.get("/api/v1/webhooks/").json()["results"]
        assert [e["id"] for e in listed] == [body["id"]]
        assert "secret" not in listed[0]
        assert "secret" not in staff_api.get(f"/api/v1/webhooks/{body['id']}/").json()

        chart_services.chart_cancel(chart=submitted(tenants, "a-1"), actor=Actor("user:alice", staff=True))
        settle()
        endpoint = WebhookEndpoint.objects.get(pk=body["id"])
        pump(endpoint, lambda: len(received.requests) == 1)
        log = staff_api.get(f"/api/v1/webhooks/{endpoint.pk}/deliveries/").json()["results"]
        assert [(d["event_type"], d["state"], d["attempts"][0]["status"]) for d in log] == [
            ("chart.cancelled", "delivered", 200)
        ]
        again = staff_api.post(f"/api/v1/webhooks/{endpoint.pk}/deliveries/{log[0]['id']}/send-again/")
        assert again.status_code == 201
        assert again.json()["idempotency_key"] == log[0]["idempotency_key"]
        paused = staff_api.patch(f"/api/v1/webhooks/{endpoint.pk}/", {"active": False}, format="json")
        assert paused.json()["active"] is False
        assert paused.json()["disabled_reason"] == "disabled by user:stella"
        assert staff_api.delete(f"/api/v1/webhooks/{endpoint.pk}/").status_code == 204


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "https://127.0.0.1/x", "event_types": ["chart.failed"]}, "url"),
        ({"url": "http://93.184.216.34/x", "event_types": ["chart.failed"]}, "url"),
        ({"url": "https://93.184.216.34/x", "event_types": ["chart.at_risk"]}, "event_types"),
        ({"url": "https://93.184.216.34/x", "event_types": []}, "event_types"),
        ({"url": "https://93.184.216.34/x"}, "event_types"),
        ({"url": "https://93.184.216.34/x", "event_types": ["chart.failed"], "secret": "mine"}, "secret"),
    ],
)
def test_bad_registrations_are_refused_by_field(staff_api: APIClient, body: dict[str, Any], field: str) -> None:
    answer = staff_api.post("/api/v1/webhooks/", body, format="json")
    assert answer.status_code == 400, answer.content
    assert field in answer.json()
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.django_db
def test_webhooks_are_staff_only_in_the_api(tenants: Tenants) -> None:
    endpoint = WebhookEndpoint.objects.create(org=tenants.org_a, url="https://93.184.216.34/x", secret="s", cursor="")
    tenant = APIClient()
    tenant.credentials(HTTP_AUTHORIZATION=f"Token {api_token_issue(user=tenants.member_a, org=tenants.org_a)}")  # type: ignore[arg-type]
    assert tenant.get("/api/v1/webhooks/").status_code == 403
    assert tenant.get(f"/api/v1/webhooks/{endpoint.pk}/").status_code == 403
    assert tenant.post("/api/v1/webhooks/", {}, format="json").status_code == 403


@pytest.mark.django_db
def test_another_endpoints_delivery_is_not_found(tenants: Tenants, staff_api: APIClient) -> None:
    one = WebhookEndpoint.objects.create(org=tenants.org_a, url="https://93.184.216.34/x", secret="s", cursor="")
    two = WebhookEndpoint.objects.create(org=tenants.org_b, url="https://93.184.216.34/y", secret="s", cursor="")
    delivery = WebhookDelivery.objects.create(
        endpoint=two, event_id="e", event_type="org.held", body="{}", idempotency_key="k"
    )
    answer = staff_api.post(f"/api/v1/webhooks/{one.pk}/deliveries/{delivery.pk}/send-again/")
    assert answer.status_code == 404
    assert staff_api.get("/api/v1/webhooks/999999/").status_code == 404


def test_an_answer_dripping_slowly_is_cut_at_the_deadline(settings: Any) -> None:
    """A receiver that answers 200 and then drips its body a byte at a time, each within the read
    timeout, cannot hold the sender: the read stops at twice the timeout with what came."""
    settings.FAIRSCHED_WEBHOOK_ALLOW_HTTP = True
    settings.FAIRSCHED_WEBHOOK_ALLOW_PRIVATE = True
    settings.FAIRSCHED_WEBHOOK_TIMEOUT = 0.5
    stop = threading.Event()

    class Dripping(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "4096")
            self.end_headers()
            try:
                while not stop.wait(0.2):
                    self.wfile.write(b"x")
                    self.wfile.flush()
            except OSError:
                pass

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Dripping)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        outcome = webhook_delivery.post(
            url=f"http://127.0.0.1:{server.server_address[1]}/",
            body=b"{}",
            secret="s",
            idempotency_key="k",
            event_type="chart.failed",
        )
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
    assert outcome.status == 200
    assert 0 < len(outcome.excerpt) < 4096
