"""Keyless MCP sessions per client (issue 22, finding 9): a client at its limit gets a new
session in place of its oldest idle one, and cannot lock other clients out. Pure
decisions with a fake clock, then over HTTP against the real gateway."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry

from gateway.mcp.sessions import KEYLESS, McpSessions, Refusal, Ticket
from gateway.settings import Budgets, McpSettings
from testkit.engine import FakeEngine
from tests.e2e.mcp_client import RawSession
from tests.gateway.conftest import GatewayFactory, make_settings


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def table(per_client: int = 2, max_sessions: int = 8, clock: Clock | None = None) -> McpSessions:
    return McpSessions(
        per_key=0,
        max_sessions=max_sessions,
        idle=900.0,
        budgets=Budgets(),
        per_client=per_client,
        clock=clock or Clock(),
    )


def opened(sessions: McpSessions, client: str, session_id: str, key: int = KEYLESS) -> Ticket:
    ticket = sessions.reserve(key, client)
    assert isinstance(ticket, Ticket)
    sessions.open(ticket, session_id)
    return ticket


@pytest.mark.parametrize(
    ("open_before", "evicts"),
    [(0, False), (1, False), (2, True)],
    ids=["none-open", "one-below", "at-the-limit"],
)
def test_a_keyless_client_at_its_limit_gets_a_session_for_its_oldest_idle_one(
    open_before: int, evicts: bool
) -> None:
    clock = Clock()
    sessions = table(per_client=2, clock=clock)
    for n in range(open_before):
        opened(sessions, "192.0.2.1", f"s{n}")
        clock.now += 1
    ticket = sessions.reserve(KEYLESS, "192.0.2.1")
    assert isinstance(ticket, Ticket)
    if evicts:
        assert ticket.evicted is not None
        assert ticket.evicted.session_id == "s0"  # the oldest
        assert sessions.find("s0", KEYLESS) is None
    else:
        assert ticket.evicted is None
    assert sessions.count_client("192.0.2.1") == open_before + 1 - int(evicts)


def test_the_oldest_idle_is_the_one_idle_longest_not_the_first_opened() -> None:
    clock = Clock()
    sessions = table(per_client=2, clock=clock)
    opened(sessions, "192.0.2.1", "first")
    clock.now += 1
    second = opened(sessions, "192.0.2.1", "second")
    assert second.evicted is None
    first = sessions.find("first", KEYLESS)
    assert first is not None
    sessions.enter(first)  # a request of "first": its idle time starts again after it
    clock.now += 1
    sessions.leave(first)
    ticket = sessions.reserve(KEYLESS, "192.0.2.1")
    assert isinstance(ticket, Ticket)
    assert ticket.evicted is not None
    assert ticket.evicted.session_id == "second"


def test_a_client_whose_sessions_are_all_busy_is_refused() -> None:
    sessions = table(per_client=2)
    for name in ("a", "b"):
        opened(sessions, "192.0.2.1", name)
        session = sessions.find(name, KEYLESS)
        assert session is not None
        sessions.enter(session)
    assert sessions.reserve(KEYLESS, "192.0.2.1") is Refusal.CLIENT_LIMIT
    # A place being opened counts too, and is never evicted.
    other = sessions.reserve(KEYLESS, "192.0.2.2")
    assert isinstance(other, Ticket)
    assert isinstance(sessions.reserve(KEYLESS, "192.0.2.2"), Ticket)
    assert sessions.reserve(KEYLESS, "192.0.2.2") is Refusal.CLIENT_LIMIT


def test_a_client_never_evicts_another_clients_sessions() -> None:
    sessions = table(per_client=2, max_sessions=3)
    opened(sessions, "192.0.2.1", "a1")
    opened(sessions, "192.0.2.1", "a2")
    opened(sessions, "192.0.2.2", "b1")
    # The gateway is full: a client below its own limit is refused, nothing evicted.
    assert sessions.reserve(KEYLESS, "192.0.2.2") is Refusal.FULL
    assert len(sessions) == 3
    # A client at its limit makes room with its own session, even when the gateway is full.
    ticket = sessions.reserve(KEYLESS, "192.0.2.1")
    assert isinstance(ticket, Ticket)
    assert ticket.evicted is not None
    assert ticket.evicted.client == "192.0.2.1"
    assert sessions.find("b1", KEYLESS) is not None


def test_with_keys_sessions_are_counted_per_key_not_per_client() -> None:
    sessions = table(per_client=1)
    opened(sessions, "192.0.2.1", "k1", key=0)
    second = opened(sessions, "192.0.2.1", "k2", key=0)
    assert second.evicted is None
    assert sessions.count_client("192.0.2.1") == 0


# --- Over HTTP ------------------------------------------------------------------------------


async def test_a_keyless_client_flooding_initialize_locks_nobody_out(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    registry = CollectorRegistry()
    settings = make_settings(
        engine,
        api_keys=(),
        mcp=McpSettings(max_sessions=8, sessions_per_client=3),
        trusted_proxies=("127.0.0.1",),
    )
    async with gateway_at(settings=settings, registry=registry) as url:
        # One client (behind the trusted proxy, by its forwarded address) opens 20.
        flood = [RawSession(http, url, {"X-Forwarded-For": "198.51.100.9"}) for _ in range(20)]
        for session in flood:
            assert (await session.initialize()).status_code == 200
        # Another client still gets a session; the flood kept only its newest three.
        other = RawSession(http, url, {"X-Forwarded-For": "203.0.113.4"})
        assert (await other.initialize()).status_code == 200
        listed = await other.post(other.request("tools/list"))
        kept = [(await s.post(s.request("tools/list"))).status_code for s in flood]
        open_now = registry.get_sample_value("tigress_gateway_mcp_sessions")
    assert listed.status_code == 200
    assert kept == [404] * 17 + [200] * 3
    events = "tigress_gateway_mcp_session_events_total"
    assert registry.get_sample_value(events, {"event": "evicted"}) == 17
    assert open_now == 4
