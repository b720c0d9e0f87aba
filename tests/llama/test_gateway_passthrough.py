"""The gateway as a real process in front of real llama-servers, Web switch off (SPEC 2, 4).

Pass-through must hand the engine's answer over as the engine wrote it: the same chunks
(llama-server's own fields such as `timings` included), usage chunks only when asked, and
the engine's error status and body unchanged, for the official `openai` client and for a
raw HTTP client. The gateway routes by model name to three llama-server instances (stock
template, no Jinja, the Qwen2.5 tool template) whose names it learns from their `/models`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from tests.llama.conftest import GATEWAY_KEY, MODEL, MODEL_NO_JINJA, MODEL_TOOLS
from tests.llama.test_llama_server import OVERFLOW, QUESTION
from tests.llama.wire import SAMPLING, WEB_SEARCH, call_block, post, repeat, stream

# The client's typed parameters, given as the plain JSON the tests share with the direct suite.
ASK: Any = QUESTION
TOO_LONG: Any = OVERFLOW
TOOLS: Any = [WEB_SEARCH]
CALL: Any = repeat(call_block("rust jobs"))


@pytest.fixture
def client(gateway_on_llama: str) -> Iterator[OpenAI]:
    with OpenAI(base_url=gateway_on_llama, api_key=GATEWAY_KEY, max_retries=0) as client:
        yield client


def _body(
    model: str, messages: list[dict[str, Any]], max_tokens: int, **extra: Any
) -> dict[str, Any]:
    return {"model": model, "messages": messages, "max_tokens": max_tokens, **SAMPLING, **extra}


def test_the_gateway_lists_the_models_each_engine_names(client: OpenAI) -> None:
    assert {model.id for model in client.models.list()} == {MODEL, MODEL_NO_JINJA, MODEL_TOOLS}


def test_a_whole_answer_reaches_the_openai_client_with_llama_fields_kept(client: OpenAI) -> None:
    answer = client.chat.completions.create(
        model=MODEL, messages=ASK, max_tokens=5, temperature=0, seed=7
    )
    assert answer.model == MODEL
    assert answer.choices[0].message.content
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage is not None
    assert answer.usage.completion_tokens == 5
    assert (answer.model_extra or {})["timings"]["predicted_n"] == 5


def test_a_stream_with_usage_reaches_the_openai_client_chunk_by_chunk(client: OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=ASK,
            max_tokens=5,
            temperature=0,
            seed=7,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    *answer, usage = chunks
    assert usage.choices == []
    assert usage.usage is not None
    assert usage.usage.completion_tokens == 5
    assert "".join(c.choices[0].delta.content or "" for c in answer)
    assert answer[-1].choices[0].finish_reason == "length"
    assert all(c.usage is None for c in answer)
    assert len({c.id for c in chunks}) == 1


def test_a_stream_without_usage_has_no_usage_chunk(gateway_on_llama: str) -> None:
    streamed = stream(gateway_on_llama, _body(MODEL, QUESTION, 5, stream=True), GATEWAY_KEY)
    assert streamed.status == 200
    assert streamed.content_type.startswith("text/event-stream")
    assert streamed.done
    assert all(event["choices"] for event in streamed.events)
    # The engine's own chunks, not rebuilt ones: its first delta and its timings are there.
    assert streamed.events[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert streamed.events[-1]["timings"]["predicted_n"] == 5
    assert streamed.events[-1]["system_fingerprint"].startswith("b")


def test_streamed_tool_calls_of_the_clients_own_tools_pass_through(client: OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model=MODEL_TOOLS,
            messages=CALL,
            tools=TOOLS,
            max_tokens=60,
            temperature=0,
            seed=7,
            stream=True,
        )
    )
    fragments = [
        call
        for chunk in chunks
        if chunk.choices
        for call in chunk.choices[0].delta.tool_calls or []
    ]
    assert fragments[0].index == 0
    assert fragments[0].function is not None
    assert fragments[0].function.name == "web_search"
    assert fragments[0].id
    assert not fragments[0].id.startswith("call_")
    arguments = "".join(f.function.arguments or "" for f in fragments if f.function)
    assert json.loads(arguments) == {"query": "rust jobs"}
    # Pass-through: the engine's finish reason, not the Web loop's "stop".
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("model", "extra"),
    [
        pytest.param(MODEL, {"messages": OVERFLOW}, id="context-overflow"),
        pytest.param(MODEL, {"messages": OVERFLOW, "stream": True}, id="context-overflow-stream"),
        pytest.param(MODEL, {"n": 2}, id="n-2"),
        pytest.param(
            MODEL_TOOLS, {"tools": [WEB_SEARCH], "tool_choice": "sometimes"}, id="bogus-tool-choice"
        ),
        pytest.param(MODEL_NO_JINJA, {"tools": [WEB_SEARCH]}, id="tools-without-jinja"),
    ],
)
def test_engine_errors_pass_through_with_status_and_body_unchanged(
    gateway_on_llama: str,
    llama_stock: str,
    llama_no_jinja: str,
    llama_tools: str,
    model: str,
    extra: dict[str, Any],
) -> None:
    engine = {MODEL: llama_stock, MODEL_NO_JINJA: llama_no_jinja, MODEL_TOOLS: llama_tools}[model]
    body = _body(model, QUESTION, 4) | extra
    direct = httpx.post(f"{engine}/chat/completions", json=body, timeout=60)
    through = post(gateway_on_llama, body, GATEWAY_KEY)
    assert direct.status_code >= 400
    assert through.status_code == direct.status_code
    assert through.content == direct.content
    assert through.headers["content-type"] == direct.headers["content-type"]


def test_the_openai_client_raises_the_engines_overflow_error(client: OpenAI) -> None:
    for streaming in (False, True):
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(
                model=MODEL,
                messages=TOO_LONG,
                max_tokens=4,
                stream=streaming,
            )
        assert caught.value.status_code == 400
        assert caught.value.response.json()["error"]["type"] == "exceed_context_size_error"


def test_an_unknown_model_is_a_404_at_the_gateway_though_the_engine_would_answer(
    client: OpenAI,
) -> None:
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=ASK, max_tokens=3)
