"""What the user's text costs rule 1 (issue 22, finding 1): linear work, bounded memory.

The red team's inputs made `gateway.tools.fetch.addresses` quadratic: ``"https://" * N`` copied the
rest of the text once per scheme, and ``"https://a.example/" + ")" * N`` recounted the
token once per bracket. Nothing here is timed: the work is bounded structurally (the
address spans are disjoint, so each character is copied at most once, and each span's
end is found by one forward scan), and memory is measured with ``tracemalloc`` as the
input doubles. The ratios per doubling are in ``make bench BENCH=addresses``. And the
hosts are worked out once per answer, not once per read.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from types import FrameType
from typing import Any

import httpx
import pytest

from gateway.api.messages import parse_message
from gateway.engine.client import EngineClient
from gateway.loop.turn import ChatTurn, LoopOptions, RequiredMemory
from gateway.settings import Budgets, EngineSettings
from gateway.tools.base import ToolBox, ToolContext, ToolItem, ToolResult
from gateway.tools.fetch.addresses import (
    MAX_URL_CHARS,
    address_spans,
    addresses_in_text,
    hosts_in_text,
)
from gateway.tools.ledger import BudgetKind
from testkit.engine import FakeEngine, text_reply, tool_reply

#: The red team's inputs, by name: a text of about ``n`` characters.
HOSTILE: dict[str, Callable[[int], str]] = {
    "schemes": lambda n: "https://" * (n // 8),
    "closing-brackets": lambda n: "https://a.example/" + ")" * n,
    "opening-brackets": lambda n: "https://a.example/" + "(" * n + ")" * n,
    "www-names": lambda n: "www." * (n // 4),
    "schemes-then-brackets": lambda n: "https://" * (n // 16) + ")" * (n // 2),
    "trailing-dots": lambda n: "https://a.example" + "." * n,
    "many-hosts": lambda n: " ".join(f"https://h{i}.example/" for i in range(n // 20)),
}
SIZES = (64 * 1024, 128 * 1024)


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
@pytest.mark.parametrize("size", SIZES)
def test_address_spans_are_disjoint_so_copying_is_at_most_the_text(
    make: Callable[[int], str], size: int
) -> None:
    text = make(size)
    previous_end = 0
    copied = 0
    for start, end, _ in address_spans(text):
        assert previous_end <= start < end
        assert end - start <= MAX_URL_CHARS
        previous_end = end
        copied += end - start
    assert copied <= len(text)


def _c_calls(function: Callable[[], object]) -> Counter[str]:
    """How many times ``function`` called each builtin (``count``, ``search``...)."""
    calls: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            calls[getattr(arg, "__name__", "?")] += 1

    sys.setprofile(profile)
    try:
        function()
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_each_span_is_scanned_once_and_its_brackets_counted_once(
    make: Callable[[int], str],
) -> None:
    # With the spans disjoint (above), a bounded number of forward scans and bracket
    # counts per span means every character is read a bounded number of times: the
    # quadratic versions made one count per bracket and one scan per start of a run.
    text = make(64 * 1024)
    starts = text.count("http") + text.count("www.")  # at least as many as address starts
    calls = _c_calls(lambda: list(address_spans(text)))
    assert calls["search"] <= starts
    assert calls["count"] <= 2 * 4 * starts  # at most each kind of bracket, and its opener


def _peak(function: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_hosts_in_hostile_text_take_bounded_memory_as_the_input_doubles(
    make: Callable[[int], str],
) -> None:
    # The text itself is allocated before tracing starts: only the work is measured.
    small, large = make(128 * 1024), make(256 * 1024)
    peak_small = _peak(lambda: hosts_in_text(small))
    peak_large = _peak(lambda: hosts_in_text(large))
    # At most the hosts kept (1,000 of at most 253 characters) and one address at a time
    # (at most MAX_URL_CHARS), whatever the size of the text.
    bound = 1000 * 320 + 4 * MAX_URL_CHARS + 64 * 1024
    assert peak_small < bound
    assert peak_large < bound


def test_the_red_teams_sizes_allow_what_they_hold() -> None:
    # 160 KB of schemes and 120 KB of brackets: before, 6.7 s and 7.1 s on the event loop.
    assert hosts_in_text("https://" * 20_000) == []
    assert hosts_in_text("https://a.example/" + ")" * 120_000) == ["a.example"]


@pytest.mark.parametrize(
    ("text", "addresses"),
    [
        (
            "https://a.example/?u=https://b.example/",
            ["https://a.example/?u=", "https://b.example/"],
        ),
        ("see www.a.example/https://b.example.", ["https://www.a.example/", "https://b.example"]),
        ("https://https://x.example", ["https://", "https://x.example"]),
        ("https://a.example/(x)https://b.example)", ["https://a.example/(x)", "https://b.example"]),
    ],
    ids=["query-holds-an-address", "www-then-scheme", "doubled-scheme", "bracket-between"],
)
def test_an_address_ends_where_the_next_one_starts(text: str, addresses: list[str]) -> None:
    assert addresses_in_text(text) == addresses


@pytest.mark.parametrize(
    ("length", "taken"),
    [(MAX_URL_CHARS, True), (MAX_URL_CHARS + 1, False)],
    ids=["at-the-limit", "one-past"],
)
def test_an_address_longer_than_the_fetcher_takes_is_left_out(length: int, taken: bool) -> None:
    address = "https://a.example/" + "p" * (length - len("https://a.example/"))
    assert hosts_in_text(f"read {address}, please") == (["a.example"] if taken else [])


@pytest.mark.parametrize(
    ("length", "taken"),
    [(MAX_URL_CHARS, True), (MAX_URL_CHARS + 1, False)],
    ids=["at-the-limit", "one-past"],
)
def test_a_bare_www_name_is_counted_with_the_scheme_it_is_read_with(
    length: int, taken: bool
) -> None:
    written = "www.a.example/" + "p" * (length - len("https://www.a.example/"))
    assert hosts_in_text(f"read {written}, please") == (["www.a.example"] if taken else [])


def test_trailing_punctuation_past_the_limit_does_not_count() -> None:
    # Dots and unmatched brackets after an address are prose: they are dropped before the
    # length is judged, as before.
    assert hosts_in_text("https://a.example" + "." * (2 * MAX_URL_CHARS)) == ["a.example"]
    assert hosts_in_text("(https://a.example/" + ")" * (2 * MAX_URL_CHARS)) == ["a.example"]


class HostsProbe:
    """A tool that records the user hosts each call is given."""

    subject = None
    folded: frozenset[str] = frozenset()
    budget: BudgetKind | None = None

    def __init__(self) -> None:
        self.seen: list[tuple[str, ...]] = []

    @property
    def name(self) -> str:
        return "probe"

    @property
    def schema(self) -> dict[str, Any]:
        parameters = {"type": "object", "properties": {"n": {"type": "integer"}}}
        return {
            "type": "function",
            "function": {"name": "probe", "description": "Probe.", "parameters": parameters},
        }

    async def run(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> AsyncGenerator[ToolItem, None]:
        self.seen.append(context.user_hosts)
        yield ToolResult("probed")


@pytest.fixture
async def engines() -> AsyncIterator[EngineClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0), trust_env=False) as http:
        client = EngineClient(http)
        yield client
        client.close()


async def test_the_user_hosts_are_worked_out_once_per_answer(
    engine: FakeEngine, engines: EngineClient
) -> None:
    # Two rounds of two calls each: every call gets the very same tuple, made once when
    # the answer started, however long the user's text (not once per planned read).
    calls = [("probe", json.dumps({"n": n})) for n in range(2)]
    engine.script(
        tool_reply(*calls),
        tool_reply(*[("probe", json.dumps({"n": n})) for n in range(2, 4)]),
        text_reply("done"),
    )
    probe = HostsProbe()
    text = "read https://a.example/x and www.b.example, then " + "https://" * 20_000
    messages = [{"role": "user", "content": text}]
    turn = ChatTurn(
        client=engines,
        engine=EngineSettings(engine.url),
        messages=[parse_message(m, i) for i, m in enumerate(messages)],
        fields={"model": "test-model", "messages": messages},
        tools=ToolBox([probe]),
        memory=RequiredMemory(),
        options=LoopOptions(budgets=Budgets(), tool_timeout=5.0),
    )
    _ = [event async for event in turn.events()]
    assert len(probe.seen) == 4
    assert probe.seen[0] == ("a.example", "www.b.example")
    assert all(hosts is probe.seen[0] for hosts in probe.seen)
