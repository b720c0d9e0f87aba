"""A DNS server on 127.0.0.1 for tests: answers the names it knows, and never answers others.

That is what a resolver sees when a name's authoritative servers never reply: the query
goes unanswered until the client gives up. Built on dnspython's message codec over a
plain asyncio UDP socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import typing
from collections.abc import AsyncIterator, Mapping

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, server: DnsServer) -> None:
        self._server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Python 3.11's selector transport is a DatagramTransport by behaviour, not by class.
        self.transport = typing.cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | int, int]) -> None:
        reply = self._server.answer(data)
        if reply is not None and self.transport is not None:
            self.transport.sendto(reply, addr)


class DnsServer:
    """Answers A and AAAA queries from a table; names outside it get no answer at all.

    Attributes:
        queries: Every name asked for, in order (lower-case, without the final dot).
    """

    def __init__(self, table: Mapping[str, list[str]]) -> None:
        self._table = {name.lower().rstrip("."): answers for name, answers in table.items()}
        self.queries: list[str] = []
        self.port = 0
        self._transport: asyncio.DatagramTransport | None = None

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, as a resolver's nameserver setting takes it."""
        return f"127.0.0.1:{self.port}"

    def answer(self, data: bytes) -> bytes | None:
        """The reply to one query, or None to leave it unanswered."""
        try:
            query = dns.message.from_wire(data)
        except Exception:  # a test server ignores what it cannot read
            return None
        question = query.question[0]
        name = question.name.to_text(omit_final_dot=True).lower()
        self.queries.append(name)
        if name not in self._table:
            return None
        reply = dns.message.make_response(query)
        wanted = "AAAA" if question.rdtype == dns.rdatatype.AAAA else "A"
        answers = [a for a in self._table[name] if (":" in a) == (wanted == "AAAA")]
        if answers:
            reply.answer.append(dns.rrset.from_text(question.name, 60, "IN", wanted, *answers))
        return bytes(reply.to_wire())

    async def start(self) -> None:
        """Listens on an ephemeral UDP port of 127.0.0.1."""
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Protocol(self), local_addr=("127.0.0.1", 0)
        )
        self._transport = transport
        self.port = transport.get_extra_info("sockname")[1]

    def stop(self) -> None:
        """Stops listening."""
        if self._transport is not None:
            self._transport.close()


@contextlib.asynccontextmanager
async def running_dns(table: Mapping[str, list[str]]) -> AsyncIterator[DnsServer]:
    """Start a :class:`DnsServer` and stop it afterwards."""
    server = DnsServer(table)
    await server.start()
    try:
        yield server
    finally:
        server.stop()
