"""PDF bytes to title and text, with PDFium (pypdfium2).

Run this only inside the PDF worker process (:mod:`fetcher.pdf.worker`): PDFium is native
code reading hostile input, and it aborts its whole process when an allocation fails.

Measured on ``shared/corpus/pdf`` (``bench/pdf.py``), PDFium reads these producers in the
best order of the libraries tried and the fastest; what it gets wrong is fixed here and in
:mod:`fetcher.pdf.layout` / :mod:`fetcher.pdf.words`:

- lines come from PDFium's text page (its order is the content stream's, which producers
  write column by column); for each line a few characters are asked for their box and
  font size, enough for the layout to tell headings, small print, margins and columns;
- PDFium replaces every hyphen at a line end by U+FFFE and drops the line break after it:
  the line is split there and ends in ``-``, for :mod:`fetcher.pdf.words` to decide;
- superscript note markers (``word¹``) are removed, by size and position;
- accents TeX draws as a separate glyph over a letter (OT1 fonts, and letters T1 virtual
  fonts lack, as in Czech) come out loose and often displaced in PDFium's order: each is
  put back on the letter under it, by position, and the gaps PDFium saw around it closed.

:func:`read_pdf` never raises for anything in the file: it returns a :class:`PdfText` or a
:class:`PdfFailure`.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import re
import unicodedata

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from fetcher.html.plaintext import collapse, normalize_text
from fetcher.pdf.layout import lay_out
from fetcher.pdf.page import Line, Page, attach_markers
from fetcher.pdf.result import PdfFailure, PdfProblem, PdfResult, PdfText
from fetcher.pdf.words import BELOW, COMBINING, DOTLESS

__all__ = ["read_pdf"]

_LINE_END = re.compile(r"\r\n|\n|\r|\ufffe")
# Digits right after a letter or closing punctuation: a candidate note marker.
_MARKER_RUN = re.compile(r"[0-9]+|[*†‡]")
_CLOSING = frozenset(".,;:!?)]”’\"'")
_OPENING = frozenset('"“‘(')
_FILE_NAME = re.compile(r"\.(?:pdf|docx?|odt|rtf|tex|dvi|ps|indd|pptx?|xlsx?|html?)$", re.I)
_OFFICE_PREFIX = re.compile(r"^(?:Microsoft (?:Word|PowerPoint|Excel) - )", re.I)
# Titles office programs fill in by themselves.
_UNTITLED = re.compile(
    r"(?:untitled|title|document|presentation|powerpoint presentation|slide|book|sheet)"
    r"[\s_-]*\d*",
    re.I,
)
_TITLE_LIMIT = 300
_ACCENT = re.compile("[" + re.escape("".join(COMBINING)) + "]")
_INK = re.compile(r"\S")
# Below this share of the body size a digit is a superscript (measured: 0.58-0.7).
_SUPERSCRIPT_RATIO = 0.85
# Glyphs whose directions differ by this many degrees belong to different lines.
_TURN = 5.0
_PDF_HEADER = b"%PDF-"


@dataclasses.dataclass(frozen=True, slots=True)
class _Box:
    left: float
    bottom: float
    right: float
    top: float


class _TextPage:
    """One page's PDFium text page: its text and, on demand, boxes and sizes by text index."""

    def __init__(self, textpage: pdfium.PdfTextPage) -> None:
        self._page = textpage.raw  # the handle itself: each call skips a property lookup
        self.text: str = textpage.get_text_range()
        self._rect = pdfium_c.FS_RECTF()
        self._left, self._right = ctypes.c_double(), ctypes.c_double()
        self._bottom, self._top = ctypes.c_double(), ctypes.c_double()
        # Text and character indexes differ only where PDFium left characters out of the
        # text or added some; on most pages they are the same, and one check says so.
        count = int(pdfium_c.FPDFText_CountChars(self._page))
        self._same = len(self.text) == count and all(
            pdfium_c.FPDFText_GetCharIndexFromTextIndex(self._page, i) == i
            for i in {0, count // 2, count - 1}
            if i >= 0
        )

    def _char(self, text_index: int) -> int:
        if self._same:
            return text_index
        return int(pdfium_c.FPDFText_GetCharIndexFromTextIndex(self._page, text_index))

    def loose(self, text_index: int) -> _Box | None:
        """The box the font's ascent and descent give a character (line-like)."""
        char = self._char(text_index)
        if char < 0 or not pdfium_c.FPDFText_GetLooseCharBox(self._page, char, self._rect):
            return None
        rect = self._rect
        return _Box(rect.left, rect.bottom, rect.right, rect.top)

    def tight(self, text_index: int) -> _Box | None:
        """The glyph's own box (where the ink is)."""
        char = self._char(text_index)
        if char < 0 or not pdfium_c.FPDFText_GetCharBox(
            self._page, char, self._left, self._right, self._bottom, self._top
        ):
            return None
        return _Box(self._left.value, self._bottom.value, self._right.value, self._top.value)

    def size(self, text_index: int) -> float:
        char = self._char(text_index)
        return float(pdfium_c.FPDFText_GetFontSize(self._page, char)) if char >= 0 else 0.0

    def angle(self, text_index: int) -> float:
        char = self._char(text_index)
        return float(pdfium_c.FPDFText_GetCharAngle(self._page, char)) if char >= 0 else 0.0


def _segments(text: str) -> list[tuple[int, int, bool]]:
    """Line ranges ``[start, end)`` of a text page, and whether each ended in U+FFFE."""
    segments = []
    start = 0
    for match in _LINE_END.finditer(text):
        if match.group() == "\ufffe":
            segments.append((start, match.start(), True))
        else:
            segments.append((start, match.start(), False))
        start = match.end()
    segments.append((start, len(text), False))
    return segments


@dataclasses.dataclass(frozen=True, slots=True)
class _Marker:
    """A run that may be a note marker: where it is, what to remove, what it is set against.

    Attributes:
        mark: Text index of the marker's first character.
        first: Start of the span to remove (with the space before it, if any).
        last: End of that span.
        reference: Text index of a character of the text the marker belongs to.
        leading: Whether the marker starts its line (a footnote's own number).
    """

    mark: int
    first: int
    last: int
    reference: int
    leading: bool


def _markers(text: str) -> list[_Marker]:
    """Digit (or ``*†‡``) runs of one to three characters placed like note markers: right
    after a word or punctuation (``word1``, ``word.1``, ``word 1``), or starting a line
    before its text (``1Originally``). One pass over the page: a simple character class
    scans far faster than a pattern with look-behind on every line."""
    found = []
    size = len(text)
    for match in _MARKER_RUN.finditer(text):
        start, end = match.start(), match.end()
        if end - start > 3:
            continue
        after = text[end] if end < size else " "
        at_line_start = start == 0 or text[start - 1] in "\n\ufffe"
        if at_line_start:
            if after.isalpha() or after in _OPENING:
                found.append(_Marker(start, start, end, end, leading=True))
            continue
        if after.isalnum() or after == "_":
            continue
        first = start - 1 if text[start - 1] == " " and start >= 2 else start
        before = text[first - 1]
        if before.isalpha() or before in _CLOSING:
            found.append(_Marker(start, first, end, first - 1, leading=False))
    return found


def _superscripts(page: _TextPage, markers: list[_Marker]) -> tuple[list[int], bool]:
    """Text indexes of the note markers among a line's candidates (smaller than the text
    they follow and raised above its baseline), and whether one starts the line."""
    found: list[int] = []
    leading = False
    for marker in markers:
        reference = page.size(marker.reference)
        size = page.size(marker.mark)
        if not reference or not size or size >= _SUPERSCRIPT_RATIO * reference:
            continue
        reference_box = page.loose(marker.reference)
        marker_box = page.loose(marker.mark)
        if reference_box is None or marker_box is None:
            continue
        if marker_box.bottom < reference_box.bottom + 0.1 * reference:
            continue  # a subscript (CO2), or a small digit on the baseline
        found += range(marker.first, marker.last)
        leading = leading or marker.leading
    return found, leading


def _accent_fixes(page: _TextPage, start: int, end: int, size: float) -> dict[int, str]:
    """Replacements (text index → new text, ``""`` to delete) that put loose accents back."""
    text = page.text
    fixes: dict[int, str] = {}
    if not _ACCENT.search(text, start, end):
        return fixes
    accents = [i for i in range(start, end) if text[i] in COMBINING]
    letters = [(i, page.tight(i)) for i in range(start, end) if text[i].isalpha()]
    for index in accents:
        mark = text[index]
        box = page.tight(index)
        if box is None:
            continue
        middle = (box.left + box.right) / 2
        best: tuple[float, int] | None = None
        for letter, letter_box in letters:
            if letter_box is None or letter in fixes or letter == index:
                continue
            if text[letter] in COMBINING and letter in accents:
                continue
            if not letter_box.left - 0.08 * size <= middle <= letter_box.right + 0.08 * size:
                continue
            height = letter_box.top - letter_box.bottom
            if mark in BELOW:
                placed = (
                    letter_box.bottom - 0.6 * size <= box.top <= letter_box.bottom + 0.5 * height
                )
            elif mark in "^~`":
                placed = letter_box.top - 0.1 * size <= box.bottom <= letter_box.top + 0.6 * size
            else:
                placed = (
                    letter_box.bottom + 0.5 * height <= box.bottom <= letter_box.top + 0.6 * size
                )
            if placed:
                distance = abs(middle - (letter_box.left + letter_box.right) / 2)
                if best is None or distance < best[0]:
                    best = (distance, letter)
        if best is None:
            continue
        letter = best[1]
        base = DOTLESS.get(text[letter], text[letter])
        fixes[letter] = unicodedata.normalize("NFC", base + COMBINING[mark])
        fixes[index] = ""
    # Close the gaps PDFium saw around a displaced accent: a space between two glyphs
    # that touch is not a word space.
    for index in [i for i, new in fixes.items() if new == ""]:
        for step in (-1, 1):
            at = index + step
            while start <= at < end and text[at] == " " and at not in fixes:
                left = _neighbour(text, fixes, at, -1, start, end)
                right = _neighbour(text, fixes, at, 1, start, end)
                if left is None or right is None:
                    fixes[at] = ""
                else:
                    left_box, right_box = page.tight(left), page.tight(right)
                    if (
                        left_box is not None
                        and right_box is not None
                        and abs(right_box.left - left_box.right) < 0.15 * size
                    ):
                        fixes[at] = ""
                at += step
    return fixes


def _neighbour(
    text: str, fixes: dict[int, str], at: int, step: int, start: int, end: int
) -> int | None:
    at += step
    while start <= at < end:
        if not text[at].isspace() and fixes.get(at) != "":
            return at
        at += step
    return None


def _turn_at(page: _TextPage, first: int, last: int) -> int | None:
    """Where a line's glyphs change direction (a watermark PDFium ran into a line of text),
    or None when its first and last glyphs point the same way."""

    def angle(index: int) -> float:
        return math.degrees(page.angle(index)) % 360

    start_angle = angle(first)
    if abs(angle(last) - start_angle) < _TURN:
        return None
    low, high = first, last  # low points like the first glyph, high does not
    while high - low > 1:
        middle = (low + high) // 2
        if abs(angle(middle) - start_angle) < _TURN:
            low = middle
        else:
            high = middle
    return high


def _lines(
    page: _TextPage, start: int, end: int, hyphen: bool, markers: list[_Marker]
) -> list[Line]:
    """The line (or, where glyphs change direction, the lines) in ``[start, end)``."""
    text = page.text
    first_ink = _INK.search(text, start, end)
    if first_ink is None:
        return []
    last = end - 1
    while last > first_ink.start() and text[last].isspace():
        last -= 1
    first_box, last_box = page.loose(first_ink.start()), page.loose(last)
    if (
        first_box is not None
        and last_box is not None
        and abs(last_box.bottom - first_box.bottom) > 0.5 * page.size(last)
    ):
        # The text climbs or falls: turned (a margin stamp, a watermark), or a turned
        # run PDFium appended to a line. Only then are angles asked for.
        turn = _turn_at(page, first_ink.start(), last)
        if turn is not None:
            before = [m for m in markers if m.mark < turn]
            after = [m for m in markers if m.mark >= turn]
            return _lines(page, start, turn, False, before) + _lines(page, turn, end, hyphen, after)
    line = _line(page, start, end, hyphen, markers)
    return [line] if line is not None else []


def _line(
    page: _TextPage, start: int, end: int, hyphen: bool, markers: list[_Marker]
) -> Line | None:
    text = page.text
    first_ink = _INK.search(text, start, end)
    if first_ink is None:
        return None
    first = first_ink.start()
    last = end - 1
    while last > first and text[last].isspace():
        last -= 1
    middle_ink = _INK.search(text, (first + last) // 2, end)
    middle = middle_ink.start() if middle_ink else first
    boxes = [box for box in (page.loose(i) for i in sorted({first, middle, last})) if box]
    if not boxes:
        return None
    size = page.size(middle)
    angle = 0.0
    if len(boxes) > 1 and abs(boxes[-1].bottom - boxes[0].bottom) > 0.5 * size:
        # The text climbs or falls: turned (a margin stamp, a watermark), or a line PDFium
        # made of scattered glyphs. Only then is the angle asked for.
        angle = math.degrees(page.angle(middle)) % 360
    removed, leading = _superscripts(page, markers)
    fixes = _accent_fixes(page, start, end, size or 10.0)
    for index in removed:
        fixes[index] = ""
    if fixes:
        line_text = "".join(fixes.get(i, text[i]) for i in range(start, end)).strip()
    else:
        line_text = text[start:end].strip()
    if hyphen:
        line_text += "-"
    if not line_text:
        return None
    bottoms = sorted(box.bottom for box in boxes)
    tops = sorted(box.top for box in boxes)
    return Line(
        text=line_text,
        x0=min(box.left for box in boxes),
        x1=max(box.right for box in boxes),
        y0=bottoms[len(bottoms) // 2],
        y1=tops[len(tops) // 2],
        size=size,
        angle=angle,
        note_mark=leading,
    )


def _page_lines(textpage: pdfium.PdfTextPage) -> tuple[Line, ...]:
    page = _TextPage(textpage)
    markers = _markers(page.text)
    lines = []
    at = 0
    for start, end, hyphen in _segments(page.text):
        mine = []
        while at < len(markers) and markers[at].mark < end:
            if markers[at].mark >= start:
                mine.append(markers[at])
            at += 1
        lines += _lines(page, start, end, hyphen, mine)
    return tuple(attach_markers(lines))


def clean_title(title: str) -> str:
    """A metadata title worth showing, or ``""`` (file names, "Untitled" and the like)."""
    title = collapse(title)
    title = _OFFICE_PREFIX.sub("", title)
    if _FILE_NAME.search(title) or _UNTITLED.fullmatch(title) or len(title) < 3:
        return ""
    return title[:_TITLE_LIMIT]


def _open_failure(data: bytes, error: pdfium.PdfiumError) -> PdfFailure:
    code = error.err_code
    if code in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
        return PdfFailure(PdfProblem.ENCRYPTED, "the PDF needs a password to open")
    if _PDF_HEADER not in data[:1024]:
        return PdfFailure(PdfProblem.DAMAGED, "not a PDF file (no %PDF- header)")
    if b"%%EOF" not in data[-2048:]:
        return PdfFailure(
            PdfProblem.TRUNCATED, f"the file ends early ({len(data)} bytes, no end marker)"
        )
    return PdfFailure(PdfProblem.DAMAGED, f"PDFium cannot open it (error {code})")


def read_pdf(data: bytes, *, char_limit: int | None = None) -> PdfResult:
    """Read a PDF's title and text.

    Args:
        data: The whole PDF file.
        char_limit: Stop after the page that brings the text past this many characters
            (``None``: read every page).

    Returns:
        The title (metadata, else the first heading), the text laid out for reading
        (see :func:`fetcher.pdf.layout.lay_out`) and the page counts; or why there is none:
        a password other than the empty one, a truncated or damaged file, no text layer.
    """
    try:
        document = pdfium.PdfDocument(data)  # PDFium tries the empty password itself
    except pdfium.PdfiumError as exc:
        return _open_failure(data, exc)
    try:
        count = len(document)
        pages: list[Page] = []
        chars = 0
        for index in range(count):
            page = document[index]
            try:
                textpage = page.get_textpage()
                try:
                    lines = _page_lines(textpage)
                finally:
                    textpage.close()
                # The page's box in the coordinates PDFium gives the text in.
                _, bottom, _, top = page.get_bbox()
            finally:
                page.close()
            pages.append(Page(bottom, top, lines))
            chars += sum(len(line.text) for line in lines)
            if char_limit is not None and chars >= char_limit:
                break
        if not any(line.text.strip() for page in pages for line in page.lines):
            return PdfFailure(
                PdfProblem.NO_TEXT,
                f"no text layer on {count} page{'s' if count != 1 else ''} (scanned or images)",
            )
        metadata = document.get_metadata_dict(skip_empty=True)
        try:
            title, text = lay_out(pages, clean_title(metadata.get("Title", "")))
        except Exception:  # a layout bug on an odd page must not lose the text
            title = clean_title(metadata.get("Title", ""))
            text = "\n".join(line.text for page in pages for line in page.lines)
        return PdfText(
            title=collapse(title)[:_TITLE_LIMIT],
            text=normalize_text(text),
            pages=count,
            pages_read=len(pages),
        )
    except pdfium.PdfiumError as exc:
        return PdfFailure(PdfProblem.DAMAGED, f"PDFium failed while reading: {exc}")
    finally:
        document.close()
