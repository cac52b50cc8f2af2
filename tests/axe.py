"""axe-core's WCAG 2.1 A and AA rules on a page in the browser tests, from the copy of axe.min.js that the
`axe-playwright-python` package bundles (a file on disk: never a CDN, never a download at test time)."""

from __future__ import annotations

from typing import Any

from axe_playwright_python.sync_playwright import Axe

WCAG_21_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def wcag_violations(page: Any) -> list[str]:
    """Each violation on the page as one line: the rule, its impact, and the first nodes it names."""
    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG_21_AA}, "resultTypes": ["violations"]})
    return [
        f"{rule['id']} ({rule['impact']}): {rule['help']}: "
        + "; ".join(" ".join(node["target"]) for node in rule["nodes"][:5])
        for rule in results.response["violations"]
    ]
