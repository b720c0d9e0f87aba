"""Fixtures for the research tools' tests: the SearXNG stand-in, the fetcher service, a site.

Everything is real except what SearXNG and the web would say: the stand-in serves the
recorded SearXNG answers over HTTP, and the fetcher's gRPC service reads a local HTTPS
origin through the explicit test policy.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import httpx
import pytest

from fetcher.client import FetcherClient
from fetcher.net.policy import Policy
from gateway.tools.search.searxng import SearxngClient, http_client
from testkit.origin import Origin
from testkit.searxng import SearxngStandIn, running_searxng
from tests.support.fetcher_service import FetcherService, running_fetcher, socket_folder


@pytest.fixture
async def searxng() -> AsyncIterator[SearxngStandIn]:
    """The SearXNG stand-in, answering every query with ``search_normal.json``."""
    async with running_searxng() as stand_in:
        yield stand_in


@pytest.fixture
async def searxng_http() -> AsyncIterator[httpx.AsyncClient]:
    """The gateway's own httpx client for SearXNG, as the composition root builds it."""
    async with http_client(timeout=5.0) as client:
        yield client


@pytest.fixture
def searxng_client(searxng: SearxngStandIn, searxng_http: httpx.AsyncClient) -> SearxngClient:
    """A client of the stand-in with a short timeout."""
    return SearxngClient(searxng_http, searxng.url, timeout=5.0)


@pytest.fixture
async def fetcher_service(
    origin: Origin, test_policy: Policy, client_ssl_context: ssl.SSLContext
) -> AsyncIterator[FetcherService]:
    """The fetcher's real gRPC service on a Unix socket, reading the local origin."""
    with socket_folder() as folder:
        async with running_fetcher(
            folder, policy=test_policy, ssl_context=client_ssl_context
        ) as service:
            yield service


@pytest.fixture
async def fetcher_client(fetcher_service: FetcherService) -> AsyncIterator[FetcherClient]:
    """The gateway's client of that service."""
    async with fetcher_service.client(timeout=10.0) as client:
        yield client
