"""Turn a response body into text: pick the character encoding, then decode (SPEC 7, step 7).

The order follows the HTML standard's encoding sniffing, which is what a browser would show:

1. a byte order mark (it wins even over the HTTP header, as in browsers: a BOM is an
   unambiguous statement about the bytes that follow);
2. the ``charset`` parameter of the HTTP ``Content-Type`` header;
3. for HTML only, ``<meta charset>`` or ``<meta http-equiv="Content-Type">`` found by a prescan
   of the first 1,024 bytes;
4. UTF-8, with undecodable bytes replaced.

A name that is unknown, or names a codec that is not a real character set (``base64``,
``rot13``, ``punycode``, ``unicode_escape`` ...), is ignored and the next step is tried.
Decoding never raises. Pure functions, no I/O.
"""

from __future__ import annotations

import codecs
import re

__all__ = ["decode_body", "find_encoding", "lookup_encoding"]

_PRESCAN_BYTES = 1024
_MAX_LABEL = 40

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
)

# WHATWG Encoding Standard: labels browsers decode with a wider codec than the name says.
# Pages labelled latin-1 are in practice windows-1252 (curly quotes in 0x80-0x9f), and so on.
_WHATWG_SUPERSETS = {
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "big5": "big5hkscs",
}

# Codecs Python knows that are not character sets a web page can be in. Some are slow on
# hostile input (punycode, idna), some interpret escapes (unicode_escape), utf-7 is banned
# by the HTML standard, and ``undefined`` always raises.
_REFUSED = frozenset(
    {
        "idna",
        "punycode",
        "unicode-escape",
        "raw-unicode-escape",
        "utf-7",
        "undefined",
        "charmap",
        "mbcs",
        "oem",
    }
)

_META = re.compile(rb"<meta[\s/]([^>]*)>", re.IGNORECASE)
_COMMENT = re.compile(rb"<!--.*?(?:-->|\Z)", re.DOTALL)
_ATTR = re.compile(
    rb"""([a-z_:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""",
    re.IGNORECASE,
)
_CHARSET_IN_CONTENT = re.compile(rb"""charset\s*=\s*["']?([^\s"';]+)""", re.IGNORECASE)


def lookup_encoding(label: str | bytes | None) -> str | None:
    """Map an encoding label to a Python codec name we are willing to decode with.

    Args:
        label: A charset name as written by a server or a page, e.g. ``"UTF-8"``,
            ``"latin1"``, ``b"Shift_JIS"``.

    Returns:
        The codec name (browser-compatible superset where the web uses one), or ``None``
        when the label is empty, unknown, too long, or not a real character set.
    """
    if label is None:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "replace")
    label = label.strip().strip("\"'").strip()
    if not label or len(label) > _MAX_LABEL or not label.isascii():
        return None
    try:
        info = codecs.lookup(label)
    except (LookupError, ValueError, TypeError):
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in _REFUSED:
        return None
    return _WHATWG_SUPERSETS.get(info.name, info.name)


def _bom_encoding(body: bytes) -> tuple[str, int] | None:
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name, len(bom)
    return None


def _prescan(head: bytes) -> str | None:
    """Find a charset declared by a ``<meta>`` element in the first bytes of an HTML page.

    A simplified form of the HTML standard's prescan: comments are skipped, and the first
    ``<meta>`` that declares a usable charset (``charset=...``, or ``http-equiv`` with a
    ``content`` naming one) wins.
    """
    head = _COMMENT.sub(b"", head)
    for meta in _META.finditer(head):
        attrs: dict[bytes, bytes] = {}
        for m in _ATTR.finditer(meta.group(1)):
            name = m.group(1).lower()
            if name not in attrs:
                attrs[name] = m.group(2) or m.group(3) or m.group(4) or b""
        label: bytes | None = attrs.get(b"charset")
        if label is None and attrs.get(b"http-equiv", b"").lower() == b"content-type":
            found = _CHARSET_IN_CONTENT.search(attrs.get(b"content", b""))
            label = found.group(1) if found else None
        name = lookup_encoding(label)
        if name is not None:
            # The prescan read these bytes as ASCII, so the page cannot really be UTF-16;
            # the standard says to take UTF-8 then.
            return "utf-8" if name.startswith(("utf-16", "utf-32")) else name
    return None


def find_encoding(body: bytes, header_charset: str | None, *, sniff_html: bool) -> tuple[str, int]:
    """Choose the encoding of a body.

    Args:
        body: The raw response body.
        header_charset: The ``charset`` parameter of the HTTP header, or ``None``.
        sniff_html: Whether to look for ``<meta>`` declarations (HTML only).

    Returns:
        The codec name and the number of leading bytes (a BOM) to skip.
    """
    bom = _bom_encoding(body)
    if bom is not None:
        return bom
    name = lookup_encoding(header_charset)
    if name is not None:
        return name, 0
    if sniff_html:
        name = _prescan(body[:_PRESCAN_BYTES])
        if name is not None:
            return name, 0
    return "utf-8", 0


def decode_body(body: bytes, header_charset: str | None, *, sniff_html: bool) -> str:
    """Decode a body to text following the order in the module docstring; never raises.

    Args:
        body: The raw response body.
        header_charset: The ``charset`` parameter of the HTTP header, or ``None``.
        sniff_html: Whether to look for ``<meta>`` declarations (HTML only).

    Returns:
        The decoded text, with undecodable bytes replaced by U+FFFD.
    """
    name, skip = find_encoding(body, header_charset, sniff_html=sniff_html)
    try:
        return body[skip:].decode(name, "replace")
    except (LookupError, UnicodeError, ValueError):
        # A codec that misbehaves on this input: UTF-8 with replacement always works.
        return body[skip:].decode("utf-8", "replace")
