"""Benchmark: our reader against inscriptis with default settings, on the shared corpus.

Run from the repository root: ``python -m bench.extraction``. Both readers see every page
in turn (interleaved, so background load hits them alike), ``--reps`` times. It prints, per
set and overall: pages, mean budget recall for each reader, pages that came out empty, and
the throughput ratio (inscriptis time / our time; above 1 means we are faster). Our reader
does more work than inscriptis here: it also decodes the body, extracts the links and cuts
the text; inscriptis gets a ready ``str``.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

import inscriptis

from fetcher.extract import read_document
from testkit.corpus import CORPUS_ROOT, Page, budget_recall, load_pages

__all__ = ["main", "measure"]


def _ours(page: Page) -> str:
    # The corpus pages are UTF-8 (see its README), as an HTTP header would say.
    return read_document(page.html, content_type="text/html", charset="utf-8", url=page.url).text


def _inscriptis(page: Page) -> str:
    text: str = inscriptis.get_text(page.html.decode("utf-8", "replace"))
    return text


def measure(pages: list[Page], reps: int = 3) -> dict[str, dict[str, float]]:
    """Run both readers on every page, interleaved, and collect the figures.

    Args:
        pages: The corpus pages.
        reps: How many times each reader reads each page (the fastest time counts).

    Returns:
        Per set name (and ``"all"``): pages, recall and empty counts for both readers, and
        the summed best times.
    """
    readers = {"ours": _ours, "inscriptis": _inscriptis}
    rows: dict[str, dict[str, list[float]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    for page in pages:
        for name, reader in readers.items():
            best = float("inf")
            text = ""
            for _ in range(reps):
                started = time.perf_counter()
                text = reader(page)
                best = min(best, time.perf_counter() - started)
            for group in (page.set, "all"):
                rows[group][f"{name}_recall"].append(budget_recall(page.truth, text))
                rows[group][f"{name}_seconds"].append(best)
                rows[group][f"{name}_empty"].append(float(not text.strip()))
    summary: dict[str, dict[str, float]] = {}
    for group, columns in rows.items():
        summary[group] = {
            "pages": float(len(columns["ours_recall"])),
            **{
                key: statistics.fmean(values) if key.endswith("_recall") else sum(values)
                for key, values in columns.items()
            },
        }
    return summary


def _table(summary: dict[str, dict[str, float]]) -> str:
    lines = [
        "| set | pages | recall ours | recall inscriptis | empty ours/insc | ours s | insc s "
        "| throughput ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for group in sorted(summary, key=lambda g: (g == "all", g)):
        row = summary[group]
        lines.append(
            f"| {group} | {row['pages']:.0f} | {row['ours_recall']:.4f} "
            f"| {row['inscriptis_recall']:.4f} "
            f"| {row['ours_empty']:.0f}/{row['inscriptis_empty']:.0f} "
            f"| {row['ours_seconds']:.2f} | {row['inscriptis_seconds']:.2f} "
            f"| {row['inscriptis_seconds'] / row['ours_seconds']:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print the comparison table; exit quietly with a note when the corpus is missing."""
    parser = argparse.ArgumentParser(prog="python -m bench.extraction", description=__doc__)
    parser.add_argument("--corpus", type=Path, default=CORPUS_ROOT)
    parser.add_argument("--reps", type=int, default=3)
    # Called as main() by bench/__main__: defaults, whatever that command line holds.
    args = parser.parse_args(argv if argv is not None else [])
    if not (args.corpus / "manifest.jsonl").is_file():
        print(f"extraction corpus not found at {args.corpus}; skipping", file=sys.stderr)
        return
    pages = load_pages(args.corpus)
    print(f"extraction: {len(pages)} pages, best of {args.reps}, interleaved per page")
    print(_table(measure(pages, reps=args.reps)))
    print("throughput ratio = inscriptis-defaults time / our time (above 1: we are faster)")


if __name__ == "__main__":
    main(sys.argv[1:])
