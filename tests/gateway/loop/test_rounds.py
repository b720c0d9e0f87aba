"""The loop's round rules, one by one (pure code, no engine)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from gateway import prompts
from gateway.api.chunks import CallFragment, parse_chunk
from gateway.loop.calls import CallVerdict as Verdict
from gateway.loop.calls import RawCall, ToolCallAssembler, call_key, vet_call
from gateway.loop.rounds import (
    MAX_ANSWER_ROUNDS,
    MAX_TOOL_ROUNDS,
    LoopState,
    Phase,
    RequiredSupport,
    RoundOutcome,
    Step,
    after_calls,
    after_round,
    next_round,
    refused_required,
    round_fields,
    searched_first,
    start,
)
from gateway.tools.base import CallShape


def frag(raw: dict[str, Any]) -> CallFragment:
    """One ``delta.tool_calls`` element, parsed at the edge as the engine client does."""
    return parse_chunk({"choices": [{"delta": {"tool_calls": [raw]}}]}).calls[0]


#: What vetting knows of the two tools, as each tool declares it (`gateway.tools.base.CallShape`).
TOOLS = {
    "web_search": CallShape(("query",), "query", frozenset({"query", "queries"})),
    "fetch": CallShape(("url",), "url"),
}
SEARCH_FOLDED = TOOLS["web_search"].folded


def test_fragments_are_joined_by_index_even_when_interleaved() -> None:
    assembler = ToolCallAssembler()
    assembler.add(
        frag({"index": 0, "id": "a", "function": {"name": "web_search", "arguments": ""}})
    )
    assembler.add(frag({"index": 1, "id": "b", "function": {"name": "fetch", "arguments": '{"u'}}))
    assembler.add(frag({"index": 0, "function": {"arguments": '{"query": '}}))
    assembler.add(frag({"index": 1, "function": {"arguments": 'rl": "x"}'}}))
    assembler.add(frag({"index": 0, "function": {"arguments": '"rust"}'}}))
    assert assembler.calls() == [
        RawCall("a", "web_search", '{"query": "rust"}'),
        RawCall("b", "fetch", '{"url": "x"}'),
    ]


def test_fragments_without_index_continue_the_last_call() -> None:
    assembler = ToolCallAssembler()
    assembler.add(frag({"id": "a", "function": {"name": "web_search", "arguments": '{"q'}}))
    assembler.add(frag({"function": {"arguments": 'uery": "x"}'}}))
    assembler.add(frag({"id": "b", "function": {"name": "fetch", "arguments": "{}"}}))
    calls = assembler.calls()
    assert [(c.name, c.arguments) for c in calls] == [
        ("web_search", '{"query": "x"}'),
        ("fetch", "{}"),
    ]


def test_a_new_id_under_a_used_index_starts_a_new_call() -> None:
    # Some engines number every call 0; the id tells the calls apart.
    assembler = ToolCallAssembler()
    assembler.add(frag({"index": 0, "id": "a", "function": {"name": "web_search"}}))
    assembler.add(frag({"index": 0, "function": {"arguments": '{"query": "x"}'}}))
    assembler.add(frag({"index": 0, "id": "b", "function": {"name": "fetch"}}))
    assembler.add(frag({"index": 0, "id": "b", "function": {"arguments": '{"url": "u"}'}}))
    assert assembler.calls() == [
        RawCall("a", "web_search", '{"query": "x"}'),
        RawCall("b", "fetch", '{"url": "u"}'),
    ]


def test_a_name_repeated_on_every_fragment_is_kept_once() -> None:
    assembler = ToolCallAssembler()
    assembler.add(frag({"index": 0, "function": {"name": "fetch", "arguments": "{"}}))
    assembler.add(frag({"index": 0, "function": {"name": "fetch", "arguments": "}"}}))
    assert assembler.calls() == [RawCall("", "fetch", "{}")]


def test_empty_call_ids_are_replaced_by_generated_ones() -> None:
    seen: set[str] = set()
    first = vet_call(RawCall("", "web_search", '{"query": "a"}'), tools=TOOLS, seen=seen)
    second = vet_call(RawCall("", "web_search", '{"query": "b"}'), tools=TOOLS, seen=seen)
    assert first.call_id.startswith("call_")
    assert first.call_id != second.call_id


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"query": "Rust jobs"}, {"query": "  rust   JOBS "}),
        ({"query": "x", "time_range": "week"}, {"time_range": "week", "query": "x"}),
        ({"url": " https://a.example/ "}, {"url": "https://a.example/"}),
        ({"query": "x", "queries": ["A b"]}, {"query": "x", "queries": ["a  B"]}),
    ],
    ids=["query-case-and-space", "key-order", "trimmed-strings", "sub-queries-folded"],
)
def test_normalised_arguments_make_the_same_key(a: dict[str, object], b: dict[str, object]) -> None:
    assert call_key("web_search", a, SEARCH_FOLDED) == call_key("web_search", b, SEARCH_FOLDED)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"url": "https://a.example/X"}, {"url": "https://a.example/x"}),
        ({"query": "rust"}, {"query": "rust jobs"}),
    ],
    ids=["url-case-kept", "different-query"],
)
def test_different_calls_have_different_keys(a: dict[str, object], b: dict[str, object]) -> None:
    assert call_key("fetch", a) != call_key("fetch", b)


def test_a_repeated_call_is_not_run_and_the_model_is_told() -> None:
    seen: set[str] = set()
    first = vet_call(
        RawCall("1", "web_search", '{"query": "Rust"}'),
        tools=TOOLS,
        seen=seen,
    )
    again = vet_call(
        RawCall("2", "web_search", '{"query": " rust"}'),
        tools=TOOLS,
        seen=seen,
    )
    assert first.verdict is Verdict.RUN
    assert again.verdict is Verdict.DUPLICATE
    assert again.message == prompts.DUPLICATE_CALL.format(scope="answer")


@pytest.mark.parametrize(
    ("raw", "verdict", "words"),
    [
        (
            RawCall("1", "web_search", '{"query": '),
            Verdict.BAD_ARGUMENTS,
            "not a valid JSON object",
        ),
        (RawCall("1", "web_search", "[1, 2]"), Verdict.BAD_ARGUMENTS, "not an object"),
        (
            RawCall("1", "shell", '{"cmd": "ls"}'),
            Verdict.UNKNOWN_TOOL,
            "There is no tool named shell",
        ),
        (RawCall("1", "web_search", '{"queries": ["a"]}'), Verdict.MISSING_ARGUMENTS, "query"),
    ],
    ids=["cut-json", "array", "unknown-tool", "missing-required"],
)
def test_calls_that_cannot_run_say_what_was_wrong(
    raw: RawCall, verdict: Verdict, words: str
) -> None:
    vetted = vet_call(raw, tools=TOOLS, seen=set())
    assert vetted.verdict is verdict
    assert words in vetted.message


def test_double_encoded_arguments_are_decoded() -> None:
    vetted = vet_call(
        RawCall("1", "web_search", '"{\\"query\\": \\"x\\"}"'),
        tools=TOOLS,
        seen=set(),
    )
    assert vetted.verdict is Verdict.RUN
    assert vetted.arguments == {"query": "x"}
    assert vetted.arguments_text == '{"query": "x"}'


@pytest.mark.parametrize(
    ("arguments", "verdict"),
    [
        ('{"query": "x', Verdict.BAD_ARGUMENTS),
        ('"just a string"', Verdict.BAD_ARGUMENTS),
        ("[1, 2]", Verdict.BAD_ARGUMENTS),
        ("", Verdict.MISSING_ARGUMENTS),
    ],
    ids=["cut-off", "string", "array", "empty"],
)
def test_history_always_carries_an_object_for_the_engine_to_re_parse(
    arguments: str, verdict: Verdict
) -> None:
    vetted = vet_call(RawCall("1", "web_search", arguments), tools=TOOLS, seen=set())
    assert vetted.verdict is verdict
    assert isinstance(json.loads(vetted.arguments_text), dict)


def test_text_calls_arrive_decoded() -> None:
    vetted = vet_call(RawCall("", "fetch", {"url": "https://a/"}), tools=TOOLS, seen=set())
    assert vetted.verdict is Verdict.RUN
    assert vetted.arguments_text == '{"url": "https://a/"}'


# --- Round plans ------------------------------------------------------------------------


def test_round_one_is_required_then_auto() -> None:
    state = start(RequiredSupport.UNKNOWN)
    assert not state.search_due
    plan = next_round(state, RequiredSupport.UNKNOWN)
    assert (plan.offer_tools, plan.tool_choice, plan.hold_text) == (True, "required", True)
    advance = after_round(state, plan, RoundOutcome(calls=1, malformed=0, has_text=False))
    assert (advance.step, advance.learnt) == (Step.RUN_CALLS, RequiredSupport.HONOURED)
    assert not advance.state.search_due
    assert next_round(advance.state, RequiredSupport.HONOURED).tool_choice == "auto"


@pytest.mark.parametrize("support", [RequiredSupport.REFUSED, RequiredSupport.IGNORED])
def test_an_engine_known_to_fail_required_starts_with_the_gateways_search_then_auto(
    support: RequiredSupport,
) -> None:
    state = start(support)
    assert state.search_due
    state = searched_first(state, tools_spent=False)
    assert (state.search_due, state.tool_rounds, state.phase) == (False, 0, Phase.TOOLS)
    plan = next_round(state, support)
    assert (plan.tool_choice, plan.hold_text) == ("auto", False)


def test_an_engine_that_ignores_required_gets_the_gateways_search_then_round_two() -> None:
    state = start(RequiredSupport.UNKNOWN)
    plan = next_round(state, RequiredSupport.UNKNOWN)
    assert plan.hold_text
    advance = after_round(state, plan, RoundOutcome(calls=0, malformed=0, has_text=True))
    assert (advance.step, advance.learnt) == (Step.SEARCH_FIRST, RequiredSupport.IGNORED)
    assert (advance.state.search_due, advance.state.tool_rounds) == (True, 1)
    state = searched_first(advance.state, tools_spent=False)
    second = next_round(state, RequiredSupport.IGNORED)
    assert (second.tool_choice, second.hold_text) == ("auto", False)
    advance = after_round(state, second, RoundOutcome(calls=0, malformed=0, has_text=True))
    assert advance.step is Step.FINISH
    assert advance.state.phase is Phase.DONE


def test_the_gateways_search_spending_the_budget_starts_the_answer_rounds() -> None:
    state = searched_first(start(RequiredSupport.IGNORED), tools_spent=True)
    assert state.phase is Phase.ANSWER
    plan = next_round(state, RequiredSupport.IGNORED)
    assert (plan.offer_tools, plan.announce_answer) == (False, True)


def test_every_required_round_holds_its_text_even_once_the_engine_honoured_it() -> None:
    for support in (RequiredSupport.UNKNOWN, RequiredSupport.HONOURED):
        plan = next_round(LoopState(), support)
        assert (plan.tool_choice, plan.hold_text) == ("required", True)
        advance = after_round(LoopState(), plan, RoundOutcome(0, 0, has_text=True))
        assert (advance.step, advance.learnt) == (Step.SEARCH_FIRST, RequiredSupport.IGNORED)


def test_a_malformed_call_in_round_one_counts_as_a_call() -> None:
    # The model tried to call: it is told its call was malformed, and writes it again.
    plan = next_round(LoopState(), RequiredSupport.UNKNOWN)
    advance = after_round(LoopState(), plan, RoundOutcome(calls=0, malformed=1, has_text=False))
    assert (advance.step, advance.learnt) == (Step.RUN_CALLS, RequiredSupport.HONOURED)
    assert not advance.state.search_due


def test_round_fields_raise_small_limits_and_ask_for_parallel_calls_only_with_tools() -> None:
    tools = next_round(LoopState(), RequiredSupport.UNKNOWN)
    answer = next_round(replace(LoopState(), phase=Phase.ANSWER), RequiredSupport.UNKNOWN)
    fields = {"max_tokens": 8, "max_completion_tokens": True, "seed": 7}
    assert round_fields(fields, tools) == {
        "max_tokens": 512,
        "max_completion_tokens": True,  # not a number: left for the engine to refuse
        "seed": 7,
        "parallel_tool_calls": True,
    }
    assert round_fields(fields | {"parallel_tool_calls": False}, answer) == fields
    assert fields == {"max_tokens": 8, "max_completion_tokens": True, "seed": 7}


def test_a_refused_required_gets_the_gateways_search_then_auto() -> None:
    state = refused_required(LoopState())
    assert (state.search_due, state.tool_rounds) == (True, 1)
    plan = next_round(searched_first(state, tools_spent=False), RequiredSupport.UNKNOWN)
    assert (plan.tool_choice, plan.hold_text) == ("auto", False)


def test_a_refusal_is_learnt_only_when_the_retry_is_accepted() -> None:
    state = refused_required(LoopState())
    plan = next_round(state, RequiredSupport.UNKNOWN)
    advance = after_round(state, plan, RoundOutcome(calls=1, malformed=0, has_text=False))
    assert advance.learnt is RequiredSupport.REFUSED
    again = after_round(advance.state, plan, RoundOutcome(calls=1, malformed=0, has_text=False))
    assert again.learnt is None


def test_tool_rounds_stop_after_eight_then_two_answer_rounds() -> None:
    state = LoopState()
    support = RequiredSupport.HONOURED
    for _ in range(MAX_TOOL_ROUNDS):
        plan = next_round(state, support)
        assert plan.offer_tools
        advance = after_round(state, plan, RoundOutcome(calls=1, malformed=0, has_text=False))
        assert advance.step is Step.RUN_CALLS
        state = advance.state
    assert state.phase is Phase.ANSWER
    plan = next_round(state, support)
    assert (plan.offer_tools, plan.tool_choice, plan.announce_answer) == (False, None, True)
    advance = after_round(state, plan, RoundOutcome(calls=1, malformed=0, has_text=False))
    assert advance.step is Step.RUN_CALLS  # a call in an answer round is run
    state = advance.state
    plan = next_round(state, support)
    assert not plan.announce_answer
    advance = after_round(state, plan, RoundOutcome(calls=1, malformed=0, has_text=False))
    assert advance.step is Step.FINISH
    assert advance.state.no_answer
    assert advance.state.answer_rounds == MAX_ANSWER_ROUNDS


def test_a_spent_search_budget_ends_the_tool_rounds() -> None:
    state = LoopState(tool_rounds=1)
    plan = next_round(state, RequiredSupport.HONOURED)
    advance = after_round(
        state, plan, RoundOutcome(calls=1, malformed=0, has_text=False, tools_spent=True)
    )
    assert advance.state.phase is Phase.ANSWER


def test_the_budget_spent_by_the_calls_ends_the_tool_rounds() -> None:
    state = LoopState(tool_rounds=1)
    kept = after_calls(state, tools_spent=False).phase
    ended = after_calls(state, tools_spent=True).phase
    assert (kept, ended) == (Phase.TOOLS, Phase.ANSWER)


def test_an_answer_ends_the_loop() -> None:
    state = LoopState(tool_rounds=2)
    plan = next_round(state, RequiredSupport.HONOURED)
    advance = after_round(state, plan, RoundOutcome(calls=0, malformed=0, has_text=True))
    assert advance.step is Step.FINISH
    assert not advance.state.no_answer


def test_an_empty_tool_round_moves_to_the_answer_rounds() -> None:
    state = LoopState(tool_rounds=2)
    plan = next_round(state, RequiredSupport.HONOURED)
    advance = after_round(state, plan, RoundOutcome(calls=0, malformed=0, has_text=False))
    assert advance.step is Step.ASK_AGAIN
    assert advance.state.phase is Phase.ANSWER


def test_malformed_text_calls_give_the_model_another_round() -> None:
    state = LoopState(tool_rounds=2)
    plan = next_round(state, RequiredSupport.HONOURED)
    advance = after_round(state, plan, RoundOutcome(calls=0, malformed=1, has_text=False))
    assert advance.step is Step.RUN_CALLS
    assert advance.state.phase is Phase.TOOLS


def test_two_empty_answer_rounds_end_with_the_clear_message() -> None:
    state = LoopState(phase=Phase.ANSWER, tool_rounds=8)
    for _ in range(MAX_ANSWER_ROUNDS):
        plan = next_round(state, RequiredSupport.HONOURED)
        advance = after_round(state, plan, RoundOutcome(calls=0, malformed=0, has_text=False))
        state = advance.state
    assert advance.step is Step.FINISH
    assert state.no_answer


def test_text_with_a_call_in_the_last_answer_round_is_the_answer() -> None:
    state = LoopState(phase=Phase.ANSWER, tool_rounds=8, answer_rounds=1, answer_announced=True)
    plan = next_round(state, RequiredSupport.HONOURED)
    advance = after_round(state, plan, RoundOutcome(calls=1, malformed=0, has_text=True))
    assert advance.step is Step.FINISH
    assert not advance.state.no_answer


def test_only_the_tools_folded_arguments_are_folded() -> None:
    # The same change of case is a repeat in a search's query and a new call elsewhere.
    a, b = (
        {"query": "Rust", "url": "https://a.example/X"},
        {"query": "rust", "url": "https://a.example/X"},
    )
    assert call_key("web_search", a, SEARCH_FOLDED) == call_key("web_search", b, SEARCH_FOLDED)
    assert call_key("fetch", a) != call_key("fetch", b)


def test_the_working_subject_is_the_tools_own() -> None:
    arguments = '{"query": "  rust \\n jobs ", "url": "https://a.example/"}'
    search = vet_call(RawCall("1", "web_search", arguments), tools=TOOLS, seen=set())
    fetch = vet_call(RawCall("2", "fetch", arguments), tools=TOOLS, seen=set())
    bare = vet_call(RawCall("3", "other", arguments), tools={"other": CallShape()}, seen=set())
    assert search.subject == ("query", "rust jobs")
    assert fetch.subject == ("url", "https://a.example/")
    assert bare.verdict is Verdict.RUN
    assert bare.subject is None
