"""The ASGI application a web worker loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_loading_the_application_loads_the_views_so_no_request_pays_for_it() -> None:
    probe = (
        "import sys; before = set(sys.modules); import fairsched.asgi; "
        "print(sorted({'charts.api', 'rest_framework.views', 'drf_spectacular.views'} - set(sys.modules)), "
        "'charts.api' in before)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "fairsched.settings"}
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.split("\n")[-2] == "[] False"
