"""PDF page layout: from the lines PDFium finds to paragraphs in reading order (pure).

Input is what :mod:`fetcher.pdftext` reads off each page: lines of text with their box,
font size and direction, in PDFium's order (the order of the content stream, which the
producers measured here write column by column). This module decides, from geometry and
text alone:

1. **Page furniture**: the top and bottom lines of a page that repeat on other pages at
   the same height (digits aside: ``Page 3 of 9``), or, on any page, that look like
   furniture by themselves: a page number (``12``, ``- 12 -``, ``Page 1 of 2``, ``3/7``,
   also at the end of a longer line), a browser's print header (``8/8/24, 2:11 PM``), or
   a running title (the document's title again, in a smaller font). Rotated lines outside
   the body's width (arXiv's margin stamp) go too. Detected in each document, never from
   a list of known strings.
2. **Footnotes**: a run of small-print lines at the foot of a column, starting with a note
   marker, is moved to the end of the document, markers removed.
3. **Columns**: when the stream interleaves the lines of two columns (line by line), the
   page is read column by column instead; a stream already in column order is kept.
4. **Paragraphs**: lines join into paragraphs (across columns and pages when a sentence
   runs on); a larger font makes a heading, marked ``#``.

Word-level repairs (hyphens at line ends, ligatures) are :mod:`fetcher.pdfwords`'.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import re
import statistics
from collections.abc import Iterable, Sequence

from fetcher.pdfwords import Words, fold_ligatures, hyphen_pair, join_lines, strip_note_number

__all__ = ["Line", "Page", "lay_out"]

# Furniture sits in the first or last few lines of a page,
_EDGE_LINES = 3
# within this share of the page's height from its top or bottom edge.
_MARGIN_ZONE = 0.12
# Two furniture lines on different pages are at the same height within this (points).
_SAME_HEIGHT = 4.0
# A heading's font is at least this much larger than the body's.
_HEADING_RATIO = 1.18
# Small print (footnotes) is at most this fraction of the body size.
_SMALL_RATIO = 0.93
# A line set in a smaller font than this fraction of its neighbours' is a note marker.
_MARKER_RATIO = 0.85

_NUMBER = r"(?:\d{1,4}|[ivxlc]{1,7})"
_PAGE_WORD = r"(?:page|p\.|pg\.|seite|s\.|página|pagina|pag\.|strana|str\.|стр\.|страница|sida|side)"
_OF = r"(?:of|/|von|de|di|из|z|sur|av|af|van)"
_PAGE_NUMBER = re.compile(
    rf"(?:{_PAGE_WORD}\s*)?[-–—]?\s*{_NUMBER}\s*(?:{_OF}\s*{_NUMBER})?\s*[-–—]?",
    re.IGNORECASE,
)
_ENDS_WITH_PAGE_NUMBER = re.compile(
    rf"(?:\s|^)(?:{_PAGE_WORD}\s*{_NUMBER}(?:\s*{_OF}\s*{_NUMBER})?|\d{{1,4}}\s*/\s*\d{{1,4}})\s*$",
    re.IGNORECASE,
)
# A browser's print header: "8/8/24, 2:11 PM" and the like.
_PRINT_STAMP = re.compile(r"^\d{1,4}[./-]\d{1,2}[./-]\d{1,4},?\s+\d{1,2}:\d{2}(?:\s*[AP]M)?\b")
_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s+")
_MARKER_LINE = re.compile(r"[\d*†‡§]{1,3}")
_RTL = re.compile("[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufeff]")


@dataclasses.dataclass(frozen=True, slots=True)
class Line:
    """One line of text as PDFium found it, with its geometry (PDF points, y upwards).

    Attributes:
        text: The characters, repaired at character level (accents, note markers removed);
            a line broken at a hyphen ends in ``-``.
        x0: Left edge.
        x1: Right edge.
        y0: Bottom of the line's box.
        y1: Top of the line's box.
        size: The font size of most of the line.
        upright: Whether the text runs left to right horizontally (not rotated).
        note_mark: Whether the line began with a superscript note marker (now removed).
    """

    text: str
    x0: float
    x1: float
    y0: float
    y1: float
    size: float
    upright: bool = True
    note_mark: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Page:
    """One page's lines in PDFium's order, and the page size in points."""

    width: float
    height: float
    lines: tuple[Line, ...]


@dataclasses.dataclass(slots=True)
class _Para:
    """A paragraph being built: its lines' texts joined, and the last line for geometry."""

    text: str
    size: float
    heading: bool
    last: Line
    left: float  # the left edge of the column the paragraph started in


def _signature(text: str) -> str:
    return _DIGITS.sub("#", _SPACES.sub(" ", text.strip().lower()))


def _tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def body_size(pages: Sequence[Page]) -> float:
    """The font size most characters are set in (0 for a document without text)."""
    sizes: collections.Counter[float] = collections.Counter()
    for page in pages:
        for line in page.lines:
            sizes[round(line.size * 2) / 2] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _in_margin(page: Page, line: Line, top: bool) -> bool:
    """Whether a line lies within the page's top (or bottom) :data:`_MARGIN_ZONE`."""
    if top:
        return line.y0 >= (1 - _MARGIN_ZONE) * page.height
    return line.y1 <= _MARGIN_ZONE * page.height


def _band(page: Page, top: bool, size: float) -> list[int]:
    """The lines at the top (or bottom) edge of a page that hang together, set apart.

    The band grows from the outermost line by lines that touch it (less than half a body
    line apart), within the outer :data:`_MARGIN_ZONE` of the page; it counts only if the
    next line is clearly apart (a margin's header or footer, not the start of the text).
    """
    upright = [i for i, line in enumerate(page.lines) if line.upright and line.text.strip()]
    if top:
        order = sorted(upright, key=lambda i: -page.lines[i].y1)
    else:
        order = sorted(upright, key=lambda i: page.lines[i].y0)
    band: list[int] = []
    edge = 0.0
    for i in order:
        line = page.lines[i]
        if band and (edge - line.y1 if top else line.y0 - edge) > 0.5 * size:
            return band
        if not _in_margin(page, line, top) or len(band) > _EDGE_LINES:
            return []
        if top:
            edge = line.y0 if not band else min(edge, line.y0)
        else:
            edge = line.y1 if not band else max(edge, line.y1)
        band.append(i)
    return band


def _is_page_number(text: str) -> bool:
    return bool(_PAGE_NUMBER.fullmatch(text.strip()))


def _running_title(text: str, title: Sequence[str]) -> bool:
    """Whether a line starts with the document's title (or a long enough part of it)."""
    words = _tokens(text)
    need = min(len(title), 4)
    return need >= 2 and words[:need] == list(title[:need])


def _looks_like_furniture(line: Line, title: Sequence[str], title_size: float) -> bool:
    text = line.text.strip()
    return bool(
        _is_page_number(text)
        or _ENDS_WITH_PAGE_NUMBER.search(text)
        or _PRINT_STAMP.match(text)
        # The title again, in smaller print than the title itself: a running head.
        or (line.size < 0.9 * title_size and _running_title(text, title))
    )


def find_furniture(
    pages: Sequence[Page], title: Sequence[str], size: float, title_size: float
) -> set[tuple[int, int]]:
    """The (page, line) indexes of page furniture.

    Only the bands at a page's top and bottom edge (:func:`_band`) in print no larger than
    the body's can be furniture: the whole band when one of its lines looks like furniture
    (a page number, a browser's print header, a running title), and any line of it that
    comes back at the same height on other pages (digits aside). A heading that starts
    every page ("Entry 12") is larger, and stands in the text area.

    Args:
        pages: The document's pages.
        title: The tokens of the document's title (or first heading).
        size: The body font size.
        title_size: The font size of the largest line on the first page.

    Returns:
        Indexes into ``pages[p].lines``.
    """
    found: set[tuple[int, int]] = set()
    candidates: list[tuple[int, int, str]] = []
    for p, page in enumerate(pages):
        for top in (True, False):
            band = [i for i in _band(page, top, size) if page.lines[i].size < 1.05 * size]
            candidates += [(p, i, "top" if top else "bottom") for i in band]
            if any(_looks_like_furniture(page.lines[i], title, title_size) for i in band):
                found.update((p, i) for i in band)
    # Repetition: the same line (digits aside) at the same height on several pages.
    if len(pages) > 1:
        seen: dict[tuple[str, str], list[tuple[int, int, float]]] = collections.defaultdict(list)
        for p, i, where in candidates:
            line = pages[p].lines[i]
            seen[(where, _signature(line.text))].append((p, i, line.y0))
        for group in seen.values():
            pages_hit = {p for p, _, _ in group}
            if len(pages_hit) < 2:
                continue
            heights = [y for _, _, y in group]
            middle = statistics.median(heights)
            same = [(p, i) for p, i, y in group if abs(y - middle) <= _SAME_HEIGHT]
            if len({p for p, _ in same}) >= 2:
                found.update(same)
    return found


def _stamps(page: Page, p: int, found: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Rotated lines outside the body's width: margin stamps (arXiv's identifier)."""
    upright = [
        line for i, line in enumerate(page.lines) if line.upright and (p, i) not in found
    ]
    if not upright:
        return set()
    left = min(line.x0 for line in upright)
    right = max(line.x1 for line in upright)
    return {
        (p, i)
        for i, line in enumerate(page.lines)
        if not line.upright and (line.x1 <= left + 1 or line.x0 >= right - 1)
    }


_STRONG_NOTE = re.compile(r"\s*(?:\d{1,3}(?=[^\W\d_]|[\"“‘(])|[*†‡§])")
_WEAK_NOTE = re.compile(r"\s*\d{1,3}[.)]?\s+\S")


def _note_start(line: Line) -> str:
    """How surely a line starts a footnote: ``strong`` (a superscript marker, or a number
    glued to the text: ``1Originally``), ``weak`` (``1. Text``, ``1 Text``, which table rows
    and lists look like too) or ``""``."""
    if line.note_mark or _STRONG_NOTE.match(line.text):
        return "strong"
    return "weak" if _WEAK_NOTE.match(line.text) else ""


def split_notes(
    lines: Sequence[Line], size: float, gap: float
) -> tuple[list[Line], list[list[Line]]]:
    """Take the footnotes out of one page's body lines (in stream order).

    A footnote run is a stretch of small-print lines of one size that starts with a note
    marker, sits lower on the page than the line before it, and is followed by nothing on
    the page or by a line higher up (the next column). A weak marker (a number and a space,
    as table rows have) also needs the line before to be body text, set apart by a gap.

    Args:
        lines: The page's lines in reading order, furniture removed.
        size: The body font size.
        gap: The usual whitespace between two lines of a paragraph.

    Returns:
        The lines left, and the footnotes found (each a list of lines, marker removed
        from its first).
    """
    kept: list[Line] = []
    notes: list[list[Line]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        start = _note_start(line) if line.size <= _SMALL_RATIO * size else ""
        before = kept[-1] if kept else None
        if (
            not start
            or before is None
            or line.y1 > before.y0 + 1
            or (
                start == "weak"
                and (before.size <= _SMALL_RATIO * size or before.y0 - line.y1 <= gap + 0.2 * size)
            )
        ):
            kept.append(line)
            i += 1
            continue
        end = i
        while end < len(lines) and abs(lines[end].size - line.size) < 0.3:
            end += 1
        run = lines[i:end]
        after = lines[end] if end < len(lines) else None
        in_order = all(b.y1 <= a.y0 + 1 for a, b in itertools.pairwise(run))
        if in_order and (after is None or after.y1 > run[0].y0):
            for member in run:
                if _note_start(member) or not notes:
                    text = member.text if member.note_mark else strip_note_number(member.text)
                    notes.append([dataclasses.replace(member, text=text)])
                else:
                    notes[-1].append(member)
            i = end
        else:
            kept.append(line)
            i += 1
    return kept, notes


def column_order(lines: Sequence[Line]) -> list[Line]:
    """Read a page column by column when its stream interleaves the columns.

    Lines are left (ending before the middle of the text area), right (starting after
    it) or spanning. A stream in column order switches between left and right a few times
    a page; an interleaved one at nearly every line. Only then are the lines re-ordered:
    by bands between spanning lines, left column top to bottom, then right.
    """
    if len(lines) < 8:
        return list(lines)
    left_edge = min(line.x0 for line in lines)
    right_edge = max(line.x1 for line in lines)
    middle = (left_edge + right_edge) / 2
    slack = 0.02 * (right_edge - left_edge)

    def side(line: Line) -> str:
        if line.x1 <= middle + slack:
            return "L"
        if line.x0 >= middle - slack:
            return "R"
        return "S"

    if sum(_RTL.search(line.text) is not None for line in lines) > len(lines) // 2:
        return list(lines)  # right-to-left scripts read their columns the other way
    # In column order, each band between spanning lines reads left lines, then right
    # ones; going back from the right column to the left one more than once is a zigzag.
    backs = 0
    previous = ""
    for line in lines:
        current = side(line)
        if current == "S":
            previous = ""
            continue
        backs += previous == "R" and current == "L"
        previous = current
    if backs < 2:
        return list(lines)
    spanning = sorted((line for line in lines if side(line) == "S"), key=lambda x: -x.y1)
    ordered: list[Line] = []
    ceiling = float("inf")
    for floor_line in [*spanning, None]:
        floor = floor_line.y1 if floor_line is not None else -float("inf")
        band = [
            line for line in lines if side(line) != "S" and floor < line.y1 <= ceiling
        ]
        for column in ("L", "R"):
            ordered += sorted((x for x in band if side(x) == column), key=lambda x: -x.y1)
        if floor_line is not None:
            ordered.append(floor_line)
            ceiling = floor_line.y1 - 0.01
    return ordered


_TERMINAL = re.compile(r"[.!?:;][\"'”’)\]]*$")


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
    for name, members in groups.items():
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
    ends_sentence = bool(_TERMINAL.search(a.text.rstrip()))
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


def _title_tokens(pages: Sequence[Page], title: str) -> tuple[str, str]:
    """The title to use (metadata, else the largest line on page 1) and its text."""
    if title:
        return title, title
    if not pages:
        return "", ""
    lines = [line for line in pages[0].lines if line.upright and line.text.strip()]
    if not lines:
        return "", ""
    largest = max(line.size for line in lines)
    picked: list[str] = []
    for line in lines:
        if abs(line.size - largest) < 0.25:
            picked.append(line.text.strip())
        elif picked:
            break
    text = " ".join(picked)
    return "", text


def _largest_size(pages: Sequence[Page]) -> float:
    if not pages:
        return 0.0
    return max((line.size for line in pages[0].lines if line.upright), default=0.0)


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
    _, first_heading = _title_tokens(pages, metadata_title)
    title_words = _tokens(metadata_title or first_heading)
    furniture = find_furniture(pages, title_words, size, _largest_size(pages))
    gap = _typical_gap(
        [(p, line) for p, page in enumerate(pages) for line in page.lines], size
    )
    stream: list[tuple[int, Line]] = []
    notes: list[list[Line]] = []
    columns: dict[int, _Column] = {}
    for p, page in enumerate(pages):
        drop = furniture | _stamps(page, p, furniture)
        body = [line for i, line in enumerate(page.lines) if (p, i) not in drop]
        body, page_notes = split_notes(body, size, gap)
        notes += page_notes
        body = column_order(body)
        columns.update(_columns(body))
        stream += [(p, line) for line in body]
    words = Words(line.text for _, line in stream)
    words.learn(_hyphen_pairs([line.text for _, line in stream]))
    paras: list[_Para] = []
    previous: tuple[int, Line] | None = None
    for p, line in stream:
        heading = line.size >= _HEADING_RATIO * size
        if (
            previous is not None
            and paras
            and not _breaks(previous[1], line, previous[0] == p, columns, size, gap)
        ):
            para = paras[-1]
            para.text = join_lines(para.text, line.text, words)
            para.last = line
        else:
            paras.append(_Para(line.text.strip(), line.size, heading, line, line.x0))
        previous = (p, line)
    levels = _heading_levels(paras)
    out: list[str] = []
    for para in paras:
        text = fold_ligatures(para.text)
        if para.heading:
            if out:
                out.append("")
            out.append("#" * levels[round(para.size, 1)] + " " + text)
        else:
            out.append(text)
    for note in notes:
        text = ""
        for line in note:
            text = join_lines(text, line.text, words)
        out.append(fold_ligatures(text))
    title = metadata_title or fold_ligatures(first_heading)
    return title, "\n".join(out)


def _overlap(a: Line, b: Line) -> bool:
    """Whether two lines share some height (one sits on the other's baseline band)."""
    return a.y0 < b.y1 and b.y0 < a.y1


def attach_markers(lines: Sequence[Line]) -> list[Line]:
    """Resolve note markers PDFium set on a line of their own (raised, so apart).

    A marker right before a line's text at its height starts a footnote: that line gets
    ``note_mark``. A marker beside a line's text at its height is a reference in the text:
    it goes. A small number on its own is kept (a page number, a table cell).
    """
    kept: list[Line] = []
    mark_next = False
    for index, line in enumerate(lines):
        if mark_next:
            line = dataclasses.replace(line, note_mark=True)
            mark_next = False
        if not _MARKER_LINE.fullmatch(line.text.strip()):
            kept.append(line)
            continue
        after = lines[index + 1] if index + 1 < len(lines) else None
        before = kept[-1] if kept else None
        if (
            after is not None
            and line.size < _MARKER_RATIO * after.size
            and _overlap(line, after)
            and -0.2 * after.size <= after.x0 - line.x1 <= 0.5 * after.size
        ):
            mark_next = True
        elif not (
            before is not None and line.size < _MARKER_RATIO * before.size and _overlap(line, before)
        ):
            kept.append(line)
    return kept
