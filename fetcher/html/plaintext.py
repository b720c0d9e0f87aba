"""Plain text: normalising what the model reads, and renderings that need no inscriptis.

:func:`normalize_text` is the last step of every reading (HTML, plain text, markdown).
:func:`plain_text` renders a tree without recursion, for pages inscriptis cannot take
(deep nesting) or that pruning emptied; :func:`strip_tags` reads markup no parser would
accept. Both fallbacks are linear in the size of their input. Pure functions.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = ["collapse", "normalize_text", "plain_text", "strip_tags"]

_BLANK_RUN = re.compile(r"\n{3,}")
_SPACE_RUN = re.compile(r"[ \t]{2,}")
_CODE_TAGS = ("script", "style")


def _char_map() -> dict[int, str | None]:
    table: dict[int, str | None] = {}
    for code in [*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F, *range(0x80, 0xA0)]:
        table[code] = None  # control characters: noise to a reader, and to a terminal
    for code in [0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000]:
        table[code] = " "  # NBSP and the other fixed-width spaces
    for code in (0x00AD, 0x200B, 0x2060, 0xFEFF):
        table[code] = None  # soft hyphen, zero-width space, word joiner, BOM
    table[0x2028] = "\n"
    table[0x2029] = "\n"
    return table


_CHARS = _char_map()
# str.translate walks every character in Python-object terms; a regex finds the few
# special ones several times faster, and only those are looked up.
_SPECIAL = re.compile("[" + "".join(re.escape(chr(code)) for code in sorted(_CHARS)) + "]")


def _replace_special(match: re.Match[str]) -> str:
    return _CHARS[ord(match.group())] or ""


# Elements that start a new line in the plain-text fallback.
_BLOCK_TAGS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "br",
        "dd",
        "details",
        "dialog",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tr",
        "td",
        "th",
        "ul",
    ]
)


def normalize_text(text: str) -> str:
    """Normalise rendered text for the model.

    Line endings become LF; NBSP and other fixed-width spaces become spaces; zero-width
    characters, soft hyphens and control characters are removed; the text is put in NFC;
    trailing blanks are stripped from each line; runs of blank lines become one blank line;
    leading and trailing blank lines go.

    Args:
        text: The text to normalise.

    Returns:
        The normalised text.
    """
    text = _SPECIAL.sub(_replace_special, text.replace("\r\n", "\n").replace("\r", "\n"))
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _BLANK_RUN.sub("\n\n", text).strip("\n")


def _without_code(markup: str) -> str:
    """Remove ``<script>`` and ``<style>`` bodies in one linear pass (no regex backtracking).

    The next opening of each tag is remembered and searched again only once the pass has
    gone past it: searching both tags afresh at every step scanned the rest of the page
    for the tag that never came, quadratic on a page of 100,000 ``<script>`` elements
    (tested by ``tests/fetcher/html/test_hostile_pages.py``).
    """
    lowered = markup.lower()
    pieces: list[str] = []
    position = 0
    upcoming = {tag: lowered.find(f"<{tag}") for tag in _CODE_TAGS}
    while True:
        for tag, at in upcoming.items():
            if 0 <= at < position:
                upcoming[tag] = lowered.find(f"<{tag}", position)
        found = [(at, tag) for tag, at in upcoming.items() if at >= 0]
        if not found:
            break
        start, tag = min(found)
        close = lowered.find(f"</{tag}", start)
        end = lowered.find(">", close + 1) if close >= 0 else -1
        pieces.append(markup[position:start])
        if end < 0:
            return "".join(pieces)
        position = end + 1
    pieces.append(markup[position:])
    return "".join(pieces)


def strip_tags(markup: str) -> str:
    """Text of markup no parser could use: script and style bodies and tags removed."""
    # Split at "<" and drop each piece up to its ">": linear, where the regex <[^>]*>
    # takes quadratic time on a body full of "<" without ">".
    pieces = _without_code(markup).split("<")
    kept = [pieces[0]]
    for piece in pieces[1:]:
        close = piece.find(">")
        kept.append(piece[close + 1 :] if close >= 0 else "<" + piece)
    text = " ".join(kept)
    lines = (" ".join(line.split()) for line in normalize_text(text).split("\n"))
    return normalize_text("\n".join(lines))


def collapse(text: str) -> str:
    """Normalise text and put it on one line, whitespace runs as single spaces."""
    return " ".join(normalize_text(text).split())


def plain_text(root: HtmlElement) -> str:
    """Render a tree as plain text without inscriptis: the fallback for hard pages.

    It walks the tree without recursion (so any depth works), starts a line at block
    elements and collapses runs of spaces.

    Args:
        root: A document root or any element.

    Returns:
        The normalised text.
    """
    body = root.find("body")
    start = body if body is not None else root
    parts: list[str] = []
    # Imported here: the PDF worker process uses this module's normalisation and would
    # otherwise load lxml for nothing, on every document it reads.
    from lxml import etree  # noqa: PLC0415

    for event, element in etree.iterwalk(start, events=("start", "end")):
        tag = element.tag if isinstance(element.tag, str) else None
        if event == "start":
            if tag in _BLOCK_TAGS:
                parts.append("\n")
            if tag is not None and element.text:
                parts.append(element.text)
        else:
            if tag in _BLOCK_TAGS:
                parts.append("\n")
            if element.tail and element is not start:
                parts.append(element.tail)
    lines = (
        _SPACE_RUN.sub(" ", line).strip() for line in normalize_text("".join(parts)).split("\n")
    )
    return normalize_text("\n".join(lines))
