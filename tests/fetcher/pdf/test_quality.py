"""The PDF reader meets its goal on the shared PDF corpus, and the hostile files fail safe.

The measures are ``testkit/pdf_corpus.py``'s (recall, order, damaged words, furniture per
page), averaged over documents; the bars are issue 16's goal, which every library tried
bare misses on order, damage and furniture at once (``bench/pdf.py`` prints them side by
side, with the time per page, which is not a test's business). The post-processing was
developed on one half of the corpus (odd document numbers) and is held to the same bars
on the other. The corpus lives beside the repository (``../shared``); without it the
tests are skipped, saying why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fetcher.pdf.result import PdfFailure, PdfProblem, PdfText
from fetcher.pdf.text import read_pdf
from fetcher.pdf.worker import extract_pdf
from testkit.pdf_corpus import PdfCase, Score, load_cases, mean_scores, score

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "pdf"

# Issue 16's goal. Measured when written (dev / confirm): recall 0.9998 / 0.9998, order
# 0.9989 / 0.9989, damage 0.00 % / 0.01 %, furniture 0.00 / 0.00 per page.
MIN_RECALL = 0.99
MIN_ORDER = 0.97
MAX_DAMAGE = 0.003
MAX_FURNITURE = 0.5


@pytest.fixture(scope="module")
def cases() -> list[PdfCase]:
    if not (CORPUS / "manifest.jsonl").is_file():
        pytest.skip(f"PDF corpus not found at {CORPUS} (expected ../shared beside the repo)")
    return load_cases(CORPUS)


@pytest.fixture(scope="module")
def scores(cases: list[PdfCase]) -> dict[str, Score]:
    result: dict[str, Score] = {}
    for case in cases:
        if case.kind == "quality":
            read = read_pdf(case.data)
            assert isinstance(read, PdfText), (case.id, read)
            result[case.id] = score(case, read.text)
    return result


def test_corpus_holds_the_documents(cases: list[PdfCase]) -> None:
    kinds = [case.kind for case in cases]
    assert (kinds.count("quality"), kinds.count("robustness")) == (80, 5)


@pytest.mark.parametrize(
    "group",
    [
        "half:dev",
        "half:confirm",
        "pdflatex-twocolumn",
        "pdflatex-report",
        "libreoffice-writer",
        "chromium-print",
    ],
)
def test_quality_meets_the_goal(group: str, cases: list[PdfCase], scores: dict[str, Score]) -> None:
    chosen = [
        scores[case.id]
        for case in cases
        if case.kind == "quality" and group in (f"half:{case.half}", case.producer)
    ]
    assert len(chosen) in (20, 40)
    mean = mean_scores(chosen)
    assert mean.recall >= MIN_RECALL, mean
    assert mean.order >= MIN_ORDER, mean
    assert mean.damage <= MAX_DAMAGE, mean
    assert mean.furniture_per_page <= MAX_FURNITURE, mean


def hostile(cases: list[PdfCase], name: str) -> PdfCase:
    return next(case for case in cases if case.id == f"robust-{name}")


async def test_the_encrypted_file_opens_with_the_empty_password(cases: list[PdfCase]) -> None:
    case = hostile(cases, "encrypted")
    result = await extract_pdf(case.data)
    assert isinstance(result, PdfText)
    assert score(case, result.text).recall >= MIN_RECALL


async def test_the_image_only_file_has_no_text_layer(cases: list[PdfCase]) -> None:
    result = await extract_pdf(hostile(cases, "imageonly").data)
    assert isinstance(result, PdfFailure)
    assert result.problem is PdfProblem.NO_TEXT


async def test_the_400_pages_are_read_whole_and_in_order(cases: list[PdfCase]) -> None:
    case = hostile(cases, "400pages")
    result = await extract_pdf(case.data)
    assert isinstance(result, PdfText)
    assert result.pages_read == 400
    measured = score(case, result.text)
    assert measured.recall >= MIN_RECALL
    assert measured.order >= MIN_ORDER


@pytest.mark.parametrize(
    ("name", "problem"),
    [("truncated", PdfProblem.TRUNCATED), ("flatebomb", PdfProblem.TOO_LARGE)],
)
async def test_truncated_and_oversized_files_are_refused_with_a_reason(
    cases: list[PdfCase], name: str, problem: PdfProblem
) -> None:
    result = await extract_pdf(hostile(cases, name).data)
    assert isinstance(result, PdfFailure)
    assert result.problem is problem
    assert result.detail
