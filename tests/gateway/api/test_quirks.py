"""The engine quirks table (`gateway.api.quirks.QUIRKS`), row by row: each row's table test
shows the quirk recognised or normalised, and the standard form left as it is."""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import pytest

from gateway.api.chunks import CallFragment
from gateway.api.quirks import (
    PREAMBLE_LIMIT,
    QUIRKS,
    arguments_text,
    error_object,
    event_payloads,
    has_done,
    has_old_errors,
    history_arguments,
    is_blank_beside_calls,
    is_context_overflow,
    is_interim,
    is_old_error_field,
    joined_name,
    new_call_under_index,
    preamble_spent,
    refuses_required,
    repair_old_errors,
    starts_call_without_index,
    unwrap_arguments,
    with_parallel_calls,
    words_may_quote_request,
)
from gateway.engine.models import file_aliases
from gateway.errors import (
    EngineError,
    EngineStatusError,
    EngineStreamError,
    EngineTimeoutError,
    EngineUnreachableError,
)
from gateway.loop.calls import RawCall, ToolCallAssembler, vet_call
from gateway.loop.rounds import RequiredSupport, start
from gateway.loop.turn import RequiredMemory
from gateway.settings import EngineSettings

# The table itself.


def test_every_row_has_its_table_test() -> None:
    tests = [name for name in vars(sys.modules[__name__]) if name.startswith("test_")]
    untested = [q.name for q in QUIRKS if not any(t.startswith(f"test_{q.name}_") for t in tests)]
    assert untested == []


def test_rows_are_named_once_and_say_all_four_things() -> None:
    names = [q.name for q in QUIRKS]
    assert len(names) == len(set(names))
    assert all(q.engines and q.seen and q.gateway and q.handled_by for q in QUIRKS)


@pytest.mark.parametrize("quirk", QUIRKS, ids=lambda q: q.name)
def test_each_row_names_a_function_that_exists(quirk: Any) -> None:
    module, _, name = quirk.handled_by.rpartition(".")
    assert callable(getattr(importlib.import_module(module), name))


# One table test per row.


def test_old_error_field_becomes_a_standard_error_event() -> None:
    old = b'error: {"code":500,"message":"boom","type":"server_error"}\n\n'
    assert is_old_error_field("error")
    assert has_old_errors(old)
    fixed = repair_old_errors(old)
    assert fixed.startswith(b"data: ")
    payload = json.loads(fixed[len(b"data: ") :].split(b"\n")[0])
    assert payload == {"error": {"message": "boom", "type": "server_error", "code": 500}}
    assert fixed.endswith(b"\n\n")
    # Words that are not JSON keep their text.
    words = json.loads(repair_old_errors(b"error: out of memory\n\n")[6:].split(b"\n")[0])
    assert words["error"]["message"] == "out of memory"


@pytest.mark.parametrize(
    "events",
    [b'data: {"choices":[]}\n\n', b'data: {"error":{"message":"x"}}\n\n', b"data: [DONE]\n\n"],
    ids=["chunk", "standard-error", "done"],
)
def test_old_error_field_standard_events_are_left_as_they_are(events: bytes) -> None:
    assert not is_old_error_field("data")
    assert not has_old_errors(events)
    assert repair_old_errors(events) == events


@pytest.mark.parametrize(
    ("payload", "message", "error"),
    [
        (
            {"error": {"message": "m", "type": "t", "code": 1}},
            "m",
            {"message": "m", "type": "t", "code": 1},
        ),
        (
            {"code": 500, "message": "boom", "type": "server_error"},
            "boom",
            {"message": "boom", "type": "server_error", "code": 500},
        ),
        ({"error": "words"}, "words", {"message": "words", "type": "server_error", "code": None}),
        ("text", "text", {"message": "text", "type": "server_error", "code": None}),
        (
            {"error": {"type": 3}},
            "The model engine failed.",
            {"message": "The model engine failed.", "type": "server_error", "code": None},
        ),
    ],
    ids=["standard", "llama-bare", "string-error", "not-an-object", "no-message"],
)
def test_bare_error_every_form_becomes_the_openai_error_object(
    payload: object, message: str, error: dict[str, Any]
) -> None:
    assert error_object(payload) == (message, error)


@pytest.mark.parametrize(
    ("data", "payloads"),
    [
        ('{"a":1}', [{"a": 1}]),
        ("[DONE]", ["[DONE]"]),
        ('{"a":1}\n{"b":2}', [{"a": 1}, {"b": 2}]),
        ('{"a":1}\n[DONE]', [{"a": 1}, "[DONE]"]),
        ('{"a":1}\nnot json', [{"a": 1}]),
        ("not json", []),
    ],
    ids=["one", "done", "glued", "glued-done", "glued-junk", "junk"],
)
def test_glued_events_each_line_is_its_own_chunk(data: str, payloads: list[Any]) -> None:
    assert event_payloads(data) == payloads


@pytest.mark.parametrize(
    ("events", "done"),
    [
        (b"data: [DONE]\n\n", True),
        (b"data:[DONE]\n\n", True),
        (b'data: {"a":1}\n\ndata: [DONE]\n\n', True),
        (b'data: {"a":1}\n\n', False),
        (b'data: {"content":"[DONE]"}\n\n', False),
        (b'data: {"content":"data: [DONE]"}\n\n', False),
        (b'data: {"a":1}\r\n\r\ndata: [DONE]\r\n\r\n', True),
        (b"data: [DONE] and more\n\n", False),
        (b"data: [DONE] \n\n", True),
    ],
    ids=[
        "done",
        "done-no-space",
        "after-a-chunk",
        "missing",
        "in-text",
        "quoted",
        "crlf",
        "longer",
        "trailing-space",
    ],
)
def test_no_done_a_stream_without_its_end_is_seen(events: bytes, done: bool) -> None:
    assert has_done(events) is done


@pytest.mark.parametrize(
    ("status", "interim"),
    [(100, True), (103, True), (199, True), (200, False), (204, False), (404, False)],
)
def test_interim_1xx_answers_are_not_the_answer(status: int, interim: bool) -> None:
    assert is_interim(status) is interim


@pytest.mark.parametrize(
    ("kind", "code", "message", "overflow"),
    [
        ("exceed_context_size_error", 400, "request (2250 tokens) exceeds the", True),
        ("invalid_request_error", "context_length_exceeded", "too many tokens", True),
        ("BadRequestError", 400, "This model's maximum context length is 2048", True),
        ("", None, "the prompt is longer than the Context Window", True),
        ("", None, "request exceeds the available context size", True),
        ("invalid_request_error", 400, "tool_choice 'required' is not supported", False),
        ("invalid_request_error", None, "prompt too long", False),
        ("", {"a": [1]}, "an odd code", False),
    ],
    ids=[
        "llama-type",
        "openai-code",
        "vllm-words",
        "words-any-case",
        "llama-words",
        "refusal",
        "other-400",
        "unhashable-code",
    ],
)
def test_context_overflow_is_recognised_by_type_code_or_words(
    kind: str, code: object, message: str, overflow: bool
) -> None:
    assert is_context_overflow(kind, code, message) is overflow


@pytest.mark.parametrize(
    ("status", "kind", "code", "message", "refusal"),
    [
        (400, "invalid_request_error", 400, "tool_choice 'required' is not supported", True),
        (422, "", None, "Unprocessable", True),
        (400, "invalid_request_error", None, "prompt too long", True),
        (400, "exceed_context_size_error", 400, "request (2250 tokens) exceeds the", False),
        (400, "invalid_request_error", "context_length_exceeded", "too many tokens", False),
        (400, "BadRequestError", 400, "This model's maximum context length is 2048", False),
        (400, "", None, "the prompt is longer than the Context Window", False),
        (500, "server_error", 500, "tools param requires --jinja flag", False),
        (404, "", None, "not found", False),
        (400, "", {"a": [1]}, "an odd code", True),
    ],
    ids=[
        "400-refusal",
        "422",
        "400-other",
        "llama-overflow",
        "openai-overflow-code",
        "vllm-overflow-words",
        "overflow-words-any-case",
        "500",
        "404",
        "unhashable-code",
    ],
)
def test_required_refused_only_by_a_400_or_422_that_is_not_a_context_overflow(
    status: int, kind: str, code: object, message: str, refusal: bool
) -> None:
    assert refuses_required(status, kind, code, message) is refusal


@pytest.mark.parametrize(
    ("held", "spent"),
    [(0, False), (PREAMBLE_LIMIT, False), (PREAMBLE_LIMIT + 1, True), (5000, True)],
)
def test_required_ignored_a_preamble_is_given_up_past_the_limit(held: int, spent: bool) -> None:
    assert PREAMBLE_LIMIT == 600
    assert preamble_spent(held) is spent


@pytest.mark.parametrize(
    ("learnt", "search_first"),
    [
        (None, False),
        (RequiredSupport.HONOURED, False),
        (RequiredSupport.IGNORED, True),
        (RequiredSupport.REFUSED, True),
    ],
    ids=["unknown", "honoured", "ignored", "refused"],
)
def test_required_memory_is_per_engine_and_decides_how_answers_start(
    learnt: RequiredSupport | None, search_first: bool
) -> None:
    memory = RequiredMemory()
    engine, other = EngineSettings("http://a:1/v1"), EngineSettings("http://b:1/v1")
    if learnt is not None:
        memory.learn(engine, learnt)
    assert memory.get(engine) is (learnt or RequiredSupport.UNKNOWN)
    assert start(memory.get(engine)).search_due is search_first
    assert memory.get(other) is RequiredSupport.UNKNOWN


@pytest.mark.parametrize(
    ("fields", "sent"),
    [
        ({}, {"parallel_tool_calls": True}),
        ({"temperature": 0}, {"temperature": 0, "parallel_tool_calls": True}),
        ({"parallel_tool_calls": False}, {"parallel_tool_calls": False}),
        ({"parallel_tool_calls": True}, {"parallel_tool_calls": True}),
    ],
    ids=["unset", "other-fields", "client-false", "client-true"],
)
def test_parallel_off_tool_rounds_ask_for_parallel_calls_unless_the_client_chose(
    fields: dict[str, Any], sent: dict[str, Any]
) -> None:
    before = dict(fields)
    assert with_parallel_calls(fields) == sent
    assert fields == before


@pytest.mark.parametrize(
    ("text", "blank"),
    [("\n\n", True), (" \t\n", True), ("\n\nThe answer", False), ("x", False)],
)
def test_blank_beside_calls_only_whitespace_is_held(text: str, blank: bool) -> None:
    assert is_blank_beside_calls(text) is blank


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"query": "x"}, '{"query": "x"}'),
        ('{"query": "x"}', '{"query": "x"}'),
        ('{"query": ', '{"query": '),
        (None, ""),
        (3, ""),
    ],
    ids=["object", "text", "fragment", "absent", "number"],
)
def test_arguments_object_becomes_json_text(value: object, text: str) -> None:
    assert arguments_text(value) == text


@pytest.mark.parametrize(
    ("decoded", "unwrapped"),
    [
        ('{"query": "x"}', {"query": "x"}),
        ({"query": "x"}, {"query": "x"}),
        ("plain words", "plain words"),
        ([1], [1]),
        ("[" * 100_000, "[" * 100_000),
    ],
    ids=["double-encoded", "object", "a-string", "a-list", "too-deep"],
)
def test_double_encoded_arguments_are_decoded_once_more(decoded: Any, unwrapped: Any) -> None:
    assert unwrap_arguments(decoded) == unwrapped


@pytest.mark.parametrize(
    ("decoded", "text"),
    [({"query": "x"}, '{"query": "x"}'), ([1], "{}"), ("s", "{}"), (None, "{}")],
    ids=["object", "list", "string", "null"],
)
def test_history_object_past_calls_always_carry_an_object(decoded: Any, text: str) -> None:
    assert history_arguments(decoded) == text


def _calls(*fragments: CallFragment) -> list[tuple[str, str, str]]:
    assembler = ToolCallAssembler()
    for fragment in fragments:
        assembler.add(fragment)
    return [(c.call_id, c.name, str(c.arguments)) for c in assembler.calls()]


def test_missing_index_an_id_or_a_name_starts_a_call_else_the_last_goes_on() -> None:
    assert starts_call_without_index("call_1", "")
    assert starts_call_without_index("", "web_search")
    assert not starts_call_without_index("", "")
    assert _calls(
        CallFragment(None, "a", "web_search", '{"query":'),
        CallFragment(None, "", "", '"x"}'),
        CallFragment(None, "b", "fetch", "{}"),
    ) == [("a", "web_search", '{"query":"x"}'), ("b", "fetch", "{}")]


@pytest.mark.parametrize(
    ("known", "piece", "name"),
    [
        ("", "web_search", "web_search"),
        ("web_search", "web_search", "web_search"),
        ("web_", "search", "web_search"),
        ("web_search", "", "web_search"),
    ],
    ids=["first", "repeated", "in-pieces", "absent"],
)
def test_repeated_name_is_not_joined_again(known: str, piece: str, name: str) -> None:
    assert joined_name(known, piece) == name


@pytest.mark.parametrize(
    ("known", "call_id", "new"),
    [("a", "b", True), ("a", "a", False), ("", "b", False), ("a", "", False)],
    ids=["another-id", "same-id", "no-known-id", "no-id"],
)
def test_reused_index_another_id_starts_another_call(known: str, call_id: str, new: bool) -> None:
    assert new_call_under_index(known, call_id) is new


def test_reused_index_calls_numbered_0_stay_apart() -> None:
    assert _calls(
        CallFragment(0, "a", "web_search", "{}"),
        CallFragment(0, "b", "fetch", "{}"),
    ) == [("a", "web_search", "{}"), ("b", "fetch", "{}")]
    # The standard form: the id comes once, then fragments of the same call.
    assert _calls(CallFragment(0, "a", "web_search", "{"), CallFragment(0, "", "", "}")) == [
        ("a", "web_search", "{}")
    ]


def test_empty_call_id_gets_one_made_and_a_given_one_is_kept() -> None:
    made = vet_call(RawCall("", "web_search", "{}"), tools={}, seen=set()).call_id
    assert made.startswith("call_")
    assert len(made) > len("call_")
    assert vet_call(RawCall("Xy12", "web_search", "{}"), tools={}, seen=set()).call_id == "Xy12"


def test_path_model_names_get_file_name_aliases_and_plain_names_none() -> None:
    assert file_aliases(["/x/y/Model.Q4.gguf"]) == {
        "Model.Q4.gguf": "/x/y/Model.Q4.gguf",
        "Model.Q4": "/x/y/Model.Q4.gguf",
    }
    assert file_aliases(["qwen3"]) == {}


@pytest.mark.parametrize(
    ("error", "quotes"),
    [
        (EngineStatusError(400, None, "bad 'user text'", engine="e"), True),
        (EngineStreamError("bad 'user text'", engine="e"), True),
        (EngineTimeoutError("The model engine e did not answer in time.", engine="e"), False),
        (EngineUnreachableError("The model engine e cannot be reached.", engine="e"), False),
        (EngineError("The server at e answers, but not as an engine.", engine="e"), False),
    ],
    ids=["status", "stream", "timeout", "unreachable", "not-an-engine"],
)
def test_echoed_input_only_the_engines_own_words_are_kept_out_of_logs(
    error: EngineError, quotes: bool
) -> None:
    assert words_may_quote_request(error) is quotes
