"""A DNS server on 127.0.0.1 for tests: answers the names it knows, and never answers others.

That is what a resolver sees when a name's authoritative servers never reply: the query
goes unanswered until the client gives up. Built on dnspython's message codec over plain
asyncio sockets: UDP, and TCP on the same port for answers too big for a datagram (the
UDP reply is then truncated, as real servers do, and the client asks again over TCP).

A table entry is a list of addresses (A and AAAA records), or ``CNAME:target`` followed
by the records the server adds for the chain (``target=address``), so CNAME chains can be
served as one answer, the way recursive resolvers send them.
"""

from __future__ import annotations

import asyncio
import contextlib
import typing
from collections.abc import AsyncIterator, Mapping

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset

#: Largest UDP answer sent whole (the classic DNS limit without EDNS).
UDP_LIMIT = 512


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, server: DnsServer) -> None:
        self._server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Python 3.11's selector transport is a DatagramTransport by behaviour, not by class.
        self.transport = typing.cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | int, int]) -> None:
        reply = self._server.answer(data, limit=UDP_LIMIT)
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
        self._tcp: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, as a resolver's nameserver setting takes it."""
        return f"127.0.0.1:{self.port}"

    def answer(self, data: bytes, *, limit: int | None = None) -> bytes | None:
        """The reply to one query, or None to leave it unanswered; truncated past ``limit``."""
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
        owner = question.name
        for entry in self._table[name]:
            if entry.startswith("CNAME:"):
                target = entry.removeprefix("CNAME:")
                reply.answer.append(dns.rrset.from_text(owner, 60, "IN", "CNAME", target))
                owner = dns.name.from_text(target)
                continue
            record_owner, _, address = entry.rpartition("=")
            if (":" in address) == (wanted == "AAAA"):
                where = dns.name.from_text(record_owner) if record_owner else owner
                reply.answer.append(dns.rrset.from_text(where, 60, "IN", wanted, address))
        wire = bytes(reply.to_wire(max_size=65535))
        if limit is not None and len(wire) > limit:
            truncated = dns.message.make_response(query)
            truncated.flags |= dns.flags.TC
            return bytes(truncated.to_wire())
        return wire

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            with contextlib.suppress(
                asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError
            ):
                while True:
                    size = int.from_bytes(await reader.readexactly(2), "big")
                    reply = self.answer(await reader.readexactly(size))
                    if reply is not None:
                        writer.write(len(reply).to_bytes(2, "big") + reply)
                        await writer.drain()
        finally:
            self._handlers.discard(task)
            writer.transport.abort()

    async def start(self) -> None:
        """Listens on an ephemeral port of 127.0.0.1, UDP and TCP."""
        loop = asyncio.get_running_loop()
        # The UDP port's TCP twin may be taken by another program: try another pair.
        for _ in range(50):
            transport, _ = await loop.create_datagram_endpoint(
                lambda: _Protocol(self), local_addr=("127.0.0.1", 0)
            )
            port = transport.get_extra_info("sockname")[1]
            try:
                self._tcp = await asyncio.start_server(self._serve_tcp, "127.0.0.1", port)
            except OSError:
                transport.close()
                continue
            self._transport, self.port = transport, port
            return
        raise OSError("no free UDP and TCP port pair on 127.0.0.1")

    async def stop(self) -> None:
        """Stops listening and drops the TCP connections still open."""
        if self._transport is not None:
            self._transport.close()
        if self._tcp is not None:
            self._tcp.close()
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        if self._tcp is not None:
            await self._tcp.wait_closed()


@contextlib.asynccontextmanager
async def running_dns(table: Mapping[str, list[str]]) -> AsyncIterator[DnsServer]:
    """Start a :class:`DnsServer` and stop it afterwards."""
    server = DnsServer(table)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
