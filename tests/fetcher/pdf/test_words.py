"""Word repairs for PDF text: line-end hyphens, ligatures, note numbers (pure)."""

from __future__ import annotations

import gzip
from importlib import resources

import pytest

from fetcher.pdf.words import (
    WordList,
    Words,
    fold_ligatures,
    hyphen_pair,
    join_lines,
    strip_note_number,
    word_list,
)

KNOWN = frozenset(["extraction", "so", "many", "free", "well", "known", "cooperate", "co"])


@pytest.mark.parametrize(
    ("left", "right", "joined"),
    [
        pytest.param("extrac-", "tion of", "extraction of", id="word-list-word"),
        pytest.param("so-", "many", "so-many", id="two-known-words"),
        pytest.param("BPA-", "free", "BPA-free", id="acronym-before"),
        pytest.param("MacBook-", "like", "MacBook-like", id="brand-before"),
        pytest.param("pro-", "Morales", "pro-Morales", id="name-after"),
        pytest.param("co-", "operate", "cooperate", id="all-known-joins"),
        pytest.param("https://a.example/some-", "path/", "https://a.example/some-path/", id="url"),
        pytest.param("since 1990-", "2000", "since 1990-2000", id="numbers"),
        pytest.param("a dash -", "then", "a dash - then", id="spaced-dash"),
        pytest.param("no hyphen", "here", "no hyphen here", id="plain"),
        pytest.param("中文的句子", "继续下去。", "中文的句子继续下去。", id="chinese-no-space"),
    ],
)
def test_line_end_hyphen_decisions(left: str, right: str, joined: str) -> None:
    assert join_lines(left, right, Words([], known=KNOWN)) == joined


def test_the_document_itself_outranks_the_word_list() -> None:
    # "well-known" written mid-line twice: the break keeps its hyphen although "wellknown"
    # is unknown either way; "extraction" split is joined because the text writes it whole.
    words = Words(["a well-known fact, well-known indeed", "extraction"], known=frozenset())
    assert join_lines("a well-", "known case", words) == "a well-known case"
    assert join_lines("the extrac-", "tion", words) == "the extraction"


@pytest.mark.parametrize(
    ("habit", "joined"),
    [
        pytest.param([("extrac", "tion")] * 3, "Zurbriggen", id="hyphenating-document-joins"),
        pytest.param([("so", "many")] * 3, "Zurbrig-gen", id="compounds-only-document-keeps"),
    ],
)
def test_unknown_words_follow_the_documents_habit(
    habit: list[tuple[str, str]], joined: str
) -> None:
    words = Words([], known=KNOWN)
    words.learn(habit)
    assert join_lines("Zurbrig-", "gen", words) == joined


def test_the_shipped_word_list_knows_english_words() -> None:
    words = Words([])
    assert join_lines("hope-", "fully", words) == "hopefully"
    assert join_lines("third-", "quarter", words) == "third-quarter"


def test_hyphen_pair_takes_the_letters_around_the_hyphen() -> None:
    assert hyphen_pair("the (extrac-", "tion) of") == ("extrac", "tion")
    assert hyphen_pair("ends 12-", "ish") is None


def test_ligatures_fold_to_letters() -> None:
    assert (
        fold_ligatures("\ufb01nd the \ufb00ect, \ufb03ce, \ufb04e") == "find the ffect, ffice, ffle"
    )


@pytest.mark.parametrize(
    ("text", "stripped"),
    [
        ("1Originally published", "Originally published"),
        ("2. Boeing also", "Boeing also"),
        ("3) A note", "A note"),
        ("* A starred note", "A starred note"),
        ("1990 was a year", "1990 was a year"),
        ("Plain text", "Plain text"),
    ],
)
def test_note_numbers_are_stripped(text: str, stripped: str) -> None:
    assert strip_note_number(text) == stripped


@pytest.mark.parametrize(
    ("word", "known"),
    [
        ("apple", True),
        ("apples", True),
        ("aardvark", True),
        ("zulu", True),
        ("appl", False),
        ("", False),
        ("zzzzz", False),
        ("a\nb", False),
    ],
)
def test_word_list_bisection(word: str, known: bool) -> None:
    words = WordList("aardvark\napple\napples\nbanana\nzulu\n")
    assert (word in words) is known


def test_the_shipped_list_is_sorted_as_the_bisection_compares() -> None:
    data = resources.files("fetcher").joinpath("data/words.txt.gz").read_bytes()
    lines = gzip.decompress(data).decode("utf-8").split("\n")[:-1]
    assert lines == sorted(set(lines))
    shipped = word_list()
    assert all(word in shipped for word in ["hopefully", "colorado", "abbé", "a", lines[-1]])
    assert "somany" not in shipped
