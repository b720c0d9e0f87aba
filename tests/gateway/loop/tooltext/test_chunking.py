"""R1: the filter's results do not depend on how the answer was cut into chunks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.gateway.loop.tooltext.cases import CORPUS, cut, run

SHORT = 400  # answers up to this length are tried at every split point


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_split_point_and_single_characters_agree(name: str) -> None:
    answer = CORPUS[name]
    whole = run([answer])
    assert run(list(answer)) == whole, "one character at a time"
    if len(answer) <= SHORT:
        for i in range(1, len(answer)):
            assert run(cut(answer, [i])) == whole, f"split at {i}"
            assert run(cut(answer, [i, i + 1])) == whole, f"split around {i}"


@st.composite
def chunked(draw: st.DrawFn, answers: list[str]) -> tuple[str, list[str]]:
    answer = draw(st.sampled_from(answers))
    points = draw(st.lists(st.integers(0, len(answer)), max_size=max(1, len(answer) // 2)))
    return answer, cut(answer, points)


@given(chunked(list(CORPUS.values())))
def test_random_partitions_of_the_corpus_agree(case: tuple[str, list[str]]) -> None:
    answer, chunks = case
    assert "".join(chunks) == answer
    assert run(chunks) == run([answer])


@given(chunked(["".join(CORPUS.values()), "\n\n".join(CORPUS.values())]))
def test_random_partitions_of_a_long_answer_agree(case: tuple[str, list[str]]) -> None:
    answer, chunks = case
    assert run(chunks) == run([answer])


# Pieces that sit on every decision boundary of the state machine; random answers built from
# them reach states a hand-written corpus would miss.
PIECES = [
    "<tool_call>",
    "</tool_call>",
    "<function=web_search>",
    "<function=",
    "web_search",
    "</function>",
    "<parameter=query>",
    "<parameter=limit>",
    "</parameter>",
    "<parameter=",
    "<",
    ">",
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    ":",
    ",",
    '"name"',
    '"arguments"',
    '"web_search"',
    '"other"',
    '"function"',
    '"type"',
    '"query"',
    "{}",
    "`",
    "```",
    "````",
    "~~~",
    "\n",
    "\r\n",
    " ",
    "   ",
    "\t",
    "text",
    "5",
    "true",
    "=",
    "/",
    "json",
    "<think>",
    "<tool",
    "</",
    "<function=x>",
    '{"name": "web_search", "arguments": {"query": "q"}}',
]


@given(
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.lists(st.integers(0, 400), max_size=30),
)
def test_random_answers_from_tag_pieces_agree(answer: str, points: list[int]) -> None:
    chunks = cut(answer, [p for p in points if p <= len(answer)])
    whole = run([answer])
    assert run(chunks) == whole
    assert run(list(answer)) == whole


@given(st.text(alphabet='<>{}[]`"\\/=:, \n_abcfinotul', max_size=80))
def test_random_text_over_a_tag_alphabet_agrees(answer: str) -> None:
    whole = run([answer])
    assert run(list(answer)) == whole
    text, _calls, _bad = whole
    assert len(text) <= len(answer)


@given(st.text(max_size=60), st.lists(st.integers(0, 60), max_size=8))
def test_any_text_is_handled_and_agrees(answer: str, points: list[int]) -> None:
    whole = run([answer])
    assert run(cut(answer, [p for p in points if p <= len(answer)])) == whole
