"""Hand-written PDFs for the PDF reader's tests: exactly the content a test needs.

Text is drawn with the standard Courier font (not embedded, StandardEncoding; every
glyph is 0.6 em wide, so :func:`end` says where a run ends), one ``Tj`` per
:class:`Text`, in the order given: so a test decides the content stream's order,
positions, sizes and rotation. Strings are byte strings in StandardEncoding
(ASCII letters are themselves; ``\\xcf`` is a caron, ``\\xc2`` an acute accent, ``\\xf5`` a
dotless i).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Sequence

__all__ = ["Text", "bomb_pdf", "end", "make_pdf"]


@dataclasses.dataclass(frozen=True, slots=True)
class Text:
    """One run of text at a baseline position (PDF points, from the bottom left)."""

    x: float
    y: float
    text: bytes
    size: float = 10.0
    angle: int = 0  # degrees: 0, 45 or 90


def end(x: float, text: bytes, size: float = 10.0) -> float:
    """Where a run of Courier text starting at ``x`` ends (its advance)."""
    return x + 0.6 * size * len(text)


def _escape(text: bytes) -> bytes:
    return text.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def _content(items: Sequence[Text]) -> bytes:
    parts = []
    for item in items:
        matrix = {0: b"1 0 0 1", 45: b"0.7071 0.7071 -0.7071 0.7071", 90: b"0 1 -1 0"}[item.angle]
        parts.append(
            b"BT /F1 %.2f Tf %s %.2f %.2f Tm (%s) Tj ET"
            % (item.size, matrix, item.x, item.y, _escape(item.text))
        )
    if not items:
        parts.append(b"0 0 m 100 100 l S")  # a drawing, no text
    return b"\n".join(parts)


def _assemble(objects: list[bytes], trailer_extra: bytes = b"") -> bytes:
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        trailer_extra,
        xref,
    )
    return bytes(out)


def make_pdf(
    pages: Sequence[Sequence[Text]],
    *,
    title: str | None = None,
    size: tuple[float, float] = (612, 792),
    password_protected: bool = False,
) -> bytes:
    """A PDF with one page per item of ``pages``.

    Args:
        pages: The text runs of each page (an empty page gets a line drawing instead).
        title: The Info dictionary's title, if any.
        size: The page size in points.
        password_protected: Add a standard security handler whose user password is not
            the empty one (the content itself stays unencrypted: a reader must refuse
            before it gets there).
    """
    count = len(pages)
    # Objects: 1 catalog, 2 pages, 3 font, then page i at 4 + 2i, its content at 5 + 2i,
    # then the Info and Encrypt dictionaries.
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, count),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>",
    ]
    for i, items in enumerate(pages):
        stream = _content(items)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %.0f %.0f] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>"
            % (size[0], size[1], 5 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    trailer = b""
    if title is not None:
        objects.append(b"<< /Title (%s) >>" % _escape(title.encode("latin-1")))
        trailer += b"/Info %d 0 R " % len(objects)
    if password_protected:
        objects.append(
            b"<< /Filter /Standard /V 1 /R 2 /Length 40 /P -4 "
            b"/O <" + b"ab" * 32 + b"> /U <" + b"cd" * 32 + b"> >>"
        )
        trailer += b"/Encrypt %d 0 R /ID [<%s> <%s>] " % (len(objects), b"01" * 16, b"01" * 16)
    return _assemble(objects, trailer)


def bomb_pdf(inflated: int) -> bytes:
    """A one-page PDF whose content stream is one text line, then ``inflated`` bytes of
    blanks, Flate-compressed (a decompression bomb of about ``inflated / 1000`` bytes)."""
    compressor = zlib.compressobj(9)
    parts = [compressor.compress(b"BT /F1 12 Tf 72 700 Td (Only this line is text.) Tj ET\n")]
    chunk = b" " * (1 << 20)
    for _ in range(inflated >> 20):
        parts.append(compressor.compress(chunk))
    parts.append(compressor.flush())
    stream = b"".join(parts)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream),
    ]
    return _assemble(objects)
