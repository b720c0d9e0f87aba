"""What on a PDF page is not body text, and in which order the rest is read (pure).

Input is what :mod:`fetcher.pdf.text` reads off each page: :class:`Line` values with their
box, font size and direction, in PDFium's order (the content stream's, which the producers
measured here write column by column). From geometry and text alone, never from a list of
known strings:

- **page furniture** (:func:`find_furniture`): the bands at a page's top and bottom edge,
  in print no larger than the body's, that come back at the same height on other pages
  (digits aside: ``Page 3 of 9``), or that look like furniture by themselves: a page
  number (``12``, ``- 12 -``, ``Page 1 of 2``, ``3/7``, also ending a longer line), a
  browser's print header (``8/8/24, 2:11 PM``), a running title (the title again, smaller);
  rotated lines outside the body's width (arXiv's margin stamp: :func:`margin_stamps`);
- **note markers** set apart from their text (:func:`attach_markers`) and **footnotes**
  (:func:`split_notes`): a run of small-print lines at the foot of a column, starting
  with a note marker, taken out to go to the end of the document;
- **columns** (:func:`column_order`): a page whose stream zigzags between two columns is
  read column by column; a stream already in column order is kept.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import re
import statistics
from collections.abc import Sequence

from fetcher.pdf.words import strip_note_number

__all__ = [
    "Line",
    "Page",
    "attach_markers",
    "body_size",
    "column_order",
    "find_furniture",
    "margin_stamps",
    "split_notes",
]

# Furniture sits in the first or last few lines of a page,
_EDGE_LINES = 3
# within this share of the page's height from its top or bottom edge.
_MARGIN_ZONE = 0.12
# Two furniture lines on different pages are at the same height within this (points).
_SAME_HEIGHT = 4.0
# Small print (footnotes) is at most this fraction of the body size.
_SMALL_RATIO = 0.93
# A line set in a smaller font than this fraction of its neighbours' is a note marker.
_MARKER_RATIO = 0.85
# Text turned by less than this many degrees counts as unturned.
_TILT = 5.0
# Arabic page numbers, or well-formed lower Roman ones (front matter: "xiv").
_NUMBER = r"(?:\d{1,4}|(?=[ivxlc])c{0,3}(?:x[cl]|l?x{0,3})(?:i[xv]|v?i{0,3}))"
_PAGE_WORD = (
    r"(?:page|p\.|pg\.|seite|s\.|página|pagina|pag\.|strana|str\.|стр\.|страница|sida|side)"
)
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
        angle: How far the text is turned from horizontal, in degrees (0 to 360).
        note_mark: Whether the line began with a superscript note marker (now removed).
    """

    text: str
    x0: float
    x1: float
    y0: float
    y1: float
    size: float
    angle: float = 0.0
    note_mark: bool = False

    @property
    def upright(self) -> bool:
        """Whether the text runs horizontally, left to right."""
        return self.angle < _TILT or self.angle > 360 - _TILT

    @property
    def diagonal(self) -> bool:
        """Whether the text is turned by other than a right angle (a watermark)."""
        return min(self.angle % 90, 90 - self.angle % 90) >= _TILT


@dataclasses.dataclass(frozen=True, slots=True)
class Page:
    """One page's lines in PDFium's order, and where the page's edges are (its box)."""

    bottom: float
    top: float
    lines: tuple[Line, ...]


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
    zone = _MARGIN_ZONE * (page.top - page.bottom)
    if top:
        return line.y0 >= page.top - zone
    return line.y1 <= page.bottom + zone


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


def margin_stamps(page: Page, p: int, found: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Turned lines outside the body's width (margin stamps: arXiv's identifier), and
    diagonal ones anywhere (watermarks: "DRAFT", "CONFIDENTIAL")."""
    upright = [line for i, line in enumerate(page.lines) if line.upright and (p, i) not in found]
    if not upright:
        return set()
    left = min(line.x0 for line in upright)
    right = max(line.x1 for line in upright)
    return {
        (p, i)
        for i, line in enumerate(page.lines)
        if line.diagonal or (not line.upright and (line.x1 <= left + 1 or line.x0 >= right - 1))
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
        band = [line for line in lines if side(line) != "S" and floor < line.y1 <= ceiling]
        for column in ("L", "R"):
            ordered += sorted((x for x in band if side(x) == column), key=lambda x: -x.y1)
        if floor_line is not None:
            ordered.append(floor_line)
            ceiling = floor_line.y1 - 0.01
    return ordered


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
    for index, found in enumerate(lines):
        line = dataclasses.replace(found, note_mark=True) if mark_next else found
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
            before is not None
            and line.size < _MARKER_RATIO * before.size
            and _overlap(line, before)
        ):
            kept.append(line)
    return kept
