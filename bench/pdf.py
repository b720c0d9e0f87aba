"""Benchmark: our PDF reader against PDFium used bare, on the shared PDF corpus.

Run from the repository root: ``python -m bench.pdf``. Both readers read every quality PDF
in turn (interleaved, so background load hits them alike), ``--reps`` times, in this
process (the worker process's start-up is timed apart, on the hostile files). "Bare" is
pypdfium2's ``get_text_range()`` per page, pages joined by a line break: what a caller gets
from the library without our layout and repairs. Per producer, and for the two fixed
halves of the corpus (``dev``: odd document numbers, on which the post-processing was
developed; ``confirm``: even ones), it prints the five measures of ``testkit/pdf_corpus.py``:
recall, order, damaged words, furniture leaked per page, milliseconds per page (wall
clock: the best of the repetitions, summed over documents, divided by their pages; CPU:
this process's time over all repetitions, which a loaded machine inflates less). Then
each hostile file through :func:`fetcher.pdf.worker.extract_pdf` with the default limits:
the outcome, the wall-clock time and the largest worker's peak memory so far.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pypdfium2 as pdfium

from fetcher.pdf.result import PdfText
from fetcher.pdf.text import read_pdf
from fetcher.pdf.words import word_list
from fetcher.pdf.worker import extract_pdf
from testkit.pdf_corpus import PDF_CORPUS_ROOT, PdfCase, Score, load_cases, mean_scores, score

__all__ = ["bare_text", "main", "our_text"]


def bare_text(data: bytes) -> str:
    """PDFium used bare: each page's text as the library gives it, pages joined."""
    document = pdfium.PdfDocument(data)
    try:
        texts = []
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            texts.append(textpage.get_text_range())
            textpage.close()
            page.close()
        return "\n".join(texts)
    finally:
        document.close()


def our_text(data: bytes) -> str:
    """Our reader, in this process (no worker): the text, or ``""`` for a failure."""
    result = read_pdf(data)
    return result.text if isinstance(result, PdfText) else ""


@dataclasses.dataclass(slots=True)
class _Rows:
    scores: list[Score] = dataclasses.field(default_factory=list)
    seconds: float = 0.0  # wall clock, the best repetition of each document, summed
    cpu: float = 0.0  # process time, all repetitions, summed
    pages: int = 0
    reps: int = 1


def measure(cases: list[PdfCase], reps: int = 3) -> dict[tuple[str, str], _Rows]:
    """Read every case with both readers, interleaved; group by (reader, group).

    Groups are the producer, ``half:dev`` / ``half:confirm`` and ``all``.
    """
    readers: dict[str, Callable[[bytes], str]] = {"bare": bare_text, "ours": our_text}
    rows: dict[tuple[str, str], _Rows] = collections.defaultdict(_Rows)
    for case in cases:
        for name, reader in readers.items():
            best = float("inf")
            cpu = 0.0
            text = ""
            for _ in range(reps):
                started, started_cpu = time.perf_counter(), time.process_time()
                text = reader(case.data)
                best = min(best, time.perf_counter() - started)
                cpu += time.process_time() - started_cpu
            result = score(case, text)
            for group in (case.producer, f"half:{case.half}", "all"):
                row = rows[(name, group)]
                row.scores.append(result)
                row.seconds += best
                row.cpu += cpu
                row.pages += case.pages
                row.reps = reps
    return rows


def _table(rows: dict[tuple[str, str], _Rows]) -> str:
    groups = sorted(
        {group for _, group in rows}, key=lambda g: (g == "all", g.startswith("half"), g)
    )
    lines = [
        "| group | docs | pages | reader | recall | order | damaged words | furniture / page "
        "| ms / page | CPU ms / page |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for group in groups:
        for name in ("bare", "ours"):
            row = rows[(name, group)]
            mean = mean_scores(row.scores)
            lines.append(
                f"| {group} | {len(row.scores)} | {row.pages} | {name} | {mean.recall:.4f} "
                f"| {mean.order:.4f} | {100 * mean.damage:.2f} % | {mean.furniture_per_page:.2f} "
                f"| {1000 * row.seconds / max(1, row.pages):.1f} "
                f"| {1000 * row.cpu / max(1, row.pages * row.reps):.1f} |"
            )
    return "\n".join(lines)


def _hostile(cases: list[PdfCase]) -> str:
    lines = [
        "| file | expected | outcome | text chars | recall | ms (worker, wall) "
        "| largest worker RSS so far |",
        "|---|---|---|---|---|---|---|",
    ]
    for case in cases:
        started = time.perf_counter()
        result = asyncio.run(extract_pdf(case.data))
        elapsed = 1000 * (time.perf_counter() - started)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
        if isinstance(result, PdfText):
            outcome = f"text ({result.pages_read}/{result.pages} pages)"
            chars = str(len(result.text))
            recall = f"{score(case, result.text).recall:.4f}" if case.truth else "-"
        else:
            outcome = f"{result.problem}: {result.detail}"
            chars, recall = "0", "-"
        lines.append(
            f"| {case.id} | {case.expect} | {outcome} | {chars} | {recall} | {elapsed:.0f} "
            f"| {peak} MiB |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print both tables; exit quietly with a note when the corpus is missing."""
    parser = argparse.ArgumentParser(prog="python -m bench.pdf", description=__doc__)
    parser.add_argument("--corpus", type=Path, default=PDF_CORPUS_ROOT)
    parser.add_argument("--reps", type=int, default=3)
    # Called as main() by bench/__main__: defaults, whatever that command line holds.
    args = parser.parse_args(argv if argv is not None else [])
    if not (args.corpus / "manifest.jsonl").is_file():
        print(f"PDF corpus not found at {args.corpus}; skipping", file=sys.stderr)
        return
    cases = load_cases(args.corpus)
    quality = [case for case in cases if case.kind == "quality"]
    word_list()  # loaded once per process: not part of any one document's time
    print(f"pdf: {len(quality)} quality PDFs, best of {args.reps}, interleaved per document")
    print(_table(measure(quality, reps=args.reps)))
    print("\nhostile files, each through the worker process with the default limits:")
    print(_hostile([case for case in cases if case.kind == "robustness"]))


if __name__ == "__main__":
    main(sys.argv[1:])
