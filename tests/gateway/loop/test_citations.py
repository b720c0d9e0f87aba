"""Checked citations (SPEC 4): what counts as ``[n]``, and the event after the answer."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry

from gateway.loop.citations import check_citations, citation_numbers
from gateway.tools.events import Citations
from testkit.engine import FakeEngine, text_reply, tool_reply
from tests.gateway.conftest import AUTH, FakeSearch, GatewayFactory
from tests.gateway.http.test_app import chat, content_of, events_of


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("Rust 1.90 shipped [1].", [1]),
        ("shipped[1].", [1]),
        ("[1][2]", [1, 2]),
        ("[1, 2] and [3;4]", [1, 2, 3, 4]),
        ("[ 2 ]", [2]),
        ("[1-3]", [1, 2, 3]),
        ("[1–3]", [1, 2, 3]),
        ("[1, 3-5]", [1, 3, 4, 5]),
        ("[1-50]", list(range(1, 51))),
        ("[1-51]", []),
        ("[3-1]", []),
        ("[9999]", [9999]),
        ("[10000]", []),
        ("[0]", []),
        ("[01]", []),
        ("[1, a]", []),
        ("[^1]", []),
        ("[1](https://example.org/)", []),
        ("[1]: https://example.org/", []),
        ("see [2]\n[1]: https://example.org/", [2]),
        ("`a[1]` and [2]", [2]),
        ("``a`[1]`` and [2]", [2]),
        ("`unclosed [1]", [1]),
        ("```\nx = a[1]\n```\n[3]", [3]),
        ("~~~python\na[1]\n~~~~\n[4]", [4]),
        ("   ```\na[1]\n   ```\n[5]", [5]),
        ("```\n[1]\n", []),
        ("```js `x` [1]", [1]),
        ("[1] then [1] again", [1, 1]),
    ],
)
def test_what_counts_as_a_citation(text: str, numbers: list[int]) -> None:
    assert citation_numbers(text) == numbers


def test_citations_are_split_into_known_and_unknown_each_once_ascending() -> None:
    assert check_citations("[3] [1] [7] [3] [2-3]", known=[1, 2, 3]) == Citations((1, 2, 3), (7,))
    assert check_citations("no sources", known=[1]) == Citations((), ())


async def test_the_answer_is_followed_by_its_checked_citations_and_never_rewritten(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(tool_reply(("web_search", '{"query": "rust"}')), text_reply("A [1]; B [7]."))
    registry = CollectorRegistry()
    async with gateway_at(tools=[FakeSearch()], registry=registry) as url:
        streamed = await http.post(
            f"{url}/v1/chat/completions",
            json=chat(thor_web_search=True, stream=True),
            headers=AUTH,
        )
        engine.script(tool_reply(("web_search", '{"query": "rust"}')), text_reply("A [1]; B [7]."))
        whole = await http.post(
            f"{url}/v1/chat/completions", json=chat(thor_web_search=True), headers=AUTH
        )
    events = events_of(streamed.text)
    assert content_of(events) == "A [1]; B [7]."
    chunks = [e for e in events if isinstance(e, dict)]
    kinds = [c["thor_event"]["type"] for c in chunks if "thor_event" in c]
    assert kinds == ["working", "searched", "working", "sources", "citations"]
    citations = next(c for c in chunks if c.get("thor_event", {}).get("type") == "citations")
    assert citations["thor_event"] == {"type": "citations", "cited": [1], "unknown": [7]}
    # The citations event comes right before the final chunk.
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-2] is citations
    assert whole.json()["thor_events"][-1] == citations["thor_event"]
    # A whole answer has no "working" events: they say what runs now.
    assert [e["type"] for e in whole.json()["thor_events"]] == ["searched", "sources", "citations"]
    assert whole.json()["choices"][0]["message"]["content"] == "A [1]; B [7]."
    assert registry.get_sample_value("tigress_gateway_unknown_citations_total") == 2
