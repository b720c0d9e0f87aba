"""/healthz asks the real fetcher (a grpc.aio server on a temporary Unix socket)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from fetcher.report import Report
from gateway.fetcher_health import FetcherHealth
from testkit.fetcher import running_fetcher, unix_settings
from tests.gateway.conftest import GatewayFactory
from tests.gateway.fake_engine import FakeEngine


async def never_read(*args: object, **kwargs: object) -> Report:
    raise AssertionError("a health check must not read anything")


@pytest.fixture
async def fetcher_target(sock_dir: Path) -> AsyncIterator[str]:
    async with running_fetcher(unix_settings(sock_dir), never_read) as server:
        yield server.settings.listen[0].target


async def test_running_fetcher_is_reported_healthy(fetcher_target: str) -> None:
    probe = FetcherHealth([fetcher_target])
    try:
        assert await probe() == {
            "checked": True,
            "ok": True,
            "targets": [{"target": fetcher_target, "ok": True}],
        }
    finally:
        await probe.aclose()


async def test_missing_fetcher_is_reported_down_without_raising(
    fetcher_target: str, sock_dir: Path
) -> None:
    missing = f"unix:{sock_dir / 'nobody.sock'}"
    probe = FetcherHealth([fetcher_target, missing], deadline=0.5)
    try:
        answer = await probe()
    finally:
        await probe.aclose()
    assert answer["ok"] is False
    assert answer["targets"] == [
        {"target": fetcher_target, "ok": True},
        {"target": missing, "ok": False},
    ]


async def test_healthz_reports_the_fetcher(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    http: httpx.AsyncClient,
    fetcher_target: str,
    sock_dir: Path,
) -> None:
    probe = FetcherHealth([fetcher_target])
    async with gateway_at(fetcher_probe=probe) as url:
        body = (await http.get(f"{url}/healthz")).json()
    await probe.aclose()
    assert body["fetcher"]["ok"] is True
    assert body["status"] == "ok"
    down = FetcherHealth([f"unix:{sock_dir / 'nobody.sock'}"], deadline=0.5)
    async with gateway_at(fetcher_probe=down) as url:
        response = await http.get(f"{url}/healthz")
    await down.aclose()
    assert response.status_code == 200
    assert response.json()["fetcher"]["ok"] is False
    assert response.json()["status"] == "degraded"
