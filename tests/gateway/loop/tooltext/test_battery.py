"""A generated battery for the text-tool-call filter (SPEC 4a), checked against an oracle.

Answers are composed from parts whose meaning is known in advance: call blocks in every
form R5 and R7 name (each with the calls it must give), malformed blocks (R12), prose that
only looks like a call (R2's rejected openers, R4's prose wrapper, R9's code, R8's JSON
away from the start, orphan closers), and whitespace between them. The oracle computes
what the reader must see from the parts alone (R10's whitespace rule: leading whitespace
before a block is dropped; after a block only the last whitespace run before the next
text is kept, and only when the visible text so far is non-empty and does not end in
whitespace), the calls in order and the malformed count. Every answer is then fed whole,
one character at a time, cut at every point, and cut at random points (R1: the result may
not depend on the chunking).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.gateway.loop.tooltext.cases import Calls, cut, run

SEED = 20260901
ANSWERS = 400
#: Answers up to this length are also cut at every point.
EVERY_SPLIT = 320


@dataclass(frozen=True)
class Block:
    """Text the filter removes: the calls it gives and the malformed blocks it counts."""

    text: str
    calls: Calls = field(default_factory=list)
    malformed: int = 0


@dataclass(frozen=True)
class Prose:
    """Text the reader sees unchanged (starts and ends with a non-space character)."""

    text: str


@dataclass(frozen=True)
class Space:
    """Whitespace between parts."""

    text: str


Part = Block | Prose | Space


def search(query: str, **more: Any) -> Calls:
    return [("web_search", {"query": query, **more})]


def json_call(query: str) -> str:
    return json.dumps({"name": "web_search", "arguments": {"query": query}})


def blocks(query: str) -> list[Block]:
    """Every removable form, for one query."""
    q = search(query)
    args = json.dumps({"query": query})
    xml_params = f"<parameter=query>\n{query}\n</parameter>\n"
    return [
        Block(f"<tool_call>{json_call(query)}</tool_call>", q),
        Block(f"<tool_call>\n{json_call(query)}\n</tool_call>", q),
        # R7: the closing tag is optional.
        Block(f"<tool_call>{json_call(query)}", q),
        Block(f'<tool_call>{{"name": "web_search", "parameters": {args}}}</tool_call>', q),
        Block(
            f'<tool_call>{{"name": "web_search", "arguments": {json.dumps(args)}}}</tool_call>',
            q,
        ),
        Block(
            '<tool_call>{"type": "function", "function": {"name": "web_search", '
            f'"arguments": {args}}}}}</tool_call>',
            q,
        ),
        Block(
            f'<tool_call>{{"id": "c1", "type": "function", "name": "web_search", '
            f'"arguments": {args}}}</tool_call>',
            q,
        ),
        # R7: an array of calls in one wrapper; any name inside a wrapper.
        Block(
            f'<tool_call>[{json_call(query)}, {{"name": "other", "arguments": {{}}}}]</tool_call>',
            [*q, ("other", {})],
        ),
        # R7: a string inside the JSON may hold the closing tag.
        Block(
            '<tool_call>{"name": "web_search", "arguments": {"query": "a </tool_call> b"}}'
            "</tool_call>",
            search("a </tool_call> b"),
        ),
        # R5: the XML form, wrapped and bare, typed by the schema (R6).
        Block(f"<tool_call>\n<function=web_search>\n{xml_params}</function>\n</tool_call>", q),
        Block(f"<function=web_search>\n{xml_params}</function>", q),
        Block(
            "<tool_call>\n<function=web_search>\n<parameter=limit>\n5\n</parameter>\n"
            f"{xml_params}</function>\n</tool_call>",
            search(query, limit=5),
        ),
        Block(f"<function=web_search>\n{args}\n</function>", q),
        Block(
            f"<tool_call>\n<function=web_search>\n{xml_params}</function>\n"
            "<function=fetch_page_content_recursive>\n<parameter=url>\nhttps://a.example/\n"
            "</parameter>\n</function>\n</tool_call>",
            [*q, ("fetch_page_content_recursive", {"url": "https://a.example/"})],
        ),
        # R12: recognised wrappers that give no call: hidden and counted.
        Block('<tool_call>{"name": "web_search"}</tool_call>', malformed=1),
        Block("<tool_call>{not json}</tool_call>", malformed=1),
        Block("<tool_call>[]</tool_call>", malformed=1),
        Block('<tool_call>{"name": "web_search", "arguments": [1]}</tool_call>', malformed=1),
    ]


#: Prose that a reader must see unchanged wherever it stands.
PROSE = [
    "The answer is 42.",
    "Rust 1.90 shipped [1].",
    "a < b and c > d",
    "x<y",
    "<tool>x</tool>",
    "<toolbox>",
    "<tool_calls>",
    "<TOOL_CALL>",
    "< tool_call>",
    "#include <functional>",
    "<function>",
    "<function=unknown>x</function>",
    "<function=unknown>\n<parameter=a>\nb\n</parameter>\n</function>",
    "<tool_call> is the tag's name",  # R4: a wrapper around prose is prose
    "<think>hm</think>",  # R13
    "x</tool_call>y",  # R10: an orphan closer inside text is text
    "a</function>b",
    f"Then {json_call('mid')} appears.",  # R8: untagged JSON away from the start
    f"`<tool_call>{json_call('code')}</tool_call>`",  # R9: inline code
    "``<function=web_search>``",
    f"Code:\n```\n<tool_call>{json_call('fenced')}</tool_call>\n```\nDone.",  # R9: a fence
    f"See:\n   ````json\n{json_call('fenced')}\n   ````\nok",
    f"Code:\r\n```\r\n<tool_call>{json_call('fenced')}\r\n```\r\nDone.",
]

SPACES = [" ", "\n", "\n\n", "  \n ", "\t", "\r\n"]


def initial(query: str) -> list[Block]:
    """R8: forms that are calls only as the first thing in the answer."""
    q = search(query)
    return [
        Block(json_call(query), q),
        Block(f"```json\n{json_call(query)}\n```", q),
        Block(f"```\n<tool_call>{json_call(query)}</tool_call>\n```", q),
        Block(f"```json\r\n{json_call(query)}\r\n```", q),
        Block(
            f"```xml\n<function=web_search>\n<parameter=query>\n{query}\n</parameter>\n"
            "</function>\n```",
            q,
        ),
    ]


def compose(rng: random.Random) -> list[Part]:
    parts: list[Part] = []
    if rng.random() < 0.3:
        parts.append(Space(rng.choice(SPACES)))
    if rng.random() < 0.25:
        first = rng.choice(initial(f"first {rng.randrange(100)}"))
        if first.text.startswith("`") and parts and parts[-1] == Space("\t"):
            parts.pop()  # R9: a tab indents the line past a fence's 3 spaces
        parts.append(first)
        if first.text.endswith("```"):
            parts.append(Space(rng.choice(["\n", "\n\n", "\n ", "\r\n"])))  # the line ends
    for _ in range(rng.randrange(1, 7)):
        if parts and isinstance(parts[-1], Prose | Block) and rng.random() < 0.6:
            parts.append(Space(rng.choice(SPACES)))
        if rng.random() < 0.5:
            parts.append(rng.choice(blocks(f"q{rng.randrange(100)} rust")))
        else:
            parts.append(Prose(rng.choice(PROSE)))
    if rng.random() < 0.3:
        parts.append(Space(rng.choice(SPACES)))
    return merge_spaces(parts)


def merge_spaces(parts: list[Part]) -> list[Part]:
    """Adjacent spaces are one run; two prose parts in a row get a space between them
    (so their text cannot run together into something else)."""
    out: list[Part] = []
    for part in parts:
        last = out[-1] if out else None
        if isinstance(part, Space) and isinstance(last, Space):
            out[-1] = Space(last.text + part.text)
        elif isinstance(part, Prose) and isinstance(last, Prose):
            out += [Space(" "), part]
        else:
            out.append(part)
    return out


def oracle(parts: list[Part]) -> tuple[str, Calls, int]:
    """What SPEC 4a says the reader sees, and the calls and malformed count."""
    visible = ""
    calls: Calls = []
    bad = 0
    started = False  # anything but whitespace came
    after_block = False
    pending = ""  # whitespace whose fate is not known yet
    for part in parts:
        if isinstance(part, Block):
            calls += part.calls
            bad += part.malformed
            if not started:
                pending = ""  # R10: leading whitespace before a first block is dropped
            started = after_block = True
        elif isinstance(part, Space):
            if after_block or not started:
                pending = part.text  # runs are merged, so this is the last run
            else:
                visible += part.text  # whitespace in prose
        else:
            if not started:
                visible += pending  # a text-only start keeps its leading whitespace
            elif after_block and pending and visible and not visible[-1].isspace():
                visible += pending
            pending = ""
            started, after_block = True, False
            visible += part.text
    if not started:
        visible += pending  # an answer of whitespace only is shown as it is
    return visible, calls, bad


def answers() -> list[tuple[str, tuple[str, Calls, int]]]:
    rng = random.Random(SEED)
    out = []
    for _ in range(ANSWERS):
        parts = compose(rng)
        out.append(("".join(p.text for p in parts), oracle(parts)))
    return out


CASES = answers()


@pytest.mark.parametrize(("answer", "expected"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_composed_answers_give_what_the_rules_say_however_cut(
    answer: str, expected: tuple[str, Calls, int]
) -> None:
    assert run([answer]) == expected
    assert run(list(answer)) == expected, "one character at a time"
    if len(answer) <= EVERY_SPLIT:
        for i in range(1, len(answer)):
            assert run(cut(answer, [i])) == expected, f"cut at {i}"
    rng = random.Random(answer)
    for _ in range(8):
        points = [rng.randrange(len(answer) + 1) for _ in range(rng.randrange(1, 12))]
        assert run(cut(answer, points)) == expected, f"cut at {sorted(points)}"


def test_the_battery_reaches_every_kind_of_part() -> None:
    texts = [answer for answer, _ in CASES]
    assert sum(1 for _, (_, calls, _) in CASES if calls) > ANSWERS // 2
    assert sum(1 for _, (_, _, bad) in CASES if bad) > ANSWERS // 10
    assert all(any(p in t for t in texts) for p in PROSE)
    # Every form of block and of answer-initial call, told apart by a piece of its text.
    forms = [
        '"parameters"',
        '"type": "function", "function"',
        '"id": "c1"',
        '[{"name"',
        "a </tool_call> b",
        "<parameter=limit>",
        "<function=fetch_page_content_recursive>",
        '<function=web_search>\n{"query"',
        "{not json}",
        "<tool_call>[]",
        '"arguments": [1]',
        '"arguments": "{',
    ]
    assert all(any(form in t for t in texts) for form in forms)
    starts = ("{", "```json\n{", "```\n<tool_call>", "```xml\n<function=")
    assert all(any(t.lstrip().startswith(start) for t in texts) for start in starts)
