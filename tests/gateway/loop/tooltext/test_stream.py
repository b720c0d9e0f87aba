"""R3 holding, the result types, the closed state, and linear time on long answers."""

from __future__ import annotations

import dataclasses

import pytest

from gateway.loop.tooltext.filter import (
    FilterClosedError,
    FilterOutput,
    TextToolCall,
    TextToolFilter,
)
from tests.gateway.loop.tooltext.cases import JSON_CALL, TOOLS, run, steps

CALL_OBJ = '{"name": "web_search", "arguments": {"query": "q"}}'
HJ = f"<tool_call>{CALL_OBJ}</tool_call>"

# (id, chunks, text released by each feed() and then by close())
HOLDING: list[tuple[str, list[str], list[str]]] = [
    ("prose-released-at-once", ["Hello ", "world", "."], ["Hello ", "world", ".", ""]),
    ("lt-that-is-no-opener", ["a < b", " <b>c"], ["a < b", " <b>c", ""]),
    ("partial-opener-held", ["Hi <tool", "box> x"], ["Hi ", "<toolbox> x", ""]),
    ("partial-opener-at-end-released", ["Hi <tool_c"], ["Hi ", "<tool_c"]),
    ("opener-held-until-non-space", ["<tool_call>", " \n", "x"], ["", "", "<tool_call> \nx", ""]),
    (
        "opener-decides-on-function",
        ["Hi <tool_call>\n<func", "tional>"],
        ["Hi ", "<tool_call>\n<functional>", ""],
    ),
    ("bare-opener-held", ["<function=web_search>", " ok"], ["", "<function=web_search> ok", ""]),
    ("block-hidden", ["A ", JSON_CALL[:20], JSON_CALL[20:]], ["A ", "", "", ""]),
    ("whitespace-after-block-held", ["A", JSON_CALL, "\n\n", "B"], ["A", "", "", "\n\nB", ""]),
    ("closer-after-block-held", ["A", JSON_CALL, " </tool", "_call> B"], ["A", "", "", " B", ""]),
    ("leading-whitespace-held", ["\n\n", "Hi"], ["", "\n\nHi", ""]),
    ("untagged-decided-by-first-key", ['{"answer"', ": 1}"], ['{"answer"', ": 1}", ""]),
    (
        "untagged-held-until-end",
        ['{"name": "web_search"', ', "arguments": {}}', " ok"],
        ["", "", "ok", ""],
    ),
    ("untagged-not-json", ["{hello", "}"], ["{hello", "}", ""]),
    (
        "untagged-unknown-name-released",
        ['{"name": "John Smith"', ', "arguments": {"x": 1'],
        ['{"name": "John Smith"', ', "arguments": {"x": 1', ""],
    ),
    (
        "untagged-nested-name-held-until-complete",
        ['{"type": "function", "function": {"name": "Jo', 'hn", "arguments": {'],
        ["", '{"type": "function", "function": {"name": "John", "arguments": {', ""],
    ),
    (
        "fence-unknown-name-released",
        ["```json\n", '{"name": "John"', ', "arguments": {}'],
        ["", '```json\n{"name": "John"', ', "arguments": {}', ""],
    ),
    (
        "whitespace-kept-across-blocks",
        ["Para.", HJ, "\n\n", HJ, "Next"],
        ["Para.", "", "", "", "\n\nNext", ""],
    ),
    (
        "whitespace-kept-across-closer",
        ["Hello", HJ, " </tool_call>", "world"],
        ["Hello", "", "", " world", ""],
    ),
    (
        "fence-held-until-decided",
        ["```python\n", "x = 1\n", "```\n"],
        ["", "```python\nx = 1\n", "```\n", ""],
    ),
    (
        "fence-opener-line-held",
        ["```", "json", "\n", CALL_OBJ, "\n```", "\nok"],
        ["", "", "", "", "", "ok", ""],
    ),
    (
        "code-fence-streams",
        ["Hi\n```\n<tool", "_call>", "\n```\n<tool"],
        ["Hi\n```\n<tool", "_call>", "\n```\n", "<tool"],
    ),
    ("inline-code-streams", ["x `<tool", "_call>` y"], ["x `<tool", "_call>` y", ""]),
    ("answer-initial-backtick-streams", ["`<tool", "_call>`"], ["`<tool", "_call>`", ""]),
]


@pytest.mark.parametrize(("chunks", "released"), [pytest.param(c, r, id=i) for i, c, r in HOLDING])
def test_only_undecidable_text_is_held(chunks: list[str], released: list[str]) -> None:
    assert steps(chunks) == released


def test_calls_are_released_as_soon_as_complete() -> None:
    f = TextToolFilter(TOOLS)
    out = f.feed('<tool_call>{"name": "a", "arguments": {}}')
    assert out.calls == [TextToolCall("a", {})]
    f2 = TextToolFilter(TOOLS)
    assert f2.feed("<tool_call><function=a><parameter=b>c</parameter>").calls == []
    assert f2.feed("</function>").calls == [TextToolCall("a", {"b": "c"})]
    assert f2.feed("<function=d></function>").calls == [TextToolCall("d", {})]
    assert f2.feed("</tool_call>x").text == "x"


def test_malformed_is_counted_where_found() -> None:
    f = TextToolFilter(TOOLS)
    assert f.feed("a <tool_call>{oops").malformed == 1
    assert f.feed("}</tool_call> b") == FilterOutput("b", [], 0)
    assert f.close() == FilterOutput("", [], 0)
    f2 = TextToolFilter(TOOLS)
    assert f2.feed("<tool_call>").malformed == 0
    assert f2.close().malformed == 1


def test_results_are_small_frozen_values() -> None:
    out = TextToolFilter(TOOLS).feed(JSON_CALL)
    assert isinstance(out, FilterOutput)
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.text = "x"  # type: ignore[misc]
    call = out.calls[0]
    assert (call.name, call.arguments) == ("web_search", {"query": "rust jobs"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.name = "x"  # type: ignore[misc]


def test_feeding_after_close_is_an_error() -> None:
    f = TextToolFilter(TOOLS)
    f.feed("hi")
    f.close()
    with pytest.raises(FilterClosedError):
        f.feed("more")
    with pytest.raises(FilterClosedError):
        f.close()
    assert issubclass(FilterClosedError, RuntimeError)


def test_empty_chunks_and_empty_answers() -> None:
    assert run([]) == ("", [], 0)
    assert run(["", "a", "", "b", ""]) == ("ab", [], 0)


@pytest.mark.parametrize(
    "tools",
    [
        pytest.param(None, id="none"),
        pytest.param([], id="empty"),
        pytest.param([{"type": "function"}, "junk", {"function": {"name": 3}}], id="junk"),
        pytest.param([{"name": "web_search", "parameters": {}}], id="flat-entry"),
        pytest.param([{"type": "function", "function": {"name": "a b"}}], id="name-not-r5"),
    ],
)
def test_odd_tool_lists_are_tolerated(tools: list[dict[str, object]] | None) -> None:
    f = TextToolFilter(tools)
    out = [f.feed(f"x {JSON_CALL} <function=a b>"), f.close()]
    assert "".join(o.text for o in out) == "x <function=a b>"
    assert [c.name for o in out for c in o.calls] == ["web_search"]


# ------------------------------------------------------------------ linear time (R3, brief)
# Each case would take minutes if the held buffer were re-scanned on every feed; here they
# take a few seconds at most. No timing is asserted: the suite timeout is the guard.

MB = 1 << 20


def feed_chars(answer: str) -> tuple[int, int, int]:
    f = TextToolFilter(TOOLS)
    text = calls = bad = 0
    for ch in answer:
        out = f.feed(ch)
        text += len(out.text)
        calls += len(out.calls)
        bad += out.malformed
    out = f.close()
    return text + len(out.text), calls + len(out.calls), bad + out.malformed


def test_a_megabyte_of_prose_in_single_characters() -> None:
    answer = ("Plain words, a < b, `code`, and more words.\n" * (MB // 44 + 1))[:MB]
    assert feed_chars(answer) == (MB, 0, 0)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(
            "<tool_call><function=web_search><parameter=query>"
            + "x < y </parameter> z\n" * 12000
            + "</parameter></function></tool_call>",
            (0, 1, 0),
            id="xml-value",
        ),
        pytest.param(
            '<tool_call>{"name": "a", "arguments": {"q": "' + 'ab\\" <}' * 30000 + '"}}',
            (0, 1, 0),
            id="json-string",
        ),
        pytest.param(
            '{"name": "web_search", "arguments": {"q": [' + "1, " * 80000 + "1]}}",
            (0, 1, 0),
            id="untagged-json",
        ),
        pytest.param("x" + JSON_CALL + " \n" * 100000 + "y", (200002, 1, 0), id="whitespace-gap"),
        pytest.param(
            "x" + JSON_CALL + " </tool_call>\n" * 20000 + "y", (3, 1, 0), id="closers-in-a-gap"
        ),
        pytest.param("x" + (JSON_CALL + "\n\n") * 3000 + "y", (4, 3000, 0), id="blocks-in-a-gap"),
        pytest.param("<tool_call>{oops" + "a" * 200000, (0, 0, 1), id="malformed-skip"),
        pytest.param(
            "x\n```\n" + "<tool_call> `` ~\n" * 12000 + "```\n", (204010, 0, 0), id="fenced-code"
        ),
        pytest.param(
            "```\n" + "<tool_call>{}</tool_call>\n" * 8000 + "text\n```",
            (208012, 0, 0),
            id="answer-initial-fence-released",
        ),
        pytest.param("<tool_call>\n" + " " * 200000, (0, 0, 1), id="opener-then-spaces"),
    ],
)
def test_long_held_stretches_in_single_characters(
    answer: str, expected: tuple[int, int, int]
) -> None:
    assert feed_chars(answer) == expected
