"""The reader fills the page budget with the article: recall and precision on the shared corpora.

Budget recall is the share of the ground-truth article's words (a bag of lower-cased ``\\w+``
tokens) found in the first 12,000 characters of our text; budget precision is the share of the
words in those 12,000 characters that are article words; see ``testkit/corpus.py`` and
``shared/notes/extraction.md``. The ``aeb`` and ``readability`` thresholds are the goal of
issue 13, not a measurement minus a margin. ``wcxb-dev`` (forums, docs, listings, collections,
products, services: issue 25) is gated on all its pages, on each page type, on its ``check``
half (the half the reader was not tuned on) and on its ``with``/``without`` snippets; its gates
sit just below what the reader reaches (docs/reader.md), where issue 25's goals were out of
reach. The corpora live beside the repository (``../shared``); CI clones the repository next
to them. Without them the test is skipped, saying why.
"""

from __future__ import annotations

import statistics

import pytest

from fetcher.html.extract import read_document
from testkit.corpus import (
    CORPUS_ROOT,
    WCXB_ROOT,
    Page,
    budget_precision,
    budget_recall,
    holds_snippet,
    load_pages,
)

# The ceilings (the article text itself in 12,000 characters) are 0.983 and 0.883.
MIN_RECALL = {"aeb": 0.975, "readability": 0.86}
MIN_PRECISION = {"aeb": 0.90, "readability": 0.90}
# Pages whose budget recall falls more than 5 points below the article text's own: the
# reader before main-content detection had 11 (shared/notes/extraction.md).
MAX_BELOW_ORACLE = 11

WCXB_TYPES = ("article", "collection", "documentation", "forum", "listing", "product", "service")
# wcxb-dev's ceiling is 0.913 (documentation 0.730: its pages are long). Issue 25 asks for
# 0.80 / 0.85 on all pages and 0.70 recall on each type; main had 0.711 / 0.788 (check half
# 0.682 / 0.772). These gates sit just below what the reader reaches: 0.790 / 0.823, check
# half 0.774 / 0.813 (docs/reader.md).
WCXB_MIN = {"all": (0.79, 0.82), "check": (0.77, 0.81)}
# Main had 0.834, 0.629, 0.704, 0.820, 0.541, 0.684, 0.767.
WCXB_MIN_TYPE_RECALL = {
    "article": 0.83,
    "collection": 0.75,
    "documentation": 0.70,
    # 0.822 before repeated passages were read once: a reply quoting a post whole (0544)
    # reads the quote once; forum precision went 0.774 -> 0.782 for it. 0.868 since a
    # thread's first post widens to its replies.
    "forum": 0.86,
    "listing": 0.74,
    # 0.754 before a product's JSON-LD description was read when the page shows none.
    "product": 0.78,
    "service": 0.83,
}
# Shares of all wcxb-dev snippets: ``with`` found, ``without`` absent (issue 25: 0.85 each;
# main had 0.688 and 0.879, the reader has 0.764 and 0.896).
WCXB_MIN_WITH = 0.76
WCXB_MIN_WITHOUT = 0.89


def _read(pages: list[Page]) -> dict[str, str]:
    # The corpus pages are UTF-8, as a server's header would say (see the corpus README).
    return {
        page.id: read_document(
            page.html, content_type="text/html", charset="utf-8", url=page.url
        ).text
        for page in pages
    }


@pytest.fixture(scope="module")
def pages() -> list[Page]:
    if not (CORPUS_ROOT / "manifest.jsonl").is_file():
        pytest.skip(f"extraction corpus not found at {CORPUS_ROOT} (expected ../shared)")
    return load_pages(CORPUS_ROOT)


@pytest.fixture(scope="module")
def texts(pages: list[Page]) -> dict[str, str]:
    return _read(pages)


@pytest.fixture(scope="module")
def wcxb() -> list[Page]:
    if not (WCXB_ROOT / "manifest.jsonl").is_file():
        pytest.skip(f"wcxb-dev corpus not found at {WCXB_ROOT} (expected ../shared)")
    return load_pages(WCXB_ROOT)


@pytest.fixture(scope="module")
def wcxb_texts(wcxb: list[Page]) -> dict[str, str]:
    return _read(wcxb)


def test_corpus_holds_the_real_pages(pages: list[Page]) -> None:
    counts = {name: sum(page.set == name for page in pages) for name in MIN_RECALL}
    assert counts == {"aeb": 181, "readability": 94}


@pytest.mark.parametrize("name", sorted(MIN_RECALL))
def test_budget_recall_meets_the_bar(name: str, pages: list[Page], texts: dict[str, str]) -> None:
    recall = statistics.fmean(
        budget_recall(page.truth, texts[page.id]) for page in pages if page.set == name
    )
    assert recall >= MIN_RECALL[name], f"{name}: mean budget recall {recall:.4f}"


@pytest.mark.parametrize("name", sorted(MIN_PRECISION))
def test_budget_precision_meets_the_bar(
    name: str, pages: list[Page], texts: dict[str, str]
) -> None:
    precision = statistics.fmean(
        budget_precision(page.truth, texts[page.id]) for page in pages if page.set == name
    )
    assert precision >= MIN_PRECISION[name], f"{name}: mean budget precision {precision:.4f}"


def test_few_pages_fall_far_below_the_article_texts_own_recall(
    pages: list[Page], texts: dict[str, str]
) -> None:
    below = [
        page.id for page in pages if budget_recall(page.truth, texts[page.id]) < page.oracle - 0.05
    ]
    assert len(below) <= MAX_BELOW_ORACLE, below


def test_no_page_reads_empty(texts: dict[str, str]) -> None:
    assert [page_id for page_id, text in texts.items() if not text.strip()] == []


def test_wcxb_holds_forty_pages_of_each_type_in_two_halves(wcxb: list[Page]) -> None:
    counts = {kind: sum(page.page_type == kind for page in wcxb) for kind in WCXB_TYPES}
    assert counts == dict.fromkeys(WCXB_TYPES, 40)
    halves = {half: sum(page.half == half for page in wcxb) for half in ("dev", "check")}
    assert halves == {"dev": 139, "check": 141}
    assert all(page.with_ and page.without for page in wcxb)


@pytest.mark.parametrize("group", sorted(WCXB_MIN))
def test_wcxb_budget_recall_and_precision_meet_the_bar(
    group: str, wcxb: list[Page], wcxb_texts: dict[str, str]
) -> None:
    chosen = [page for page in wcxb if group in ("all", page.half)]
    recall = statistics.fmean(budget_recall(page.truth, wcxb_texts[page.id]) for page in chosen)
    precision = statistics.fmean(
        budget_precision(page.truth, wcxb_texts[page.id]) for page in chosen
    )
    min_recall, min_precision = WCXB_MIN[group]
    assert recall >= min_recall, f"{group}: recall {recall:.4f}"
    assert precision >= min_precision, f"{group}: precision {precision:.4f}"


@pytest.mark.parametrize("kind", WCXB_TYPES)
def test_wcxb_budget_recall_of_each_page_type_meets_the_bar(
    kind: str, wcxb: list[Page], wcxb_texts: dict[str, str]
) -> None:
    recall = statistics.fmean(
        budget_recall(page.truth, wcxb_texts[page.id]) for page in wcxb if page.page_type == kind
    )
    assert recall >= WCXB_MIN_TYPE_RECALL[kind], f"{kind}: mean budget recall {recall:.4f}"


def test_wcxb_snippets_are_found_and_boilerplate_left_out(
    wcxb: list[Page], wcxb_texts: dict[str, str]
) -> None:
    found = [holds_snippet(s, wcxb_texts[page.id]) for page in wcxb for s in page.with_]
    absent = [not holds_snippet(s, wcxb_texts[page.id]) for page in wcxb for s in page.without]
    assert statistics.fmean(found) >= WCXB_MIN_WITH, f"with found {statistics.fmean(found):.4f}"
    assert statistics.fmean(absent) >= WCXB_MIN_WITHOUT, (
        f"without absent {statistics.fmean(absent):.4f}"
    )
