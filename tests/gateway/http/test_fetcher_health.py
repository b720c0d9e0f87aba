"""/healthz asks the real fetcher (a grpc.aio server on a temporary Unix socket)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from fetcher.client import FetcherClient
from fetcher.report import Report
from gateway.http.fetcher_health import FetcherHealth
from gateway.http.health import FetcherPart, TargetHealth
from testkit.engine import FakeEngine
from testkit.fetcher import running_fetcher, unix_settings
from tests.gateway.conftest import GatewayFactory


async def never_read(*args: object, **kwargs: object) -> Report:
    raise AssertionError("a health check must not read anything")


@pytest.fixture
async def fetcher_target(sock_dir: Path) -> AsyncIterator[str]:
    async with running_fetcher(unix_settings(sock_dir), never_read) as server:
        yield server.settings.listen[0].target


async def test_running_fetcher_is_reported_healthy(fetcher_target: str) -> None:
    async with FetcherClient(fetcher_target) as client:
        assert await FetcherHealth([client])() == FetcherPart((TargetHealth(fetcher_target, True),))


async def test_missing_fetcher_is_reported_down_without_raising(
    fetcher_target: str, sock_dir: Path
) -> None:
    missing = f"unix:{sock_dir / 'nobody.sock'}"
    async with FetcherClient(fetcher_target) as up, FetcherClient(missing) as down:
        answer = await FetcherHealth([up, down], deadline=0.5)()
    assert answer.ok is False
    assert answer.targets == (TargetHealth(fetcher_target, True), TargetHealth(missing, False))


async def test_healthz_reports_the_fetcher(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    http: httpx.AsyncClient,
    fetcher_target: str,
    sock_dir: Path,
) -> None:
    async with (
        FetcherClient(fetcher_target) as client,
        gateway_at(fetcher_probe=FetcherHealth([client])) as url,
    ):
        body = (await http.get(f"{url}/healthz")).json()
    assert body["fetcher"]["ok"] is True
    assert body["status"] == "ok"
    missing = f"unix:{sock_dir / 'nobody.sock'}"
    async with (
        FetcherClient(missing) as client,
        gateway_at(fetcher_probe=FetcherHealth([client], deadline=0.5)) as url,
    ):
        response = await http.get(f"{url}/healthz")
    assert response.status_code == 200
    assert response.json()["fetcher"]["ok"] is False
    assert response.json()["status"] == "degraded"
