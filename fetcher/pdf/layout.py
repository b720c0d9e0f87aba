"""PDF text in reading order: from the lines of each page to paragraphs (pure).

:mod:`fetcher.pdf.page` says which lines are furniture, which are footnotes, and in which
order a page's columns are read; this module puts the rest together:

- lines join into paragraphs, across columns and pages when a sentence runs on; a new
  paragraph starts at a gap, an indent, a short line that ends a sentence, or a change of
  font size; a font clearly larger than the body's makes a heading, marked ``#``;
- a hyphen at a line end is decided by :mod:`fetcher.pdf.words` (join ``extrac-tion``,
  keep ``so-many``), ligatures are folded;
- footnotes follow the text, each a paragraph, markers removed;
- the title is the document's metadata title when it has a useful one, else its first
  heading (the largest line on the first page).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import statistics
from collections.abc import Sequence

from fetcher.pdf.page import (
    Line,
    Page,
    body_size,
    column_order,
    find_furniture,
    margin_stamps,
    split_notes,
)
from fetcher.pdf.words import Words, fold_ligatures, hyphen_pair, join_lines

__all__ = ["lay_out"]

# A heading's font is at least this much larger than the body's.
_HEADING_RATIO = 1.18
_TERMINAL = re.compile(r"[.!?:;][\"'”’)\]]*$")


@dataclasses.dataclass(slots=True)
class _Para:
    """A paragraph being built: its lines' texts joined so far."""

    text: str
    size: float
    heading: bool


def _tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


@dataclasses.dataclass(frozen=True, slots=True)
class _Column:
    """The left and right margins of the column a line sits in."""

    left: float
    right: float


def _columns(lines: Sequence[Line]) -> dict[int, _Column]:
    """Each line's column margins (keyed by ``id``), from the page's body lines."""
    if not lines:
        return {}
    left_edge = min(line.x0 for line in lines)
    right_edge = max(line.x1 for line in lines)
    middle = (left_edge + right_edge) / 2
    slack = 0.02 * (right_edge - left_edge)
    groups: dict[str, list[Line]] = {"L": [], "R": [], "S": []}
    for line in lines:
        if line.x1 <= middle + slack:
            groups["L"].append(line)
        elif line.x0 >= middle - slack:
            groups["R"].append(line)
        else:
            groups["S"].append(line)
    two = len(groups["R"]) >= 4 and len(groups["L"]) >= 4 and len(groups["R"]) > len(groups["S"])
    result: dict[int, _Column] = {}
    if not two:
        everything = sorted(line.x1 for line in lines)
        right = everything[int(0.9 * (len(everything) - 1))]
        for line in lines:
            result[id(line)] = _Column(left_edge, right)
        return result
    for members in groups.values():
        if not members:
            continue
        rights = sorted(line.x1 for line in members)
        margin = _Column(min(line.x0 for line in members), rights[int(0.9 * (len(rights) - 1))])
        for line in members:
            result[id(line)] = margin
    return result


def _typical_gap(stream: Sequence[tuple[int, Line]], size: float) -> float:
    gaps = [
        a.y0 - b.y1
        for (pa, a), (pb, b) in itertools.pairwise(stream)
        if pa == pb
        and abs(a.size - size) < 0.5
        and abs(b.size - size) < 0.5
        and -1 < a.y0 - b.y1 < 1.5 * size
    ]
    return statistics.median(gaps) if gaps else 0.25 * size


def _breaks(
    a: Line, b: Line, same_page: bool, columns: dict[int, _Column], size: float, gap: float
) -> bool:
    """Whether line ``b`` starts a new paragraph after line ``a``."""
    if abs(a.size - b.size) > 0.15 * size:
        return True
    first = b.text.lstrip()[:1]
    ends_hyphen = a.text.rstrip().endswith(("-", "\u2010"))
    if ends_hyphen and first.islower():
        return False  # a word broken at the line end: the paragraph goes on
    column_a = columns.get(id(a))
    column_b = columns.get(id(b))
    below = same_page and b.y1 <= a.y0 + 1 and column_a == column_b
    if a.size >= _HEADING_RATIO * size:
        # A heading set on several lines: one paragraph while the lines stay close.
        return not (below and a.y0 - b.y1 <= gap + 0.45 * size)
    full = column_a is None or a.x1 >= column_a.right - max(
        2 * size, 0.1 * (column_a.right - column_a.left)
    )
    ends_sentence = bool(_TERMINAL.search(a.text.rstrip()[-6:]))
    if below:
        if a.y0 - b.y1 > gap + 0.45 * size:
            return True
        if column_b is not None and b.x0 > column_b.left + 0.7 * size and b.x0 - a.x0 > 0.7 * size:
            return True
        if ends_hyphen:
            return False
        return not full and (ends_sentence or first.isupper())
    # A new column or page: the paragraph runs on only if its sentence does.
    if ends_hyphen:
        return False
    if column_b is not None and b.x0 > column_b.left + 0.5 * size:
        return True
    return not (full and not ends_sentence and first.islower())


def _heading_levels(paras: Sequence[_Para]) -> dict[float, int]:
    sizes = sorted({round(p.size, 1) for p in paras if p.heading}, reverse=True)
    return {s: min(i + 1, 3) for i, s in enumerate(sizes)}


def _hyphen_pairs(texts: Sequence[str]) -> list[tuple[str, str]]:
    pairs = []
    for left, right in itertools.pairwise(texts):
        if left.rstrip().endswith("-"):
            pair = hyphen_pair(left.rstrip(), right)
            if pair is not None:
                pairs.append(pair)
    return pairs


def _first_heading(pages: Sequence[Page]) -> tuple[str, float]:
    """The largest line on the first page (with the lines of that size right after it),
    and its size: the title of a document whose metadata has none."""
    lines = [line for line in pages[0].lines if line.upright] if pages else []
    if not lines:
        return "", 0.0
    largest = max(line.size for line in lines)
    picked: list[str] = []
    for line in lines:
        if abs(line.size - largest) < 0.25:
            picked.append(line.text.strip())
        elif picked:
            break
    return " ".join(picked), largest


def _paragraphs(
    stream: Sequence[tuple[int, Line]],
    columns: dict[int, _Column],
    words: Words,
    size: float,
    gap: float,
) -> list[_Para]:
    paras: list[_Para] = []
    for index, (p, line) in enumerate(stream):
        if index:
            before_page, before = stream[index - 1]
            if not _breaks(before, line, before_page == p, columns, size, gap):
                paras[-1].text = join_lines(paras[-1].text, line.text, words)
                continue
        paras.append(_Para(line.text.strip(), line.size, line.size >= _HEADING_RATIO * size))
    return paras


def _notes(notes: Sequence[Sequence[Line]], words: Words) -> list[str]:
    texts = []
    for note in notes:
        text = ""
        for line in note:
            text = join_lines(text, line.text, words)
        texts.append(text)
    return texts


def lay_out(pages: Sequence[Page], metadata_title: str = "") -> tuple[str, str]:
    """Turn a document's pages into its title and its text in reading order.

    Args:
        pages: Every page read, in order.
        metadata_title: The document's own title (its Info dictionary), cleaned; empty
            when it has none worth using.

    Returns:
        The title (the metadata's, else the first heading) and the text: paragraphs one
        per line, headings marked ``#`` after a blank line, footnotes at the end.
    """
    size = body_size(pages)
    first_heading, title_size = _first_heading(pages)
    title = metadata_title or first_heading
    furniture = find_furniture(pages, _tokens(title), size, title_size)
    gap = _typical_gap([(p, line) for p, page in enumerate(pages) for line in page.lines], size)
    stream: list[tuple[int, Line]] = []
    notes: list[list[Line]] = []
    columns: dict[int, _Column] = {}
    for p, page in enumerate(pages):
        drop = furniture | margin_stamps(page, p, furniture)
        body = [line for i, line in enumerate(page.lines) if (p, i) not in drop]
        body, page_notes = split_notes(body, size, gap)
        notes += page_notes
        body = column_order(body)
        columns.update(_columns(body))
        stream += [(p, line) for line in body]
    words = Words(line.text for _, line in stream)
    words.learn(_hyphen_pairs([line.text for _, line in stream]))
    paras = _paragraphs(stream, columns, words, size, gap)
    levels = _heading_levels(paras)
    out: list[str] = []
    for para in paras:
        if para.heading:
            if out:
                out.append("")
            out.append("#" * levels[round(para.size, 1)] + " " + para.text)
        else:
            out.append(para.text)
    out += _notes(notes, words)
    return fold_ligatures(title), fold_ligatures("\n".join(out))
