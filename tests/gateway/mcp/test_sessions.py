"""MCP sessions as pure decisions: limits, key binding, idle expiry (a fake clock)."""

from __future__ import annotations

import pytest

from gateway.mcp.sessions import McpSessions, Refusal, Ticket
from gateway.settings import Budgets


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def sessions(per_key: int = 2, max_sessions: int = 4, clock: Clock | None = None) -> McpSessions:
    return McpSessions(
        per_key=per_key,
        max_sessions=max_sessions,
        idle=60.0,
        budgets=Budgets(searches=3, pages=5),
        clock=clock or Clock(),
    )


def opened(table: McpSessions, key: int, session_id: str) -> None:
    ticket = table.reserve(key)
    assert isinstance(ticket, Ticket)
    table.open(ticket, session_id)


def test_each_session_has_its_own_ledger_and_budgets_and_no_user_text() -> None:
    table = sessions()
    opened(table, 0, "a")
    opened(table, 0, "b")
    first, second = table.find("a", 0), table.find("b", 0)
    assert first is not None
    assert second is not None
    assert first.context.ledger is not second.context.ledger
    assert first.context.budgets is not second.context.budgets
    assert first.context.budgets.trailer() == "Searches used 0 of 3; pages read 0 of 5"
    assert first.context.user_text == ""


@pytest.mark.parametrize(
    ("open_before", "verdict"),
    [(0, "ticket"), (1, "ticket"), (2, Refusal.KEY_LIMIT)],
    ids=["none-open", "one-below", "at-the-limit"],
)
def test_a_key_opens_at_most_its_sessions(open_before: int, verdict: object) -> None:
    table = sessions(per_key=2)
    for n in range(open_before):
        opened(table, 7, f"s{n}")
    result = table.reserve(7)
    if verdict == "ticket":
        assert isinstance(result, Ticket)
    else:
        assert result is verdict
    assert isinstance(table.reserve(8), Ticket)  # another key is not affected


def test_openings_in_progress_count_against_the_limits() -> None:
    table = sessions(per_key=2, max_sessions=3)
    first, second = table.reserve(1), table.reserve(1)
    assert isinstance(first, Ticket)
    assert isinstance(second, Ticket)
    assert table.reserve(1) is Refusal.KEY_LIMIT
    table.release(first)
    assert isinstance(table.reserve(1), Ticket)
    assert isinstance(table.reserve(2), Ticket)
    assert table.reserve(3) is Refusal.FULL


def test_no_per_key_limit_when_it_is_zero_but_the_gateway_limit_holds() -> None:
    table = sessions(per_key=0, max_sessions=3)
    for n in range(3):
        opened(table, -1, f"s{n}")
    assert table.reserve(-1) is Refusal.FULL


@pytest.mark.parametrize(
    ("session_id", "key", "found"),
    [("a", 0, True), ("a", 1, False), ("a", -1, False), ("b", 0, False)],
    ids=["owner", "other-key", "no-key", "unknown"],
)
def test_a_session_exists_only_for_the_key_that_opened_it(
    session_id: str, key: int, found: bool
) -> None:
    table = sessions()
    opened(table, 0, "a")
    assert (table.find(session_id, key) is not None) is found


def test_a_session_expires_after_idle_seconds_without_a_request_in_flight() -> None:
    clock = Clock()
    table = sessions(clock=clock)
    opened(table, 0, "a")
    session = table.find("a", 0)
    assert session is not None
    clock.now += 59.9
    assert table.expired() == []
    table.enter(session)
    clock.now += 600  # a long request (an open GET stream) holds the session
    assert table.expired() == []
    assert table.until_next_expiry() is None
    table.leave(session)
    clock.now += 59.9
    assert table.expired() == []
    assert table.until_next_expiry() == pytest.approx(0.1)
    clock.now += 0.1
    assert table.expired() == [session]
    assert table.find("a", 0) is None
    assert len(table) == 0


def test_a_closed_session_is_gone_and_frees_its_place() -> None:
    table = sessions(per_key=1)
    opened(table, 0, "a")
    assert table.reserve(0) is Refusal.KEY_LIMIT
    assert table.close("a") is not None
    assert table.close("a") is None
    assert isinstance(table.reserve(0), Ticket)
