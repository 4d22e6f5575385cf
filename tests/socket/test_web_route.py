"""``iris serve`` serves the browser app at ``/`` (with the iris socket), under a strict
Content-Security-Policy; the artifact sandbox page gets its own, network-less policy."""

from __future__ import annotations

import re

import httpx

from iris.server.asgi import build_app
from tests.conftest import MakeConfig


def client(make_config: MakeConfig, enabled: bool) -> httpx.AsyncClient:
    config = make_config(
        "http://127.0.0.1:9/v1",
        platforms={"iris": {"enabled": enabled, "tokens": ["t"]}, "api_server": {"enabled": True}},
    )
    transport = httpx.ASGITransport(app=build_app(config))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


async def test_the_app_is_served_at_the_root_with_strict_headers(make_config: MakeConfig) -> None:
    async with client(make_config, enabled=True) as http:
        page = await http.get("/")
        module = await http.get("/js/main.js")
        sandbox = await http.get("/sandbox.html")
        manifest = await http.get("/manifest.webmanifest")
        health = await http.get("/health")
        missing = await http.get("/no/such/file.js")
    assert page.status_code == 200 and '<main id="log" role="log"' in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert module.headers["content-type"].startswith("text/javascript")
    assert "connect-src" not in sandbox.headers["content-security-policy"]  # default-src 'none'
    assert "default-src 'none'" in sandbox.headers["content-security-policy"]
    assert manifest.json()["name"] == "Iris"
    assert health.json()["status"] == "ok"
    # Not the app's: the server's JSON 404 (the app claims only its own paths).
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "http_404"


async def test_without_the_iris_socket_there_is_no_app(make_config: MakeConfig) -> None:
    async with client(make_config, enabled=False) as http:
        page = await http.get("/")
    assert page.status_code == 404


def test_the_service_worker_lists_every_file_of_the_shell() -> None:
    """Offline, the app opens only if every module it imports was cached at install."""
    from iris.surfaces.web import WEB_ROOT

    worker = (WEB_ROOT / "sw.js").read_text()
    listed = set(re.findall(r'"([^"]+)"', worker[worker.index("SHELL") : worker.index("];")]))
    shipped = {
        path.relative_to(WEB_ROOT).as_posix()
        for path in WEB_ROOT.rglob("*")
        if path.is_file() and path.name not in {"sw.js", "LICENSE", "LICENSE-MPL", "README.md"}
    }
    assert listed - {"./"} == shipped
