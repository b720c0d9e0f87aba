"""The filter's parts on their own: JSON scanning, call objects, typing, code, XML functions."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.loop.tooltext.code import CodeScan, inline_span_end
from gateway.loop.tooltext.parse import (
    SCAN_FAIL,
    SCAN_NEED,
    JsonScan,
    TextToolCall,
    ToolIndex,
    call_from_object,
    calls_from_wrapped,
    strip_one_lf,
    type_value,
)
from gateway.loop.tooltext.xml import DONE, FAIL, NEED, PROSE, XmlFunctionScan, match_at, read_name
from tests.gateway.loop.tooltext.cases import TOOLS

# ------------------------------------------------------------------------------- JsonScan


@pytest.mark.parametrize(
    ("text", "end"),
    [
        pytest.param('{"a": 1} tail', 8, id="object"),
        pytest.param('[1, {"b": [2]}] tail', 15, id="array"),
        pytest.param('{"a": "}]\\" {"} x', 15, id="brackets-in-string"),
        pytest.param('{"a": true, "b": null, "c": -1.5e3}', 35, id="literals"),
    ],
)
def test_json_scan_finds_the_end(text: str, end: int) -> None:
    assert JsonScan(0, text[0]).scan(text) == end


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('{"a": 1]', id="mismatched"),
        pytest.param('{"a": <b>}', id="angle-bracket"),
        pytest.param('{"a": "x\ny"}', id="raw-newline-in-string"),
        pytest.param("{x: 1}", id="bare-word"),
    ],
)
def test_json_scan_fails_where_json_breaks(text: str) -> None:
    assert JsonScan(0, "{").scan(text) == SCAN_FAIL


def test_json_scan_resumes_without_rescanning() -> None:
    text = '{"a": "x\\"y", "b": [1, 2]}'
    scan = JsonScan(0, "{")
    for i in range(1, len(text)):
        assert scan.scan(text[:i]) == SCAN_NEED
        assert scan.pos <= i
    assert scan.scan(text) == len(text)


@pytest.mark.parametrize(
    ("text", "result"),
    [
        pytest.param('{"name": "a", "arguments": {}}', 30, id="call-keys"),
        pytest.param('{"answer": 42}', SCAN_FAIL, id="other-key"),
        pytest.param('{"name": "a", "extra": 1}', SCAN_FAIL, id="other-second-key"),
        pytest.param('{"name": {"deep": 1}, "id": 2}', 30, id="nested-keys-free"),
    ],
)
def test_json_scan_key_check_for_untagged_calls(text: str, result: int) -> None:
    assert JsonScan(0, "{", keys=True).scan(text) == result


@pytest.mark.parametrize(
    ("text", "result"),
    [
        pytest.param('{"name": "a", "arguments": {}}', 30, id="offered"),
        pytest.param('{"name": "b", "arguments": {', SCAN_FAIL, id="not-offered"),
        pytest.param('{"name": "b"', SCAN_FAIL, id="decided-when-the-string-ends"),
        pytest.param('{"name": "b', SCAN_NEED, id="string-not-finished"),
        pytest.param('{"name": "\\u0061", "arguments": {}}', 35, id="escaped"),
        pytest.param('{"name": 1, "arguments": {}}', SCAN_FAIL, id="number"),
        pytest.param('{"name": null}', 14, id="literal-at-end-left-to-decoding"),
        pytest.param('{"name": ["a"]}', SCAN_FAIL, id="array"),
        pytest.param('{"arguments": {"name": "b"}, "name": "a"}', 41, id="nested-name-free"),
        pytest.param('{"type": "function", "function": {"name": "a"}}', 47, id="inner-offered"),
        pytest.param('{"type": "function", "function": {"name": "b"', SCAN_FAIL, id="inner-not"),
        pytest.param('{"function": {"x": 1', SCAN_FAIL, id="inner-other-key"),
        pytest.param('{"function": {"arguments": {"name": "b"}}}', 42, id="deeper-free"),
        pytest.param('{"function": [{"name": "b"}]}', 29, id="inner-array-free"),
    ],
)
def test_json_scan_name_check_for_untagged_calls(text: str, result: int) -> None:
    assert JsonScan(0, "{", keys=True, names=frozenset({"a"})).scan(text) == result


# ------------------------------------------------------------------------ call objects (R7)

GOOD: list[tuple[str, Any, TextToolCall]] = [
    ("flat", {"name": "a", "arguments": {"x": 1}}, TextToolCall("a", {"x": 1})),
    ("parameters", {"name": "a", "parameters": {}}, TextToolCall("a", {})),
    ("type-id", {"type": "function", "id": "1", "name": "a", "arguments": {}},
     TextToolCall("a", {})),
    ("nested", {"type": "function", "function": {"name": "a", "arguments": {}}},
     TextToolCall("a", {})),
    ("nested-id", {"id": "c", "function": {"name": "a", "parameters": {"y": 2}}},
     TextToolCall("a", {"y": 2})),
    ("string-arguments", {"name": "a", "arguments": '{"q": "x"}'}, TextToolCall("a", {"q": "x"})),
]  # fmt: skip
BAD: list[tuple[str, Any]] = [
    ("not-object", ["a"]),
    ("no-name", {"arguments": {}}),
    ("empty-name", {"name": "", "arguments": {}}),
    ("name-not-string", {"name": 1, "arguments": {}}),
    ("no-arguments", {"name": "a"}),
    ("both-arguments", {"name": "a", "arguments": {}, "parameters": {}}),
    ("arguments-list", {"name": "a", "arguments": [1]}),
    ("arguments-bad-string", {"name": "a", "arguments": "{x"}),
    ("arguments-empty-string", {"name": "a", "arguments": ""}),
    ("extra-key", {"name": "a", "arguments": {}, "description": "d"}),
    ("wrong-type", {"type": "tool", "name": "a", "arguments": {}}),
    ("nested-extra", {"function": {"name": "a", "arguments": {}, "x": 1}}),
    ("nested-not-object", {"function": "a"}),
]


@pytest.mark.parametrize(("obj", "call"), [pytest.param(o, c, id=i) for i, o, c in GOOD])
def test_call_objects_accepted(obj: Any, call: TextToolCall) -> None:
    assert call_from_object(obj) == call


@pytest.mark.parametrize("obj", [pytest.param(o, id=i) for i, o in BAD])
def test_call_objects_rejected(obj: Any) -> None:
    assert call_from_object(obj) is None


def test_wrapped_arrays_are_all_or_nothing() -> None:
    one = {"name": "a", "arguments": {}}
    assert calls_from_wrapped([one, one]) == [TextToolCall("a", {})] * 2
    assert calls_from_wrapped([one, {"x": 1}]) is None
    assert calls_from_wrapped([]) is None


# ------------------------------------------------------------------------------ typing (R6)


@pytest.mark.parametrize(
    ("raw", "schema", "value"),
    [
        ("5", {"type": "integer"}, 5),
        ("-0012", {"type": "integer"}, -12),
        (" 7\t", {"type": "integer"}, 7),
        ("+5", {"type": "integer"}, "+5"),
        ("٣", {"type": "integer"}, "٣"),
        ("1e3", {"type": "number"}, 1000.0),
        ("3", {"type": "number"}, 3),
        ("NaN", {"type": "number"}, "NaN"),
        ("9" * 5000, {"type": "integer"}, "9" * 5000),
        ("9" * 5000, {"type": "number"}, "9" * 5000),
        ("tRuE", {"type": "boolean"}, True),
        ("1", {"type": "boolean"}, "1"),
        ("[1]", {"type": "array"}, [1]),
        ("{}", {"type": "object"}, {}),
        ("null", {"type": "null"}, None),
        (" x ", {"type": "string"}, " x "),
        ("5", {"type": ["string", "integer"]}, "5"),
        ("5", {"type": ["integer", "string"]}, 5),
        ("5", {"enum": ["5"]}, "5"),
        ("5", None, "5"),
        ("5", "integer", "5"),
    ],
)
def test_type_value(raw: str, schema: object, value: object) -> None:
    assert type_value(raw, schema) == value
    assert type(type_value(raw, schema)) is type(value)


@pytest.mark.parametrize(
    ("raw", "value"),
    [("\nx\n", "x"), ("\r\nx\r\n", "x"), ("\n\nx\n\n", "\nx\n"), ("x", "x"), ("\n", ""),
     ("\r\n", ""), ("", "")],
)  # fmt: skip
def test_strip_one_lf(raw: str, value: str) -> None:
    assert strip_one_lf(raw) == value


def test_tool_index() -> None:
    index = ToolIndex(TOOLS)
    assert index.names == {"web_search", "fetch_page_content_recursive"}
    assert index.properties["fetch_page_content_recursive"] == {"url": {"type": "string"}}
    assert "<function=web_search>" in index.bare_openers


# ------------------------------------------------------------------------------ code (R9)


@pytest.mark.parametrize(
    ("text", "end"),
    [
        ("`a` b", 3),
        ("``a ` b`` c", 9),
        ("`a\nb`", 3),
        ("`a", -1),
        ("`a``", -1),
        ("`a`", -1),  # the closing run may still grow
        ("`a`` `x", 6),
    ],
)
def test_inline_span_end(text: str, end: int) -> None:
    assert inline_span_end(text, 0) == end


@pytest.mark.parametrize(
    ("text", "line_start", "end"),
    [
        ("`a` b", False, 3),
        ("```py\nx\n```\nafter", True, 12),
        ("```py\nx\n```\nafter", False, 6),
        ("```a`b\nc", True, 7),
        ("````\n```\n````\n", True, 14),
        ("```\n   ```\n", True, 11),
        ("```\n    ```\nx", True, None),
        ("```\n``` x\nx", True, None),
    ],
)
def test_code_scan(text: str, line_start: bool, end: int | None) -> None:
    got = CodeScan(line_start=line_start).scan(text, 0, eos=False)
    assert got == ((end, True) if end is not None else (len(text), False))


def test_code_scan_resumes_over_chunks() -> None:
    text = "```\ncode\n ``\n```"
    scan = CodeScan(line_start=True)
    pos = 0
    for i in range(1, len(text) + 1):
        pos, prose = scan.scan(text[:i], pos, eos=False)
        assert not prose
    assert scan.scan(text + "\n", pos, eos=False) == (len(text) + 1, True)


# ------------------------------------------------------------------------- XML form (R5)

PROPS = ToolIndex(TOOLS).properties


def test_match_at_and_read_name() -> None:
    assert match_at("<tool_call>", 0, ("<tool_call>",), False) == "<tool_call>"
    assert match_at("<tool", 0, ("<tool_call>",), False) == ""
    assert match_at("<tool", 0, ("<tool_call>",), True) is None
    assert match_at("<toolx", 0, ("<tool_call>",), False) is None
    assert read_name("abc>", 0, False) == "abc"
    assert read_name("abc", 0, False) == ""
    assert read_name("abc", 0, True) is None
    assert read_name("a b>", 0, False) is None
    assert read_name(">", 0, False) is None


def test_xml_scan_whole_function() -> None:
    text = "web_search>\n<parameter=limit>\n3\n</parameter>\n</function>tail"
    scan = XmlFunctionScan(0, PROPS)
    assert scan.scan(text, False) == DONE
    assert scan.call == TextToolCall("web_search", {"limit": 3})
    assert text[scan.end :] == "tail"
    assert not scan.closed_wrapper


def test_xml_scan_in_pieces() -> None:
    text = "x>\n<parameter=a>\nv</parameter> no\n</parameter></tool_call>"
    scan = XmlFunctionScan(0, PROPS)
    for i in range(1, len(text)):
        assert scan.scan(text[:i], False) == NEED
    assert scan.scan(text, False) == DONE
    assert scan.call == TextToolCall("x", {"a": "v</parameter> no"})
    assert scan.closed_wrapper


@pytest.mark.parametrize(
    ("text", "result"),
    [
        ("\n<parameter=query>\nq\n</parameter>\n</function>", DONE),
        (" {} </function>", DONE),
        ("</function>", DONE),
        (" hello", PROSE),
        ("</tool_call>", PROSE),
        ("<parameter=a b>x</parameter></function>", FAIL),
        ("<parameter=query>x</parameter> </nope>", NEED),
        ("{1} </function>", FAIL),
    ],
)
def test_xml_scan_bare_body_decisions(text: str, result: int) -> None:
    assert XmlFunctionScan(0, PROPS, name="web_search").scan(text, False) == result
