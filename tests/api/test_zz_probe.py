import pytest
from tests.conftest import Tenants

@pytest.mark.parametrize("q", ["external_id=", "workflow=", "org=", "state=", "page_size=", "cursor=", "created_after=", "format="])
def test_probe_query(tenants: Tenants, client_for, q) -> None:
    r = client_for(tenants.staff).get(f"/api/v1/charts/?{q}")
    print(q, r.status_code, r.content[:200])

@pytest.mark.parametrize("body", [{"weight": "abc"}, [{"weight": 3}], [], "x", 5, None, {"weight": None}, {"weight": True}, {"name": 5}, {"max_concurrency": "3"}, {"queue_limit": []}, {"reason": 5}, {}])
def test_probe_patch(tenants: Tenants, client_for, body) -> None:
    import json
    r = client_for(tenants.staff).patch("/api/v1/orgs/acme/", json.dumps(body), content_type="application/json")
    print(body, r.status_code, r.content[:200])
