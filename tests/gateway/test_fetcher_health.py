"""/healthz asks the real fetcher (a grpc.aio server on a temporary Unix socket)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from fetcher.client import FetcherClient
from fetcher.metrics import Metrics
from fetcher.report import Report
from fetcher.server import FetcherServer
from fetcher.settings import Settings as FetcherSettings
from fetcher.settings import parse_listen
from gateway.fetcher_health import FetcherHealth
from tests.gateway.conftest import GatewayFactory
from tests.gateway.fake_engine import FakeEngine


async def never_read(*args: object, **kwargs: object) -> Report:
    raise AssertionError("a health check must not read anything")


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="tgh", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
async def fetcher_target(sock_dir: Path) -> AsyncIterator[str]:
    target = f"unix:{sock_dir / 'f.sock'}"
    server = FetcherServer(
        FetcherSettings(listen=(parse_listen(target),)),
        reader=never_read,
        metrics=Metrics(CollectorRegistry()),
    )
    await server.start()
    try:
        yield target
    finally:
        await server.stop(grace=0)


async def test_running_fetcher_is_reported_healthy(fetcher_target: str) -> None:
    async with FetcherClient(fetcher_target) as client:
        assert await FetcherHealth([client])() == {
            "checked": True,
            "ok": True,
            "targets": [{"target": fetcher_target, "ok": True}],
        }


async def test_missing_fetcher_is_reported_down_without_raising(
    fetcher_target: str, sock_dir: Path
) -> None:
    missing = f"unix:{sock_dir / 'nobody.sock'}"
    async with FetcherClient(fetcher_target) as up, FetcherClient(missing) as down:
        answer = await FetcherHealth([up, down], deadline=0.5)()
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
