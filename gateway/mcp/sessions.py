"""MCP sessions: what each one owns, who may use it, how many, and when it expires. Pure.

An MCP session (Streamable HTTP, ``Mcp-Session-Id``) is to the research tools what one
answer is to the chat loop: it owns one `gateway.tools.ledger.Ledger`, one pair of budgets
(searches, pages) and the set of calls already run (a repeat is not run again). Its
`gateway.tools.base.ToolContext` carries no user hosts: over MCP nobody's messages reach the
gateway, so rule 1 allows only the hosts of the session's own sources.

`McpSessions` decides; `gateway.mcp.http` does the HTTP and calls it. A session is
opened in two steps, because the SDK mints the id while it answers ``initialize``: a
`Ticket` reserves the place (counted against the limits at once, so two openings at the
same time cannot both pass the last place), then `McpSessions.open` files the session
under the id the SDK returned, or `McpSessions.release` gives the place back. A session
expires after ``idle`` seconds without a request in flight (an open GET stream is a
request in flight, as in the SDK's own idle rule).

Without keys every client is the same key, so sessions are also counted per client (the
peer address, or the forwarded one from a trusted proxy: `gateway.http.browsers.client_of`):
a client at its limit gets a new session in place of its own oldest idle one, and is
refused only when all of its sessions are busy.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gateway.prompts import Scope
from gateway.settings import Budgets
from gateway.tools.base import ToolContext
from gateway.tools.ledger import BudgetCounter, BudgetKind, Ledger


class Cancellable(Protocol):
    """A running tool call that can be stopped (an ``anyio.CancelScope``)."""

    def cancel(self) -> None:
        """Stop it."""
        ...


class Refusal(enum.StrEnum):
    """Why a new session was not opened."""

    KEY_LIMIT = "key_limit"  # the key has its limit of sessions open (429)
    CLIENT_LIMIT = "client_limit"  # keyless: the client's sessions are all busy (429)
    FULL = "full"  # the gateway has its limit of sessions open (503)


#: The key of every request when no keys are configured (`gateway.http.auth.KeyChecker`).
KEYLESS = -1


@dataclass(frozen=True, eq=False)
class Ticket:
    """A place reserved for a session being opened by ``key`` for ``client``.

    Attributes:
        key: Position of the access key (``-1`` without keys).
        client: The client's address (`gateway.http.browsers.client_of`), if known.
        evicted: The client's oldest idle session, forgotten to make room for this one:
            the caller ends it in the SDK.
    """

    key: int
    client: str | None = None
    evicted: McpSession | None = None


@dataclass(eq=False)
class McpSession:
    """One open session.

    Attributes:
        session_id: The ``Mcp-Session-Id`` the SDK minted.
        key: Position of the access key that opened it (``-1`` without keys).
        context: The session's ledger and budgets, handed to every tool call.
        seen: Dedup keys of the calls already run (`gateway.loop.calls.call_key`).
        in_flight: HTTP requests of this session being served now.
        idle_since: Clock time the last request in flight ended.
        calls: Tool calls running now, by JSON-RPC request id.
        requests: JSON-RPC ids of the client's requests being answered now: an id may
            not be used again until its answer was sent (`gateway.mcp.http`).
        log_level: The least severe log level the client wants (``logging/setLevel``).
    """

    session_id: str
    key: int
    context: ToolContext
    idle_since: float
    client: str | None = None
    seen: set[str] = field(default_factory=set)
    in_flight: int = 0
    calls: dict[str | int, Cancellable] = field(default_factory=dict)
    requests: set[str | int] = field(default_factory=set)
    log_level: str = "info"


class McpSessions:
    """The open MCP sessions of one gateway."""

    def __init__(
        self,
        *,
        per_key: int,
        max_sessions: int,
        idle: float,
        budgets: Budgets,
        kinds: Sequence[BudgetKind] = (),
        per_client: int = 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args:
        per_key: Sessions one key may have open (0 is no per-key limit).
        max_sessions: Sessions open in all.
        per_client: Without keys, sessions one client may have open (at least 1).
        idle: Seconds without a request in flight before a session expires.
        budgets: Each session's budget limits (the ``[budgets]`` settings).
        kinds: The budget kinds of the tools offered (`gateway.tools.base.ToolBox.budgets`),
            besides SPEC 8's searches and pages.
        clock: Monotonic seconds.
        """
        self._per_key = per_key
        self._per_client = max(1, per_client)
        self._max = max_sessions
        self._idle = idle
        self._budgets = budgets
        self._kinds = tuple(kinds)
        self._clock = clock
        self._sessions: dict[str, McpSession] = {}
        self._pending: list[Ticket] = []

    def __len__(self) -> int:
        return len(self._sessions)

    def count(self, key: int) -> int:
        """Sessions open or being opened by ``key``."""
        opened = sum(1 for s in self._sessions.values() if s.key == key)
        return opened + sum(1 for t in self._pending if t.key == key)

    def count_client(self, client: str | None) -> int:
        """Keyless sessions open or being opened for ``client``."""
        opened = sum(1 for s in self._sessions.values() if s.key == KEYLESS and s.client == client)
        return opened + sum(1 for t in self._pending if t.key == KEYLESS and t.client == client)

    def _oldest_idle(self, client: str | None) -> McpSession | None:
        idle = [
            s
            for s in self._sessions.values()
            if s.key == KEYLESS and s.client == client and s.in_flight == 0 and not s.calls
        ]
        return min(idle, key=lambda s: s.idle_since, default=None)

    def reserve(self, key: int, client: str | None = None) -> Ticket | Refusal:
        """Reserve a place for a session ``key`` is opening for ``client``, or say why not.

        # Security
        Rule: one key has at most ``[mcp] sessions_per_key`` sessions open, the gateway
        at most ``max_sessions``; each session holds a ledger and budgets in memory.
        Without keys, one client has at most ``[mcp] sessions_per_client``: at the limit
        its oldest idle session is ended for the new one (`Ticket.evicted`), and only a
        client whose sessions are all busy is refused (``CLIENT_LIMIT``).
        Threat: a client (or a leaked key) opening sessions until the gateway runs out
        of memory, or to get fresh budgets without end; without keys, one client's 256
        ``initialize`` calls in a second locking every other client out for the idle
        time (900 s). Callers may rely on the limits holding also for openings in
        progress at the same time (reserved places count), and on eviction touching
        only the same client's idle sessions. Proved by
        ``tests/gateway/mcp/test_sessions.py``,
        ``tests/gateway/mcp/test_sessions_per_client.py`` and, over HTTP,
        ``tests/e2e/test_mcp.py::test_a_key_has_at_most_its_sessions``.
        """
        evicted = None
        if key == KEYLESS and self.count_client(client) >= self._per_client:
            evicted = self._oldest_idle(client)
            if evicted is None:
                return Refusal.CLIENT_LIMIT
        freed = 0 if evicted is None else 1  # the evicted session's place is the new one's
        if len(self._sessions) + len(self._pending) - freed >= self._max:
            return Refusal.FULL
        if self._per_key and self.count(key) - freed >= self._per_key:
            return Refusal.KEY_LIMIT
        if evicted is not None:
            del self._sessions[evicted.session_id]
        ticket = Ticket(key, client, evicted)
        self._pending.append(ticket)
        return ticket

    def release(self, ticket: Ticket) -> None:
        """Give back a place whose session was not opened."""
        if ticket in self._pending:
            self._pending.remove(ticket)

    def open(self, ticket: Ticket, session_id: str) -> McpSession:
        """File the session the SDK opened on ``ticket``'s place.

        # Security
        Rule 1 (SPEC 7) over MCP: the session's context carries no user hosts, so a read
        may open only hosts of the session's own search results; each session has its
        own ledger, so one session's results never allow anything to another.
        Threat: a page (or a tool description, or another client) talking the agent into
        reading an address no search of this session returned (an internal service, a
        tracking URL), or one client widening another's allowed hosts.
        Callers may rely on a fresh ledger, fresh budgets and no user hosts per
        session. Proved by ``tests/e2e/test_mcp.py``
        (``test_a_host_outside_the_sessions_results_is_refused_not_in_answer``,
        ``test_two_sessions_share_neither_ledger_nor_budgets``).
        """
        self.release(ticket)
        budgets = BudgetCounter.of(self._budgets, self._kinds)
        session = McpSession(
            session_id=session_id,
            key=ticket.key,
            client=ticket.client,
            context=ToolContext(Ledger(), budgets, user_hosts=(), scope=Scope.SESSION),
            idle_since=self._clock(),
        )
        self._sessions[session_id] = session
        return session

    def find(self, session_id: str, key: int) -> McpSession | None:
        """The open session ``session_id``, if ``key`` opened it.

        # Security
        Rule: a session (its ledger, budgets and allowed hosts) is used only with the
        access key that opened it; for any other key it does not exist (404).
        Threat: a session id seen in a log or a proxy used with another key, to spend
        that session's budgets or read with its allowed hosts.
        Callers may rely on None for unknown, expired and foreign sessions alike.
        Proved by ``tests/gateway/mcp/test_sessions.py`` and
        ``tests/e2e/test_mcp.py::test_a_session_is_refused_with_another_key``.
        """
        session = self._sessions.get(session_id)
        if session is None or session.key != key:
            return None
        return session

    def enter(self, session: McpSession) -> None:
        """A request of ``session`` is being served (the session cannot expire)."""
        session.in_flight += 1

    def leave(self, session: McpSession) -> None:
        """A request of ``session`` ended; the idle time starts with the last one."""
        session.in_flight = max(0, session.in_flight - 1)
        if session.in_flight == 0:
            session.idle_since = self._clock()

    def close(self, session_id: str) -> McpSession | None:
        """Forget a session (ended by its client or by the gateway); return it if known."""
        return self._sessions.pop(session_id, None)

    def expired(self) -> list[McpSession]:
        """Forget and return the sessions idle for ``idle`` seconds or more."""
        now = self._clock()
        gone = [
            s
            for s in self._sessions.values()
            if s.in_flight == 0 and now - s.idle_since >= self._idle
        ]
        for session in gone:
            del self._sessions[session.session_id]
        return gone

    def until_next_expiry(self) -> float | None:
        """Seconds until the next idle session expires (None when none is idle)."""
        idle = [s.idle_since for s in self._sessions.values() if s.in_flight == 0]
        return max(0.0, min(idle) + self._idle - self._clock()) if idle else None

    def all(self) -> list[McpSession]:
        """Every open session."""
        return list(self._sessions.values())
