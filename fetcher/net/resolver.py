"""Name resolution: one lookup per hop, behind a tiny seam (I/O).

The fetcher calls :meth:`Resolver.resolve` exactly once per hop and connects only to an
address from that answer, so a DNS server that changes its answer between a check and
a connection (DNS rebinding) cannot steer the connection.

Production lookups go through c-ares (``aiodns``/``pycares``), not ``getaddrinfo`` in
threads. c-ares reads ``/etc/resolv.conf`` (nameservers, search, ndots, timeouts),
``/etc/hosts`` and the ``hosts:`` order of ``/etc/nsswitch.conf`` as the system resolver
does, but a lookup is a socket in c-ares' one event thread, not a thread of its own: a
name whose servers never answer costs its own lookup (cut at :data:`DEFAULT_TIMEOUT`)
and nothing else. ``getaddrinfo`` threads could not be stopped: glibc retries past any
timeout, they filled the shared thread pool, so every other read failed with ``dns``,
and they held up shutdown. What c-ares does not do is NSS modules (``nss-resolve``,
``mdns``): with systemd-resolved, the stub 127.0.0.53 from ``resolv.conf`` is queried
directly (the unit must allow that address; see ``deploy/systemd/README.md``).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable, Mapping, Sequence
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Protocol

import aiodns

from fetcher.errors import ResolveError

IPAddress = IPv4Address | IPv6Address

__all__ = ["DnsResolver", "ResolveError", "Resolver", "StaticResolver"]

#: Seconds one lookup may take, all its tries included.
DEFAULT_TIMEOUT = 5.0
#: c-ares' own budget per try and tries per server: a query it keeps running after the
#: caller gave up (a cancelled lookup is not withdrawn from c-ares) ends within this.
_TRY_TIMEOUT = 2.0
_TRIES = 2


class Resolver(Protocol):
    """Turns a host name into the addresses it has."""

    async def resolve(self, host: str) -> list[IPAddress]:
        """Return every address of ``host`` (at least one), or raise :class:`ResolveError`."""
        ...


class DnsResolver:
    """The system's DNS configuration, asked through c-ares, one bounded lookup at a time.

    Must be made inside the running event loop it will serve.
    """

    def __init__(
        self, *, timeout: float = DEFAULT_TIMEOUT, nameservers: Sequence[str] | None = None
    ) -> None:
        """Prepares the c-ares channel.

        Args:
            timeout: Seconds one lookup may take, all tries included.
            nameservers: ``ip`` or ``ip:port`` servers to ask instead of ``resolv.conf``'s
                (tests point this at a DNS server on loopback).
        """
        self._timeout = timeout
        self._dns = aiodns.DNSResolver(
            nameservers=list(nameservers) if nameservers else None,
            loop=asyncio.get_running_loop(),
            timeout=min(_TRY_TIMEOUT, timeout),
            tries=_TRIES,
        )

    async def resolve(self, host: str) -> list[IPAddress]:
        """Resolve ``host``: its IPv4 and IPv6 addresses, in the order c-ares gives them.

        # Security
        A lookup ends after ``timeout`` seconds whatever the DNS server does, and a
        lookup that hangs holds no thread, slot or lock that another lookup, a page
        render or shutdown waits for. Proved by
        ``tests/fetcher/net/test_resolver.py::test_names_that_never_resolve_delay_only_themselves``.
        """
        try:
            async with asyncio.timeout(self._timeout):
                result = await self._dns.getaddrinfo(
                    host, family=socket.AF_UNSPEC, port=443, type=socket.SOCK_STREAM
                )
        except TimeoutError as exc:
            raise ResolveError(f"lookup timed out after {self._timeout:g} s") from exc
        except aiodns.error.DNSError as exc:
            message = exc.args[1] if len(exc.args) > 1 else str(exc)
            raise ResolveError(str(message) or "lookup failed") from exc
        except (OSError, UnicodeError, ValueError) as exc:
            raise ResolveError(str(exc) or type(exc).__name__) from exc
        addresses: list[IPAddress] = []
        for node in result.nodes:
            raw = node.addr[0]
            text = raw.decode("ascii") if isinstance(raw, bytes) else str(raw)
            # Scope IDs ("fe80::1%eth0") are cut off: the bare address is what is judged.
            address = ip_address(text.partition("%")[0])
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise ResolveError("no addresses")
        return addresses

    async def aclose(self) -> None:
        """Stops every lookup still running and releases the channel."""
        await self._dns.close()


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
