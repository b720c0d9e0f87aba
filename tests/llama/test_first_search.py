"""Every Web-on answer searches, on a real llama-server that ignores ``"required"`` (SPEC 3.2).

Measured before the gateway made its own first search (issue 21): on the Qwen2.5 tool
template, SmolLM2-135M answers in prose under ``tool_choice: "required"``; through the
gateway 3 Web-on answers in 4 contained no search at all, and the page showed an answer
from memory with Web on. Here ten answers in a row, to ten questions, through one gateway
(so what it learns about the engine after the first carries to the others), each with
the real research tools: SearXNG stand-in and fetcher service.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trustme

from gateway.settings import Budgets
from testkit.searxng import running_searxng
from tests.llama.conftest import GATEWAY_KEY, MODEL_TOOLS
from tests.llama.test_gateway_web import events_of, one_result_on, sse, text_of
from tests.llama.web import assert_turns_alternate, fixed_origin, web_body, web_gateway
from tests.llama.wire import TIMEOUT
from tests.support.fetcher_service import running_fetcher, socket_folder
from tests.support.fixtures import policy_for

AUTH = {"Authorization": f"Bearer {GATEWAY_KEY}"}

#: Questions whose answers change with time: what a model answering from memory gets wrong.
QUESTIONS = [
    "What does an RTX 5090 cost today?",
    "Who won the last Tour de France?",
    "What is the latest stable Rust release?",
    "What is the weather in Lisbon this week?",
    "Which Python version is newest?",
    "What changed in the latest Debian point release?",
    "How much is a litre of petrol in Germany now?",
    "What is the current Bitcoin price?",
    "Who leads the Premier League table?",
    "When is the next total solar eclipse in Europe?",
]


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False, headers=AUTH) as client:
        yield client


async def test_ten_web_answers_in_a_row_each_search_and_end_in_words(
    http: httpx.AsyncClient, llama_tools: str, ca: trustme.CA, client_ssl_context: ssl.SSLContext
) -> None:
    # One search in the budget keeps ten answers of a 135M model on a shared 2-core
    # machine to minutes: the gateway's search spends it, and the answer round follows
    # (SPEC 3.5). What is asserted does not depend on it: a search, a source, words.
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
            answers: list[list[Any]] = []
            for question in QUESTIONS:
                body = web_body(
                    MODEL_TOOLS,
                    [{"role": "user", "content": question}],
                    stream=True,
                    max_tokens=48,
                )
                answers.append(await sse(http, gateway.api, body))
            await gateway.recorder.settled()

    assert searxng.searches() == QUESTIONS  # the gateway's own search, each time
    for question, chunks in zip(QUESTIONS, answers, strict=True):
        events = events_of(chunks)
        searched = [e for e in events if e["type"] == "searched"]
        assert searched, question
        assert searched[0]["queries"] == [question]
        assert searched[0]["by"] == "gateway"
        assert searched[0]["error"] is None
        assert searched[0]["results"] == 1
        [sources] = [e for e in events if e["type"] == "sources"]
        assert address in [s["url"] for s in sources["sources"]], question
        # The answer ends in words, not in a call.
        text = text_of(chunks)
        assert text.strip(), question
        assert "<tool_call>" not in text
        assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
        assert chunks[-1] == "[DONE]"

    chats = gateway.recorder.chats
    # The first answer's round 1 under "required" wrote prose (held, never shown); the
    # engine is remembered, so each later answer starts with the gateway's search and
    # spends no round on "required": with the search budget spent, only answer rounds.
    held = chats[0]
    assert held.body["tool_choice"] == "required"
    assert not any(
        e["choices"][0]["delta"].get("tool_calls") for e in held.events() if e["choices"]
    )
    assert held.content().strip()
    assert held.content().strip()[:40] not in text_of(answers[0])
    assert all("tools" not in c.body for c in chats[1:])
    assert len(chats) >= 1 + len(QUESTIONS)
    assert all(c.status() == 200 for c in chats)
    assert_turns_alternate(chats)
