"""The page reader: a downloaded body becomes a title, a text and same-site links (SPEC 7, 7-9).

The HTML pipeline is "pruned+" from ``shared/notes/extraction.md``, measured to put the most
article text into the first 12,000 characters:

1. decode (:mod:`fetcher.charset`) and parse once with lxml;
2. take the title, and the links from the unpruned tree (:mod:`fetcher.links`);
3. drop page chrome on the tree (:mod:`fetcher.prune`);
4. render with inscriptis and the reader CSS profile (:mod:`fetcher.render`);
5. normalise: NBSP to space, zero-width characters and controls removed, NFC, trailing
   blanks stripped, blank runs collapsed;
6. cut to :data:`PAGE_TEXT_LIMIT` at a line (else word) boundary.

A page that breaks the renderer (very deep nesting) or renders to almost nothing although it
holds text gets a plain-text rendering instead, so a page with text never reads as empty.
``text/plain`` and ``text/markdown`` bodies are decoded the same way and passed through.
Pure functions: no I/O, no clock, and :func:`read_document` never raises.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata

from lxml import etree
from lxml.html import HtmlElement, HTMLParser, document_fromstring

from fetcher.charset import decode_body
from fetcher.links import page_links
from fetcher.prune import drop_junk, element_count, prune_chrome, text_length, trim_to_budget
from fetcher.render import render, squeeze_layout

__all__ = [
    "PAGE_TEXT_LIMIT",
    "REPORT_TEXT_LIMIT",
    "Document",
    "cut",
    "normalize_text",
    "plain_text",
    "read_document",
]

PAGE_TEXT_LIMIT = 12_000
REPORT_TEXT_LIMIT = 24_000

_TITLE_LIMIT = 300
# A render with fewer non-blank characters than this, from a page with at least
# _MUCH_TEXT characters of text, is a failure (shared/notes/extraction.md, safety nets).
_TOO_LITTLE = 200
_MUCH_TEXT = 2_000

# Text beyond this many non-blank characters cannot reach the first PAGE_TEXT_LIMIT
# characters of the render; twice the limit leaves room for tables, whose cells render
# side by side rather than in document order.
_RENDER_CHARS = 2 * PAGE_TEXT_LIMIT
# The largest page of the corpus has under 8,000 elements once pruned.
_RENDER_ELEMENTS = 50_000

_HEAD_MARGIN = 1_000

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})

_XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*\?>")
_CODE_TAGS = ("script", "style")
_BLANK_RUN = re.compile(r"\n{3,}")
_SPACE_RUN = re.compile(r"[ \t]{2,}")
_ATX_HEADING = re.compile(r" {0,3}#{1,6}[ \t]+")
_SETEXT_H1 = re.compile(r" {0,3}=+[ \t]*")
_FENCE = re.compile(r" {0,3}(?:```|~~~)")


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


@dataclasses.dataclass(frozen=True, slots=True)
class Document:
    """What the reader made of one page.

    Attributes:
        title: The page title, whitespace collapsed; may be empty.
        text: The readable text, already cut to :data:`PAGE_TEXT_LIMIT`.
        links: Absolute https same-site links, deduplicated, best first, at most 24.
    """

    title: str
    text: str
    links: tuple[str, ...]


def cut(text: str, limit: int) -> str:
    """Shorten text to at most ``limit`` characters at a clean boundary.

    The cut falls at the last line break within the last tenth of the limit, else at the
    last space there, else exactly at the limit (text without spaces, such as Chinese).

    Args:
        text: The text to shorten.
        limit: The most characters the result may have.

    Returns:
        ``text`` itself when it fits; otherwise a prefix of it, trailing blanks stripped.
    """
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    head = text[: limit + 1]  # a break right after the limit still allows a clean cut
    floor = limit - max(limit // 10, 40)
    for separator in ("\n", " "):
        at = head.rfind(separator)
        if at > floor and at > 0:
            return head[:at].rstrip()
    return text[:limit].rstrip()


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


def _tidy(text: str) -> str:
    return squeeze_layout(normalize_text(text))


def _tidy_head(text: str, limit: int) -> str:
    """Normalise and squeeze enough of a long render to fill ``limit`` characters.

    Both steps only remove characters and look at one line at a time (the fence state
    aside, which runs from the start), so the tidied head of a text is the head of the
    tidied text, except right at its end; the margin keeps that end past the cut.
    """
    size = 2 * limit
    while size < len(text):
        head = _tidy(text[:size])
        if len(head) > limit + _HEAD_MARGIN:
            return head
        size *= 2
    return _tidy(text)


def _without_code(markup: str) -> str:
    """Remove ``<script>`` and ``<style>`` bodies in one linear pass (no regex backtracking)."""
    lowered = markup.lower()
    pieces: list[str] = []
    position = 0
    while True:
        starts = [at for at in (lowered.find(f"<{tag}", position) for tag in _CODE_TAGS) if at >= 0]
        if not starts:
            break
        start = min(starts)
        tag = "script" if lowered.startswith("<script", start) else "style"
        end = lowered.find(">", lowered.find(f"</{tag}", start) + 1)
        pieces.append(markup[position:start])
        if end < 0 or lowered.find(f"</{tag}", start) < 0:
            return "".join(pieces)
        position = end + 1
    pieces.append(markup[position:])
    return "".join(pieces)


def _strip_tags(markup: str) -> str:
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


def _collapse(text: str) -> str:
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


def _title(root: HtmlElement) -> str:
    for path in ("//head/title", "//title[not(ancestor::svg)]", "//h1"):
        for element in root.xpath(path)[:1]:
            title = _collapse(element.text_content())
            if title:
                return cut(title, _TITLE_LIMIT)
    return ""


def _non_space(text: str) -> int:
    return len(text) - sum(text.count(c) for c in " \n\t")


def _too_little(text: str, page_chars: int) -> bool:
    """Whether a render lost the page: nothing from a page with text, or a scrap of a big one.

    Small pages are trusted: their render may rightly be short (a hidden element, a menu).
    """
    shown = _non_space(text)
    if not shown:
        return page_chars > 0
    return shown < _TOO_LITTLE and page_chars >= _MUCH_TEXT


def _parse(markup: str) -> HtmlElement | None:
    # huge_tree: libxml2 otherwise silently drops everything nested deeper than 255
    # elements; bodies are capped at 2 MB upstream, so its other limits do not matter.
    # lxml parses UTF-8 bytes faster than a str, and the explicit encoding overrides any
    # <meta charset> in the page: the text was already decoded by our own rules.
    parser = HTMLParser(encoding="utf-8", huge_tree=True, remove_comments=True, remove_pis=True)
    try:
        root = document_fromstring(markup.encode("utf-8", "replace"), parser=parser)
    except (etree.LxmlError, ValueError):
        return None
    return root if isinstance(root, HtmlElement) else None


def _read_html(markup: str, *, url: str, site: str | None) -> Document:
    markup = _XML_DECLARATION.sub("", markup, count=1).replace("\x00", "\ufffd")
    root = _parse(markup)
    if root is None:
        # Nothing lxml accepts as a document (empty, or only comments): strip tags by hand.
        return Document(
            title="",
            text=cut(_strip_tags(markup), PAGE_TEXT_LIMIT),
            links=(),
        )
    title = _title(root)
    try:
        links = page_links(root, url=url, site=site)
    except (ValueError, RecursionError):
        links = ()
    drop_junk(root)
    body = root.find("body")
    page_chars = text_length(body if body is not None else root)
    prune_chrome(root)
    # Counting elements costs a scan; a body of under 4 characters an element cannot hold
    # too many (the shortest element, <br>, takes 4).
    if page_chars > _RENDER_CHARS or (
        len(markup) > 4 * _RENDER_ELEMENTS and element_count(root) > _RENDER_ELEMENTS
    ):
        trim_to_budget(root, _RENDER_CHARS, _RENDER_ELEMENTS)
    try:
        text = _tidy_head(render(root), PAGE_TEXT_LIMIT)
    except Exception:  # inscriptis on hostile trees: RecursionError, and worse
        text = ""
    if _too_little(text, page_chars):
        candidate = plain_text(root)
        if _too_little(candidate, page_chars):
            # Pruning took the text (a page wrapped in a <header>, say): read it unpruned.
            unpruned = _parse(markup)
            if unpruned is not None:
                drop_junk(unpruned)
                candidate = plain_text(unpruned)
        if len(candidate) > len(text):
            text = candidate
    if not text:
        # libxml2 drops text nested deeper than it goes (2,048 elements): last resort.
        text = _strip_tags(markup)
    return Document(title=title, text=cut(text, PAGE_TEXT_LIMIT), links=links)


def _atx_title(rest: str) -> str:
    """The text of an ATX heading line after its opening hashes, closing hashes removed."""
    title = rest.strip()
    bare = title.rstrip("#")
    if bare != title and (not bare or bare[-1] in " \t"):
        title = bare.strip()
    return title


def _markdown_title(text: str) -> str:
    in_fence = False
    previous = ""
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            heading = _ATX_HEADING.match(line)
            title = _atx_title(line[heading.end() :]) if heading else ""
            if title:
                return cut(_collapse(title), _TITLE_LIMIT)
            if previous.strip() and _SETEXT_H1.fullmatch(line):
                return cut(_collapse(previous), _TITLE_LIMIT)
        previous = line if not in_fence else ""
    return ""


def read_document(
    body: bytes,
    *,
    content_type: str,
    charset: str | None,
    url: str,
    site: str | None = None,
) -> Document:
    """Turn a downloaded body into a :class:`Document`.

    Args:
        body: The response body (decoded from any transfer/content coding, at most 2 MB).
        content_type: The bare media type: ``text/html``, ``text/plain`` or ``text/markdown``.
        charset: The ``charset`` parameter of the HTTP ``Content-Type`` header, or ``None``.
        url: The page's final address, the base for relative links.
        site: The site links must be on (registrable domain); ``None`` means the site of
            ``url``.

    Returns:
        The title, the text cut to :data:`PAGE_TEXT_LIMIT`, and the same-site links (none
        for plain text and markdown). Never raises: on any internal failure the text is the
        decoded body with tags stripped.
    """
    media = content_type.split(";", 1)[0].strip().lower()
    is_html = media in _HTML_TYPES
    try:
        decoded = decode_body(body, charset, sniff_html=is_html)
        if is_html:
            return _read_html(decoded, url=url, site=site)
        text = normalize_text(decoded)
        title = _markdown_title(text) if media in _MARKDOWN_TYPES else ""
        return Document(title=title, text=cut(text, PAGE_TEXT_LIMIT), links=())
    except Exception:  # the reader must never take the crawl down
        text = _strip_tags(body.decode("utf-8", "replace"))
        return Document(title="", text=cut(text, PAGE_TEXT_LIMIT), links=())
