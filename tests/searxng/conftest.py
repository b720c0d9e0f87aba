"""Session fixtures: one real SearXNG (and its Valkey/Redis) for the whole suite.

The build comes from `make searxng` (run by `make test`) and Valkey/Redis from Debian
(installed by the same target when root). Where either cannot be had, every test here is
skipped, and the skip says why (the tarball is not beside the repository, the build
failed and how, no redis-server): the rest of the suite runs on the recorded answers.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager

import pytest

from fetcher.net.policy import Policy
from testkit.origin import Origin
from tests.llama.processes import Served
from tests.searxng.build import missing, ready_paths
from tests.searxng.real import (
    ResultServer,
    running_searxng,
    running_valkey,
    valkey_binary,
    write_settings,
)
from tests.support.world import Gateway, World, running_gateway, running_world


@pytest.fixture(scope="session")
def result_server() -> Iterator[ResultServer]:
    """The backend SearXNG's loopback engines ask."""
    with ResultServer().running() as server:
        yield server


@pytest.fixture(scope="session")
def real_searxng(
    result_server: ResultServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """The real SearXNG, limiter on with a real Valkey/Redis; skipped, saying why, when
    either cannot be had."""
    why = missing()
    if why is not None:
        pytest.skip(why)
    binary = valkey_binary()
    if binary is None:
        pytest.skip(
            "SearXNG's limiter needs Valkey or Redis: no valkey-server or redis-server "
            "(`make searxng` installs Debian's redis-server when root)"
        )
    folder = tmp_path_factory.mktemp("searxng")
    with running_valkey(binary, folder / "valkey.log") as valkey_url:
        settings = write_settings(folder, result_port=result_server.port, valkey_url=valkey_url)
        with running_searxng(ready_paths(), settings, folder / "searxng.log") as served:
            yield served


@pytest.fixture
def results(result_server: ResultServer, real_searxng: Served) -> ResultServer:
    """The result server, its record cleared for this test."""
    result_server.clear()
    return result_server


@pytest.fixture
async def world(
    origin: Origin, test_policy: Policy, client_ssl_context: ssl.SSLContext
) -> AsyncIterator[World]:
    """The e2e parts (origin, fetcher service, fake engine); the gateway is pointed at the
    real SearXNG instead of the stand-in."""
    async with running_world(origin, test_policy, client_ssl_context) as parts:
        yield parts


GatewayFactory = Callable[..., AbstractAsyncContextManager[Gateway]]


@pytest.fixture
def gateway_for(world: World, real_searxng: Served) -> GatewayFactory:
    """``async with gateway_for(**changes) as gw``: the real gateway on the real SearXNG."""

    def start(**changes: object) -> AbstractAsyncContextManager[Gateway]:
        return running_gateway(world, **({"searxng_url": real_searxng.url} | changes))

    return start
