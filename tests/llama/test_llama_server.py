"""What the real llama-server does, pinned: the engine behaviours Tigress relies on or works around.

Each test talks to a real llama-server (built by `make llama-server`) running the
SmolLM2-135M-Instruct model with greedy decoding. The assertions are on shapes, status
codes and error bodies, not on the model's words, except where the model only repeats
what it was given. When a llama.cpp upgrade changes one of these, the failing test names
the behaviour, and README.md's "Engine notes" says what in the gateway depends on it.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.llama.build import ReadyPaths, try_command
from tests.llama.conftest import CONTEXT, MODEL, MODEL_TOOLS
from tests.llama.processes import clean_environ, serving
from tests.llama.wire import SAMPLING, WEB_SEARCH, call_block, post, repeat, stream

#: A question the model answers in words when it may choose.
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
#: Longer than the context every instance runs with (one token per word and more).
OVERFLOW = [{"role": "user", "content": "word " * (CONTEXT + 200)}]


def _body(
    model: str, messages: list[dict[str, Any]], max_tokens: int, **extra: Any
) -> dict[str, Any]:
    return {"model": model, "messages": messages, "max_tokens": max_tokens, **SAMPLING, **extra}


def _error(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"].startswith("application/json")
    error: dict[str, Any] = response.json()["error"]
    return error


# --- the stock template (SmolLM2's own, which knows nothing of tools) -----------------------


def test_stock_template_leaves_tools_out_of_the_prompt(llama_stock: str) -> None:
    root = llama_stock.removesuffix("/v1")
    with_tools = httpx.post(
        f"{root}/apply-template", json={"messages": QUESTION, "tools": [WEB_SEARCH]}, timeout=30
    )
    without = httpx.post(f"{root}/apply-template", json={"messages": QUESTION}, timeout=30)
    assert with_tools.status_code == 200
    assert with_tools.json()["prompt"] == without.json()["prompt"]
    assert "web_search" not in with_tools.json()["prompt"]


def test_stock_template_ignores_tools_even_when_a_call_is_required(llama_stock: str) -> None:
    # The model writes the call as text; nothing parses it, and "required" changes nothing.
    for choice in ("auto", "required"):
        body = _body(
            MODEL, repeat(call_block("rust jobs")), 40, tools=[WEB_SEARCH], tool_choice=choice
        )
        response = post(llama_stock, body)
        assert response.status_code == 200, response.text
        choice_0 = response.json()["choices"][0]
        assert "tool_calls" not in choice_0["message"]
        assert choice_0["finish_reason"] in {"stop", "length"}
        assert "<tool_call>" in choice_0["message"]["content"]


def test_without_jinja_tools_are_a_500_naming_the_flag(llama_no_jinja: str) -> None:
    response = post(llama_no_jinja, _body(MODEL, QUESTION, 4, tools=[WEB_SEARCH]))
    assert response.status_code == 500
    assert _error(response) == {
        "code": 500,
        "message": "tools param requires --jinja flag",
        "type": "server_error",
    }
    response = post(llama_no_jinja, _body(MODEL, QUESTION, 4, tool_choice="required"))
    assert response.status_code == 500
    assert _error(response)["message"] == "tool_choice param requires --jinja flag"


# --- a tool-capable template (Qwen2.5's, from the sdist) --------------------------------------


def test_a_call_comes_back_parsed_with_an_id_without_the_call_prefix(llama_tools: str) -> None:
    response = post(
        llama_tools, _body(MODEL_TOOLS, repeat(call_block("rust jobs")), 60, tools=[WEB_SEARCH])
    )
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == ""
    [call] = choice["message"]["tool_calls"]
    assert call["type"] == "function"
    assert call["function"]["name"] == "web_search"
    assert json.loads(call["function"]["arguments"]) == {"query": "rust jobs"}
    assert call["id"]
    assert not call["id"].startswith("call_")


def test_a_streamed_call_opens_with_id_name_and_a_brace_then_sends_only_arguments(
    llama_tools: str,
) -> None:
    body = _body(MODEL_TOOLS, repeat(call_block("rust jobs")), 60, tools=[WEB_SEARCH], stream=True)
    streamed = stream(llama_tools, body)
    assert streamed.status == 200
    assert streamed.done
    first, *rest = streamed.tool_call_fragments()
    assert first == {
        "index": 0,
        "id": first["id"],
        "type": "function",
        "function": {"name": "web_search", "arguments": "{"},
    }
    assert not first["id"].startswith("call_")
    assert rest
    assert all(
        set(f) == {"index", "function"} and set(f["function"]) == {"arguments"} for f in rest
    )
    arguments = "".join(f["function"]["arguments"] for f in [first, *rest])
    assert json.loads(arguments) == {"query": "rust jobs"}
    assert streamed.finish_reason() == "tool_calls"


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "not-parallel"])
def test_two_streamed_calls_come_as_index_0_then_index_1_even_without_parallel_calls(
    llama_tools: str, parallel: bool
) -> None:
    # parallel_tool_calls defaults to false, and false does not stop a second call with
    # this template on this build; the gateway sends true (SPEC 3.3) for engines that
    # honour it.
    calls = call_block("rust jobs") + "\n" + call_block("go jobs")
    body = _body(
        MODEL_TOOLS,
        repeat(calls),
        80,
        tools=[WEB_SEARCH],
        parallel_tool_calls=parallel,
        stream=True,
    )
    fragments = stream(llama_tools, body).tool_call_fragments()
    indexes = [f["index"] for f in fragments]
    assert indexes == sorted(indexes)
    assert set(indexes) == {0, 1}
    openers = [f for f in fragments if "id" in f]
    assert [f["index"] for f in openers] == [0, 1]
    assert openers[0]["id"] != openers[1]["id"]
    for index in (0, 1):
        joined = "".join(f["function"]["arguments"] for f in fragments if f["index"] == index)
        assert set(json.loads(joined)) == {"query"}


def test_a_call_cut_by_max_tokens_streams_as_a_call_whose_arguments_are_not_json(
    llama_tools: str,
) -> None:
    # Why the gateway's tool rounds ask for at least TOOL_ROUND_MIN_TOKENS: a limit meant
    # for the answer cuts a call, and what arrives is a call the loop cannot run.
    body = _body(MODEL_TOOLS, repeat(call_block("rust jobs")), 20, tools=[WEB_SEARCH], stream=True)
    streamed = stream(llama_tools, body)
    fragments = streamed.tool_call_fragments()
    assert fragments[0]["function"]["name"] == "web_search"
    arguments = "".join(f["function"]["arguments"] for f in fragments)
    assert arguments.startswith('{"query":')
    with pytest.raises(json.JSONDecodeError):
        json.loads(arguments)
    assert streamed.finish_reason() == "length"


def test_required_is_half_enforced_a_preamble_can_run_to_the_length_limit(
    llama_tools: str,
) -> None:
    # The grammar lets free text come before the call; a small model talks until max_tokens.
    body = _body(MODEL_TOOLS, QUESTION, 20, tools=[WEB_SEARCH], tool_choice="required")
    response = post(llama_tools, body)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert "tool_calls" not in choice["message"]
    assert choice["message"]["content"]


def test_a_named_tool_choice_is_accepted_and_ignored(llama_tools: str) -> None:
    named = {"type": "function", "function": {"name": "web_search"}}
    auto = post(
        llama_tools, _body(MODEL_TOOLS, QUESTION, 10, tools=[WEB_SEARCH], tool_choice="auto")
    )
    forced = post(
        llama_tools, _body(MODEL_TOOLS, QUESTION, 10, tools=[WEB_SEARCH], tool_choice=named)
    )
    assert forced.status_code == 200, forced.text
    message = forced.json()["choices"][0]["message"]
    assert "tool_calls" not in message
    assert message == auto.json()["choices"][0]["message"]


def test_a_bogus_tool_choice_string_is_a_400(llama_tools: str, llama_stock: str) -> None:
    for base, model in ((llama_tools, MODEL_TOOLS), (llama_stock, MODEL)):
        response = post(
            base, _body(model, QUESTION, 4, tools=[WEB_SEARCH], tool_choice="sometimes")
        )
        assert response.status_code == 400
        assert _error(response) == {
            "code": 400,
            "message": "Invalid tool_choice: sometimes",
            "type": "invalid_request_error",
        }


def test_the_tool_template_renders_a_tool_result_as_a_user_turn(llama_tools: str) -> None:
    history = [
        {"role": "user", "content": "Find rust jobs."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "abc",
                    "type": "function",
                    "function": {"name": "web_search", "arguments": '{"query": "rust jobs"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "abc", "content": "[1] Rust jobs in Berlin"},
    ]
    response = httpx.post(
        llama_tools.removesuffix("/v1") + "/apply-template",
        json={"messages": history, "tools": [WEB_SEARCH]},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    prompt = response.json()["prompt"]
    assert "<|im_start|>user\n<tool_response>\n[1] Rust jobs in Berlin\n</tool_response>" in prompt


# --- protocol, whatever the template ----------------------------------------------------------


def test_an_unknown_model_name_is_answered_by_the_loaded_model(llama_stock: str) -> None:
    response = post(llama_stock, _body("gpt-4o", QUESTION, 3))
    assert response.status_code == 200, response.text
    assert response.json()["model"] == MODEL


def test_context_overflow_is_a_plain_json_400_even_when_streaming(llama_stock: str) -> None:
    plain = post(llama_stock, _body(MODEL, OVERFLOW, 4))
    streamed = stream(llama_stock, _body(MODEL, OVERFLOW, 4, stream=True))
    assert plain.status_code == streamed.status == 400
    assert streamed.content_type.startswith("application/json")
    assert json.loads(streamed.raw) == plain.json()
    error = _error(plain)
    assert error["type"] == "exceed_context_size_error"
    assert error["code"] == 400
    assert error["n_ctx"] == CONTEXT
    assert error["n_prompt_tokens"] > CONTEXT


def test_n_2_is_a_400_with_one_slot(llama_stock: str) -> None:
    response = post(llama_stock, _body(MODEL, QUESTION, 3, n=2))
    assert response.status_code == 400
    error = _error(response)
    assert error["type"] == "invalid_request_error"
    assert "'n'" in error["message"]


def test_include_usage_adds_a_chunk_with_no_choices_and_timings(llama_stock: str) -> None:
    body = _body(MODEL, QUESTION, 5, stream=True, stream_options={"include_usage": True})
    streamed = stream(llama_stock, body)
    assert streamed.done
    *chunks, last = streamed.events
    assert last["choices"] == []
    usage = last["usage"]
    assert usage["completion_tokens"] == 5
    assert usage["total_tokens"] == usage["prompt_tokens"] + 5
    assert "timings" in last
    # Unlike OpenAI, the other chunks carry no `"usage": null`.
    assert all("usage" not in chunk and chunk["choices"] for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_timings_ride_on_the_last_chunk_and_the_whole_answer(llama_stock: str) -> None:
    streamed = stream(llama_stock, _body(MODEL, QUESTION, 5, stream=True))
    assert streamed.events[-1]["choices"][0]["finish_reason"] == "length"
    assert streamed.events[-1]["timings"]["predicted_n"] == 5
    answer = post(llama_stock, _body(MODEL, QUESTION, 5)).json()
    assert answer["timings"]["predicted_n"] == answer["usage"]["completion_tokens"] == 5


def test_the_command_make_llama_server_prints_serves_the_tool_model(
    llama_build: ReadyPaths, tmp_path: Path
) -> None:
    # What docs/llama-server.md tells a newcomer to run before `make run`.
    argv = shlex.split(try_command(llama_build, port="{port}"))
    with serving(argv, health="/health", env=clean_environ(), log=tmp_path / "try.log") as up:
        models = httpx.get(f"{up.url}/v1/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == ["smollm2-tools"]
