"""Shared fixtures for the text-tool-call filter tests: offered tools, a runner, a corpus."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from gateway.loop.tooltext.filter import TextToolFilter

WEB_SEARCH: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "queries": {"type": "array", "items": {"type": "string"}},
                "kind": {"type": "string", "enum": ["jobs", "people"]},
                "time_range": {"type": "string"},
                "limit": {"type": "integer"},
                "fresh": {"type": "boolean"},
                "filters": {"type": "object"},
                "score": {"type": "number"},
                "maybe": {"type": ["integer", "null"]},
            },
            "required": ["query"],
        },
    },
}
FETCH: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "fetch_page_content_recursive",
        "description": "Read a web page as plain text.",
        "parameters": {
            "type": "object",
            "properties": {"url": {"type": "string"}},
            "required": ["url"],
        },
    },
}
TOOLS: list[dict[str, Any]] = [WEB_SEARCH, FETCH]

Calls = list[tuple[str, dict[str, Any]]]
Result = tuple[str, Calls, int]


def run(chunks: Iterable[str], tools: Sequence[dict[str, Any]] = TOOLS) -> Result:
    """Feed ``chunks`` to a fresh filter and return the total text, calls and malformed count."""
    f = TextToolFilter(list(tools))
    texts: list[str] = []
    calls: Calls = []
    bad = 0
    for out in [*(f.feed(c) for c in chunks), f.close()]:
        texts.append(out.text)
        calls.extend((c.name, c.arguments) for c in out.calls)
        bad += out.malformed
    return "".join(texts), calls, bad


def steps(chunks: Iterable[str], tools: Sequence[dict[str, Any]] = TOOLS) -> list[str]:
    """The text released by each feed() and by close(), in order."""
    f = TextToolFilter(list(tools))
    return [*(f.feed(c).text for c in chunks), f.close().text]


def cut(text: str, points: Iterable[int]) -> list[str]:
    """Cut ``text`` at the given indices (any order, duplicates allowed)."""
    bounds = [0, *sorted(set(points)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


XML_CALL = (
    "<tool_call>\n<function=web_search>\n<parameter=query>\nrust jobs berlin\n</parameter>\n"
    "<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>"
)
JSON_CALL = '<tool_call>\n{"name": "web_search", "arguments": {"query": "rust jobs"}}\n</tool_call>'

# Realistic answers, each a whole model response. Every one must give the same result however
# it is cut into chunks (R1).
CORPUS: dict[str, str] = {
    "prose": (
        "Rust 1.80 stabilised LazyCell and LazyLock [1]. The release also added exclusive "
        "ranges in patterns [2].\n\nIn short: upgrade when you can.\n"
    ),
    "prose-markdown": (
        "## Summary\n\n- First point, with a < b and c > d.\n- Second: `x < y`.\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n"
    ),
    "fence-with-tag": (
        "The model writes calls like this:\n\n```xml\n<tool_call>\n<function=web_search>\n"
        "<parameter=query>\nx\n</parameter>\n</function>\n</tool_call>\n```\n\nThat is all.\n"
    ),
    "fence-indented-long": (
        "Example:\n   ````\n```\n<tool_call>{}</tool_call>\n```\n   ````\nAfter <tool_call>"
        '{"name": "web_search", "arguments": {"query": "q"}}</tool_call> done.'
    ),
    "inline-code": "Wrap the call in `<tool_call>` tags, or ``<function=web_search>`` here.\nOk.",
    "inline-code-unclosed": "A lone ` <tool_call> stays code\n<tool_call> hello",
    "xml-call": f"Let me search for that.\n\n{XML_CALL}\n",
    "xml-call-then-text": f"{XML_CALL}\n\nThe answer is 42.",
    "xml-bare": (
        "Searching.\n<function=web_search>\n<parameter=query>\nq\n</parameter>\n</function>\n"
        "</tool_call>\nMore."
    ),
    "xml-two-functions": (
        "<tool_call>\n<function=web_search>\n<parameter=query>\na\n</parameter>\n</function>\n"
        "<function=fetch_page_content_recursive>\n<parameter=url>\nhttps://e.org/\n"
        "</parameter>\n</function>\n</tool_call>"
    ),
    "xml-missing-closer": (
        "<tool_call>\n<function=web_search>\n<parameter=query>\nfirst\n<parameter=limit>\n3\n"
        "</function>\n</tool_call>"
    ),
    "xml-value-with-tags": (
        "<tool_call>\n<function=web_search>\n<parameter=query>\na</parameter> b </tool_call>\n"
        "</parameter>\n</function>\n</tool_call>Done"
    ),
    "json-call": f"I will look it up.\n{JSON_CALL}\nThen answer.",
    "json-two-calls": f"{JSON_CALL}\n\n{JSON_CALL} \n",
    "json-array": (
        '<tool_call>[{"name": "web_search", "arguments": {"query": "a"}}, {"type": "function",'
        ' "function": {"name": "fetch_page_content_recursive", "arguments": "{\\"url\\": '
        '\\"https://e.org\\"}"}}]</tool_call>'
    ),
    "json-string-with-closer": (
        'x <tool_call>{"name": "web_search", "arguments": {"query": "</tool_call> [}{"}}'
        "</tool_call> y"
    ),
    "untagged-call": '  {"name": "web_search", "arguments": {"query": "q"}}\n\nNow the text.',
    "untagged-json-answer": '{"name": "Alice", "age": 3}\nthat is JSON',
    "untagged-unknown-tool": '{"name": "other", "arguments": {}} rest',
    "untagged-unknown-name-cut": '{"name": "John Smith", "arguments": {"x": 1',
    "untagged-nested-unknown-name": (
        '{"type": "function", "function": {"name": "Jo\\u0068n", "arguments": {}}} and text'
    ),
    "untagged-nested-call": (
        ' {"type": "function", "function": {"arguments": {"query": "q"}, "name": "web_search"}}'
        "\n\nText."
    ),
    "fence-unknown-name-cut": '```json\n{"name": "John", "arguments": {"x": 1',
    "gap-closer-after-space": f"Hello{JSON_CALL} </tool_call>world",
    "gap-blank-line-closer": f"Hello{JSON_CALL}\n\n</function>World",
    "gap-between-blocks": f"Para.{JSON_CALL}\n\n{JSON_CALL}Next",
    "gap-mixed": (
        f"A{JSON_CALL} </tool_call>\n\n</function> <tool_call>{{x}}</tool_call>\n"
        f"{XML_CALL}</tool_call><tool_call> B"
    ),
    "untagged-not-at-start": 'Text {"name": "web_search", "arguments": {"query": "q"}}',
    "fence-call-json": (
        '```json\n{"name": "web_search", "arguments": {"query": "q"}}\n```\nThat was a call.'
    ),
    "fence-call-xml": f"```xml\n{XML_CALL}\n{JSON_CALL}\n```\n",
    "fence-code-start": "```python\nprint('<tool_call>')\nx = {1: 2}\n```\nExplained above.",
    "fence-unclosed-call": '```\n{"name": "web_search", "arguments": {"query": "q"}}',
    "malformed-json": "Before <tool_call>{name: web_search}</tool_call> after",
    "malformed-valid-json": 'a <tool_call>{"foo": 1}</tool_call> b',
    "malformed-xml": "<tool_call>\n<function=web_search>\nhello\n</tool_call>\nvisible",
    "truncated-xml": "Searching now.\n<tool_call>\n<function=web_search>\n<parameter=query>\nq",
    "truncated-json": 'Searching.\n<tool_call>{"name": "web_search", "argu',
    "lone-opener": "Answer.\n<tool_call>\n",
    "orphan-closers": "Stray </tool_call> and </function> in prose stay.",
    "lookalikes": (
        "<tool> <toolbox> <tool_calls> <TOOL_CALL> < tool_call> <function> "
        "<function=unknown> <tool_call > <functions> all text"
    ),
    "tool-call-prose": "The <tool_call> tag opens a call. <tool_call>See?",
    "think": (
        "<think>I should search.</think>\n<tool_call>\n"
        '{"name": "web_search", "arguments": {"query": "q"}}\n</tool_call>'
    ),
    "crlf": (
        "<tool_call>\r\n<function=web_search>\r\n<parameter=query>\r\nq\r\n</parameter>\r\n"
        "</function>\r\n</tool_call>\r\nok"
    ),
    "partial-at-end": "The tag is <tool_ca",
    "bare-function-prose": "Use <function=web_search> to search.",
    "html": "<b>bold</b> <i>x</i> <a href='y'>z</a> <",
    "unicode": 'Grüße — 日本語 <tool_call>{"name": "web_search", "arguments": {"query": "é"}}',
}
