"""Scraping a real server's ``/metrics`` and reading the series a test checks."""

from __future__ import annotations

import json
from collections.abc import Mapping

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.served import Served

TOKEN = "scrape-token-for-tests"  # 16+ characters, as every secret
METRICS = {"metrics": {"enabled": True, "token": TOKEN}}


class Scrape:
    """One scrape: every sample, by name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: list[tuple[str, dict[str, str], float]] = [
            (sample.name, dict(sample.labels), sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        ]

    def value(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels`` (0 when none)."""
        return sum(
            value
            for sample, have, value in self.samples
            if sample == name and all(have.get(k) == v for k, v in labels.items())
        )

    def labels(self, name: str, label: str) -> set[str]:
        return {have[label] for sample, have, _ in self.samples if sample == name and label in have}


def scrape(url: str, token: str | None = TOKEN) -> Scrape:
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    answer = httpx.get(f"{url}/metrics", headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return Scrape(answer.text)


def log_lines(server: Served, event: str) -> list[Mapping[str, object]]:
    """The structured lines ``{"event": event, …}`` the server logged so far."""
    found: list[Mapping[str, object]] = []
    for line in server.drain():
        if line.startswith("{") and f'"event": "{event}"' in line:
            found.append(json.loads(line))
    return found
