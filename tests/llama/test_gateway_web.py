"""The Web switch in front of real llama-servers (SPEC 3): the loop against what the engine
really does.

SmolLM2-135M repeats a `<tool_call>` block it is shown, so a test can make it call a
tool: with the Qwen2.5 template llama-server parses the call into `tool_calls`; with the
model's own template (tools ignored) the call stays text and the gateway's filter reads
it (SPEC 4a). Each test runs its own gateway in this process, with a recorder between it
and the engine (`tests/llama/recorder.py`), so what was on the wire can be checked:
every round's messages alternate (`web.assert_turns_alternate`), and each tool result
answers its call. The assertions are on what the gateway does; the model's words are
asserted only where it repeats what it was given.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import trustme

from gateway import prompts
from gateway.api.quirks import PREAMBLE_LIMIT
from gateway.loop.rounds import TOOL_ROUND_MIN_TOKENS
from gateway.settings import Budgets
from testkit.origin import Origin, html
from testkit.searxng import Served, pointed_at, recorded, running_searxng
from tests.gateway.conftest import FakeSearch
from tests.llama.conftest import GATEWAY_KEY, MODEL, MODEL_NO_JINJA, MODEL_TOOLS
from tests.llama.test_llama_server import OVERFLOW, QUESTION
from tests.llama.web import assert_turns_alternate, fixed_origin, web_body, web_gateway
from tests.llama.wire import TIMEOUT, call_block, echo, tokens_predicted
from tests.support.fetcher_service import running_fetcher, socket_folder
from tests.support.fixtures import policy_for

AUTH = {"Authorization": f"Bearer {GATEWAY_KEY}"}


def hermes(name: str, arguments: dict[str, Any]) -> str:
    """A call as the Qwen2.5 template asks the model to write it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False, headers=AUTH) as client:
        yield client


async def sse(http: httpx.AsyncClient, api: str, body: dict[str, Any]) -> list[Any]:
    """A streamed Web answer: its `data:` objects, `[DONE]` last as a string."""
    out: list[Any] = []
    async with http.stream("POST", f"{api}/chat/completions", json=body) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                data = line[len("data: ") :]
                out.append(data if data == "[DONE]" else json.loads(data))
    return out


def text_of(chunks: list[Any]) -> str:
    return "".join(
        c["choices"][0]["delta"].get("content") or ""
        for c in chunks
        if isinstance(c, dict) and c.get("choices")
    )


def events_of(chunks: list[Any]) -> list[dict[str, Any]]:
    """The stream's tool events, without the ``working`` progress events between them."""
    events = [c["thor_event"] for c in chunks if isinstance(c, dict) and "thor_event" in c]
    return [e for e in events if e.get("type") != "working"]


def one_result_on(origin: Origin) -> tuple[Served, str]:
    """SearXNG's recorded answer cut to its first result, moved onto the origin; and that
    result's address."""
    served = pointed_at(recorded("search_normal.json"), {"": "origin.test"}, origin.port)
    document = json.loads(served.body)
    document["results"] = document["results"][:1]
    address = document["results"][0]["url"]
    return Served(200, served.content_type, json.dumps(document).encode()), address


# --- the main case: search, read, answer, with the real research tools ---------------------


async def test_search_read_and_answer_with_the_real_tools_on_the_tool_template(
    http: httpx.AsyncClient, llama_tools: str, ca: trustme.CA, client_ssl_context: ssl.SSLContext
) -> None:
    page = "<html><head><title>Descaling</title></head><body><main><h1>Descaling</h1>"
    page += "<p>Use citric acid, then rinse twice.</p></main></body></html>"
    with socket_folder() as folder:
        async with (
            fixed_origin(ca) as origin,
            running_searxng() as searxng,
            running_fetcher(
                folder, policy=policy_for(origin), ssl_context=client_ssl_context
            ) as fetcher,
            web_gateway(
                llama_tools,
                budgets=Budgets(searches=1),
                searxng_url=searxng.url,
                fetcher=(fetcher.target,),
            ) as gateway,
        ):
            searxng.default, address = one_result_on(origin)
            origin.routes[urlsplit(address).path] = html(page)
            # The model writes both calls in round 1, the page first (llama-server parses
            # them into tool_calls); they run at once, the page allowed because the user
            # wrote its address (rule 1). With one search in the budget, the tool rounds
            # end there and the answer round comes.
            ask = echo(
                hermes("fetch_page_content_recursive", {"url": address})
                + "\n"
                + hermes("web_search", {"query": "kettle descale"})
            )
            body = web_body(MODEL_TOOLS, ask, stream=True, max_tokens=32)
            chunks = await sse(http, gateway.api, body)
            await gateway.recorder.settled()
    events = events_of(chunks)
    assert sorted(e["type"] for e in events[:2]) == ["read", "searched"]
    assert [e["type"] for e in events[2:]] == ["sources", "citations"]
    assert searxng.searches() == ["kettle descale"]
    [searched] = [e for e in events if e["type"] == "searched"]
    [read] = [e for e in events if e["type"] == "read"]
    assert searched["queries"] == ["kettle descale"]
    assert (read["url"], read["ok"], read["title"]) == (address, True, "Descaling")
    assert [s["url"] for s in events[2]["sources"]] == [address]
    text = text_of(chunks)
    assert text.strip()
    assert "<tool_call>" not in text
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1] == "[DONE]"

    tool_round, answer_round = gateway.recorder.chats
    assert tool_round.body["tool_choice"] == "required"
    assert tool_round.body["parallel_tool_calls"] is True
    assert tool_round.body["max_tokens"] == TOOL_ROUND_MIN_TOKENS
    assert [t["function"]["name"] for t in tool_round.body["tools"]] == [
        "web_search",
        "fetch_page_content_recursive",
    ]
    assert "tools" not in answer_round.body
    assert answer_round.body["max_tokens"] == 32
    # The real template took the history: the assistant turn with both calls, a tool
    # result per call (the page text labelled untrusted), then ONE user turn.
    assert answer_round.status() == 200
    messages = answer_round.body["messages"]
    roles = [m["role"] for m in messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "tool", "tool", "user"]
    assert f"Untrusted text from {address}." in messages[5]["content"]
    assert messages[-1]["content"].startswith(prompts.SOURCES_HEADING)
    assert messages[-1]["content"].endswith(prompts.ANSWER_NOW)
    assert_turns_alternate(gateway.recorder.chats)


# --- calls the model writes, parsed by the loop ---------------------------------------------


async def test_a_call_written_as_text_on_the_stock_template_is_run_in_a_whole_answer(
    http: httpx.AsyncClient, llama_stock: str
) -> None:
    # Tools are not even in the stock template's prompt: the call stays text in the
    # engine's answer, and the gateway's filter (SPEC 4a) reads it and hides it.
    search = FakeSearch()
    async with web_gateway(llama_stock, tools=[search], budgets=Budgets(searches=1)) as gateway:
        body = web_body(MODEL, echo(call_block("rust jobs")), stream=False, max_tokens=24)
        response = await http.post(f"{gateway.api}/chat/completions", json=body)
        await gateway.recorder.settled()
    assert response.status_code == 200, response.text
    answer = response.json()
    assert search.calls == [{"query": "rust jobs"}]
    assert [e["type"] for e in answer["thor_events"]] == ["searched", "sources", "citations"]
    assert answer["choices"][0]["finish_reason"] == "stop"
    first, second = gateway.recorder.chats
    assert "<tool_call>" in first.content()
    assert "<tool_call>" not in answer["choices"][0]["message"]["content"]
    # The stock template took a history with an assistant tool call and a tool result.
    assert second.status() == 200
    assert [m["role"] for m in second.body["messages"]][-4:] == [
        "user", "assistant", "tool", "user"
    ]  # fmt: skip
    assert_turns_alternate(gateway.recorder.chats)


async def test_a_small_max_tokens_does_not_cut_a_call_in_a_tool_round(
    http: httpx.AsyncClient, llama_tools: str
) -> None:
    # A call takes the 135M model about 25 tokens; the client's 5 are for the answer.
    search = FakeSearch()
    async with web_gateway(llama_tools, tools=[search], budgets=Budgets(searches=1)) as gateway:
        body = web_body(MODEL_TOOLS, echo(call_block("rust jobs")), stream=False, max_tokens=5)
        response = await http.post(f"{gateway.api}/chat/completions", json=body)
        await gateway.recorder.settled()
    assert response.status_code == 200, response.text
    assert search.calls == [{"query": "rust jobs"}]
    tool_round, answer_round = gateway.recorder.chats
    assert tool_round.body["max_tokens"] == TOOL_ROUND_MIN_TOKENS
    finished = [e["choices"][0]["finish_reason"] for e in tool_round.events() if e["choices"]]
    assert finished[-1] == "tool_calls"
    assert answer_round.body["max_tokens"] == 5
    assert_turns_alternate(gateway.recorder.chats)


# --- round 1's "required", against engines that ignore it or honour it halfway -------------


async def test_the_stock_template_ignores_required_and_the_gateway_searches_itself(
    http: httpx.AsyncClient, llama_stock: str
) -> None:
    search = FakeSearch()
    async with web_gateway(llama_stock, tools=[search]) as gateway:
        # A prompt over the context first: a clear 400 at once, not a refusal of
        # "required" (no retry), and nothing learnt about the engine.
        for stream in (False, True):
            overflow = web_body(MODEL, OVERFLOW, stream=stream, max_tokens=8)
            response = await http.post(f"{gateway.api}/chat/completions", json=overflow)
            assert response.status_code == 400
            error = response.json()["error"]
            assert error["type"] == "exceed_context_size_error"
            assert "context size" in error["message"]
        assert [c.body["tool_choice"] for c in gateway.recorder.chats] == ["required"] * 2
        gateway.recorder.clear()

        first = await sse(http, gateway.api, web_body(MODEL, QUESTION, stream=True, max_tokens=16))
        await gateway.recorder.settled()
        held, retry = gateway.recorder.chats
        gateway.recorder.clear()
        again = await sse(http, gateway.api, web_body(MODEL, QUESTION, stream=True, max_tokens=16))
        await gateway.recorder.settled()
    # Round 1 ("required", ignored) wrote an answer the client never saw; the gateway
    # searched with the question itself (SPEC 3.2), and round 2 ("auto") wrote the one
    # shown, after the search's call and result.
    asked = QUESTION[0]["content"]
    assert search.calls == [{"query": asked}, {"query": asked}]
    assert held.body["tool_choice"] == "required"
    assert held.content().strip()
    assert retry.body["tool_choice"] == "auto"
    assert retry.body["messages"][0]["content"] == prompts.WEB_SYSTEM
    assert [m["role"] for m in retry.body["messages"]] == ["system", "user", "assistant", "tool"]
    assert retry.status() == 200  # the stock template took the gateway's call and result
    # What is shown is round 2's text (the 135M model may say the same words both times).
    assert text_of(first) == retry.content()
    searched = [e for e in events_of(first) if e["type"] == "searched"]
    assert [(e["queries"], e["by"]) for e in searched] == [([asked], "gateway")]
    # Learnt: the next answer starts with the gateway's search and round 1 under "auto".
    [only] = gateway.recorder.chats
    assert only.body["tool_choice"] == "auto"
    assert [m["role"] for m in only.body["messages"]] == ["system", "user", "assistant", "tool"]
    assert text_of(again) == only.content()
    assert_turns_alternate([held, retry, only])


async def test_a_required_preamble_on_the_tool_template_is_given_up_at_the_limit(
    http: httpx.AsyncClient, llama_tools: str
) -> None:
    # llama-server's "required" grammar lets free text come first and keeps the model
    # from stopping: without a bound the 135M model writes until its context is full,
    # while the client sees nothing. The loop gives up past PREAMBLE_LIMIT characters.
    search = FakeSearch()
    written_before = tokens_predicted(llama_tools)
    async with web_gateway(llama_tools, tools=[search]) as gateway:
        chunks = await sse(http, gateway.api, web_body(MODEL_TOOLS, QUESTION, stream=True))
        await gateway.recorder.settled()
    # llama-server stopped writing when the gateway closed the stream: the engine wrote
    # about a token per four characters shown, not the ~1,400 tokens left in its context.
    assert tokens_predicted(llama_tools) - written_before < PREAMBLE_LIMIT
    held, retry = gateway.recorder.chats
    assert held.body["tool_choice"] == "required"
    assert "max_tokens" not in held.body
    assert held.hung_up
    assert PREAMBLE_LIMIT < len(held.content()) < PREAMBLE_LIMIT + 200
    assert not any(e["choices"][0].get("finish_reason") for e in held.events() if e["choices"])
    # The held preamble is dropped; the gateway searched itself, then asked with "auto".
    assert search.calls == [{"query": QUESTION[0]["content"]}]
    assert retry.body["tool_choice"] == "auto"
    assert held.content()[:40] not in json.dumps(retry.body["messages"])
    assert text_of(chunks) == retry.content()
    assert chunks[-1] == "[DONE]"
    assert_turns_alternate([held, retry])


# --- engine errors under the Web switch ------------------------------------------------------


async def test_the_web_switch_on_an_engine_without_jinja_is_one_clear_500(
    http: httpx.AsyncClient, llama_no_jinja: str
) -> None:
    async with web_gateway(llama_no_jinja, tools=[FakeSearch()]) as gateway:
        for stream in (False, True):
            body = web_body(MODEL_NO_JINJA, QUESTION, stream=stream, max_tokens=8)
            response = await http.post(f"{gateway.api}/chat/completions", json=body)
            assert response.status_code == 500
            assert response.json()["error"]["message"] == "tools param requires --jinja flag"
        await gateway.recorder.settled()
    # Not retried: a 500 is not a refusal of "required".
    assert [c.body["tool_choice"] for c in gateway.recorder.chats] == ["required", "required"]
