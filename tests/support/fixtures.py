"""Shared pytest fixtures: a trustme CA, a running HTTPS origin, the test policy, the
render pool, and a folder for sockets. The servers themselves live in ``testkit``.

The test policy is the only way loopback is reached: it is an explicit object built here
(127.0.0.1 exempt, the origin's ephemeral port allowed), never a setting of the programs.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from ipaddress import ip_network
from pathlib import Path
from typing import Any

import pytest
import trustme

from fetcher.crawl import WORKER_PRELOAD, Crawler
from fetcher.isolation.workers import WorkerPool
from fetcher.net.download import Downloader, Limits
from fetcher.net.policy import Policy
from fetcher.net.resolver import StaticResolver
from fetcher.outcome import HopRecord
from testkit.fetcher import socket_folder
from testkit.origin import NAMES, Origin, running_origin


@pytest.fixture(scope="session")
def ca() -> trustme.CA:
    """A throwaway certificate authority for the suite."""
    return trustme.CA()


@pytest.fixture(scope="session")
def client_ssl_context(ca: trustme.CA) -> ssl.SSLContext:
    """A client context that trusts only the test CA."""
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


@pytest.fixture
async def origin(ca: trustme.CA) -> AsyncIterator[Origin]:
    """A real HTTPS origin on 127.0.0.1, empty routes."""
    async with running_origin(ca) as server:
        yield server


def policy_for(origin: Origin) -> Policy:
    """The explicit test policy: 127.0.0.1 and the origin's port, nothing else."""
    return Policy(ports=frozenset({443, origin.port}), exempt=(ip_network("127.0.0.1/32"),))


@pytest.fixture
def test_policy(origin: Origin) -> Policy:
    """See :func:`policy_for`."""
    return policy_for(origin)


@pytest.fixture
def resolver() -> StaticResolver:
    """Every origin name resolves to 127.0.0.1."""
    return StaticResolver({name: ["127.0.0.1"] for name in NAMES})


@pytest.fixture
def hops() -> list[HopRecord]:
    """Collects the hop records a downloader reports."""
    return []


@pytest.fixture
async def downloader(
    test_policy: Policy,
    resolver: StaticResolver,
    client_ssl_context: ssl.SSLContext,
    hops: list[HopRecord],
) -> AsyncIterator[Downloader]:
    """A downloader with the test policy, static resolver, test CA and small limits."""
    async with Downloader(
        policy=test_policy,
        resolver=resolver,
        ssl_context=client_ssl_context,
        limits=Limits(page_timeout=2.0, max_bytes=64 * 1024),
        observer=hops.append,
    ) as instance:
        yield instance


DownloaderFactory = Callable[..., Downloader]


@pytest.fixture
def make_downloader(
    test_policy: Policy, resolver: StaticResolver, client_ssl_context: ssl.SSLContext
) -> DownloaderFactory:
    """``async with make_downloader(limits=...) as d``: the test setup with some parts swapped."""

    def make(**overrides: Any) -> Downloader:
        parts: dict[str, Any] = {
            "policy": test_policy,
            "resolver": resolver,
            "ssl_context": client_ssl_context,
        }
        return Downloader(**(parts | overrides))

    return make


@pytest.fixture
async def render_pool() -> AsyncIterator[WorkerPool]:
    """The production render worker pool (two workers, production limits), started: like
    the long-lived pool of a running fetcher, not one paying its start-up in a test."""
    pool = WorkerPool(workers=2, preload=WORKER_PRELOAD)
    try:
        await pool.run(os.getpid)
        yield pool
    finally:
        await pool.aclose()


@pytest.fixture
def crawler(downloader: Downloader, render_pool: WorkerPool) -> Crawler:
    """The crawl with the test downloader and the render pool."""
    return Crawler(downloader=downloader, pool=render_pool)


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short folder for Unix sockets (a socket path must fit in 108 bytes)."""
    with socket_folder() as folder:
        yield folder
