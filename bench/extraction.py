"""Benchmark: our reader against inscriptis with default settings, on the shared corpora.

Run from the repository root: ``python -m bench.extraction``. It reads both corpora beside the
repository: ``extraction`` (sets ``aeb`` and ``readability``) and ``wcxb-dev`` (seven page
types; see ``testkit/corpus.py``). Both readers see every page
in turn (interleaved, so background load hits them alike), ``--reps`` times; each counts its
fastest CPU time (``time.process_time``: both are single-threaded CPU work, and on a shared
machine the CPU time of a run does not grow with other people's load as its wall-clock time
does). It prints, per
set and overall, then per half of each set (``dev``, ``check``; see ``testkit/corpus.py``):
pages, budget recall and budget precision for each reader, pages more than 5 points of budget
recall below the oracle (the article text itself), pages that came out empty, and the
throughput ratio (inscriptis time / our time; above 1 means we are faster). For ``wcxb-dev``
it adds a row per page type and per page type and half, and the share of its ``with``
snippets found and of its ``without`` snippets absent. Then how often the
reader read only the main content it found, and why it read the whole page otherwise. Our
reader does more work than inscriptis here: it also decodes the body, extracts the links and
cuts the text; inscriptis gets a ready ``str``.

While tuning, ``--set``, ``--type``, ``--half`` pick pages, and ``--reps 1 --ours-only``
measures only the quality of our reader, once per page.
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
from testkit.corpus import (
    CORPUS_ROOT,
    HALVES,
    WCXB_ROOT,
    Page,
    budget_precision,
    budget_recall,
    holds_snippet,
    load_pages,
)

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
    with_found: int = 0
    with_total: int = 0
    without_absent: int = 0
    without_total: int = 0


def _groups(page: Page) -> tuple[str, ...]:
    """The rows a page counts in: its set, its set's half, per-type rows, and ``all``."""
    groups: tuple[str, ...] = (page.set, f"{page.set} {page.half}", "all")
    if page.set == "wcxb-dev":
        groups += (f"{page.set} {page.page_type}", f"{page.set} {page.page_type} {page.half}")
    return groups


def measure(
    pages: list[Page], reps: int = 3, *, ours_only: bool = False
) -> dict[str, dict[str, Row]]:
    """Run both readers on every page, interleaved, and collect the figures.

    Args:
        pages: The corpus pages.
        reps: How many times each reader reads each page (the fastest CPU time counts).
        ours_only: Run only our reader (inscriptis's rows stay empty).

    Returns:
        Per group (each set, each set's halves, each ``wcxb-dev`` page type and its halves,
        and ``"all"``), per reader: the figures.
    """
    readers = {"ours": _ours, "inscriptis": _inscriptis}
    if ours_only:
        del readers["inscriptis"]
    groups: dict[str, dict[str, Row]] = collections.defaultdict(
        lambda: {name: Row() for name in _READERS}
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
            precision = budget_precision(page.truth, text)
            found = sum(holds_snippet(snippet, text) for snippet in page.with_)
            absent = sum(not holds_snippet(snippet, text) for snippet in page.without)
            for group in _groups(page):
                row = groups[group][name]
                row.recall.append(recall)
                row.precision.append(precision)
                row.below_oracle += recall < page.oracle - _BELOW_ORACLE
                row.empty += not text.strip()
                row.seconds += best
                row.with_found += found
                row.with_total += len(page.with_)
                row.without_absent += absent
                row.without_total += len(page.without)
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
        if page.set == "wcxb-dev":
            counts[f"{page.set} {page.page_type}"][verdict] += 1
        counts["all"][verdict] += 1
    return dict(counts)


def _order(group: str) -> tuple[int, str]:
    return (group == "all", group)


def _mean(values: list[float]) -> str:
    return f"{statistics.fmean(values):.4f}" if values else "-"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.3f}" if whole else "-"


def _ratio(ours: Row, insc: Row) -> str:
    return f"{insc.seconds / ours.seconds:.2f}x" if insc.seconds and ours.seconds else "-"


def _table(groups: dict[str, dict[str, Row]], names: list[str]) -> str:
    lines = [
        "| group | pages | budget recall ours / insc | budget precision ours / insc "
        "| >5 pts below oracle ours / insc | empty ours / insc "
        "| with found ours / insc | without absent ours / insc | throughput ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for group in names:
        if group not in groups:
            continue
        ours, insc = (groups[group][name] for name in _READERS)
        lines.append(
            f"| {group} | {len(ours.recall)} "
            f"| {_mean(ours.recall)} / {_mean(insc.recall)} "
            f"| {_mean(ours.precision)} / {_mean(insc.precision)} "
            f"| {ours.below_oracle} / {insc.below_oracle} | {ours.empty} / {insc.empty} "
            f"| {_share(ours.with_found, ours.with_total)} / "
            f"{_share(insc.with_found, insc.with_total)} "
            f"| {_share(ours.without_absent, ours.without_total)} / "
            f"{_share(insc.without_absent, insc.without_total)} "
            f"| {_ratio(ours, insc)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print the comparison tables; exit quietly with a note when the corpus is missing."""
    parser = argparse.ArgumentParser(prog="python -m bench.extraction", description=__doc__)
    parser.add_argument("--corpus", type=Path, action="append", help="a corpus folder (repeat)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--set", action="append", help="only pages of this set (repeat)")
    parser.add_argument("--type", action="append", help="only pages of this type (repeat)")
    parser.add_argument("--half", choices=HALVES, help="only pages of this half")
    parser.add_argument("--ours-only", action="store_true", help="skip inscriptis")
    # Called as main() by bench/__main__: defaults, whatever that command line holds.
    args = parser.parse_args(argv if argv is not None else [])
    pages: list[Page] = []
    for root in args.corpus or [CORPUS_ROOT, WCXB_ROOT]:
        if not (root / "manifest.jsonl").is_file():
            print(f"extraction corpus not found at {root}; skipping it", file=sys.stderr)
            continue
        pages += load_pages(root)
    pages = [
        page
        for page in pages
        if (not args.set or page.set in args.set)
        and (not args.type or page.page_type in args.type)
        and (not args.half or page.half == args.half)
    ]
    if not pages:
        return
    print(f"extraction: {len(pages)} pages, best of {args.reps}, interleaved per page")
    groups = measure(pages, reps=args.reps, ours_only=args.ours_only)
    sets = sorted({page.set for page in pages})
    print(_table(groups, [*sets, "all"]))
    print()
    print(_table(groups, [f"{name} {half}" for name in sets for half in HALVES]))
    types = sorted({page.page_type for page in pages if page.set == "wcxb-dev"})
    if types:
        print()
        print(_table(groups, [f"wcxb-dev {kind}" for kind in types]))
        print()
        rows = [f"wcxb-dev {kind} {half}" for half in HALVES for kind in types]
        print(_table(groups, rows))
    print("throughput ratio = inscriptis-defaults time / our time (above 1: we are faster)")
    print()
    print("| set | pages | main content only | whole pruned page (why) |")
    print("|---|---|---|---|")
    for name, counts in sorted(verdicts(pages).items(), key=lambda item: _order(item[0])):
        others = ", ".join(f"{why} {n}" for why, n in sorted(counts.items()) if why != "main")
        print(f"| {name} | {sum(counts.values())} | {counts['main']} | {others or 'none'} |")


if __name__ == "__main__":
    main(sys.argv[1:])
