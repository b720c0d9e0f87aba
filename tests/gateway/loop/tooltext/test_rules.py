"""SPEC 4a rule by rule: one table row per behaviour, each run whole and one character at a time."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gateway.loop.tooltext.cases import JSON_CALL, XML_CALL, Calls, run

Q: Calls = [("web_search", {"query": "q"})]
RJ: Calls = [("web_search", {"query": "rust jobs"})]
RJB: Calls = [("web_search", {"query": "rust jobs berlin", "limit": 5})]


def xml(params: str, name: str = "web_search") -> str:
    """A wrapped XML-form call around the given parameter lines."""
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def param(name: str, value: str) -> str:
    return f"<parameter={name}>\n{value}\n</parameter>\n"


def ws_call(value: str, key: str = "query", *, schema: str = "web_search") -> str:
    return xml(param(key, value), schema)


# (id, answer, visible text, calls, malformed)
RULES: list[tuple[str, str, str, Calls, int]] = [
    # R2 openers accepted
    ("R2-tool_call", f"a {JSON_CALL} b", "a b", RJ, 0),
    (
        "R2-bare-function-offered",
        "<function=web_search>\n" + param("query", "q") + "</function>",
        "",
        Q,
        0,
    ),
    ("R2-untagged-brace-at-start", '{"name": "web_search", "arguments": {"query": "q"}}', "", Q, 0),
    (
        "R2-fence-at-start",
        '```\n{"name": "web_search", "arguments": {"query": "q"}}\n```',
        "",
        Q,
        0,
    ),
    # R2 openers rejected (text)
    ("R2-reject-tool", "<tool>x</tool>", "<tool>x</tool>", [], 0),
    ("R2-reject-toolbox", "<toolbox>", "<toolbox>", [], 0),
    (
        "R2-reject-tool_calls",
        '<tool_calls>{"name": "web_search", "arguments": {}}',
        '<tool_calls>{"name": "web_search", "arguments": {}}',
        [],
        0,
    ),
    ("R2-reject-upper", "<TOOL_CALL>{}</TOOL_CALL>", "<TOOL_CALL>{}</TOOL_CALL>", [], 0),
    ("R2-reject-space", "< tool_call>{}", "< tool_call>{}", [], 0),
    (
        "R2-reject-function-bare-word",
        "#include <functional> <function>",
        "#include <functional> <function>",
        [],
        0,
    ),
    (
        "R2-reject-function-unknown",
        "<function=unknown>\n<parameter=a>\nb\n</parameter>\n</function>",
        "<function=unknown>\n<parameter=a>\nb\n</parameter>\n</function>",
        [],
        0,
    ),
    (
        "R2-reject-brace-not-at-start",
        'x {"name": "web_search", "arguments": {}}',
        'x {"name": "web_search", "arguments": {}}',
        [],
        0,
    ),
    # R4 wrapper body decisions
    ("R4-json-object", '<tool_call> {"name": "web_search", "arguments": {"query": "q"}}', "", Q, 0),
    (
        "R4-json-array",
        '<tool_call>\n[{"name": "web_search", "arguments": {"query": "q"}}]',
        "",
        Q,
        0,
    ),
    ("R4-xml", ws_call("q"), "", Q, 0),
    ("R4-prose-released", "The <tool_call> tag.", "The <tool_call> tag.", [], 0),
    ("R4-prose-lt", "<tool_call> <b>x</b>", "<tool_call> <b>x</b>", [], 0),
    ("R4-prose-then-real", "<tool_call> is it: " + JSON_CALL, "<tool_call> is it: ", RJ, 0),
    ("R4-double-opener", "<tool_call><tool_call>" + JSON_CALL[11:], "<tool_call>", RJ, 0),
    (
        "R4-parameter-without-function",
        "<tool_call>\n<parameter=query>\nq\n</parameter>",
        "<tool_call>\n<parameter=query>\nq\n</parameter>",
        [],
        0,
    ),
    # R5 XML form and value termination
    ("R5-one-lf-stripped", ws_call("\nq\n"), "", [("web_search", {"query": "\nq\n"})], 0),
    (
        "R5-crlf-stripped",
        "<tool_call><function=web_search><parameter=query>\r\nq\r\n"
        "</parameter></function></tool_call>",
        "",
        Q,
        0,
    ),
    (
        "R5-no-lf",
        "<tool_call><function=web_search><parameter=query>q</parameter></function>",
        "",
        Q,
        0,
    ),
    (
        "R5-any-order",
        xml(param("limit", "2") + param("query", "q")),
        "",
        [("web_search", {"limit": 2, "query": "q"})],
        0,
    ),
    (
        "R5-closer-then-parameter",
        xml("<parameter=query>\na</parameter>\n" + param("limit", "1")),
        "",
        [("web_search", {"query": "a", "limit": 1})],
        0,
    ),
    (
        "R5-closer-then-text-is-value",
        xml("<parameter=query>\na</parameter> b\n</parameter>\n"),
        "",
        [("web_search", {"query": "a</parameter> b"})],
        0,
    ),
    (
        "R5-closer-then-end-of-stream",
        "<tool_call><function=web_search><parameter=query>q</parameter>\n",
        "",
        [],
        1,
    ),
    (
        "R5-line-start-new-parameter",
        xml("<parameter=query>\nq\n<parameter=limit>\n4\n</parameter>\n"),
        "",
        [("web_search", {"query": "q", "limit": 4})],
        0,
    ),
    (
        "R5-line-start-seen-parameter-is-value",
        xml("<parameter=query>\nq\n<parameter=query>\nr\n</parameter>\n"),
        "",
        [("web_search", {"query": "q\n<parameter=query>\nr"})],
        0,
    ),
    (
        "R5-line-start-unknown-parameter-is-value",
        xml("<parameter=query>\nq\n<parameter=nope>\nr\n</parameter>\n"),
        "",
        [("web_search", {"query": "q\n<parameter=nope>\nr"})],
        0,
    ),
    (
        "R5-mid-line-parameter-is-value",
        xml("<parameter=query>\nq <parameter=limit>\n4\n</parameter>\n"),
        "",
        [("web_search", {"query": "q <parameter=limit>\n4"})],
        0,
    ),
    (
        "R5-function-closer-then-tool_call",
        "<tool_call>\n<function=web_search>\n<parameter=query>\nq\n</function>\n</tool_call>",
        "",
        Q,
        0,
    ),
    (
        "R5-function-closer-then-eos",
        "<tool_call>\n<function=web_search>\n<parameter=query>\nq\n</function>",
        "",
        Q,
        0,
    ),
    (
        "R5-function-closer-then-text-is-value",
        xml("<parameter=query>\nq</function> x\n</parameter>\n"),
        "",
        [("web_search", {"query": "q</function> x"})],
        0,
    ),
    (
        "R5-tool_call-closes-function",
        "<tool_call><function=web_search><parameter=query>q</parameter></tool_call> ok",
        "ok",
        Q,
        0,
    ),
    (
        "R5-two-functions-one-wrapper",
        "<tool_call><function=web_search><parameter=query>a</parameter></function>"
        "<function=x><parameter=y>b</parameter></function></tool_call>",
        "",
        [("web_search", {"query": "a"}), ("x", {"y": "b"})],
        0,
    ),
    (
        "R5-closer-optional",
        "<tool_call><function=web_search><parameter=query>q</parameter></function> then text",
        "then text",
        Q,
        0,
    ),
    (
        "R5-json-arguments",
        '<tool_call><function=web_search>{"query": "q", "limit": "3"}</function></tool_call>',
        "",
        [("web_search", {"query": "q", "limit": "3"})],
        0,
    ),
    ("R5-bare-json-arguments", '<function=web_search> {"query": "q"} </function>', "", Q, 0),
    (
        "R5-no-parameters",
        "<tool_call><function=web_search></function></tool_call>",
        "",
        [("web_search", {})],
        0,
    ),
    (
        "R5-bare-prose-released",
        "Use <function=web_search> here.",
        "Use <function=web_search> here.",
        [],
        0,
    ),
    ("R5-bad-name", "<tool_call><function=a b>x</function></tool_call>ok", "ok", [], 1),
    ("R5-empty-name", "<tool_call><function=>x</function></tool_call>ok", "ok", [], 1),
    (
        "R5-text-in-function",
        "<tool_call><function=web_search>hi</function></tool_call>ok",
        "ok",
        [],
        1,
    ),
    (
        "R5-any-name-in-wrapper",
        "<tool_call><function=anything><parameter=a>1</parameter></function></tool_call>",
        "",
        [("anything", {"a": "1"})],
        0,
    ),
    # R6 typing by schema
    ("R6-string-raw", ws_call("007"), "", [("web_search", {"query": "007"})], 0),
    ("R6-integer", ws_call("-12", "limit"), "", [("web_search", {"limit": -12})], 0),
    ("R6-integer-raw", ws_call("12.5", "limit"), "", [("web_search", {"limit": "12.5"})], 0),
    ("R6-integer-words-raw", ws_call("five", "limit"), "", [("web_search", {"limit": "five"})], 0),
    ("R6-boolean-any-case", ws_call("TRUE", "fresh"), "", [("web_search", {"fresh": True})], 0),
    ("R6-boolean-false", ws_call("False", "fresh"), "", [("web_search", {"fresh": False})], 0),
    ("R6-boolean-raw", ws_call("yes", "fresh"), "", [("web_search", {"fresh": "yes"})], 0),
    (
        "R6-array",
        ws_call('["a", "b"]', "queries"),
        "",
        [("web_search", {"queries": ["a", "b"]})],
        0,
    ),
    (
        "R6-array-wrong-type-raw",
        ws_call('{"a": 1}', "queries"),
        "",
        [("web_search", {"queries": '{"a": 1}'})],
        0,
    ),
    (
        "R6-array-bad-json-raw",
        ws_call("[a, b]", "queries"),
        "",
        [("web_search", {"queries": "[a, b]"})],
        0,
    ),
    (
        "R6-object",
        ws_call('{"site": "x"}', "filters"),
        "",
        [("web_search", {"filters": {"site": "x"}})],
        0,
    ),
    (
        "R6-object-wrong-type-raw",
        ws_call("[1]", "filters"),
        "",
        [("web_search", {"filters": "[1]"})],
        0,
    ),
    ("R6-number", ws_call("2.5", "score"), "", [("web_search", {"score": 2.5})], 0),
    ("R6-type-list", ws_call("7", "maybe"), "", [("web_search", {"maybe": 7})], 0),
    ("R6-type-list-null", ws_call("null", "maybe"), "", [("web_search", {"maybe": None})], 0),
    ("R6-unknown-parameter-raw", ws_call("5", "other"), "", [("web_search", {"other": "5"})], 0),
    ("R6-unknown-tool-raw", xml(param("limit", "5"), "other"), "", [("other", {"limit": "5"})], 0),
    (
        "R6-json-form-unchanged",
        '<tool_call>{"name": "web_search", "arguments": {"limit": "5"}}</tool_call>',
        "",
        [("web_search", {"limit": "5"})],
        0,
    ),
    # R7 JSON form
    ("R7-flat-arguments", JSON_CALL, "", RJ, 0),
    (
        "R7-flat-parameters",
        '<tool_call>{"name": "web_search", "parameters": {"query": "q"}}</tool_call>',
        "",
        Q,
        0,
    ),
    (
        "R7-flat-type-id",
        '<tool_call>{"type": "function", "id": "c1", "name": "web_search", '
        '"arguments": {"query": "q"}}</tool_call>',
        "",
        Q,
        0,
    ),
    (
        "R7-nested",
        '<tool_call>{"type": "function", "function": {"name": "web_search", '
        '"arguments": {"query": "q"}}}</tool_call>',
        "",
        Q,
        0,
    ),
    (
        "R7-arguments-string",
        '<tool_call>{"name": "web_search", "arguments": "{\\"query\\": \\"q\\"}"}</tool_call>',
        "",
        Q,
        0,
    ),
    (
        "R7-arguments-string-not-object",
        '<tool_call>{"name": "web_search", "arguments": "[1]"}</tool_call>',
        "",
        [],
        1,
    ),
    (
        "R7-array",
        '<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]</tool_call>',
        "",
        [("a", {}), ("b", {})],
        0,
    ),
    (
        "R7-array-one-bad",
        '<tool_call>[{"name": "a", "arguments": {}}, {"x": 1}]</tool_call>',
        "",
        [],
        1,
    ),
    ("R7-array-empty", "<tool_call>[]</tool_call>", "", [], 1),
    (
        "R7-any-name-in-wrapper",
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
        "",
        [("nope", {})],
        0,
    ),
    (
        "R7-string-holds-closer",
        '<tool_call>{"name": "web_search", "arguments": {"query": "a</tool_call>b"}}</tool_call>',
        "",
        [("web_search", {"query": "a</tool_call>b"})],
        0,
    ),
    ("R7-extra-key", '<tool_call>{"name": "a", "arguments": {}, "x": 1}</tool_call>', "", [], 1),
    ("R7-missing-arguments", '<tool_call>{"name": "a"}</tool_call>', "", [], 1),
    (
        "R7-closer-optional",
        '<tool_call>{"name": "a", "arguments": {}} and more',
        "and more",
        [("a", {})],
        0,
    ),
    (
        "R7-escaped-quote",
        '<tool_call>{"name": "a", "arguments": {"q": "say \\"hi\\" }"}}</tool_call>',
        "",
        [("a", {"q": 'say "hi" }'})],
        0,
    ),
    # R8 untagged calls, only at the start
    (
        "R8-untagged-flat",
        '\n{"name": "web_search", "arguments": {"query": "q"}}\nText',
        "Text",
        Q,
        0,
    ),
    (
        "R8-untagged-nested",
        '{"type": "function", "function": {"name": "web_search", "parameters": {"query": "q"}}} x',
        "x",
        Q,
        0,
    ),
    (
        "R8-untagged-unknown-name",
        '{"name": "nope", "arguments": {}}',
        '{"name": "nope", "arguments": {}}',
        [],
        0,
    ),
    ("R8-untagged-plain-json", '{"answer": 42}', '{"answer": 42}', [], 0),
    (
        "R8-untagged-array-is-text",
        '[{"name": "web_search", "arguments": {}}]',
        '[{"name": "web_search", "arguments": {}}]',
        [],
        0,
    ),
    (
        "R8-untagged-second-object-is-text",
        '{"name": "web_search", "arguments": {"query": "q"}} {"name": "web_search", '
        '"arguments": {"query": "q"}}',
        '{"name": "web_search", "arguments": {"query": "q"}}',
        Q,
        0,
    ),
    (
        "R8-untagged-after-text",
        'Hi {"name": "web_search", "arguments": {"query": "q"}}',
        'Hi {"name": "web_search", "arguments": {"query": "q"}}',
        [],
        0,
    ),
    (
        "R8-untagged-after-block-is-text",
        JSON_CALL + '{"name": "web_search", "arguments": {"query": "q"}}',
        '{"name": "web_search", "arguments": {"query": "q"}}',
        RJ,
        0,
    ),
    ("R8-untagged-unfinished-is-cut", '{"name": "web_search", "arguments": {"qu', "", [], 1),
    (
        "R8-untagged-unknown-name-cut-is-text",
        '{"name": "John Smith", "arguments": {"x": 1',
        '{"name": "John Smith", "arguments": {"x": 1',
        [],
        0,
    ),
    (
        "R8-untagged-nested-unknown-name-cut-is-text",
        '{"type": "function", "function": {"name": "John", "arguments": {"x": 1',
        '{"type": "function", "function": {"name": "John", "arguments": {"x": 1',
        [],
        0,
    ),
    (
        "R8-untagged-nested-offered-name-cut",
        '{"type": "function", "function": {"name": "web_search", "arguments": {"x": 1',
        "",
        [],
        1,
    ),
    (
        "R8-untagged-escaped-offered-name",
        '{"name": "web\\u005fsearch", "arguments": {"query": "q"}} x',
        "x",
        Q,
        0,
    ),
    (
        "R8-untagged-name-not-a-string-is-text",
        '{"name": 5, "arguments": {"x": 1',
        '{"name": 5, "arguments": {"x": 1',
        [],
        0,
    ),
    (
        "R8-untagged-name-object-is-text",
        '{"name": {"x": 1',
        '{"name": {"x": 1',
        [],
        0,
    ),
    (
        "R8-untagged-nested-other-key-is-text",
        '{"type": "function", "function": {"description": "x", "name": "web_search"',
        '{"type": "function", "function": {"description": "x", "name": "web_search"',
        [],
        0,
    ),
    (
        "R8-untagged-unknown-name-after-arguments",
        '{"arguments": {"x": 1}, "name": "John"',
        '{"arguments": {"x": 1}, "name": "John"',
        [],
        0,
    ),
    (
        "R8-untagged-unknown-name-then-text",
        '\n{"name": "John", "age": 3} is JSON',
        '\n{"name": "John", "age": 3} is JSON',
        [],
        0,
    ),
    (
        "R8-fence-unknown-name-cut-is-text",
        '```json\n{"name": "John Smith", "arguments": {"x": 1',
        '```json\n{"name": "John Smith", "arguments": {"x": 1',
        [],
        0,
    ),
    (
        "R8-wrapped-unknown-name-cut-is-malformed",
        '<tool_call>{"name": "John Smith", "arguments": {"x": 1',
        "",
        [],
        1,
    ),
    ("R8-untagged-unfinished-not-call-released", '{"answer": "it is', '{"answer": "it is', [], 0),
    ("R8-fence-unfinished-is-cut", '```json\n{"name": "web_search", "argu', "", [], 1),
    ("R8-fence-unfinished-code-released", "```json\n[1, 2", "```json\n[1, 2", [], 0),
    (
        "R8-fence-json",
        '```json\n{"name": "web_search", "arguments": {"query": "q"}}\n```\nok',
        "ok",
        Q,
        0,
    ),
    ("R8-fence-blocks", f"```xml\n{XML_CALL}\n\n{JSON_CALL}\n```", "", [*RJB, *RJ], 0),
    (
        "R8-fence-bare-function",
        "```\n<function=web_search>\n" + param("query", "q") + "</function>\n</tool_call>\n```",
        "",
        Q,
        0,
    ),
    ("R8-fence-code", "```python\nx = 1\n```\n", "```python\nx = 1\n```\n", [], 0),
    (
        "R8-fence-call-plus-text",
        '```\n{"name": "web_search", "arguments": {}}\nmore\n```',
        '```\n{"name": "web_search", "arguments": {}}\nmore\n```',
        [],
        0,
    ),
    (
        "R8-fence-two-objects",
        '```\n{"name": "web_search", "arguments": {}}\n'
        '{"name": "web_search", "arguments": {}}\n```',
        '```\n{"name": "web_search", "arguments": {}}\n{"name": "web_search", "arguments": {}}'
        "\n```",
        [],
        0,
    ),
    (
        "R8-fence-unknown-tool",
        '```\n{"name": "x", "arguments": {}}\n```',
        '```\n{"name": "x", "arguments": {}}\n```',
        [],
        0,
    ),
    ("R8-fence-empty", "```\n```\nx", "```\n```\nx", [], 0),
    (
        "R8-fence-unclosed-accepted",
        '```json\n{"name": "web_search", "arguments": {"query": "q"}}\n',
        "",
        Q,
        0,
    ),
    (
        "R8-fence-closer-too-short",
        '````\n{"name": "web_search", "arguments": {}}\n```\n',
        '````\n{"name": "web_search", "arguments": {}}\n```\n',
        [],
        0,
    ),
    (
        "R8-fence-not-at-start",
        'Hi\n```\n{"name": "web_search", "arguments": {}}\n```',
        'Hi\n```\n{"name": "web_search", "arguments": {}}\n```',
        [],
        0,
    ),
    ("R8-fence-malformed-block", "```\n<tool_call>{oops}</tool_call>\n```\nafter", "after", [], 1),
    (
        "R8-fence-with-prose-tool_call",
        "```\n<tool_call> is a tag\n```",
        "```\n<tool_call> is a tag\n```",
        [],
        0,
    ),
    # R9 code is never parsed
    ("R9-fence", f"Look:\n```\n{JSON_CALL}\n```\n", f"Look:\n```\n{JSON_CALL}\n```\n", [], 0),
    (
        "R9-fence-indent-3",
        f"Look:\n   ```\n{JSON_CALL}\n   ```\n",
        f"Look:\n   ```\n{JSON_CALL}\n   ```\n",
        [],
        0,
    ),
    (
        "R9-fence-indent-4-is-not-fence",
        f"Look:\n    ```\n{JSON_CALL}\n```\n",
        "Look:\n    ```\n```\n",
        RJ,
        0,
    ),
    ("R9-fence-closed-by-longer", f"x\n```\na\n`````\n{JSON_CALL}", "x\n```\na\n`````\n", RJ, 0),
    # CommonMark line ends include CRLF: a CRLF closing fence line closes the block.
    (
        "R9-fence-closed-by-crlf-line",
        f"x\r\n```\r\n<tool_call>\r\n```\r\n{JSON_CALL}",
        "x\r\n```\r\n<tool_call>\r\n```\r\n",
        RJ,
        0,
    ),
    (
        "R8-initial-fence-with-crlf-lines",
        '```json\r\n{"name": "web_search", "arguments": {"query": "q"}}\r\n```\r\nok',
        "ok",
        Q,
        0,
    ),
    (
        "R9-fence-not-closed-by-shorter",
        f"x\n````\na\n```\n{JSON_CALL}\n````",
        f"x\n````\na\n```\n{JSON_CALL}\n````",
        [],
        0,
    ),
    (
        "R9-fence-closer-with-text-does-not-close",
        f"x\n```\n``` no\n{JSON_CALL}",
        f"x\n```\n``` no\n{JSON_CALL}",
        [],
        0,
    ),
    ("R9-fence-mid-line-is-inline", f"x ```\n{JSON_CALL}", "x ```\n", RJ, 0),
    ("R9-fence-info-with-backtick-is-inline", f"x\n```a`b\n{JSON_CALL}", "x\n```a`b\n", RJ, 0),
    ("R9-tilde-fence-is-prose", f"x\n~~~\n{JSON_CALL}\n~~~", "x\n~~~\n~~~", RJ, 0),
    (
        "R9-inline-span",
        "Write `<tool_call>{}</tool_call>` then.",
        "Write `<tool_call>{}</tool_call>` then.",
        [],
        0,
    ),
    ("R9-inline-double", "a ``x ` <tool_call>`` b", "a ``x ` <tool_call>`` b", [], 0),
    ("R9-inline-reset-at-newline", f"a `x\n{JSON_CALL}", "a `x\n", RJ, 0),
    ("R9-inline-closed-then-detect", f"`a` {JSON_CALL}", "`a` ", RJ, 0),
    ("R9-inline-function", "`<function=web_search>` ok", "`<function=web_search>` ok", [], 0),
    # R10 removal and whitespace
    ("R10-words-do-not-glue", f"Hello{JSON_CALL} world", "Hello world", RJ, 0),
    ("R10-no-double-space", f"Hello {JSON_CALL} world", "Hello world", RJ, 0),
    (
        "R10-blank-lines-do-not-double",
        f"Para one.\n\n{JSON_CALL}\n\nPara two.",
        "Para one.\n\nPara two.",
        RJ,
        0,
    ),
    (
        "R10-newline-kept-when-needed",
        f"Line one.{JSON_CALL}\n\nLine two.",
        "Line one.\n\nLine two.",
        RJ,
        0,
    ),
    ("R10-leading-whitespace-dropped", f"\n\n  {JSON_CALL}\n\nAnswer.", "Answer.", RJ, 0),
    ("R10-leading-whitespace-kept-for-text", "\n  Answer.", "\n  Answer.", [], 0),
    ("R10-trailing-whitespace-dropped", f"Answer.{JSON_CALL}\n\n", "Answer.", RJ, 0),
    (
        "R10-orphan-closers-swallowed",
        f"A{JSON_CALL}\n</tool_call>\n</function>\n\nB",
        "A\n\nB",
        RJ,
        0,
    ),
    ("R10-orphan-closer-elsewhere-is-text", "A </tool_call> B", "A </tool_call> B", [], 0),
    ("R10-orphan-closer-at-start-is-text", "</tool_call> B", "</tool_call> B", [], 0),
    ("R10-between-blocks", f"A {JSON_CALL} {JSON_CALL} B", "A B", [*RJ, *RJ], 0),
    ("R10-whitespace-only-answer", "  \n", "  \n", [], 0),
    ("R10-after-text-closer-not-swallowed", f"{JSON_CALL} x </tool_call>", "x </tool_call>", RJ, 0),
    (
        "R10-space-before-orphan-closer-kept",
        f"Hello{JSON_CALL} </tool_call>world",
        "Hello world",
        RJ,
        0,
    ),
    (
        "R10-blank-line-before-orphan-closer-kept",
        f"Hello{JSON_CALL}\n\n</function>World",
        "Hello\n\nWorld",
        RJ,
        0,
    ),
    (
        "R10-blank-line-between-blocks-kept",
        f"Para.{JSON_CALL}\n\n{JSON_CALL}Next",
        "Para.\n\nNext",
        [*RJ, *RJ],
        0,
    ),
    (
        "R10-last-non-empty-run-kept",
        f"A{JSON_CALL} </tool_call>\n\n</function>{JSON_CALL}B",
        "A\n\nB",
        [*RJ, *RJ],
        0,
    ),
    ("R10-run-before-closer-no-double", f"A {JSON_CALL} </tool_call>B", "A B", RJ, 0),
    (
        "R10-run-before-malformed-block-kept",
        f"A{JSON_CALL} <tool_call>{{x}}</tool_call>B",
        "A B",
        RJ,
        1,
    ),
    (
        "R10-run-before-prose-opener-kept",
        f"A{JSON_CALL} </tool_call><tool_call> x",
        "A <tool_call> x",
        RJ,
        0,
    ),
    ("R10-leading-run-before-closer-dropped", f" {JSON_CALL}\n</tool_call>B", "B", RJ, 0),
    ("R10-run-before-closer-at-end-dropped", f"A{JSON_CALL} </tool_call>", "A", RJ, 0),
    # R11 end of stream
    ("R11-partial-opener-released", "Hi <tool_c", "Hi <tool_c", [], 0),
    ("R11-partial-bare-opener-released", "Hi <function=web_se", "Hi <function=web_se", [], 0),
    ("R11-lone-opener", "Hi <tool_call>", "Hi ", [], 1),
    ("R11-lone-opener-whitespace", "Hi <tool_call>\n  ", "Hi ", [], 1),
    ("R11-cut-inside-function-tag", "Hi <tool_call>\n<func", "Hi ", [], 1),
    ("R11-lone-bare-opener", "Hi <function=web_search>", "Hi ", [], 1),
    ("R11-bare-cut-inside-parameter-tag", "Hi <function=web_search>\n<param", "Hi ", [], 1),
    ("R11-no-function-closer", "<tool_call><function=web_search><parameter=query>q", "", [], 1),
    (
        "R11-no-function-closer-after-parameter",
        "<tool_call><function=web_search><parameter=query>q</parameter>",
        "",
        [],
        1,
    ),
    ("R11-unfinished-json", '<tool_call>{"name": "web_search", "arguments": {', "", [], 1),
    (
        "R11-missing-tool_call-closer-json",
        '<tool_call>{"name": "a", "arguments": {}}',
        "",
        [("a", {})],
        0,
    ),
    (
        "R11-missing-tool_call-closer-xml",
        "<tool_call><function=a><parameter=b>c</parameter></function>",
        "",
        [("a", {"b": "c"})],
        0,
    ),
    (
        "R11-missing-fence-closer",
        '```\n{"name": "web_search", "arguments": {"query": "q"}}',
        "",
        Q,
        0,
    ),
    ("R11-partial-closer-after-block", f"{JSON_CALL} </tool_c", "</tool_c", RJ, 0),
    # R12 malformed
    ("R12-bad-json", "a <tool_call>{name: x}</tool_call> b", "a b", [], 1),
    ("R12-not-a-call", 'a <tool_call>{"x": 1}</tool_call> b', "a b", [], 1),
    (
        "R12-missing-brace-stops-at-closer",
        'a <tool_call>{"name": "x", "arguments": {}</tool_call> b',
        "a b",
        [],
        1,
    ),
    ("R12-bad-json-arguments", "<tool_call><function=a>{1}</function></tool_call> b", "b", [], 1),
    (
        "R12-json-arguments-not-object",
        "<tool_call><function=a>[1]</function></tool_call> b",
        "b",
        [],
        1,
    ),
    (
        "R12-bare-malformed-hidden-to-closer",
        "<function=web_search>\n<parameter=>x</function> after",
        "after",
        [],
        1,
    ),
    ("R12-two-bad-blocks", "<tool_call>{x}</tool_call><tool_call>[]</tool_call>", "", [], 2),
    (
        "R12-good-then-bad-function",
        "<tool_call><function=a></function><function=b>zz</function></tool_call>ok",
        "ok",
        [("a", {})],
        1,
    ),
    # R13 not the filter's job
    ("R13-think-is-text", f"<think>hmm</think>{JSON_CALL}", "<think>hmm</think>", RJ, 0),
    ("R13-call-inside-think", f"<think>{JSON_CALL}</think>", "<think></think>", RJ, 0),
    ("R13-duplicates-kept", f"{JSON_CALL}{JSON_CALL}", "", [*RJ, *RJ], 0),
    (
        "R13-arguments-not-validated",
        '<tool_call>{"name": "web_search", "arguments": {"limit": "x"}}</tool_call>',
        "",
        [("web_search", {"limit": "x"})],
        0,
    ),
]


@pytest.mark.parametrize(
    ("answer", "text", "calls", "malformed"),
    [pytest.param(*row[1:], id=row[0]) for row in RULES],
)
def test_rule(
    answer: str, text: str, calls: list[tuple[str, dict[str, Any]]], malformed: int
) -> None:
    assert run([answer]) == (text, calls, malformed)
    assert run(list(answer)) == (text, calls, malformed), "one character at a time"


def test_no_tools_offered_means_no_bare_or_untagged_calls() -> None:
    answer = '{"name": "web_search", "arguments": {}}'
    assert run([answer], tools=[]) == (answer, [], 0)
    bare = "<function=web_search>\n</function>"
    assert run([bare], tools=[]) == (bare, [], 0)
    assert run([JSON_CALL], tools=[]) == ("", RJ, 0)
    cut_short = '{"name": "web_search", "arguments": {"query": "q'
    assert run([cut_short], tools=[]) == (cut_short, [], 0)
