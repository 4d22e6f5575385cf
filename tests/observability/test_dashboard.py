"""The dashboards ask only for series Iris exports: a renamed metric breaks this, not a graph
that silently goes flat."""

from __future__ import annotations

import json
import re
from pathlib import Path

from iris.observability import metrics
from iris.server.endpoints import STATUS_ROOT

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\biris_[a-z_]+")


def exported() -> set[str]:
    """Every sample name the registry can produce (``_total``, ``_bucket``, … included)."""
    names: set[str] = set()
    for family in metrics.REGISTRY.collect():
        base = family.name
        names |= {base, f"{base}_total", f"{base}_bucket", f"{base}_sum", f"{base}_count"}
    return names


def test_every_grafana_panel_queries_series_that_exist() -> None:
    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(dashboard["panels"]) >= 5
    used = {name for expr in exprs for name in NAME.findall(expr)}
    assert used and used <= exported(), used - exported()
    titles = " ".join(panel["title"] for panel in dashboard["panels"]).lower()
    for needed in ("first token", "tokens per second", "running turns", "429", "queue bound"):
        assert needed in titles


def test_the_status_page_reads_series_that_exist() -> None:
    used = set(NAME.findall((STATUS_ROOT / "status.js").read_text()))
    assert len(used) >= 6 and used <= exported(), used - exported()
