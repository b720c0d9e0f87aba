"""End to end: every part real except the model and the search engine.

The parts and the gateway are started by ``tests/support/world.py`` (shared with the
browser tests); here they are pytest fixtures:

- the SearXNG stand-in (``testkit/searxng.py``) serving the recorded answers, their
  result addresses rewritten to the local HTTPS origin;
- the fetcher's real gRPC service on a Unix socket (``tests/support/fetcher_service.py``)
  reading that origin through the explicit test Policy;
- the real gateway (``gateway.app.create_app`` with no tool or probe injected: the
  production composition) on uvicorn;
- the scripted fake engine over HTTP (``testkit/engine.py``).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import httpx
import pytest

from fetcher.net.policy import Policy
from testkit.origin import Origin
from tests.support.world import (
    AUTH,
    E2E_TIMEOUTS,
    HOSTS,
    KEY,
    Gateway,
    World,
    running_gateway,
    running_world,
)

# The e2e modules import these names from here.
__all__ = ["AUTH", "E2E_TIMEOUTS", "HOSTS", "KEY", "Gateway", "GatewayFactory", "World"]


@pytest.fixture
async def world(
    origin: Origin, test_policy: Policy, client_ssl_context: ssl.SSLContext
) -> AsyncIterator[World]:
    """SearXNG stand-in, fetcher service, origin and fake engine, running."""
    async with running_world(origin, test_policy, client_ssl_context) as parts:
        yield parts


GatewayFactory = Callable[..., AbstractAsyncContextManager[Gateway]]


@pytest.fixture
def gateway_for(world: World) -> GatewayFactory:
    """``async with gateway_for(**setting_changes) as gw``: the real gateway on uvicorn."""

    def start(**changes: object) -> AbstractAsyncContextManager[Gateway]:
        return running_gateway(world, **changes)

    return start


@pytest.fixture
async def gateway(gateway_for: GatewayFactory) -> AsyncIterator[Gateway]:
    """The gateway with the default e2e settings."""
    async with gateway_for() as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """A plain HTTP client for the tests."""
    async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
        yield client
