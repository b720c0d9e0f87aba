"""The reader fills the page budget with the article: recall and precision on the shared corpus.

Budget recall is the share of the ground-truth article's words (a bag of lower-cased ``\\w+``
tokens) found in the first 12,000 characters of our text; budget precision is the share of the
words in those 12,000 characters that are article words; see ``testkit/corpus.py`` and
``shared/notes/extraction.md``. The thresholds are the goal of issue 13, not a measurement
minus a margin. The corpus lives beside the repository (``../shared``); CI clones the
repository next to it. Without it the test is skipped, saying why.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from fetcher.html.extract import read_document
from testkit.corpus import Page, budget_precision, budget_recall, load_pages

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "extraction"

# The ceilings (the article text itself in 12,000 characters) are 0.983 and 0.883.
MIN_RECALL = {"aeb": 0.975, "readability": 0.86}
MIN_PRECISION = {"aeb": 0.90, "readability": 0.90}
# Pages whose budget recall falls more than 5 points below the article text's own: the
# reader before main-content detection had 11 (shared/notes/extraction.md).
MAX_BELOW_ORACLE = 11


@pytest.fixture(scope="module")
def pages() -> list[Page]:
    if not (CORPUS / "manifest.jsonl").is_file():
        pytest.skip(f"extraction corpus not found at {CORPUS} (expected ../shared beside the repo)")
    return load_pages(CORPUS)


@pytest.fixture(scope="module")
def texts(pages: list[Page]) -> dict[str, str]:
    # The corpus pages are UTF-8, as a server's header would say (see the corpus README).
    return {
        page.id: read_document(
            page.html, content_type="text/html", charset="utf-8", url=page.url
        ).text
        for page in pages
    }


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
