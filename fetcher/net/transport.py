"""Pinned connections (rule 3): HTTP over TLS to exactly the address that was checked (I/O).

httpcore's documented ``network_backend`` seam is where a connection is opened. Each
connection pool here is bound to one :class:`fetcher.net.guard.CheckedAddress` (host name,
checked IP, port), the only kind of address this module accepts: its backend dials the
checked IP whatever name httpcore hands it, while httpcore keeps using the name for SNI,
certificate verification and the Host header. Pools are kept (bounded, least recently
used first out) so that pages of one site reuse their keep-alive connections; a pool is
never shared between two IPs or two names, so a connection verified for one name is
never used for another.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import ssl
from collections.abc import AsyncIterator, Iterable

import httpcore

from fetcher.net.guard import CheckedAddress

MAX_POOLS = 32
KEEPALIVE_EXPIRY = 5.0


def default_ssl_context(
    cafile: str | None = None, *, extra_cadata: str | None = None
) -> ssl.SSLContext:
    """A client TLS context: the system trust store (or ``cafile``), TLS 1.2 or newer.

    Args:
        cafile: Trust only this bundle (tests); the system store when ``None``.
        extra_cadata: PEM certificates trusted in addition (the ``extra_ca_file``
            setting, read at start-up).

    # Security
    What the fetcher trusts is decided here and nowhere else: ``cafile`` when given,
    otherwise the trust store OpenSSL was built with (``openssl_cafile`` and
    ``openssl_capath``, on Debian ``/etc/ssl/certs``), plus ``extra_cadata`` when the
    operator set ``extra_ca_file``: added to the store, never replacing it.
    ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` are not consulted, so the environment cannot
    add a certificate authority behind the settings' back. Certificates are verified and
    the name is checked. Tested by ``test_trust_store_ignores_ssl_cert_file`` in
    ``tests/fetcher/net/test_download.py`` and by ``tests/fetcher/net/test_extra_ca.py``.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies and checks names
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cafile is not None:
        context.load_verify_locations(cafile=cafile)
    else:
        paths = ssl.get_default_verify_paths()
        cafile_default = paths.openssl_cafile if os.path.exists(paths.openssl_cafile) else None
        capath_default = paths.openssl_capath if os.path.isdir(paths.openssl_capath) else None
        if cafile_default or capath_default:
            context.load_verify_locations(cafile=cafile_default, capath=capath_default)
    if extra_cadata is not None:
        context.load_verify_locations(cadata=extra_cadata)
    return context


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """A network backend that connects only to one checked address.

    Attributes:
        connections_opened: How many connections it has opened (a request that opened
            none went over a kept-alive connection).

    # Security
    Rule 3: no second lookup. httpcore asks the backend to connect to the URL's host
    name; this backend never resolves it and dials the address that the guard checked
    (a :class:`~fetcher.net.guard.CheckedAddress`, which only the guard makes). It refuses a
    request for any other name or port (which would mean a pool was misused) and refuses
    Unix sockets. Tested by ``test_resolver_is_called_once_per_hop``,
    ``test_second_resolver_answer_cannot_change_the_connection`` and
    ``test_pinned_backend_refuses_another_name_or_port`` in ``tests/fetcher/net/test_download.py``.
    """

    def __init__(
        self, checked: CheckedAddress, inner: httpcore.AsyncNetworkBackend | None = None
    ) -> None:
        self._checked = checked
        self._inner = inner if inner is not None else httpcore.AnyIOBackend()
        self.connections_opened = 0

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Dial the pinned address; ``host`` and ``port`` must be the pinned ones."""
        if host.strip("[]") != self._checked.host or port != self._checked.port:
            raise httpcore.ConnectError(f"pinned to {self._checked.host!r}, asked for {host!r}")
        self.connections_opened += 1
        return await self._inner.connect_tcp(
            str(self._checked.ip),
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Never: the fetcher speaks only TCP to the web."""
        raise httpcore.ConnectError("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        """Delegate to the inner backend (httpcore uses it between retries)."""
        await self._inner.sleep(seconds)


@dataclasses.dataclass(slots=True)
class Lease:
    """A pool lent for one request, with the backend that counts its connections."""

    pool: httpcore.AsyncConnectionPool
    backend: PinnedBackend
    users: int = 0


class PinnedPools:
    """Connection pools keyed by the checked address they are pinned to."""

    def __init__(
        self,
        ssl_context: ssl.SSLContext,
        *,
        max_pools: int = MAX_POOLS,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
    ) -> None:
        self._ssl_context = ssl_context
        self._max_pools = max_pools
        self._keepalive_expiry = keepalive_expiry
        self._entries: collections.OrderedDict[CheckedAddress, Lease] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    @contextlib.asynccontextmanager
    async def lease(self, checked: CheckedAddress) -> AsyncIterator[Lease]:
        """Lend the pool pinned to ``checked``; idle extra pools are closed afterwards."""
        entry = self._entries.get(checked)
        if entry is None:
            backend = PinnedBackend(checked)
            pool = httpcore.AsyncConnectionPool(
                ssl_context=self._ssl_context,
                max_connections=16,
                max_keepalive_connections=16,
                keepalive_expiry=self._keepalive_expiry,
                http1=True,
                http2=False,
                network_backend=backend,
            )
            entry = self._entries[checked] = Lease(pool, backend)
        self._entries.move_to_end(checked)
        entry.users += 1
        try:
            yield entry
        finally:
            entry.users -= 1
            await self._evict()

    async def _evict(self) -> None:
        excess = len(self._entries) - self._max_pools
        if excess <= 0:
            return
        idle = [key for key, entry in self._entries.items() if entry.users == 0][:excess]
        for key in idle:
            await self._entries.pop(key).pool.aclose()

    async def aclose(self) -> None:
        """Close every pool."""
        entries, self._entries = list(self._entries.values()), collections.OrderedDict()
        for entry in entries:
            await entry.pool.aclose()
