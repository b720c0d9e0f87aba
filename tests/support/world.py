"""Every real part of a Web-on answer but the model and the search engine, for one test.

- the local HTTPS origin (``testkit.origin``) the fetcher reads;
- the SearXNG stand-in (``testkit/searxng.py``) serving the recorded answers, their
  result addresses rewritten to that origin;
- the fetcher's real gRPC service on a Unix socket (``tests/support/fetcher_service.py``)
  reading the origin through the explicit test Policy;
- the scripted fake engine over HTTP (``testkit/engine.py``);
- the real gateway (``gateway.app.create_app`` with no tool or probe injected: the
  production composition) on uvicorn, with its own server settings.

The end-to-end tests (``tests/e2e``) take these as pytest fixtures; the browser tests
(``tests/page``) start them on the servers' loop of their own thread. Both use
`running_world` and `running_gateway`.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fetcher.net.download import Limits as DownloadLimits
from fetcher.net.policy import Policy
from gateway.app import create_app
from gateway.http.serving import uvicorn_config
from gateway.metrics import GatewayMetrics
from gateway.settings import EngineSettings, Settings, Timeouts
from testkit.engine import FakeEngine
from testkit.fetcher import socket_folder
from testkit.origin import Origin
from testkit.searxng import (
    SearxngStandIn,
    Served,
    pointed_at,
    recorded,
    running_searxng,
)
from tests.gateway.servers import serve
from tests.support.fetcher_service import FetcherService, running_fetcher

KEY = "e2e-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}
#: Recorded result hosts → names the origin's certificate holds (others: the first).
HOSTS = {"example.org": "origin.test", "example.com": "www.origin.test"}
#: Keep-alive comments come quickly, so a test can wait for one without waiting long;
#: /healthz answers are not reused, so a test sees a part go down at once.
E2E_TIMEOUTS = Timeouts(
    engine_connect=2.0,
    engine_read=20.0,
    tool=20.0,
    keepalive=0.1,
    searxng=5.0,
    health_cache=0.001,
)


@dataclass
class Gateway:
    """A running gateway and its metrics."""

    url: str
    metrics: GatewayMetrics

    @property
    def api(self) -> str:
        """The OpenAI base URL."""
        return f"{self.url}/v1"

    def metric(self, family: str, labels: dict[str, str] | None = None) -> float:
        """One sample of the gateway's metrics: a counter's total, or a gauge (0 when
        absent)."""
        text = generate_latest(self.metrics.registry).decode()
        for found in text_string_to_metric_families(text):
            if found.name == family:
                for sample in found.samples:
                    counted = sample.name.endswith("_total") or sample.name == family
                    if counted and sample.labels == (labels or {}):
                        return sample.value
        return 0.0


@dataclass
class World:
    """Every real part, for one test."""

    origin: Origin
    searxng: SearxngStandIn
    fetcher: FetcherService
    engine: FakeEngine

    def settings(self, **changes: Any) -> Settings:
        """Gateway settings pointing at these parts."""
        settings = Settings(
            engines=(EngineSettings(self.engine.url),),
            api_keys=(KEY,),
            timeouts=E2E_TIMEOUTS,
            searxng_url=self.searxng.url,
            fetcher=(self.fetcher.target,),
        )
        return replace(settings, **changes)

    def results_on_origin(self, file: str = "search_normal.json") -> None:
        """Every search answers ``file`` with its results on the local origin."""
        self.searxng.default = self.on_origin(file)

    def on_origin(self, file: str) -> Served:
        """The recorded answer ``file`` with its results on the local origin."""
        return pointed_at(recorded(file), HOSTS, self.origin.port)

    def url(self, path: str, host: str = "origin.test") -> str:
        """An address on the origin."""
        return self.origin.url(path, host=host)


@asynccontextmanager
async def running_world(
    origin: Origin, policy: Policy, ssl_context: ssl.SSLContext
) -> AsyncIterator[World]:
    """Start the SearXNG stand-in, the fetcher service (reading ``origin`` under the test
    ``policy``, trusting ``ssl_context``'s CA) and the fake engine; stop them afterwards."""
    with socket_folder() as folder:
        async with (
            running_searxng() as searxng,
            running_fetcher(
                folder,
                policy=policy,
                ssl_context=ssl_context,
                limits=DownloadLimits(page_timeout=10.0, max_bytes=64 * 1024),
            ) as fetcher,
            FakeEngine() as engine,
        ):
            yield World(origin, searxng, fetcher, engine)


@asynccontextmanager
async def running_gateway(world: World, **changes: Any) -> AsyncIterator[Gateway]:
    """The real gateway on uvicorn, pointing at ``world``'s parts (``changes``: settings
    fields to change), with its own metrics."""
    settings = world.settings(**changes)
    metrics = GatewayMetrics(CollectorRegistry())
    app = create_app(settings, metrics=metrics)
    config = uvicorn_config(app, settings, metrics, log_level="warning")
    async with serve(app, config) as url:
        yield Gateway(url, metrics)
