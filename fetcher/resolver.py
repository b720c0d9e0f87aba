"""Name resolution: one lookup per hop, behind a tiny seam (I/O).

The fetcher calls :meth:`Resolver.resolve` exactly once per hop and connects only to an
address from that answer, so a DNS server that changes its answer between a check and
a connection (DNS rebinding) cannot steer the connection.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable, Mapping
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Protocol

from fetcher.errors import ResolveError

IPAddress = IPv4Address | IPv6Address

__all__ = ["ResolveError", "Resolver", "StaticResolver", "SystemResolver"]

DEFAULT_TIMEOUT = 5.0


class Resolver(Protocol):
    """Turns a host name into the addresses it has."""

    async def resolve(self, host: str) -> list[IPAddress]:
        """Return every address of ``host`` (at least one), or raise :class:`ResolveError`."""
        ...


class SystemResolver:
    """The operating system's resolver (``getaddrinfo``), with a timeout."""

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._timeout = timeout

    async def resolve(self, host: str) -> list[IPAddress]:
        """Resolve ``host`` with ``getaddrinfo``; every address family, TCP only."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._timeout):
                infos = await loop.getaddrinfo(host, 443, type=socket.SOCK_STREAM)
        except TimeoutError as exc:
            raise ResolveError(f"lookup timed out after {self._timeout:g} s") from exc
        except (OSError, UnicodeError) as exc:
            raise ResolveError(str(exc) or type(exc).__name__) from exc
        addresses: list[IPAddress] = []
        for _family, _type, _proto, _name, sockaddr in infos:
            # Scope IDs ("fe80::1%eth0") are cut off: the bare address is what is judged.
            address = ip_address(str(sockaddr[0]).partition("%")[0])
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise ResolveError("no addresses")
        return addresses


class StaticResolver:
    """Answers from a fixed table: for tests, and for ``fetcher check --resolve``.

    Its answers go through the same checks as real ones; it cannot make a refused
    address acceptable.
    """

    def __init__(
        self,
        table: Mapping[str, Iterable[str | IPAddress]],
        *,
        fallback: Resolver | None = None,
    ) -> None:
        self._table = {
            name.lower().rstrip("."): [ip_address(a) for a in answers]
            for name, answers in table.items()
        }
        self._fallback = fallback
        self.calls: list[str] = []

    async def resolve(self, host: str) -> list[IPAddress]:
        """Answer from the table, else from the fallback, else fail."""
        self.calls.append(host)
        answers = self._table.get(host.lower().rstrip("."))
        if answers:
            return list(answers)
        if self._fallback is not None:
            return await self._fallback.resolve(host)
        raise ResolveError(f"{host} is not in the table")
