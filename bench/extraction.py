"""Benchmark: our reader against inscriptis with default settings, on the shared corpus.

Run from the repository root: ``python -m bench.extraction``. Both readers see every page
in turn (interleaved, so background load hits them alike), ``--reps`` times; each counts its
fastest CPU time (``time.process_time``: both are single-threaded CPU work, and on a shared
machine the CPU time of a run does not grow with other people's load as its wall-clock time
does). It prints, per
set and overall, then per half of each set (``dev``, ``check``; see ``testkit/corpus.py``):
pages, budget recall and budget precision for each reader, pages more than 5 points of budget
recall below the oracle (the article text itself), pages that came out empty, and the
throughput ratio (inscriptis time / our time; above 1 means we are faster). Then how often the
reader read only the main content it found, and why it read the whole page otherwise. Our
reader does more work than inscriptis here: it also decodes the body, extracts the links and
cuts the text; inscriptis gets a ready ``str``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import inscriptis
from lxml.html import HTMLParser, document_fromstring

from fetcher.html.charset import decode_body
from fetcher.html.content import find_main_content
from fetcher.html.extract import read_document
from fetcher.html.prune import drop_junk, prune_chrome
from testkit.corpus import CORPUS_ROOT, HALVES, Page, budget_precision, budget_recall, load_pages

__all__ = ["Row", "main", "measure", "verdicts"]

_BELOW_ORACLE = 0.05
_READERS = ("ours", "inscriptis")


def _ours(page: Page) -> str:
    # The corpus pages are UTF-8 (see its README), as an HTTP header would say.
    return read_document(page.html, content_type="text/html", charset="utf-8", url=page.url).text


def _inscriptis(page: Page) -> str:
    text: str = inscriptis.get_text(page.html.decode("utf-8", "replace"))
    return text


@dataclasses.dataclass(slots=True)
class Row:
    """The figures of one reader on one group of pages."""

    recall: list[float] = dataclasses.field(default_factory=list)
    precision: list[float] = dataclasses.field(default_factory=list)
    below_oracle: int = 0
    empty: int = 0
    seconds: float = 0.0


def measure(pages: list[Page], reps: int = 3) -> dict[str, dict[str, Row]]:
    """Run both readers on every page, interleaved, and collect the figures.

    Args:
        pages: The corpus pages.
        reps: How many times each reader reads each page (the fastest CPU time counts).

    Returns:
        Per group (each set, each set's halves, and ``"all"``), per reader: the figures.
    """
    readers = {"ours": _ours, "inscriptis": _inscriptis}
    groups: dict[str, dict[str, Row]] = collections.defaultdict(
        lambda: {name: Row() for name in readers}
    )
    for page in pages:
        for name, reader in readers.items():
            best = float("inf")
            text = ""
            for _ in range(reps):
                started = time.process_time()
                text = reader(page)
                best = min(best, time.process_time() - started)
            recall = budget_recall(page.truth, text)
            for group in (page.set, f"{page.set} {page.half}", "all"):
                row = groups[group][name]
                row.recall.append(recall)
                row.precision.append(budget_precision(page.truth, text))
                row.below_oracle += recall < page.oracle - _BELOW_ORACLE
                row.empty += not text.strip()
                row.seconds += best
    return dict(groups)


def verdicts(pages: list[Page]) -> dict[str, collections.Counter[str]]:
    """How the reader found each page's main content, per set (outside the timed runs).

    The reader's own steps up to the decision: decode, parse, drop junk, prune, detect.
    """
    parser = HTMLParser(encoding="utf-8", huge_tree=True, remove_comments=True, remove_pis=True)
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for page in pages:
        markup = decode_body(page.html, "utf-8", sniff_html=True)
        root = document_fromstring(markup.encode("utf-8", "replace"), parser=parser)
        drop_junk(root)
        prune_chrome(root)
        verdict = find_main_content(root).verdict.value
        counts[page.set][verdict] += 1
        counts["all"][verdict] += 1
    return dict(counts)


def _order(group: str) -> tuple[int, str]:
    return (group == "all", group)


def _table(groups: dict[str, dict[str, Row]], names: list[str]) -> str:
    lines = [
        "| group | pages | budget recall ours / insc | budget precision ours / insc "
        "| >5 pts below oracle ours / insc | empty ours / insc | throughput ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for group in names:
        ours, insc = (groups[group][name] for name in _READERS)
        lines.append(
            f"| {group} | {len(ours.recall)} "
            f"| {statistics.fmean(ours.recall):.4f} / {statistics.fmean(insc.recall):.4f} "
            f"| {statistics.fmean(ours.precision):.4f} / {statistics.fmean(insc.precision):.4f} "
            f"| {ours.below_oracle} / {insc.below_oracle} | {ours.empty} / {insc.empty} "
            f"| {insc.seconds / ours.seconds:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print the comparison tables; exit quietly with a note when the corpus is missing."""
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
    groups = measure(pages, reps=args.reps)
    sets = sorted({page.set for page in pages})
    print(_table(groups, [*sets, "all"]))
    print()
    print(_table(groups, [f"{name} {half}" for name in sets for half in HALVES]))
    print("throughput ratio = inscriptis-defaults time / our time (above 1: we are faster)")
    print()
    print("| set | pages | main content only | whole pruned page (why) |")
    print("|---|---|---|---|")
    for name, counts in sorted(verdicts(pages).items(), key=lambda item: _order(item[0])):
        others = ", ".join(f"{why} {n}" for why, n in sorted(counts.items()) if why != "main")
        print(f"| {name} | {sum(counts.values())} | {counts['main']} | {others or 'none'} |")


if __name__ == "__main__":
    main(sys.argv[1:])
